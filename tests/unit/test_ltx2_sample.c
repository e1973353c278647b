/*
 * test_ltx2_sample.c — LTX-2's sampling rules (pipelines/ltx2_sample.h):
 * the distilled ladders and the dev schedule against the formulas evaluated
 * in float64, the latent geometry (Python's half-to-even round of the audio
 * length), the packing against its index rule, the initial noise as one CPU
 * generator drawing video then audio, the Euler step through x0 against
 * float64, the image-to-video mask rules; then, with tests/golden/ltx2_sched
 * (tools/golden_ltx2_sched.py; skipped while it is absent), bit for bit
 * against diffusers' FlowMatchEulerDiscreteScheduler and the LTX2Pipeline
 * rules: the schedules, the geometries, the packed noise of a seed and an
 * 8-step trace of the pipeline's step.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "format/safetensors.h"
#include "pipelines/ltx2_sample.h"
#include "testutil.h"

#define GOLD_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_sched"

static void test_distilled(void **st) {
    (void)st;
    cq_flow_config c;
    cq_ltx2_flow_config_distilled(&c);
    for (int stage = 0; stage < 2; stage++) {
        const double *lad = stage ? cq_ltx2_stage2_sigmas : cq_ltx2_distilled_sigmas;
        const int n = stage ? CQ_LTX2_STAGE2_STEPS : CQ_LTX2_DISTILLED_STEPS;
        /* the token count does not matter without dynamic shifting */
        const int64_t toks[] = {1, 1024, 98304};
        for (size_t k = 0; k < CQ_ARRAY_LEN(toks); k++) {
            cq_flow_schedule s;
            assert_int_equal(cq_ltx2_schedule(&c, lad, n, toks[k], &s), CQ_OK);
            assert_int_equal(s.steps, n);
            assert_true(isnan(s.mu));
            for (int i = 0; i < n; i++) {
                assert_true(s.sigmas[i] == (float)lad[i]);
                assert_true(s.timesteps[i] == (float)lad[i] * 1000.0f);
            }
            assert_true(s.sigmas[n] == 0.0f);
            cq_flow_schedule_free(&s);
        }
    }
    assert_true(cq_ltx2_distilled_sigmas[5] == cq_ltx2_stage2_sigmas[0]);
    /* a sigma outside (0, 1] is refused, naming it */
    const double bad[2] = {1.0, 0.0};
    cq_flow_schedule s;
    tu_expect_err(cq_ltx2_schedule(&c, bad, 2, 16, &s), CQ_ERR_INVALID_ARG, "sigma 1 is 0");
}

static void test_dev(void **st) {
    (void)st;
    cq_flow_config c;
    cq_ltx2_flow_config_dev(&c);
    assert_true(fabs(cq_flow_mu(&c, 1024) - 0.95) < 1e-12 && fabs(cq_flow_mu(&c, 4096) - 2.05) < 1e-12);
    const int steps[] = {8, 30, 40};
    const int64_t toks[] = {768, 3072, 6144};
    for (size_t a = 0; a < CQ_ARRAY_LEN(steps); a++)
        for (size_t b = 0; b < CQ_ARRAY_LEN(toks); b++) {
            const int N = steps[a];
            cq_flow_schedule s;
            assert_int_equal(cq_ltx2_schedule(&c, NULL, N, toks[b], &s), CQ_OK);
            const double mu = 0.95 + (2.05 - 0.95) * (double)(toks[b] - 1024) / 3072.0;
            assert_true(fabs(s.mu - mu) < 1e-12);
            /* float64: shifted = e^mu / (e^mu + 1/s - 1), stretched so the last one is 0.1 */
            double sh[64];
            for (int i = 0; i < N; i++) {
                const double lin = 1.0 + (double)i * (1.0 / N - 1.0) / (N - 1);
                sh[i] = exp(mu) / (exp(mu) + 1.0 / lin - 1.0);
            }
            const double f = (1.0 - sh[N - 1]) / 0.9;
            double worst = 0;
            for (int i = 0; i < N; i++) {
                const double want = 1.0 - (1.0 - sh[i]) / f;
                worst = fmax(worst, fabs(s.sigmas[i] - want));
                if (i) assert_true(s.sigmas[i] < s.sigmas[i - 1]);
                assert_true(s.timesteps[i] == s.sigmas[i] * 1000.0f);
            }
            if (!(worst < 2e-6)) fail_msg("dev %d steps %lld tokens: off by %g", N, (long long)toks[b], worst);
            assert_true(fabsf(s.sigmas[N - 1] - 0.1f) < 1e-6f && s.sigmas[0] == 1.0f && s.sigmas[N] == 0.0f);
            cq_flow_schedule_free(&s);
        }
}

