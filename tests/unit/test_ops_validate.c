/*
 * test_ops_validate.c — the op layer's front end: backend selection, tensor
 * lifecycle and views, and that every op rejects bad arguments (shapes,
 * dtypes, aliasing, foreign tensors, index values) with the right status and
 * a message naming the op, before a backend is touched. Also: ops issued
 * from inside thread-pool tasks (nested) give the same results.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/env.h"
#include "codec/codec.h"
#include "ops/backend.h"
#include "testutil.h"

static void expect(cq_status want, cq_status got, const char *expr, const char *sub) {
    if (got != want)
        fail_msg("%s: got %s (%s), want %s", expr, cq_status_str(got), cq_last_error(), cq_status_str(want));
    if (sub && !strstr(cq_last_error(), sub)) fail_msg("%s: message '%s' lacks '%s'", expr, cq_last_error(), sub);
}

/* Expect status `st` from `expr` and the message to contain `sub` (NULL: any). */
#define EXPECT(st, expr, sub)                \
    do {                                     \
        cq_clear_error();                    \
        expect((st), (expr), #expr, (sub));  \
    } while (0)

static cq_backend *cpu, *ref;

static int setup(void **state) {
    (void)state;
    unsetenv("CORTIQ_CPU");
    unsetenv("CORTIQ_BACKEND");
    if (cq_backend_cpu_create(2, CQ_CPU_AUTO, &cpu) != CQ_OK) return -1;
    if (cq_backend_ref_create(&ref) != CQ_OK) return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_backend_free(cpu);
    cq_backend_free(ref);
    return 0;
}

static cq_tensor T2(cq_backend *be, cq_dtype dt, int64_t r, int64_t c) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc_2d(be, dt, r, c, &t), CQ_OK);
    assert_int_equal(cq_tensor_zero(&t), CQ_OK);
    return t;
}

static cq_tensor T1(cq_backend *be, cq_dtype dt, int64_t n) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc(be, dt, 1, &n, &t), CQ_OK);
    assert_int_equal(cq_tensor_zero(&t), CQ_OK);
    return t;
}

static void test_backends(void **state) {
    (void)state;
    cq_backend *be = NULL;
    EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_create("nope", 1, &be), "nope");
    assert_null(be);
    EXPECT(CQ_OK, cq_backend_create("ref", 1, &be), NULL);
    assert_string_equal(cq_backend_name(be), "ref");
    cq_backend_free(be);
    EXPECT(CQ_OK, cq_backend_create(NULL, 1, &be), NULL);
    assert_non_null(strstr(cq_backend_name(be), "cpu/"));
    assert_int_equal(cq_backend_act_dtype(be), CQ_DTYPE_F32);
    assert_int_equal(cq_backend_sync(be), CQ_OK);
    cq_backend_free(be);
    /* AMX/NEON kernels are not built yet: asking for them is a clear error. */
    if (!cq_cpu_isa_available(CQ_CPU_AMX)) EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_cpu_create(1, CQ_CPU_AMX, &be), "amx");
    assert_true(cq_cpu_isa_available(CQ_CPU_GENERIC));
    /* the ISA by option; by CORTIQ_CPU only through the CLI's mapping (the library reads no environment) */
    cq_backend_opts bo = {.cpu = {.threads = 1, .isa = CQ_CPU_GENERIC}};
    EXPECT(CQ_OK, cq_backend_open("cpu", &bo, &be), NULL);
    assert_string_equal(cq_backend_name(be), "cpu/generic");
    cq_backend_free(be);
    /* the activation dtype by option, on every host backend; 0 (f32) keeps the backend's own; a codec is refused */
    static const char *const hosts[] = {"cpu", "ref"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(hosts); i++) {
        static const cq_dtype acts[] = {CQ_DTYPE_F32, CQ_DTYPE_F16, CQ_DTYPE_BF16};
        for (size_t j = 0; j < CQ_ARRAY_LEN(acts); j++) {
            const cq_backend_opts ao = {.act_dtype = acts[j]};
            EXPECT(CQ_OK, cq_backend_open(hosts[i], &ao, &be), NULL);
            assert_int_equal(cq_backend_act_dtype(be), acts[j]);
            cq_backend_free(be);
        }
        const cq_backend_opts bad = {.act_dtype = CQ_DTYPE_Q8_ROW}, worse = {.act_dtype = (cq_dtype)99};
        be = (cq_backend *)&be;
        EXPECT(CQ_ERR_INVALID_ARG, cq_backend_open(hosts[i], &bad, &be), "activation dtype q8_row is not one of f32");
        assert_null(be);
        EXPECT(CQ_ERR_INVALID_ARG, cq_backend_open(hosts[i], &worse, &be), "not one of f32, f16, bf16");
        assert_null(be);
    }
    setenv("CORTIQ_CPU", "generic", 1);
    EXPECT(CQ_OK, cq_backend_cpu_create(1, CQ_CPU_AUTO, &be), NULL);
    if (cq_cpu_isa_available(CQ_CPU_AVX2) || cq_cpu_isa_available(CQ_CPU_NEON))
        assert_string_not_equal(cq_backend_name(be), "cpu/generic"); /* the variable alone changes nothing */
    cq_backend_free(be);
    EXPECT(CQ_OK, cq_env_backend_create("cpu", 1, &be), NULL);
    assert_string_equal(cq_backend_name(be), "cpu/generic");
    cq_backend_free(be);
    setenv("CORTIQ_CPU", "pentium", 1);
    EXPECT(CQ_OK, cq_backend_cpu_create(1, CQ_CPU_AUTO, &be), NULL);
    cq_backend_free(be);
    be = NULL;
    EXPECT(CQ_ERR_INVALID_ARG, cq_env_backend_create("cpu", 1, &be), "CORTIQ_CPU='pentium'");
    assert_null(be);
    unsetenv("CORTIQ_CPU");
    EXPECT(CQ_ERR_INVALID_ARG, cq_backend_cpu_create(1, (cq_cpu_isa)99, &be), NULL);
    cq_backend_free(NULL);
    assert_string_equal(cq_op_name(CQ_OP_CONV2D), "conv2d");
    assert_string_equal(cq_op_name((cq_op)999), "?");
    assert_string_equal(cq_cpu_isa_name(CQ_CPU_AVX512), "avx512");
    /* supports(): the reference runs everything, the CPU f32 (plus what ops.h lists). */
    assert_true(cq_backend_supports(ref, CQ_OP_ATTENTION, CQ_DTYPE_COUNT, CQ_DTYPE_BF16));
    assert_false(cq_backend_supports(cpu, CQ_OP_ATTENTION, CQ_DTYPE_COUNT, CQ_DTYPE_BF16));
    assert_true(cq_backend_supports(cpu, CQ_OP_MATMUL, CQ_DTYPE_Q4TP, CQ_DTYPE_F32));
    assert_false(cq_backend_supports(cpu, CQ_OP_MATMUL, CQ_DTYPE_Q1, CQ_DTYPE_F32));
    assert_false(cq_backend_supports(cpu, (cq_op)999, CQ_DTYPE_COUNT, CQ_DTYPE_F32));
}

