/*
 * test_pipeline_qi21_cond.c — Qwen-Image-2.1 with condition pictures against
 * diffusers' QwenImage21Pipeline (tests/golden/pipeline_qi21_cond, made by
 * tools/golden_pipeline_qi21_cond.py with the weights of
 * tests/golden/pipeline_qi21/tiny_pipeline.cmf.gz).
 *
 * Per case (one RGB picture; an RGBA one with true CFG; both), stage by
 * stage, each stage fed cortiq's own previous one:
 *   - each picture made RGBA and resized (PIL Lanczos, premultiplied): the
 *     reference's bytes exactly;
 *   - the processor's grids exact, its pixel values within 1e-6;
 *   - the template's ids with the pads expanded: the reference's;
 *   - the vision tower's rows and deepstack rows, the text rows after the
 *     drop (and which are pads), the packed condition latents:
 *     max|err| <= 1e-4 of their RMS (CPU);
 *   - the latents after every step and the final ones: <= 1e-4 of RMS (CPU);
 *     the picture within 1/255 (CPU);
 *   - on a device: the final latents' and the picture's RMS error within a
 *     quarter of the reference's own bfloat16 error (cases.json);
 *   - a phased residency plan (the text and vision towers released before
 *     the denoiser) and one of compact weights: the same bits.
 * The refusals (too many pictures, a missing or corrupt file, a placeholder
 * in the prompt, a picture the processor would enlarge, bad options) run
 * without the golden folder too; without it the program ends with 77.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/gz.h"
#include "format/cmf.h"
#include "format/file_read.h"
#include "format/safetensors.h"
#include "image/image_read.h"
#include "image/qwen_image_proc.h"
#include "image/resample.h"
#include "pipelines/png_write.h"
#include "pipelines/qi21_pipe_impl.h"
#include "testutil.h"

#define GOLDEN CQ_SOURCE_DIR "/tests/golden/pipeline_qi21_cond"
#define PACK_GZ CQ_SOURCE_DIR "/tests/golden/pipeline_qi21/tiny_pipeline.cmf.gz"
#define RES 64
#define MIN_PIXELS 1024

static tu_backend_arg g_backend;
static char g_pack[1200], g_bad[1200];
static bool g_have_golden;
static cq_cmf *g_cmf;
static cq_backend *g_be;
static cq_qi21_pipe *g_pipe;

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("pipeline_qi21_cond");
    if (!dir) return -1;
    snprintf(g_pack, sizeof g_pack, "%s/tiny_pipeline.cmf", dir);
    snprintf(g_bad, sizeof g_bad, "%s/bad.png", dir);
    uint8_t *raw = NULL;
    size_t rl = 0;
    if (cq_file_read_gz(PACK_GZ, (size_t)1 << 30, &raw, &rl) != CQ_OK) return -1;
    FILE *f = fopen(g_pack, "wb");
    if (!f || fwrite(raw, 1, rl, f) != rl) {
        if (f) fclose(f);
        cq_free(raw);
        return -1;
    }
    cq_free(raw);
    if (fclose(f) != 0) return -1;
    f = fopen(g_bad, "wb");
    if (!f) return -1;
    fputs("\x89PNG\r\n\x1a\nnot really", f);
    if (fclose(f) != 0) return -1;
    if (cq_cmf_open(g_pack, &g_cmf) != CQ_OK) return -1;
    if (tu_backend_create(&g_backend, 0, &g_be) != CQ_OK) return -1;
    if (cq_qi21_pipe_load(g_cmf, g_be, &g_pipe) != CQ_OK) {
        fprintf(stderr, "load: %s\n", cq_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_qi21_pipe_free(g_pipe);
    cq_backend_free(g_be);
    cq_cmf_close(g_cmf);
    return 0;
}

static const cq_st_tensor *tensor(const cq_st *st, const char *name, cq_st_dtype dt) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) fail_msg("expected tensor %s missing", name);
    if (t->dtype != dt) fail_msg("tensor %s: dtype %d, expected %d", name, (int)t->dtype, (int)dt);
    return t;
}

static int32_t i32_at(const cq_st_tensor *t, uint64_t i) {
    int32_t v;
    memcpy(&v, t->data + 4 * i, 4);
    return v;
}

static float *floats(const cq_st *st, const char *name, size_t *n) {
    float *v = tu_st_floats(st, name, n);
    if (!v) fail_msg("expected f32 tensor %s missing", name);
    return v;
}

/* max|got - want| / RMS(want) over n, printed; CPU bound 1e-4. */
static double check_rel(const char *what, const char *c, const float *got, const float *want, size_t n) {
    const double e = tu_max_rel(got, want, n, tu_rms(want, n));
    print_message("  %-9s %-16s %6zu values: max err %.2e of RMS\n", c, what, n, e);
    if (!g_backend.device) assert_true(e <= 1e-4);
    else assert_true(isfinite(e));
    return e;
}

