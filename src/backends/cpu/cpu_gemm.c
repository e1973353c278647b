/*
 * cpu_gemm.c — the blocked GEMM driver of the CPU backend (ISA-neutral).
 *
 * y[M, N] = epilogue(A[M, K] · Wᵀ) where A comes from a packing callback
 * (a matrix, or conv2d's im2col generated on the fly) and W is a weight in
 * any supported codec. The kit's microkernel computes a tile of the
 * transposed product, Cᵀ[mr weight rows][nr activation rows]: weight rows
 * are read in place (f32 weights; bf16 weights on the pair path) or decoded
 * row by row into a small block
 * (no transposition, so decoders write contiguous vectors), activations are
 * packed once per task into panels [k][nr].
 *
 * Blocking. One task owns MB activation rows x a group of weight rows: it
 * packs its MB x K activation block once (the per-thread scratch budget
 * bounds MB), then walks its weight rows NB at a time, and for each NB block
 * walks K in KC steps: decode NB x KC weights (L2-sized), run the
 * microkernel over every (activation panel, weight panel) pair — the
 * activation panel KC x nr stays in L1 while the weight panels stream from
 * L2 — accumulating into an NB x MB f32 tile, and apply the fused epilogue
 * once per NB block. So each weight element is decoded M/MB times in total,
 * each activation element packed once per task, and no whole dequantized
 * weight ever exists.
 *
 * Two arithmetic paths:
 *  - f32: activations as f32 (f16/bf16 inputs converted while packing),
 *    weights decoded to their exact f32 values.
 *  - bf16 pairs: bf16 activations with weights that have an exact bf16 form
 *    (bf16, q8_row, q4 codecs with row-aligned groups; see cpu_weights.c), on
 *    kits with a bf16 dot product. Every product is exact in f32 and the sum
 *    is f32, as in the f32 path; only the summation order differs. Scales the
 *    bf16 form leaves out come back per row in the epilogue (q8_row) or per
 *    group of 32 inside the grouped microkernel (q4).
 * Skinny problems (M <= 4) use dot products on decoded rows instead.
 */
#include "backends/cpu/cpu_impl.h"

enum {
    KC_F32 = 256,   /* k per block: a 256 x 32 f32 panel is 32 KiB (L1) */
    KC_PAIR = 512,  /* the same bytes in bf16 pairs; a multiple of the q4 group (32) */
    NB_TARGET = 64, /* weight rows per block */
    /* Activation rows per task. More rows = fewer weight decodes, fewer rows
     * = the packed activation block stays in L2 across weight blocks; the
     * best trade (measured on Zen 5) depends on how weights arrive: */
    MB_F32 = 256,          /* f32 path */
    MB_PAIR_INPLACE = 128, /* pair path, bf16 weights read in place */
    MB_PAIR_DECODED = 512, /* pair path, decoded weights (q8_row, q4) */
};

/* ---- activation packing ------------------------------------------------------------ */
/* Both packers transpose in chunks of TCH columns: the chunk's slice of the
 * panel (TCH x MR values) stays in L1 while every row writes into it, where a
 * whole-row walk would touch a new cache line with every store. */
enum { TCH = 16 };

void cq_cpu_apack_matrix(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst) {
    float row[TCH];
    for (int64_t c0 = 0; c0 < kc; c0 += TCH) {
        int64_t n = CQ_MIN((int64_t)TCH, kc - c0);
        float *d = dst + c0 * MR;
        for (int64_t i = 0; i < mr; i++) {
            const float *src;
            if (a->dt == CQ_DTYPE_F32) {
                src = (const float *)a->x + (m0 + i) * a->ld + k0 + c0;
            } else {
                cq_cpu_load_row(a->x, a->dt, (m0 + i) * a->ld + k0 + c0, row, n);
                src = row;
            }
            for (int64_t k = 0; k < n; k++) d[k * MR + i] = src[k];
        }
        for (int64_t i = mr; i < MR; i++)
            for (int64_t k = 0; k < n; k++) d[k * MR + i] = 0.0f;
    }
}

