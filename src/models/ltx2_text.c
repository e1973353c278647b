/*
 * ltx2_text.c — LTX-2.3 / 2.5's feature extractor and embeddings
 * connectors (semantics in ltx2_text.h), written once against the op layer.
 * Each float step follows diffusers' LTX2TextConnectors (connectors.py at
 * 58eb52c0):
 *  - features: the hidden states are uploaded as [L, n, C] (the tower's
 *    layout), each row RMS-normed, then one transpose of the [L, n C] view
 *    gives [n C, L] = [n, C L] with the state index fastest, the reference's
 *    flatten order; the rescale sqrt(D / C) rides on the projection's
 *    matmul scale (scale * (x W^T) + bias: the same product up to f32
 *    rounding of the order);
 *  - the connector's reorder is a gather of the valid tokens at upload (a
 *    token-wise feature commutes with it), so the encode path computes the
 *    valid tokens' features straight into the first rows of the connector's
 *    input and the registers fill the rest;
 *  - the RoPE tables are the DiT's 1-axis split ladder (ltx2_rope.h) over
 *    the connector's whole width, positions 0..T-1 over rope_base.
 * Every activation is f32 on every backend. The scratch is sized per call:
 * a prompt is encoded once.
 */
#include "models/ltx2_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/dit.h"
#include "models/ltx2_rope.h"
#include "models/ltx2_text_impl.h"

#define WHO "ltx2_text"
#define LT_EPS 1e-6f /* every norm: the feature RMS, the blocks', q/k (LTX2Attention's default), the final one */

static void tapf(const cq_ltx2_text *m, const cq_tensor *t, const char *fmt, ...) CQ_PRINTF(3, 4);
static void tapf(const cq_ltx2_text *m, const cq_tensor *t, const char *fmt, ...) {
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

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */
/* T in range, a 0/1 mask, at least one real token; *nv the real ones. */
static cq_status check_tokens(const cq_ltx2_text *m, const uint8_t *mask, int T, int *nv) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no model");
    if (T < 1 || T > CQ_LTX2_TEXT_MAX_TOKENS)
        return cq_fail(CQ_ERR_SHAPE, WHO ": %d tokens (1 .. %d)", T, CQ_LTX2_TEXT_MAX_TOKENS);
    int n = 0;
    for (int i = 0; i < T; i++) {
        if (mask && mask[i] > 1) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": mask[%d] is %d (0 or 1)", i, mask[i]);
        n += mask ? mask[i] : 1;
    }
    if (n == 0) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": the mask has no real token");
    *nv = n;
    return CQ_OK;
}

/* The connector's length rule: T a multiple of its register count (the reference tiles the registers). */
static cq_status check_registers(const cq_ltx2_text *m, int si, int T) {
    const int R = m->cfg.conn[si].n_registers;
    if (T % R != 0)
        return cq_fail(CQ_ERR_SHAPE, WHO ": %d tokens is not a multiple of the %s connector's %d registers", T,
                       cq_ltx2_stream_name[si], R);
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Features                                                                 */
/* ------------------------------------------------------------------------ */
/* The projected features of n tokens, rows[i] the token of row i (-1: a pad, zero input) of hidden [L][T][C], into
 * the first n rows of out[stream] (NULL: not wanted). */
static cq_status features(cq_ltx2_text *m, const float *hidden, int T, const int32_t *rows, int n,
                          cq_tensor *const out[CQ_LTX2_STREAMS]) {
    cq_backend *be = m->be;
    const cq_ltx2_text_config *c = &m->cfg;
    const int64_t C = c->caption_channels, L = c->n_states;
    cq_tensor hs = {0}, ft = {0}, fv;
    float *row = cq_mallocn((size_t)n * (size_t)C, sizeof(float));
    cq_status s = row ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, L * n, C, &hs);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, (int64_t)n * C, L, &ft);
    for (int64_t l = 0; s == CQ_OK && l < L; l++) {
        for (int i = 0; i < n; i++) {
            float *d = row + (size_t)i * (size_t)C;
            if (rows[i] < 0) memset(d, 0, (size_t)C * sizeof(float)); /* a zero row normalises to zero */
            else memcpy(d, hidden + ((size_t)l * (size_t)T + (size_t)rows[i]) * (size_t)C, (size_t)C * sizeof(float));
        }
        cq_tensor hv = cq_tensor_rows_view(&hs, l * n, n);
        s = cq_tensor_upload(&hv, row, (size_t)n * (size_t)C * sizeof(float));
    }
    if (s == CQ_OK) s = cq_op_rmsnorm(be, &hs, &hs, NULL, NULL, false, LT_EPS);
    cq_tensor hw;
    if (s == CQ_OK) s = cq_tensor_reshape(&hs, 2, (const int64_t[2]){L, (int64_t)n * C}, &hw);
    if (s == CQ_OK) s = cq_op_transpose(be, &ft, &hw);
    if (s == CQ_OK) s = cq_tensor_reshape(&ft, 2, (const int64_t[2]){n, C * L}, &fv);
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++) {
        if (!out[si]) continue;
        const lt_conn *S = &m->s[si];
        cq_tensor y = cq_tensor_rows_view(out[si], 0, n);
        /* the reference's rescale sqrt(D / C), a Python float applied to f32 values */
        const float scale = (float)sqrt((double)c->proj_dim[si] / (double)C);
        cq_matmul_args mm = {.y = &y, .x = &fv, .w = &S->proj, .bias = c->proj_bias ? &S->projb : NULL,
                             .scale = scale};
        s = cq_op_matmul(be, &mm);
    }
    cq_tensor_free(&hs);
    cq_tensor_free(&ft);
    cq_free(row);
    return s;
}

