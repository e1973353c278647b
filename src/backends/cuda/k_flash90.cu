/*
 * k_flash90.cu — head_dim-128 attention on Hopper (sm_90a): the two products
 * on wgmma, operands streamed into shared memory by the copy engine.
 *
 * Semantics are k_attention.cu's (ops.h) and the numbers k_flash.cu's: Q, K,
 * V and P rounded to bf16 by the backend's rounding, scores, softmax and
 * accumulation in f32, the base-2 online softmax with the running max in
 * unscaled score units; only the order of the f32 additions inside a product
 * differs (the tensor cores' own), so results agree with k_flash.cu to f32
 * rounding, not bit for bit.
 *
 * Two launches per call:
 *  1. pack: K and V (prefix rows, then own rows) into bf16 tiles of 128 keys,
 *     each tile laid out exactly as the kernel wants it in shared memory: two
 *     panels of 64 head dims, a 128-byte row per key, the 16-byte chunks of
 *     row r stored at chunk ^ (r & 7) (the 128-byte swizzle wgmma reads
 *     without bank conflicts). Keys past the end are zeros (a masked
 *     probability of 0 times a garbage V could be NaN). A tile is then one
 *     contiguous 32 KiB block: one bulk copy (cp.async.bulk) moves it, no
 *     tensor map needed.
 *  2. the kernel: a block of 256 threads = two warpgroups owns 128 queries of
 *     one head, each warpgroup 64 rows. Per 128-key tile j a warpgroup issues
 *     S = Q·Kⱼᵀ (8 x wgmma m64n128k16, Q and K from shared memory), runs the
 *     online softmax on the accumulators in registers, packs P into bf16
 *     A-fragments (the accumulator layout is the register-operand layout) and
 *     issues O += P·Vⱼ (8 x wgmma, P from registers, V from shared memory
 *     read transposed: V is stored key-major, the MN-major B operand).
 *     With lower bounds (vis_lo) the block walks tiles from the one holding
 *     its rows' smallest bound: the ring's tile j is key tile t0 + j.
 *     Ping-pong: the two warpgroups take turns to issue their products (two
 *     named barriers), so one's tensor-core work runs while the other does
 *     its softmax: a turn issues P·Vⱼ and then Q·Kⱼ₊₁ᵀ.
 *     K/V tiles: a ring of ST stages, each a full barrier for K and one for V
 *     (the bulk copies complete them with their byte counts) and an empty
 *     barrier (each of the 8 warps arrives when its warpgroup's products of
 *     that tile have finished). Thread 0 issues the first ST tiles; after that
 *     lane 0 of warpgroup 1 (the later of the two) refills a stage as soon as
 *     both have released it.
 *
 * Registers per thread: O 64 f32, S 64 f32, P 32 (bf16 pairs): one block of
 * 256 threads per SM. Shared memory: Q 32 KiB + ST x 64 KiB (+1 KiB for the
 * 1024-byte alignment the swizzle needs).
 *
 * Machine code only for sm_90a (wgmma and the bulk copies are Hopper
 * features); elsewhere the kernel body is empty and the host never launches
 * it (cq_cuda_attention checks the device is compute capability 9.0).
 */
#include "k_common.cuh"
#include "k_sm90.cuh"