static double rel_rms(const float *got, const float *want, size_t n) {
    double se = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        se += d * d;
        ss += (double)want[i] * want[i];
    }
    return sqrt(se / (ss > 0 ? ss : 1e-30));
}

static double num(const cJSON *o, const char *k) {
    const cJSON *j = cJSON_GetObjectItem(o, k);
    if (!cJSON_IsNumber(j)) fail_msg("cases.json: no number %s", k);
    return j->valuedouble;
}

/* ---- the pictures ---- */
static void test_pictures(void **state) {
    (void)state;
    if (!g_have_golden) skip();
    cq_st *exp;
    assert_int_equal(cq_st_open(GOLDEN "/expected.safetensors", &exp), CQ_OK);
    static const char *const pics[] = {"rgb", "rgba"};
    for (int i = 0; i < 2; i++) {
        char path[1200], key[64];
        snprintf(path, sizeof path, "%s/cond_%s.png", GOLDEN, pics[i]);
        cq_image8 img = {0};
        assert_int_equal(cq_image_read_rgba(path, &img), CQ_OK);
        assert_int_equal(img.channels, 4);
        cq_qi21_picture p;
        assert_int_equal(cq_qi21_picture_prepare(img.pixels, img.width, img.height, RES * RES, &p), CQ_OK);
        snprintf(key, sizeof key, "%s.resized", pics[i]);
        const cq_st_tensor *t = tensor(exp, key, CQ_ST_U8);
        assert_int_equal(t->ndim, 3);
        assert_int_equal(t->shape[0], p.h);
        assert_int_equal(t->shape[1], p.w);
        assert_int_equal(t->shape[2], 4);
        int worst = 0;
        size_t bad = 0;
        for (size_t k = 0; k < (size_t)p.w * p.h * 4; k++) {
            const int d = abs((int)p.rgba[k] - (int)t->data[k]);
            if (d > worst) worst = d;
            bad += d != 0;
        }
        print_message("  picture %-4s %dx%d -> %dx%d RGBA: %zu bytes differ, max %d\n", pics[i], img.width,
                      img.height, p.w, p.h, bad, worst);
        assert_int_equal(worst, 0);
        /* the VAE's planes: 2 u / 255 - 1 of the same bytes */
        const size_t n = (size_t)p.w * p.h;
        for (size_t k = 0; k < n; k++)
            for (size_t c = 0; c < 4; c++)
                assert_true(p.vae[c * n + k] == 2.0f * ((float)p.rgba[k * 4 + c] / 255.0f) - 1.0f);
        cq_qi21_picture_free(&p);
        cq_image8_free(&img);
    }
    cq_st_close(exp);
}

/* ---- one case, stage by stage ---- */
typedef struct steps_seen {
    float *lat[8];
    int n, tokens, channels;
} steps_seen;

static void on_latents(int step, const float *x, int tokens, void *user) {
    steps_seen *s = user;
    if (s->n >= 8 || step != s->n + 1) return;
    s->lat[s->n] = malloc((size_t)tokens * s->channels * sizeof(float));
    if (!s->lat[s->n]) return;
    memcpy(s->lat[s->n], x, (size_t)tokens * s->channels * sizeof(float));
    s->tokens = tokens;
    s->n++;
}

