/*
 * libsmoe_stream: stream Mixture-of-Experts expert weights from NVMe into a
 * lock-free ring of 16 KiB-aligned slots with direct I/O.
 *
 * This is the whole public interface. Conventions, stated once:
 *  - Every function that can fail returns int: >= 0 is success (some
 *    functions return a positive status), a negative SMOE_E* code is a
 *    failure. smoe_strerror() names a code; smoe_last_error() gives the
 *    calling thread's detailed message for its most recent failure (which
 *    file, which field, what was expected).
 *  - Structs that may grow carry `struct_size` as their first member. The
 *    caller sets it (the *_INIT macros and *_init() functions do); the
 *    library reads or writes only that many bytes and gives every field the
 *    caller did not supply its default. Fields are only ever appended.
 *  - "since 1.0" marks the release that introduced a function or field.
 *
 * ABI: the shared library's SONAME is libsmoe_stream.so.<MAJOR>. Within one
 * major version functions are never removed or changed, struct fields are
 * only appended behind struct_size, enum and error values never change.
 * See docs/abi.md.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef SMOE_STREAM_H
#define SMOE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version -------------------------------------------------------- */

#define SMOE_VERSION_MAJOR 1
#define SMOE_VERSION_MINOR 1
#define SMOE_VERSION_PATCH 0
#define SMOE_VERSION_NUMBER \
    (SMOE_VERSION_MAJOR * 10000 + SMOE_VERSION_MINOR * 100 + SMOE_VERSION_PATCH)
#define SMOE_VERSION_STR2_(x) #x
#define SMOE_VERSION_STR_(a, b, c) \
    SMOE_VERSION_STR2_(a) "." SMOE_VERSION_STR2_(b) "." SMOE_VERSION_STR2_(c)
#define SMOE_VERSION_STRING \
    SMOE_VERSION_STR_(SMOE_VERSION_MAJOR, SMOE_VERSION_MINOR, SMOE_VERSION_PATCH)

/* ---- export and deprecation macros ---------------------------------- */

#if defined(_WIN32)
#  if defined(SMOE_BUILDING_SHARED)
#    define SMOE_API __declspec(dllexport)
#  elif defined(SMOE_USING_SHARED)
#    define SMOE_API __declspec(dllimport)
#  else
#    define SMOE_API
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define SMOE_API __attribute__((visibility("default")))
#else
#  define SMOE_API
#endif

#if defined(SMOE_DISABLE_DEPRECATE_WARNINGS)
#  define SMOE_DEPRECATED(msg)
#elif defined(__GNUC__) || defined(__clang__)
#  define SMOE_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#  define SMOE_DEPRECATED(msg)
#endif

/* ---- errors and statuses -------------------------------------------- */

/*
 * X(name, value, message). Values are part of the ABI and never change or
 * get reused; new codes are appended with new, more negative values.
 */
#define SMOE_ERRNO_MAP(X)                                                    \
    X(EINVAL,      -1, "invalid argument")                                   \
    X(ENOMEM,      -2, "out of memory")                                      \
    X(EIO,         -3, "read failed")                                        \
    X(ENOENT,      -4, "no such (layer, expert) in the vault")               \
    X(EFULL,       -5, "ring full: no evictable slot")                       \
    X(EAGAIN,      -6, "expert is still loading")                            \
    X(ENOTRESIDENT,-7, "expert is not resident and nobody prefetched it")    \
    X(ETIMEDOUT,   -8, "timed out")                                          \
    X(ESHUTDOWN,   -9, "stream is shut down")                                \
    X(EBUSY,      -10, "references are still held")                          \
    X(ECHECKSUM,  -11, "blob checksum mismatch")                             \
    X(ETRUNC,     -12, "file is truncated")                                  \
    X(ESYS,       -13, "system call failed")                                 \
    X(EMAGIC,     -14, "bad magic number")                                   \
    X(EVERSION,   -15, "unsupported format version")                         \
    X(ERANGE,     -16, "table or blob lies outside the file")                \
    X(EOVERFLOW,  -17, "offset plus size overflows")                         \
    X(EALIGN,     -18, "misaligned offset or size")                          \
    X(EOVERLAP,   -19, "overlapping blobs")                                  \
    X(EDUP,       -20, "duplicate (layer, expert)")                          \
    X(ECOUNT,     -21, "counts too large for the file")                      \
    X(EHDRSUM,    -22, "header or table checksum mismatch")                  \
    X(EFORMAT,    -23, "malformed field")                                    \
    X(EDIRECTIO,  -24, "file system refuses direct I/O")                     \
    X(ENOTSUP,    -25, "not supported")                                      \
    X(ESMALLRING, -26, "ring cannot hold one layer's experts")               \
    X(ESLOTSIZE,  -27, "slot size is smaller than the largest blob")         \
    X(EREFS,      -28, "too many references to one slot")                    \
    X(ESOURCE,    -29, "a source file of an index vault is missing or changed")

typedef enum smoe_error {
    SMOE_OK = 0,
#define SMOE_ERR_ENUM_(name, val, msg) SMOE_##name = (val),
    SMOE_ERRNO_MAP(SMOE_ERR_ENUM_)
#undef SMOE_ERR_ENUM_
    SMOE_ERR_LAST_ = -29
} smoe_error;

/*
 * Positive statuses of smoe_prefetch(). The two status sets share values
 * (SMOE_QUEUED == SMOE_READY == 0): hold a status, once it is known not to
 * be an error, in a variable of its type, and the compiler warns where one
 * set is compared with or assigned from the other (-Wenum-compare,
 * -Wenum-conversion). The functions return int, as they always have.
 */
typedef enum smoe_prefetch_status {
    SMOE_QUEUED   = 0, /* a read was queued for this expert */
    SMOE_RESIDENT = 1, /* already READY or retained; no read */
    SMOE_INFLIGHT = 2, /* already loading; joined, no second read */
    SMOE_SKIPPED  = 3  /* speculative request dropped (cap or no room); counted */
} smoe_prefetch_status;

/* Positive statuses of smoe_claim() and smoe_claim_wait(). */
typedef enum smoe_claim_status {
    SMOE_READY = 0, /* first claim since the blob was read */
    SMOE_HIT   = 1  /* retained blob claimed again: zero bytes read */
} smoe_claim_status;

