/*
 * ref.h — the plain-C reference implementation of every op, on host memory.
 *
 * Written for clarity and numerical care, not speed: activations are read
 * into f32 (from F32/F16/BF16), reductions accumulate in double, every
 * output is rounded once to its dtype. It is the oracle of the generic op
 * test and of every device backend, so it follows the model references'
 * definitions literally (see ops.h). Arguments are assumed validated by the
 * front end (ops_front.c); index values (vis, ids) are checked here.
 */
#ifndef CQ_OPS_REF_H
#define CQ_OPS_REF_H

#include "ops/backend.h"

/* Element access for host tensors of dtype F32/F16/BF16 (I32 read as a value). */
float cq_ref_load(const cq_tensor *t, int64_t i);
void cq_ref_store(cq_tensor *t, int64_t i, float v);
/* Rows [r0, r0+n) of a matrix operand read as [shape[0], nelem/shape[0]]:
 * weights in any codec (through codec.h) or float activations. */
cq_status cq_ref_matrix_rows(const cq_tensor *w, int64_t r0, int64_t n, float *out);

cq_status cq_ref_matmul(const cq_matmul_args *a);
cq_status cq_ref_attention(const cq_attn_args *a);
cq_status cq_ref_layernorm(cq_tensor *y, const cq_tensor *x, const cq_tensor *scale, const cq_tensor *shift, float eps);
cq_status cq_ref_rmsnorm(cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                         bool zero_centered, float eps);
cq_status cq_ref_groupnorm(cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma, const cq_tensor *beta,
                           float eps);
cq_status cq_ref_qk_norm_rope(cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                              const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim);
cq_status cq_ref_unary(cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta);
cq_status cq_ref_binary(cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn);
cq_status cq_ref_gated_add(cq_tensor *y, const cq_tensor *x, const cq_tensor *gate);
cq_status cq_ref_swiglu(cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
cq_status cq_ref_softmax(cq_tensor *y, const cq_tensor *x, float scale);
cq_status cq_ref_copy(cq_tensor *y, const cq_tensor *x);
cq_status cq_ref_transpose(cq_tensor *y, const cq_tensor *x);
cq_status cq_ref_concat_cols(cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
cq_status cq_ref_get_rows(cq_tensor *y, const cq_tensor *w, const cq_tensor *ids);
cq_status cq_ref_gather_cols(cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group, float scale);
cq_status cq_ref_conv2d(const cq_conv2d_args *a);
cq_status cq_ref_upsample_nearest(cq_tensor *y, const cq_tensor *x, int H, int W, int f);
cq_status cq_ref_pixel_shuffle(cq_tensor *y, const cq_tensor *x, int H, int W, int r);
cq_status cq_ref_pixel_unshuffle(cq_tensor *y, const cq_tensor *x, int H, int W, int r);

/* Scalar definitions shared with the fast kernels' tests. */
double cq_ref_gelu_tanh(double x); /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
double cq_ref_silu(double x);      /* x / (1 + exp(-x)) */

#endif /* CQ_OPS_REF_H */