static void opts_of(const cJSON *c, const char *const *files, int n_files, cq_qi21_gen_opts *o) {
    const cJSON *neg = cJSON_GetObjectItem(c, "negative");
    const cJSON *rq = cJSON_GetObjectItem(c, "requested_hw");
    const cJSON *rh = cJSON_GetArrayItem(rq, 0), *rw = cJSON_GetArrayItem(rq, 1);
    *o = (cq_qi21_gen_opts){.prompt = cJSON_GetObjectItem(c, "prompt")->valuestring,
                            .negative = cJSON_IsString(neg) ? neg->valuestring : NULL,
                            .width = cJSON_IsNumber(rw) ? rw->valueint : 0,
                            .height = cJSON_IsNumber(rh) ? rh->valueint : 0,
                            .steps = (int)num(c, "steps"), .seed = (uint64_t)num(c, "seed"),
                            .guidance = num(c, "cfg"), .images = files, .n_images = n_files,
                            .output_resolution = RES, .vl_min_pixels = MIN_PIXELS};
}

/* The text rows of a prompt against <c>.<pre>embeds and <c>.<pre>image_pad_mask. */
static void check_embeds(const cq_st *exp, const char *name, const char *pre, const cq_qi21_cond_inputs *in,
                         const float *vision, const float *deep, const char *prompt) {
    char key[96];
    float *emb = NULL;
    uint8_t *mask = NULL;
    int rows = 0;
    assert_int_equal(cq_qi21_cond_encode(g_pipe, in, vision, deep, prompt, &emb, &rows, &mask), CQ_OK);
    size_t n = 0;
    snprintf(key, sizeof key, "%s.%sembeds", name, pre);
    float *want = floats(exp, key, &n);
    assert_int_equal(n, (size_t)rows * g_pipe->tcfg.hidden);
    check_rel(*pre ? "neg embeds" : "embeds", name, emb, want, n);
    snprintf(key, sizeof key, "%s.%simage_pad_mask", name, pre);
    const cq_st_tensor *pm = tensor(exp, key, CQ_ST_U8);
    assert_int_equal(pm->nelem, (uint64_t)rows);
    assert_memory_equal(mask, pm->data, (size_t)rows);
    snprintf(key, sizeof key, "%s.%sembeds_mask", name, pre);
    const cq_st_tensor *em = tensor(exp, key, CQ_ST_I32);
    for (int i = 0; i < rows; i++) assert_int_equal(i32_at(em, (uint64_t)i), 1);
    free(want);
    cq_free(emb);
    cq_free(mask);
}

