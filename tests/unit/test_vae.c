/*
 * test_vae.c — the Qwen-Image-2.1 VAE against diffusers' reference
 * (tests/golden/vae, made by tools/golden_vae.py): two tiny random
 * configurations converted here with `cortiq convert`'s library entry,
 * decoded and encoded at three sizes, on the backend named by the one
 * argument (testutil.h: `test_vae cpu`, label unit; `test_vae cuda`,
 * registered as test_vae_cuda, label gpu; exits 77, skipped, where the
 * backend is not built or no device is present).
 *
 * Error measure: max |got - ref| / RMS(ref) over the whole output tensor
 * (and, printed alongside, RMS(got - ref) / RMS(ref)).
 *
 * On the CPU:
 *  - f32 conversion: max <= 1e-4 (the parity bar) for decode and encode;
 *  - f16 conversion (convert's default for the VAE): printed and bounded by
 *    max 2e-2, RMS 2e-3: every kernel and gamma carries up to 2^-11
 *    relative rounding, ~50 layers deep, which measures ~1e-3 RMS;
 *  - banded vs whole-image decode/encode: max <= 1e-6 (every pixel sees the
 *    same inputs and arithmetic; the images are at least 5 latent pixels
 *    wide, since a band of <= 4 pixels takes the GEMM's dot-product path,
 *    whose summation order differs: ~1e-5 measured at 2 pixels wide), and on
 *    an image taller than the receptive field the banded run must hold at
 *    most a third (decode) / a half (encode, whose receptive field is
 *    larger) of the whole-image activation memory;
 *  - layouts, normalisation, progress and cancellation, bad arguments and
 *    configs, the reference backend, decoder-only files.
 *
 * On a device, every golden size of both configurations:
 *  - converted to f32: max|err| / RMS(ref) <= 2e-2 and RMS(err) / RMS(ref)
 *    <= 3e-3. The device rounds both operands of every convolution and
 *    matmul to f16 (the weights and the receptive fields, with power-of-two
 *    row scales); the CPU with f16 weights alone measures ~9e-3 / 1.2e-3 over
 *    the same ~50 layers (above), and rounding the second operand too adds
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
 *    backend sums in a fixed order and holds 1e-6 there;
 *  - bad arguments refused as on the CPU (checked before any op).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/convert.h"
#include "testutil.h"
#include "vae_golden.h"

/* A device's bounds (max err / RMS, RMS err / RMS), against the reference and against the CPU backend. */
#define DEVICE_MAX 2e-2
#define DEVICE_RMS 3e-3

typedef struct fixture {
    char name[16];
    cq_cmf *cmf;
    cq_backend *be;       /* the backend under test (g_be) */
    cq_qi21_vae *vae;
    cq_qi21_vae *cpu_vae; /* device runs: the same file on the CPU backend */
    cq_st *gold;
} fixture;

/* Converted once per run: [config][F32 or convert's DEFAULT]. */
enum { F32, DEFAULT, CODECS };
static fixture g_fx[2][CODECS];
static bool g_have;
static tu_backend_arg g_arg;
static cq_backend *g_be, *g_cpu; /* the backend under test; device runs: the CPU backend too */

/* Convert tests/golden/vae/<name> with codec `quant` (-1: convert's defaults) and load it on the backend under
 * test, and on a device run on the CPU backend too. */
static void open_fixture(fixture *f, const char *name, int quant) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->cmf = vg_convert(name, quant);
    f->be = g_be;
    if (cq_qi21_vae_load(f->cmf, "vae.", f->be, &f->vae) != CQ_OK)
        fail_msg("load %s on %s: %s", name, cq_backend_name(f->be), cq_last_error());
    if (g_cpu && cq_qi21_vae_load(f->cmf, "vae.", g_cpu, &f->cpu_vae) != CQ_OK)
        fail_msg("load %s on the CPU: %s", name, cq_last_error());
    f->gold = vg_open_golden(name);
}

static void close_fixture(fixture *f) {
    cq_qi21_vae_free(f->vae);
    cq_qi21_vae_free(f->cpu_vae);
    cq_cmf_close(f->cmf);
    cq_st_close(f->gold);
}

static float *golden(const fixture *f, const char *what, const char *size, uint64_t shape[3]) {
    return vg_tensor(f->gold, f->name, what, size, shape);
}

