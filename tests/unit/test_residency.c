/*
 * test_residency.c — the per-phase residency planner (pipelines/residency.h):
 * which plan each budget gets, the bytes it plans per phase, the smallest
 * budget named when nothing fits, and the driver's bind/release sequence.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/base.h"
#include "ops/ops.h"
#include "pipelines/residency.h"

#define GB (1000ull * 1000ull * 1000ull)

/* A model like Qwen-Image-2.1 in q8: a 16 GB tower (8 compact), a 13 GB denoiser (7 compact), a 0.5 GB VAE;
 * streamed, the tower keeps 0.1 GB of vectors on the device, the denoiser 0.05 GB, and their slots grow by the
 * payload slots. */
static cq_resid_need model(void) {
    cq_resid_need n = {0};
    n.weights[CQ_PART_TEXT][CQ_WEIGHTS_DEFAULT] = 16 * GB;
    n.weights[CQ_PART_TEXT][CQ_WEIGHTS_COMPACT] = 8 * GB;
    n.slot[CQ_PART_TEXT][CQ_WEIGHTS_COMPACT] = GB / 4;
    n.weights[CQ_PART_DENOISER][CQ_WEIGHTS_DEFAULT] = 13 * GB;
    n.weights[CQ_PART_DENOISER][CQ_WEIGHTS_COMPACT] = 7 * GB;
    n.slot[CQ_PART_DENOISER][CQ_WEIGHTS_COMPACT] = GB / 2;
    n.weights[CQ_PART_CODEC][CQ_WEIGHTS_DEFAULT] = GB / 2;
    n.weights[CQ_PART_CODEC][CQ_WEIGHTS_COMPACT] = GB / 4;
    n.slot[CQ_PART_CODEC][CQ_WEIGHTS_COMPACT] = GB / 8;
    n.weights[CQ_PART_TEXT][CQ_WEIGHTS_STREAMED] = GB / 10;
    n.slot[CQ_PART_TEXT][CQ_WEIGHTS_STREAMED] = GB / 2;
    n.weights[CQ_PART_DENOISER][CQ_WEIGHTS_STREAMED] = GB / 20;
    n.slot[CQ_PART_DENOISER][CQ_WEIGHTS_STREAMED] = GB;
    n.weights[CQ_PART_CODEC][CQ_WEIGHTS_STREAMED] = GB / 8;
    n.slot[CQ_PART_CODEC][CQ_WEIGHTS_STREAMED] = GB / 4;
    n.act[CQ_RESID_TEXT] = GB;
    n.act[CQ_RESID_DENOISE] = 2 * GB;
    n.act[CQ_RESID_DECODE] = 3 * GB;
    return n;
}

