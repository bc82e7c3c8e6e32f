/*
 * decode_loop.c - the simulated decode loop of an MoE engine's host code.
 *
 * Per token and layer: route (a recorded trace, or synthetic routing with
 * skewed popularity and adjacent-token overlap), prefetch the routed
 * experts as demand (and a trace's speculative bets as speculative), claim
 * each as it arrives, compute something real on its bytes (a dot product
 * over every component, so the data is read), release. Between requests
 * the engine goes idle (smoe_set_busy(s, 0)) for --idle-ms, so the
 * library's pre-warm thread may run. At start-up it fills the ring with
 * smoe_warmup (the likeliest experts at the drive's speed) and, with
 * --warmup wait, waits for it before the first token; by default the first
 * tokens' demand reads overtake it. Prints tokens/s, hit rate, time spent
 * waiting in claim and what the warm-up loaded.
 *
 * Traces are plain text in the format of docs/trace-format.md (decompress
 * a .gz first); a malformed line stops the run with its file, line number
 * and what was expected.
 *
 * Build: cc decode_loop.c $(pkg-config --cflags --libs smoe_stream) -lm
 * Run:   decode_loop VAULT [--tokens N] [--requests R] [--top-k K]
 *                    [--trace FILE] [--workers N] [--slots N] [--idle-ms MS]
 *                    [--warmup on|wait|off]
 *
 * Introduces usage of: smoe_open, smoe_prefetch, smoe_claim,
 * smoe_claim_wait, smoe_release, smoe_layout_count, smoe_layout_component,
 * smoe_set_busy, smoe_get_stats, smoe_warmup, smoe_warmup_wait.
 *
 * SPDX-License-Identifier: MIT
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#endif
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <smoe/smoe.h>

#define MAX_K 64            /* experts per line, ranked or speculative */
#define LINE_MAX_BYTES 4096 /* a trace line, newline included */
#define CLAIM_TIMEOUT_NS 10000000000ull

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A library call failed: say which and why, and exit non-zero. */
_Noreturn static void die(const char *what, int err)
{
    fprintf(stderr, "decode_loop: %s: %s (%s)\n", what, smoe_last_error(), smoe_err_name(err));
    exit(1);
}

/* ---- routing: a trace file, or synthetic ------------------------------ */

/* One routing step: the experts of one (token, layer). */
struct step {
    uint64_t token;
    uint32_t layer;
    int new_request;         /* this step starts a request (not the first) */
    uint32_t n, nspec;
    uint32_t ex[MAX_K];      /* ranked: demand */
    uint32_t spec[MAX_K];    /* the trace's next ranks: speculative */
};

struct router {
    uint32_t layers, experts, k;
    /* trace */
    FILE *trace;
    const char *path;
    uint64_t line;
    uint32_t hdr_layers, hdr_experts, hdr_topk; /* 0: not in the header */
    int started, request_seen;
    uint64_t prev_token;
    uint32_t prev_layer;
    /* synthetic */
    uint64_t rng;
    double *cdf;             /* expert popularity */
    uint32_t *prev;          /* previous token's experts, layers x k */
    double overlap;          /* chance to keep the previous token's choice */
    uint64_t token, tokens_per_request, tokens_total;
    uint32_t next_layer;
};

/* A malformed trace: name the file and line, say what was expected, exit. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
_Noreturn static void trace_fail(const struct router *r, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "decode_loop: %s:%llu: ", r->path, (unsigned long long)r->line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

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

static void router_open_trace(struct router *r, const char *path)
{
    r->path = path;
    r->trace = fopen(path, "rb");
    if (!r->trace) {
        fprintf(stderr, "decode_loop: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    int c0 = getc(r->trace), c1 = getc(r->trace);
    if (c0 == 0x1f && c1 == 0x8b) {
        fprintf(stderr, "decode_loop: %s: gzip-compressed; decode_loop reads plain text: "
                "decompress it first (zcat %s > trace.txt)\n", path, path);
        exit(1);
    }
    rewind(r->trace);
}

static void router_synthetic(struct router *r, uint64_t tokens, uint64_t requests)
{
    r->rng = 0x5EED;
    r->overlap = 0.45;
    r->tokens_per_request = tokens;
    r->tokens_total = tokens * requests;
    r->cdf = malloc(sizeof *r->cdf * r->experts);
    r->prev = calloc((size_t)r->layers * r->k, sizeof *r->prev);
    if (!r->cdf || !r->prev) {
        fprintf(stderr, "decode_loop: out of memory for the synthetic router\n");
        exit(1);
    }
    double sum = 0;
    for (uint32_t e = 0; e < r->experts; e++)
        sum += 1.0 / pow(e + 1.0, 0.9);
    double acc = 0;
    for (uint32_t e = 0; e < r->experts; e++) {
        acc += 1.0 / pow(e + 1.0, 0.9) / sum;
        r->cdf[e] = acc;
    }
    for (size_t i = 0; i < (size_t)r->layers * r->k; i++)
        r->prev[i] = UINT32_MAX;
}

/* Synthetic routing walks the layers in order, token after token. */
static int route_synthetic(struct router *r, struct step *st)
{
    if (r->token == r->tokens_total)
        return 0;
    uint32_t l = r->next_layer;
    st->token = r->token;
    st->layer = l;
    st->new_request = l == 0 && r->token > 0 && r->token % r->tokens_per_request == 0;
    st->n = r->k;
    st->nspec = 0;
    if (++r->next_layer == r->layers) {
        r->next_layer = 0;
        r->token++;
    }
    uint32_t *prev = &r->prev[(size_t)l * r->k], *out = st->ex;
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
    return 1;
}