/* bf16 rows as pairs: dst[p*NR + i] = (A[m0+i][k0+2p], A[m0+i][k0+2p+1]),
 * the missing partner of an odd kc zero. */
static void apack_pairs(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int NR, uint32_t *dst) {
    const int64_t kp = (kc + 1) / 2;
    for (int64_t p0 = 0; p0 < kp; p0 += TCH) {
        int64_t n = CQ_MIN((int64_t)TCH, kp - p0);
        bool last_half = (kc & 1) && p0 + n == kp; /* the chunk ends in the half pair */
        uint32_t *d = dst + p0 * NR;
        for (int64_t i = 0; i < mr; i++) {
            const uint8_t *src = (const uint8_t *)a->x + 2 * ((m0 + i) * a->ld + k0 + 2 * p0);
            int64_t full = last_half ? n - 1 : n;
            for (int64_t p = 0; p < full; p++) {
                uint32_t v;
                memcpy(&v, src + 4 * p, 4);
                d[p * NR + i] = v;
            }
            if (last_half) d[full * NR + i] = cq_cpu_rd16(src + 4 * full);
        }
        for (int64_t i = mr; i < NR; i++)
            for (int64_t p = 0; p < n; p++) d[p * NR + i] = 0;
    }
}

/* ---- the fused epilogue ------------------------------------------------------------------ */
enum { EPI_MAX = 256 }; /* longest row segment handed to epilogue_row */

/* One output row segment y[m][n0 .. n0+nn) from the accumulators c1 (and c2
 * for SwiGLU), which it may overwrite: scale, bias, activation, then store
 * or accumulate into y. Each step is its own loop so the common cases are
 * plain streams. */
static void epilogue_row(const cq_cpu_gemm *g, int64_t m, int64_t n0, int64_t nn, float *c1, float *c2) {
    float yv[EPI_MAX];
    const float s = g->scale != 0.0f ? g->scale : 1.0f;
    if (s != 1.0f) {
        for (int64_t j = 0; j < nn; j++) c1[j] *= s;
        if (c2)
            for (int64_t j = 0; j < nn; j++) c2[j] *= s;
    }
    if (g->bias)
        for (int64_t j = 0; j < nn; j++) c1[j] += g->bias[n0 + j];
    switch (g->act) {
    case CQ_ACT_GELU_TANH:
        for (int64_t j = 0; j < nn; j++) c1[j] = cq_cpu_gelu_tanh(c1[j]);
        break;
    case CQ_ACT_SILU:
        for (int64_t j = 0; j < nn; j++) c1[j] = cq_cpu_silu(c1[j]);
        break;
    case CQ_ACT_SWIGLU: {
        const float *b2 = g->w2 == g->w1 ? (g->bias ? g->bias + g->N : NULL) : g->bias2;
        if (b2)
            for (int64_t j = 0; j < nn; j++) c2[j] += b2[n0 + j];
        for (int64_t j = 0; j < nn; j++) c1[j] = cq_cpu_silu(c1[j]) * c2[j];
        break;
    }
    default: break;
    }
    if (g->accumulate) {
        cq_cpu_load_row(g->y, g->ydt, m * g->N + n0, yv, nn);
        if (g->gate)
            for (int64_t j = 0; j < nn; j++) c1[j] = yv[j] + g->gate[n0 + j] * c1[j];
        else
            for (int64_t j = 0; j < nn; j++) c1[j] = yv[j] + c1[j];
    }
    cq_cpu_store_row(g->y, g->ydt, m * g->N + n0, c1, nn);
}

/* ---- blocked path ---------------------------------------------------------------------- */
typedef struct gemm_ctx {
    const cq_cpu_gemm *g;
    const cq_cpu_kit *kit;
    bool pair;
    int MR, NR;
    int64_t MB, NB, KC, KX; /* KX: packed k extent per activation row (K, or K pairs) */
    int64_t CS;             /* row stride of the accumulator tiles: MB + 16, since a
                             * power-of-two stride maps the epilogue's column walk
                             * onto two L1 sets */
    int64_t n_mb, ng_rows;  /* tasks: M blocks x groups of ng_rows weight rows */
    size_t slot_bytes;
    uint8_t *scratch;
} gemm_ctx;

