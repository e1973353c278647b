/*
 * ops.c — backend lifecycle and tensors (allocation, views, host transfers,
 * weight binding). Backend selection by name is the registry's
 * (registry.c); the op entry points with their validation live in
 * ops_front.c, the per-op fallback in fallback.c.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/codec.h"
#include "format/cmf.h"
#include "ops/backend.h"
#include "ops/fallback.h"

/* ---- names ----------------------------------------------------------------- */
#define CQ_OP_NAME_(E, name, P, A, u) #name,
static const char *const k_op_names[] = {CQ_OPS_LIST(CQ_OP_NAME_, _)};
#undef CQ_OP_NAME_
_Static_assert(CQ_ARRAY_LEN(k_op_names) == CQ_OP_COUNT, "op name table out of date");

const char *cq_op_name(cq_op op) {
    return (unsigned)op < CQ_OP_COUNT ? k_op_names[op] : "?";
}

static const char *const k_isa_names[] = {"auto", "generic", "avx2", "avx512", "amx", "neon"};
_Static_assert(CQ_ARRAY_LEN(k_isa_names) == CQ_CPU_ISA_COUNT, "ISA name table out of date");

const char *cq_cpu_isa_name(cq_cpu_isa isa) {
    return (unsigned)isa < CQ_CPU_ISA_COUNT ? k_isa_names[isa] : "?";
}

/* ---- tensor geometry ---------------------------------------------------------- */
int64_t cq_tensor_cols(const cq_tensor *t) {
    if (!t || t->ndim < 1) return 0;
    return t->shape[t->ndim - 1];
}

int64_t cq_tensor_rows(const cq_tensor *t) {
    if (!t || t->ndim < 1) return 0;
    int64_t r = 1;
    for (int i = 0; i < t->ndim - 1; i++) r *= t->shape[i];
    return r;
}

int64_t cq_tensor_nelem(const cq_tensor *t) {
    if (!t || t->ndim < 1) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t cq_act_dtype_size(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F32: return 4;
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16: return 2;
    case CQ_DTYPE_I32: return 4;
    default: return 0;
    }
}

/* Element count of a shape with every dim >= 1, overflow-checked (and kept
 * below 2^62 so byte counts of 4-byte elements stay representable). */
static cq_status shape_nelem(const char *what, int ndim, const int64_t *shape, int64_t *out) {
    if (ndim < 1 || ndim > CQ_TENSOR_MAX_DIMS)
        return cq_fail(CQ_ERR_SHAPE, "%s: %d dims (want 1..%d)", what, ndim, CQ_TENSOR_MAX_DIMS);
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1) return cq_fail(CQ_ERR_SHAPE, "%s: dim %d is %lld (want >= 1)", what, i, (long long)shape[i]);
        if (!cq_mul_u64(n, (uint64_t)shape[i], &n) || n > ((uint64_t)1 << 60))
            return cq_fail(CQ_ERR_NOMEM, "%s: element count overflows", what);
    }
    *out = (int64_t)n;
    return CQ_OK;
}

/* ---- backend lifecycle ------------------------------------------------------- */
void cq_backend_free(cq_backend *be) {
    if (!be) return;
    cq_backend *host = be->host; /* the fallback's host backend outlives no op of this one */
    if (be->vt && be->vt->destroy) be->vt->destroy(be);
    cq_backend_free(host);
}

const char *cq_backend_name(const cq_backend *be) { return be ? be->name : "(none)"; }

cq_dtype cq_backend_act_dtype(const cq_backend *be) { return be ? be->act_dtype : CQ_DTYPE_F32; }

cq_status cq_backend_sync(cq_backend *be) {
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_sync: backend is NULL");
    return be->vt->sync ? be->vt->sync(be) : CQ_OK;
}

bool cq_backend_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    if (!be || (unsigned)op >= CQ_OP_COUNT || !cq_backend_has_entry(be, op)) return false;
    return be->vt->supports(be, op, wdt, xdt);
}

bool cq_backend_runs(cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    return cq_backend_supports(be, op, wdt, xdt) || (be && cq_fallback_route(be, op, wdt, xdt, wdt));
}