/* A decimal number <= 4294967295 at *p (after blanks); 0 if none there. */
static int parse_u32(const struct router *r, char **p, uint32_t *v, const char *what)
{
    char *s = *p + strspn(*p, " \t");
    if (*s < '0' || *s > '9')
        return 0;
    uint64_t x = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if ((x = x * 10 + (uint64_t)(*s - '0')) > UINT32_MAX)
            trace_fail(r, "%s is over 4294967295", what);
    if (*s && *s != ' ' && *s != '\t' && *s != '|')
        trace_fail(r, "%s: unexpected character '%c' after the number", what, *s);
    *v = (uint32_t)x;
    *p = s;
    return 1;
}

/* key=value words of a header comment: the trace's shape. */
static void parse_header(struct router *r, char *s)
{
    for (char *w = strtok(s, " \t"); w; w = strtok(NULL, " \t")) {
        char *eq = strchr(w, '=');
        if (!eq)
            continue;
        *eq = 0;
        uint32_t *dst = !strcmp(w, "layers") ? &r->hdr_layers
                      : !strcmp(w, "experts") ? &r->hdr_experts
                      : !strcmp(w, "topk") || !strcmp(w, "top_k") ? &r->hdr_topk : NULL;
        if (!dst)
            continue; /* model=, and keys this reader does not know */
        char *v = eq + 1, *end = v;
        uint32_t x;
        if (!parse_u32(r, &end, &x, w) || *end || x == 0 || x > 65536)
            trace_fail(r, "header key %s: found \"%s\", expected a number in 1..65536", w, v);
        if (*dst && *dst != x)
            trace_fail(r, "header key %s=%u, given earlier as %u", w, x, *dst);
        *dst = x;
    }
    if (r->hdr_layers && r->hdr_layers != r->layers)
        trace_fail(r, "the trace is for %u layers, the vault has %u", r->hdr_layers, r->layers);
    if (r->hdr_experts && r->hdr_experts != r->experts)
        trace_fail(r, "the trace is for %u experts per layer, the vault has %u",
                   r->hdr_experts, r->experts);
}

/* Up to n experts of one line into out; checks range and distinctness. */
static uint32_t parse_experts(struct router *r, char **p, uint32_t *out, uint32_t *all,
                              uint32_t *nall, const char *what)
{
    uint32_t n = 0, e;
    while (parse_u32(r, p, &e, "an expert number")) {
        if (n == MAX_K)
            trace_fail(r, "more than %d %s experts", MAX_K, what);
        if (e >= r->experts)
            trace_fail(r, "expert %u is not below the vault's %u experts per layer", e,
                       r->experts);
        for (uint32_t i = 0; i < *nall; i++)
            if (all[i] == e)
                trace_fail(r, "expert %u appears twice in one line", e);
        all[(*nall)++] = e;
        out[n++] = e;
    }
    return n;
}

