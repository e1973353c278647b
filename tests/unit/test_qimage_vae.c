/*
 * test_qimage_vae.c — Qwen-Image's VAE (diffusers AutoencoderKLQwenImage,
 * the Wan-2.1 layout, on the code of models/qi21_vae.h) against the
 * reference (tests/golden/qimage_vae, made by tools/golden_qwenimage_vae.py
 * from diffusers 58eb52c0 in f32): the tiny random model converted here with
 * `cortiq convert`'s library entry (its 5-D causal kernels cut to their last
 * temporal tap), every case of index.json on the backend named by the one
 * argument (testutil.h: `test_qimage_vae cpu`, label unit;
 * `test_qimage_vae cuda`, registered as test_qimage_vae_cuda, label gpu;
 * exits 77, skipped, where the backend is not built or no device is present).
 *
 * Cases: decode (z -> image), pipeline (the denoiser's latents, denormalised
 * as pipeline_qwenimage.py does, latents / (1 / std) + mean, then decoded)
 * and encode (x -> moments; the posterior mode, its first half; the latents
 * the edit pipeline makes of it, (mean - latents_mean) / latents_std).
 *
 * Error measure: max |got - ref| / RMS(ref) over the whole output (and,
 * printed alongside, RMS(got - ref) / RMS(ref)).
 *
 * On the CPU:
 *  - converted to f32 and with convert's defaults (f16 kernels; the golden
 *    weights are exact in f16, so the values are the same): max <= 1e-4;
 *  - the denormalisation gives the reference's z bit for bit, the
 *    normalisation of the reference's mean its latents bit for bit (f32 ops
 *    in the reference's order);
 *  - banded against whole-image decode and encode: max <= 1e-6 (every pixel
 *    sees the same inputs; only the CPU GEMM's narrow-matrix path, which a
 *    band of <= 4 pixels takes, sums in another order), and a tall decode
 *    in bands holds under a third of the whole-image activation memory;
 *  - the converted pack matches the tensor table exactly (no missing,
 *    unexpected or mismatched tensor), the kernels are 4-D;
 *  - the latent codec's geometry, bad arguments, bad configs, a decode-only
 *    file, the reference backend.
 *
 * On a device, every case converted to f32: max err / RMS within a quarter
 * of the reference's own bf16 error on that case (index.json's
 * bf16_max_rel), RMS err within a quarter of bf16_rms_rel; banded against
 * whole-image decoding within the same bounds; bad arguments refused as on
 * the CPU.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "format/convert.h"
#include "format/safetensors.h"
#include "models/tables.h"
#include "testutil.h"
#include "vae_golden.h"

#define QG_DIR CQ_SOURCE_DIR "/tests/golden/qimage_vae"
#define MAX_CASES 8
#define Z_DIM 16

typedef enum ckind { DECODE, PIPELINE, ENCODE } ckind;

typedef struct gcase {
    char name[32];
    ckind kind;
    double bf16_max, bf16_rms;
    float *in, *ref;      /* z / the latents / x; image or moments (planar) */
    uint64_t in_shape[3], ref_shape[3];
    float *z;             /* pipeline: the reference's denormalised latents */
    float *mean, *latents; /* encode: the posterior mode, and it normalised */
} gcase;

enum { F32, DEFAULT, CODECS };
static cq_cmf *g_cmf[CODECS];
static cq_qi21_vae *g_vae[CODECS];
static gcase g_cases[MAX_CASES];
static int g_n;
static bool g_have;
static tu_backend_arg g_arg;
static cq_backend *g_be;

static size_t nelem3(const uint64_t s[3]) { return (size_t)(s[0] * s[1] * s[2]); }

static bool have_golden(void) {
    struct stat st;
    return stat(QG_DIR "/index.json", &st) == 0 && stat(QG_DIR "/vae/config.json", &st) == 0;
}

