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
/* VEC: four columns per access (cols, both pointers and the scale/shift vectors in whole groups of four);
 * the sums then run over a different partition of the row, the arithmetic per element is the same. */
template <typename T, bool VEC>
__global__ void __launch_bounds__(ROW_THREADS) k_layernorm(void *y, const void *x, int64_t cols, const float *scale,
                                                           const float *shift, float eps) {
    __shared__ double sh[32];
    const int64_t o = (int64_t)blockIdx.x * cols;
    const T *xr = (const T *)x + o;
    T *yr = (T *)y + o;
    constexpr int W = VEC ? 4 : 1;
    const int64_t c0 = (int64_t)threadIdx.x * W, step = (int64_t)blockDim.x * W;
    auto load = [&](int64_t c, double (&v)[W]) {
        if (VEC) {
            const float4 t = cqk_io<T>::ld4(xr, c);
            v[0] = t.x, v[1 % W] = t.y, v[2 % W] = t.z, v[3 % W] = t.w;
        } else {
            v[0] = (double)cqk_io<T>::ld(xr, c);
        }
    };
    double s = 0.0;
    for (int64_t c = c0; c < cols; c += step) {
        double v[W];
        load(c, v);
        for (int q = 0; q < W; q++) s += v[q];
    }
    const double mean = block_sum(s, sh) / (double)cols;
    double var = 0.0;
    for (int64_t c = c0; c < cols; c += step) {
        double v[W];
        load(c, v);
        for (int q = 0; q < W; q++) var += (v[q] - mean) * (v[q] - mean);
    }
    const double inv = 1.0 / sqrt(block_sum(var, sh) / (double)cols + (double)eps);
    for (int64_t c = c0; c < cols; c += step) {
        double v[W];
        float r[4];
        load(c, v);
        for (int q = 0; q < W; q++)
            r[q] = (float)((v[q] - mean) * inv * (1.0 + (scale ? (double)scale[c + q] : 0.0)) +
                           (shift ? (double)shift[c + q] : 0.0));
        if (VEC) cqk_io<T>::st4(yr, c, make_float4(r[0], r[1], r[2], r[3]));
        else cqk_io<T>::st(yr, c, r[0]);
    }
}

/* The same LayerNorm for rows of at most 4·NC·ROW_THREADS columns in whole groups of four (VEC's conditions, and
 * SIDE's pitch within that too): each thread keeps its NC groups in registers, so the row is read once with all
 * of a thread's loads in flight together (the kernel above reads it in each of its three passes, each load
 * waiting for the one before). Same partition and order of the sums, same formulas: the same bits.
 * SIDE (f32 y only): the row is also written as the next matmul would stage it (cqk_stage_f16_rows: f16 scaled
 * by 2^e into sd.y, 2^-e into sd.scale), from the f32 values y got, so that matmul reads it instead of staging
 * y again. Only this kernel writes the copy: other rows leave it to the matmul (cqk_layernorm says which). */
