/*
 * base.h — the bottom layer every other part of cortiq.c uses: error
 * reporting, checked allocation, logging, clocks, CPU feature detection,
 * the thread pool and progress reporting.
 */
#ifndef CQ_BASE_H
#define CQ_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

#if defined(__GNUC__) || defined(__clang__)
#define CQ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define CQ_LIKELY(x) __builtin_expect(!!(x), 1)
#define CQ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define CQ_UNUSED __attribute__((unused))
#else
#define CQ_PRINTF(a, b)
#define CQ_LIKELY(x) (x)
#define CQ_UNLIKELY(x) (x)
#define CQ_UNUSED
#endif

#define CQ_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CQ_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- errors -------------------------------------------------------------
 * cq_fail records a message for cq_last_error() (thread-local) and returns
 * the status, so call sites read `return cq_fail(CQ_ERR_BOUNDS, "...", ...)`.
 * cq_failv is the va_list twin. cq_fail_prefix prepends context to the
 * current message ("tensor 'x': " + old message) and returns s. */
cq_status cq_fail(cq_status s, const char *fmt, ...) CQ_PRINTF(2, 3);
cq_status cq_failv(cq_status s, const char *fmt, va_list ap);
cq_status cq_fail_prefix(cq_status s, const char *fmt, ...) CQ_PRINTF(2, 3);
void cq_clear_error(void);

/* Propagate a failing status. */
#define CQ_TRY(expr)                          \
    do {                                      \
        cq_status cq__s = (expr);             \
        if (CQ_UNLIKELY(cq__s != CQ_OK)) return cq__s; \
    } while (0)

/* ---- checked arithmetic ------------------------------------------------ */
static inline bool cq_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool cq_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool cq_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool cq_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t cq_align_up_u64(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- allocation ---------------------------------------------------------
 * All heap memory goes through these. Sizes are overflow-checked; failures
 * return NULL after recording CQ_ERR_NOMEM with the requested size.
 * cq_free/cq_aligned_free accept NULL. */
void *cq_malloc(size_t size);
void *cq_calloc(size_t n, size_t size);           /* zeroed, n*size checked */
void *cq_mallocn(size_t n, size_t size);          /* n*size checked */
void *cq_realloc(void *p, size_t size);
void *cq_reallocn(void *p, size_t n, size_t size);
char *cq_strdup(const char *s);
char *cq_strndup(const char *s, size_t n);
void cq_free(void *p);
/* 64-byte (cache line / AVX-512) aligned memory; size rounded up internally. */
void *cq_aligned_alloc(size_t align, size_t size);
void *cq_aligned_allocn(size_t align, size_t n, size_t size);
void cq_aligned_free(void *p);

/* Fault injection for tests (built with CQ_FAULT_INJECTION): the Nth
 * allocation from now fails (1 = the next one). 0 disables. Returns the
 * number of allocations counted since the last call. */
long cq_alloc_fail_at(long n);

/* ---- logging ----------------------------------------------------------- */
void cq_log(cq_log_level level, const char *fmt, ...) CQ_PRINTF(2, 3);
/* The lowest level that is logged, keeping the sink (cq_set_log sets both);
 * the CLI sets it from CORTIQ_LOG. */
void cq_set_log_level(cq_log_level min_level);
#define CQ_DEBUG(...) cq_log(CQ_LOG_DEBUG, __VA_ARGS__)
#define CQ_INFO(...) cq_log(CQ_LOG_INFO, __VA_ARGS__)
#define CQ_WARN(...) cq_log(CQ_LOG_WARN, __VA_ARGS__)

/* ---- time -------------------------------------------------------------- */
double cq_now(void); /* monotonic seconds */

/* ---- CPU features -------------------------------------------------------
 * Detected once at first use, with code compiled without ISA flags. */
typedef struct cq_cpu_features {
    bool sse42, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    bool amx_tile, amx_bf16, amx_int8; /* CPU supports it AND the OS granted tile state */
    bool neon, neon_fp16, neon_dotprod, neon_bf16;
    int logical_cores;
    char model[64];
} cq_cpu_features;
const cq_cpu_features *cq_cpu(void);

/* ---- thread pool --------------------------------------------------------
 * A fixed set of workers runs `fn(task, n_tasks, arg)` for task in
 * [0, n_tasks). The caller takes part. A run issued from inside a task (a
 * nested op) executes serially on the calling thread, so nesting never
 * oversubscribes. */
typedef struct cq_pool cq_pool;
typedef void (*cq_pool_fn)(size_t task, size_t n_tasks, void *arg);
cq_status cq_pool_create(int n_threads, cq_pool **out); /* n_threads <= 0: all cores */
void cq_pool_free(cq_pool *p);
int cq_pool_threads(const cq_pool *p);
void cq_pool_run(cq_pool *p, size_t n_tasks, cq_pool_fn fn, void *arg);
/* True on a pool worker, and on a thread while it takes part in a run: an op
 * issued there is nested (it runs serially, and must not reuse the scratch
 * of the op that runs it). */
bool cq_pool_in_task(void);
/* Default thread count: the one set by cq_set_default_threads, else the
 * number of online cores. */
int cq_default_threads(void);
/* The process's default thread count (<= 0: the online cores again); the
 * CLI sets it from CORTIQ_THREADS. */
void cq_set_default_threads(int n);

/* ---- progress -----------------------------------------------------------
 * A one-line progress bar on stderr: drawn in place on a terminal, a line per
 * ~10% when stderr is not a terminal, silent when quiet. */
typedef struct cq_progress {
    const char *label;
    uint64_t total;
    uint64_t done;
    double t_start;
    double t_last_draw;
    int last_decile;
    bool tty;
    bool quiet;
    bool bytes; /* format done/total as sizes */
} cq_progress;
void cq_progress_begin(cq_progress *p, const char *label, uint64_t total, bool quiet);
void cq_progress_update(cq_progress *p, uint64_t done);
void cq_progress_end(cq_progress *p);
/* "12.3 MiB" style formatting into buf. */
const char *cq_fmt_bytes(uint64_t n, char *buf, size_t len);

/* ---- text ---------------------------------------------------------------
 * The byte offset where a NUL-terminated string stops being UTF-8 (an
 * invalid, overlong or surrogate sequence), or -1 when all of it is. */
long cq_utf8_invalid_at(const char *s);
long cq_utf8_invalid_at_n(const char *s, size_t len); /* the same over len bytes (NUL is a character) */

/* ---- cancellation -------------------------------------------------------
 * One process-wide flag that long work polls between units of work (steps,
 * tensors, chunks) and answers with CQ_ERR_INTERRUPTED. Setting it is
 * async-signal-safe, so a signal handler may call cq_cancel_request().
 * cq_check_cancel() returns CQ_OK, or records "<what> interrupted" and returns
 * CQ_ERR_INTERRUPTED once the flag is set. */
bool cq_cancel_requested(void); /* cq_cancel_request / cq_cancel_clear: cortiq.h */
cq_status cq_check_cancel(const char *what);

#endif /* CQ_BASE_H */
