/*
 * Description: the ring's memory budget. Pure parsers fed fixture text:
 * /proc/meminfo (normal, no MemAvailable, garbage), cgroup value files (v1
 * numbers and v1's huge "no limit", v2 "max", empty, garbage, overflow),
 * /proc/self/cgroup (v1, v2, hybrid, none) and /proc/self/mountinfo
 * (escapes, container roots). The platform reader walking cgroup ancestors
 * for the tightest limit, through a fake file table. The arithmetic for
 * each input case: each subtraction, the OS floor, the 25% floor, the
 * [64, 4096] clamp, the cgroup cap, the vault cap, unknown memory,
 * explicit slots, the cliff flag and the failure below one layer's top-k.
 * smoe_open: automatic sizing from faked memory files (figures in
 * smoe_stats), explicit slot count and size overrides, the slot-size error
 * naming both sizes, the top-k failure, the cliff warning in log and stats.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "internal.h"
#include "platform/mem_linux.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- fixtures ---------------------------------------------------------- */

static const char meminfo_ok[] =
    "MemTotal:       24684092 kB\n"
    "MemFree:        21568468 kB\n"
    "MemAvailable:   23939584 kB\n"
    "Buffers:           10812 kB\n";

static const char proc_cgroup_v1[] =
    "9:name=systemd:/\n"
    "7:blkio:/\n"
    "4:memory:/process_api/34a3d7114e218207ed610d9913743b75\n"
    "1:cpu,cpuacct:/\n"
    "0::/\n";

