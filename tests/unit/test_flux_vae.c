/*
 * test_flux_vae.c — the Flux VAE (diffusers AutoencoderKL, Z-Image's)
 * against the reference (tests/golden/zimage, made by tools/golden_zimage.py
 * from diffusers 58eb52c0 in f32): two tiny random configurations converted
 * here with `cortiq convert`'s library entry, every decode case (z -> the
 * raw image) and encode case (x -> moments) of vae_cases/, on the backend
 * named by the one argument (testutil.h: `test_flux_vae cpu`, label unit;
 * `test_flux_vae cuda`, registered as test_flux_vae_cuda, label gpu; exits
 * 77, skipped, where the backend is not built or no device is present).
 *
 * Error measure: max |got - ref| / RMS(ref) over the whole output (and,
 * printed alongside, RMS(got - ref) / RMS(ref)).
 *
 * On the CPU:
 *  - converted to f32 and with convert's defaults (f16 kernels; the golden
 *    weights are exactly representable in f16, so the values are the same):
 *    max <= 1e-4 (the parity bar);
 *  - the bounded-memory path against the whole-image path: bands of 1 to 16
 *    image rows forced at every level, a 64 KiB budget, and budgets from 90 %
 *    down to 30 % of the whole image's peak (which reach both fine and coarse
 *    checkpoints, each plan within its budget), decode and encode within
 *    1e-6 of the whole-image run (measured: identical; the
 *    statistics are bit-identical whatever the bands; only the CPU GEMM's
 *    narrow-matrix path, which a band of <= 4 pixels takes, sums in another
 *    order); statistics passes must have run and recomputed, and on the tall
 *    case the banded peak must be under a third of the whole-image peak;
 *  - the plan (a dry run) reports exactly the peak and the work of the real
 *    run, and keeps a 2048x2048-class decode under its budget;
 *  - quant_conv / post_quant_conv (SD-style files): the golden model with
 *    permutation 1x1 convs added gives the golden results permuted, bit for
 *    bit;
 *  - the codec: 2x2 patchify order, the normalisation's f32 formulas, the
 *    clamp; progress and cancellation; bad arguments, a wrong-size input,
 *    bad configs and a pack missing a tensor (named); a decode-only file;
 *    the reference backend.
 *
 * On a device, every golden case converted to f32: max err / RMS within a
 * quarter of the reference's own bf16 error on that case (index.json's
 * bf16_max_rel), RMS err within a quarter of bf16_rms_rel; banded against
 * whole-image decoding within the same bounds; bad arguments refused as on
 * the CPU.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format/convert.h"
#include "format/safetensors.h"
#include "models/flux_vae.h"
#include "testutil.h"
#include "vae_golden.h"

#define ZG_DIR CQ_SOURCE_DIR "/tests/golden/zimage"
#define N_CASES 10

typedef struct gcase {
    char name[32]; /* "vae_a_dec_s" */
    int model;     /* 0 = vae_a, 1 = vae_b */
    bool decode;
    double bf16_max, bf16_rms;
    float *in, *ref; /* z or x; image or moments (planar) */
    uint64_t in_shape[3], ref_shape[3];
} gcase;

typedef struct fixture {
    cq_cmf *cmf;
    cq_flux_vae *vae;
} fixture;

enum { F32, DEFAULT, CODECS };
static const char *const k_models[2] = {"vae_a", "vae_b"};
static fixture g_fx[2][CODECS];
static gcase g_cases[N_CASES];
static int g_n;
static bool g_have;
static tu_backend_arg g_arg;
static cq_backend *g_be;

static size_t nelem3(const uint64_t s[3]) { return (size_t)(s[0] * s[1] * s[2]); }

static int load_cases(void) {
    cJSON *j = tu_read_json(ZG_DIR "/index.json");
    if (!j) return -1;
    const cJSON *vae = cJSON_GetObjectItemCaseSensitive(j, "vae"), *c;
    cJSON_ArrayForEach(c, vae) {
        if (g_n == N_CASES) break;
        gcase *g = &g_cases[g_n++];
        snprintf(g->name, sizeof g->name, "%s", c->string);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "model"), *k = cJSON_GetObjectItemCaseSensitive(c, "kind");
        assert_true(cJSON_IsString(m) && cJSON_IsString(k));
        g->model = strcmp(m->valuestring, "vae_b") == 0;
        g->decode = strcmp(k->valuestring, "decode") == 0;
        g->bf16_max = cJSON_GetObjectItemCaseSensitive(c, "bf16_max_rel")->valuedouble;
        g->bf16_rms = cJSON_GetObjectItemCaseSensitive(c, "bf16_rms_rel")->valuedouble;
        char path[1200];
        snprintf(path, sizeof path, "%s/vae_cases/%s.safetensors", ZG_DIR, g->name);
        cq_st *st;
        if (cq_st_open(path, &st) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
        g->in = vg_read3(st, g->name, g->decode ? "z" : "x", g->in_shape);
        g->ref = vg_read3(st, g->name, g->decode ? "image" : "moments", g->ref_shape);
        cq_st_close(st);
    }
    cJSON_Delete(j);
    return g_n == N_CASES ? 0 : -1;
}

