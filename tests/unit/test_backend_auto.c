/*
 * test_backend_auto.c — the automatic backend choice (cq_backend_resolve:
 * "auto" is CUDA where the build and the device allow it, else the CPU, with
 * the reason) and the device-memory sizes of --gpu-memory and
 * CORTIQ_GPU_MEMORY (cq_env_parse_gib, cq_env_gpu_memory). In a build
 * without CUDA every answer is exact; with CUDA the pick must agree with the
 * device the driver reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "backends/cuda/cuda.h"
#include "cli/env.h"
#include "testutil.h"

#define GIB ((uint64_t)1 << 30)

static int setup(void **state) {
    (void)state;
    unsetenv("CORTIQ_BACKEND");
    unsetenv("CORTIQ_GPU_MEMORY");
    unsetenv("CORTIQ_CUDA_DEVICE");
    unsetenv("CORTIQ_CPU");
    return 0;
}

static void test_is_auto(void **state) {
    (void)state;
    assert_true(cq_backend_is_auto("auto"));
    assert_true(cq_backend_is_auto("AUTO"));
    assert_false(cq_backend_is_auto("autox"));
    assert_false(cq_backend_is_auto("cpu"));
    assert_false(cq_backend_is_auto(""));
    assert_false(cq_backend_is_auto(NULL));
}

/* What auto must say on this build and machine. */
static void check_auto_pick(const char *pick, const char *why) {
    if (!cq_cuda_built()) {
        assert_string_equal(pick, "cpu");
        assert_string_equal(why, "this build has no CUDA backend");
        return;
    }
    char reason[256];
    if (cq_cuda_device_count(reason, sizeof reason) == 0) {
        assert_string_equal(pick, "cpu");
        if (strncmp(why, "no CUDA device visible: ", 24)) fail_msg("reason: %s", why);
        return;
    }
    cq_gpu_info g;
    assert_int_equal(cq_cuda_device_info(0, &g), CQ_OK);
    if (g.cc_major < 8) {
        assert_string_equal(pick, "cpu");
        if (!strstr(why, "needs 8.0")) fail_msg("reason: %s", why);
    } else if (!strcmp(pick, "cpu")) {
        if (!strstr(why, "has no cuBLASLt")) fail_msg("a usable device but the CPU picked: %s", why);
    } else {
        assert_string_equal(pick, "cuda:0");
        if (strncmp(why, g.name, strlen(g.name)) || !strstr(why, " free")) fail_msg("reason: %s", why);
    }
}

static void test_resolve(void **state) {
    (void)state;
    char pick[32], why[256];
    assert_int_equal(cq_backend_resolve("auto", NULL, pick, sizeof pick, why, sizeof why), CQ_OK);
    check_auto_pick(pick, why);
    assert_int_equal(cq_backend_resolve("Auto", NULL, pick, sizeof pick, NULL, 0), CQ_OK);
    if (!cq_cuda_built()) assert_string_equal(pick, "cpu");
    /* a device that does not exist is no CUDA choice either */
    const cq_backend_opts far = {.device = 1000};
    assert_int_equal(cq_backend_resolve("auto", &far, pick, sizeof pick, why, sizeof why), CQ_OK);
    assert_string_equal(pick, "cpu");
    if (cq_cuda_built() && cq_cuda_device_count(NULL, 0) > 0 && !strstr(why, "does not exist"))
        fail_msg("reason: %s", why);
    /* other names are checked and copied, with no reason */
    strcpy(why, "stale");
    assert_int_equal(cq_backend_resolve("cpu", NULL, pick, sizeof pick, why, sizeof why), CQ_OK);
    assert_string_equal(pick, "cpu");
    assert_string_equal(why, "");
    assert_int_equal(cq_backend_resolve("CUDA:1", NULL, pick, sizeof pick, why, sizeof why), CQ_OK);
    assert_string_equal(pick, "CUDA:1");
    assert_int_equal(cq_backend_resolve(NULL, NULL, pick, sizeof pick, why, sizeof why), CQ_OK);
    assert_string_equal(pick, "cpu");
    cq_clear_error();
    assert_int_equal(cq_backend_resolve("nosuch", NULL, pick, sizeof pick, why, sizeof why), CQ_ERR_UNSUPPORTED);
    if (!strstr(cq_last_error(), "unknown backend 'nosuch' (have: cpu, ref, cuda[:N], vulkan[:N], auto"))
        fail_msg("message: %s", cq_last_error());
    assert_string_equal(pick, "");
    assert_int_equal(cq_backend_resolve("vulkan", NULL, pick, 4, why, sizeof why), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_backend_resolve("cpu", NULL, NULL, 0, why, sizeof why), CQ_ERR_INVALID_ARG);
    /* the lookup accepts auto as the entry it picks */
    const cq_backend_desc *d;
    int dev;
    assert_int_equal(cq_backend_lookup("auto", &d, &dev), CQ_OK);
    assert_int_equal(cq_backend_resolve("auto", NULL, pick, sizeof pick, NULL, 0), CQ_OK);
    assert_string_equal(d->name, !strcmp(pick, "cpu") ? "cpu" : "cuda");
    assert_int_equal(dev, !strcmp(pick, "cpu") ? -1 : 0);
}

