/*
 * smoe-llama: run a prompt through a llama.cpp model and generate, like
 * llama.cpp's simple example, with the experts streamed from a vault by
 * libsmoe_stream (or, with --resident, as stock llama.cpp with every expert
 * loaded from the GGUF: the reference the tests compare with).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml-cpu.h"
#include "llama.h"
#include "smoe_llama.h"

typedef struct args {
    const char *model, *vault, *prompt, *prompt_tokens, *logits_out, *replay, *stats_json;
    int lookahead, n_predict, threads, ctx, batch, ubatch, resident, print_ids, verbose, cpu_moe;
    int no_mmap, ignore_eos, top_k, n_gpu_layers, stats, verify, keep_pages, map;
    uint32_t ring_slots, workers;
    float temp, top_p;
    uint32_t seed;
} args;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: smoe-llama --model M.gguf (--vault V.smoe | --resident)\n"
        "                  (--prompt TEXT | --prompt-tokens 1,5,9) [options]\n"
        "  --n-predict N        tokens to generate (default 32)\n"
        "  --ring-slots N       ring slots (default: the library's memory budget)\n"
        "  --workers N          I/O workers (default: the library's)\n"
        "  --threads N          CPU threads (default: all cores)\n"
        "  --logits-out FILE    logits of every prompt position: little-endian float32,\n"
        "                       n_prompt x n_vocab, row by row\n"
        "  --resident           stock llama.cpp: every expert loaded from the GGUF\n"
        "  --print-token-ids    after the text, the generated token ids, one a line\n"
        "  --ctx-size N         context (default: prompt + n-predict)\n"
        "  --batch-size N       logical batch: tokens per llama_decode; a longer prompt\n"
        "                       is decoded in batches (default: max(prompt, 512))\n"
        "  --ubatch-size N      physical batch (default 512)\n"
        "  --temp T             0 (default): greedy; else top-k, top-p, temperature\n"
        "  --top-k N, --top-p P, --seed N   sampling (defaults 40, 0.95, 1)\n"
        "  --ignore-eos         keep generating past an end-of-generation token\n"
        "  --n-gpu-layers N     layers of the dense part on a GPU (default 0)\n"
        "  --cpu-moe            stock only: expert tensors in the CPU buffer type\n"
        "  --no-mmap            stock only: read the GGUF instead of mapping it\n"
        "  --verify             check every blob's checksum as it lands\n"
        "  --keep-pages         keep the GGUF's expert pages after load\n"
        "  --map                map ring pages over page-aligned expert slices (zero-copy)\n"
        "  --lookahead          router lookahead: at each layer's routing, apply the next\n"
        "                       layer's router to the hidden state and hint its top-k\n"
        "                       (smoe_prefetch_hint); off by default\n"
        "  --replay-trace FILE  measurement only: route by a recorded trace, not by\n"
        "                       the model (the output is then not the model's); with\n"
        "                       --resident, stock llama.cpp routed by the trace\n"
        "  --stats              streaming counters on stderr\n"
        "  --stats-json FILE    the same counters as one JSON object\n"
        "  --verbose            llama.cpp's log on stderr\n");
}

static long num(const char *opt, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "smoe-llama: %s: \"%s\" is not a number in %ld..%ld\n", opt, v, lo, hi);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, args *a)
{
    memset(a, 0, sizeof *a);
    a->n_predict = 32;
    a->ubatch = 512;
    a->top_k = 40;
    a->top_p = 0.95f;
    a->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int flag = 1;
        if (!strcmp(o, "--resident")) a->resident = 1;
        else if (!strcmp(o, "--print-token-ids")) a->print_ids = 1;
        else if (!strcmp(o, "--verbose")) a->verbose = 1;
        else if (!strcmp(o, "--cpu-moe")) a->cpu_moe = 1;
        else if (!strcmp(o, "--no-mmap")) a->no_mmap = 1;
        else if (!strcmp(o, "--ignore-eos")) a->ignore_eos = 1;
        else if (!strcmp(o, "--stats")) a->stats = 1;
        else if (!strcmp(o, "--verify")) a->verify = 1;
        else if (!strcmp(o, "--keep-pages")) a->keep_pages = 1;
        else if (!strcmp(o, "--map")) a->map = 1;
        else if (!strcmp(o, "--lookahead")) a->lookahead = 1;
        else if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); exit(0); }
        else flag = 0;
        if (flag)
            continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "smoe-llama: %s needs a value (--help lists the options)\n", o);
            exit(2);
        }
        const char *v = argv[++i];
        if (!strcmp(o, "--model") || !strcmp(o, "-m")) a->model = v;
        else if (!strcmp(o, "--vault")) a->vault = v;
        else if (!strcmp(o, "--prompt") || !strcmp(o, "-p")) a->prompt = v;
        else if (!strcmp(o, "--prompt-tokens")) a->prompt_tokens = v;
        else if (!strcmp(o, "--logits-out")) a->logits_out = v;
        else if (!strcmp(o, "--replay-trace")) a->replay = v;
        else if (!strcmp(o, "--stats-json")) a->stats_json = v;
        else if (!strcmp(o, "--n-predict") || !strcmp(o, "-n")) a->n_predict = (int)num(o, v, 0, 1 << 20);
        else if (!strcmp(o, "--ring-slots")) a->ring_slots = (uint32_t)num(o, v, 1, 1 << 24);
        else if (!strcmp(o, "--workers")) a->workers = (uint32_t)num(o, v, 1, 1024);
        else if (!strcmp(o, "--threads") || !strcmp(o, "-t")) a->threads = (int)num(o, v, 1, 1024);
        else if (!strcmp(o, "--ctx-size") || !strcmp(o, "-c")) a->ctx = (int)num(o, v, 1, 1 << 24);
        else if (!strcmp(o, "--batch-size") || !strcmp(o, "-b")) a->batch = (int)num(o, v, 1, 1 << 24);
        else if (!strcmp(o, "--ubatch-size") || !strcmp(o, "-ub")) a->ubatch = (int)num(o, v, 1, 1 << 24);
        else if (!strcmp(o, "--top-k")) a->top_k = (int)num(o, v, 0, 1 << 24);
        else if (!strcmp(o, "--seed")) a->seed = (uint32_t)num(o, v, 0, UINT32_MAX);
        else if (!strcmp(o, "--n-gpu-layers") || !strcmp(o, "-ngl")) a->n_gpu_layers = (int)num(o, v, -1, 100000);
        else if (!strcmp(o, "--temp") || !strcmp(o, "--top-p")) {
            char *end;
            float x = strtof(v, &end);
            if (!*v || *end || x < 0) {
                fprintf(stderr, "smoe-llama: %s: \"%s\" is not a number >= 0\n", o, v);
                exit(2);
            }
            *(o[2] == 't' && o[3] == 'e' ? &a->temp : &a->top_p) = x;
        } else {
            fprintf(stderr, "smoe-llama: unknown option %s (--help lists the options)\n", o);
            exit(2);
        }
    }
    const char *err = NULL;
    if (!a->model) err = "--model is required";
    else if (!a->vault == !a->resident) err = "give --vault, or --resident for stock llama.cpp";
    else if (!a->prompt == !a->prompt_tokens) err = "give one of --prompt and --prompt-tokens";
    else if (!a->resident && (a->cpu_moe || a->no_mmap))
        err = "--cpu-moe and --no-mmap are stock llama.cpp options (with --resident)";
    else if (a->lookahead && (a->resident || a->replay))
        err = "--lookahead hints the model's own routing: not with --resident or --replay-trace";
    if (err) {
        fprintf(stderr, "smoe-llama: %s\n", err);
        usage(stderr);
        exit(2);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int verbose_log, warn_log;

static void log_cb(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose_log || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static void smoe_log(void *user, int level, const char *msg)
{
    (void)user;
    if (level == SMOE_LOG_ERROR || (warn_log && level == SMOE_LOG_WARN) || verbose_log)
        fprintf(stderr, "smoe-llama: %s\n", msg);
}

static int parse_tokens(const char *s, llama_token **out, const struct llama_vocab *vocab)
{
    int n = 1, nv = llama_vocab_n_tokens(vocab);
    for (const char *p = s; *p; p++)
        n += *p == ',';
    llama_token *t = malloc(sizeof *t * (size_t)n);
    if (!t)
        return -1;
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || (*end && *end != ',') || x < 0 || x >= nv) {
            fprintf(stderr, "smoe-llama: --prompt-tokens: token %d (\"%.20s\") is not a "
                    "token id in 0..%d\n", i + 1, p, nv - 1);
            free(t);
            return -1;
        }
        t[i] = (llama_token)x;
        p = end + (*end == ',');
    }
    *out = t;
    return n;
}

static int tokenize(const char *text, llama_token **out, const struct llama_vocab *vocab,
                    const char *model)
{
    /* llama.cpp asserts (and aborts) when asked to tokenize without a
     * tokenizer: say so first. */
    if (llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_NONE || llama_vocab_n_tokens(vocab) <= 0) {
        fprintf(stderr, "smoe-llama: --prompt: %s has no tokenizer (tokenizer.ggml.model "
                "\"none\", or no vocabulary): give the prompt as token ids with "
                "--prompt-tokens, e.g. --prompt-tokens 1,5,9\n", model);
        return -1;
    }
    int len = (int)strlen(text);
    int n = -llama_tokenize(vocab, text, len, NULL, 0, true, true);
    if (n <= 0) {
        fprintf(stderr, "smoe-llama: --prompt: the model's vocabulary cannot tokenize it "
                "(use --prompt-tokens)\n");
        return -1;
    }
    *out = malloc(sizeof **out * (size_t)n);
    if (!*out || llama_tokenize(vocab, text, len, *out, n, true, true) != n) {
        fprintf(stderr, "smoe-llama: --prompt: tokenization failed\n");
        return -1;
    }
    return n;
}

