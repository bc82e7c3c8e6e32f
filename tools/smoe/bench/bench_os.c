/*
 * bench_os.c - the modes that leave caching to the operating system, run
 * with the same loop and the same number of threads as the library:
 *   pagecache: buffered pread of each expert into a private buffer;
 *   mmap:      the vault mapped, each expert copied out of the mapping;
 *   direct:    O_DIRECT pread every time, nothing retained.
 * An index vault's experts are read from its source files instead, the
 * ranges the library reads (bench.h, bench_seg).
 *
 * A pool of cfg->workers threads takes the k reads of one (token, layer)
 * from a shared task list; the replay thread waits for all k, simulates
 * compute, and moves on. Each task position has its own 16 KiB-aligned
 * buffer (an engine's per-layer expert buffers). Page-cache hits are read
 * off the kernel with mincore() on a read-only mapping just before each
 * read: all pages resident is a hit, anything less a miss. Where the system
 * cannot say (Windows, tool_os_can_probe) every read counts as a miss and
 * the hit method is "none". --os-advice
 * turns the kernel's read-ahead off (random) or replaces it with a
 * WILLNEED of exactly each expert's bytes before it is read (willneed).
 *
 * Locking: pool.mu guards n_tasks, next, done, stop and the task array;
 * workers sleep on work_cv, the replay thread on done_cv.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "bench.h"
#include "os.h"
#include "fadvise.h"
#include "smoe_tier.h"
#include "tool.h"

#define BUF_ALIGN 16384

typedef struct task {
    const bench_blob *b;
    uint64_t len;  /* bytes of its ranges */
    int hit;
    int err;       /* errno of a failed read, or -1 for a short file */
    uint32_t seg;  /* the range that failed */
} task;

typedef struct pool {
    const bench_env *env;
    bench_mode mode;
    int *fd;                 /* per file; pagecache: buffered; direct: O_DIRECT */
    unsigned char **map;     /* per file; mmap: the data; pagecache: probe only */
    size_t page;
    int willneed;            /* --os-advice willneed */
    unsigned char *bufs[TRACE_MAX_K];
    unsigned char *vecs[TRACE_MAX_K]; /* mincore vectors */

    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    task tasks[TRACE_MAX_K];
    uint32_t n_tasks, next, done;
    int stop;
} pool;

/* Range sg of the map of its file: page-aligned (a mapping's offset is its
 * page's), clipped to the file's end (the last range may be rounded past). */
static unsigned char *map_at(const pool *p, const bench_seg *sg, uint64_t *len)
{
    uint64_t size = p->env->file_sizes[sg->file];
    *len = sg->off >= size ? 0 : sg->off + sg->len > size ? size - sg->off : sg->len;
    return p->map[sg->file] + sg->off;
}

static int resident(pool *p, uint32_t i, const bench_seg *sg)
{
    uint64_t len;
    if (!p->map[sg->file])
        return 0;
    const unsigned char *at = map_at(p, sg, &len);
    return tool_os_resident(at, len, p->vecs[i]);
}

static void do_task(pool *p, uint32_t i)
{
    task *t = &p->tasks[i];
    unsigned char *buf = p->bufs[i];
    const bench_seg *segs = &p->env->segs[t->b->first_seg];
    t->hit = p->mode != BENCH_DIRECT;
    t->err = 0;
    for (uint32_t j = 0; j < t->b->n_seg && t->hit; j++)
        t->hit = resident(p, i, &segs[j]);
    for (uint32_t j = 0; j < t->b->n_seg; j++) {
        const bench_seg *sg = &segs[j];
        uint64_t len = 0;
        unsigned char *at = p->map[sg->file] ? map_at(p, sg, &len) : NULL;
        /* WILLNEED starts the whole expert's read at once, exactly its
         * ranges (after the probe: pages being read already count as
         * cached) */
        if (p->willneed && p->mode == BENCH_MMAP && len)
            tool_os_map_advise(at, len, 1);
        else if (p->willneed && p->mode == BENCH_PAGECACHE)
            tool_advise_willneed(p->fd[sg->file], sg->off, sg->len);
    }
    for (uint32_t j = 0; j < t->b->n_seg; j++) {
        const bench_seg *sg = &segs[j];
        if (p->mode == BENCH_MMAP) {
            uint64_t len;
            const unsigned char *at = map_at(p, sg, &len);
            memcpy(buf + sg->dst, at, (size_t)len);
            continue;
        }
        /* the file may end inside the last range, rounded out past it */
        uint64_t size = p->env->file_sizes[sg->file];
        uint64_t want = sg->off + sg->len > size ? size - sg->off : sg->len;
        if (p->mode == BENCH_DIRECT)
            want = sg->len; /* a direct read stays aligned; the file's end cuts it */
        int err = 0;
        int rc = smoe__io_read_full(&smoe__io_os, p->fd[sg->file], buf + sg->dst, (size_t)want,
                                    sg->off, NULL, &err);
        if (rc == SMOE_ETRUNC && p->mode == BENCH_DIRECT && sg->off + sg->len > size)
            rc = 0;
        if (rc < 0) {
            t->err = rc == SMOE_ETRUNC ? -1 : err;
            t->seg = j;
            return;
        }
    }
}

