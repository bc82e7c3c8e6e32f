/*
 * freq.c - the popularity histogram's file (docs/freq-format.md): encode,
 * decode, load at open, atomic save (temporary file, fsync, rename, fsync
 * of the directory), and smoe_freq_save.
 *
 * A file that is missing, short, corrupt, of another version or of
 * another vault is ignored: counting starts at zero, the reason goes to
 * the log and to smoe_stats.freq_status, and open goes on. A directory
 * where the file cannot be created turns saving off the same way. A save
 * that fails at any step removes its temporary file and leaves the
 * previous histogram as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "alloc.h"
#include "byteorder.h"
#include "error.h"
#include "fill/freq.h"
#include "hash.h"
#include "internal.h"
#include "log.h"

/* Header fields (docs/freq-format.md). */
enum {
    F_MAGIC = 0, F_VERSION = 8, F_HEADER_SIZE = 12, F_LAYERS = 16, F_EXPERTS = 20,
    F_VAULT_ID = 24, F_VAULT_SIZE = 32, F_TOTAL = 40, F_RESERVED = 48, F_CHECKSUM = 56
};

/* XXH3-64 of header bytes 0..55 and the counts that follow the header.
 * @return 0, or SMOE_ENOMEM (no hashing state). */
static int file_hash(const unsigned char *buf, uint64_t len, uint64_t *h)
{
    const smoe__bytes parts[] = {
        {buf, F_CHECKSUM},
        {buf + SMOE__FREQ_HEADER_SIZE, (size_t)(len - SMOE__FREQ_HEADER_SIZE)},
    };
    return smoe__hash_parts(parts, 2, h);
}

int smoe__freq_encode(unsigned char *buf, const smoe__freq_id *id, const uint64_t *counts)
{
    size_t n = (size_t)id->layers * id->experts;
    uint64_t len = SMOE__FREQ_HEADER_SIZE + 8 * (uint64_t)n, total = 0;
    memset(buf, 0, SMOE__FREQ_HEADER_SIZE);
    memcpy(buf + F_MAGIC, SMOE__FREQ_MAGIC, 8);
    smoe__put_le32(buf + F_VERSION, SMOE__FREQ_VERSION);
    smoe__put_le32(buf + F_HEADER_SIZE, SMOE__FREQ_HEADER_SIZE);
    smoe__put_le32(buf + F_LAYERS, id->layers);
    smoe__put_le32(buf + F_EXPERTS, id->experts);
    smoe__put_le64(buf + F_VAULT_ID, id->vault_id);
    smoe__put_le64(buf + F_VAULT_SIZE, id->vault_size);
    for (size_t i = 0; i < n; i++) {
        smoe__put_le64(buf + SMOE__FREQ_HEADER_SIZE + 8 * i, counts[i]);
        total += counts[i];
    }
    smoe__put_le64(buf + F_TOTAL, total);
    uint64_t h;
    if (file_hash(buf, len, &h) < 0)
        return SMOE_ENOMEM;
    smoe__hash_put(buf + F_CHECKSUM, h);
    return 0;
}

int smoe__freq_decode(const unsigned char *buf, uint64_t len, const smoe__freq_id *id,
                      uint64_t *counts, const char **why)
{
    /* The magic first, as far as the file goes: a short file of other
     * bytes is not a histogram cut short. */
    if (memcmp(buf + F_MAGIC, SMOE__FREQ_MAGIC, len < 8 ? (size_t)len : 8) != 0) {
        *why = "bad magic number";
        return SMOE_FREQ_CORRUPT;
    }
    if (len < SMOE__FREQ_HEADER_SIZE) {
        *why = "shorter than its 64-byte header";
        return SMOE_FREQ_TRUNCATED;
    }
    if (smoe__le32(buf + F_VERSION) != SMOE__FREQ_VERSION) {
        *why = "format version is not 1";
        return SMOE_FREQ_VERSION;
    }
    uint32_t layers = smoe__le32(buf + F_LAYERS), experts = smoe__le32(buf + F_EXPERTS);
    uint64_t n = (uint64_t)layers * experts;
    if (smoe__le32(buf + F_HEADER_SIZE) != SMOE__FREQ_HEADER_SIZE || n == 0 ||
        n > SMOE__MAX_EXPERTS_TOTAL || smoe__le64(buf + F_RESERVED) != 0) {
        *why = "header_size, layers, experts or reserved out of range";
        return SMOE_FREQ_CORRUPT;
    }
    uint64_t want = SMOE__FREQ_HEADER_SIZE + 8 * n;
    if (len < want) {
        *why = "shorter than its counts";
        return SMOE_FREQ_TRUNCATED;
    }
    if (len > want) {
        *why = "longer than its counts";
        return SMOE_FREQ_CORRUPT;
    }
    uint64_t h;
    if (file_hash(buf, len, &h) < 0) {
        *why = "out of memory";
        return SMOE_ENOMEM;
    }
    if (smoe__hash_get(buf + F_CHECKSUM) != h) {
        *why = "checksum mismatch";
        return SMOE_FREQ_CORRUPT;
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t count = smoe__le64(buf + SMOE__FREQ_HEADER_SIZE + 8 * i);
        if (count > UINT64_MAX - total) {
            *why = "counts overflow their total";
            return SMOE_FREQ_CORRUPT;
        }
        total += count;
    }
    if (total != smoe__le64(buf + F_TOTAL)) {
        *why = "total does not match the counts";
        return SMOE_FREQ_CORRUPT;
    }
    if (layers != id->layers || experts != id->experts ||
        smoe__le64(buf + F_VAULT_ID) != id->vault_id ||
        smoe__le64(buf + F_VAULT_SIZE) != id->vault_size) {
        *why = "made for another vault (or for this one before it was repacked)";
        return SMOE_FREQ_FOREIGN;
    }
    for (uint64_t i = 0; i < n; i++)
        counts[i] = smoe__le64(buf + SMOE__FREQ_HEADER_SIZE + 8 * i);
    *why = "";
    return SMOE_FREQ_LOADED;
}

