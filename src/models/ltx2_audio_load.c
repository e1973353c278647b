/*
 * ltx2_audio_load.c — LTX-2.3 / 2.5's audio VAE decoder and vocoder
 * (ltx2_audio.h): the configs and the weights, bound through the tensor
 * tables (ltx2_audio_tensors.c). Convolution kernels stay in their file
 * codec; biases and SnakeBeta parameters become F32 vectors. Built here once:
 * the depthwise filters of the anti-aliased activations (each stored filter
 * replicated over the channels, shared by every activation with the same
 * values), the STFT as a convolution over blocks of hop_length samples, the
 * Hann-windowed sinc of the BWE's skip path (not stored: the reference builds
 * it), and the index tables of the column gathers.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/ltx2_audio_impl.h"
#include "models/tables.h"

#define WHO_VAE "ltx2_audio_vae"
#define WHO_VOC "ltx2_vocoder"

/* ------------------------------------------------------------------------ */
/* Configs                                                                  */
/* ------------------------------------------------------------------------ */
/* A member that is absent, null or the string `want` (absent and null: the class default, `want` here). */
static cq_status need_string(const cq_cfg *g, const char *key, const char *want, const char *why) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it) return CQ_OK;
    if (!cJSON_IsString(it)) return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be a string", g->who, g->where, key);
    if (strcmp(it->valuestring, want) != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: config %s%s is \"%s\"; only \"%s\" is supported (%s)", g->who,
                       g->where, key, it->valuestring, want, why);
    return CQ_OK;
}

static cq_status need_false(const cq_cfg *g, const char *key, const char *why) {
    bool v;
    CQ_TRY(cq_cfg_bool(g, key, false, &v));
    if (v) return cq_fail(CQ_ERR_UNSUPPORTED, "%s: config %s is true; %s", g->who, key, why);
    return CQ_OK;
}

static cq_status parse_vae_json(const cJSON *j, void *out) {
    cq_ltx2_audio_vae_config *c = out;
    const cq_cfg g = {j, WHO_VAE, ""};
    if (!cJSON_IsObject(j)) return cq_fail(CQ_ERR_PARSE, WHO_VAE ": config is not a JSON object");
    CQ_TRY(cq_cfg_class(&g, "AutoencoderKLLTX2Audio", false));
    memset(c, 0, sizeof *c);
    CQ_TRY(need_string(&g, "norm_type", "pixel", "LTX-2's audio VAE normalises per pixel"));
    CQ_TRY(need_string(&g, "causality_axis", "height", "LTX-2's audio VAE is causal in time"));
    const cJSON *ar = cq_cfg_get(&g, "attn_resolutions");
    if (ar && (!cJSON_IsArray(ar) || cJSON_GetArraySize(ar) > 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VAE ": config attn_resolutions is set; the decoder's attention "
                       "blocks are not supported (LTX-2's audio VAE has none)");
    CQ_TRY(need_false(&g, "mid_block_add_attention", "the mid-block attention is not supported (LTX-2's audio VAE "
                      "has none)"));
    CQ_TRY(cq_cfg_int(&g, "base_channels", 128, 1, 4096, &c->base_channels));
    CQ_TRY(cq_cfg_int(&g, "output_channels", 2, 1, 16, &c->output_channels));
    CQ_TRY(cq_cfg_int(&g, "latent_channels", 8, 1, 1024, &c->latent_channels));
    CQ_TRY(cq_cfg_int(&g, "num_res_blocks", 2, 0, 16, &c->num_res_blocks));
    CQ_TRY(cq_cfg_ints(&g, "ch_mult", 1, CQ_LTX2_AUDIO_MAX_LEVELS, 1, 64, c->ch_mult, &c->n_levels));
    if (c->n_levels == 0) {
        c->n_levels = 3;
        c->ch_mult[0] = 1, c->ch_mult[1] = 2, c->ch_mult[2] = 4;
    }
    for (int i = 0; i < c->n_levels; i++)
        if ((int64_t)c->base_channels * c->ch_mult[i] > 8192)
            return cq_fail(CQ_ERR_PARSE, WHO_VAE ": config base_channels x ch_mult[%d] = %d x %d exceeds 8192", i,
                           c->base_channels, c->ch_mult[i]);
    CQ_TRY(cq_cfg_int(&g, "mel_bins", 64, 4, 4096, &c->mel_bins));
    if (c->mel_bins % 4)
        return cq_fail(CQ_ERR_PARSE, WHO_VAE ": config mel_bins %d is not a multiple of 4 (the latent has mel_bins / 4 "
                       "bins)", c->mel_bins);
    c->latent_mel = c->mel_bins / 4;
    CQ_TRY(cq_cfg_int(&g, "sample_rate", 16000, 1, 1 << 20, &c->sample_rate));
    CQ_TRY(cq_cfg_int(&g, "mel_hop_length", 160, 1, 1 << 16, &c->hop_length));
    return CQ_OK;
}

cq_status cq_ltx2_audio_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_audio_vae_config *c) {
    return cq_cfg_read(cmf, prefix, WHO_VAE, parse_vae_json, c);
}

