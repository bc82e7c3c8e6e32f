/* testutil.c - see testutil.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "testutil.h"

/* ---- files and directories ------------------------------------------- */

char *tu_tmpdir(void)
{
    const char *base = getenv("SMOE_TEST_TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    char *dir = tu_path(base, "smoe-test-XXXXXX");
    if (!mkdtemp(dir))
        fail_msg("mkdtemp(%s): %s", dir, strerror(errno));
    return dir;
}

void tu_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = tu_path(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

int tu_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("opendir(%s): %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

char *tu_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

uint64_t tu_file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        fail_msg("stat(%s): %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

int tu_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void tu_truncate(const char *path, uint64_t size)
{
    if (truncate(path, (off_t)size) < 0)
        fail_msg("truncate(%s): %s", path, strerror(errno));
}

void tu_read_at(const char *path, uint64_t off, void *buf, size_t n)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail_msg("open(%s): %s", path, strerror(errno));
    ssize_t r = pread(fd, buf, n, (off_t)off);
    close(fd);
    if (r != (ssize_t)n)
        fail_msg("pread(%s, %zu at %llu) returned %zd", path, n, (unsigned long long)off, r);
}

unsigned char *tu_read_file(const char *path, uint64_t *size)
{
    *size = tu_file_size(path);
    unsigned char *b = malloc(*size ? (size_t)*size : 1);
    assert_non_null(b);
    if (*size)
        tu_read_at(path, 0, b, (size_t)*size);
    return b;
}

/* ---- process resources ------------------------------------------------ */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("opendir(%s): %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void *noop_thread(void *arg)
{
    return arg;
}

tu_baseline tu_baseline_take(void)
{
    /* Sanitizer runtimes start a helper thread at the first pthread_create
     * (ThreadSanitizer's background thread): start it before counting. */
    static int warmed;
    if (!warmed) {
        pthread_t t;
        if (pthread_create(&t, NULL, noop_thread, NULL) == 0)
            pthread_join(t, NULL);
        warmed = 1;
    }
    tu_baseline b;
    b.fds = count_entries("/proc/self/fd") - 1; /* less opendir's own */
    b.threads = count_entries("/proc/self/task");
    return b;
}

void tu_baseline_check(tu_baseline b, const char *what)
{
    tu_baseline now = tu_baseline_take();
    for (int i = 0; i < 1000 && now.threads > b.threads; i++) {
        usleep(1000);
        now = tu_baseline_take();
    }
    if (now.fds != b.fds || now.threads != b.threads)
        fail_msg("%s: %d descriptors and %d threads, expected %d and %d as before", what,
                 now.fds, now.threads, b.fds, b.threads);
}

int tu_is_mapped(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        fail_msg("/proc/self/maps: %s", strerror(errno));
    unsigned long lo, hi, a = (unsigned long)(uintptr_t)addr;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
            found = 1;
    fclose(f);
    return found;
}

double tu_time_mult(void)
{
    const char *e = getenv("SMOE_TEST_TIME_MULT");
    double m = e ? atof(e) : 1.0;
    return m >= 1.0 ? m : 1.0;
}

uint64_t tu_bound_ns(void)
{
    return (uint64_t)(10.0 * tu_time_mult() * 1e9);
}

void tu_wait_flag(const _Atomic int *flag, const char *what)
{
    uint64_t t0 = tu_now_ns();
    while (!atomic_load(flag)) {
        if (tu_now_ns() - t0 > tu_bound_ns())
            fail_msg("timed out waiting for %s", what);
        usleep(200);
    }
}

uint64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tu_layout_extent(const smoe_component *comps, uint32_t n)
{
    return comps[n - 1].offset + comps[n - 1].nbytes;
}

/* ---- writing test vaults ------------------------------------------------ */

int tu_make_vault_ex(const char *path, const tu_vault_opts *o)
{
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = o->layers;
    wo.experts = o->experts;
    smoe_writer *w = NULL;
    int rc = smoe_writer_open(path, &wo, &w);
    if (rc < 0)
        return rc;
    smoe_component comps[3];
    uint32_t n = synth_layout(comps, o->min_bytes), id = 0;
    unsigned char *buf = malloc(o->max_bytes ? (size_t)o->max_bytes : 1);
    assert_non_null(buf);
    char num[32];
    if ((rc = smoe_writer_add_layout(w, comps, n, &id)) < 0)
        goto fail;
    if (o->model && (rc = smoe_writer_set_meta(w, "model", o->model)) < 0)
        goto fail;
    if (o->top_k) {
        snprintf(num, sizeof num, "%u", o->top_k);
        if ((rc = smoe_writer_set_meta(w, "top_k", num)) < 0)
            goto fail;
    }
    for (const char *const *m = o->meta; m && m[0]; m += 2)
        if ((rc = smoe_writer_set_meta(w, m[0], m[1])) < 0)
            goto fail;
    uint64_t total = (uint64_t)o->layers * o->experts;
    for (uint64_t k = 0; k < total; k++) {
        uint64_t i = o->reverse ? total - 1 - k : k;
        uint32_t layer = (uint32_t)(i / o->experts), expert = (uint32_t)(i % o->experts);
        if (o->present && !o->present(layer, expert))
            continue;
        uint64_t size = synth_blob_size(o->seed, layer, expert, o->min_bytes, o->max_bytes);
        synth_blob_fill(buf, (size_t)size, o->seed, layer, expert);
        if ((rc = smoe_writer_add_blob(w, layer, expert, id, buf, size)) < 0)
            goto fail;
    }
    free(buf);
    return smoe_writer_finish(w);
fail:
    free(buf);
    smoe_writer_abort(w);
    return rc;
}

int tu_make_vault(const char *path, uint32_t layers, uint32_t experts,
                  uint64_t min_bytes, uint64_t max_bytes, uint64_t seed)
{
    tu_vault_opts o = {0};
    o.layers = layers;
    o.experts = experts;
    o.min_bytes = min_bytes;
    o.max_bytes = max_bytes;
    o.seed = seed;
    o.model = "tu-test";
    o.top_k = experts < 2 ? experts : 2;
    return tu_make_vault_ex(path, &o);
}

/* ---- patching fields ------------------------------------------------------ */

uint32_t tu_read_u32(const char *path, uint64_t off)
{
    unsigned char b[4];
    tu_read_at(path, off, b, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t tu_read_u64(const char *path, uint64_t off)
{
    return (uint64_t)tu_read_u32(path, off) | (uint64_t)tu_read_u32(path, off + 4) << 32;
}

void tu_patch_bytes(const char *path, uint64_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        fail_msg("open(%s): %s", path, strerror(errno));
    ssize_t r = pwrite(fd, p, n, (off_t)off);
    close(fd);
    if (r != (ssize_t)n)
        fail_msg("pwrite(%s, %zu at %llu) returned %zd", path, n, (unsigned long long)off, r);
}

void tu_patch_u32(const char *path, uint64_t off, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    tu_patch_bytes(path, off, b, 4);
}

void tu_patch_u64(const char *path, uint64_t off, uint64_t v)
{
    tu_patch_u32(path, off, (uint32_t)v);
    tu_patch_u32(path, off + 4, (uint32_t)(v >> 32));
}

void tu_flip_byte(const char *path, uint64_t off)
{
    unsigned char b;
    tu_read_at(path, off, &b, 1);
    b ^= 0xff;
    tu_patch_bytes(path, off, &b, 1);
}

static void hash_range(XXH3_state_t *st, const char *path, uint64_t off, uint64_t n)
{
    unsigned char *b = malloc(n ? (size_t)n : 1);
    assert_non_null(b);
    if (n)
        tu_read_at(path, off, b, (size_t)n);
    XXH3_64bits_update(st, b, (size_t)n);
    free(b);
}

void tu_fix_checksum(const char *path)
{
    unsigned char h[120];
    tu_read_at(path, 0, h, sizeof h);
    uint64_t entries = tu_read_u32(path, TU_H_ENTRIES);
    uint64_t layouts = tu_read_u32(path, TU_H_LAYOUTS);
    uint64_t comps = tu_read_u32(path, TU_H_COMPONENTS);
    XXH3_state_t *st = XXH3_createState();
    assert_non_null(st);
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, sizeof h);
    int v2 = tu_read_u32(path, TU_H_VERSION) == 2;
    hash_range(st, path, tu_read_u64(path, TU_H_TABLE_OFFSET), entries * (v2 ? 32 : 48));
    hash_range(st, path, tu_read_u64(path, TU_H_LAYOUT_OFFSET), layouts * 16 + comps * 128);
    if (v2) { /* extents, then sources and names (vault_v2.c) */
        hash_range(st, path, tu_read_u64(path, TU_H2_EXTENT_OFFSET),
                   (uint64_t)tu_read_u32(path, TU_H2_EXTENTS) * TU_X_SIZE);
        hash_range(st, path, tu_read_u64(path, TU_H2_SOURCE_OFFSET),
                   (uint64_t)tu_read_u32(path, TU_H2_SOURCES) * TU_S_RECORD +
                       tu_read_u32(path, TU_H2_NAMES_BYTES));
    }
    hash_range(st, path, tu_read_u64(path, TU_H_META_OFFSET),
               tu_read_u64(path, TU_H_META_BYTES));
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, XXH3_64bits_digest(st));
    XXH3_freeState(st);
    tu_patch_bytes(path, TU_H_CHECKSUM, c.digest, sizeof c.digest);
}

uint64_t tu_entry_off(const char *path, uint32_t i)
{
    return tu_read_u64(path, TU_H_TABLE_OFFSET) + 48ull * i;
}

uint64_t tu_layout_off(const char *path, uint32_t j)
{
    return tu_read_u64(path, TU_H_LAYOUT_OFFSET) + 16ull * j;
}

uint64_t tu_component_off(const char *path, uint32_t k)
{
    return tu_read_u64(path, TU_H_LAYOUT_OFFSET) + 16ull * tu_read_u32(path, TU_H_LAYOUTS) +
           128ull * k;
}

/* ---- smoe__io tables -------------------------------------------------------- */

static ssize_t fault_pwrite(const smoe__io *io, int fd, const void *buf, size_t n,
                            uint64_t off)
{
    tu_fault *f = io->user;
    if (++f->pwrites == f->pwrite_fail_at)
        return -EIO;
    return smoe__io_os.pwrite(&smoe__io_os, fd, buf, n, off);
}

static int fault_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    return smoe__io_os.open(&smoe__io_os, path, flags);
}

static int fault_close(const smoe__io *io, int fd)
{
    (void)io;
    return smoe__io_os.close(&smoe__io_os, fd);
}

static ssize_t fault_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    (void)io;
    return smoe__io_os.pread(&smoe__io_os, fd, buf, n, off);
}

static int fault_fsync(const smoe__io *io, int fd)
{
    (void)io;
    return smoe__io_os.fsync(&smoe__io_os, fd);
}

static int fault_rename(const smoe__io *io, const char *from, const char *to)
{
    (void)io;
    return smoe__io_os.rename(&smoe__io_os, from, to);
}

static int fault_unlink(const smoe__io *io, const char *path)
{
    (void)io;
    return smoe__io_os.unlink(&smoe__io_os, path);
}

static int fault_size(const smoe__io *io, int fd, uint64_t *size)
{
    (void)io;
    return smoe__io_os.size(&smoe__io_os, fd, size);
}

smoe__io tu_fault_io(tu_fault *f)
{
    f->pwrites = 0;
    smoe__io io = {fault_open, fault_close, fault_pread, fault_pwrite, fault_fsync,
                   fault_rename, fault_unlink, fault_size, f, NULL, NULL, NULL};
    return io;
}

/* ---- running programs ---------------------------------------------------- */

static char *slurp(const char *path)
{
    uint64_t n;
    unsigned char *b = tu_read_file(path, &n);
    char *s = realloc(b, (size_t)n + 1);
    assert_non_null(s);
    s[n] = 0;
    return s;
}

/* The exit status, or -1 when a signal ended it; secs > 0: an alarm. */
static int run_prog(const char *dir, unsigned secs, const char *prog,
                    const char *const *args, char **out, char **err)
{
    char *po = tu_path(dir, "stdout.txt"), *pe = tu_path(dir, "stderr.txt");
    const char *argv[64];
    int n = 0;
    argv[n++] = prog;
    for (; *args && n < 63; args++)
        argv[n++] = *args;
    argv[n] = NULL;
#if defined(_WIN32)
    int rc = shim_spawn(argv, po, pe, secs);
    free(*out);
    free(*err);
    *out = slurp(po);
    *err = slurp(pe);
    free(po);
    free(pe);
    return rc;
#else
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(127);
        if (secs)
            alarm(secs);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    free(*out);
    free(*err);
    *out = slurp(po);
    *err = slurp(pe);
    free(po);
    free(pe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#endif
}

int tu_run(const char *dir, const char *prog, const char *const *args, char **out,
           char **err)
{
    int r = run_prog(dir, 0, prog, args, out, err);
    assert_true(r >= 0);
    return r;
}

int tu_run_bounded(const char *dir, unsigned secs, const char *prog,
                   const char *const *args, char **out, char **err)
{
    return run_prog(dir, secs, prog, args, out, err);
}

void tu_expect_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" not found in:\n%s", needle, hay);
}

size_t tu_cached_pages(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    size_t len = (size_t)st.st_size, pg = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    unsigned char *vec = malloc((len + pg - 1) / pg);
    assert_non_null(vec);
    assert_int_equal(mincore(m, len, vec), 0);
    size_t n = 0;
    for (size_t i = 0; i < (len + pg - 1) / pg; i++)
        n += vec[i] & 1;
    free(vec);
    munmap(m, len);
    close(fd);
    return n;
}

smoe_stream *tu_open_ring(const char *path, uint32_t slots, uint32_t workers,
                          uint32_t eviction)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = slots;
    o.workers = workers;
    o.eviction = eviction;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(path, &o, &s);
    if (r != 0)
        fail_msg("smoe_open %s: %s: %s", path, smoe_err_name(r), smoe_last_error());
    return s;
}

