/*
 * k_attention.cu — flash attention (online softmax, no score matrix in
 * device memory) with a cached prefix and per-query visibility, as ops.h
 * defines it: keys are the prefix rows then the own rows; query i sees keys
 * [lo, hi): hi = vis[i] (clamped to [0, P + Nk]), or P + i + 1 when causal,
 * or all; lo = vis_lo[i] (clamped) or 0; a query that sees no key gets zeros; q head h reads kv head
 * h / (Hq / Hkv).
 *
 * Two kernels:
 *  - generic: any dtype, any head_dim up to 2048 (the VAE's one head over all
 *    its channels); one warp per (query, head),
 *    f32 online softmax, one key at a time. Simple and slow: the fallback and
 *    the oracle to compare the fast kernel with on the device
 *    (CORTIQ_CUDA_ATTN=generic).
 *  - wmma: head_dim 128 or 80 (a template on the head_dim: any multiple of
 *    16 up to 128 instantiates) on tensor cores through WMMA (bf16 operands,
 *    f32 accumulation). A block of 4 warps owns 64 queries of one head and
 *    walks the visible keys 64 at a time: S = Q·Kᵀ (WMMA) into shared memory,
 *    the online-softmax update there (two lanes per query row), P in bf16,
 *    then O += P·V (WMMA) with O kept in shared memory so the per-row rescale
 *    is plain indexed code. Everything elementwise is explicit thread
 *    indexing on shared memory, so the only opaque layouts are WMMA's own
 *    fragments. A first version chosen for being checkable; the flash
 *    kernels (k_flash.cu, k_flash90.cu) are the fast paths.
 */
#include <mma.h>

#include "k_common.cuh"

/* Row j of the key (or value) sequence: prefix rows first. */
__device__ __forceinline__ const void *kv_row(const void *pre, const void *own, int64_t P, int64_t j, int64_t *row) {
    if (j < P) {
        *row = j;
        return pre;
    }
    *row = j - P;
    return own;
}

/* ---- generic ------------------------------------------------------------------------------ */
template <typename T, int NV>
__global__ void __launch_bounds__(128) k_attn_generic(cqk_attn a) {
    const int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (gw >= a.Nq * a.Hq) return; /* whole warps */
    const int64_t i = gw / a.Hq;
    const int h = (int)(gw - i * a.Hq), kh = h / (a.Hq / a.Hkv), D = a.D;
    const int64_t qo = (i * a.Hq + h) * D, kvw = (int64_t)a.Hkv * D;
    float qv[NV], acc[NV];
#pragma unroll
    for (int j = 0; j < NV; j++) {
        int d = lane + 32 * j;
        qv[j] = d < D ? cqk_ld<T>(a.q, qo + d) : 0.0f;
        acc[j] = 0.0f;
    }
    const int64_t lim = cqk_attn_limit(a, i), lo = cqk_attn_lower(a, i);
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = lo; j < lim; j++) {
        int64_t row;
        const void *kb = kv_row(a.kp, a.k, a.P, j, &row);
        const void *vb = j < a.P ? a.vp : a.v;
        const int64_t off = row * kvw + (int64_t)kh * D;
        float dot = 0.0f;
#pragma unroll
        for (int t = 0; t < NV; t++) {
            int d = lane + 32 * t;
            if (d < D) dot = fmaf(qv[t], cqk_ld<T>(kb, off + d), dot);
        }
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        const float s = dot * a.scale;
        const float mn = fmaxf(m, s);
        const float corr = m == -INFINITY ? 0.0f : expf(m - mn), p = expf(s - mn);
        l = l * corr + p;
#pragma unroll
        for (int t = 0; t < NV; t++) {
            int d = lane + 32 * t;
            if (d < D) acc[t] = acc[t] * corr + p * cqk_ld<T>(vb, off + d);
        }
        m = mn;
    }
#pragma unroll
    for (int t = 0; t < NV; t++) {
        int d = lane + 32 * t;
        if (d < D) cqk_st<T>(a.o, qo + d, lim > lo ? acc[t] / l : 0.0f);
    }
}