static const char mountinfo_v1[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

/* ---- /proc/meminfo ------------------------------------------------------ */

static void t_meminfo(void **state)
{
    (void)state;
    uint64_t t = 0, a = 0;
    assert_int_equal(smoe__parse_meminfo(meminfo_ok, &t, &a), 0);
    assert_int_equal(t, 24684092ull * 1024);
    assert_int_equal(a, 23939584ull * 1024);
    /* No trailing newline; the fields in another order. */
    assert_int_equal(smoe__parse_meminfo("MemAvailable: 10 kB\nMemTotal: 20 kB", &t, &a), 0);
    assert_int_equal(t, 20 * KiB);
    assert_int_equal(a, 10 * KiB);
    /* Kernels before 3.14 have no MemAvailable. */
    assert_int_equal(smoe__parse_meminfo("MemTotal: 20 kB\nMemFree: 10 kB\n", &t, &a),
                     SMOE_EFORMAT);
    assert_non_null(strstr(smoe_last_error(), "MemAvailable"));
    static const char *const bad[] = {
        "", "garbage\n", "MemTotal: x kB\nMemAvailable: 1 kB\n",
        "MemTotal: 5 MB\nMemAvailable: 1 kB\n", "MemTotal: 5\nMemAvailable: 1 kB\n",
        "MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n",
        "MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n", /* 2^54 kB overflows */
        "XMemTotal: 5 kB\nMemAvailable: 1 kB\n", "MemTotal: -5 kB\nMemAvailable: 1 kB\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (smoe__parse_meminfo(bad[i], &t, &a) != SMOE_EFORMAT)
            fail_msg("accepted meminfo fixture %zu: \"%s\"", i, bad[i]);
    assert_int_equal(smoe__parse_meminfo(NULL, &t, &a), SMOE_EFORMAT);
}

/* ---- cgroup value files ------------------------------------------------- */

static void t_cg_value(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(smoe__parse_cg_value("4294967296\n", &v), 0);
    assert_int_equal(v, 4 * GiB);
    assert_int_equal(smoe__parse_cg_value("0", &v), 0);
    assert_int_equal(v, 0);
    /* v2: no limit. */
    assert_int_equal(smoe__parse_cg_value("max\n", &v), 0);
    assert_true(v == SMOE__NO_LIMIT);
    /* v1: no limit is PAGE_COUNTER_MAX pages. */
    assert_int_equal(smoe__parse_cg_value("9223372036854771712\n", &v), 0);
    assert_true(v == SMOE__NO_LIMIT);
    assert_int_equal(smoe__parse_cg_value("4611686018427387903\n", &v), 0);
    assert_int_equal(v, 4611686018427387903ull);
    static const char *const bad[] = {"", "\n", "garbage\n", "12abc\n", "-1\n", "max2\n",
                                      "1 2\n", "99999999999999999999999\n", " 5\n", "0x10\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (smoe__parse_cg_value(bad[i], &v) != SMOE_EFORMAT)
            fail_msg("accepted cgroup value fixture %zu: \"%s\"", i, bad[i]);
    assert_int_equal(smoe__parse_cg_value(NULL, &v), SMOE_EFORMAT);
}

/* ---- /proc/self/cgroup and mountinfo ------------------------------------ */

static void t_proc_cgroup(void **state)
{
    (void)state;
    char v1[256], v2[256];
    assert_int_equal(smoe__parse_proc_cgroup(proc_cgroup_v1, v1, sizeof v1, v2, sizeof v2), 3);
    assert_string_equal(v1, "/process_api/34a3d7114e218207ed610d9913743b75");
    assert_string_equal(v2, "/");
    /* v2 only. */
    assert_int_equal(smoe__parse_proc_cgroup("0::/user.slice/app.scope\n", v1, sizeof v1, v2,
                                             sizeof v2), 2);
    assert_string_equal(v2, "/user.slice/app.scope");
    assert_string_equal(v1, "");
    /* memory co-mounted with other controllers; no trailing newline. */
    assert_int_equal(smoe__parse_proc_cgroup("3:cpu,memory,blkio:/a/b", v1, sizeof v1, v2,
                                             sizeof v2), 1);
    assert_string_equal(v1, "/a/b");
    /* "memoryx" is not memory; garbage lines are skipped. */
    assert_int_equal(smoe__parse_proc_cgroup("3:memoryx:/a\ngarbage\n::\n5:memory:\n", v1,
                                             sizeof v1, v2, sizeof v2), 0);
    assert_int_equal(smoe__parse_proc_cgroup("", v1, sizeof v1, v2, sizeof v2), 0);
    /* A long path is cut to the buffer, never overrun. */
    char small[8];
    assert_int_equal(smoe__parse_proc_cgroup("4:memory:/abcdefghijkl\n", small, sizeof small,
                                             v2, sizeof v2), 1);
    assert_string_equal(small, "/abcdef");
}

static void t_mountinfo(void **state)
{
    (void)state;
    smoe__cg_mount m1, m2;
    smoe__parse_mountinfo(mountinfo_v1, &m1, &m2);
    assert_true(m1.found && m2.found);
    assert_string_equal(m1.root, "/");
    assert_string_equal(m1.point, "/sys/fs/cgroup/memory");
    assert_string_equal(m2.point, "/sys/fs/cgroup/unified");

    /* A container's view: its own cgroup is the mount's root; an escaped
     * space in the mount point; optional fields before the dash. */
    smoe__parse_mountinfo(
        "100 90 0:40 /docker/abc /sys/fs/cgroup/mem\\040ory rw master:3 shared:5 - cgroup "
        "cgroup rw,memory\n"
        "101 90 0:41 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
        &m1, &m2);
    assert_true(m1.found && m2.found);
    assert_string_equal(m1.root, "/docker/abc");
    assert_string_equal(m1.point, "/sys/fs/cgroup/mem ory");
    assert_string_equal(m2.point, "/sys/fs/cgroup");

    /* Garbage and lines without the separator are skipped. */
    smoe__parse_mountinfo("garbage\n1 2 3 4 5 6 7 8 9\n- cgroup2 cgroup2 rw\n", &m1, &m2);
    assert_false(m1.found);
    assert_false(m2.found);
    /* A v1 cgroup mount without the memory controller is not it. */
    smoe__parse_mountinfo("1 2 0:1 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", &m1, &m2);
    assert_false(m1.found);
}

static void t_cg_dir(void **state)
{
    (void)state;
    smoe__cg_mount m = {"/", "/sys/fs/cgroup/memory", 1};
    char out[320];
    assert_int_equal(smoe__cg_dir(&m, "/a/b", out, sizeof out), 0);
    assert_string_equal(out, "/sys/fs/cgroup/memory/a/b");
    assert_int_equal(smoe__cg_dir(&m, "/", out, sizeof out), 0);
    assert_string_equal(out, "/sys/fs/cgroup/memory");
    smoe__cg_mount c = {"/docker/abc", "/sys/fs/cgroup/memory", 1};
    assert_int_equal(smoe__cg_dir(&c, "/docker/abc", out, sizeof out), 0);
    assert_string_equal(out, "/sys/fs/cgroup/memory");
    assert_int_equal(smoe__cg_dir(&c, "/docker/abc/sub", out, sizeof out), 0);
    assert_string_equal(out, "/sys/fs/cgroup/memory/sub");
    assert_int_equal(smoe__cg_dir(&c, "/docker/abcd", out, sizeof out), -1);
    assert_int_equal(smoe__cg_dir(&c, "/other", out, sizeof out), -1);
    char tiny[8];
    assert_int_equal(smoe__cg_dir(&m, "/a", tiny, sizeof tiny), -1);
}

/* ---- a fake file table for the platform reader --------------------------- */

/* Paths under /proc and /sys/fs/cgroup come from here; others go to the OS. */
struct fake_file {
    const char *path, *text;
};
static const struct fake_file *g_files;
static const char *g_fake_open[64]; /* text of fake descriptor 100000 + i */

static int fk_open(const smoe__io *io, const char *path, unsigned flags)
{
    (void)io;
    if (strncmp(path, "/proc/", 6) != 0 && strncmp(path, "/sys/fs/cgroup", 14) != 0)
        return smoe__io_os.open(&smoe__io_os, path, flags);
    for (const struct fake_file *f = g_files; f && f->path; f++)
        if (!strcmp(f->path, path)) {
            for (int i = 0; i < 64; i++)
                if (!g_fake_open[i]) {
                    g_fake_open[i] = f->text;
                    return 100000 + i;
                }
            return -EMFILE;
        }
    return -ENOENT;
}

static int fk_close(const smoe__io *io, int fd)
{
    (void)io;
    if (fd >= 100000) {
        g_fake_open[fd - 100000] = NULL;
        return 0;
    }
    return smoe__io_os.close(&smoe__io_os, fd);
}

static ssize_t fk_pread(const smoe__io *io, int fd, void *buf, size_t n, uint64_t off)
{
    (void)io;
    if (fd < 100000)
        return smoe__io_os.pread(&smoe__io_os, fd, buf, n, off);
    const char *t = g_fake_open[fd - 100000];
    size_t len = strlen(t);
    if (off >= len)
        return 0;
    if (n > 7)
        n = 7; /* short reads: the reader must loop */
    if (n > len - off)
        n = len - (size_t)off;
    memcpy(buf, t + off, n);
    return (ssize_t)n;
}

static smoe__io fake_io(void)
{
    smoe__io io = smoe__io_os;
    io.open = fk_open;
    io.close = fk_close;
    io.pread = fk_pread;
    return io;
}

static void probe_with(const struct fake_file *files, smoe__mem_probe *p)
{
    g_files = files;
    memset(g_fake_open, 0, sizeof g_fake_open);
    smoe__io io = fake_io();
    smoe__mem_probe_read(&io, p);
    for (int i = 0; i < 64; i++)
        assert_null(g_fake_open[i]); /* every file closed */
}

#define CG1 "/sys/fs/cgroup/memory"
#define LEAF CG1 "/process_api/34a3d7114e218207ed610d9913743b75"

static void t_probe_v1(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    /* The process's cgroup has no limit; its parent has 4 GiB with 1 GiB
     * used; the root has none. The parent's room is the tightest. */
    const struct fake_file files[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "9223372036854771712\n"},
        {LEAF "/memory.usage_in_bytes", "104857600\n"},
        {CG1 "/process_api/memory.limit_in_bytes", "4294967296\n"},
        {CG1 "/process_api/memory.usage_in_bytes", "1073741824\n"},
        {CG1 "/memory.limit_in_bytes", "9223372036854771712\n"},
        {CG1 "/memory.usage_in_bytes", "9000000000\n"},
        {NULL, NULL}};
    smoe__mem_probe p;
    probe_with(files, &p);
    assert_true(p.have_mem);
    assert_int_equal(p.mem_total, 24684092ull * 1024);
    assert_int_equal(p.mem_available, 23939584ull * 1024);
    assert_string_equal(p.mem_source, "/proc/meminfo");
    assert_int_equal(p.n_levels, 3);
    assert_string_equal(p.level[0].dir, LEAF);
    assert_string_equal(p.level[1].dir, CG1 "/process_api");
    assert_string_equal(p.level[2].dir, CG1);
    assert_true(p.level[0].limit == SMOE__NO_LIMIT);
    assert_int_equal(p.cg_version, 1);
    assert_int_equal(p.cg_limit, 4 * GiB);
    assert_int_equal(p.cg_usage, 1 * GiB);
    assert_int_equal(p.cg_room, 3 * GiB);
    assert_string_equal(p.note, "");

    /* A tighter limit at the leaf wins; usage over the limit leaves 0. */
    const struct fake_file tight[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "1073741824\n"},
        {LEAF "/memory.usage_in_bytes", "2147483648\n"},
        {CG1 "/process_api/memory.limit_in_bytes", "4294967296\n"},
        {CG1 "/process_api/memory.usage_in_bytes", "1073741824\n"},
        {NULL, NULL}};
    probe_with(tight, &p);
    assert_int_equal(p.n_levels, 2); /* the root's files are missing: skipped */
    assert_int_equal(p.cg_limit, 1 * GiB);
    assert_int_equal(p.cg_room, 0);
}

static void t_probe_v2(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    /* Unified hierarchy: "max" at the leaf, 2 GiB on the slice, the root
     * has no memory.max at all. */
    const struct fake_file files[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", "0::/user.slice/app.scope\n"},
        {"/proc/self/mountinfo",
         "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"},
        {"/sys/fs/cgroup/user.slice/app.scope/memory.max", "max\n"},
        {"/sys/fs/cgroup/user.slice/app.scope/memory.current", "52428800\n"},
        {"/sys/fs/cgroup/user.slice/memory.max", "2147483648\n"},
        {"/sys/fs/cgroup/user.slice/memory.current", "536870912\n"},
        {NULL, NULL}};
    smoe__mem_probe p;
    probe_with(files, &p);
    assert_int_equal(p.n_levels, 2);
    assert_int_equal(p.level[0].version, 2);
    assert_int_equal(p.cg_version, 2);
    assert_int_equal(p.cg_limit, 2 * GiB);
    assert_int_equal(p.cg_room, 2 * GiB - 512 * MiB);

    /* A container whose cgroup is the mount's root: its own files. */
    const struct fake_file cont[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", "0::/\n"},
        {"/proc/self/mountinfo", "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
        {"/sys/fs/cgroup/memory.max", "4294967296\n"},
        {"/sys/fs/cgroup/memory.current", "0\n"},
        {NULL, NULL}};
    probe_with(cont, &p);
    assert_int_equal(p.n_levels, 1);
    assert_int_equal(p.cg_room, 4 * GiB);
}

static void t_probe_missing(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    /* No files at all: nothing known, never a failure. */
    const struct fake_file none[] = {{NULL, NULL}};
    smoe__mem_probe p;
    probe_with(none, &p);
    assert_false(p.have_mem);
    assert_int_equal(p.n_levels, 0);
    assert_true(p.cg_room == SMOE__NO_LIMIT);
    assert_non_null(strstr(p.note, "/proc/meminfo"));

    /* No limit anywhere; a garbage limit file is skipped and noted. */
    const struct fake_file garbage[] = {
        {"/proc/meminfo", "MemTotal: garbage\n"},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "lots\n"},
        {LEAF "/memory.usage_in_bytes", "1\n"},
        {CG1 "/process_api/memory.limit_in_bytes", "9223372036854771712\n"},
        {CG1 "/process_api/memory.usage_in_bytes", "1\n"},
        {NULL, NULL}};
    probe_with(garbage, &p);
    assert_false(p.have_mem);
    assert_int_equal(p.n_levels, 1);
    assert_true(p.cg_room == SMOE__NO_LIMIT);
    assert_non_null(strstr(p.note, "/proc/meminfo"));

    /* A limit whose usage cannot be read leaves no room, not all of it. */
    const struct fake_file nouse[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "1073741824\n"},
        {NULL, NULL}};
    probe_with(nouse, &p);
    assert_int_equal(p.cg_room, 0);
    assert_non_null(strstr(p.note, "memory.usage_in_bytes"));
}

