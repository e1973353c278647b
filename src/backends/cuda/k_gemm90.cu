/*
 * k_gemm90.cu — the matmul on Hopper (sm_90a) with its epilogue in registers:
 * y (+)= gate ⊙ act(scale · (x·Wᵀ) · row and column scales + bias), with no
 * f32 round trip through memory.
 *
 * Why our own: cuBLASLt computes the product as fast as anything, but the
 * operands' power-of-two row scales (the range guard), SwiGLU's pairing of
 * two products, the gate and the residual cannot be expressed in its epilogue
 * for f16 (its per-column alpha vector has no f16 algorithm), so the product
 * went to f32 scratch and a second kernel read it back: about a quarter of the
 * GEMM time in the 7B step. Here the accumulators are finished where they are.
 *
 * Operands as the rest of the backend has them (cuda_kernels.h): x staged f16
 * [M, ldx] with a scale per row, W an f16 plane [rows, ldw] with a scale per
 * row; both K-contiguous, pitches multiples of 8, padding zeros.
 *
 * Persistent: one block per SM, 384 threads = three warpgroups, in clusters of
 * CLUSTER blocks on neighbouring row tiles; each cluster walks a sequence of
 * tiles (clusters take turns over the tile list, `group` row groups at a time
 * so that the tiles in flight share x and W in L2), every block of it the
 * same columns on its own BM = 64 rows. Warpgroup 0's first thread copies with
 * the tensor memory accelerator, tile after tile through one ring of five
 * 40 KiB stages: per 64-wide K step the block's 64 x 64 tile of x, and its
 * part of the 256 x 64 W tile multicast into every block of the cluster (each
 * loads one part), all with the 128-byte swizzle wgmma reads without bank
 * conflicts and zeros past the ends; the bytes complete a stage's full
 * barrier. Warpgroups 1 and 2 take the block's tiles in turn (even and odd):
 * per K step 4 x wgmma.m64n256k16 into 128 f32 accumulators per thread
 * (setmaxnreg gives them the copying warpgroup's registers), one step in
 * flight while the next is issued, each warp releasing the stage in every
 * block once its products are done. The two pass a turn on a named barrier as
 * soon as the last products of a tile are issued, so one runs its epilogue
 * while the other's products keep the tensor cores busy (the "ping-pong").
 * Warps 1-3 of warpgroup 0 put each tile's per-column factors in shared memory
 * for the warpgroup that will finish it and prefetch its residual into L2.
 *
 * SwiGLU: the 256 W rows of a tile are the gate rows [n0, n0 + 128) and the
 * matching up rows (of the fused [gate; up] weight, or of the second weight),
 * so each thread holds gate and up of the same outputs and a tile has 128
 * output columns.
 *
 * The epilogue is cqk_matmul_epilogue's arithmetic in the same order, so the
 * two paths differ only by the order of the f32 additions inside the product.
 *
 * Status: correct (test_ops_gpu_wgmma runs every matmul case of the op test
 * on it, with shapes of several tiles per block; test_qi21_cuda's goldens give
 * the same 2.05e-3 with it). The K loop is kept to a few instructions per step
 * (see the product warpgroups): it used to take as long as the step's products,
 * so the other warpgroup's epilogue, issuing from the same schedulers, stretched
 * them. On the H200 (1024^2 layer of the 7B step, each kernel alone at the
 * GPU's own clocks) it runs SwiGLU in 1.18 ms against 1.26 for cuBLASLt's two
 * GEMMs and the epilogue kernel, so it takes every SwiGLU matmul on compute
 * capability 9.0. The plain projections stay on cuBLASLt plus the epilogue
 * kernel: level on q/k/v (219 us against 221), behind on the attention output
 * (242 against 234) and the MLP down projection (607 against 576).
 * CORTIQ_CUDA_GEMM=wgmma runs every matmul here. docs/CUDA.md (Matmul) has the
 * measurements.
 *
 * Machine code only for sm_90a; elsewhere the body is empty and the host never
 * launches it (cuda_gemm.c checks the device is compute capability 9.0).
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "k_common.cuh"
#include "k_sm90.cuh"

namespace {

constexpr int BM = 64, BN = 256, BK = 64, ST = 5, NT = 384;
/* blocks per cluster (along the rows; W's tiles are multicast to all) and row groups per raster group: on the
 * 7B step at 1024^2 (4 layers), clusters of 4 took 18.3 ms against 17.3 for 2; groups of 4 row groups 18.3 ms,
 * of 8 17.3 and of 16 17.1 */