extern "C" cudaError_t cqk_attention_generic(const cqk_ctx *c, const cqk_attn *a) {
    if (a->Nq <= 0 || a->Hq <= 0) return cudaSuccess;
    if (a->D < 1 || a->D > CQK_ATTN_GENERIC_MAX_D || a->Hkv <= 0 || a->Hq % a->Hkv) return cudaErrorInvalidValue;
    const int64_t blocks = (a->Nq * a->Hq * 32 + 127) / 128;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const unsigned b = (unsigned)blocks;
    CQK_DISPATCH(a->dt, T, {
        if (a->D <= 32) k_attn_generic<T, 1><<<b, 128, 0, c->stream>>>(*a);
        else if (a->D <= 64) k_attn_generic<T, 2><<<b, 128, 0, c->stream>>>(*a);
        else if (a->D <= 128) k_attn_generic<T, 4><<<b, 128, 0, c->stream>>>(*a);
        else if (a->D <= 256) k_attn_generic<T, 8><<<b, 128, 0, c->stream>>>(*a);
        else if (a->D <= 512) k_attn_generic<T, 16><<<b, 128, 0, c->stream>>>(*a);
        else if (a->D <= 1024) k_attn_generic<T, 32><<<b, 128, 0, c->stream>>>(*a);
        else k_attn_generic<T, 64><<<b, 128, 0, c->stream>>>(*a);
    });
    return cqk_launched();
}

/* ---- head_dim 128 (and 80) on tensor cores ----------------------------------------------------- */
namespace wm = nvcuda::wmma;

/* Tile sizes and the shared-memory carve-up of the kernel at head_dim HD (a multiple of 16 up to 128: the
 * products are 16x16x16 WMMA tiles over the head's channels). Pitches derive from HD; every offset is a
 * multiple of 32 bytes as WMMA needs (16 rows of a bf16 pitch HD + 8 or an f32 pitch HD + 4 are). */
template <int HD> struct wdims {
    static_assert(HD % 16 == 0 && HD >= 16 && HD <= 128, "head_dim");
    static constexpr int BQ = 64, BK = 64;
    static constexpr int LDQ = HD + 8; /* bf16 pitch of Q/K/V tiles (a multiple of 8, rows 32-byte aligned) */
    static constexpr int LDS = BK + 4; /* f32 pitch of the score tile */
    static constexpr int LDP = BK + 8; /* bf16 pitch of the probability tile */
    static constexpr int LDO = HD + 4; /* f32 pitch of the output accumulator */
    static constexpr int OFF_Q = 0;
    static constexpr int OFF_K = OFF_Q + BQ * LDQ * 2;
    static constexpr int OFF_V = OFF_K + BK * LDQ * 2;
    static constexpr int OFF_S = OFF_V + BK * LDQ * 2;
    static constexpr int OFF_P = OFF_S + BQ * LDS * 4;
    static constexpr int OFF_O = OFF_P + BQ * LDP * 2;
    static constexpr int OFF_M = OFF_O + BQ * LDO * 4;
    static constexpr int OFF_L = OFF_M + BQ * 4;
    static constexpr int OFF_LIM = OFF_L + BQ * 4;
    static constexpr int OFF_LO = OFF_LIM + BQ * 8;
    static constexpr int OFF_MAX = OFF_LO + BQ * 8;
    static constexpr int SMEM = OFF_MAX + 32;
    static_assert(OFF_K % 32 == 0 && OFF_V % 32 == 0 && OFF_S % 32 == 0 && OFF_P % 32 == 0 && OFF_O % 32 == 0 &&
                      OFF_M % 32 == 0 && OFF_LIM % 8 == 0 && OFF_MAX % 8 == 0 && (16 * LDQ * 2) % 32 == 0 &&
                      (16 * LDO * 4) % 32 == 0,
                  "WMMA needs 32-byte aligned tiles");
};

