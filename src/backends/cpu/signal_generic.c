/*
 * signal_generic.c — the CPU backend's ops for video and audio decoders on
 * channels-last tensors: conv3d and conv1d (groups 1) as GEMMs whose im2col
 * rows are generated panel by panel (no im2col matrix exists),
 * conv_transpose1d (groups 1) as a GEMM whose rows are gathered into the
 * output, grouped conv1d and conv_transpose1d (the depthwise anti-aliasing
 * filters) as direct loops over output samples, 3-D depth-to-space and the
 * Snake activation.
 */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu_impl.h"

static inline int64_t pad_at(int64_t i, int64_t n, cq_pad_mode mode) {
    if (i >= 0 && i < n) return i;
    if (mode == CQ_PAD_REPLICATE) return i < 0 ? 0 : n - 1;
    if (mode == CQ_PAD_REFLECT) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}

static inline int64_t clamp_at(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

enum { TAPS_MAX = 64 };

/* The input voxel offset of kernel tap t for output voxel m, or -1 (a zero). */
static int64_t conv3_src(const cq_cpu_asrc *a, int64_t m, int64_t t) {
    const cq_conv3d_args *cv = a->conv3;
    int64_t ox = m % a->Wo, oy = (m / a->Wo) % a->Ho, ot = m / (a->Wo * a->Ho);
    int64_t kx = t % cv->kw, ky = (t / cv->kw) % cv->kh, dt = t / ((int64_t)cv->kw * cv->kh);
    int64_t it = clamp_at(ot * cv->stride_t + dt - cv->pad_front, cv->T);
    int64_t iy = pad_at(oy * cv->stride_y + ky - cv->pad_t, cv->H, cv->mode);
    int64_t ix = pad_at(ox * cv->stride_x + kx - cv->pad_l, cv->W, cv->mode);
    return (iy < 0 || ix < 0) ? -1 : ((it * cv->H + iy) * cv->W + ix) * a->Cin;
}

/* A panel of conv3d's im2col rows: row m is output voxel m, column k is (ci, tap) in PyTorch weight order
 * k = ci*taps + (dt*kh + ky)*kw + kx. */
static void apack_conv3(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst) {
    const cq_conv3d_args *cv = a->conv3;
    const float *x = a->x;
    const int64_t taps = (int64_t)cv->kt * cv->kh * cv->kw;
    const bool table = taps <= TAPS_MAX;
    int64_t pix[TAPS_MAX];
    for (int64_t i = 0; i < MR; i++) {
        float *d = dst + i;
        if (i >= mr) {
            for (int64_t k = 0; k < kc; k++) d[k * MR] = 0.0f;
            continue;
        }
        int64_t m = m0 + i;
        if (table) {
            /* per-axis source indices once per row, then the tap table from them */
            int64_t ox = m % a->Wo, oy = (m / a->Wo) % a->Ho, ot = m / (a->Wo * a->Ho), it[TAPS_MAX], iy[TAPS_MAX],
                    ix[TAPS_MAX];
            for (int64_t q = 0; q < cv->kt; q++) it[q] = clamp_at(ot * cv->stride_t + q - cv->pad_front, cv->T);
            for (int64_t q = 0; q < cv->kh; q++) iy[q] = pad_at(oy * cv->stride_y + q - cv->pad_t, cv->H, cv->mode);
            for (int64_t q = 0; q < cv->kw; q++) ix[q] = pad_at(ox * cv->stride_x + q - cv->pad_l, cv->W, cv->mode);
            int64_t t = 0;
            for (int64_t u = 0; u < cv->kt; u++)
                for (int64_t e = 0; e < cv->kh; e++)
                    for (int64_t f = 0; f < cv->kw; f++, t++)
                        pix[t] = (iy[e] < 0 || ix[f] < 0) ? -1 : ((it[u] * cv->H + iy[e]) * cv->W + ix[f]) * a->Cin;
        }
        int64_t ci = k0 / taps, t = k0 % taps;
        for (int64_t k = 0; k < kc; k++) {
            int64_t p = table ? pix[t] : conv3_src(a, m, t);
            d[k * MR] = p < 0 ? 0.0f : x[p + ci];
            if (++t == taps) {
                t = 0;
                ci++;
            }
        }
    }
}

cq_status cq_cpu_conv3d(cq_backend *be, const cq_conv3d_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t Cin = cq_tensor_cols(a->x), taps = (int64_t)a->kt * a->kh * a->kw;
    int64_t To = ((int64_t)a->T + a->pad_front + a->pad_back - a->kt) / a->stride_t + 1;
    int64_t Ho = ((int64_t)a->H + a->pad_t + a->pad_b - a->kh) / a->stride_y + 1;
    int64_t Wo = ((int64_t)a->W + a->pad_l + a->pad_r - a->kw) / a->stride_x + 1;
    cq_cpu_wmat w;
    CQ_TRY(cq_cpu_wmat_init(&w, a->w, cb, CQ_CPU_SCRATCH_W1));
    cq_cpu_gemm g = {
        .M = To * Ho * Wo,
        .N = w.rows,
        .K = Cin * taps,
        .w1 = &w,
        .scale = 1.0f,
        .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
        .y = cq_host_ptr(a->y),
        .ydt = a->y->dtype,
    };
    bool pointwise = taps == 1 && a->stride_t == 1 && a->stride_y == 1 && a->stride_x == 1 && !a->pad_front &&
                     !a->pad_back && !a->pad_l && !a->pad_r && !a->pad_t && !a->pad_b;
    if (pointwise)
        g.a = (cq_cpu_asrc){.pack = cq_cpu_apack_matrix, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .ld = Cin};
    else
        g.a = (cq_cpu_asrc){
            .pack = apack_conv3, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .conv3 = a, .Ho = Ho, .Wo = Wo, .Cin = Cin};
    cq_status s = cq_cpu_wmat_prepare(&w);
    if (s == CQ_OK) s = cq_cpu_gemm_run(cb, &g);
    cq_cpu_wmat_free(&w);
    return s;
}

/* ---- depth-to-space ----------------------------------------------------------------------------------- */
typedef struct d2s_ctx {
    float *y;
    const float *x;
    int64_t H, W, pt, ph, pw, C;
} d2s_ctx;

/* Input rows r = f*H + h (one row of voxels each). */
static void d2s_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const d2s_ctx *c = vc;
    int64_t P = c->pt * c->ph * c->pw, Cin = c->C * P, Ho = c->H * c->ph, Wo = c->W * c->pw;
    for (int64_t r = r0; r < r1; r++) {
        int64_t f = r / c->H, h = r % c->H;
        for (int64_t w = 0; w < c->W; w++) {
            const float *src = c->x + (r * c->W + w) * Cin;
            for (int64_t i = 0; i < c->pt; i++)
                for (int64_t j = 0; j < c->ph; j++)
                    for (int64_t d = 0; d < c->pw; d++) {
                        float *dst = c->y + (((c->pt * f + i) * Ho + c->ph * h + j) * Wo + c->pw * w + d) * c->C;
                        const float *s = src + (i * c->ph + j) * c->pw + d;
                        for (int64_t ch = 0; ch < c->C; ch++) dst[ch] = s[ch * P];
                    }
        }
    }
}

