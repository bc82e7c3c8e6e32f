/*
 * plugin_compute.c - compute the nodes that read expert tensors on the
 * ring's memory, with ggml's own CPU kernels and no copy.
 *
 * A node (MUL_MAT_ID of an expert matrix, ADD_ID of an expert bias) reads
 * expert i at weight->data + i * nb[expert dim]. The node is computed as a
 * one-node graph on the CPU backend with that weight replaced by a view of
 * the ring: data = ring base + the component's offset in the blob, the
 * expert dimension's stride = the slot stride, one "expert" per slot, and
 * the routing ids mapped from expert to the slot that holds it. The
 * routed experts are demand-prefetched and claimed first; a union larger
 * than the ring is computed in groups of tokens whose union fits. Claims
 * are kept while the next node reads the same layer (gate, up, down) and
 * released when another layer comes, or at the end of the graph.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin.h"

#define CLAIM_TIMEOUT_NS 120000000000ull

static int node_fail(const char *fmt, ...) SP_PRINTF(1, 2);
static int node_fail(const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_log_error("%s", msg);
    return -1;
}

/* The expert tensor a node reads, its routing ids and its token dimension. */
static const struct ggml_tensor *expert_src(const struct ggml_tensor *op)
{
    if (op->op == GGML_OP_MUL_MAT_ID)
        return op->src[0];
    if (op->op == GGML_OP_ADD_ID)
        return op->src[1];
    return NULL;
}

static bool is_view_op(enum ggml_op op)
{
    return op == GGML_OP_NONE || op == GGML_OP_VIEW || op == GGML_OP_RESHAPE ||
           op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

static bool is_expert_node(const struct ggml_tensor *op)
{
    const struct ggml_tensor *w = expert_src(op);
    return w && sp_weight_of(w) && op->src[2] && op->src[2]->type == GGML_TYPE_I32 &&
           op->src[2]->ne[2] == 1 && op->src[2]->ne[3] == 1;
}

/* The GLU between the expert matmuls (gate and up in, down's input out):
 * taken so that a MoE layer's expert part is one graph split, not three. */
static bool is_expert_glu(const struct ggml_tensor *op)
{
    if (op->op != GGML_OP_GLU)
        return false;
    for (int i = 0; i < 2; i++) {
        const struct ggml_tensor *x = op->src[i];
        if (i == 1 && !x)
            break;
        while (x && x->view_src && is_view_op(x->op))
            x = x->view_src;
        if (!x || !is_expert_node(x))
            return false;
    }
    return true;
}

bool sp_supports_op(const struct ggml_tensor *op)
{
    if (is_view_op(op->op)) { /* the expert tensors themselves, and views of them */
        const struct ggml_tensor *t = op->view_src ? op->view_src : op;
        return t->buffer && t->buffer->buft == sp_buft();
    }
    return is_expert_node(op) || is_expert_glu(op);
}

/* mark bits: 1 held, 2 in the current group, 4 counted (group_end), 8
 * demand-prefetched, 16 resident at that prefetch (a hit: its prefetch,
 * claim and release are timed into hit_ns). */
#define MARK_HIT 16

static void release_one(uint32_t e)
{
    uint64_t t0 = (sp_g.mark[e] & MARK_HIT) ? sp_now_ns() : 0;
    smoe_release(sp_g.s, &sp_g.held[e]);
    if (t0)
        sp_g.hit_ns += sp_now_ns() - t0;
    sp_g.mark[e] = 0;
}

void sp_release_all(void)
{
    for (uint32_t i = 0; i < sp_g.n_held; i++)
        release_one(sp_g.hlist[i]);
    sp_g.n_held = 0;
}

static void release_unmarked(void)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < sp_g.n_held; i++) {
        uint32_t e = sp_g.hlist[i];
        if (sp_g.mark[e] & 2)
            sp_g.hlist[n++] = e;
        else
            release_one(e);
    }
    sp_g.n_held = n;
}

