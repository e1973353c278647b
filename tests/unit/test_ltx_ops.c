/*
 * test_ltx_ops.c — the video-VAE and vocoder ops (conv3d, depth_to_space3d,
 * conv1d, conv_transpose1d, snake) against the reference modules themselves
 * (tests/golden/ltx_ops, made by tools/golden_ltx_ops.py from diffusers'
 * LTX2VideoCausalConv3d, LTX2VideoUpsampler3d and the vocoder's SnakeBeta,
 * UpSample1d, DownSample1d, AntiAliasAct1d, and torch's Conv1d /
 * ConvTranspose1d as the vocoder configures them). Exits 77 (skipped) when
 * the golden folder is absent. `test_ltx_ops [cpu|cuda|vulkan]`.
 *
 * Each case is composed from the ops as a decoder would: the upsampler is
 * conv3d, depth_to_space3d and a row view that drops the first frame; the
 * anti-aliased activation is a replicate pad (on the host here), a depthwise
 * conv_transpose1d with the stored filter times the ratio and its crop,
 * snake, another replicate pad and a depthwise strided conv1d. Every case is
 * held to max |diff| <= 1e-4 * RMS of the reference output on a backend that
 * computes its ops in f32, and to TOL_F16 where the backend rounds an op's
 * operands to f16 (cq_backend_op_precision: the CUDA backend's convolutions,
 * GEMMs on f16 operands with power-of-two row scales as its conv2d); the
 * reference's own bfloat16 error is printed beside it.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "format/safetensors.h"
#include "testutil.h"

#define LO_DIR CQ_SOURCE_DIR "/tests/golden/ltx_ops"

static const double TOL = 1e-4; /* of the reference output's RMS */
/* Operands rounded to f16 once each (2^-11 relative, at most): a K-term sum errs by about 4e-4 of the output's
 * RMS, its largest element over a few hundred outputs by about 4x that. Below every case's bf16 error. */
static const double TOL_F16 = 3e-3;

static tu_backend_arg g_arg;
static cq_backend *g_be;
static cq_st *g_st;
static cJSON *g_index;

static int setup(void **state) {
    (void)state;
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    if (cq_st_open(LO_DIR "/golden.safetensors", &g_st) != CQ_OK) return -1;
    g_index = tu_read_json(LO_DIR "/index.json");
    return g_index ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_st_close(g_st);
    cJSON_Delete(g_index);
    cq_backend_free(g_be);
    return 0;
}

static const cJSON *item(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    if (!v) fail_msg("index.json: a case lacks %s", key);
    return v;
}

static int num(const cJSON *c, const char *key) {
    const cJSON *v = item(c, key);
    if (!cJSON_IsNumber(v)) fail_msg("index.json: %s is not a number", key);
    return v->valueint;
}

static int num_at(const cJSON *c, const char *key, int i) {
    const cJSON *a = item(c, key), *v = cJSON_GetArrayItem(a, i);
    if (!cJSON_IsNumber(v)) fail_msg("index.json: %s[%d] is not a number", key, i);
    return v->valueint;
}

static bool flag(const cJSON *c, const char *key) { return cJSON_IsTrue(item(c, key)); }

static double fnum(const cJSON *c, const char *key) {
    const cJSON *v = item(c, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* golden tensor <what>_<case> with exactly `want` values (0: any; *n receives the count); NULL when absent and
 * optional */
static float *golden(const char *what, const char *name, size_t want, bool optional, size_t *n) {
    char key[96];
    snprintf(key, sizeof key, "%s_%s", what, name);
    size_t got = 0;
    float *v = tu_st_floats(g_st, key, &got);
    if (!v) {
        if (!optional) fail_msg("%s: absent", key);
        return NULL;
    }
    if (want && got != want) fail_msg("%s: %zu values, want %zu", key, got, want);
    if (n) *n = got;
    return v;
}

/* a backend tensor [rows, cols] holding v */
static cq_tensor up2(const float *v, int64_t rows, int64_t cols) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, rows, cols, &t), CQ_OK);
    assert_int_equal(cq_tensor_upload(&t, v, sizeof(float) * (size_t)(rows * cols)), CQ_OK);
    return t;
}

static cq_tensor out2(int64_t rows, int64_t cols) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, rows, cols, &t), CQ_OK);
    return t;
}

static float *down(const cq_tensor *t) {
    size_t n = (size_t)cq_tensor_nelem(t);
    float *v = malloc(sizeof(float) * n);
    assert_int_equal(cq_backend_sync(g_be), CQ_OK);
    assert_int_equal(cq_tensor_download(t, v, sizeof(float) * n), CQ_OK);
    return v;
}

