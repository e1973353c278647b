/*
 * qwen3.c — the Qwen3 decoder's forward pass and its incremental K/V cache,
 * written once against the op layer.
 *
 * Semantics (transformers' Qwen3 / Qwen3-VL text model):
 *   x = embed_tokens[ids]
 *   per layer:  h = RMSNorm(x) · w_in
 *               q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ (+ bq, bk, bv in the Qwen2 family)
 *               q, k = RoPE_half(RMSNorm_head(q) · q_norm), likewise k
 *                      (Qwen2: RoPE_half(q), no norm)
 *               x += o_proj(causal GQA attention(q, k, v))
 *               h = RMSNorm(x) · w_post
 *               x += down(silu(gate(h)) ⊙ up(h))
 *   out = RMSNorm(x) · w_norm;  logits = out · lm_headᵀ
 * Everything runs through a cache: each layer's post-RoPE keys and values
 * are written straight into the cache rows of their positions, and queries
 * attend to [cached prefix, own rows] causally. A whole-sequence forward is
 * the same code on a cache sized for the sequence.
 *
 * Multimodal input (cq_qwen3_forward_mm) changes three things only: the
 * rows of image tokens are overwritten with the given vectors right after
 * the embedding lookup (layer 0's output includes them, as the reference's
 * inputs_embeds do); Qwen3-VL's deepstack rows are added to those rows after
 * the first decoder layers; and the cos/sin table of row i takes frequency
 * j's angle from the row's position on axis rope_axis[j] (qwen3_mrope.c);
 * the rotation itself is the same RoPE_half op.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "models/qwen3_impl.h"

struct cq_qwen3_cache {
    cq_qwen3 *m;
    int cap, len, batch;
    cq_tensor *k, *v;                 /* per layer [cap, n_kv_heads * head_dim] */
    cq_tensor x, h, q, att, mlp;      /* [batch, ...] activations */
    cq_tensor cos_t, sin_t;           /* [batch, head_dim / 2] */
    cq_tensor ids;                    /* I32 [batch] */
    cq_tensor logits;                 /* [1, vocab] (when the model has a head) */
    float *cs;                        /* host RoPE tables: cos [batch][half], then sin */
};

/* Host outputs of one chunk: rows [r0, r0 + n) of a call over `total` rows. */
typedef struct q3_taps {
    const cq_qwen3_outputs *o;        /* NULL: none */
    int64_t total, r0;
    int stop;                         /* decoder layers to run */
    cq_tensor *logits_all;            /* [total, vocab] or NULL */
    float *last_logits;               /* [vocab] of the chunk's last row, or NULL */
} q3_taps;

/* Multimodal inputs of one chunk (cq_qwen3_forward_mm); NULL: text at positions len.. */
typedef struct q3_mm {
    const int32_t *pos;               /* [3][stride] axis-major, the chunk's first row at column 0; or NULL */
    int64_t stride;
    int32_t image_token;
    const float *image;               /* [rows, hidden]: the chunk's image rows, in order; or NULL */
    const float *deep;                /* [n_deep][rows][hidden]: deepstack rows added after layer k; or NULL */
    int n_deep;
    int64_t rows;                     /* image rows of the chunk */
} q3_mm;

/* ------------------------------------------------------------------------ */
/* Cache                                                                    */
/* ------------------------------------------------------------------------ */
void cq_qwen3_cache_free(cq_qwen3_cache *c) {
    if (!c) return;
    if (c->k)
        for (int l = 0; l < c->m->cfg.n_layers; l++) cq_tensor_free(&c->k[l]);
    if (c->v)
        for (int l = 0; l < c->m->cfg.n_layers; l++) cq_tensor_free(&c->v[l]);
    cq_free(c->k);
    cq_free(c->v);
    cq_tensor *t[] = {&c->x, &c->h, &c->q, &c->att, &c->mlp, &c->cos_t, &c->sin_t, &c->ids, &c->logits};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    cq_free(c->cs);
    cq_free(c);
}

