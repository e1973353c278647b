/*
 * cortiq.h — the public API of libcortiq, a portable inference runtime for
 * CMF v2 (Cortiq Model Format) files.
 *
 * Conventions (one header, opaque handles):
 *  - Every call that can fail returns a cq_status. CQ_OK is 0. On failure a
 *    message a user can act on is available from cq_last_error() on the same
 *    thread until the next failing call on that thread.
 *  - Destructors accept NULL.
 *  - Nothing in the library exits or aborts on bad input.
 *  - Strings are UTF-8; sizes are bytes unless a name says otherwise.
 */
#ifndef CORTIQ_H
#define CORTIQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CQ_VERSION_MAJOR 0
#define CQ_VERSION_MINOR 1
#define CQ_VERSION_PATCH 0

/* ------------------------------------------------------------------------ */
/* Status codes. Append-only: values are stable.                            */
/* ------------------------------------------------------------------------ */
typedef enum cq_status {
    CQ_OK = 0,
    CQ_ERR_IO = 1,           /* open/read/write/mmap failed */
    CQ_ERR_NOMEM = 2,        /* allocation failed or a size overflowed */
    CQ_ERR_INVALID_ARG = 3,  /* caller passed something unusable */
    CQ_ERR_BOUNDS = 4,       /* an offset/length in a file points outside it */
    CQ_ERR_PARSE = 5,        /* malformed structure (JSON, directory, names) */
    CQ_ERR_MAGIC = 6,        /* not a CMF file */
    CQ_ERR_VERSION = 7,      /* unsupported container version */
    CQ_ERR_FEATURE = 8,      /* unknown required feature bits */
    CQ_ERR_DTYPE = 9,        /* unknown dtype id */
    CQ_ERR_MISSING = 10,     /* a required tensor or file is absent */
    CQ_ERR_HASH = 11,        /* an integrity hash does not match */
    CQ_ERR_UNSUPPORTED = 12, /* valid, but not implemented (yet) */
    CQ_ERR_SHAPE = 13,       /* tensor shape does not fit the operation/model */
    CQ_ERR_NUMERIC = 14,     /* non-finite values where finite ones are required */
    CQ_ERR_INTERNAL = 15,    /* a bug: please report */
    CQ_ERR_INTERRUPTED = 16, /* cancelled by the caller */
    CQ_ERR_AGAIN = 17,       /* a cached state went stale; redo the work the slow way */
    CQ_STATUS_COUNT
} cq_status;

/* Short stable name of a status ("CQ_ERR_BOUNDS"). */
const char *cq_status_str(cq_status s);
/* The message of the last failing call on this thread ("" if none). */
const char *cq_last_error(void);
/* Version string "MAJOR.MINOR.PATCH". */
const char *cq_version(void);

/* ------------------------------------------------------------------------ */
/* Logging hook. By default warnings and errors go to stderr.               */
/* ------------------------------------------------------------------------ */
typedef enum cq_log_level {
    CQ_LOG_DEBUG = 0,
    CQ_LOG_INFO = 1,
    CQ_LOG_WARN = 2,
    CQ_LOG_ERROR = 3,
    CQ_LOG_NONE = 4
} cq_log_level;
typedef void (*cq_log_fn)(cq_log_level level, const char *msg, void *user);
/* Install a log sink (NULL restores the default) and the minimum level. */
void cq_set_log(cq_log_fn fn, void *user, cq_log_level min_level);

/* ------------------------------------------------------------------------ */
/* Tensor element codecs (CMF dtype ids). Append-only, ids are on disk.     */
/* ------------------------------------------------------------------------ */
typedef enum cq_dtype {
    CQ_DTYPE_F32 = 0,
    CQ_DTYPE_F16 = 1,
    CQ_DTYPE_BF16 = 2,
    CQ_DTYPE_Q8_ROW = 3,
    CQ_DTYPE_Q4_BLOCK = 4,
    CQ_DTYPE_MIX8_4 = 5,  /* reserved by the format */
    CQ_DTYPE_U8 = 6,
    CQ_DTYPE_Q4_COL = 7,  /* reserved by the format */
    CQ_DTYPE_VBIT = 8,
    CQ_DTYPE_Q8_2F = 9,
    CQ_DTYPE_VBIT_RO = 10,
    CQ_DTYPE_Q4_TILED = 11,
    CQ_DTYPE_Q1 = 12,
    CQ_DTYPE_Q1S = 13,
    CQ_DTYPE_Q1T = 14,
    CQ_DTYPE_Q4TP = 15,
    CQ_DTYPE_Q2TP = 16,
    CQ_DTYPE_COUNT
} cq_dtype;

#define CQ_MAX_DIMS 6

