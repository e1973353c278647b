/*
 * k_eltwise.cu — element-wise ops and data movement: unary, binary with row
 * broadcasting, gated add, SwiGLU, transpose, column concat, row and column
 * gathers, nearest upsampling and pixel (un)shuffle.
 *
 * One thread per output element (grid-stride). The arithmetic ops compute in
 * double and round once, as the reference does, so results match it to the
 * f32 rounding; they are memory-bound, so this is free. Index tensors live on
 * the device: a bad index is reported through the status word (a deferred
 * CQ_ERR_BOUNDS at sync) and its output element is left as it was.
 */
#include "k_common.cuh"

/* ---- unary ---------------------------------------------------------------------------- */
__device__ __forceinline__ double unary_fn(int fn, double x, double alpha, double beta) {
    switch (fn) {
    case CQK_UNARY_SILU: return x / (1.0 + exp(-x));
    case CQK_UNARY_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case CQK_UNARY_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case CQK_UNARY_TANH: return tanh(x);
    case CQK_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CQK_UNARY_NEG: return -x;
    case CQK_UNARY_EXP: return exp(x);
    case CQK_UNARY_SCALE: return x * alpha;
    case CQK_UNARY_ADD_SCALAR: return x + alpha;
    case CQK_UNARY_CLAMP: return fmin(fmax(x, alpha), beta);
    case CQK_UNARY_LOG: return log(fmax(x, alpha));
    case CQK_UNARY_SQRT: return sqrt(fmax(x, 0.0));
    default: return (double)NAN;
    }
}

template <typename T>
__global__ void k_unary(cqk_dev d, void *y, const void *x, int64_t n, int fn, double alpha, double beta) {
    CQK_GRID_STRIDE(i, n) {
        float v = (float)unary_fn(fn, (double)cqk_ld<T>(x, i), alpha, beta);
        cqk_check_value(d, v, i);
        cqk_st<T>(y, i, v);
    }
}

extern "C" cudaError_t cqk_unary(const cqk_ctx *c, void *y, const void *x, int dt, int64_t n, int fn, float alpha,
                                 float beta) {
    if (n <= 0) return cudaSuccess;
    if (fn < 0 || fn >= CQK_UNARY_COUNT) return cudaErrorInvalidValue;
    unsigned b = cqk_blocks(n, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_unary<T><<<b, 256, 0, c->stream>>>(d, y, x, n, fn, (double)alpha, (double)beta); });
    return cqk_launched();
}

/* ---- binary with row broadcasting ---------------------------------------------------- */
template <typename T>
__global__ void k_binary(cqk_dev d, void *y, const void *a, const void *b, int64_t n, int64_t cols, int bcast, int fn) {
    CQK_GRID_STRIDE(i, n) {
        double u = cqk_ld<T>(a, i), v = cqk_ld<T>(b, bcast ? i % cols : i), r;
        switch (fn) {
        case CQK_BINARY_ADD: r = u + v; break;
        case CQK_BINARY_SUB: r = u - v; break;
        case CQK_BINARY_MUL: r = u * v; break;
        default: r = u / v; break;
        }
        cqk_check_value(d, (float)r, i);
        cqk_st<T>(y, i, (float)r);
    }
}

extern "C" cudaError_t cqk_binary(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t n,
                                  int64_t cols, int bcast, int fn) {
    if (n <= 0) return cudaSuccess;
    if (fn < 0 || fn >= CQK_BINARY_COUNT || cols <= 0) return cudaErrorInvalidValue;
    unsigned bl = cqk_blocks(n, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_binary<T><<<bl, 256, 0, c->stream>>>(d, y, a, b, n, cols, bcast, fn); });
    return cqk_launched();
}

/* ---- y += gate ⊙ x ------------------------------------------------------------------ */
template <typename T>
__global__ void k_gated_add(cqk_dev d, void *y, const void *x, int64_t n, int64_t cols, const float *gate) {
    CQK_GRID_STRIDE(i, n) {
        double g = gate ? (double)gate[i % cols] : 1.0;
        float v = (float)((double)cqk_ld<T>(y, i) + g * (double)cqk_ld<T>(x, i));
        cqk_check_value(d, v, i);
        cqk_st<T>(y, i, v);
    }
}

