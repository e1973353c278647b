/*
 * vk_ops.c — the ops the Vulkan backend runs itself (the portable path: f32
 * compute, no cooperative matrices), each a dispatch of one shader of
 * shaders/ with its tensors' element offsets in the push constants. The
 * structs below mirror the shaders' push-constant blocks word for word.
 * supports() answers for exactly these; every other op and combination runs
 * on the host backend (fallback.c). Activations are f32, f16 or bf16
 * (common.glsl's CQ_LD / CQ_ST on packed words); the dtype selects the
 * pipeline variant (CQ_VK_VARIANT) and is repeated in the push constants.
 */
#include <math.h>
#include <string.h>

#include "backends/vulkan/vk_impl.h"

static bool is_fl(cq_dtype dt) { return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16; }

/* The weight codecs wdec.glsl decodes (what vk_backend.c uploads). */
static bool decoded(cq_dtype dt) {
    return is_fl(dt) || dt == CQ_DTYPE_Q8_ROW || dt == CQ_DTYPE_Q8_2F || dt == CQ_DTYPE_Q4_BLOCK ||
           dt == CQ_DTYPE_Q4_TILED || dt == CQ_DTYPE_Q4TP;
}

bool cq_vk_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    (void)be;
    switch (op) {
    case CQ_OP_COPY: return is_fl(xdt) || xdt == CQ_DTYPE_I32;
    case CQ_OP_UNARY: /* every activation op: f32, f16 or bf16 (common.glsl's CQ_LD / CQ_ST), computed in f32 */
    case CQ_OP_BINARY:
    case CQ_OP_GATED_ADD:
    case CQ_OP_SWIGLU:
    case CQ_OP_SOFTMAX:
    case CQ_OP_RMSNORM:
    case CQ_OP_LAYERNORM:
    case CQ_OP_ATTENTION:
    case CQ_OP_QK_NORM_ROPE:
    case CQ_OP_TRANSPOSE:
    case CQ_OP_CONCAT_COLS:
    case CQ_OP_UPSAMPLE_NEAREST:
    case CQ_OP_PIXEL_SHUFFLE:
    case CQ_OP_PIXEL_UNSHUFFLE:
    case CQ_OP_GATHER_COLS:
    case CQ_OP_GROUPNORM:
    case CQ_OP_GROUP_MOMENTS:
    case CQ_OP_DEPTH_TO_SPACE3D:
    case CQ_OP_SNAKE: return is_fl(xdt);
    case CQ_OP_MATMUL:
    case CQ_OP_CONV2D:
    case CQ_OP_CONV3D:
    case CQ_OP_CONV1D:
    case CQ_OP_CONV_TRANSPOSE1D:
    case CQ_OP_GET_ROWS: return is_fl(xdt) && decoded(wdt);
    default: return false;
    }
}

static cq_vk_buf *B(const cq_tensor *t) { return t ? (cq_vk_buf *)t->base : NULL; }

static bool quantized(cq_dtype dt) {
    return dt == CQ_DTYPE_Q8_ROW || dt == CQ_DTYPE_Q8_2F || dt == CQ_DTYPE_Q4_BLOCK || dt == CQ_DTYPE_Q4_TILED ||
           dt == CQ_DTYPE_Q4TP;
}

/* Offset of a tensor in its buffer: in units of its dtype, in bytes for the quantized codecs (wdec.glsl). */
static uint32_t eo(const cq_tensor *t) {
    if (!t) return 0;
    size_t es = quantized(t->dtype) ? 1 : t->dtype == CQ_DTYPE_F16 || t->dtype == CQ_DTYPE_BF16 ? 2 : 4;
    return (uint32_t)(t->offset / es);
}

/* The shaders index a weight's elements with 32-bit words: a q4 payload within maxStorageBufferRange may still
 * hold more elements than that (4 GiB of nibbles). */
