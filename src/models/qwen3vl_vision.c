/*
 * qwen3vl_vision.c — the Qwen3-VL vision tower (qwen3vl_vision.h): its
 * config, the weight binding and the forward pass.
 *
 * The host prepares what depends only on the layout: the interpolated
 * position embedding of every patch row (from a host copy of the table, so
 * the four-tap sum is formed in the reference's order), the RoPE tables and
 * every row's key bounds: the frame attention stays within, one attention
 * call per block over all rows. The rows keep the input's order throughout
 * (no windows).
 *
 * LayerNorm's affine gain w runs as the op's (1 + scale) with scale = w - 1
 * formed once at load: for weights stored as bf16 (or f16) both steps are
 * exact, so the gain applied is w itself.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/tensors.h"
#include "models/kit/vision.h"
#include "models/qwen3vl_vision.h"
#include "models/tables.h"

#define WHO "qwen3vl_vision"

typedef struct q3v_norm {
    cq_tensor scale, shift;          /* F32: w - 1, b */
} q3v_norm;

typedef struct q3v_block {
    q3v_norm norm1, norm2;
    cq_tensor qkv, qkv_b;            /* [3D, D], F32 [3D] */
    cq_tensor proj, proj_b;          /* [D, D], F32 [D] */
    cq_tensor fc1, fc1_b, fc2, fc2_b;
} q3v_block;

typedef struct q3v_merger {
    q3v_norm norm;                   /* [D] (the merger) or [4D] (a deepstack merger) */
    cq_vision_merger_w mlp;
} q3v_merger;

struct cq_qwen3vl_vision {
    cq_backend *be;
    cq_qwen3vl_vision_config cfg;
    cq_tensor patch, patch_b;        /* [D, C*T*P*P], F32 [D] */
    float *pos;                      /* host [n_pos, D]: the position table */
    q3v_merger merger;
    q3v_merger *deep;                /* [n_deepstack] */
    q3v_block *blocks;
    int *deep_of;                    /* [depth]: the deepstack merger after block l, or -1 */
    cq_tensor cols[3];               /* I32 [D]: the q, k, v columns of the qkv output */
    float *inv_freq;                 /* [head_dim / 4] */
    cq_tt_held held;                 /* every backend tensor above */
};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
static cq_status parse_act(const cq_cfg *g, cq_qwen3vl_vision_act *act) {
    static const char *const names[CQ_QWEN3VL_ACT_COUNT] = {"gelu_pytorch_tanh", "gelu", "silu"};
    *act = CQ_QWEN3VL_ACT_GELU_TANH;
    const cJSON *a = cq_cfg_get(g, "hidden_act");
    if (!a) return CQ_OK;
    for (int i = 0; cJSON_IsString(a) && i < CQ_QWEN3VL_ACT_COUNT; i++)
        if (strcmp(a->valuestring, names[i]) == 0) {
            *act = (cq_qwen3vl_vision_act)i;
            return CQ_OK;
        }
    return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": vision_config.hidden_act '%s' is not supported (gelu_pytorch_tanh, "
                   "gelu, silu)", cJSON_IsString(a) ? a->valuestring : "?");
}

