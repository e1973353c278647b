/*
 * test_cpu_kits.c — the CPU backend's ISA kits, piece by piece, on every kit
 * this machine runs (the op test covers them end to end through the ops):
 *  - cq_cpu_expf against double exp over its whole range, with the stated
 *    bound, and every kit's vectorised exp bit for bit against it;
 *  - decoders and row helpers bit for bit against the generic kit;
 *  - microkernels (f32, bf16 pairs, grouped pairs) on integer-valued data,
 *    whose sums are exact in f32, so results must equal a double reference
 *    exactly, with odd strides, tails and both accumulate modes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_impl.h"
#include "testutil.h"

/* Max relative error of cq_cpu_expf (and so of every kit's exp) on
 * [-87.3, 88]: measured 7.5e-8 (x86-64 and AArch64), stated and asserted as
 * 1.5e-7 (about 1.3 ulp of float). */
static const double EXPF_REL_BOUND = 1.5e-7;

static const cq_cpu_kit *g_kits[CQ_CPU_ISA_COUNT];
static int g_nkits;
static tu_rng g_rng;

static bool same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static void test_expf_accuracy(void **state) {
    (void)state;
    double worst = 0.0, at = 0.0;
    const int n = 1 << 20;
    for (int i = 0; i <= n; i++) {
        float x = -87.3f * (float)i / (float)n;
        double ref = exp((double)x), got = cq_cpu_expf(x);
        double rel = fabs(got - ref) / ref;
        if (rel > worst) worst = rel, at = x;
    }
    /* near 0 the reduction is trivial; also sample positive arguments */
    for (int i = 0; i <= 4096; i++) {
        float x = 88.0f * (float)i / 4096.0f;
        double rel = fabs(cq_cpu_expf(x) - exp((double)x)) / exp((double)x);
        if (rel > worst) worst = rel, at = x;
    }
    printf("cq_cpu_expf: max relative error %.3g at x = %.7g (bound %.3g)\n", worst, at, EXPF_REL_BOUND);
    assert_true(worst <= EXPF_REL_BOUND);
    assert_true(cq_cpu_expf(0.0f) == 1.0f);
    assert_true(cq_cpu_expf(-INFINITY) == 0.0f);
    assert_true(cq_cpu_expf(-88.0f) == 0.0f); /* below the smallest normal result */
    assert_true(cq_cpu_expf(-87.3f) > 0.0f);
    assert_true(isnan(cq_cpu_expf(NAN)));
    assert_true(isfinite(cq_cpu_expf(1000.0f)));
}

static void test_exp_rows(void **state) {
    (void)state;
    float src[301], s[301], e[301];
    for (int i = 0; i < 301; i++) src[i] = -100.0f + 105.0f * tu_rng_uniform(&g_rng);
    src[7] = NAN;
    src[8] = -INFINITY;
    src[9] = 200.0f;
    for (int k = 0; k < g_nkits; k++) {
        const cq_cpu_kit *kit = g_kits[k];
        for (int n = 1; n <= 301; n += (n < 40 ? 1 : 37)) {
            const float m = 1.5f;
            memcpy(s, src, sizeof s);
            float sum = kit->exp_sum(s, n, m);
            double ref = 0.0;
            bool has_nan = false;
            for (int i = 0; i < n; i++) {
                e[i] = cq_cpu_expf(src[i] - m);
                if (!same_bits(s[i], e[i]) && !(isnan(s[i]) && isnan(e[i])))
                    fail_msg("%s exp_sum n=%d: element %d = %a, cq_cpu_expf gives %a", kit->name, n, i, s[i], e[i]);
                has_nan |= isnan(e[i]);
                ref += e[i];
            }
            if (has_nan) assert_true(isnan(sum));
            else assert_true(fabs(sum - ref) <= 1e-6 * ref);
            /* scale_max against plain C */
            memcpy(s, src, sizeof s);
            for (int i = 0; i < n; i++)
                if (isnan(s[i])) s[i] = 0.0f;
            memcpy(e, s, sizeof e);
            float mx = kit->scale_max(s, n, -0.75f), rmx = -INFINITY;
            for (int i = 0; i < n; i++) {
                e[i] *= -0.75f;
                rmx = e[i] > rmx ? e[i] : rmx;
                assert_true(same_bits(s[i], e[i]));
            }
            assert_true(same_bits(mx, rmx));
        }
    }
}

