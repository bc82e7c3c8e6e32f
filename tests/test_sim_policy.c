/*
 * Description: the offline eviction-policy replay (tools/smoe/sim/sim_policy.c)
 * picks exactly the victims worked out by hand on small step sequences:
 * lru the oldest, lfu the least decayed count, layer the entry whose
 * layer comes round last, reuse the lowest learned chance of reuse less
 * the layer distance (idle keys of the current layer count as maybe next);
 * a step never evicts what it asked for; reuse learns from what it sees;
 * one-shot reads flush lru but not lfu or reuse; lru agrees with sim.c's
 * LRU and no policy beats Belady on random sequences; and a trace is cut
 * into decode, grouped and shuffled steps with the same requests, plus
 * one-shot reads when asked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim.h"
#include "sim_policy.h"
#include "trace.h"

#define NO SIMP_NONE

/*
 * Steps from text: "l:e,e l:e ..." is step (layer l, experts e, e), and
 * so on; keys are l * experts + e.
 */
static void mk(simp_steps *st, uint32_t layers, uint32_t experts, const char *spec)
{
    memset(st, 0, sizeof *st);
    st->layers = layers;
    st->experts = experts;
    size_t cap = strlen(spec) + 1;
    st->layer = calloc(cap, sizeof *st->layer);
    st->off = calloc(cap + 1, sizeof *st->off);
    st->keys = calloc(cap, sizeof *st->keys);
    assert_non_null(st->layer);
    assert_non_null(st->off);
    assert_non_null(st->keys);
    const char *p = spec;
    size_t nk = 0;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        char *end;
        unsigned long l = strtoul(p, &end, 10);
        assert_true(end != p && *end == ':');
        p = end + 1;
        for (;;) {
            unsigned long e = strtoul(p, &end, 10);
            assert_true(end != p);
            st->keys[nk++] = (uint32_t)(l * experts + e);
            p = end;
            if (*p != ',')
                break;
            p++;
        }
        st->layer[st->n_steps] = (uint32_t)l;
        st->off[++st->n_steps] = nk;
    }
}

/* Run and return the victims (caller frees). */
static uint32_t *run(const simp_steps *st, uint32_t slots, const simp_params *p,
                     sim_result *r, simp_report *rep)
{
    uint32_t *v = malloc((simp_steps_requests(st) + 1) * sizeof *v);
    assert_non_null(v);
    assert_int_equal(simp_run(st, slots, p, r, v, rep), 0);
    return v;
}

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < SIMP_N_POLICIES; i++)
        assert_int_equal(simp_policy_from_name(simp_policy_name((simp_policy)i)), i);
    assert_int_equal(simp_policy_from_name("arc"), -1);
    assert_string_equal(simp_policy_name(SIMP_REUSE), "reuse");
}

/* lru: 0 1 | 4 | 2 with three slots: 2 evicts the oldest, 0. */
static void test_lru_victim(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 2, 4, "0:0,1 1:0 0:2");
    simp_params p;
    simp_params_default(&p, SIMP_LRU);
    sim_result r;
    uint32_t *v = run(&st, 3, &p, &r, NULL);
    assert_int_equal(r.requests, 4);
    assert_int_equal(r.hits, 0);
    assert_int_equal(v[0], NO);
    assert_int_equal(v[2], NO);
    assert_int_equal(v[3], 0);
    free(v);
    simp_steps_free(&st);
}

/*
 * lfu, one layer, two slots: 0 | 0 | 1 | 2. Counts at the last step:
 * key 0 (1 + 0.98) * 0.98^2, key 1 0.98: key 1 goes, where lru would
 * evict key 0.
 */
static void test_lfu_victim(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 1, 4, "0:0 0:0 0:1 0:2");
    simp_params p;
    simp_params_default(&p, SIMP_LFU);
    sim_result r;
    uint32_t *v = run(&st, 2, &p, &r, NULL);
    assert_int_equal(r.hits, 1);
    assert_int_equal(v[3], 1);
    free(v);
    simp_params_default(&p, SIMP_LRU);
    v = run(&st, 2, &p, &r, NULL);
    assert_int_equal(v[3], 0);
    free(v);
    simp_steps_free(&st);
}

/*
 * A step never evicts what it asked for: two slots and a step of three
 * experts. The third finds both pinned and is not inserted; the next step
 * asks for it again, misses, and evicts the oldest.
 */
