/*
 * test_pipeline_ltx2.c — the whole LTX-2.5 text-to-video-and-audio pipeline
 * (src/pipelines/ltx2_pipe.h) against diffusers' LTX2Pipeline on the tiny
 * random folder of tests/golden/ltx2_pipe (tools/golden_ltx2_pipe.py), which
 * the test converts as a user would (`cortiq convert`, f32 weights). Per case
 * (the distilled recipe; a guided run with CFG, STG, modality isolation and
 * rescale):
 *  - the prompt's token ids exactly (strip, BOS, left padding);
 *  - the initial noise bit for bit (torch's CPU generator, video then audio);
 *  - the connectors' rows of the prompt (and of the negative prompt), the
 *    final latents after every step, the decoded frames and the 48 kHz sound.
 * Bounds on the CPU: 1e-4 of each tensor's RMS for the rows and latents, the
 * frames within 2/255 (they pass through every step and the VAE), the sound
 * within max(1e-4, twice the reference's own float32 error against its
 * decoders run in float64 on the same latents: index.json records it; the
 * random bandwidth extender amplifies its input's rounding ~15x, so the
 * reference itself is 2e-4 .. 4e-4 from the float64 sound).
 * On a device: a quarter of the reference's own bf16 error on each output
 * (index.json), the rule of every GPU path.
 * Also the refusals: sizes, frame counts, steps, STG blocks, a long prompt.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "pipelines/ltx2_pipe.h"

#define GOLD_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_pipe"

static tu_backend_arg g_arg;
static cq_backend *g_be;
static cq_cmf *g_cmf;
static cq_ltx2_pipe *g_pipe;
static cJSON *g_index;

static int setup(void **st) {
    (void)st;
    g_index = tu_read_json(GOLD_DIR "/index.json");
    if (!g_index) return 0;
    const char *out = tu_path(tu_tmpdir("ltx2_pipe"), "pipe.cmf");
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(GOLD_DIR "/model", out, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) {
        fprintf(stderr, "convert: %s\n", cq_last_error());
        return -1;
    }
    if (cq_cmf_open(out, &g_cmf) != CQ_OK || tu_backend_create(&g_arg, 0, &g_be) != CQ_OK ||
        cq_ltx2_pipe_open(g_cmf, &g_pipe) != CQ_OK || cq_ltx2_pipe_load_weights(g_pipe, g_be) != CQ_OK) {
        fprintf(stderr, "open: %s\n", cq_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **st) {
    (void)st;
    cq_ltx2_pipe_free(g_pipe);
    cq_backend_free(g_be);
    cq_cmf_close(g_cmf);
    cJSON_Delete(g_index);
    return 0;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v)) fail_msg("index.json: no number %s", k);
    return v->valuedouble;
}

/* The case's options as the reference was called. */
static void case_opts(const cJSON *cs, cq_ltx2_gen_opts *o) {
    cq_ltx2_gen_opts_init(o);
    o->prompt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cs, "prompt"));
    o->negative = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cs, "negative"));
    o->width = (int)num(g_index, "width");
    o->height = (int)num(g_index, "height");
    o->frames = (int)num(g_index, "frames");
    o->fps = num(g_index, "fps");
    o->max_tokens = (int)num(g_index, "max_sequence_length");
    o->steps = (int)num(cs, "steps");
    o->ladder = cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cs, "sigmas"));
    o->seed = (uint64_t)num(cs, "seed");
    o->guidance = num(cs, "guidance_scale");
    o->audio_guidance = num(cs, "audio_guidance_scale");
    o->stg = num(cs, "stg_scale");
    o->audio_stg = num(cs, "audio_stg_scale");
    o->modality = num(cs, "modality_scale");
    o->audio_modality = num(cs, "audio_modality_scale");
    o->rescale = num(cs, "guidance_rescale");
    o->audio_rescale = num(cs, "audio_guidance_rescale");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cs, "stg_blocks"), *e;
    cJSON_ArrayForEach(e, b) o->stg_blocks[o->n_stg_blocks++] = e->valueint;
}

static float *golden(const cq_st *g, const char *name, size_t want) {
    size_t n = 0;
    float *f = tu_st_floats(g, name, &n);
    if (!f || n != want) fail_msg("golden %s: missing or %zu values (expected %zu)", name, n, want);
    return f;
}

/* The bound of output `k`: the CPU's, or a quarter of the reference's bf16 error on a device. */
static double bound(const cJSON *cs, const char *k, double cpu) {
    if (!g_arg.device) return cpu;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "outputs"), k);
    return 0.25 * num(o, "bf16_max_rel");
}

/* max |a - b| / scale, scale the reference's RMS (rms true) or 1. */
static double err(const float *a, const float *ref, size_t n, bool rms) {
    const double sc = rms ? tu_rms(ref, n) : 1.0;
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - ref[i]);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m / sc;
}

