/*
 * hitcost.c - what making one expert slice present costs, per expert:
 *   copy cold   memcpy from a ring slot (16 KiB aligned) into pages given
 *               back before each copy: the page faults of a fresh page;
 *   copy warm   the same into populated pages: what the integration pays
 *               (its staging stays populated);
 *   move+copy   populated pages moved into place with mremap, filled, and
 *               moved back (a way to bound memory without faults; measured,
 *               not used);
 *   map         mapping the slot's pages of a memfd-backed ring over the
 *               slice (MAP_FIXED), which a ring the library backed with a
 *               file descriptor would allow, and map+read with the first
 *               read of each page (its fault).
 * Each is timed over N rounds cycling through R slots, so the source is not
 * in the CPU cache.
 *
 * Build: cc -O2 -o hitcost hitcost.c    Run: hitcost [BYTES...]
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 16
#define ROUNDS 64

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void touch_read(const uint8_t *p, size_t n, volatile uint64_t *sink)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += 4096)
        s += p[i];
    *sink += s;
}

int main(int argc, char **argv)
{
    static const size_t def[] = {884736, 1671168, 4406400};
    size_t nsz = argc > 1 ? (size_t)(argc - 1) : 3;
    volatile uint64_t sink = 0;
    printf("%12s %14s %14s %14s %14s %14s\n", "bytes", "copy cold us", "copy warm us",
           "move+copy us", "map us", "map+read us");
    for (size_t z = 0; z < nsz; z++) {
        size_t n = argc > 1 ? strtoull(argv[z + 1], NULL, 10) : def[z];
        size_t stride = (n + 16383) / 16384 * 16384;
        int fd = memfd_create("ring", 0);
        if (fd < 0 || ftruncate(fd, (off_t)(stride * SLOTS)) < 0) {
            perror("memfd");
            return 1;
        }
        uint8_t *ring = mmap(NULL, stride * SLOTS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        uint8_t *dst = mmap(NULL, stride * SLOTS, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (ring == MAP_FAILED || dst == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        for (size_t i = 0; i < stride * SLOTS; i++)
            ring[i] = (uint8_t)(i * 131u);
        double cold = 0, warm = 0, move = 0, map = 0, mapread = 0;
        size_t mlen = n / 4096 * 4096; /* whole pages only: slices here start page aligned */
        uint8_t *pool = mmap(NULL, mlen, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (pool == MAP_FAILED) {
            perror("mmap pool");
            return 1;
        }
        for (int r = 0; r < ROUNDS; r++) {
            size_t s = (size_t)r % SLOTS;
            madvise(dst + s * stride, stride, MADV_DONTNEED);
            double t0 = now_us();
            memcpy(dst + s * stride, ring + s * stride, n);
            cold += now_us() - t0;
            t0 = now_us();
            memcpy(dst + s * stride, ring + ((s + 1) % SLOTS) * stride, n);
            warm += now_us() - t0;
        }
        for (int r = 0; r < ROUNDS; r++) {
            size_t s = (size_t)r % SLOTS;
            madvise(dst + s * stride, stride, MADV_DONTNEED);
            double t0 = now_us();
            /* populated pages of the pool moved in, filled, moved back */
            if (mremap(pool, mlen, mlen, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                       dst + s * stride) == MAP_FAILED) {
                perror("mremap");
                return 1;
            }
            memcpy(dst + s * stride, ring + s * stride, n);
            if (mremap(dst + s * stride, mlen, mlen,
                       MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, pool) == MAP_FAILED) {
                perror("mremap back");
                return 1;
            }
            move += now_us() - t0;
        }
        for (int r = 0; r < ROUNDS; r++) {
            size_t s = (size_t)r % SLOTS;
            double t0 = now_us();
            void *p = mmap(dst + s * stride, stride, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
                           (off_t)(((s + 3) % SLOTS) * stride));
            if (p == MAP_FAILED) {
                perror("mmap fixed");
                return 1;
            }
            map += now_us() - t0;
            touch_read(dst + s * stride, n, &sink); /* the faults the first read pays */
            mapread += now_us() - t0;
        }
        printf("%12zu %14.1f %14.1f %14.1f %14.1f %14.1f\n", n, cold / ROUNDS, warm / ROUNDS,
               move / ROUNDS, map / ROUNDS, mapread / ROUNDS);
        munmap(pool, mlen);
        munmap(ring, stride * SLOTS);
        munmap(dst, stride * SLOTS);
        close(fd);
    }
    return sink == 42;
}
