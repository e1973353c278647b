/*
 * ltx2_audio_tensors.c — the tensor tables of LTX-2.3 / 2.5's audio VAE and
 * vocoder, in diffusers' names (AutoencoderKLLTX2Audio, LTX2VocoderWithBWE /
 * LTX2Vocoder). Code, not patterns: the widths change from level to level.
 *
 * Audio VAE: the decoder's causal convs ("<name>.conv.weight" [cout, cin, k, k]
 * and bias; PixelNorm has no weights), latents_mean / latents_std
 * [base_channels]; the encoder is a subtree (nobody here reads it).
 * Vocoder: per generator conv_in [hidden, in, 7], upsamplers.i [cin, cin/2, k],
 * resnets.(i * n_res + j) with convs1.d / convs2.d [c, c, k] and acts1.d /
 * acts2.d (act.alpha, act.beta [c]; upsample.filter, downsample.filter, 1-D
 * filters stored [1, 1, k]), act_out, conv_out [out, c, 7] (bias as
 * final_bias); the BWE model adds mel_stft.stft_fn.forward_basis
 * [2 nf, 1, N], the unused inverse_basis (optional) and mel_stft.mel_basis
 * [n_mels, nf] (nf = N / 2 + 1).
 */
#include <stdio.h>
#include <string.h>

#include "models/ltx2_audio_impl.h"
#include "models/tables.h"

/* ---- audio VAE ---- */
static cq_status causal_conv(const cq_tt_sink *t, const char *name, int cin, int cout, int k) {
    char n[192];
    snprintf(n, sizeof n, "%s.conv", name);
    return cq_tt_add_conv(t, n, cin, cout, k);
}

static cq_status res2d(const cq_tt_sink *t, const char *name, int cin, int cout) {
    char n[160];
    snprintf(n, sizeof n, "%s.conv1", name);
    CQ_TRY(causal_conv(t, n, cin, cout, 3));
    snprintf(n, sizeof n, "%s.conv2", name);
    CQ_TRY(causal_conv(t, n, cout, cout, 3));
    if (cin == cout) return CQ_OK;
    snprintf(n, sizeof n, "%s.nin_shortcut", name);
    return causal_conv(t, n, cin, cout, 1);
}

cq_status cq_ltx2_audio_vae_tensors(const cq_ltx2_audio_vae_config *c, const char *prefix, cq_tt_list *out) {
    const int nl = c->n_levels, base = c->base_channels;
    if (nl < 1 || nl > CQ_LTX2_AUDIO_MAX_LEVELS) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2_audio_vae: %d levels", nl);
    if (!prefix) prefix = "";
    const cq_tt_sink t = {out, prefix, true};
    char n[128];
    int ch = base * c->ch_mult[nl - 1];
    CQ_TRY(causal_conv(&t, "decoder.conv_in", c->latent_channels, ch, 3));
    CQ_TRY(res2d(&t, "decoder.mid.block_1", ch, ch));
    CQ_TRY(res2d(&t, "decoder.mid.block_2", ch, ch));
    for (int level = nl - 1; level >= 0; level--) {
        const int co = base * c->ch_mult[level];
        for (int j = 0; j <= c->num_res_blocks; j++) {
            snprintf(n, sizeof n, "decoder.up.%d.block.%d", level, j);
            CQ_TRY(res2d(&t, n, ch, co));
            ch = co;
        }
        if (level == 0) continue;
        snprintf(n, sizeof n, "decoder.up.%d.upsample.conv", level);
        CQ_TRY(causal_conv(&t, n, ch, ch, 3));
    }
    CQ_TRY(causal_conv(&t, "decoder.conv_out", ch, c->output_channels, 3));
    const uint64_t b[1] = {(uint64_t)base};
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_VECTOR, true, 0.0f, 1, b, "latents_mean"));
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_VECTOR, true, 1.0f, 1, b, "latents_std"));
    return cq_tt_add_subtree(out, prefix, "encoder.");
}

