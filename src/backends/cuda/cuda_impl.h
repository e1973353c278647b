/*
 * cuda_impl.h — internals of the CUDA backend shared by its C files.
 *
 * Structure
 *  - cuda_backend.c: device choice, the vtable, supports(), sync with the
 *    deferred-error report, device listing, per-op timing.
 *  - cuda_mem.c: the caching allocator (cudaMalloc once, reuse after) under
 *    the device-memory budget, trim, host transfers, per-op scratch.
 *  - cuda_cost.c: size classes and weight costs (plain C, no CUDA: unit-tested
 *    without a GPU).
 *  - cuda_upload.c: weight payloads to the device through a pinned staging ring.
 *  - cuda_weights.c: weight binding (raw payload uploaded, decoded on the
 *    device into f16 planes, or kept in its codec and expanded per use),
 *    release, the q4tp exp2 table.
 *  - cuda_stream.c: STREAMED weights: page-locked host copies, copied into
 *    device slots on a copy stream before each use.
 *  - cuda_gemm.c: the matmul op: operand staging, the GEMMs, the epilogue kernel.
 *  - cuda_gemm_lt.c: cuBLASLt plans per shape, the algorithm chosen by timing.
 *  - cuda_lt_load.c: cuBLASLt opened at the first backend's creation, cq_lt.
 *  - cuda_ops.c: the other ops (argument marshalling to the kernels).
 *  - cuda_kernels.h + k_*.cu: the kernels.
 *
 * Execution model: one CUDA stream per backend for the ops (a second one
 * carries STREAMED weights' copies, ordered by events). Every op only enqueues
 * (kernel launches, cuBLASLt calls, async copies); nothing waits for the
 * device except sync, download and the allocator's out-of-memory retry.
 * Launch failures are returned by the op at once; failures found by kernels
 * (bad indices, non-finite outputs) land in one device status word and come
 * back from the next sync or download. After warm-up no op allocates
 * (scratch grows to the largest request and stays), so a whole denoiser
 * step can later be captured as a CUDA graph.
 */
#ifndef CQ_CUDA_IMPL_H
#define CQ_CUDA_IMPL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_cost.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda.h"
#include "ops/backend.h"

/* ---- cuBLASLt, loaded at run time (cuda_lt_load.c) ------------------------------------------
 * Nothing links cuBLASLt: its functions are called through cq_lt, one pointer
 * each, typed from cublasLt.h's own prototypes, so a call through the table is
 * checked like a direct call (and a direct call would not link). cq_lt is
 * filled once, by the first successful cq_cuda_lt_load(), and only read after
 * that; every caller sits behind a backend whose creation loaded it. */
#define CQ_CUBLASLT_FUNCS(X)                 \
    X(cublasLtGetVersion)                    \
    X(cublasLtGetStatusString)               \
    X(cublasLtCreate)                        \
    X(cublasLtDestroy)                       \
    X(cublasLtMatmul)                        \
    X(cublasLtMatmulAlgoConfigGetAttribute)  \
    X(cublasLtMatmulAlgoGetHeuristic)        \
    X(cublasLtMatmulDescCreate)              \
    X(cublasLtMatmulDescDestroy)             \
    X(cublasLtMatmulDescSetAttribute)        \
    X(cublasLtMatmulPreferenceCreate)        \
    X(cublasLtMatmulPreferenceDestroy)       \
    X(cublasLtMatmulPreferenceSetAttribute)  \
    X(cublasLtMatrixLayoutCreate)            \
    X(cublasLtMatrixLayoutDestroy)
typedef struct cq_cuda_lt_api {
#define CQ_CUBLASLT_MEMBER(f) __typeof__(&f) f;
    CQ_CUBLASLT_FUNCS(CQ_CUBLASLT_MEMBER)
#undef CQ_CUBLASLT_MEMBER
} cq_cuda_lt_api;
extern cq_cuda_lt_api cq_lt;
/* Load cuBLASLt (once per process; later calls return the first outcome).
 * CQ_ERR_UNSUPPORTED with a message saying which library could not be loaded
 * and why; on success *path (when not NULL) is the file loaded. */
cq_status cq_cuda_lt_load(const char **path);

