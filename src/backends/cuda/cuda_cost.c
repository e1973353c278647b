/*
 * cuda_cost.c — the CUDA backend's size classes and what a weight costs in
 * each mode (cuda_cost.h). Plain C with no CUDA dependency: the library
 * builds it in every configuration, so tests/unit/test_cuda_cost.c checks the
 * arithmetic on machines without a GPU.
 */
#include "backends/cuda/cuda_cost.h"

uint64_t cq_cuda_size_class(uint64_t n) {
    if (n <= 512) return 512;
    /* round up to a multiple of 1/4 of the power of two below n, at most 2 MiB (the driver's own page
     * for large allocations): a big weight then wastes under 2 MiB, not up to a quarter of itself */
    int lg = 63 - __builtin_clzll((unsigned long long)(n - 1));
    uint64_t q = (uint64_t)1 << (lg >= 2 ? lg - 2 : 0);
    if (q > ((uint64_t)2 << 20)) q = (uint64_t)2 << 20;
    return (n + q - 1) / q * q;
}

static bool is_float_codec(cq_dtype dt) { return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16; }

bool cq_cuda_decodes(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F32:
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16:
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F:
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED:
    case CQ_DTYPE_Q4TP: return true;
    default: return false;
    }
}

cq_status cq_cuda_weight_plan(const cq_tensor_view *v, cq_weight_mode mode, cq_cuda_wplan *out) {
    if (!v || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cuda_weight_plan: NULL argument");
    if (!cq_cuda_decodes(v->dtype))
        return cq_fail(CQ_ERR_UNSUPPORTED, "the cuda backend does not decode %s weights", cq_dtype_name(v->dtype));
    if (v->ndim < 1 || v->nelem == 0 || (v->ndim >= 2 && v->shape[0] == 0))
        return cq_fail(CQ_ERR_SHAPE, "cq_cuda_weight_plan: a weight of %d dims and %llu elements", v->ndim,
                       (unsigned long long)v->nelem);
    *out = (cq_cuda_wplan){0};
    out->rows = v->ndim >= 2 ? (int64_t)v->shape[0] : 1;
    out->cols = (int64_t)(v->nelem / (uint64_t)out->rows);
    out->ld = (out->cols + 7) / 8 * 8;
    out->plane_bytes = (uint64_t)out->rows * (uint64_t)out->ld * 2;
    out->scale_bytes = (uint64_t)out->rows * 4;
    const uint64_t raw = cq_cuda_size_class(v->nbytes),
                   plane = cq_cuda_size_class(out->plane_bytes) + cq_cuda_size_class(out->scale_bytes);
    if (v->ndim == 1 && is_float_codec(v->dtype)) {
        out->kind = CQ_CUDA_W_RAW;
        out->bytes = raw;
    } else if (mode == CQ_WEIGHTS_STREAMED) {
        out->kind = CQ_CUDA_W_STREAMED;
        out->bytes = 0;
        out->host_bytes = v->nbytes;
        out->slot = plane + CQ_CUDA_STREAM_SLOTS * raw;
    } else if (mode == CQ_WEIGHTS_COMPACT && !(is_float_codec(v->dtype) && plane <= raw)) {
        out->kind = CQ_CUDA_W_COMPACT;
        out->bytes = raw;
        out->slot = plane; /* the slot's two blocks are allocated like the plane's */
    } else {
        out->kind = CQ_CUDA_W_PLANE;
        out->bytes = plane;
    }
    return CQ_OK;
}
