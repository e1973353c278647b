/*
 * qwen3vl_vision.h — the Qwen3-VL vision tower (transformers'
 * Qwen3VLVisionModel, the `visual` part of Qwen3VLForConditionalGeneration):
 * what turns a condition image of Qwen-Image-2.1 into the embeddings that
 * replace its <|image_pad|> tokens, and the deepstack rows its language model
 * adds to those rows after its first layers. Written once against the op
 * layer.
 *
 * Input: the processor's flattened patches, pixel_values [N, C*T*P*P] (rows
 * per image in the order (t, h/2, w/2, 2, 2), values in (C, T, P, P) order),
 * and each image's grid (t, h, w) in patches; N = sum t*h*w. Outputs rows in
 * the input's order: [N/4, out_hidden] (one row per 2x2 merge unit) from the
 * merger and from each deepstack merger.
 *
 * Semantics (per call, every row in f32):
 *   x = pixel_values · patch_wᵀ + patch_b + pos     (the Conv3d, kernel = stride)
 *       pos: the learned S x S table (S = floor(sqrt(num_position_embeddings)))
 *       resampled bilinearly to each image's h x w grid with aligned corners:
 *       patch (r, c) reads the table at (r (S-1)/(h-1), c (S-1)/(w-1)) (0 when
 *       a side is 1), the four neighbours weighted by the fractions, the same
 *       for every frame
 *   RoPE: each head's first D/2 rotary angles are (r · inv | c · inv),
 *         inv = theta^(-4j/D), applied with rotate_half (models/kit/vision.h)
 *   per block:  x += proj(attn(LN(x; norm1))) qkv and proj with biases,
 *                                               attention within each frame
 *               x += fc2(act(fc1(LN(x; norm2))))  with biases; act is the
 *                                               config's hidden_act
 *                                               (gelu_pytorch_tanh)
 *               after block deepstack_visual_indexes[k]:
 *               deepstack_k = fc2(gelu_erf(fc1(LN4(concat4(x)))))   (the
 *                                               norm over the unit's 4D values)
 *   merger:     y = fc2(gelu_erf(fc1(concat4(LN(x)))))   (the norm per patch)
 * LayerNorm eps is 1e-6 everywhere (the reference fixes it).
 */
#ifndef CQ_MODELS_QWEN3VL_VISION_H
#define CQ_MODELS_QWEN3VL_VISION_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_QWEN3VL_VISION_MAX_DEPTH 256
#define CQ_QWEN3VL_VISION_MAX_DEEPSTACK 16
/* images in one call, and the patch rows of one call */
#define CQ_QWEN3VL_VISION_MAX_IMAGES 64
#define CQ_QWEN3VL_VISION_MAX_ROWS (1 << 22)

/* The MLP's activation (hidden_act). */
typedef enum cq_qwen3vl_vision_act {
    CQ_QWEN3VL_ACT_GELU_TANH = 0, /* gelu_pytorch_tanh (Qwen3-VL's) */
    CQ_QWEN3VL_ACT_GELU_ERF,      /* gelu */
    CQ_QWEN3VL_ACT_SILU,          /* silu */
    CQ_QWEN3VL_ACT_COUNT
} cq_qwen3vl_vision_act;

typedef struct cq_qwen3vl_vision_config {
    int depth;                 /* blocks */
    int hidden;                /* hidden_size */
    int intermediate;          /* intermediate_size */
    int n_heads, head_dim;     /* num_heads; head_dim = hidden / num_heads */
    int out_hidden;            /* out_hidden_size (the text tower's width) */
    int patch, temporal_patch, merge, in_channels;
    int n_pos;                 /* num_position_embeddings: rows of the position table */
    int pos_side;              /* floor(sqrt(n_pos)): the table is pos_side x pos_side */
    int n_deepstack;           /* deepstack_visual_indexes, strictly increasing */
    int deepstack[CQ_QWEN3VL_VISION_MAX_DEEPSTACK];
    cq_qwen3vl_vision_act act;
    float eps;
    double rope_theta;
} cq_qwen3vl_vision_config;

/* Patch row width C*T*P*P. */
static inline int cq_qwen3vl_vision_patch_dim(const cq_qwen3vl_vision_config *c) {
    return c->in_channels * c->temporal_patch * c->patch * c->patch;
}

typedef struct cq_qwen3vl_vision cq_qwen3vl_vision;

/* The config from `<prefix>config_json`'s vision_config (the Qwen3-VL
 * config.json the text encoder was converted from). A vision_config of
 * another family (its model_type says so) is CQ_ERR_UNSUPPORTED. */
cq_status cq_qwen3vl_vision_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen3vl_vision_config *cfg);
/* Load from a CMF file: the tensors are found under <prefix>model.visual.
 * (transformers 5) or <prefix>visual. (older saves); prefix "" for a model
 * .cmf, "te." for the text encoder of an image pack. */
cq_status cq_qwen3vl_vision_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen3vl_vision **out);
void cq_qwen3vl_vision_free(cq_qwen3vl_vision *m);
const cq_qwen3vl_vision_config *cq_qwen3vl_vision_get_config(const cq_qwen3vl_vision *m);

/* A checked call layout: the grids (t, h, w >= 1, h and w multiples of the
 * merge size), the patch rows they imply. */
cq_status cq_qwen3vl_vision_rows(const cq_qwen3vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                 int64_t *n_rows);

/* What cq_qwen3vl_vision_forward returns (host buffers; NULL = not wanted),
 * rows in the input's order. */
typedef struct cq_qwen3vl_vision_outputs {
    float *out;        /* [N/4, out_hidden]: the rows that replace <|image_pad|> */
    float *deepstack;  /* [n_deepstack, N/4, out_hidden]: what the language model adds after its layer k */
    float *embed;      /* [N, hidden]: the patch embedding plus the position embedding (block 0's input) */
    float *blocks;     /* [depth, N, hidden]: every block's output */
} cq_qwen3vl_vision_outputs;

/* Run pixels [n_rows, patch_dim] (host f32, finite) of n_images images with
 * the given grids (n_rows must be what they imply). */
cq_status cq_qwen3vl_vision_forward(cq_qwen3vl_vision *m, const float *pixels, int64_t n_rows,
                                    const int32_t (*grid)[3], int n_images, const cq_qwen3vl_vision_outputs *out);

#endif /* CQ_MODELS_QWEN3VL_VISION_H */
