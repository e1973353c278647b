/*
 * ltx2.c — LTX-2's audio-video denoiser (ltx2.h), written once against the
 * op layer. Semantics follow diffusers' LTX2VideoTransformer3DModel and
 * LTX2VideoTransformerBlock (transformer_ltx2.py at 58eb52c0), each float
 * step in the reference's order:
 *  - adaLN-single (PixArt): 256-channel sinusoid of t (cos half first) ->
 *    Linear -> SiLU -> Linear = E (the embedded timestep) -> SiLU -> Linear
 *    = the k modulation chunks of the stream's width;
 *  - a block's modulation vector = its learned table row + the chunk
 *    (shift, scale, gate of self-attention; of the FF; of the prompt
 *    attention's query; the prompt context's shift and scale; the A<->V
 *    rows scale-first, then the gate); norms are weightless RMS, modulated
 *    as norm * (1 + scale) + shift;
 *  - attention: q/k/v with biases, q and k RMS-normed with a weight across
 *    the whole inner width (eps 1e-6, not norm_eps: the reference builds its
 *    attentions with the default), split RoPE per head, softmax(q k^T /
 *    sqrt(dh)), each head's output times 2 sigmoid(gate logit) (the logits a
 *    Linear of the query input), then to_out with bias. STG replaces the
 *    attention by the values;
 *  - the A<->V attentions read norms of both streams taken after both
 *    prompt attentions and before either A<->V update, so the two
 *    directions do not see each other;
 *  - output: LayerNorm (no affine, eps 1e-6) * (1 + row1 + E) + (row0 + E),
 *    then proj_out.
 * Every activation is f32 on every backend (this first version keeps the
 * reference's precision; the bf16 activation path is not written yet).
 */
#include "models/ltx2.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/dit.h"
#include "models/ltx2_rope.h"
#include "models/tables.h"

#define LX_QK_EPS 1e-6f  /* the attentions' q/k RMSNorm (LTX2Attention's default norm_eps) */
#define LX_OUT_EPS 1e-6f /* the output LayerNorm */
#define LX_MAX_TOKENS (1 << 22)
#define LX_MAX_CTX (1 << 20)

enum { ST_VIDEO, ST_AUDIO, ST_COUNT };

/* The modulation vectors of one block, one stream and one run of timesteps, in this order. */
enum {
    M_SH_SA, M_SC_SA, M_G_SA,     /* self-attention: shift, scale, gate */
    M_SH_FF, M_SC_FF, M_G_FF,     /* feed-forward */
    M_SH_Q, M_SC_Q, M_G_Q,        /* prompt attention's query (cross_attn_mod) */
    M_SH_KV, M_SC_KV,             /* the prompt context (prompt tables) */
    M_A2V_SC, M_A2V_SH, M_V2A_SC, M_V2A_SH, M_G_CA, /* A<->V: scale-first, then the gate */
    M_1SC_SA, M_1SC_FF, M_1SC_Q, M_1SC_KV, M_1A2V, M_1V2A, /* 1 + each scale */
    M_COUNT
};

typedef struct lx_adaln {
    cq_tensor l1w, l1b, l2w, l2b, lw, lb;
    int k; /* modulation chunks */
} lx_adaln;

typedef struct lx_attn {
    cq_tensor q, qb, k, kb, v, vb, o, ob, nq, nk, gw, gb;
    bool gated;
    int heads, dh, inner;
} lx_attn;

/* One stream's part of a block. `cross` is the A<->V attention this stream queries (a2v on video, v2a on audio). */
typedef struct lx_sblock {
    lx_attn self, text, cross;
    cq_tensor ff1, ff1b, ff2, ff2b; /* biases zeroed when absent */
    cq_tensor sst;  /* F32 [k, D] */
    cq_tensor psst; /* F32 [2, D] (prompt tables) */
    cq_tensor csst; /* F32 [5, D] */
} lx_sblock;

typedef struct lx_stream {
    const char *name;  /* "video" / "audio" */
    const char *tp;    /* tap name prefix: "" / "audio_" */
    int64_t dim;
    int heads, dh, k, cin, cout;
    bool gated, xmod, ffb;
    cq_tensor pin, pinb, sst_out, pout, poutb;
    lx_adaln time, ca_ss, ca_gate, prompt;
    lx_sblock *blk;
    cq_tensor gidx; /* I32 [dim]: the head of each column (its own attentions' gates) */
} lx_stream;

struct cq_ltx2 {
    cq_backend *be;
    cq_ltx2_config cfg;
    cq_tt_held held;
    lx_stream s[ST_COUNT];
    bool xattn; /* prompt tables in the blocks (either stream's cross_attn_mod) */
    cq_ltx2_tap_fn tap;
    void *tap_user;
};

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