static double rel_err(const float *got, const float *ref, size_t n) { return vg_rel_err(got, ref, n, NULL); }

/* A device run's errors against its bounds (the reference's, or the CPU backend's on the same file). */
static void check_device(const char *what, vg_result r) {
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
        fixture *f = &g_fx[i][F32];
        if (g_arg.device) {
            char label[320];
            snprintf(label, sizeof label, "%s f32 on %s", f->name, cq_backend_name(f->be));
            check_device(label, vg_run(f->vae, f->gold, label));
            continue;
        }
        vg_result r = vg_run(f->vae, f->gold, f->name);
        if (r.dec > 1e-4 || r.enc > 1e-4) fail_msg("%s (f32): decode %.3g, encode %.3g > 1e-4", f->name, r.dec, r.enc);
    }
}

/* Device runs: convert's defaults (f16 weights) on the device against the CPU backend running the same file. */
static void test_default_vs_cpu(void **state) {
    (void)state;
    if (!g_have) skip();
    for (int i = 0; i < 2; i++) {
        fixture *f = &g_fx[i][DEFAULT];
        const cq_qi21_vae_config *c = cq_qi21_vae_get_config(f->vae);
        vg_result r = {0};
        for (size_t k = 0; k < VG_SIZES; k++) {
            uint64_t zs[3], xs[3];
            float *z = vg_tensor(f->gold, f->name, "z", vg_sizes[k], zs);
            float *x = vg_tensor(f->gold, f->name, "x", vg_sizes[k], xs);
            const size_t ni = (size_t)c->image_channels * xs[1] * xs[2], nm = (size_t)2 * c->z_dim * zs[1] * zs[2];
            float *dev = malloc(sizeof(float) * ni), *cpu = malloc(sizeof(float) * ni);
            float *mdev = malloc(sizeof(float) * nm), *mcpu = malloc(sizeof(float) * nm);
            assert_true(dev && cpu && mdev && mcpu);
            assert_int_equal(cq_qi21_vae_decode(f->vae, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, dev), CQ_OK);
            assert_int_equal(cq_qi21_vae_decode(f->cpu_vae, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, cpu), CQ_OK);
            assert_int_equal(cq_qi21_vae_encode(f->vae, x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, mdev), CQ_OK);
            assert_int_equal(cq_qi21_vae_encode(f->cpu_vae, x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, mcpu), CQ_OK);
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
        char label[320];
        snprintf(label, sizeof label, "%s convert's defaults, %s against %s", f->name, cq_backend_name(f->be),
                 cq_backend_name(g_cpu));
        check_device(label, r);
    }
}

/* convert's default codec for the VAE (f16 kernels and gammas). */
static void test_golden_f16(void **state) {
    (void)state;
    if (!g_have) skip();
    for (int i = 0; i < 2; i++) {
        fixture *f = &g_fx[i][DEFAULT];
        vg_result r = vg_run(f->vae, f->gold, f->name);
        printf("%s with convert's default (f16) weights: max err/RMS decode %.3g, encode %.3g; RMS err %.3g\n",
               f->name, r.dec, r.enc, r.rms);
        if (r.dec > 2e-2 || r.enc > 2e-2 || r.rms > 2e-3)
            fail_msg("%s (f16): decode %.3g, encode %.3g (> 2e-2) or RMS err %.3g (> 2e-3)", f->name, r.dec, r.enc, r.rms);
    }
}

/* Decode z and encode x whole and in several band heights: identical
 * results; returns the whole-image and the smallest banded peaks. */
static void bands_case(fixture *f, const char *label, const float *z, int h, int w, const float *x, const int *rows,
                       size_t n_rows, size_t peaks[4]) {
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(f->vae);
    const int F = c->spatial_factor, H = h * F, W = w * F;
    size_t n_img = (size_t)c->image_channels * H * W, n_mom = (size_t)2 * c->z_dim * h * w;
    float *whole = malloc(sizeof(float) * n_img), *band = malloc(sizeof(float) * n_img);
    float *mwhole = malloc(sizeof(float) * n_mom), *mband = malloc(sizeof(float) * n_mom);
    cq_qi21_vae_set_band_rows(f->vae, INT_MAX);
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, h, w, CQ_QI21_VAE_PLANAR, whole), CQ_OK);
    peaks[0] = cq_qi21_vae_last_peak_bytes(f->vae);
    assert_int_equal(cq_qi21_vae_encode(f->vae, x, H, W, CQ_QI21_VAE_PLANAR, mwhole), CQ_OK);
    peaks[2] = cq_qi21_vae_last_peak_bytes(f->vae);
    peaks[1] = peaks[3] = SIZE_MAX;
    for (size_t r = 0; r < n_rows; r++) {
        cq_qi21_vae_set_band_rows(f->vae, rows[r]);
        assert_int_equal(cq_qi21_vae_decode(f->vae, z, h, w, CQ_QI21_VAE_PLANAR, band), CQ_OK);
        size_t peak = cq_qi21_vae_last_peak_bytes(f->vae);
        double e = rel_err(band, whole, n_img);
        assert_int_equal(cq_qi21_vae_encode(f->vae, x, H, W, CQ_QI21_VAE_PLANAR, mband), CQ_OK);
        size_t epeak = cq_qi21_vae_last_peak_bytes(f->vae);
        double ee = rel_err(mband, mwhole, n_mom);
        printf("  %s %s, bands of %d rows: decode vs whole %.3g (peak %zu vs %zu bytes), encode %.3g (peak %zu vs %zu)\n",
               f->name, label, rows[r], e, peak, peaks[0], ee, epeak, peaks[2]);
        if (e > 1e-6 || ee > 1e-6)
            fail_msg("%s %s, bands of %d rows: decode %.3g / encode %.3g differ from whole-image", f->name, label, rows[r], e, ee);
        if (peak < peaks[1]) peaks[1] = peak;
        if (epeak < peaks[3]) peaks[3] = epeak;
    }
    cq_qi21_vae_set_band_rows(f->vae, 0);
    free(whole);
    free(band);
    free(mwhole);
    free(mband);
}

