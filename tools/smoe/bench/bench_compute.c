/*
 * bench_compute.c - `--compute-us auto`: a per-layer compute time measured
 * on this machine rather than guessed. One decode step of a layer on the
 * CPU reads each routed expert's weights once (a matrix-vector product per
 * expert), so the time is that of k float32 matrix-vector products over
 * blobs of the vault's slot size, each in its own buffer (k of them: more
 * than the caches hold at realistic sizes, as in a real decode).
 */
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"
#include "tool.h"

#define ROW 4096u /* floats per matrix row */

/* y = W x over n floats of W (rows of ROW); returns a checksum so the
 * work is not optimised away. */
static float matvec(const float *w, size_t n, const float *x, float *y)
{
    float sum = 0;
    for (size_t r = 0; r < n / ROW; r++) {
        /* eight partial sums, as a tuned kernel keeps (SIMD lanes): one
         * running sum would bound the loop by the add's latency */
        float acc[8] = {0};
        const float *row = w + r * ROW;
        for (uint32_t i = 0; i < ROW; i += 8)
            for (uint32_t j = 0; j < 8; j++)
                acc[j] += row[i + j] * x[i + j];
        y[r % ROW] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
        sum += y[r % ROW];
    }
    return sum;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

uint32_t bench_measure_compute_us(uint64_t blob_bytes, uint32_t k)
{
    size_t n = (size_t)(blob_bytes / sizeof(float)) / ROW * ROW;
    if (!n || !k)
        return 0;
    float **w = calloc(k, sizeof *w);
    float *x = malloc(ROW * sizeof *x), *y = calloc(ROW, sizeof *y);
    uint32_t us = 0;
    int ok = w && x && y;
    for (uint32_t e = 0; ok && e < k; e++) {
        ok = (w[e] = malloc(n * sizeof **w)) != NULL;
        for (size_t i = 0; ok && i < n; i++)
            w[e][i] = (float)(i % 7) * 0.25f;
    }
    if (ok) {
        for (uint32_t i = 0; i < ROW; i++)
            x[i] = 1.0f / (float)(i + 1);
        uint64_t t[7];
        volatile float sink = 0;
        for (int rep = 0; rep < 7; rep++) {
            uint64_t t0 = tool_now_ns();
            for (uint32_t e = 0; e < k; e++)
                sink += matvec(w[e], n, x, y);
            t[rep] = tool_now_ns() - t0;
        }
        (void)sink;
        qsort(t, 7, sizeof *t, cmp_u64);
        us = (uint32_t)(t[3] / 1000); /* the median */
    }
    for (uint32_t e = 0; w && e < k; e++)
        free(w[e]);
    free(w);
    free(x);
    free(y);
    return us;
}