static void test_open_auto(void **state) {
    (void)state;
    cq_backend *be = NULL;
    const cq_backend_opts o = {.cpu = {.threads = 1}, .mem_budget = 3 * GIB};
    assert_int_equal(cq_backend_open("auto", &o, &be), CQ_OK);
    char pick[32];
    assert_int_equal(cq_backend_resolve("auto", NULL, pick, sizeof pick, NULL, 0), CQ_OK);
    if (!strcmp(pick, "cpu")) {
        assert_true(cq_backend_is_host(be));
        assert_int_equal(strncmp(cq_backend_name(be), "cpu", 3), 0);
        assert_int_equal(cq_backend_mem_budget(be), 0); /* host backends have none */
    } else {
        assert_false(cq_backend_is_host(be));
        assert_int_equal(cq_backend_mem_budget(be), 3 * GIB);
    }
    cq_backend_free(be);
    assert_int_equal(cq_backend_ref_create(&be), CQ_OK);
    assert_true(cq_backend_is_host(be));
    cq_backend_free(be);
    assert_false(cq_backend_is_host(NULL));
    /* the environment's path: CORTIQ_GPU_MEMORY is read where the command gave no size, and checked */
    setenv("CORTIQ_GPU_MEMORY", "abc", 1);
    cq_clear_error();
    assert_int_equal(cq_env_backend_open("auto", 1, 0, &be), CQ_ERR_INVALID_ARG);
    assert_null(be);
    if (!strstr(cq_last_error(), "CORTIQ_GPU_MEMORY: 'abc' is not a device-memory size"))
        fail_msg("message: %s", cq_last_error());
    assert_int_equal(cq_env_backend_open("cpu", 1, 2 * GIB, &be), CQ_OK); /* the command's size wins */
    cq_backend_free(be);
    unsetenv("CORTIQ_GPU_MEMORY");
    char why[256];
    assert_int_equal(cq_env_backend_resolve("auto", pick, sizeof pick, why, sizeof why), CQ_OK);
    check_auto_pick(pick, why);
}

