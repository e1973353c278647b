/*
 * qimage.c — the Qwen-Image (v1) denoiser, written once against the op layer.
 *
 * Semantics follow diffusers' QwenImageTransformer2DModel (one batch row):
 *  - image tokens: img_in Linear+bias; text rows: RMSNorm(w, eps 1e-6) ->
 *    txt_in Linear+bias (no MLP on the text);
 *  - timestep: sigma -> 256-channel sinusoid, cos half first, the angle
 *    (sigma * f) * 1000 in that order -> Linear+bias -> SiLU -> Linear+bias =
 *    temb. With zero_cond_t the batch of timesteps is [t, 0]: condition-image
 *    tokens read the t = 0 row of the image stream's modulation, the text
 *    stream and the output head the t row;
 *  - block, per stream: [sh1, sc1, g1, sh2, sc2, g2] = Linear+bias(SiLU(temb));
 *    h = LN(x) * (1 + sc1) + sh1 (affine-free LayerNorm, eps 1e-6); q/k/v
 *    Linear+bias, per-head RMSNorm(w, eps 1e-6) on q and k, 3-axis RoPE on
 *    adjacent pairs (complex); one attention over [text | image] (a text
 *    row that the mask marks as padding is no query's key); x += g1 *
 *    out-projection+bias; x += g2 * MLP(LN(x) * (1 + sc2) + sh2), MLP = Linear
 *    -> GELU(tanh) -> Linear, with biases; gates as they are (no tanh);
 *  - output: LN(x_img) * (1 + scale) + shift ([scale | shift] = norm_out's
 *    Linear of SiLU(temb)), then proj_out Linear+bias.
 * The text embedding and the RoPE tables depend only on the prompt and the
 * layout: prepare computes them once and each step copies the text rows in.
 */
#include "models/qimage.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/dit.h"
#include "models/tables.h"

#define QI_TPROJ CQ_QIMAGE_TIMESTEP_CHANNELS
#define QI_EPS 1e-6f        /* every norm of the model: txt_norm, the LayerNorms, the q/k RMSNorms, norm_out */
#define QI_ROPE_LIMIT 4096  /* the reference's tables hold positions [-4096, 4096) */
#define QI_MAX_ROWS (1 << 22) /* joint-sequence rows: far beyond any image the RoPE tables allow */

enum { QI_TXT = 0, QI_IMG = 1 }; /* the streams, in the joint sequence's order */
/* The six modulation vectors of a stream's row, in the reference's chunk order. */
enum { M_SHIFT1, M_SCALE1, M_GATE1, M_SHIFT2, M_SCALE2, M_GATE2, M_COUNT };

typedef struct qi_lin {
    cq_tensor w, b;
} qi_lin;

/* One stream's weights in a block. */
typedef struct qi_stream {
    qi_lin mod, q, k, v, o, mlp_in, mlp_out;
    cq_tensor norm_q, norm_k; /* F32 [head_dim] */
} qi_stream;

typedef struct qi_block {
    qi_stream s[2];
} qi_block;

struct cq_qimage {
    cq_backend *be;
    cq_qimage_config cfg;
    cq_tt_held held; /* every backend tensor below (models/kit/tensors.h) */
    qi_lin t1, t2, img_in, txt_in, norm_out, proj_out;
    cq_tensor txt_norm; /* F32 [joint_dim] */
    qi_block *blocks;
    cq_dit_rope rope;
    cq_qimage_tap_fn tap;
    void *tap_user;
};

struct cq_qimage_cond {
    cq_qimage *m;
    int n_images;
    int32_t shapes[CQ_QIMAGE_MAX_IMAGES][3];
    int L, N, N0;            /* text rows, image tokens (all images), the target's tokens */
    int T;                   /* timestep rows: 2 with zero_cond_t (t, 0), else 1 */
    int n_active;            /* text rows a query attends to */
    int n_runs;              /* runs of consecutive active text rows, when some are masked */
    int32_t (*runs)[2];      /* [n_runs] (first row, count) */
    bool masked;
    cq_tensor txt;           /* [L, inner]: txt_in(txt_norm(rows)) */
    cq_tensor cos_t, sin_t;  /* [L + N, head_dim / 2], text rows first */
    /* step buffers */
    cq_tensor feat;          /* [T, 256] timestep features (uploaded) */
    cq_tensor thid, temb, stemb; /* [T, inner]: SiLU(linear_1), temb, SiLU(temb) */
    cq_tensor imod;          /* [num_layers * T, 6 inner]: the image stream's modulation, T rows a block */
    cq_tensor tmod;          /* [num_layers, 6 inner]: the text stream's */
    cq_tensor omod;          /* [1, 2 inner]: norm_out's scale | shift */
    /* [L + N, ...], text rows first: x is the residual stream (f32); h, q, k, v, att and mlp are in the
     * backend's activation dtype (cq_backend_act_dtype). The norms run on f32 rows (an op's output has its
     * input's dtype), so where the activations are narrower those rows are hn (f32) and a copy rounds them into
     * h; with f32 activations hn is not allocated and h serves both. */
    cq_tensor x, hn, h, q, k, v, att, mlp;
    cq_tensor kc, vc;        /* [n_active, inner]: the active text rows' keys/values, when some are masked */
    cq_tensor tin, out;      /* [N, in_channels], [N, out_dim] */
    cq_dit_stepper stepper;
};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
/* A flag this implementation does not run: it must be absent, null or false. */
static cq_status refuse_flag(const cq_cfg *g, const char *key, const char *what) {
    bool on;
    CQ_TRY(cq_cfg_bool(g, key, false, &on));
    if (on) return cq_fail(CQ_ERR_UNSUPPORTED, "qimage: config %s true (%s) is not supported", key, what);
    return CQ_OK;
}

