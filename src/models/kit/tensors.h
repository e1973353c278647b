/*
 * tensors.h — tensor tables: the one list of what an architecture's pack
 * holds, read by the loaders (binding with shape and codec checks), by the
 * benchmark pack generator, by `cortiq convert` (missing and unexpected
 * tensors of a known architecture) and by the tests.
 *
 * An architecture describes its tensors as a function of its config: a
 * static array of patterns (a name with "%d" for the layer index, the shape
 * as products of config symbols) expanded by cq_tt_expand, or, where the
 * structure is not a plain stack of layers (the VAE), code that appends
 * entries one by one. Either way the result is a cq_tt_list of concrete
 * entries: full name, shape, codec policy, required or optional.
 *
 * A loader binds each field by the name the table gives it (cq_tt_bind*):
 * the tensor must be in the pack, its shape what the config implies and its
 * codec one the policy allows; failures name the tensor, the expected and the
 * found shape or codec.
 */
#ifndef CQ_MODELS_KIT_TENSORS_H
#define CQ_MODELS_KIT_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "cortiq.h"
#include "ops/ops.h"

/* How a tensor is stored: what convert and the benchmark packs write, and
 * what a loader accepts. */
typedef enum cq_tt_codec {
    CQ_TT_MATRIX = 0, /* a 2-D weight matrix in any numeric codec (the pack's quantization); shape checked exactly */
    CQ_TT_VECTOR,     /* a per-channel vector (norm gain, bias, gamma) in f32, f16 or bf16; element count checked
                       * (a gamma may be stored [C, 1, 1]) */
    CQ_TT_KERNEL,     /* a convolution kernel [cout, cin, k, k] in a float codec (f16 as converted); first
                       * dimension and element count checked, every dimension when stored with the table's rank */
    CQ_TT_CODEC_COUNT
} cq_tt_codec;

const char *cq_tt_codec_name(cq_tt_codec c);

typedef struct cq_tt_entry {
    char name[192];      /* full name, prefix included */
    const char *pattern; /* the table's pattern it came from (static), prefix excluded */
    int layer;           /* the layer index of a per-layer pattern, else -1 */
    int ndim;
    uint64_t shape[4];
    cq_tt_codec codec;
    bool required;       /* false: the model runs without it (read by other uses, or never on a single frame) */
    float base;          /* benchmark packs: the level a vector's values scatter around (gains 1, biases 0) */
    bool subtree;        /* a name prefix: every tensor under it belongs to a part another user reads (Qwen3-VL's
                          * vision tower beside its text tower); never bound, never missing, never unexpected */
} cq_tt_entry;

typedef struct cq_tt_list {
    cq_tt_entry *e;
    size_t n, cap;
} cq_tt_list;

void cq_tt_list_free(cq_tt_list *l);
/* Append one entry; the name is prefix + printf(fmt, ...). */
cq_status cq_tt_add(cq_tt_list *l, const char *prefix, cq_tt_codec codec, bool required, float base, int ndim,
                    const uint64_t *shape, const char *fmt, ...) CQ_PRINTF(8, 9);
/* Where a convolutional model's table code appends (the VAEs): the list,
 * the names' prefix, whether the entries are required. */
typedef struct cq_tt_sink {
    cq_tt_list *l;
    const char *prefix;
    bool required;
} cq_tt_sink;
/* A convolution `name`: its kernel [cout, cin, k, k] (.weight) and bias [cout] (.bias). */
cq_status cq_tt_add_conv(const cq_tt_sink *t, const char *name, int cin, int cout, int k);
/* A subtree entry: prefix + printf(fmt, ...) is a name prefix (see cq_tt_entry.subtree). */
cq_status cq_tt_add_subtree(cq_tt_list *l, const char *prefix, const char *fmt, ...) CQ_PRINTF(3, 4);
/* The entry of that full name, or NULL (subtrees excepted). */
const cq_tt_entry *cq_tt_find(const cq_tt_list *l, const char *name);

/* ---- pattern tables ------------------------------------------------------------------- */
/* One dimension: mul * sym_value[sym] (sym 0 is the constant 1). */
typedef struct cq_tt_dim {
    uint8_t sym;
    int32_t mul;
} cq_tt_dim;

#define CQ_TT_MAX_SYMS 16