/* ---- the arithmetic ------------------------------------------------------- */

static smoe__budget_in base_in(void)
{
    smoe__budget_in in;
    memset(&in, 0, sizeof in);
    in.slot_bytes = 16 * MiB;
    in.have_mem = 1;
    in.mem_total = 64 * GiB;
    in.mem_available = 48 * GiB;
    in.cg_room = in.cg_limit = SMOE__NO_LIMIT;
    in.overhead_bytes = SMOE__BUDGET_OVERHEAD;
    in.layers = 94;
    in.vault_entries = 94 * 128;
    return in;
}

static void t_compute_subtractions(void **state)
{
    (void)state;
    smoe__budget_in in = base_in();
    in.scout_bytes = 8 * GiB;
    in.reserve_bytes = 2 * GiB;
    smoe__budget b;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.free_bytes, 48 * GiB);
    assert_int_equal(b.after[0], 40 * GiB);
    assert_int_equal(b.after[1], 39 * GiB);
    assert_int_equal(b.after[2], 37 * GiB);
    assert_int_equal(b.os_floor, 8 * GiB); /* 64 GiB / 8 */
    assert_int_equal(b.budget_bytes, 29 * GiB);
    assert_int_equal(b.slots_budget, 29 * 64);
    assert_int_equal(b.slots_fallback, 12 * 64); /* 25% of 48 GiB */
    assert_int_equal(b.slots, 29 * 64);
    assert_int_equal(b.rules, SMOE_BUDGET_AUTO);
    assert_true(b.slots_cap == UINT64_MAX);

    /* RAM / 8 below 4 GiB: the floor is 4 GiB. */
    in = base_in();
    in.mem_total = 16 * GiB;
    in.mem_available = 12 * GiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.os_floor, 4 * GiB);
    assert_int_equal(b.budget_bytes, 7 * GiB);
    assert_int_equal(b.slots, 7 * 64);

    /* Free memory is the smaller of MemAvailable and the cgroup's room. */
    in = base_in();
    in.cg_room = 20 * GiB;
    in.cg_limit = 24 * GiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.free_bytes, 20 * GiB);
    assert_int_equal(b.budget_bytes, 11 * GiB);
    assert_int_equal(b.slots, 11 * 64);
    assert_int_equal(b.slots_cap, 20 * 64);
}

