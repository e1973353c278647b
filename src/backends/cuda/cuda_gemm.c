/*
 * cuda_gemm.c — the matmul op: cuBLASLt f16 GEMMs with f32 accumulation,
 * then this backend's epilogue kernel.
 *
 * Operands are f16 with a power-of-two scale per row (the range guard,
 * cuda_kernels.h): a bound weight is its plane (a COMPACT one expanded into
 * that plane in its operand's slot first, cuda_weights.c); an activation operand (x, or
 * a W that is an activation) is staged into scratch by one kernel that finds
 * each row's absmax and writes the scaled f16 row. f16 rather than bf16
 * because the golden checks need its 11-bit mantissa (cuda_weights.c).
 *
 * The GEMM (two for SwiGLU with separate weights, one over the fused
 * [gate; up] weight) writes f32 into scratch, and one kernel applies the
 * row scales, scale, bias, GELU-tanh / SiLU / SwiGLU, the gated
 * accumulation, the dtype of y and the non-finite check
 * (cqk_matmul_epilogue). The f32 round trip through scratch costs one extra
 * write and read of the output (with the staging, about a quarter of the
 * GEMM time in the 7B step). cuBLASLt cannot take it over: the column scales
 * need its per-column alpha vector, for which cuBLASLt 13.0 has no f16
 * algorithm on an H200 (tried: the heuristic returns nothing). On compute
 * capability 9.0 the GEMM of our own with the epilogue in registers
 * (k_gemm90.cu) runs the SwiGLU matmuls, where it is faster; on the plain
 * projections cuBLASLt's products gain back what the round trip costs (level
 * on q/k/v, ahead on the residual projections), so the staging and the
 * epilogue kernel are vectorized, and a staged x is reused by the next matmul
 * of the same x while nothing can have written it (cq_cuda.staged_x).
 *
 * Row-major y [M, N] = x [M, K] · W [N, K]ᵀ is cuBLASLt's column-major
 * C [N, M] = op(A) · op(B) with A = W seen as K x N (transposed: TRANSA = T)
 * and B = x seen as K x M (TRANSB = N): the "TN" layout tensor cores like.
 *
 * The cuBLASLt side (plans cached per shape, the algorithm chosen by timing
 * at a shape's first call) is cuda_gemm_lt.c. When cuBLASLt has no algorithm
 * or CORTIQ_CUDA_GEMM=simt, a CUDA-core kernel does the GEMM.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

/* ---- the GEMM ----------------------------------------------------------------------------------- */
/* D [M, N] (pitch ldd, F32 or BF16) = alpha · B Aᵀ + beta · D; A [N, K], B [M, K] f16. */
static cq_status gemm(cq_cuda *c, const cqk_ctx *k, const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                      void *D, int ddt, int64_t ldd, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    if (c->gemm_mode != 1) { /* auto, wgmma (where k_gemm90 does not run) and cublaslt */
        const cq_cuda_gemm_call g = {.A = A, .B = B, .D = D, .lda = lda, .ldb = ldb, .ldd = ldd, .M = M, .N = N,
                                     .K = K, .ddt = ddt, .alpha = alpha, .beta = beta};
        bool done = false;
        CQ_TRY(cq_cuda_lt_gemm(c, &g, &done));
        if (done) return CQ_OK;
    }
    cudaError_t e = cqk_gemm_simt(k, A, lda, B, ldb, D, ddt, ldd, M, N, K, alpha, beta);
    if (e != cudaSuccess) return cq_cuda_fail(e, "matmul", "the CUDA-core GEMM kernel");
    return CQ_OK;
}

/* ---- operands ---------------------------------------------------------------------------------- */
typedef struct operand {
    const uint16_t *p; /* f16 [rows, ld], rows scaled */
    int64_t ld;
    const float *scale; /* [rows] */
} operand;

static int64_t pitch8(int64_t k) { return (k + 7) / 8 * 8; }

/* The compact-weight slots of an operand's activation slots (X -> WX0, W1 -> WX1, W2 -> WX2): one pair per
 * operand, so the operands of one op never share a slot. */
