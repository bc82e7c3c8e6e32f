/*
 * pack_read.c - how the source readers open and read their files: through
 * the library's I/O table (smoe__io), so the tests can inject faults, with
 * every failure reported as a SMOE_E* code naming the file.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "smoe_tier.h"
#include "pack.h"

/* Read n bytes at offset 0 of fd. */
static int read_prefix(int fd, uint8_t *buf, size_t n, const char *path)
{
    const smoe__io *io = smoe__io_get();
    int err = 0;
    int rc = smoe__io_read_full(io, fd, buf, n, 0, NULL, &err);
    if (rc == SMOE_EIO)
        return smoe__fail(SMOE_EIO, "%s: read failed: %s", path, strerror(err));
    if (rc == SMOE_ETRUNC)
        return smoe__fail(SMOE_ETRUNC, "%s: file is shorter than %zu bytes", path, n);
    return rc;
}

/* Open path for reading as the library opens a vault (without waiting on
 * a FIFO, a regular file or a block device only); *size gets its size. 0,
 * or SMOE_ESYS / SMOE_EINVAL naming the file. */
static int open_read(const char *path, int *fd, uint64_t *size)
{
    smoe__io_stat st;
    *fd = smoe__io_open_file(smoe__io_get(), path, 0, NULL, &st);
    if (*fd < 0)
        return *fd;
    *size = st.size;
    return 0;
}


int pack_read_header(const char *path, size_t first, pack_source *s, pack_header_fn parse,
                     void *u)
{
    const smoe__io *io = smoe__io_get();
    int fd;
    uint64_t size = 0;
    uint32_t file = 0;
    int rc = open_read(path, &fd, &size);
    if (rc < 0)
        return rc;
    if (s && (rc = pack_source_add_file(s, path, size, &file)) < 0) {
        io->close(io, fd);
        return rc;
    }
    size_t want = size < first ? (size_t)size : first;
    uint8_t *buf = NULL;
    for (;;) {
        uint8_t *nb = realloc(buf, want ? want : 1);
        if (!nb) {
            rc = smoe__fail(SMOE_ENOMEM, "out of memory");
            break;
        }
        buf = nb;
        if ((rc = read_prefix(fd, buf, want, path)) < 0)
            break;
        size_t n = want;
        rc = parse(u, path, file, buf, n, size, &want);
        if (rc != PACK_NEED_MORE)
            break;
        if (want <= n || want > size) { /* a parser that asks for nothing new */
            rc = smoe__fail(SMOE_ETRUNC, "%s: header is truncated", path);
            break;
        }
    }
    io->close(io, fd);
    free(buf);
    return rc;
}

/* pack_read_small_file's parser: the whole file, when it is small, copied
 * NUL-terminated into *out. */
typedef struct small_file {
    uint64_t max;
    char **out;
    size_t *n;
} small_file;

static int whole_file(void *u, const char *path, uint32_t file, const uint8_t *buf, size_t n,
                      uint64_t size, size_t *want)
{
    (void)file;
    const small_file *sf = u;
    if (size > sf->max)
        return smoe__fail(SMOE_ERANGE, "%s: %" PRIu64 " bytes, more than the %" PRIu64
                          " a JSON file may have", path, size, sf->max);
    if (n < size) {
        *want = (size_t)size;
        return PACK_NEED_MORE;
    }
    if (!(*sf->out = malloc(n + 1)))
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    memcpy(*sf->out, buf, n);
    (*sf->out)[n] = 0;
    *sf->n = n;
    return 0;
}

int pack_read_small_file(const char *path, uint64_t max, char **out, size_t *n)
{
    small_file sf = {max, out, n};
    *out = NULL;
    *n = 0;
    return pack_read_header(path, 0, NULL, whole_file, &sf);
}