namespace {

constexpr int HD = 128;                  /* head_dim */
constexpr int BQ = 128;                  /* queries per block: 2 warpgroups x 64 */
constexpr int BKV = 128;                 /* keys per tile */
constexpr int PANEL_B = BKV * 128;       /* bytes of one 64-dim panel of a tile (128 B per key) */
constexpr int TILE_B = 2 * PANEL_B;      /* bytes of a K or V tile: 32 KiB */
constexpr int TILE_E = TILE_B / 2;       /* its bf16 elements */
constexpr int QPANEL_B = BQ * 128;       /* bytes of one 64-dim panel of Q */
constexpr int Q_B = 2 * QPANEL_B;        /* 32 KiB */
constexpr int NT = 256;

template <int ST> constexpr int smem_bytes() { return 1024 + Q_B + ST * 2 * TILE_B; }

/* byte offset of (row r, 16-byte chunk c in 0..15) inside a [2 panels][rows][128 B] swizzled tile */
__host__ __device__ constexpr uint32_t swz(int rows, int r, int c) {
    return (uint32_t)((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}


/* ---- 1. K and V into swizzled bf16 tiles ------------------------------------------------------ */
/* eight consecutive elements p[off .. off + 7] rounded to bf16 pairs (the backend's rounding); VEC: four
 * elements per access, p + off aligned to four elements */
template <typename T, bool VEC> __device__ __forceinline__ uint4 ld8_bf16(const void *p, int64_t off) {
    float f[8];
    if (VEC) {
        const float4 lo = cqk_io<T>::ld4((const T *)p, off), hi = cqk_io<T>::ld4((const T *)p, off + 4);
        f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w, f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) f[e] = cqk_ld<T>(p, off + e);
    }
    return make_uint4(cqk_pack_bf16(f[0], f[1]), cqk_pack_bf16(f[2], f[3]), cqk_pack_bf16(f[4], f[5]),
                      cqk_pack_bf16(f[6], f[7]));
}

/* one thread per 16-byte chunk of a key's row in both planes; blockIdx.y is the kv head (the index is a
 * shift and a mask: no division in the loop) */
template <typename T, bool VEC>
__global__ void k_flash90_pack(cqk_attn a, uint16_t *kb, uint16_t *vb, int64_t ntiles) {
    const int kh = blockIdx.y;
    const int64_t n = ntiles * BKV * 16, kvw = (int64_t)a.Hkv * HD, keys = a.P + a.Nk;
    uint16_t *kt = kb + (int64_t)kh * ntiles * TILE_E, *vt = vb + (int64_t)kh * ntiles * TILE_E;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
        const int c = (int)(idx & 15);
        const int64_t key = idx >> 4;
        uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
        if (key < keys) {
            const bool pre = key < a.P;
            const int64_t off = (pre ? key : key - a.P) * kvw + (int64_t)kh * HD + c * 8;
            kw = ld8_bf16<T, VEC>(pre ? a.kp : a.k, off);
            vw = ld8_bf16<T, VEC>(pre ? a.vp : a.v, off);
        }
        const int64_t dst = (key / BKV) * TILE_E + swz(BKV, (int)(key % BKV), c) / 2;
        *(uint4 *)(kt + dst) = kw;
        *(uint4 *)(vt + dst) = vw;
    }
}

/* ---- 2. the kernel ------------------------------------------------------------------------------ */
#if CQK_HAVE_WGMMA
/* d (+)= A·B, m64n128k16, A and B from shared memory, both K-major */
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" SM90_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : SM90_DOUTS64(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* d += A·B, m64n128k16, A from registers, B from shared memory MN-major (transposed) */
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t *a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" SM90_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : SM90_DOUTS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(b)
                 : "memory");
}

#endif

