/*
 * attach.c - open the vault for a GGUF, place the expert tensors, and check
 * that the vault holds the model's expert tensors before anything runs.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "internal.h"

static _Thread_local char open_err[768];

const char *smoe_llama_open_error(void)
{
    return open_err;
}

static int open_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int open_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(open_err, sizeof open_err, fmt, ap);
    va_end(ap);
    return code;
}

/* Dense bytes (everything but the expert tensors) and top-k of a GGUF. */
int sl_replay_open(smoe_llama *h, const char *path)
{
    char err[sizeof h->err];
    int r = sl_replay_read(path, &h->replay, err, sizeof err);
    return r < 0 ? sl_fail(h, r, "%s", err) : 0;
}

static int gguf_survey(const char *path, uint64_t *dense, uint32_t *top_k)
{
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g)
        return open_fail(SMOE_EFORMAT, "%s: not a GGUF file llama.cpp can read", path);
    *dense = 0;
    int64_t n = gguf_get_n_tensors(g), experts = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t l;
        int k;
        if (sl_parse_name(gguf_get_tensor_name(g, i), &l, &k) == 0)
            experts++;
        else
            *dense += gguf_get_tensor_size(g, i);
    }
    *top_k = 0;
    int64_t ak = gguf_find_key(g, "general.architecture");
    if (ak >= 0 && gguf_get_kv_type(g, ak) == GGUF_TYPE_STRING) {
        char key[256];
        snprintf(key, sizeof key, "%s.expert_used_count", gguf_get_val_str(g, ak));
        int64_t kk = gguf_find_key(g, key);
        if (kk >= 0 && gguf_get_kv_type(g, kk) == GGUF_TYPE_UINT32)
            *top_k = gguf_get_val_u32(g, kk);
    }
    gguf_free(g);
    if (!experts)
        return open_fail(SMOE_ENOENT, "%s: no expert tensors (blk.N.ffn_*_exps.weight): "
                         "not a MoE model this integration streams", path);
    return 0;
}

int smoe_llama_open(const char *gguf_path, const char *vault_path,
                    const smoe_llama_opts *opts, smoe_llama **out)
{
    *out = NULL;
    smoe_llama_opts o = SMOE_LLAMA_OPTS_INIT;
    if (opts) {
        if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof o)
            return open_fail(SMOE_EINVAL, "smoe_llama_opts.struct_size is %zu, expected %zu",
                             opts->struct_size, sizeof o);
        memcpy(&o, opts, opts->struct_size);
    }
    uint64_t dense = 0;
    uint32_t top_k = 0;
    int r = gguf_survey(gguf_path, &dense, &top_k);
    if (r < 0)
        return r;
    smoe_llama *h = calloc(1, sizeof *h);
    if (!h || !(h->gguf_path = strdup(gguf_path))) {
        free(h);
        return open_fail(SMOE_ENOMEM, "out of memory");
    }
    h->flags = o.flags;
    h->claim_timeout_ns = (uint64_t)(o.claim_timeout_ms ? o.claim_timeout_ms : 120000) * 1000000u;
    h->log_fn = o.log_fn;
    h->log_user = o.log_user;
    h->st.struct_size = sizeof h->st;

    smoe_open_opts so = SMOE_OPEN_OPTS_INIT;
    so.ring_slots = o.ring_slots;
    so.workers = o.workers;
    so.verify = o.verify;
    so.flags = SMOE_OPEN_ALLOW_BUFFERED | o.open_flags;
    if (o.flags & SMOE_LLAMA_MAP)
        so.flags |= SMOE_OPEN_SHAREABLE;
    so.top_k = top_k;
    so.scout_bytes = dense;
    so.log_fn = o.log_fn;
    so.log_user = o.log_user;
    if (!vault_path) {
        /* Replay only (stock llama.cpp routed by a trace): no stream. */
        if (!o.replay_trace) {
            smoe_llama_close(h);
            return open_fail(SMOE_EINVAL, "no vault: only a replay trace can be used "
                             "without one");
        }
        if ((r = sl_replay_open(h, o.replay_trace)) < 0) {
            open_fail(r, "%s", h->err);
            smoe_llama_close(h);
            return r;
        }
        h->n_expert = UINT32_MAX;
        *out = h;
        return 0;
    }
    if ((r = smoe_open(vault_path, &so, &h->s)) < 0) {
        open_fail(r, "%s", smoe_last_error());
        smoe_llama_close(h);
        return r;
    }
    if (o.flags & SMOE_LLAMA_MAP) {
        smoe_ring_region rr = SMOE_RING_REGION_INIT;
        smoe_ring_region_get(h->s, &rr);
        h->map = 1;
        h->ring_fd = rr.fd;
        h->ring_fd_off = rr.fd_offset;
        h->page = (uint64_t)sysconf(_SC_PAGESIZE);
    }
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    smoe_vault_info_get(h->s, &vi);
    h->n_layers = vi.layers;
    h->n_expert = vi.experts;
    h->n_layouts = vi.layouts;
    sl_buft_init(h);
    if (o.replay_trace && (r = sl_replay_open(h, o.replay_trace)) < 0) {
        open_fail(r, "%s", h->err);
        smoe_llama_close(h);
        return r;
    }
    *out = h;
    return 0;
}

