/*
 * cuda_ops.c — the CUDA backend's ops other than matmul: argument
 * marshalling from validated tensors (ops_front.c checked shapes, dtypes and
 * aliasing) to the kernel launchers, bracketed by op_begin/op_end for
 * sequence numbers, timing and launch errors.
 */
#include <math.h>

#include "backends/cuda/cuda_impl.h"

#define OP_BEGIN(opid)                \
    cq_cuda *c = cq_cuda_of(be);      \
    const cq_op op_ = (opid);         \
    cqk_ctx k = cq_cuda_op_begin(c, op_)
#define OP_END(launch, what) return cq_cuda_op_end(c, op_, (launch), (what))

static const float *fptr(const cq_tensor *t) { return t ? (const float *)cq_cuda_ptr(t) : NULL; }
static int kdt(const cq_tensor *t) { return cq_cuda_kdt(t->dtype); }

/* ---- attention ----------------------------------------------------------------------------- */
cq_status cq_cuda_attention(cq_backend *be, const cq_attn_args *a) {
    OP_BEGIN(CQ_OP_ATTENTION);
    if (a->head_dim > CQK_ATTN_GENERIC_MAX_D) {
        cq_cuda_op_end(c, op_, cudaSuccess, "");
        return cq_fail(CQ_ERR_UNSUPPORTED, "attention: head_dim %d on the cuda backend (it runs up to %d)", a->head_dim,
                       CQK_ATTN_GENERIC_MAX_D);
    }
    cqk_attn p = {
        .q = cq_cuda_ptr(a->q),
        .kp = a->k_prefix ? cq_cuda_ptr(a->k_prefix) : NULL,
        .vp = a->v_prefix ? cq_cuda_ptr(a->v_prefix) : NULL,
        .k = a->k ? cq_cuda_ptr(a->k) : NULL,
        .v = a->v ? cq_cuda_ptr(a->v) : NULL,
        .o = cq_cuda_ptr(a->o),
        .vis = a->vis ? (const int32_t *)cq_cuda_ptr(a->vis) : NULL,
        .vis_lo = a->vis_lo ? (const int32_t *)cq_cuda_ptr(a->vis_lo) : NULL,
        .dt = kdt(a->q),
        .Nq = cq_tensor_rows(a->q),
        .P = a->k_prefix ? cq_tensor_rows(a->k_prefix) : 0,
        .Nk = a->k ? cq_tensor_rows(a->k) : 0,
        .Hq = a->n_heads,
        .Hkv = a->n_kv_heads,
        .D = a->head_dim,
        /* as the reference: 1/sqrt(D) formed in double, used in f32 */
        .scale = a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->head_dim)),
        .causal = a->causal,
    };
    const bool d128 = a->head_dim == 128 && a->n_heads <= 65535;
    /* head_dims the mma.sync flash kernels take: 128, 80 (the Qwen2.5-VL vision tower's heads) and 64 (LTX-2's
     * audio heads and its audio<->video attention); the WMMA kernel 128 and 80. The wgmma kernel is 128 only, so
     * 80 and 64 take flash128w4 under auto and wgmma alike */
    const bool dflash = (a->head_dim == 128 || a->head_dim == 80 || a->head_dim == 64) && a->n_heads <= 65535;
    const bool dwmma = (a->head_dim == 128 || a->head_dim == 80) && a->n_heads <= 65535;
    /* Hopper: the wgmma kernel, 3 K/V stages where shared memory allows (auto and wgmma) */
    int stages90 = 0;
    if (d128 && (c->attn_mode == 0 || c->attn_mode == 6) && c->cc_major == 9 && c->cc_minor == 0)
        stages90 = c->smem_optin >= cqk_attention_flash90_smem(3) ? 3 : c->smem_optin >= cqk_attention_flash90_smem(2) ? 2 : 0;
    int shape = -1; /* cqk_flash_shape, or -1: no flash kernel */
    if (!stages90 && dflash && (c->attn_mode == 0 || c->attn_mode >= 3))
        /* auto off Hopper: 4 warps x 32 rows, measured fastest of these on an H200 (docs/PERFORMANCE.md) */
        shape = c->attn_mode == 4 ? CQK_FLASH_64 : c->attn_mode == 3 ? CQK_FLASH_128 : CQK_FLASH_128W4;
    /* a GPU with less shared memory per block than the shape needs takes the 64-query one, then the generic kernel */
    if (shape >= 0 && c->smem_optin < cqk_attention_flash_smem(shape, a->head_dim)) shape = CQK_FLASH_64;
    if (shape >= 0 && c->smem_optin < cqk_attention_flash_smem(shape, a->head_dim)) shape = -1;
    const bool flash = shape >= 0;
    const bool wmma = dwmma && c->attn_mode == 2 && c->smem_optin >= cqk_attention_wmma_smem(a->head_dim);
    cudaError_t e;
    const char *what = stages90                  ? "the wgmma kernel"
                       : !flash                  ? (wmma ? "the WMMA kernel" : "the generic kernel")
                       : shape == CQK_FLASH_64    ? "the flash kernel (64 queries per block)"
                       : shape == CQK_FLASH_128W4 ? "the flash kernel (128 queries, 4 warps)"
                                                  : "the flash kernel (128 queries, 8 warps)";
    if (stages90 || flash) { /* both pack K and V into scratch first */
        void *kv = NULL;
        const size_t need = stages90 ? cqk_attention_flash90_scratch(&p) : cqk_attention_flash_scratch(&p);
        cq_status s = cq_cuda_scratch(c, CQ_CUDA_SLOT_KV, need, &kv);
        if (s != CQ_OK) {
            cq_cuda_op_end(c, op_, cudaSuccess, "");
            return s;
        }
        e = stages90 ? cqk_attention_flash90(&k, &p, kv, stages90) : cqk_attention_flash(&k, &p, kv, shape);
    } else if (!wmma && a->head_dim > 256 && c->attn_mode != 1 && !p.vis && !p.vis_lo && !p.causal && !c->recording &&
               p.P + p.Nk > 0) {
        /* wide heads on the tensor cores (the generic kernel walks the keys one at a time: 59.6 ms for the VAE's
         * 1152-wide head over 4096 pixels) */
        cq_status s = cq_cuda_attention_gemm(c, &k, &p);
        e = s == CQ_OK && k.check ? cqk_check_finite(&k, p.o, p.dt, p.Nq, (int64_t)p.Hq * p.D, (int64_t)p.Hq * p.D)
                                  : cudaSuccess;
        cq_status s2 = cq_cuda_op_end(c, op_, e, "the non-finite check");
        return s != CQ_OK ? s : s2;
    } else {
        e = wmma ? cqk_attention_wmma(&k, &p) : cqk_attention_generic(&k, &p);
    }
    if (e == cudaSuccess && k.check) e = cqk_check_finite(&k, p.o, p.dt, p.Nq, (int64_t)p.Hq * p.D, (int64_t)p.Hq * p.D);
    OP_END(e, what);
}

