/*
 * qi21_vae_impl.h — the VAE's private state shared by its loader
 * (qi21_vae_load.c) and its graph builders/drivers (qi21_vae.c).
 */
#ifndef CQ_MODELS_QI21_VAE_IMPL_H
#define CQ_MODELS_QI21_VAE_IMPL_H

#include "models/qi21_vae.h"
#include "models/kit/vae_stream.h"
#include "models/kit/vae_weights.h"

#define QI21_VAE_MAX_LEVELS 8

typedef vw_conv qv_conv;

/* ResidualBlock: norm1 -> SiLU -> conv1 -> norm2 -> SiLU -> conv2, plus a
 * 1x1 shortcut conv when the width changes. */
typedef struct qv_res {
    cq_tensor *g1, *g2; /* F32 gammas */
    qv_conv c1, c2, sc;
    bool has_sc;
} qv_res;

typedef struct qv_level {
    int cin, cout;     /* block input / output channels */
    int n_res;
    qv_res *res;
    bool resample;     /* up/down sampling at the end of the block */
    qv_conv rs;        /* its 3x3 conv (Qwen-Image's decoder: to cout / 2 channels) */
    int ft, fs;        /* the shortcut's temporal/spatial factors */
    bool shortcut;     /* 2.1: AvgDown (encoder) / DupUp (decoder, but the last level) shortcut present */
} qv_level;

typedef struct qv_coder {
    qv_conv conv_in, conv_out;
    qv_res mid[2];
    vs_attn_w attn;
    qv_conv attn_proj;
    cq_tensor *norm_out;
    int n_levels;
    qv_level lv[QI21_VAE_MAX_LEVELS];
} qv_coder;

struct cq_qi21_vae {
    cq_backend *be;
    cq_qi21_vae_config cfg;
    int in_channels, out_channels; /* the config's (after patch folding) */
    float *mean, *std;
    float *std_inv;                /* Qwen-Image: 1 / std in f32, the divisor its pipeline denormalises with */
    qv_coder enc, dec;
    qv_conv quant, post_quant;
    vw_store st;                   /* what the loader made or bound (kernels inside the structs above) */
    int band_rows;
    cq_progress_fn progress;
    void *progress_user;
    size_t peak;
};

#endif /* CQ_MODELS_QI21_VAE_IMPL_H */