/* ------------------------------------------------------------------------ */
/* The forward                                                              */
/* ------------------------------------------------------------------------ */
/* One stream's state for a forward. */
typedef struct lx_srun {
    int64_t n, L;                        /* tokens, prompt rows */
    int G;                               /* runs of equal timesteps */
    cq_dit_group grp[CQ_LTX2_MAX_RUNS];  /* rows of each run (mod_row = the run) */
    float tval[CQ_LTX2_MAX_RUNS];        /* each run's timestep */
    cq_tensor lat, x, hn, nrm, mc, ctx, ctxm, y;
    cq_tensor mods;                      /* [G * M_COUNT, D]: one block's vectors per run */
    cq_tensor outm;                      /* [G * 2, D]: the output head's shift, scale per run */
    cq_tensor t_mod, t_emb, ss_mod, ss_emb, g_mod, g_emb, p_mod, p_emb; /* the adaLN-single tables per run */
    cq_tensor rc, rs, xc, xs;            /* RoPE: self [n, D/2], A<->V [n, audio_dim/2] */
} lx_srun;

typedef struct lx_fwd {
    lx_srun r[ST_COUNT];
    cq_tensor feat, hid, embs;                       /* adaLN-single scratch */
    cq_tensor q, k, v, att, gl, ge, proj, ffh;       /* attention and FF scratch */
} lx_fwd;

static void tapf(const cq_ltx2 *m, const cq_tensor *t, const char *fmt, ...) CQ_PRINTF(3, 4);
static void tapf(const cq_ltx2 *m, const cq_tensor *t, const char *fmt, ...) {
    if (!m->tap) return;
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    m->tap(m->tap_user, name, t);
}

