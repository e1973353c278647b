/*
 * test_pipeline_zimage.c — end-to-end parity of the Z-Image pipeline with
 * diffusers' ZImagePipeline (tests/golden/zimage, tools/golden_zimage.py).
 *
 * tests/golden/zimage/pipeline/ is a tiny random ZImagePipeline folder (a
 * 3-layer GQA Qwen3Model with the real Qwen3 tokenizer and its chat template,
 * the DiT, the Flux VAE, the scheduler) saved by diffusers with weights in
 * bfloat16 that the reference ran in float32. Each run converts it with
 * `cortiq convert` (f32 weights, so the pack holds exactly the reference's
 * values), leaving out the text tower's last layer and final norm, which
 * Z-Image never reads: the loader must accept such a pack. Every case of
 * pipeline_cases.json is then drawn and compared:
 *   - the prompt's (and negative prompt's) encoder rows: max|err| <= 1e-4 of
 *     their RMS (CPU);
 *   - sigmas and timesteps: bit for bit;
 *   - the initial noise: bit for bit;
 *   - the final latents: max|err| <= 1e-4 of their RMS (CPU); a device
 *     backend within a quarter of the reference's own bfloat16 error on the
 *     case (bf16_latents_max_rel);
 *   - the picture: within 2/255 after 8-bit rounding (CPU); a device within a
 *     quarter of the reference's bfloat16 error (bf16_image_max_abs).
 * The "long" case is a prompt over the 512-token limit: cut as the reference
 * cuts it (its closing template tokens lost), with a warning.
 *
 * Bad input: a size that is not a multiple of 16, a pack whose tensors do
 * not match the denoiser's table, guidance options out of range.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/cmf_impl.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/zimage.h"
#include "ops/ops.h"
#include "base/gz.h"
#include "pipelines/latents.h"
#include "pipelines/zimage_pipe.h"
#include "testutil.h"

#define GOLDEN CQ_SOURCE_DIR "/tests/golden/zimage"

static tu_backend_arg g_backend;
static char g_pack[1200], g_full[1200], g_bad[1200];

/* ---- converting the golden folder ---- */
static cq_status convert(const char *out, const char *const *drop, size_t n_drop) {
    const cq_convert_opts o = {.quant = CQ_DTYPE_F32, .drop = drop, .n_drop = n_drop};
    cq_convert_report rep;
    cq_status s = cq_convert(GOLDEN "/pipeline", out, &o, &rep);
    cq_convert_report_free(&rep);
    return s;
}

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("pipeline_zimage");
    if (!dir) return -1;
    snprintf(g_pack, sizeof g_pack, "%s/zimage.cmf", dir);
    snprintf(g_full, sizeof g_full, "%s/zimage_full.cmf", dir);
    snprintf(g_bad, sizeof g_bad, "%s/zimage_bad.cmf", dir);
    /* the text tower's last layer and final norm are never read */
    static const char *const drop[] = {"te.layers.2.*", "te.norm.weight"};
    if (convert(g_pack, drop, 2) != CQ_OK) {
        fprintf(stderr, "convert: %s\n", cq_last_error());
        return -1;
    }
    if (convert(g_full, NULL, 0) != CQ_OK) return -1;
    /* a pack whose denoiser lacks a tensor its table requires */
    static const char *const bad[] = {"dit.layers.1.attention.to_k.weight"};
    return convert(g_bad, bad, 1) == CQ_OK ? 0 : -1;
}

/* The header's geometry of the converted pack: the FFN width is Z-Image's int(dim / 3 * 8), which its
 * config does not state (dim 64: 170, not the generic 4 x dim), so `cortiq info` shows the real one. */
static void test_header(void **state) {
    (void)state;
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open(g_pack, &c), CQ_OK);
    assert_int_equal(cq_cmf_arch_u64(c, "hidden_size", 0), 64);
    assert_int_equal(cq_cmf_arch_u64(c, "intermediate_size", 0), 170);
    cq_cmf_close(c);
}

/* ---- golden helpers ---- */
static float *read_tensor(const cq_st *st, const char *name, uint64_t *n) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) fail_msg("expected tensor %s missing", name);
    uint64_t cnt = 1;
    for (int i = 0; i < t->ndim; i++) cnt *= t->shape[i];
    float *v = malloc(cnt * sizeof(float));
    assert_non_null(v);
    assert_int_equal(cq_st_read_f32(t, 0, cnt, v), CQ_OK);
    *n = cnt;
    return v;
}

static double rms(const float *v, uint64_t n) {
    double ss = 0;
    for (uint64_t i = 0; i < n; i++) ss += (double)v[i] * v[i];
    return sqrt(ss / (double)n);
}

static double rel_max_err(const float *got, const float *want, uint64_t n) {
    double mx = 0;
    for (uint64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= mx)) mx = e; /* NaN propagates */
    }
    return mx / rms(want, n);
}

