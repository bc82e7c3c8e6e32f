/*
 * Description: smoe_open's refusals and resource bounds: the files it is
 * given, what it allocates, the pages and temporaries it leaves.
 *  - fifo_vault_refused, fifo_vault_tool_refused: a FIFO, a directory or a
 *    character device given as the vault is refused at once with its type
 *    in the message (smoe_open and the smoe tool's inspect, verify and
 *    read); block_device_vault_read: a block device (a loop device over a
 *    vault, where the machine allows one) is read like the file;
 *  - fifo_histogram_unreadable: a FIFO where the histogram goes is ignored
 *    as unreadable;
 *  - replaced_vault_refused: a vault renamed over the path while smoe_open
 *    opens the workers' descriptors is refused, never read;
 *  - open_oom_sweep: every allocation smoe_open makes fails in turn (once,
 *    and from there on): each is a clean SMOE_ENOMEM that closes no
 *    descriptor it did not open (standard input included), leaves no
 *    thread and, under ASan, leaks nothing;
 *  - open_keeps_page_cache: opening a stream leaves the blobs' cached pages
 *    alone (direct I/O), and every page in buffered mode;
 *  - freq_temporaries_removed: histogram saves killed (SIGKILL) at each of
 *    their I/O calls leave no temporary file once the histogram is opened
 *    again, with and without unnamed files (O_TMPFILE);
 *  - sparse_shape_refused: a small vault declaring a huge layers x experts
 *    shape is refused before anything is allocated for that shape;
 *  - ring_within_free_memory: an automatic ring the clamp would raise past
 *    free memory is refused with SMOE_ENOMEM.
 * Where a wait could hang, the test bounds it and releases it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull

/* Generous: a bound on hanging, not a speed claim. */
static double bound_s(void)
{
    return 5.0 * tu_time_mult();
}

static smoe_open_opts plain_opts(uint32_t workers, uint32_t slots)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = workers;
    o.ring_slots = slots;
    o.verify = SMOE_VERIFY_ON;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    return o;
}

/* ---- smoe_open on a thread, released if it blocks on a FIFO -------------- */

struct opener {
    const char *path;
    smoe_open_opts o;
    smoe_stream *s;
    int rc;
    char msg[1024];
    atomic_int done;
};

static void *opener_main(void *arg)
{
    struct opener *op = arg;
    op->rc = smoe_open(op->path, &op->o, &op->s);
    snprintf(op->msg, sizeof op->msg, "%s", smoe_last_error()); /* thread-local */
    atomic_store(&op->done, 1);
    return NULL;
}

/*
 * smoe_open(path) on a thread. If it has not returned within the bound,
 * open `fifo` for writing (a reader blocked in open then goes on) and
 * fail. Returns the code; *s and msg as smoe_open left them.
 */
static int open_bounded(struct opener *op, const char *path, const char *fifo)
{
    op->path = path;
    op->s = NULL;
    atomic_store(&op->done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, opener_main, op), 0);
    uint64_t t0 = tu_now_ns();
    while (!atomic_load(&op->done) && tu_now_ns() - t0 < (uint64_t)(bound_s() * 1e9))
        usleep(1000);
    double waited = (double)(tu_now_ns() - t0) / 1e9;
    int hung = !atomic_load(&op->done);
    for (int i = 0; hung && i < 10000 && !atomic_load(&op->done); i++) {
        int w = open(fifo, O_WRONLY | O_NONBLOCK); /* ENXIO until a reader waits */
        if (w >= 0)
            close(w);
        usleep(1000);
    }
    assert_true(atomic_load(&op->done));
    pthread_join(t, NULL);
    if (hung) {
        if (op->s)
            smoe_close(op->s);
        fail_msg("smoe_open(%s) was still blocked after %.1f s (a FIFO: released by "
                 "opening it for writing, it then returned %s: %s)", path, waited,
                 smoe_err_name(op->rc), op->msg);
    }
    return op->rc;
}

/* ---- a FIFO, a directory or a device as the vault ----------------------- */