cq_status cq_cpu_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph,
                                  int pw) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    d2s_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .H = H, .W = W, .pt = pt, .ph = ph, .pw = pw,
                 .C = cq_tensor_cols(y)};
    int64_t rows = (int64_t)T * H;
    cq_cpu_parallel(cb, rows, cq_cpu_grain(cb, rows, (int64_t)W * cq_tensor_cols(x)), d2s_rows, &c);
    return CQ_OK;
}

/* ---- 1-D convolutions ----------------------------------------------------------------------------------- */
/* A panel of conv1d's im2col rows (groups 1): row m is output sample m, column k = ci*k + j. */
static void apack_conv1(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst) {
    const cq_conv1d_args *cv = a->conv1;
    const float *x = a->x;
    const int64_t taps = cv->k;
    for (int64_t i = 0; i < MR; i++) {
        float *d = dst + i;
        if (i >= mr) {
            for (int64_t k = 0; k < kc; k++) d[k * MR] = 0.0f;
            continue;
        }
        int64_t base = (m0 + i) * cv->stride - cv->pad_l;
        int64_t ci = k0 / taps, j = k0 % taps;
        for (int64_t k = 0; k < kc; k++) {
            int64_t p = pad_at(base + j * cv->dilation, a->L, cv->mode);
            d[k * MR] = p < 0 ? 0.0f : x[p * a->Cin + ci];
            if (++j == taps) {
                j = 0;
                ci++;
            }
        }
    }
}

