/*
 * qi21.c — the Qwen-Image-2.1 denoiser, written once against the op layer.
 *
 * Semantics follow diffusers' QwenImage21Transformer2DModel:
 *  - text rows: zero-centred RMSNorm (w + 1) -> Linear -> GELU-tanh -> Linear;
 *    latent rows: one Linear; timestep: 256-channel sinusoid (cos half first,
 *    t * 1000 inside) -> Linear -> SiLU -> Linear.
 *  - ONE modulation Linear(SiLU(temb)) -> [scale1, gate1, scale2, gate2] shared
 *    by every block; with causal_condition, text and condition-image rows use
 *    the t = 0 row and target rows the sampled t.
 *  - block: x += tanh(g1) * attn(LN(x) * (1 + s1)); x += tanh(g2) * mlp(LN(x) *
 *    (1 + s2)); mlp = out(silu(gate_layer(h)) * proj(h)); no biases anywhere.
 *  - attention: per-head RMSNorm on q and k, 3-axis complex RoPE (adjacent
 *    pairs), block-causal visibility (q >= k, or same image block).
 *  - final: LN(x) * (1 + scale) -> proj_out.
 * Since the prefix (text + condition images) never sees the target nor t, its
 * per-layer post-RoPE keys/values are computed once (prefill) and every step
 * runs only the target rows against [cached prefix, target].
 */
#include "models/qi21.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/dit.h"
#include "models/tables.h"

#define QI21_TPROJ CQ_QI21_TIMESTEP_CHANNELS /* sinusoidal timestep channels */
#define QI21_MAX_ROWS (1 << 24) /* joint-sequence rows: keeps every row index an int */
/* The reference's RoPE tables hold positions [-1024, 8192): image sides
 * up to 2048 (centred grids reach -1024) and frame positions below 8192. */
#define QI21_MAX_SIDE 2048
#define QI21_MAX_POS 8192

typedef struct qi21_layer {
    cq_tensor q, k, v, o;
    cq_tensor norm_q, norm_k; /* F32 [head_dim] */
    cq_tensor mlp_gate, mlp_proj, mlp_out;
} qi21_layer;

struct cq_qi21 {
    cq_backend *be;
    cq_qi21_config cfg;
    cq_tensor t_lin1, t_lin2;       /* timestep embedder */
    cq_tensor txt_norm;             /* F32 [context_in_dim], zero-centred */
    cq_tensor txt_in1, txt_in2;
    cq_tensor img_in;
    cq_tensor mod;                  /* [4D, D] */
    cq_tensor norm_out;             /* [D, D] */
    cq_tensor proj_out;             /* [out, D] */
    qi21_layer *layers;
    cq_tensor *owned;               /* F32 copies made at load */
    int n_owned, cap_owned;
    cq_dit_rope rope;               /* the three axes' frequencies (models/kit/dit.h) */
};

/* Per-call activations for `n` query rows (prefill, full forward or a cache's step).
 * x is the residual stream (f32); h, q, k, v, att and mlp are in the
 * backend's activation dtype (cq_backend_act_dtype). A LayerNorm writes its
 * input's dtype, so where that dtype is narrower than f32 the normed rows
 * land in hn (f32) first and a copy rounds them into h; with f32
 * activations hn is not allocated and h takes the LayerNorm directly. */
typedef struct qi21_scratch {
    int64_t n;
    cq_tensor x, hn, h, q, k, v, att, mlp, cos_t, sin_t, vis;
} qi21_scratch;

/* Modulation buffers for two rows: row 0 = the sampled t, row 1 = t = 0.
 * mod [2, 4D] holds scale1 | tanh(gate1) | scale2 | tanh(gate2); scale_out
 * [2, D] the final norm's scale. */
typedef struct qi21_mod {
    cq_tensor temb_in, temb, mod, scale_out, hid;
} qi21_mod;

struct cq_qi21_cache {
    cq_qi21 *m;
    int n_prefix;                   /* prefix rows P */
    int target_h, target_w;         /* target block (latent tokens) */
    int target_pos;                 /* frame-axis position of the target block */
    cq_tensor *k, *v;               /* per layer [P, inner] */
    qi21_scratch s;                 /* step scratch, sized for the target */
    qi21_mod q;                     /* step-time modulation buffers */
    cq_tensor tin, vel;             /* target latents in, velocity out */
    /* A device backend records the step's ops at the second step and replays
     * them from then on (ops.h recordings): the first step sizes every buffer. */
    cq_dit_stepper stepper;
};

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
/* Binding from the tensor table (models/tables.h): the pack's tensor, checked
 * against the shape the config implies and the codec policy. */
typedef struct qi21_binder {
    cq_qi21 *m;
    const cq_cmf *cmf;
    const char *prefix;
    cq_tt_list table;
} qi21_binder;

static cq_status bind(qi21_binder *b, const char *name, cq_tensor *out) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get("qi21", &b->table, b->cmf, &v, "%s%s", b->prefix, name));
    return cq_tensor_bind_weight(b->m->be, v, out);
}

/* A per-channel vector as an F32 backend tensor (converted once if stored as f16/bf16). */
static cq_status bind_vec(qi21_binder *b, const char *name, cq_tensor *out) {
    cq_qi21 *m = b->m;
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get("qi21", &b->table, b->cmf, &v, "%s%s", b->prefix, name));
    int64_t n = (int64_t)v->nelem;
    float *tmp = cq_mallocn((size_t)n, sizeof(float));
    if (!tmp) return CQ_ERR_NOMEM;
    cq_status s = cq_cmf_dequantize(v, tmp, (size_t)n);
    int64_t shape[1] = {n};
    if (s == CQ_OK) s = cq_tensor_alloc(m->be, CQ_DTYPE_F32, 1, shape, out);
    if (s == CQ_OK) s = cq_tensor_upload(out, tmp, (size_t)n * sizeof(float));
    cq_free(tmp);
    if (s != CQ_OK) return cq_fail_prefix(s, "qi21: tensor '%s%s': ", b->prefix, name);
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        cq_tensor *o = cq_reallocn(m->owned, (size_t)cap, sizeof *o);
        if (!o) {
            cq_tensor_free(out);
            return CQ_ERR_NOMEM;
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = *out;
    return CQ_OK;
}

