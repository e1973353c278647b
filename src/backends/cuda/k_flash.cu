/*
 * k_flash.cu — attention at head_dim 128 or 80 on tensor cores,
 * FlashAttention-2 style: scores, probabilities and the output accumulator
 * live in registers. Everything is a template on the head_dim HD (any
 * multiple of 16 up to 128); 128 (the denoisers) and 80 (the Qwen2.5-VL
 * vision tower, 16 heads x 80) are instantiated. At 80 the products take 5
 * rather than 8 k-steps (Q·Kᵀ) and 5 rather than 8 column pairs (P·V); the
 * keys are still walked 64 at a time.
 *
 * Semantics are k_attention.cu's (ops.h): keys are the prefix rows then the
 * own rows, query i sees keys [lo_i, lim_i), a query with no visible key gets
 * zeros, q head h reads kv head h / (Hq / Hkv).
 *
 * Two launches per call:
 *  1. pack: K and V (prefix and own rows, any activation dtype) into one bf16
 *     array per kv head, [Hkv][Tpad][HD], rows padded with zeros to a
 *     multiple of 64, so tiles load as aligned 16-byte copies with no bounds
 *     checks (the zeros matter: a masked probability of 0 times a garbage V
 *     could be NaN);
 *  2. the kernel: a block of NW warps owns NW x MT x 16 queries of one head,
 *     each warp MT x 16 rows. The visible keys are walked 64 at a time, K/V
 *     tiles in an ST-stage cp.async ring in shared memory (one barrier per
 *     tile). Per tile: S = Q·Kᵀ by mma.sync m16n8k16 (bf16 in, f32
 *     accumulation; K fragments by ldmatrix), the online softmax in base 2 on
 *     the accumulators (row max across the 4 lanes of a quad by shuffles;
 *     per-lane partial row sums, reduced once at the end), P rounded to bf16
 *     straight into A-fragments (the m16n8 accumulator layout of two key
 *     tiles is the m16k16 operand layout), then O += P·V (V fragments by
 *     ldmatrix.trans). Rows pitch HD + 8 bf16 (272 bytes at 128, 176 at 80) so
 *     ldmatrix's eight row addresses fall in distinct bank groups.
 *
 * Block shapes (cqk_flash_shape, chosen by CORTIQ_CUDA_ATTN):
 *  - 128 (default): 8 warps x 16 rows, 3 stages. Every K/V tile brought into
 *    shared memory serves 128 queries, half the L2 traffic and copy work per
 *    FLOP of the 64-query block; one block per SM (about 200 registers).
 *  - 64: 4 warps x 16 rows, 2 stages: the first version's shape, two blocks
 *    per SM.
 *  - 128w4: 4 warps x 32 rows (two m16 tiles per warp), 2 stages, Q kept in
 *    shared memory and read by ldmatrix each tile (registers hold O and S of
 *    32 rows). Each K/V fragment read from shared memory feeds two MMAs, so
 *    shared-memory reads per FLOP drop by about a third — the layout
 *    FlashAttention-2 uses; two blocks per SM.
 * With MT = 1, Q is held as bf16 A-fragments in registers.
 *
 * The softmax keeps the running max m in unscaled score units and forms each
 * probability with one FFMA and one ex2.approx: p = 2^(s·c - m·c), c =
 * |scale|·log2(e) (a negative scale is folded into Q's sign, exact in bf16).
 * When the whole 64-key tile is visible to every row of a warp (the common
 * case: full attention) the per-element mask is skipped, by a warp-uniform
 * test. A block walks only the tiles from its rows' smallest lower bound to
 * their largest upper bound, and a warp skips a tile none of its rows sees, so
 * block-diagonal windows cost what the windows hold; the lower bound is read
 * (and the start tile found, one extra barrier) only when vis_lo is given.
 * Precision is the backend's declared attention precision (bf16 Q, K, V, P;
 * f32 scores, softmax and accumulation).
 */
#include "k_common.cuh"

