/*
 * plugin_buft.c - the buffer type "SMOE".
 *
 * One buffer type serves two kinds of buffer, as a backend's default
 * buffer type must:
 *  - weights (the expert tensors -ot places here): reserved address space
 *    made inaccessible (PROT_NONE; Windows: never committed), so they cost
 *    no memory and any read of them by a node this backend does not
 *    compute faults at once. The loader's bytes are dropped, after a sample
 *    of them is compared with the vault (plugin_vault.c);
 *  - compute buffers (the outputs of the nodes this backend computes):
 *    ordinary memory, reserved the same way and paid for as it is written
 *    (Windows: committed as each tensor is placed).
 * The memory calls are plugin_mem_posix.c's or plugin_mem_win32.c's.
 * ggml's graph allocator marks its buffers GGML_BACKEND_BUFFER_USAGE_COMPUTE
 * before it places tensors in them; the model loader places weights in a
 * buffer it has not marked yet.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#define SP_ALIGN 4096u /* a weight starts on a page: its range can be PROT_NONE */

typedef struct sp_buffer {
    void *base;
    size_t len;
    int weights; /* holds expert tensors */
} sp_buffer;

const sp_weight *sp_weight_of(const struct ggml_tensor *t)
{
    if (!t)
        return NULL;
    if (t->view_src)
        t = t->view_src;
    if (!t->buffer || t->buffer->buft != sp_buft() || !t->buffer->size)
        return NULL;
    for (uint32_t i = 0; i < sp_g.n_w; i++)
        if (sp_g.w[i].t == t)
            return &sp_g.w[i];
    return NULL;
}

static sp_weight *weight_mut(const struct ggml_tensor *t)
{
    for (uint32_t i = 0; i < sp_g.n_w; i++)
        if (sp_g.w[i].t == t)
            return &sp_g.w[i];
    return NULL;
}

static void buf_free(ggml_backend_buffer_t b)
{
    sp_buffer *sb = b->context;
    /* A model is freed: forget its expert tensors (another may follow). */
    pthread_mutex_lock(&sp_g.lock);
    uint32_t n = 0;
    for (uint32_t i = 0; i < sp_g.n_w; i++)
        if (sp_g.w[i].buf != b)
            sp_g.w[n++] = sp_g.w[i];
    sp_g.n_w = n;
    pthread_mutex_unlock(&sp_g.lock);
    sp_mem_release(sb->base, sb->len);
    free(sb);
}

static void *buf_base(ggml_backend_buffer_t b)
{
    return ((sp_buffer *)b->context)->base;
}

/* t's bytes made readable and writable (use) or inaccessible. */
static enum ggml_status tensor_memory(const struct ggml_tensor *t, int use)
{
    uintptr_t ps = (uintptr_t)sp_mem_page();
    uintptr_t a = (uintptr_t)t->data & ~(ps - 1);
    uintptr_t z = ((uintptr_t)t->data + ggml_nbytes(t) + ps - 1) & ~(ps - 1);
    char err[300];
    if ((use ? sp_mem_use : sp_mem_none)((void *)a, z - a, err, sizeof err) == 0)
        return GGML_STATUS_SUCCESS;
    sp_log_error("cannot %s tensor %s: %s", use ? "commit the memory of" : "protect", t->name,
                 err);
    return GGML_STATUS_FAILED;
}

static enum ggml_status add_weight(ggml_backend_buffer_t b, struct ggml_tensor *t)
{
    uint32_t layer;
    int kind;
    if (sl_parse_name(t->name, &layer, &kind) < 0) {
        /* Not an expert: llama.cpp lists an ACCEL device's buffer type
         * first for weights that no op reads (GGML_OP_NONE in its tensor
         * table), and -ot may name more than experts. Kept as ordinary
         * memory; the nodes reading it get a copy. */
        fprintf(stderr, "smoe: tensor %s in the SMOE buffer type is not an expert tensor: "
                "kept in memory\n", t->name);
        return tensor_memory(t, 1);
    }
    pthread_mutex_lock(&sp_g.lock);
    if (sp_g.n_w == sp_g.cap_w) {
        uint32_t cap = sp_g.cap_w ? 2 * sp_g.cap_w : 64;
        sp_weight *nw = realloc(sp_g.w, sizeof *nw * cap);
        if (!nw) {
            pthread_mutex_unlock(&sp_g.lock);
            return GGML_STATUS_ALLOC_FAILED;
        }
        sp_g.w = nw;
        sp_g.cap_w = cap;
    }
    sp_weight *w = &sp_g.w[sp_g.n_w++];
    memset(w, 0, sizeof *w);
    w->t = t;
    w->buf = b;
    w->layer = layer;
    w->kind = kind;
    /* The expert dimension is the outermost: ne[2] of a weight, ne[1] of a bias. */
    int d = ggml_n_dims(t) - 1;
    w->n_expert = d > 0 ? (uint32_t)t->ne[d] : 1;
    w->slice = d > 0 ? (uint64_t)t->nb[d] : ggml_nbytes(t);
    pthread_mutex_unlock(&sp_g.lock);