static cq_status parse_json(const cJSON *root, void *out) {
    cq_qwen3vl_vision_config *c = out;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, WHO ": config is not a JSON object");
    const cq_cfg top = {root, WHO, ""};
    const cJSON *vc = cq_cfg_get(&top, "vision_config");
    if (!vc) return cq_fail(CQ_ERR_MISSING, WHO ": the config has no vision_config (not a Qwen3-VL model)");
    if (!cJSON_IsObject(vc)) return cq_fail(CQ_ERR_PARSE, WHO ": config vision_config must be an object");
    const cq_cfg g = {vc, WHO, "vision_config."};
    const cJSON *mt = cq_cfg_get(&g, "model_type");
    if (mt && !(cJSON_IsString(mt) && (strcmp(mt->valuestring, "qwen3_vl_vision") == 0 ||
                                        strcmp(mt->valuestring, "qwen3_vl") == 0)))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": vision_config.model_type '%s' is not Qwen3-VL's",
                       cJSON_IsString(mt) ? mt->valuestring : "?");
    /* the tower's widths have no default worth assuming: required */
    CQ_TRY(cq_cfg_int(&g, "depth", 0, 1, CQ_QWEN3VL_VISION_MAX_DEPTH, &c->depth));
    CQ_TRY(cq_cfg_int(&g, "hidden_size", 0, 1, 65536, &c->hidden));
    CQ_TRY(cq_cfg_int(&g, "intermediate_size", 0, 1, 262144, &c->intermediate));
    CQ_TRY(cq_cfg_int(&g, "num_heads", 0, 1, 1024, &c->n_heads));
    CQ_TRY(cq_cfg_int(&g, "out_hidden_size", 0, 1, 65536, &c->out_hidden));
    CQ_TRY(cq_cfg_int(&g, "num_position_embeddings", 0, 1, 1 << 20, &c->n_pos));
    CQ_TRY(cq_cfg_int(&g, "patch_size", 16, 1, 64, &c->patch));
    CQ_TRY(cq_cfg_int(&g, "temporal_patch_size", 2, 1, 16, &c->temporal_patch));
    CQ_TRY(cq_cfg_int(&g, "spatial_merge_size", 2, 1, 8, &c->merge));
    CQ_TRY(cq_cfg_int(&g, "in_channels", 3, 1, 16, &c->in_channels));
    CQ_TRY(parse_act(&g, &c->act));
    if (c->hidden % c->n_heads)
        return cq_fail(CQ_ERR_PARSE, WHO ": vision_config.hidden_size %d is not a multiple of num_heads %d",
                       c->hidden, c->n_heads);
    c->head_dim = c->hidden / c->n_heads;
    /* D/2 rotary channels, half of them for each of the two axes */
    if (c->head_dim % 4)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": head_dim %d is not a multiple of 4 (2-D RoPE)", c->head_dim);
    /* the reference's int(n ** 0.5): rows past side * side are never read */
    int side = (int)sqrt((double)c->n_pos);
    while ((int64_t)side * side > c->n_pos) side--;
    while ((int64_t)(side + 1) * (side + 1) <= c->n_pos) side++;
    c->pos_side = side;
    int n = 0;
    CQ_TRY(cq_cfg_ints(&g, "deepstack_visual_indexes", 0, CQ_QWEN3VL_VISION_MAX_DEEPSTACK, 0, c->depth - 1,
                       c->deepstack, &n));
    if (!cq_cfg_get(&g, "deepstack_visual_indexes")) {
        /* transformers' default */
        static const int def[3] = {8, 16, 24};
        for (int i = 0; i < 3; i++) {
            if (def[i] >= c->depth)
                return cq_fail(CQ_ERR_PARSE, WHO ": vision_config.deepstack_visual_indexes is absent and its default "
                               "[8, 16, 24] does not fit depth %d", c->depth);
            c->deepstack[n++] = def[i];
        }
    }
    for (int i = 1; i < n; i++)
        if (c->deepstack[i] <= c->deepstack[i - 1])
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": vision_config.deepstack_visual_indexes must be strictly "
                           "increasing ([%d] = %d after %d)", i, c->deepstack[i], c->deepstack[i - 1]);
    c->n_deepstack = n;
    CQ_TRY(cq_vision_rope_theta(&g, &c->rope_theta));
    c->eps = 1e-6f;
    return CQ_OK;
}

cq_status cq_qwen3vl_vision_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen3vl_vision_config *cfg) {
    return cq_cfg_read(cmf, prefix, WHO, parse_json, cfg);
}