static void test_pins(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 1, 4, "0:0,1,2 0:2");
    for (int pol = 0; pol < SIMP_N_POLICIES; pol++) {
        simp_params p;
        simp_params_default(&p, (simp_policy)pol);
        sim_result r;
        simp_report rep;
        uint32_t *v = run(&st, 2, &p, &r, &rep);
        assert_int_equal(r.requests, 4);
        assert_int_equal(r.hits, 0);
        assert_int_equal(rep.no_victim, 1);
        assert_int_equal(rep.evictions, 1);
        assert_int_equal(v[2], NO);
        assert_true(v[3] == 0 || v[3] == 1);
        free(v);
    }
    simp_steps_free(&st);
}

/*
 * layer, four layers of two experts, three slots, one expert per layer:
 * at layer 3 the entries of layers 0, 1, 2 have 1/4, 2/4 and 3/4 of the
 * cycle to go; layer 2's (key 4) goes. lru would take layer 0's.
 */
static void test_layer_victim(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 4, 2, "0:0 1:0 2:0 3:0");
    simp_params p;
    simp_params_default(&p, SIMP_LAYER);
    sim_result r;
    uint32_t *v = run(&st, 3, &p, &r, NULL);
    assert_int_equal(v[3], 4);
    free(v);
    simp_steps_free(&st);
}

static const double zero_w[SIMP_REUSE_W] = {0};

/* reuse with every weight 0 ranks by distance alone, as layer does. */
static void test_reuse_distance(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 4, 2, "0:0 1:0 2:0 3:0");
    simp_params p;
    simp_params_default(&p, SIMP_REUSE);
    p.weights = zero_w;
    p.rate = 0;
    sim_result r;
    uint32_t *v = run(&st, 3, &p, &r, NULL);
    assert_int_equal(v[3], 4);
    free(v);
    simp_steps_free(&st);
}

/*
 * reuse with only the "used at the last visit" weight: two layers of four
 * experts, four slots. Layer 1 asks for 0 then 1, so at the fifth step
 * key 4 (layer 1, expert 0) sat out its last visit while 0, 1 and 5 did
 * not: key 4 goes although it is not the oldest (key 0 is).
 */
static void test_reuse_history(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 2, 4, "0:0,1 1:0 0:0,1 1:1 0:2");
    double w[SIMP_REUSE_W] = {0};
    w[2] = 1; /* bit 0: used at the previous visit */
    simp_params p;
    simp_params_default(&p, SIMP_REUSE);
    p.weights = w;
    p.rate = 0;
    p.lambda = 0;
    sim_result r;
    uint32_t *v = run(&st, 4, &p, &r, NULL);
    assert_int_equal(r.hits, 2);
    assert_int_equal(v[6], 4);
    free(v);
    simp_steps_free(&st);
}

/*
 * The current layer: two layers, four slots; the last step (layer 0)
 * asks for 2 then 1. With distance alone, the idle keys of layer 0 (0
 * and 1) may still be asked for in this step: distance 0, kept; layer 1's
 * keys have half a cycle to go and the older, 4, goes. Counting the
 * current layer as passed (no_current) puts 0 and 1 a full cycle away and
 * the older, 0, goes instead. Either way 1 stays and hits.
 */
static void test_reuse_current_layer(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 2, 4, "0:0,1 1:0 0:0,1 1:1 0:2,1");
    simp_params p;
    simp_params_default(&p, SIMP_REUSE);
    p.weights = zero_w;
    p.rate = 0;
    sim_result r;
    uint32_t *v = run(&st, 4, &p, &r, NULL);
    assert_int_equal(v[6], 4);
    assert_int_equal(r.hits, 3);
    free(v);
    p.no_current = 1;
    v = run(&st, 4, &p, &r, NULL);
    assert_int_equal(v[6], 0);
    assert_int_equal(r.hits, 3);
    free(v);
    simp_steps_free(&st);
}

/* reuse with only the count weight keeps the more used key, as lfu. */
static void test_reuse_frequency(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 1, 4, "0:0 0:0 0:1 0:2");
    double w[SIMP_REUSE_W] = {0};
    w[1] = 1;
    simp_params p;
    simp_params_default(&p, SIMP_REUSE);
    p.weights = w;
    p.rate = 0;
    sim_result r;
    uint32_t *v = run(&st, 2, &p, &r, NULL);
    assert_int_equal(v[3], 1);
    free(v);
    simp_steps_free(&st);
}