/* The first rows x cols of a scratch tensor as a dense 2-D view (zeroed, so every op refuses it, past its end). */
static cq_tensor v2(const cq_tensor *t, int64_t rows, int64_t cols) {
    cq_tensor o;
    if (cq_tensor_subview(t, 0, 2, (const int64_t[2]){rows, cols}, &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o;
}

/* rows [r0, r0 + rows) of a [*, cols] tensor as [rows, cols], from element r0 * cols */
static cq_tensor sub2(const cq_tensor *t, int64_t r0, int64_t rows, int64_t cols) {
    cq_tensor o;
    if (cq_tensor_subview(t, r0 * cols, 2, (const int64_t[2]){rows, cols}, &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o;
}

static cq_tensor mvec(const lx_srun *r, int64_t D, int g, int which) {
    const cq_dit_mod md = {.t = &r->mods, .dim = D, .per_row = M_COUNT};
    return cq_dit_mod_vec(&md, g, which);
}

/* Runs of equal values in t[0..nt) (nt 1: one run over all n rows). */
static cq_status make_runs(const char *what, const float *t, int nt, int64_t n, lx_srun *r) {
    r->G = 0;
    for (int64_t i = 0; i < (nt == 1 ? 1 : n); i++) {
        if (i > 0 && t[i] == t[i - 1]) {
            r->grp[r->G - 1].n++;
            continue;
        }
        if (r->G == CQ_LTX2_MAX_RUNS)
            return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: the %s timesteps change value more than %d times along the "
                           "tokens", what, CQ_LTX2_MAX_RUNS - 1);
        r->grp[r->G] = (cq_dit_group){.r0 = i, .n = nt == 1 ? n : 1, .mod_row = r->G};
        r->tval[r->G++] = t[i];
    }
    return CQ_OK;
}

/* One adaLN-single on the timesteps tv[0..G): mod [G, k D], emb [G, D]. */
static cq_status adaln(cq_ltx2 *m, lx_fwd *f, const lx_adaln *A, int64_t D, const float *tv, int G, cq_tensor *mod,
                       cq_tensor *emb) {
    cq_backend *be = m->be;
    float *feat = cq_mallocn((size_t)G * CQ_LTX2_TIMESTEP_CHANNELS, sizeof(float));
    if (!feat) return CQ_ERR_NOMEM;
    const cq_dit_tproj tp = {.dim = CQ_LTX2_TIMESTEP_CHANNELS, .flip_sin_to_cos = true, .scale = 1.0f,
                             .max_period = 10000.0f};
    cq_dit_timestep_features(&tp, tv, G, feat);
    cq_tensor fe = v2(&f->feat, G, CQ_LTX2_TIMESTEP_CHANNELS);
    cq_status s = cq_tensor_upload(&fe, feat, (size_t)G * CQ_LTX2_TIMESTEP_CHANNELS * sizeof(float));
    cq_free(feat);
    CQ_TRY(s);
    cq_tensor hid = v2(&f->hid, G, D), es = v2(&f->embs, G, D);
    cq_matmul_args mm = {.y = &hid, .x = &fe, .w = &A->l1w, .bias = &A->l1b, .act = CQ_ACT_SILU};
    CQ_TRY(cq_op_matmul(be, &mm));
    CQ_TRY(cq_op_linear(be, emb, &hid, &A->l2w, &A->l2b));
    CQ_TRY(cq_op_unary(be, &es, emb, CQ_UNARY_SILU, 0.0f, 0.0f));
    return cq_op_linear(be, mod, &es, &A->lw, &A->lb);
}

/* The eight adaLN-single tables, each stream's per run. */
static cq_status tables(cq_ltx2 *m, lx_fwd *f, const cq_ltx2_inputs *in) {
    static const char *const tn[ST_COUNT][4] = {{"time_embed", "av_video_ss", "av_video_gate", "prompt_adaln"},
                                                {"audio_time_embed", "av_audio_ss", "av_audio_gate",
                                                 "audio_prompt_adaln"}};
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        const float own = si == ST_VIDEO ? in->sigma : in->audio_sigma;
        const float other = si == ST_VIDEO ? in->audio_sigma : in->sigma;
        float ca[CQ_LTX2_MAX_RUNS], cg[CQ_LTX2_MAX_RUNS], pr[CQ_LTX2_MAX_RUNS];
        for (int g = 0; g < r->G; g++) {
            ca[g] = in->use_cross_timestep ? other : r->tval[g];
            cg[g] = ca[g] * m->cfg.gate_factor;
            pr[g] = own;
        }
        CQ_TRY(adaln(m, f, &S->time, S->dim, r->tval, r->G, &r->t_mod, &r->t_emb));
        CQ_TRY(adaln(m, f, &S->ca_ss, S->dim, ca, r->G, &r->ss_mod, &r->ss_emb));
        CQ_TRY(adaln(m, f, &S->ca_gate, S->dim, cg, r->G, &r->g_mod, &r->g_emb));
        if (m->cfg.prompt_adaln) CQ_TRY(adaln(m, f, &S->prompt, S->dim, pr, r->G, &r->p_mod, &r->p_emb));
        tapf(m, &r->t_mod, "%s_mod", tn[si][0]);
        tapf(m, &r->t_emb, "%s_emb", tn[si][0]);
        tapf(m, &r->ss_mod, "%s_mod", tn[si][1]);
        tapf(m, &r->ss_emb, "%s_emb", tn[si][1]);
        tapf(m, &r->g_mod, "%s_mod", tn[si][2]);
        tapf(m, &r->g_emb, "%s_emb", tn[si][2]);
        if (m->cfg.prompt_adaln) {
            tapf(m, &r->p_mod, "%s_mod", tn[si][3]);
            tapf(m, &r->p_emb, "%s_emb", tn[si][3]);
        }
    }
    return CQ_OK;
}

/* One block's modulation vectors of a stream, per run: the learned rows plus the adaLN-single chunks. */
static cq_status block_mods(cq_ltx2 *m, lx_srun *r, const lx_stream *S, const lx_sblock *B) {
    cq_backend *be = m->be;
    const int64_t D = S->dim;
    for (int g = 0; g < r->G; g++) {
        const int64_t base = (int64_t)g * M_COUNT;
        cq_tensor dst = sub2(&r->mods, base, S->k, D), tb = sub2(&r->t_mod, (int64_t)g * S->k, S->k, D);
        CQ_TRY(cq_op_binary(be, &dst, &B->sst, &tb, CQ_BINARY_ADD));
        if (m->xattn) {
            dst = sub2(&r->mods, base + M_SH_KV, 2, D);
            if (m->cfg.prompt_adaln) {
                cq_tensor pb = sub2(&r->p_mod, (int64_t)g * 2, 2, D);
                CQ_TRY(cq_op_binary(be, &dst, &B->psst, &pb, CQ_BINARY_ADD));
            } else {
                CQ_TRY(cq_op_copy(be, &dst, &B->psst)); /* the static table alone (KV-cacheable prompts) */
            }
        }
        cq_tensor c4 = sub2(&B->csst, 0, 4, D), c1 = sub2(&B->csst, 4, 1, D);
        cq_tensor sb = sub2(&r->ss_mod, (int64_t)g * 4, 4, D), gb = sub2(&r->g_mod, g, 1, D);
        dst = sub2(&r->mods, base + M_A2V_SC, 4, D);
        CQ_TRY(cq_op_binary(be, &dst, &c4, &sb, CQ_BINARY_ADD));
        dst = sub2(&r->mods, base + M_G_CA, 1, D);
        CQ_TRY(cq_op_binary(be, &dst, &c1, &gb, CQ_BINARY_ADD));
        const int ones[][2] = {{M_1SC_SA, M_SC_SA}, {M_1SC_FF, M_SC_FF}, {M_1SC_Q, M_SC_Q},
                               {M_1SC_KV, M_SC_KV}, {M_1A2V, M_A2V_SC}, {M_1V2A, M_V2A_SC}};
        for (size_t i = 0; i < CQ_ARRAY_LEN(ones); i++) {
            if ((ones[i][1] == M_SC_Q && !S->xmod) || (ones[i][1] == M_SC_KV && !m->xattn)) continue;
            cq_tensor o = sub2(&r->mods, base + ones[i][0], 1, D), sc = sub2(&r->mods, base + ones[i][1], 1, D);
            CQ_TRY(cq_op_unary(be, &o, &sc, CQ_UNARY_ADD_SCALAR, 1.0f, 0.0f));
        }
    }
    return CQ_OK;
}

/* y = nrm * (1 + scale) + shift per run (y may be nrm). */
static cq_status modulate(cq_ltx2 *m, const lx_srun *r, int64_t D, cq_tensor *y, const cq_tensor *nrm, int onep,
                          int shift) {
    for (int g = 0; g < r->G; g++) {
        cq_tensor yv = cq_tensor_rows_view(y, r->grp[g].r0, r->grp[g].n);
        cq_tensor nv = cq_tensor_rows_view(nrm, r->grp[g].r0, r->grp[g].n);
        cq_tensor a = mvec(r, D, g, onep), b = mvec(r, D, g, shift);
        CQ_TRY(cq_op_binary(m->be, &yv, &nv, &a, CQ_BINARY_MUL));
        CQ_TRY(cq_op_binary(m->be, &yv, &yv, &b, CQ_BINARY_ADD));
    }
    return CQ_OK;
}

/* x += gate ⊙ y per run (which < 0: no gate). */
static cq_status gated_res(cq_ltx2 *m, const lx_srun *r, int64_t D, cq_tensor *x, const cq_tensor *y, int which) {
    if (which < 0) return cq_op_gated_add(m->be, x, y, NULL);
    for (int g = 0; g < r->G; g++) {
        cq_tensor xv = cq_tensor_rows_view(x, r->grp[g].r0, r->grp[g].n);
        cq_tensor yv = cq_tensor_rows_view(y, r->grp[g].r0, r->grp[g].n);
        cq_tensor gate = mvec(r, D, g, which);
        CQ_TRY(cq_op_gated_add(m->be, &xv, &yv, &gate));
    }
    return CQ_OK;
}

/* Split RoPE per head on t [n, heads * dh] with the tables [n, heads * dh / 2]: the rows viewed as n * heads heads
 * of one head each (ltx2_rope.h). */
static cq_status rope(cq_backend *be, const cq_tensor *t, int heads, int dh, const cq_tensor *c, const cq_tensor *s) {
    const int64_t n = cq_tensor_rows(t);
    cq_tensor tv, cv, sv;
    CQ_TRY(cq_tensor_reshape(t, 2, (const int64_t[2]){n * heads, dh}, &tv));
    CQ_TRY(cq_tensor_reshape(c, 2, (const int64_t[2]){n * heads, dh / 2}, &cv));
    CQ_TRY(cq_tensor_reshape(s, 2, (const int64_t[2]){n * heads, dh / 2}, &sv));
    return cq_op_qk_norm_rope(be, &tv, 1, dh, NULL, 0.0f, &cv, &sv, CQ_ROPE_HALF, 0);
}

/* One attention: queries from xq, keys and values from xkv (NULL: xq), RoPE on q and k where tables are given;
 * perturbed (STG): the values stand in for the attention. *out = to_out(gated heads) [rows of xq, out_dim] in
 * the projection scratch. */
static cq_status attend(cq_ltx2 *m, lx_fwd *f, const lx_attn *A, const cq_tensor *gidx, const cq_tensor *xq,
                        const cq_tensor *xkv, const cq_tensor *qc, const cq_tensor *qs, const cq_tensor *kc,
                        const cq_tensor *ks, bool perturbed, int64_t out_dim, cq_tensor *out) {
    cq_backend *be = m->be;
    if (!xkv) xkv = xq;
    const int64_t nq = cq_tensor_rows(xq), nk = cq_tensor_rows(xkv), I = A->inner;
    cq_tensor q = v2(&f->q, nq, I), k = v2(&f->k, nk, I), v = v2(&f->v, nk, I), att = v2(&f->att, nq, I);
    cq_tensor *o = &att;
    CQ_TRY(cq_op_linear(be, &v, xkv, &A->v, &A->vb));
    if (perturbed) {
        o = &v; /* self-attention only: the value rows are the query rows */
    } else {
        CQ_TRY(cq_op_linear(be, &q, xq, &A->q, &A->qb));
        CQ_TRY(cq_op_linear(be, &k, xkv, &A->k, &A->kb));
        CQ_TRY(cq_op_rmsnorm(be, &q, &q, &A->nq, NULL, false, LX_QK_EPS));
        CQ_TRY(cq_op_rmsnorm(be, &k, &k, &A->nk, NULL, false, LX_QK_EPS));
        if (qc) CQ_TRY(rope(be, &q, A->heads, A->dh, qc, qs));
        if (kc) CQ_TRY(rope(be, &k, A->heads, A->dh, kc, ks));
        cq_attn_args at = {.o = &att, .q = &q, .k = &k, .v = &v, .n_heads = A->heads, .n_kv_heads = A->heads,
                           .head_dim = A->dh};
        CQ_TRY(cq_op_attention(be, &at));
    }
    if (A->gated) {
        /* gates = 2 sigmoid(logits) per head, spread over the head's columns by a column gather */
        cq_tensor gl = v2(&f->gl, nq, A->heads), ge = v2(&f->ge, nq, I);
        CQ_TRY(cq_op_linear(be, &gl, xq, &A->gw, &A->gb));
        CQ_TRY(cq_op_unary(be, &gl, &gl, CQ_UNARY_SIGMOID, 0.0f, 0.0f));
        CQ_TRY(cq_op_unary(be, &gl, &gl, CQ_UNARY_SCALE, 2.0f, 0.0f));
        CQ_TRY(cq_op_gather_cols(be, &ge, &gl, gidx, 1, 1.0f));
        CQ_TRY(cq_op_binary(be, o, o, &ge, CQ_BINARY_MUL));
    }
    *out = v2(&f->proj, nq, out_dim);
    return cq_op_linear(be, out, o, &A->o, &A->ob);
}

/* The RoPE tables of both streams: self (video 3 axes, audio 1) and the time-only A<->V ones. */
static cq_status ropes(cq_ltx2 *m, lx_fwd *f, const cq_ltx2_inputs *in) {
    const cq_ltx2_config *c = &m->cfg;
    const int64_t nv = f->r[ST_VIDEO].n, na = f->r[ST_AUDIO].n, wmax = c->dim > c->audio_dim ? c->dim : c->audio_dim;
    float *pv = cq_mallocn((size_t)nv * 4 + (size_t)na, sizeof(float));
    float *tab = cq_mallocn((size_t)(nv > na ? nv : na) * (size_t)wmax, sizeof(float));
    cq_status s = pv && tab ? CQ_OK : CQ_ERR_NOMEM;
    float *pt = pv ? pv + nv * 3 : NULL, *pa = pv ? pt + nv : NULL;
    if (s == CQ_OK)
        s = cq_ltx2_video_positions(in->frames, in->height, in->width, c->vae_scale, c->causal_offset, in->fps, pv);
    if (s == CQ_OK)
        s = cq_ltx2_audio_positions((int)na, 0, c->audio_scale, c->causal_offset, c->audio_hop, c->audio_rate, pa);
    for (int64_t t = 0; s == CQ_OK && t < nv; t++) pt[t] = pv[t * 3]; /* the A<->V tables read the time alone */
    const struct {
        cq_ltx2_rope r;
        const float *pos;
        int64_t n;
        cq_tensor *c, *s;
        const char *name;
    } jobs[4] = {
        {{c->dim, 3, {c->max_pos[0], c->max_pos[1], c->max_pos[2]}, c->rope_theta, c->rope_f64}, pv, nv,
         &f->r[ST_VIDEO].rc, &f->r[ST_VIDEO].rs, "video"},
        {{c->audio_dim, 1, {c->audio_max_pos}, c->rope_theta, c->rope_f64}, pa, na, &f->r[ST_AUDIO].rc,
         &f->r[ST_AUDIO].rs, "audio"},
        {{c->audio_dim, 1, {c->cross_max_pos}, c->rope_theta, c->rope_f64}, pt, nv, &f->r[ST_VIDEO].xc,
         &f->r[ST_VIDEO].xs, "xvideo"},
        {{c->audio_dim, 1, {c->cross_max_pos}, c->rope_theta, c->rope_f64}, pa, na, &f->r[ST_AUDIO].xc,
         &f->r[ST_AUDIO].xs, "xaudio"},
    };
    for (int j = 0; s == CQ_OK && j < 4; j++) {
        const size_t cells = (size_t)jobs[j].n * (size_t)(jobs[j].r.dim / 2);
        float *cs = tab, *sn = tab + cells;
        s = cq_ltx2_rope_tables(&jobs[j].r, jobs[j].pos, jobs[j].n, cs, sn);
        if (s == CQ_OK) s = cq_tensor_upload(jobs[j].c, cs, cells * sizeof(float));
        if (s == CQ_OK) s = cq_tensor_upload(jobs[j].s, sn, cells * sizeof(float));
        if (s == CQ_OK) {
            tapf(m, jobs[j].c, "rope_%s_cos", jobs[j].name);
            tapf(m, jobs[j].s, "rope_%s_sin", jobs[j].name);
        }
    }
    cq_free(pv);
    cq_free(tab);
    return s;
}

static void fwd_free(lx_fwd *f) {
    for (int si = 0; si < ST_COUNT; si++) {
        lx_srun *r = &f->r[si];
        cq_tensor *t[] = {&r->lat, &r->x, &r->hn, &r->nrm, &r->mc, &r->ctx, &r->ctxm, &r->y, &r->mods, &r->outm,
                          &r->t_mod, &r->t_emb, &r->ss_mod, &r->ss_emb, &r->g_mod, &r->g_emb, &r->p_mod, &r->p_emb,
                          &r->rc, &r->rs, &r->xc, &r->xs};
        for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    }
    cq_tensor *t[] = {&f->feat, &f->hid, &f->embs, &f->q, &f->k, &f->v, &f->att, &f->gl, &f->ge, &f->proj, &f->ffh};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

static cq_status fwd_alloc(cq_ltx2 *m, lx_fwd *f) {
    cq_backend *be = m->be;
    const cq_dtype F = CQ_DTYPE_F32;
    int64_t rq = 0, rk = 0, w = 0, h = 0, gmax = 0;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        const int64_t D = S->dim, n = r->n, G = r->G, xd = m->cfg.audio_dim;
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, F, rows, cols, &r->t))
        A(lat, n, S->cin);
        A(x, n, D);
        A(hn, n, D);
        A(nrm, n, D);
        A(mc, n, D);
        A(ctx, r->L, D);
        if (m->xattn) A(ctxm, r->L, D);
        A(y, n, S->cout);
        A(mods, G * M_COUNT, D);
        A(outm, G * 2, D);
        A(t_mod, G, S->k * D);
        A(t_emb, G, D);
        A(ss_mod, G, 4 * D);
        A(ss_emb, G, D);
        A(g_mod, G, D);
        A(g_emb, G, D);
        if (m->cfg.prompt_adaln) {
            A(p_mod, G, 2 * D);
            A(p_emb, G, D);
        }
        A(rc, n, D / 2);
        A(rs, n, D / 2);
        A(xc, n, xd / 2);
        A(xs, n, xd / 2);
#undef A
        rq = max2(rq, n);
        rk = max2(rk, max2(n, r->L));
        w = max2(w, D);
        h = max2(h, S->heads);
        gmax = max2(gmax, G);
    }
    h = max2(h, m->cfg.audio_heads);
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, F, rows, cols, &f->t))
    A(feat, gmax, CQ_LTX2_TIMESTEP_CHANNELS);
    A(hid, gmax, w);
    A(embs, gmax, w);
    A(q, rq, w);
    A(k, rk, w);
    A(v, rk, w);
    A(att, rq, w);
    A(gl, rq, h);
    A(ge, rq, w);
    A(proj, rq, w);
    A(ffh, rq, 4 * w);