cq_status cq_qwen3vl_vision_rows(const cq_qwen3vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                 int64_t *n_rows) {
    return cq_vision_rows(WHO, c->merge, grid, n_images, CQ_QWEN3VL_VISION_MAX_IMAGES, CQ_QWEN3VL_VISION_MAX_ROWS,
                          n_rows);
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */
void cq_qwen3vl_vision_free(cq_qwen3vl_vision *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    cq_free(m->blocks);
    cq_free(m->deep);
    cq_free(m->deep_of);
    cq_free(m->inv_freq);
    cq_free(m->pos);
    cq_free(m);
}

const cq_qwen3vl_vision_config *cq_qwen3vl_vision_get_config(const cq_qwen3vl_vision *m) { return &m->cfg; }

/* A LayerNorm "<name>.weight" / "<name>.bias" as the op's scale (w - 1) and shift (b). */
static cq_status bind_norm(const cq_tt_binder *b, const char *name, q3v_norm *n) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%s.weight", name));
    const size_t len = (size_t)v->nelem;
    float *w = cq_mallocn(len, sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    cq_status s = cq_tt_read_vector(b->who, v, w, len);
    for (size_t i = 0; s == CQ_OK && i < len; i++) w[i] -= 1.0f;
    if (s == CQ_OK) s = cq_tt_held_upload(b, w, 1, (int64_t)len, &n->scale);
    cq_free(w);
    if (s == CQ_OK) s = cq_tt_bind_vector(b, &n->shift, "%s.bias", name);
    return s;
}

static cq_status bind_merger(const cq_tt_binder *b, const char *p, q3v_merger *mg) {
    char n[448];
    snprintf(n, sizeof n, "%snorm", p);
    CQ_TRY(bind_norm(b, n, &mg->norm));
    CQ_TRY(cq_tt_bind_weight(b, &mg->mlp.fc1, "%slinear_fc1.weight", p));
    CQ_TRY(cq_tt_bind_vector(b, &mg->mlp.fc1_b, "%slinear_fc1.bias", p));
    CQ_TRY(cq_tt_bind_weight(b, &mg->mlp.fc2, "%slinear_fc2.weight", p));
    return cq_tt_bind_vector(b, &mg->mlp.fc2_b, "%slinear_fc2.bias", p);
}

/* The position table, decoded to the host once (the interpolation reads it there). */
static cq_status read_pos(cq_qwen3vl_vision *m, const cq_tt_binder *b, const char *p) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%spos_embed.weight", p));
    const size_t n = (size_t)m->cfg.n_pos * (size_t)m->cfg.hidden;
    m->pos = cq_mallocn(n, sizeof(float));
    if (!m->pos) return CQ_ERR_NOMEM;
    cq_status s = cq_cmf_dequantize(v, m->pos, n);
    return s == CQ_OK ? s : cq_fail_prefix(s, WHO ": tensor '%s': ", v->name);
}

static cq_status bind_all(cq_qwen3vl_vision *m, const cq_tt_binder *b, const char *p) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    char n[400];
    CQ_TRY(cq_vision_bind_patch(b, p, &m->patch));
    CQ_TRY(cq_tt_bind_vector(b, &m->patch_b, "%spatch_embed.proj.bias", p));
    CQ_TRY(read_pos(m, b, p));
    snprintf(n, sizeof n, "%smerger.", p);
    CQ_TRY(bind_merger(b, n, &m->merger));
    for (int k = 0; k < c->n_deepstack; k++) {
        snprintf(n, sizeof n, "%sdeepstack_merger_list.%d.", p, k);
        CQ_TRY(bind_merger(b, n, &m->deep[k]));
    }
    for (int l = 0; l < c->depth; l++) {
        q3v_block *B = &m->blocks[l];
        snprintf(n, sizeof n, "%sblocks.%d.norm1", p, l);
        CQ_TRY(bind_norm(b, n, &B->norm1));
        snprintf(n, sizeof n, "%sblocks.%d.norm2", p, l);
        CQ_TRY(bind_norm(b, n, &B->norm2));
#define W(field, suffix) CQ_TRY(cq_tt_bind_weight(b, &B->field, "%sblocks.%d." suffix, p, l))
#define V(field, suffix) CQ_TRY(cq_tt_bind_vector(b, &B->field, "%sblocks.%d." suffix, p, l))
        W(qkv, "attn.qkv.weight");
        V(qkv_b, "attn.qkv.bias");
        W(proj, "attn.proj.weight");
        V(proj_b, "attn.proj.bias");
        W(fc1, "mlp.linear_fc1.weight");
        V(fc1_b, "mlp.linear_fc1.bias");
        W(fc2, "mlp.linear_fc2.weight");
        V(fc2_b, "mlp.linear_fc2.bias");
#undef W
#undef V
    }
    return cq_vision_qkv_cols(m->be, c->hidden, &m->held, m->cols);
}