/* Message for a code ("unknown error" for a value no release defined). */
SMOE_API const char *smoe_strerror(int err);           /* since 1.0 */
/* Symbolic name of a code, e.g. "SMOE_ETRUNC". */
SMOE_API const char *smoe_err_name(int err);           /* since 1.0 */
/*
 * The calling thread's detailed message for its most recent failing call
 * (e.g. "vault.smoe: expert table entry 17 (layer 0, expert 17): offset
 * 4096 is not a multiple of 16384"). Thread-local; valid until the thread's
 * next call into the library. Never NULL.
 */
SMOE_API const char *smoe_last_error(void);            /* since 1.0 */

SMOE_API unsigned smoe_version_number(void);           /* since 1.0 */
SMOE_API const char *smoe_version_string(void);        /* since 1.0 */

/* ---- element types of blob components -------------------------------- */

/*
 * dtype values, grouped by range and never reused:
 *   1..63       plain element types (every safetensors dtype)
 *   0x100 + t   ggml type t, numbered exactly as ggml's enum ggml_type
 *               (quantised block types included: Q4_0 is 0x102, Q4_K 0x10c)
 *   0x200       mlx-style packed quantisation: uint32 words holding
 *               quant_bits-bit values; groups of quant_group elements along
 *               the last dimension share a scale and a bias, stored as
 *               components named "<name>.scales" and "<name>.biases"
 */
typedef enum smoe_dtype {
    SMOE_DTYPE_UNKNOWN = 0,
    SMOE_DTYPE_BOOL = 1,
    SMOE_DTYPE_U8 = 2,
    SMOE_DTYPE_I8 = 3,
    SMOE_DTYPE_U16 = 4,
    SMOE_DTYPE_I16 = 5,
    SMOE_DTYPE_F16 = 6,
    SMOE_DTYPE_BF16 = 7,
    SMOE_DTYPE_U32 = 8,
    SMOE_DTYPE_I32 = 9,
    SMOE_DTYPE_F32 = 10,
    SMOE_DTYPE_U64 = 11,
    SMOE_DTYPE_I64 = 12,
    SMOE_DTYPE_F64 = 13,
    SMOE_DTYPE_F8_E4M3 = 14,
    SMOE_DTYPE_F8_E5M2 = 15,
    SMOE_DTYPE_F8_E8M0 = 16,
    SMOE_DTYPE_F4_E2M1 = 17,  /* two values per byte */
    SMOE_DTYPE_F6_E2M3 = 18,  /* four values per three bytes */
    SMOE_DTYPE_F6_E3M2 = 19,
    SMOE_DTYPE_C64 = 20,
    SMOE_DTYPE_GGML_BASE = 0x100,
    SMOE_DTYPE_MLX_PACKED = 0x200
} smoe_dtype;
#define SMOE_DTYPE_GGML(t) (SMOE_DTYPE_GGML_BASE + (t))

/* Name of a dtype ("bf16", "ggml:q4_K", "mlx_packed"), "?" if unknown. */
SMOE_API const char *smoe_dtype_name(uint32_t dtype);  /* since 1.0 */

/* ---- blob layouts ---------------------------------------------------- */

#define SMOE_COMPONENT_NAME_MAX 64 /* bytes, NUL included */
#define SMOE_MAX_DIMS 4

/*
 * One named component (a matrix or its scales) inside an expert blob.
 * Mirrors the vault's 128-byte component record; fixed size.
 */
typedef struct smoe_component {
    char name[SMOE_COMPONENT_NAME_MAX]; /* "gate", "up", "down.scales", ... */
    uint32_t dtype;                     /* SMOE_DTYPE_* */
    uint32_t ndim;                      /* 1..SMOE_MAX_DIMS */
    uint64_t shape[SMOE_MAX_DIMS];      /* outermost first; unused dims 0 */
    uint64_t offset;                    /* byte offset inside the blob */
    uint64_t nbytes;                    /* byte size */
    uint32_t quant_group;               /* mlx packed: group size, else 0 */
    uint32_t quant_bits;                /* mlx packed: bits per value, else 0 */
} smoe_component;

/* ---- the stream ------------------------------------------------------ */

typedef struct smoe_stream smoe_stream;

/* Log levels passed to smoe_log_fn. */
typedef enum smoe_log_level {
    SMOE_LOG_ERROR = 0,
    SMOE_LOG_WARN = 1,
    SMOE_LOG_INFO = 2
} smoe_log_level;
typedef void (*smoe_log_fn)(void *user, int level, const char *msg);

/* smoe_open_opts.flags */
typedef enum smoe_open_flag {
    /* Fall back to buffered reads where the file system refuses direct I/O. */
    SMOE_OPEN_ALLOW_BUFFERED = 1u << 0,
    /* Always use buffered reads (benchmarks, file systems without O_DIRECT). */
    SMOE_OPEN_BUFFERED = 1u << 1,
    /* mlock() the ring after faulting it in. */
    SMOE_OPEN_MLOCK = 1u << 2,
    /* smoe_close() frees even while references are held. */
    SMOE_OPEN_FORCE_CLOSE = 1u << 3,
    /* No pre-warm thread. */
    SMOE_OPEN_NO_PREWARM = 1u << 4,
    /* Neither load nor save the popularity histogram. */
    SMOE_OPEN_NO_FREQ = 1u << 5,
    /* The caller finds components with smoe_blob_component() or
     * smoe_blob_find(), so it may be given an index vault (since 1.1).
     * Without it such a vault is SMOE_ENOTSUP: its components do not lie
     * at the offsets smoe_layout_component() gives. */
    SMOE_OPEN_EXTENTS = 1u << 6,
    /* Back the ring with a memory file whose descriptor smoe_ring_region_get()
     * gives (fd, fd_offset), so that the caller can map a claimed blob's
     * pages at another address with mmap(MAP_SHARED) instead of copying
     * them (since 1.1). Linux: memfd_create; macOS: an unlinked shm_open
     * object; any other system: SMOE_ENOTSUP at open. */
    SMOE_OPEN_SHAREABLE = 1u << 7
} smoe_open_flag;

/* smoe_open_opts.verify */
typedef enum smoe_verify_mode {
    SMOE_VERIFY_DEFAULT = 0, /* the default: on, as SMOE_VERIFY_ON (a vault
                                indexed without hashes is not checked); its
                                cost: docs/benchmarks.md, "Cold throughput" */
    SMOE_VERIFY_ON = 1,      /* check each blob's XXH3 and zero padding as it lands */
    SMOE_VERIFY_OFF = 2
} smoe_verify_mode;