/*
 * Learning: one layer of eight experts; experts 0..3 are asked for at
 * every visit, 4 and 5 at every other one. So "used two visits ago"
 * predicts a use and "used at the last visit" alone does not (4 and 5
 * never come twice in a row): from zero, the weight of history bit 1
 * grows well past bit 0's. With rate 0 nothing moves.
 */
static void test_reuse_learns(void **state)
{
    (void)state;
    char spec[8192];
    size_t n = 0;
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "0:0,1,2,3,%d ", 4 + i % 2);
    simp_steps st;
    mk(&st, 1, 8, spec);
    simp_params p;
    simp_params_default(&p, SIMP_REUSE);
    p.weights = zero_w;
    sim_result r;
    simp_report rep;
    assert_int_equal(simp_run(&st, 6, &p, &r, NULL, &rep), 0);
    assert_true(rep.weights[3] > 0.4);
    assert_true(rep.weights[3] > rep.weights[2] + 0.3);
    p.rate = 0;
    assert_int_equal(simp_run(&st, 6, &p, &r, NULL, &rep), 0);
    for (int i = 0; i < SIMP_REUSE_W; i++)
        assert_true(rep.weights[i] == 0.0);
    simp_steps_free(&st);
}

/*
 * One-shot reads: one layer, two slots; 0 | 0, then a one-shot read of 5
 * | 1 | 0. lru keeps the one-shot (the fresher tick) and evicts 0, so the
 * last request misses; lfu and reuse see 5 has no demand history and
 * evict it instead. One-shots are not requests.
 */
