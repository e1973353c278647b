/* test_schedule.c — the Qwen-Image-2.1 flow-match schedule, model timesteps,
 * Euler step, true CFG and latent layout: against hand-derived values and a
 * float64 evaluation of the formulas, then bit for bit against diffusers'
 * FlowMatchEulerDiscreteScheduler in tests/golden/schedule (made by
 * tools/golden_schedule_noise.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "pipelines/latents.h"
#include "pipelines/schedule.h"
#include "testutil.h"

#define SCHED_DIR CQ_SOURCE_DIR "/tests/golden/schedule"

static const char qi21_config_json[] =
    "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"base_image_seq_len\": 256, \"base_shift\": 0.5,"
    " \"invert_sigmas\": false, \"max_image_seq_len\": 8192, \"max_shift\": 0.9, \"num_train_timesteps\": 1000,"
    " \"shift\": 1.0, \"shift_terminal\": 0.02, \"stochastic_sampling\": false, \"time_shift_type\": "
    "\"exponential\", \"use_beta_sigmas\": false, \"use_dynamic_shifting\": true, \"use_exponential_sigmas\": "
    "false, \"use_karras_sigmas\": false}";

static void assert_config_equal(const cq_flow_config *a, const cq_flow_config *b) {
    assert_int_equal(a->num_train_timesteps, b->num_train_timesteps);
    assert_int_equal(a->use_dynamic_shifting, b->use_dynamic_shifting);
    assert_true(a->shift == b->shift && a->base_shift == b->base_shift && a->max_shift == b->max_shift);
    assert_true(a->base_image_seq_len == b->base_image_seq_len && a->max_image_seq_len == b->max_image_seq_len);
    assert_true(a->shift_terminal == b->shift_terminal);
    assert_int_equal(a->shift_type, b->shift_type);
}

static void test_config_parse(void **state) {
    (void)state;
    cq_flow_config want, got;
    cq_flow_config_qi21(&want);
    assert_int_equal(cq_flow_config_parse(qi21_config_json, strlen(qi21_config_json), &got), CQ_OK);
    assert_config_equal(&got, &want);
    /* missing keys take the class defaults; null shift_terminal disables it */
    const char *partial = "{\"use_dynamic_shifting\": true, \"shift_terminal\": null, \"time_shift_type\": \"linear\"}";
    assert_int_equal(cq_flow_config_parse(partial, strlen(partial), &got), CQ_OK);
    assert_true(got.max_shift == 1.15 && got.max_image_seq_len == 4096 && got.shift_terminal == 0.0);
    assert_int_equal(got.shift_type, CQ_FLOW_SHIFT_LINEAR);
    const char *karras = "{\"use_karras_sigmas\": true}";
    assert_int_equal(cq_flow_config_parse(karras, strlen(karras), &got), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "use_karras_sigmas"));
    const char *bad[] = {"{", "[1]", "{\"max_shift\": \"x\"}", "{\"num_train_timesteps\": 1.5}",
                         "{\"time_shift_type\": \"cubic\"}", "{\"base_image_seq_len\": 4096}"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(bad); i++)
        assert_int_equal(cq_flow_config_parse(bad[i], strlen(bad[i]), &got), CQ_ERR_PARSE);
    /* the file the goldens were made with, when present */
    size_t len = 0;
    char *file = (char *)tu_read_file(SCHED_DIR "/scheduler_config.json", &len);
    if (file) {
        assert_int_equal(cq_flow_config_parse(file, len, &got), CQ_OK);
        assert_config_equal(&got, &want);
        free(file);
    }
}

static void test_mu_and_linspace(void **state) {
    (void)state;
    cq_flow_config c;
    cq_flow_config_qi21(&c);
    assert_true(fabs(cq_flow_mu(&c, 256) - 0.5) < 1e-15);
    assert_true(fabs(cq_flow_mu(&c, 8192) - 0.9) < 1e-15);
    assert_true(fabs(cq_flow_mu(&c, 4224) - 0.7) < 1e-15); /* halfway */
    double y[8];
    cq_flow_linspace(1.0, 0.125, 8, y);
    for (int i = 0; i < 8; i++) assert_true(y[i] == 1.0 - 0.125 * i); /* exact in binary */
    cq_flow_linspace(1.0, 1.0 / 3.0, 3, y);
    assert_true(y[0] == 1.0 && y[2] == 1.0 / 3.0 && fabs(y[1] - 2.0 / 3.0) < 1e-16);
    cq_flow_linspace(1.0, 1.0, 1, y);
    assert_true(y[0] == 1.0);
}