    ((sp_buffer *)b->context)->weights = 1;
    return tensor_memory(t, 0);
}

static enum ggml_status buf_init_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t)
{
    if (t->view_src)
        return GGML_STATUS_SUCCESS;
    if (b->usage == GGML_BACKEND_BUFFER_USAGE_COMPUTE)
        return tensor_memory(t, 1);
    return add_weight(b, t);
}

/* Is t an expert tensor (its bytes come from the vault)? */
static int is_expert(ggml_backend_buffer_t b, const struct ggml_tensor *t)
{
    return ((sp_buffer *)b->context)->weights && weight_mut(t->view_src ? t->view_src : t);
}

static void buf_memset_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t, uint8_t v,
                              size_t off, size_t size)
{
    if (!is_expert(b, t))
        memset((char *)t->data + off, v, size);
}

static void buf_set_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t, const void *data,
                           size_t off, size_t size)
{
    if (!is_expert(b, t)) {
        memcpy((char *)t->data + off, data, size);
        return;
    }
    /* An expert tensor: the bytes come from the vault. Check them against
     * it as they pass by. */
    sp_weight *w = weight_mut(t->view_src ? t->view_src : t);
    if (sp_open() < 0)
        return;
    sp_check(w, data, off, size);
}

static void buf_get_tensor(ggml_backend_buffer_t b, const struct ggml_tensor *t, void *data,
                           size_t off, size_t size)
{
    (void)b;
    memcpy(data, (const char *)t->data + off, size); /* faults on an expert tensor */
}

static bool buf_cpy_tensor(ggml_backend_buffer_t b, const struct ggml_tensor *src,
                           struct ggml_tensor *dst)
{
    (void)b, (void)src, (void)dst;
    return false;
}

static void buf_clear(ggml_backend_buffer_t b, uint8_t v)
{
    sp_buffer *sb = b->context;
    char err[300];
    if (sb->weights) /* a weights buffer: tensors are set one by one */
        return;
    if (sp_mem_use(sb->base, sb->len, err, sizeof err) == 0)
        memset(sb->base, v, b->size);
    else
        sp_log_error("cannot commit a buffer of %zu bytes: %s", sb->len, err);
}

static const struct ggml_backend_buffer_i buf_iface = {
    .free_buffer = buf_free,
    .get_base = buf_base,
    .init_tensor = buf_init_tensor,
    .memset_tensor = buf_memset_tensor,
    .set_tensor = buf_set_tensor,
    .get_tensor = buf_get_tensor,
    .cpy_tensor = buf_cpy_tensor,
    .clear = buf_clear,
};

static const char *buft_name(ggml_backend_buffer_type_t bt)
{
    (void)bt;
    return "SMOE";
}

static ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t bt, size_t size)
{
    if (sp_g.failed) {
        sp_log_error("%s", sp_g.err);
        return NULL;
    }
    sp_buffer *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->len = (size + SP_ALIGN - 1) / SP_ALIGN * SP_ALIGN;
    char err[300];
    sb->base = sp_mem_reserve(sb->len, err, sizeof err);
    if (!sb->base) {
        sp_log_error("cannot reserve %zu bytes of address space: %s", sb->len, err);
        free(sb);
        return NULL;
    }
    return ggml_backend_buffer_init(bt, buf_iface, sb, size);
}

static size_t buft_alignment(ggml_backend_buffer_type_t bt)
{
    (void)bt;
    return SP_ALIGN;
}

static bool buft_is_host(ggml_backend_buffer_type_t bt)
{
    (void)bt;
    return false;
}

static struct ggml_backend_buffer_type sp_buft_obj = {
    .iface = {
        .get_name = buft_name,
        .alloc_buffer = buft_alloc,
        .get_alignment = buft_alignment,
        .is_host = buft_is_host,
    },
    .device = NULL, /* set by plugin_reg.c */
    .context = NULL,
};

ggml_backend_buffer_type_t sp_buft(void)
{
    return &sp_buft_obj;
}