/* Mark (|2) the experts of tokens [t0, t1) and return the first token past
 * t0 whose experts would take the group's union past the ring; -1 if one
 * token alone routes to more experts than the ring has slots. */
static int64_t group_end(const struct ggml_tensor *ids, int64_t t0, uint32_t layer)
{
    uint32_t slots = sp_g.rr.slots, n = 0;
    int64_t k = ids->ne[0], t = t0;
    for (; t < ids->ne[1]; t++) {
        uint32_t add = 0;
        for (int64_t j = 0; j < k; j++) {
            int32_t e = sp_id_at(ids, j, t);
            if (e < 0 || (uint32_t)e >= sp_g.n_expert)
                return node_fail("layer %" PRIu32 ": token %" PRId64 " routes to expert %"
                                 PRId32 ", not below the vault's %" PRIu32, layer, t, e,
                                 sp_g.n_expert);
            if (!(sp_g.mark[e] & 4)) {
                sp_g.mark[e] |= 4;
                add++;
            }
        }
        for (int64_t j = 0; j < k; j++)
            sp_g.mark[sp_id_at(ids, j, t)] &= (uint8_t)~4;
        if (n + add > slots && t > t0)
            break;
        if (add > slots)
            return node_fail("layer %" PRIu32 ": a token routes to %" PRIu32 " experts, the "
                             "ring has %" PRIu32 " slots (SMOE_RING_SLOTS)", layer, add, slots);
        for (int64_t j = 0; j < k; j++) {
            int32_t e = sp_id_at(ids, j, t);
            if (!(sp_g.mark[e] & 2)) {
                sp_g.mark[e] |= 2;
                n++;
            }
        }
    }
    return t;
}