/* The schedule in float64, straight from the formulas. */
static void schedule_f64(const cq_flow_config *c, int n, int64_t seq, double *sig) {
    const double mu = cq_flow_mu(c, seq);
    for (int i = 0; i < n; i++) {
        const double t = n == 1 ? 1.0 : 1.0 + i * ((1.0 / n - 1.0) / (n - 1));
        sig[i] = exp(mu) / (exp(mu) + (1.0 / t - 1.0));
    }
    const double f = (1.0 - sig[n - 1]) / (1.0 - c->shift_terminal);
    for (int i = 0; i < n; i++) sig[i] = 1.0 - (1.0 - sig[i]) / f;
}

static void test_schedule_formula(void **state) {
    (void)state;
    cq_flow_config c;
    cq_flow_config_qi21(&c);
    const int steps[] = {2, 3, 8, 20, 40, 50, 200};
    const int64_t seqs[] = {64, 256, 1024, 4096, 6724, 16384};
    for (size_t a = 0; a < CQ_ARRAY_LEN(steps); a++) {
        for (size_t b = 0; b < CQ_ARRAY_LEN(seqs); b++) {
            const int n = steps[a];
            cq_flow_schedule s;
            assert_int_equal(cq_flow_schedule_make(&c, n, seqs[b], &s), CQ_OK);
            double ref[200];
            schedule_f64(&c, n, seqs[b], ref);
            assert_int_equal(s.steps, n);
            assert_true(s.sigmas[0] == 1.0f && s.sigmas[n] == 0.0f);
            for (int i = 0; i < n; i++) {
                assert_true(fabs((double)s.sigmas[i] - ref[i]) < 1e-6);
                assert_true(s.timesteps[i] == s.sigmas[i] * 1000.0f);
                assert_true(s.sigmas[i + 1] < s.sigmas[i]);
            }
            assert_true(fabs(s.sigmas[n - 1] - 0.02) < 1e-6); /* the terminal stretch */
            cq_flow_schedule_free(&s);
        }
    }
    /* one step: the reference divides 0 by 0 in the terminal stretch */
    cq_flow_schedule s;
    assert_int_equal(cq_flow_schedule_make(&c, 1, 256, &s), CQ_ERR_NUMERIC);
    assert_null(s.sigmas);
    c.shift_terminal = 0.0;
    assert_int_equal(cq_flow_schedule_make(&c, 1, 256, &s), CQ_OK);
    assert_true(s.sigmas[0] == 1.0f && s.sigmas[1] == 0.0f);
    cq_flow_schedule_free(&s);
    cq_flow_schedule_free(NULL);
    assert_int_equal(cq_flow_schedule_make(&c, 0, 256, &s), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_flow_schedule_make(&c, 4, 0, &s), CQ_ERR_INVALID_ARG);
}

static void test_steps_by_hand(void **state) {
    (void)state;
    assert_true(cq_flow_model_timestep(1000.0f, false, false) == 1.0f);
    assert_true(cq_flow_model_timestep(1000.0f, true, true) == 1.0f);
    /* 999.9 is 1000 in bf16 (8 significant bits) */
    assert_true(cq_flow_model_timestep(999.9f, true, false) == 1.0f);
    assert_true(cq_flow_model_timestep(500.0f, false, false) == 0.5f);
    float x[3] = {1.0f, 2.0f, -4.0f};
    const float v[3] = {2.0f, 0.5f, 8.0f};
    cq_flow_euler_step(x, v, 3, 1.0f, 0.5f);
    assert_true(x[0] == 0.0f && x[1] == 1.75f && x[2] == -8.0f);
    float pos[2] = {3.0f, -1.0f}, neg[2] = {1.0f, 1.0f}, out[2];
    cq_flow_cfg_combine(out, pos, neg, 2, 2.0);
    assert_true(out[0] == 5.0f && out[1] == -3.0f);
    cq_flow_cfg_combine(pos, pos, neg, 2, 1.0); /* in place, guidance 1: the positive */
    assert_true(pos[0] == 3.0f && pos[1] == -1.0f);
}