/* Absent or null members take diffusers' defaults (models/kit/config.h). */
static cq_status parse_json(const cJSON *j, void *out) {
    cq_qimage_config *c = out;
    const cq_cfg g = {j, "qimage", ""};
    CQ_TRY(cq_cfg_class(&g, "QwenImageTransformer2DModel", false));
    memset(c, 0, sizeof *c);
    const int big = 1 << 16;
    CQ_TRY(cq_cfg_int(&g, "patch_size", 2, 1, 16, &c->patch));
    if (c->patch != 2)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qimage: config patch_size %d is not supported (Qwen-Image uses 2)", c->patch);
    CQ_TRY(refuse_flag(&g, "guidance_embeds", "a guidance-distilled variant"));
    CQ_TRY(refuse_flag(&g, "use_additional_t_cond", "Qwen-Image-Layered"));
    CQ_TRY(refuse_flag(&g, "use_layer3d_rope", "Qwen-Image-Layered"));
    CQ_TRY(cq_cfg_bool(&g, "zero_cond_t", false, &c->zero_cond_t));
    CQ_TRY(cq_cfg_int(&g, "in_channels", 64, 1, 4096, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "out_channels", 16, 0, 4096, &c->out_channels));
    if (c->out_channels == 0) c->out_channels = c->in_channels; /* `out_channels or in_channels` */
    c->out_dim = c->patch * c->patch * c->out_channels;
    CQ_TRY(cq_cfg_int(&g, "num_layers", 60, 1, 4096, &c->num_layers));
    CQ_TRY(cq_cfg_int(&g, "attention_head_dim", 128, 2, 256, &c->head_dim));
    CQ_TRY(cq_cfg_int(&g, "num_attention_heads", 24, 1, 1024, &c->n_heads));
    CQ_TRY(cq_cfg_int(&g, "joint_attention_dim", 3584, 1, big, &c->joint_dim));
    int ax[3] = {16, 56, 56}, n_ax;
    CQ_TRY(cq_cfg_ints(&g, "axes_dims_rope", 3, 3, 0, 256, ax, &n_ax));
    memcpy(c->axes, ax, sizeof ax);
    if (c->head_dim % 2 || (int64_t)c->n_heads * c->head_dim > big)
        return cq_fail(CQ_ERR_PARSE, "qimage: config has an invalid size (heads %d x %d: the head dim must be even and "
                       "heads x head dim at most %d)", c->n_heads, c->head_dim, big);
    c->inner = c->n_heads * c->head_dim;
    c->mlp_hidden = 4 * c->inner; /* FeedForward's default mult */
    for (int i = 0; i < 3; i++)
        if (ax[i] <= 0 || ax[i] % 2 || ax[i] > 128)
            return cq_fail(CQ_ERR_PARSE, "qimage: config axes_dims_rope[%d] = %d must be even and in (0, 128]", i, ax[i]);
    if (ax[0] + ax[1] + ax[2] != c->head_dim)
        return cq_fail(CQ_ERR_PARSE, "qimage: config axes_dims_rope sum to %d, but attention_head_dim is %d",
                       ax[0] + ax[1] + ax[2], c->head_dim);
    return CQ_OK;
}

