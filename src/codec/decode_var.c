/*
 * decode_var.c — row decoders of the variable-size codecs: vbit and vbit_ro
 * (per-row bit widths, MSB-first codes) and the 1-bit family with sparse
 * overlays (q1s: flat-index outliers, q1t: ternary base + per-row overlay).
 *
 * These payloads carry their own tables, so each decoder re-checks the
 * bounds it relies on; validate.c is where bad payloads are named at open.
 */
#include <inttypes.h>

#include "codec/codec_impl.h"

static bool width_ok(unsigned b) { return b >= 3 && b <= 8 && b != 7; }

/* One vbit row: `cols` codes of b bits, MSB-first, from `data`; group scales
 * from `scales` (f16, one per 32 codes). w = (u - L) * s, L = 2^(b-1) - 1. */
static void vbit_row(const uint8_t *data, const uint8_t *scales, unsigned b, uint64_t cols, float *o) {
    const float L = (float)((1u << (b - 1)) - 1);
    const uint32_t mask = (1u << b) - 1;
    uint32_t acc = 0;
    unsigned nbits = 0;
    for (uint64_t gi = 0; gi < cols / CQ_GROUP; gi++) {
        const float s = cq_codec_h2f(cq_rd16(scales + 2 * gi));
        for (int k = 0; k < CQ_GROUP; k++) {
            if (nbits < b) { /* b <= 8, so one byte always suffices */
                acc = (acc << 8) | *data++;
                nbits += 8;
            }
            uint32_t u = (acc >> (nbits - b)) & mask;
            nbits -= b;
            *o++ = ((float)u - L) * s;
        }
    }
}

static uint64_t row_bytes(uint64_t cols, unsigned b) { return (cols * b + 7) / 8; }

cq_status cq_codec_decode_vbit(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                               uint64_t nrows, float *out) {
    const uint64_t gpr = g->cols / CQ_GROUP;
    uint64_t off = g->rows + 2 * g->rows * gpr; /* start of row 0's codes */
    if (nbytes < off) return cq_fail(CQ_ERR_BOUNDS, "vbit payload too short for its headers");
    for (uint64_t r = 0; r < row0 + nrows; r++) {
        unsigned b = p[r];
        if (!width_ok(b)) return cq_fail(CQ_ERR_BOUNDS, "vbit row %" PRIu64 ": bit width %u", r, b);
        uint64_t len = row_bytes(g->cols, b);
        if (len > nbytes - off) return cq_fail(CQ_ERR_BOUNDS, "vbit row %" PRIu64 " runs past the payload", r);
        if (r >= row0) vbit_row(p + off, p + g->rows + 2 * r * gpr, b, g->cols, out + (r - row0) * g->cols);
        off += len;
    }
    return CQ_OK;
}

cq_status cq_codec_decode_vbit_ro(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                  uint64_t nrows, float *out) {
    const uint64_t gpr = g->cols / CQ_GROUP;
    const uint64_t table = g->rows + 2 * g->rows * gpr, packed = table + 4 * (g->rows + 1);
    if (nbytes < packed) return cq_fail(CQ_ERR_BOUNDS, "vbit_ro payload too short for its headers");
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        unsigned b = p[r];
        if (!width_ok(b)) return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row %" PRIu64 ": bit width %u", r, b);
        uint64_t start = packed + cq_rd32(p + table + 4 * r), len = row_bytes(g->cols, b);
        if (start > nbytes || len > nbytes - start)
            return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row %" PRIu64 " runs past the payload", r);
        vbit_row(p + start, p + g->rows + 2 * r * gpr, b, g->cols, out + (r - row0) * g->cols);
    }
    return CQ_OK;
}

/* q1s = a q1 base, [u32 count], count x {u32 flat index, f16 value}; the
 * overlay overwrites, later entries winning, indices outside ignored. */
cq_status cq_codec_decode_q1s(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                              uint64_t nrows, float *out) {
    const uint64_t base = (g->n / CQ_GROUP) * 6;
    if (nbytes < base + 4) return cq_fail(CQ_ERR_BOUNDS, "q1s payload too short for its base and count");
    CQ_TRY(cq_codec_decode_q1(g, p, base, row0, nrows, out));
    const uint64_t e0 = row0 * g->cols, e1 = (row0 + nrows) * g->cols;
    const uint32_t count = cq_rd32(p + base);
    const uint8_t *ent = p + base + 4;
    const uint64_t avail = (nbytes - base - 4) / 6;
    const uint64_t m = count < avail ? count : avail;
    for (uint64_t k = 0; k < m; k++) {
        uint32_t idx = cq_rd32(ent + 6 * k);
        if (idx >= e0 && idx < e1) out[idx - e0] = cq_codec_h2f(cq_rd16(ent + 6 * k + 4));
    }
    return CQ_OK;
}

/* q1t tile: [f16 s][7 bytes, five base-3 digits each, least significant
 * first]; digit 0 -> 0, 1 -> +s, 2 -> -s. */
static void q1t_group(const uint8_t *tile, float *o) {
    const float s = cq_codec_h2f(cq_rd16(tile));
    const float lut[3] = {0.0f, s, -s};
    int k = 0;
    for (int j = 0; j < 7; j++) {
        unsigned v = tile[2 + j];
        for (int d = 0; d < 5 && k < CQ_GROUP; d++, k++) {
            o[k] = lut[v % 3];
            v /= 3;
        }
    }
}

cq_status cq_codec_decode_q1t(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                              uint64_t nrows, float *out) {
    const uint64_t gpr = g->cols / CQ_GROUP;
    const uint64_t base = g->rows * gpr * 9, entries = base + 4 * (g->rows + 1);
    if (nbytes < entries) return cq_fail(CQ_ERR_BOUNDS, "q1t payload too short for its base and row table");
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        float *o = out + (r - row0) * g->cols;
        for (uint64_t gi = 0; gi < gpr; gi++) q1t_group(p + (r * gpr + gi) * 9, o + gi * CQ_GROUP);
        uint64_t a = cq_rd32(p + base + 4 * r), b = cq_rd32(p + base + 4 * (r + 1));
        for (uint64_t k = a; k < b; k++) {
            const uint64_t e = entries + 4 * k;
            if (e + 4 > nbytes) return cq_fail(CQ_ERR_BOUNDS, "q1t row %" PRIu64 ": overlay runs past the payload", r);
            uint16_t col = cq_rd16(p + e);
            if (col < g->cols) o[col] = cq_codec_h2f(cq_rd16(p + e + 2));
        }
    }
    return CQ_OK;
}
