/*
 * cpu_backend.c — the CPU backend: its vtable, ISA selection, capability
 * answers and work splitting over its thread pool.
 *
 * Buffers are 64-byte aligned host memory and weights are bound zero-copy
 * from the CMF mapping (cq_host_* in ops.c). Each backend owns a cq_pool;
 * ops run when called (sync has nothing to wait for).
 *
 * ISA selection: this file is compiled without ISA flags and asks cq_cpu()
 * what the machine has; the kits (gemm_<isa>.c) are the only code built with
 * ISA flags and are only called when their ISA is present. An explicit isa
 * (cq_cpu_opts; the CLI maps CORTIQ_CPU onto it) forces one; asking for a
 * missing one is an error.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "backends/cpu/cpu_impl.h"

/* ---- ISA kits ----------------------------------------------------------------------- */
const cq_cpu_kit *cq_cpu_kit_for(cq_cpu_isa isa) {
    switch (isa) {
    case CQ_CPU_GENERIC: return cq_cpu_kit_generic();
#if defined(CQ_ARCH_X86)
    case CQ_CPU_AVX2: return cq_cpu_kit_avx2();
    case CQ_CPU_AVX512: return cq_cpu_kit_avx512();
    case CQ_CPU_AMX: return cq_cpu_kit_amx();
#endif
#if defined(CQ_ARCH_ARM64)
    case CQ_CPU_NEON: return cq_cpu_kit_neon();
#endif
    default: return NULL; /* not built for this architecture */
    }
}

static bool cpu_has(cq_cpu_isa isa) {
    const cq_cpu_features *f = cq_cpu();
    switch (isa) {
    case CQ_CPU_GENERIC: return true;
    case CQ_CPU_AVX2: return f->avx2 && f->fma && f->f16c;
    case CQ_CPU_AVX512: return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->f16c;
    /* AMX kit = the AVX-512 kit (with bf16) plus tile kernels */
    case CQ_CPU_AMX: return f->amx_tile && f->amx_bf16 && cpu_has(CQ_CPU_AVX512) && f->avx512bf16;
    case CQ_CPU_NEON: return f->neon;
    default: return false;
    }
}

/* Which kits this build has, without calling into them: their code is
 * compiled for their ISA and may only run where cpu_has() says so. */
static bool isa_built(cq_cpu_isa isa) {
    switch (isa) {
    case CQ_CPU_GENERIC: return true;
#if defined(CQ_ARCH_X86)
    case CQ_CPU_AVX2:
    case CQ_CPU_AVX512:
    case CQ_CPU_AMX: return true;
#endif
#if defined(CQ_ARCH_ARM64)
    case CQ_CPU_NEON: return true;
#endif
    default: return false;
    }
}

/* Available = this build has kernels for it and the CPU (and OS) allow it. */
bool cq_cpu_isa_available(cq_cpu_isa isa) {
    if (isa == CQ_CPU_AUTO) return true;
    return isa_built(isa) && cpu_has(isa);
}

static cq_cpu_isa best_isa(void) {
    static const cq_cpu_isa order[] = {CQ_CPU_AMX, CQ_CPU_AVX512, CQ_CPU_AVX2, CQ_CPU_NEON};
    for (size_t i = 0; i < CQ_ARRAY_LEN(order); i++)
        if (cq_cpu_isa_available(order[i])) return order[i];
    return CQ_CPU_GENERIC;
}

/* ---- work splitting ------------------------------------------------------------------- */
typedef struct par_ctx {
    cq_cpu_range_fn fn;
    void *ctx;
    int64_t n, grain, nchunks;
    atomic_llong next;
} par_ctx;

static void par_task(size_t task, size_t n_tasks, void *arg) {
    (void)n_tasks;
    par_ctx *p = arg;
    for (;;) {
        int64_t c = atomic_fetch_add(&p->next, 1);
        if (c >= p->nchunks) break;
        int64_t b = c * p->grain;
        p->fn(p->ctx, (int)task, b, CQ_MIN(p->n, b + p->grain));
    }
}

void cq_cpu_parallel(cq_cpu_backend *cb, int64_t n, int64_t grain, cq_cpu_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t nchunks = (n + grain - 1) / grain;
    int64_t ntasks = CQ_MIN((int64_t)cb->threads, nchunks);
    if (ntasks <= 1) {
        for (int64_t b = 0; b < n; b += grain) fn(ctx, 0, b, CQ_MIN(n, b + grain));
        return;
    }
    par_ctx p = {.fn = fn, .ctx = ctx, .n = n, .grain = grain, .nchunks = nchunks};
    atomic_init(&p.next, 0);
    cq_pool_run(cb->pool, (size_t)ntasks, par_task, &p);
}

