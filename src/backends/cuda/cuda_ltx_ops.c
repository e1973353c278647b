/*
 * cuda_ltx_ops.c — the video VAE and vocoder ops: conv3d, depth_to_space3d, conv1d, conv_transpose1d, snake.
 *
 * conv3d and one-group conv1d are GEMMs, as conv2d is (cq_cuda_conv_gemm, cuda_gemm.c): the implicit matrix
 * of a band of output voxels is staged as scaled f16 rows in tap-major column order (each tap one whole input
 * voxel of Cin channels, the frame index clamped for the replicated frames, space padded by the mode), the
 * kernel's plane is laid out tap-major to match, and cuBLASLt multiplies them on the tensor cores with f32
 * accumulation; the epilogue applies the row scales and the bias. Grouped conv1d (the vocoder's depthwise
 * anti-aliasing filters) and conv_transpose1d run as direct kernels in f32 on a tap-major f32 copy of the
 * kernel (k_ltx.cu); depth_to_space3d and snake are element-wise kernels. docs/CUDA.md, "Video VAE and vocoder
 * ops".
 */
#include "backends/cuda/cuda_impl.h"

static const float *fptr(const cq_tensor *t) { return t ? (const float *)cq_cuda_ptr(t) : NULL; }

static cq_status conv3d_run(cq_cuda *c, const cqk_ctx *k, const cq_conv3d_args *a) {
    const int64_t To = ((int64_t)a->T + a->pad_front + a->pad_back - a->kt) / a->stride_t + 1;
    const int64_t Ho = ((int64_t)a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1;
    const int64_t Wo = ((int64_t)a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1;
    const int taps = a->kt * a->kh * a->kw;
    const cqk_im2col g = {.x = cq_cuda_ptr(a->x), .xdt = cq_cuda_kdt(a->x->dtype), .H = a->H, .W = a->W,
                          .Cin = cq_tensor_cols(a->x), .Wo = Wo, .kh = a->kh, .kw = a->kw, .sy = a->stride_y,
                          .sx = a->stride_x, .pad_t = a->pad_t, .pad_l = a->pad_l, .mode = (int)a->mode, .T = a->T,
                          .Ho = Ho, .kt = a->kt, .st = a->stride_t, .pad_f = a->pad_front, .dx = 1};
    return cq_cuda_conv_gemm(c, k, "conv3d", a->w, a->bias, a->y, &g, To * Ho * Wo, a->w->shape[0], taps);
}

cq_status cq_cuda_conv3d(cq_backend *be, const cq_conv3d_args *a) {
    cq_cuda *c = cq_cuda_of(be);
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_CONV3D);
    cq_status s = conv3d_run(c, &k, a);
    cq_status e = cq_cuda_op_end(c, CQ_OP_CONV3D, cudaSuccess, "");
    return s != CQ_OK ? s : e;
}

cq_status cq_cuda_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt,
                                   int ph, int pw) {
    cq_cuda *c = cq_cuda_of(be);
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_DEPTH_TO_SPACE3D);
    cudaError_t e = cqk_depth_to_space3d(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), cq_cuda_kdt(x->dtype), T, H, W,
                                         cq_tensor_cols(y), pt, ph, pw);
    return cq_cuda_op_end(c, CQ_OP_DEPTH_TO_SPACE3D, e, "the kernel");
}

/* The kernel w [R, M, k] (or [R, M*k]) as f32 [k][R][M] in the W2 slot: a bound weight from its plane (a
 * COMPACT one expanded first), an activation converted. */
