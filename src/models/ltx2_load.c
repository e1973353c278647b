/*
 * ltx2_load.c — LTX-2's denoiser (ltx2.h): the config and the weights, bound
 * through the tensor table (ltx2_tensors.c). The modulation tables are
 * dequantized to f32 once; the gates' head index per column is built here.
 */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/ltx2_impl.h"
#include "models/tables.h"

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
/* A string member that must be `want` when present. */
static cq_status need_str(const cq_cfg *g, const char *key, const char *want, const char *why) {
    const cJSON *it = cq_cfg_get(g, key);
    if (!it) return CQ_OK;
    if (!cJSON_IsString(it)) return cq_fail(CQ_ERR_PARSE, "ltx2: config %s must be a string", key);
    if (strcmp(it->valuestring, want) != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config %s is \"%s\"; only \"%s\" is supported (%s)", key,
                       it->valuestring, want, why);
    return CQ_OK;
}

/* A boolean member that must be `want` (its default `def` when absent). */
static cq_status need_bool(const cq_cfg *g, const char *key, bool def, bool want, const char *why) {
    bool v;
    CQ_TRY(cq_cfg_bool(g, key, def, &v));
    if (v != want)
        return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config %s %s is not supported (%s)", key, v ? "true" : "false", why);
    return CQ_OK;
}

static cq_status need_one(const cq_cfg *g, const char *key) {
    int v;
    CQ_TRY(cq_cfg_int(g, key, 1, 1, 64, &v));
    if (v != 1) return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config %s %d is not supported (only 1)", key, v);
    return CQ_OK;
}