/* The logits of a decoded batch's n rows, appended to f as little-endian
 * float32. */
static int write_rows(FILE *f, const char *path, struct llama_context *ctx, int first, int n,
                      int n_vocab)
{
    const uint16_t one = 1;
    int le = *(const uint8_t *)&one == 1;
    for (int i = 0; i < n; i++) {
        const float *row = llama_get_logits_ith(ctx, i);
        if (!row) {
            fprintf(stderr, "smoe-llama: no logits for prompt position %d\n", first + i);
            return -1;
        }
        for (int j = 0; j < n_vocab; j++) {
            uint32_t u;
            memcpy(&u, &row[j], 4);
            if (!le)
                u = __builtin_bswap32(u);
            fwrite(&u, 4, 1, f);
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "smoe-llama: --logits-out %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Decode the prompt in batches of the context's n_batch tokens at most, as
 * llama.cpp's own programs do (one llama_decode of more than n_batch tokens
 * aborts in a ggml assertion). With logits_path, every position's logits are
 * written, batch by batch; a failed write sets *rc to 1. Returns the last
 * llama_decode's result. */
static int decode_prompt(struct llama_context *ctx, const llama_token *prompt, int n_prompt,
                         const char *logits_path, int n_vocab, int *rc)
{
    FILE *f = NULL;
    if (logits_path && !(f = fopen(logits_path, "wb"))) {
        fprintf(stderr, "smoe-llama: --logits-out %s: %s\n", logits_path, strerror(errno));
        *rc = 1;
        return 0;
    }
    int nb = (int)llama_n_batch(ctx), dr = 0;
    struct llama_batch batch = llama_batch_init(nb, 0, 1);
    for (int first = 0; first < n_prompt && dr == 0 && *rc == 0; first += nb) {
        int n = n_prompt - first < nb ? n_prompt - first : nb;
        for (int i = 0; i < n; i++) {
            batch.token[i] = prompt[first + i];
            batch.pos[i] = first + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = f || first + i == n_prompt - 1;
        }
        batch.n_tokens = n;
        dr = llama_decode(ctx, batch);
        if (dr == 0 && f && write_rows(f, logits_path, ctx, first, n, n_vocab) < 0)
            *rc = 1;
    }
    llama_batch_free(batch);
    if (f && fclose(f) != 0 && *rc == 0) {
        fprintf(stderr, "smoe-llama: --logits-out %s: %s\n", logits_path, strerror(errno));
        *rc = 1;
    }
    return dr;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

static void print_stats(smoe_llama *h)
{
    smoe_stats s = SMOE_STATS_INIT;
    smoe_llama_stats ls;
    memset(&ls, 0, sizeof ls);
    ls.struct_size = sizeof ls;
    smoe_get_stats(smoe_llama_stream(h), &s);
    smoe_llama_get_stats(h, &ls);
    uint64_t demand = s.hits + s.joins + s.misses;
    fprintf(stderr, "smoe-llama: ring %" PRIu64 " slots of %.2f MiB (%s I/O); demand %" PRIu64
            ": %" PRIu64 " hits, %" PRIu64 " joins, %" PRIu64 " misses (hit rate %.3f); read "
            "%.1f MiB\n", s.slots, (double)s.slot_bytes / 1048576.0,
            s.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered", demand, s.hits, s.joins,
            s.misses, ratio(s.hits, demand), (double)s.bytes_read / 1048576.0);
    fprintf(stderr, "smoe-llama: %" PRIu64 " layer routings, %" PRIu64 " experts present, "
            "%" PRIu64 " of them mapped; copied %.1f MiB in %.3f s, mapped %.1f MiB in %.3f s "
            "(with unmapping); hit cost %.1f us an expert; waiting for reads %.3f s, %" PRIu64
            " in waves, largest union %" PRIu64 "; staging %.1f MiB\n", ls.layers,
            ls.experts, ls.experts_mapped, (double)ls.bytes_copied / 1048576.0,
            (double)ls.copy_ns / 1e9, (double)ls.bytes_mapped / 1048576.0,
            (double)ls.map_ns / 1e9, ratio(ls.copy_ns + ls.map_ns, ls.experts) / 1e3,
            (double)ls.wait_ns / 1e9, ls.waves, ls.max_union,
            (double)ls.stage_bytes / 1048576.0);
    if (ls.lookahead_bytes)
        fprintf(stderr, "smoe-llama: lookahead (a check of the mechanism; random weights say "
                "nothing of a real model's recall): lookahead_hints %" PRIu64 " (%" PRIu64
                " reads queued, %" PRIu64 " skipped, %" PRIu64 " cancelled by the stream) for "
                "%" PRIu64 " routings; lookahead_recall %.3f (%" PRIu64 " of %" PRIu64
                " experts demanded were hinted), precision %.3f; %.1f us a routing (%.1f us "
                "a token row, %.1f us a routing in smoe_prefetch_hint), %" PRIu64
                " from ffn_inp renormalised, %" PRIu64 " without a router input; weights %.1f "
                "KiB\n", ls.lookahead_hints, ls.lookahead_reads, ls.lookahead_skipped,
                s.hint_cancelled, ls.lookahead_layers,
                ratio(ls.lookahead_true, ls.lookahead_demanded), ls.lookahead_true,
                ls.lookahead_demanded, ratio(ls.lookahead_true, ls.lookahead_hints),
                ratio(ls.lookahead_ns, ls.lookahead_runs) / 1e3,
                ratio(ls.lookahead_ns - ls.lookahead_hint_ns, ls.lookahead_rows) / 1e3,
                ratio(ls.lookahead_hint_ns, ls.lookahead_runs) / 1e3,
                ls.lookahead_renormed, ls.lookahead_unseen,
                (double)ls.lookahead_bytes / 1024.0);
}

static int write_stats_json(smoe_llama *h, const char *path)
{
    smoe_stats s = SMOE_STATS_INIT;
    smoe_llama_stats ls;
    memset(&ls, 0, sizeof ls);
    ls.struct_size = sizeof ls;
    smoe_get_stats(smoe_llama_stream(h), &s);
    smoe_llama_get_stats(h, &ls);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "smoe-llama: --stats-json %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint64_t demand = s.hits + s.joins + s.misses;
    fprintf(f, "{\"slots\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"joins\": %" PRIu64
            ", \"misses\": %" PRIu64 ", \"hit_rate\": %.6f, \"bytes_read\": %" PRIu64
            ", \"prefetch_hint\": %" PRIu64 ", \"hint_cancelled\": %" PRIu64 ",\n",
            s.slots, s.hits, s.joins, s.misses, ratio(s.hits, demand), s.bytes_read,
            s.prefetch_hint, s.hint_cancelled);
    fprintf(f, " \"layers\": %" PRIu64 ", \"experts\": %" PRIu64 ", \"experts_mapped\": %"
            PRIu64 ", \"copy_ns\": %" PRIu64 ", \"map_ns\": %" PRIu64 ", \"wait_ns\": %"
            PRIu64 ", \"waves\": %" PRIu64 ",\n", ls.layers, ls.experts, ls.experts_mapped,
            ls.copy_ns, ls.map_ns, ls.wait_ns, ls.waves);
    fprintf(f, " \"lookahead\": %s, \"lookahead_hints\": %" PRIu64 ", \"lookahead_reads\": %"
            PRIu64 ", \"lookahead_skipped\": %" PRIu64 ", \"lookahead_layers\": %" PRIu64
            ", \"lookahead_demanded\": %" PRIu64 ", \"lookahead_true\": %" PRIu64
            ", \"lookahead_recall\": %.6f, \"lookahead_renormed\": %" PRIu64
            ", \"lookahead_unseen\": %" PRIu64 ", \"lookahead_ns\": %" PRIu64
            ", \"lookahead_hint_ns\": %" PRIu64 ", \"lookahead_rows\": %" PRIu64
            ", \"lookahead_runs\": %" PRIu64
            ", \"lookahead_bytes\": %" PRIu64 "}\n", ls.lookahead_bytes ? "true" : "false",
            ls.lookahead_hints, ls.lookahead_reads, ls.lookahead_skipped, ls.lookahead_layers,
            ls.lookahead_demanded, ls.lookahead_true,
            ratio(ls.lookahead_true, ls.lookahead_demanded), ls.lookahead_renormed,
            ls.lookahead_unseen, ls.lookahead_ns, ls.lookahead_hint_ns, ls.lookahead_rows,
            ls.lookahead_runs, ls.lookahead_bytes);
    if (fclose(f) != 0) {
        fprintf(stderr, "smoe-llama: --stats-json %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* OpenMP workers spin while the eval callback waits for a read; its runtime
 * reads OMP_WAIT_POLICY when it loads, so set it and start again. Stock
 * runs keep llama.cpp's default. */
static void restart_with_passive_wait(const args *a, char **argv)
{
    if (a->resident || getenv("OMP_WAIT_POLICY"))
        return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "smoe-llama: warning: cannot restart with OMP_WAIT_POLICY=passive: %s\n",
            strerror(errno));
}

/* The stream, or none for a stock run without a trace. 0, or -1 with the
 * reason printed. */
static int open_stream(const args *a, smoe_llama **h)
{
    *h = NULL;
    if (a->resident && !a->replay)
        return 0;
    smoe_llama_opts o = SMOE_LLAMA_OPTS_INIT;
    o.replay_trace = a->replay;
    if (a->resident) { /* stock llama.cpp routed by the trace: no vault */
        if (smoe_llama_open(a->model, NULL, &o, h) < 0)
            goto fail;
        return 0;
    }
    o.ring_slots = a->ring_slots;
    o.workers = a->workers;
    o.verify = a->verify ? SMOE_VERIFY_ON : SMOE_VERIFY_DEFAULT;
    o.flags = (a->keep_pages ? SMOE_LLAMA_KEEP_PAGES : 0) | (a->map ? SMOE_LLAMA_MAP : 0) |
              (a->lookahead ? SMOE_LLAMA_LOOKAHEAD : 0);
    o.log_fn = smoe_log;
    if (smoe_llama_open(a->model, a->vault, &o, h) < 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "smoe-llama: %s\n", smoe_llama_open_error());
    return -1;
}

/* The model, loaded and attached to the stream; NULL with the reason
 * printed. */
static struct llama_model *load_model(const args *a, smoe_llama *h)
{
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = a->n_gpu_layers;
    mp.use_extra_bufts = false;
    struct llama_model_tensor_buft_override cpu_moe[2] = {
        {"\\.ffn_(up|down|gate|gate_up)_exps", ggml_backend_cpu_buffer_type()}, {NULL, NULL}};
    if (a->cpu_moe)
        mp.tensor_buft_overrides = cpu_moe;
    if (a->no_mmap)
        mp.load_mode = LLAMA_LOAD_MODE_NONE;
    if (h)
        smoe_llama_model_params(h, &mp);
    struct llama_model *model = llama_model_load_from_file(a->model, mp);
    if (!model) {
        fprintf(stderr, "smoe-llama: %s: llama.cpp cannot load the model (--verbose shows "
                "why)\n", a->model);
        return NULL;
    }
    if (h && smoe_llama_attach(h, model) < 0) {
        fprintf(stderr, "smoe-llama: %s\n", smoe_llama_error(h));
        llama_model_free(model);
        return NULL;
    }
    return model;
}

static struct llama_context *make_context(const args *a, smoe_llama *h,
                                          struct llama_model *model, int n_prompt)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(a->ctx ? a->ctx : n_prompt + a->n_predict + 1);
    cp.n_batch = (uint32_t)(a->batch ? a->batch : (n_prompt > 512 ? n_prompt : 512));
    cp.n_ubatch = (uint32_t)a->ubatch;
    if (a->threads)
        cp.n_threads = cp.n_threads_batch = a->threads;
    cp.no_perf = true;
    if (h)
        smoe_llama_context_params(h, &cp);
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx)
        fprintf(stderr, "smoe-llama: cannot create the llama.cpp context\n");
    return ctx;
}

static struct llama_sampler *make_sampler(const args *a)
{
    struct llama_sampler *smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (a->temp <= 0) {
        llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    } else {
        llama_sampler_chain_add(smpl, llama_sampler_init_top_k(a->top_k));
        llama_sampler_chain_add(smpl, llama_sampler_init_top_p(a->top_p, 1));
        llama_sampler_chain_add(smpl, llama_sampler_init_temp(a->temp));
        llama_sampler_chain_add(smpl, llama_sampler_init_dist(a->seed));
    }
    return smpl;
}

/* One run's tokens and times. */
typedef struct run {
    llama_token *prompt, *gen;
    int n_prompt, n_gen;
    double t_start, t_loaded, t_first, t_gen0, t_end;
} run;

/* Decodes the prompt, then samples and prints up to n_predict tokens. 0, or
 * 1 with the reason printed. */
static int generate(const args *a, smoe_llama *h, struct llama_context *ctx,
                    struct llama_sampler *smpl, run *r)
{
    const struct llama_vocab *vocab = llama_model_get_vocab(llama_get_model(ctx));
    int rc = 0;
    r->gen = malloc(sizeof *r->gen * (size_t)(a->n_predict + 1));
    int dr = decode_prompt(ctx, r->prompt, r->n_prompt, a->logits_out,
                           llama_vocab_n_tokens(vocab), &rc);
    char piece[256];
    while (dr == 0 && rc == 0 && r->n_gen < a->n_predict) {
        llama_token tok = llama_sampler_sample(smpl, ctx, -1);
        if (r->n_gen == 0)
            r->t_first = r->t_gen0 = now_s();
        r->gen[r->n_gen++] = tok;
        int pn = llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_NONE
                     ? 0 : llama_token_to_piece(vocab, tok, piece, sizeof piece, 0, true);
        if (pn > 0)
            fwrite(piece, 1, (size_t)pn, stdout);
        if (!a->ignore_eos && llama_vocab_is_eog(vocab, tok))
            break;
        if (r->n_gen == a->n_predict)
            break;
        struct llama_batch one = llama_batch_get_one(&r->gen[r->n_gen - 1], 1);
        dr = llama_decode(ctx, one);
    }
    r->t_end = now_s();
    fputc('\n', stdout);
    if (dr != 0) {
        const char *why = h ? smoe_llama_error(h) : NULL;
        fprintf(stderr, "smoe-llama: llama_decode failed (%d)%s%s\n", dr, why ? ": " : "",
                why ? why : "");
        rc = 1;
    }
    return rc;
}

/* The token ids, the times and the streaming counters asked for. 0, or 1
 * when the JSON file could not be written. */
static int report(const args *a, smoe_llama *h, const run *r)
{
    if (a->print_ids)
        for (int i = 0; i < r->n_gen; i++)
            printf("%d\n", r->gen[i]);
    fflush(stdout);
    double decode_s = r->n_gen > 1 ? r->t_end - r->t_gen0 : 0;
    fprintf(stderr, "smoe-llama: %s: load %.3f s, prompt %d tokens, first token %.3f s after "
            "start, %d generated, decode %.2f tokens/s\n", a->resident ? "resident" : "streamed",
            r->t_loaded - r->t_start, r->n_prompt, r->t_first ? r->t_first - r->t_start : 0.0,
            r->n_gen, decode_s > 0 ? (double)(r->n_gen - 1) / decode_s : 0.0);
    if (h && !a->resident && a->stats)
        print_stats(h);
    if (h && !a->resident && a->stats_json && write_stats_json(h, a->stats_json) < 0)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    run r = {.t_start = now_s()};
    args a;
    parse(argc, argv, &a);
    verbose_log = a.verbose;
    warn_log = a.stats;
    restart_with_passive_wait(&a, argv);
    llama_log_set(log_cb, NULL);
    llama_backend_init();

    smoe_llama *h;
    if (open_stream(&a, &h) < 0)
        return 1;
    struct llama_model *model = load_model(&a, h);
    if (!model) {
        smoe_llama_close(h);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    r.n_prompt = a.prompt_tokens ? parse_tokens(a.prompt_tokens, &r.prompt, vocab)
                                 : tokenize(a.prompt, &r.prompt, vocab, a.model);
    if (r.n_prompt <= 0) {
        llama_model_free(model);
        smoe_llama_close(h);
        return 2;
    }
    struct llama_context *ctx = make_context(&a, h, model, r.n_prompt);
    if (!ctx) {
        llama_model_free(model);
        smoe_llama_close(h);
        return 1;
    }
    r.t_loaded = now_s();

    struct llama_sampler *smpl = make_sampler(&a);
    int rc = generate(&a, h, ctx, smpl, &r);
    if (report(&a, h, &r))
        rc = 1;
    llama_sampler_free(smpl);
    free(r.gen);
    free(r.prompt);
    llama_free(ctx);
    llama_model_free(model);
    smoe_llama_close(h);
    llama_backend_free();
    return rc;
}
