/*
 * test_qwen25vl_vision.c — the Qwen2.5-VL vision tower against transformers'
 * Qwen2_5_VisionTransformerPretrainedModel (golden data made by
 * tools/golden_qwen25vl_vision.py in tests/golden/qwen25vl_vision/), on the
 * backend named by the one argument (testutil.h: `test_qwen25vl_vision cpu`,
 * label unit; `... cuda` as test_qwen25vl_vision_cuda, label gpu; `...
 * vulkan`). Exits 77 (skipped) where the backend is not built or no device is
 * present, and when the golden folder is absent.
 *
 * The golden folder's model/ (a tiny random Qwen2_5_VLForConditionalGeneration,
 * bf16 values) is converted to f32 by the library's convert, as a user would.
 * Errors are max|err| / RMS(reference) per tensor.
 *  - Every case (grids 8x12 and 12x16, both in one call): the window index
 *    and window boundaries exactly; the output, the pre-merger hidden state
 *    and (host) every block's output within 1e-4 on the host; the output and
 *    the pre-merger state within a quarter of the case's bf16 error (the
 *    reference's own, index.json) on a device.
 *  - Host: the two-image call gives each image's own result (to 1e-5: only
 *    the summation order may differ), the pack matches the tensor table,
 *    the tower under the text encoder's `te.` prefix with transformers 5's
 *    names (model.visual.) gives the same output bit for bit, and bad
 *    layouts, row counts, non-finite pixels, configs and missing tensors are
 *    refused with messages naming them; the first case on the plain-C
 *    reference backend.
 *  - The towers' attention within row segments (kit/vision.h), one call
 *    for all segments, on random data against attention over each segment
 *    alone formed on the host in double: segments of unequal lengths (one
 *    row, a whole window's worth), a single segment (no bounds), within
 *    1e-4 on the host and 1e-3 on a device (f32 at head_dim 80); bad
 *    segment lists refused. It needs no golden data and runs without it.
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
#include "models/kit/vision.h"
#include "models/qwen25vl_vision.h"
#include "models/tables.h"
#include "vision_golden.h"

#define QV_DIR CQ_SOURCE_DIR "/tests/golden/qwen25vl_vision"
#define F32_BOUND 1e-4
#define SPLIT_BOUND 1e-5
#define N_CASES 3

static tu_backend_arg g_arg;
static const char *const k_cases[N_CASES] = {"a", "b", "ab"};

static tv_golden g_gold;
static cq_cmf *g_cmf; /* g_gold.cmf */
static cq_backend *g_be;
static cq_qwen25vl_vision *g_m;

