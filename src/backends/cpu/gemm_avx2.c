/*
 * gemm_avx2.c — the AVX2 + FMA kit: a 6 x 16 f32 microkernel (12 ymm
 * accumulators, two B vectors, one broadcast per row) and F16C / shift-based
 * f16 and bf16 row conversions. Compiled with -mavx2 -mfma -mf16c; only
 * called when cq_cpu() reports AVX2, FMA and F16C.
 */
#include <immintrin.h>

#include "backends/cpu/cpu_impl.h"

enum { MR = 6, NR = 16 };

static void uk_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (acc) {
#define LD(i) c##i##0 = _mm256_loadu_ps(c + i * ldc), c##i##1 = _mm256_loadu_ps(c + i * ldc + 8)
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b + k * NR), b1 = _mm256_loadu_ps(b + k * NR + 8);
        const float *ak = a + k * MR;
#define ROW(i)                                     \
    {                                              \
        __m256 ai = _mm256_broadcast_ss(ak + i);   \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0); \
        c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1); \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
#define ST(i) _mm256_storeu_ps(c + i * ldc, c##i##0), _mm256_storeu_ps(c + i * ldc + 8, c##i##1)
    ST(0); ST(1); ST(2); ST(3); ST(4); ST(5);
#undef ST
}

static void f16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
    for (; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(src + 2 * i));
}

static void bf16_row(const uint8_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(src + 2 * i));
}

static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float t = _mm_cvtss_f32(h);
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

static const cq_cpu_kit k_avx2 = {
    .isa = CQ_CPU_AVX2,
    .name = "avx2",
    .mr = MR,
    .nr = NR,
    .ukernel = uk_avx2,
    .f16_to_f32 = f16_row,
    .bf16_to_f32 = bf16_row,
    .dot = dot_avx2,
};

const cq_cpu_kit *cq_cpu_kit_avx2(void) { return &k_avx2; }