/* ---- vocoder ---- */
const char *cq_ltx2_voc_stem(const cq_ltx2_vocoder_config *c, bool bwe) {
    if (!c->bwe) return "";
    return bwe ? "bwe_generator." : "vocoder.";
}

int cq_ltx2_voc_width(const cq_ltx2_voc_gen_config *g, int i) { return g->hidden_channels >> (i + 1); }

/* conv1d `name` [cout, cin, k] and (with bias) [cout] */
static cq_status conv1(const cq_tt_sink *t, const char *name, int cin, int cout, int k, bool bias) {
    const uint64_t w[3] = {(uint64_t)cout, (uint64_t)cin, (uint64_t)k}, b[1] = {(uint64_t)cout};
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_KERNEL, t->required, 0.0f, 3, w, "%s.weight", name));
    return bias ? cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, b, "%s.bias", name) : CQ_OK;
}

static cq_status act(const cq_tt_sink *t, const char *name, int c, int k) {
    const uint64_t vc[1] = {(uint64_t)c}, vk[1] = {(uint64_t)k};
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, vc, "%s.act.alpha", name));
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, vc, "%s.act.beta", name));
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, vk, "%s.upsample.filter", name));
    return cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, vk, "%s.downsample.filter", name);
}

static cq_status generator(const cq_tt_sink *t, const char *stem, const cq_ltx2_voc_gen_config *g) {
    char n[200];
    snprintf(n, sizeof n, "%sconv_in", stem);
    CQ_TRY(conv1(t, n, g->in_channels, g->hidden_channels, 7, true));
    int ch = g->hidden_channels;
    for (int i = 0; i < g->n_ups; i++) {
        const int co = cq_ltx2_voc_width(g, i);
        /* ConvTranspose1d: [cin, cout, k] */
        snprintf(n, sizeof n, "%supsamplers.%d", stem, i);
        CQ_TRY(conv1(t, n, co, ch, g->up_kernel[i], false));
        const uint64_t b[1] = {(uint64_t)co};
        CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, b, "%supsamplers.%d.bias", stem, i));
        ch = co;
        for (int j = 0; j < g->n_res; j++)
            for (int d = 0; d < g->n_dil[j]; d++)
                for (int z = 1; z <= 2; z++) {
                    snprintf(n, sizeof n, "%sresnets.%d.convs%d.%d", stem, i * g->n_res + j, z, d);
                    CQ_TRY(conv1(t, n, ch, ch, g->res_kernel[j], true));
                    snprintf(n, sizeof n, "%sresnets.%d.acts%d.%d", stem, i * g->n_res + j, z, d);
                    CQ_TRY(act(t, n, ch, g->aa_kernel));
                }
    }
    snprintf(n, sizeof n, "%sact_out", stem);
    CQ_TRY(act(t, n, ch, g->aa_kernel));
    snprintf(n, sizeof n, "%sconv_out", stem);
    return conv1(t, n, ch, g->out_channels, 7, g->final_bias);
}

cq_status cq_ltx2_vocoder_tensors(const cq_ltx2_vocoder_config *c, const char *prefix, cq_tt_list *out) {
    if (!prefix) prefix = "";
    const cq_tt_sink t = {out, prefix, true};
    CQ_TRY(generator(&t, cq_ltx2_voc_stem(c, false), &c->gen));
    if (!c->bwe) return CQ_OK;
    CQ_TRY(generator(&t, cq_ltx2_voc_stem(c, true), &c->bwe_gen));
    const int nf = c->filter_length / 2 + 1;
    const uint64_t basis[3] = {(uint64_t)(2 * nf), 1, (uint64_t)c->filter_length};
    const uint64_t mel[2] = {(uint64_t)c->n_mels, (uint64_t)nf};
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_KERNEL, true, 0.0f, 3, basis, "mel_stft.stft_fn.forward_basis"));
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_KERNEL, false, 0.0f, 3, basis, "mel_stft.stft_fn.inverse_basis"));
    return cq_tt_add(out, prefix, CQ_TT_MATRIX, true, 0.0f, 2, mel, "mel_stft.mel_basis");
}