/* The limit for a case composed of these ops: TOL_F16 when the backend rounds any of them to f16. */
static double tol_of(const cq_op *ops, int n) {
    for (int i = 0; i < n; i++) {
        cq_dtype p = cq_backend_op_precision(g_be, ops[i], CQ_DTYPE_F32);
        if (p == CQ_DTYPE_F16 || p == CQ_DTYPE_BF16) return TOL_F16;
    }
    return TOL;
}

static void check(const char *name, const cq_tensor *y, const float *want, size_t n, double bf16_err, double tol) {
    assert_int_equal((size_t)cq_tensor_nelem(y), n);
    float *got = down(y);
    double rms = tu_rms(want, n), err = tu_max_rel(got, want, n, rms);
    print_message("%-20s on %s: max|diff|/rms %.2e (limit %.0e; the reference's own bf16 error %.2e)\n", name,
                  cq_backend_name(g_be), err, tol, bf16_err);
    if (!(err <= tol)) fail_msg("%s: max|diff|/rms %.3g > %.0e", name, err, tol);
    free(got);
}

/* x [L, C] replicate-padded by (lo, hi) rows */
static float *pad_rows(const float *x, int L, int C, int lo, int hi) {
    float *p = malloc(sizeof(float) * (size_t)(L + lo + hi) * (size_t)C);
    for (int i = 0; i < L + lo + hi; i++) {
        int s = i - lo < 0 ? 0 : i - lo >= L ? L - 1 : i - lo;
        memcpy(p + (size_t)i * C, x + (size_t)s * C, sizeof(float) * (size_t)C);
    }
    return p;
}

/* a depthwise kernel [C, k]: the shared filter times `scale` in every row */
static float *depthwise(const float *f, int k, int C, float scale) {
    float *w = malloc(sizeof(float) * (size_t)C * (size_t)k);
    for (int c = 0; c < C; c++)
        for (int j = 0; j < k; j++) w[c * k + j] = f[j] * scale;
    return w;
}

static const cq_op conv3d_op = CQ_OP_CONV3D;

static void run_conv3d(const cJSON *c, const char *name, bool upsample) {
    int cin = num(c, "cin"), T = num(c, "T"), H = num(c, "H"), W = num(c, "W"), causal = flag(c, "causal");
    int cw = upsample ? num(c, "conv_out") : num(c, "cout"), cout = num(c, "cout");
    int To = num_at(c, "out", 0), Ho = num_at(c, "out", 1), Wo = num_at(c, "out", 2);
    float *x = golden("x", name, (size_t)T * H * W * cin, false, NULL);
    float *w = golden("w", name, (size_t)cw * cin * 27, false, NULL);
    float *b = golden("b", name, (size_t)cw, false, NULL);
    float *want = golden("y", name, (size_t)To * Ho * Wo * cout, false, NULL);
    cq_tensor tx = up2(x, (int64_t)T * H * W, cin), tw = up2(w, cw, (int64_t)cin * 27), tb = up2(b, 1, cw);
    int st = upsample ? 1 : num_at(c, "stride", 0), sy = upsample ? 1 : num_at(c, "stride", 1),
        sx = upsample ? 1 : num_at(c, "stride", 2);
    int cTo = (T + 2 - 3) / st + 1, cHo = (H + 2 - 3) / sy + 1, cWo = (W + 2 - 3) / sx + 1;
    cq_tensor ty = out2((int64_t)cTo * cHo * cWo, cw);
    cq_conv3d_args a = {.y = &ty, .x = &tx, .w = &tw, .bias = &tb, .T = T, .H = H, .W = W, .kt = 3, .kh = 3,
                        .kw = 3, .stride_t = st, .stride_y = sy, .stride_x = sx,
                        .pad_front = causal ? 2 : 1, .pad_back = causal ? 0 : 1, .pad_l = 1, .pad_r = 1, .pad_t = 1,
                        .pad_b = 1, .mode = upsample ? CQ_PAD_ZERO : (cq_pad_mode)num(c, "mode")};
    assert_int_equal(cq_op_conv3d(g_be, &a), CQ_OK);
    if (!upsample) {
        check(name, &ty, want, (size_t)To * Ho * Wo * cout, fnum(c, "bf16_err"), tol_of(&conv3d_op, 1));
    } else {
        int pt = num_at(c, "stride", 0), ph = num_at(c, "stride", 1), pw = num_at(c, "stride", 2);
        cq_tensor td = out2((int64_t)T * pt * H * ph * W * pw, cw / (pt * ph * pw));
        assert_int_equal(cq_op_depth_to_space3d(g_be, &td, &ty, T, H, W, pt, ph, pw), CQ_OK);
        /* the first pt-1 frames dropped: a row view */
        int64_t frame = (int64_t)H * ph * W * pw;
        cq_tensor kept = cq_tensor_rows_view(&td, (pt - 1) * frame, (T * pt - (pt - 1)) * frame);
        check(name, &kept, want, (size_t)To * Ho * Wo * cout, fnum(c, "bf16_err"), tol_of(&conv3d_op, 1));
        cq_tensor_free(&kept);
        cq_tensor_free(&td);
    }
    cq_tensor_free(&tx);
    cq_tensor_free(&tw);
    cq_tensor_free(&tb);
    cq_tensor_free(&ty);
    free(x);
    free(w);
    free(b);
    free(want);
}