static void weight_slots(cq_cuda_slot slot, cq_cuda_slot *ws, cq_cuda_slot *wss) {
    *ws = slot == CQ_CUDA_SLOT_X ? CQ_CUDA_SLOT_WX0 : slot == CQ_CUDA_SLOT_W2 ? CQ_CUDA_SLOT_WX2 : CQ_CUDA_SLOT_WX1;
    *wss = slot == CQ_CUDA_SLOT_X ? CQ_CUDA_SLOT_WX0S : slot == CQ_CUDA_SLOT_W2 ? CQ_CUDA_SLOT_WX2S : CQ_CUDA_SLOT_WX1S;
}

/* A [rows, K] matrix operand: a weight's plane (a COMPACT weight expanded into
 * its own slots), or an activation staged in `slot` (values) and `sslot` (row scales). */
static cq_status operand_of(cq_cuda *c, const cqk_ctx *k, const cq_tensor *t, const char *name, int64_t rows, int64_t K,
                            cq_cuda_slot slot, cq_cuda_slot sslot, operand *out) {
    if (t->flags & CQ_TENSOR_WEIGHT) {
        const cq_cuda_weight *w = t->impl;
        if (!w || (!w->plane && !w->packed))
            return cq_fail(CQ_ERR_INTERNAL, "cuda matmul: weight '%s' has no device plane", name);
        if (w->rows != rows || w->cols != K)
            return cq_fail(CQ_ERR_UNSUPPORTED,
                           "cuda matmul: weight '%s' was bound as [%lld, %lld] and is used as [%lld, %lld]; its plane has "
                           "one scale per bound row, so it cannot be reshaped", name, (long long)w->rows,
                           (long long)w->cols, (long long)rows, (long long)K);
        if (w->taps > 1)
            return cq_fail(CQ_ERR_UNSUPPORTED,
                           "cuda matmul: weight '%s' is a convolution kernel [Cout, Cin, kh, kw] (its device plane is "
                           "laid out for conv2d, tap by tap); to multiply by it, bind it as a 2-D tensor", name);
        cq_cuda_slot ws, wss;
        weight_slots(slot, &ws, &wss);
        CQ_TRY(cq_cuda_weight_operand(c, k, w, false, ws, wss, &out->p, &out->scale));
        out->ld = w->ld;
        return CQ_OK;
    }
    const int64_t ld = pitch8(K);
    const void *src = cq_cuda_ptr(t);
    const int dt = cq_cuda_kdt(t->dtype);
    const bool is_x = slot == CQ_CUDA_SLOT_X;
    /* x staged earlier (by a matmul of the same x or as its producer's side copy), with nothing written since:
     * every other op, upload, zeroing, allocation, recording and replay forgets it, a matmul's output never
     * overlaps its x, and a grown scratch slot changes the generation */
    if (is_x && c->staged_x.valid && c->staged_x.src == src && c->staged_x.rows == rows && c->staged_x.cols == K &&
        c->staged_x.dt == dt && c->staged_x.gen == c->scratch_gen) {
        out->p = c->staged_x.p;
        out->ld = c->staged_x.ld;
        out->scale = c->staged_x.scale;
        c->staged_reuses++;
        return CQ_OK;
    }
    void *dst = NULL, *sc = NULL;
    CQ_TRY(cq_cuda_scratch(c, slot, (size_t)rows * (size_t)ld * 2, &dst));
    CQ_TRY(cq_cuda_scratch(c, sslot, (size_t)rows * 4, &sc));
    cudaError_t e = cqk_stage_f16_rows(k, dst, ld, sc, src, dt, K, rows, K);
    if (e != cudaSuccess) return cq_cuda_fail(e, "matmul", "staging an operand as scaled f16 rows");
    if (is_x) cq_cuda_staged_set(c, src, rows, K, dt, dst, ld, sc);
    out->p = dst;
    out->ld = ld;
    out->scale = sc;
    return CQ_OK;
}

void cq_cuda_staged_set(cq_cuda *c, const void *src, int64_t rows, int64_t cols, int dt, const void *p, int64_t ld,
                        const void *scale) {
    c->staged_x.src = src, c->staged_x.rows = rows, c->staged_x.cols = cols, c->staged_x.dt = dt;
    c->staged_x.p = p, c->staged_x.ld = ld, c->staged_x.scale = scale;
    c->staged_x.gen = c->scratch_gen;
    c->staged_x.valid = true;
}

