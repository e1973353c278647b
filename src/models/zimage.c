/*
 * zimage.c — the Z-Image denoiser, written once against the op layer.
 *
 * Semantics follow diffusers' ZImageTransformer2DModel (basic mode, one image
 * of one frame per call):
 *  - timestep: t * t_scale -> 256-channel sinusoid (cos half first) ->
 *    Linear+bias -> SiLU -> Linear+bias = adaln_input [min(dim, 256)]; the
 *    blocks' adaLN Linear reads it as it is (no SiLU), the final layer's
 *    reads SiLU(adaln_input);
 *  - image: 2x2 patches, channel fastest (zimage.h), Linear+bias; caption:
 *    RMSNorm(w) -> Linear+bias; each padded to a multiple of 32 rows, the pad
 *    rows then replaced by the learned x_pad_token / cap_pad_token;
 *  - block: x += g1 * RMSNorm2(attn(RMSNorm1(x) * (1 + s1))); x += g2 *
 *    FFNNorm2(w2(silu(w1 h) * w3 h)), h = FFNNorm1(x) * (1 + s2); gates
 *    tanh-ed; [s1, g1, s2, g2] = adaLN Linear(adaln_input). Context-refiner
 *    blocks are the same without modulation (no scales, gates 1);
 *  - attention: per-head RMSNorm(w, eps 1e-5) on q and k, 3-axis RoPE with
 *    adjacent pairs rotated as complex numbers, no mask (one image);
 *  - noise refiner on the image rows, context refiner on the caption rows,
 *    then the main layers on [image | caption];
 *  - final: LayerNorm(no affine, eps 1e-6) * (1 + scale) -> Linear+bias on
 *    the real image rows (the reference computes every row and drops the
 *    rest; rows are independent there).
 * The caption path depends only on the prompt: prepare computes it once and
 * each step copies its rows into the joint sequence.
 */
#include "models/zimage.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/dit.h"
#include "models/tables.h"

#define ZI_TPROJ CQ_ZIMAGE_TIMESTEP_CHANNELS
#define ZI_SEQ CQ_ZIMAGE_SEQ_MULTIPLE
#define ZI_QK_EPS 1e-5f    /* the attention's q/k RMSNorm: fixed in the reference, not norm_eps */
#define ZI_FINAL_EPS 1e-6f /* the final LayerNorm */
#define ZI_MAX_ROWS (1 << 22) /* joint-sequence rows: far beyond any image the RoPE tables allow */

typedef struct zi_block {
    cq_tensor q, k, v, o;
    cq_tensor norm_q, norm_k; /* F32 [head_dim] */
    cq_tensor w1, w2, w3;
    cq_tensor norm1, norm2, ffn_norm1, ffn_norm2; /* F32 [dim] */
    cq_tensor mod_w, mod_b;   /* modulated blocks: [4 dim, adaln_dim], [4 dim] */
} zi_block;

struct cq_zimage {
    cq_backend *be;
    cq_zimage_config cfg;
    cq_tt_held held; /* every backend tensor below (models/kit/tensors.h) */
    cq_tensor t1_w, t1_b, t2_w, t2_b;
    cq_tensor cap_norm, cap_w, cap_b;
    cq_tensor x_w, x_b;
    cq_tensor fmod_w, fmod_b, fout_w, fout_b;
    cq_tensor x_pad, cap_pad; /* [31, dim]: the pad token repeated, copied over pad rows */
    zi_block *noise, *context, *layers;
    cq_dit_rope rope;
    cq_zimage_tap_fn tap;
    void *tap_user;
};

struct cq_zimage_cond {
    cq_zimage *m;
    cq_zimage_layout lay;
    int64_t rows;            /* N' + L' */
    cq_tensor cap;           /* [L', dim]: the caption rows after the context refiner */
    cq_tensor cos_t, sin_t;  /* [rows, head_dim / 2] */
    /* step buffers */
    cq_tensor feat;          /* [1, 256] timestep features (uploaded) */
    cq_tensor thid;          /* [1, 1024] */
    cq_tensor adaln, adaln_silu; /* [1, adaln_dim] */
    cq_tensor mod;           /* [n_refiner + n_layers, 4 dim]: 1 + s1 | tanh(g1) | 1 + s2 | tanh(g2) */
    cq_tensor fscale;        /* [1, dim]: the final layer's scale (the LayerNorm op adds the 1) */
    /* [rows, ...]: x is the residual stream (f32); h, q, k, v, att and mlp are in the backend's activation
     * dtype (cq_backend_act_dtype). The norms, the modulation's scales and the residual adds run on f32
     * rows (an op's output has its input's dtype), so where the activations are narrower those rows are
     * hn (f32) and a copy rounds the normed rows into h; with f32 activations hn is not allocated and h
     * serves both. */
    cq_tensor x, hn, h, q, k, v, att, mlp;
    cq_tensor tin, out;      /* [N, 4C] */
    cq_dit_stepper stepper;
};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
/* One patch size list ("all_patch_size": [2]) that must hold exactly `want`. */
static cq_status patch_list(const cq_cfg *g, const char *key, int want) {
    int v[8], n;
    CQ_TRY(cq_cfg_ints(g, key, 1, 8, 1, 64, v, &n));
    if (n == 0) return CQ_OK; /* absent: the reference's default, [want] */
    if (n != 1 || v[0] != want)
        return cq_fail(CQ_ERR_UNSUPPORTED, "zimage: config %s must be [%d] (%d entries, the first %d); other patch "
                       "sizes are not supported", key, want, n, v[0]);
    return CQ_OK;
}

