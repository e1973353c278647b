/*
 * gemm_avx512.c — the AVX-512 kit: an 8 x 32 f32 microkernel (16 zmm
 * accumulators; the 8 A values are broadcast straight from 8 row pointers,
 * so weight rows and query/probability rows need no packing), the bf16-pair
 * microkernels on VDPBF16PS (plain, and with per-group scales for the q4
 * codecs), 16-wide decoders and the attention row helpers (a vectorised
 * exp). Compiled with the AVX-512 flag set; only called when cq_cpu()
 * reports AVX-512F/BW/VL/DQ, and the bf16 parts only with AVX512_BF16.
 *
 * VDPBF16PS numerics: each lane adds two exact bf16 x bf16 products to the
 * f32 accumulator (round to nearest even); denormal inputs are read as zero
 * and denormal results flushed, which only affects values below 1.2e-38.
 */
#include <immintrin.h>

#include "backends/cpu/cpu_impl.h"

enum { MR = 8, NR = 32 };

/* ---- f32 microkernel ------------------------------------------------------------------ */
static void uk_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                      int acc) {
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    if (acc) {
#define LD(i) c##i##0 = _mm512_loadu_ps(c + i * ldc), c##i##1 = _mm512_loadu_ps(c + i * ldc + 16)
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5); LD(6); LD(7);
#undef LD
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
        c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    }
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    const float *a4 = a + 4 * lda, *a5 = a + 5 * lda, *a6 = a + 6 * lda, *a7 = a + 7 * lda;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
        b += ldb;
#define ROW(i)                                      \
    {                                               \
        __m512 ai = _mm512_set1_ps(a##i[k]);        \
        c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0); \
        c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1); \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
    }
#define ST(i) _mm512_storeu_ps(c + i * ldc, c##i##0), _mm512_storeu_ps(c + i * ldc + 16, c##i##1)
    ST(0); ST(1); ST(2); ST(3); ST(4); ST(5); ST(6); ST(7);
#undef ST
}

/* ---- bf16-pair microkernels ----------------------------------------------------------- */
static inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

static void uk_pair_avx512(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                           int64_t ldc, int acc) {
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    if (acc) {
#define LD(i) c##i##0 = _mm512_loadu_ps(c + i * ldc), c##i##1 = _mm512_loadu_ps(c + i * ldc + 16)
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5); LD(6); LD(7);
#undef LD
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
        c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    }
    const uint32_t *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    const uint32_t *a4 = a + 4 * lda, *a5 = a + 5 * lda, *a6 = a + 6 * lda, *a7 = a + 7 * lda;
    for (int64_t p = 0; p < kp; p++) {
        __m512bh b0 = as_bh(_mm512_loadu_si512(b)), b1 = as_bh(_mm512_loadu_si512(b + 16));
        b += ldb;
#define ROW(i)                                               \
    {                                                        \
        __m512bh ai = as_bh(_mm512_set1_epi32((int)a##i[p])); \
        c##i##0 = _mm512_dpbf16_ps(c##i##0, ai, b0);          \
        c##i##1 = _mm512_dpbf16_ps(c##i##1, ai, b1);          \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
    }
#define ST(i) _mm512_storeu_ps(c + i * ldc, c##i##0), _mm512_storeu_ps(c + i * ldc + 16, c##i##1)
    ST(0); ST(1); ST(2); ST(3); ST(4); ST(5); ST(6); ST(7);
#undef ST
}

/* Per group the products collect in 16 register accumulators t (exact bf16
 * products, f32 sums; 16 independent chains keep VDPBF16PS busy) and are
 * then scaled into C, which stays in L1 memory rather than in registers. */
static void uk_pair_grouped_avx512(int64_t kp, int64_t gp, const uint32_t *a, int64_t lda, const uint32_t *b,
                                   int64_t ldb, const float *s, int64_t lds, float *c, int64_t ldc, int acc) {
    if (!acc)
        for (int i = 0; i < MR; i++) {
            _mm512_storeu_ps(c + i * ldc, _mm512_setzero_ps());
            _mm512_storeu_ps(c + i * ldc + 16, _mm512_setzero_ps());
        }
    const uint32_t *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;
    const uint32_t *a4 = a + 4 * lda, *a5 = a + 5 * lda, *a6 = a + 6 * lda, *a7 = a + 7 * lda;
    for (int64_t g = 0, p0 = 0; p0 < kp; g++, p0 += gp) {
        __m512 t00, t01, t10, t11, t20, t21, t30, t31, t40, t41, t50, t51, t60, t61, t70, t71;
        t00 = t01 = t10 = t11 = t20 = t21 = t30 = t31 = _mm512_setzero_ps();
        t40 = t41 = t50 = t51 = t60 = t61 = t70 = t71 = _mm512_setzero_ps();
        for (int64_t p = p0; p < p0 + gp; p++) {
            __m512bh b0 = as_bh(_mm512_loadu_si512(b)), b1 = as_bh(_mm512_loadu_si512(b + 16));
            b += ldb;
#define ROW(i)                                               \
    {                                                        \
        __m512bh ai = as_bh(_mm512_set1_epi32((int)a##i[p])); \
        t##i##0 = _mm512_dpbf16_ps(t##i##0, ai, b0);          \
        t##i##1 = _mm512_dpbf16_ps(t##i##1, ai, b1);          \
    }
            ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
        }
#define SC(i)                                                                              \
    {                                                                                      \
        __m512 si = _mm512_set1_ps(s[i * lds + g]);                                        \
        _mm512_storeu_ps(c + i * ldc, _mm512_fmadd_ps(t##i##0, si, _mm512_loadu_ps(c + i * ldc)));           \
        _mm512_storeu_ps(c + i * ldc + 16, _mm512_fmadd_ps(t##i##1, si, _mm512_loadu_ps(c + i * ldc + 16))); \
    }
        SC(0) SC(1) SC(2) SC(3) SC(4) SC(5) SC(6) SC(7)
#undef SC
    }
}

/* ---- conversions and decoders --------------------------------------------------------- */
static void f16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * i))));
    for (; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(src + 2 * i));
}

static void bf16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + 2 * i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    for (; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(src + 2 * i));
}

static void i8_to_f32_avx512(const int8_t *q, float s, const float *col, float *out, int64_t n) {
    __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i))));
        v = _mm512_mul_ps(v, vs);
        if (col) v = _mm512_mul_ps(v, _mm512_loadu_ps(col + i));
        _mm512_storeu_ps(out + i, v);
    }
    for (; i < n; i++) out[i] = col ? ((float)q[i] * s) * col[i] : (float)q[i] * s;
}

