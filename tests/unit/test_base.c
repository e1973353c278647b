/* test_base.c — status strings, checked allocation + fault injection, the
 * thread pool (including nested runs), byte formatting. */
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "testutil.h"

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(cq_status_str(CQ_OK), "CQ_OK");
    assert_string_equal(cq_status_str(CQ_ERR_BOUNDS), "CQ_ERR_BOUNDS");
    assert_string_equal(cq_status_str((cq_status)999), "CQ_ERR_UNKNOWN");
    assert_int_equal(cq_fail(CQ_ERR_PARSE, "bad %s %d", "thing", 7), CQ_ERR_PARSE);
    assert_string_equal(cq_last_error(), "bad thing 7");
    cq_fail_prefix(CQ_ERR_PARSE, "tensor '%s': ", "w");
    assert_string_equal(cq_last_error(), "tensor 'w': bad thing 7");
}

static void test_alloc_overflow(void **state) {
    (void)state;
    assert_null(cq_mallocn(SIZE_MAX / 2, 3));
    assert_non_null(strstr(cq_last_error(), "overflows"));
    assert_null(cq_calloc(SIZE_MAX / 4, 8));
    void *p = cq_aligned_alloc(64, 100);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    cq_aligned_free(p);
    cq_free(NULL);
    cq_aligned_free(NULL);
}

static void test_alloc_fault_injection(void **state) {
    (void)state;
    cq_alloc_fail_at(2);
    void *a = cq_malloc(10);
    void *b = cq_malloc(10);
    void *c = cq_malloc(10);
    cq_alloc_fail_at(0);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    assert_non_null(strstr(cq_last_error(), "out of memory"));
    cq_free(a);
    cq_free(c);
}

typedef struct {
    cq_pool *pool;
    atomic_int count;
    atomic_int inner;
} pool_ctx;

static void inner_task(size_t t, size_t n, void *arg) {
    (void)t;
    (void)n;
    pool_ctx *c = arg;
    atomic_fetch_add(&c->inner, 1);
}

static void outer_task(size_t t, size_t n, void *arg) {
    (void)n;
    pool_ctx *c = arg;
    atomic_fetch_add(&c->count, (int)t + 1);
    cq_pool_run(c->pool, 5, inner_task, c); /* nested: must run inline, not deadlock */
}

static void test_pool(void **state) {
    (void)state;
    pool_ctx c = {0};
    assert_int_equal(cq_pool_create(4, &c.pool), CQ_OK);
    assert_int_equal(cq_pool_threads(c.pool), 4);
    for (int rep = 0; rep < 50; rep++) {
        atomic_store(&c.count, 0);
        atomic_store(&c.inner, 0);
        cq_pool_run(c.pool, 100, outer_task, &c);
        assert_int_equal(atomic_load(&c.count), 5050);
        assert_int_equal(atomic_load(&c.inner), 500);
    }
    cq_pool_free(c.pool);
    cq_pool_free(NULL);
}

static void test_fmt_bytes(void **state) {
    (void)state;
    char b[32];
    assert_string_equal(cq_fmt_bytes(512, b, sizeof b), "512 B");
    assert_string_equal(cq_fmt_bytes(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(cq_fmt_bytes(3ull << 30, b, sizeof b), "3.0 GiB");
}

static void test_cpu(void **state) {
    (void)state;
    const cq_cpu_features *f = cq_cpu();
    assert_true(f->logical_cores >= 1);
    assert_true(strlen(f->model) > 0);
    /* implications that must hold whatever the machine */
    if (f->avx2) assert_true(f->avx);
    if (f->avx512bw) assert_true(f->avx512f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names), cmocka_unit_test(test_alloc_overflow),
        cmocka_unit_test(test_alloc_fault_injection), cmocka_unit_test(test_pool),
        cmocka_unit_test(test_fmt_bytes), cmocka_unit_test(test_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
