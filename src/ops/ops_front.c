/*
 * ops_front.c — the op entry points model code calls. Each validates its
 * arguments completely on the host (presence, owning backend, dtypes, shapes,
 * aliasing, parameter ranges) and fails with a message naming the op and the
 * offending tensor, asks the backend whether it runs the combination, and
 * only then dispatches: to the backend, or else to its host backend with the
 * operands copied (fallback.c), or fails with CQ_ERR_UNSUPPORTED when
 * neither runs it. Backends can therefore trust their arguments.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/fallback.h"

/* The documented prototypes of ops.h agree with the one list (a mismatch is a conflicting declaration). */
#define CQ_OP_FRONT_DECLARE_(E, name, P, A, u) cq_status cq_op_##name CQ_OP_PARAMS_BE P;
CQ_OPS_LIST(CQ_OP_FRONT_DECLARE_, _)
#undef CQ_OP_FRONT_DECLARE_

typedef struct chk {
    cq_backend *be;
    const char *op;
} chk;

static const char *shape_str(const cq_tensor *t, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < t->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

static bool is_float_act(cq_dtype dt) { return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16; }

/* Present, allocated on this backend, with a sane geometry. */
static cq_status need(const chk *c, const char *what, const cq_tensor *t) {
    if (!t) return cq_fail(CQ_ERR_INVALID_ARG, "%s: tensor '%s' is missing", c->op, what);
    if (!t->be || !t->base) return cq_fail(CQ_ERR_INVALID_ARG, "%s: tensor '%s' is not allocated", c->op, what);
    if (t->be != c->be)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: tensor '%s' belongs to backend %s, not %s", c->op, what,
                       cq_backend_name(t->be), cq_backend_name(c->be));
    if (t->ndim < 1 || t->ndim > CQ_TENSOR_MAX_DIMS)
        return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s' has %d dims", c->op, what, t->ndim);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 1) return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s' has an empty dim %d", c->op, what, i);
    return CQ_OK;
}

/* A float activation (F32/F16/BF16) read by the op. */
static cq_status need_act(const chk *c, const char *what, const cq_tensor *t) {
    CQ_TRY(need(c, what, t));
    if (!is_float_act(t->dtype))
        return cq_fail(CQ_ERR_DTYPE, "%s: tensor '%s' is %s (want f32, f16 or bf16)", c->op, what,
                       cq_dtype_name(t->dtype));
    if (t->nbytes < (size_t)cq_tensor_nelem(t) * cq_act_dtype_size(t->dtype))
        return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s' spans fewer bytes than its shape needs", c->op, what);
    return CQ_OK;
}

/* A float activation the op writes: never a weight. */
static cq_status need_out(const chk *c, const char *what, const cq_tensor *t) {
    CQ_TRY(need_act(c, what, t));
    if (t->flags & CQ_TENSOR_WEIGHT)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: output '%s' is a weight (weights are immutable)", c->op, what);
    return CQ_OK;
}

/* An optional F32 per-channel vector of n elements. */
static cq_status need_vec(const chk *c, const char *what, const cq_tensor *t, int64_t n) {
    if (!t) return CQ_OK;
    CQ_TRY(need_act(c, what, t));
    if (t->dtype != CQ_DTYPE_F32)
        return cq_fail(CQ_ERR_DTYPE, "%s: '%s' is %s (per-channel parameters are f32; convert with cq_op_copy)", c->op,
                       what, cq_dtype_name(t->dtype));
    if (cq_tensor_nelem(t) != n) {
        char b[64];
        return cq_fail(CQ_ERR_SHAPE, "%s: '%s' has shape %s (want %lld elements)", c->op, what, shape_str(t, b, sizeof b),
                       (long long)n);
    }
    return CQ_OK;
}

static cq_status need_i32(const chk *c, const char *what, const cq_tensor *t, int64_t n) {
    CQ_TRY(need(c, what, t));
    if (t->dtype != CQ_DTYPE_I32)
        return cq_fail(CQ_ERR_DTYPE, "%s: '%s' is %s (want i32)", c->op, what, cq_dtype_name(t->dtype));
    if (cq_tensor_nelem(t) != n)
        return cq_fail(CQ_ERR_SHAPE, "%s: '%s' has %lld elements (want %lld)", c->op, what,
                       (long long)cq_tensor_nelem(t), (long long)n);
    return CQ_OK;
}

static cq_status need_rc(const chk *c, const char *what, const cq_tensor *t, int64_t rows, int64_t cols) {
    if (cq_tensor_rows(t) != rows || cq_tensor_cols(t) != cols) {
        char b[64];
        return cq_fail(CQ_ERR_SHAPE, "%s: '%s' has shape %s (want %lld rows x %lld cols)", c->op, what,
                       shape_str(t, b, sizeof b), (long long)rows, (long long)cols);
    }
    return CQ_OK;
}

static cq_status need_dtype(const chk *c, const char *what, const cq_tensor *t, cq_dtype dt) {
    if (t->dtype != dt)
        return cq_fail(CQ_ERR_DTYPE, "%s: '%s' is %s but the op runs in %s", c->op, what, cq_dtype_name(t->dtype),
                       cq_dtype_name(dt));
    return CQ_OK;
}

static bool overlaps(const cq_tensor *a, const cq_tensor *b) {
    if (!a || !b || a->base != b->base) return false;
    return a->offset < b->offset + b->nbytes && b->offset < a->offset + a->nbytes;
}

static bool identical(const cq_tensor *a, const cq_tensor *b) {
    return a->base == b->base && a->offset == b->offset && a->nbytes == b->nbytes && a->dtype == b->dtype;
}

/* The output may not share memory with an input. */
static cq_status no_alias(const chk *c, const char *wo, const cq_tensor *o, const char *wi, const cq_tensor *i) {
    if (overlaps(o, i)) return cq_fail(CQ_ERR_INVALID_ARG, "%s: output '%s' overlaps input '%s'", c->op, wo, wi);
    return CQ_OK;
}

/* The output may be the input itself (in place) but not a shifted overlap. */
static cq_status same_or_apart(const chk *c, const char *wo, const cq_tensor *o, const char *wi, const cq_tensor *i) {
    if (overlaps(o, i) && !identical(o, i))
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: output '%s' partially overlaps input '%s' (in place must be exact)",
                       c->op, wo, wi);
    return CQ_OK;
}