/* Absent or null members take diffusers' defaults (models/kit/config.h). */
static cq_status parse_json(const cJSON *j, void *out) {
    cq_zimage_config *c = out;
    const cq_cfg g = {j, "zimage", ""};
    CQ_TRY(cq_cfg_class(&g, "ZImageTransformer2DModel", false));
    memset(c, 0, sizeof *c);
    const int big = 1 << 16;
    CQ_TRY(patch_list(&g, "all_patch_size", 2));
    CQ_TRY(patch_list(&g, "all_f_patch_size", 1));
    if (cq_cfg_get(&g, "siglip_feat_dim"))
        return cq_fail(CQ_ERR_UNSUPPORTED, "zimage: config sets siglip_feat_dim (the Omni variant), which is not "
                       "supported");
    bool qk_norm;
    CQ_TRY(cq_cfg_bool(&g, "qk_norm", true, &qk_norm));
    if (!qk_norm) return cq_fail(CQ_ERR_UNSUPPORTED, "zimage: config qk_norm false is not supported (Z-Image uses true)");
    CQ_TRY(cq_cfg_int(&g, "in_channels", 16, 1, 1024, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "dim", 3840, 1, big, &c->dim));
    CQ_TRY(cq_cfg_int(&g, "n_layers", 30, 1, 4096, &c->n_layers));
    CQ_TRY(cq_cfg_int(&g, "n_refiner_layers", 2, 0, 4096, &c->n_refiner_layers));
    CQ_TRY(cq_cfg_int(&g, "n_heads", 30, 1, big, &c->n_heads));
    /* n_kv_heads is in the config but the reference's attention ignores it (every head has its own k/v) */
    CQ_TRY(cq_cfg_int(&g, "cap_feat_dim", 2560, 1, big, &c->cap_feat_dim));
    double eps, theta, ts;
    CQ_TRY(cq_cfg_num(&g, "norm_eps", 1e-5, 0.0, true, 0.5, &eps));
    CQ_TRY(cq_cfg_num(&g, "rope_theta", 256.0, 1.0, false, 1e9, &theta));
    CQ_TRY(cq_cfg_num(&g, "t_scale", 1000.0, 0.0, true, 1e9, &ts));
    c->norm_eps = (float)eps;
    c->rope_theta = theta;
    c->t_scale = (float)ts;
    int ax[3] = {32, 48, 48}, lens[3] = {1024, 512, 512}, n;
    CQ_TRY(cq_cfg_ints(&g, "axes_dims", 3, 3, 1, 1024, ax, &n));
    CQ_TRY(cq_cfg_ints(&g, "axes_lens", 3, 3, 1, 1 << 20, lens, &n));
    memcpy(c->axes_dims, ax, sizeof ax);
    memcpy(c->axes_lens, lens, sizeof lens);
    if (c->dim % c->n_heads)
        return cq_fail(CQ_ERR_PARSE, "zimage: config dim %d is not a multiple of n_heads %d", c->dim, c->n_heads);
    c->head_dim = c->dim / c->n_heads;
    for (int i = 0; i < 3; i++)
        if (ax[i] % 2 || ax[i] > 128)
            return cq_fail(CQ_ERR_PARSE, "zimage: config axes_dims[%d] = %d must be even and at most 128", i, ax[i]);
    if (ax[0] + ax[1] + ax[2] != c->head_dim)
        return cq_fail(CQ_ERR_PARSE, "zimage: config axes_dims sum to %d, but the head dim (dim / n_heads) is %d",
                       ax[0] + ax[1] + ax[2], c->head_dim);
    /* int(dim / 3 * 8) in double arithmetic, as Python computes it */
    c->ffn_hidden = (int)((double)c->dim / 3.0 * 8.0);
    c->adaln_dim = c->dim < CQ_ZIMAGE_ADALN_MAX ? c->dim : CQ_ZIMAGE_ADALN_MAX;
    c->patch_channels = 4 * c->in_channels;
    return CQ_OK;
}