cq_dtype cq_backend_op_precision(const cq_backend *be, cq_op op, cq_dtype wdt) {
    if (!be || (unsigned)op >= CQ_OP_COUNT || !be->vt->op_precision) return CQ_DTYPE_F32;
    return be->vt->op_precision(be, op, wdt);
}

/* ---- recordings ---------------------------------------------------------------------------- */
struct cq_recording {
    cq_backend *be;
    void *handle;
};

bool cq_backend_can_record(const cq_backend *be) {
    return be && be->vt->can_record && be->vt->record_begin && be->vt->can_record(be);
}

cq_status cq_backend_record_begin(cq_backend *be) {
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_record_begin: backend is NULL");
    if (!cq_backend_can_record(be))
        return cq_fail(CQ_ERR_UNSUPPORTED, "backend %s cannot record ops (check cq_backend_can_record first)", be->name);
    return be->vt->record_begin(be);
}

cq_status cq_backend_record_end(cq_backend *be, bool keep, cq_recording **out) {
    if (out) *out = NULL;
    if (!be || (keep && !out)) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_record_end: backend or out is NULL");
    if (!be->vt->record_end) return cq_fail(CQ_ERR_UNSUPPORTED, "backend %s cannot record ops", be->name);
    cq_recording *r = keep ? cq_calloc(1, sizeof *r) : NULL;
    void *h = NULL;
    /* the recording is ended even when the wrapper could not be allocated */
    cq_status s = be->vt->record_end(be, keep && r, &h);
    if (s == CQ_OK && keep && !r) s = cq_fail(CQ_ERR_NOMEM, "cq_backend_record_end: out of memory");
    if (s != CQ_OK || !keep) {
        if (h) be->vt->record_free(be, h);
        cq_free(r);
        return s;
    }
    r->be = be;
    r->handle = h;
    *out = r;
    return CQ_OK;
}

cq_status cq_recording_replay(cq_recording *r) {
    if (!r) return cq_fail(CQ_ERR_INVALID_ARG, "cq_recording_replay: recording is NULL");
    return r->be->vt->replay(r->be, r->handle);
}

void cq_recording_free(cq_recording *r) {
    if (!r) return;
    r->be->vt->record_free(r->be, r->handle);
    cq_free(r);
}