static void run_conv1d(const cJSON *c, const char *name, bool tr) {
    int L = num(c, "L"), cin = num(c, "cin"), cout = num(c, "cout"), k = num(c, "k"), G = num(c, "groups");
    int Lo = num(c, "out");
    int rows = tr ? cin : cout, cols = (tr ? cout : cin) / G * k;
    float *x = golden("x", name, (size_t)L * cin, false, NULL);
    float *w = golden("w", name, (size_t)rows * cols, false, NULL);
    float *b = golden("b", name, (size_t)cout, true, NULL);
    float *want = golden("y", name, (size_t)Lo * cout, false, NULL);
    cq_tensor tx = up2(x, L, cin), tw = up2(w, rows, cols), ty = out2(Lo, cout), tb;
    if (b) tb = up2(b, 1, cout);
    cq_conv1d_args a = {.y = &ty, .x = &tx, .w = &tw, .bias = b ? &tb : NULL, .k = k, .stride = num(c, "stride"),
                        .dilation = tr ? 1 : num(c, "dilation"), .groups = G,
                        .pad_l = tr ? num_at(c, "crop", 0) : num_at(c, "pad", 0),
                        .pad_r = tr ? num_at(c, "crop", 1) : num_at(c, "pad", 1),
                        .mode = tr ? CQ_PAD_ZERO : (cq_pad_mode)num(c, "mode")};
    assert_int_equal(tr ? cq_op_conv_transpose1d(g_be, &a) : cq_op_conv1d(g_be, &a), CQ_OK);
    const cq_op op = tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D;
    check(name, &ty, want, (size_t)Lo * cout, fnum(c, "bf16_err"), tol_of(&op, 1));
    cq_tensor_free(&tx);
    cq_tensor_free(&tw);
    cq_tensor_free(&ty);
    if (b) cq_tensor_free(&tb);
    free(x);
    free(w);
    free(b);
    free(want);
}

static void run_snake(const cJSON *c, const char *name) {
    int L = num(c, "L"), C = num(c, "C");
    float *x = golden("x", name, (size_t)L * C, false, NULL), *want = golden("y", name, (size_t)L * C, false, NULL);
    float *al = golden("alpha", name, (size_t)C, false, NULL), *be = golden("beta", name, (size_t)C, true, NULL);
    cq_tensor tx = up2(x, L, C), ta = up2(al, 1, C), tb;
    if (be) tb = up2(be, 1, C);
    /* in place, as a decoder runs it */
    assert_int_equal(cq_op_snake(g_be, &tx, &tx, &ta, be ? &tb : NULL, flag(c, "logscale"), (float)fnum(c, "eps")),
                     CQ_OK);
    const cq_op op = CQ_OP_SNAKE;
    check(name, &tx, want, (size_t)L * C, fnum(c, "bf16_err"), tol_of(&op, 1));
    cq_tensor_free(&tx);
    cq_tensor_free(&ta);
    if (be) cq_tensor_free(&tb);
    free(x);
    free(want);
    free(al);
    free(be);
}

/* ratio * conv_transpose1d(replicate_pad(x, pad), filter, stride ratio, depthwise)[crop_l : -crop_r] as a new
 * backend tensor; *Lo its length */
static cq_tensor upsample1d(const float *x, int L, int C, const float *f, int k, int ratio, int pad, int crop_l,
                            int crop_r, int *Lo) {
    float *xp = pad_rows(x, L, C, pad, pad), *w = depthwise(f, k, C, (float)ratio);
    int Lp = L + 2 * pad;
    *Lo = (Lp - 1) * ratio + k - crop_l - crop_r;
    cq_tensor tx = up2(xp, Lp, C), tw = up2(w, C, k), ty = out2(*Lo, C);
    cq_conv1d_args a = {.y = &ty, .x = &tx, .w = &tw, .k = k, .stride = ratio, .dilation = 1, .groups = C,
                        .pad_l = crop_l, .pad_r = crop_r};
    assert_int_equal(cq_op_conv_transpose1d(g_be, &a), CQ_OK);
    cq_tensor_free(&tx);
    cq_tensor_free(&tw);
    free(xp);
    free(w);
    return ty;
}