cq_status cq_qimage_parse_config(const cq_cmf *cmf, const char *prefix, cq_qimage_config *c) {
    return cq_cfg_read(cmf, prefix, "qimage", parse_json, c);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */
static cq_status bind_lin(const cq_tt_binder *b, qi_lin *l, const char *prefix, const char *name) {
    CQ_TRY(cq_tt_bind_weight(b, &l->w, "%s%s.weight", prefix, name));
    return cq_tt_bind_vector(b, &l->b, "%s%s.bias", prefix, name);
}

/* The names of one stream's weights in a block, after "transformer_blocks.<l>.". */
static const struct {
    const char *mod, *q, *k, *v, *o, *mlp_in, *mlp_out, *norm_q, *norm_k;
} k_stream_names[2] = {
    [QI_TXT] = {"txt_mod.1", "attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj", "attn.to_add_out",
                "txt_mlp.net.0.proj", "txt_mlp.net.2", "attn.norm_added_q.weight", "attn.norm_added_k.weight"},
    [QI_IMG] = {"img_mod.1", "attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0", "img_mlp.net.0.proj",
                "img_mlp.net.2", "attn.norm_q.weight", "attn.norm_k.weight"},
};

static cq_status bind_stream(const cq_tt_binder *b, const char *prefix, int l, int which, qi_stream *S) {
    char p[160];
    snprintf(p, sizeof p, "%stransformer_blocks.%d.", prefix, l);
#define NM k_stream_names[which]
    CQ_TRY(bind_lin(b, &S->mod, p, NM.mod));
    CQ_TRY(bind_lin(b, &S->q, p, NM.q));
    CQ_TRY(bind_lin(b, &S->k, p, NM.k));
    CQ_TRY(bind_lin(b, &S->v, p, NM.v));
    CQ_TRY(bind_lin(b, &S->o, p, NM.o));
    CQ_TRY(bind_lin(b, &S->mlp_in, p, NM.mlp_in));
    CQ_TRY(bind_lin(b, &S->mlp_out, p, NM.mlp_out));
    CQ_TRY(cq_tt_bind_vector(b, &S->norm_q, "%s%s", p, NM.norm_q));
    CQ_TRY(cq_tt_bind_vector(b, &S->norm_k, "%s%s", p, NM.norm_k));
#undef NM
    return CQ_OK;
}

static cq_status bind_all(cq_qimage *m, const cq_cmf *cmf, const char *p, const cq_tt_list *table) {
    const cq_tt_binder b = {"qimage", table, cmf, m->be, &m->held};
    CQ_TRY(bind_lin(&b, &m->t1, p, "time_text_embed.timestep_embedder.linear_1"));
    CQ_TRY(bind_lin(&b, &m->t2, p, "time_text_embed.timestep_embedder.linear_2"));
    CQ_TRY(cq_tt_bind_vector(&b, &m->txt_norm, "%stxt_norm.weight", p));
    CQ_TRY(bind_lin(&b, &m->img_in, p, "img_in"));
    CQ_TRY(bind_lin(&b, &m->txt_in, p, "txt_in"));
    CQ_TRY(bind_lin(&b, &m->norm_out, p, "norm_out.linear"));
    CQ_TRY(bind_lin(&b, &m->proj_out, p, "proj_out"));
    for (int l = 0; l < m->cfg.num_layers; l++)
        for (int s = 0; s < 2; s++) CQ_TRY(bind_stream(&b, p, l, s, &m->blocks[l].s[s]));
    return CQ_OK;
}

cq_status cq_qimage_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qimage **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: load needs somewhere to put the model");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: load needs a pack and a backend");
    if (!prefix) prefix = "";
    cq_qimage *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_qimage_parse_config(cmf, prefix, &m->cfg);
    cq_tt_list table = {0};
    if (s == CQ_OK) s = cq_qimage_tensors(&m->cfg, prefix, &table);
    if (s == CQ_OK && !(m->blocks = cq_calloc((size_t)m->cfg.num_layers, sizeof *m->blocks))) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) s = bind_all(m, cmf, prefix, &table);
    cq_tt_list_free(&table);
    /* RoPE inverse frequencies per axis, in f32 as the reference: 1 / pow(theta, arange(0, dim, 2).float() / dim) */
    if (s == CQ_OK) s = cq_dit_rope_init(&m->rope, 3, m->cfg.axes, 10000.0f);
    if (s != CQ_OK) {
        cq_qimage_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

void cq_qimage_free(cq_qimage *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    cq_free(m->blocks);
    cq_free(m);
}

const cq_qimage_config *cq_qimage_get_config(const cq_qimage *m) { return &m->cfg; }

void cq_qimage_set_tap(cq_qimage *m, cq_qimage_tap_fn fn, void *user) {
    m->tap = fn;
    m->tap_user = user;
}

static void tap(const cq_qimage *m, const char *name, const cq_tensor *t) {
    if (m->tap) m->tap(m->tap_user, name, t);
}

/* ------------------------------------------------------------------------ */
/* Layout and positions                                                     */
/* ------------------------------------------------------------------------ */
/* The text offset m: the largest max(h / 2, w / 2) over the images (the centred grids reach up to it). */
static int text_offset(const cq_qimage_layout *lay) {
    int m = 0;
    for (int i = 0; i < lay->n_images; i++) {
        const int32_t *sh = lay->img_shapes[i];
        m = CQ_MAX(m, CQ_MAX(sh[1] / 2, sh[2] / 2));
    }
    return m;
}

cq_status cq_qimage_layout_sizes(const cq_qimage_layout *lay, int *n_img, int *n_target) {
    if (!lay || !lay->img_shapes || lay->n_images < 1 || lay->n_images > CQ_QIMAGE_MAX_IMAGES)
        return cq_fail(CQ_ERR_INVALID_ARG, "qimage: a layout needs 1 .. %d images (the target first), it has %d",
                       CQ_QIMAGE_MAX_IMAGES, lay ? lay->n_images : 0);
    if (lay->n_txt < 1 || lay->n_txt > QI_ROPE_LIMIT)
        return cq_fail(CQ_ERR_SHAPE, "qimage: the layout has %d text rows (1 .. %d)", lay->n_txt, QI_ROPE_LIMIT);
    int64_t n = 0;
    for (int i = 0; i < lay->n_images; i++) {
        const int32_t *sh = lay->img_shapes[i];
        if (sh[0] != 1)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qimage: img_shapes[%d] has %d frames; only single-frame images are "
                           "supported", i, sh[0]);
        /* the centred grid spans rows -(h - h/2) .. h/2 - 1 of the reference's table [-4096, 4096) */
        if (sh[1] < 1 || sh[2] < 1 || sh[1] > 2 * QI_ROPE_LIMIT || sh[2] > 2 * QI_ROPE_LIMIT)
            return cq_fail(CQ_ERR_SHAPE, "qimage: img_shapes[%d] = (%d, %d, %d) is not a valid token grid (sides 1 .. "
                           "%d)", i, sh[0], sh[1], sh[2], 2 * QI_ROPE_LIMIT);
        n += (int64_t)sh[1] * sh[2];
    }
    const int m = text_offset(lay);
    if (m + lay->n_txt > QI_ROPE_LIMIT)
        return cq_fail(CQ_ERR_SHAPE, "qimage: %d text rows after the images' offset %d reach RoPE position %d; the "
                       "model's table ends at %d", lay->n_txt, m, m + lay->n_txt - 1, QI_ROPE_LIMIT - 1);
    if (n + lay->n_txt > QI_MAX_ROWS)
        return cq_fail(CQ_ERR_SHAPE, "qimage: the joint sequence would have %lld rows; at most %d are supported",
                       (long long)(n + lay->n_txt), QI_MAX_ROWS);
    if (n_img) *n_img = (int)n;
    if (n_target) *n_target = lay->img_shapes[0][1] * lay->img_shapes[0][2];
    return CQ_OK;
}