/* ---- row ops -------------------------------------------------------------------------------- */
cq_status cq_cuda_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                            const cq_tensor *beta, float eps) {
    OP_BEGIN(CQ_OP_GROUPNORM);
    void *scratch = NULL;
    cq_status s = cq_cuda_scratch(c, CQ_CUDA_SLOT_ACC, cqk_groupnorm_scratch(groups), &scratch);
    if (s != CQ_OK) {
        cq_cuda_op_end(c, op_, cudaSuccess, "");
        return s;
    }
    cudaError_t e = cqk_groupnorm(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_rows(x), cq_tensor_cols(x), groups,
                                  fptr(gamma), fptr(beta), eps, scratch);
    OP_END(e, "the kernels");
}

cq_status cq_cuda_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block) {
    OP_BEGIN(CQ_OP_GROUP_MOMENTS);
    cudaError_t e = cqk_group_moments(&k, cq_cuda_ptr(m), cq_cuda_ptr(x), kdt(x), cq_tensor_rows(x), cq_tensor_cols(x),
                                      groups, block);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                            const cq_tensor *shift, float eps) {
    OP_BEGIN(CQ_OP_LAYERNORM);
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    /* f32 rows that a matmul will read next (the DiT's modulated LayerNorm feeds the q/k/v and MLP
     * projections): also written as that matmul would stage them, which spares it the staging pass */
    cqk_side side = {.ld = (C + 7) / 8 * 8};
    const size_t side_b = (size_t)R * (size_t)side.ld * 2, scale_b = (size_t)R * 4;
    /* not where the slots would have to grow inside a recording (which cannot allocate): the matmul stages */
    const bool with_side = c->side_copies && y->dtype == CQ_DTYPE_F32 && R > 0 && R <= 0x7fffffff &&
                           (!c->recording || (c->scratch_cap[CQ_CUDA_SLOT_X] >= side_b &&
                                              c->scratch_cap[CQ_CUDA_SLOT_XS] >= scale_b));
    if (with_side) {
        cq_status s = cq_cuda_scratch(c, CQ_CUDA_SLOT_X, side_b, (void **)&side.y);
        if (s == CQ_OK) s = cq_cuda_scratch(c, CQ_CUDA_SLOT_XS, scale_b, (void **)&side.scale);
        if (s != CQ_OK) {
            cq_cuda_op_end(c, op_, cudaSuccess, "");
            return s;
        }
    }
    int written = 0; /* the kernel writes the copy only for rows it keeps in registers */
    cudaError_t e = cqk_layernorm(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), R, C, fptr(scale), fptr(shift), eps,
                                  with_side ? &side : NULL, &written);
    if (e == cudaSuccess && written)
        cq_cuda_staged_set(c, cq_cuda_ptr(y), R, C, CQK_F32, side.y, side.ld, side.scale);
    if (e == cudaSuccess && k.check) e = cqk_check_finite(&k, cq_cuda_ptr(y), kdt(y), R, C, C);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                          bool zero_centered, float eps) {
    OP_BEGIN(CQ_OP_RMSNORM);
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    cudaError_t e = cqk_rmsnorm(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), R, C, fptr(w), fptr(bias), zero_centered, eps);
    if (e == cudaSuccess && k.check) e = cqk_check_finite(&k, cq_cuda_ptr(y), kdt(y), R, C, C);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                               const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim) {
    OP_BEGIN(CQ_OP_QK_NORM_ROPE);
    int64_t N = cq_tensor_rows(t);
    int rd = rope_dim ? rope_dim : head_dim;
    cudaError_t e = cqk_qk_norm_rope(&k, cq_cuda_ptr(t), kdt(t), N, n_heads, head_dim, fptr(w), eps, fptr(cos_t),
                                     fptr(sin_t), (int)mode, rd);
    if (e == cudaSuccess && k.check)
        e = cqk_check_finite(&k, cq_cuda_ptr(t), kdt(t), N, (int64_t)n_heads * head_dim, (int64_t)n_heads * head_dim);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale) {
    OP_BEGIN(CQ_OP_SOFTMAX);
    cudaError_t e = cqk_softmax(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_rows(x), cq_tensor_cols(x), scale);
    OP_END(e, "the kernel");
}

