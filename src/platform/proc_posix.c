/* proc_posix.c - processes and directory listings (proc.h): getpid,
 * kill(pid, 0), opendir and readdir; getrlimit. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "proc.h"

long smoe__proc_self(void)
{
    return (long)getpid();
}

int smoe__proc_gone(long pid)
{
    /* Failing with anything but ESRCH (EPERM) means the process exists. */
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int smoe__dir_each(const char *dir, void (*fn)(void *u, const char *name), void *u)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        fn(u, e->d_name);
    closedir(d);
    return 0;
}

uint64_t smoe__proc_open_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)rl.rlim_cur;
}
