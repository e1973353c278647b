/* test_flow_sample.c — the flow-matching sampler's data-driven variants
 * against hand-computed values: schedules (static shift, dynamic exponential
 * and linear shift, terminal stretch), timestep transforms, guidance
 * (CFG from the negative or the positive, per-row and capped
 * renormalisation, truncation) and the loop itself over a scripted
 * denoiser whose velocity is a constant per conditioning. */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "pipelines/flow_sample.h"
#include "testutil.h"

static cq_flow_config base_config(void) {
    cq_flow_config c = {.num_train_timesteps = 1000, .shift = 1.0, .base_image_seq_len = 256,
                        .max_image_seq_len = 512, .shift_type = CQ_FLOW_SHIFT_EXPONENTIAL};
    return c;
}

static void make(const cq_flow_config *c, int steps, int64_t L, cq_flow_schedule *s) {
    assert_int_equal(cq_flow_schedule_make(c, steps, L, s), CQ_OK);
    assert_int_equal(s->steps, steps);
    assert_true(s->sigmas[steps] == 0.0f);
}

static void test_static_shift(void **state) {
    (void)state;
    cq_flow_config c = base_config();
    c.shift = 3.0; /* s' = 3s / (1 + 2s): 1 -> 1, 0.5 -> 1.5 / 2 */
    cq_flow_schedule s;
    make(&c, 2, 1000, &s);
    assert_true(s.sigmas[0] == 1.0f && s.sigmas[1] == 0.75f);
    assert_true(s.timesteps[0] == 1000.0f && s.timesteps[1] == 750.0f);
    assert_true(isnan(s.mu));
    cq_flow_schedule_free(&s);
}

static void test_dynamic_shift(void **state) {
    (void)state;
    cq_flow_config c = base_config();
    c.use_dynamic_shifting = true;
    c.base_shift = 0.0;
    c.max_shift = 2.0;
    c.base_image_seq_len = 0;
    c.max_image_seq_len = 100;
    cq_flow_schedule s;
    /* exponential, L = 1: mu = 2 / 100 = 0.02, s' = e / (e + (1/s - 1)) with e = float(e^0.02); 0.5 -> e / (e + 1) */
    make(&c, 2, 1, &s);
    const float e = (float)exp(0.02);
    assert_true(s.sigmas[1] == e / (e + 1.0f));
    assert_true(fabs(s.mu - 0.02) < 1e-15);
    cq_flow_schedule_free(&s);
    /* linear, L = 100: mu = 2, s' = 2 / (2 + 1/s - 1): 0.5 -> 2/3 */
    c.shift_type = CQ_FLOW_SHIFT_LINEAR;
    make(&c, 2, 100, &s);
    assert_true(s.mu == 2.0);
    assert_true(s.sigmas[0] == 1.0f);
    assert_true(s.sigmas[1] == 2.0f / 3.0f);
    cq_flow_schedule_free(&s);
}

static void test_terminal_stretch(void **state) {
    (void)state;
    cq_flow_config c = base_config();
    c.shift_terminal = 0.75; /* z = 1 - s = (0, 0.5); f = 0.5 / 0.25 = 2; s = 1 - z / 2 = (1, 0.75) */
    cq_flow_schedule s;
    make(&c, 2, 1000, &s);
    assert_true(s.sigmas[0] == 1.0f && s.sigmas[1] == 0.75f);
    cq_flow_schedule_free(&s);
    /* four steps: lin (1, 0.75, 0.5, 0.25), z_last 0.75, f = 3, s = 1 - z/3; the last ends at 0.75 */
    make(&c, 4, 1000, &s);
    assert_true(s.sigmas[1] == 1.0f - 0.25f / 3.0f);
    assert_true(s.sigmas[3] == 0.75f);
    cq_flow_schedule_free(&s);
}

static void test_timestep_transforms(void **state) {
    (void)state;
    cq_flow_timestep t = {.kind = CQ_FLOW_T_SIGMA};
    assert_true(cq_flow_timestep_apply(&t, 750.0f, 1000) == 0.75f);
    assert_true(cq_flow_timestep_apply(&t, 750.0f, 1000) == cq_flow_model_timestep(750.0f, false, false));
    t.kind = CQ_FLOW_T_ONE_MINUS;
    assert_true(cq_flow_timestep_apply(&t, 750.0f, 1000) == 0.25f);
    t.kind = CQ_FLOW_T_RAW;
    assert_true(cq_flow_timestep_apply(&t, 750.0f, 1000) == 750.0f);
    /* bf16: 300 is exact, 0.3 rounds to 1.0011010b x 2^-2 = 0.30078125 */
    t = (cq_flow_timestep){.kind = CQ_FLOW_T_SIGMA, .bf16 = true};
    assert_true(cq_flow_timestep_apply(&t, 300.0f, 1000) == 0.30078125f);
    assert_true(cq_flow_timestep_apply(&t, 300.0f, 1000) == cq_flow_model_timestep(300.0f, true, false));
    /* CUDA-style division: a multiply by float(1/1000) */
    t = (cq_flow_timestep){.kind = CQ_FLOW_T_SIGMA, .cuda_style = true};
    assert_true(cq_flow_timestep_apply(&t, 333.0f, 1000) == 333.0f * (1.0f / 1000.0f));
    assert_true(cq_flow_timestep_apply(&t, 333.0f, 1000) == cq_flow_model_timestep(333.0f, false, true));
}