template <typename T, int HD>
__global__ void __launch_bounds__(128) k_attn_wmma(cqk_attn a) {
    using W = wdims<HD>;
    constexpr int BQ = W::BQ, BK = W::BK, LDQ = W::LDQ, LDS = W::LDS, LDP = W::LDP, LDO = W::LDO;
    extern __shared__ __align__(128) unsigned char smem[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)(smem + W::OFF_Q);
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)(smem + W::OFF_K);
    __nv_bfloat16 *Vs = (__nv_bfloat16 *)(smem + W::OFF_V);
    float *Ss = (float *)(smem + W::OFF_S);
    __nv_bfloat16 *Ps = (__nv_bfloat16 *)(smem + W::OFF_P);
    float *Os = (float *)(smem + W::OFF_O);
    float *Mrow = (float *)(smem + W::OFF_M);
    float *Lrow = (float *)(smem + W::OFF_L);
    long long *Lim = (long long *)(smem + W::OFF_LIM);
    long long *Lo = (long long *)(smem + W::OFF_LO);
    unsigned long long *MaxLim = (unsigned long long *)(smem + W::OFF_MAX); /* [0] max hi, [1] min lo */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t q0 = (int64_t)blockIdx.x * BQ;
    const int h = blockIdx.y, kh = h / (a.Hq / a.Hkv);
    const int64_t T_all = a.P + a.Nk, qw = (int64_t)a.Hq * HD, kvw = (int64_t)a.Hkv * HD;

    if (tid == 0) {
        MaxLim[0] = 0;
        MaxLim[1] = (unsigned long long)T_all;
    }
    for (int idx = tid; idx < BQ * HD; idx += 128) {
        const int r = idx / HD, d = idx % HD;
        const int64_t qi = q0 + r;
        const float v = qi < a.Nq ? cqk_ld<T>(a.q, qi * qw + (int64_t)h * HD + d) : 0.0f;
        Qs[r * LDQ + d] = __float2bfloat16_rn(v);
        Os[r * LDO + d] = 0.0f;
    }
    __syncthreads();
    if (tid < BQ) {
        const int64_t qi = q0 + tid;
        int64_t lim = qi < a.Nq ? cqk_attn_limit(a, qi) : 0, lo = qi < a.Nq ? cqk_attn_lower(a, qi) : 0;
        if (lo >= lim) lo = lim = 0; /* sees nothing */
        Lim[tid] = lim;
        Lo[tid] = lo;
        Mrow[tid] = -INFINITY;
        Lrow[tid] = 0.0f;
        atomicMax(&MaxLim[0], (unsigned long long)lim);
        if (lo < lim) atomicMin(&MaxLim[1], (unsigned long long)lo);
    }
    __syncthreads();
    /* key tiles between the block's smallest lower bound and largest upper bound */
    const int64_t ntiles = ((int64_t)MaxLim[0] + BK - 1) / BK, kt0 = (int64_t)MaxLim[1] / BK;

    for (int64_t kt = kt0; kt < ntiles; kt++) {
        const int64_t j0 = kt * BK;
        for (int idx = tid; idx < BK * HD; idx += 128) {
            const int r = idx / HD, d = idx % HD;
            const int64_t j = j0 + r;
            float kv = 0.0f, vv = 0.0f;
            if (j < T_all) {
                int64_t row;
                const void *kb = kv_row(a.kp, a.k, a.P, j, &row);
                const void *vb = j < a.P ? a.vp : a.v;
                const int64_t off = row * kvw + (int64_t)kh * HD + d;
                kv = cqk_ld<T>(kb, off);
                vv = cqk_ld<T>(vb, off);
            }
            Ks[r * LDQ + d] = __float2bfloat16_rn(kv);
            Vs[r * LDQ + d] = __float2bfloat16_rn(vv);
        }
        __syncthreads();

        /* S = Q·Kᵀ for this warp's 16 query rows x 64 keys */
        {
            wm::fragment<wm::accumulator, 16, 16, 16, float> sacc[BK / 16];
#pragma unroll
            for (int nb = 0; nb < BK / 16; nb++) wm::fill_fragment(sacc[nb], 0.0f);
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                wm::fragment<wm::matrix_a, 16, 16, 16, __nv_bfloat16, wm::row_major> qa;
                wm::load_matrix_sync(qa, Qs + (warp * 16) * LDQ + kk * 16, LDQ);
#pragma unroll
                for (int nb = 0; nb < BK / 16; nb++) {
                    /* Kᵀ as a column-major B: element (k, n) = K[n][k] */
                    wm::fragment<wm::matrix_b, 16, 16, 16, __nv_bfloat16, wm::col_major> kb;
                    wm::load_matrix_sync(kb, Ks + (nb * 16) * LDQ + kk * 16, LDQ);
                    wm::mma_sync(sacc[nb], qa, kb, sacc[nb]);
                }
            }
#pragma unroll
            for (int nb = 0; nb < BK / 16; nb++)
                wm::store_matrix_sync(Ss + (warp * 16) * LDS + nb * 16, sacc[nb], LDS, wm::mem_row_major);
        }
        __syncwarp();

        /* online softmax: lanes 2r and 2r+1 share row r of the warp's 16, 32 keys each */
        {
            const int r = warp * 16 + (lane >> 1), half = lane & 1;
            const int64_t lim = Lim[r], lo = Lo[r];
            const float m_old = Mrow[r], l_old = Lrow[r];
            float *srow = Ss + r * LDS + half * 32;
            float mx = -INFINITY;
            for (int cc = 0; cc < 32; cc++) {
                const int64_t j = j0 + half * 32 + cc;
                const float s = j < lim && j >= lo ? srow[cc] * a.scale : -INFINITY;
                srow[cc] = s;
                mx = fmaxf(mx, s);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            const float m_new = fmaxf(m_old, mx);
            const bool none = m_new == -INFINITY; /* no visible key yet */
            const float corr = none ? 1.0f : (m_old == -INFINITY ? 0.0f : expf(m_old - m_new));
            float sum = 0.0f;
            __nv_bfloat16 *prow = Ps + r * LDP + half * 32;
            for (int cc = 0; cc < 32; cc++) {
                const float s = srow[cc];
                const float p = (none || s == -INFINITY) ? 0.0f : expf(s - m_new);
                sum += p;
                prow[cc] = __float2bfloat16_rn(p);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            float *orow = Os + r * LDO + half * (HD / 2);
            for (int d = 0; d < HD / 2; d++) orow[d] *= corr;
            __syncwarp(); /* both lanes of the row have read Mrow/Lrow */
            if (!half) {
                Mrow[r] = m_new;
                Lrow[r] = l_old * corr + sum;
            }
        }
        __syncwarp();

        /* O += P·V for this warp's 16 rows x 128 channels */
#pragma unroll
        for (int nb = 0; nb < HD / 16; nb++) {
            wm::fragment<wm::accumulator, 16, 16, 16, float> oacc;
            float *op = Os + (warp * 16) * LDO + nb * 16;
            wm::load_matrix_sync(oacc, op, LDO, wm::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                wm::fragment<wm::matrix_a, 16, 16, 16, __nv_bfloat16, wm::row_major> pa;
                wm::fragment<wm::matrix_b, 16, 16, 16, __nv_bfloat16, wm::row_major> vb;
                wm::load_matrix_sync(pa, Ps + (warp * 16) * LDP + kk * 16, LDP);
                wm::load_matrix_sync(vb, Vs + (kk * 16) * LDQ + nb * 16, LDQ);
                wm::mma_sync(oacc, pa, vb, oacc);
            }
            wm::store_matrix_sync(op, oacc, LDO, wm::mem_row_major);
        }
        __syncthreads(); /* K/V tiles are overwritten next */
    }

    for (int idx = tid; idx < BQ * HD; idx += 128) {
        const int r = idx / HD, d = idx % HD;
        const int64_t qi = q0 + r;
        if (qi >= a.Nq) continue;
        const float l = Lrow[r];
        cqk_st<T>(a.o, qi * qw + (int64_t)h * HD + d, l > 0.0f ? Os[r * LDO + d] / l : 0.0f);
    }
}

