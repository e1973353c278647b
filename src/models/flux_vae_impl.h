/*
 * flux_vae_impl.h — the Flux VAE's private state shared by its loader
 * (flux_vae_load.c) and its graph builders and drivers (flux_vae.c).
 */
#ifndef CQ_MODELS_FLUX_VAE_IMPL_H
#define CQ_MODELS_FLUX_VAE_IMPL_H

#include "models/flux_vae.h"
#include "models/kit/vae_stream.h"
#include "models/kit/vae_weights.h"

/* ResnetBlock2D: norm1 -> SiLU -> conv1 -> norm2 -> SiLU -> conv2, plus a
 * 1x1 shortcut conv when the width changes. */
typedef struct fv_res {
    vs_gn_w n1, n2;
    vw_conv c1, c2, sc;
    bool has_sc;
} fv_res;

typedef struct fv_level {
    int cin, cout; /* block input / output channels */
    int n_res;
    fv_res *res;
    bool resample; /* upsampler (decoder) / downsampler (encoder) at the end of the block */
    vw_conv rs;    /* its 3x3 conv */
} fv_level;

typedef struct fv_coder {
    vw_conv conv_in, conv_out;
    fv_res mid[2];
    bool attn;
    vs_gn_w attn_gn;
    vs_attn_w attn_w;
    cq_tensor wq, wk, wv, wo;
    vs_gn_w norm_out;
    int n_levels;
    fv_level lv[CQ_FLUX_VAE_MAX_LEVELS];
} fv_coder;

struct cq_flux_vae {
    cq_backend *be;
    cq_flux_vae_config cfg;
    fv_coder enc, dec;
    vw_conv quant, post_quant;
    vw_store st;        /* backend tensors the loader made or bound */
    float **host;       /* host copies of the group norms' weights (owned) */
    int n_host, cap_host;
    size_t budget;
    int band_rows;
    cq_progress_fn progress;
    void *progress_user;
    cq_flux_vae_stats last;
};

#endif /* CQ_MODELS_FLUX_VAE_IMPL_H */