cq_status cq_ltx2_audio_vae_parse_config_text(const char *json, cq_ltx2_audio_vae_config *c) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO_VAE ": config is not valid JSON");
    cq_status s = parse_vae_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* An integer array member (the class default `def` of n_def entries when absent). */
static cq_status int_list(const cq_cfg *g, const char *key, const int *def, int n_def, int max_n, int lo, int hi,
                          int *out, int *n) {
    CQ_TRY(cq_cfg_ints(g, key, 1, max_n, lo, hi, out, n));
    if (*n == 0) {
        memcpy(out, def, (size_t)n_def * sizeof(int));
        *n = n_def;
    }
    return CQ_OK;
}

/* One generator's members, named `<pre><key>` ("" for the main generator, "bwe_" for the BWE's), with the
 * defaults of `cls` (LTX2VocoderWithBWE's or LTX2Vocoder's constructor). */
static cq_status parse_gen(const cq_cfg *g, const char *pre, bool bwe_defaults, bool lone, cq_ltx2_voc_gen_config *k) {
    static const int k_up_k[] = {11, 4, 4, 4, 4, 4}, k_up_f[] = {5, 2, 2, 2, 2, 2};
    static const int b_up_k[] = {12, 11, 4, 4, 4}, b_up_f[] = {6, 5, 2, 2, 2};
    static const int v_up_k[] = {16, 15, 8, 4, 4}, v_up_f[] = {6, 5, 2, 2, 2};
    static const int res_k[] = {3, 7, 11};
    char key[96];
#define KEY(s) (snprintf(key, sizeof key, "%s%s", pre, s), key)
    memset(k, 0, sizeof *k);
    CQ_TRY(cq_cfg_int(g, KEY("in_channels"), 128, 1, 65536, &k->in_channels));
    CQ_TRY(cq_cfg_int(g, KEY("hidden_channels"), lone ? 1024 : bwe_defaults ? 512 : 1536, 1, 65536,
                      &k->hidden_channels));
    CQ_TRY(cq_cfg_int(g, KEY("out_channels"), 2, 1, 16, &k->out_channels));
    const int *dk = lone ? v_up_k : bwe_defaults ? b_up_k : k_up_k, *df = lone ? v_up_f : bwe_defaults ? b_up_f : k_up_f;
    const int nd = lone || bwe_defaults ? 5 : 6;
    int nf = 0;
    CQ_TRY(int_list(g, KEY("upsample_kernel_sizes"), dk, nd, CQ_LTX2_VOC_MAX_UPS, 1, 64, k->up_kernel, &k->n_ups));
    CQ_TRY(int_list(g, KEY("upsample_factors"), df, nd, CQ_LTX2_VOC_MAX_UPS, 1, 64, k->up_factor, &nf));
    if (nf != k->n_ups)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %supsample_factors lists %d entries, %supsample_kernel_sizes %d",
                       pre, nf, pre, k->n_ups);
    k->total_up = 1;
    for (int i = 0; i < k->n_ups; i++) {
        if (k->up_kernel[i] < k->up_factor[i])
            return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %supsample_kernel_sizes[%d] = %d is below the factor %d",
                           pre, i, k->up_kernel[i], k->up_factor[i]);
        k->total_up *= k->up_factor[i];
    }
    if (k->total_up > 4096) return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %supsample_factors multiply to %d (> 4096)",
                                           pre, k->total_up);
    if (k->hidden_channels >> k->n_ups < 1 || k->hidden_channels % (1 << k->n_ups))
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %shidden_channels %d cannot be halved %d times", pre,
                       k->hidden_channels, k->n_ups);
    CQ_TRY(int_list(g, KEY("resnet_kernel_sizes"), res_k, 3, CQ_LTX2_VOC_MAX_RES, 1, 63, k->res_kernel, &k->n_res));
    const cJSON *dl = cq_cfg_get(g, KEY("resnet_dilations"));
    if (!dl) {
        for (int j = 0; j < k->n_res; j++) k->n_dil[j] = 3, k->dil[j][0] = 1, k->dil[j][1] = 3, k->dil[j][2] = 5;
    } else {
        if (!cJSON_IsArray(dl) || cJSON_GetArraySize(dl) != k->n_res)
            return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %s must list one array of dilations per resnet kernel (%d)",
                           key, k->n_res);
        for (int j = 0; j < k->n_res; j++) {
            const cJSON *a = cJSON_GetArrayItem(dl, j);
            const int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
            if (n < 1 || n > CQ_LTX2_VOC_MAX_DIL)
                return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %s[%d] must be an array of 1 to %d dilations", key, j,
                               CQ_LTX2_VOC_MAX_DIL);
            k->n_dil[j] = n;
            for (int d = 0; d < n; d++) {
                const cJSON *v = cJSON_GetArrayItem(a, d);
                if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valueint < 1 ||
                    v->valueint > 64)
                    return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %s[%d][%d] must be an integer in [1, 64]", key, j,
                                   d);
                k->dil[j][d] = v->valueint;
            }
        }
    }
    const cJSON *af = cq_cfg_get(g, KEY("act_fn"));
    if (!af && lone)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config has no %sact_fn (LTX2Vocoder's default \"leaky_relu\", "
                       "LTX-2.0's vocoder, is not supported; LTX-2.3 / 2.5 use \"snakebeta\")", pre);
    CQ_TRY(need_string(g, KEY("act_fn"), "snakebeta", "BigVGAN-v2's anti-aliased SnakeBeta"));
    bool aa;
    CQ_TRY(cq_cfg_bool(g, KEY("antialias"), !lone, &aa));
    if (!aa)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config %santialias is false; only anti-aliased activations are "
                       "supported", pre);
    CQ_TRY(cq_cfg_int(g, KEY("antialias_ratio"), 2, 1, 16, &k->aa_ratio));
    CQ_TRY(cq_cfg_int(g, KEY("antialias_kernel_size"), 12, 1, 64, &k->aa_kernel));
    if (k->aa_kernel < k->aa_ratio)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %santialias_kernel_size %d is below the ratio %d", pre,
                       k->aa_kernel, k->aa_ratio);
    const cJSON *fa = cq_cfg_get(g, KEY("final_act_fn"));
    const bool present = cJSON_GetObjectItemCaseSensitive(g->o, key) != NULL;
    if (!present && lone) k->final_act = CQ_LTX2_VOC_FINAL_TANH; /* LTX2Vocoder's default */
    else if (!fa) k->final_act = CQ_LTX2_VOC_FINAL_NONE;
    else if (!cJSON_IsString(fa)) return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config %s must be a string or null", key);
    else if (!strcmp(fa->valuestring, "tanh")) k->final_act = CQ_LTX2_VOC_FINAL_TANH;
    else if (!strcmp(fa->valuestring, "clamp")) k->final_act = CQ_LTX2_VOC_FINAL_CLAMP;
    else
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config %s is \"%s\" (not null, \"tanh\" or \"clamp\")", key,
                       fa->valuestring);
    CQ_TRY(cq_cfg_bool(g, KEY("final_bias"), lone, &k->final_bias));
