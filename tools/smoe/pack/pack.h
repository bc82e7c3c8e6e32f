/*
 * pack.h - turning model checkpoints into a vault and a scout file
 * (`smoe pack`, docs/packing.md).
 *
 * The work runs in three stages, each in its own file:
 *   1. read the source: pack_open.c picks the reader; pack_safetensors.c,
 *      pack_gguf.c, pack_config.c parse headers into a pack_source
 *      (pack_source.c: a flat list of tensors with their file, byte range,
 *      dtype and shape), reading through pack_read.c. Every parser has an
 *      entry point that works on a memory buffer, checks every length and
 *      offset before use and never trusts the file, so a fuzzer can drive
 *      it.
 *   2. plan: pack_patterns.c names the expert tensors, pack_plan.c groups
 *      them into (layer, expert) blobs with one layout per layer, checks that
 *      every layer is complete and consistent, and leaves the rest for the
 *      scout file.
 *   3. write: pack_write.c copies the bytes into the vault (through the
 *      smoe_writer API) and the scout file (laid out and encoded by
 *      pack_scout.c), both under temporary names renamed at the end;
 *      pack_run.c is the three stages in one call.
 *
 * Calls run one way: pack_run -> pack_open -> the parsers -> pack_source,
 * pack_read; pack_write -> pack_scout -> pack_read.
 *
 * Errors are reported the library's way: a negative SMOE_E* code, with
 * smoe_last_error() naming the file, the tensor and what was expected.
 */
#ifndef SMOE_PACK_H
#define SMOE_PACK_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "smoe/smoe.h"
#include "smoe_tier.h"

#define PACK_MAX_DIMS 8
/* Returned (positive) by the buffer parsers when the buffer ends before the
 * header does but the file is longer: read more and call again. */
#define PACK_NEED_MORE 1
/* Longest tensor name accepted from any source. */
#define PACK_NAME_MAX 4096

/* ---- source ---------------------------------------------------------- */

typedef struct pack_tensor {
    char *name;
    uint32_t file;                 /* index into pack_source.files */
    uint32_t dtype;                /* SMOE_DTYPE_* */
    uint32_t ndim;                 /* 0 .. PACK_MAX_DIMS (0: a scalar) */
    uint32_t quant_group;          /* SMOE_DTYPE_MLX_PACKED only */
    uint32_t quant_bits;
    uint32_t reserved_;
    uint64_t shape[PACK_MAX_DIMS]; /* outermost first; unused dims 0 */
    uint64_t offset;               /* absolute byte offset in its file */
    uint64_t nbytes;
} pack_tensor;

typedef struct pack_file {
    char *path;
    uint64_t size;
    uint32_t kind;         /* PACK_FMT_* of this file */
    uint32_t align;        /* every tensor offset is a multiple (GGUF: general.alignment) */
    uint64_t header_bytes; /* its header: safetensors' length and JSON, GGUF's key-values
                              and tensor infos */
} pack_file;

typedef enum pack_format { PACK_FMT_SAFETENSORS = 1, PACK_FMT_GGUF = 2 } pack_format;

/* What the source says about the model; zero or NULL when it says nothing. */
typedef struct pack_meta {
    char *arch;           /* model_type, general.architecture */
    char *model;          /* model name */
    uint32_t top_k;       /* experts per token */
    uint32_t experts;     /* experts per layer */
    uint32_t quant_bits;  /* mlx quantisation (config.json "quantization") */
    uint32_t quant_group;
    char *experts_from;   /* where `experts` came from, for messages */
} pack_meta;

typedef struct pack_source {
    pack_format format;
    char *path;                    /* what the user named */
    pack_file *files;
    uint32_t n_files;
    pack_tensor *tensors;
    size_t n_tensors, cap_tensors;
    pack_meta meta;
} pack_source;

void pack_source_init(pack_source *s);
void pack_source_free(pack_source *s);
/* Append a file; *index receives its index. */
int pack_source_add_file(pack_source *s, const char *path, uint64_t size,
                         uint32_t *index);
/* Append a copy of *t (its name is copied too). */
int pack_source_add_tensor(pack_source *s, const pack_tensor *t);
/*
 * Check tensors [first, first + count) of one file: each range lies in
 * [data_start, file_size) and no two overlap. fname names the file.
 */
int pack_source_check_ranges(const pack_source *s, size_t first, size_t count,
                             uint64_t data_start, uint64_t file_size,
                             const char *fname);
/* Drop the tensors appended after the first n. */
void pack_source_truncate(pack_source *s, size_t n);
/* Set a string field of meta (frees the old value). */
int pack_meta_set(char **field, const char *value);