/* Device runs: bands of 1 and 7 latent rows against the whole image; a decode of the latents with one row zeroed
 * shows how far a banding mistake (a row lost or misplaced) would land. */
static void bands_device(void) {
    fixture *f = &g_fx[1][F32];
    cq_qi21_vae *v = f->vae;
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(v);
    uint64_t zs[3];
    float *z = golden(f, "z", "l", zs);
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
    z = golden(f, "z", "l", zs);
    static const int rows[] = {1, 7};
    for (size_t r = 0; r < CQ_ARRAY_LEN(rows); r++) {
        cq_qi21_vae_set_band_rows(v, rows[r]);
        assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, band), CQ_OK);
        double rms;
        const double e = vg_rel_err(band, whole, n, &rms);
        printf("  %s on %s, bands of %d rows against the whole image: max err/RMS %.3g, RMS err %.3g (a zeroed latent "
               "row: %.3g)\n", f->name, cq_backend_name(f->be), rows[r], e, rms, wrong);
        if (e > DEVICE_MAX || rms > DEVICE_RMS || e * 10 > wrong)
            fail_msg("bands of %d rows: %.3g / %.3g from the whole image (bounds %.0e / %.0e, and 1/10 of %.3g)",
                     rows[r], e, rms, DEVICE_MAX, DEVICE_RMS, wrong);
    }
    cq_qi21_vae_set_band_rows(v, 0);
    free(z);
    free(whole);
    free(band);
}

/* Banded streaming must reproduce the whole-image computation in every band
 * height, for decode and encode; on a tall image (taller than the
 * receptive field) it must hold several times less memory. On a device,
 * the device's bounds instead (bands_device). */