static void expect_bits(const char *what, const char *name, const float *got, const float *want, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s %s [%llu]: %.9g, reference %.9g", name, what, (unsigned long long)i, (double)got[i],
                     (double)want[i]);
}

static double num(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(c, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? 1.0 : 0.0; /* cfg_normalization: True is 1 */
    if (!cJSON_IsNumber(v)) fail_msg("case field %s is not a number", key);
    return v->valuedouble;
}

/* warnings the library logs while a case runs */
typedef struct log_capture {
    int warnings;
    char last[512];
} log_capture;

static void capture(cq_log_level level, const char *msg, void *user) {
    log_capture *c = user;
    if (level == CQ_LOG_WARN) {
        c->warnings++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

static void encoder_rows(cq_zimage_pipe *p, const cq_st *exp, const char *key, const char *prompt, int want_rows) {
    float *emb;
    int rows;
    assert_int_equal(cq_zimage_pipe_encode_prompt(p, prompt, &emb, &rows), CQ_OK);
    uint64_t n;
    float *want = read_tensor(exp, key, &n);
    assert_int_equal(rows, want_rows);
    assert_int_equal((uint64_t)rows * 16, n); /* the tiny tower is 16 wide */
    const double e = rel_max_err(emb, want, n);
    print_message("  %-22s %3d rows, max err %.2e of RMS\n", key, rows, e);
    if (!g_backend.device) assert_true(e <= 1e-4);
    free(want);
    cq_free(emb);
}

static void run_case(cq_zimage_pipe *p, const cq_st *exp, const char *name, const cJSON *c, bool plans) {
    const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
    const cJSON *negj = cJSON_GetObjectItem(c, "negative");
    const char *neg = cJSON_IsString(negj) ? negj->valuestring : NULL;
    cq_zimage_gen_opts o;
    cq_zimage_gen_opts_init(&o);
    o.prompt = prompt;
    o.negative = neg;
    o.height = (int)num(c, "height");
    o.width = (int)num(c, "width");
    o.steps = (int)num(c, "steps");
    o.seed = (uint64_t)num(c, "seed");
    o.guidance = num(c, "guidance");
    o.cfg_normalization = num(c, "cfg_normalization");
    o.cfg_truncation = num(c, "cfg_truncation");
    o.shift = num(c, "shift");
    const int lat_h = o.height / 8, lat_w = o.width / 8, rows = (int)num(c, "rows");
    char key[64];
    print_message("%s: %dx%d, %d steps, guidance %g%s%s\n", name, o.width, o.height, o.steps, o.guidance,
                  o.cfg_normalization > 0 ? ", normalised" : "", o.cfg_truncation < 1 ? ", truncated" : "");

    /* tokens: the long prompt is cut at 512, the reference's truncation */
    int total, full;
    assert_int_equal(cq_zimage_pipe_prompt_tokens(p, prompt, &total, &full), CQ_OK);
    assert_int_equal(total, rows);
    assert_true(total <= CQ_ZIMAGE_MAX_TOKENS);
    const bool long_prompt = full > CQ_ZIMAGE_MAX_TOKENS;

    /* the encoder rows, with the warning a cut prompt gives */
    log_capture lc = {0};
    cq_set_log(capture, &lc, CQ_LOG_WARN);
    snprintf(key, sizeof key, "embeds_%s", name);
    encoder_rows(p, exp, key, prompt, rows);
    cq_set_log(NULL, NULL, CQ_LOG_WARN);
    if (long_prompt) {
        assert_int_equal(lc.warnings, 1);
        assert_non_null(strstr(lc.last, "reads the first 512"));
    } else {
        assert_int_equal(lc.warnings, 0);
    }
    snprintf(key, sizeof key, "neg_embeds_%s", name);
    if (o.guidance > 0) {
        const cq_st_tensor *t = cq_st_find(exp, key);
        assert_non_null(t);
        encoder_rows(p, exp, key, neg ? neg : "", (int)t->shape[0]);
    } else {
        assert_null(cq_st_find(exp, key));
    }

    /* the schedule, exact */
    cq_flow_schedule sch;
    assert_int_equal(cq_zimage_pipe_schedule(p, &o, &sch), CQ_OK);
    uint64_t n;
    snprintf(key, sizeof key, "sigmas_%s", name);
    float *want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)o.steps + 1);
    expect_bits("sigmas", name, sch.sigmas, want, n);
    free(want);
    snprintf(key, sizeof key, "timesteps_%s", name);
    want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)o.steps);
    expect_bits("timesteps", name, sch.timesteps, want, n);
    free(want);
    cq_flow_schedule_free(&sch);

    /* the initial noise, exact: torch.randn((1, 16, h, w)) in float32 from a CPU generator */
    snprintf(key, sizeof key, "noise_%s", name);
    want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)16 * lat_h * lat_w);
    float *noise = malloc(n * sizeof(float));
    assert_non_null(noise);
    assert_int_equal(cq_latent_noise(o.seed, CQ_TORCH_F32, cq_torch_f32_kernel_native(), n, noise), CQ_OK);
    expect_bits("noise", name, noise, want, n);
    free(noise);
    free(want);

    /* the whole generation */
    cq_image_result r;
    cq_status s = cq_zimage_pipe_generate(p, &o, &r);
    if (s != CQ_OK) fail_msg("%s: generate: %s", name, cq_last_error());
    assert_int_equal(r.channels, 3);
    assert_int_equal(r.latent_channels, 64);
    snprintf(key, sizeof key, "latents_%s", name);
    want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)r.tokens * r.latent_channels);
    float *lat = malloc(n * sizeof(float));
    assert_non_null(lat);
    cq_latents_unpatchify2(r.latents, lat, 16, lat_h, lat_w);
    const double e_lat = rel_max_err(lat, want, n);
    free(lat);
    free(want);

    snprintf(key, sizeof key, "image_%s", name);
    want = read_tensor(exp, key, &n); /* [H, W, 3] in [0, 1] */
    assert_int_equal(n, (uint64_t)o.height * o.width * 3);
    int worst = 0;
    const double worst_f = tu_image_err(r.image, 3, o.width, o.height, want, &worst);
    free(want);
    if (plans) {
        /* every residency plan gives the same bits on this backend: phased (the text tower released before
         * the denoiser, the denoiser before the decode), every weight compact, the matrices streamed */
        const cq_resid_need tight = {.act = {0, 0, 1}}; /* the decode does not fit beside the denoiser */
        /* 2, 5, then 7 with every matrix streamed, and 7 keeping half of each streamed part on the device */
        static const struct {
            int level;
            bool half_kept;
        } plans_run[] = {{2, false}, {5, false}, {7, false}, {7, true}};
        for (size_t li = 0; li < sizeof plans_run / sizeof *plans_run; li++) {
            const int level = plans_run[li].level;
            cq_resid_plan plan;
            assert_int_equal(cq_resid_plan_at(&tight, level, 0, &plan), CQ_OK);
            if (plans_run[li].half_kept)
                for (int part = 0; part < CQ_PART_COUNT; part++) plan.keep_bytes[part] = 1, plan.stream_of[part] = 2;
            assert_int_equal(cq_zimage_pipe_set_plan(p, &plan), CQ_OK);
            cq_image_result r2;
            s = cq_zimage_pipe_generate(p, &o, &r2);
            if (s != CQ_OK) fail_msg("%s: plan %d: generate: %s", name, level, cq_last_error());
            assert_memory_equal(r2.latents, r.latents, (size_t)r.tokens * r.latent_channels * sizeof(float));
            assert_memory_equal(r2.image, r.image, (size_t)3 * o.width * o.height * sizeof(float));
            const cq_resid *rs = cq_zimage_pipe_residency(p);
            assert_false(rs->bound[CQ_PART_TEXT] || rs->bound[CQ_PART_DENOISER]);
            assert_true(rs->bound[CQ_PART_CODEC]);
            cq_image_result_free(&r2);
        }
        assert_int_equal(cq_zimage_pipe_set_plan(p, NULL), CQ_OK);
        print_message("  phased, compact and streamed plans: the same bits\n");
    }
    cq_image_result_free(&r);
    print_message("  latents max err %.2e of RMS, pixels max diff %d/255 (%.2e before rounding)\n", e_lat, worst,
                  worst_f);
    if (g_backend.device) {
        const double lat_bound = num(c, "bf16_latents_max_rel") / 4, img_bound = num(c, "bf16_image_max_abs") / 4;
        print_message("  device bounds (a quarter of the reference's bf16 error): latents %.2e, pixels %.2e\n",
                      lat_bound, img_bound);
        assert_true(e_lat <= lat_bound);
        assert_true(worst_f <= img_bound);
    } else {
        assert_true(e_lat <= 1e-4);
        assert_true(worst <= 2);
    }
}