void cq_qimage_positions(const cq_qimage_layout *lay, int32_t *pos) {
    const int m = text_offset(lay);
    for (int j = 0; j < lay->n_txt; j++) pos[3 * j] = pos[3 * j + 1] = pos[3 * j + 2] = m + j;
    int32_t *p = pos + 3 * (size_t)lay->n_txt;
    for (int i = 0; i < lay->n_images; i++) {
        const int h = lay->img_shapes[i][1], w = lay->img_shapes[i][2];
        for (int r = 0; r < h; r++)
            for (int c = 0; c < w; c++, p += 3) {
                p[0] = i;
                p[1] = r - (h - h / 2);
                p[2] = c - (w - w / 2);
            }
    }
}

/* ------------------------------------------------------------------------ */
/* Conditioning                                                             */
/* ------------------------------------------------------------------------ */
void cq_qimage_cond_free(cq_qimage_cond *c) {
    if (!c) return;
    cq_dit_stepper_free(&c->stepper);
    cq_tensor *t[] = {&c->txt, &c->cos_t, &c->sin_t, &c->feat, &c->thid, &c->temb, &c->stemb, &c->imod, &c->tmod,
                      &c->omod, &c->x, &c->hn, &c->h, &c->q, &c->k, &c->v, &c->att, &c->mlp, &c->kc, &c->vc,
                      &c->tin, &c->out};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    cq_free(c->runs);
    cq_free(c);
}

int cq_qimage_cond_tokens(const cq_qimage_cond *c) { return c->N; }
int cq_qimage_cond_text_rows(const cq_qimage_cond *c) { return c->L; }

static cq_status cond_alloc(cq_qimage *m, cq_qimage_cond *c) {
    cq_backend *be = m->be;
    const cq_qimage_config *cf = &m->cfg;
    const int64_t R = (int64_t)c->L + c->N, D = cf->inner;
    const cq_dtype act = cq_backend_act_dtype(be);
#define A2T(t, dt, r, cols) CQ_TRY(cq_tensor_alloc_2d(be, dt, r, cols, &c->t))
#define A2(t, r, cols) A2T(t, CQ_DTYPE_F32, r, cols)
    A2(txt, c->L, D);
    A2(cos_t, R, cf->head_dim / 2);
    A2(sin_t, R, cf->head_dim / 2);
    A2(feat, c->T, QI_TPROJ);
    A2(thid, c->T, D);
    A2(temb, c->T, D);
    A2(stemb, c->T, D);
    A2(imod, (int64_t)cf->num_layers * c->T, M_COUNT * D);
    A2(tmod, cf->num_layers, M_COUNT * D);
    A2(omod, 1, 2 * D);
    A2(x, R, D);
    if (act != CQ_DTYPE_F32) A2(hn, R, D);
    A2T(h, act, R, D);
    A2T(q, act, R, D);
    A2T(k, act, R, D);
    A2T(v, act, R, D);
    A2T(att, act, R, D);
    A2T(mlp, act, R, cf->mlp_hidden);
    if (c->masked && c->n_active > 0) {
        A2T(kc, act, c->n_active, D);
        A2T(vc, act, c->n_active, D);
    }
    A2(tin, c->N, cf->in_channels);
    A2(out, c->N, cf->out_dim);
#undef A2
#undef A2T
    return CQ_OK;
}

