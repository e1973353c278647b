/*
 * decode_ladder.c — the per-row geometric scale ladder of q4tp and q2tp and
 * their row decoders.
 *
 * Payload: plane A (weights: 16 bytes of nibbles per q4tp tile, 8 bytes of
 * 2-bit codes per q2tp tile), plane B (rows x [f16 lo][f16 step]), plane C
 * (rows x ceil(5*gpr/8) bytes of 5-bit rung codes, LSB-first). The planes
 * are whole-tensor, not interleaved per row.
 */
#include "codec/codec_impl.h"

/* exp2f then a chain of f32 multiplies: the format defines the ladder this
 * way so every decoder lands on the same bits; exp2(lo + c*step) would not. */
void cq_codec_q4tp_ladder(const uint8_t params[4], float t[32]) {
    const float lo = cq_codec_h2f(cq_rd16(params));
    const float step = cq_codec_h2f(cq_rd16(params + 2));
    const float ratio = exp2f(step);
    t[0] = exp2f(lo);
    for (int c = 1; c < 32; c++) t[c] = t[c - 1] * ratio;
}

/* Rung 0 is an exact +0 (pruned groups); the rest is the q4tp ladder moved
 * up one rung, so code 31 is 2^(lo + 30*step). */
void cq_codec_q2tp_ladder(const uint8_t params[4], float t[32]) {
    float t4[32];
    cq_codec_q4tp_ladder(params, t4);
    t[0] = 0.0f;
    for (int c = 1; c < 32; c++) t[c] = t4[c - 1];
}

typedef struct tp_planes {
    const uint8_t *weights, *params, *codes;
    uint64_t gpr, stride, tile_bytes;
} tp_planes;

static tp_planes tp_layout(const cq_codec_geom *g, const uint8_t *p, uint64_t tile_bytes) {
    tp_planes t;
    t.gpr = g->cols / CQ_GROUP;
    t.stride = cq_codec_tp_code_stride(t.gpr);
    t.tile_bytes = tile_bytes;
    t.weights = p;
    t.params = p + g->rows * t.gpr * tile_bytes;
    t.codes = t.params + 4 * g->rows;
    return t;
}

cq_status cq_codec_decode_q4tp(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                               uint64_t nrows, float *out) {
    (void)nbytes;
    const tp_planes pl = tp_layout(g, p, 16);
    float t[32];
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        cq_codec_q4tp_ladder(pl.params + 4 * r, t);
        const uint8_t *codes = pl.codes + r * pl.stride;
        float *o = out + (r - row0) * g->cols;
        for (uint64_t gi = 0; gi < pl.gpr; gi++) {
            const float s = t[cq_codec_tp_code(codes, gi)];
            const uint8_t *nib = pl.weights + (r * pl.gpr + gi) * 16;
            float *d = o + gi * CQ_GROUP;
            for (int k = 0; k < 16; k++) {
                d[2 * k] = (float)((int)(nib[k] & 15) - 8) * s;
                d[2 * k + 1] = (float)((int)(nib[k] >> 4) - 8) * s;
            }
        }
    }
    return CQ_OK;
}

/* Weight j of a byte sits in bits 2j..2j+1; w = (c - 1.5) * s, so on rung 0
 * codes 0 and 1 give -0.0 and codes 2 and 3 give +0.0. */
cq_status cq_codec_decode_q2tp(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                               uint64_t nrows, float *out) {
    (void)nbytes;
    const tp_planes pl = tp_layout(g, p, 8);
    float t[32];
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        cq_codec_q2tp_ladder(pl.params + 4 * r, t);
        const uint8_t *codes = pl.codes + r * pl.stride;
        float *o = out + (r - row0) * g->cols;
        for (uint64_t gi = 0; gi < pl.gpr; gi++) {
            const float s = t[cq_codec_tp_code(codes, gi)];
            const uint8_t *w = pl.weights + (r * pl.gpr + gi) * 8;
            float *d = o + gi * CQ_GROUP;
            for (int k = 0; k < 8; k++)
                for (int j = 0; j < 4; j++) d[4 * k + j] = ((float)((w[k] >> (2 * j)) & 3) - 1.5f) * s;
        }
    }
    return CQ_OK;
}