smoe_stats tu_stats(smoe_stream *s)
{
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    return st;
}

void tu_wait_holding(const _Atomic int *holding)
{
    for (int i = 0; i < 20000 && !atomic_load(holding); i++)
        usleep(500);
    assert_true(atomic_load(holding));
}

smoe_stream *tu_fx_open(const tu_fx *f, smoe_open_opts *o)
{
    o->flags |= SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    if (!o->eviction)
        o->eviction = SMOE_EVICT_LRU;
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, o, &s);
    if (r != 0)
        fail_msg("smoe_open: %s: %s", smoe_err_name(r), smoe_last_error());
    return s;
}

tu_fx *tu_fx_new(uint32_t layers, uint32_t experts, uint64_t min_bytes, uint64_t max_bytes,
                 uint64_t seed)
{
    tu_fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dir = tu_tmpdir();
    snprintf(f->path, sizeof f->path, "%s/v.smoe", f->dir);
    f->layers = layers;
    f->experts = experts;
    f->min_bytes = min_bytes;
    f->max_bytes = max_bytes;
    f->seed = seed;
    assert_int_equal(tu_make_vault(f->path, layers, experts, min_bytes, max_bytes, seed), 0);
    return f;
}

void tu_fx_free(tu_fx *f)
{
    tu_rmdir(f->dir);
    free(f->dir);
    free(f);
}

void tu_log_cb(void *user, int level, const char *msg)
{
    tu_logbuf *l = user;
    if (level == SMOE_LOG_WARN)
        l->warns++;
    size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof l->text - n, "%s\n", msg);
}
