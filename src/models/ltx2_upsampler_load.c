/*
 * ltx2_upsampler_load.c — LTX-2's spatial latent upscaler (ltx2_upsampler.h):
 * the config, the weights bound through the tensor table
 * (ltx2_upsampler_tensors.c) with every kernel flattened to the op layer's
 * [cout, cin * taps], and the video VAE's latent statistics the pipeline
 * wraps it in.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/ltx2_upsampler_impl.h"
#include "models/tables.h"

#define WHO "ltx2_upsampler"

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
static cq_status parse_json(const cJSON *j, void *out) {
    cq_ltx2_ups_config *c = out;
    const cq_cfg g = {j, WHO, ""};
    if (!cJSON_IsObject(j)) return cq_fail(CQ_ERR_PARSE, WHO ": config is not a JSON object");
    CQ_TRY(cq_cfg_class(&g, "LTX2LatentUpsamplerModel", false));
    memset(c, 0, sizeof *c);
    int dims;
    CQ_TRY(cq_cfg_int(&g, "dims", 3, 1, 3, &dims));
    if (dims != 3)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config dims is %d: only 3 (3-D convolutions around the per-frame "
                       "upsampler, as LTX-2.3 / 2.5 have) is supported", dims);
    bool spatial, temporal, rational;
    CQ_TRY(cq_cfg_bool(&g, "spatial_upsample", true, &spatial));
    CQ_TRY(cq_cfg_bool(&g, "temporal_upsample", false, &temporal));
    if (temporal)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config temporal_upsample is true: the temporal upscaler (3-D pixel "
                       "shuffle, first frame dropped) is not supported; only the spatial x2 one is");
    if (!spatial)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config spatial_upsample is false: only the spatial x2 upscaler is "
                       "supported");
    /* the class default is the rational resampler, so absence means it */
    CQ_TRY(cq_cfg_bool(&g, "use_rational_resampler", true, &rational));
    if (rational)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config use_rational_resampler is %s: LTX-2.0's rational resampler "
                       "(shuffle by the numerator, blur-downsample by the denominator) is not supported; LTX-2.3 / "
                       "2.5 set it false",
                       cq_cfg_get(&g, "use_rational_resampler") ? "true" : "absent (the class default, true)");
    CQ_TRY(cq_cfg_int(&g, "in_channels", 128, 1, 65536, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "mid_channels", 1024, CQ_LTX2_UPS_GROUPS, 65536, &c->mid_channels));
    if (c->mid_channels % CQ_LTX2_UPS_GROUPS)
        return cq_fail(CQ_ERR_PARSE, WHO ": config mid_channels %d must be a multiple of %d (GroupNorm's groups)",
                       c->mid_channels, CQ_LTX2_UPS_GROUPS);
    CQ_TRY(cq_cfg_int(&g, "num_blocks_per_stage", 4, 0, CQ_LTX2_UPS_MAX_BLOCKS, &c->n_blocks));
    return CQ_OK;
}

cq_status cq_ltx2_ups_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_ups_config *c) {
    return cq_cfg_read(cmf, prefix, WHO, parse_json, c);
}

cq_status cq_ltx2_ups_parse_config_text(const char *json, cq_ltx2_ups_config *c) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO ": config is not valid JSON");
    cq_status s = parse_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
/* The kernel `name` (checked against the table) bound as [cout, cin * taps]: PyTorch's layout flattened, which is
 * the op layer's conv3d weight (a 2-D kernel is conv3d's with kt = 1). */
static cq_status bind_kernel(const cq_tt_binder *b, cq_tensor *out, const char *name) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s", name));
    cq_tensor_view flat = *v;
    flat.ndim = 2;
    flat.shape[1] = v->nelem / v->shape[0];
    for (int d = 2; d < CQ_MAX_DIMS; d++) flat.shape[d] = 0;
    CQ_TRY(cq_tensor_bind_weight(b->be, &flat, out));
    cq_status s = cq_tt_held_add(b->held, out);
    if (s != CQ_OK) memset(out, 0, sizeof *out);
    return s;
}

static cq_status bind_conv(const cq_tt_binder *b, lu_conv *c, const char *p, const char *stem) {
    char n[256];
    snprintf(n, sizeof n, "%s%s.weight", p, stem);
    CQ_TRY(bind_kernel(b, &c->w, n));
    return cq_tt_bind_vector(b, &c->b, "%s%s.bias", p, stem);
}

static cq_status bind_norm(const cq_tt_binder *b, lu_norm *nm, const char *p, const char *stem) {
    CQ_TRY(cq_tt_bind_vector(b, &nm->g, "%s%s.weight", p, stem));
    return cq_tt_bind_vector(b, &nm->b, "%s%s.bias", p, stem);
}