static void test_geometry(void **st) {
    (void)st;
    cq_ltx2_geo_params p;
    cq_ltx2_geo_params_default(&p);
    cq_ltx2_geometry g;
    assert_int_equal(cq_ltx2_geometry_make(&p, 768, 512, 121, 24.0, &g), CQ_OK);
    assert_true(g.frames == 16 && g.height == 16 && g.width == 24 && g.video_tokens == 16 * 16 * 24);
    assert_true(g.video_features == 128 && g.audio_frames == 126 && g.audio_mel == 16 && g.audio_features == 128);
    /* 5 frames at 50 fps: 2.5 audio latents, Python's round gives 2 (half to even); 3 at 50: 1.5 -> 2 */
    assert_int_equal(cq_ltx2_geometry_make(&p, 64, 64, 5, 50.0, &g), CQ_OK);
    assert_int_equal(g.audio_frames, 2);
    assert_int_equal(cq_ltx2_geometry_make(&p, 64, 64, 3, 50.0, &g), CQ_OK);
    assert_int_equal(g.audio_frames, 2);
    assert_int_equal(g.frames, 1);
    assert_int_equal(cq_ltx2_geometry_make(&p, 64, 64, 9, 24.0, &g), CQ_OK);
    assert_int_equal(g.frames, 2);
    tu_expect_err(cq_ltx2_geometry_make(&p, 770, 512, 121, 24.0, &g), CQ_ERR_SHAPE, "multiples of 32");
    tu_expect_err(cq_ltx2_geometry_make(&p, 64, 64, 1, 100.0, &g), CQ_ERR_SHAPE, "audio latent frames");
    tu_expect_err(cq_ltx2_geometry_make(&p, 64, 64, 0, 24.0, &g), CQ_ERR_SHAPE, "0 frames");
    tu_expect_err(cq_ltx2_geometry_make(&p, 64, 64, 9, 0.0, &g), CQ_ERR_INVALID_ARG, "frame rate");
    p.patch = 2;
    tu_expect_err(cq_ltx2_geometry_make(&p, 96, 64, 9, 24.0, &g), CQ_ERR_SHAPE, "patch sizes");
    assert_int_equal(cq_ltx2_geometry_make(&p, 128, 64, 9, 24.0, &g), CQ_OK);
    assert_true(g.video_tokens == 2 * 1 * 2 && g.video_features == 128 * 4);
}

static void test_pack(void **st) {
    (void)st;
    const int C = 3, F = 4, H = 2, W = 6;
    const size_t n = (size_t)C * F * H * W;
    float *a = malloc(n * sizeof(float)), *t = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    assert_true(a && t && b);
    for (size_t i = 0; i < n; i++) a[i] = (float)i;
    /* patch 1: token (f, y, x) holds its channels */
    cq_ltx2_pack_video(a, t, C, F, H, W, 1, 1);
    for (int f = 0; f < F; f++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < C; c++)
                    assert_true(t[(((size_t)f * H + y) * W + x) * C + c] == a[(((size_t)c * F + f) * H + y) * W + x]);
    /* patches (pt 2, p 2): feature ((c pt + a) p + b) p + d of token (f, y, x) */
    cq_ltx2_pack_video(a, t, C, F, H, W, 2, 2);
    const int D = C * 8;
    assert_true(t[((size_t)(1 * 1 + 0) * 3 + 2) * D + ((2 * 2 + 1) * 2 + 1) * 2 + 0] ==
                a[(((size_t)2 * F + 2 * 1 + 1) * H + 0 * 2 + 1) * W + 2 * 2 + 0]);
    cq_ltx2_unpack_video(t, b, C, F, H, W, 2, 2);
    assert_memory_equal(a, b, n * sizeof(float));
    /* audio: [C][L][M] -> [L][C M] */
    cq_ltx2_pack_audio(a, t, 3, 8, 6);
    assert_true(t[(5 * 3 + 2) * 6 + 4] == a[(2 * 8 + 5) * 6 + 4]);
    cq_ltx2_unpack_audio(t, b, 3, 8, 6);
    assert_memory_equal(a, b, 144 * sizeof(float));
    free(a), free(t), free(b);
}