static void expect_refused(const char *path, const char *type)
{
    struct opener op;
    memset(&op, 0, sizeof op);
    op.o = plain_opts(2, 4);
    int r = open_bounded(&op, path, path);
    if (r != SMOE_EINVAL || op.s)
        fail_msg("smoe_open(%s), %s: returned %s (%s), expected SMOE_EINVAL", path, type,
                 smoe_err_name(r), op.msg);
    tu_expect_contains(op.msg, path);
    tu_expect_contains(op.msg, type);
    tu_expect_contains(op.msg, "a regular file or a block device");
}

static void fifo_vault_refused(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), *fifo = tu_path(dir, "pipe.smoe");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    tu_baseline base = tu_baseline_take();
    expect_refused(fifo, "FIFO");
    expect_refused(dir, "directory");
    expect_refused("/dev/null", "character device");
    tu_baseline_check(base, "after the refused opens");
    free(fifo);
    tu_rmdir(dir);
    free(dir);
}

static void fifo_vault_tool_refused(void **state)
{
    (void)state;
    const char *tool = getenv("SMOE_TOOL");
    if (!tool || !*tool)
        skip(); /* the tool is not built */
    char *dir = tu_tmpdir(), *fifo = tu_path(dir, "pipe.smoe");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *cmds[][3] = {{"inspect", fifo, NULL}, {"verify", fifo, NULL},
                             {"read", fifo, NULL}};
    unsigned secs = (unsigned)(bound_s() + 1);
    char report[1024] = "";
    char *out = NULL, *err = NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        int rc = tu_run_bounded(dir, secs, tool, cmds[i], &out, &err);
        size_t used = strlen(report);
        if (rc < 0)
            snprintf(report + used, sizeof report - used, "\n  smoe %s did not finish "
                     "within %u s (killed)", cmds[i][0], secs);
        else if (rc != 1 || !strstr(err, fifo) || !strstr(err, "FIFO"))
            snprintf(report + used, sizeof report - used, "\n  smoe %s exited %d, "
                     "expected 1 and a message naming the FIFO: %s", cmds[i][0], rc, err);
    }
    free(out);
    free(err);
    free(fifo);
    tu_rmdir(dir);
    free(dir);
    if (report[0])
        fail_msg("the tool on a FIFO given as the vault:%s", report);
}

/* Run a shell command, its first output line into out; 0 on success. */
static int sh_line(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    out[0] = 0;
    if (!fgets(out, (int)cap, p))
        out[0] = 0;
    int st = pclose(p);
    out[strcspn(out, "\n")] = 0;
    return st == 0 && out[0] ? 0 : -1;
}

/* A block device is a vault like a file: a loop device over one (root,
 * Linux, /dev/loop-control), read blob for blob. */
static void block_device_vault_read(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    if (geteuid() != 0 || access("/dev/loop-control", W_OK) != 0)
        skip(); /* no loop devices here */
    tu_fx *f = tu_fx_new(2, 3, 1000, 40000, 17);
    /* A loop device ends at a 512-byte sector; a vault may be longer than
     * it says. */
    tu_truncate(f->path, (tu_file_size(f->path) + 511) / 512 * 512);
    char cmd[800], dev[256];
    snprintf(cmd, sizeof cmd, "losetup --find --show '%s' 2>/dev/null", f->path);
    if (sh_line(cmd, dev, sizeof dev) != 0) {
        tu_fx_free(f);
        skip(); /* losetup failed (a container without loop devices) */
    }
    smoe_open_opts o = plain_opts(2, 6);
    smoe_stream *s = NULL;
    int r = smoe_open(dev, &o, &s);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", smoe_last_error());
    int bad = 0;
    for (uint32_t k = 0; r == 0 && k < 6; k++) {
        smoe_blob b;
        uint32_t l = k / 3, e = k % 3;
        if (smoe_claim_wait(s, l, e, 10 * SEC, &b) < 0) {
            bad++;
            continue;
        }
        uint64_t n = synth_blob_size(f->seed, l, e, f->min_bytes, f->max_bytes);
        unsigned char *want = malloc(n);
        assert_non_null(want);
        synth_blob_fill(want, n, f->seed, l, e);
        bad += b.size != n || memcmp(b.data, want, n) != 0;
        free(want);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    if (s)
        assert_int_equal(smoe_close(s), 0);
    snprintf(cmd, sizeof cmd, "losetup -d '%s'", dev);
    assert_int_equal(system(cmd), 0);
    tu_fx_free(f);
    if (r != 0)
        fail_msg("smoe_open(%s), a loop device over a vault: %s: %s", dev, smoe_err_name(r),
                 msg);
    assert_int_equal(bad, 0);
}

/* ---- a FIFO as the histogram ---------------------------------------------- */

static void fifo_histogram_unreadable(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 3, 1000, 20000, 5);
    char hist[700];
    snprintf(hist, sizeof hist, "%s.freq", f->path);
    assert_int_equal(mkfifo(hist, 0600), 0);
    struct opener op;
    memset(&op, 0, sizeof op);
    op.o = plain_opts(2, 6);
    op.o.flags &= ~(unsigned)SMOE_OPEN_NO_FREQ;
    tu_logbuf lb;
    memset(&lb, 0, sizeof lb);
    op.o.log_fn = tu_log_cb;
    op.o.log_user = &lb;
    int r = open_bounded(&op, f->path, hist);
    if (r != 0)
        fail_msg("smoe_open with a FIFO histogram: %s: %s", smoe_err_name(r), op.msg);
    smoe_stats st = tu_stats(op.s);
    assert_int_equal(st.freq_status, SMOE_FREQ_UNREADABLE);
    tu_expect_contains(lb.text, hist);
    tu_expect_contains(lb.text, "FIFO");
    assert_int_equal(smoe_close(op.s), 0);
    tu_fx_free(f);
}

