/*
 * seed_lib.c - write the seed corpora of the library's fuzz targets:
 *  - fuzz_vault: small vaults made by the library's writer, rearranged into
 *    fuzz_vault's compact input form (see fuzz_vault.c): tables moved to
 *    offset 16384, blobs after them in the zero tail, header checksum
 *    recomputed, so each seed is a valid vault;
 *  - fuzz_freq: histogram files made by the library's encoder, behind
 *    fuzz_freq's control byte.
 *
 * Usage: fuzz_seed_lib CORPUSDIR (it writes into CORPUSDIR/vault and
 * CORPUSDIR/freq). Not run by ctest; rerun by hand when a format changes
 * (docs/testing.md).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "smoe_tier.h"
#include "testutil.h"

#define A 16384u

static uint64_t rd(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void wr(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int write_seed(const char *vault, const char *out)
{
    uint64_t n;
    unsigned char *f = tu_read_file(vault, &n);
    unsigned char *h = f;
    uint64_t entries = rd(h + 32, 4), to = rd(h + 48, 8), lo = rd(h + 56, 8);
    uint64_t mo = rd(h + 64, 8), mb = rd(h + 72, 8);
    uint64_t tlen = mo + mb - to, blobs = to - A;
    if (blobs / A > 63 || mo + mb != n) {
        fprintf(stderr, "%s: not a small vault with tables at the end\n", vault);
        free(f);
        return -1;
    }
    unsigned char *t = f + to;
    uint64_t base = (A + tlen + A - 1) / A * A;
    for (uint64_t i = 0; i < entries; i++) {
        unsigned char *e = t + i * 48;
        wr(e + 16, base + rd(e + 16, 8) - A, 8);
    }
    wr(h + 48, A, 8);
    wr(h + 56, lo - to + A, 8);
    wr(h + 64, mo - to + A, 8);
    wr(h + 88, base + blobs, 8);
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, 120);
    XXH3_64bits_update(st, t, (size_t)tlen);
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, XXH3_64bits_digest(st));
    XXH3_freeState(st);
    memcpy(h + 120, c.digest, 8);

    FILE *o = fopen(out, "wb");
    if (!o) {
        fprintf(stderr, "%s: %s\n", out, strerror(errno));
        free(f);
        return -1;
    }
    unsigned char ctl = (unsigned char)(blobs / A);
    fwrite(&ctl, 1, 1, o);
    fwrite(h, 1, 128, o);
    fwrite(t, 1, (size_t)tlen, o);
    fclose(o);
    free(f);
    return 0;
}

/* Two layouts (layer 0: gate/up/down; layer 1: one u8 tensor). */
static int write_two_layouts(const char *path)
{
    smoe_writer_opts wo = SMOE_WRITER_OPTS_INIT;
    wo.layers = 2;
    wo.experts = 2;
    smoe_writer *w;
    int rc = smoe_writer_open(path, &wo, &w);
    if (rc < 0)
        return rc;
    smoe_component a[3], b[3];
    uint32_t na = synth_layout(a, 4000), nb = synth_layout(b, 300), ia, ib;
    unsigned char buf[4096];
    if ((rc = smoe_writer_add_layout(w, a, na, &ia)) < 0 ||
        (rc = smoe_writer_add_layout(w, b, nb, &ib)) < 0 ||
        (rc = smoe_writer_set_meta(w, "top_k", "1")) < 0)
        goto fail;
    for (uint32_t k = 0; k < 4; k++) {
        uint32_t layer = k / 2, size = layer ? 300 : 4000;
        synth_blob_fill(buf, size, 9, layer, k % 2);
        if ((rc = smoe_writer_add_blob(w, layer, k % 2, layer ? ib : ia, buf, size)) < 0)
            goto fail;
    }
    return smoe_writer_finish(w);
fail:
    smoe_writer_abort(w);
    return rc;
}

static int odd_present(uint32_t layer, uint32_t expert)
{
    return (layer + expert) % 3 != 1;
}

static int write_freq(const char *dir, const char *name, unsigned char ctl,
                      const smoe__freq_id *id, int zero_checksum)
{
    size_t n = (size_t)id->layers * id->experts, len = SMOE__FREQ_HEADER_SIZE + 8 * n;
    uint64_t *counts = calloc(n, sizeof *counts);
    unsigned char *buf = malloc(len);
    if (!counts || !buf)
        return -1;
    for (size_t i = 0; i < n; i++)
        counts[i] = (i * i * 7 + 3) % 1000;
    smoe__freq_encode(buf, id, counts);
    if (zero_checksum)
        memset(buf + 56, 0, 8);
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    FILE *o = fopen(out, "wb");
    int rc = o && fwrite(&ctl, 1, 1, o) == 1 && fwrite(buf, 1, len, o) == len ? 0 : -1;
    if (o && fclose(o) != 0)
        rc = -1;
    free(counts);
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUSDIR\n", argv[0]);
        return 2;
    }
    char vdir[2048], fdir[2048];
    snprintf(vdir, sizeof vdir, "%s/vault", argv[1]);
    snprintf(fdir, sizeof fdir, "%s/freq", argv[1]);
    char *dir = tu_tmpdir(), *tmp = tu_path(dir, "seed.smoe");
    static const char *const extra[] = {"quant", "q4_k", "note", "caf\xc3\xa9=ok", NULL};
    struct {
        const char *name;
        tu_vault_opts o;
    } seeds[] = {
        {"one", {1, 1, 100, 100, 1, 0, NULL, NULL, NULL, 0}},
        {"grid", {2, 3, 600, 16000, 2, 2, "seed-model", NULL, NULL, 0}},
        {"sparse", {3, 4, 2000, 9000, 3, 1, NULL, extra, odd_present, 0}},
        {"reverse", {2, 8, 544, 16384, 4, 8, "r", NULL, NULL, 1}},
        {"tiny", {4, 2, 1, 300, 5, 0, NULL, NULL, NULL, 0}},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        char out[4096];
        snprintf(out, sizeof out, "%s/seed-%s", vdir, seeds[i].name);
        if (tu_make_vault_ex(tmp, &seeds[i].o) != 0) {
            fprintf(stderr, "%s: %s\n", seeds[i].name, smoe_last_error());
            rc = 1;
            continue;
        }
        rc |= write_seed(tmp, out) != 0;
        unlink(tmp);
    }
    char out2[4096];
    snprintf(out2, sizeof out2, "%s/seed-two-layouts", vdir);
    if (write_two_layouts(tmp) != 0 || write_seed(tmp, out2) != 0) {
        fprintf(stderr, "two-layouts: %s\n", smoe_last_error());
        rc = 1;
    }
    unlink(tmp);
    tu_rmdir(dir);
    free(tmp);
    free(dir);

    /* fuzz_freq: control bits 1 (fix the checksum), 2 (fix the total),
     * 4 (decode for the vault the header names). */
    const smoe__freq_id small = {1, 4, 0, 0}, grid = {3, 8, 0xabcdef12345ull, 123456};
    rc |= write_freq(fdir, "seed-1x4", 0, &small, 0) != 0;
    rc |= write_freq(fdir, "seed-3x8", 4, &grid, 0) != 0;
    rc |= write_freq(fdir, "seed-3x8-fixup", 7, &grid, 1) != 0;
    return rc;
}
