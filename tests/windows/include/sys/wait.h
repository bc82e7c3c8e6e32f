/* sys/wait.h for the test programs on Windows (posix_shim.h): there is no
 * fork, so no child to wait for; waitpid skips the calling test. */
#ifndef SMOE_SHIM_SYS_WAIT_H
#define SMOE_SHIM_SYS_WAIT_H

#include <sys/types.h>

#define WIFEXITED(s) (((s) & 0x7f) == 0)
#define WEXITSTATUS(s) (((s) >> 8) & 0xff)
#define WIFSIGNALED(s) (((s) & 0x7f) != 0)
#define WTERMSIG(s) ((s) & 0x7f)

int waitpid(int pid, int *status, int options);

#endif
