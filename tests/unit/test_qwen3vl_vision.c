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
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/qwen3.h"
#include "models/qwen3vl_vision.h"
#include "models/tables.h"

#define QV_DIR CQ_SOURCE_DIR "/tests/golden/qwen3vl_vision"
#define F32_BOUND 1e-4
#define SPLIT_BOUND 1e-5
#define N_CASES 4

static tu_backend_arg g_arg;
static const char *const k_cases[N_CASES] = {"a", "b", "v", "ab"};

static cq_cmf *g_cmf;
static cq_backend *g_be;
static cq_qwen3vl_vision *g_m;
static cq_st *g_st;
static cJSON *g_index;

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("qwen3vl_vision");
    const char *path = tu_path(dir, "vision.cmf");
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(QV_DIR "/model", path, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) {
        fprintf(stderr, "convert: %s\n", cq_last_error());
        return -1;
    }
    if (cq_cmf_open(path, &g_cmf) != CQ_OK || tu_backend_create(&g_arg, 0, &g_be) != CQ_OK ||
        cq_qwen3vl_vision_load(g_cmf, "", g_be, &g_m) != CQ_OK) {
        fprintf(stderr, "open/load: %s\n", cq_last_error());
        return -1;
    }
    if (cq_st_open(QV_DIR "/golden.safetensors", &g_st) != CQ_OK) return -1;
    size_t len;
    uint8_t *idx = tu_read_file(QV_DIR "/index.json", &len);
    if (!idx) return -1;
    g_index = cJSON_ParseWithLength((const char *)idx, len);
    free(idx);
    return g_index ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_qwen3vl_vision_free(g_m);
    cq_backend_free(g_be);
    cq_cmf_close(g_cmf);
    cq_st_close(g_st);
    cJSON_Delete(g_index);
    return 0;
}

static const cJSON *index_obj(const char *name) {
    const cJSON *c = strcmp(name, "lm") == 0
                         ? cJSON_GetObjectItemCaseSensitive(g_index, "lm")
                         : cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g_index, "cases"), name);
    if (!c) fail_msg("index.json has no case %s", name);
    return c;
}

static double case_num(const char *name, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(index_obj(name), key);
    if (!cJSON_IsNumber(v)) fail_msg("index.json case %s lacks %s", name, key);
    return v->valuedouble;
}

static const cq_st_tensor *gold(const char *c, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "%s.%s", c, what);
    const cq_st_tensor *t = cq_st_find(g_st, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    return t;
}

static float *gold_f32(const char *c, const char *what, size_t want) {
    const cq_st_tensor *t = gold(c, what);
    if (t->dtype != CQ_ST_F32 || t->nelem != want)
        fail_msg("golden %s.%s: %llu elements (want %zu f32)", c, what, (unsigned long long)t->nelem, want);
    float *v;
    assert_int_equal(cq_st_read_all_f32(t, &v), CQ_OK);
    return v;
}

static int32_t *gold_i32(const char *c, const char *what, size_t *n) {
    const cq_st_tensor *t = gold(c, what);
    if (t->dtype != CQ_ST_I32) fail_msg("golden %s.%s is not I32", c, what);
    *n = (size_t)t->nelem;
    int32_t *v = malloc((*n ? *n : 1) * sizeof(int32_t));
    assert_non_null(v);
    memcpy(v, t->data, *n * sizeof(int32_t));
    return v;
}

/* One call's inputs: the grids and the pixel rows (each image's i8 values / 32, images in order). */
typedef struct qv_case {
    int32_t grid[CQ_QWEN3VL_VISION_MAX_IMAGES][3];
    int n_images;
    int64_t rows;
    float *pixels;
} qv_case;