constexpr int CLUSTER = 2, GROUP = 16;
constexpr int A_B = BM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B;
constexpr int SMEM = 1024 + ST * STAGE_B;

#if CQK_HAVE_WGMMA
/* registers per thread after setmaxnreg: the copying warpgroup gives up what the two product warpgroups
 * (128 accumulators each) take; 128 x 56 + 256 x 224 fits the 384 x 168 a block gets at launch */
constexpr int RP = 56, RC = 224;
__device__ __forceinline__ float silu_g(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh_g(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
/* d (+)= A·B, m64n256k16, A and B from shared memory, K-major */
__device__ __forceinline__ void wgmma256(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" SM90_REGS128 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : SM90_DOUTS128(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* a box of the tensor map at (c0 = column, c1 = row) into dst, completing b with its bytes; rows and columns
 * past the tensor are zeros */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *m, int c0, int c1, uint32_t b) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"((uint64_t)m), "r"(c0), "r"(c1), "r"(b) : "memory");
}
/* the same into every block of `mask` (same offsets), each block's barrier completed with its bytes */
__device__ __forceinline__ void tma_load_mc(uint32_t dst, const CUtensorMap *m, int c0, int c1, uint32_t b, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(dst), "l"((uint64_t)m), "r"(c0), "r"(c1), "r"(b), "h"(mask) : "memory");
}
#endif

#if CQK_HAVE_WGMMA
/* cluster tile ct -> row group p and column tile cl: the clusters walk the column tiles of `group` row groups
 * before the next ones, so the tiles in flight at once share their x rows and W rows in L2 */
__device__ __forceinline__ void tile_of(int64_t ct, int64_t rg, int64_t nc, int group, int64_t &p, int64_t &cl) {
    const int64_t first = ct / ((int64_t)group * nc) * group, gs = rg - first < group ? rg - first : group;
    const int64_t r = ct - first * nc;
    p = first + r % gs, cl = r / gs;
}
#endif