/* Whether the backend runs the op itself (its entry is there and supports() says yes), or else its host backend
 * does (fallback.c); CQ_ERR_UNSUPPORTED when neither. wdt2 is a second weight's codec (matmul's w2), else wdt. */
static cq_status route(const chk *c, cq_op op, cq_dtype wdt, cq_dtype xdt, cq_dtype wdt2, bool *on_host) {
    *on_host = false;
    const cq_backend *be = c->be;
    if (cq_backend_has_entry(be, op) && be->vt->supports(be, op, wdt, xdt) &&
        (wdt2 == wdt || be->vt->supports(be, op, wdt2, xdt)))
        return CQ_OK;
    if (cq_fallback_route(c->be, op, wdt, xdt, wdt2)) {
        *on_host = true;
        return CQ_OK;
    }
    cq_dtype bad = be->vt->supports(be, op, wdt, xdt) ? wdt2 : wdt;
    if (bad != CQ_DTYPE_COUNT)
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: backend %s does not run %s weights with %s activations", c->op, be->name,
                       cq_dtype_name(bad), cq_dtype_name(xdt));
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s: backend %s does not run %s activations", c->op, be->name,
                   cq_dtype_name(xdt));
}

/* The end of every op: run it on the backend or on its host backend. */
#define DISPATCH(c, E, name, wdt, xdt, wdt2, ...)                                                                      \
    do {                                                                                                               \
        bool on_host_;                                                                                                 \
        CQ_TRY(route((c), CQ_OP_##E, (wdt), (xdt), (wdt2), &on_host_));                                                \
        return on_host_ ? cq_fallback_##name((c)->be, __VA_ARGS__) : (c)->be->vt->name((c)->be, __VA_ARGS__);          \
    } while (0)

static cq_status need_be(const chk *c) {
    if (!c->be) return cq_fail(CQ_ERR_INVALID_ARG, "%s: backend is NULL", c->op);
    return CQ_OK;
}

static cq_status need_finite(const chk *c, const char *what, float v) {
    if (!isfinite(v)) return cq_fail(CQ_ERR_INVALID_ARG, "%s: %s is not finite", c->op, what);
    return CQ_OK;
}

/* A matrix-shaped operand read as [shape[0], rest]: weights in any codec or
 * float activations. */
static cq_status need_matrix(const chk *c, const char *what, const cq_tensor *w, int64_t *rows, int64_t *cols) {
    CQ_TRY(need(c, what, w));
    if (!(w->flags & CQ_TENSOR_WEIGHT)) CQ_TRY(need_act(c, what, w));
    if (w->ndim < 2) return cq_fail(CQ_ERR_SHAPE, "%s: '%s' is 1-D (want a matrix [rows, cols])", c->op, what);
    *rows = w->shape[0];
    *cols = cq_tensor_nelem(w) / w->shape[0];
    return CQ_OK;
}

/* ---- matmul --------------------------------------------------------------------- */
cq_status cq_op_matmul(cq_backend *be, const cq_matmul_args *a) {
    chk c = {be, "matmul"};
    CQ_TRY(need_be(&c));
    if (!a) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: args is NULL");
    CQ_TRY(need_act(&c, "x", a->x));
    CQ_TRY(need_out(&c, "y", a->y));
    if ((unsigned)a->act >= CQ_ACT_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: unknown activation %d", a->act);
    CQ_TRY(need_finite(&c, "scale", a->scale));
    int64_t M = cq_tensor_rows(a->x), K = cq_tensor_cols(a->x);
    int64_t wn, wk;
    CQ_TRY(need_matrix(&c, "w", a->w, &wn, &wk));
    if (wk != K)
        return cq_fail(CQ_ERR_SHAPE, "matmul: x has %lld columns but w rows have %lld (want equal K)", (long long)K,
                       (long long)wk);
    int64_t N = wn;
    bool swiglu = a->act == CQ_ACT_SWIGLU;
    if (swiglu && a->w2) {
        int64_t n2, k2;
        CQ_TRY(need_matrix(&c, "w2", a->w2, &n2, &k2));
        if (n2 != wn || k2 != K)
            return cq_fail(CQ_ERR_SHAPE, "matmul: w2 is [%lld, %lld] but w is [%lld, %lld]", (long long)n2,
                           (long long)k2, (long long)wn, (long long)K);
        CQ_TRY(need_vec(&c, "bias", a->bias, N));
        CQ_TRY(need_vec(&c, "bias2", a->bias2, N));
    } else if (swiglu) {
        if (wn % 2)
            return cq_fail(CQ_ERR_SHAPE, "matmul: fused swiglu weight has %lld rows (want an even gate|up count)",
                           (long long)wn);
        N = wn / 2;
        if (a->bias2) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: bias2 with a fused swiglu weight (put it in bias)");
        CQ_TRY(need_vec(&c, "bias", a->bias, 2 * N));
    } else {
        if (a->w2) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: w2 is only used with the swiglu activation");
        if (a->bias2) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: bias2 is only used with the swiglu activation");
        CQ_TRY(need_vec(&c, "bias", a->bias, N));
    }
    if (a->gate && !a->accumulate) return cq_fail(CQ_ERR_INVALID_ARG, "matmul: gate needs accumulate (y += gate * v)");
    CQ_TRY(need_vec(&c, "gate", a->gate, N));
    CQ_TRY(need_rc(&c, "y", a->y, M, N));
    if (a->y->dtype != CQ_DTYPE_F32 && a->y->dtype != a->x->dtype)
        return cq_fail(CQ_ERR_DTYPE, "matmul: y is %s (want f32 or x's dtype %s)", cq_dtype_name(a->y->dtype),
                       cq_dtype_name(a->x->dtype));
    CQ_TRY(no_alias(&c, "y", a->y, "x", a->x));
    CQ_TRY(no_alias(&c, "y", a->y, "w", a->w));
    CQ_TRY(no_alias(&c, "y", a->y, "w2", a->w2));
    CQ_TRY(no_alias(&c, "y", a->y, "bias", a->bias));
    CQ_TRY(no_alias(&c, "y", a->y, "bias2", a->bias2));
    CQ_TRY(no_alias(&c, "y", a->y, "gate", a->gate));
    DISPATCH(&c, MATMUL, matmul, a->w->dtype, a->x->dtype, a->w2 ? a->w2->dtype : a->w->dtype, a);
}

cq_status cq_op_linear(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias) {
    cq_matmul_args a = {.y = y, .x = x, .w = w, .bias = bias, .scale = 1.0f};
    return cq_op_matmul(be, &a);
}

/* ---- attention --------------------------------------------------------------------- */
cq_status cq_op_attention(cq_backend *be, const cq_attn_args *a) {
    chk c = {be, "attention"};
    CQ_TRY(need_be(&c));
    if (!a) return cq_fail(CQ_ERR_INVALID_ARG, "attention: args is NULL");
    if (a->n_heads < 1 || a->n_kv_heads < 1 || a->head_dim < 1)
        return cq_fail(CQ_ERR_SHAPE, "attention: heads %d, kv heads %d, head_dim %d (all must be >= 1)", a->n_heads,
                       a->n_kv_heads, a->head_dim);
    if (a->n_heads % a->n_kv_heads)
        return cq_fail(CQ_ERR_SHAPE, "attention: %d query heads are not a multiple of %d kv heads", a->n_heads,
                       a->n_kv_heads);
    CQ_TRY(need_finite(&c, "scale", a->scale));
    CQ_TRY(need_act(&c, "q", a->q));
    CQ_TRY(need_out(&c, "o", a->o));
    int64_t Nq = cq_tensor_rows(a->q), D = a->head_dim;
    int64_t qc = (int64_t)a->n_heads * D, kc = (int64_t)a->n_kv_heads * D;
    CQ_TRY(need_rc(&c, "q", a->q, Nq, qc));
    CQ_TRY(need_rc(&c, "o", a->o, Nq, qc));
    cq_dtype dt = a->q->dtype;
    CQ_TRY(need_dtype(&c, "o", a->o, dt));
    if (!a->k != !a->v) return cq_fail(CQ_ERR_INVALID_ARG, "attention: k and v must be given together");
    if (!a->k_prefix != !a->v_prefix)
        return cq_fail(CQ_ERR_INVALID_ARG, "attention: k_prefix and v_prefix must be given together");
    if (!a->k && !a->k_prefix) return cq_fail(CQ_ERR_INVALID_ARG, "attention: no keys (give k/v, a prefix, or both)");
    const struct {
        const char *name;
        const cq_tensor *t;
    } kv[4] = {{"k", a->k}, {"v", a->v}, {"k_prefix", a->k_prefix}, {"v_prefix", a->v_prefix}};
    for (int i = 0; i < 4; i++) {
        if (!kv[i].t) continue;
        CQ_TRY(need_act(&c, kv[i].name, kv[i].t));
        CQ_TRY(need_dtype(&c, kv[i].name, kv[i].t, dt));
        CQ_TRY(need_rc(&c, kv[i].name, kv[i].t, cq_tensor_rows(kv[i].t), kc));
        CQ_TRY(no_alias(&c, "o", a->o, kv[i].name, kv[i].t));
    }
    if (a->k && cq_tensor_rows(a->k) != cq_tensor_rows(a->v))
        return cq_fail(CQ_ERR_SHAPE, "attention: k has %lld rows, v %lld", (long long)cq_tensor_rows(a->k),
                       (long long)cq_tensor_rows(a->v));
    if (a->k_prefix && cq_tensor_rows(a->k_prefix) != cq_tensor_rows(a->v_prefix))
        return cq_fail(CQ_ERR_SHAPE, "attention: k_prefix has %lld rows, v_prefix %lld",
                       (long long)cq_tensor_rows(a->k_prefix), (long long)cq_tensor_rows(a->v_prefix));
    if (a->vis) {
        CQ_TRY(need_i32(&c, "vis", a->vis, Nq));
        CQ_TRY(no_alias(&c, "o", a->o, "vis", a->vis));
    }
    if (a->vis_lo) {
        CQ_TRY(need_i32(&c, "vis_lo", a->vis_lo, Nq));
        CQ_TRY(no_alias(&c, "o", a->o, "vis_lo", a->vis_lo));
    }
    CQ_TRY(no_alias(&c, "o", a->o, "q", a->q));
    DISPATCH(&c, ATTENTION, attention, CQ_DTYPE_COUNT, dt, CQ_DTYPE_COUNT, a);
}

/* ---- row ops ------------------------------------------------------------------------ */
/* y and x: same dtype and rows x cols; y == x allowed. */
static cq_status need_unary_pair(const chk *c, cq_tensor *y, const cq_tensor *x) {
    CQ_TRY(need_act(c, "x", x));
    CQ_TRY(need_out(c, "y", y));
    CQ_TRY(need_dtype(c, "y", y, x->dtype));
    CQ_TRY(need_rc(c, "y", y, cq_tensor_rows(x), cq_tensor_cols(x)));
    return same_or_apart(c, "y", y, "x", x);
}

static cq_status need_eps(const chk *c, float eps) {
    if (!(eps >= 0.0f) || !isfinite(eps)) return cq_fail(CQ_ERR_INVALID_ARG, "%s: eps %g is not a finite value >= 0", c->op, eps);
    return CQ_OK;
}

cq_status cq_op_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                          const cq_tensor *shift, float eps) {
    chk c = {be, "layernorm"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_unary_pair(&c, y, x));
    CQ_TRY(need_eps(&c, eps));
    int64_t C = cq_tensor_cols(x);
    CQ_TRY(need_vec(&c, "scale", scale, C));
    CQ_TRY(need_vec(&c, "shift", shift, C));
    CQ_TRY(no_alias(&c, "y", y, "scale", scale));
    CQ_TRY(no_alias(&c, "y", y, "shift", shift));
    DISPATCH(&c, LAYERNORM, layernorm, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, scale, shift, eps);
}

cq_status cq_op_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                        bool zero_centered, float eps) {
    chk c = {be, "rmsnorm"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_unary_pair(&c, y, x));
    CQ_TRY(need_eps(&c, eps));
    int64_t C = cq_tensor_cols(x);
    CQ_TRY(need_vec(&c, "w", w, C));
    CQ_TRY(need_vec(&c, "bias", bias, C));
    CQ_TRY(no_alias(&c, "y", y, "w", w));
    CQ_TRY(no_alias(&c, "y", y, "bias", bias));
    DISPATCH(&c, RMSNORM, rmsnorm, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, w, bias, zero_centered, eps);
}

cq_status cq_op_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                          const cq_tensor *beta, float eps) {
    chk c = {be, "groupnorm"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_unary_pair(&c, y, x));
    CQ_TRY(need_eps(&c, eps));
    int64_t C = cq_tensor_cols(x);
    if (groups < 1 || C % groups)
        return cq_fail(CQ_ERR_SHAPE, "groupnorm: %d groups do not divide %lld channels", groups, (long long)C);
    CQ_TRY(need_vec(&c, "gamma", gamma, C));
    CQ_TRY(need_vec(&c, "beta", beta, C));
    CQ_TRY(no_alias(&c, "y", y, "gamma", gamma));
    CQ_TRY(no_alias(&c, "y", y, "beta", beta));
    DISPATCH(&c, GROUPNORM, groupnorm, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, groups, gamma, beta, eps);
}

