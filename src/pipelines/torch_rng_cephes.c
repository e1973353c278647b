/*
 * torch_rng_cephes.c — the float32 Box-Muller kernel torch runs on x86 CPUs
 * with AVX2 or AVX-512: Cephes-style log and sincos polynomials (torch's
 * avx_mathfun.h), evaluated one lane at a time in portable C.
 *
 * Bit-exactness rests on two things:
 *  - every step is one IEEE float operation (add, mul, sqrt, compare, bit
 *    masks, int<->float conversions), so any conforming C implementation
 *    gives the same bits: no libm anywhere;
 *  - torch's build lets GCC fuse a multiply into the add or subtract that
 *    consumes it (the intrinsics are plain vector arithmetic to GCC, compiled
 *    with -mfma and the default -ffp-contract=fast). The fusions GCC makes are
 *    written out here as fmaf(): each multiply whose only use is an add or
 *    subtract, taking the first such multiply in program order when both
 *    operands of an add are products. Separate statements keep every other
 *    operation rounded on its own, whatever the compiler's contraction mode.
 * Checked against torch 2.11 on an AVX-512 machine (tests/golden/noise).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "pipelines/torch_rng.h"

/* Float arithmetic must be done in float, not in a wider register format. */
_Static_assert(FLT_EVAL_METHOD == 0, "torch_rng needs FLT_EVAL_METHOD == 0");