namespace {

constexpr int FBK = 64;

/* Row geometry at head_dim HD (a multiple of 16 up to 128): HD / 8 copies of 16 bytes per row, rows pitched
 * HD + 8 bf16 so that ldmatrix's eight row addresses (consecutive rows) fall in distinct bank groups: the
 * pitch is an odd number of 16-byte units (17 at 128, 11 at 80). */
template <int HD> struct fdims {
    static_assert(HD % 16 == 0 && HD >= 16 && HD <= 128, "head_dim");
    static constexpr int CH = HD / 8, PITCH = HD + 8;
    static constexpr int TILE_B = FBK * PITCH * 2; /* bytes of one K or V tile */
    static_assert((PITCH / 8) % 2 == 1, "ldmatrix rows must fall in distinct bank groups");
};

/* One block shape: NW warps of MT x 16 query rows, ST pipeline stages, head_dim HD. */
template <int HD, int NW, int MT, int ST> struct fshape {
    static constexpr int NT = NW * 32, BQ = NW * MT * 16;
    static constexpr int QBYTES = MT > 1 ? BQ * fdims<HD>::PITCH * 2 : 0; /* Q in shared memory when MT > 1 */
    static constexpr int SMEM = QBYTES + ST * 2 * fdims<HD>::TILE_B; /* dynamic */
    /* static: per-row key limits (read only by tiles that need the mask); per warp the largest and
     * smallest of its rows' limits; with MT = 2 each thread's running max and partial sum per row
     * ([NT] apart: conflict-free) — values kept here rather than in registers, which O and S fill */
    struct stat {
        int blk_max, blk_lo, lim[BQ], lo[BQ], wmax[NW], wmin[NW], wlo_min[NW], wlo_max[NW];
        float ml[MT > 1 ? 2 * MT * 2 * NT : 1];
    };
    static_assert(ST >= 2 && (MT == 1 || MT == 2), "shape");
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* ---- 1. K and V into padded bf16 planes ------------------------------------------------------ */
template <typename T, int HD>
__global__ void k_flash_pack(cqk_attn a, uint16_t *kb, uint16_t *vb, int64_t Tpad) {
    constexpr int CH = fdims<HD>::CH;
    const int64_t n = (int64_t)a.Hkv * Tpad * CH;
    const int64_t kvw = (int64_t)a.Hkv * HD;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int c8 = (int)(idx % CH);
        const int64_t j = (idx / CH) % Tpad;
        const int kh = (int)(idx / (CH * Tpad));
        uint32_t kw[4] = {0, 0, 0, 0}, vw[4] = {0, 0, 0, 0};
        if (j < a.P + a.Nk) {
            const void *ks = j < a.P ? a.kp : a.k, *vs = j < a.P ? a.vp : a.v;
            const int64_t off = (j < a.P ? j : j - a.P) * kvw + (int64_t)kh * HD + c8 * 8;
#pragma unroll
            for (int e = 0; e < 4; e++) {
                kw[e] = cqk_pack_bf16(cqk_ld<T>(ks, off + 2 * e), cqk_ld<T>(ks, off + 2 * e + 1));
                vw[e] = cqk_pack_bf16(cqk_ld<T>(vs, off + 2 * e), cqk_ld<T>(vs, off + 2 * e + 1));
            }
        }
        const int64_t dst = ((int64_t)kh * Tpad + j) * HD + c8 * 8;
        *(uint4 *)(kb + dst) = make_uint4(kw[0], kw[1], kw[2], kw[3]);
        *(uint4 *)(vb + dst) = make_uint4(vw[0], vw[1], vw[2], vw[3]);
    }
}

/* ---- 2. the attention kernel ------------------------------------------------------------------- */
/* Copy key rows [0, 64) at element offset `base` of the packed planes into one stage (K then V),
 * NT threads, 16 bytes per copy (64 x HD / 8 copies: the last round partial where NT does not divide them). */
template <int NT, int HD>
__device__ __forceinline__ void load_tile(uint32_t ks, const uint16_t *kb, const uint16_t *vb, int64_t base, int tid) {
    using F = fdims<HD>;
    constexpr int NC = FBK * F::CH;
    const uint16_t *kt = kb + base, *vt = vb + base;
#pragma unroll
    for (int i = 0; i < (NC + NT - 1) / NT; i++) {
        /* unsigned: at HD = 128 the division is the shift and mask it was before the template */
        const unsigned c = (unsigned)tid + NT * i, r = c / F::CH, col = c % F::CH * 8;
        if (NC % NT == 0 || c < (unsigned)NC) {
            const uint32_t s = (uint32_t)((r * F::PITCH + col) * 2);
            cp_async16(ks + s, kt + r * HD + col);
            cp_async16(ks + F::TILE_B + s, vt + r * HD + col);
        }
    }
}

template <typename T, int HD, int NW, int MT, int ST>
__global__ void __launch_bounds__(NW * 32, NW >= 8 ? 1 : 2)
    k_flash(cqk_attn a, const uint16_t *kb, const uint16_t *vb, int64_t Tpad) {
    using S = fshape<HD, NW, MT, ST>;
    using F = fdims<HD>;
    constexpr int FPITCH = F::PITCH, FTILE_B = F::TILE_B, KS = HD / 16, ND = HD / 8;
    extern __shared__ __align__(128) uint16_t fsm[];
    __shared__ typename S::stat ss;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int h = blockIdx.y, kh = h / (a.Hq / a.Hkv);
    const int64_t q0 = (int64_t)blockIdx.x * S::BQ, qw = (int64_t)a.Hq * HD;
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(fsm), kvbase = sbase + S::QBYTES;
    const int64_t head_base = (int64_t)kh * Tpad * HD;

    /* the first tiles' copies go out before anything else; tiles past this block's keys
     * (but inside the padded plane) may be fetched and never used */
    const int64_t plane_tiles = Tpad / FBK;
    int t0 = 0; /* the first tile any row of this block sees */
    if (a.vis_lo) {
        if (tid == 0) ss.blk_lo = 0x7fffffff;
        __syncthreads();
        if (tid < S::BQ && q0 + tid < a.Nq) {
            const int lo = (int)cqk_attn_lower(a, q0 + tid);
            if (lo < (int)cqk_attn_limit(a, q0 + tid)) atomicMin(&ss.blk_lo, lo);
        }
        __syncthreads();
        t0 = ss.blk_lo / FBK;
    }
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (t0 + s < plane_tiles)
            load_tile<S::NT, HD>(kvbase + (uint32_t)(s * 2 * FTILE_B), kb, vb, head_base + (int64_t)(t0 + s) * FBK * HD,
                                 tid);
        cp_commit();
    }

