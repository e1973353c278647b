/*
 * qi21_inputs.h — the `cortiq forward` input contract of the Qwen-Image-2.1
 * denoiser: tensors named like the reference forward's arguments, read from
 * a safetensors file and checked against a model's configuration.
 *
 *   hidden_states          f32 [N_image_tokens, in_channels]   condition images first, target last
 *   encoder_hidden_states  f32 [vlm_len - target_slots, context_in_dim]
 *   timestep               f32 [1] (or a 0-D scalar), in [0, 1]
 *   img_shapes             i32 [k, 3] (frame, height, width; target last); i64 accepted
 *   img_mask               u8 [vlm_len], 1 at image slots (the target's included); bool/i32/i64 accepted
 *
 * Each may carry a leading batch dimension of 1. Errors name the tensor.
 * README.md ("cortiq forward") documents the contract for users.
 */
#ifndef CQ_MODELS_QI21_INPUTS_H
#define CQ_MODELS_QI21_INPUTS_H

#include "format/safetensors.h"
#include "models/qi21.h"

typedef struct cq_qi21_inputs {
    cq_qi21_layout layout;  /* points at img_mask / img_shapes below */
    uint8_t *img_mask;      /* [vlm_len] 0/1 */
    int32_t (*img_shapes)[3];
    int n_ctx, n_cond, n_target;
    float *ctx;             /* [n_ctx, context_in_dim] */
    float *hidden;          /* [n_cond + n_target, in_channels]: cond rows, then the target */
    float *cond, *target;   /* into hidden (cond NULL when n_cond == 0) */
    float t;
} cq_qi21_inputs;

/* Read and validate the inputs of one forward for a model with config `cfg`. */
cq_status cq_qi21_inputs_read(const cq_st *st, const cq_qi21_config *cfg, cq_qi21_inputs *out);
void cq_qi21_inputs_free(cq_qi21_inputs *in);

#endif /* CQ_MODELS_QI21_INPUTS_H */
