/*
 * moe_decode.cu - decode steps of a small MoE model whose experts stream
 * from a vault through libsmoe_stream into an NVIDIA GPU.
 *
 * The model has Qwen3-30B-A3B's expert shapes (hidden 2048, expert FFN
 * 768, bf16 gate/up/down) with pseudo-random weights, 8 layers of 32
 * experts by default (a 2.4 GB vault, packed on the first run), top-8.
 * Attention and the dense weights are left out: each layer is
 * h += sum_k w_k * FFN_k(rmsnorm(h)).
 *
 * Per token and layer:
 *   1. the router runs on the GPU: RMSNorm, a linear layer of 32 logits,
 *      top-k and softmax; the k expert numbers come back to the host;
 *   2. the host prefetches the k experts (demand) and claims each as it
 *      arrives in the ring;
 *   3. each claimed blob is copied to the GPU with cudaMemcpyAsync on a copy
 *      stream, straight from the ring: the whole ring was registered once
 *      with cudaHostRegister, so every blob is already pinned memory. Two
 *      device buffers alternate, so the copy of one expert overlaps the FFN
 *      (gate, up, SwiGLU, down) of the previous one on the compute stream;
 *   4. a slot is released as soon as the event recorded after its copy has
 *      completed: from then on the GPU no longer reads it.
 *
 * The first tokens (--check) are checked layer by layer against a CPU
 * reference computed from weights regenerated from the seed, not read from
 * the vault. Then --tokens tokens are timed. It reports tokens/s, time
 * waiting in claim, host-to-device GB/s against plain pinned and pageable
 * copies of the same bytes in the same run, and GPU idle time.
 *
 * Run:   moe_decode VAULT [options]   (moe_decode --help)
 *
 * Introduces usage of: smoe_ring_region_get with cudaHostRegister,
 * smoe_claim (non-blocking) and smoe_claim_wait, smoe_layout_find,
 * release after a cudaEvent, smoe_writer_* (in ../common/moe_model.c).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda_runtime.h>

#include <smoe/smoe.h>

#include "moe_model.h"

/* ---- error checking: every call, every launch ---------------------------- */

static void cuda_check(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "moe_decode: line %d: %s: %s (%s)\n", line, what,
                cudaGetErrorString(e), cudaGetErrorName(e));
        exit(1);
    }
}
#define CK(call) cuda_check((call), #call, __LINE__)
#define LAUNCHED(name) cuda_check(cudaGetLastError(), "launch of " name, __LINE__)

static int smoe_check(int r, const char *what, int line)
{
    if (r < 0) {
        fprintf(stderr, "moe_decode: line %d: %s: %s (%s)\n", line, what, smoe_last_error(),
                smoe_err_name(r));
        exit(1);
    }
    return r;
}
#define SK(call) smoe_check((call), #call, __LINE__)

static void fail(const char *msg)
{
    fprintf(stderr, "moe_decode: %s\n", msg);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- kernels ------------------------------------------------------------- */

/* bf16 pairs packed in a 32-bit word, little-endian: element 2i is the low half. */
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/* Dot product of 8 bf16 weights (16 bytes) with 8 floats. */
__device__ __forceinline__ float dot8(uint4 w, float4 a, float4 b)
{
    float s = bf16_lo(w.x) * a.x;
    s = fmaf(bf16_hi(w.x), a.y, s);
    s = fmaf(bf16_lo(w.y), a.z, s);
    s = fmaf(bf16_hi(w.y), a.w, s);
    s = fmaf(bf16_lo(w.z), b.x, s);
    s = fmaf(bf16_hi(w.z), b.y, s);
    s = fmaf(bf16_lo(w.w), b.z, s);
    s = fmaf(bf16_hi(w.w), b.w, s);
    return s;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/*
 * Batch-1 GEMV over bf16 rows: one warp per row, 16-byte loads coalesced
 * across the warp, fp32 accumulation. W is rows x (cols8 * 8), row-major.
 * ACC: y[r] += scale[si] * (W[r] . x); else y[r] = W[r] . x.
 */
template <bool ACC>
__global__ void gemv_bf16(const uint4 *__restrict__ W, const float4 *__restrict__ x,
                          float *__restrict__ y, int rows, int cols8,
                          const float *__restrict__ scale, int si)
{
    int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (row >= rows)
        return; /* whole warps only: blockDim.x is a multiple of 32 */
    const uint4 *w = W + (size_t)row * cols8;
    float s = 0;
#pragma unroll 4
    for (int c = lane; c < cols8; c += 32)
        s += dot8(w[c], x[2 * c], x[2 * c + 1]);
    s = warp_sum(s);
    if (lane == 0) {
        if (ACC)
            y[row] += scale[si] * s;
        else
            y[row] = s;
    }
}

/* act[r] = silu(gate[r] . x) * (up[r] . x): one warp per row, both matrices at once. */
__global__ void ffn_gate_up(const uint4 *__restrict__ gate, const uint4 *__restrict__ up,
                            const float4 *__restrict__ x, float *__restrict__ act, int rows,
                            int cols8)
{
    int row = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (row >= rows)
        return;
    const uint4 *g = gate + (size_t)row * cols8, *u = up + (size_t)row * cols8;
    float sg = 0, su = 0;
#pragma unroll 4
    for (int c = lane; c < cols8; c += 32) {
        float4 a = x[2 * c], b = x[2 * c + 1];
        sg += dot8(g[c], a, b);
        su += dot8(u[c], a, b);
    }
    sg = warp_sum(sg);
    su = warp_sum(su);
    if (lane == 0)
        act[row] = sg / (1.0f + expf(-sg)) * su;
}

/* x = h / sqrt(mean(h^2) + 1e-6), one block. */
__global__ void rmsnorm(const float *__restrict__ h, float *__restrict__ x, int n)
{
    __shared__ float part[32];
    float ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        ss += h[i] * h[i];
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0)
            part[0] = v;
    }
    __syncthreads();
    float inv = rsqrtf(part[0] / (float)n + 1e-6f);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        x[i] = h[i] * inv;
}

