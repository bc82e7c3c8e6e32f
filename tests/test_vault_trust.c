/*
 * Description: what an index vault from someone else can make the library
 * read (docs/security.md). A crafted version-2 vault, with the no-hash
 * flag, whose source is /etc/passwd by a `../` name or through a symlink,
 * or whose recorded header is one byte, or whose extent lies in no tensor
 * of its file: smoe_open refuses it naming the vault, the source (index
 * and path), the field and what was expected, and no claim returns a byte
 * of the file; `smoe inspect` and `smoe verify` refuse it too. Likewise a
 * GGUF source's extent starting in the padding before its data, and a
 * source of the other kind. Source names must have the form `smoe index`
 * writes (leading `..` components, then a path downward). The library's
 * header parsers agree with smoe index's on every fixture family, and a
 * good vault of each kind still opens. A source with bytes that are no
 * tensor's between its tensors (or after a safetensors file's last) is
 * refused: an expert's merged reads would hand them out.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmocka.h>

#include "pack.h"
#include "smoe_tier.h"
#include "pack_fixtures.h"
#include "smoe/smoe.h"
#include "testutil.h"

#define PASSWD "/etc/passwd"
/* The model file's name: long, so that a crafted name fits in its place. */
#define MODEL "model-of-a-long-name-that-leaves-room-for-a-crafted-one-in-its-place.safetensors"

/* ---- a directory three deep: /tmp/trustXXXXXX/v ----------------------- */

static char top[256], dir[300];

static int setup(void **state)
{
    (void)state;
    snprintf(top, sizeof top, "/tmp/trustXXXXXX");
    if (!mkdtemp(top))
        return -1;
    snprintf(dir, sizeof dir, "%s/v", top);
    return mkdir(dir, 0755);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(p) : remove(p); /* Windows' remove() keeps directories */
}

static int teardown(void **state)
{
    (void)state;
    nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static const char *path(const char *name)
{
    static char bufs[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(bufs[k], sizeof bufs[k], "%s/%s", dir, name);
    return bufs[k];
}

/* ---- a small model, small enough that its extents fit in /etc/passwd ---- */

static void write_model(fx_model *m, const char *file)
{
    static const uint64_t w[] = {2, 4}, norm[] = {4};
    uint64_t seed = 1;
    char n[160];
    for (uint32_t e = 0; e < 2; e++) {
        snprintf(n, sizeof n, "model.layers.0.mlp.experts.%u.gate_proj.weight", e);
        fx_add(m, n, "BF16", 2, w, 16, seed++);
        snprintf(n, sizeof n, "model.layers.0.mlp.experts.%u.up_proj.weight", e);
        fx_add(m, n, "BF16", 2, w, 16, seed++);
        snprintf(n, sizeof n, "model.layers.0.mlp.experts.%u.down_proj.weight", e);
        fx_add(m, n, "BF16", 2, w, 16, seed++);
    }
    /* Two tensors no expert uses, after the experts': an extent moved onto
     * their boundary lies in neither. */
    fx_add(m, "model.layers.0.mlp.gate.weight", "BF16", 2, w, 16, seed++);
    fx_add(m, "model.norm.weight", "F32", 1, norm, 32, seed++);
    assert_int_equal(fx_write_st(file, m, 0, m->n, NULL), 0);
    assert_int_equal(fx_write_text(path("config.json"),
                                   "{\"model_type\": \"qwen3_moe\", \"num_experts\": 2,"
                                   " \"num_experts_per_tok\": 1}"),
                     0);
}

/* `smoe index` of source into out: 0, or its error code. unchecked: as a
 * hand-made vault could, for a source the tool itself refuses. */
static int try_index(const char *source, const char *out, int no_hash, int unchecked)
{
    pack_patterns ps;
    assert_int_equal(pack_patterns_init(&ps), 0);
    pack_index_opts o = {out, NULL, no_hash, 0, NULL, unchecked};
    pack_index_result r;
    int rc = pack_index_run(source, &ps, &o, &r);
    pack_patterns_free(&ps);
    return rc;
}

static void index_model(const char *source, const char *out, int no_hash)
{
    if (try_index(source, out, no_hash, 0))
        fail_msg("index of %s failed: %s", source, smoe_last_error());
}

/* `smoe index` refuses source (naming it and why), writes no out; then the
 * vault is written as a hand-made one could be. */
static void index_refused_then_forced(const char *source, const char *out, const char *why)
{
    int rc = try_index(source, out, 1, 0);
    if (rc == 0)
        fail_msg("smoe index wrote %s for %s, which the library refuses at open", out, source);
    print_message("index refused: %s\n", smoe_last_error());
    assert_int_equal(rc, SMOE_EFORMAT);
    assert_non_null(strstr(smoe_last_error(), source));
    assert_non_null(strstr(smoe_last_error(), why));
    assert_int_equal(access(out, F_OK), -1);
    if (try_index(source, out, 1, 1))
        fail_msg("forced index of %s failed: %s", source, smoe_last_error());
}

/* ---- crafting: source 0's name, size and recorded header ---------------- */

static void copy_file(const char *from, const char *to)
{
    uint64_t n;
    unsigned char *b = tu_read_file(from, &n);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)n, f), n);
    assert_int_equal(fclose(f), 0);
    free(b);
}