void smoe_llama_model_params(smoe_llama *h, struct llama_model_params *mp)
{
    if (h->s)
        mp->tensor_buft_overrides = h->ov;
    /* Repacking buffer types would take the expert tensors away from the
     * override, and AMX crashes on some CPUs. */
    mp->use_extra_bufts = false;
}

static void describe(const sl_tensor *t, char *buf, size_t n)
{
    snprintf(buf, n, "%s (%s, ne = [%" PRId64 ", %" PRId64 ", %" PRId64 "], %" PRIu64
             " bytes per expert)", t->name, ggml_type_name(t->type), t->ne[0], t->ne[1],
             t->ne[2], t->slice);
}

/* Does component c of the vault hold tensor t's expert slice? */
static int comp_fits(const smoe_component *c, const sl_tensor *t)
{
    if (c->dtype != SMOE_DTYPE_GGML((uint32_t)t->type) || c->nbytes != t->slice)
        return 0;
    /* The vault's shape is the slice's, outermost first: the tensor's
     * dimensions below the expert one, reversed. */
    int nd = 1;
    for (int i = 1; i < GGML_MAX_DIMS; i++)
        if (t->ne[i] > 1)
            nd = i + 1;
    int sd = nd > 1 ? nd - 1 : 1;
    if (c->ndim != (uint32_t)sd)
        return 0;
    for (int i = 0; i < sd; i++)
        if (c->shape[i] != (uint64_t)t->ne[sd - 1 - i])
            return 0;
    return 1;
}

static int build_layers(smoe_llama *h)
{
    if (!h->n_tensors)
        return sl_fail(h, SMOE_ENOENT, "%s: no tensor was placed in the streamed buffer "
                       "type: pass smoe_llama_model_params() to the model load", h->gguf_path);
    h->layers = calloc(h->n_layers ? h->n_layers : 1, sizeof *h->layers);
    if (!h->layers)
        return sl_fail(h, SMOE_ENOMEM, "out of memory");
    char d[256];
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        sl_tensor *t = &h->tensors[i];
        describe(t, d, sizeof d);
        if (sl_parse_name(t->name, &t->layer, &t->kind) < 0)
            return sl_fail(h, SMOE_EFORMAT, "tensor %s is not an expert tensor the vault can "
                           "hold", d);
        if (t->layer >= h->n_layers)
            return sl_fail(h, SMOE_ENOENT, "the vault does not belong to %s: tensor %s is in "
                           "layer %" PRIu32 ", the vault has %" PRIu32 " layers", h->gguf_path,
                           d, t->layer, h->n_layers);
        if (t->n_expert != h->n_expert)
            return sl_fail(h, SMOE_ECOUNT, "the vault does not belong to %s: tensor %s stacks "
                           "%" PRIu32 " experts, the vault has %" PRIu32 " per layer",
                           h->gguf_path, d, t->n_expert, h->n_expert);
        sl_layer *ly = &h->layers[t->layer];
        if (ly->t[t->kind])
            return sl_fail(h, SMOE_EDUP, "tensor %s placed twice", t->name);
        ly->t[t->kind] = t;
        ly->present = 1;
    }
    return 0;
}

