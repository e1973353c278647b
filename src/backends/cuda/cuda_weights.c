/*
 * cuda_weights.c — weights on the device.
 *
 * bind_weight uploads the raw CMF payload once (never a host-side f32 copy),
 * from the mapping through a pinned staging ring (cuda_upload.c: the host
 * copies into page-locked buffers, the DMA engine drains them asynchronously,
 * the same bytes arrive; a RAW or COMPACT payload goes to its own buffer the
 * same way), and decodes it on the device into an f16 plane with a power-of-two scale
 * per row (cuda_kernels.h): [rows = shape[0], cols = the rest], the row pitch
 * rounded up to 8 elements (16 bytes) and zero-padded, so every GEMM operand
 * meets cuBLASLt's preferred alignment. The decoders compute each f32 value
 * exactly as the codec layer does; the plane differs from it only by the one
 * rounding to f16 of the scaled value. 1-D f32/f16/bf16 weights (norm and
 * bias vectors, which models convert with cq_op_copy) are kept as they are.
 *
 * Why f16 with row scales and not bf16: the GEMMs' inputs are rounded to the
 * plane's format, and bf16's 8-bit mantissa costs about 1e-2 of max error /
 * RMS on the Qwen-Image-2.1 golden cases, f16's 11 bits about 2e-3 (measured
 * by emulating both roundings in the reference ops; docs/CUDA.md). The row
 * scale is the range guard: every row's absmax lands in [2^13, 2^14), so
 * nothing overflows f16's 65504 and small weights stay out of its
 * subnormals; the epilogue multiplies the scale back in f32 (exact).
 *
 * COMPACT weights (cq_backend_set_weight_mode) keep the payload in its codec
 * instead, one upload and no plane: about half a q8 plane's memory, a quarter
 * for q4. Before each use, the op expands the weight with the same decoder
 * into a scratch slot per operand (cq_cuda_weight_operand) and then runs as
 * with a bound plane, so its results are the PLANES mode's bit for bit; the
 * cost is one decode of the plane per use. get_rows and copy decode just the
 * rows they read, straight into their output. Float codecs stay planes in
 * COMPACT mode where the plane is no larger than the payload (f32); 1-D
 * vectors stay as they are. What each mode costs, to the byte, is
 * cq_cuda_weight_plan (cuda_cost.c), which binding follows.
 *
 * STREAMED weights (cuda_stream.c) keep the payload in page-locked host
 * memory and copy it into a device slot before each use, then expand it as
 * COMPACT ones; a share set by set_stream_keep is bound COMPACT instead.
 *
 * The q4tp decoder needs exp2f of f16 values exactly as the host's libm
 * computes them (the format defines its ladder through exp2f): the backend
 * builds that table once on the host (65536 entries) and uploads it.
 */
#include <math.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"
#include "codec/codec.h"
#include "format/cmf.h"

bool cq_cuda_codec_supported(cq_dtype dt) { return cq_cuda_decodes(dt); }

/* exp2f of every f16 bit pattern, on the device. */
static cq_status exp2_table(cq_cuda *c) {
    if (c->exp2_lut) return CQ_OK;
    float *h = cq_mallocn(65536, sizeof(float));
    if (!h) return CQ_ERR_NOMEM;
    for (uint32_t i = 0; i < 65536; i++) h[i] = exp2f(cq_f16_to_f32((uint16_t)i));
    void *d = NULL;
    cq_status s = cq_cuda_malloc(c, 65536 * sizeof(float), &d);
    if (s == CQ_OK) {
        /* on the backend's stream (the block may be a recycled one that queued
         * work still reads), and waited for: the host table is freed next */
        cudaError_t e = cudaMemcpyAsync(d, h, 65536 * sizeof(float), cudaMemcpyHostToDevice, c->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            s = cq_cuda_fail(e, "bind_weight", "uploading the q4tp exp2 table");
            cq_cuda_free(c, d);
            d = NULL;
        }
    }
    cq_free(h);
    c->exp2_lut = d;
    return s;
}

/* Upload a payload to the staging scratch (the copy is ordered after any
 * earlier decode that still reads the scratch: one stream), through the
 * pinned ring (cuda_upload.c). */
static cq_status stage_payload(cq_cuda *c, const cq_tensor_view *v, void **stage) {
    if (v->dtype == CQ_DTYPE_Q4TP) CQ_TRY(exp2_table(c));
    CQ_TRY(cq_cuda_scratch(c, CQ_CUDA_SLOT_STAGE, (size_t)v->nbytes, stage));
    return cq_cuda_upload(c, *stage, v->data, (size_t)v->nbytes);
}

static void weight_free(cq_cuda *c, cq_cuda_weight *w) {
    if (w->streamed) cq_cuda_stream_free_weight(c, w); /* packed is host memory */
    else cq_cuda_free(c, w->packed);
    cq_cuda_free(c, w->raw);
    cq_cuda_free(c, w->plane);
    cq_cuda_free(c, w->rowscale);
    cq_free(w);
}