static void run_case(const cq_st *exp, const cJSON *root, const char *name, const cJSON *c) {
    char key[96], files[2][1200];
    const char *fp[2];
    const cJSON *imgs = cJSON_GetObjectItem(c, "images");
    const int n_files = cJSON_GetArraySize(imgs);
    assert_true(n_files >= 1 && n_files <= 2);
    for (int i = 0; i < n_files; i++) {
        const char *pic = cJSON_GetArrayItem(imgs, i)->valuestring;
        const char *file = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pictures"), pic),
                                               "file")->valuestring;
        snprintf(files[i], sizeof files[i], "%s/%s", GOLDEN, file);
        fp[i] = files[i];
    }
    cq_qi21_gen_opts o;
    opts_of(c, fp, n_files, &o);

    /* the pictures, the output size, the processor */
    cq_qi21_cond_inputs in;
    cq_status s = cq_qi21_cond_inputs_make(g_pipe, &o, &in);
    if (s != CQ_OK) fail_msg("%s: inputs: %s", name, cq_last_error());
    assert_int_equal(in.width, (int)num(c, "width"));
    assert_int_equal(in.height, (int)num(c, "height"));
    snprintf(key, sizeof key, "%s.image_grid_thw", name);
    const cq_st_tensor *g = tensor(exp, key, CQ_ST_I32);
    assert_int_equal(g->nelem, (uint64_t)3 * n_files);
    for (int i = 0; i < n_files; i++)
        for (int a = 0; a < 3; a++) assert_int_equal(in.pic[i].grid[a], i32_at(g, (uint64_t)(3 * i + a)));
    /* pixel values: the case's own, or (case "two") those of the single-picture cases in order */
    double pv_err = 0;
    int64_t row0 = 0;
    for (int i = 0; i < n_files; i++) {
        const char *pic = cJSON_GetArrayItem(imgs, i)->valuestring;
        snprintf(key, sizeof key, "%s.pixel_values", n_files == 1 ? name : strcmp(pic, "rgb") == 0 ? "rgb"
                                                                                                   : "rgba_cfg");
        size_t n = 0;
        float *want = floats(exp, key, &n);
        assert_int_equal(n, (size_t)in.pic[i].n_patches * 1536);
        for (size_t k = 0; k < n; k++) {
            const double d = fabs((double)in.pic[i].pixel_values[k] - want[k]);
            if (!(d <= pv_err)) pv_err = d;
        }
        free(want);
        row0 += in.pic[i].n_patches;
    }
    print_message("  %-9s pixel values     %6lld rows: max abs err %.2e\n", name, (long long)row0, pv_err);
    assert_true(pv_err <= 1e-6);

    /* the template's ids */
    int32_t *ids = NULL;
    int n_ids = 0;
    assert_int_equal(cq_qi21_cond_tokens(g_pipe, &in, o.prompt, &ids, &n_ids), CQ_OK);
    snprintf(key, sizeof key, "%s.input_ids", name);
    const cq_st_tensor *ti = tensor(exp, key, CQ_ST_I32);
    assert_int_equal(ti->nelem, (uint64_t)n_ids);
    for (int i = 0; i < n_ids; i++) assert_int_equal(ids[i], i32_at(ti, (uint64_t)i));
    cq_free(ids);

    /* the vision tower */
    float *vision = NULL, *deep = NULL;
    assert_int_equal(cq_qi21_cond_vision(g_pipe, &in, &vision, &deep), CQ_OK);
    size_t n = 0;
    snprintf(key, sizeof key, "%s.vision", name);
    float *want = floats(exp, key, &n);
    assert_int_equal(n, (size_t)in.n_pad_rows * g_pipe->vcfg.out_hidden);
    check_rel("vision", name, vision, want, n);
    free(want);
    for (int k = 0; k < g_pipe->vcfg.n_deepstack; k++) {
        snprintf(key, sizeof key, "%s.deepstack_%d", name, k);
        want = floats(exp, key, &n);
        assert_int_equal(n, (size_t)in.n_pad_rows * g_pipe->vcfg.out_hidden);
        check_rel("deepstack", name, deep + (size_t)k * n, want, n);
        free(want);
    }

    /* the text rows, the negative prompt's with the same pictures */
    check_embeds(exp, name, "", &in, vision, deep, o.prompt);
    if (o.negative && o.guidance > 1) check_embeds(exp, name, "neg_", &in, vision, deep, o.negative);
    cq_free(vision);
    cq_free(deep);

    /* the condition latents */
    float *cond = NULL;
    assert_int_equal(cq_qi21_cond_latents(g_pipe, &in, &cond), CQ_OK);
    snprintf(key, sizeof key, "%s.cond_latents", name);
    want = floats(exp, key, &n);
    assert_int_equal(n, (size_t)in.n_cond_tokens * g_pipe->dcfg.in_channels);
    check_rel("cond latents", name, cond, want, n);
    free(want);
    cq_free(cond);
    cq_qi21_cond_inputs_free(&in);

    /* the whole pipeline: every step's latents, the final ones, the picture */
    steps_seen seen = {.channels = g_pipe->dcfg.in_channels};
    o.on_latents = on_latents;
    o.user = &seen;
    cq_image_result r;
    s = cq_qi21_pipe_generate(g_pipe, &o, &r);
    if (s != CQ_OK) fail_msg("%s: generate: %s", name, cq_last_error());
    assert_int_equal(seen.n, o.steps);
    for (int i = 0; i < seen.n; i++) {
        snprintf(key, sizeof key, "%s.step_%d", name, i);
        want = floats(exp, key, &n);
        assert_int_equal(n, (size_t)seen.tokens * seen.channels);
        char what[32];
        snprintf(what, sizeof what, "step %d", i + 1);
        check_rel(what, name, seen.lat[i], want, n);
        free(want);
        free(seen.lat[i]);
    }
    snprintf(key, sizeof key, "%s.latents", name);
    want = floats(exp, key, &n);
    assert_int_equal(n, (size_t)r.tokens * r.latent_channels);
    check_rel("latents", name, r.latents, want, n);
    const double lat_rms = rel_rms(r.latents, want, n);
    free(want);
    snprintf(key, sizeof key, "%s.image", name);
    want = floats(exp, key, &n);
    assert_int_equal(r.width, (int)num(c, "width"));
    assert_int_equal(r.height, (int)num(c, "height"));
    assert_int_equal(n, (size_t)r.width * r.height * r.channels);
    int worst = 0;
    tu_image_err(r.image, r.channels, r.width, r.height, want, &worst);
    /* the picture's RMS error in [0, 1] */
    double se = 0, ss = 0;
    const size_t px = (size_t)r.width * r.height;
    for (size_t k = 0; k < px; k++)
        for (int ch = 0; ch < r.channels; ch++) {
            double v = r.image[(size_t)ch * px + k] * 0.5 + 0.5;
            v = v < 0 ? 0 : v > 1 ? 1 : v;
            const double w = want[k * (size_t)r.channels + (size_t)ch];
            se += (v - w) * (v - w);
            ss += w * w;
        }
    free(want);
    const double img_rms = sqrt(se / ss);
    print_message("  %-9s %dx%d, %d steps%s: latents rel RMS err %.2e, picture rel RMS err %.2e, max %d/255\n",
                  name, r.width, r.height, o.steps, o.negative && o.guidance > 1 ? ", CFG" : "", lat_rms, img_rms,
                  worst);
    if (g_backend.device) {
        const double lb = num(c, "bf16_latents_rel_rms") / 4, ib = num(c, "bf16_image_rel_rms") / 4;
        print_message("  %-9s device bounds (a quarter of the reference's bf16 error): latents %.2e, picture %.2e\n",
                      name, lb, ib);
        assert_true(lat_rms <= lb);
        assert_true(img_rms <= ib);
    } else {
        assert_true(worst <= 1);
    }
    /* a phased plan (the text tower and the vision tower released before the denoiser, the denoiser before the
     * decode) and one with compact weights give the same bits */
    o.on_latents = NULL;
    const cq_resid_need tight = {.act = {0, 0, 1}};
    for (int level = 2; level <= 5; level += 3) {
        cq_resid_plan plan;
        assert_int_equal(cq_resid_plan_at(&tight, level, 0, &plan), CQ_OK);
        assert_false(plan.keep[CQ_RESID_DENOISE][CQ_PART_TEXT]);
        assert_int_equal(cq_qi21_pipe_set_plan(g_pipe, &plan), CQ_OK);
        cq_image_result r2;
        assert_int_equal(cq_qi21_pipe_generate(g_pipe, &o, &r2), CQ_OK);
        assert_int_equal(r2.tokens, r.tokens);
        assert_memory_equal(r2.latents, r.latents, (size_t)r.tokens * r.latent_channels * sizeof(float));
        assert_false(cq_qi21_pipe_residency(g_pipe)->bound[CQ_PART_TEXT]);
        assert_null(g_pipe->vis);
        cq_image_result_free(&r2);
    }
    assert_int_equal(cq_qi21_pipe_set_plan(g_pipe, NULL), CQ_OK);
    cq_image_result_free(&r);
}

