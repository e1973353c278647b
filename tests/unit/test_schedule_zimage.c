/*
 * test_schedule_zimage.c — Z-Image's schedule bit for bit against diffusers:
 * torch.linspace(1, 1/N, N) in float32, the static shift, the timesteps,
 * the model's timestep (1000 - t) / 1000 and the progress the guidance
 * truncation compares, for N in {1, 2, 3, 4, 8, 9, 28, 50} and shifts 3
 * (Turbo) and 6 (base): tests/golden/zimage/index.json "schedule", made by
 * tools/golden_zimage.py from ZImagePipeline's own get_default_z_image_sigmas
 * and FlowMatchEulerDiscreteScheduler. The values are float32 numbers written
 * as JSON doubles, so comparing the float32 bits is exact.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "pipelines/flow_sample.h"
#include "pipelines/schedule.h"
#include "testutil.h"

#define INDEX CQ_SOURCE_DIR "/tests/golden/zimage/index.json"

static const char turbo_config[] =
    "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"base_image_seq_len\": 256, \"base_shift\": 0.5,"
    " \"invert_sigmas\": false, \"max_image_seq_len\": 4096, \"max_shift\": 1.15, \"num_train_timesteps\": 1000,"
    " \"shift\": 3.0, \"shift_terminal\": null, \"stochastic_sampling\": false, \"time_shift_type\": \"exponential\","
    " \"use_beta_sigmas\": false, \"use_dynamic_shifting\": false, \"use_exponential_sigmas\": false,"
    " \"use_karras_sigmas\": false}";

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* got[0..n) against the JSON array of float32 values, bit for bit */
static void expect_exact(const char *what, int steps, double shift, const float *got, const cJSON *arr, int n) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n)
        fail_msg("%s (N %d, shift %g): the golden array has %d values, want %d", what, steps, shift,
                 cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1, n);
    for (int i = 0; i < n; i++) {
        const float want = (float)cJSON_GetArrayItem(arr, i)->valuedouble;
        if (bits(got[i]) != bits(want))
            fail_msg("%s (N %d, shift %g) [%d]: %.9g (0x%08x), reference %.9g (0x%08x)", what, steps, shift, i,
                     (double)got[i], bits(got[i]), (double)want, bits(want));
    }
}

/* By hand: N = 8 is exact in binary (step -0.125); shift 3 maps 0.5 to 0.75; one step is [1]. */
static void test_by_hand(void **state) {
    (void)state;
    float lin[8];
    cq_flow_linspace_torch_f32(1.0, 1.0 / 8, 8, lin);
    for (int i = 0; i < 8; i++) assert_true(lin[i] == 1.0f - 0.125f * (float)i);
    cq_flow_linspace_torch_f32(1.0, 1.0, 1, lin);
    assert_true(lin[0] == 1.0f);
    /* the second half counts back from the end: the last value is float32(1/N) exactly */
    cq_flow_linspace_torch_f32(1.0, 1.0 / 3, 3, lin);
    assert_true(lin[2] == (float)(1.0 / 3) && lin[0] == 1.0f);
    cq_flow_config c;
    assert_int_equal(cq_flow_config_parse(turbo_config, strlen(turbo_config), &c), CQ_OK);
    assert_false(c.use_dynamic_shifting);
    assert_true(c.shift == 3.0);
    c.sigmas = CQ_FLOW_SIGMAS_TORCH_F32;
    cq_flow_schedule s;
    assert_int_equal(cq_flow_schedule_make(&c, 2, 16, &s), CQ_OK);
    assert_true(s.sigmas[0] == 1.0f && s.sigmas[1] == 0.75f && s.sigmas[2] == 0.0f);
    assert_true(s.timesteps[0] == 1000.0f && s.timesteps[1] == 750.0f);
    const cq_flow_timestep ts = {.kind = CQ_FLOW_T_ONE_MINUS};
    assert_true(cq_flow_timestep_apply(&ts, s.timesteps[0], 1000) == 0.0f);
    assert_true(cq_flow_timestep_apply(&ts, s.timesteps[1], 1000) == 0.25f);
    cq_flow_schedule_free(&s);
    /* a static shift must be positive */
    c.shift = 0.0;
    assert_int_equal(cq_flow_schedule_make(&c, 2, 16, &s), CQ_ERR_INVALID_ARG);
}

static void test_golden(void **state) {
    (void)state;
    size_t len = 0;
    char *text = (char *)tu_read_file(INDEX, &len);
    if (!text) skip();
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(root);
    const cJSON *list = cJSON_GetObjectItem(root, "schedule");
    assert_true(cJSON_IsArray(list));
    cq_flow_config c;
    assert_int_equal(cq_flow_config_parse(turbo_config, strlen(turbo_config), &c), CQ_OK);
    c.sigmas = CQ_FLOW_SIGMAS_TORCH_F32;
    const cq_flow_timestep ts = {.kind = CQ_FLOW_T_ONE_MINUS};
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const int steps = cJSON_GetObjectItem(e, "steps")->valueint;
        const double shift = cJSON_GetObjectItem(e, "shift")->valuedouble;
        assert_true(steps >= 1 && steps <= 100);
        float *lin = malloc((size_t)steps * sizeof *lin), *got = malloc((size_t)steps * sizeof *got);
        assert_non_null(lin);
        assert_non_null(got);
        cq_flow_linspace_torch_f32(1.0, 1.0 / steps, steps, lin);
        expect_exact("linspace", steps, shift, lin, cJSON_GetObjectItem(e, "linspace"), steps);
        c.shift = shift;
        cq_flow_schedule s;
        assert_int_equal(cq_flow_schedule_make(&c, steps, 64, &s), CQ_OK);
        expect_exact("sigmas", steps, shift, s.sigmas, cJSON_GetObjectItem(e, "sigmas"), steps + 1);
        expect_exact("timesteps", steps, shift, s.timesteps, cJSON_GetObjectItem(e, "timesteps"), steps);
        for (int i = 0; i < steps; i++) got[i] = cq_flow_timestep_apply(&ts, s.timesteps[i], 1000);
        expect_exact("model timestep", steps, shift, got, cJSON_GetObjectItem(e, "model_t"), steps);
        /* the truncation's progress: guidance stays on exactly where t_norm <= the fraction */
        const cJSON *tn = cJSON_GetObjectItem(e, "t_norm");
        for (int i = 0; i < steps; i++) {
            const double t_norm = cJSON_GetArrayItem(tn, i)->valuedouble;
            const cq_guidance g = {.kind = CQ_GUIDANCE_CFG_POS, .scale = 4.0, .truncate = true, .truncate_after = t_norm};
            assert_true(cq_guidance_active(&g, &s, 1000, i));
            const cq_guidance below = {.kind = CQ_GUIDANCE_CFG_POS, .scale = 4.0, .truncate = true,
                                       .truncate_after = nextafter(t_norm, -1.0)};
            assert_false(cq_guidance_active(&below, &s, 1000, i));
        }
        cq_flow_schedule_free(&s);
        free(lin);
        free(got);
        n++;
    }
    print_message("z-image golden schedule: %d schedules bit-exact (linspace, sigmas, timesteps, model t, t_norm)\n", n);
    assert_int_equal(n, 16);
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