/* The valid text rows as runs (first, count), when some rows are masked. */
static cq_status mask_runs(cq_qimage_cond *c, const uint8_t *mask) {
    c->n_active = c->L;
    if (!mask) return CQ_OK;
    int active = 0, runs = 0;
    for (int j = 0; j < c->L; j++) {
        active += mask[j] != 0;
        runs += mask[j] && (j == 0 || !mask[j - 1]);
    }
    c->n_active = active;
    if (active == c->L) return CQ_OK;
    c->masked = true;
    if (runs == 0) return CQ_OK; /* no text key at all: the queries see the image keys only */
    if (!(c->runs = cq_mallocn((size_t)runs, sizeof *c->runs))) return CQ_ERR_NOMEM;
    for (int j = 0; j < c->L; j++) {
        if (!mask[j]) continue;
        if (j == 0 || !mask[j - 1]) { /* a run starts here */
            c->runs[c->n_runs][0] = j;
            c->runs[c->n_runs][1] = 0;
            c->n_runs++;
        }
        c->runs[c->n_runs - 1][1]++;
    }
    return CQ_OK;
}

/* The RoPE tables of the joint sequence into cos_t / sin_t. */
static cq_status rope_upload(cq_qimage *m, cq_qimage_cond *c, const cq_qimage_layout *lay) {
    const int R = c->L + c->N;
    int32_t *pos = cq_mallocn((size_t)R * 3, sizeof(int32_t));
    if (!pos) return CQ_ERR_NOMEM;
    cq_qimage_positions(lay, pos);
    cq_status s = cq_dit_rope_upload(&m->rope, pos, R, &c->cos_t, &c->sin_t);
    cq_free(pos);
    return s;
}

/* txt_in(txt_norm(rows)) into c->txt. */
static cq_status embed_text(cq_qimage *m, cq_qimage_cond *c, const float *txt) {
    cq_backend *be = m->be;
    const int J = m->cfg.joint_dim;
    cq_tensor tin = {0}, tn = {0};
    cq_status s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, c->L, J, &tin);
    if (s == CQ_OK) s = cq_tensor_upload(&tin, txt, (size_t)c->L * (size_t)J * sizeof(float));
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, c->L, J, &tn);
    if (s == CQ_OK) s = cq_op_rmsnorm(be, &tn, &tin, &m->txt_norm, NULL, false, QI_EPS);
    if (s == CQ_OK) s = cq_op_linear(be, &c->txt, &tn, &m->txt_in.w, &m->txt_in.b);
    if (s == CQ_OK) tap(m, "txt_embed", &c->txt);
    if (s == CQ_OK) s = cq_backend_sync(be);
    cq_tensor_free(&tin);
    cq_tensor_free(&tn);
    return s;
}