/*
 * Top-k of the router's logits (ties to the lower index) and the softmax of
 * the chosen k, as Qwen3's router with normalised top-k weights. One thread:
 * 32 logits.
 */
__global__ void topk_softmax(const float *__restrict__ logits, int experts, int k,
                             int *__restrict__ idx, float *__restrict__ w)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    unsigned taken[MOE_MAX_EXPERTS / 32] = {0};
    float v[MOE_MAX_TOP_K];
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < experts; e++)
            if (!(taken[e / 32] >> (e % 32) & 1u) && (best < 0 || logits[e] > logits[best]))
                best = e;
        taken[best / 32] |= 1u << (best % 32);
        idx[j] = best;
        v[j] = logits[best];
    }
    float sum = 0;
    for (int j = 0; j < k; j++)
        sum += expf(v[j] - v[0]);
    for (int j = 0; j < k; j++)
        w[j] = expf(v[j] - v[0]) / sum;
}

/* ---- the decoder ------------------------------------------------------------ */

#define WARPS_PER_BLOCK 4
#define CLAIM_TIMEOUT_NS 60000000000ull /* a minute: a stuck read fails loudly */
#define CHECK_TOL 1e-3                  /* see check_layer() */

static int blocks_for(int rows) { return (rows + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK; }

struct timing {
    double claim_wait_s;   /* host time inside smoe_claim_wait */
    double kernel_ms;      /* router and FFN kernels, from events */
    double h2d_ms;         /* expert copies, from events */
    uint64_t h2d_bytes, copies;
};

struct decoder {
    smoe_stream *s;
    moe_model m;
    smoe_ring_region ring;
    moe_expert_view *views; /* per blob layout, filled on first use */
    unsigned char *view_ok;
    uint32_t layouts;
    uint64_t slot_bytes;

    cudaStream_t cs, xs;    /* compute, copy */
    float *d_h, *d_x, *d_logits, *d_act, *d_w;
    int *d_idx;
    uint16_t *d_router;     /* layers x experts x hidden */
    unsigned char *d_buf[2];/* expert buffers, alternating */
    int *h_idx;             /* pinned */
    float *h_h;             /* pinned: token input, and the check's copies */
    float *embed;           /* running token input (AR(1)) */
    uint16_t *router;       /* host copy, for the reference */

    cudaEvent_t r_start, r_end;
    cudaEvent_t cp_start[MOE_MAX_TOP_K], cp_end[MOE_MAX_TOP_K];
    cudaEvent_t ffn_start[MOE_MAX_TOP_K], ffn_end[MOE_MAX_TOP_K];
    uint32_t prev_n;        /* experts of the previous layer, events not yet read */

    struct timing t;
    float rho;
    int verbose;
};

static const moe_expert_view *view_of(struct decoder *d, const smoe_blob *b)
{
    if (b->layout >= d->layouts)
        fail("a claimed blob names a layout the vault does not have");
    if (!d->view_ok[b->layout]) {
        if (moe_view_get(d->s, b->layout, &d->views[b->layout]) != 0)
            exit(1);
        d->view_ok[b->layout] = 1;
    }
    const moe_expert_view *v = &d->views[b->layout];
    if (b->size < v->extent || v->extent > d->slot_bytes) {
        fprintf(stderr, "moe_decode: layer %u expert %u: blob of %llu bytes, its layout "
                "needs %llu\n", b->layer, b->expert, (unsigned long long)b->size,
                (unsigned long long)v->extent);
        exit(1);
    }
    return v;
}

static float elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

/* Add the previous layer's expert events, all complete by now, to the timings. */
static void account_experts(struct decoder *d)
{
    for (uint32_t i = 0; i < d->prev_n; i++) {
        d->t.kernel_ms += elapsed_ms(d->ffn_start[i], d->ffn_end[i]);
        d->t.h2d_ms += elapsed_ms(d->cp_start[i], d->cp_end[i]);
    }
    d->prev_n = 0;
}

struct held {
    smoe_blob b;
    int live;
};

/*
 * Release every held blob whose copy has completed; with wait, wait for
 * each. Copies complete in issue order (one copy stream), so stop at the
 * first one still running.
 */
static void release_copied(struct decoder *d, struct held *h, uint32_t n, int wait)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!h[i].live)
            continue;
        if (wait) {
            CK(cudaEventSynchronize(d->cp_end[i]));
        } else {
            cudaError_t q = cudaEventQuery(d->cp_end[i]);
            if (q == cudaErrorNotReady) {
                /* Not an error; make sure it is not left as the last error. */
                cudaError_t last = cudaGetLastError();
                if (last != cudaSuccess && last != cudaErrorNotReady)
                    CK(last);
                return;
            }
            CK(q);
        }
        SK(smoe_release(d->s, &h[i].b));
        h[i].live = 0;
    }
}