/* The next record of the trace; 0 at its end. */
static int route_trace(struct router *r, struct step *st)
{
    char line[LINE_MAX_BYTES];
    int request = 0;
    while (fgets(line, sizeof line, r->trace)) {
        r->line++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(r->trace))
            trace_fail(r, "line longer than %d bytes", LINE_MAX_BYTES - 1);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        char *p = line + strspn(line, " \t");
        if (!*p)
            continue;
        if (*p == '#') {
            if (!strncmp(p, "# source:", 9))
                continue;
            if (!strncmp(p, "# request", 9)) {
                char *q = p + 9;
                uint32_t n;
                if (!parse_u32(r, &q, &n, "request number") || q[strspn(q, " \t")])
                    trace_fail(r, "expected \"# request N\" with a decimal N");
                request = r->request_seen = 1;
                continue;
            }
            parse_header(r, p + 1);
            continue;
        }
        uint32_t token, layer, all[2 * MAX_K], nall = 0;
        if (!parse_u32(r, &p, &token, "token") || !parse_u32(r, &p, &layer, "layer"))
            trace_fail(r, "expected \"token layer e1 ... ek [| s1 ... sm]\"");
        if (layer >= r->layers)
            trace_fail(r, "layer %u is not below the vault's %u layers", layer, r->layers);
        if (r->started && token < r->prev_token)
            trace_fail(r, "token %u after token %llu: token numbers never decrease", token,
                       (unsigned long long)r->prev_token);
        if (r->started && token == r->prev_token && layer <= r->prev_layer)
            trace_fail(r, "layer %u after layer %u of token %u: layers of a token increase",
                       layer, r->prev_layer, token);
        st->n = parse_experts(r, &p, st->ex, all, &nall, "ranked");
        if (st->n == 0)
            trace_fail(r, "no experts: expected \"token layer e1 ... ek [| s1 ... sm]\"");
        if (r->hdr_topk && st->n > r->hdr_topk)
            trace_fail(r, "%u ranked experts, over the header's topk=%u", st->n, r->hdr_topk);
        st->nspec = 0;
        p += strspn(p, " \t");
        if (*p == '|') {
            p++;
            st->nspec = parse_experts(r, &p, st->spec, all, &nall, "speculative");
            p += strspn(p, " \t");
        }
        if (*p)
            trace_fail(r, "unexpected \"%.20s\": expected an expert number, or '|' then "
                       "expert numbers", p);
        st->new_request = r->started && request;
        st->token = token;
        st->layer = layer;
        r->started = 1;
        r->prev_token = token;
        r->prev_layer = layer;
        return 1;
    }
    if (ferror(r->trace)) {
        fprintf(stderr, "decode_loop: %s: read error: %s\n", r->path, strerror(errno));
        exit(1);
    }
    if (!r->started)
        trace_fail(r, "no routing records in the trace");
    return 0;
}

static int route(struct router *r, struct step *st)
{
    return r->trace ? route_trace(r, st) : route_synthetic(r, st);
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

/* Bytes of weights the dot products ran over, for the summary. */
static uint64_t bytes_computed;

static double expert_compute(smoe_stream *s, const smoe_blob *b)
{
    int n = smoe_layout_count(s, b->layout);
    if (n < 0)
        die("layout count", n);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        smoe_component c;
        int r = smoe_layout_component(s, b->layout, (uint32_t)i, &c);
        if (r < 0)
            die("layout component", r);
        if (c.offset > b->size || c.nbytes > b->size - c.offset) {
            fprintf(stderr, "decode_loop: layer %u expert %u: component \"%s\" ends at %llu, "
                    "past the %llu-byte blob\n", b->layer, b->expert, c.name,
                    (unsigned long long)(c.offset + c.nbytes), (unsigned long long)b->size);
            exit(1);
        }
        acc += component_dot((const unsigned char *)b->data + c.offset, &c);
        bytes_computed += c.nbytes;
    }
    return acc;
}

/* Claim the n experts of a step in the order they arrive; compute; release. */
static double run_step(smoe_stream *s, const struct step *st)
{
    double acc = 0;
    uint64_t todo = st->n == 64 ? UINT64_MAX : (1ull << st->n) - 1;
    while (todo) {
        smoe_blob b;
        int got = -1, r;
        for (uint32_t i = 0; i < st->n && got < 0; i++) {
            if (!(todo >> i & 1))
                continue;
            if ((r = smoe_claim(s, st->layer, st->ex[i], &b)) >= 0)
                got = (int)i;
            else if (r != SMOE_EAGAIN)
                die("claim", r);
        }
        if (got < 0) { /* none has arrived yet: wait for the best-ranked one */
            for (got = 0; !(todo >> got & 1); got++)
                ;
            if ((r = smoe_claim_wait(s, st->layer, st->ex[got], CLAIM_TIMEOUT_NS, &b)) < 0)
                die("claim_wait", r);
        }
        todo &= ~(1ull << got);
        acc += expert_compute(s, &b);
        if ((r = smoe_release(s, &b)) < 0)
            die("release", r);
    }
    return acc;
}

/* ---- main ------------------------------------------------------------------ */

