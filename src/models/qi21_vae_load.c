/*
 * qi21_vae_load.c — the VAE's config (from `<prefix>config_json`) and weight
 * binding: conv kernels stay in their file codec (zero-copy where the
 * backend allows), per-channel vectors become F32 backend tensors once, and
 * the mid blocks' to_qkv is split into separate q/k/v matrices.
 *
 * Structure (widths in cq_qi21_vae_get_widths, names in
 * cq_qi21_vae_block_name):
 *   encoder widths  base * [1] + dim_mult; level i: num_res_blocks
 *     residual blocks and a stride-2 conv except on the last level;
 *     Qwen-Image-2.1 adds an AvgDown shortcut (temporal factor 2 where
 *     temperal_downsample[i]);
 *   decoder widths  decoder_base * [dim_mult[-1]] + reversed(dim_mult);
 *     level i: num_res_blocks + 1 residual blocks, then (except on the last
 *     level) nearest x2 + 3x3 conv; Qwen-Image-2.1 keeps the width there
 *     and adds a DupUp shortcut (temporal factor 2 where
 *     reversed(temperal_downsample)[i]), Qwen-Image halves it (the next
 *     level starts at half its predecessor's width) and has no shortcut.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format/jsonutil.h"
#include "models/kit/config.h"
#include "models/qi21_vae_impl.h"
#include "models/tables.h"

/* ---- config ---------------------------------------------------------------------------- */
typedef cq_qi21_vae_geometry qv_json;
_Static_assert(CQ_QI21_VAE_MAX_LEVELS == QI21_VAE_MAX_LEVELS, "one level limit");

/* The models' config convention (models/kit/config.h). */
static cq_status json_int(const cJSON *o, const char *key, int def, int lo, int hi, int *out) {
    const cq_cfg g = {o, "vae", ""};
    return cq_cfg_int(&g, key, def, lo, hi, out);
}

static cq_status json_floats(const cJSON *o, const char *key, int n, float **out) {
    float *v = cq_mallocn((size_t)n, sizeof(float));
    if (!v) return CQ_ERR_NOMEM;
    const cq_cfg g = {o, "vae", ""};
    cq_status s = cq_cfg_floats(&g, key, n, v);
    if (s != CQ_OK) {
        cq_free(v);
        return s;
    }
    *out = v;
    return CQ_OK;
}

/* What one config read fills: the geometry, and the latent statistics
 * into *mean / *std unless those are NULL. */
typedef struct qv_read {
    qv_json *c;
    float **mean, **std;
} qv_read;

/* The temperal_downsample flags of the first n levels (the reference reads one per resampling level). */
static cq_status json_tdown(const cJSON *j, int n, bool exact, bool *out) {
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(j, "temperal_downsample");
    if (!cJSON_IsArray(td) || cJSON_GetArraySize(td) < n || (exact && cJSON_GetArraySize(td) != n))
        return cq_fail(CQ_ERR_PARSE, "vae: config 'temperal_downsample' must hold len(dim_mult) - 1 = %d booleans", n);
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(td, i);
        if (!cJSON_IsBool(it)) return cq_fail(CQ_ERR_PARSE, "vae: config temperal_downsample[%d] is not a boolean", i);
        out[i] = cJSON_IsTrue(it);
    }
    return CQ_OK;
}

/* Qwen-Image-2.1's keys: residual levels, separate image in/out channels, optional patching. */
static cq_status parse_qi21(const cJSON *j, qv_json *c) {
    const cq_cfg g = {j, "vae", ""};
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "is_residual");
    if (res && !cJSON_IsTrue(res))
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: is_residual = false (the Wan 2.1 layout) is not supported");
    CQ_TRY(json_int(j, "base_dim", 96, 1, 1 << 14, &c->base_dim));
    CQ_TRY(json_int(j, "decoder_base_dim", c->base_dim, 1, 1 << 14, &c->decoder_base_dim));
    CQ_TRY(json_int(j, "z_dim", 64, 1, 1 << 14, &c->z_dim));
    CQ_TRY(json_int(j, "num_res_blocks", 2, 1, 64, &c->num_res_blocks));
    CQ_TRY(json_int(j, "in_channels", 4, 1, 1 << 14, &c->in_channels));
    CQ_TRY(json_int(j, "out_channels", 4, 1, 1 << 14, &c->out_channels));
    CQ_TRY(json_int(j, "patch_size", 1, 1, 64, &c->patch));
    CQ_TRY(cq_cfg_ints(&g, "dim_mult", 1, QI21_VAE_MAX_LEVELS, 1, 64, c->mult, &c->n_mult));
    if (c->n_mult == 0) return cq_fail(CQ_ERR_PARSE, "vae: config dim_mult is missing");
    CQ_TRY(json_tdown(j, c->n_mult - 1, false, c->tdown));
    int pp = c->patch * c->patch;
    if (c->in_channels % pp || c->out_channels % pp || c->in_channels / pp != c->out_channels / pp)
        return cq_fail(CQ_ERR_PARSE, "vae: config in_channels %d / out_channels %d do not fold %dx%d patches of one image",
                       c->in_channels, c->out_channels, c->patch, c->patch);
    return CQ_OK;
}

