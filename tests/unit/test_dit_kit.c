/*
 * test_dit_kit.c — the shared diffusion-transformer pieces (models/kit/dit.h)
 * against values worked out by hand: timestep features under each knob, RoPE
 * tables at integer and fractional positions, modulated norms and gated
 * residuals over row groups, and the step driver on a host backend.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "models/kit/dit.h"

static void near(const float *got, const double *want, int n, double tol) {
    for (int i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol)) fail_msg("[%d]: %.9g, expected %.9g", i, (double)got[i], want[i]);
}

/* dim 4: frequencies 1 and 10000^(-1/2) = 0.01 */
static void test_timestep_default(void **st) {
    (void)st;
    cq_dit_tproj p = {.dim = 4, .flip_sin_to_cos = true, .scale = 1.0f, .max_period = 10000.0f};
    float t[2] = {0.0f, 1.0f}, out[8];
    cq_dit_timestep_features(&p, t, 2, out);
    const double want[8] = {1, 1, 0, 0, 0.540302306, 0.999950000, 0.841470985, 0.00999983333};
    near(out, want, 8, 2e-7);
    p.flip_sin_to_cos = false; /* [sin | cos] */
    cq_dit_timestep_features(&p, t + 1, 1, out);
    const double flip[4] = {0.841470985, 0.00999983333, 0.540302306, 0.999950000};
    near(out, flip, 4, 2e-7);
}

static void test_timestep_knobs(void **st) {
    (void)st;
    /* downscale_freq_shift 1: exponent / (half - 1), so the second frequency is 10000^-1 */
    cq_dit_tproj p = {.dim = 4, .flip_sin_to_cos = true, .downscale_freq_shift = 1.0f, .scale = 1.0f,
                      .max_period = 10000.0f};
    float t = 100.0f, out[6];
    cq_dit_timestep_features(&p, &t, 1, out);
    const double shift[4] = {0.862318872, 0.999950000, -0.506365641, 0.00999983333};
    near(out, shift, 4, 2e-6);
    /* scale 2 doubles every angle */
    p = (cq_dit_tproj){.dim = 4, .flip_sin_to_cos = true, .scale = 2.0f, .max_period = 10000.0f};
    t = 1.0f;
    cq_dit_timestep_features(&p, &t, 1, out);
    const double scale[4] = {-0.416146837, 0.999800007, 0.909297427, 0.0199986667};
    near(out, scale, 4, 2e-7);
    /* max_period 100: frequencies 1 and 0.1 */
    p = (cq_dit_tproj){.dim = 4, .flip_sin_to_cos = true, .scale = 1.0f, .max_period = 100.0f};
    t = 10.0f;
    cq_dit_timestep_features(&p, &t, 1, out);
    const double period[4] = {-0.839071529, 0.540302306, -0.544021111, 0.841470985};
    near(out, period, 4, 2e-6);
    /* dim 6: frequencies 10000^(-i/3) = 1, 0.0464158883, 0.00215443469 */
    p = (cq_dit_tproj){.dim = 6, .flip_sin_to_cos = true, .scale = 1.0f, .max_period = 10000.0f};
    t = 10.0f;
    cq_dit_timestep_features(&p, &t, 1, out);
    const double six[6] = {-0.839071529, cos(0.464158883), cos(0.0215443469), -0.544021111, sin(0.464158883),
                           sin(0.0215443469)};
    near(out, six, 6, 2e-6);
}

