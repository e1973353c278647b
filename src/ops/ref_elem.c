/*
 * ref_elem.c — reference elementwise, data-movement and image ops (see ref.h).
 */
#include <math.h>
#include <string.h>

#include "ops/ref.h"

static double unary_fn(cq_unary fn, double x, double alpha, double beta) {
    switch (fn) {
    case CQ_UNARY_SILU: return cq_ref_silu(x);
    case CQ_UNARY_GELU_TANH: return cq_ref_gelu_tanh(x);
    case CQ_UNARY_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case CQ_UNARY_TANH: return tanh(x);
    case CQ_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case CQ_UNARY_NEG: return -x;
    case CQ_UNARY_EXP: return exp(x);
    case CQ_UNARY_SCALE: return x * alpha;
    case CQ_UNARY_ADD_SCALAR: return x + alpha;
    case CQ_UNARY_CLAMP: return fmin(fmax(x, alpha), beta);
    case CQ_UNARY_LOG: return log(fmax(x, alpha));
    case CQ_UNARY_SQRT: return sqrt(fmax(x, 0.0));
    default: return NAN;
    }
}

cq_status cq_ref_unary(cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    int64_t n = cq_tensor_nelem(x);
    for (int64_t i = 0; i < n; i++) cq_ref_store(y, i, (float)unary_fn(fn, cq_ref_load(x, i), alpha, beta));
    return CQ_OK;
}

cq_status cq_ref_binary(cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    int64_t n = cq_tensor_nelem(a), C = cq_tensor_cols(a);
    bool bcast = cq_tensor_nelem(b) != n;
    for (int64_t i = 0; i < n; i++) {
        double u = cq_ref_load(a, i), v = cq_ref_load(b, bcast ? i % C : i), r;
        switch (fn) {
        case CQ_BINARY_ADD: r = u + v; break;
        case CQ_BINARY_SUB: r = u - v; break;
        case CQ_BINARY_MUL: r = u * v; break;
        default: r = u / v; break;
        }
        cq_ref_store(y, i, (float)r);
    }
    return CQ_OK;
}

cq_status cq_ref_gated_add(cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    int64_t n = cq_tensor_nelem(x), C = cq_tensor_cols(x);
    for (int64_t i = 0; i < n; i++) {
        double g = gate ? cq_ref_load(gate, i % C) : 1.0;
        cq_ref_store(y, i, (float)(cq_ref_load(y, i) + g * cq_ref_load(x, i)));
    }
    return CQ_OK;
}

cq_status cq_ref_swiglu(cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    int64_t R = cq_tensor_rows(y), F = cq_tensor_cols(y);
    for (int64_t r = 0; r < R; r++)
        for (int64_t f = 0; f < F; f++) {
            double g = b ? cq_ref_load(a, r * F + f) : cq_ref_load(a, r * 2 * F + f);
            double u = b ? cq_ref_load(b, r * F + f) : cq_ref_load(a, r * 2 * F + F + f);
            cq_ref_store(y, r * F + f, (float)(cq_ref_silu(g) * u));
        }
    return CQ_OK;
}

cq_status cq_ref_copy(cq_tensor *y, const cq_tensor *x) {
    int64_t n = cq_tensor_nelem(x);
    if (x->dtype == CQ_DTYPE_I32) {
        memmove(cq_host_ptr(y), cq_host_ptr(x), (size_t)n * 4);
        return CQ_OK;
    }
    for (int64_t i = 0; i < n; i++) cq_ref_store(y, i, cq_ref_load(x, i));
    return CQ_OK;
}

cq_status cq_ref_transpose(cq_tensor *y, const cq_tensor *x) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) cq_ref_store(y, c * R + r, cq_ref_load(x, r * C + c));
    return CQ_OK;
}

cq_status cq_ref_concat_cols(cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    int64_t R = cq_tensor_rows(a), Ca = cq_tensor_cols(a), Cb = cq_tensor_cols(b), C = Ca + Cb;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < Ca; c++) cq_ref_store(y, r * C + c, cq_ref_load(a, r * Ca + c));
        for (int64_t c = 0; c < Cb; c++) cq_ref_store(y, r * C + Ca + c, cq_ref_load(b, r * Cb + c));
    }
    return CQ_OK;
}

