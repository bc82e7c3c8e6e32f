/*
 * proc.h - processes and directory listings (proc_posix.c), for the
 * popularity histogram's temporary files, which carry the id of the
 * process that wrote them (freq_tmp.c); and the open-file limit that
 * bounds a stream's descriptors (source.c). proc_posix.c, proc_win32.c.
 */
#ifndef SMOE_PROC_H
#define SMOE_PROC_H

#include <stdint.h>

/* This process's id. */
long smoe__proc_self(void);
/* 1 when no process with id pid exists; 0 when one does, or when that
 * cannot be told (a process of another user). */
int smoe__proc_gone(long pid);
/* Call fn(u, name) for each entry of the directory dir, "." and ".."
 * included. @return 0, or -1 when dir cannot be read. */
int smoe__dir_each(const char *dir, void (*fn)(void *u, const char *name), void *u);
/* How many files the process may hold open (the soft RLIMIT_NOFILE);
 * UINT64_MAX when unlimited or unknown. */
uint64_t smoe__proc_open_max(void);

#endif
