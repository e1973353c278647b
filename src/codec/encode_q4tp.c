/*
 * encode_q4tp.c — the normative q4tp encoder: q4 nibbles whose per-tile
 * scale is a 5-bit rung on the row's geometric ladder (see
 * decode_ladder.c for the layout), byte-compatible with the reference
 * converter, including its code refinement search.
 *
 * Per row:
 *  1. lg[g] = log2(f16_scale(absmax_g / 7)); all-zero ("dead") tiles are
 *     left out of the row's range [lo, hi], which would otherwise be
 *     stretched down to the scale floor.
 *  2. lo and step are rounded to f16 BEFORE codes are chosen, and step is
 *     bumped by f16 ulps until rung 31 covers hi (a step of 0 becomes the
 *     subnormal 0x0001).
 *  3. Nominal code = rte((lg - lo) / step); refinement tries nominal-2 ..
 *     nominal+1 and keeps the first code with the smallest squared error.
 *  4. Nibbles are quantized against the reconstructed ladder scale, by
 *     multiplying with its reciprocal as the reference does.
 */
#include "codec/codec_impl.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define LMAX 31 /* top rung */

/* Squared error of one tile quantized with scale s, summed in order in f32. */
static float tile_sse(const float *x, float s) {
    const float inv = 1.0f / s;
    float err = 0.0f;
    for (int k = 0; k < CQ_GROUP; k++) {
        const float q = cq_codec_rte_clamp(x[k] * inv, -8.0f, 7.0f);
        const float d = x[k] - q * s;
        err += d * d;
    }
    return err;
}

static cq_status encode_row(uint64_t r, const float *row, uint64_t gpr, float *lg, uint8_t *dead, uint8_t *nib, uint8_t *params,
                       uint8_t *codes) {
    float lo = INFINITY, hi = -INFINITY;
    for (uint64_t g = 0; g < gpr; g++) {
        const float *x = row + g * CQ_GROUP;
        float am = 0.0f;
        for (int k = 0; k < CQ_GROUP; k++) {
            float a = fabsf(x[k]);
            am = a > am ? a : am;
        }
        dead[g] = am == 0.0f;
        const float s = cq_codec_scale16(am / 7.0f);
        if (!isfinite(s))
            return cq_fail(CQ_ERR_NUMERIC, "cannot encode q4tp: row %llu tile %llu has absmax %g, beyond the f16 "
                           "scale range", (unsigned long long)r, (unsigned long long)g, (double)am);
        lg[g] = log2f(s);
        if (!dead[g]) {
            lo = lg[g] < lo ? lg[g] : lo;
            hi = lg[g] > hi ? lg[g] : hi;
        }
    }
    if (!isfinite(lo)) lo = hi = lg[0]; /* every tile dead */

    const uint16_t lo_h = cq_codec_f2h(lo);
    const float lo_r = cq_codec_h2f(lo_h);
    const float span = hi - lo_r > 0.0f ? hi - lo_r : 0.0f;
    uint16_t st_h = cq_codec_f2h(span / (float)LMAX);
    for (int i = 0; i < 64; i++) {
        const float st = cq_codec_h2f(st_h);
        if (st > 0.0f && lo_r + (float)LMAX * st >= hi) break;
        st_h++;
    }
    cq_wr16(params, lo_h);
    cq_wr16(params + 2, st_h);

    const float st = cq_codec_h2f(st_h);
    float t[32];
    cq_codec_q4tp_ladder(params, t);
    for (uint64_t g = 0; g < gpr; g++) {
        const float *x = row + g * CQ_GROUP;
        int c = 0;
        if (!dead[g] && st > 0.0f) {
            const int nom = (int)cq_codec_rte_clamp((lg[g] - lo_r) / st, 0.0f, (float)LMAX);
            float best = INFINITY;
            c = nom;
            const int c1 = nom + 1 < LMAX ? nom + 1 : LMAX;
            for (int cand = nom >= 2 ? nom - 2 : 0; cand <= c1; cand++) {
                if (!(t[cand] > 0.0f)) continue;
                const float e = tile_sse(x, t[cand]);
                if (e < best) {
                    best = e;
                    c = cand;
                }
            }
        }
        /* Codes are written into a zeroed row slice, LSB-first. */
        const uint64_t bit = g * 5;
        const unsigned sh = (unsigned)(bit & 7);
        codes[bit >> 3] |= (uint8_t)((unsigned)c << sh);
        if (sh > 3) codes[(bit >> 3) + 1] |= (uint8_t)((unsigned)c >> (8 - sh));

        const float inv = t[c] > 0.0f ? 1.0f / t[c] : 0.0f;
        uint8_t *d = nib + g * 16;
        for (int k = 0; k < 16; k++) {
            int q0 = (int)cq_codec_rte_clamp(x[2 * k] * inv, -8.0f, 7.0f) + 8;
            int q1 = (int)cq_codec_rte_clamp(x[2 * k + 1] * inv, -8.0f, 7.0f) + 8;
            d[k] = (uint8_t)(q0 | (q1 << 4));
        }
    }
    return CQ_OK;
}

cq_status cq_codec_encode_q4tp(const cq_codec_geom *g, const float *src, uint8_t *out) {
    const uint64_t rows = g->rows, cols = g->cols, gpr = cols / CQ_GROUP;
    const uint64_t stride = cq_codec_tp_code_stride(gpr);
    uint8_t *params = out + rows * gpr * 16;
    uint8_t *codes = params + 4 * rows;
    float *lg = cq_mallocn(gpr, sizeof(float));
    uint8_t *dead = cq_malloc(gpr);
    if (!lg || !dead) {
        cq_free(lg);
        cq_free(dead);
        return CQ_ERR_NOMEM;
    }
    memset(codes, 0, rows * stride);
    cq_status st = CQ_OK;
    for (uint64_t r = 0; r < rows && st == CQ_OK; r++)
        st = encode_row(r, src + r * cols, gpr, lg, dead, out + r * gpr * 16, params + 4 * r, codes + r * stride);
    cq_free(lg);
    cq_free(dead);
    return st;
}
