/*
 * cuda_backend.c — the CUDA backend: device choice, its vtable and
 * capability answers, sync with the deferred-error report, device listing
 * for `cortiq gpu`, and per-op timing.
 *
 * Deferred errors: kernels record the first failure (a bad index, a
 * non-finite output) in a device status word; sync and download copy it back
 * after the stream drains and turn it into CQ_ERR_BOUNDS / CQ_ERR_NUMERIC
 * with the op's name and its number since the previous sync. A fault that
 * kills the context (an illegal address) surfaces from the stream wait as a
 * CUDA error; CORTIQ_CUDA_SYNC=1 waits after every op to pin it to its op.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

/* The kernels' enums mirror ops.h (compared as ints: they are distinct enum types). */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(CQK_ACT_GELU_TANH, CQ_ACT_GELU_TANH) && SAME(CQK_ACT_SILU, CQ_ACT_SILU) &&
                   SAME(CQK_ACT_SWIGLU, CQ_ACT_SWIGLU),
               "activation enums differ");
_Static_assert(SAME(CQK_UNARY_COUNT, CQ_UNARY_COUNT) && SAME(CQK_UNARY_CLAMP, CQ_UNARY_CLAMP) &&
                   SAME(CQK_UNARY_LOG, CQ_UNARY_LOG) && SAME(CQK_UNARY_SQRT, CQ_UNARY_SQRT) &&
                   SAME(CQK_UNARY_EXP, CQ_UNARY_EXP) && SAME(CQK_UNARY_GELU_ERF, CQ_UNARY_GELU_ERF),
               "unary enums differ");
_Static_assert(SAME(CQK_BINARY_COUNT, CQ_BINARY_COUNT) && SAME(CQK_BINARY_DIV, CQ_BINARY_DIV), "binary enums differ");
_Static_assert(SAME(CQK_ROPE_INTERLEAVED, CQ_ROPE_INTERLEAVED) && SAME(CQK_ROPE_HALF, CQ_ROPE_HALF), "rope enums differ");
_Static_assert(SAME(CQK_W_Q8_ROW, CQ_DTYPE_Q8_ROW) && SAME(CQK_W_Q8_2F, CQ_DTYPE_Q8_2F) &&
                   SAME(CQK_W_Q4_BLOCK, CQ_DTYPE_Q4_BLOCK) && SAME(CQK_W_Q4_TILED, CQ_DTYPE_Q4_TILED) &&
                   SAME(CQK_W_Q4TP, CQ_DTYPE_Q4TP) && SAME(CQK_W_BF16, CQ_DTYPE_BF16) && SAME(CQK_W_F16, CQ_DTYPE_F16) &&
                   SAME(CQK_W_F32, CQ_DTYPE_F32),
               "codec ids differ");
#undef SAME

int cq_cuda_kdt(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F32: return CQK_F32;
    case CQ_DTYPE_F16: return CQK_F16;
    case CQ_DTYPE_BF16: return CQK_BF16;
    case CQ_DTYPE_I32: return CQK_I32;
    default: return -1;
    }
}

/* ---- errors -------------------------------------------------------------------------------- */
cq_status cq_cuda_fail(cudaError_t e, const char *op, const char *what) {
    cq_status s = CQ_ERR_INTERNAL;
    if (e == cudaErrorMemoryAllocation) s = CQ_ERR_NOMEM;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNoKernelImageForDevice ||
             e == cudaErrorInvalidDevice)
        s = CQ_ERR_UNSUPPORTED;
    return cq_fail(s, "cuda %s: %s failed: %s (%s)", op, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* ---- op bracketing ------------------------------------------------------------------------------ */
static void prof_flush(cq_cuda *c);

cqk_ctx cq_cuda_op_begin(cq_cuda *c, cq_op op) {
    /* the calling thread may have made another device current since the last op */
    cudaSetDevice(c->device);
    cqk_ctx k = {.stream = c->stream, .st = c->dstatus, .op = (unsigned)op, .seq = c->seq, .check = 0};
    k.check = c->check >= 2 || (c->check == 1 && op == CQ_OP_MATMUL);
    c->op_log[c->seq & 255] = (unsigned char)op;
    c->seq++;
    if (op != CQ_OP_MATMUL) c->staged_x.valid = false; /* any other op may write the staged matmul input */
    if (c->prof.on) {
        if (c->prof.n == CQ_CUDA_PROF_EVENTS) { /* all pairs used: wait for the last, fold them in */
            cudaEventSynchronize(c->prof.ev[2 * CQ_CUDA_PROF_EVENTS - 1]);
            prof_flush(c);
        }
        cudaEventRecord(c->prof.ev[2 * c->prof.n], c->stream);
        c->prof.op[c->prof.n] = (int)op;
    }
    return k;
}

cq_status cq_cuda_op_end(cq_cuda *c, cq_op op, cudaError_t launch, const char *what) {
    if (c->prof.on && c->prof.n < CQ_CUDA_PROF_EVENTS) {
        cudaEventRecord(c->prof.ev[2 * c->prof.n + 1], c->stream);
        c->prof.n++;
    }
    if (launch != cudaSuccess) return cq_cuda_fail(launch, cq_op_name(op), what);
    if (c->sync_each_op) {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) return cq_cuda_fail(e, cq_op_name(op), "the kernel (CORTIQ_CUDA_SYNC wait)");
    }
    return CQ_OK;
}

