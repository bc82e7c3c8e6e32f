/*
 * cmd_read.c - `smoe read`: a drive test through the library. Reads every
 * blob of a vault once, two ways, each on a fresh stream:
 *  - shares: smoe_warmup over a ring that holds the whole vault (as much of
 *    it as memory allows: the ring's automatic size), so each
 *    worker reads its own contiguous share of the file front to back (the
 *    drive sees one sequential stream per worker, as fio psync with one job
 *    per worker does); timed from smoe_warmup to smoe_warmup_wait;
 *  - blobs: prefetch ahead, claim, release in file order with a ring of a
 *    few slots per worker (what decode sees: one stream at the workers'
 *    depth).
 * Then every blob is claimed (and, with --hash, hashed in this thread) to
 * check it, untimed after a shares run.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "args.h"
#include "os.h"
#include "tool.h"
#include "smoe_tier.h"
#include "vault_cmd.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe read VAULT [options]\n"
            "Read every blob once through the library and report bytes, seconds and GB/s.\n\n"
            "  --order WHICH   shares: smoe_warmup, one contiguous share of the file per\n"
            "                  worker (the drive's speed); blobs: prefetch, claim, release\n"
            "                  in file order (what decode sees); both (default): shares,\n"
            "                  then blobs\n"
            "  --workers N     I/O worker threads (default 16)\n"
            "  --slots N       ring slots (blobs: default 3 per worker, at least 8;\n"
            "                  shares: default automatic, one per blob when memory\n"
            "                  holds the vault; a smaller ring reads that many blobs)\n"
            "  --verify        check each blob's XXH3 as it lands (library option)\n"
            "  --no-verify     do not check (default: the library's default)\n"
            "  --verify-both   each order twice: verification off, then on (shares\n"
            "                  verified: one worker more than --workers, to hash)\n"
            "  --hash          also hash each claimed blob in this thread\n"
            "  --buffered      buffered reads instead of direct I/O\n"
            "  --chunk BYTES   read chunk (multiple of 16 KiB; default: the library's)\n"
            "  --retries N     read a blob whose read failed again, up to N times (default 0:\n"
            "                  the first failure ends the run)\n"
            "  --replica PATH  a copy of the vault on another drive: reads are spread over\n"
            "                  the vault and its copies (repeatable; docs/replicas.md)\n"
            "  --json          print the result as JSON (the first run's fields, and\n"
            "                  \"runs\": every run)\n");
}

static const char cmd[] = "read";

enum { ORDER_SHARES = 1, ORDER_BLOBS = 2, ORDER_BOTH = 3 };

typedef struct read_args {
    const char *path;
    uint32_t workers, slots, retries;
    uint64_t chunk;
    int verify, json, hash, buffered, order, verify_both;
    tool_replicas rep;
} read_args;

enum { OPT_WORKERS = 1, OPT_SLOTS, OPT_RETRIES, OPT_CHUNK, OPT_ORDER, OPT_REPLICA };

static int read_opt(void *ctx, const tool_opt *o, const char *v)
{
    read_args *a = ctx;
    switch (o->id) {
    case OPT_WORKERS:
        if (tool_parse_u32(v, 1, 256, &a->workers))
            return tool_error(cmd, "--workers: expected 1..256, got '%s'", v);
        break;
    case OPT_SLOTS:
        if (tool_parse_u32(v, 2, 1u << 20, &a->slots))
            return tool_error(cmd, "--slots: expected 2..1048576, got '%s'", v);
        break;
    case OPT_ORDER:
        a->order = !strcmp(v, "shares") ? ORDER_SHARES : !strcmp(v, "blobs") ? ORDER_BLOBS
                   : !strcmp(v, "both") ? ORDER_BOTH : 0;
        if (!a->order)
            return tool_error(cmd, "--order: expected shares, blobs or both, got '%s'", v);
        break;
    case OPT_REPLICA:
        return tool_replica_add(&a->rep, cmd, v);
    case OPT_RETRIES:
        if (tool_parse_u32(v, 0, 1000000, &a->retries))
            return tool_error(cmd, "--retries: expected 0..1000000, got '%s'", v);
        break;
    default:
        if (tool_parse_size(v, &a->chunk) || a->chunk == 0 || a->chunk % 16384 ||
            a->chunk > 0xFFFFC000ull)
            return tool_error(cmd, "--chunk: expected a multiple of 16 KiB, got '%s'", v);
        break;
    }
    return -1;
}

static int parse_args(int argc, char **argv, read_args *a)
{
    memset(a, 0, sizeof *a);
    a->workers = 16;
    a->verify = SMOE_VERIFY_DEFAULT;
    a->order = ORDER_BOTH;
    const tool_opt opts[] = {
        TOOL_VALUE("--order", OPT_ORDER),
        TOOL_FLAG("--verify-both", &a->verify_both, 1),
        TOOL_VALUE("--workers", OPT_WORKERS),
        TOOL_VALUE("--slots", OPT_SLOTS),
        TOOL_VALUE("--retries", OPT_RETRIES),
        TOOL_VALUE("--chunk", OPT_CHUNK),
        TOOL_VALUE("--replica", OPT_REPLICA),
        TOOL_FLAG("--verify", &a->verify, SMOE_VERIFY_ON),
        TOOL_FLAG("--no-verify", &a->verify, SMOE_VERIFY_OFF),
        TOOL_FLAG("--hash", &a->hash, 1),
        TOOL_FLAG("--buffered", &a->buffered, 1),
        TOOL_FLAG("--json", &a->json, 1),
        TOOL_OPTS_END,
    };
    const tool_cli cli = {
        .cmd = cmd, .usage = usage, .opts = opts, .operand = &a->path,
        .min_operands = 1, .max_operands = 1, .extra = "one vault only ('%s' and '%s')",
        .missing = "which vault?", .usage_on_error = 1,
    };
    return tool_args_parse(&cli, argc, argv, read_opt, a);
}

/* What a run measured. */
typedef struct read_run {
    int order;                        /* ORDER_SHARES or ORDER_BLOBS */
    uint32_t verify, slots;           /* SMOE_VERIFY_*, ring slots asked for */
    uint32_t n;                       /* blobs read */
    uint64_t payload, bad, retried;   /* bytes claimed, hash mismatches, reads retried */
    uint64_t components;              /* the claimed components' bytes */
    uint64_t bytes;                   /* bytes read in the timed part */
    uint64_t open_ns, ns;
    int index;                        /* an index vault */
    smoe_stats st;                    /* at the end of the run */
    uint32_t copies;                  /* the vault and its replicas */
    smoe_replica_stats copy[1 + TOOL_MAX_REPLICAS]; /* path: NULL after close */
} read_run;

