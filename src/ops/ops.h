/*
 * ops.h — the backend-neutral operation layer.
 *
 * Model code is written once against these functions. A backend (CPU now,
 * CUDA/Vulkan later) is a vtable of the same operations plus buffer
 * management. Tensors are backend buffers (device memory on a GPU), never
 * host pointers handed to model code, so a GPU backend can queue a whole
 * denoiser step asynchronously. The CPU backend runs each op when called.
 *
 * Every op has a plain-C reference implementation (src/ops/ref.c) that the
 * generic op test (tests/unit/test_ops.c) compares every backend and every
 * ISA variant against.
 *
 * Layout conventions
 *  - Tensors are dense, row-major, up to 4 dims. Most activations are 2-D
 *    [rows, cols]: token rows for transformers, pixel rows for images.
 *  - Images are channels-last: an [H, W, C] image is the 2-D tensor
 *    [H*W, C] plus its (H, W). Channel norms are then row norms, 1x1 convs
 *    are matmuls, and attention over pixels is plain attention.
 *  - Weights are bound from a CMF tensor view (any codec); on the CPU the
 *    binding is zero-copy (the payload stays in the file mapping).
 *  - A view (cq_tensor_rows_view, cq_tensor_subview) shares the parent's
 *    buffer: `offset` is in bytes from the buffer's base, so device buffers
 *    work the same way.
 *  - Small per-channel parameters (bias, gate, norm scale/shift/weight, RoPE
 *    tables) are F32 tensors. A weight stored as f16/bf16 in the file is
 *    converted once at load with cq_op_copy into an F32 tensor.
 *  - Activation dtypes: every op takes F32; a backend may also take F16/BF16
 *    (ask cq_backend_supports). Within one op all activation tensors share
 *    one dtype, except matmul (x and y may differ) and copy (converts).
 *
 * Threading: a backend is used by one host thread at a time (like a device
 * queue). The CPU backend parallelises inside each op with its own pool;
 * an op issued from inside a pool task runs on that thread alone.
 *
 * Errors: the front end (ops.c) validates shapes, dtypes, ownership and
 * aliasing before anything is queued and fails with CQ_ERR_SHAPE /
 * CQ_ERR_INVALID_ARG / CQ_ERR_DTYPE and a message naming the op and the
 * tensor; CQ_ERR_UNSUPPORTED when the backend does not run the combination.
 */
#ifndef CQ_OPS_H
#define CQ_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "ops/ops_list.h"

/* Element types of activations and index tensors. The CMF codec ids
 * (cq_dtype) are reused for f32/f16/bf16 and for weights; I32 is internal
 * (never stored in a file). */
#define CQ_DTYPE_I32 ((cq_dtype)64)

#define CQ_TENSOR_MAX_DIMS 4

typedef struct cq_backend cq_backend;

typedef struct cq_tensor {
    cq_backend *be;      /* owning backend */
    void *base;          /* backend handle: host pointer (CPU) or device pointer */
    size_t offset;       /* byte offset of element 0 from base */
    cq_dtype dtype;      /* F32/F16/BF16/I32 for activations; any codec for weights */
    int ndim;
    int64_t shape[CQ_TENSOR_MAX_DIMS];
    size_t nbytes;       /* bytes this tensor spans (payload size for weights) */
    uint32_t flags;      /* CQ_TENSOR_* */
    void *impl;          /* backend-private (e.g. repacked weight panels) */
    const void *wsrc;    /* weights: the payload in the pack's mapping, where a fallback reads it */
    uint64_t wsrc_bytes;
} cq_tensor;

#define CQ_TENSOR_OWNED  0x1u /* cq_tensor_free releases the buffer */
#define CQ_TENSOR_WEIGHT 0x2u /* bound from a CMF view, immutable */
#define CQ_TENSOR_VIEW   0x4u /* shares another tensor's buffer */

/* rows = shape[0] for 2-D; generally the product of all dims but the last. */
int64_t cq_tensor_rows(const cq_tensor *t);
int64_t cq_tensor_cols(const cq_tensor *t);
int64_t cq_tensor_nelem(const cq_tensor *t);
/* Bytes per element of an activation dtype (F32 4, F16/BF16 2, I32 4); 0 otherwise. */
size_t cq_act_dtype_size(cq_dtype dt);

/* ---- backend lifecycle --------------------------------------------------- */
typedef enum cq_cpu_isa {
    CQ_CPU_AUTO = 0,  /* best the machine supports */
    CQ_CPU_GENERIC,   /* portable C, auto-vectorised at most */
    CQ_CPU_AVX2,
    CQ_CPU_AVX512,
    CQ_CPU_AMX,
    CQ_CPU_NEON,
    CQ_CPU_ISA_COUNT
} cq_cpu_isa;
const char *cq_cpu_isa_name(cq_cpu_isa isa);
/* This build has kernels for it and the CPU (and OS) allow it; AUTO is always available. */
bool cq_cpu_isa_available(cq_cpu_isa isa);

