/*
 * qwen25vl_vision.h — the Qwen2.5-VL vision tower (transformers'
 * Qwen2_5_VisionTransformerPretrainedModel, the `visual` part of
 * Qwen2_5_VLForConditionalGeneration): what turns a condition image of
 * Qwen-Image's Edit pipelines into the embeddings that replace its
 * <|image_pad|> tokens. Written once against the op layer.
 *
 * Input: the processor's flattened patches, pixel_values [N, C*T*P*P] (rows
 * per image in the order (t, h/2, w/2, 2, 2), values in (C, T, P, P) order),
 * and each image's grid (t, h, w) in patches; N = sum t*h*w. Output
 * [N/4, out_hidden] (one row per 2x2 merge unit, in the input's order).
 *
 * Semantics (per call, every row in f32):
 *   x = pixel_values · patch_wᵀ                      (the Conv3d, kernel = stride)
 *   the merge units are permuted window by window (windows of
 *   window_size / merge / patch units square, raster within an image frame;
 *   the last row/column of windows may be partial); RoPE: each head's first
 *   D/2 rotary angles are (h_pos · inv | w_pos · inv), inv = theta^(-4j/D),
 *   applied with rotate_half
 *   per block:  x += proj(attn(RMSNorm(x) · w1))     qkv with bias, attention
 *                                                    within each window, or
 *                                                    within each image frame
 *                                                    in fullatt_block_indexes
 *               x += down(silu(gate(h)) ⊙ up(h))     h = RMSNorm(x) · w2, all
 *                                                    with biases
 *   merger:     y = mlp2(gelu_erf(mlp0(concat4(RMSNorm(x) · w_q))))
 *   then the window permutation is undone.
 * RMSNorm eps is 1e-6 everywhere (the reference fixes it).
 */
#ifndef CQ_MODELS_QWEN25VL_VISION_H
#define CQ_MODELS_QWEN25VL_VISION_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_QWEN25VL_VISION_MAX_DEPTH 256
/* images in one call, and the patch rows of one call */
#define CQ_QWEN25VL_VISION_MAX_IMAGES 64
#define CQ_QWEN25VL_VISION_MAX_ROWS (1 << 22)

typedef struct cq_qwen25vl_vision_config {
    int depth;                 /* blocks */
    int hidden;                /* hidden_size */
    int intermediate;          /* intermediate_size */
    int n_heads, head_dim;     /* num_heads; head_dim = hidden / num_heads */
    int out_hidden;            /* out_hidden_size (the text tower's width) */
    int patch, temporal_patch, merge, in_channels;
    int window;                /* window_size in pixels */
    int window_units;          /* window / merge / patch: merge units per window side */
    int n_full;                /* fullatt_block_indexes */
    int full[CQ_QWEN25VL_VISION_MAX_DEPTH];
    float eps;
    double rope_theta;
} cq_qwen25vl_vision_config;

/* Patch row width C*T*P*P. */
static inline int cq_qwen25vl_vision_patch_dim(const cq_qwen25vl_vision_config *c) {
    return c->in_channels * c->temporal_patch * c->patch * c->patch;
}

typedef struct cq_qwen25vl_vision cq_qwen25vl_vision;

/* The config from `<prefix>config_json`'s vision_config (the Qwen2.5-VL
 * config.json the text encoder was converted from). */
cq_status cq_qwen25vl_vision_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen25vl_vision_config *cfg);
/* Load from a CMF file: the tensors are found under <prefix>model.visual.
 * (transformers 5) or <prefix>visual. (older saves); prefix "" for a model
 * .cmf, "te." for the text encoder of an image pack. */
cq_status cq_qwen25vl_vision_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen25vl_vision **out);
void cq_qwen25vl_vision_free(cq_qwen25vl_vision *m);
const cq_qwen25vl_vision_config *cq_qwen25vl_vision_get_config(const cq_qwen25vl_vision *m);

/* A checked call layout: the grids (t, h, w >= 1, h and w multiples of the
 * merge size), the patch rows they imply. */
cq_status cq_qwen25vl_vision_rows(const cq_qwen25vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                  int64_t *n_rows);
/* The window permutation of the merge units (idx[N/4]: position u of the
 * permuted order holds unit idx[u]) and the window boundaries in patch rows
 * (cu[0] = 0, ..., cu[*n_windows] = N; empty windows dropped); cu has room
 * for N/4 + 1 entries, idx for N/4. */
cq_status cq_qwen25vl_vision_window_index(const cq_qwen25vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                          int32_t *idx, int32_t *cu, int *n_windows);

/* What cq_qwen25vl_vision_forward returns (host buffers; NULL = not wanted),
 * rows in the input's order. */
typedef struct cq_qwen25vl_vision_outputs {
    float *out;        /* [N/4, out_hidden] */
    float *pre_merger; /* [N, hidden]: the last block's output */
    float *blocks;     /* [depth, N, hidden]: every block's output */
} cq_qwen25vl_vision_outputs;

/* Run pixels [n_rows, patch_dim] (host f32, finite) of n_images images with
 * the given grids (n_rows must be what they imply). */
cq_status cq_qwen25vl_vision_forward(cq_qwen25vl_vision *m, const float *pixels, int64_t n_rows,
                                     const int32_t (*grid)[3], int n_images, const cq_qwen25vl_vision_outputs *out);

#endif /* CQ_MODELS_QWEN25VL_VISION_H */
