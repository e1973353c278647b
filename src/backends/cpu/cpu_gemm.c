/*
 * cpu_gemm.c — the blocked GEMM driver of the CPU backend (ISA-neutral).
 *
 * y[M, N] = epilogue(A[M, K] · Wᵀ) where A comes from a packing callback
 * (a matrix, or conv2d's im2col generated on the fly) and W is a weight in
 * any supported codec, decoded per tile. The output is cut into MC x NC
 * tiles; each task owns one tile and walks K in KC steps: pack A panels,
 * decode + pack W panels, run the ISA microkernel over MR x NR blocks into
 * an f32 tile accumulator, then apply the fused epilogue once and store.
 * Each weight element is decoded once per M tile (M/MC times in total), and
 * the only weight memory is a per-thread KC x NC panel.
 */
#include "backends/cpu/cpu_impl.h"

enum { GEMM_KC = 256, GEMM_MC = 128, GEMM_NC = 128 };

void cq_cpu_apack_matrix(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst) {
    float row[GEMM_KC];
    for (int64_t i = 0; i < mr; i++) {
        const float *src;
        if (a->dt == CQ_DTYPE_F32) {
            src = (const float *)a->x + (m0 + i) * a->ld + k0;
        } else {
            cq_cpu_load_row(a->x, a->dt, (m0 + i) * a->ld + k0, row, kc);
            src = row;
        }
        for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = src[k];
    }
    for (int64_t i = mr; i < MR; i++)
        for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = 0.0f;
}

typedef struct gemm_ctx {
    const cq_cpu_gemm *g;
    const cq_cpu_kit *kit;
    int64_t mc, nc, kcb, n_mb;
    size_t slot_floats;
    float *scratch;
} gemm_ctx;

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* The fused epilogue on one tile row: v from the accumulators, then store or
 * accumulate into y. */
static void epilogue_row(const cq_cpu_gemm *g, int64_t m, int64_t n0, int64_t nn, const float *c1, const float *c2) {
    float v[GEMM_NC], yv[GEMM_NC];
    float s = g->scale != 0.0f ? g->scale : 1.0f;
    bool fused = g->w2 == g->w1;
    for (int64_t j = 0; j < nn; j++) {
        int64_t n = n0 + j;
        float t = s * c1[j] + (g->bias ? g->bias[n] : 0.0f);
        switch (g->act) {
        case CQ_ACT_GELU_TANH: t = cq_cpu_gelu_tanh(t); break;
        case CQ_ACT_SILU: t = cq_cpu_silu(t); break;
        case CQ_ACT_SWIGLU: {
            float b2 = fused ? (g->bias ? g->bias[g->N + n] : 0.0f) : (g->bias2 ? g->bias2[n] : 0.0f);
            t = cq_cpu_silu(t) * (s * c2[j] + b2);
            break;
        }
        default: break;
        }
        v[j] = t;
    }
    if (g->accumulate) {
        cq_cpu_load_row(g->y, g->ydt, m * g->N + n0, yv, nn);
        for (int64_t j = 0; j < nn; j++) v[j] = yv[j] + (g->gate ? g->gate[n0 + j] : 1.0f) * v[j];
    }
    cq_cpu_store_row(g->y, g->ydt, m * g->N + n0, v, nn);
}