/* Options of a backend: one struct for every backend, each reading its part.
 * A zeroed struct means the defaults everywhere. The library reads no
 * environment variable; the CLI maps CORTIQ_* onto these (src/cli/env.c). */
typedef struct cq_cpu_opts {
    int threads;    /* <= 0: cq_default_threads() */
    cq_cpu_isa isa; /* AUTO: the best available; an explicit ISA the machine lacks fails */
} cq_cpu_opts;

/* CUDA debugging and tuning knobs (the CORTIQ_CUDA_* variables of the CLI);
 * every zero is the default. */
typedef enum cq_cuda_check {
    CQ_CUDA_CHECK_DEFAULT = 0, /* = MATMUL */
    CQ_CUDA_CHECK_OFF,         /* no output scan */
    CQ_CUDA_CHECK_MATMUL,      /* matmul outputs are scanned for non-finite values */
    CQ_CUDA_CHECK_ALL,         /* every op's output */
    CQ_CUDA_CHECK_COUNT
} cq_cuda_check;
typedef enum cq_cuda_gemm {
    CQ_CUDA_GEMM_AUTO = 0, /* cuBLASLt, and on compute capability 9.0 SwiGLU on the backend's own GEMM */
    CQ_CUDA_GEMM_SIMT,     /* the CUDA-core kernel (a debugging fallback) */
    CQ_CUDA_GEMM_WGMMA,    /* the Hopper GEMM with the epilogue in registers wherever it applies */
    CQ_CUDA_GEMM_CUBLASLT, /* cuBLASLt alone */
    CQ_CUDA_GEMM_COUNT
} cq_cuda_gemm;
typedef enum cq_cuda_attn {
    CQ_CUDA_ATTN_AUTO = 0, /* wgmma on compute capability 9.0, else flash128w4 */
    CQ_CUDA_ATTN_GENERIC,
    CQ_CUDA_ATTN_WMMA,
    CQ_CUDA_ATTN_FLASH128,
    CQ_CUDA_ATTN_FLASH64,
    CQ_CUDA_ATTN_FLASH128W4,
    CQ_CUDA_ATTN_WGMMA,
    CQ_CUDA_ATTN_COUNT
} cq_cuda_attn;
typedef struct cq_cuda_opts {
    cq_cuda_check check;
    cq_cuda_gemm gemm;
    cq_cuda_attn attn;
    bool gemm_tune;     /* a new GEMM plan times cuBLASLt's candidates (off: the heuristic's first) */
    bool sync_each_op;  /* wait after every op (pins a device fault on its op; no recordings) */
    bool no_side_copy;  /* LayerNorm writes no side copy of its f32 output for the next matmul */
    bool no_graphs;     /* no recordings (cq_backend_can_record is false) */
    bool profile;       /* per-op device times in cq_backend_get_stats (no recordings) */
    uint64_t mem_budget; /* bytes, 0: free memory at creation minus a margin */
} cq_cuda_opts;

/* Vulkan knobs (the CORTIQ_VULKAN_* variables of the CLI); zeros are the
 * defaults. Devices are numbered in the backend's order of preference:
 * discrete GPUs, then integrated, virtual and CPU devices (vulkan:0 is the
 * first of them). */
typedef struct cq_vulkan_opts {
    int device;        /* the device for "vulkan" named without ":N" (< 0: 0); "vulkan:N" wins */
    bool sync_each_op; /* wait after every op (pins a device fault on its op; no recordings) */
    bool staging;      /* copy through staging buffers even where device memory is host-visible (as on a
                        * discrete GPU: how that path is tested on integrated devices and lavapipe) */
    /* recordings (record once, submit again): off by default while a model step still has ops that fall
     * back to the host (their copies cannot be recorded, so the recording would fail every time) */
    bool records;
} cq_vulkan_opts;

typedef struct cq_backend_opts {
    int device;       /* device number for a device backend named without ":N" (< 0: 0) */
    cq_cpu_opts cpu;  /* the CPU backend, and the host backend ops fall back to on any other */
    cq_cuda_opts cuda;
    cq_vulkan_opts vulkan;
    /* An op a device backend does not run fails with CQ_ERR_UNSUPPORTED
     * instead of running on the host backend (op tests of the backend itself). */
    bool no_fallback;
    /* Device backends: the most device memory the backend's buffers (weights,
     * activations, scratch, the allocator's cache) may hold at once; an
     * allocation beyond it fails with CQ_ERR_NOMEM saying so, never a crash.
     * 0: what the device has free at creation, less a margin
     * (cq_backend_mem_budget reports the figure). Host backends ignore it. */
    uint64_t mem_budget;
    /* The dtype models allocate their non-residual activations in
     * (cq_backend_act_dtype): 0 (CQ_DTYPE_F32, the zero of the struct) keeps
     * the backend's own preference (F32 on cpu, ref and vulkan, BF16 on
     * cuda); F16 or BF16 replaces it. Any other dtype fails at creation with
     * CQ_ERR_INVALID_ARG. What a backend runs in these dtypes is its own:
     * an op it lacks for them falls back to the host (device backends) or
     * fails with CQ_ERR_UNSUPPORTED (the cpu backend runs only matmul,
     * get_rows and copy in f16/bf16; the ref backend runs every op). */
    cq_dtype act_dtype;
} cq_backend_opts;