/* ---- the op ---------------------------------------------------------------------------------------- */
static cq_status matmul_run(cq_cuda *c, const cqk_ctx *k, const cq_matmul_args *a) {
    const int64_t M = cq_tensor_rows(a->x), K = cq_tensor_cols(a->x), N = cq_tensor_cols(a->y);
    const bool swiglu = a->act == CQ_ACT_SWIGLU, fused = swiglu && !a->w2;
    const int64_t Nw = fused ? 2 * N : N; /* rows of W */
    operand x, w1, w2 = {0};
    CQ_TRY(operand_of(c, k, a->x, "x", M, K, CQ_CUDA_SLOT_X, CQ_CUDA_SLOT_XS, &x));
    CQ_TRY(operand_of(c, k, a->w, "w", Nw, K, CQ_CUDA_SLOT_W1, CQ_CUDA_SLOT_W1S, &w1));
    if (swiglu && a->w2) CQ_TRY(operand_of(c, k, a->w2, "w2", N, K, CQ_CUDA_SLOT_W2, CQ_CUDA_SLOT_W2S, &w2));

    /* Hopper: the product and the epilogue in one persistent kernel (k_gemm90.cu) for SwiGLU by default, where
     * it pairs the gate and up products in one pass (7B step at 1024^2: 1.18 ms against 1.26 for cuBLASLt's two
     * GEMMs and the epilogue kernel); for every matmul with CORTIQ_CUDA_GEMM=wgmma (the plain projections are
     * level to 5 % behind cuBLASLt plus the epilogue kernel: docs/CUDA.md, Matmul) */
    const bool g90 = c->gemm_mode == 2 || (c->gemm_mode == 0 && swiglu);
    if (g90 && c->cc_major == 9 && c->cc_minor == 0 && c->smem_optin >= cqk_gemm90_smem()) {
        cqk_gemm90 g = {.x = x.p, .ldx = x.ld, .xscale = x.scale, .w1 = w1.p, .ldw1 = w1.ld, .ws1 = w1.scale,
                        .rows1 = Nw, .scale = a->scale != 0.0f ? a->scale : 1.0f, .act = (int)a->act,
                        .accumulate = a->accumulate, .y = cq_cuda_ptr(a->y), .ydt = cq_cuda_kdt(a->y->dtype),
                        .ldy = N, .M = M, .N = N, .K = K};
        g.bias = a->bias ? (const float *)cq_cuda_ptr(a->bias) : NULL;
        g.gate = a->gate ? (const float *)cq_cuda_ptr(a->gate) : NULL;
        if (swiglu && a->w2) {
            g.w2 = w2.p, g.ldw2 = w2.ld, g.ws2 = w2.scale;
            g.bias2 = a->bias2 ? (const float *)cq_cuda_ptr(a->bias2) : NULL;
        } else if (fused) { /* the up half: rows [N, 2N) of W */
            g.w2 = w1.p + (size_t)N * (size_t)w1.ld, g.ldw2 = w1.ld, g.ws2 = w1.scale + N;
            g.bias2 = g.bias ? g.bias + N : NULL;
        }
        cudaError_t err = cqk_gemm90_run(k, &g);
        if (err == cudaSuccess) return CQ_OK;
        if (err != cudaErrorNotSupported) return cq_cuda_fail(err, "matmul", "the Hopper GEMM kernel");
        /* no tensor map for these operands: cuBLASLt below */
    }
    /* GEMMs into f32 scratch (16-byte rows), then the epilogue */
    const int64_t ldacc = (Nw + 3) / 4 * 4;
    const int n_acc = swiglu && a->w2 ? 2 : 1;
    float *acc = NULL;
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_ACC, (size_t)M * (size_t)ldacc * 4 * (size_t)n_acc, (void **)&acc));
    CQ_TRY(gemm(c, k, w1.p, w1.ld, x.p, x.ld, acc, CQK_F32, ldacc, M, Nw, K, 1.0f, 0.0f));
    cqk_epilogue e = {.acc1 = acc, .ld1 = ldacc, .xscale = x.scale, .wscale1 = w1.scale,
                      .scale = a->scale != 0.0f ? a->scale : 1.0f, .act = (int)a->act, .accumulate = a->accumulate,
                      .y = cq_cuda_ptr(a->y), .ydt = cq_cuda_kdt(a->y->dtype), .ldy = N, .M = M, .N = N};
    e.bias = a->bias ? (const float *)cq_cuda_ptr(a->bias) : NULL;
    e.gate = a->gate ? (const float *)cq_cuda_ptr(a->gate) : NULL;
    if (swiglu && a->w2) {
        float *acc2 = acc + (size_t)M * (size_t)ldacc;
        CQ_TRY(gemm(c, k, w2.p, w2.ld, x.p, x.ld, acc2, CQK_F32, ldacc, M, N, K, 1.0f, 0.0f));
        e.acc2 = acc2;
        e.ld2 = ldacc;
        e.wscale2 = w2.scale;
        e.bias2 = a->bias2 ? (const float *)cq_cuda_ptr(a->bias2) : NULL;
    } else if (fused) {
        e.acc2 = acc + N; /* the up half: columns [N, 2N), rows [N, 2N) of W */
        e.ld2 = ldacc;
        e.wscale2 = w1.scale + N;
        e.bias2 = e.bias ? e.bias + N : NULL;
    }
    cudaError_t err = cqk_matmul_epilogue(k, &e);
    if (err != cudaSuccess) return cq_cuda_fail(err, "matmul", "the epilogue kernel");
    return CQ_OK;
}