static void check(const char *cs_name, const char *what, double e, double tol) {
    printf("  %-9s %-13s %.3g (bound %.3g)\n", cs_name, what, e, tol);
    if (!(e <= tol)) fail_msg("%s: %s off by %.3g (bound %.3g)", cs_name, what, e, tol);
}

static void run_case(const char *name, const cJSON *cs) {
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", GOLD_DIR, name);
    cq_st *g;
    if (cq_st_open(path, &g) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    cq_ltx2_gen_opts o;
    case_opts(cs, &o);
    const int T = o.max_tokens;
    /* tokens */
    const cq_st_tensor *gi = cq_st_find(g, "ids");
    if (!gi || gi->dtype != CQ_ST_I32 || gi->nelem != (uint64_t)T) fail_msg("golden ids missing");
    int32_t *ids = malloc((size_t)T * sizeof *ids), *want = malloc((size_t)T * sizeof *want);
    assert_non_null(ids);
    assert_non_null(want);
    memcpy(want, gi->data, (size_t)T * sizeof *want);
    int n = 0;
    if (cq_ltx2_pipe_tokens(g_pipe, o.prompt, T, &n, ids) != CQ_OK) fail_msg("tokens: %s", cq_last_error());
    assert_int_equal(n, (int)num(cs, "n_tokens"));
    assert_memory_equal(ids, want, (size_t)T * sizeof *ids);
    free(ids), free(want);
    /* the noise */
    cq_ltx2_geometry geo;
    if (cq_ltx2_pipe_geometry(g_pipe, o.width, o.height, o.frames, o.fps, &geo) != CQ_OK)
        fail_msg("geometry: %s", cq_last_error());
    const size_t nv = (size_t)geo.video_tokens * geo.video_features, na = (size_t)geo.audio_frames * geo.audio_features;
    float *noise = golden(g, "noise", nv), *anoise = golden(g, "audio_noise", na);
    float *mv = malloc(nv * sizeof(float)), *ma = malloc(na * sizeof(float));
    assert_non_null(mv);
    assert_non_null(ma);
    if (cq_ltx2_pipe_noise(g_pipe, o.seed, &geo, mv, ma) != CQ_OK) fail_msg("noise: %s", cq_last_error());
    assert_memory_equal(mv, noise, nv * sizeof(float));
    assert_memory_equal(ma, anoise, na * sizeof(float));
    free(mv), free(ma), free(noise), free(anoise);
    /* the prompt rows */
    int D, Da;
    cq_ltx2_pipe_widths(g_pipe, &D, &Da);
    for (int neg = 0; neg < 2; neg++) {
        if (neg && !(o.guidance > 1 || o.audio_guidance > 1)) break;
        float *rv = golden(g, neg ? "neg_ctx" : "ctx", (size_t)T * D);
        float *ra = golden(g, neg ? "neg_audio_ctx" : "audio_ctx", (size_t)T * Da);
        float *cv = malloc((size_t)T * D * sizeof(float)), *ca = malloc((size_t)T * Da * sizeof(float));
        assert_non_null(cv);
        assert_non_null(ca);
        if (cq_ltx2_pipe_encode(g_pipe, neg ? o.negative : o.prompt, T, cv, ca) != CQ_OK)
            fail_msg("encode: %s", cq_last_error());
        check(name, neg ? "neg_ctx" : "ctx", err(cv, rv, (size_t)T * D, true), bound(cs, neg ? "neg_ctx" : "ctx", 1e-4));
        check(name, neg ? "neg_audio_ctx" : "audio_ctx", err(ca, ra, (size_t)T * Da, true),
              bound(cs, neg ? "neg_audio_ctx" : "audio_ctx", 1e-4));
        free(rv), free(ra), free(cv), free(ca);
    }
    /* the sampler */
    cq_ltx2_result r;
    if (cq_ltx2_pipe_generate(g_pipe, &o, &r) != CQ_OK) fail_msg("%s: generate: %s", name, cq_last_error());
    float *rl = golden(g, "latents", nv);
    const double e_lat = err(r.latents, rl, nv, true);
    check(name, "latents", e_lat, bound(cs, "latents", 1e-4));
    free(rl);
    /* the frames: planar [3][F][H][W] against [F][H][W][3] */
    float *fr = NULL;
    if (cq_ltx2_pipe_decode_video(g_pipe, &r, &fr) != CQ_OK) fail_msg("decode video: %s", cq_last_error());
    const size_t plane = (size_t)r.width * r.height, nf = plane * r.frames;
    float *rf = golden(g, "frames", 3 * nf);
    double ef = 0;
    for (size_t f = 0; f < (size_t)r.frames; f++)
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++) {
                const double d = fabs((double)fr[(size_t)c * nf + f * plane + i] - rf[(f * plane + i) * 3 + c]);
                if (!(d <= ef)) ef = isnan(d) ? INFINITY : d;
            }
    check(name, "frames", ef, bound(cs, "frames", 2.0 / 255));
    free(fr);
    /* the decoder alone on the reference's own de-normalised latents (what the frames' error is made of) */
    const int C = geo.video_features;
    float *vin = golden(g, "vae_in", (size_t)C * geo.frames * geo.height * geo.width);
    if (cq_ltx2_pipe_decode_latents(g_pipe, vin, geo.frames, geo.height, geo.width, &fr) != CQ_OK)
        fail_msg("decode latents: %s", cq_last_error());
    ef = 0;
    for (size_t f = 0; f < (size_t)r.frames; f++)
        for (size_t i = 0; i < plane; i++)
            for (int c = 0; c < 3; c++) {
                const double d = fabs((double)fr[(size_t)c * nf + f * plane + i] - rf[(f * plane + i) * 3 + c]);
                if (!(d <= ef)) ef = isnan(d) ? INFINITY : d;
            }
    check(name, "frames/vae", ef, bound(cs, "frames", 2.0 / 255));
    free(fr), free(rf), free(vin);
    /* the sound: the mel, the vocoder on the reference's mel (its own float32 noise, amplified by the random
     * bandwidth extender: test_ltx2_audio measures it against a float64 loop), and the whole */
    float *mel = NULL, *wav = NULL, *wv = NULL;
    int Tm = 0, ch = 0, rate = 0;
    if (cq_ltx2_pipe_decode_mel(g_pipe, &r, &mel, &Tm) != CQ_OK) fail_msg("decode mel: %s", cq_last_error());
    const size_t nm = (size_t)2 * Tm * 8;
    float *rm = golden(g, "mel", nm);
    check(name, "mel", err(mel, rm, nm, true), bound(cs, "mel", 1e-4));
    int64_t ns = 0, nv2 = 0;
    if (cq_ltx2_pipe_vocode(g_pipe, rm, Tm, &wv, &nv2, &ch, &rate) != CQ_OK) fail_msg("vocode: %s", cq_last_error());
    float *ra = golden(g, "audio", (size_t)nv2 * ch);
    const double e_voc = err(wv, ra, (size_t)nv2 * ch, false);
    printf("  %-9s %-13s %.3g (the vocoder on the reference's mel)\n", name, "audio/vocoder", e_voc);
    if (cq_ltx2_pipe_decode_audio(g_pipe, &r, &wav, &ns, &ch, &rate) != CQ_OK)
        fail_msg("decode audio: %s", cq_last_error());
    assert_int_equal(rate, 48000);
    assert_int_equal(ch, 2);
    assert_int_equal(ns, nv2);
    /* the CPU bound: max(1e-4, twice the reference's own float32 error against float64), test_ltx2_audio's rule */
    const cJSON *ao = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "outputs"), "audio");
    const cJSON *f64 = cJSON_GetObjectItemCaseSensitive(ao, "f32_vs_f64_max");
    const double own = cJSON_IsNumber(f64) ? f64->valuedouble : 0;
    if (!cJSON_IsNumber(f64)) printf("  (index.json has no f32_vs_f64_max for the sound: the bound is 1e-4)\n");
    check(name, "audio", err(wav, ra, (size_t)ns * ch, false), bound(cs, "audio", fmax(1e-4, 2 * own)));
    free(wav), free(wv), free(ra), free(mel), free(rm);
    cq_st_close(g);
    cq_ltx2_result_free(&r);
}