/* smoe_open_opts.eviction */
typedef enum smoe_eviction {
    SMOE_EVICT_DEFAULT = 0, /* the default: SMOE_EVICT_REUSE (docs/eviction.md) */
    SMOE_EVICT_LRU = 1,     /* least recently used */
    SMOE_EVICT_REUSE = 2    /* learned chance of reuse, less layer distance */
} smoe_eviction;

typedef struct smoe_open_opts {
    size_t struct_size;       /* sizeof(smoe_open_opts); set by _INIT/_init */
    /* since 1.0 */
    uint32_t workers;         /* I/O worker threads; 0: 16 */
    uint32_t ring_slots;      /* slot count; 0: automatic (docs/budget.md), never
                                 more than free memory holds (else SMOE_ENOMEM) */
    uint64_t slot_bytes;      /* slot size; 0: the vault's largest padded blob;
                                 smaller than that blob: SMOE_ESLOTSIZE */
    uint32_t flags;           /* SMOE_OPEN_* */
    uint32_t verify;          /* SMOE_VERIFY_* */
    uint32_t spec_share_pct;  /* speculative reads in flight, % of slots; 0: 25 */
    uint32_t top_k;           /* experts per token per layer; 0: unknown. A ring
                                 under top_k slots is SMOE_ESMALLRING */
    uint64_t reserve_bytes;   /* memory the engine keeps (KV cache, activations) */
    uint64_t scout_bytes;     /* resident dense weights; 0: size of scout_path */
    const char *scout_path;   /* scout file, for the memory budget; may be NULL */
    const char *freq_path;    /* histogram file; NULL: "<vault>.freq"
                                 (docs/freq-format.md) */
    const char *trace_path;   /* record demand prefetches here; NULL: $SMOE_TRACE */
    uint32_t prewarm_pause_us;/* pause after each pre-warm read lands; 0: 4000 */
    uint32_t eviction;        /* SMOE_EVICT_* */
    uint32_t chunk_bytes;     /* demand reads are split in chunks of this many
                                 bytes, spread over idle workers; a multiple of
                                 16 KiB; 0: 4 MiB; >= the largest blob: whole */
    uint32_t spec_chunk_bytes;/* the same for speculative and pre-warm reads:
                                 demand waits at most one such chunk per worker
                                 behind them; 0: 512 KiB */
    smoe_log_fn log_fn;       /* warnings and errors; NULL: silent. Called from
                                 the caller's and the library's threads, and
                                 (replicas: a copy set aside or back) from
                                 several workers at once */
    void *log_user;
    /* since 1.1: replicas (docs/replicas.md) */
    const char *const *replicas; /* n_replicas more paths holding byte-identical
                                 copies of the vault (on other drives): reads
                                 are spread over the vault and every replica */
    uint32_t n_replicas;      /* 0 .. 15; an index vault takes none (SMOE_ENOTSUP) */
    uint32_t replica_retry_ms;/* a copy set aside after failing reads is tried
                                 again this long after; 0: 1000 */
} smoe_open_opts;

#define SMOE_OPEN_OPTS_INIT {sizeof(smoe_open_opts), 0, 0, 0, 0, 0, 0, 0, 0, 0, \
                             NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL, 0, 0}

/* Fill *opts with defaults and set struct_size. Same bytes as the macro. */
SMOE_API void smoe_open_opts_init(smoe_open_opts *opts);        /* since 1.0 */

/*
 * Open a vault and start the streamer: validates the whole vault header and
 * table, sizes (docs/budget.md) and faults in the ring, loads the popularity
 * histogram, opens one direct-I/O descriptor per worker and starts the
 * workers (and the pre-warm thread).
 * vault_path names a regular file or a block device; anything else (a FIFO,
 * a directory, a character device, a socket) is SMOE_EINVAL at once, never
 * a wait (docs/decisions.md). A vault declaring more (layer, expert) pairs
 * than max(65536, 64 x its entries) is SMOE_ECOUNT: what open allocates is
 * sized by the declared shape (docs/vault-format.md).
 * An index vault (version 2, written by `smoe index`: its experts are byte
 * ranges of the GGUF or safetensors files it names) needs
 * SMOE_OPEN_EXTENTS, else SMOE_ENOTSUP. Open then checks each source file
 * against the vault's record and against itself: a missing one, one whose
 * size or header hash differs, one that is not of its recorded kind (its
 * own GGUF or safetensors header parsed), or whose recorded header is not
 * exactly its header, is SMOE_ESOURCE naming the file; an extent that is
 * not inside the data of one tensor that header declares is SMOE_ERANGE
 * (docs/security.md: a vault can make the library read tensor data of the
 * model files it names, nothing else); a changed modification time alone
 * is a warning through log_fn. Its workers read the sources
 * through descriptors opened here, one per source and worker while a
 * quarter of RLIMIT_NOFILE allows, fewer and shared beyond
 * (docs/decisions.md).
 * SMOE_OPEN_SHAREABLE on a system without a memory file is SMOE_ENOTSUP
 * (the message says so); the memory file failing otherwise is SMOE_ESYS.
 * opts.replicas (since 1.1) names copies of a packed vault on other drives:
 * each must be a valid vault with the vault's id (its header checksum),
 * else SMOE_EINVAL (or the loader's code) naming it; an index vault takes
 * none (SMOE_ENOTSUP). Reads are then spread over every copy, a failed
 * read is tried on the others before a claim sees it, a blob that fails
 * its checksum is read again from each copy alone, and a copy that keeps
 * failing (its reads, or the checksums of its own bytes) is set aside
 * (logged) and tried again later (docs/replicas.md,
 * smoe_get_replica_stats).
 * opts may be NULL for defaults.
 * @return 0 and *out set, or a negative code (*out left NULL); any
 * allocation failing is SMOE_ENOMEM, and a failed open leaves no
 * descriptor, thread or memory behind.
 * Thread safety: any thread; the handle is safe to share between threads.
 */
SMOE_API int smoe_open(const char *vault_path, const smoe_open_opts *opts,
                       smoe_stream **out);                      /* since 1.0 */

/*
 * Stop the streamer: thread-safe and idempotent. Every call waiting in
 * smoe_claim_wait() and every later prefetch or claim returns
 * SMOE_ESHUTDOWN; workers stop after the read they are doing. Claimed blobs
 * stay valid until released. @return 0.
 */
SMOE_API int smoe_shutdown(smoe_stream *s);                     /* since 1.0 */