/* The whole weight as f32 rows (for the direct loops). */
static float *decode_all(cq_cpu_backend *cb, const cq_tensor *t, cq_status *st) {
    cq_cpu_wmat w;
    *st = cq_cpu_wmat_init(&w, t, cb, CQ_CPU_SCRATCH_W1);
    if (*st != CQ_OK) return NULL;
    float *out = cq_mallocn((size_t)(w.rows * w.cols), sizeof(float));
    if (!out) {
        *st = cq_fail(CQ_ERR_NOMEM, "conv: no memory for a decoded weight of %lld x %lld", (long long)w.rows,
                      (long long)w.cols);
    } else {
        for (int64_t r = 0; r < w.rows; r++) w.decode(&w, r, 0, w.cols, out + r * w.cols);
    }
    cq_cpu_wmat_free(&w);
    return out;
}

typedef struct c1_ctx {
    const cq_conv1d_args *a;
    const float *x, *w, *bias;
    float *y;
    int64_t L, Cin, Cout;
} c1_ctx;

/* Grouped conv1d, output samples [o0, o1): w is [Cout][cig*k]. */
static void conv1_direct_rows(void *vc, int slot, int64_t o0, int64_t o1) {
    (void)slot;
    const c1_ctx *c = vc;
    const cq_conv1d_args *a = c->a;
    int64_t cig = c->Cin / a->groups, cog = c->Cout / a->groups, k = a->k;
    for (int64_t o = o0; o < o1; o++) {
        float *yr = c->y + o * c->Cout;
        for (int64_t co = 0; co < c->Cout; co++) {
            const float *wr = c->w + co * cig * k;
            const float *xg = c->x + (co / cog) * cig;
            float acc = c->bias ? c->bias[co] : 0.0f;
            for (int64_t j = 0; j < k; j++) {
                int64_t p = pad_at(o * a->stride + j * a->dilation - a->pad_l, c->L, a->mode);
                if (p < 0) continue;
                const float *xr = xg + p * c->Cin;
                for (int64_t ci = 0; ci < cig; ci++) acc += wr[ci * k + j] * xr[ci];
            }
            yr[co] = acc;
        }
    }
}

cq_status cq_cpu_conv1d(cq_backend *be, const cq_conv1d_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y), Lo = cq_tensor_rows(a->y);
    if (a->groups > 1) {
        cq_status st;
        float *w = decode_all(cb, a->w, &st);
        if (!w) return st;
        c1_ctx c = {.a = a, .x = cq_host_ptr(a->x), .w = w, .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
                    .y = cq_host_ptr(a->y), .L = L, .Cin = Cin, .Cout = Cout};
        cq_cpu_parallel(cb, Lo, cq_cpu_grain(cb, Lo, Cout * (Cin / a->groups) * a->k), conv1_direct_rows, &c);
        cq_free(w);
        return CQ_OK;
    }
    cq_cpu_wmat w;
    CQ_TRY(cq_cpu_wmat_init(&w, a->w, cb, CQ_CPU_SCRATCH_W1));
    cq_cpu_gemm g = {
        .M = Lo,
        .N = w.rows,
        .K = Cin * a->k,
        .w1 = &w,
        .scale = 1.0f,
        .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
        .y = cq_host_ptr(a->y),
        .ydt = a->y->dtype,
    };
    bool pointwise = a->k == 1 && a->stride == 1 && !a->pad_l && !a->pad_r;
    if (pointwise)
        g.a = (cq_cpu_asrc){.pack = cq_cpu_apack_matrix, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .ld = Cin};
    else
        g.a = (cq_cpu_asrc){
            .pack = apack_conv1, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .conv1 = a, .Cin = Cin, .L = L};
    cq_status s = cq_cpu_wmat_prepare(&w);
    if (s == CQ_OK) s = cq_cpu_gemm_run(cb, &g);
    cq_cpu_wmat_free(&w);
    return s;
}

