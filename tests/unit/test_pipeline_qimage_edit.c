/*
 * test_pipeline_qimage_edit.c — the Qwen-Image editing pipelines (Edit,
 * Edit-Plus 2509 and 2511) against diffusers' QwenImageEditPipeline and
 * QwenImageEditPlusPipeline (tests/golden/qimage_edit_pipeline,
 * tools/golden_pipeline_qwenimage_edit.py).
 *
 * The golden folder holds three tiny random pipeline folders sharing their
 * weights (Edit; Edit-Plus; Edit-Plus with zero_cond_t, as 2511), saved in
 * bfloat16 and run by the reference in float32 with small picture areas
 * (cases.json: vae_area, vl_area), and the input PNG files. Each run converts
 * the folders with `cortiq convert` (f32 weights) and runs every case:
 *   - the pictures after the pipeline's Lanczos resizes and the processor's
 *     bicubic resize: the reference's bytes (the largest difference is
 *     printed; at most 1 level);
 *   - the processor's grids and the template's ids with the pads expanded:
 *     the reference's;
 *   - the vision tower's rows, the text rows after the 64 dropped and the
 *     packed condition latents: max|err| <= 1e-4 of their RMS (CPU);
 *   - the noise, the latents after every step and the final latents: within
 *     1e-4 of their RMS (CPU), a device within a quarter of the reference's
 *     own bfloat16 error; the picture within 2/255 (CPU), a device within a
 *     quarter of the reference's bf16 error.
 * The template, the default sizes and the refusals are also checked on the
 * text-to-image golden's folder given the edit archs (its text encoder has a
 * vision tower, its VAE an encoder), so they run before the edit golden is
 * there: token counts, pad runs, an RGBA file reading as its RGB, too many or
 * no pictures, a missing or corrupt file, placeholders in the prompt, bad
 * areas and sizes, pictures to a text-to-image pack; the 3-D RoPE option
 * changing the result; the processor config's keys and bounds. Without the edit golden
 * the program ends with 77 (skipped) once those pass.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/gz.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "image/qwen_image_proc.h"
#include "models/qwen25vl_vision.h"
#include "pipelines/latents.h"
#include "pipelines/png_write.h"
#include "pipelines/qimage_pipe.h"
#include "pipelines/residency.h"
#include "tokenizer/tokenizer.h"
#include "testutil.h"

#define GOLDEN CQ_SOURCE_DIR "/tests/golden/qimage_edit_pipeline"
#define T2I CQ_SOURCE_DIR "/tests/golden/qimage_pipeline/pipeline"
#define TE_WIDTH 16

static tu_backend_arg g_backend;
static char g_dir[1024];
static char g_fake_plus[1200], g_fake_edit[1200], g_t2i[1200];
static char g_pic_a[1200], g_pic_b[1200], g_pic_b_rgb[1200], g_pic_bad[1200];
static bool g_have_golden;

static cq_status convert(const char *src, const char *out) {
    const cq_convert_opts o = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(src, out, &o, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fprintf(stderr, "convert %s: %s\n", src, cq_last_error());
    return s;
}

/* The text-to-image golden's folder under an edit pipeline's class: links to its parts, a model_index.json of
 * our own. */
static int fake_folder(const char *name, const char *cls, char *pack, size_t cap) {
    char dir[1100], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
    static const char *const parts[] = {"scheduler", "text_encoder", "tokenizer", "transformer", "vae"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char target[1200];
        snprintf(target, sizeof target, "%s/%s", T2I, parts[i]);
        snprintf(path, sizeof path, "%s/%s", dir, parts[i]);
        unlink(path);
        if (symlink(target, path) != 0) return -1;
    }
    snprintf(path, sizeof path, "%s/model_index.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"_class_name\": \"%s\", \"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], "
               "\"text_encoder\": [\"transformers\", \"Qwen2_5_VLForConditionalGeneration\"], \"tokenizer\": "
               "[\"transformers\", \"Qwen2Tokenizer\"], \"transformer\": [\"diffusers\", "
               "\"QwenImageTransformer2DModel\"], \"vae\": [\"diffusers\", \"AutoencoderKLQwenImage\"]}\n", cls);
    fclose(f);
    snprintf(pack, cap, "%s/%s.cmf", g_dir, name);
    return convert(dir, pack) == CQ_OK ? 0 : -1;
}