static void test_parity(void **state) {
    (void)state;
    if (!g_have_golden) skip();
    size_t len;
    char *js = (char *)tu_read_file(GOLDEN "/cases.json", &len);
    assert_non_null(js);
    cJSON *root = cJSON_ParseWithLength(js, len);
    free(js);
    assert_non_null(root);
    /* the settings this file fixes */
    assert_int_equal((int)num(root, "min_pixels"), MIN_PIXELS);
    assert_int_equal((int)num(root, "drop_rows"), g_pipe->drop_idx);
    assert_int_equal((int)num(root, "image_pad_id"), g_pipe->image_pad);
    assert_string_equal(cJSON_GetObjectItem(root, "rgba_to_rgb")->valuestring, "drop_alpha");
    assert_string_equal(cJSON_GetObjectItem(root, "image_label")->valuestring, "Picture ");
    cq_st *exp;
    assert_int_equal(cq_st_open(GOLDEN "/expected.safetensors", &exp), CQ_OK);
    int cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, cases++) {
        assert_int_equal((int)num(c, "output_resolution"), RES);
        run_case(exp, root, c->string, c);
    }
    assert_int_equal(cases, 3);
    cq_st_close(exp);
    cJSON_Delete(root);
}

/* ---- what is refused, before any work ---- */
static void test_refusals(void **state) {
    (void)state;
    char a[1200];
    snprintf(a, sizeof a, "%s/cond_rgb.png", GOLDEN);
    if (access(a, R_OK) != 0) { /* without the golden: a picture of our own */
        const char *dir = tu_tmpdir("pipeline_qi21_cond");
        snprintf(a, sizeof a, "%s/own.png", dir);
        uint8_t px[80 * 48 * 3];
        for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
        assert_int_equal(cq_png_write(a, px, 80, 48, 3, NULL, 0), CQ_OK);
    }
    const char *one[] = {a};
    cq_qi21_gen_opts o = {.prompt = "x", .steps = 2, .seed = 1, .guidance = 1, .images = one, .n_images = 1,
                          .output_resolution = RES, .vl_min_pixels = MIN_PIXELS};
    assert_int_equal(cq_qi21_pipe_check(g_pipe, &o), CQ_OK);
    /* the processor would enlarge a 96x64 picture below its class default's 56^2 bound? no: 6144 >= 3136; an
     * area of 32^2 (a 32x32 picture) is below it */
    o.output_resolution = 32;
    o.vl_min_pixels = 0;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "--vl-min-pixels");
    o.output_resolution = RES;
    o.vl_min_pixels = MIN_PIXELS;
    const char *nine[9];
    for (int i = 0; i < 9; i++) nine[i] = a;
    o.images = nine;
    o.n_images = 9;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "at most 8 condition pictures");
    const char *missing[] = {a, CQ_SOURCE_DIR "/tests/golden/no_such_picture.png"};
    o.images = missing;
    o.n_images = 2;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_MISSING, "condition picture 2");
    const char *bad[] = {g_bad};
    o.images = bad;
    o.n_images = 1;
    assert_int_not_equal(cq_qi21_pipe_check(g_pipe, &o), CQ_OK);
    assert_non_null(strstr(cq_last_error(), "condition picture 1"));
    o.images = one;
    o.prompt = "a <|vision_start|> b";
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "placeholders of the condition pictures");
    o.prompt = "x";
    o.negative = "<|image_pad|>";
    o.guidance = 4;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "the negative prompt");
    o.negative = NULL;
    o.guidance = 1;
    o.output_resolution = 8;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "output resolution");
    o.output_resolution = RES;
    o.vl_min_pixels = (int64_t)1 << 40;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "lower pixel bound");
    o.vl_min_pixels = MIN_PIXELS;
    o.width = 48; /* not a multiple of 32 */
    o.height = 64;
    tu_expect_err(cq_qi21_pipe_check(g_pipe, &o), CQ_ERR_INVALID_ARG, "");
    o.width = 0;
    o.height = 0;
    o.n_images = 1;
    o.images = NULL;
    assert_int_not_equal(cq_qi21_pipe_check(g_pipe, &o), CQ_OK);
    /* the size from the picture (80x48 at 64^2: 96x64), each side on its own */
    o.images = one;
    cq_qi21_cond_inputs in;
    assert_int_equal(cq_qi21_cond_inputs_make(g_pipe, &o, &in), CQ_OK);
    assert_int_equal(in.width, 96);
    assert_int_equal(in.height, 64);
    assert_int_equal(in.n_pad_rows, 6);
    assert_int_equal(in.n_cond_tokens, 24);
    cq_qi21_cond_inputs_free(&in);
    o.width = 64;
    assert_int_equal(cq_qi21_cond_inputs_make(g_pipe, &o, &in), CQ_OK);
    assert_int_equal(in.width, 64);
    assert_int_equal(in.height, 64);
    cq_qi21_cond_inputs_free(&in);
}