static uint32_t parse_opt(const char *opt, const char *val, uint32_t lo, uint32_t hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(val, &end, 10);
    if (!*val || *end || errno || *val == '-' || v < lo || v > hi) {
        fprintf(stderr, "decode_loop: %s: \"%s\" is not a number in %u..%u\n", opt, val, lo,
                hi);
        exit(2);
    }
    return (uint32_t)v;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: decode_loop VAULT [--tokens N] [--requests R] [--top-k K] "
               "[--trace FILE] [--workers N] [--slots N] [--idle-ms MS] "
               "[--warmup on|wait|off]\n");
}

/* The command line. */
struct opts {
    const char *vault, *trace, *warmup;
    uint32_t tokens, requests, k, workers, slots, idle_ms;
};

/* 0, or the exit status for a command line that is not valid (2) or a
 * --help (0, with *help set). */
static int parse_args(int argc, char **argv, struct opts *a, int *help)
{
    *help = 0;
    if (argc >= 2 && !strcmp(argv[1], "--help")) {
        usage(stdout);
        *help = 1;
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-') {
        usage(stderr);
        return 2;
    }
    *a = (struct opts){.vault = argv[1], .warmup = "on", .tokens = 64, .requests = 2,
                       .idle_ms = 100};
    for (int i = 2; i < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (i + 1 == argc) {
            fprintf(stderr, "decode_loop: %s needs a value\n", o);
            return 2;
        }
        if (!strcmp(o, "--tokens")) a->tokens = parse_opt(o, v, 1, 1u << 30);
        else if (!strcmp(o, "--requests")) a->requests = parse_opt(o, v, 1, 1u << 20);
        else if (!strcmp(o, "--top-k")) a->k = parse_opt(o, v, 1, MAX_K);
        else if (!strcmp(o, "--workers")) a->workers = parse_opt(o, v, 1, 1024);
        else if (!strcmp(o, "--slots")) a->slots = parse_opt(o, v, 1, 1u << 20);
        else if (!strcmp(o, "--idle-ms")) a->idle_ms = parse_opt(o, v, 0, 60000);
        else if (!strcmp(o, "--trace")) a->trace = v;
        else if (!strcmp(o, "--warmup") &&
                 (!strcmp(v, "on") || !strcmp(v, "wait") || !strcmp(v, "off"))) a->warmup = v;
        else {
            fprintf(stderr, "decode_loop: unknown option %s\n", o);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

/* What the decode did: tokens, requests, busy time, the dot products' sum. */
struct tally {
    uint64_t done, nreq;
    double busy_s, dot_sum;
};

/* The decode: each step's experts prefetched (demand, then speculative),
 * claimed and computed on; between requests the stream is idle. */
static void decode(smoe_stream *s, struct router *rt, uint32_t idle_ms, struct tally *t)
{
    int r;
    double t0 = now_s();
    uint64_t last_token = 0;
    struct step st;
    *t = (struct tally){.nreq = 1};
    if ((r = smoe_set_busy(s, 1)) < 0) /* a request: demand owns the disk */
        die("set_busy", r);
    for (int first = 1; route(rt, &st); first = 0) {
        if (!first && st.token != last_token)
            t->done++;
        last_token = st.token;
        if (st.new_request) { /* between requests: idle, pre-warm may run */
            t->busy_s += now_s() - t0;
            if ((r = smoe_set_busy(s, 0)) < 0)
                die("set_busy", r);
            sleep_ms(idle_ms);
            if ((r = smoe_set_busy(s, 1)) < 0)
                die("set_busy", r);
            t0 = now_s();
            t->nreq++;
        }
        for (uint32_t i = 0; i < st.n; i++)
            if ((r = smoe_prefetch(s, st.layer, st.ex[i], SMOE_PREFETCH_DEMAND)) < 0)
                die("prefetch", r);
        for (uint32_t i = 0; i < st.nspec; i++) /* SMOE_SKIPPED is fine: a bet */
            if ((r = smoe_prefetch(s, st.layer, st.spec[i], SMOE_PREFETCH_SPECULATIVE)) < 0)
                die("speculative prefetch", r);
        t->dot_sum += run_step(s, &st);
    }
    t->done++; /* the last token */
    t->busy_s += now_s() - t0;
    if ((r = smoe_set_busy(s, 0)) < 0)
        die("set_busy", r);
}

static void print_summary(smoe_stream *s, const smoe_vault_info *vi, uint32_t k,
                          const struct tally *t)
{
    int r;
    smoe_stats sts = SMOE_STATS_INIT;
    if ((r = smoe_get_stats(s, &sts)) < 0)
        die("stats", r);
    uint64_t demand = sts.hits + sts.joins + sts.misses;
    printf("decode_loop: %llu tokens in %llu requests x %u layers x top-%u in %.2f s "
           "(idle gaps excluded): %.1f tokens/s\n",
           (unsigned long long)t->done, (unsigned long long)t->nreq, vi->layers, k, t->busy_s,
           (double)t->done / t->busy_s);
    printf("  hit rate %.3f (%llu hits, %llu joins, %llu misses), %llu evictions\n",
           demand ? (double)sts.hits / (double)demand : 0.0, (unsigned long long)sts.hits,
           (unsigned long long)sts.joins, (unsigned long long)sts.misses,
           (unsigned long long)sts.evictions);
    /* Where the bytes came from, not bytes over the decode time: with a
     * warm ring that rate is the dot products' pace, not the drive's. */
    uint64_t other = sts.bytes_read > sts.warmup_bytes ? sts.bytes_read - sts.warmup_bytes : 0;
    printf("  read %.1f MiB (%s I/O, %llu slots of %.1f MiB): %.1f MiB by the warm-up, "
           "%.1f MiB by demand misses and pre-warm\n", (double)sts.bytes_read / 1048576.0,
           sts.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered",
           (unsigned long long)sts.slots, (double)sts.slot_bytes / 1048576.0,
           (double)sts.warmup_bytes / 1048576.0, (double)other / 1048576.0);
    if (sts.warmup_experts)
        printf("  warm-up: %llu experts chosen, %llu loaded (%.1f MiB in %.3f s: %.2f GB/s, "
               "sequential reads, a stream per worker)%s\n",
               (unsigned long long)sts.warmup_experts, (unsigned long long)sts.warmup_loaded,
               (double)sts.warmup_bytes / 1048576.0, (double)sts.warmup_ns / 1e9,
               (double)sts.warmup_bytes_per_s / 1e9, sts.warmup_running ? ", still running" : "");
    printf("  waiting in claim: %.3f s total, %.3f ms per token\n",
           (double)sts.claim_wait_ns / 1e9, (double)sts.claim_wait_ns / 1e6 / (double)t->done);
    /* smoe gen's vaults (arch "synthetic") hold random bytes, not weights:
     * their sum says only that every byte was read. */
    const char *arch = smoe_meta_get(s, "arch");
    printf("  computed on %.1f MiB of claimed weights: dot products summing to %.3g%s\n",
           (double)bytes_computed / 1048576.0, t->dot_sum,
           arch && !strcmp(arch, "synthetic") ? " (random bytes from smoe gen: the sum shows "
                                                "only that every byte was read)" : "");
}

int main(int argc, char **argv)
{
    struct opts a;
    int help, r = parse_args(argc, argv, &a, &help);
    if (r || help)
        return r;
    if (smoe_version_number() / 10000 != SMOE_VERSION_MAJOR) {
        fprintf(stderr, "decode_loop: built for libsmoe_stream %s, running %s\n",
                SMOE_VERSION_STRING, smoe_version_string());
        return 1;
    }

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = a.workers;
    o.ring_slots = a.slots;
    o.top_k = a.k;
    o.flags = SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s;
    if ((r = smoe_open(a.vault, &o, &s)) < 0)
        die("open", r);
    smoe_vault_info vi = SMOE_VAULT_INFO_INIT;
    if ((r = smoe_vault_info_get(s, &vi)) < 0)
        die("vault info", r);
    uint32_t k = a.k ? a.k : vi.top_k ? vi.top_k : 4;
    if (k > vi.experts) {
        fprintf(stderr, "decode_loop: top-k %u is over the vault's %u experts per layer\n", k,
                vi.experts);
        return 1;
    }
    struct router rt;
    memset(&rt, 0, sizeof rt);
    rt.layers = vi.layers;
    rt.experts = vi.experts;
    rt.k = k;
    if (a.trace)
        router_open_trace(&rt, a.trace);
    else
        router_synthetic(&rt, a.tokens, a.requests);

    /* Start-up: fill the ring with the likeliest experts at the drive's
     * speed. It returns at once; demand reads go first at every chunk. */
    if (strcmp(a.warmup, "off") && (r = smoe_warmup(s, NULL)) < 0)
        die("warmup", r);
    if (!strcmp(a.warmup, "wait") && (r = smoe_warmup_wait(s, UINT64_MAX)) < 0)
        die("warmup wait", r);

    struct tally t;
    decode(s, &rt, a.idle_ms, &t);
    print_summary(s, &vi, k, &t);
    if ((r = smoe_close(s)) < 0)
        die("close", r);
    if (rt.trace && fclose(rt.trace) != 0) {
        fprintf(stderr, "decode_loop: %s: %s\n", a.trace, strerror(errno));
        return 1;
    }
    free(rt.cdf);
    free(rt.prev);
    return 0;
}