static void test_bands(void **state) {
    (void)state;
    if (!g_have) skip();
    if (g_arg.device) {
        bands_device();
        return;
    }
    for (int i = 0; i < 2; i++) {
        fixture *f = &g_fx[i][F32];
        uint64_t zs[3], xs[3];
        float *z = golden(f, "z", "l", zs), *x = golden(f, "x", "l", xs);
        size_t peaks[4];
        static const int few[] = {1, 7, 40}, tall[] = {16};
        bands_case(f, "golden l", z, (int)zs[1], (int)zs[2], x, few, CQ_ARRAY_LEN(few), peaks);
        free(z);
        free(x);
        /* 32 x 5 latents -> 512 x 80 pixels */
        const cq_qi21_vae_config *c = cq_qi21_vae_get_config(f->vae);
        const int h = 32, w = 5, H = h * c->spatial_factor, W = w * c->spatial_factor;
        tu_rng rng;
        tu_rng_seed(&rng, 77 + (uint64_t)i);
        z = malloc(sizeof(float) * (size_t)c->z_dim * h * w);
        x = malloc(sizeof(float) * (size_t)c->image_channels * H * W);
        tu_fill_normal(&rng, z, (size_t)c->z_dim * h * w, 1.0f);
        for (size_t k = 0; k < (size_t)c->image_channels * H * W; k++) x[k] = 2.0f * tu_rng_uniform(&rng) - 1.0f;
        bands_case(f, "tall 512x80", z, h, w, x, tall, CQ_ARRAY_LEN(tall), peaks);
        /* The encode peaks include the input image, uploaded whole either way;
         * the encoder's receptive field (~250 rows for five levels) keeps
         * half of a 512-row image in flight at the first pull. */
        size_t in_bytes = sizeof(float) * (size_t)c->image_channels * H * W;
        if (peaks[1] * 3 > peaks[0] || (peaks[3] - in_bytes) * 2 > peaks[2] - in_bytes)
            fail_msg("%s tall: banded peaks %zu (decode) / %zu (encode, %zu of it the input) are not below a third / "
                     "a half of the whole-image %zu / %zu", f->name, peaks[1], peaks[3], in_bytes, peaks[0], peaks[2]);
        free(z);
        free(x);
    }
}

/* Channels-last in and out give the planar results transposed, exactly;
 * the normalisation helpers follow the pipeline's formulas. */
static void test_layouts_and_norm(void **state) {
    (void)state;
    if (!g_have) skip();
    fixture *f = &g_fx[1][F32];
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(f->vae);
    uint64_t zs[3], xs[3];
    float *z = golden(f, "z", "m", zs), *x = golden(f, "x", "m", xs);
    const int h = (int)zs[1], w = (int)zs[2], H = (int)xs[1], W = (int)xs[2], Z = c->z_dim, C = c->image_channels;
    size_t nz = (size_t)Z * h * w, ni = (size_t)C * H * W, nm = 2 * nz;
    float *zl = malloc(sizeof(float) * nz), *xl = malloc(sizeof(float) * ni);
    for (int i = 0; i < h * w; i++)
        for (int k = 0; k < Z; k++) zl[i * Z + k] = z[k * h * w + i];
    for (int i = 0; i < H * W; i++)
        for (int k = 0; k < C; k++) xl[i * C + k] = x[k * H * W + i];
    float *ip = malloc(sizeof(float) * ni), *il = malloc(sizeof(float) * ni);
    float *mp = malloc(sizeof(float) * nm), *ml = malloc(sizeof(float) * nm);
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, h, w, CQ_QI21_VAE_PLANAR, ip), CQ_OK);
    assert_int_equal(cq_qi21_vae_decode(f->vae, zl, h, w, CQ_QI21_VAE_CHANNELS_LAST, il), CQ_OK);
    for (int i = 0; i < H * W; i++)
        for (int k = 0; k < C; k++) assert_memory_equal(&il[i * C + k], &ip[k * H * W + i], sizeof(float));
    for (size_t i = 0; i < ni; i++) assert_true(ip[i] >= -1.0f && ip[i] <= 1.0f);
    assert_int_equal(cq_qi21_vae_encode(f->vae, x, H, W, CQ_QI21_VAE_PLANAR, mp), CQ_OK);
    assert_int_equal(cq_qi21_vae_encode(f->vae, xl, H, W, CQ_QI21_VAE_CHANNELS_LAST, ml), CQ_OK);
    for (int i = 0; i < h * w; i++)
        for (int k = 0; k < 2 * Z; k++) assert_memory_equal(&ml[i * 2 * Z + k], &mp[k * h * w + i], sizeof(float));
    /* latents_mean = 0.1 k, latents_std = 1 + 0.25 k in the golden configs */
    float v[2 * 2 * 4];
    memcpy(v, z, sizeof v);
    assert_int_equal(cq_qi21_vae_denormalize(f->vae, v, 2, 2, CQ_QI21_VAE_PLANAR), CQ_OK);
    for (int k = 0; k < Z; k++) {
        assert_float_equal(c->latents_mean[k], (float)(0.1 * k), 0.0f);
        assert_float_equal(c->latents_std[k], (float)(1.0 + 0.25 * k), 0.0f);
        for (int i = 0; i < 4; i++) {
            float t = z[k * 4 + i] * c->latents_std[k];
            assert_float_equal(v[k * 4 + i], t + c->latents_mean[k], 0.0f);
        }
    }
    assert_int_equal(cq_qi21_vae_normalize(f->vae, v, 2, 2, CQ_QI21_VAE_PLANAR), CQ_OK);
    for (int i = 0; i < 16; i++) assert_float_equal(v[i], z[i], 1e-6f * (1.0f + fabsf(z[i])));
    free(z);
    free(x);
    free(zl);
    free(xl);
    free(ip);
    free(il);
    free(mp);
    free(ml);
}