static cq_status weight_ok(const cq_vk *c, const char *op, const cq_tensor *w) {
    if ((uint64_t)cq_tensor_nelem(w) > UINT32_MAX)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan %s: a weight of %lld elements is more than the shaders index",
                       op, (long long)cq_tensor_nelem(w));
    if (w->dtype == CQ_DTYPE_Q4TP && !c->exp2)
        return cq_fail(CQ_ERR_INTERNAL, "vulkan %s: a q4tp weight without the exp2 table (not bound as a weight?)",
                       op);
    return CQ_OK;
}

/* The table bound at CQ_VK_EXP2_BINDING for a weight (q4tp only; vk_backend.c made it when binding one). */
static cq_vk_buf *exp2_for(const cq_vk *c, const cq_tensor *w) {
    return w && w->dtype == CQ_DTYPE_Q4TP ? c->exp2 : NULL;
}

static uint32_t vdt(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F16: return VK_DT_F16;
    case CQ_DTYPE_BF16: return VK_DT_BF16;
    case CQ_DTYPE_Q8_ROW: return VK_DT_Q8_ROW;
    case CQ_DTYPE_Q8_2F: return VK_DT_Q8_2F;
    case CQ_DTYPE_Q4_BLOCK: return VK_DT_Q4_BLOCK;
    case CQ_DTYPE_Q4_TILED: return VK_DT_Q4_TILED;
    case CQ_DTYPE_Q4TP: return VK_DT_Q4TP;
    default: return VK_DT_F32;
    }
}

/* Element counts and offsets travel as 32-bit words: buffers are at most maxStorageBufferRange bytes. */
/* `dt`: the activations' dtype code (VK_DT_F32/F16/BF16), the pipeline variant's CQ_XDT. */
static cq_status elementwise(cq_vk *c, cq_op op, cq_vk_shader sh, uint32_t dt, cq_vk_buf *const *bufs, int nb,
                             const void *push, uint32_t bytes, uint64_t n) {
    uint32_t gx, gy;
    CQ_TRY(cq_vk_grid(c, (n + 127) / 128, &gx, &gy));
    return cq_vk_dispatch_v(c, op, sh, CQ_VK_VARIANT(dt, 0), bufs, nb, push, bytes, gx, gy);
}

static cq_status per_row(cq_vk *c, cq_op op, cq_vk_shader sh, uint32_t dt, cq_vk_buf *const *bufs, int nb,
                         const void *push, uint32_t bytes, uint64_t rows) {
    uint32_t gx, gy;
    CQ_TRY(cq_vk_grid(c, rows, &gx, &gy));
    return cq_vk_dispatch_v(c, op, sh, CQ_VK_VARIANT(dt, 0), bufs, nb, push, bytes, gx, gy);
}

cq_status cq_vk_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t n, xo, yo, xdt, ydt;
    } p = {(uint32_t)cq_tensor_nelem(x), eo(x), eo(y), vdt(x->dtype), vdt(y->dtype)};
    cq_vk_buf *b[] = {B(x), B(y)};
    /* a 16-bit output: one invocation per 32-bit word it touches */
    uint64_t work = p.ydt == VK_DT_F32 ? p.n : (uint64_t)(p.yo + p.n + 1) / 2 - p.yo / 2;
    return elementwise(c, CQ_OP_COPY, CQ_VK_SH_copy, 0, b, 2, &p, sizeof p, work);
}

cq_status cq_vk_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t n, xo, yo, fn;
        float alpha, beta;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_nelem(x), eo(x), eo(y), (uint32_t)fn, alpha, beta, vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(y)};
    return elementwise(c, CQ_OP_UNARY, CQ_VK_SH_unary, p.dt, b, 2, &p, sizeof p, p.n);
}

cq_status cq_vk_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *bt, cq_binary fn) {
    cq_vk *c = cq_vk_of(be);
    uint64_t n = (uint64_t)cq_tensor_nelem(a);
    struct {
        uint32_t n, ao, bo, yo, cols, bcast, fn, dt;
    } p = {(uint32_t)n, eo(a), eo(bt), eo(y), (uint32_t)cq_tensor_cols(a), (uint64_t)cq_tensor_nelem(bt) != n,
           (uint32_t)fn, vdt(a->dtype)};
    cq_vk_buf *b[] = {B(a), B(bt), B(y)};
    return elementwise(c, CQ_OP_BINARY, CQ_VK_SH_binary, p.dt, b, 3, &p, sizeof p, n);
}

