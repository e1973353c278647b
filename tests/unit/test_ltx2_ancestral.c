/*
 * test_ltx2_ancestral.c — ltx-core's ancestral Euler step (cq_ltx2_ancestral_step in
 * pipelines/ltx2_sample.h) against EulerAncestralDiffusionStep itself on whole schedules
 * (tests/golden/ltx2_ancestral, tools/golden_ltx2_ancestral.py): the distilled ladder at
 * eta 1 (ltx-pipelines' LTX-2.5 stage 1), eta 0.5 with s_noise 0.8, and eta 0 (plain
 * Euler to sigma_next); the terminal step's prediction. Each step runs on the golden's
 * own state and prediction; bound 1e-6 of the output's RMS (float32 operations in the
 * reference's order: last-bit differences only). The noise is drawn as the pipeline
 * draws it, from torch.Generator("cpu").manual_seed(seed + 10000), video then audio per
 * step, and must equal the reference's bit for bit. A masked token stays.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "format/safetensors.h"
#include "pipelines/ltx2_pipe.h"
#include "pipelines/ltx2_sample.h"
#include "pipelines/torch_rng.h"

#define GOLD CQ_SOURCE_DIR "/tests/golden/ltx2_ancestral"

static float *get(const cq_st *g, const char *name, size_t want) {
    size_t n = 0;
    float *f = tu_st_floats(g, name, &n);
    if (!f || n != want) fail_msg("golden %s: missing or %zu values (expected %zu)", name, n, want);
    return f;
}

static void run_case(const char *name, const cJSON *c, const cJSON *shapes) {
    char path[1024], key[64];
    snprintf(path, sizeof path, GOLD "/cases/%s.safetensors", name);
    cq_st *g;
    if (cq_st_open(path, &g) != CQ_OK) fail_msg("%s: %s", path, cq_last_error());
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(c, "sigmas");
    const int steps = cJSON_GetArraySize(sg) - 1;
    const double eta = cJSON_GetObjectItemCaseSensitive(c, "eta")->valuedouble;
    const double s_noise = cJSON_GetObjectItemCaseSensitive(c, "s_noise")->valuedouble;
    const int seed = cJSON_GetObjectItemCaseSensitive(c, "seed")->valueint;
    cq_torch_gen gen;
    cq_torch_gen_seed(&gen, (uint64_t)seed + CQ_LTX2_ANCESTRAL_SEED_OFFSET);
    double worst = 0;
    for (int i = 0; i < steps; i++) {
        const float sigma = (float)cJSON_GetArrayItem(sg, i)->valuedouble;
        const float sigma_next = (float)cJSON_GetArrayItem(sg, i + 1)->valuedouble;
        for (int si = 0; si < 2; si++) {
            const char *st = si ? "audio" : "video";
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(shapes, st);
            const int T = cJSON_GetArrayItem(sh, 0)->valueint, F = cJSON_GetArrayItem(sh, 1)->valueint;
            const size_t n = (size_t)T * F;
            snprintf(key, sizeof key, "%s_x%d", st, i);
            float *x = get(g, key, n);
            snprintf(key, sizeof key, "%s_x0_%d", st, i);
            float *x0 = get(g, key, n);
            snprintf(key, sizeof key, "%s_out%d", st, i);
            float *want = get(g, key, n);
            float *noise = NULL;
            if (sigma_next != 0.0f && eta > 0) {
                snprintf(key, sizeof key, "%s_noise%d", st, i);
                float *rn = get(g, key, n);
                noise = malloc(n * sizeof(float));
                assert_non_null(noise);
                assert_int_equal(cq_torch_randn_f32(&gen, cq_torch_f32_kernel_native(), noise, n), CQ_OK);
                assert_memory_equal(noise, rn, n * sizeof(float));
                free(rn);
            }
            /* token 0 masked: it must not move */
            uint8_t *mask = malloc((size_t)T);
            assert_non_null(mask);
            memset(mask, 1, (size_t)T);
            mask[0] = 0;
            float *keep = malloc((size_t)F * sizeof(float));
            assert_non_null(keep);
            memcpy(keep, x, (size_t)F * sizeof(float));
            cq_ltx2_ancestral_step(x, x0, noise, mask, T, F, sigma, sigma_next, eta, s_noise);
            assert_memory_equal(x, keep, (size_t)F * sizeof(float));
            /* the whole state, unmasked, against the reference */
            snprintf(key, sizeof key, "%s_x%d", st, i);
            float *x2 = get(g, key, n);
            cq_ltx2_ancestral_step(x2, x0, noise, NULL, T, F, sigma, sigma_next, eta, s_noise);
            const double rms = tu_rms(want, n);
            double m = 0;
            for (size_t j = 0; j < n; j++) {
                const double d = fabs((double)x2[j] - want[j]) / rms;
                if (!(d <= m)) m = isnan(d) ? INFINITY : d;
            }
            if (m > worst) worst = m;
            if (!(m <= 1e-6)) fail_msg("%s step %d %s: off by %.3g of RMS", name, i, st, m);
            free(x), free(x2), free(x0), free(want), free(noise), free(mask), free(keep);
        }
    }
    printf("  %-9s %d steps, eta %g, s_noise %g: largest error %.3g of RMS (bound 1e-6), noise exact\n", name, steps,
           eta, s_noise, worst);
    cq_st_close(g);
}

static void test_golden(void **st) {
    (void)st;
    cJSON *index = tu_read_json(GOLD "/index.json");
    assert_non_null(index);
    const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(index, "shapes"), *c;
    int k = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(index, "cases")) {
        run_case(c->string, c, shapes);
        k++;
    }
    assert_int_equal(k, 3);
    cJSON_Delete(index);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden)};
    return cmocka_run_group_tests_name("test_ltx2_ancestral", tests, NULL, NULL);
}