static void test_parse_gib(void **state) {
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"7.5", 8053063680u},     {"24", 24 * GIB},          {"0.5", GIB / 2},      {".25", GIB / 4},
        {"1.", GIB},              {"0.0009765625", 1 << 20}, {"65536", 65536 * GIB}, {"007", 7 * GIB},
        {"1.0000000001", GIB},    {"11.3", 12133282611u}, /* 11.3 x 2^30 = 12133282611.2, rounded */
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(good); i++) {
        uint64_t b = 1;
        if (cq_env_parse_gib(good[i].text, &b) != CQ_OK) fail_msg("'%s': %s", good[i].text, cq_last_error());
        if (b != good[i].bytes)
            fail_msg("'%s': %llu bytes, want %llu", good[i].text, (unsigned long long)b,
                     (unsigned long long)good[i].bytes);
    }
    static const char *const bad[] = {"0",   "-1",  "abc",    "1e9999", "inf", "nan", "",      " 7",     "7 ",
                                      "0x10", "1.2.3", ".",   "+3",     "65536.5", "0.0009", "1e3", "7GiB", "0.0"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(bad); i++) {
        uint64_t b = 1;
        cq_clear_error();
        if (cq_env_parse_gib(bad[i], &b) != CQ_ERR_INVALID_ARG) fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(b, 0);
        char want[64];
        snprintf(want, sizeof want, "'%s' is not a device-memory size", bad[i]);
        if (!strstr(cq_last_error(), want)) fail_msg("'%s': message %s", bad[i], cq_last_error());
    }
    uint64_t b;
    assert_int_equal(cq_env_parse_gib(NULL, &b), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_env_parse_gib("1", NULL), CQ_ERR_INVALID_ARG);
    /* the option, else the variable, else 0 */
    assert_int_equal(cq_env_gpu_memory(NULL, &b), CQ_OK);
    assert_int_equal(b, 0);
    setenv("CORTIQ_GPU_MEMORY", "12", 1);
    assert_int_equal(cq_env_gpu_memory(NULL, &b), CQ_OK);
    assert_int_equal(b, 12 * GIB);
    assert_int_equal(cq_env_gpu_memory("3", &b), CQ_OK);
    assert_int_equal(b, 3 * GIB);
    setenv("CORTIQ_GPU_MEMORY", "-2", 1);
    cq_clear_error();
    assert_int_equal(cq_env_gpu_memory(NULL, &b), CQ_ERR_INVALID_ARG);
    if (!strstr(cq_last_error(), "CORTIQ_GPU_MEMORY: '-2'")) fail_msg("message: %s", cq_last_error());
    cq_clear_error();
    assert_int_equal(cq_env_gpu_memory("0", &b), CQ_ERR_INVALID_ARG);
    if (strstr(cq_last_error(), "CORTIQ_GPU_MEMORY")) fail_msg("the option's error names the variable: %s", cq_last_error());
    unsetenv("CORTIQ_GPU_MEMORY");
}

/* The public API: "auto" is accepted, NULL stays the CPU, gpu_memory reaches the backend. */
static void test_model_api(void **state) {
    (void)state;
    const char *path = CQ_SOURCE_DIR "/models/shapes.cmf";
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("models/shapes.cmf is absent: the public API part is not run\n");
        skip();
    }
    fclose(f);
    for (int i = 0; i < 2; i++) {
        const cq_model_opts mo = {.backend = i ? "auto" : NULL, .threads = 1, .gpu_memory = 5 * GIB};
        cq_model *m = NULL;
        assert_int_equal(cq_model_open(path, &mo, &m), CQ_OK);
        assert_int_equal(cq_model_load(m), CQ_OK);
        char pick[32];
        assert_int_equal(cq_backend_resolve(mo.backend, NULL, pick, sizeof pick, NULL, 0), CQ_OK);
        if (!strcmp(pick, "cpu"))
            assert_int_equal(strncmp(cq_model_backend_name(m), "cpu", 3), 0);
        else
            assert_int_equal(strncmp(cq_model_backend_name(m), "cuda:0", 6), 0);
        if (!i) assert_string_equal(pick, "cpu"); /* NULL: the CPU, GPU or not */
        assert_int_equal(m->gpu_memory, 5 * GIB);
        assert_int_equal(cq_backend_mem_budget(m->be), cq_backend_is_host(m->be) ? 0 : 5 * GIB);
        cq_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_auto),   cmocka_unit_test(test_resolve),   cmocka_unit_test(test_open_auto),
        cmocka_unit_test(test_parse_gib), cmocka_unit_test(test_model_api),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