/* How a device backend keeps the weights it binds (cq_backend_set_weight_mode).
 * Host backends read every weight in place from the mapping whatever the mode. */
typedef enum cq_weight_mode {
    CQ_WEIGHTS_DEFAULT = 0, /* the backend's fastest: on CUDA, PLANES */
    CQ_WEIGHTS_PLANES,      /* decoded once, at bind time, into compute-ready planes (CUDA: f16 + row scales) */
    CQ_WEIGHTS_COMPACT,     /* kept in the pack's codec on the device and expanded just before each use into
                             * a reused slot: about half the memory of planes for q8, a quarter for q4 */
    CQ_WEIGHTS_STREAMED,    /* matrices kept in their codec in page-locked host memory and copied to the device
                             * before each use (on a second stream, overlapped with the ops before), then
                             * expanded as COMPACT ones; a share set by cq_backend_set_stream_keep stays on
                             * the device, compact. Vectors (1-D) stay on the device */
    CQ_WEIGHTS_MODE_COUNT
} cq_weight_mode;
const char *cq_weight_mode_name(cq_weight_mode m); /* "default", "planes", "compact", "streamed" */

/* The backends this program knows (the registry, src/ops/registry.c), in
 * a fixed order. `built` is false when this build lacks the backend (its
 * create then fails with CQ_ERR_UNSUPPORTED saying so). device_count and
 * describe are NULL for host backends (one implicit device). */
typedef struct cq_backend_desc {
    const char *name;    /* "cpu", "ref", "cuda", "vulkan" */
    const char *label;   /* for people: "CPU", "reference", "CUDA", "Vulkan" */
    const char *summary; /* one line for help texts */
    bool has_devices;    /* accepts "name:N" */
    bool (*built)(void);
    /* device: the N of "name:N", or -1 for the backend's default (its options' device) */
    cq_status (*create)(int device, const cq_backend_opts *opts, cq_backend **out);
    /* devices visible to this process; 0 with the reason in `why` (may be NULL) */
    int (*device_count)(char *why, size_t why_len);
    /* one line about device `device` (name, memory, ...) */
    cq_status (*describe)(int device, char *buf, size_t len);
} cq_backend_desc;
size_t cq_backend_registry_count(void);
const cq_backend_desc *cq_backend_registry_get(size_t i); /* NULL past the end */
/* Parse "name" or "name:N" (N a device number, only for backends with
 * devices): the entry and the device (-1 when none was named). Unknown or
 * malformed names fail with CQ_ERR_INVALID_ARG / CQ_ERR_UNSUPPORTED and a
 * message listing the known names. */
cq_status cq_backend_lookup(const char *name, const cq_backend_desc **desc, int *device);
/* The known names for help and error texts: "cpu, ref, cuda[:N]". */
const char *cq_backend_names(char *buf, size_t len);
/* "auto" (any case): the choice cq_backend_resolve makes. cq_backend_lookup
 * and cq_backend_open accept it and make that choice. */
bool cq_backend_is_auto(const char *name);
/* The concrete backend `name` stands for, in out[out_len]: "auto" becomes
 * "cuda:N" when this build has the CUDA backend and device N (opts->device,
 * else 0) is visible, of compute capability 8.0 or newer and cuBLASLt loads,
 * else "cpu"; why[why_len] (may be NULL) gets the reason in one line ("NVIDIA
 * H200, 139 GiB free", "this build has no CUDA backend", "no CUDA device
 * visible: ...", "CUDA device 0 (...) is cc 7.5, needs 8.0"). Vulkan is never
 * chosen automatically. Any other name is checked (cq_backend_lookup) and
 * copied, why left empty; NULL or "" is "cpu". */
cq_status cq_backend_resolve(const char *name, const cq_backend_opts *opts, char *out, size_t out_len, char *why,
                             size_t why_len);

/* The backend `name` ("cpu", "ref", "cuda", "cuda:N", "auto"; NULL or "" = "cpu")
 * with options (NULL = defaults). The created backend's vtable is checked
 * (every required entry present) before it is returned. */
cq_status cq_backend_open(const char *name, const cq_backend_opts *opts, cq_backend **out);
/* cq_backend_open with default options and `threads` CPU threads. */
cq_status cq_backend_create(const char *name, int threads, cq_backend **out);
/* threads <= 0: cq_default_threads(). isa AUTO: the best available; an
 * explicitly requested ISA the machine lacks fails with CQ_ERR_UNSUPPORTED. */
cq_status cq_backend_cpu_create(int threads, cq_cpu_isa isa, cq_backend **out);
cq_status cq_backend_cpu_open(const cq_cpu_opts *opts, cq_backend **out);
/* The plain-C reference backend (host memory, single-threaded, every op in
 * every activation dtype): the oracle of the op tests and a debugging aid. */