#undef KEY
    return CQ_OK;
}

static cq_status parse_voc_json(const cJSON *j, void *out) {
    cq_ltx2_vocoder_config *c = out;
    const cq_cfg g = {j, WHO_VOC, ""};
    if (!cJSON_IsObject(j)) return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config is not a JSON object");
    memset(c, 0, sizeof *c);
    const cJSON *cls = cq_cfg_get(&g, "_class_name");
    if (!cJSON_IsString(cls))
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config has no _class_name (LTX2VocoderWithBWE or LTX2Vocoder)");
    if (!strcmp(cls->valuestring, "LTX2VocoderWithBWE")) c->bwe = true;
    else if (strcmp(cls->valuestring, "LTX2Vocoder") != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config _class_name is \"%s\", not LTX2VocoderWithBWE or "
                       "LTX2Vocoder", cls->valuestring);
    CQ_TRY(parse_gen(&g, "", false, !c->bwe, &c->gen));
    if (!c->bwe) {
        c->rate_ratio = 1;
        CQ_TRY(cq_cfg_int(&g, "output_sampling_rate", 24000, 1, 1 << 20, &c->out_rate));
        c->in_rate = c->out_rate;
        return CQ_OK;
    }
    CQ_TRY(parse_gen(&g, "bwe_", true, false, &c->bwe_gen));
    CQ_TRY(cq_cfg_int(&g, "filter_length", 512, 2, 8192, &c->filter_length));
    CQ_TRY(cq_cfg_int(&g, "hop_length", 80, 1, 8192, &c->hop_length));
    CQ_TRY(cq_cfg_int(&g, "window_length", 512, 1, 8192, &c->window_length));
    CQ_TRY(cq_cfg_int(&g, "num_mel_channels", 64, 1, 1024, &c->n_mels));
    CQ_TRY(cq_cfg_int(&g, "input_sampling_rate", 16000, 1, 1 << 20, &c->in_rate));
    CQ_TRY(cq_cfg_int(&g, "output_sampling_rate", 48000, 1, 1 << 22, &c->out_rate));
    if (c->filter_length != c->window_length)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config filter_length %d differs from window_length %d (the "
                       "causal STFT is supported with equal lengths)", c->filter_length, c->window_length);
    if (c->hop_length > c->window_length)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config hop_length %d exceeds window_length %d", c->hop_length,
                       c->window_length);
    if (c->out_rate % c->in_rate || c->out_rate / c->in_rate > 16)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VOC ": config output_sampling_rate %d is not 1 to 16 times "
                       "input_sampling_rate %d", c->out_rate, c->in_rate);
    c->rate_ratio = c->out_rate / c->in_rate;
    const int ch = c->gen.out_channels;
    if (c->bwe_gen.in_channels != ch * c->n_mels)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config bwe_in_channels %d is not out_channels x num_mel_channels = "
                       "%d x %d", c->bwe_gen.in_channels, ch, c->n_mels);
    if (c->bwe_gen.out_channels != ch)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config bwe_out_channels %d differs from out_channels %d",
                       c->bwe_gen.out_channels, ch);
    if (c->bwe_gen.total_up != c->hop_length * c->rate_ratio)
        return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config bwe_upsample_factors multiply to %d, not hop_length x the rate "
                       "ratio = %d x %d (the residual must match the resampled input)", c->bwe_gen.total_up,
                       c->hop_length, c->rate_ratio);
    return CQ_OK;
}

