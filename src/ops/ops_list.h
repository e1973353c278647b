/*
 * ops_list.h — the one list of ops. Everything that has one entry per op is
 * generated from it: the cq_op enum and the name table (ops.h, ops.c), the
 * backend vtable's op members (backend.h), the reference implementation's
 * prototypes and the reference backend's wrappers (ref.h, ref_backend.c),
 * each backend's prototype block and vtable initialisers (CQ_OPS_DECLARE,
 * CQ_OPS_VTBL below), and a compile-time check that the documented public
 * prototypes in ops.h agree with the list (ops_front.c).
 *
 * X(ENUM, name, params, args, u):
 *   ENUM   the suffix of CQ_OP_<ENUM>;
 *   name   the op's name: cq_op_<name> (front end), vtable member <name>,
 *          cq_ref_<name> (reference), <prefix><name> in each backend;
 *   params the parameters after the backend, parenthesised;
 *   args   the same parameters' names, parenthesised;
 *   u      whatever the caller passed as CQ_OPS_LIST's second argument
 *          (a prefix, say), handed to every X.
 * The order is the enum's: append new ops at the end (op statistics are
 * indexed by it).
 *
 * Adding an op: a line here, its documented prototype in ops.h, its checks
 * in ops_front.c, its reference in ref.c, its host-copy fallback in
 * fallback.c, and in each backend either an implementation or a supports()
 * answer of false (the op then runs on the host backend).
 */
#ifndef CQ_OPS_LIST_H
#define CQ_OPS_LIST_H

#define CQ_OPS_LIST(X, u)                                                                                              \
    X(MATMUL, matmul, (const cq_matmul_args *a), (a), u)                                                               \
    X(ATTENTION, attention, (const cq_attn_args *a), (a), u)                                                           \
    X(LAYERNORM, layernorm,                                                                                            \
      (cq_tensor *y, const cq_tensor *x, const cq_tensor *scale, const cq_tensor *shift, float eps),                   \
      (y, x, scale, shift, eps), u)                                                                                    \
    X(RMSNORM, rmsnorm,                                                                                                \
      (cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias, bool zero_centered, float eps),    \
      (y, x, w, bias, zero_centered, eps), u)                                                                          \
    X(GROUPNORM, groupnorm,                                                                                            \
      (cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma, const cq_tensor *beta, float eps),        \
      (y, x, groups, gamma, beta, eps), u)                                                                             \
    X(QK_NORM_ROPE, qk_norm_rope,                                                                                      \
      (cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps, const cq_tensor *cos_t,                 \
       const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim),                                                       \
      (t, n_heads, head_dim, w, eps, cos_t, sin_t, mode, rope_dim), u)                                                 \
    X(UNARY, unary, (cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta),                          \
      (y, x, fn, alpha, beta), u)                                                                                      \
    X(BINARY, binary, (cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn), (y, a, b, fn), u)          \
    X(GATED_ADD, gated_add, (cq_tensor *y, const cq_tensor *x, const cq_tensor *gate), (y, x, gate), u)                \
    X(SWIGLU, swiglu, (cq_tensor *y, const cq_tensor *a, const cq_tensor *b), (y, a, b), u)                            \
    X(SOFTMAX, softmax, (cq_tensor *y, const cq_tensor *x, float scale), (y, x, scale), u)                             \
    X(COPY, copy, (cq_tensor *y, const cq_tensor *x), (y, x), u)                                                       \
    X(TRANSPOSE, transpose, (cq_tensor *y, const cq_tensor *x), (y, x), u)                                             \
    X(CONCAT_COLS, concat_cols, (cq_tensor *y, const cq_tensor *a, const cq_tensor *b), (y, a, b), u)                  \
    X(GET_ROWS, get_rows, (cq_tensor *y, const cq_tensor *w, const cq_tensor *ids), (y, w, ids), u)                    \
    X(CONV2D, conv2d, (const cq_conv2d_args *a), (a), u)                                                               \
    X(UPSAMPLE_NEAREST, upsample_nearest, (cq_tensor *y, const cq_tensor *x, int H, int W, int f), (y, x, H, W, f), u) \
    X(PIXEL_SHUFFLE, pixel_shuffle, (cq_tensor *y, const cq_tensor *x, int H, int W, int r), (y, x, H, W, r), u)       \
    X(PIXEL_UNSHUFFLE, pixel_unshuffle, (cq_tensor *y, const cq_tensor *x, int H, int W, int r), (y, x, H, W, r), u)   \
    X(GATHER_COLS, gather_cols, (cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group, float scale),      \
      (y, x, idx, group, scale), u)                                                                                    \
    X(GROUP_MOMENTS, group_moments, (cq_tensor *m, const cq_tensor *x, int groups, int block), (m, x, groups, block), u)        \
    X(CONV3D, conv3d, (const cq_conv3d_args *a), (a), u)                                                               \
    X(DEPTH_TO_SPACE3D, depth_to_space3d,                                                                              \
      (cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph, int pw), (y, x, T, H, W, pt, ph, pw), u)  \
    X(CONV1D, conv1d, (const cq_conv1d_args *a), (a), u)                                                               \
    X(CONV_TRANSPOSE1D, conv_transpose1d, (const cq_conv1d_args *a), (a), u)                                           \
    X(SNAKE, snake,                                                                                                    \
      (cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta, bool logscale, float eps),     \
      (y, x, alpha, beta, logscale, eps), u)

/* An op's parameter list with the backend in front: CQ_OP_PARAMS_BE P. */
#define CQ_OP_PARAMS_BE(...) (cq_backend * be, __VA_ARGS__)
/* The call arguments with the backend in front: CQ_OP_ARGS_BE A. */
#define CQ_OP_ARGS_BE(...) (be, __VA_ARGS__)

/* A backend's prototype block: cq_status <prefix><name>(cq_backend *be, ...); for every op. */
#define CQ_OP_DECLARE_ONE_(E, name, P, A, prefix) cq_status prefix##name CQ_OP_PARAMS_BE P;
#define CQ_OPS_DECLARE(prefix) CQ_OPS_LIST(CQ_OP_DECLARE_ONE_, prefix)
/* A backend's vtable initialisers: .<name> = <prefix><name>, for every op. */
#define CQ_OP_VTBL_ONE_(E, name, P, A, prefix) .name = prefix##name,
#define CQ_OPS_VTBL(prefix) CQ_OPS_LIST(CQ_OP_VTBL_ONE_, prefix)

#endif /* CQ_OPS_LIST_H */
