/* oserr_posix.c - errno is the system's own error: nothing to add (oserr.h). */
#include "oserr.h"

void smoe__os_error_note(const char *msg, char *buf, size_t cap)
{
    (void)msg;
    if (cap)
        buf[0] = '\0';
}
