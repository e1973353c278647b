/*
 * test_qwen3vl_vision.c — the Qwen3-VL vision tower against transformers'
 * Qwen3VLVisionModel, and the deepstack rows in the language model (golden
 * data made by tools/golden_qwen3vl_vision.py in tests/golden/qwen3vl_vision/),
 * on the backend named by the one argument (testutil.h: `test_qwen3vl_vision
 * cpu`, label unit; `... cuda` as test_qwen3vl_vision_cuda, label gpu; `...
 * vulkan`). Exits 77 (skipped) where the backend is not built or no device is
 * present, and when the golden folder is absent.
 *
 * The golden folder's model/ (a tiny random Qwen3VLForConditionalGeneration,
 * bf16 values) is converted to f32 by the library's convert, as a user would.
 * Errors are max|err| / RMS(reference) per tensor.
 *  - Every case (grids 8x12, 4x10, two frames of 4x6, the first two in one
 *    call): the output, the deepstack outputs and the last block's output
 *    within 1e-4 on the host, within a quarter of the case's bf16 error (the
 *    reference's own, index.json) on a device; on the host also block 0's
 *    input (patch and interpolated position embeddings) and every block.
 *  - The language model on a sequence with both images of the two-image
 *    case, the tower's rows and deepstack rows from this code: the positions
 *    (cq_qwen3_rope_index) exactly, every layer's state and the final norm
 *    within 1e-4 (host) or a quarter of the bf16 error (device); without
 *    the deepstack rows the states are far off (the injection is what is
 *    tested).
 *  - Host: the two-image call gives each image's own result (to 1e-5), the
 *    pack matches the tensor table, the tower under the text encoder's `te.`
 *    prefix and under the older `visual.` names gives the same output bit
 *    for bit, and bad layouts, row counts, non-finite pixels, configs,
 *    deepstack arguments and missing tensors are refused with messages
 *    naming them; the first case on the plain-C reference backend.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"
#include "format/cmf.h"
#include "models/qwen3.h"
#include "models/qwen3vl_vision.h"
#include "models/tables.h"
#include "vision_golden.h"

#define QV_DIR CQ_SOURCE_DIR "/tests/golden/qwen3vl_vision"
#define F32_BOUND 1e-4
#define SPLIT_BOUND 1e-5
#define N_CASES 4

static tu_backend_arg g_arg;
static const char *const k_cases[N_CASES] = {"a", "b", "v", "ab"};

static tv_golden g_gold;
static cq_cmf *g_cmf; /* g_gold.cmf */
static cq_backend *g_be;
static cq_qwen3vl_vision *g_m;
static cJSON *g_index; /* g_gold.index */