cq_status cq_vk_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t n, xo, go, yo, cols, has_gate, dt;
    } p = {(uint32_t)cq_tensor_nelem(x), eo(x),          eo(gate),       eo(y), (uint32_t)cq_tensor_cols(x),
           gate != NULL,                 vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(gate), B(y)};
    return elementwise(c, CQ_OP_GATED_ADD, CQ_VK_SH_gated_add, p.dt, b, 3, &p, sizeof p, p.n);
}

cq_status cq_vk_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *bt) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t n, ao, bo, yo, F, fused, dt;
    } p = {(uint32_t)cq_tensor_nelem(y), eo(a), eo(bt), eo(y), (uint32_t)cq_tensor_cols(y), bt == NULL,
           vdt(a->dtype)};
    cq_vk_buf *b[] = {B(a), B(bt), B(y)};
    return elementwise(c, CQ_OP_SWIGLU, CQ_VK_SH_swiglu, p.dt, b, 3, &p, sizeof p, p.n);
}

cq_status cq_vk_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t rows, cols, xo, yo;
        float scale;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_rows(x), (uint32_t)cq_tensor_cols(x), eo(x), eo(y), scale != 0.0f ? scale : 1.0f,
           vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(y)};
    return per_row(c, CQ_OP_SOFTMAX, CQ_VK_SH_softmax, p.dt, b, 2, &p, sizeof p, p.rows);
}

cq_status cq_vk_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                        bool zero_centered, float eps) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t rows, cols, xo, yo, wo, bo, has_w, has_b, zc;
        float eps;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_rows(x),
           (uint32_t)cq_tensor_cols(x),
           eo(x),
           eo(y),
           eo(w),
           eo(bias),
           w != NULL,
           bias != NULL,
           zero_centered,
           eps,
           vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(w), B(bias), B(y)};
    return per_row(c, CQ_OP_RMSNORM, CQ_VK_SH_rmsnorm, p.dt, b, 4, &p, sizeof p, p.rows);
}

cq_status cq_vk_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                          const cq_tensor *shift, float eps) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t rows, cols, xo, yo, so, to, has_s, has_t;
        float eps;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_rows(x),
           (uint32_t)cq_tensor_cols(x),
           eo(x),
           eo(y),
           eo(scale),
           eo(shift),
           scale != NULL,
           shift != NULL,
           eps,
           vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(scale), B(shift), B(y)};
    return per_row(c, CQ_OP_LAYERNORM, CQ_VK_SH_layernorm, p.dt, b, 4, &p, sizeof p, p.rows);
}

cq_status cq_vk_matmul(cq_backend *be, const cq_matmul_args *a) {
    cq_vk *c = cq_vk_of(be);
    const uint32_t M = (uint32_t)cq_tensor_rows(a->x), K = (uint32_t)cq_tensor_cols(a->x),
                   N = (uint32_t)cq_tensor_cols(a->y);
    struct {
        uint32_t M, N, K, xo, yo, wo, w2o, bo, b2o, go, wdt, w2dt, act, flags;
        float scale;
        uint32_t op, seq, wrows, w2rows, xdt, ydt;
    } p = {M,
           N,
           K,
           eo(a->x),
           eo(a->y),
           eo(a->w),
           eo(a->w2),
           eo(a->bias),
           eo(a->bias2),
           eo(a->gate),
           vdt(a->w->dtype),
           a->w2 ? vdt(a->w2->dtype) : 0,
           (uint32_t)a->act,
           (a->bias ? 1u : 0u) | (a->bias2 ? 2u : 0u) | (a->gate ? 4u : 0u) | (a->accumulate ? 8u : 0u) |
               (a->w2 ? 16u : 0u),
           a->scale,
           CQ_OP_MATMUL,
           c->seq + 1,
           (uint32_t)a->w->shape[0],
           a->w2 ? (uint32_t)a->w2->shape[0] : 0,
           vdt(a->x->dtype),
           vdt(a->y->dtype)};
    _Static_assert(CQ_ACT_NONE == 0 && CQ_ACT_GELU_TANH == 1 && CQ_ACT_SILU == 2 && CQ_ACT_SWIGLU == 3,
                   "matmul.comp numbers the activations as ops.h");
    CQ_TRY(weight_ok(c, "matmul", a->w));
    if (a->w2) CQ_TRY(weight_ok(c, "matmul", a->w2));
    cq_vk_buf *e2 = exp2_for(c, a->w) ? c->exp2 : exp2_for(c, a->w2);
    /* binding 7 is the status words' (CQ_VK_STATUS_BINDING), 8 the exp2 table's */
    cq_vk_buf *b[] = {B(a->x), B(a->y), B(a->w), B(a->w2), B(a->bias), B(a->bias2), B(a->gate), NULL, e2};
    _Static_assert(CQ_VK_EXP2_BINDING == 8, "the exp2 table is the last binding");
    uint32_t gx = (N + 15) / 16, gy = (M + 15) / 16;
    return cq_vk_dispatch_v(c, CQ_OP_MATMUL, CQ_VK_SH_matmul, CQ_VK_VARIANT(p.xdt, p.ydt), b, 9, &p, sizeof p, gx, gy);
}