static int claim_one(uint32_t layer, uint32_t e)
{
    uint64_t t0 = sp_now_ns();
    int r;
    for (;;) {
        r = smoe_claim_wait(sp_g.s, layer, e, CLAIM_TIMEOUT_NS, &sp_g.held[e]);
        if (r != SMOE_EFULL || sp_now_ns() - t0 > CLAIM_TIMEOUT_NS)
            break;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    uint64_t dt = sp_now_ns() - t0;
    sp_g.wait_ns += dt;
    if (sp_g.mark[e] & MARK_HIT) {
        sp_g.hit_ns += dt;
        sp_g.hit_claims++;
    } else {
        sp_g.miss_wait_ns += dt;
    }
    if (r < 0)
        return node_fail("reading expert %" PRIu32 " of layer %" PRIu32 " from the vault "
                         "failed: %s (%s)", e, layer, smoe_strerror(r), smoe_last_error());
    sp_g.mark[e] |= 1;
    sp_g.hlist[sp_g.n_held++] = e;
    return 0;
}

/* After a failed claim: take back the demand prefetches of the group's
 * experts not claimed yet (marked 8), so that none keeps a slot pinned for
 * a claim that will never come. */
static void drain(const struct ggml_tensor *ids, int64_t t0, int64_t t1, uint32_t layer)
{
    for (int64_t t = t0; t < t1; t++)
        for (int64_t j = 0; j < ids->ne[0]; j++) {
            uint32_t e = (uint32_t)sp_id_at(ids, j, t);
            if (!(sp_g.mark[e] & 8) || (sp_g.mark[e] & 1))
                continue;
            sp_g.mark[e] &= (uint8_t)~8;
            if (smoe_cancel(sp_g.s, layer, e) == 0)
                continue;
            smoe_blob b;
            if (smoe_claim_wait(sp_g.s, layer, e, CLAIM_TIMEOUT_NS, &b) >= 0)
                smoe_release(sp_g.s, &b);
        }
}

/* Demand-prefetch expert e of layer; a hit (resident) is marked and timed. */
static void prefetch_one(uint32_t layer, uint32_t e)
{
    uint64_t t0 = sp_now_ns();
    int r = smoe_prefetch(sp_g.s, layer, e, SMOE_PREFETCH_DEMAND);
    sp_g.mark[e] &= (uint8_t)~MARK_HIT;
    if (r >= 0)
        sp_g.mark[e] |= 8;
    if (r == SMOE_RESIDENT) {
        sp_g.mark[e] |= MARK_HIT;
        sp_g.hit_ns += sp_now_ns() - t0;
    }
}

/* Claim the group's experts (marked 2) of tokens [t0, t1): prefetch all
 * first so that their reads run at once, then (with hint: the router
 * lookahead's hints for the next layer, queued behind this demand) claim
 * each. */
static int claim_group(const struct ggml_tensor *ids, int64_t t0, int64_t t1, uint32_t layer,
                       int hint)
{
    release_unmarked();
    int r = 0;
    for (int pass = 0; pass < 2 && r == 0; pass++) {
        if (pass == 1 && hint)
            sp_look_hint(ids, layer);
        for (int64_t t = t0; t < t1 && r == 0; t++)
            for (int64_t j = 0; j < ids->ne[0] && r == 0; j++) {
                uint32_t e = (uint32_t)sp_id_at(ids, j, t);
                if (sp_g.mark[e] & 1)
                    continue;
                if (pass == 1)
                    r = claim_one(layer, e);
                else if (!(sp_g.mark[e] & 8))
                    prefetch_one(layer, e);
            }
    }
    if (r < 0)
        drain(ids, t0, t1, layer);
    return r;
}

static struct ggml_tensor *leaf(struct ggml_context *ctx, const struct ggml_tensor *src,
                                int tdim, int64_t t0, int64_t nt)
{
    struct ggml_tensor *x = ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
    memcpy(x->nb, src->nb, sizeof x->nb);
    x->ne[tdim] = nt;
    x->data = (char *)src->data + t0 * src->nb[tdim];
    return x;
}

/* Where w's component lies in held blob b: 0 and *off, or -1 (logged). */
static int comp_offset(const sp_weight *w, const smoe_blob *b, uint64_t *off)
{
    smoe_component c;
    if (smoe_blob_find(sp_g.s, b, sl_kind_component[w->kind], &c) < 0 ||
        c.offset + w->slice > b->size)
        return node_fail("%s: the vault's blob of layer %" PRIu32 " expert %" PRIu32
                         " holds no component %s of %" PRIu64 " bytes", w->t->name, w->layer,
                         b->expert, sl_kind_component[w->kind], w->slice);
    *off = c.offset;
    return 0;
}

/* One pass of tokens [t0, t1) of node op on the ring viewed from component
 * offset co (every routed expert of the pass lies there in its slot), into
 * dst (op's own rows, or a scratch of the same strides). */
static int compute_view(ggml_backend_t cpu, struct ggml_tensor *op, const sp_weight *w,
                        int64_t t0, int64_t t1, uint64_t co, void *dst)
{
    int64_t nt = t1 - t0;
    static _Thread_local _Alignas(16) char mem[16384]; /* ggml_init: GGML_MEM_ALIGN */
    struct ggml_init_params ip = {sizeof mem, mem, true};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx)
        return node_fail("cannot make a ggml context");
    /* The ring as the expert tensor: one expert per slot. */
    const struct ggml_tensor *wt = w->t;
    int edim = ggml_n_dims(wt) - 1;
    struct ggml_tensor *ring = leaf(ctx, wt, edim, 0, sp_g.rr.slots);
    ring->nb[edim] = sp_g.rr.slot_stride;
    ring->data = (char *)sp_g.rr.base + co;
    struct ggml_tensor *rid = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, op->src[2]->ne[0], nt);
    rid->data = sp_g.ids;
    struct ggml_tensor *out = leaf(ctx, op, 2, t0, nt);
    out->data = dst;
    out->op = op->op;
    memcpy(out->op_params, op->op_params, sizeof out->op_params);
    if (op->op == GGML_OP_MUL_MAT_ID) {
        out->src[0] = ring;
        out->src[1] = leaf(ctx, op->src[1], 2, t0, nt);
    } else {
        out->src[0] = leaf(ctx, op->src[0], 2, t0, nt);
        out->src[1] = ring;
    }
    out->src[2] = rid;
    struct ggml_cgraph *g = ggml_new_graph_custom(ctx, 8, false);
    ggml_build_forward_expand(g, out);
    enum ggml_status st = ggml_backend_graph_compute(cpu, g);
    ggml_free(ctx);
    if (st != GGML_STATUS_SUCCESS)
        return node_fail("%s: computing on the ring failed (ggml status %d)", op->name, st);
    return 0;
}