template <typename TY, int ACT, int CL>
__global__ void __launch_bounds__(NT, 1)
    k_gemm90(cqk_dev dv, cqk_gemm90 g, int pairs, int group, const __grid_constant__ CUtensorMap tx,
             const __grid_constant__ CUtensorMap tw1, const __grid_constant__ CUtensorMap tw2) {
#if CQK_HAVE_WGMMA
    extern __shared__ __align__(128) uint8_t gsm[];
    /* the ring's full and empty barriers; per product warpgroup, its column factors' full and empty */
    __shared__ __align__(8) uint64_t bars[2 * ST + 4];
    /* per product warpgroup, its tile's per-column factors: W's row scales and biases (gate and up halves for
     * SwiGLU), the gate */
    __shared__ float cw1[2][BN], cb1[2][BN], cg[2][BN], cw2[2][BN / 2], cb2[2][BN / 2];
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const bool swiglu = ACT == CQK_ACT_SWIGLU;
    const int bn = swiglu ? BN / 2 : BN; /* output columns per tile */
    /* the tiles: row groups (CL row tiles, one per block of the cluster) by column tiles; cluster k of G takes
     * the cluster tiles k, k + G, k + 2G, ..., every block of it the same sequence on its own rows */
    const int64_t rg = ((g.M + BM - 1) / BM + CL - 1) / CL, nc = (g.N + bn - 1) / bn, T = rg * nc;
    const int64_t G = gridDim.x / CL, kc = blockIdx.x / CL;
    const int nt = kc < T ? (int)((T - kc + G - 1) / G) : 0;
    const int nk = (int)((g.K + BK - 1) / BK);
    uint32_t rank;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    auto tile = [&](int i, int64_t &m0, int64_t &n0) {
        int64_t p, cl;
        tile_of(kc + (int64_t)i * G, rg, nc, group, p, cl);
        m0 = (p * CL + rank) * BM, n0 = cl * bn;
    };
    const uint32_t s0 = ((uint32_t)__cvta_generic_to_shared(gsm) + 1023u) & ~1023u;
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(bars);
    auto full = [&](uint32_t s) { return bar0 + 8u * s; };
    auto empty = [&](uint32_t s) { return bar0 + 8u * (ST + s); };
    auto colfull = [&](int b) { return bar0 + 8u * (uint32_t)(2 * ST + b); };
    auto colempty = [&](int b) { return bar0 + 8u * (uint32_t)(2 * ST + 2 + b); };
    if (tid == 0) {
        for (uint32_t s = 0; s < ST; s++) {
            bar_init(full(s), 1);       /* the copying thread's arrive, plus the bytes */
            bar_init(empty(s), 4 * CL); /* the 4 warps of the consuming warpgroup in each block of the cluster */
        }
        for (int b = 0; b < 2; b++) {
            bar_init(colfull(b), 96); /* the threads of warps 1-3 */
            bar_init(colempty(b), 4); /* the consumer's warps */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    /* every block's barriers exist before any block's copies or arrivals reach them */
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");

    if (wg == 0) {
        /* registers move from this warpgroup (copies and loads need few) to the two that hold accumulators */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(RP) : "memory");
        if (tid == 0) {
            /* ---- the copies, one thread, tile after tile through one ring: x's BM rows for this block, and
             * this block's part of W's BN rows sent to every block of the cluster ---- */
            const CUtensorMap *tb = swiglu && rank >= CL / 2 ? &tw2 : &tw1;
            const int part = swiglu ? (int)(rank % (CL / 2)) : (int)rank;
            uint32_t s = 0, ph = 0; /* the stage and the phase of its barriers' current round */
            bool wrapped = false;   /* every stage has been filled once */
            for (int i = 0; i < nt; i++) {
                int64_t m0, n0;
                tile(i, m0, n0);
                const int brow = (int)(n0 + (int64_t)part * (BN / CL));
                for (int kt = 0; kt < nk; kt++) {
                    /* every block's products of what this stage held are done (the multicast writes all) */
                    if (wrapped) bar_wait(empty(s), ph ^ 1);
                    const uint32_t sa = s0 + s * STAGE_B, sb = sa + A_B;
                    bar_expect(full(s), (uint32_t)STAGE_B);
                    tma_load(sa, &tx, kt * BK, (int)m0, full(s));
                    tma_load_mc(sb + rank * (B_B / CL), tb, kt * BK, brow, full(s), (uint16_t)((1u << CL) - 1));
                    if (++s == ST) s = 0, ph ^= 1, wrapped = true;
                }
            }
        } else if (tid >= 32) {
            /* ---- warps 1-3: each tile's per-column factors for the warpgroup that will finish it (tile i goes
             * to warpgroup 1 + (i & 1)), and its residual tile into L2, a tile ahead of that epilogue ---- */
            for (int i = 0; i < nt; i++) {
                const int b = i & 1, u = i >> 1;
                int64_t m0, n0;
                tile(i, m0, n0);
                if (u > 0) bar_wait(colempty(b), (uint32_t)((u - 1) & 1));
                for (int c = tid - 32; c < bn; c += 96) {
                    const int64_t j = n0 + c;
                    const bool in = j < g.N;
                    cw1[b][c] = in ? g.ws1[j] : 0.0f;
                    cb1[b][c] = in && g.bias ? g.bias[j] : 0.0f;
                    cg[b][c] = in && g.gate ? g.gate[j] : 1.0f;
                    if (swiglu) {
                        cw2[b][c] = in ? g.ws2[j] : 0.0f;
                        cb2[b][c] = in && g.bias2 ? g.bias2[j] : 0.0f;
                    }
                }
                bar_arrive1(colfull(b));
                if (g.accumulate) {
                    constexpr int PER = 128 / (int)sizeof(TY);
                    const int lines = (bn + PER - 1) / PER;
                    for (int q = tid - 32; q < BM * lines; q += 96) {
                        const int64_t m = m0 + q / lines, j = n0 + (q % lines) * PER;
                        if (m < g.M && j < g.N)
                            asm volatile("prefetch.global.L2::evict_last [%0];\n" ::"l"((const TY *)g.y + m * g.ldy + j));
                    }
                }
            }
        }
    } else {
    /* ---- the products and the epilogue: warpgroup cw takes the block's tiles cw, cw + 2, ...; the two take
     * turns on the tensor cores (one's products while the other finishes its tile), passing the turn as soon as
     * their last products of a tile are issued ---- */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(RC) : "memory");
    const int cw = wg - 1;
    const int g4 = lane >> 2, t4 = lane & 3, wq = (tid >> 5) & 3;
    /* The K loop keeps its bookkeeping to a few instructions per step: a product warp that spends longer
     * than a step's products (~500 cycles) between two steps leaves the tensor cores idle, and the other
     * warpgroup's epilogue, issuing from the same schedulers, makes every instruction here slower. So the
     * stage and its phase advance by counting (no division by ST), the descriptors are the stage-0 ones
     * plus an offset in their address field (16-byte units, no carry out of it: shared memory is below
     * 256 KiB), and a lane's empty barrier in the cluster is found once. */
    const uint32_t da0 = (uint32_t)sm90_desc(s0, 16, 1024), db0 = (uint32_t)sm90_desc(s0 + A_B, 16, 1024);
    const uint32_t dhi = (uint32_t)(sm90_desc(s0, 16, 1024) >> 32);
    uint32_t rempty = 0; /* lane l < CL: empty(0) of block l of the cluster, in the cluster's window */
    if (lane < CL) asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rempty) : "r"(empty(0)), "r"((uint32_t)lane));
    /* a stage's products are done in this warp: release it in every block of the cluster. Default
     * (CTA-scope) semantics: the arrival only says this warp's products of the stage are done
     * (wgmma.wait_group saw them complete), which orders nothing else; .release.cluster made ptxas put a
     * cluster-wide memory barrier before every arrival, and the warps stalled there once per K step. */
    auto release = [&](uint32_t s) {
        __syncwarp();
        if (lane < CL)
            asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(rempty + 8u * s) : "memory");
    };
    float acc[BN / 2];
    for (int i = cw; i < nt; i += 2) {
        int64_t m0, n0;
        tile(i, m0, n0);
        if (i > 0) turn_wait(1 + cw);
        const uint32_t it0 = (uint32_t)i * (uint32_t)nk;
        uint32_t s = it0 % ST, ph = (it0 / ST) & 1, ps = 0;
        for (int kt = 0; kt < nk; kt++) {
            bar_wait(full(s), ph);
            const uint32_t o = s * (uint32_t)(STAGE_B >> 4);
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                wgmma256(acc, ((uint64_t)dhi << 32) | (da0 + o + 2u * kk), ((uint64_t)dhi << 32) | (db0 + o + 2u * kk),
                         kt > 0 || kk > 0);
            wg_commit();
            wg_wait<1>();
            if (kt > 0) release(ps); /* the products of step kt - 1 are done */
            ps = s;
            if (++s == ST) s = 0, ph ^= 1;
        }
        if (i + 1 < nt) turn_pass(2 - cw);
        wg_wait<0>();
        keep(acc);
        release(ps);

        /* ---- the epilogue, as cqk_matmul_epilogue: per-column factors from shared memory, the residual read
         * in chunks so its latency is paid a few times per thread rather than once per element, pairs of
         * columns in one access ---- */
        bar_wait(colfull(cw), (uint32_t)((i >> 1) & 1));
        constexpr int NI = swiglu ? BN / 16 : BN / 8, CH = swiglu ? 4 : 8;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t m = m0 + wq * 16 + g4 + 8 * r;
            if (m >= g.M) continue;
            const float xs = g.xscale[m];
            TY *yrow = (TY *)g.y + m * g.ldy;
#pragma unroll
            for (int i0 = 0; i0 < NI; i0 += CH) {
                float2 old[CH];
                if (g.accumulate) {
#pragma unroll
                    for (int ii = 0; ii < CH; ii++) {
                        const int64_t j = n0 + 8 * (i0 + ii) + 2 * t4;
                        if (pairs && j + 1 < g.N) old[ii] = cqk_io<TY>::ld2(yrow, j);
                        else old[ii] = make_float2(j < g.N ? cqk_ld<TY>(yrow, j) : 0.0f, j + 1 < g.N ? cqk_ld<TY>(yrow, j + 1) : 0.0f);
                    }
                }
#pragma unroll
                for (int ii = 0; ii < CH; ii++) {
                    const int i1 = i0 + ii, c0 = 8 * i1 + 2 * t4;
                    const int64_t j0 = n0 + c0;
                    float out[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int c = c0 + e;
                        float v = g.scale * (acc[4 * i1 + 2 * r + e] * xs * cw1[cw][c]) + cb1[cw][c];
                        if (ACT == CQK_ACT_GELU_TANH) v = gelu_tanh_g(v);
                        if (ACT == CQK_ACT_SILU) v = silu_g(v);
                        if (swiglu) {
                            const float u = g.scale * (acc[4 * (i1 + BN / 16) + 2 * r + e] * xs * cw2[cw][c]) + cb2[cw][c];
                            v = silu_g(v) * u;
                        }
                        if (g.accumulate) v = (e ? old[ii].y : old[ii].x) + cg[cw][c] * v;
                        if (j0 + e < g.N) cqk_check_value(dv, v, m * g.N + j0 + e);
                        out[e] = v;
                    }
                    if (pairs && j0 + 1 < g.N) cqk_io<TY>::st2(yrow, j0, out[0], out[1]);
                    else {
                        if (j0 < g.N) cqk_st<TY>(yrow, j0, out[0]);
                        if (j0 + 1 < g.N) cqk_st<TY>(yrow, j0 + 1, out[1]);
                    }
                }
            }
        }
        /* the factors may be replaced by those of this warpgroup's next tile */
        __syncwarp();
        if (lane == 0) bar_arrive1(colempty(cw));
    }
    } /* consumers */
    /* no block leaves while another of its cluster may still write its shared memory or arrive on its barriers */
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#else
    (void)dv, (void)g, (void)pairs, (void)group, (void)tx, (void)tw1, (void)tw2;