/* ---- allocator --------------------------------------------------------------------- */
typedef struct cq_cuda_bucket { /* free blocks of one rounded size */
    size_t size;
    void **ptrs;
    int n, cap;
} cq_cuda_bucket;

typedef struct cq_cuda_live { /* hash slot: a handed-out block and its rounded size */
    void *ptr;
    size_t size;
} cq_cuda_live;

typedef struct cq_cuda_alloc {
    cq_cuda_bucket *buckets;
    int n_buckets, cap_buckets;
    cq_cuda_live *live; /* open addressing, power-of-two capacity; ptr NULL = empty, (void*)1 = deleted */
    size_t live_cap, live_n, live_used;
    uint64_t in_use, peak, cached, n_cuda_mallocs;
    double malloc_s; /* in cudaMalloc */
} cq_cuda_alloc;

/* Scratch kept across ops (grow-only), one per operand that can be live at once in an op. */
typedef enum cq_cuda_slot {
    CQ_CUDA_SLOT_X = 0, /* matmul: x staged as scaled f16 rows */
    CQ_CUDA_SLOT_W1,    /* matmul: an activation W staged likewise */
    CQ_CUDA_SLOT_W2,    /* matmul: an activation W2 staged likewise */
    CQ_CUDA_SLOT_XS,    /* their row scales */
    CQ_CUDA_SLOT_W1S,
    CQ_CUDA_SLOT_W2S,
    CQ_CUDA_SLOT_ACC,   /* matmul: f32 GEMM results before the epilogue */
    CQ_CUDA_SLOT_STAGE, /* weight binding: the raw payload */
    CQ_CUDA_SLOT_KV,    /* attention: keys and values packed as bf16 */
    CQ_CUDA_SLOT_WX0,   /* matmul: a COMPACT weight as x, expanded into its plane for one use */
    CQ_CUDA_SLOT_WX0S,  /* its row scales */
    CQ_CUDA_SLOT_WX1,   /* a COMPACT weight expanded likewise: matmul's w, conv2d's kernel */
    CQ_CUDA_SLOT_WX1S,  /* its row scales */
    CQ_CUDA_SLOT_WX2,   /* matmul: a COMPACT w2 (SwiGLU's up half) */
    CQ_CUDA_SLOT_WX2S,
    CQ_CUDA_SLOT_COUNT
} cq_cuda_slot;

/* ---- the pinned staging ring for weight uploads (cuda_upload.c) ---------------------------- */
#define CQ_CUDA_RING_N 4
#define CQ_CUDA_RING_BYTES ((size_t)64 << 20)
typedef struct cq_cuda_ring {
    void *buf[CQ_CUDA_RING_N];       /* cudaHostAlloc'd, CQ_CUDA_RING_BYTES each: host memory, not in the budget */
    cudaEvent_t ev[CQ_CUDA_RING_N];  /* recorded on the stream after the last copy out of buf[i] */
    bool queued[CQ_CUDA_RING_N];     /* ev[i] marks copies the host has not yet waited for */
    int cur;                         /* the buffer being filled */
    size_t fill;                     /* bytes of buf[cur] handed out (to queued copies) */
    cq_pool *pool;                   /* host copy threads; NULL: the calling thread alone */
    bool ready;                      /* made (at the first upload) */
    bool failed;                     /* could not be made: uploads go from the mapping directly */
    /* the hash of what the copies move (bind_weight_hashing): while `hashing`, each payload copy folds its
     * whole words into `acc` (cq_hash64_fold, word 0 at the payload's first byte) */
    bool hashing;
    uint64_t acc;
    uint64_t hashed; /* bytes folded into acc */
    /* what the uploads cost the host (cq_backend_stats) */
    uint64_t bytes;  /* payload bytes uploaded or copied to pinned memory */
    double copy_s;   /* in the host copies (and the hash they fold) */
    double wait_s;   /* waiting for a staging buffer: the bus and the device behind the host */
} cq_cuda_ring;