/*
 * Shut down (if not yet), join every thread, save the histogram and free
 * everything. No other thread may be inside the library for this handle.
 * While references are held it returns SMOE_EBUSY and frees nothing, unless
 * the stream was opened with SMOE_OPEN_FORCE_CLOSE. NULL is a no-op.
 * @return 0, SMOE_EBUSY.
 */
SMOE_API int smoe_close(smoe_stream *s);                        /* since 1.0 */

/* smoe_prefetch() flags */
typedef enum smoe_prefetch_flag {
    SMOE_PREFETCH_DEMAND = 0,
    SMOE_PREFETCH_SPECULATIVE = 1u << 0
} smoe_prefetch_flag;

/*
 * Ask for an expert. Never reads, and never waits for a worker, a read or
 * room in a queue. It can wait for another thread in one case only: while
 * another thread's prefetch of the same expert is choosing that expert's
 * slot (one scan of the slot words: no I/O, no lock), a prefetch of the
 * expert spins, then yields, until the choice is made and then joins that
 * read (SMOE_INFLIGHT). The wait is as long as that thread takes to be
 * scheduled again (under SCHED_FIFO on one core, until it runs).
 * @return SMOE_QUEUED: a read was queued (a slot was reserved, evicting the
 *           least recently used idle slot if no slot was empty);
 *         SMOE_RESIDENT: already READY or retained; its LRU tick is
 *           refreshed and, for a demand request, it is pinned until claimed;
 *         SMOE_INFLIGHT: already loading; a demand request for a queued
 *           speculative read upgrades it to demand priority;
 *         SMOE_SKIPPED: speculative only: dropped because speculation is at
 *           its cap, no slot is evictable, or the read queue has no room
 *           (counted in stats); nothing was changed;
 *         SMOE_EFULL: demand only: every slot is referenced, loading or
 *           awaiting its demand claims, or the demand read queue has no
 *           room; nothing was changed;
 *         SMOE_EREFS: demand only: the expert already has 127 demand
 *           prefetches awaiting their claims; nothing was changed;
 *         SMOE_ENOENT: no such (layer, expert); SMOE_ESHUTDOWN.
 * Pins: each successful demand prefetch pins the expert, and each claim
 * of it (smoe_claim, smoe_claim_wait) that takes a reference or reports its
 * failed read removes one pin, if it has any. An expert with pins is never
 * evicted: every demand prefetch is honoured by one claim, also when
 * several threads prefetch the same expert. Pins are counted, not owned: a
 * claim removes one whoever made the prefetch. So a thread that claims an
 * expert other threads prefetch too must demand-prefetch it itself first
 * (smoe_claim_wait included, which prefetches on its own only when the
 * expert is neither resident nor in flight at demand priority); otherwise
 * its claim honours another thread's prefetch, whose claim may then find
 * the expert evicted (SMOE_ENOTRESIDENT). A prefetch that is never
 * claimed keeps its expert pinned (a ring full of such experts returns
 * SMOE_EFULL).
 * Thread safety: any number of threads at once; lock-free; no allocation.
 */
SMOE_API int smoe_prefetch(smoe_stream *s, uint32_t layer, uint32_t expert,
                           unsigned flags);                     /* since 1.0 */

/*
 * A claimed blob. Filled by smoe_claim(); pass the same struct, at the same
 * address, to smoe_release() on the same stream. The data stays valid and
 * unchanged until released. The descriptor records the stream and its own
 * address: smoe_release() refuses (SMOE_EINVAL) a descriptor claimed on
 * another stream, and a copy of a descriptor or one moved to another
 * address, so that no copy can drop another holder's reference. Copy the
 * fields you need, not the descriptor.
 */
typedef struct smoe_blob {
    const void *data;     /* 16 KiB-aligned start of the payload (of the slot) */
    uint64_t size;        /* payload bytes (the padding after it is zeros); of an
                             index vault: the bytes read into the slot, holding
                             every component (smoe_blob_component) */
    uint64_t ring_offset; /* data - ring base (see smoe_ring_region) */
    uint32_t layer;
    uint32_t expert;
    uint32_t layout;      /* blob layout index, see smoe_layout_component() */
    uint32_t slot;        /* internal: slot index */
    uint32_t gen;         /* internal: slot generation */
    uint32_t held;        /* internal: nonzero while this descriptor holds a reference */
    uint64_t reserved_[2]; /* internal: the claiming stream, the descriptor's address */
} smoe_blob;

/*
 * Cancel a queued speculative or pre-warm read that no worker has started:
 * its slot goes back to empty and the expert is no longer resident.
 * @return 0: cancelled; SMOE_EBUSY: its read has started, or a demand
 *         prefetch awaits it; SMOE_ENOTRESIDENT: no read of it is queued
 *         (never asked for, or already READY); SMOE_ENOENT.
 * Thread safety: any number of threads at once; lock-free; no allocation.
 */
SMOE_API int smoe_cancel(smoe_stream *s, uint32_t layer, uint32_t expert); /* since 1.0 */

/*
 * A speculative prefetch that carries the engine's probability p, in
 * [0, 1], that the expert is asked for (demand-prefetched) at the next
 * visit of its layer: a router lookahead's guess. As
 * SMOE_PREFETCH_SPECULATIVE (same statuses, same speculation cap, never
 * evicts a slot with references, demand pins or a read in progress),
 * and in addition:
 *  - until the layer's next demand prefetch, the `reuse` eviction policy
 *    ranks and admits the expert by p instead of its own estimate (under
 *    SMOE_EVICT_LRU, which keeps no estimate, p orders reads only);
 *  - when more speculative reads are queued than workers can serve, hinted
 *    reads are served highest p first (in 4 bands of 0.25), before
 *    plain speculative ones and always after demand;
 *  - once the layer's demand set is complete (the first demand prefetch of
 *    the next layer), hinted reads that no demand prefetch of the layer
 *    joined and no worker has started are cancelled (counted in
 *    stats.hint_cancelled and spec_cancelled).
 * A later hint of the same expert replaces p. docs/eviction.md, "Hints".
 * @return as smoe_prefetch with SMOE_PREFETCH_SPECULATIVE; SMOE_EINVAL: p
 *         not in [0, 1] (or NaN).
 * Thread safety: any number of threads at once; lock-free; no allocation.
 */
SMOE_API int smoe_prefetch_hint(smoe_stream *s, uint32_t layer, uint32_t expert,
                                float p);                       /* since 1.1 */

