/*
 * test_vulkan.c — the Vulkan backend's own behaviour, beyond the op cases of
 * test_ops_vulkan: a bad index found by a shader (get_rows, gather_cols) is
 * a deferred error that sync reports once (and clears); a buffer over the
 * device's largest storage buffer is refused with that limit named; a matmul
 * output that overflows is a deferred CQ_ERR_NUMERIC; a device number past
 * the last is refused; the device description names what cortiq gpu shows;
 * every quantized weight codec (q8_row, q8_2f, q4_block, q4_tiled, q4tp) is
 * uploaded as stored and decoded by get_rows, matmul and conv2d to the bits
 * src/codec decodes, and with bf16 activations its matmul falls back to the
 * CPU with the CPU's result. Exits 77 (skipped) where the backend is not built or
 * no Vulkan device is present (lavapipe is one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "backends/vulkan/vulkan.h"
#include "codec/codec.h"
#include "ops/ops.h"
#include "testutil.h"

static cq_backend *g_vk;

static int setup(void **state) {
    (void)state;
    return cq_backend_open("vulkan", NULL, &g_vk) == CQ_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_backend_free(g_vk);
    return 0;
}

static void expect(cq_status got, cq_status want, const char *needle) {
    if (got != want || (needle && !strstr(cq_last_error(), needle)))
        fail_msg("expected %s mentioning '%s', got %s: %s", cq_status_str(want), needle ? needle : "",
                 cq_status_str(got), cq_last_error());
}

/* get_rows with an id past the table: the op is queued, sync names the id and its position, once. */
static void test_deferred_index_error(void **state) {
    (void)state;
    enum { V = 4, C = 3 };
    float table[V * C];
    for (int i = 0; i < V * C; i++) table[i] = (float)i + 0.5f;
    cq_tensor w, ids, y;
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, V, C, &w), CQ_OK);
    int64_t n = 3;
    assert_int_equal(cq_tensor_alloc(g_vk, CQ_DTYPE_I32, 1, &n, &ids), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, n, C, &y), CQ_OK);
    assert_int_equal(cq_tensor_upload(&w, table, sizeof table), CQ_OK);
    const int32_t bad[3] = {2, 5, 0};
    assert_int_equal(cq_tensor_upload(&ids, bad, sizeof bad), CQ_OK);
    assert_int_equal(cq_op_get_rows(g_vk, &y, &w, &ids), CQ_OK); /* queued: the id lives on the device */
    expect(cq_backend_sync(g_vk), CQ_ERR_BOUNDS, "get_rows: id 5 at position 1 is outside the table (op #1");
    assert_int_equal(cq_backend_sync(g_vk), CQ_OK); /* reported once */
    float got[3 * C];
    assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
    for (int k = 0; k < C; k++) {
        assert_true(got[k] == table[2 * C + k]);
        assert_true(got[C + k] == 0.0f); /* the bad row is zeros */
        assert_true(got[2 * C + k] == table[k]);
    }
    const int32_t good[3] = {3, 1, 1};
    assert_int_equal(cq_tensor_upload(&ids, good, sizeof good), CQ_OK);
    assert_int_equal(cq_op_get_rows(g_vk, &y, &w, &ids), CQ_OK);
    assert_int_equal(cq_backend_sync(g_vk), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
    assert_true(got[0] == table[3 * C] && got[C + 2] == table[C + 2]);
    /* gather_cols likewise: x [V, C] columns gathered by {2, 7, -1}, index 7 at position 1 */
    const int32_t cols[3] = {2, 7, -1};
    assert_int_equal(cq_tensor_upload(&ids, cols, sizeof cols), CQ_OK);
    cq_tensor g;
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, V, 3, &g), CQ_OK);
    assert_int_equal(cq_op_gather_cols(g_vk, &g, &w, &ids, 1, 1.0f), CQ_OK);
    expect(cq_backend_sync(g_vk), CQ_ERR_BOUNDS, "gather_cols: index 7 at position 1 is out of range (op #1 ");
    float gg[V * 3];
    assert_int_equal(cq_tensor_download(&g, gg, sizeof gg), CQ_OK);
    for (int r = 0; r < V; r++)
        assert_true(gg[r * 3] == table[r * C + 2] && gg[r * 3 + 1] == 0.0f && gg[r * 3 + 2] == 0.0f);
    cq_tensor_free(&g);
    cq_tensor_free(&w);
    cq_tensor_free(&ids);
    cq_tensor_free(&y);
}