static bool never_records(const cq_backend *be) { return (void)be, false; }

static void count_log(cq_log_level level, const char *msg, void *user) {
    (void)level;
    (void)msg;
    (*(int *)user)++;
}

/* The registry: names, "name:N" parsing, the known-names list, the vtable check. */
static void test_registry(void **state) {
    (void)state;
    assert_true(cq_backend_registry_count() >= 3);
    assert_null(cq_backend_registry_get(cq_backend_registry_count()));
    const char *want[] = {"cpu", "ref", "cuda"};
    for (size_t i = 0; i < 3; i++) assert_string_equal(cq_backend_registry_get(i)->name, want[i]);
    assert_true(cq_backend_registry_get(0)->built());
    assert_false(cq_backend_registry_get(0)->has_devices);
    assert_true(cq_backend_registry_get(2)->has_devices);
    char names[128];
    assert_string_equal(cq_backend_names(names, sizeof names), "cpu, ref, cuda[:N], vulkan[:N]");
    const cq_backend_desc *d = NULL;
    int dev = 7;
    EXPECT(CQ_OK, cq_backend_lookup("CUDA:3", &d, &dev), NULL);
    assert_string_equal(d->name, "cuda");
    assert_int_equal(dev, 3);
    EXPECT(CQ_OK, cq_backend_lookup(NULL, &d, &dev), NULL);
    assert_string_equal(d->name, "cpu");
    assert_int_equal(dev, -1);
    EXPECT(CQ_OK, cq_backend_lookup("ref", &d, &dev), NULL);
    assert_string_equal(d->name, "ref");
    EXPECT(CQ_ERR_INVALID_ARG, cq_backend_lookup("cuda:x", &d, &dev), "cuda:N with N a device number");
    assert_null(d);
    EXPECT(CQ_ERR_INVALID_ARG, cq_backend_lookup("cuda:", &d, &dev), "cuda:N");
    EXPECT(CQ_ERR_INVALID_ARG, cq_backend_lookup("cpu:1", &d, &dev), "no devices");
    EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_lookup("cudax", &d, &dev), "unknown backend 'cudax' (have: cpu, ref, cuda[:N], vulkan[:N]");
    EXPECT(CQ_OK, cq_backend_lookup("vulkan:2", &d, &dev), NULL);
    assert_string_equal(d->name, "vulkan");
    assert_int_equal(dev, 2);
    assert_true(d->has_devices);
    EXPECT(CQ_ERR_INVALID_ARG, cq_backend_lookup("vulkan:-1", &d, &dev), "vulkan:N with N a device number");
    if (!cq_backend_registry_get(3)->built()) {
        cq_backend *be = NULL;
        EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_open("vulkan", NULL, &be), "no Vulkan backend");
        assert_null(be);
    } else {
        /* a device number past the last: a clear refusal (or no device at all) */
        cq_backend *be = NULL;
        EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_open("vulkan:1000", NULL, &be), "vulkan backend: ");
        assert_null(be);
    }
    if (!cq_backend_registry_get(2)->built()) {
        cq_backend *be = NULL;
        EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_open("cuda", NULL, &be), "no CUDA backend");
        assert_null(be);
        EXPECT(CQ_ERR_UNSUPPORTED, cq_backend_lookup("vk", &d, &dev), "this build has no cuda");
    }
    /* every backend the registry creates passes the vtable check; a broken one does not */
    assert_int_equal(cq_backend_check(cpu), CQ_OK);
    assert_int_equal(cq_backend_check(ref), CQ_OK);
    cq_backend_vtbl vt = *ref->vt;
    cq_backend fake = *ref;
    fake.vt = &vt;
    vt.buf_zero = NULL;
    EXPECT(CQ_ERR_INTERNAL, cq_backend_check(&fake), "buf_zero");
    vt = *ref->vt;
    vt.conv2d = NULL; /* a host backend has nothing to fall back to */
    EXPECT(CQ_ERR_INTERNAL, cq_backend_check(&fake), "conv2d");
    assert_false(cq_backend_has_entry(&fake, CQ_OP_CONV2D));
    assert_false(cq_backend_supports(&fake, CQ_OP_CONV2D, CQ_DTYPE_F32, CQ_DTYPE_F32));
    vt.is_host = false; /* a device backend's missing entry falls back */
    EXPECT(CQ_OK, cq_backend_check(&fake), NULL);
    vt = *ref->vt;
    vt.can_record = never_records; /* one recording entry of five */
    EXPECT(CQ_ERR_INTERNAL, cq_backend_check(&fake), "recording");
}