/* ---- STREAMED weights (cuda_stream.c) ------------------------------------------------------ */
typedef struct cq_cuda_xfer {
    cudaStream_t stream;                      /* the copy stream, made at the first streamed use */
    void *slot[CQ_CUDA_STREAM_SLOTS];         /* device buffers of `cap` bytes, used in turn */
    size_t cap;
    cudaEvent_t ready[CQ_CUDA_STREAM_SLOTS];  /* on the copy stream: slot i holds its payload */
    cudaEvent_t done[CQ_CUDA_STREAM_SLOTS];   /* on the compute stream: the last read of slot i is over */
    int next;
    uint64_t keep, of, kept, seen;            /* cq_backend_set_stream_keep's share and what binding did */
    uint64_t bytes;                           /* copied so far (cq_backend_stats.streamed_bytes) */
    double pin_s;                             /* in cudaHostAlloc / cudaFreeHost for them (cq_backend_stats) */
    uint64_t pinned;                          /* page-locked host bytes held by bound STREAMED weights */
    int n_bound;                              /* STREAMED weights bound now */
} cq_cuda_xfer;

/* ---- cuBLASLt plans (cuda_gemm_lt.c) ------------------------------------------------------ */
typedef struct cq_cuda_plan {
    int64_t M, N, K, lda, ldb, ldd;
    int ddt;          /* CQK_F32 or CQK_BF16 */
    int beta_nonzero;
    unsigned align;   /* min alignment (bytes) of A, B, D: part of the key */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo; /* the one algorithm this plan runs, for good */
    size_t ws_needed;
    int ok;           /* 0: cuBLASLt has no algorithm; use the SIMT kernel */
    uint64_t last_use;
} cq_cuda_plan;
#define CQ_CUDA_PLANS 128
/* Algorithm choice by timing (CORTIQ_CUDA_GEMM_TUNE): candidates asked of the
 * heuristic, timed runs of each after one warm-up, and their events. */
#define CQ_CUDA_TUNE_ALGOS 8
#define CQ_CUDA_TUNE_RUNS 3
#define CQ_CUDA_TUNE_EVENTS (2 * CQ_CUDA_TUNE_ALGOS * CQ_CUDA_TUNE_RUNS)

/* One GEMM: D [M, N] (pitch ldd, CQK_F32 or CQK_BF16) = alpha · B Aᵀ + beta · D
 * with A [N, K] (pitch lda) and B [M, K] (pitch ldb) f16. */
typedef struct cq_cuda_gemm_call {
    const uint16_t *A, *B;
    void *D;
    int64_t lda, ldb, ldd, M, N, K;
    int ddt;
    float alpha, beta;
} cq_cuda_gemm_call;

/* ---- per-op timing (CORTIQ_CUDA_PROFILE=1) ----------------------------------------------- */
#define CQ_CUDA_PROF_EVENTS 4096
typedef struct cq_cuda_prof {
    bool on;
    cudaEvent_t *ev; /* pairs: ev[2i] before op i, ev[2i+1] after */
    int *op;         /* cq_op of pair i */
    int n;           /* pairs recorded since the last flush */
    double ms[CQ_OP_COUNT];
    long calls[CQ_OP_COUNT];
} cq_cuda_prof;

