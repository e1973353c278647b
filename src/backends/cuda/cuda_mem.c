/*
 * cuda_mem.c — device memory of the CUDA backend: a caching allocator over
 * cudaMalloc, host transfers and per-op scratch.
 *
 * The allocator rounds each request up to a size class (four classes per
 * power of two, at least 512 bytes, at most 2 MiB apart) and keeps freed blocks in per-class free
 * lists, so a loop that allocates and frees the same shapes (a denoiser step,
 * an op's scratch) reaches a steady state with no cudaMalloc at all; cudaMalloc
 * and cudaFree synchronise the device, which a step must not do. Freeing is
 * stream-ordered for free: the backend has one stream, and a block handed out
 * again is only touched by work queued after the work that used it. Out of
 * memory, the cache is released (after waiting for the stream) and the
 * request retried once.
 *
 * The budget (cq_cuda.mem_budget, ops.h's mem_budget) bounds what the backend
 * holds, in_use + cached, in size classes (cuda_cost.c). A cudaMalloc that
 * would pass it first releases the cache (after waiting for the stream); if
 * the live blocks alone leave no room, the request fails with CQ_ERR_NOMEM
 * saying how much more was needed, so a plan that overshoots is an error
 * message, never a crash or a silent spill. Handing out a cached block never
 * changes in_use + cached, so it needs no check. trim gives every cached
 * block and scratch slot back to the driver.
 *
 * Live blocks are found by address in an open-addressing table (a device
 * pointer cannot carry a header the host could read).
 */
#include <string.h>

#include "backends/cuda/cuda_impl.h"

#define DELETED ((void *)1)

/* ---- size classes (cuda_cost.c: the same figures as the weight costs) ------------------------------ */
static size_t size_class(size_t n) { return (size_t)cq_cuda_size_class(n); }

/* ---- live table ----------------------------------------------------------------------- */
static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p >> 8; /* cudaMalloc aligns to 256 */
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

static cq_status live_grow(cq_cuda_alloc *m) {
    size_t cap = m->live_cap ? 2 * m->live_cap : 1024;
    cq_cuda_live *t = cq_calloc(cap, sizeof *t);
    if (!t) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < m->live_cap; i++) {
        void *p = m->live[i].ptr;
        if (!p || p == DELETED) continue;
        size_t h = hash_ptr(p, cap);
        while (t[h].ptr) h = (h + 1) & (cap - 1);
        t[h] = m->live[i];
    }
    cq_free(m->live);
    m->live = t;
    m->live_cap = cap;
    m->live_used = m->live_n;
    return CQ_OK;
}

static cq_status live_put(cq_cuda_alloc *m, void *p, size_t size) {
    if ((m->live_used + 1) * 2 > m->live_cap) CQ_TRY(live_grow(m));
    size_t h = hash_ptr(p, m->live_cap);
    while (m->live[h].ptr && m->live[h].ptr != DELETED) h = (h + 1) & (m->live_cap - 1);
    if (!m->live[h].ptr) m->live_used++;
    m->live[h].ptr = p;
    m->live[h].size = size;
    m->live_n++;
    return CQ_OK;
}

/* Removes p; returns its size, 0 when p is not a live block. */
static size_t live_take(cq_cuda_alloc *m, void *p) {
    if (!m->live_cap) return 0;
    size_t h = hash_ptr(p, m->live_cap);
    while (m->live[h].ptr) {
        if (m->live[h].ptr == p) {
            size_t s = m->live[h].size;
            m->live[h].ptr = DELETED;
            m->live_n--;
            return s;
        }
        h = (h + 1) & (m->live_cap - 1);
    }
    return 0;
}

/* ---- free lists ------------------------------------------------------------------------- */
static cq_cuda_bucket *bucket_for(cq_cuda_alloc *m, size_t size, bool create) {
    for (int i = 0; i < m->n_buckets; i++)
        if (m->buckets[i].size == size) return &m->buckets[i];
    if (!create) return NULL;
    if (m->n_buckets == m->cap_buckets) {
        int cap = m->cap_buckets ? 2 * m->cap_buckets : 32;
        cq_cuda_bucket *b = cq_reallocn(m->buckets, (size_t)cap, sizeof *b);
        if (!b) return NULL;
        m->buckets = b;
        m->cap_buckets = cap;
    }
    cq_cuda_bucket *b = &m->buckets[m->n_buckets++];
    memset(b, 0, sizeof *b);
    b->size = size;
    return b;
}