static smoe__freq_id id_of(const struct smoe_stream *s)
{
    smoe__freq_id id = {s->vault.layers, s->vault.experts, s->vault.vault_id,
                        s->vault.file_size};
    return id;
}

static const char *status_name(int st)
{
    switch (st) {
    case SMOE_FREQ_ABSENT: return "absent";
    case SMOE_FREQ_TRUNCATED: return "truncated";
    case SMOE_FREQ_CORRUPT: return "corrupt";
    case SMOE_FREQ_VERSION: return "unsupported version";
    case SMOE_FREQ_FOREIGN: return "foreign";
    case SMOE_FREQ_UNREADABLE: return "unreadable";
    default: return "loaded";
    }
}

/* Load the file into counts (zeros stay where it is ignored): a
 * SMOE_FREQ_* status, or SMOE_ENOMEM; *why may point into msg. */
static int read_histogram(struct smoe_stream *s, uint64_t *counts, const char **why, int *eno,
                char *msg, size_t cap)
{
    smoe__freq *f = &s->freq;
    const smoe__io *io = s->io;
    *eno = 0;
    /* Without blocking: a FIFO there would wait for a writer forever. */
    int fd = smoe__io_open(io, f->path, SMOE__IO_RDONLY | SMOE__IO_NONBLOCK);
    if (fd < 0) {
        *eno = -fd;
        *why = strerror(-fd);
        return fd == -ENOENT ? SMOE_FREQ_ABSENT : SMOE_FREQ_UNREADABLE;
    }
    smoe__io_stat fs;
    int r = smoe__io_fstat(io, fd, &fs);
    uint64_t size = fs.size;
    const uint64_t most = SMOE__FREQ_HEADER_SIZE + 8ull * SMOE__MAX_EXPERTS_TOTAL;
    int st;
    unsigned char *buf = NULL;
    if (r < 0) {
        *eno = -r;
        *why = strerror(-r);
        st = SMOE_FREQ_UNREADABLE;
    } else if (fs.type != SMOE__IO_TYPE_REG) {
        snprintf(msg, cap, "%s, not a regular file", smoe__io_type_name(fs.type));
        *why = msg;
        st = SMOE_FREQ_UNREADABLE;
    } else if (size > most) {
        *why = "larger than any histogram";
        st = SMOE_FREQ_CORRUPT;
    } else if (!(buf = smoe__malloc(size ? (size_t)size : 1))) {
        *why = "out of memory";
        st = SMOE_ENOMEM;
    } else if ((r = smoe__io_read_full(io, fd, buf, (size_t)size, 0, NULL, eno)) < 0) {
        *why = r == SMOE_ETRUNC ? "shrank while being read" : strerror(*eno);
        st = r == SMOE_ETRUNC ? SMOE_FREQ_TRUNCATED : SMOE_FREQ_UNREADABLE;
    } else {
        smoe__freq_id id = id_of(s);
        st = smoe__freq_decode(buf, size, &id, counts, why);
    }
    free(buf);
    smoe__io_close(io, fd);
    return st;
}