/* The config, read with the models' one convention (models/kit/config.h):
 * absent or null members take diffusers' defaults, anything else must be in
 * range. */
static cq_status parse_json(const cJSON *j, void *out) {
    cq_qi21_config *c = out;
    const cq_cfg g = {j, "qi21", ""};
    CQ_TRY(cq_cfg_class(&g, "QwenImage21Transformer2DModel", false));
    memset(c, 0, sizeof *c);
    const int big = 1 << 20;
    int patch, ratio;
    CQ_TRY(cq_cfg_int(&g, "patch_size", 1, -big, big, &patch));
    if (patch != 1) return cq_fail(CQ_ERR_UNSUPPORTED, "qi21: patch_size %d is not supported (2.1 uses 1)", patch);
    CQ_TRY(cq_cfg_int(&g, "in_channels", 64, 1, big, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "out_channels", c->in_channels, 0, big, &c->out_channels));
    if (c->out_channels == 0) c->out_channels = c->in_channels; /* `out_channels or in_channels` */
    CQ_TRY(cq_cfg_int(&g, "num_layers", 32, 1, 4096, &c->num_layers));
    CQ_TRY(cq_cfg_int(&g, "attention_head_dim", 128, 1, big, &c->head_dim));
    CQ_TRY(cq_cfg_int(&g, "num_attention_heads", 32, 1, big, &c->n_heads));
    CQ_TRY(cq_cfg_int(&g, "context_in_dim", 4096, 1, big, &c->context_in_dim));
    CQ_TRY(cq_cfg_int(&g, "mlp_ratio", 3, 1, big, &ratio));
    const cJSON *eps = cq_cfg_get(&g, "eps");
    c->eps = 1e-6f;
    if (eps) {
        double e;
        CQ_TRY(cq_cfg_num_item(&g, eps, "eps", 0.0, false, 1.0, &e));
        c->eps = (float)e;
    }
    if (!(c->eps < 1.0f)) return cq_fail(CQ_ERR_PARSE, "qi21: config eps %g is invalid (below 1)", (double)c->eps);
    CQ_TRY(cq_cfg_bool(&g, "causal_condition", true, &c->causal_condition));
    int ax[3] = {16, 56, 56}, n_ax;
    CQ_TRY(cq_cfg_ints(&g, "axes_dims_rope", 3, 3, -1024, 1024, ax, &n_ax));
    memcpy(c->axes, ax, sizeof ax);
    /* every size is in [1, 2^20] here, so the products below fit an int64 */
    if (c->head_dim % 2 || (int64_t)c->n_heads * c->head_dim > (1 << 20) ||
        (int64_t)c->n_heads * c->head_dim * ratio > (1 << 22))
        return cq_fail(CQ_ERR_PARSE, "qi21: config has an invalid size (heads %d x %d, mlp_ratio %d: the head dim must "
                       "be even, heads x head dim at most 2^20 and times mlp_ratio at most 2^22)", c->n_heads,
                       c->head_dim, ratio);
    c->inner = c->n_heads * c->head_dim;
    c->mlp_hidden = c->inner * ratio;
    for (int i = 0; i < 3; i++)
        if (ax[i] <= 0 || ax[i] % 2 || ax[i] > 128)
            return cq_fail(CQ_ERR_PARSE, "qi21: axes_dims_rope[%d] = %d must be even and in (0, 128]", i, ax[i]);
    if (ax[0] + ax[1] + ax[2] != c->head_dim)
        return cq_fail(CQ_ERR_PARSE, "qi21: axes_dims_rope sum %d != attention_head_dim %d", ax[0] + ax[1] + ax[2],
                       c->head_dim);
    return CQ_OK;
}

cq_status cq_qi21_parse_config(const cq_cmf *cmf, const char *prefix, cq_qi21_config *c) {
    return cq_cfg_read(cmf, prefix, "qi21", parse_json, c);
}