static void case_open(const char *name, qv_case *q) {
    memset(q, 0, sizeof *q);
    const cq_qwen3vl_vision_config *c = cq_qwen3vl_vision_get_config(g_m);
    size_t n;
    int32_t *g = gold_i32(name, "grid", &n);
    assert_true(n % 3 == 0 && n / 3 >= 1 && n / 3 <= 2);
    q->n_images = (int)(n / 3);
    memcpy(q->grid, g, n * sizeof(int32_t));
    free(g);
    assert_int_equal(cq_qwen3vl_vision_rows(c, (const int32_t(*)[3])q->grid, q->n_images, &q->rows), CQ_OK);
    const size_t K = (size_t)cq_qwen3vl_vision_patch_dim(c);
    q->pixels = malloc((size_t)q->rows * K * sizeof(float));
    assert_non_null(q->pixels);
    const double scale = cJSON_GetObjectItemCaseSensitive(g_index, "pixel_scale")->valuedouble;
    const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(index_obj(name), "images");
    assert_int_equal(cJSON_GetArraySize(imgs), q->n_images);
    size_t at = 0;
    for (int i = 0; i < q->n_images; i++) {
        const cq_st_tensor *t = gold(cJSON_GetArrayItem(imgs, i)->valuestring, "pixels_q");
        assert_int_equal(t->dtype, CQ_ST_I8);
        const int64_t want = (int64_t)q->grid[i][0] * q->grid[i][1] * q->grid[i][2] * (int64_t)K;
        assert_int_equal((int64_t)t->nelem, want);
        for (uint64_t j = 0; j < t->nelem; j++) q->pixels[at++] = (float)((int8_t)t->data[j] * scale);
    }
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

static double rel(const float *got, const float *ref, size_t n) { return tu_max_rel(got, ref, n, tu_rms(ref, n)); }

static void check(const char *c, const char *what, double e, double bound) {
    print_message("%-8s %-3s %-13s max|err|/RMS %.3e (bound %.3e)\n", g_arg.name, c, what, e, bound);
    if (!(e <= bound)) fail_msg("%s %s: %.3e > %.3e", c, what, e, bound);
}

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

/* g_cmf rewritten to `path`: every name under `prefix`, the tower's "model.visual." renamed to "visual." (older
 * saves) when `old_names`, the config replaced by `config` (NULL: kept), the tensor `drop` (NULL: none) left out. */
static void repack(const char *path, const char *prefix, bool old_names, const char *config, const char *drop) {
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    size_t hl;
    const char *hdr = cq_cmf_header_json(g_cmf, &hl);
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, hl), CQ_OK);
    for (size_t i = 0; i < cq_cmf_tensor_count(g_cmf); i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(g_cmf, i);
        if (drop && strcmp(v->name, drop) == 0) continue;
        char name[512];
        const bool strip = old_names && strncmp(v->name, "model.visual.", 13) == 0;
        snprintf(name, sizeof name, "%s%s", prefix, strip ? v->name + 6 : v->name);
        const void *data = v->data;
        uint64_t nb = v->nbytes, shape[CQ_MAX_DIMS];
        memcpy(shape, v->shape, sizeof shape);
        if (config && strcmp(v->name, "config_json") == 0) {
            data = config;
            nb = shape[0] = strlen(config);
        }
        assert_int_equal(cq_cmf_writer_add(w, name, v->dtype, v->ndim, shape, data, nb), CQ_OK);
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("repack: %s", cq_last_error());
    cq_cmf_writer_free(w);
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

/* The pack's config with vision_config's member `key` set to the JSON `value`, or removed when value is NULL
 * (key "vision_config": the whole object removed); cJSON_free it. */
static char *config_with(const char *key, const char *value) {
    const cq_tensor_view *v = cq_cmf_find(g_cmf, "config_json");
    assert_non_null(v);
    cJSON *root = cJSON_ParseWithLength((const char *)v->data, (size_t)v->nbytes);
    assert_non_null(root);
    if (strcmp(key, "vision_config") == 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    } else {
        cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config");
        cJSON_DeleteItemFromObjectCaseSensitive(vc, key);
        if (value) cJSON_AddItemToObject(vc, key, cJSON_Parse(value));
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(s);
    return s;
}

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