template <typename T, int NC, bool SIDE>
__global__ void __launch_bounds__(ROW_THREADS) k_layernorm_reg(void *y, const void *x, int64_t cols, const float *scale,
                                                               const float *shift, float eps, cqk_side sd) {
    __shared__ double sh[32];
    const int64_t o = (int64_t)blockIdx.x * cols;
    const T *xr = (const T *)x + o;
    T *yr = (T *)y + o;
    float4 v[NC];
#pragma unroll
    for (int i = 0; i < NC; i++) {
        const int64_t c = 4 * ((int64_t)threadIdx.x + (int64_t)i * ROW_THREADS);
        v[i] = c < cols ? cqk_io<T>::ld4(xr, c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    auto in_row = [&](int i) { return 4 * ((int64_t)threadIdx.x + (int64_t)i * ROW_THREADS) < cols; };
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < NC; i++)
        if (in_row(i)) s += (double)v[i].x, s += (double)v[i].y, s += (double)v[i].z, s += (double)v[i].w;
    const double mean = block_sum(s, sh) / (double)cols;
    double var = 0.0;
#pragma unroll
    for (int i = 0; i < NC; i++)
        if (in_row(i)) {
            const double d[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
            for (int q = 0; q < 4; q++) var += (d[q] - mean) * (d[q] - mean);
        }
    const double inv = 1.0 / sqrt(block_sum(var, sh) / (double)cols + (double)eps);
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < NC; i++) {
        const int64_t c = 4 * ((int64_t)threadIdx.x + (int64_t)i * ROW_THREADS);
        if (c < cols) {
            const double d[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
            float r[4];
            for (int q = 0; q < 4; q++)
                r[q] = (float)((d[q] - mean) * inv * (1.0 + (scale ? (double)scale[c + q] : 0.0)) +
                               (shift ? (double)shift[c + q] : 0.0));
            cqk_io<T>::st4(yr, c, make_float4(r[0], r[1], r[2], r[3]));
            v[i] = make_float4(r[0], r[1], r[2], r[3]); /* what y holds (SIDE: y is f32) */
            if (SIDE) m = fmaxf(m, fmaxf(fmaxf(cqk_mag(r[0]), cqk_mag(r[1])), fmaxf(cqk_mag(r[2]), cqk_mag(r[3]))));
        }
    }
    if (SIDE) {
        __shared__ float shf[32];
        const float p = cqk_row_scale(m, shf, sd.scale + blockIdx.x);
        uint16_t *sr = sd.y + (int64_t)blockIdx.x * sd.ld;
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const int64_t c = 4 * ((int64_t)threadIdx.x + (int64_t)i * ROW_THREADS);
            if (c < sd.ld) /* padding columns [cols, ld) are zeros: v holds zeros there */
                *(uint2 *)(sr + c) = cqk_f16x4_scaled(v[i].x, v[i].y, v[i].z, v[i].w, p);
        }
    }
}

extern "C" cudaError_t cqk_layernorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                     const float *scale, const float *shift, float eps, const cqk_side *side,
                                     int *side_written) {
    if (side_written) *side_written = 0;
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    if (side && (!side_written || dt != CQK_F32 || side->ld < cols || side->ld % 4 || (uintptr_t)side->y % 8))
        return cudaErrorInvalidValue;
    const cqk_side s = side ? *side : cqk_side{};
    CQK_DISPATCH(dt, T, {
        const bool vec = cols % 4 == 0 && (uintptr_t)x % (4 * sizeof(T)) == 0 && (uintptr_t)y % (4 * sizeof(T)) == 0 &&
                         (uintptr_t)scale % 16 == 0 && (uintptr_t)shift % 16 == 0; /* NULL is aligned */
        const unsigned g = (unsigned)rows;
        const int64_t span = side ? s.ld : cols; /* columns a thread's groups must cover */
        const int nc = !vec ? 0 : span <= 4 * 4 * ROW_THREADS ? 4 : span <= 4 * 12 * ROW_THREADS ? 12 : 0;
        if (nc == 4 && side) k_layernorm_reg<T, 4, true><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps, s);
        else if (nc == 4) k_layernorm_reg<T, 4, false><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps, s);
        else if (nc == 12 && side) k_layernorm_reg<T, 12, true><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps, s);
        else if (nc == 12) k_layernorm_reg<T, 12, false><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps, s);
        else if (vec) k_layernorm<T, true><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps);
        else k_layernorm<T, false><<<g, ROW_THREADS, 0, c->stream>>>(y, x, cols, scale, shift, eps);
        if (side && nc) *side_written = 1;
    });
    return cqk_launched();
}

/* ---- RMSNorm: x / rms · w (or · (w + 1)) + bias ------------------------------------------ */
/* the normalised row from its sum of squares s (this thread's columns c0, c0 + step, ...) */
template <typename T>
__device__ __forceinline__ void rmsnorm_out(void *y, const void *x, int64_t o, int64_t cols, int64_t c0, int step,
                                            double s, const float *w, const float *bias, int zero_centered, float eps) {
    const double inv = 1.0 / sqrt(s / (double)cols + (double)eps);
    for (int64_t c = c0; c < cols; c += step) {
        double wc = 1.0;
        if (w) wc = zero_centered ? 1.0 + (double)w[c] : (double)w[c];
        double r = (double)cqk_ld<T>(x, o + c) * inv * wc + (bias ? (double)bias[c] : 0.0);
        cqk_st<T>(y, o + c, (float)r);
    }
}

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
    rmsnorm_out<T>(y, x, o, cols, threadIdx.x, blockDim.x, block_sum(s, sh), w, bias, zero_centered, eps);
}

/* Rows of at most RMS_WARP_COLS columns (the VAE's per-pixel norms over its channels: millions of short rows): a
 * warp per row, eight rows per block, no block-wide barriers. Same formulas; the sum's partition differs. */