#undef A
    return CQ_OK;
}

/* Inputs must be what the reference takes: sizes in range, counts that match, finite values. */
static cq_status check_inputs(const cq_ltx2 *m, const cq_ltx2_inputs *in, const float *vo, const float *ao) {
    const cq_ltx2_config *c = &m->cfg;
    if (!in || !vo || !ao) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: forward needs inputs and two outputs");
    if (!in->video || !in->audio || !in->ctx || !in->audio_ctx || !in->timestep || !in->audio_timestep)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: forward needs the video and audio tokens, both prompts and both "
                       "timesteps");
    if (in->frames < 1 || in->height < 1 || in->width < 1 || in->frames > CQ_LTX2_MAX_SIDE ||
        in->height > CQ_LTX2_MAX_SIDE || in->width > CQ_LTX2_MAX_SIDE ||
        (int64_t)in->frames * in->height * in->width > LX_MAX_TOKENS)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: a %d x %d x %d latent grid (each side at least 1, at most %d tokens)",
                       in->frames, in->height, in->width, LX_MAX_TOKENS);
    if (in->audio_frames < 1 || in->audio_frames > LX_MAX_TOKENS)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d audio frames (1 .. %d)", in->audio_frames, LX_MAX_TOKENS);
    if (in->n_ctx < 1 || in->n_ctx > LX_MAX_CTX || in->n_audio_ctx < 1 || in->n_audio_ctx > LX_MAX_CTX)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: prompts of %d video and %d audio rows (1 .. %d each)", in->n_ctx,
                       in->n_audio_ctx, LX_MAX_CTX);
    if (!(in->fps > 0.0) || !isfinite(in->fps)) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: fps %g", in->fps);
    const int64_t nv = (int64_t)in->frames * in->height * in->width;
    if (in->n_timestep != 1 && in->n_timestep != nv)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d video timesteps for %lld tokens (1 or one per token)", in->n_timestep,
                       (long long)nv);
    if (in->n_audio_timestep != 1 && in->n_audio_timestep != in->audio_frames)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d audio timesteps for %d tokens (1 or one per token)",
                       in->n_audio_timestep, in->audio_frames);
    if (in->n_stg_blocks < 0 || (in->n_stg_blocks > 0 && !in->stg_blocks))
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: %d STG blocks without a list", in->n_stg_blocks);
    for (int i = 0; i < in->n_stg_blocks; i++)
        if (in->stg_blocks[i] < 0 || in->stg_blocks[i] >= c->n_layers)
            return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: STG block %d of a %d-block model", in->stg_blocks[i],
                           c->n_layers);
    if (!isfinite(in->sigma) || !isfinite(in->audio_sigma))
        return cq_fail(CQ_ERR_NUMERIC, "ltx2: sigma %g / audio sigma %g", (double)in->sigma, (double)in->audio_sigma);
    CQ_TRY(cq_dit_check_finite("ltx2", "video timesteps", in->timestep, 1, (size_t)in->n_timestep));
    CQ_TRY(cq_dit_check_finite("ltx2", "audio timesteps", in->audio_timestep, 1, (size_t)in->n_audio_timestep));
    CQ_TRY(cq_dit_check_finite("ltx2", "video tokens", in->video, (size_t)nv, (size_t)c->in_channels));
    CQ_TRY(cq_dit_check_finite("ltx2", "audio tokens", in->audio, (size_t)in->audio_frames,
                               (size_t)c->audio_in_channels));
    CQ_TRY(cq_dit_check_finite("ltx2", "video prompt", in->ctx, (size_t)in->n_ctx, (size_t)c->dim));
    return cq_dit_check_finite("ltx2", "audio prompt", in->audio_ctx, (size_t)in->n_audio_ctx, (size_t)c->audio_dim);
}