static int build_layouts(smoe_llama *h)
{
    size_t nl = h->n_layouts ? h->n_layouts : 1;
    h->comp_off = malloc(sizeof *h->comp_off * nl * SL_KINDS);
    h->compat = calloc((size_t)h->n_layers * nl, 1);
    smoe_component *comps = calloc(nl * SL_KINDS, sizeof *comps);
    uint32_t *ncomp = calloc(nl, sizeof *ncomp);
    if (!h->comp_off || !h->compat || !comps || !ncomp) {
        free(comps);
        free(ncomp);
        return sl_fail(h, SMOE_ENOMEM, "out of memory");
    }
    for (uint32_t lo = 0; lo < h->n_layouts; lo++) {
        int c = smoe_layout_count(h->s, lo);
        ncomp[lo] = c < 0 ? 0 : (uint32_t)c;
        for (int k = 0; k < SL_KINDS; k++) {
            smoe_component *cp = &comps[(size_t)lo * SL_KINDS + k];
            if (smoe_layout_find(h->s, lo, sl_kind_component[k], cp) < 0)
                cp->name[0] = 0;
            h->comp_off[(size_t)lo * SL_KINDS + k] = cp->name[0] ? cp->offset : UINT64_MAX;
        }
    }
    int rc = 0;
    for (uint32_t l = 0; l < h->n_layers && rc == 0; l++) {
        const sl_layer *ly = &h->layers[l];
        if (!ly->present)
            continue;
        int any = 0;
        const sl_tensor *bad = NULL;
        for (uint32_t lo = 0; lo < h->n_layouts; lo++) {
            uint32_t have = 0;
            int ok = 1;
            for (int k = 0; k < SL_KINDS && ok; k++) {
                if (!ly->t[k])
                    continue;
                have++;
                const smoe_component *cp = &comps[(size_t)lo * SL_KINDS + k];
                if (!cp->name[0] || !comp_fits(cp, ly->t[k])) {
                    ok = 0;
                    bad = ly->t[k];
                }
            }
            if (ok && have == ncomp[lo]) {
                h->compat[(size_t)l * h->n_layouts + lo] = 1;
                any = 1;
            }
        }
        if (!any) {
            char d[256];
            if (!bad)
                for (int k = 0; k < SL_KINDS && !bad; k++)
                    bad = ly->t[k];
            describe(bad, d, sizeof d);
            rc = sl_fail(h, SMOE_EFORMAT, "the vault does not belong to %s: no blob layout of "
                         "the vault holds layer %" PRIu32 "'s expert tensors as the GGUF has "
                         "them (first that differs: %s)", h->gguf_path, l, d);
        }
    }
    free(comps);
    free(ncomp);
    return rc;
}

/*
 * Point every layer's tensor of one kind (gate, up, down...) at one staging
 * region: the range of the largest such tensor. stage.c copies a layer's
 * chosen experts in right before that layer's matmuls, so one layer's worth
 * of memory serves all layers. The matmuls read tensor->data when they run,
 * and the graph is built from these tensor objects, so the layers share it
 * as they share nothing else. Transparent huge pages where the kernel
 * offers them (the buffer is 2 MiB aligned), populated now: a page fault
 * costs more than a copy of its page (about 10 us on a virtual machine).
 * With SMOE_LLAMA_MAP a kind whose slices are all mapped (place.c) needs
 * no staging memory: its range stays reserved and reads as zeros.
 */
/* Will every slice of kind k be mapped, for every layout, at base? */
static int all_mapped(const smoe_llama *h, int k, uint8_t *base)
{
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        sl_tensor t = h->tensors[i];
        if (t.kind != k)
            continue;
        t.base = base;
        for (uint32_t lo = 0; lo < h->n_layouts; lo++)
            if (h->compat[(size_t)t.layer * h->n_layouts + lo] && !sl_mappable(h, &t, lo, k))
                return 0;
    }
    return 1;
}

