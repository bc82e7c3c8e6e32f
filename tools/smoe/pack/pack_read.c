/*
 * pack_read.c - how the source readers open and read their files: through
 * the library's I/O table (smoe__io), so the tests can inject faults, with
 * every failure reported as a SMOE_E* code naming the file.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "io.h"
#include "pack.h"

int pack_read_prefix(int fd, uint8_t *buf, size_t n, const char *path)
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

int pack_open_read(const char *path, int *fd, uint64_t *size)
{
    const smoe__io *io = smoe__io_get();
    *fd = smoe__io_open(io, path, SMOE__IO_RDONLY);
    if (*fd < 0)
        return smoe__fail(SMOE_ESYS, "%s: cannot open: %s", path, strerror(-*fd));
    int rc = smoe__io_size(io, *fd, size);
    if (rc < 0) {
        smoe__io_close(io, *fd);
        *fd = -1;
        return smoe__fail(SMOE_ESYS, "%s: cannot stat: %s", path, strerror(-rc));
    }
    return 0;
}

int pack_read_small_file(const char *path, uint64_t max, char **out, size_t *n)
{
    const smoe__io *io = smoe__io_get();
    *out = NULL;
    *n = 0;
    int fd;
    uint64_t size = 0;
    int rc = pack_open_read(path, &fd, &size);
    if (rc < 0)
        return rc;
    if (size > max) {
        io->close(io, fd);
        return smoe__fail(SMOE_ERANGE, "%s: %" PRIu64 " bytes, more than the %" PRIu64
                          " a JSON file may have", path, size, max);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        io->close(io, fd);
        return smoe__fail(SMOE_ENOMEM, "out of memory");
    }
    rc = pack_read_prefix(fd, (uint8_t *)buf, (size_t)size, path);
    io->close(io, fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf;
    *n = (size_t)size;
    return 0;
}
