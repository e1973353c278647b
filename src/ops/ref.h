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

/* One per op of ops_list.h: cq_status cq_ref_<name>(<the op's parameters>). */
#define CQ_REF_DECLARE_(E, name, P, A, u) cq_status cq_ref_##name P;
CQ_OPS_LIST(CQ_REF_DECLARE_, _)
#undef CQ_REF_DECLARE_

/* Scalar definitions shared with the fast kernels' tests. */
double cq_ref_gelu_tanh(double x); /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
double cq_ref_silu(double x);      /* x / (1 + exp(-x)) */

#endif /* CQ_OPS_REF_H */