cq_status cq_qwen3_cache_create(cq_qwen3 *m, int max_tokens, int max_batch, cq_qwen3_cache **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: out is NULL");
    *out = NULL;
    if (!m || max_tokens < 1) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: a cache needs a model and max_tokens >= 1");
    const cq_qwen3_config *cf = &m->cfg;
    if (max_batch <= 0) max_batch = CQ_MIN(max_tokens, 512);
    max_batch = CQ_MIN(max_batch, max_tokens);
    cq_qwen3_cache *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->m = m;
    c->cap = max_tokens;
    c->batch = max_batch;
    cq_backend *be = m->be;
    int64_t B = max_batch, H = cf->hidden, Q = (int64_t)cf->n_heads * cf->head_dim,
            KV = (int64_t)cf->n_kv_heads * cf->head_dim, half = cf->head_dim / 2;
    cq_status s = CQ_OK;
    c->k = cq_calloc((size_t)cf->n_layers, sizeof(cq_tensor));
    c->v = cq_calloc((size_t)cf->n_layers, sizeof(cq_tensor));
    c->cs = cq_mallocn((size_t)(2 * B * half), sizeof(float));
    if (!c->k || !c->v || !c->cs) s = CQ_ERR_NOMEM;
    for (int l = 0; s == CQ_OK && l < m->n_loaded; l++) {
        s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, max_tokens, KV, &c->k[l]);
        if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, max_tokens, KV, &c->v[l]);
    }
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, H, &c->x);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, H, &c->h);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, Q, &c->q);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, Q, &c->att);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, cf->intermediate, &c->mlp);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, half, &c->cos_t);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, B, half, &c->sin_t);
    if (s == CQ_OK) {
        int64_t shape[1] = {B};
        s = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, shape, &c->ids);
    }
    if (s == CQ_OK && cf->has_lm_head) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 1, cf->vocab_size, &c->logits);
    if (s != CQ_OK) {
        cq_qwen3_cache_free(c);
        return s == CQ_ERR_NOMEM ? cq_fail(s, "qwen3: no memory for a %d-token cache", max_tokens) : s;
    }
    *out = c;
    return CQ_OK;
}

int cq_qwen3_cache_len(const cq_qwen3_cache *c) { return c ? c->len : 0; }
int cq_qwen3_cache_capacity(const cq_qwen3_cache *c) { return c ? c->cap : 0; }

cq_status cq_qwen3_cache_truncate(cq_qwen3_cache *c, int n) {
    if (!c || n < 0 || n > c->len)
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: cannot truncate a cache of %d tokens to %d", c ? c->len : 0, n);
    c->len = n; /* rows past len are overwritten by the next feed */
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* One chunk of rows at positions [len, len + n)                            */
/* ------------------------------------------------------------------------ */
/* Frequency j of row i turns with the row's position on axis rope_axis[j]
 * (all the same for text: pos0 + i). */
static cq_status rope_upload(cq_qwen3_cache *c, int pos0, int n, const q3_mm *mm) {
    const cq_qwen3 *m = c->m;
    int half = m->cfg.head_dim / 2;
    float *cs = c->cs, *sn = c->cs + (size_t)n * half;
    const int32_t *pos = mm ? mm->pos : NULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < half; j++) {
            int64_t p = pos ? pos[(int64_t)m->rope_axis[j] * mm->stride + i] : pos0 + i;
            /* the angle is formed in f32 (position x inv_freq), as the reference does */
            float ang = (float)p * m->inv_freq[j];
            cs[(size_t)i * half + j] = (float)cos((double)ang);
            sn[(size_t)i * half + j] = (float)sin((double)ang);
        }
    cq_tensor ct = cq_tensor_rows_view(&c->cos_t, 0, n), st = cq_tensor_rows_view(&c->sin_t, 0, n);
    CQ_TRY(cq_tensor_upload(&ct, cs, (size_t)n * half * sizeof(float)));
    return cq_tensor_upload(&st, sn, (size_t)n * half * sizeof(float));
}