cq_status cq_ref_get_rows(cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    int64_t n = cq_tensor_rows(y), C = cq_tensor_cols(y), V = w->shape[0];
    float *row = cq_mallocn((size_t)C, sizeof(float));
    if (!row) return CQ_ERR_NOMEM;
    cq_status st = CQ_OK;
    for (int64_t i = 0; i < n && st == CQ_OK; i++) {
        int32_t id;
        memcpy(&id, (const char *)cq_host_ptr(ids) + 4 * i, 4);
        if (id < 0 || id >= V) {
            st = cq_fail(CQ_ERR_BOUNDS, "get_rows: id %d at position %lld is outside [0, %lld)", id, (long long)i,
                         (long long)V);
            break;
        }
        st = cq_ref_matrix_rows(w, id, 1, row);
        for (int64_t c = 0; c < C && st == CQ_OK; c++) cq_ref_store(y, i * C + c, row[c]);
    }
    cq_free(row);
    return st;
}

/* Indices are checked before anything is written, so a bad one leaves y untouched. */
cq_status cq_ref_gather_cols(cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group, float scale) {
    int64_t R = cq_tensor_rows(x), K = cq_tensor_cols(x), N = cq_tensor_cols(y), n = N * group;
    const char *ip = cq_host_ptr(idx);
    for (int64_t i = 0; i < n; i++) {
        int32_t id;
        memcpy(&id, ip + 4 * i, 4);
        if (id < -1 || id >= K)
            return cq_fail(CQ_ERR_BOUNDS, "gather_cols: index %d at position %lld is outside [-1, %lld)", id,
                           (long long)i, (long long)K);
    }
    double s = scale != 0.0f ? scale : 1.0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < N; c++) {
            double acc = 0.0;
            for (int64_t g = 0; g < group; g++) {
                int32_t id;
                memcpy(&id, ip + 4 * (c * group + g), 4);
                if (id >= 0) acc += cq_ref_load(x, r * K + id);
            }
            cq_ref_store(y, r * N + c, (float)(s * acc));
        }
    return CQ_OK;
}

/* Source coordinate of padded coordinate i in [0, n) for the padding modes;
 * -1 means a zero sample. */
static int64_t pad_index(int64_t i, int64_t n, cq_pad_mode mode) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case CQ_PAD_REPLICATE: return i < 0 ? 0 : n - 1;
    case CQ_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i; /* mirror without repeating the edge */
    default: return -1;
    }
}

cq_status cq_ref_conv2d(const cq_conv2d_args *a) {
    int64_t H = a->H, W = a->W, Cin = cq_tensor_cols(a->x), Cout = a->w->shape[0], kh = a->kh, kw = a->kw;
    int64_t Ho = (H + a->pad_t + a->pad_b - kh) / a->stride_y + 1, Wo = (W + a->pad_l + a->pad_r - kw) / a->stride_x + 1;
    int64_t K = Cin * kh * kw;
    float *w = cq_mallocn((size_t)(Cout * K), sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    cq_status st = cq_ref_matrix_rows(a->w, 0, Cout, w);
    for (int64_t oy = 0; oy < Ho && st == CQ_OK; oy++)
        for (int64_t ox = 0; ox < Wo; ox++)
            for (int64_t co = 0; co < Cout; co++) {
                double acc = a->bias ? cq_ref_load(a->bias, co) : 0.0;
                for (int64_t ky = 0; ky < kh; ky++) {
                    int64_t iy = pad_index(oy * a->stride_y + ky - a->pad_t, H, a->mode);
                    if (iy < 0) continue;
                    for (int64_t kx = 0; kx < kw; kx++) {
                        int64_t ix = pad_index(ox * a->stride_x + kx - a->pad_l, W, a->mode);
                        if (ix < 0) continue;
                        const float *wr = w + co * K + ky * kw + kx; /* PyTorch [Cout, Cin, kh, kw] */
                        for (int64_t ci = 0; ci < Cin; ci++)
                            acc += (double)wr[ci * kh * kw] * cq_ref_load(a->x, (iy * W + ix) * Cin + ci);
                    }
                }
                cq_ref_store(a->y, (oy * Wo + ox) * Cout + co, (float)acc);
            }
    cq_free(w);
    return st;
}

cq_status cq_ref_upsample_nearest(cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    int64_t C = cq_tensor_cols(x), Wo = (int64_t)W * f;
    for (int64_t oy = 0; oy < (int64_t)H * f; oy++)
        for (int64_t ox = 0; ox < Wo; ox++)
            for (int64_t c = 0; c < C; c++)
                cq_ref_store(y, (oy * Wo + ox) * C + c, cq_ref_load(x, ((oy / f) * W + ox / f) * C + c));
    return CQ_OK;
}

/* PyTorch pixel_shuffle: input channel c*r*r + i*r + j of pixel (h, w) is
 * output channel c of pixel (r*h + i, r*w + j). */
cq_status cq_ref_pixel_shuffle(cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    int64_t Cin = cq_tensor_cols(x), C = Cin / ((int64_t)r * r), Wo = (int64_t)W * r;
    for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < r; i++)
                    for (int64_t j = 0; j < r; j++)
                        cq_ref_store(y, ((r * h + i) * Wo + r * w + j) * C + c,
                                     cq_ref_load(x, (h * W + w) * Cin + c * r * r + i * r + j));
    return CQ_OK;
}