enum { RMS_WARP_COLS = 2048 };
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) k_rmsnorm_warp(void *y, const void *x, int64_t rows, int64_t cols,
                                                              const float *w, const float *bias, int zero_centered,
                                                              float eps) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return; /* whole warps */
    const int64_t o = r * cols;
    double s = 0.0;
    for (int64_t c = lane; c < cols; c += 32) {
        double v = (double)cqk_ld<T>(x, o + c);
        s += v * v;
    }
    for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffffu, s, k);
    rmsnorm_out<T>(y, x, o, cols, lane, 32, s, w, bias, zero_centered, eps);
}

extern "C" cudaError_t cqk_rmsnorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                   const float *w, const float *bias, int zero_centered, float eps) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    const int64_t wblocks = (rows * 32 + ROW_THREADS - 1) / ROW_THREADS;
    CQK_DISPATCH(dt, T, {
        if (cols <= RMS_WARP_COLS)
            k_rmsnorm_warp<T><<<(unsigned)wblocks, ROW_THREADS, 0, c->stream>>>(y, x, rows, cols, w, bias, zero_centered, eps);
        else
            k_rmsnorm<T><<<(unsigned)rows, ROW_THREADS, 0, c->stream>>>(y, x, cols, w, bias, zero_centered, eps);
    });
    return cqk_launched();
}

/* ---- GroupNorm over channels-last rows: statistics of each group over every row ------------------------ *
 * Deterministic in three passes plus two reductions: blocks (group, chunk of rows) write their partial sums
 * into part[g][chunk] (double), one block per group adds them in order into the mean; the same for the squared
 * deviations (the reference's two-pass variance); then every element is normalised. */
enum { GN_CHUNKS = 128 };

template <typename T, bool SQ>
__global__ void __launch_bounds__(ROW_THREADS) k_groupnorm_part(const void *x, int64_t R, int64_t C, int64_t cg,
                                                                const double *mean, double *part) {
    __shared__ double sh[32];
    const int g = blockIdx.x, ch = blockIdx.y;
    const int64_t r0 = R * ch / GN_CHUNKS, r1 = R * (ch + 1) / GN_CHUNKS, n = (r1 - r0) * cg;
    const double mu = SQ ? mean[g] : 0.0;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int64_t r = r0 + i / cg, c = (int64_t)g * cg + i % cg;
        const double v = (double)cqk_ld<T>(x, r * C + c) - mu;
        s += SQ ? v * v : v;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[(int64_t)g * GN_CHUNKS + ch] = s;
}

/* out[g] = (sum of part[g][*], in order) / n, then for the variance pass 1 / sqrt(out + eps) */
__global__ void k_groupnorm_reduce(const double *part, double *out, double n, int inv_root, float eps) {
    if (threadIdx.x != 0) return;
    double s = 0.0;
    for (int i = 0; i < GN_CHUNKS; i++) s += part[(int64_t)blockIdx.x * GN_CHUNKS + i];
    out[blockIdx.x] = inv_root ? 1.0 / sqrt(s / n + (double)eps) : s / n;
}

template <typename T>
__global__ void k_groupnorm_apply(void *y, const void *x, int64_t R, int64_t C, int64_t cg, const double *mean,
                                  const double *inv, const float *gamma, const float *beta) {
    CQK_GRID_STRIDE(i, R * C) {
        const int64_t c = i % C, g = c / cg;
        const double v = ((double)cqk_ld<T>(x, i) - mean[g]) * inv[g] * (gamma ? (double)gamma[c] : 1.0) +
                         (beta ? (double)beta[c] : 0.0);
        cqk_st<T>(y, i, (float)v);
    }
}

extern "C" size_t cqk_groupnorm_scratch(int groups) { return (size_t)groups * (GN_CHUNKS + 2) * sizeof(double); }

extern "C" cudaError_t cqk_groupnorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t C, int groups,
                                     const float *gamma, const float *beta, float eps, void *scratch) {
    if (R <= 0 || C <= 0) return cudaSuccess;
    if (groups < 1 || C % groups) return cudaErrorInvalidValue;
    double *part = (double *)scratch, *mean = part + (int64_t)groups * GN_CHUNKS, *inv = mean + groups;
    const int64_t cg = C / groups;
    const double n = (double)R * (double)cg;
    const dim3 pg((unsigned)groups, GN_CHUNKS);
    CQK_DISPATCH(dt, T, {
        k_groupnorm_part<T, false><<<pg, ROW_THREADS, 0, c->stream>>>(x, R, C, cg, mean, part);
        k_groupnorm_reduce<<<groups, 32, 0, c->stream>>>(part, mean, n, 0, eps);
        k_groupnorm_part<T, true><<<pg, ROW_THREADS, 0, c->stream>>>(x, R, C, cg, mean, part);
        k_groupnorm_reduce<<<groups, 32, 0, c->stream>>>(part, inv, n, 1, eps);
        k_groupnorm_apply<T><<<cqk_blocks(R * C, 256), 256, 0, c->stream>>>(y, x, R, C, cg, mean, inv, gamma, beta);
    });
    return cqk_launched();
}

