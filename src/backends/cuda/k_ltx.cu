/*
 * k_ltx.cu — the video VAE's and the vocoder's own kernels: depth_to_space3d, snake, and the direct 1-D
 * convolutions (grouped conv1d, conv_transpose1d). conv3d and conv1d with one group run as GEMMs on the staged
 * implicit matrix instead (k_convert.cu's im2col staging, cuda_ltx_ops.c).
 *
 * The direct convolutions read their kernel as f32 in a tap-major layout made once per call
 * (cqk_conv1d_weight_f32: [k][rows][mid] from PyTorch's [rows, mid, k]), so the threads of a warp, which hold
 * consecutive output channels, read consecutive weights. They accumulate in f32.
 */
#include "k_common.cuh"

/* Source coordinate of padded coordinate i in [0, n) (ref_elem.c's pad_index): -1 is a zero sample. */
__device__ __forceinline__ int64_t ltx_pad_src(int64_t i, int64_t n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 1) return i < 0 ? 0 : n - 1;
    if (mode == 2) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}

/* ---- depth_to_space3d: a pure permutation, copied as raw elements ------------------------------------------ */
template <typename E>
__global__ void k_depth_to_space3d(E *y, const E *x, int64_t n, int64_t H, int64_t W, int64_t C, int pt, int ph,
                                   int pw) {
    const int64_t Ho = H * ph, Wo = W * pw, Cin = C * pt * ph * pw;
    CQK_GRID_STRIDE(i, n) {
        const int64_t c = i % C, vox = i / C, ow = vox % Wo, r = vox / Wo, oh = r % Ho, ot = r / Ho;
        const int64_t f = ot / pt, a = ot - f * pt, h = oh / ph, b = oh - h * ph, w = ow / pw, d = ow - w * pw;
        y[i] = x[((f * H + h) * W + w) * Cin + ((c * pt + a) * ph + b) * pw + d];
    }
}

extern "C" cudaError_t cqk_depth_to_space3d(const cqk_ctx *c, void *y, const void *x, int dt, int T, int H, int W,
                                            int64_t C, int pt, int ph, int pw) {
    const int64_t n = (int64_t)T * pt * H * ph * W * pw * C;
    if (n <= 0) return cudaSuccess;
    const unsigned b = cqk_blocks(n, 256);
    if (dt == CQK_F32)
        k_depth_to_space3d<uint32_t><<<b, 256, 0, c->stream>>>((uint32_t *)y, (const uint32_t *)x, n, H, W, C, pt, ph, pw);
    else if (dt == CQK_F16 || dt == CQK_BF16)
        k_depth_to_space3d<uint16_t><<<b, 256, 0, c->stream>>>((uint16_t *)y, (const uint16_t *)x, n, H, W, C, pt, ph, pw);
    else
        return cudaErrorInvalidValue;
    return cqk_launched();
}

/* ---- snake: y = x + sin^2(a x) / (b + eps), in double and rounded once as the reference ---------------------- */
template <typename T>
__global__ void k_snake(cqk_dev d, void *y, const void *x, int64_t n, int64_t C, const float *alpha, const float *beta,
                        int logscale, double eps) {
    CQK_GRID_STRIDE(i, n) {
        const int64_t c = i % C;
        double al = alpha[c], be = beta ? (double)beta[c] : al;
        if (logscale) {
            al = exp(al);
            be = beta ? exp(be) : al;
        }
        const double v = cqk_ld<T>(x, i), sn = sin(al * v);
        const float o = (float)(v + 1.0 / (be + eps) * sn * sn);
        cqk_check_value(d, o, i);
        cqk_st<T>(y, i, o);
    }
}

extern "C" cudaError_t cqk_snake(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                                 const float *alpha, const float *beta, int logscale, float eps) {
    const int64_t n = rows * cols;
    if (n <= 0) return cudaSuccess;
    const unsigned b = cqk_blocks(n, 256);
    const cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, {
        k_snake<T><<<b, 256, 0, c->stream>>>(d, y, x, n, cols, alpha, beta, logscale, (double)eps);
    });
    return cqk_launched();
}

/* ---- a 1-D convolution kernel as f32, tap-major -------------------------------------------------------------- */
/* out[(j * R + r) * M + m] = w[r, m * k + j]: from a weight's f16 plane (times its row scale) or an activation. */
template <typename TW>
__global__ void k_conv1d_weight(float *out, const void *src, const uint16_t *plane, int64_t ld, const float *rowscale,
                                int64_t R, int64_t M, int k) {
    const int64_t n = R * M * k;
    CQK_GRID_STRIDE(i, n) {
        const int64_t m = i % M, q = i / M, r = q % R, j = q / R, col = m * k + j;
        out[i] = plane ? cqk_h2f(plane[r * ld + col]) * rowscale[r] : cqk_ld<TW>(src, r * M * k + col);
    }
}

extern "C" cudaError_t cqk_conv1d_weight_f32(const cqk_ctx *c, float *out, const void *src, int sdt,
                                             const uint16_t *plane, int64_t ld, const float *rowscale, int64_t R,
                                             int64_t M, int k) {
    const int64_t n = R * M * k;
    if (n <= 0) return cudaSuccess;
    if (k < 1 || (plane && (!rowscale || ld < M * k))) return cudaErrorInvalidValue;
    const unsigned b = cqk_blocks(n, 256);
    if (plane) sdt = CQK_F32; /* unused type */
    CQK_DISPATCH(sdt, TW, { k_conv1d_weight<TW><<<b, 256, 0, c->stream>>>(out, src, plane, ld, rowscale, R, M, k); });
    return cqk_launched();
}