/*
 * Non-blocking claim (never issues I/O). A claim that takes a reference, or
 * reports a failed read, honours one demand prefetch of the expert: it
 * removes one pin, if the expert has any (see smoe_prefetch). *blob may
 * be uninitialised: the claim does not read it. Claiming into a
 * descriptor that still holds a reference overwrites it and leaks that
 * reference (smoe_close then returns SMOE_EBUSY; SMOE_OPEN_FORCE_CLOSE
 * closes anyway): release first, or claim into another descriptor.
 * @return SMOE_READY or SMOE_HIT: exactly one reference taken, *blob filled;
 *         SMOE_EAGAIN: still loading; SMOE_ENOTRESIDENT: nobody prefetched
 *         it (or it was evicted); SMOE_EIO, SMOE_ECHECKSUM, SMOE_ETRUNC: its
 *         read failed, and stays failed until the next prefetch of the
 *         expert retries it; SMOE_ENOENT; SMOE_ESHUTDOWN; SMOE_EREFS.
 *         No reference is taken on any negative return. After a failed
 *         read, smoe_last_error() says why: the errno's name and text, the
 *         file offset and length of the failed read and whether its
 *         retries were used up, where a truncated file ends, or that the
 *         padding is not zero (SMOE_ECHECKSUM with verification on); with
 *         replicas, the copy at fault ("replica 1 (/path)"); for an index
 *         vault, the source file read or, on a checksum mismatch, the
 *         source files the blob comes from.
 * Thread safety: any number of threads at once; lock-free; no allocation.
 */
SMOE_API int smoe_claim(smoe_stream *s, uint32_t layer, uint32_t expert,
                        smoe_blob *blob);                       /* since 1.0 */

/*
 * Claim, waiting up to timeout_ns (UINT64_MAX: no limit), counted from the
 * first attempt that fails. Issues a demand prefetch first when the expert
 * is neither resident nor in flight, or is a speculative read nobody has
 * demand-prefetched (it then waits for that read at demand priority); the
 * claim that ends the call honours that prefetch, so a call that succeeds
 * leaves no pin of its own. (A call that fails after its prefetch, e.g. on
 * its timeout, leaves that one pin: the next claim of the expert removes
 * it.) Spins briefly, then parks on the slot's word (futex / ulock) until a
 * worker publishes it. @return as smoe_claim(), plus SMOE_ETIMEDOUT,
 * SMOE_EFULL (the demand prefetch found no room) and SMOE_EREFS.
 */
SMOE_API int smoe_claim_wait(smoe_stream *s, uint32_t layer, uint32_t expert,
                             uint64_t timeout_ns, smoe_blob *blob); /* since 1.0 */

/*
 * Drop the reference *blob holds. The slot keeps its data and identity
 * (retained) until the LRU evicts it. @return 0; SMOE_EINVAL when *blob
 * holds no reference (released already, or never claimed), was claimed on
 * another stream, or is not the descriptor the claim filled (a copy, or
 * moved to another address); nothing is released then.
 * Thread safety: any thread, but not concurrently on the same descriptor.
 */
SMOE_API int smoe_release(smoe_stream *s, smoe_blob *blob);     /* since 1.0 */

/*
 * Engine busy flag. A stream opens idle, so pre-warm starts at once; each
 * change back to idle (between requests) starts a new pre-warm pass. Once
 * smoe_set_busy(s, 1) returns, the pre-warm thread queues no new read until
 * the engine is idle again (it waits for the one pre-warm prefetch being
 * issued, if any: microseconds). @return 0.
 * Thread safety: any thread.
 */
SMOE_API int smoe_set_busy(smoe_stream *s, int busy);           /* since 1.0 */

/* ---- warm-up (since 1.1) ---------------------------------------------- */

typedef struct smoe_warmup_opts {
    size_t struct_size;       /* sizeof(smoe_warmup_opts); set by _INIT */
    /* since 1.1 */
    uint32_t max_experts;     /* experts to load at most; 0: as many as the ring's
                                 empty slots hold */
    uint32_t workers;         /* parallel streams, one worker each; 0 or more than
                                 opts.workers at open: every worker */
    uint32_t flags;           /* none defined yet: must be 0 */
} smoe_warmup_opts;

#define SMOE_WARMUP_OPTS_INIT {sizeof(smoe_warmup_opts), 0, 0, 0}

/*
 * Fill the ring's empty slots at the drive's speed, e.g. at start-up when
 * memory holds most of the model (docs/api.md, "Warm-up"). It picks the
 * experts most likely to be used, by the popularity histogram's claim
 * counts, most first, ties and experts never claimed in layer order
 * (layer-major, then expert), skipping those already resident or in
 * flight, as many as opts->max_experts or the ring's empty slots allow. It
 * reads them in the vault's order (an index vault: layer order), split in
 * contiguous shares of about equal bytes, one per worker: each worker reads
 * its own share front to back in chunks of opts.chunk_bytes, so the drive
 * sees that many sequential streams. It only takes empty slots: it never
 * evicts an expert, its own loads included. Its loads are pre-warm loads
 * (evictable, not counted against the speculative cap). Demand and
 * speculative reads come first: a worker takes them before each warm-up
 * chunk, so demand waits at most one chunk per worker. Progress is in
 * smoe_stats (warmup_*). Returns at once; await it with
 * smoe_warmup_wait(), stop it with smoe_warmup_cancel(). opts may be NULL
 * (defaults); fields past opts->struct_size take their defaults.
 * @return the number of experts chosen (0: nothing to do, no warm-up
 *         runs); SMOE_EINVAL (NULL stream, bad struct_size, unknown
 *         flags); SMOE_EBUSY (a warm-up is running); SMOE_ESHUTDOWN;
 *         SMOE_ENOMEM.
 * Thread safety: any thread. Allocates (its list of experts); the workers'
 * part takes no lock and allocates nothing.
 */
SMOE_API int smoe_warmup(smoe_stream *s, const smoe_warmup_opts *opts); /* since 1.1 */

/*
 * Wait until the running warm-up, if any, has ended (every chosen expert
 * loaded or failed, the ring full, or cancelled), up to timeout_ns
 * (UINT64_MAX: no limit). Parks; never spins.
 * @return 0 (also when none runs); SMOE_ETIMEDOUT; SMOE_ESHUTDOWN when the
 *         stream was shut down before the warm-up ended; SMOE_EINVAL.
 * Thread safety: any number of threads at once.
 */
SMOE_API int smoe_warmup_wait(smoe_stream *s, uint64_t timeout_ns);    /* since 1.1 */

