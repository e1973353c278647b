/*
 * encode.c — the normative encoders of f32, f16, bf16, q8_row, q8_2f,
 * q4_block and q4_tiled (q4tp has its own file).
 *
 * "Normative" means byte-identical to the format's reference converter for
 * the same f32 input: scales are rounded to f16 (floored at the smallest
 * normal) before the values are quantized against them, values round half
 * to even, and the q8_2f column field is summed in f64 over fixed 256-row
 * blocks added in order, so the bytes never depend on a thread count.
 * Arithmetic is plain f32/f64 without contraction into fused multiply-adds
 * (ISO C mode for GCC; the pragma below for clang), as the reference has.
 */
#include <inttypes.h>

#include "codec/codec_impl.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

cq_status cq_codec_encode_f32(const cq_codec_geom *g, const float *src, uint8_t *out) {
    for (uint64_t i = 0; i < g->n; i++) cq_wr32(out + 4 * i, cq_codec_f32_bits(src[i]));
    return CQ_OK;
}

cq_status cq_codec_encode_f16(const cq_codec_geom *g, const float *src, uint8_t *out) {
    for (uint64_t i = 0; i < g->n; i++) cq_wr16(out + 2 * i, cq_codec_f2h(src[i]));
    return CQ_OK;
}

cq_status cq_codec_encode_bf16(const cq_codec_geom *g, const float *src, uint8_t *out) {
    for (uint64_t i = 0; i < g->n; i++) cq_wr16(out + 2 * i, cq_f32_to_bf16(src[i]));
    return CQ_OK;
}

static float absmax_of(const float *x, uint64_t n) {
    float m = 0.0f;
    for (uint64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        m = a > m ? a : m;
    }
    return m;
}

/* A scale that rounds to f16 infinity would decode every value as NaN. */
static cq_status scale_range(const char *codec, const char *what, uint64_t idx, float absmax, float scale) {
    if (isfinite(scale)) return CQ_OK;
    return cq_fail(CQ_ERR_NUMERIC, "cannot encode %s: %s %" PRIu64 " has absmax %g, beyond the f16 scale range",
                   codec, what, idx, (double)absmax);
}

/* q8_row: [int8 q: rows*cols][f16 scale: rows]; scale = f16(absmax/127),
 * q = clamp(rte(v/scale), -128, 127). */
cq_status cq_codec_encode_q8_row(const cq_codec_geom *g, const float *src, uint8_t *out) {
    const uint64_t rows = g->rows, cols = g->cols;
    for (uint64_t r = 0; r < rows; r++) {
        const float *x = src + r * cols;
        const float am = absmax_of(x, cols);
        const float s = cq_codec_scale16(am / 127.0f);
        CQ_TRY(scale_range("q8_row", "row", r, am, s));
        uint8_t *q = out + r * cols;
        for (uint64_t i = 0; i < cols; i++) q[i] = (uint8_t)(int8_t)cq_codec_rte_clamp(x[i] / s, -128.0f, 127.0f);
        cq_wr16(out + rows * cols + 2 * r, cq_codec_f2h(s));
    }
    return CQ_OK;
}

/* q8_2f column field: col[i] = max(f16(max(sqrt(mean_r v[r,i]^2), 1e-12)),
 * tiny). The f64 sum runs over fixed 256-row blocks, each block's partial
 * sums then added to the total in block order. */
#define Q8_2F_BLOCK 256

static cq_status q8_2f_columns(const cq_codec_geom *g, const float *src, float *col) {
    const uint64_t rows = g->rows, cols = g->cols;
    double *total = cq_calloc(cols, sizeof(double));
    double *blk = cq_calloc(cols, sizeof(double));
    if (!total || !blk) {
        cq_free(total);
        cq_free(blk);
        return CQ_ERR_NOMEM;
    }
    for (uint64_t r0 = 0; r0 < rows; r0 += Q8_2F_BLOCK) {
        const uint64_t r1 = rows - r0 < Q8_2F_BLOCK ? rows : r0 + Q8_2F_BLOCK;
        memset(blk, 0, cols * sizeof(double));
        for (uint64_t r = r0; r < r1; r++) {
            const float *x = src + r * cols;
            for (uint64_t i = 0; i < cols; i++) {
                const double v = (double)x[i];
                blk[i] += v * v;
            }
        }
        for (uint64_t i = 0; i < cols; i++) total[i] += blk[i];
    }
    cq_status st = CQ_OK;
    for (uint64_t i = 0; i < cols; i++) {
        double rms = sqrt(total[i] / (double)rows);
        if (!(rms >= 1e-12)) rms = 1e-12;
        col[i] = cq_codec_scale16((float)rms);
        if (!isfinite(col[i]) && st == CQ_OK)
            st = cq_fail(CQ_ERR_NUMERIC, "cannot encode q8_2f: column %" PRIu64 " has RMS %g, beyond the f16 range",
                         i, rms);
    }
    cq_free(total);
    cq_free(blk);
    return st;
}