static void test_noise(void **st) {
    (void)st;
    cq_ltx2_geo_params p;
    cq_ltx2_geo_params_default(&p);
    cq_ltx2_geometry g;
    assert_int_equal(cq_ltx2_geometry_make(&p, 64, 96, 17, 24.0, &g), CQ_OK);
    const size_t nv = (size_t)g.video_tokens * g.video_features, na = (size_t)g.audio_frames * g.audio_features;
    float *v = malloc(nv * sizeof(float)), *au = malloc(na * sizeof(float));
    float *rv = malloc(nv * sizeof(float)), *ra = malloc(na * sizeof(float));
    assert_true(v && au && rv && ra);
    const cq_torch_f32_kernel k = cq_torch_f32_kernel_native();
    cq_torch_gen gen, ref;
    cq_torch_gen_seed(&gen, 42);
    cq_torch_gen_seed(&ref, 42);
    assert_int_equal(cq_ltx2_initial_noise(&gen, k, &g, &p, v, au), CQ_OK);
    /* the same generator: all the video values, channel-major, then the audio ones */
    assert_int_equal(cq_torch_randn_f32(&ref, k, rv, nv), CQ_OK);
    assert_int_equal(cq_torch_randn_f32(&ref, k, ra, na), CQ_OK);
    const int64_t HW = (int64_t)g.height * g.width, FHW = HW * g.frames;
    for (int64_t t = 0; t < g.video_tokens; t++)
        for (int c = 0; c < 128; c++) assert_true(v[t * 128 + c] == rv[c * FHW + t]);
    for (int l = 0; l < g.audio_frames; l++)
        for (int c = 0; c < 8; c++)
            for (int m = 0; m < 16; m++)
                assert_true(au[((size_t)l * 8 + c) * 16 + m] == ra[((size_t)c * g.audio_frames + l) * 16 + m]);
    /* both generators are at the same place */
    assert_int_equal(cq_torch_gen_random(&gen), cq_torch_gen_random(&ref));
    free(v), free(au), free(rv), free(ra);
}