static void gemm_tiles(void *vctx, int slot, int64_t t0, int64_t t1) {
    const gemm_ctx *cx = vctx;
    const cq_cpu_gemm *g = cx->g;
    const cq_cpu_kit *kit = cx->kit;
    const int MR = kit->mr, NR = kit->nr;
    const int64_t MC = cx->mc, NC = cx->nc, KCB = cx->kcb;
    bool two = g->act == CQ_ACT_SWIGLU;
    float *sp = cx->scratch + (size_t)slot * cx->slot_floats;
    float *A = sp;
    float *B1 = A + round16((size_t)(MC * KCB));
    float *B2 = B1 + round16((size_t)(NC * KCB));
    float *T = B2 + round16((size_t)(NC * KCB));
    float *C1 = T + round16((size_t)(NR * KCB));
    float *C2 = C1 + round16((size_t)(MC * NC));
    for (int64_t t = t0; t < t1; t++) {
        int64_t m0 = (t % cx->n_mb) * MC, n0 = (t / cx->n_mb) * NC;
        int64_t mm = CQ_MIN(MC, g->M - m0), nn = CQ_MIN(NC, g->N - n0);
        int64_t mp = (mm + MR - 1) / MR * MR, np = (nn + NR - 1) / NR * NR;
        for (int64_t k0 = 0; k0 < g->K; k0 += KCB) {
            int64_t kc = CQ_MIN(KCB, g->K - k0);
            for (int64_t i = 0; i < mp; i += MR) g->a.pack(&g->a, m0 + i, CQ_MIN(MR, mm - i), k0, kc, MR, A + i * kc);
            cq_cpu_pack_b(g->w1, g->w1_row0 + n0, nn, k0, kc, NR, B1, T);
            if (two) cq_cpu_pack_b(g->w2, g->w2_row0 + n0, nn, k0, kc, NR, B2, T);
            for (int64_t j = 0; j < np; j += NR)
                for (int64_t i = 0; i < mp; i += MR) {
                    kit->ukernel(kc, A + i * kc, B1 + j * kc, C1 + i * NC + j, NC, k0 > 0);
                    if (two) kit->ukernel(kc, A + i * kc, B2 + j * kc, C2 + i * NC + j, NC, k0 > 0);
                }
        }
        for (int64_t i = 0; i < mm; i++) epilogue_row(g, m0 + i, n0, nn, C1 + i * NC, two ? C2 + i * NC : NULL);
    }
}

/* ---- skinny problems (M <= GEMV_MAX_M): dot products on decoded rows -------------
 * With a handful of rows the panel layout only adds a transpose and padded
 * rows; here each weight row segment is decoded once into L1 and dotted with
 * every x row, which keeps the op bound by the weight stream. */
enum { GEMV_MAX_M = 4, GEMV_ROWS = 64 };

typedef struct gemv_ctx {
    const cq_cpu_gemm *g;
    const cq_cpu_kit *kit;
    const float *x; /* [M][K] f32 */
    float *scratch; /* [threads][GEMM_KC] */
} gemv_ctx;

static void gemv_rows(void *vctx, int slot, int64_t n0, int64_t n1) {
    const gemv_ctx *cx = vctx;
    const cq_cpu_gemm *g = cx->g;
    float *tmp = cx->scratch + (size_t)slot * GEMM_KC;
    float acc1[GEMV_MAX_M][GEMV_ROWS], acc2[GEMV_MAX_M][GEMV_ROWS];
    bool two = g->act == CQ_ACT_SWIGLU;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t m = 0; m < g->M; m++) acc1[m][n - n0] = acc2[m][n - n0] = 0.0f;
        for (int64_t k0 = 0; k0 < g->K; k0 += GEMM_KC) {
            int64_t kc = CQ_MIN((int64_t)GEMM_KC, g->K - k0);
            g->w1->decode(g->w1, g->w1_row0 + n, k0, kc, tmp);
            for (int64_t m = 0; m < g->M; m++) acc1[m][n - n0] += cx->kit->dot(cx->x + m * g->K + k0, tmp, kc);
            if (two) {
                g->w2->decode(g->w2, g->w2_row0 + n, k0, kc, tmp);
                for (int64_t m = 0; m < g->M; m++) acc2[m][n - n0] += cx->kit->dot(cx->x + m * g->K + k0, tmp, kc);
            }
        }
    }
    for (int64_t m = 0; m < g->M; m++) epilogue_row(g, m, n0, n1 - n0, acc1[m], acc2[m]);
}

static cq_status gemv_run(cq_cpu_backend *cb, const cq_cpu_gemm *g) {
    gemv_ctx cx = {.g = g, .kit = cb->kit};
    float *xf = NULL;
    if (g->a.dt != CQ_DTYPE_F32) {
        xf = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_X, (size_t)(g->M * g->K) * sizeof(float));
        if (!xf) return CQ_ERR_NOMEM;
        for (int64_t m = 0; m < g->M; m++) cq_cpu_load_row(g->a.x, g->a.dt, m * g->a.ld, xf + m * g->K, g->K);
    }
    cx.x = xf ? xf : (const float *)g->a.x;
    cx.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * GEMM_KC * sizeof(float));
    if (!cx.scratch) {
        cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_X, xf);
        return CQ_ERR_NOMEM;
    }
    int64_t grain = CQ_MIN((int64_t)GEMV_ROWS, CQ_MAX((int64_t)1, (g->N + 4 * cb->threads - 1) / (4 * cb->threads)));
    cq_cpu_parallel(cb, g->N, grain, gemv_rows, &cx);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, cx.scratch);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_X, xf);
    return CQ_OK;
}

