/*
 * flux_vae_load.c — the Flux VAE's config (from `<prefix>config_json`) and
 * weight binding (kit/vae_weights.c): kernels and the attention matrices
 * stay in their file codec, biases become F32 backend tensors, the group
 * norms' weights host f32 arrays the store keeps (their statistics are
 * merged on the host).
 *
 * Widths, as diffusers' Encoder and Decoder build them from
 * block_out_channels b[0..n):
 *   encoder: conv_in -> b[0]; level i: layers_per_block resnets b[i-1] (b[0]
 *     for i = 0) -> b[i], then a stride-2 conv except on the last level; mid
 *     block at b[n-1]; conv_norm_out, conv_out -> 2 * latent_channels;
 *   decoder: conv_in latent -> b[n-1]; mid block at b[n-1]; level i:
 *     layers_per_block + 1 resnets r[i-1] (r[0] for i = 0) -> r[i] with r =
 *     reversed(b), then nearest x2 + 3x3 conv except on the last level;
 *     conv_norm_out at b[0], conv_out -> out_channels.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/flux_vae_impl.h"
#include "models/kit/config.h"
#include "models/tables.h"

/* ---- config ---------------------------------------------------------------------------- */
/* A member that is absent or the string `want`. */
static cq_status need_string(const cq_cfg *g, const char *key, const char *want) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it) return CQ_OK;
    if (!cJSON_IsString(it)) return cq_fail(CQ_ERR_PARSE, "vae: config %s must be a string", key);
    if (strcmp(it->valuestring, want) != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: config %s is '%s'; this model runs '%s' only", key, it->valuestring,
                       want);
    return CQ_OK;
}

/* A member that is absent or an array of n strings, each `want`. */
static cq_status need_types(const cq_cfg *g, const char *key, int n, const char *want) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it) return CQ_OK;
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != n)
        return cq_fail(CQ_ERR_PARSE, "vae: config %s must list %d block types (one per block_out_channels entry)", key, n);
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(it, i);
        if (!cJSON_IsString(t)) return cq_fail(CQ_ERR_PARSE, "vae: config %s[%d] is not a string", key, i);
        if (strcmp(t->valuestring, want) != 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "vae: config %s[%d] is '%s'; this model runs '%s' blocks only", key, i,
                           t->valuestring, want);
    }
    return CQ_OK;
}

static cq_status parse_json(const cJSON *j, void *out) {
    cq_flux_vae_config *c = out;
    memset(c, 0, sizeof *c);
    const cq_cfg g = {j, "vae", ""};
    CQ_TRY(cq_cfg_class(&g, "AutoencoderKL", true));
    CQ_TRY(cq_cfg_int(&g, "in_channels", 3, 1, 64, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "out_channels", 3, 1, 64, &c->out_channels));
    CQ_TRY(cq_cfg_int(&g, "latent_channels", 4, 1, 1024, &c->latent_channels));
    CQ_TRY(cq_cfg_int(&g, "layers_per_block", 1, 1, 16, &c->layers_per_block));
    CQ_TRY(cq_cfg_int(&g, "norm_num_groups", 32, 1, 1024, &c->norm_num_groups));
    CQ_TRY(cq_cfg_ints(&g, "block_out_channels", 1, CQ_FLUX_VAE_MAX_LEVELS, 1, 4096, c->block_out_channels,
                       &c->n_levels));
    if (c->n_levels == 0) {
        c->n_levels = 1; /* diffusers' default (64,) */
        c->block_out_channels[0] = 64;
    }
    for (int i = 0; i < c->n_levels; i++)
        if (c->block_out_channels[i] % c->norm_num_groups)
            return cq_fail(CQ_ERR_PARSE, "vae: config norm_num_groups %d does not divide block_out_channels[%d] = %d",
                           c->norm_num_groups, i, c->block_out_channels[i]);
    CQ_TRY(need_string(&g, "act_fn", "silu"));
    CQ_TRY(need_types(&g, "down_block_types", c->n_levels, "DownEncoderBlock2D"));
    CQ_TRY(need_types(&g, "up_block_types", c->n_levels, "UpDecoderBlock2D"));
    double sf, sh;
    CQ_TRY(cq_cfg_num(&g, "scaling_factor", 0.18215, 0.0, true, 1e6, &sf));
    CQ_TRY(cq_cfg_num(&g, "shift_factor", 0.0, -1e6, false, 1e6, &sh));
    c->scaling_factor = (float)sf;
    c->shift_factor = (float)sh;
    if (c->scaling_factor == 0.0f) return cq_fail(CQ_ERR_PARSE, "vae: config scaling_factor rounds to zero in f32");
    static const char *const stats[] = {"latents_mean", "latents_std"};
    for (int i = 0; i < 2; i++)
        if (cq_cfg_get(&g, stats[i]))
            return cq_fail(CQ_ERR_UNSUPPORTED, "vae: config %s is set; this model normalises latents with "
                                               "scaling_factor and shift_factor only", stats[i]);
    CQ_TRY(cq_cfg_bool(&g, "use_quant_conv", true, &c->use_quant_conv));
    CQ_TRY(cq_cfg_bool(&g, "use_post_quant_conv", true, &c->use_post_quant_conv));
    CQ_TRY(cq_cfg_bool(&g, "mid_block_add_attention", true, &c->mid_attention));
    c->spatial_factor = 1 << (c->n_levels - 1);
    return CQ_OK;
}