template <typename T, int ST>
__global__ void __launch_bounds__(NT, 1)
    k_flash90(cqk_attn a, const uint16_t *kb, const uint16_t *vb, int64_t ntiles_plane) {
#if CQK_HAVE_WGMMA
    extern __shared__ __align__(128) uint8_t fsm90[];
    __shared__ __align__(8) uint64_t bars[3 * ST]; /* full K, full V, empty, per stage */
    __shared__ int blk_max, blk_lo;
    const int tid = threadIdx.x, wg = tid >> 7, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int h = blockIdx.y, kh = h / (a.Hq / a.Hkv);
    const int64_t q0 = (int64_t)blockIdx.x * BQ, qld = (int64_t)a.Hq * HD;
    const uint32_t sq = ((uint32_t)__cvta_generic_to_shared(fsm90) + 1023u) & ~1023u, skv = sq + Q_B;
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(bars);
    auto full_k = [&](int s) { return bar0 + 8u * (uint32_t)s; };
    auto full_v = [&](int s) { return bar0 + 8u * (uint32_t)(ST + s); };
    auto empty = [&](int s) { return bar0 + 8u * (uint32_t)(2 * ST + s); };
    const uint16_t *kt = kb + (int64_t)kh * ntiles_plane * TILE_E, *vt = vb + (int64_t)kh * ntiles_plane * TILE_E;

    /* this thread's rows (block-local): wg*64 + (warp&3)*16 + g and + 8 */
    const int lr0 = wg * 64 + (warp & 3) * 16 + g;
    int lim0 = q0 + lr0 < a.Nq ? (int)cqk_attn_limit(a, q0 + lr0) : 0;
    int lim1 = q0 + lr0 + 8 < a.Nq ? (int)cqk_attn_limit(a, q0 + lr0 + 8) : 0;
    int lo0 = q0 + lr0 < a.Nq ? (int)cqk_attn_lower(a, q0 + lr0) : 0;
    int lo1 = q0 + lr0 + 8 < a.Nq ? (int)cqk_attn_lower(a, q0 + lr0 + 8) : 0;
    if (lo0 >= lim0) lo0 = lim0 = 0; /* sees nothing */
    if (lo1 >= lim1) lo1 = lim1 = 0;
    int wmax = max(lim0, lim1), wmin = min(lim0, lim1), wlo_max = max(lo0, lo1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
        wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
        wlo_max = max(wlo_max, __shfl_xor_sync(0xffffffffu, wlo_max, o));
    }
    /* with lower bounds, the block starts at the tile of its smallest one (one barrier, only then) */
    int t0 = 0;
    if (a.vis_lo) {
        int wlo = min(lo0 < lim0 ? lo0 : 0x7fffffff, lo1 < lim1 ? lo1 : 0x7fffffff);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) wlo = min(wlo, __shfl_xor_sync(0xffffffffu, wlo, o));
        if (tid == 0) blk_lo = 0x7fffffff;
        __syncthreads();
        if (lane == 0) atomicMin(&blk_lo, wlo);
        __syncthreads();
        t0 = (int)min((int64_t)(blk_lo / BKV), ntiles_plane);
    }
    /* the first K/V tiles are on their way before Q is read: the ring's first ST stages hold tiles 0 .. ST - 1
     * whatever this block's key range turns out to be (the pack has them all); stages the block does not walk
     * are waited for before it exits */
    const int pre = (int)min((int64_t)ST, ntiles_plane - t0);
    if (tid == 0) {
        blk_max = 0;
        for (int s = 0; s < ST; s++) {
            bar_init(full_k(s), 1);
            bar_init(full_v(s), 1);
            bar_init(empty(s), 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        for (int s = 0; s < pre; s++) {
            bar_expect(full_k(s), TILE_B);
            bulk_load(skv + (uint32_t)(s * 2 * TILE_B), kt + (int64_t)(t0 + s) * TILE_E, TILE_B, full_k(s));
            bar_expect(full_v(s), TILE_B);
            bulk_load(skv + (uint32_t)(s * 2 * TILE_B + TILE_B), vt + (int64_t)(t0 + s) * TILE_E, TILE_B, full_v(s));
        }
    }

    /* Q in bf16 (sign flipped for a negative scale) into its swizzled tile: every load first, then every
     * store (the stores are asm with a memory clobber, which no load may cross) */
    const uint32_t qsign = a.scale < 0.0f ? 0x80008000u : 0u;
    const float sl2 = fabsf(a.scale) * 1.4426950408889634f;
    const bool qvec = !((uintptr_t)a.q & (uintptr_t)(sizeof(T) * 4 - 1));
    uint4 qv[BQ * 16 / NT];
#pragma unroll
    for (int i = 0; i < BQ * 16 / NT; i++) {
        const int c = tid + NT * i, r = c >> 4, ch = c & 15;
        const int64_t row = q0 + r, off = row * qld + (int64_t)h * HD + ch * 8;
        qv[i] = make_uint4(0, 0, 0, 0);
        if (row < a.Nq) qv[i] = qvec ? ld8_bf16<T, true>(a.q, off) : ld8_bf16<T, false>(a.q, off);
    }
#pragma unroll
    for (int i = 0; i < BQ * 16 / NT; i++) {
        const int c = tid + NT * i, r = c >> 4, ch = c & 15;
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sq + swz(BQ, r, ch)), "r"(qv[i].x ^ qsign),
                     "r"(qv[i].y ^ qsign), "r"(qv[i].z ^ qsign), "r"(qv[i].w ^ qsign)
                     : "memory");
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); /* Q, written by this thread, for wgmma */
    __syncthreads();
    if (lane == 0) atomicMax(&blk_max, wmax);
    __syncthreads();
    const int n = max(0, (blk_max + BKV - 1) / BKV - t0); /* tiles t0 .. t0 + n - 1; j below counts from t0 */

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; i++) o[i] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    if (n > 0) {
        const int mine = 1 + wg, other = 2 - wg;
        const uint32_t qa = sq + (uint32_t)(wg * 64 * 128); /* this warpgroup's 64 rows in Q's panels */
        float s[64];
        uint32_t p[32];
#pragma unroll
        for (int i = 0; i < 64; i++) s[i] = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; i++) p[i] = 0u;
        /* the softmax of one tile in two halves. 1: mask, row max, p = 2^(s·c - m·c) in place of s, and the
         * factor cr for what came before (the running max changes); 2 (once O is no longer being written by
         * the previous P·V): O and l rescaled, P packed into bf16 A-fragments */
        float cr[2], ps[2];
        auto soft1 = [&](int j0) {
            if (j0 + BKV > wmin) { /* mask, only where some row of this warp sees part of the tile */
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    const int key = j0 + 8 * i + 2 * t4;
                    if (key >= lim0) s[4 * i] = -INFINITY;
                    if (key + 1 >= lim0) s[4 * i + 1] = -INFINITY;
                    if (key >= lim1) s[4 * i + 2] = -INFINITY;
                    if (key + 1 >= lim1) s[4 * i + 3] = -INFINITY;
                }
            }
            if (j0 < wlo_max) { /* the lower bounds (never without vis_lo: every lo is 0 then) */
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    const int key = j0 + 8 * i + 2 * t4;
                    if (key < lo0) s[4 * i] = -INFINITY;
                    if (key + 1 < lo0) s[4 * i + 1] = -INFINITY;
                    if (key < lo1) s[4 * i + 2] = -INFINITY;
                    if (key + 1 < lo1) s[4 * i + 3] = -INFINITY;
                }
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int i = 0; i < 16; i++) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mo = r ? m1 : m0, mn = fmaxf(mo, mx);
                const bool none = mn == -INFINITY; /* no visible key so far: p = 0, accumulators stay 0 */
                cr[r] = none ? 1.0f : cqk_ex2((mo - mn) * sl2);
                const float msc = none ? 0.0f : mn * sl2;
                float sum = 0.0f;
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    s[4 * i + 2 * r] = cqk_ex2(fmaf(s[4 * i + 2 * r], sl2, -msc));
                    s[4 * i + 2 * r + 1] = cqk_ex2(fmaf(s[4 * i + 2 * r + 1], sl2, -msc));
                    sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
                }
                ps[r] = sum;
                if (r) m1 = mn; else m0 = mn;
            }
        };
        auto soft2 = [&]() {
            l0 = l0 * cr[0] + ps[0];
            l1 = l1 * cr[1] + ps[1];
            /* once the running max settles, most tiles change no row's max in a warp: skip the 64 products
             * (cr is exactly 1 then, so skipping changes no bit) */
            if (!__all_sync(0xffffffffu, cr[0] == 1.0f && cr[1] == 1.0f)) {
#pragma unroll
                for (int i = 0; i < 16; i++) {
                    o[4 * i] *= cr[0];
                    o[4 * i + 1] *= cr[0];
                    o[4 * i + 2] *= cr[1];
                    o[4 * i + 3] *= cr[1];
                }
            }
#pragma unroll
            for (int i = 0; i < 16; i++) {
                /* chunk i = 2kc + hi holds fragment registers 4kc + 2hi (row g) and + 1 (row g + 8) */
                p[4 * (i >> 1) + 2 * (i & 1)] = cqk_pack_p(s[4 * i], s[4 * i + 1]);
                p[4 * (i >> 1) + 2 * (i & 1) + 1] = cqk_pack_p(s[4 * i + 2], s[4 * i + 3]);
            }
        };
        /* S = Q·Kⱼᵀ; the caller has waited for tile j's K and fenced */
        auto issue_s = [&](int j) {
            const uint32_t sk = skv + (uint32_t)((j % ST) * 2 * TILE_B);
#pragma unroll
            for (int k = 0; k < 8; k++)
                wgmma_ss(s, sm90_desc(qa + (uint32_t)((k >> 2) * QPANEL_B + (k & 3) * 32), 16, 1024),
                         sm90_desc(sk + (uint32_t)((k >> 2) * PANEL_B + (k & 3) * 32), 16, 1024), k > 0);
            wg_commit();
        };
        /* O += Pⱼ·Vⱼ */
        auto issue_pv = [&](int j) {
            const uint32_t sv = skv + (uint32_t)((j % ST) * 2 * TILE_B + TILE_B);
#pragma unroll
            for (int k = 0; k < 8; k++) wgmma_rs(o, &p[4 * k], sm90_desc(sv + (uint32_t)(k * 16 * 128), PANEL_B, 1024));
            wg_commit();
        };
        /* this warpgroup is done with tile j's K and V; lane 0 of warpgroup 1 (the later one) refills the stage */
        auto release = [&](int j) {
            const int st = j % ST;
            __syncwarp();
            if (lane == 0) bar_arrive1(empty(st));
            if (tid == 128 && j + ST < n) {
                bar_wait(empty(st), (uint32_t)((j / ST) & 1));
                const uint32_t sk = skv + (uint32_t)(st * 2 * TILE_B);
                bar_expect(full_k(st), TILE_B);
                bulk_load(sk, kt + (int64_t)(t0 + j + ST) * TILE_E, TILE_B, full_k(st));
                bar_expect(full_v(st), TILE_B);
                bulk_load(sk + TILE_B, vt + (int64_t)(t0 + j + ST) * TILE_E, TILE_B, full_v(st));
            }
            __syncwarp();
        };

        /* turn 0: S = Q·K₀ᵀ, and its softmax */
        if (wg == 1) turn_pass(1);
        bar_wait(full_k(0), 0);
        turn_wait(mine);
        wg_fence();
        issue_s(0);
        turn_pass(other); /* n >= 1: turn 0 is never warpgroup 1's last */
        wg_wait<0>();
        keep(s);
        soft1(t0 * BKV);
        soft2();

        /* turns 1 .. n - 1: S = Q·Kⱼ₊₁ᵀ, then O += Pⱼ·Vⱼ; the softmax of tile j + 1 runs while the second
         * product (and the other warpgroup's) keeps the tensor cores busy. No branch between the fence and
         * the products, so the compiler keeps them asynchronous. */
        for (int j = 0; j + 1 < n; j++) {
            bar_wait(full_k((j + 1) % ST), (uint32_t)(((j + 1) / ST) & 1));
            bar_wait(full_v(j % ST), (uint32_t)((j / ST) & 1));
            turn_wait(mine);
            wg_fence();
            issue_s(j + 1);
            issue_pv(j);
            turn_pass(other);
            wg_wait<1>(); /* S of tile j + 1 (P·Vⱼ may still run) */
            keep(s);
            soft1((t0 + j + 1) * BKV);
            wg_wait<0>();
            keep(o);
            keep(p);
            release(j);
            soft2();
        }
        /* turn n: O += Pₙ₋₁·Vₙ₋₁ */
        bar_wait(full_v((n - 1) % ST), (uint32_t)(((n - 1) / ST) & 1));
        turn_wait(mine);
        wg_fence();
        issue_pv(n - 1);
        if (wg == 0) turn_pass(other); /* warpgroup 1's last turn passes to nobody */
        wg_wait<0>();
        keep(o);
        keep(p);
        release(n - 1);
    }
    if (tid == 0) /* stages loaded up front that this block's keys never reached */
        for (int st = n; st < pre; st++) {
            bar_wait(full_k(st), 0);
            bar_wait(full_v(st), 0);
        }

    /* O / l, rows g and g + 8 of this warp: pairs of columns per store where y allows */
    const bool ovec = !((uintptr_t)a.o & (uintptr_t)(sizeof(T) * 2 - 1));
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float lr = r ? l1 : l0;
        lr += __shfl_xor_sync(0xffffffffu, lr, 1);
        lr += __shfl_xor_sync(0xffffffffu, lr, 2);
        const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
        const int64_t row = q0 + lr0 + 8 * r;
        if (row < a.Nq) {
            const int64_t base = row * qld + (int64_t)h * HD + 2 * t4;
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const float x0 = o[4 * i + 2 * r] * inv, x1 = o[4 * i + 2 * r + 1] * inv;
                if (ovec) {
                    cqk_io<T>::st2((T *)a.o, base + 8 * i, x0, x1);
                } else {
                    cqk_st<T>(a.o, base + 8 * i, x0);
                    cqk_st<T>(a.o, base + 8 * i + 1, x1);
                }
            }
        }
    }
