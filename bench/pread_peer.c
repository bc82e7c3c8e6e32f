/*
 * pread_peer.c - the disk's speed into memory the way a warm-up must use
 * it: W threads, each reading its own contiguous share of a file with
 * direct pread in requests of B bytes, each request into its own place of
 * one buffer as large as the shares (2 MiB aligned, transparent huge pages,
 * faulted in before the clock starts, as the ring is at smoe_open). With
 * --reuse every request of a thread goes into the same B bytes instead, as
 * fio's buffers do. bench_read.sh runs both beside fio and the library.
 *
 * On a virtual machine the two differ (docs/benchmarks.md, "Cold
 * throughput"): a DMA into pages the host touched last long ago costs more
 * than into one hot buffer, and a loader filling a ring cannot reuse one.
 *
 * Usage: pread_peer FILE WORKERS BLOCK OFFSET BYTES [--reuse]
 * Prints: {"gb_per_s": X, "bytes": N, "seconds": S}
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define HUGE_ALIGN (2ull << 20)

typedef struct peer {
    const char *path;
    uint64_t block, offset, share;
    uint8_t *buf;
    int reuse;
} peer;

typedef struct job {
    const peer *p;
    uint32_t id;
    int err;
    pthread_t t;
} job;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *read_share(void *arg)
{
    job *j = arg;
    const peer *p = j->p;
    int fd = open(p->path, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        j->err = errno;
        return NULL;
    }
    const uint64_t base = p->offset + j->id * p->share;
    for (uint64_t o = 0; o < p->share && !j->err; o += p->block) {
        uint8_t *dst = p->buf + (p->reuse ? j->id * p->block : j->id * p->share + o);
        ssize_t n = pread(fd, dst, p->block, (off_t)(base + o));
        if (n != (ssize_t)p->block)
            j->err = n < 0 ? errno : EIO;
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: pread_peer FILE WORKERS BLOCK OFFSET BYTES [--reuse]\n");
        return 2;
    }
    peer p = {argv[1], strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0), 0, NULL,
              argc > 6 && !strcmp(argv[6], "--reuse")};
    const uint32_t w = (uint32_t)strtoul(argv[2], NULL, 0);
    const uint64_t bytes = strtoull(argv[5], NULL, 0);
    if (!w || w > 1024 || !p.block || p.block % 4096 || p.offset % 4096) {
        fprintf(stderr, "pread_peer: WORKERS 1..1024, BLOCK and OFFSET multiples of 4096\n");
        return 2;
    }
    p.share = bytes / w / p.block * p.block;
    const uint64_t len = p.reuse ? (uint64_t)w * p.block : (uint64_t)w * p.share;
    uint8_t *m = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || !p.share) {
        fprintf(stderr, "pread_peer: cannot map %llu bytes\n", (unsigned long long)len);
        return 1;
    }
    p.buf = (uint8_t *)(((uintptr_t)m + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
#ifdef MADV_HUGEPAGE
    madvise(p.buf, len, MADV_HUGEPAGE);
#endif
    for (uint64_t o = 0; o < len; o += 4096) /* faulted in before the clock */
        p.buf[o] = 1;
    job *j = calloc(w, sizeof *j);
    if (!j)
        return 1;
    const double t0 = now_s();
    for (uint32_t i = 0; i < w; i++) {
        j[i] = (job){&p, i, 0, 0};
        if (pthread_create(&j[i].t, NULL, read_share, &j[i]))
            return 1;
    }
    int err = 0;
    for (uint32_t i = 0; i < w; i++) {
        pthread_join(j[i].t, NULL);
        err = err ? err : j[i].err;
    }
    const double s = now_s() - t0;
    if (err) {
        fprintf(stderr, "pread_peer: %s: %s\n", p.path, strerror(err));
        return 1;
    }
    const uint64_t total = (uint64_t)w * p.share;
    printf("{\"gb_per_s\": %.4f, \"bytes\": %llu, \"seconds\": %.4f}\n", (double)total / s / 1e9,
           (unsigned long long)total, s);
    free(j);
    return 0;
}
