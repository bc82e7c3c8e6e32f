/*
 * Description: the ring's region on a system the library does not know (the
 * generic platform files): a shareable region is refused with -ENOTSUP and
 * leaves nothing behind; a private one still maps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "platform/memfile.h"
#include "platform/region.h"

static void shareable_refused(void **state)
{
    (void)state;
    assert_int_equal(smoe__memfile_open(65536), -ENOTSUP);
    smoe__region g;
    memset(&g, 0xa5, sizeof g);
    assert_int_equal(smoe__region_map_shared(&g, 65536), -ENOTSUP);
    assert_null(g.addr);
    assert_int_equal(g.shared, 0);
    smoe__region_unmap(&g); /* empty: a no-op */

    assert_int_equal(smoe__region_map(&g, 65536), 0);
    assert_int_equal((uintptr_t)g.base % 16384, 0);
    g.base[65535] = 1;
    assert_int_equal(g.shared, 0);
    smoe__region_unmap(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shareable_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