static void test_decoders(void **state) {
    (void)state;
    enum { N = 203, G = 7 };
    int8_t q[N];
    uint8_t nib[18 * G], raw[2 * N];
    float col[N], sc[G], a[32 * G], b[32 * G];
    uint16_t ha[32 * G], hb[32 * G];
    for (int i = 0; i < N; i++) q[i] = (int8_t)(tu_rng_u64(&g_rng) & 0xff), col[i] = tu_rng_normal(&g_rng);
    for (int i = 0; i < 18 * G; i++) nib[i] = (uint8_t)tu_rng_u64(&g_rng);
    for (int i = 0; i < G; i++) sc[i] = tu_rng_normal(&g_rng);
    for (int i = 0; i < 2 * N; i++) raw[i] = (uint8_t)tu_rng_u64(&g_rng);
    for (int i = 0; i < N; i++) raw[2 * i + 1] &= 0x7b; /* finite f16 / bf16 */
    const cq_cpu_kit *ref = cq_cpu_kit_generic();
    for (int k = 0; k < g_nkits; k++) {
        const cq_cpu_kit *kit = g_kits[k];
        for (int n = 1; n <= N; n += (n < 40 ? 1 : 23)) {
            for (int withcol = 0; withcol < 2; withcol++) {
                ref->i8_to_f32(q, 0.37f, withcol ? col : NULL, a, n);
                kit->i8_to_f32(q, 0.37f, withcol ? col : NULL, b, n);
                assert_memory_equal(a, b, sizeof(float) * (size_t)n);
            }
            ref->f16_to_f32(raw, a, CQ_MIN(n, 32 * G));
            kit->f16_to_f32(raw, b, CQ_MIN(n, 32 * G));
            assert_memory_equal(a, b, sizeof(float) * (size_t)CQ_MIN(n, 32 * G));
            ref->bf16_to_f32(raw, a, CQ_MIN(n, 32 * G));
            kit->bf16_to_f32(raw, b, CQ_MIN(n, 32 * G));
            assert_memory_equal(a, b, sizeof(float) * (size_t)CQ_MIN(n, 32 * G));
            if (kit->i8_to_bf16) {
                ref->i8_to_bf16(q, ha, CQ_MIN(n, 32 * G));
                kit->i8_to_bf16(q, hb, CQ_MIN(n, 32 * G));
                assert_memory_equal(ha, hb, 2 * (size_t)CQ_MIN(n, 32 * G));
                for (int i = 0; i < CQ_MIN(n, 32 * G); i++) assert_true(cq_cpu_bf2f(hb[i]) == (float)q[i]);
            }
        }
        for (int stride = 16; stride <= 18; stride += 2)
            for (int ng = 1; ng <= G; ng++) {
                ref->q4_to_f32(nib, stride, sc, a, ng);
                kit->q4_to_f32(nib, stride, sc, b, ng);
                assert_memory_equal(a, b, sizeof(float) * 32 * (size_t)ng);
                if (kit->q4_to_bf16) {
                    kit->q4_to_bf16(nib, stride, hb, ng);
                    for (int i = 0; i < 32 * ng; i++) {
                        uint8_t by = nib[stride * (i / 32) + (i % 32) / 2];
                        int v = (i & 1 ? by >> 4 : by & 15) - 8;
                        assert_true(cq_cpu_bf2f(hb[i]) == (float)v);
                    }
                }
            }
    }
}

/* Small integers, so every product and sum below is exact in f32. */
static float small_int(void) { return (float)((int)(tu_rng_u64(&g_rng) % 9) - 4); }

static void test_ukernel_f32(void **state) {
    (void)state;
    static const int kcs[] = {1, 3, 4, 5, 17, 64, 130};
    for (int k = 0; k < g_nkits; k++) {
        const cq_cpu_kit *kit = g_kits[k];
        const int MR = kit->mr, NR = kit->nr;
        for (size_t ki = 0; ki < CQ_ARRAY_LEN(kcs); ki++)
            for (int acc = 0; acc < 2; acc++) {
                int kc = kcs[ki], lda = kc + 3, ldb = NR + 5, ldc = NR + 7;
                float *A = malloc(sizeof(float) * (size_t)(MR * lda)), *B = malloc(sizeof(float) * (size_t)(kc * ldb));
                float *C = malloc(sizeof(float) * (size_t)(MR * ldc)), *R = malloc(sizeof(float) * (size_t)(MR * ldc));
                for (int i = 0; i < MR * lda; i++) A[i] = small_int();
                for (int i = 0; i < kc * ldb; i++) B[i] = small_int();
                for (int i = 0; i < MR * ldc; i++) C[i] = R[i] = small_int();
                kit->ukernel(kc, A, lda, B, ldb, C, ldc, acc);
                for (int i = 0; i < MR; i++)
                    for (int j = 0; j < ldc; j++) {
                        double r = acc || j >= NR ? R[i * ldc + j] : 0.0; /* outside the tile: untouched */
                        for (int kk = 0; kk < kc && j < NR; kk++) r += (double)A[i * lda + kk] * B[kk * ldb + j];
                        if (C[i * ldc + j] != (float)r)
                            fail_msg("%s ukernel kc=%d acc=%d: C[%d][%d] = %g, expected %g", kit->name, kc, acc, i, j,
                                     C[i * ldc + j], r);
                    }
                free(A), free(B), free(C), free(R);
            }
    }
}