static void put_hash(const char *vault, uint64_t off, uint64_t h)
{
    XXH64_canonical_t c;
    XXH64_canonicalFromHash(&c, h);
    tu_patch_bytes(vault, off, c.digest, 8);
}

/* Source 0 of vault: named name (NULL: as it is), recorded as file's size
 * and the XXH3 of its first header_bytes bytes; the checksum fixed. */
static void craft_source(const char *vault, const char *name, const char *file,
                         uint64_t header_bytes)
{
    const uint64_t S = tu_read_u64(vault, TU_H2_SOURCE_OFFSET);
    if (name) {
        uint64_t at = S + TU_S_RECORD + tu_read_u64(vault, S + TU_S_NAME_OFFSET);
        assert_true(strlen(name) <= tu_read_u32(vault, S + TU_S_NAME_LEN));
        tu_patch_bytes(vault, at, name, strlen(name));
        tu_patch_u32(vault, S + TU_S_NAME_LEN, (uint32_t)strlen(name));
    }
    uint64_t size;
    unsigned char *b = tu_read_file(file, &size);
    assert_true(header_bytes <= size);
    tu_patch_u64(vault, S + TU_S_SIZE, size);
    tu_patch_u64(vault, S + TU_S_HEADER_BYTES, header_bytes);
    put_hash(vault, S + TU_S_HEADER_HASH, XXH3_64bits(b, (size_t)header_bytes));
    free(b);
    tu_fix_checksum(vault);
}

/* "../" for each component of the vault's directory, then etc/passwd:
 * "../../../etc/passwd" from /tmp/trustXXXXXX/v. */
static void passwd_name(char *buf, size_t n)
{
    char real[PATH_MAX];
    assert_non_null(realpath(dir, real));
    buf[0] = 0;
    for (const char *p = real; *p; p++)
        if (*p == '/')
            strncat(buf, "../", n - strlen(buf) - 1);
    strncat(buf, "etc/passwd", n - strlen(buf) - 1);
}

/* ---- opening and claiming ----------------------------------------------- */

static int open_vault(const char *vault, smoe_stream **s)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 4;
    o.flags = SMOE_OPEN_EXTENTS | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ |
              SMOE_OPEN_ALLOW_BUFFERED;
    return smoe_open(vault, &o, s);
}

/* How many bytes of expert (0, 0)'s first component, as claimed, equal the
 * file's at the offset vault records for it. */