/* Give every cached block back to the driver (the stream must be idle). */
static void release_cached(cq_cuda_alloc *m) {
    for (int i = 0; i < m->n_buckets; i++) {
        cq_cuda_bucket *b = &m->buckets[i];
        for (int k = 0; k < b->n; k++) cudaFree(b->ptrs[k]);
        m->cached -= (uint64_t)b->n * b->size;
        b->n = 0;
    }
}

/* Room under the budget for a new block of `size` bytes: the cache released first (after the queued work that
 * may still read it) when the live and cached blocks together leave too little. */
static cq_status fit_budget(cq_cuda *c, size_t size) {
    cq_cuda_alloc *m = &c->mem;
    if (!c->mem_budget || m->in_use + m->cached + size <= c->mem_budget) return CQ_OK;
    if (m->cached) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess)
            return cq_cuda_fail(e, "allocator", "waiting for the queued work before releasing the cache");
        release_cached(m);
    }
    if (m->in_use + size <= c->mem_budget) return CQ_OK;
    char need[32], req[32], used[32], budget[32], wb[32];
    return cq_fail(CQ_ERR_NOMEM,
                   "CUDA: %s more needed for a %s buffer: %s of the %s budget in use (weights %s); raise --gpu-memory "
                   "or use a smaller codec",
                   cq_fmt_bytes(m->in_use + size - c->mem_budget, need, sizeof need),
                   cq_fmt_bytes(size, req, sizeof req),
                   cq_fmt_bytes(m->in_use, used, sizeof used), cq_fmt_bytes(c->mem_budget, budget, sizeof budget),
                   cq_fmt_bytes(c->weight_bytes, wb, sizeof wb));
}

cq_status cq_cuda_malloc(cq_cuda *c, size_t nbytes, void **out) {
    cq_cuda_alloc *m = &c->mem;
    *out = NULL;
    if (nbytes > ((size_t)1 << 46)) return cq_fail(CQ_ERR_NOMEM, "cuda: a buffer of %zu bytes is beyond any device", nbytes);
    if (c->recording) return cq_cuda_not_while_recording("allocating device memory");
    /* the block may be a freed one coming back at the address of a staged matmul input, and be filled without
     * an op (a weight's upload and decode): forget the staging (a steady step allocates nothing) */
    c->staged_x.valid = false;
    size_t size = size_class(nbytes ? nbytes : 1);
    cq_cuda_bucket *b = bucket_for(m, size, false);
    void *p = NULL;
    if (b && b->n) {
        p = b->ptrs[--b->n];
        m->cached -= size;
    } else {
        CQ_TRY(fit_budget(c, size));
        cudaSetDevice(c->device);
        const double t0 = cq_now();
        cudaError_t e = cudaMalloc(&p, size);
        if (e == cudaErrorMemoryAllocation && m->cached) {
            (void)cudaGetLastError();
            cudaStreamSynchronize(c->stream); /* cached blocks may still be read by queued work */
            release_cached(m);
            e = cudaMalloc(&p, size);
        }
        if (e != cudaSuccess) {
            char b1[32], b2[32];
            (void)cudaGetLastError();
            return cq_fail(e == cudaErrorMemoryAllocation ? CQ_ERR_NOMEM : CQ_ERR_INTERNAL,
                           "cuda: cudaMalloc of %s failed: %s (%s in use by this backend)",
                           cq_fmt_bytes(size, b1, sizeof b1), cudaGetErrorString(e),
                           cq_fmt_bytes(m->in_use, b2, sizeof b2));
        }
        m->n_cuda_mallocs++;
        m->malloc_s += cq_now() - t0;
    }
    cq_status s = live_put(m, p, size);
    if (s != CQ_OK) {
        cudaFree(p);
        return s;
    }
    m->in_use += size;
    if (m->in_use > m->peak) m->peak = m->in_use;
    *out = p;
    return CQ_OK;
}

void cq_cuda_free(cq_cuda *c, void *p) {
    if (!p) return;
    cq_cuda_alloc *m = &c->mem;
    size_t size = live_take(m, p);
    if (!size) {
        CQ_WARN("cuda: freeing %p, which this backend did not allocate (ignored)", p);
        return;
    }
    m->in_use -= size;
    cq_cuda_bucket *b = bucket_for(m, size, true);
    if (b && b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 8;
        void **q = cq_reallocn(b->ptrs, (size_t)cap, sizeof *q);
        if (q) {
            b->ptrs = q;
            b->cap = cap;
        }
    }
    if (!b || b->n == b->cap) {
        /* no room to cache it: release it once the queued work is done */
        cudaStreamSynchronize(c->stream);
        cudaFree(p);
        return;
    }
    b->ptrs[b->n++] = p;
    m->cached += size;
}

