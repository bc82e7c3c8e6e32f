/* thread_linux.c - thread names through glibc's pthread_setname_np. */
#include <pthread.h>

#include "thread.h"

void smoe__thread_name(const char *name)
{
    pthread_setname_np(pthread_self(), name);
}