static cq_zimage_pipe *open_loaded(const char *path, cq_cmf **cmf, cq_backend **be) {
    assert_int_equal(cq_cmf_open(path, cmf), CQ_OK);
    assert_int_equal(tu_backend_create(&g_backend, 0, be), CQ_OK);
    cq_zimage_pipe *p;
    cq_status s = cq_zimage_pipe_open(*cmf, &p);
    if (s != CQ_OK) fail_msg("open: %s", cq_last_error());
    s = cq_zimage_pipe_load_weights(p, *be);
    if (s != CQ_OK) fail_msg("load: %s", cq_last_error());
    return p;
}

static void test_parity(void **state) {
    (void)state;
    size_t len;
    char *js = (char *)tu_read_file(GOLDEN "/pipeline_cases.json", &len);
    assert_non_null(js);
    cJSON *root = cJSON_ParseWithLength(js, len);
    free(js);
    assert_non_null(root);
    cq_st *exp;
    assert_int_equal(cq_st_open(GOLDEN "/pipeline_expected.safetensors", &exp), CQ_OK);
    cq_cmf *cmf;
    cq_backend *be;
    cq_zimage_pipe *p = open_loaded(g_pack, &cmf, &be);
    int cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, cases++)
        run_case(p, exp, c->string, c, !strcmp(c->string, "turbo") || !strcmp(c->string, "base_norm"));
    assert_int_equal(cases, 5);
    cq_zimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);
    cq_st_close(exp);
    cJSON_Delete(root);
}