/*
 * Open SOURCE: a .safetensors file, a model.safetensors.index.json, a
 * directory holding either (or a .gguf), or a .gguf file (pack_open.c).
 */
int pack_source_open(pack_source *s, const char *path);

/* ---- reading source files (pack_read.c) ------------------------------ */

/* Read a whole small file (a JSON document) into a NUL-terminated buffer. */
int pack_read_small_file(const char *path, uint64_t max, char **out, size_t *n);
/*
 * A header parser for pack_read_header: buf holds the first n bytes of the
 * file at path, size bytes long, which is file `file` of the source (when
 * one was given). Returns PACK_NEED_MORE with the length it needs next in
 * *want (more than n, at most size), or its result.
 */
typedef int (*pack_header_fn)(void *u, const char *path, uint32_t file, const uint8_t *buf,
                              size_t n, uint64_t size, size_t *want);
/* Read the header of the file at path: its first `first` bytes (or the
 * whole file when shorter), then as much more as parse asks for. With s,
 * the file is first added to s (parse gets its index). */
int pack_read_header(const char *path, size_t first, pack_source *s, pack_header_fn parse,
                     void *u);

/* ---- safetensors (pack_safetensors.c) -------------------------------- */

/*
 * Parse one safetensors file's header from buf (the first n bytes of a file
 * of file_size bytes) and append its tensors to s with file index `file`.
 * @return 0; PACK_NEED_MORE when n is shorter than the header but the file
 * is not; a negative code naming fname and the tensor otherwise.
 */
int pack_st_parse_header(const uint8_t *buf, size_t n, uint64_t file_size,
                         const char *fname, uint32_t file, pack_source *s);

/* The most shard files an index may name: the most sources an index
 * vault may have (docs/vault-format.md, "sources"). */
#define PACK_MAX_SHARDS 65536u

/* A sharded checkpoint's index: tensor name -> shard file name. */
typedef struct pack_st_index {
    char **shards;        /* distinct shard file names, in first-seen order */
    uint32_t n_shards;
    char **names;         /* weight_map keys */
    uint32_t *shard_of;   /* names[i] lives in shards[shard_of[i]] */
    size_t n_names;
} pack_st_index;

/* Parse model.safetensors.index.json held in json[0..n): linear in its
 * entries; SMOE_ECOUNT past PACK_MAX_SHARDS distinct shards. */
int pack_st_parse_index(const char *json, size_t n, const char *fname,
                        pack_st_index *out);
void pack_st_index_free(pack_st_index *ix);

/* Load one .safetensors file, or an index and all its shards, into s. */
int pack_st_load_file(pack_source *s, const char *path);
int pack_st_load_index(pack_source *s, const char *path);
/* Load every *.safetensors in dir (sorted by name). */
int pack_st_load_dir(pack_source *s, const char *dir);

/* Parse config.json (json[0..n)) into meta. */
int pack_config_parse(const char *json, size_t n, const char *fname, pack_meta *m);

/* ---- GGUF (pack_gguf.c) ---------------------------------------------- */

/* As pack_st_parse_header, for a GGUF v2/v3 file. Also fills s->meta. */
int pack_gguf_parse(const uint8_t *buf, size_t n, uint64_t file_size,
                    const char *fname, uint32_t file, pack_source *s);
int pack_gguf_load_file(pack_source *s, const char *path);

/* ---- name patterns (pack_patterns.c) --------------------------------- */

typedef enum pack_pattern_kind { PACK_PAT_EXPERT = 1, PACK_PAT_STACKED = 2 } pack_pattern_kind;

typedef struct pack_pattern {
    pack_pattern_kind kind;
    char *spec;      /* as written, for messages */
    char *tmpl;      /* template with {L}, {E}, {C}, {*} */
    uint32_t n_map;  /* {C} alternatives; 0: any [A-Za-z0-9_]+ as itself */
    char **src;
    char **dst;
} pack_pattern;

typedef struct pack_patterns {
    pack_pattern *p;
    uint32_t n;
    uint32_t n_user; /* the first n_user are the user's, tried first */
} pack_patterns;

typedef struct pack_match {
    uint32_t pattern;  /* index into pack_patterns.p */
    pack_pattern_kind kind;
    uint32_t layer;
    uint32_t expert;   /* PACK_PAT_EXPERT only */
    uint32_t order;    /* sort key of the component inside a blob */
    char comp[SMOE_COMPONENT_NAME_MAX];
} pack_match;

/* The built-in table (docs/packing.md lists it). */
int pack_patterns_init(pack_patterns *ps);
/*
 * Add a user pattern "KIND:TEMPLATE[:SRC=DST,...]", checked before the
 * built-in ones. @return 0 or SMOE_EINVAL with a message.
 */