static void test_step(void **st) {
    (void)st;
    enum { T = 6, D = 5 };
    tu_rng r;
    tu_rng_seed(&r, 3);
    float x[T * D], v[T * D], x1[T * D];
    tu_fill_normal(&r, x, T * D, 1.0f);
    tu_fill_normal(&r, v, T * D, 1.0f);
    const float s = 0.909375f, sn = 0.725f;
    memcpy(x1, x, sizeof x);
    cq_ltx2_euler_step(x1, v, NULL, T, D, s, sn);
    for (int i = 0; i < T * D; i++) {
        const double want = (double)x[i] + ((double)sn - s) * v[i];
        if (!(fabs(x1[i] - want) < 1e-6)) fail_msg("euler %d: %g, want %g", i, (double)x1[i], want);
    }
    /* sigma_next 0: the x0 of the prediction */
    float x0[T * D], v2[T * D];
    memcpy(x1, x, sizeof x);
    cq_ltx2_euler_step(x1, v, NULL, T, D, s, 0.0f);
    cq_ltx2_velocity_to_x0(x0, x, v, T * D, s);
    for (int i = 0; i < T * D; i++) assert_true(fabsf(x1[i] - x0[i]) < 1e-6f);
    cq_ltx2_x0_to_velocity(v2, x, x0, T * D, s);
    for (int i = 0; i < T * D; i++) assert_true(fabsf(v2[i] - v[i]) < 1e-6f * (1 + fabsf(v[i])));
    /* image to video: the first frame's tokens (mask 0) do not move, get timestep 0, start clean */
    cq_ltx2_geo_params p;
    cq_ltx2_geo_params_default(&p);
    cq_ltx2_geometry g = {.frames = 3, .height = 1, .width = 2, .video_tokens = T, .video_features = D};
    uint8_t mask[T];
    assert_int_equal(cq_ltx2_first_frame_mask(&g, &p, mask), CQ_OK);
    for (int t = 0; t < T; t++) assert_int_equal(mask[t], t >= 2);
    float clean[T * D], noise[T * D], init[T * D], ts[T];
    tu_fill_normal(&r, clean, T * D, 1.0f);
    tu_fill_normal(&r, noise, T * D, 1.0f);
    cq_ltx2_cond_init(init, clean, noise, mask, T, D);
    for (int i = 0; i < T * D; i++) assert_true(init[i] == (i < 2 * D ? clean[i] : noise[i]));
    cq_ltx2_token_timesteps(909.375f, mask, T, ts);
    for (int t = 0; t < T; t++) assert_true(ts[t] == (t < 2 ? 0.0f : 909.375f));
    memcpy(x1, init, sizeof x1);
    cq_ltx2_euler_step(x1, v, mask, T, D, s, sn);
    for (int i = 0; i < T * D; i++) {
        if (i < 2 * D) assert_true(x1[i] == clean[i]);
        else assert_true(fabs(x1[i] - ((double)init[i] + ((double)sn - s) * v[i])) < 1e-6);
    }
    /* ltx-core's form: x0 blended with the clean latent, then Euler on x0, leaves the frozen tokens as they are */
    cq_ltx2_velocity_to_x0(x0, init, v, T * D, s);
    cq_ltx2_blend_x0(x0, clean, mask, T, D);
    for (int i = 0; i < 2 * D; i++) assert_true(x0[i] == clean[i]);
    for (int i = 2 * D; i < T * D; i++) assert_true(x0[i] == init[i] - v[i] * s);
    p.patch = 2;
    tu_expect_err(cq_ltx2_first_frame_mask(&g, &p, mask), CQ_ERR_UNSUPPORTED, "patch sizes 2");
    /* stage 2's re-noise */
    float out[T * D];
    cq_ltx2_noised_state(out, clean, noise, T * D, 0.909375);
    for (int i = 0; i < T * D; i++)
        assert_true(fabs(out[i] - (0.909375 * noise[i] + 0.090625 * clean[i])) < 1e-6);
}

/* ---- golden data from diffusers ------------------------------------------ */
static double jnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("index.json: member %s is missing or not a number", key);
    return v->valuedouble;
}

static double *jarr(const cJSON *o, const char *key, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) fail_msg("index.json: member %s is missing or not an array", key);
    *n = cJSON_GetArraySize(a);
    double *v = malloc((size_t)(*n ? *n : 1) * sizeof(double));
    assert_non_null(v);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsNumber(e)) fail_msg("index.json: %s[%d] is not a number", key, i);
        v[i++] = e->valuedouble;
    }
    return v;
}