    /* this thread's rows: m-tile mt, rows g and g + 8 */
    int wmax = 0, wmin = 0x7fffffff, wlo_min = 0x7fffffff, wlo_max = 0;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int lr = (warp * MT + mt) * 16 + g + 8 * r;
            int lim = q0 + lr < a.Nq ? (int)cqk_attn_limit(a, q0 + lr) : 0;
            int lo = q0 + lr < a.Nq ? (int)cqk_attn_lower(a, q0 + lr) : 0;
            if (lo >= lim) lo = lim = 0; /* sees nothing */
            if (t4 == 0) {
                ss.lim[lr] = lim;
                ss.lo[lr] = lo;
            }
            wmax = max(wmax, lim);
            wmin = min(wmin, lim);
            if (lo < lim) wlo_min = min(wlo_min, lo);
            wlo_max = max(wlo_max, lo);
        }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
        wlo_min = min(wlo_min, __shfl_xor_sync(0xffffffffu, wlo_min, o));
        wlo_max = max(wlo_max, __shfl_xor_sync(0xffffffffu, wlo_max, o));
    }
    if (tid == 0) ss.blk_max = 0;
    if (lane == 0) {
        ss.wmax[warp] = wmax;
        ss.wmin[warp] = wmin;
        ss.wlo_min[warp] = wlo_min;
        ss.wlo_max[warp] = wlo_max;
    }

    /* Q in bf16 (sign flipped for a negative scale, so the base-2 factor is positive):
     * A-fragments in registers (MT = 1) or a [BQ][FPITCH] tile in shared memory (MT = 2) */
    const uint32_t qsign = a.scale < 0.0f ? 0x80008000u : 0u;
    const float sl2 = fabsf(a.scale) * 1.4426950408889634f;
    uint32_t qf[MT == 1 ? KS : 1][4];
    if constexpr (MT == 1) {
        const int64_t r0 = q0 + warp * 16 + g, r1 = r0 + 8;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const int c = kk * 16 + 2 * t4;
            float v[8];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int64_t row = (e & 2) ? r1 : r0; /* e: 0,1 row0 c; 2,3 row1 c; 4,5 row0 c+8; 6,7 row1 c+8 */
                const int col = c + ((e & 4) ? 8 : 0) + (e & 1);
                v[e] = row < a.Nq ? cqk_ld<T>(a.q, row * qw + (int64_t)h * HD + col) : 0.0f;
            }
