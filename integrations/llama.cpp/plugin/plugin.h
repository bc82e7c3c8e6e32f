/*
 * plugin.h - libggml-smoe: a ggml backend, loaded at run time by llama.cpp's
 * own programs (GGML_BACKEND_PATH), that streams the expert tensors placed
 * in its buffer type "SMOE" (-ot exps=SMOE) from a vault and computes the
 * nodes reading them on the ring's memory with ggml's CPU kernels.
 *
 * One vault per process: the registry, its device and the stream are
 * process-wide (sp_g); backends (one per llama context) share the stream,
 * and llama.cpp runs one graph at a time per context. Compute state is
 * guarded by sp_g.lock, which graph_compute holds while it runs.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_PLUGIN_H
#define SMOE_PLUGIN_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include <smoe/smoe.h>

#include "../expert_name.h"
#include "ggml-backend-impl.h"

/* An expert tensor placed in an SMOE buffer. */
typedef struct sp_weight {
    const struct ggml_tensor *t;
    ggml_backend_buffer_t buf; /* the buffer it lies in (freed: the entry goes) */
    uint32_t layer;
    int kind;          /* SL_* */
    uint32_t n_expert; /* its outermost dimension */
    uint64_t slice;    /* bytes of one expert */
    int checked;       /* its bytes were compared with the vault */
} sp_weight;

/* The environment (docs/llama.cpp.md, "llama.cpp's own programs"). */
typedef struct sp_conf {
    const char *vault;   /* SMOE_VAULT; NULL: no device */
    uint32_t ring_slots; /* SMOE_RING_SLOTS */
    uint64_t ring_mb;    /* SMOE_RING_MB */
    uint32_t workers;    /* SMOE_WORKERS */
    uint32_t verify;     /* SMOE_VERIFY: SMOE_VERIFY_* */
    int lookahead;       /* SMOE_LOOKAHEAD */
    const char *stats;   /* SMOE_STATS: JSON file written at exit */
    const char *replay;  /* SMOE_REPLAY: a routing trace (measurement only) */
} sp_conf;

typedef struct sp_state {
    sp_conf conf;
    pthread_mutex_t lock;
    smoe_stream *s;
    int failed;          /* the vault could not be opened or was refused */
    char err[1024];
    char desc[640];      /* the device's description */

    sp_weight *w;
    uint32_t n_w, cap_w;

    uint32_t n_layers, n_expert;
    smoe_ring_region rr;

    /* graph_compute: the claims of the layer at hand */
    smoe_blob *held;     /* [n_expert] */
    uint8_t *mark;       /* [n_expert]: 1 held, |2 in the current group */
    uint32_t *hlist;     /* [n_expert]: the held experts */
    uint32_t n_held, held_layer;
    uint32_t routed_layer; /* layer whose routing this graph began last, UINT32_MAX: none */
    int32_t *ids;        /* remapped routing ids */
    uint64_t *offs;      /* [ids_cap]: each routed expert's component offset */
    size_t ids_cap;
    void *scratch;       /* output rows of a pass over experts at one offset */
    size_t scratch_cap;
    uint64_t wait_ns, groups, expert_nodes, graphs;
    uint64_t offset_passes; /* passes of a group over experts at one offset (index vaults) */
    /* What hits cost: the demand prefetch, claim and release of experts
     * the prefetch found resident (SMOE_RESIDENT), and their count. */
    uint64_t hit_ns, hit_claims;
    uint64_t miss_wait_ns; /* claims of the other experts: waiting for their reads */
} sp_state;

extern sp_state sp_g;

/* plugin_state.c */
/* MinGW: formats as C99 has them (__USE_MINGW_ANSI_STDIO), not Microsoft's. */
#if defined(_WIN32)
#define SP_PRINTF(a, b) __attribute__((format(gnu_printf, a, b)))
#else
#define SP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#endif
void sp_log_error(const char *fmt, ...) SP_PRINTF(1, 2);
uint64_t sp_now_ns(void);
/* Routing ids (I32 [k, n_tokens]): the expert of token t's j-th choice. */
int32_t sp_id_at(const struct ggml_tensor *ids, int64_t j, int64_t t);

/* plugin_buft.c */
ggml_backend_buffer_type_t sp_buft(void);
/* The expert tensor t is (view of) a weight in an SMOE buffer, or NULL. */
const sp_weight *sp_weight_of(const struct ggml_tensor *t);

/* plugin_mem_posix.c, plugin_mem_win32.c: the SMOE buffers' memory. */
/* len bytes of address space that cost no memory until used; NULL with
 * sp_g.err's message in err. */
void *sp_mem_reserve(size_t len, char *err, size_t errlen);
/* [addr, addr + len) will be read and written (Windows: committed). 0, or
 * -1 with the reason in err. */
int sp_mem_use(void *addr, size_t len, char *err, size_t errlen);
/* [addr, addr + len) released and made inaccessible: a read faults. */
int sp_mem_none(void *addr, size_t len, char *err, size_t errlen);
void sp_mem_release(void *base, size_t len);
size_t sp_mem_page(void);

/* plugin_vault.c */
/* Open the stream once every expert tensor is placed (first set_tensor).
 * 0, or -1 with sp_g.err set and logged. */
int sp_open(void);
/* Compare the loader's bytes of w with the vault (first and last expert). */
int sp_check(sp_weight *w, const void *data, size_t off, size_t size);
void sp_write_stats(void);

/* plugin_idle.c: serve mode. The stream is busy from a graph part until
 * no graph part has run for SP_IDLE_MS: the pre-warm refills the ring
 * between requests, not between the graph parts of one token. */
#define SP_IDLE_MS 100
void sp_busy_begin(void);
void sp_busy_end(void);
void sp_idle_stop(void);

/* plugin_compute.c */
struct sp_backend;
enum ggml_status sp_graph_compute(ggml_backend_t cpu, struct ggml_cgraph *g);
bool sp_supports_op(const struct ggml_tensor *op);
void sp_release_all(void);

/* plugin_replay.c: SMOE_REPLAY, the routing replayed from a trace
 * (measurement only: outputs differ from the model's). */
/* Read the trace: 0, or -1 with sp_g.err set. */
int sp_replay_init(const char *path);
int sp_replay_on(void);
/* Overwrite the routing ids of a node of layer with the trace's, once per
 * graph part and layer: 0, or -1 (logged). No-op without SMOE_REPLAY. */
int sp_replay_node(struct ggml_tensor *ids, uint32_t layer);
/* Replay tokens the first MoE layer has taken. */
uint64_t sp_replay_tokens(void);
void sp_replay_free(void);
/* plugin_look.c: the router lookahead (SMOE_LOOKAHEAD) */
/* Size its memory once the vault is open: 0, or -1 out of memory. */
int sp_look_open(void);
void sp_look_free(void);
int sp_look_on(void);
/* A routing of layer l begins (ids: its top-k): learn l's router the
 * first time, count the experts against the hints made for it. */
void sp_look_route(const struct ggml_tensor *ids, uint32_t l);
/* Layer l's demand is issued: hint layer l+1's guessed experts. */
void sp_look_hint(const struct ggml_tensor *ids, uint32_t l);
/* The lookahead's counters as JSON fields (", \"lookahead\": ..."). */
void sp_look_json(FILE *f);

#endif
