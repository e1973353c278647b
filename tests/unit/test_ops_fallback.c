/*
 * test_ops_fallback.c — per-op fallback: a backend that lacks some ops (a
 * wrapper around the reference backend whose vtable has no conv2d and whose
 * supports() refuses attention, matmul and rmsnorm) still runs them, on its
 * host backend with the operands copied across. With the reference itself as
 * the host the results are bit for bit the full reference backend's; with
 * the default host (the CPU backend, made at the first fallback) they agree
 * within the CPU's rounding, and each op kind is logged once. A backend
 * opened without fallback, or a host backend, fails such ops instead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "testutil.h"

static cq_backend_vtbl g_lacking_vt;

static bool ref_supports_fn(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt);
static bool (*g_ref_supports)(const cq_backend *, cq_op, cq_dtype, cq_dtype);
static bool ref_supports_fn(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    if (op == CQ_OP_ATTENTION || op == CQ_OP_MATMUL || op == CQ_OP_RMSNORM) return false;
    return g_ref_supports(be, op, wdt, xdt);
}

/* A reference backend with conv2d missing and attention/matmul/rmsnorm refused. */
static cq_backend *make_lacking(void) {
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_ref_create(&be), CQ_OK);
    g_ref_supports = be->vt->supports;
    g_lacking_vt = *be->vt;
    g_lacking_vt.kind = "lacking";
    g_lacking_vt.is_host = false;
    g_lacking_vt.supports = ref_supports_fn;
    g_lacking_vt.conv2d = NULL;
    be->vt = &g_lacking_vt;
    snprintf(be->name, sizeof be->name, "lacking");
    assert_int_equal(cq_backend_check(be), CQ_OK);
    return be;
}

typedef struct counts {
    int conv2d, attention, matmul, rmsnorm, other;
} counts;

static void on_log(cq_log_level level, const char *msg, void *user) {
    counts *c = user;
    if (level != CQ_LOG_INFO || !strstr(msg, "does not run")) return;
    if (strstr(msg, "does not run conv2d")) c->conv2d++;
    else if (strstr(msg, "does not run attention")) c->attention++;
    else if (strstr(msg, "does not run matmul")) c->matmul++;
    else if (strstr(msg, "does not run rmsnorm")) c->rmsnorm++;
    else c->other++;
}

/* Inputs shared by every run (host arrays; each backend uploads its own). */
enum { H = 6, W = 5, CIN = 4, COUT = 8, NQ = 7, NK = 9, HEADS = 2, HD = 8, M = 5, K = 16, N = 12 };
static float g_img[H * W * CIN], g_cw[COUT * CIN * 9], g_cb[COUT];
static float g_q[NQ * HEADS * HD], g_k[NK * HEADS * HD], g_v[NK * HEADS * HD];
static float g_x[M * K], g_w[N * K], g_gate[N], g_y0[M * N], g_rw[K];

typedef struct outs {
    float conv[H * W * COUT], attn[NQ * HEADS * HD], mm[M * N], rms[M * K], unary[M * K];
} outs;

static cq_tensor up2(cq_backend *be, const float *src, int64_t r, int64_t c) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, r, c, &t), CQ_OK);
    assert_int_equal(cq_tensor_upload(&t, src, sizeof(float) * (size_t)(r * c)), CQ_OK);
    return t;
}

static cq_tensor weight(cq_backend *be, const float *src, int ndim, const uint64_t *shape) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    const cq_tensor_view v = tu_view(CQ_DTYPE_F32, ndim, shape, (const uint8_t *)src, n * sizeof(float));
    cq_tensor t;
    assert_int_equal(cq_tensor_bind_weight(be, &v, &t), CQ_OK);
    return t;
}

/* conv2d (weight + bias), attention (causal), matmul (accumulate into y with a gate), rmsnorm in place, and an
 * op the backend runs itself (unary) on `be`; the results downloaded into `o`. Returns the first failure. */