/* Download rows of x into a host [total, H] plane at row r0. */
static cq_status tap(const q3_taps *t, const cq_tensor *x, float *plane, int n, int64_t H) {
    if (!plane) return CQ_OK;
    return cq_tensor_download(x, plane + (size_t)(t->r0 * H), (size_t)n * (size_t)H * sizeof(float));
}

static cq_status tap_layer(const cq_qwen3_cache *c, const q3_taps *t, int l, const cq_tensor *x, int n) {
    if (!t->o) return CQ_OK;
    int64_t H = c->m->cfg.hidden;
    if (t->o->all_hidden) CQ_TRY(tap(t, x, t->o->all_hidden + (size_t)l * (size_t)(t->total * H), n, H));
    if (t->o->layer == l) CQ_TRY(tap(t, x, t->o->hidden, n, H));
    return CQ_OK;
}

static cq_status layer_forward(cq_qwen3_cache *c, int l, int pos0, int n, cq_tensor *x, cq_tensor *h) {
    cq_qwen3 *m = c->m;
    const cq_qwen3_config *cf = &m->cfg;
    cq_backend *be = m->be;
    const qwen3_layer *L = &m->layers[l];
    cq_tensor q = cq_tensor_rows_view(&c->q, 0, n), att = cq_tensor_rows_view(&c->att, 0, n);
    cq_tensor mlp = cq_tensor_rows_view(&c->mlp, 0, n);
    cq_tensor cs = cq_tensor_rows_view(&c->cos_t, 0, n), sn = cq_tensor_rows_view(&c->sin_t, 0, n);
    cq_tensor kc = cq_tensor_rows_view(&c->k[l], pos0, n), vc = cq_tensor_rows_view(&c->v[l], pos0, n);
    cq_tensor kp = cq_tensor_rows_view(&c->k[l], 0, pos0), vp = cq_tensor_rows_view(&c->v[l], 0, pos0);
    /* attention half: new keys/values land in the cache rows of their positions */
    CQ_TRY(cq_op_rmsnorm(be, h, x, &L->in_norm, NULL, false, cf->eps));
    const bool bias = cq_qwen3_has_qkv_bias(cf);
    CQ_TRY(cq_op_linear(be, &q, h, &L->q, bias ? &L->q_bias : NULL));
    CQ_TRY(cq_op_linear(be, &kc, h, &L->k, bias ? &L->k_bias : NULL));
    CQ_TRY(cq_op_linear(be, &vc, h, &L->v, bias ? &L->v_bias : NULL));
    const bool norm = cq_qwen3_has_qk_norm(cf);
    const cq_tensor *qn = norm ? &L->q_norm : NULL, *kn = norm ? &L->k_norm : NULL;
    CQ_TRY(cq_op_qk_norm_rope(be, &q, cf->n_heads, cf->head_dim, qn, cf->eps, &cs, &sn, CQ_ROPE_HALF, 0));
    CQ_TRY(cq_op_qk_norm_rope(be, &kc, cf->n_kv_heads, cf->head_dim, kn, cf->eps, &cs, &sn, CQ_ROPE_HALF, 0));
    cq_attn_args at = {.o = &att, .q = &q, .k = &kc, .v = &vc,
                       .k_prefix = pos0 > 0 ? &kp : NULL, .v_prefix = pos0 > 0 ? &vp : NULL,
                       .n_heads = cf->n_heads, .n_kv_heads = cf->n_kv_heads, .head_dim = cf->head_dim,
                       .causal = true};
    CQ_TRY(cq_op_attention(be, &at));
    cq_matmul_args o = {.y = x, .x = &att, .w = &L->o, .accumulate = true};
    CQ_TRY(cq_op_matmul(be, &o));
    /* MLP half */
    CQ_TRY(cq_op_rmsnorm(be, h, x, &L->post_norm, NULL, false, cf->eps));
    cq_matmul_args gu = {.y = &mlp, .x = h, .w = &L->gate, .w2 = &L->up, .act = CQ_ACT_SWIGLU};
    CQ_TRY(cq_op_matmul(be, &gu));
    cq_matmul_args d = {.y = x, .x = &mlp, .w = &L->down, .accumulate = true};
    return cq_op_matmul(be, &d);
}

