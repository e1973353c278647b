/*
 * test_ltx2_rope.c — LTX-2's token positions and split RoPE tables
 * (models/ltx2_rope.h) against diffusers' LTX2AudioVideoRotaryPosEmbed
 * (tests/golden/ltx2_rope, made by tools/golden_ltx2_rope.py). Exits 77
 * (skipped) when the golden folder is absent.
 *  - Positions: every case's midpoints bit for bit (the float32 steps are the
 *    reference's; the cross cases take the video or audio time column).
 *  - Tables: cos and sin within 2.5e-7 absolute (two ulps near 1: the
 *    frequencies and angles are the reference's float32 values, only the
 *    libm's cos/sin may round differently from torch's), on every case,
 *    including the real model's 4096-wide video table with its two padding
 *    columns and a float32-ladder case; the padding columns exactly cos 1,
 *    sin 0.
 *  - Hand-checked values: the first video frame's time midpoint is 0.5 / fps
 *    and frame f >= 1 sits at (8f - 3) / fps; audio frame 0 at 0.005 s, frame
 *    i at (4i - 1) / 100 s.
 *  - Bad arguments are refused with messages.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "format/safetensors.h"
#include "models/ltx2_rope.h"
#include "testutil.h"

#define LR_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_rope"

static cq_st *g_st;
static cJSON *g_index;

static int setup(void **state) {
    (void)state;
    if (cq_st_open(LR_DIR "/golden.safetensors", &g_st) != CQ_OK) return -1;
    g_index = tu_read_json(LR_DIR "/index.json");
    return g_index ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_st_close(g_st);
    cJSON_Delete(g_index);
    return 0;
}

static double num(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!cJSON_IsNumber(v)) fail_msg("index.json: a case lacks %s", key);
    return v->valuedouble;
}

static float *floats(const char *what, const char *name, size_t want) {
    char key[96];
    snprintf(key, sizeof key, "%s_%s", what, name);
    size_t n = 0;
    float *v = tu_st_floats(g_st, key, &n);
    if (!v || n != want) fail_msg("%s: %zu values, want %zu", key, n, want);
    return v;
}

/* the positions the case's table reads, computed as the model would */
static void case_positions(const cJSON *c, const char *kind, int rows, float *pos) {
    const int frames = (int)num(c, "frames");
    if (strncmp(kind, "audio", 5) == 0 || strcmp(kind, "cross_audio") == 0) {
        assert_int_equal(cq_ltx2_audio_positions(frames, (int)num(c, "shift"), 4, 1, 160, 16000, pos), CQ_OK);
        return;
    }
    const int h = (int)num(c, "h"), w = (int)num(c, "w"), scale[3] = {8, 32, 32};
    float *v = malloc((size_t)rows * 3 * sizeof *v);
    assert_non_null(v);
    assert_int_equal(cq_ltx2_video_positions(frames, h, w, scale, 1, num(c, "fps"), v), CQ_OK);
    if (strcmp(kind, "video") == 0) memcpy(pos, v, (size_t)rows * 3 * sizeof *v);
    else
        for (int t = 0; t < rows; t++) pos[t] = v[t * 3]; /* the cross table reads the time column */
    free(v);
}

static void test_golden(void **state) {
    (void)state;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g_index, "cases"), *c;
    int n_cases = 0;
    double worst = 0.0;
    cJSON_ArrayForEach(c, cases) {
        const char *name = c->string;
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind"));
        assert_non_null(kind);
        const int rows = (int)num(c, "rows"), cols = (int)num(c, "cols"), axes = (int)num(c, "axes");
        cq_ltx2_rope r = {.dim = (int)num(c, "dim"), .n_axes = axes, .theta = 10000.0,
                          .f64 = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "f64"))};
        const cJSON *mp = cJSON_GetObjectItemCaseSensitive(c, "max_pos");
        for (int d = 0; d < axes; d++) r.max_pos[d] = (float)cJSON_GetArrayItem(mp, d)->valuedouble;
        assert_int_equal(cq_ltx2_rope_cols(&r), cols);

        float *want_pos = floats("pos", name, (size_t)rows * axes);
        float *pos = malloc((size_t)rows * axes * sizeof *pos);
        assert_non_null(pos);
        case_positions(c, kind, rows, pos);
        for (int i = 0; i < rows * axes; i++)
            if (memcmp(&pos[i], &want_pos[i], sizeof(float)) != 0)
                fail_msg("%s: position %d is %.9g, the reference %.9g", name, i, (double)pos[i],
                         (double)want_pos[i]);

        float *want_cos = floats("cos", name, (size_t)rows * cols), *want_sin = floats("sin", name, (size_t)rows * cols);
        float *cv = malloc((size_t)rows * cols * sizeof *cv), *sv = malloc((size_t)rows * cols * sizeof *sv);
        assert_non_null(cv);
        assert_non_null(sv);
        assert_int_equal(cq_ltx2_rope_tables(&r, pos, rows, cv, sv), CQ_OK);
        double err = 0.0;
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            err = fmax(err, fabs((double)cv[i] - want_cos[i]));
            err = fmax(err, fabs((double)sv[i] - want_sin[i]));
        }
        const int pad = cols - (r.dim / (2 * axes)) * axes;
        for (int t = 0; t < rows; t++)
            for (int k = 0; k < pad; k++) {
                assert_true(cv[(size_t)t * cols + k] == 1.0f);
                assert_true(sv[(size_t)t * cols + k] == 0.0f);
            }
        print_message("  %-10s %-11s %4d rows x %4d cols (pad %d): positions exact, max |err| %.2e\n", name, kind,
                      rows, cols, pad, err);
        if (err > 2.5e-7) fail_msg("%s: table error %.3g over 2.5e-7", name, err);
        worst = fmax(worst, err);
        free(pos);
        free(want_pos);
        free(want_cos);
        free(want_sin);
        free(cv);
        free(sv);
        n_cases++;
    }
    print_message("  %d cases, largest table error %.2e\n", n_cases, worst);
    assert_true(n_cases >= 10);
}

