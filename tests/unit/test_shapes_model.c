/*
 * test_shapes_model.c — the shipped model draws what it is told.
 *
 * models/shapes.cmf is a small Qwen-Image-2.1 pipeline trained to draw
 * coloured shapes on plain backgrounds (models/shapes.md). This test runs the
 * real pipeline (tokenizer, chat template, text tower, denoiser, VAE, 8-bit
 * pixels as `cortiq imagine` writes them) for a handful of prompts and two
 * seeds each, and checks meaning rather than bytes, with simple statistics
 * over regions of the 256x256 picture:
 *
 *  - background: in the half or quadrant opposite to the object, at least
 *    BG_MIN of the pixels are near the asked background colour;
 *  - object: in the asked region, at least OBJ_MIN of the pixels are near the
 *    asked object colour, and in the opposite region at most OBJ_OPP_MAX;
 *  - no other of the model's twelve colours covers more than OTHER_RATIO of
 *    what the asked colour covers in the asked region (the object is the asked
 *    colour, not just some colour; soft edges blend object and background into
 *    a thin rim of in-between colours, hence a ratio);
 *  - the two seeds draw different pictures (at least SEED_DIFF_MIN of the
 *    pixels differ clearly), both passing the checks above.
 *
 * "Near" is a Euclidean RGB distance below NEAR to the colour the training
 * data used for that name (tools/train_shapes.py). Every measured statistic is
 * printed, so a failure shows how far off it was. Exit status 77 (skipped)
 * when the model file is not there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "pipelines/png_write.h"
#include "pipelines/qi21_pipe.h"
#include "testutil.h"

#define MODEL CQ_SOURCE_DIR "/models/shapes.cmf"
#define SIDE 256
#define STEPS 20

/* Thresholds; the margins measured on the shipped model are in models/shapes.md. */
#define NEAR 60.0
#define BG_MIN 0.90
#define OBJ_MIN 0.03
#define OBJ_OPP_MAX 0.005
#define OTHER_RATIO 0.5
#define SEED_DIFF_MIN 0.005

typedef struct colour {
    const char *name;
    double rgb[3];
} colour;

/* The training data's palette (tools/train_shapes.py COLOURS). */
static const colour k_colours[] = {
    {"red", {220, 30, 30}},    {"green", {30, 170, 60}},   {"blue", {30, 70, 220}},   {"yellow", {240, 210, 30}},
    {"orange", {245, 130, 20}}, {"purple", {140, 50, 180}}, {"white", {245, 245, 245}}, {"black", {15, 15, 15}},
    {"pink", {245, 120, 180}}, {"cyan", {40, 200, 220}},   {"gray", {128, 128, 128}}, {"brown", {120, 70, 30}},
};
#define N_COLOURS (int)(sizeof k_colours / sizeof k_colours[0])

typedef struct region {
    int x0, y0, x1, y1; /* pixels, half-open */
} region;

static const region k_left = {0, 0, SIDE / 2, SIDE}, k_right = {SIDE / 2, 0, SIDE, SIDE};
static const region k_top = {0, 0, SIDE, SIDE / 2}, k_bottom = {0, SIDE / 2, SIDE, SIDE};
static const region k_top_right = {SIDE / 2, 0, SIDE, SIDE / 2}, k_bottom_left = {0, SIDE / 2, SIDE / 2, SIDE};

typedef struct shape_case {
    const char *prompt;
    const char *background, *object;
    const char *where; /* for the messages */
    region at, opposite;
} shape_case;

static const shape_case k_cases[] = {
    {"a red circle on the left, blue background", "blue", "red", "left half", k_left, k_right},
    {"a black background with a large yellow star in the top right corner", "black", "yellow", "top right quadrant",
     k_top_right, k_bottom_left},
    {"a green square at the bottom, white background", "white", "green", "bottom half", k_bottom, k_top},
    {"Picture of a small pink cross at the top on green", "green", "pink", "top half", k_top, k_bottom},
    {"a cyan ring on the right on a purple background", "purple", "cyan", "right half", k_right, k_left},
};
#define N_CASES (int)(sizeof k_cases / sizeof k_cases[0])

typedef struct model {
    cq_cmf *cmf;
    cq_backend *be;
    cq_qi21_pipe *pipe;
} model;

static const colour *find_colour(const char *name) {
    for (int i = 0; i < N_COLOURS; i++)
        if (!strcmp(k_colours[i].name, name)) return &k_colours[i];
    fail_msg("no colour named %s", name);
    return NULL;
}

static double dist(const uint8_t *px, const double rgb[3]) {
    double dr = px[0] - rgb[0], dg = px[1] - rgb[1], db = px[2] - rgb[2];
    return sqrt(dr * dr + dg * dg + db * db);
}

/* Fraction of the region's pixels within NEAR of the colour. */
static double coverage(const cq_image8 *img, region r, const colour *c) {
    long n = 0;
    for (int y = r.y0; y < r.y1; y++)
        for (int x = r.x0; x < r.x1; x++)
            if (dist(img->pixels + ((size_t)y * img->width + x) * 3, c->rgb) < NEAR) n++;
    return (double)n / ((double)(r.x1 - r.x0) * (r.y1 - r.y0));
}

