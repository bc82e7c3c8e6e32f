/* posix_shim.c - see posix_shim.h. */
/* rand_s, declared by stdlib.h only when asked for */
#define _CRT_RAND_S
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>
#include <tlhelp32.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "posix_shim.h"

#undef DIR
#undef opendir
#undef readdir
#undef closedir
#undef rename
#undef usleep
#undef nanosleep
#undef system
#undef popen
#include <time.h>

struct shim_dir {
    DIR *real;     /* a directory; NULL: a /proc/self listing */
    long n, next;  /* its entries, numbered */
    struct dirent e;
};

static long count_threads(void)
{
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE)
        return -1;
    THREADENTRY32 te;
    te.dwSize = sizeof te;
    long n = 0;
    DWORD self = GetCurrentProcessId();
    for (BOOL ok = Thread32First(snap, &te); ok; ok = Thread32Next(snap, &te))
        n += te.th32OwnerProcessID == self;
    CloseHandle(snap);
    return n;
}

shim_dir *shim_opendir(const char *path)
{
    shim_dir *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    if (strcmp(path, "/proc/self/fd") == 0) {
        DWORD n = 0;
        GetProcessHandleCount(GetCurrentProcess(), &n);
        d->n = (long)n + 1; /* + 1: opendir's own descriptor, as on Linux */
    } else if (strcmp(path, "/proc/self/task") == 0) {
        d->n = count_threads();
    } else if (!(d->real = opendir(path))) {
        free(d);
        return NULL;
    }
    return d;
}

struct dirent *shim_readdir(shim_dir *d)
{
    if (d->real)
        return readdir(d->real);
    if (d->next >= d->n)
        return NULL;
    snprintf(d->e.d_name, sizeof d->e.d_name, "%ld", d->next++);
    return &d->e;
}

int shim_closedir(shim_dir *d)
{
    int r = d->real ? closedir(d->real) : 0;
    free(d);
    return r;
}

/* Skip the running test: Windows has nothing that does what it needs. */
static void skip_because(const char *call)
{
    fprintf(stderr, "[  SKIP    ] %s: not on Windows\n", call);
    skip();
}

ssize_t pread(int fd, void *buf, size_t n, long long off)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    OVERLAPPED ov = {0};
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)((unsigned long long)off >> 32);
    DWORD got = 0;
    if (ReadFile(h, buf, (DWORD)n, &got, &ov))
        return (ssize_t)got;
    if (GetLastError() == ERROR_HANDLE_EOF)
        return 0;
    errno = EIO;
    return -1;
}

ssize_t pwrite(int fd, const void *buf, size_t n, long long off)
{
    HANDLE h = (HANDLE)_get_osfhandle(fd);
    OVERLAPPED ov = {0};
    ov.Offset = (DWORD)off;
    ov.OffsetHigh = (DWORD)((unsigned long long)off >> 32);
    DWORD put = 0;
    if (WriteFile(h, buf, (DWORD)n, &put, &ov))
        return (ssize_t)put;
    errno = GetLastError() == ERROR_DISK_FULL ? ENOSPC : EIO;
    return -1;
}

/* The six letters come from rand_s (the system's random source): rand()
 * starts from the same seed in every process, so each run would walk the
 * names of the runs before it and give up once 100 of them were left. */
char *mkdtemp(char *tmpl)
{
    size_t n = strlen(tmpl);
    for (int tries = 0; tries < 100; tries++) {
        for (size_t i = n - 6; i < n; i++) {
            unsigned r = 0;
            if (rand_s(&r) != 0)
                return NULL;
            tmpl[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r % 36];
        }
        if (_mkdir(tmpl) == 0)
            return tmpl;
        if (errno != EEXIST)
            return NULL;
    }
    return NULL;
}

int shim_mkdir(const char *path, int mode)
{
    (void)mode;
    return _mkdir(path);
}

/* A descriptor open for reading has nothing of its own to flush (POSIX
 * allows fsync on it; Windows' FlushFileBuffers wants write access). */
int fdatasync(int fd)
{
    return _commit(fd) == 0 || errno == EBADF || errno == EACCES ? 0 : -1;
}

int fsync(int fd)
{
    return fdatasync(fd);
}

int posix_fadvise(int fd, long long off, long long len, int advice)
{
    (void)fd, (void)off, (void)len, (void)advice;
    return 0; /* advice: nothing to drop, Windows has no such call */
}

long sysconf(int name)
{
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return name == _SC_PAGESIZE ? (long)si.dwPageSize : -1;
}

int fcntl(int fd, int cmd, ...)
{
    (void)fd;
    /* No descriptor is inherited without being asked for on Windows:
     * every one is close-on-exec in effect. */
    return cmd == F_GETFD ? FD_CLOEXEC : 0;
}

int fork(void)
{
    skip_because("fork");
    return -1;
}

