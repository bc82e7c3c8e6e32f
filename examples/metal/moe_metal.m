/*
 * moe_metal.m - experts streamed by libsmoe_stream, read by a Metal kernel
 * straight from the ring (Apple platforms).
 *
 * The whole ring becomes one MTLBuffer with newBufferWithBytesNoCopy: the
 * ring's base and length are 16 KiB-aligned (the page size of Apple
 * silicon), so no byte is copied. Per token and layer the host routes on
 * the CPU, prefetches and claims the chosen experts, and encodes one
 * dispatch per expert of a small kernel (the expert's gate projection,
 * gate . x) whose weights are read through an offset into that buffer:
 * blob.ring_offset plus the component's offset. The blobs are released in
 * the command buffer's completion handler, once the GPU has read them.
 * The first token's results are checked against the CPU.
 *
 * The model, its vault and the CPU reference are the CUDA example's
 * (../common/moe_model.c). Build: CMake on macOS (examples/CMakeLists.txt).
 * Run:   moe_metal VAULT [--tokens N]   (packs a 2 x 8-expert vault if VAULT
 *        does not exist)
 *
 * Introduces usage of: smoe_ring_region_get with
 * newBufferWithBytesNoCopy, smoe_blob.ring_offset, smoe_layout_find,
 * smoe_release from a completion handler.
 *
 * SPDX-License-Identifier: MIT
 */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <smoe/smoe.h>

#include "moe_model.h"

/* y[row] = w[row] . x: bf16 weights (the high half of a float), fp32 x. */
static NSString *const kernel_source =
    @"#include <metal_stdlib>\n"
     "using namespace metal;\n"
     "kernel void gemv_bf16(device const ushort *w [[buffer(0)]],\n"
     "                      device const float *x [[buffer(1)]],\n"
     "                      device float *y [[buffer(2)]],\n"
     "                      constant uint &cols [[buffer(3)]],\n"
     "                      uint row [[thread_position_in_grid]])\n"
     "{\n"
     "    device const ushort *r = w + row * cols;\n"
     "    float s = 0.0f;\n"
     "    for (uint c = 0; c < cols; c++)\n"
     "        s += as_type<float>(uint(r[c]) << 16) * x[c];\n"
     "    y[row] = s;\n"
     "}\n";

static void fail(const char *msg)
{
    fprintf(stderr, "moe_metal: %s\n", msg);
    exit(1);
}

static int check(int r, const char *what)
{
    if (r < 0) {
        fprintf(stderr, "moe_metal: %s: %s (%s)\n", what, smoe_last_error(), smoe_err_name(r));
        exit(1);
    }
    return r;
}

static void fail_ns(const char *what, NSError *err)
{
    fprintf(stderr, "moe_metal: %s: %s\n", what,
            err ? err.localizedDescription.UTF8String : "unknown error");
    exit(1);
}

/* Relative error of the GPU's gate . x for (layer, expert) against the CPU. */
static double gate_error(const moe_model *m, uint32_t layer, uint32_t expert, const float *x,
                         const float *y)
{
    uint16_t *w = malloc((size_t)MOE_FFN * MOE_HIDDEN * sizeof *w);
    if (!w)
        fail("out of memory for the check");
    moe_fill_matrix(w, MOE_FFN, MOE_HIDDEN, m->seed, layer, expert, MOE_GATE);
    double num = 0, den = 0;
    for (uint32_t r = 0; r < MOE_FFN; r++) {
        double ref = 0;
        for (uint32_t c = 0; c < MOE_HIDDEN; c++)
            ref += (double)moe_bf16_to_float(w[(size_t)r * MOE_HIDDEN + c]) * x[c];
        num += (y[r] - ref) * (y[r] - ref);
        den += ref * ref;
    }
    free(w);
    return sqrt(num / den);
}