static void t_compute_floor_clamp_cap(void **state)
{
    (void)state;
    smoe__budget b;
    /* Subtractions beyond free: budget 0, raised to 25% of free. */
    smoe__budget_in in = base_in();
    in.reserve_bytes = 100 * GiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.after[2], 0);
    assert_int_equal(b.budget_bytes, 0);
    assert_int_equal(b.slots_budget, 0);
    assert_int_equal(b.slots, 12 * 64);
    assert_int_equal(b.rules, SMOE_BUDGET_AUTO | SMOE_BUDGET_FALLBACK);
    assert_int_equal(b.step[0], 12 * 64);

    /* Little memory: 25% of it is under 64 slots: raised to 64. */
    in = base_in();
    in.mem_available = 1 * GiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots_fallback, 16);
    assert_int_equal(b.slots, 64);
    assert_int_equal(b.rules, SMOE_BUDGET_AUTO | SMOE_BUDGET_FALLBACK | SMOE_BUDGET_CLAMP_MIN);

    /* A lot of memory: lowered to 4096. */
    in = base_in();
    in.slot_bytes = 1 * MiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 4096);
    assert_int_equal(b.rules, SMOE_BUDGET_AUTO | SMOE_BUDGET_CLAMP_MAX);

    /* The clamp's 64 does not fit the container: capped after the clamp,
     * so the ring fits the limit. */
    in = base_in();
    in.cg_room = 512 * MiB;
    in.cg_limit = 4 * GiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.free_bytes, 512 * MiB);
    assert_int_equal(b.step[1], 64);
    assert_int_equal(b.slots_cap, 32);
    assert_int_equal(b.slots, 32);
    assert_true(b.rules & SMOE_BUDGET_CAPPED);
    assert_true((uint64_t)b.slots * in.slot_bytes <= in.cg_room);

    /* Never more slots than the vault has blobs. */
    in = base_in();
    in.vault_entries = 100;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 100);
    assert_true(b.rules & SMOE_BUDGET_VAULT_CAP);
    assert_int_equal(b.step[2], 39 * 64); /* before the vault cap */

    /* Memory unknown: 64 slots, still capped by a known cgroup. */
    in = base_in();
    in.have_mem = 0;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 64);
    assert_int_equal(b.rules, SMOE_BUDGET_AUTO | SMOE_BUDGET_NO_MEMINFO);
    in.cg_room = 160 * MiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 10);

    /* Extreme figures do not overflow. */
    in = base_in();
    in.mem_total = in.mem_available = UINT64_MAX;
    in.slot_bytes = 16 * KiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 4096);
    assert_true(b.slots_fallback > 4096);
}