#else
    (void)a, (void)kb, (void)vb, (void)ntiles_plane;
#endif
}

int64_t tiles_of(const cqk_attn *a) { return (a->P + a->Nk + BKV - 1) / BKV; }

template <int ST> cudaError_t run(const cqk_ctx *c, const cqk_attn *a, const uint16_t *kb, const uint16_t *vb, int64_t nt) {
    dim3 grid((unsigned)((a->Nq + BQ - 1) / BQ), (unsigned)a->Hq);
    CQK_DISPATCH(a->dt, T, {
        void (*kern)(cqk_attn, const uint16_t *, const uint16_t *, int64_t) = k_flash90<T, ST>;
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<ST>());
        if (e != cudaSuccess) return e;
        kern<<<grid, NT, smem_bytes<ST>(), c->stream>>>(*a, kb, vb, nt);
    });
    return cudaSuccess;
}

} // namespace

/* static shared memory of the kernel: barriers and one int, with room for its alignment */
constexpr size_t STATIC_SMEM = 256;

extern "C" size_t cqk_attention_flash90_smem(int stages) {
    return (stages >= 3 ? smem_bytes<3>() : smem_bytes<2>()) + STATIC_SMEM;
}

extern "C" size_t cqk_attention_flash90_scratch(const cqk_attn *a) {
    return (size_t)(2 * (int64_t)a->Hkv * tiles_of(a) * TILE_B);
}