/* conv_transpose1d, output samples [o0, o1): wt is [k][Cin][cog], so the innermost loop runs over contiguous
 * output channels of one group. */
static void convt_rows(void *vc, int slot, int64_t o0, int64_t o1) {
    (void)slot;
    const c1_ctx *c = vc;
    const cq_conv1d_args *a = c->a;
    int64_t G = a->groups, cig = c->Cin / G, cog = c->Cout / G, k = a->k, s = a->stride;
    for (int64_t o = o0; o < o1; o++) {
        float *yr = c->y + o * c->Cout;
        for (int64_t co = 0; co < c->Cout; co++) yr[co] = c->bias ? c->bias[co] : 0.0f;
        int64_t full = o + a->pad_l;
        for (int64_t j = full % s; j < k; j += s) {
            int64_t i = (full - j) / s;
            if (i < 0) break; /* j only grows */
            if (i >= c->L) continue;
            const float *xr = c->x + i * c->Cin, *wj = c->w + j * c->Cin * cog;
            for (int64_t ci = 0; ci < c->Cin; ci++) {
                float xv = xr[ci];
                float *yg = yr + (ci / cig) * cog;
                const float *wr = wj + ci * cog;
                for (int64_t col = 0; col < cog; col++) yg[col] += xv * wr[col];
            }
        }
    }
}

/* groups 1: Z = x · Wᵀ with Wᵀ's rows (j, co) (the kernel transposed once), so Z[i, j*Cout + co] is input sample i's
 * contribution to output sample i*stride + j - pad_l; the output rows then gather those contiguous runs. The input
 * goes through in chunks so Z stays bounded. */
typedef struct ctg_ctx {
    const cq_conv1d_args *a;
    const float *z, *bias;
    float *y;
    int64_t i0, i1, Cout, k, o_base;
    bool first;
} ctg_ctx;

static void convt_gather_rows(void *vc, int slot, int64_t o0, int64_t o1) {
    (void)slot;
    const ctg_ctx *c = vc;
    int64_t s = c->a->stride, ldz = c->k * c->Cout;
    for (int64_t o = c->o_base + o0; o < c->o_base + o1; o++) {
        float *yr = c->y + o * c->Cout;
        if (c->first)
            for (int64_t co = 0; co < c->Cout; co++) yr[co] = c->bias ? c->bias[co] : 0.0f;
        int64_t full = o + c->a->pad_l;
        for (int64_t j = full % s; j < c->k; j += s) {
            int64_t i = (full - j) / s;
            if (i < c->i0) break; /* j only grows */
            if (i >= c->i1) continue;
            const float *zr = c->z + (i - c->i0) * ldz + j * c->Cout;
            for (int64_t co = 0; co < c->Cout; co++) yr[co] += zr[co];
        }
    }
}

static cq_status convt_gemm(cq_backend *be, const cq_conv1d_args *a, const float *w) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y), k = a->k;
    int64_t N = k * Cout, Lo = cq_tensor_rows(a->y);
    int64_t chunk = CQ_MAX((int64_t)1, CQ_MIN(L, ((int64_t)1 << 23) / N)); /* Z at most ~32 MiB */
    cq_tensor wt, z;
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, N, Cin, &wt));
    cq_status st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, chunk, N, &z);
    if (st != CQ_OK) {
        cq_tensor_free(&wt);
        return st;
    }
    float *wtp = cq_host_ptr(&wt);
    for (int64_t ci = 0; ci < Cin; ci++)
        for (int64_t co = 0; co < Cout; co++)
            for (int64_t j = 0; j < k; j++) wtp[(j * Cout + co) * Cin + ci] = w[(ci * Cout + co) * k + j];
    cq_cpu_wmat wm;
    st = cq_cpu_wmat_init(&wm, &wt, cb, CQ_CPU_SCRATCH_W1);
    if (st != CQ_OK) {
        cq_tensor_free(&wt);
        cq_tensor_free(&z);
        return st;
    }
    for (int64_t i0 = 0; i0 < L; i0 += chunk) {
        int64_t n = CQ_MIN(chunk, L - i0);
        cq_cpu_gemm g = {
            .M = n,
            .N = N,
            .K = Cin,
            .w1 = &wm,
            .scale = 1.0f,
            .y = cq_host_ptr(&z),
            .ydt = CQ_DTYPE_F32,
            .a = {.pack = cq_cpu_apack_matrix, .x = (const float *)cq_host_ptr(a->x) + i0 * Cin, .dt = CQ_DTYPE_F32,
                  .ld = Cin},
        };
        st = cq_cpu_gemm_run(cb, &g);
        if (st != CQ_OK) break;
        /* the first chunk initialises every output row; later ones touch only the rows they reach */
        bool first = i0 == 0;
        int64_t lo = first ? 0 : CQ_MAX((int64_t)0, i0 * a->stride - a->pad_l);
        int64_t hi = first ? Lo : CQ_MIN(Lo, (i0 + n - 1) * a->stride + k - a->pad_l);
        ctg_ctx c = {.a = a, .z = cq_host_ptr(&z), .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
                     .y = cq_host_ptr(a->y), .i0 = i0, .i1 = i0 + n, .Cout = Cout, .k = k, .o_base = lo,
                     .first = first};
        if (hi > lo)
            cq_cpu_parallel(cb, hi - lo, cq_cpu_grain(cb, hi - lo, Cout * (k / a->stride + 1)), convt_gather_rows, &c);
    }
    cq_cpu_wmat_free(&wm);
    cq_tensor_free(&wt);
    cq_tensor_free(&z);
    return st;
}

