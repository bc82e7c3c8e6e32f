/*
 * Description: the Windows files of the platform layer (src/platform), run
 * under Wine by tests/windows/build.sh. A vault whose path has non-ASCII
 * characters opens and reads through the wide API (UTF-8 converted); a
 * failed open names the Windows error (number, name, text) beside the
 * errno's text; direct reads get a sector alignment of at least 4 KiB and
 * a stream with direct I/O reads correct bytes; the histogram is saved over
 * an existing one (MoveFileExW replacing it) and read back at the next
 * open; the memory probe reads GlobalMemoryStatusEx, and inside a job
 * object with a process memory limit reports that limit as a level.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include <cmocka.h>

#include "platform/dio.h"
#include "platform/mem.h"
#include "synth.h"
#include "testutil.h"

static void utf8_path_opens(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 3, 1000, 20000, 31);
    /* "vault-\u00fc\u00df\u65e5.smoe" in UTF-8 */
    char *p = tu_path(f->dir, "vault-\xc3\xbc\xc3\x9f\xe6\x97\xa5.smoe");
    assert_int_equal(tu_make_vault(p, 2, 3, 1000, 20000, 31), 0);
    /* The file is there under its wide name. */
    wchar_t w[1024];
    assert_true(MultiByteToWideChar(CP_UTF8, 0, p, -1, w, 1024) > 0);
    assert_true(GetFileAttributesW(w) != INVALID_FILE_ATTRIBUTES);
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    int r = smoe_open(p, &o, &s);
    if (r != 0)
        fail_msg("smoe_open %s: %s", p, smoe_last_error());
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 1, 2, tu_bound_ns(), &b) >= 0);
    assert_int_equal(b.size, synth_blob_size(31, 1, 2, 1000, 20000));
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
    free(p);
    tu_fx_free(f);
}

static void failed_open_names_windows_error(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(1, 1, 1000, 2000, 1);
    char *p = tu_path(f->dir, "absent.smoe");
    smoe_stream *s = NULL;
    assert_int_not_equal(smoe_open(p, NULL, &s), 0);
    const char *m = smoe_last_error();
    print_message("%s\n", m);
    tu_expect_contains(m, p);
    tu_expect_contains(m, "Windows error 2 ERROR_FILE_NOT_FOUND");
    free(p);
    tu_fx_free(f);
}

static void direct_reads_aligned(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 4, 5000, 70000, 7);
    int fd = smoe__io_os.open(&smoe__io_os, f->path, SMOE__IO_RDONLY | SMOE__IO_DIRECT);
    assert_true(fd >= 0);
    uint32_t mem = 0, off = 0;
    assert_int_equal(smoe__dio_align(fd, &mem, &off), 0);
    print_message("sector alignment: memory %u, offsets %u\n", mem, off);
    assert_true(off >= 4096 && (off & (off - 1)) == 0 && mem == off);
    smoe__io_os.close(&smoe__io_os, fd);
    /* Direct I/O required: no fallback to buffered reads. */
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.ring_slots = 4;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ;
    smoe_stream *s = NULL;
    int r = smoe_open(f->path, &o, &s);
    if (r != 0)
        fail_msg("smoe_open with direct I/O: %s", smoe_last_error());
    for (uint32_t e = 0; e < 4; e++) {
        smoe_blob b;
        assert_true(smoe_claim_wait(s, 1, e, tu_bound_ns(), &b) >= 0);
        unsigned char *want = malloc(b.size);
        assert_non_null(want);
        synth_blob_fill(want, b.size, 7, 1, e);
        assert_memory_equal(b.data, want, b.size);
        free(want);
        assert_int_equal(smoe_release(s, &b), 0);
    }
    assert_int_equal(smoe_close(s), 0);
    tu_fx_free(f);
}

static void histogram_replaced(void **state)
{
    (void)state;
    tu_fx *f = tu_fx_new(2, 3, 1000, 20000, 5);
    char freq[700];
    snprintf(freq, sizeof freq, "%s.freq", f->path);
    for (int round = 0; round < 2; round++) {
        smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
        o.ring_slots = 4;
        o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_ALLOW_BUFFERED;
        smoe_stream *s = NULL;
        assert_int_equal(smoe_open(f->path, &o, &s), 0);
        smoe_stats st = tu_stats(s);
        /* the second open loads what the first saved */
        assert_int_equal(st.freq_status, round ? SMOE_FREQ_LOADED : SMOE_FREQ_ABSENT);
        smoe_blob b;
        assert_true(smoe_claim_wait(s, 0, 1, tu_bound_ns(), &b) >= 0);
        assert_int_equal(smoe_release(s, &b), 0);
        assert_int_equal(smoe_freq_save(s), 0); /* the second round: over the first's file */
        assert_true(tu_exists(freq));
        assert_int_equal(smoe_close(s), 0);
    }
    assert_int_equal(tu_count_files(f->dir), 2); /* the vault and its histogram: no temporary */
    tu_fx_free(f);
}

static void memory_probe_and_job_limit(void **state)
{
    (void)state;
    smoe__mem_probe p;
    smoe__mem_probe_read(&smoe__io_os, &p);
    assert_int_equal(p.have_mem, 1);
    assert_string_equal(p.mem_source, "GlobalMemoryStatusEx");
    assert_true(p.mem_total > 0 && p.mem_available <= p.mem_total);
    /* Into a job with a process memory limit of 64 GiB. */
    HANDLE job = CreateJobObjectW(NULL, NULL);
    assert_non_null(job);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION x;
    memset(&x, 0, sizeof x);
    x.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY;
    x.ProcessMemoryLimit = (SIZE_T)64 << 30;
    assert_true(SetInformationJobObject(job, JobObjectExtendedLimitInformation, &x, sizeof x));
    if (!AssignProcessToJobObject(job, GetCurrentProcess())) {
        CloseHandle(job);
        skip(); /* already in a job that does not nest (before Windows 8) */
    }
    /* Wine 8 keeps a job's limits without reporting them back (its
     * QueryInformationJobObject answers zeros, IsProcessInJob no): what
     * the probe reads cannot be checked there. */
    BOOL in = FALSE;
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION q;
    memset(&q, 0, sizeof q);
    if (!IsProcessInJob(GetCurrentProcess(), NULL, &in) || !in ||
        !QueryInformationJobObject(NULL, JobObjectExtendedLimitInformation, &q, sizeof q, NULL) ||
        q.ProcessMemoryLimit != x.ProcessMemoryLimit) {
        print_message("the system does not report the job's limit back (Wine): not checked\n");
        CloseHandle(job);
        skip();
    }
    smoe__mem_probe_read(&smoe__io_os, &p);
    print_message("in a job: %u level(s); %s: limit %llu, usage %llu\n", p.n_levels,
                  p.n_levels ? p.level[0].dir : "-", (unsigned long long)p.cg_limit,
                  (unsigned long long)p.cg_usage);
    assert_true(p.n_levels >= 1);
    assert_string_equal(p.level[0].dir, "job object: process memory limit");
    assert_int_equal(p.level[0].limit, (uint64_t)64 << 30);
    assert_true(p.cg_room <= (uint64_t)64 << 30);
    CloseHandle(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_path_opens),
        cmocka_unit_test(failed_open_names_windows_error),
        cmocka_unit_test(direct_reads_aligned),
        cmocka_unit_test(histogram_replaced),
        /* last: the process stays in the job */
        cmocka_unit_test(memory_probe_and_job_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