/* The CLI's mapping of the environment onto options (src/cli/env.c): the words and messages of the variables. */
static void test_env_mapping(void **state) {
    (void)state;
    static const char *const vars[] = {"CORTIQ_CUDA_CHECK", "CORTIQ_CUDA_GEMM", "CORTIQ_CUDA_GEMM_TUNE",
                                       "CORTIQ_CUDA_ATTN", "CORTIQ_CUDA_SYNC", "CORTIQ_CUDA_SIDE", "CORTIQ_CUDA_GRAPH",
                                       "CORTIQ_CUDA_PROFILE", "CORTIQ_CUDA_DEVICE", "CORTIQ_BACKEND", "CORTIQ_CPU",
                                       "CORTIQ_VULKAN_DEVICE", "CORTIQ_VULKAN_SYNC", "CORTIQ_VULKAN_RECORD",
                                       "CORTIQ_VULKAN_STAGING", "CORTIQ_GPU_MEMORY"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(vars); i++) unsetenv(vars[i]);
    cq_backend_opts o;
    memset(&o, 0x5a, sizeof o);
    assert_int_equal(cq_env_backend_opts("cuda", &o), CQ_OK);
    cq_backend_opts zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&o, &zero, sizeof o); /* no variable: the defaults, which are zeros */
    assert_string_equal(cq_env_backend_name(), "cpu");
    setenv("CORTIQ_BACKEND", "ref", 1);
    assert_string_equal(cq_env_backend_name(), "ref");
    setenv("CORTIQ_CUDA_CHECK", "2", 1);
    setenv("CORTIQ_CUDA_GEMM", "wgmma", 1);
    setenv("CORTIQ_CUDA_GEMM_TUNE", "1", 1);
    setenv("CORTIQ_CUDA_ATTN", "flash64", 1);
    setenv("CORTIQ_CUDA_SYNC", "yes", 1);
    setenv("CORTIQ_CUDA_SIDE", "0", 1);
    setenv("CORTIQ_CUDA_GRAPH", "0", 1);
    setenv("CORTIQ_CUDA_PROFILE", "1", 1);
    setenv("CORTIQ_CUDA_DEVICE", "2", 1);
    setenv("CORTIQ_CPU", "generic", 1);
    assert_int_equal(cq_env_backend_opts("cuda:1", &o), CQ_OK);
    assert_int_equal(o.cuda.check, CQ_CUDA_CHECK_ALL);
    assert_int_equal(o.cuda.gemm, CQ_CUDA_GEMM_WGMMA);
    assert_true(o.cuda.gemm_tune);
    assert_int_equal(o.cuda.attn, CQ_CUDA_ATTN_FLASH64);
    assert_true(o.cuda.sync_each_op && o.cuda.no_side_copy && o.cuda.no_graphs && o.cuda.profile);
    assert_int_equal(o.device, 2);
    assert_int_equal(o.cpu.isa, CQ_CPU_GENERIC);
    /* NULL: the backend CORTIQ_BACKEND names; the CUDA part is read only for CUDA */
    assert_int_equal(cq_env_backend_opts(NULL, &o), CQ_OK);
    assert_int_equal(o.cuda.gemm, CQ_CUDA_GEMM_AUTO);
    assert_int_equal(o.cpu.isa, CQ_CPU_GENERIC);
    /* a bad value is warned about and left at its default */
    setenv("CORTIQ_CUDA_CHECK", "0", 1);
    setenv("CORTIQ_CUDA_GEMM", "fast", 1);
    setenv("CORTIQ_CUDA_SYNC", "0", 1);
    setenv("CORTIQ_CUDA_SIDE", "maybe", 1);
    assert_int_equal(cq_env_backend_opts("cuda", &o), CQ_OK);
    assert_int_equal(o.cuda.check, CQ_CUDA_CHECK_OFF);
    assert_int_equal(o.cuda.gemm, CQ_CUDA_GEMM_AUTO);
    assert_false(o.cuda.sync_each_op);
    assert_false(o.cuda.no_side_copy);
    /* the Vulkan part, read only for Vulkan; CUDA's device does not reach it */
    setenv("CORTIQ_VULKAN_DEVICE", "1", 1);
    setenv("CORTIQ_VULKAN_SYNC", "1", 1);
    setenv("CORTIQ_VULKAN_RECORD", "1", 1);
    setenv("CORTIQ_VULKAN_STAGING", "1", 1);
    assert_int_equal(cq_env_backend_opts("cuda", &o), CQ_OK);
    assert_int_equal(o.vulkan.device, 0);
    assert_false(o.vulkan.sync_each_op || o.vulkan.records || o.vulkan.staging);
    assert_int_equal(cq_env_backend_opts("vulkan", &o), CQ_OK);
    assert_int_equal(o.vulkan.device, 1);
    assert_true(o.vulkan.sync_each_op && o.vulkan.records && o.vulkan.staging);
    assert_int_equal(o.device, 0);
    assert_int_equal(o.cuda.gemm, CQ_CUDA_GEMM_AUTO);
    setenv("CORTIQ_VULKAN_DEVICE", "first", 1); /* warned about, left at the default */
    unsetenv("CORTIQ_VULKAN_RECORD");
    assert_int_equal(cq_env_backend_opts("vulkan:0", &o), CQ_OK);
    assert_int_equal(o.vulkan.device, 0);
    assert_false(o.vulkan.records);
    for (size_t i = 0; i < CQ_ARRAY_LEN(vars); i++) unsetenv(vars[i]);
    /* process settings: threads and log level */
    int logged = 0;
    cq_set_log(count_log, &logged, CQ_LOG_DEBUG);
    setenv("CORTIQ_THREADS", "3", 1);
    setenv("CORTIQ_LOG", "error", 1);
    cq_env_apply();
    assert_int_equal(cq_default_threads(), 3);
    CQ_WARN("below the level");
    assert_int_equal(logged, 0);
    cq_log(CQ_LOG_ERROR, "at the level");
    assert_int_equal(logged, 1);
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_cpu_create(0, CQ_CPU_AUTO, &be), CQ_OK);
    cq_backend_free(be);
    setenv("CORTIQ_THREADS", "lots", 1);
    unsetenv("CORTIQ_LOG");
    cq_env_apply();
    assert_int_equal(cq_default_threads(), cq_cpu()->logical_cores);
    assert_int_equal(logged, 2); /* the warning about 'lots', at the default level again */
    unsetenv("CORTIQ_THREADS");
    cq_set_default_threads(0);
    cq_set_log(NULL, NULL, CQ_LOG_WARN);
}