extern "C" cudaError_t cqk_attention_flash90(const cqk_ctx *c, const cqk_attn *a, void *scratch, int stages) {
    if (a->Nq <= 0 || a->Hq <= 0) return cudaSuccess;
    if (a->D != HD || a->Hkv <= 0 || a->Hq % a->Hkv || a->Hq > 65535 || a->P + a->Nk > 0x7fffff00 ||
        (a->Nq + BQ - 1) / BQ > 0x7fffffff)
        return cudaErrorInvalidValue;
    const int64_t nt = tiles_of(a);
    uint16_t *kb = (uint16_t *)scratch, *vb = kb + (int64_t)a->Hkv * nt * TILE_E;
    const int64_t n = nt * BKV * 16; /* chunks per kv head */
    const dim3 pg((unsigned)(n + 255 < (int64_t)65535 * 256 ? (n + 255) / 256 : 65535), (unsigned)a->Hkv);
    /* four elements per load where every K/V pointer allows it (rows are Hkv x 128 elements, so only the
     * base pointers can break the alignment) */
    const uintptr_t al = a->dt == CQK_F32 ? 15 : 7;
    const bool vec = !(((uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->kp | (uintptr_t)a->vp) & al);
    if (n > 0)
        CQK_DISPATCH(a->dt, T, {
            if (vec) k_flash90_pack<T, true><<<pg, 256, 0, c->stream>>>(*a, kb, vb, nt);
            else k_flash90_pack<T, false><<<pg, 256, 0, c->stream>>>(*a, kb, vb, nt);
        });
    cudaError_t e = stages >= 3 ? run<3>(c, a, kb, vb, nt) : run<2>(c, a, kb, vb, nt);
    if (e != cudaSuccess) return e;
    return cqk_launched();
}