static size_t leaked(smoe_stream *s, const char *vault, const char *file, uint64_t *len)
{
    smoe_blob b;
    smoe_component c;
    *len = 0;
    if (smoe_claim_wait(s, 0, 0, UINT64_MAX, &b) < 0)
        return 0;
    size_t same = 0;
    uint64_t fsize;
    unsigned char *f = tu_read_file(file, &fsize);
    smoe__vault v;
    if (smoe_blob_component(s, &b, 0, &c) == 0 &&
        smoe__vault_load(&v, vault, smoe__io_get()) == 0) {
        const smoe__vault_xt *x = &v.extents[v.xent[0].first_extent];
        const unsigned char *p = (const unsigned char *)b.data + c.offset;
        for (uint64_t i = 0; i < c.nbytes && x->offset + i < fsize; i++)
            same += p[i] == f[x->offset + i];
        smoe__vault_free(&v);
    }
    *len = b.size;
    free(f);
    assert_int_equal(smoe_release(s, &b), 0);
    return same;
}

/* open must fail with code and a message holding each of words (NULL
 * ended); if it opened, say what a claim handed out. */
static void expect_refused(const char *vault, const char *file, int code, ...)
{
    smoe_stream *s = NULL;
    int rc = open_vault(vault, &s);
    if (rc == 0) {
        uint64_t len;
        size_t same = leaked(s, vault, file, &len);
        smoe_close(s);
        fail_msg("smoe_open returned 0 and claim (0, 0) returned a blob of %" PRIu64
                 " bytes whose first component has %zu bytes of %s", len, same, file);
    }
    const char *msg = smoe_last_error();
    print_message("refused: %s\n", msg);
    if (rc != code)
        fail_msg("expected %s, got %s: %s", smoe_err_name(code), smoe_err_name(rc), msg);
    assert_null(s);
    va_list ap;
    va_start(ap, code);
    for (const char *w; (w = va_arg(ap, const char *));)
        if (!strstr(msg, w))
            fail_msg("message lacks '%s': %s", w, msg);
    va_end(ap);
}

static void expect_opens(const char *vault)
{
    smoe_stream *s;
    if (open_vault(vault, &s))
        fail_msg("open %s: %s", vault, smoe_last_error());
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 0, 1, UINT64_MAX, &b) >= 0);
    assert_int_equal(smoe_release(s, &b), 0);
    assert_int_equal(smoe_close(s), 0);
}

/* ---- the tool ----------------------------------------------------------- */

/* Run `smoe ARGS` (when the build made the tool): its exit status, its
 * stdout and stderr together in out; -1 without a tool. */