/* ---- a vault replaced while it is opened ---------------------------------- */

struct swap {
    const char *path, *other; /* rename other over path ... */
    int at, seen;             /* ... just before the at-th open of path */
};

static void swap_on_open(struct fault_io *f, const char *path, unsigned flags)
{
    (void)flags;
    struct swap *w = f->on_open_arg;
    if (strcmp(path, w->path) == 0 && ++w->seen == w->at)
        assert_int_equal(rename(w->other, w->path), 0);
}

static void replaced_vault_refused(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 3, 1000, 40000, 1);
    char *other = tu_path(f->dir, "other.smoe");
    struct fault_io fio;
    char report[1024] = "";
    for (int verify = 0; verify <= 1; verify++)
        for (int at = 2; at <= 3; at++) {
            /* open 1 validates the vault; 2 and 3 are the workers' */
            assert_int_equal(tu_make_vault(f->path, 2, 3, 1000, 40000, f->seed), 0);
            assert_int_equal(tu_make_vault(other, 2, 3, 1000, 40000, 2), 0);
            struct swap w = {f->path, other, at, 0};
            fault_io_install(&fio);
            fio.on_open_arg = &w;
            fio.on_open = swap_on_open;
            smoe_open_opts o = plain_opts(2, 6);
            o.verify = verify ? SMOE_VERIFY_ON : SMOE_VERIFY_OFF;
            smoe_stream *s = NULL;
            int r = smoe_open(f->path, &o, &s);
            fault_io_remove();
            assert_int_equal(w.seen >= at, 1);
            if (r == SMOE_ESYS) {
                tu_expect_contains(smoe_last_error(), f->path);
                tu_expect_contains(smoe_last_error(), "replaced");
                assert_null(s);
                assert_int_equal(atomic_load(&fio.open_fds), 0);
                continue;
            }
            if (r != 0)
                fail_msg("open with the vault replaced at open %d: %s: %s", at,
                         smoe_err_name(r), smoe_last_error());
            /* Accepted: what would an engine get? */
            unsigned sums = 0, foreign = 0;
            for (uint32_t k = 0; k < 6; k++) {
                smoe_blob b;
                int c = smoe_claim_wait(s, k / 3, k % 3, 10 * SEC, &b);
                if (c == SMOE_ECHECKSUM)
                    sums++;
                if (c < 0)
                    continue;
                uint64_t n = synth_blob_size(f->seed, k / 3, k % 3, 1000, 40000);
                unsigned char *want = malloc(n);
                assert_non_null(want);
                synth_blob_fill(want, n, f->seed, k / 3, k % 3);
                foreign += b.size != n || memcmp(b.data, want, n) != 0;
                free(want);
                smoe_release(s, &b);
            }
            smoe_close(s);
            size_t used = strlen(report);
            snprintf(report + used, sizeof report - used, "\n  replaced before open %d, "
                     "verify %s: of 6 claims, %u failed SMOE_ECHECKSUM and %u returned the "
                     "other vault's bytes", at, verify ? "on" : "off", sums, foreign);
        }
    free(other);
    tu_fx_free(f);
    if (report[0])
        fail_msg("smoe_open accepted a vault renamed over its path while it opened:%s",
                 report);
}

