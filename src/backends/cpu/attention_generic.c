/*
 * attention_generic.c — flash-style attention for the CPU backend.
 *
 * Work is done a few kv heads at a time (as many as a memory budget allows).
 * First their keys are transposed once into the microkernel's B panels
 * Kᵀ[D][nr] and their values cut into panels V[T][nr] (contiguous: value
 * rows read in place sit a power-of-two stride apart and thrash L1); every
 * query block of every query head in the group then reuses them. One task = one query head x one
 * block of BQ query rows; per key tile of BK keys:
 *   S = Q·Kᵀ         microkernel: A = the block's query rows, B = Kᵀ panels
 *   online softmax   per row: scale, running max m and sum l (the kit's
 *                    vectorised exp), O rescaled when m grows
 *   O += P·V         microkernel: A = the rows of P (= S in place), B = the
 *                    value panels
 * The n x m score matrix is never built; packed keys and values exist for a
 * few kv heads at a time (ATT_PACK_BUDGET). A block walks only the key tiles
 * between its rows' smallest lower bound and largest upper bound. Keys are the
 * prefix rows followed by the own rows, and grouped query heads read kv head
 * h / (Hq / Hkv).
 */
#include "backends/cpu/cpu_impl.h"

enum { ATT_BQ = 64, ATT_BK = 256 };
#define ATT_PACK_BUDGET ((size_t)8 << 20) /* bytes of packed keys + values per round (2 heads of 4096 x 128) */

typedef struct attn_ctx {
    const cq_cpu_kit *kit;
    int64_t Nq, D, Dp, Hq, group, P, T, Tp, BQ, BK, n_qb, qw, kvw;
    int64_t kv0, nkv; /* kv heads of this round */
    float scale;
    bool causal;
    const float *q, *kp, *vp, *k, *v;
    float *o;
    const int32_t *vis, *vis_lo;
    float *kt, *vt;  /* packed keys [nkv][Tp/nr][D][nr], values [nkv][Dp/nr][T][nr] */
    float *scratch;
    size_t slot_floats;
} attn_ctx;

static inline const float *kv_row(const attn_ctx *c, const float *pre, const float *own, int64_t j, int64_t kvh) {
    return j < c->P ? pre + j * c->kvw + kvh * c->D : own + (j - c->P) * c->kvw + kvh * c->D;
}

static size_t r16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Phase 1: one task = one panel of nr keys (and their values) of one kv head. */
static void pack_kv(void *vctx, int slot, int64_t t0, int64_t t1) {
    (void)slot;
    const attn_ctx *c = vctx;
    const int NR = c->kit->nr;
    const int64_t D = c->D, npan = c->Tp / NR, npd = c->Dp / NR;
    for (int64_t t = t0; t < t1; t++) {
        int64_t hh = t / npan, p = t % npan, kvh = c->kv0 + hh;
        float *dst = c->kt + (hh * npan + p) * D * NR;
        for (int64_t jj = 0; jj < NR; jj++) {
            int64_t j = p * NR + jj;
            if (j >= c->T) {
                for (int64_t d = 0; d < D; d++) dst[d * NR + jj] = 0.0f;
                continue;
            }
            const float *kr = kv_row(c, c->kp, c->k, j, kvh), *vr = kv_row(c, c->vp, c->v, j, kvh);
            for (int64_t d = 0; d < D; d++) dst[d * NR + jj] = kr[d];
            for (int64_t q = 0; q < npd; q++) {
                float *vd = c->vt + ((hh * npd + q) * c->T + j) * NR;
                int64_t n = CQ_MIN((int64_t)NR, D - q * NR);
                memcpy(vd, vr + q * NR, sizeof(float) * (size_t)n);
                for (int64_t d = n; d < NR; d++) vd[d] = 0.0f;
            }
        }
    }
}