cq_status cq_cuda_matmul(cq_backend *be, const cq_matmul_args *a) {
    cq_cuda *c = cq_cuda_of(be);
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_MATMUL);
    cq_status s = matmul_run(c, &k, a);
    /* after a matmul the slot holds this call's x, which its y cannot overlap (ops_front.c refuses that), so
     * only a failed call (the staging may not have run) leaves it unknown */
    if (s != CQ_OK) c->staged_x.valid = false;
    cq_status e = cq_cuda_op_end(c, CQ_OP_MATMUL, cudaSuccess, "");
    return s != CQ_OK ? s : e;
}

/* ---- conv2d: the implicit matrix staged in bands of output pixels, then the matmul's GEMM and epilogue ------- */
/* Output pixels per band: the staged band and its f32 products within CONV_BAND_BYTES each. */
#define CONV_BAND_BYTES ((size_t)256 << 20)

static cq_status conv2d_run(cq_cuda *c, const cqk_ctx *k, const cq_conv2d_args *a) {
    const int64_t Cin = cq_tensor_cols(a->x), Cout = a->w->shape[0], K = Cin * a->kh * a->kw;
    const int64_t Ho = ((int64_t)a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1;
    const int64_t Wo = ((int64_t)a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1, M = Ho * Wo;
    /* a 4-D kernel bound on this backend has tap-major columns (cuda_weights.c), and so does every 1x1 kernel:
     * the fast staging; a 2-D weight or an activation W keeps PyTorch's order */
    const int khw = a->kh * a->kw;
    const cq_cuda_weight *cw = (a->w->flags & CQ_TENSOR_WEIGHT) ? a->w->impl : NULL;
    const bool taps =
        khw == 1 || (cw && (cw->plane || cw->packed) && cw->taps == khw && cw->rows == Cout && cw->cols == K);
    operand w;
    if (taps && khw > 1) { /* the kernel's tap-major plane, a COMPACT kernel expanded into it */
        CQ_TRY(cq_cuda_weight_operand(c, k, cw, true, CQ_CUDA_SLOT_WX1, CQ_CUDA_SLOT_WX1S, &w.p, &w.scale));
        w.ld = cw->ld;
    } else {
        CQ_TRY(operand_of(c, k, a->w, "w", Cout, K, CQ_CUDA_SLOT_W1, CQ_CUDA_SLOT_W1S, &w));
    }
    const int64_t ld = pitch8(K), ldacc = (Cout + 3) / 4 * 4;
    const size_t row_bytes = (size_t)CQ_MAX(ld * 2, ldacc * 4);
    const int64_t band = CQ_MAX((int64_t)1, CQ_MIN(M, (int64_t)(CONV_BAND_BYTES / row_bytes)));
    uint16_t *xs = NULL;
    float *sc = NULL, *acc = NULL;
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_X, (size_t)band * (size_t)ld * 2, (void **)&xs));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_XS, (size_t)band * 4, (void **)&sc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_ACC, (size_t)band * (size_t)ldacc * 4, (void **)&acc));
    const cqk_im2col g = {.x = cq_cuda_ptr(a->x), .xdt = cq_cuda_kdt(a->x->dtype), .H = a->H, .W = a->W, .Cin = Cin,
                          .Wo = Wo, .kh = a->kh, .kw = a->kw, .sy = a->stride_y, .sx = a->stride_x, .pad_t = a->pad_t,
                          .pad_l = a->pad_l, .mode = (int)a->mode};
    const int ydt = cq_cuda_kdt(a->y->dtype);
    const size_t yes = cq_act_dtype_size(a->y->dtype);
    for (int64_t m0 = 0; m0 < M; m0 += band) {
        const int64_t n = CQ_MIN(band, M - m0);
        cudaError_t e = cqk_stage_im2col_f16(k, xs, ld, sc, &g, m0, n, taps);
        if (e != cudaSuccess) return cq_cuda_fail(e, "conv2d", "staging the receptive fields as scaled f16 rows");
        CQ_TRY(gemm(c, k, w.p, w.ld, xs, ld, acc, CQK_F32, ldacc, n, Cout, K, 1.0f, 0.0f));
        cqk_epilogue ep = {.acc1 = acc, .ld1 = ldacc, .xscale = sc, .wscale1 = w.scale, .scale = 1.0f,
                           .act = CQ_ACT_NONE, .y = (uint8_t *)cq_cuda_ptr(a->y) + (size_t)m0 * (size_t)Cout * yes,
                           .ydt = ydt, .ldy = Cout, .M = n, .N = Cout};
        ep.bias = a->bias ? (const float *)cq_cuda_ptr(a->bias) : NULL;
        e = cqk_matmul_epilogue(k, &ep);
        if (e != cudaSuccess) return cq_cuda_fail(e, "conv2d", "the epilogue kernel");
    }
    return CQ_OK;
}