static void test_tensors(void **state) {
    (void)state;
    cq_tensor t;
    int64_t bad0[2] = {3, 0}, ok[2] = {3, 4}, huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    EXPECT(CQ_ERR_DTYPE, cq_tensor_alloc(cpu, CQ_DTYPE_Q8_ROW, 2, ok, &t), "q8_row");
    EXPECT(CQ_ERR_SHAPE, cq_tensor_alloc(cpu, CQ_DTYPE_F32, 2, bad0, &t), "dim 1");
    EXPECT(CQ_ERR_SHAPE, cq_tensor_alloc(cpu, CQ_DTYPE_F32, 0, ok, &t), NULL);
    EXPECT(CQ_ERR_SHAPE, cq_tensor_alloc(cpu, CQ_DTYPE_F32, 5, ok, &t), NULL);
    EXPECT(CQ_ERR_NOMEM, cq_tensor_alloc(cpu, CQ_DTYPE_F32, 2, huge, &t), "overflow");
    EXPECT(CQ_ERR_INVALID_ARG, cq_tensor_alloc(NULL, CQ_DTYPE_F32, 2, ok, &t), NULL);
    t = T2(cpu, CQ_DTYPE_F32, 3, 4);
    assert_int_equal(cq_tensor_rows(&t), 3);
    assert_int_equal(cq_tensor_cols(&t), 4);
    float v[12];
    EXPECT(CQ_ERR_BOUNDS, cq_tensor_upload(&t, v, 13 * sizeof(float)), "do not fit");
    EXPECT(CQ_ERR_BOUNDS, cq_tensor_download(&t, v, 13 * sizeof(float)), NULL);
    EXPECT(CQ_ERR_INVALID_ARG, cq_tensor_upload(&t, NULL, 4), NULL);
    for (int i = 0; i < 12; i++) v[i] = (float)i;
    assert_int_equal(cq_tensor_upload(&t, v, sizeof v), CQ_OK);
    /* Views share the buffer. */
    cq_tensor rv = cq_tensor_rows_view(&t, 1, 2), sv, rs;
    assert_non_null(rv.be);
    float back[8];
    assert_int_equal(cq_tensor_download(&rv, back, sizeof back), CQ_OK);
    assert_float_equal(back[0], 4.0f, 0.0f);
    assert_null(cq_tensor_rows_view(&t, 2, 2).be); /* out of range: zeroed */
    assert_null(cq_tensor_rows_view(&t, -1, 1).be);
    int64_t s3[1] = {3};
    assert_int_equal(cq_tensor_subview(&t, 9, 1, s3, &sv), CQ_OK);
    assert_int_equal(cq_tensor_download(&sv, back, 3 * sizeof(float)), CQ_OK);
    assert_float_equal(back[2], 11.0f, 0.0f);
    EXPECT(CQ_ERR_SHAPE, cq_tensor_subview(&t, 10, 1, s3, &sv), "outside");
    EXPECT(CQ_ERR_SHAPE, cq_tensor_subview(&t, -1, 1, s3, &sv), "outside");
    int64_t s26[2] = {2, 6}, s25[2] = {2, 5};
    assert_int_equal(cq_tensor_reshape(&t, 2, s26, &rs), CQ_OK);
    assert_int_equal(cq_tensor_cols(&rs), 6);
    EXPECT(CQ_ERR_SHAPE, cq_tensor_reshape(&t, 2, s25, &rs), "cannot become");
    /* An op on a zeroed (failed) view is rejected, not run. */
    cq_tensor dead = cq_tensor_rows_view(&t, 5, 1);
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_unary(cpu, &dead, &t, CQ_UNARY_NEG, 0, 0), "not allocated");
    cq_tensor_free(&sv); /* views do not free the buffer */
    cq_tensor_free(&rv);
    assert_int_equal(cq_tensor_download(&t, back, sizeof back), CQ_OK);
    cq_tensor_free(&t);
    cq_tensor_free(&t); /* zeroed: fine */
    cq_tensor_free(NULL);
}

static void test_weights(void **state) {
    (void)state;
    float w[64];
    for (int i = 0; i < 64; i++) w[i] = (float)i * 0.01f;
    uint64_t sh[2] = {2, 32}, nb;
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q8_ROW, 2, sh, &nb), CQ_OK);
    uint8_t *p = malloc(nb);
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_Q8_ROW, 2, sh, w, p, nb), CQ_OK);
    cq_tensor_view v = {.name = "blk.w", .dtype = CQ_DTYPE_Q8_ROW, .ndim = 2, .shape = {2, 32}, .nelem = 64,
                        .data = p, .nbytes = nb};
    cq_tensor t;
    assert_int_equal(cq_tensor_bind_weight(cpu, &v, &t), CQ_OK);
    assert_true(t.flags & CQ_TENSOR_WEIGHT);
    assert_ptr_equal(t.base, p); /* zero-copy on the CPU */
    EXPECT(CQ_ERR_INVALID_ARG, cq_tensor_upload(&t, w, 4), "immutable");
    EXPECT(CQ_ERR_INVALID_ARG, cq_tensor_zero(&t), "immutable");
    cq_tensor_free(&t);
    cq_tensor_view bad = v;
    bad.nbytes = nb - 1;
    cq_clear_error();
    assert_int_not_equal(cq_tensor_bind_weight(cpu, &bad, &t), CQ_OK);
    assert_non_null(strstr(cq_last_error(), "blk.w"));
    bad = v;
    bad.ndim = 5;
    bad.shape[2] = bad.shape[3] = bad.shape[4] = 1;
    EXPECT(CQ_ERR_SHAPE, cq_tensor_bind_weight(cpu, &bad, &t), "blk.w");
    bad = v;
    bad.dtype = (cq_dtype)77;
    EXPECT(CQ_ERR_DTYPE, cq_tensor_bind_weight(cpu, &bad, &t), "blk.w");
    free(p);
}

static void test_matmul_args(void **state) {
    (void)state;
    cq_tensor x = T2(cpu, CQ_DTYPE_F32, 3, 8), w = T2(cpu, CQ_DTYPE_F32, 5, 8), y = T2(cpu, CQ_DTYPE_F32, 3, 5);
    cq_tensor w7 = T2(cpu, CQ_DTYPE_F32, 5, 7), y4 = T2(cpu, CQ_DTYPE_F32, 3, 4), b4 = T1(cpu, CQ_DTYPE_F32, 4);
    cq_tensor b5 = T1(cpu, CQ_DTYPE_F32, 5), b5h = T1(cpu, CQ_DTYPE_F16, 5), yh = T2(cpu, CQ_DTYPE_F16, 3, 5);
    cq_tensor w1d = T1(cpu, CQ_DTYPE_F32, 8), xr = T2(ref, CQ_DTYPE_F32, 3, 8), sq = T2(cpu, CQ_DTYPE_F32, 8, 8);
    assert_int_equal(cq_op_linear(cpu, &y, &x, &w, &b5), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_linear(cpu, &y, &x, &w7, NULL), "columns");
    EXPECT(CQ_ERR_SHAPE, cq_op_linear(cpu, &y4, &x, &w, NULL), "'y'");
    EXPECT(CQ_ERR_SHAPE, cq_op_linear(cpu, &y, &x, &w, &b4), "'bias'");
    EXPECT(CQ_ERR_DTYPE, cq_op_linear(cpu, &y, &x, &w, &b5h), "f32");
    EXPECT(CQ_ERR_DTYPE, cq_op_linear(cpu, &yh, &x, &w, NULL), "y is f16");
    EXPECT(CQ_ERR_SHAPE, cq_op_linear(cpu, &y, &x, &w1d, NULL), "1-D");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_linear(cpu, &y, &xr, &w, NULL), "belongs to backend ref");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_linear(cpu, &y, NULL, &w, NULL), "missing");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_linear(NULL, &y, &x, &w, NULL), NULL);
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_matmul(cpu, NULL), NULL);
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_linear(cpu, &sq, &sq, &sq, NULL), "overlaps");
    cq_matmul_args a = {.y = &y, .x = &x, .w = &w, .gate = &b5};
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_matmul(cpu, &a), "accumulate");
    a = (cq_matmul_args){.y = &y, .x = &x, .w = &w, .w2 = &w};
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_matmul(cpu, &a), "swiglu");
    a = (cq_matmul_args){.y = &y, .x = &x, .w = &w, .act = CQ_ACT_SWIGLU};
    EXPECT(CQ_ERR_SHAPE, cq_op_matmul(cpu, &a), "even");
    a = (cq_matmul_args){.y = &y, .x = &x, .w = &w, .act = (cq_act)9};
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_matmul(cpu, &a), "activation");
    a = (cq_matmul_args){.y = &y, .x = &x, .w = &w, .scale = NAN};
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_matmul(cpu, &a), "scale");
    a = (cq_matmul_args){.y = &y, .x = &x, .w = &w, .w2 = &w7, .act = CQ_ACT_SWIGLU};
    EXPECT(CQ_ERR_SHAPE, cq_op_matmul(cpu, &a), "w2");
    cq_tensor *all[] = {&x, &w, &y, &w7, &y4, &b4, &b5, &b5h, &yh, &w1d, &xr, &sq};
    for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
}