static void test_guidance_combinations(void **state) {
    (void)state;
    const float pos[4] = {3, 4, 0, 0}, neg[4] = {0, 4, 0, 0};
    float out[4];
    cq_guidance g = {.kind = CQ_GUIDANCE_CFG, .scale = 2.0};
    cq_guidance_combine(&g, out, pos, neg, 2, 2); /* neg + 2 (pos - neg) */
    assert_true(out[0] == 6.0f && out[1] == 4.0f && out[2] == 0.0f && out[3] == 0.0f);
    g.kind = CQ_GUIDANCE_CFG_POS; /* pos + 2 (pos - neg) */
    cq_guidance_combine(&g, out, pos, neg, 2, 2);
    assert_true(out[0] == 9.0f && out[1] == 4.0f);
    /* per-row renormalisation: (6, 4) has norm sqrt(52), the positive's row 5; the zero row stays zero */
    g = (cq_guidance){.kind = CQ_GUIDANCE_CFG, .scale = 2.0, .norm = CQ_GUIDANCE_NORM_ROWS};
    cq_guidance_combine(&g, out, pos, neg, 2, 2);
    const float k = 5.0f / (float)sqrt(52.0);
    assert_true(out[0] == 6.0f * k && out[1] == 4.0f * k);
    assert_float_equal(out[0], 4.160251, 1e-6);
    assert_float_equal(out[1], 2.773501, 1e-6);
    assert_true(out[2] == 0.0f && out[3] == 0.0f);
    /* the same into the positive itself */
    float p2[4];
    memcpy(p2, pos, sizeof p2);
    cq_guidance_combine(&g, p2, p2, neg, 2, 2);
    assert_memory_equal(p2, out, sizeof out);
    /* cap at 1.2 x |pos| = 6: (6, 8) of norm 10 scales by 0.6; at 3 x (15) it is left alone */
    const float pc[2] = {3, 4}, nc[2] = {0, 0};
    g = (cq_guidance){.kind = CQ_GUIDANCE_CFG, .scale = 2.0, .norm = CQ_GUIDANCE_NORM_CAP, .norm_cap = 1.2};
    cq_guidance_combine(&g, out, pc, nc, 1, 2);
    assert_float_equal(out[0], 3.6, 1e-6);
    assert_float_equal(out[1], 4.8, 1e-6);
    g.norm_cap = 3.0;
    cq_guidance_combine(&g, out, pc, nc, 1, 2);
    assert_true(out[0] == 6.0f && out[1] == 8.0f);
}

static void test_guidance_truncation(void **state) {
    (void)state;
    cq_flow_config c = base_config();
    c.shift = 3.0;
    cq_flow_schedule s; /* timesteps 1000, 750: progress 0, 0.25 */
    make(&c, 2, 1000, &s);
    cq_guidance g = {.kind = CQ_GUIDANCE_CFG, .scale = 3.0};
    assert_true(cq_guidance_active(&g, &s, 1000, 0) && cq_guidance_active(&g, &s, 1000, 1));
    g.truncate_after = 0.2; /* no effect until truncation is asked for */
    assert_true(cq_guidance_active(&g, &s, 1000, 1));
    g.truncate = true;
    assert_true(cq_guidance_active(&g, &s, 1000, 0));
    assert_false(cq_guidance_active(&g, &s, 1000, 1));
    g.truncate_after = 0.25; /* off only above the fraction */
    assert_true(cq_guidance_active(&g, &s, 1000, 1));
    g.truncate_after = 0.0; /* the reference's cfg_truncation 0: only the first step (progress 0) is guided */
    assert_true(cq_guidance_active(&g, &s, 1000, 0));
    assert_false(cq_guidance_active(&g, &s, 1000, 1));
    g.truncate_after = -0.5; /* below 0: none */
    assert_false(cq_guidance_active(&g, &s, 1000, 0));
    g.truncate_after = 7.0; /* above 1: all */
    assert_true(cq_guidance_active(&g, &s, 1000, 0) && cq_guidance_active(&g, &s, 1000, 1));
    g.kind = CQ_GUIDANCE_NONE;
    assert_false(cq_guidance_active(&g, &s, 1000, 0));
    cq_flow_schedule_free(&s);
}

/* ---- the loop over a scripted denoiser ---- */
typedef struct fake_dn {
    float v_pos, v_neg;
    int calls;
    float t[8];
    int cancel_at; /* on_step returns 1 at this step (0: never) */
} fake_dn;

static int pos_cond, neg_cond;

