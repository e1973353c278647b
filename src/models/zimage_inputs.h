/*
 * zimage_inputs.h — the `cortiq forward` input contract of the Z-Image
 * denoiser: the tensors of one reference forward (ZImageTransformer2DModel's
 * x, t, cap_feats for one image), read from a safetensors file and checked
 * against a model's configuration.
 *
 *   x          f32 [C, 1, H, W] (the reference's one image of one frame) or [C, H, W]; H, W even
 *   cap_feats  f32 [L, cap_feat_dim] (a leading batch of 1 accepted)
 *   t          f32 [1] (or a 0-D scalar) in [0, 1]: the DiT's own timestep, 1 - sigma in the pipeline
 *
 * Errors name the tensor. README.md ("cortiq forward") documents the
 * contract for users; the output `out` has x's shape.
 */
#ifndef CQ_MODELS_ZIMAGE_INPUTS_H
#define CQ_MODELS_ZIMAGE_INPUTS_H

#include "format/safetensors.h"
#include "models/zimage.h"

typedef struct cq_zimage_inputs {
    int lat_h, lat_w, n_cap;
    int x_ndim;              /* 3 or 4, as given: the output takes the same shape */
    uint64_t x_shape[4];
    float *latent;           /* [C][lat_h][lat_w] */
    float *cap;              /* [n_cap][cap_feat_dim] */
    float t;
} cq_zimage_inputs;

/* Read and validate the inputs of one forward for a model with config `cfg`; *out is cleared on failure. */
cq_status cq_zimage_inputs_read(const cq_st *st, const cq_zimage_config *cfg, cq_zimage_inputs *out);
void cq_zimage_inputs_free(cq_zimage_inputs *in);

#endif /* CQ_MODELS_ZIMAGE_INPUTS_H */
