/*
 * testutil.h - helpers shared by the tests: temporary directories,
 * deterministic vaults whose every byte a test can recompute, patching
 * fields of a written vault to craft malformed ones, and smoe__io tables
 * backed by memory or injecting faults.
 *
 * Helpers that cannot do their job fail the running cmocka test.
 */
#ifndef SMOE_TESTUTIL_H
#define SMOE_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/smoe.h"
#include "smoe_tier.h"
#include "mem_io.h"
#include "synth.h"

/* ---- files and directories ------------------------------------------- */

/* A new directory under $SMOE_TEST_TMPDIR (or /tmp); free() the result. */
char *tu_tmpdir(void);
/* Remove dir and the plain files in it (no recursion). */
void tu_rmdir(const char *dir);
/* Number of entries in dir, other than . and .. */
int tu_count_files(const char *dir);
/* "dir/name"; free() the result. */
char *tu_path(const char *dir, const char *name);
uint64_t tu_file_size(const char *path);
int tu_exists(const char *path);
void tu_truncate(const char *path, uint64_t size);
/* Whole file into a malloc()ed buffer; *size receives its length. */
unsigned char *tu_read_file(const char *path, uint64_t *size);
void tu_read_at(const char *path, uint64_t off, void *buf, size_t n);

/* ---- process resources ------------------------------------------------ */

/* Descriptors and threads of this process (/proc/self/fd, /proc/self/task). */
typedef struct tu_baseline {
    int fds, threads;
} tu_baseline;
tu_baseline tu_baseline_take(void);
/* Fail the test unless descriptors and threads are back to b. Threads that
 * were joined may linger in /proc a moment: waits up to a second for them. */
void tu_baseline_check(tu_baseline b, const char *what);
/* 1 if addr lies in a mapping of this process (/proc/self/maps). */
int tu_is_mapped(const void *addr);
/* The factor liveness bounds are scaled by: $SMOE_TEST_TIME_MULT (set by
 * ctest, larger under sanitizers), default 1. */
double tu_time_mult(void);
/* A bound on hanging, not a speed claim: 10 s times tu_time_mult(). */
uint64_t tu_bound_ns(void);
/* Wait until *flag is set; fail the test after tu_bound_ns(). */
void tu_wait_flag(const _Atomic int *flag, const char *what);
/* Monotonic clock in nanoseconds. */
uint64_t tu_now_ns(void);
/* Pages of path in the page cache (mincore on a mapping of it). */
size_t tu_cached_pages(const char *path);

/* ---- streams ------------------------------------------------------------- */

/* A stream on path with `slots` slots, `workers` workers and the given
 * SMOE_EVICT_* policy; no pre-warm, no histogram, buffered reads allowed
 * where direct I/O is refused. Fails the test if it cannot be opened. */
smoe_stream *tu_open_ring(const char *path, uint32_t slots, uint32_t workers,
                          uint32_t eviction);
/* The stream's counters (fails the test if smoe_get_stats does). */
smoe_stats tu_stats(smoe_stream *s);
/* Wait (up to 10 s) until a read is held by the fault_io table whose
 * `holding` flag this is, with its `hold` set. */
void tu_wait_holding(const _Atomic int *holding);

/* ---- running programs ---------------------------------------------------- */

/*
 * Run prog with the NULL-terminated arguments (argv[0] is prog), its
 * standard output and error captured through files in dir; *out and *err
 * receive them NUL-terminated (free() the previous values, which may be
 * NULL). Returns the exit status; fails the test if prog did not exit.
 */
int tu_run(const char *dir, const char *prog, const char *const *args, char **out,
           char **err);
/* tu_run, with prog killed by SIGALRM after secs seconds (an alarm outlives
 * exec): returns -1 when a signal ended it, as a hang does. */
int tu_run_bounded(const char *dir, unsigned secs, const char *prog,
                   const char *const *args, char **out, char **err);
/* Fail the test unless needle occurs in hay. */
void tu_expect_contains(const char *hay, const char *needle);

/* ---- deterministic payloads ------------------------------------------ */

/* Blob sizes, bytes and the layout come from synth.h (synth_blob_size,
 * synth_blob_fill, synth_layout): the synthetic vault `smoe gen` writes. */

/* End of a layout's last component. */
uint64_t tu_layout_extent(const smoe_component *comps, uint32_t n);

/* ---- writing test vaults ------------------------------------------------ */

typedef struct tu_vault_opts {
    uint32_t layers, experts;
    uint64_t min_bytes, max_bytes; /* blob sizes, both inclusive */
    uint64_t seed;
    uint32_t top_k;                /* 0: no top_k key */
    const char *model;             /* NULL: no model key */
    /* Extra metadata: NULL-terminated list of key, value, key, value, ... */
    const char *const *meta;
    /* (layer, expert) is absent when this returns 0; NULL: all present. */
    int (*present)(uint32_t layer, uint32_t expert);
    int reverse;                   /* add blobs last to first */
} tu_vault_opts;

/* Write the vault; returns the writer's code (0 on success). */
int tu_make_vault_ex(const char *path, const tu_vault_opts *o);
/* layers x experts blobs, every one present, metadata model=tu-test and
 * top_k=min(2, experts). */
int tu_make_vault(const char *path, uint32_t layers, uint32_t experts,
                  uint64_t min_bytes, uint64_t max_bytes, uint64_t seed);