static cq_status run_all(cq_backend *be, outs *o) {
    cq_status s;
    cq_tensor x = up2(be, g_img, H * W, CIN), y, bias;
    int64_t nb = COUT;
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &nb, &bias), CQ_OK);
    assert_int_equal(cq_tensor_upload(&bias, g_cb, sizeof g_cb), CQ_OK);
    uint64_t cs[4] = {COUT, CIN, 3, 3};
    cq_tensor cw = weight(be, g_cw, 4, cs);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, H * W, COUT, &y), CQ_OK);
    cq_conv2d_args ca = {.y = &y, .x = &x, .w = &cw, .bias = &bias, .H = H, .W = W, .kh = 3, .kw = 3,
                         .stride_y = 1, .stride_x = 1, .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1,
                         .mode = CQ_PAD_REFLECT};
    s = cq_op_conv2d(be, &ca);
    if (s == CQ_OK) s = cq_tensor_download(&y, o->conv, sizeof o->conv);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
    cq_tensor_free(&bias);
    cq_tensor_free(&cw);
    if (s != CQ_OK) return s;

    cq_tensor q = up2(be, g_q, NQ, HEADS * HD), k = up2(be, g_k, NK, HEADS * HD), v = up2(be, g_v, NK, HEADS * HD);
    cq_tensor att;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, NQ, HEADS * HD, &att), CQ_OK);
    cq_attn_args aa = {.o = &att, .q = &q, .k = &k, .v = &v, .n_heads = HEADS, .n_kv_heads = HEADS,
                       .head_dim = HD, .causal = true};
    s = cq_op_attention(be, &aa);
    if (s == CQ_OK) s = cq_tensor_download(&att, o->attn, sizeof o->attn);
    cq_tensor_free(&q);
    cq_tensor_free(&k);
    cq_tensor_free(&v);
    cq_tensor_free(&att);
    if (s != CQ_OK) return s;

    cq_tensor mx = up2(be, g_x, M, K), my = up2(be, g_y0, M, N), gate;
    int64_t ng = N;
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &ng, &gate), CQ_OK);
    assert_int_equal(cq_tensor_upload(&gate, g_gate, sizeof g_gate), CQ_OK);
    uint64_t ws[2] = {N, K};
    cq_tensor mw = weight(be, g_w, 2, ws);
    cq_matmul_args ma = {.y = &my, .x = &mx, .w = &mw, .gate = &gate, .scale = 0.5f, .act = CQ_ACT_SILU,
                         .accumulate = true};
    s = cq_op_matmul(be, &ma);
    if (s == CQ_OK) s = cq_tensor_download(&my, o->mm, sizeof o->mm);
    /* rmsnorm in place (y is x), then an op the backend runs itself on the same tensor */
    cq_tensor rw;
    int64_t nk = K;
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &nk, &rw), CQ_OK);
    assert_int_equal(cq_tensor_upload(&rw, g_rw, sizeof g_rw), CQ_OK);
    if (s == CQ_OK) s = cq_op_rmsnorm(be, &mx, &mx, &rw, NULL, false, 1e-6f);
    if (s == CQ_OK) s = cq_tensor_download(&mx, o->rms, sizeof o->rms);
    if (s == CQ_OK) s = cq_op_unary(be, &mx, &mx, CQ_UNARY_TANH, 0.0f, 0.0f);
    if (s == CQ_OK) s = cq_tensor_download(&mx, o->unary, sizeof o->unary);
    cq_tensor_free(&mx);
    cq_tensor_free(&my);
    cq_tensor_free(&gate);
    cq_tensor_free(&mw);
    cq_tensor_free(&rw);
    return s;
}

static int setup(void **state) {
    (void)state;
    tu_rng r;
    tu_rng_seed(&r, 20261202);
    tu_fill_normal(&r, g_img, CQ_ARRAY_LEN(g_img), 1.0f);
    tu_fill_normal(&r, g_cw, CQ_ARRAY_LEN(g_cw), 0.3f);
    tu_fill_normal(&r, g_cb, CQ_ARRAY_LEN(g_cb), 0.1f);
    tu_fill_normal(&r, g_q, CQ_ARRAY_LEN(g_q), 1.0f);
    tu_fill_normal(&r, g_k, CQ_ARRAY_LEN(g_k), 1.0f);
    tu_fill_normal(&r, g_v, CQ_ARRAY_LEN(g_v), 1.0f);
    tu_fill_normal(&r, g_x, CQ_ARRAY_LEN(g_x), 1.0f);
    tu_fill_normal(&r, g_w, CQ_ARRAY_LEN(g_w), 0.25f);
    tu_fill_normal(&r, g_gate, CQ_ARRAY_LEN(g_gate), 1.0f);
    tu_fill_normal(&r, g_y0, CQ_ARRAY_LEN(g_y0), 1.0f);
    tu_fill_normal(&r, g_rw, CQ_ARRAY_LEN(g_rw), 1.0f);
    return 0;
}