static int tool(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tool(char *out, size_t n, const char *fmt, ...)
{
    const char *t = getenv("SMOE_TOOL");
    out[0] = 0;
    if (!t || !*t)
        return -1;
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", t, args, path("tool.out"));
    int rc = system(cmd);
    FILE *f = fopen(path("tool.out"), "r");
    if (f) {
        size_t k = fread(out, 1, n - 1, f);
        out[k] = 0;
        fclose(f);
    }
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -2;
}

/* `smoe inspect` and `smoe verify` must refuse vault, naming its source. */
static void expect_tools_refuse(const char *vault, const char *w1, const char *w2)
{
    char out[16384];
    const char *cmds[] = {"inspect", "verify"};
    for (int i = 0; i < 2; i++) {
        int rc = tool(out, sizeof out, "%s '%s'", cmds[i], vault);
        if (rc == -1)
            return;
        if (rc != 1 || !strstr(out, w1) || !strstr(out, w2))
            fail_msg("smoe %s exited %d, expected 1 with '%s' and '%s'; it said:\n%s",
                     cmds[i], rc, w1, w2, out);
    }
}

/* ---- the cases ------------------------------------------------------------ */

/* A source named ../../../etc/passwd, recorded with passwd's size and a
 * one-byte header, in a vault with the no-hash flag. */
static void index_source_passwd_refused(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model(&m, path(MODEL));
    index_model(path(MODEL), path("m.smoe"), 1);
    expect_opens(path("m.smoe"));
    copy_file(path("m.smoe"), path("bad.smoe"));
    char name[512];
    passwd_name(name, sizeof name);
    craft_source(path("bad.smoe"), name, PASSWD, 1);
    expect_refused(path("bad.smoe"), PASSWD, SMOE_ESOURCE, "bad.smoe", "source 0",
                   "etc/passwd", "not a safetensors file", NULL);
    expect_tools_refuse(path("bad.smoe"), "passwd", "not a safetensors file");
    fx_free(&m);
}

/* model.safetensors itself a symlink to /etc/passwd; the name as indexed. */
static void index_symlink_to_non_model_refused(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model(&m, path(MODEL));
    index_model(path(MODEL), path("m.smoe"), 1);
    assert_int_equal(rename(path(MODEL), path("real.safetensors")), 0);
    assert_int_equal(symlink(PASSWD, path(MODEL)), 0);
    craft_source(path("m.smoe"), NULL, PASSWD, 1);
    expect_refused(path("m.smoe"), PASSWD, SMOE_ESOURCE, "source 0", MODEL,
                   "not a safetensors file", NULL);
    expect_tools_refuse(path("m.smoe"), MODEL, "not a safetensors file");

    /* A symlink to a real model file is followed (the Hugging Face cache
     * is made of them). */
    assert_int_equal(unlink(path(MODEL)), 0);
    assert_int_equal(symlink("real.safetensors", path(MODEL)), 0);
    index_model(path(MODEL), path("good.smoe"), 1);
    expect_opens(path("good.smoe"));
    fx_free(&m);
}

/* The recorded header must be the file's whole header: its 8-byte length
 * and JSON, no byte less or more; with the no-hash flag too. */
static void index_header_bytes_must_cover_header(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model(&m, path(MODEL));
    index_model(path(MODEL), path("m.smoe"), 1);
    const uint64_t S = tu_read_u64(path("m.smoe"), TU_H2_SOURCE_OFFSET);
    const uint64_t hdr = tu_read_u64(path("m.smoe"), S + TU_S_HEADER_BYTES);
    uint64_t hlen;
    tu_read_at(path(MODEL), 0, &hlen, 8); /* little-endian, as the test machines */
    assert_int_equal(hdr, 8 + hlen);
    /* (More than the header is refused by the vault's own reader here: the
     * first extent starts where the header ends.) */
    const uint64_t wrong[] = {1, 8, hdr - 1};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        copy_file(path("m.smoe"), path("bad.smoe"));
        craft_source(path("bad.smoe"), NULL, path(MODEL), wrong[i]);
        expect_refused(path("bad.smoe"), path(MODEL), SMOE_ESOURCE, "source 0", MODEL,
                       "header_bytes", NULL);
    }
    expect_tools_refuse(path("bad.smoe"), MODEL, "header_bytes");

    /* The header hash is checked with the no-hash flag: it only means the
     * experts have no hashes. */
    copy_file(path("m.smoe"), path("bad.smoe"));
    put_hash(path("bad.smoe"), S + TU_S_HEADER_HASH, 12345);
    tu_fix_checksum(path("bad.smoe"));
    expect_refused(path("bad.smoe"), path(MODEL), SMOE_ESOURCE, "source 0", "XXH3", NULL);
    fx_free(&m);
}

/* Byte offset of tensor name in the model file. */
static uint64_t tensor_at(const char *file, const char *name, uint64_t *nbytes)
{
    pack_source s;
    pack_source_init(&s);
    assert_int_equal(pack_st_load_file(&s, file), 0);
    uint64_t off = UINT64_MAX;
    for (size_t i = 0; i < s.n_tensors; i++)
        if (!strcmp(s.tensors[i].name, name)) {
            off = s.tensors[i].offset;
            *nbytes = s.tensors[i].nbytes;
        }
    pack_source_free(&s);
    assert_true(off != UINT64_MAX);
    return off;
}

/* An extent moved onto the boundary of two tensors no expert uses: inside
 * the file, aligned, overlapping no other extent, but in no one tensor. */