/* axes of 2 and 4 dims: frequencies [1] and [1, 0.01] */
static void test_rope_tables(void **st) {
    (void)st;
    cq_dit_rope r;
    const int dims[2] = {2, 4};
    assert_int_equal(cq_dit_rope_init(&r, 2, dims, 10000.0f), CQ_OK);
    assert_int_equal(r.half, 3);
    assert_true(r.freq[1][1] == 0.01f);
    const int32_t pos[4] = {3, -2, 0, 0};
    float c[6], s[6];
    cq_dit_rope_tables(&r, pos, 2, c, s);
    const double wc[6] = {-0.989992497, -0.416146837, 0.999800007, 1, 1, 1};
    const double ws[6] = {0.141120008, -0.909297427, -0.0199986667, 0, 0, 0};
    near(c, wc, 6, 2e-7);
    near(s, ws, 6, 2e-7);
    /* fractional positions */
    const float fpos[2] = {0.5f, 1.5f};
    cq_dit_rope_tables_f32(&r, fpos, 1, c, s);
    const double fc[3] = {0.877582562, 0.0707372017, 0.999887503}, fs[3] = {0.479425539, 0.997494987, 0.0149994375};
    near(c, fc, 3, 2e-7);
    near(s, fs, 3, 2e-7);
    /* an integer position as a float gives the same bits */
    const float ipos[2] = {3.0f, -2.0f};
    float c2[3], s2[3];
    cq_dit_rope_tables(&r, pos, 1, c, s);
    cq_dit_rope_tables_f32(&r, ipos, 1, c2, s2);
    assert_memory_equal(c, c2, sizeof c2);
    assert_memory_equal(s, s2, sizeof s2);
    const int odd[1] = {3};
    assert_int_equal(cq_dit_rope_init(&r, 1, odd, 10000.0f), CQ_ERR_INVALID_ARG);
    const int wide[1] = {130};
    assert_int_equal(cq_dit_rope_init(&r, 1, wide, 10000.0f), CQ_ERR_INVALID_ARG);
}

/* Z-Image's variant: frequencies and angles in f64, each angle rounded to f32 (theta 256, one axis of 6 dims:
 * frequencies 1, 256^(-1/3), 256^(-2/3)). At position 1001 the f32 product would give angles 157.647614 and
 * 24.8279419 (cos 0.842988858, 0.953907192) instead of 157.647629 and 24.8279438: the test tells them apart. */
static void test_rope_tables_f64(void **st) {
    (void)st;
    cq_dit_rope r;
    const int dims[1] = {6};
    assert_int_equal(cq_dit_rope_init_f64(&r, 1, dims, 256.0), CQ_OK);
    assert_true(r.f64);
    assert_int_equal(r.half, 3);
    const int32_t pos[2] = {1001, 0};
    float c[6], s[6];
    cq_dit_rope_tables(&r, pos, 2, c, s);
    const double wc[6] = {cos(1001.0), 0.842980650, 0.953907764, 1, 1, 1};
    const double ws[6] = {sin(1001.0), 0.537943885, -0.300099945, 0, 0, 0};
    near(c, wc, 6, 2e-7);
    near(s, ws, 6, 2e-7);
    const int odd[1] = {5};
    assert_int_equal(cq_dit_rope_init_f64(&r, 1, odd, 256.0), CQ_ERR_INVALID_ARG);
}

static void upload(cq_backend *be, cq_tensor *t, int64_t rows, int64_t cols, const float *v) {
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, rows, cols, t), CQ_OK);
    assert_int_equal(cq_tensor_upload(t, v, (size_t)(rows * cols) * sizeof(float)), CQ_OK);
}

