/*
 * gemm_neon.c — the NEON (AArch64 Advanced SIMD) kit: an 8 x 8 f32
 * microkernel (16 q-register accumulators; four k steps of each A row are
 * loaded as one vector and used lane by lane with FMLA-by-element, so A rows
 * need no packing), 4-wide decoders and the attention row helpers (the
 * vectorised exp, bit-identical to cq_cpu_expf). Built on ARM64 only, where
 * Advanced SIMD is architectural. No bf16-pair kernels: BFDOT rounds its
 * intermediate sums differently from IEEE f32 accumulation, so bf16
 * activations take the f32 path here.
 */
#include <arm_neon.h>

#include "backends/cpu/cpu_impl.h"

enum { MR = 8, NR = 8 };

static void uk_neon(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                    int acc) {
    float32x4_t c0[MR], c1[MR];
    for (int i = 0; i < MR; i++) {
        c0[i] = acc ? vld1q_f32(c + i * ldc) : vdupq_n_f32(0.0f);
        c1[i] = acc ? vld1q_f32(c + i * ldc + 4) : vdupq_n_f32(0.0f);
    }
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        float32x4_t av[MR];
        for (int i = 0; i < MR; i++) av[i] = vld1q_f32(a + i * lda + k);
#define STEP(l)                                                        \
    {                                                                  \
        const float *bk = b + (k + l) * ldb;                           \
        float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4);        \
        for (int i = 0; i < MR; i++) {                                 \
            c0[i] = vfmaq_laneq_f32(c0[i], b0, av[i], l);              \
            c1[i] = vfmaq_laneq_f32(c1[i], b1, av[i], l);              \
        }                                                              \
    }
        STEP(0) STEP(1) STEP(2) STEP(3)
#undef STEP
    }
    for (; k < kc; k++) {
        const float *bk = b + k * ldb;
        float32x4_t b0 = vld1q_f32(bk), b1 = vld1q_f32(bk + 4);
        for (int i = 0; i < MR; i++) {
            c0[i] = vfmaq_n_f32(c0[i], b0, a[i * lda + k]);
            c1[i] = vfmaq_n_f32(c1[i], b1, a[i * lda + k]);
        }
    }
    for (int i = 0; i < MR; i++) {
        vst1q_f32(c + i * ldc, c0[i]);
        vst1q_f32(c + i * ldc + 4, c1[i]);
    }
}

/* ---- conversions and decoders ------------------------------------------------------------ */
static void f16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint16_t h[4];
        memcpy(h, src + 2 * i, 8);
        vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h))));
    }
    for (; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(src + 2 * i));
}

static void bf16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint16_t h[4];
        memcpy(h, src + 2 * i, 8);
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16)));
    }
    for (; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(src + 2 * i));
}

static void i8_to_f32_neon(const int8_t *q, float s, const float *col, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int16x8_t w = vmovl_s8(vld1_s8(q + i));
        float32x4_t lo = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), s);
        float32x4_t hi = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(w))), s);
        if (col) {
            lo = vmulq_f32(lo, vld1q_f32(col + i));
            hi = vmulq_f32(hi, vld1q_f32(col + i + 4));
        }
        vst1q_f32(out + i, lo);
        vst1q_f32(out + i + 4, hi);
    }
    for (; i < n; i++) out[i] = col ? ((float)q[i] * s) * col[i] : (float)q[i] * s;
}

static void q4_to_f32_neon(const uint8_t *nib, int64_t stride, const float *s, float *out, int64_t ng) {
    const uint8x16_t m = vdupq_n_u8(15);
    const int16x8_t eight = vdupq_n_s16(8);
    for (int64_t g = 0; g < ng; g++) {
        uint8x16_t bytes = vld1q_u8(nib + stride * g);
        uint8x16_t l = vandq_u8(bytes, m), h = vshrq_n_u8(bytes, 4);
        uint8x16_t v[2] = {vzip1q_u8(l, h), vzip2q_u8(l, h)}; /* element order */
        for (int q = 0; q < 2; q++) {
            int16x8_t lo = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(v[q]))), eight);
            int16x8_t hi = vsubq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(v[q]))), eight);
            float *o = out + 32 * g + 16 * q;
            vst1q_f32(o, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), s[g]));
            vst1q_f32(o + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), s[g]));
            vst1q_f32(o + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), s[g]));
            vst1q_f32(o + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), s[g]));
        }
    }
}

static float dot_neon(const float *a, const float *b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    float t = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

/* ---- attention rows -------------------------------------------------------------------- */
/* cq_cpu_expf vectorised (the same steps and constants, see gemm_generic.c). */
static inline float32x4_t exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f);
    uint32x4_t under = vcltq_f32(x, lo);
    x = vminq_f32(vmaxq_f32(x, lo), vdupq_n_f32(88.0f)); /* FMAX/FMIN keep NaN */
    float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), under));
}

static float scale_max_neon(float *s, int64_t n, float scale) {
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vmulq_n_f32(vld1q_f32(s + i), scale);
        vst1q_f32(s + i, v);
        mx = vmaxq_f32(mx, v);
    }
    float m = vmaxvq_f32(mx);
    for (; i < n; i++) {
        s[i] *= scale;
        m = s[i] > m ? s[i] : m;
    }
    return m;
}

static float exp_sum_neon(float *s, int64_t n, float m) {
    float32x4_t vm = vdupq_n_f32(m), sum = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t e = exp4(vsubq_f32(vld1q_f32(s + i), vm));
        vst1q_f32(s + i, e);
        sum = vaddq_f32(sum, e);
    }
    float t = vaddvq_f32(sum);
    for (; i < n; i++) {
        s[i] = cq_cpu_expf(s[i] - m);
        t += s[i];
    }
    return t;
}

static const cq_cpu_kit k_neon = {
    .isa = CQ_CPU_NEON,
    .name = "neon",
    .mr = MR,
    .nr = NR,
    .ukernel = uk_neon,
    .f16_to_f32 = f16_row,
    .bf16_to_f32 = bf16_row,
    .i8_to_f32 = i8_to_f32_neon,
    .q4_to_f32 = q4_to_f32_neon,
    .dot = dot_neon,
    .scale_max = scale_max_neon,
    .exp_sum = exp_sum_neon,
};

const cq_cpu_kit *cq_cpu_kit_neon(void) { return &k_neon; }