cq_status cq_qimage_prepare(cq_qimage *m, const cq_qimage_layout *lay, const float *txt, cq_qimage_cond **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: prepare needs somewhere to put the conditioning");
    *out = NULL;
    if (!m || !txt) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: prepare needs a model and text rows");
    int n_img, n_target;
    CQ_TRY(cq_qimage_layout_sizes(lay, &n_img, &n_target));
    CQ_TRY(cq_dit_check_finite("qimage", "text", txt, (size_t)lay->n_txt, (size_t)m->cfg.joint_dim));
    cq_qimage_cond *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->m = m;
    c->n_images = lay->n_images;
    memcpy(c->shapes, lay->img_shapes, (size_t)lay->n_images * sizeof c->shapes[0]);
    c->L = lay->n_txt;
    c->N = n_img;
    c->N0 = n_target;
    c->T = m->cfg.zero_cond_t ? 2 : 1;
    cq_status s = mask_runs(c, lay->txt_mask);
    if (s == CQ_OK) s = cond_alloc(m, c);
    if (s == CQ_OK) s = rope_upload(m, c, lay);
    if (s == CQ_OK) {
        tap(m, "rope_cos", &c->cos_t);
        tap(m, "rope_sin", &c->sin_t);
        s = embed_text(m, c, txt);
    }
    if (s != CQ_OK) {
        cq_qimage_cond_free(c);
        return s;
    }
    *out = c;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* The step                                                                 */
/* ------------------------------------------------------------------------ */
/* temb and every modulation table (device ops only). */
static cq_status modulation(cq_qimage *m, cq_qimage_cond *c) {
    cq_backend *be = m->be;
    cq_matmul_args a = {.y = &c->thid, .x = &c->feat, .w = &m->t1.w, .bias = &m->t1.b, .act = CQ_ACT_SILU};
    CQ_TRY(cq_op_matmul(be, &a));
    CQ_TRY(cq_op_linear(be, &c->temb, &c->thid, &m->t2.w, &m->t2.b));
    tap(m, "temb", &c->temb);
    /* every consumer reads SiLU(temb); the text stream and the output head its t row only */
    CQ_TRY(cq_op_unary(be, &c->stemb, &c->temb, CQ_UNARY_SILU, 0.0f, 0.0f));
    cq_tensor st0 = cq_tensor_rows_view(&c->stemb, 0, 1);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        const qi_block *B = &m->blocks[l];
        cq_tensor im = cq_tensor_rows_view(&c->imod, (int64_t)l * c->T, c->T), tm = cq_tensor_rows_view(&c->tmod, l, 1);
        CQ_TRY(cq_op_linear(be, &im, &c->stemb, &B->s[QI_IMG].mod.w, &B->s[QI_IMG].mod.b));
        CQ_TRY(cq_op_linear(be, &tm, &st0, &B->s[QI_TXT].mod.w, &B->s[QI_TXT].mod.b));
        if (l == 0) {
            tap(m, "img_mod_0", &im);
            tap(m, "txt_mod_0", &tm);
        }
    }
    return cq_op_linear(be, &c->omod, &st0, &m->norm_out.w, &m->norm_out.b);
}

/* A stream's rows in the joint sequence and the modulation groups of block l: the text rows read row l of the
 * text table; the target's tokens row 0 of the block's image table, the condition tokens its t = 0 row with
 * zero_cond_t (row 1), else row 0 too. */
typedef struct qi_rows {
    int64_t r0, n;
    cq_dit_group g[2];
    int n_groups;
    cq_tensor table;
    cq_dit_mod mod;
} qi_rows;

static void stream_rows(const cq_qimage *m, const cq_qimage_cond *c, int l, int which, qi_rows *r) {
    const int64_t D = m->cfg.inner;
    memset(r, 0, sizeof *r);
    if (which == QI_TXT) {
        r->r0 = 0;
        r->n = c->L;
        r->table = cq_tensor_rows_view(&c->tmod, l, 1);
        r->g[0] = (cq_dit_group){0, c->L, 0};
        r->n_groups = 1;
    } else {
        r->r0 = c->L;
        r->n = c->N;
        r->table = cq_tensor_rows_view(&c->imod, (int64_t)l * c->T, c->T);
        r->g[0] = (cq_dit_group){c->L, c->N0, 0};
        r->g[1] = (cq_dit_group){(int64_t)c->L + c->N0, c->N - c->N0, c->T - 1};
        r->n_groups = c->N > c->N0 ? 2 : 1;
    }
    r->mod = (cq_dit_mod){.t = &r->table, .dim = D, .per_row = M_COUNT};
}

/* The f32 rows the norms write: hn, or h itself with f32 activations. */
static cq_tensor *normed_f32(cq_qimage_cond *c) { return c->h.dtype == CQ_DTYPE_F32 ? &c->h : &c->hn; }

/* h = LN(x) * (1 + scale) + shift for both streams, in h's dtype. */
static cq_status modulated_ln(cq_qimage *m, cq_qimage_cond *c, const qi_rows *r, int scale, int shift) {
    cq_tensor *y = normed_f32(c);
    for (int s = 0; s < 2; s++)
        CQ_TRY(cq_dit_modulated_ln(m->be, r[s].g, r[s].n_groups, y, &c->x, &r[s].mod, scale, shift, QI_EPS));
    return y == &c->h ? CQ_OK : cq_op_copy(m->be, &c->h, y);
}

/* The joint attention: queries over every row, keys/values of the active text rows and every image token. */
static cq_status attention(cq_qimage *m, cq_qimage_cond *c) {
    cq_backend *be = m->be;
    const cq_qimage_config *cf = &m->cfg;
    cq_attn_args at = {.o = &c->att, .q = &c->q, .k = &c->k, .v = &c->v, .n_heads = cf->n_heads,
                       .n_kv_heads = cf->n_heads, .head_dim = cf->head_dim};
    cq_tensor ki, vi;
    if (c->masked) {
        /* padded text rows are no query's key: the active ones gathered into kc / vc, then the image rows */
        int64_t o = 0;
        for (int i = 0; i < c->n_runs; i++) {
            cq_tensor dk = cq_tensor_rows_view(&c->kc, o, c->runs[i][1]), dv = cq_tensor_rows_view(&c->vc, o, c->runs[i][1]);
            cq_tensor sk = cq_tensor_rows_view(&c->k, c->runs[i][0], c->runs[i][1]);
            cq_tensor sv = cq_tensor_rows_view(&c->v, c->runs[i][0], c->runs[i][1]);
            CQ_TRY(cq_op_copy(be, &dk, &sk));
            CQ_TRY(cq_op_copy(be, &dv, &sv));
            o += c->runs[i][1];
        }
        ki = cq_tensor_rows_view(&c->k, c->L, c->N);
        vi = cq_tensor_rows_view(&c->v, c->L, c->N);
        at.k = &ki;
        at.v = &vi;
        if (c->n_active > 0) {
            at.k_prefix = &c->kc;
            at.v_prefix = &c->vc;
        }
    }
    return cq_op_attention(be, &at);
}

