/*
 * test_qi21_cuda.c — the Qwen-Image-2.1 denoiser on the CUDA backend
 * against the reference's golden velocities (tests/golden/qi21, made by
 * tools/golden_qi21.py with diffusers), label gpu:
 *  - every golden case, cached (prefill + step) and uncached, with the model
 *    converted to f32: max|err| / RMS(ref) and RMS(err) / RMS(ref) <= 3e-3
 *    (the device rounds GEMM operands to f16 and, at head_dim 128, attention
 *    operands to bf16); cached and uncached agree to the same bound;
 *  - the bf16, q8_2f and q4tp converts: within 3e-3 of RMS(ref) of the CPU
 *    backend running the same file (the device's own error, apart from the
 *    weights' quantization), and within quantization bounds of the reference
 *    (bf16 weights alone cost ~1e-2 of max|err| / RMS, measured on the CPU);
 *  - two caches alive at once give bit-identical steps (no state leaks
 *    between caches, deterministic kernels); as a cache's second step is
 *    recorded and later ones replay the recording (CUDA graphs), this also
 *    holds replays, with other timesteps in between, to the direct step;
 *  - after the first step of a cache (and the second, which makes the
 *    recording), a step allocates nothing, on the host (the allocation
 *    counter) or on the device (cudaMalloc calls).
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qi21_golden.h"
#include "backends/cuda/cuda.h"
#include "testutil.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/qi21.h"
#include "models/qi21_inputs.h"


/* max|err| / RMS(ref) and RMS(err) / RMS(ref); the bound for f16/bf16 device arithmetic */
#define DEVICE_BOUND 3e-3

enum { Q_F32, Q_BF16, Q_Q8_2F, Q_Q4TP, Q_COUNT };
static const cq_dtype k_quant[Q_COUNT] = {CQ_DTYPE_F32, CQ_DTYPE_BF16, CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4TP};
/* vs the reference: the f32 convert is the device's arithmetic alone; the
 * others add their weights' quantization (bf16 measured on the CPU at
 * 9.8e-3 / 2.9e-3, q8_2f and q4tp as test_qi21.c bounds them) */
static const double k_bound[Q_COUNT] = {DEVICE_BOUND, 2e-2, 8e-2, 1.0};
static const double k_rms_bound[Q_COUNT] = {DEVICE_BOUND, 6e-3, 2e-2, 0.3};

typedef qg_case golden_case;

static char g_dir[1024];
static cq_backend *g_be, *g_cpu;
static cq_cmf *g_cmf[Q_COUNT][QG_MODELS];
static cq_qi21 *g_model[Q_COUNT][QG_MODELS];
static cq_qi21 *g_cpu_model[Q_COUNT][QG_MODELS]; /* the same files on the CPU backend */
static qg_set g_set;

static size_t vel_len(const golden_case *g) {
    return (size_t)g->in.n_target * (size_t)cq_qi21_get_config(g_model[0][g->model])->out_channels;
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s", tu_tmpdir("qi21_cuda"));
    if (cq_backend_cuda_create(-1, &g_be) != CQ_OK || cq_backend_cpu_create(0, CQ_CPU_AUTO, &g_cpu) != CQ_OK) return -1;
    printf("qi21 golden cases on %s (and %s for the quantized files)\n", cq_backend_name(g_be), cq_backend_name(g_cpu));
    for (int q = 0; q < Q_COUNT; q++)
        for (int m = 0; m < QG_MODELS; m++) {
            char path[1200];
            if (qg_convert(g_dir, m, k_quant[q], path, sizeof path, &g_cmf[q][m]) != 0 ||
                cq_qi21_load(g_cmf[q][m], "dit.", g_be, &g_model[q][m]) != CQ_OK ||
                cq_qi21_load(g_cmf[q][m], "dit.", g_cpu, &g_cpu_model[q][m]) != CQ_OK) {
                fprintf(stderr, "%s: %s\n", path, cq_last_error());
                return -1;
            }
        }
    const cq_qi21_config *cfg[QG_MODELS] = {cq_qi21_get_config(g_model[0][0]), cq_qi21_get_config(g_model[0][1])};
    return qg_load_cases(&g_set, cfg);
}

