/*
 * Description: the popularity histogram. Encode/decode round trip and
 * every rejection (short, bad magic, other version, bad checksum, wrong
 * total, trailing bytes, another vault). Through streams: claims counted
 * and saved at close and by smoe_freq_save to NAME.smoe.freq, loaded at
 * the next open; two vaults in one directory keep separate files; absent,
 * empty, truncated, corrupt, foreign (another vault, and the same model
 * repacked) and unsupported-version files ignored with a warning in the
 * log and the reason in smoe_stats; a read-only directory disables saving
 * without failing open or close; a save interrupted before the rename, or
 * by a full disk or a failed fsync, leaves the previous file intact and
 * no temporary file behind; SMOE_OPEN_NO_FREQ writes nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_io.h"
#include "fill/freq.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define SEC 1000000000ull
#define LAYERS 3u
#define EXPERTS 10u
#define N (LAYERS * EXPERTS)

static char *g_dir;
static char g_vault[600], g_freq[620];

static int setup(void **state)
{
    (void)state;
    g_dir = tu_tmpdir();
    snprintf(g_vault, sizeof g_vault, "%s/model.smoe", g_dir);
    snprintf(g_freq, sizeof g_freq, "%s.freq", g_vault);
    return tu_make_vault(g_vault, LAYERS, EXPERTS, 1000, 20000, 11);
}

static int teardown(void **state)
{
    (void)state;
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

static smoe_stream *open_v(const char *vault, unsigned flags, tu_logbuf *lb)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 8;
    o.flags = flags | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_ALLOW_BUFFERED;
    if (lb) {
        memset(lb, 0, sizeof *lb);
        o.log_fn = tu_log_cb;
        o.log_user = lb;
    }
    smoe_stream *s = NULL;
    int r = smoe_open(vault, &o, &s);
    if (r != 0)
        fail_msg("smoe_open(%s): %s: %s", vault, smoe_err_name(r), smoe_last_error());
    return s;
}

static void claim_n(smoe_stream *s, uint32_t layer, uint32_t expert, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        smoe_blob b;
        int r = smoe_claim_wait(s, layer, expert, 10 * SEC, &b);
        if (r < 0)
            fail_msg("claim_wait(%u, %u): %s", layer, expert, smoe_last_error());
        assert_int_equal(smoe_release(s, &b), 0);
    }
}

static uint64_t count_of(smoe_stream *s, uint32_t layer, uint32_t expert)
{
    return atomic_load(&s->freq.count[layer * EXPERTS + expert]);
}

/* Files in the directory whose name contains ".tmp." */
static int tmp_files(void)
{
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static smoe__freq_id vault_id(const char *path)
{
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, path, smoe__io_get()), 0);
    smoe__freq_id id = {v.layers, v.experts, v.vault_id, v.file_size};
    smoe__vault_free(&v);
    return id;
}

/* Write a histogram for g_vault with count[k] = k * 3 + 1. */
static void write_hist(const char *path)
{
    smoe__freq_id id = vault_id(g_vault);
    uint64_t counts[N];
    for (uint32_t k = 0; k < N; k++)
        counts[k] = k * 3 + 1;
    unsigned char buf[SMOE__FREQ_HEADER_SIZE + 8 * N];
    smoe__freq_encode(buf, &id, counts);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, sizeof buf, f), sizeof buf);
    fclose(f);
}

/* ---- the format, pure ---------------------------------------------------- */