/* ---- the backend ----------------------------------------------------------------------- */
typedef struct cq_cuda {
    cq_backend base; /* first: a cq_backend* is a cq_cuda* */
    int device;
    char dev_name[256];
    int cc_major, cc_minor, sm_count;
    size_t smem_optin;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_size;
    cqk_status *dstatus; /* device status word */
    cqk_status *hstatus; /* pinned host copy */
    unsigned seq;        /* ops issued since the last sync */
    unsigned char op_log[256]; /* cq_op of the last ops, by seq % 256, for messages */
    cq_cuda_alloc mem;
    void *scratch[CQ_CUDA_SLOT_COUNT];
    size_t scratch_cap[CQ_CUDA_SLOT_COUNT];
    float *exp2_lut;     /* device [65536], made at the first q4tp weight */
    cq_cuda_ring ring;   /* pinned staging for weight uploads, made at the first one */
    uint64_t weight_bytes; /* device bytes of the bound weights (size classes included) */
    uint64_t mem_budget;   /* the most in_use + cached may reach (cq_cuda_opts.mem_budget or the default) */
    cq_weight_mode wmode;  /* how weights bound next are kept: PLANES, COMPACT or STREAMED (set_weight_mode) */
    cq_cuda_xfer xfer;     /* STREAMED weights' copy stream and slots */
    cq_cuda_plan plans[CQ_CUDA_PLANS];
    uint64_t plan_clock;
    cudaEvent_t tune_ev[CQ_CUDA_TUNE_EVENTS]; /* made at the first algorithm timing */
    /* knobs read from the environment at creation (docs/CUDA.md) */
    int check;           /* CORTIQ_CUDA_CHECK: 0 off, 1 matmul outputs (default), 2 every op's output */
    int gemm_mode;       /* CORTIQ_CUDA_GEMM: 0 auto = on compute capability 9.0 SwiGLU matmuls on k_gemm90.cu,
                            the rest on cuBLASLt and the epilogue kernel; 1 the CUDA-core kernel only, 2 wgmma:
                            every matmul on k_gemm90.cu on 9.0, 3 cublaslt: every matmul on cuBLASLt */
    bool gemm_tune;      /* CORTIQ_CUDA_GEMM_TUNE (default 0): a new plan times the heuristic's candidates */
    int attn_mode;       /* CORTIQ_CUDA_ATTN: 0 auto (6 on compute capability 9.0, else 5), 1 generic kernel
                            only, 2 the WMMA kernel, 3 flash128, 4 flash64, 5 flash128w4 (block shapes of
                            k_flash.cu, head_dim 128 and 80), 6 wgmma (k_flash90.cu, head_dim 128; 5 where it
                            cannot run); head_dims none of these take go to the generic kernel */
    bool sync_each_op;   /* CORTIQ_CUDA_SYNC=1: wait after every op (pins a device fault on its op) */
    bool graphs;         /* CORTIQ_CUDA_GRAPH (default 1): recordings allowed (cuda_graph.c) */
    /* recordings */
    bool recording;      /* the stream is being captured */
    unsigned rec_seq0;   /* seq when the capture began */
    unsigned scratch_gen; /* bumped whenever a scratch slot is replaced by a bigger buffer */
    /* a staged matmul input (cuda_gemm.c): the scaled f16 rows of `src` (p, ld, scale) in the x slots, reused
     * by the next matmul of the same x until anything may have written it. Written by a matmul's staging (the
     * 7B step's k, v and q projections share one), or by the LayerNorm that produced src, as a side copy that
     * spares the matmul the staging pass */
    struct {
        const void *src;
        int64_t rows, cols;
        int dt;
        unsigned gen;
        bool valid;
        const uint16_t *p;
        int64_t ld;
        const float *scale;
    } staged_x;
    bool side_copies;    /* CORTIQ_CUDA_SIDE (default 1): LayerNorm writes that side copy of an f32 output */
    uint64_t staged_reuses; /* matmul inputs taken from staged_x (cq_backend_stats) */
    uint64_t replays;    /* recordings replayed (cq_backend_stats) */
    cq_cuda_prof prof;
} cq_cuda;

static inline cq_cuda *cq_cuda_of(cq_backend *be) { return (cq_cuda *)be; }

/* Device address of element 0 of a tensor. */
static inline void *cq_cuda_ptr(const cq_tensor *t) { return (char *)t->base + t->offset; }

/* CQK_F32/F16/BF16/I32 for an activation dtype; -1 otherwise. */
int cq_cuda_kdt(cq_dtype dt);

/* ---- errors ------------------------------------------------------------------------------ */
/* CUDA runtime failure -> cq_status with a message naming the op and the call. */
cq_status cq_cuda_fail(cudaError_t e, const char *op, const char *what);
#define CQ_CUDA_TRY(call, op, what)                                   \
    do {                                                              \
        cudaError_t cq__e = (call);                                   \
        if (cq__e != cudaSuccess) return cq_cuda_fail(cq__e, op, what); \
    } while (0)

/* ---- op bracketing: sequence numbers, the launch context, timing ---------------------------- */
/* Begin an op: returns the context every launcher takes. */
cqk_ctx cq_cuda_op_begin(cq_cuda *c, cq_op op);
/* End an op: records timing; with CORTIQ_CUDA_SYNC waits and reports a device fault at this op. */
cq_status cq_cuda_op_end(cq_cuda *c, cq_op op, cudaError_t launch, const char *what);