static bool stg_block(const cq_ltx2 *m, const cq_ltx2_inputs *in, int l) {
    if (!m->cfg.perturbed_attn) return false; /* the reference's processors ignore STG without it */
    for (int i = 0; i < in->n_stg_blocks; i++)
        if (in->stg_blocks[i] == l) return true;
    return false;
}

/* Block l on both streams. */
static cq_status block(cq_ltx2 *m, lx_fwd *f, const cq_ltx2_inputs *in, int l) {
    cq_backend *be = m->be;
    const bool pert = stg_block(m, in, l);
    const float eps = m->cfg.norm_eps;
    cq_tensor out;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        CQ_TRY(block_mods(m, r, S, &S->blk[l]));
        if (m->xattn) { /* the prompt rows modulated by this step's table (one per sample: the first run's) */
            cq_tensor a = mvec(r, S->dim, 0, M_1SC_KV), b = mvec(r, S->dim, 0, M_SH_KV);
            CQ_TRY(cq_op_binary(be, &r->ctxm, &r->ctx, &a, CQ_BINARY_MUL));
            CQ_TRY(cq_op_binary(be, &r->ctxm, &r->ctxm, &b, CQ_BINARY_ADD));
        }
    }
    /* 1. self-attention */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_SA, M_SH_SA));
        tapf(m, &r->hn, "b%d_%sattn1_q", l, S->tp);
        CQ_TRY(attend(m, f, &B->self, &S->gidx, &r->hn, NULL, &r->rc, &r->rs, &r->rc, &r->rs, pert, S->dim, &out));
        tapf(m, &out, "b%d_%sattn1_out", l, S->tp);
        CQ_TRY(gated_res(m, r, S->dim, &r->x, &out, M_G_SA));
    }
    /* 2. prompt cross-attention (no RoPE) */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        const cq_tensor *ctx = m->xattn ? &r->ctxm : &r->ctx;
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        if (S->xmod) CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_Q, M_SH_Q));
        tapf(m, &r->hn, "b%d_%sattn2_q", l, S->tp);
        tapf(m, ctx, "b%d_%sattn2_kv", l, S->tp);
        CQ_TRY(attend(m, f, &B->text, &S->gidx, &r->hn, ctx, NULL, NULL, NULL, NULL, false, S->dim, &out));
        tapf(m, &out, "b%d_%sattn2_out", l, S->tp);
        CQ_TRY(gated_res(m, r, S->dim, &r->x, &out, S->xmod ? M_G_Q : -1));
    }
    /* 3. audio <-> video, both directions reading the norms of the streams as they are now */
    if (!in->isolate_modalities) {
        lx_srun *rv = &f->r[ST_VIDEO], *ra = &f->r[ST_AUDIO];
        const lx_stream *Sv = &m->s[ST_VIDEO], *Sa = &m->s[ST_AUDIO];
        CQ_TRY(cq_op_rmsnorm(be, &rv->nrm, &rv->x, NULL, NULL, false, eps));
        CQ_TRY(cq_op_rmsnorm(be, &ra->nrm, &ra->x, NULL, NULL, false, eps));
        /* a2v: video queries, audio keys and values */
        CQ_TRY(modulate(m, rv, Sv->dim, &rv->mc, &rv->nrm, M_1A2V, M_A2V_SH));
        CQ_TRY(modulate(m, ra, Sa->dim, &ra->mc, &ra->nrm, M_1A2V, M_A2V_SH));
        tapf(m, &rv->mc, "b%d_a2v_q", l);
        tapf(m, &ra->mc, "b%d_a2v_kv", l);
        CQ_TRY(attend(m, f, &Sv->blk[l].cross, &Sa->gidx, &rv->mc, &ra->mc, &rv->xc, &rv->xs, &ra->xc, &ra->xs, false,
                      Sv->dim, &out));
        tapf(m, &out, "b%d_a2v_out", l);
        CQ_TRY(gated_res(m, rv, Sv->dim, &rv->x, &out, M_G_CA));
        /* v2a: audio queries, video keys and values */
        CQ_TRY(modulate(m, ra, Sa->dim, &ra->mc, &ra->nrm, M_1V2A, M_V2A_SH));
        CQ_TRY(modulate(m, rv, Sv->dim, &rv->mc, &rv->nrm, M_1V2A, M_V2A_SH));
        tapf(m, &ra->mc, "b%d_v2a_q", l);
        tapf(m, &rv->mc, "b%d_v2a_kv", l);
        CQ_TRY(attend(m, f, &Sa->blk[l].cross, &Sa->gidx, &ra->mc, &rv->mc, &ra->xc, &ra->xs, &rv->xc, &rv->xs, false,
                      Sa->dim, &out));
        tapf(m, &out, "b%d_v2a_out", l);
        CQ_TRY(gated_res(m, ra, Sa->dim, &ra->x, &out, M_G_CA));
    }
    /* 4. feed-forward */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_FF, M_SH_FF));
        tapf(m, &r->hn, "b%d_%sff_in", l, S->tp);
        cq_tensor h = v2(&f->ffh, r->n, 4 * S->dim);
        cq_matmul_args mm = {.y = &h, .x = &r->hn, .w = &B->ff1, .bias = S->ffb ? &B->ff1b : NULL,
                             .act = CQ_ACT_GELU_TANH};
        CQ_TRY(cq_op_matmul(be, &mm));
        out = v2(&f->proj, r->n, S->dim);
        CQ_TRY(cq_op_linear(be, &out, &h, &B->ff2, S->ffb ? &B->ff2b : NULL));
        tapf(m, &out, "b%d_%sff_out", l, S->tp);
        CQ_TRY(gated_res(m, r, S->dim, &r->x, &out, M_G_FF));
        tapf(m, &r->x, "block%d_%s", l, S->name);
    }
    return CQ_OK;
}