static cq_status conv1d_weight(cq_cuda *c, const cqk_ctx *k, const char *op, const cq_tensor *w, int64_t R, int64_t M,
                               int taps, float **out) {
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_W2, (size_t)(R * M * taps) * sizeof(float), (void **)out));
    cudaError_t e;
    if (w->flags & CQ_TENSOR_WEIGHT) {
        const cq_cuda_weight *cw = w->impl;
        if (!cw || (!cw->plane && !cw->packed))
            return cq_fail(CQ_ERR_INTERNAL, "cuda %s: the weight has no device plane", op);
        if (cw->rows != R || cw->cols != M * taps || cw->taps > 1)
            return cq_fail(CQ_ERR_UNSUPPORTED, "cuda %s: the weight was bound as [%lld, %lld], used as [%lld, %lld]", op,
                           (long long)cw->rows, (long long)cw->cols, (long long)R, (long long)(M * taps));
        const uint16_t *plane;
        const float *rs;
        CQ_TRY(cq_cuda_weight_operand(c, k, cw, false, CQ_CUDA_SLOT_WX1, CQ_CUDA_SLOT_WX1S, &plane, &rs));
        e = cqk_conv1d_weight_f32(k, *out, NULL, CQK_F32, plane, cw->ld, rs, R, M, taps);
    } else {
        e = cqk_conv1d_weight_f32(k, *out, cq_cuda_ptr(w), cq_cuda_kdt(w->dtype), NULL, 0, NULL, R, M, taps);
    }
    if (e != cudaSuccess) return cq_cuda_fail(e, op, "the kernel's f32 copy");
    return CQ_OK;
}

static cq_status conv1d_run(cq_cuda *c, const cqk_ctx *k, const cq_conv1d_args *a, bool tr) {
    const char *op = tr ? "conv_transpose1d" : "conv1d";
    const cqk_conv1d p = {.L = cq_tensor_rows(a->x), .Cin = cq_tensor_cols(a->x), .Cout = cq_tensor_cols(a->y),
                          .Lo = cq_tensor_rows(a->y), .k = a->k, .stride = a->stride, .dilation = a->dilation,
                          .G = a->groups, .pad_l = a->pad_l, .mode = (int)a->mode};
    const int dt = cq_cuda_kdt(a->x->dtype);
    if (!tr && a->groups == 1) { /* a GEMM: a conv3d of one frame and one row, dilated along it */
        const cqk_im2col g = {.x = cq_cuda_ptr(a->x), .xdt = dt, .H = 1, .W = p.L, .Cin = p.Cin, .Wo = p.Lo,
                              .kh = 1, .kw = a->k, .sy = 1, .sx = a->stride, .pad_t = 0, .pad_l = a->pad_l,
                              .mode = (int)a->mode, .T = 1, .Ho = 1, .kt = 1, .st = 1, .pad_f = 0,
                              .dx = a->dilation};
        return cq_cuda_conv_gemm(c, k, op, a->w, a->bias, a->y, &g, p.Lo, p.Cout, a->k);
    }
    float *wt = NULL;
    if (tr) CQ_TRY(conv1d_weight(c, k, op, a->w, p.Cin, p.Cout / p.G, a->k, &wt));
    else CQ_TRY(conv1d_weight(c, k, op, a->w, p.Cout, p.Cin / p.G, a->k, &wt));
    cudaError_t e = tr ? cqk_conv_transpose1d(k, cq_cuda_ptr(a->y), cq_cuda_ptr(a->x), dt, wt, fptr(a->bias), &p)
                       : cqk_conv1d_direct(k, cq_cuda_ptr(a->y), cq_cuda_ptr(a->x), dt, wt, fptr(a->bias), &p);
    if (e != cudaSuccess) return cq_cuda_fail(e, op, "the kernel");
    return CQ_OK;
}

static cq_status conv1d_op(cq_backend *be, const cq_conv1d_args *a, bool tr) {
    cq_cuda *c = cq_cuda_of(be);
    const cq_op op = tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D;
    cqk_ctx k = cq_cuda_op_begin(c, op);
    cq_status s = conv1d_run(c, &k, a, tr);
    cq_status e = cq_cuda_op_end(c, op, cudaSuccess, "");
    return s != CQ_OK ? s : e;
}

cq_status cq_cuda_conv1d(cq_backend *be, const cq_conv1d_args *a) { return conv1d_op(be, a, false); }

cq_status cq_cuda_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) { return conv1d_op(be, a, true); }

cq_status cq_cuda_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha,
                        const cq_tensor *beta, bool logscale, float eps) {
    cq_cuda *c = cq_cuda_of(be);
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_SNAKE);
    cudaError_t e = cqk_snake(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), cq_cuda_kdt(x->dtype), cq_tensor_rows(x),
                              cq_tensor_cols(x), fptr(alpha), fptr(beta), logscale, eps);
    return cq_cuda_op_end(c, CQ_OP_SNAKE, e, "the kernel");
}
