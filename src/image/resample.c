/*
 * resample.c — separable fixed-point resizes of 8-bit images, PIL's Lanczos
 * and torch's antialiased uint8 bicubic (see resample.h for the arithmetic
 * each follows). One coefficient table per dimension: for every output
 * index the first input index, the tap count and integer weights; then a
 * horizontal pass into an 8-bit intermediate and a vertical pass.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "image/resample.h"

typedef struct taps {
    int n_out, ksize;   /* ksize: weights stored per output index */
    int *first, *count; /* per output index */
    int32_t *w;         /* n_out * ksize fixed-point weights */
    int precision;      /* fractional bits of w */
} taps;

static void taps_free(taps *t) {
    cq_free(t->first);
    cq_free(t->count);
    cq_free(t->w);
    memset(t, 0, sizeof *t);
}

/* PIL's windowed sinc, a = 3 (sin from the C library, as PIL's). */
static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos3(double x) {
    if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
    return 0.0;
}

/* PIL's bilinear_filter. */
static double triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* torch's cubic_convolution1/2 with a = -0.5, on |x|. */
static double keys_cubic(double x) {
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

static cq_status taps_make(cq_resample_filter filter, int in, int out, taps *t) {
    memset(t, 0, sizeof *t);
    const double scale = (double)in / (double)out;
    const double fscale = scale < 1.0 ? 1.0 : scale;
    const bool pil = filter != CQ_RESAMPLE_TORCH_BICUBIC_AA;
    const double support = (filter == CQ_RESAMPLE_PIL_LANCZOS ? 3.0 : filter == CQ_RESAMPLE_PIL_BILINEAR ? 1.0 : 2.0) *
                           fscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    const double inv = 1.0 / fscale;
    double *k = cq_mallocn((size_t)out, (size_t)ksize * sizeof(double));
    t->first = cq_mallocn((size_t)out, sizeof(int));
    t->count = cq_mallocn((size_t)out, sizeof(int));
    t->w = cq_mallocn((size_t)out, (size_t)ksize * sizeof(int32_t));
    if (!k || !t->first || !t->count || !t->w) {
        cq_free(k);
        taps_free(t);
        return CQ_ERR_NOMEM;
    }
    t->n_out = out;
    t->ksize = ksize;
    double wmax = 0.0;
    for (int i = 0; i < out; i++) {
        const double center = (i + 0.5) * scale;
        /* both libraries truncate toward zero after adding 0.5 */
        int lo = (int)(center - support + 0.5);
        if (lo < 0) lo = 0;
        int hi = (int)(center + support + 0.5);
        if (hi > in) hi = in;
        int n = hi - lo;
        if (n > ksize) n = ksize; /* torch clips a rounding overshoot; PIL's cannot occur here */
        if (n < 0) n = 0;
        double *ki = k + (size_t)i * (size_t)ksize;
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            const double x = (j + lo - center + 0.5) * inv;
            const double w = filter == CQ_RESAMPLE_PIL_LANCZOS    ? lanczos3(x)
                             : filter == CQ_RESAMPLE_PIL_BILINEAR ? triangle(x)
                                                                  : keys_cubic(x);
            ki[j] = w;
            sum += w;
        }
        for (int j = 0; j < n; j++) {
            if (sum != 0.0) ki[j] /= sum;
            if (ki[j] > wmax) wmax = ki[j];
        }
        for (int j = n; j < ksize; j++) ki[j] = 0.0;
        t->first[i] = lo;
        t->count[i] = n;
    }
    if (pil) {
        t->precision = 22; /* PIL: 32 - 8 - 2 bits */
    } else {
        int p = 0;
        for (p = 0; p < 22; p++)
            if ((int)(0.5 + wmax * (double)(1 << (p + 1))) >= (1 << 15)) break;
        t->precision = p;
    }
    const double one = (double)(1 << t->precision);
    for (size_t i = 0; i < (size_t)out * (size_t)ksize; i++) {
        const double v = k[i] * one;
        t->w[i] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
        if (filter == CQ_RESAMPLE_TORCH_BICUBIC_AA) t->w[i] = (int16_t)t->w[i]; /* stored as int16 */
    }
    cq_free(k);
    return CQ_OK;
}

