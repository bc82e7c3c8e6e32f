/*
 * decode_loop.c - the simulated decode loop of an MoE engine's host code.
 *
 * Per token and layer: route (a recorded trace, or synthetic routing with
 * skewed popularity and adjacent-token overlap), prefetch the routed
 * experts as demand, claim each as it arrives, compute something real on
 * its bytes (a dot product over every component, so the data is read),
 * release. Between requests the engine goes idle (smoe_set_busy(s, 0)) so
 * the library's pre-warm thread may run. Prints tokens/s, hit rate and time
 * spent waiting in claim.
 *
 * Build: cc decode_loop.c $(pkg-config --cflags --libs smoe_stream) -lm
 * Run:   decode_loop VAULT [--tokens N] [--requests R] [--top-k K]
 *                    [--trace FILE] [--workers N] [--slots N]
 *
 * Introduces usage of: smoe_open, smoe_prefetch, smoe_claim_wait,
 * smoe_release, smoe_layout_component, smoe_set_busy, smoe_get_stats.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <smoe/smoe.h>

#define MAX_K 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what, int err)
{
    fprintf(stderr, "decode_loop: %s: %s (%s)\n", what, smoe_last_error(),
            smoe_err_name(err));
    return 1;
}

/* ---- routing: a trace file, or synthetic ------------------------------ */

struct router {
    FILE *trace;             /* NULL: synthetic */
    uint32_t layers, experts, k;
    uint64_t rng;
    double *cdf;             /* expert popularity, per layer */
    uint32_t *prev;          /* previous token's experts, layers x k */
    double overlap;          /* chance to keep the previous token's choice */
    int new_request;         /* the trace started a new request */
    uint32_t next_layer;     /* synthetic: the layer routed next */
};

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static double rnd01(uint64_t *x)
{
    return (double)(rnd(x) >> 11) / 9007199254740992.0;
}

static int router_init(struct router *r, const char *trace, uint32_t layers, uint32_t experts,
                       uint32_t k)
{
    memset(r, 0, sizeof *r);
    r->layers = layers;
    r->experts = experts;
    r->k = k;
    r->rng = 0x5EED;
    r->overlap = 0.45;
    if (trace) {
        r->trace = fopen(trace, "r");
        if (!r->trace) {
            perror(trace);
            return -1;
        }
        return 0;
    }
    r->cdf = malloc(sizeof *r->cdf * experts);
    r->prev = calloc((size_t)layers * k, sizeof *r->prev);
    if (!r->cdf || !r->prev)
        return -1;
    double sum = 0;
    for (uint32_t e = 0; e < experts; e++)
        sum += 1.0 / pow(e + 1.0, 0.9);
    double acc = 0;
    for (uint32_t e = 0; e < experts; e++) {
        acc += 1.0 / pow(e + 1.0, 0.9) / sum;
        r->cdf[e] = acc;
    }
    for (size_t i = 0; i < (size_t)layers * k; i++)
        r->prev[i] = UINT32_MAX;
    return 0;
}

/*
 * Next routing step: sets *layer and the experts in out[]; returns how
 * many, 0 at the end of a trace. Synthetic routing walks the layers in
 * order, token after token.
 */
static uint32_t route(struct router *r, uint32_t *layer, uint32_t *out)
{
    if (r->trace) {
        char line[4096];
        while (fgets(line, sizeof line, r->trace)) {
            if (line[0] == '#') {
                if (!strncmp(line, "# request", 9))
                    r->new_request = 1;
                continue;
            }
            char *p = line, *end;
            strtoul(p, &end, 10); /* token */
            p = end;
            unsigned long l = strtoul(p, &end, 10);
            if (end == p || l >= r->layers)
                continue;
            p = end;
            uint32_t n = 0;
            for (;;) {
                unsigned long e = strtoul(p, &end, 10);
                if (end == p || n == MAX_K)
                    break;
                if (e < r->experts)
                    out[n++] = (uint32_t)e;
                p = end;
            }
            if (n == 0)
                continue;
            *layer = (uint32_t)l;
            return n;
        }
        return 0;
    }
    uint32_t l = r->next_layer;
    r->next_layer = (l + 1) % r->layers;
    *layer = l;
    uint32_t *prev = &r->prev[(size_t)l * r->k];
    for (uint32_t i = 0; i < r->k; i++) {
        uint32_t e = prev[i];
        if (e == UINT32_MAX || rnd01(&r->rng) >= r->overlap) {
            double u = rnd01(&r->rng);
            e = 0;
            while (e + 1 < r->experts && r->cdf[e] < u)
                e++;
            /* Spread popular ranks over the layer's experts. */
            e = (uint32_t)((e * 2654435761u + l * 40503u) % r->experts);
        }
        for (uint32_t j = 0; j < i; j++)
            if (out[j] == e) { /* distinct experts per layer */
                e = (e + 1) % r->experts;
                j = (uint32_t)-1;
            }
        out[i] = e;
    }
    memcpy(prev, out, sizeof *out * r->k);
    return r->k;
}

/* ---- compute: a dot product over every component ---------------------- */

static float bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double component_dot(const unsigned char *p, const smoe_component *c)
{
    double acc = 0;
    if (c->dtype == SMOE_DTYPE_BF16) {
        for (uint64_t i = 0; i + 1 < c->nbytes; i += 2) {
            uint16_t h;
            memcpy(&h, p + i, 2);
            float x = bf16_to_float(h);
            if (isfinite(x)) /* random test weights include NaN patterns */
                acc += x * 0.5f;
        }
    } else {
        for (uint64_t i = 0; i < c->nbytes; i++)
            acc += p[i] * (1.0 / 256);
    }
    return acc;
}

