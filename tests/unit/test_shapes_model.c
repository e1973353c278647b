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
#include <stdbool.h>
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
#define SHAPE_RIGHT_MIN 0.90 /* of all drawn objects with a measured shape */
#define SEED_DIFF_PROMPTS 3  /* at least one prompt in this many has seeds that differ by SEED_DIFF_MIN */

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
static const region k_top_left = {0, 0, SIDE / 2, SIDE / 2}, k_bottom_right = {SIDE / 2, SIDE / 2, SIDE, SIDE};
/* A large object (radius 0.27 of the side) placed a quarter in from an edge reaches 0.52 of the way across, so
 * the regions where it must not be, and where only the background is, leave out a band of 0.06 past the middle
 * (training data geometry, tools/train_shapes.py). */
#define FAR (SIDE * 9 / 16)
#define NEAR_EDGE (SIDE * 7 / 16)
static const region k_far_left = {0, 0, NEAR_EDGE, SIDE}, k_far_right = {FAR, 0, SIDE, SIDE};
static const region k_far_top = {0, 0, SIDE, NEAR_EDGE}, k_far_bottom = {0, FAR, SIDE, SIDE};
static const region k_far_top_left = {0, 0, NEAR_EDGE, NEAR_EDGE}, k_far_top_right = {FAR, 0, SIDE, NEAR_EDGE};
static const region k_far_bottom_left = {0, FAR, NEAR_EDGE, SIDE}, k_far_bottom_right = {FAR, FAR, SIDE, SIDE};
/* a centred object (radius at most 0.27 of the side) lies inside k_centre; the top strip stays background */
static const region k_centre = {40, 40, SIDE - 40, SIDE - 40}, k_strip = {0, 0, SIDE, 48};

/* The shape measure: over the pixels near the object's colour inside its region, the fill ratio of their
 * bounding box and the height of their centroid in it (0 top, 1 bottom). For the training data's outlines
 * (tools/train_shapes.py draw(), measured on 2048x2048 renders): circle 0.785 / 0.500, square 1.000 / 0.500,
 * triangle (pointing up) 0.501 / 0.666, star 0.503 / 0.446. A picture's shape is the nearest of the four
 * (Euclidean in these two numbers). A generator errs now and then: at least SHAPE_RIGHT_MIN of all the objects
 * drawn must come out as the asked shape, and every prompt's shape on at least one of its two seeds. */
typedef struct shape_ref {
    const char *name;
    double fill, cy;
} shape_ref;
static const shape_ref k_shapes[] = {
    {"circle", 0.785, 0.500}, {"square", 1.000, 0.500}, {"triangle", 0.501, 0.666}, {"star", 0.503, 0.446}};
#define N_SHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

typedef struct object {
    const char *colour;
    const char *where; /* for the messages */
    region at, away;   /* where it must be; a region where its colour must not be */
    const char *shape; /* one of k_shapes to measure, or NULL */
} object;

typedef struct shape_case {
    const char *prompt;
    const char *background;
    region bg; /* a region that holds only background */
    int n_obj;
    object obj[2];
} shape_case;