static void t_compute_explicit_and_cliff(void **state)
{
    (void)state;
    smoe__budget b;
    /* Explicit: no floor, clamp or cap; memory figures are not used. */
    smoe__budget_in in = base_in();
    in.explicit_slots = 10;
    in.cg_room = 16 * MiB;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.slots, 10);
    assert_int_equal(b.rules, 0);
    assert_false(b.cliff); /* top-k unknown: no working set */

    /* Top-k 8 over 94 layers: a token needs 752 slots. */
    in = base_in();
    in.top_k = 8;
    in.explicit_slots = 751;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_int_equal(b.working_set, 752);
    assert_true(b.cliff);
    in.explicit_slots = 752;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_false(b.cliff);
    /* Automatic: 1856 slots hold it. */
    in.explicit_slots = 0;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_false(b.cliff);

    /* Below one layer's top-k: refused, naming both counts. */
    in.explicit_slots = 7;
    assert_int_equal(smoe__budget_compute(&in, &b), SMOE_ESMALLRING);
    assert_non_null(strstr(smoe_last_error(), "7 slots"));
    assert_non_null(strstr(smoe_last_error(), "top-8"));
    in.explicit_slots = 8;
    assert_int_equal(smoe__budget_compute(&in, &b), 0);
    assert_true(b.cliff);

    /* Automatic, capped by a container below top-k: refused. */
    in = base_in();
    in.top_k = 8;
    in.cg_room = 100 * MiB; /* 6 slots of 16 MiB */
    assert_int_equal(smoe__budget_compute(&in, &b), SMOE_ESMALLRING);
    assert_int_equal(b.slots, 6);
    /* Room for no slot at all: refused even with top-k unknown. */
    in.top_k = 0;
    in.cg_room = 1 * MiB;
    assert_int_equal(smoe__budget_compute(&in, &b), SMOE_ESMALLRING);
    assert_non_null(strstr(smoe_last_error(), "less than one slot"));
}