static void test_attention_args(void **state) {
    (void)state;
    cq_tensor q = T2(cpu, CQ_DTYPE_F32, 4, 32), k = T2(cpu, CQ_DTYPE_F32, 6, 16), v = T2(cpu, CQ_DTYPE_F32, 6, 16);
    cq_tensor o = T2(cpu, CQ_DTYPE_F32, 4, 32), v5 = T2(cpu, CQ_DTYPE_F32, 5, 16), kb = T2(cpu, CQ_DTYPE_BF16, 6, 16);
    cq_tensor vis = T1(cpu, CQ_DTYPE_I32, 4), vis3 = T1(cpu, CQ_DTYPE_I32, 3), visf = T1(cpu, CQ_DTYPE_F32, 4);
    cq_tensor qb = T2(cpu, CQ_DTYPE_BF16, 4, 32), ob = T2(cpu, CQ_DTYPE_BF16, 4, 32);
    cq_attn_args a = {.o = &o, .q = &q, .k = &k, .v = &v, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8, .vis = &vis};
    assert_int_equal(cq_op_attention(cpu, &a), CQ_OK);
    cq_attn_args b = a;
    b.n_kv_heads = 3;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "multiple");
    b = a;
    b.head_dim = 4;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "'q'");
    b = a;
    b.v = &v5;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "rows");
    b = a;
    b.v = NULL;
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_attention(cpu, &b), "together");
    b = a;
    b.k = b.v = NULL;
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_attention(cpu, &b), "no keys");
    b = a;
    b.k = &kb;
    EXPECT(CQ_ERR_DTYPE, cq_op_attention(cpu, &b), "'k'");
    b = a;
    b.vis = &vis3;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "'vis'");
    b = a;
    b.vis = &visf;
    EXPECT(CQ_ERR_DTYPE, cq_op_attention(cpu, &b), "i32");
    b = a;
    b.vis_lo = &vis3;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "'vis_lo'");
    b = a;
    b.vis_lo = &visf;
    EXPECT(CQ_ERR_DTYPE, cq_op_attention(cpu, &b), "i32");
    b = a;
    b.o = &q;
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_attention(cpu, &b), "overlaps");
    b = a;
    b.head_dim = 0;
    EXPECT(CQ_ERR_SHAPE, cq_op_attention(cpu, &b), "head_dim");
    b = (cq_attn_args){.o = &ob, .q = &qb, .k_prefix = &kb, .v_prefix = &kb, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8};
    EXPECT(CQ_ERR_UNSUPPORTED, cq_op_attention(cpu, &b), "bf16");
    cq_tensor *all[] = {&q, &k, &v, &o, &v5, &kb, &vis, &vis3, &visf, &qb, &ob};
    for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
}