/* Lower-case name ("q8_2f"); "?" for ids outside the table. */
const char *cq_dtype_name(cq_dtype dt);
/* Parse a codec name (case-insensitive, "q4t" accepted for q4_tiled); -1 if unknown. */
int cq_dtype_from_name(const char *name);

/* ------------------------------------------------------------------------ */
/* CMF v2 container: reading                                                */
/* ------------------------------------------------------------------------ */
typedef struct cq_cmf cq_cmf;

/* A zero-copy view of one tensor inside an open container. Valid until the
 * container is closed. */
typedef struct cq_tensor_view {
    const char *name;        /* NUL-terminated copy owned by the container */
    cq_dtype dtype;
    int ndim;
    uint64_t shape[CQ_MAX_DIMS];
    uint64_t nelem;          /* product of the dims (1 for ndim 0) */
    const uint8_t *data;     /* payload bytes, in place in the mapping */
    uint64_t nbytes;
    uint64_t file_offset;    /* absolute offset of the payload in the file */
    uint64_t hash;           /* hash64 recorded in the directory */
    const cq_cmf *owner;     /* the container the view belongs to; NULL for a view the caller built
                              * (such views are never hash-checked) */
    size_t index;            /* its position in owner's directory (cq_cmf_tensor_at) */
} cq_tensor_view;

/* Cancellation: ask the long work in progress anywhere in the process
 * (conversion, verification, image generation, text generation) to stop at
 * its next unit of work (a tensor, 64 MiB of hashing, a step, a token); it
 * then fails with CQ_ERR_INTERRUPTED and removes what it had half written.
 * Async-signal-safe: a SIGINT handler may call it. Clear the flag before
 * starting new work. */
void cq_cancel_request(void);
void cq_cancel_clear(void);

/* Feature bits of the envelope's required_features field. */
#define CQ_FEATURE_TENSOR_DIR   0x01u
#define CQ_FEATURE_BINARY_MASKS 0x02u
#define CQ_FEATURE_QUANT_2F     0x04u
#define CQ_FEATURE_DELTA_MASKS  0x08u
#define CQ_FEATURE_HOT_PACKS    0x10u
#define CQ_FEATURE_LOOP_MASKS   0x20u
#define CQ_FEATURE_SKILL_FILE   0x40u

/* Open and validate a file (mmap, read-only). Fails with a status and a
 * message naming the bad field or tensor; never reads past the mapping.
 * Integrity, by default (see cq_cmf_open_opts):
 *  - at open, the envelope's header and directory hash64 (when non-zero) and
 *    the masks / tokenizer / index hashes listed in header.section_hashes
 *    must match, else CQ_ERR_HASH naming the section;
 *  - each tensor's hash64 is checked the first time its bytes are read for
 *    decoding or upload (cq_cmf_check_tensor), once per container. */
cq_status cq_cmf_open(const char *path, cq_cmf **out);
/* Open from a caller-owned buffer, which must outlive the handle. */
cq_status cq_cmf_open_memory(const void *buf, size_t len, cq_cmf **out);

/* Options of cq_cmf_open_ex. A zeroed struct (or NULL) is cq_cmf_open's
 * behaviour: every check on. */
typedef struct cq_cmf_open_opts {
    /* Do not hash tensor payloads when first read, nor the masks, tokenizer
     * and index sections at open. The header and directory hashes are still
     * checked (they cost microseconds and catch moved tensors). */
    bool no_verify;
    /* Do not check the envelope's header and directory hashes either, so a
     * damaged file opens as far as its structure allows: for `cortiq verify`
     * (which reports every mismatch itself) and for fuzzers. */
    bool no_envelope_hashes;
    /* Threads that hash a large tensor: 0 = CORTIQ_THREADS or all cores,
     * 1 = the calling thread only. Created on first need, kept until close. */
    int threads;
} cq_cmf_open_opts;
cq_status cq_cmf_open_ex(const char *path, const cq_cmf_open_opts *opts, cq_cmf **out);
cq_status cq_cmf_open_memory_ex(const void *buf, size_t len, const cq_cmf_open_opts *opts, cq_cmf **out);
void cq_cmf_close(cq_cmf *cmf);

/* Check a tensor's payload against the hash64 its directory record holds.
 * The first call for a tensor hashes it (large ones on several threads);
 * later calls return at once. Thread-safe. CQ_OK for a view without an
 * owner and for a container opened with no_verify; CQ_ERR_HASH naming the
 * tensor when the bytes do not match. Binding, dequantizing and uploading a
 * tensor call this; call it before reading t->data yourself. */
cq_status cq_cmf_check_tensor(const cq_tensor_view *t);

