/*
 * ltx2_vae_load.c — LTX-2.x's conv video VAE (ltx2_vae.h): the config, the
 * block widths derived from it as diffusers' AutoencoderKLLTX2Video derives
 * them, and the weights bound through the tensor table
 * (ltx2_vae_tensors.c). Kernels stay in their file codec, biases become
 * F32 tensors, the latent statistics host arrays.
 *
 * Decoder widths (LTX2VideoDecoder3d): with the decoder lists reversed
 * (but upsample_type), w = block_out_channels[0] is conv_in's output and the
 * mid block's width; up block i takes w, has width out = boc[i] / f[i] (f
 * the upsample factor), an upsampler conv w -> out * st^3 (its input is
 * out * f, which must be w) and then its ResBlocks; a block whose input
 * width differs from out needs the reference's conv_in ResBlock (refused).
 * Encoder widths (LTX2VideoEncoder3d): conv_in -> latent_channels; down
 * block i takes w and has ResBlocks at w, then a downsampler conv
 * w -> boc[i] / st^3 followed by space-to-depth to boc[i], the skip the mean
 * of groups of w st^3 / boc[i] channels; the mid block at the last width.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/ltx2_vae_impl.h"
#include "models/tables.h"

#define WHO "ltx2_vae"
#define MAXB CQ_LTX2_VAE_MAX_BLOCKS

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
/* A bool for every entry, or an array of exactly n bools; absent: all `def`. */
static cq_status bools(const cq_cfg *g, const char *key, int n, bool def, bool *out) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it || cJSON_IsBool(it)) {
        for (int i = 0; i < n; i++) out[i] = it ? cJSON_IsTrue(it) : def;
        return CQ_OK;
    }
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != n)
        return cq_fail(CQ_ERR_PARSE, WHO ": config %s must be a bool or a list of %d bools", key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *b = cJSON_GetArrayItem(it, i);
        if (!cJSON_IsBool(b)) return cq_fail(CQ_ERR_PARSE, WHO ": config %s[%d] is not a bool", key, i);
        out[i] = cJSON_IsTrue(b);
    }
    return CQ_OK;
}

/* An array of exactly n strings (pointers into the JSON); absent: n copies of `def` (NULL: required). */
static cq_status strings(const cq_cfg *g, const char *key, int n, const char *def, const char **out) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it) {
        if (!def) return cq_fail(CQ_ERR_PARSE, WHO ": config %s is required", key);
        for (int i = 0; i < n; i++) out[i] = def;
        return CQ_OK;
    }
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != n)
        return cq_fail(CQ_ERR_PARSE, WHO ": config %s must list %d strings", key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(it, i);
        if (!cJSON_IsString(s)) return cq_fail(CQ_ERR_PARSE, WHO ": config %s[%d] is not a string", key, i);
        out[i] = s->valuestring;
    }
    return CQ_OK;
}

/* An integer list: exactly n entries when n > 0 (else 1..MAXB+1), defaults `def` of n_def entries when absent. */
static cq_status int_list(const cq_cfg *g, const char *key, int n, int lo, int hi, const int *def, int n_def,
                          int *out, int *got) {
    int k = 0;
    CQ_TRY(cq_cfg_ints(g, key, 1, MAXB + 1, lo, hi, out, &k));
    if (k == 0) {
        memcpy(out, def, (size_t)n_def * sizeof(int));
        k = n_def;
    }
    if (n > 0 && k != n) return cq_fail(CQ_ERR_PARSE, WHO ": config %s lists %d entries, expected %d", key, k, n);
    *got = k;
    return CQ_OK;
}

static cq_status padding_mode(const cq_cfg *g, const char *key, const char *def) {
    const cJSON *it = cq_cfg_get(g, key);
    const char *m = def;
    if (it) {
        if (!cJSON_IsString(it)) return cq_fail(CQ_ERR_PARSE, WHO ": config %s must be a string", key);
        m = it->valuestring;
    }
    if (strcmp(m, "zeros") != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %s is \"%s\"%s; only \"zeros\" (LTX-2.3 / 2.5) is supported",
                       key, m, it ? "" : " (the class default)");
    return CQ_OK;
}