static void test_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    fixture *f = &g_fx[0][F32];
    float buf[4 * 48 * 48] = {0}, out[32 * 9];
    assert_int_equal(cq_qi21_vae_encode(f->vae, buf, 40, 48, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_non_null(strstr(cq_last_error(), "multiple of 16"));
    assert_int_equal(cq_qi21_vae_encode(f->vae, buf, 0, 48, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_qi21_vae_decode(f->vae, buf, 0, 3, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_qi21_vae_decode(f->vae, buf, 2, 3, (cq_qi21_vae_layout)7, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qi21_vae_decode(f->vae, NULL, 2, 3, CQ_QI21_VAE_PLANAR, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qi21_vae_decode(f->vae, buf, 2, 3, CQ_QI21_VAE_PLANAR, NULL), CQ_ERR_INVALID_ARG);
    cq_qi21_vae *v = NULL;
    assert_int_equal(cq_qi21_vae_load(f->cmf, "nope.", f->be, &v), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "nope.config_json"));
    assert_null(v);
    cq_qi21_vae_free(NULL);
}

/* Converts vae_a with `drop` globs into a file of its own; the conversion's status. */
static cq_status convert_dropping(const char *const *drop, size_t n_drop, const char *tag, char *out, size_t len) {
    snprintf(out, len, "%s/vae_a.cmf", tu_tmpdir(tag));
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32, .drop = drop, .n_drop = n_drop};
    cq_convert_report rep;
    cq_status s = cq_convert(VG_DIR "/vae_a", out, &opts, &rep);
    if (s == CQ_OK) assert_true(rep.dropped > 0 && rep.dropped_bytes > 0);
    cq_convert_report_free(&rep);
    return s;
}

/* A decode-only file (convert --drop 'vae.encoder.*' --drop 'vae.quant_conv.*') decodes exactly as the whole
 * model does and refuses to encode; half an encoder, and a drop pattern that matches nothing, are errors. */
static void test_decoder_only(void **state) {
    (void)state;
    if (!g_have) skip();
    fixture *f = &g_fx[0][F32]; /* vae_a, f32 */
    char path[1100];
    static const char *const dec_only[] = {"vae.encoder.*", "vae.quant_conv.*"};
    assert_int_equal(convert_dropping(dec_only, 2, "vae_dec_only", path, sizeof path), CQ_OK);
    cq_cmf *cmf = NULL;
    cq_qi21_vae *v = NULL;
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    assert_int_equal(cq_qi21_vae_load(cmf, "vae.", f->be, &v), CQ_OK);
    assert_false(cq_qi21_vae_get_config(v)->has_encoder);
    assert_true(cq_qi21_vae_get_config(f->vae)->has_encoder);
    uint64_t zs[3];
    float *z = golden(f, "z", "s", zs);
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(v);
    size_t n = (size_t)c->image_channels * zs[1] * zs[2] * (size_t)(c->spatial_factor * c->spatial_factor);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, a), CQ_OK);
    assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, b), CQ_OK);
    assert_memory_equal(a, b, n * sizeof(float));
    assert_int_equal(cq_qi21_vae_encode(v, a, 16, 16, CQ_QI21_VAE_PLANAR, b), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "no encoder"));
    cq_qi21_vae_free(v);
    cq_cmf_close(cmf);
    free(z);
    free(a);
    free(b);

    static const char *const half[] = {"vae.quant_conv.*"};
    assert_int_equal(convert_dropping(half, 1, "vae_half_enc", path, sizeof path), CQ_OK);
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    assert_int_equal(cq_qi21_vae_load(cmf, "vae.", f->be, &v), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "all or nothing"));
    assert_null(v);
    cq_cmf_close(cmf);

    static const char *const typo[] = {"vae.encoder.*", "vae.quantconv.*"};
    assert_int_equal(convert_dropping(typo, 2, "vae_drop_typo", path, sizeof path), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "'vae.quantconv.*' matches no tensor"));
}

