/*
 * half.c — scalar f16 and bf16 conversions and the encoders' scale helper.
 * The arithmetic lives in codec_impl.h as inline functions so that the row
 * loops of the codecs avoid a call per element; these are the exported
 * forms.
 */
#include "codec/codec_impl.h"

float cq_f16_to_f32(uint16_t h) { return cq_codec_h2f(h); }

uint16_t cq_f32_to_f16(float f) { return cq_codec_f2h(f); }

/* Round to nearest even; NaN keeps its sign and top mantissa bits and is
 * made quiet so truncation can never turn it into an infinity. */
uint16_t cq_f32_to_bf16(float f) {
    uint32_t u = cq_codec_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float cq_f16_round(float f) { return cq_codec_h2f(cq_codec_f2h(f)); }

/* Rounding to f16 first makes the encoder quantize against exactly the scale
 * the decoder will multiply by; the floor keeps an all-zero group's scale
 * from becoming a subnormal or zero. */
float cq_f16_scale(float x) { return cq_codec_scale16(x); }
