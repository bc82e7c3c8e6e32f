/*
 * bench_child_posix.c - bench_child.h where the system forks. The child
 * waits for one byte on a pipe, sent once the parent has moved it into its
 * cgroup, and leaves its bench_result in a shared anonymous mapping; the
 * parent takes it only when the child exited with status 0, so a child that
 * was killed half way reports why instead of half a result.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_child.h"

/* The child: wait for the start byte, run the mode into the shared result. */
static void child_main(const bench_child *c, int go)
{
    char b;
    ssize_t n;
    while ((n = read(go, &b, 1)) < 0 && errno == EINTR) {
    }
    if (n != 1)
        _exit(3); /* the parent gave up before starting us */
    c->shared->mode = c->mode;
    c->shared->memory = c->memory;
    c->fn(c->env, c->mode, c->memory, c->shared);
    _exit(0);
}

int bench_child_start(bench_child *c, const bench_env *env, bench_mode mode, uint64_t memory,
                      bench_child_fn fn, bench_result *r)
{
    memset(c, 0, sizeof *c);
    c->env = env;
    c->mode = mode;
    c->memory = memory;
    c->fn = fn;
    void *m = mmap(NULL, sizeof *c->shared, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        snprintf(r->error, sizeof r->error, "mmap: %s", strerror(errno));
        return -1;
    }
    c->shared = m;
    memset(c->shared, 0, sizeof *c->shared);
    int go[2];
    if (pipe(go) < 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        munmap(c->shared, sizeof *c->shared);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        child_main(c, go[0]);
    }
    close(go[0]);
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(go[1]);
        munmap(c->shared, sizeof *c->shared);
        return -1;
    }
    c->pid = pid;
    c->go = go[1];
    return 0;
}

void bench_child_finish(bench_child *c, int limited, bench_result *r)
{
    ssize_t n;
    while ((n = write(c->go, "g", 1)) < 0 && errno == EINTR) {
    }
    close(c->go);
    int status = 0;
    while (waitpid((pid_t)c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (n == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        *r = *c->shared;
    else if (WIFSIGNALED(status))
        snprintf(r->error, sizeof r->error, "the %s run was killed by signal %d%s",
                 bench_mode_name(c->mode), WTERMSIG(status),
                 limited && WTERMSIG(status) == SIGKILL
                     ? " (out of memory inside the cgroup limit?)" : "");
    else
        snprintf(r->error, sizeof r->error, "the %s run exited with status %d",
                 bench_mode_name(c->mode), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    munmap(c->shared, sizeof *c->shared);
}