static void test_row_op_args(void **state) {
    (void)state;
    cq_tensor x = T2(cpu, CQ_DTYPE_F32, 4, 8), y = T2(cpu, CQ_DTYPE_F32, 4, 8), y7 = T2(cpu, CQ_DTYPE_F32, 4, 7);
    cq_tensor c8 = T1(cpu, CQ_DTYPE_F32, 8), c7 = T1(cpu, CQ_DTYPE_F32, 7), big = T2(cpu, CQ_DTYPE_F32, 8, 8);
    cq_tensor cs = T2(cpu, CQ_DTYPE_F32, 4, 2), cs3 = T2(cpu, CQ_DTYPE_F32, 3, 2), i4 = T1(cpu, CQ_DTYPE_I32, 32);
    cq_tensor x16 = T2(cpu, CQ_DTYPE_F32, 4, 16), xb = T2(cpu, CQ_DTYPE_BF16, 4, 8), yb = T2(cpu, CQ_DTYPE_BF16, 4, 8);
    cq_tensor shifted = cq_tensor_rows_view(&big, 1, 4), first = cq_tensor_rows_view(&big, 0, 4);
    assert_int_equal(cq_op_layernorm(cpu, &y, &x, &c8, &c8, 1e-6f), CQ_OK);
    assert_int_equal(cq_op_layernorm(cpu, &x, &x, NULL, NULL, 1e-6f), CQ_OK); /* exact in place */
    EXPECT(CQ_ERR_SHAPE, cq_op_layernorm(cpu, &y7, &x, NULL, NULL, 1e-6f), "layernorm");
    EXPECT(CQ_ERR_SHAPE, cq_op_layernorm(cpu, &y, &x, &c7, NULL, 1e-6f), "'scale'");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_layernorm(cpu, &y, &x, NULL, NULL, -1.0f), "eps");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_layernorm(cpu, &shifted, &first, NULL, NULL, 1e-6f), "partially");
    EXPECT(CQ_ERR_UNSUPPORTED, cq_op_layernorm(cpu, &yb, &xb, NULL, NULL, 1e-6f), "bf16");
    assert_int_equal(cq_op_layernorm(ref, &(cq_tensor){0}, &xb, NULL, NULL, 1e-6f), CQ_ERR_INVALID_ARG);
    EXPECT(CQ_ERR_SHAPE, cq_op_rmsnorm(cpu, &y, &x, &c7, NULL, false, 1e-6f), "rmsnorm");
    EXPECT(CQ_ERR_SHAPE, cq_op_groupnorm(cpu, &y, &x, 3, NULL, NULL, 1e-6f), "groups");
    EXPECT(CQ_ERR_SHAPE, cq_op_groupnorm(cpu, &y, &x, 0, NULL, NULL, 1e-6f), "groups");
    /* group_moments: x [4, 8], 4 groups, blocks of 2 rows -> m [2, 8] */
    cq_tensor m28 = T2(cpu, CQ_DTYPE_F32, 2, 8), m28b = T2(cpu, CQ_DTYPE_BF16, 2, 8);
    assert_int_equal(cq_op_group_moments(cpu, &m28, &x, 4, 2), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_group_moments(cpu, &m28, &x, 3, 2), "groups");
    EXPECT(CQ_ERR_SHAPE, cq_op_group_moments(cpu, &m28, &x, 4, 3), "blocks of 3 rows");
    EXPECT(CQ_ERR_SHAPE, cq_op_group_moments(cpu, &y, &x, 4, 2), "'m'");
    EXPECT(CQ_ERR_DTYPE, cq_op_group_moments(cpu, &m28b, &x, 4, 2), "'m'");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_group_moments(cpu, &m28, NULL, 4, 2), "'x'");
    /* qk_norm_rope: t [4, 2 heads x 4]. */
    assert_int_equal(cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, &cs, &cs, CQ_ROPE_HALF, 0), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, &cs, &cs, CQ_ROPE_HALF, 3), "rope_dim");
    EXPECT(CQ_ERR_SHAPE, cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, &cs, &cs, CQ_ROPE_HALF, 6), "rope_dim");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, NULL, &cs, CQ_ROPE_HALF, 0), "cos");
    EXPECT(CQ_ERR_SHAPE, cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, &cs3, &cs, CQ_ROPE_HALF, 0), "'cos'");
    EXPECT(CQ_ERR_SHAPE, cq_op_qk_norm_rope(cpu, &x, 3, 4, NULL, 1e-6f, &cs, &cs, CQ_ROPE_HALF, 0), "'t'");
    EXPECT(CQ_ERR_SHAPE, cq_op_qk_norm_rope(cpu, &x, 2, 4, &c8, 1e-6f, &cs, &cs, CQ_ROPE_HALF, 0), "'w'");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_qk_norm_rope(cpu, &x, 2, 4, NULL, 1e-6f, &cs, &cs, (cq_rope_mode)7, 0), "mode");
    /* elementwise */
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_unary(cpu, &y, &x, (cq_unary)99, 0, 0), "unknown");
    EXPECT(CQ_ERR_SHAPE, cq_op_binary(cpu, &y, &x, &c7, CQ_BINARY_ADD), "one row");
    assert_int_equal(cq_op_binary(cpu, &y, &x, &c8, CQ_BINARY_MUL), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_binary(cpu, &c8, &x, &c8, CQ_BINARY_ADD), "binary");
    EXPECT(CQ_ERR_SHAPE, cq_op_gated_add(cpu, &y, &x, &c7), "'gate'");
    EXPECT(CQ_ERR_SHAPE, cq_op_swiglu(cpu, &y7, &x16, NULL), "'y'");
    assert_int_equal(cq_op_swiglu(cpu, &y, &x16, NULL), CQ_OK);
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_softmax(cpu, &y, &x, INFINITY), "scale");
    EXPECT(CQ_ERR_SHAPE, cq_op_copy(cpu, &y7, &x), "elements");
    EXPECT(CQ_ERR_DTYPE, cq_op_copy(cpu, &i4, &x), "i32");
    assert_int_equal(cq_op_copy(cpu, &yb, &x), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_transpose(cpu, &y, &x), "transpose");
    EXPECT(CQ_ERR_SHAPE, cq_op_concat_cols(cpu, &y, &x, &x), "concat_cols");
    cq_tensor *all[] = {&x, &y, &y7, &c8, &c7, &big, &cs, &cs3, &i4, &x16, &xb, &yb, &m28, &m28b};
    for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
}

static void test_get_rows_ids(void **state) {
    (void)state;
    cq_backend *bes[2] = {cpu, ref};
    for (int b = 0; b < 2; b++) {
        cq_tensor w = T2(bes[b], CQ_DTYPE_F32, 5, 3), y = T2(bes[b], CQ_DTYPE_F32, 2, 3), ids = T1(bes[b], CQ_DTYPE_I32, 2);
        cq_tensor idf = T1(bes[b], CQ_DTYPE_F32, 2);
        int32_t good[2] = {4, 0}, bad[2] = {1, 5}, neg[2] = {-1, 0};
        assert_int_equal(cq_tensor_upload(&ids, good, sizeof good), CQ_OK);
        assert_int_equal(cq_op_get_rows(bes[b], &y, &w, &ids), CQ_OK);
        assert_int_equal(cq_tensor_upload(&ids, bad, sizeof bad), CQ_OK);
        EXPECT(CQ_ERR_BOUNDS, cq_op_get_rows(bes[b], &y, &w, &ids), "id 5");
        assert_int_equal(cq_tensor_upload(&ids, neg, sizeof neg), CQ_OK);
        EXPECT(CQ_ERR_BOUNDS, cq_op_get_rows(bes[b], &y, &w, &ids), "id -1");
        EXPECT(CQ_ERR_DTYPE, cq_op_get_rows(bes[b], &y, &w, &idf), "i32");
        cq_tensor_free(&w);
        cq_tensor_free(&y);
        cq_tensor_free(&ids);
        cq_tensor_free(&idf);
    }
}

/* gather_cols: argument checks, and index values checked by both backends
 * (-1 is a zero slot, anything else outside [0, K) is an error). */