static double expert_compute(smoe_stream *s, const smoe_blob *b)
{
    int n = smoe_layout_count(s, b->layout);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        smoe_component c;
        if (smoe_layout_component(s, b->layout, (uint32_t)i, &c) == 0 &&
            c.offset + c.nbytes <= b->size)
            acc += component_dot((const unsigned char *)b->data + c.offset, &c);
    }
    return acc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: decode_loop VAULT [--tokens N] [--requests R] [--top-k K] "
                        "[--trace FILE] [--workers N] [--slots N]\n");
        return argc < 2 ? 2 : 0;
    }
    const char *vault = argv[1], *trace = NULL;
    uint32_t tokens = 64, requests = 2, k = 0, workers = 0, slots = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        uint32_t v = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--tokens")) tokens = v;
        else if (!strcmp(argv[i], "--requests")) requests = v;
        else if (!strcmp(argv[i], "--top-k")) k = v;
        else if (!strcmp(argv[i], "--workers")) workers = v;
        else if (!strcmp(argv[i], "--slots")) slots = v;
        else if (!strcmp(argv[i], "--trace")) trace = argv[i + 1];
        else {
            fprintf(stderr, "decode_loop: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (smoe_version_number() / 10000 != SMOE_VERSION_MAJOR) {
        fprintf(stderr, "decode_loop: built for libsmoe_stream %s, running %s\n",
                SMOE_VERSION_STRING, smoe_version_string());
        return 1;
    }

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = workers;
    o.ring_slots = slots;
    o.top_k = k;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    int r = smoe_open(vault, &o, &s);
    if (r < 0)
        return die("open", r);
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    if ((r = smoe_vault_info_get(s, &vi)) < 0)
        return die("vault info", r);
    if (!k)
        k = vi.top_k ? vi.top_k : 4;
    if (k > MAX_K || k > vi.experts) {
        fprintf(stderr, "decode_loop: top-k %u is over the %u experts per layer\n", k,
                vi.experts);
        return 1;
    }
    struct router rt;
    if (router_init(&rt, trace, vi.layers, vi.experts, k) < 0)
        return 1;

    double t0 = now_s(), checksum = 0;
    uint64_t done = 0;
    uint32_t ex[MAX_K], layer, last_layer = UINT32_MAX, n;
    uint32_t req = 0, tok = 0;
    smoe_set_busy(s, 1); /* a request: demand owns the disk */
    while ((n = route(&rt, &layer, ex)) > 0) {
        if (layer <= last_layer && last_layer != UINT32_MAX) { /* a new token */
            done++;
            int end_req = trace ? rt.new_request : ++tok == tokens;
            if (end_req) {
                rt.new_request = 0;
                tok = 0;
                smoe_set_busy(s, 0); /* between requests: pre-warm may run */
                if (!trace && ++req == requests)
                    break;
                smoe_set_busy(s, 1);
            }
        }
        if (last_layer == UINT32_MAX)
            rt.new_request = 0; /* the trace's first "# request" */
        last_layer = layer;
        for (uint32_t i = 0; i < n; i++)
            if ((r = smoe_prefetch(s, layer, ex[i], SMOE_PREFETCH_DEMAND)) < 0)
                return die("prefetch", r);
        for (uint32_t i = 0; i < n; i++) {
            smoe_blob b;
            if ((r = smoe_claim_wait(s, layer, ex[i], 10000000000ull, &b)) < 0)
                return die("claim", r);
            checksum += expert_compute(s, &b);
            if ((r = smoe_release(s, &b)) < 0)
                return die("release", r);
        }
    }
    if (trace && last_layer != UINT32_MAX)
        done++; /* the trace's last token */
    smoe_set_busy(s, 0);
    double sec = now_s() - t0;

    smoe_stats st = SMOE_STATS_INIT;
    if ((r = smoe_get_stats(s, &st)) < 0)
        return die("stats", r);
    uint64_t demand = st.hits + st.joins + st.misses;
    printf("decode_loop: %llu tokens x %u layers x top-%u in %.2f s: %.1f tokens/s\n",
           (unsigned long long)done, vi.layers, k, sec, done / sec);
    printf("  hit rate %.3f (%llu hits, %llu joins, %llu misses), %llu evictions\n",
           demand ? (double)st.hits / (double)demand : 0.0, (unsigned long long)st.hits,
           (unsigned long long)st.joins, (unsigned long long)st.misses,
           (unsigned long long)st.evictions);
    printf("  read %.1f MiB at %.2f GB/s (%s I/O, %llu slots of %.1f MiB)\n",
           (double)st.bytes_read / 1048576.0, (double)st.bytes_read / sec / 1e9,
           st.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered",
           (unsigned long long)st.slots, (double)st.slot_bytes / 1048576.0);
    printf("  waiting in claim: %.3f s total, %.3f ms per token (checksum %.3g)\n",
           (double)st.claim_wait_ns / 1e9,
           done ? (double)st.claim_wait_ns / 1e6 / (double)done : 0.0, checksum);
    if ((r = smoe_close(s)) < 0)
        return die("close", r);
    if (rt.trace)
        fclose(rt.trace);
    free(rt.cdf);
    free(rt.prev);
    return 0;
}
