/*
 * gemm_avx512.c — the AVX-512F kit: an 8 x 32 f32 microkernel (16 zmm
 * accumulators, two B vectors, broadcast A from memory) and 16-wide f16/bf16
 * row conversions. Compiled with the AVX-512 flag set; only called when
 * cq_cpu() reports AVX-512F/BW/VL/DQ.
 */
#include <immintrin.h>

#include "backends/cpu/cpu_impl.h"

enum { MR = 8, NR = 32 };

static void uk_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc) {
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
    if (acc) {
#define LD(i) c##i##0 = _mm512_loadu_ps(c + i * ldc), c##i##1 = _mm512_loadu_ps(c + i * ldc + 16)
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5); LD(6); LD(7);
#undef LD
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
        c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b + k * NR), b1 = _mm512_loadu_ps(b + k * NR + 16);
        const float *ak = a + k * MR;
#define ROW(i)                                     \
    {                                              \
        __m512 ai = _mm512_set1_ps(ak[i]);         \
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

static const cq_cpu_kit k_avx512 = {
    .isa = CQ_CPU_AVX512,
    .name = "avx512",
    .mr = MR,
    .nr = NR,
    .ukernel = uk_avx512,
    .f16_to_f32 = f16_row,
    .bf16_to_f32 = bf16_row,
    .dot = dot_avx512,
};

const cq_cpu_kit *cq_cpu_kit_avx512(void) { return &k_avx512; }