cq_status cq_qi21_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qi21 **out) {
    *out = NULL;
    if (!prefix) prefix = "";
    cq_qi21 *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_qi21_parse_config(cmf, prefix, &m->cfg);
    const cq_qi21_config *c = &m->cfg;
    qi21_binder b = {m, cmf, prefix, {0}};
    if (s == CQ_OK) s = cq_qi21_tensors(c, prefix, &b.table);
    if (s == CQ_OK) m->layers = cq_calloc((size_t)c->num_layers, sizeof *m->layers);
    if (s == CQ_OK && !m->layers) s = CQ_ERR_NOMEM;
#define BIND(name, t) \
    if (s == CQ_OK) s = bind(&b, name, t)
#define VBIND(name, t) \
    if (s == CQ_OK) s = bind_vec(&b, name, t)
    BIND("time_text_embed.timestep_embedder.linear_1.weight", &m->t_lin1);
    BIND("time_text_embed.timestep_embedder.linear_2.weight", &m->t_lin2);
    VBIND("txt_in.text_norm.weight", &m->txt_norm);
    BIND("txt_in.in_layer.weight", &m->txt_in1);
    BIND("txt_in.out_layer.weight", &m->txt_in2);
    BIND("img_in.weight", &m->img_in);
    BIND("modulation.1.weight", &m->mod);
    BIND("norm_out.linear.weight", &m->norm_out);
    BIND("proj_out.weight", &m->proj_out);
    for (int l = 0; s == CQ_OK && l < c->num_layers; l++) {
        qi21_layer *L = &m->layers[l];
        char n[128];
#define LBIND(suffix, t, fn)                                          \
    if (s == CQ_OK) {                                                 \
        snprintf(n, sizeof n, "transformer_blocks.%d.%s", l, suffix); \
        s = fn(&b, n, t);                                             \
    }
        LBIND("attn.to_q.weight", &L->q, bind);
        LBIND("attn.to_k.weight", &L->k, bind);
        LBIND("attn.to_v.weight", &L->v, bind);
        LBIND("attn.to_out.0.weight", &L->o, bind);
        LBIND("img_mlp.gate_layer.weight", &L->mlp_gate, bind);
        LBIND("img_mlp.proj.weight", &L->mlp_proj, bind);
        LBIND("img_mlp.out.weight", &L->mlp_out, bind);
        LBIND("attn.norm_q.weight", &L->norm_q, bind_vec);
        LBIND("attn.norm_k.weight", &L->norm_k, bind_vec);
#undef LBIND
    }
#undef VBIND
#undef BIND
    cq_tt_list_free(&b.table);
    if (s != CQ_OK) {
        cq_qi21_free(m);
        return s;
    }
    /* RoPE inverse frequencies per axis, in f32 exactly as the reference
     * builds them: 1 / pow(theta, arange(0, dim, 2).float() / dim). */
    s = cq_dit_rope_init(&m->rope, 3, c->axes, 10000.0f);
    if (s != CQ_OK) {
        cq_qi21_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_qi21_free(cq_qi21 *m) {
    if (!m) return;
    /* bound weights (a device backend holds uploads for them), then the F32
     * vectors made at load (the layer structs hold copies of those handles) */
    cq_tensor *w[] = {&m->t_lin1, &m->t_lin2, &m->txt_in1, &m->txt_in2, &m->img_in, &m->mod, &m->norm_out, &m->proj_out};
    for (size_t i = 0; i < CQ_ARRAY_LEN(w); i++) cq_tensor_free(w[i]);
    for (int l = 0; m->layers && l < m->cfg.num_layers; l++) {
        qi21_layer *L = &m->layers[l];
        cq_tensor *lw[] = {&L->q, &L->k, &L->v, &L->o, &L->mlp_gate, &L->mlp_proj, &L->mlp_out};
        for (size_t i = 0; i < CQ_ARRAY_LEN(lw); i++) cq_tensor_free(lw[i]);
    }
    for (int i = 0; i < m->n_owned; i++) cq_tensor_free(&m->owned[i]);
    cq_free(m->owned);
    cq_free(m->layers);
    cq_free(m);
}

const cq_qi21_config *cq_qi21_get_config(const cq_qi21 *m) { return &m->cfg; }

int cq_qi21_max_side(void) { return QI21_MAX_SIDE; }
int cq_qi21_max_position(void) { return QI21_MAX_POS - 1; }

/* ------------------------------------------------------------------------ */
/* Layout: joint-sequence structure, positions and visibility               */
/* ------------------------------------------------------------------------ */
cq_status cq_qi21_layout_sizes(const cq_qi21_layout *lay, int *n_ctx, int *n_target, int *n_cond) {
    if (!lay || lay->vlm_len <= 0 || !lay->img_mask || lay->n_images <= 0 || !lay->img_shapes)
        return cq_fail(CQ_ERR_INVALID_ARG, "qi21: layout needs img_mask and at least the target's img_shapes row");
    int64_t cond = 0;
    for (int i = 0; i < lay->n_images; i++) {
        const int32_t *sh = lay->img_shapes[i];
        if (sh[0] != 1)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qi21: img_shapes[%d] has %d frames; only single-frame images are supported",
                           i, sh[0]);
        if (sh[1] <= 0 || sh[2] <= 0 || sh[1] > QI21_MAX_SIDE || sh[2] > QI21_MAX_SIDE)
            return cq_fail(CQ_ERR_SHAPE, "qi21: img_shapes[%d] = (%d, %d, %d) is not a valid latent grid (sides 1 .. %d)",
                           i, sh[0], sh[1], sh[2], QI21_MAX_SIDE);
        if (((int64_t)sh[1] * sh[2]) % 4)
            return cq_fail(CQ_ERR_SHAPE, "qi21: img_shapes[%d] = %dx%d tokens is not a whole number of 2x2 slots", i,
                           sh[1], sh[2]);
        if (i < lay->n_images - 1) cond += (int64_t)sh[1] * sh[2];
    }
    const int32_t *tg = lay->img_shapes[lay->n_images - 1];
    int tslots = tg[1] * tg[2] / 4;
    if (tslots > lay->vlm_len)
        return cq_fail(CQ_ERR_SHAPE, "qi21: target needs %d slots but img_mask has only %d positions", tslots, lay->vlm_len);
    int nctx = lay->vlm_len - tslots;
    for (int j = nctx; j < lay->vlm_len; j++)
        if (!lay->img_mask[j])
            return cq_fail(CQ_ERR_SHAPE, "qi21: img_mask must end with the target's %d image slots (position %d is text)",
                           tslots, j);
    int64_t slots = 0;
    for (int j = 0; j < nctx; j++) slots += lay->img_mask[j] ? 1 : 0;
    if (slots * 4 != cond)
        return cq_fail(CQ_ERR_SHAPE, "qi21: img_mask has %lld condition-image slots (%lld tokens) but img_shapes lists %lld "
                       "condition tokens", (long long)slots, (long long)slots * 4, (long long)cond);
    /* Each image's slots must be consecutive: the reference lays an image
     * block out from its first slot on (adjacent images are fine). */
    int img = 0, left = 0;
    int64_t position = 0; /* RoPE frame position, as rows_build walks it */
    for (int j = 0; j < nctx; j++) {
        if (lay->img_mask[j]) {
            if (left == 0) {
                const int32_t *sh = lay->img_shapes[img];
                left = sh[1] * sh[2] / 4;
                position += sh[1] > sh[2] ? sh[1] : sh[2];
                img++;
            }
            left--;
        } else if (left > 0) {
            const int32_t *sh = lay->img_shapes[img - 1];
            return cq_fail(CQ_ERR_SHAPE, "qi21: img_mask: condition image %d (%dx%d, %d slots) is interrupted by text at "
                           "position %d; an image's slots must be consecutive", img - 1, sh[1], sh[2],
                           sh[1] * sh[2] / 4, j);
        } else {
            position++;
        }
    }
    /* position is now the target's frame position, the largest of the sequence */
    if (position >= QI21_MAX_POS)
        return cq_fail(CQ_ERR_SHAPE, "qi21: the sequence reaches RoPE position %lld; the model's position table ends at %d",
                       (long long)position, QI21_MAX_POS - 1);
    if (nctx - slots + cond + (int64_t)tg[1] * tg[2] > QI21_MAX_ROWS)
        return cq_fail(CQ_ERR_SHAPE, "qi21: the joint sequence would have %lld rows; at most %d are supported",
                       (long long)(nctx - slots + cond + (int64_t)tg[1] * tg[2]), QI21_MAX_ROWS);
    if (n_ctx) *n_ctx = nctx;
    if (n_target) *n_target = tg[1] * tg[2];
    if (n_cond) *n_cond = (int)cond;
    return CQ_OK;
}

/* Per joint row: position on the three RoPE axes, whether it is text, and
 * the visibility bound of the block-causal mask (keys [0, vis)). Rows are the prefix
 * (vlm positions before the target slots, image slots expanded x4), then
 * the target block. */
typedef struct qi21_rows {
    int n_prefix, n_target;
    int32_t *pos;   /* [n][3] */
    int32_t *vis;   /* [n] keys visible in the joint sequence */
    int8_t *is_text;
    int target_pos; /* frame position of the target block */
} qi21_rows;

static void rows_free(qi21_rows *r) {
    cq_free(r->pos);
    cq_free(r->vis);
    cq_free(r->is_text);
    memset(r, 0, sizeof *r);
}

/* Inputs must be finite: a NaN would otherwise spread through attention to
 * every later row and come out as a velocity of NaNs, far from its cause. */
static cq_status check_finite(const char *what, const float *x, size_t row, size_t cols) {
    for (size_t i = 0; i < cols; i++)
        if (!isfinite(x[i]))
            return cq_fail(CQ_ERR_NUMERIC, "qi21: %s row %zu holds a non-finite value (column %zu)", what, row, i);
    return CQ_OK;
}

static cq_status rows_build(const cq_qi21_layout *lay, qi21_rows *r) {
    int nctx, ntarget, ncond;
    CQ_TRY(cq_qi21_layout_sizes(lay, &nctx, &ntarget, &ncond));
    int n_text = 0;
    for (int j = 0; j < nctx; j++) n_text += lay->img_mask[j] ? 0 : 1;
    memset(r, 0, sizeof *r);
    r->n_prefix = n_text + ncond;
    r->n_target = ntarget;
    int n = r->n_prefix + ntarget;
    r->pos = cq_mallocn((size_t)n * 3, sizeof(int32_t));
    r->vis = cq_mallocn((size_t)n, sizeof(int32_t));
    r->is_text = cq_mallocn((size_t)n, 1);
    if (!r->pos || !r->vis || !r->is_text) {
        rows_free(r);
        return CQ_ERR_NOMEM;
    }
    /* Walk the vlm sequence; image slots of one image are consecutive, and
     * image k owns h*w joint rows. */
    int row = 0, position = 0, img = 0, img_left = 0, img_start = 0;
    for (int j = 0; j < lay->vlm_len; j++) {
        if (!lay->img_mask[j]) {
            r->pos[3 * row] = r->pos[3 * row + 1] = r->pos[3 * row + 2] = position++;
            r->is_text[row] = 1;
            r->vis[row] = row + 1;
            row++;
            continue;
        }
        if (img_left == 0) { /* a new image block starts here */
            const int32_t *sh = lay->img_shapes[img];
            int h = sh[1], w = sh[2];
            img_start = row;
            img_left = h * w;
            if (img == lay->n_images - 1) r->target_pos = position;
            for (int t = 0; t < h * w; t++) {
                int hh = t / w, ww = t % w;
                int32_t *p = &r->pos[3 * (row + t)];
                p[0] = position;
                p[1] = hh - (h - h / 2);
                p[2] = ww - (w - w / 2);
                r->is_text[row + t] = 0;
                r->vis[row + t] = img_start + h * w; /* the whole own block, and everything before */
            }
            position += h > w ? h : w;
            img++;
        }
        /* each slot stands for 4 rows of the current block */
        row += 4;
        img_left -= 4;
    }
    (void)ncond;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Modulation                                                               */
/* ------------------------------------------------------------------------ */
/* Sinusoidal timestep features for rows t[0..n): cos half first, t * 1000. */
static void timestep_features(const float *t, int n, float *out) {
    static const cq_dit_tproj k_tproj = {.dim = QI21_TPROJ, .flip_sin_to_cos = true, .downscale_freq_shift = 0.0f,
                                         .scale = 1.0f, .max_period = 10000.0f};
    for (int r = 0; r < n; r++) {
        float tt = 1000.0f * t[r];
        cq_dit_timestep_features(&k_tproj, &tt, 1, out + (size_t)r * QI21_TPROJ);
    }
}

static cq_status mod_alloc(cq_qi21 *m, qi21_mod *q) {
    int64_t D = m->cfg.inner;
    memset(q, 0, sizeof *q);
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, 2, QI21_TPROJ, &q->temb_in));
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, 2, D, &q->temb));
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, 2, 4 * D, &q->mod));
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, 2, D, &q->scale_out));
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, 2, D, &q->hid));
    return CQ_OK;
}