static int teardown(void **state) {
    (void)state;
    qg_free_cases(&g_set);
    for (int q = 0; q < Q_COUNT; q++)
        for (int m = 0; m < QG_MODELS; m++) {
            cq_qi21_free(g_model[q][m]);
            cq_qi21_free(g_cpu_model[q][m]);
            cq_cmf_close(g_cmf[q][m]);
        }
    cq_backend_free(g_be);
    cq_backend_free(g_cpu);
    return 0;
}

static void check_codec(int q) {
    const char *cn = cq_dtype_name(k_quant[q]);
    double worst = 0, worst_rms = 0, worst_dev = 0;
    for (int i = 0; i < g_set.n; i++) {
        const golden_case *g = &g_set.cases[i];
        cq_qi21 *m = g_model[q][g->model];
        size_t n = vel_len(g);
        float *vc = malloc(n * sizeof(float)), *vf = malloc(n * sizeof(float)), *vcpu = malloc(n * sizeof(float));
        assert_true(vc && vf && vcpu);
        cq_qi21_cache *c = NULL;
        if (cq_qi21_prefill(g_cpu_model[q][g->model], &g->in.layout, g->in.ctx, g->in.cond, &c) != CQ_OK ||
            cq_qi21_step(g_cpu_model[q][g->model], c, g->in.target, g->in.t, vcpu) != CQ_OK)
            fail_msg("%s %s on the CPU: %s", cn, g->name, cq_last_error());
        cq_qi21_cache_free(c);
        c = NULL;
        if (cq_qi21_prefill(m, &g->in.layout, g->in.ctx, g->in.cond, &c) != CQ_OK ||
            cq_qi21_step(m, c, g->in.target, g->in.t, vc) != CQ_OK)
            fail_msg("%s %s cached: %s", cn, g->name, cq_last_error());
        cq_qi21_cache_free(c);
        if (cq_qi21_forward_full(m, &g->in.layout, g->in.ctx, g->in.cond, g->in.target, g->in.t, vf) != CQ_OK)
            fail_msg("%s %s full: %s", cn, g->name, cq_last_error());
        double ec = qg_rel_err(vc, g->ref, n, g->ref_rms), ef = qg_rel_err(vf, g->ref, n, g->ref_rms);
        double er = qg_rms_err(vc, g->ref, n, g->ref_rms), ecf = qg_rel_err(vc, vf, n, g->ref_rms);
        double edev = qg_rel_err(vc, vcpu, n, g->ref_rms);
        print_message("%-6s %-16s max|err|/RMS: cached %.3e full %.3e; RMS(err)/RMS %.3e; cached-vs-full %.1e; "
                      "vs the CPU %.3e\n", cn, g->name, ec, ef, er, ecf, edev);
        if (!(edev <= DEVICE_BOUND))
            fail_msg("%s %s: the device differs from the CPU backend on the same file by %.3e of RMS", cn, g->name, edev);
        if (!(ec <= k_bound[q]) || !(ef <= k_bound[q]))
            fail_msg("%s %s: error %.3e / %.3e of RMS exceeds %.1e", cn, g->name, ec, ef, k_bound[q]);
        if (!(er <= k_rms_bound[q])) fail_msg("%s %s: RMS error %.3e exceeds %.1e", cn, g->name, er, k_rms_bound[q]);
        if (!(ecf <= DEVICE_BOUND)) fail_msg("%s %s: cached vs full %.3e of RMS", cn, g->name, ecf);
        worst = fmax(worst, fmax(ec, ef));
        worst_rms = fmax(worst_rms, er);
        worst_dev = fmax(worst_dev, edev);
        free(vc);
        free(vf);
        free(vcpu);
    }
    print_message("%s worst max|err|/RMS %.3e (bound %.1e), worst RMS(err)/RMS %.3e (bound %.1e), worst device vs CPU "
                  "%.3e (bound %.1e)\n", cn, worst, k_bound[q], worst_rms, k_rms_bound[q], worst_dev, DEVICE_BOUND);
}