/* A picture with structure: gradients and a checker, and an alpha plane that must not matter. */
static int write_picture(const char *path, int w, int h, int channels, int seed) {
    uint8_t *px = malloc((size_t)w * h * channels);
    if (!px) return -1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * channels;
            p[0] = (uint8_t)(255 * x / (w - 1));
            p[1] = (uint8_t)(255 * y / (h - 1));
            p[2] = (uint8_t)((((x / 6) + (y / 5) + seed) & 1) ? 220 : 30);
            if (channels == 4) p[3] = (uint8_t)((x * 37 + y * 11) & 255);
        }
    const cq_status s = cq_png_write(path, px, w, h, channels, NULL, 0);
    free(px);
    return s == CQ_OK ? 0 : -1;
}

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("pipeline_qimage_edit");
    if (!dir) return -1;
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    if (fake_folder("fake_plus", "QwenImageEditPlusPipeline", g_fake_plus, sizeof g_fake_plus) ||
        fake_folder("fake_edit", "QwenImageEditPipeline", g_fake_edit, sizeof g_fake_edit))
        return -1;
    snprintf(g_t2i, sizeof g_t2i, "%s/t2i.cmf", g_dir);
    if (convert(T2I, g_t2i) != CQ_OK) return -1;
    snprintf(g_pic_a, sizeof g_pic_a, "%s/a.png", g_dir);
    snprintf(g_pic_b, sizeof g_pic_b, "%s/b_rgba.png", g_dir);
    snprintf(g_pic_b_rgb, sizeof g_pic_b_rgb, "%s/b_rgb.png", g_dir);
    snprintf(g_pic_bad, sizeof g_pic_bad, "%s/bad.png", g_dir);
    if (write_picture(g_pic_a, 80, 64, 3, 0) || write_picture(g_pic_b, 56, 88, 4, 1) ||
        write_picture(g_pic_b_rgb, 56, 88, 3, 1))
        return -1;
    FILE *f = fopen(g_pic_bad, "wb");
    if (!f) return -1;
    fputs("\x89PNG\r\n\x1a\nnot really", f);
    fclose(f);
    return 0;
}