/* Qwen-Image's keys (AutoencoderKLQwenImage): one decoder base, input_channels for both ends, no patching;
 * attention inside the levels (attn_scales) is not implemented. */
static cq_status parse_qimage(const cJSON *j, qv_json *c) {
    const cq_cfg g = {j, "vae", ""};
    CQ_TRY(json_int(j, "base_dim", 96, 1, 1 << 14, &c->base_dim));
    c->decoder_base_dim = c->base_dim;
    CQ_TRY(json_int(j, "z_dim", 16, 1, 1 << 14, &c->z_dim));
    CQ_TRY(json_int(j, "num_res_blocks", 2, 1, 64, &c->num_res_blocks));
    CQ_TRY(json_int(j, "input_channels", 3, 1, 1 << 14, &c->in_channels));
    c->out_channels = c->in_channels;
    c->patch = 1;
    c->mult[0] = 1, c->mult[1] = 2, c->mult[2] = 4, c->mult[3] = 4;
    int n;
    CQ_TRY(cq_cfg_ints(&g, "dim_mult", 1, QI21_VAE_MAX_LEVELS, 1, 64, c->mult, &n));
    c->n_mult = n ? n : 4;
    const cJSON *as = cq_cfg_get(&g, "attn_scales");
    if (as && (!cJSON_IsArray(as) || cJSON_GetArraySize(as) != 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: config attn_scales must be empty (attention inside the levels is "
                                           "not implemented)");
    if (!cq_cfg_get(&g, "temperal_downsample")) {
        static const bool def[3] = {false, true, true};
        if (c->n_mult != 4) return cq_fail(CQ_ERR_PARSE, "vae: config temperal_downsample is missing");
        memcpy(c->tdown, def, sizeof def);
        return CQ_OK;
    }
    /* its length sets the reference's spatial factor (2^len), so it must match the levels exactly */
    return json_tdown(j, c->n_mult - 1, true, c->tdown);
}

static cq_status parse_json(const cJSON *j, void *out) {
    const qv_read *r = out;
    qv_json *c = r->c;
    float **mean = r->mean, **std = r->std;
    const cq_cfg g = {j, "vae", ""};
    const cJSON *cls = cq_cfg_get(&g, "_class_name");
    c->kind = cJSON_IsString(cls) && strcmp(cls->valuestring, "AutoencoderKLQwenImage") == 0 ? CQ_QI21_VAE_QIMAGE
                                                                                                : CQ_QI21_VAE_QI21;
    if (c->kind == CQ_QI21_VAE_QI21 && cJSON_IsString(cls) && strcmp(cls->valuestring, "AutoencoderKLQwenImage21"))
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: config is for '%s', not AutoencoderKLQwenImage21 or "
                                           "AutoencoderKLQwenImage", cls->valuestring);
    CQ_TRY(c->kind == CQ_QI21_VAE_QIMAGE ? parse_qimage(j, c) : parse_qi21(j, c));
    if ((int64_t)c->decoder_base_dim * c->mult[c->n_mult - 1] > (1 << 16) || (int64_t)c->base_dim * 64 > (1 << 16))
        return cq_fail(CQ_ERR_PARSE, "vae: config layer widths are implausibly large");
    /* dropout has no effect at inference, nor attn_scales on the residual layout */
    int sf;
    CQ_TRY(json_int(j, "scale_factor_spatial", 0, 0, 1 << 20, &sf));
    if (sf && sf != (1 << (c->n_mult - 1)) * c->patch)
        return cq_fail(CQ_ERR_PARSE, "vae: config scale_factor_spatial %d, but %d levels and patch %d make %d", sf,
                       c->n_mult, c->patch, (1 << (c->n_mult - 1)) * c->patch);
    if (!mean || !std) return CQ_OK;
    CQ_TRY(json_floats(j, "latents_mean", c->z_dim, mean));
    CQ_TRY(json_floats(j, "latents_std", c->z_dim, std));
    for (int i = 0; i < c->z_dim; i++)
        if ((*std)[i] == 0.0f) return cq_fail(CQ_ERR_PARSE, "vae: config latents_std[%d] is zero", i);
    return CQ_OK;
}

static cq_status parse_config(const cq_cmf *cmf, const char *prefix, qv_json *c, float **mean, float **std) {
    return cq_cfg_read(cmf, prefix, "vae", parse_json, &(qv_read){c, mean, std});
}

cq_status cq_qi21_vae_parse_geometry(const cq_cmf *cmf, const char *prefix, cq_qi21_vae_geometry *g) {
    memset(g, 0, sizeof *g);
    return parse_config(cmf, prefix, g, NULL, NULL);
}

/* ---- weights --------------------------------------------------------------------------- */
typedef struct loader {
    cq_qi21_vae *v;
    vw_loader w;      /* every tensor is checked against the table (models/tables.h) */
    cq_tt_list table;
} loader;

static cq_status read_host(const loader *L, const char *name, int64_t n, float **out) {
    return vw_read_host(&L->w, name, n, out);
}

static cq_status upload_f32(cq_qi21_vae *v, const float *host, int64_t rows, int64_t cols, cq_tensor **out) {
    return vw_upload_f32(&v->st, host, rows, cols, out);
}

static cq_status load_conv(const loader *L, const char *name, int cin, int cout, int k, qv_conv *c) {
    return vw_load_conv(&L->w, name, cin, cout, k, c);
}

/* RMS_norm gamma ([C, 1, 1(, 1)] in the file). F.normalize(x) * sqrt(C) is
 * x / rms(x), so the gamma goes to the rmsnorm op as it is. */
static cq_status load_gamma(const loader *L, const char *name, int C, cq_tensor **out) {
    return vw_load_vec(&L->w, name, C, out);
}

static cq_status load_res(const loader *L, const char *name, int cin, int cout, qv_res *r) {
    char n[400];
    CQ_TRY(vw_name(n, sizeof n, "%s.norm1.gamma", name));
    CQ_TRY(load_gamma(L, n, cin, &r->g1));
    CQ_TRY(vw_name(n, sizeof n, "%s.conv1", name));
    CQ_TRY(load_conv(L, n, cin, cout, 3, &r->c1));
    CQ_TRY(vw_name(n, sizeof n, "%s.norm2.gamma", name));
    CQ_TRY(load_gamma(L, n, cout, &r->g2));
    CQ_TRY(vw_name(n, sizeof n, "%s.conv2", name));
    CQ_TRY(load_conv(L, n, cout, cout, 3, &r->c2));
    return vw_load_shortcut(&L->w, name, cin, cout, &r->has_sc, &r->sc);
}

/* Single-head attention: norm gamma, to_qkv split into q/k/v [C, C] F32
 * matrices (rows [0, C), [C, 2C), [2C, 3C)), proj as a 1x1 kernel. */
static cq_status load_attn(const loader *L, const char *name, int C, vs_attn_w *a, qv_conv *proj) {
    char n[400];
    CQ_TRY(vw_name(n, sizeof n, "%s.norm.gamma", name));
    cq_tensor *g;
    CQ_TRY(load_gamma(L, n, C, &g));
    a->gamma = g;
    float *w = NULL, *b = NULL;
    CQ_TRY(vw_name(n, sizeof n, "%s.to_qkv.weight", name));
    cq_status s = read_host(L, n, (int64_t)3 * C * C, &w);
    CQ_TRY(vw_name(n, sizeof n, "%s.to_qkv.bias", name));
    if (s == CQ_OK) s = read_host(L, n, (int64_t)3 * C, &b);
    cq_tensor *t[6] = {0};
    for (int i = 0; i < 3 && s == CQ_OK; i++) s = upload_f32(L->v, w + (size_t)i * C * C, C, C, &t[i]);
    for (int i = 0; i < 3 && s == CQ_OK; i++) s = upload_f32(L->v, b + (size_t)i * C, 1, C, &t[3 + i]);
    cq_free(w);
    cq_free(b);
    CQ_TRY(s);
    a->wq = t[0];
    a->wk = t[1];
    a->wv = t[2];
    a->bq = t[3];
    a->bk = t[4];
    a->bv = t[5];
    CQ_TRY(vw_name(n, sizeof n, "%s.proj", name));
    CQ_TRY(load_conv(L, n, C, C, 1, proj));
    if (!cq_backend_runs(L->v->be, CQ_OP_MATMUL, proj->w.dtype, CQ_DTYPE_F32))
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: '%s%s.proj.weight' is %s, which backend %s does not multiply with",
                       L->w.prefix, name, cq_dtype_name(proj->w.dtype), cq_backend_name(L->v->be));
    a->wo = &proj->w;
    a->bo = proj->b;
    return CQ_OK;
}

