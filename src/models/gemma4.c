/*
 * gemma4.c — the Gemma-4 text decoder's forward pass (semantics in
 * gemma4.h), one sequence through the op layer: sliding layers bound each
 * query's keys from below with the attention op's vis_lo, left pads raise
 * that bound past the pads.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "models/gemma4_impl.h"

#define WHO "gemma4"

typedef struct g4_run {
    cq_gemma4 *m;
    int n, pads;                          /* rows; leading pad rows */
    cq_tensor x, h, t;                    /* [n, hidden] */
    cq_tensor q, k, v, att;               /* [n, max widths] */
    cq_tensor g, u;                       /* [n, intermediate] */
    cq_tensor cs[2], sn[2];               /* per kind [n, head_dim / 2] */
    cq_tensor lo[2];                      /* per kind I32 [n]: first visible key */
    cq_tensor ids;                        /* I32 [n] */
} g4_run;

static void run_free(g4_run *r) {
    cq_tensor *t[] = {&r->x, &r->h, &r->t, &r->q, &r->k, &r->v, &r->att, &r->g, &r->u,
                      &r->cs[0], &r->cs[1], &r->sn[0], &r->sn[1], &r->lo[0], &r->lo[1], &r->ids};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
}

/* A [n, cols] view of the first n * cols elements of a buffer allocated wider. */
static cq_status view2(const cq_tensor *t, int64_t n, int64_t cols, cq_tensor *out) {
    int64_t shape[2] = {n, cols};
    return cq_tensor_subview(t, 0, 2, shape, out);
}

static cq_status run_alloc(g4_run *r, const int32_t *ids) {
    cq_gemma4 *m = r->m;
    const cq_gemma4_config *c = &m->cfg;
    cq_backend *be = m->be;
    int64_t n = r->n, H = c->hidden, Qw = 0, KVw = 0;
    for (int k = 0; k < 2; k++) {
        Qw = CQ_MAX(Qw, (int64_t)c->n_heads * c->head_dim[k]);
        KVw = CQ_MAX(KVw, (int64_t)c->n_kv_heads[k] * c->head_dim[k]);
    }
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, H, &r->x));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, H, &r->h));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, H, &r->t));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, Qw, &r->q));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, Qw, &r->att));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, KVw, &r->k));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, KVw, &r->v));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->intermediate, &r->g));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, c->intermediate, &r->u));
    int64_t s1[1] = {n};
    CQ_TRY(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, s1, &r->ids));
    CQ_TRY(cq_tensor_upload(&r->ids, ids, (size_t)n * sizeof(int32_t)));
    /* RoPE tables: position p = row index (pads included), angle formed in f32 as the reference does */
    int maxhalf = CQ_MAX(c->head_dim[0], c->head_dim[1]) / 2;
    float *cs = cq_mallocn((size_t)(2 * n * maxhalf), sizeof(float));
    int32_t *lo = cq_mallocn((size_t)n, sizeof(int32_t));
    cq_status s = cs && lo ? CQ_OK : CQ_ERR_NOMEM;
    for (int k = 0; s == CQ_OK && k < 2; k++) {
        int half = c->head_dim[k] / 2;
        float *sn = cs + (size_t)n * half;
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < half; j++) {
                float ang = (float)i * m->inv_freq[k][j];
                cs[i * half + j] = (float)cos((double)ang);
                sn[i * half + j] = (float)sin((double)ang);
            }
        s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, half, &r->cs[k]);
        if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, half, &r->sn[k]);
        if (s == CQ_OK) s = cq_tensor_upload(&r->cs[k], cs, (size_t)(n * half) * sizeof(float));
        if (s == CQ_OK) s = cq_tensor_upload(&r->sn[k], sn, (size_t)(n * half) * sizeof(float));
        /* first visible key: past the pads, and within the window on sliding layers (keys (i - W, i]) */
        for (int64_t i = 0; i < n; i++) {
            int64_t b = r->pads;
            if (k == CQ_GEMMA4_SLIDING) b = CQ_MAX(b, i - c->sliding_window + 1);
            lo[i] = (int32_t)b;
        }
        if (s == CQ_OK) s = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, s1, &r->lo[k]);
        if (s == CQ_OK) s = cq_tensor_upload(&r->lo[k], lo, (size_t)n * sizeof(int32_t));
    }
    cq_free(cs);
    cq_free(lo);
    return s;
}

