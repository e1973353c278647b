/*
 * attention_generic.c — flash-style attention for the CPU backend.
 *
 * One task = one query head x one block of BQ query rows. Keys are visited
 * in tiles of BK rows up to the furthest key any row of the block sees; per
 * tile: S = (scale*Q)·Kᵀ and O += P·V both run on the ISA microkernel (Q, K,
 * P, V packed into its panel layouts), with an online softmax in between
 * (running max m and sum l per row; O is rescaled when m grows). Neither the
 * n x m score matrix nor a copy of K/V is ever built; per-thread memory is a
 * few tiles. Keys are the prefix rows followed by the own rows, and grouped
 * query heads read kv head h / (Hq / Hkv).
 */
#include "backends/cpu/cpu_impl.h"

enum { ATT_BQ = 64, ATT_BK = 64, ATT_BQ_MAX = 128 };

typedef struct attn_ctx {
    const cq_cpu_kit *kit;
    int64_t Nq, D, Dp, Hq, group, P, T, BQ, BK, n_qb, qw, kvw;
    float scale;
    bool causal;
    const float *q, *kp, *vp, *k, *v;
    float *o;
    const int32_t *vis;
    float *scratch;
    size_t slot_floats;
} attn_ctx;

static inline const float *kv_row(const attn_ctx *c, const float *pre, const float *own, int64_t j, int64_t kvh) {
    return j < c->P ? pre + j * c->kvw + kvh * c->D : own + (j - c->P) * c->kvw + kvh * c->D;
}

static size_t r16(size_t n) { return (n + 15) & ~(size_t)15; }