static void mod_free(qi21_mod *q) {
    cq_tensor_free(&q->temb_in);
    cq_tensor_free(&q->temb);
    cq_tensor_free(&q->mod);
    cq_tensor_free(&q->scale_out);
    cq_tensor_free(&q->hid);
}

/* The timestep features of rows t and 0 into temb_in (the host part of mod_compute). */
static cq_status mod_upload(qi21_mod *q, float t) {
    float tf[2] = {t, 0.0f};
    float feat[2 * QI21_TPROJ];
    timestep_features(tf, 2, feat);
    return cq_tensor_upload(&q->temb_in, feat, sizeof feat);
}

/* The modulation vectors from temb_in (device ops only). */
static cq_status mod_ops(cq_qi21 *m, qi21_mod *q) {
    cq_backend *be = m->be;
    int64_t D = m->cfg.inner;
    cq_tensor hid = q->hid;
    cq_matmul_args a = {.y = &hid, .x = &q->temb_in, .w = &m->t_lin1, .act = CQ_ACT_SILU};
    cq_status s = cq_op_matmul(be, &a);
    if (s == CQ_OK) s = cq_op_linear(be, &q->temb, &hid, &m->t_lin2, NULL);
    /* both consumers read SiLU(temb) */
    if (s == CQ_OK) s = cq_op_unary(be, &hid, &q->temb, CQ_UNARY_SILU, 0, 0);
    if (s == CQ_OK) s = cq_op_linear(be, &q->mod, &hid, &m->mod, NULL);
    if (s == CQ_OK) s = cq_op_linear(be, &q->scale_out, &hid, &m->norm_out, NULL);
    /* gates go through tanh once here */
    for (int r = 0; s == CQ_OK && r < 2; r++)
        for (int g = 1; s == CQ_OK && g < 4; g += 2) {
            cq_tensor gv;
            int64_t shape[1] = {D};
            s = cq_tensor_subview(&q->mod, r * 4 * D + g * D, 1, shape, &gv);
            if (s == CQ_OK) s = cq_op_unary(be, &gv, &gv, CQ_UNARY_TANH, 0, 0);
        }
    return s;
}