/* A vault of layers x experts blobs sized in [min_bytes, max_bytes] from
 * seed (tu_make_vault), in a directory of its own; the fields say how to
 * recompute any blob (synth_blob_size, synth_blob_fill). */
typedef struct tu_fx {
    char *dir;
    char path[600];
    uint32_t layers, experts;
    uint64_t min_bytes, max_bytes, seed;
} tu_fx;
tu_fx *tu_fx_new(uint32_t layers, uint32_t experts, uint64_t min_bytes, uint64_t max_bytes,
                 uint64_t seed);
/* A stream on the fixture with opts o (no pre-warm, no histogram,
 * buffered reads allowed; LRU unless o->eviction says otherwise). Fails
 * the test if it cannot be opened. */
smoe_stream *tu_fx_open(const tu_fx *f, smoe_open_opts *o);
/* Remove the vault's directory and free f. */
void tu_fx_free(tu_fx *f);

/* ---- capturing the library's log ----------------------------------------- */

/* Pass tu_log_cb as smoe_open_opts.log_fn and a tu_logbuf as log_user:
 * every message is appended to text (truncated when full), warnings counted. */
typedef struct tu_logbuf {
    char text[8192];
    int warns;
} tu_logbuf;
void tu_log_cb(void *user, int level, const char *msg);

/* ---- patching fields ------------------------------------------------------ */

/* Header field offsets (docs/vault-format.md). */
enum {
    TU_H_MAGIC = 0, TU_H_VERSION = 8, TU_H_HEADER_SIZE = 12, TU_H_ALIGNMENT = 16,
    TU_H_COMPONENT_ALIGN = 20, TU_H_LAYERS = 24, TU_H_EXPERTS = 28, TU_H_ENTRIES = 32,
    TU_H_LAYOUTS = 36, TU_H_COMPONENTS = 40, TU_H_FLAGS = 44, TU_H_TABLE_OFFSET = 48,
    TU_H_LAYOUT_OFFSET = 56, TU_H_META_OFFSET = 64, TU_H_META_BYTES = 72,
    TU_H_DATA_OFFSET = 80, TU_H_FILE_SIZE = 88, TU_H_RESERVED = 96, TU_H_CHECKSUM = 120
};
/* Field offsets inside an expert table entry, a layout and a component. */
enum { TU_E_LAYER = 0, TU_E_EXPERT = 4, TU_E_LAYOUT = 8, TU_E_FLAGS = 12, TU_E_OFFSET = 16,
       TU_E_SIZE = 24, TU_E_PADDED = 32, TU_E_HASH = 40 };
enum { TU_L_FIRST = 0, TU_L_N = 4, TU_L_EXTENT = 8 };
enum { TU_C_NAME = 0, TU_C_DTYPE = 64, TU_C_NDIM = 68, TU_C_SHAPE = 72, TU_C_OFFSET = 104,
       TU_C_NBYTES = 112, TU_C_QGROUP = 120, TU_C_QBITS = 124 };

/* Version 2, the index vault: header fields that differ, and the fields of
 * its expert entries, extents and source records. */
enum { TU_H2_SOURCES = 20, TU_H2_SOURCE_OFFSET = 80, TU_H2_EXTENT_OFFSET = 96,
       TU_H2_EXTENTS = 104, TU_H2_NAMES_BYTES = 108, TU_H2_RESERVED = 112 };
enum { TU_E2_FIRST_EXTENT = 16, TU_E2_HASH = 24, TU_E2_SIZE = 32 };
enum { TU_X_SOURCE = 0, TU_X_FLAGS = 4, TU_X_OFFSET = 8, TU_X_LENGTH = 16, TU_X_SIZE = 24 };
enum { TU_S_SIZE = 0, TU_S_MTIME = 8, TU_S_MTIME_NSEC = 16, TU_S_KIND = 20,
       TU_S_HEADER_BYTES = 24, TU_S_HEADER_HASH = 32, TU_S_ALIGN = 40, TU_S_NAME_LEN = 44,
       TU_S_NAME_OFFSET = 48, TU_S_RESERVED = 56, TU_S_RECORD = 64 };

uint32_t tu_read_u32(const char *path, uint64_t off);
uint64_t tu_read_u64(const char *path, uint64_t off);
void tu_patch_u32(const char *path, uint64_t off, uint32_t v);
void tu_patch_u64(const char *path, uint64_t off, uint64_t v);
void tu_patch_bytes(const char *path, uint64_t off, const void *p, size_t n);
/* XOR the byte at off with 0xff. */
void tu_flip_byte(const char *path, uint64_t off);
/* Recompute and store the header checksum from the header's own fields
 * (of either version). */
void tu_fix_checksum(const char *path);
/* File offsets of expert table entry i, layout record j, component k. */
uint64_t tu_entry_off(const char *path, uint32_t i);
uint64_t tu_layout_off(const char *path, uint32_t j);
uint64_t tu_component_off(const char *path, uint32_t k);

/* ---- smoe__io tables -------------------------------------------------------- */

/*
 * The OS table, except that the fail_at-th pwrite (1-based, counted from
 * tu_fault_io()) fails with -EIO.
 */
typedef struct tu_fault {
    int pwrite_fail_at;
    int pwrites;
} tu_fault;
smoe__io tu_fault_io(tu_fault *f);

#endif
