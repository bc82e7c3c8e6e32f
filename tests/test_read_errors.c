/*
 * Description: the read path's errors: what a claim reports when a blob's
 * bytes or the read of them go wrong.
 *  - nonzero_padding_refused: a blob whose padding is not zero is refused
 *    with verification on (SMOE_ECHECKSUM, a message saying so), as
 *    `smoe verify` flags it;
 *  - read_error_names_errno: a failed read says why: the errno's name and
 *    text, the file offset and length of the failed read, and whether
 *    retries were used up, through smoe_last_error() after smoe_claim and
 *    smoe_claim_wait;
 *  - unaligned_short_direct_read_continues: a direct read cut short off an
 *    alignment boundary goes on from the last aligned boundary, keeping the
 *    bytes before it; reads that keep coming back cut make no progress and
 *    end in SMOE_EIO; a file that ends off a boundary is SMOE_ETRUNC (direct
 *    I/O emulated by tests/fault_io.c, so this runs on any file system);
 *  - cut_vault_is_truncated: a vault cut to any length, 128 and 129 bytes
 *    included, is SMOE_ETRUNC.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "platform/dio.h"
#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"
#include "vault/vault.h"

static smoe_stream *open_stream(const tu_fx *f, uint32_t chunk, int verify, unsigned flags)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.ring_slots = f->layers * f->experts;
    o.chunk_bytes = chunk;
    o.verify = verify ? SMOE_VERIFY_ON : SMOE_VERIFY_OFF;
    o.flags = flags | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, &o, &s);
    if (r != 0)
        fail_msg("smoe_open %s: %s: %s", f->path, smoe_err_name(r), smoe_last_error());
    return s;
}

/* 1 if the blob holds exactly what the test vault wrote for it. */
static int blob_ok(const tu_fx *f, const smoe_blob *b)
{
    uint64_t n = synth_blob_size(f->seed, b->layer, b->expert, f->min_bytes, f->max_bytes);
    if (b->size != n)
        return 0;
    unsigned char *want = malloc(n);
    assert_non_null(want);
    synth_blob_fill(want, n, f->seed, b->layer, b->expert);
    int ok = memcmp(b->data, want, n) == 0;
    free(want);
    return ok;
}

static void expect_msg(const char *needle)
{
    tu_expect_contains(smoe_last_error(), needle);
}

/* ---- padding that is not zero ------------------------------------------------ */

/* One byte of blob (0, 0)'s padding is set (the hash covers the payload
 * only, so the vault still opens): refused with verification on, the
 * message naming the padding; other blobs are unaffected. */
static void nonzero_padding_refused(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 3, 1000, 30000, 8);
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, f->path, &smoe__io_os), 0);
    const smoe__vault_entry e = *smoe__vault_entry_of(&v, 0, 0);
    smoe__vault_free(&v);
    assert_true(e.padded > e.size);
    const uint64_t where[2] = {e.size, e.padded - 1}; /* first and last padding byte */
    for (int i = 0; i < 2; i++) {
        tu_flip_byte(f->path, e.offset + where[i]);
        smoe_stream *s = open_stream(f, 0, 1, SMOE_OPEN_ALLOW_BUFFERED);
        smoe_blob b;
        int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
        if (r != SMOE_ECHECKSUM)
            fail_msg("padding byte %" PRIu64 " set: claim returned %s, expected "
                     "SMOE_ECHECKSUM", where[i], smoe_err_name(r));
        assert_false(b.held);
        char want[1200];
        snprintf(want, sizeof want, "claim: (layer 0, expert 0) of %s: blob checksum "
                 "mismatch: the padding is not zero (byte %" PRIu64 " of the blob, file "
                 "offset %" PRIu64 ")", f->path, where[i], e.offset + where[i]);
        expect_msg(want);
        /* The failure stays until a prefetch retries: smoe_claim reports it too. */
        assert_int_equal(smoe_claim(s, 0, 0, &b), SMOE_ECHECKSUM);
        expect_msg(want);
        for (uint32_t x = 1; x < 3; x++) {
            assert_true(smoe_claim_wait(s, 0, x, tu_bound_ns(), &b) >= 0);
            assert_true(blob_ok(f, &b));
            assert_int_equal(smoe_release(s, &b), 0);
        }
        assert_int_equal(smoe_close(s), 0);
        /* Verification off trusts the storage: the payload is handed out. */
        s = open_stream(f, 0, 0, SMOE_OPEN_ALLOW_BUFFERED);
        assert_true(smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b) >= 0);
        assert_true(blob_ok(f, &b));
        assert_int_equal(smoe_release(s, &b), 0);
        assert_int_equal(smoe_close(s), 0);
        tu_flip_byte(f->path, e.offset + where[i]); /* restore */
    }
    tu_fx_free(f);
}

/* ---- a failed read says why ------------------------------------------------- */

/* The claim's message after blob (0, 0)'s read failed, through both
 * smoe_claim_wait and smoe_claim, must contain want. */