cq_status cq_op_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block) {
    chk c = {be, "group_moments"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_act(&c, "x", x));
    CQ_TRY(need_out(&c, "m", m));
    CQ_TRY(need_dtype(&c, "m", m, CQ_DTYPE_F32));
    const int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    if (groups < 1 || C % groups)
        return cq_fail(CQ_ERR_SHAPE, "group_moments: %d groups do not divide %lld channels", groups, (long long)C);
    if (block < 1 || R % block)
        return cq_fail(CQ_ERR_SHAPE, "group_moments: blocks of %d rows do not divide %lld rows", block, (long long)R);
    CQ_TRY(need_rc(&c, "m", m, R / block, 2LL * groups));
    CQ_TRY(no_alias(&c, "m", m, "x", x));
    DISPATCH(&c, GROUP_MOMENTS, group_moments, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, m, x, groups, block);
}

cq_status cq_op_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                             const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim) {
    chk c = {be, "qk_norm_rope"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_out(&c, "t", t));
    if (n_heads < 1 || head_dim < 1)
        return cq_fail(CQ_ERR_SHAPE, "qk_norm_rope: %d heads of %d channels", n_heads, head_dim);
    int64_t N = cq_tensor_rows(t);
    CQ_TRY(need_rc(&c, "t", t, N, (int64_t)n_heads * head_dim));
    CQ_TRY(need_eps(&c, eps));
    CQ_TRY(need_vec(&c, "w", w, head_dim));
    CQ_TRY(no_alias(&c, "t", t, "w", w));
    if ((unsigned)mode > CQ_ROPE_HALF) return cq_fail(CQ_ERR_INVALID_ARG, "qk_norm_rope: unknown rope mode %d", mode);
    if (mode != CQ_ROPE_NONE) {
        int rd = rope_dim ? rope_dim : head_dim;
        if (rd < 2 || rd > head_dim || rd % 2)
            return cq_fail(CQ_ERR_SHAPE, "qk_norm_rope: rope_dim %d (want an even count in [2, head_dim %d])", rd,
                           head_dim);
        const cq_tensor *tab[2] = {cos_t, sin_t};
        const char *names[2] = {"cos", "sin"};
        for (int i = 0; i < 2; i++) {
            if (!tab[i]) return cq_fail(CQ_ERR_INVALID_ARG, "qk_norm_rope: the %s table is missing", names[i]);
            CQ_TRY(need_act(&c, names[i], tab[i]));
            if (tab[i]->dtype != CQ_DTYPE_F32)
                return cq_fail(CQ_ERR_DTYPE, "qk_norm_rope: the %s table is %s (want f32)", names[i],
                               cq_dtype_name(tab[i]->dtype));
            CQ_TRY(need_rc(&c, names[i], tab[i], N, rd / 2));
            CQ_TRY(no_alias(&c, "t", t, names[i], tab[i]));
        }
    }
    DISPATCH(&c, QK_NORM_ROPE, qk_norm_rope, CQ_DTYPE_COUNT, t->dtype, CQ_DTYPE_COUNT, t, n_heads, head_dim, w, eps,
             cos_t, sin_t, mode, rope_dim);
}

