/*
 * qi21_vae_tensors.c — the Qwen-Image-2.1 VAE's tensor table
 * (AutoencoderKLQwenImage21 as converted: conv kernels [cout, cin, k, k],
 * f32 biases and RMS-norm gammas [C, 1, 1(, 1)]). The structure follows the
 * geometry as qi21_vae_load.c describes it; the table is code, not patterns,
 * because the widths change from level to level.
 */
#include <stdio.h>

#include "models/tables.h"

/* An RMS-norm gamma [C, 1, 1(, 1)]. */
static cq_status gamma(const cq_tt_sink *t, const char *name, int c, int ndim) {
    uint64_t shape[4] = {(uint64_t)c, 1, 1, 1};
    return cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 1.0f, ndim, shape, "%s", name);
}

static cq_status res(const cq_tt_sink *t, const char *name, int cin, int cout) {
    char n[200];
    snprintf(n, sizeof n, "%s.norm1.gamma", name);
    CQ_TRY(gamma(t, n, cin, 4));
    snprintf(n, sizeof n, "%s.conv1", name);
    CQ_TRY(cq_tt_add_conv(t, n, cin, cout, 3));
    snprintf(n, sizeof n, "%s.norm2.gamma", name);
    CQ_TRY(gamma(t, n, cout, 4));
    snprintf(n, sizeof n, "%s.conv2", name);
    CQ_TRY(cq_tt_add_conv(t, n, cout, cout, 3));
    snprintf(n, sizeof n, "%s.conv_shortcut", name);
    return cin != cout ? cq_tt_add_conv(t, n, cin, cout, 1) : CQ_OK;
}

static cq_status mid(const cq_tt_sink *t, const char *coder, int c) {
    char n[200];
    for (int i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "%s.mid_block.resnets.%d", coder, i);
        CQ_TRY(res(t, n, c, c));
    }
    snprintf(n, sizeof n, "%s.mid_block.attentions.0.norm.gamma", coder);
    CQ_TRY(gamma(t, n, c, 3));
    snprintf(n, sizeof n, "%s.mid_block.attentions.0.to_qkv", coder);
    CQ_TRY(cq_tt_add_conv(t, n, c, 3 * c, 1));
    snprintf(n, sizeof n, "%s.mid_block.attentions.0.proj", coder);
    return cq_tt_add_conv(t, n, c, c, 1);
}

cq_status cq_qi21_vae_tensors(const cq_qi21_vae_geometry *g, const char *prefix, cq_tt_list *out) {
    const int nl = g->n_mult;
    if (nl < 1 || nl > CQ_QI21_VAE_MAX_LEVELS) return cq_fail(CQ_ERR_INVALID_ARG, "vae: %d levels", nl);
    int de[CQ_QI21_VAE_MAX_LEVELS + 1], dd[CQ_QI21_VAE_MAX_LEVELS + 1];
    de[0] = g->base_dim;
    dd[0] = g->decoder_base_dim * g->mult[nl - 1];
    for (int i = 0; i < nl; i++) {
        de[i + 1] = g->base_dim * g->mult[i];
        dd[i + 1] = g->decoder_base_dim * g->mult[nl - 1 - i];
    }
    char n[200];
    cq_tt_sink enc = {out, prefix ? prefix : "", false}, dec = {out, enc.prefix, true}, opt = {out, enc.prefix, false};
    /* the encoder: all of it or none (the loader checks which) */
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_in", g->in_channels, de[0], 3));
    for (int i = 0; i < nl; i++) {
        for (int j = 0; j < g->num_res_blocks; j++) {
            snprintf(n, sizeof n, "encoder.down_blocks.%d.resnets.%d", i, j);
            CQ_TRY(res(&enc, n, j ? de[i + 1] : de[i], de[i + 1]));
        }
        if (i == nl - 1) continue;
        snprintf(n, sizeof n, "encoder.down_blocks.%d.downsampler.resample.1", i);
        CQ_TRY(cq_tt_add_conv(&enc, n, de[i + 1], de[i + 1], 3));
        snprintf(n, sizeof n, "encoder.down_blocks.%d.downsampler.time_conv", i);
        if (g->tdown[i]) CQ_TRY(cq_tt_add_conv(&opt, n, de[i + 1], de[i + 1], 1));
    }
    CQ_TRY(mid(&enc, "encoder", de[nl]));
    CQ_TRY(gamma(&enc, "encoder.norm_out.gamma", de[nl], 4));
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_out", de[nl], 2 * g->z_dim, 3));
    CQ_TRY(cq_tt_add_conv(&enc, "quant_conv", 2 * g->z_dim, 2 * g->z_dim, 1));
    /* the decoder */
    CQ_TRY(cq_tt_add_conv(&dec, "post_quant_conv", g->z_dim, g->z_dim, 1));
    CQ_TRY(cq_tt_add_conv(&dec, "decoder.conv_in", g->z_dim, dd[0], 3));
    CQ_TRY(mid(&dec, "decoder", dd[0]));
    for (int i = 0; i < nl; i++) {
        for (int j = 0; j < g->num_res_blocks + 1; j++) {
            snprintf(n, sizeof n, "decoder.up_blocks.%d.resnets.%d", i, j);
            CQ_TRY(res(&dec, n, j ? dd[i + 1] : dd[i], dd[i + 1]));
        }
        if (i == nl - 1) continue;
        snprintf(n, sizeof n, "decoder.up_blocks.%d.upsampler.resample.1", i);
        CQ_TRY(cq_tt_add_conv(&dec, n, dd[i + 1], dd[i + 1], 3));
        snprintf(n, sizeof n, "decoder.up_blocks.%d.upsampler.time_conv", i);
        if (g->tdown[nl - 2 - i]) CQ_TRY(cq_tt_add_conv(&opt, n, dd[i + 1], 2 * dd[i + 1], 1));
    }
    CQ_TRY(gamma(&dec, "decoder.norm_out.gamma", dd[nl], 4));
    return cq_tt_add_conv(&dec, "decoder.conv_out", dd[nl], g->out_channels, 3);
}