static void claim_fails_with(smoe_stream *s, int code, const char *want)
{
    smoe_blob b;
    int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
    if (r != code)
        fail_msg("claim_wait returned %s, expected %s: %s", smoe_err_name(r),
                 smoe_err_name(code), smoe_last_error());
    expect_msg(want);
    r = smoe_claim(s, 0, 0, &b);
    assert_int_equal(r, code);
    expect_msg(want);
}

static void read_error_names_errno(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 2, 40000, 60000, 15);
    struct fault_io fio;
    fault_io_install(&fio);
    static const struct {
        int eno;
        const char *name;
    } errs[] = {{EIO, "EIO"}, {ENOMEM, "ENOMEM"}, {EINVAL, "EINVAL"}, {ENOSPC, "ENOSPC"}};
    char want[1200];
    for (int chunked = 0; chunked <= 1; chunked++)
        for (size_t i = 0; i < sizeof errs / sizeof *errs; i++) {
            smoe_stream *s = open_stream(f, chunked ? 16384 : 0, 1, SMOE_OPEN_ALLOW_BUFFERED);
            const smoe__vault_entry *e = smoe__vault_entry_of(&s->vault, 0, 0);
            /* whole blob in one read, or its second 16 KiB chunk */
            uint64_t off = e->offset + (chunked ? 16384 : 0);
            uint64_t len = chunked ? 16384 : e->padded;
            fault_io_arm(&fio, FIO_FAIL_OFFSET, FIO_PREAD, 0, errs[i].eno, off);
            snprintf(want, sizeof want, "claim: (layer 0, expert 0) of %s: read failed: %s "
                     "(%s) at offset %" PRIu64 ", %" PRIu64 " bytes", f->path, errs[i].name,
                     strerror(errs[i].eno), off, len);
            claim_fails_with(s, SMOE_EIO, want);
            assert_true(strstr(smoe_last_error(), "attempts") == NULL);
            fault_io_disarm(&fio);
            assert_int_equal(smoe_close(s), 0);
        }
    /* Interrupted or refused on every attempt: the retries are used up. */
    static const struct {
        int eno;
        const char *name;
    } storms[] = {{EINTR, "EINTR"}, {EAGAIN, "EAGAIN"}};
    for (size_t i = 0; i < sizeof storms / sizeof *storms; i++) {
        smoe_stream *s = open_stream(f, 0, 1, SMOE_OPEN_ALLOW_BUFFERED);
        const smoe__vault_entry *e = smoe__vault_entry_of(&s->vault, 0, 0);
        fault_io_arm(&fio, FIO_FAIL_FROM, FIO_PREAD, 1, storms[i].eno, 0);
        snprintf(want, sizeof want, "claim: (layer 0, expert 0) of %s: read failed: %s (%s) "
                 "at offset %" PRIu64 ", %" PRIu64 " bytes, after %d attempts (retries used "
                 "up)", f->path, storms[i].name, strerror(storms[i].eno), e->offset,
                 e->padded, SMOE__IO_MAX_STALLS);
        claim_fails_with(s, SMOE_EIO, want);
        fault_io_disarm(&fio);
        assert_int_equal(smoe_close(s), 0);
    }
    /* The file ends inside the blob: where. */
    smoe_stream *s = open_stream(f, 0, 1, SMOE_OPEN_BUFFERED);
    const smoe__vault_entry *e = smoe__vault_entry_of(&s->vault, 0, 0);
    tu_truncate(f->path, e->offset + 5000);
    snprintf(want, sizeof want, "claim: (layer 0, expert 0) of %s: file is truncated: the "
             "file ends at offset %" PRIu64 ", %" PRIu64 " bytes before the end of the read",
             f->path, e->offset + 5000, e->padded - 5000);
    claim_fails_with(s, SMOE_ETRUNC, want);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* ---- direct reads cut short -------------------------------------------------- */

/* The direct I/O alignment the library goes on from after a cut read on
 * path's file system: the larger of what statx reports for memory and
 * offsets, else 16 KiB (worker.c). */
static uint32_t dio_align_of(const char *path)
{
    /* The library's own descriptor: a handle on Windows, not the C
     * library's. */
    int fd = smoe__io_os.open(&smoe__io_os, path, SMOE__IO_RDONLY);
    assert_true(fd >= 0);
    uint32_t mem_align, off_align;
    int known = smoe__dio_align(fd, &mem_align, &off_align) == 0 && off_align;
    smoe__io_os.close(&smoe__io_os, fd);
    if (!known)
        return SMOE__ALIGN;
    return mem_align > off_align ? mem_align : off_align;
}

/* Direct reads, emulated (offsets, lengths and buffers off the alignment
 * fail with EINVAL, as O_DIRECT does). The first read of blob (0, 0) comes
 * back cut off an alignment boundary: the library goes on from the last
 * boundary before the cut, keeping the bytes up to there, and the claim
 * gets the exact bytes. A file that ends off a boundary is SMOE_ETRUNC,
 * not SMOE_EIO. */
