/*
 * buft.c - the host buffer type the expert tensors are placed in.
 *
 * A buffer is reserved address space (MAP_NORESERVE, no memory until a
 * page is written), with every tensor start aligned to 2 MiB. set_tensor
 * drops the loader's bytes: the experts live in the vault, and stage.c
 * copies in the ones the router picks. init_tensor records each tensor, so
 * that attach can find every expert tensor of every layer.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Tensor starts: 2 MiB, so that staging can use transparent huge pages
 * (address space only: the buffer is reserved, not allocated). */
#define SL_ALIGN (2u << 20)
/* Readable bytes past the end: backends may read a little past the last
 * row they use (up to 512 bytes under GPU op offload). */
#define SL_TAIL 65536u

typedef struct sl_buffer {
    smoe_llama *h;
    void *base;
    size_t len;
} sl_buffer;

static void buf_free(ggml_backend_buffer_t b)
{
    sl_buffer *sb = b->context;
    munmap(sb->base, sb->len);
    free(sb);
}

static void *buf_base(ggml_backend_buffer_t b)
{
    return ((sl_buffer *)b->context)->base;
}

static enum ggml_status buf_init_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t)
{
    sl_buffer *sb = b->context;
    smoe_llama *h = sb->h;
    if (t->view_src)
        return GGML_STATUS_SUCCESS;
    if (h->n_tensors == h->cap_tensors) {
        uint32_t cap = h->cap_tensors ? 2 * h->cap_tensors : 64;
        sl_tensor *nt = realloc(h->tensors, sizeof *nt * cap);
        if (!nt)
            return GGML_STATUS_ALLOC_FAILED;
        h->tensors = nt;
        h->cap_tensors = cap;
    }
    sl_tensor *x = &h->tensors[h->n_tensors++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", t->name);
    x->base = t->data;
    x->tensor = t;
    x->type = t->type;
    memcpy(x->ne, t->ne, sizeof x->ne);
    /* The expert dimension is the outermost one: ne[2] of a weight, ne[1]
     * of a bias. */
    int d = ggml_n_dims(t) - 1;
    x->n_expert = d > 0 ? (uint32_t)t->ne[d] : 1;
    x->slice = d > 0 ? (uint64_t)t->nb[d] : ggml_nbytes(t);
    x->kind = -1;
    return GGML_STATUS_SUCCESS;
}

static void buf_memset_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t, uint8_t v,
                              size_t off, size_t size)
{
    (void)b, (void)t, (void)v, (void)off, (void)size; /* the bytes come from the vault */
}

static void buf_set_tensor(ggml_backend_buffer_t b, struct ggml_tensor *t, const void *data,
                           size_t off, size_t size)
{
    /* Dropped: the bytes come from the vault. Remember where the mmap
     * loader had them, so attach can give those pages back. */
    sl_buffer *sb = b->context;
    if (off != 0 || size != ggml_nbytes(t))
        return;
    for (uint32_t i = sb->h->n_tensors; i-- > 0;)
        if (sb->h->tensors[i].base == t->data) {
            sb->h->tensors[i].loaded = data;
            break;
        }
}

static void buf_get_tensor(ggml_backend_buffer_t b, const struct ggml_tensor *t, void *data,
                           size_t off, size_t size)
{
    (void)b;
    memcpy(data, (const char *)t->data + off, size);
}

static bool buf_cpy_tensor(ggml_backend_buffer_t b, const struct ggml_tensor *src,
                           struct ggml_tensor *dst)
{
    (void)b, (void)src, (void)dst;
    return false;
}

static void buf_clear(ggml_backend_buffer_t b, uint8_t v)
{
    (void)b, (void)v;
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
    return "smoe_stream";
}

static ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t bt, size_t size)
{
    smoe_llama *h = bt->context;
    sl_buffer *sb = calloc(1, sizeof *sb);
    if (!sb)
        return NULL;
    sb->h = h;
    /* Reserve SL_ALIGN more and start at an aligned address. */
    sb->len = (size + SL_TAIL + SL_ALIGN - 1) / SL_ALIGN * SL_ALIGN + SL_ALIGN;
    sb->base = mmap(NULL, sb->len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sb->base != MAP_FAILED) {
        uintptr_t a = ((uintptr_t)sb->base + SL_ALIGN - 1) & ~(uintptr_t)(SL_ALIGN - 1);
        size_t head = (size_t)(a - (uintptr_t)sb->base);
        if (head)
            munmap(sb->base, head);
        munmap((void *)(a + sb->len - SL_ALIGN), SL_ALIGN - head);
        sb->base = (void *)a;
        sb->len -= SL_ALIGN;
    }
    if (sb->base == MAP_FAILED) {
        sl_fail(h, SMOE_ENOMEM, "cannot reserve %zu bytes of address space for expert "
                "tensors: %s", sb->len, strerror(errno));
        free(sb);
        return NULL;
    }
    return ggml_backend_buffer_init(bt, buf_iface, sb, size);
}

static size_t buft_alignment(ggml_backend_buffer_type_t bt)
{
    (void)bt;
    return SL_ALIGN;
}

static bool buft_is_host(ggml_backend_buffer_type_t bt)
{
    (void)bt;
    return true;
}

void sl_buft_init(smoe_llama *h)
{
    h->buft.iface.get_name = buft_name;
    h->buft.iface.alloc_buffer = buft_alloc;
    h->buft.iface.get_alignment = buft_alignment;
    h->buft.iface.is_host = buft_is_host;
    h->buft.device = NULL;
    h->buft.context = h;
    h->ov[0].pattern = "^blk\\.[0-9]+\\.ffn_(gate|up|down|gate_up)_exps\\.(weight|bias)$";
    h->ov[0].buft = &h->buft;
    h->ov[1].pattern = NULL;
    h->ov[1].buft = NULL;
}

void sl_buft_free(smoe_llama *h)
{
    free(h->tensors);
    h->tensors = NULL;
    h->n_tensors = h->cap_tensors = 0;
}