static const gcase *find_case(const char *name) {
    for (int i = 0; i < g_n; i++)
        if (strcmp(g_cases[i].name, name) == 0) return &g_cases[i];
    fail_msg("no golden case '%s'", name);
    return NULL;
}

/* Runs case g on v into a malloc'd output; the status. */
static cq_status run_case(cq_flux_vae *v, const gcase *g, float **out) {
    *out = malloc(sizeof(float) * nelem3(g->ref_shape));
    assert_non_null(*out);
    return g->decode ? cq_flux_vae_decode(v, g->in, (int)g->in_shape[1], (int)g->in_shape[2], *out)
                     : cq_flux_vae_encode(v, g->in, (int)g->in_shape[1], (int)g->in_shape[2], *out);
}

static float *run_ok(cq_flux_vae *v, const gcase *g) {
    float *out;
    if (run_case(v, g, &out) != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
    return out;
}

/* ---- the golden cases ------------------------------------------------------------------------ */
static void golden(int codec, const char *label) {
    for (int i = 0; i < g_n; i++) {
        const gcase *g = &g_cases[i];
        float *got = run_ok(g_fx[g->model][codec].vae, g);
        vg_check_case(g->name, label, cq_backend_name(g_be), g_arg.device, got, g->ref, nelem3(g->ref_shape),
                      g->bf16_max, g->bf16_rms);
        free(got);
    }
}

static void test_golden_f32(void **state) {
    (void)state;
    if (!g_have) skip();
    golden(F32, "f32");
}

/* convert's default codec for a VAE (f16 kernels and matrices), values unchanged by it */
static void test_golden_default(void **state) {
    (void)state;
    if (!g_have) skip();
    golden(DEFAULT, "convert's defaults");
}

/* ---- banded against whole --------------------------------------------------------------------- */
/* Case g whole and with `rows` image rows per band (rows > 0) or `budget` bytes (rows 0): the difference, the
 * stats of both. */
static double banded_vs_whole(cq_flux_vae *v, const gcase *g, int rows, size_t budget, cq_flux_vae_stats *whole,
                              cq_flux_vae_stats *band, double *rms) {
    cq_flux_vae_set_band_rows(v, INT_MAX);
    float *a = run_ok(v, g);
    *whole = cq_flux_vae_last_stats(v);
    cq_flux_vae_set_band_rows(v, rows);
    cq_flux_vae_set_budget(v, budget);
    float *b = run_ok(v, g);
    *band = cq_flux_vae_last_stats(v);
    cq_flux_vae_set_band_rows(v, 0);
    cq_flux_vae_set_budget(v, 0);
    double e = vg_rel_err(b, a, nelem3(g->ref_shape), rms);
    free(a);
    free(b);
    return e;
}

static void bands_host(void) {
    static const char *const names[] = {"vae_b_dec_l", "vae_a_dec_odd", "vae_b_enc_odd", "vae_a_enc_s"};
    static const int rows[] = {1, 3, 8, 16};
    for (size_t k = 0; k < CQ_ARRAY_LEN(names); k++) {
        const gcase *g = find_case(names[k]);
        cq_flux_vae *v = g_fx[g->model][F32].vae;
        for (size_t r = 0; r < CQ_ARRAY_LEN(rows) + 1; r++) {
            cq_flux_vae_stats w, b;
            double rms;
            /* the last run: a budget of 64 KiB, the plan choosing the bands */
            const bool planned = r == CQ_ARRAY_LEN(rows);
            double e = banded_vs_whole(v, g, planned ? 0 : rows[r], planned ? 64 << 10 : 0, &w, &b, &rms);
            char what[48];
            snprintf(what, sizeof what, planned ? "a 64 KiB budget" : "bands of %d rows", planned ? 0 : rows[r]);
            printf("  %s, %s: against whole %.3g (RMS %.3g); peak %zu vs %zu bytes, work %.2fx, %d statistics "
                   "passes\n", g->name, what, e, rms, b.peak_bytes, w.peak_bytes, (double)b.macs / (double)w.macs,
                   b.stat_passes);
            if (e > 1e-6) fail_msg("%s, %s: %.3g from the whole-image result", g->name, what, e);
            if (w.stat_passes != 0 || b.stat_passes < 1 || b.macs <= w.macs)
                fail_msg("%s, %s: %d / %d statistics passes, work %llu / %llu: the bands did not stream", g->name, what,
                         w.stat_passes, b.stat_passes, (unsigned long long)b.macs, (unsigned long long)w.macs);
        }
    }
    /* budgets between the whole image's peak and 30 % of it: the plan streams the top levels with fine
     * checkpoints (one after every resnet), then coarse ones; each within its budget, each the whole image */
    {
        const gcase *gl = find_case("vae_b_dec_l");
        cq_flux_vae *vb = g_fx[1][F32].vae;
        cq_flux_vae_set_band_rows(vb, INT_MAX);
        float *ref = run_ok(vb, gl);
        const cq_flux_vae_stats whole = cq_flux_vae_last_stats(vb);
        cq_flux_vae_set_band_rows(vb, 0);
        bool fine = false, coarse = false;
        for (int pct = 90; pct >= 30; pct -= 10) {
            const size_t budget = whole.peak_bytes / 100 * (size_t)pct;
            cq_flux_vae_set_budget(vb, budget);
            float *got = run_ok(vb, gl);
            const cq_flux_vae_stats st = cq_flux_vae_last_stats(vb);
            const double e = vg_rel_err(got, ref, nelem3(gl->ref_shape), NULL);
            printf("  %s, a budget of %d%% of the whole image's %zu bytes: peak %zu, %d passes, %d checkpoints, work "
                   "%.2fx, against whole %.3g\n", gl->name, pct, whole.peak_bytes, st.peak_bytes, st.stat_passes,
                   st.checkpoints, (double)st.macs / (double)whole.macs, e);
            if (e > 1e-6 || st.peak_bytes > budget)
                fail_msg("budget %zu: %.3g from the whole image, peak %zu", budget, e, st.peak_bytes);
            fine = fine || st.checkpoints > 3; /* more than one per level: after the resnets */
            coarse = coarse || (st.checkpoints > 0 && st.checkpoints <= 3);
            free(got);
        }
        cq_flux_vae_set_budget(vb, 0);
        free(ref);
        if (!fine || !coarse) fail_msg("the budgets did not reach both kinds of checkpoints (fine %d, coarse %d)", fine, coarse);
    }
    /* a taller decode (48 x 16 latents -> 384 x 128 pixels): the peak must fall well below the whole image's */
    const gcase *g = find_case("vae_b_dec_l");
    cq_flux_vae *v = g_fx[1][F32].vae;
    const int h = 48, w = 16;
    gcase tall = *g;
    tall.in_shape[1] = (uint64_t)h;
    tall.in_shape[2] = (uint64_t)w;
    tall.ref_shape[1] = (uint64_t)h * 8;
    tall.ref_shape[2] = (uint64_t)w * 8;
    tall.in = malloc(sizeof(float) * 16 * h * w);
    tu_rng rng;
    tu_rng_seed(&rng, 5);
    tu_fill_normal(&rng, tall.in, (size_t)16 * h * w, 1.0f);
    cq_flux_vae_stats ws, bs;
    double rms, e = banded_vs_whole(v, &tall, 8, 0, &ws, &bs, &rms);
    printf("  tall 384x128 decode, bands of 8 rows: against whole %.3g; peak %zu vs %zu bytes, work %.2fx\n", e,
           bs.peak_bytes, ws.peak_bytes, (double)bs.macs / (double)ws.macs);
    if (e > 1e-6 || bs.peak_bytes * 3 > ws.peak_bytes)
        fail_msg("tall decode: %.3g from whole, or the banded peak %zu is not under a third of %zu", e, bs.peak_bytes,
                 ws.peak_bytes);
    free(tall.in);
}

/* Device runs: bands of 1 and 8 image rows against the whole image, within the device bounds of the case, on the
 * odd-sized decode and encode (the host runs cover the large decode and the planner; on lavapipe the large decode in
 * bands of 1 row alone took minutes of CI). */
static void bands_device(void) {
    static const char *const names[] = {"vae_b_dec_odd", "vae_b_enc_odd"};
    for (size_t k = 0; k < CQ_ARRAY_LEN(names); k++) {
        const gcase *g = find_case(names[k]);
        static const int rows[] = {1, 8};
        for (size_t r = 0; r < CQ_ARRAY_LEN(rows); r++) {
            cq_flux_vae_stats w, b;
            double rms, e = banded_vs_whole(g_fx[g->model][F32].vae, g, rows[r], 0, &w, &b, &rms);
            printf("  %s on %s, bands of %d rows against whole: %.3g, RMS %.3g\n", g->name, cq_backend_name(g_be),
                   rows[r], e, rms);
            if (e > g->bf16_max / 4 || rms > g->bf16_rms / 4)
                fail_msg("%s, bands of %d rows: %.3g / %.3g from the whole image", g->name, rows[r], e, rms);
        }
    }
}

static void test_bands(void **state) {
    (void)state;
    if (!g_have) skip();
    if (g_arg.device)
        bands_device();
    else
        bands_host();
}

/* The dry run reports what the real run does; a large decode stays under its budget. */
static void test_plan(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_flux_vae *v = g_fx[1][F32].vae;
    const gcase *g = find_case("vae_b_dec_l");
    for (int r = 0; r < 2; r++) {
        cq_flux_vae_set_band_rows(v, r ? 8 : INT_MAX);
        float *out = run_ok(v, g);
        cq_flux_vae_stats real = cq_flux_vae_last_stats(v), plan;
        free(out);
        assert_int_equal(cq_flux_vae_plan(v, true, (int)g->in_shape[1], (int)g->in_shape[2], &plan), CQ_OK);
        assert_int_equal(plan.peak_bytes, real.peak_bytes);
        assert_int_equal(plan.macs, real.macs);
        assert_int_equal(plan.stat_passes, real.stat_passes);
    }
    cq_flux_vae_set_band_rows(v, 0);
    /* 256 x 256 latents (2048 x 2048 pixels) with the default budget and a quarter of it */
    cq_flux_vae_stats whole, dflt, quarter;
    cq_flux_vae_set_band_rows(v, INT_MAX);
    assert_int_equal(cq_flux_vae_plan(v, true, 256, 256, &whole), CQ_OK);
    cq_flux_vae_set_band_rows(v, 0);
    assert_int_equal(cq_flux_vae_plan(v, true, 256, 256, &dflt), CQ_OK);
    cq_flux_vae_set_budget(v, (size_t)7 << 26);
    assert_int_equal(cq_flux_vae_plan(v, true, 256, 256, &quarter), CQ_OK);
    cq_flux_vae_set_budget(v, 0);
    printf("  vae_b 2048x2048 decode: whole %.0f MiB; default budget %.0f MiB (%d passes, work %.2fx); 448 MiB budget "
           "%.0f MiB (%d passes, work %.2fx)\n", whole.peak_bytes / 1048576.0, dflt.peak_bytes / 1048576.0,
           dflt.stat_passes, (double)dflt.macs / (double)whole.macs, quarter.peak_bytes / 1048576.0,
           quarter.stat_passes, (double)quarter.macs / (double)whole.macs);
    if (quarter.peak_bytes > ((size_t)7 << 26) || quarter.stat_passes == 0 || dflt.peak_bytes > whole.peak_bytes)
        fail_msg("2048x2048 plan: %zu bytes for a %zu-byte budget", quarter.peak_bytes, (size_t)7 << 26);
    assert_int_equal(cq_flux_vae_plan(v, true, 0, 4, &whole), CQ_ERR_SHAPE);
}

/* ---- quant convs -------------------------------------------------------------------------------- */
/* vae_a with quant_conv (2C -> 2C) and post_quant_conv (C -> C) added as permutation 1x1 convs (zero bias):
 * out channel o reads in channel perm(o) = (o * 5 + 3) % n. */
static int perm(int o, int n) { return (o * 5 + 3) % n; }

static void add_perm_conv(cq_st_writer *w, const char *name, int n) {
    float *k = calloc((size_t)n * n, sizeof(float)), *b = calloc((size_t)n, sizeof(float));
    for (int o = 0; o < n; o++) k[o * n + perm(o, n)] = 1.0f;
    char nm[64];
    uint64_t ks[4] = {(uint64_t)n, (uint64_t)n, 1, 1}, bs[1] = {(uint64_t)n};
    snprintf(nm, sizeof nm, "%s.weight", name);
    assert_int_equal(cq_st_writer_add_f32(w, nm, 4, ks, k), CQ_OK);
    snprintf(nm, sizeof nm, "%s.bias", name);
    assert_int_equal(cq_st_writer_add_f32(w, nm, 1, bs, b), CQ_OK);
    free(k);
    free(b);
}

/* A copy of <model>'s folder whose config.json has `from` replaced by `to` (NULL: unchanged) and, with quant,
 * the permutation convs; its directory. */
static const char *edited_copy(const char *model, const char *tag, const char *from, const char *to, bool quant) {
    static char dir[1100];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir(tag));
    char src[1100];
    snprintf(src, sizeof src, "%s/%s", ZG_DIR, model);
    size_t len;
    uint8_t *raw = tu_read_file(tu_path(src, "config.json"), &len);
    assert_non_null(raw);
    char *cfg = malloc(len + 1);
    memcpy(cfg, raw, len);
    cfg[len] = '\0';
    free(raw);
    char *out = cfg;
    if (from) {
        char *at = strstr(cfg, from);
        if (!at) fail_msg("config of %s has no '%s'", model, from);
        out = malloc(len + strlen(to) + 1);
        memcpy(out, cfg, (size_t)(at - cfg));
        strcpy(out + (at - cfg), to);
        strcat(out, at + strlen(from));
        free(cfg);
    }
    assert_int_equal(tu_write_file(tu_path(dir, "config.json"), out, strlen(out)), 0);
    free(out);
    if (!quant) {
        assert_int_equal(tu_system("cp '%s/diffusion_pytorch_model.safetensors' '%s/'", src, dir), 0);
        return dir;
    }
    cq_st *st;
    assert_int_equal(cq_st_open(tu_path(src, "diffusion_pytorch_model.safetensors"), &st), CQ_OK);
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    for (size_t i = 0; i < cq_st_count(st); i++) {
        const cq_st_tensor *t = cq_st_at(st, i);
        assert_int_equal(cq_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes), CQ_OK);
    }
    add_perm_conv(w, "quant_conv", 32);
    add_perm_conv(w, "post_quant_conv", 16);
    assert_int_equal(cq_st_writer_save(w, tu_path(dir, "diffusion_pytorch_model.safetensors")), CQ_OK);
    cq_st_writer_free(w);
    cq_st_close(st);
    return dir;
}