int smoe__freq_open(struct smoe_stream *s, const smoe_open_opts *o)
{
    smoe__freq *f = &s->freq;
    f->n = (size_t)s->vault.layers * s->vault.experts;
    size_t bytes = (f->n * sizeof *f->count + 63) / 64 * 64;
    f->count = smoe__aligned_alloc(64, bytes);
    uint64_t *loaded = smoe__calloc(f->n, sizeof *loaded);
    if (!f->count || !loaded) {
        free(loaded);
        return smoe__fail(SMOE_ENOMEM, "open: out of memory for the popularity histogram");
    }
    if (pthread_mutex_init(&f->save_lock, NULL) != 0) {
        free(loaded);
        return smoe__fail(SMOE_ENOMEM, "open: cannot create the histogram's save lock");
    }
    f->lock_init = 1;
    f->status = SMOE_FREQ_OFF;
    f->saving = SMOE_FREQ_SAVE_OFF;
    if (!(o->flags & SMOE_OPEN_NO_FREQ)) {
        const char *p = o->freq_path;
        size_t len = p ? strlen(p) + 1 : strlen(s->vault.path) + 6;
        if (!(f->path = smoe__malloc(len))) {
            free(loaded);
            return smoe__fail(SMOE_ENOMEM, "open: out of memory");
        }
        if (p)
            memcpy(f->path, p, len);
        else
            snprintf(f->path, len, "%s.freq", s->vault.path);
        /* Before anything else is written beside it. */
        smoe__freq_sweep(s->io, f->path);
        const char *why = "";
        char msg[96];
        int eno;
        f->status = read_histogram(s, loaded, &why, &eno, msg, sizeof msg);
        if (f->status == SMOE_ENOMEM) {
            free(loaded);
            return smoe__fail(SMOE_ENOMEM, "open: out of memory reading the popularity "
                              "histogram %s", f->path);
        }
        if (f->status != SMOE_FREQ_LOADED)
            smoe__log(s, SMOE_LOG_WARN, "popularity histogram %s ignored (%s: %s): counting "
                      "starts at zero", f->path, status_name(f->status), why);
        int w = smoe__freq_probe_writable(s->io, f->path);
        if (w == -ENOMEM) {
            free(loaded);
            return smoe__fail(SMOE_ENOMEM, "open: out of memory");
        }
        f->saving = w == 0 ? SMOE_FREQ_SAVE_ON : SMOE_FREQ_SAVE_READONLY;
        if (w < 0)
            smoe__log(s, SMOE_LOG_WARN, "popularity histogram %s will not be saved: cannot "
                      "create a file beside it: %s", f->path, strerror(-w));
    }
    for (size_t i = 0; i < f->n; i++)
        atomic_init(&f->count[i], loaded[i]);
    free(loaded);
    atomic_init(&f->saves, 0);
    atomic_init(&f->save_errors, 0);
    return 0;
}

/* fsync the directory holding path, so the rename itself is durable. */
static void sync_dir(const smoe__io *io, const char *path)
{
    char dir[4096];
    if (smoe__freq_dir_of(path, dir, sizeof dir) < 0)
        return;
    int fd = smoe__io_open(io, dir, SMOE__IO_RDONLY);
    if (fd >= 0) {
        smoe__io_fsync(io, fd); /* best effort: some file systems refuse */
        smoe__io_close(io, fd);
    }
}

/*
 * Write buf to a new file beside path, fsync and close it, and give it a
 * temporary name (*tmp, to free): an unnamed file that is linked to that
 * name at the end, or (unnamed 0) one created with it. 1: unnamed files
 * cannot be used here, nothing is left. On failure no name is left unless
 * removing it failed too.
 */