cq_status cq_backend_ref_create(cq_backend **out);
void cq_backend_free(cq_backend *be);
const char *cq_backend_name(const cq_backend *be);   /* "cpu/avx512", "cuda:0 (H200)" */
/* Host memory, no device (cpu, ref): device memory options mean nothing there. */
bool cq_backend_is_host(const cq_backend *be);
/* The dtype models allocate non-residual activations in: the backend's own
 * (F32 on cpu, ref and vulkan, BF16 on cuda) or cq_backend_opts.act_dtype. */
cq_dtype cq_backend_act_dtype(const cq_backend *be);
/* Wait for all queued work. Returns the first deferred error, if any. */
cq_status cq_backend_sync(cq_backend *be);

/* ---- tensors ------------------------------------------------------------- */
/* Allocate an activation tensor (contents undefined). */
cq_status cq_tensor_alloc(cq_backend *be, cq_dtype dt, int ndim, const int64_t *shape, cq_tensor *out);
cq_status cq_tensor_alloc_2d(cq_backend *be, cq_dtype dt, int64_t rows, int64_t cols, cq_tensor *out);
void cq_tensor_free(cq_tensor *t);   /* accepts zeroed/NULL tensors; frees only owned buffers */
/* A view of rows [r0, r0+n) of a tensor (dim 0 of a 2-D tensor). Out of
 * range requests give a zeroed tensor (be == NULL), which every op rejects. */
cq_tensor cq_tensor_rows_view(const cq_tensor *t, int64_t r0, int64_t n);
/* A dense view of `shape` starting at element `elem_off` of an activation
 * tensor (bounds-checked against the parent). */
cq_status cq_tensor_subview(const cq_tensor *t, int64_t elem_off, int ndim, const int64_t *shape, cq_tensor *out);
/* Reinterpret a contiguous tensor with another shape of the same element count. */
cq_status cq_tensor_reshape(const cq_tensor *t, int ndim, const int64_t *shape, cq_tensor *out);
/* Host <-> backend copies (bytes, from element 0 of the tensor). */
cq_status cq_tensor_upload(cq_tensor *t, const void *src, size_t nbytes);
cq_status cq_tensor_download(const cq_tensor *t, void *dst, size_t nbytes);
cq_status cq_tensor_zero(cq_tensor *t);
/* Bind a weight from a mapped CMF view (zero-copy on the CPU; a GPU backend
 * uploads and may expand it to f16/bf16 planes once). A view from a file is
 * hash-checked the first time (cq_cmf_check_tensor): CQ_ERR_HASH naming it
 * when damaged. */
cq_status cq_tensor_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *out);

/* ---- capability query ---------------------------------------------------- */
/* The ops, in the order of the one list (ops_list.h). */
#define CQ_OP_ENUM_(E, name, P, A, u) CQ_OP_##E,
typedef enum cq_op {
    CQ_OPS_LIST(CQ_OP_ENUM_, _)
    CQ_OP_COUNT
} cq_op;
const char *cq_op_name(cq_op op);
/* Does the backend run `op` with weights in `wdt` (CQ_DTYPE_COUNT: n/a) on
 * activations of `xdt`? For matmul xdt is the dtype of x (y may be F32 or
 * xdt); for copy it is the source dtype (the destination may be any of
 * F32/F16/BF16); for get_rows wdt is the table's codec and xdt the output's
 * dtype; for conv2d wdt is the weight codec. Unsupported combinations return
 * CQ_ERR_UNSUPPORTED from the op. */
bool cq_backend_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt);
/* Whether `op` runs at all on `be`: the backend runs it (cq_backend_supports)
 * or it falls back to the host backend (not with no_fallback). What loaders
 * check before binding weights for an op. */
bool cq_backend_runs(cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt);

/* The narrowest precision `op` rounds its inputs to on this backend, for
 * tests that scale their tolerances: F32 when it computes in f32 or wider
 * (the CPU); F16 or BF16 when operands go through tensor cores in that format
 * (CUDA: matmul F16 with power-of-two row scales, attention BF16, get_rows
 * F16 because device weights are f16 planes). wdt as for
 * cq_backend_supports. */
cq_dtype cq_backend_op_precision(const cq_backend *be, cq_op op, cq_dtype wdt);

/* Device memory and per-op device time of a backend. Host backends report
 * zeros. Op times are collected only when the backend was created with
 * the profile option (cq_cuda_opts; timing adds events around every op). */
