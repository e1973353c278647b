/*
 * test_cuda_budget.c — the CUDA backend's device-memory budget as the
 * registry hands it over: cq_backend_opts.mem_budget reaches the backend and
 * cq_backend_mem_budget reports it; without one the default is the device's
 * free memory at creation less 5 % and 256 MiB; "auto" on a usable device
 * opens this backend. Enforcement by the allocator is tested with it.
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "ops/ops.h"
#include "testutil.h"

#define MIB ((uint64_t)1 << 20)

static void test_given_budget(void **state) {
    (void)state;
    const uint64_t sizes[] = {7 * 1024 * MIB + 512 * MIB, 512 * MIB, 24 * 1024 * MIB};
    for (size_t i = 0; i < CQ_ARRAY_LEN(sizes); i++) {
        const cq_backend_opts o = {.mem_budget = sizes[i]};
        cq_backend *be = NULL;
        assert_int_equal(cq_backend_open("cuda", &o, &be), CQ_OK);
        assert_false(cq_backend_is_host(be));
        assert_int_equal(cq_backend_mem_budget(be), sizes[i]);
        cq_backend_free(be);
    }
    /* the CUDA options' own field, for callers of cq_backend_cuda_open */
    const cq_cuda_opts co = {.mem_budget = 3 * 1024 * MIB};
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_cuda_open(0, &co, &be), CQ_OK);
    assert_int_equal(cq_backend_mem_budget(be), 3 * 1024 * MIB);
    cq_backend_free(be);
}

static void test_default_budget(void **state) {
    (void)state;
    cq_gpu_info before, after;
    assert_int_equal(cq_cuda_device_info(0, &before), CQ_OK);
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_open("cuda:0", NULL, &be), CQ_OK);
    assert_int_equal(cq_cuda_device_info(0, &after), CQ_OK);
    const uint64_t got = cq_backend_mem_budget(be);
    /* the figure was read between the two readings, less the margin: 5 % of the device and 256 MiB */
    const uint64_t margin = before.mem_total / 20 + 256 * MIB;
    const uint64_t hi = before.mem_free - margin;
    const uint64_t lo_free = after.mem_free < before.mem_free ? after.mem_free : before.mem_free;
    const uint64_t lo = lo_free - margin - 64 * MIB; /* other processes move a little */
    if (got > hi + 64 * MIB || got < lo)
        fail_msg("default budget %llu MiB, free %llu MiB before and %llu MiB after creation",
                 (unsigned long long)(got / MIB), (unsigned long long)(before.mem_free / MIB),
                 (unsigned long long)(after.mem_free / MIB));
    assert_true(got < before.mem_total);
    cq_backend_free(be);
}

static void test_auto_opens_cuda(void **state) {
    (void)state;
    char pick[32], why[256];
    assert_int_equal(cq_backend_resolve("auto", NULL, pick, sizeof pick, why, sizeof why), CQ_OK);
    assert_string_equal(pick, "cuda:0"); /* main() skips where the backend cannot be created */
    cq_gpu_info g;
    assert_int_equal(cq_cuda_device_info(0, &g), CQ_OK);
    if (strncmp(why, g.name, strlen(g.name)) || !strstr(why, " free")) fail_msg("reason: %s", why);
    const cq_backend_opts o = {.mem_budget = 6 * 1024 * MIB};
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_open("auto", &o, &be), CQ_OK);
    assert_int_equal(strncmp(cq_backend_name(be), "cuda:0", 6), 0);
    assert_int_equal(cq_backend_mem_budget(be), 6 * 1024 * MIB);
    cq_backend_free(be);
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_cuda_budget: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_given_budget),
        cmocka_unit_test(test_default_budget),
        cmocka_unit_test(test_auto_opens_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