/* ---- every allocation of smoe_open failing -------------------------------- */

/* The identity of descriptor 0 (opened on /dev/null if closed). */
static void stdin_id(struct stat *st)
{
    if (fcntl(0, F_GETFD) < 0)
        assert_int_equal(open("/dev/null", O_RDONLY), 0);
    assert_int_equal(fstat(0, st), 0);
}

static int stdin_same(const struct stat *was)
{
    struct stat now;
    return fcntl(0, F_GETFD) >= 0 && fstat(0, &now) == 0 && now.st_dev == was->st_dev &&
           now.st_ino == was->st_ino;
}

static smoe_open_opts full_opts(const char *trace)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 3;
    o.trace_path = trace; /* the trace recorder and its thread too */
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    return o; /* automatic ring, histogram, pre-warm, the reuse policy */
}

/* Fail the 1st, 2nd, ... allocation of smoe_open, once (from = 0) or from
 * there on (from = 1), until it opens. */
static int oom_sweep(const tu_fx *f, const smoe_open_opts *o, int from, struct stat *in0)
{
    struct fault_io fio;
    fault_io_install(&fio);
    smoe_stream *s = NULL;
    smoe__alloc_fail(0, 0);
    assert_int_equal(smoe_open(f->path, o, &s), 0);
    uint64_t n = smoe__alloc_calls();
    assert_int_equal(smoe_close(s), 0);
    assert_true(n >= 20);
    unsigned closed0 = 0, opened = 0, other = 0;
    char first[1400] = "";
    for (uint64_t k = 1; k <= n + 1; k++) {
        atomic_store(&fio.open_fds, 0);
        tu_baseline base = tu_baseline_take();
        s = NULL;
        smoe__alloc_fail(k, from);
        int r = smoe_open(f->path, o, &s);
        smoe__alloc_fail(0, 0);
        if (r == 0) {
            assert_int_equal(smoe_close(s), 0);
            if (k <= n) {
                opened++;
                print_message("  allocation %llu failed, smoe_open succeeded\n",
                              (unsigned long long)k);
            }
            continue;
        }
        if (k > n)
            fail_msg("smoe_open with no allocation failing: %s", smoe_last_error());
        assert_null(s);
        int bad0 = !stdin_same(in0);
        if (bad0) {
            closed0++;
            if (fcntl(0, F_GETFD) >= 0)
                close(0);
            stdin_id(in0);
        }
        if (r != SMOE_ENOMEM) {
            other++;
            if (!first[0])
                snprintf(first, sizeof first, "allocation %llu: %s: %s",
                         (unsigned long long)k, smoe_err_name(r), smoe_last_error());
        }
        if (!bad0) {
            tu_baseline_check(base, "after a failed open");
            assert_int_equal(atomic_load(&fio.open_fds), 0);
        }
    }
    fault_io_remove();
    print_message("allocation failures (%s) in smoe_open: %llu points; %u closed "
                  "descriptor 0, %u opened anyway, %u failed other than SMOE_ENOMEM%s%s\n",
                  from ? "from the Nth on" : "the Nth only", (unsigned long long)n, closed0,
                  opened, other, first[0] ? "; first: " : "", first);
    return opened || closed0 || other;
}

static void open_oom_sweep(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(3, 8, 1000, 40000, 12);
    char *trace = tu_path(f->dir, "trace.txt");
    struct stat in0;
    stdin_id(&in0);
    smoe_open_opts o = full_opts(trace);
    smoe_stream *s;
    /* A histogram to load. */
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 1, 2, 10 * SEC, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
    int bad = oom_sweep(f, &o, 0, &in0);
    bad += oom_sweep(f, &o, 1, &in0);
    /* The LRU policy, an explicit ring, no histogram, no trace. */
    o = plain_opts(2, 8);
    o.eviction = SMOE_EVICT_LRU;
    bad += oom_sweep(f, &o, 0, &in0);
    free(trace);
    tu_fx_free(f);
    if (bad)
        fail_msg("an allocation failure in smoe_open was not a clean SMOE_ENOMEM");
}