/* A matmul whose output overflows f32: reported at sync as CQ_ERR_NUMERIC naming the op and the element. */
static void test_nonfinite_output(void **state) {
    (void)state;
    cq_tensor x, w, y;
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, 2, 4, &x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, 3, 4, &w), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, 2, 3, &y), CQ_OK);
    float xv[8] = {1, 1, 1, 1, 1, 1, 1, 1}, wv[12] = {1, 2, 3, 4, 0, 0, 0, 0, 1, 1, 1, 1};
    wv[4] = 3e38f; /* row 1: 3e38 + 3e38 overflows */
    wv[5] = 3e38f;
    assert_int_equal(cq_tensor_upload(&x, xv, sizeof xv), CQ_OK);
    assert_int_equal(cq_tensor_upload(&w, wv, sizeof wv), CQ_OK);
    assert_int_equal(cq_op_linear(g_vk, &y, &x, &w, NULL), CQ_OK);
    expect(cq_backend_sync(g_vk), CQ_ERR_NUMERIC, "matmul produced a non-finite value (output element 1; op #1 ");
    assert_int_equal(cq_backend_sync(g_vk), CQ_OK);
    float got[6];
    assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
    assert_true(got[0] == 10.0f && got[2] == 4.0f && got[3] == 10.0f);
    cq_tensor_free(&x);
    cq_tensor_free(&w);
    cq_tensor_free(&y);
}

/* Shaders bind whole buffers: one over maxStorageBufferRange is refused up front, naming the limit. */
static void test_buffer_limit(void **state) {
    (void)state;
    cq_vulkan_info d;
    assert_int_equal(cq_vulkan_device_info(0, &d), CQ_OK);
    assert_true(d.max_buffer_range >= ((uint64_t)1 << 27)); /* the Vulkan minimum is 128 MiB */
    cq_tensor t;
    int64_t cols = (int64_t)(d.max_buffer_range / 4) + 1;
    expect(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, 1, cols, &t), CQ_ERR_UNSUPPORTED, "maxStorageBufferRange");
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, 1, 1024, &t), CQ_OK); /* and the backend goes on */
    cq_tensor_free(&t);
}

static void test_devices(void **state) {
    (void)state;
    char why[256] = "";
    int n = cq_vulkan_device_count(why, sizeof why);
    assert_true(n >= 1);
    cq_backend *be = NULL;
    char name[32];
    snprintf(name, sizeof name, "vulkan:%d", n);
    expect(cq_backend_open(name, NULL, &be), CQ_ERR_UNSUPPORTED, "does not exist");
    assert_null(be);
    /* the options' device is used for the name without ":N" */
    cq_backend_opts o = {.vulkan = {.device = n}};
    expect(cq_backend_open("vulkan", &o, &be), CQ_ERR_UNSUPPORTED, "does not exist");
    o.vulkan.device = n - 1;
    assert_int_equal(cq_backend_open("vulkan", &o, &be), CQ_OK);
    char want[32];
    snprintf(want, sizeof want, "vulkan:%d (", n - 1);
    assert_true(!strncmp(cq_backend_name(be), want, strlen(want)));
    cq_backend_free(be);
    char line[1024];
    cq_vulkan_info d;
    assert_int_equal(cq_vulkan_describe(0, line, sizeof line), CQ_OK);
    assert_int_equal(cq_vulkan_device_info(0, &d), CQ_OK);
    assert_non_null(strstr(line, d.name));
    assert_non_null(strstr(line, "device-local memory, Vulkan 1."));
    assert_non_null(strstr(line, "cooperative matrices"));
    expect(cq_vulkan_describe(n, line, sizeof line), CQ_ERR_UNSUPPORTED, "does not exist");
}

/* One weight codec on the device: the payload uploaded as stored, decoded by the shaders to the bits src/codec
 * decodes. get_rows of every row, a matmul with the identity (y = Wᵀ, each output one product 1 * w plus zeros)
 * and a 1x1 convolution of the identity give the decoded weights themselves, so all three are held to the
 * codec's decode bit for bit. A matmul with bf16 activations still falls back (the host backend reads the
 * pack's payload) and gives the CPU's result bit for bit. */