/*
 * One MoE layer for the token whose hidden state is in d_h. Fills sel[]
 * with the experts the router chose (rank order).
 */
static void run_layer(struct decoder *d, uint32_t layer, int *sel)
{
    const uint32_t E = d->m.experts, k = d->m.top_k;

    /* 1. Route on the GPU; the expert numbers come back to the host. */
    CK(cudaEventRecord(d->r_start, d->cs));
    rmsnorm<<<1, 1024, 0, d->cs>>>(d->d_h, d->d_x, MOE_HIDDEN);
    LAUNCHED("rmsnorm");
    gemv_bf16<false><<<blocks_for((int)E), WARPS_PER_BLOCK * 32, 0, d->cs>>>(
        (const uint4 *)(d->d_router + (size_t)layer * E * MOE_HIDDEN), (const float4 *)d->d_x,
        d->d_logits, (int)E, MOE_HIDDEN / 8, NULL, 0);
    LAUNCHED("router gemv");
    topk_softmax<<<1, 32, 0, d->cs>>>(d->d_logits, (int)E, (int)k, d->d_idx, d->d_w);
    LAUNCHED("topk_softmax");
    CK(cudaEventRecord(d->r_end, d->cs));
    CK(cudaMemcpyAsync(d->h_idx, d->d_idx, k * sizeof(int), cudaMemcpyDeviceToHost, d->cs));
    CK(cudaStreamSynchronize(d->cs));
    d->t.kernel_ms += elapsed_ms(d->r_start, d->r_end);
    account_experts(d); /* the previous layer's FFNs ran before this router */

    uint32_t seen[MOE_MAX_EXPERTS / 32] = {0};
    for (uint32_t j = 0; j < k; j++) {
        int e = d->h_idx[j];
        if (e < 0 || (uint32_t)e >= E || (seen[e / 32] >> (e % 32) & 1u)) {
            fprintf(stderr, "moe_decode: layer %u: the router returned expert %d at rank %u: "
                    "expected distinct experts 0..%u\n", layer, e, j, E - 1);
            exit(1);
        }
        seen[e / 32] |= 1u << (e % 32);
        sel[j] = e;
    }

    /* 2. Ask for all k at once: the workers read them in parallel. */
    for (uint32_t j = 0; j < k; j++)
        SK(smoe_prefetch(d->s, layer, (uint32_t)sel[j], SMOE_PREFETCH_DEMAND));

    /* 3. Claim each as it arrives, copy, compute; release once copied. */
    struct held h[MOE_MAX_TOP_K];
    memset(h, 0, sizeof h);
    uint32_t todo = k < 32 ? (1u << k) - 1 : 0xffffffffu; /* ranks not yet claimed */
    for (uint32_t n = 0; n < k; n++) {
        int rank = -1;
        for (uint32_t j = 0; j < k && rank < 0; j++) {
            if (!(todo >> j & 1u))
                continue;
            int r = smoe_claim(d->s, layer, (uint32_t)sel[j], &h[n].b);
            if (r >= 0)
                rank = (int)j;
            else if (r != SMOE_EAGAIN)
                SK(r);
        }
        if (rank < 0) { /* none has arrived: wait for the best-ranked one */
            for (rank = 0; !(todo >> rank & 1u); rank++)
                ;
            double t0 = now_s();
            SK(smoe_claim_wait(d->s, layer, (uint32_t)sel[rank], CLAIM_TIMEOUT_NS, &h[n].b));
            d->t.claim_wait_s += now_s() - t0;
        }
        todo &= ~(1u << rank);
        h[n].live = 1;
        const moe_expert_view *v = view_of(d, &h[n].b);

        unsigned char *buf = d->d_buf[n % 2];
        if (n >= 2) /* the FFN two experts back read this buffer */
            CK(cudaStreamWaitEvent(d->xs, d->ffn_end[n - 2], 0));
        CK(cudaEventRecord(d->cp_start[n], d->xs));
        CK(cudaMemcpyAsync(buf, h[n].b.data, v->extent, cudaMemcpyHostToDevice, d->xs));
        CK(cudaEventRecord(d->cp_end[n], d->xs));
        d->t.h2d_bytes += v->extent;
        d->t.copies++;

        CK(cudaStreamWaitEvent(d->cs, d->cp_end[n], 0));
        CK(cudaEventRecord(d->ffn_start[n], d->cs));
        ffn_gate_up<<<blocks_for(MOE_FFN), WARPS_PER_BLOCK * 32, 0, d->cs>>>(
            (const uint4 *)(buf + v->offset[MOE_GATE]), (const uint4 *)(buf + v->offset[MOE_UP]),
            (const float4 *)d->d_x, d->d_act, MOE_FFN, MOE_HIDDEN / 8);
        LAUNCHED("ffn_gate_up");
        gemv_bf16<true><<<blocks_for(MOE_HIDDEN), WARPS_PER_BLOCK * 32, 0, d->cs>>>(
            (const uint4 *)(buf + v->offset[MOE_DOWN]), (const float4 *)d->d_act, d->d_h,
            MOE_HIDDEN, MOE_FFN / 8, d->d_w, rank);
        LAUNCHED("ffn down gemv");
        CK(cudaEventRecord(d->ffn_end[n], d->cs));

        release_copied(d, h, n + 1, 0);
    }
    release_copied(d, h, k, 1);
    d->prev_n = k;
}

