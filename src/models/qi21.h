/*
 * qi21.h — the Qwen-Image-2.1 denoiser (QwenImage21Transformer2DModel): a
 * single-stream DiT over one joint sequence of text rows, condition-image
 * blocks and the target image block, with block-causal attention and a
 * per-prompt prefix K/V cache.
 *
 * Usage: load once per model; prefill once per prompt layout (text rows +
 * condition images) to get a cache; step once per denoising step with the
 * target latents and the timestep. Several caches may live at once (the
 * positive and negative prompts of classifier-free guidance).
 */
#ifndef CQ_MODELS_QI21_H
#define CQ_MODELS_QI21_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

typedef struct cq_qi21_config {
    int in_channels, out_channels;
    int num_layers;
    int n_heads, head_dim, inner; /* inner = n_heads * head_dim */
    int context_in_dim;
    int mlp_hidden;               /* inner * mlp_ratio */
    int axes[3];                  /* RoPE dims of the frame, height, width axes; sum = head_dim */
    float eps;
    bool causal_condition;
} cq_qi21_config;

typedef struct cq_qi21 cq_qi21;
typedef struct cq_qi21_cache cq_qi21_cache;

/* Layout of one prompt, as the reference forward's img_mask / img_shapes:
 * `img_mask[vlm_len]` is 1 at vision-language image slots (each stands for a
 * 2x2 group of latent tokens), the target's slots (the last ones) included;
 * `img_shapes[n_images]` = (frame, height, width) in latent tokens, condition
 * images first, the target last. Each image's slots are consecutive (images
 * may be adjacent), frame is 1, height*width a multiple of 4, sides at most
 * 2048 and RoPE positions below 8192 (the reference's tables). */
typedef struct cq_qi21_layout {
    int vlm_len;
    const uint8_t *img_mask;
    int n_images;
    const int32_t (*img_shapes)[3];
} cq_qi21_layout;

/* Load from a CMF pack: tensors `<prefix><diffusers name>` and the config
 * as the u8 tensor `<prefix>config_json` (prefix "dit." in a pipeline pack). */
cq_status cq_qi21_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qi21 **out);
void cq_qi21_free(cq_qi21 *m);
/* The config alone (no weights), as cq_qi21_load reads it. */
cq_status cq_qi21_parse_config(const cq_cmf *cmf, const char *prefix, cq_qi21_config *c);
/* The reference's tables: an image side of at most cq_qi21_max_side() latent
 * tokens, RoPE frame positions up to cq_qi21_max_position() (text rows take
 * one position each, an image its longer side). */
int cq_qi21_max_side(void);
int cq_qi21_max_position(void);
const cq_qi21_config *cq_qi21_get_config(const cq_qi21 *m);

/* Number of encoder rows (vlm positions before the target's slots), target
 * tokens and condition-image tokens a layout expects; validates the layout. */
cq_status cq_qi21_layout_sizes(const cq_qi21_layout *lay, int *n_ctx, int *n_target, int *n_cond);

/* Prefill: ctx [n_ctx, context_in_dim] (rows at condition-image slots are
 * placeholders and ignored), cond [n_cond, in_channels] (may be NULL when
 * n_cond == 0). Computes the prefix's per-layer post-RoPE keys/values once.
 * Text rows and latents must be finite (CQ_ERR_NUMERIC naming the row). */
cq_status cq_qi21_prefill(cq_qi21 *m, const cq_qi21_layout *lay, const float *ctx, const float *cond,
                          cq_qi21_cache **out);
/* One step: target [n_target, in_channels] at timestep t in [0, 1] ->
 * velocity [n_target, out_channels]. The first step of a cache sizes its
 * buffers; later steps allocate nothing. Arguments are checked every step.
 * A cache belongs to one model; several may live at once (e.g. for CFG).
 * A model, its backend and its caches are used by one thread at a time. */
cq_status cq_qi21_step(cq_qi21 *m, cq_qi21_cache *c, const float *target, float t, float *velocity);
void cq_qi21_cache_free(cq_qi21_cache *c);

/* The whole joint sequence at once (no cache), for checking the cached path. */
cq_status cq_qi21_forward_full(cq_qi21 *m, const cq_qi21_layout *lay, const float *ctx, const float *cond,
                               const float *target, float t, float *velocity);

/* The model as a denoiser (component.h): prepare is the prefill of a
 * text-to-image layout (the rows, then the target's slots), step is
 * cq_qi21_step. m must outlive the copies. */
cq_denoiser cq_qi21_denoiser(cq_qi21 *m);

#endif /* CQ_MODELS_QI21_H */
