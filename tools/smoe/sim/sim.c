/*
 * sim.c - LRU and Belady-optimal cache simulators over key sequences.
 *
 * LRU: a doubly linked list threaded through per-key arrays, most recent
 * at the head; a hit moves the key to the head, a miss evicts the tail.
 *
 * OPT: next[i] is the position of the next request for keys[i] (n when
 * none), computed in one backward pass. The cache is an indexed binary
 * max-heap on each cached key's next-use position: the root is the entry
 * requested farthest in the future, which Belady evicts. A hit moves the
 * key's next use forward (it only grows), so it sifts towards the root.
 * Invariants: heap[pos[k]] == k for every cached k, pos[k] == NONE for
 * every other k, and every parent's next use >= its children's.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define NONE UINT32_MAX

int sim_lru_keys(const uint32_t *keys, size_t n, uint32_t n_keys, uint32_t slots,
                 sim_result *out)
{
    memset(out, 0, sizeof *out);
    out->requests = n;
    uint32_t *prev = malloc((size_t)n_keys * sizeof *prev);
    uint32_t *next = malloc((size_t)n_keys * sizeof *next);
    unsigned char *in = calloc(n_keys ? n_keys : 1, 1);
    if (!prev || !next || !in) {
        free(prev);
        free(next);
        free(in);
        return -1;
    }
    uint32_t head = NONE, tail = NONE, used = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (in[k]) {
            out->hits++;
            if (head == k)
                continue;
            /* unlink, then push at the head */
            next[prev[k]] = next[k];
            if (next[k] != NONE)
                prev[next[k]] = prev[k];
            else
                tail = prev[k];
        } else {
            out->misses++;
            if (slots == 0)
                continue;
            if (used == slots) {
                uint32_t v = tail;
                in[v] = 0;
                tail = prev[v];
                if (tail != NONE)
                    next[tail] = NONE;
                else
                    head = NONE;
            } else {
                used++;
            }
            in[k] = 1;
        }
        prev[k] = NONE;
        next[k] = head;
        if (head != NONE)
            prev[head] = k;
        head = k;
        if (tail == NONE)
            tail = k;
    }
    free(prev);
    free(next);
    free(in);
    return 0;
}

typedef struct heap {
    uint32_t *h;     /* keys, heap-ordered by when[] */
    uint32_t *pos;   /* per key: index in h, or NONE */
    uint64_t *when;  /* per key: position of its next request */
    uint32_t size;
} heap;

static void heap_swap(heap *hp, uint32_t a, uint32_t b)
{
    uint32_t ka = hp->h[a], kb = hp->h[b];
    hp->h[a] = kb;
    hp->h[b] = ka;
    hp->pos[kb] = a;
    hp->pos[ka] = b;
}

static void sift_up(heap *hp, uint32_t i)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (hp->when[hp->h[parent]] >= hp->when[hp->h[i]])
            break;
        heap_swap(hp, i, parent);
        i = parent;
    }
}

static void sift_down(heap *hp, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, big = i;
        if (l < hp->size && hp->when[hp->h[l]] > hp->when[hp->h[big]])
            big = l;
        if (r < hp->size && hp->when[hp->h[r]] > hp->when[hp->h[big]])
            big = r;
        if (big == i)
            return;
        heap_swap(hp, i, big);
        i = big;
    }
}

int sim_opt_keys(const uint32_t *keys, size_t n, uint32_t n_keys, uint32_t slots,
                 sim_result *out)
{
    memset(out, 0, sizeof *out);
    out->requests = n;
    uint64_t *nxt = malloc((n ? n : 1) * sizeof *nxt);
    uint64_t *last = malloc((size_t)(n_keys ? n_keys : 1) * sizeof *last);
    heap hp = {0};
    hp.h = malloc((size_t)(slots ? slots : 1) * sizeof *hp.h);
    hp.pos = malloc((size_t)(n_keys ? n_keys : 1) * sizeof *hp.pos);
    hp.when = malloc((size_t)(n_keys ? n_keys : 1) * sizeof *hp.when);
    int rc = -1;
    if (!nxt || !last || !hp.h || !hp.pos || !hp.when)
        goto done;
    for (uint32_t k = 0; k < n_keys; k++) {
        last[k] = n;
        hp.pos[k] = NONE;
    }
    for (size_t i = n; i-- > 0;) {
        nxt[i] = last[keys[i]];
        last[keys[i]] = i;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = keys[i];
        if (hp.pos[k] != NONE) {
            out->hits++;
            hp.when[k] = nxt[i]; /* only grows: towards the root */
            sift_up(&hp, hp.pos[k]);
            continue;
        }
        out->misses++;
        if (slots == 0)
            continue;
        if (hp.size == slots) {
            uint32_t v = hp.h[0];
            hp.size--;
            if (hp.size) {
                heap_swap(&hp, 0, hp.size);
                sift_down(&hp, 0);
            }
            hp.pos[v] = NONE;
        }
        hp.when[k] = nxt[i];
        hp.h[hp.size] = k;
        hp.pos[k] = hp.size;
        hp.size++;
        sift_up(&hp, hp.size - 1);
    }
    rc = 0;
done:
    free(nxt);
    free(last);
    free(hp.h);
    free(hp.pos);
    free(hp.when);
    return rc;
}

size_t sim_trace_keys(const tool_trace *t, size_t n_tokens, uint32_t **out)
{
    if (n_tokens > t->n_tokens)
        n_tokens = t->n_tokens;
    size_t n = t->row_off[t->tok_row[n_tokens]];
    uint32_t *k = malloc((n ? n : 1) * sizeof *k);
    *out = k;
    if (!k)
        return 0;
    size_t j = 0;
    for (size_t r = 0; r < t->tok_row[n_tokens]; r++)
        for (uint32_t i = t->row_off[r]; i < t->row_off[r + 1]; i++)
            k[j++] = t->row_layer[r] * t->experts + t->ids[i];
    return j;
}