static int write_tmp(const smoe__io *io, const char *path, const unsigned char *buf,
                     size_t len, const char *fn, int unnamed, char **tmp)
{
    int fd, named = !unnamed;
    *tmp = NULL;
    if (unnamed) {
        if ((fd = smoe__freq_open_unnamed(io, path)) < 0)
            return 1;
    } else {
        if (!(*tmp = smoe__freq_tmp_name(path)))
            return smoe__fail(SMOE_ENOMEM, "%s: out of memory", fn);
        if ((fd = smoe__io_open(io, *tmp, SMOE__IO_WRONLY)) < 0)
            return smoe__fail(SMOE_ESYS, "%s: cannot create %s: %s", fn, *tmp,
                              strerror(-fd));
    }
    const char *what = unnamed ? "the new histogram" : *tmp;
    int r, eno = 0;
    if ((r = smoe__io_write_full(io, fd, buf, len, 0, &eno)) < 0)
        r = smoe__fail(SMOE_EIO, "%s: writing %zu bytes to %s failed: %s", fn, len, what,
                       strerror(eno));
    else if ((r = smoe__io_fsync(io, fd)) < 0)
        r = smoe__fail(SMOE_EIO, "%s: fsync of %s failed: %s", fn, what, strerror(-r));
    if (r == 0 && unnamed) {
        if (!(*tmp = smoe__freq_tmp_name(path))) {
            r = smoe__fail(SMOE_ENOMEM, "%s: out of memory", fn);
        } else if (smoe__io_link(io, fd, *tmp) < 0) {
            /* No way to name it here (no /proc, say): write a named one. */
            smoe__io_close(io, fd);
            free(*tmp);
            *tmp = NULL;
            return 1;
        } else {
            named = 1;
        }
    }
    int c = smoe__io_close(io, fd);
    if (r == 0 && c < 0)
        r = smoe__fail(SMOE_EIO, "%s: close of %s failed: %s", fn, *tmp, strerror(-c));
    if (r < 0 && named)
        smoe__io_unlink(io, *tmp); /* the previous file stays as it was */
    return r;
}

/* Write buf to a temporary file and rename it over path. */
static int write_atomic(const smoe__io *io, const char *path, const unsigned char *buf,
                        size_t len, const char *fn)
{
    char *tmp;
    int r = write_tmp(io, path, buf, len, fn, 1, &tmp);
    if (r == 1)
        r = write_tmp(io, path, buf, len, fn, 0, &tmp);
    if (r == 0 && (r = smoe__io_rename(io, tmp, path)) < 0) {
        r = smoe__fail(SMOE_ESYS, "%s: renaming %s to %s failed: %s", fn, tmp, path,
                       strerror(-r));
        smoe__io_unlink(io, tmp); /* the previous file stays as it was */
    }
    if (r == 0)
        sync_dir(io, path);
    free(tmp);
    return r;
}

int smoe__freq_save(struct smoe_stream *s, const char *fn)
{
    smoe__freq *f = &s->freq;
    if (f->saving == SMOE_FREQ_SAVE_OFF)
        return smoe__fail(SMOE_ENOTSUP, "%s: the histogram is off (SMOE_OPEN_NO_FREQ)", fn);
    if (f->saving == SMOE_FREQ_SAVE_READONLY)
        return smoe__fail(SMOE_ENOTSUP, "%s: %s: its directory is not writable; the "
                          "histogram is not saved", fn, f->path);
    smoe__freq_id id = id_of(s);
    size_t len = SMOE__FREQ_HEADER_SIZE + 8 * f->n;
    unsigned char *buf = smoe__malloc(len);
    uint64_t *snap = smoe__malloc(f->n * sizeof *snap);
    int r;
    if (!buf || !snap) {
        r = smoe__fail(SMOE_ENOMEM, "%s: out of memory", fn);
    } else {
        /* One save at a time, each with a fresh snapshot, so the last
         * file renamed into place is never older than another. */
        pthread_mutex_lock(&f->save_lock);
        for (size_t i = 0; i < f->n; i++)
            /* relaxed: statistics only (see smoe__freq_hit) */
            snap[i] = atomic_load_explicit(&f->count[i], memory_order_relaxed);
        r = smoe__freq_encode(buf, &id, snap);
        if (r < 0)
            r = smoe__fail(r, "%s: out of memory for the checksum", fn);
        else
            r = write_atomic(s->io, f->path, buf, len, fn);
        pthread_mutex_unlock(&f->save_lock);
    }
    free(buf);
    free(snap);
    /* relaxed: statistics only */
    atomic_fetch_add_explicit(r < 0 ? &f->save_errors : &f->saves, 1, memory_order_relaxed);
    return r;
}

SMOE_API int smoe_freq_save(smoe_stream *s)
{
    if (!s)
        return smoe__fail(SMOE_EINVAL, "freq_save: NULL stream");
    return smoe__freq_save(s, "freq_save");
}

void smoe__freq_free(smoe__freq *f)
{
    smoe__aligned_free(f->count);
    free(f->path);
    if (f->lock_init)
        pthread_mutex_destroy(&f->save_lock);
    memset(f, 0, sizeof *f);
}

void smoe__freq_stats(const struct smoe_stream *s, smoe_stats *st)
{
    st->freq_status = (uint64_t)s->freq.status;
    st->freq_saving = (uint64_t)s->freq.saving;
    /* relaxed: statistics only */
    st->freq_saves = atomic_load_explicit(&s->freq.saves, memory_order_relaxed);
    st->freq_save_errors = atomic_load_explicit(&s->freq.save_errors, memory_order_relaxed);
}