cq_status cq_backend_get_stats(cq_backend *be, cq_backend_stats *out, bool reset) {
    if (!be || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_get_stats: backend or out is NULL");
    memset(out, 0, sizeof *out);
    return be->vt->stats ? be->vt->stats(be, out, reset) : CQ_OK;
}

/* ---- device memory ----------------------------------------------------------------- */
const char *cq_weight_mode_name(cq_weight_mode m) {
    switch (m) {
    case CQ_WEIGHTS_DEFAULT: return "default";
    case CQ_WEIGHTS_PLANES: return "planes";
    case CQ_WEIGHTS_COMPACT: return "compact";
    case CQ_WEIGHTS_STREAMED: return "streamed";
    default: return "?";
    }
}

uint64_t cq_backend_mem_budget(const cq_backend *be) {
    return be && be->vt->mem_budget ? be->vt->mem_budget(be) : 0;
}

cq_status cq_backend_set_weight_mode(cq_backend *be, cq_weight_mode mode) {
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_set_weight_mode: backend is NULL");
    if ((unsigned)mode >= CQ_WEIGHTS_MODE_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_set_weight_mode: unknown mode %d", (int)mode);
    if (be->vt->set_weight_mode) CQ_TRY(be->vt->set_weight_mode(be, mode));
    be->weight_mode = mode;
    return CQ_OK;
}

cq_weight_mode cq_backend_weight_mode(const cq_backend *be) { return be ? be->weight_mode : CQ_WEIGHTS_DEFAULT; }

cq_status cq_backend_set_stream_keep(cq_backend *be, uint64_t keep, uint64_t of) {
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_set_stream_keep: backend is NULL");
    return be->vt->set_stream_keep ? be->vt->set_stream_keep(be, keep, of) : CQ_OK;
}

cq_status cq_backend_weight_cost(const cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, uint64_t *bytes,
                                 uint64_t *slot) {
    if (!be || !v || !bytes || !slot) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_weight_cost: NULL argument");
    if ((unsigned)mode >= CQ_WEIGHTS_MODE_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_weight_cost: unknown mode %d", (int)mode);
    *bytes = *slot = 0;
    return be->vt->weight_cost ? be->vt->weight_cost(be, v, mode, bytes, slot) : CQ_OK;
}

cq_status cq_backend_trim(cq_backend *be) {
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_trim: backend is NULL");
    return be->vt->trim ? be->vt->trim(be) : CQ_OK;
}

/* ---- tensors -------------------------------------------------------------------- */
cq_status cq_tensor_alloc(cq_backend *be, cq_dtype dt, int ndim, const int64_t *shape, cq_tensor *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_alloc: out is NULL");
    memset(out, 0, sizeof *out);
    if (!be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_alloc: backend is NULL");
    size_t esz = cq_act_dtype_size(dt);
    if (!esz)
        return cq_fail(CQ_ERR_DTYPE, "cq_tensor_alloc: %s is not an activation dtype (want f32, f16, bf16 or i32)",
                       cq_dtype_name(dt));
    if (!shape) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_alloc: shape is NULL");
    int64_t n;
    CQ_TRY(shape_nelem("cq_tensor_alloc", ndim, shape, &n));
    size_t nbytes;
    if (!cq_mul_size((size_t)n, esz, &nbytes)) return cq_fail(CQ_ERR_NOMEM, "cq_tensor_alloc: size overflows");
    void *base = NULL;
    CQ_TRY(be->vt->buf_alloc(be, nbytes, &base));
    out->be = be;
    out->base = base;
    out->offset = 0;
    out->dtype = dt;
    out->ndim = ndim;
    for (int i = 0; i < ndim; i++) out->shape[i] = shape[i];
    out->nbytes = nbytes;
    out->flags = CQ_TENSOR_OWNED;
    return CQ_OK;
}

cq_status cq_tensor_alloc_2d(cq_backend *be, cq_dtype dt, int64_t rows, int64_t cols, cq_tensor *out) {
    int64_t shape[2] = {rows, cols};
    return cq_tensor_alloc(be, dt, 2, shape, out);
}

void cq_tensor_free(cq_tensor *t) {
    if (!t) return;
    if (t->be) {
        if ((t->flags & CQ_TENSOR_WEIGHT) && t->be->vt->release_weight) t->be->vt->release_weight(t->be, t);
        if ((t->flags & CQ_TENSOR_OWNED) && t->base) t->be->vt->buf_free(t->be, t->base);
    }
    memset(t, 0, sizeof *t);
}

cq_tensor cq_tensor_rows_view(const cq_tensor *t, int64_t r0, int64_t n) {
    cq_tensor v;
    memset(&v, 0, sizeof v);
    if (!t || !t->be || (t->flags & CQ_TENSOR_WEIGHT) || t->ndim < 1) return v;
    size_t esz = cq_act_dtype_size(t->dtype);
    int64_t rows = t->shape[0];
    if (r0 < 0 || n < 1 || r0 > rows || n > rows - r0 || !esz) return v;
    int64_t inner = cq_tensor_nelem(t) / rows;
    v = *t;
    v.offset = t->offset + (size_t)(r0 * inner) * esz;
    v.shape[0] = n;
    v.nbytes = (size_t)(n * inner) * esz;
    v.flags = CQ_TENSOR_VIEW;
    v.impl = NULL;
    return v;
}

cq_status cq_tensor_subview(const cq_tensor *t, int64_t elem_off, int ndim, const int64_t *shape, cq_tensor *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_subview: out is NULL");
    memset(out, 0, sizeof *out);
    if (!t || !t->be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_subview: parent tensor is not allocated");
    if (t->flags & CQ_TENSOR_WEIGHT) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_subview: parent is a weight");
    size_t esz = cq_act_dtype_size(t->dtype);
    if (!shape || !esz) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_subview: bad shape or dtype");
    int64_t n;
    CQ_TRY(shape_nelem("cq_tensor_subview", ndim, shape, &n));
    int64_t total = (int64_t)(t->nbytes / esz);
    if (elem_off < 0 || elem_off > total || n > total - elem_off)
        return cq_fail(CQ_ERR_SHAPE, "cq_tensor_subview: elements [%lld, %lld) outside the parent's %lld",
                       (long long)elem_off, (long long)(elem_off + n), (long long)total);
    *out = *t;
    out->offset = t->offset + (size_t)elem_off * esz;
    out->ndim = ndim;
    memset(out->shape, 0, sizeof out->shape);
    for (int i = 0; i < ndim; i++) out->shape[i] = shape[i];
    out->nbytes = (size_t)n * esz;
    out->flags = CQ_TENSOR_VIEW;
    out->impl = NULL;
    return CQ_OK;
}

cq_status cq_tensor_reshape(const cq_tensor *t, int ndim, const int64_t *shape, cq_tensor *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_reshape: out is NULL");
    if (!t || !t->be) {
        memset(out, 0, sizeof *out);
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_reshape: tensor is not allocated");
    }
    int64_t n;
    cq_status s = shape_nelem("cq_tensor_reshape", ndim, shape, &n);
    if (s != CQ_OK) return s;
    if (n != cq_tensor_nelem(t))
        return cq_fail(CQ_ERR_SHAPE, "cq_tensor_reshape: %lld elements cannot become %lld", (long long)cq_tensor_nelem(t),
                       (long long)n);
    cq_tensor v = *t;
    v.ndim = ndim;
    memset(v.shape, 0, sizeof v.shape);
    for (int i = 0; i < ndim; i++) v.shape[i] = shape[i];
    v.flags = (t->flags & CQ_TENSOR_WEIGHT) | CQ_TENSOR_VIEW;
    *out = v;
    return CQ_OK;
}

static cq_status check_transfer(const char *fn, const cq_tensor *t, const void *host, size_t nbytes) {
    if (!t || !t->be) return cq_fail(CQ_ERR_INVALID_ARG, "%s: tensor is not allocated", fn);
    if (!host && nbytes) return cq_fail(CQ_ERR_INVALID_ARG, "%s: host pointer is NULL", fn);
    if (nbytes > t->nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "%s: %zu bytes do not fit a tensor of %zu bytes", fn, nbytes, t->nbytes);
    return CQ_OK;
}

cq_status cq_tensor_upload(cq_tensor *t, const void *src, size_t nbytes) {
    CQ_TRY(check_transfer("cq_tensor_upload", t, src, nbytes));
    if (t->flags & CQ_TENSOR_WEIGHT) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_upload: weights are immutable");
    if (!nbytes) return CQ_OK;
    return t->be->vt->buf_upload(t->be, t->base, t->offset, src, nbytes);
}

cq_status cq_tensor_download(const cq_tensor *t, void *dst, size_t nbytes) {
    CQ_TRY(check_transfer("cq_tensor_download", t, dst, nbytes));
    if (!nbytes) return CQ_OK;
    return t->be->vt->buf_download(t->be, t->base, t->offset, dst, nbytes);
}

cq_status cq_tensor_zero(cq_tensor *t) {
    if (!t || !t->be) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_zero: tensor is not allocated");
    if (t->flags & CQ_TENSOR_WEIGHT) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_zero: weights are immutable");
    return t->be->vt->buf_zero(t->be, t->base, t->offset, t->nbytes);
}

cq_status cq_tensor_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_bind_weight: out is NULL");
    memset(out, 0, sizeof *out);
    if (!be || !v) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tensor_bind_weight: backend or view is NULL");
    const char *name = v->name ? v->name : "(unnamed)";
    if ((unsigned)v->dtype >= CQ_DTYPE_COUNT)
        return cq_fail(CQ_ERR_DTYPE, "weight '%s': unknown dtype id %d", name, (int)v->dtype);
    if (v->ndim < 1 || v->ndim > CQ_TENSOR_MAX_DIMS)
        return cq_fail(CQ_ERR_SHAPE, "weight '%s': %d dims (ops take 1..%d)", name, v->ndim, CQ_TENSOR_MAX_DIMS);
    if (!cq_codec_can_decode(v->dtype))
        return cq_fail(CQ_ERR_UNSUPPORTED, "weight '%s': codec %s cannot be decoded by this build", name,
                       cq_dtype_name(v->dtype));
    if (!v->data && v->nbytes) return cq_fail(CQ_ERR_INVALID_ARG, "weight '%s': no payload", name);
    int64_t shape[CQ_TENSOR_MAX_DIMS];
    for (int i = 0; i < v->ndim; i++) {
        if (v->shape[i] < 1 || v->shape[i] > ((uint64_t)1 << 40))
            return cq_fail(CQ_ERR_SHAPE, "weight '%s': dim %d is %llu", name, i, (unsigned long long)v->shape[i]);
        shape[i] = (int64_t)v->shape[i];
    }
    int64_t n;
    CQ_TRY(shape_nelem(name, v->ndim, shape, &n));
    /* the first read of a file's payload: is it what was written? A backend
     * that copies the payload hashes it in the same pass; the others read it
     * once for the hash here */
    const bool hashing = be->vt->bind_weight_hashing && cq_cmf_tensor_unchecked(v);
    if (!hashing) CQ_TRY(cq_cmf_check_tensor(v));
    cq_status s = cq_codec_validate(v->dtype, v->ndim, v->shape, v->data, v->nbytes);
    if (s != CQ_OK) return cq_fail_prefix(s, "weight '%s': ", name);
    out->dtype = v->dtype;
    out->ndim = v->ndim;
    for (int i = 0; i < v->ndim; i++) out->shape[i] = shape[i];
    out->flags = CQ_TENSOR_WEIGHT;
    out->wsrc = v->data;
    out->wsrc_bytes = v->nbytes;
    uint64_t h = 0;
    s = hashing ? be->vt->bind_weight_hashing(be, v, out, &h) : be->vt->bind_weight(be, v, out);
    if (s == CQ_OK && hashing && (s = cq_cmf_check_tensor_hash(v, h)) != CQ_OK) {
        if (be->vt->release_weight) be->vt->release_weight(be, out); /* the copied bytes are not the file's */
        memset(out, 0, sizeof *out);
        return s; /* cq_cmf_check_tensor's message, which names the tensor */
    }
    if (s != CQ_OK) {
        memset(out, 0, sizeof *out);
        return cq_fail_prefix(s, "weight '%s': ", name);
    }
    out->be = be;
    return CQ_OK;
}

/* ---- host-memory buffers (CPU and reference backends) ---------------------------- */
cq_status cq_host_buf_alloc(cq_backend *be, size_t nbytes, void **base) {
    (void)be;
    /* Round up so vector kernels may load a full 64-byte line at the end. */
    void *p = cq_aligned_alloc(64, nbytes ? nbytes : 1);
    if (!p) return cq_fail(CQ_ERR_NOMEM, "out of memory allocating a tensor of %zu bytes", nbytes);
    *base = p;
    return CQ_OK;
}

void cq_host_buf_free(cq_backend *be, void *base) {
    (void)be;
    cq_aligned_free(base);
}

cq_status cq_host_buf_upload(cq_backend *be, void *base, size_t offset, const void *src, size_t n) {
    (void)be;
    memmove((char *)base + offset, src, n);
    return CQ_OK;
}

cq_status cq_host_buf_download(cq_backend *be, const void *base, size_t offset, void *dst, size_t n) {
    (void)be;
    memmove(dst, (const char *)base + offset, n);
    return CQ_OK;
}

cq_status cq_host_buf_zero(cq_backend *be, void *base, size_t offset, size_t n) {
    (void)be;
    memset((char *)base + offset, 0, n);
    return CQ_OK;
}

cq_status cq_host_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *t) {
    (void)be;
    /* Zero-copy: the payload stays in the file mapping (read-only). */
    t->base = (void *)(uintptr_t)v->data;
    t->offset = 0;
    t->nbytes = (size_t)v->nbytes;
    t->impl = NULL;
    return CQ_OK;
}

cq_status cq_host_sync(cq_backend *be) {
    (void)be;
    return CQ_OK;
}