static cq_status check_hidden(const cq_ltx2_text *m, const float *hidden, int T) {
    const cq_ltx2_text_config *c = &m->cfg;
    if (!hidden) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no hidden states");
    return cq_dit_check_finite(WHO, "hidden states", hidden, (size_t)c->n_states * (size_t)T,
                               (size_t)c->caption_channels);
}

cq_status cq_ltx2_features(cq_ltx2_text *m, const float *hidden, const uint8_t *mask, int T, float *video,
                           float *audio) {
    int nv;
    CQ_TRY(check_tokens(m, mask, T, &nv));
    CQ_TRY(check_hidden(m, hidden, T));
    if (!video && !audio) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": features wanted for neither stream");
    float *dst[CQ_LTX2_STREAMS] = {video, audio};
    cq_tensor o[CQ_LTX2_STREAMS] = {{0}};
    cq_tensor *op[CQ_LTX2_STREAMS] = {NULL, NULL};
    int32_t *rows = cq_mallocn((size_t)T, sizeof(int32_t));
    cq_status s = rows ? CQ_OK : CQ_ERR_NOMEM;
    for (int i = 0; s == CQ_OK && i < T; i++) rows[i] = !mask || mask[i] ? i : -1;
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++)
        if (dst[si]) {
            s = cq_tensor_alloc_2d(m->be, CQ_DTYPE_F32, T, m->cfg.proj_dim[si], &o[si]);
            op[si] = &o[si];
        }
    if (s == CQ_OK) s = features(m, hidden, T, rows, T, op);
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++)
        if (dst[si]) s = cq_tensor_download(&o[si], dst[si], (size_t)T * (size_t)m->cfg.proj_dim[si] * sizeof(float));
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    for (int si = 0; si < CQ_LTX2_STREAMS; si++) cq_tensor_free(&o[si]);
    cq_free(rows);
    return s;
}

/* ------------------------------------------------------------------------ */
/* A connector                                                              */
/* ------------------------------------------------------------------------ */
typedef struct lt_run {
    int T;
    cq_tensor x, hn, q, k, v, att, gl, ge, proj, ffh, rc, rs;
} lt_run;

static void run_free(lt_run *r) {
    cq_tensor *t[] = {&r->x, &r->hn, &r->q, &r->k, &r->v, &r->att, &r->gl, &r->ge, &r->proj, &r->ffh, &r->rc, &r->rs};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
}

static cq_status run_alloc(cq_ltx2_text *m, int si, int T, lt_run *r) {
    cq_backend *be = m->be;
    const cq_ltx2_connector_config *k = &m->cfg.conn[si];
    const int64_t D = k->dim;
    r->T = T;
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, rows, cols, &r->t))
    A(x, T, D);
    A(hn, T, D);
    A(q, T, D);
    A(k, T, D);
    A(v, T, D);
    A(att, T, D);
    if (k->gated) {
        A(gl, T, k->heads);
        A(ge, T, D);
    }
    A(proj, T, D);
    A(ffh, T, 4 * D);
    A(rc, T, D / 2);
    A(rs, T, D / 2);
#undef A
    /* positions 0..T-1 on the 1-axis ladder over the whole width (LTX2RotaryPosEmbed1d) */
    const cq_ltx2_rope rp = {(int)D, 1, {(float)m->cfg.rope_base}, m->cfg.rope_theta, m->cfg.rope_f64};
    const size_t cells = (size_t)T * (size_t)(D / 2);
    float *pos = cq_mallocn((size_t)T, sizeof(float)), *tab = cq_mallocn(2 * cells, sizeof(float));
    cq_status s = pos && tab ? CQ_OK : CQ_ERR_NOMEM;
    for (int i = 0; s == CQ_OK && i < T; i++) pos[i] = (float)i;
    if (s == CQ_OK) s = cq_ltx2_rope_tables(&rp, pos, T, tab, tab + cells);
    if (s == CQ_OK) s = cq_tensor_upload(&r->rc, tab, cells * sizeof(float));
    if (s == CQ_OK) s = cq_tensor_upload(&r->rs, tab + cells, cells * sizeof(float));
    cq_free(pos);
    cq_free(tab);
    if (s == CQ_OK) {
        tapf(m, &r->rc, "rope_%s_cos", cq_ltx2_stream_name[si]);
        tapf(m, &r->rs, "rope_%s_sin", cq_ltx2_stream_name[si]);
    }
    return s;
}