/* ---- sync ---------------------------------------------------------------------------------------- */
static void prof_flush(cq_cuda *c) {
    for (int i = 0; i < c->prof.n; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, c->prof.ev[2 * i], c->prof.ev[2 * i + 1]) == cudaSuccess) {
            c->prof.ms[c->prof.op[i]] += ms;
            c->prof.calls[c->prof.op[i]]++;
        }
    }
    c->prof.n = 0;
}

cq_status cq_cuda_not_while_recording(const char *what) {
    return cq_fail(CQ_ERR_INVALID_ARG, "cuda: %s cannot be recorded (end the recording first; ops.h)", what);
}

cq_status cq_cuda_sync(cq_backend *be) {
    cq_cuda *c = cq_cuda_of(be);
    if (c->recording) return cq_cuda_not_while_recording("sync");
    cudaSetDevice(c->device);
    cudaError_t e = cudaMemcpyAsync(c->hstatus, c->dstatus, sizeof *c->hstatus, cudaMemcpyDeviceToHost, c->stream);
    cudaError_t w = cudaStreamSynchronize(c->stream);
    unsigned issued = c->seq;
    c->seq = 0;
    if (w != cudaSuccess || e != cudaSuccess) {
        cq_op last = issued ? (cq_op)c->op_log[(issued - 1) & 255] : CQ_OP_COUNT;
        char what[160];
        snprintf(what, sizeof what, "waiting for the %u queued ops (the last: %s; CORTIQ_CUDA_SYNC=1 names the failing one)",
                 issued, issued ? cq_op_name(last) : "none");
        c->prof.n = 0;
        return cq_cuda_fail(w != cudaSuccess ? w : e, "sync", what);
    }
    if (c->prof.on) prof_flush(c);
    cqk_status st = *c->hstatus;
    if (st.code == CQK_ERR_NONE) return CQ_OK;
    memset(c->hstatus, 0, sizeof *c->hstatus);
    e = cudaMemsetAsync(c->dstatus, 0, sizeof *c->dstatus, c->stream);
    if (e != cudaSuccess) return cq_cuda_fail(e, "sync", "clearing the status word");
    const char *op = cq_op_name((cq_op)st.op);
    if (st.code == CQK_ERR_INDEX) {
        if (st.op == CQ_OP_GET_ROWS)
            return cq_fail(CQ_ERR_BOUNDS, "get_rows: id %lld at position %lld is outside the table (op #%u since the last sync)",
                           st.value, st.where, st.seq);
        return cq_fail(CQ_ERR_BOUNDS, "%s: index %lld at position %lld is out of range (op #%u since the last sync)", op,
                       st.value, st.where, st.seq);
    }
    if (st.code == CQK_ERR_NONFINITE)
        return cq_fail(CQ_ERR_NUMERIC,
                       "%s produced a non-finite value (output element %lld; op #%u since the last sync): the inputs or "
                       "weights hold values too large for the computation",
                       op, st.where, st.seq);
    return cq_fail(CQ_ERR_INTERNAL, "cuda: unknown device status code %u from %s", st.code, op);
}

/* ---- capabilities ------------------------------------------------------------------------------------ */
static bool is_fl(cq_dtype dt) { return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16; }