static void test_modulation_groups(void **st) {
    (void)st;
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_tensor x, y, mod, in, w;
    const float xv[6] = {1, 3, 2, 2, 0, 4};
    /* row 0: scale [0.5, 0], gate [1, 2]; row 1: scale [-1, 1], gate [0.5, 0] */
    const float mv[8] = {0.5f, 0, 1, 2, -1, 1, 0.5f, 0};
    const float iv[6] = {1, 0, 0, 1, 1, 1}, wv[4] = {2, 0, 0, 3};
    upload(be, &x, 3, 2, xv);
    upload(be, &mod, 2, 4, mv);
    upload(be, &in, 3, 2, iv);
    upload(be, &w, 2, 2, wv);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 3, 2, &y), CQ_OK);
    const cq_dit_group g[2] = {{0, 1, 0}, {1, 2, 1}};
    const cq_dit_mod m = {.t = &mod, .dim = 2, .per_row = 2};
    cq_tensor v = cq_dit_mod_vec(&m, 1, 1);
    assert_int_equal(v.shape[0], 2);
    assert_int_equal(v.ndim, 1);
    /* LN([1, 3]) = [-1, 1] -> x (1 + [0.5, 0]); LN([2, 2]) = 0; LN([0, 4]) = [-1, 1] -> x (1 + [-1, 1]) */
    assert_int_equal(cq_dit_modulated_ln(be, g, 2, &y, &x, &m, 0, -1, 1e-6f), CQ_OK);
    float out[6];
    assert_int_equal(cq_tensor_download(&y, out, sizeof out), CQ_OK);
    const double wy[6] = {-1.5, 1, 0, 0, 0, 2};
    near(out, wy, 6, 2e-6);
    /* x += gate ⊙ (in · wᵀ): in · wᵀ = [[2, 0], [0, 3], [2, 3]], gates [1, 2] | [0.5, 0] | [0.5, 0] */
    assert_int_equal(cq_dit_gated_proj(be, g, 2, &x, &in, &w, NULL, &m, 1), CQ_OK);
    assert_int_equal(cq_tensor_download(&x, out, sizeof out), CQ_OK);
    const double wx[6] = {3, 3, 2, 2, 1, 4};
    near(out, wx, 6, 1e-6);
    /* with a shift (vector 1: [1, 2] | [0.5, 0]) and a bias [1, -1] */
    assert_int_equal(cq_dit_modulated_ln(be, g, 2, &y, &x, &m, 0, 1, 1e-6f), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, out, sizeof out), CQ_OK);
    /* LN([3, 3]) = 0, LN([2, 2]) = 0, LN([1, 4]) = [-1, 1] -> x (1 + [-1, 1]) */
    const double wys[6] = {1, 2, 0.5, 0, 0.5, 2};
    near(out, wys, 6, 2e-6);
    cq_tensor bias;
    const int64_t bshape[1] = {2};
    const float bv[2] = {1, -1};
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, bshape, &bias), CQ_OK);
    assert_int_equal(cq_tensor_upload(&bias, bv, sizeof bv), CQ_OK);
    /* in · wᵀ + b = [[3, -1], [1, 2], [3, 2]] */
    assert_int_equal(cq_dit_gated_proj(be, g, 2, &x, &in, &w, &bias, &m, 1), CQ_OK);
    assert_int_equal(cq_tensor_download(&x, out, sizeof out), CQ_OK);
    const double wxb[6] = {6, 1, 2.5, 2, 2.5, 4};
    near(out, wxb, 6, 1e-6);
    cq_tensor *all[] = {&x, &y, &mod, &in, &w, &bias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) cq_tensor_free(all[i]);
    cq_backend_free(be);
}

typedef struct counter {
    int calls;
    cq_status result;
} counter;

static cq_status count_ops(void *user) {
    counter *c = user;
    c->calls++;
    return c->result;
}

static void test_stepper_on_host(void **st) {
    (void)st;
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    assert_false(cq_backend_can_record(be));
    cq_dit_stepper s = {0};
    counter c = {0, CQ_OK};
    for (int i = 0; i < 3; i++) assert_int_equal(cq_dit_stepper_run(&s, be, count_ops, &c, "test"), CQ_OK);
    /* a host backend runs every step op by op and never records */
    assert_int_equal(c.calls, 3);
    assert_int_equal(s.direct_steps, 3);
    assert_null(s.rec);
    c.result = CQ_ERR_NUMERIC; /* a failing step is reported and not counted */
    assert_int_equal(cq_dit_stepper_run(&s, be, count_ops, &c, "test"), CQ_ERR_NUMERIC);
    assert_int_equal(c.calls, 4);
    assert_int_equal(s.direct_steps, 3);
    cq_dit_stepper_free(&s);
    assert_int_equal(s.direct_steps, 0);
    cq_backend_free(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timestep_default), cmocka_unit_test(test_timestep_knobs),
        cmocka_unit_test(test_rope_tables),
        cmocka_unit_test(test_rope_tables_f64),      cmocka_unit_test(test_modulation_groups),
        cmocka_unit_test(test_stepper_on_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
