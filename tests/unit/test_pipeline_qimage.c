/*
 * test_pipeline_qimage.c — end-to-end parity of the Qwen-Image (v1) pipeline
 * with diffusers' QwenImagePipeline (tests/golden/qimage_pipeline,
 * tools/golden_pipeline_qwenimage.py).
 *
 * tests/golden/qimage_pipeline/pipeline/ is a tiny random QwenImagePipeline
 * folder (a 2-layer Qwen2.5-VL text encoder with the real Qwen tokenizer, the
 * dual-stream DiT, the Wan-2.1-style VAE with random latent statistics, the
 * scheduler) saved in bfloat16 and run by the reference in float32. Each run
 * converts it with `cortiq convert` (f32 weights, so the pack holds the
 * reference's values) and draws every case of cases.json:
 *   - the template's tokens: the reference's ids;
 *   - the text rows after the 34 dropped: max|err| <= 1e-4 of their RMS (CPU);
 *   - sigmas and timesteps, and the initial noise: bit for bit;
 *   - the final packed latents: max|err| <= 1e-4 of their RMS (CPU); a device backend within a quarter of the reference's
 *     own bfloat16 error on the case (bf16_latents_max_rel);
 *   - the picture: within 2/255 after 8-bit rounding (CPU); a device within a
 *     quarter of the reference's bfloat16 error (bf16_image_max_abs);
 *   - on one case, the phased, compact and streamed residency plans: the same
 *     bits as the unlimited run.
 * Bad input: sizes, steps, guidance, invalid UTF-8, a pack missing a denoiser
 * tensor.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/gz.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/component.h"
#include "ops/ops.h"
#include "pipelines/latents.h"
#include "pipelines/qimage_pipe.h"
#include "testutil.h"

#define GOLDEN CQ_SOURCE_DIR "/tests/golden/qimage_pipeline"
#define TE_WIDTH 16 /* the tiny text tower's width */

static tu_backend_arg g_backend;
static char g_pack[1200], g_bad[1200];

static cq_status convert(const char *out, const char *const *drop, size_t n_drop) {
    const cq_convert_opts o = {.quant = CQ_DTYPE_F32, .drop = drop, .n_drop = n_drop};
    cq_convert_report rep;
    cq_status s = cq_convert(GOLDEN "/pipeline", out, &o, &rep);
    cq_convert_report_free(&rep);
    return s;
}

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("pipeline_qimage");
    if (!dir) return -1;
    snprintf(g_pack, sizeof g_pack, "%s/qimage.cmf", dir);
    snprintf(g_bad, sizeof g_bad, "%s/qimage_bad.cmf", dir);
    if (convert(g_pack, NULL, 0) != CQ_OK) {
        fprintf(stderr, "convert: %s\n", cq_last_error());
        return -1;
    }
    static const char *const bad[] = {"dit.transformer_blocks.1.attn.to_k.weight"};
    return convert(g_bad, bad, 1) == CQ_OK ? 0 : -1;
}

/* ---- golden helpers ---- */
static float *read_tensor(const cq_st *st, const char *name, uint64_t *n) {
    size_t cnt = 0;
    float *v = tu_st_floats(st, name, &cnt);
    if (!v) fail_msg("expected f32 tensor %s missing", name);
    *n = cnt;
    return v;
}

static double rel_max_err(const float *got, const float *want, uint64_t n) {
    return tu_max_rel(got, want, (size_t)n, tu_rms(want, (size_t)n));
}

static void expect_bits(const char *what, const char *name, const float *got, const float *want, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s %s [%llu]: %.9g, reference %.9g", name, what, (unsigned long long)i, (double)got[i],
                     (double)want[i]);
}

static double num(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(c, key);
    if (!cJSON_IsNumber(v)) fail_msg("case field %s is not a number", key);
    return v->valuedouble;
}

static void expect_ids(cq_qimage_pipe *p, const cq_st *exp, const char *key, const char *prompt, int want_rows) {
    const cq_st_tensor *t = cq_st_find(exp, key);
    if (!t) fail_msg("expected tensor %s missing", key);
    int total = 0, rows = 0;
    assert_int_equal(cq_qimage_pipe_prompt_tokens(p, prompt, &total, &rows), CQ_OK);
    assert_int_equal((uint64_t)total, t->shape[0]);
    assert_int_equal(rows, want_rows);
    assert_int_equal(rows, total - CQ_QIMAGE_DROP_ROWS);
}

static void encoder_rows(cq_qimage_pipe *p, const cq_st *exp, const char *key, const char *prompt) {
    float *emb;
    int rows;
    assert_int_equal(cq_qimage_pipe_encode_prompt(p, prompt, &emb, &rows), CQ_OK);
    uint64_t n;
    float *want = read_tensor(exp, key, &n);
    assert_int_equal((uint64_t)rows * TE_WIDTH, n);
    const double e = rel_max_err(emb, want, n);
    print_message("  %-22s %3d rows, max err %.2e of RMS\n", key, rows, e);
    if (!g_backend.device) assert_true(e <= 1e-4);
    free(want);
    cq_free(emb);
}