static cq_status mod_compute(cq_qi21 *m, qi21_mod *q, float t) {
    CQ_TRY(mod_upload(q, t));
    return mod_ops(m, q);
}

/* The modulation table (models/kit/dit.h): per row scale1 | tanh(gate1) | scale2 | tanh(gate2). */
static cq_dit_mod mod_table(const cq_qi21 *m, const qi21_mod *q) {
    return (cq_dit_mod){.t = &q->mod, .dim = m->cfg.inner, .per_row = 4};
}

static cq_tensor scale_out_vec(const cq_qi21 *m, const qi21_mod *q, int r) {
    cq_dit_mod t = {.t = &q->scale_out, .dim = m->cfg.inner, .per_row = 1};
    return cq_dit_mod_vec(&t, r, 0);
}

/* ------------------------------------------------------------------------ */
/* The blocks                                                               */
/* ------------------------------------------------------------------------ */
static void scratch_free(qi21_scratch *s) {
    cq_tensor_free(&s->x);
    cq_tensor_free(&s->hn);
    cq_tensor_free(&s->h);
    cq_tensor_free(&s->q);
    cq_tensor_free(&s->k);
    cq_tensor_free(&s->v);
    cq_tensor_free(&s->att);
    cq_tensor_free(&s->mlp);
    cq_tensor_free(&s->cos_t);
    cq_tensor_free(&s->sin_t);
    cq_tensor_free(&s->vis);
    memset(s, 0, sizeof *s);
}

/* with_kv: allocate own k/v (not needed when the caller supplies cache tensors). */
static cq_status scratch_alloc(cq_qi21 *m, qi21_scratch *s, int64_t n, bool with_kv) {
    cq_backend *be = m->be;
    const cq_qi21_config *c = &m->cfg;
    const cq_dtype act = cq_backend_act_dtype(be);
    memset(s, 0, sizeof *s);
    s->n = n;
    cq_status st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->inner, &s->x);
    if (st == CQ_OK && act != CQ_DTYPE_F32) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->inner, &s->hn);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, act, n, c->inner, &s->h);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, act, n, c->inner, &s->q);
    if (st == CQ_OK && with_kv) st = cq_tensor_alloc_2d(be, act, n, c->inner, &s->k);
    if (st == CQ_OK && with_kv) st = cq_tensor_alloc_2d(be, act, n, c->inner, &s->v);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, act, n, c->inner, &s->att);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, act, n, c->mlp_hidden, &s->mlp);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->head_dim / 2, &s->cos_t);
    if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->head_dim / 2, &s->sin_t);
    if (st == CQ_OK) {
        int64_t shape[1] = {n};
        st = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, shape, &s->vis);
    }
    if (st != CQ_OK) scratch_free(s);
    return st;
}

static cq_status upload_rows_meta(cq_qi21 *m, qi21_scratch *s, const int32_t *pos, const int32_t *vis, int n) {
    cq_status st = cq_dit_rope_upload(&m->rope, pos, n, &s->cos_t, &s->sin_t);
    if (st == CQ_OK && vis) st = cq_tensor_upload(&s->vis, vis, (size_t)n * sizeof(int32_t));
    return st;
}

/* A run of consecutive rows that share one modulation row (0 = sampled t, 1 = t = 0). */
typedef cq_dit_group qi21_group;

typedef struct qi21_pass {
    qi21_scratch *s;
    const qi21_group *groups;
    int n_groups;
    const qi21_mod *mod;
    cq_tensor *k_out, *v_out;           /* per layer (prefill: the cache) or NULL to use scratch */
    cq_tensor *k_prefix, *v_prefix;     /* per layer cached prefix, or NULL */
    bool use_vis;
    bool skip_last_mlp;                 /* prefill: the last layer's output is never read */
} qi21_pass;

/* The f32 rows a LayerNorm of x writes: hn, or h itself with f32 activations. */
static cq_tensor *normed_f32(qi21_scratch *s) { return s->h.dtype == CQ_DTYPE_F32 ? &s->h : &s->hn; }

/* h = the modulated LayerNorm of x, in h's dtype (see qi21_scratch). */
static cq_status modulated_ln(cq_qi21 *m, const qi21_pass *p, int which) {
    cq_dit_mod t = mod_table(m, p->mod);
    qi21_scratch *s = p->s;
    cq_tensor *y = normed_f32(s);
    CQ_TRY(cq_dit_modulated_ln(m->be, p->groups, p->n_groups, y, &s->x, &t, which, -1, m->cfg.eps));
    return y == &s->h ? CQ_OK : cq_op_copy(m->be, &s->h, y);
}

/* x += tanh(gate) ⊙ (in · Wᵀ), per row group. */
static cq_status gated_proj(cq_qi21 *m, const qi21_pass *p, cq_tensor *x, const cq_tensor *in, const cq_tensor *w,
                            int which) {
    cq_dit_mod t = mod_table(m, p->mod);
    return cq_dit_gated_proj(m->be, p->groups, p->n_groups, x, in, w, NULL, &t, which);
}