static void gold_schedules(const cJSON *root) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "schedules"), *e;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 4) fail_msg("index.json: fewer than 4 schedules");
    cJSON_ArrayForEach(e, arr) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "config");
        if (!cJSON_IsString(nm) || !cJSON_IsString(kind)) fail_msg("index.json: a schedule without name or config");
        cq_flow_config c;
        if (strcmp(kind->valuestring, "distilled") == 0) cq_ltx2_flow_config_distilled(&c);
        else if (strcmp(kind->valuestring, "dev") == 0) cq_ltx2_flow_config_dev(&c);
        else fail_msg("index.json: schedule %s has config %s", nm->valuestring, kind->valuestring);
        const int steps = (int)jnum(e, "steps");
        const int64_t tokens = (int64_t)jnum(e, "video_tokens");
        const cJSON *si = cJSON_GetObjectItemCaseSensitive(e, "sigmas_in");
        double *in = NULL;
        int nin = 0;
        if (si && !cJSON_IsNull(si)) {
            in = jarr(e, "sigmas_in", &nin);
            if (nin != steps) fail_msg("schedule %s: %d sigmas for %d steps", nm->valuestring, nin, steps);
        }
        int ns = 0, nt = 0;
        double *ws = jarr(e, "sigmas", &ns), *wt = jarr(e, "timesteps", &nt);
        if (ns != steps + 1 || nt != steps) fail_msg("schedule %s: %d sigmas, %d timesteps", nm->valuestring, ns, nt);
        cq_flow_schedule s;
        if (cq_ltx2_schedule(&c, in, steps, tokens, &s) != CQ_OK) fail_msg("schedule %s: %s", nm->valuestring, cq_last_error());
        int bad = 0;
        for (int i = 0; i <= steps; i++) bad += s.sigmas[i] != (float)ws[i];
        for (int i = 0; i < steps; i++) bad += s.timesteps[i] != (float)wt[i];
        printf("  golden schedule %s (%d steps, %lld tokens): %d values differ\n", nm->valuestring, steps,
               (long long)tokens, bad);
        if (bad) fail_msg("schedule %s: %d values differ from the reference", nm->valuestring, bad);
        cq_flow_schedule_free(&s);
        free(in), free(ws), free(wt);
    }
}

static void gold_geometry(const cJSON *root) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "geometry"), *e;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 3) fail_msg("index.json: fewer than 3 geometries");
    cq_ltx2_geo_params p;
    cq_ltx2_geo_params_default(&p);
    cJSON_ArrayForEach(e, arr) {
        cq_ltx2_geometry g;
        const int w = (int)jnum(e, "width"), h = (int)jnum(e, "height"), f = (int)jnum(e, "frames");
        const double fps = jnum(e, "fps");
        if (cq_ltx2_geometry_make(&p, w, h, f, fps, &g) != CQ_OK) fail_msg("geometry: %s", cq_last_error());
        printf("  golden geometry %dx%dx%d @ %g: latent %d x %d x %d, audio %d\n", w, h, f, fps, g.frames, g.height,
               g.width, g.audio_frames);
        if (g.frames != (int)jnum(e, "latent_frames") || g.height != (int)jnum(e, "latent_height") ||
            g.width != (int)jnum(e, "latent_width") || g.video_tokens != (int64_t)jnum(e, "video_tokens") ||
            g.audio_frames != (int)jnum(e, "audio_frames") || g.audio_mel != (int)jnum(e, "audio_mel"))
            fail_msg("geometry %dx%dx%d @ %g differs from the reference", w, h, f, fps);
    }
}

static void gold_noise(const cJSON *root) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "noise");
    if (!cJSON_IsObject(e)) fail_msg("index.json: no noise");
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(root, "cpu_capability");
    const bool deflt = cJSON_IsString(cap) && strcmp(cap->valuestring, "DEFAULT") == 0;
    const cq_torch_f32_kernel k = deflt ? CQ_TORCH_F32_LIBM : CQ_TORCH_F32_CEPHES;
    cq_ltx2_geo_params p;
    cq_ltx2_geo_params_default(&p);
    cq_ltx2_geometry g;
    if (cq_ltx2_geometry_make(&p, (int)jnum(e, "width"), (int)jnum(e, "height"), (int)jnum(e, "frames"),
                              jnum(e, "fps"), &g) != CQ_OK)
        fail_msg("noise geometry: %s", cq_last_error());
    cq_st *st;
    if (cq_st_open(GOLD_DIR "/noise.safetensors", &st) != CQ_OK) fail_msg("noise.safetensors: %s", cq_last_error());
    size_t nv = 0, na = 0;
    float *rv = tu_st_floats(st, "video", &nv), *ra = tu_st_floats(st, "audio", &na);
    if (!rv || !ra || nv != (size_t)g.video_tokens * g.video_features || na != (size_t)g.audio_frames * g.audio_features)
        fail_msg("noise.safetensors: video / audio missing or mis-sized");
    float *v = malloc(nv * sizeof(float)), *a = malloc(na * sizeof(float));
    assert_true(v && a);
    cq_torch_gen gen;
    cq_torch_gen_seed(&gen, (uint64_t)jnum(e, "seed"));
    assert_int_equal(cq_ltx2_initial_noise(&gen, k, &g, &p, v, a), CQ_OK);
    size_t bad = 0;
    for (size_t i = 0; i < nv; i++) bad += v[i] != rv[i];
    for (size_t i = 0; i < na; i++) bad += a[i] != ra[i];
    printf("  golden noise (%s kernel): %zu of %zu values differ\n", deflt ? "libm" : "cephes", bad, nv + na);
    if (bad) fail_msg("noise: %zu values differ from torch's", bad);
    free(v), free(a), free(rv), free(ra);
    cq_st_close(st);
}