/* ---- the page cache --------------------------------------------------------- */

/* Pages of [off, off + len) of path in the page cache. */
static size_t cached_in(const char *path, uint64_t off, uint64_t len)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t a = off / pg * pg, end = off + len;
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    void *m = mmap(NULL, (size_t)(end - a), PROT_READ, MAP_SHARED, fd, (off_t)a);
    assert_true(m != MAP_FAILED);
    size_t np = (size_t)((end - a + pg - 1) / pg), n = 0;
    unsigned char *vec = malloc(np);
    assert_non_null(vec);
    assert_int_equal(mincore(m, (size_t)(end - a), vec), 0);
    for (size_t i = 0; i < np; i++)
        n += vec[i] & 1;
    free(vec);
    munmap(m, (size_t)(end - a));
    close(fd);
    return n;
}

/* Cached pages of every blob of v. */
static size_t cached_blobs(const char *path, const smoe__vault *v)
{
    size_t n = 0;
    for (size_t i = 0; i < (size_t)v->layers * v->experts; i++)
        if (v->index[i].present)
            n += cached_in(path, v->index[i].offset, v->index[i].padded);
    return n;
}

/* `cat vault > /dev/null`: every page cached. */
static void cat_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    static char buf[1 << 16];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
}

static void drop_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

static void open_keeps_page_cache(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 16, 16384, 300000, 13);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, f->path, &smoe__io_os), 0);
    size_t total = (size_t)((tu_file_size(f->path) + 4095) / 4096);

    /* Direct I/O: the blobs' pages stay cached. */
    cat_file(f->path);
    size_t blobs = cached_blobs(f->path, &v), all = tu_cached_pages(f->path);
    smoe_open_opts o = plain_opts(2, 4);
    smoe_stream *s;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    int direct = tu_stats(s).io_mode == SMOE_IO_DIRECT;
    size_t blobs_after = cached_blobs(f->path, &v);
    assert_int_equal(smoe_close(s), 0);
    print_message("direct I/O: %zu of %zu pages cached, %zu of them blobs; after "
                  "smoe_open %zu blob pages\n", all, total, blobs, blobs_after);

    /* Buffered: nothing is dropped. */
    cat_file(f->path);
    all = tu_cached_pages(f->path);
    o.flags |= SMOE_OPEN_BUFFERED;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    size_t all_after = tu_cached_pages(f->path);
    assert_int_equal(smoe_close(s), 0);
    print_message("buffered: %zu pages cached; after smoe_open %zu\n", all, all_after);

    /* Direct I/O from a cold cache: open leaves none of what it read. */
    drop_file(f->path);
    size_t cold = tu_cached_pages(f->path);
    o.flags &= ~(unsigned)SMOE_OPEN_BUFFERED;
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    size_t cold_after = tu_cached_pages(f->path);
    assert_int_equal(smoe_close(s), 0);
    print_message("direct I/O from a cold cache: %zu pages cached; after smoe_open %zu\n",
                  cold, cold_after);
    smoe__vault_free(&v);
    tu_fx_free(f);

    assert_true(blobs > 0);
    assert_true(all > 0);
    if (all_after < all)
        fail_msg("buffered smoe_open dropped %zu of %zu cached pages", all - all_after, all);
    if (!direct)
        skip(); /* no direct I/O on this file system */
    if (blobs_after < blobs)
        fail_msg("smoe_open dropped %zu of the %zu cached blob pages", blobs - blobs_after,
                 blobs);
    if (cold_after > cold)
        fail_msg("smoe_open left %zu pages it read in the page cache", cold_after - cold);
}

/* ---- the histogram's temporary files --------------------------------------- */

/* Names in dir that start with prefix and contain infix. */
static int count_names(const char *dir, const char *prefix, const char *infix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += !strncmp(e->d_name, prefix, strlen(prefix)) && strstr(e->d_name, infix);
    closedir(d);
    return n;
}

