/*
 * codec_impl.h — what the codec files share and nobody else needs: the
 * tensor geometry every codec function starts from, inline scalar helpers
 * for hot loops (f16 decode, round-half-even, clamps), and the per-codec
 * decoders, encoders and validators that codec.c dispatches to.
 */
#ifndef CQ_CODEC_IMPL_H
#define CQ_CODEC_IMPL_H

#include <float.h>
#include <math.h>

#include "codec/codec.h"

/* Elements per quantization group (q4*, q1*, vbit scales, tp tiles). */
#define CQ_GROUP 32
/* Smallest normal f16: the floor of every stored encoder scale. */
#define CQ_F16_TINY 6.103515625e-05f

/* Shape facts computed once per call (see the file comment of codec.h for
 * what "rows" means per codec). */
typedef struct cq_codec_geom {
    cq_dtype dt;
    int ndim;
    const uint64_t *shape;
    uint64_t n;    /* element count (1 for ndim 0) */
    uint64_t rows; /* decoder rows */
    uint64_t cols; /* elements per decoder row */
} cq_codec_geom;

/* Fills g; fails with CQ_ERR_INVALID_ARG (ndim) or CQ_ERR_BOUNDS (product
 * overflow). */
cq_status cq_codec_geom_init(cq_codec_geom *g, cq_dtype dt, int ndim, const uint64_t *shape);
/* "[4096, 4096]" into buf, for messages. */
const char *cq_codec_shape_str(int ndim, const uint64_t *shape, char *buf, size_t len);

/* ---- inline scalar helpers -------------------------------------------- */

static inline float cq_codec_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t cq_codec_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Exact f16 -> f32. Subnormals go through an exact float multiply
 * (mantissa * 2^-24 has at most 10 significant bits). */
static inline float cq_codec_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    if (em >= 0x7c00u) return cq_codec_bits_f32(sign | 0x7f800000u | ((em & 0x3ffu) << 13)); /* inf/NaN */
    if (em >= 0x0400u) return cq_codec_bits_f32(sign | ((em << 13) + ((127u - 15u) << 23)));
    return cq_codec_bits_f32(sign | cq_codec_f32_bits((float)em * 0x1p-24f));
}

/* f32 -> f16 with the format's reference-writer rule: round-to-nearest-even
 * in the normal range; in the subnormal range ties round away from zero
 * (numpy rounds them to even; only exact ties differ). Overflow, including
 * rounding past 65504, gives +-inf; NaN becomes sign|0x7e00. */
static inline uint16_t cq_codec_f2h(float f) {
    uint32_t u = cq_codec_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    int e = (int)exp - (127 - 15);
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return sign;
        uint32_t m = mant | 0x800000u;
        unsigned shift = (unsigned)(14 - e); /* 14..24 */
        uint32_t half = m >> shift;
        uint32_t round = (m >> (shift - 1)) & 1u;
        return (uint16_t)(sign | (half + round));
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13);
    uint32_t round = (mant >> 12) & 1u;
    uint32_t sticky = (mant & 0xfffu) != 0;
    return (uint16_t)(sign | (half + (round & (sticky | (half & 1u)))));
}

static inline float cq_codec_scale16(float x) {
    float r = cq_codec_h2f(cq_codec_f2h(x));
    return r < CQ_F16_TINY ? CQ_F16_TINY : r;
}

/* clamp(round_half_even(x), lo, hi) for finite or infinite x and integer
 * bounds of magnitude < 2^22. Clamping first is equivalent (rounding is
 * monotonic and the bounds are integers) and keeps the 1.5*2^23 trick in
 * range; the trick rounds in the current mode, which is to-nearest-even. */
#if FLT_EVAL_METHOD == 0
static inline float cq_codec_rte_clamp(float x, float lo, float hi) {
    x = x < lo ? lo : (x > hi ? hi : x);
    return (x + 12582912.0f) - 12582912.0f;
}
#else
static inline float cq_codec_rte_clamp(float x, float lo, float hi) {
    x = x < lo ? lo : (x > hi ? hi : x);
    return nearbyintf(x);
}
#endif

/* ---- per-codec entry points (called by codec.c after its checks) ------ */

/* Row decoders: rows [row0, row0 + nrows) of g; the caller checked the row
 * range. They re-check the byte bounds they rely on, so an unvalidated
 * payload yields wrong numbers or an error, never an out-of-bounds read. */
typedef cq_status (*cq_codec_decode_fn)(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                                        uint64_t nrows, float *out);
cq_status cq_codec_decode_f32(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_f16(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_bf16(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_u8(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q8_row(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q8_2f(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q4_block(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q4_tiled(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q1(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q4tp(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q2tp(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_vbit(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_vbit_ro(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q1s(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);
cq_status cq_codec_decode_q1t(const cq_codec_geom *, const uint8_t *, uint64_t, uint64_t, uint64_t, float *);

/* Structural validators of the variable-size codecs (shape already checked
 * by cq_codec_check_shape). */
cq_status cq_codec_validate_vbit(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes);
cq_status cq_codec_validate_vbit_ro(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes);
cq_status cq_codec_validate_q1s(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes);
cq_status cq_codec_validate_q1t(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes);

/* Shape rule of a codec (2-D, cols % 32, ...); CQ_ERR_SHAPE with a message. */
cq_status cq_codec_check_shape(const cq_codec_geom *g);

/* Encoders: src holds g->n finite floats (checked by the caller), out holds
 * exactly the codec's nbytes. */
cq_status cq_codec_encode_f32(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_f16(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_bf16(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_q8_row(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_q8_2f(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_q4_block(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_q4_tiled(const cq_codec_geom *g, const float *src, uint8_t *out);
cq_status cq_codec_encode_q4tp(const cq_codec_geom *g, const float *src, uint8_t *out);

#endif /* CQ_CODEC_IMPL_H */