/* ---- memory (cuda_mem.c) ---------------------------------------------------------------------- */
cq_status cq_cuda_malloc(cq_cuda *c, size_t nbytes, void **out);
void cq_cuda_free(cq_cuda *c, void *p);
void cq_cuda_alloc_destroy(cq_cuda *c); /* after a device sync */
/* Scratch of at least `bytes` for `slot`, kept until trim or the backend is destroyed. */
cq_status cq_cuda_scratch(cq_cuda *c, cq_cuda_slot slot, size_t bytes, void **out);
/* Every cached block and scratch slot back to the driver, after the queued work (the trim entry). */
cq_status cq_cuda_trim(cq_backend *be);
/* Record src's staged rows (in scratch) for the next matmul whose x is src (cuda_gemm.c). */
void cq_cuda_staged_set(cq_cuda *c, const void *src, int64_t rows, int64_t cols, int dt, const void *p, int64_t ld,
                        const void *scale);

cq_status cq_cuda_buf_alloc(cq_backend *be, size_t nbytes, void **base);
void cq_cuda_buf_free(cq_backend *be, void *base);
cq_status cq_cuda_buf_upload(cq_backend *be, void *base, size_t offset, const void *src, size_t n);
cq_status cq_cuda_buf_download(cq_backend *be, const void *base, size_t offset, void *dst, size_t n);
cq_status cq_cuda_buf_zero(cq_backend *be, void *base, size_t offset, size_t n);

/* ---- weights (cuda_weights.c) -------------------------------------------------------------------- */
/* A bound weight (t->impl). 1-D f32/f16/bf16 weights (per-channel vectors,
 * which models read with cq_op_copy) keep the payload as it is in `raw`.
 * Everything else is a plane: f16 [rows = shape[0], ld >= cols = the rest]
 * with row r scaled by 2^e_r and rowscale[r] = 2^-e_r (cuda_kernels.h), used
 * by GEMMs, get_rows and copy; or, bound COMPACT, the payload in its codec in
 * `packed` (plane and rowscale NULL), expanded into that same plane in a
 * scratch slot before each use (cq_cuda_weight_operand). */
typedef struct cq_cuda_weight {
    void *raw;
    uint16_t *plane;
    float *rowscale;
    void *packed; /* COMPACT: the raw CMF payload of codec `codec`; STREAMED: its page-locked host copy (mapped:
                   * get_rows and copy read their rows from there) */
    bool streamed; /* `packed` is host memory: copied into a device slot before each use (cuda_stream.c) */
    void *host;    /* STREAMED: the cudaHostAlloc'd copy (`packed` is its device address) */
    size_t payload; /* STREAMED: its bytes */
    int codec;
    int64_t rows, cols, ld;
    int taps; /* > 1: a convolution kernel [Cout, Cin, kh, kw] whose plane is tap-major (kh*kw taps); else 1 */
    uint64_t bytes;
} cq_cuda_weight;
bool cq_cuda_codec_supported(cq_dtype dt);
/* Enqueue the copy of n host bytes (a weight's payload, in the mapping) to device memory on the stream,
 * through the pinned staging ring (cuda_upload.c); when it returns, src has been read in full. Refused
 * while recording. */
cq_status cq_cuda_upload(cq_cuda *c, void *dst, const void *src, size_t n);
void cq_cuda_ring_destroy(cq_cuda *c); /* after a stream sync */
/* Copy n bytes host to host with the ring's copy threads (one thread when it has none). */
void cq_cuda_host_copy(cq_cuda *c, void *dst, const void *src, size_t n);
cq_status cq_cuda_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *t);
/* bind_weight that returns the payload's hash64 folded during its host copy (cq_backend_vtbl) */
cq_status cq_cuda_bind_weight_hashing(cq_backend *be, const cq_tensor_view *v, cq_tensor *t, uint64_t *hash);
/* A weight's plane for one use by an op: the bound plane, or a COMPACT weight
 * expanded into `slot` and `sslot` (tap-major when `taps`, as a bound
 * convolution kernel's plane is) by the bind-time decoder, so the bits are the
 * same. Enqueued on the op's stream; recordable once the slots have grown. */
cq_status cq_cuda_weight_operand(cq_cuda *c, const cqk_ctx *k, const cq_cuda_weight *w, bool taps, cq_cuda_slot slot,
                                 cq_cuda_slot sslot, const uint16_t **plane, const float **rowscale);
