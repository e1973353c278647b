/*
 * k_flash.cu — attention at head_dim 128 on tensor cores, FlashAttention-2
 * style: scores, probabilities and the output accumulator live in registers.
 *
 * Semantics are k_attention.cu's (ops.h): keys are the prefix rows then the
 * own rows, query i sees keys [0, lim_i), a query with no visible key gets
 * zeros, q head h reads kv head h / (Hq / Hkv).
 *
 * Two launches per call:
 *  1. pack: K and V (prefix and own rows, any activation dtype) into one bf16
 *     array per kv head, [Hkv][Tpad][128], rows padded with zeros to a
 *     multiple of 64, so tiles load as aligned 16-byte copies with no bounds
 *     checks (the zeros matter: a masked probability of 0 times a garbage V
 *     could be NaN);
 *  2. the kernel: a block of 4 warps owns 64 queries of one head, each warp 16
 *     rows. Q is loaded once into bf16 A-fragments. The visible keys are
 *     walked 64 at a time, K/V tiles double-buffered in shared memory by
 *     cp.async. Per tile: S = Q·Kᵀ by mma.sync m16n8k16 (bf16 in, f32
 *     accumulation; K fragments by ldmatrix), the online softmax in base 2
 *     on the accumulators (row max across the 4 lanes of a quad by shuffles;
 *     per-lane partial row sums, reduced once at the end), P rounded to bf16
 *     straight into A-fragments (the m16n8 accumulator layout of two key
 *     tiles is the m16k16 operand layout), then O += P·V (V fragments by
 *     ldmatrix.trans). Rows pitch 136 bf16 (272 bytes) so ldmatrix's eight
 *     row addresses fall in distinct bank groups.
 * Precision is the backend's declared attention precision (bf16 Q, K, V, P;
 * f32 scores, softmax and accumulation), as the WMMA kernel it replaces.
 */
#include "k_common.cuh"

namespace {

constexpr int FBQ = 64, FBK = 64, FHD = 128, FPITCH = FHD + 8;
constexpr int FTILE = FBK * FPITCH;                  /* bf16 elements of one K or V tile */
constexpr int FSMEM = 2 /* stages */ * 2 /* K, V */ * FTILE * 2 /* bytes */;

__device__ __forceinline__ int64_t fa_limit(const cqk_attn &a, int64_t i) {
    const int64_t T = a.P + a.Nk;
    if (a.vis) {
        int64_t v = a.vis[i];
        return v < 0 ? 0 : (v > T ? T : v);
    }
    if (a.causal) return a.P + i + 1 < T ? a.P + i + 1 : T;
    return T;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    return (uint32_t)cqk_f2bf(lo) | ((uint32_t)cqk_f2bf(hi) << 16);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* ---- 1. K and V into padded bf16 planes ------------------------------------------------------ */
template <typename T>
__global__ void k_flash_pack(cqk_attn a, uint16_t *kb, uint16_t *vb, int64_t Tpad) {
    const int64_t n = (int64_t)a.Hkv * Tpad * (FHD / 8);
    const int64_t kvw = (int64_t)a.Hkv * FHD;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int c8 = (int)(idx % (FHD / 8));
        const int64_t j = (idx / (FHD / 8)) % Tpad;
        const int kh = (int)(idx / ((FHD / 8) * Tpad));
        uint32_t kw[4] = {0, 0, 0, 0}, vw[4] = {0, 0, 0, 0};
        if (j < a.P + a.Nk) {
            const void *ks = j < a.P ? a.kp : a.k, *vs = j < a.P ? a.vp : a.v;
            const int64_t off = (j < a.P ? j : j - a.P) * kvw + (int64_t)kh * FHD + c8 * 8;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                kw[e] = pack_bf16(cqk_ld<T>(ks, off + 2 * e), cqk_ld<T>(ks, off + 2 * e + 1));
                vw[e] = pack_bf16(cqk_ld<T>(vs, off + 2 * e), cqk_ld<T>(vs, off + 2 * e + 1));
            }
        }
        const int64_t dst = ((int64_t)kh * Tpad + j) * FHD + c8 * 8;
        *(uint4 *)(kb + dst) = make_uint4(kw[0], kw[1], kw[2], kw[3]);
        *(uint4 *)(vb + dst) = make_uint4(vw[0], vw[1], vw[2], vw[3]);
    }
}