static void test_golden_f32(void **state) {
    (void)state;
    check_codec(Q_F32);
}
static void test_golden_bf16(void **state) {
    (void)state;
    check_codec(Q_BF16);
}
static void test_golden_q8_2f(void **state) {
    (void)state;
    check_codec(Q_Q8_2F);
}
static void test_golden_q4tp(void **state) {
    (void)state;
    check_codec(Q_Q4TP);
}

static const golden_case *find_case(const char *name) { return qg_find(&g_set, name); }

/* Two caches alive at once, stepped in turn (qi21_golden.c): each step equals the same step on a cache of
 * its own, bit for bit. A cache's second step is recorded and the later ones replay it, so this also holds
 * replays, with other timesteps in between, to direct steps. */
static void test_two_caches(void **state) {
    (void)state;
    const golden_case *a = find_case("cond1"), *b = find_case("t2i_square");
    cq_backend_stats s0, s1;
    assert_int_equal(cq_backend_get_stats(g_be, &s0, false), CQ_OK);
    qg_two_caches(g_model[Q_F32][a->model], a, b, vel_len(a), DEVICE_BOUND);
    assert_int_equal(cq_backend_get_stats(g_be, &s1, false), CQ_OK);
    /* per cache: one direct step, one recorded (and replayed), the rest replays */
    if (cq_backend_can_record(g_be)) assert_int_equal(s1.replays - s0.replays, 2 * (QG_TWO_CACHES_STEPS - 1));
}

static void test_no_allocation_in_step(void **state) {
    (void)state;
    const golden_case *g = find_case("cond1");
    float *v = malloc(vel_len(g) * sizeof(float));
    assert_non_null(v);
    for (int q = 0; q < Q_COUNT; q++) {
        cq_qi21 *m = g_model[q][g->model];
        cq_qi21_cache *c = NULL;
        assert_int_equal(cq_qi21_prefill(m, &g->in.layout, g->in.ctx, g->in.cond, &c), CQ_OK);
        cq_backend_stats s0, s1;
        /* step 0 sizes the buffers, step 1 is recorded (a few host allocations for the recording) */
        const int warm = cq_backend_can_record(g_be) ? 2 : 1;
        for (int i = 0; i < 5; i++) {
            cq_alloc_fail_at(0);
            assert_int_equal(cq_qi21_step(m, c, g->in.target, 0.2f * (float)i + 0.1f, v), CQ_OK);
            long allocs = cq_alloc_fail_at(0);
            if (i == 0) {
                assert_true(allocs > 0);
                assert_int_equal(cq_backend_get_stats(g_be, &s0, false), CQ_OK);
            }
            if (i >= warm && allocs != 0)
                fail_msg("%s: step %d made %ld host allocations", cq_dtype_name(k_quant[q]), i, allocs);
        }
        assert_int_equal(cq_backend_get_stats(g_be, &s1, false), CQ_OK);
        if (s1.device_allocs != s0.device_allocs || s1.mem_in_use != s0.mem_in_use)
            fail_msg("%s: steps after the first allocated device memory (%llu -> %llu cudaMalloc calls, %llu -> %llu "
                     "bytes in use)",
                     cq_dtype_name(k_quant[q]), (unsigned long long)s0.device_allocs,
                     (unsigned long long)s1.device_allocs, (unsigned long long)s0.mem_in_use,
                     (unsigned long long)s1.mem_in_use);
        cq_qi21_cache_free(c);
    }
    free(v);
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_qi21_cuda: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),   cmocka_unit_test(test_golden_bf16),
        cmocka_unit_test(test_golden_q8_2f), cmocka_unit_test(test_golden_q4tp),
        cmocka_unit_test(test_two_caches),   cmocka_unit_test(test_no_allocation_in_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