static void test_latent_layout(void **state) {
    (void)state;
    int w = 0, h = 0;
    assert_int_equal(cq_qi21_latent_grid(1024, 768, &w, &h), CQ_OK);
    assert_int_equal(w, 64);
    assert_int_equal(h, 48);
    assert_int_equal(cq_qi21_latent_grid(1328, 1328, &w, &h), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "1312x1312"));
    assert_int_equal(cq_qi21_latent_grid(16, 64, &w, &h), CQ_ERR_INVALID_ARG);

    /* tokens[b][y*w + x][c] = noise[(b*C + c)*h*w + y*w + x] */
    enum { B = 2, C = 3, H = 2, W = 4 };
    float chw[B * C * H * W], tok[B * C * H * W], back[B * C * H * W];
    for (int i = 0; i < B * C * H * W; i++) chw[i] = (float)i;
    cq_qi21_pack_latents(chw, tok, B, C, H, W);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < H * W; t++) assert_true(tok[(b * H * W + t) * C + c] == chw[(b * C + c) * H * W + t]);
    cq_qi21_unpack_latents(tok, back, B, C, H, W);
    assert_memory_equal(back, chw, sizeof chw);

    /* initial latents = one generator's randn over (B,1,C,h,w), packed */
    float *want = malloc(sizeof(float) * 2 * 64 * 4 * 6), *raw = malloc(sizeof(float) * 2 * 64 * 4 * 6);
    float *got = malloc(sizeof(float) * 2 * 64 * 4 * 6);
    assert_non_null(want);
    assert_non_null(raw);
    assert_non_null(got);
    cq_torch_gen g;
    cq_torch_gen_seed(&g, 77);
    assert_int_equal(cq_torch_randn_f32(&g, CQ_TORCH_F32_CEPHES, raw, 2 * 64 * 4 * 6), CQ_OK);
    cq_qi21_pack_latents(raw, want, 2, 64, 4, 6);
    assert_int_equal(cq_qi21_initial_latents(77, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, 2, 64, 4, 6, got), CQ_OK);
    assert_memory_equal(got, want, sizeof(float) * 2 * 64 * 4 * 6);
    uint16_t bf[64];
    cq_torch_gen_seed(&g, 78);
    assert_int_equal(cq_torch_randn_bf16(&g, bf, 64), CQ_OK);
    assert_int_equal(cq_qi21_initial_latents(78, CQ_TORCH_BF16, CQ_TORCH_F32_CEPHES, 1, 64, 1, 1, got), CQ_OK);
    for (int i = 0; i < 64; i++) assert_true(got[i] == cq_torch_bf16_to_f32(bf[i]));
    assert_int_equal(cq_qi21_initial_latents(1, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, 0, 64, 4, 6, got),
                     CQ_ERR_INVALID_ARG);
    free(want);
    free(raw);
    free(got);
}

/* ---- goldens ------------------------------------------------------------ */

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static void bits_array(const cJSON *arr, float *out, int n) {
    assert_int_equal(cJSON_GetArraySize(arr), n);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const uint32_t u = (uint32_t)it->valuedouble;
        memcpy(&out[i++], &u, 4);
    }
}

static void expect_bits(const char *what, int idx, const float *got, const cJSON *want, int n) {
    float w[512];
    assert_true(n <= 512);
    bits_array(want, w, n);
    for (int i = 0; i < n; i++)
        if (fbits(got[i]) != fbits(w[i]))
            fail_msg("golden %s (case %d) [%d]: got %.9g (0x%08x), want %.9g (0x%08x)", what, idx, i, got[i],
                     fbits(got[i]), w[i], fbits(w[i]));
}

static cJSON *load_golden(void) {
    size_t len = 0;
    char *text = (char *)tu_read_file(SCHED_DIR "/schedule.json", &len);
    assert_non_null(text); /* the folder exists, so its data must */
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(root);
    return root;
}

static bool have_golden(void) {
    FILE *f = fopen(SCHED_DIR, "rb");
    if (f) fclose(f);
    if (!f) print_message("golden schedule absent (%s): run tools/golden_schedule_noise.py; skipped\n", SCHED_DIR);
    return f != NULL;
}

