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
 * Block: 384 threads = three warpgroups, in clusters of two blocks on
 * neighbouring row tiles. Warpgroup 0's first thread copies with the tensor
 * memory accelerator: per 64-wide K step the block's 128 x 64 tile of x, and
 * half of the 256 x 64 W tile both blocks of the pair use, multicast into both
 * (each block loads one half), all with the 128-byte swizzle wgmma reads
 * without bank conflicts and zeros past the ends; the bytes complete a stage's
 * full barrier. Its warps 1-3 meanwhile put the tile's per-column factors in
 * shared memory and prefetch a residual tile into L2. Warpgroups 1 and 2 each
 * own 64 rows of the 128 x 256 output tile: per K step 4 x wgmma.m64n256k16
 * (both operands from shared memory, f32 accumulators in registers: 128 per
 * thread, setmaxnreg gives them the copying warpgroup's registers), one step
 * kept in flight while the next is issued; each warp then releases the stage
 * in both blocks (the empty barriers count the 16 warps of the pair). Four
 * stages of 48 KiB. Clusters walk the column tiles of GROUP row pairs at a time.
 *
 * SwiGLU: the 256 W rows of a block are the gate rows [n0, n0 + 128) and the
 * matching up rows (of the fused [gate; up] weight, or of the second weight),
 * so each thread holds gate and up of the same outputs and the block writes
 * 128 output columns.
 *
 * The epilogue is cqk_matmul_epilogue's arithmetic in the same order, so the
 * two paths differ only by the order of the f32 additions inside the product.
 *
 * Status: correct (test_ops_gpu_wgmma runs every matmul case of the op test
 * on it; test_qi21_cuda's goldens give the same 2.05e-3 with it). On the H200
 * the products alone run at 744-754 TFLOP/s on the 7B MLP shape and the whole
 * matmul at 583-597, level with cuBLASLt plus the vectorized epilogue kernel
 * there (570-581), but behind it on the 4096-column projections, SwiGLU and
 * the residual projections, where the epilogue
 * (not overlapped with any products: one block per SM) weighs more; so it runs
 * only with CORTIQ_CUDA_GEMM=wgmma. docs/CUDA.md (Matmul) has the profile and
 * the per-GEMM times; the next step is a persistent kernel whose consumer
 * warpgroups alternate between products and epilogue.
 *
 * Machine code only for sm_90a; elsewhere the body is empty and the host never
 * launches it (cuda_gemm.c checks the device is compute capability 9.0).
 */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "k_common.cuh"
#include "k_sm90.cuh"

namespace {

constexpr int BM = 128, BN = 256, BK = 64, ST = 4, NT = 384;
constexpr int A_B = BM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B;
constexpr int SMEM = 1024 + ST * STAGE_B;

#if CQK_HAVE_WGMMA
/* registers per thread after setmaxnreg: the copying warpgroup gives up what the two product warpgroups
 * (128 accumulators each) take; 128 x 56 + 256 x 224 fits the 384 x 168 a block gets at launch */
constexpr int RP = 56, RC = 224;
/* raster: clusters walk the columns of GROUP row pairs before the next GROUP, so the blocks in flight share
 * W's tiles in L2 (4: +3-5% on the 7B MLP shape against plain row order, where W is streamed once per pair) */
constexpr int GROUP = 4;

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

/* arrive on the barrier at the same offset in block `cta` of the cluster. Default (CTA-scope) semantics:
 * the arrival only says this warp's products of a stage are done (wgmma.wait_group saw them complete), which
 * orders nothing else; .release.cluster made ptxas put a cluster-wide memory barrier before every arrival,
 * and the warps stalled there once per K step. */
__device__ __forceinline__ void bar_arrive_remote(uint32_t b, uint32_t cta) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(b), "r"(cta)
                 : "memory");
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

template <typename TY, int ACT>
__global__ void __launch_bounds__(NT, 1)
    k_gemm90(cqk_dev dv, cqk_gemm90 g, int pairs, const __grid_constant__ CUtensorMap tx, const __grid_constant__ CUtensorMap tw1,
             const __grid_constant__ CUtensorMap tw2) {
#if CQK_HAVE_WGMMA
    extern __shared__ __align__(128) uint8_t gsm[];
    __shared__ __align__(8) uint64_t bars[2 * ST + 1]; /* full, empty, the column factors */
    /* the tile's per-column factors: W's row scales and biases (gate and up halves for SwiGLU), the gate */
    __shared__ float cw1[BN], cb1[BN], cw2[BN / 2], cb2[BN / 2], cg[BN];
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31;
    const int cw = wg - 1; /* which product warpgroup (warpgroup 0 copies) */
    const bool swiglu = ACT == CQK_ACT_SWIGLU;
    /* this cluster's tile: row pair pr, column tile cl, in GROUP order */
    int64_t pr, cl;
    {
        const int64_t np = gridDim.y >> 1, gx = gridDim.x, L = (int64_t)(blockIdx.y >> 1) * gx + blockIdx.x;
        const int64_t first = L / ((int64_t)GROUP * gx) * GROUP, gs = np - first < GROUP ? np - first : GROUP;
        const int64_t r = L - first * gx;
        pr = first + r % gs, cl = r / gs;
    }
    const int64_t m0 = (2 * pr + (blockIdx.y & 1)) * BM, n0 = cl * (swiglu ? BN / 2 : BN);
    const uint32_t s0 = ((uint32_t)__cvta_generic_to_shared(gsm) + 1023u) & ~1023u;
    const uint32_t bar0 = (uint32_t)__cvta_generic_to_shared(bars);
    auto full = [&](int s) { return bar0 + 8u * (uint32_t)s; };
    auto empty = [&](int s) { return bar0 + 8u * (uint32_t)(ST + s); };
    const uint32_t colbar = bar0 + 8u * (uint32_t)(2 * ST);
    const int nk = (int)((g.K + BK - 1) / BK);
    uint32_t rank;
    asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            bar_init(full(s), 1);    /* the copying thread's arrive, plus the bytes */
            bar_init(empty(s), 16);  /* 8 consumer warps of each block of the pair */
        }
        bar_init(colbar, 96);        /* the threads of warps 1-3 */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    /* both blocks' barriers exist before either block's copies or arrivals reach them */
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");

    if (wg == 0) {
        /* registers move from this warpgroup (copies and loads need few) to the two that hold accumulators */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(RP) : "memory");
        /* ---- the copies: one thread; x's tile for this block, and this block's half of W's tile sent to
         * both blocks of the cluster ---- */
        if (tid == 0) {
            const CUtensorMap *tb = swiglu && rank ? &tw2 : &tw1;
            const int brow = (int)(swiglu ? n0 : n0 + (BN / 2) * rank);
            for (int kt = 0; kt < nk; kt++) {
                const int s = kt % ST;
                /* both blocks' products of the tile this stage held are done (the multicast writes both) */
                if (kt >= ST) bar_wait(empty(s), (uint32_t)(((kt / ST) - 1) & 1));
                const uint32_t sa = s0 + (uint32_t)(s * STAGE_B), sb = sa + A_B;
                bar_expect(full(s), (uint32_t)STAGE_B);
                tma_load(sa, &tx, kt * BK, (int)m0, full(s));
                tma_load_mc(sb + (uint32_t)(rank * (B_B / 2)), tb, kt * BK, brow, full(s), (uint16_t)3);
            }
        } else if (tid >= 32) {
            /* ---- warps 1-3: the per-column factors of the epilogue, while the products run ---- */
            for (int c = tid - 32; c < (swiglu ? BN / 2 : BN); c += 96) {
                const int64_t j = n0 + c;
                const bool in = j < g.N;
                cw1[c] = in ? g.ws1[j] : 0.0f;
                cb1[c] = in && g.bias ? g.bias[j] : 0.0f;
                cg[c] = in && g.gate ? g.gate[j] : 1.0f;
                if (swiglu) {
                    cw2[c] = in ? g.ws2[j] : 0.0f;
                    cb2[c] = in && g.bias2 ? g.bias2[j] : 0.0f;
                }
            }
            bar_arrive1(colbar);
            if (g.accumulate) { /* the residual tile into L2 (kept there) for the epilogue */
                constexpr int LINES = (BN * (int)sizeof(TY) + 127) / 128, PER = 128 / (int)sizeof(TY);
                for (int q = tid - 32; q < BM * LINES; q += 96) {
                    const int64_t m = m0 + q / LINES, j = n0 + (q % LINES) * PER;
                    if (m < g.M && j < g.N)
                        asm volatile("prefetch.global.L2::evict_last [%0];\n" ::"l"((const TY *)g.y + m * g.ldy + j));
                }
            }
        }
    } else {
    /* ---- the products: warpgroup cw, rows cw * 64 .. + 63 of the tile ---- */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(RC) : "memory");
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
    const uint32_t a_off = (uint32_t)(cw * 64 * 128);
    for (int kt = 0; kt < nk; kt++) {
        const int s = kt % ST;
        bar_wait(full(s), (uint32_t)((kt / ST) & 1));
        const uint32_t sa = s0 + (uint32_t)(s * STAGE_B) + a_off, sb = s0 + (uint32_t)(s * STAGE_B + A_B);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) wgmma256(acc, sm90_desc(sa + 32u * kk, 16, 1024), sm90_desc(sb + 32u * kk, 16, 1024), kt > 0 || kk > 0);
        wg_commit();
        wg_wait<1>();
        if (kt > 0) { /* the products of step kt - 1 are done: its stage may be refilled (in both blocks) */
            __syncwarp();
            if (lane == 0) {
                bar_arrive1(empty((kt - 1) % ST));
                bar_arrive_remote(empty((kt - 1) % ST), rank ^ 1);
            }
        }
    }
    wg_wait<0>();
    keep(acc);

    /* ---- the epilogue, as cqk_matmul_epilogue: per-column factors from shared memory (the loader warps
     * put them there), the residual read ahead in chunks so its latency is paid a few times per thread
     * rather than once per element, pairs of columns in one access ---- */
    bar_wait(colbar, 0);
    const int g4 = lane >> 2, t4 = lane & 3, wq = (tid >> 5) & 3;
    constexpr int NI = swiglu ? BN / 16 : BN / 8, CH = swiglu ? 4 : 8;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int64_t m = m0 + cw * 64 + wq * 16 + g4 + 8 * r;
        if (m >= g.M) continue;
        const float xs = g.xscale[m];
        TY *yrow = (TY *)g.y + m * g.ldy;
        if (g.accumulate) /* this thread's part of the row into L2 ahead of the chunks below */
            for (int64_t b = (int64_t)(4 * t4) * 32; b < (int64_t)(NI * 8) * (int64_t)sizeof(TY); b += 512)
                if (n0 + b / (int64_t)sizeof(TY) < g.N)
                    asm volatile("prefetch.global.L2 [%0];\n" ::"l"((const char *)(yrow + n0) + b));
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
                const int i = i0 + ii, c0 = 8 * i + 2 * t4;
                const int64_t j0 = n0 + c0;
                float out[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int c = c0 + e;
                    float v = g.scale * (acc[4 * i + 2 * r + e] * xs * cw1[c]) + cb1[c];
                    if (ACT == CQK_ACT_GELU_TANH) v = gelu_tanh_g(v);
                    if (ACT == CQK_ACT_SILU) v = silu_g(v);
                    if (swiglu) {
                        const float u = g.scale * (acc[4 * (i + BN / 16) + 2 * r + e] * xs * cw2[c]) + cb2[c];
                        v = silu_g(v) * u;
                    }
                    if (g.accumulate) v = (e ? old[ii].y : old[ii].x) + cg[c] * v;
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
    } /* consumers */
    /* no block leaves while its partner may still write its shared memory or arrive on its barriers */
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#else
    (void)dv, (void)g, (void)pairs, (void)tx, (void)tw1, (void)tw2;
