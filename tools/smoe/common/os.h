/*
 * os.h - what the smoe tool asks of the operating system beyond the
 * library's platform layer (src/platform, used for every vault and source
 * read): process CPU and memory readings, read-only file mappings and their
 * page residency, aligned buffers, the interrupt handler, absolute paths.
 * os_posix.c implements it on Linux and macOS, os_win32.c on Windows.
 */
#ifndef SMOE_TOOL_OS_H
#define SMOE_TOOL_OS_H

#include <stddef.h>
#include <stdint.h>

/* CPU seconds this process has used, in user and system mode (0 when
 * unknown). */
void tool_os_cpu(double *user, double *sys);
/* Peak and current resident memory of this process in bytes (0: unknown). */
uint64_t tool_os_peak_rss(void);
uint64_t tool_os_rss_now(void);
/* Bytes this process has had read from storage (page-cache hits not
 * counted); 0 where the system does not say (Linux /proc/self/io only). */
uint64_t tool_os_storage_read_bytes(void);
/* The virtual memory page size. */
size_t tool_os_page(void);

/* The first len bytes of path mapped read-only, or NULL with the errno
 * value in *err. */
void *tool_os_map_file(const char *path, uint64_t len, int *err);
void tool_os_unmap(void *m, uint64_t len);
/* Whether the system can say which pages of a file mapping are in memory
 * (mincore): tool_os_resident is meaningful only where this is 1. */
int tool_os_can_probe(void);
/* 1 when every page of [at, at + len) is in memory, 0 when one is not or it
 * cannot be told; vec holds (len + page - 1) / page bytes. */
int tool_os_resident(const void *at, uint64_t len, unsigned char *vec);
/* Access advice for a mapping: the range will be needed now (willneed 1)
 * or the mapping is read at random (0). A hint: failure is ignored. */
void tool_os_map_advise(void *at, uint64_t len, int willneed);

/* n bytes aligned to align (a power of two), freed with tool_os_aligned_free;
 * NULL when out of memory. */
void *tool_os_aligned_alloc(size_t align, size_t n);
void tool_os_aligned_free(void *p);

/* Whether the process may drop the page cache and make cgroups (root). */
int tool_os_privileged(void);
/* Call fn on an interrupt (Ctrl-C, SIGTERM) instead of ending the process;
 * tool_os_on_interrupt(NULL) restores the default. fn may only set a flag. */
void tool_os_on_interrupt(void (*fn)(int));
/* The absolute, resolved form of the existing path (malloc'd), its
 * components separated by '/' (Windows: "C:/dir/file"), or NULL with errno
 * set. */
char *tool_os_realpath(const char *path);

#endif