int pack_patterns_add(pack_patterns *ps, const char *spec);
void pack_patterns_free(pack_patterns *ps);
/* Match a tensor name. @return 1 and *m filled, 0 when nothing matches. */
int pack_patterns_match(const pack_patterns *ps, const char *name, pack_match *m);

/* ---- plan (pack_plan.c) ---------------------------------------------- */

/* One component of one blob: where its bytes come from. */
typedef struct pack_slice {
    uint32_t tensor;   /* index into pack_source.tensors */
    uint32_t file;
    uint64_t offset;   /* absolute file offset of the slice */
    uint64_t nbytes;
} pack_slice;

typedef struct pack_layout {
    smoe_component *comps;
    uint32_t n;
    uint64_t extent;   /* end of the last component: the blob size */
} pack_layout;

typedef struct pack_plan {
    uint32_t layers, experts;
    uint32_t component_align;
    pack_layout *layouts;
    uint32_t n_layouts;
    uint32_t *layer_layout;   /* per layer: layout index, UINT32_MAX for none */
    pack_slice *slices;       /* per layer with experts: experts x n comps */
    size_t *layer_slice0;     /* per layer: index of its first slice */
    uint32_t *scout;          /* tensor indices for the scout, source order */
    size_t n_scout;
    uint64_t expert_bytes;    /* blob payload bytes (without padding) */
    uint64_t scout_bytes;     /* tensor bytes going to the scout */
    uint32_t entries;         /* (layer, expert) blobs */
} pack_plan;

/* Group s's tensors into blobs and scout tensors; check everything. */
int pack_plan_build(pack_plan *p, pack_source *s, const pack_patterns *ps,
                    uint32_t component_align);
void pack_plan_free(pack_plan *p);

/* ---- scout file (pack_scout.c, docs/scout-format.md) ----------------- */

#define PACK_SCOUT_MAGIC "\x89SCOUT\r\n"
#define PACK_SCOUT_VERSION 1u
#define PACK_SCOUT_HEADER 64u
#define PACK_SCOUT_RECORD 112u      /* fixed part of an index record */
#define PACK_SCOUT_ALIGN 64u
#define PACK_SCOUT_MAX_TENSORS (1u << 24)
#define PACK_SCOUT_MAX_INDEX (256ull << 20)

typedef struct pack_scout_entry {
    char *name;
    uint32_t dtype, ndim, quant_group, quant_bits;
    uint64_t shape[PACK_MAX_DIMS];
    uint64_t offset, nbytes, hash;
} pack_scout_entry;

typedef struct pack_scout {
    uint32_t count;
    uint64_t index_bytes, data_offset, file_size, checksum;
    pack_scout_entry *e;
} pack_scout;

/*
 * Lay out a scout file for tensors[0..n) of s: offsets, index size, file
 * size (hashes are left 0 for the copier to fill).
 */
int pack_scout_layout(pack_scout *sc, const pack_source *s, const uint32_t *tensors, size_t n);
/* Encode the header and index (checksummed) into a malloc'd buffer. */
int pack_scout_encode(const pack_scout *sc, uint8_t **out, size_t *len);
/* Parse a scout file's header and index from buf (its first n bytes). */
int pack_scout_parse(const uint8_t *buf, size_t n, uint64_t file_size,
                     const char *fname, pack_scout *out);
int pack_scout_load(const char *path, pack_scout *out);
/* Check every tensor's hash against its bytes. @return 0 or SMOE_ECHECKSUM. */
int pack_scout_check_data(const char *path, const pack_scout *sc);
void pack_scout_free(pack_scout *sc);
/*
 * The scout file of a vault, when one exists beside it: the name its
 * metadata key "scout" gives, else NAME.scout. malloc'd, or NULL.
 */
char *pack_scout_find(const char *vault_path, const char *meta_scout);
/* Default scout path for a vault path: NAME.scout for NAME.smoe (malloc'd). */
char *pack_scout_path_for(const char *vault_path);

/* ---- writing (pack_write.c) ------------------------------------------ */

typedef struct pack_progress pack_progress;

typedef struct pack_opts {
    const char *out;          /* vault path */
    const char *scout;        /* scout path; NULL: "<out without .smoe>.scout" */
    uint32_t component_align; /* 0: 256 */
    int progress;             /* 1: draw a progress bar on stderr */
    const volatile sig_atomic_t *stop; /* nonzero (set by a signal): abandon */
    int scout_only;           /* write the scout file only (smoe index --scout); out
                                 names the vault it will go with */
} pack_opts;

typedef struct pack_result {
    uint32_t layers, experts, entries, layouts;
    uint64_t n_scout;         /* tensors in the scout file */
    uint64_t vault_bytes;     /* file sizes */
    uint64_t scout_bytes;
    uint64_t source_bytes;    /* tensor bytes copied */
    uint64_t ns;              /* wall time of the copy */
} pack_result;

