/*
 * cuda_cost.h — the CUDA backend's device-memory arithmetic, host-only (no
 * CUDA headers), so the planner's figures can be tested without a GPU.
 *
 * The allocator (cuda_mem.c) hands out blocks of size_class(n) bytes, and
 * binding a weight (cuda_weights.c) allocates exactly the blocks that
 * cq_cuda_weight_plan lists; cq_backend_weight_cost answers with these
 * figures, so a plan made from them matches mem_in_use to the byte.
 */
#ifndef CQ_CUDA_COST_H
#define CQ_CUDA_COST_H

#include "ops/ops.h"

/* The block the allocator hands out for a request of n bytes (n = 0 counts as 1):
 * at least 512 bytes, else n rounded up to a quarter of the power of two below it. */
uint64_t cq_cuda_size_class(uint64_t n);

/* Whether the device decoders know codec dt (cq_cuda_codec_supported). */
bool cq_cuda_decodes(cq_dtype dt);

/* How a weight is kept on the device. */
typedef enum cq_cuda_wkind {
    CQ_CUDA_W_RAW = 0, /* a 1-D f32/f16/bf16 vector: the payload as it is */
    CQ_CUDA_W_PLANE,   /* an f16 plane with a scale per row (decoded at bind time) */
    CQ_CUDA_W_COMPACT, /* the payload in its codec, expanded into a slot before each use */
    CQ_CUDA_W_STREAMED, /* the payload in page-locked host memory, copied into a device slot and expanded there
                         * before each use */
} cq_cuda_wkind;

/* Device slots a STREAMED payload is copied into, used in turn: the copy of
 * one weight runs while the ops of the weights before it compute. */
#define CQ_CUDA_STREAM_SLOTS 4

typedef struct cq_cuda_wplan {
    cq_cuda_wkind kind;
    int64_t rows, cols, ld; /* the matrix view [rows = shape[0], cols = the rest], plane pitch ld */
    uint64_t plane_bytes;   /* rows * ld * 2: the f16 plane (held, or the slot it expands into) */
    uint64_t scale_bytes;   /* rows * 4: its row scales */
    uint64_t bytes;         /* device bytes held while bound (size classes included; STREAMED: 0) */
    uint64_t slot;          /* scratch bytes one use needs (COMPACT: plane + scales; STREAMED: that and
                             * CQ_CUDA_STREAM_SLOTS payload slots; else 0) */
    uint64_t host_bytes;    /* STREAMED: the page-locked host copy of the payload */
} cq_cuda_wplan;

/* The plan for binding view `v` in `mode` (DEFAULT = PLANES). COMPACT keeps
 * float codecs (f32/f16/bf16) as planes where the plane takes no more device
 * memory than the payload. STREAMED streams every matrix (any codec) and
 * keeps 1-D vectors as RAW. CQ_ERR_UNSUPPORTED for a codec the device does not
 * decode, CQ_ERR_SHAPE for a view without elements. */
cq_status cq_cuda_weight_plan(const cq_tensor_view *v, cq_weight_mode mode, cq_cuda_wplan *out);

#endif /* CQ_CUDA_COST_H */