static void index_extent_outside_tensor_refused(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model(&m, path(MODEL));
    index_model(path(MODEL), path("m.smoe"), 1);
    uint64_t n1, n2;
    const uint64_t a = tensor_at(path(MODEL), "model.layers.0.mlp.gate.weight", &n1);
    const uint64_t b = tensor_at(path(MODEL), "model.norm.weight", &n2);
    const uint64_t X = tu_read_u64(path("m.smoe"), TU_H2_EXTENT_OFFSET);
    const uint64_t len = tu_read_u64(path("m.smoe"), X + TU_X_LENGTH);
    assert_int_equal(n1, 16);
    assert_int_equal(len, 16);
    assert_true(b == a + 16 || a == b + 32);
    const uint64_t first = a < b ? a : b;
    copy_file(path("m.smoe"), path("bad.smoe"));
    tu_patch_u64(path("bad.smoe"), X + TU_X_OFFSET, first + 8);
    tu_fix_checksum(path("bad.smoe"));
    expect_refused(path("bad.smoe"), path(MODEL), SMOE_ERANGE, "extent 0", "source 0",
                   "not inside the data of one tensor", NULL);
    expect_tools_refuse(path("bad.smoe"), "extent 0", "not inside the data of one tensor");

    /* Inside one tensor, even one no expert is indexed from: accepted. */
    copy_file(path("m.smoe"), path("ok.smoe"));
    tu_patch_u64(path("ok.smoe"), X + TU_X_OFFSET, a);
    tu_fix_checksum(path("ok.smoe"));
    expect_opens(path("ok.smoe"));
    fx_free(&m);
}

/* A GGUF: an extent starting in the padding between the tensor infos and
 * the data section (the source's align lowered to 1 to let it), running
 * into the first tensor: in no one tensor. And its header_bytes of 1. */
static void index_gguf_extent_in_padding_refused(void **state)
{
    (void)state;
    fx_model g = {0};
    fx_model_gguf(&g, 0);
    assert_int_equal(fx_write_gguf(path("model.gguf"), &g, FX_GGUF_KV, 4, 0), 0);
    index_model(path("model.gguf"), path("g.smoe"), 1);
    const uint64_t S = tu_read_u64(path("g.smoe"), TU_H2_SOURCE_OFFSET);
    const uint64_t X = tu_read_u64(path("g.smoe"), TU_H2_EXTENT_OFFSET);
    const uint64_t hdr = tu_read_u64(path("g.smoe"), S + TU_S_HEADER_BYTES);
    assert_true(hdr % 32 != 0); /* padding follows the tensor infos */
    copy_file(path("g.smoe"), path("bad.smoe"));
    tu_patch_u32(path("bad.smoe"), S + TU_S_ALIGN, 1);
    tu_patch_u64(path("bad.smoe"), X + TU_X_OFFSET, hdr);
    tu_fix_checksum(path("bad.smoe"));
    expect_refused(path("bad.smoe"), path("model.gguf"), SMOE_ERANGE, "extent 0", "source 0",
                   "not inside the data of one tensor", NULL);
    copy_file(path("g.smoe"), path("bad.smoe"));
    craft_source(path("bad.smoe"), NULL, path("model.gguf"), 1);
    expect_refused(path("bad.smoe"), path("model.gguf"), SMOE_ESOURCE, "source 0",
                   "header_bytes", "key-values and tensor infos", NULL);
    fx_free(&g);
}

/* The kind is the file's, not the name's: a GGUF source replaced by a
 * safetensors file of the same size, and a safetensors one by a GGUF. */
