/*
 * plugin_idle.c - serve mode: tell the stream when llama.cpp is busy
 * (smoe_set_busy), so that the popularity pre-warm runs while a server
 * waits for requests and pauses while one runs.
 *
 * A token's graph runs in parts (splits): the plugin's part, then the CPU
 * backend's, and so on. The stream turns busy at the first part and idle
 * once no part has run for SP_IDLE_MS, judged by a thread that sleeps
 * between checks.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdatomic.h>
#include <time.h>

#include "plugin.h"

static atomic_int busy;           /* the stream was told busy */
static atomic_uint_fast64_t last; /* end of the last graph part, ns */
static atomic_int stop;
static pthread_t watcher;
static int started;

static void *watch(void *arg)
{
    (void)arg;
    struct timespec ts = {0, SP_IDLE_MS * 1000000L / 2};
    while (!atomic_load(&stop)) {
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&sp_g.lock);
        if (atomic_load(&busy) && sp_now_ns() - atomic_load(&last) > SP_IDLE_MS * 1000000ull) {
            smoe_set_busy(sp_g.s, 0);
            atomic_store(&busy, 0);
        }
        pthread_mutex_unlock(&sp_g.lock);
    }
    return NULL;
}

/* Called with sp_g.lock held. */
void sp_busy_begin(void)
{
    if (!sp_g.s || atomic_load(&busy))
        return;
    smoe_set_busy(sp_g.s, 1);
    atomic_store(&busy, 1);
    if (!started)
        started = pthread_create(&watcher, NULL, watch, NULL) == 0;
}

void sp_busy_end(void)
{
    atomic_store(&last, sp_now_ns());
}

void sp_idle_stop(void)
{
    if (!started)
        return;
    atomic_store(&stop, 1);
    pthread_join(watcher, NULL);
    started = 0;
}