static void attn_block(const attn_ctx *c, float *sp, int64_t h, int64_t i0) {
    const int MR = c->kit->mr, NR = c->kit->nr;
    const int64_t D = c->D, Dp = c->Dp, BK = c->BK, hh = h / c->group - c->kv0;
    const int64_t npan = c->Tp / NR;
    int64_t bq = CQ_MIN(c->BQ, c->Nq - i0), bqp = (bq + MR - 1) / MR * MR;
    float *Qs = sp, *S = Qs + r16((size_t)(c->BQ * D)), *O = S + r16((size_t)(c->BQ * BK));
    float m[ATT_BQ + 32], l[ATT_BQ + 32];
    int64_t lim[ATT_BQ + 32], lo[ATT_BQ + 32], kmax = 0, kmin = c->T;
    for (int64_t r = 0; r < bq; r++) {
        int64_t li = c->T;
        if (c->vis) {
            int64_t v = c->vis[i0 + r];
            li = v < 0 ? 0 : CQ_MIN(v, c->T);
        } else if (c->causal) {
            li = CQ_MIN(c->P + i0 + r + 1, c->T);
        }
        int64_t lw = 0;
        if (c->vis_lo) {
            int64_t v = c->vis_lo[i0 + r];
            lw = v < 0 ? 0 : CQ_MIN(v, c->T);
        }
        if (lw >= li) lw = li = 0; /* sees nothing */
        lim[r] = li;
        lo[r] = lw;
        kmax = CQ_MAX(kmax, li);
        if (lw < li) kmin = CQ_MIN(kmin, lw);
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    /* The block's query rows, zero-padded to a multiple of MR. */
    for (int64_t r = 0; r < bqp; r++) {
        if (r < bq) memcpy(Qs + r * D, c->q + (i0 + r) * c->qw + h * D, sizeof(float) * (size_t)D);
        else memset(Qs + r * D, 0, sizeof(float) * (size_t)D);
    }
    memset(O, 0, sizeof(float) * (size_t)(bqp * Dp));
    const float *Kt = c->kt + hh * npan * D * NR;
    /* key tiles start at the block's smallest lower bound (a panel boundary: Kt is cut into panels of NR) */
    for (int64_t j0 = kmin / NR * NR; j0 < kmax; j0 += BK) {
        int64_t bk = CQ_MIN(BK, kmax - j0), bkp = (bk + NR - 1) / NR * NR;
        for (int64_t p = 0; p < bkp; p += NR)
            for (int64_t i = 0; i < bqp; i += MR)
                c->kit->ukernel(D, Qs + i * D, D, Kt + ((j0 + p) / NR) * D * NR, NR, S + i * BK + p, BK, 0);
        /* Online softmax; S becomes P in place (zeros where masked). */
        for (int64_t r = 0; r < bqp; r++) {
            float *sr = S + r * BK;
            /* this row's visible keys in the tile: [b0, b1) */
            int64_t b1 = r < bq ? CQ_MAX((int64_t)0, CQ_MIN(lim[r] - j0, bk)) : 0;
            int64_t b0 = r < bq ? CQ_MIN(CQ_MAX((int64_t)0, lo[r] - j0), b1) : 0;
            if (b1 == b0) {
                memset(sr, 0, sizeof(float) * (size_t)bk);
                continue;
            }
            float mx = c->kit->scale_max(sr + b0, b1 - b0, c->scale);
            float mnew = mx > m[r] ? mx : m[r];
            float corr = cq_cpu_expf(m[r] - mnew);
            float sum = c->kit->exp_sum(sr + b0, b1 - b0, mnew);
            if (b0 > 0) memset(sr, 0, sizeof(float) * (size_t)b0);
            if (b1 < bk) memset(sr + b1, 0, sizeof(float) * (size_t)(bk - b1));
            l[r] = l[r] * corr + sum;
            m[r] = mnew;
            if (corr != 1.0f)
                for (int64_t d = 0; d < D; d++) O[r * Dp + d] *= corr;
        }
        for (int64_t q = 0; q < Dp / NR; q++) {
            const float *B = c->vt + ((hh * (Dp / NR) + q) * c->T + j0) * NR;
            for (int64_t i = 0; i < bqp; i += MR) c->kit->ukernel(bk, S + i * BK, BK, B, NR, O + i * Dp + q * NR, Dp, 1);
        }
    }
    for (int64_t r = 0; r < bq; r++) {
        float *dst = c->o + (i0 + r) * c->qw + h * D;
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; /* a row that sees no key gets zeros */
        for (int64_t d = 0; d < D; d++) dst[d] = O[r * Dp + d] * inv;
    }
}

static void attn_tasks(void *vctx, int slot, int64_t t0, int64_t t1) {
    const attn_ctx *c = vctx;
    float *sp = c->scratch + (size_t)slot * c->slot_floats;
    for (int64_t t = t0; t < t1; t++) attn_block(c, sp, c->kv0 * c->group + t / c->n_qb, (t % c->n_qb) * c->BQ);
}

cq_status cq_cpu_attention(cq_backend *be, const cq_attn_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    const cq_cpu_kit *kit = cb->kit;
    const int NR = kit->nr;
    attn_ctx c = {.kit = kit};
    c.Nq = cq_tensor_rows(a->q);
    c.D = a->head_dim;
    c.Dp = (c.D + NR - 1) / NR * NR;
    c.Hq = a->n_heads;
    c.group = a->n_heads / a->n_kv_heads;
    c.P = a->k_prefix ? cq_tensor_rows(a->k_prefix) : 0;
    c.T = c.P + (a->k ? cq_tensor_rows(a->k) : 0);
    c.Tp = (c.T + NR - 1) / NR * NR;
    c.BQ = ATT_BQ / kit->mr * kit->mr;
    c.BK = ATT_BK / NR * NR;
    c.n_qb = (c.Nq + c.BQ - 1) / c.BQ;
    c.qw = c.Hq * c.D;
    c.kvw = (int64_t)a->n_kv_heads * c.D;
    c.scale = a->scale != 0.0f ? a->scale : 1.0f / sqrtf((float)c.D);
    c.causal = a->causal;
    c.q = cq_host_ptr(a->q);
    c.kp = a->k_prefix ? cq_host_ptr(a->k_prefix) : NULL;
    c.vp = a->v_prefix ? cq_host_ptr(a->v_prefix) : NULL;
    c.k = a->k ? cq_host_ptr(a->k) : NULL;
    c.v = a->v ? cq_host_ptr(a->v) : NULL;
    c.o = cq_host_ptr(a->o);
    c.vis = a->vis ? cq_host_ptr(a->vis) : NULL;
    c.vis_lo = a->vis_lo ? cq_host_ptr(a->vis_lo) : NULL;
    if (c.T == 0 || c.Nq == 0) { /* nothing visible: zeros */
        memset(c.o, 0, sizeof(float) * (size_t)(c.Nq * c.qw));
        return CQ_OK;
    }
    size_t per_head = (size_t)(c.Tp * c.D) + (size_t)(c.T * c.Dp);
    int64_t nkv = CQ_MAX((int64_t)1, CQ_MIN((int64_t)a->n_kv_heads, (int64_t)(ATT_PACK_BUDGET / 4 / per_head)));
    c.slot_floats = r16((size_t)(c.BQ * c.D)) + r16((size_t)(c.BQ * c.BK)) + r16((size_t)(c.BQ * c.Dp));
    c.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * c.slot_floats * sizeof(float));
    c.kt = c.scratch ? cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_KV, (size_t)nkv * per_head * sizeof(float)) : NULL;
    if (!c.kt) {
        cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, c.scratch);
        return CQ_ERR_NOMEM;
    }
    for (c.kv0 = 0; c.kv0 < a->n_kv_heads; c.kv0 += nkv) {
        c.nkv = CQ_MIN(nkv, (int64_t)a->n_kv_heads - c.kv0);
        c.vt = c.kt + (size_t)c.nkv * (size_t)(c.Tp * c.D);
        cq_cpu_parallel(cb, c.nkv * (c.Tp / NR), cq_cpu_grain(cb, c.nkv * (c.Tp / NR), 2 * NR * c.D), pack_kv, &c);
        cq_cpu_parallel(cb, c.nkv * c.group * c.n_qb, 1, attn_tasks, &c);
    }
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_KV, c.kt);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, c.scratch);
    return CQ_OK;
}