#pragma unroll
            for (int e = 0; e < 4; e++) qf[kk][e] = cqk_pack_bf16(v[2 * e], v[2 * e + 1]) ^ qsign;
        }
    } else {
        constexpr int NC = S::BQ * F::CH; /* 16-byte groups of the Q tile */
#pragma unroll 4
        for (int i = 0; i < (NC + S::NT - 1) / S::NT; i++) {
            const unsigned c = (unsigned)tid + S::NT * i, r = c / F::CH, col = c % F::CH * 8;
            if (NC % S::NT != 0 && c >= (unsigned)NC) break;
            const int64_t row = q0 + r;
            uint32_t w[4] = {0, 0, 0, 0};
            if (row < a.Nq) {
                const int64_t off = row * qw + (int64_t)h * HD + col;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    w[e] = cqk_pack_bf16(cqk_ld<T>(a.q, off + 2 * e), cqk_ld<T>(a.q, off + 2 * e + 1)) ^ qsign;
            }
            *(uint4 *)(fsm + r * FPITCH + col) = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
    __syncthreads();
    if (lane == 0) atomicMax(&ss.blk_max, wmax);
    __syncthreads(); /* also publishes the Q tile */
    const int ntiles = (ss.blk_max + FBK - 1) / FBK;

    float o[MT][ND][4];
    float mreg[MT][2], lreg[MT][2]; /* MT = 1 */
    auto M = [&](int mt, int r) -> float & {
        if constexpr (MT > 1) return ss.ml[(mt * 2 + r) * S::NT + tid];
        else return mreg[mt][r];
    };
    auto L = [&](int mt, int r) -> float & {
        if constexpr (MT > 1) return ss.ml[((MT + mt) * 2 + r) * S::NT + tid];
        else return lreg[mt][r];
    };
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int i = 0; i < ND; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
        M(mt, 0) = M(mt, 1) = -INFINITY;
        L(mt, 0) = L(mt, 1) = 0.0f;
    }

    /* this lane's ldmatrix row/column offsets inside a tile (bytes) */
    const uint32_t k_off = (uint32_t)((((lane & 7) + ((lane >> 4) & 1) * 8) * FPITCH + ((lane >> 3) & 1) * 8) * 2);
    const uint32_t v_off = (uint32_t)(((lane & 15) * FPITCH + (lane >> 4) * 8) * 2);
    const uint32_t q_off = sbase + (uint32_t)(warp * MT * 16 * FPITCH * 2) + v_off; /* A-fragments, MT = 2 */

    int st = 0; /* the stage holding tile kt */
    for (int kt = t0; kt < ntiles; kt++) {
        cp_wait<ST - 2>(); /* this thread's copies of tile kt have landed */
        __syncthreads();   /* everyone's have, and everyone is done with tile kt - 1 */
        {
            const int nx = kt + ST - 1; /* refill the stage of tile kt - 1 */
            if (nx < ntiles) {
                const int sx = st == 0 ? ST - 1 : st - 1;
                load_tile<S::NT, HD>(kvbase + (uint32_t)(sx * 2 * FTILE_B), kb, vb, head_base + (int64_t)nx * FBK * HD,
                                     tid);
            }
            cp_commit(); /* one group per iteration, empty or not, keeps the wait count exact */
        }
        const int j0 = kt * FBK;
        if (j0 < ss.wmax[warp] && j0 + FBK > ss.wlo_min[warp]) {
            const uint32_t ks = kvbase + (uint32_t)(st * 2 * FTILE_B), vs = ks + FTILE_B;
            float s[MT][8][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int i = 0; i < 8; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t qa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if constexpr (MT == 1) {
#pragma unroll
                        for (int e = 0; e < 4; e++) qa[mt][e] = qf[kk][e];
                    } else {
                        ldsm_x4(q_off + (uint32_t)((mt * 16 * FPITCH + kk * 16) * 2), qa[mt]);
                    }
                }
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    uint32_t b[4];
                    ldsm_x4(ks + k_off + (uint32_t)((np * 16 * FPITCH + kk * 16) * 2), b);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_bf16(s[mt][2 * np], qa[mt], b[0], b[1]);
                        mma_bf16(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
                    }
                }
            }
            /* mask, only where some row of this warp sees part of the tile */
            if (j0 + FBK > ss.wmin[warp]) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const int lim0 = ss.lim[(warp * MT + mt) * 16 + g], lim1 = ss.lim[(warp * MT + mt) * 16 + g + 8];
#pragma unroll
                    for (int nt = 0; nt < 8; nt++) {
                        const int j = j0 + nt * 8 + 2 * t4;
                        if (j >= lim0) s[mt][nt][0] = -INFINITY;
                        if (j + 1 >= lim0) s[mt][nt][1] = -INFINITY;
                        if (j >= lim1) s[mt][nt][2] = -INFINITY;
                        if (j + 1 >= lim1) s[mt][nt][3] = -INFINITY;
                    }
                }
            }
            if (j0 < ss.wlo_max[warp]) { /* the lower bounds (never without vis_lo: every lo is 0 then) */
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const int lo0 = ss.lo[(warp * MT + mt) * 16 + g], lo1 = ss.lo[(warp * MT + mt) * 16 + g + 8];
#pragma unroll
                    for (int nt = 0; nt < 8; nt++) {
                        const int j = j0 + nt * 8 + 2 * t4;
                        if (j < lo0) s[mt][nt][0] = -INFINITY;
                        if (j + 1 < lo0) s[mt][nt][1] = -INFINITY;
                        if (j < lo1) s[mt][nt][2] = -INFINITY;
                        if (j + 1 < lo1) s[mt][nt][3] = -INFINITY;
                    }
                }
            }
            /* online softmax per row: max over the quad, rescale, p = 2^(s·c - m·c), rounded to bf16
             * A-fragments at once (pp[mt][kc]: keys 16 kc .. 16 kc + 15; rows g, g + 8) */
            uint32_t pp[MT][4][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    float mx = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float mo = M(mt, r), mn = fmaxf(mo, mx);
                    /* a row with no visible key so far keeps m = -inf, p = 0 and its (zero) accumulators */
                    const bool none = mn == -INFINITY;
                    const float cr = none ? 1.0f : cqk_ex2((mo - mn) * sl2);
                    const float msc = none ? 0.0f : mn * sl2;
                    M(mt, r) = mn;
                    float ps = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < 8; nt++) {
                        const float p0 = cqk_ex2(fmaf(s[mt][nt][2 * r], sl2, -msc));
                        const float p1 = cqk_ex2(fmaf(s[mt][nt][2 * r + 1], sl2, -msc));
                        ps += p0 + p1;
                        pp[mt][nt >> 1][(nt & 1) * 2 + r] = cqk_pack_p(p0, p1);
                    }
                    L(mt, r) = L(mt, r) * cr + ps;