/* ---- element-wise --------------------------------------------------------------------------------- */
cq_status cq_cuda_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    OP_BEGIN(CQ_OP_UNARY);
    cudaError_t e = cqk_unary(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_nelem(x), (int)fn, alpha, beta);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    OP_BEGIN(CQ_OP_BINARY);
    int64_t n = cq_tensor_nelem(a);
    int bcast = cq_tensor_nelem(b) != n;
    cudaError_t e = cqk_binary(&k, cq_cuda_ptr(y), cq_cuda_ptr(a), cq_cuda_ptr(b), kdt(a), n, cq_tensor_cols(a), bcast,
                               (int)fn);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    OP_BEGIN(CQ_OP_GATED_ADD);
    cudaError_t e = cqk_gated_add(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_nelem(x), cq_tensor_cols(x),
                                  fptr(gate));
    OP_END(e, "the kernel");
}

cq_status cq_cuda_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    OP_BEGIN(CQ_OP_SWIGLU);
    cudaError_t e = cqk_swiglu(&k, cq_cuda_ptr(y), cq_cuda_ptr(a), b ? cq_cuda_ptr(b) : NULL, kdt(a), cq_tensor_rows(y),
                               cq_tensor_cols(y));
    OP_END(e, "the kernel");
}

/* ---- data movement -------------------------------------------------------------------------------- */
cq_status cq_cuda_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    OP_BEGIN(CQ_OP_COPY);
    const cq_cuda_weight *w = (x->flags & CQ_TENSOR_WEIGHT) ? x->impl : NULL;
    cudaError_t e;
    if (w && w->packed) /* a COMPACT weight: its plane's values, decoded straight into y */
        e = cqk_decode_rows_act(&k, w->codec, w->packed, w->rows, w->cols, c->exp2_lut, NULL, w->rows, cq_cuda_ptr(y),
                                kdt(y));
    else if (w && !w->raw) /* a weight kept as a plane, read back as an activation */
        e = cqk_plane_to_act(&k, cq_cuda_ptr(y), kdt(y), w->plane, w->ld, w->rowscale, w->rows, w->cols, w->taps);
    else /* an activation, or a 1-D weight whose payload is kept as it is */
        e = cqk_convert(&k, cq_cuda_ptr(y), kdt(y), cq_cuda_ptr(x), kdt(x), cq_tensor_nelem(x));
    OP_END(e, "the conversion");
}