/* Converts the folder; with want_arch, the arch convert must name. */
static cq_cmf *convert_dir(const char *dir, const char *want_arch) {
    char out[1200];
    snprintf(out, sizeof out, "%s/vae.cmf", dir);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(dir, out, &opts, &rep);
    if (s == CQ_OK && want_arch) assert_string_equal(rep.arch, want_arch);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", dir, cq_last_error());
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    return cmf;
}

static void test_quant_convs(void **state) {
    (void)state;
    if (!g_have) skip();
    const char *dir = edited_copy("vae_a", "flux_vae_quant",
                                  "\"use_post_quant_conv\": false,\n  \"use_quant_conv\": false",
                                  "\"use_post_quant_conv\": true,\n  \"use_quant_conv\": true", true);
    cq_cmf *cmf = convert_dir(dir, "flux_vae"); /* a lone AutoencoderKL folder */
    cq_flux_vae *v;
    if (cq_flux_vae_load(cmf, "vae.", g_be, &v) != CQ_OK) fail_msg("load: %s", cq_last_error());
    assert_true(cq_flux_vae_get_config(v)->use_quant_conv && cq_flux_vae_get_config(v)->use_post_quant_conv);
    /* encode: moments channel o = the plain model's channel perm(o) */
    const gcase *ge = find_case("vae_a_enc_s");
    float *plain = run_ok(g_fx[0][F32].vae, ge), *q = run_ok(v, ge);
    const size_t hw = ge->ref_shape[1] * ge->ref_shape[2];
    float *unperm = malloc(sizeof(float) * 32 * hw);
    for (int o = 0; o < 32; o++) memcpy(unperm + perm(o, 32) * hw, q + o * hw, hw * sizeof(float));
    if (!g_arg.device) assert_memory_equal(unperm, plain, 32 * hw * sizeof(float));
    /* on a device the 1x1 convs round their input to f16 like any other: the golden bound instead */
    double ee = vg_rel_err(unperm, ge->ref, 32 * hw, NULL);
    printf("  vae_a with permutation quant convs: encode against the golden moments %.3g\n", ee);
    assert_true(ee <= (g_arg.device ? ge->bf16_max / 4 : 1e-4));
    free(unperm);
    free(plain);
    free(q);
    /* decode: latents with channel c moved to perm^-1(c) decode to the plain model's image */
    const gcase *gd = find_case("vae_a_dec_s");
    const size_t zhw = gd->in_shape[1] * gd->in_shape[2];
    gcase moved = *gd;
    moved.in = malloc(sizeof(float) * 16 * zhw);
    for (int o = 0; o < 16; o++) memcpy(moved.in + perm(o, 16) * zhw, gd->in + o * zhw, zhw * sizeof(float));
    plain = run_ok(g_fx[0][F32].vae, gd);
    q = run_ok(v, &moved);
    if (!g_arg.device) assert_memory_equal(q, plain, nelem3(gd->ref_shape) * sizeof(float));
    double e = vg_rel_err(q, gd->ref, nelem3(gd->ref_shape), NULL);
    printf("  vae_a with permutation quant convs: decode against the golden image %.3g\n", e);
    assert_true(e <= (g_arg.device ? gd->bf16_max / 4 : 1e-4));
    free(moved.in);
    free(plain);
    free(q);
    cq_flux_vae_free(v);
    cq_cmf_close(cmf);
}