template <int HD> cudaError_t wmma_run(const cqk_ctx *c, const cqk_attn *a) {
    constexpr int BQ = wdims<HD>::BQ, SMEM = wdims<HD>::SMEM;
    const int64_t qt = (a->Nq + BQ - 1) / BQ;
    if (qt > 0x7fffffff) return cudaErrorInvalidValue;
    dim3 grid((unsigned)qt, (unsigned)a->Hq);
    CQK_DISPATCH(a->dt, T, {
        cudaError_t e = cudaFuncSetAttribute(k_attn_wmma<T, HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
        if (e != cudaSuccess) return e;
        k_attn_wmma<T, HD><<<grid, 128, SMEM, c->stream>>>(*a);
    });
    return cudaSuccess;
}

extern "C" size_t cqk_attention_wmma_smem(int D) {
    switch (D) {
    case 128: return (size_t)wdims<128>::SMEM;
    case 80: return (size_t)wdims<80>::SMEM;
    default: return 0;
    }
}

extern "C" cudaError_t cqk_attention_wmma(const cqk_ctx *c, const cqk_attn *a) {
    if (a->Nq <= 0 || a->Hq <= 0) return cudaSuccess;
    if (!cqk_attention_wmma_smem(a->D) || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq > 65535) return cudaErrorInvalidValue;
    cudaError_t e = a->D == 80 ? wmma_run<80>(c, a) : wmma_run<128>(c, a);
    if (e != cudaSuccess) return e;
    return cqk_launched();
}