cq_status cq_cuda_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    OP_BEGIN(CQ_OP_TRANSPOSE);
    cudaError_t e = cqk_transpose(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_rows(x), cq_tensor_cols(x));
    OP_END(e, "the kernel");
}

cq_status cq_cuda_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    OP_BEGIN(CQ_OP_CONCAT_COLS);
    cudaError_t e = cqk_concat_cols(&k, cq_cuda_ptr(y), cq_cuda_ptr(a), cq_cuda_ptr(b), kdt(a), cq_tensor_rows(a),
                                    cq_tensor_cols(a), cq_tensor_cols(b));
    OP_END(e, "the kernel");
}

cq_status cq_cuda_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    OP_BEGIN(CQ_OP_GET_ROWS);
    const int64_t V = w->shape[0], C = cq_tensor_cols(y), n = cq_tensor_rows(y);
    const void *src = cq_cuda_ptr(w);
    int wdt = kdt(w);
    int64_t ldw = C;
    const float *rs = NULL;
    if (w->flags & CQ_TENSOR_WEIGHT) {
        const cq_cuda_weight *cw = w->impl;
        if (!cw || (!cw->plane && !cw->packed) || cw->rows != V || cw->cols != C) {
            cq_cuda_op_end(c, op_, cudaSuccess, "");
            return cq_fail(CQ_ERR_INTERNAL, "get_rows: the table has no device plane of shape [%lld, %lld]", (long long)V,
                           (long long)C);
        }
        if (cw->taps > 1) {
            cq_cuda_op_end(c, op_, cudaSuccess, "");
            return cq_fail(CQ_ERR_UNSUPPORTED, "get_rows: the table is a convolution kernel [Cout, Cin, kh, kw] (its "
                                               "device plane is laid out for conv2d); bind it as a 2-D tensor");
        }
        if (cw->packed) { /* COMPACT: only the rows asked for, decoded straight into y (no plane, no slot) */
            cudaError_t e = cqk_decode_rows_act(&k, cw->codec, cw->packed, V, C, c->exp2_lut,
                                                (const int32_t *)cq_cuda_ptr(ids), n, cq_cuda_ptr(y), kdt(y));
            OP_END(e, "decoding the rows of a compact table");
        }
        src = cw->plane;
        wdt = CQK_F16;
        ldw = cw->ld;
        rs = cw->rowscale;
    }
    cudaError_t e =
        cqk_get_rows(&k, cq_cuda_ptr(y), kdt(y), src, wdt, V, C, ldw, rs, (const int32_t *)cq_cuda_ptr(ids), n);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                              float scale) {
    OP_BEGIN(CQ_OP_GATHER_COLS);
    cudaError_t e = cqk_gather_cols(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), cq_tensor_rows(x), cq_tensor_cols(x),
                                    cq_tensor_cols(y), (const int32_t *)cq_cuda_ptr(idx), group, scale);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f) {
    OP_BEGIN(CQ_OP_UPSAMPLE_NEAREST);
    cudaError_t e = cqk_upsample_nearest(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), H, W, cq_tensor_cols(x), f);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    OP_BEGIN(CQ_OP_PIXEL_SHUFFLE);
    cudaError_t e = cqk_pixel_shuffle(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), H, W, cq_tensor_cols(y), r, 0);
    OP_END(e, "the kernel");
}

cq_status cq_cuda_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    OP_BEGIN(CQ_OP_PIXEL_UNSHUFFLE);
    cudaError_t e = cqk_pixel_shuffle(&k, cq_cuda_ptr(y), cq_cuda_ptr(x), kdt(x), H, W, cq_tensor_cols(x), r, 1);
    OP_END(e, "the kernel");
}