static int setup(void **state) {
    (void)state;
    if (tv_open(&g_gold, QV_DIR, "qwen25vl_vision") != 0) return -1;
    g_cmf = g_gold.cmf;
    if (tu_backend_create(&g_arg, 0, &g_be) != CQ_OK || cq_qwen25vl_vision_load(g_cmf, "", g_be, &g_m) != CQ_OK) {
        fprintf(stderr, "load: %s\n", cq_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_qwen25vl_vision_free(g_m);
    cq_backend_free(g_be);
    tv_close(&g_gold);
    return 0;
}

static double case_num(const char *name, const char *key) { return tv_case_num(&g_gold, name, key); }
static float *gold_f32(const char *c, const char *what, size_t want) { return tv_f32(&g_gold, c, what, want); }
static int32_t *gold_i32(const char *c, const char *what, size_t *n) { return tv_i32(&g_gold, c, what, n); }

typedef tv_input qv_case;
static void case_open(const char *name, qv_case *q) {
    tv_input_open(&g_gold, name, cq_qwen25vl_vision_patch_dim(cq_qwen25vl_vision_get_config(g_m)), q);
}

static double rel(const float *got, const float *ref, size_t n) { return tv_rel(got, ref, n); }
static void check(const char *c, const char *what, double e, double bound) { tv_check(g_arg.name, c, what, e, bound); }

static void test_window_index(void **state) {
    (void)state;
    const cq_qwen25vl_vision_config *c = cq_qwen25vl_vision_get_config(g_m);
    for (int k = 0; k < N_CASES; k++) {
        qv_case q;
        case_open(k_cases[k], &q);
        size_t ni, nc;
        int32_t *wi = gold_i32(k_cases[k], "window_index", &ni), *cu = gold_i32(k_cases[k], "cu_window", &nc);
        const size_t units = (size_t)q.rows / 4;
        assert_int_equal(ni, units);
        int32_t *idx = malloc(units * sizeof(int32_t)), *cw = malloc((units + 1) * sizeof(int32_t));
        int nw;
        assert_int_equal(cq_qwen25vl_vision_window_index(c, (const int32_t(*)[3])q.grid, q.n_images, idx, cw, &nw),
                         CQ_OK);
        assert_int_equal((size_t)nw + 1, nc);
        assert_memory_equal(idx, wi, units * sizeof(int32_t));
        assert_memory_equal(cw, cu, nc * sizeof(int32_t));
        assert_true(nw >= 4); /* several windows per image: the window path matters */
        free(idx);
        free(cw);
        free(wi);
        free(cu);
        free(q.pixels);
    }
}

static void test_golden(void **state) {
    (void)state;
    const cq_qwen25vl_vision_config *c = cq_qwen25vl_vision_get_config(g_m);
    for (int k = 0; k < N_CASES; k++) {
        const char *name = k_cases[k];
        qv_case q;
        case_open(name, &q);
        const size_t n = (size_t)q.rows, D = (size_t)c->hidden, units = n / 4, O = (size_t)c->out_hidden;
        float *out = malloc(units * O * sizeof(float)), *pre = malloc(n * D * sizeof(float));
        float *blocks = malloc((size_t)c->depth * n * D * sizeof(float));
        assert_true(out && pre && blocks);
        cq_qwen25vl_vision_outputs o = {.out = out, .pre_merger = pre, .blocks = blocks};
        if (cq_qwen25vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, q.n_images, &o) != CQ_OK)
            fail_msg("forward %s: %s", name, cq_last_error());
        float *ref_out = gold_f32(name, "out", units * O), *ref_pre = gold_f32(name, "pre_merger", n * D);
        const double b_out = g_arg.device ? case_num(name, "bf16_max_rel") / 4 : F32_BOUND;
        const double b_pre = g_arg.device ? case_num(name, "pre_merger_bf16_max_rel") / 4 : F32_BOUND;
        check(name, "out", rel(out, ref_out, units * O), b_out);
        check(name, "pre_merger", rel(pre, ref_pre, n * D), b_pre);
        /* the last block's output is the merger's input */
        assert_memory_equal(blocks + (size_t)(c->depth - 1) * n * D, pre, n * D * sizeof(float));
        if (!g_arg.device && strcmp(name, "ab") != 0) {
            for (int l = 0; l < c->depth - 1; l++) {
                char what[32];
                snprintf(what, sizeof what, "block_%d", l);
                float *ref = gold_f32(name, what, n * D);
                check(name, what, rel(blocks + (size_t)l * n * D, ref, n * D), F32_BOUND);
                free(ref);
            }
        }
        free(ref_out);
        free(ref_pre);
        free(out);
        free(pre);
        free(blocks);
        free(q.pixels);
    }
}

/* Images are independent: the two-image call is each image's own call, one after the other. */
static void test_split(void **state) {
    (void)state;
    const cq_qwen25vl_vision_config *c = cq_qwen25vl_vision_get_config(g_m);
    qv_case ab;
    case_open("ab", &ab);
    const size_t O = (size_t)c->out_hidden, K = (size_t)cq_qwen25vl_vision_patch_dim(c);
    float *all = malloc((size_t)ab.rows / 4 * O * sizeof(float));
    assert_non_null(all);
    cq_qwen25vl_vision_outputs o = {.out = all};
    assert_int_equal(cq_qwen25vl_vision_forward(g_m, ab.pixels, ab.rows, (const int32_t(*)[3])ab.grid, 2, &o), CQ_OK);
    size_t row = 0;
    for (int i = 0; i < 2; i++) {
        const int64_t n = (int64_t)ab.grid[i][0] * ab.grid[i][1] * ab.grid[i][2];
        float *one = malloc((size_t)n / 4 * O * sizeof(float));
        assert_non_null(one);
        cq_qwen25vl_vision_outputs oi = {.out = one};
        assert_int_equal(cq_qwen25vl_vision_forward(g_m, ab.pixels + row * K, n, (const int32_t(*)[3])ab.grid[i], 1,
                                                    &oi), CQ_OK);
        double e = rel(all + row / 4 * O, one, (size_t)n / 4 * O);
        check("ab", i ? "split_b" : "split_a", e, SPLIT_BOUND);
        row += (size_t)n;
        free(one);
    }
    free(all);
    free(ab.pixels);
}

static void note(void *user, const char *line) {
    (void)user;
    print_message("table: %s\n", line);
}

static void test_table(void **state) {
    (void)state;
    const cq_qwen25vl_vision_config *c = cq_qwen25vl_vision_get_config(g_m);
    const char *stem = cq_cmf_find(g_cmf, "model.visual.patch_embed.proj.weight") ? "model.visual." : "visual.";
    cq_tt_list l = {0};
    assert_int_equal(cq_qwen25vl_vision_tensors(c, "", stem, &l), CQ_OK);
    assert_int_equal(l.n, 6 + 12 * (size_t)c->depth); /* patch + merger, then 12 per block */
    cq_tt_report rep = {0};
    assert_int_equal(cq_tt_compare("qwen25vl_vision", &l, g_cmf, stem, note, NULL, &rep), CQ_OK);
    assert_int_equal(rep.missing, 0);
    assert_int_equal(rep.unexpected, 0);
    assert_int_equal(rep.mismatched, 0);
    cq_tt_list_free(&l);
}

/* g_cmf rewritten to `path` (tv_repack): every name under `prefix`, "visual." renamed to "model.visual."
 * (transformers 5's layout) when `v5`. */
static void repack(const char *path, const char *prefix, bool v5, const char *config, const char *drop) {
    tv_repack(g_cmf, path, prefix, v5 ? "visual." : NULL, "model.visual.", config, drop);
}

/* Load `path` under `prefix`: the status, and the model in *out when it loaded (else NULL). */
static cq_status load_file(const char *path, const char *prefix, cq_cmf **cmf, cq_qwen25vl_vision **out) {
    assert_int_equal(cq_cmf_open(path, cmf), CQ_OK);
    return cq_qwen25vl_vision_load(*cmf, prefix, g_be, out);
}

/* The tower under the text encoder's `te.` prefix with transformers 5's names gives the same result, bit for bit. */
static void test_prefix(void **state) {
    (void)state;
    const char *path = tu_path(tu_tmpdir("qwen25vl_vision_te"), "te.cmf");
    repack(path, "te.", true, NULL, NULL);
    cq_cmf *cmf;
    cq_qwen25vl_vision *m = NULL;
    if (load_file(path, "te.", &cmf, &m) != CQ_OK) fail_msg("load te.: %s", cq_last_error());
    qv_case q;
    case_open("a", &q);
    const size_t n = (size_t)cq_qwen25vl_vision_get_config(m)->out_hidden * (size_t)q.rows / 4;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    assert_true(a && b);
    cq_qwen25vl_vision_outputs oa = {.out = a}, ob = {.out = b};
    assert_int_equal(cq_qwen25vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 1, &oa), CQ_OK);
    assert_int_equal(cq_qwen25vl_vision_forward(m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 1, &ob), CQ_OK);
    assert_memory_equal(a, b, n * sizeof(float));
    cq_qwen25vl_vision *none = NULL;
    tu_expect_err(cq_qwen25vl_vision_load(cmf, "", g_be, &none), CQ_ERR_MISSING, "'config_json' is missing");
    assert_null(none);
    cq_qwen25vl_vision_free(m);
    cq_cmf_close(cmf);
    free(a);
    free(b);
    free(q.pixels);
}

