/*
 * fault_text.h - why a load failed, in words, for the claim's error
 * (fault_text.c).
 */
#ifndef SMOE_FAULT_TEXT_H
#define SMOE_FAULT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "slot.h"

struct smoe_stream;

/*
 * The tail of the claim's message for a load of entry key that failed with
 * r, *why its fault record: where a read failed, the padding's first bad
 * byte; the copy of a packed vault at fault when it has replicas ("replica
 * 1 (/path/r1.smoe)"); the source files of an index vault's blob that
 * failed its checksum. "" when nothing is known beyond the code. The
 * claim's failure path only.
 */
void smoe__fault_text(const struct smoe_stream *s, uint32_t key, int r, const smoe__fault *why,
                      char *buf, size_t n);

#endif