static void *worker_main(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next >= p->n_tasks)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->stop)
            break;
        uint32_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        do_task(p, i);
        pthread_mutex_lock(&p->mu);
        if (++p->done == p->n_tasks)
            pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int replay(pool *p, bench_clock *c, bench_result *r)
{
    const bench_env *env = p->env;
    const tool_trace *t = &env->trace;
    for (size_t tok = 0; tok < env->n_tokens; tok++) {
        uint64_t wait = 0;
        for (size_t row = t->tok_row[tok]; row < t->tok_row[tok + 1]; row++) {
            uint32_t layer = t->row_layer[row];
            const uint32_t *e = &t->ids[t->row_off[row]];
            uint32_t k = t->row_off[row + 1] - t->row_off[row];
            uint64_t t0 = tool_now_ns();
            pthread_mutex_lock(&p->mu);
            for (uint32_t i = 0; i < k; i++) {
                const bench_blob *b = &env->blobs[(size_t)layer * env->experts + e[i]];
                p->tasks[i].b = b;
                p->tasks[i].len = 0;
                for (uint32_t j = 0; j < b->n_seg; j++)
                    p->tasks[i].len += env->segs[b->first_seg + j].len;
            }
            p->n_tasks = k;
            p->next = 0;
            p->done = 0;
            pthread_cond_broadcast(&p->work_cv);
            while (p->done < k)
                pthread_cond_wait(&p->done_cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            wait += tool_now_ns() - t0;
            for (uint32_t i = 0; i < k; i++) {
                const task *tk = &p->tasks[i];
                if (tk->err) {
                    const bench_seg *sg = &env->segs[tk->b->first_seg + tk->seg];
                    snprintf(r->error, sizeof r->error,
                             "%s: reading layer %u expert %u (offset %llu, %llu bytes): %s",
                             env->files[sg->file], layer, e[i], (unsigned long long)sg->off,
                             (unsigned long long)sg->len,
                             tk->err > 0 ? strerror(tk->err) : "file ends early");
                    return -1;
                }
                r->hits += (uint64_t)tk->hit;
                r->misses += (uint64_t)!tk->hit;
                r->bytes_requested += tk->len;
                if (p->mode == BENCH_DIRECT)
                    r->bytes_read += tk->len;
            }
            r->requests += k;
            bench_spin_us(env->cfg->compute_us);
        }
        c->wait_ns[tok] = wait;
        c->hits = r->hits;
        c->requests = r->requests;
        bench_clock_token(c, tok);
    }
    return 0;
}

/* One file as the mode reads it: a descriptor (pagecache: buffered,
 * direct: O_DIRECT) and, but for direct, a read-only mapping (the data of
 * mmap, the page-cache probe of pagecache). 0, or -1 with r->error. */
static int open_file(pool *p, uint32_t f, bench_result *r)
{
    const bench_cfg *cfg = p->env->cfg;
    const char *path = p->env->files[f];
    if (p->mode != BENCH_MMAP) {
        p->fd[f] = smoe__io_open(&smoe__io_os, path,
                                 SMOE__IO_RDONLY | (p->mode == BENCH_DIRECT ? SMOE__IO_DIRECT : 0));
        if (p->fd[f] < 0) {
            snprintf(r->error, sizeof r->error, "%s: cannot open%s: %s", path,
                     p->mode == BENCH_DIRECT ? " with O_DIRECT" : "", strerror(-p->fd[f]));
            return -1;
        }
        if (p->mode == BENCH_PAGECACHE && cfg->os_advice != BENCH_ADVICE_NORMAL)
            tool_advise_random(p->fd[f]);
    }
    if (p->mode == BENCH_DIRECT || (p->mode == BENCH_PAGECACHE && !tool_os_can_probe()))
        return 0;
    uint64_t len = p->env->file_sizes[f];
    int err;
    void *m = tool_os_map_file(path, len, &err);
    if (!m) {
        snprintf(r->error, sizeof r->error, "%s: cannot map its %llu bytes: %s", path,
                 (unsigned long long)len, strerror(err));
        return -1;
    }
    p->map[f] = m;
    if (p->mode == BENCH_MMAP && cfg->os_advice != BENCH_ADVICE_NORMAL)
        tool_os_map_advise(m, len, 0);
    return 0;
}

static int open_files(pool *p, bench_result *r)
{
    const uint32_t n = p->env->n_files;
    p->fd = malloc(n * sizeof *p->fd);
    p->map = calloc(n, sizeof *p->map);
    if (!p->fd || !p->map) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return -1;
    }
    for (uint32_t f = 0; f < n; f++)
        p->fd[f] = -1;
    for (uint32_t f = 0; f < n; f++)
        if (open_file(p, f, r) < 0)
            return -1;
    return 0;
}