static int setup(void **state) {
    (void)state;
    if (tv_open(&g_gold, QV_DIR, "qwen3vl_vision") != 0) return -1;
    g_cmf = g_gold.cmf;
    g_index = g_gold.index;
    if (tu_backend_create(&g_arg, 0, &g_be) != CQ_OK || cq_qwen3vl_vision_load(g_cmf, "", g_be, &g_m) != CQ_OK) {
        fprintf(stderr, "load: %s\n", cq_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_qwen3vl_vision_free(g_m);
    cq_backend_free(g_be);
    tv_close(&g_gold);
    return 0;
}

static const cJSON *index_obj(const char *name) { return tv_case(&g_gold, name); }
static double case_num(const char *name, const char *key) { return tv_case_num(&g_gold, name, key); }
static float *gold_f32(const char *c, const char *what, size_t want) { return tv_f32(&g_gold, c, what, want); }
static int32_t *gold_i32(const char *c, const char *what, size_t *n) { return tv_i32(&g_gold, c, what, n); }

typedef tv_input qv_case;
static void case_open(const char *name, qv_case *q) {
    tv_input_open(&g_gold, name, cq_qwen3vl_vision_patch_dim(cq_qwen3vl_vision_get_config(g_m)), q);
}

/* A forward's host outputs for a case, all of them. */
typedef struct qv_out {
    size_t n, units, D, O, nd;
    float *out, *deep, *embed, *blocks;
} qv_out;

static void run_case(cq_qwen3vl_vision *m, const qv_case *q, qv_out *r) {
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(m);
    r->n = (size_t)q->rows;
    r->units = r->n / 4;
    r->D = (size_t)c->hidden;
    r->O = (size_t)c->out_hidden;
    r->nd = (size_t)c->n_deepstack;
    r->out = malloc(r->units * r->O * sizeof(float));
    r->deep = malloc((r->nd ? r->nd : 1) * r->units * r->O * sizeof(float));
    r->embed = malloc(r->n * r->D * sizeof(float));
    r->blocks = malloc((size_t)c->depth * r->n * r->D * sizeof(float));
    assert_true(r->out && r->deep && r->embed && r->blocks);
    cq_qwen3vl_vision_outputs o = {.out = r->out, .deepstack = r->deep, .embed = r->embed, .blocks = r->blocks};
    if (cq_qwen3vl_vision_forward(m, q->pixels, q->rows, (const int32_t(*)[3])q->grid, q->n_images, &o) != CQ_OK)
        fail_msg("forward: %s", cq_last_error());
}

static void out_free(qv_out *r) {
    free(r->out);
    free(r->deep);
    free(r->embed);
    free(r->blocks);
}

static double rel(const float *got, const float *ref, size_t n) { return tv_rel(got, ref, n); }
static void check(const char *c, const char *what, double e, double bound) { tv_check(g_arg.name, c, what, e, bound); }

static void test_golden(void **state) {
    (void)state;
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    assert_true(c->n_deepstack >= 2);
    for (int k = 0; k < N_CASES; k++) {
        const char *name = k_cases[k];
        qv_case q;
        case_open(name, &q);
        qv_out r;
        run_case(g_m, &q, &r);
        const double b_out = g_arg.device ? case_num(name, "bf16_max_rel") / 4 : F32_BOUND;
        const double b_deep = g_arg.device ? case_num(name, "deepstack_bf16_max_rel") / 4 : F32_BOUND;
        const double b_last = g_arg.device ? case_num(name, "last_block_bf16_max_rel") / 4 : F32_BOUND;
        float *ref = gold_f32(name, "out", r.units * r.O);
        check(name, "out", rel(r.out, ref, r.units * r.O), b_out);
        free(ref);
        for (size_t d = 0; d < r.nd; d++) {
            char what[32];
            snprintf(what, sizeof what, "deepstack_%zu", d);
            ref = gold_f32(name, what, r.units * r.O);
            check(name, what, rel(r.deep + d * r.units * r.O, ref, r.units * r.O), b_deep);
            free(ref);
        }
        char last[32];
        snprintf(last, sizeof last, "block_%d", c->depth - 1);
        ref = gold_f32(name, last, r.n * r.D);
        check(name, last, rel(r.blocks + (size_t)(c->depth - 1) * r.n * r.D, ref, r.n * r.D), b_last);
        free(ref);
        if (!g_arg.device && q.n_images == 1) {
            ref = gold_f32(name, "embed", r.n * r.D);
            check(name, "embed", rel(r.embed, ref, r.n * r.D), F32_BOUND);
            free(ref);
            for (int l = 0; l < c->depth - 1; l++) {
                char what[32];
                snprintf(what, sizeof what, "block_%d", l);
                ref = gold_f32(name, what, r.n * r.D);
                check(name, what, rel(r.blocks + (size_t)l * r.n * r.D, ref, r.n * r.D), F32_BOUND);
                free(ref);
            }
        }
        out_free(&r);
        free(q.pixels);
    }
}

/* Images are independent: the two-image call is each image's own call, one after the other. */
static void test_split(void **state) {
    (void)state;
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    qv_case ab;
    case_open("ab", &ab);
    qv_out all;
    run_case(g_m, &ab, &all);
    const size_t K = (size_t)cq_qwen3vl_vision_patch_dim(c);
    size_t row = 0;
    for (int i = 0; i < 2; i++) {
        qv_case one = {.n_images = 1, .rows = (int64_t)ab.grid[i][0] * ab.grid[i][1] * ab.grid[i][2]};
        memcpy(one.grid[0], ab.grid[i], sizeof one.grid[0]);
        one.pixels = ab.pixels + row * K;
        qv_out r;
        run_case(g_m, &one, &r);
        check("ab", i ? "split_b" : "split_a", rel(all.out + row / 4 * r.O, r.out, r.units * r.O), SPLIT_BOUND);
        for (size_t d = 0; d < r.nd; d++)
            check("ab", i ? "split_b deep" : "split_a deep",
                  rel(all.deep + (d * all.units + row / 4) * r.O, r.deep + d * r.units * r.O, r.units * r.O),
                  SPLIT_BOUND);
        row += (size_t)one.rows;
        out_free(&r);
    }
    out_free(&all);
    free(ab.pixels);
}

static void note(void *user, const char *line) {
    (void)user;
    print_message("table: %s\n", line);
}

static const char *stem_of(const cq_cmf *cmf) {
    return cq_cmf_find(cmf, "model.visual.patch_embed.proj.weight") ? "model.visual." : "visual.";
}

static void test_table(void **state) {
    (void)state;
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    const char *stem = stem_of(g_cmf);
    cq_tt_list l = {0};
    assert_int_equal(cq_qwen3vl_vision_tensors(c, "", stem, &l), CQ_OK);
    /* patch (2), position table, merger (6), then 12 per block and 6 per deepstack merger */
    assert_int_equal(l.n, 9 + 12 * (size_t)c->depth + 6 * (size_t)c->n_deepstack);
    cq_tt_report rep = {0};
    assert_int_equal(cq_tt_compare("qwen3vl_vision", &l, g_cmf, stem, note, NULL, &rep), CQ_OK);
    assert_int_equal(rep.missing, 0);
    assert_int_equal(rep.unexpected, 0);
    assert_int_equal(rep.mismatched, 0);
    cq_tt_list_free(&l);
}

/* g_cmf rewritten to `path` (tv_repack): every name under `prefix`, the tower's "model.visual." renamed to
 * "visual." (older saves) when `old_names`. */
static void repack(const char *path, const char *prefix, bool old_names, const char *config, const char *drop) {
    tv_repack(g_cmf, path, prefix, old_names ? "model.visual." : NULL, "visual.", config, drop);
}

/* Load `path` under `prefix`: the status, and the model in *out when it loaded (else NULL). */
static cq_status load_file(const char *path, const char *prefix, cq_cmf **cmf, cq_qwen3vl_vision **out) {
    assert_int_equal(cq_cmf_open(path, cmf), CQ_OK);
    return cq_qwen3vl_vision_load(*cmf, prefix, g_be, out);
}

/* The tower under the text encoder's `te.` prefix, and under the older `visual.` names, gives the same result
 * bit for bit. */
static void test_prefix(void **state) {
    (void)state;
    assert_non_null(cq_cmf_find(g_cmf, "model.visual.pos_embed.weight"));
    qv_case q;
    case_open("a", &q);
    qv_out a;
    run_case(g_m, &q, &a);
    const struct {
        const char *prefix;
        bool old_names;
    } k_ways[] = {{"te.", false}, {"", true}, {"te.", true}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_ways); i++) {
        const char *path = tu_path(tu_tmpdir("qwen3vl_vision_te"), "te.cmf");
        repack(path, k_ways[i].prefix, k_ways[i].old_names, NULL, NULL);
        cq_cmf *cmf;
        cq_qwen3vl_vision *m = NULL;
        if (load_file(path, k_ways[i].prefix, &cmf, &m) != CQ_OK)
            fail_msg("load '%s'%s: %s", k_ways[i].prefix, k_ways[i].old_names ? " (visual.)" : "", cq_last_error());
        qv_out b;
        run_case(m, &q, &b);
        assert_memory_equal(a.out, b.out, a.units * a.O * sizeof(float));
        assert_memory_equal(a.deep, b.deep, a.nd * a.units * a.O * sizeof(float));
        if (k_ways[i].prefix[0]) {
            cq_qwen3vl_vision *none = NULL;
            tu_expect_err(cq_qwen3vl_vision_load(cmf, "", g_be, &none), CQ_ERR_MISSING, "'config_json' is missing");
            assert_null(none);
        }
        out_free(&b);
        cq_qwen3vl_vision_free(m);
        cq_cmf_close(cmf);
    }
    out_free(&a);
    free(q.pixels);
}

static char *config_with(const char *key, const char *value) { return tv_config_with(g_cmf, key, value); }

static void expect_load_err(const char *config, const char *drop, cq_status want, const char *needle) {
    const char *path = tu_path(tu_tmpdir("qwen3vl_vision_bad"), "bad.cmf");
    repack(path, "", false, config, drop);
    cq_cmf *cmf;
    cq_qwen3vl_vision *m = NULL;
    tu_expect_err(load_file(path, "", &cmf, &m), want, needle);
    assert_null(m);
    cq_cmf_close(cmf);
}

static void test_bad_config(void **state) {
    (void)state;
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    char past[32]; /* a deepstack index past the last block */
    snprintf(past, sizeof past, "[0, %d]", c->depth);
    const struct {
        const char *key, *value;
        cq_status want;
        const char *needle;
    } k_bad[] = {
        {"vision_config", NULL, CQ_ERR_MISSING, "no vision_config"},
        {"depth", NULL, CQ_ERR_PARSE, "vision_config.depth"},
        {"model_type", "\"qwen2_5_vl_vision\"", CQ_ERR_UNSUPPORTED, "not Qwen3-VL's"},
        {"hidden_act", "\"relu\"", CQ_ERR_UNSUPPORTED, "hidden_act 'relu'"},
        {"num_heads", "3", CQ_ERR_PARSE, "not a multiple of num_heads"},
        {"deepstack_visual_indexes", past, CQ_ERR_PARSE, "deepstack_visual_indexes[1]"},
        {"deepstack_visual_indexes", "[2, 0]", CQ_ERR_UNSUPPORTED, "strictly increasing"},
        {"deepstack_visual_indexes", NULL, CQ_ERR_PARSE, "default [8, 16, 24]"},
        {"num_position_embeddings", "49", CQ_ERR_SHAPE, "pos_embed.weight"},
        {"rope_parameters", "{\"rope_type\": \"yarn\"}", CQ_ERR_UNSUPPORTED, "rope_type 'yarn'"},
        {"out_hidden_size", "25", CQ_ERR_SHAPE, "merger.linear_fc2.weight"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_bad); i++) {
        char *cfg = config_with(k_bad[i].key, k_bad[i].value);
        expect_load_err(cfg, NULL, k_bad[i].want, k_bad[i].needle);
        cJSON_free(cfg);
    }
    const char *stem = stem_of(g_cmf);
    char drop[128];
    snprintf(drop, sizeof drop, "%sblocks.%d.mlp.linear_fc2.bias", stem, c->depth - 1);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, drop);
    snprintf(drop, sizeof drop, "%sdeepstack_merger_list.%d.norm.bias", stem, c->n_deepstack - 1);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, drop);
    snprintf(drop, sizeof drop, "%spos_embed.weight", stem);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, "pos_embed.weight");
    snprintf(drop, sizeof drop, "%spatch_embed.proj.weight", stem);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, "patch_embed.proj.weight");
}