/* Rows [nv, T) of x: register i mod R, copied in runs of consecutive registers. */
static cq_status fill_registers(cq_ltx2_text *m, int si, lt_run *r, int nv) {
    const lt_conn *S = &m->s[si];
    const int R = m->cfg.conn[si].n_registers;
    for (int i = nv; i < r->T;) {
        const int j = i % R, n = CQ_MIN(R - j, r->T - i);
        cq_tensor dst = cq_tensor_rows_view(&r->x, i, n), src = cq_tensor_rows_view(&S->reg, j, n);
        CQ_TRY(cq_op_copy(m->be, &dst, &src));
        i += n;
    }
    return CQ_OK;
}

/* Split RoPE per head on t [T, heads * dh] with the tables [T, heads * dh / 2]: the rows viewed as T * heads heads
 * of one head each (ltx2_rope.h). */
static cq_status rope(cq_backend *be, const cq_tensor *t, int heads, int dh, const cq_tensor *c, const cq_tensor *s) {
    const int64_t n = cq_tensor_rows(t);
    cq_tensor tv, cv, sv;
    CQ_TRY(cq_tensor_reshape(t, 2, (const int64_t[2]){n * heads, dh}, &tv));
    CQ_TRY(cq_tensor_reshape(c, 2, (const int64_t[2]){n * heads, dh / 2}, &cv));
    CQ_TRY(cq_tensor_reshape(s, 2, (const int64_t[2]){n * heads, dh / 2}, &sv));
    return cq_op_qk_norm_rope(be, &tv, 1, dh, NULL, 0.0f, &cv, &sv, CQ_ROPE_HALF, 0);
}

/* One block on x: self-attention (gated per head where configured), then the feed-forward. */
static cq_status block(cq_ltx2_text *m, int si, lt_run *r, const lt_block *B) {
    cq_backend *be = m->be;
    const cq_ltx2_connector_config *k = &m->cfg.conn[si];
    const lt_conn *S = &m->s[si];
    CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, LT_EPS));
    CQ_TRY(cq_op_linear(be, &r->q, &r->hn, &B->q, &B->qb));
    CQ_TRY(cq_op_linear(be, &r->k, &r->hn, &B->k, &B->kb));
    CQ_TRY(cq_op_linear(be, &r->v, &r->hn, &B->v, &B->vb));
    CQ_TRY(cq_op_rmsnorm(be, &r->q, &r->q, &B->nq, NULL, false, LT_EPS));
    CQ_TRY(cq_op_rmsnorm(be, &r->k, &r->k, &B->nk, NULL, false, LT_EPS));
    CQ_TRY(rope(be, &r->q, k->heads, k->head_dim, &r->rc, &r->rs));
    CQ_TRY(rope(be, &r->k, k->heads, k->head_dim, &r->rc, &r->rs));
    cq_attn_args at = {.o = &r->att, .q = &r->q, .k = &r->k, .v = &r->v, .n_heads = k->heads,
                       .n_kv_heads = k->heads, .head_dim = k->head_dim};
    CQ_TRY(cq_op_attention(be, &at));
    if (k->gated) {
        /* gates = 2 sigmoid(logits of the attention's input) per head, spread over the head's columns */
        CQ_TRY(cq_op_linear(be, &r->gl, &r->hn, &B->gw, &B->gb));
        CQ_TRY(cq_op_unary(be, &r->gl, &r->gl, CQ_UNARY_SIGMOID, 0.0f, 0.0f));
        CQ_TRY(cq_op_unary(be, &r->gl, &r->gl, CQ_UNARY_SCALE, 2.0f, 0.0f));
        CQ_TRY(cq_op_gather_cols(be, &r->ge, &r->gl, &S->gidx, 1, 1.0f));
        CQ_TRY(cq_op_binary(be, &r->att, &r->att, &r->ge, CQ_BINARY_MUL));
    }
    CQ_TRY(cq_op_linear(be, &r->proj, &r->att, &B->o, &B->ob));
    CQ_TRY(cq_op_binary(be, &r->x, &r->x, &r->proj, CQ_BINARY_ADD));
    CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, LT_EPS));
    cq_matmul_args mm = {.y = &r->ffh, .x = &r->hn, .w = &B->ff1, .bias = &B->ff1b, .act = CQ_ACT_GELU_TANH};
    CQ_TRY(cq_op_matmul(be, &mm));
    CQ_TRY(cq_op_linear(be, &r->proj, &r->ffh, &B->ff2, &B->ff2b));
    return cq_op_binary(be, &r->x, &r->x, &r->proj, CQ_BINARY_ADD);
}

