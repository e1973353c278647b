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

/* one output: the operands' power-of-two row scales undone (exact), the op's scale, bias, activation */
template <int ACT>
__device__ __forceinline__ float epi_value(const cqk_epilogue &e, float a1, float a2, float xs, int64_t j) {
    float v = e.scale * (a1 * xs * e.wscale1[j]) + (e.bias ? e.bias[j] : 0.0f);
    if (ACT == CQK_ACT_GELU_TANH) v = gelu_tanh_f(v);
    if (ACT == CQK_ACT_SILU) v = silu_f(v);
    if (ACT == CQK_ACT_SWIGLU) v = silu_f(v) * (e.scale * (a2 * xs * e.wscale2[j]) + (e.bias2 ? e.bias2[j] : 0.0f));
    return v;
}

/* Rows in blockIdx.y (grid-stride), columns across the threads of blockIdx.x: no division per element.
 * VEC: four columns per thread in 16-byte (f32) / 8-byte (f16, bf16) accesses, when N, every pitch and
 * every pointer keep groups of four aligned (the host checks); the arithmetic is the scalar path's. */
template <typename TY, int ACT, bool VEC>
__global__ void __launch_bounds__(256) k_epilogue(cqk_dev d, cqk_epilogue e) {
    constexpr int W = VEC ? 4 : 1;
    const int64_t j0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * W;
    if (j0 >= e.N) return;
    for (int64_t m = blockIdx.y; m < e.M; m += gridDim.y) {
        const float xs = e.xscale[m];
        const int64_t o = m * e.ldy + j0;
        float v[W], a1[W], a2[W] = {}, old[W] = {};
        if (VEC) {
            const float4 t = *(const float4 *)(e.acc1 + m * e.ld1 + j0);
            a1[0] = t.x, a1[1] = t.y, a1[2] = t.z, a1[3 % W] = t.w;
            if (ACT == CQK_ACT_SWIGLU) {
                const float4 u = *(const float4 *)(e.acc2 + m * e.ld2 + j0);
                a2[0] = u.x, a2[1] = u.y, a2[2] = u.z, a2[3 % W] = u.w;
            }
            if (e.accumulate) {
                const float4 y = cqk_io<TY>::ld4((const TY *)e.y, o);
                old[0] = y.x, old[1] = y.y, old[2] = y.z, old[3 % W] = y.w;
            }
        } else {
            a1[0] = e.acc1[m * e.ld1 + j0];
            if (ACT == CQK_ACT_SWIGLU) a2[0] = e.acc2[m * e.ld2 + j0];
            if (e.accumulate) old[0] = cqk_ld<TY>(e.y, o);
        }
#pragma unroll
        for (int q = 0; q < W; q++) {
            v[q] = epi_value<ACT>(e, a1[q], a2[q], xs, j0 + q);
            if (e.accumulate) v[q] = old[q] + (e.gate ? e.gate[j0 + q] : 1.0f) * v[q];
            cqk_check_value(d, v[q], m * e.N + j0 + q);
        }
        if (VEC) cqk_io<TY>::st4((TY *)e.y, o, make_float4(v[0], v[1 % W], v[2 % W], v[3 % W]));
        else cqk_st<TY>(e.y, o, v[0]);
    }
}

static bool al16(const void *p) { return (uintptr_t)p % 16 == 0; }

/* the epilogue of activation A for the dtype TY in scope, vectorized when `vec` */
#define EPI(A)                                                                           \
    do {                                                                                 \
        if (vec) k_epilogue<TY, A, true><<<grid, 256, 0, c->stream>>>(d, *e);            \
        else k_epilogue<TY, A, false><<<grid, 256, 0, c->stream>>>(d, *e);               \
    } while (0)

extern "C" cudaError_t cqk_matmul_epilogue(const cqk_ctx *c, const cqk_epilogue *e) {
    if (e->M <= 0 || e->N <= 0) return cudaSuccess;
    const bool swiglu = e->act == CQK_ACT_SWIGLU;
    if (!e->xscale || !e->wscale1 || (swiglu && (!e->acc2 || !e->wscale2))) return cudaErrorInvalidValue;
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(e->ydt, TY, {
        const bool vec = e->N % 4 == 0 && e->ld1 % 4 == 0 && e->ldy % 4 == 0 && al16(e->acc1) && al16(e->wscale1) &&
                         (!e->bias || al16(e->bias)) && (!e->gate || al16(e->gate)) &&
                         (uintptr_t)e->y % (4 * sizeof(TY)) == 0 &&
                         (!swiglu || (e->ld2 % 4 == 0 && al16(e->acc2) && al16(e->wscale2) && (!e->bias2 || al16(e->bias2))));
        const int64_t per = 256 * (vec ? 4 : 1), gx = (e->N + per - 1) / per;
        if (gx > 0x7fffffff) return cudaErrorInvalidValue;
        const dim3 grid((unsigned)gx, (unsigned)(e->M < 65535 ? e->M : 65535));
        switch (e->act) {
        case CQK_ACT_NONE: EPI(CQK_ACT_NONE); break;
        case CQK_ACT_GELU_TANH: EPI(CQK_ACT_GELU_TANH); break;
        case CQK_ACT_SILU: EPI(CQK_ACT_SILU); break;
        case CQK_ACT_SWIGLU: EPI(CQK_ACT_SWIGLU); break;
        default: return cudaErrorInvalidValue;
        }
    });
    return cqk_launched();
}
#undef EPI

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