static cq_status run_blocks(cq_qi21 *m, const qi21_pass *p) {
    cq_backend *be = m->be;
    const cq_qi21_config *c = &m->cfg;
    qi21_scratch *s = p->s;
    for (int l = 0; l < c->num_layers; l++) {
        const qi21_layer *L = &m->layers[l];
        bool last = l == c->num_layers - 1;
        cq_tensor *k = p->k_out ? &p->k_out[l] : &s->k;
        cq_tensor *v = p->v_out ? &p->v_out[l] : &s->v;
        /* attention half */
        CQ_TRY(modulated_ln(m, p, 0));
        /* prefill: only the last layer's keys/values are needed */
        const bool kv_only = last && p->skip_last_mlp;
        /* the three projections of h back to back: a backend may prepare h once for all three */
        CQ_TRY(cq_op_linear(be, k, &s->h, &L->k, NULL));
        CQ_TRY(cq_op_linear(be, v, &s->h, &L->v, NULL));
        if (!kv_only) CQ_TRY(cq_op_linear(be, &s->q, &s->h, &L->q, NULL));
        CQ_TRY(cq_op_qk_norm_rope(be, k, c->n_heads, c->head_dim, &L->norm_k, c->eps, &s->cos_t, &s->sin_t,
                                  CQ_ROPE_INTERLEAVED, 0));
        if (kv_only) break;
        CQ_TRY(cq_op_qk_norm_rope(be, &s->q, c->n_heads, c->head_dim, &L->norm_q, c->eps, &s->cos_t, &s->sin_t,
                                  CQ_ROPE_INTERLEAVED, 0));
        cq_attn_args at = {.o = &s->att, .q = &s->q, .k = k, .v = v,
                           .k_prefix = p->k_prefix ? &p->k_prefix[l] : NULL,
                           .v_prefix = p->v_prefix ? &p->v_prefix[l] : NULL,
                           .vis = p->use_vis ? &s->vis : NULL, .n_heads = c->n_heads, .n_kv_heads = c->n_heads,
                           .head_dim = c->head_dim};
        CQ_TRY(cq_op_attention(be, &at));
        CQ_TRY(gated_proj(m, p, &s->x, &s->att, &L->o, 1));
        /* MLP half */
        CQ_TRY(modulated_ln(m, p, 2));
        cq_matmul_args mm = {.y = &s->mlp, .x = &s->h, .w = &L->mlp_gate, .w2 = &L->mlp_proj, .act = CQ_ACT_SWIGLU};
        CQ_TRY(cq_op_matmul(be, &mm));
        CQ_TRY(gated_proj(m, p, &s->x, &s->mlp, &L->mlp_out, 3));
    }
    return CQ_OK;
}

/* Fill the prefix rows of x: txt_in(text rows of ctx), img_in(cond rows). */
static cq_status embed_prefix(cq_qi21 *m, const cq_qi21_layout *lay, const qi21_rows *r, const float *ctx,
                              const float *cond, cq_tensor *x) {
    cq_backend *be = m->be;
    const cq_qi21_config *c = &m->cfg;
    int nctx, ncond;
    CQ_TRY(cq_qi21_layout_sizes(lay, &nctx, NULL, &ncond));
    int n_text = r->n_prefix - ncond;
    if (n_text > 0 && !ctx)
        return cq_fail(CQ_ERR_INVALID_ARG, "qi21: the layout has %d text rows but no encoder hidden states", n_text);
    if (ncond > 0 && !cond)
        return cq_fail(CQ_ERR_INVALID_ARG, "qi21: the layout has %d condition-image tokens but no latents", ncond);
    for (int j = 0; j < nctx; j++) /* rows at image slots are placeholders, never read */
        if (!lay->img_mask[j])
            CQ_TRY(check_finite("encoder hidden states", ctx + (size_t)j * c->context_in_dim, (size_t)j,
                                (size_t)c->context_in_dim));
    for (int j = 0; j < ncond; j++)
        CQ_TRY(check_finite("condition latents", cond + (size_t)j * c->in_channels, (size_t)j, (size_t)c->in_channels));
    cq_status st = CQ_OK;
    cq_tensor tin = {0}, tn = {0}, th = {0}, tx = {0}, cin = {0}, cx = {0};
    if (n_text > 0) {
        float *rows = cq_mallocn((size_t)n_text * c->context_in_dim, sizeof(float));
        if (!rows) return CQ_ERR_NOMEM;
        int k = 0;
        for (int j = 0; j < nctx; j++)
            if (!lay->img_mask[j])
                memcpy(rows + (size_t)k++ * c->context_in_dim, ctx + (size_t)j * c->context_in_dim,
                       (size_t)c->context_in_dim * sizeof(float));
        st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n_text, c->context_in_dim, &tin);
        if (st == CQ_OK) st = cq_tensor_upload(&tin, rows, (size_t)n_text * c->context_in_dim * sizeof(float));
        cq_free(rows);
        if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n_text, c->context_in_dim, &tn);
        if (st == CQ_OK) st = cq_op_rmsnorm(be, &tn, &tin, &m->txt_norm, NULL, true, c->eps);
        if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n_text, c->inner, &th);
        if (st == CQ_OK) {
            cq_matmul_args a = {.y = &th, .x = &tn, .w = &m->txt_in1, .act = CQ_ACT_GELU_TANH};
            st = cq_op_matmul(be, &a);
        }
        if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n_text, c->inner, &tx);
        if (st == CQ_OK) st = cq_op_linear(be, &tx, &th, &m->txt_in2, NULL);
    }
    if (st == CQ_OK && ncond > 0) {
        st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, ncond, c->in_channels, &cin);
        if (st == CQ_OK) st = cq_tensor_upload(&cin, cond, (size_t)ncond * c->in_channels * sizeof(float));
        if (st == CQ_OK) st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, ncond, c->inner, &cx);
        if (st == CQ_OK) st = cq_op_linear(be, &cx, &cin, &m->img_in, NULL);
    }
    /* scatter runs of text rows / image rows into the joint prefix */
    int ti = 0, ci = 0, row = 0;
    while (st == CQ_OK && row < r->n_prefix) {
        int run = 1;
        while (row + run < r->n_prefix && r->is_text[row + run] == r->is_text[row]) run++;
        cq_tensor dst = cq_tensor_rows_view(x, row, run);
        cq_tensor src = r->is_text[row] ? cq_tensor_rows_view(&tx, ti, run) : cq_tensor_rows_view(&cx, ci, run);
        st = cq_op_copy(be, &dst, &src);
        if (r->is_text[row])
            ti += run;
        else
            ci += run;
        row += run;
    }
    cq_tensor_free(&tin);
    cq_tensor_free(&tn);
    cq_tensor_free(&th);
    cq_tensor_free(&tx);
    cq_tensor_free(&cin);
    cq_tensor_free(&cx);
    return st;
}