typedef struct cq_backend_stats {
    uint64_t mem_in_use;   /* bytes in live buffers (weights, activations, scratch) */
    uint64_t mem_peak;     /* high-water mark of mem_in_use since creation or the last reset */
    uint64_t mem_cached;   /* freed bytes kept by the allocator for reuse */
    uint64_t weight_bytes; /* device bytes of bound weights */
    uint64_t device_allocs; /* allocations the device driver was asked for so far (cudaMalloc) */
    double device_alloc_s;  /* seconds in them */
    uint64_t replays;      /* recordings replayed so far */
    uint64_t staged_reuses; /* matmul inputs a device backend took from an earlier staging (another matmul's
                             * of the same x, or the producing op's side copy) instead of converting again */
    uint64_t device_total, device_free; /* the whole device, as the driver reports it */
    uint64_t streamed_bytes; /* bytes of STREAMED weights copied to the device so far */
    uint64_t host_pinned;  /* page-locked host bytes holding STREAMED weights */
    /* weight payloads a device backend copied through host memory so far (its uploads), the host's seconds
     * in those copies (with the integrity hash they fold in), and its seconds waiting for the device to drain
     * its staging: where a load's time goes */
    uint64_t upload_bytes;
    double upload_copy_s, upload_wait_s;
    double host_pin_s; /* seconds allocating and freeing the page-locked memory of STREAMED weights */
    bool timed;            /* op_ms / op_calls are filled */
    double op_ms[CQ_OP_COUNT];
    long op_calls[CQ_OP_COUNT];
} cq_backend_stats;
/* Waits for queued work (like sync) so the times are complete; reset clears
 * the op times and restarts the peak at the current use. */
cq_status cq_backend_get_stats(cq_backend *be, cq_backend_stats *out, bool reset);

/* ---- device memory: budget, weight modes, costs --------------------------------- */
/* The budget the backend enforces (cq_backend_opts.mem_budget, or the default
 * it computed at creation); 0 for a backend without one (host backends). */
uint64_t cq_backend_mem_budget(const cq_backend *be);
/* The mode of weights bound from now on; each bound weight keeps the mode it
 * was bound in. A backend without modes (host backends) accepts every mode
 * and changes nothing; an unknown mode is CQ_ERR_INVALID_ARG. */
cq_status cq_backend_set_weight_mode(cq_backend *be, cq_weight_mode mode);
cq_weight_mode cq_backend_weight_mode(const cq_backend *be);
/* For weights bound STREAMED from now on: keep `keep` of every `of` bytes of
 * them on the device (compact, as their COMPACT cost counts them), spread
 * evenly in binding order, and stream the rest; keep 0 streams every matrix,
 * keep >= of streams none. Binding keeps a weight while the bytes kept, with
 * it, stay within keep/of of the bytes bound STREAMED since this call, so at
 * most `keep` of `of` bytes stay and the streamed ones are spread through a
 * model's blocks (each copy then overlaps the kept blocks' compute). Ignored
 * by backends without weight modes. */
cq_status cq_backend_set_stream_keep(cq_backend *be, uint64_t keep, uint64_t of);
/* What binding `v` in `mode` would cost on this backend, without binding it:
 * *bytes the weight holds on the device for as long as it is bound, *slot the
 * scratch it needs while an op reads it (COMPACT: the plane it expands into;
 * STREAMED: that and the device slots its payload is copied into; the
 * backend keeps one such slot per operand, so a component needs the largest,
 * not the sum). Both 0 on host backends. A STREAMED matrix holds 0 bytes: the
 * ones cq_backend_set_stream_keep keeps cost their COMPACT bytes. */
cq_status cq_backend_weight_cost(const cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, uint64_t *bytes,
                                 uint64_t *slot);
/* Give the device the memory the backend caches but does not use (freed
 * blocks, per-use weight slots, after the queued work), e.g. once a
 * component's weights are released and the next needs the room. */
cq_status cq_backend_trim(cq_backend *be);

/* ---- recordings (CUDA graphs) -------------------------------------------------- */
/* A device backend can record a sequence of ops once and replay it with one
 * launch (CUDA: a stream capture instantiated as a graph), which removes the
 * per-op launch cost from loops such as the denoiser's steps.
 *
 * Between record_begin and record_end the ops are recorded, not run; they may
 * not upload, download, sync or need new device memory (the backend fails
 * them with a clear message), so a caller records the second pass of a loop,
 * after the first has sized every buffer. record_end(keep = false) ends a
 * recording that failed halfway and discards it. A replay runs the recorded
 * ops on the tensors they were recorded with: those must stay allocated (and
 * the weights bound) while the recording exists, and the data they hold at
 * replay time is what the ops read. Inputs change between replays by uploads
 * into the same tensors before the replay.
 *
 * cq_backend_can_record is false for host backends and when the backend runs
 * in a mode that needs each op on its own (per-op timing, a wait after each
 * op, recordings turned off; cq_cuda_opts): callers then just run the ops. A replay returns
 * CQ_ERR_AGAIN when the recording went stale (the backend had to replace a
 * buffer it refers to): free it, run the ops directly, record again later. */
typedef struct cq_recording cq_recording;
bool cq_backend_can_record(const cq_backend *be);
cq_status cq_backend_record_begin(cq_backend *be);
cq_status cq_backend_record_end(cq_backend *be, bool keep, cq_recording **out);
cq_status cq_recording_replay(cq_recording *r);
void cq_recording_free(cq_recording *r);