static cq_status bind(cq_cuda *c, const cq_tensor_view *v, const cq_tensor *t, cq_cuda_weight *w,
                      cq_cuda_wkind kind) {
    if (kind == CQ_CUDA_W_RAW) {
        CQ_TRY(cq_cuda_malloc(c, (size_t)v->nbytes, &w->raw));
        return cq_cuda_upload(c, w->raw, v->data, (size_t)v->nbytes);
    }
    /* a convolution kernel: tap-major columns, so conv2d's receptive fields are whole input pixels in a row */
    const int taps = t->ndim == 4 ? (int)(t->shape[2] * t->shape[3]) : 1;
    if (kind == CQ_CUDA_W_STREAMED) { /* the payload in host memory, copied and expanded per use (cuda_stream.c) */
        if (v->dtype == CQ_DTYPE_Q4TP) CQ_TRY(exp2_table(c));
        w->taps = taps > 1 ? taps : 1;
        return cq_cuda_stream_bind(c, v, w);
    }
    if (kind == CQ_CUDA_W_COMPACT) { /* the payload as it is: expanded per use (cq_cuda_weight_operand) */
        if (v->dtype == CQ_DTYPE_Q4TP) CQ_TRY(exp2_table(c));
        CQ_TRY(cq_cuda_malloc(c, (size_t)v->nbytes, &w->packed));
        w->codec = (int)v->dtype;
        w->taps = taps > 1 ? taps : 1;
        return cq_cuda_upload(c, w->packed, v->data, (size_t)v->nbytes);
    }
    const size_t pb = (size_t)w->rows * (size_t)w->ld * 2, sb = (size_t)w->rows * 4;
    CQ_TRY(cq_cuda_malloc(c, pb, (void **)&w->plane));
    CQ_TRY(cq_cuda_malloc(c, sb, (void **)&w->rowscale));
    void *stage = NULL;
    CQ_TRY(stage_payload(c, v, &stage));
    cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_COPY);
    cudaError_t e = cqk_decode_weight(&k, (int)v->dtype, stage, w->rows, w->cols, w->plane, w->ld, w->rowscale,
                                      c->exp2_lut);
    CQ_TRY(cq_cuda_op_end(c, CQ_OP_COPY, e, "decoding the weight into its f16 plane"));
    if (taps <= 1) return CQ_OK;
    uint16_t *tp = NULL;
    CQ_TRY(cq_cuda_malloc(c, pb, (void **)&tp));
    k = cq_cuda_op_begin(c, CQ_OP_COPY);
    e = cqk_plane_taps_first(&k, tp, w->plane, w->rows, w->cols, w->ld, taps);
    cq_status s = cq_cuda_op_end(c, CQ_OP_COPY, e, "laying the convolution kernel out tap by tap");
    if (s != CQ_OK) {
        cq_cuda_free(c, tp);
        return s;
    }
    cq_cuda_free(c, w->plane); /* stream-ordered: the pool hands it out again only behind this work */
    w->plane = tp;
    w->taps = taps;
    return CQ_OK;
}

cq_status cq_cuda_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *t) {
    cq_cuda *c = cq_cuda_of(be);
    if (!cq_cuda_codec_supported(v->dtype))
        return cq_fail(CQ_ERR_UNSUPPORTED, "the cuda backend does not decode %s weights", cq_dtype_name(v->dtype));
    cq_cuda_wplan pl;
    CQ_TRY(cq_cuda_weight_plan(v, c->wmode, &pl));
    /* the share of the streamed matrices set_stream_keep keeps on the device, compact */
    if (pl.kind == CQ_CUDA_W_STREAMED) {
        cq_cuda_wplan compact;
        CQ_TRY(cq_cuda_weight_plan(v, CQ_WEIGHTS_COMPACT, &compact));
        if (cq_cuda_stream_keeps(c, compact.bytes)) pl = compact;
    }
    cq_cuda_weight *w = cq_calloc(1, sizeof *w);
    if (!w) return CQ_ERR_NOMEM;
    w->rows = pl.rows;
    w->taps = 1;
    w->cols = pl.cols;
    w->ld = pl.ld;
    w->bytes = pl.bytes; /* what the blocks bind allocates take, size classes included (cuda_cost.c) */
    cq_status s = bind(c, v, t, w, pl.kind);
    if (s != CQ_OK) {
        weight_free(c, w);
        t->base = NULL;
        return s;
    }
    t->base = w->raw ? w->raw : w->packed ? w->packed : (void *)w->plane;
    t->offset = 0;
    /* at least the payload's size: the front end checks a float weight read as
     * an activation (copy) against its shape; the plane is read through impl */
    size_t plane_bytes = w->plane ? (size_t)w->rows * (size_t)w->ld * 2 : 0;
    t->nbytes = CQ_MAX((size_t)v->nbytes, plane_bytes);
    t->impl = w;
    c->weight_bytes += w->bytes;
    return CQ_OK;
}