static bool cuda_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    (void)be;
    switch (op) {
    case CQ_OP_MATMUL:
    case CQ_OP_GET_ROWS: return is_fl(xdt) && cq_cuda_codec_supported(wdt);
    case CQ_OP_COPY: return is_fl(xdt) || xdt == CQ_DTYPE_I32;
    case CQ_OP_ATTENTION:
    case CQ_OP_LAYERNORM:
    case CQ_OP_RMSNORM:
    case CQ_OP_QK_NORM_ROPE:
    case CQ_OP_UNARY:
    case CQ_OP_BINARY:
    case CQ_OP_GATED_ADD:
    case CQ_OP_SWIGLU:
    case CQ_OP_SOFTMAX:
    case CQ_OP_TRANSPOSE:
    case CQ_OP_CONCAT_COLS:
    case CQ_OP_GATHER_COLS:
    case CQ_OP_UPSAMPLE_NEAREST:
    case CQ_OP_PIXEL_SHUFFLE:
    case CQ_OP_PIXEL_UNSHUFFLE: return is_fl(xdt);
    case CQ_OP_GROUPNORM:
    case CQ_OP_GROUP_MOMENTS: return is_fl(xdt);
    case CQ_OP_CONV2D:
    case CQ_OP_CONV3D:
    case CQ_OP_CONV1D:
    case CQ_OP_CONV_TRANSPOSE1D: return is_fl(xdt) && cq_cuda_codec_supported(wdt);
    case CQ_OP_DEPTH_TO_SPACE3D:
    case CQ_OP_SNAKE: return is_fl(xdt);
    default: return false;
    }
}

static cq_dtype cuda_op_precision(const cq_backend *be, cq_op op, cq_dtype wdt) {
    (void)be;
    (void)wdt;
    switch (op) {
    case CQ_OP_MATMUL:
    case CQ_OP_CONV2D:
    case CQ_OP_CONV3D:
    case CQ_OP_CONV1D: return CQ_DTYPE_F16; /* f16 operands with power-of-two row scales */
    case CQ_OP_CONV_TRANSPOSE1D: return CQ_DTYPE_F16; /* f32 arithmetic, but a bound kernel is its f16 plane */
    case CQ_OP_ATTENTION: return CQ_DTYPE_BF16; /* bf16 Q/K/V/P on the tensor-core path */
    case CQ_OP_GET_ROWS: return CQ_DTYPE_F16;   /* weights are f16 planes (activation tables are exact) */
    default: return CQ_DTYPE_F32;
    }
}

static cq_status cuda_stats(cq_backend *be, cq_backend_stats *out, bool reset) {
    cq_cuda *c = cq_cuda_of(be);
    CQ_TRY(cq_cuda_sync(be));
    out->mem_in_use = c->mem.in_use;
    out->mem_peak = c->mem.peak;
    out->mem_cached = c->mem.cached;
    out->weight_bytes = c->weight_bytes;
    out->device_allocs = c->mem.n_cuda_mallocs;
    out->device_alloc_s = c->mem.malloc_s;
    out->replays = c->replays;
    out->staged_reuses = c->staged_reuses;
    out->streamed_bytes = c->xfer.bytes;
    out->host_pinned = c->xfer.pinned;
    out->upload_bytes = c->ring.bytes;
    out->upload_copy_s = c->ring.copy_s;
    out->upload_wait_s = c->ring.wait_s;
    out->host_pin_s = c->xfer.pin_s;
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        out->device_free = fr;
        out->device_total = tot;
    }
    out->timed = c->prof.on;
    for (int i = 0; i < CQ_OP_COUNT; i++) {
        out->op_ms[i] = c->prof.ms[i];
        out->op_calls[i] = c->prof.calls[i];
    }
    if (reset) {
        c->mem.peak = c->mem.in_use;
        memset(c->prof.ms, 0, sizeof c->prof.ms);
        memset(c->prof.calls, 0, sizeof c->prof.calls);
    }
    return CQ_OK;
}

static uint64_t cuda_mem_budget(const cq_backend *be) { return ((const cq_cuda *)be)->mem_budget; }