cq_status cq_cuda_conv2d(cq_backend *be, const cq_conv2d_args *a) {
    cq_cuda *c = cq_cuda_of(be);
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_CONV2D); /* forgets the staged matmul input: the band overwrites it */
    cq_status s = conv2d_run(c, &k, a);
    cq_status e = cq_cuda_op_end(c, CQ_OP_CONV2D, cudaSuccess, "");
    return s != CQ_OK ? s : e;
}

/* ---- conv3d and one-group conv1d: the same banded GEMM over a tap-major implicit matrix ------------------- */
/* The kernel's plane comes in PyTorch's column order (a 2-D or 3-D weight, bound or an activation: operand_of);
 * with several taps it is laid out tap-major into the W2 slot first (one pass over the kernel per call, small
 * beside the convolution), so that the staging copies whole input voxels (cqk_stage_im2col_f16, taps_first). */
cq_status cq_cuda_conv_gemm(cq_cuda *c, const cqk_ctx *k, const char *op, const cq_tensor *wt, const cq_tensor *bias,
                            cq_tensor *y, const cqk_im2col *g, int64_t M, int64_t Cout, int taps) {
    const int64_t K = g->Cin * taps;
    operand w;
    CQ_TRY(operand_of(c, k, wt, "w", Cout, K, CQ_CUDA_SLOT_W1, CQ_CUDA_SLOT_W1S, &w));
    if (taps > 1) {
        uint16_t *tp = NULL;
        CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W2, (size_t)Cout * (size_t)w.ld * 2, (void **)&tp));
        cudaError_t e = cqk_plane_taps_first(k, tp, w.p, Cout, K, w.ld, taps);
        if (e != cudaSuccess) return cq_cuda_fail(e, op, "laying the kernel out tap by tap");
        w.p = tp;
    }
    const int64_t ld = pitch8(K), ldacc = (Cout + 3) / 4 * 4;
    const size_t row_bytes = (size_t)CQ_MAX(ld * 2, ldacc * 4);
    const int64_t band = CQ_MAX((int64_t)1, CQ_MIN(M, (int64_t)(CONV_BAND_BYTES / row_bytes)));
    uint16_t *xs = NULL;
    float *sc = NULL, *acc = NULL;
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_X, (size_t)band * (size_t)ld * 2, (void **)&xs));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_XS, (size_t)band * 4, (void **)&sc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_ACC, (size_t)band * (size_t)ldacc * 4, (void **)&acc));
    const int ydt = cq_cuda_kdt(y->dtype);
    const size_t yes = cq_act_dtype_size(y->dtype);
    for (int64_t m0 = 0; m0 < M; m0 += band) {
        const int64_t n = CQ_MIN(band, M - m0);
        cudaError_t e = cqk_stage_im2col_f16(k, xs, ld, sc, g, m0, n, 1);
        if (e != cudaSuccess) return cq_cuda_fail(e, op, "staging the receptive fields as scaled f16 rows");
        CQ_TRY(gemm(c, k, w.p, w.ld, xs, ld, acc, CQK_F32, ldacc, n, Cout, K, 1.0f, 0.0f));
        cqk_epilogue ep = {.acc1 = acc, .ld1 = ldacc, .xscale = sc, .wscale1 = w.scale, .scale = 1.0f,
                           .act = CQ_ACT_NONE, .y = (uint8_t *)cq_cuda_ptr(y) + (size_t)m0 * (size_t)Cout * yes,
                           .ydt = ydt, .ldy = Cout, .M = n, .N = Cout};
        ep.bias = bias ? (const float *)cq_cuda_ptr(bias) : NULL;
        e = cqk_matmul_epilogue(k, &ep);
        if (e != cudaSuccess) return cq_cuda_fail(e, op, "the epilogue kernel");
    }
    return CQ_OK;
}

