/*
 * vision_golden.h — what the vision towers' tests share (test_qwen25vl_vision,
 * test_qwen3vl_vision): their golden folder (a Hugging Face model folder, a
 * golden.safetensors and an index.json, as tools/golden_qwen25vl_vision.py
 * and tools/golden_qwen3vl_vision.py write them), the cases' inputs, the
 * error measure and the repacked variants of the converted pack the loader
 * tests read.
 */
#ifndef CQ_TESTS_VISION_GOLDEN_H
#define CQ_TESTS_VISION_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "format/cmf.h"
#include "format/safetensors.h"

#define TV_MAX_IMAGES 8

/* One golden folder, opened: the model converted to an f32 pack in a scratch folder, the reference tensors and
 * the index. */
typedef struct tv_golden {
    cq_cmf *cmf;
    cq_st *st;
    cJSON *index;
} tv_golden;
/* 0, or -1 with a message on stderr (a cmocka setup's answer). */
int tv_open(tv_golden *g, const char *dir, const char *scratch);
void tv_close(tv_golden *g);

/* index.json's cases.<name> ("lm": its lm object), failing the test when absent; a number in it. */
const cJSON *tv_case(const tv_golden *g, const char *name);
double tv_case_num(const tv_golden *g, const char *name, const char *key);
/* The golden tensor "<c>.<what>": f32 of `want` elements, or I32 with its count (malloc'd; fail when absent). */
float *tv_f32(const tv_golden *g, const char *c, const char *what, size_t want);
int32_t *tv_i32(const tv_golden *g, const char *c, const char *what, size_t *n);

/* One call's inputs: the case's grids and its images' pixels (each image's i8 values times pixel_scale, images in
 * the order the case lists them), rows = sum t*h*w. */
typedef struct tv_input {
    int32_t grid[TV_MAX_IMAGES][3];
    int n_images;
    int64_t rows;
    float *pixels;
} tv_input;
void tv_input_open(const tv_golden *g, const char *name, int64_t patch_dim, tv_input *in);

/* max|got - ref| / RMS(ref) */
double tv_rel(const float *got, const float *ref, size_t n);
/* Print one measure and fail the test when it is above its bound. */
void tv_check(const char *backend, const char *c, const char *what, double e, double bound);

/* The pack rewritten to `path`: every name under `prefix`, names starting with `from` renamed to start with `to`
 * (from NULL: none renamed), the config replaced by `config` (NULL: kept), the tensor `drop` (NULL: none) left
 * out. */
void tv_repack(const cq_cmf *cmf, const char *path, const char *prefix, const char *from, const char *to,
               const char *config, const char *drop);
/* The pack's config with vision_config's member `key` set to the JSON `value`, or removed when value is NULL
 * (key "vision_config": the whole object removed); cJSON_free it. */
char *tv_config_with(const cq_cmf *cmf, const char *key, const char *value);

#endif