/* ---- conv1d, direct (any groups; the one-group case normally runs as a GEMM) -------------------------------- */
/* One thread per output (o, co): threads of a warp hold consecutive channels, so x's loads of one tap are one
 * run of the group's channels (a depthwise filter: consecutive) and the weights' (wt [k][Cout][cig]) too. */
template <typename T>
__global__ void k_conv1d_direct(cqk_dev d, void *y, const void *x, const float *wt, const float *bias, cqk_conv1d p) {
    const int64_t n = p.Lo * p.Cout, cig = p.Cin / p.G, cog = p.Cout / p.G;
    CQK_GRID_STRIDE(i, n) {
        const int64_t o = i / p.Cout, co = i - o * p.Cout, c0 = co / cog * cig;
        float acc = bias ? bias[co] : 0.0f;
        for (int j = 0; j < p.k; j++) {
            const int64_t s = ltx_pad_src(o * p.stride + (int64_t)j * p.dilation - p.pad_l, p.L, p.mode);
            if (s < 0) continue;
            const float *wr = wt + ((int64_t)j * p.Cout + co) * cig;
            const int64_t xb = s * p.Cin + c0;
            for (int64_t ci = 0; ci < cig; ci++) acc = fmaf(wr[ci], cqk_ld<T>(x, xb + ci), acc);
        }
        cqk_check_value(d, acc, i);
        cqk_st<T>(y, i, acc);
    }
}

extern "C" cudaError_t cqk_conv1d_direct(const cqk_ctx *c, void *y, const void *x, int dt, const float *wt,
                                         const float *bias, const cqk_conv1d *p) {
    const int64_t n = p->Lo * p->Cout;
    if (n <= 0) return cudaSuccess;
    if (p->G < 1 || p->Cin % p->G || p->Cout % p->G || p->stride < 1 || p->dilation < 1) return cudaErrorInvalidValue;
    const unsigned b = cqk_blocks(n, 256);
    const cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_conv1d_direct<T><<<b, 256, 0, c->stream>>>(d, y, x, wt, bias, *p); });
    return cqk_launched();
}

/* ---- conv_transpose1d, direct -------------------------------------------------------------------------------- */
/* Output o of the cropped result is u = o + pad_l of the full one, u = v * stride + ph: its taps are
 * j = ph + q * stride (q = 0, 1, ... while j < k), each reading input sample i = v - q. A thread takes one output
 * channel and CT_R outputs of one phase (v, v + 1, ...): they share every weight it loads (wt [k][Cin][cog]),
 * and their inputs are consecutive samples. */
#define CT_R 4
template <typename T>
__global__ void k_conv_transpose1d(cqk_dev d, void *y, const void *x, const float *wt, const float *bias, cqk_conv1d p,
                                   int64_t v_lo, int64_t nvb) {
    const int64_t s = p.stride, cig = p.Cin / p.G, cog = p.Cout / p.G;
    const int64_t n = s * nvb * p.Cout; /* (phase, block of CT_R v's, channel) */
    CQK_GRID_STRIDE(i, n) {
        const int64_t co = i % p.Cout, q0 = i / p.Cout, vb = q0 % nvb, ph = q0 / nvb;
        const int64_t v0 = v_lo + vb * CT_R, g = co / cog, col = co - g * cog, ci0 = g * cig;
        float acc[CT_R];
#pragma unroll
        for (int r = 0; r < CT_R; r++) acc[r] = 0.0f;
        for (int64_t j = ph, q = 0; j < p.k; j += s, q++) {
            const float *wr = wt + (j * p.Cin + ci0) * cog + col;
            for (int64_t ci = 0; ci < cig; ci++) {
                const float w = wr[ci * cog];
#pragma unroll
                for (int r = 0; r < CT_R; r++) {
                    const int64_t xi = v0 + r - q;
                    if (xi >= 0 && xi < p.L) acc[r] = fmaf(w, cqk_ld<T>(x, xi * p.Cin + ci0 + ci), acc[r]);
                }
            }
        }
        const float b = bias ? bias[co] : 0.0f;
#pragma unroll
        for (int r = 0; r < CT_R; r++) {
            const int64_t o = (v0 + r) * s + ph - p.pad_l;
            if (o < 0 || o >= p.Lo) continue;
            const float v = acc[r] + b;
            cqk_check_value(d, v, o * p.Cout + co);
            cqk_st<T>(y, o * p.Cout + co, v);
        }
    }
}

extern "C" cudaError_t cqk_conv_transpose1d(const cqk_ctx *c, void *y, const void *x, int dt, const float *wt,
                                            const float *bias, const cqk_conv1d *p) {
    if (p->Lo <= 0 || p->Cout <= 0) return cudaSuccess;
    if (p->G < 1 || p->Cin % p->G || p->Cout % p->G || p->stride < 1 || p->k < 1 || p->pad_l < 0)
        return cudaErrorInvalidValue;
    /* v over every full-result index u = pad_l .. pad_l + Lo - 1 */
    const int64_t v_lo = p->pad_l / p->stride, v_hi = (p->pad_l + p->Lo - 1) / p->stride;
    const int64_t nvb = (v_hi - v_lo + 1 + CT_R - 1) / CT_R;
    const unsigned b = cqk_blocks((int64_t)p->stride * nvb * p->Cout, 256);
    const cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_conv_transpose1d<T><<<b, 256, 0, c->stream>>>(d, y, x, wt, bias, *p, v_lo, nvb); });
    return cqk_launched();
}