/* Overwrite the embedding rows of image tokens with the given vectors, one
 * upload per run of consecutive image tokens. */
static cq_status inject_images(const cq_qwen3 *m, cq_tensor *x, const int32_t *ids, int n, const q3_mm *mm) {
    size_t H = (size_t)m->cfg.hidden;
    const float *src = mm->image;
    for (int i = 0; i < n;) {
        if (ids[i] != mm->image_token) {
            i++;
            continue;
        }
        int j = i;
        while (j < n && ids[j] == mm->image_token) j++;
        cq_tensor xr = cq_tensor_rows_view(x, i, j - i);
        CQ_TRY(cq_tensor_upload(&xr, src, (size_t)(j - i) * H * sizeof(float)));
        src += (size_t)(j - i) * H;
        i = j;
    }
    return CQ_OK;
}

/* x's image rows += the deepstack level `level` (h, free between layers, holds the upload), one run of
 * consecutive image tokens at a time. */
static cq_status add_deepstack(const cq_qwen3 *m, cq_tensor *x, cq_tensor *h, const int32_t *ids, int n,
                               const q3_mm *mm, int level) {
    const size_t H = (size_t)m->cfg.hidden;
    const float *src = mm->deep + (size_t)level * (size_t)mm->rows * H;
    for (int i = 0; i < n;) {
        if (ids[i] != mm->image_token) {
            i++;
            continue;
        }
        int j = i;
        while (j < n && ids[j] == mm->image_token) j++;
        cq_tensor xr = cq_tensor_rows_view(x, i, j - i), hr = cq_tensor_rows_view(h, i, j - i);
        CQ_TRY(cq_tensor_upload(&hr, src, (size_t)(j - i) * H * sizeof(float)));
        CQ_TRY(cq_op_binary(m->be, &xr, &xr, &hr, CQ_BINARY_ADD));
        src += (size_t)(j - i) * H;
        i = j;
    }
    return CQ_OK;
}

static cq_status run_chunk(cq_qwen3_cache *c, const int32_t *ids, int n, const q3_mm *mm, const q3_taps *t) {
    cq_qwen3 *m = c->m;
    const cq_qwen3_config *cf = &m->cfg;
    cq_backend *be = m->be;
    int pos0 = c->len;
    cq_tensor x = cq_tensor_rows_view(&c->x, 0, n), h = cq_tensor_rows_view(&c->h, 0, n), idv;
    int64_t ishape[1] = {n};
    CQ_TRY(cq_tensor_subview(&c->ids, 0, 1, ishape, &idv));
    CQ_TRY(cq_tensor_upload(&idv, ids, (size_t)n * sizeof(int32_t)));
    CQ_TRY(cq_op_get_rows(be, &x, &m->embed, &idv));
    if (mm && mm->image) CQ_TRY(inject_images(m, &x, ids, n, mm));
    CQ_TRY(tap_layer(c, t, 0, &x, n));
    CQ_TRY(rope_upload(c, pos0, n, mm));
    for (int l = 0; l < t->stop; l++) {
        CQ_TRY(layer_forward(c, l, pos0, n, &x, &h));
        if (mm && mm->deep && l < mm->n_deep) CQ_TRY(add_deepstack(m, &x, &h, ids, n, mm, l));
        CQ_TRY(tap_layer(c, t, l + 1, &x, n));
    }
    bool want_norm = t->o && (t->o->normed || t->logits_all);
    if (want_norm) {
        CQ_TRY(cq_op_rmsnorm(be, &h, &x, &m->norm, NULL, false, cf->eps));
        CQ_TRY(tap(t, &h, t->o->normed, n, cf->hidden));
        if (t->logits_all) {
            cq_tensor lg = cq_tensor_rows_view(t->logits_all, t->r0, n);
            CQ_TRY(cq_op_linear(be, &lg, &h, &m->lm_head, NULL));
        }
    }
    if (t->last_logits) {
        cq_tensor xl = cq_tensor_rows_view(&x, n - 1, 1), hl = cq_tensor_rows_view(&h, n - 1, 1);
        CQ_TRY(cq_op_rmsnorm(be, &hl, &xl, &m->norm, NULL, false, cf->eps));
        CQ_TRY(cq_op_linear(be, &c->logits, &hl, &m->lm_head, NULL));
        CQ_TRY(cq_tensor_download(&c->logits, t->last_logits, (size_t)cf->vocab_size * sizeof(float)));
    }
    return cq_backend_sync(be);
}