int waitpid(int pid, int *status, int options)
{
    (void)pid, (void)status, (void)options;
    skip_because("waitpid");
    return -1;
}

FILE *shim_popen(const char *cmd, const char *mode)
{
    (void)cmd, (void)mode;
    skip_because("popen (a POSIX shell command)");
    return NULL;
}

int symlink(const char *target, const char *path)
{
    (void)target, (void)path;
    skip_because("symlink");
    return -1;
}

static FILETIME filetime_of(const struct timespec *t)
{
    /* 100 ns units since 1601 */
    uint64_t v = ((uint64_t)t->tv_sec + 11644473600ull) * 10000000ull + (uint64_t)t->tv_nsec / 100;
    FILETIME f = {(DWORD)v, (DWORD)(v >> 32)};
    return f;
}

int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags)
{
    if (dirfd != AT_FDCWD || flags || !times) {
        errno = EINVAL;
        return -1;
    }
    HANDLE h = CreateFileA(path, FILE_WRITE_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE |
                           FILE_SHARE_DELETE, NULL, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
    if (h == INVALID_HANDLE_VALUE) {
        errno = ENOENT;
        return -1;
    }
    FILETIME a = filetime_of(&times[0]), m = filetime_of(&times[1]);
    BOOL ok = SetFileTime(h, NULL, &a, &m);
    CloseHandle(h);
    if (!ok) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int getrlimit(int resource, struct rlimit *r)
{
    (void)resource, (void)r;
    skip_because("getrlimit");
    return -1;
}

int setrlimit(int resource, const struct rlimit *r)
{
    (void)resource, (void)r;
    skip_because("setrlimit");
    return -1;
}

unsigned alarm(unsigned secs)
{
    (void)secs;
    return 0;
}

int mkfifo(const char *path, int mode)
{
    (void)path, (void)mode;
    skip_because("mkfifo");
    return -1;
}

int pipe(int fds[2])
{
    return _pipe(fds, 65536, _O_BINARY);
}

unsigned geteuid(void)
{
    return 1000; /* not root: permission checks apply */
}

/* Components separated by '/', as the tests split them ("Z:/tmp/x"). */
char *realpath(const char *path, char *resolved)
{
    char *r = _fullpath(resolved, path, resolved ? MAX_PATH : 0);
    for (char *c = r; c && *c; c++)
        if (*c == '\\')
            *c = '/';
    return r;
}

char *strndup(const char *s, size_t n)
{
    size_t k = strnlen(s, n);
    char *d = malloc(k + 1);
    if (d) {
        memcpy(d, s, k);
        d[k] = 0;
    }
    return d;
}

int setenv(const char *name, const char *value, int overwrite)
{
    if (!overwrite && getenv(name))
        return 0;
    return _putenv_s(name, value) == 0 ? 0 : -1;
}

#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif

static void sleep_ns(unsigned long long ns)
{
    HANDLE t = CreateWaitableTimerExW(NULL, NULL, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
                                      TIMER_ALL_ACCESS);
    LARGE_INTEGER due;
    due.QuadPart = -(LONGLONG)((ns + 99) / 100); /* relative, in 100 ns */
    if (t && SetWaitableTimer(t, &due, 0, NULL, NULL, FALSE))
        WaitForSingleObject(t, INFINITE);
    else
        Sleep((DWORD)((ns + 999999) / 1000000));
    if (t)
        CloseHandle(t);
}

int shim_usleep(unsigned long long us)
{
    sleep_ns(us * 1000);
    return 0;
}

int shim_nanosleep(const struct timespec *t, struct timespec *left)
{
    sleep_ns((unsigned long long)t->tv_sec * 1000000000ull + (unsigned long long)t->tv_nsec);
    if (left)
        left->tv_sec = left->tv_nsec = 0;
    return 0;
}

int shim_rename(const char *from, const char *to)
{
    if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING))
        return 0;
    DWORD err = GetLastError();
    /* A file that a handle holds open cannot be renamed over (short of the
     * POSIX rename of Windows 10 1709 on NTFS): what a test of a replaced
     * file wants to happen cannot happen. */
    if (err == ERROR_ACCESS_DENIED && GetFileAttributesA(to) != INVALID_FILE_ATTRIBUTES)
        skip_because("rename over a file that is open");
    errno = err == ERROR_FILE_NOT_FOUND ? ENOENT : EACCES;
    return -1;
}

int unsetenv(const char *name)
{
    return _putenv_s(name, "") == 0 ? 0 : -1;
}

