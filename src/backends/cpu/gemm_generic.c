/*
 * gemm_generic.c — the portable kit of the CPU backend: a 4 x 16 f32
 * microkernel in plain C (the compiler may vectorise it for the baseline
 * ISA) and scalar f16/bf16 row conversions. Every other kit is tested
 * against the same reference, and this one is the fallback on any machine.
 */
#include "backends/cpu/cpu_impl.h"

enum { MR = 4, NR = 16 };

static void uk_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc) {
    float t[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) t[i][j] = acc ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++) {
        const float *ak = a + k * MR, *bk = b + k * NR;
        for (int i = 0; i < MR; i++) {
            float ai = ak[i];
            for (int j = 0; j < NR; j++) t[i][j] += ai * bk[j];
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = t[i][j];
}

static void f16_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(src + 2 * i));
}

static void bf16_row(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(src + 2 * i));
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

static const cq_cpu_kit k_generic = {
    .isa = CQ_CPU_GENERIC,
    .name = "generic",
    .mr = MR,
    .nr = NR,
    .ukernel = uk_generic,
    .f16_to_f32 = f16_row,
    .bf16_to_f32 = bf16_row,
    .dot = dot_generic,
};

const cq_cpu_kit *cq_cpu_kit_generic(void) { return &k_generic; }