#pragma unroll
                    for (int nd = 0; nd < ND; nd++) {
                        o[mt][nd][2 * r] *= cr;
                        o[mt][nd][2 * r + 1] *= cr;
                    }
                }
            /* O += P·V, 16 keys at a time */
#pragma unroll
            for (int kc = 0; kc < 4; kc++) {
#pragma unroll
                for (int ndp = 0; ndp < KS; ndp++) {
                    uint32_t b[4];
                    ldsm_x4_t(vs + v_off + (uint32_t)((kc * 16 * FPITCH + ndp * 16) * 2), b);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_bf16(o[mt][2 * ndp], pp[mt][kc], b[0], b[1]);
                        mma_bf16(o[mt][2 * ndp + 1], pp[mt][kc], b[2], b[3]);
                    }
                }
            }
        }
        st = st == ST - 1 ? 0 : st + 1;
    }
    cp_wait<0>();

#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lr = L(mt, r);
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
            const int64_t row = q0 + (warp * MT + mt) * 16 + g + 8 * r;
            if (row < a.Nq) {
                const int64_t base = row * qw + (int64_t)h * HD + 2 * t4;
#pragma unroll
                for (int nd = 0; nd < ND; nd++) {
                    cqk_st<T>(a.o, base + nd * 8, o[mt][nd][2 * r] * inv);
                    cqk_st<T>(a.o, base + nd * 8 + 1, o[mt][nd][2 * r + 1] * inv);
                }
            }
        }
}

