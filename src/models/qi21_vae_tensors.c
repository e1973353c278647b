/*
 * qi21_vae_tensors.c — the tensor table of the Qwen-Image VAEs as converted
 * (conv kernels [cout, cin, k, k], Qwen-Image's causal 3-D kernels cut to
 * their last temporal tap by `cortiq convert`; f32 biases and RMS-norm
 * gammas [C, 1, 1(, 1)]), their level widths and their block names.
 * Qwen-Image-2.1 (AutoencoderKLQwenImage21) nests an encoder level's blocks
 * (down_blocks.<level>.resnets.<j>, .downsampler) and names the decoder's
 * resampler upsampler; Qwen-Image (AutoencoderKLQwenImage) lists the
 * encoder's residual blocks and resamplers in one sequence (down_blocks.<k>)
 * and keeps the decoder's in a list (upsamplers.0). The structure follows
 * the geometry as qi21_vae_load.c describes it; the table is code, not
 * patterns, because the widths change from level to level.
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

void cq_qi21_vae_get_widths(const cq_qi21_vae_geometry *g, cq_qi21_vae_widths *w) {
    const int nl = g->n_mult;
    const bool halve = g->kind == CQ_QI21_VAE_QIMAGE;
    w->enc[0] = g->base_dim;
    w->dec_mid = g->decoder_base_dim * g->mult[nl - 1];
    for (int i = 0; i < nl; i++) {
        w->enc[i + 1] = g->base_dim * g->mult[i];
        w->dec_out[i] = g->decoder_base_dim * g->mult[nl - 1 - i];
        w->up_out[i] = halve ? w->dec_out[i] / 2 : w->dec_out[i];
        w->dec_in[i] = i ? w->up_out[i - 1] : w->dec_mid;
    }
}

cq_status cq_qi21_vae_block_name(const cq_qi21_vae_geometry *g, bool encoder, int level, int j, char *dst, size_t len) {
    int k;
    if (!encoder && j >= 0)
        k = snprintf(dst, len, "decoder.up_blocks.%d.resnets.%d", level, j);
    else if (!encoder)
        k = snprintf(dst, len, "decoder.up_blocks.%d.%s", level,
                     g->kind == CQ_QI21_VAE_QIMAGE ? "upsamplers.0" : "upsampler");
    else if (g->kind == CQ_QI21_VAE_QIMAGE) /* one sequence: each level's blocks, then its resampler */
        k = snprintf(dst, len, "encoder.down_blocks.%d", level * (g->num_res_blocks + 1) + (j >= 0 ? j : g->num_res_blocks));
    else if (j >= 0)
        k = snprintf(dst, len, "encoder.down_blocks.%d.resnets.%d", level, j);
    else
        k = snprintf(dst, len, "encoder.down_blocks.%d.downsampler", level);
    if (k < 0 || (size_t)k >= len) return cq_fail(CQ_ERR_INVALID_ARG, "vae: block name longer than %zu bytes", len - 1);
    return CQ_OK;
}

cq_status cq_qi21_vae_tensors(const cq_qi21_vae_geometry *g, const char *prefix, cq_tt_list *out) {
    const int nl = g->n_mult;
    if (nl < 1 || nl > CQ_QI21_VAE_MAX_LEVELS) return cq_fail(CQ_ERR_INVALID_ARG, "vae: %d levels", nl);
    cq_qi21_vae_widths wd;
    cq_qi21_vae_get_widths(g, &wd);
    const int *de = wd.enc;
    char n[200], b[160];
    cq_tt_sink enc = {out, prefix ? prefix : "", false}, dec = {out, enc.prefix, true}, opt = {out, enc.prefix, false};
    /* the encoder: all of it or none (the loader checks which) */
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_in", g->in_channels, de[0], 3));
    for (int i = 0; i < nl; i++) {
        for (int j = 0; j < g->num_res_blocks; j++) {
            CQ_TRY(cq_qi21_vae_block_name(g, true, i, j, n, sizeof n));
            CQ_TRY(res(&enc, n, j ? de[i + 1] : de[i], de[i + 1]));
        }
        if (i == nl - 1) continue;
        CQ_TRY(cq_qi21_vae_block_name(g, true, i, -1, b, sizeof b));
        snprintf(n, sizeof n, "%s.resample.1", b);
        CQ_TRY(cq_tt_add_conv(&enc, n, de[i + 1], de[i + 1], 3));
        snprintf(n, sizeof n, "%s.time_conv", b);
        if (g->tdown[i]) CQ_TRY(cq_tt_add_conv(&opt, n, de[i + 1], de[i + 1], 1));
    }
    CQ_TRY(mid(&enc, "encoder", de[nl]));
    CQ_TRY(gamma(&enc, "encoder.norm_out.gamma", de[nl], 4));
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_out", de[nl], 2 * g->z_dim, 3));
    CQ_TRY(cq_tt_add_conv(&enc, "quant_conv", 2 * g->z_dim, 2 * g->z_dim, 1));
    /* the decoder */
    CQ_TRY(cq_tt_add_conv(&dec, "post_quant_conv", g->z_dim, g->z_dim, 1));
    CQ_TRY(cq_tt_add_conv(&dec, "decoder.conv_in", g->z_dim, wd.dec_mid, 3));
    CQ_TRY(mid(&dec, "decoder", wd.dec_mid));
    for (int i = 0; i < nl; i++) {
        const int co = wd.dec_out[i];
        for (int j = 0; j < g->num_res_blocks + 1; j++) {
            CQ_TRY(cq_qi21_vae_block_name(g, false, i, j, n, sizeof n));
            CQ_TRY(res(&dec, n, j ? co : wd.dec_in[i], co));
        }
        if (i == nl - 1) continue;
        CQ_TRY(cq_qi21_vae_block_name(g, false, i, -1, b, sizeof b));
        snprintf(n, sizeof n, "%s.resample.1", b);
        CQ_TRY(cq_tt_add_conv(&dec, n, co, wd.up_out[i], 3));
        snprintf(n, sizeof n, "%s.time_conv", b);
        if (g->tdown[nl - 2 - i]) CQ_TRY(cq_tt_add_conv(&opt, n, co, 2 * co, 1));
    }
    CQ_TRY(gamma(&dec, "decoder.norm_out.gamma", wd.dec_out[nl - 1], 4));
    return cq_tt_add_conv(&dec, "decoder.conv_out", wd.dec_out[nl - 1], g->out_channels, 3);
}