static cq_status block(cq_qimage *m, cq_qimage_cond *c, int l) {
    cq_backend *be = m->be;
    const cq_qimage_config *cf = &m->cfg;
    const qi_block *B = &m->blocks[l];
    qi_rows r[2];
    for (int s = 0; s < 2; s++) stream_rows(m, c, l, s, &r[s]);
    /* attention half */
    CQ_TRY(modulated_ln(m, c, r, M_SCALE1, M_SHIFT1));
    for (int s = 0; s < 2; s++) {
        const qi_stream *S = &B->s[s];
        cq_tensor h = cq_tensor_rows_view(&c->h, r[s].r0, r[s].n), q = cq_tensor_rows_view(&c->q, r[s].r0, r[s].n);
        cq_tensor k = cq_tensor_rows_view(&c->k, r[s].r0, r[s].n), v = cq_tensor_rows_view(&c->v, r[s].r0, r[s].n);
        cq_tensor cs = cq_tensor_rows_view(&c->cos_t, r[s].r0, r[s].n), sn = cq_tensor_rows_view(&c->sin_t, r[s].r0, r[s].n);
        /* the three projections of h back to back: a backend may prepare h once for all three */
        CQ_TRY(cq_op_linear(be, &q, &h, &S->q.w, &S->q.b));
        CQ_TRY(cq_op_linear(be, &k, &h, &S->k.w, &S->k.b));
        CQ_TRY(cq_op_linear(be, &v, &h, &S->v.w, &S->v.b));
        CQ_TRY(cq_op_qk_norm_rope(be, &q, cf->n_heads, cf->head_dim, &S->norm_q, QI_EPS, &cs, &sn,
                                  CQ_ROPE_INTERLEAVED, 0));
        CQ_TRY(cq_op_qk_norm_rope(be, &k, cf->n_heads, cf->head_dim, &S->norm_k, QI_EPS, &cs, &sn,
                                  CQ_ROPE_INTERLEAVED, 0));
    }
    CQ_TRY(attention(m, c));
    for (int s = 0; s < 2; s++)
        CQ_TRY(cq_dit_gated_proj(be, r[s].g, r[s].n_groups, &c->x, &c->att, &B->s[s].o.w, &B->s[s].o.b, &r[s].mod,
                                 M_GATE1));
    /* MLP half */
    CQ_TRY(modulated_ln(m, c, r, M_SCALE2, M_SHIFT2));
    for (int s = 0; s < 2; s++) {
        const qi_stream *S = &B->s[s];
        cq_tensor h = cq_tensor_rows_view(&c->h, r[s].r0, r[s].n), hid = cq_tensor_rows_view(&c->mlp, r[s].r0, r[s].n);
        cq_matmul_args mm = {.y = &hid, .x = &h, .w = &S->mlp_in.w, .bias = &S->mlp_in.b, .act = CQ_ACT_GELU_TANH};
        CQ_TRY(cq_op_matmul(be, &mm));
        CQ_TRY(cq_dit_gated_proj(be, r[s].g, r[s].n_groups, &c->x, &c->mlp, &S->mlp_out.w, &S->mlp_out.b, &r[s].mod,
                                 M_GATE2));
    }
    return CQ_OK;
}

/* The step's device ops, from the uploaded features and tokens to the output in c->out. */
static cq_status step_ops(cq_qimage *m, cq_qimage_cond *c) {
    cq_backend *be = m->be;
    const cq_qimage_config *cf = &m->cfg;
    CQ_TRY(modulation(m, c));
    cq_tensor xt = cq_tensor_rows_view(&c->x, 0, c->L), xi = cq_tensor_rows_view(&c->x, c->L, c->N);
    CQ_TRY(cq_op_copy(be, &xt, &c->txt));
    CQ_TRY(cq_op_linear(be, &xi, &c->tin, &m->img_in.w, &m->img_in.b));
    tap(m, "img_embed", &xi);
    for (int l = 0; l < cf->num_layers; l++) {
        CQ_TRY(block(m, c, l));
        if (m->tap) {
            char name[32];
            snprintf(name, sizeof name, "img_%d", l);
            tap(m, name, &xi);
            snprintf(name, sizeof name, "txt_%d", l);
            tap(m, name, &xt);
        }
    }
    /* the output head on the image rows: LN(x) * (1 + scale) + shift -> proj_out */
    const cq_dit_mod om = {.t = &c->omod, .dim = cf->inner, .per_row = 2};
    cq_tensor sc = cq_dit_mod_vec(&om, 0, 0), sh = cq_dit_mod_vec(&om, 0, 1);
    cq_tensor h = cq_tensor_rows_view(normed_f32(c), c->L, c->N);
    CQ_TRY(cq_op_layernorm(be, &h, &xi, &sc, &sh, QI_EPS));
    tap(m, "norm_out", &h);
    return cq_op_linear(be, &c->out, &h, &m->proj_out.w, &m->proj_out.b);
}