static void test_hand_values(void **state) {
    (void)state;
    const int scale[3] = {8, 32, 32};
    float v[4 * 1 * 2 * 3];
    assert_int_equal(cq_ltx2_video_positions(4, 1, 2, scale, 1, 25.0, v), CQ_OK);
    assert_float_equal(v[0], 0.5f / 25.0f, 1e-7);
    for (int f = 1; f < 4; f++) assert_float_equal(v[f * 6], (8.0f * f - 3.0f) / 25.0f, 1e-6);
    assert_float_equal(v[1], 16.0f, 0.0f);
    assert_float_equal(v[5], 48.0f, 0.0f); /* frame 0, column 1: [32, 64) */
    float a[5];
    assert_int_equal(cq_ltx2_audio_positions(5, 0, 4, 1, 160, 16000, a), CQ_OK);
    assert_float_equal(a[0], 0.005f, 1e-8);
    for (int i = 1; i < 5; i++) assert_float_equal(a[i], (4.0f * i - 1.0f) / 100.0f, 1e-7);
    /* a position at the largest value is angle +w, at 0 angle -w: cos even, sin odd */
    cq_ltx2_rope r = {.dim = 8, .n_axes = 1, .max_pos = {20.0f}, .theta = 10000.0, .f64 = true};
    const float p[2] = {0.0f, 20.0f};
    float c[8], s[8];
    assert_int_equal(cq_ltx2_rope_tables(&r, p, 2, c, s), CQ_OK);
    for (int j = 0; j < 4; j++) {
        assert_float_equal(c[j], c[4 + j], 0.0f);
        assert_float_equal(s[j], -s[4 + j], 0.0f);
    }
    assert_float_equal(s[4], sinf((float)(M_PI / 2.0)), 1e-7); /* w_0 = pi/2 */
}

static void test_refusals(void **state) {
    (void)state;
    const int scale[3] = {8, 32, 32}, bad_scale[3] = {0, 32, 32};
    float buf[64];
    tu_expect_err(cq_ltx2_video_positions(0, 1, 1, scale, 1, 24.0, buf), CQ_ERR_INVALID_ARG, "latent grid");
    tu_expect_err(cq_ltx2_video_positions(1, 1, 1, bad_scale, 1, 24.0, buf), CQ_ERR_INVALID_ARG, "scale");
    tu_expect_err(cq_ltx2_video_positions(1, 1, 1, scale, 1, 0.0, buf), CQ_ERR_INVALID_ARG, "fps");
    tu_expect_err(cq_ltx2_video_positions(1, 1, 1, scale, 1, NAN, buf), CQ_ERR_INVALID_ARG, "fps");
    tu_expect_err(cq_ltx2_audio_positions(0, 0, 4, 1, 160, 16000, buf), CQ_ERR_INVALID_ARG, "frames");
    tu_expect_err(cq_ltx2_audio_positions(1, 0, 4, 1, 0, 16000, buf), CQ_ERR_INVALID_ARG, "hop");
    cq_ltx2_rope r = {.dim = 4, .n_axes = 3, .max_pos = {20, 2048, 2048}, .theta = 10000.0, .f64 = true};
    float c[8], s[8];
    tu_expect_err(cq_ltx2_rope_tables(&r, buf, 1, c, s), CQ_ERR_INVALID_ARG, "width");
    r.dim = 8;
    r.max_pos[1] = 0.0f;
    tu_expect_err(cq_ltx2_rope_tables(&r, buf, 1, c, s), CQ_ERR_INVALID_ARG, "largest position");
    r.max_pos[1] = 2048.0f;
    r.n_axes = 4;
    tu_expect_err(cq_ltx2_rope_tables(&r, buf, 1, c, s), CQ_ERR_INVALID_ARG, "axes");
}

int main(void) {
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_refusals),
    };
    int rc = cmocka_run_group_tests(plain, NULL, NULL);
    FILE *f = fopen(LR_DIR "/index.json", "rb");
    if (!f) {
        fprintf(stderr, "test_ltx2_rope: %s is absent; golden comparison skipped\n", LR_DIR);
        return rc ? rc : 77;
    }
    fclose(f);
    const struct CMUnitTest golden[] = {cmocka_unit_test(test_golden)};
    return rc | cmocka_run_group_tests(golden, setup, teardown);
}
