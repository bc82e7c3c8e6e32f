/*
 * posix_shim.h - the POSIX calls the test programs make that Windows' C
 * library lacks, force-included into every test source on Windows
 * (tests/CMakeLists.txt). Calls with a Windows counterpart are mapped to it
 * (pread, mkdtemp, mkdir, fdatasync); calls without one (fork, mincore,
 * mkfifo, pipe) skip the calling cmocka test with the reason, so what a
 * test cannot check under Windows shows as skipped, never as passed. Test
 * code only: the library itself uses the *_win32.c files of src/platform.
 */
#ifndef SMOE_POSIX_SHIM_H
#define SMOE_POSIX_SHIM_H

#include <direct.h>
#include <fcntl.h>
#include <io.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#define O_CLOEXEC 0
#define O_NONBLOCK 0
#define O_DIRECT 0
#define F_GETFD 1
#define F_SETFD 2
#define F_GETFL 3
#define F_SETFL 4
#define FD_CLOEXEC 1
#define F_OK 0
/* A process that is killed: Windows' raise(SIGTERM) ends it at once. */
#define SIGKILL SIGTERM
#define POSIX_FADV_DONTNEED 4
#define _SC_PAGESIZE 30

ssize_t pread(int fd, void *buf, size_t n, long long off);
ssize_t pwrite(int fd, const void *buf, size_t n, long long off);
char *mkdtemp(char *tmpl);
int shim_mkdir(const char *path, int mode);
#define mkdir(p, m) shim_mkdir((p), (m))
int fdatasync(int fd);
int fsync(int fd);
int posix_fadvise(int fd, long long off, long long len, int advice);
long sysconf(int name);
int fcntl(int fd, int cmd, ...);
int fork(void);
unsigned alarm(unsigned secs);
int mkfifo(const char *path, int mode);
int pipe(int fds[2]);
unsigned geteuid(void);
int dup2(int a, int b);
char *realpath(const char *path, char *resolved);
char *strndup(const char *s, size_t n);
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
/* A sleep of at least us microseconds: MinGW's usleep sleeps us / 1000
 * milliseconds, none at all below 1000, which turns a test's bounded wait
 * of 20000 x 500 us into a spin of a second or two. */
int shim_usleep(unsigned long long us);
#define usleep shim_usleep
/* The same for winpthreads' nanosleep, which sleeps whole milliseconds:
 * a fault table's 300 us delay per read (test_replica) must stay 300 us,
 * through a high-resolution waitable timer (Windows 10 1803 and later). */
struct timespec;
int shim_nanosleep(const struct timespec *t, struct timespec *left);
#define nanosleep shim_nanosleep
/* rename over an existing file, as POSIX renames (msvcrt's refuses). */
int shim_rename(const char *from, const char *to);
#define rename shim_rename

/* The tests' shell commands are POSIX shell, which cmd.exe does not read:
 * system reads the simple commands they write (shell_shim.c) and skips the
 * calling test on anything else; popen skips it. */
int shim_system(const char *cmd);
#define system shim_system
FILE *shim_popen(const char *cmd, const char *mode);
#undef popen
#define popen shim_popen
int symlink(const char *target, const char *path);
#include <sys/wait.h> /* the status macros of system's callers */
/* Only what the tests ask: times set on a path (AT_FDCWD, flags 0), through
 * SetFileTime. */
#define AT_FDCWD (-100)
struct timespec;
int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags);

/* Run argv[0] with argv (no shell), its standard output and error written
 * to the files out and err; killed after secs seconds when secs > 0. The
 * exit status, or -1 when it was killed or could not start. What
 * testutil.c's run_prog does with fork and execv elsewhere. */
int shim_spawn(const char *const *argv, const char *out, const char *err, unsigned secs);
/* shim_spawn with out or err NULL: inherited; err_to_out: errors to out. */
int shim_spawn_ex(const char *const *argv, const char *out, const char *err, int err_to_out,
                  unsigned secs);

/* Directory listings, with /proc/self/fd and /proc/self/task listing the
 * process's handles and threads (what testutil.c's leak check counts):
 * one entry per handle (GetProcessHandleCount) and per thread (a Toolhelp
 * snapshot). */
#include <dirent.h>
typedef struct shim_dir shim_dir;
shim_dir *shim_opendir(const char *path);
struct dirent *shim_readdir(shim_dir *d);
int shim_closedir(shim_dir *d);
#define DIR shim_dir
#define opendir shim_opendir
#define readdir shim_readdir
#define closedir shim_closedir

#endif