cq_status cq_qwen3vl_vision_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen3vl_vision **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": file or backend is NULL");
    if (!prefix) prefix = "";
    if (strlen(prefix) > 200) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": tensor prefix is too long");
    cq_qwen3vl_vision *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_qwen3vl_vision_parse_config(cmf, prefix, &m->cfg);
    const cq_qwen3vl_vision_config *c = &m->cfg;
    const char *stem = s == CQ_OK ? cq_vision_stem(cmf, prefix) : NULL;
    if (s == CQ_OK && !stem)
        s = cq_fail(CQ_ERR_MISSING, WHO ": no '%smodel.visual.patch_embed.proj.weight' (nor '%svisual."
                    "patch_embed.proj.weight') in the file", prefix, prefix);
    if (s == CQ_OK) {
        m->blocks = cq_calloc((size_t)c->depth, sizeof *m->blocks);
        m->deep = cq_calloc((size_t)CQ_MAX(c->n_deepstack, 1), sizeof *m->deep);
        m->deep_of = cq_mallocn((size_t)c->depth, sizeof *m->deep_of);
        m->inv_freq = cq_mallocn((size_t)(c->head_dim / 4), sizeof(float));
        if (!m->blocks || !m->deep || !m->deep_of || !m->inv_freq) s = CQ_ERR_NOMEM;
    }
    if (s == CQ_OK) {
        for (int l = 0; l < c->depth; l++) m->deep_of[l] = -1;
        for (int k = 0; k < c->n_deepstack; k++) m->deep_of[c->deepstack[k]] = k;
        cq_vision_rope_inv_freq(c->rope_theta, c->head_dim, m->inv_freq);
        char p[256]; /* a prefix of at most 200 characters and the stem */
        snprintf(p, sizeof p, "%s%s", prefix, stem);
        cq_tt_list table = {0};
        s = cq_qwen3vl_vision_tensors(c, prefix, stem, &table);
        const cq_tt_binder b = {WHO, &table, cmf, be, &m->held};
        if (s == CQ_OK) s = bind_all(m, &b, p);
        cq_tt_list_free(&table);
    }
    if (s != CQ_OK) {
        cq_qwen3vl_vision_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */
typedef struct q3v_run {
    int64_t n;                        /* patch rows */
    int32_t *fcu;                     /* image-frame boundaries */
    int n_frames;
    float *host;                      /* staging: pixels, position embeddings, RoPE tables, downloads */
    cq_vision_segs frames;            /* every row's key bounds: its frame */
    cq_vision_acts a;
} q3v_run;

static void run_free(q3v_run *r) {
    cq_vision_acts_free(&r->a);
    cq_vision_segs_free(&r->frames);
    cq_free(r->fcu);
    cq_free(r->host);
}

/* One axis of the aligned-corners bilinear resampling, as transformers forms it in f32: the source coordinate
 * i (S-1) / (n-1), its two taps (clamped to the table) and their weights. */
static void interp_axis(int64_t i, int64_t n, int side, int tap[2], float wt[2]) {
    const float src = (float)i * (float)(side - 1) / (float)(n > 1 ? n - 1 : 1);
    const float fl = floorf(src), d = src - fl;
    const int f = (int)fl;
    tap[0] = CQ_MIN(CQ_MAX(f, 0), side - 1);
    tap[1] = CQ_MIN(CQ_MAX(f + 1, 0), side - 1);
    /* 1 - |d - offset|, clamped at 0: for offset 1 the distance 1 - d is rounded before it is subtracted */
    wt[0] = CQ_MAX(1.0f - fabsf(d), 0.0f);
    wt[1] = CQ_MAX(1.0f - fabsf(d - 1.0f), 0.0f);
}

/* Every row's position embedding (dst [n, D]) and RoPE tables (cs, sn [n, head_dim / 2]), frame by frame. */
static void host_tables(const cq_qwen3vl_vision *m, const int32_t (*grid)[3], int n_images, float *dst, float *cs,
                        float *sn) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    const size_t D = (size_t)c->hidden, half = (size_t)c->head_dim / 2;
    const int side = c->pos_side;
    size_t row = 0;
    for (int i = 0; i < n_images; i++) {
        const int64_t h = grid[i][1], w = grid[i][2];
        for (int32_t f = 0; f < grid[i][0]; f++)
            for (int64_t r = 0; r < h * w; r++, row++) {
                int64_t hp, wp;
                cq_vision_patch_hw(r, w, c->merge, &hp, &wp);
                int th[2], tw[2];
                float wh[2], ww[2];
                interp_axis(hp, h, side, th, wh);
                interp_axis(wp, w, side, tw, ww);
                float *o = dst + row * D;
                /* the four taps in the reference's order (floor/ceil of h, then of w), summed left to right */
                for (int t = 0; t < 4; t++) {
                    const float wt = wh[t / 2] * ww[t % 2];
                    const float *e = m->pos + ((size_t)th[t / 2] * (size_t)side + (size_t)tw[t % 2]) * D;
                    for (size_t j = 0; j < D; j++) o[j] = t ? o[j] + e[j] * wt : e[j] * wt;
                }
                cq_vision_rope_row(m->inv_freq, c->head_dim, hp, wp, cs + row * half, sn + row * half);
            }
    }
}