/* The target latents (checked finite) into tin [n, in_channels], the upload buffer. */
static cq_status target_upload(cq_qi21 *m, const float *target, cq_tensor *tin) {
    int64_t n = cq_tensor_rows(tin);
    size_t C = (size_t)m->cfg.in_channels;
    for (int64_t i = 0; i < n; i++) CQ_TRY(check_finite("target latents", target + (size_t)i * C, (size_t)i, C));
    return cq_tensor_upload(tin, target, (size_t)n * m->cfg.in_channels * sizeof(float));
}

/* x_rows = img_in(target); tin holds the uploaded target. */
static cq_status embed_target(cq_qi21 *m, const float *target, cq_tensor *tin, cq_tensor *x_rows) {
    CQ_TRY(target_upload(m, target, tin));
    return cq_op_linear(m->be, x_rows, tin, &m->img_in, NULL);
}

/* vel = proj_out(LN(x_target) * (1 + scale_out[row 0])) (device ops only). */
static cq_status final_ops(cq_qi21 *m, const qi21_mod *q, cq_tensor *x_t, cq_tensor *h_t, cq_tensor *vel) {
    cq_tensor sc = scale_out_vec(m, q, 0);
    CQ_TRY(cq_op_layernorm(m->be, h_t, x_t, &sc, NULL, m->cfg.eps));
    return cq_op_linear(m->be, vel, h_t, &m->proj_out, NULL);
}

/* final_ops, then vel [n, out] downloaded into velocity. */
static cq_status final_layer(cq_qi21 *m, const qi21_mod *q, cq_tensor *x_t, cq_tensor *h_t, cq_tensor *vel,
                             float *velocity) {
    CQ_TRY(final_ops(m, q, x_t, h_t, vel));
    return cq_tensor_download(vel, velocity, (size_t)cq_tensor_rows(x_t) * m->cfg.out_channels * sizeof(float));
}

static cq_status io_alloc(cq_qi21 *m, int64_t n, cq_tensor *tin, cq_tensor *vel) {
    CQ_TRY(cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, n, m->cfg.in_channels, tin));
    return cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, n, m->cfg.out_channels, vel);
}

/* ------------------------------------------------------------------------ */
/* Public entry points                                                      */
/* ------------------------------------------------------------------------ */
void cq_qi21_cache_free(cq_qi21_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->m->cfg.num_layers; l++) {
        if (c->k) cq_tensor_free(&c->k[l]);
        if (c->v) cq_tensor_free(&c->v[l]);
    }
    cq_free(c->k);
    cq_free(c->v);
    cq_dit_stepper_free(&c->stepper);
    scratch_free(&c->s);
    mod_free(&c->q);
    cq_tensor_free(&c->tin);
    cq_tensor_free(&c->vel);
    cq_free(c);
}

cq_status cq_qi21_prefill(cq_qi21 *m, const cq_qi21_layout *lay, const float *ctx, const float *cond,
                          cq_qi21_cache **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: prefill needs somewhere to put the cache");
    *out = NULL;
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: prefill needs a model");
    if (!m->cfg.causal_condition)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qi21: the prefix cache needs causal_condition (the model's config disables it)");
    qi21_rows r;
    CQ_TRY(rows_build(lay, &r));
    const cq_qi21_config *c = &m->cfg;
    cq_qi21_cache *cache = cq_calloc(1, sizeof *cache);
    cq_status st = cache ? CQ_OK : CQ_ERR_NOMEM;
    qi21_scratch s = {0};
    qi21_mod q = {0};
    if (st == CQ_OK) {
        cache->m = m;
        cache->n_prefix = r.n_prefix;
        const int32_t *tg = lay->img_shapes[lay->n_images - 1];
        cache->target_h = tg[1];
        cache->target_w = tg[2];
        cache->target_pos = r.target_pos;
        cache->k = cq_calloc((size_t)c->num_layers, sizeof(cq_tensor));
        cache->v = cq_calloc((size_t)c->num_layers, sizeof(cq_tensor));
        if (!cache->k || !cache->v) st = CQ_ERR_NOMEM;
    }
    /* An empty prefix (a target alone) leaves nothing to cache. */
    bool any = r.n_prefix > 0;
    for (int l = 0; any && st == CQ_OK && l < c->num_layers; l++) {
        /* the attention reads prefix and own keys in one dtype: the activations' (the prefix rows are
         * rounded as the uncached forward rounds its own keys) */
        const cq_dtype act = cq_backend_act_dtype(m->be);
        st = cq_tensor_alloc_2d(m->be, act, r.n_prefix, c->inner, &cache->k[l]);
        if (st == CQ_OK) st = cq_tensor_alloc_2d(m->be, act, r.n_prefix, c->inner, &cache->v[l]);
    }
    if (!any) goto done;
    if (st == CQ_OK) st = scratch_alloc(m, &s, r.n_prefix, false);
    if (st == CQ_OK) st = upload_rows_meta(m, &s, r.pos, r.vis, r.n_prefix);
    if (st == CQ_OK) st = embed_prefix(m, lay, &r, ctx, cond, &s.x);
    if (st == CQ_OK) st = mod_alloc(m, &q);
    if (st == CQ_OK) st = mod_compute(m, &q, 0.0f);
    if (st == CQ_OK) {
        qi21_group g = {0, r.n_prefix, 1};
        qi21_pass p = {.s = &s, .groups = &g, .n_groups = 1, .mod = &q, .k_out = cache->k, .v_out = cache->v,
                       .use_vis = true, .skip_last_mlp = true};
        st = run_blocks(m, &p);
    }
    if (st == CQ_OK) st = cq_backend_sync(m->be);
done:
    mod_free(&q);
    scratch_free(&s);
    rows_free(&r);
    if (st != CQ_OK) {
        cq_qi21_cache_free(cache);
        return st;
    }
    *out = cache;
    return CQ_OK;
}

/* The step's buffers and the target's RoPE tables, made on the first step
 * and kept in the cache so later steps allocate nothing. All or nothing: on
 * failure everything is released and the next step tries again. */
static cq_status step_setup(cq_qi21 *m, cq_qi21_cache *c) {
    int n = c->target_h * c->target_w, h = c->target_h, w = c->target_w;
    int32_t *pos = cq_mallocn((size_t)n * 3, sizeof(int32_t));
    if (!pos) return CQ_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        pos[3 * i] = c->target_pos;
        pos[3 * i + 1] = i / w - (h - h / 2);
        pos[3 * i + 2] = i % w - (w - w / 2);
    }
    cq_status st = scratch_alloc(m, &c->s, n, true);
    if (st == CQ_OK) st = upload_rows_meta(m, &c->s, pos, NULL, n);
    if (st == CQ_OK) st = mod_alloc(m, &c->q);
    if (st == CQ_OK) st = io_alloc(m, n, &c->tin, &c->vel);
    cq_free(pos);
    if (st != CQ_OK) {
        scratch_free(&c->s);
        mod_free(&c->q);
        cq_tensor_free(&c->tin);
        cq_tensor_free(&c->vel);
    }
    return st;
}

