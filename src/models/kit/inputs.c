/*
 * inputs.c — the shared checks of `cortiq forward` input tensors (inputs.h).
 */
#include "models/kit/inputs.h"

#include "codec/codec.h"

cq_status cq_in_tensor(const cq_st *st, const char *name, int rank, bool required, uint64_t *dims,
                       const cq_st_tensor **out) {
    const cq_st_tensor *t = cq_st_find(st, name);
    *out = NULL;
    if (!t) return required ? cq_fail(CQ_ERR_MISSING, "input tensor '%s' is missing", name) : CQ_OK;
    const int off = t->ndim - rank;
    if (off == 1 && t->shape[0] != 1)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s': batch dimension is %llu; only a batch of 1 is supported", name,
                       (unsigned long long)t->shape[0]);
    if (off != 0 && off != 1)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' has %d dimensions, expected %d (or %d with a leading batch of 1)",
                       name, t->ndim, rank, rank + 1);
    for (int d = 0; d < rank; d++) dims[d] = t->shape[off + d];
    *out = t;
    return CQ_OK;
}

int64_t cq_in_int_at(const cq_st_tensor *t, uint64_t i) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case CQ_ST_I64: return (int64_t)cq_rd64(p + 8 * i);
    case CQ_ST_I32: return (int32_t)cq_rd32(p + 4 * i);
    default: return p[i]; /* U8, BOOL */
    }
}