static cq_status stride_of(const char *key, int i, const char *type, int st[3]) {
    if (strcmp(type, "spatial") == 0) st[0] = 1, st[1] = 2, st[2] = 2;
    else if (strcmp(type, "temporal") == 0) st[0] = 2, st[1] = 1, st[2] = 1;
    else if (strcmp(type, "spatiotemporal") == 0) st[0] = 2, st[1] = 2, st[2] = 2;
    else if (strcmp(type, "conv") == 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %s[%d] is \"conv\" (a strided conv); only the space-to-depth "
                       "types \"spatial\", \"temporal\" and \"spatiotemporal\" are supported", key, i);
    else return cq_fail(CQ_ERR_PARSE, WHO ": config %s[%d] is \"%s\", not a known type", key, i, type);
    return CQ_OK;
}

static cq_status parse_decoder(const cq_cfg *g, cq_ltx2_vae_config *c) {
    int boc[MAXB + 1], lpb[MAXB + 1], uf[MAXB + 1], n_up, nl, nf;
    bool sts[MAXB], inj[MAXB + 1], resid[MAXB];
    const char *ut[MAXB];
    static const int d_boc[] = {256, 512, 1024}, d_lpb[] = {5, 5, 5, 5}, d_uf[] = {2, 2, 2};
    CQ_TRY(int_list(g, "decoder_block_out_channels", 0, 1, 65536, d_boc, 3, boc, &n_up));
    if (n_up > MAXB) return cq_fail(CQ_ERR_PARSE, WHO ": config decoder_block_out_channels lists more than %d", MAXB);
    CQ_TRY(int_list(g, "decoder_layers_per_block", n_up + 1, 0, 64, d_lpb, 4, lpb, &nl));
    CQ_TRY(int_list(g, "upsample_factor", n_up, 1, 64, d_uf, 3, uf, &nf));
    CQ_TRY(bools(g, "decoder_spatio_temporal_scaling", n_up, true, sts));
    CQ_TRY(bools(g, "decoder_inject_noise", n_up + 1, false, inj));
    CQ_TRY(bools(g, "upsample_residual", n_up, true, resid));
    CQ_TRY(strings(g, "upsample_type", n_up, "spatiotemporal", ut));
    for (int i = 0; i <= n_up; i++)
        if (inj[i])
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config decoder_inject_noise[%d] is true: noise injection is not "
                           "supported (LTX-2.3 / 2.5 have none)", i);
    for (int i = 0; i < n_up; i++)
        if (resid[i])
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config upsample_residual[%d] is true%s: the residual upsampler "
                           "(LTX-2.0) is not supported", i, cq_cfg_get(g, "upsample_residual") ? "" : " (the default)");
    bool tc;
    CQ_TRY(cq_cfg_bool(g, "timestep_conditioning", false, &tc));
    if (tc)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config timestep_conditioning is true: the timestep-conditioned "
                       "decoder is not supported (the LTX-2.5 conv decoder has none)");
    CQ_TRY(padding_mode(g, "decoder_spatial_padding_mode", "reflect"));
    CQ_TRY(cq_cfg_bool(g, "decoder_causal", true, &c->dec_causal));
    /* the reference's order: every list but upsample_type reversed */
    c->n_up = n_up;
    c->dec_width = boc[n_up - 1];
    c->dec_mid_layers = lpb[n_up];
    int w = c->dec_width;
    c->t_up = 1;
    c->s_up = c->patch;
    for (int i = 0; i < n_up; i++) {
        const int r = n_up - 1 - i, f = uf[r], b = boc[r];
        cq_ltx2_vae_block *B = &c->up[i];
        B->cin = w;
        B->n_res = lpb[n_up - 1 - i];
        B->resample = sts[r];
        if (b % f || w % f || w / f != b / f)
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config decoder up block %d (decoder_block_out_channels[%d] = %d, "
                           "upsample_factor[%d] = %d) takes %d channels and has width %d / %d: an up block that "
                           "changes width (the reference's conv_in ResBlock) is not supported", i, r, b, r, f, w, b, f);
        const int out = b / f;
        if (B->resample) {
            CQ_TRY(stride_of("upsample_type", i, ut[i], B->st));
            const int prod = B->st[0] * B->st[1] * B->st[2];
            if (out * f != w)
                return cq_fail(CQ_ERR_PARSE, WHO ": config up block %d: its upsampler takes %d x %d channels, the "
                               "block gets %d", i, out, f, w);
            B->conv_out = out * prod;
            c->t_up *= B->st[0];
            c->s_up *= B->st[1];
            if (B->st[1] != B->st[2])
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config up block %d scales rows and columns differently", i);
        } else {
            if (f != 1 || out != w)
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config up block %d has no upsampler "
                               "(decoder_spatio_temporal_scaling[%d] false) but changes width %d -> %d "
                               "(upsample_factor[%d] = %d)", i, r, w, out, r, f);
            B->st[0] = B->st[1] = B->st[2] = 1;
        }
        B->cout = B->width = out;
        w = out;
    }
    c->dec_out_width = w;
    return CQ_OK;
}