static void t_codec(void **state)
{
    (void)state;
    smoe__freq_id id = {LAYERS, EXPERTS, 0x1122334455667788ull, 123456};
    uint64_t counts[N], back[N];
    for (uint32_t k = 0; k < N; k++)
        counts[k] = (uint64_t)k * k * 1000003u + (k == 7 ? UINT64_MAX / 2 : 0);
    unsigned char buf[SMOE__FREQ_HEADER_SIZE + 8 * N], bad[sizeof buf];
    smoe__freq_encode(buf, &id, counts);
    assert_memory_equal(buf, SMOE__FREQ_MAGIC, 8);
    const char *why;
    memset(back, 0, sizeof back);
    assert_int_equal(smoe__freq_decode(buf, sizeof buf, &id, back, &why), SMOE_FREQ_LOADED);
    assert_memory_equal(back, counts, sizeof counts);

    /* Every way to be wrong leaves the counts untouched. */
    struct {
        const char *what;
        size_t off;     /* byte to change, or SIZE_MAX */
        uint64_t len;   /* length to decode */
        int want;
    } cases[] = {
        {"empty", SIZE_MAX, 0, SMOE_FREQ_TRUNCATED},
        {"header cut", SIZE_MAX, 63, SMOE_FREQ_TRUNCATED},
        {"counts cut", SIZE_MAX, sizeof buf - 8, SMOE_FREQ_TRUNCATED},
        {"one byte short", SIZE_MAX, sizeof buf - 1, SMOE_FREQ_TRUNCATED},
        {"magic", 0, sizeof buf, SMOE_FREQ_CORRUPT},
        {"version", 8, sizeof buf, SMOE_FREQ_VERSION},
        {"header size", 12, sizeof buf, SMOE_FREQ_CORRUPT},
        {"layers", 16, sizeof buf, SMOE_FREQ_CORRUPT},    /* 2 layers: bytes left over */
        {"experts", 20, sizeof buf, SMOE_FREQ_TRUNCATED}, /* 11 experts: too short */
        {"total", 40, sizeof buf, SMOE_FREQ_CORRUPT},
        {"reserved", 48, sizeof buf, SMOE_FREQ_CORRUPT},
        {"checksum", 60, sizeof buf, SMOE_FREQ_CORRUPT},
        {"a count", 64 + 8 * 5 + 2, sizeof buf, SMOE_FREQ_CORRUPT},
        {"the last count", sizeof buf - 1, sizeof buf, SMOE_FREQ_CORRUPT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, buf, sizeof buf);
        if (cases[i].off != SIZE_MAX)
            bad[cases[i].off] ^= 0x01;
        memset(back, 0xab, sizeof back);
        int r = smoe__freq_decode(bad, cases[i].len, &id, back, &why);
        if (r != cases[i].want)
            fail_msg("%s: decoded as %d, want %d (%s)", cases[i].what, r, cases[i].want, why);
        for (uint32_t k = 0; k < N; k++)
            assert_int_equal(back[k], 0xababababababababull);
        assert_true(strlen(why) > 0);
    }
    /* Trailing bytes. */
    unsigned char longer[sizeof buf + 8];
    memcpy(longer, buf, sizeof buf);
    memset(longer + sizeof buf, 0, 8);
    assert_int_equal(smoe__freq_decode(longer, sizeof longer, &id, back, &why),
                     SMOE_FREQ_CORRUPT);
    /* Intact, but for another vault: identity, shape or file size. */
    smoe__freq_id other = id;
    other.vault_id ^= 1;
    assert_int_equal(smoe__freq_decode(buf, sizeof buf, &other, back, &why), SMOE_FREQ_FOREIGN);
    other = id;
    other.vault_size++;
    assert_int_equal(smoe__freq_decode(buf, sizeof buf, &other, back, &why), SMOE_FREQ_FOREIGN);
    other = id;
    other.layers = EXPERTS;
    other.experts = LAYERS;
    assert_int_equal(smoe__freq_decode(buf, sizeof buf, &other, back, &why), SMOE_FREQ_FOREIGN);
    assert_non_null(strstr(why, "another vault"));
}

/* ---- through streams ----------------------------------------------------- */

static void t_round_trip(void **state)
{
    (void)state;
    unlink(g_freq);
    tu_logbuf lb;
    smoe_stream *s = open_v(g_vault, 0, &lb);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.freq_status, SMOE_FREQ_ABSENT);
    assert_int_equal(st.freq_saving, SMOE_FREQ_SAVE_ON);
    assert_int_equal(lb.warns, 1); /* the file is missing: said once */
    assert_non_null(strstr(lb.text, g_freq));
    claim_n(s, 0, 1, 3);
    claim_n(s, 2, 9, 5);
    claim_n(s, 1, 4, 1);
    assert_int_equal(count_of(s, 0, 1), 3);
    assert_int_equal(count_of(s, 2, 9), 5);
    /* A claim that hits a retained slot counts too; failures do not. */
    smoe_blob b;
    assert_int_equal(smoe_claim(s, 0, 1, &b), SMOE_HIT);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_claim(s, 0, 2, &b), SMOE_ENOTRESIDENT);
    assert_int_equal(count_of(s, 0, 1), 4);
    assert_int_equal(count_of(s, 0, 2), 0);

    /* On request. */
    assert_int_equal(smoe_freq_save(s), 0);
    assert_true(tu_exists(g_freq));
    assert_int_equal(tu_file_size(g_freq), SMOE__FREQ_HEADER_SIZE + 8 * N);
    assert_int_equal(tu_stats(s).freq_saves, 1);
    claim_n(s, 1, 4, 2);
    assert_int_equal(smoe_close(s), 0); /* saves again */
    assert_int_equal(tmp_files(), 0);

    s = open_v(g_vault, 0, &lb);
    st = tu_stats(s);
    assert_int_equal(st.freq_status, SMOE_FREQ_LOADED);
    assert_int_equal(lb.warns, 0);
    assert_int_equal(count_of(s, 0, 1), 4);
    assert_int_equal(count_of(s, 2, 9), 5);
    assert_int_equal(count_of(s, 1, 4), 3);
    assert_int_equal(count_of(s, 0, 0), 0);
    /* Counting goes on from the loaded figures. */
    claim_n(s, 0, 1, 1);
    assert_int_equal(smoe_close(s), 0);
    s = open_v(g_vault, 0, NULL);
    assert_int_equal(count_of(s, 0, 1), 5);
    assert_int_equal(smoe_close(s), 0);

    assert_int_equal(smoe_freq_save(NULL), SMOE_EINVAL);
}

