/*
 * freq.h - the popularity histogram: one claim counter per (layer,
 * expert), loaded at open from the file beside the vault and saved at
 * close or on request (docs/freq-format.md).
 *
 * The counters are a dense array of their own, apart from the slot words
 * and the residency map, so counting a claim is one relaxed add on a
 * cache line the critical path does not otherwise touch: no lock, no
 * allocation.
 */
#ifndef SMOE_FREQ_H
#define SMOE_FREQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "fill/freq_state.h"

struct smoe_stream;
struct smoe_open_opts;
struct smoe_stats;

/* Count one successful claim of key. Any thread; lock-free. */
static inline void smoe__freq_hit(smoe__freq *f, uint32_t key)
{
    /* relaxed: statistics only; pairs with nothing (readers take relaxed
     * snapshots and need no ordering with the slot it counts) */
    atomic_fetch_add_explicit(&f->count[key], 1, memory_order_relaxed);
}

/*
 * Encode counts[0 .. layers x experts) as a histogram file into buf (of
 * SMOE__FREQ_HEADER_SIZE + 8 x n bytes). Pure, but for the checksum's
 * hashing state: @return 0 or SMOE_ENOMEM.
 */
int smoe__freq_encode(unsigned char *buf, const smoe__freq_id *id, const uint64_t *counts);
/*
 * Decode a histogram file of len bytes for the vault `id` into counts
 * (layers x experts). Pure (as encode).
 * @return SMOE_FREQ_LOADED, or the SMOE_FREQ_* reason it is ignored
 * (counts untouched then), or SMOE_ENOMEM; *why gets a short explanation.
 */
int smoe__freq_decode(const unsigned char *buf, uint64_t len, const smoe__freq_id *id,
                      uint64_t *counts, const char **why);

/* smoe_open: allocate the counters; unless SMOE_OPEN_NO_FREQ, load the
 * file and find out whether its directory is writable. Fails only for
 * memory (any allocation failing, SMOE_ENOMEM). */
int smoe__freq_open(struct smoe_stream *s, const struct smoe_open_opts *o);
/* Save now (smoe_freq_save and smoe_close). fn starts the messages. */
int smoe__freq_save(struct smoe_stream *s, const char *fn);
void smoe__freq_free(smoe__freq *f);

/* freq_tmp.c: temporary files beside the histogram at path. */
/* path's directory into dir; 0 or -ENAMETOOLONG. */
int smoe__freq_dir_of(const char *path, char *dir, size_t cap);
/* "PATH.tmp.<pid>.<n>", n counting in the process; NULL: out of memory. */
char *smoe__freq_tmp_name(const char *path);
/* An unnamed file in path's directory, for writing: fd or negative errno. */
int smoe__freq_open_unnamed(const smoe__io *io, const char *path);
/* Can a file be created beside path? 0, or the negative errno. */
int smoe__freq_probe_writable(const smoe__io *io, const char *path);
/* Remove PATH.tmp.<pid>.<n> files whose process no longer exists. */
void smoe__freq_sweep(const smoe__io *io, const char *path);
void smoe__freq_stats(const struct smoe_stream *s, struct smoe_stats *st);

#endif