static char *config_with(const char *key, const char *value) { return tv_config_with(g_cmf, key, value); }

static void expect_load_err(const char *config, const char *drop, cq_status want, const char *needle) {
    const char *path = tu_path(tu_tmpdir("qwen25vl_vision_bad"), "bad.cmf");
    repack(path, "", false, config, drop);
    cq_cmf *cmf;
    cq_qwen25vl_vision *m = NULL;
    tu_expect_err(load_file(path, "", &cmf, &m), want, needle);
    assert_null(m);
    cq_cmf_close(cmf);
}

static void test_bad_config(void **state) {
    (void)state;
    char past[32]; /* a full-attention block past the last one */
    snprintf(past, sizeof past, "[0, %d]", cq_qwen25vl_vision_get_config(g_m)->depth);
    const struct {
        const char *key, *value;
        cq_status want;
        const char *needle;
    } k_bad[] = {
        {"vision_config", NULL, CQ_ERR_MISSING, "no vision_config"},
        {"depth", NULL, CQ_ERR_PARSE, "vision_config.depth"},
        {"hidden_act", "\"gelu_pytorch_tanh\"", CQ_ERR_UNSUPPORTED, "hidden_act"},
        {"num_heads", "3", CQ_ERR_PARSE, "not a multiple of num_heads"},
        {"fullatt_block_indexes", past, CQ_ERR_PARSE, "fullatt_block_indexes[1]"},
        {"window_size", "20", CQ_ERR_PARSE, "window_size"},
        {"rope_parameters", "{\"rope_type\": \"yarn\"}", CQ_ERR_UNSUPPORTED, "rope_type 'yarn'"},
        {"out_hidden_size", "25", CQ_ERR_SHAPE, "merger.mlp.2.weight"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_bad); i++) {
        char *cfg = config_with(k_bad[i].key, k_bad[i].value);
        expect_load_err(cfg, NULL, k_bad[i].want, k_bad[i].needle);
        cJSON_free(cfg);
    }
    const char *stem = cq_cmf_find(g_cmf, "model.visual.patch_embed.proj.weight") ? "model.visual." : "visual.";
    char drop[128];
    snprintf(drop, sizeof drop, "%sblocks.%d.mlp.up_proj.bias", stem, cq_qwen25vl_vision_get_config(g_m)->depth - 1);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, drop);
    snprintf(drop, sizeof drop, "%spatch_embed.proj.weight", stem);
    expect_load_err(NULL, drop, CQ_ERR_MISSING, "patch_embed.proj.weight");
}