/* ---- 2. the attention kernel ------------------------------------------------------------------- */
/* Copy key rows [j0, j0 + 64) of kv head kh into stage buffers (all 128 threads, 8 x 16 bytes each). */
__device__ __forceinline__ void load_tile(uint32_t ks, uint32_t vs, const uint16_t *kb, const uint16_t *vb,
                                          int64_t base, int tid) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int c = tid + 128 * i, r = c >> 4, col = (c & 15) * 8;
        const int64_t g = base + (int64_t)r * FHD + col;
        const uint32_t s = (uint32_t)((r * FPITCH + col) * 2);
        cp_async16(ks + s, kb + g);
        cp_async16(vs + s, vb + g);
    }
}

template <typename T>
__global__ void __launch_bounds__(128, 2) k_flash_d128(cqk_attn a, const uint16_t *kb, const uint16_t *vb,
                                                       int64_t Tpad) {
    extern __shared__ __align__(128) uint16_t fsm[];
    __shared__ int blk_max;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int h = blockIdx.y, kh = h / (a.Hq / a.Hkv);
    const int64_t q0 = (int64_t)blockIdx.x * FBQ, qw = (int64_t)a.Hq * FHD;
    const int64_t r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const int lim0 = r0 < a.Nq ? (int)fa_limit(a, r0) : 0, lim1 = r1 < a.Nq ? (int)fa_limit(a, r1) : 0;

    int wmax = max(lim0, lim1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
    if (tid == 0) blk_max = 0;
    __syncthreads();
    if (lane == 0) atomicMax(&blk_max, wmax);
    __syncthreads();
    const int ntiles = (blk_max + FBK - 1) / FBK;

    /* Q as bf16 A-fragments: 8 chunks of 16 channels */
    uint32_t qf[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        const int c = kk * 16 + 2 * t4;
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const int64_t row = (e & 2) ? r1 : r0; /* e: 0,1 row0 c; 2,3 row1 c; 4,5 row0 c+8; 6,7 row1 c+8 */
            const int col = c + ((e & 4) ? 8 : 0) + (e & 1);
            v[e] = row < a.Nq ? cqk_ld<T>(a.q, row * qw + (int64_t)h * FHD + col) : 0.0f;
        }
        qf[kk][0] = pack_bf16(v[0], v[1]);
        qf[kk][1] = pack_bf16(v[2], v[3]);
        qf[kk][2] = pack_bf16(v[4], v[5]);
        qf[kk][3] = pack_bf16(v[6], v[7]);
    }

    float o[16][4];
#pragma unroll
    for (int i = 0; i < 16; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const float sl2 = a.scale * 1.4426950408889634f; /* softmax in base 2 */

    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(fsm);
    const int64_t head_base = (int64_t)kh * Tpad * FHD;
    if (ntiles > 0) load_tile(sbase, sbase + FTILE * 2, kb, vb, head_base, tid);
    cp_commit();
    /* this lane's ldmatrix row/column offsets inside a tile (bytes) */
    const uint32_t k_off = (uint32_t)((((lane & 7) + ((lane >> 4) & 1) * 8) * FPITCH + ((lane >> 3) & 1) * 8) * 2);
    const uint32_t v_off = (uint32_t)(((lane & 15) * FPITCH + (lane >> 4) * 8) * 2);

    for (int kt = 0; kt < ntiles; kt++) {
        const int st = kt & 1;
        if (kt + 1 < ntiles) {
            const uint32_t ns = sbase + (uint32_t)((st ^ 1) * 2 * FTILE * 2);
            load_tile(ns, ns + FTILE * 2, kb, vb, head_base + (int64_t)(kt + 1) * FBK * FHD, tid);
        }
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        const int j0 = kt * FBK;
        if (j0 < wmax) {
            const uint32_t ks = sbase + (uint32_t)(st * 2 * FTILE * 2), vs = ks + FTILE * 2;
            float s[8][4];
#pragma unroll
            for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < 8; kk++) {
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4(ks + k_off + (uint32_t)((np * 16 * FPITCH + kk * 16) * 2), b0, b1, b2, b3);
                    mma_bf16(s[2 * np], qf[kk], b0, b1);
                    mma_bf16(s[2 * np + 1], qf[kk], b2, b3);
                }
            }
            /* mask, scale, row max over the quad */
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                const int j = j0 + nt * 8 + 2 * t4;
                s[nt][0] = j < lim0 ? s[nt][0] * sl2 : -INFINITY;
                s[nt][1] = j + 1 < lim0 ? s[nt][1] * sl2 : -INFINITY;
                s[nt][2] = j < lim1 ? s[nt][2] * sl2 : -INFINITY;
                s[nt][3] = j + 1 < lim1 ? s[nt][3] * sl2 : -INFINITY;
                mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
                mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
            /* a row with no visible key so far keeps m = -inf, p = 0 and its (zero) accumulators */
            const float c0 = mn0 == -INFINITY ? 1.0f : exp2f(m0 - mn0);
            const float c1 = mn1 == -INFINITY ? 1.0f : exp2f(m1 - mn1);
            const float z0 = mn0 == -INFINITY ? 0.0f : mn0, z1 = mn1 == -INFINITY ? 0.0f : mn1;
            float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                s[nt][0] = exp2f(s[nt][0] - z0);
                s[nt][1] = exp2f(s[nt][1] - z0);
                s[nt][2] = exp2f(s[nt][2] - z1);
                s[nt][3] = exp2f(s[nt][3] - z1);
                ps0 += s[nt][0] + s[nt][1];
                ps1 += s[nt][2] + s[nt][3];
            }
            l0 = l0 * c0 + ps0;
            l1 = l1 * c1 + ps1;
            m0 = mn0;
            m1 = mn1;
#pragma unroll
            for (int nd = 0; nd < 16; nd++) {
                o[nd][0] *= c0;
                o[nd][1] *= c0;
                o[nd][2] *= c1;
                o[nd][3] *= c1;
            }
            /* O += P·V, 16 keys at a time */
#pragma unroll
            for (int kc = 0; kc < 4; kc++) {
                uint32_t pa[4];
                pa[0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
                pa[1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
                pa[2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
                pa[3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
#pragma unroll
                for (int ndp = 0; ndp < 8; ndp++) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4_t(vs + v_off + (uint32_t)((kc * 16 * FPITCH + ndp * 16) * 2), b0, b1, b2, b3);
                    mma_bf16(o[2 * ndp], pa, b0, b1);
                    mma_bf16(o[2 * ndp + 1], pa, b2, b3);
                }
            }
        }
        __syncthreads(); /* this stage is refilled two iterations on */
    }
    cp_wait<0>();

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int nd = 0; nd < 16; nd++) {
        const int col = nd * 8 + 2 * t4;
        if (r0 < a.Nq) {
            cqk_st<T>(a.o, r0 * qw + (int64_t)h * FHD + col, o[nd][0] * i0);
            cqk_st<T>(a.o, r0 * qw + (int64_t)h * FHD + col + 1, o[nd][1] * i0);
        }
        if (r1 < a.Nq) {
            cqk_st<T>(a.o, r1 * qw + (int64_t)h * FHD + col, o[nd][2] * i1);
            cqk_st<T>(a.o, r1 * qw + (int64_t)h * FHD + col + 1, o[nd][3] * i1);
        }
    }
}

