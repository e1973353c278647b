/*
 * codec.h — element codecs of CMF v2: the size rule for every dtype id,
 * f16/bf16 scalar conversion, and for each supported codec the normative
 * encoder ("quantize") and a row decoder to f32.
 *
 * Layout facts (see docs/FORMAT.md): payloads are little-endian and are NOT
 * aligned internally (q8_row scales start at rows*cols), so decoders read
 * multi-byte fields with memcpy-style loads, never by casting.
 *
 * "Row" means: for 2-D tensors, row r of shape [rows, cols]; for codecs whose
 * groups run over the flattened tensor (q4_block, q4_tiled, q1) a row is a
 * range [r*cols, (r+1)*cols) of the flattened elements, which is the same
 * thing for 2-D tensors. 1-D tensors are one row of nelem elements; N-D
 * tensors (N > 2) are rows of shape[N-1] elements.
 */
#ifndef CQ_CODEC_H
#define CQ_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* ---- scalar conversions -------------------------------------------------- */
float cq_f16_to_f32(uint16_t h);          /* exact, subnormals included */
/* Round-to-nearest-even in the normal range; in the subnormal range exact
 * ties round away from zero, as the format's reference writer does (numpy
 * rounds them to even). Overflow, including rounding past 65504, gives
 * +-inf; NaN becomes sign|0x7e00 (payload dropped). */
uint16_t cq_f32_to_f16(float f);
static inline float cq_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t cq_f32_to_bf16(float f);         /* round-to-nearest-even, NaN kept quiet */
float cq_f16_round(float f);              /* f32 -> f16 -> f32 */
/* The encoders' scale helper: max(f16_round(x), 6.1035156e-5). */
float cq_f16_scale(float x);

static inline uint16_t cq_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t cq_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t cq_rd64(const uint8_t *p) { return (uint64_t)cq_rd32(p) | ((uint64_t)cq_rd32(p + 4) << 32); }
static inline void cq_wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void cq_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cq_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- codec table --------------------------------------------------------- */
typedef enum cq_codec_size_kind {
    CQ_SIZE_FIXED,    /* nbytes is a function of the shape */
    CQ_SIZE_VARIABLE, /* validated structurally (vbit, vbit_ro, q1s, q1t) */
    CQ_SIZE_UNCHECKED /* reserved ids and u8: any length accepted at open */
} cq_codec_size_kind;

/* Expected payload size for a fixed-size codec. Fails with CQ_ERR_SHAPE when
 * the shape is not valid for the codec (e.g. q4tp needs 2-D, cols % 32 == 0)
 * and CQ_ERR_BOUNDS on overflow. For variable/unchecked codecs returns
 * CQ_ERR_UNSUPPORTED (the caller then uses cq_codec_validate). */
cq_status cq_codec_nbytes(cq_dtype dt, int ndim, const uint64_t *shape, uint64_t *out);
cq_codec_size_kind cq_codec_size_kind_of(cq_dtype dt);

/* Structural validation of a payload (sizes of every internal table, offset
 * tables, widths). Used by the reader at open for every tensor. */
cq_status cq_codec_validate(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *payload, uint64_t nbytes);

/* Can this build decode / encode the codec? (q2tp/vbit/q1* decode may be
 * supported while encoding is not.) */
bool cq_codec_can_decode(cq_dtype dt);
bool cq_codec_can_encode(cq_dtype dt);

/* Rows and row length as the decoders see them (see the file comment). */
void cq_codec_rows(int ndim, const uint64_t *shape, uint64_t *rows, uint64_t *cols);

/* Decode rows [row0, row0+nrows) into out (nrows*cols floats). The payload
 * must have passed cq_codec_validate. */
cq_status cq_codec_dequant_rows(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *payload,
                                uint64_t nbytes, uint64_t row0, uint64_t nrows, float *out);

/* Encode a whole f32 tensor with the normative encoder. `out` must hold
 * cq_codec_nbytes() bytes. */
cq_status cq_codec_quantize(cq_dtype dt, int ndim, const uint64_t *shape, const float *src, uint8_t *out,
                            uint64_t out_len);

/* Per-codec lattice bound used by tests and `convert` reporting: an upper
 * bound of |w - dequant(quant(w))| relative to the row's (or group's) absmax,
 * e.g. 0.5/127 for q8_row, with the slack of the f16-rounded scale included.
 *  - Quantized codecs: holds for groups whose absmax/qmax is at least the
 *    smallest normal f16 (2^-14); below that the scale floor makes the
 *    absolute error at most 2^-15.
 *  - f16 / bf16: relative to each value, normal range.
 *  - q8_2f: in the column-normalised domain (w[i] / col[i]).
 *  - q4tp: for a ladder step of 0; cq_codec_q4tp_rel_bound gives the bound
 *    for a row's actual step.
 * 0 for lossless codecs (f32, u8) and codecs this build cannot encode. */
double cq_codec_rel_error_bound(cq_dtype dt);

/* q4tp bound for a row whose decoded ladder step is `step` (log2 units):
 * the encoder picks a rung near absmax/7 and its refinement may move up to
 * two rungs down (clipping the largest weight) or one up, so the worst case
 * is max(ratio^1.5 / 14, 1 - ratio^-2.5) of the group's absmax, ratio =
 * 2^step, plus f16 rounding of lo. */
double cq_codec_q4tp_rel_bound(float step);

/* ---- q4tp / q2tp ladder (shared with the matmul kernels) ---------------- */
/* The 32 rung scales of one row from its 4 param bytes [f16 lo][f16 step]:
 * t[0] = exp2f(lo), t[c] = t[c-1] * exp2f(step), all f32. This chain is the
 * format's definition; the closed form exp2(lo + c*step) differs in the last
 * bits. exp2f is the C library's: glibc's is what the reference gets on
 * Linux (bit-identical); other libms may differ by an ulp (~1e-7 relative). */
void cq_codec_q4tp_ladder(const uint8_t params[4], float t[32]);
/* q2tp: t2[0] = +0 (an exact-zero rung), t2[c] = q4tp t[c-1]. */
void cq_codec_q2tp_ladder(const uint8_t params[4], float t[32]);
/* Row stride in bytes of the 5-bit code plane: ceil(5*gpr/8). */
static inline uint64_t cq_codec_tp_code_stride(uint64_t gpr) { return (gpr * 5 + 7) / 8; }
/* 5-bit LSB-first code g of a q4tp/q2tp row slice. The row stride
 * ceil(5*gpr/8) guarantees the second byte exists when the field spills. */
static inline unsigned cq_codec_tp_code(const uint8_t *codes, uint64_t g) {
    uint64_t bit = g * 5;
    uint64_t b = bit >> 3;
    unsigned sh = (unsigned)(bit & 7);
    unsigned v = codes[b];
    if (sh > 3) v |= (unsigned)codes[b + 1] << 8;
    return (v >> sh) & 31u;
}

#endif /* CQ_CODEC_H */
