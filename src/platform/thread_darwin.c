/* thread_darwin.c - thread names: macOS names only the calling thread. */
#include <pthread.h>

#include "thread.h"

void smoe__thread_name(const char *name)
{
    pthread_setname_np(name);
}