/* ---- the codec and the normalisation ------------------------------------------------------------- */
static void test_codec(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_flux_vae *v = g_fx[1][F32].vae;
    const cq_flux_vae_config *c = cq_flux_vae_get_config(v);
    assert_int_equal(c->latent_channels, 16);
    assert_int_equal(c->spatial_factor, 8);
    assert_float_equal(c->scaling_factor, 0.3611f, 0.0f);
    assert_float_equal(c->shift_factor, 0.1159f, 0.0f);
    cq_latent_codec k = cq_flux_vae_codec(v);
    assert_int_equal(k.channels, 16);
    assert_int_equal(k.image_channels, 3);
    assert_int_equal(k.factor, 8);
    assert_non_null(k.encode);
    /* patchify: token (y/2)*(w/2) + x/2, value (py*2 + px)*16 + c */
    const int h = 4, w = 6, C = 16;
    float chw[16 * 4 * 6], tok[16 * 4 * 6], back[16 * 4 * 6];
    for (int i = 0; i < C * h * w; i++) chw[i] = (float)i;
    k.pack(k.self, chw, tok, h, w);
    for (int cc = 0; cc < C; cc++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                assert_float_equal(tok[((y / 2) * (w / 2) + x / 2) * 64 + ((y % 2) * 2 + x % 2) * 16 + cc],
                                   chw[(cc * h + y) * w + x], 0.0f);
    k.unpack(k.self, tok, back, h, w);
    assert_memory_equal(back, chw, sizeof chw);
    /* normalise: (z - shift) * scale; denormalise: z / scale + shift, each step rounded to f32 */
    float z[16 * 4 * 6], n[16 * 4 * 6];
    tu_rng rng;
    tu_rng_seed(&rng, 9);
    tu_fill_normal(&rng, z, CQ_ARRAY_LEN(z), 2.0f);
    memcpy(n, z, sizeof z);
    assert_int_equal(k.normalize(k.self, n, h, w), CQ_OK);
    for (size_t i = 0; i < CQ_ARRAY_LEN(z); i++) {
        float t = z[i] - 0.1159f;
        assert_float_equal(n[i], t * 0.3611f, 0.0f);
    }
    assert_int_equal(k.denormalize(k.self, n, h, w), CQ_OK);
    for (size_t i = 0; i < CQ_ARRAY_LEN(z); i++) assert_float_equal(n[i], z[i], 1e-6f * (1.0f + fabsf(z[i])));
    /* decode: the raw decode clamped to [-1, 1] */
    const gcase *g = find_case("vae_b_dec_odd");
    float *raw = run_ok(v, g), *img = malloc(sizeof(float) * nelem3(g->ref_shape));
    assert_int_equal(k.decode(k.self, g->in, (int)g->in_shape[1], (int)g->in_shape[2], img), CQ_OK);
    size_t clamped = 0;
    for (size_t i = 0; i < nelem3(g->ref_shape); i++) {
        float want = raw[i] < -1.0f ? -1.0f : raw[i] > 1.0f ? 1.0f : raw[i];
        assert_float_equal(img[i], want, 0.0f);
        clamped += raw[i] != want;
    }
    assert_true(clamped > 0); /* the case reaches beyond [-1, 1], so the clamp is seen to act */
    free(raw);
    free(img);
}

/* ---- progress --------------------------------------------------------------------------------- */
typedef struct prog {
    int calls, stop_after;
    uint64_t last_done, last_total;
    bool monotonic;
} prog;

static int on_progress(uint64_t done, uint64_t total, void *user) {
    prog *p = user;
    p->monotonic = p->monotonic && done > p->last_done && done <= total && (p->calls == 0 || total == p->last_total);
    p->last_done = done;
    p->last_total = total;
    return ++p->calls == p->stop_after;
}

static void test_progress(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_flux_vae *v = g_fx[0][F32].vae;
    const gcase *g = find_case("vae_a_dec_l"), *ge = find_case("vae_a_enc_odd");
    float *out;
    for (int r = 0; r < 2; r++) {
        prog p = {.monotonic = true};
        cq_flux_vae_set_progress(v, on_progress, &p);
        cq_flux_vae_set_band_rows(v, r ? 16 : INT_MAX);
        assert_int_equal(run_case(v, g, &out), CQ_OK);
        free(out);
        assert_true(p.monotonic && p.calls > 10);
        assert_int_equal(p.last_done, p.last_total);
        p = (prog){.monotonic = true};
        assert_int_equal(run_case(v, ge, &out), CQ_OK);
        free(out);
        assert_true(p.monotonic && p.calls > 5);
        p = (prog){.monotonic = true, .stop_after = 3};
        assert_int_equal(run_case(v, g, &out), CQ_ERR_INTERRUPTED);
        free(out);
        assert_int_equal(p.calls, 3);
    }
    cq_flux_vae_set_progress(v, NULL, NULL);
    cq_flux_vae_set_band_rows(v, 0);
}

/* ---- bad input ---------------------------------------------------------------------------------- */
static void test_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_flux_vae *v = g_fx[0][F32].vae;
    float buf[3 * 40 * 48] = {0}, out[32 * 5 * 6];
    assert_int_equal(cq_flux_vae_encode(v, buf, 40, 44, out), CQ_ERR_SHAPE); /* 44 is no multiple of 8 */
    assert_non_null(strstr(cq_last_error(), "multiple of 8"));
    assert_int_equal(cq_flux_vae_encode(v, buf, 0, 48, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_flux_vae_decode(v, buf, 0, 3, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_flux_vae_decode(v, buf, 3, -2, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_flux_vae_decode(v, buf, 1 << 29, 3, out), CQ_ERR_SHAPE);
    assert_int_equal(cq_flux_vae_decode(v, NULL, 2, 3, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_flux_vae_decode(v, buf, 2, 3, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_flux_vae_decode(NULL, buf, 2, 3, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_flux_vae_normalize(v, NULL, 2, 2), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_flux_vae_denormalize(v, buf, 0, 2), CQ_ERR_SHAPE);
    cq_flux_vae *w = NULL;
    assert_int_equal(cq_flux_vae_load(g_fx[0][F32].cmf, "nope.", g_be, &w), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "nope.config_json"));
    assert_null(w);
    assert_int_equal(cq_flux_vae_load(g_fx[0][F32].cmf, "vae.", NULL, &w), CQ_ERR_INVALID_ARG);
    cq_flux_vae_free(NULL);
}

/* Converts vae_a with `drop` globs into a file of its own. */
static cq_cmf *convert_dropping(const char *const *drop, size_t n_drop, const char *tag) {
    char out[1200];
    snprintf(out, sizeof out, "%s/vae_a.cmf", tu_tmpdir(tag));
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32, .drop = drop, .n_drop = n_drop};
    cq_convert_report rep;
    cq_status s = cq_convert(ZG_DIR "/vae_a", out, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert: %s", cq_last_error());
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    return cmf;
}

/* A pack missing one decoder tensor fails to load naming it; a decode-only file decodes as the whole model does
 * and refuses to encode. */
static void test_missing_and_decoder_only(void **state) {
    (void)state;
    if (!g_have) skip();
    static const char *const one[] = {"vae.decoder.up_blocks.2.resnets.1.conv2.weight"};
    cq_cmf *cmf = convert_dropping(one, 1, "flux_vae_missing");
    cq_flux_vae *v = NULL;
    assert_int_equal(cq_flux_vae_load(cmf, "vae.", g_be, &v), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "decoder.up_blocks.2.resnets.1.conv2.weight"));
    assert_null(v);
    cq_cmf_close(cmf);

    static const char *const dec_only[] = {"vae.encoder.*"};
    cmf = convert_dropping(dec_only, 1, "flux_vae_dec_only");
    assert_int_equal(cq_flux_vae_load(cmf, "vae.", g_be, &v), CQ_OK);
    assert_false(cq_flux_vae_get_config(v)->has_encoder);
    assert_null(cq_flux_vae_codec(v).encode);
    const gcase *g = find_case("vae_a_dec_s");
    float *a = run_ok(g_fx[0][F32].vae, g), *b = run_ok(v, g);
    assert_memory_equal(a, b, nelem3(g->ref_shape) * sizeof(float));
    free(b);
    assert_int_equal(cq_flux_vae_encode(v, a, 32, 32, a), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "no encoder"));
    free(a);
    cq_flux_vae_free(v);
    cq_cmf_close(cmf);

    static const char *const half[] = {"vae.encoder.down_blocks.1.*"};
    cmf = convert_dropping(half, 1, "flux_vae_half_enc");
    assert_int_equal(cq_flux_vae_load(cmf, "vae.", g_be, &v), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "encoder.down_blocks.1.resnets.0"));
    cq_cmf_close(cmf);
}

/* A copy of vae_b whose config has `from` replaced by `to`: the load fails with `want` and `msg`. */
static void bad_config(const char *from, const char *to, cq_status want, const char *msg) {
    const char *dir = edited_copy("vae_b", "flux_vae_badcfg", from, to, false);
    cq_cmf *cmf = convert_dir(dir, NULL);
    cq_flux_vae *v = NULL;
    cq_status s = cq_flux_vae_load(cmf, "vae.", g_be, &v);
    if (s != want || !strstr(cq_last_error(), msg))
        fail_msg("config with '%s': got %s '%s', want %s containing '%s'", to, cq_status_str(s), cq_last_error(),
                 cq_status_str(want), msg);
    assert_null(v);
    cq_cmf_close(cmf);
}

static void test_config_errors(void **state) {
    (void)state;
    if (!g_have) skip();
    bad_config("\"act_fn\": \"silu\"", "\"act_fn\": \"gelu\"", CQ_ERR_UNSUPPORTED, "act_fn");
    bad_config("\"norm_num_groups\": 32", "\"norm_num_groups\": 24", CQ_ERR_PARSE, "does not divide");
    bad_config("\"latents_mean\": null", "\"latents_mean\": [0.5]", CQ_ERR_UNSUPPORTED, "latents_mean");
    bad_config("\"UpDecoderBlock2D\",\n    \"UpDecoderBlock2D\"", "\"AttnUpDecoderBlock2D\",\n    \"UpDecoderBlock2D\"",
               CQ_ERR_UNSUPPORTED, "AttnUpDecoderBlock2D");
    bad_config("\"_class_name\": \"AutoencoderKL\"", "\"_class_name\": \"AutoencoderTiny\"", CQ_ERR_UNSUPPORTED,
               "AutoencoderTiny");
    bad_config("\"layers_per_block\": 2", "\"layers_per_block\": 3", CQ_ERR_MISSING, "resnets.2");
    bad_config("\"latent_channels\": 16", "\"latent_channels\": 8", CQ_ERR_SHAPE, "encoder.conv_out");
    bad_config("\"mid_block_add_attention\": true", "\"mid_block_add_attention\": \"yes\"", CQ_ERR_PARSE,
               "mid_block_add_attention");
    bad_config("\"scaling_factor\": 0.3611", "\"scaling_factor\": -1", CQ_ERR_PARSE, "scaling_factor");
}

/* The model runs on the reference backend too (every op in plain C). */
static void test_ref_backend(void **state) {
    (void)state;
    if (!g_have) skip();
    cq_backend *ref;
    cq_flux_vae *v;
    assert_int_equal(cq_backend_ref_create(&ref), CQ_OK);
    if (cq_flux_vae_load(g_fx[1][F32].cmf, "vae.", ref, &v) != CQ_OK) fail_msg("load on ref: %s", cq_last_error());
    static const char *const names[] = {"vae_b_dec_s", "vae_b_enc_s"};
    for (size_t k = 0; k < 2; k++) {
        const gcase *g = find_case(names[k]);
        cq_flux_vae_set_band_rows(v, k ? 0 : 8);
        float *got = run_ok(v, g);
        double e = vg_rel_err(got, g->ref, nelem3(g->ref_shape), NULL);
        printf("  %s on the reference backend: max err/RMS %.3g\n", g->name, e);
        if (e > 1e-4) fail_msg("%s on ref: %.3g > 1e-4", g->name, e);
        free(got);
    }
    cq_flux_vae_free(v);
    cq_backend_free(ref);
}

/* ---- setup ------------------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    FILE *f = fopen(ZG_DIR "/vae_b/config.json", "rb");
    g_have = f != NULL;
    if (f) fclose(f);
    if (!g_have) {
        printf("tests/golden/zimage is absent: skipping the Flux VAE tests\n");
        return 0;
    }
    if (load_cases() != 0) return -1;
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < CODECS; k++) {
            fixture *fx = &g_fx[i][k];
            fx->cmf = vg_convert_dir(ZG_DIR, k_models[i], k == F32 ? CQ_DTYPE_F32 : -1);
            if (cq_flux_vae_load(fx->cmf, "vae.", g_be, &fx->vae) != CQ_OK)
                fail_msg("load %s on %s: %s", k_models[i], cq_backend_name(g_be), cq_last_error());
        }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < CODECS; k++) {
            cq_flux_vae_free(g_fx[i][k].vae);
            cq_cmf_close(g_fx[i][k].cmf);
        }
    for (int i = 0; i < g_n; i++) {
        free(g_cases[i].in);
        free(g_cases[i].ref);
    }
    cq_backend_free(g_be);
    return 0;
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_flux_vae", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden_f32),  cmocka_unit_test(test_golden_default),
        cmocka_unit_test(test_bands),       cmocka_unit_test(test_plan),
        cmocka_unit_test(test_quant_convs), cmocka_unit_test(test_codec),
        cmocka_unit_test(test_progress),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_missing_and_decoder_only), cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_ref_backend),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden_f32), cmocka_unit_test(test_bands), cmocka_unit_test(test_quant_convs),
        cmocka_unit_test(test_errors),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_flux_vae (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_flux_vae (host)", host, setup, teardown);
}