static void test_levels_by_budget(void **state) {
    (void)state;
    const cq_resid_need n = model();
    cq_resid_plan p;
    /* no budget: everything bound, the default form */
    assert_int_equal(cq_resid_plan_make(&n, 0, "m", &p), CQ_OK);
    assert_int_equal(p.level, 0);
    for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++)
        for (int part = 0; part < CQ_PART_COUNT; part++) assert_true(p.keep[ph][part]);

    /* all resident: 16 + 13 + 0.5 GB of weights and the largest phase's 3 GB */
    assert_int_equal(cq_resid_plan_make(&n, 40 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 1);
    assert_int_equal(p.peak, 32 * GB + GB / 2);
    assert_int_equal(p.phase_bytes[CQ_RESID_TEXT], 30 * GB + GB / 2);
    assert_int_equal(p.mode[CQ_PART_DENOISER], CQ_WEIGHTS_DEFAULT);

    /* phased: text 16.5 + 1, denoise 13.5 + 2, decode with the denoiser 16.5 (it fits under 17.5) */
    assert_int_equal(cq_resid_plan_make(&n, 32 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 2);
    assert_false(p.keep[CQ_RESID_DENOISE][CQ_PART_TEXT]);
    assert_true(p.keep[CQ_RESID_TEXT][CQ_PART_TEXT]);
    assert_true(p.keep[CQ_RESID_DECODE][CQ_PART_DENOISER]);
    assert_int_equal(p.phase_bytes[CQ_RESID_TEXT], 17 * GB + GB / 2);
    assert_int_equal(p.phase_bytes[CQ_RESID_DENOISE], 15 * GB + GB / 2);
    assert_int_equal(p.phase_bytes[CQ_RESID_DECODE], 16 * GB + GB / 2);
    assert_int_equal(p.peak, 17 * GB + GB / 2);

    /* 17.5 GB still fits level 2 exactly */
    assert_int_equal(cq_resid_plan_make(&n, 17 * GB + GB / 2, "m", &p), CQ_OK);
    assert_int_equal(p.level, 2);

    /* 16 GB: the tower's phase needs 17.5 in planes: level 4 (tower compact 8 + VAE 0.5 + slot 0.25 + 1) */
    assert_int_equal(cq_resid_plan_make(&n, 16 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 4);
    assert_int_equal(p.mode[CQ_PART_TEXT], CQ_WEIGHTS_COMPACT);
    assert_int_equal(p.mode[CQ_PART_DENOISER], CQ_WEIGHTS_COMPACT);
    assert_int_equal(p.mode[CQ_PART_CODEC], CQ_WEIGHTS_DEFAULT);
    assert_int_equal(p.phase_bytes[CQ_RESID_TEXT], 9 * GB + GB / 2 + GB / 4);
    assert_int_equal(p.phase_bytes[CQ_RESID_DENOISE], 9 * GB + GB / 2 + GB / 2);
    /* the decode beside the compact denoiser: 7 + 0.5 + 0.5 slot + 3 = 11 fits, so it stays */
    assert_true(p.keep[CQ_RESID_DECODE][CQ_PART_DENOISER]);

    /* 10 GB: level 4 still, the decode releases the denoiser (11 > 10): 0.5 + 3 */
    assert_int_equal(cq_resid_plan_make(&n, 10 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 4);
    assert_false(p.keep[CQ_RESID_DECODE][CQ_PART_DENOISER]);
    assert_int_equal(p.phase_bytes[CQ_RESID_DECODE], 3 * GB + GB / 2);
    assert_int_equal(p.peak, 10 * GB);
    char line[256];
    cq_resid_plan_describe(&p, line, sizeof line);
    assert_non_null(strstr(line, "phased"));
    assert_non_null(strstr(line, "text encoder, denoiser"));
}

static void test_level3_before_4(void **state) {
    (void)state;
    /* a tower that fits in planes beside the VAE, a denoiser that does not: only the denoiser goes compact */
    cq_resid_need n = model();
    n.weights[CQ_PART_TEXT][CQ_WEIGHTS_DEFAULT] = 4 * GB;
    cq_resid_plan p;
    assert_int_equal(cq_resid_plan_make(&n, 12 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 3);
    assert_int_equal(p.mode[CQ_PART_TEXT], CQ_WEIGHTS_DEFAULT);
    assert_int_equal(p.mode[CQ_PART_DENOISER], CQ_WEIGHTS_COMPACT);
}

static void test_streamed(void **state) {
    (void)state;
    const cq_resid_need n = model();
    cq_resid_plan p;
    /* 9.6 GB: the tower fits compact (8 + .25 + .25 + 1 = 9.5), the denoiser not (9.75): level 6, keeping what
     * fits beside the rest of its phase (9.6 - (.05 + .25 + 1 + 2) = 6.3 of its 6.95 GB of matrices) */
    assert_int_equal(cq_resid_plan_make(&n, 9 * GB + 6 * GB / 10, "m", &p), CQ_OK);
    assert_int_equal(p.level, 6);
    assert_int_equal(p.mode[CQ_PART_DENOISER], CQ_WEIGHTS_STREAMED);
    assert_int_equal(p.mode[CQ_PART_TEXT], CQ_WEIGHTS_COMPACT);
    assert_int_equal(p.stream_of[CQ_PART_DENOISER], 6 * GB + 95 * GB / 100);
    assert_int_equal(p.keep_bytes[CQ_PART_DENOISER], 6 * GB + 3 * GB / 10);
    assert_int_equal(cq_resid_streamed(&p, CQ_PART_DENOISER), 65 * GB / 100);
    assert_int_equal(cq_resid_streamed(&p, CQ_PART_TEXT), 0);
    assert_int_equal(p.phase_bytes[CQ_RESID_DENOISE], 9 * GB + 6 * GB / 10);
    assert_int_equal(p.peak, 9 * GB + 6 * GB / 10);
    char line[320];
    cq_resid_plan_describe(&p, line, sizeof line);
    assert_non_null(strstr(line, "the denoiser streams 0.61 of 6.47 GiB per step"));

    /* 9 GB: the tower streams too; text 9 - (.1 + .25 + .5 + 1) = 7.15 kept of 7.9, denoise 5.7 of 6.95; the
     * decode does not fit beside the denoiser (.05 + 5.7 + .25 + 1 + 3 = 10) and goes alone */
    assert_int_equal(cq_resid_plan_make(&n, 9 * GB, "m", &p), CQ_OK);
    assert_int_equal(p.level, 7);
    assert_int_equal(p.mode[CQ_PART_TEXT], CQ_WEIGHTS_STREAMED);
    assert_int_equal(p.keep_bytes[CQ_PART_TEXT], 7 * GB + 15 * GB / 100);
    assert_int_equal(p.keep_bytes[CQ_PART_DENOISER], 5 * GB + 7 * GB / 10);
    assert_int_equal(cq_resid_streamed(&p, CQ_PART_DENOISER), GB + GB / 4);
    assert_false(p.keep[CQ_RESID_DECODE][CQ_PART_DENOISER]);
    assert_int_equal(p.peak, 9 * GB);

    /* a forced plan with no budget keeps nothing: every matrix streams */
    assert_int_equal(cq_resid_plan_at(&n, 7, 0, &p), CQ_OK);
    assert_int_equal(p.keep_bytes[CQ_PART_TEXT], 0);
    assert_int_equal(p.keep_bytes[CQ_PART_DENOISER], 0);
    assert_int_equal(cq_resid_streamed(&p, CQ_PART_TEXT), 7 * GB + 9 * GB / 10);

    /* a language model alone: planes, compact, then streamed */
    cq_resid_need lm = model();
    lm.act[CQ_RESID_TEXT] = GB;
    lm.act[CQ_RESID_DENOISE] = lm.act[CQ_RESID_DECODE] = 0;
    assert_int_equal(cq_resid_plan_single(&lm, 6 * GB, "lm", &p), CQ_OK);
    assert_int_equal(p.mode[CQ_PART_TEXT], CQ_WEIGHTS_STREAMED);
    assert_int_equal(p.keep_bytes[CQ_PART_TEXT], 6 * GB - (GB / 10 + GB / 2 + GB));
    assert_int_equal(p.peak, 6 * GB);
    cq_resid_plan_describe(&p, line, sizeof line);
    assert_non_null(strstr(line, "some streamed"));
    assert_int_equal(cq_resid_plan_single(&lm, GB, "lm", &p), CQ_ERR_NOMEM);
    assert_non_null(strstr(cq_last_error(), "1.49 GiB")); /* .1 + .5 + 1 = 1.6 GB */
    cq_clear_error();
}

static void test_too_small(void **state) {
    (void)state;
    const cq_resid_need n = model();
    cq_resid_plan p;
    /* the least is level 7 with nothing kept and the decode alone:
     * max(.1 + .25 + .5 + 1, .05 + .25 + 1 + 2, .25 + .125 + 3) = 3.375 GB */
    assert_int_equal(cq_resid_plan_make(&n, 3 * GB, "Model X", &p), CQ_ERR_NOMEM);
    const char *e = cq_last_error();
    assert_non_null(strstr(e, "Model X"));
    assert_non_null(strstr(e, "2.79 GiB"));  /* 3.0 GB = 2.79 GiB the budget */
    assert_non_null(strstr(e, "3.14 GiB"));  /* 3.375 GB = 3.14 GiB the least */
    assert_non_null(strstr(e, "--gpu-memory"));
    cq_clear_error();
    assert_int_equal(cq_resid_plan_make(&n, 3 * GB + 3 * GB / 8, "m", &p), CQ_OK);
    assert_int_equal(p.level, 7);
    assert_int_equal(p.peak, 3 * GB + 3 * GB / 8);
    /* 9.75 GB: everything compact fits exactly (level 5) */
    assert_int_equal(cq_resid_plan_make(&n, 9 * GB + 3 * GB / 4, "m", &p), CQ_OK);
    assert_int_equal(p.level, 5);
    assert_int_equal(p.peak, 9 * GB + 3 * GB / 4);
    assert_int_equal(cq_resid_plan_at(&n, 8, 0, &p), CQ_ERR_INVALID_ARG);
    cq_clear_error();
}

/* ---- the driver, with a recording pipeline ---- */
typedef struct rec {
    char ev[64];
    int n;
    cq_backend *be;
    cq_weight_mode modes[CQ_PART_COUNT];
    int fail_part; /* bind of this part fails (-1: none) */
} rec;

static cq_status rec_bind(void *pipe, cq_part part) {
    rec *r = pipe;
    if ((int)part == r->fail_part) return cq_fail(CQ_ERR_NOMEM, "no room");
    r->ev[r->n++] = (char)('A' + part);
    r->modes[part] = cq_backend_weight_mode(r->be);
    return CQ_OK;
}

static void rec_release(void *pipe, cq_part part) {
    rec *r = pipe;
    r->ev[r->n++] = (char)('a' + part);
}

static const cq_resid_ops k_rec = {rec_bind, rec_release};

static void test_driver(void **state) {
    (void)state;
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    rec r = {.be = be, .fail_part = -1};
    cq_resid d;
    cq_resid_init(&d, be, &k_rec, &r);
    /* no plan set: everything, once */
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_TEXT), CQ_OK);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK);
    assert_string_equal(r.ev, "ABC");
    /* phased, compact denoiser, decode without it */
    const cq_resid_need n = {.act = {0, 0, 1}};
    cq_resid_plan p;
    assert_int_equal(cq_resid_plan_at(&n, 3, 0, &p), CQ_OK);
    cq_resid_set_plan(&d, &p);
    r.n = 0;
    memset(r.ev, 0, sizeof r.ev);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_TEXT), CQ_OK);   /* b */
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK); /* a B */
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DECODE), CQ_OK);  /* b */
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_TEXT), CQ_OK);    /* A */
    assert_string_equal(r.ev, "baBbA");
    assert_int_equal(r.modes[CQ_PART_DENOISER], CQ_WEIGHTS_COMPACT);
    assert_int_equal(r.modes[CQ_PART_TEXT], CQ_WEIGHTS_DEFAULT);
    assert_int_equal(cq_backend_weight_mode(be), CQ_WEIGHTS_DEFAULT); /* restored after each stage */
    /* a failing bind says which part and phase, and leaves it unbound */
    r.fail_part = CQ_PART_DENOISER;
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_ERR_NOMEM);
    assert_non_null(strstr(cq_last_error(), "binding the denoiser for the denoise phase"));
    cq_clear_error();
    assert_false(d.bound[CQ_PART_DENOISER]);
    assert_false(d.bound[CQ_PART_TEXT]);
    r.fail_part = -1;
    /* streamed: bound in that mode; a plan keeping less binds the part again, one keeping more keeps the
     * binding and then states what it really keeps */
    assert_int_equal(cq_resid_plan_at(&n, 6, 0, &p), CQ_OK);
    p.keep_bytes[CQ_PART_DENOISER] = 2;
    cq_resid_set_plan(&d, &p);
    r.n = 0;
    memset(r.ev, 0, sizeof r.ev);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK); /* the codec is bound again in its new mode: c B C */
    assert_int_equal(r.modes[CQ_PART_DENOISER], CQ_WEIGHTS_STREAMED);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK); /* nothing */
    p.keep_bytes[CQ_PART_DENOISER] = 1;
    cq_resid_set_plan(&d, &p);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK); /* bB */
    assert_string_equal(r.ev, "cBCbB");
    const uint64_t denoise = p.phase_bytes[CQ_RESID_DENOISE];
    p.keep_bytes[CQ_PART_DENOISER] = 5;
    p.phase_bytes[CQ_RESID_DENOISE] = denoise + 4;
    cq_resid_set_plan(&d, &p);
    assert_int_equal(cq_resid_stage(&d, CQ_RESID_DENOISE), CQ_OK); /* nothing */
    assert_string_equal(r.ev, "cBCbB");
    assert_int_equal(d.plan.keep_bytes[CQ_PART_DENOISER], 1);
    assert_int_equal(d.plan.phase_bytes[CQ_RESID_DENOISE], denoise);
    r.n = 0;
    memset(r.ev, 0, sizeof r.ev);
    cq_resid_release_all(&d);
    assert_string_equal(r.ev, "bc");
    cq_backend_free(be);
}

static void test_estimates(void **state) {
    (void)state;
    /* 4160 tokens of a 3072-wide tower with a 12288 MLP in f32: (12*3072 + 3*12288) * 4 * 4160 + 512 MiB */
    assert_int_equal(cq_resid_act_tower(4160, 3072, 12288, 4),
                     4160ull * (12ull * 3072 + 3ull * 12288) * 4ull + 512ull * 1024 * 1024);
    assert_int_equal(cq_resid_act_decoder(1024 * 1024), 1024ull * 1024 * 2048 + 256ull * 1024 * 1024);
    assert_int_equal(cq_resid_act_tower(0, 8, 8, 2), cq_resid_act_tower(1, 8, 8, 2));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_by_budget), cmocka_unit_test(test_level3_before_4),
        cmocka_unit_test(test_too_small),        cmocka_unit_test(test_driver),
        cmocka_unit_test(test_estimates),        cmocka_unit_test(test_streamed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