/* ---- moments of channel groups per block of rows (a group norm over bands) ------------------------- *
 * One thread block per (block of rows, group): the block's values of the group summed in double, the mean,
 * then the squared deviations from it (the reference's two passes); m[b][2g] = mean, m[b][2g+1] = the sum of
 * squared deviations, each rounded to f32 once. */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) k_group_moments(float *m, const void *x, int64_t C, int64_t cg,
                                                               int64_t block, int64_t nb, int G) {
    __shared__ double sh[32];
    const int g = blockIdx.x;
    const int64_t n = block * cg;
    for (int64_t b = blockIdx.y; b < nb; b += gridDim.y) {
        const int64_t r0 = b * block;
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            s += (double)cqk_ld<T>(x, (r0 + i / cg) * C + (int64_t)g * cg + i % cg);
        const double mean = block_sum(s, sh) / (double)n;
        double q = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const double d = (double)cqk_ld<T>(x, (r0 + i / cg) * C + (int64_t)g * cg + i % cg) - mean;
            q += d * d;
        }
        q = block_sum(q, sh);
        if (threadIdx.x == 0) {
            m[b * 2 * G + 2 * g] = (float)mean;
            m[b * 2 * G + 2 * g + 1] = (float)q;
        }
    }
}

extern "C" cudaError_t cqk_group_moments(const cqk_ctx *c, float *m, const void *x, int dt, int64_t R, int64_t C,
                                         int groups, int block) {
    if (R <= 0 || C <= 0) return cudaSuccess;
    if (groups < 1 || C % groups || block < 1 || R % block) return cudaErrorInvalidValue;
    const int64_t nb = R / block;
    const dim3 grid((unsigned)groups, (unsigned)(nb < 65535 ? nb : 65535));
    CQK_DISPATCH(dt, T, { k_group_moments<T><<<grid, ROW_THREADS, 0, c->stream>>>(m, x, C, C / groups, block, nb, groups); });
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

/* The common case of the DiTs (head_dim 128, interleaved RoPE over the whole head): each lane holds four
 * consecutive values (two pairs) in registers from one 16- or 8-byte load and writes them back in one store;
 * the same arithmetic as k_qk_norm_rope (the sum of squares over another partition of the head). */
template <typename T>
__global__ void k_qk_norm_rope128(void *t, int64_t N, int H, const float *w, float eps, const float *cos_t,
                                  const float *sin_t) {
    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (gw >= N * H) return; /* whole warps exit together */
    const int64_t n = gw / H;
    T *p = (T *)t + gw * 128;
    const float4 f = cqk_io<T>::ld4(p, 4 * lane);
    const double v[4] = {f.x, f.y, f.z, f.w};
    double x[4] = {v[0], v[1], v[2], v[3]};
    if (w) {
        double ss = v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3];
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const double inv = 1.0 / sqrt(ss / 128.0 + (double)eps);
        for (int q = 0; q < 4; q++) x[q] = (double)(float)(v[q] * inv * (double)w[4 * lane + q]);
    }
    const float2 c2 = *(const float2 *)(cos_t + n * 64 + 2 * lane), s2 = *(const float2 *)(sin_t + n * 64 + 2 * lane);
    const double cs[2] = {c2.x, c2.y}, sn[2] = {s2.x, s2.y};
    float r[4];
    for (int q = 0; q < 2; q++) {
        r[2 * q] = (float)(x[2 * q] * cs[q] - x[2 * q + 1] * sn[q]);
        r[2 * q + 1] = (float)(x[2 * q] * sn[q] + x[2 * q + 1] * cs[q]);
    }
    cqk_io<T>::st4(p, 4 * lane, make_float4(r[0], r[1], r[2], r[3]));
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
        if (D == 128 && mode == CQK_ROPE_INTERLEAVED && rope_dim == 128 && (uintptr_t)t % (4 * sizeof(T)) == 0 &&
            (uintptr_t)cos_t % 8 == 0 && (uintptr_t)sin_t % 8 == 0)
            k_qk_norm_rope128<T><<<(unsigned)blocks, ROW_THREADS, 0, c->stream>>>(t, N, H, w, eps, cos_t, sin_t);
        else
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
