/*
 * gemm_avx2.c — the AVX2 + FMA kit: a 6 x 16 f32 microkernel (12 ymm
 * accumulators, two B vectors, A broadcast from 6 row pointers), F16C /
 * shift-based f16 and bf16 row conversions, 8-wide decoders and the
 * attention row helpers (vectorised exp). No bf16 dot product exists in
 * AVX2, so bf16 activations take the f32 path here. Compiled with -mavx2
 * -mfma -mf16c; only called when cq_cpu() reports AVX2, FMA and F16C.
 */
#include <immintrin.h>

#include "backends/cpu/cpu_impl.h"

enum { MR = 6, NR = 16 };

static void uk_avx2(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                    int acc) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (acc) {
#define LD(i) c##i##0 = _mm256_loadu_ps(c + i * ldc), c##i##1 = _mm256_loadu_ps(c + i * ldc + 8)
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5);
#undef LD
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda, *a5 = a + 5 * lda;
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        b += ldb;
#define ROW(i)                                      \
    {                                               \
        __m256 ai = _mm256_broadcast_ss(a##i + k);  \
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

static void i8_to_f32_avx2(const int8_t *q, float s, const float *col, float *out, int64_t n) {
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i))));
        v = _mm256_mul_ps(v, vs);
        if (col) v = _mm256_mul_ps(v, _mm256_loadu_ps(col + i));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++) out[i] = col ? ((float)q[i] * s) * col[i] : (float)q[i] * s;
}

static void q4_to_f32_avx2(const uint8_t *nib, int64_t stride, const float *s, float *out, int64_t ng) {
    const __m128i m = _mm_set1_epi8(15);
    const __m256i eight = _mm256_set1_epi32(8);
    for (int64_t g = 0; g < ng; g++) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(nib + stride * g));
        __m128i l = _mm_and_si128(bytes, m), h = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
        __m128i v0 = _mm_unpacklo_epi8(l, h), v1 = _mm_unpackhi_epi8(l, h); /* element order */
        __m256 vs = _mm256_set1_ps(s[g]);
        __m128i parts[4] = {v0, _mm_srli_si128(v0, 8), v1, _mm_srli_si128(v1, 8)};
        for (int q = 0; q < 4; q++) {
            __m256i w = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[q]), eight);
            _mm256_storeu_ps(out + 32 * g + 8 * q, _mm256_mul_ps(_mm256_cvtepi32_ps(w), vs));
        }
    }
}

static float hsum256(__m256 s) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float t = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

/* cq_cpu_expf vectorised (the same steps and constants, see gemm_generic.c). */
static inline __m256 exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x); /* keeps NaN (max returns the second operand on NaN) */
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static float scale_max_avx2(float *s, int64_t n, float scale) {
    __m256 vs = _mm256_set1_ps(scale), mx = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), vs);
        _mm256_storeu_ps(s + i, v);
        mx = _mm256_max_ps(mx, v);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float m = _mm_cvtss_f32(h);
    for (; i < n; i++) {
        s[i] *= scale;
        m = s[i] > m ? s[i] : m;
    }
    return m;
}

static float exp_sum_avx2(float *s, int64_t n, float m) {
    __m256 vm = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
        _mm256_storeu_ps(s + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float t = hsum256(sum);
    for (; i < n; i++) {
        s[i] = cq_cpu_expf(s[i] - m);
        t += s[i];
    }
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
    .i8_to_f32 = i8_to_f32_avx2,
    .q4_to_f32 = q4_to_f32_avx2,
    .dot = dot_avx2,
    .scale_max = scale_max_avx2,
    .exp_sum = exp_sum_avx2,
};

const cq_cpu_kit *cq_cpu_kit_avx2(void) { return &k_avx2; }