cq_status cq_ref_pixel_unshuffle(cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    int64_t C = cq_tensor_cols(x), Cout = C * r * r, Wi = (int64_t)W * r;
    for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < r; i++)
                    for (int64_t j = 0; j < r; j++)
                        cq_ref_store(y, (h * W + w) * Cout + c * r * r + i * r + j,
                                     cq_ref_load(x, ((r * h + i) * Wi + r * w + j) * C + c));
    return CQ_OK;
}

/* ---- LTX video VAE and vocoder ops ------------------------------------------------------------------------ */
/* The padded time index: replicate the first and last frames (LTX's causal conv). */
static int64_t clamp_index(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

cq_status cq_ref_conv3d(const cq_conv3d_args *a) {
    int64_t T = a->T, H = a->H, W = a->W, Cin = cq_tensor_cols(a->x), Cout = a->w->shape[0];
    int64_t kt = a->kt, kh = a->kh, kw = a->kw, taps = kt * kh * kw, K = Cin * taps;
    int64_t To = (T + a->pad_front + a->pad_back - kt) / a->stride_t + 1;
    int64_t Ho = (H + a->pad_t + a->pad_b - kh) / a->stride_y + 1, Wo = (W + a->pad_l + a->pad_r - kw) / a->stride_x + 1;
    float *w = cq_mallocn((size_t)(Cout * K), sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    cq_status st = cq_ref_matrix_rows(a->w, 0, Cout, w);
    for (int64_t ot = 0; ot < To && st == CQ_OK; ot++)
        for (int64_t oy = 0; oy < Ho; oy++)
            for (int64_t ox = 0; ox < Wo; ox++)
                for (int64_t co = 0; co < Cout; co++) {
                    double acc = a->bias ? cq_ref_load(a->bias, co) : 0.0;
                    for (int64_t dt = 0; dt < kt; dt++) {
                        int64_t it = clamp_index(ot * a->stride_t + dt - a->pad_front, T);
                        for (int64_t ky = 0; ky < kh; ky++) {
                            int64_t iy = pad_index(oy * a->stride_y + ky - a->pad_t, H, a->mode);
                            if (iy < 0) continue;
                            for (int64_t kx = 0; kx < kw; kx++) {
                                int64_t ix = pad_index(ox * a->stride_x + kx - a->pad_l, W, a->mode);
                                if (ix < 0) continue;
                                /* PyTorch [Cout, Cin, kt, kh, kw] */
                                const float *wr = w + co * K + (dt * kh + ky) * kw + kx;
                                int64_t xo = ((it * H + iy) * W + ix) * Cin;
                                for (int64_t ci = 0; ci < Cin; ci++)
                                    acc += (double)wr[ci * taps] * cq_ref_load(a->x, xo + ci);
                            }
                        }
                    }
                    cq_ref_store(a->y, ((ot * Ho + oy) * Wo + ox) * Cout + co, (float)acc);
                }
    cq_free(w);
    return st;
}

cq_status cq_ref_depth_to_space3d(cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph, int pw) {
    int64_t Cin = cq_tensor_cols(x), P = (int64_t)pt * ph * pw, C = Cin / P;
    int64_t Ho = (int64_t)H * ph, Wo = (int64_t)W * pw;
    for (int64_t f = 0; f < T; f++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
                for (int64_t c = 0; c < C; c++)
                    for (int64_t i = 0; i < pt; i++)
                        for (int64_t j = 0; j < ph; j++)
                            for (int64_t d = 0; d < pw; d++) {
                                int64_t src = ((f * H + h) * W + w) * Cin + ((c * pt + i) * ph + j) * pw + d;
                                int64_t dst = (((pt * f + i) * Ho + ph * h + j) * Wo + pw * w + d) * C + c;
                                cq_ref_store(y, dst, cq_ref_load(x, src));
                            }
    return CQ_OK;
}

cq_status cq_ref_conv1d(const cq_conv1d_args *a) {
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y), G = a->groups;
    int64_t cig = Cin / G, cog = Cout / G, k = a->k, K = cig * k;
    int64_t Lo = cq_tensor_rows(a->y);
    float *w = cq_mallocn((size_t)(Cout * K), sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    cq_status st = cq_ref_matrix_rows(a->w, 0, Cout, w);
    for (int64_t o = 0; o < Lo && st == CQ_OK; o++)
        for (int64_t co = 0; co < Cout; co++) {
            double acc = a->bias ? cq_ref_load(a->bias, co) : 0.0;
            int64_t c0 = (co / cog) * cig;
            for (int64_t j = 0; j < k; j++) {
                int64_t i = pad_index(o * a->stride + j * a->dilation - a->pad_l, L, a->mode);
                if (i < 0) continue;
                for (int64_t ci = 0; ci < cig; ci++)
                    acc += (double)w[co * K + ci * k + j] * cq_ref_load(a->x, i * Cin + c0 + ci); /* [Cout, Cin/G, k] */
            }
            cq_ref_store(a->y, o * Cout + co, (float)acc);
        }
    cq_free(w);
    return st;
}

cq_status cq_ref_conv_transpose1d(const cq_conv1d_args *a) {
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y), G = a->groups;
    int64_t cig = Cin / G, cog = Cout / G, k = a->k, s = a->stride, Lo = cq_tensor_rows(a->y);
    float *w = cq_mallocn((size_t)(Cin * cog * k), sizeof(float));
    if (!w) return CQ_ERR_NOMEM;
    cq_status st = cq_ref_matrix_rows(a->w, 0, Cin, w);
    for (int64_t o = 0; o < Lo && st == CQ_OK; o++)
        for (int64_t co = 0; co < Cout; co++) {
            double acc = a->bias ? cq_ref_load(a->bias, co) : 0.0;
            int64_t g = co / cog, col = co % cog, full = o + a->pad_l;
            /* every (i, j) with i*s + j = full: j = full - i*s in [0, k) */
            for (int64_t j = full % s; j < k; j += s) {
                int64_t i = (full - j) / s;
                if (i < 0 || i >= L) continue;
                for (int64_t ci = g * cig; ci < (g + 1) * cig; ci++)
                    acc += (double)w[(ci * cog + col) * k + j] * cq_ref_load(a->x, i * Cin + ci); /* [Cin, Cout/G, k] */
            }
            cq_ref_store(a->y, o * Cout + co, (float)acc);
        }
    cq_free(w);
    return st;
}

cq_status cq_ref_snake(cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta, bool logscale,
                       float eps) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    for (int64_t c = 0; c < C; c++) {
        double al = cq_ref_load(alpha, c), be = beta ? cq_ref_load(beta, c) : al;
        if (logscale) {
            al = exp(al);
            be = beta ? exp(be) : al;
        }
        double inv = 1.0 / (be + (double)eps);
        for (int64_t r = 0; r < R; r++) {
            double v = cq_ref_load(x, r * C + c), sn = sin(al * v);
            cq_ref_store(y, r * C + c, (float)(v + inv * sn * sn));
        }
    }
    return CQ_OK;
}
