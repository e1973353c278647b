/*
 * ltx2_vae_impl.h — what ltx2_vae_load.c (config, weights) and ltx2_vae.c
 * (the stages, decode and encode) share: the loaded convolutions.
 */
#ifndef CQ_MODELS_LTX2_VAE_IMPL_H
#define CQ_MODELS_LTX2_VAE_IMPL_H

#include "models/kit/tensors.h"
#include "models/ltx2_vae.h"

/* A 3x3x3 convolution: kernel [cout, cin * 27] as stored (f32/f16/bf16), F32 bias [cout]. */
typedef struct lv_conv {
    cq_tensor w, b;
    int cin, cout;
} lv_conv;

typedef struct lv_res {
    lv_conv c1, c2;
} lv_res;

typedef struct lv_block {
    lv_conv rs;  /* the resampler's conv (when the block has one) */
    lv_res *res; /* n_res */
    cq_tensor gidx; /* down blocks: I32 [cout * group], the skip's channel-group mean (identity order) */
} lv_block;

typedef struct lv_coder {
    lv_conv conv_in, conv_out;
    lv_res *mid;
    lv_block blk[CQ_LTX2_VAE_MAX_BLOCKS];
} lv_coder;

struct cq_ltx2_vae {
    cq_backend *be;
    cq_ltx2_vae_config cfg;
    cq_tt_held held;
    lv_coder dec, enc;
    bool has_encoder;
    float *mean, *std; /* host [latent_channels]: latents_mean, latents_std */
    cq_ltx2_vae_tap_fn tap;
    void *tap_user;
};

/* Frame t of the head's output src [H*W, out_channels p^2] (patch grid) un-patchified into frames
 * [out_channels, Fo, Ho, Wo] (ltx2_vae.c; the stream decode's last step). */
void cq_ltx2_vae_unpatchify_frame(const cq_ltx2_vae_config *c, const float *src, int H, int W, int t, float *frames,
                                  int Fo, int Ho, int Wo);

#endif /* CQ_MODELS_LTX2_VAE_IMPL_H */