cq_status cq_vk_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    cq_vk *c = cq_vk_of(be);
    const uint32_t n = (uint32_t)cq_tensor_nelem(ids), C = (uint32_t)cq_tensor_cols(y);
    struct {
        uint32_t n, C, V, wo, io, yo, wdt, op, seq, ydt;
    } p = {n,   C, (uint32_t)w->shape[0], eo(w), eo(ids), eo(y), vdt(w->dtype), CQ_OP_GET_ROWS, c->seq + 1,
           vdt(y->dtype)};
    CQ_TRY(weight_ok(c, "get_rows", w));
    cq_vk_buf *b[] = {B(w), B(ids), B(y), NULL, NULL, NULL, NULL, NULL, exp2_for(c, w)};
    return elementwise(c, CQ_OP_GET_ROWS, CQ_VK_SH_get_rows, p.ydt, b, 9, &p, sizeof p, (uint64_t)n * C);
}

cq_status cq_vk_attention(cq_backend *be, const cq_attn_args *a) {
    cq_vk *c = cq_vk_of(be);
    const uint32_t Nq = (uint32_t)cq_tensor_rows(a->q);
    struct {
        uint32_t Nq, Hq, Hkv, D, P, Nk, qo, kpo, vpo, ko, vo, viso, oo, has_vis, causal, visloo, has_vis_lo;
        float scale;
        uint32_t dt;
    } p = {Nq,
           (uint32_t)a->n_heads,
           (uint32_t)a->n_kv_heads,
           (uint32_t)a->head_dim,
           a->k_prefix ? (uint32_t)cq_tensor_rows(a->k_prefix) : 0,
           a->k ? (uint32_t)cq_tensor_rows(a->k) : 0,
           eo(a->q),
           eo(a->k_prefix),
           eo(a->v_prefix),
           eo(a->k),
           eo(a->v),
           eo(a->vis),
           eo(a->o),
           a->vis != NULL,
           a->causal,
           eo(a->vis_lo),
           a->vis_lo != NULL,
           a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->head_dim)),
           vdt(a->q->dtype)};
    cq_vk_buf *b[] = {B(a->q), B(a->k_prefix), B(a->v_prefix), B(a->k), B(a->v), B(a->vis), B(a->o), NULL, B(a->vis_lo)};
    /* binding 7 is the status words' (CQ_VK_STATUS_BINDING) */
    return per_row(c, CQ_OP_ATTENTION, CQ_VK_SH_attention, p.dt, b, 9, &p, sizeof p,
                   (uint64_t)Nq * (uint64_t)a->n_heads);
}