/* LayerNorm * (1 + row 1 + E) + (row 0 + E) per run, then proj_out. */
static cq_status head(cq_ltx2 *m, lx_srun *r, const lx_stream *S) {
    cq_backend *be = m->be;
    const int64_t D = S->dim;
    for (int g = 0; g < r->G; g++) {
        cq_tensor om = sub2(&r->outm, (int64_t)g * 2, 2, D), e = sub2(&r->t_emb, g, 1, D);
        CQ_TRY(cq_op_binary(be, &om, &S->sst_out, &e, CQ_BINARY_ADD));
        cq_tensor sh = sub2(&r->outm, (int64_t)g * 2, 1, D), sc = sub2(&r->outm, (int64_t)g * 2 + 1, 1, D);
        cq_tensor xv = cq_tensor_rows_view(&r->x, r->grp[g].r0, r->grp[g].n);
        cq_tensor hv = cq_tensor_rows_view(&r->hn, r->grp[g].r0, r->grp[g].n);
        CQ_TRY(cq_op_layernorm(be, &hv, &xv, &sc, &sh, LX_OUT_EPS));
    }
    return cq_op_linear(be, &r->y, &r->hn, &S->pout, &S->poutb);
}

cq_status cq_ltx2_forward(cq_ltx2 *m, const cq_ltx2_inputs *in, float *video_out, float *audio_out) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: forward needs a model");
    CQ_TRY(check_inputs(m, in, video_out, audio_out));
    lx_fwd *f = cq_calloc(1, sizeof *f);
    if (!f) return CQ_ERR_NOMEM;
    const cq_ltx2_config *c = &m->cfg;
    lx_srun *rv = &f->r[ST_VIDEO], *ra = &f->r[ST_AUDIO];
    rv->n = (int64_t)in->frames * in->height * in->width;
    ra->n = in->audio_frames;
    rv->L = in->n_ctx;
    ra->L = in->n_audio_ctx;
    cq_status s = make_runs("video", in->timestep, in->n_timestep, rv->n, rv);
    if (s == CQ_OK) s = make_runs("audio", in->audio_timestep, in->n_audio_timestep, ra->n, ra);
    if (s == CQ_OK) s = fwd_alloc(m, f);
    const float *lat[ST_COUNT] = {in->video, in->audio}, *ctx[ST_COUNT] = {in->ctx, in->audio_ctx};
    float *outs[ST_COUNT] = {video_out, audio_out};
    for (int si = 0; s == CQ_OK && si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        s = cq_tensor_upload(&r->lat, lat[si], (size_t)(r->n * S->cin) * sizeof(float));
        if (s == CQ_OK) s = cq_tensor_upload(&r->ctx, ctx[si], (size_t)(r->L * S->dim) * sizeof(float));
        if (s == CQ_OK) s = cq_op_linear(m->be, &r->x, &r->lat, &S->pin, &S->pinb);
        if (s == CQ_OK) tapf(m, &r->x, "%sproj_in", S->tp);
    }
    if (s == CQ_OK) s = ropes(m, f, in);
    if (s == CQ_OK) s = tables(m, f, in);
    for (int l = 0; s == CQ_OK && l < c->n_layers; l++) s = block(m, f, in, l);
    for (int si = 0; s == CQ_OK && si < ST_COUNT; si++) {
        lx_srun *r = &f->r[si];
        s = head(m, r, &m->s[si]);
        if (s == CQ_OK) tapf(m, &r->y, si == ST_VIDEO ? "sample" : "audio_sample");
        if (s == CQ_OK) s = cq_tensor_download(&r->y, outs[si], (size_t)(r->n * m->s[si].cout) * sizeof(float));
    }
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    fwd_free(f);
    cq_free(f);
    return s;
}
