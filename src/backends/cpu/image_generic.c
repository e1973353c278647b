/*
 * image_generic.c — image ops of the CPU backend on channels-last [H*W, C]
 * tensors: conv2d (im2col generated tile by tile straight into the GEMM
 * driver's A panels, so no im2col matrix exists), nearest upsampling and
 * pixel (un)shuffle with PyTorch's channel order.
 */
#include "backends/cpu/cpu_impl.h"

/* Source coordinate of padded coordinate i for an axis of n samples; -1 is a
 * zero sample (REFLECT mirrors without repeating the edge, as PyTorch). */
static inline int64_t pad_index(int64_t i, int64_t n, cq_pad_mode mode) {
    if (i >= 0 && i < n) return i;
    if (mode == CQ_PAD_REPLICATE) return i < 0 ? 0 : n - 1;
    if (mode == CQ_PAD_REFLECT) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}

enum { CONV_TAPS_MAX = 64 };

/* A panel of im2col rows: row m is output pixel m, column k is
 * (ci, ky, kx) in PyTorch weight order k = ci*kh*kw + ky*kw + kx. */
static void apack_im2col(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst) {
    const cq_conv2d_args *cv = a->conv;
    const float *x = a->x;
    const int64_t taps = (int64_t)cv->kh * cv->kw, Cin = a->Cin;
    int64_t pix[CONV_TAPS_MAX];
    for (int64_t i = 0; i < MR; i++) {
        float *d = dst + i;
        if (i >= mr) {
            for (int64_t k = 0; k < kc; k++) d[k * MR] = 0.0f;
            continue;
        }
        int64_t m = m0 + i, oy = m / a->Wo, ox = m % a->Wo;
        /* Input pixel of each kernel tap for this output pixel (-1: zero pad). */
        for (int64_t t = 0; t < taps; t++) {
            int64_t iy = pad_index(oy * cv->stride_y + t / cv->kw - cv->pad_t, cv->H, cv->mode);
            int64_t ix = pad_index(ox * cv->stride_x + t % cv->kw - cv->pad_l, cv->W, cv->mode);
            pix[t] = (iy < 0 || ix < 0) ? -1 : (iy * cv->W + ix) * Cin;
        }
        int64_t ci = k0 / taps, t = k0 % taps;
        for (int64_t k = 0; k < kc; k++) {
            d[k * MR] = pix[t] < 0 ? 0.0f : x[pix[t] + ci];
            if (++t == taps) {
                t = 0;
                ci++;
            }
        }
    }
}

/* The same without the tap table, for kernels with more than CONV_TAPS_MAX taps. */
static void apack_im2col_large(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR,
                               float *dst) {
    const cq_conv2d_args *cv = a->conv;
    const float *x = a->x;
    const int64_t taps = (int64_t)cv->kh * cv->kw;
    for (int64_t i = 0; i < MR; i++) {
        int64_t m = m0 + i, oy = m / a->Wo, ox = m % a->Wo;
        for (int64_t k = 0; k < kc; k++) {
            float v = 0.0f;
            if (i < mr) {
                int64_t kk = k0 + k, ci = kk / taps, t = kk % taps;
                int64_t iy = pad_index(oy * cv->stride_y + t / cv->kw - cv->pad_t, cv->H, cv->mode);
                int64_t ix = pad_index(ox * cv->stride_x + t % cv->kw - cv->pad_l, cv->W, cv->mode);
                if (iy >= 0 && ix >= 0) v = x[(iy * cv->W + ix) * a->Cin + ci];
            }
            dst[k * MR + i] = v;
        }
    }
}