/* ---- attention through GEMMs: heads wider than the flash kernels take ---------------------------------- */
/* Per head: K staged as scaled f16 rows [T, D] (prefix rows, then own), V transposed and staged [D, T]; then per
 * band of queries S = Q·Kᵀ (f32, through the epilogue), softmax(S · scale) in place, P staged as scaled f16 rows and
 * O = P·V written into the head's columns of o. Only without a visibility rule (vis, causal): every query sees all
 * T keys. */
#define ATTN_BAND_BYTES ((size_t)128 << 20) /* a band's f32 scores */

static size_t elem_bytes(int dt) { return dt == CQK_F32 ? 4 : 2; }

/* [T, D] rows of head `kh` (prefix rows, then own) from a's K or V planes into a contiguous buffer */
static cudaError_t gather_head(cq_cuda *c, void *dst, const void *pre, const void *own, const cqk_attn *a, int kh) {
    const size_t es = elem_bytes(a->dt), row = (size_t)a->D * es, pitch = (size_t)a->Hkv * row;
    cudaError_t e = cudaSuccess;
    if (a->P > 0)
        e = cudaMemcpy2DAsync(dst, row, (const uint8_t *)pre + (size_t)kh * row, pitch, row, (size_t)a->P,
                              cudaMemcpyDeviceToDevice, c->stream);
    if (e == cudaSuccess && a->Nk > 0)
        e = cudaMemcpy2DAsync((uint8_t *)dst + (size_t)a->P * row, row, (const uint8_t *)own + (size_t)kh * row, pitch,
                              row, (size_t)a->Nk, cudaMemcpyDeviceToDevice, c->stream);
    return e;
}

