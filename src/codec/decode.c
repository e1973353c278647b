/*
 * decode.c — row decoders of the dense and fixed-tile codecs: f32, f16,
 * bf16, u8, q8_row, q8_2f, and the flattened 32-groups of q4_block,
 * q4_tiled and q1.
 *
 * Plain scalar code that reads every multi-byte field with byte loads
 * (payloads are unaligned inside). codec.c has checked the row range and,
 * for fixed-size codecs, that the payload is long enough.
 */
#include "codec/codec_impl.h"

/* Element range [e0, e1) of rows [row0, row0 + nrows); cannot overflow
 * because (row0 + nrows) * cols <= n. */
static void elem_range(const cq_codec_geom *g, uint64_t row0, uint64_t nrows, uint64_t *e0, uint64_t *e1) {
    *e0 = row0 * g->cols;
    *e1 = (row0 + nrows) * g->cols;
}

cq_status cq_codec_decode_f32(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                              uint64_t nrows, float *out) {
    (void)nbytes;
    uint64_t e0, e1;
    elem_range(g, row0, nrows, &e0, &e1);
    const uint8_t *s = p + e0 * 4;
    for (uint64_t i = 0; i < e1 - e0; i++) out[i] = cq_codec_bits_f32(cq_rd32(s + 4 * i));
    return CQ_OK;
}

cq_status cq_codec_decode_f16(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                              uint64_t nrows, float *out) {
    (void)nbytes;
    uint64_t e0, e1;
    elem_range(g, row0, nrows, &e0, &e1);
    const uint8_t *s = p + e0 * 2;
    for (uint64_t i = 0; i < e1 - e0; i++) out[i] = cq_codec_h2f(cq_rd16(s + 2 * i));
    return CQ_OK;
}

cq_status cq_codec_decode_bf16(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                               uint64_t nrows, float *out) {
    (void)nbytes;
    uint64_t e0, e1;
    elem_range(g, row0, nrows, &e0, &e1);
    const uint8_t *s = p + e0 * 2;
    for (uint64_t i = 0; i < e1 - e0; i++) out[i] = cq_bf16_to_f32(cq_rd16(s + 2 * i));
    return CQ_OK;
}

/* u8 blobs (config JSON) have no size rule, so this is the one place that
 * checks the length. Values come out as the numbers 0..255. */
cq_status cq_codec_decode_u8(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                             uint64_t nrows, float *out) {
    uint64_t e0, e1;
    elem_range(g, row0, nrows, &e0, &e1);
    if (e1 > nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "u8 payload is %llu bytes, rows need %llu", (unsigned long long)nbytes,
                       (unsigned long long)e1);
    for (uint64_t i = 0; i < e1 - e0; i++) out[i] = (float)p[e0 + i];
    return CQ_OK;
}

/* [int8 q: rows*cols][f16 scale: rows]; the full int8 range is valid. */
cq_status cq_codec_decode_q8_row(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                 uint64_t nrows, float *out) {
    (void)nbytes;
    const uint64_t cols = g->cols;
    const uint8_t *scales = p + g->rows * cols;
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        const float s = cq_codec_h2f(cq_rd16(scales + 2 * r));
        const int8_t *q = (const int8_t *)(p + r * cols);
        float *o = out + (r - row0) * cols;
        for (uint64_t i = 0; i < cols; i++) o[i] = (float)q[i] * s;
    }
    return CQ_OK;
}

/* [int8 q][f16 row_scale: rows][f16 col: cols]; w = (q * row_scale) * col,
 * multiplied in that order as the reference does. */
cq_status cq_codec_decode_q8_2f(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                uint64_t nrows, float *out) {
    (void)nbytes;
    const uint64_t cols = g->cols;
    const uint8_t *scales = p + g->rows * cols;
    const uint8_t *colf = scales + 2 * g->rows;
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        const float s = cq_codec_h2f(cq_rd16(scales + 2 * r));
        const int8_t *q = (const int8_t *)(p + r * cols);
        float *o = out + (r - row0) * cols;
        for (uint64_t i = 0; i < cols; i++) o[i] = ((float)q[i] * s) * cq_codec_h2f(cq_rd16(colf + 2 * i));
    }
    return CQ_OK;
}

/* ---- flattened 32-groups ------------------------------------------------- */

/* 16 nibble bytes: low nibble = even element, value nibble - 8. */
static inline void q4_group(const uint8_t *nib, float s, float *o) {
    for (int k = 0; k < 16; k++) {
        o[2 * k] = (float)((int)(nib[k] & 15) - 8) * s;
        o[2 * k + 1] = (float)((int)(nib[k] >> 4) - 8) * s;
    }
}

/* 4 bytes of sign bits, LSB-first: bit set = +s. */
static inline void q1_group(const uint8_t *bits, float s, float *o) {
    for (int j = 0; j < 4; j++)
        for (int k = 0; k < 8; k++) o[8 * j + k] = ((bits[j] >> k) & 1) ? s : -s;
}

typedef enum { FLAT_Q4_BLOCK, FLAT_Q4_TILED, FLAT_Q1 } flat_kind;

/* Groups run over the flattened tensor and may straddle rows; whole groups
 * decode in place, the partial ones at either end through a scratch group. */
static void decode_flat(flat_kind kind, const cq_codec_geom *g, const uint8_t *p, uint64_t row0, uint64_t nrows,
                        float *out) {
    uint64_t e0, e1;
    elem_range(g, row0, nrows, &e0, &e1);
    const uint64_t groups = g->n / CQ_GROUP + (g->n % CQ_GROUP != 0);
    float tmp[CQ_GROUP];
    for (uint64_t gi = e0 / CQ_GROUP; gi * CQ_GROUP < e1; gi++) {
        const uint64_t ge0 = gi * CQ_GROUP;
        const bool whole = ge0 >= e0 && ge0 + CQ_GROUP <= e1;
        float *dst = whole ? out + (ge0 - e0) : tmp;
        switch (kind) {
        case FLAT_Q4_BLOCK: q4_group(p + gi * 16, cq_codec_h2f(cq_rd16(p + groups * 16 + gi * 2)), dst); break;
        case FLAT_Q4_TILED: q4_group(p + gi * 18 + 2, cq_codec_h2f(cq_rd16(p + gi * 18)), dst); break;
        case FLAT_Q1: q1_group(p + gi * 6 + 2, cq_codec_h2f(cq_rd16(p + gi * 6)), dst); break;
        }
        if (!whole) {
            uint64_t a = ge0 > e0 ? ge0 : e0;
            uint64_t b = ge0 + CQ_GROUP < e1 ? ge0 + CQ_GROUP : e1;
            for (uint64_t e = a; e < b; e++) out[e - e0] = tmp[e - ge0];
        }
    }
}

cq_status cq_codec_decode_q4_block(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                   uint64_t nrows, float *out) {
    (void)nbytes;
    decode_flat(FLAT_Q4_BLOCK, g, p, row0, nrows, out);
    return CQ_OK;
}

cq_status cq_codec_decode_q4_tiled(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                   uint64_t nrows, float *out) {
    (void)nbytes;
    decode_flat(FLAT_Q4_TILED, g, p, row0, nrows, out);
    return CQ_OK;
}

cq_status cq_codec_decode_q1(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                             uint64_t nrows, float *out) {
    (void)nbytes;
    decode_flat(FLAT_Q1, g, p, row0, nrows, out);
    return CQ_OK;
}