cq_status cq_ltx2_vocoder_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_vocoder_config *c) {
    return cq_cfg_read(cmf, prefix, WHO_VOC, parse_voc_json, c);
}

cq_status cq_ltx2_vocoder_parse_config_text(const char *json, cq_ltx2_vocoder_config *c) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO_VOC ": config is not valid JSON");
    cq_status s = parse_voc_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Shared pieces                                                            */
/* ------------------------------------------------------------------------ */
static cq_status upload_i32(const cq_tt_binder *b, const int32_t *v, int64_t n, cq_tensor *out) {
    cq_status s = cq_tensor_alloc(b->be, CQ_DTYPE_I32, 1, (const int64_t[1]){n}, out);
    if (s == CQ_OK) s = cq_tensor_upload(out, v, (size_t)n * sizeof(int32_t));
    if (s == CQ_OK) return cq_tt_held_add(b->held, out);
    cq_tensor_free(out);
    return s;
}

/* The host f32 values of entry `name` (n of them, any codec) into a new buffer. */
static cq_status read_host(const cq_tt_binder *b, const char *name, size_t n, float **out) {
    *out = NULL;
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s", name));
    float *t = cq_mallocn(n, sizeof(float));
    if (!t) return CQ_ERR_NOMEM;
    cq_status s = cq_tt_read_vector(b->who, v, t, n);
    if (s != CQ_OK) {
        cq_free(t);
        return s;
    }
    *out = t;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Audio VAE                                                                */
/* ------------------------------------------------------------------------ */
static cq_status vae_conv(const cq_tt_binder *b, const char *name, int cin, int cout, int k, la_conv *c) {
    c->cin = cin, c->cout = cout, c->k = k;
    CQ_TRY(cq_tt_bind_weight(b, &c->w, "%s.conv.weight", name));
    return cq_tt_bind_vector(b, &c->b, "%s.conv.bias", name);
}

static cq_status vae_res(const cq_tt_binder *b, const char *name, int cin, int cout, la_res *r) {
    char n[300];
    snprintf(n, sizeof n, "%s.conv1", name);
    CQ_TRY(vae_conv(b, n, cin, cout, 3, &r->c1));
    snprintf(n, sizeof n, "%s.conv2", name);
    CQ_TRY(vae_conv(b, n, cout, cout, 3, &r->c2));
    r->has_sc = cin != cout;
    if (!r->has_sc) return CQ_OK;
    snprintf(n, sizeof n, "%s.nin_shortcut", name);
    return vae_conv(b, n, cin, cout, 1, &r->sc);
}

static cq_status vae_bind(cq_ltx2_audio_vae *m, const cq_tt_binder *b, const char *p) {
    const cq_ltx2_audio_vae_config *c = &m->cfg;
    const int nl = c->n_levels, base = c->base_channels;
    char n[300];
    int ch = base * c->ch_mult[nl - 1];
    snprintf(n, sizeof n, "%sdecoder.conv_in", p);
    CQ_TRY(vae_conv(b, n, c->latent_channels, ch, 3, &m->conv_in));
    for (int i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "%sdecoder.mid.block_%d", p, i + 1);
        CQ_TRY(vae_res(b, n, ch, ch, &m->mid[i]));
    }
    for (int level = nl - 1; level >= 0; level--) {
        la_level *L = &m->lv[level];
        const int co = base * c->ch_mult[level];
        L->n_res = c->num_res_blocks + 1;
        if (!(L->res = cq_calloc((size_t)L->n_res, sizeof *L->res))) return CQ_ERR_NOMEM;
        for (int j = 0; j < L->n_res; j++) {
            snprintf(n, sizeof n, "%sdecoder.up.%d.block.%d", p, level, j);
            CQ_TRY(vae_res(b, n, ch, co, &L->res[j]));
            ch = co;
        }
        L->up = level != 0;
        if (L->up) {
            snprintf(n, sizeof n, "%sdecoder.up.%d.upsample.conv", p, level);
            CQ_TRY(vae_conv(b, n, ch, ch, 3, &L->up_conv));
        }
    }
    snprintf(n, sizeof n, "%sdecoder.conv_out", p);
    CQ_TRY(vae_conv(b, n, ch, c->output_channels, 3, &m->conv_out));
    /* the statistics, as rows to broadcast over the packed tokens */
    float *mean, *std;
    snprintf(n, sizeof n, "%slatents_mean", p);
    CQ_TRY(read_host(b, n, (size_t)base, &mean));
    snprintf(n, sizeof n, "%slatents_std", p);
    cq_status s = read_host(b, n, (size_t)base, &std);
    if (s == CQ_OK) s = cq_tt_held_upload(b, mean, 1, base, &m->mean);
    if (s == CQ_OK) s = cq_tt_held_upload(b, std, 1, base, &m->std);
    cq_free(mean);
    cq_free(std);
    CQ_TRY(s);
    const int C = c->latent_channels, Ml = c->latent_mel;
    m->has_stats = base == C * Ml;
    int32_t *idx = cq_mallocn((size_t)C * Ml, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    for (int mm = 0; mm < Ml; mm++)
        for (int cc = 0; cc < C; cc++) idx[mm * C + cc] = cc * Ml + mm;
    s = upload_i32(b, idx, (int64_t)C * Ml, &m->unpack_idx);
    cq_free(idx);
    return s;
}

cq_status cq_ltx2_audio_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_audio_vae **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO_VAE ": load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO_VAE ": load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2_audio_vae *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_ltx2_audio_vae_parse_config(cmf, prefix, &m->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_audio_vae_tensors(&m->cfg, prefix, &table);
    const cq_tt_binder b = {WHO_VAE, &table, cmf, be, &m->held};
    if (s == CQ_OK) s = vae_bind(m, &b, prefix);
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_audio_vae_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_ltx2_audio_vae_free(cq_ltx2_audio_vae *m) {
    if (!m) return;
    cq_tt_held_free(&m->held);
    for (int i = 0; i < CQ_LTX2_AUDIO_MAX_LEVELS; i++) cq_free(m->lv[i].res);
    cq_free(m);
}

const cq_ltx2_audio_vae_config *cq_ltx2_audio_vae_get_config(const cq_ltx2_audio_vae *m) { return &m->cfg; }

void cq_ltx2_audio_vae_set_tap(cq_ltx2_audio_vae *m, cq_ltx2_audio_tap_fn fn, void *user) {
    if (!m) return;
    m->tap = fn;
    m->tap_user = user;
}

/* ------------------------------------------------------------------------ */
/* Vocoder                                                                  */
/* ------------------------------------------------------------------------ */
/* The [max_ch, k] depthwise tensor of filter f times `scale`, shared by equal filters (the first LV_MAX_FILTERS
 * distinct ones; any further one gets its own); *out a [C, k] view. */
static cq_status shared_filter(cq_ltx2_vocoder *v, const cq_tt_binder *b, const float *f, int k, float scale, int C,
                               cq_tensor *out) {
    lv_filter *F = NULL;
    for (int i = 0; i < v->n_filt && !F; i++)
        if (v->filt[i].k == k && v->filt[i].scale == scale && !memcmp(v->filt[i].v, f, (size_t)k * sizeof(float)))
            F = &v->filt[i];
    lv_filter own;
    if (!F) {
        /* past the cache's capacity (a checkpoint whose filters differ), a filter of its own */
        F = v->n_filt < LV_MAX_FILTERS ? &v->filt[v->n_filt] : &own;
        memcpy(F->v, f, (size_t)k * sizeof(float));
        F->k = k;
        F->scale = scale;
        float *w = cq_mallocn((size_t)v->max_ch * k, sizeof(float));
        if (!w) return CQ_ERR_NOMEM;
        for (int c = 0; c < v->max_ch; c++)
            for (int j = 0; j < k; j++) w[(size_t)c * k + j] = f[j] * scale;
        cq_status s = cq_tt_held_upload(b, w, v->max_ch, k, &F->t);
        cq_free(w);
        CQ_TRY(s);
        if (F != &own) v->n_filt++;
    }
    *out = cq_tensor_rows_view(&F->t, 0, C);
    return CQ_OK;
}

static cq_status bind_act(cq_ltx2_vocoder *v, const cq_tt_binder *b, const cq_ltx2_voc_gen_config *g,
                          const char *name, int C, lv_act *a) {
    char n[300];
    CQ_TRY(cq_tt_bind_vector(b, &a->alpha, "%s.act.alpha", name));
    CQ_TRY(cq_tt_bind_vector(b, &a->beta, "%s.act.beta", name));
    const int k = g->aa_kernel;
    float *f;
    snprintf(n, sizeof n, "%s.upsample.filter", name);
    CQ_TRY(read_host(b, n, (size_t)k, &f));
    cq_status s = shared_filter(v, b, f, k, (float)g->aa_ratio, C, &a->up);
    cq_free(f);
    CQ_TRY(s);
    snprintf(n, sizeof n, "%s.downsample.filter", name);
    CQ_TRY(read_host(b, n, (size_t)k, &f));
    s = shared_filter(v, b, f, k, 1.0f, C, &a->down);
    cq_free(f);
    return s;
}

static cq_status bind_gen(cq_ltx2_vocoder *v, const cq_tt_binder *b, const char *p, bool bwe, lv_gen *G) {
    const cq_ltx2_voc_gen_config *g = bwe ? &v->cfg.bwe_gen : &v->cfg.gen;
    G->cfg = g;
    char st[200], n[300];
    snprintf(st, sizeof st, "%s%s", p, cq_ltx2_voc_stem(&v->cfg, bwe));
    CQ_TRY(cq_tt_bind_weight(b, &G->conv_in, "%sconv_in.weight", st));
    CQ_TRY(cq_tt_bind_vector(b, &G->conv_in_b, "%sconv_in.bias", st));
    if (!(G->res = cq_calloc((size_t)g->n_ups * g->n_res, sizeof *G->res))) return CQ_ERR_NOMEM;
    int ch = g->hidden_channels;
    for (int i = 0; i < g->n_ups; i++) {
        ch = cq_ltx2_voc_width(g, i);
        CQ_TRY(cq_tt_bind_weight(b, &G->up[i], "%supsamplers.%d.weight", st, i));
        CQ_TRY(cq_tt_bind_vector(b, &G->up_b[i], "%supsamplers.%d.bias", st, i));
        for (int j = 0; j < g->n_res; j++) {
            const int r = i * g->n_res + j;
            lv_resblock *R = &G->res[r];
            R->k = g->res_kernel[j];
            R->n_dil = g->n_dil[j];
            for (int d = 0; d < R->n_dil; d++) {
                R->dil[d] = g->dil[j][d];
                CQ_TRY(cq_tt_bind_weight(b, &R->c1[d], "%sresnets.%d.convs1.%d.weight", st, r, d));
                CQ_TRY(cq_tt_bind_vector(b, &R->b1[d], "%sresnets.%d.convs1.%d.bias", st, r, d));
                CQ_TRY(cq_tt_bind_weight(b, &R->c2[d], "%sresnets.%d.convs2.%d.weight", st, r, d));
                CQ_TRY(cq_tt_bind_vector(b, &R->b2[d], "%sresnets.%d.convs2.%d.bias", st, r, d));
                snprintf(n, sizeof n, "%sresnets.%d.acts1.%d", st, r, d);
                CQ_TRY(bind_act(v, b, g, n, ch, &R->a1[d]));
                snprintf(n, sizeof n, "%sresnets.%d.acts2.%d", st, r, d);
                CQ_TRY(bind_act(v, b, g, n, ch, &R->a2[d]));
            }
        }
    }
    snprintf(n, sizeof n, "%sact_out", st);
    CQ_TRY(bind_act(v, b, g, n, ch, &G->act_out));
    CQ_TRY(cq_tt_bind_weight(b, &G->conv_out, "%sconv_out.weight", st));
    if (g->final_bias) CQ_TRY(cq_tt_bind_vector(b, &G->conv_out_b, "%sconv_out.bias", st));
    return CQ_OK;
}

/* The BWE's STFT as a convolution over blocks of h = hop samples of all ch channels: frame f reads samples
 * h f - P + n, n < N (P = window - hop leading zeros), i.e. blocks f - J .. f - J + K - 1 with J = ceil(P / h);
 * tap (block j, sample i of the block, channel s') of output column s * 2nf + r is basis[r][h (j - J) + i + P]
 * when s' = s and that index is in [0, N), else 0. Input column i * ch + s' is the block view of [L, ch]. */
static cq_status bind_stft(cq_ltx2_vocoder *v, const cq_tt_binder *b, const char *p) {
    const cq_ltx2_vocoder_config *c = &v->cfg;
    const int N = c->filter_length, h = c->hop_length, P = c->window_length - c->hop_length, nf = N / 2 + 1;
    const int ch = c->gen.out_channels;
    const int J = (P + h - 1) / h, K = J + (N - 1 - P) / h + 1;
    v->stft_pad = J, v->stft_k = K;
    char n[300];
    float *basis, *mel;
    snprintf(n, sizeof n, "%smel_stft.stft_fn.forward_basis", p);
    CQ_TRY(read_host(b, n, (size_t)2 * nf * N, &basis));
    const int64_t rows = (int64_t)ch * 2 * nf, cols = (int64_t)h * ch * K;
    float *w = cq_calloc((size_t)(rows * cols), sizeof(float));
    cq_status s = w ? CQ_OK : CQ_ERR_NOMEM;
    for (int sc = 0; s == CQ_OK && sc < ch; sc++)
        for (int r = 0; r < 2 * nf; r++)
            for (int i = 0; i < h; i++)
                for (int j = 0; j < K; j++) {
                    const int t = h * (j - J) + i + P;
                    if (t < 0 || t >= N) continue;
                    /* weight [Cout, Cin, K]: input channel i * ch + sc */
                    w[((size_t)(sc * 2 * nf + r) * (size_t)(h * ch) + (size_t)(i * ch + sc)) * K + j] =
                        basis[(size_t)r * N + t];
                }
    if (s == CQ_OK) s = cq_tt_held_upload(b, w, rows, cols, &v->stft_w);
    cq_free(w);
    cq_free(basis);
    CQ_TRY(s);
    /* |X|^2: columns (re, im) = (s 2nf + r, s 2nf + nf + r) summed into s nf + r */
    int32_t *idx = cq_mallocn((size_t)ch * nf * 2, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    for (int sc = 0; sc < ch; sc++)
        for (int r = 0; r < nf; r++) {
            idx[2 * (sc * nf + r)] = sc * 2 * nf + r;
            idx[2 * (sc * nf + r) + 1] = sc * 2 * nf + nf + r;
        }
    s = upload_i32(b, idx, (int64_t)ch * nf * 2, &v->mag_idx);
    cq_free(idx);
    CQ_TRY(s);
    snprintf(n, sizeof n, "%smel_stft.mel_basis", p);
    CQ_TRY(read_host(b, n, (size_t)c->n_mels * nf, &mel));
    s = cq_tt_held_upload(b, mel, c->n_mels, nf, &v->mel_basis);
    cq_free(mel);
    return s;
}

/* The skip path's x ratio upsampler (the reference's UpSample1d(window_type="hann")): width = ceil(6 / 0.99),
 * k = 2 width ratio + 1 taps at t_i = (i / ratio - width) 0.99, sinc(t) cos^2(pi clamp(t, +-6) / 12) 0.99 / ratio,
 * formed in f32 as the reference forms it; times ratio (the transposed conv's gain). */
static cq_status bind_resampler(cq_ltx2_vocoder *v, const cq_tt_binder *b) {
    const int ratio = v->cfg.rate_ratio, width = (int)ceil(6.0 / 0.99), k = 2 * width * ratio + 1;
    const int ch = v->cfg.gen.out_channels;
    v->resamp_k = k, v->resamp_pad = width, v->resamp_crop_l = 2 * width * ratio, v->resamp_crop_r = k - ratio;
    float *w = cq_mallocn((size_t)ch * k, sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    for (int i = 0; i < k; i++) {
        const float t = ((float)i / (float)ratio - (float)width) * 0.99f;
        const float tc = t < -6.0f ? -6.0f : t > 6.0f ? 6.0f : t;
        const float cw = (float)cos((double)(tc * (float)M_PI / 6.0f / 2.0f));
        const float win = cw * cw;
        const float sinc = t == 0.0f ? 1.0f : (float)(sin(M_PI * (double)t) / (M_PI * (double)t));
        const float f = sinc * win * 0.99f / (float)ratio;
        for (int c = 0; c < ch; c++) w[(size_t)c * k + i] = f * (float)ratio;
    }
    cq_status s = cq_tt_held_upload(b, w, ch, k, &v->resamp);
    cq_free(w);
    return s;
}

static int gen_max_width(const cq_ltx2_voc_gen_config *g) { return g->n_ups ? cq_ltx2_voc_width(g, 0) : 0; }

cq_status cq_ltx2_vocoder_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_vocoder **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO_VOC ": load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO_VOC ": load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2_vocoder *v = cq_calloc(1, sizeof *v);
    if (!v) return CQ_ERR_NOMEM;
    v->be = be;
    cq_status s = cq_ltx2_vocoder_parse_config(cmf, prefix, &v->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_vocoder_tensors(&v->cfg, prefix, &table);
    const cq_tt_binder b = {WHO_VOC, &table, cmf, be, &v->held};
    if (s == CQ_OK) {
        v->max_ch = gen_max_width(&v->cfg.gen);
        if (v->cfg.bwe && gen_max_width(&v->cfg.bwe_gen) > v->max_ch) v->max_ch = gen_max_width(&v->cfg.bwe_gen);
        if (v->cfg.gen.out_channels > v->max_ch) v->max_ch = v->cfg.gen.out_channels;
        float *ones = cq_mallocn((size_t)v->max_ch, sizeof(float));
        if (!ones) s = CQ_ERR_NOMEM;
        for (int i = 0; s == CQ_OK && i < v->max_ch; i++) ones[i] = 1.0f;
        if (s == CQ_OK) s = cq_tt_held_upload(&b, ones, v->max_ch, 1, &v->ones);
        cq_free(ones);
    }
    if (s == CQ_OK) s = bind_gen(v, &b, prefix, false, &v->gen);
    if (s == CQ_OK && v->cfg.bwe) s = bind_gen(v, &b, prefix, true, &v->bwe);
    if (s == CQ_OK && v->cfg.bwe) s = bind_stft(v, &b, prefix);
    if (s == CQ_OK && v->cfg.bwe) s = bind_resampler(v, &b);
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_vocoder_free(v);
        return s;
    }
    *out = v;
    return CQ_OK;
}

void cq_ltx2_vocoder_free(cq_ltx2_vocoder *v) {
    if (!v) return;
    cq_tt_held_free(&v->held);
    cq_free(v->gen.res);
    cq_free(v->bwe.res);
    cq_free(v);
}

const cq_ltx2_vocoder_config *cq_ltx2_vocoder_get_config(const cq_ltx2_vocoder *v) { return &v->cfg; }

void cq_ltx2_vocoder_set_tap(cq_ltx2_vocoder *v, cq_ltx2_audio_tap_fn fn, void *user) {
    if (!v) return;
    v->tap = fn;
    v->tap_user = user;
}