static cq_qimage_pipe *open_pipe(const char *path, cq_cmf **cmf, cq_backend **be) {
    assert_int_equal(cq_cmf_open(path, cmf), CQ_OK);
    if (be) *be = NULL;
    cq_qimage_pipe *p;
    cq_status s = cq_qimage_pipe_open(*cmf, &p);
    if (s != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (be) {
        assert_int_equal(tu_backend_create(&g_backend, 0, be), CQ_OK);
        s = cq_qimage_pipe_load_weights(p, *be);
        if (s != CQ_OK) fail_msg("load %s: %s", path, cq_last_error());
    }
    return p;
}

static void close_pipe(cq_qimage_pipe *p, cq_cmf *cmf, cq_backend *be) {
    cq_qimage_pipe_free(p);
    cq_backend_free(be);
    cq_cmf_close(cmf);
}

static int count_id(const int32_t *ids, int n, int32_t id) {
    int k = 0;
    for (int i = 0; i < n; i++) k += ids[i] == id;
    return k;
}

/* ---- without the edit golden: the template, the sizes, the refusals ---- */
static void test_template(void **state) {
    (void)state;
    cq_cmf *cmf;
    cq_backend *be = NULL;
    cq_qimage_pipe *p = open_pipe(g_fake_plus, &cmf, NULL);
    assert_int_equal(cq_qimage_pipe_kind(p), CQ_QIMAGE_EDIT_PLUS);
    const char *pics[] = {g_pic_a, g_pic_b};
    cq_qimage_gen_opts o = {.prompt = "put the cat on the sofa", .images = pics, .n_images = 2, .steps = 2,
                            .vae_area = 96 * 96, .vl_area = 80 * 80};
    cq_qimage_edit_inputs in;
    assert_int_equal(cq_qimage_edit_inputs_make(p, &o, &in), CQ_OK);
    /* 80x64 -> VL 96x64 (80^2 area) -> the processor's 84x56: 4x6 patches, 6 pads; VAE 96x96: 36 tokens.
     * 56x88 -> VL 64x96 -> 56x84: 6x4 patches, 6 pads; VAE 64x128: 32 tokens; the output: the last's, 64x128 */
    assert_int_equal(in.n, 2);
    assert_int_equal(in.pic[0].vl_w, 96);
    assert_int_equal(in.pic[0].vl_h, 64);
    assert_int_equal(in.pic[0].grid[1], 4);
    assert_int_equal(in.pic[0].grid[2], 6);
    assert_int_equal(in.pic[1].grid[1], 6);
    assert_int_equal(in.pic[1].grid[2], 4);
    assert_int_equal(in.pic[0].vae_w, 96);
    assert_int_equal(in.pic[0].vae_h, 96);
    assert_int_equal(in.pic[1].vae_w, 64);
    assert_int_equal(in.pic[1].vae_h, 128);
    assert_int_equal(in.n_pad_rows, 12);
    assert_int_equal(in.n_cond_tokens, 36 + 32);
    assert_int_equal(in.width, 64);
    assert_int_equal(in.height, 128);
    int32_t *ids = NULL;
    int n = 0;
    assert_int_equal(cq_qimage_edit_tokens(p, &in, o.prompt, &ids, &n), CQ_OK);
    cq_tokenizer *tok = NULL;
    size_t tl;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    assert_int_equal(cq_tokenizer_load(tj, tl, &tok), CQ_OK);
    const int32_t pad = cq_tokenizer_token_to_id(tok, "<|image_pad|>", 13);
    const int32_t vs = cq_tokenizer_token_to_id(tok, "<|vision_start|>", 16);
    assert_int_equal(count_id(ids, n, pad), 12);
    assert_int_equal(count_id(ids, n, vs), 2);
    /* each picture's pads as one run after its vision_start, "Picture i: " before it */
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (ids[i] == vs) first = i;
    assert_true(first > CQ_QIMAGE_EDIT_DROP_ROWS);
    for (int i = 1; i <= 6; i++) assert_int_equal(ids[first + i], pad);
    assert_int_not_equal(ids[first + 7], pad);
    cq_tokens pic1 = {0};
    assert_int_equal(cq_tokenizer_encode(tok, "Picture 1: ", 11, 0, &pic1), CQ_OK);
    for (size_t i = 0; i < pic1.n; i++) assert_int_equal(ids[first - (int)pic1.n + (int)i], pic1.ids[i]);
    cq_tokens_free(&pic1);
    print_message("  edit-plus template: %d tokens, %d rows after the 64 dropped, 12 pads in two runs\n", n,
                  n - CQ_QIMAGE_EDIT_DROP_ROWS);
    cq_free(ids);

    /* an RGBA file is its RGB: the same pictures for both routes */
    const char *rgb_pics[] = {g_pic_a, g_pic_b_rgb};
    o.images = rgb_pics;
    cq_qimage_edit_inputs in2;
    assert_int_equal(cq_qimage_edit_inputs_make(p, &o, &in2), CQ_OK);
    assert_memory_equal(in2.pic[1].vae, in.pic[1].vae, sizeof(float) * 3 * 64 * 128);
    assert_memory_equal(in2.pic[1].pixel_values, in.pic[1].pixel_values,
                        sizeof(float) * (size_t)in.pic[1].n_patches * 1176);
    cq_qimage_edit_inputs_free(&in2);
    cq_qimage_edit_inputs_free(&in);
    assert_int_equal(cq_qimage_pipe_check(p, &o), CQ_OK);
    /* a given size wins, each side on its own */
    o.width = 48;
    assert_int_equal(cq_qimage_edit_inputs_make(p, &o, &in), CQ_OK);
    assert_int_equal(in.width, 48);
    assert_int_equal(in.height, 128);
    cq_qimage_edit_inputs_free(&in);
    close_pipe(p, cmf, be);

    /* Edit: one picture, no "Picture 1: ", the VL picture the VAE's */
    p = open_pipe(g_fake_edit, &cmf, NULL);
    assert_int_equal(cq_qimage_pipe_kind(p), CQ_QIMAGE_EDIT);
    o = (cq_qimage_gen_opts){.prompt = "make it blue", .images = pics, .n_images = 1, .steps = 2,
                             .vae_area = 96 * 96};
    assert_int_equal(cq_qimage_edit_inputs_make(p, &o, &in), CQ_OK);
    assert_int_equal(in.pic[0].vl_w, 96);
    assert_int_equal(in.pic[0].vl_h, 96);
    assert_int_equal(in.width, 96);
    assert_int_equal(in.height, 96);
    assert_int_equal(cq_qimage_edit_tokens(p, &in, o.prompt, &ids, &n), CQ_OK);
    assert_int_equal(count_id(ids, n, pad), in.n_pad_rows);
    assert_int_equal(count_id(ids, n, vs), 1);
    cq_free(ids);
    cq_qimage_edit_inputs_free(&in);
    cq_tokenizer_free(tok);
    close_pipe(p, cmf, be);
}

static void test_generate_fake(void **state) {
    (void)state;
    cq_cmf *cmf;
    cq_backend *be;
    cq_qimage_pipe *p = open_pipe(g_fake_plus, &cmf, &be);
    const char *pics[] = {g_pic_a, g_pic_b};
    const cq_qimage_gen_opts o = {.prompt = "put the cat on the sofa", .negative = " ", .guidance = 4.0,
                                  .images = pics, .n_images = 2, .steps = 2, .seed = 7, .vae_area = 96 * 96,
                                  .vl_area = 80 * 80};
    cq_image_result r;
    const cq_status s = cq_qimage_pipe_generate(p, &o, &r);
    if (s != CQ_OK) fail_msg("generate: %s", cq_last_error());
    assert_int_equal(r.width, 64);
    assert_int_equal(r.height, 128);
    assert_int_equal(r.tokens, 4 * 8);
    for (size_t i = 0; i < (size_t)3 * r.width * r.height; i++) assert_true(isfinite(r.image[i]));
    /* the same request again: the same bits (the vision rows and the condition latents made afresh) */
    cq_image_result r2;
    assert_int_equal(cq_qimage_pipe_generate(p, &o, &r2), CQ_OK);
    assert_memory_equal(r.latents, r2.latents, (size_t)r.tokens * r.latent_channels * sizeof(float));
    cq_image_result_free(&r2);
    /* the 3-D RoPE index moves the pictures' rows: other text rows, another picture */
    cq_qimage_gen_opts o3 = o;
    o3.vl_rope_3d = true;
    assert_int_equal(cq_qimage_pipe_generate(p, &o3, &r2), CQ_OK);
    assert_true(memcmp(r.latents, r2.latents, (size_t)r.tokens * r.latent_channels * sizeof(float)) != 0);
    for (size_t i = 0; i < (size_t)r2.tokens * r2.latent_channels; i++) assert_true(isfinite(r2.latents[i]));
    cq_image_result_free(&r2);
    cq_image_result_free(&r);
    close_pipe(p, cmf, be);
}

static void test_refusals(void **state) {
    (void)state;
    cq_cmf *cmf;
    cq_qimage_pipe *p = open_pipe(g_fake_plus, &cmf, NULL);
    const char *nine[9];
    for (int i = 0; i < 9; i++) nine[i] = g_pic_a;
    cq_qimage_gen_opts o = {.prompt = "edit", .images = nine, .n_images = 0, .steps = 2, .vae_area = 96 * 96,
                            .vl_area = 80 * 80};
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "give the input picture");
    o.n_images = 9;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "at most 8 input pictures");
    o.n_images = 1;
    const char *missing[] = {"/nonexistent/picture.png"};
    o.images = missing;
    assert_int_not_equal(cq_qimage_pipe_check(p, &o), CQ_OK);
    assert_non_null(strstr(cq_last_error(), "input picture 1"));
    const char *bad[] = {g_pic_a, g_pic_bad};
    o.images = bad;
    o.n_images = 2;
    const cq_status sb = cq_qimage_pipe_check(p, &o);
    assert_int_not_equal(sb, CQ_OK);
    assert_non_null(strstr(cq_last_error(), "input picture 2"));
    o.images = nine;
    o.n_images = 1;
    o.prompt = "a <|vision_start|> here";
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "placeholders of the input pictures");
    o.prompt = "\xc3";
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "not valid UTF-8");
    o.prompt = "edit";
    o.vae_area = 100;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "area");
    o.vae_area = 96 * 96;
    o.width = 40;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "multiples of 16");
    o.width = 0;
    o.steps = 1;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "one step");
    o.steps = 2;
    assert_int_equal(cq_qimage_pipe_check(p, &o), CQ_OK);
    close_pipe(p, cmf, NULL);

    /* Edit takes one picture */
    p = open_pipe(g_fake_edit, &cmf, NULL);
    o.n_images = 2;
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "at most 1 input picture");
    close_pipe(p, cmf, NULL);

    /* a text-to-image pack takes none */
    p = open_pipe(g_t2i, &cmf, NULL);
    assert_int_equal(cq_qimage_pipe_kind(p), CQ_QIMAGE_T2I);
    o = (cq_qimage_gen_opts){.prompt = "a cat", .width = 32, .height = 32, .steps = 2, .images = nine, .n_images = 1};
    tu_expect_err(cq_qimage_pipe_check(p, &o), CQ_ERR_INVALID_ARG, "draws from text only");
    close_pipe(p, cmf, NULL);
}

