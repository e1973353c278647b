/*
 * eltwise_generic.c — elementwise and data-movement ops of the CPU backend:
 * unary/binary/gated add/SwiGLU (f32), copy with dtype conversion, transpose,
 * column concatenation, row gathers from weights in any supported codec and
 * column gathers (with group means) of activations.
 * Threaded over flat ranges or rows; loops are kept simple enough for the
 * compiler to vectorise.
 */
#include "backends/cpu/cpu_impl.h"

typedef struct ew_ctx {
    float *y;
    const float *a, *b, *g;
    int64_t C, n, nb;
    int fn;
    float alpha, beta;
} ew_ctx;

static void unary_range(void *vc, int slot, int64_t i0, int64_t i1) {
    (void)slot;
    const ew_ctx *c = vc;
    const float *x = c->a;
    float *y = c->y, al = c->alpha, be = c->beta;
    switch ((cq_unary)c->fn) {
    case CQ_UNARY_SILU: for (int64_t i = i0; i < i1; i++) y[i] = cq_cpu_silu(x[i]); break;
    case CQ_UNARY_GELU_TANH: for (int64_t i = i0; i < i1; i++) y[i] = cq_cpu_gelu_tanh(x[i]); break;
    case CQ_UNARY_GELU_ERF:
        for (int64_t i = i0; i < i1; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
        break;
    case CQ_UNARY_TANH: for (int64_t i = i0; i < i1; i++) y[i] = tanhf(x[i]); break;
    case CQ_UNARY_SIGMOID: for (int64_t i = i0; i < i1; i++) y[i] = 1.0f / (1.0f + expf(-x[i])); break;
    case CQ_UNARY_NEG: for (int64_t i = i0; i < i1; i++) y[i] = -x[i]; break;
    case CQ_UNARY_EXP: for (int64_t i = i0; i < i1; i++) y[i] = expf(x[i]); break;
    case CQ_UNARY_SCALE: for (int64_t i = i0; i < i1; i++) y[i] = x[i] * al; break;
    case CQ_UNARY_ADD_SCALAR: for (int64_t i = i0; i < i1; i++) y[i] = x[i] + al; break;
    case CQ_UNARY_CLAMP: for (int64_t i = i0; i < i1; i++) y[i] = fminf(fmaxf(x[i], al), be); break;
    case CQ_UNARY_LOG: for (int64_t i = i0; i < i1; i++) y[i] = logf(fmaxf(x[i], al)); break;
    case CQ_UNARY_SQRT: for (int64_t i = i0; i < i1; i++) y[i] = sqrtf(fmaxf(x[i], 0.0f)); break;
    default: break;
    }
}

cq_status cq_cpu_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    ew_ctx c = {.y = cq_host_ptr(y), .a = cq_host_ptr(x), .fn = fn, .alpha = alpha, .beta = beta};
    int64_t n = cq_tensor_nelem(x);
    cq_cpu_parallel(cb, n, cq_cpu_grain(cb, n, 8), unary_range, &c);
    return CQ_OK;
}

static void binary_range(void *vc, int slot, int64_t i0, int64_t i1) {
    (void)slot;
    const ew_ctx *c = vc;
    for (int64_t i = i0; i < i1; i++) {
        float u = c->a[i], v = c->b[c->nb == c->n ? i : i % c->C];
        switch ((cq_binary)c->fn) {
        case CQ_BINARY_ADD: c->y[i] = u + v; break;
        case CQ_BINARY_SUB: c->y[i] = u - v; break;
        case CQ_BINARY_MUL: c->y[i] = u * v; break;
        default: c->y[i] = u / v; break;
        }
    }
}

cq_status cq_cpu_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    ew_ctx c = {.y = cq_host_ptr(y), .a = cq_host_ptr(a), .b = cq_host_ptr(b), .fn = fn};
    c.n = cq_tensor_nelem(a);
    c.nb = cq_tensor_nelem(b);
    c.C = cq_tensor_cols(a);
    cq_cpu_parallel(cb, c.n, cq_cpu_grain(cb, c.n, 2), binary_range, &c);
    return CQ_OK;
}

