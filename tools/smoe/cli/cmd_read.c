/*
 * cmd_read.c - `smoe read`: stream every blob of a vault once through the
 * library (prefetch ahead, claim, optionally hash, release) and report the
 * throughput. The ring is sized to what streaming needs, a few slots per
 * worker, so it starts at once whatever the vault's size.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "args.h"
#include "tool.h"
#include "vault.h"
#include "vault_cmd.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe read VAULT [options]\n"
            "Stream every blob once through the library and report bytes, seconds and GB/s.\n\n"
            "  --workers N     I/O worker threads (default 16)\n"
            "  --slots N       ring slots (default: 3 per worker, at least 8)\n"
            "  --verify        check each blob's XXH3 as it lands (library option)\n"
            "  --no-verify     do not check (default: the library's default)\n"
            "  --hash          also hash each claimed blob in this thread\n"
            "  --buffered      buffered reads instead of direct I/O\n"
            "  --chunk BYTES   read chunk (multiple of 16 KiB; default: the library's)\n"
            "  --retries N     read a blob whose read failed again, up to N times (default 0:\n"
            "                  the first failure ends the run)\n"
            "  --replica PATH  a copy of the vault on another drive: reads are spread over\n"
            "                  the vault and its copies (repeatable; docs/replicas.md)\n"
            "  --json          print the result as JSON\n");
}

static const char cmd[] = "read";

typedef struct read_args {
    const char *path;
    uint32_t workers, slots, retries;
    uint64_t chunk;
    int verify, json, hash, buffered;
    tool_replicas rep;
} read_args;

enum { OPT_WORKERS = 1, OPT_SLOTS, OPT_RETRIES, OPT_CHUNK, OPT_REPLICA };

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
    case OPT_RETRIES:
        if (tool_parse_u32(v, 0, 1000000, &a->retries))
            return tool_error(cmd, "--retries: expected 0..1000000, got '%s'", v);
        break;
    case OPT_REPLICA:
        return tool_replica_add(&a->rep, cmd, v);
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
    const tool_opt opts[] = {
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
    int rc = tool_args_parse(&cli, argc, argv, read_opt, a);
    if (!a->slots)
        a->slots = a->workers * 3 < 8 ? 8 : a->workers * 3;
    return rc;
}

/* What a run measured. */
typedef struct read_run {
    uint32_t n;                       /* blobs */
    uint64_t payload, bad, retried;   /* bytes claimed, hash mismatches, reads retried */
    uint64_t components;              /* the claimed components' bytes */
    uint64_t open_ns, ns;
    int index;                        /* an index vault */
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
    o.workers = a->workers;
    o.ring_slots = a->slots;
    o.verify = (uint32_t)a->verify;
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
    const uint32_t window = a->slots - 1, E = v->experts;
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
    return r < 0 ? r : 0;
}

/* "replicas": [{"path", "bytes", "reads", "failed"}, ...], the vault first. */
static json_object *replicas_json(smoe_stream *s)
{
    json_object *arr = json_object_new_array();
    smoe_replica_stats r = SMOE_REPLICA_STATS_INIT;
    for (int i = 0, n = 1; i < n && (n = smoe_get_replica_stats(s, (uint32_t)i, &r)) > 0; i++) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(r.path));
        json_object_object_add(o, "bytes", json_object_new_int64((int64_t)r.bytes));
        json_object_object_add(o, "reads", json_object_new_int64((int64_t)r.reads));
        json_object_object_add(o, "failed", json_object_new_int64((int64_t)r.failed));
        json_object_array_add(arr, o);
    }
    return arr;
}

static void print_json(const read_args *a, smoe_stream *s, const read_run *run,
                       const smoe_stats *st, double sec, double gbs, uint64_t rss)
{
    json_object *j = json_object_new_object();
    json_object_object_add(j, "vault", json_object_new_string(a->path));
    json_object_object_add(j, "blobs", json_object_new_int64(run->n));
    json_object_object_add(j, "payload_bytes", json_object_new_int64((int64_t)run->payload));
    json_object_object_add(j, "bytes_read", json_object_new_int64((int64_t)st->bytes_read));
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
    json_object_object_add(j, "replicas", replicas_json(s));
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
    json_object_put(j);
}