extern "C" cudaError_t cqk_gated_add(const cqk_ctx *c, void *y, const void *x, int dt, int64_t n, int64_t cols,
                                     const float *gate) {
    if (n <= 0) return cudaSuccess;
    if (cols <= 0) return cudaErrorInvalidValue;
    unsigned b = cqk_blocks(n, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_gated_add<T><<<b, 256, 0, c->stream>>>(d, y, x, n, cols, gate); });
    return cqk_launched();
}

/* ---- SwiGLU: y = silu(gate) ⊙ up ------------------------------------------------------ */
template <typename T>
__global__ void k_swiglu(cqk_dev d, void *y, const void *a, const void *b, int64_t rows, int64_t F) {
    const int64_t n = rows * F;
    CQK_GRID_STRIDE(i, n) {
        int64_t r = i / F, f = i - r * F;
        double g = b ? cqk_ld<T>(a, i) : cqk_ld<T>(a, r * 2 * F + f);
        double u = b ? cqk_ld<T>(b, i) : cqk_ld<T>(a, r * 2 * F + F + f);
        float v = (float)(g / (1.0 + exp(-g)) * u);
        cqk_check_value(d, v, i);
        cqk_st<T>(y, i, v);
    }
}

extern "C" cudaError_t cqk_swiglu(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t rows,
                                  int64_t F) {
    if (rows <= 0 || F <= 0) return cudaSuccess;
    unsigned bl = cqk_blocks(rows * F, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_swiglu<T><<<bl, 256, 0, c->stream>>>(d, y, a, b, rows, F); });
    return cqk_launched();
}

/* ---- data movement ------------------------------------------------------------------------ */
template <typename T>
__global__ void k_transpose(void *y, const void *x, int64_t R, int64_t C) {
    const int64_t n = R * C;
    CQK_GRID_STRIDE(o, n) { /* o = c*R + r in y [C, R] */
        int64_t cc = o / R, r = o - cc * R;
        cqk_st<T>(y, o, cqk_ld<T>(x, r * C + cc));
    }
}

extern "C" cudaError_t cqk_transpose(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t C) {
    if (R <= 0 || C <= 0) return cudaSuccess;
    unsigned b = cqk_blocks(R * C, 256);
    CQK_DISPATCH(dt, T, { k_transpose<T><<<b, 256, 0, c->stream>>>(y, x, R, C); });
    return cqk_launched();
}

template <typename T>
__global__ void k_concat_cols(void *y, const void *a, const void *b, int64_t R, int64_t Ca, int64_t Cb) {
    const int64_t C = Ca + Cb, n = R * C;
    CQK_GRID_STRIDE(o, n) {
        int64_t r = o / C, cc = o - r * C;
        cqk_st<T>(y, o, cc < Ca ? cqk_ld<T>(a, r * Ca + cc) : cqk_ld<T>(b, r * Cb + cc - Ca));
    }
}

extern "C" cudaError_t cqk_concat_cols(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t R,
                                       int64_t Ca, int64_t Cb) {
    if (R <= 0 || Ca + Cb <= 0) return cudaSuccess;
    unsigned bl = cqk_blocks(R * (Ca + Cb), 256);
    CQK_DISPATCH(dt, T, { k_concat_cols<T><<<bl, 256, 0, c->stream>>>(y, a, b, R, Ca, Cb); });
    return cqk_launched();
}

template <typename TY, typename TW>
__global__ void k_get_rows(cqk_dev d, void *y, const void *w, int64_t V, int64_t C, int64_t ldw, const float *rowscale,
                           const int32_t *ids, int64_t n) {
    const int64_t total = n * C;
    CQK_GRID_STRIDE(o, total) {
        int64_t i = o / C, cc = o - i * C;
        int32_t id = ids[i];
        if (id < 0 || id >= V) {
            if (cc == 0) cqk_report(d.st, CQK_ERR_INDEX, d.op, d.seq, i, id);
            continue;
        }
        float v = cqk_ld<TW>(w, (int64_t)id * ldw + cc);
        cqk_st<TY>(y, o, rowscale ? v * rowscale[id] : v);
    }
}