static void test_bad_input(void **state) {
    (void)state;
    const cq_qwen25vl_vision_config *c = cq_qwen25vl_vision_get_config(g_m);
    qv_case q;
    case_open("a", &q);
    float out[24 * 4];
    cq_qwen25vl_vision_outputs o = {.out = out};
    int32_t odd[1][3] = {{1, 8, 11}};
    tu_expect_err(cq_qwen25vl_vision_forward(g_m, q.pixels, 88, (const int32_t(*)[3])odd, 1, &o), CQ_ERR_SHAPE,
                  "multiples of 2");
    int32_t zero[1][3] = {{0, 8, 12}};
    tu_expect_err(cq_qwen25vl_vision_forward(g_m, q.pixels, 0, (const int32_t(*)[3])zero, 1, &o), CQ_ERR_SHAPE,
                  "grid (0, 8, 12)");
    tu_expect_err(cq_qwen25vl_vision_forward(g_m, q.pixels, q.rows - 4, (const int32_t(*)[3])q.grid, 1, &o),
                  CQ_ERR_SHAPE, "the grids imply 96");
    tu_expect_err(cq_qwen25vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 0, &o),
                  CQ_ERR_INVALID_ARG, "images");
    q.pixels[5 * cq_qwen25vl_vision_patch_dim(c) + 3] = NAN;
    tu_expect_err(cq_qwen25vl_vision_forward(g_m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 1, &o),
                  CQ_ERR_INVALID_ARG, "pixel row 5");
    free(q.pixels);
}