/*
 * Stop the running warm-up: each worker finishes the expert it is reading
 * (a load begun is never left half done) and begins no other. Returns once
 * no worker reads for the warm-up any more (or the stream is shut down).
 * Experts it loaded stay resident.
 * @return 0 (also when none runs); SMOE_EINVAL.
 * Thread safety: any thread.
 */
SMOE_API int smoe_warmup_cancel(smoe_stream *s);                      /* since 1.1 */

/*
 * Save the popularity histogram now: temporary file, fsync, rename
 * (docs/freq-format.md). On failure the previous file is left intact.
 * @return 0; SMOE_ENOTSUP when saving is off (SMOE_OPEN_NO_FREQ, or the
 * directory is not writable); SMOE_EIO, SMOE_ESYS, SMOE_ENOMEM.
 * Thread safety: any thread; saves are serialised.
 */
SMOE_API int smoe_freq_save(smoe_stream *s);                    /* since 1.0 */

/*
 * The ring's memory, for registering it once with a GPU API, or with
 * SMOE_OPEN_SHAREABLE for mapping claimed blobs elsewhere: the bytes at
 * base + x are those at offset fd_offset + x of fd, so a blob's are at
 * fd_offset + blob.ring_offset. A mapping of fd shows whatever the slot
 * holds at the time: once the blob is released, the slot may be evicted
 * and refilled with another blob, so unmap or remap before releasing.
 * fd is the stream's: valid until smoe_close() (dup() it to keep it;
 * mappings stay valid after close).
 */
typedef struct smoe_ring_region {
    size_t struct_size;
    /* since 1.0 */
    void *base;           /* 16 KiB-aligned */
    uint64_t length;      /* multiple of 16 KiB */
    uint64_t slot_stride; /* multiple of 16 KiB */
    uint32_t slots;
    uint32_t reserved0_;
    /* since 1.1 */
    int32_t fd;           /* the ring's memory file; -1 without SMOE_OPEN_SHAREABLE */
    uint32_t reserved1_;
    uint64_t fd_offset;   /* offset of base in fd; a multiple of 16 KiB */
} smoe_ring_region;

SMOE_API int smoe_ring_region_get(smoe_stream *s, smoe_ring_region *r); /* since 1.0 */

/* What the vault holds. */
typedef struct smoe_vault_info {
    size_t struct_size;
    /* since 1.0 */
    uint32_t layers;
    uint32_t experts;         /* per layer */
    uint32_t layouts;
    uint32_t top_k;           /* from the vault's metadata; 0 if unknown */
    uint64_t max_padded;      /* largest padded blob */
    uint64_t total_padded;    /* sum of padded blobs */
    uint64_t file_size;
    uint64_t vault_id;        /* XXH3 of header and tables: identifies the vault */
} smoe_vault_info;

SMOE_API int smoe_vault_info_get(smoe_stream *s, smoe_vault_info *vi); /* since 1.0 */

/* Number of components in blob layout `layout`, or a negative code. */
SMOE_API int smoe_layout_count(smoe_stream *s, uint32_t layout);       /* since 1.0 */
/* Component `index` of layout `layout`. Its offset is where it lies in a
 * packed vault's blobs; in an index vault's, where it lies in the bytes the
 * expert's hash covers (components end to end): find it in a claimed blob
 * with smoe_blob_component(). */
SMOE_API int smoe_layout_component(smoe_stream *s, uint32_t layout, uint32_t index,
                                   smoe_component *out);               /* since 1.0 */
/* Component named `name` of layout `layout`; SMOE_ENOENT if none. */
SMOE_API int smoe_layout_find(smoe_stream *s, uint32_t layout, const char *name,
                              smoe_component *out);                    /* since 1.0 */
/*
 * Component `index` of a claimed blob's layout, with out->offset where it
 * lies in this blob: its bytes are ((const char *)blob->data + out->offset)
 * [0, out->nbytes). The other fields are smoe_layout_component()'s.
 * In a packed vault the offset is the layout's, a multiple of the vault's
 * component alignment (256 by default). In an index vault each expert's
 * components are read from their source files into the slot as they lie
 * there, so the offset differs from expert to expert and a component is
 * aligned only as its source file aligns it: GGUF's general.alignment (32
 * by default), safetensors' 8 (or less, for a file whose header length is
 * not a multiple of 8), never more than the read alignment (4096 to 16384).
 * The slot itself, blob->data, stays 16 KiB-aligned.
 * @return 0; SMOE_EINVAL (NULL argument, or blob holds no reference);
 *         SMOE_ENOENT (index past the layout's components).
 * Thread safety: any thread, while blob holds its reference; lock-free,
 * no allocation.
 */
SMOE_API int smoe_blob_component(smoe_stream *s, const smoe_blob *blob, uint32_t index,
                                 smoe_component *out);                 /* since 1.1 */
/* The component of a claimed blob named `name`, as smoe_blob_component();
 * SMOE_ENOENT if its layout has none. */
SMOE_API int smoe_blob_find(smoe_stream *s, const smoe_blob *blob, const char *name,
                            smoe_component *out);                      /* since 1.1 */
/* Value of a metadata key ("model", "quant", ...), or NULL. Owned by s. */
SMOE_API const char *smoe_meta_get(smoe_stream *s, const char *key);   /* since 1.0 */

/* smoe_stats.io_mode */
typedef enum smoe_io_mode { SMOE_IO_DIRECT = 1, SMOE_IO_BUFFERED = 2 } smoe_io_mode;

/*
 * Counters since open. Set st->struct_size (SMOE_STATS_INIT); the library
 * fills only that many bytes. Counts are taken without stopping the
 * streamer, so they are a near-instant snapshot, not one atomic cut.
 */