cq_status cq_op_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    chk c = {be, "unary"};
    CQ_TRY(need_be(&c));
    if ((unsigned)fn >= CQ_UNARY_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "unary: unknown function %d", fn);
    CQ_TRY(need_unary_pair(&c, y, x));
    DISPATCH(&c, UNARY, unary, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, fn, alpha, beta);
}

cq_status cq_op_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    chk c = {be, "binary"};
    CQ_TRY(need_be(&c));
    if ((unsigned)fn >= CQ_BINARY_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "binary: unknown function %d", fn);
    CQ_TRY(need_act(&c, "a", a));
    CQ_TRY(need_act(&c, "b", b));
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "b", b, a->dtype));
    CQ_TRY(need_dtype(&c, "y", y, a->dtype));
    CQ_TRY(need_rc(&c, "y", y, cq_tensor_rows(a), cq_tensor_cols(a)));
    int64_t nb = cq_tensor_nelem(b);
    bool full = nb == cq_tensor_nelem(a) && cq_tensor_cols(b) == cq_tensor_cols(a);
    bool row = nb == cq_tensor_cols(a) && cq_tensor_rows(b) == 1;
    if (!full && !row) {
        char sa[64], sb[64];
        return cq_fail(CQ_ERR_SHAPE, "binary: b %s neither matches a %s nor is one row of it", shape_str(b, sb, sizeof sb),
                       shape_str(a, sa, sizeof sa));
    }
    CQ_TRY(same_or_apart(&c, "y", y, "a", a));
    if (full)
        CQ_TRY(same_or_apart(&c, "y", y, "b", b));
    else
        CQ_TRY(no_alias(&c, "y", y, "b", b));
    DISPATCH(&c, BINARY, binary, CQ_DTYPE_COUNT, a->dtype, CQ_DTYPE_COUNT, y, a, b, fn);
}

cq_status cq_op_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    chk c = {be, "gated_add"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_unary_pair(&c, y, x));
    CQ_TRY(need_vec(&c, "gate", gate, cq_tensor_cols(x)));
    CQ_TRY(no_alias(&c, "y", y, "gate", gate));
    DISPATCH(&c, GATED_ADD, gated_add, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, gate);
}

