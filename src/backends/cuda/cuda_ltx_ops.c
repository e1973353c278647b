/*
 * cuda_ltx_ops.c — the video VAE and vocoder ops (conv3d, depth_to_space3d,
 * conv1d, conv_transpose1d, snake) have no CUDA kernels yet: supports() says
 * false for them, so the front end runs them on the host backend with the
 * operands copied across (fallback.c). These entries complete the vtable and
 * take the same route should anything call them directly.
 */
#include "backends/cuda/cuda_impl.h"
#include "ops/fallback.h"

cq_status cq_cuda_conv3d(cq_backend *be, const cq_conv3d_args *a) { return cq_fallback_conv3d(be, a); }

cq_status cq_cuda_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt,
                                   int ph, int pw) {
    return cq_fallback_depth_to_space3d(be, y, x, T, H, W, pt, ph, pw);
}

cq_status cq_cuda_conv1d(cq_backend *be, const cq_conv1d_args *a) { return cq_fallback_conv1d(be, a); }

cq_status cq_cuda_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) {
    return cq_fallback_conv_transpose1d(be, a);
}

cq_status cq_cuda_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha,
                        const cq_tensor *beta, bool logscale, float eps) {
    return cq_fallback_snake(be, y, x, alpha, beta, logscale, eps);
}
