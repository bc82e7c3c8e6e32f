/*
 * Description: the read path's hardening (issue 14, item 19),
 * one test per item, each named after it:
 *  - item19: a vault cut to any length, 128 and 129 bytes included, is
 *    SMOE_ETRUNC.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fault_io.h"
#include "internal.h"
#include "smoe/smoe.h"
#include "testutil.h"
#include "vault.h"

static void expect_msg(const char *needle)
{
    tu_expect_contains(smoe_last_error(), needle);
}

/* ---- item 19 ----------------------------------------------------------------- */

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(p, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* Every length the vault can be cut to, up to 640 bytes, then every 997th,
 * then the last 640: SMOE_ETRUNC, with a message naming the file. */
static void item19_cut_vault_is_truncated(void **state)
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
    print_message("item 19: %u cut lengths of a %" PRIu64 "-byte vault, %u not SMOE_ETRUNC\n",
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
        cmocka_unit_test(item19_cut_vault_is_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