typedef struct slot_mem {
    void *X;         /* MB x KX: f32 or u32 pairs */
    void *W1, *W2;   /* NB x KC f32, or NB x KC/2 u32 pairs */
    float *S1, *S2;  /* NB x KC/32 group scales */
    float *C1, *C2;  /* NB x CS accumulators (Cᵀ) */
    float *R1, *R2;  /* epilogue gathers */
    float *RS1, *RS2; /* row scales of the block */
} slot_mem;

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t slot_layout(const gemm_ctx *cx, uint8_t *base, slot_mem *m) {
    size_t off = 0;
#define TAKE(field, bytes)                                   \
    do {                                                     \
        if (m) m->field = (void *)(base + off);              \
        off += al64(bytes);                                  \
    } while (0)
    size_t wbytes = (size_t)(cx->NB * cx->KC) * (cx->pair ? 2 : 4);
    TAKE(X, (size_t)(cx->MB * cx->KX) * 4);
    TAKE(W1, wbytes);
    TAKE(W2, wbytes);
    TAKE(S1, (size_t)(cx->NB * (cx->KC / 32 + 1)) * 4);
    TAKE(S2, (size_t)(cx->NB * (cx->KC / 32 + 1)) * 4);
    TAKE(C1, (size_t)(cx->NB * cx->CS) * 4);
    TAKE(C2, (size_t)(cx->NB * cx->CS) * 4);
    TAKE(R1, (size_t)cx->NB * 4);
    TAKE(R2, (size_t)cx->NB * 4);
    TAKE(RS1, (size_t)cx->NB * 4);
    TAKE(RS2, (size_t)cx->NB * 4);
#undef TAKE
    return off;
}

/* One weight's contribution for rows [n0, n0+nn) and k block [k0, k0+kc):
 * decode (or point at) its rows, then every panel pair into C. */
static void block_f32(const gemm_ctx *cx, const cq_cpu_wmat *w, int64_t row0, int64_t nn, int64_t k0, int64_t kc,
                      const float *X, int64_t npan, float *Wd, float *C) {
    const int MR = cx->MR, NR = cx->NR;
    const int64_t KC = cx->KC, CS = cx->CS, nq = (nn + MR - 1) / MR;
    bool direct = w->dt == CQ_DTYPE_F32;
    /* Decode what cannot be read in place; a partial last panel is padded with zero rows. */
    for (int64_t q = 0; q < nq; q++) {
        int64_t rows = CQ_MIN((int64_t)MR, nn - q * MR);
        if (direct && rows == MR) continue;
        for (int64_t j = 0; j < rows; j++) w->decode(w, row0 + q * MR + j, k0, kc, Wd + (q * MR + j) * KC);
        for (int64_t j = rows; j < MR; j++) memset(Wd + (q * MR + j) * KC, 0, sizeof(float) * (size_t)kc);
    }
    for (int64_t p = 0; p < npan; p++) {
        const float *B = X + p * cx->KX * NR + k0 * NR;
        for (int64_t q = 0; q < nq; q++) {
            const float *A;
            int64_t lda;
            if (direct && q * MR + MR <= nn) {
                A = (const float *)w->p + (row0 + q * MR) * w->cols + k0;
                lda = w->cols;
            } else {
                A = Wd + q * MR * KC;
                lda = KC;
            }
            cx->kit->ukernel(kc, A, lda, B, NR, C + q * MR * CS + p * NR, CS, k0 > 0);
        }
    }
}