/* The step's device ops, from the uploaded timestep features and target to the velocity in vel. */
static cq_status step_ops(cq_qi21 *m, cq_qi21_cache *c) {
    qi21_group g = {0, c->target_h * c->target_w, 0};
    qi21_pass p = {.s = &c->s, .groups = &g, .n_groups = 1, .mod = &c->q, .k_prefix = c->n_prefix ? c->k : NULL,
                   .v_prefix = c->n_prefix ? c->v : NULL};
    CQ_TRY(mod_ops(m, &c->q));
    CQ_TRY(cq_op_linear(m->be, &c->s.x, &c->tin, &m->img_in, NULL));
    CQ_TRY(run_blocks(m, &p));
    return final_ops(m, &c->q, &c->s.x, normed_f32(&c->s), &c->vel);
}

typedef struct step_call {
    cq_qi21 *m;
    cq_qi21_cache *c;
} step_call;

static cq_status step_ops_cb(void *user) {
    step_call *k = user;
    return step_ops(k->m, k->c);
}

cq_status cq_qi21_step(cq_qi21 *m, cq_qi21_cache *c, const float *target, float t, float *velocity) {
    if (!m || !c || c->m != m) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: step needs a cache made by this model's prefill");
    if (!target || !velocity) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: step needs target latents and a velocity buffer");
    if (!(t >= 0.0f && t <= 1.0f)) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: timestep %g is outside [0, 1]", (double)t);
    int n = c->target_h * c->target_w;
    if (c->s.n == 0) CQ_TRY(step_setup(m, c)); /* first step: size the buffers once */
    /* the inputs go into the step's own tensors, then the device ops run: directly, or recorded (second
     * step) and replayed (every step after) */
    CQ_TRY(mod_upload(&c->q, t));
    CQ_TRY(target_upload(m, target, &c->tin));
    step_call call = {m, c};
    cq_status st = cq_dit_stepper_run(&c->stepper, m->be, step_ops_cb, &call, "qi21");
    CQ_TRY(st);
    CQ_TRY(cq_tensor_download(&c->vel, velocity, (size_t)n * m->cfg.out_channels * sizeof(float)));
    return cq_backend_sync(m->be);
}

cq_status cq_qi21_forward_full(cq_qi21 *m, const cq_qi21_layout *lay, const float *ctx, const float *cond,
                               const float *target, float t, float *velocity) {
    if (!m || !target || !velocity)
        return cq_fail(CQ_ERR_INVALID_ARG, "qi21: forward needs a model, target latents and a velocity buffer");
    if (!(t >= 0.0f && t <= 1.0f)) return cq_fail(CQ_ERR_INVALID_ARG, "qi21: timestep %g is outside [0, 1]", (double)t);
    qi21_rows r;
    CQ_TRY(rows_build(lay, &r));
    int P = r.n_prefix, T = r.n_target, N = P + T;
    for (int i = P; i < N; i++) r.vis[i] = N; /* the target sees everything */
    qi21_scratch s = {0};
    qi21_mod q = {0};
    cq_tensor tin = {0}, vel = {0};
    cq_status st = scratch_alloc(m, &s, N, true);
    if (st == CQ_OK) st = io_alloc(m, T, &tin, &vel);
    if (st == CQ_OK) st = upload_rows_meta(m, &s, r.pos, r.vis, N);
    if (st == CQ_OK && P > 0) st = embed_prefix(m, lay, &r, ctx, cond, &s.x);
    if (st == CQ_OK) {
        cq_tensor xt = cq_tensor_rows_view(&s.x, P, T);
        st = embed_target(m, target, &tin, &xt);
    }
    if (st == CQ_OK) st = mod_alloc(m, &q);
    if (st == CQ_OK) st = mod_compute(m, &q, t);
    if (st == CQ_OK) {
        /* without causal_condition every row reads the sampled t */
        int prefix_row = m->cfg.causal_condition ? 1 : 0;
        qi21_group g[2] = {{0, P, prefix_row}, {P, T, 0}};
        qi21_pass p = {.s = &s, .groups = P > 0 ? g : g + 1, .n_groups = P > 0 ? 2 : 1, .mod = &q, .use_vis = true};
        st = run_blocks(m, &p);
    }
    if (st == CQ_OK) {
        cq_tensor xt = cq_tensor_rows_view(&s.x, P, T), ht = cq_tensor_rows_view(normed_f32(&s), P, T);
        st = final_layer(m, &q, &xt, &ht, &vel, velocity);
    }
    if (st == CQ_OK) st = cq_backend_sync(m->be);
    cq_tensor_free(&tin);
    cq_tensor_free(&vel);
    mod_free(&q);
    scratch_free(&s);
    rows_free(&r);
    return st;
}