/* The plain-C reference backend on the first case: the output within the host bound. */
static void test_ref_backend(void **state) {
    (void)state;
    cq_backend *be;
    assert_int_equal(cq_backend_create("ref", 1, &be), CQ_OK);
    cq_qwen25vl_vision *m;
    if (cq_qwen25vl_vision_load(g_cmf, "", be, &m) != CQ_OK) fail_msg("load on ref: %s", cq_last_error());
    qv_case q;
    case_open("a", &q);
    const size_t n = (size_t)q.rows / 4 * (size_t)cq_qwen25vl_vision_get_config(m)->out_hidden;
    float *out = malloc(n * sizeof(float));
    assert_non_null(out);
    cq_qwen25vl_vision_outputs o = {.out = out};
    if (cq_qwen25vl_vision_forward(m, q.pixels, q.rows, (const int32_t(*)[3])q.grid, 1, &o) != CQ_OK)
        fail_msg("forward on ref: %s", cq_last_error());
    float *ref = gold_f32("a", "out", n);
    check("a", "out (ref)", rel(out, ref, n), F32_BOUND);
    free(ref);
    free(out);
    free(q.pixels);
    cq_qwen25vl_vision_free(m);
    cq_backend_free(be);
}

/* Attention of q over k, v [n, heads * hd] within each segment [cu[i], cu[i + 1]), in double on the host. */
static void attend_ref(const float *q, const float *k, const float *v, float *o, const int32_t *cu, int n_seg,
                       int heads, int hd) {
    const int W = heads * hd;
    double *p = malloc((size_t)cu[n_seg] * sizeof(double));
    assert_non_null(p);
    for (int sg = 0; sg < n_seg; sg++)
        for (int r = cu[sg]; r < cu[sg + 1]; r++)
            for (int h = 0; h < heads; h++) {
                double mx = -INFINITY, sum = 0.0;
                for (int j = cu[sg]; j < cu[sg + 1]; j++) {
                    double d = 0.0;
                    for (int c = 0; c < hd; c++) d += (double)q[r * W + h * hd + c] * k[j * W + h * hd + c];
                    p[j] = d / sqrt((double)hd);
                    mx = fmax(mx, p[j]);
                }
                for (int j = cu[sg]; j < cu[sg + 1]; j++) sum += p[j] = exp(p[j] - mx);
                for (int c = 0; c < hd; c++) {
                    double acc = 0.0;
                    for (int j = cu[sg]; j < cu[sg + 1]; j++) acc += p[j] * v[j * W + h * hd + c];
                    o[r * W + h * hd + c] = (float)(acc / sum);
                }
            }
    free(p);
}