cq_status cq_op_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    chk c = {be, "swiglu"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_act(&c, "a", a));
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "y", y, a->dtype));
    if (b) {
        CQ_TRY(need_act(&c, "b", b));
        CQ_TRY(need_dtype(&c, "b", b, a->dtype));
        CQ_TRY(need_rc(&c, "b", b, cq_tensor_rows(a), cq_tensor_cols(a)));
        CQ_TRY(need_rc(&c, "y", y, cq_tensor_rows(a), cq_tensor_cols(a)));
        CQ_TRY(same_or_apart(&c, "y", y, "a", a));
        CQ_TRY(same_or_apart(&c, "y", y, "b", b));
    } else {
        if (cq_tensor_cols(a) % 2)
            return cq_fail(CQ_ERR_SHAPE, "swiglu: fused input has %lld columns (want gate|up halves)",
                           (long long)cq_tensor_cols(a));
        CQ_TRY(need_rc(&c, "y", y, cq_tensor_rows(a), cq_tensor_cols(a) / 2));
        CQ_TRY(no_alias(&c, "y", y, "a", a));
    }
    DISPATCH(&c, SWIGLU, swiglu, CQ_DTYPE_COUNT, a->dtype, CQ_DTYPE_COUNT, y, a, b);
}

cq_status cq_op_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale) {
    chk c = {be, "softmax"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_unary_pair(&c, y, x));
    CQ_TRY(need_finite(&c, "scale", scale));
    DISPATCH(&c, SOFTMAX, softmax, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, scale);
}

cq_status cq_op_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    chk c = {be, "copy"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need(&c, "x", x));
    CQ_TRY(need(&c, "y", y));
    bool xi = x->dtype == CQ_DTYPE_I32, yi = y->dtype == CQ_DTYPE_I32;
    if (xi || yi) {
        if (!(xi && yi)) return cq_fail(CQ_ERR_DTYPE, "copy: i32 copies only to i32");
    } else {
        CQ_TRY(need_act(&c, "x", x));
        CQ_TRY(need_out(&c, "y", y));
    }
    if (y->flags & CQ_TENSOR_WEIGHT) return cq_fail(CQ_ERR_INVALID_ARG, "copy: output 'y' is a weight");
    if (cq_tensor_nelem(x) != cq_tensor_nelem(y))
        return cq_fail(CQ_ERR_SHAPE, "copy: %lld elements into %lld", (long long)cq_tensor_nelem(x),
                       (long long)cq_tensor_nelem(y));
    if (overlaps(y, x) && !(identical(y, x)))
        return cq_fail(CQ_ERR_INVALID_ARG, "copy: output 'y' overlaps input 'x'");
    DISPATCH(&c, COPY, copy, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x);
}

cq_status cq_op_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    chk c = {be, "transpose"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_act(&c, "x", x));
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "y", y, x->dtype));
    CQ_TRY(need_rc(&c, "y", y, cq_tensor_cols(x), cq_tensor_rows(x)));
    CQ_TRY(no_alias(&c, "y", y, "x", x));
    DISPATCH(&c, TRANSPOSE, transpose, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x);
}

cq_status cq_op_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    chk c = {be, "concat_cols"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_act(&c, "a", a));
    CQ_TRY(need_act(&c, "b", b));
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "b", b, a->dtype));
    CQ_TRY(need_dtype(&c, "y", y, a->dtype));
    int64_t R = cq_tensor_rows(a);
    CQ_TRY(need_rc(&c, "b", b, R, cq_tensor_cols(b)));
    CQ_TRY(need_rc(&c, "y", y, R, cq_tensor_cols(a) + cq_tensor_cols(b)));
    CQ_TRY(no_alias(&c, "y", y, "a", a));
    CQ_TRY(no_alias(&c, "y", y, "b", b));
    DISPATCH(&c, CONCAT_COLS, concat_cols, CQ_DTYPE_COUNT, a->dtype, CQ_DTYPE_COUNT, y, a, b);
}

cq_status cq_op_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    chk c = {be, "get_rows"};
    CQ_TRY(need_be(&c));
    int64_t V, C;
    CQ_TRY(need_matrix(&c, "w", w, &V, &C));
    CQ_TRY(need_out(&c, "y", y));
    int64_t n = cq_tensor_rows(y);
    CQ_TRY(need_i32(&c, "ids", ids, n));
    CQ_TRY(need_rc(&c, "y", y, n, C));
    CQ_TRY(no_alias(&c, "y", y, "w", w));
    CQ_TRY(no_alias(&c, "y", y, "ids", ids));
    DISPATCH(&c, GET_ROWS, get_rows, w->dtype, y->dtype, w->dtype, y, w, ids);
}

/* ---- image ops ------------------------------------------------------------------------ */
static cq_status need_prod(const chk *c, const char *what, int64_t a, int64_t b, int64_t *out) {
    if (__builtin_mul_overflow(a, b, out) || *out > ((int64_t)1 << 50))
        return cq_fail(CQ_ERR_SHAPE, "%s: %s overflows", c->op, what);
    return CQ_OK;
}

cq_status cq_op_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                            float scale) {
    chk c = {be, "gather_cols"};
    CQ_TRY(need_be(&c));
    if (group < 1) return cq_fail(CQ_ERR_INVALID_ARG, "gather_cols: group %d (want >= 1)", group);
    CQ_TRY(need_finite(&c, "scale", scale));
    CQ_TRY(need_act(&c, "x", x));
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "y", y, x->dtype));
    int64_t R = cq_tensor_rows(x), N = cq_tensor_cols(y), n;
    CQ_TRY(need_rc(&c, "y", y, R, N));
    CQ_TRY(need_prod(&c, "N*group", N, group, &n));
    CQ_TRY(need_i32(&c, "idx", idx, n));
    CQ_TRY(no_alias(&c, "y", y, "x", x));
    CQ_TRY(no_alias(&c, "y", y, "idx", idx));
    DISPATCH(&c, GATHER_COLS, gather_cols, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, idx, group, scale);
}

