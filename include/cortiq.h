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

/* CQ_API marks the library's exported entry points: libcortiq.so is built
 * with -fvisibility=hidden and exports what this header declares, nothing
 * else. */
#if defined(__GNUC__) || defined(__clang__)
#define CQ_API __attribute__((visibility("default")))
#else
#define CQ_API
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
CQ_API const char *cq_status_str(cq_status s);
/* The message of the last failing call on this thread ("" if none). */
CQ_API const char *cq_last_error(void);
/* Version string "MAJOR.MINOR.PATCH". */
CQ_API const char *cq_version(void);

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
CQ_API void cq_set_log(cq_log_fn fn, void *user, cq_log_level min_level);

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
CQ_API const char *cq_dtype_name(cq_dtype dt);
/* Parse a codec name (case-insensitive, "q4t" accepted for q4_tiled); -1 if unknown. */
CQ_API int cq_dtype_from_name(const char *name);

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
CQ_API void cq_cancel_request(void);
CQ_API void cq_cancel_clear(void);

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
CQ_API cq_status cq_cmf_open(const char *path, cq_cmf **out);
/* Open from a caller-owned buffer, which must outlive the handle. */
CQ_API cq_status cq_cmf_open_memory(const void *buf, size_t len, cq_cmf **out);

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
CQ_API cq_status cq_cmf_open_ex(const char *path, const cq_cmf_open_opts *opts, cq_cmf **out);
CQ_API cq_status cq_cmf_open_memory_ex(const void *buf, size_t len, const cq_cmf_open_opts *opts, cq_cmf **out);
CQ_API void cq_cmf_close(cq_cmf *cmf);

/* Check a tensor's payload against the hash64 its directory record holds.
 * The first call for a tensor hashes it (large ones on several threads);
 * later calls return at once. Thread-safe. CQ_OK for a view without an
 * owner and for a container opened with no_verify; CQ_ERR_HASH naming the
 * tensor when the bytes do not match. Binding, dequantizing and uploading a
 * tensor call this; call it before reading t->data yourself. */
CQ_API cq_status cq_cmf_check_tensor(const cq_tensor_view *t);

CQ_API size_t cq_cmf_tensor_count(const cq_cmf *cmf);
CQ_API const cq_tensor_view *cq_cmf_tensor_at(const cq_cmf *cmf, size_t i);
/* O(1) average lookup by exact name; NULL if absent. */
CQ_API const cq_tensor_view *cq_cmf_find(const cq_cmf *cmf, const char *name);
/* Skill resolution: "skill.<skill>.<name>" if present, else "<name>". */
CQ_API const cq_tensor_view *cq_cmf_find_skill(const cq_cmf *cmf, const char *skill, const char *name);

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
CQ_API cq_status cq_cmf_get_info(const cq_cmf *cmf, cq_cmf_info *out);

/* The exact header JSON bytes (not NUL-terminated). */
CQ_API const char *cq_cmf_header_json(const cq_cmf *cmf, size_t *len);
/* Verbatim tokenizer.json bytes, or NULL (len 0) if the section is absent. */
CQ_API const uint8_t *cq_cmf_tokenizer_json(const cq_cmf *cmf, size_t *len);
/* Chat template from the header's tokenizer_config, or NULL. NUL-terminated. */
CQ_API const char *cq_cmf_chat_template(const cq_cmf *cmf);
/* Skill ids registered in the header. */
CQ_API const char *cq_cmf_skill_id(const cq_cmf *cmf, size_t i);

/* Progress callback for long operations: done/total in arbitrary units.
 * Return non-zero to cancel (the operation then fails with CQ_ERR_INTERRUPTED). */
