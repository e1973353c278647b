/* test_cuda_cost.c — the CUDA backend's device-memory arithmetic without a
 * GPU (src/backends/cuda/cuda_cost.c): the allocator's size classes, and what
 * a weight costs in each mode (cq_backend_weight_cost's figures), worked out
 * by hand for each kind: a plane, a compact payload with its slot, a float
 * codec that stays a plane, a 1-D vector, a convolution kernel. The GPU test
 * (tests/gpu/test_cuda_mem.c) checks the same figures against mem_in_use. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_cost.h"
#include "codec/codec.h"
#include "testutil.h"

static void test_size_classes(void **state) {
    (void)state;
    static const struct {
        uint64_t n, want;
    } k[] = {
        {0, 512},           {1, 512},     {512, 512},   {513, 640}, /* quarters of 512 above 512 */
        {1024, 1024},       {1025, 1280}, {3000, 3072}, {6728, 7168},
        {13312, 14336},     {(uint64_t)1 << 20, (uint64_t)1 << 20},
        {((uint64_t)1 << 20) + 1, (uint64_t)5 << 18}, /* 1.25 MiB */
        {((uint64_t)9 << 20) + 1, (uint64_t)10 << 20}, /* quarters of 8 MiB: 2 MiB */
        {((uint64_t)17 << 20) + 1, (uint64_t)18 << 20}, /* 2 MiB steps from here on, not quarters */
        {((uint64_t)3 << 29) + 1, ((uint64_t)3 << 29) + ((uint64_t)2 << 20)}, /* just over 1.5 GiB */
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++)
        if (cq_cuda_size_class(k[i].n) != k[i].want)
            fail_msg("size_class(%llu) = %llu, want %llu", (unsigned long long)k[i].n,
                     (unsigned long long)cq_cuda_size_class(k[i].n), (unsigned long long)k[i].want);
    /* never below the request, and never more than a quarter above it */
    for (uint64_t n = 1; n < 5000000; n = n * 3 + 7) {
        uint64_t s = cq_cuda_size_class(n);
        assert_true(s >= n);
        assert_true(n <= 512 || s - n < n / 4 + 1);
    }
    for (uint64_t n = (uint64_t)8 << 20; n < ((uint64_t)64 << 30); n = n * 3 + 12345) {
        uint64_t s = cq_cuda_size_class(n);
        assert_true(s >= n && s - n < ((uint64_t)2 << 20));
        assert_int_equal(s % ((uint64_t)2 << 20), 0);
    }
}

static cq_tensor_view view(cq_dtype dt, int ndim, const uint64_t *shape) {
    uint64_t nbytes = 0;
    assert_int_equal(cq_codec_nbytes(dt, ndim, shape, &nbytes), CQ_OK);
    return tu_view(dt, ndim, shape, NULL, nbytes);
}

static void expect_plan(const cq_tensor_view *v, cq_weight_mode mode, cq_cuda_wkind kind, uint64_t bytes, uint64_t slot) {
    cq_cuda_wplan p;
    assert_int_equal(cq_cuda_weight_plan(v, mode, &p), CQ_OK);
    if (p.kind != kind || p.bytes != bytes || p.slot != slot)
        fail_msg("%s in mode %s: kind %d, %llu bytes, slot %llu; want kind %d, %llu, %llu", cq_dtype_name(v->dtype),
                 cq_weight_mode_name(mode), (int)p.kind, (unsigned long long)p.bytes, (unsigned long long)p.slot,
                 (int)kind, (unsigned long long)bytes, (unsigned long long)slot);
}