#endif
}

} // namespace

/* dynamic shared memory, plus the static arrays and what the driver keeps */
extern "C" size_t cqk_gemm90_smem(void) { return (size_t)SMEM + (2 * ST + 4) * 8 + 2 * 4 * BN * 4 + 128; }

/* cuTensorMapEncodeTiled from the driver, found once through the runtime (no link against libcuda) */
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void) {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        else
            (void)cudaGetLastError();
    }
    return fn;
}

/* rows x ld f16 (K-contiguous, pitch ld) in boxes of `box_rows` x 64, 128-byte swizzle, zeros outside */
static bool tmap(CUtensorMap *m, const uint16_t *base, int64_t rows, int64_t ld, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
    if (!fn) return false;
    const cuuint64_t dim[2] = {(cuuint64_t)ld, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld * 2};
    const cuuint32_t box[2] = {BK, (cuuint32_t)box_rows}, estride[2] = {1, 1};
    return fn(m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)base, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* clusters of CL blocks that fit on the device at once, for this kernel: the persistent grid */
template <int CL> static int max_clusters(const void *kern, cudaLaunchConfig_t cfg) {
    static int n = 0; /* the same for every instance: all need the same registers and shared memory */
    if (n <= 0) {
        cfg.gridDim = dim3(CL);
        if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess || n <= 0) {
            (void)cudaGetLastError();
            int dev = 0, sms = 0;
            if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
                return 0;
            return sms / CL;
        }
    }
    return n;
}