int64_t flash_tpad(const cqk_attn *a) { return (a->P + a->Nk + FBK - 1) / FBK * FBK; }

template <int HD, int NW, int MT, int ST>
cudaError_t flash_run(const cqk_ctx *c, const cqk_attn *a, const uint16_t *kb, const uint16_t *vb, int64_t Tpad) {
    using S = fshape<HD, NW, MT, ST>;
    const int64_t qt = (a->Nq + S::BQ - 1) / S::BQ;
    if (qt > 0x7fffffff) return cudaErrorInvalidValue;
    dim3 grid((unsigned)qt, (unsigned)a->Hq);
    CQK_DISPATCH(a->dt, T, {
        void (*kern)(cqk_attn, const uint16_t *, const uint16_t *, int64_t) = k_flash<T, HD, NW, MT, ST>;
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
        /* all of the unified L1 to shared memory: the kernel reads global memory only through cp.async.cg
         * (L2) apart from Q once, and the shapes with two blocks per SM need 2 x 104 KB */
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) return e;
        kern<<<grid, S::NT, S::SMEM, c->stream>>>(*a, kb, vb, Tpad);
    });
    return cudaSuccess;
}

template <int HD> cudaError_t flash_shape_run(const cqk_ctx *c, const cqk_attn *a, void *scratch, int shape) {
    const int64_t Tpad = flash_tpad(a);
    uint16_t *kb = (uint16_t *)scratch, *vb = kb + (int64_t)a->Hkv * Tpad * HD;
    const int64_t n = (int64_t)a->Hkv * Tpad * fdims<HD>::CH;
    const unsigned pb = (unsigned)(n + 255 < (int64_t)65535 * 256 ? (n + 255) / 256 : 65535);
    if (n > 0) CQK_DISPATCH(a->dt, T, { k_flash_pack<T, HD><<<pb, 256, 0, c->stream>>>(*a, kb, vb, Tpad); });
    switch (shape) {
    case CQK_FLASH_64: return flash_run<HD, 4, 1, 2>(c, a, kb, vb, Tpad);
    case CQK_FLASH_128W4: return flash_run<HD, 4, 2, 2>(c, a, kb, vb, Tpad);
    default: return flash_run<HD, 8, 1, 3>(c, a, kb, vb, Tpad);
    }
}

template <int HD> size_t flash_smem(int shape) {
    switch (shape) {
    case CQK_FLASH_64: return fshape<HD, 4, 1, 2>::SMEM + sizeof(typename fshape<HD, 4, 1, 2>::stat);
    case CQK_FLASH_128W4: return fshape<HD, 4, 2, 2>::SMEM + sizeof(typename fshape<HD, 4, 2, 2>::stat);
    default: return fshape<HD, 8, 1, 3>::SMEM + sizeof(typename fshape<HD, 8, 1, 3>::stat);
    }
}

} // namespace

/* dynamic plus static shared memory of a block: what must fit the device's per-block opt-in limit; 0 for a
 * head_dim without a kernel (128, 80 and 64 are instantiated) */
extern "C" size_t cqk_attention_flash_smem(int shape, int D) {
    switch (D) {
    case 128: return flash_smem<128>(shape);
    case 80: return flash_smem<80>(shape);
    case 64: return flash_smem<64>(shape);
    default: return 0;
    }
}

extern "C" size_t cqk_attention_flash_scratch(const cqk_attn *a) {
    return (size_t)(2 * (int64_t)a->Hkv * flash_tpad(a) * a->D * 2);
}

extern "C" cudaError_t cqk_attention_flash(const cqk_ctx *c, const cqk_attn *a, void *scratch, int shape) {
    if (a->Nq <= 0 || a->Hq <= 0) return cudaSuccess;
    if (!cqk_attention_flash_smem(shape, a->D) || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq > 65535 ||
        a->P + a->Nk > 0x7fffffc0)
        return cudaErrorInvalidValue;
    const cudaError_t e =
        a->D == 80   ? flash_shape_run<80>(c, a, scratch, shape)
        : a->D == 64 ? flash_shape_run<64>(c, a, scratch, shape)
                     : flash_shape_run<128>(c, a, scratch, shape);
    if (e != cudaSuccess) return e;
    return cqk_launched();
}