static cq_status check_ids(const cq_qwen3 *m, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: token id %d at position %d is outside the vocabulary [0, %d)",
                           (int)ids[i], i, m->cfg.vocab_size);
    return CQ_OK;
}

cq_status cq_qwen3_cache_feed(cq_qwen3_cache *c, const int32_t *ids, int n, float *logits) {
    if (!c || !ids || n < 1) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: feed needs a cache and at least one token");
    if (n > c->cap - c->len)
        return cq_fail(CQ_ERR_BOUNDS, "qwen3: %d more tokens do not fit the context (%d of %d positions used)", n, c->len,
                       c->cap);
    if (logits && !c->m->cfg.has_lm_head)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: the model has no lm_head (and untied embeddings): no logits");
    if (!c->m->has_norm)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: the model was loaded as a text encoder (%d of %d layers, no final "
                       "norm): it cannot generate", c->m->n_loaded, c->m->cfg.n_layers);
    CQ_TRY(check_ids(c->m, ids, n));
    int start = c->len;
    cq_status s = CQ_OK;
    for (int done = 0; s == CQ_OK && done < n;) {
        int k = CQ_MIN(c->batch, n - done);
        q3_taps t = {.stop = c->m->cfg.n_layers, .last_logits = done + k == n ? logits : NULL};
        s = run_chunk(c, ids + done, k, NULL, &t);
        if (s == CQ_OK) c->len += k;
        done += k;
    }
    if (s != CQ_OK) c->len = start;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Whole-sequence forward                                                   */
/* ------------------------------------------------------------------------ */
/* The multimodal inputs against the ids and the config. */
static cq_status check_mm(const cq_qwen3 *m, const int32_t *ids, int n, const cq_qwen3_mm *mm) {
    const cq_qwen3_config *cf = &m->cfg;
    if (mm->positions) {
        if (cf->mrope_section[0] + cf->mrope_section[1] + cf->mrope_section[2] == 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: three-axis positions need a multimodal RoPE config "
                           "(mrope_section); this model has plain RoPE");
        for (int64_t i = 0; i < 3 * (int64_t)n; i++)
            if (mm->positions[i] < 0)
                return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: position %d of token %d on axis %d is negative",
                               (int)mm->positions[i], (int)(i % n), (int)(i / n));
    }
    if (mm->n_image_rows < 0 || (mm->n_image_rows > 0 && !mm->image_embeds))
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: %d image rows without their vectors", mm->n_image_rows);
    if (mm->n_deepstack < 0 || mm->n_deepstack > cf->n_layers || (mm->n_deepstack > 0 && !mm->deepstack) ||
        (mm->deepstack && (mm->n_deepstack < 1 || !mm->image_embeds)))
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: %d deepstack levels (%s; 1 .. %d, with the image rows they add to)",
                       mm->n_deepstack, mm->deepstack ? "given" : "not given", cf->n_layers);
    if (mm->image_embeds) {
        int k = 0;
        for (int i = 0; i < n; i++) k += ids[i] == mm->image_token;
        if (k != mm->n_image_rows)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: the ids hold %d image tokens (id %d), %d image rows were given",
                           k, (int)mm->image_token, mm->n_image_rows);
    }
    return CQ_OK;
}

