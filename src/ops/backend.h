/*
 * backend.h — the contract between the op front end (ops.c) and a backend.
 *
 * A backend is a vtable plus private state. The front end has already
 * checked everything that can be checked on the host (shapes, dtypes,
 * ownership, aliasing, supports()) before an entry is called, so backends
 * only check what lives in their memory (index values) and their own
 * resources. Model code never includes this header.
 *
 * Asynchrony: every op entry may merely enqueue work and return CQ_OK; an
 * error found later is kept and returned by `sync` (and by the next
 * `download`). Host memory handed to `buf_upload` may be reused as soon as
 * the call returns (a device backend copies it or waits); `buf_download`
 * returns only when the bytes are in host memory, after all queued work that
 * writes them. Buffers freed while work that uses them is queued must stay
 * valid until that work is done (stream-ordered free).
 *
 * Adding a backend: fill a cq_backend_vtbl, create a cq_backend whose `vt`
 * points to it, and answer supports() honestly — the generic op test
 * (tests/unit/test_ops.c) runs every supported combination against the
 * reference backend and expects CQ_ERR_UNSUPPORTED for the rest.
 */
#ifndef CQ_OPS_BACKEND_H
#define CQ_OPS_BACKEND_H

#include "ops/ops.h"

typedef struct cq_backend_vtbl {
    const char *kind; /* "cpu", "ref", "cuda" */
    /* A host backend (host memory, the CPU and the reference): an op it does
     * not run fails with CQ_ERR_UNSUPPORTED. Any other backend's unsupported
     * ops run on the host backend with their operands copied (fallback.c). */
    bool is_host;
    void (*destroy)(cq_backend *be);
    bool (*supports)(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt);

    /* ---- memory: `base` is the backend's handle for one allocation ---- */
    cq_status (*buf_alloc)(cq_backend *be, size_t nbytes, void **base);
    void (*buf_free)(cq_backend *be, void *base);
    cq_status (*buf_upload)(cq_backend *be, void *base, size_t offset, const void *src, size_t n);
    cq_status (*buf_download)(cq_backend *be, const void *base, size_t offset, void *dst, size_t n);
    cq_status (*buf_zero)(cq_backend *be, void *base, size_t offset, size_t n);
    /* Bind a validated CMF view: fill t->base/offset/nbytes/impl. The front
     * end fills dtype/ndim/shape/flags. */
    cq_status (*bind_weight)(cq_backend *be, const cq_tensor_view *v, cq_tensor *t);
    void (*release_weight)(cq_backend *be, cq_tensor *t); /* may be NULL */
    /* Optional: bind_weight for a payload whose hash is still to be checked,
     * returning in *hash the payload's cq_hash64 computed over the bytes the
     * backend copied while it copied them (one pass over the file's pages
     * instead of two). The front end compares it with the record and
     * releases the weight on a mismatch, before anything can use it. NULL:
     * the front end hashes first, then binds. */
    cq_status (*bind_weight_hashing)(cq_backend *be, const cq_tensor_view *v, cq_tensor *t, uint64_t *hash);
    cq_status (*sync)(cq_backend *be);

    /* ---- ops (arguments already validated; see ops.h for semantics), one
     * member per entry of ops_list.h. NULL: the backend does not run the op
     * at all (as if supports() said false for every dtype), so the front end
     * runs it on the host backend. ---- */
#define CQ_OP_VTBL_MEMBER_(E, name, P, A, u) cq_status(*name) CQ_OP_PARAMS_BE P;
    CQ_OPS_LIST(CQ_OP_VTBL_MEMBER_, _)
#undef CQ_OP_VTBL_MEMBER_

    /* ---- optional (NULL: a host backend's answer) ---- */
    cq_dtype (*op_precision)(const cq_backend *be, cq_op op, cq_dtype wdt); /* NULL: F32 */
    cq_status (*stats)(cq_backend *be, cq_backend_stats *out, bool reset);  /* NULL: zeros */
    /* device memory (ops.h); NULL: a backend without a budget or weight modes */
    uint64_t (*mem_budget)(const cq_backend *be);                           /* NULL: 0 */
    cq_status (*set_weight_mode)(cq_backend *be, cq_weight_mode mode);      /* NULL: accepted, no effect */
    cq_status (*set_stream_keep)(cq_backend *be, uint64_t keep, uint64_t of); /* NULL: accepted, no effect */
    cq_status (*weight_cost)(const cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, uint64_t *bytes,
                             uint64_t *slot);                               /* NULL: 0 and 0 */
    cq_status (*trim)(cq_backend *be);                                      /* NULL: nothing to give back */
    /* recordings (ops.h); all NULL where the backend cannot record. `handle`
     * is the backend's own; the front end wraps it in a cq_recording. */
    bool (*can_record)(const cq_backend *be);
    cq_status (*record_begin)(cq_backend *be);
    cq_status (*record_end)(cq_backend *be, bool keep, void **handle);
    cq_status (*replay)(cq_backend *be, void *handle);
    void (*record_free)(cq_backend *be, void *handle);
} cq_backend_vtbl;

struct cq_backend {
    const cq_backend_vtbl *vt;
    char name[64];      /* "cpu/avx512", "ref", "cuda:0 (H200)" */
    cq_dtype act_dtype; /* preferred activation dtype */
    void *impl;         /* backend-private state */
    /* ---- the front end's, not the backend's (zero from the backend's calloc) ---- */
    cq_cpu_opts host_opts;    /* how the host backend for fallbacks is created */
    cq_backend *host;         /* that backend, made at the first op that falls back; freed with this one */
    bool no_fallback;         /* unsupported ops fail instead (cq_backend_opts.no_fallback) */
    uint32_t fallback_logged; /* a bit per op kind already logged as falling back */
    cq_weight_mode weight_mode; /* cq_backend_set_weight_mode's last mode (DEFAULT until set) */
};
_Static_assert(CQ_OP_COUNT <= 32, "fallback_logged holds a bit per op");

/* Check a backend's vtable: every required entry present and the recording
 * entries all given or all NULL. A missing op entry means "falls back" on a
 * device backend and is an error on a host backend. cq_backend_open runs it
 * on every backend it creates. */
cq_status cq_backend_check(const cq_backend *be);
/* Whether the backend has an entry for `op` (a NULL entry falls back). */
bool cq_backend_has_entry(const cq_backend *be, cq_op op);

/* Host address of element 0 of a tensor whose buffer is host memory (the
 * CPU and reference backends). */
static inline void *cq_host_ptr(const cq_tensor *t) { return (char *)t->base + t->offset; }

/* Host-memory buffer entries shared by the CPU and reference backends:
 * 64-byte aligned allocations, weights bound zero-copy from the mapping. */
cq_status cq_host_buf_alloc(cq_backend *be, size_t nbytes, void **base);
void cq_host_buf_free(cq_backend *be, void *base);
cq_status cq_host_buf_upload(cq_backend *be, void *base, size_t offset, const void *src, size_t n);
cq_status cq_host_buf_download(cq_backend *be, const void *base, size_t offset, void *dst, size_t n);
cq_status cq_host_buf_zero(cq_backend *be, void *base, size_t offset, size_t n);
cq_status cq_host_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *t);
cq_status cq_host_sync(cq_backend *be);

#endif /* CQ_OPS_BACKEND_H */