static void t_two_vaults(void **state)
{
    (void)state;
    char other[620], other_freq[640];
    snprintf(other, sizeof other, "%s/other.smoe", g_dir);
    snprintf(other_freq, sizeof other_freq, "%s.freq", other);
    assert_int_equal(tu_make_vault(other, LAYERS, EXPERTS, 1000, 20000, 12), 0);
    unlink(g_freq);
    smoe_stream *a = open_v(g_vault, 0, NULL), *b = open_v(other, 0, NULL);
    claim_n(a, 0, 0, 2);
    claim_n(b, 0, 0, 7);
    assert_int_equal(smoe_close(a), 0);
    assert_int_equal(smoe_close(b), 0);
    assert_true(tu_exists(g_freq));
    assert_true(tu_exists(other_freq));
    a = open_v(g_vault, 0, NULL);
    b = open_v(other, 0, NULL);
    assert_int_equal(count_of(a, 0, 0), 2);
    assert_int_equal(count_of(b, 0, 0), 7);
    assert_int_equal(smoe_close(a), 0);
    assert_int_equal(smoe_close(b), 0);

    /* The other vault's histogram under this vault's name is foreign. */
    uint64_t n;
    unsigned char *data = tu_read_file(other_freq, &n);
    FILE *f = fopen(g_freq, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
    free(data);
    tu_logbuf lb;
    a = open_v(g_vault, 0, &lb);
    assert_int_equal(tu_stats(a).freq_status, SMOE_FREQ_FOREIGN);
    assert_int_equal(count_of(a, 0, 0), 0);
    assert_int_equal(lb.warns, 1);
    assert_non_null(strstr(lb.text, "foreign"));
    assert_int_equal(smoe_close(a), 0);
    unlink(other);
    unlink(other_freq);
}

static void t_repacked(void **state)
{
    (void)state;
    /* The same experts written in another order: another vault identity. */
    char repacked[620];
    snprintf(repacked, sizeof repacked, "%s/repack.smoe", g_dir);
    tu_vault_opts vo = {0};
    vo.layers = LAYERS;
    vo.experts = EXPERTS;
    vo.min_bytes = 1000;
    vo.max_bytes = 20000;
    vo.seed = 11;
    vo.top_k = 2;
    vo.model = "tu-test";
    vo.reverse = 1;
    assert_int_equal(tu_make_vault_ex(repacked, &vo), 0);
    char rfreq[640];
    snprintf(rfreq, sizeof rfreq, "%s.freq", repacked);
    write_hist(rfreq); /* made for g_vault */
    tu_logbuf lb;
    smoe_stream *s = open_v(repacked, 0, &lb);
    assert_int_equal(tu_stats(s).freq_status, SMOE_FREQ_FOREIGN);
    assert_int_equal(count_of(s, 0, 0), 0);
    assert_int_equal(lb.warns, 1);
    assert_int_equal(smoe_close(s), 0);
    unlink(repacked);
    unlink(rfreq);
}

/* Write a damaged histogram at g_freq and check open ignores it. */
static void expect_ignored(const char *what, void (*damage)(void), int want)
{
    write_hist(g_freq);
    damage();
    tu_logbuf lb;
    smoe_stream *s = open_v(g_vault, 0, &lb);
    smoe_stats st = tu_stats(s);
    if ((int)st.freq_status != want)
        fail_msg("%s: freq_status %llu, want %d", what, (unsigned long long)st.freq_status,
                 want);
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t e = 0; e < EXPERTS; e++)
            assert_int_equal(count_of(s, l, e), 0);
    assert_int_equal(lb.warns, 1);
    assert_non_null(strstr(lb.text, "ignored"));
    assert_int_equal(st.freq_saving, SMOE_FREQ_SAVE_ON);
    /* Close replaces it with a good one. */
    claim_n(s, 1, 1, 1);
    assert_int_equal(smoe_close(s), 0);
    s = open_v(g_vault, 0, NULL);
    assert_int_equal(tu_stats(s).freq_status, SMOE_FREQ_LOADED);
    assert_int_equal(count_of(s, 1, 1), 1);
    assert_int_equal(smoe_close(s), 0);
}

