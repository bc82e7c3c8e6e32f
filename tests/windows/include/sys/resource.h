/* sys/resource.h for the test programs on Windows (posix_shim.h): Windows
 * has no descriptor limit to lower; getrlimit and setrlimit skip the
 * calling test. */
#ifndef SMOE_SHIM_SYS_RESOURCE_H
#define SMOE_SHIM_SYS_RESOURCE_H

typedef unsigned long long rlim_t;
struct rlimit {
    rlim_t rlim_cur, rlim_max;
};
#define RLIMIT_NOFILE 7

int getrlimit(int resource, struct rlimit *r);
int setrlimit(int resource, const struct rlimit *r);

#endif