static void schedule_and_noise(cq_qimage_pipe *p, const cq_st *exp, const char *name, const cq_qimage_gen_opts *o) {
    char key[64];
    cq_flow_schedule sch;
    assert_int_equal(cq_qimage_pipe_schedule(p, o, &sch), CQ_OK);
    uint64_t n;
    snprintf(key, sizeof key, "sigmas_%s", name);
    float *want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)o->steps + 1);
    expect_bits("sigmas", name, sch.sigmas, want, n);
    free(want);
    snprintf(key, sizeof key, "timesteps_%s", name);
    want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)o->steps);
    expect_bits("timesteps", name, sch.timesteps, want, n);
    free(want);
    cq_flow_schedule_free(&sch);
    /* torch.randn((1, 1, 16, h, w)) in float32 from a CPU generator */
    snprintf(key, sizeof key, "noise_%s", name);
    want = read_tensor(exp, key, &n);
    assert_int_equal(n, (uint64_t)16 * (o->height / 8) * (o->width / 8));
    float *noise = malloc(n * sizeof(float));
    assert_non_null(noise);
    assert_int_equal(cq_latent_noise(o->seed, CQ_TORCH_F32, cq_torch_f32_kernel_native(), n, noise), CQ_OK);
    expect_bits("noise", name, noise, want, n);
    free(noise);
    free(want);
}

/* Every residency plan gives the same bits on this backend: phased, every weight compact, the matrices
 * streamed, and streamed with half of each part kept. */
static void same_bits_under_plans(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, const cq_image_result *r) {
    const cq_resid_need tight = {.act = {0, 0, 1}}; /* the decode does not fit beside the denoiser */
    static const struct {
        int level;
        bool half_kept;
    } plans[] = {{2, false}, {5, false}, {7, false}, {7, true}};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        cq_resid_plan plan;
        assert_int_equal(cq_resid_plan_at(&tight, plans[i].level, 0, &plan), CQ_OK);
        if (plans[i].half_kept)
            for (int part = 0; part < CQ_PART_COUNT; part++) plan.keep_bytes[part] = 1, plan.stream_of[part] = 2;
        assert_int_equal(cq_qimage_pipe_set_plan(p, &plan), CQ_OK);
        cq_image_result r2;
        const cq_status s = cq_qimage_pipe_generate(p, o, &r2);
        if (s != CQ_OK) fail_msg("plan %d: generate: %s", plans[i].level, cq_last_error());
        assert_memory_equal(r2.latents, r->latents, (size_t)r->tokens * r->latent_channels * sizeof(float));
        assert_memory_equal(r2.image, r->image, (size_t)3 * r->width * r->height * sizeof(float));
        const cq_resid *rs = cq_qimage_pipe_residency(p);
        assert_false(rs->bound[CQ_PART_TEXT] || rs->bound[CQ_PART_DENOISER]);
        assert_true(rs->bound[CQ_PART_CODEC]);
        cq_image_result_free(&r2);
    }
    assert_int_equal(cq_qimage_pipe_set_plan(p, NULL), CQ_OK);
    print_message("  phased, compact and streamed plans: the same bits\n");
}