static void d_truncate_counts(void) { tu_truncate(g_freq, SMOE__FREQ_HEADER_SIZE + 8 * 7); }
static void d_truncate_header(void) { tu_truncate(g_freq, 20); }
static void d_empty(void) { tu_truncate(g_freq, 0); }
static void d_flip_count(void) { tu_flip_byte(g_freq, SMOE__FREQ_HEADER_SIZE + 8 * 3); }
static void d_flip_magic(void) { tu_flip_byte(g_freq, 2); }
static void d_version(void) { tu_patch_u32(g_freq, 8, 2); }
static void d_garbage(void)
{
    FILE *f = fopen(g_freq, "wb");
    fputs("this is not a histogram\n", f);
    fclose(f);
}

static void t_ignored(void **state)
{
    (void)state;
    expect_ignored("truncated counts", d_truncate_counts, SMOE_FREQ_TRUNCATED);
    expect_ignored("truncated header", d_truncate_header, SMOE_FREQ_TRUNCATED);
    expect_ignored("empty", d_empty, SMOE_FREQ_TRUNCATED);
    expect_ignored("flipped count", d_flip_count, SMOE_FREQ_CORRUPT);
    expect_ignored("bad magic", d_flip_magic, SMOE_FREQ_CORRUPT);
    expect_ignored("version 2", d_version, SMOE_FREQ_VERSION);
    expect_ignored("text", d_garbage, SMOE_FREQ_CORRUPT);
}

/* ---- read-only directory --------------------------------------------------- */

/* The OS table, except that nothing can be created in g_dir. */
static int ro_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    if ((flags & (SMOE__IO_WRONLY | SMOE__IO_RDWR | SMOE__IO_TMPFILE)) &&
        !strncmp(path, g_dir, strlen(g_dir)))
        return -EROFS;
    return smoe__io_os.open(&smoe__io_os, path, flags);
}

static void t_readonly(void **state)
{
    (void)state;
    write_hist(g_freq);
    smoe__io io = smoe__io_os;
    io.open = ro_open;
    smoe__io_set(&io);
    tu_logbuf lb;
    smoe_stream *s = open_v(g_vault, 0, &lb);
    smoe__io_set(NULL);
    smoe_stats st = tu_stats(s);
    /* It still loads: pre-warm can use it. */
    assert_int_equal(st.freq_status, SMOE_FREQ_LOADED);
    assert_int_equal(st.freq_saving, SMOE_FREQ_SAVE_READONLY);
    assert_int_equal(lb.warns, 1);
    assert_non_null(strstr(lb.text, "will not be saved"));
    assert_int_equal(count_of(s, 0, 3), 10);
    claim_n(s, 0, 3, 1);
    assert_int_equal(smoe_freq_save(s), SMOE_ENOTSUP);
    assert_non_null(strstr(smoe_last_error(), "not writable"));
    assert_int_equal(smoe_close(s), 0);
    assert_int_equal(tmp_files(), 0);
    /* The file is as it was. */
    s = open_v(g_vault, 0, NULL);
    assert_int_equal(count_of(s, 0, 3), 10);
    assert_int_equal(smoe_close(s), 0);
}

/* ---- interrupted saves ------------------------------------------------------- */

