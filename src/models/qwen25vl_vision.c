/*
 * qwen25vl_vision.c — the Qwen2.5-VL vision tower (qwen25vl_vision.h): its
 * config, the weight binding and the forward pass.
 *
 * The host prepares what depends only on the layout: the window permutation
 * (applied to the pixel rows before the patch embedding, which is row-wise,
 * so the tower runs in window order throughout), the RoPE tables in that
 * order, and the attention segments with their per-row key bounds (the
 * windows, and the image frames the full-attention blocks use), uploaded
 * once per call. Each block's attention is one call over all rows, each row
 * seeing the keys of its own window or frame; the output rows are put back
 * in the input's order on download.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/config.h"
#include "models/kit/tensors.h"
#include "models/kit/vision.h"
#include "models/qwen25vl_vision.h"
#include "models/tables.h"

typedef struct qv_block {
    cq_tensor norm1, norm2;          /* F32 [D] */
    cq_tensor qkv, qkv_b;            /* [3D, D], F32 [3D] */
    cq_tensor proj, proj_b;          /* [D, D], F32 [D] */
    cq_tensor gate, gate_b, up, up_b, down, down_b;
} qv_block;

struct cq_qwen25vl_vision {
    cq_backend *be;
    cq_qwen25vl_vision_config cfg;
    cq_tensor patch;                 /* [D, C*T*P*P] */
    cq_tensor ln_q;
    cq_vision_merger_w merger;       /* mlp.0, mlp.2 */
    qv_block *blocks;
    bool *full;                      /* [depth]: full attention */
    cq_tensor cols[3];               /* I32 [D]: the q, k, v columns of the qkv output */
    float *inv_freq;                 /* [head_dim / 4] */
    cq_tt_held held;                 /* every backend tensor above */
};

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
static cq_status parse_json(const cJSON *root, void *out) {
    cq_qwen25vl_vision_config *c = out;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "qwen25vl_vision: config is not a JSON object");
    const cq_cfg top = {root, "qwen25vl_vision", ""};
    const cJSON *vc = cq_cfg_get(&top, "vision_config");
    if (!vc) return cq_fail(CQ_ERR_MISSING, "qwen25vl_vision: the config has no vision_config (not a Qwen2.5-VL model)");
    if (!cJSON_IsObject(vc)) return cq_fail(CQ_ERR_PARSE, "qwen25vl_vision: config vision_config must be an object");
    const cq_cfg g = {vc, "qwen25vl_vision", "vision_config."};
    const cJSON *mt = cq_cfg_get(&g, "model_type");
    if (mt && !(cJSON_IsString(mt) && (strcmp(mt->valuestring, "qwen2_5_vl_vision") == 0 ||
                                        strcmp(mt->valuestring, "qwen2_5_vl") == 0)))
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen25vl_vision: vision_config.model_type '%s' is not Qwen2.5-VL's",
                       cJSON_IsString(mt) ? mt->valuestring : "?");
    /* the tower's widths have no default worth assuming: required */
    CQ_TRY(cq_cfg_int(&g, "depth", 0, 1, CQ_QWEN25VL_VISION_MAX_DEPTH, &c->depth));
    CQ_TRY(cq_cfg_int(&g, "hidden_size", 0, 1, 65536, &c->hidden));
    CQ_TRY(cq_cfg_int(&g, "intermediate_size", 0, 1, 262144, &c->intermediate));
    CQ_TRY(cq_cfg_int(&g, "num_heads", 0, 1, 1024, &c->n_heads));
    CQ_TRY(cq_cfg_int(&g, "out_hidden_size", 0, 1, 65536, &c->out_hidden));
    CQ_TRY(cq_cfg_int(&g, "patch_size", 14, 1, 64, &c->patch));
    CQ_TRY(cq_cfg_int(&g, "temporal_patch_size", 2, 1, 16, &c->temporal_patch));
    CQ_TRY(cq_cfg_int(&g, "spatial_merge_size", 2, 1, 8, &c->merge));
    CQ_TRY(cq_cfg_int(&g, "in_channels", 3, 1, 16, &c->in_channels));
    CQ_TRY(cq_cfg_int(&g, "window_size", 112, 1, 1 << 16, &c->window));
    const cJSON *act = cq_cfg_get(&g, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen25vl_vision: vision_config.hidden_act '%s' is not supported (silu)",
                       cJSON_IsString(act) ? act->valuestring : "?");
    if (c->hidden % c->n_heads)
        return cq_fail(CQ_ERR_PARSE, "qwen25vl_vision: vision_config.hidden_size %d is not a multiple of num_heads %d",
                       c->hidden, c->n_heads);
    c->head_dim = c->hidden / c->n_heads;
    /* D/2 rotary channels, half of them for each of the two axes */
    if (c->head_dim % 4)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen25vl_vision: head_dim %d is not a multiple of 4 (2-D RoPE)",
                       c->head_dim);
    c->window_units = c->window / c->merge / c->patch;
    if (c->window_units < 1)
        return cq_fail(CQ_ERR_PARSE, "qwen25vl_vision: vision_config.window_size %d is smaller than a merge unit (%d px)",
                       c->window, c->merge * c->patch);
    int n = 0;
    CQ_TRY(cq_cfg_ints(&g, "fullatt_block_indexes", 0, CQ_QWEN25VL_VISION_MAX_DEPTH, 0, c->depth - 1, c->full, &n));
    if (!cq_cfg_get(&g, "fullatt_block_indexes")) {
        /* transformers' default: every eighth block from the eighth on */
        for (int b = 7; b < c->depth; b += 8) c->full[n++] = b;
    }
    c->n_full = n;
    CQ_TRY(cq_vision_rope_theta(&g, &c->rope_theta));
    c->eps = 1e-6f;
    return CQ_OK;
}