static void test_exact_with_reference_host(void **state) {
    (void)state;
    cq_backend *full = NULL, *lacking = make_lacking();
    assert_int_equal(cq_backend_ref_create(&full), CQ_OK);
    assert_int_equal(cq_backend_ref_create(&lacking->host), CQ_OK); /* the host, owned by `lacking` */
    static outs want, got;
    memset(&got, 0, sizeof got);
    assert_int_equal(run_all(full, &want), CQ_OK);
    assert_int_equal(run_all(lacking, &got), CQ_OK);
    assert_memory_equal(&want, &got, sizeof want);
    /* not all zeros: the ops wrote something */
    float mx = 0.0f;
    for (size_t i = 0; i < CQ_ARRAY_LEN(got.conv); i++) mx = fmaxf(mx, fabsf(got.conv[i]));
    assert_true(mx > 0.1f);
    cq_backend_free(full);
    cq_backend_free(lacking);
}

static void check_close(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-4f + 1e-4f * fabsf(b[i])))
            fail_msg("%s[%zu]: %g on the fallback, %g on the reference", what, i, a[i], b[i]);
}

static void test_cpu_host_logged_once(void **state) {
    (void)state;
    cq_backend *full = NULL, *lacking = make_lacking();
    assert_int_equal(cq_backend_ref_create(&full), CQ_OK);
    counts c = {0};
    cq_set_log(on_log, &c, CQ_LOG_INFO);
    static outs want, got;
    assert_int_equal(run_all(full, &want), CQ_OK);
    assert_null(lacking->host); /* made at the first fallback */
    for (int rep = 0; rep < 3; rep++) {
        memset(&got, 0, sizeof got);
        assert_int_equal(run_all(lacking, &got), CQ_OK);
        check_close(got.conv, want.conv, CQ_ARRAY_LEN(want.conv), "conv2d");
        check_close(got.attn, want.attn, CQ_ARRAY_LEN(want.attn), "attention");
        check_close(got.mm, want.mm, CQ_ARRAY_LEN(want.mm), "matmul");
        check_close(got.rms, want.rms, CQ_ARRAY_LEN(want.rms), "rmsnorm");
        check_close(got.unary, want.unary, CQ_ARRAY_LEN(want.unary), "unary");
    }
    cq_set_log(NULL, NULL, CQ_LOG_WARN);
    assert_non_null(lacking->host);
    assert_non_null(strstr(cq_backend_name(lacking->host), "cpu/"));
    assert_int_equal(c.conv2d, 1);
    assert_int_equal(c.attention, 1);
    assert_int_equal(c.matmul, 1);
    assert_int_equal(c.rmsnorm, 1);
    assert_int_equal(c.other, 0); /* unary ran on the backend itself */
    cq_backend_free(full);
    cq_backend_free(lacking);
}

static void test_no_fallback(void **state) {
    (void)state;
    cq_backend *lacking = make_lacking();
    lacking->no_fallback = true;
    static outs got;
    cq_clear_error();
    assert_int_equal(run_all(lacking, &got), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "conv2d: backend lacking does not run f32 weights"));
    assert_null(lacking->host);
    cq_backend_free(lacking);
    /* a host backend does not fall back: the CPU's bf16 attention stays unsupported */
    cq_backend *cpu = NULL;
    assert_int_equal(cq_backend_cpu_create(1, CQ_CPU_AUTO, &cpu), CQ_OK);
    cq_tensor q;
    assert_int_equal(cq_tensor_alloc_2d(cpu, CQ_DTYPE_BF16, 2, 8, &q), CQ_OK);
    assert_int_equal(cq_tensor_zero(&q), CQ_OK);
    cq_tensor o;
    assert_int_equal(cq_tensor_alloc_2d(cpu, CQ_DTYPE_BF16, 2, 8, &o), CQ_OK);
    cq_attn_args aa = {.o = &o, .q = &q, .k = &q, .v = &q, .n_heads = 1, .n_kv_heads = 1, .head_dim = 8};
    assert_int_equal(cq_op_attention(cpu, &aa), CQ_ERR_UNSUPPORTED);
    assert_null(cpu->host);
    cq_tensor_free(&q);
    cq_tensor_free(&o);
    cq_backend_free(cpu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_with_reference_host),
        cmocka_unit_test(test_cpu_host_logged_once),
        cmocka_unit_test(test_no_fallback),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