static void index_source_kind_checked(void **state)
{
    (void)state;
    fx_model m = {0}, g = {0};
    write_model(&m, path(MODEL));
    fx_model_gguf(&g, 0);
    assert_int_equal(fx_write_gguf(path("model.gguf"), &g, FX_GGUF_KV, 4, 0), 0);
    index_model(path("model.gguf"), path("g.smoe"), 1);
    expect_opens(path("g.smoe"));
    index_model(path(MODEL), path("m.smoe"), 1);
    const uint64_t S = tu_read_u64(path("g.smoe"), TU_H2_SOURCE_OFFSET);
    const uint64_t hdr = tu_read_u64(path("g.smoe"), S + TU_S_HEADER_BYTES);

    /* The GGUF's name now a safetensors file (padded to the GGUF's size,
     * recorded as it is). */
    uint64_t gsize = tu_file_size(path("model.gguf")), msize;
    unsigned char *mb = tu_read_file(path(MODEL), &msize);
    assert_true(msize < gsize);
    assert_int_equal(rename(path("model.gguf"), path("real.gguf")), 0);
    FILE *f = fopen(path("model.gguf"), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(mb, 1, (size_t)msize, f), msize);
    assert_int_equal(ftruncate(fileno(f), (off_t)gsize), 0);
    assert_int_equal(fclose(f), 0);
    free(mb);
    craft_source(path("g.smoe"), NULL, path("model.gguf"), 8);
    expect_refused(path("g.smoe"), path("model.gguf"), SMOE_ESOURCE, "source 0",
                   "model.gguf", "not a GGUF file", NULL);
    expect_tools_refuse(path("g.smoe"), "model.gguf", "not a GGUF file");

    /* And the safetensors name a GGUF (its first 8 bytes recorded). */
    assert_int_equal(rename(path(MODEL), path("real.safetensors")), 0);
    assert_int_equal(symlink("real.gguf", path(MODEL)), 0);
    craft_source(path("m.smoe"), NULL, path("real.gguf"), 8);
    expect_refused(path("m.smoe"), path("real.gguf"), SMOE_ESOURCE, "source 0", MODEL,
                   "not a safetensors file", NULL);
    (void)hdr;
    fx_free(&m);
    fx_free(&g);
}

/* Names as `smoe index` writes them: leading `..` components, then a path
 * downward; no `.`, no empty component, no `..` after a downward one. */
static void index_source_name_form(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model(&m, path(MODEL));
    index_model(path(MODEL), path("m.smoe"), 1);
    static const char *bad[] = {"x/../m.safetensors", "./m.safetensors", "x//m.safetensors",
                                "..", "x/..", "m.safetensors/", "../v/./m.safetensors",
                                "../../x/../../m"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        copy_file(path("m.smoe"), path("bad.smoe"));
        craft_source(path("bad.smoe"), bad[i], path(MODEL),
                     tu_read_u64(path("m.smoe"), tu_read_u64(path("m.smoe"),
                                 TU_H2_SOURCE_OFFSET) + TU_S_HEADER_BYTES));
        smoe__vault v;
        int rc = smoe__vault_load(&v, path("bad.smoe"), smoe__io_get());
        if (rc != SMOE_EFORMAT || !strstr(smoe_last_error(), "source 0") ||
            !strstr(smoe_last_error(), "name"))
            fail_msg("name '%s': expected SMOE_EFORMAT naming source 0's name, got %s: %s",
                     bad[i], smoe_err_name(rc), smoe_last_error());
        smoe__vault_free(&v);
    }
    /* Leading ".." are allowed: the vault apart from its sources. */
    assert_int_equal(mkdir(path("sub"), 0755), 0);
    index_model(path(MODEL), path("sub/m.smoe"), 1);
    expect_opens(path("sub/m.smoe"));
    fx_free(&m);
}

/* ---- the library's header parsers against smoe index's ------------------ */

/* File f parsed by smoe index's reader and by the library's: the same
 * header size, and the same tensors (their non-empty data). */
static void same_headers(const char *f, int gguf)
{
    pack_source ps;
    pack_source_init(&ps);
    int rc = gguf ? pack_gguf_load_file(&ps, f) : pack_st_load_file(&ps, f);
    if (rc)
        fail_msg("%s: %s", f, smoe_last_error());
    uint64_t n;
    unsigned char *b = tu_read_file(f, &n);
    smoe__model_hdr h;
    memset(&h, 0, sizeof h);
    rc = smoe__model_hdr_parse(gguf ? SMOE__V2_KIND_GGUF : SMOE__V2_KIND_SAFETENSORS, b,
                               (size_t)n, n, &h);
    if (rc)
        fail_msg("%s: the library's parser refuses what smoe index reads: %s", f, h.why);
    assert_int_equal(h.header_end, ps.files[0].header_bytes);
    size_t k = 0;
    for (size_t i = 0; i < ps.n_tensors; i++) {
        const pack_tensor *t = &ps.tensors[i];
        if (!t->nbytes)
            continue;
        const smoe__tspan *sp = smoe__hdr_find(&h, t->offset, t->nbytes);
        if (!sp || sp->begin != t->offset || sp->end != t->offset + t->nbytes)
            fail_msg("%s: tensor '%s' [%" PRIu64 ", +%" PRIu64 ") not found alike", f, t->name,
                     t->offset, t->nbytes);
        k++;
    }
    assert_int_equal(k, h.n);
    smoe__model_hdr_free(&h);
    free(b);
    pack_source_free(&ps);
}