/* The library's warnings (a source file modified since indexing, a small
 * ring) on stderr. */
static void log_warning(void *user, int level, const char *msg)
{
    (void)user;
    if (level <= SMOE_LOG_WARN)
        fprintf(stderr, "smoe read: %s\n", msg);
}

static smoe_stream *open_stream(const read_args *a, read_run *run)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    /* Shares verified: one worker more than streams, free to take the
     * hashing of each landed blob (a verify token) while the streams read
     * on (docs/api.md, "Warm-up"). */
    o.workers = a->workers + (run->order == ORDER_SHARES && run->verify == SMOE_VERIFY_ON);
    o.ring_slots = run->slots;
    o.verify = run->verify;
    o.chunk_bytes = (uint32_t)a->chunk;
    o.log_fn = log_warning;
    o.replicas = a->rep.path;
    o.n_replicas = a->rep.n;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_EXTENTS |
              (a->buffered ? SMOE_OPEN_BUFFERED : 0);
    smoe_stream *s = NULL;
    uint64_t t0 = tool_now_ns();
    if (smoe_open(a->path, &o, &s) < 0)
        return NULL;
    run->open_ns = tool_now_ns() - t0;
    return s;
}

/* Claim (l, e), prefetching it again up to `retries` times after a failed
 * read (a failed read stays failed until a prefetch retries it). */
static int claim(smoe_stream *s, uint32_t l, uint32_t e, uint32_t retries, read_run *run,
                 smoe_blob *b)
{
    int r = smoe_claim_wait(s, l, e, UINT64_MAX, b);
    for (uint32_t k = 0; k < retries && (r == SMOE_EIO || r == SMOE_ECHECKSUM ||
                                         r == SMOE_ETRUNC); k++) {
        run->retried++;
        if ((r = smoe_prefetch(s, l, e, 0)) >= 0)
            r = smoe_claim_wait(s, l, e, UINT64_MAX, b);
    }
    return r;
}

