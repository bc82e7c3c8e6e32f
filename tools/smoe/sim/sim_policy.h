/*
 * sim_policy.h - offline replay of the eviction policies the ring can run.
 *
 * The replay works in layer steps, as an engine asks: step s is one layer
 * asking for a set of experts (decode: one token's top-k; prefill or
 * batched decode: the union over many tokens). Counting matches sim.h: a
 * request for a cached key is a hit, every miss is inserted (the ring has
 * no bypass: a read needs a slot), evicting one entry when the cache is
 * full. As in the ring, the keys a step has asked for are pinned until the
 * step ends (their slots are loading or referenced), so a step never
 * evicts its own experts.
 *
 * Every policy picks its victim in one scan over the cached entries,
 * reading a few bytes of state per entry (see sim_policy.c), the shape of
 * the library's lazy victim scan. docs/eviction.md has the results.
 */
#ifndef SMOE_TOOL_SIM_POLICY_H
#define SMOE_TOOL_SIM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "smoe_tier.h"
#include "sim.h"
#include "trace.h"

#define SIMP_NONE UINT32_MAX

/* A replay: step s asks for keys[off[s] .. off[s+1]) (distinct) of layer
 * layer[s]; key = layer * experts + expert. After them, when one_off is
 * not NULL, it loads one_keys[one_off[s] .. one_off[s+1]) as one-shot
 * reads (speculation, pre-warm): they take a slot when not cached, are
 * never counted as requests and teach no policy anything. */
typedef struct simp_steps {
    uint32_t layers, experts;
    size_t n_steps;
    uint32_t *layer;   /* n_steps */
    size_t *off;       /* n_steps + 1 */
    uint32_t *keys;    /* off[n_steps] */
    size_t *one_off;   /* n_steps + 1, or NULL */
    uint32_t *one_keys;
} simp_steps;

/* How to cut a trace into steps. All zero: every token, decode order. */
typedef struct simp_shape {
    size_t tok_begin, tok_end; /* tokens [begin, end) of the trace; end 0: to the last */
    uint32_t group;            /* tokens per layer step (0 or 1: decode; more: prefill-like) */
    uint64_t shuffle_tokens;   /* nonzero: replay the tokens in a random order (the seed) */
    uint64_t shuffle_layers;   /* nonzero: each step group walks its layers in a random
                                * order (the seed) */
    uint32_t one_shot;         /* one-shot reads of random experts after each step */
    uint64_t one_shot_seed;    /* their seed (0: 1) */
} simp_shape;

/* Build the steps of a trace. @return 0, or -1 when out of memory. */
int simp_steps_from_trace(const tool_trace *t, const simp_shape *shape, simp_steps *out);
void simp_steps_free(simp_steps *st);
/* Requests in all: st->keys holds them in replay order (for sim_opt_keys). */
static inline size_t simp_steps_requests(const simp_steps *st)
{
    return st->n_steps ? st->off[st->n_steps] : 0;
}

typedef enum simp_policy {
    SIMP_LRU = 0, /* least recently used (the seed's policy) */
    SIMP_LFU,     /* decayed frequency: the least used, decayed per visit, goes */
    SIMP_LAYER,   /* layer distance alone: the entry whose layer comes last goes */
    SIMP_REUSE,   /* learned chance of reuse at the next visit, less its distance */
    SIMP_N_POLICIES
} simp_policy;

/* REUSE's weights: bias, log rate, 8 history bits (evict_reuse_model.h). */
#define SIMP_REUSE_W SMOE__REUSE_W

typedef struct simp_params {
    simp_policy policy;
    double decay;        /* LFU, REUSE: count decay per visit of the key's layer */
    double lambda;       /* REUSE: cost of a layer cycle of distance, in victims' chances */
    double rate;         /* REUSE: learning rate (0: the weights stay at their start) */
    uint32_t train_max;  /* REUSE: training examples per request, at most */
    const double *weights; /* REUSE: SIMP_REUSE_W start weights; NULL: the built-in ones */
    int no_history;      /* REUSE ablation: no history bits (frequency and distance) */
    int no_current;      /* REUSE ablation: idle keys of the current layer count as
                          * passed (next use a cycle away) instead of maybe next */
} simp_params;

/* The defaults docs/eviction.md reports for a policy. */
void simp_params_default(simp_params *p, simp_policy policy);
const char *simp_policy_name(simp_policy policy);
/* The policy named name ("lru", "lfu", "layer", "reuse"), or -1. */
int simp_policy_from_name(const char *name);

/* What a replay did besides hitting and missing. */
typedef struct simp_report {
    uint64_t evictions;         /* victims chosen by a scan */
    uint64_t scanned;           /* entries the scans looked at */
    uint64_t scan_ns;           /* time in the scans (the simulator's, not the ring's) */
    uint64_t no_victim;         /* misses that found every entry pinned (not inserted) */
    double weights[SIMP_REUSE_W]; /* REUSE: the weights at the end */
} simp_report;

/*
 * Replay st through a cache of `slots` entries under policy p. When
 * victims is not NULL it receives, per request, the key evicted to make
 * room (SIMP_NONE on a hit, when a free entry was used or when nothing
 * could be evicted); it must hold simp_steps_requests(st) entries. report
 * may be NULL. @return 0, or -1 when out of memory.
 */
int simp_run(const simp_steps *st, uint32_t slots, const simp_params *p, sim_result *out,
             uint32_t *victims, simp_report *report);

#endif