typedef struct smoe_stats {
    size_t struct_size;
    /* since 1.0: requests */
    uint64_t prefetch_demand;     /* demand smoe_prefetch calls that succeeded */
    uint64_t prefetch_spec;       /* speculative smoe_prefetch calls */
    uint64_t hits;                /* demand found READY or retained: no read */
    uint64_t joins;               /* demand found a read in flight */
    uint64_t misses;              /* demand started a read */
    uint64_t spec_queued;         /* speculative reads queued */
    uint64_t spec_skipped;        /* speculative requests dropped */
    uint64_t spec_upgraded;       /* queued speculative reads upgraded to demand */
    uint64_t spec_cancelled;      /* queued speculative reads evicted unstarted */
    uint64_t spec_used;           /* speculative reads later claimed */
    uint64_t spec_wasted_bytes;   /* speculative bytes evicted without a claim */
    uint64_t full;                /* demand prefetches refused with SMOE_EFULL */
    /* since 1.0: reads */
    uint64_t reads_done;          /* reads that completed (ok or failed) */
    uint64_t reads_failed;
    uint64_t bytes_read;
    uint64_t evictions;
    /* since 1.0: claims */
    uint64_t claims;              /* successful claims */
    uint64_t claim_hits;          /* of which retained (SMOE_HIT) */
    uint64_t claim_waits;         /* smoe_claim_wait calls that had to wait */
    uint64_t claim_wait_ns;       /* total time spent waiting in smoe_claim_wait */
    uint64_t releases;
    /* since 1.0: ring */
    uint64_t slots;
    uint64_t slot_bytes;
    uint64_t ring_bytes;
    uint64_t slots_empty;         /* slot counts by state, at the time of the call */
    uint64_t slots_loading;
    uint64_t slots_ready;
    uint64_t slots_retained;      /* CONSUMED with no reference */
    uint64_t slots_referenced;    /* held by at least one claim */
    uint64_t slots_failed;
    /* since 1.0: workers */
    uint64_t io_mode;             /* SMOE_IO_DIRECT or SMOE_IO_BUFFERED */
    uint64_t verify;              /* 1 if blobs are checked on load */
    uint64_t workers;
    uint64_t worker_parks;        /* times a worker parked idle */
    uint64_t worker_wakes;        /* wake-ups issued to parked workers */
    /* since 1.0: chunked reads and time from prefetch to READY */
    uint64_t chunk_bytes;         /* demand read chunk in effect */
    uint64_t chunks_read;
    uint64_t ready_demand;        /* demand loads that reached READY or FAILED */
    uint64_t ready_demand_p50_ns; /* time from prefetch to READY, demand loads */
    uint64_t ready_demand_p99_ns;
    uint64_t ready_spec;          /* speculative and pre-warm loads, likewise */
    uint64_t ready_spec_p50_ns;
    uint64_t ready_spec_p99_ns;
    /* since 1.0: ring sizing (docs/budget.md); bytes unless named slots */
    uint64_t budget_rules;        /* SMOE_BUDGET_* bits */
    uint64_t budget_mem_total;    /* RAM */
    uint64_t budget_mem_available;/* Linux MemAvailable; macOS memorystatus_level x memsize */
    uint64_t budget_cgroup_limit; /* tightest memory cgroup limit; UINT64_MAX: none */
    uint64_t budget_cgroup_usage; /* that cgroup's usage */
    uint64_t budget_free;         /* min(available, cgroup limit - usage) */
    uint64_t budget_scout;        /* subtracted: the scout file */
    uint64_t budget_overhead;     /* subtracted: fixed engine overhead */
    uint64_t budget_reserve;      /* subtracted: opts.reserve_bytes */
    uint64_t budget_os_floor;     /* subtracted: max(RAM / 8, 4 GiB) */
    uint64_t budget_bytes;        /* what is left (0 if the subtractions exceed free) */
    uint64_t budget_slots;        /* budget_bytes / slot_bytes, before floor, clamp, cap */
    uint64_t top_k;               /* opts.top_k; 0: not given */
    uint64_t working_set_slots;   /* layers x top_k: one token's experts; 0: unknown */
    uint64_t cliff;               /* 1: the ring holds less than one token's experts */
    /* since 1.0: popularity histogram (docs/freq-format.md) and pre-warm */
    uint64_t freq_status;         /* SMOE_FREQ_*: what open found */
    uint64_t freq_saving;         /* SMOE_FREQ_SAVE_* */
    uint64_t freq_saves;          /* histogram saves that succeeded */
    uint64_t freq_save_errors;    /* saves that failed (the previous file stays) */
    uint64_t prewarm_slots;       /* most slots pre-warm fills; 0: no pre-warm */
    uint64_t prewarm_passes;      /* idle periods pre-warm ran to the end of */
    uint64_t prewarm_reads;       /* reads queued by pre-warm */
    uint64_t prewarm_hits;        /* of which later claimed */
    uint64_t spec_chunk_bytes;    /* speculative and pre-warm read chunk in effect */
    /* since 1.0: eviction (docs/eviction.md) */
    uint64_t eviction;            /* SMOE_EVICT_* in effect (never DEFAULT) */
    uint64_t evict_scans;         /* victim scans: loads that found no EMPTY slot at once */
    uint64_t evict_scanned;       /* slots those scans looked at */
    uint64_t evict_rescored;      /* reuse: slot scores recomputed by scans */
    uint64_t reuse_examples;      /* reuse: demand requests' examples learned from */
    /* since 1.1: warm-up (smoe_warmup), the last one started */
    uint64_t warmup_running;      /* 1 while it runs */
    uint64_t warmup_experts;      /* experts it chose */
    uint64_t warmup_loaded;       /* of which READY (or claimed) after its load */
    uint64_t warmup_failed;       /* of which failed (read or checksum) */
    uint64_t warmup_bytes;        /* padded bytes of the loaded experts */
    uint64_t warmup_ns;           /* from smoe_warmup to its end (or to now) */
    uint64_t warmup_bytes_per_s;  /* warmup_bytes / warmup_ns */
    /* since 1.1: hinted speculation (smoe_prefetch_hint) */
    uint64_t prefetch_hint;       /* smoe_prefetch_hint calls that passed validation */
    uint64_t hint_cancelled;      /* hinted reads cancelled: their layer's demand
                                   * set did not contain the expert */
} smoe_stats;

/* smoe_stats.budget_rules: how the slot count was reached */
typedef enum smoe_budget_rule {
    SMOE_BUDGET_AUTO = 1u << 0,       /* sized by the memory budget (ring_slots 0) */
    SMOE_BUDGET_FALLBACK = 1u << 1,   /* raised to 25% of free memory */
    SMOE_BUDGET_CLAMP_MIN = 1u << 2,  /* raised to 64 slots */
    SMOE_BUDGET_CLAMP_MAX = 1u << 3,  /* lowered to 4096 slots */
    SMOE_BUDGET_CAPPED = 1u << 4,     /* lowered to what the memory cgroup allows */
    SMOE_BUDGET_NO_MEMINFO = 1u << 5, /* free memory unknown: 64 slots */
    SMOE_BUDGET_VAULT_CAP = 1u << 6   /* lowered to one slot per blob of the vault */
} smoe_budget_rule;

