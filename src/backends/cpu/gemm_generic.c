/*
 * gemm_generic.c — the portable kit of the CPU backend, in plain C (the
 * compiler may vectorise it for the baseline ISA): a 4 x 16 f32 microkernel,
 * a bf16-pair microkernel that computes what VDPBF16PS computes (so the
 * pair path of the GEMM driver is exercised on every machine), scalar
 * decoders and the scalar exp every kit vectorises. Every other kit is
 * tested against the same reference, and this one is the fallback on any
 * machine.
 */
#include "backends/cpu/cpu_impl.h"

enum { MR = 4, NR = 16 };

/* ---- exp ------------------------------------------------------------------------------
 * x = n*ln2 + r with n = round(x*log2(e)) and r reduced with ln2 split in a
 * short high part (exact n*hi for |n| < 2^9) and a low correction; exp(r),
 * |r| <= 0.347, by its Taylor series to degree 7 (truncation < 6e-9
 * relative) in Horner form; then scaled by 2^n through the exponent bits.
 * Inputs below -87.33654 (results under the smallest normal) give 0, inputs
 * above 88 are clamped to 88; NaN stays NaN. Relative error <= 1.5e-7
 * (measured 7.5e-8; asserted in tests/unit/test_cpu_kits.c). */
float cq_cpu_expf(float x) {
    if (x != x) return x;
    if (x < -87.33654f) return 0.0f;
    if (x > 88.0f) x = 88.0f;
    float n = nearbyintf(x * 1.44269504088896341f);
    float r = fmaf(-n, 0.693359375f, x);
    r = fmaf(-n, -2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

/* ---- microkernels ------------------------------------------------------------------------ */
static void uk_generic(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                       int acc) {
    float t[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) t[i][j] = acc ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++) {
        const float *bk = b + k * ldb;
        for (int i = 0; i < MR; i++) {
            float ai = a[i * lda + k];
            for (int j = 0; j < NR; j++) t[i][j] += ai * bk[j];
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = t[i][j];
}

static inline float lo16(uint32_t v) { return cq_cpu_bf2f((uint16_t)(v & 0xffffu)); }
static inline float hi16(uint32_t v) { return cq_cpu_bf2f((uint16_t)(v >> 16)); }

/* Per lane: (c + a.hi*b.hi) + a.lo*b.lo, each product exact in f32. */
static void uk_pair_generic(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                            int64_t ldc, int acc) {
    float t[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) t[i][j] = acc ? c[i * ldc + j] : 0.0f;
    for (int64_t p = 0; p < kp; p++) {
        const uint32_t *bp = b + p * ldb;
        for (int i = 0; i < MR; i++) {
            uint32_t ai = a[i * lda + p];
            float al = lo16(ai), ah = hi16(ai);
            for (int j = 0; j < NR; j++) t[i][j] = (t[i][j] + ah * hi16(bp[j])) + al * lo16(bp[j]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = t[i][j];
}

static void uk_pair_grouped_generic(int64_t kp, int64_t gp, const uint32_t *a, int64_t lda, const uint32_t *b,
                                    int64_t ldb, const float *s, int64_t lds, float *c, int64_t ldc, int acc) {
    float t[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = acc ? c[i * ldc + j] : 0.0f;
    for (int64_t g = 0; g * gp < kp; g++) {
        uk_pair_generic(gp, a + g * gp, lda, b + g * gp * ldb, ldb, &t[0][0], NR, 0);
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) c[i * ldc + j] += t[i][j] * s[i * lds + g];
    }
}

/* ---- conversions and decoders ------------------------------------------------------------ */
static void f16_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(src + 2 * i));
}

static void bf16_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(src + 2 * i));
}

static void i8_to_f32_generic(const int8_t *q, float s, const float *col, float *out, int64_t n) {
    if (col)
        for (int64_t i = 0; i < n; i++) out[i] = ((float)q[i] * s) * col[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = (float)q[i] * s;
}

static void q4_to_f32_generic(const uint8_t *nib, int64_t stride, const float *s, float *out, int64_t ng) {
    for (int64_t g = 0; g < ng; g++)
        for (int j = 0; j < 16; j++) {
            uint8_t v = nib[stride * g + j];
            out[32 * g + 2 * j] = (float)((int)(v & 15) - 8) * s[g];
            out[32 * g + 2 * j + 1] = (float)((int)(v >> 4) - 8) * s[g];
        }
}

static void i8_to_bf16_generic(const int8_t *q, uint16_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = cq_cpu_f2bf((float)q[i]);
}

static void q4_to_bf16_generic(const uint8_t *nib, int64_t stride, uint16_t *out, int64_t ng) {
    for (int64_t g = 0; g < ng; g++)
        for (int j = 0; j < 16; j++) {
            uint8_t v = nib[stride * g + j];
            out[32 * g + 2 * j] = cq_cpu_f2bf((float)((int)(v & 15) - 8));
            out[32 * g + 2 * j + 1] = cq_cpu_f2bf((float)((int)(v >> 4) - 8));
        }
}

/* Eight independent partial sums: vectorisable without reassociation flags. */
static float dot_generic(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++) t += a[i] * b[i];
    return t;
}

static float scale_max_generic(float *s, int64_t n, float scale) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s[i] *= scale;
        mx = s[i] > mx ? s[i] : mx;
    }
    return mx;
}

static float exp_sum_generic(float *s, int64_t n, float m) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        s[i] = cq_cpu_expf(s[i] - m);
        sum += s[i];
    }
    return sum;
}

static const cq_cpu_kit k_generic = {
    .isa = CQ_CPU_GENERIC,
    .name = "generic",
    .mr = MR,
    .nr = NR,
    .ukernel = uk_generic,
    .mr2 = MR,
    .nr2 = NR,
    .ukernel_pair = uk_pair_generic,
    .ukernel_pair_grouped = uk_pair_grouped_generic,
    .f16_to_f32 = f16_row,
    .bf16_to_f32 = bf16_row,
    .i8_to_f32 = i8_to_f32_generic,
    .q4_to_f32 = q4_to_f32_generic,
    .i8_to_bf16 = i8_to_bf16_generic,
    .q4_to_bf16 = q4_to_bf16_generic,
    .dot = dot_generic,
    .scale_max = scale_max_generic,
    .exp_sum = exp_sum_generic,
};

const cq_cpu_kit *cq_cpu_kit_generic(void) { return &k_generic; }