static void run_case(cq_qimage_pipe *p, const cq_st *exp, const char *name, const cJSON *c, bool plans) {
    const cJSON *negj = cJSON_GetObjectItem(c, "negative");
    cq_qimage_gen_opts o = {.prompt = cJSON_GetObjectItem(c, "prompt")->valuestring,
                            .negative = cJSON_IsString(negj) ? negj->valuestring : NULL,
                            .height = (int)num(c, "height"),
                            .width = (int)num(c, "width"),
                            .steps = (int)num(c, "steps"),
                            .seed = (uint64_t)num(c, "seed"),
                            .guidance = num(c, "true_cfg_scale")};
    const bool cfg = o.guidance > 1 && o.negative;
    char key[64];
    print_message("%s: %dx%d, %d steps, true CFG %g%s\n", name, o.width, o.height, o.steps, o.guidance,
                  cfg ? "" : " (off)");
    snprintf(key, sizeof key, "ids_%s", name);
    expect_ids(p, exp, key, o.prompt, (int)num(c, "rows"));
    snprintf(key, sizeof key, "embeds_%s", name);
    encoder_rows(p, exp, key, o.prompt);
    snprintf(key, sizeof key, "neg_embeds_%s", name);
    if (cfg) encoder_rows(p, exp, key, o.negative);
    else assert_null(cq_st_find(exp, key));
    schedule_and_noise(p, exp, name, &o);

    cq_image_result r;
    const cq_status s = cq_qimage_pipe_generate(p, &o, &r);
    if (s != CQ_OK) fail_msg("%s: generate: %s", name, cq_last_error());
    assert_int_equal(r.channels, 3);
    assert_int_equal(r.latent_channels, 64);
    assert_int_equal(r.tokens, (int)num(c, "tokens"));
    uint64_t n;
    snprintf(key, sizeof key, "latents_%s", name);
    float *want = read_tensor(exp, key, &n); /* packed [tokens, 64] */
    assert_int_equal(n, (uint64_t)r.tokens * r.latent_channels);
    const double e_lat = rel_max_err(r.latents, want, n);
    free(want);
    snprintf(key, sizeof key, "image_%s", name);
    want = read_tensor(exp, key, &n); /* [H, W, 3] in [0, 1] */
    assert_int_equal(n, (uint64_t)o.height * o.width * 3);
    assert_int_equal(r.width, o.width);
    assert_int_equal(r.height, o.height);
    int worst;
    const double worst_f = tu_image_err(r.image, 3, r.width, r.height, want, &worst);
    free(want);
    if (plans) same_bits_under_plans(p, &o, &r);
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

static cq_qimage_pipe *open_loaded(const char *path, cq_cmf **cmf, cq_backend **be) {
    assert_int_equal(cq_cmf_open(path, cmf), CQ_OK);
    assert_int_equal(tu_backend_create(&g_backend, 0, be), CQ_OK);
    cq_qimage_pipe *p;
    cq_status s = cq_qimage_pipe_open(*cmf, &p);
    if (s != CQ_OK) fail_msg("open: %s", cq_last_error());
    s = cq_qimage_pipe_load_weights(p, *be);
    if (s != CQ_OK) fail_msg("load: %s", cq_last_error());
    return p;
}

static void test_parity(void **state) {
    (void)state;
    size_t len;
    char *js = (char *)tu_read_file(GOLDEN "/cases.json", &len);
    assert_non_null(js);
    cJSON *root = cJSON_ParseWithLength(js, len);
    free(js);
    assert_non_null(root);
    assert_int_equal((int)num(root, "drop_rows"), CQ_QIMAGE_DROP_ROWS);
    cq_st *exp;
    assert_int_equal(cq_st_open(GOLDEN "/expected.safetensors", &exp), CQ_OK);
    cq_cmf *cmf;
    cq_backend *be;
    cq_qimage_pipe *p = open_loaded(g_pack, &cmf, &be);
    int cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, cases++)
        run_case(p, exp, c->string, c, !strcmp(c->string, "cfg"));
    assert_int_equal(cases, 4);
    cq_qimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);
    cq_st_close(exp);
    cJSON_Delete(root);
}

static void test_bad_input(void **state) {
    (void)state;
    cq_cmf *cmf;
    cq_backend *be;
    cq_qimage_pipe *p = open_loaded(g_pack, &cmf, &be);
    cq_qimage_gen_opts o = {.prompt = "a cat", .width = 40, .height = 32, .steps = 2}; /* 40: not a multiple of 16 */
    cq_image_result r;
    tu_expect_err(cq_qimage_pipe_generate(p, &o, &r), CQ_ERR_INVALID_ARG, "multiples of 16");
    o.width = 32;
    assert_int_equal(cq_qimage_pipe_check(p, &o), CQ_OK);
    o.steps = 1;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "one step");
    o.steps = 2;
    o.guidance = -1;
    assert_int_equal(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG);
    o.guidance = 4;
    o.negative = "\xc3";
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "negative prompt is not valid UTF-8");
    o.negative = NULL;
    o.prompt = "a <|image_pad|> here";
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "<|image_pad|>");
    cq_qimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);

    /* a pack whose denoiser lacks a tensor: opens (configs only), refuses to load, naming it */
    assert_int_equal(cq_cmf_open(g_bad, &cmf), CQ_OK);
    assert_int_equal(tu_backend_create(&g_backend, 0, &be), CQ_OK);
    assert_int_equal(cq_qimage_pipe_open(cmf, &p), CQ_OK);
    tu_expect_err(cq_qimage_pipe_load_weights(p, be), CQ_ERR_MISSING, "dit.transformer_blocks.1.attn.to_k.weight");
    cq_qimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);
}

int main(int argc, char **argv) {
    if (!cq_gz_available()) {
        printf("test_pipeline_qimage: skipped: this build has no zlib (-DCORTIQ_ZLIB=OFF) to read the golden "
               "tokenizer.json.gz\n");
        return TU_SKIP;
    }
    const int rc = tu_backend_select("test_pipeline_qimage", argc, argv, &g_backend);
    if (rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