static uint32_t pair_of(float lo, float hi) {
    return (uint32_t)cq_cpu_f2bf(lo) | ((uint32_t)cq_cpu_f2bf(hi) << 16);
}

static void test_ukernel_pairs(void **state) {
    (void)state;
    int tested = 0;
    for (int k = 0; k < g_nkits; k++) {
        const cq_cpu_kit *kit = g_kits[k];
        if (!kit->ukernel_pair) continue;
        tested++;
        const int MR = kit->mr2, NR = kit->nr2;
        for (int kp = 16; kp <= 48; kp += 16)
            for (int acc = 0; acc < 2; acc++) {
                int lda = kp + 1, ldb = NR + 3, ldc = NR + 2, ng = kp / 16;
                float *Af = malloc(sizeof(float) * (size_t)(MR * 2 * lda)), *Bf = malloc(sizeof(float) * (size_t)(2 * kp * ldb));
                uint32_t *A = malloc(4 * (size_t)(MR * lda)), *B = malloc(4 * (size_t)(kp * ldb));
                float *C = malloc(sizeof(float) * (size_t)(MR * ldc)), *R = malloc(sizeof(float) * (size_t)(MR * ldc));
                float *S = malloc(sizeof(float) * (size_t)(MR * ng));
                for (int i = 0; i < MR * lda; i++) {
                    Af[2 * i] = small_int(), Af[2 * i + 1] = small_int();
                    A[i] = pair_of(Af[2 * i], Af[2 * i + 1]);
                }
                for (int i = 0; i < kp * ldb; i++) {
                    Bf[2 * i] = small_int(), Bf[2 * i + 1] = small_int();
                    B[i] = pair_of(Bf[2 * i], Bf[2 * i + 1]);
                }
                for (int i = 0; i < MR * ng; i++) S[i] = ldexpf(1.0f, (int)(tu_rng_u64(&g_rng) % 5) - 2);
                for (int grouped = 0; grouped < 2; grouped++) {
                    if (grouped && !kit->ukernel_pair_grouped) continue;
                    for (int i = 0; i < MR * ldc; i++) C[i] = R[i] = small_int();
                    /* as the driver does: a kit's pair kernels run between its begin/end hooks
                     * (AMX configures its tiles there; without it the tile instructions fault) */
                    if (kit->pair_begin) kit->pair_begin();
                    if (grouped) kit->ukernel_pair_grouped(kp, 16, A, lda, B, ldb, S, ng, C, ldc, acc);
                    else kit->ukernel_pair(kp, A, lda, B, ldb, C, ldc, acc);
                    if (kit->pair_end) kit->pair_end();
                    for (int i = 0; i < MR; i++)
                        for (int j = 0; j < NR; j++) {
                            double r = acc ? R[i * ldc + j] : 0.0;
                            for (int g = 0; g < ng; g++) {
                                double t = 0.0;
                                for (int p = 16 * g; p < 16 * g + 16; p++)
                                    t += (double)Af[2 * (i * lda + p)] * Bf[2 * (p * ldb + j)] +
                                         (double)Af[2 * (i * lda + p) + 1] * Bf[2 * (p * ldb + j) + 1];
                                r += grouped ? S[i * ng + g] * t : t;
                            }
                            if (C[i * ldc + j] != (float)r)
                                fail_msg("%s pair ukernel%s kp=%d acc=%d: C[%d][%d] = %g, expected %g", kit->name,
                                         grouped ? " (grouped)" : "", kp, acc, i, j, C[i * ldc + j], r);
                        }
                }
                free(Af), free(Bf), free(A), free(B), free(C), free(R), free(S);
            }
    }
    assert_true(tested >= 1); /* the generic kit has pair kernels */
}

static int setup(void **state) {
    (void)state;
    tu_rng_seed(&g_rng, 77);
    printf("kits:");
    for (int isa = CQ_CPU_GENERIC; isa < CQ_CPU_ISA_COUNT; isa++)
        if (cq_cpu_isa_available((cq_cpu_isa)isa)) {
            g_kits[g_nkits++] = cq_cpu_kit_for((cq_cpu_isa)isa);
            printf(" %s", g_kits[g_nkits - 1]->name);
        }
    printf("\n");
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf_accuracy), cmocka_unit_test(test_exp_rows),     cmocka_unit_test(test_decoders),
        cmocka_unit_test(test_ukernel_f32),   cmocka_unit_test(test_ukernel_pairs),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