static cq_status parse_json(const cJSON *j, void *out) {
    cq_ltx2_config *c = out;
    const cq_cfg g = {j, "ltx2", ""};
    CQ_TRY(cq_cfg_class(&g, "LTX2VideoTransformer3DModel", false));
    memset(c, 0, sizeof *c);
    const int big = 1 << 16;
    CQ_TRY(need_one(&g, "patch_size"));
    CQ_TRY(need_one(&g, "patch_size_t"));
    CQ_TRY(need_one(&g, "audio_patch_size"));
    CQ_TRY(need_one(&g, "audio_patch_size_t"));
    CQ_TRY(need_str(&g, "rope_type", "split", "the LTX-2.3 / 2.5 layout"));
    if (!cq_cfg_get(&g, "rope_type"))
        return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config has no rope_type (the default \"interleaved\" is not "
                       "supported; LTX-2.3 / 2.5 use \"split\")");
    CQ_TRY(need_str(&g, "qk_norm", "rms_norm_across_heads", "the only one the reference builds"));
    CQ_TRY(need_str(&g, "activation_fn", "gelu-approximate", "LTX-2's feed-forward"));
    CQ_TRY(need_bool(&g, "use_prompt_embeddings", true, false, "the caption projection of LTX-2.0 is not written; "
                     "LTX-2.3 / 2.5 project in the connectors"));
    CQ_TRY(need_bool(&g, "norm_elementwise_affine", false, false, "LTX-2's block norms have no weights"));
    CQ_TRY(need_bool(&g, "attention_bias", true, true, "LTX-2's attentions have biases"));
    CQ_TRY(need_bool(&g, "attention_out_bias", true, true, "LTX-2's attentions have biases"));

    CQ_TRY(cq_cfg_int(&g, "in_channels", 128, 1, big, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "out_channels", c->in_channels, 1, big, &c->out_channels));
    CQ_TRY(cq_cfg_int(&g, "num_attention_heads", 32, 1, 1024, &c->heads));
    CQ_TRY(cq_cfg_int(&g, "attention_head_dim", 128, 2, 1024, &c->head_dim));
    CQ_TRY(cq_cfg_int(&g, "audio_in_channels", 128, 1, big, &c->audio_in_channels));
    CQ_TRY(cq_cfg_int(&g, "audio_out_channels", c->audio_in_channels, 1, big, &c->audio_out_channels));
    CQ_TRY(cq_cfg_int(&g, "audio_num_attention_heads", 32, 1, 1024, &c->audio_heads));
    CQ_TRY(cq_cfg_int(&g, "audio_attention_head_dim", 64, 2, 1024, &c->audio_head_dim));
    CQ_TRY(cq_cfg_int(&g, "num_layers", 48, 1, 4096, &c->n_layers));
    if (c->head_dim % 2 || c->audio_head_dim % 2)
        return cq_fail(CQ_ERR_PARSE, "ltx2: config attention_head_dim %d / audio_attention_head_dim %d must be even "
                       "(split RoPE)", c->head_dim, c->audio_head_dim);
    if ((int64_t)c->heads * c->head_dim > big || (int64_t)c->audio_heads * c->audio_head_dim > big)
        return cq_fail(CQ_ERR_PARSE, "ltx2: config widths %d x %d / %d x %d exceed %d", c->heads, c->head_dim,
                       c->audio_heads, c->audio_head_dim, big);
    c->dim = c->heads * c->head_dim;
    c->audio_dim = c->audio_heads * c->audio_head_dim;
    if (c->heads != c->audio_heads)
        return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config has %d video heads and %d audio heads; the audio<->video "
                       "RoPE tables are cut by the video count, so they must be equal", c->heads, c->audio_heads);
    int cv, ca;
    CQ_TRY(cq_cfg_int(&g, "cross_attention_dim", 4096, 1, big, &cv));
    CQ_TRY(cq_cfg_int(&g, "audio_cross_attention_dim", 2048, 1, big, &ca));
    if (cv != c->dim || ca != c->audio_dim)
        return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: config cross_attention_dim %d / audio_cross_attention_dim %d must "
                       "equal the stream widths %d / %d (the prompt rows come projected by the connectors)", cv, ca,
                       c->dim, c->audio_dim);
    CQ_TRY(cq_cfg_bool(&g, "gated_attn", false, &c->gated_attn));
    CQ_TRY(cq_cfg_bool(&g, "cross_attn_mod", false, &c->cross_attn_mod));
    CQ_TRY(cq_cfg_bool(&g, "audio_gated_attn", false, &c->audio_gated_attn));
    CQ_TRY(cq_cfg_bool(&g, "audio_cross_attn_mod", false, &c->audio_cross_attn_mod));
    CQ_TRY(cq_cfg_bool(&g, "ff_bias", true, &c->ff_bias));
    CQ_TRY(cq_cfg_bool(&g, "audio_ff_bias", true, &c->audio_ff_bias));
    CQ_TRY(cq_cfg_bool(&g, "perturbed_attn", false, &c->perturbed_attn));
    CQ_TRY(cq_cfg_bool(&g, "use_keyframes_abs_pos_embedding", false, &c->keyframes));
    bool pas;
    CQ_TRY(cq_cfg_bool(&g, "use_prompt_adaln_single", true, &pas));
    c->prompt_adaln = pas && (c->cross_attn_mod || c->audio_cross_attn_mod);
    double eps, theta, tsm, xtsm;
    CQ_TRY(cq_cfg_num(&g, "norm_eps", 1e-6, 0.0, true, 0.5, &eps));
    CQ_TRY(cq_cfg_num(&g, "rope_theta", 10000.0, 1.0, true, 1e9, &theta));
    CQ_TRY(cq_cfg_num(&g, "timestep_scale_multiplier", 1000.0, 0.0, true, 1e9, &tsm));
    CQ_TRY(cq_cfg_num(&g, "cross_attn_timestep_scale_multiplier", 1000.0, 0.0, true, 1e9, &xtsm));
    c->norm_eps = (float)eps;
    c->rope_theta = theta;
    c->gate_factor = (float)(xtsm / tsm); /* a Python float division, applied to the f32 timesteps */
    CQ_TRY(cq_cfg_bool(&g, "rope_double_precision", true, &c->rope_f64));
    int vs[3] = {8, 32, 32}, n;
    CQ_TRY(cq_cfg_ints(&g, "vae_scale_factors", 3, 3, 1, 1024, vs, &n));
    memcpy(c->vae_scale, vs, sizeof vs);
    int pmax, bh, bw, apmax;
    CQ_TRY(cq_cfg_int(&g, "pos_embed_max_pos", 20, 1, 1 << 24, &pmax));
    CQ_TRY(cq_cfg_int(&g, "base_height", 2048, 1, 1 << 24, &bh));
    CQ_TRY(cq_cfg_int(&g, "base_width", 2048, 1, 1 << 24, &bw));
    CQ_TRY(cq_cfg_int(&g, "audio_pos_embed_max_pos", 20, 1, 1 << 24, &apmax));
    CQ_TRY(cq_cfg_int(&g, "audio_scale_factor", 4, 1, 1024, &c->audio_scale));
    CQ_TRY(cq_cfg_int(&g, "audio_sampling_rate", 16000, 1, 1 << 24, &c->audio_rate));
    CQ_TRY(cq_cfg_int(&g, "audio_hop_length", 160, 1, 1 << 24, &c->audio_hop));
    CQ_TRY(cq_cfg_int(&g, "causal_offset", 1, 0, 1024, &c->causal_offset));
    c->max_pos[0] = (float)pmax;
    c->max_pos[1] = (float)bh;
    c->max_pos[2] = (float)bw;
    c->audio_max_pos = (float)apmax;
    c->cross_max_pos = (float)(pmax > apmax ? pmax : apmax);
    return CQ_OK;
}