static cq_status load_mid(const loader *L, const char *coder, int C, qv_coder *c, qv_conv *proj) {
    char n[400];
    for (int i = 0; i < 2; i++) {
        CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.resnets.%d", coder, i));
        CQ_TRY(load_res(L, n, C, C, &c->mid[i]));
    }
    CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.attentions.0", coder));
    return load_attn(L, n, C, &c->attn, proj);
}

/* A level's residual blocks and its resampler's conv (to rs_cout channels). */
static cq_status load_level(const loader *L, const qv_json *c, bool encoder, int i, int rs_cout, qv_level *lv) {
    char n[400], b[300];
    lv->res = cq_calloc((size_t)lv->n_res, sizeof *lv->res);
    if (!lv->res) return CQ_ERR_NOMEM;
    for (int j = 0; j < lv->n_res; j++) {
        CQ_TRY(cq_qi21_vae_block_name(c, encoder, i, j, n, sizeof n));
        CQ_TRY(load_res(L, n, j ? lv->cout : lv->cin, lv->cout, &lv->res[j]));
    }
    if (lv->resample) {
        CQ_TRY(cq_qi21_vae_block_name(c, encoder, i, -1, b, sizeof b));
        CQ_TRY(vw_name(n, sizeof n, "%s.resample.1", b));
        CQ_TRY(load_conv(L, n, lv->cout, rs_cout, 3, &lv->rs));
    }
    return CQ_OK;
}