static void interrupted(enum fio_call call, int err)
{
    write_hist(g_freq);
    uint64_t n0;
    unsigned char *before = tu_read_file(g_freq, &n0);
    static struct fault_io f;
    fault_io_install(&f);
    tu_logbuf lb;
    smoe_stream *s = open_v(g_vault, 0, &lb);
    claim_n(s, 2, 2, 4);
    /* Workers are idle: nothing else calls the table while we arm it. */
    f.call = call;
    f.err = err;
    f.nth = atomic_load(&f.count[call]) + 1;
    f.mode = FIO_FAIL_ONCE;
    int r = smoe_freq_save(s);
    if (r >= 0)
        fail_msg("save with call %d failing returned %d", (int)call, r);
    assert_int_equal(atomic_load(&f.fired), 1);
    assert_int_equal(tu_stats(s).freq_save_errors, 1);
    assert_int_equal(tu_stats(s).freq_saves, 0);
    uint64_t n1;
    unsigned char *after = tu_read_file(g_freq, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(after);
    assert_int_equal(tmp_files(), 0);
    /* The next save works. */
    assert_int_equal(smoe_freq_save(s), 0);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    s = open_v(g_vault, 0, NULL);
    assert_int_equal(tu_stats(s).freq_status, SMOE_FREQ_LOADED);
    assert_int_equal(count_of(s, 2, 2), (2 * EXPERTS + 2) * 3 + 1 + 4);
    assert_int_equal(smoe_close(s), 0);
    free(before);
}

static void t_interrupted_rename(void **state)
{
    (void)state;
    interrupted(FIO_RENAME, EIO);
    assert_non_null(strstr(smoe_last_error(), "renaming"));
}

static void t_disk_full(void **state)
{
    (void)state;
    interrupted(FIO_PWRITE, ENOSPC);
}

static void t_fsync_fails(void **state)
{
    (void)state;
    interrupted(FIO_FSYNC, EIO);
}

static void t_close_save_fails(void **state)
{
    (void)state;
    /* A save that fails at close: close still succeeds, the log says so,
     * and the previous file stays. */
    write_hist(g_freq);
    uint64_t n0;
    unsigned char *before = tu_read_file(g_freq, &n0);
    static struct fault_io f;
    fault_io_install(&f);
    tu_logbuf lb;
    smoe_stream *s = open_v(g_vault, 0, &lb);
    claim_n(s, 0, 0, 1);
    f.call = FIO_RENAME;
    f.err = EIO;
    f.nth = atomic_load(&f.count[FIO_RENAME]) + 1;
    f.mode = FIO_FAIL_ONCE;
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    assert_non_null(strstr(lb.text, "not saved"));
    uint64_t n1;
    unsigned char *after = tu_read_file(g_freq, &n1);
    assert_int_equal(n1, n0);
    assert_memory_equal(after, before, n0);
    free(after);
    free(before);
    assert_int_equal(tmp_files(), 0);
}

static void t_off(void **state)
{
    (void)state;
    unlink(g_freq);
    smoe_stream *s = open_v(g_vault, SMOE_OPEN_NO_FREQ, NULL);
    smoe_stats st = tu_stats(s);
    assert_int_equal(st.freq_status, SMOE_FREQ_OFF);
    assert_int_equal(st.freq_saving, SMOE_FREQ_SAVE_OFF);
    claim_n(s, 0, 0, 2);
    assert_int_equal(count_of(s, 0, 0), 2); /* still counted, for pre-warm */
    assert_int_equal(smoe_freq_save(s), SMOE_ENOTSUP);
    assert_int_equal(smoe_close(s), 0);
    assert_false(tu_exists(g_freq));

    /* An explicit path. */
    char *p = tu_path(g_dir, "elsewhere.freq");
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.workers = 1;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_ALLOW_BUFFERED;
    o.freq_path = p;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    claim_n(s, 0, 0, 1);
    assert_int_equal(smoe_close(s), 0);
    assert_true(tu_exists(p));
    assert_false(tu_exists(g_freq));
    unlink(p);
    free(p);
}

/* A test that fails half-way must not leave its fault table to the next. */
static int remove_faults(void **state)
{
    (void)state;
    fault_io_remove();
    smoe__io_set(NULL);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(t_codec, remove_faults),
        cmocka_unit_test_teardown(t_round_trip, remove_faults),
        cmocka_unit_test_teardown(t_two_vaults, remove_faults),
        cmocka_unit_test_teardown(t_repacked, remove_faults),
        cmocka_unit_test_teardown(t_ignored, remove_faults),
        cmocka_unit_test_teardown(t_readonly, remove_faults),
        cmocka_unit_test_teardown(t_interrupted_rename, remove_faults),
        cmocka_unit_test_teardown(t_disk_full, remove_faults),
        cmocka_unit_test_teardown(t_fsync_fails, remove_faults),
        cmocka_unit_test_teardown(t_close_save_fails, remove_faults),
        cmocka_unit_test_teardown(t_off, remove_faults),
    };
    return cmocka_run_group_tests_name("freq", tests, setup, teardown);
}
