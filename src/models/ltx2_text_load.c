/*
 * ltx2_text_load.c — LTX-2.3 / 2.5's text connectors (ltx2_text.h): the
 * config and the weights, bound through the tensor table
 * (ltx2_text_tensors.c). The registers are dequantized to f32 once; the
 * gates' head index per column is built here.
 */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/ltx2_text_impl.h"
#include "models/tables.h"

#define WHO "ltx2_text"

const char *const cq_ltx2_stream_name[CQ_LTX2_STREAMS] = {"video", "audio"};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
static cq_status parse_stream(const cq_cfg *g, int si, cq_ltx2_text_config *c) {
    const char *s = cq_ltx2_stream_name[si];
    cq_ltx2_connector_config *k = &c->conn[si];
    char key[96];
    snprintf(key, sizeof key, "%s_connector_num_attention_heads", s);
    CQ_TRY(cq_cfg_int(g, key, 30, 1, 1024, &k->heads));
    snprintf(key, sizeof key, "%s_connector_attention_head_dim", s);
    CQ_TRY(cq_cfg_int(g, key, 128, 2, 1024, &k->head_dim));
    if (k->head_dim % 2)
        return cq_fail(CQ_ERR_PARSE, WHO ": config %s %d must be even (split RoPE)", key, k->head_dim);
    snprintf(key, sizeof key, "%s_connector_num_layers", s);
    CQ_TRY(cq_cfg_int(g, key, 2, 1, 1024, &k->n_layers));
    /* null is the reference's "no registers" (the masked-attention path), not "the default" */
    snprintf(key, sizeof key, "%s_connector_num_learnable_registers", s);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(g->o, key);
    if (r && (cJSON_IsNull(r) || (cJSON_IsNumber(r) && r->valuedouble == 0.0)))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %s is %s: connectors without learnable registers (an "
                       "attention mask over the pads) are not supported", key, cJSON_IsNull(r) ? "null" : "0");
    CQ_TRY(cq_cfg_int(g, key, 128, 1, CQ_LTX2_TEXT_MAX_TOKENS, &k->n_registers));
    snprintf(key, sizeof key, "%s_gated_attn", s);
    CQ_TRY(cq_cfg_bool(g, key, false, &k->gated));
    if ((int64_t)k->heads * k->head_dim > 65536)
        return cq_fail(CQ_ERR_PARSE, WHO ": config %s connector width %d x %d exceeds 65536", s, k->heads,
                       k->head_dim);
    k->dim = k->heads * k->head_dim;
    snprintf(key, sizeof key, "%s_hidden_dim", s);
    CQ_TRY(cq_cfg_int(g, key, si == CQ_LTX2_VIDEO ? 4096 : 2048, 1, 65536, &c->proj_dim[si]));
    if (c->proj_dim[si] != k->dim)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %s %d differs from the %s connector's width %d x %d = %d "
                       "(the projection feeds the connector)", key, c->proj_dim[si], s, k->heads, k->head_dim,
                       k->dim);
    return CQ_OK;
}

static cq_status parse_json(const cJSON *j, void *out) {
    cq_ltx2_text_config *c = out;
    const cq_cfg g = {j, WHO, ""};
    if (!cJSON_IsObject(j)) return cq_fail(CQ_ERR_PARSE, WHO ": config is not a JSON object");
    CQ_TRY(cq_cfg_class(&g, "LTX2TextConnectors", false));
    memset(c, 0, sizeof *c);
    bool pmp;
    CQ_TRY(cq_cfg_bool(&g, "per_modality_projections", false, &pmp));
    if (!pmp)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config per_modality_projections is false (or absent): LTX-2.0's "
                       "single projection with the masked mean/range norm is not supported; LTX-2.3 / 2.5 project "
                       "per stream");
    const cJSON *rt = cq_cfg_get(&g, "rope_type");
    if (!rt)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config has no rope_type (the default \"interleaved\" is not "
                       "supported; LTX-2.3 / 2.5 use \"split\")");
    if (!cJSON_IsString(rt)) return cq_fail(CQ_ERR_PARSE, WHO ": config rope_type must be a string");
    if (strcmp(rt->valuestring, "split") != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config rope_type is \"%s\"; only \"split\" is supported",
                       rt->valuestring);
    bool causal;
    CQ_TRY(cq_cfg_bool(&g, "causal_temporal_positioning", false, &causal)); /* stored, read by neither reference */
    CQ_TRY(cq_cfg_int(&g, "caption_channels", 3840, 1, 65536, &c->caption_channels));
    CQ_TRY(cq_cfg_int(&g, "text_proj_in_factor", 49, 1, 4096, &c->n_states));
    if ((int64_t)c->caption_channels * c->n_states > (1 << 22))
        return cq_fail(CQ_ERR_PARSE, WHO ": config caption_channels x text_proj_in_factor = %d x %d exceeds %d",
                       c->caption_channels, c->n_states, 1 << 22);
    for (int si = 0; si < CQ_LTX2_STREAMS; si++) CQ_TRY(parse_stream(&g, si, c));
    CQ_TRY(cq_cfg_bool(&g, "proj_bias", false, &c->proj_bias));
    CQ_TRY(cq_cfg_int(&g, "connector_rope_base_seq_len", 4096, 1, 1 << 24, &c->rope_base));
    CQ_TRY(cq_cfg_num(&g, "rope_theta", 10000.0, 1.0, true, 1e9, &c->rope_theta));
    CQ_TRY(cq_cfg_bool(&g, "rope_double_precision", true, &c->rope_f64));
    return CQ_OK;
}

