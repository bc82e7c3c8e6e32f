/*
 * plugin_reg.c - the registry "SMOE", its device and backend, and the
 * entry point ggml_backend_load() looks for (ggml_backend_init).
 *
 * Without SMOE_VAULT the registry has no device and llama.cpp runs as if
 * the library were absent. With it, one ACCEL device whose buffer type is
 * "SMOE"; its backend takes the nodes that read expert tensors placed
 * there (plugin_compute.c) and computes them with a CPU backend of its own
 * (ggml_backend_cpu_init, the same libggml-cpu as llama.cpp's: with OpenMP
 * both use the one OpenMP pool, and the two never compute at once, as the
 * scheduler runs one split at a time), given llama's thread count and
 * abort callback through the registry's procs.
 *
 * SPDX-License-Identifier: MIT
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "plugin.h"

/* ---- configuration ---- */

static int env_u64(const char *name, uint64_t max, uint64_t *out)
{
    const char *v = getenv(name);
    *out = 0;
    if (!v || !*v)
        return 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || x > max) {
        snprintf(sp_g.err, sizeof sp_g.err, "%s=%s: expected a whole number up to %" PRIu64,
                 name, v, max);
        sp_g.failed = 1;
        return -1;
    }
    *out = x;
    return 0;
}

static void read_conf(void)
{
    sp_conf *c = &sp_g.conf;
    c->vault = getenv("SMOE_VAULT");
    if (c->vault && !*c->vault)
        c->vault = NULL;
    c->stats = getenv("SMOE_STATS");
    uint64_t x;
    if (env_u64("SMOE_RING_SLOTS", UINT32_MAX, &x) == 0)
        c->ring_slots = (uint32_t)x;
    if (env_u64("SMOE_RING_MB", UINT64_MAX >> 20, &x) == 0)
        c->ring_mb = x;
    if (env_u64("SMOE_WORKERS", 1024, &x) == 0)
        c->workers = (uint32_t)x;
    const char *v = getenv("SMOE_VERIFY");
    if (v && (!strcmp(v, "1") || !strcmp(v, "on")))
        c->verify = SMOE_VERIFY_ON;
    else if (v && (!strcmp(v, "0") || !strcmp(v, "off")))
        c->verify = SMOE_VERIFY_OFF;
    else if (v && *v) {
        snprintf(sp_g.err, sizeof sp_g.err, "SMOE_VERIFY=%s: expected on, off, 1 or 0", v);
        sp_g.failed = 1;
    }
    v = getenv("SMOE_LOOKAHEAD");
    c->lookahead = v && *v && strcmp(v, "0") && strcmp(v, "off");
    c->replay = getenv("SMOE_REPLAY");
    if (c->replay && *c->replay && c->vault && !sp_g.failed && sp_replay_init(c->replay) < 0)
        sp_g.failed = 1;
    if (sp_g.failed)
        sp_log_error("%s", sp_g.err);
    if (c->vault) {
        char ring[64];
        if (c->ring_slots)
            snprintf(ring, sizeof ring, "of %" PRIu32 " slots", c->ring_slots);
        else if (c->ring_mb)
            snprintf(ring, sizeof ring, "of %" PRIu64 " MiB", c->ring_mb);
        else
            snprintf(ring, sizeof ring, "sized at load");
        snprintf(sp_g.desc, sizeof sp_g.desc, "smoe_stream: vault %s, ring %s, lookahead %s",
                 c->vault, ring, c->lookahead ? "on" : "off");
    }
}

/* ---- backend ---- */

typedef struct sp_backend {
    ggml_backend_t cpu;
} sp_backend;

static const char *be_name(ggml_backend_t b)
{
    (void)b;
    return "SMOE";
}

static void be_free(ggml_backend_t b)
{
    sp_backend *sb = b->context;
    ggml_backend_free(sb->cpu);
    free(sb);
    free(b);
}

static enum ggml_status be_graph_compute(ggml_backend_t b, struct ggml_cgraph *g)
{
    sp_backend *sb = b->context;
    pthread_mutex_lock(&sp_g.lock);
    sp_busy_begin();
    enum ggml_status st = sp_graph_compute(sb->cpu, g);
    sp_busy_end();
    pthread_mutex_unlock(&sp_g.lock);
    return st;
}

static const struct ggml_backend_i be_iface = {
    .get_name = be_name,
    .free = be_free,
    .graph_compute = be_graph_compute,
};

static ggml_guid_t be_guid(void)
{
    static ggml_guid guid = {0x53, 0x4d, 0x4f, 0x45, 0x2d, 0x73, 0x74, 0x72,
                             0x65, 0x61, 0x6d, 0x2d, 0x67, 0x67, 0x6d, 0x6c};
    return &guid;
}

static void set_n_threads(ggml_backend_t b, int n)
{
    if (b->iface.get_name == be_name)
        ggml_backend_cpu_set_n_threads(((sp_backend *)b->context)->cpu, n);
}