/* ---- lifecycle --------------------------------------------------------------------------------------- */
static void cuda_destroy(cq_backend *be) {
    cq_cuda *c = cq_cuda_of(be);
    if (!c) return;
    if (c->device >= 0) cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->prof.on && c->prof.n) prof_flush(c);
    if (c->prof.on) {
        double total = 0;
        for (int i = 0; i < CQ_OP_COUNT; i++) total += c->prof.ms[i];
        for (int i = 0; i < CQ_OP_COUNT && total > 0; i++)
            if (c->prof.calls[i])
                CQ_INFO("cuda profile: %-16s %8ld calls %10.3f ms (%4.1f%%)", cq_op_name((cq_op)i), c->prof.calls[i],
                        c->prof.ms[i], 100.0 * c->prof.ms[i] / total);
    }
    if (c->prof.ev) {
        for (int i = 0; i < 2 * CQ_CUDA_PROF_EVENTS; i++)
            if (c->prof.ev[i]) cudaEventDestroy(c->prof.ev[i]);
        cq_free(c->prof.ev);
    }
    cq_free(c->prof.op);
    cq_cuda_plans_destroy(c);
    if (c->lt) cq_lt.cublasLtDestroy(c->lt);
    if (c->exp2_lut) cq_cuda_free(c, c->exp2_lut);
    for (int i = 0; i < CQ_CUDA_SLOT_COUNT; i++)
        if (c->scratch[i]) cq_cuda_free(c, c->scratch[i]);
    if (c->lt_ws) cq_cuda_free(c, c->lt_ws);
    if (c->stream) cudaStreamSynchronize(c->stream);
    cq_cuda_stream_destroy(c); /* the copy stream and its slots, both streams idle */
    cq_cuda_alloc_destroy(c);
    if (c->dstatus) cudaFree(c->dstatus);
    if (c->hstatus) cudaFreeHost(c->hstatus);
    cq_cuda_ring_destroy(c); /* the stream has drained: no copy reads the ring */
    if (c->stream) cudaStreamDestroy(c->stream);
    cq_free(c);
}

static const cq_backend_vtbl k_cuda_vtbl = {
    .kind = "cuda",
    .destroy = cuda_destroy,
    .supports = cuda_supports,
    .buf_alloc = cq_cuda_buf_alloc,
    .buf_free = cq_cuda_buf_free,
    .buf_upload = cq_cuda_buf_upload,
    .buf_download = cq_cuda_buf_download,
    .buf_zero = cq_cuda_buf_zero,
    .bind_weight = cq_cuda_bind_weight,
    .release_weight = cq_cuda_release_weight,
    .bind_weight_hashing = cq_cuda_bind_weight_hashing,
    .sync = cq_cuda_sync,
    CQ_OPS_VTBL(cq_cuda_)
    .op_precision = cuda_op_precision,
    .stats = cuda_stats,
    .mem_budget = cuda_mem_budget,
    .set_weight_mode = cq_cuda_set_weight_mode,
    .set_stream_keep = cq_cuda_set_stream_keep,
    .weight_cost = cq_cuda_weight_cost,
    .trim = cq_cuda_trim,
    .can_record = cq_cuda_can_record,
    .record_begin = cq_cuda_record_begin,
    .record_end = cq_cuda_record_end,
    .replay = cq_cuda_replay,
    .record_free = cq_cuda_record_free,
};

bool cq_cuda_built(void) { return true; }

int cq_cuda_device_count(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (why && why_len) {
            if (e == cudaErrorInsufficientDriver)
                snprintf(why, why_len, "no NVIDIA driver is loaded, or it is older than this build's CUDA runtime (%s)",
                         cudaGetErrorString(e));
            else if (e != cudaSuccess)
                snprintf(why, why_len, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
            else
                snprintf(why, why_len, "the driver reports no CUDA device");
        }
        (void)cudaGetLastError(); /* do not leave the error for the next unrelated call */
        return 0;
    }
    return n;
}

bool cq_cuda_load_cublaslt(char *what, size_t what_len) {
    const char *path = NULL;
    cq_status s = cq_cuda_lt_load(&path);
    if (what && what_len) {
        if (s == CQ_OK)
            snprintf(what, what_len, "%s (version %zu)", path, cq_lt.cublasLtGetVersion());
        else
            snprintf(what, what_len, "%s", cq_last_error());
    }
    return s == CQ_OK;
}