#endif
}

} // namespace

/* dynamic shared memory, plus the static arrays and what the driver keeps */
extern "C" size_t cqk_gemm90_smem(void) { return (size_t)SMEM + (2 * ST + 1) * 8 + 4 * BN * 4 + 128; }

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

extern "C" cudaError_t cqk_gemm90_run(const cqk_ctx *c, const cqk_gemm90 *g) {
    if (g->M <= 0 || g->N <= 0) return cudaSuccess;
    const bool swiglu = g->act == CQK_ACT_SWIGLU;
    if (!g->x || !g->w1 || !g->xscale || !g->ws1 || (swiglu && (!g->w2 || !g->ws2)) || g->K <= 0 ||
        (g->ldx & 7) || (g->ldw1 & 7) || (swiglu && (g->ldw2 & 7)) || g->K > 0x7fffff00 || g->M > 0x7fffff00 ||
        g->rows1 > 0x7fffff00)
        return cudaErrorInvalidValue;
    const int64_t bn = swiglu ? BN / 2 : BN;
    const int64_t gx = (g->N + bn - 1) / bn, gy = ((g->M + BM - 1) / BM + 1) / 2 * 2; /* pairs of row blocks */
    if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidValue;
    CUtensorMap tx, tw1, tw2;
    if (!tmap(&tx, g->x, g->M, g->ldx, BM) || !tmap(&tw1, g->w1, swiglu ? g->N : g->rows1, g->ldw1, BN / 2) ||
        !tmap(&tw2, swiglu ? g->w2 : g->w1, swiglu ? g->N : g->rows1, swiglu ? g->ldw2 : g->ldw1, BN / 2))
        return cudaErrorNotSupported; /* the caller takes the other path */
    cqk_dev d = cqk_dev_of(c);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)gx, (unsigned)gy);
    cfg.blockDim = dim3(NT);
    cfg.dynamicSmemBytes = SMEM;
    cfg.stream = c->stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = 2, at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CQK_DISPATCH(g->ydt, TY, {
        void (*kern)(cqk_dev, cqk_gemm90, int, const CUtensorMap, const CUtensorMap, const CUtensorMap) = NULL;
        switch (g->act) {
        case CQK_ACT_NONE: kern = k_gemm90<TY, CQK_ACT_NONE>; break;
        case CQK_ACT_GELU_TANH: kern = k_gemm90<TY, CQK_ACT_GELU_TANH>; break;
        case CQK_ACT_SILU: kern = k_gemm90<TY, CQK_ACT_SILU>; break;
        case CQK_ACT_SWIGLU: kern = k_gemm90<TY, CQK_ACT_SWIGLU>; break;
        default: return cudaErrorInvalidValue;
        }
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
        if (e != cudaSuccess) return e;
        /* columns in pairs (one 8- or 4-byte access) when y's rows keep pairs aligned */
        const int pairs = (g->ldy % 2 == 0) && ((uintptr_t)g->y % (2 * sizeof(TY)) == 0);
        e = cudaLaunchKernelEx(&cfg, kern, d, *g, pairs, tx, tw1, tw2);
        if (e != cudaSuccess) return e;
    });
    return cqk_launched();
}