/* 16 bytes of nibbles -> 32 values in element order (low nibble first), as
 * two vectors of 16 int32 in [-8, 7]. */
static inline void q4_unpack(const uint8_t *nib, __m512i *lo, __m512i *hi) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)nib);
    __m128i m = _mm_set1_epi8(15);
    __m128i l = _mm_and_si128(bytes, m), h = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
    __m512i eight = _mm512_set1_epi32(8);
    *lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(l, h)), eight);
    *hi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(l, h)), eight);
}

static void q4_to_f32_avx512(const uint8_t *nib, int64_t stride, const float *s, float *out, int64_t ng) {
    for (int64_t g = 0; g < ng; g++) {
        __m512i lo, hi;
        q4_unpack(nib + stride * g, &lo, &hi);
        __m512 vs = _mm512_set1_ps(s[g]);
        _mm512_storeu_ps(out + 32 * g, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), vs));
        _mm512_storeu_ps(out + 32 * g + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), vs));
    }
}

/* Small integers are exact in bf16: the top half of their f32 bits. */
static inline __m256i int_to_bf16(__m512i v) {
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtepi32_ps(v)), 16));
}

static void i8_to_bf16_avx512(const int8_t *q, uint16_t *out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i), int_to_bf16(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + i)))));
    for (; i < n; i++) out[i] = cq_cpu_f2bf((float)q[i]);
}

static void q4_to_bf16_avx512(const uint8_t *nib, int64_t stride, uint16_t *out, int64_t ng) {
    for (int64_t g = 0; g < ng; g++) {
        __m512i lo, hi;
        q4_unpack(nib + stride * g, &lo, &hi);
        _mm256_storeu_si256((__m256i *)(out + 32 * g), int_to_bf16(lo));
        _mm256_storeu_si256((__m256i *)(out + 32 * g + 16), int_to_bf16(hi));
    }
}

static float dot_avx512(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    if (i + 16 <= n) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        i += 16;
    }
    if (i < n) { /* masked tail */
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

/* ---- attention rows -------------------------------------------------------------------- */
/* cq_cpu_expf vectorised (the same steps and constants, see gemm_generic.c). */
static inline __m512 exp512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(lo, x); /* keeps NaN (max returns the second operand on NaN) */
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~under, y);
}

static float scale_max_avx512(float *s, int64_t n, float scale) {
    __m512 vs = _mm512_set1_ps(scale), mx = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(s + i), vs);
        _mm512_storeu_ps(s + i, v);
        mx = _mm512_max_ps(mx, v);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), vs);
        _mm512_mask_storeu_ps(s + i, m, v);
        mx = _mm512_mask_max_ps(mx, m, mx, v);
    }
    return _mm512_reduce_max_ps(mx);
}

static float exp_sum_avx512(float *s, int64_t n, float m) {
    __m512 vm = _mm512_set1_ps(m), sum = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + i), vm));
        _mm512_storeu_ps(s + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (i < n) {
        __mmask16 mk = (__mmask16)((1u << (n - i)) - 1u);
        __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + i), vm));
        _mm512_mask_storeu_ps(s + i, mk, e);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mk, e));
    }
    return _mm512_reduce_add_ps(sum);
}

/* ---- kits ------------------------------------------------------------------------------ */
#define KIT_COMMON                          \
    .mr = MR, .nr = NR, .ukernel = uk_avx512, \
    .f16_to_f32 = f16_row, .bf16_to_f32 = bf16_row, .i8_to_f32 = i8_to_f32_avx512, .q4_to_f32 = q4_to_f32_avx512, \
    .dot = dot_avx512, .scale_max = scale_max_avx512, .exp_sum = exp_sum_avx512

static const cq_cpu_kit k_avx512_bf16 = {
    .isa = CQ_CPU_AVX512,
    .name = "avx512",
    KIT_COMMON,
    .mr2 = MR,
    .nr2 = NR,
    .ukernel_pair = uk_pair_avx512,
    .ukernel_pair_grouped = uk_pair_grouped_avx512,
    .i8_to_bf16 = i8_to_bf16_avx512,
    .q4_to_bf16 = q4_to_bf16_avx512,
};

static const cq_cpu_kit k_avx512 = {
    .isa = CQ_CPU_AVX512,
    .name = "avx512",
    KIT_COMMON,
};

/* The bf16-pair kernels only where the CPU has AVX512_BF16 (Cooper Lake,
 * Sapphire Rapids, Zen 4 and later). */
const cq_cpu_kit *cq_cpu_kit_avx512(void) { return cq_cpu()->avx512bf16 ? &k_avx512_bf16 : &k_avx512; }
