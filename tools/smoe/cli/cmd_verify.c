/*
 * cmd_verify.c - `smoe verify`: validate a vault's header and tables, then
 * read every blob (in file order, buffered, with a sequential-access hint)
 * and check its XXH3 checksum and that its padding is zero; then the same
 * for the scout file beside it, when there is one (docs/scout-format.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "smoe/smoe.h"
#include "pack.h"
#include "tool.h"
#include "vault.h"

static const char cmd[] = "verify";

#define CHUNK (8u << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe verify VAULT [--scout FILE | --no-scout]\n"
            "\n"
            "Validate VAULT's header and tables, then read every blob and check its\n"
            "checksum and zero padding. Each bad blob is reported on stderr as\n"
            "'layer L expert E: ...'; the exit status is 1 if any is bad. Then check\n"
            "the scout file's index and every tensor's checksum.\n"
            "\n"
            "  --scout FILE   the scout file (default: the one the vault's metadata\n"
            "                 names, or NAME.scout, when it exists beside the vault)\n"
            "  --no-scout     do not look for a scout file\n"
            "  --help         this text\n");
}

typedef struct item {
    uint64_t offset;
    uint32_t layer, expert;
} item;

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Read n bytes at off; 0, or an errno value (EIO for a short file). */
static int read_full(int fd, unsigned char *buf, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, buf, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            return EIO;
        buf += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Check one blob; prints its problem and returns 1 if it is bad. */
static int check_blob(const char *path, int fd, const smoe__vault_entry *e, const item *it,
                      unsigned char *buf, XXH3_state_t *st, uint64_t *bytes)
{
    XXH3_64bits_reset(st);
    uint64_t nonzero = UINT64_MAX;
    for (uint64_t done = 0; done < e->padded;) {
        size_t n = e->padded - done < CHUNK ? (size_t)(e->padded - done) : CHUNK;
        int err = read_full(fd, buf, n, e->offset + done);
        if (err) {
            fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
                    ": reading %zu bytes at offset %" PRIu64 " failed: %s\n", path,
                    it->layer, it->expert, n, e->offset + done, strerror(err));
            return 1;
        }
        *bytes += n;
        size_t payload = done < e->size ? (size_t)(e->size - done < n ? e->size - done : n) : 0;
        XXH3_64bits_update(st, buf, payload);
        for (size_t i = payload; i < n && nonzero == UINT64_MAX; i++)
            if (buf[i])
                nonzero = done + i;
        done += n;
    }
    uint64_t h = XXH3_64bits_digest(st);
    int bad = 0;
    if (h != e->hash) {
        fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
                ": checksum mismatch: stored %016" PRIx64 ", computed %016" PRIx64
                " over %" PRIu64 " bytes at offset %" PRIu64 "\n", path, it->layer,
                it->expert, e->hash, h, e->size, e->offset);
        bad = 1;
    }
    if (nonzero != UINT64_MAX) {
        fprintf(stderr, "smoe verify: %s: layer %" PRIu32 " expert %" PRIu32
                ": padding byte %" PRIu64 " of the blob (file offset %" PRIu64
                ") is not zero\n", path, it->layer, it->expert, nonzero,
                e->offset + nonzero);
        bad = 1;
    }
    return bad;
}

int cmd_verify(int argc, char **argv)
{
    const char *path = NULL, *scout_arg = NULL;
    int no_scout = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--no-scout")) {
            no_scout = 1;
        } else if (!strcmp(argv[i], "--scout")) {
            if (i + 1 == argc) {
                tool_error(cmd, "--scout needs a file");
                return 2;
            }
            scout_arg = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            tool_error(cmd, "unknown option '%s'", argv[i]);
            fprintf(stderr, "run 'smoe verify --help' for usage\n");
            return 2;
        } else if (path) {
            tool_error(cmd, "only one vault, please ('%s' and '%s')", path, argv[i]);
            fprintf(stderr, "run 'smoe verify --help' for usage\n");
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        tool_error(cmd, "which vault?");
        fprintf(stderr, "run 'smoe verify --help' for usage\n");
        return 2;
    }
    uint64_t t0 = tool_now_ns();
    smoe__vault v;
    int rc = smoe__vault_load(&v, path, smoe__io_get());
    if (rc < 0)
        return tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(rc));

    item *items = malloc((size_t)v.entries * sizeof *items);
    unsigned char *buf = malloc(CHUNK);
    XXH3_state_t *st = XXH3_createState();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (!items || !buf || !st || fd < 0) {
        rc = fd < 0 ? tool_error(cmd, "%s: %s", path, strerror(errno))
                    : tool_error(cmd, "out of memory");
        goto out;
    }
#if defined(POSIX_FADV_SEQUENTIAL)
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    uint32_t n = 0;
    for (uint32_t l = 0; l < v.layers; l++)
        for (uint32_t e = 0; e < v.experts; e++) {
            const smoe__vault_entry *en = smoe__vault_entry_of(&v, l, e);
            if (en)
                items[n++] = (item){en->offset, l, e};
        }
    qsort(items, n, sizeof *items, cmp_item);

    int tty = isatty(STDERR_FILENO);
    uint64_t bytes = 0, bad = 0, last = tool_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        const smoe__vault_entry *en = smoe__vault_entry_of(&v, items[i].layer, items[i].expert);
        bad += (uint64_t)check_blob(path, fd, en, &items[i], buf, st, &bytes);
        uint64_t now = tool_now_ns();
        if (tty && (now - last > 200000000ull || i + 1 == n)) {
            fprintf(stderr, "\rsmoe verify: %" PRIu32 "/%" PRIu32 " blobs, %.1f MiB", i + 1, n,
                    (double)bytes / (1 << 20));
            last = now;
            if (i + 1 == n)
                fputc('\n', stderr);
        }
    }
    double secs = (double)(tool_now_ns() - t0) / 1e9;
    printf("%s: %" PRIu32 " blobs, %" PRIu64 " bytes read in %.2f s (%.1f MiB/s): %s",
           path, n, bytes, secs, secs > 0 ? (double)bytes / (1 << 20) / secs : 0.0,
           bad ? "" : "OK\n");
    if (bad)
        printf("%" PRIu64 " bad blob%s\n", bad, bad == 1 ? "" : "s");
    rc = bad ? 1 : 0;

    char *scout = scout_arg ? strdup(scout_arg)
                            : no_scout ? NULL
                                       : pack_scout_find(path, smoe__vault_meta(&v, "scout"));
    if (scout) {
        pack_scout sc;
        uint64_t s0 = tool_now_ns();
        int src = pack_scout_load(scout, &sc);
        if (src == 0) {
            src = pack_scout_check_data(scout, &sc);
            secs = (double)(tool_now_ns() - s0) / 1e9;
            if (src == 0)
                printf("%s: %" PRIu32 " tensors, %" PRIu64 " bytes checked in %.2f s: OK\n",
                       scout, sc.count, sc.file_size, secs);
            pack_scout_free(&sc);
        }
        if (src < 0) {
            tool_error(cmd, "%s (%s)", smoe_last_error(), smoe_err_name(src));
            rc = 1;
        }
        free(scout);
    }
out:
    if (fd >= 0)
        close(fd);
    if (st)
        XXH3_freeState(st);
    free(buf);
    free(items);
    smoe__vault_free(&v);
    return rc;
}