static smoe_open_opts hist_opts(const char *hist)
{
    smoe_open_opts o = plain_opts(1, 4);
    o.flags &= ~(unsigned)SMOE_OPEN_NO_FREQ;
    o.freq_path = hist;
    return o;
}

/* In a child: open, claim, and save the histogram with the kth I/O call of
 * the save killing the process (k 0: count the save's calls into *calls). */
static int save_killed_at(const char *vault, const char *hist, uint64_t k, int no_tmpfile,
                          uint64_t *calls)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* No cmocka here: exit codes only. */
        static struct fault_io fio;
        fault_io_install(&fio);
        atomic_store(&fio.refuse_tmpfile, no_tmpfile);
        smoe_open_opts o = hist_opts(hist);
        smoe_stream *s;
        smoe_blob b;
        if (smoe_open(vault, &o, &s) != 0 || smoe_claim_wait(s, 0, 1, 10 * SEC, &b) < 0 ||
            smoe_release(s, &b) != 0)
            _exit(3);
        fault_io_arm(&fio, k ? FIO_KILL : FIO_OFF, FIO_ANY, k, 0, 0);
        int r = smoe_freq_save(s);
        uint64_t n = atomic_load(&fio.total);
        fault_io_disarm(&fio);
        if (write(pipefd[1], &n, sizeof n) != (ssize_t)sizeof n)
            _exit(4);
        _exit(r == 0 ? 0 : 5);
    }
    close(pipefd[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    if (calls) {
        assert_true(read(pipefd[0], calls, sizeof *calls) == (ssize_t)sizeof *calls);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    close(pipefd[0]);
    if (WIFSIGNALED(status))
        assert_int_equal(WTERMSIG(status), SIGKILL);
    else
        assert_int_equal(WEXITSTATUS(status), 0); /* the save ended before call k */
    return WIFSIGNALED(status);
}

static void freq_temporaries_removed(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 3, 1000, 20000, 14);
    char hist[700], prefix[64], *p;
    int bad = 0;
    for (int no_tmpfile = 0; no_tmpfile <= 1; no_tmpfile++) {
        snprintf(hist, sizeof hist, "%s/h0.freq", f->dir);
        uint64_t calls = 0;
        save_killed_at(f->path, hist, 0, no_tmpfile, &calls);
        assert_true(calls >= 4);
        /* Save k keeps histogram hk.freq: the open of the next save does
         * not tidy up after this one. */
        unsigned killed = 0, left = 0;
        for (uint64_t k = 1; k <= calls; k++) {
            snprintf(hist, sizeof hist, "%s/h%llu.freq", f->dir, (unsigned long long)k);
            killed += (unsigned)save_killed_at(f->path, hist, k, no_tmpfile, NULL);
            snprintf(prefix, sizeof prefix, "h%llu.freq.tmp.", (unsigned long long)k);
            left += count_names(f->dir, prefix, "") > 0;
        }
        /* Files that are not temporaries of dead processes stay. */
        const char *keep[] = {"h1.freq.tmp.1.7" /* pid 1 always exists */, "h1.freq.tmp.x",
                              "h1.freq.tmp.12x.1", "other.freq.tmp.999999999.0"};
        for (size_t i = 0; i < 4; i++) {
            p = tu_path(f->dir, keep[i]);
            FILE *fp = fopen(p, "w");
            assert_non_null(fp);
            fclose(fp);
            free(p);
        }
        /* The next open of each histogram. */
        for (uint64_t k = 1; k <= calls; k++) {
            snprintf(hist, sizeof hist, "%s/h%llu.freq", f->dir, (unsigned long long)k);
            smoe_open_opts o = hist_opts(hist);
            smoe_stream *s;
            assert_int_equal(smoe_open(f->path, &o, &s), 0);
            assert_int_equal(smoe_close(s), 0);
        }
        int after = count_names(f->dir, "", ".freq.tmp.") - 4;
        print_message("%s: %llu I/O calls per save, %u saves killed, %u left a temporary "
                      "file; after the next open of each histogram %d are left\n",
                      no_tmpfile ? "no unnamed files" : "unnamed files where available",
                      (unsigned long long)calls, killed, left, after);
        for (size_t i = 0; i < 4; i++) {
            p = tu_path(f->dir, keep[i]);
            if (!tu_exists(p))
                fail_msg("%s was removed", keep[i]);
            free(p);
        }
        bad += after != 0;
        /* The next pass starts from the vault alone. */
        DIR *d = opendir(f->dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.' && strcmp(e->d_name, "v.smoe") != 0) {
                p = tu_path(f->dir, e->d_name);
                unlink(p);
                free(p);
            }
        closedir(d);
    }
    tu_fx_free(f);
    if (bad)
        fail_msg("temporary files of killed saves are left after the next open");
}

/* ---- a declared shape larger than the vault -------------------------------- */

static uint64_t rss_bytes(void)
{
    FILE *fp = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!fp)
        return 0;
    if (fscanf(fp, "%llu %llu", &size, &res) != 2)
        res = 0;
    fclose(fp);
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int three_present(uint32_t layer, uint32_t expert)
{
    return layer == 1 && expert < 3;
}

static void sparse_shape_refused(void **state)
{
    (void)state;
    /* 24 blobs, then the header says 2048 x 2048 (the entries stay valid). */
    tu_fx *f = tu_fx_new(4, 6, 1000, 20000, 16);
    tu_patch_u32(f->path, TU_H_LAYERS, 2048);
    tu_patch_u32(f->path, TU_H_EXPERTS, 2048);
    tu_fix_checksum(f->path);
    smoe_open_opts o = plain_opts(2, 8);
    o.flags &= ~(unsigned)SMOE_OPEN_NO_FREQ;
    uint64_t rss0 = rss_bytes();
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, &o, &s);
    uint64_t rss1 = rss_bytes();
    if (r == 0) {
        assert_int_equal(smoe_close(s), 0);
        char hist[700];
        snprintf(hist, sizeof hist, "%s.freq", f->path);
        fail_msg("a %llu-byte vault declaring 2048 x 2048 experts with 24 present opened: "
                 "RSS grew %.1f MiB, close wrote a %.1f MiB histogram",
                 (unsigned long long)tu_file_size(f->path), (double)(rss1 - rss0) / 1048576,
                 tu_exists(hist) ? (double)tu_file_size(hist) / 1048576 : 0.0);
    }
    assert_int_equal(r, SMOE_ECOUNT);
    tu_expect_contains(smoe_last_error(), f->path);
    tu_expect_contains(smoe_last_error(), "2048 x 2048");
    tu_expect_contains(smoe_last_error(), "24 entries");
    /* The reader alone refuses it too (smoe inspect, verify). */
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, f->path, &smoe__io_os), SMOE_ECOUNT);
    tu_fx_free(f);

    /* Sparse within the bound: 100 x 100 declared, 24 present. */
    f = tu_fx_new(4, 6, 1000, 20000, 16);
    tu_patch_u32(f->path, TU_H_LAYERS, 100);
    tu_patch_u32(f->path, TU_H_EXPERTS, 100);
    tu_fix_checksum(f->path);
    assert_int_equal(smoe_open(f->path, &o, &s), 0);
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 3, 5, 10 * SEC, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_claim(s, 99, 99, &b), SMOE_ENOENT);
    assert_int_equal(smoe_close(s), 0);

    /* The writer refuses to write what the reader would refuse. */
    char *p = tu_path(f->dir, "w.smoe");
    tu_vault_opts vo = {.layers = 2048, .experts = 2048, .min_bytes = 1000,
                        .max_bytes = 2000, .seed = 1, .present = three_present};
    assert_int_equal(tu_make_vault_ex(p, &vo), SMOE_ECOUNT);
    tu_expect_contains(smoe_last_error(), "3 entries");
    assert_false(tu_exists(p));
    vo.layers = vo.experts = 256; /* 65536 pairs: always allowed */
    assert_int_equal(tu_make_vault_ex(p, &vo), 0);
    free(p);
    tu_fx_free(f);
}