static void load_cases(void) {
    cJSON *j = tu_read_json(QG_DIR "/index.json");
    assert_non_null(j);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases"), *c;
    cJSON_ArrayForEach(c, cases) {
        assert_true(g_n < MAX_CASES);
        gcase *g = &g_cases[g_n++];
        snprintf(g->name, sizeof g->name, "%s", c->string);
        const char *k = cJSON_GetObjectItemCaseSensitive(c, "kind")->valuestring;
        g->kind = strcmp(k, "decode") == 0 ? DECODE : strcmp(k, "pipeline") == 0 ? PIPELINE : ENCODE;
        g->bf16_max = cJSON_GetObjectItemCaseSensitive(c, "bf16_max_rel")->valuedouble;
        g->bf16_rms = cJSON_GetObjectItemCaseSensitive(c, "bf16_rms_rel")->valuedouble;
        char path[1200];
        snprintf(path, sizeof path, "%s/cases/%s.safetensors", QG_DIR, g->name);
        cq_st *st;
        if (cq_st_open(path, &st) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
        const char *in = g->kind == DECODE ? "z" : g->kind == PIPELINE ? "latents" : "x";
        g->in = vg_read3(st, g->name, in, g->in_shape);
        g->ref = vg_read3(st, g->name, g->kind == ENCODE ? "moments" : "image", g->ref_shape);
        if (g->kind == PIPELINE) g->z = vg_read3(st, g->name, "z", NULL);
        if (g->kind == ENCODE) {
            g->mean = vg_read3(st, g->name, "mean", NULL);
            g->latents = vg_read3(st, g->name, "latents", NULL);
        }
        cq_st_close(st);
    }
    cJSON_Delete(j);
    assert_true(g_n >= 4);
}

static const gcase *find_case(const char *name) {
    for (int i = 0; i < g_n; i++)
        if (strcmp(g_cases[i].name, name) == 0) return &g_cases[i];
    fail_msg("no golden case '%s'", name);
    return NULL;
}

/* The z a case decodes: its own, or (pipeline) its latents denormalised here. */
static float *decoder_input(const cq_qi21_vae *v, const gcase *g) {
    const size_t n = nelem3(g->in_shape);
    float *z = malloc(sizeof(float) * n);
    assert_non_null(z);
    memcpy(z, g->in, sizeof(float) * n);
    if (g->kind == PIPELINE)
        assert_int_equal(cq_qi21_vae_denormalize(v, z, (int)g->in_shape[1], (int)g->in_shape[2], CQ_QI21_VAE_PLANAR),
                         CQ_OK);
    return z;
}

/* Runs case g on v into a malloc'd output. */
static float *run_ok(cq_qi21_vae *v, const gcase *g) {
    float *out = malloc(sizeof(float) * nelem3(g->ref_shape));
    assert_non_null(out);
    cq_status s;
    if (g->kind == ENCODE) {
        s = cq_qi21_vae_encode(v, g->in, (int)g->in_shape[1], (int)g->in_shape[2], CQ_QI21_VAE_PLANAR, out);
    } else {
        float *z = decoder_input(v, g);
        s = cq_qi21_vae_decode(v, z, (int)g->in_shape[1], (int)g->in_shape[2], CQ_QI21_VAE_PLANAR, out);
        free(z);
    }
    if (s != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
    return out;
}

/* ---- the golden cases ------------------------------------------------------------------------ */
static void golden(int codec, const char *label) {
    for (int i = 0; i < g_n; i++) {
        const gcase *g = &g_cases[i];
        float *got = run_ok(g_vae[codec], g);
        vg_check_case(g->name, label, cq_backend_name(g_be), g_arg.device, got, g->ref, nelem3(g->ref_shape),
                      g->bf16_max, g->bf16_rms);
        if (g->kind == ENCODE) { /* the mode is the first half of the moments */
            const size_t nm = (size_t)Z_DIM * g->ref_shape[1] * g->ref_shape[2];
            double em = vg_rel_err(got, g->mean, nm, NULL);
            if (em > (g_arg.device ? g->bf16_max / 4 : 1e-4)) fail_msg("%s: the mean is %.3g off", g->name, em);
        }
        free(got);
    }
}

static void test_golden_f32(void **state) {
    (void)state;
    if (!g_have) skip();
    golden(F32, "f32");
}

static void test_golden_default(void **state) {
    (void)state;
    if (!g_have) skip();
    golden(DEFAULT, "convert's defaults");
}

/* The pipeline's normalisation formulas, bit for bit, on the host. */
static void test_normalisation(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_qi21_vae *v = g_vae[F32];
    for (int i = 0; i < g_n; i++) {
        const gcase *g = &g_cases[i];
        if (g->kind == PIPELINE) {
            float *z = decoder_input(v, g);
            assert_memory_equal(z, g->z, sizeof(float) * nelem3(g->in_shape));
            free(z);
        } else if (g->kind == ENCODE) {
            const int h = (int)g->ref_shape[1], w = (int)g->ref_shape[2];
            const size_t n = (size_t)Z_DIM * h * w;
            float *m = malloc(sizeof(float) * n);
            memcpy(m, g->mean, sizeof(float) * n);
            assert_int_equal(cq_qi21_vae_normalize(v, m, h, w, CQ_QI21_VAE_PLANAR), CQ_OK);
            assert_memory_equal(m, g->latents, sizeof(float) * n);
            free(m);
        }
    }
    /* the order matters: x / (1 / std) rounds differently from x * std for some x (reported, not required) */
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(v);
    int differ = 0;
    for (int t = 0; t < 64; t++) {
        float a[Z_DIM]; /* one latent pixel */
        for (int k = 0; k < Z_DIM; k++) a[k] = 0.37f * (float)t - 11.0f;
        assert_int_equal(cq_qi21_vae_denormalize(v, a, 1, 1, CQ_QI21_VAE_PLANAR), CQ_OK);
        for (int k = 0; k < Z_DIM; k++) {
            float b = (0.37f * (float)t - 11.0f) * c->latents_std[k];
            differ += a[k] != b + c->latents_mean[k];
        }
    }
    printf("  denormalisation: %d of %d values differ from x * std + mean\n", differ, Z_DIM * 64);
}

/* ---- banded against whole --------------------------------------------------------------------- */
static double banded_vs_whole(cq_qi21_vae *v, const gcase *g, int rows, double *rms, size_t *peaks) {
    cq_qi21_vae_set_band_rows(v, INT_MAX);
    float *a = run_ok(v, g);
    peaks[0] = cq_qi21_vae_last_peak_bytes(v);
    cq_qi21_vae_set_band_rows(v, rows);
    float *b = run_ok(v, g);
    peaks[1] = cq_qi21_vae_last_peak_bytes(v);
    cq_qi21_vae_set_band_rows(v, 0);
    double e = vg_rel_err(b, a, nelem3(g->ref_shape), rms);
    free(a);
    free(b);
    return e;
}

static void test_bands(void **state) {
    (void)state;
    if (!g_have) skip();
    static const char *const names[] = {"dec_odd", "pipe", "enc_odd"};
    static const int rows[] = {1, 8, 16};
    for (size_t k = 0; k < CQ_ARRAY_LEN(names); k++) {
        const gcase *g = find_case(names[k]);
        for (size_t r = 0; r < CQ_ARRAY_LEN(rows); r++) {
            double rms;
            size_t peaks[2];
            double e = banded_vs_whole(g_vae[F32], g, rows[r], &rms, peaks);
            printf("  %s on %s, bands of %d rows against whole: %.3g (RMS %.3g); peak %zu vs %zu bytes\n", g->name,
                   cq_backend_name(g_be), rows[r], e, rms, peaks[1], peaks[0]);
            const double bound = g_arg.device ? g->bf16_max / 4 : 1e-6;
            if (e > bound || (g_arg.device && rms > g->bf16_rms / 4))
                fail_msg("%s, bands of %d rows: %.3g from the whole image", g->name, rows[r], e);
        }
    }
    if (g_arg.device) return;
    /* a tall decode (40 x 6 latents -> 320 x 48 pixels): the banded peak well below the whole image's */
    gcase tall = *find_case("dec_s");
    tall.kind = DECODE;
    tall.in_shape[1] = 40;
    tall.in_shape[2] = 6;
    tall.ref_shape[1] = 320;
    tall.ref_shape[2] = 48;
    tall.in = malloc(sizeof(float) * Z_DIM * 40 * 6);
    tu_rng rng;
    tu_rng_seed(&rng, 9);
    tu_fill_normal(&rng, tall.in, (size_t)Z_DIM * 40 * 6, 1.0f);
    double rms;
    size_t peaks[2];
    double e = banded_vs_whole(g_vae[F32], &tall, 8, &rms, peaks);
    printf("  tall 320x48 decode, bands of 8 rows: against whole %.3g; peak %zu vs %zu bytes\n", e, peaks[1], peaks[0]);
    if (e > 1e-6 || peaks[1] * 3 > peaks[0])
        fail_msg("tall decode: %.3g from whole, or the banded peak %zu is not under a third of %zu", e, peaks[1],
                 peaks[0]);
    free(tall.in);
}

/* ---- the pack, the codec, errors ------------------------------------------------------------- */
static void test_pack(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(g_cmf[F32], NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    const cq_tensor_view *t = cq_cmf_find(g_cmf[DEFAULT], "vae.decoder.conv_in.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 4);
    assert_int_equal(t->dtype, CQ_DTYPE_F16);
    assert_int_equal(t->shape[1], Z_DIM);
    assert_int_equal(t->shape[2], 3);
    t = cq_cmf_find(g_cmf[F32], "vae.decoder.up_blocks.0.upsamplers.0.resample.1.weight");
    assert_non_null(t);
    assert_int_equal(t->shape[0] * 2, t->shape[1]); /* C -> C/2 */
    /* a lone folder of this class is its own arch */
    char out[1200];
    snprintf(out, sizeof out, "%s/vae.cmf", tu_tmpdir("qimage_vae_arch"));
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report r;
    assert_int_equal(cq_convert(QG_DIR "/vae", out, &opts, &r), CQ_OK);
    assert_string_equal(r.arch, "qwen_image_vae");
    printf("  convert: %zu causal kernels stored as their last temporal tap\n", r.last_taps);
    assert_true(r.last_taps > 40);
    cq_convert_report_free(&r);

    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(g_vae[F32]);
    assert_int_equal(c->kind, CQ_QI21_VAE_QIMAGE);
    assert_int_equal(c->spatial_factor, 8);
    assert_int_equal(c->image_channels, 3);
    assert_int_equal(c->patch_size, 1);
    assert_int_equal(c->n_levels, 4);
    assert_true(c->has_encoder);
    cq_latent_codec k = cq_qi21_vae_codec(g_vae[F32]);
    assert_int_equal(k.channels, Z_DIM);
    assert_int_equal(k.factor, 8);
    assert_int_equal(k.image_channels, 3);
    assert_non_null(k.encode);
    /* the denoiser's tokens, as _pack_latents makes them: token (y/2)*(w/2) + x/2, value c*4 + (y%2)*2 + x%2 */
    enum { H = 4, W = 6, N = Z_DIM * H * W };
    float chw[N], tok[N], back[N];
    for (int i = 0; i < N; i++) chw[i] = (float)i;
    k.pack(k.self, chw, tok, H, W);
    for (int ch = 0; ch < Z_DIM; ch++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                assert_float_equal(tok[((y / 2) * (W / 2) + x / 2) * 4 * Z_DIM + ch * 4 + (y % 2) * 2 + x % 2],
                                   chw[(ch * H + y) * W + x], 0.0f);
    k.unpack(k.self, tok, back, H, W);
    assert_memory_equal(back, chw, sizeof chw);
}

static void test_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_qi21_vae *v = g_vae[F32];
    float buf[3 * 24 * 24] = {0}, out[32 * 9];
    assert_int_equal(cq_qi21_vae_encode(v, buf, 20, 24, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_non_null(strstr(cq_last_error(), "multiple of 8"));
    assert_int_equal(cq_qi21_vae_encode(v, buf, 0, 24, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_qi21_vae_decode(v, buf, 0, 3, CQ_QI21_VAE_PLANAR, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_qi21_vae_decode(v, buf, 2, 3, (cq_qi21_vae_layout)7, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qi21_vae_decode(v, NULL, 2, 3, CQ_QI21_VAE_PLANAR, out), CQ_ERR_INVALID_ARG);
}

/* A copy of the golden folder with an edited config must fail to load with `want`, naming `msg`. */
static void bad_config(const char *from, const char *to, cq_status want, const char *msg) {
    vg_bad_config(QG_DIR "/vae", from, to, g_be, want, msg);
}

static void test_config_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    bad_config("\"attn_scales\": []", "\"attn_scales\": [0.5]", CQ_ERR_UNSUPPORTED, "attn_scales");
    bad_config("\"num_res_blocks\": 2", "\"num_res_blocks\": 3", CQ_ERR_MISSING, "down_blocks.2.norm1.gamma");
    bad_config("\"base_dim\": 4", "\"base_dim\": 8", CQ_ERR_SHAPE, "encoder.conv_in");
    bad_config("\"z_dim\": 16", "\"z_dim\": 17", CQ_ERR_PARSE, "latents_mean");
}

/* A decode-only file (convert --drop 'vae.encoder.*' --drop 'vae.quant_conv.*') decodes as the whole model does
 * and refuses to encode. */
static void test_decoder_only(void **state) {
    (void)state;
    if (!g_have) skip();
    char out[1200];
    snprintf(out, sizeof out, "%s/dec.cmf", tu_tmpdir("qimage_vae_dec_only"));
    static const char *const drop[] = {"vae.encoder.*", "vae.quant_conv.*"};
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32, .drop = drop, .n_drop = 2};
    cq_convert_report rep;
    assert_int_equal(cq_convert(QG_DIR "/vae", out, &opts, &rep), CQ_OK);
    cq_convert_report_free(&rep);
    cq_cmf *cmf;
    cq_qi21_vae *v;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    if (cq_qi21_vae_load(cmf, "vae.", g_be, &v) != CQ_OK) fail_msg("load: %s", cq_last_error());
    assert_false(cq_qi21_vae_get_config(v)->has_encoder);
    const gcase *g = find_case("dec_s");
    float *a = run_ok(g_vae[F32], g), *b = run_ok(v, g);
    assert_memory_equal(a, b, sizeof(float) * nelem3(g->ref_shape));
    assert_int_equal(cq_qi21_vae_encode(v, a, (int)g->ref_shape[1], (int)g->ref_shape[2], CQ_QI21_VAE_PLANAR, b),
                     CQ_ERR_UNSUPPORTED);
    free(a);
    free(b);
    cq_qi21_vae_free(v);
    cq_cmf_close(cmf);
}

/* The model runs on the reference backend too (every op in plain C). */
static void test_ref_backend(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_backend *ref;
    cq_qi21_vae *v;
    assert_int_equal(cq_backend_ref_create(&ref), CQ_OK);
    if (cq_qi21_vae_load(g_cmf[F32], "vae.", ref, &v) != CQ_OK) fail_msg("load on ref: %s", cq_last_error());
    static const char *const names[] = {"pipe", "enc_s"};
    for (size_t k = 0; k < CQ_ARRAY_LEN(names); k++) {
        const gcase *g = find_case(names[k]);
        float *got = run_ok(v, g);
        double e = vg_rel_err(got, g->ref, nelem3(g->ref_shape), NULL);
        printf("  %s on the reference backend: max err/RMS %.3g\n", g->name, e);
        if (e > 1e-4) fail_msg("%s on the reference backend: %.3g > 1e-4", g->name, e);
        free(got);
    }
    cq_qi21_vae_free(v);
    cq_backend_free(ref);
}

static int setup(void **state) {
    (void)state;
    g_have = have_golden();
    if (!g_have) {
        printf("tests/golden/qimage_vae is absent: skipping the Qwen-Image VAE tests\n");
        return 0;
    }
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    load_cases();
    for (int k = 0; k < CODECS; k++) {
        g_cmf[k] = vg_convert_dir(QG_DIR, "vae", k == F32 ? CQ_DTYPE_F32 : -1);
        if (cq_qi21_vae_load(g_cmf[k], "vae.", g_be, &g_vae[k]) != CQ_OK)
            fail_msg("load on %s: %s", cq_backend_name(g_be), cq_last_error());
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int k = 0; k < CODECS; k++) {
        cq_qi21_vae_free(g_vae[k]);
        cq_cmf_close(g_cmf[k]);
    }
    for (int i = 0; i < g_n; i++) {
        free(g_cases[i].in);
        free(g_cases[i].ref);
        free(g_cases[i].z);
        free(g_cases[i].mean);
        free(g_cases[i].latents);
    }
    cq_backend_free(g_be);
    return 0;
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qimage_vae", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden_f32),  cmocka_unit_test(test_golden_default), cmocka_unit_test(test_normalisation),
        cmocka_unit_test(test_bands),       cmocka_unit_test(test_pack),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_config_errors), cmocka_unit_test(test_decoder_only), cmocka_unit_test(test_ref_backend),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden_f32),
        cmocka_unit_test(test_bands),
        cmocka_unit_test(test_errors),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qimage_vae (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_qimage_vae (host)", host, setup, teardown);
}