static int setup(void **state) {
    (void)state;
    g_have = vg_have();
    if (!g_have) {
        printf("tests/golden/vae is absent: skipping the VAE tests\n");
        return 0;
    }
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    if (g_arg.device && cq_backend_create("cpu", 0, &g_cpu) != CQ_OK) return -1;
    const char *names[] = {"vae_a", "vae_b"};
    for (int i = 0; i < 2; i++) {
        open_fixture(&g_fx[i][F32], names[i], CQ_DTYPE_F32);
        open_fixture(&g_fx[i][DEFAULT], names[i], -1);
    }
    if (g_cpu)
        printf("VAE golden cases on %s (and %s for convert's defaults)\n", cq_backend_name(g_be),
               cq_backend_name(g_cpu));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_have)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < CODECS; k++) close_fixture(&g_fx[i][k]);
    cq_backend_free(g_be);
    cq_backend_free(g_cpu);
    return 0;
}

/* The model runs on the reference backend too (every op in plain C). */
static void test_ref_backend(void **state) {
    (void)state;
    if (!g_have) skip();
    fixture *f = &g_fx[1][F32];
    cq_backend *ref;
    cq_qi21_vae *v;
    assert_int_equal(cq_backend_ref_create(&ref), CQ_OK);
    if (cq_qi21_vae_load(f->cmf, "vae.", ref, &v) != CQ_OK) fail_msg("load on ref: %s", cq_last_error());
    uint64_t zs[3], is[3], xs[3], ms[3];
    float *z = golden(f, "z", "s", zs), *img = golden(f, "image", "s", is);
    float *x = golden(f, "x", "s", xs), *mom = golden(f, "moments", "s", ms);
    size_t ni = (size_t)(is[0] * is[1] * is[2]), nm = (size_t)(ms[0] * ms[1] * ms[2]);
    float *got = malloc(sizeof(float) * ni), *gm = malloc(sizeof(float) * nm);
    assert_int_equal(cq_qi21_vae_decode(v, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, got), CQ_OK);
    assert_int_equal(cq_qi21_vae_encode(v, x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, gm), CQ_OK);
    double ed = rel_err(got, img, ni), ee = rel_err(gm, mom, nm);
    printf("  vae_b s on the reference backend: decode %.3g, encode %.3g (max err / RMS)\n", ed, ee);
    if (ed > 1e-4 || ee > 1e-4) fail_msg("ref backend: decode %.3g, encode %.3g > 1e-4", ed, ee);
    free(z);
    free(img);
    free(x);
    free(mom);
    free(got);
    free(gm);
    cq_qi21_vae_free(v);
    cq_backend_free(ref);
}

/* A copy of vae_b with an edited config must fail to load with `want`, naming `msg`. */
static void bad_config(const char *from, const char *to, cq_status want, const char *msg) {
    vg_bad_config(VG_DIR "/vae_b", from, to, g_fx[1][F32].be, want, msg);
}

static void test_config_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    bad_config("\"is_residual\": true", "\"is_residual\": false", CQ_ERR_UNSUPPORTED, "is_residual");
    bad_config("\"scale_factor_spatial\": 16", "\"scale_factor_spatial\": 8", CQ_ERR_PARSE, "scale_factor_spatial");
    bad_config("\"z_dim\": 4", "\"z_dim\": 5", CQ_ERR_PARSE, "latents_mean");
    bad_config("\"num_res_blocks\": 1", "\"num_res_blocks\": 2", CQ_ERR_MISSING, "resnets.1");
    bad_config("\"decoder_base_dim\": 8", "\"decoder_base_dim\": 16", CQ_ERR_SHAPE, "decoder.conv_in");
    bad_config("\"_class_name\": \"AutoencoderKLQwenImage21\"", "\"_class_name\": \"AutoencoderKLWan\"",
               CQ_ERR_UNSUPPORTED, "AutoencoderKLWan");
}