static void check_codec_decoded(cq_dtype dt, int N, int K, cq_backend *cpu) {
    uint64_t shape[2] = {(uint64_t)N, (uint64_t)K};
    uint64_t nb = 0;
    assert_int_equal(cq_codec_nbytes(dt, 2, shape, &nb), CQ_OK);
    float *wv = malloc(sizeof(float) * N * K), *dec = malloc(sizeof(float) * N * K);
    float *eye = calloc((size_t)K * K, sizeof(float)), *got = malloc(sizeof(float) * N * K);
    uint8_t *payload = malloc(nb);
    int32_t *ids = malloc(sizeof(int32_t) * N);
    tu_rng rng;
    tu_rng_seed(&rng, 11 + (uint64_t)dt);
    tu_fill_normal(&rng, wv, N * K, 1.0f);
    for (int i = 0; i < N * K; i += 7) wv[i] *= 40.0f; /* spread the group scales */
    for (int k = 0; k < K; k++) eye[k * K + k] = 1.0f;
    for (int n = 0; n < N; n++) ids[n] = n;
    assert_int_equal(cq_codec_quantize(dt, 2, shape, wv, payload, nb), CQ_OK);
    assert_int_equal(cq_codec_dequant_rows(dt, 2, shape, payload, nb, 0, (uint64_t)N, dec), CQ_OK);
    cq_tensor_view v;
    memset(&v, 0, sizeof v);
    v.name = "w";
    v.dtype = dt;
    v.ndim = 2;
    v.shape[0] = (uint64_t)N;
    v.shape[1] = (uint64_t)K;
    v.nelem = (uint64_t)N * K;
    v.data = payload;
    v.nbytes = nb;
    assert_true(cq_backend_supports(g_vk, CQ_OP_MATMUL, dt, CQ_DTYPE_F32));
    assert_true(cq_backend_supports(g_vk, CQ_OP_GET_ROWS, dt, CQ_DTYPE_F32));
    assert_true(cq_backend_supports(g_vk, CQ_OP_CONV2D, dt, CQ_DTYPE_F32));
    /* 16-bit activations run natively too (common.glsl's CQ_LD / CQ_ST; test_ops compares them) */
    assert_true(cq_backend_supports(g_vk, CQ_OP_MATMUL, dt, CQ_DTYPE_BF16));
    assert_true(cq_backend_supports(g_vk, CQ_OP_MATMUL, dt, CQ_DTYPE_F16));
    cq_tensor w, x, y, id, yr, yc;
    cq_backend_stats s0, s1;
    assert_int_equal(cq_backend_get_stats(g_vk, &s0, false), CQ_OK);
    assert_int_equal(cq_tensor_bind_weight(g_vk, &v, &w), CQ_OK);
    assert_int_equal(cq_backend_get_stats(g_vk, &s1, false), CQ_OK);
    assert_true(s1.weight_bytes - s0.weight_bytes == ((nb + 15) & ~(uint64_t)15)); /* the payload as stored */
    /* get_rows: every row */
    const int64_t nid = N;
    assert_int_equal(cq_tensor_alloc(g_vk, CQ_DTYPE_I32, 1, &nid, &id), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, N, K, &yr), CQ_OK);
    assert_int_equal(cq_tensor_upload(&id, ids, sizeof(int32_t) * N), CQ_OK);
    assert_int_equal(cq_op_get_rows(g_vk, &yr, &w, &id), CQ_OK);
    assert_int_equal(cq_tensor_download(&yr, got, sizeof(float) * N * K), CQ_OK);
    assert_memory_equal(got, dec, sizeof(float) * N * K);
    /* matmul and 1x1 conv2d of the identity: y [K, N] = Wᵀ */
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, K, K, &x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, K, N, &y), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_vk, CQ_DTYPE_F32, K, N, &yc), CQ_OK);
    assert_int_equal(cq_tensor_upload(&x, eye, sizeof(float) * K * K), CQ_OK);
    assert_int_equal(cq_op_linear(g_vk, &y, &x, &w, NULL), CQ_OK);
    cq_conv2d_args ca = {.y = &yc, .x = &x, .w = &w, .H = K, .W = 1, .kh = 1, .kw = 1, .stride_y = 1, .stride_x = 1};
    assert_int_equal(cq_op_conv2d(g_vk, &ca), CQ_OK);
    cq_tensor *outs[2] = {&y, &yc};
    for (int o = 0; o < 2; o++) {
        assert_int_equal(cq_tensor_download(outs[o], got, sizeof(float) * N * K), CQ_OK);
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                if (memcmp(&got[k * N + n], &dec[n * K + k], sizeof(float)))
                    fail_msg("%s %s: W[%d, %d] = %.9g on vulkan, %.9g decoded by src/codec", cq_dtype_name(dt),
                             o ? "conv2d" : "matmul", n, k, got[k * N + n], dec[n * K + k]);
    }
    cq_tensor_free(&id);
    cq_tensor_free(&yr);
    cq_tensor_free(&yc);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
    /* bf16 activations: natively on Vulkan (the shader decodes x's 16-bit halves), against the host backend
     * from the pack's payload; f32 sums in another order, so within f32 rounding of sum |x w| */
    enum { M = 5 };
    float *xv = malloc(sizeof(float) * M * K), *r[2] = {malloc(sizeof(float) * M * N), malloc(sizeof(float) * M * N)};
    tu_fill_normal(&rng, xv, M * K, 1.0f);
    uint16_t *xb = malloc(sizeof(uint16_t) * M * K);
    for (int i = 0; i < M * K; i++) xb[i] = cq_f32_to_bf16(xv[i]);
    cq_backend *bes[2] = {g_vk, cpu};
    for (int b = 0; b < 2; b++) {
        cq_tensor wb, xt, yt;
        if (b == 0)
            wb = w;
        else
            assert_int_equal(cq_tensor_bind_weight(cpu, &v, &wb), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(bes[b], CQ_DTYPE_BF16, M, K, &xt), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(bes[b], CQ_DTYPE_F32, M, N, &yt), CQ_OK);
        assert_int_equal(cq_tensor_upload(&xt, xb, sizeof(uint16_t) * M * K), CQ_OK);
        assert_int_equal(cq_op_linear(bes[b], &yt, &xt, &wb, NULL), CQ_OK);
        assert_int_equal(cq_tensor_download(&yt, r[b], sizeof(float) * M * N), CQ_OK);
        if (b == 1) cq_tensor_free(&wb);
        cq_tensor_free(&xt);
        cq_tensor_free(&yt);
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double mag = 0;
            for (int k = 0; k < K; k++) mag += fabs((double)cq_bf16_to_f32(xb[m * K + k]) * dec[n * K + k]);
            double d = fabs((double)r[0][m * N + n] - r[1][m * N + n]);
            if (d > 1e-5 * mag + 1e-30)
                fail_msg("%s bf16 x: y[%d, %d] = %.9g on vulkan, %.9g on the host (|x w| sum %.3g)", cq_dtype_name(dt),
                         m, n, r[0][m * N + n], r[1][m * N + n], mag);
        }
    cq_tensor_free(&w);
    free(xv);
    free(xb);
    free(r[0]);
    free(r[1]);
    free(wv);
    free(dec);
    free(eye);
    free(got);
    free(payload);
    free(ids);
}