extern "C" cudaError_t cqk_get_rows(const cqk_ctx *c, void *y, int ydt, const void *w, int wdt, int64_t V, int64_t C,
                                    int64_t ldw, const float *rowscale, const int32_t *ids, int64_t n) {
    if (n <= 0 || C <= 0) return cudaSuccess;
    unsigned b = cqk_blocks(n * C, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(ydt, TY, {
        CQK_DISPATCH(wdt, TW, { k_get_rows<TY, TW><<<b, 256, 0, c->stream>>>(d, y, w, V, C, ldw, rowscale, ids, n); });
    });
    return cqk_launched();
}

template <typename T>
__global__ void k_gather_cols(cqk_dev d, void *y, const void *x, int64_t R, int64_t K, int64_t N, const int32_t *idx,
                              int group, double scale) {
    const int64_t n = R * N;
    CQK_GRID_STRIDE(o, n) {
        int64_t r = o / N, cc = o - r * N;
        double acc = 0.0;
        bool bad = false;
        for (int g = 0; g < group; g++) {
            int64_t pos = cc * group + g;
            int32_t id = idx[pos];
            if (id < -1 || id >= K) {
                if (r == 0) cqk_report(d.st, CQK_ERR_INDEX, d.op, d.seq, pos, id);
                bad = true;
            } else if (id >= 0) {
                acc += (double)cqk_ld<T>(x, r * K + id);
            }
        }
        if (!bad) cqk_st<T>(y, o, (float)(scale * acc));
    }
}

extern "C" cudaError_t cqk_gather_cols(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t K,
                                       int64_t N, const int32_t *idx, int group, float scale) {
    if (R <= 0 || N <= 0) return cudaSuccess;
    if (group < 1) return cudaErrorInvalidValue;
    unsigned b = cqk_blocks(R * N, 256);
    cqk_dev d = cqk_dev_of(c);
    double s = scale != 0.0f ? (double)scale : 1.0;
    CQK_DISPATCH(dt, T, { k_gather_cols<T><<<b, 256, 0, c->stream>>>(d, y, x, R, K, N, idx, group, s); });
    return cqk_launched();
}

template <typename T>
__global__ void k_upsample(void *y, const void *x, int H, int W, int64_t C, int f) {
    const int64_t Wo = (int64_t)W * f, n = (int64_t)H * f * Wo * C;
    CQK_GRID_STRIDE(o, n) {
        int64_t p = o / C, cc = o - p * C, oy = p / Wo, ox = p - oy * Wo;
        cqk_st<T>(y, o, cqk_ld<T>(x, ((oy / f) * W + ox / f) * C + cc));
    }
}

extern "C" cudaError_t cqk_upsample_nearest(const cqk_ctx *c, void *y, const void *x, int dt, int H, int W, int64_t C,
                                            int f) {
    if (H <= 0 || W <= 0 || C <= 0 || f <= 0) return cudaSuccess;
    unsigned b = cqk_blocks((int64_t)H * W * f * f * C, 256);
    CQK_DISPATCH(dt, T, { k_upsample<T><<<b, 256, 0, c->stream>>>(y, x, H, W, C, f); });
    return cqk_launched();
}

/* PyTorch's channel order: input channel c*r*r + i*r + j of pixel (h, w) is
 * output channel c of pixel (r*h + i, r*w + j); unshuffle is the inverse map. */
template <typename T>
__global__ void k_pixel_shuffle(void *y, const void *x, int H, int W, int64_t C, int r, int inverse) {
    const int64_t rr = (int64_t)r * r, Cb = C * rr, n = (int64_t)H * W * Cb, Ws = (int64_t)W * r;
    CQK_GRID_STRIDE(o, n) {
        if (!inverse) { /* o indexes y [rH*rW, C] */
            int64_t p = o / C, cc = o - p * C, Y = p / Ws, X = p - Y * Ws;
            int64_t h = Y / r, i = Y % r, w = X / r, j = X % r;
            cqk_st<T>(y, o, cqk_ld<T>(x, (h * W + w) * Cb + cc * rr + i * r + j));
        } else { /* o indexes y [H*W, C*r*r] */
            int64_t p = o / Cb, q = o - p * Cb, h = p / W, w = p - h * W;
            int64_t cc = q / rr, ij = q - cc * rr, i = ij / r, j = ij - i * r;
            cqk_st<T>(y, o, cqk_ld<T>(x, ((r * h + i) * Ws + r * w + j) * C + cc));
        }
    }
}

extern "C" cudaError_t cqk_pixel_shuffle(const cqk_ctx *c, void *y, const void *x, int dt, int H, int W, int64_t C, int r,
                                         int inverse) {
    if (H <= 0 || W <= 0 || C <= 0 || r <= 0) return cudaSuccess;
    unsigned b = cqk_blocks((int64_t)H * W * r * r * C, 256);
    CQK_DISPATCH(dt, T, { k_pixel_shuffle<T><<<b, 256, 0, c->stream>>>(y, x, H, W, C, r, inverse); });
    return cqk_launched();
}