/* One line per copy, when there are replicas. */
static void print_replicas(smoe_stream *s)
{
    smoe_replica_stats r = SMOE_REPLICA_STATS_INIT;
    int n = smoe_get_replica_stats(s, 0, &r);
    for (int i = 0; n > 1 && i < n && smoe_get_replica_stats(s, (uint32_t)i, &r) > 0; i++)
        printf("copy %d %s: %llu reads, %.1f MiB, %llu failed, set aside %llu times%s\n", i,
               r.path, (unsigned long long)r.reads, (double)r.bytes / 1048576.0,
               (unsigned long long)r.failed, (unsigned long long)r.set_aside,
               r.in_use ? "" : " (aside now)");
}

static void print_text(const read_args *a, smoe_stream *s, const read_run *run,
                       const smoe_stats *st, double sec, double gbs, uint64_t rss)
{
    printf("%s: %u blobs, %.1f MiB read in %.3f s: %.3f GB/s (%s I/O, %u workers, "
           "%llu KiB chunks, verify %s)\n",
           a->path, run->n, (double)st->bytes_read / 1048576.0, sec, gbs,
           st->io_mode == SMOE_IO_DIRECT ? "direct" : "buffered", a->workers,
           (unsigned long long)st->chunk_bytes / 1024, st->verify ? "on" : "off");
    printf("ring: %llu slots x %llu bytes = %.1f MiB; peak RSS %.1f MiB; open %.3f s\n",
           (unsigned long long)st->slots, (unsigned long long)st->slot_bytes,
           (double)st->ring_bytes / 1048576.0, (double)rss / 1048576.0,
           (double)run->open_ns / 1e9);
    if (run->index)
        printf("index vault: %.1f MiB of components; %.1f MiB more read for the read "
               "alignment (%.2f%%)\n", (double)run->components / 1048576.0,
               (double)(st->bytes_read - run->components) / 1048576.0,
               run->components ? 100.0 * (double)(st->bytes_read - run->components) /
                                     (double)run->components : 0.0);
    if (a->hash)
        printf("hash mismatches: %llu\n", (unsigned long long)run->bad);
    if (st->reads_failed || run->retried)
        printf("reads failed: %llu; blobs read again: %llu\n",
               (unsigned long long)st->reads_failed, (unsigned long long)run->retried);
    print_replicas(s);
}

static void report(const read_args *a, smoe_stream *s, const read_run *run)
{
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(s, &st);
    double sec = (double)run->ns / 1e9;
    double gbs = sec > 0 ? (double)st.bytes_read / sec / 1e9 : 0;
    uint64_t rss = tool_peak_rss();
    if (a->json)
        print_json(a, s, run, &st, sec, gbs, rss);
    else
        print_text(a, s, run, &st, sec, gbs, rss);
}

int cmd_read(int argc, char **argv)
{
    read_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    read_run run;
    memset(&run, 0, sizeof run);
    smoe_stream *s = open_stream(&a, &run);
    if (!s)
        return tool_error(cmd, "%s", smoe_last_error());
    /* The library's own vault reader gives the order of blobs on disk. */
    smoe__vault v;
    if (smoe__vault_load(&v, a.path, &smoe__io_os) < 0) {
        smoe_close(s);
        return tool_error(cmd, "%s", smoe_last_error());
    }
    run.index = v.version == SMOE__VAULT_VERSION_INDEX;
    uint32_t *order = vault_keys_by_offset(&v, &run.n);
    if (!order)
        rc = tool_error(cmd, "out of memory");
    else if (stream_all(&a, s, &v, order, &run) < 0)
        rc = tool_error(cmd, "%s", smoe_last_error());
    else {
        report(&a, s, &run);
        rc = run.bad ? 1 : 0;
    }
    free(order);
    smoe__vault_free(&v);
    smoe_close(s);
    return rc;
}