/* smoe_stats.freq_status: the histogram file found at open */
typedef enum smoe_freq_status {
    SMOE_FREQ_OFF = 0,        /* SMOE_OPEN_NO_FREQ */
    SMOE_FREQ_LOADED = 1,     /* loaded; pre-warm follows it */
    SMOE_FREQ_ABSENT = 2,     /* no file yet: counting starts at zero */
    SMOE_FREQ_TRUNCATED = 3,  /* ignored: shorter than its header says */
    SMOE_FREQ_CORRUPT = 4,    /* ignored: bad magic, field or checksum */
    SMOE_FREQ_VERSION = 5,    /* ignored: a format version this release cannot read */
    SMOE_FREQ_FOREIGN = 6,    /* ignored: made for another vault, or before a repack */
    SMOE_FREQ_UNREADABLE = 7  /* ignored: could not be read (permissions, I/O error,
                                 not a regular file: a FIFO is never waited on) */
} smoe_freq_status;

/* smoe_stats.freq_saving */
typedef enum smoe_freq_saving {
    SMOE_FREQ_SAVE_OFF = 0,      /* SMOE_OPEN_NO_FREQ */
    SMOE_FREQ_SAVE_ON = 1,       /* saved at close and by smoe_freq_save */
    SMOE_FREQ_SAVE_READONLY = 2  /* its directory is not writable: never saved */
} smoe_freq_saving;

/* Designated in C and value-initialised in C++, so that -Wextra stays quiet
 * about the fields left 0. */
#ifdef __cplusplus
#define SMOE_CXX_INIT_(T) \
    static inline T T##_cxx_init_(void) { T v = {}; v.struct_size = sizeof v; return v; }
SMOE_CXX_INIT_(smoe_stats)
SMOE_CXX_INIT_(smoe_ring_region)
SMOE_CXX_INIT_(smoe_vault_info)
#undef SMOE_CXX_INIT_
#define SMOE_STATS_INIT smoe_stats_cxx_init_()
#define SMOE_RING_REGION_INIT smoe_ring_region_cxx_init_()
#define SMOE_VAULT_INFO_INIT smoe_vault_info_cxx_init_()
#else
#define SMOE_STATS_INIT {.struct_size = sizeof(smoe_stats)}
#define SMOE_RING_REGION_INIT {.struct_size = sizeof(smoe_ring_region)}
#define SMOE_VAULT_INFO_INIT {.struct_size = sizeof(smoe_vault_info)}
#endif

SMOE_API int smoe_get_stats(smoe_stream *s, smoe_stats *st);    /* since 1.0 */

/*
 * Counters of one copy of the vault: copy 0 is the vault itself, copy i
 * (1 .. n_replicas) is opts.replicas[i - 1]. Set st->struct_size
 * (SMOE_REPLICA_STATS_INIT); the library fills only that many bytes. Reads
 * are chunks (opts.chunk_bytes). An index vault has one copy, its sources.
 */
typedef struct smoe_replica_stats {
    size_t struct_size;
    /* since 1.1 */
    const char *path;         /* as given to smoe_open; valid until smoe_close */
    uint64_t reads;           /* reads it served */
    uint64_t bytes;           /* bytes of those reads */
    uint64_t failed;          /* reads that failed on it (then tried on another copy), and
                                 blobs read from it alone that failed their checksum */
    uint64_t set_aside;       /* times it was set aside after failing reads (or checksums)
                                 in a row */
    uint64_t in_use;          /* 1: reads may go to it; 0: set aside now */
    uint64_t rate;            /* learned throughput, bytes/s; 0: nothing learned yet */
} smoe_replica_stats;

#ifdef __cplusplus
#define SMOE_REPLICA_STATS_INIT smoe_replica_stats{sizeof(smoe_replica_stats), nullptr, \
                                                   0, 0, 0, 0, 0, 0}
#else
#define SMOE_REPLICA_STATS_INIT {.struct_size = sizeof(smoe_replica_stats)}
#endif

/*
 * Counters of copy i of the vault (see smoe_replica_stats).
 * @return the number of copies (1 + opts.n_replicas), so that a caller may
 * loop from i = 0; SMOE_EINVAL: NULL argument, a struct_size too small to
 * hold path, or i not below that number.
 * Thread safety: any thread, while the stream is open.
 */
SMOE_API int smoe_get_replica_stats(smoe_stream *s, uint32_t i,
                                   smoe_replica_stats *st);     /* since 1.1 */

/* ---- writing vaults -------------------------------------------------- */

typedef struct smoe_writer smoe_writer;

typedef struct smoe_writer_opts {
    size_t struct_size;
    /* since 1.0 */
    uint32_t layers;          /* required */
    uint32_t experts;         /* per layer; required */
    uint32_t component_align; /* alignment of components in a blob; 0: 256 */
    uint32_t reserved0_;
} smoe_writer_opts;

#define SMOE_WRITER_OPTS_INIT {sizeof(smoe_writer_opts), 0, 0, 0, 0}

/*
 * Start writing a vault. The vault is written to "<path>.tmp.<pid>" and
 * renamed to path by smoe_writer_finish(), so an interrupted write never
 * leaves a file that looks complete.
 */
SMOE_API int smoe_writer_open(const char *path, const smoe_writer_opts *opts,
                              smoe_writer **out);               /* since 1.0 */
/*
 * Add a blob layout; *id receives its index. Component offsets must be
 * multiples of component_align, in increasing order and non-overlapping.
 */
SMOE_API int smoe_writer_add_layout(smoe_writer *w, const smoe_component *comps,
                                    uint32_t n, uint32_t *id);  /* since 1.0 */
/* Set a metadata key (no '=' or newline in key, no newline in value). */
SMOE_API int smoe_writer_set_meta(smoe_writer *w, const char *key,
                                  const char *value);           /* since 1.0 */
/* Append the blob of (layer, expert); size must cover its layout. */
SMOE_API int smoe_writer_add_blob(smoe_writer *w, uint32_t layer, uint32_t expert,
                                  uint32_t layout, const void *data,
                                  uint64_t size);               /* since 1.0 */
/* Write the tables, fsync, rename into place and free w. SMOE_ECOUNT when
 * layers x experts is more than max(65536, 64 x the blobs added). */
SMOE_API int smoe_writer_finish(smoe_writer *w);                /* since 1.0 */
/* Remove the temporary file and free w. NULL is a no-op. */
SMOE_API void smoe_writer_abort(smoe_writer *w);                /* since 1.0 */

#ifdef __cplusplus
}
#endif
#endif /* SMOE_STREAM_H */