/* PIL's premultiplied RGBA resize and the RGB rules on hand-made pixels. */
static void test_rgba_rules(void **state) {
    (void)state;
    const uint8_t px[2 * 4] = {200, 100, 50, 128, 10, 20, 30, 0};
    uint8_t rgb[6];
    cq_rgba_to_rgb_pixels(px, 2, CQ_RGBA_DROP_ALPHA, rgb);
    assert_memory_equal(rgb, ((uint8_t[]){200, 100, 50, 10, 20, 30}), 6);
    cq_rgba_to_rgb_pixels(px, 2, CQ_RGBA_OVER_WHITE, rgb);
    /* 200 * 128/255 + 255 * 127/255 = 227.4..., the transparent pixel white */
    assert_true(abs((int)rgb[0] - 228) <= 1);
    assert_memory_equal(rgb + 3, ((uint8_t[]){255, 255, 255}), 3);
    /* a size kept is a copy; an opaque picture resizes as its RGB does */
    uint8_t src[4 * 4 * 4], dst[2 * 2 * 4], src3[4 * 4 * 3], dst3[2 * 2 * 3];
    for (int i = 0; i < 16; i++) {
        for (int c = 0; c < 3; c++) src[4 * i + c] = src3[3 * i + c] = (uint8_t)(i * 13 + c * 40);
        src[4 * i + 3] = 255;
    }
    uint8_t same[sizeof src];
    assert_int_equal(cq_pil_resize_rgba(src, 4, 4, same, 4, 4), CQ_OK);
    assert_memory_equal(same, src, sizeof src);
    assert_int_equal(cq_pil_resize_rgba(src, 4, 4, dst, 2, 2), CQ_OK);
    assert_int_equal(cq_resample_u8(CQ_RESAMPLE_PIL_LANCZOS, src3, 4, 4, 3, dst3, 2, 2), CQ_OK);
    for (int i = 0; i < 4; i++) {
        for (int c = 0; c < 3; c++) assert_int_equal(dst[4 * i + c], dst3[3 * i + c]);
        assert_int_equal(dst[4 * i + 3], 255);
    }
    assert_int_not_equal(cq_pil_resize_rgba(src, 4, 4, dst, 0, 2), CQ_OK);
    assert_int_not_equal(cq_pil_resize_rgba(NULL, 4, 4, dst, 2, 2), CQ_OK);
}

int main(int argc, char **argv) {
    if (!cq_gz_available()) {
        printf("test_pipeline_qi21_cond: skipped: this build has no zlib to read the gzipped golden pack\n");
        return TU_SKIP;
    }
    const int rc = tu_backend_select("test_pipeline_qi21_cond", argc, argv, &g_backend);
    if (rc >= 0) return rc;
    g_have_golden = access(GOLDEN "/cases.json", R_OK) == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rgba_rules),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pictures),
        cmocka_unit_test(test_parity),
    };
    const size_t n = sizeof tests / sizeof *tests - (g_have_golden ? 0 : 2);
    const int failed = _cmocka_run_group_tests("test_pipeline_qi21_cond", tests, n, setup, teardown);
    if (failed == 0 && !g_have_golden) {
        printf("test_pipeline_qi21_cond: the parity with the reference skipped: %s is absent "
               "(tools/golden_pipeline_qi21_cond.py makes it)\n", GOLDEN);
        return TU_SKIP;
    }
    return failed;
}