static cq_status parse_encoder(const cq_cfg *g, cq_ltx2_vae_config *c) {
    int boc[MAXB + 1], lpb[MAXB + 1], n, nl;
    bool sts[MAXB];
    const char *dt[MAXB], *bt[MAXB];
    static const int d_boc[] = {256, 512, 1024, 2048}, d_lpb[] = {4, 6, 6, 2, 2};
    CQ_TRY(int_list(g, "block_out_channels", 0, 1, 65536, d_boc, 4, boc, &n));
    if (n > MAXB) return cq_fail(CQ_ERR_PARSE, WHO ": config block_out_channels lists more than %d", MAXB);
    CQ_TRY(int_list(g, "layers_per_block", n + 1, 0, 64, d_lpb, 5, lpb, &nl));
    CQ_TRY(bools(g, "spatio_temporal_scaling", n, true, sts));
    static const char *const d_dt[] = {"spatial", "temporal", "spatiotemporal", "spatiotemporal"};
    if (cq_cfg_get(g, "downsample_type")) CQ_TRY(strings(g, "downsample_type", n, NULL, dt));
    else if (n == 4) memcpy(dt, d_dt, sizeof d_dt);
    else return cq_fail(CQ_ERR_PARSE, WHO ": config downsample_type is required with %d encoder blocks", n);
    CQ_TRY(strings(g, "down_block_types", n, "LTX2VideoDownBlock3D", bt));
    for (int i = 0; i < n; i++)
        if (strcmp(bt[i], "LTX2VideoDownBlock3D") != 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config down_block_types[%d] is \"%s\"; only "
                           "LTX2VideoDownBlock3D is supported", i, bt[i]);
    CQ_TRY(padding_mode(g, "encoder_spatial_padding_mode", "zeros"));
    CQ_TRY(cq_cfg_bool(g, "encoder_causal", true, &c->enc_causal));
    c->n_down = n;
    c->t_down = 1;
    c->s_down = c->patch;
    int w = c->latent_channels;
    for (int i = 0; i < n; i++) {
        cq_ltx2_vae_block *B = &c->down[i];
        B->cin = B->width = w;
        B->n_res = lpb[i];
        B->resample = sts[i];
        B->cout = boc[i];
        if (B->resample) {
            CQ_TRY(stride_of("downsample_type", i, dt[i], B->st));
            const int prod = B->st[0] * B->st[1] * B->st[2];
            if (boc[i] % prod || ((int64_t)w * prod) % boc[i])
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config down block %d: %d -> %d channels with stride %d x %d "
                               "x %d do not fold evenly", i, w, boc[i], B->st[0], B->st[1], B->st[2]);
            B->conv_out = boc[i] / prod;
            B->group = (int)((int64_t)w * prod / boc[i]);
            c->t_down *= B->st[0];
            c->s_down *= B->st[1];
        } else {
            if (boc[i] != w)
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config down block %d has no downsampler but changes width "
                               "%d -> %d", i, w, boc[i]);
            B->st[0] = B->st[1] = B->st[2] = 1;
        }
        w = boc[i];
    }
    c->enc_width = w;
    c->enc_mid_layers = lpb[n];
    return CQ_OK;
}

static cq_status parse_json(const cJSON *j, void *out) {
    cq_ltx2_vae_config *c = out;
    const cq_cfg g = {j, WHO, ""};
    if (!cJSON_IsObject(j)) return cq_fail(CQ_ERR_PARSE, WHO ": config is not a JSON object");
    CQ_TRY(cq_cfg_class(&g, "AutoencoderKLLTX2Video", true));
    memset(c, 0, sizeof *c);
    CQ_TRY(cq_cfg_int(&g, "in_channels", 3, 1, 64, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "out_channels", 3, 1, 64, &c->out_channels));
    CQ_TRY(cq_cfg_int(&g, "latent_channels", 128, 1, 4096, &c->latent_channels));
    CQ_TRY(cq_cfg_int(&g, "patch_size", 4, 1, 16, &c->patch));
    int pt;
    CQ_TRY(cq_cfg_int(&g, "patch_size_t", 1, 1, 16, &pt));
    if (pt != 1) return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config patch_size_t is %d; only 1 is supported", pt);
    CQ_TRY(cq_cfg_num(&g, "scaling_factor", 1.0, 0.0, true, 1e6, &c->scaling_factor));
    double eps;
    CQ_TRY(cq_cfg_num(&g, "resnet_norm_eps", 1e-6, 0.0, false, 1.0, &eps)); /* read by the width-changing blocks only */
    CQ_TRY(parse_decoder(&g, c));
    CQ_TRY(parse_encoder(&g, c));
    return CQ_OK;
}