/* ---- the ring against free memory ------------------------------------------ */

/* The OS table, with /proc/meminfo and the cgroup files served from the
 * test's directory: a machine with little free memory, no container. */
static char g_meminfo[700], g_empty[700];

static int small_mem_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    if (!strcmp(path, "/proc/meminfo"))
        path = g_meminfo;
    else if (!strcmp(path, "/proc/self/cgroup") || !strcmp(path, "/proc/self/mountinfo"))
        path = g_empty;
    return smoe__io_os.open(&smoe__io_os, path, flags);
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static int open_with_free_kb(const tu_fx *f, unsigned kb, smoe_stream **s)
{
    char text[200];
    snprintf(text, sizeof text, "MemTotal: 16777216 kB\nMemAvailable: %u kB\n", kb);
    write_text(g_meminfo, text);
    static smoe__io io;
    io = smoe__io_os;
    io.open = small_mem_open;
    smoe__io_set(&io);
    smoe_open_opts o = plain_opts(1, 0); /* ring_slots 0: automatic */
    int r = smoe_open(f->path, &o, s);
    smoe__io_set(NULL);
    return r;
}

static void ring_within_free_memory(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip(); /* the memory figures come from /proc and cgroup files on Linux only */
#endif
    /* 80 blobs of at most 16 KiB: 16 KiB slots; room for 80 of them. */
    tu_fx *f = tu_fx_new(2, 40, 1000, 16384, 17);
    snprintf(g_meminfo, sizeof g_meminfo, "%s/meminfo", f->dir);
    snprintf(g_empty, sizeof g_empty, "%s/empty", f->dir);
    write_text(g_empty, "");
    smoe_stream *s = NULL;
    /* 512 KiB free: the budget allows 8 slots (25% of free), the clamp
     * says 64, 1 MiB. */
    int r = open_with_free_kb(f, 512, &s);
    if (r == 0) {
        smoe_stats st = tu_stats(s);
        assert_int_equal(smoe_close(s), 0);
        fail_msg("opened a ring of %llu slots, %llu bytes, with %llu bytes of free memory",
                 (unsigned long long)st.slots, (unsigned long long)st.ring_bytes,
                 (unsigned long long)st.budget_free);
    }
    assert_int_equal(r, SMOE_ENOMEM);
    assert_null(s);
    tu_expect_contains(smoe_last_error(), f->path);
    tu_expect_contains(smoe_last_error(), "64 slots");
    tu_expect_contains(smoe_last_error(), "free memory");
    /* 4 MiB free: the 64 slots fit. */
    assert_int_equal(open_with_free_kb(f, 4096, &s), 0);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.slots, 64);
    assert_true(st.ring_bytes <= st.budget_free);
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);

    /* One huge declared blob (a sparse vault): 1 GiB slots, 8 GiB free. */
    smoe__budget_in in;
    memset(&in, 0, sizeof in);
    in.slot_bytes = 1ull << 30;
    in.have_mem = 1;
    in.mem_total = 16ull << 30;
    in.mem_available = 8ull << 30;
    in.cg_room = in.cg_limit = SMOE__NO_LIMIT;
    in.overhead_bytes = SMOE__BUDGET_OVERHEAD;
    in.layers = 24;
    in.vault_entries = 24 * 32;
    smoe__budget b;
    assert_int_equal(smoe__budget_compute(&in, &b), SMOE_ENOMEM);
    assert_int_equal(b.slots, 64);
    tu_expect_contains(smoe_last_error(), "free memory");
    in.mem_available = 66ull << 30; /* the budget: 66 - 1 - 4 GiB, 61 slots; 64 fit */
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 64);
}

/* A failed test may leave its io table or allocation fault armed. */
static int teardown(void **state)
{
    (void)state;
    fault_io_remove();
    smoe__alloc_fail(0, 0);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(fifo_vault_refused, teardown),
        cmocka_unit_test_teardown(fifo_vault_tool_refused, teardown),
        cmocka_unit_test_teardown(block_device_vault_read, teardown),
        cmocka_unit_test_teardown(fifo_histogram_unreadable, teardown),
        cmocka_unit_test_teardown(replaced_vault_refused, teardown),
        cmocka_unit_test_teardown(open_oom_sweep, teardown),
        cmocka_unit_test_teardown(open_keeps_page_cache, teardown),
        cmocka_unit_test_teardown(freq_temporaries_removed, teardown),
        cmocka_unit_test_teardown(sparse_shape_refused, teardown),
        cmocka_unit_test_teardown(ring_within_free_memory, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