cq_status cq_flux_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_flux_vae_config *c) {
    return cq_cfg_read(cmf, prefix, "vae", parse_json, c);
}

/* ---- weights --------------------------------------------------------------------------- */
typedef struct loader {
    cq_flux_vae *v;
    vw_loader w;
    cq_tt_list table;
} loader;

/* A GroupNorm `name` ({weight, bias} [C]) of the config's groups, eps 1e-6. */
static cq_status load_gn(const loader *L, const char *name, int C, vs_gn_w *gn) {
    char n[400];
    float *w, *b;
    CQ_TRY(vw_name(n, sizeof n, "%s.weight", name));
    CQ_TRY(vw_read_kept(&L->w, n, C, &w));
    CQ_TRY(vw_name(n, sizeof n, "%s.bias", name));
    CQ_TRY(vw_read_kept(&L->w, n, C, &b));
    *gn = (vs_gn_w){.gamma = w, .beta = b, .groups = L->v->cfg.norm_num_groups, .eps = 1e-6f};
    return CQ_OK;
}

static cq_status load_res(const loader *L, const char *name, int cin, int cout, fv_res *r) {
    char n[400];
    CQ_TRY(vw_name(n, sizeof n, "%s.norm1", name));
    CQ_TRY(load_gn(L, n, cin, &r->n1));
    CQ_TRY(vw_name(n, sizeof n, "%s.conv1", name));
    CQ_TRY(vw_load_conv(&L->w, n, cin, cout, 3, &r->c1));
    CQ_TRY(vw_name(n, sizeof n, "%s.norm2", name));
    CQ_TRY(load_gn(L, n, cout, &r->n2));
    CQ_TRY(vw_name(n, sizeof n, "%s.conv2", name));
    CQ_TRY(vw_load_conv(&L->w, n, cout, cout, 3, &r->c2));
    return vw_load_shortcut(&L->w, name, cin, cout, &r->has_sc, &r->sc);
}

/* The mid block: resnets 0 and 1 and, with mid_block_add_attention, the
 * attention between them (group_norm, to_q/to_k/to_v, to_out.0). */
static cq_status load_mid(const loader *L, const char *coder, int C, fv_coder *c) {
    char n[400];
    for (int i = 0; i < 2; i++) {
        CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.resnets.%d", coder, i));
        CQ_TRY(load_res(L, n, C, C, &c->mid[i]));
    }
    c->attn = L->v->cfg.mid_attention;
    if (!c->attn) return CQ_OK;
    CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.attentions.0.group_norm", coder));
    CQ_TRY(load_gn(L, n, C, &c->attn_gn));
    static const char *const proj[4] = {"to_q", "to_k", "to_v", "to_out.0"};
    cq_tensor *w[4] = {&c->wq, &c->wk, &c->wv, &c->wo};
    cq_tensor *b[4];
    for (int i = 0; i < 4; i++) {
        CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.attentions.0.%s.weight", coder, proj[i]));
        CQ_TRY(vw_load_matrix(&L->w, n, w[i]));
        CQ_TRY(vw_name(n, sizeof n, "%s.mid_block.attentions.0.%s.bias", coder, proj[i]));
        CQ_TRY(vw_load_vec(&L->w, n, C, &b[i]));
    }
    c->attn_w = (vs_attn_w){.gamma = NULL, .wq = &c->wq, .wk = &c->wk, .wv = &c->wv, .bq = b[0], .bk = b[1],
                            .bv = b[2], .wo = &c->wo, .bo = b[3]};
    return CQ_OK;
}

