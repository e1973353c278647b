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
    if (op == CQ_OP_MATMUL || op == CQ_OP_GET_ROWS || op == CQ_OP_CONV2D)
        return (unsigned)wdt < CQ_DTYPE_COUNT && cq_codec_can_decode(wdt);
    return true;
}

static void ref_destroy(cq_backend *be) { cq_free(be); }

static cq_status r_matmul(cq_backend *be, const cq_matmul_args *a) { return (void)be, cq_ref_matmul(a); }
static cq_status r_attention(cq_backend *be, const cq_attn_args *a) { return (void)be, cq_ref_attention(a); }
static cq_status r_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *s, const cq_tensor *sh,
                             float eps) {
    return (void)be, cq_ref_layernorm(y, x, s, sh, eps);
}
static cq_status r_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *b,
                           bool zc, float eps) {
    return (void)be, cq_ref_rmsnorm(y, x, w, b, zc, eps);
}
static cq_status r_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int g, const cq_tensor *ga,
                             const cq_tensor *bt, float eps) {
    return (void)be, cq_ref_groupnorm(y, x, g, ga, bt, eps);
}
static cq_status r_qk(cq_backend *be, cq_tensor *t, int nh, int hd, const cq_tensor *w, float eps, const cq_tensor *c,
                      const cq_tensor *s, cq_rope_mode m, int rd) {
    return (void)be, cq_ref_qk_norm_rope(t, nh, hd, w, eps, c, s, m, rd);
}
static cq_status r_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float al, float bt) {
    return (void)be, cq_ref_unary(y, x, fn, al, bt);
}
static cq_status r_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    return (void)be, cq_ref_binary(y, a, b, fn);
}
static cq_status r_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *g) {
    return (void)be, cq_ref_gated_add(y, x, g);
}
static cq_status r_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    return (void)be, cq_ref_swiglu(y, a, b);
}
static cq_status r_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float s) {
    return (void)be, cq_ref_softmax(y, x, s);
}
static cq_status r_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) { return (void)be, cq_ref_copy(y, x); }
static cq_status r_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    return (void)be, cq_ref_transpose(y, x);
}
static cq_status r_concat(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    return (void)be, cq_ref_concat_cols(y, a, b);
}
static cq_status r_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    return (void)be, cq_ref_get_rows(y, w, ids);
}
static cq_status r_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                               float scale) {
    return (void)be, cq_ref_gather_cols(y, x, idx, group, scale);
}
static cq_status r_conv2d(cq_backend *be, const cq_conv2d_args *a) { return (void)be, cq_ref_conv2d(a); }
static cq_status r_upsample(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    return (void)be, cq_ref_upsample_nearest(y, x, H, W, f);
}
static cq_status r_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    return (void)be, cq_ref_pixel_shuffle(y, x, H, W, r);
}
static cq_status r_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    return (void)be, cq_ref_pixel_unshuffle(y, x, H, W, r);
}

static const cq_backend_vtbl k_ref_vtbl = {
    .kind = "ref",
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
    .matmul = r_matmul,
    .attention = r_attention,
    .layernorm = r_layernorm,
    .rmsnorm = r_rmsnorm,
    .groupnorm = r_groupnorm,
    .qk_norm_rope = r_qk,
    .unary = r_unary,
    .binary = r_binary,
    .gated_add = r_gated_add,
    .swiglu = r_swiglu,
    .softmax = r_softmax,
    .copy = r_copy,
    .transpose = r_transpose,
    .concat_cols = r_concat,
    .get_rows = r_get_rows,
    .gather_cols = r_gather_cols,
    .conv2d = r_conv2d,
    .upsample_nearest = r_upsample,
    .pixel_shuffle = r_shuffle,
    .pixel_unshuffle = r_unshuffle,
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