static void test_bad_input(void **state) {
    (void)state;
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    qv_case q;
    case_open("a", &q);
    float out[32 * 24];
    cq_qwen3vl_vision_outputs o = {.out = out};
    int32_t odd[1][3] = {{1, 8, 11}};
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, 88, (const int32_t(*)[3])odd, 1, &o), CQ_ERR_SHAPE,
                  "multiples of 2");
    int32_t zero[1][3] = {{0, 8, 12}};
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, 0, (const int32_t(*)[3])zero, 1, &o), CQ_ERR_SHAPE,
                  "grid (0, 8, 12)");
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, q.rows - 4, (const int32_t(*)[3])q.grid, 1, &o),
                  CQ_ERR_SHAPE, "the grids imply 96");
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 0, &o),
                  CQ_ERR_INVALID_ARG, "images");
    int32_t huge[1][3] = {{1, 4096, 4096}};
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, 4096 * 4096, (const int32_t(*)[3])huge, 1, &o),
                  CQ_ERR_BOUNDS, "patch rows in one call");
    q.pixels[5 * cq_qwen3vl_vision_patch_dim(c) + 3] = NAN;
    tu_expect_err(cq_qwen3vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 1, &o),
                  CQ_ERR_INVALID_ARG, "pixel row 5");
    free(q.pixels);
}