static void run_aa_act(const cJSON *c, const char *name) {
    int L = num(c, "L"), C = num(c, "C"), ratio = num(c, "ratio"), ku = num(c, "k_up"), kd = num(c, "k_down");
    int Lo = num(c, "out"), Lu;
    float *x = golden("x", name, (size_t)L * C, false, NULL), *want = golden("y", name, (size_t)Lo * C, false, NULL);
    float *al = golden("alpha", name, (size_t)C, false, NULL), *be = golden("beta", name, (size_t)C, false, NULL);
    float *fu = golden("fup", name, (size_t)ku, false, NULL), *fd = golden("fdown", name, (size_t)kd, false, NULL);
    cq_tensor tu = upsample1d(x, L, C, fu, ku, ratio, num(c, "up_pad"), num_at(c, "up_crop", 0),
                              num_at(c, "up_crop", 1), &Lu);
    cq_tensor ta = up2(al, 1, C), tb = up2(be, 1, C);
    assert_int_equal(cq_op_snake(g_be, &tu, &tu, &ta, &tb, true, (float)fnum(c, "eps")), CQ_OK);
    float *s = down(&tu);
    int dl = num_at(c, "down_pad", 0), dr = num_at(c, "down_pad", 1);
    float *sp = pad_rows(s, Lu, C, dl, dr), *w = depthwise(fd, kd, C, 1.0f);
    cq_tensor tx = up2(sp, Lu + dl + dr, C), tw = up2(w, C, kd), ty = out2(Lo, C);
    cq_conv1d_args a = {.y = &ty, .x = &tx, .w = &tw, .k = kd, .stride = ratio, .dilation = 1, .groups = C};
    assert_int_equal(cq_op_conv1d(g_be, &a), CQ_OK);
    const cq_op ops[] = {CQ_OP_CONV_TRANSPOSE1D, CQ_OP_SNAKE, CQ_OP_CONV1D};
    check(name, &ty, want, (size_t)Lo * C, fnum(c, "bf16_err"), tol_of(ops, 3));
    cq_tensor *ts[] = {&tu, &ta, &tb, &tx, &tw, &ty};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cq_tensor_free(ts[i]);
    float *fs[] = {x, want, al, be, fu, fd, s, sp, w};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
}

static void run_hann_up3(const cJSON *c, const char *name) {
    int L = num(c, "L"), C = num(c, "C"), k = num(c, "k"), Lo = num(c, "out"), got_lo;
    float *x = golden("x", name, (size_t)L * C, false, NULL), *want = golden("y", name, (size_t)Lo * C, false, NULL);
    float *f = golden("fup", name, (size_t)k, false, NULL);
    cq_tensor ty = upsample1d(x, L, C, f, k, num(c, "ratio"), num(c, "pad"), num_at(c, "crop", 0),
                              num_at(c, "crop", 1), &got_lo);
    assert_int_equal(got_lo, Lo);
    const cq_op op = CQ_OP_CONV_TRANSPOSE1D;
    check(name, &ty, want, (size_t)Lo * C, fnum(c, "bf16_err"), tol_of(&op, 1));
    cq_tensor_free(&ty);
    free(x);
    free(want);
    free(f);
}

static void test_cases(void **state) {
    (void)state;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g_index, "cases"), *c;
    int n = 0;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetStringValue(item(c, "name")), *kind = cJSON_GetStringValue(item(c, "kind"));
        if (!name || !kind) fail_msg("index.json: a case without a name or kind");
        if (!strcmp(kind, "conv3d")) run_conv3d(c, name, false);
        else if (!strcmp(kind, "upsample3d")) run_conv3d(c, name, true);
        else if (!strcmp(kind, "conv1d")) run_conv1d(c, name, false);
        else if (!strcmp(kind, "convt1d")) run_conv1d(c, name, true);
        else if (!strcmp(kind, "snake")) run_snake(c, name);
        else if (!strcmp(kind, "aa_act")) run_aa_act(c, name);
        else if (!strcmp(kind, "hann_up3")) run_hann_up3(c, name);
        else fail_msg("index.json: unknown kind %s", kind);
        n++;
    }
    assert_true(n >= 20);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_ltx_ops", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    if (access(LO_DIR "/index.json", R_OK) != 0) {
        printf("test_ltx_ops: skipped: the golden data is absent (%s; made by tools/golden_ltx_ops.py)\n", LO_DIR);
        return TU_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