void cq_cuda_alloc_destroy(cq_cuda *c) {
    cq_cuda_alloc *m = &c->mem;
    release_cached(m);
    for (size_t i = 0; i < m->live_cap; i++)
        if (m->live[i].ptr && m->live[i].ptr != DELETED) cudaFree(m->live[i].ptr); /* leaked tensors */
    for (int i = 0; i < m->n_buckets; i++) cq_free(m->buckets[i].ptrs);
    cq_free(m->buckets);
    cq_free(m->live);
    memset(m, 0, sizeof *m);
}

cq_status cq_cuda_scratch(cq_cuda *c, cq_cuda_slot slot, size_t bytes, void **out) {
    if (bytes > c->scratch_cap[slot]) {
        /* grow (never shrink): the largest op of a loop sizes it once */
        void *p = NULL;
        if (c->recording) return cq_cuda_not_while_recording("growing a scratch buffer");
        c->scratch_gen++; /* recordings that use the old buffer are stale */
        cq_cuda_free(c, c->scratch[slot]);
        c->scratch[slot] = NULL;
        c->scratch_cap[slot] = 0;
        CQ_TRY(cq_cuda_malloc(c, bytes, &p));
        c->scratch[slot] = p;
        c->scratch_cap[slot] = bytes;
    }
    *out = c->scratch[slot];
    return CQ_OK;
}

cq_status cq_cuda_trim(cq_backend *be) {
    cq_cuda *c = cq_cuda_of(be);
    if (c->recording) return cq_cuda_not_while_recording("trim");
    cudaSetDevice(c->device);
    bool moved = false;
    for (int i = 0; i < CQ_CUDA_SLOT_COUNT; i++) {
        if (!c->scratch[i]) continue;
        cq_cuda_free(c, c->scratch[i]); /* into the cache, released below once the queued work is done */
        c->scratch[i] = NULL;
        c->scratch_cap[i] = 0;
        moved = true;
    }
    if (moved) c->scratch_gen++; /* recordings that use the slots are stale (their replay says CQ_ERR_AGAIN) */
    c->staged_x.valid = false;
    CQ_CUDA_TRY(cudaStreamSynchronize(c->stream), "trim", "waiting for the queued work");
    if (c->xfer.stream) CQ_CUDA_TRY(cudaStreamSynchronize(c->xfer.stream), "trim", "waiting for the queued copies");
    cq_cuda_stream_release_slots(c);
    release_cached(&c->mem);
    return CQ_OK;
}

/* ---- vtable buffer entries ---------------------------------------------------------------- */
cq_status cq_cuda_buf_alloc(cq_backend *be, size_t nbytes, void **base) {
    return cq_cuda_malloc(cq_cuda_of(be), nbytes, base);
}

void cq_cuda_buf_free(cq_backend *be, void *base) { cq_cuda_free(cq_cuda_of(be), base); }

/* From pageable host memory the copy is staged by the driver before the call
 * returns, so the caller may reuse `src` at once (backend.h's contract). */
cq_status cq_cuda_buf_upload(cq_backend *be, void *base, size_t offset, const void *src, size_t n) {
    cq_cuda *c = cq_cuda_of(be);
    if (c->recording) return cq_cuda_not_while_recording("an upload");
    cudaSetDevice(c->device);
    c->staged_x.valid = false;
    CQ_CUDA_TRY(cudaMemcpyAsync((char *)base + offset, src, n, cudaMemcpyHostToDevice, c->stream), "upload",
                "cudaMemcpyAsync");
    return CQ_OK;
}

/* Returns once the bytes are in host memory, after all queued work; reports
 * any deferred error of that work, as sync does. */
cq_status cq_cuda_buf_download(cq_backend *be, const void *base, size_t offset, void *dst, size_t n) {
    cq_cuda *c = cq_cuda_of(be);
    if (c->recording) return cq_cuda_not_while_recording("a download");
    cudaSetDevice(c->device);
    CQ_CUDA_TRY(cudaMemcpyAsync(dst, (const char *)base + offset, n, cudaMemcpyDeviceToHost, c->stream), "download",
                "cudaMemcpyAsync");
    return cq_cuda_sync(be);
}

cq_status cq_cuda_buf_zero(cq_backend *be, void *base, size_t offset, size_t n) {
    cq_cuda *c = cq_cuda_of(be);
    cudaSetDevice(c->device);
    c->staged_x.valid = false;
    CQ_CUDA_TRY(cudaMemsetAsync((char *)base + offset, 0, n, c->stream), "zero", "cudaMemsetAsync");
    return CQ_OK;
}