static void test_quantized_weights_decoded(void **state) {
    (void)state;
    cq_backend *cpu = NULL;
    assert_int_equal(cq_backend_cpu_create(1, CQ_CPU_AUTO, &cpu), CQ_OK);
    /* K = 48: the flattened 32-groups of q4_block and q4_tiled straddle rows and the last one is partial;
     * q4tp needs K % 32 == 0 and 3 groups a row spill a 5-bit code across a byte */
    check_codec_decoded(CQ_DTYPE_Q8_ROW, 7, 48, cpu);
    check_codec_decoded(CQ_DTYPE_Q8_2F, 7, 48, cpu);
    check_codec_decoded(CQ_DTYPE_Q4_BLOCK, 7, 47, cpu);
    check_codec_decoded(CQ_DTYPE_Q4_TILED, 7, 47, cpu);
    check_codec_decoded(CQ_DTYPE_Q4TP, 7, 96, cpu);
    cq_backend_free(cpu);
}

/* 16-bit activations on sub-views that start at odd elements, with odd row lengths, so 32-bit words are shared
 * between a view and its neighbours and between rows that different workgroups write (common.glsl's CQ_ST):
 * natively (supports() says so and the backend is opened without a fallback), the result right and every
 * element outside the output view untouched. */
static float h2f(cq_dtype dt, uint16_t h) { return dt == CQ_DTYPE_F16 ? cq_f16_to_f32(h) : cq_bf16_to_f32(h); }
static uint16_t f2h(cq_dtype dt, float f) { return dt == CQ_DTYPE_F16 ? cq_f32_to_f16(f) : cq_f32_to_bf16(f); }