static cq_status fake_step(void *self, void *cond, const float *x, float t, float *velocity) {
    (void)x;
    fake_dn *f = self;
    if (f->calls < 8) f->t[f->calls] = t;
    f->calls++;
    velocity[0] = cond == &pos_cond ? f->v_pos : f->v_neg;
    return CQ_OK;
}

static int fake_on_step(int step, int n, void *user) {
    (void)n;
    const fake_dn *f = user;
    return f->cancel_at && step == f->cancel_at;
}

static cq_status run_signed(fake_dn *f, const cq_guidance *g, bool negate, float *x) {
    cq_flow_config c = base_config();
    c.shift = 3.0;
    cq_flow_schedule s; /* sigmas 1, 0.75, 0 */
    make(&c, 2, 1000, &s);
    const cq_denoiser dn = {.self = f, .channels = 1, .step = fake_step};
    const cq_flow_sample_opts o = {.sch = &s, .num_train_timesteps = 1000, .timestep = {.kind = CQ_FLOW_T_SIGMA},
                                   .guidance = *g, .dn = &dn, .pos = &pos_cond,
                                   .neg = g->kind ? &neg_cond : NULL, .tokens = 1, .on_step = fake_on_step,
                                   .user = f, .negate = negate};
    *x = 0.0f;
    cq_status st = cq_flow_sample(&o, x);
    cq_flow_schedule_free(&s);
    return st;
}

static cq_status run(fake_dn *f, const cq_guidance *g, float *x) { return run_signed(f, g, false, x); }

static void test_sampler_loop(void **state) {
    (void)state;
    float x;
    /* no guidance: x = 0 + (0.75 - 1) * 1 + (0 - 0.75) * 1 = -1, timesteps 1 and 0.75 */
    fake_dn f = {.v_pos = 1, .v_neg = -1};
    cq_guidance g = {0};
    assert_int_equal(run(&f, &g, &x), CQ_OK);
    assert_true(x == -1.0f);
    assert_int_equal(f.calls, 2);
    assert_true(f.t[0] == 1.0f && f.t[1] == 0.75f);
    /* CFG 3: -1 + 3 (1 - -1) = 5 at both steps: x = -5 */
    f = (fake_dn){.v_pos = 1, .v_neg = -1};
    g = (cq_guidance){.kind = CQ_GUIDANCE_CFG, .scale = 3.0};
    assert_int_equal(run(&f, &g, &x), CQ_OK);
    assert_true(x == -5.0f);
    assert_int_equal(f.calls, 4);
    /* truncated after 0.2: the second step is unguided and runs no negative pass: -1.25 - 0.75 */
    f = (fake_dn){.v_pos = 1, .v_neg = -1};
    g.truncate = true;
    g.truncate_after = 0.2;
    assert_int_equal(run(&f, &g, &x), CQ_OK);
    assert_true(x == -2.0f);
    assert_int_equal(f.calls, 3);
    /* a denoiser that predicts -v (Z-Image): the guidance combines the raw outputs, pos + 3 (pos - neg) = 7,
     * then the sign flips: x = 0 + (0.75 - 1)(-7) + (0 - 0.75)(-7) = 7 */
    f = (fake_dn){.v_pos = 1, .v_neg = -1};
    g = (cq_guidance){.kind = CQ_GUIDANCE_CFG_POS, .scale = 3.0};
    assert_int_equal(run_signed(&f, &g, true, &x), CQ_OK);
    assert_true(x == 7.0f);
    f = (fake_dn){.v_pos = 1, .v_neg = -1};
    g = (cq_guidance){0};
    assert_int_equal(run_signed(&f, &g, true, &x), CQ_OK);
    assert_true(x == 1.0f);
    /* a non-finite velocity names its step; cancellation stops after the step */
    f = (fake_dn){.v_pos = NAN};
    g = (cq_guidance){0};
    assert_int_equal(run(&f, &g, &x), CQ_ERR_NUMERIC);
    assert_non_null(strstr(cq_last_error(), "step 1"));
    f = (fake_dn){.v_pos = 1, .cancel_at = 1};
    assert_int_equal(run(&f, &g, &x), CQ_ERR_INTERRUPTED);
    assert_int_equal(f.calls, 1);
    assert_true(x == -0.25f);
    /* guidance without a negative conditioning is refused before any step */
    cq_flow_schedule s = {0};
    const cq_denoiser dn = {.self = &f, .channels = 1, .step = fake_step};
    const cq_flow_sample_opts bad = {.sch = &s, .num_train_timesteps = 1000, .dn = &dn, .pos = &pos_cond,
                                     .tokens = 1, .guidance = {.kind = CQ_GUIDANCE_CFG, .scale = 2}};
    assert_int_equal(cq_flow_sample(&bad, &x), CQ_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_shift),        cmocka_unit_test(test_dynamic_shift),
        cmocka_unit_test(test_terminal_stretch),    cmocka_unit_test(test_timestep_transforms),
        cmocka_unit_test(test_guidance_combinations), cmocka_unit_test(test_guidance_truncation),
        cmocka_unit_test(test_sampler_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