/* Compute tokens [t0, t1) of node op on the claimed experts. In a packed
 * vault a component lies at one offset in every slot, and one strided
 * view of the ring computes the group. In an index vault each expert's
 * component lies where its source file's alignment puts it: the group is
 * computed once per distinct offset, each pass into a scratch whose rows
 * of the experts at that offset are then copied to the output (the
 * activations' rows, never an expert's bytes). */
static int compute_group(ggml_backend_t cpu, struct ggml_tensor *op, const sp_weight *w,
                         int64_t t0, int64_t t1)
{
    const struct ggml_tensor *ids = op->src[2];
    int64_t k = ids->ne[0], n = (t1 - t0) * k;
    uint64_t *off = sp_g.offs;
    int mixed = 0;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t j = 0; j < k; j++) {
            int64_t i = (t - t0) * k + j;
            if (comp_offset(w, &sp_g.held[sp_id_at(ids, j, t)], &off[i]) < 0)
                return -1;
            mixed |= off[i] != off[0];
        }
    char *dst = (char *)op->data + t0 * op->nb[2];
    if (!mixed) {
        for (int64_t t = t0; t < t1; t++)
            for (int64_t j = 0; j < k; j++)
                sp_g.ids[(t - t0) * k + j] = (int32_t)(sp_g.held[sp_id_at(ids, j, t)].ring_offset /
                                                       sp_g.rr.slot_stride);
        return compute_view(cpu, op, w, t0, t1, off[0], dst);
    }
    size_t need = (size_t)(t1 - t0) * op->nb[2];
    if (need > sp_g.scratch_cap) {
        void *p = realloc(sp_g.scratch, need);
        if (!p)
            return node_fail("out of memory");
        sp_g.scratch = p;
        sp_g.scratch_cap = need;
    }
    size_t row = (size_t)op->ne[0] * op->nb[0];
    for (int64_t first = 0; first < n;) {
        uint64_t co = off[first];
        /* Entries at another offset are routed to a slot of this pass and
         * their rows of the scratch dropped. */
        int32_t any = (int32_t)(sp_g.held[sp_id_at(ids, first % k, t0 + first / k)].ring_offset /
                                sp_g.rr.slot_stride);
        for (int64_t i = 0; i < n; i++)
            sp_g.ids[i] = off[i] == co ? (int32_t)(sp_g.held[sp_id_at(ids, i % k, t0 + i / k)]
                                                       .ring_offset / sp_g.rr.slot_stride)
                                       : any;
        if (compute_view(cpu, op, w, t0, t1, co, sp_g.scratch) < 0)
            return -1;
        sp_g.offset_passes++;
        int64_t next = n;
        for (int64_t i = first; i < n; i++) {
            if (off[i] != co) {
                if (next == n && off[i] != UINT64_MAX)
                    next = i;
                continue;
            }
            size_t at = (size_t)(i % k) * op->nb[1] + (size_t)(i / k) * op->nb[2];
            memcpy(dst + at, (char *)sp_g.scratch + at, row);
            off[i] = UINT64_MAX; /* done */
        }
        first = next;
    }
    return 0;
}

/* A node that reads no expert tensor (the GLU), as a one-node graph on the
 * CPU backend. */