typedef int (*cq_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Recompute every tensor's hash64 and the header/dir/section hashes that are
 * recorded. CQ_OK when all match; CQ_ERR_HASH naming the first mismatch
 * otherwise. `problems` (optional) receives the number of mismatches. */
CQ_API cq_status cq_cmf_verify(const cq_cmf *cmf, size_t *problems, cq_progress_fn progress, void *user);

/* Dequantize one whole tensor into f32 (nelem floats); checks its hash
 * first (cq_cmf_check_tensor). */
CQ_API cq_status cq_cmf_dequantize(const cq_tensor_view *t, float *out, size_t out_len);

/* The format's 64-bit integrity hash. */
CQ_API uint64_t cq_hash64(const void *data, size_t len);

/* ------------------------------------------------------------------------ */
/* CMF v2 container: streaming writer                                       */
/* ------------------------------------------------------------------------ */
typedef struct cq_cmf_writer cq_cmf_writer;

/* Create a writer for `path`. Data goes to a temporary file beside it; the
 * final name appears only after cq_cmf_writer_finish() re-opened and verified
 * the result. */
CQ_API cq_status cq_cmf_writer_create(const char *path, cq_cmf_writer **out);
/* Header JSON (an object with at least version, arch, quant_type). The
 * writer adds section_hashes itself. */
CQ_API cq_status cq_cmf_writer_set_header(cq_cmf_writer *w, const char *json, size_t len);
/* Verbatim tokenizer.json for the tokenizer section. */
CQ_API cq_status cq_cmf_writer_set_tokenizer(cq_cmf_writer *w, const void *json, size_t len);
/* Append one tensor whose payload is complete in memory (already encoded). */
CQ_API cq_status cq_cmf_writer_add(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim,
                            const uint64_t *shape, const void *payload, uint64_t nbytes);
/* Append one tensor in pieces: begin, write chunks totalling nbytes, end. */
CQ_API cq_status cq_cmf_writer_begin(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim,
                              const uint64_t *shape, uint64_t nbytes);
CQ_API cq_status cq_cmf_writer_write(cq_cmf_writer *w, const void *chunk, size_t len);
CQ_API cq_status cq_cmf_writer_end(cq_cmf_writer *w);
/* Fail early with CQ_ERR_IO when the target's file system has fewer than
 * `planned_bytes` free (the writer also checks before each large tensor). */
CQ_API cq_status cq_cmf_writer_check_space(cq_cmf_writer *w, uint64_t planned_bytes);
/* Progress of the read-back verification inside cq_cmf_writer_finish(). */
CQ_API void cq_cmf_writer_set_progress(cq_cmf_writer *w, cq_progress_fn fn, void *user);
/* Finish: write directory/header/envelope, fsync, re-open + verify, rename. */
CQ_API cq_status cq_cmf_writer_finish(cq_cmf_writer *w);
/* Abandon: removes the temporary file. Accepts NULL. Also frees a finished writer. */
CQ_API void cq_cmf_writer_free(cq_cmf_writer *w);

/* ------------------------------------------------------------------------ */
/* Runtime: a pack opened on a backend, images, chat                        */
/* ------------------------------------------------------------------------ */
/* A model is a pack opened for running: its configs, tokenizer and (once
 * loaded) its weights bound on one backend. Opening reads no weight, so a
 * request can be checked in milliseconds (cq_image_check); the weights are
 * bound by cq_model_load or by the first call that needs them. A model is
 * used from one thread at a time. */
typedef struct cq_model cq_model;

typedef enum cq_model_kind {
    CQ_MODEL_IMAGE = 1, /* a text-to-image pipeline (cq_image_generate) */
    CQ_MODEL_TEXT = 2,  /* a language model (cq_session_open) */
} cq_model_kind;

/* All zeros is the default. */
typedef struct cq_model_opts {
    /* "cpu", "ref", "cuda", "cuda:N", "vulkan[:N]" or "auto" (a CUDA GPU of compute capability 8.0 or
     * newer where this build and the machine have one, else the CPU); NULL: the CPU backend, so an
     * embedder uses a GPU only when it asks for one */
    const char *backend;
    int threads;         /* CPU worker threads; 0: one per core */
    bool no_verify;      /* do not hash each tensor when first read (cq_cmf_open_opts.no_verify) */
    const char *name;    /* what a PNG's "model" text chunk records; NULL: the file's base name
                          * (cq_model_open) or the pack's arch (cq_model_open_cmf) */
    /* the most device memory a GPU backend may hold at once, in bytes (`cortiq --gpu-memory`); 0: what
     * the device has free when the backend is created, less a margin. The CPU ignores it. */
    uint64_t gpu_memory;
} cq_model_opts;

/* Open the pack at `path`. Fails with CQ_ERR_UNSUPPORTED, naming what the pack
 * holds and what can be run, when it is neither an image pipeline nor a
 * language model of a supported architecture. */
CQ_API cq_status cq_model_open(const char *path, const cq_model_opts *opts, cq_model **out);
/* The same on a container the caller opened; it must outlive the model. */
CQ_API cq_status cq_model_open_cmf(const cq_cmf *cmf, const cq_model_opts *opts, cq_model **out);
/* Create the backend and bind the weights on it (a second call does nothing). */
CQ_API cq_status cq_model_load(cq_model *m);
CQ_API void cq_model_free(cq_model *m);
CQ_API cq_model_kind cq_model_get_kind(const cq_model *m);
/* The pack's architecture ("qwen_image21", "qwen3"): the header's arch_name,
 * which picks the implementation (cq_model_open lists the supported ones when
 * a pack's is not). */
CQ_API const char *cq_model_arch(const cq_model *m);
/* The backend the weights are on ("cpu/avx512", "cuda:0 (H200)"); "" before cq_model_load. */
CQ_API const char *cq_model_backend_name(const cq_model *m);
/* Seconds cq_model_load took (backend creation and weight binding); 0 before. */
CQ_API double cq_model_load_seconds(const cq_model *m);
/* What the model keeps on its device under the backend's memory budget, one
 * line ("all resident, weights as planes, plan 21.30 GiB of 130.00 GiB");
 * "" on a backend without a budget (the CPU) or before cq_model_load. For an
 * image model it is the plan of the last generation (or the load's). */
CQ_API const char *cq_model_memory_plan(const cq_model *m, char *buf, size_t len);

/* ---- images -------------------------------------------------------------- */
typedef enum cq_image_phase {
    CQ_IMAGE_PHASE_TEXT = 0, /* tokenizer + text encoder (once per prompt) */
    CQ_IMAGE_PHASE_PREFILL,  /* the denoiser's per-prompt conditioning */
    CQ_IMAGE_PHASE_STEPS,    /* the denoising loop: one call per finished step follows */
    CQ_IMAGE_PHASE_DECODE,   /* latents -> pixels */
    CQ_IMAGE_PHASE_DONE,
} cq_image_phase;

/* Called as each phase begins (step 0) and after each denoising step
 * (phase CQ_IMAGE_PHASE_STEPS, step 1..n_steps). Return non-zero to stop:
 * generation then fails with CQ_ERR_INTERRUPTED after the current step.
 * cq_cancel_request() stops it the same way from any thread or a signal
 * handler. */
typedef int (*cq_image_progress_fn)(cq_image_phase phase, int step, int n_steps, void *user);

typedef struct cq_image_opts {
    const char *prompt;
    const char *negative;   /* NULL: the pack's default negative prompt, else none (Z-Image: the empty prompt) */
    int width, height;      /* pixels, multiples of the model's cq_image_defaults.size_multiple (32 for
                             * Qwen-Image-2.1, 16 for Z-Image); 0: the default size */
    int steps;              /* denoising steps, cq_image_defaults.min_steps..1000; 0: the default */
    uint64_t seed;          /* noise seed (torch.randn's stream, bit-exact) */
    double guidance;        /* the reference pipeline's own guidance_scale, as that model defines it
                             * (cq_image_defaults.guidance_rule: Qwen-Image-2.1 true CFG when > 1 with a
                             * negative prompt; Z-Image pos + g (pos - neg) when > 0); < 0: the default */
    bool rgba;              /* keep the alpha channel; else composite over white to RGB */
    /* The architecture's own options as command-line words, NULL-terminated
     * ({"--noise-dtype", "bf16", NULL} for Qwen-Image-2.1; `cortiq imagine
     * --help` lists each architecture's); NULL: its defaults. A word the
     * model's architecture does not take is refused. */
    const char *const *arch_opts;
    cq_image_progress_fn progress; /* NULL: none */
    void *user;             /* passed to progress */
    /* The input pictures of an editing model (Qwen-Image-Edit: one; Edit-Plus: 1..8), PNG or JPEG files read
     * as RGB (alpha dropped); a model that draws from text alone refuses them, an editing model needs one.
     * Qwen-Image-2.1 takes 0..8 condition pictures (read as RGBA). An editing model's default size (width and
     * height 0, each on its own) is the last picture's. */
    const char *const *images;
    int n_images;
} cq_image_opts;

/* The defaults: the model's size, steps and guidance, seed 0, RGB. */
CQ_API void cq_image_opts_init(cq_image_opts *o);

/* What an image model draws with where a request leaves a field at its
 * default: the pack's recommended settings (its header's
 * generation_defaults, which `cortiq convert` writes for a known model),
 * else its architecture's. */
typedef struct cq_image_defaults {
    int width, height, steps;  /* width and height 0: from the input pictures (editing models) */
    double guidance;
    const char *negative;      /* the pack's default negative prompt, or NULL */
    double shift;              /* the pack's schedule shift (used by models that take one), or 0 */
    bool size_from_pack, steps_from_pack, guidance_from_pack; /* which of them the pack gave */
    int size_multiple;         /* width and height must be multiples of it */
    int min_steps;
    const char *guidance_rule; /* what guidance means for this model, one line of text */
    int max_images;            /* input pictures it edits (0: it draws from text alone) */
    bool images_optional;      /* max_images > 0 and pictures optional (Qwen-Image-2.1: conditions) */
} cq_image_defaults;
CQ_API cq_status cq_image_get_defaults(cq_model *m, cq_image_defaults *out);
/* Put the defaults into the fields left at them (size, steps, guidance, the
 * negative prompt), so the caller sees what will be drawn. */
CQ_API cq_status cq_image_resolve(cq_model *m, cq_image_opts *o);

/* Seconds per phase of one generation. load: weights bound by this call
 * (0 when cq_model_load ran before). */
typedef struct cq_image_timings {
    double load, text, prefill, steps, decode;
} cq_image_timings;

/* A generated picture: 8-bit pixels with the settings that drew it. */
typedef struct cq_image cq_image;

/* Everything cq_image_generate would refuse (size, steps, guidance, the
 * schedule, each prompt's encoding and its length in tokens against the
 * model's limits), without reading a weight; CQ_ERR_INVALID_ARG with a message
 * that gives the limit. */
CQ_API cq_status cq_image_check(cq_model *m, const cq_image_opts *o);
/* Draw the prompt (loads the weights first when cq_model_load did not). */
CQ_API cq_status cq_image_generate(cq_model *m, const cq_image_opts *o, cq_image **out);
/* Interleaved rows of width * channels bytes (channels 3: RGB, 4: RGBA),
 * valid until cq_image_free. Any of the out-pointers may be NULL. */
CQ_API const uint8_t *cq_image_pixels(const cq_image *img, int *width, int *height, int *channels);
CQ_API cq_image_timings cq_image_get_timings(const cq_image *img);
/* Write the picture as a PNG ("-": standard output) with the prompt, negative
 * prompt, seed, steps, size, guidance and model in text chunks. Only a regular
 * file (or a link to one) is replaced, in one step once complete. Seconds
 * spent go to *seconds when not NULL. */
CQ_API cq_status cq_image_write_png(const cq_image *img, const char *path, double *seconds);
CQ_API void cq_image_free(cq_image *img);

/* ---- chat ---------------------------------------------------------------- */
/* A conversation with a language model: the pack's chat template (ChatML when
 * it has none) renders the whole conversation each turn, the K/V cache keeps
 * what it already holds, and the reply streams token by token. One session
 * per model at a time. */
typedef struct cq_session cq_session;

typedef struct cq_session_opts {
    int context;               /* K/V cache positions; 0: the model's maximum, at most 4096 */
    int enable_thinking;       /* the template's enable_thinking: 0 false, 1 true, -1 not set */
    bool raw;                  /* no template: the model continues the plain text */
    const char *chat_template; /* overrides the pack's template; NULL: the pack's */
    const char *system;        /* a system message before the conversation; NULL: none */
    int max_tokens;            /* at most this many tokens per reply */
    /* sampling: temperature -> top-k -> top-p -> min-p, then one seeded draw */
    bool greedy;               /* take the most likely token (lowest id on ties) */
    float temperature;         /* > 0 unless greedy */
    int top_k;                 /* 0: off */
    float top_p;               /* 1: off */
    float min_p;               /* 0: off */
    uint64_t seed;
} cq_session_opts;

/* The defaults: temperature 0.7, top-k 20, top-p 0.8, min-p 0, seed 0,
 * 512 tokens per reply, enable_thinking not set. */
CQ_API void cq_session_opts_init(cq_session_opts *o);

/* Each generated token and the text it completes (possibly empty: partial
 * UTF-8 is held back). Return non-zero to end the reply there. */
typedef int (*cq_token_fn)(int32_t id, const char *text, size_t len, void *user);

typedef struct cq_turn_stats {
    int prompt_tokens;  /* ids of the rendered conversation */
    int reused_tokens;  /* of those, already in the cache */
    int generated;      /* tokens generated (a stop token not counted) */
    int32_t stop_id;    /* the stop token that ended the reply, or -1 */
    bool context_full;  /* ended because the cache is full */
    double prefill_s, generate_s;
} cq_turn_stats;

/* Open a session (loads the weights first when cq_model_load did not). */
CQ_API cq_status cq_session_open(cq_model *m, const cq_session_opts *o, cq_session **out);
/* Append a message without generating (history). */
CQ_API cq_status cq_session_add_message(cq_session *s, const char *role, const char *content);
/* Add the user's message, generate the reply (streamed through on_token, which
 * may be NULL) and add it to the conversation. stats may be NULL. */
CQ_API cq_status cq_session_turn(cq_session *s, const char *message, cq_token_fn on_token, void *user,
                                 cq_turn_stats *stats);
CQ_API void cq_session_free(cq_session *s);

#ifdef __cplusplus
}
#endif
#endif /* CORTIQ_H */