cq_status cq_ltx2_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_config *c) {
    return cq_cfg_read(cmf, prefix, "ltx2", parse_json, c);
}

cq_status cq_ltx2_parse_config_json(const char *json, cq_ltx2_config *c) {
    cJSON *j = cJSON_Parse(json);
    if (!j) return cq_fail(CQ_ERR_PARSE, "ltx2: the config is not JSON");
    cq_status s = parse_json(j, c);
    cJSON_Delete(j);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
/* The modulation table `name` [rows, cols] (a matrix entry in any codec) as an F32 tensor. */
static cq_status bind_table(const cq_tt_binder *b, cq_tensor *out, int64_t rows, int64_t cols, const char *name) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s", name));
    float *t = cq_mallocn((size_t)(rows * cols), sizeof(float));
    if (!t) return CQ_ERR_NOMEM;
    cq_status s = cq_tt_read_vector(b->who, v, t, (size_t)(rows * cols));
    if (s == CQ_OK) s = cq_tt_held_upload(b, t, rows, cols, out);
    cq_free(t);
    return s;
}

static cq_status bind_adaln(const cq_tt_binder *b, const char *p, const char *stem, int k, lx_adaln *A) {
    A->k = k;
    CQ_TRY(cq_tt_bind_weight(b, &A->l1w, "%s%s.emb.timestep_embedder.linear_1.weight", p, stem));
    CQ_TRY(cq_tt_bind_vector(b, &A->l1b, "%s%s.emb.timestep_embedder.linear_1.bias", p, stem));
    CQ_TRY(cq_tt_bind_weight(b, &A->l2w, "%s%s.emb.timestep_embedder.linear_2.weight", p, stem));
    CQ_TRY(cq_tt_bind_vector(b, &A->l2b, "%s%s.emb.timestep_embedder.linear_2.bias", p, stem));
    CQ_TRY(cq_tt_bind_weight(b, &A->lw, "%s%s.linear.weight", p, stem));
    return cq_tt_bind_vector(b, &A->lb, "%s%s.linear.bias", p, stem);
}