typedef struct prog {
    int calls, stop_after;
    uint64_t last_done, last_total;
    bool monotonic;
} prog;

static int on_progress(uint64_t done, uint64_t total, void *user) {
    prog *p = user;
    p->monotonic = p->monotonic && done > p->last_done && done <= total;
    p->last_done = done;
    p->last_total = total;
    return ++p->calls == p->stop_after;
}

/* Progress climbs to the image height; a non-zero return cancels; tiny
 * inputs (one latent pixel) work. */
static void test_progress_and_edges(void **state) {
    (void)state;
    if (!g_have) skip();
    fixture *f = &g_fx[0][F32];
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(f->vae);
    const int h = 6, w = 5, F = c->spatial_factor;
    float *z = calloc((size_t)c->z_dim * h * w, sizeof(float)), *img = malloc(sizeof(float) * 4 * h * F * w * F);
    float *mom = malloc(sizeof(float) * 2 * c->z_dim * h * w);
    prog p = {.monotonic = true};
    cq_qi21_vae_set_progress(f->vae, on_progress, &p);
    cq_qi21_vae_set_band_rows(f->vae, 32);
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, h, w, CQ_QI21_VAE_PLANAR, img), CQ_OK);
    assert_true(p.monotonic);
    assert_int_equal(p.calls, h * F / 32);
    assert_int_equal(p.last_done, (uint64_t)h * F);
    assert_int_equal(p.last_total, (uint64_t)h * F);
    p = (prog){.monotonic = true};
    assert_int_equal(cq_qi21_vae_encode(f->vae, img, h * F, w * F, CQ_QI21_VAE_PLANAR, mom), CQ_OK);
    assert_true(p.monotonic && p.calls >= 2);
    assert_int_equal(p.last_done, (uint64_t)h * F);
    p = (prog){.monotonic = true, .stop_after = 2};
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, h, w, CQ_QI21_VAE_PLANAR, img), CQ_ERR_INTERRUPTED);
    assert_int_equal(p.calls, 2);
    p = (prog){.monotonic = true, .stop_after = 1};
    assert_int_equal(cq_qi21_vae_encode(f->vae, img, h * F, w * F, CQ_QI21_VAE_PLANAR, mom), CQ_ERR_INTERRUPTED);
    cq_qi21_vae_set_progress(f->vae, NULL, NULL);
    cq_qi21_vae_set_band_rows(f->vae, 0);
    /* one latent pixel <-> one 16x16 tile */
    for (int i = 0; i < c->z_dim; i++) z[i] = 0.5f * (float)(i % 3) - 0.5f;
    assert_int_equal(cq_qi21_vae_decode(f->vae, z, 1, 1, CQ_QI21_VAE_CHANNELS_LAST, img), CQ_OK);
    for (int i = 0; i < c->image_channels * F * F; i++) assert_true(isfinite(img[i]) && fabsf(img[i]) <= 1.0f);
    assert_int_equal(cq_qi21_vae_encode(f->vae, img, F, F, CQ_QI21_VAE_CHANNELS_LAST, mom), CQ_OK);
    for (int i = 0; i < 2 * c->z_dim; i++) assert_true(isfinite(mom[i]));
    free(z);
    free(img);
    free(mom);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_vae", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden_f32), cmocka_unit_test(test_golden_f16),     cmocka_unit_test(test_bands),
        cmocka_unit_test(test_layouts_and_norm), cmocka_unit_test(test_errors), cmocka_unit_test(test_progress_and_edges),
        cmocka_unit_test(test_config_errors),    cmocka_unit_test(test_ref_backend),  cmocka_unit_test(test_decoder_only),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden_f32),
        cmocka_unit_test(test_default_vs_cpu),
        cmocka_unit_test(test_bands),
        cmocka_unit_test(test_errors),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_vae (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_vae (host)", host, setup, teardown);
}
