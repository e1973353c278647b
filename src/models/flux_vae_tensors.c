/*
 * flux_vae_tensors.c — the Flux VAE's tensor table (diffusers AutoencoderKL
 * as converted: conv kernels [cout, cin, k, k], the mid-block attention's
 * Linear matrices [C, C], f32 biases and GroupNorm weights [C]). The
 * structure follows the widths flux_vae_load.c describes; the table is
 * code, not patterns, because the widths change from level to level.
 */
#include <stdio.h>

#include "models/tables.h"

/* A GroupNorm's weight (around 1) and bias [C]. */
static cq_status norm(const cq_tt_sink *t, const char *name, int c) {
    uint64_t shape[1] = {(uint64_t)c};
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 1.0f, 1, shape, "%s.weight", name));
    return cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, shape, "%s.bias", name);
}

static cq_status res(const cq_tt_sink *t, const char *name, int cin, int cout) {
    char n[200];
    snprintf(n, sizeof n, "%s.norm1", name);
    CQ_TRY(norm(t, n, cin));
    snprintf(n, sizeof n, "%s.conv1", name);
    CQ_TRY(cq_tt_add_conv(t, n, cin, cout, 3));
    snprintf(n, sizeof n, "%s.norm2", name);
    CQ_TRY(norm(t, n, cout));
    snprintf(n, sizeof n, "%s.conv2", name);
    CQ_TRY(cq_tt_add_conv(t, n, cout, cout, 3));
    snprintf(n, sizeof n, "%s.conv_shortcut", name);
    return cin != cout ? cq_tt_add_conv(t, n, cin, cout, 1) : CQ_OK;
}

static cq_status mid(const cq_tt_sink *t, const char *coder, int c, bool attn) {
    char n[200];
    for (int i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "%s.mid_block.resnets.%d", coder, i);
        CQ_TRY(res(t, n, c, c));
    }
    if (!attn) return CQ_OK;
    snprintf(n, sizeof n, "%s.mid_block.attentions.0.group_norm", coder);
    CQ_TRY(norm(t, n, c));
    static const char *const proj[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    for (int i = 0; i < 4; i++) {
        uint64_t w[2] = {(uint64_t)c, (uint64_t)c}, b[1] = {(uint64_t)c};
        CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_MATRIX, t->required, 0.0f, 2, w, "%s.mid_block.attentions.0.%s.weight",
                         coder, proj[i]));
        CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, b, "%s.mid_block.attentions.0.%s.bias",
                         coder, proj[i]));
    }
    return CQ_OK;
}

cq_status cq_flux_vae_tensors(const cq_flux_vae_config *c, const char *prefix, cq_tt_list *out) {
    const int nl = c->n_levels, *b = c->block_out_channels, Z = c->latent_channels;
    if (nl < 1 || nl > CQ_FLUX_VAE_MAX_LEVELS) return cq_fail(CQ_ERR_INVALID_ARG, "vae: %d levels", nl);
    char n[200];
    cq_tt_sink enc = {out, prefix ? prefix : "", false}, dec = {out, enc.prefix, true};
    /* the encoder: all of it or none (the loader checks which) */
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_in", c->in_channels, b[0], 3));
    for (int i = 0; i < nl; i++) {
        for (int j = 0; j < c->layers_per_block; j++) {
            snprintf(n, sizeof n, "encoder.down_blocks.%d.resnets.%d", i, j);
            CQ_TRY(res(&enc, n, j ? b[i] : b[i ? i - 1 : 0], b[i]));
        }
        if (i == nl - 1) continue;
        snprintf(n, sizeof n, "encoder.down_blocks.%d.downsamplers.0.conv", i);
        CQ_TRY(cq_tt_add_conv(&enc, n, b[i], b[i], 3));
    }
    CQ_TRY(mid(&enc, "encoder", b[nl - 1], c->mid_attention));
    CQ_TRY(norm(&enc, "encoder.conv_norm_out", b[nl - 1]));
    CQ_TRY(cq_tt_add_conv(&enc, "encoder.conv_out", b[nl - 1], 2 * Z, 3));
    if (c->use_quant_conv) CQ_TRY(cq_tt_add_conv(&enc, "quant_conv", 2 * Z, 2 * Z, 1));
    /* the decoder */
    if (c->use_post_quant_conv) CQ_TRY(cq_tt_add_conv(&dec, "post_quant_conv", Z, Z, 1));
    CQ_TRY(cq_tt_add_conv(&dec, "decoder.conv_in", Z, b[nl - 1], 3));
    CQ_TRY(mid(&dec, "decoder", b[nl - 1], c->mid_attention));
    for (int i = 0; i < nl; i++) {
        const int cin = b[nl - 1 - (i ? i - 1 : 0)], cout = b[nl - 1 - i];
        for (int j = 0; j < c->layers_per_block + 1; j++) {
            snprintf(n, sizeof n, "decoder.up_blocks.%d.resnets.%d", i, j);
            CQ_TRY(res(&dec, n, j ? cout : cin, cout));
        }
        if (i == nl - 1) continue;
        snprintf(n, sizeof n, "decoder.up_blocks.%d.upsamplers.0.conv", i);
        CQ_TRY(cq_tt_add_conv(&dec, n, cout, cout, 3));
    }
    CQ_TRY(norm(&dec, "decoder.conv_norm_out", b[0]));
    return cq_tt_add_conv(&dec, "decoder.conv_out", b[0], c->out_channels, 3);
}