int64_t cq_cpu_grain(const cq_cpu_backend *cb, int64_t n, int64_t work_per_item) {
    if (work_per_item < 1) work_per_item = 1;
    int64_t g_min = (32768 + work_per_item - 1) / work_per_item; /* not worth a wake-up below this */
    int64_t g_par = (n + 4 * (int64_t)cb->threads - 1) / (4 * (int64_t)cb->threads);
    return CQ_MAX((int64_t)1, CQ_MAX(g_min, g_par));
}

/* ---- capabilities --------------------------------------------------------------------- */
static bool cpu_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    (void)be;
    bool fl = xdt == CQ_DTYPE_F32 || xdt == CQ_DTYPE_F16 || xdt == CQ_DTYPE_BF16;
    switch (op) {
    case CQ_OP_MATMUL:
    case CQ_OP_GET_ROWS: return fl && cq_cpu_wcodec_supported(wdt);
    case CQ_OP_CONV2D:
    case CQ_OP_CONV3D:
    case CQ_OP_CONV1D: return xdt == CQ_DTYPE_F32 && cq_cpu_wcodec_supported(wdt);
    case CQ_OP_CONV_TRANSPOSE1D: return xdt == CQ_DTYPE_F32 && cq_cpu_wcodec_supported(wdt);
    case CQ_OP_COPY: return fl || xdt == CQ_DTYPE_I32;
    default: return xdt == CQ_DTYPE_F32;
    }
}

void *cq_cpu_scratch_get(cq_cpu_backend *cb, cq_cpu_scratch_slot slot, size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (cq_pool_in_task()) return cq_aligned_alloc(64, bytes);
    if (bytes > cb->scratch_cap[slot]) {
        /* grow (never shrink): the largest op of a loop sets the size once */
        void *p = cq_aligned_alloc(64, bytes);
        if (!p) return NULL;
        cq_aligned_free(cb->scratch[slot]);
        cb->scratch[slot] = p;
        cb->scratch_cap[slot] = bytes;
    }
    return cb->scratch[slot];
}

void cq_cpu_scratch_put(cq_cpu_backend *cb, cq_cpu_scratch_slot slot, void *p) {
    if (p && p != cb->scratch[slot]) cq_aligned_free(p);
}

static void cpu_destroy(cq_backend *be) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    for (int i = 0; i < CQ_CPU_SCRATCH_COUNT; i++) cq_aligned_free(cb->scratch[i]);
    cq_pool_free(cb->pool);
    cq_free(cb);
}

static const cq_backend_vtbl k_cpu_vtbl = {
    .kind = "cpu",
    .is_host = true,
    .destroy = cpu_destroy,
    .supports = cpu_supports,
    .buf_alloc = cq_host_buf_alloc,
    .buf_free = cq_host_buf_free,
    .buf_upload = cq_host_buf_upload,
    .buf_download = cq_host_buf_download,
    .buf_zero = cq_host_buf_zero,
    .bind_weight = cq_host_bind_weight,
    .release_weight = NULL,
    .sync = cq_host_sync,
    CQ_OPS_VTBL(cq_cpu_)
};

cq_status cq_backend_cpu_create(int threads, cq_cpu_isa isa, cq_backend **out) {
    cq_cpu_opts o = {.threads = threads, .isa = isa};
    return cq_backend_cpu_open(&o, out);
}

cq_status cq_backend_cpu_open(const cq_cpu_opts *opts, cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_cpu_open: out is NULL");
    *out = NULL;
    static const cq_cpu_opts k_defaults;
    if (!opts) opts = &k_defaults;
    cq_cpu_isa isa = opts->isa;
    int threads = opts->threads;
    if ((unsigned)isa >= CQ_CPU_ISA_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "unknown CPU ISA %d", (int)isa);
    if (isa == CQ_CPU_AUTO) isa = best_isa();
    if (!cq_cpu_isa_available(isa)) {
        if (!isa_built(isa))
            return cq_fail(CQ_ERR_UNSUPPORTED, "cpu backend: no %s kernels in this build", cq_cpu_isa_name(isa));
        return cq_fail(CQ_ERR_UNSUPPORTED, "cpu backend: this CPU (%s) lacks %s", cq_cpu()->model,
                       cq_cpu_isa_name(isa));
    }
    if (threads <= 0) threads = cq_default_threads();
    cq_cpu_backend *cb = cq_calloc(1, sizeof *cb);
    if (!cb) return CQ_ERR_NOMEM;
    cq_status s = cq_pool_create(threads, &cb->pool);
    if (s != CQ_OK) {
        cq_free(cb);
        return s;
    }
    cb->threads = cq_pool_threads(cb->pool);
    cb->kit = cq_cpu_kit_for(isa);
    cb->base.vt = &k_cpu_vtbl;
    cb->base.act_dtype = CQ_DTYPE_F32;
    cb->base.impl = cb;
    snprintf(cb->base.name, sizeof cb->base.name, "cpu/%s", cb->kit->name);
    *out = &cb->base;
    return CQ_OK;
}