static cq_status run_alloc(const cq_qwen3vl_vision *m, q3v_run *r) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    const cq_vision_dims d = {.n = r->n, .patch_dim = cq_qwen3vl_vision_patch_dim(c), .hidden = c->hidden,
                              .head_dim = c->head_dim, .intermediate = c->intermediate,
                              .unit = c->merge * c->merge, .out_hidden = c->out_hidden};
    return cq_vision_acts_alloc(m->be, &d, &r->a);
}

static cq_status layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const q3v_norm *n, float eps) {
    return cq_op_layernorm(be, y, x, &n->scale, &n->shift, eps);
}

static cq_status block_forward(cq_qwen3vl_vision *m, q3v_run *r, int l) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    cq_backend *be = m->be;
    const q3v_block *B = &m->blocks[l];
    CQ_TRY(layernorm(be, &r->a.h, &r->a.x, &B->norm1, c->eps));
    const cq_vision_qkv_args qa = {.h = &r->a.h, .w = &B->qkv, .b = &B->qkv_b, .cols = m->cols, .cos_t = &r->a.cos_t,
                                   .sin_t = &r->a.sin_t, .qkv = &r->a.qkv, .q = &r->a.q, .k = &r->a.k, .v = &r->a.v,
                                   .n_heads = c->n_heads, .head_dim = c->head_dim};
    CQ_TRY(cq_vision_qkv(be, &qa));
    CQ_TRY(cq_vision_attend(be, &r->a.q, &r->a.k, &r->a.v, &r->a.att, &r->frames, c->n_heads, c->head_dim));
    cq_matmul_args o = {.y = &r->a.x, .x = &r->a.att, .w = &B->proj, .bias = &B->proj_b, .accumulate = true};
    CQ_TRY(cq_op_matmul(be, &o));
    CQ_TRY(layernorm(be, &r->a.h, &r->a.x, &B->norm2, c->eps));
    cq_matmul_args up = {.y = &r->a.mlp, .x = &r->a.h, .w = &B->fc1, .bias = &B->fc1_b};
    if (c->act == CQ_QWEN3VL_ACT_GELU_TANH) up.act = CQ_ACT_GELU_TANH;
    if (c->act == CQ_QWEN3VL_ACT_SILU) up.act = CQ_ACT_SILU;
    CQ_TRY(cq_op_matmul(be, &up));
    if (c->act == CQ_QWEN3VL_ACT_GELU_ERF) CQ_TRY(cq_op_unary(be, &r->a.mlp, &r->a.mlp, CQ_UNARY_GELU_ERF, 0.0f, 0.0f));
    cq_matmul_args d = {.y = &r->a.x, .x = &r->a.mlp, .w = &B->fc2, .bias = &B->fc2_b, .accumulate = true};
    return cq_op_matmul(be, &d);
}

/* A merger's output [units, out_hidden] downloaded into dst: the norm per patch (postshuffle false, the
 * merger) or over each merge unit's concatenated rows (true, the deepstack mergers). */
static cq_status merge(cq_qwen3vl_vision *m, q3v_run *r, const q3v_merger *mg, bool postshuffle, float *dst) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    const int64_t unit = (int64_t)c->merge * c->merge, units = r->n / unit, wide[2] = {units, unit * c->hidden};
    cq_tensor x4, h4;
    CQ_TRY(cq_tensor_reshape(&r->a.h, 2, wide, &h4));
    if (postshuffle) {
        CQ_TRY(cq_tensor_reshape(&r->a.x, 2, wide, &x4));
        CQ_TRY(layernorm(m->be, &h4, &x4, &mg->norm, c->eps));
    } else {
        CQ_TRY(layernorm(m->be, &r->a.h, &r->a.x, &mg->norm, c->eps));
    }
    CQ_TRY(cq_vision_merger_mlp(m->be, &mg->mlp, &h4, &r->a.m1, &r->a.out));
    return cq_tensor_download(&r->a.out, dst, (size_t)(units * c->out_hidden) * sizeof(float));
}