/* ---- matmul -------------------------------------------------------------
 * v = act(scale * (x · Wᵀ) + bias)                     (act = none | gelu_tanh | silu)
 * v = silu(scale*(x · Wᵀ) + bias) ⊙ (scale*(x · W2ᵀ) + bias2)   (act = swiglu)
 * then  y = v                                  (accumulate = false)
 *   or  y = y + v                              (accumulate, gate NULL)
 *   or  y = y + gate ⊙ v                       (accumulate, gate [N] per channel)
 * x [M, K] (F32, or F16/BF16 where supported), W/W2 [N, K] in any codec,
 * bias/bias2/gate [N] F32, y [M, N] F32 (or F16/BF16 where supported).
 * SWIGLU with w2 == NULL takes a fused W [2N, K]: rows [0, N) are the gate
 * (silu) half, rows [N, 2N) the up half; bias is then [2N] and bias2 unused.
 * W may have more than 2 dims ([N, a, b, ...], K = a*b*...), as conv weights do.
 * Accumulation is f32. x and y must not alias. */
typedef enum cq_act { CQ_ACT_NONE = 0, CQ_ACT_GELU_TANH, CQ_ACT_SILU, CQ_ACT_SWIGLU, CQ_ACT_COUNT } cq_act;
typedef struct cq_matmul_args {
    cq_tensor *y;
    const cq_tensor *x;
    const cq_tensor *w;
    const cq_tensor *w2;     /* SWIGLU only */
    const cq_tensor *bias;   /* optional */
    const cq_tensor *bias2;  /* optional, SWIGLU only */
    const cq_tensor *gate;   /* optional, accumulate only */
    float scale;             /* 0 is treated as 1 */
    cq_act act;
    bool accumulate;
} cq_matmul_args;
cq_status cq_op_matmul(cq_backend *be, const cq_matmul_args *a);
/* Convenience: y = x · Wᵀ (+ bias). */
cq_status cq_op_linear(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias);

/* ---- attention ----------------------------------------------------------
 * Multi-head attention with flash-style online softmax (the n×m score
 * matrix is never materialised).
 *   q  [Nq, Hq*D]
 *   keys/values: the rows of k_prefix/v_prefix [P, Hkv*D] (optional, a
 *   cached prefix) followed by the rows of k/v [Nk, Hkv*D]. Key index j is
 *   counted over that concatenation.
 *   o  [Nq, Hq*D]
 * Visibility: query i sees keys [lo_i, hi_i): hi_i = vis[i] when `vis` (I32
 * [Nq]) is given, otherwise P + i + 1 with `causal`, otherwise P + Nk; lo_i =
 * vis_lo[i] when `vis_lo` (I32 [Nq]) is given, otherwise 0. A lower bound
 * puts many windows into one call: rows of window w (keys [s_w, e_w)) get
 * vis_lo = s_w, vis = e_w; a sliding window of w keys is vis_lo = hi - w.
 * Hq % Hkv == 0 (grouped-query heads: q head h reads kv head h / (Hq/Hkv)).
 * scale: 0 means 1/sqrt(D). D up to 256 on fast paths; the reference takes
 * any D. A query row that sees no key (lo_i >= hi_i) gets zeros. vis and
 * vis_lo values are clamped to [0, P + Nk] (they live on the device, so they
 * cannot be checked up front). Fast paths skip key tiles outside a query
 * tile's [min lo, max hi), so block-diagonal windows cost what they hold.
 * o must not alias q, k or v. */
typedef struct cq_attn_args {
    cq_tensor *o;
    const cq_tensor *q;
    const cq_tensor *k_prefix, *v_prefix; /* may be NULL */
    const cq_tensor *k, *v;               /* may be NULL when a prefix is given */
    const cq_tensor *vis;                 /* I32 [Nq] or NULL: upper bounds (exclusive) */
    const cq_tensor *vis_lo;              /* I32 [Nq] or NULL (= 0): lower bounds (inclusive) */
    int n_heads, n_kv_heads, head_dim;
    float scale;
    bool causal;
} cq_attn_args;
cq_status cq_op_attention(cq_backend *be, const cq_attn_args *a);

/* ---- row ops ------------------------------------------------------------- */
/* y = LN(x) * (1 + scale) + shift over each row (no affine weights);
 * scale/shift [C] F32, each optional. eps as in the model. y may be x. */
cq_status cq_op_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                          const cq_tensor *shift, float eps);
/* y = x / rms(x) * w  (or * (w + 1) with zero_centered), w [C] optional, bias [C] optional.
 * rms over each row of C = cols. y may be x. */
cq_status cq_op_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                        bool zero_centered, float eps);
/* Group norm over the channels of channels-last rows, statistics taken over
 * all rows of each group: x [HW, C], groups | C, gamma/beta [C] optional. */