static void test_one_shot(void **state)
{
    (void)state;
    simp_steps st;
    mk(&st, 1, 8, "0:0 0:0 0:1 0:0");
    st.one_off = calloc(st.n_steps + 1, sizeof *st.one_off);
    st.one_keys = calloc(1, sizeof *st.one_keys);
    assert_non_null(st.one_off);
    assert_non_null(st.one_keys);
    st.one_keys[0] = 5;
    st.one_off[2] = st.one_off[3] = st.one_off[4] = 1; /* after the second step */
    static const struct {
        simp_policy pol;
        uint32_t victim;
        uint64_t hits;
    } want[] = {{SIMP_LRU, 0, 1}, {SIMP_LFU, 5, 2}, {SIMP_REUSE, 5, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        simp_params p;
        simp_params_default(&p, want[i].pol);
        sim_result r;
        uint32_t *v = run(&st, 2, &p, &r, NULL);
        assert_int_equal(r.requests, 4);
        assert_int_equal(r.hits, want[i].hits);
        assert_int_equal(v[2], want[i].victim);
        free(v);
    }
    simp_steps_free(&st);
}

/* Same input, same victims: the choice is deterministic. */
static void test_deterministic(void **state)
{
    (void)state;
    char spec[65536];
    size_t n = 0;
    uint64_t x = 99;
    for (int s = 0; s < 600; s++) {
        n += (size_t)snprintf(spec + n, sizeof spec - n, "%d:", s % 6);
        uint32_t used = 0;
        for (int j = 0; j < 3; j++) {
            uint32_t e;
            do {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                e = (uint32_t)(x >> 33) % 8;
            } while (used & (1u << e));
            used |= 1u << e;
            n += (size_t)snprintf(spec + n, sizeof spec - n, j ? ",%u" : "%u", e);
        }
        spec[n++] = ' ';
        spec[n] = 0;
    }
    simp_steps st;
    mk(&st, 6, 8, spec);
    for (int pol = 0; pol < SIMP_N_POLICIES; pol++) {
        simp_params p;
        simp_params_default(&p, (simp_policy)pol);
        sim_result r1, r2;
        uint32_t *a = run(&st, 10, &p, &r1, NULL), *b = run(&st, 10, &p, &r2, NULL);
        assert_memory_equal(a, b, simp_steps_requests(&st) * sizeof *a);
        assert_int_equal(r1.hits, r2.hits);
        free(a);
        free(b);
    }
    simp_steps_free(&st);
}

/* One key per step: lru matches sim.c; nothing beats Belady. */
static void test_against_sim(void **state)
{
    (void)state;
    uint64_t x = 7;
    for (int round = 0; round < 20; round++) {
        uint32_t layers = 1 + (uint32_t)round % 5, experts = 3 + (uint32_t)round % 7;
        uint32_t slots = 1 + (uint32_t)(round * 3) % 12;
        char spec[16384];
        size_t n = 0;
        for (int s = 0; s < 1500; s++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t a = (uint32_t)(x >> 33) % experts, b = (uint32_t)(x >> 45) % experts;
            n += (size_t)snprintf(spec + n, sizeof spec - n, "%u:%u ", (uint32_t)s % layers,
                                  a < b ? a : b);
        }
        simp_steps st;
        mk(&st, layers, experts, spec);
        size_t nr = simp_steps_requests(&st);
        sim_result lru, opt;
        assert_int_equal(sim_lru_keys(st.keys, nr, layers * experts, slots, &lru), 0);
        assert_int_equal(sim_opt_keys(st.keys, nr, layers * experts, slots, &opt), 0);
        for (int pol = 0; pol < SIMP_N_POLICIES; pol++) {
            simp_params p;
            simp_params_default(&p, (simp_policy)pol);
            sim_result r;
            assert_int_equal(simp_run(&st, slots, &p, &r, NULL, NULL), 0);
            assert_int_equal(r.requests, nr);
            assert_true(r.hits <= opt.hits);
            if (pol == SIMP_LRU)
                assert_int_equal(r.hits, lru.hits);
        }
        simp_steps_free(&st);
    }
}

static void load(tool_trace *t, const char *text)
{
    const char *base = getenv("SMOE_TEST_TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/test_sim_policy.%d.trace", base && *base ? base : "/tmp",
             (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    char err[600];
    assert_int_equal(tool_trace_load(t, path, err, sizeof err), 0);
    unlink(path);
}

/* Three tokens of three layers; token 1 has no row for layer 1. */
static const char trace3[] = "# layers=3 experts=4 topk=2\n"
                             "0 0 1 2\n0 1 3 0\n0 2 0 1\n"
                             "1 0 2 3\n1 2 1 0\n"
                             "2 0 1 0\n2 1 3 2\n2 2 2 3\n";

static void test_steps_decode(void **state)
{
    (void)state;
    tool_trace t;
    load(&t, trace3);
    simp_shape sh = {0};
    simp_steps st;
    assert_int_equal(simp_steps_from_trace(&t, &sh, &st), 0);
    static const uint32_t want_layer[] = {0, 1, 2, 0, 2, 0, 1, 2};
    static const uint32_t want_keys[] = {1, 2, 7, 4, 8, 9, 2, 3, 9, 8, 1, 0, 7, 6, 10, 11};
    assert_int_equal(st.n_steps, 8);
    for (size_t s = 0; s < st.n_steps; s++) {
        assert_int_equal(st.layer[s], want_layer[s]);
        assert_int_equal(st.off[s + 1] - st.off[s], 2);
    }
    assert_int_equal(simp_steps_requests(&st), 16);
    assert_memory_equal(st.keys, want_keys, sizeof want_keys);
    simp_steps_free(&st);
    /* tokens 1 and 2 only */
    sh.tok_begin = 1;
    assert_int_equal(simp_steps_from_trace(&t, &sh, &st), 0);
    assert_int_equal(st.n_steps, 5);
    assert_memory_equal(st.keys, want_keys + 6, 10 * sizeof *st.keys);
    simp_steps_free(&st);
    tool_trace_free(&t);
}

/* Two tokens per step: the union of their experts at each layer. */
static void test_steps_grouped(void **state)
{
    (void)state;
    tool_trace t;
    load(&t, trace3);
    simp_shape sh = {0};
    sh.group = 2;
    simp_steps st;
    assert_int_equal(simp_steps_from_trace(&t, &sh, &st), 0);
    /* tokens 0+1: layer 0 {1,2,3}, layer 1 {3,0}, layer 2 {0,1}; token 2 alone */
    static const uint32_t want_off[] = {0, 3, 5, 7, 9, 11, 13};
    static const uint32_t want_keys[] = {1, 2, 3, 7, 4, 8, 9, 1, 0, 7, 6, 10, 11};
    assert_int_equal(st.n_steps, 6);
    for (size_t s = 0; s <= st.n_steps; s++)
        assert_int_equal(st.off[s], want_off[s]);
    assert_memory_equal(st.keys, want_keys, sizeof want_keys);
    simp_steps_free(&st);
    tool_trace_free(&t);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Shuffles reorder the same requests, the same way for the same seed. */
static void test_steps_shuffled(void **state)
{
    (void)state;
    tool_trace t;
    load(&t, trace3);
    simp_shape plain = {0};
    simp_steps a;
    assert_int_equal(simp_steps_from_trace(&t, &plain, &a), 0);
    size_t n = simp_steps_requests(&a);
    qsort(a.keys, n, sizeof *a.keys, cmp_u32);
    for (int which = 0; which < 2; which++) {
        simp_shape sh = {0};
        if (which)
            sh.shuffle_layers = 5;
        else
            sh.shuffle_tokens = 5;
        simp_steps b, c;
        assert_int_equal(simp_steps_from_trace(&t, &sh, &b), 0);
        assert_int_equal(simp_steps_from_trace(&t, &sh, &c), 0);
        assert_int_equal(b.n_steps, a.n_steps);
        assert_int_equal(simp_steps_requests(&b), n);
        assert_memory_equal(b.keys, c.keys, n * sizeof *b.keys);
        for (size_t s = 0; s < b.n_steps; s++)
            for (size_t j = b.off[s]; j < b.off[s + 1]; j++)
                assert_int_equal(b.keys[j] / t.experts, b.layer[s]);
        qsort(b.keys, n, sizeof *b.keys, cmp_u32);
        assert_memory_equal(a.keys, b.keys, n * sizeof *a.keys);
        simp_steps_free(&b);
        simp_steps_free(&c);
    }
    simp_steps_free(&a);
    tool_trace_free(&t);
}

/* One-shot reads: n per step, none of the step's keys, none repeated,
 * the same for the same seed, demand requests untouched. */
static void test_steps_one_shot(void **state)
{
    (void)state;
    tool_trace t;
    load(&t, trace3);
    simp_shape sh = {0};
    simp_steps a, b, c;
    assert_int_equal(simp_steps_from_trace(&t, &sh, &a), 0);
    assert_null(a.one_off);
    sh.one_shot = 3;
    sh.one_shot_seed = 4;
    assert_int_equal(simp_steps_from_trace(&t, &sh, &b), 0);
    assert_int_equal(simp_steps_from_trace(&t, &sh, &c), 0);
    assert_int_equal(b.n_steps, a.n_steps);
    assert_memory_equal(b.keys, a.keys, simp_steps_requests(&a) * sizeof *a.keys);
    assert_non_null(b.one_off);
    assert_int_equal(b.one_off[b.n_steps], 3 * b.n_steps);
    assert_memory_equal(b.one_keys, c.one_keys, 3 * b.n_steps * sizeof *b.one_keys);
    for (size_t s = 0; s < b.n_steps; s++) {
        assert_int_equal(b.one_off[s + 1] - b.one_off[s], 3);
        for (size_t j = b.one_off[s]; j < b.one_off[s + 1]; j++) {
            assert_true(b.one_keys[j] < t.layers * t.experts);
            for (size_t i = b.off[s]; i < b.off[s + 1]; i++)
                assert_int_not_equal(b.one_keys[j], b.keys[i]);
            for (size_t i = b.one_off[s]; i < j; i++)
                assert_int_not_equal(b.one_keys[j], b.one_keys[i]);
        }
    }
    simp_steps_free(&a);
    simp_steps_free(&b);
    simp_steps_free(&c);
    tool_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_lru_victim),
        cmocka_unit_test(test_lfu_victim),
        cmocka_unit_test(test_pins),
        cmocka_unit_test(test_layer_victim),
        cmocka_unit_test(test_reuse_distance),
        cmocka_unit_test(test_reuse_history),
        cmocka_unit_test(test_reuse_current_layer),
        cmocka_unit_test(test_reuse_frequency),
        cmocka_unit_test(test_reuse_learns),
        cmocka_unit_test(test_one_shot),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_against_sim),
        cmocka_unit_test(test_steps_decode),
        cmocka_unit_test(test_steps_grouped),
        cmocka_unit_test(test_steps_shuffled),
        cmocka_unit_test(test_steps_one_shot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