cq_status cq_cpu_conv2d(cq_backend *be, const cq_conv2d_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t Cin = cq_tensor_cols(a->x), taps = (int64_t)a->kh * a->kw;
    int64_t Ho = ((int64_t)a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1;
    int64_t Wo = ((int64_t)a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1;
    cq_cpu_wmat w;
    CQ_TRY(cq_cpu_wmat_init(&w, a->w, cb, CQ_CPU_SCRATCH_W1));
    cq_cpu_gemm g = {
        .M = Ho * Wo,
        .N = w.rows,
        .K = Cin * taps,
        .w1 = &w,
        .scale = 1.0f,
        .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
        .y = cq_host_ptr(a->y),
        .ydt = a->y->dtype,
    };
    bool pointwise = taps == 1 && a->stride_x == 1 && a->stride_y == 1 && !a->pad_l && !a->pad_r && !a->pad_t && !a->pad_b;
    if (pointwise) {
        g.a = (cq_cpu_asrc){.pack = cq_cpu_apack_matrix, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .ld = Cin};
    } else {
        g.a = (cq_cpu_asrc){.pack = taps <= CONV_TAPS_MAX ? apack_im2col : apack_im2col_large,
                            .x = cq_host_ptr(a->x),
                            .dt = a->x->dtype,
                            .conv = a,
                            .Wo = Wo,
                            .Cin = Cin};
    }
    cq_status s = cq_cpu_wmat_prepare(&w);
    if (s == CQ_OK) s = cq_cpu_gemm_run(cb, &g);
    cq_cpu_wmat_free(&w);
    return s;
}

/* ---- resampling --------------------------------------------------------------------------- */
typedef struct rs_ctx {
    float *y;
    const float *x;
    int64_t H, W, f, C;
} rs_ctx;

static void upsample_rows(void *vc, int slot, int64_t oy0, int64_t oy1) {
    (void)slot;
    const rs_ctx *c = vc;
    int64_t Wo = c->W * c->f;
    for (int64_t oy = oy0; oy < oy1; oy++)
        for (int64_t ox = 0; ox < Wo; ox++)
            memcpy(c->y + (oy * Wo + ox) * c->C, c->x + ((oy / c->f) * c->W + ox / c->f) * c->C,
                   sizeof(float) * (size_t)c->C);
}

cq_status cq_cpu_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    rs_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .H = H, .W = W, .f = f, .C = cq_tensor_cols(x)};
    int64_t rows = (int64_t)H * f;
    cq_cpu_parallel(cb, rows, cq_cpu_grain(cb, rows, (int64_t)W * f * c.C), upsample_rows, &c);
    return CQ_OK;
}

/* Output row oy = r*h + i of pixel_shuffle: channel c of pixel (oy, r*w + j)
 * is input channel c*r*r + i*r + j of pixel (h, w). */
static void shuffle_rows(void *vc, int slot, int64_t oy0, int64_t oy1) {
    (void)slot;
    const rs_ctx *c = vc;
    int64_t r = c->f, C = c->C, Cin = C * r * r, Wo = c->W * r;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t h = oy / r, i = oy % r;
        for (int64_t ox = 0; ox < Wo; ox++) {
            const float *src = c->x + (h * c->W + ox / r) * Cin + i * r + ox % r;
            float *dst = c->y + (oy * Wo + ox) * C;
            for (int64_t ch = 0; ch < C; ch++) dst[ch] = src[ch * r * r];
        }
    }
}

cq_status cq_cpu_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    rs_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .H = H, .W = W, .f = r, .C = cq_tensor_cols(y)};
    int64_t rows = (int64_t)H * r;
    cq_cpu_parallel(cb, rows, cq_cpu_grain(cb, rows, (int64_t)W * r * c.C), shuffle_rows, &c);
    return CQ_OK;
}

/* Output pixel row h of pixel_unshuffle gathers input rows r*h .. r*h + r-1. */
static void unshuffle_rows(void *vc, int slot, int64_t h0, int64_t h1) {
    (void)slot;
    const rs_ctx *c = vc;
    int64_t r = c->f, C = c->C, Cout = C * r * r, Wi = c->W * r;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = 0; w < c->W; w++) {
            float *dst = c->y + (h * c->W + w) * Cout;
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < r; j++) {
                    const float *src = c->x + ((r * h + i) * Wi + r * w + j) * C;
                    for (int64_t ch = 0; ch < C; ch++) dst[ch * r * r + i * r + j] = src[ch];
                }
        }
}

cq_status cq_cpu_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    rs_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .H = H, .W = W, .f = r, .C = cq_tensor_cols(x)};
    cq_cpu_parallel(cb, H, cq_cpu_grain(cb, H, (int64_t)W * r * r * c.C), unshuffle_rows, &c);
    return CQ_OK;
}