static int compute_plain_node(ggml_backend_t cpu, struct ggml_tensor *op)
{
    static _Thread_local _Alignas(16) char mem[16384]; /* ggml_init: GGML_MEM_ALIGN */
    struct ggml_init_params ip = {sizeof mem, mem, true};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx)
        return node_fail("cannot make a ggml context");
    struct ggml_tensor *out = leaf(ctx, op, 0, 0, op->ne[0]);
    out->op = op->op;
    memcpy(out->op_params, op->op_params, sizeof out->op_params);
    for (int i = 0; i < GGML_MAX_SRC && op->src[i]; i++)
        out->src[i] = leaf(ctx, op->src[i], 0, 0, op->src[i]->ne[0]);
    struct ggml_cgraph *g = ggml_new_graph_custom(ctx, 8, false);
    ggml_build_forward_expand(g, out);
    enum ggml_status st = ggml_backend_graph_compute(cpu, g);
    ggml_free(ctx);
    if (st != GGML_STATUS_SUCCESS)
        return node_fail("%s: computing failed (ggml status %d)", op->name, st);
    return 0;
}

static int compute_expert_node(ggml_backend_t cpu, struct ggml_tensor *op)
{
    const sp_weight *w = sp_weight_of(expert_src(op));
    const struct ggml_tensor *ids = op->src[2];
    if (sp_g.n_held && sp_g.held_layer != w->layer)
        sp_release_all();
    sp_g.held_layer = w->layer;
    if (sp_replay_node(op->src[2], w->layer) < 0)
        return -1;
    size_t need = (size_t)(ids->ne[0] * ids->ne[1]);
    if (need > sp_g.ids_cap) {
        int32_t *n = realloc(sp_g.ids, need * sizeof *n);
        if (n)
            sp_g.ids = n;
        uint64_t *o = n ? realloc(sp_g.offs, need * sizeof *o) : NULL;
        if (!o)
            return node_fail("out of memory");
        sp_g.offs = o;
        sp_g.ids_cap = need;
    }
    sp_g.expert_nodes++;
    int route = w->layer != sp_g.routed_layer; /* the layer's first node in this graph */
    if (route) {
        sp_g.routed_layer = w->layer;
        sp_look_route(ids, w->layer);
    }
    for (int64_t t0 = 0; t0 < ids->ne[1]; route = 0) {
        int64_t t1 = group_end(ids, t0, w->layer);
        if (t1 < 0)
            return -1;
        int r = claim_group(ids, t0, t1, w->layer, route);
        if (r == 0)
            r = compute_group(cpu, op, w, t0, t1);
        for (uint32_t i = 0; i < sp_g.n_expert; i++)
            sp_g.mark[i] &= 1 | MARK_HIT;
        if (r < 0)
            return r;
        sp_g.groups++;
        t0 = t1;
    }
    return 0;
}

enum ggml_status sp_graph_compute(ggml_backend_t cpu, struct ggml_cgraph *g)
{
    if (sp_g.failed || !sp_g.s) {
        sp_log_error("%s", sp_g.failed ? sp_g.err : "the vault is not open");
        return GGML_STATUS_FAILED;
    }
    sp_g.graphs++;
    sp_g.routed_layer = UINT32_MAX;
    enum ggml_status st = GGML_STATUS_SUCCESS;
    for (int i = 0; i < ggml_graph_n_nodes(g) && st == GGML_STATUS_SUCCESS; i++) {
        struct ggml_tensor *n = ggml_graph_node(g, i);
        if (ggml_is_empty(n) || is_view_op(n->op))
            continue;
        if (is_expert_node(n)) {
            if (compute_expert_node(cpu, n) < 0)
                st = GGML_STATUS_FAILED;
        } else if (is_expert_glu(n)) {
            if (compute_plain_node(cpu, n) < 0)
                st = GGML_STATUS_FAILED;
        } else {
            sp_log_error("node %s (%s) is not one this backend computes", n->name,
                         ggml_op_desc(n));
            st = GGML_STATUS_FAILED;
        }
    }
    sp_release_all();
    return st;
}
