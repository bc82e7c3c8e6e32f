/*
 * trace_synth.h - synthetic routing traces (`smoe trace-gen`).
 *
 * Each layer has its own popularity order (a random permutation of its
 * experts) with Zipf weights 1/(rank+1)^skew. For every (token, layer) the
 * k ranked experts are drawn one by one: with probability `overlap` an
 * expert the previous token used at this layer is carried over, otherwise,
 * with probability `spec_hit`, one of the previous token's speculative
 * ranks, otherwise a fresh expert by popularity among those the previous
 * token did not use. So the achieved adjacent-token overlap tracks the
 * knob. The first token of each request draws fresh.
 */
#ifndef SMOE_TOOL_TRACE_SYNTH_H
#define SMOE_TOOL_TRACE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct trace_synth_opts {
    const char *out;     /* the file; a name ending in .gz is gzipped */
    const char *model;   /* the header's model= */
    uint32_t layers, experts, k, tokens, requests, spec;
    double skew, overlap, spec_hit;
    uint64_t seed;
} trace_synth_opts;

/*
 * Write the trace o describes (k + spec <= experts, requests <= tokens).
 * @return 0 with *overlap the adjacent-token overlap achieved, or -1 with
 * what went wrong in err.
 */
int trace_synth_write(const trace_synth_opts *o, double *overlap, char *err, size_t errlen);

#endif
