/*
 * test_vae_cuda.c — the Qwen-Image-2.1 VAE on the CUDA backend against the
 * reference's golden images and moments (tests/golden/vae, made by
 * tools/golden_vae.py with diffusers), label gpu. Every golden size of both
 * tiny configurations, decoded and encoded:
 *  - converted to f32: max|err| / RMS(ref) <= 2e-2 and RMS(err) / RMS(ref)
 *    <= 3e-3. The device rounds both operands of every convolution and
 *    matmul to f16 (the weights and the receptive fields, with power-of-two
 *    row scales); the CPU with f16 weights alone measures ~9e-3 / 1.2e-3 over
 *    the same ~50 layers (test_vae), and rounding the second operand too adds
 *    about as much again, in quadrature;
 *  - convert's defaults (f16 weights): within the same bounds of the CPU
 *    backend running that file, which rounds only the weights;
 *  - decoding in bands of rows gives the whole-image result within the
 *    device bounds above, and at least 10 times closer than the nearest
 *    wrong answer the test knows (the same latents with one latent row
 *    zeroed): every pixel sees the same inputs, scales and weights, but a
 *    band changes the GEMMs' row counts, cuBLASLt picks its algorithm per
 *    shape, and an f32 sum taken in another order can round a staged f16
 *    operand of the next layer the other way, which later layers carry
 *    (measured: 5e-3 of max|err| / RMS for bands of one latent row). The CPU
 *    backend sums in a fixed order and holds 1e-6 there (test_vae).
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "testutil.h"
#include "vae_golden.h"

#define DEVICE_MAX 2e-2
#define DEVICE_RMS 3e-3

static const char *const k_names[2] = {"vae_a", "vae_b"};
enum { F32, DEFAULT, CODECS };

static cq_backend *g_be, *g_cpu;
static cq_cmf *g_cmf[2][CODECS];
static cq_qi21_vae *g_vae[2][CODECS], *g_cpu_vae[2][CODECS];
static cq_st *g_gold[2];
static bool g_have;

static int setup(void **state) {
    (void)state;
    g_have = vg_have();
    if (!g_have) {
        printf("tests/golden/vae is absent: skipping\n");
        return 0;
    }
    if (cq_backend_cuda_create(-1, &g_be) != CQ_OK || cq_backend_cpu_create(0, CQ_CPU_AUTO, &g_cpu) != CQ_OK) return -1;
    printf("VAE golden cases on %s (and %s for convert's defaults)\n", cq_backend_name(g_be), cq_backend_name(g_cpu));
    for (int i = 0; i < 2; i++) {
        g_gold[i] = vg_open_golden(k_names[i]);
        for (int q = 0; q < CODECS; q++) {
            g_cmf[i][q] = vg_convert(k_names[i], q == F32 ? CQ_DTYPE_F32 : -1);
            if (cq_qi21_vae_load(g_cmf[i][q], "vae.", g_be, &g_vae[i][q]) != CQ_OK ||
                cq_qi21_vae_load(g_cmf[i][q], "vae.", g_cpu, &g_cpu_vae[i][q]) != CQ_OK) {
                fprintf(stderr, "%s: %s\n", k_names[i], cq_last_error());
                return -1;
            }
        }
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        for (int q = 0; q < CODECS; q++) {
            cq_qi21_vae_free(g_vae[i][q]);
            cq_qi21_vae_free(g_cpu_vae[i][q]);
            cq_cmf_close(g_cmf[i][q]);
        }
        cq_st_close(g_gold[i]);
    }
    cq_backend_free(g_be);
    cq_backend_free(g_cpu);
    return 0;
}

static void check(const char *what, vg_result r) {
    printf("%s: max err/RMS decode %.3g, encode %.3g; RMS err %.3g (bounds %.0e, %.0e)\n", what, r.dec, r.enc, r.rms,
           DEVICE_MAX, DEVICE_RMS);
    if (r.dec > DEVICE_MAX || r.enc > DEVICE_MAX || r.rms > DEVICE_RMS)
        fail_msg("%s: decode %.3g, encode %.3g (> %.0e) or RMS err %.3g (> %.0e)", what, r.dec, r.enc, DEVICE_MAX, r.rms,
                 DEVICE_RMS);
}

static void test_golden_f32(void **state) {
    (void)state;
    if (!g_have) skip();
    for (int i = 0; i < 2; i++) {
        char label[64];
        snprintf(label, sizeof label, "%s f32 on %s", k_names[i], cq_backend_name(g_be));
        check(label, vg_run(g_vae[i][F32], g_gold[i], label));
    }
}

/* convert's defaults (f16 weights) on the device against the CPU backend running the same file. */
static void test_default_vs_cpu(void **state) {
    (void)state;
    if (!g_have) skip();
    for (int i = 0; i < 2; i++) {
        const cq_qi21_vae_config *c = cq_qi21_vae_get_config(g_vae[i][DEFAULT]);
        vg_result r = {0};
        for (size_t k = 0; k < VG_SIZES; k++) {
            uint64_t zs[3], xs[3];
            float *z = vg_tensor(g_gold[i], k_names[i], "z", vg_sizes[k], zs);
            float *x = vg_tensor(g_gold[i], k_names[i], "x", vg_sizes[k], xs);
            const size_t ni = (size_t)c->image_channels * xs[1] * xs[2], nm = (size_t)2 * c->z_dim * zs[1] * zs[2];
            float *dev = malloc(sizeof(float) * ni), *cpu = malloc(sizeof(float) * ni);
            float *mdev = malloc(sizeof(float) * nm), *mcpu = malloc(sizeof(float) * nm);
            assert_true(dev && cpu && mdev && mcpu);
            assert_int_equal(cq_qi21_vae_decode(g_vae[i][DEFAULT], z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, dev), CQ_OK);
            assert_int_equal(cq_qi21_vae_decode(g_cpu_vae[i][DEFAULT], z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, cpu), CQ_OK);
            assert_int_equal(cq_qi21_vae_encode(g_vae[i][DEFAULT], x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, mdev), CQ_OK);
            assert_int_equal(cq_qi21_vae_encode(g_cpu_vae[i][DEFAULT], x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, mcpu), CQ_OK);
            double rd, re;
            r.dec = fmax(r.dec, vg_rel_err(dev, cpu, ni, &rd));
            r.enc = fmax(r.enc, vg_rel_err(mdev, mcpu, nm, &re));
            r.rms = fmax(r.rms, fmax(rd, re));
            free(z);
            free(x);
            free(dev);
            free(cpu);
            free(mdev);
            free(mcpu);
        }
        char label[96];
        snprintf(label, sizeof label, "%s convert's defaults, %s against %s", k_names[i], cq_backend_name(g_be),
                 cq_backend_name(g_cpu));
        check(label, r);
    }
}