/* Write the vault and the scout file of a plan. */
int pack_write(const pack_source *s, const pack_plan *p, const pack_opts *o,
               pack_result *r);

/* The vault metadata of a plan (arch, model, top_k, quant, source_format,
 * and scout when scout_path is given), each through put. */
int pack_plan_meta(const pack_source *s, const pack_plan *p, const char *scout_path,
                   int (*put)(void *u, const char *key, const char *value), void *u);
/* SMOE_EINVAL when out is one of s's files (a rename would replace it). */
int pack_check_not_source(const pack_source *s, const char *out);

/* Open SOURCE and plan it (a model name from the path when the source
 * gives none). patterns may be NULL (built-ins only). On failure s and
 * plan are still to be freed. */
int pack_prepare(const char *source, const pack_patterns *ps, uint32_t component_align,
                 pack_source *s, pack_plan *plan);
/* Everything: open, plan, write. patterns may be NULL (built-ins only). */
int pack_run(const char *source, const pack_patterns *ps, const pack_opts *o,
             pack_result *r);

/* ---- index vaults (pack_index.c, docs/vault-format.md "Version 2") ---- */

typedef struct pack_index_opts {
    const char *out;          /* the index vault to write */
    const char *scout;        /* a scout file (a copy of the dense tensors); NULL: none */
    int no_hash;              /* record no per-expert hashes: read no expert byte */
    int progress;             /* 1: draw a progress bar on stderr */
    const volatile sig_atomic_t *stop; /* nonzero (set by a signal): abandon */
    int unchecked;            /* tests only: write the vault even where a source's header
                                 is one the library refuses at open (bytes between
                                 tensors), as a hand-made vault could, so that the
                                 library's own refusal is what is tested */
} pack_index_opts;

typedef struct pack_index_result {
    uint32_t layers, experts, entries, layouts, sources;
    uint64_t vault_bytes;     /* the index vault's size */
    uint64_t model_bytes;     /* the source files' sizes together */
    uint64_t expert_bytes;    /* the experts' bytes (read and hashed unless no_hash) */
    uint64_t hashed_bytes;    /* bytes read: headers, and experts unless no_hash */
    uint64_t n_scout, scout_bytes;
    uint64_t ns;              /* wall time */
} pack_index_result;

/* Write the index vault of a plan: sources named relative to the vault's
 * directory with their size, modification time and header hash; experts
 * as extents with the XXH3 of their components in order (unless no_hash);
 * the scout copy first when asked for. Written as "<out>.tmp.<pid>",
 * fsynced and renamed; an error or interrupt leaves no output. */
int pack_index_write(const pack_source *s, const pack_plan *p, const pack_index_opts *o,
                     pack_index_result *r);
/* Open, plan, index. */
int pack_index_run(const char *source, const pack_patterns *ps, const pack_index_opts *o,
                   pack_index_result *r);

/* ---- reading a plan's sources in order (pack_feed.c) ------------------ */

typedef struct pack_feed_cursor {
    size_t scout;
    uint32_t layer, expert, comp;
    uint64_t done; /* bytes of the current range already advised */
} pack_feed_cursor;

typedef struct pack_feed {
    const pack_source *s;
    const pack_plan *p;
    const smoe__io *io;
    int *fds;               /* one per source file */
    size_t n_scout;         /* scout tensors read first (0: none) */
    pack_feed_cursor ra;    /* where read-ahead has got to */
    uint64_t issued, consumed;
} pack_feed;

/* Open every source file of s; with_scout: the scout tensors come first. */
int pack_feed_open(pack_feed *f, const pack_source *s, const pack_plan *p, int with_scout);
/* Read n bytes at off of source file `file` (the next range in order, for
 * the read-ahead to stay ahead), naming tensor in a failure. */
int pack_feed_read(pack_feed *f, uint32_t file, void *buf, size_t n, uint64_t off,
                   const char *tensor);
void pack_feed_close(pack_feed *f);

/* ---- progress bar (pack_progress.c) ---------------------------------- */

pack_progress *pack_progress_new(uint64_t total, int enabled);
void pack_progress_add(pack_progress *pg, uint64_t bytes);
/* Draw the final state when finished, end the line, free. NULL is a no-op. */
void pack_progress_end(pack_progress *pg, int finished);

/* ---- helpers --------------------------------------------------------- */

/* a * b and a + b with overflow detection; 0 on success. */
static inline int pack_mul(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static inline int pack_add(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
/* Shape as "[a, b, c]" into buf. */
const char *pack_shape_str(const uint64_t *shape, uint32_t ndim, char *buf, size_t n);

#endif