static cq_status bind_attn(const cq_tt_binder *b, const char *p, int l, const char *stem, bool gated, int heads,
                           int dh, lx_attn *A) {
    A->gated = gated;
    A->heads = heads;
    A->dh = dh;
    A->inner = heads * dh;
#define W(f, s) CQ_TRY(cq_tt_bind_weight(b, &A->f, "%stransformer_blocks.%d.%s." s, p, l, stem))
#define V(f, s) CQ_TRY(cq_tt_bind_vector(b, &A->f, "%stransformer_blocks.%d.%s." s, p, l, stem))
    W(q, "to_q.weight");
    V(qb, "to_q.bias");
    W(k, "to_k.weight");
    V(kb, "to_k.bias");
    W(v, "to_v.weight");
    V(vb, "to_v.bias");
    W(o, "to_out.0.weight");
    V(ob, "to_out.0.bias");
    V(nq, "norm_q.weight");
    V(nk, "norm_k.weight");
    if (gated) {
        W(gw, "to_gate_logits.weight");
        V(gb, "to_gate_logits.bias");
    }
#undef W
#undef V
    return CQ_OK;
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

static cq_status bind_stream(cq_ltx2 *m, const cq_tt_binder *b, const char *p, int si) {
    const cq_ltx2_config *c = &m->cfg;
    lx_stream *S = &m->s[si];
    const bool v = si == ST_VIDEO;
    const char *a = v ? "" : "audio_";
    char stem[96];
    S->name = v ? "video" : "audio";
    S->tp = a;
    S->dim = v ? c->dim : c->audio_dim;
    S->heads = v ? c->heads : c->audio_heads;
    S->dh = v ? c->head_dim : c->audio_head_dim;
    S->cin = v ? c->in_channels : c->audio_in_channels;
    S->cout = v ? c->out_channels : c->audio_out_channels;
    S->gated = v ? c->gated_attn : c->audio_gated_attn;
    S->xmod = v ? c->cross_attn_mod : c->audio_cross_attn_mod;
    S->ffb = v ? c->ff_bias : c->audio_ff_bias;
    S->k = S->xmod ? 9 : 6;
    CQ_TRY(cq_tt_bind_weight(b, &S->pin, "%s%sproj_in.weight", p, a));
    CQ_TRY(cq_tt_bind_vector(b, &S->pinb, "%s%sproj_in.bias", p, a));
    CQ_TRY(cq_tt_bind_weight(b, &S->pout, "%s%sproj_out.weight", p, a));
    CQ_TRY(cq_tt_bind_vector(b, &S->poutb, "%s%sproj_out.bias", p, a));
    char name[200];
    snprintf(name, sizeof name, "%s%sscale_shift_table", p, a);
    CQ_TRY(bind_table(b, &S->sst_out, 2, S->dim, name));
    snprintf(stem, sizeof stem, "%stime_embed", a);
    CQ_TRY(bind_adaln(b, p, stem, S->k, &S->time));
    CQ_TRY(bind_adaln(b, p, v ? "av_cross_attn_video_scale_shift" : "av_cross_attn_audio_scale_shift", 4, &S->ca_ss));
    CQ_TRY(bind_adaln(b, p, v ? "av_cross_attn_video_a2v_gate" : "av_cross_attn_audio_v2a_gate", 1, &S->ca_gate));
    if (c->prompt_adaln) {
        snprintf(stem, sizeof stem, "%sprompt_adaln", a);
        CQ_TRY(bind_adaln(b, p, stem, 2, &S->prompt));
    }
    CQ_TRY(head_index(b, (int)S->dim, S->dh, &S->gidx));
    for (int l = 0; l < c->n_layers; l++) {
        lx_sblock *B = &S->blk[l];
        snprintf(stem, sizeof stem, "%sattn1", a);
        CQ_TRY(bind_attn(b, p, l, stem, S->gated, S->heads, S->dh, &B->self));
        snprintf(stem, sizeof stem, "%sattn2", a);
        CQ_TRY(bind_attn(b, p, l, stem, S->gated, S->heads, S->dh, &B->text));
        /* both A<->V attentions are audio-shaped (audio heads x audio head dim); gated as their query stream */
        CQ_TRY(bind_attn(b, p, l, v ? "audio_to_video_attn" : "video_to_audio_attn", S->gated, c->audio_heads,
                         c->audio_head_dim, &B->cross));
        const char *ff = v ? "ff" : "audio_ff";
        CQ_TRY(cq_tt_bind_weight(b, &B->ff1, "%stransformer_blocks.%d.%s.net.0.proj.weight", p, l, ff));
        CQ_TRY(cq_tt_bind_weight(b, &B->ff2, "%stransformer_blocks.%d.%s.net.2.weight", p, l, ff));
        if (S->ffb) {
            CQ_TRY(cq_tt_bind_vector(b, &B->ff1b, "%stransformer_blocks.%d.%s.net.0.proj.bias", p, l, ff));
            CQ_TRY(cq_tt_bind_vector(b, &B->ff2b, "%stransformer_blocks.%d.%s.net.2.bias", p, l, ff));
        }
        snprintf(name, sizeof name, "%stransformer_blocks.%d.%sscale_shift_table", p, l, a);
        CQ_TRY(bind_table(b, &B->sst, S->k, S->dim, name));
        if (m->xattn) {
            snprintf(name, sizeof name, "%stransformer_blocks.%d.%sprompt_scale_shift_table", p, l, a);
            CQ_TRY(bind_table(b, &B->psst, 2, S->dim, name));
        }
        snprintf(name, sizeof name, "%stransformer_blocks.%d.%s_a2v_cross_attn_scale_shift_table", p, l, S->name);
        CQ_TRY(bind_table(b, &B->csst, 5, S->dim, name));
    }
    return CQ_OK;
}

cq_status cq_ltx2_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2 **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_ltx2 *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_ltx2_parse_config(cmf, prefix, &m->cfg);
    const cq_ltx2_config *c = &m->cfg;
    m->xattn = c->cross_attn_mod || c->audio_cross_attn_mod;
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_ltx2_tensors(c, prefix, &table);
    for (int si = 0; s == CQ_OK && si < ST_COUNT; si++)
        if (!(m->s[si].blk = cq_calloc((size_t)c->n_layers, sizeof(lx_sblock)))) s = CQ_ERR_NOMEM;
    const cq_tt_binder b = {"ltx2", &table, cmf, be, &m->held};
    for (int si = 0; s == CQ_OK && si < ST_COUNT; si++) s = bind_stream(m, &b, prefix, si);
    cq_tt_list_free(&table);
    if (s != CQ_OK) {
        cq_ltx2_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_ltx2_free(cq_ltx2 *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    for (int si = 0; si < ST_COUNT; si++) cq_free(m->s[si].blk);
    cq_free(m);
}

const cq_ltx2_config *cq_ltx2_get_config(const cq_ltx2 *m) { return &m->cfg; }

void cq_ltx2_set_tap(cq_ltx2 *m, cq_ltx2_tap_fn fn, void *user) {
    m->tap = fn;
    m->tap_user = user;
}