static void gated_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const ew_ctx *c = vc;
    for (int64_t r = r0; r < r1; r++) {
        float *y = c->y + r * c->C;
        const float *x = c->a + r * c->C;
        if (c->g)
            for (int64_t i = 0; i < c->C; i++) y[i] += c->g[i] * x[i];
        else
            for (int64_t i = 0; i < c->C; i++) y[i] += x[i];
    }
}

cq_status cq_cpu_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    ew_ctx c = {.y = cq_host_ptr(y), .a = cq_host_ptr(x), .g = gate ? cq_host_ptr(gate) : NULL, .C = cq_tensor_cols(x)};
    int64_t R = cq_tensor_rows(x);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 2 * c.C), gated_rows, &c);
    return CQ_OK;
}

static void swiglu_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const ew_ctx *c = vc;
    int64_t F = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *g = c->b ? c->a + r * F : c->a + r * 2 * F;
        const float *u = c->b ? c->b + r * F : g + F;
        float *y = c->y + r * F;
        for (int64_t i = 0; i < F; i++) y[i] = cq_cpu_silu(g[i]) * u[i];
    }
}

cq_status cq_cpu_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    ew_ctx c = {.y = cq_host_ptr(y), .a = cq_host_ptr(a), .b = b ? cq_host_ptr(b) : NULL, .C = cq_tensor_cols(y)};
    int64_t R = cq_tensor_rows(y);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 8 * c.C), swiglu_rows, &c);
    return CQ_OK;
}

/* ---- copy with conversion ------------------------------------------------------------- */
typedef struct copy_ctx {
    uint8_t *y;
    const uint8_t *x;
    cq_dtype ydt, xdt;
} copy_ctx;

enum { COPY_BLOCK = 1024 };

static void copy_range(void *vc, int slot, int64_t i0, int64_t i1) {
    (void)slot;
    const copy_ctx *c = vc;
    float buf[COPY_BLOCK];
    for (int64_t i = i0; i < i1; i += COPY_BLOCK) {
        int64_t n = CQ_MIN((int64_t)COPY_BLOCK, i1 - i);
        cq_cpu_load_row(c->x, c->xdt, i, buf, n);
        cq_cpu_store_row(c->y, c->ydt, i, buf, n);
    }
}

cq_status cq_cpu_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t n = cq_tensor_nelem(x);
    if (x->dtype == y->dtype) {
        if (cq_host_ptr(x) != cq_host_ptr(y)) /* identical tensors: nothing to do */
            memcpy(cq_host_ptr(y), cq_host_ptr(x), (size_t)n * cq_act_dtype_size(x->dtype));
        return CQ_OK;
    }
    copy_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .ydt = y->dtype, .xdt = x->dtype};
    cq_cpu_parallel(cb, n, CQ_MAX(cq_cpu_grain(cb, n, 4), (int64_t)COPY_BLOCK), copy_range, &c);
    return CQ_OK;
}

/* ---- transpose (cache-blocked) ---------------------------------------------------------- */
enum { TR_BLOCK = 32 };

typedef struct tr_ctx {
    float *y;
    const float *x;
    int64_t R, C;
} tr_ctx;

static void transpose_blocks(void *vc, int slot, int64_t b0, int64_t b1) {
    (void)slot;
    const tr_ctx *c = vc;
    int64_t nbc = (c->C + TR_BLOCK - 1) / TR_BLOCK;
    for (int64_t b = b0; b < b1; b++) {
        int64_t r0 = (b / nbc) * TR_BLOCK, c0 = (b % nbc) * TR_BLOCK;
        int64_t r1 = CQ_MIN(c->R, r0 + TR_BLOCK), c1 = CQ_MIN(c->C, c0 + TR_BLOCK);
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = c0; j < c1; j++) c->y[j * c->R + r] = c->x[r * c->C + j];
    }
}

cq_status cq_cpu_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    tr_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .R = cq_tensor_rows(x), .C = cq_tensor_cols(x)};
    int64_t nb = ((c.R + TR_BLOCK - 1) / TR_BLOCK) * ((c.C + TR_BLOCK - 1) / TR_BLOCK);
    cq_cpu_parallel(cb, nb, cq_cpu_grain(cb, nb, TR_BLOCK * TR_BLOCK), transpose_blocks, &c);
    return CQ_OK;
}

/* ---- concat along columns ----------------------------------------------------------------- */
typedef struct cat_ctx {
    float *y;
    const float *a, *b;
    int64_t Ca, Cb;
} cat_ctx;

