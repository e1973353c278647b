/*
 * ltx2_audio_impl.h — what ltx2_audio_load.c (configs, weights) and
 * ltx2_audio.c (the forwards) share: the bound decoder and vocoder.
 */
#ifndef CQ_MODELS_LTX2_AUDIO_IMPL_H
#define CQ_MODELS_LTX2_AUDIO_IMPL_H

#include "models/kit/tensors.h"
#include "models/ltx2_audio.h"

/* ---- decoder ---- */
typedef struct la_conv {
    cq_tensor w, b; /* [cout, cin, k, k] in its file codec, F32 bias */
    int cin, cout, k;
} la_conv;

typedef struct la_res {
    la_conv c1, c2, sc; /* sc: the 1x1 nin_shortcut, when cin != cout */
    bool has_sc;
} la_res;

typedef struct la_level {
    int n_res;
    la_res *res;
    bool up;       /* an upsample after the level (every level but 0) */
    la_conv up_conv;
} la_level;

struct cq_ltx2_audio_vae {
    cq_backend *be;
    cq_ltx2_audio_vae_config cfg;
    cq_tt_held held;
    la_conv conv_in, conv_out;
    la_res mid[2];
    la_level lv[CQ_LTX2_AUDIO_MAX_LEVELS];
    bool has_stats;        /* base_channels == latent_channels * latent_mel: the statistics fit the tokens */
    cq_tensor mean, std;   /* F32 [1, base_channels] */
    cq_tensor unpack_idx;  /* I32 [C * Ml]: packed column of channels-last column m * C + c */
    cq_ltx2_audio_tap_fn tap;
    void *tap_user;
};

/* ---- vocoder ---- */
/* An anti-aliased SnakeBeta: its parameters and the depthwise filters ([C, k] views of shared tensors). */
typedef struct lv_act {
    cq_tensor alpha, beta; /* F32 [C], logs */
    cq_tensor up, down;    /* F32 [C, k] views: ratio * the upsample filter, the low-pass filter */
} lv_act;

typedef struct lv_resblock {
    int k, n_dil, dil[CQ_LTX2_VOC_MAX_DIL];
    cq_tensor c1[CQ_LTX2_VOC_MAX_DIL], b1[CQ_LTX2_VOC_MAX_DIL], c2[CQ_LTX2_VOC_MAX_DIL], b2[CQ_LTX2_VOC_MAX_DIL];
    lv_act a1[CQ_LTX2_VOC_MAX_DIL], a2[CQ_LTX2_VOC_MAX_DIL];
} lv_resblock;

typedef struct lv_gen {
    const cq_ltx2_voc_gen_config *cfg;
    cq_tensor conv_in, conv_in_b;
    cq_tensor up[CQ_LTX2_VOC_MAX_UPS], up_b[CQ_LTX2_VOC_MAX_UPS];
    lv_resblock *res; /* [n_ups * n_res] */
    lv_act act_out;
    cq_tensor conv_out, conv_out_b; /* conv_out_b unset without final_bias */
} lv_gen;

/* A depthwise filter shared by every activation whose stored filter has these values (they all do). */
typedef struct lv_filter {
    float v[64];
    int k;
    float scale;
    cq_tensor t; /* F32 [max channels, k] */
} lv_filter;

#define LV_MAX_FILTERS 16

struct cq_ltx2_vocoder {
    cq_backend *be;
    cq_ltx2_vocoder_config cfg;
    cq_tt_held held;
    lv_gen gen, bwe;
    int max_ch;          /* the widest activation: the shared filters' and the pad kernel's rows */
    lv_filter filt[LV_MAX_FILTERS];
    int n_filt;
    cq_tensor ones;      /* F32 [max_ch, 1]: the k = 1 depthwise kernel that pads (replicate or zero) */
    cq_tensor stft_w;    /* F32 [ch * 2 nf, hop * ch * K]: the STFT over blocks of hop samples (BWE) */
    int stft_k, stft_pad;/* K blocks per frame, J leading blocks of zeros */
    cq_tensor mag_idx;   /* I32 [ch * nf * 2]: re^2 + im^2 column pairs */
    cq_tensor mel_basis; /* F32 [n_mels, nf] */
    cq_tensor resamp;    /* F32 [max_ch, k]: rate_ratio * the Hann-windowed sinc (the skip path) */
    int resamp_k, resamp_pad, resamp_crop_l, resamp_crop_r;
    cq_ltx2_audio_tap_fn tap;
    void *tap_user;
};

/* The generator's stem under the vocoder's prefix: "vocoder." / "bwe_generator." in a BWE model, "" alone. */
const char *cq_ltx2_voc_stem(const cq_ltx2_vocoder_config *c, bool bwe);
/* Channels after upsampler i of a generator (hidden / 2^(i+1)). */
int cq_ltx2_voc_width(const cq_ltx2_voc_gen_config *g, int i);

#endif /* CQ_MODELS_LTX2_AUDIO_IMPL_H */