/* The plain-C reference backend on the first case: the output within the host bound. */
static void test_ref_backend(void **state) {
    (void)state;
    cq_backend *be;
    assert_int_equal(cq_backend_create("ref", 1, &be), CQ_OK);
    cq_qwen3vl_vision *m;
    if (cq_qwen3vl_vision_load(g_cmf, "", be, &m) != CQ_OK) fail_msg("load on ref: %s", cq_last_error());
    qv_case q;
    case_open("a", &q);
    qv_out r;
    run_case(m, &q, &r);
    float *ref = gold_f32("a", "out", r.units * r.O);
    check("a", "out (ref)", rel(r.out, ref, r.units * r.O), F32_BOUND);
    free(ref);
    ref = gold_f32("a", "deepstack_1", r.units * r.O);
    check("a", "deep_1 (ref)", rel(r.deep + r.units * r.O, ref, r.units * r.O), F32_BOUND);
    free(ref);
    out_free(&r);
    free(q.pixels);
    cq_qwen3vl_vision_free(m);
    cq_backend_free(be);
}

/* The language model on text with both images of case "ab": this tower's rows replace the <|image_pad|>
 * embeddings and its deepstack rows are added after the first layers. */
static void test_deepstack_lm(void **state) {
    (void)state;
    cq_qwen3 *lm;
    if (cq_qwen3_load(g_cmf, "", g_be, &lm) != CQ_OK) fail_msg("load the language model: %s", cq_last_error());
    const cq_qwen3_config *lc = cq_qwen3_get_config(lm);
    const cq_qwen3vl_vision_config *vc = cq_qwen3vl_vision_get_config(g_m);
    qv_case q;
    case_open("ab", &q);
    qv_out r;
    run_case(g_m, &q, &r);
    size_t T, np;
    int32_t *ids = gold_i32("lm", "ids", &T), *pos = gold_i32("lm", "pos", &np);
    assert_int_equal(np, 3 * T);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(g_index, "tokens");
    const int32_t image_tok = cJSON_GetObjectItemCaseSensitive(tok, "image_token_id")->valueint;
    const int32_t start_tok = cJSON_GetObjectItemCaseSensitive(tok, "vision_start_token_id")->valueint;
    /* the positions as Qwen3-VL numbers them */
    int32_t *mine = malloc(3 * T * sizeof(int32_t));
    assert_non_null(mine);
    assert_int_equal(cq_qwen3_rope_index(ids, (int)T, image_tok, start_tok, (const int32_t(*)[3])q.grid, 2,
                                         vc->merge, mine, NULL), CQ_OK);
    assert_memory_equal(mine, pos, 3 * T * sizeof(int32_t));
    const size_t H = (size_t)lc->hidden, L = (size_t)lc->n_layers;
    assert_int_equal(H, r.O);
    float *hidden = malloc((L + 1) * T * H * sizeof(float)), *normed = malloc(T * H * sizeof(float));
    assert_true(hidden && normed);
    cq_qwen3_mm mm = {.positions = pos, .image_token = image_tok, .image_embeds = r.out, .n_image_rows = (int)r.units,
                      .deepstack = r.deep, .n_deepstack = (int)r.nd};
    cq_qwen3_outputs o = {.all_hidden = hidden, .normed = normed};
    if (cq_qwen3_forward_mm(lm, ids, (int)T, &mm, &o) != CQ_OK) fail_msg("forward_mm: %s", cq_last_error());
    float *ref = gold_f32("lm", "hidden", (L + 1) * T * H), *ref_n = gold_f32("lm", "normed", T * H);
    const double b_lm = g_arg.device ? case_num("lm", "bf16_max_rel") / 4 : F32_BOUND;
    for (size_t l = 0; l <= L; l++) {
        char what[32];
        snprintf(what, sizeof what, "lm state %zu", l);
        /* the device bound is the last state's; the earlier ones have seen fewer rounded layers */
        check("lm", what, rel(hidden + l * T * H, ref + l * T * H, T * H), b_lm);
    }
    check("lm", "lm normed", rel(normed, ref_n, T * H), g_arg.device ? b_lm * 2 : F32_BOUND);
    /* without the deepstack rows the states after the first layer are far off: the addition is what matched */
    mm.deepstack = NULL;
    mm.n_deepstack = 0;
    assert_int_equal(cq_qwen3_forward_mm(lm, ids, (int)T, &mm, &o), CQ_OK);
    const double off = rel(hidden + L * T * H, ref + L * T * H, T * H);
    print_message("%-8s lm  without deepstack: max|err|/RMS %.3e\n", g_arg.name, off);
    assert_true(off > 1e-2);
    /* the reference's own cross-check: the whole model from pixels gave the same last state */
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(index_obj("lm"), "whole_model_max_abs_diff");
    if (cJSON_IsNumber(d)) assert_true(d->valuedouble <= 1e-4 * fmax(1.0, case_num("lm", "last_rms")));
    else print_message("note: the reference's whole-model cross-check did not run\n");
    /* bad deepstack arguments */
    mm.deepstack = r.deep;
    mm.n_deepstack = (int)L + 1;
    tu_expect_err(cq_qwen3_forward_mm(lm, ids, (int)T, &mm, &o), CQ_ERR_INVALID_ARG, "deepstack levels");
    mm.n_deepstack = 0;
    tu_expect_err(cq_qwen3_forward_mm(lm, ids, (int)T, &mm, &o), CQ_ERR_INVALID_ARG, "deepstack levels");
    mm = (cq_qwen3_mm){.positions = pos, .image_token = image_tok, .deepstack = r.deep, .n_deepstack = 1};
    tu_expect_err(cq_qwen3_forward_mm(lm, ids, (int)T, &mm, &o), CQ_ERR_INVALID_ARG, "deepstack levels");
    free(ref);
    free(ref_n);
    free(hidden);
    free(normed);
    free(mine);
    free(ids);
    free(pos);
    out_free(&r);
    free(q.pixels);
    cq_qwen3_free(lm);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qwen3vl_vision", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    if (access(QV_DIR "/golden.safetensors", F_OK) != 0) {
        printf("test_qwen3vl_vision: skipped: the golden data is absent (%s; made by "
               "tools/golden_qwen3vl_vision.py)\n", QV_DIR);
        return TU_SKIP;
    }
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden),     cmocka_unit_test(test_deepstack_lm), cmocka_unit_test(test_split),
        cmocka_unit_test(test_table),      cmocka_unit_test(test_bad_input),    cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_bad_config), cmocka_unit_test(test_ref_backend),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_deepstack_lm),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qwen3vl_vision (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_qwen3vl_vision (host)", host, setup, teardown);
}