static void test_segment_attention(void **state) {
    (void)state;
    enum { N = 72, HEADS = 2, HD = 80, W = HEADS * HD };
    static const int32_t windows[] = {0, 16, 17, 41, 64, 72}, whole[] = {0, N};
    static const struct {
        const int32_t *cu;
        int n_seg;
    } cases[] = {{windows, 5}, {whole, 1}};
    cq_backend *be;
    assert_int_equal(tu_backend_create(&g_arg, 0, &be), CQ_OK);
    tu_rng rng;
    tu_rng_seed(&rng, 2511);
    float *host[5];
    for (int i = 0; i < 5; i++) {
        host[i] = malloc((size_t)N * W * sizeof(float));
        assert_non_null(host[i]);
        if (i < 3) tu_fill_normal(&rng, host[i], (size_t)N * W, i == 0 ? 2.0f : 1.0f);
    }
    cq_tensor t[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, N, W, &t[i]), CQ_OK);
        if (i < 3) assert_int_equal(cq_tensor_upload(&t[i], host[i], (size_t)N * W * sizeof(float)), CQ_OK);
    }
    /* f32 arithmetic: 1e-4 on the host, 1e-3 on a device; a backend whose attention rounds its inputs to bf16 (CUDA's
     * tensor-core kernels, also at head_dim 80) is held to the op test's bf16 dot-product tolerance, 1.5e-2 of
     * max|ref| plus 1/128 of each value, taken here over max|ref| / RMS */
    const cq_dtype prec = cq_backend_op_precision(be, CQ_OP_ATTENTION, CQ_DTYPE_F32);
    const bool bf16 = prec == CQ_DTYPE_BF16 || prec == CQ_DTYPE_F16;
    for (size_t c = 0; c < CQ_ARRAY_LEN(cases); c++) {
        cq_vision_segs segs;
        if (cq_vision_segs_make(be, "test", cases[c].cu, cases[c].n_seg, N, &segs) != CQ_OK)
            fail_msg("segments: %s", cq_last_error());
        assert_true((segs.lo.be != NULL) == (cases[c].n_seg > 1));
        if (cq_vision_attend(be, &t[0], &t[1], &t[2], &t[3], &segs, HEADS, HD) != CQ_OK)
            fail_msg("attend: %s", cq_last_error());
        assert_int_equal(cq_backend_sync(be), CQ_OK);
        assert_int_equal(cq_tensor_download(&t[3], host[3], (size_t)N * W * sizeof(float)), CQ_OK);
        attend_ref(host[0], host[1], host[2], host[4], cases[c].cu, cases[c].n_seg, HEADS, HD);
        double peak = 0;
        for (size_t i = 0; i < (size_t)N * W; i++) peak = fmax(peak, fabs(host[4][i]));
        const double bound = !g_arg.device ? 1e-4 : bf16 ? (1.5e-2 + 1.0 / 128) * peak / tu_rms(host[4], (size_t)N * W)
                                                        : 1e-3;
        check(c ? "one" : "five", "segment attention", rel(host[3], host[4], (size_t)N * W), bound);
        cq_vision_segs_free(&segs);
    }
    /* refusals: not starting at 0, an empty segment, not ending at n, and no segment */
    static const int32_t off[] = {1, 40, 72}, empty[] = {0, 40, 40, 72}, shortc[] = {0, 40, 70};
    cq_vision_segs segs;
    tu_expect_err(cq_vision_segs_make(be, "test", off, 2, N, &segs), CQ_ERR_INVALID_ARG, "span rows [1, 72)");
    tu_expect_err(cq_vision_segs_make(be, "test", empty, 3, N, &segs), CQ_ERR_INVALID_ARG, "segment 1 is [40, 40)");
    tu_expect_err(cq_vision_segs_make(be, "test", shortc, 2, N, &segs), CQ_ERR_INVALID_ARG, "not [0, 72)");
    tu_expect_err(cq_vision_segs_make(be, "test", whole, 0, N, &segs), CQ_ERR_INVALID_ARG, "0 attention segments");
    /* the bounds of 72 rows on a call over fewer */
    assert_int_equal(cq_vision_segs_make(be, "test", windows, 5, N, &segs), CQ_OK);
    cq_tensor few = cq_tensor_rows_view(&t[0], 0, 64), fo = cq_tensor_rows_view(&t[3], 0, 64);
    tu_expect_err(cq_vision_attend(be, &few, &few, &few, &fo, &segs, HEADS, HD), CQ_ERR_SHAPE, "64 query rows");
    cq_vision_segs_free(&segs);
    for (int i = 0; i < 4; i++) cq_tensor_free(&t[i]);
    for (int i = 0; i < 5; i++) free(host[i]);
    cq_backend_free(be);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qwen25vl_vision", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    if (access(QV_DIR "/golden.safetensors", F_OK) != 0) {
        printf("test_qwen25vl_vision: the golden data is absent (%s; made by tools/golden_qwen25vl_vision.py): "
               "only the segment attention runs\n", QV_DIR);
        const struct CMUnitTest kit[] = {cmocka_unit_test(test_segment_attention)};
        return cmocka_run_group_tests_name("test_qwen25vl_vision (segments)", kit, NULL, NULL);
    }
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_window_index), cmocka_unit_test(test_golden), cmocka_unit_test(test_split),
        cmocka_unit_test(test_table),        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_prefix),       cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_ref_backend),  cmocka_unit_test(test_segment_attention),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_window_index),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_segment_attention),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qwen25vl_vision (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_qwen25vl_vision (host)", host, setup, teardown);
}