static inline uint8_t clamp_shift(int32_t acc, int precision) {
    const int32_t v = acc >> precision; /* arithmetic: floor, as both libraries */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Rows [0, rows) of dst (dw wide) from rows [row0, row0 + rows) of src. */
static void pass_horizontal(const taps *t, const uint8_t *src, int sw, int row0, int rows, int ch, uint8_t *dst) {
    const int32_t bias = (int32_t)1 << (t->precision - 1);
    for (int y = 0; y < rows; y++) {
        const uint8_t *s = src + ((size_t)(row0 + y) * (size_t)sw) * (size_t)ch;
        uint8_t *d = dst + (size_t)y * (size_t)t->n_out * (size_t)ch;
        for (int x = 0; x < t->n_out; x++) {
            const int32_t *w = t->w + (size_t)x * (size_t)t->ksize;
            const uint8_t *p = s + (size_t)t->first[x] * (size_t)ch;
            for (int c = 0; c < ch; c++) {
                int32_t acc = bias;
                for (int j = 0; j < t->count[x]; j++) acc += (int32_t)p[(size_t)j * (size_t)ch + (size_t)c] * w[j];
                d[(size_t)x * (size_t)ch + (size_t)c] = clamp_shift(acc, t->precision);
            }
        }
    }
}

/* dst (t->n_out rows of width w) from src rows, row r of src being input row r + row0. */
static void pass_vertical(const taps *t, const uint8_t *src, int row0, int w, int ch, uint8_t *dst) {
    const int32_t bias = (int32_t)1 << (t->precision - 1);
    const size_t stride = (size_t)w * (size_t)ch;
    for (int y = 0; y < t->n_out; y++) {
        const int32_t *wt = t->w + (size_t)y * (size_t)t->ksize;
        const uint8_t *s = src + (size_t)(t->first[y] - row0) * stride;
        uint8_t *d = dst + (size_t)y * stride;
        for (size_t i = 0; i < stride; i++) {
            int32_t acc = bias;
            for (int j = 0; j < t->count[y]; j++) acc += (int32_t)s[(size_t)j * stride + i] * wt[j];
            d[i] = clamp_shift(acc, t->precision);
        }
    }
}

cq_status cq_resample_u8(cq_resample_filter filter, const uint8_t *src, int sw, int sh, int channels, uint8_t *dst,
                         int dw, int dh) {
    if ((unsigned)filter >= CQ_RESAMPLE_FILTER_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "resample: unknown filter");
    if (!src || !dst) return cq_fail(CQ_ERR_INVALID_ARG, "resample: no image");
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1 || sw > CQ_RESAMPLE_MAX_SIDE || sh > CQ_RESAMPLE_MAX_SIDE ||
        dw > CQ_RESAMPLE_MAX_SIDE || dh > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "resample: %dx%d -> %dx%d is outside 1..%d per side", sw, sh, dw, dh,
                       CQ_RESAMPLE_MAX_SIDE);
    if (channels < 1 || channels > 4) return cq_fail(CQ_ERR_INVALID_ARG, "resample: %d channels", channels);
    const size_t ch = (size_t)channels;
    const bool horiz = dw != sw, vert = dh != sh;
    if (!horiz && !vert) {
        memcpy(dst, src, (size_t)sw * (size_t)sh * ch);
        return CQ_OK;
    }
    taps th = {0}, tv = {0};
    cq_status s = CQ_OK;
    if (horiz) s = taps_make(filter, sw, dw, &th);
    if (s == CQ_OK && vert) s = taps_make(filter, sh, dh, &tv);
    if (s != CQ_OK) {
        taps_free(&th);
        taps_free(&tv);
        return s;
    }
    if (horiz && vert) {
        /* only the input rows the vertical pass reads */
        const int row0 = tv.first[0];
        const int row1 = tv.first[dh - 1] + tv.count[dh - 1];
        uint8_t *tmp = cq_mallocn((size_t)(row1 - row0), (size_t)dw * ch);
        if (!tmp) {
            s = CQ_ERR_NOMEM;
        } else {
            pass_horizontal(&th, src, sw, row0, row1 - row0, channels, tmp);
            pass_vertical(&tv, tmp, row0, dw, channels, dst);
        }
        cq_free(tmp);
    } else if (horiz) {
        pass_horizontal(&th, src, sw, 0, sh, channels, dst);
    } else {
        pass_vertical(&tv, src, 0, sw, channels, dst);
    }
    taps_free(&th);
    taps_free(&tv);
    return s;
}