cq_status cq_zimage_parse_config(const cq_cmf *cmf, const char *prefix, cq_zimage_config *c) {
    return cq_cfg_read(cmf, prefix, "zimage", parse_json, c);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
static cq_status bind_block(const cq_tt_binder *b, const char *prefix, const char *stem, int l, bool modulated,
                            zi_block *B) {
#define W(field, suffix) CQ_TRY(cq_tt_bind_weight(b, &B->field, "%s%s.%d." suffix, prefix, stem, l))
#define V(field, suffix) CQ_TRY(cq_tt_bind_vector(b, &B->field, "%s%s.%d." suffix, prefix, stem, l))
    W(q, "attention.to_q.weight");
    W(k, "attention.to_k.weight");
    W(v, "attention.to_v.weight");
    W(o, "attention.to_out.0.weight");
    V(norm_q, "attention.norm_q.weight");
    V(norm_k, "attention.norm_k.weight");
    W(w1, "feed_forward.w1.weight");
    W(w2, "feed_forward.w2.weight");
    W(w3, "feed_forward.w3.weight");
    V(norm1, "attention_norm1.weight");
    V(norm2, "attention_norm2.weight");
    V(ffn_norm1, "ffn_norm1.weight");
    V(ffn_norm2, "ffn_norm2.weight");
    if (modulated) {
        W(mod_w, "adaLN_modulation.0.weight");
        V(mod_b, "adaLN_modulation.0.bias");
    }
#undef W
#undef V
    return CQ_OK;
}

/* A pad token [dim] as a [31, dim] block of copies: one copy op covers every pad row. */
static cq_status bind_pad(const cq_tt_binder *b, const char *prefix, const char *name, int dim, cq_tensor *out) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s%s", prefix, name));
    float *rows = cq_mallocn((size_t)(ZI_SEQ - 1) * (size_t)dim, sizeof(float));
    if (!rows) return CQ_ERR_NOMEM;
    cq_status s = cq_tt_read_vector(b->who, v, rows, (size_t)dim);
    for (int r = 1; s == CQ_OK && r < ZI_SEQ - 1; r++) memcpy(rows + (size_t)r * dim, rows, (size_t)dim * sizeof(float));
    if (s == CQ_OK) s = cq_tt_held_upload(b, rows, ZI_SEQ - 1, dim, out);
    cq_free(rows);
    return s;
}

static cq_status bind_all(cq_zimage *m, const cq_cmf *cmf, const char *p, const cq_tt_list *table) {
    const cq_zimage_config *c = &m->cfg;
    const cq_tt_binder b = {"zimage", table, cmf, m->be, &m->held};
#define W(field, name) CQ_TRY(cq_tt_bind_weight(&b, &m->field, "%s" name, p))
#define V(field, name) CQ_TRY(cq_tt_bind_vector(&b, &m->field, "%s" name, p))
    W(t1_w, "t_embedder.mlp.0.weight");
    V(t1_b, "t_embedder.mlp.0.bias");
    W(t2_w, "t_embedder.mlp.2.weight");
    V(t2_b, "t_embedder.mlp.2.bias");
    V(cap_norm, "cap_embedder.0.weight");
    W(cap_w, "cap_embedder.1.weight");
    V(cap_b, "cap_embedder.1.bias");
    W(x_w, "all_x_embedder.2-1.weight");
    V(x_b, "all_x_embedder.2-1.bias");
    W(fmod_w, "all_final_layer.2-1.adaLN_modulation.1.weight");
    V(fmod_b, "all_final_layer.2-1.adaLN_modulation.1.bias");
    W(fout_w, "all_final_layer.2-1.linear.weight");
    V(fout_b, "all_final_layer.2-1.linear.bias");
#undef W
#undef V
    CQ_TRY(bind_pad(&b, p, "x_pad_token", c->dim, &m->x_pad));
    CQ_TRY(bind_pad(&b, p, "cap_pad_token", c->dim, &m->cap_pad));
    for (int l = 0; l < c->n_refiner_layers; l++) {
        CQ_TRY(bind_block(&b, p, "noise_refiner", l, true, &m->noise[l]));
        CQ_TRY(bind_block(&b, p, "context_refiner", l, false, &m->context[l]));
    }
    for (int l = 0; l < c->n_layers; l++) CQ_TRY(bind_block(&b, p, "layers", l, true, &m->layers[l]));
    return CQ_OK;
}