static cq_status bind_res(const cq_tt_binder *b, lu_res *r, const char *p, const char *stage, int i) {
    char n[128];
    snprintf(n, sizeof n, "%s.%d.conv1", stage, i);
    CQ_TRY(bind_conv(b, &r->c1, p, n));
    snprintf(n, sizeof n, "%s.%d.norm1", stage, i);
    CQ_TRY(bind_norm(b, &r->n1, p, n));
    snprintf(n, sizeof n, "%s.%d.conv2", stage, i);
    CQ_TRY(bind_conv(b, &r->c2, p, n));
    snprintf(n, sizeof n, "%s.%d.norm2", stage, i);
    return bind_norm(b, &r->n2, p, n);
}

static cq_status bind_all(cq_ltx2_ups *m, const cq_tt_binder *b, const char *p) {
    CQ_TRY(bind_conv(b, &m->initial, p, "initial_conv"));
    CQ_TRY(bind_norm(b, &m->initial_norm, p, "initial_norm"));
    for (int i = 0; i < m->cfg.n_blocks; i++) CQ_TRY(bind_res(b, &m->pre[i], p, "res_blocks", i));
    CQ_TRY(bind_conv(b, &m->up, p, "upsampler.0"));
    for (int i = 0; i < m->cfg.n_blocks; i++) CQ_TRY(bind_res(b, &m->post[i], p, "post_upsample_res_blocks", i));
    return bind_conv(b, &m->final, p, "final_conv");
}

cq_status cq_ltx2_ups_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_ups **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2_ups *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_ltx2_ups_parse_config(cmf, prefix, &m->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_ups_tensors(&m->cfg, prefix, &table);
    const size_t nb = m->cfg.n_blocks ? (size_t)m->cfg.n_blocks : 1;
    if (s == CQ_OK && (!(m->pre = cq_calloc(nb, sizeof(lu_res))) || !(m->post = cq_calloc(nb, sizeof(lu_res)))))
        s = CQ_ERR_NOMEM;
    const cq_tt_binder b = {WHO, &table, cmf, be, &m->held};
    if (s == CQ_OK) s = bind_all(m, &b, prefix);
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_ups_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_ltx2_ups_free(cq_ltx2_ups *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    cq_free(m->pre);
    cq_free(m->post);
    cq_free(m);
}

const cq_ltx2_ups_config *cq_ltx2_ups_get_config(const cq_ltx2_ups *m) { return m ? &m->cfg : NULL; }

void cq_ltx2_ups_set_tap(cq_ltx2_ups *m, cq_ltx2_ups_tap_fn fn, void *user) {
    if (!m) return;
    m->tap = fn;
    m->tap_user = user;
}

/* ------------------------------------------------------------------------ */
/* The VAE's latent statistics                                              */
/* ------------------------------------------------------------------------ */
static cq_status read_stat(const cq_cmf *cmf, const char *prefix, const char *leaf, int C, float *dst) {
    char name[256];
    snprintf(name, sizeof name, "%s%s", prefix, leaf);
    const uint64_t shape[1] = {(uint64_t)C};
    cq_tt_list l = {0};
    cq_status s = cq_tt_add(&l, "", CQ_TT_VECTOR, true, 0.0f, 1, shape, "%s", name);
    const cq_tensor_view *v = NULL;
    if (s == CQ_OK) s = cq_tt_get(WHO, &l, cmf, &v, "%s", name);
    if (s == CQ_OK) s = cq_tt_read_vector(WHO, v, dst, (size_t)C);
    cq_tt_list_free(&l);
    for (int i = 0; s == CQ_OK && i < C; i++)
        if (!isfinite(dst[i]))
            s = cq_fail(CQ_ERR_NUMERIC, WHO ": %s[%d] is not finite", name, i);
    return s;
}

cq_status cq_ltx2_latent_stats_read(const cq_cmf *cmf, const char *prefix, int C, float *mean, float *std) {
    if (!cmf || !mean || !std) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": latent statistics need a pack and outputs");
    if (C < 1 || C > 65536) return cq_fail(CQ_ERR_SHAPE, WHO ": %d latent channels (1 .. 65536)", C);
    if (!prefix) prefix = "";
    CQ_TRY(read_stat(cmf, prefix, "latents_mean", C, mean));
    CQ_TRY(read_stat(cmf, prefix, "latents_std", C, std));
    for (int i = 0; i < C; i++)
        if (!(std[i] > 0))
            return cq_fail(CQ_ERR_NUMERIC, WHO ": %slatents_std[%d] is %g (must be positive)", prefix, i,
                           (double)std[i]);
    return CQ_OK;
}