/* ---- smoe_open ------------------------------------------------------------- */

static char *g_dir;
static char g_vault[600];

static int group_setup(void **state)
{
    (void)state;
    g_dir = tu_tmpdir();
    snprintf(g_vault, sizeof g_vault, "%s/v.smoe", g_dir);
    /* 4 layers x 100 experts of at most 16 KiB: 16 KiB slots. */
    return tu_make_vault(g_vault, 4, 100, 4000, 16384, 7);
}

static int group_teardown(void **state)
{
    (void)state;
    tu_rmdir(g_dir);
    free(g_dir);
    return 0;
}

static smoe_open_opts opts(void)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 1;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    return o;
}

static int open_fake(const struct fake_file *files, smoe_open_opts *o, smoe_stream **s)
{
    g_files = files;
    memset(g_fake_open, 0, sizeof g_fake_open);
    static smoe__io io;
    io = fake_io();
    smoe__io_set(&io);
    int r = smoe_open(g_vault, o, s);
    smoe__io_set(NULL);
    return r;
}

static void t_open_auto(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    /* A 3 MiB cgroup with 1 MiB used: 2 MiB free; the subtractions leave
     * nothing, 25% of free is 32 slots, the clamp raises it to 64, and
     * the 128 slots of room allow that. */
    const struct fake_file files[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "3145728\n"},
        {LEAF "/memory.usage_in_bytes", "1048576\n"},
        {NULL, NULL}};
    smoe_open_opts o = opts();
    o.reserve_bytes = 1 * MiB;
    o.scout_bytes = 123 * KiB;
    smoe_stream *s = NULL;
    assert_int_equal(open_fake(files, &o, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots, 64);
    assert_int_equal(st.slot_bytes, 16 * KiB);
    assert_int_equal(st.budget_rules,
                     SMOE_BUDGET_AUTO | SMOE_BUDGET_FALLBACK | SMOE_BUDGET_CLAMP_MIN);
    assert_int_equal(st.budget_mem_total, 24684092ull * 1024);
    assert_int_equal(st.budget_mem_available, 23939584ull * 1024);
    assert_int_equal(st.budget_cgroup_limit, 3 * MiB);
    assert_int_equal(st.budget_cgroup_usage, 1 * MiB);
    assert_int_equal(st.budget_free, 2 * MiB);
    assert_int_equal(st.budget_scout, 123 * KiB);
    assert_int_equal(st.budget_overhead, SMOE__BUDGET_OVERHEAD);
    assert_int_equal(st.budget_reserve, 1 * MiB);
    assert_int_equal(st.budget_os_floor, 4 * GiB);
    assert_int_equal(st.budget_bytes, 0);
    assert_int_equal(st.budget_slots, 0);
    assert_int_equal(smoe_close(s), 0);

    /* 512 KiB of room: capped to 32 slots, which fit it. */
    const struct fake_file small[] = {
        {"/proc/meminfo", meminfo_ok},
        {"/proc/self/cgroup", proc_cgroup_v1},
        {"/proc/self/mountinfo", mountinfo_v1},
        {LEAF "/memory.limit_in_bytes", "1572864\n"},
        {LEAF "/memory.usage_in_bytes", "1048576\n"},
        {NULL, NULL}};
    o = opts();
    assert_int_equal(open_fake(small, &o, &s), 0);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots, 32);
    assert_true(st.budget_rules & SMOE_BUDGET_CAPPED);
    assert_true(st.ring_bytes <= 512 * KiB);
    assert_int_equal(smoe_close(s), 0);

    /* The same with top-k 40: 32 slots cannot hold one layer's experts. */
    o = opts();
    o.top_k = 40;
    s = NULL;
    assert_int_equal(open_fake(small, &o, &s), SMOE_ESMALLRING);
    assert_null(s);
    assert_non_null(strstr(smoe_last_error(), "32 slots"));
    assert_non_null(strstr(smoe_last_error(), "top-40"));
    assert_non_null(strstr(smoe_last_error(), g_vault));

    /* Plenty of memory: one slot per blob of the vault, 400. */
    const struct fake_file big[] = {
        {"/proc/meminfo", meminfo_ok}, {"/proc/self/cgroup", ""},
        {"/proc/self/mountinfo", ""}, {NULL, NULL}};
    o = opts();
    assert_int_equal(open_fake(big, &o, &s), 0);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots, 400);
    assert_true(st.budget_rules & SMOE_BUDGET_VAULT_CAP);
    assert_true(st.budget_cgroup_limit == UINT64_MAX);
    assert_int_equal(smoe_close(s), 0);

    /* Memory unknown: 64 slots and a warning. */
    const struct fake_file none[] = {{NULL, NULL}};
    tu_logbuf lb = {{0}, 0};
    o = opts();
    o.log_fn = tu_log_cb;
    o.log_user = &lb;
    assert_int_equal(open_fake(none, &o, &s), 0);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots, 64);
    assert_true(st.budget_rules & SMOE_BUDGET_NO_MEMINFO);
    assert_true(lb.warns >= 1);
    assert_non_null(strstr(lb.text, "/proc/meminfo"));
    assert_int_equal(smoe_close(s), 0);
}