static void test_golden_schedule(void **state) {
    (void)state;
    if (!have_golden()) skip();
    cJSON *root = load_golden();
    cq_flow_config c;
    cq_flow_config_qi21(&c);
    int n_cases = 0, n_ts = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItem(root, "cases")) {
        const int steps = cJSON_GetObjectItem(cs, "steps")->valueint;
        const int64_t seq = (int64_t)cJSON_GetObjectItem(cs, "image_seq_len")->valuedouble;
        /* the pipeline's grid for the size it renders */
        int lw = 0, lh = 0;
        assert_int_equal(cq_qi21_latent_grid(cJSON_GetObjectItem(cs, "render_width")->valueint,
                                               cJSON_GetObjectItem(cs, "render_height")->valueint, &lw, &lh),
                         CQ_OK);
        assert_int_equal(lw, cJSON_GetObjectItem(cs, "latent_w")->valueint);
        assert_int_equal(lh, cJSON_GetObjectItem(cs, "latent_h")->valueint);
        assert_int_equal((int64_t)lw * lh, seq);

        const double mu = cq_flow_mu(&c, seq);
        uint64_t mb;
        memcpy(&mb, &mu, 8);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)mb);
        assert_string_equal(hex, cJSON_GetObjectItem(cs, "mu_f64")->valuestring);

        cq_flow_schedule s;
        const cq_status st = cq_flow_schedule_make(&c, steps, seq, &s);
        float want[64];
        bits_array(cJSON_GetObjectItem(cs, "sigmas_f32"), want, steps + 1);
        if (isnan(want[0])) { /* the reference's 0/0 for one step */
            assert_int_equal(st, CQ_ERR_NUMERIC);
            n_cases++;
            continue;
        }
        assert_int_equal(st, CQ_OK);
        expect_bits("sigmas", n_cases, s.sigmas, cJSON_GetObjectItem(cs, "sigmas_f32"), steps + 1);
        expect_bits("timesteps", n_cases, s.timesteps, cJSON_GetObjectItem(cs, "timesteps_f32"), steps);
        const cJSON *mt;
        cJSON_ArrayForEach(mt, cJSON_GetObjectItem(cs, "model_timestep")) {
            const bool bf16 = strstr(mt->string, "bfloat16") != NULL;
            const bool cuda = strncmp(mt->string, "cuda", 4) == 0;
            float got[64];
            for (int i = 0; i < steps; i++) got[i] = cq_flow_model_timestep(s.timesteps[i], bf16, cuda);
            expect_bits(mt->string, n_cases, got, mt, steps);
            n_ts++;
        }
        cq_flow_schedule_free(&s);
        n_cases++;
    }
    print_message("golden schedule: %d schedules, %d model-timestep series bit-exact\n", n_cases, n_ts);
    assert_true(n_cases > 0 && n_ts > 0);
    cJSON_Delete(root);
}

static void test_golden_euler_cfg(void **state) {
    (void)state;
    if (!have_golden()) skip();
    cJSON *root = load_golden();
    cq_flow_config c;
    cq_flow_config_qi21(&c);
    int n_euler = 0, n_cfg = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "euler")) {
        const int steps = cJSON_GetObjectItem(e, "steps")->valueint;
        cq_flow_schedule s;
        assert_int_equal(cq_flow_schedule_make(&c, steps, (int64_t)cJSON_GetObjectItem(e, "image_seq_len")->valuedouble,
                                               &s),
                         CQ_OK);
        float x[64], v[64];
        bits_array(cJSON_GetObjectItem(e, "x0"), x, 64);
        for (int i = 0; i < steps; i++) {
            bits_array(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "v"), i), v, 64);
            cq_flow_euler_step(x, v, 64, s.sigmas[i], s.sigmas[i + 1]);
            expect_bits("euler", n_euler, x, cJSON_GetArrayItem(cJSON_GetObjectItem(e, "x"), i), 64);
        }
        cq_flow_schedule_free(&s);
        n_euler++;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "cfg")) {
        float pos[256], neg[256], out[256];
        bits_array(cJSON_GetObjectItem(e, "pos"), pos, 256);
        bits_array(cJSON_GetObjectItem(e, "neg"), neg, 256);
        cq_flow_cfg_combine(out, pos, neg, 256, cJSON_GetObjectItem(e, "scale")->valuedouble);
        expect_bits("cfg", n_cfg, out, cJSON_GetObjectItem(e, "out"), 256);
        n_cfg++;
    }
    print_message("golden schedule: %d Euler runs, %d CFG cases bit-exact\n", n_euler, n_cfg);
    assert_true(n_euler > 0 && n_cfg > 0);
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_parse),   cmocka_unit_test(test_mu_and_linspace),
        cmocka_unit_test(test_schedule_formula), cmocka_unit_test(test_steps_by_hand),
        cmocka_unit_test(test_latent_layout),  cmocka_unit_test(test_golden_schedule),
        cmocka_unit_test(test_golden_euler_cfg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
