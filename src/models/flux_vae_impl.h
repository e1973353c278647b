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

/* The checkpoints of a level that streams: none (it runs whole), one at its
 * entry (the narrowest map before it: its passes recompute the whole level),
 * or one at its entry and one after each resnet (its passes recompute at
 * most one resnet; two of its maps are held at a time). */
enum fv_hold { FV_WHOLE = 0, FV_COARSE, FV_FINE };

typedef struct fv_plan {
    int n;                                /* levels */
    int64_t H[CQ_FLUX_VAE_MAX_LEVELS], W[CQ_FLUX_VAE_MAX_LEVELS], C[CQ_FLUX_VAE_MAX_LEVELS]; /* maps, widest */
    int64_t band[CQ_FLUX_VAE_MAX_LEVELS]; /* rows per band at that resolution (>= H: whole) */
    int hold[CQ_FLUX_VAE_MAX_LEVELS];     /* a streaming level's checkpoints (fv_hold) */
} fv_plan;

/* The last plan of one direction (decode, encode) and what it was made for. */
typedef struct fv_plan_memo {
    bool valid;
    int H0, W0;
    size_t budget;
    fv_plan plan;
} fv_plan_memo;

struct cq_flux_vae {
    cq_backend *be;
    cq_flux_vae_config cfg;
    fv_coder enc, dec;
    vw_conv quant, post_quant;
    vw_store st;        /* backend tensors the loader made or bound, host copies of the group norms' weights */
    size_t budget;
    int band_rows;
    cq_progress_fn progress;
    void *progress_user;
    cq_flux_vae_stats last;
    fv_plan_memo memo[2]; /* [decode] */
};

#endif /* CQ_MODELS_FLUX_VAE_IMPL_H */