cq_status cq_cuda_device_info(int device, cq_gpu_info *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cuda_device_info: out is NULL");
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp p;
    CQ_CUDA_TRY(cudaGetDeviceProperties(&p, device), "device", "cudaGetDeviceProperties");
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->mem_total = p.totalGlobalMem;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    int cur = 0;
    size_t fr = 0, tot = 0;
    /* free memory needs a context on that device; keep the caller's current device */
    if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->mem_free = fr;
        cudaSetDevice(cur);
    }
    (void)cudaGetLastError();
    return CQ_OK;
}

cq_status cq_cuda_describe(int device, char *buf, size_t len) {
    if (!buf || !len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cuda_describe: no buffer");
    cq_gpu_info g;
    CQ_TRY(cq_cuda_device_info(device, &g));
    char tot[32], fr[32];
    snprintf(buf, len, "%s, %s (%s free), compute capability %d.%d, %d multiprocessors%s", g.name,
             cq_fmt_bytes(g.mem_total, tot, sizeof tot), cq_fmt_bytes(g.mem_free, fr, sizeof fr), g.cc_major,
             g.cc_minor, g.sm_count, g.cc_major < 8 ? " — too old for this backend (needs 8.0)" : "");
    return CQ_OK;
}

static cq_status prof_init(cq_cuda *c) {
    c->prof.ev = cq_calloc(2 * CQ_CUDA_PROF_EVENTS, sizeof(cudaEvent_t));
    c->prof.op = cq_calloc(CQ_CUDA_PROF_EVENTS, sizeof(int));
    if (!c->prof.ev || !c->prof.op) return CQ_ERR_NOMEM;
    for (int i = 0; i < 2 * CQ_CUDA_PROF_EVENTS; i++)
        CQ_CUDA_TRY(cudaEventCreate(&c->prof.ev[i]), "profile", "cudaEventCreate");
    c->prof.on = true;
    return CQ_OK;
}

/* The budget: the options' figure, or what the device has free now (this context made) less a margin for the
 * driver, cuBLASLt's own buffers and other programs: 5 % of the device and 256 MiB. */
#define BUDGET_MARGIN_FIXED ((uint64_t)256 << 20)
static cq_status budget_init(cq_cuda *c, uint64_t want) {
    if (want) {
        c->mem_budget = want;
        return CQ_OK;
    }
    size_t fr = 0, tot = 0;
    CQ_CUDA_TRY(cudaMemGetInfo(&fr, &tot), "backend", "cudaMemGetInfo");
    const uint64_t margin = (uint64_t)tot / 20 + BUDGET_MARGIN_FIXED;
    if ((uint64_t)fr > margin) {
        c->mem_budget = (uint64_t)fr - margin;
    } else { /* a nearly full device: half of what is left, so the message of the first refusal says why */
        char f[32], m[32];
        c->mem_budget = (uint64_t)fr / 2;
        CQ_WARN("cuda: device %d has %s free, less than the %s margin; the memory budget is half of it", c->device,
                cq_fmt_bytes(fr, f, sizeof f), cq_fmt_bytes(margin, m, sizeof m));
    }
    return CQ_OK;
}

static cq_status cuda_init(cq_cuda *c, int device, const cq_cuda_opts *o) {
    struct cudaDeviceProp p;
    CQ_CUDA_TRY(cudaGetDeviceProperties(&p, device), "backend", "cudaGetDeviceProperties");
    if (p.major < 8)
        return cq_fail(CQ_ERR_UNSUPPORTED,
                       "cuda backend: device %d (%s) has compute capability %d.%d; the kernels need 8.0 or newer (bf16 "
                       "tensor cores)",
                       device, p.name, p.major, p.minor);
    c->device = device;
    snprintf(c->dev_name, sizeof c->dev_name, "%s", p.name);
    c->cc_major = p.major;
    c->cc_minor = p.minor;
    c->sm_count = p.multiProcessorCount;
    c->smem_optin = p.sharedMemPerBlockOptin;
    CQ_CUDA_TRY(cudaSetDevice(device), "backend", "cudaSetDevice");
    CQ_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "backend", "cudaStreamCreate");
    /* the budget counts every buffer of the backend, so the default is read before the first one */
    CQ_TRY(budget_init(c, o->mem_budget));
    CQ_CUDA_TRY(cudaMalloc((void **)&c->dstatus, sizeof *c->dstatus), "backend", "allocating the status word");
    CQ_CUDA_TRY(cudaMemsetAsync(c->dstatus, 0, sizeof *c->dstatus, c->stream), "backend", "clearing the status word");
    CQ_CUDA_TRY(cudaMallocHost((void **)&c->hstatus, sizeof *c->hstatus), "backend", "allocating pinned memory");
    memset(c->hstatus, 0, sizeof *c->hstatus);
    c->wmode = CQ_WEIGHTS_PLANES;
    cublasStatus_t bs = cq_lt.cublasLtCreate(&c->lt);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return cq_fail(CQ_ERR_INTERNAL, "cuda backend: cublasLtCreate failed: %s", cq_lt.cublasLtGetStatusString(bs));
    /* cuBLASLt's workspace: NVIDIA's recommendation for Hopper; plans take only algorithms that fit */
    c->lt_ws_size = (size_t)32 << 20;
    CQ_TRY(cq_cuda_malloc(c, c->lt_ws_size, &c->lt_ws));
    /* the options' zeros are the defaults (ops.h); the modes keep the numbering cuda_impl.h documents */
    c->check = o->check == CQ_CUDA_CHECK_OFF ? 0 : o->check == CQ_CUDA_CHECK_ALL ? 2 : 1;
    c->gemm_mode = (int)o->gemm;
    /* off by default: no gain measured in the 7B step, and it makes the choice (the last bits) per process */
    c->gemm_tune = o->gemm_tune;
    c->attn_mode = (int)o->attn;
    c->sync_each_op = o->sync_each_op;
    c->side_copies = !o->no_side_copy;
    c->graphs = !o->no_graphs;
    if (o->profile) CQ_TRY(prof_init(c));
    c->base.vt = &k_cuda_vtbl;
    /* f32: the models allocate their non-residual activations in this dtype,
     * and narrower storage is not exact enough here. Measured on the golden
     * cases (storage rounding alone, on the reference backend): bf16 costs
     * 3.9e-3 of max|err| / RMS on Qwen-Image-2.1 (the device bound is 3e-3
     * before this backend's own f16 GEMM rounding of ~2e-3) and 1.6e-2 on
     * Z-Image (a quarter of the reference's bf16 error is ~9e-3); f16 costs
     * 6.8e-4 / 2.1e-3, which with the GEMM rounding sits at the bound. The
     * matmul stages its input as scaled f16 rows either way, so a narrow
     * activation saves no pass. cq_backend_opts.act_dtype asks for f16 or
     * bf16 (tests: `cuda@f16`). */
    c->base.act_dtype = CQ_DTYPE_F32;
    c->base.impl = c;
    snprintf(c->base.name, sizeof c->base.name, "cuda:%d (%.40s)", device, p.name);
    return CQ_OK;
}