/* The picture `cortiq imagine` would write: RGB, alpha composited over white. */
static void draw(model *m, const char *prompt, uint64_t seed, cq_image8 *img) {
    cq_qi21_gen_opts o = {.prompt = prompt, .width = SIDE, .height = SIDE, .steps = STEPS, .seed = seed, .guidance = 1};
    cq_qi21_result r;
    cq_status s = cq_qi21_pipe_generate(m->pipe, &o, &r);
    if (s != CQ_OK) fail_msg("generate '%s' seed %llu: %s", prompt, (unsigned long long)seed, cq_last_error());
    assert_int_equal(r.width, SIDE);
    assert_int_equal(r.height, SIDE);
    s = cq_png_from_planar(r.image, r.channels, r.width, r.height, 3, img);
    cq_qi21_result_free(&r);
    if (s != CQ_OK) fail_msg("pixels of '%s': %s", prompt, cq_last_error());
}

static void check_picture(const shape_case *c, uint64_t seed, const cq_image8 *img) {
    const colour *bg = find_colour(c->background), *obj = find_colour(c->object);
    double f_bg = coverage(img, c->opposite, bg);
    double f_obj = coverage(img, c->at, obj);
    double f_opp = coverage(img, c->opposite, obj);
    double f_other = 0;
    const char *other = "-";
    for (int i = 0; i < N_COLOURS; i++) {
        const colour *k = &k_colours[i];
        if (k == bg || k == obj) continue;
        double f = coverage(img, c->at, k);
        if (f > f_other) f_other = f, other = k->name;
    }
    print_message("'%s' seed %llu: %s background %.3f of the opposite region (>= %.2f); %s object %.3f of the %s "
                  "(>= %.3f), %.4f of the opposite region (<= %.3f); most of another colour: %s %.4f (<= %.2f of %.3f)\n",
                  c->prompt, (unsigned long long)seed, bg->name, f_bg, BG_MIN, obj->name, f_obj, c->where, OBJ_MIN,
                  f_opp, OBJ_OPP_MAX, other, f_other, OTHER_RATIO, f_obj);
    assert_true(f_bg >= BG_MIN);
    assert_true(f_obj >= OBJ_MIN);
    assert_true(f_opp <= OBJ_OPP_MAX);
    assert_true(f_other <= OTHER_RATIO * f_obj);
}

/* Fraction of pixels whose colours in the two pictures are more than NEAR apart. */
static double seed_difference(const cq_image8 *a, const cq_image8 *b) {
    long n = 0;
    for (size_t i = 0; i < (size_t)SIDE * SIDE; i++) {
        const uint8_t *p = a->pixels + i * 3;
        double q[3] = {b->pixels[i * 3], b->pixels[i * 3 + 1], b->pixels[i * 3 + 2]};
        if (dist(p, q) > NEAR) n++;
    }
    return (double)n / ((double)SIDE * SIDE);
}

static void test_case(void **state, int k) {
    model *m = *state;
    const shape_case *c = &k_cases[k];
    cq_image8 img[2] = {{0}, {0}};
    for (int s = 0; s < 2; s++) {
        draw(m, c->prompt, (uint64_t)s, &img[s]);
        check_picture(c, (uint64_t)s, &img[s]);
    }
    double d = seed_difference(&img[0], &img[1]);
    print_message("'%s': seeds 0 and 1 differ at %.3f of the pixels (>= %.3f)\n", c->prompt, d, SEED_DIFF_MIN);
    assert_true(d >= SEED_DIFF_MIN);
    cq_image8_free(&img[0]);
    cq_image8_free(&img[1]);
}

static void test_left_on_blue(void **state) { test_case(state, 0); }
static void test_top_right_on_black(void **state) { test_case(state, 1); }
static void test_bottom_on_white(void **state) { test_case(state, 2); }
static void test_top_on_green(void **state) { test_case(state, 3); }
static void test_right_on_purple(void **state) { test_case(state, 4); }

static int setup(void **state) {
    static model m;
    if (cq_cmf_open(MODEL, &m.cmf) != CQ_OK || cq_backend_create("cpu", 0, &m.be) != CQ_OK ||
        cq_qi21_pipe_load(m.cmf, m.be, &m.pipe) != CQ_OK) {
        fprintf(stderr, "loading %s: %s\n", MODEL, cq_last_error());
        return -1;
    }
    *state = &m;
    return 0;
}

static int teardown(void **state) {
    model *m = *state;
    cq_qi21_pipe_free(m->pipe);
    cq_backend_free(m->be);
    cq_cmf_close(m->cmf);
    return 0;
}

int main(void) {
    FILE *f = fopen(MODEL, "rb");
    if (!f) {
        printf("skipped: %s is not there (the repository ships it; a partial checkout may lack it)\n", MODEL);
        return 77;
    }
    fclose(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_left_on_blue),  cmocka_unit_test(test_top_right_on_black),
        cmocka_unit_test(test_bottom_on_white), cmocka_unit_test(test_top_on_green),
        cmocka_unit_test(test_right_on_purple),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