cq_status cq_cuda_bind_weight_hashing(cq_backend *be, const cq_tensor_view *v, cq_tensor *t, uint64_t *hash) {
    cq_cuda *c = cq_cuda_of(be);
    cq_cuda_ring *r = &c->ring;
    r->hashing = true;
    r->acc = 0;
    r->hashed = 0;
    cq_status s = cq_cuda_bind_weight(be, v, t);
    r->hashing = false;
    if (s != CQ_OK) return s;
    /* every kind copies the payload through the host exactly once; should one not, the source is hashed */
    if (r->hashed != (uint64_t)v->nbytes) r->acc = cq_hash64_fold(v->data, (uint64_t)v->nbytes / 8, 0);
    *hash = cq_hash64_folded(r->acc, v->data, (size_t)v->nbytes);
    return CQ_OK;
}

void cq_cuda_release_weight(cq_backend *be, cq_tensor *t) {
    /* views (reshapes) share the binding; only the bound tensor releases it */
    if (!t->impl || (t->flags & CQ_TENSOR_VIEW)) return;
    cq_cuda *c = cq_cuda_of(be);
    cq_cuda_weight *w = t->impl;
    c->weight_bytes -= w->bytes;
    weight_free(c, w);
    t->impl = NULL;
}

cq_status cq_cuda_weight_operand(cq_cuda *c, const cqk_ctx *k, const cq_cuda_weight *w, bool taps, cq_cuda_slot slot,
                                 cq_cuda_slot sslot, const uint16_t **plane, const float **rowscale) {
    if (!w->packed) {
        *plane = w->plane;
        *rowscale = w->rowscale;
        return CQ_OK;
    }
    void *p = NULL, *sc = NULL;
    CQ_TRY(cq_cuda_scratch(c, slot, (size_t)w->rows * (size_t)w->ld * 2, &p));
    CQ_TRY(cq_cuda_scratch(c, sslot, (size_t)w->rows * 4, &sc));
    const void *src = w->packed;
    int xslot = -1;
    if (w->streamed) CQ_TRY(cq_cuda_stream_fetch(c, w, &src, &xslot)); /* the payload into a device slot */
    cudaError_t e = cqk_decode_weight_taps(k, w->codec, (const uint8_t *)src, w->rows, w->cols, p, w->ld, sc, c->exp2_lut,
                                           taps ? w->taps : 1);
    if (e != cudaSuccess) return cq_cuda_fail(e, cq_op_name((cq_op)k->op), "expanding a compact weight into its plane");
    if (w->streamed) CQ_TRY(cq_cuda_stream_fetched(c, xslot));
    *plane = p;
    *rowscale = sc;
    return CQ_OK;
}

cq_status cq_cuda_set_weight_mode(cq_backend *be, cq_weight_mode mode) {
    cq_cuda_of(be)->wmode = mode == CQ_WEIGHTS_COMPACT || mode == CQ_WEIGHTS_STREAMED ? mode : CQ_WEIGHTS_PLANES;
    return CQ_OK;
}

cq_status cq_cuda_weight_cost(const cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, uint64_t *bytes,
                              uint64_t *slot) {
    (void)be;
    cq_cuda_wplan pl;
    CQ_TRY(cq_cuda_weight_plan(v, mode, &pl));
    *bytes = pl.bytes;
    *slot = pl.slot;
    return CQ_OK;
}

cq_status cq_cuda_decode_f32(cq_backend *be, const cq_tensor_view *v, float *out, size_t n) {
    if (!be || !v || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cuda_decode_f32: NULL argument");
    if (strcmp(be->vt->kind, "cuda") != 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_cuda_decode_f32: backend %s is not a cuda backend", be->name);
    if (!cq_cuda_codec_supported(v->dtype))
        return cq_fail(CQ_ERR_UNSUPPORTED, "the cuda backend does not decode %s weights", cq_dtype_name(v->dtype));
    if (v->ndim < 1 || v->nelem != n || !v->data)
        return cq_fail(CQ_ERR_SHAPE, "cq_cuda_decode_f32: want nelem = %zu and a payload", n);
    CQ_TRY(cq_cmf_check_tensor(v));
    CQ_TRY(cq_codec_validate(v->dtype, v->ndim, v->shape, v->data, v->nbytes));
    cq_cuda *c = cq_cuda_of(be);
    const int64_t rows = v->ndim >= 2 ? (int64_t)v->shape[0] : 1, cols = (int64_t)(n / (size_t)rows);
    void *d = NULL, *stage = NULL;
    CQ_TRY(cq_cuda_malloc(c, n * sizeof(float), &d));
    cq_status s = stage_payload(c, v, &stage);
    if (s == CQ_OK) {
        cqk_ctx k = cq_cuda_op_begin(c, CQ_OP_COPY);
        cudaError_t e = cqk_decode_weight_f32(&k, (int)v->dtype, stage, rows, cols, d, c->exp2_lut);
        s = cq_cuda_op_end(c, CQ_OP_COPY, e, "decoding the weight to f32");
    }
    if (s == CQ_OK) s = cq_cuda_buf_download(be, d, 0, out, n * sizeof(float));
    cq_cuda_free(c, d);
    return s;
}