/* The processor config: the keys read, their bounds, the defaults kept on a refusal. */
static void test_proc_config(void **state) {
    (void)state;
    cq_qwen_vl_proc p;
    static const char good[] = "{\"size\": {\"shortest_edge\": 4096, \"longest_edge\": 7056}, \"patch_size\": 14, "
                               "\"merge_size\": 2, \"temporal_patch_size\": 2, \"image_mean\": [0.5, 0.5, 0.5]}";
    assert_int_equal(cq_qwen_vl_proc_parse(good, sizeof good - 1, &p), CQ_OK);
    assert_int_equal(p.min_pixels, 4096);
    assert_int_equal(p.max_pixels, 7056);
    assert_true(p.mean[1] == 0.5f);
    assert_true(p.std[0] == (float)0.26862954);
    /* min_pixels / max_pixels win over size, as in transformers' constructor */
    static const char both[] = "{\"size\": {\"shortest_edge\": 1, \"longest_edge\": 2}, \"min_pixels\": 3136, "
                               "\"max_pixels\": 12845056}";
    assert_int_equal(cq_qwen_vl_proc_parse(both, sizeof both - 1, &p), CQ_OK);
    assert_int_equal(p.min_pixels, 3136);
    assert_int_equal(p.max_pixels, 12845056);
    static const char *const bad[] = {
        "[1, 2]", "{\"patch_size\": 0}", "{\"patch_size\": 14.5}", "{\"merge_size\": 1e9}",
        "{\"min_pixels\": 9000, \"max_pixels\": 100}", "{\"image_std\": [1, 0, 1]}", "{\"image_mean\": [1, 2]}",
        "{\"rescale_factor\": -1}", "{\"max_pixels\": -5}", "{\"size\": {\"longest_edge\": 1e300}}", "{",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_not_equal(cq_qwen_vl_proc_parse(bad[i], strlen(bad[i]), &p), CQ_OK);
        assert_int_equal(p.patch_size, 14); /* the defaults again */
        assert_int_equal(p.max_pixels, 28 * 28 * 1280);
    }
}