cq_status cq_vk_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                             const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim) {
    cq_vk *c = cq_vk_of(be);
    _Static_assert(CQ_ROPE_NONE == 0 && CQ_ROPE_INTERLEAVED == 1 && CQ_ROPE_HALF == 2,
                   "qk_norm_rope.comp numbers the modes as ops.h");
    const uint32_t N = (uint32_t)cq_tensor_rows(t);
    struct {
        uint32_t N, H, D, rd, to, wo, co, so, has_w, mode;
        float eps;
        uint32_t dt;
    } p = {N,
           (uint32_t)n_heads,
           (uint32_t)head_dim,
           (uint32_t)(rope_dim ? rope_dim : head_dim),
           eo(t),
           eo(w),
           eo(cos_t),
           eo(sin_t),
           w != NULL,
           (uint32_t)mode,
           eps,
           vdt(t->dtype)};
    cq_vk_buf *b[] = {B(t), B(w), B(cos_t), B(sin_t)};
    return per_row(c, CQ_OP_QK_NORM_ROPE, CQ_VK_SH_qk_norm_rope, p.dt, b, 4, &p, sizeof p,
                   (uint64_t)N * (uint64_t)n_heads);
}

/* move.comp: one invocation per output element; mode and shape words as the shader documents. */
typedef struct move_push {
    uint32_t mode, n, xo, x2o, io, yo, a, b, c, d, op, seq;
    float scale;
    uint32_t dt;
} move_push;

static cq_status move(cq_backend *be, cq_op op, move_push p, const cq_tensor *y, const cq_tensor *x,
                      const cq_tensor *x2, const cq_tensor *idx) {
    cq_vk *c = cq_vk_of(be);
    p.n = (uint32_t)cq_tensor_nelem(y);
    p.xo = eo(x);
    p.x2o = eo(x2);
    p.io = eo(idx);
    p.yo = eo(y);
    p.op = (uint32_t)op;
    p.seq = c->seq + 1;
    p.dt = vdt(x->dtype);
    cq_vk_buf *b[] = {B(x), B(x2), B(idx), B(y)};
    return elementwise(c, op, CQ_VK_SH_move, p.dt, b, 4, &p, sizeof p, p.n);
}

cq_status cq_vk_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    move_push p = {.mode = 0, .a = (uint32_t)cq_tensor_rows(x), .b = (uint32_t)cq_tensor_cols(x)};
    return move(be, CQ_OP_TRANSPOSE, p, y, x, NULL, NULL);
}

cq_status cq_vk_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    move_push p = {.mode = 1,
                   .a = (uint32_t)cq_tensor_rows(a),
                   .b = (uint32_t)cq_tensor_cols(a),
                   .c = (uint32_t)cq_tensor_cols(b)};
    return move(be, CQ_OP_CONCAT_COLS, p, y, a, b, NULL);
}

cq_status cq_vk_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    move_push p = {.mode = 2, .a = (uint32_t)H, .b = (uint32_t)W, .c = (uint32_t)f, .d = (uint32_t)cq_tensor_cols(x)};
    return move(be, CQ_OP_UPSAMPLE_NEAREST, p, y, x, NULL, NULL);
}

cq_status cq_vk_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    move_push p = {.mode = 3, .a = (uint32_t)H, .b = (uint32_t)W, .c = (uint32_t)r, .d = (uint32_t)cq_tensor_cols(y)};
    return move(be, CQ_OP_PIXEL_SHUFFLE, p, y, x, NULL, NULL);
}

cq_status cq_vk_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    move_push p = {.mode = 4, .a = (uint32_t)H, .b = (uint32_t)W, .c = (uint32_t)r, .d = (uint32_t)cq_tensor_cols(x)};
    return move(be, CQ_OP_PIXEL_UNSHUFFLE, p, y, x, NULL, NULL);
}

cq_status cq_vk_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                            float scale) {
    move_push p = {.mode = 5,
                   .a = (uint32_t)cq_tensor_cols(x),
                   .b = (uint32_t)cq_tensor_cols(y),
                   .c = (uint32_t)group,
                   .scale = scale != 0.0f ? scale : 1.0f};
    return move(be, CQ_OP_GATHER_COLS, p, y, x, NULL, idx);
}