cq_status cq_op_conv2d(cq_backend *be, const cq_conv2d_args *a) {
    chk c = {be, "conv2d"};
    CQ_TRY(need_be(&c));
    if (!a) return cq_fail(CQ_ERR_INVALID_ARG, "conv2d: args is NULL");
    CQ_TRY(need_act(&c, "x", a->x));
    CQ_TRY(need_out(&c, "y", a->y));
    CQ_TRY(need_dtype(&c, "y", a->y, a->x->dtype));
    if (a->H < 1 || a->W < 1 || a->kh < 1 || a->kw < 1 || a->stride_y < 1 || a->stride_x < 1)
        return cq_fail(CQ_ERR_SHAPE, "conv2d: image %dx%d, kernel %dx%d, stride %dx%d (all must be >= 1)", a->H, a->W,
                       a->kh, a->kw, a->stride_y, a->stride_x);
    if (a->pad_l < 0 || a->pad_r < 0 || a->pad_t < 0 || a->pad_b < 0)
        return cq_fail(CQ_ERR_SHAPE, "conv2d: negative padding");
    if ((unsigned)a->mode > CQ_PAD_REFLECT) return cq_fail(CQ_ERR_INVALID_ARG, "conv2d: unknown padding mode %d", a->mode);
    if (a->mode == CQ_PAD_REFLECT && (a->pad_t >= a->H || a->pad_b >= a->H || a->pad_l >= a->W || a->pad_r >= a->W))
        return cq_fail(CQ_ERR_SHAPE, "conv2d: reflect padding (%d,%d,%d,%d) must be smaller than the image %dx%d",
                       a->pad_l, a->pad_r, a->pad_t, a->pad_b, a->H, a->W);
    int64_t HW, Cin = cq_tensor_cols(a->x);
    CQ_TRY(need_prod(&c, "H*W", a->H, a->W, &HW));
    CQ_TRY(need_rc(&c, "x", a->x, HW, Cin));
    int64_t hp = (int64_t)a->H + a->pad_t + a->pad_b, wp = (int64_t)a->W + a->pad_l + a->pad_r;
    if (hp < a->kh || wp < a->kw)
        return cq_fail(CQ_ERR_SHAPE, "conv2d: kernel %dx%d is larger than the padded image %lldx%lld", a->kh, a->kw,
                       (long long)hp, (long long)wp);
    int64_t Ho = (hp - a->kh) / a->stride_y + 1, Wo = (wp - a->kw) / a->stride_x + 1;
    int64_t Cout, wk, khw, K;
    CQ_TRY(need_matrix(&c, "w", a->w, &Cout, &wk));
    CQ_TRY(need_prod(&c, "kh*kw", a->kh, a->kw, &khw));
    CQ_TRY(need_prod(&c, "Cin*kh*kw", Cin, khw, &K));
    if (wk != K) {
        char b[64];
        return cq_fail(CQ_ERR_SHAPE, "conv2d: weight %s does not hold [Cout, %lld, %d, %d] for %lld input channels",
                       shape_str(a->w, b, sizeof b), (long long)Cin, a->kh, a->kw, (long long)Cin);
    }
    if (a->w->ndim == 4 && (a->w->shape[1] != Cin || a->w->shape[2] != a->kh || a->w->shape[3] != a->kw)) {
        char b[64];
        return cq_fail(CQ_ERR_SHAPE, "conv2d: weight %s is not [Cout, %lld, %d, %d]", shape_str(a->w, b, sizeof b),
                       (long long)Cin, a->kh, a->kw);
    }
    CQ_TRY(need_vec(&c, "bias", a->bias, Cout));
    CQ_TRY(need_rc(&c, "y", a->y, Ho * Wo, Cout));
    CQ_TRY(no_alias(&c, "y", a->y, "x", a->x));
    CQ_TRY(no_alias(&c, "y", a->y, "w", a->w));
    CQ_TRY(no_alias(&c, "y", a->y, "bias", a->bias));
    DISPATCH(&c, CONV2D, conv2d, a->w->dtype, a->x->dtype, a->w->dtype, a);
}

/* x [H*W, C] in, y [ry*H*W*..., C'] out: the shared checks of the resampling ops. */
static cq_status need_resample(const chk *c, cq_tensor *y, const cq_tensor *x, int H, int W, int f, int64_t x_rows,
                               int64_t x_cols, int64_t y_rows, int64_t y_cols) {
    CQ_TRY(need_act(c, "x", x));
    CQ_TRY(need_out(c, "y", y));
    CQ_TRY(need_dtype(c, "y", y, x->dtype));
    CQ_TRY(need_rc(c, "x", x, x_rows, x_cols));
    CQ_TRY(need_rc(c, "y", y, y_rows, y_cols));
    return no_alias(c, "y", y, "x", x);
}

static cq_status need_grid(const chk *c, int H, int W, int f, int64_t *hw, int64_t *ff) {
    if (H < 1 || W < 1 || f < 1) return cq_fail(CQ_ERR_SHAPE, "%s: grid %dx%d, factor %d (all must be >= 1)", c->op, H, W, f);
    CQ_TRY(need_prod(c, "H*W", H, W, hw));
    CQ_TRY(need_prod(c, "factor^2", f, f, ff));
    int64_t t;
    return need_prod(c, "output size", *hw, *ff, &t);
}

cq_status cq_op_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    chk c = {be, "upsample_nearest"};
    CQ_TRY(need_be(&c));
    int64_t hw, ff;
    CQ_TRY(need_grid(&c, H, W, f, &hw, &ff));
    CQ_TRY(need_act(&c, "x", x));
    int64_t C = cq_tensor_cols(x);
    CQ_TRY(need_resample(&c, y, x, H, W, f, hw, C, hw * ff, C));
    DISPATCH(&c, UPSAMPLE_NEAREST, upsample_nearest, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, H, W, f);
}

cq_status cq_op_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    chk c = {be, "pixel_shuffle"};
    CQ_TRY(need_be(&c));
    int64_t hw, rr;
    CQ_TRY(need_grid(&c, H, W, r, &hw, &rr));
    CQ_TRY(need_act(&c, "x", x));
    int64_t C = cq_tensor_cols(x);
    if (C % rr)
        return cq_fail(CQ_ERR_SHAPE, "pixel_shuffle: %lld channels are not a multiple of r*r = %lld", (long long)C,
                       (long long)rr);
    CQ_TRY(need_resample(&c, y, x, H, W, r, hw, C, hw * rr, C / rr));
    DISPATCH(&c, PIXEL_SHUFFLE, pixel_shuffle, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, H, W, r);
}