/* Per-head RMSNorm without a weight, in place on t [n, heads * hd]. */
static cq_status head_norm(cq_backend *be, cq_tensor *t, int64_t n, int heads, int hd, float eps) {
    cq_tensor r;
    int64_t shape[2] = {n * heads, hd};
    CQ_TRY(cq_tensor_reshape(t, 2, shape, &r));
    return cq_op_rmsnorm(be, &r, &r, NULL, NULL, false, eps);
}

static cq_status layer_forward(g4_run *r, int l) {
    cq_gemma4 *m = r->m;
    const cq_gemma4_config *c = &m->cfg;
    cq_backend *be = m->be;
    const g4_layer *L = &m->layers[l];
    int kind = c->kind[l], hd = c->head_dim[kind], kvh = c->n_kv_heads[kind];
    int64_t n = r->n;
    cq_tensor q, k, v, att;
    CQ_TRY(view2(&r->q, n, (int64_t)c->n_heads * hd, &q));
    CQ_TRY(view2(&r->att, n, (int64_t)c->n_heads * hd, &att));
    CQ_TRY(view2(&r->k, n, (int64_t)kvh * hd, &k));
    CQ_TRY(view2(&r->v, n, (int64_t)kvh * hd, &v));
    /* attention half */
    CQ_TRY(cq_op_rmsnorm(be, &r->h, &r->x, &L->in_norm, NULL, false, c->eps));
    CQ_TRY(cq_op_linear(be, &q, &r->h, &L->q, NULL));
    CQ_TRY(cq_op_linear(be, &k, &r->h, &L->k, NULL));
    if (cq_gemma4_has_v(c, l)) CQ_TRY(cq_op_linear(be, &v, &r->h, &L->v, NULL));
    else CQ_TRY(cq_op_copy(be, &v, &k)); /* attention_k_eq_v: the raw key projection */
    CQ_TRY(cq_op_qk_norm_rope(be, &q, c->n_heads, hd, &L->q_norm, c->eps, &r->cs[kind], &r->sn[kind], CQ_ROPE_HALF, 0));
    CQ_TRY(cq_op_qk_norm_rope(be, &k, kvh, hd, &L->k_norm, c->eps, &r->cs[kind], &r->sn[kind], CQ_ROPE_HALF, 0));
    CQ_TRY(head_norm(be, &v, n, kvh, hd, c->eps));
    bool need_lo = kind == CQ_GEMMA4_SLIDING ? (r->pads > 0 || n > c->sliding_window) : r->pads > 0;
    cq_attn_args at = {.o = &att, .q = &q, .k = &k, .v = &v, .vis_lo = need_lo ? &r->lo[kind] : NULL,
                       .n_heads = c->n_heads, .n_kv_heads = kvh, .head_dim = hd, .scale = 1.0f, .causal = true};
    CQ_TRY(cq_op_attention(be, &at));
    CQ_TRY(cq_op_linear(be, &r->t, &att, &L->o, NULL));
    CQ_TRY(cq_op_rmsnorm(be, &r->t, &r->t, &L->post_attn_norm, NULL, false, c->eps));
    CQ_TRY(cq_op_binary(be, &r->x, &r->x, &r->t, CQ_BINARY_ADD));
    /* MLP half */
    CQ_TRY(cq_op_rmsnorm(be, &r->h, &r->x, &L->pre_ff_norm, NULL, false, c->eps));
    cq_matmul_args gm = {.y = &r->g, .x = &r->h, .w = &L->gate, .act = CQ_ACT_GELU_TANH};
    CQ_TRY(cq_op_matmul(be, &gm));
    CQ_TRY(cq_op_linear(be, &r->u, &r->h, &L->up, NULL));
    CQ_TRY(cq_op_binary(be, &r->g, &r->g, &r->u, CQ_BINARY_MUL));
    CQ_TRY(cq_op_linear(be, &r->t, &r->g, &L->down, NULL));
    CQ_TRY(cq_op_rmsnorm(be, &r->t, &r->t, &L->post_ff_norm, NULL, false, c->eps));
    CQ_TRY(cq_op_binary(be, &r->x, &r->x, &r->t, CQ_BINARY_ADD));
    if (L->scalar != 1.0f) CQ_TRY(cq_op_unary(be, &r->x, &r->x, CQ_UNARY_SCALE, L->scalar, 0.0f));
    return CQ_OK;
}