static void test_gather_cols_args(void **state) {
    (void)state;
    cq_backend *bes[2] = {cpu, ref};
    for (int b = 0; b < 2; b++) {
        cq_backend *be = bes[b];
        cq_tensor x = T2(be, CQ_DTYPE_F32, 3, 4), y = T2(be, CQ_DTYPE_F32, 3, 2), ids = T1(be, CQ_DTYPE_I32, 4);
        cq_tensor y5 = T2(be, CQ_DTYPE_F32, 2, 2), idf = T1(be, CQ_DTYPE_F32, 4), xh = T2(be, CQ_DTYPE_F16, 3, 4);
        float xv[12], yv[6];
        for (int i = 0; i < 12; i++) xv[i] = (float)(i + 1);
        assert_int_equal(cq_tensor_upload(&x, xv, sizeof xv), CQ_OK);
        int32_t good[4] = {3, -1, 0, 2}, big[4] = {0, 1, 4, 0}, low[4] = {0, -2, 1, 1};
        assert_int_equal(cq_tensor_upload(&ids, good, sizeof good), CQ_OK);
        assert_int_equal(cq_op_gather_cols(be, &y, &x, &ids, 2, 0.5f), CQ_OK);
        assert_int_equal(cq_tensor_download(&y, yv, sizeof yv), CQ_OK);
        /* row 1 = 5 6 7 8: (8 + 0) / 2, (5 + 7) / 2 */
        assert_float_equal(yv[2], 4.0f, 0.0f);
        assert_float_equal(yv[3], 6.0f, 0.0f);
        EXPECT(CQ_ERR_SHAPE, cq_op_gather_cols(be, &y, &x, &ids, 1, 1.0f), "'idx'");
        EXPECT(CQ_ERR_SHAPE, cq_op_gather_cols(be, &y5, &x, &ids, 2, 1.0f), "'y'");
        EXPECT(CQ_ERR_INVALID_ARG, cq_op_gather_cols(be, &y, &x, &ids, 0, 1.0f), "group");
        EXPECT(CQ_ERR_INVALID_ARG, cq_op_gather_cols(be, &y, &x, &ids, 2, NAN), "scale");
        EXPECT(CQ_ERR_DTYPE, cq_op_gather_cols(be, &y, &x, &idf, 2, 1.0f), "i32");
        EXPECT(CQ_ERR_DTYPE, cq_op_gather_cols(be, &y, &xh, &ids, 2, 1.0f), "'y'");
        EXPECT(CQ_ERR_INVALID_ARG, cq_op_gather_cols(be, &x, &x, &ids, 1, 1.0f), "overlaps");
        assert_int_equal(cq_tensor_upload(&ids, big, sizeof big), CQ_OK);
        EXPECT(CQ_ERR_BOUNDS, cq_op_gather_cols(be, &y, &x, &ids, 2, 1.0f), "index 4");
        assert_int_equal(cq_tensor_upload(&ids, low, sizeof low), CQ_OK);
        EXPECT(CQ_ERR_BOUNDS, cq_op_gather_cols(be, &y, &x, &ids, 2, 1.0f), "index -2");
        cq_tensor *all[] = {&x, &y, &ids, &y5, &idf, &xh};
        for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
    }
}

static void test_image_args(void **state) {
    (void)state;
    cq_tensor x = T2(cpu, CQ_DTYPE_F32, 4 * 5, 3), w = T2(cpu, CQ_DTYPE_F32, 6, 27), y = T2(cpu, CQ_DTYPE_F32, 20, 6);
    cq_tensor w26 = T2(cpu, CQ_DTYPE_F32, 6, 26), ys = T2(cpu, CQ_DTYPE_F32, 19, 6);
    cq_conv2d_args a = {.y = &y, .x = &x, .w = &w, .H = 4, .W = 5, .kh = 3, .kw = 3, .stride_y = 1, .stride_x = 1,
                        .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1, .mode = CQ_PAD_REFLECT};
    assert_int_equal(cq_op_conv2d(cpu, &a), CQ_OK);
    cq_conv2d_args b = a;
    b.w = &w26;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "weight");
    b = a;
    b.y = &ys;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "'y'");
    b = a;
    b.pad_t = 4;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "reflect");
    b = a;
    b.stride_x = 0;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "stride");
    b = a;
    b.pad_l = -1;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "negative");
    b = a;
    b.H = 5;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "'x'");
    b = a;
    b.kh = 7;
    b.mode = CQ_PAD_ZERO;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv2d(cpu, &b), "larger");
    cq_tensor up = T2(cpu, CQ_DTYPE_F32, 80, 3), ps = T2(cpu, CQ_DTYPE_F32, 80, 1), x4 = T2(cpu, CQ_DTYPE_F32, 20, 4);
    assert_int_equal(cq_op_upsample_nearest(cpu, &up, &x, 4, 5, 2), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_upsample_nearest(cpu, &up, &x, 4, 5, 3), "'y'");
    EXPECT(CQ_ERR_SHAPE, cq_op_upsample_nearest(cpu, &up, &x, 4, 5, 0), "factor");
    EXPECT(CQ_ERR_SHAPE, cq_op_pixel_shuffle(cpu, &ps, &x, 4, 5, 2), "multiple");
    assert_int_equal(cq_op_pixel_shuffle(cpu, &ps, &x4, 4, 5, 2), CQ_OK);
    assert_int_equal(cq_op_pixel_unshuffle(cpu, &x4, &ps, 4, 5, 2), CQ_OK);
    EXPECT(CQ_ERR_SHAPE, cq_op_pixel_unshuffle(cpu, &x4, &ps, 5, 4, 3), "pixel_unshuffle");
    cq_tensor *all[] = {&x, &w, &y, &w26, &ys, &up, &ps, &x4};
    for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
}

/* Ops issued from inside pool tasks run inline on the task's thread (no
 * oversubscription) and give the same results as a top-level call. */
typedef struct nest_ctx {
    cq_tensor *x, *w;
    cq_tensor y[4];
    cq_status st[4];
} nest_ctx;

static void nest_task(size_t t, size_t n, void *arg) {
    (void)n;
    nest_ctx *c = arg;
    c->st[t] = cq_op_linear(cpu, &c->y[t], c->x, c->w, NULL);
}

static void test_nested(void **state) {
    (void)state;
    tu_rng r;
    tu_rng_seed(&r, 7);
    float xv[33 * 40], wv[70 * 40], ref_y[33 * 70], got[33 * 70];
    tu_fill_normal(&r, xv, CQ_ARRAY_LEN(xv), 1.0f);
    tu_fill_normal(&r, wv, CQ_ARRAY_LEN(wv), 0.2f);
    cq_tensor x = T2(cpu, CQ_DTYPE_F32, 33, 40), w = T2(cpu, CQ_DTYPE_F32, 70, 40), y = T2(cpu, CQ_DTYPE_F32, 33, 70);
    assert_int_equal(cq_tensor_upload(&x, xv, sizeof xv), CQ_OK);
    assert_int_equal(cq_tensor_upload(&w, wv, sizeof wv), CQ_OK);
    assert_int_equal(cq_op_linear(cpu, &y, &x, &w, NULL), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, ref_y, sizeof ref_y), CQ_OK);
    nest_ctx c = {.x = &x, .w = &w};
    for (int i = 0; i < 4; i++) c.y[i] = T2(cpu, CQ_DTYPE_F32, 33, 70);
    cq_pool *pool;
    assert_int_equal(cq_pool_create(2, &pool), CQ_OK);
    cq_pool_run(pool, 4, nest_task, &c);
    cq_pool_free(pool);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c.st[i], CQ_OK);
        assert_int_equal(cq_tensor_download(&c.y[i], got, sizeof got), CQ_OK);
        assert_memory_equal(got, ref_y, sizeof got); /* same tiling, same order: bit-identical */
        cq_tensor_free(&c.y[i]);
    }
    cq_tensor_free(&x);
    cq_tensor_free(&w);
    cq_tensor_free(&y);
}