/* Start a token: the next input goes to d_h. */
static void begin_token(struct decoder *d, uint64_t token)
{
    moe_next_embedding(d->embed, d->m.seed, token, d->rho);
    memcpy(d->h_h, d->embed, MOE_HIDDEN * sizeof(float));
    CK(cudaMemcpyAsync(d->d_h, d->h_h, MOE_HIDDEN * sizeof(float), cudaMemcpyHostToDevice,
                       d->cs));
}

static double norm2(const double *v, uint32_t n)
{
    double s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

/*
 * One layer, checked: the GPU's routing and its layer output against a CPU
 * reference (double accumulation, weights regenerated from the seed) from
 * the same input. Both sides use the same bf16 weights, so the difference
 * is fp32 accumulation order only; CHECK_TOL (1e-3 relative, the usual bar
 * for bf16 operands) leaves a wide margin and still catches a wrong byte,
 * row or expert. The GPU's intermediates are poisoned with NaN first, so a
 * value the kernels failed to write cannot pass. Returns the relative error.
 */
static double check_layer(struct decoder *d, uint32_t layer, int *near_ties)
{
    const uint32_t E = d->m.experts, k = d->m.top_k;
    float *h_in = (float *)malloc(2 * MOE_HIDDEN * sizeof(float)), *h_out = h_in + MOE_HIDDEN;
    float *x = (float *)malloc(MOE_HIDDEN * sizeof(float));
    double *logits = (double *)malloc(E * sizeof(double));
    double *ref = (double *)calloc(MOE_HIDDEN, sizeof(double));
    double *diff = (double *)malloc(MOE_HIDDEN * sizeof(double));
    if (!h_in || !x || !logits || !ref || !diff)
        fail("out of memory for the check");

    CK(cudaMemsetAsync(d->d_x, 0xff, MOE_HIDDEN * sizeof(float), d->cs));
    CK(cudaMemsetAsync(d->d_act, 0xff, MOE_FFN * sizeof(float), d->cs));
    CK(cudaMemsetAsync(d->d_logits, 0xff, E * sizeof(float), d->cs));
    CK(cudaMemsetAsync(d->d_w, 0xff, k * sizeof(float), d->cs));
    CK(cudaMemsetAsync(d->d_idx, 0xff, k * sizeof(int), d->cs));
    CK(cudaMemcpyAsync(d->h_h, d->d_h, MOE_HIDDEN * sizeof(float), cudaMemcpyDeviceToHost,
                       d->cs));
    CK(cudaStreamSynchronize(d->cs));
    memcpy(h_in, d->h_h, MOE_HIDDEN * sizeof(float));

    int sel[MOE_MAX_TOP_K];
    run_layer(d, layer, sel);
    CK(cudaMemcpyAsync(d->h_h, d->d_h, MOE_HIDDEN * sizeof(float), cudaMemcpyDeviceToHost,
                       d->cs));
    CK(cudaStreamSynchronize(d->cs));
    memcpy(h_out, d->h_h, MOE_HIDDEN * sizeof(float));

    /* The routing: each chosen expert must be in the CPU's top k, up to a
     * near-tie at the k-th logit (then either choice is right). */
    moe_ref_rmsnorm(h_in, x);
    moe_ref_logits(d->router + (size_t)layer * E * MOE_HIDDEN, x, E, logits);
    double kth = INFINITY, maxabs = 0;
    unsigned char *taken = (unsigned char *)calloc(E, 1);
    if (!taken)
        fail("out of memory for the check");
    for (uint32_t j = 0; j < k; j++) {
        int best = -1;
        for (uint32_t e = 0; e < E; e++)
            if (!taken[e] && (best < 0 || logits[e] > logits[best]))
                best = (int)e;
        taken[best] = 1;
        kth = logits[best];
    }
    for (uint32_t e = 0; e < E; e++)
        maxabs = fmax(maxabs, fabs(logits[e]));
    double tie = 1e-4 * maxabs + 1e-6;
    for (uint32_t j = 0; j < k; j++) {
        if (!taken[sel[j]]) {
            if (!(logits[sel[j]] >= kth - tie)) {
                fprintf(stderr, "moe_decode: check failed: layer %u: the GPU routed to expert "
                        "%d (logit %.6f), outside the CPU's top %u (k-th logit %.6f)\n",
                        layer, sel[j], logits[sel[j]], k, kth);
                exit(1);
            }
            (*near_ties)++;
        }
    }
    free(taken);

    /* The layer's output: the weighted sum of the chosen experts' FFNs. */
    double wsum = 0, wv[MOE_MAX_TOP_K];
    for (uint32_t j = 0; j < k; j++)
        wsum += wv[j] = exp(logits[sel[j]] - logits[sel[0]]);
    for (uint32_t j = 0; j < k; j++)
        if (moe_ref_expert(&d->m, layer, (uint32_t)sel[j], x, wv[j] / wsum, ref) != 0)
            exit(1);
    for (uint32_t i = 0; i < MOE_HIDDEN; i++)
        diff[i] = ((double)h_out[i] - h_in[i]) - ref[i];
    double err = norm2(diff, MOE_HIDDEN) / norm2(ref, MOE_HIDDEN);
    free(h_in);
    free(x);
    free(logits);
    free(ref);
    free(diff);
    if (!(err <= CHECK_TOL)) { /* NaN fails too */
        fprintf(stderr, "moe_decode: check failed: layer %u: relative error %.3g of the "
                "layer output against the CPU reference, over %.0e\n", layer, err, CHECK_TOL);
        exit(1);
    }
    return err;
}

/* ---- copy bandwidth, same bytes, three sources ---------------------------------- */

static double copy_gbps(struct decoder *d, const void *src, uint64_t bytes, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++) /* warm up */
        CK(cudaMemcpyAsync(d->d_buf[i % 2], src, bytes, cudaMemcpyHostToDevice, d->xs));
    CK(cudaEventRecord(a, d->xs));
    for (int i = 0; i < reps; i++)
        CK(cudaMemcpyAsync(d->d_buf[i % 2], src, bytes, cudaMemcpyHostToDevice, d->xs));
    CK(cudaEventRecord(b, d->xs));
    CK(cudaEventSynchronize(b));
    double ms = elapsed_ms(a, b);
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return (double)bytes * reps / (ms * 1e-3) / 1e9;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: moe_decode VAULT [options]\n"
            "\n"
            "Decode tokens of a synthetic MoE model whose experts stream from VAULT into\n"
            "the GPU. If VAULT does not exist it is packed first (--layers x --experts\n"
            "experts of 9 MiB each).\n"
            "\n"
            "  --layers N     layers when packing (default 8)\n"
            "  --experts N    experts per layer when packing (default 32)\n"
            "  --top-k N      experts per token and layer when packing (default 8)\n"
            "  --seed N       weights' seed when packing (default 1)\n"
            "  --tokens N     tokens timed (default 128)\n"
            "  --check N      tokens checked against the CPU first, not timed (default 2)\n"
            "  --slots N      ring slots (default: the library's, 64)\n"
            "  --workers N    I/O worker threads (default: the library's, 16)\n"
            "  --rho X        correlation of adjacent tokens' inputs, 0..0.99 (default 0.5)\n"
            "  --device N     CUDA device (default 0)\n");
}