static inline uint32_t f2u(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float u2f(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* _mm256_cvttps_epi32: truncate toward zero; out of range or NaN gives
 * INT32_MIN (the "integer indefinite" value). */
static inline int32_t cvtt(float x) {
    if (!(x > -2147483904.0f && x < 2147483648.0f)) return INT32_MIN;
    return (int32_t)x;
}

/* The constants are float conversions of the decimal (double) literals torch
 * writes, so they are spelled as (float)double here too. */
#define C_SQRTHF ((float)0.707106781186547524)
#define C_LOG_P0 ((float)7.0376836292E-2)
#define C_LOG_P1 ((float)-1.1514610310E-1)
#define C_LOG_P2 ((float)1.1676998740E-1)
#define C_LOG_P3 ((float)-1.2420140846E-1)
#define C_LOG_P4 ((float)+1.4249322787E-1)
#define C_LOG_P5 ((float)-1.6668057665E-1)
#define C_LOG_P6 ((float)+2.0000714765E-1)
#define C_LOG_P7 ((float)-2.4999993993E-1)
#define C_LOG_P8 ((float)+3.3333331174E-1)
#define C_LOG_Q1 ((float)-2.12194440e-4)
#define C_LOG_Q2 ((float)0.693359375)
#define C_MINUS_DP1 ((float)-0.78515625)
#define C_MINUS_DP2 ((float)-2.4187564849853515625e-4)
#define C_MINUS_DP3 ((float)-3.77489497744594108e-8)
#define C_SINCOF_P0 ((float)-1.9515295891E-4)
#define C_SINCOF_P1 ((float)8.3321608736E-3)
#define C_SINCOF_P2 ((float)-1.6666654611E-1)
#define C_COSCOF_P0 ((float)2.443315711809948E-005)
#define C_COSCOF_P1 ((float)-1.388731625493765E-003)
#define C_COSCOF_P2 ((float)4.166664568298827E-002)
#define C_FOPI ((float)1.27323954473516)

float cq_torch_cephes_logf(float x) {
    const bool invalid = x <= 0.0f; /* ordered compare: NaN is not "invalid" here */
    /* max(x, smallest normal); maxps returns its second operand when unordered */
    const float min_norm = u2f(0x00800000u);
    x = x > min_norm ? x : min_norm;
    int32_t imm0 = (int32_t)(f2u(x) >> 23);
    x = u2f((f2u(x) & ~0x7f800000u) | f2u(0.5f)); /* mantissa, scaled to [0.5, 1) */
    imm0 -= 0x7f;
    float e = (float)imm0;
    e = e + 1.0f;
    const bool below = x < C_SQRTHF;
    const float tmp0 = below ? x : 0.0f; /* bit-and with the compare mask */
    x = x - 1.0f;
    e = e - (below ? 1.0f : 0.0f);
    x = x + tmp0;

    const float z = x * x;
    float y = fmaf(C_LOG_P0, x, C_LOG_P1);
    y = fmaf(y, x, C_LOG_P2);
    y = fmaf(y, x, C_LOG_P3);
    y = fmaf(y, x, C_LOG_P4);
    y = fmaf(y, x, C_LOG_P5);
    y = fmaf(y, x, C_LOG_P6);
    y = fmaf(y, x, C_LOG_P7);
    y = fmaf(y, x, C_LOG_P8);
    y = y * x;
    /* y*z + e*q1: the first product (y*z) is the one fused */
    const float eq1 = e * C_LOG_Q1;
    y = fmaf(y, z, eq1);
    y = fmaf(-z, 0.5f, y); /* y - z*0.5 */
    x = x + y;
    x = fmaf(e, C_LOG_Q2, x);
    if (invalid) x = u2f(f2u(x) | 0xffffffffu); /* or with the all-ones mask: NaN */
    return x;
}

void cq_torch_cephes_sincosf(float x, float *s, float *c) {
    uint32_t sign_sin = f2u(x) & 0x80000000u;
    x = u2f(f2u(x) & 0x7fffffffu);
    float y = x * C_FOPI;
    int32_t imm2 = cvtt(y);
    /* j = (j + 1) & ~1, in 32-bit two's complement */
    imm2 = (int32_t)(((uint32_t)imm2 + 1u) & ~1u);
    y = (float)imm2;
    int32_t imm4 = imm2;
    const uint32_t swap_sign_sin = ((uint32_t)imm2 & 4u) << 29;
    const bool poly_sin = ((uint32_t)imm2 & 2u) == 0; /* poly_mask: all ones */

    /* x = ((x - y*DP1) - y*DP2) - y*DP3, each product fused into its add */
    x = fmaf(y, C_MINUS_DP1, x);
    x = fmaf(y, C_MINUS_DP2, x);
    x = fmaf(y, C_MINUS_DP3, x);

    imm4 = (int32_t)((uint32_t)imm4 - 2u);
    const uint32_t sign_cos = (~(uint32_t)imm4 & 4u) << 29;
    sign_sin ^= swap_sign_sin;

    const float z = x * x;
    /* cosine polynomial */
    float yc = fmaf(C_COSCOF_P0, z, C_COSCOF_P1);
    yc = fmaf(yc, z, C_COSCOF_P2);
    yc = yc * z;
    const float half_z = z * 0.5f;
    yc = fmaf(yc, z, -half_z); /* yc*z - z*0.5: the first product is fused */
    yc = yc + 1.0f;
    /* sine polynomial */
    float ys = fmaf(C_SINCOF_P0, z, C_SINCOF_P1);
    ys = fmaf(ys, z, C_SINCOF_P2);
    ys = ys * z;
    ys = fmaf(ys, x, x);

    /* select, with the same add/subtract sequence as the vector code so that
     * signed zeros come out the same */
    const float ysin2 = poly_sin ? ys : 0.0f;
    const float ysin1 = poly_sin ? 0.0f : yc;
    ys = ys - ysin2;
    yc = yc - ysin1;
    const float r_sin = ysin1 + ysin2;
    const float r_cos = yc + ys;
    *s = u2f(f2u(r_sin) ^ sign_sin);
    *c = u2f(f2u(r_cos) ^ sign_cos);
}

void cq_torch_normal16_cephes(float *d) {
    /* _mm256_set1_ps(2.0f * c10::pi<double>): the double 2*pi rounded to float */
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    float radius[8], theta[8];
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - d[j];
        const float lg = cq_torch_cephes_logf(u1);
        const float m = -2.0f * lg;
        radius[j] = sqrtf(m);
        theta[j] = two_pi * d[j + 8];
    }
    for (int j = 0; j < 8; j++) {
        float s, c;
        cq_torch_cephes_sincosf(theta[j], &s, &c);
        const float n1 = radius[j] * c;
        const float n2 = radius[j] * s;
        /* _mm256_fmadd_ps(n, std = 1, mean = 0): n exactly, -0 becomes +0 */
        d[j] = fmaf(n1, 1.0f, 0.0f);
        d[j + 8] = fmaf(n2, 1.0f, 0.0f);
    }
}