int main(int argc, char **argv)
{
    @autoreleasepool {
        if (argc < 2 || argv[1][0] == '-' || (argc != 2 && argc != 4) ||
            (argc == 4 && strcmp(argv[2], "--tokens"))) {
            fprintf(stderr, "usage: moe_metal VAULT [--tokens N]\n");
            return 2;
        }
        const char *vault = argv[1];
        long tokens = 16;
        if (argc == 4) {
            char *end;
            tokens = strtol(argv[3], &end, 10);
            if (!argv[3][0] || *end || tokens < 1 || tokens > 100000)
                fail("--tokens: expected a number in 1..100000");
        }

        id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
        if (!dev)
            fail("no Metal device");
        struct stat st;
        if (stat(vault, &st) != 0) {
            if (errno != ENOENT) {
                fprintf(stderr, "moe_metal: %s: %s\n", vault, strerror(errno));
                return 1;
            }
            moe_model pm = {2, 8, 2, 1};
            if (moe_pack(vault, &pm) != 0)
                return 1;
        }

        smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
        o.flags = SMOE_OPEN_ALLOW_BUFFERED;
        smoe_stream *s;
        check(smoe_open(vault, &o, &s), "open");
        moe_model m;
        if (moe_model_get(s, &m) != 0)
            return 1;

        /* The whole ring as one buffer, no copy. */
        smoe_ring_region ring = SMOE_RING_REGION_INIT;
        check(smoe_ring_region_get(s, &ring), "ring region");
        size_t page = (size_t)getpagesize();
        if ((uintptr_t)ring.base % page || ring.length % page)
            fail("the ring is not page-aligned");
        if (ring.length > dev.maxBufferLength)
            fail("the ring is larger than this device's largest buffer: open fewer slots");
        id<MTLBuffer> ringbuf = [dev newBufferWithBytesNoCopy:ring.base
                                                       length:(NSUInteger)ring.length
                                                      options:MTLResourceStorageModeShared
                                                  deallocator:nil];
        if (!ringbuf)
            fail("newBufferWithBytesNoCopy refused the ring");

        NSError *err = nil;
        id<MTLLibrary> lib = [dev newLibraryWithSource:kernel_source options:nil error:&err];
        if (!lib)
            fail_ns("kernel compile", err);
        id<MTLFunction> fn = [lib newFunctionWithName:@"gemv_bf16"];
        if (!fn)
            fail("kernel gemv_bf16 not found");
        id<MTLComputePipelineState> pso = [dev newComputePipelineStateWithFunction:fn error:&err];
        if (!pso)
            fail_ns("pipeline", err);
        id<MTLCommandQueue> queue = [dev newCommandQueue];
        id<MTLBuffer> xbuf = [dev newBufferWithLength:MOE_HIDDEN * sizeof(float)
                                              options:MTLResourceStorageModeShared];
        id<MTLBuffer> ybuf = [dev newBufferWithLength:m.top_k * MOE_FFN * sizeof(float)
                                              options:MTLResourceStorageModeShared];
        uint16_t *router = malloc((size_t)m.experts * MOE_HIDDEN * sizeof *router);
        float *embed = calloc(MOE_HIDDEN, sizeof *embed);
        double *logits = malloc(m.experts * sizeof *logits);
        if (!queue || !xbuf || !ybuf || !router || !embed || !logits)
            fail("out of memory");
        float *x = (float *)xbuf.contents;
        const float *y = (const float *)ybuf.contents;

        smoe_blob held[MOE_MAX_TOP_K];
        smoe_blob *hp = held; /* blocks capture the pointer, not the array */
        uint32_t sel[MOE_MAX_TOP_K], cols = MOE_HIDDEN;
        double worst = 0, t0 = CFAbsoluteTimeGetCurrent();
        for (long t = 0; t < tokens; t++) {
            moe_next_embedding(embed, m.seed, (uint64_t)t, 0.5f);
            moe_ref_rmsnorm(embed, x);
            for (uint32_t l = 0; l < m.layers; l++) {
                /* Route on the CPU: top-k of the router's logits. */
                moe_fill_router(router, &m, l);
                moe_ref_logits(router, x, m.experts, logits);
                for (uint32_t j = 0; j < m.top_k; j++) {
                    uint32_t best = UINT32_MAX;
                    for (uint32_t e = 0; e < m.experts; e++)
                        if (!isinf(logits[e]) && (best == UINT32_MAX || logits[e] > logits[best]))
                            best = e;
                    sel[j] = best;
                    logits[best] = -INFINITY;
                    check(smoe_prefetch(s, l, best, SMOE_PREFETCH_DEMAND), "prefetch");
                }

                id<MTLCommandBuffer> cb = [queue commandBuffer];
                id<MTLComputeCommandEncoder> enc = [cb computeCommandEncoder];
                if (!cb || !enc)
                    fail("cannot create a command buffer");
                [enc setComputePipelineState:pso];
                [enc setBuffer:xbuf offset:0 atIndex:1];
                [enc setBytes:&cols length:sizeof cols atIndex:3];
                for (uint32_t j = 0; j < m.top_k; j++) {
                    check(smoe_claim_wait(s, l, sel[j], 10000000000ull, &held[j]), "claim");
                    moe_expert_view v;
                    if (moe_view_get(s, held[j].layout, &v) != 0)
                        return 1;
                    if (held[j].size < v.extent)
                        fail("a blob is smaller than its layout");
                    /* The weights: an offset into the ring's buffer. */
                    [enc setBuffer:ringbuf
                            offset:(NSUInteger)(held[j].ring_offset + v.offset[MOE_GATE])
                           atIndex:0];
                    [enc setBuffer:ybuf offset:j * MOE_FFN * sizeof(float) atIndex:2];
                    [enc dispatchThreadgroups:MTLSizeMake(MOE_FFN / 64, 1, 1)
                        threadsPerThreadgroup:MTLSizeMake(64, 1, 1)];
                }
                [enc endEncoding];

                /* Release once the GPU is done with the blobs. */
                dispatch_semaphore_t done = dispatch_semaphore_create(0);
                __block int release_failed = 0;
                const uint32_t k = m.top_k;
                [cb addCompletedHandler:^(id<MTLCommandBuffer> c) {
                  (void)c;
                  for (uint32_t j = 0; j < k; j++)
                      if (smoe_release(s, &hp[j]) < 0)
                          release_failed = 1;
                  dispatch_semaphore_signal(done);
                }];
                [cb commit];
                dispatch_semaphore_wait(done, DISPATCH_TIME_FOREVER);
                if (cb.status != MTLCommandBufferStatusCompleted)
                    fail_ns("command buffer", cb.error);
                if (release_failed)
                    fail("release failed");

                if (t == 0)
                    for (uint32_t j = 0; j < m.top_k; j++)
                        worst = fmax(worst, gate_error(&m, l, sel[j], x, y + j * MOE_FFN));
            }
        }
        double sec = CFAbsoluteTimeGetCurrent() - t0;
        if (!(worst <= 1e-3)) {
            fprintf(stderr, "moe_metal: check failed: relative error %.3g against the CPU\n",
                    worst);
            return 1;
        }
        printf("moe_metal: %s: %ld tokens x %u layers x top-%u in %.2f s (%.1f tokens/s), "
               "first token checked against the CPU: relative error %.2e\n",
               dev.name.UTF8String, tokens, m.layers, m.top_k, sec, (double)tokens / sec,
               worst);
        ringbuf = nil; /* no GPU work is left that reads the ring */
        free(router);
        free(embed);
        free(logits);
        check(smoe_close(s), "close");
    }
    return 0;
}