cq_status cq_zimage_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_zimage **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_zimage *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_zimage_parse_config(cmf, prefix, &m->cfg);
    const cq_zimage_config *c = &m->cfg;
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_zimage_tensors(c, prefix, &table);
    if (s == CQ_OK) {
        size_t nr = (size_t)(c->n_refiner_layers ? c->n_refiner_layers : 1);
        m->noise = cq_calloc(nr, sizeof *m->noise);
        m->context = cq_calloc(nr, sizeof *m->context);
        m->layers = cq_calloc((size_t)c->n_layers, sizeof *m->layers);
        if (!m->noise || !m->context || !m->layers) s = CQ_ERR_NOMEM;
    }
    if (s == CQ_OK) s = bind_all(m, cmf, prefix, &table);
    cq_tt_list_free(&table);
    /* RoPE frequencies per axis in f64, angles rounded to f32 as the reference's float64 table and .float() */
    if (s == CQ_OK) s = cq_dit_rope_init_f64(&m->rope, 3, c->axes_dims, c->rope_theta);
    if (s != CQ_OK) {
        cq_zimage_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_zimage_free(cq_zimage *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    cq_free(m->noise);
    cq_free(m->context);
    cq_free(m->layers);
    cq_free(m);
}

const cq_zimage_config *cq_zimage_get_config(const cq_zimage *m) { return &m->cfg; }

void cq_zimage_set_tap(cq_zimage *m, cq_zimage_tap_fn fn, void *user) {
    m->tap = fn;
    m->tap_user = user;
}

/* ------------------------------------------------------------------------ */
/* Layout, positions, tokens                                                */
/* ------------------------------------------------------------------------ */
static int round_up(int n) { return n + (ZI_SEQ - n % ZI_SEQ) % ZI_SEQ; }

cq_status cq_zimage_layout_for(const cq_zimage_config *c, int n_cap, int lat_h, int lat_w, cq_zimage_layout *lay) {
    memset(lay, 0, sizeof *lay);
    if (lat_h <= 0 || lat_w <= 0 || lat_h % 2 || lat_w % 2)
        return cq_fail(CQ_ERR_SHAPE, "zimage: a %dx%d latent cannot be cut into 2x2 patches (both sides must be even "
                       "and positive)", lat_h, lat_w);
    if (n_cap <= 0) return cq_fail(CQ_ERR_SHAPE, "zimage: the caption has %d rows (at least 1 is needed)", n_cap);
    const int th = lat_h / 2, tw = lat_w / 2;
    if (th >= c->axes_lens[1] || tw >= c->axes_lens[2])
        return cq_fail(CQ_ERR_SHAPE, "zimage: a %dx%d latent is %dx%d tokens; the model's RoPE tables (axes_lens) "
                       "allow at most %dx%d", lat_h, lat_w, th, tw, c->axes_lens[1] - 1, c->axes_lens[2] - 1);
    if (n_cap > ZI_MAX_ROWS)
        return cq_fail(CQ_ERR_SHAPE, "zimage: the caption has %d rows; at most %d are supported", n_cap, ZI_MAX_ROWS);
    if (round_up(n_cap) + 1 >= c->axes_lens[0])
        return cq_fail(CQ_ERR_SHAPE, "zimage: a caption of %d rows (padded to %d) puts the image at RoPE position %d; "
                       "the model's table (axes_lens[0]) ends at %d", n_cap, round_up(n_cap), round_up(n_cap) + 1,
                       c->axes_lens[0] - 1);
    const int64_t n_img = (int64_t)th * tw, rows = n_img + ZI_SEQ + round_up(n_cap);
    if (rows > ZI_MAX_ROWS)
        return cq_fail(CQ_ERR_SHAPE, "zimage: a %dx%d latent and %d caption rows make a joint sequence of about %lld "
                       "rows; at most %d are supported", lat_h, lat_w, n_cap, (long long)rows, ZI_MAX_ROWS);
    lay->lat_h = lat_h;
    lay->lat_w = lat_w;
    lay->tok_h = th;
    lay->tok_w = tw;
    lay->n_img = (int)n_img;
    lay->n_img_pad = round_up((int)n_img);
    lay->n_cap = n_cap;
    lay->n_cap_pad = round_up(n_cap);
    return CQ_OK;
}

void cq_zimage_positions(const cq_zimage_layout *lay, int32_t *pos) {
    const int L = lay->n_cap_pad, N = lay->n_img, Np = lay->n_img_pad;
    for (int i = 0; i < Np; i++) {
        int32_t *p = pos + 3 * (size_t)i;
        if (i < N) {
            p[0] = L + 1;
            p[1] = i / lay->tok_w;
            p[2] = i % lay->tok_w;
        } else {
            p[0] = p[1] = p[2] = 0;
        }
    }
    for (int i = 0; i < L; i++) {
        int32_t *p = pos + 3 * ((size_t)Np + i);
        p[0] = 1 + i;
        p[1] = p[2] = 0;
    }
}

/* Inputs must be finite (models/kit/dit.h). */
static cq_status check_finite(const char *what, const float *x, size_t rows, size_t cols) {
    return cq_dit_check_finite("zimage", what, x, rows, cols);
}

/* ------------------------------------------------------------------------ */
/* The blocks                                                               */
/* ------------------------------------------------------------------------ */
static void tap(const cq_zimage *m, const char *name, const cq_tensor *t) {
    if (m->tap) m->tap(m->tap_user, name, t);
}

/* The modulation table (models/kit/dit.h): per modulated block 1 + s1 | tanh(g1) | 1 + s2 | tanh(g2). */
static cq_dit_mod mod_table(const cq_zimage *m, const cq_zimage_cond *c) {
    return (cq_dit_mod){.t = &c->mod, .dim = m->cfg.dim, .per_row = 4};
}

/* Block B on rows [r0, r0 + n) of the joint sequence in c->x (their RoPE rows alike), modulated by row
 * mod_row of the table, or unmodulated (mod_row < 0). */
static cq_status block(cq_zimage *m, cq_zimage_cond *c, const zi_block *B, int64_t r0, int64_t n, int mod_row) {
    cq_backend *be = m->be;
    const cq_zimage_config *cf = &m->cfg;
    cq_tensor x = cq_tensor_rows_view(&c->x, r0, n), h = cq_tensor_rows_view(&c->h, 0, n);
    const bool narrow = c->h.dtype != CQ_DTYPE_F32; /* h and hn apart (see cq_zimage_cond) */
    cq_tensor hn = narrow ? cq_tensor_rows_view(&c->hn, 0, n) : h;
    cq_tensor q = cq_tensor_rows_view(&c->q, 0, n), k = cq_tensor_rows_view(&c->k, 0, n);
    cq_tensor v = cq_tensor_rows_view(&c->v, 0, n), att = cq_tensor_rows_view(&c->att, 0, n);
    cq_tensor mlp = cq_tensor_rows_view(&c->mlp, 0, n);
    cq_tensor cs = cq_tensor_rows_view(&c->cos_t, r0, n), sn = cq_tensor_rows_view(&c->sin_t, r0, n);
    const cq_dit_mod t = mod_table(m, c);
    cq_tensor s1 = {0}, g1 = {0}, s2 = {0}, g2 = {0};
    if (mod_row >= 0) {
        s1 = cq_dit_mod_vec(&t, mod_row, 0);
        g1 = cq_dit_mod_vec(&t, mod_row, 1);
        s2 = cq_dit_mod_vec(&t, mod_row, 2);
        g2 = cq_dit_mod_vec(&t, mod_row, 3);
    }
    /* attention half: RMSNorm1(x) * (1 + s1), in the reference's order (norm, then the scale) */
    CQ_TRY(cq_op_rmsnorm(be, &hn, &x, &B->norm1, NULL, false, cf->norm_eps));
    if (mod_row >= 0) CQ_TRY(cq_op_binary(be, &hn, &hn, &s1, CQ_BINARY_MUL));
    if (narrow) CQ_TRY(cq_op_copy(be, &h, &hn));
    /* the three projections of h back to back: a backend may prepare h once for all three */
    CQ_TRY(cq_op_linear(be, &q, &h, &B->q, NULL));
    CQ_TRY(cq_op_linear(be, &k, &h, &B->k, NULL));
    CQ_TRY(cq_op_linear(be, &v, &h, &B->v, NULL));
    CQ_TRY(cq_op_qk_norm_rope(be, &q, cf->n_heads, cf->head_dim, &B->norm_q, ZI_QK_EPS, &cs, &sn,
                              CQ_ROPE_INTERLEAVED, 0));
    CQ_TRY(cq_op_qk_norm_rope(be, &k, cf->n_heads, cf->head_dim, &B->norm_k, ZI_QK_EPS, &cs, &sn,
                              CQ_ROPE_INTERLEAVED, 0));
    cq_attn_args at = {.o = &att, .q = &q, .k = &k, .v = &v, .n_heads = cf->n_heads, .n_kv_heads = cf->n_heads,
                       .head_dim = cf->head_dim};
    CQ_TRY(cq_op_attention(be, &at));
    /* x += tanh(g1) * RMSNorm2(to_out(att)): the post-norm sits between the projection and the gate */
    CQ_TRY(cq_op_linear(be, &hn, &att, &B->o, NULL));
    CQ_TRY(cq_op_rmsnorm(be, &hn, &hn, &B->norm2, NULL, false, cf->norm_eps));
    CQ_TRY(cq_op_gated_add(be, &x, &hn, mod_row >= 0 ? &g1 : NULL));
    /* FFN half */
    CQ_TRY(cq_op_rmsnorm(be, &hn, &x, &B->ffn_norm1, NULL, false, cf->norm_eps));
    if (mod_row >= 0) CQ_TRY(cq_op_binary(be, &hn, &hn, &s2, CQ_BINARY_MUL));
    if (narrow) CQ_TRY(cq_op_copy(be, &h, &hn));
    cq_matmul_args mm = {.y = &mlp, .x = &h, .w = &B->w1, .w2 = &B->w3, .act = CQ_ACT_SWIGLU};
    CQ_TRY(cq_op_matmul(be, &mm));
    CQ_TRY(cq_op_linear(be, &hn, &mlp, &B->w2, NULL));
    CQ_TRY(cq_op_rmsnorm(be, &hn, &hn, &B->ffn_norm2, NULL, false, cf->norm_eps));
    return cq_op_gated_add(be, &x, &hn, mod_row >= 0 ? &g2 : NULL);
}

/* ------------------------------------------------------------------------ */
/* Conditioning                                                             */
/* ------------------------------------------------------------------------ */
void cq_zimage_cond_free(cq_zimage_cond *c) {
    if (!c) return;
    cq_dit_stepper_free(&c->stepper);
    cq_tensor *t[] = {&c->cap, &c->cos_t, &c->sin_t, &c->feat, &c->thid, &c->adaln, &c->adaln_silu, &c->mod,
                      &c->fscale, &c->x, &c->hn, &c->h, &c->q, &c->k, &c->v, &c->att, &c->mlp, &c->tin, &c->out};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    cq_free(c);
}

const cq_zimage_layout *cq_zimage_cond_layout(const cq_zimage_cond *c) { return &c->lay; }

static cq_status cond_alloc(cq_zimage *m, cq_zimage_cond *c) {
    cq_backend *be = m->be;
    const cq_zimage_config *cf = &m->cfg;
    const int64_t R = c->rows, D = cf->dim, N = c->lay.n_img;
    const int n_mod = cf->n_refiner_layers + cf->n_layers;
    const cq_dtype act = cq_backend_act_dtype(be);
#define A2T(t, dt, r, cols) CQ_TRY(cq_tensor_alloc_2d(be, dt, r, cols, &c->t))
#define A2(t, r, cols) A2T(t, CQ_DTYPE_F32, r, cols)
    A2(cap, c->lay.n_cap_pad, D);
    A2(cos_t, R, cf->head_dim / 2);
    A2(sin_t, R, cf->head_dim / 2);
    A2(feat, 1, ZI_TPROJ);
    A2(thid, 1, CQ_ZIMAGE_TIMESTEP_MID);
    A2(adaln, 1, cf->adaln_dim);
    A2(adaln_silu, 1, cf->adaln_dim);
    A2(mod, n_mod, 4 * D);
    A2(fscale, 1, D);
    A2(x, R, D);
    if (act != CQ_DTYPE_F32) A2(hn, R, D);
    A2T(h, act, R, D);
    A2T(q, act, R, D);
    A2T(k, act, R, D);
    A2T(v, act, R, D);
    A2T(att, act, R, D);
    A2T(mlp, act, R, cf->ffn_hidden);
    A2(tin, N, cf->patch_channels);
    A2(out, N, cf->patch_channels);
#undef A2
#undef A2T
    return CQ_OK;
}

/* The RoPE tables of the joint sequence into cos_t / sin_t. */
static cq_status rope_upload(cq_zimage *m, cq_zimage_cond *c) {
    int32_t *pos = cq_mallocn((size_t)c->rows * 3, sizeof(int32_t));
    if (!pos) return CQ_ERR_NOMEM;
    cq_zimage_positions(&c->lay, pos);
    cq_status s = cq_dit_rope_upload(&m->rope, pos, (int)c->rows, &c->cos_t, &c->sin_t);
    cq_free(pos);
    return s;
}

/* cap_embedder and the context refiner on the caption rows, run in place at their rows of the joint sequence,
 * then kept in c->cap. */
static cq_status caption(cq_zimage *m, cq_zimage_cond *c, const float *cap_feats) {
    cq_backend *be = m->be;
    const cq_zimage_config *cf = &m->cfg;
    const int64_t Np = c->lay.n_img_pad, L = c->lay.n_cap, Lp = c->lay.n_cap_pad;
    cq_tensor cin = {0}, cn = {0};
    cq_status s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, L, cf->cap_feat_dim, &cin);
    if (s == CQ_OK) s = cq_tensor_upload(&cin, cap_feats, (size_t)L * cf->cap_feat_dim * sizeof(float));
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, L, cf->cap_feat_dim, &cn);
    if (s == CQ_OK) s = cq_op_rmsnorm(be, &cn, &cin, &m->cap_norm, NULL, false, cf->norm_eps);
    cq_tensor xc = cq_tensor_rows_view(&c->x, Np, L);
    if (s == CQ_OK) s = cq_op_linear(be, &xc, &cn, &m->cap_w, &m->cap_b);
    if (s == CQ_OK && Lp > L) {
        /* the reference repeats the last row into the pad rows, embeds them, then overwrites them */
        cq_tensor dst = cq_tensor_rows_view(&c->x, Np + L, Lp - L), src = cq_tensor_rows_view(&m->cap_pad, 0, Lp - L);
        s = cq_op_copy(be, &dst, &src);
    }
    cq_tensor xcap = cq_tensor_rows_view(&c->x, Np, Lp);
    if (s == CQ_OK) tap(m, "cap_embed", &xcap);
    for (int l = 0; s == CQ_OK && l < cf->n_refiner_layers; l++) s = block(m, c, &m->context[l], Np, Lp, -1);
    if (s == CQ_OK) tap(m, "cap_refined", &xcap);
    if (s == CQ_OK) s = cq_op_copy(be, &c->cap, &xcap);
    if (s == CQ_OK) s = cq_backend_sync(be);
    cq_tensor_free(&cin);
    cq_tensor_free(&cn);
    return s;
}