cq_status cq_cpu_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t L = cq_tensor_rows(a->x), Cin = cq_tensor_cols(a->x), Cout = cq_tensor_cols(a->y), Lo = cq_tensor_rows(a->y);
    int64_t cog = Cout / a->groups, k = a->k;
    cq_status st;
    float *w = decode_all(cb, a->w, &st); /* [Cin][cog*k] */
    if (!w) return st;
    if (a->groups == 1) {
        st = convt_gemm(be, a, w);
        cq_free(w);
        return st;
    }
    float *wt = cq_mallocn((size_t)(Cin * cog * k), sizeof(float));
    if (!wt) {
        cq_free(w);
        return cq_fail(CQ_ERR_NOMEM, "conv_transpose1d: no memory for the reordered weight");
    }
    for (int64_t ci = 0; ci < Cin; ci++)
        for (int64_t col = 0; col < cog; col++)
            for (int64_t j = 0; j < k; j++) wt[(j * Cin + ci) * cog + col] = w[(ci * cog + col) * k + j];
    cq_free(w);
    c1_ctx c = {.a = a, .x = cq_host_ptr(a->x), .w = wt, .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
                .y = cq_host_ptr(a->y), .L = L, .Cin = Cin, .Cout = Cout};
    cq_cpu_parallel(cb, Lo, cq_cpu_grain(cb, Lo, Cin * cog * (k / a->stride + 1)), convt_rows, &c);
    cq_free(wt);
    return CQ_OK;
}

/* ---- Snake ---------------------------------------------------------------------------------------------- */
typedef struct snake_ctx {
    float *y;
    const float *x, *a, *inv;
    int64_t C;
} snake_ctx;

static void snake_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const snake_ctx *c = vc;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = c->x + r * c->C;
        float *yr = c->y + r * c->C;
        for (int64_t ch = 0; ch < c->C; ch++) {
            float v = xr[ch], s = sinf(c->a[ch] * v);
            yr[ch] = v + c->inv[ch] * s * s;
        }
    }
}

cq_status cq_cpu_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta,
                       bool logscale, float eps) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    float *t = cq_mallocn((size_t)(2 * C), sizeof(float));
    if (!t) return cq_fail(CQ_ERR_NOMEM, "snake: no memory for %lld channel factors", (long long)C);
    const float *al = cq_host_ptr(alpha), *bl = beta ? cq_host_ptr(beta) : NULL;
    for (int64_t ch = 0; ch < C; ch++) {
        double av = al[ch], bv = bl ? bl[ch] : al[ch];
        if (logscale) {
            av = exp(av);
            bv = exp(bv);
        }
        t[ch] = (float)av;
        t[C + ch] = (float)(1.0 / (bv + (double)eps)); /* the reciprocal once per channel, in double */
    }
    snake_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .a = t, .inv = t + C, .C = C};
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, C * 8), snake_rows, &c);
    cq_free(t);
    return CQ_OK;
}