static void test_half_subviews(void **state) {
    (void)state;
    cq_backend *vk = NULL;
    cq_backend_opts o;
    memset(&o, 0, sizeof o);
    o.no_fallback = true;
    assert_int_equal(cq_backend_open("vulkan", &o, &vk), CQ_OK);
    static const cq_dtype dts[] = {CQ_DTYPE_F16, CQ_DTYPE_BF16};
    enum { TOTAL = 64, XO = 3, YO = 5, R = 5, C = 7, N = R * C };
    for (int di = 0; di < 2; di++) {
        cq_dtype dt = dts[di];
        assert_true(cq_backend_supports(vk, CQ_OP_BINARY, CQ_DTYPE_COUNT, dt));
        assert_true(cq_backend_supports(vk, CQ_OP_RMSNORM, CQ_DTYPE_COUNT, dt));
        uint16_t xh[TOTAL], yh[TOTAL], back[TOTAL];
        for (int i = 0; i < TOTAL; i++) {
            xh[i] = f2h(dt, (float)(i - 17) * 0.37f);
            yh[i] = (uint16_t)(0x5a5a + i); /* sentinels */
        }
        cq_tensor xb, yb, x, y;
        const int64_t total = TOTAL, shape[2] = {R, C};
        assert_int_equal(cq_tensor_alloc(vk, dt, 1, &total, &xb), CQ_OK);
        assert_int_equal(cq_tensor_alloc(vk, dt, 1, &total, &yb), CQ_OK);
        assert_int_equal(cq_tensor_upload(&xb, xh, sizeof xh), CQ_OK);
        assert_int_equal(cq_tensor_upload(&yb, yh, sizeof yh), CQ_OK);
        assert_int_equal(cq_tensor_subview(&xb, XO, 2, shape, &x), CQ_OK);
        assert_int_equal(cq_tensor_subview(&yb, YO, 2, shape, &y), CQ_OK);
        /* y = x + x: exact, so bit for bit */
        assert_int_equal(cq_op_binary(vk, &y, &x, &x, CQ_BINARY_ADD), CQ_OK);
        assert_int_equal(cq_tensor_download(&yb, back, sizeof back), CQ_OK);
        for (int i = 0; i < TOTAL; i++) {
            uint16_t want = i >= YO && i < YO + N ? f2h(dt, 2.0f * h2f(dt, xh[XO + i - YO])) : yh[i];
            if (back[i] != want)
                fail_msg("%s add: element %d of the buffer is 0x%04x, want 0x%04x", cq_dtype_name(dt), i, back[i], want);
        }
        /* rmsnorm in place over rows of 7 (each row's first and last words shared with its neighbours) */
        assert_int_equal(cq_op_rmsnorm(vk, &y, &y, NULL, NULL, false, 1e-6f), CQ_OK);
        uint16_t after[TOTAL];
        assert_int_equal(cq_tensor_download(&yb, after, sizeof after), CQ_OK);
        for (int r = 0; r < R; r++) {
            double ss = 0;
            for (int c = 0; c < C; c++) ss += (double)h2f(dt, back[YO + r * C + c]) * h2f(dt, back[YO + r * C + c]);
            double inv = 1.0 / sqrt(ss / C + 1e-6);
            for (int c = 0; c < C; c++) {
                double want = h2f(dt, back[YO + r * C + c]) * inv, got = h2f(dt, after[YO + r * C + c]);
                if (fabs(got - want) > fabs(want) / (dt == CQ_DTYPE_F16 ? 1024.0 : 128.0) + 1e-6)
                    fail_msg("%s rmsnorm: [%d, %d] = %.7g, want %.7g", cq_dtype_name(dt), r, c, got, want);
            }
        }
        for (int i = 0; i < TOTAL; i++)
            if ((i < YO || i >= YO + N) && after[i] != yh[i])
                fail_msg("%s rmsnorm: wrote element %d outside the view", cq_dtype_name(dt), i);
        cq_tensor_free(&xb);
        cq_tensor_free(&yb);
    }
    cq_backend_free(vk);
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_open("vulkan", NULL, &probe);
    if (s != CQ_OK) {
        printf("test_vulkan: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? TU_SKIP : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deferred_index_error),
        cmocka_unit_test(test_nonfinite_output),
        cmocka_unit_test(test_buffer_limit),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_quantized_weights_decoded),
        cmocka_unit_test(test_half_subviews),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