static void attn_block(const attn_ctx *c, float *sp, int64_t h, int64_t i0) {
    const int MR = c->kit->mr, NR = c->kit->nr;
    const int64_t D = c->D, Dp = c->Dp, BK = c->BK, kvh = h / c->group;
    int64_t bq = CQ_MIN(c->BQ, c->Nq - i0), bqp = (bq + MR - 1) / MR * MR;
    float *Qp = sp, *Kp = Qp + r16((size_t)(c->BQ * D)), *S = Kp + r16((size_t)(BK * D));
    float *Pp = S + r16((size_t)(c->BQ * BK)), *Vp = Pp + r16((size_t)(c->BQ * BK));
    float *O = Vp + r16((size_t)(BK * Dp));
    float m[ATT_BQ_MAX], l[ATT_BQ_MAX];
    int64_t lim[ATT_BQ_MAX], kmax = 0;
    for (int64_t r = 0; r < bq; r++) {
        int64_t li = c->T;
        if (c->vis) {
            int64_t v = c->vis[i0 + r];
            li = v < 0 ? 0 : CQ_MIN(v, c->T);
        } else if (c->causal) {
            li = CQ_MIN(c->P + i0 + r + 1, c->T);
        }
        lim[r] = li;
        kmax = CQ_MAX(kmax, li);
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    /* Q panels [D][MR], pre-scaled so S comes out scaled. */
    for (int64_t i = 0; i < bqp; i += MR)
        for (int64_t ii = 0; ii < MR; ii++) {
            float *dst = Qp + i * D + ii;
            if (i + ii < bq) {
                const float *qr = c->q + (i0 + i + ii) * c->qw + h * D;
                for (int64_t d = 0; d < D; d++) dst[d * MR] = qr[d] * c->scale;
            } else {
                for (int64_t d = 0; d < D; d++) dst[d * MR] = 0.0f;
            }
        }
    memset(O, 0, sizeof(float) * (size_t)(bqp * Dp));
    for (int64_t j0 = 0; j0 < kmax; j0 += BK) {
        int64_t bk = CQ_MIN(BK, kmax - j0), bkp = (bk + NR - 1) / NR * NR;
        /* K panels [D][NR] (transposed key rows). */
        for (int64_t p = 0; p < bkp; p += NR)
            for (int64_t jj = 0; jj < NR; jj++) {
                float *dst = Kp + p * D + jj;
                if (p + jj < bk) {
                    const float *kr = kv_row(c, c->kp, c->k, j0 + p + jj, kvh);
                    for (int64_t d = 0; d < D; d++) dst[d * NR] = kr[d];
                } else {
                    for (int64_t d = 0; d < D; d++) dst[d * NR] = 0.0f;
                }
            }
        for (int64_t p = 0; p < bkp; p += NR)
            for (int64_t i = 0; i < bqp; i += MR) c->kit->ukernel(D, Qp + i * D, Kp + p * D, S + i * BK + p, BK, 0);
        /* Online softmax; S becomes P in place (zeros where masked). */
        for (int64_t r = 0; r < bqp; r++) {
            float *sr = S + r * BK;
            int64_t n = r < bq ? CQ_MAX((int64_t)0, CQ_MIN(lim[r] - j0, bk)) : 0;
            if (n == 0) {
                memset(sr, 0, sizeof(float) * (size_t)bkp);
                continue;
            }
            float mx = sr[0];
            for (int64_t jj = 1; jj < n; jj++) mx = sr[jj] > mx ? sr[jj] : mx;
            float mnew = mx > m[r] ? mx : m[r];
            float corr = expf(m[r] - mnew), sum = 0.0f;
            for (int64_t jj = 0; jj < n; jj++) {
                float e = expf(sr[jj] - mnew);
                sr[jj] = e;
                sum += e;
            }
            for (int64_t jj = n; jj < bkp; jj++) sr[jj] = 0.0f;
            l[r] = l[r] * corr + sum;
            m[r] = mnew;
            if (corr != 1.0f)
                for (int64_t d = 0; d < Dp; d++) O[r * Dp + d] *= corr;
        }
        /* P panels [bkp][MR], V panels [bkp][NR] over the head's channels. */
        for (int64_t i = 0; i < bqp; i += MR)
            for (int64_t jj = 0; jj < bkp; jj++)
                for (int64_t ii = 0; ii < MR; ii++) Pp[i * bkp + jj * MR + ii] = S[(i + ii) * BK + jj];
        for (int64_t jj = 0; jj < bkp; jj++) {
            if (jj < bk) {
                const float *vr = kv_row(c, c->vp, c->v, j0 + jj, kvh);
                for (int64_t d = 0; d < Dp; d++) Vp[(d / NR) * NR * bkp + jj * NR + d % NR] = d < D ? vr[d] : 0.0f;
            } else {
                for (int64_t d = 0; d < Dp; d++) Vp[(d / NR) * NR * bkp + jj * NR + d % NR] = 0.0f;
            }
        }
        for (int64_t q = 0; q < Dp; q += NR)
            for (int64_t i = 0; i < bqp; i += MR)
                c->kit->ukernel(bkp, Pp + i * bkp, Vp + q * bkp, O + i * Dp + q, Dp, 1);
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
    for (int64_t t = t0; t < t1; t++) attn_block(c, sp, t / c->n_qb, (t % c->n_qb) * c->BQ);
}

cq_status cq_cpu_attention(cq_backend *be, const cq_attn_args *a) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    const cq_cpu_kit *kit = cb->kit;
    attn_ctx c = {.kit = kit};
    c.Nq = cq_tensor_rows(a->q);
    c.D = a->head_dim;
    c.Dp = (c.D + kit->nr - 1) / kit->nr * kit->nr;
    c.Hq = a->n_heads;
    c.group = a->n_heads / a->n_kv_heads;
    c.P = a->k_prefix ? cq_tensor_rows(a->k_prefix) : 0;
    c.T = c.P + (a->k ? cq_tensor_rows(a->k) : 0);
    c.BQ = CQ_MIN((int64_t)(ATT_BQ + kit->mr - 1) / kit->mr * kit->mr, (int64_t)ATT_BQ_MAX);
    c.BK = (ATT_BK + kit->nr - 1) / kit->nr * kit->nr;
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
    c.slot_floats = r16((size_t)(c.BQ * c.D)) + r16((size_t)(c.BK * c.D)) + 2 * r16((size_t)(c.BQ * c.BK)) +
                    r16((size_t)(c.BK * c.Dp)) + r16((size_t)(c.BQ * c.Dp));
    c.scratch = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)cb->threads * c.slot_floats * sizeof(float));
    if (!c.scratch) return CQ_ERR_NOMEM;
    cq_cpu_parallel(cb, c.Hq * c.n_qb, 1, attn_tasks, &c);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, c.scratch);
    return CQ_OK;
}