/* ---- the edit golden ---- */
static double num(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(c, key);
    if (!cJSON_IsNumber(v)) fail_msg("case field %s is not a number", key);
    return v->valuedouble;
}

static float *want_floats(const cq_st *st, const char *name, size_t *n) {
    float *v = tu_st_floats(st, name, n);
    if (!v) fail_msg("expected f32 tensor %s missing", name);
    return v;
}

/* max|got - want| / rms(want) of a tensor of the golden, printed; <= 1e-4 on the CPU */
static double compare(const cq_st *exp, const char *key, const float *got, size_t n, bool strict) {
    size_t m = 0;
    float *want = want_floats(exp, key, &m);
    assert_int_equal(m, n);
    const double e = tu_max_rel(got, want, n, tu_rms(want, n));
    free(want);
    print_message("  %-18s %7zu values, max err %.2e of RMS\n", key, n, e);
    if (strict && !g_backend.device) assert_true(e <= 1e-4);
    return e;
}

/* The largest byte difference of a u8 tensor of the golden and ours (same layout). */
static int u8_diff(const cq_st *exp, const char *key, const uint8_t *got, size_t n) {
    const cq_st_tensor *t = cq_st_find(exp, key);
    if (!t) fail_msg("expected tensor %s missing", key);
    assert_int_equal(t->dtype, CQ_ST_U8);
    assert_int_equal(t->nbytes, n);
    const uint8_t *w = t->data;
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        const int d = abs((int)got[i] - (int)w[i]);
        if (d > worst) worst = d;
    }
    return worst;
}