static void unaligned_short_direct_read_continues(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 2, 40000, 60000, 18);
    const uint32_t align = dio_align_of(f->path);
    struct fault_io fio;
    fault_io_install(&fio);
    atomic_store(&fio.fake_direct, align < 4096 ? align : 4096);
    static const uint64_t cuts[] = {20000, 100, 16384 + 4096 + 1, 40000, 511};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        smoe_stream *s = open_stream(f, 0, 1, 0);
        assert_int_equal(tu_stats(s).io_mode, SMOE_IO_DIRECT);
        const smoe__vault_entry *e = smoe__vault_entry_of(&s->vault, 0, 0);
        uint32_t first = atomic_load(&fio.nlog);
        fault_io_arm(&fio, FIO_SHORT_ONCE, FIO_PREAD, 1, 0, cuts[i]);
        smoe_blob b;
        int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
        if (r < 0)
            fail_msg("direct read cut to %" PRIu64 " bytes: %s: %s", cuts[i], smoe_err_name(r),
                     smoe_last_error());
        assert_true(blob_ok(f, &b));
        assert_int_equal(smoe_release(s, &b), 0);
        assert_int_equal(atomic_load(&fio.fired), 1);
        /* The cut read, then one from the last boundary before the cut. */
        assert_int_equal(atomic_load(&fio.nlog) - first, 2);
        assert_int_equal(atomic_load(&fio.log[first]), e->offset);
        assert_int_equal(atomic_load(&fio.log[first + 1]), e->offset + cuts[i] / align * align);
        fault_io_disarm(&fio);
        assert_int_equal(smoe_close(s), 0);
    }
    /* Every read comes back cut to 100 bytes: no progress, a definite
     * error once the retries are used up. */
    smoe_stream *s = open_stream(f, 0, 1, 0);
    const smoe__vault_entry *e = smoe__vault_entry_of(&s->vault, 0, 0);
    fault_io_arm(&fio, FIO_SHORT, FIO_PREAD, 1, 0, 100);
    smoe_blob b;
    int r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
    if (r != SMOE_EIO)
        fail_msg("direct reads cut to 100 bytes: %s, expected SMOE_EIO: %s", smoe_err_name(r),
                 smoe_last_error());
    char want[1200];
    snprintf(want, sizeof want, "read failed: short direct reads made no progress at offset %"
             PRIu64 ", %" PRIu64 " bytes, after %d attempts (retries used up)", e->offset,
             e->padded, SMOE__IO_MAX_STALLS);
    expect_msg(want);
    fault_io_disarm(&fio);
    assert_int_equal(smoe_close(s), 0);
    /* The file ends 5000 bytes into the blob: a definite SMOE_ETRUNC. */
    s = open_stream(f, 0, 1, 0);
    e = smoe__vault_entry_of(&s->vault, 0, 0);
    tu_truncate(f->path, e->offset + 5000);
    r = smoe_claim_wait(s, 0, 0, tu_bound_ns(), &b);
    if (r != SMOE_ETRUNC)
        fail_msg("direct read of a blob the file ends in: %s, expected SMOE_ETRUNC: %s",
                 smoe_err_name(r), smoe_last_error());
    snprintf(want, sizeof want, "file is truncated: the file ends at offset %" PRIu64 ", %"
             PRIu64 " bytes before the end of the read", e->offset + 5000, e->padded - 5000);
    expect_msg(want);
    assert_int_equal(smoe_close(s), 0);
    fault_io_remove();
    tu_fx_free(f);
}

/* ---- a vault cut short ------------------------------------------------------ */

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* Every length the vault can be cut to, up to 640 bytes, then every 997th,
 * then the last 640: SMOE_ETRUNC, with a message naming the file. */
static void cut_vault_is_truncated(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 4, 1000, 40000, 19);
    uint64_t size;
    unsigned char *whole = tu_read_file(f->path, &size);
    char *cut = tu_path(f->dir, "cut.smoe");
    unsigned tried = 0, wrong = 0;
    for (uint64_t n = 0; n < size; n += n < 640 || n + 640 >= size ? 1 : 997) {
        write_file(cut, whole, (size_t)n);
        smoe__vault v;
        int r = smoe__vault_load(&v, cut, &smoe__io_os);
        tried++;
        if (r != SMOE_ETRUNC || !strstr(smoe_last_error(), cut)) {
            if (wrong++ < 8)
                print_message("cut to %" PRIu64 " bytes: %s: %s\n", n, smoe_err_name(r),
                              smoe_last_error());
        }
        smoe__vault_free(&v);
    }
    print_message("cut_vault_is_truncated: "
                  "%u cut lengths of a %" PRIu64 "-byte vault, %u not SMOE_ETRUNC\n",
                  tried, size, wrong);
    assert_int_equal(wrong, 0);
    /* Through the public API too. */
    for (uint64_t n = 128; n <= 129; n++) {
        write_file(cut, whole, (size_t)n);
        smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
        o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
        smoe_stream *s = NULL;
        assert_int_equal(smoe_open(cut, &o, &s), SMOE_ETRUNC);
        assert_null(s);
        expect_msg("truncated");
    }
    free(cut);
    free(whole);
    tu_fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nonzero_padding_refused),
        cmocka_unit_test(read_error_names_errno),
        cmocka_unit_test(unaligned_short_direct_read_continues),
        cmocka_unit_test(cut_vault_is_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