cq_status cq_qwen3_forward(cq_qwen3 *m, const int32_t *ids, int n, const cq_qwen3_outputs *o) {
    return cq_qwen3_forward_mm(m, ids, n, NULL, o);
}

cq_status cq_qwen3_forward_mm(cq_qwen3 *m, const int32_t *ids, int n, const cq_qwen3_mm *mm,
                              const cq_qwen3_outputs *o) {
    if (!m || !ids || n < 1 || !o) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: forward needs a model, ids and outputs");
    const cq_qwen3_config *cf = &m->cfg;
    if (o->hidden && (o->layer < 0 || o->layer > cf->n_layers))
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: hidden-state layer %d is outside [0, %d]", o->layer, cf->n_layers);
    if (o->logits && !cf->has_lm_head)
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: the model has no lm_head (and untied embeddings): no logits");
    if ((o->hidden && o->layer > m->n_loaded) || (!m->has_norm && (o->all_hidden || o->normed || o->logits)))
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "qwen3: the model was loaded as a text encoder of %d layers (of %d, no final norm); it cannot "
                       "give %s", m->n_loaded, cf->n_layers,
                       o->hidden && o->layer > m->n_loaded ? "a later layer's states" : "normed states or logits");
    CQ_TRY(check_ids(m, ids, n));
    q3_mm chunk = {0};
    if (mm) {
        CQ_TRY(check_mm(m, ids, n, mm));
        chunk = (q3_mm){.pos = mm->positions, .stride = n, .image_token = mm->image_token,
                        .image = mm->image_embeds, .deep = mm->deepstack, .n_deep = mm->n_deepstack,
                        .rows = mm->n_image_rows};
    }
    /* run only as deep as the outputs need */
    int stop = 0;
    if (o->hidden) stop = o->layer;
    if (o->all_hidden || o->normed || o->logits) stop = cf->n_layers;
    cq_qwen3_cache *c = NULL;
    cq_tensor logits = {0};
    cq_status s = cq_qwen3_cache_create(m, n, n, &c);
    if (s == CQ_OK && o->logits) s = cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, n, cf->vocab_size, &logits);
    if (s == CQ_OK) {
        q3_taps t = {.o = o, .total = n, .r0 = 0, .stop = stop, .logits_all = o->logits ? &logits : NULL};
        s = run_chunk(c, ids, n, mm ? &chunk : NULL, &t);
    }
    if (s == CQ_OK && o->logits)
        s = cq_tensor_download(&logits, o->logits, (size_t)n * (size_t)cf->vocab_size * sizeof(float));
    cq_tensor_free(&logits);
    cq_qwen3_cache_free(c);
    return s;
}

/* ------------------------------------------------------------------------ */
/* The causal-LM interface (component.h)                                    */
/* ------------------------------------------------------------------------ */
static cq_status lm_cache_create(void *self, int max_tokens, int max_batch, void **cache) {
    cq_qwen3_cache *c = NULL;
    cq_status s = cq_qwen3_cache_create(self, max_tokens, max_batch, &c);
    *cache = c;
    return s;
}
static void lm_cache_free(void *cache) { cq_qwen3_cache_free(cache); }
static int lm_capacity(const void *cache) { return cq_qwen3_cache_capacity(cache); }
static cq_status lm_truncate(void *cache, int n) { return cq_qwen3_cache_truncate(cache, n); }
static cq_status lm_feed(void *cache, const int32_t *ids, int n, float *logits) {
    return cq_qwen3_cache_feed(cache, ids, n, logits);
}

cq_causal_lm cq_qwen3_causal_lm(cq_qwen3 *m) {
    const cq_qwen3_config *c = cq_qwen3_get_config(m);
    return (cq_causal_lm){.self = m, .vocab = c->vocab_size, .max_positions = c->max_positions,
                          .has_logits = c->has_lm_head, .cache_create = lm_cache_create,
                          .cache_free = lm_cache_free, .capacity = lm_capacity, .truncate = lm_truncate,
                          .feed = lm_feed};
}