typedef struct step_rec {
    const cq_st *exp;
    const char *name;
    double worst;
} step_rec;

static void on_latents(int step, const float *x, int tokens, void *user) {
    step_rec *r = user;
    char key[64];
    snprintf(key, sizeof key, "step%d_%s", step - 1, r->name);
    const double e = compare(r->exp, key, x, (size_t)tokens * 64, false);
    if (e > r->worst) r->worst = e;
}

static void run_case(const cJSON *root, const char *name, const cJSON *c, const cq_st *exp) {
    const char *folder = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "pipelines"),
                                             cJSON_GetObjectItem(c, "pipe")->valuestring)->valuestring;
    char src[1200], pack[1200];
    snprintf(src, sizeof src, "%s/%s", GOLDEN, folder);
    snprintf(pack, sizeof pack, "%s/%s.cmf", g_dir, folder);
    if (access(pack, R_OK) != 0) assert_int_equal(convert(src, pack), CQ_OK);
    cq_cmf *cmf;
    cq_backend *be;
    cq_qimage_pipe *p = open_pipe(pack, &cmf, &be);
    const cJSON *imgs = cJSON_GetObjectItem(c, "images");
    const int n_img = cJSON_GetArraySize(imgs);
    assert_true(n_img >= 1 && n_img <= CQ_QIMAGE_EDIT_MAX_IMAGES);
    char paths[CQ_QIMAGE_EDIT_MAX_IMAGES][1200];
    const char *pics[CQ_QIMAGE_EDIT_MAX_IMAGES];
    for (int i = 0; i < n_img; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/images/%s.png", GOLDEN, cJSON_GetArrayItem(imgs, i)->valuestring);
        pics[i] = paths[i];
    }
    const cJSON *negj = cJSON_GetObjectItem(c, "negative"), *wj = cJSON_GetObjectItem(c, "width"),
                *hj = cJSON_GetObjectItem(c, "height");
    step_rec rec = {.exp = exp, .name = name};
    cq_qimage_gen_opts o = {.prompt = cJSON_GetObjectItem(c, "prompt")->valuestring,
                            .negative = cJSON_IsString(negj) ? negj->valuestring : NULL,
                            .width = cJSON_IsNumber(wj) ? wj->valueint : 0,
                            .height = cJSON_IsNumber(hj) ? hj->valueint : 0,
                            .steps = (int)num(c, "steps"),
                            .seed = (uint64_t)num(c, "seed"),
                            .guidance = num(c, "true_cfg_scale"),
                            .images = pics,
                            .n_images = n_img,
                            .vae_area = num(root, "vae_area"),
                            .vl_area = num(root, "vl_area"),
                            .on_latents = on_latents,
                            .user = &rec};
    const bool cfg = o.guidance > 1 && o.negative;
    print_message("%s (%s): %d picture%s, %d steps, true CFG %g%s\n", name, folder, n_img, n_img > 1 ? "s" : "",
                  o.steps, o.guidance, cfg ? "" : " (off)");
    cq_qimage_edit_inputs in;
    assert_int_equal(cq_qimage_edit_inputs_make(p, &o, &in), CQ_OK);
    assert_int_equal(in.width, (int)num(c, "out_width"));
    assert_int_equal(in.height, (int)num(c, "out_height"));
    /* the pictures of both routes */
    char key[64];
    int worst_vl = 0, worst_proc = 0;
    const cJSON *grids = cJSON_GetObjectItem(c, "grids");
    for (int i = 0; i < in.n; i++) {
        const cq_qimage_edit_picture *pc = &in.pic[i];
        for (int a = 0; a < 3; a++) assert_int_equal(pc->grid[a], cJSON_GetArrayItem(cJSON_GetArrayItem(grids, i), a)->valueint);
        snprintf(key, sizeof key, "vl_u8_%s_%d", name, i);
        worst_vl = CQ_MAX(worst_vl, u8_diff(exp, key, pc->vl_rgb, (size_t)pc->vl_w * pc->vl_h * 3));
        /* the processor's own picture, planar in the golden */
        cq_qwen_vl_proc proc;
        cq_qwen_vl_proc_defaults(&proc);
        proc.min_pixels = (int64_t)num(root, "min_pixels");
        proc.max_pixels = (int64_t)num(root, "max_pixels");
        cq_qwen_vl_image vl;
        assert_int_equal(cq_qwen_vl_preprocess(&proc, pc->vl_rgb, pc->vl_w, pc->vl_h, &vl), CQ_OK);
        const size_t hw = (size_t)vl.resized_w * vl.resized_h;
        uint8_t *planar = malloc(hw * 3);
        assert_non_null(planar);
        for (size_t q = 0; q < hw; q++)
            for (int ch = 0; ch < 3; ch++) planar[(size_t)ch * hw + q] = vl.resized[q * 3 + ch];
        snprintf(key, sizeof key, "proc_u8_%s_%d", name, i);
        worst_proc = CQ_MAX(worst_proc, u8_diff(exp, key, planar, hw * 3));
        assert_memory_equal(vl.pixel_values, pc->pixel_values, (size_t)vl.n_patches * 1176 * sizeof(float));
        free(planar);
        cq_qwen_vl_image_free(&vl);
    }
    print_message("  pictures: Lanczos max diff %d, bicubic max diff %d (u8 levels)\n", worst_vl, worst_proc);
    assert_true(worst_vl <= 1 && worst_proc <= 1);
    /* the template's ids */
    int32_t *ids = NULL;
    int n = 0;
    snprintf(key, sizeof key, "ids_%s", name);
    const cq_st_tensor *tid = cq_st_find(exp, key);
    assert_non_null(tid);
    assert_int_equal(cq_qimage_edit_tokens(p, &in, o.prompt, &ids, &n), CQ_OK);
    assert_int_equal((uint64_t)n, tid->shape[0]);
    assert_memory_equal(ids, tid->data, (size_t)n * sizeof(int32_t));
    cq_free(ids);
    assert_int_equal(n - CQ_QIMAGE_EDIT_DROP_ROWS, (int)num(c, "rows"));
    /* the vision rows, the text rows, the condition latents */
    float *vision = NULL, *emb = NULL, *cond = NULL;
    int rows = 0;
    assert_int_equal(cq_qimage_edit_vision(p, &in, &vision), CQ_OK);
    snprintf(key, sizeof key, "vision_%s", name);
    compare(exp, key, vision, (size_t)in.n_pad_rows * TE_WIDTH, true);
    assert_int_equal(cq_qimage_edit_encode(p, &in, vision, o.prompt, &emb, &rows), CQ_OK);
    snprintf(key, sizeof key, "embeds_%s", name);
    compare(exp, key, emb, (size_t)rows * TE_WIDTH, true);
    cq_free(emb);
    if (cfg) {
        assert_int_equal(cq_qimage_edit_encode(p, &in, vision, o.negative, &emb, &rows), CQ_OK);
        snprintf(key, sizeof key, "neg_embeds_%s", name);
        compare(exp, key, emb, (size_t)rows * TE_WIDTH, true);
        cq_free(emb);
    }
    cq_free(vision);
    assert_int_equal(cq_qimage_edit_cond_latents(p, &in, &cond), CQ_OK);
    snprintf(key, sizeof key, "cond_%s", name);
    compare(exp, key, cond, (size_t)in.n_cond_tokens * 64, true);
    assert_int_equal(in.n_cond_tokens, (int)num(c, "cond_tokens"));
    cq_free(cond);
    /* the noise */
    const size_t nn = (size_t)16 * (in.height / 8) * (in.width / 8);
    float *noise = malloc(nn * sizeof(float));
    assert_non_null(noise);
    assert_int_equal(cq_latent_noise(o.seed, CQ_TORCH_F32, cq_torch_f32_kernel_native(), nn, noise), CQ_OK);
    size_t m = 0;
    snprintf(key, sizeof key, "noise_%s", name);
    float *want = want_floats(exp, key, &m);
    assert_int_equal(m, nn);
    assert_memory_equal(noise, want, nn * sizeof(float));
    free(want);
    free(noise);
    /* what the text phase must hold beside the language model: the vision tower and the VAE encoder */
    cq_qwen25vl_vision_config vc;
    assert_int_equal(cq_qwen25vl_vision_parse_config(cmf, "te.", &vc), CQ_OK);
    uint64_t side = cq_resid_act_tower(in.n_patches, vc.hidden, vc.intermediate,
                                       cq_act_dtype_size(cq_backend_act_dtype(be)));
    for (int i = 0; i < in.n; i++) {
        const uint64_t enc = cq_resid_act_decoder((int64_t)in.pic[i].vae_w * in.pic[i].vae_h);
        if (enc > side) side = enc;
    }
    assert_true(side == cq_qimage_edit_text_side(p, &in));
    cq_qimage_edit_inputs_free(&in);

    /* the whole request */
    cq_image_result r;
    const cq_status s = cq_qimage_pipe_generate(p, &o, &r);
    if (s != CQ_OK) fail_msg("%s: generate: %s", name, cq_last_error());
    assert_int_equal(r.tokens, (int)num(c, "tokens"));
    assert_true(cq_qimage_pipe_need(p)->act[CQ_RESID_TEXT] >= side);
    snprintf(key, sizeof key, "latents_%s", name);
    const double e_lat = compare(exp, key, r.latents, (size_t)r.tokens * 64, false);
    snprintf(key, sizeof key, "image_%s", name);
    want = want_floats(exp, key, &m);
    assert_int_equal(m, (size_t)r.width * r.height * 3);
    int worst;
    const double worst_f = tu_image_err(r.image, 3, r.width, r.height, want, &worst);
    free(want);
    cq_image_result_free(&r);
    print_message("  steps max err %.2e of RMS, latents %.2e, pixels max diff %d/255 (%.2e before rounding)\n",
                  rec.worst, e_lat, worst, worst_f);
    if (g_backend.device) {
        const double lat_bound = num(c, "bf16_latents_max_rel") / 4, img_bound = num(c, "bf16_image_max_abs") / 4;
        print_message("  device bounds (a quarter of the reference's bf16 error): latents %.2e, pixels %.2e\n",
                      lat_bound, img_bound);
        assert_true(e_lat <= lat_bound);
        assert_true(worst_f <= img_bound);
    } else {
        assert_true(rec.worst <= 1e-4);
        assert_true(e_lat <= 1e-4);
        assert_true(worst <= 2);
    }
    close_pipe(p, cmf, be);
}