static void t_open_scout_path(void **state)
{
    (void)state;
#if !defined(__linux__)
    skip();
#endif
    char *scout = tu_path(g_dir, "model.scout");
    FILE *f = fopen(scout, "wb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 5 * MiB - 1, SEEK_SET), 0);
    fputc(0, f);
    fclose(f);
    const struct fake_file files[] = {
        {"/proc/meminfo", meminfo_ok}, {"/proc/self/cgroup", ""},
        {"/proc/self/mountinfo", ""}, {NULL, NULL}};
    smoe_open_opts o = opts();
    o.scout_path = scout;
    smoe_stream *s;
    assert_int_equal(open_fake(files, &o, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.budget_scout, 5 * MiB);
    assert_int_equal(smoe_close(s), 0);
    /* scout_bytes wins over the path. */
    o.scout_bytes = 7;
    assert_int_equal(open_fake(files, &o, &s), 0);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.budget_scout, 7);
    assert_int_equal(smoe_close(s), 0);
    /* A scout file that is not there is an error naming it. */
    o = opts();
    char *missing = tu_path(g_dir, "missing.scout");
    o.scout_path = missing;
    s = NULL;
    assert_int_equal(open_fake(files, &o, &s), SMOE_ESYS);
    assert_non_null(strstr(smoe_last_error(), "missing.scout"));
    free(missing);
    free(scout);
}

static void t_open_overrides(void **state)
{
    (void)state;
    /* Explicit count and size. */
    smoe_open_opts o = opts();
    o.ring_slots = 5;
    o.slot_bytes = 1 * MiB;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.slots, 5);
    assert_int_equal(st.slot_bytes, 1 * MiB);
    assert_int_equal(st.budget_rules, 0);
    assert_int_equal(st.budget_free, 0);
    assert_int_equal(smoe_close(s), 0);

    /* A slot size under the largest blob: the error names both sizes. */
    smoe__vault v;
    assert_int_equal(smoe__vault_load(&v, g_vault, smoe__io_get()), 0);
    uint64_t maxp = v.max_padded;
    smoe__vault_free(&v);
    o = opts();
    o.slot_bytes = maxp - 1;
    s = NULL;
    assert_int_equal(smoe_open(g_vault, &o, &s), SMOE_ESLOTSIZE);
    assert_null(s);
    char want[64];
    snprintf(want, sizeof want, "%llu", (unsigned long long)(maxp - 1));
    assert_non_null(strstr(smoe_last_error(), want));
    snprintf(want, sizeof want, "%llu", (unsigned long long)maxp);
    assert_non_null(strstr(smoe_last_error(), want));
}