/* Worded as a user would, with both spellings and the synonyms the captions use (models/shapes.md). */
static const shape_case k_cases[] = {
    {"a red circle on the left, blue background", "blue", k_far_right, 1,
     {{"red", "left half", k_left, k_far_right, "circle"}}},
    {"a black background with a large yellow star in the top right corner", "black", k_far_bottom_left, 1,
     {{"yellow", "top right quadrant", k_top_right, k_far_bottom_left, "star"}}},
    {"a green square at the bottom, white background", "white", k_far_top, 1,
     {{"green", "bottom half", k_bottom, k_far_top, "square"}}},
    {"Picture of a small pink cross at the top on green", "green", k_far_bottom, 1,
     {{"pink", "top half", k_top, k_far_bottom, NULL}}},
    {"a cyan ring on the right on a purple background", "purple", k_far_left, 1,
     {{"cyan", "right half", k_right, k_far_left, NULL}}},
    {"a blue circle in the center on a white background", "white", k_strip, 1,
     {{"blue", "centre", k_centre, k_strip, "circle"}}},
    {"a large red square in the middle, black background", "black", k_strip, 1,
     {{"red", "centre", k_centre, k_strip, "square"}}},
    {"a big yellow triangle in the centre on a grey background", "gray", k_strip, 1,
     {{"yellow", "centre", k_centre, k_strip, "triangle"}}},
    {"a large green star centered on a purple background", "purple", k_strip, 1,
     {{"green", "centre", k_centre, k_strip, "star"}}},
    {"a pink triangle in the upper right corner on a gray background", "gray", k_far_bottom_left, 1,
     {{"pink", "top right quadrant", k_top_right, k_far_bottom_left, "triangle"}}},
    {"an orange circle at the bottom left on a black background", "black", k_far_top_right, 1,
     {{"orange", "bottom left quadrant", k_bottom_left, k_far_top_right, "circle"}}},
    {"a white square in the lower right corner, brown background", "brown", k_far_top_left, 1,
     {{"white", "bottom right quadrant", k_bottom_right, k_far_top_left, "square"}}},
    {"A purple star in the top-left corner, yellow background", "yellow", k_far_bottom_right, 1,
     {{"purple", "top left quadrant", k_top_left, k_far_bottom_right, "star"}}},
    {"a red circle on the left and a blue square on the right, white background", "white", k_strip, 2,
     {{"red", "left half", k_left, k_far_right, "circle"}, {"blue", "right half", k_right, k_far_left, "square"}}},
    {"a yellow star at the top and a green triangle at the bottom on a black background", "black",
     {0, 0, 24, SIDE}, 2,
     {{"yellow", "top half", k_top, k_far_bottom, "star"}, {"green", "bottom half", k_bottom, k_far_top, "triangle"}}},
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

static bool near(const cq_image8 *img, int x, int y, const colour *c) {
    return dist(img->pixels + ((size_t)y * img->width + x) * 3, c->rgb) < NEAR;
}

/* Fraction of the region's pixels within NEAR of the colour. */
static double coverage(const cq_image8 *img, region r, const colour *c) {
    long n = 0;
    for (int y = r.y0; y < r.y1; y++)
        for (int x = r.x0; x < r.x1; x++)
            if (near(img, x, y, c)) n++;
    return (double)n / ((double)(r.x1 - r.x0) * (r.y1 - r.y0));
}

/* The fill ratio and centroid height of the colour's pixels in the region (see k_shapes). */
static void shape_measure(const cq_image8 *img, region r, const colour *c, double *fill, double *cy) {
    int x0 = SIDE, y0 = SIDE, x1 = -1, y1 = -1;
    long n = 0;
    double sy = 0;
    for (int y = r.y0; y < r.y1; y++)
        for (int x = r.x0; x < r.x1; x++)
            if (near(img, x, y, c)) {
                n++, sy += y;
                x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1, y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
            }
    if (n == 0) {
        *fill = *cy = 0;
        return;
    }
    const double h = y1 - y0 + 1, w = x1 - x0 + 1;
    *fill = (double)n / (h * w);
    *cy = (sy / (double)n - y0 + 0.5) / h;
}

/* The nearest of k_shapes to (fill, cy), and the distances to it and to the second nearest. */
static const char *classify(double fill, double cy, double *d_best, double *d_next) {
    int best = -1;
    *d_best = *d_next = INFINITY;
    for (int i = 0; i < N_SHAPES; i++) {
        const double d = hypot(fill - k_shapes[i].fill, cy - k_shapes[i].cy);
        if (d < *d_best) {
            *d_next = *d_best, *d_best = d, best = i;
        } else if (d < *d_next) {
            *d_next = d;
        }
    }
    return k_shapes[best].name;
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

typedef struct tally {
    int shapes, shapes_right; /* objects with a measured shape; of them, the asked one */
} tally;

/* Checks one object of a picture; returns the number of failed colour and position checks (each printed) and
 * counts its shape in t; *right tells whether the shape (if measured) was the asked one. */
static int check_object(const shape_case *c, const object *o, const cq_image8 *img, tally *t, bool *right) {
    const colour *bg = find_colour(c->background), *obj = find_colour(o->colour);
    const double f_obj = coverage(img, o->at, obj), f_away = coverage(img, o->away, obj);
    double f_other = 0;
    const char *other = "-";
    for (int i = 0; i < N_COLOURS; i++) {
        const colour *k = &k_colours[i];
        bool asked = k == bg;
        for (int j = 0; j < c->n_obj; j++) asked = asked || !strcmp(k->name, c->obj[j].colour);
        if (asked) continue;
        double f = coverage(img, o->at, k);
        if (f > f_other) f_other = f, other = k->name;
    }
    int bad = 0;
    print_message("    %s object: %.3f of the %s (>= %.3f), %.4f where it must not be (<= %.3f); most of another "
                  "colour: %s %.4f (<= %.2f of it)\n", obj->name, f_obj, o->where, OBJ_MIN, f_away, OBJ_OPP_MAX,
                  other, f_other, OTHER_RATIO);
    bad += f_obj < OBJ_MIN;
    bad += f_away > OBJ_OPP_MAX;
    bad += f_other > OTHER_RATIO * f_obj;
    if (o->shape) {
        double fill, cy, d_best, d_next;
        /* measured over its region widened by the band a large object may reach past it */
        const int b = FAR - SIDE / 2;
        const region wide = {o->at.x0 > 0 ? o->at.x0 - b : 0, o->at.y0 > 0 ? o->at.y0 - b : 0,
                             o->at.x1 < SIDE ? o->at.x1 + b : SIDE, o->at.y1 < SIDE ? o->at.y1 + b : SIDE};
        shape_measure(img, wide, obj, &fill, &cy);
        const char *got = classify(fill, cy, &d_best, &d_next);
        *right = strcmp(got, o->shape) == 0;
        print_message("    shape: fill %.3f, centroid %.3f -> %s (asked %s; %.3f from it, the next %.3f)%s\n", fill, cy,
                      got, o->shape, d_best, d_next, *right ? "" : "  <-- wrong shape");
        t->shapes++;
        t->shapes_right += *right;
    }
    return bad;
}

static int check_picture(const shape_case *c, uint64_t seed, const cq_image8 *img, tally *t, bool right[2]) {
    const colour *bg = find_colour(c->background);
    const double f_bg = coverage(img, c->bg, bg);
    print_message("'%s' seed %llu: %s background %.3f of its region (>= %.2f)\n", c->prompt,
                  (unsigned long long)seed, bg->name, f_bg, BG_MIN);
    int bad = f_bg < BG_MIN;
    for (int j = 0; j < c->n_obj; j++) bad += check_object(c, &c->obj[j], img, t, &right[j]);
    return bad;
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

/* Every case with seeds 0 and 1; all statistics are printed before the verdicts. */
static void test_prompts(void **state) {
    model *m = *state;
    int failed = 0, shape_lost = 0, seeds_differ = 0;
    tally t = {0, 0};
    for (int k = 0; k < N_CASES; k++) {
        const shape_case *c = &k_cases[k];
        cq_image8 img[2] = {{0}, {0}};
        bool right[2][2] = {{true, true}, {true, true}};
        int bad = 0;
        for (int s = 0; s < 2; s++) {
            draw(m, c->prompt, (uint64_t)s, &img[s]);
            bad += check_picture(c, (uint64_t)s, &img[s], &t, right[s]);
        }
        for (int j = 0; j < c->n_obj; j++)
            if (!right[0][j] && !right[1][j]) bad++, shape_lost++;
        const double d = seed_difference(&img[0], &img[1]);
        seeds_differ += d >= SEED_DIFF_MIN;
        print_message("  seeds 0 and 1 differ at %.3f of the pixels%s\n", d, bad ? "  <-- FAILED" : "");
        failed += bad != 0;
        cq_image8_free(&img[0]);
        cq_image8_free(&img[1]);
    }
    print_message("shapes: %d of %d objects as asked (>= %.0f%%); %d prompts wrong on both seeds; seeds differ by "
                  ">= %.3f in %d of %d prompts (>= 1 in %d)\n", t.shapes_right, t.shapes, 100 * SHAPE_RIGHT_MIN,
                  shape_lost, SEED_DIFF_MIN, seeds_differ, N_CASES, SEED_DIFF_PROMPTS);
    if (failed) fail_msg("%d of %d prompts failed their checks (above)", failed, N_CASES);
    if (t.shapes_right < SHAPE_RIGHT_MIN * t.shapes) fail_msg("%d of %d shapes as asked", t.shapes_right, t.shapes);
    if (seeds_differ * SEED_DIFF_PROMPTS < N_CASES) fail_msg("the seeds differ in only %d prompts", seeds_differ);
}

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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_prompts)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