static void test_parity(void **state) {
    (void)state;
    size_t len;
    char *js = (char *)tu_read_file(GOLDEN "/cases.json", &len);
    assert_non_null(js);
    cJSON *root = cJSON_ParseWithLength(js, len);
    free(js);
    assert_non_null(root);
    assert_int_equal((int)num(root, "drop_rows"), CQ_QIMAGE_EDIT_DROP_ROWS);
    cq_st *exp;
    assert_int_equal(cq_st_open(GOLDEN "/expected.safetensors", &exp), CQ_OK);
    int cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next, cases++)
        run_case(root, c->string, c, exp);
    assert_int_equal(cases, 5);
    cq_st_close(exp);
    cJSON_Delete(root);
}

int main(int argc, char **argv) {
    if (!cq_gz_available()) {
        printf("test_pipeline_qimage_edit: skipped: this build has no zlib (-DCORTIQ_ZLIB=OFF) to read the golden "
               "tokenizer.json.gz\n");
        return TU_SKIP;
    }
    const int rc = tu_backend_select("test_pipeline_qimage_edit", argc, argv, &g_backend);
    if (rc >= 0) return rc;
    g_have_golden = access(GOLDEN "/cases.json", R_OK) == 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_template),
        cmocka_unit_test(test_generate_fake),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_proc_config),
        cmocka_unit_test(test_parity),
    };
    const size_t n = sizeof tests / sizeof *tests - (g_have_golden ? 0 : 1);
    const int failed = _cmocka_run_group_tests("test_pipeline_qimage_edit", tests, n, setup, NULL);
    if (failed == 0 && !g_have_golden) {
        printf("test_pipeline_qimage_edit: the parity with the reference skipped: %s is absent "
               "(tools/golden_pipeline_qwenimage_edit.py makes it)\n", GOLDEN);
        return TU_SKIP;
    }
    return failed;
}
