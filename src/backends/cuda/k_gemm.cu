/*
 * k_gemm.cu — what the matmul op needs besides cuBLASLt: the fused epilogue
 * (the operands' row scales undone, scale, bias, GELU-tanh / SiLU / SwiGLU,
 * gated accumulation, the non-finite check) applied to the f32 GEMM result
 * in one pass, and a plain
 * CUDA-core GEMM used when cuBLASLt offers no algorithm for a shape or when
 * CORTIQ_CUDA_GEMM=simt asks for it while debugging.
 *
 * Layout (row-major throughout, as ops.h): x [M, K], W [N, K], y [M, N];
 * the GEMM computes y = x · Wᵀ, so both operands are read along K.
 */
#include "k_common.cuh"

/* ---- epilogue ---------------------------------------------------------------------- */
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float gelu_tanh_f(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

template <typename TY, int ACT>
__global__ void k_epilogue(cqk_dev d, cqk_epilogue e) {
    const int64_t n = e.M * e.N;
    CQK_GRID_STRIDE(i, n) {
        const int64_t m = i / e.N, j = i - m * e.N;
        /* undo the operands' power-of-two row scales (exact), then the op's scale */
        const float xs = e.xscale[m];
        float v = e.scale * (e.acc1[m * e.ld1 + j] * xs * e.wscale1[j]) + (e.bias ? e.bias[j] : 0.0f);
        if (ACT == CQK_ACT_GELU_TANH) v = gelu_tanh_f(v);
        if (ACT == CQK_ACT_SILU) v = silu_f(v);
        if (ACT == CQK_ACT_SWIGLU) {
            const float u = e.scale * (e.acc2[m * e.ld2 + j] * xs * e.wscale2[j]) + (e.bias2 ? e.bias2[j] : 0.0f);
            v = silu_f(v) * u;
        }
        const int64_t o = m * e.ldy + j;
        if (e.accumulate) v = cqk_ld<TY>(e.y, o) + (e.gate ? e.gate[j] : 1.0f) * v;
        cqk_check_value(d, v, i);
        cqk_st<TY>(e.y, o, v);
    }
}

extern "C" cudaError_t cqk_matmul_epilogue(const cqk_ctx *c, const cqk_epilogue *e) {
    if (e->M <= 0 || e->N <= 0) return cudaSuccess;
    if (!e->xscale || !e->wscale1 || (e->act == CQK_ACT_SWIGLU && (!e->acc2 || !e->wscale2))) return cudaErrorInvalidValue;
    unsigned b = cqk_blocks(e->M * e->N, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(e->ydt, TY, {
        switch (e->act) {
        case CQK_ACT_NONE: k_epilogue<TY, CQK_ACT_NONE><<<b, 256, 0, c->stream>>>(d, *e); break;
        case CQK_ACT_GELU_TANH: k_epilogue<TY, CQK_ACT_GELU_TANH><<<b, 256, 0, c->stream>>>(d, *e); break;
        case CQK_ACT_SILU: k_epilogue<TY, CQK_ACT_SILU><<<b, 256, 0, c->stream>>>(d, *e); break;
        case CQK_ACT_SWIGLU: k_epilogue<TY, CQK_ACT_SWIGLU><<<b, 256, 0, c->stream>>>(d, *e); break;
        default: return cudaErrorInvalidValue;
        }
    });
    return cqk_launched();
}

/* ---- CUDA-core GEMM ---------------------------------------------------------------- */
/* 64x64 output tile per block of 16x16 threads, 4x4 outputs per thread, K in
 * steps of 16 through shared memory (f16 operands widened to f32 there). */
enum { SG_T = 64, SG_K = 16 };

template <typename TD>
__global__ void __launch_bounds__(256) k_gemm_simt(const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                                                  void *D, int64_t ldd, int64_t M, int64_t N, int64_t K, float alpha,
                                                  float beta) {
    __shared__ float As[SG_K][SG_T + 1]; /* W rows (output columns) */
    __shared__ float Bs[SG_K][SG_T + 1]; /* x rows (output rows) */
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int64_t n0 = (int64_t)blockIdx.x * SG_T, m0 = (int64_t)blockIdx.y * SG_T;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < K; k0 += SG_K) {
        /* 64 rows x 16 k of each operand: 1024 elements, 4 per thread */
        for (int l = 0; l < 4; l++) {
            int idx = tid + l * 256, row = idx / SG_K, kk = idx % SG_K;
            int64_t k = k0 + kk;
            int64_t n = n0 + row, m = m0 + row;
            As[kk][row] = (n < N && k < K) ? cqk_h2f(A[n * lda + k]) : 0.0f;
            Bs[kk][row] = (m < M && k < K) ? cqk_h2f(B[m * ldb + k]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < SG_K; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                b[i] = Bs[kk][ty * 4 + i];
                a[i] = As[kk][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(b[i], a[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int64_t m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < M && n < N) {
                int64_t o = m * ldd + n;
                float v = alpha * acc[i][j];
                if (beta != 0.0f) v += beta * cqk_ld<TD>(D, o);
                cqk_st<TD>(D, o, v);
            }
        }
}

extern "C" cudaError_t cqk_gemm_simt(const cqk_ctx *c, const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
                                     void *D, int ddt, int64_t ldd, int64_t M, int64_t N, int64_t K, float alpha,
                                     float beta) {
    if (M <= 0 || N <= 0) return cudaSuccess;
    if ((N + SG_T - 1) / SG_T > 0x7fffffff || (M + SG_T - 1) / SG_T > 65535) return cudaErrorInvalidValue;
    dim3 grid((unsigned)((N + SG_T - 1) / SG_T), (unsigned)((M + SG_T - 1) / SG_T)), block(16, 16);
    CQK_DISPATCH(ddt, TD, { k_gemm_simt<TD><<<grid, block, 0, c->stream>>>(A, lda, B, ldb, D, ldd, M, N, K, alpha, beta); });
    return cqk_launched();
}