/* A 16 KiB-aligned buffer and a mincore vector per task position. */
static int alloc_buffers(pool *p, bench_result *r)
{
    const bench_env *env = p->env;
    size_t vec_len = (size_t)((env->slot_bytes + p->page - 1) / p->page);
    for (uint32_t i = 0; i < env->max_k; i++) {
        void *b = tool_os_aligned_alloc(BUF_ALIGN, (size_t)env->slot_bytes);
        if (!b) {
            snprintf(r->error, sizeof r->error, "out of memory for %u buffers of %llu bytes",
                     env->max_k, (unsigned long long)env->slot_bytes);
            return -1;
        }
        p->bufs[i] = b;
        if (!(p->vecs[i] = malloc(vec_len))) {
            snprintf(r->error, sizeof r->error, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* The reader threads; *started counts those running. */
static int start_readers(pool *p, pthread_t *th, uint32_t *started, bench_result *r)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    for (; *started < p->env->cfg->workers; ++*started)
        if (pthread_create(&th[*started], NULL, worker_main, p)) {
            snprintf(r->error, sizeof r->error, "cannot start reader thread %u", *started);
            return -1;
        }
    return 0;
}

static void stop_readers(pool *p, pthread_t *th, uint32_t started)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
}

/* The timed replay: CPU, bytes from storage, waits. */
static void timed_replay(pool *p, bench_result *r)
{
    r->start_rss = tool_os_rss_now();
    bench_clock c;
    if (bench_clock_init(&c, p->env, bench_mode_name(p->mode)) < 0) {
        snprintf(r->error, sizeof r->error, "out of memory");
        return;
    }
    double u0, s0;
    tool_os_cpu(&u0, &s0);
    uint64_t io0 = tool_os_storage_read_bytes();
    int rc = replay(p, &c, r);
    uint64_t io1 = tool_os_storage_read_bytes();
    bench_clock_finish(&c, r, u0, s0);
    if (p->mode != BENCH_DIRECT)
        r->bytes_read = io1 - io0;
    r->workers = p->env->cfg->workers;
    r->ok = rc == 0;
}

void bench_run_os(const bench_env *env, bench_mode mode, uint64_t memory, bench_result *r)
{
    pool p;
    memset(&p, 0, sizeof p);
    p.env = env;
    p.mode = mode;
    p.page = tool_os_page();
    p.willneed = env->cfg->os_advice == BENCH_ADVICE_WILLNEED;
    r->slots = (uint32_t)(memory / env->slot_bytes);
    snprintf(r->hit_method, sizeof r->hit_method,
             mode == BENCH_DIRECT || !tool_os_can_probe() ? "none" : "mincore");
    pthread_t *th = calloc(env->cfg->workers, sizeof *th);
    uint32_t started = 0;
    if (!th)
        snprintf(r->error, sizeof r->error, "out of memory");
    else if (open_files(&p, r) == 0 && alloc_buffers(&p, r) == 0) {
        if (start_readers(&p, th, &started, r) == 0)
            timed_replay(&p, r);
        stop_readers(&p, th, started);
    }
    free(th);
    for (uint32_t i = 0; i < TRACE_MAX_K; i++) {
        tool_os_aligned_free(p.bufs[i]);
        free(p.vecs[i]);
    }
    for (uint32_t f = 0; f < env->n_files; f++) {
        if (p.map && p.map[f])
            tool_os_unmap(p.map[f], env->file_sizes[f]);
        if (p.fd && p.fd[f] >= 0)
            smoe__io_close(&smoe__io_os, p.fd[f]);
    }
    free(p.map);
    free(p.fd);
}