/* The video VAE and vocoder ops: every bad geometry, weight, vector and eps is refused with its message. */
static void test_ltx_op_args(void **state) {
    (void)state;
    cq_backend *be = cpu;
    cq_tensor x, y, w, yb;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 2 * 3 * 4, 5, &x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 2 * 3 * 4, 6, &y), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 6, 5 * 27, &w), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 7, 6, &yb), CQ_OK);
    cq_conv3d_args a = {.y = &y, .x = &x, .w = &w, .T = 2, .H = 3, .W = 4, .kt = 3, .kh = 3, .kw = 3, .stride_t = 1,
                        .stride_y = 1, .stride_x = 1, .pad_front = 2, .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1};
    assert_int_equal(cq_op_conv3d(be, &a), CQ_OK);
    cq_conv3d_args b = a;
    b.stride_t = 0;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv3d(be, &b), "stride");
    b = a;
    b.pad_front = 0; /* 2 frames under a 3-frame kernel */
    EXPECT(CQ_ERR_SHAPE, cq_op_conv3d(be, &b), "spans 3 samples");
    b = a;
    b.mode = CQ_PAD_REFLECT;
    b.pad_t = 3; /* reflect pad as large as the image */
    b.pad_b = 0;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv3d(be, &b), "reflect");
    b = a;
    b.kw = 2; /* the weight no longer matches */
    EXPECT(CQ_ERR_SHAPE, cq_op_conv3d(be, &b), "weight");
    b = a;
    b.mode = (cq_pad_mode)7;
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_conv3d(be, &b), "padding mode");
    b = a;
    b.y = &yb;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv3d(be, &b), "'y'");
    b = a;
    b.T = 1 << 30; /* x no longer holds T*H*W rows; no overflow on the way */
    b.H = 1 << 30;
    assert_int_not_equal(cq_op_conv3d(be, &b), CQ_OK);
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_conv3d(be, NULL), "args is NULL");

    /* depth_to_space3d: channels not a multiple of the factors */
    EXPECT(CQ_ERR_SHAPE, cq_op_depth_to_space3d(be, &y, &x, 2, 3, 4, 2, 1, 1), "not a multiple");
    EXPECT(CQ_ERR_SHAPE, cq_op_depth_to_space3d(be, &y, &x, 2, 3, 4, 0, 1, 1), "factors");

    /* conv1d / conv_transpose1d on x [24, 5] */
    cq_tensor w1, y1;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 6, 5 * 3, &w1), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 24, 6, &y1), CQ_OK);
    cq_conv1d_args c1 = {.y = &y1, .x = &x, .w = &w1, .k = 3, .stride = 1, .dilation = 1, .groups = 1, .pad_l = 1,
                         .pad_r = 1};
    assert_int_equal(cq_op_conv1d(be, &c1), CQ_OK);
    cq_conv1d_args d1 = c1;
    d1.groups = 2; /* 5 input channels */
    EXPECT(CQ_ERR_SHAPE, cq_op_conv1d(be, &d1), "groups");
    d1 = c1;
    d1.dilation = 20; /* the kernel spans 41 samples */
    EXPECT(CQ_ERR_SHAPE, cq_op_conv1d(be, &d1), "spans 41");
    d1 = c1;
    d1.pad_l = -1;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv1d(be, &d1), "negative");
    d1 = c1;
    d1.mode = CQ_PAD_REFLECT;
    d1.pad_l = 24;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv1d(be, &d1), "reflect");
    /* transposed: weight [Cin=5, Cout, k], stride 2 -> (24-1)*2 + 3 = 49 samples */
    cq_tensor wt, yt;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 5, 6 * 3, &wt), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 47, 6, &yt), CQ_OK);
    cq_conv1d_args t1 = {.y = &yt, .x = &x, .w = &wt, .k = 3, .stride = 2, .dilation = 1, .groups = 1, .pad_l = 1,
                         .pad_r = 1};
    assert_int_equal(cq_op_conv_transpose1d(be, &t1), CQ_OK);
    cq_conv1d_args u1 = t1;
    u1.dilation = 2;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv_transpose1d(be, &u1), "dilation");
    u1 = t1;
    u1.pad_l = 40; /* crops everything */
    u1.pad_r = 40;
    EXPECT(CQ_ERR_SHAPE, cq_op_conv_transpose1d(be, &u1), "leaves none");
    u1 = t1;
    u1.w = &w1; /* a conv1d weight [6, 15] */
    EXPECT(CQ_ERR_SHAPE, cq_op_conv_transpose1d(be, &u1), "weight");

    /* snake: per-channel vectors of the right length, finite non-negative eps */
    cq_tensor al, bt;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 1, 5, &al), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 1, 4, &bt), CQ_OK);
    float ones[5] = {1, 1, 1, 1, 1};
    assert_int_equal(cq_tensor_upload(&al, ones, sizeof ones), CQ_OK);
    assert_int_equal(cq_op_snake(be, &x, &x, &al, NULL, false, 1e-9f), CQ_OK); /* in place */
    EXPECT(CQ_ERR_SHAPE, cq_op_snake(be, &x, &x, &al, &bt, true, 1e-9f), "'beta'");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_snake(be, &x, &x, NULL, NULL, true, 1e-9f), "alpha is NULL");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_snake(be, &x, &x, &al, NULL, true, NAN), "eps is not finite");
    EXPECT(CQ_ERR_INVALID_ARG, cq_op_snake(be, &x, &x, &al, NULL, true, -1.0f), "negative");
    cq_clear_error();
    cq_tensor *ts[] = {&x, &y, &w, &yb, &w1, &y1, &wt, &yt, &al, &bt};
    for (size_t i = 0; i < CQ_ARRAY_LEN(ts); i++) cq_tensor_free(ts[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backends),       cmocka_unit_test(test_registry),     cmocka_unit_test(test_env_mapping),       cmocka_unit_test(test_tensors),      cmocka_unit_test(test_weights),
        cmocka_unit_test(test_matmul_args),    cmocka_unit_test(test_attention_args), cmocka_unit_test(test_row_op_args),
        cmocka_unit_test(test_get_rows_ids),   cmocka_unit_test(test_gather_cols_args), cmocka_unit_test(test_image_args),   cmocka_unit_test(test_ltx_op_args),   cmocka_unit_test(test_nested),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