cq_status cq_op_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                          const cq_tensor *beta, float eps);
/* The statistics a group norm is assembled from when a map is too large to
 * normalise in one call (it is processed in bands of rows): moments of each
 * channel group over each block of `block` consecutive rows (one image row
 * of a map `block` pixels wide). x [R, C] with groups | C and block | R;
 * m F32 [R / block, 2 * groups]: m[b, 2g] is the mean of block b's
 * block * C / groups values of group g and m[b, 2g + 1] the sum of their
 * squared deviations from that mean, both accumulated in f64 (a sum, then a
 * second pass over the deviations) and rounded to f32 once. Merged in block
 * order (Chan et al.'s pairwise formula), the blocks give the statistics of
 * the whole map whatever bands they were computed in. */
cq_status cq_op_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block);

/* In place on t [N, H*D]: per-head RMSNorm with weight w [D] (optional, NULL
 * skips the norm), then rotary embedding with cos/sin [N, D/2] F32 tables
 * (one row per token). INTERLEAVED rotates adjacent pairs (2i, 2i+1) as a
 * complex number (Qwen-Image's complex RoPE); HALF rotates (i, i + D/2)
 * (rotate_half, as in Qwen3). rope_dim <= D: only the first rope_dim
 * channels rotate (cos/sin then have rope_dim/2 columns); 0 means D. */
typedef enum cq_rope_mode { CQ_ROPE_NONE = 0, CQ_ROPE_INTERLEAVED, CQ_ROPE_HALF } cq_rope_mode;
cq_status cq_op_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                             const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim);

typedef enum cq_unary {
    CQ_UNARY_SILU = 0,
    CQ_UNARY_GELU_TANH,
    CQ_UNARY_GELU_ERF,
    CQ_UNARY_TANH,
    CQ_UNARY_SIGMOID,
    CQ_UNARY_NEG,
    CQ_UNARY_EXP,
    CQ_UNARY_SCALE,   /* y = x * alpha */
    CQ_UNARY_ADD_SCALAR, /* y = x + alpha */
    CQ_UNARY_CLAMP,   /* y = min(max(x, alpha), beta) */
    CQ_UNARY_LOG,     /* y = ln(max(x, alpha)): a log floored at alpha > 0 (log-mel spectra) */
    CQ_UNARY_SQRT,    /* y = sqrt(max(x, 0)) (spectral magnitudes) */
    CQ_UNARY_COUNT
} cq_unary;
cq_status cq_op_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta);

/* Elementwise binary with row broadcasting: b is either the shape of a, or a
 * single row [1, C] / [C] broadcast to every row of a. y may alias a. */
typedef enum cq_binary { CQ_BINARY_ADD = 0, CQ_BINARY_SUB, CQ_BINARY_MUL, CQ_BINARY_DIV, CQ_BINARY_COUNT } cq_binary;
cq_status cq_op_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn);
/* y += gate ⊙ x, gate [C] per channel (NULL = 1). */
cq_status cq_op_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate);
/* y = silu(a) ⊙ b; or, when b is NULL, a is [M, 2F] holding gate|up halves and y is [M, F]. */
cq_status cq_op_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
/* Row-wise softmax of x * scale (scale 0 = 1). */
cq_status cq_op_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale);
/* Copy with dtype conversion (same element count). */
cq_status cq_op_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x);
/* y [C, R] = xᵀ for x [R, C]. */
cq_status cq_op_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x);
/* Concatenate along columns: y [R, Ca+Cb] = [a | b]. (Row concatenation is
 * a copy into row views.) */
cq_status cq_op_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
/* y [n, C] = rows ids[i] of a weight/table W [V, C] (any codec), ids I32 [n].
 * An id outside [0, V) fails with CQ_ERR_BOUNDS (CPU) or is a deferred error
 * reported by cq_backend_sync (devices). */
cq_status cq_op_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids);
/* Column gather with an optional mean over groups of gathered columns:
 *   y[r, n] = scale * sum_{g < group} x[r, idx[n*group + g]]
 * x [R, K], y [R, N], idx I32 [N*group]; an index of -1 contributes zero (a
 * padded channel). group 1 with scale 1 is a channel permutation/selection;
 * group G with scale 1/G averages channel groups (the channel folding of
 * space-to-depth shortcuts). scale 0 means 1. Indices outside [-1, K) fail
 * with CQ_ERR_BOUNDS (CPU) or are a deferred error (devices). y must not
 * alias x. */
cq_status cq_op_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                            float scale);

/* ---- image ops (channels-last) ------------------------------------------ */
typedef enum cq_pad_mode { CQ_PAD_ZERO = 0, CQ_PAD_REPLICATE, CQ_PAD_REFLECT } cq_pad_mode;
/* y [Ho*Wo, Cout] = conv(x [H*W, Cin]) with weight [Cout, Cin, kh, kw] (any
 * codec, PyTorch layout; [Cout, Cin*kh*kw] is accepted too), bias [Cout]
 * optional, stride sx/sy, padding (left, right, top, bottom) in `mode`.
 * Ho = (H + pt + pb - kh) / sy + 1. REFLECT mirrors without repeating the
 * edge (PyTorch), so each pad must be smaller than the padded dimension. */
