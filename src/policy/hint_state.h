/*
 * hint_state.h - hinted speculation's constants (hint.h), which struct
 * smoe_stream's queues and tables are sized by: plain data below
 * internal.h, so that the stream object includes no header of the code
 * that runs on it.
 */
#ifndef SMOE_HINT_STATE_H
#define SMOE_HINT_STATE_H

#include <stdint.h>

/* Speculative read queues by the hint's probability: band b holds
 * p in [b / BANDS, (b + 1) / BANDS), the top band p = 1 too; workers pop
 * the highest band first, after demand and before plain speculation. */
#define SMOE__HINT_BANDS 4u

/* Under reuse, a hinted read below this probability takes only a free
 * (EMPTY or FAILED) slot and never displaces an entry: at p < 0.5 it is
 * more likely wasted than used, and on a disk-bound run a wasted read
 * delays demand as much as a used one saves (docs/eviction.md, "Hints";
 * the measurement: docs/benchmarks.md, "Hinted speculation"). */
#define SMOE__HINT_DISPLACE_MIN_P 0.5f

/* Per layer (hint_layer): hints given since its last settling, and
 * whether its demand has arrived since (then they are spent: eviction no
 * longer reads them, and the next layer's demand settles them). */
#define SMOE__HINT_GIVEN 1u
#define SMOE__HINT_DEMANDED 2u

#endif