static cq_status load_all(const loader *L, const qv_json *c) {
    cq_qi21_vae *v = L->v;
    const int nl = c->n_mult;
    const bool shortcuts = c->kind == CQ_QI21_VAE_QI21;
    cq_qi21_vae_widths wd;
    cq_qi21_vae_get_widths(c, &wd);
    const int *de = wd.enc;
    /* encoder: optional (text to image never encodes), but all of it or none */
    bool enc_in;
    CQ_TRY(vw_has_encoder(&L->w, true, &enc_in));
    v->cfg.has_encoder = enc_in;
    qv_coder *e = &v->enc;
    e->n_levels = enc_in ? nl : 0;
    if (enc_in) CQ_TRY(load_conv(L, "encoder.conv_in", c->in_channels, de[0], 3, &e->conv_in));
    for (int i = 0; enc_in && i < nl; i++) {
        qv_level *lv = &e->lv[i];
        bool last = i == nl - 1;
        lv->cin = de[i];
        lv->cout = de[i + 1];
        lv->n_res = c->num_res_blocks;
        lv->resample = !last;
        lv->ft = !last && c->tdown[i] ? 2 : 1;
        lv->fs = last ? 1 : 2;
        lv->shortcut = shortcuts;
        if (shortcuts && (int64_t)lv->cin * lv->ft * lv->fs * lv->fs % lv->cout)
            return cq_fail(CQ_ERR_PARSE, "vae: config encoder level %d folds %d channels into %d (not a whole group)", i,
                           lv->cin * lv->ft * lv->fs * lv->fs, lv->cout);
        CQ_TRY(load_level(L, c, true, i, lv->cout, lv));
    }
    if (enc_in) {
        CQ_TRY(load_mid(L, "encoder", de[nl], e, &e->attn_proj));
        CQ_TRY(load_gamma(L, "encoder.norm_out.gamma", de[nl], &e->norm_out));
        CQ_TRY(load_conv(L, "encoder.conv_out", de[nl], 2 * c->z_dim, 3, &e->conv_out));
        CQ_TRY(load_conv(L, "quant_conv", 2 * c->z_dim, 2 * c->z_dim, 1, &v->quant));
    }
    /* decoder */
    qv_coder *d = &v->dec;
    d->n_levels = nl;
    CQ_TRY(load_conv(L, "post_quant_conv", c->z_dim, c->z_dim, 1, &v->post_quant));
    CQ_TRY(load_conv(L, "decoder.conv_in", c->z_dim, wd.dec_mid, 3, &d->conv_in));
    CQ_TRY(load_mid(L, "decoder", wd.dec_mid, d, &d->attn_proj));
    for (int i = 0; i < nl; i++) {
        qv_level *lv = &d->lv[i];
        bool up = i != nl - 1;
        lv->cin = wd.dec_in[i];
        lv->cout = wd.dec_out[i];
        lv->n_res = c->num_res_blocks + 1;
        lv->resample = up;
        lv->shortcut = up && shortcuts;
        lv->ft = up && c->tdown[nl - 2 - i] ? 2 : 1;
        lv->fs = 2;
        if (lv->shortcut && (int64_t)lv->cout * lv->ft * lv->fs * lv->fs % lv->cin)
            return cq_fail(CQ_ERR_PARSE, "vae: config decoder level %d repeats %d channels into %d (not a whole repeat)",
                           i, lv->cin, lv->cout * lv->ft * lv->fs * lv->fs);
        if (up && wd.up_out[i] < 1)
            return cq_fail(CQ_ERR_PARSE, "vae: config decoder level %d halves %d channels to none", i, lv->cout);
        CQ_TRY(load_level(L, c, false, i, wd.up_out[i], lv));
    }
    CQ_TRY(load_gamma(L, "decoder.norm_out.gamma", wd.dec_out[nl - 1], &d->norm_out));
    return load_conv(L, "decoder.conv_out", wd.dec_out[nl - 1], c->out_channels, 3, &d->conv_out);
}

