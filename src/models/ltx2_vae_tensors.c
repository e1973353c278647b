/*
 * ltx2_vae_tensors.c — the tensor table of LTX-2.x's conv video VAE
 * (diffusers' AutoencoderKLLTX2Video names): every convolution is a
 * LTX2VideoCausalConv3d holding an nn.Conv3d (`<name>.conv.weight`
 * [cout, cin, 3, 3, 3], listed as [cout, cin, 27]: the first dimension and
 * the element count are checked, every dimension where a pack stores that
 * rank; `.conv.bias` [cout]); the PixelNorms have no weights; the latent
 * statistics latents_mean / latents_std [C] are buffers of the state dict.
 * The encoder is optional (text to video never encodes), all or nothing (the
 * loader checks). The structure follows the widths ltx2_vae_load.c derives;
 * the table is code, not patterns, because the widths change per block.
 */
#include <stdio.h>

#include "models/ltx2_vae_impl.h"
#include "models/tables.h"

static cq_status conv(const cq_tt_sink *t, const char *name, int cin, int cout) {
    const uint64_t w[3] = {(uint64_t)cout, (uint64_t)cin, 27}, b[1] = {(uint64_t)cout};
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_KERNEL, t->required, 0.0f, 3, w, "%s.conv.weight", name));
    return cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, b, "%s.conv.bias", name);
}

static cq_status resnets(const cq_tt_sink *t, const char *stem, int n, int width) {
    char nm[200];
    for (int j = 0; j < n; j++)
        for (int k = 1; k <= 2; k++) {
            snprintf(nm, sizeof nm, "%s.resnets.%d.conv%d", stem, j, k);
            CQ_TRY(conv(t, nm, width, width));
        }
    return CQ_OK;
}

cq_status cq_ltx2_vae_tensors(const cq_ltx2_vae_config *c, const char *prefix, cq_tt_list *out) {
    const cq_tt_sink dec = {out, prefix ? prefix : "", true}, enc = {out, dec.prefix, false};
    const uint64_t lc[1] = {(uint64_t)c->latent_channels};
    char nm[200];
    CQ_TRY(cq_tt_add(out, dec.prefix, CQ_TT_VECTOR, true, 0.0f, 1, lc, "latents_mean"));
    CQ_TRY(cq_tt_add(out, dec.prefix, CQ_TT_VECTOR, true, 1.0f, 1, lc, "latents_std"));
    /* the decoder */
    CQ_TRY(conv(&dec, "decoder.conv_in", c->latent_channels, c->dec_width));
    CQ_TRY(resnets(&dec, "decoder.mid_block", c->dec_mid_layers, c->dec_width));
    for (int i = 0; i < c->n_up; i++) {
        const cq_ltx2_vae_block *b = &c->up[i];
        if (b->resample) {
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            CQ_TRY(conv(&dec, nm, b->cin, b->conv_out));
        }
        snprintf(nm, sizeof nm, "decoder.up_blocks.%d", i);
        CQ_TRY(resnets(&dec, nm, b->n_res, b->width));
    }
    CQ_TRY(conv(&dec, "decoder.conv_out", c->dec_out_width, c->out_channels * c->patch * c->patch));
    /* the encoder */
    CQ_TRY(conv(&enc, "encoder.conv_in", c->in_channels * c->patch * c->patch, c->latent_channels));
    for (int i = 0; i < c->n_down; i++) {
        const cq_ltx2_vae_block *b = &c->down[i];
        snprintf(nm, sizeof nm, "encoder.down_blocks.%d", i);
        CQ_TRY(resnets(&enc, nm, b->n_res, b->width));
        if (b->resample) {
            snprintf(nm, sizeof nm, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            CQ_TRY(conv(&enc, nm, b->cin, b->conv_out));
        }
    }
    CQ_TRY(resnets(&enc, "encoder.mid_block", c->enc_mid_layers, c->enc_width));
    return conv(&enc, "encoder.conv_out", c->enc_width, c->latent_channels + 1);
}
