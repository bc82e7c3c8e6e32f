/* thread_generic.c - no portable way to name a thread: threads stay
 * unnamed. */
#include "thread.h"

void smoe__thread_name(const char *name)
{
    (void)name;
}