static void block_pair(const gemm_ctx *cx, const cq_cpu_wmat *w, int64_t row0, int64_t nn, int64_t k0, int64_t kc,
                       const uint32_t *X, int64_t npan, uint32_t *Wd, float *S, float *C) {
    const int MR = cx->MR, NR = cx->NR;
    const int64_t KP = cx->KC / 2, CS = cx->CS, nq = (nn + MR - 1) / MR, kp = (kc + 1) / 2;
    const int64_t GS = cx->KC / 32 + 1; /* group scales per row */
    bool grouped = w->pair_scale == CQ_CPU_WSCALE_GROUP;
    /* bf16 rows of even length are already pairs: read them in place (the
     * hardware prefetcher streams them while the microkernel runs). */
    bool direct = w->dt == CQ_DTYPE_BF16 && w->cols % 2 == 0 && ((uintptr_t)w->p & 3) == 0;
    for (int64_t j = 0; j < nq * MR; j++) {
        uint16_t *row = (uint16_t *)(Wd + j * KP);
        if (direct && j < nn / MR * MR) continue;
        if (j < nn) {
            w->decode_pair(w, row0 + j, k0, kc, row, S + j * GS);
            if (kc & 1) row[kc] = 0;
        } else {
            memset(row, 0, sizeof(uint32_t) * (size_t)kp);
            if (grouped)
                for (int64_t g = 0; g < kc / 32; g++) S[j * GS + g] = 0.0f;
        }
    }
    for (int64_t p = 0; p < npan; p++) {
        const uint32_t *B = X + p * cx->KX * NR + (k0 / 2) * NR;
        for (int64_t q = 0; q < nq; q++) {
            float *c = C + q * MR * CS + p * NR;
            if (grouped)
                cx->kit->ukernel_pair_grouped(kp, 16, Wd + q * MR * KP, KP, B, NR, S + q * MR * GS, GS, c, CS, k0 > 0);
            else if (direct && q * MR + MR <= nn)
                cx->kit->ukernel_pair(kp, (const uint32_t *)(w->p + 2 * ((row0 + q * MR) * w->cols + k0)), w->cols / 2, B,
                                      NR, c, CS, k0 > 0);
            else
                cx->kit->ukernel_pair(kp, Wd + q * MR * KP, KP, B, NR, c, CS, k0 > 0);
        }
    }
}