static void gold_euler(const cJSON *root) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "euler");
    if (!cJSON_IsObject(e)) fail_msg("index.json: no euler trace");
    const int steps = (int)jnum(e, "steps");
    cq_st *st;
    if (cq_st_open(GOLD_DIR "/euler.safetensors", &st) != CQ_OK) fail_msg("euler.safetensors: %s", cq_last_error());
    size_t n = 0, nvv = 0, nxx = 0, nc = 0, nn = 0, nr = 0;
    float *x = tu_st_floats(st, "x", &n), *v = tu_st_floats(st, "v", &nvv), *xs = tu_st_floats(st, "x_steps", &nxx);
    float *clean = tu_st_floats(st, "clean", &nc), *noise = tu_st_floats(st, "noise", &nn);
    float *ren = tu_st_floats(st, "renoised", &nr);
    if (!x || !v || !xs || !clean || !noise || !ren || nvv != n * steps || nxx != n * steps || nc != n || nn != n ||
        nr != n)
        fail_msg("euler.safetensors: a tensor is missing or mis-sized");
    cq_flow_config c;
    cq_ltx2_flow_config_distilled(&c);
    cq_flow_schedule s;
    assert_int_equal(cq_ltx2_schedule(&c, cq_ltx2_distilled_sigmas, steps, (int64_t)n, &s), CQ_OK);
    size_t bad = 0;
    for (int i = 0; i < steps; i++) {
        cq_ltx2_euler_step(x, v + (size_t)i * n, NULL, (int64_t)n, 1, s.sigmas[i], s.sigmas[i + 1]);
        for (size_t j = 0; j < n; j++) bad += x[j] != xs[(size_t)i * n + j];
        memcpy(x, xs + (size_t)i * n, n * sizeof(float)); /* each step from the reference's state */
    }
    float *out = malloc(n * sizeof(float));
    assert_non_null(out);
    cq_ltx2_noised_state(out, clean, noise, n, jnum(e, "noise_scale"));
    size_t bad2 = 0;
    for (size_t j = 0; j < n; j++) bad2 += out[j] != ren[j];
    printf("  golden euler: %zu of %zu stepped values differ; re-noise: %zu of %zu\n", bad, n * steps, bad2, n);
    if (bad || bad2) fail_msg("euler trace: %zu / %zu values differ from the reference", bad, bad2);
    cq_flow_schedule_free(&s);
    free(x), free(v), free(xs), free(clean), free(noise), free(ren), free(out);
    cq_st_close(st);
}

static void test_golden(void **st) {
    (void)st;
    cJSON *root = tu_read_json(GOLD_DIR "/index.json");
    if (!root) {
        printf("  %s is absent (run tools/golden_ltx2_sched.py): skipped\n", GOLD_DIR);
        skip();
    }
    gold_schedules(root);
    gold_geometry(root);
    gold_noise(root);
    gold_euler(root);
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distilled), cmocka_unit_test(test_dev),  cmocka_unit_test(test_geometry),
        cmocka_unit_test(test_pack),      cmocka_unit_test(test_noise), cmocka_unit_test(test_step),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests_name("test_ltx2_sample", tests, NULL, NULL);
}