typedef struct step_call {
    cq_qimage *m;
    cq_qimage_cond *c;
} step_call;

static cq_status step_ops_cb(void *user) {
    step_call *k = user;
    return step_ops(k->m, k->c);
}

cq_status cq_qimage_step(cq_qimage *m, cq_qimage_cond *c, const float *img, float t, float *out) {
    if (!m || !c || c->m != m)
        return cq_fail(CQ_ERR_INVALID_ARG, "qimage: step needs a conditioning made by this model's prepare");
    if (!img || !out) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: step needs image tokens and an output buffer");
    if (!(t >= 0.0f && t <= 1.0f)) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: timestep %g is outside [0, 1]", (double)t);
    const cq_qimage_config *cf = &m->cfg;
    const size_t N = (size_t)c->N;
    CQ_TRY(cq_dit_check_finite("qimage", "image tokens", img, N, (size_t)cf->in_channels));
    /* the timestep rows t (and 0 with zero_cond_t): the angle (t * f) * 1000, in that order as the reference */
    float feat[2 * QI_TPROJ];
    const float ts[2] = {t, 0.0f};
    const cq_dit_tproj tp = {.dim = QI_TPROJ, .flip_sin_to_cos = true, .scale = 1000.0f, .max_period = 10000.0f};
    cq_dit_timestep_features(&tp, ts, c->T, feat);
    CQ_TRY(cq_tensor_upload(&c->feat, feat, (size_t)c->T * QI_TPROJ * sizeof(float)));
    CQ_TRY(cq_tensor_upload(&c->tin, img, N * (size_t)cf->in_channels * sizeof(float)));
    step_call call = {m, c};
    if (m->tap) CQ_TRY(step_ops(m, c)); /* taps download between ops: never recorded */
    else CQ_TRY(cq_dit_stepper_run(&c->stepper, m->be, step_ops_cb, &call, "qimage"));
    CQ_TRY(cq_tensor_download(&c->out, out, N * (size_t)cf->out_dim * sizeof(float)));
    return cq_backend_sync(m->be);
}

cq_status cq_qimage_forward(cq_qimage *m, const cq_qimage_layout *lay, const float *txt, const float *img, float t,
                            float *out) {
    if (!m || !img || !out) return cq_fail(CQ_ERR_INVALID_ARG, "qimage: forward needs a model, image tokens and an output");
    cq_qimage_cond *c = NULL;
    CQ_TRY(cq_qimage_prepare(m, lay, txt, &c));
    cq_status s = cq_qimage_step(m, c, img, t, out);
    cq_qimage_cond_free(c);
    return s;
}

/* ------------------------------------------------------------------------ */
/* The denoiser interface                                                   */
/* ------------------------------------------------------------------------ */
static cq_status dn_prepare(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond) {
    *cond = NULL;
    const cq_qimage_config *cf = cq_qimage_get_config(self);
    if (cf->out_dim != cf->in_channels)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qimage: the model writes %d floats per token but reads %d; as a denoiser "
                       "it must write what it reads", cf->out_dim, cf->in_channels);
    if (lat_h <= 0 || lat_w <= 0 || lat_h % 2 || lat_w % 2)
        return cq_fail(CQ_ERR_SHAPE, "qimage: a %dx%d latent cannot be cut into 2x2 patches (both sides must be even "
                       "and positive)", lat_h, lat_w);
    const int32_t shape[1][3] = {{1, lat_h / 2, lat_w / 2}};
    const cq_qimage_layout lay = {.n_images = 1, .img_shapes = shape, .n_txt = n_rows};
    cq_qimage_cond *c = NULL;
    cq_status s = cq_qimage_prepare(self, &lay, rows, &c);
    *cond = c;
    return s;
}

static cq_status dn_step(void *self, void *cond, const float *x, float t, float *out) {
    return cq_qimage_step(self, cond, x, t, out);
}

static void dn_cond_free(void *self, void *cond) {
    (void)self;
    cq_qimage_cond_free(cond);
}

cq_denoiser cq_qimage_denoiser(cq_qimage *m) {
    return (cq_denoiser){.self = m, .channels = cq_qimage_get_config(m)->in_channels, .prepare = dn_prepare,
                         .step = dn_step, .cond_free = dn_cond_free};
}