cq_status cq_cuda_attention_gemm(cq_cuda *c, const cqk_ctx *k, const cqk_attn *a) {
    const int64_t T = a->P + a->Nk, D = a->D, ldD = pitch8(D), ldT = pitch8(T);
    const int64_t ldacc = CQ_MAX((T + 3) / 4 * 4, (D + 3) / 4 * 4);
    const size_t es = elem_bytes(a->dt);
    const int64_t band = CQ_MAX((int64_t)1, CQ_MIN(a->Nq, (int64_t)(ATTN_BAND_BYTES / ((size_t)T * 4))));
    uint16_t *xs, *ks, *vs;
    float *xsc, *ksc, *vsc, *acc, *sc;
    uint8_t *kv;
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_X, (size_t)band * (size_t)CQ_MAX(ldD, ldT) * 2, (void **)&xs));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_XS, (size_t)band * 4, (void **)&xsc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W1, (size_t)T * (size_t)ldD * 2, (void **)&ks));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W1S, (size_t)T * 4, (void **)&ksc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W2, (size_t)D * (size_t)ldT * 2, (void **)&vs));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W2S, (size_t)D * 4, (void **)&vsc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_ACC, (size_t)band * (size_t)ldacc * 4, (void **)&acc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_STAGE, (size_t)band * (size_t)T * 4, (void **)&sc));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_KV, 2 * (size_t)T * (size_t)D * es, (void **)&kv));
    const int64_t qw = (int64_t)a->Hq * D; /* q and o row pitch */
    cudaError_t e = cudaSuccess;
    const char *what = "";
    for (int h = 0; h < a->Hq && e == cudaSuccess; h++) {
        const int kh = h / (a->Hq / a->Hkv);
        if (h == 0 || kh != (h - 1) / (a->Hq / a->Hkv)) { /* a new kv head: stage its K and Vᵀ */
            uint8_t *vt = kv + (size_t)T * (size_t)D * es;
            what = "staging the head's keys and values";
            e = gather_head(c, kv, a->kp, a->k, a, kh);
            if (e == cudaSuccess) e = cqk_stage_f16_rows(k, ks, ldD, ksc, kv, a->dt, D, T, D);
            if (e == cudaSuccess) e = gather_head(c, kv, a->vp, a->v, a, kh);
            if (e == cudaSuccess) e = cqk_transpose(k, vt, kv, a->dt, T, D);
            if (e == cudaSuccess) e = cqk_stage_f16_rows(k, vs, ldT, vsc, vt, a->dt, T, D, T);
        }
        for (int64_t i0 = 0; i0 < a->Nq && e == cudaSuccess; i0 += band) {
            const int64_t n = CQ_MIN(band, a->Nq - i0);
            const uint8_t *q = (const uint8_t *)a->q + ((size_t)i0 * (size_t)qw + (size_t)h * (size_t)D) * es;
            what = "staging the queries";
            e = cqk_stage_f16_rows(k, xs, ldD, xsc, q, a->dt, qw, n, D);
            if (e != cudaSuccess) break;
            CQ_TRY(gemm(c, k, ks, ldD, xs, ldD, acc, CQK_F32, ldacc, n, T, D, 1.0f, 0.0f));
            cqk_epilogue s = {.acc1 = acc, .ld1 = ldacc, .xscale = xsc, .wscale1 = ksc, .scale = 1.0f,
                              .act = CQ_ACT_NONE, .y = sc, .ydt = CQK_F32, .ldy = T, .M = n, .N = T};
            what = "the scores";
            e = cqk_matmul_epilogue(k, &s);
            if (e == cudaSuccess) e = cqk_softmax(k, sc, sc, CQK_F32, n, T, a->scale);
            if (e == cudaSuccess) e = cqk_stage_f16_rows(k, xs, ldT, xsc, sc, CQK_F32, T, n, T);
            if (e != cudaSuccess) break;
            CQ_TRY(gemm(c, k, vs, ldT, xs, ldT, acc, CQK_F32, ldacc, n, D, T, 1.0f, 0.0f));
            cqk_epilogue o = {.acc1 = acc, .ld1 = ldacc, .xscale = xsc, .wscale1 = vsc, .scale = 1.0f,
                              .act = CQ_ACT_NONE, .y = (uint8_t *)a->o + ((size_t)i0 * (size_t)qw + (size_t)h * (size_t)D) * es,
                              .ydt = a->dt, .ldy = qw, .M = n, .N = D};
            what = "the output";
            e = cqk_matmul_epilogue(k, &o);
        }
    }
    if (e != cudaSuccess) return cq_cuda_fail(e, "attention", what);
    return CQ_OK;
}