static int map_staging(smoe_llama *h)
{
    sl_tensor *host[SL_KINDS] = {NULL};
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        sl_tensor *t = &h->tensors[i];
        if (!host[t->kind] || t->slice * t->n_expert > host[t->kind]->slice * host[t->kind]->n_expert)
            host[t->kind] = t;
    }
    for (int k = 0; k < SL_KINDS; k++) {
        if (!host[k] || all_mapped(h, k, host[k]->base))
            continue;
        uint64_t n = host[k]->slice * host[k]->n_expert;
        h->st.stage_bytes += n;
#ifdef MADV_HUGEPAGE
        madvise(host[k]->base, n, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
        if (madvise(host[k]->base, n, MADV_POPULATE_WRITE) == 0)
            continue;
#endif
        long ps = sysconf(_SC_PAGESIZE);
        for (uint64_t o = 0; o < n; o += (uint64_t)ps)
            host[k]->base[o] = 0;
    }
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        sl_tensor *t = &h->tensors[i];
        t->base = host[t->kind]->base;
        t->tensor->data = t->base;
    }
    return 0;
}

/* Compare expert e of layer l in the vault with the GGUF's bytes. */
static int sample_matches(smoe_llama *h, int fd, struct gguf_context *g, uint32_t l, uint32_t e)
{
    smoe_blob b;
    int r = smoe_claim_wait(h->s, l, e, h->claim_timeout_ns, &b);
    if (r < 0)
        return sl_fail(h, r, "reading expert %" PRIu32 " of layer %" PRIu32 " to check the "
                       "vault against %s failed: %s (%s)", e, l, h->gguf_path,
                       smoe_strerror(r), smoe_last_error());
    const sl_layer *ly = &h->layers[l];
    const uint64_t *off = &h->comp_off[(size_t)b.layout * SL_KINDS];
    uint8_t *buf = NULL;
    for (int k = 0; k < SL_KINDS && r >= 0; k++) {
        const sl_tensor *t = ly->t[k];
        if (!t)
            continue;
        int64_t id = gguf_find_tensor(g, t->name);
        if (id < 0) {
            r = sl_fail(h, SMOE_ENOENT, "%s: tensor %s is missing", h->gguf_path, t->name);
            break;
        }
        uint8_t *nb = realloc(buf, t->slice ? t->slice : 1);
        if (!nb) {
            r = sl_fail(h, SMOE_ENOMEM, "out of memory");
            break;
        }
        buf = nb;
        off_t pos = (off_t)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id) +
                            (uint64_t)e * t->slice);
        ssize_t got = pread(fd, buf, t->slice, pos);
        if (got != (ssize_t)t->slice)
            r = sl_fail(h, SMOE_EIO, "%s: cannot read tensor %s at byte %lld: %s",
                        h->gguf_path, t->name, (long long)pos,
                        got < 0 ? strerror(errno) : "short read");
        else if (b.layout >= h->n_layouts || off[k] == UINT64_MAX ||
                 memcmp(buf, (const uint8_t *)b.data + off[k], t->slice))
            r = sl_fail(h, SMOE_EFORMAT, "the vault does not belong to %s: expert %" PRIu32
                        " of %s differs from the vault's blob (layer %" PRIu32 ", component "
                        "%s)", h->gguf_path, e, t->name, l, sl_kind_component[k]);
    }
    free(buf);
    smoe_release(h->s, &b);
    return r < 0 ? r : 0;
}

