/*
 * qimage_inputs.h — the `cortiq forward` input contract of the Qwen-Image
 * (v1) denoiser: tensors named like the arguments of
 * QwenImageTransformer2DModel.forward for one batch row, read from a
 * safetensors file and checked against a model's configuration.
 *
 *   hidden_states               f32 [N, in_channels]   packed tokens: the target's, then each condition image's
 *   encoder_hidden_states       f32 [L, joint_attention_dim]
 *   encoder_hidden_states_mask  optional [L]: nonzero at valid rows (f32, u8, bool, i32, i64)
 *   timestep                    f32 [1] (or a 0-D scalar): sigma in [0, 1]
 *   img_shapes                  i32 [k, 3] (frame, height, width) in patch tokens, the target first; i64 accepted
 *
 * Each may carry a leading batch dimension of 1. Errors name the tensor;
 * finiteness of the rows is the model's check. The output `out` is
 * [N, out_dim].
 */
#ifndef CQ_MODELS_QIMAGE_INPUTS_H
#define CQ_MODELS_QIMAGE_INPUTS_H

#include "format/safetensors.h"
#include "models/qimage.h"

typedef struct cq_qimage_inputs {
    cq_qimage_layout layout; /* points at shapes / mask below */
    int32_t shapes[CQ_QIMAGE_MAX_IMAGES][3];
    uint8_t *mask;           /* [L] or NULL */
    int n_img;
    float *img;              /* [n_img, in_channels] */
    float *txt;              /* [L, joint_dim] */
    float t;
} cq_qimage_inputs;

/* Read and validate the inputs of one forward for a model with config `cfg`; *out is cleared on failure. */
cq_status cq_qimage_inputs_read(const cq_st *st, const cq_qimage_config *cfg, cq_qimage_inputs *out);
void cq_qimage_inputs_free(cq_qimage_inputs *in);

#endif /* CQ_MODELS_QIMAGE_INPUTS_H */