/* Bands of 1 and 7 latent rows against the whole image, on the device; a decode of the latents with one row
 * zeroed shows how far a banding mistake (a row lost or misplaced) would land. */
static void test_bands(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_qi21_vae *v = g_vae[1][F32];
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(v);
    uint64_t zs[3];
    float *z = vg_tensor(g_gold[1], k_names[1], "z", "l", zs);
    const size_t n = (size_t)c->image_channels * zs[1] * zs[2] * (size_t)(c->spatial_factor * c->spatial_factor);
    float *whole = malloc(sizeof(float) * n), *band = malloc(sizeof(float) * n);
    assert_true(whole && band);
    cq_qi21_vae_set_band_rows(v, INT_MAX);
    assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, whole), CQ_OK);
    const size_t plane = (size_t)zs[1] * zs[2];
    for (uint64_t ch = 0; ch < zs[0]; ch++) memset(z + ch * plane + (zs[1] / 2) * zs[2], 0, sizeof(float) * zs[2]);
    assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, band), CQ_OK);
    const double wrong = vg_rel_err(band, whole, n, NULL);
    free(z);
    z = vg_tensor(g_gold[1], k_names[1], "z", "l", zs);
    static const int rows[] = {1, 7};
    for (size_t r = 0; r < CQ_ARRAY_LEN(rows); r++) {
        cq_qi21_vae_set_band_rows(v, rows[r]);
        assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, band), CQ_OK);
        double rms;
        const double e = vg_rel_err(band, whole, n, &rms);
        printf("  %s on %s, bands of %d rows against the whole image: max err/RMS %.3g, RMS err %.3g (a zeroed latent "
               "row: %.3g)\n", k_names[1], cq_backend_name(g_be), rows[r], e, rms, wrong);
        if (e > DEVICE_MAX || rms > DEVICE_RMS || e * 10 > wrong)
            fail_msg("bands of %d rows: %.3g / %.3g from the whole image (bounds %.0e / %.0e, and 1/10 of %.3g)",
                     rows[r], e, rms, DEVICE_MAX, DEVICE_RMS, wrong);
    }
    cq_qi21_vae_set_band_rows(v, 0);
    free(z);
    free(whole);
    free(band);
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_vae_cuda: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_f32),
        cmocka_unit_test(test_default_vs_cpu),
        cmocka_unit_test(test_bands),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