static void gemm_task(void *vctx, int slot, int64_t t0, int64_t t1) {
    const gemm_ctx *cx = vctx;
    const cq_cpu_gemm *g = cx->g;
    const int NR = cx->NR;
    const int64_t MB = cx->MB, NB = cx->NB, KC = cx->KC;
    bool two = g->act == CQ_ACT_SWIGLU;
    slot_mem sm;
    slot_layout(cx, cx->scratch + (size_t)slot * cx->slot_bytes, &sm);
    if (cx->pair && cx->kit->pair_begin) cx->kit->pair_begin();
    for (int64_t t = t0; t < t1; t++) {
        int64_t m0 = (t % cx->n_mb) * MB, mm = CQ_MIN(MB, g->M - m0), npan = (mm + NR - 1) / NR;
        int64_t nlo = (t / cx->n_mb) * cx->ng_rows, nhi = CQ_MIN(g->N, nlo + cx->ng_rows);
        /* Pack this task's activation rows once, for the whole K. */
        for (int64_t p = 0; p < npan; p++) {
            int64_t rows = CQ_MIN((int64_t)NR, mm - p * NR);
            for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
                int64_t kc = CQ_MIN(KC, g->K - k0);
                if (cx->pair)
                    apack_pairs(&g->a, m0 + p * NR, rows, k0, kc, NR, (uint32_t *)sm.X + p * cx->KX * NR + (k0 / 2) * NR);
                else
                    g->a.pack(&g->a, m0 + p * NR, rows, k0, kc, NR, (float *)sm.X + p * cx->KX * NR + k0 * NR);
            }
        }
        for (int64_t n0 = nlo; n0 < nhi; n0 += NB) {
            int64_t nn = CQ_MIN(NB, nhi - n0);
            for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
                int64_t kc = CQ_MIN(KC, g->K - k0);
                if (cx->pair) {
                    block_pair(cx, g->w1, g->w1_row0 + n0, nn, k0, kc, sm.X, npan, sm.W1, sm.S1, sm.C1);
                    if (two) block_pair(cx, g->w2, g->w2_row0 + n0, nn, k0, kc, sm.X, npan, sm.W2, sm.S2, sm.C2);
                } else {
                    block_f32(cx, g->w1, g->w1_row0 + n0, nn, k0, kc, sm.X, npan, sm.W1, sm.C1);
                    if (two) block_f32(cx, g->w2, g->w2_row0 + n0, nn, k0, kc, sm.X, npan, sm.W2, sm.C2);
                }
            }
            /* Row scales a pair decoder left out, then the epilogue per
             * activation row (the accumulators hold Cᵀ). */
            bool rs1 = cx->pair && g->w1->pair_scale == CQ_CPU_WSCALE_ROW;
            bool rs2 = cx->pair && two && g->w2->pair_scale == CQ_CPU_WSCALE_ROW;
            for (int64_t j = 0; j < nn; j++) {
                sm.RS1[j] = rs1 ? cq_cpu_wmat_row_scale(g->w1, g->w1_row0 + n0 + j) : 1.0f;
                sm.RS2[j] = rs2 ? cq_cpu_wmat_row_scale(g->w2, g->w2_row0 + n0 + j) : 1.0f;
            }
            for (int64_t i = 0; i < mm; i++) {
                for (int64_t j = 0; j < nn; j++) sm.R1[j] = sm.C1[j * cx->CS + i];
                if (rs1)
                    for (int64_t j = 0; j < nn; j++) sm.R1[j] *= sm.RS1[j];
                if (two) {
                    for (int64_t j = 0; j < nn; j++) sm.R2[j] = sm.C2[j * cx->CS + i];
                    if (rs2)
                        for (int64_t j = 0; j < nn; j++) sm.R2[j] *= sm.RS2[j];
                }
                epilogue_row(g, m0 + i, n0, nn, sm.R1, two ? sm.R2 : NULL);
            }
        }
    }
    if (cx->pair && cx->kit->pair_end) cx->kit->pair_end();
}

/* ---- skinny problems (M <= GEMV_MAX_M): dot products on decoded rows -------------
 * With a handful of rows the panel layout only adds padding; here each weight
 * row segment is decoded once into L1 and dotted with every x row, which
 * keeps the op bound by the weight stream. */
enum { GEMV_MAX_M = 4, GEMV_ROWS = 64, GEMV_KC = 2048 };

typedef struct gemv_ctx {
    const cq_cpu_gemm *g;
    const cq_cpu_kit *kit;
    const float *x; /* [M][K] f32 */
    float *scratch; /* [threads][GEMV_KC] */
} gemv_ctx;

static void gemv_rows(void *vctx, int slot, int64_t n0, int64_t n1) {
    const gemv_ctx *cx = vctx;
    const cq_cpu_gemm *g = cx->g;
    float *tmp = cx->scratch + (size_t)slot * GEMV_KC;
    float acc1[GEMV_MAX_M][GEMV_ROWS], acc2[GEMV_MAX_M][GEMV_ROWS];
    bool two = g->act == CQ_ACT_SWIGLU;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t m = 0; m < g->M; m++) acc1[m][n - n0] = acc2[m][n - n0] = 0.0f;
        for (int64_t k0 = 0; k0 < g->K; k0 += GEMV_KC) {
            int64_t kc = CQ_MIN((int64_t)GEMV_KC, g->K - k0);
            g->w1->decode(g->w1, g->w1_row0 + n, k0, kc, tmp);
            for (int64_t m = 0; m < g->M; m++) acc1[m][n - n0] += cx->kit->dot(cx->x + m * g->K + k0, tmp, kc);
            if (two) {
                g->w2->decode(g->w2, g->w2_row0 + n, k0, kc, tmp);
                for (int64_t m = 0; m < g->M; m++) acc2[m][n - n0] += cx->kit->dot(cx->x + m * g->K + k0, tmp, kc);
            }
        }
    }
    for (int64_t m = 0; m < g->M; m++) epilogue_row(g, m, n0, n1 - n0, acc1[m], two ? acc2[m] : NULL);
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
    cx.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * GEMV_KC * sizeof(float));
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