template <typename TY, int CL> static cudaError_t launch(const cqk_ctx *c, const cqk_gemm90 *g, int group) {
    const bool swiglu = g->act == CQK_ACT_SWIGLU;
    const int64_t bn = swiglu ? BN / 2 : BN;
    const int64_t rg = ((g->M + BM - 1) / BM + CL - 1) / CL, T = rg * ((g->N + bn - 1) / bn);
    CUtensorMap tx, tw1, tw2;
    if (!tmap(&tx, g->x, g->M, g->ldx, BM) || !tmap(&tw1, g->w1, swiglu ? g->N : g->rows1, g->ldw1, BN / CL) ||
        !tmap(&tw2, swiglu ? g->w2 : g->w1, swiglu ? g->N : g->rows1, swiglu ? g->ldw2 : g->ldw1, BN / CL))
        return cudaErrorNotSupported; /* the caller takes the other path */
    void (*kern)(cqk_dev, cqk_gemm90, int, int, const CUtensorMap, const CUtensorMap, const CUtensorMap) = NULL;
    switch (g->act) {
    case CQK_ACT_NONE: kern = k_gemm90<TY, CQK_ACT_NONE, CL>; break;
    case CQK_ACT_GELU_TANH: kern = k_gemm90<TY, CQK_ACT_GELU_TANH, CL>; break;
    case CQK_ACT_SILU: kern = k_gemm90<TY, CQK_ACT_SILU, CL>; break;
    case CQK_ACT_SWIGLU: kern = k_gemm90<TY, CQK_ACT_SWIGLU, CL>; break;
    default: return cudaErrorInvalidValue;
    }
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    if (e != cudaSuccess) return e;
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = SMEM;
    cfg.stream = c->stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    const int mc = max_clusters<CL>((const void *)kern, cfg);
    if (mc <= 0) return cudaErrorNotSupported;
    const int64_t nclus = T < mc ? T : mc;
    cfg.gridDim = dim3((unsigned)(nclus * CL));
    /* columns in pairs (one 8- or 4-byte access) when y's rows keep pairs aligned */
    const int pairs = (g->ldy % 2 == 0) && ((uintptr_t)g->y % (2 * sizeof(TY)) == 0);
    e = cudaLaunchKernelEx(&cfg, kern, cqk_dev_of(c), *g, pairs, group, tx, tw1, tw2);
    if (e != cudaSuccess) return e;
    return cqk_launched();
}

extern "C" cudaError_t cqk_gemm90_run(const cqk_ctx *c, const cqk_gemm90 *g) {
    if (g->M <= 0 || g->N <= 0) return cudaSuccess;
    const bool swiglu = g->act == CQK_ACT_SWIGLU;
    if (!g->x || !g->w1 || !g->xscale || !g->ws1 || (swiglu && (!g->w2 || !g->ws2)) || g->K <= 0 ||
        (g->ldx & 7) || (g->ldw1 & 7) || (swiglu && (g->ldw2 & 7)) || g->K > 0x7fffff00 || g->M > 0x7fffff00 ||
        g->rows1 > 0x7fffff00 || g->N > 0x7fffff00)
        return cudaErrorInvalidValue;
    cudaError_t e = cudaErrorInvalidValue;
    CQK_DISPATCH(g->ydt, TY, { e = launch<TY, CLUSTER>(c, g, GROUP); });
    return e;
}