cq_status cq_ltx2_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_vae_config *c) {
    return cq_cfg_read(cmf, prefix, WHO, parse_json, c);
}

cq_status cq_ltx2_vae_parse_config_text(const char *json, cq_ltx2_vae_config *c) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO ": config is not valid JSON");
    cq_status s = parse_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
/* `name`.conv.weight bound as [cout, cin * 27] (the ops take at most 4 dimensions; the file's [cout, cin, 3, 3, 3]
 * is the same bytes) and `name`.conv.bias as F32. */
static cq_status bind_conv(const cq_tt_binder *b, const char *p, const char *name, int cin, int cout, lv_conv *c) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s%s.conv.weight", p, name));
    cq_tensor_view flat = *v; /* keeps owner and index: its hash is still checked */
    flat.ndim = 2;
    flat.shape[0] = (uint64_t)cout;
    flat.shape[1] = (uint64_t)cin * 27;
    for (int d = 2; d < CQ_MAX_DIMS; d++) flat.shape[d] = 0;
    if (!cq_backend_runs(b->be, CQ_OP_CONV3D, v->dtype, CQ_DTYPE_F32))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": tensor '%s' is %s, which backend %s does not convolve with", v->name,
                       cq_dtype_name(v->dtype), cq_backend_name(b->be));
    CQ_TRY(cq_tensor_bind_weight(b->be, &flat, &c->w));
    CQ_TRY(cq_tt_held_add(b->held, &c->w));
    CQ_TRY(cq_tt_bind_vector(b, &c->b, "%s%s.conv.bias", p, name));
    c->cin = cin;
    c->cout = cout;
    return CQ_OK;
}

static cq_status bind_res(const cq_tt_binder *b, const char *p, const char *stem, int n, int width, lv_res **out) {
    *out = cq_calloc((size_t)(n ? n : 1), sizeof **out);
    if (!*out) return CQ_ERR_NOMEM;
    char nm[200];
    for (int j = 0; j < n; j++) {
        snprintf(nm, sizeof nm, "%s.resnets.%d.conv1", stem, j);
        CQ_TRY(bind_conv(b, p, nm, width, width, &(*out)[j].c1));
        snprintf(nm, sizeof nm, "%s.resnets.%d.conv2", stem, j);
        CQ_TRY(bind_conv(b, p, nm, width, width, &(*out)[j].c2));
    }
    return CQ_OK;
}