/* Every fixture model family smoe index reads: the library accepts its
 * header as smoe index reads it, so no real model is refused at open. */
static void index_header_parsers_agree(void **state)
{
    (void)state;
    void (*st_models[])(fx_model *) = {fx_model_switch_mlp, fx_model_gpt_oss, fx_model_mlx,
                                       fx_model_jetmoe};
    for (size_t i = 0; i < sizeof st_models / sizeof st_models[0] + 3; i++) {
        fx_model m = {0};
        if (i < sizeof st_models / sizeof st_models[0])
            st_models[i](&m);
        else if (i == sizeof st_models / sizeof st_models[0])
            fx_model_qwen(&m, 4);
        else
            fx_model_nemotron_h(&m, (int)(i & 1));
        assert_int_equal(fx_write_st(path("a.safetensors"), &m, 0, m.n, NULL), 0);
        same_headers(path("a.safetensors"), 0);
        /* An odd header length: every tensor at an odd offset. */
        assert_int_equal(fx_write_st_pad(path("b.safetensors"), &m, 0, m.n, NULL, 5), 0);
        same_headers(path("b.safetensors"), 0);
        fx_free(&m);
    }
    for (int mixed = 0; mixed < 2; mixed++) {
        fx_model m = {0};
        fx_model_gguf(&m, mixed);
        assert_int_equal(fx_write_gguf(path("a.gguf"), &m, FX_GGUF_KV, 4, mixed ? 64 : 0), 0);
        same_headers(path("a.gguf"), 1);
        fx_free(&m);
    }
}


/* ---- bytes between tensors ------------------------------------------------ */

#define HOLE 8192u

/* MODEL rewritten with HOLE bytes of 'S' (no tensor's) after its first
 * tensor, the later tensors' data_offsets moved past them: a file the
 * format's reference reader refuses ("cannot contain holes"). */
static void write_model_with_hole(fx_model *m)
{
    write_model(m, path("plain.safetensors"));
    uint64_t off = m->t[0].nbytes;
    for (size_t i = 1; i < m->n; i++) {
        m->t[i].begin_override = (int64_t)(off + HOLE);
        m->t[i].end_override = (int64_t)(off + HOLE + m->t[i].nbytes);
        off += m->t[i].nbytes;
    }
    assert_int_equal(fx_write_st(path("tmp.safetensors"), m, 0, m->n, NULL), 0);
    uint64_t n;
    unsigned char *b = tu_read_file(path("tmp.safetensors"), &n);
    uint64_t data = 8;
    for (int i = 0; i < 8; i++)
        data += (uint64_t)b[i] << (8 * i);
    const uint64_t cut = data + m->t[0].nbytes;
    unsigned char *hole = malloc(HOLE);
    assert_non_null(hole);
    memset(hole, 'S', HOLE);
    FILE *f = fopen(path(MODEL), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, (size_t)cut, f), cut);
    assert_int_equal(fwrite(hole, 1, HOLE, f), HOLE);
    assert_int_equal(fwrite(b + cut, 1, (size_t)(n - cut), f), n - cut);
    assert_int_equal(fclose(f), 0);
    free(hole);
    free(b);
}