static void test_weight_costs(void **state) {
    (void)state;
    const uint64_t s2[2] = {64, 100};
    /* the plane of [64, 100]: pitch 104, 64 * 104 * 2 = 13312 bytes -> 14336; scales 256 -> 512 */
    const uint64_t plane = 14336 + 512;
    cq_tensor_view q8 = view(CQ_DTYPE_Q8_2F, 2, s2);
    assert_int_equal(q8.nbytes, 6400 + 128 + 200); /* int8 values, f16 row and column factors */
    expect_plan(&q8, CQ_WEIGHTS_DEFAULT, CQ_CUDA_W_PLANE, plane, 0);
    expect_plan(&q8, CQ_WEIGHTS_PLANES, CQ_CUDA_W_PLANE, plane, 0);
    expect_plan(&q8, CQ_WEIGHTS_COMPACT, CQ_CUDA_W_COMPACT, 7168, plane); /* 6728 -> 7168 */
    /* streamed: nothing on the device while bound; per use the plane and CQ_CUDA_STREAM_SLOTS payload slots */
    expect_plan(&q8, CQ_WEIGHTS_STREAMED, CQ_CUDA_W_STREAMED, 0, plane + CQ_CUDA_STREAM_SLOTS * 7168);
    cq_cuda_wplan sp;
    assert_int_equal(cq_cuda_weight_plan(&q8, CQ_WEIGHTS_STREAMED, &sp), CQ_OK);
    assert_int_equal(sp.host_bytes, q8.nbytes);
    /* bf16: its payload (12800 -> 14336) is smaller than the plane with its scales: compact */
    cq_tensor_view bf = view(CQ_DTYPE_BF16, 2, s2);
    expect_plan(&bf, CQ_WEIGHTS_PLANES, CQ_CUDA_W_PLANE, plane, 0);
    expect_plan(&bf, CQ_WEIGHTS_COMPACT, CQ_CUDA_W_COMPACT, 14336, plane);
    /* f32: the plane (14848) is smaller than the payload (25600 -> 28672): it stays a plane */
    cq_tensor_view f32 = view(CQ_DTYPE_F32, 2, s2);
    expect_plan(&f32, CQ_WEIGHTS_COMPACT, CQ_CUDA_W_PLANE, plane, 0);
    /* streamed, every matrix streams, whatever its codec */
    expect_plan(&f32, CQ_WEIGHTS_STREAMED, CQ_CUDA_W_STREAMED, 0, plane + CQ_CUDA_STREAM_SLOTS * 28672);
    /* a 1-D vector is its payload in every mode */
    const uint64_t s1[1] = {1000};
    cq_tensor_view vec = view(CQ_DTYPE_F32, 1, s1);
    expect_plan(&vec, CQ_WEIGHTS_PLANES, CQ_CUDA_W_RAW, 4096, 0);
    expect_plan(&vec, CQ_WEIGHTS_COMPACT, CQ_CUDA_W_RAW, 4096, 0);
    expect_plan(&vec, CQ_WEIGHTS_STREAMED, CQ_CUDA_W_RAW, 4096, 0);
    /* a convolution kernel [8, 4, 3, 3]: rows 8, cols 36, pitch 40: plane 640, scales 32 -> 512 */
    const uint64_t s4[4] = {8, 4, 3, 3};
    cq_tensor_view conv = view(CQ_DTYPE_Q4_BLOCK, 4, s4);
    assert_int_equal(conv.nbytes, 9 * 18); /* 288 values: 9 groups of 16 nibble bytes and an f16 scale */
    expect_plan(&conv, CQ_WEIGHTS_PLANES, CQ_CUDA_W_PLANE, 640 + 512, 0);
    expect_plan(&conv, CQ_WEIGHTS_COMPACT, CQ_CUDA_W_COMPACT, 512, 640 + 512);
    cq_cuda_wplan p;
    assert_int_equal(cq_cuda_weight_plan(&conv, CQ_WEIGHTS_COMPACT, &p), CQ_OK);
    assert_int_equal(p.rows, 8);
    assert_int_equal(p.cols, 36);
    assert_int_equal(p.ld, 40);
    /* a denoiser-sized q8 matrix: compact about half the plane, q4tp about a quarter */
    const uint64_t big[2] = {3072, 12288};
    cq_tensor_view q8b = view(CQ_DTYPE_Q8_2F, 2, big), q4b = view(CQ_DTYPE_Q4TP, 2, big);
    cq_cuda_wplan a, b, c4;
    assert_int_equal(cq_cuda_weight_plan(&q8b, CQ_WEIGHTS_PLANES, &a), CQ_OK);
    assert_int_equal(cq_cuda_weight_plan(&q8b, CQ_WEIGHTS_COMPACT, &b), CQ_OK);
    assert_int_equal(cq_cuda_weight_plan(&q4b, CQ_WEIGHTS_COMPACT, &c4), CQ_OK);
    assert_int_equal(a.bytes, cq_cuda_size_class(3072ull * 12288 * 2) + cq_cuda_size_class(3072 * 4));
    assert_int_equal(b.bytes, cq_cuda_size_class(q8b.nbytes));
    assert_int_equal(b.slot, a.bytes);
    assert_true(b.bytes * 100 <= a.bytes * 55);
    assert_true(c4.bytes * 100 <= a.bytes * 30);
}

static void test_refusals(void **state) {
    (void)state;
    const uint64_t s2[2] = {4, 64};
    cq_tensor_view v = view(CQ_DTYPE_Q8_ROW, 2, s2);
    v.dtype = CQ_DTYPE_Q1; /* a codec the device decoders do not know */
    cq_cuda_wplan p;
    assert_int_equal(cq_cuda_weight_plan(&v, CQ_WEIGHTS_COMPACT, &p), CQ_ERR_UNSUPPORTED);
    assert_false(cq_cuda_decodes(CQ_DTYPE_Q1));
    assert_true(cq_cuda_decodes(CQ_DTYPE_Q4TP));
    v.dtype = CQ_DTYPE_Q8_ROW;
    v.nelem = 0;
    assert_int_equal(cq_cuda_weight_plan(&v, CQ_WEIGHTS_PLANES, &p), CQ_ERR_SHAPE);
    assert_int_equal(cq_cuda_weight_plan(NULL, CQ_WEIGHTS_PLANES, &p), CQ_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_weight_costs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