typedef struct cq_conv2d_args {
    cq_tensor *y;
    const cq_tensor *x;
    const cq_tensor *w;
    const cq_tensor *bias;
    int H, W;
    int kh, kw;
    int stride_y, stride_x;
    int pad_l, pad_r, pad_t, pad_b;
    cq_pad_mode mode;
} cq_conv2d_args;
cq_status cq_op_conv2d(cq_backend *be, const cq_conv2d_args *a);
/* Nearest-neighbour upsampling by integer factor f: [H*W, C] -> [fH*fW, C]. */
cq_status cq_op_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f);
/* Depth-to-space: [H*W, C*r*r] -> [rH*rW, C], PyTorch pixel_shuffle channel
 * order (input channel c*r*r + i*r + j goes to output (r*h+i, r*w+j), channel c). */
cq_status cq_op_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r);
/* Space-to-depth, the exact inverse of pixel_shuffle: [rH*rW, C] -> [H*W, C*r*r]
 * (H, W are the OUTPUT grid). */
cq_status cq_op_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r);

/* 3-D convolution of channels-last video: y [To*Ho*Wo, Cout] from x [T*H*W, Cin]
 * (frame-major, then row, then column), weight [Cout, Cin*kt*kh*kw] or
 * [Cout, Cin, kt*kh*kw] (any codec; PyTorch's [Cout, Cin, kt, kh, kw] flattened), bias [Cout] optional. Time is
 * padded by replicating the first frame pad_front times and the last frame
 * pad_back times (causal: pad_front = kt-1, pad_back = 0; the non-causal mode
 * of LTX's decoder: (kt-1)/2 each); space by (left, right, top, bottom) in
 * `mode`. To = (T + pad_front + pad_back - kt) / stride_t + 1, and so on. */
typedef struct cq_conv3d_args {
    cq_tensor *y;
    const cq_tensor *x;
    const cq_tensor *w;
    const cq_tensor *bias;
    int T, H, W;
    int kt, kh, kw;
    int stride_t, stride_y, stride_x;
    int pad_front, pad_back;
    int pad_l, pad_r, pad_t, pad_b;
    cq_pad_mode mode;
} cq_conv3d_args;
cq_status cq_op_conv3d(cq_backend *be, const cq_conv3d_args *a);
/* 3-D depth-to-space: x [T*H*W, C*pt*ph*pw] -> y [(pt*T)*(ph*H)*(pw*W), C].
 * Input channel ((c*pt + a)*ph + b)*pw + d of voxel (f, h, w) goes to output
 * voxel (pt*f + a, ph*h + b, pw*w + d), channel c (LTX's upsampler; with
 * pt = 1 it is pixel_shuffle's order for ph = pw). Dropping the first output
 * frame is a row view of y. */
cq_status cq_op_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph,
                                 int pw);
/* 1-D convolutions of channels-last signals x [L, Cin] -> y [Lo, Cout].
 * conv1d: weight [Cout, Cin/groups, k] (or [Cout, Cin/groups*k]), padding
 * pad_l/pad_r in `mode`, then stride and dilation:
 *   y[o, co] = bias[co] + sum_{ci in co's group, j} w[co, ci', j] x[o*stride + j*dilation - pad_l, ci],
 *   Lo = (L + pad_l + pad_r - dilation*(k-1) - 1) / stride + 1.
 * conv_transpose1d: weight [Cin, Cout/groups, k] (PyTorch's ConvTranspose1d
 * layout), dilation 1, mode ignored; pad_l/pad_r are the samples cropped from
 * each end of the full result (PyTorch's padding p with output_padding q is
 * pad_l = p, pad_r = p - q; both must be >= 0):
 *   y[o, co] = bias[co] + sum_{i*stride + j = o + pad_l} w[ci, co', j] x[i, ci],
 *   Lo = (L-1)*stride + k - pad_l - pad_r.
 * groups divides Cin and Cout; groups = Cin = Cout is a depthwise filter. */
typedef struct cq_conv1d_args {
    cq_tensor *y;
    const cq_tensor *x;
    const cq_tensor *w;
    const cq_tensor *bias;
    int k;
    int stride, dilation, groups;
    int pad_l, pad_r;
    cq_pad_mode mode;
} cq_conv1d_args;
cq_status cq_op_conv1d(cq_backend *be, const cq_conv1d_args *a);
cq_status cq_op_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a);
/* Snake activations over x [R, C] with per-channel alpha [C] and beta [C]:
 *   y = x + sin^2(a*x) / (b + eps), a = alpha, b = beta (beta NULL: b = alpha,
 *   plain Snake); with logscale a = exp(alpha), b = exp(beta) (BigVGAN-v2's
 *   SnakeBeta stores logs; eps 1e-9 there). y may be x itself. */
cq_status cq_op_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta,
                      bool logscale, float eps);

#endif /* CQ_OPS_H */
