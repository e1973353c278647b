/*
 * alloc.c — the one allocation wrapper: overflow-checked sizes, a clear
 * CQ_ERR_NOMEM message naming the size, and test-time fault injection.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#ifdef CQ_FAULT_INJECTION
static atomic_long g_fail_at;   /* 0 = off; counts down to the failing call */
static atomic_long g_counted;

static bool inject_failure(void) {
    atomic_fetch_add(&g_counted, 1);
    long cur = atomic_load(&g_fail_at);
    while (cur > 0) {
        if (atomic_compare_exchange_weak(&g_fail_at, &cur, cur - 1)) return cur == 1;
    }
    return false;
}

long cq_alloc_fail_at(long n) {
    atomic_store(&g_fail_at, n < 0 ? 0 : n);
    return atomic_exchange(&g_counted, 0);
}
#else
static bool inject_failure(void) { return false; }
long cq_alloc_fail_at(long n) {
    (void)n;
    return 0;
}
#endif

static void *nomem(size_t size) {
    cq_fail(CQ_ERR_NOMEM, "out of memory allocating %zu bytes", size);
    return NULL;
}

void *cq_malloc(size_t size) {
    if (inject_failure()) return nomem(size);
    void *p = malloc(size ? size : 1);
    return p ? p : nomem(size);
}

void *cq_mallocn(size_t n, size_t size) {
    size_t total;
    if (!cq_mul_size(n, size, &total)) {
        cq_fail(CQ_ERR_NOMEM, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    return cq_malloc(total);
}

void *cq_calloc(size_t n, size_t size) {
    size_t total;
    if (!cq_mul_size(n, size, &total)) {
        cq_fail(CQ_ERR_NOMEM, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    if (inject_failure()) return nomem(total);
    void *p = calloc(total ? n : 1, total ? size : 1);
    return p ? p : nomem(total);
}

void *cq_realloc(void *p, size_t size) {
    if (inject_failure()) return nomem(size);
    void *q = realloc(p, size ? size : 1);
    return q ? q : nomem(size);
}

void *cq_reallocn(void *p, size_t n, size_t size) {
    size_t total;
    if (!cq_mul_size(n, size, &total)) {
        cq_fail(CQ_ERR_NOMEM, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    return cq_realloc(p, total);
}

char *cq_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n), total;
    if (!cq_add_size(len, 1, &total)) return nomem(len);
    char *d = cq_malloc(total);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *cq_strdup(const char *s) { return cq_strndup(s, strlen(s)); }

void cq_free(void *p) { free(p); }

void *cq_aligned_alloc(size_t align, size_t size) {
    if (align < sizeof(void *)) align = sizeof(void *);
    size_t rounded;
    if (!cq_add_size(size ? size : 1, align - 1, &rounded)) return nomem(size);
    rounded = rounded / align * align;
    if (inject_failure()) return nomem(size);
    void *p = NULL;
    if (posix_memalign(&p, align, rounded) != 0) return nomem(size);
    return p;
}

void *cq_aligned_allocn(size_t align, size_t n, size_t size) {
    size_t total;
    if (!cq_mul_size(n, size, &total)) {
        cq_fail(CQ_ERR_NOMEM, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    return cq_aligned_alloc(align, total);
}

void cq_aligned_free(void *p) { free(p); }