/* Every blob once, in file order, slots - 1 prefetched ahead (one slot
 * stays free). 0, or the library's error. */
static int stream_all(const read_args *a, smoe_stream *s, const smoe__vault *v,
                      const uint32_t *order, read_run *run)
{
    const uint32_t window = run->slots - 1, E = v->experts;
    uint32_t ahead = 0;
    int r = 0;
    uint64_t t0 = tool_now_ns();
    for (uint32_t i = 0; i < run->n && r >= 0; i++) {
        for (; ahead < run->n && ahead < i + window && r >= 0; ahead++)
            r = smoe_prefetch(s, order[ahead] / E, order[ahead] % E, 0);
        smoe_blob b;
        if (r < 0 || (r = claim(s, order[i] / E, order[i] % E, a->retries, run, &b)) < 0)
            break;
        run->payload += b.size;
        run->components += v->layouts[b.layout].min_bytes;
        if (a->hash && vault_blob_hash(s, v, &b) != v->index[order[i]].hash)
            run->bad++;
        r = smoe_release(s, &b);
    }
    run->ns = tool_now_ns() - t0;
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(s, &st);
    run->bytes = st.bytes_read;
    return r < 0 ? r : 0;
}

/* Check one blob a warm-up loaded: claim it (again, up to `retries`
 * times, after a failed read), hash it if asked, release it. 0: checked,
 * 1: not resident (the ring held fewer), or the library's error. */
static int check_blob(const read_args *a, smoe_stream *s, const smoe__vault *v, uint32_t key,
                      read_run *run)
{
    const uint32_t E = v->experts;
    smoe_blob b;
    int r = smoe_claim(s, key / E, key % E, &b);
    if (r == SMOE_ENOTRESIDENT)
        return 1;
    if (r == SMOE_EIO || r == SMOE_ECHECKSUM || r == SMOE_ETRUNC)
        r = a->retries ? claim(s, key / E, key % E, a->retries, run, &b) : r;
    if (r < 0)
        return r;
    run->n++;
    run->payload += b.size;
    run->components += v->layouts[b.layout].min_bytes;
    if (a->hash && vault_blob_hash(s, v, &b) != v->index[key].hash)
        run->bad++;
    return smoe_release(s, &b);
}

/* The whole vault (or as much as the ring holds) by smoe_warmup, timed;
 * then every loaded blob checked, untimed. 0, or the library's error. */
static int shares_all(const read_args *a, smoe_stream *s, const smoe__vault *v,
                      const uint32_t *order, uint32_t nblobs, read_run *run)
{
    smoe_warmup_opts wo = SMOE_WARMUP_OPTS_INIT;
    wo.workers = a->workers;
    uint64_t t0 = tool_now_ns();
    int r = smoe_warmup(s, &wo);
    if (r >= 0)
        r = smoe_warmup_wait(s, UINT64_MAX);
    run->ns = tool_now_ns() - t0;
    if (r < 0)
        return r;
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(s, &st);
    run->bytes = st.bytes_read;
    for (uint32_t i = 0; i < nblobs && r >= 0; i++)
        r = check_blob(a, s, v, order[i], run);
    return r < 0 ? r : 0;
}

static const char *order_name(int order)
{
    return order == ORDER_SHARES ? "shares" : "blobs";
}

/* Copy i's path: the vault, then the --replica paths in order. */
static const char *copy_path(const read_args *a, uint32_t i)
{
    return i == 0 ? a->path : a->rep.path[i - 1];
}

/* "replicas": [{"path", "bytes", "reads", "failed"}, ...], the vault first. */
static json_object *replicas_json(const read_args *a, const read_run *run)
{
    json_object *arr = json_object_new_array();
    for (uint32_t i = 0; i < run->copies; i++) {
        const smoe_replica_stats *r = &run->copy[i];
        json_object *o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(copy_path(a, i)));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t)r->bytes));
        json_object_object_add(o, "reads", json_object_new_int64((int64_t)r->reads));
        json_object_object_add(o, "failed", json_object_new_int64((int64_t)r->failed));
        json_object_array_add(arr, o);
    }
    return arr;
}