/* q8_2f: [int8 q][f16 row_scale: rows][f16 col: cols]. Rows are quantized
 * in the column-normalised domain wn = v / col with a symmetric clamp. */
cq_status cq_codec_encode_q8_2f(const cq_codec_geom *g, const float *src, uint8_t *out) {
    const uint64_t rows = g->rows, cols = g->cols;
    if (rows == 0) return CQ_OK; /* the size rule leaves no column field then */
    float *col = cq_mallocn(cols, sizeof(float));
    if (!col) return CQ_ERR_NOMEM;
    cq_status st = q8_2f_columns(g, src, col);
    for (uint64_t r = 0; st == CQ_OK && r < rows; r++) {
        const float *x = src + r * cols;
        float am = 0.0f;
        for (uint64_t i = 0; i < cols; i++) {
            float a = fabsf(x[i] / col[i]);
            am = a > am ? a : am;
        }
        const float s = cq_codec_scale16((am > 1e-12f ? am : 1e-12f) / 127.0f);
        st = scale_range("q8_2f", "row", r, am, s);
        uint8_t *q = out + r * cols;
        for (uint64_t i = 0; st == CQ_OK && i < cols; i++)
            q[i] = (uint8_t)(int8_t)cq_codec_rte_clamp((x[i] / col[i]) / s, -127.0f, 127.0f);
        cq_wr16(out + rows * cols + 2 * r, cq_codec_f2h(s));
    }
    for (uint64_t i = 0; st == CQ_OK && i < cols; i++) cq_wr16(out + rows * cols + 2 * rows + 2 * i, cq_codec_f2h(col[i]));
    cq_free(col);
    return st;
}

/* One 32-group of the flattened tensor, zero-padded past n: its f16 scale
 * (absmax/7) and 16 nibble bytes, low nibble = even element, rte(v/s) + 8. */
static cq_status q4_group(const cq_codec_geom *g, const float *src, uint64_t gi, uint16_t *scale, uint8_t nib[16]) {
    float x[CQ_GROUP];
    const uint64_t e0 = gi * CQ_GROUP;
    for (int k = 0; k < CQ_GROUP; k++) x[k] = e0 + (uint64_t)k < g->n ? src[e0 + (uint64_t)k] : 0.0f;
    const float am = absmax_of(x, CQ_GROUP);
    const float s = cq_codec_scale16(am / 7.0f);
    CQ_TRY(scale_range(cq_dtype_name(g->dt), "group", gi, am, s));
    for (int k = 0; k < 16; k++) {
        int lo = (int)cq_codec_rte_clamp(x[2 * k] / s, -8.0f, 7.0f) + 8;
        int hi = (int)cq_codec_rte_clamp(x[2 * k + 1] / s, -8.0f, 7.0f) + 8;
        nib[k] = (uint8_t)(lo | (hi << 4));
    }
    *scale = cq_codec_f2h(s);
    return CQ_OK;
}

/* q4_block: [nibbles: 16*G][f16 scale: G]. */
cq_status cq_codec_encode_q4_block(const cq_codec_geom *g, const float *src, uint8_t *out) {
    const uint64_t groups = g->n / CQ_GROUP + (g->n % CQ_GROUP != 0);
    for (uint64_t gi = 0; gi < groups; gi++) {
        uint16_t s;
        CQ_TRY(q4_group(g, src, gi, &s, out + 16 * gi));
        cq_wr16(out + 16 * groups + 2 * gi, s);
    }
    return CQ_OK;
}

/* q4_tiled: the same groups as q4_block, as 18-byte tiles [f16 s][16 B]. */
cq_status cq_codec_encode_q4_tiled(const cq_codec_geom *g, const float *src, uint8_t *out) {
    const uint64_t groups = g->n / CQ_GROUP + (g->n % CQ_GROUP != 0);
    for (uint64_t gi = 0; gi < groups; gi++) {
        uint16_t s;
        CQ_TRY(q4_group(g, src, gi, &s, out + 18 * gi + 2));
        cq_wr16(out + 18 * gi, s);
    }
    return CQ_OK;
}