cq_status cq_op_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    chk c = {be, "pixel_unshuffle"};
    CQ_TRY(need_be(&c));
    int64_t hw, rr;
    CQ_TRY(need_grid(&c, H, W, r, &hw, &rr));
    CQ_TRY(need_act(&c, "x", x));
    int64_t C = cq_tensor_cols(x);
    CQ_TRY(need_resample(&c, y, x, H, W, r, hw * rr, C, hw, C * rr));
    DISPATCH(&c, PIXEL_UNSHUFFLE, pixel_unshuffle, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, H, W, r);
}

/* ---- LTX video VAE and vocoder ops ------------------------------------------------------------------------ */
/* A padded axis of n samples (pads lo, hi) under a kernel of k taps spaced d apart, stride s: the output length,
 * or a clear error. Every value is an int from the caller, so the sums fit an int64. */
static cq_status need_axis(const chk *c, const char *axis, int64_t n, int64_t lo, int64_t hi, int64_t k, int64_t d,
                           int64_t s, int64_t *out) {
    if (n < 1 || k < 1 || d < 1 || s < 1)
        return cq_fail(CQ_ERR_SHAPE, "%s: %s has %lld samples, kernel %lld, dilation %lld, stride %lld (all must be >= 1)",
                       c->op, axis, (long long)n, (long long)k, (long long)d, (long long)s);
    if (lo < 0 || hi < 0) return cq_fail(CQ_ERR_SHAPE, "%s: negative %s padding (%lld, %lld)", c->op, axis, (long long)lo,
                                         (long long)hi);
    int64_t span = d * (k - 1) + 1, padded = n + lo + hi;
    if (padded < span)
        return cq_fail(CQ_ERR_SHAPE, "%s: the %s kernel spans %lld samples, more than the %lld padded ones", c->op, axis,
                       (long long)span, (long long)padded);
    *out = (padded - span) / s + 1;
    return CQ_OK;
}

static cq_status need_pad_mode(const chk *c, cq_pad_mode mode, int64_t n, int64_t lo, int64_t hi) {
    if ((unsigned)mode > CQ_PAD_REFLECT) return cq_fail(CQ_ERR_INVALID_ARG, "%s: unknown padding mode %d", c->op, mode);
    if (mode == CQ_PAD_REFLECT && (lo >= n || hi >= n))
        return cq_fail(CQ_ERR_SHAPE, "%s: reflect padding (%lld, %lld) must be smaller than the %lld samples it mirrors",
                       c->op, (long long)lo, (long long)hi, (long long)n);
    return CQ_OK;
}

/* A convolution weight of rows x (k0*k1) values, shaped [rows, k0, k1] or [rows, k0*k1]. */
static cq_status need_conv_weight(const chk *c, const cq_tensor *w, int64_t rows, int64_t k0, int64_t k1) {
    int64_t r, cols, K;
    CQ_TRY(need_matrix(c, "w", w, &r, &cols));
    CQ_TRY(need_prod(c, "weight columns", k0, k1, &K));
    char b[64];
    if (r != rows || cols != K || (w->ndim == 3 && (w->shape[1] != k0 || w->shape[2] != k1)) || w->ndim > 3)
        return cq_fail(CQ_ERR_SHAPE, "%s: weight %s is not [%lld, %lld, %lld] (or [%lld, %lld])", c->op,
                       shape_str(w, b, sizeof b), (long long)rows, (long long)k0, (long long)k1, (long long)rows,
                       (long long)K);
    return CQ_OK;
}

cq_status cq_op_conv3d(cq_backend *be, const cq_conv3d_args *a) {
    chk c = {be, "conv3d"};
    CQ_TRY(need_be(&c));
    if (!a) return cq_fail(CQ_ERR_INVALID_ARG, "conv3d: args is NULL");
    CQ_TRY(need_act(&c, "x", a->x));
    CQ_TRY(need_out(&c, "y", a->y));
    CQ_TRY(need_dtype(&c, "y", a->y, a->x->dtype));
    int64_t To, Ho, Wo;
    CQ_TRY(need_axis(&c, "time", a->T, a->pad_front, a->pad_back, a->kt, 1, a->stride_t, &To));
    CQ_TRY(need_axis(&c, "height", a->H, a->pad_t, a->pad_b, a->kh, 1, a->stride_y, &Ho));
    CQ_TRY(need_axis(&c, "width", a->W, a->pad_l, a->pad_r, a->kw, 1, a->stride_x, &Wo));
    CQ_TRY(need_pad_mode(&c, a->mode, a->H, a->pad_t, a->pad_b));
    CQ_TRY(need_pad_mode(&c, a->mode, a->W, a->pad_l, a->pad_r));
    int64_t HW, THW, Cin = cq_tensor_cols(a->x), taps, tt, ohw, othw;
    CQ_TRY(need_prod(&c, "H*W", a->H, a->W, &HW));
    CQ_TRY(need_prod(&c, "T*H*W", HW, a->T, &THW));
    CQ_TRY(need_rc(&c, "x", a->x, THW, Cin));
    CQ_TRY(need_prod(&c, "kh*kw", a->kh, a->kw, &tt));
    CQ_TRY(need_prod(&c, "kt*kh*kw", tt, a->kt, &taps));
    CQ_TRY(need_prod(&c, "Ho*Wo", Ho, Wo, &ohw));
    CQ_TRY(need_prod(&c, "To*Ho*Wo", ohw, To, &othw));
    CQ_TRY(need(&c, "w", a->w));
    int64_t Cout = a->w->shape[0];
    CQ_TRY(need_conv_weight(&c, a->w, Cout, Cin, taps));
    CQ_TRY(need_vec(&c, "bias", a->bias, Cout));
    CQ_TRY(need_rc(&c, "y", a->y, othw, Cout));
    CQ_TRY(no_alias(&c, "y", a->y, "x", a->x));
    CQ_TRY(no_alias(&c, "y", a->y, "w", a->w));
    CQ_TRY(no_alias(&c, "y", a->y, "bias", a->bias));
    DISPATCH(&c, CONV3D, conv3d, a->w->dtype, a->x->dtype, a->w->dtype, a);
}

