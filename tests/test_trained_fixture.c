/*
 * Description: the trained fixture (tests/fixtures/trained: a byte-level
 * Qwen3-MoE trained on Python sources, as safetensors and as GGUF bf16 and
 * Q8_0 written by llama.cpp's converter) through `smoe pack` and `smoe
 * index`. For each of the three files, every expert (6 layers x 16) is
 * claimed from the packed vault and from the index vault, and each of its
 * three components (gate, up, down) must be the same bytes in both; for
 * the safetensors file, the bytes must also be those its header places at
 * model.layers.L.mlp.experts.E.<gate|up|down>_proj.weight (read here with
 * json-c, not with the packer's parser). python/tests/test_trained.py checks
 * the packed GGUF vaults against their tensors the same way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "smoe/smoe.h"
#include "testutil.h"

#ifndef SMOE_TRAINED_FIXTURE
#error "SMOE_TRAINED_FIXTURE: the fixture's directory"
#endif

enum { LAYERS = 6, EXPERTS = 16 };

static int tool(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run the smoe tool: its exit status, or -1 when the build made none. */
static int tool(const char *fmt, ...)
{
    const char *t = getenv("SMOE_TOOL");
    if (!t || !*t)
        return -1;
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", t, args);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static smoe_stream *open_vault(const char *path, uint32_t extra_flags)
{
    smoe_open_opts o = SMOE_OPEN_OPTS_INIT;
    o.workers = 2;
    o.ring_slots = 8;
    o.verify = SMOE_VERIFY_ON;
    o.flags = extra_flags | SMOE_OPEN_NO_PREWARM | SMOE_OPEN_NO_FREQ | SMOE_OPEN_ALLOW_BUFFERED;
    smoe_stream *s = NULL;
    if (smoe_open(path, &o, &s))
        fail_msg("smoe_open %s: %s", path, smoe_last_error());
    return s;
}

/* The bytes the safetensors header places at tensor name (NULL if absent). */
static const uint8_t *st_tensor(const uint8_t *file, uint64_t size, json_object *head,
                                const char *name, uint64_t *nbytes)
{
    json_object *t, *off;
    if (!json_object_object_get_ex(head, name, &t) ||
        !json_object_object_get_ex(t, "data_offsets", &off))
        return NULL;
    uint64_t hlen;
    memcpy(&hlen, file, 8);
    uint64_t a = (uint64_t)json_object_get_int64(json_object_array_get_idx(off, 0));
    uint64_t b = (uint64_t)json_object_get_int64(json_object_array_get_idx(off, 1));
    assert_true(8 + hlen + b <= size && a <= b);
    *nbytes = b - a;
    return file + 8 + hlen + a;
}

static void check_form(const char *form)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/%s", SMOE_TRAINED_FIXTURE, form);
    char *dir = tu_tmpdir();
    char *packed = tu_path(dir, "packed.smoe"), *index = tu_path(dir, "index.smoe");
    int rc = tool("pack --quiet --out '%s' '%s'", packed, src);
    if (rc == -1) {
        print_message("no smoe tool in this build: %s skipped\n", form);
        goto out;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(tool("index --quiet --out '%s' '%s'", index, src), 0);

    uint64_t size = 0;
    uint8_t *file = NULL;
    json_object *head = NULL;
    if (strstr(form, ".safetensors")) {
        file = tu_read_file(src, &size);
        uint64_t hlen;
        memcpy(&hlen, file, 8);
        assert_true(8 + hlen <= size);
        char *text = strndup((const char *)file + 8, hlen);
        assert_non_null(text);
        head = json_tokener_parse(text);
        free(text);
        assert_non_null(head);
    }
    smoe_stream *p = open_vault(packed, 0), *x = open_vault(index, SMOE_OPEN_EXTENTS);
    static const char *const proj[] = {"gate", "up", "down"};
    uint32_t checked = 0;
    for (uint32_t l = 0; l < LAYERS; l++)
        for (uint32_t e = 0; e < EXPERTS; e++) {
            smoe_blob bp, bx;
            if (smoe_claim_wait(p, l, e, UINT64_MAX, &bp) < 0 ||
                smoe_claim_wait(x, l, e, UINT64_MAX, &bx) < 0)
                fail_msg("%s: claim (%u, %u): %s", form, l, e, smoe_last_error());
            for (uint32_t k = 0; k < 3; k++) {
                smoe_component cp, cx;
                assert_int_equal(smoe_blob_component(p, &bp, k, &cp), 0);
                assert_int_equal(smoe_blob_find(x, &bx, cp.name, &cx), 0);
                assert_int_equal(cp.nbytes, cx.nbytes);
                const uint8_t *dp = (const uint8_t *)bp.data + cp.offset;
                const uint8_t *dx = (const uint8_t *)bx.data + cx.offset;
                if (memcmp(dp, dx, cp.nbytes))
                    fail_msg("%s: layer %u expert %u %s: packed and index vaults differ", form,
                             l, e, cp.name);
                if (head) {
                    char name[128];
                    const char *base = NULL;
                    for (int j = 0; j < 3; j++)
                        if (!strcmp(cp.name, proj[j]))
                            base = proj[j];
                    assert_non_null(base);
                    snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%u.%s_proj.weight",
                             l, e, base);
                    uint64_t n = 0;
                    const uint8_t *want = st_tensor(file, size, head, name, &n);
                    assert_non_null(want);
                    assert_int_equal(n, cp.nbytes);
                    if (memcmp(dp, want, n))
                        fail_msg("%s: %s differs from the file's bytes", form, name);
                }
                checked++;
            }
            assert_int_equal(smoe_release(p, &bp), 0);
            assert_int_equal(smoe_release(x, &bx), 0);
        }
    assert_int_equal(checked, LAYERS * EXPERTS * 3);
    smoe_close(p);
    smoe_close(x);
    if (head)
        json_object_put(head);
    free(file);
out:
    unlink(packed);
    unlink(index);
    free(packed);
    free(index);
    tu_rmdir(dir);
    free(dir);
}

static void test_trained_bf16_gguf_every_expert(void **st)
{
    (void)st;
    check_form("model-bf16.gguf");
}

static void test_trained_q8_0_gguf_every_expert(void **st)
{
    (void)st;
    check_form("model-q8_0.gguf");
}

static void test_trained_safetensors_every_expert(void **st)
{
    (void)st;
    check_form("model.safetensors");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trained_bf16_gguf_every_expert),
        cmocka_unit_test(test_trained_q8_0_gguf_every_expert),
        cmocka_unit_test(test_trained_safetensors_every_expert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