static cq_status forward(cq_qwen3vl_vision *m, q3v_run *r, const float *pixels, const int32_t (*grid)[3],
                         int n_images, const cq_qwen3vl_vision_outputs *out) {
    const cq_qwen3vl_vision_config *c = &m->cfg;
    cq_backend *be = m->be;
    const int64_t n = r->n, D = c->hidden, K = cq_qwen3vl_vision_patch_dim(c);
    const int64_t units = n / ((int64_t)c->merge * c->merge);
    int64_t frames = 0;
    for (int i = 0; i < n_images; i++) frames += grid[i][0];
    r->fcu = cq_mallocn((size_t)frames + 1, sizeof(int32_t));
    /* staging for the position embeddings with both RoPE tables */
    r->host = cq_mallocn((size_t)(n * (D + c->head_dim)), sizeof(float));
    if (!r->fcu || !r->host) return cq_fail(CQ_ERR_NOMEM, WHO ": no host memory");
    r->fcu[0] = 0;
    r->n_frames = 0;
    for (int i = 0; i < n_images; i++)
        for (int f = 0; f < grid[i][0]; f++, r->n_frames++)
            r->fcu[r->n_frames + 1] = r->fcu[r->n_frames] + grid[i][1] * grid[i][2];
    CQ_TRY(run_alloc(m, r));
    CQ_TRY(cq_vision_segs_make(be, WHO, r->fcu, r->n_frames, n, &r->frames));
    const size_t half = (size_t)c->head_dim / 2;
    float *pos = r->host, *cs = pos + (size_t)(n * D), *sn = cs + (size_t)n * half;
    host_tables(m, grid, n_images, pos, cs, sn);
    CQ_TRY(cq_tensor_upload(&r->a.pix, pixels, (size_t)(n * K) * sizeof(float)));
    CQ_TRY(cq_tensor_upload(&r->a.x, pos, (size_t)(n * D) * sizeof(float)));
    CQ_TRY(cq_tensor_upload(&r->a.cos_t, cs, (size_t)n * half * sizeof(float)));
    CQ_TRY(cq_tensor_upload(&r->a.sin_t, sn, (size_t)n * half * sizeof(float)));
    /* x = pos + (pixels · Wᵀ + b): the Conv3d's output with its bias, then the position embedding */
    cq_matmul_args pe = {.y = &r->a.x, .x = &r->a.pix, .w = &m->patch, .bias = &m->patch_b, .accumulate = true};
    CQ_TRY(cq_op_matmul(be, &pe));
    if (out->embed) CQ_TRY(cq_tensor_download(&r->a.x, out->embed, (size_t)(n * D) * sizeof(float)));
    for (int l = 0; l < c->depth; l++) {
        CQ_TRY(block_forward(m, r, l));
        if (out->blocks)
            CQ_TRY(cq_tensor_download(&r->a.x, out->blocks + (size_t)l * (size_t)(n * D),
                                      (size_t)(n * D) * sizeof(float)));
        const int k = m->deep_of[l];
        if (k >= 0 && out->deepstack)
            CQ_TRY(merge(m, r, &m->deep[k], true, out->deepstack + (size_t)k * (size_t)(units * c->out_hidden)));
    }
    return out->out ? merge(m, r, &m->merger, false, out->out) : CQ_OK;
}

cq_status cq_qwen3vl_vision_forward(cq_qwen3vl_vision *m, const float *pixels, int64_t n_rows,
                                    const int32_t (*grid)[3], int n_images, const cq_qwen3vl_vision_outputs *out) {
    if (!m || !pixels || !out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": model, pixels or outputs is NULL");
    int64_t n;
    CQ_TRY(cq_qwen3vl_vision_rows(&m->cfg, grid, n_images, &n));
    if (n != n_rows)
        return cq_fail(CQ_ERR_SHAPE, WHO ": %lld pixel rows, the grids imply %lld", (long long)n_rows, (long long)n);
    CQ_TRY(cq_vision_check_pixels(WHO, pixels, n, cq_qwen3vl_vision_patch_dim(&m->cfg)));
    q3v_run r = {.n = n};
    cq_status s = forward(m, &r, pixels, grid, n_images, out);
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    run_free(&r);
    return s;
}