static json_object *run_json(const read_args *a, const read_run *run, double sec, double gbs,
                             uint64_t rss)
{
    const smoe_stats *st = &run->st;
    json_object *j = json_object_new_object();
    json_object_object_add(j, "vault", json_object_new_string(a->path));
    json_object_object_add(j, "order", json_object_new_string(order_name(run->order)));
    json_object_object_add(j, "blobs", json_object_new_int64(run->n));
    json_object_object_add(j, "payload_bytes", json_object_new_int64((int64_t)run->payload));
    json_object_object_add(j, "bytes_read", json_object_new_int64((int64_t)run->bytes));
    json_object_object_add(j, "component_bytes", json_object_new_int64((int64_t)run->components));
    json_object_object_add(j, "index_vault", json_object_new_boolean(run->index));
    json_object_object_add(j, "seconds", json_object_new_double(sec));
    json_object_object_add(j, "gb_per_s", json_object_new_double(gbs));
    json_object_object_add(j, "open_seconds", json_object_new_double((double)run->open_ns / 1e9));
    json_object_object_add(j, "workers", json_object_new_int64(a->workers));
    json_object_object_add(j, "slots", json_object_new_int64((int64_t)st->slots));
    json_object_object_add(j, "ring_bytes", json_object_new_int64((int64_t)st->ring_bytes));
    json_object_object_add(j, "peak_rss_bytes", json_object_new_int64((int64_t)rss));
    json_object_object_add(j, "io_mode", json_object_new_string(
                               st->io_mode == SMOE_IO_DIRECT ? "direct" : "buffered"));
    json_object_object_add(j, "verify", json_object_new_boolean((int)st->verify));
    json_object_object_add(j, "chunk_bytes", json_object_new_int64((int64_t)st->chunk_bytes));
    json_object_object_add(j, "hash_mismatches", json_object_new_int64((int64_t)run->bad));
    json_object_object_add(j, "reads_failed", json_object_new_int64((int64_t)st->reads_failed));
    json_object_object_add(j, "retries", json_object_new_int64((int64_t)run->retried));
    json_object_object_add(j, "replicas", replicas_json(a, run));
    return j;
}

static void print_text(const read_args *a, const read_run *run, double sec, double gbs,
                       uint64_t rss)
{
    const smoe_stats *st = &run->st;
    printf("%s: %s: %u blobs, %.1f MiB read in %.3f s: %.3f GB/s (%s I/O, %u workers, "
           "%llu KiB chunks, verify %s%s)\n",
           a->path, run->order == ORDER_SHARES ? "shares (smoe_warmup)" : "blob order",
           run->n, (double)run->bytes / 1048576.0, sec, gbs,
           st->io_mode == SMOE_IO_DIRECT ? "direct" : "buffered", a->workers,
           (unsigned long long)st->chunk_bytes / 1024, st->verify ? "on" : "off",
           st->workers > a->workers ? ", one more worker hashing" : "");
    printf("  ring: %llu slots x %llu bytes = %.1f MiB; peak RSS %.1f MiB; open %.3f s\n",
           (unsigned long long)st->slots, (unsigned long long)st->slot_bytes,
           (double)st->ring_bytes / 1048576.0, (double)rss / 1048576.0,
           (double)run->open_ns / 1e9);
    if (run->index)
        printf("  index vault: %.1f MiB of components; %.1f MiB more read for the read "
               "alignment (%.2f%%)\n", (double)run->components / 1048576.0,
               (double)(st->bytes_read - run->components) / 1048576.0,
               run->components ? 100.0 * (double)(st->bytes_read - run->components) /
                                     (double)run->components : 0.0);
    if (a->hash)
        printf("  hash mismatches: %llu\n", (unsigned long long)run->bad);
    if (st->reads_failed || run->retried)
        printf("  reads failed: %llu; blobs read again: %llu\n",
               (unsigned long long)st->reads_failed, (unsigned long long)run->retried);
    for (uint32_t i = 0; run->copies > 1 && i < run->copies; i++) {
        const smoe_replica_stats *r = &run->copy[i];
        printf("  copy %u %s: %llu reads, %.1f MiB, %llu failed, set aside %llu times%s\n", i,
               copy_path(a, i), (unsigned long long)r->reads, (double)r->bytes / 1048576.0,
               (unsigned long long)r->failed, (unsigned long long)r->set_aside,
               r->in_use ? "" : " (aside now)");
    }
}