static void concat_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const cat_ctx *c = vc;
    for (int64_t r = r0; r < r1; r++) {
        float *y = c->y + r * (c->Ca + c->Cb);
        memcpy(y, c->a + r * c->Ca, sizeof(float) * (size_t)c->Ca);
        memcpy(y + c->Ca, c->b + r * c->Cb, sizeof(float) * (size_t)c->Cb);
    }
}

cq_status cq_cpu_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    cat_ctx c = {.y = cq_host_ptr(y), .a = cq_host_ptr(a), .b = cq_host_ptr(b), .Ca = cq_tensor_cols(a),
                 .Cb = cq_tensor_cols(b)};
    int64_t R = cq_tensor_rows(a);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, c.Ca + c.Cb), concat_rows, &c);
    return CQ_OK;
}

/* ---- row gather from a table in any codec --------------------------------------------------- */
typedef struct gr_ctx {
    const cq_cpu_wmat *w;
    const int32_t *ids;
    void *y;
    cq_dtype ydt;
    int64_t C;
    float *scratch; /* [threads][C] */
} gr_ctx;

static void gather_rows(void *vc, int slot, int64_t i0, int64_t i1) {
    const gr_ctx *c = vc;
    float *row = c->scratch + (size_t)slot * (size_t)c->C;
    for (int64_t i = i0; i < i1; i++) {
        c->w->decode(c->w, c->ids[i], 0, c->C, row);
        cq_cpu_store_row(c->y, c->ydt, i * c->C, row, c->C);
    }
}

cq_status cq_cpu_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    int64_t n = cq_tensor_rows(y);
    const int32_t *id = cq_host_ptr(ids);
    for (int64_t i = 0; i < n; i++)
        if (id[i] < 0 || id[i] >= w->shape[0])
            return cq_fail(CQ_ERR_BOUNDS, "get_rows: id %d at position %lld is outside [0, %lld)", id[i], (long long)i,
                           (long long)w->shape[0]);
    cq_cpu_wmat wm;
    CQ_TRY(cq_cpu_wmat_init(&wm, w, cb, CQ_CPU_SCRATCH_W1));
    gr_ctx c = {.w = &wm, .ids = id, .y = cq_host_ptr(y), .ydt = y->dtype, .C = cq_tensor_cols(y)};
    c.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * (size_t)c.C * sizeof(float));
    if (!c.scratch) {
        cq_cpu_wmat_free(&wm);
        return CQ_ERR_NOMEM;
    }
    cq_cpu_parallel(cb, n, cq_cpu_grain(cb, n, 4 * c.C), gather_rows, &c);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, c.scratch);
    cq_cpu_wmat_free(&wm);
    return CQ_OK;
}

/* ---- column gather (+ group mean) --------------------------------------------------------- */
typedef struct gc_ctx {
    float *y;
    const float *x;
    const int32_t *idx;
    int64_t K, N, group;
    float scale;
} gc_ctx;

static void gather_cols_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const gc_ctx *c = vc;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->K;
        float *y = c->y + r * c->N;
        const int32_t *id = c->idx;
        if (c->group == 1) {
            for (int64_t n = 0; n < c->N; n++) y[n] = id[n] >= 0 ? x[id[n]] * c->scale : 0.0f;
            continue;
        }
        for (int64_t n = 0; n < c->N; n++, id += c->group) {
            float acc = 0.0f;
            for (int64_t g = 0; g < c->group; g++)
                if (id[g] >= 0) acc += x[id[g]];
            y[n] = acc * c->scale;
        }
    }
}

cq_status cq_cpu_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                             float scale) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    gc_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .idx = cq_host_ptr(idx), .K = cq_tensor_cols(x),
                .N = cq_tensor_cols(y), .group = group, .scale = scale != 0.0f ? scale : 1.0f};
    int64_t n = c.N * group;
    for (int64_t i = 0; i < n; i++)
        if (c.idx[i] < -1 || c.idx[i] >= c.K)
            return cq_fail(CQ_ERR_BOUNDS, "gather_cols: index %d at position %lld is outside [-1, %lld)", c.idx[i],
                           (long long)i, (long long)c.K);
    int64_t R = cq_tensor_rows(x);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 2 * n), gather_cols_rows, &c);
    return CQ_OK;
}
