/*
 * k_rows.cu — the row operations: LayerNorm with (1 + scale) / shift, RMSNorm
 * (plain or zero-centred weight, optional bias), per-head q/k RMSNorm + RoPE
 * in place, and softmax.
 *
 * One block per row (one warp per head for qk_norm_rope). Sums are taken in
 * double and the output formed in double, then rounded once, following the
 * reference (src/ops/ref.c) literally: these kernels are memory-bound, so
 * the wider arithmetic costs nothing measurable and keeps them within the
 * reference's own tolerances. Every thread writes only the elements it read,
 * so y == x (in place) is safe.
 */
#include "k_common.cuh"

enum { ROW_THREADS = 256 };

/* Sum over the block; every thread gets the result. `sh` holds 32 doubles. */
__device__ double block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads(); /* sh may still be read from a previous call */
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

__device__ double block_max(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) t = fmax(t, __shfl_xor_sync(0xffffffffu, t, o));
    return t;
}

/* ---- LayerNorm: biased variance, eps inside the root, ·(1 + scale) + shift ------------- */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) k_layernorm(void *y, const void *x, int64_t cols, const float *scale,
                                                           const float *shift, float eps) {
    __shared__ double sh[32];
    const int64_t o = (int64_t)blockIdx.x * cols;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += (double)cqk_ld<T>(x, o + c);
    const double mean = block_sum(s, sh) / (double)cols;
    double v = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        double d = (double)cqk_ld<T>(x, o + c) - mean;
        v += d * d;
    }
    const double inv = 1.0 / sqrt(block_sum(v, sh) / (double)cols + (double)eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        double r = ((double)cqk_ld<T>(x, o + c) - mean) * inv * (1.0 + (scale ? (double)scale[c] : 0.0)) +
                   (shift ? (double)shift[c] : 0.0);
        cqk_st<T>(y, o + c, (float)r);
    }
}

extern "C" cudaError_t cqk_layernorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                     const float *scale, const float *shift, float eps) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    CQK_DISPATCH(dt, T, { k_layernorm<T><<<(unsigned)rows, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps); });
    return cqk_launched();
}

/* ---- RMSNorm: x / rms · w (or · (w + 1)) + bias ------------------------------------------ */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) k_rmsnorm(void *y, const void *x, int64_t cols, const float *w,
                                                         const float *bias, int zero_centered, float eps) {
    __shared__ double sh[32];
    const int64_t o = (int64_t)blockIdx.x * cols;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        double v = (double)cqk_ld<T>(x, o + c);
        s += v * v;
    }
    const double inv = 1.0 / sqrt(block_sum(s, sh) / (double)cols + (double)eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        double wc = 1.0;
        if (w) wc = zero_centered ? 1.0 + (double)w[c] : (double)w[c];
        double r = (double)cqk_ld<T>(x, o + c) * inv * wc + (bias ? (double)bias[c] : 0.0);
        cqk_st<T>(y, o + c, (float)r);
    }
}

extern "C" cudaError_t cqk_rmsnorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                   const float *w, const float *bias, int zero_centered, float eps) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    CQK_DISPATCH(dt, T, {
        k_rmsnorm<T><<<(unsigned)rows, ROW_THREADS, 0, c->stream>>>(y, x, cols, w, bias, zero_centered, eps);
    });
    return cqk_launched();
}

/* ---- per-head RMSNorm + RoPE, in place ------------------------------------------------------
 * One warp per (row, head). Phase 1 reads the head to get its RMS; phase 2
 * rotates each pair (interleaved (2i, 2i+1) or half (i, i + rd/2)) and
 * normalises the unrotated tail. Each element belongs to exactly one pair or
 * the tail, so the lane that reads it is the lane that writes it. The normed
 * value is rounded to f32 before the rotation, as the model does. */
template <typename T>
__device__ __forceinline__ double normed(const void *t, int64_t base, int d, const float *w, double inv) {
    double v = (double)cqk_ld<T>(t, base + d);
    return w ? (double)(float)(v * inv * (double)w[d]) : v;
}

template <typename T>
__global__ void k_qk_norm_rope(void *t, int64_t N, int H, int D, const float *w, float eps, const float *cos_t,
                               const float *sin_t, int mode, int rd) {
    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (gw >= N * H) return; /* whole warps exit together */
    const int64_t n = gw / H;
    const int64_t base = gw * D;
    double inv = 1.0;
    if (w) {
        double ss = 0.0;
        for (int d = lane; d < D; d += 32) {
            double v = (double)cqk_ld<T>(t, base + d);
            ss += v * v;
        }
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        inv = 1.0 / sqrt(ss / (double)D + (double)eps);
    }
    __syncwarp();
    int tail = 0;
    if (mode != CQK_ROPE_NONE) {
        const int half = rd / 2;
        for (int i = lane; i < half; i += 32) {
            const double cs = cos_t[n * half + i], sn = sin_t[n * half + i];
            const int i0 = mode == CQK_ROPE_INTERLEAVED ? 2 * i : i;
            const int i1 = mode == CQK_ROPE_INTERLEAVED ? 2 * i + 1 : i + half;
            const double x0 = normed<T>(t, base, i0, w, inv), x1 = normed<T>(t, base, i1, w, inv);
            cqk_st<T>(t, base + i0, (float)(x0 * cs - x1 * sn));
            cqk_st<T>(t, base + i1, (float)(x0 * sn + x1 * cs));
        }
        tail = rd;
    }
    for (int d = tail + lane; d < D; d += 32) cqk_st<T>(t, base + d, (float)normed<T>(t, base, d, w, inv));
}

extern "C" cudaError_t cqk_qk_norm_rope(const cqk_ctx *c, void *t, int dt, int64_t N, int H, int D, const float *w,
                                        float eps, const float *cos_t, const float *sin_t, int mode, int rope_dim) {
    if (N <= 0 || H <= 0 || D <= 0) return cudaSuccess;
    if (mode != CQK_ROPE_NONE && (!cos_t || !sin_t || rope_dim < 2 || rope_dim > D || rope_dim % 2))
        return cudaErrorInvalidValue;
    const int64_t threads = N * H * 32;
    const int64_t blocks = (threads + ROW_THREADS - 1) / ROW_THREADS;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    CQK_DISPATCH(dt, T, {
        k_qk_norm_rope<T><<<(unsigned)blocks, ROW_THREADS, 0, c->stream>>>(t, N, H, D, w, eps, cos_t, sin_t, mode,
                                                                           rope_dim);
    });
    return cqk_launched();
}

/* ---- softmax of x·scale over each row ------------------------------------------------------ */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) k_softmax(void *y, const void *x, int64_t cols, double s) {
    __shared__ double sh[32];
    const int64_t o = (int64_t)blockIdx.x * cols;
    double mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = fmax(mx, s * (double)cqk_ld<T>(x, o + c));
    mx = block_max(mx, sh);
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(s * (double)cqk_ld<T>(x, o + c) - mx);
    sum = block_sum(sum, sh);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        cqk_st<T>(y, o + c, (float)(exp(s * (double)cqk_ld<T>(x, o + c) - mx) / sum));
}

extern "C" cudaError_t cqk_softmax(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                   float scale) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    double s = scale != 0.0f ? (double)scale : 1.0;
    CQK_DISPATCH(dt, T, { k_softmax<T><<<(unsigned)rows, ROW_THREADS, 0, c->stream>>>(y, x, cols, s); });
    return cqk_launched();
}