/* ---- planning ------------------------------------------------------------------------ */
static bool pair_path(const cq_cpu_kit *kit, const cq_cpu_gemm *g) {
    if (!kit->ukernel_pair || g->a.dt != CQ_DTYPE_BF16 || g->a.pack != cq_cpu_apack_matrix) return false;
    if (!g->w1->decode_pair) return false;
    if (g->act == CQ_ACT_SWIGLU && !g->w2->decode_pair) return false;
    return true;
}

cq_status cq_cpu_gemm_run(cq_cpu_backend *cb, const cq_cpu_gemm *g) {
    if (g->M <= GEMV_MAX_M && g->a.pack == cq_cpu_apack_matrix && g->a.ld == g->K) return gemv_run(cb, g);
    const cq_cpu_kit *kit = cb->kit;
    gemm_ctx cx = {.g = g, .kit = kit, .pair = pair_path(kit, g)};
    cx.MR = cx.pair ? kit->mr2 : kit->mr;
    cx.NR = cx.pair ? kit->nr2 : kit->nr;
    cx.KC = cx.pair ? KC_PAIR : KC_F32;
    cx.KX = cx.pair ? (g->K + 1) / 2 : g->K;
    cx.NB = (NB_TARGET + cx.MR - 1) / cx.MR * cx.MR;
    if (cx.NB > EPI_MAX) cx.NB = cx.MR; /* keeps epilogue_row's buffer large enough */
    /* MB: as many activation rows as the per-thread budget for the packed
     * block allows (more rows = fewer weight decodes), a multiple of NR. */
    size_t budget = CQ_MIN((size_t)8 << 20, CQ_MAX((size_t)2 << 20, ((size_t)256 << 20) / (size_t)cb->threads));
    int64_t mb = (int64_t)(budget / ((size_t)cx.KX * 4)) / cx.NR * cx.NR;
    int64_t mp = (g->M + cx.NR - 1) / cx.NR * cx.NR;
    int64_t mb_max = !cx.pair ? MB_F32 : g->w1->dt == CQ_DTYPE_BF16 ? MB_PAIR_INPLACE : MB_PAIR_DECODED;
    cx.MB = CQ_MAX((int64_t)cx.NR, CQ_MIN(CQ_MIN(mb, mb_max / cx.NR * cx.NR), mp));
    cx.CS = cx.MB + 16;
    cx.n_mb = (g->M + cx.MB - 1) / cx.MB;
    /* Split the weight rows until there are about two tasks per thread. */
    int64_t nblocks = (g->N + cx.NB - 1) / cx.NB;
    int64_t n_ng = CQ_MIN(nblocks, CQ_MAX((int64_t)1, (2 * cb->threads + cx.n_mb - 1) / cx.n_mb));
    if (cb->threads == 1) n_ng = 1;
    cx.ng_rows = (nblocks + n_ng - 1) / n_ng * cx.NB;
    n_ng = (g->N + cx.ng_rows - 1) / cx.ng_rows;
    cx.slot_bytes = slot_layout(&cx, NULL, NULL);
    cx.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * cx.slot_bytes);
    if (!cx.scratch) return CQ_ERR_NOMEM;
    cq_cpu_parallel(cb, cx.n_mb * n_ng, 1, gemm_task, &cx);
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
    if (g.M > GEMV_MAX_M) {
        s = cq_cpu_wmat_prepare(&w1);
        if (s == CQ_OK && sep) s = cq_cpu_wmat_prepare(&w2);
    }
    if (s == CQ_OK) s = cq_cpu_gemm_run(cb, &g);
    cq_cpu_wmat_free(&w1);
    if (sep) cq_cpu_wmat_free(&w2);
    return s;
}