static void t_open_cliff(void **state)
{
    (void)state;
    /* 4 layers x top-2 = 8 slots per token. */
    tu_logbuf lb = {{0}, 0};
    smoe_open_opts o = opts();
    o.ring_slots = 6;
    o.top_k = 2;
    o.log_fn = tu_log_cb;
    o.log_user = &lb;
    smoe_stream *s = NULL;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    smoe_stats st = SMOE_STATS_INIT;
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.top_k, 2);
    assert_int_equal(st.working_set_slots, 8);
    assert_int_equal(st.cliff, 1);
    assert_int_equal(lb.warns, 1);
    assert_non_null(strstr(lb.text, "less than one token"));
    assert_int_equal(smoe_close(s), 0);

    o.ring_slots = 8;
    lb.warns = 0;
    assert_int_equal(smoe_open(g_vault, &o, &s), 0);
    assert_int_equal(smoe_get_stats(s, &st), 0);
    assert_int_equal(st.cliff, 0);
    assert_int_equal(lb.warns, 0);
    assert_int_equal(smoe_close(s), 0);

    /* One slot for a top-2 layer: open fails. */
    o.ring_slots = 1;
    s = NULL;
    assert_int_equal(smoe_open(g_vault, &o, &s), SMOE_ESMALLRING);
    assert_null(s);
    assert_non_null(strstr(smoe_last_error(), "top-2"));
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(t_meminfo),
        cmocka_unit_test(t_cg_value),
        cmocka_unit_test(t_proc_cgroup),
        cmocka_unit_test(t_mountinfo),
        cmocka_unit_test(t_cg_dir),
        cmocka_unit_test(t_probe_v1),
        cmocka_unit_test(t_probe_v2),
        cmocka_unit_test(t_probe_missing),
        cmocka_unit_test(t_compute_subtractions),
        cmocka_unit_test(t_compute_floor_clamp_cap),
        cmocka_unit_test(t_compute_explicit_and_cliff),
    };
    const struct CMUnitTest open[] = {
        cmocka_unit_test(t_open_auto),
        cmocka_unit_test(t_open_scout_path),
        cmocka_unit_test(t_open_overrides),
        cmocka_unit_test(t_open_cliff),
    };
    int r = cmocka_run_group_tests_name("budget", pure, NULL, NULL);
    return r | cmocka_run_group_tests_name("budget_open", open, group_setup, group_teardown);
}