static cq_status load_level(const loader *L, const char *name, const char *rs_name, fv_level *lv) {
    char n[400];
    lv->res = cq_calloc((size_t)lv->n_res, sizeof *lv->res);
    if (!lv->res) return CQ_ERR_NOMEM;
    for (int j = 0; j < lv->n_res; j++) {
        CQ_TRY(vw_name(n, sizeof n, "%s.resnets.%d", name, j));
        CQ_TRY(load_res(L, n, j ? lv->cout : lv->cin, lv->cout, &lv->res[j]));
    }
    if (lv->resample) {
        CQ_TRY(vw_name(n, sizeof n, "%s.%s.0.conv", name, rs_name));
        CQ_TRY(vw_load_conv(&L->w, n, lv->cout, lv->cout, 3, &lv->rs));
    }
    return CQ_OK;
}

static cq_status load_all(const loader *L) {
    cq_flux_vae *v = L->v;
    const cq_flux_vae_config *c = &v->cfg;
    const int nl = c->n_levels, *b = c->block_out_channels, Z = c->latent_channels;
    char n[400];
    /* the encoder: optional (text to image never encodes), but all of it or none */
    bool enc_in;
    CQ_TRY(vw_has_encoder(&L->w, c->use_quant_conv, &enc_in));
    v->cfg.has_encoder = enc_in;
    fv_coder *e = &v->enc;
    if (enc_in) {
        CQ_TRY(vw_load_conv(&L->w, "encoder.conv_in", c->in_channels, b[0], 3, &e->conv_in));
        e->n_levels = nl;
        for (int i = 0; i < nl; i++) {
            fv_level *lv = &e->lv[i];
            lv->cin = i ? b[i - 1] : b[0];
            lv->cout = b[i];
            lv->n_res = c->layers_per_block;
            lv->resample = i != nl - 1;
            CQ_TRY(vw_name(n, sizeof n, "encoder.down_blocks.%d", i));
            CQ_TRY(load_level(L, n, "downsamplers", lv));
        }
        CQ_TRY(load_mid(L, "encoder", b[nl - 1], e));
        CQ_TRY(load_gn(L, "encoder.conv_norm_out", b[nl - 1], &e->norm_out));
        CQ_TRY(vw_load_conv(&L->w, "encoder.conv_out", b[nl - 1], 2 * Z, 3, &e->conv_out));
        if (c->use_quant_conv) CQ_TRY(vw_load_conv(&L->w, "quant_conv", 2 * Z, 2 * Z, 1, &v->quant));
    }
    /* the decoder */
    fv_coder *d = &v->dec;
    if (c->use_post_quant_conv) CQ_TRY(vw_load_conv(&L->w, "post_quant_conv", Z, Z, 1, &v->post_quant));
    CQ_TRY(vw_load_conv(&L->w, "decoder.conv_in", Z, b[nl - 1], 3, &d->conv_in));
    CQ_TRY(load_mid(L, "decoder", b[nl - 1], d));
    d->n_levels = nl;
    for (int i = 0; i < nl; i++) {
        fv_level *lv = &d->lv[i];
        lv->cin = b[nl - 1 - (i ? i - 1 : 0)];
        lv->cout = b[nl - 1 - i];
        lv->n_res = c->layers_per_block + 1;
        lv->resample = i != nl - 1;
        CQ_TRY(vw_name(n, sizeof n, "decoder.up_blocks.%d", i));
        CQ_TRY(load_level(L, n, "upsamplers", lv));
    }
    CQ_TRY(load_gn(L, "decoder.conv_norm_out", b[0], &d->norm_out));
    return vw_load_conv(&L->w, "decoder.conv_out", b[0], c->out_channels, 3, &d->conv_out);
}

cq_status cq_flux_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_flux_vae **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_flux_vae_load: out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_flux_vae_load: cmf and backend are required");
    if (!prefix) prefix = "";
    cq_flux_vae *v = cq_calloc(1, sizeof *v);
    if (!v) return CQ_ERR_NOMEM;
    v->be = be;
    v->st.be = be;
    cq_status s = cq_flux_vae_parse_config(cmf, prefix, &v->cfg);
    loader L = {v, {&v->st, cmf, prefix, NULL, "vae"}, {0}};
    L.w.table = &L.table;
    if (s == CQ_OK) s = cq_flux_vae_tensors(&v->cfg, prefix, &L.table);
    if (s == CQ_OK) s = load_all(&L);
    cq_tt_list_free(&L.table);
    if (s != CQ_OK) {
        cq_flux_vae_free(v);
        return s;
    }
    *out = v;
    return CQ_OK;
}

static void free_coder(fv_coder *c) {
    for (int i = 0; i < c->n_levels; i++) cq_free(c->lv[i].res);
}

void cq_flux_vae_free(cq_flux_vae *v) {
    if (!v) return;
    vw_store_free(&v->st);
    free_coder(&v->enc);
    free_coder(&v->dec);
    cq_free(v);
}

const cq_flux_vae_config *cq_flux_vae_get_config(const cq_flux_vae *v) { return v ? &v->cfg : NULL; }