/* One run on a fresh stream: 0, or the exit status of a failure. */
static int one_run(const read_args *a, const smoe__vault *v, const uint32_t *order,
                   uint32_t nblobs, read_run *run)
{
    smoe_stream *s = open_stream(a, run);
    if (!s)
        return tool_error(cmd, "%s", smoe_last_error());
    run->index = v->version == SMOE__VAULT_VERSION_INDEX;
    int r;
    if (run->order == ORDER_SHARES) {
        r = shares_all(a, s, v, order, nblobs, run);
    } else {
        run->n = nblobs;
        r = stream_all(a, s, v, order, run);
    }
    int rc = r < 0 ? tool_error(cmd, "%s", smoe_last_error()) : 0;
    run->st = (smoe_stats)SMOE_STATS_INIT;
    smoe_get_stats(s, &run->st);
    for (uint32_t i = 0, n = 1; i < n && i <= TOOL_MAX_REPLICAS; i++) {
        run->copy[i] = (smoe_replica_stats)SMOE_REPLICA_STATS_INIT;
        int k = smoe_get_replica_stats(s, i, &run->copy[i]);
        if (k <= 0)
            break;
        n = (uint32_t)k;
        run->copy[i].path = NULL; /* the stream's, gone at close */
        run->copies = i + 1;
    }
    smoe_close(s);
    return rc;
}

/* The runs --order and --verify-both ask for, each reported. */
static int all_runs(const read_args *a, const smoe__vault *v, const uint32_t *order,
                    uint32_t nblobs)
{
    json_object *top = NULL, *runs = json_object_new_array();
    int rc = 0;
    for (int o = ORDER_SHARES; o <= ORDER_BLOBS && rc == 0; o++) {
        if (!(a->order & o))
            continue;
        for (int k = 0; k < (a->verify_both ? 2 : 1) && rc == 0; k++) {
            read_run run;
            memset(&run, 0, sizeof run);
            run.order = o;
            run.verify = a->verify_both ? (k ? SMOE_VERIFY_ON : SMOE_VERIFY_OFF)
                                        : (uint32_t)a->verify;
            /* shares: automatic sizing, which stops at one slot per blob
             * (docs/budget.md): the whole vault when memory holds it */
            run.slots = a->slots ? a->slots : o == ORDER_SHARES ? 0
                        : a->workers * 3 < 8 ? 8 : a->workers * 3;
            if ((rc = one_run(a, v, order, nblobs, &run)) != 0)
                break;
            double sec = (double)run.ns / 1e9;
            double gbs = sec > 0 ? (double)run.bytes / sec / 1e9 : 0;
            uint64_t rss = tool_os_peak_rss();
            if (a->json) {
                json_object *j = run_json(a, &run, sec, gbs, rss);
                json_object_array_add(runs, j);
                if (!top)
                    top = json_object_get(j);
            } else {
                print_text(a, &run, sec, gbs, rss);
            }
            rc = run.bad ? 1 : 0;
        }
    }
    if (top) {
        json_object *copy = NULL;
        json_object_deep_copy(top, &copy, NULL);
        json_object_object_add(copy, "runs", runs);
        printf("%s\n", json_object_to_json_string_ext(copy, JSON_C_TO_STRING_PRETTY));
        json_object_put(copy);
        json_object_put(top);
    } else {
        json_object_put(runs);
    }
    return rc;
}

int cmd_read(int argc, char **argv)
{
    read_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    /* The library's own vault reader gives the order of blobs on disk. */
    smoe__vault v;
    if (smoe__vault_load(&v, a.path, &smoe__io_os) < 0)
        return tool_error(cmd, "%s", smoe_last_error());
    uint32_t n = 0;
    uint32_t *order = vault_keys_by_offset(&v, &n);
    if (!order)
        rc = tool_error(cmd, "out of memory");
    else
        rc = all_runs(&a, &v, order, n);
    free(order);
    smoe__vault_free(&v);
    return rc;
}
