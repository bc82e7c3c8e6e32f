/* os_posix.c - os.h on Linux and macOS. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "os.h"

void tool_os_cpu(double *user, double *sys)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0) {
        *user = *sys = 0.0;
        return;
    }
    *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

uint64_t tool_os_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0)
        return 0;
#if defined(__APPLE__)
    return (uint64_t)ru.ru_maxrss; /* bytes on macOS */
#else
    return (uint64_t)ru.ru_maxrss * 1024; /* KiB on Linux */
#endif
}

uint64_t tool_os_rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, rss = 0;
    int n = fscanf(f, "%llu %llu", &size, &rss);
    fclose(f);
    return n == 2 ? rss * (uint64_t)tool_os_page() : 0;
}

uint64_t tool_os_storage_read_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "read_bytes: %llu", &v) == 1)
            break;
    fclose(f);
    return v;
}

size_t tool_os_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

void *tool_os_map_file(const char *path, uint64_t len, int *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0);
    *err = m == MAP_FAILED ? errno : 0;
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

void tool_os_unmap(void *m, uint64_t len)
{
    munmap(m, (size_t)len);
}

int tool_os_can_probe(void)
{
    return 1;
}

int tool_os_resident(const void *at, uint64_t len, unsigned char *vec)
{
    size_t page = tool_os_page();
    uint64_t pages = (len + page - 1) / page;
    /* mincore's vector is unsigned char on Linux and char on macOS */
    if (len && mincore((void *)at, (size_t)len, (void *)vec) < 0)
        return 0;
    for (uint64_t j = 0; j < pages; j++)
        if (!(vec[j] & 1))
            return 0;
    return 1;
}

void tool_os_map_advise(void *at, uint64_t len, int willneed)
{
    (void)posix_madvise(at, (size_t)len, willneed ? POSIX_MADV_WILLNEED : POSIX_MADV_RANDOM);
}

void *tool_os_aligned_alloc(size_t align, size_t n)
{
    void *p;
    return posix_memalign(&p, align, n) ? NULL : p;
}

void tool_os_aligned_free(void *p)
{
    free(p);
}

int tool_os_privileged(void)
{
    return geteuid() == 0;
}

void tool_os_on_interrupt(void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn ? fn : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

char *tool_os_realpath(const char *path)
{
    return realpath(path, NULL);
}