cq_status cq_zimage_prepare(cq_zimage *m, const float *cap_feats, int n_cap, int lat_h, int lat_w,
                            cq_zimage_cond **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: prepare needs somewhere to put the conditioning");
    *out = NULL;
    if (!m || !cap_feats) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: prepare needs a model and caption rows");
    cq_zimage_layout lay;
    CQ_TRY(cq_zimage_layout_for(&m->cfg, n_cap, lat_h, lat_w, &lay));
    CQ_TRY(check_finite("caption", cap_feats, (size_t)n_cap, (size_t)m->cfg.cap_feat_dim));
    cq_zimage_cond *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->m = m;
    c->lay = lay;
    c->rows = (int64_t)lay.n_img_pad + lay.n_cap_pad;
    cq_status s = cond_alloc(m, c);
    if (s == CQ_OK) s = rope_upload(m, c);
    if (s == CQ_OK) {
        tap(m, "rope_cos", &c->cos_t);
        tap(m, "rope_sin", &c->sin_t);
        s = caption(m, c, cap_feats);
    }
    if (s != CQ_OK) {
        cq_zimage_cond_free(c);
        return s;
    }
    *out = c;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* The step                                                                 */
/* ------------------------------------------------------------------------ */
/* adaln_input, the blocks' modulation table and the final layer's scale (device ops only). */
static cq_status modulation(cq_zimage *m, cq_zimage_cond *c) {
    cq_backend *be = m->be;
    const cq_zimage_config *cf = &m->cfg;
    cq_matmul_args a = {.y = &c->thid, .x = &c->feat, .w = &m->t1_w, .bias = &m->t1_b, .act = CQ_ACT_SILU};
    CQ_TRY(cq_op_matmul(be, &a));
    CQ_TRY(cq_op_linear(be, &c->adaln, &c->thid, &m->t2_w, &m->t2_b));
    tap(m, "adaln_input", &c->adaln);
    const int n_mod = cf->n_refiner_layers + cf->n_layers;
    const cq_dit_mod t = mod_table(m, c);
    for (int r = 0; r < n_mod; r++) {
        const zi_block *B = r < cf->n_refiner_layers ? &m->noise[r] : &m->layers[r - cf->n_refiner_layers];
        cq_tensor row = cq_tensor_rows_view(&c->mod, r, 1);
        CQ_TRY(cq_op_linear(be, &row, &c->adaln, &B->mod_w, &B->mod_b));
        for (int w = 0; w < 4; w++) {
            cq_tensor vec = cq_dit_mod_vec(&t, r, w);
            /* scales become 1 + s (added in f32 as the reference does), gates tanh(g) */
            if (w % 2 == 0) CQ_TRY(cq_op_unary(be, &vec, &vec, CQ_UNARY_ADD_SCALAR, 1.0f, 0.0f));
            else CQ_TRY(cq_op_unary(be, &vec, &vec, CQ_UNARY_TANH, 0.0f, 0.0f));
        }
    }
    CQ_TRY(cq_op_unary(be, &c->adaln_silu, &c->adaln, CQ_UNARY_SILU, 0.0f, 0.0f));
    return cq_op_linear(be, &c->fscale, &c->adaln_silu, &m->fmod_w, &m->fmod_b);
}

/* The step's device ops, from the uploaded features and tokens to the output in c->out. */
static cq_status step_ops(cq_zimage *m, cq_zimage_cond *c) {
    cq_backend *be = m->be;
    const cq_zimage_config *cf = &m->cfg;
    const int64_t N = c->lay.n_img, Np = c->lay.n_img_pad, Lp = c->lay.n_cap_pad;
    CQ_TRY(modulation(m, c));
    /* image rows: the embedder on the real tokens, the pad token over the pad rows */
    cq_tensor xi = cq_tensor_rows_view(&c->x, 0, N);
    CQ_TRY(cq_op_linear(be, &xi, &c->tin, &m->x_w, &m->x_b));
    if (Np > N) {
        cq_tensor dst = cq_tensor_rows_view(&c->x, N, Np - N), src = cq_tensor_rows_view(&m->x_pad, 0, Np - N);
        CQ_TRY(cq_op_copy(be, &dst, &src));
    }
    cq_tensor ximg = cq_tensor_rows_view(&c->x, 0, Np);
    tap(m, "x_embed", &ximg);
    for (int l = 0; l < cf->n_refiner_layers; l++) CQ_TRY(block(m, c, &m->noise[l], 0, Np, l));
    tap(m, "x_refined", &ximg);
    /* the prepared caption rows after the image's */
    cq_tensor xcap = cq_tensor_rows_view(&c->x, Np, Lp);
    CQ_TRY(cq_op_copy(be, &xcap, &c->cap));
    for (int l = 0; l < cf->n_layers; l++) {
        CQ_TRY(block(m, c, &m->layers[l], 0, c->rows, cf->n_refiner_layers + l));
        if (m->tap) {
            char name[32];
            snprintf(name, sizeof name, "layer_%d", l);
            tap(m, name, &c->x);
        }
    }
    /* final layer on the real image rows: LN(x) * (1 + scale) -> Linear */
    cq_tensor h = cq_tensor_rows_view(c->h.dtype == CQ_DTYPE_F32 ? &c->h : &c->hn, 0, N), sc;
    int64_t shape[1] = {cf->dim};
    CQ_TRY(cq_tensor_subview(&c->fscale, 0, 1, shape, &sc));
    CQ_TRY(cq_op_layernorm(be, &h, &xi, &sc, NULL, ZI_FINAL_EPS));
    return cq_op_linear(be, &c->out, &h, &m->fout_w, &m->fout_b);
}

typedef struct step_call {
    cq_zimage *m;
    cq_zimage_cond *c;
} step_call;

static cq_status step_ops_cb(void *user) {
    step_call *k = user;
    return step_ops(k->m, k->c);
}

cq_status cq_zimage_step(cq_zimage *m, cq_zimage_cond *c, const float *x, float t, float *out) {
    if (!m || !c || c->m != m)
        return cq_fail(CQ_ERR_INVALID_ARG, "zimage: step needs a conditioning made by this model's prepare");
    if (!x || !out) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: step needs latent tokens and an output buffer");
    if (!(t >= 0.0f && t <= 1.0f)) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: timestep %g is outside [0, 1]", (double)t);
    const cq_zimage_config *cf = &m->cfg;
    const size_t N = (size_t)c->lay.n_img, P = (size_t)cf->patch_channels;
    CQ_TRY(check_finite("latent tokens", x, N, P));
    /* the inputs go into the step's own tensors, then the device ops run: directly, or recorded (second step)
     * and replayed (every step after) */
    float feat[ZI_TPROJ];
    const cq_dit_tproj tp = {.dim = ZI_TPROJ, .flip_sin_to_cos = true, .scale = 1.0f, .max_period = 10000.0f};
    const float tt = t * cf->t_scale; /* t * t_scale in f32, then the sinusoid */
    cq_dit_timestep_features(&tp, &tt, 1, feat);
    CQ_TRY(cq_tensor_upload(&c->feat, feat, sizeof feat));
    CQ_TRY(cq_tensor_upload(&c->tin, x, N * P * sizeof(float)));
    step_call call = {m, c};
    if (m->tap) CQ_TRY(step_ops(m, c)); /* taps download between ops: never recorded */
    else CQ_TRY(cq_dit_stepper_run(&c->stepper, m->be, step_ops_cb, &call, "zimage"));
    CQ_TRY(cq_tensor_download(&c->out, out, N * P * sizeof(float)));
    return cq_backend_sync(m->be);
}

cq_status cq_zimage_forward(cq_zimage *m, const float *latent, int lat_h, int lat_w, const float *cap_feats, int n_cap,
                            float t, float *out) {
    if (!m || !latent || !out) return cq_fail(CQ_ERR_INVALID_ARG, "zimage: forward needs a model, a latent and an output");
    cq_zimage_cond *c = NULL;
    CQ_TRY(cq_zimage_prepare(m, cap_feats, n_cap, lat_h, lat_w, &c));
    const size_t n = (size_t)c->lay.n_img * (size_t)m->cfg.patch_channels;
    float *tok = cq_mallocn(2 * n, sizeof(float));
    cq_status s = tok ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        cq_latents_patchify2(latent, tok, m->cfg.in_channels, lat_h, lat_w);
        s = cq_zimage_step(m, c, tok, t, tok + n);
    }
    if (s == CQ_OK) cq_latents_unpatchify2(tok + n, out, m->cfg.in_channels, lat_h, lat_w);
    cq_free(tok);
    cq_zimage_cond_free(c);
    return s;
}

/* ------------------------------------------------------------------------ */
/* The denoiser interface                                                   */
/* ------------------------------------------------------------------------ */
static cq_status dn_prepare(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond) {
    cq_zimage_cond *c = NULL;
    cq_status s = cq_zimage_prepare(self, rows, n_rows, lat_h, lat_w, &c);
    *cond = c;
    return s;
}

static cq_status dn_step(void *self, void *cond, const float *x, float t, float *out) {
    return cq_zimage_step(self, cond, x, t, out);
}

static void dn_cond_free(void *self, void *cond) {
    (void)self;
    cq_zimage_cond_free(cond);
}

cq_denoiser cq_zimage_denoiser(cq_zimage *m) {
    return (cq_denoiser){.self = m, .channels = cq_zimage_get_config(m)->patch_channels, .prepare = dn_prepare,
                         .step = dn_step, .cond_free = dn_cond_free};
}