size_t cq_cmf_tensor_count(const cq_cmf *cmf);
const cq_tensor_view *cq_cmf_tensor_at(const cq_cmf *cmf, size_t i);
/* O(1) average lookup by exact name; NULL if absent. */
const cq_tensor_view *cq_cmf_find(const cq_cmf *cmf, const char *name);
/* Skill resolution: "skill.<skill>.<name>" if present, else "<name>". */
const cq_tensor_view *cq_cmf_find_skill(const cq_cmf *cmf, const char *skill, const char *name);

/* Summary of the envelope and header. Strings point into the container. */
typedef struct cq_cmf_info {
    uint32_t version;
    uint32_t features;
    uint64_t file_size;
    const char *arch_name;      /* header arch.arch_name */
    const char *quant_type;     /* header quant_type */
    size_t tensor_count;
    size_t skill_count;
    size_t mask_count;
    int has_tokenizer;          /* tokenizer section present */
    int has_chat_template;      /* header tokenizer_config.chat_template present */
    uint64_t header_len, dir_len, data_len, masks_len, vocab_len, index_len;
} cq_cmf_info;
cq_status cq_cmf_get_info(const cq_cmf *cmf, cq_cmf_info *out);

/* The exact header JSON bytes (not NUL-terminated). */
const char *cq_cmf_header_json(const cq_cmf *cmf, size_t *len);
/* Verbatim tokenizer.json bytes, or NULL (len 0) if the section is absent. */
const uint8_t *cq_cmf_tokenizer_json(const cq_cmf *cmf, size_t *len);
/* Chat template from the header's tokenizer_config, or NULL. NUL-terminated. */
const char *cq_cmf_chat_template(const cq_cmf *cmf);
/* Skill ids registered in the header. */
const char *cq_cmf_skill_id(const cq_cmf *cmf, size_t i);

/* Progress callback for long operations: done/total in arbitrary units.
 * Return non-zero to cancel (the operation then fails with CQ_ERR_INTERRUPTED). */
typedef int (*cq_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Recompute every tensor's hash64 and the header/dir/section hashes that are
 * recorded. CQ_OK when all match; CQ_ERR_HASH naming the first mismatch
 * otherwise. `problems` (optional) receives the number of mismatches. */
cq_status cq_cmf_verify(const cq_cmf *cmf, size_t *problems, cq_progress_fn progress, void *user);

/* Dequantize one whole tensor into f32 (nelem floats); checks its hash
 * first (cq_cmf_check_tensor). */
cq_status cq_cmf_dequantize(const cq_tensor_view *t, float *out, size_t out_len);

/* The format's 64-bit integrity hash. */
uint64_t cq_hash64(const void *data, size_t len);

/* ------------------------------------------------------------------------ */
/* CMF v2 container: streaming writer                                       */
/* ------------------------------------------------------------------------ */
typedef struct cq_cmf_writer cq_cmf_writer;

/* Create a writer for `path`. Data goes to a temporary file beside it; the
 * final name appears only after cq_cmf_writer_finish() re-opened and verified
 * the result. */
cq_status cq_cmf_writer_create(const char *path, cq_cmf_writer **out);
/* Header JSON (an object with at least version, arch, quant_type). The
 * writer adds section_hashes itself. */
cq_status cq_cmf_writer_set_header(cq_cmf_writer *w, const char *json, size_t len);
/* Verbatim tokenizer.json for the tokenizer section. */
cq_status cq_cmf_writer_set_tokenizer(cq_cmf_writer *w, const void *json, size_t len);
/* Append one tensor whose payload is complete in memory (already encoded). */
cq_status cq_cmf_writer_add(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim,
                            const uint64_t *shape, const void *payload, uint64_t nbytes);
/* Append one tensor in pieces: begin, write chunks totalling nbytes, end. */
cq_status cq_cmf_writer_begin(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim,
                              const uint64_t *shape, uint64_t nbytes);
cq_status cq_cmf_writer_write(cq_cmf_writer *w, const void *chunk, size_t len);
cq_status cq_cmf_writer_end(cq_cmf_writer *w);
/* Fail early with CQ_ERR_IO when the target's file system has fewer than
 * `planned_bytes` free (the writer also checks before each large tensor). */
cq_status cq_cmf_writer_check_space(cq_cmf_writer *w, uint64_t planned_bytes);
/* Progress of the read-back verification inside cq_cmf_writer_finish(). */
void cq_cmf_writer_set_progress(cq_cmf_writer *w, cq_progress_fn fn, void *user);
/* Finish: write directory/header/envelope, fsync, re-open + verify, rename. */
cq_status cq_cmf_writer_finish(cq_cmf_writer *w);
/* Abandon: removes the temporary file. Accepts NULL. Also frees a finished writer. */
void cq_cmf_writer_free(cq_cmf_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* CORTIQ_H */