typedef struct cq_tt_pattern {
    const char *name; /* relative to the prefix; "%d" is the layer index when per_layer */
    bool per_layer;
    cq_tt_codec codec;
    bool required;
    float base;
    int ndim;
    cq_tt_dim dims[4];
} cq_tt_pattern;

/* Append every pattern of `pats` (per-layer ones once per layer of n_layers,
 * layer-major: all of layer 0, then layer 1, ...; the others first) with
 * dimensions from sym[0..CQ_TT_MAX_SYMS) (sym[0] must be 1). */
cq_status cq_tt_expand(cq_tt_list *l, const char *prefix, const cq_tt_pattern *pats, size_t n_pats, int n_layers,
                       const int64_t *sym);

/* ---- checks and binding --------------------------------------------------------------- */
/* Whether view v matches entry e (shape and codec policy); a message naming
 * the tensor, what the config implies and what the pack holds otherwise.
 * `who` starts the message ("qi21"). */
cq_status cq_tt_check(const char *who, const cq_tt_entry *e, const cq_tensor_view *v);
/* The entry named prefix + printf(fmt, ...) of l, found in the pack and
 * checked: *out is the view. A name the table lacks is an internal error (the
 * loader and its table disagree); a tensor the pack lacks CQ_ERR_MISSING. */
cq_status cq_tt_get(const char *who, const cq_tt_list *l, const cq_cmf *cmf, const cq_tensor_view **out,
                    const char *fmt, ...) CQ_PRINTF(5, 6);

/* Host values of a checked VECTOR view (n elements, as its entry says) into dst. */
cq_status cq_tt_read_vector(const char *who, const cq_tensor_view *v, float *dst, size_t n);

/* ---- binding a model's weights ------------------------------------------------------- */
/* The backend tensors a loader made for a model (bound weights, F32 copies of
 * vectors, tables built at load), freed together by cq_tt_held_free. The
 * model's own fields are copies of these handles and are never freed
 * themselves. */
typedef struct cq_tt_held {
    cq_tensor *t;
    size_t n, cap;
} cq_tt_held;
/* Take t over (on failure t is freed and CQ_ERR_NOMEM returned). */
cq_status cq_tt_held_add(cq_tt_held *h, const cq_tensor *t);
void cq_tt_held_free(cq_tt_held *h);

/* What a loader binds with: its table, the pack, the backend and where the tensors go. */
typedef struct cq_tt_binder {
    const char *who; /* first in every message ("zimage") */
    const cq_tt_list *table;
    const cq_cmf *cmf;
    cq_backend *be;
    cq_tt_held *held;
} cq_tt_binder;
/* The entry named printf(fmt, ...) (full name, prefix included), checked
 * against the table and bound as a weight (zero-copy on the CPU). */
cq_status cq_tt_bind_weight(const cq_tt_binder *b, cq_tensor *out, const char *fmt, ...) CQ_PRINTF(3, 4);
/* The same for a VECTOR entry: an F32 backend tensor [n] of its values
 * (dequantized once when stored as f16/bf16). */
cq_status cq_tt_bind_vector(const cq_tt_binder *b, cq_tensor *out, const char *fmt, ...) CQ_PRINTF(3, 4);
/* An F32 backend tensor [rows, cols] of host values, held with the weights. */
cq_status cq_tt_held_upload(const cq_tt_binder *b, const float *v, int64_t rows, int64_t cols, cq_tensor *out);

/* ---- pack checks (convert, tests) ------------------------------------------------------- */
typedef struct cq_tt_report {
    size_t missing, unexpected, mismatched; /* counts */
} cq_tt_report;
/* Called once per finding with a sentence ("missing required tensor 'x' [3 x 4]"). */
typedef void (*cq_tt_note_fn)(void *user, const char *line);
/* Compare the pack's tensors under `prefix` (configs excepted) against the
 * table: missing required entries, tensors the table does not list, shape or
 * codec mismatches; each finding goes to note (when not NULL). */
cq_status cq_tt_compare(const char *who, const cq_tt_list *l, const cq_cmf *cmf, const char *prefix,
                        cq_tt_note_fn note, void *user, cq_tt_report *rep);

#endif /* CQ_MODELS_KIT_TENSORS_H */