static void set_abort(ggml_backend_t b, ggml_abort_callback cb, void *data)
{
    if (b->iface.get_name == be_name)
        ggml_backend_cpu_set_abort_callback(((sp_backend *)b->context)->cpu, cb, data);
}

/* ---- device ---- */

static struct ggml_backend_device sp_dev;

static const char *dev_name(ggml_backend_dev_t d)
{
    (void)d;
    return "SMOE";
}

static const char *dev_desc(ggml_backend_dev_t d)
{
    (void)d;
    return sp_g.desc;
}

static void dev_memory(ggml_backend_dev_t d, size_t *free_b, size_t *total)
{
    (void)d;
    *free_b = *total = (size_t)(sp_g.s ? sp_g.rr.length : 0);
}

static enum ggml_backend_dev_type dev_type(ggml_backend_dev_t d)
{
    (void)d;
    return GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

static void dev_props(ggml_backend_dev_t d, struct ggml_backend_dev_props *p)
{
    memset(p, 0, sizeof *p);
    p->name = dev_name(d);
    p->description = dev_desc(d);
    dev_memory(d, &p->memory_free, &p->memory_total);
    p->type = GGML_BACKEND_DEVICE_TYPE_ACCEL;
}

static ggml_backend_t dev_init(ggml_backend_dev_t d, const char *params)
{
    (void)params;
    sp_backend *sb = calloc(1, sizeof *sb);
    ggml_backend_t b = calloc(1, sizeof *b);
    if (sb)
        sb->cpu = ggml_backend_cpu_init();
    if (!sb || !b || !sb->cpu) {
        sp_log_error("cannot create the SMOE backend's CPU backend");
        if (sb && sb->cpu)
            ggml_backend_free(sb->cpu);
        free(sb);
        free(b);
        return NULL;
    }
    b->guid = be_guid();
    b->iface = be_iface;
    b->device = d;
    b->context = sb;
    return b;
}

static ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t d)
{
    (void)d;
    return sp_buft();
}

static bool dev_supports_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    (void)d;
    return sp_supports_op(op);
}

static bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t bt)
{
    (void)d;
    /* host buffers too: activations and routing ids are read in place */
    return bt == sp_buft() || ggml_backend_buft_is_host(bt);
}

static bool dev_offload_op(ggml_backend_dev_t d, const struct ggml_tensor *op)
{
    (void)d, (void)op;
    return false;
}

static const struct ggml_backend_device_i dev_iface = {
    .get_name = dev_name,
    .get_description = dev_desc,
    .get_memory = dev_memory,
    .get_type = dev_type,
    .get_props = dev_props,
    .init_backend = dev_init,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
    .offload_op = dev_offload_op,
};

/* At exit: the claims back, the counters out, the histogram saved (smoe_close). */
static void close_at_exit(void)
{
    sp_idle_stop();
    if (sp_g.s) {
        sp_release_all();
        sp_write_stats();
        sp_look_free();
        smoe_close(sp_g.s);
        sp_g.s = NULL;
    }
    sp_replay_free();
}

/* ---- registry ---- */

static const char *reg_name(ggml_backend_reg_t r)
{
    (void)r;
    return "SMOE";
}

static size_t reg_dev_count(ggml_backend_reg_t r)
{
    (void)r;
    return sp_g.conf.vault ? 1 : 0;
}

static ggml_backend_dev_t reg_dev_get(ggml_backend_reg_t r, size_t i)
{
    (void)r;
    return i == 0 && sp_g.conf.vault ? &sp_dev : NULL;
}

static void *reg_proc(ggml_backend_reg_t r, const char *name)
{
    (void)r;
    if (!strcmp(name, "ggml_backend_set_n_threads"))
        return (void *)set_n_threads;
    if (!strcmp(name, "ggml_backend_set_abort_callback"))
        return (void *)set_abort;
    return NULL;
}

static struct ggml_backend_reg sp_reg = {
    .api_version = GGML_BACKEND_API_VERSION,
    .iface = {
        .get_name = reg_name,
        .get_device_count = reg_dev_count,
        .get_device = reg_dev_get,
        .get_proc_address = reg_proc,
    },
    .context = NULL,
};

#if defined(_WIN32) /* the DLL's one export: the rest stays inside */
__declspec(dllexport) ggml_backend_reg_t ggml_backend_init(void);
#else
ggml_backend_reg_t ggml_backend_init(void) __attribute__((visibility("default")));
#endif
ggml_backend_reg_t ggml_backend_init(void)
{
    static int once;
    if (!once) {
        once = 1;
        read_conf();
        sp_dev.iface = dev_iface;
        sp_dev.reg = &sp_reg;
        sp_buft()->device = &sp_dev;
        atexit(close_at_exit);
    }
    return &sp_reg;
}