/* Anonymous mappings and read-only views of a file. */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, long long off)
{
    (void)addr;
    if (flags & MAP_ANONYMOUS) {
        if (flags & MAP_SHARED) { /* shared with a forked child: no fork here */
            skip_because("mmap(MAP_SHARED | MAP_ANONYMOUS)");
            return MAP_FAILED;
        }
        void *p = VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT,
                               prot & PROT_WRITE ? PAGE_READWRITE : PAGE_READONLY);
        return p ? p : MAP_FAILED;
    }
    if (off % 65536) { /* a view starts on the allocation granularity */
        skip_because("mmap at an offset off 64 KiB");
        return MAP_FAILED;
    }
    HANDLE m = CreateFileMappingW((HANDLE)_get_osfhandle(fd), NULL,
                                  prot & PROT_WRITE ? PAGE_READWRITE : PAGE_READONLY, 0, 0, NULL);
    if (!m)
        return MAP_FAILED;
    void *p = MapViewOfFile(m, prot & PROT_WRITE ? FILE_MAP_WRITE : FILE_MAP_READ,
                            (DWORD)((unsigned long long)off >> 32), (DWORD)off, len);
    CloseHandle(m);
    return p ? p : MAP_FAILED;
}

int munmap(void *addr, size_t len)
{
    (void)len;
    if (UnmapViewOfFile(addr) || VirtualFree(addr, 0, MEM_RELEASE))
        return 0;
    errno = EINVAL;
    return -1;
}

int mincore(void *addr, size_t len, unsigned char *vec)
{
    (void)addr, (void)len, (void)vec;
    skip_because("mincore (which pages the page cache holds)");
    return -1;
}

/* Files open in binary mode, as on POSIX systems (the C library's default
 * is text mode, which would turn \n into \r\n in every test file). */
__attribute__((constructor)) static void binary_mode(void)
{
    _fmode = _O_BINARY;
}

/* One argument quoted for the command line as Windows' C runtime splits it:
 * backslashes are literal except before a quote, where they are doubled. */
static size_t quote_arg(char *to, const char *a)
{
    size_t n = 0;
    if (to)
        to[n] = '"';
    n++;
    for (const char *c = a;; c++) {
        size_t bs = 0;
        while (*c == '\\')
            c++, bs++;
        size_t reps = !*c || *c == '"' ? bs * 2 + (*c == '"') : bs;
        for (size_t i = 0; i < reps; i++, n++)
            if (to)
                to[n] = '\\';
        if (!*c)
            break;
        if (to)
            to[n] = *c;
        n++;
    }
    if (to)
        to[n] = '"';
    return n + 1;
}

static char *command_line(const char *const *argv)
{
    size_t len = 1;
    for (const char *const *a = argv; *a; a++)
        len += quote_arg(NULL, *a) + 1;
    char *cl = malloc(len), *at = cl;
    if (!cl)
        return NULL;
    for (const char *const *a = argv; *a; a++) {
        at += quote_arg(at, *a);
        *at++ = ' ';
    }
    at[at > cl ? -1 : 0] = 0;
    return cl;
}

static HANDLE inheritable_file(const char *path)
{
    SECURITY_ATTRIBUTES sa = {sizeof sa, NULL, TRUE};
    return CreateFileA(path, GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa,
                       CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
}

int shim_spawn(const char *const *argv, const char *out, const char *err, unsigned secs)
{
    return shim_spawn_ex(argv, out, err, 0, secs);
}

int shim_spawn_ex(const char *const *argv, const char *out, const char *err, int err_to_out,
                  unsigned secs)
{
    char *cl = command_line(argv);
    HANDLE ho = out ? inheritable_file(out) : GetStdHandle(STD_OUTPUT_HANDLE);
    HANDLE he = err_to_out ? ho : err ? inheritable_file(err) : GetStdHandle(STD_ERROR_HANDLE);
    int rc = -1;
    if (cl && ho != INVALID_HANDLE_VALUE && he != INVALID_HANDLE_VALUE) {
        STARTUPINFOA si;
        PROCESS_INFORMATION pi;
        memset(&si, 0, sizeof si);
        si.cb = sizeof si;
        si.dwFlags = STARTF_USESTDHANDLES;
        si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
        si.hStdOutput = ho;
        si.hStdError = he;
        fflush(stdout);
        fflush(stderr);
        if (CreateProcessA(argv[0], cl, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
            DWORD code = 0;
            if (WaitForSingleObject(pi.hProcess, secs ? secs * 1000u : INFINITE) != WAIT_OBJECT_0) {
                TerminateProcess(pi.hProcess, 255);
                WaitForSingleObject(pi.hProcess, INFINITE);
            } else if (GetExitCodeProcess(pi.hProcess, &code)) {
                rc = (int)code;
            }
            CloseHandle(pi.hThread);
            CloseHandle(pi.hProcess);
        }
    }
    if (out && ho != INVALID_HANDLE_VALUE)
        CloseHandle(ho);
    if (err && !err_to_out && he != INVALID_HANDLE_VALUE)
        CloseHandle(he);
    free(cl);
    return rc;
}
