/* thread.h - naming the calling thread, as debuggers, top and perf show it
 * ("smoe-io-N", "smoe-prewarm", "smoe-trace"). */
#ifndef SMOE_THREAD_H
#define SMOE_THREAD_H

/* Name the calling thread (at most 15 characters are kept on Linux). Best
 * effort: where the system has no way, or refuses, nothing happens. */
void smoe__thread_name(const char *name);

#endif