/* The connector on r->x, whose first nv rows hold the valid tokens' features: registers, blocks, the final norm
 * into r->hn. */
static cq_status connector(cq_ltx2_text *m, int si, lt_run *r, int nv) {
    const char *name = cq_ltx2_stream_name[si];
    CQ_TRY(fill_registers(m, si, r, nv));
    tapf(m, &r->x, "%s_in", name);
    for (int l = 0; l < m->cfg.conn[si].n_layers; l++) {
        CQ_TRY(block(m, si, r, &m->s[si].blk[l]));
        tapf(m, &r->x, "%s_block%d", name, l);
    }
    CQ_TRY(cq_op_rmsnorm(m->be, &r->hn, &r->x, NULL, NULL, false, LT_EPS));
    tapf(m, &r->hn, "%s_out", name);
    return CQ_OK;
}

cq_status cq_ltx2_connector_forward(cq_ltx2_text *m, cq_ltx2_stream stream, const float *feat, const uint8_t *mask,
                                    int T, float *out) {
    int nv;
    CQ_TRY(check_tokens(m, mask, T, &nv));
    if ((int)stream < 0 || stream >= CQ_LTX2_STREAMS)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": stream %d (video 0, audio 1)", (int)stream);
    if (!feat || !out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a connector needs features and an output");
    const int si = (int)stream;
    const size_t D = (size_t)m->cfg.conn[si].dim;
    CQ_TRY(check_registers(m, si, T));
    CQ_TRY(cq_dit_check_finite(WHO, "features", feat, (size_t)T, D));
    lt_run r = {0};
    float *front = cq_mallocn((size_t)nv * D, sizeof(float));
    cq_status s = front ? run_alloc(m, si, T, &r) : CQ_ERR_NOMEM;
    /* the valid rows first, in their order (the reference's stable sort on the mask) */
    for (int i = 0, j = 0; s == CQ_OK && i < T; i++)
        if (!mask || mask[i]) memcpy(front + (size_t)j++ * D, feat + (size_t)i * D, D * sizeof(float));
    if (s == CQ_OK) {
        cq_tensor dst = cq_tensor_rows_view(&r.x, 0, nv);
        s = cq_tensor_upload(&dst, front, (size_t)nv * D * sizeof(float));
    }
    cq_free(front);
    if (s == CQ_OK) s = connector(m, si, &r, nv);
    if (s == CQ_OK) s = cq_tensor_download(&r.hn, out, (size_t)T * D * sizeof(float));
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    run_free(&r);
    return s;
}

cq_status cq_ltx2_text_encode(cq_ltx2_text *m, const float *hidden, const uint8_t *mask, int T, float *video,
                              float *audio) {
    int nv;
    CQ_TRY(check_tokens(m, mask, T, &nv));
    if (!video || !audio) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": encode needs both outputs");
    for (int si = 0; si < CQ_LTX2_STREAMS; si++) CQ_TRY(check_registers(m, si, T));
    CQ_TRY(check_hidden(m, hidden, T));
    int32_t *rows = cq_mallocn((size_t)nv, sizeof(int32_t));
    if (!rows) return CQ_ERR_NOMEM;
    for (int i = 0, j = 0; i < T; i++)
        if (!mask || mask[i]) rows[j++] = i;
    lt_run r[CQ_LTX2_STREAMS] = {{0}};
    cq_status s = CQ_OK;
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++) s = run_alloc(m, si, T, &r[si]);
    cq_tensor *const dst[CQ_LTX2_STREAMS] = {&r[0].x, &r[1].x};
    if (s == CQ_OK) s = features(m, hidden, T, rows, nv, dst);
    float *outs[CQ_LTX2_STREAMS] = {video, audio};
    for (int si = 0; s == CQ_OK && si < CQ_LTX2_STREAMS; si++) {
        if (m->tap) {
            cq_tensor fv = v2(&r[si].x, nv, m->cfg.conn[si].dim);
            tapf(m, &fv, "%s_features", cq_ltx2_stream_name[si]);
        }
        s = connector(m, si, &r[si], nv);
        if (s == CQ_OK)
            s = cq_tensor_download(&r[si].hn, outs[si], (size_t)T * (size_t)m->cfg.conn[si].dim * sizeof(float));
    }
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    for (int si = 0; si < CQ_LTX2_STREAMS; si++) run_free(&r[si]);
    cq_free(rows);
    return s;
}
