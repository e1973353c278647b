/*
 * config.h — reading a model's config JSON with one convention for every
 * architecture:
 *  - the config is the u8 tensor `<prefix>config_json` holding a JSON object
 *    (cq_cfg_open);
 *  - a member that is absent or null takes its default; a default outside
 *    the allowed range makes the member required;
 *  - a present member of the wrong type or outside its range is an error
 *    naming the model, the member's path and what it must be:
 *    "qwen3: config text_config.hidden_size must be an integer in [1, 65536]".
 */
#ifndef CQ_MODELS_KIT_CONFIG_H
#define CQ_MODELS_KIT_CONFIG_H

#include <cJSON.h>
#include <stdbool.h>

#include "base/base.h"
#include "cortiq.h"

typedef struct cq_cfg {
    const cJSON *o;    /* the object members are read from */
    const char *who;   /* the model, first in every message ("qi21") */
    const char *where; /* the object's path in messages: "" or "text_config." */
} cq_cfg;

/* Parse `<prefix>config_json` (a u8 tensor, its hash checked) into *root, a
 * JSON object the caller frees with cJSON_Delete. CQ_ERR_MISSING when the
 * pack has no such tensor. */
cq_status cq_cfg_open(const cq_cmf *cmf, const char *prefix, const char *who, cJSON **root);
/* Open `<prefix>config_json` (prefix NULL is ""), hand the root object to
 * parse(root, out) and free it: a model's whole config read. */
typedef cq_status (*cq_cfg_parser)(const cJSON *root, void *out);
cq_status cq_cfg_read(const cq_cmf *cmf, const char *prefix, const char *who, cq_cfg_parser parse, void *out);
/* The member, or NULL when it is absent or null. */
const cJSON *cq_cfg_get(const cq_cfg *c, const char *key);
/* An integer in [lo, hi] (a number with no fraction). */
cq_status cq_cfg_int(const cq_cfg *c, const char *key, int def, int lo, int hi, int *out);
/* A number in [lo, hi], or (lo, hi] when lo_open. */
cq_status cq_cfg_num(const cq_cfg *c, const char *key, double def, double lo, bool lo_open, double hi, double *out);
/* The same check on an item found elsewhere (a member with fallbacks); `key` names it in the message. */
cq_status cq_cfg_num_item(const cq_cfg *c, const cJSON *it, const char *key, double lo, bool lo_open, double hi,
                          double *out);
/* The member _class_name, where it is a string, must be `want`; with
 * required it must be there as a string. */
cq_status cq_cfg_class(const cq_cfg *c, const char *want, bool required);
cq_status cq_cfg_bool(const cq_cfg *c, const char *key, bool def, bool *out);
/* An array of min_n .. max_n integers in [lo, hi] into out[]; *n = 0 when
 * absent (the caller keeps its defaults or calls it missing). */
cq_status cq_cfg_ints(const cq_cfg *c, const char *key, int min_n, int max_n, int lo, int hi, int *out, int *n);
/* An array of exactly n finite numbers, rounded to f32, into out[]; required. */
cq_status cq_cfg_floats(const cq_cfg *c, const char *key, int n, float *out);

#endif /* CQ_MODELS_KIT_CONFIG_H */
