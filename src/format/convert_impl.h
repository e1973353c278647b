/*
 * convert_impl.h — private pieces of `convert`: the source layout found on
 * disk (convert_source.c), the header JSON built from it (convert_header.c),
 * the per-tensor codec plan (convert_plan.c) and the streaming loop
 * (convert.c).
 */
#ifndef CQ_CONVERT_IMPL_H
#define CQ_CONVERT_IMPL_H

#include <cjson/cJSON.h>

#include "format/convert.h"
#include "format/safetensors.h"

typedef enum cv_layout { CV_PIPELINE, CV_COMPONENT, CV_LLM } cv_layout;
typedef enum cv_role { CV_DIT, CV_TE, CV_VAE, CV_OTHER, CV_LLM_ROLE } cv_role;

#define CV_MAX_COMP 16
#define CV_MAX_BLOBS (CV_MAX_COMP + 4)

typedef struct cv_comp {
    char prefix[64];     /* "dit", "te", "vae", ...; "" for an LLM folder */
    char folder[128];    /* the folder name inside a pipeline ("." otherwise) */
    cv_role role;
    char *dir;
    cJSON *config;       /* parsed config.json, or NULL */
    cq_st *st;
    bool last_tap;       /* a single-image model of causal 3-D convolutions (AutoencoderKLQwenImage): its 5-D
                          * kernels [cout, cin, t, k, k] are stored as [cout, cin, k, k], the last temporal tap,
                          * the only one a lone frame reads (the taps before it see the causal zero padding) */
} cv_comp;

/* A small file stored verbatim as a u8 tensor. */
typedef struct cv_blob {
    char name[200];
    uint8_t *data;
    size_t len;
} cv_blob;

typedef struct cv_source {
    cv_layout layout;
    char *root;
    char arch[64];
    char class_name[128];   /* model_index / component _class_name, or model_type */
    cv_comp comp[CV_MAX_COMP];
    size_t n_comp;
    cv_blob blob[CV_MAX_BLOBS];
    size_t n_blob;
    char *tok_dir;          /* folder holding tokenizer files, or NULL */
    char *te_dir;           /* the text encoder's folder (generation_config), or NULL */
} cv_source;

/* Find the layout under `root`, parse configs, open every component's
 * safetensors, read the config blobs. Notes go to the report. */
cq_status cv_source_open(const char *root, cv_source *src, cq_convert_report *rep);
void cv_source_free(cv_source *src);
/* The arch name for a diffusers class ("QwenImage21Pipeline" -> "qwen_image21"). */
void cv_arch_from_class(const char *cls, char *out, size_t cap);

/* Header JSON (cq_malloc'd, NUL-terminated) and the tokenizer.json bytes
 * (or NULL). */
cq_status cv_build_header(const cv_source *src, const char *quant_type, const cq_gen_defaults *over,
                          cq_convert_report *rep, char **json, uint8_t **tokenizer, size_t *tokenizer_len);
/* The known recipe of an architecture into *d (nothing set when none is known). */
cq_status cv_recipe(const char *arch, const cJSON *scheduler, cq_gen_defaults *d, cq_convert_report *rep);
/* A .cmf source copied into `out` (convert.h). */
cq_status cv_repack(const char *src, const char *out, const cq_convert_opts *opts, cq_convert_report *rep);

/* JSON helpers shared by the convert files. */
cq_status cv_read_json(const char *path, size_t max_len, cJSON **out);
/* Non-negative integer value of key (exact), or false. */
bool cv_json_uint(const cJSON *obj, const char *key, uint64_t *out);
bool cv_json_num(const cJSON *obj, const char *key, double *out);
char *cv_join(const char *dir, const char *leaf);
cq_status cv_note(cq_convert_report *rep, const char *fmt, ...) CQ_PRINTF(2, 3);

/* ---- the codec plan ---- */
typedef struct cv_choice {
    cq_dtype dtype;
    cq_dtype wanted;        /* differs from dtype when a fallback happened */
    const char *why;        /* reason of the fallback, or NULL */
} cv_choice;

/* Codec for one source tensor under its full pack name. */
cv_choice cv_plan_tensor(const cq_convert_opts *opts, cv_role role, const char *name, const cq_st_tensor *t);
/* Bits a codec spends per weight, roughly (to enforce the 8-bit floor). */
bool cv_codec_below_8_bits(cq_dtype dt);
bool cv_codec_is_float(cq_dtype dt);
/* The header's quant_type enum string for a dominant codec. */
const char *cv_quant_type_name(cq_dtype dt);

#endif