/* The identity gather of a skip's channel-group mean: cout groups of `group` consecutive channels. */
static cq_status group_index(const cq_tt_binder *b, int cout, int group, cq_tensor *out) {
    const int n = cout * group;
    int32_t *idx = cq_mallocn((size_t)n, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    for (int i = 0; i < n; i++) idx[i] = i;
    cq_status s = cq_tensor_alloc(b->be, CQ_DTYPE_I32, 1, (const int64_t[1]){n}, out);
    if (s == CQ_OK) s = cq_tensor_upload(out, idx, (size_t)n * sizeof(int32_t));
    if (s == CQ_OK) s = cq_tt_held_add(b->held, out);
    else cq_tensor_free(out);
    cq_free(idx);
    return s;
}

static cq_status read_stats(cq_ltx2_vae *v, const cq_tt_binder *b, const char *p) {
    const int C = v->cfg.latent_channels;
    float **dst[2] = {&v->mean, &v->std};
    static const char *const nm[2] = {"latents_mean", "latents_std"};
    for (int k = 0; k < 2; k++) {
        const cq_tensor_view *t;
        CQ_TRY(cq_tt_get(WHO, b->table, b->cmf, &t, "%s%s", p, nm[k]));
        if (!(*dst[k] = cq_mallocn((size_t)C, sizeof(float)))) return CQ_ERR_NOMEM;
        CQ_TRY(cq_tt_read_vector(WHO, t, *dst[k], (size_t)C));
        for (int i = 0; i < C; i++)
            if (!isfinite((*dst[k])[i]) || (k == 1 && (*dst[k])[i] == 0.0f))
                return cq_fail(CQ_ERR_NUMERIC, WHO ": tensor '%s%s'[%d] is %g", p, nm[k], i, (double)(*dst[k])[i]);
    }
    return CQ_OK;
}

static cq_status bind_decoder(cq_ltx2_vae *v, const cq_tt_binder *b, const char *p) {
    const cq_ltx2_vae_config *c = &v->cfg;
    lv_coder *d = &v->dec;
    char nm[200];
    CQ_TRY(bind_conv(b, p, "decoder.conv_in", c->latent_channels, c->dec_width, &d->conv_in));
    CQ_TRY(bind_res(b, p, "decoder.mid_block", c->dec_mid_layers, c->dec_width, &d->mid));
    for (int i = 0; i < c->n_up; i++) {
        const cq_ltx2_vae_block *B = &c->up[i];
        if (B->resample) {
            snprintf(nm, sizeof nm, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            CQ_TRY(bind_conv(b, p, nm, B->cin, B->conv_out, &d->blk[i].rs));
        }
        snprintf(nm, sizeof nm, "decoder.up_blocks.%d", i);
        CQ_TRY(bind_res(b, p, nm, B->n_res, B->width, &d->blk[i].res));
    }
    return bind_conv(b, p, "decoder.conv_out", c->dec_out_width, c->out_channels * c->patch * c->patch,
                     &d->conv_out);
}

static cq_status bind_encoder(cq_ltx2_vae *v, const cq_tt_binder *b, const char *p) {
    const cq_ltx2_vae_config *c = &v->cfg;
    lv_coder *e = &v->enc;
    char nm[200];
    CQ_TRY(bind_conv(b, p, "encoder.conv_in", c->in_channels * c->patch * c->patch, c->latent_channels,
                     &e->conv_in));
    for (int i = 0; i < c->n_down; i++) {
        const cq_ltx2_vae_block *B = &c->down[i];
        snprintf(nm, sizeof nm, "encoder.down_blocks.%d", i);
        CQ_TRY(bind_res(b, p, nm, B->n_res, B->width, &e->blk[i].res));
        if (B->resample) {
            snprintf(nm, sizeof nm, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            CQ_TRY(bind_conv(b, p, nm, B->cin, B->conv_out, &e->blk[i].rs));
            CQ_TRY(group_index(b, B->cout, B->group, &e->blk[i].gidx));
        }
    }
    CQ_TRY(bind_res(b, p, "encoder.mid_block", c->enc_mid_layers, c->enc_width, &e->mid));
    return bind_conv(b, p, "encoder.conv_out", c->enc_width, c->latent_channels + 1, &e->conv_out);
}

cq_status cq_ltx2_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_vae **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2_vae *v = cq_calloc(1, sizeof *v);
    if (!v) return CQ_ERR_NOMEM;
    v->be = be;
    cq_status s = cq_ltx2_vae_parse_config(cmf, prefix, &v->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_vae_tensors(&v->cfg, prefix, &table);
    const cq_tt_binder b = {WHO, &table, cmf, be, &v->held};
    if (s == CQ_OK) s = read_stats(v, &b, prefix);
    if (s == CQ_OK) s = bind_decoder(v, &b, prefix);
    if (s == CQ_OK) {
        /* the encoder: optional (text to video never encodes), all of it or none */
        char nm[200];
        snprintf(nm, sizeof nm, "%sencoder.conv_in.conv.weight", prefix);
        v->has_encoder = cq_cmf_find(cmf, nm) != NULL;
        if (v->has_encoder) s = bind_encoder(v, &b, prefix);
        if (s != CQ_OK) s = cq_fail_prefix(s, "%s", "the encoder is all or nothing: ");
    }
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_vae_free(v);
        return s;
    }
    *out = v;
    return CQ_OK;
}

static void free_coder(lv_coder *c) {
    cq_free(c->mid);
    for (int i = 0; i < MAXB; i++) cq_free(c->blk[i].res);
}

void cq_ltx2_vae_free(cq_ltx2_vae *v) {
    if (!v) return;
    cq_tt_held_free(&v->held); /* the fields are copies of these handles */
    free_coder(&v->dec);
    free_coder(&v->enc);
    cq_free(v->mean);
    cq_free(v->std);
    cq_free(v);
}

const cq_ltx2_vae_config *cq_ltx2_vae_get_config(const cq_ltx2_vae *v) { return v ? &v->cfg : NULL; }

bool cq_ltx2_vae_has_encoder(const cq_ltx2_vae *v) { return v && v->has_encoder; }

void cq_ltx2_vae_set_tap(cq_ltx2_vae *v, cq_ltx2_vae_tap_fn fn, void *user) {
    if (!v) return;
    v->tap = fn;
    v->tap_user = user;
}