cq_status cq_qwen25vl_vision_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen25vl_vision_config *cfg) {
    return cq_cfg_read(cmf, prefix, "qwen25vl_vision", parse_json, cfg);
}

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */
/* ------------------------------------------------------------------------ */
cq_status cq_qwen25vl_vision_rows(const cq_qwen25vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                  int64_t *n_rows) {
    return cq_vision_rows("qwen25vl_vision", c->merge, grid, n_images, CQ_QWEN25VL_VISION_MAX_IMAGES,
                          CQ_QWEN25VL_VISION_MAX_ROWS, n_rows);
}

cq_status cq_qwen25vl_vision_window_index(const cq_qwen25vl_vision_config *c, const int32_t (*grid)[3], int n_images,
                                          int32_t *idx, int32_t *cu, int *n_windows) {
    int64_t rows;
    CQ_TRY(cq_qwen25vl_vision_rows(c, grid, n_images, &rows));
    const int ws = c->window_units, unit = c->merge * c->merge;
    int64_t u = 0, base = 0;
    int nw = 0;
    cu[0] = 0;
    for (int i = 0; i < n_images; i++) {
        const int64_t gh = grid[i][1] / c->merge, gw = grid[i][2] / c->merge;
        /* the reference pads each side to a multiple of ws, a whole window more when it already is one: that
         * window is empty and dropped */
        const int64_t nwh = gh / ws + 1, nww = gw / ws + 1;
        for (int64_t f = 0; f < grid[i][0]; f++)
            for (int64_t wy = 0; wy < nwh; wy++)
                for (int64_t wx = 0; wx < nww; wx++) {
                    int64_t n = 0;
                    for (int64_t y = wy * ws; y < CQ_MIN((wy + 1) * ws, gh); y++)
                        for (int64_t x = wx * ws; x < CQ_MIN((wx + 1) * ws, gw); x++) {
                            idx[u++] = (int32_t)(base + f * gh * gw + y * gw + x);
                            n++;
                        }
                    if (n) {
                        cu[nw + 1] = cu[nw] + (int32_t)(n * unit);
                        nw++;
                    }
                }
        base += grid[i][0] * gh * gw;
    }
    *n_windows = nw;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */
void cq_qwen25vl_vision_free(cq_qwen25vl_vision *m) {
    if (!m) return;
    cq_tt_held_free(&m->held); /* the fields are copies of these handles */
    cq_free(m->blocks);
    cq_free(m->full);
    cq_free(m->inv_freq);
    cq_free(m);
}

const cq_qwen25vl_vision_config *cq_qwen25vl_vision_get_config(const cq_qwen25vl_vision *m) { return &m->cfg; }

static cq_status bind_all(cq_qwen25vl_vision *m, const cq_tt_binder *b, const char *p) {
    const cq_qwen25vl_vision_config *c = &m->cfg;
#define W(field, name) CQ_TRY(cq_tt_bind_weight(b, &m->field, "%s" name, p))
#define V(field, name) CQ_TRY(cq_tt_bind_vector(b, &m->field, "%s" name, p))
    CQ_TRY(cq_vision_bind_patch(b, p, &m->patch));
    V(ln_q, "merger.ln_q.weight");
    W(merger.fc1, "merger.mlp.0.weight");
    V(merger.fc1_b, "merger.mlp.0.bias");
    W(merger.fc2, "merger.mlp.2.weight");
    V(merger.fc2_b, "merger.mlp.2.bias");
#undef W
#undef V
    for (int l = 0; l < c->depth; l++) {
        qv_block *B = &m->blocks[l];
#define W(field, suffix) CQ_TRY(cq_tt_bind_weight(b, &B->field, "%sblocks.%d." suffix, p, l))
#define V(field, suffix) CQ_TRY(cq_tt_bind_vector(b, &B->field, "%sblocks.%d." suffix, p, l))
        V(norm1, "norm1.weight");
        V(norm2, "norm2.weight");
        W(qkv, "attn.qkv.weight");
        V(qkv_b, "attn.qkv.bias");
        W(proj, "attn.proj.weight");
        V(proj_b, "attn.proj.bias");
        W(gate, "mlp.gate_proj.weight");
        V(gate_b, "mlp.gate_proj.bias");
        W(up, "mlp.up_proj.weight");
        V(up_b, "mlp.up_proj.bias");
        W(down, "mlp.down_proj.weight");
        V(down_b, "mlp.down_proj.bias");
#undef W
#undef V
    }
    /* the qkv output is [q | k | v], each [heads x head_dim]: the column lists that split it */
    return cq_vision_qkv_cols(m->be, c->hidden, &m->held, m->cols);
}

cq_status cq_qwen25vl_vision_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen25vl_vision **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qwen25vl_vision: out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "qwen25vl_vision: file or backend is NULL");
    if (!prefix) prefix = "";
    if (strlen(prefix) > 200) return cq_fail(CQ_ERR_INVALID_ARG, "qwen25vl_vision: tensor prefix is too long");
    cq_qwen25vl_vision *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_qwen25vl_vision_parse_config(cmf, prefix, &m->cfg);
    const cq_qwen25vl_vision_config *c = &m->cfg;
    const char *stem = s == CQ_OK ? cq_vision_stem(cmf, prefix) : NULL;
    if (s == CQ_OK && !stem)
        s = cq_fail(CQ_ERR_MISSING, "qwen25vl_vision: no '%smodel.visual.patch_embed.proj.weight' (nor '%svisual."
                    "patch_embed.proj.weight') in the file", prefix, prefix);
    if (s == CQ_OK) {
        m->blocks = cq_calloc((size_t)c->depth, sizeof *m->blocks);
        m->full = cq_calloc((size_t)c->depth, sizeof *m->full);
        m->inv_freq = cq_mallocn((size_t)(c->head_dim / 4), sizeof(float));
        if (!m->blocks || !m->full || !m->inv_freq) s = CQ_ERR_NOMEM;
    }
    if (s == CQ_OK) {
        for (int i = 0; i < c->n_full; i++) m->full[c->full[i]] = true;
        cq_vision_rope_inv_freq(c->rope_theta, c->head_dim, m->inv_freq);
        char p[512];
        snprintf(p, sizeof p, "%s%s", prefix, stem);
        cq_tt_list table = {0};
        s = cq_qwen25vl_vision_tensors(c, prefix, stem, &table);
        const cq_tt_binder b = {"qwen25vl_vision", &table, cmf, be, &m->held};
        if (s == CQ_OK) s = bind_all(m, &b, p);
        cq_tt_list_free(&table);
    }
    if (s != CQ_OK) {
        cq_qwen25vl_vision_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */
typedef struct qv_run {
    int64_t n;                        /* patch rows */
    int32_t *idx, *cu;                /* window permutation, window boundaries */
    int n_windows;
    int32_t *fcu;                     /* image-frame boundaries */
    int n_frames;
    float *host;                      /* staging: permuted pixels, then RoPE tables, then downloads */
    cq_vision_segs win, frames;       /* every row's key bounds: its window, its frame */
    cq_vision_acts a;
} qv_run;

static void run_free(qv_run *r) {
    cq_vision_acts_free(&r->a);
    cq_vision_segs_free(&r->win);
    cq_vision_segs_free(&r->frames);
    cq_free(r->idx);
    cq_free(r->cu);
    cq_free(r->fcu);
    cq_free(r->host);
}

/* The RoPE angles of each patch row in window order: (row, column) of the patch within its frame. */
static void rope_tables(const cq_qwen25vl_vision *m, const qv_run *r, const int32_t (*grid)[3], int n_images,
                        float *cs, float *sn) {
    const cq_qwen25vl_vision_config *c = &m->cfg;
    const int mg = c->merge, unit = mg * mg, half = c->head_dim / 2;
    int64_t hp, wp;
    /* unit u of the input order: its image and the unit's place in its frame */
    int64_t u0 = 0;
    for (int i = 0; i < n_images; i++) {
        const int64_t gw = grid[i][2] / mg, per = (int64_t)(grid[i][1] / mg) * gw, units = grid[i][0] * per;
        for (int64_t pu = 0; pu < r->n / unit; pu++) {
            const int64_t gu = r->idx[pu];
            if (gu < u0 || gu >= u0 + units) continue;
            const int64_t in_frame = (gu - u0) % per; /* the unit's place in its frame */
            for (int s = 0; s < unit; s++) {
                const size_t row = (size_t)(pu * unit + s);
                cq_vision_patch_hw(in_frame * unit + s, gw * mg, mg, &hp, &wp);
                cq_vision_rope_row(m->inv_freq, c->head_dim, hp, wp, cs + row * half, sn + row * half);
            }
        }
        u0 += units;
    }
}

static cq_status run_alloc(const cq_qwen25vl_vision *m, qv_run *r) {
    const cq_qwen25vl_vision_config *c = &m->cfg;
    const cq_vision_dims d = {.n = r->n, .patch_dim = cq_qwen25vl_vision_patch_dim(c), .hidden = c->hidden,
                              .head_dim = c->head_dim, .intermediate = c->intermediate,
                              .unit = c->merge * c->merge, .out_hidden = c->out_hidden};
    return cq_vision_acts_alloc(m->be, &d, &r->a);
}

static cq_status block_forward(cq_qwen25vl_vision *m, qv_run *r, int l) {
    const cq_qwen25vl_vision_config *c = &m->cfg;
    cq_backend *be = m->be;
    const qv_block *B = &m->blocks[l];
    CQ_TRY(cq_op_rmsnorm(be, &r->a.h, &r->a.x, &B->norm1, NULL, false, c->eps));
    const cq_vision_qkv_args qa = {.h = &r->a.h, .w = &B->qkv, .b = &B->qkv_b, .cols = m->cols, .cos_t = &r->a.cos_t,
                                   .sin_t = &r->a.sin_t, .qkv = &r->a.qkv, .q = &r->a.q, .k = &r->a.k, .v = &r->a.v,
                                   .n_heads = c->n_heads, .head_dim = c->head_dim};
    CQ_TRY(cq_vision_qkv(be, &qa));
    CQ_TRY(cq_vision_attend(be, &r->a.q, &r->a.k, &r->a.v, &r->a.att, m->full[l] ? &r->frames : &r->win,
                            c->n_heads, c->head_dim));
    cq_matmul_args o = {.y = &r->a.x, .x = &r->a.att, .w = &B->proj, .bias = &B->proj_b, .accumulate = true};
    CQ_TRY(cq_op_matmul(be, &o));
    CQ_TRY(cq_op_rmsnorm(be, &r->a.h, &r->a.x, &B->norm2, NULL, false, c->eps));
    cq_matmul_args gu = {.y = &r->a.mlp, .x = &r->a.h, .w = &B->gate, .w2 = &B->up, .bias = &B->gate_b,
                         .bias2 = &B->up_b, .act = CQ_ACT_SWIGLU};
    CQ_TRY(cq_op_matmul(be, &gu));
    cq_matmul_args d = {.y = &r->a.x, .x = &r->a.mlp, .w = &B->down, .bias = &B->down_b, .accumulate = true};
    return cq_op_matmul(be, &d);
}

/* rows of t (window order, groups of `group` rows per merge unit) into dst in the input's order */
static cq_status download_unpermuted(const qv_run *r, const cq_tensor *t, int64_t group, float *dst) {
    const int64_t rows = cq_tensor_rows(t), cols = cq_tensor_cols(t);
    CQ_TRY(cq_tensor_download(t, r->host, (size_t)(rows * cols) * sizeof(float)));
    const size_t chunk = (size_t)(group * cols);
    for (int64_t u = 0; u < rows / group; u++)
        memcpy(dst + (size_t)r->idx[u] * chunk, r->host + (size_t)u * chunk, chunk * sizeof(float));
    return CQ_OK;
}

static cq_status forward(cq_qwen25vl_vision *m, qv_run *r, const float *pixels, const int32_t (*grid)[3],
                         int n_images, const cq_qwen25vl_vision_outputs *out) {
    const cq_qwen25vl_vision_config *c = &m->cfg;
    cq_backend *be = m->be;
    const int64_t n = r->n, unit = (int64_t)c->merge * c->merge, K = cq_qwen25vl_vision_patch_dim(c);
    const int64_t units = n / unit;
    r->idx = cq_mallocn((size_t)units, sizeof(int32_t));
    r->cu = cq_mallocn((size_t)units + 1, sizeof(int32_t));
    int64_t frames = 0;
    for (int i = 0; i < n_images; i++) frames += grid[i][0];
    r->fcu = cq_mallocn((size_t)frames + 1, sizeof(int32_t));
    /* staging for the largest of: permuted pixels, both RoPE tables, a download */
    const int64_t wide = CQ_MAX(CQ_MAX(K, (int64_t)c->head_dim), CQ_MAX((int64_t)c->hidden, (int64_t)c->out_hidden));
    r->host = cq_mallocn((size_t)(n * wide), sizeof(float));
    if (!r->idx || !r->cu || !r->fcu || !r->host) return cq_fail(CQ_ERR_NOMEM, "qwen25vl_vision: no host memory");
    CQ_TRY(cq_qwen25vl_vision_window_index(c, grid, n_images, r->idx, r->cu, &r->n_windows));
    r->fcu[0] = 0;
    r->n_frames = 0;
    for (int i = 0; i < n_images; i++)
        for (int f = 0; f < grid[i][0]; f++, r->n_frames++)
            r->fcu[r->n_frames + 1] = r->fcu[r->n_frames] + grid[i][1] * grid[i][2];
    CQ_TRY(run_alloc(m, r));
    CQ_TRY(cq_vision_segs_make(be, "qwen25vl_vision", r->cu, r->n_windows, n, &r->win));
    CQ_TRY(cq_vision_segs_make(be, "qwen25vl_vision", r->fcu, r->n_frames, n, &r->frames));
    /* the pixel rows in window order */
    const size_t ub = (size_t)(unit * K);
    for (int64_t u = 0; u < units; u++) memcpy(r->host + (size_t)u * ub, pixels + (size_t)r->idx[u] * ub, ub * 4);
    CQ_TRY(cq_tensor_upload(&r->a.pix, r->host, (size_t)(n * K) * sizeof(float)));
    const size_t half = (size_t)c->head_dim / 2;
    rope_tables(m, r, grid, n_images, r->host, r->host + (size_t)n * half);
    CQ_TRY(cq_tensor_upload(&r->a.cos_t, r->host, (size_t)n * half * sizeof(float)));
    CQ_TRY(cq_tensor_upload(&r->a.sin_t, r->host + (size_t)n * half, (size_t)n * half * sizeof(float)));
    CQ_TRY(cq_op_linear(be, &r->a.x, &r->a.pix, &m->patch, NULL));
    for (int l = 0; l < c->depth; l++) {
        CQ_TRY(block_forward(m, r, l));
        if (out->blocks)
            CQ_TRY(download_unpermuted(r, &r->a.x, unit, out->blocks + (size_t)l * (size_t)(n * c->hidden)));
    }
    if (out->pre_merger) CQ_TRY(download_unpermuted(r, &r->a.x, unit, out->pre_merger));
    if (!out->out) return CQ_OK;
    /* merger: the norm per patch, the merge unit's rows side by side (a reshape: they are consecutive) */
    CQ_TRY(cq_op_rmsnorm(be, &r->a.h, &r->a.x, &m->ln_q, NULL, false, c->eps));
    cq_tensor h4;
    CQ_TRY(cq_tensor_reshape(&r->a.h, 2, (const int64_t[2]){units, unit * c->hidden}, &h4));
    CQ_TRY(cq_vision_merger_mlp(be, &m->merger, &h4, &r->a.m1, &r->a.out));
    return download_unpermuted(r, &r->a.out, 1, out->out);
}

cq_status cq_qwen25vl_vision_forward(cq_qwen25vl_vision *m, const float *pixels, int64_t n_rows,
                                     const int32_t (*grid)[3], int n_images, const cq_qwen25vl_vision_outputs *out) {
    if (!m || !pixels || !out) return cq_fail(CQ_ERR_INVALID_ARG, "qwen25vl_vision: model, pixels or outputs is NULL");
    int64_t n;
    CQ_TRY(cq_qwen25vl_vision_rows(&m->cfg, grid, n_images, &n));
    if (n != n_rows)
        return cq_fail(CQ_ERR_SHAPE, "qwen25vl_vision: %lld pixel rows, the grids imply %lld", (long long)n_rows,
                       (long long)n);
    CQ_TRY(cq_vision_check_pixels("qwen25vl_vision", pixels, n, cq_qwen25vl_vision_patch_dim(&m->cfg)));
    qv_run r = {.n = n};
    cq_status s = forward(m, &r, pixels, grid, n_images, out);
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    run_free(&r);
    return s;
}