cq_status cq_qi21_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qi21_vae **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_qi21_vae_load: out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_qi21_vae_load: cmf and backend are required");
    if (!prefix) prefix = "";
    cq_qi21_vae *v = cq_calloc(1, sizeof *v);
    if (!v) return CQ_ERR_NOMEM;
    v->be = be;
    v->st.be = be;
    qv_json c;
    memset(&c, 0, sizeof c);
    cq_status s = parse_config(cmf, prefix, &c, &v->mean, &v->std);
    loader L = {v, {&v->st, cmf, prefix, NULL, "vae"}, {0}};
    L.w.table = &L.table;
    if (s == CQ_OK) s = cq_qi21_vae_tensors(&c, prefix, &L.table);
    if (s == CQ_OK) s = load_all(&L, &c);
    cq_tt_list_free(&L.table);
    if (s != CQ_OK) {
        cq_qi21_vae_free(v);
        return s;
    }
    cq_qi21_vae_config *k = &v->cfg;
    k->kind = c.kind;
    k->z_dim = c.z_dim;
    k->patch_size = c.patch;
    k->image_channels = c.out_channels / (c.patch * c.patch);
    k->spatial_factor = (1 << (c.n_mult - 1)) * c.patch;
    k->base_dim = c.base_dim;
    k->decoder_base_dim = c.decoder_base_dim;
    k->num_res_blocks = c.num_res_blocks;
    k->n_levels = c.n_mult;
    k->latents_mean = v->mean;
    k->latents_std = v->std;
    if (c.kind == CQ_QI21_VAE_QIMAGE) {
        if (!(v->std_inv = cq_mallocn((size_t)c.z_dim, sizeof(float)))) {
            cq_qi21_vae_free(v);
            return CQ_ERR_NOMEM;
        }
        for (int i = 0; i < c.z_dim; i++) v->std_inv[i] = 1.0f / v->std[i];
    }
    v->in_channels = c.in_channels;
    v->out_channels = c.out_channels;
    *out = v;
    return CQ_OK;
}

static void free_coder(qv_coder *c) {
    for (int i = 0; i < c->n_levels; i++) cq_free(c->lv[i].res);
}

void cq_qi21_vae_free(cq_qi21_vae *v) {
    if (!v) return;
    vw_store_free(&v->st);
    free_coder(&v->enc);
    free_coder(&v->dec);
    cq_free(v->mean);
    cq_free(v->std);
    cq_free(v->std_inv);
    cq_free(v);
}

const cq_qi21_vae_config *cq_qi21_vae_get_config(const cq_qi21_vae *v) { return v ? &v->cfg : NULL; }