int64_t flash_tpad(const cqk_attn *a) { return (a->P + a->Nk + FBK - 1) / FBK * FBK; }

} // namespace

extern "C" size_t cqk_attention_flash_smem(void) { return (size_t)FSMEM; }

extern "C" size_t cqk_attention_flash_scratch(const cqk_attn *a) {
    return (size_t)(2 * (int64_t)a->Hkv * flash_tpad(a) * FHD * 2);
}

extern "C" cudaError_t cqk_attention_flash(const cqk_ctx *c, const cqk_attn *a, void *scratch) {
    if (a->Nq <= 0 || a->Hq <= 0) return cudaSuccess;
    if (a->D != FHD || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq > 65535 || a->P + a->Nk > 0x7fffffc0)
        return cudaErrorInvalidValue;
    const int64_t qt = (a->Nq + FBQ - 1) / FBQ, Tpad = flash_tpad(a);
    if (qt > 0x7fffffff) return cudaErrorInvalidValue;
    uint16_t *kb = (uint16_t *)scratch, *vb = kb + (int64_t)a->Hkv * Tpad * FHD;
    const int64_t n = (int64_t)a->Hkv * Tpad * (FHD / 8);
    const unsigned pb = (unsigned)(n + 255 < (int64_t)65535 * 256 ? (n + 255) / 256 : 65535);
    dim3 grid((unsigned)qt, (unsigned)a->Hq);
    CQK_DISPATCH(a->dt, T, {
        if (n > 0) k_flash_pack<T><<<pb, 256, 0, c->stream>>>(*a, kb, vb, Tpad);
        cudaError_t e = cudaFuncSetAttribute(k_flash_d128<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, FSMEM);
        if (e != cudaSuccess) return e;
        k_flash_d128<T><<<grid, 128, FSMEM, c->stream>>>(*a, kb, vb, Tpad);
    });
    return cqk_launched();
}