static cq_status tap(const g4_run *r, const cq_gemma4_outputs *o, int idx, const cq_tensor *x) {
    size_t H = (size_t)r->m->cfg.hidden, n = (size_t)r->n, bytes = n * H * sizeof(float);
    if (o->all_hidden) CQ_TRY(cq_tensor_download(x, o->all_hidden + (size_t)idx * n * H, bytes));
    if (o->hidden && o->layer == idx) CQ_TRY(cq_tensor_download(x, o->hidden, bytes));
    return CQ_OK;
}

static cq_status run(g4_run *r, const int32_t *ids, const cq_gemma4_outputs *o) {
    cq_gemma4 *m = r->m;
    const cq_gemma4_config *c = &m->cfg;
    cq_backend *be = m->be;
    CQ_TRY(run_alloc(r, ids));
    CQ_TRY(cq_op_get_rows(be, &r->x, &m->embed, &r->ids));
    /* embed_scale = sqrt(hidden) as an f32 number (the reference casts it to the weights' dtype: f32 here) */
    CQ_TRY(cq_op_unary(be, &r->x, &r->x, CQ_UNARY_SCALE, (float)sqrt((double)c->hidden), 0.0f));
    CQ_TRY(tap(r, o, 0, &r->x));
    int stop = o->all_hidden ? c->n_layers : CQ_MIN(o->layer, c->n_layers);
    for (int l = 0; l < stop; l++) {
        CQ_TRY(layer_forward(r, l));
        if (l + 1 < c->n_layers) CQ_TRY(tap(r, o, l + 1, &r->x));
    }
    if (stop == c->n_layers) {
        CQ_TRY(cq_op_rmsnorm(be, &r->h, &r->x, &m->norm, NULL, false, c->eps));
        CQ_TRY(tap(r, o, c->n_layers, &r->h));
    }
    return cq_backend_sync(be);
}

cq_status cq_gemma4_forward(cq_gemma4 *m, const int32_t *ids, const uint8_t *mask, int n, const cq_gemma4_outputs *o) {
    if (!m || !ids || n < 1 || !o) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": forward needs a model, ids and outputs");
    const cq_gemma4_config *c = &m->cfg;
    if (!o->hidden && !o->all_hidden) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": forward asks for no output");
    if (o->hidden && (o->layer < 0 || o->layer > c->n_layers))
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": hidden-state index %d is outside [0, %d]", o->layer, c->n_layers);
    if (n > c->max_positions)
        return cq_fail(CQ_ERR_BOUNDS, WHO ": %d tokens exceed max_position_embeddings %d", n, c->max_positions);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab_size)
            return cq_fail(CQ_ERR_INVALID_ARG, WHO ": token id %d at position %d is outside the vocabulary [0, %d)",
                           (int)ids[i], i, c->vocab_size);
    int pads = 0;
    if (mask) {
        while (pads < n && mask[pads] == 0) pads++;
        for (int i = pads; i < n; i++)
            if (mask[i] != 1)
                return cq_fail(CQ_ERR_INVALID_ARG, WHO ": the attention mask is not a left padding (mask[%d] = %d after "
                               "the first real token at %d; want 0..0 then 1..1)", i, (int)mask[i], pads);
        if (pads == n) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": the attention mask has no real token");
    }
    g4_run r = {.m = m, .n = n, .pads = pads};
    cq_status s = run(&r, ids, o);
    run_free(&r);
    return s;
}