/* The longest run of 'S' in the claimed blob of expert (0, 0). */
static size_t hole_bytes_claimed(smoe_stream *s)
{
    smoe_blob b;
    assert_true(smoe_claim_wait(s, 0, 0, UINT64_MAX, &b) >= 0);
    size_t run = 0, best = 0;
    for (uint64_t i = 0; i < b.size; i++) {
        run = ((const unsigned char *)b.data)[i] == 'S' ? run + 1 : 0;
        best = run > best ? run : best;
    }
    assert_int_equal(smoe_release(s, &b), 0);
    return best;
}

/* A safetensors source whose data has bytes that belong to no tensor
 * between two of an expert's components (or after its last tensor): the
 * aligned, merged read of the expert would put them in its slot, where
 * smoe_blob.data and size hand them out. Refused as no safetensors file. */
static void index_bytes_between_tensors_refused(void **state)
{
    (void)state;
    fx_model m = {0};
    write_model_with_hole(&m);
    index_refused_then_forced(path(MODEL), path("m.smoe"), "no tensor's");
    smoe_stream *s = NULL;
    int rc = open_vault(path("m.smoe"), &s);
    if (rc == 0) {
        size_t run = hole_bytes_claimed(s);
        smoe_close(s);
        fail_msg("smoe_open returned 0 and claim (0, 0) handed out %zu bytes of the %u "
                 "between two tensors", run, HOLE);
    }
    print_message("refused: %s\n", smoe_last_error());
    assert_int_equal(rc, SMOE_ESOURCE);
    assert_non_null(strstr(smoe_last_error(), "no tensor's"));
    expect_tools_refuse(path("m.smoe"), MODEL, "no tensor's");

    /* Bytes after the last tensor: refused too. */
    fx_model m2 = {0};
    write_model(&m2, path(MODEL));
    FILE *f = fopen(path(MODEL), "ab");
    assert_non_null(f);
    assert_int_equal(fputs("SSSSSSSS", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    index_refused_then_forced(path(MODEL), path("t.smoe"), "no tensor's");
    expect_refused(path("t.smoe"), path(MODEL), SMOE_ESOURCE, "source 0", "no tensor's",
                   NULL);
    fx_free(&m2);
    fx_free(&m);
}

/* A GGUF whose last tensor's data starts 1024 bytes after the previous
 * one's padded end (what ggml's reader refuses): its header does not
 * parse, and the bytes between are named. */
static void gguf_bytes_between_tensors_refused(void **state)
{
    (void)state;
    fx_model g = {0};
    fx_model_gguf(&g, 0);
    uint64_t off = 0;
    for (size_t i = 0; i + 1 < g.n; i++)
        off += (g.t[i].nbytes + 31) / 32 * 32;
    g.t[g.n - 1].offset_override = (int64_t)(off + 1024);
    assert_int_equal(fx_write_gguf(path("model.gguf"), &g, FX_GGUF_KV, 4, 0), 0);
    FILE *f = fopen(path("model.gguf"), "ab");
    assert_non_null(f);
    static const char more[1024];
    assert_int_equal(fwrite(more, 1, sizeof more, f), sizeof more);
    assert_int_equal(fclose(f), 0);
    uint64_t n;
    unsigned char *b = tu_read_file(path("model.gguf"), &n);
    smoe__model_hdr h;
    memset(&h, 0, sizeof h);
    int rc = smoe__model_hdr_parse(SMOE__V2_KIND_GGUF, b, (size_t)n, n, &h);
    print_message("parse: %s\n", rc ? h.why : "accepted");
    assert_int_equal(rc, SMOE_EFORMAT);
    assert_non_null(strstr(h.why, "no tensor's data"));
    smoe__model_hdr_free(&h);
    free(b);
    fx_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(index_source_passwd_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(index_symlink_to_non_model_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(index_header_bytes_must_cover_header, setup, teardown),
        cmocka_unit_test_setup_teardown(index_extent_outside_tensor_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(index_gguf_extent_in_padding_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(index_source_kind_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(index_source_name_form, setup, teardown),
        cmocka_unit_test_setup_teardown(index_header_parsers_agree, setup, teardown),
        cmocka_unit_test_setup_teardown(index_bytes_between_tensors_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(gguf_bytes_between_tensors_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
