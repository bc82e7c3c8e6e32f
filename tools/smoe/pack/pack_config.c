/*
 * pack_config.c - the model facts a safetensors checkpoint keeps in
 * config.json beside it: architecture, expert count, experts per token and
 * mlx quantisation. Keys are looked up at the top level, then inside
 * "text_config" (multimodal models keep the language model's there). A key
 * that is present with the wrong type is an error; null counts as absent.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "smoe_tier.h"
#include "pack.h"

static struct json_object *lookup(struct json_object *root, struct json_object *text,
                                  const char *key)
{
    struct json_object *v;
    if (json_object_object_get_ex(root, key, &v) && v)
        return v;
    if (text && json_object_object_get_ex(text, key, &v) && v)
        return v;
    return NULL;
}

/* Positive integer key into *out (left alone when absent). */
static int get_count(struct json_object *root, struct json_object *text, const char *key,
                     const char *fname, uint32_t max, uint32_t *out, int *found)
{
    struct json_object *v = lookup(root, text, key);
    if (found)
        *found = 0;
    if (!v)
        return 0;
    int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
    if (x < 1 || (uint64_t)x > max)
        return smoe__fail(SMOE_EFORMAT, "%s: '%s' must be an integer from 1 to %" PRIu32,
                          fname, key, max);
    *out = (uint32_t)x;
    if (found)
        *found = 1;
    return 0;
}

static int get_string(struct json_object *root, struct json_object *text, const char *key,
                      const char *fname, char **out)
{
    struct json_object *v = lookup(root, text, key);
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_string))
        return smoe__fail(SMOE_EFORMAT, "%s: '%s' must be a string", fname, key);
    const char *str = json_object_get_string(v);
    if (!*str || strlen(str) > 256 || strchr(str, '\n'))
        return smoe__fail(SMOE_EFORMAT, "%s: '%s' must be 1 to 256 bytes on one line",
                          fname, key);
    return pack_meta_set(out, str);
}

int pack_config_parse(const char *json, size_t n, const char *fname, pack_meta *m)
{
    if (n > INT32_MAX)
        return smoe__fail(SMOE_EFORMAT, "%s: too long", fname);
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    struct json_object *root = json_tokener_parse_ex(tok, json, (int)n);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        if (root)
            json_object_put(root);
        return smoe__fail(SMOE_EFORMAT, "%s: not valid JSON (%s)", fname,
                          jerr == json_tokener_continue ? "unexpected end"
                                                        : json_tokener_error_desc(jerr));
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return smoe__fail(SMOE_EFORMAT, "%s: not a JSON object", fname);
    }
    struct json_object *text = NULL;
    if (json_object_object_get_ex(root, "text_config", &text) &&
        !json_object_is_type(text, json_type_object))
        text = NULL;

    int rc = get_string(root, text, "model_type", fname, &m->arch);
    if (rc == 0)
        rc = get_string(root, text, "_name_or_path", fname, &m->model);
    static const char *const expert_keys[] = {"num_experts", "num_local_experts",
                                              "n_routed_experts"};
    for (size_t i = 0; rc == 0 && i < sizeof expert_keys / sizeof expert_keys[0]; i++) {
        int found;
        rc = get_count(root, text, expert_keys[i], fname, 65536, &m->experts, &found);
        if (rc == 0 && found) {
            char what[300];
            snprintf(what, sizeof what, "%s '%s'", fname, expert_keys[i]);
            rc = pack_meta_set(&m->experts_from, what);
            break;
        }
    }
    /* gpt-oss calls it experts_per_token. */
    static const char *const topk_keys[] = {"num_experts_per_tok", "experts_per_token"};
    for (size_t i = 0; rc == 0 && i < sizeof topk_keys / sizeof topk_keys[0]; i++) {
        int found;
        rc = get_count(root, text, topk_keys[i], fname, 65536, &m->top_k, &found);
        if (found)
            break;
    }

    struct json_object *q = NULL;
    if (rc == 0 && json_object_object_get_ex(root, "quantization", &q) && q) {
        if (!json_object_is_type(q, json_type_object)) {
            rc = smoe__fail(SMOE_EFORMAT, "%s: 'quantization' must be an object", fname);
        } else {
            uint32_t bits = 0, group = 0;
            rc = get_count(q, NULL, "bits", fname, 8, &bits, NULL);
            if (rc == 0)
                rc = get_count(q, NULL, "group_size", fname, 1u << 20, &group, NULL);
            if (rc == 0 && bits && (bits == 1 || bits == 7))
                rc = smoe__fail(SMOE_EFORMAT, "%s: quantization 'bits' %" PRIu32 ": expected "
                                "2, 3, 4, 5, 6 or 8", fname, bits);
            if (rc == 0 && (bits == 0) != (group == 0))
                rc = smoe__fail(SMOE_EFORMAT, "%s: 'quantization' needs both 'bits' and "
                                "'group_size'", fname);
            m->quant_bits = bits;
            m->quant_group = group;
        }
    }
    json_object_put(root);
    return rc;
}