static int check_samples(smoe_llama *h)
{
    int fd = open(h->gguf_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl_fail(h, SMOE_ESYS, "%s: %s", h->gguf_path, strerror(errno));
    struct gguf_init_params gp = {true, NULL};
    struct gguf_context *g = gguf_init_from_file(h->gguf_path, gp);
    int r = g ? 0 : sl_fail(h, SMOE_EFORMAT, "%s: cannot read its GGUF header", h->gguf_path);
    uint32_t first = UINT32_MAX, last = 0;
    for (uint32_t l = 0; l < h->n_layers; l++)
        if (h->layers[l].present) {
            if (first == UINT32_MAX)
                first = l;
            last = l;
        }
    if (r == 0)
        r = sample_matches(h, fd, g, first, 0);
    if (r == 0)
        r = sample_matches(h, fd, g, last, h->n_expert - 1);
    /* Give the loader's expert pages back: mapped by llama.cpp's mmap, and
     * in the page cache. */
    if (r == 0 && !(h->flags & SMOE_LLAMA_KEEP_PAGES)) {
        long ps = sysconf(_SC_PAGESIZE);
        for (uint32_t i = 0; i < h->n_tensors; i++) {
            const sl_tensor *t = &h->tensors[i];
            uint64_t n = t->slice * t->n_expert;
            if (t->loaded) {
                uintptr_t a = ((uintptr_t)t->loaded + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
                uintptr_t z = ((uintptr_t)t->loaded + n) & ~((uintptr_t)ps - 1);
                if (z > a)
                    madvise((void *)a, z - a, MADV_DONTNEED);
            }
            int64_t id = gguf_find_tensor(g, t->name);
            if (id >= 0)
                posix_fadvise(fd, (off_t)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id)),
                              (off_t)n, POSIX_FADV_DONTNEED);
        }
    }
    if (g)
        gguf_free(g);
    close(fd);
    return r;
}

int smoe_llama_attach(smoe_llama *h, struct llama_model *model)
{
    (void)model;
    int r;
    if (!h->s)
        return 0; /* replay only */
    if (h->attached)
        return sl_fail(h, SMOE_EINVAL, "a model is already attached");
    if ((r = build_layers(h)) < 0 || (r = build_layouts(h)) < 0 || (r = map_staging(h)) < 0)
        return r;
    h->ulist = calloc(h->n_expert, sizeof *h->ulist);
    h->umark = calloc(h->n_expert, 1);
    h->staged = calloc(h->n_expert, sizeof *h->staged);
    h->held = calloc(h->n_expert, sizeof *h->held);
    h->is_held = calloc(h->n_expert, 1);
    if (!h->ulist || !h->umark || !h->staged || !h->held || !h->is_held)
        return sl_fail(h, SMOE_ENOMEM, "out of memory");
    if ((r = check_samples(h)) < 0)
        return r;
    if ((h->flags & SMOE_LLAMA_LOOKAHEAD) && (r = sl_look_attach(h)) < 0)
        return r;
    h->attached = 1;
    h->err[0] = 0;
    return 0;
}

void smoe_llama_context_params(smoe_llama *h, struct llama_context_params *cp)
{
    cp->cb_eval = sl_eval_cb;
    cp->cb_eval_user_data = h;
    if (cp->abort_callback != sl_abort_cb) {
        h->user_abort = cp->abort_callback;
        h->user_abort_data = cp->abort_callback_data;
    }
    cp->abort_callback = sl_abort_cb;
    cp->abort_callback_data = h;
}

const char *smoe_llama_error(const smoe_llama *h)
{
    return h->err[0] ? h->err : NULL;
}

int smoe_llama_get_stats(const smoe_llama *h, smoe_llama_stats *st)
{
    if (st->struct_size < sizeof(size_t) || st->struct_size > sizeof *st)
        return SMOE_EINVAL;
    size_t n = st->struct_size;
    smoe_llama_stats all = h->st;
    sl_look_stats(&h->look, &all);
    memcpy(st, &all, n);
    st->struct_size = n;
    return 0;
}

smoe_stream *smoe_llama_stream(smoe_llama *h)
{
    return h->s;
}

void smoe_llama_close(smoe_llama *h)
{
    if (!h)
        return;
    /* The model's buffers, and with them the mapped slices, are gone
     * (llama_model_free comes first): release the claims only. */
    for (uint32_t i = 0; h->is_held && i < h->n_staged; i++)
        if (h->is_held[h->staged[i]])
            smoe_release(h->s, &h->held[h->staged[i]]);
    if (h->s)
        smoe_close(h->s);
    sl_replay_free(h->replay);
    sl_look_free(&h->look);
    sl_buft_free(h);
    free(h->layers);
    free(h->comp_off);
    free(h->compat);
    free(h->ulist);
    free(h->umark);
    free(h->staged);
    free(h->held);
    free(h->is_held);
    free(h->gguf_path);
    free(h);
}