/* STREAMED weights (cuda_stream.c). Bind: the payload into page-locked mapped host memory (w->packed). Fetch:
 * enqueue its copy into the next device slot on the copy stream and make the compute stream wait for it; *dev
 * is the slot. Fetched: record that the compute stream's reads of that slot are enqueued (the slot's reuse waits
 * for them). Free: the host copy, after the device is done with it. */
cq_status cq_cuda_stream_bind(cq_cuda *c, const cq_tensor_view *v, cq_cuda_weight *w);
cq_status cq_cuda_stream_fetch(cq_cuda *c, const cq_cuda_weight *w, const void **dev, int *slot);
cq_status cq_cuda_stream_fetched(cq_cuda *c, int slot);
void cq_cuda_stream_free_weight(cq_cuda *c, cq_cuda_weight *w);
/* Should the next STREAMED weight of `compact` COMPACT bytes stay on the device (set_stream_keep's share)? */
bool cq_cuda_stream_keeps(cq_cuda *c, uint64_t compact);
void cq_cuda_stream_release_slots(cq_cuda *c); /* after both streams are idle (trim) */
void cq_cuda_stream_destroy(cq_cuda *c);       /* after both streams are idle */
cq_status cq_cuda_set_stream_keep(cq_backend *be, uint64_t keep, uint64_t of);
/* ops.h's weight modes and costs (the vtable entries) */
cq_status cq_cuda_set_weight_mode(cq_backend *be, cq_weight_mode mode);
cq_status cq_cuda_weight_cost(const cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, uint64_t *bytes,
                              uint64_t *slot);
void cq_cuda_release_weight(cq_backend *be, cq_tensor *t);

/* ---- sync (cuda_backend.c) -------------------------------------------------------------------- */
cq_status cq_cuda_sync(cq_backend *be);

/* ---- ops ---------------------------------------------------------------------------------------- */
/* cq_status cq_cuda_<name>(cq_backend *be, ...) for every op of ops_list.h */
CQ_OPS_DECLARE(cq_cuda_)
/* The GEMM on cuBLASLt with the shape's cached plan (made, and its algorithm
 * timed, at the shape's first call); *done = false when cuBLASLt has no
 * algorithm for it and the caller must use the CUDA-core kernel. */
cq_status cq_cuda_lt_gemm(cq_cuda *c, const cq_cuda_gemm_call *g, bool *done);
/* A convolution as conv2d runs (cuda_gemm.c): y [M, Cout] = the implicit matrix g (M rows, Cin * taps columns)
 * times the kernel wt [Cout, Cin * taps] (PyTorch's column order: a 2-D or 3-D weight of any codec, or an
 * activation) plus bias, in bands of rows, on f16 operands with row scales. conv3d and one-group conv1d. */
cq_status cq_cuda_conv_gemm(cq_cuda *c, const cqk_ctx *k, const char *op, const cq_tensor *wt, const cq_tensor *bias,
                            cq_tensor *y, const cqk_im2col *g, int64_t M, int64_t Cout, int taps);
void cq_cuda_plans_destroy(cq_cuda *c); /* and the timing events; after a stream sync */
/* Attention as GEMMs (cuda_gemm.c): per head, the scores by cuBLASLt, softmax, the output by cuBLASLt, in bands of
 * queries; for heads wider than the flash kernels take (the VAE's single head over all its channels), without a
 * visibility rule (no vis, not causal) and outside recordings (it sizes scratch buffers). */
cq_status cq_cuda_attention_gemm(cq_cuda *c, const cqk_ctx *k, const cqk_attn *a);
/* recordings (cuda_graph.c) */
bool cq_cuda_can_record(const cq_backend *be);
cq_status cq_cuda_record_begin(cq_backend *be);
cq_status cq_cuda_record_end(cq_backend *be, bool keep, void **handle);
cq_status cq_cuda_replay(cq_backend *be, void *handle);
void cq_cuda_record_free(cq_backend *be, void *handle);
/* what a recording refuses: `what` names the call */
cq_status cq_cuda_not_while_recording(const char *what);

#endif /* CQ_CUDA_IMPL_H */