/* The full pack (last layer and final norm kept) encodes the same rows: they are never read. */
static void test_full_tower(void **state) {
    (void)state;
    cq_cmf *a, *b;
    assert_int_equal(cq_cmf_open(g_pack, &a), CQ_OK);
    assert_int_equal(cq_cmf_open(g_full, &b), CQ_OK);
    assert_null(cq_cmf_find(a, "te.norm.weight"));
    assert_non_null(cq_cmf_find(b, "te.norm.weight"));
    cq_backend *be;
    assert_int_equal(tu_backend_create(&g_backend, 0, &be), CQ_OK);
    cq_zimage_pipe *pa, *pb;
    assert_int_equal(cq_zimage_pipe_open(a, &pa), CQ_OK);
    assert_int_equal(cq_zimage_pipe_open(b, &pb), CQ_OK);
    assert_int_equal(cq_zimage_pipe_load_text(pa, be), CQ_OK);
    assert_int_equal(cq_zimage_pipe_load_text(pb, be), CQ_OK);
    float *ea, *eb;
    int ra, rb;
    assert_int_equal(cq_zimage_pipe_encode_prompt(pa, "a red fox", &ea, &ra), CQ_OK);
    assert_int_equal(cq_zimage_pipe_encode_prompt(pb, "a red fox", &eb, &rb), CQ_OK);
    assert_int_equal(ra, rb);
    assert_memory_equal(ea, eb, (size_t)ra * 16 * sizeof(float));
    cq_free(ea);
    cq_free(eb);
    cq_zimage_pipe_free(pa);
    cq_zimage_pipe_free(pb);
    cq_backend_free(be);
    cq_cmf_close(a);
    cq_cmf_close(b);
}

static void test_bad_input(void **state) {
    (void)state;
    cq_cmf *cmf;
    cq_backend *be;
    cq_zimage_pipe *p = open_loaded(g_pack, &cmf, &be);
    cq_zimage_gen_opts o;
    cq_zimage_gen_opts_init(&o);
    o.prompt = "a cat";
    o.width = 40; /* not a multiple of 16 */
    o.height = 32;
    o.steps = 2;
    cq_image_result r;
    assert_int_equal(cq_zimage_pipe_generate(p, &o, &r), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "multiples of 16"));
    o.width = 32;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_OK);
    o.steps = 0;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.steps = 2;
    o.guidance = -1;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.guidance = 4;
    o.cfg_truncation = NAN;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.cfg_truncation = 1;
    o.cfg_normalization = -1;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.cfg_normalization = 0;
    o.shift = 1000;
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.shift = 0;
    o.prompt = "\xff\xfe";
    assert_int_equal(cq_zimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "UTF-8"));
    cq_zimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);

    /* a pack whose denoiser lacks a tensor: opens (configs only), refuses to load, naming it */
    assert_int_equal(cq_cmf_open(g_bad, &cmf), CQ_OK);
    assert_int_equal(tu_backend_create(&g_backend, 0, &be), CQ_OK);
    assert_int_equal(cq_zimage_pipe_open(cmf, &p), CQ_OK);
    assert_int_equal(cq_zimage_pipe_load_weights(p, be), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "dit.layers.1.attention.to_k.weight"));
    cq_zimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);
}

int main(int argc, char **argv) {
    if (!cq_gz_available()) {
        /* the golden folder's tokenizer is tokenizer.json.gz */
        printf("test_pipeline_zimage: skipped: this build has no zlib (-DCORTIQ_ZLIB=OFF) to read the golden "
               "tokenizer.json.gz\n");
        return TU_SKIP;
    }
    const int rc = tu_backend_select("test_pipeline_zimage", argc, argv, &g_backend);
    if (rc >= 0) return rc;
    if (access(GOLDEN "/pipeline_expected.safetensors", F_OK) != 0) {
        printf("test_pipeline_zimage: skipped: the golden data is absent (%s; made by tools/golden_zimage.py)\n",
               GOLDEN);
        return TU_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_full_tower),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