cq_status cq_op_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph,
                                 int pw) {
    chk c = {be, "depth_to_space3d"};
    CQ_TRY(need_be(&c));
    if (T < 1 || H < 1 || W < 1 || pt < 1 || ph < 1 || pw < 1)
        return cq_fail(CQ_ERR_SHAPE, "depth_to_space3d: grid %dx%dx%d, factors (%d, %d, %d) (all must be >= 1)", T, H, W,
                       pt, ph, pw);
    CQ_TRY(need_act(&c, "x", x));
    int64_t hw, thw, pp, ppp, rows;
    CQ_TRY(need_prod(&c, "H*W", H, W, &hw));
    CQ_TRY(need_prod(&c, "T*H*W", hw, T, &thw));
    CQ_TRY(need_prod(&c, "ph*pw", ph, pw, &pp));
    CQ_TRY(need_prod(&c, "pt*ph*pw", pp, pt, &ppp));
    CQ_TRY(need_prod(&c, "output rows", thw, ppp, &rows));
    int64_t C = cq_tensor_cols(x);
    if (C % ppp)
        return cq_fail(CQ_ERR_SHAPE, "depth_to_space3d: %lld channels are not a multiple of pt*ph*pw = %lld",
                       (long long)C, (long long)ppp);
    CQ_TRY(need_out(&c, "y", y));
    CQ_TRY(need_dtype(&c, "y", y, x->dtype));
    CQ_TRY(need_rc(&c, "x", x, thw, C));
    CQ_TRY(need_rc(&c, "y", y, rows, C / ppp));
    CQ_TRY(no_alias(&c, "y", y, "x", x));
    DISPATCH(&c, DEPTH_TO_SPACE3D, depth_to_space3d, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, T, H, W, pt, ph,
             pw);
}

/* The checks conv1d and conv_transpose1d share; *Lo is the output length. */
static cq_status need_conv1d(const chk *c, const cq_conv1d_args *a, bool transposed, int64_t *Lo) {
    CQ_TRY(need_be(c));
    if (!a) return cq_fail(CQ_ERR_INVALID_ARG, "%s: args is NULL", c->op);
    CQ_TRY(need_act(c, "x", a->x));
    CQ_TRY(need_out(c, "y", a->y));
    CQ_TRY(need_dtype(c, "y", a->y, a->x->dtype));
    CQ_TRY(need(c, "w", a->w));
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y);
    if (a->groups < 1 || Cin % a->groups || Cout % a->groups)
        return cq_fail(CQ_ERR_SHAPE, "%s: %d groups do not divide %lld input and %lld output channels", c->op, a->groups,
                       (long long)Cin, (long long)Cout);
    if (transposed) {
        if (a->k < 1 || a->stride < 1 || a->dilation != 1)
            return cq_fail(CQ_ERR_SHAPE, "%s: kernel %d, stride %d, dilation %d (kernel and stride >= 1, dilation 1)",
                           c->op, a->k, a->stride, a->dilation);
        if (a->pad_l < 0 || a->pad_r < 0) return cq_fail(CQ_ERR_SHAPE, "%s: negative crop (%d, %d)", c->op, a->pad_l, a->pad_r);
        int64_t full = (L - 1) * a->stride + a->k; /* L < 2^50, stride < 2^31 */
        if (L > ((int64_t)1 << 31) || full - a->pad_l - a->pad_r < 1)
            return cq_fail(CQ_ERR_SHAPE, "%s: cropping (%d, %d) from %lld samples leaves none", c->op, a->pad_l, a->pad_r,
                           (long long)full);
        *Lo = full - a->pad_l - a->pad_r;
        CQ_TRY(need_conv_weight(c, a->w, Cin, Cout / a->groups, a->k));
    } else {
        CQ_TRY(need_axis(c, "length", L, a->pad_l, a->pad_r, a->k, a->dilation, a->stride, Lo));
        CQ_TRY(need_pad_mode(c, a->mode, L, a->pad_l, a->pad_r));
        CQ_TRY(need_conv_weight(c, a->w, Cout, Cin / a->groups, a->k));
    }
    CQ_TRY(need_vec(c, "bias", a->bias, Cout));
    CQ_TRY(need_rc(c, "y", a->y, *Lo, Cout));
    CQ_TRY(no_alias(c, "y", a->y, "x", a->x));
    CQ_TRY(no_alias(c, "y", a->y, "w", a->w));
    return no_alias(c, "y", a->y, "bias", a->bias);
}

cq_status cq_op_conv1d(cq_backend *be, const cq_conv1d_args *a) {
    chk c = {be, "conv1d"};
    int64_t Lo;
    CQ_TRY(need_conv1d(&c, a, false, &Lo));
    DISPATCH(&c, CONV1D, conv1d, a->w->dtype, a->x->dtype, a->w->dtype, a);
}

cq_status cq_op_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) {
    chk c = {be, "conv_transpose1d"};
    int64_t Lo;
    CQ_TRY(need_conv1d(&c, a, true, &Lo));
    DISPATCH(&c, CONV_TRANSPOSE1D, conv_transpose1d, a->w->dtype, a->x->dtype, a->w->dtype, a);
}

cq_status cq_op_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta,
                      bool logscale, float eps) {
    chk c = {be, "snake"};
    CQ_TRY(need_be(&c));
    CQ_TRY(need_finite(&c, "eps", eps));
    if (eps < 0) return cq_fail(CQ_ERR_INVALID_ARG, "snake: eps %g is negative", (double)eps);
    CQ_TRY(need_unary_pair(&c, y, x));
    int64_t C = cq_tensor_cols(x);
    if (!alpha) return cq_fail(CQ_ERR_INVALID_ARG, "snake: alpha is NULL");
    CQ_TRY(need_vec(&c, "alpha", alpha, C));
    CQ_TRY(need_vec(&c, "beta", beta, C));
    CQ_TRY(no_alias(&c, "y", y, "alpha", alpha));
    CQ_TRY(no_alias(&c, "y", y, "beta", beta));
    DISPATCH(&c, SNAKE, snake, CQ_DTYPE_COUNT, x->dtype, CQ_DTYPE_COUNT, y, x, alpha, beta, logscale, eps);
}