cq_status cq_backend_cuda_create(int device, cq_backend **out) { return cq_backend_cuda_open(device, NULL, out); }

cq_status cq_backend_cuda_open(int device, const cq_cuda_opts *opts, cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_cuda_open: out is NULL");
    *out = NULL;
    static const cq_cuda_opts k_defaults;
    if (!opts) opts = &k_defaults;
    if ((unsigned)opts->check >= CQ_CUDA_CHECK_COUNT || (unsigned)opts->gemm >= CQ_CUDA_GEMM_COUNT ||
        (unsigned)opts->attn >= CQ_CUDA_ATTN_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "cuda backend: options out of range (check %d, gemm %d, attn %d)",
                       (int)opts->check, (int)opts->gemm, (int)opts->attn);
    if (device < 0) device = 0;
    char why[256];
    int n = cq_cuda_device_count(why, sizeof why);
    if (n == 0) return cq_fail(CQ_ERR_UNSUPPORTED, "cuda backend: no usable GPU: %s", why);
    if (device < 0 || device >= n)
        return cq_fail(CQ_ERR_UNSUPPORTED, "cuda backend: device %d does not exist (%d device%s visible)", device, n,
                       n == 1 ? "" : "s");
    /* cuBLASLt is loaded here, by the first backend (cuda_lt_load.c), not when the program starts */
    CQ_TRY(cq_cuda_lt_load(NULL));
    cq_cuda *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->device = -1;
    cq_status s = cuda_init(c, device, opts);
    if (s != CQ_OK) {
        cuda_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return CQ_OK;
}