static void test_refusals(void **st) {
    (void)st;
    if (!g_index) skip();
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g_index, "cases"), "guided");
    cq_ltx2_gen_opts o;
    case_opts(cs, &o);
    assert_int_equal(cq_ltx2_pipe_check(g_pipe, &o), CQ_OK);
    cq_ltx2_gen_opts b = o;
    b.frames = 10;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "8k + 1");
    b = o;
    b.width = 48;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "multiple of 32");
    b = o;
    b.steps = 5;
    b.ladder = true;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "ladder");
    b = o;
    b.stg_blocks[0] = 7;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "STG block 7");
    b = o;
    b.n_stg_blocks = 0;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "no block");
    b = o;
    b.prompt = "a long prompt that the tiny tokenizer turns into far more than thirty two tokens, surely";
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "at most 32");
    b = o;
    b.negative = "an equally long negative prompt that cannot fit in thirty two tokens at all";
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "negative prompt");
    b = o;
    b.max_tokens = 36;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "registers");
    b = o;
    b.guidance = NAN;
    tu_expect_err(cq_ltx2_pipe_check(g_pipe, &b), CQ_ERR_INVALID_ARG, "guidance");
}

static void test_golden(void **st) {
    (void)st;
    if (!g_index) {
        printf("  %s is absent (run tools/golden_ltx2_pipe.py): skipped\n", GOLD_DIR);
        skip();
    }
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g_index, "cases"), *cs;
    int k = 0;
    cJSON_ArrayForEach(cs, cases) {
        run_case(cs->string, cs);
        k++;
    }
    assert_int_equal(k, 2);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_pipeline_ltx2", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden), cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests_name(g_arg.device ? "test_pipeline_ltx2 (device)" : "test_pipeline_ltx2 (host)",
                                       tests, setup, teardown);
}