cq_status cq_vk_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                          const cq_tensor *beta, float eps) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t R, C, groups, xo, yo, go, bo, has_g, has_b;
        float eps;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_rows(x),
           (uint32_t)cq_tensor_cols(x),
           (uint32_t)groups,
           eo(x),
           eo(y),
           eo(gamma),
           eo(beta),
           gamma != NULL,
           beta != NULL,
           eps,
           vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(gamma), B(beta), B(y)};
    return per_row(c, CQ_OP_GROUPNORM, CQ_VK_SH_groupnorm, p.dt, b, 4, &p, sizeof p, (uint64_t)groups);
}

cq_status cq_vk_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block) {
    cq_vk *c = cq_vk_of(be);
    const uint64_t nb = (uint64_t)cq_tensor_rows(x) / (uint64_t)block;
    struct {
        uint32_t C, groups, block, nb, xo, mo, dt;
    } p = {(uint32_t)cq_tensor_cols(x), (uint32_t)groups, (uint32_t)block, (uint32_t)nb, eo(x), eo(m),
           vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(m)};
    return elementwise(c, CQ_OP_GROUP_MOMENTS, CQ_VK_SH_group_moments, p.dt, b, 2, &p, sizeof p, nb * (uint64_t)groups);
}

cq_status cq_vk_conv2d(cq_backend *be, const cq_conv2d_args *a) {
    cq_vk *c = cq_vk_of(be);
    _Static_assert(CQ_PAD_ZERO == 0 && CQ_PAD_REPLICATE == 1 && CQ_PAD_REFLECT == 2,
                   "conv2d.comp numbers the pad modes");
    const uint32_t Ho = (uint32_t)((a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1);
    const uint32_t Wo = (uint32_t)((a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1);
    struct {
        uint32_t H, W, Cin, Cout, kh, kw, sy, sx, pl, pt, Ho, Wo, mode, xo, yo, wo, bo, has_b, wdt, dt;
    } p = {(uint32_t)a->H,
           (uint32_t)a->W,
           (uint32_t)cq_tensor_cols(a->x),
           (uint32_t)a->w->shape[0],
           (uint32_t)a->kh,
           (uint32_t)a->kw,
           (uint32_t)a->stride_y,
           (uint32_t)a->stride_x,
           (uint32_t)a->pad_l,
           (uint32_t)a->pad_t,
           Ho,
           Wo,
           (uint32_t)a->mode,
           eo(a->x),
           eo(a->y),
           eo(a->w),
           eo(a->bias),
           a->bias != NULL,
           vdt(a->w->dtype),
           vdt(a->x->dtype)};
    CQ_TRY(weight_ok(c, "conv2d", a->w));
    cq_vk_buf *b[] = {B(a->x), B(a->w), B(a->bias), B(a->y), NULL, NULL, NULL, NULL, exp2_for(c, a->w)};
    return elementwise(c, CQ_OP_CONV2D, CQ_VK_SH_conv2d, p.dt, b, 9, &p, sizeof p, (uint64_t)Ho * Wo * p.Cout);
}

cq_status cq_vk_conv3d(cq_backend *be, const cq_conv3d_args *a) {
    cq_vk *c = cq_vk_of(be);
    const uint32_t To = (uint32_t)((a->T + a->pad_front + a->pad_back - a->kt) / a->stride_t + 1);
    const uint32_t Ho = (uint32_t)((a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1);
    const uint32_t Wo = (uint32_t)((a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1);
    struct {
        uint32_t T, H, W, Cin, Cout, kt, kh, kw, st, sy, sx, pf, pl, pt, To, Ho, Wo, mode, xo, yo, wo, bo, has_b, wdt,
            dt;
    } p = {(uint32_t)a->T,        (uint32_t)a->H,        (uint32_t)a->W,
           (uint32_t)cq_tensor_cols(a->x), (uint32_t)a->w->shape[0], (uint32_t)a->kt,
           (uint32_t)a->kh,       (uint32_t)a->kw,       (uint32_t)a->stride_t,
           (uint32_t)a->stride_y, (uint32_t)a->stride_x, (uint32_t)a->pad_front,
           (uint32_t)a->pad_l,    (uint32_t)a->pad_t,    To,
           Ho,                    Wo,                    (uint32_t)a->mode,
           eo(a->x),              eo(a->y),              eo(a->w),
           eo(a->bias),           a->bias != NULL,       vdt(a->w->dtype),
           vdt(a->x->dtype)};
    _Static_assert(sizeof p <= CQ_VK_PUSH_BYTES, "conv3d's push constants fit");
    CQ_TRY(weight_ok(c, "conv3d", a->w));
    cq_vk_buf *b[] = {B(a->x), B(a->w), B(a->bias), B(a->y), NULL, NULL, NULL, NULL, exp2_for(c, a->w)};
    /* quantized kernels have a shader of their own, so the float kernels' loop keeps its plain loads */
    const bool q = quantized(a->w->dtype);
    return elementwise(c, CQ_OP_CONV3D, q ? CQ_VK_SH_conv3dq : CQ_VK_SH_conv3d, p.dt, b, q ? 9 : 4, &p, sizeof p,
                       (uint64_t)To * Ho * Wo * p.Cout);
}

cq_status cq_vk_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph,
                                 int pw) {
    cq_vk *c = cq_vk_of(be);
    (void)T;
    struct {
        uint32_t n, H, W, C, pt, ph, pw, xo, yo, dt;
    } p = {(uint32_t)cq_tensor_nelem(y), (uint32_t)H, (uint32_t)W, (uint32_t)cq_tensor_cols(y), (uint32_t)pt,
           (uint32_t)ph, (uint32_t)pw, eo(x), eo(y), vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(y)};
    return elementwise(c, CQ_OP_DEPTH_TO_SPACE3D, CQ_VK_SH_d2s3, p.dt, b, 2, &p, sizeof p, p.n);
}

static cq_status vk_conv1(cq_backend *be, const cq_conv1d_args *a, bool tr) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t L, Cin, Cout, k, stride, dil, groups, pl, mode, Lo, tr, xo, yo, wo, bo, has_b, wdt, dt;
    } p = {(uint32_t)cq_tensor_rows(a->x), (uint32_t)cq_tensor_cols(a->x), (uint32_t)cq_tensor_cols(a->y),
           (uint32_t)a->k, (uint32_t)a->stride, (uint32_t)a->dilation, (uint32_t)a->groups, (uint32_t)a->pad_l,
           (uint32_t)a->mode, (uint32_t)cq_tensor_rows(a->y), tr, eo(a->x), eo(a->y), eo(a->w), eo(a->bias),
           a->bias != NULL, vdt(a->w->dtype), vdt(a->x->dtype)};
    CQ_TRY(weight_ok(c, tr ? "conv_transpose1d" : "conv1d", a->w));
    cq_vk_buf *b[] = {B(a->x), B(a->w), B(a->bias), B(a->y), NULL, NULL, NULL, NULL, exp2_for(c, a->w)};
    const bool q = quantized(a->w->dtype);
    return elementwise(c, tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D, q ? CQ_VK_SH_conv1dq : CQ_VK_SH_conv1d, p.dt, b,
                       q ? 9 : 4, &p, sizeof p,
                       (uint64_t)p.Lo * p.Cout);
}

cq_status cq_vk_conv1d(cq_backend *be, const cq_conv1d_args *a) { return vk_conv1(be, a, false); }

cq_status cq_vk_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) { return vk_conv1(be, a, true); }

cq_status cq_vk_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta,
                      bool logscale, float eps) {
    cq_vk *c = cq_vk_of(be);
    struct {
        uint32_t n, C, xo, yo, ao, bo, has_b, logscale;
        float eps;
        uint32_t dt;
    } p = {(uint32_t)cq_tensor_nelem(x), (uint32_t)cq_tensor_cols(x), eo(x), eo(y), eo(alpha), eo(beta),
           beta != NULL, logscale, eps, vdt(x->dtype)};
    cq_vk_buf *b[] = {B(x), B(alpha), B(beta), B(y)};
    return elementwise(c, CQ_OP_SNAKE, CQ_VK_SH_snake, p.dt, b, 4, &p, sizeof p, p.n);
}
