/*
 * ref_backend.c — the reference backend: host memory plus the ref.c ops,
 * single-threaded, every op in every activation dtype and every decodable
 * weight codec. The op tests use it as the oracle; CORTIQ_BACKEND=ref runs
 * a whole model on it for debugging.
 */
#include <stdio.h>
#include <string.h>

#include "codec/codec.h"
#include "ops/ref.h"

static bool ref_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt) {
    (void)be;
    bool fl = xdt == CQ_DTYPE_F32 || xdt == CQ_DTYPE_F16 || xdt == CQ_DTYPE_BF16;
    if (op == CQ_OP_COPY) return fl || xdt == CQ_DTYPE_I32;
    if (!fl) return false;
    if (op == CQ_OP_MATMUL || op == CQ_OP_GET_ROWS || op == CQ_OP_CONV2D || op == CQ_OP_CONV3D || op == CQ_OP_CONV1D ||
        op == CQ_OP_CONV_TRANSPOSE1D)
        return (unsigned)wdt < CQ_DTYPE_COUNT && cq_codec_can_decode(wdt);
    return true;
}

static void ref_destroy(cq_backend *be) { cq_free(be); }

/* cq_status r_<name>(cq_backend *be, ...) { return cq_ref_<name>(...); } for every op */
#define CQ_REF_WRAP_(E, name, P, A, u)                                                                                 \
    static cq_status r_##name CQ_OP_PARAMS_BE P {                                                                      \
        (void)be;                                                                                                      \
        return cq_ref_##name A;                                                                                        \
    }
CQ_OPS_LIST(CQ_REF_WRAP_, _)
#undef CQ_REF_WRAP_

static const cq_backend_vtbl k_ref_vtbl = {
    .kind = "ref",
    .is_host = true,
    .destroy = ref_destroy,
    .supports = ref_supports,
    .buf_alloc = cq_host_buf_alloc,
    .buf_free = cq_host_buf_free,
    .buf_upload = cq_host_buf_upload,
    .buf_download = cq_host_buf_download,
    .buf_zero = cq_host_buf_zero,
    .bind_weight = cq_host_bind_weight,
    .release_weight = NULL,
    .sync = cq_host_sync,
    CQ_OPS_VTBL(r_)
};

cq_status cq_backend_ref_create(cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_ref_create: out is NULL");
    *out = NULL;
    cq_backend *be = cq_calloc(1, sizeof *be);
    if (!be) return CQ_ERR_NOMEM;
    be->vt = &k_ref_vtbl;
    snprintf(be->name, sizeof be->name, "ref");
    be->act_dtype = CQ_DTYPE_F32;
    *out = be;
    return CQ_OK;
}