cq_status cq_ltx2_text_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_text_config *c) {
    return cq_cfg_read(cmf, prefix, WHO, parse_json, c);
}

cq_status cq_ltx2_text_parse_config_text(const char *json, cq_ltx2_text_config *c) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO ": config is not valid JSON");
    cq_status s = parse_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
/* The matrix entry `name` [rows, cols] (any codec) as an F32 tensor. */
static cq_status bind_f32(const cq_tt_binder *b, cq_tensor *out, int64_t rows, int64_t cols, const char *name) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s", name));
    float *t = cq_mallocn((size_t)(rows * cols), sizeof(float));
    if (!t) return CQ_ERR_NOMEM;
    cq_status s = cq_tt_read_vector(b->who, v, t, (size_t)(rows * cols));
    if (s == CQ_OK) s = cq_tt_held_upload(b, t, rows, cols, out);
    cq_free(t);
    return s;
}

/* The head index of each of `dim` columns (heads of dh columns), for the gates' column gather. */
static cq_status head_index(const cq_tt_binder *b, int dim, int dh, cq_tensor *out) {
    int32_t *idx = cq_mallocn((size_t)dim, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    for (int i = 0; i < dim; i++) idx[i] = i / dh;
    cq_status s = cq_tensor_alloc(b->be, CQ_DTYPE_I32, 1, (const int64_t[1]){dim}, out);
    if (s == CQ_OK) s = cq_tensor_upload(out, idx, (size_t)dim * sizeof(int32_t));
    if (s == CQ_OK) s = cq_tt_held_add(b->held, out);
    else cq_tensor_free(out);
    cq_free(idx);
    return s;
}

static cq_status bind_stream(cq_ltx2_text *m, const cq_tt_binder *b, const char *p, int si) {
    const cq_ltx2_text_config *c = &m->cfg;
    const cq_ltx2_connector_config *k = &c->conn[si];
    const char *s = cq_ltx2_stream_name[si];
    lt_conn *S = &m->s[si];
    CQ_TRY(cq_tt_bind_weight(b, &S->proj, "%s%s_text_proj_in.weight", p, s));
    if (c->proj_bias) CQ_TRY(cq_tt_bind_vector(b, &S->projb, "%s%s_text_proj_in.bias", p, s));
    char name[200];
    snprintf(name, sizeof name, "%s%s_connector.learnable_registers", p, s);
    CQ_TRY(bind_f32(b, &S->reg, k->n_registers, k->dim, name));
    CQ_TRY(head_index(b, k->dim, k->head_dim, &S->gidx));
    for (int l = 0; l < k->n_layers; l++) {
        lt_block *B = &S->blk[l];
#define W(f, leaf) CQ_TRY(cq_tt_bind_weight(b, &B->f, "%s%s_connector.transformer_blocks.%d." leaf, p, s, l))
#define V(f, leaf) CQ_TRY(cq_tt_bind_vector(b, &B->f, "%s%s_connector.transformer_blocks.%d." leaf, p, s, l))
        W(q, "attn1.to_q.weight");
        V(qb, "attn1.to_q.bias");
        W(k, "attn1.to_k.weight");
        V(kb, "attn1.to_k.bias");
        W(v, "attn1.to_v.weight");
        V(vb, "attn1.to_v.bias");
        W(o, "attn1.to_out.0.weight");
        V(ob, "attn1.to_out.0.bias");
        V(nq, "attn1.norm_q.weight");
        V(nk, "attn1.norm_k.weight");
        if (k->gated) {
            W(gw, "attn1.to_gate_logits.weight");
            V(gb, "attn1.to_gate_logits.bias");
        }
        W(ff1, "ff.net.0.proj.weight");
        V(ff1b, "ff.net.0.proj.bias");
        W(ff2, "ff.net.2.weight");
        V(ff2b, "ff.net.2.bias");
#undef W
#undef V
    }
    return CQ_OK;
}

cq_status cq_ltx2_text_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_text **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2_text *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_ltx2_text_parse_config(cmf, prefix, &m->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_text_tensors(&m->cfg, prefix, &table);
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++)
        if (!(m->s[si].blk = cq_calloc((size_t)m->cfg.conn[si].n_layers, sizeof(lt_block)))) s = CQ_ERR_NOMEM;
    const cq_tt_binder b = {WHO, &table, cmf, be, &m->held};
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++) s = bind_stream(m, &b, prefix, si);
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_text_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_ltx2_text_free(cq_ltx2_text *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    for (int si = 0; si < CQ_LTX2_STREAMS; si++) cq_free(m->s[si].blk);
    cq_free(m);
}

const cq_ltx2_text_config *cq_ltx2_text_get_config(const cq_ltx2_text *m) { return &m->cfg; }

void cq_ltx2_text_set_tap(cq_ltx2_text *m, cq_ltx2_text_tap_fn fn, void *user) {
    if (!m) return;
    m->tap = fn;
    m->tap_user = user;
}