static uint64_t parse_num(const char *opt, const char *val, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (!*val || *end || errno || *val == '-' || v < lo || v > hi) {
        fprintf(stderr, "moe_decode: %s: \"%s\" is not a number in %llu..%llu\n", opt, val,
                (unsigned long long)lo, (unsigned long long)hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        usage(stderr);
        return 2;
    }
    const char *vault = argv[1];
    moe_model pm = {8, 32, 8, 1};
    uint64_t tokens = 128, check = 2, slots = 0, workers = 0, device = 0;
    double rho = 0.5;
    for (int i = 2; i < argc; i += 2) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "moe_decode: %s needs a value (see --help)\n", o);
            return 2;
        }
        if (!strcmp(o, "--layers")) pm.layers = (uint32_t)parse_num(o, v, 1, 65536);
        else if (!strcmp(o, "--experts")) pm.experts = (uint32_t)parse_num(o, v, 1, MOE_MAX_EXPERTS);
        else if (!strcmp(o, "--top-k")) pm.top_k = (uint32_t)parse_num(o, v, 1, MOE_MAX_TOP_K);
        else if (!strcmp(o, "--seed")) pm.seed = parse_num(o, v, 0, UINT64_MAX);
        else if (!strcmp(o, "--tokens")) tokens = parse_num(o, v, 1, 1000000);
        else if (!strcmp(o, "--check")) check = parse_num(o, v, 0, 1000);
        else if (!strcmp(o, "--slots")) slots = parse_num(o, v, 1, 1u << 20);
        else if (!strcmp(o, "--workers")) workers = parse_num(o, v, 1, 1024);
        else if (!strcmp(o, "--device")) device = parse_num(o, v, 0, 1024);
        else if (!strcmp(o, "--rho")) {
            char *end;
            rho = strtod(v, &end);
            if (!*v || *end || !(rho >= 0 && rho <= 0.99)) {
                fprintf(stderr, "moe_decode: --rho: \"%s\" is not a number in 0..0.99\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "moe_decode: unknown option %s (see --help)\n", o);
            return 2;
        }
    }
    if (smoe_version_number() / 10000 != SMOE_VERSION_MAJOR) {
        fprintf(stderr, "moe_decode: built for libsmoe_stream %s, running %s\n",
                SMOE_VERSION_STRING, smoe_version_string());
        return 1;
    }

    /* The GPU first: no point packing a vault for a machine without one. */
    CK(cudaSetDevice((int)device));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, (int)device));
    int can_register = 0;
    CK(cudaDeviceGetAttribute(&can_register, cudaDevAttrHostRegisterSupported, (int)device));
    if (!can_register)
        fail("this device does not support cudaHostRegister");
    printf("moe_decode: GPU %d: %s (compute capability %d.%d, %d SMs)\n", (int)device,
           prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    struct stat stt;
    if (stat(vault, &stt) != 0) {
        if (errno != ENOENT) {
            fprintf(stderr, "moe_decode: %s: %s\n", vault, strerror(errno));
            return 1;
        }
        double t0 = now_s();
        if (moe_pack(vault, &pm) != 0)
            return 1;
        printf("moe_decode: packed %s in %.1f s\n", vault, now_s() - t0);
    }

    struct decoder dd;
    memset(&dd, 0, sizeof dd);
    struct decoder *d = &dd;
    d->rho = (float)rho;
    smoe_open_opts o;
    smoe_open_opts_init(&o);
    o.ring_slots = (uint32_t)slots;
    o.workers = (uint32_t)workers;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    SK(smoe_open(vault, &o, &d->s));
    if (moe_model_get(d->s, &d->m) != 0)
        return 1;
    /* In C++ the header's *_INIT macros leave fields to -Wextra's
     * missing-field-initializers warning; value-initialise instead. */
    smoe_vault_info vi = {};
    vi.struct_size = sizeof vi;
    SK(smoe_vault_info_get(d->s, &vi));
    d->layouts = vi.layouts;
    d->views = (moe_expert_view *)calloc(vi.layouts, sizeof *d->views);
    d->view_ok = (unsigned char *)calloc(vi.layouts, 1);
    if (!d->views || !d->view_ok)
        fail("out of memory");

    /* Register the whole ring once: every claimed blob is pinned memory. */
    d->ring.struct_size = sizeof d->ring;
    SK(smoe_ring_region_get(d->s, &d->ring));
    d->slot_bytes = d->ring.slot_stride;
    double t0 = now_s();
    CK(cudaHostRegister(d->ring.base, d->ring.length, cudaHostRegisterDefault));
    printf("moe_decode: registered the ring, %u slots of %.1f MiB (%.2f GB), in %.2f s\n",
           d->ring.slots, (double)d->ring.slot_stride / 1048576.0,
           (double)d->ring.length / 1e9, now_s() - t0);

    const uint32_t E = d->m.experts, k = d->m.top_k;
    size_t router_elems = (size_t)d->m.layers * E * MOE_HIDDEN;
    CK(cudaStreamCreateWithFlags(&d->cs, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&d->xs, cudaStreamNonBlocking));
    CK(cudaMalloc(&d->d_h, MOE_HIDDEN * sizeof(float)));
    CK(cudaMalloc(&d->d_x, MOE_HIDDEN * sizeof(float)));
    CK(cudaMalloc(&d->d_act, MOE_FFN * sizeof(float)));
    CK(cudaMalloc(&d->d_logits, E * sizeof(float)));
    CK(cudaMalloc(&d->d_w, MOE_MAX_TOP_K * sizeof(float)));
    CK(cudaMalloc(&d->d_idx, MOE_MAX_TOP_K * sizeof(int)));
    CK(cudaMalloc(&d->d_router, router_elems * sizeof(uint16_t)));
    for (int i = 0; i < 2; i++)
        CK(cudaMalloc(&d->d_buf[i], d->slot_bytes));
    CK(cudaMallocHost(&d->h_idx, MOE_MAX_TOP_K * sizeof(int)));
    CK(cudaMallocHost(&d->h_h, MOE_HIDDEN * sizeof(float)));
    d->embed = (float *)calloc(MOE_HIDDEN, sizeof(float));
    d->router = (uint16_t *)malloc(router_elems * sizeof(uint16_t));
    if (!d->embed || !d->router)
        fail("out of memory");
    for (uint32_t l = 0; l < d->m.layers; l++)
        moe_fill_router(d->router + (size_t)l * E * MOE_HIDDEN, &d->m, l);
    CK(cudaMemcpy(d->d_router, d->router, router_elems * sizeof(uint16_t),
                  cudaMemcpyHostToDevice));
    CK(cudaEventCreate(&d->r_start));
    CK(cudaEventCreate(&d->r_end));
    for (uint32_t i = 0; i < MOE_MAX_TOP_K; i++) {
        CK(cudaEventCreate(&d->cp_start[i]));
        CK(cudaEventCreate(&d->cp_end[i]));
        CK(cudaEventCreate(&d->ffn_start[i]));
        CK(cudaEventCreate(&d->ffn_end[i]));
    }
    printf("moe_decode: %s: %u layers x %u experts, top-%u, %.1f MiB per expert\n", vault,
           d->m.layers, E, k, (double)d->slot_bytes / 1048576.0);

    /* One request: the engine is busy, the library's pre-warm stays off. */
    SK(smoe_set_busy(d->s, 1));

    /* Checked tokens: also the warm-up (module load, first reads). */
    uint64_t token = 0;
    double worst = 0;
    int near_ties = 0, sel[MOE_MAX_TOP_K];
    for (; token < check; token++) {
        begin_token(d, token);
        for (uint32_t l = 0; l < d->m.layers; l++)
            worst = fmax(worst, check_layer(d, l, &near_ties));
    }
    CK(cudaStreamSynchronize(d->cs));
    account_experts(d);
    if (check)
        printf("moe_decode: checked %llu tokens x %u layers against the CPU: max relative "
               "error %.2e (tolerance %.0e), %d near-tie routing choices\n",
               (unsigned long long)check, d->m.layers, worst, CHECK_TOL, near_ties);

    /* Timed tokens. */
    smoe_stats st0 = {}, st1 = {};
    st0.struct_size = st1.struct_size = sizeof st0;
    SK(smoe_get_stats(d->s, &st0));
    memset(&d->t, 0, sizeof d->t);
    CK(cudaDeviceSynchronize());
    t0 = now_s();
    for (uint64_t end = token + tokens; token < end; token++) {
        begin_token(d, token);
        for (uint32_t l = 0; l < d->m.layers; l++)
            run_layer(d, l, sel);
    }
    CK(cudaStreamSynchronize(d->cs));
    double wall = now_s() - t0;
    account_experts(d);
    SK(smoe_set_busy(d->s, 0));
    SK(smoe_get_stats(d->s, &st1));

    /* Copies of one expert's bytes: from a ring slot, from cudaMallocHost
     * memory, from plain malloc memory. */
    smoe_blob b;
    SK(smoe_claim_wait(d->s, 0, (uint32_t)sel[0], CLAIM_TIMEOUT_NS, &b));
    uint64_t bytes = view_of(d, &b)->extent;
    void *pinned, *pageable = malloc(bytes);
    CK(cudaMallocHost(&pinned, bytes));
    if (!pageable)
        fail("out of memory");
    memcpy(pinned, b.data, bytes);
    memcpy(pageable, b.data, bytes);
    const int reps = 64;
    double gb_ring = copy_gbps(d, b.data, bytes, reps);
    double gb_pinned = copy_gbps(d, pinned, bytes, reps);
    double gb_pageable = copy_gbps(d, pageable, bytes, reps);
    SK(smoe_release(d->s, &b));

    uint64_t hits = st1.hits - st0.hits, joins = st1.joins - st0.joins;
    uint64_t misses = st1.misses - st0.misses, demand = hits + joins + misses;
    double ms_tok = wall * 1e3 / (double)tokens;
    double h2d_gbps = (double)d->t.h2d_bytes / (d->t.h2d_ms * 1e-3) / 1e9;
    printf("\n%llu tokens x %u layers x top-%u in %.2f s: %.1f tokens/s (%.1f ms per token)\n",
           (unsigned long long)tokens, d->m.layers, k, wall, (double)tokens / wall, ms_tok);
    printf("  ring         %u slots (%.2f GB of a %.2f GB vault), %s I/O, %llu workers\n",
           d->ring.slots, (double)d->ring.length / 1e9, (double)vi.total_padded / 1e9,
           st1.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered",
           (unsigned long long)st1.workers);
    printf("  hit rate     %.3f (%llu hits, %llu joins, %llu misses), %.2f GB read from disk "
           "at %.2f GB/s of wall time\n",
           demand ? (double)hits / (double)demand : 0.0, (unsigned long long)hits,
           (unsigned long long)joins, (unsigned long long)misses,
           (double)(st1.bytes_read - st0.bytes_read) / 1e9,
           (double)(st1.bytes_read - st0.bytes_read) / wall / 1e9);
    printf("  claim wait   %.3f s in smoe_claim_wait (%.2f ms per token, %.0f%% of wall "
           "time); library: %llu waits, %.3f s\n",
           d->t.claim_wait_s, d->t.claim_wait_s * 1e3 / (double)tokens,
           100.0 * d->t.claim_wait_s / wall,
           (unsigned long long)(st1.claim_waits - st0.claim_waits),
           (double)(st1.claim_wait_ns - st0.claim_wait_ns) / 1e9);
    printf("  H2D          %llu copies, %.2f GB: %.1f GB/s while copying (copy engine busy "
           "%.0f%% of wall time)\n",
           (unsigned long long)d->t.copies, (double)d->t.h2d_bytes / 1e9, h2d_gbps,
           100.0 * d->t.h2d_ms * 1e-3 / wall);
    printf("  H2D same run %d copies of %.1f MiB back to back: ring slot %.1f GB/s, "
           "cudaMallocHost %.1f GB/s, malloc (pageable) %.1f GB/s\n",
           reps, (double)bytes / 1048576.0, gb_ring, gb_pinned, gb_pageable);
    printf("  GPU          kernels busy %.1f ms of %.1f ms: idle %.1f%% (%.3f ms of kernels "
           "per token)\n",
           d->t.kernel_ms, wall * 1e3, 100.0 * (1.0 - d->t.kernel_ms * 1e-3 / wall),
           d->t.kernel_ms / (double)tokens);
    printf("  floor        %.1f MiB of experts per token over %.1f GB/s pinned = %.2f ms "
           "per token if every expert crossed the bus\n",
           (double)k * d->m.layers * (double)bytes / 1048576.0, gb_pinned,
           (double)k * d->m.layers * (double)bytes / (gb_pinned * 1e9) * 1e3);

    CK(cudaFreeHost(pinned));
    free(pageable);
    CK(cudaStreamSynchronize(d->xs));
    CK(cudaHostUnregister(d->ring.base)); /* before smoe_close unmaps the ring */
    SK(smoe_close(d->s));
    for (int i = 0; i < 2; i++)
        CK(cudaFree(d->d_buf[i]));
    CK(cudaFree(d->d_h));
    CK(cudaFree(d->d_x));
    CK(cudaFree(d->d_act));
    CK(cudaFree(d->d_logits));
    CK(cudaFree(d->d_w));
    CK(cudaFree(d->d_idx));
    CK(cudaFree(d->d_router));
    CK(cudaFreeHost(d->h_idx));
    CK(cudaFreeHost(d->h_h));
    CK(cudaStreamDestroy(d->cs));
    CK(cudaStreamDestroy(d->xs));
    free(d->embed);
    free(d->router);
    free(d->views);
    free(d->view_ok);
    return 0;
}