cq_status cq_cpu_gemm_run(cq_cpu_backend *cb, const cq_cpu_gemm *g) {
    if (g->M <= GEMV_MAX_M && g->a.pack == cq_cpu_apack_matrix && g->a.ld == g->K) return gemv_run(cb, g);
    const cq_cpu_kit *kit = cb->kit;
    const int MR = kit->mr, NR = kit->nr;
    gemm_ctx cx = {.g = g, .kit = kit};
    cx.kcb = CQ_MIN((int64_t)GEMM_KC, g->K);
    int64_t mp = (g->M + MR - 1) / MR * MR, np = (g->N + NR - 1) / NR * NR;
    cx.mc = CQ_MIN((int64_t)(GEMM_MC / MR * MR), mp);
    cx.nc = CQ_MIN((int64_t)(GEMM_NC / NR * NR), np);
    /* Narrow the tiles of small problems until every thread has work. */
    for (;;) {
        int64_t tiles = ((g->M + cx.mc - 1) / cx.mc) * ((g->N + cx.nc - 1) / cx.nc);
        if (tiles >= 2 * cb->threads) break;
        if (cx.nc > NR && cx.nc >= cx.mc) cx.nc = (cx.nc / 2 + NR - 1) / NR * NR;
        else if (cx.mc > MR) cx.mc = (cx.mc / 2 + MR - 1) / MR * MR;
        else break;
    }
    cx.n_mb = (g->M + cx.mc - 1) / cx.mc;
    int64_t n_nb = (g->N + cx.nc - 1) / cx.nc;
    cx.slot_floats = round16((size_t)(cx.mc * cx.kcb)) + 2 * round16((size_t)(cx.nc * cx.kcb)) +
                     round16((size_t)(NR * cx.kcb)) + 2 * round16((size_t)(cx.mc * cx.nc));
    cx.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * cx.slot_floats * sizeof(float));
    if (!cx.scratch) return CQ_ERR_NOMEM;
    cq_cpu_parallel(cb, cx.n_mb * n_nb, 1, gemm_tiles, &cx);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, cx.scratch);
    return CQ_OK;
}

/* ---- the matmul op ----------------------------------------------------------------- */
cq_status cq_cpu_matmul(cq_backend *be, const cq_matmul_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    cq_cpu_wmat w1, w2;
    bool swiglu = a->act == CQ_ACT_SWIGLU, sep = swiglu && a->w2;
    cq_status s = cq_cpu_wmat_init(&w1, a->w, cb, CQ_CPU_SCRATCH_W1);
    if (s == CQ_OK && sep) s = cq_cpu_wmat_init(&w2, a->w2, cb, CQ_CPU_SCRATCH_W2);
    if (s != CQ_OK) {
        cq_cpu_wmat_free(&w1);
        return s;
    }
    cq_cpu_gemm g = {
        .M = cq_tensor_rows(a->x),
        .K = cq_tensor_cols(a->x),
        .N = cq_tensor_cols(a->y),
        .a = {.pack = cq_cpu_apack_matrix, .x = cq_host_ptr(a->x), .dt = a->x->dtype, .ld = cq_tensor_cols(a->x)},
        .w1 = &w1,
        .w2 = swiglu ? (sep ? &w2 : &w1) : NULL,
        .scale = a->scale,
        .act = a->act,
        .accumulate = a->accumulate,
        .bias = a->bias ? cq_host_ptr(a->bias) : NULL,
        .bias2 = a->bias2 ? cq_host_ptr(a->bias2) : NULL,
        .gate = a->gate ? cq_host_ptr(a->gate) : NULL,
        .y = cq_host_ptr(a->y),
        .ydt = a->y->dtype,
    };
    if (swiglu && !sep) g.w2_row0 = g.N; /* fused [gate | up] weight */
    s = cq_cpu_gemm_run(cb, &g);
    cq_cpu_wmat_free(&w1);
    if (sep) cq_cpu_wmat_free(&w2);
    return s;
}
