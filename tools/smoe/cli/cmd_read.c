/*
 * cmd_read.c - `smoe read`: stream every blob of a vault once through the
 * library (prefetch ahead, claim, optionally hash, release) and report the
 * throughput. The ring is sized to what streaming needs, a few slots per
 * worker, so it starts at once whatever the vault's size.
 */
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "smoe/smoe.h"
#include "tool.h"
#include "vault.h"

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
            "  --json          print the result as JSON\n");
}

struct blob_ref {
    uint64_t offset;
    uint32_t key;
};

static int cmp_offset(const void *a, const void *b)
{
    uint64_t x = ((const struct blob_ref *)a)->offset;
    uint64_t y = ((const struct blob_ref *)b)->offset;
    return x < y ? -1 : x > y;
}

int cmd_read(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"workers", required_argument, NULL, 'w'}, {"slots", required_argument, NULL, 's'},
        {"verify", no_argument, NULL, 'v'},        {"no-verify", no_argument, NULL, 'n'},
        {"hash", no_argument, NULL, 'H'},          {"buffered", no_argument, NULL, 'b'},
        {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
        {"chunk", required_argument, NULL, 'c'},
        {"retries", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    uint32_t workers = 16, slots = 0;
    uint64_t chunk = 0;
    uint32_t retries = 0;
    unsigned verify = SMOE_VERIFY_DEFAULT;
    int json = 0, hash = 0, buffered = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            if (tool_parse_u32(optarg, 1, 256, &workers))
                return tool_error("read", "--workers: expected 1..256, got '%s'", optarg);
            break;
        case 's':
            if (tool_parse_u32(optarg, 2, 1u << 20, &slots))
                return tool_error("read", "--slots: expected 2..1048576, got '%s'", optarg);
            break;
        case 'r':
            if (tool_parse_u32(optarg, 0, 1000000, &retries))
                return tool_error("read", "--retries: expected 0..1000000, got '%s'", optarg);
            break;
        case 'c':
            if (tool_parse_size(optarg, &chunk) || chunk == 0 || chunk % 16384 ||
                chunk > 0xFFFFC000ull)
                return tool_error("read", "--chunk: expected a multiple of 16 KiB, got '%s'",
                                  optarg);
            break;
        case 'v': verify = SMOE_VERIFY_ON; break;
        case 'n': verify = SMOE_VERIFY_OFF; break;
        case 'H': hash = 1; break;
        case 'b': buffered = 1; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    if (!slots)
        slots = workers * 3 < 8 ? 8 : workers * 3;

    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = workers;
    o.ring_slots = slots;
    o.verify = verify;
    o.chunk_bytes = (uint32_t)chunk;
    o.flags = SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | (buffered ? SMOE_OPEN_BUFFERED : 0);
    smoe_stream *s;
    uint64_t t_open = tool_now_ns();
    int r = smoe_open(path, &o, &s);
    if (r < 0)
        return tool_error("read", "%s", smoe_last_error());
    t_open = tool_now_ns() - t_open;

    /* The library's own vault reader gives the order of blobs on disk. */
    smoe__vault v;
    if ((r = smoe__vault_load(&v, path, &smoe__io_os)) < 0) {
        smoe_close(s);
        return tool_error("read", "%s", smoe_last_error());
    }
    /* Present (layer, expert) pairs in file-offset order. */
    uint32_t n = 0;
    struct blob_ref *refs = malloc(sizeof *refs * ((size_t)v.layers * v.experts));
    uint32_t *order = malloc(sizeof *order * ((size_t)v.layers * v.experts));
    if (!refs || !order) {
        free(refs);
        free(order);
        smoe__vault_free(&v);
        smoe_close(s);
        return tool_error("read", "out of memory");
    }
    for (uint32_t k = 0; k < v.layers * v.experts; k++)
        if (v.index[k].present)
            refs[n++] = (struct blob_ref){v.index[k].offset, k};
    qsort(refs, n, sizeof *refs, cmp_offset);
    for (uint32_t i = 0; i < n; i++)
        order[i] = refs[i].key;
    free(refs);

    uint64_t payload = 0, bad = 0, retried = 0;
    uint64_t t0 = tool_now_ns();
    const uint32_t window = slots - 1; /* prefetched ahead: one slot stays free */
    uint32_t ahead = 0;
    for (uint32_t i = 0; i < n && r >= 0; i++) {
        for (; ahead < n && ahead < i + window; ahead++) {
            r = smoe_prefetch(s, order[ahead] / v.experts, order[ahead] % v.experts, 0);
            if (r < 0)
                break;
        }
        if (r < 0)
            break;
        smoe_blob b;
        const uint32_t l = order[i] / v.experts, e = order[i] % v.experts;
        r = smoe_claim_wait(s, l, e, UINT64_MAX, &b);
        /* A failed read stays failed until a prefetch retries it. */
        for (uint32_t k = 0; k < retries && (r == SMOE_EIO || r == SMOE_ECHECKSUM ||
                                             r == SMOE_ETRUNC); k++) {
            retried++;
            if ((r = smoe_prefetch(s, l, e, 0)) >= 0)
                r = smoe_claim_wait(s, l, e, UINT64_MAX, &b);
        }
        if (r < 0)
            break;
        payload += b.size;
        if (hash && smoe__hash(b.data, b.size) != v.index[order[i]].hash)
            bad++;
        r = smoe_release(s, &b);
    }
    uint64_t ns = tool_now_ns() - t0;
    if (r < 0) {
        tool_error("read", "%s", smoe_last_error());
        free(order);
        smoe__vault_free(&v);
        smoe_close(s);
        return 1;
    }
    smoe_stats st = SMOE_STATS_INIT;
    smoe_get_stats(s, &st);
    double sec = (double)ns / 1e9;
    double gbs = sec > 0 ? (double)st.bytes_read / sec / 1e9 : 0;
    uint64_t rss = tool_peak_rss();
    if (json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "vault", json_object_new_string(path));
        json_object_object_add(j, "blobs", json_object_new_int64(n));
        json_object_object_add(j, "payload_bytes", json_object_new_int64((int64_t)payload));
        json_object_object_add(j, "bytes_read", json_object_new_int64((int64_t)st.bytes_read));
        json_object_object_add(j, "seconds", json_object_new_double(sec));
        json_object_object_add(j, "gb_per_s", json_object_new_double(gbs));
        json_object_object_add(j, "open_seconds", json_object_new_double((double)t_open / 1e9));
        json_object_object_add(j, "workers", json_object_new_int64(workers));
        json_object_object_add(j, "slots", json_object_new_int64((int64_t)st.slots));
        json_object_object_add(j, "ring_bytes", json_object_new_int64((int64_t)st.ring_bytes));
        json_object_object_add(j, "peak_rss_bytes", json_object_new_int64((int64_t)rss));
        json_object_object_add(j, "io_mode", json_object_new_string(
                                   st.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered"));
        json_object_object_add(j, "verify", json_object_new_boolean((int)st.verify));
        json_object_object_add(j, "chunk_bytes", json_object_new_int64((int64_t)st.chunk_bytes));
        json_object_object_add(j, "hash_mismatches", json_object_new_int64((int64_t)bad));
        json_object_object_add(j, "reads_failed", json_object_new_int64((int64_t)st.reads_failed));
        json_object_object_add(j, "retries", json_object_new_int64((int64_t)retried));
        printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        json_object_put(j);
    } else {
        printf("%s: %u blobs, %.1f MiB read in %.3f s: %.3f GB/s (%s I/O, %u workers, "
               "%llu KiB chunks, verify %s)\n",
               path, n, (double)st.bytes_read / 1048576.0, sec, gbs,
               st.io_mode == SMOE_IO_DIRECT ? "direct" : "buffered", workers,
               (unsigned long long)st.chunk_bytes / 1024, st.verify ? "on" : "off");
        printf("ring: %llu slots x %llu bytes = %.1f MiB; peak RSS %.1f MiB; open %.3f s\n",
               (unsigned long long)st.slots, (unsigned long long)st.slot_bytes,
               (double)st.ring_bytes / 1048576.0, (double)rss / 1048576.0,
               (double)t_open / 1e9);
        if (hash)
            printf("hash mismatches: %llu\n", (unsigned long long)bad);
        if (st.reads_failed || retried)
            printf("reads failed: %llu; blobs read again: %llu\n",
                   (unsigned long long)st.reads_failed, (unsigned long long)retried);
    }
    free(order);
    smoe__vault_free(&v);
    smoe_close(s);
    return bad ? 1 : 0;
}
