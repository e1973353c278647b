/*
 * k_common.cuh — device helpers shared by the kernel files: element loads and
 * stores per activation dtype, the f32 -> f16/bf16 rounding the CPU backend
 * uses (bit for bit), the failure report, grid sizing and the dtype switch.
 *
 * Conversions are written with integer operations rather than the cvt
 * intrinsics so the result does not depend on flush-to-zero modes or the
 * intrinsic's NaN choice: every backend rounds activations the same way.
 */
#ifndef CQ_CUDA_K_COMMON_CUH
#define CQ_CUDA_K_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_kernels.h"

/* ---- scalar conversions (mirror src/backends/cpu/cpu_impl.h) ------------------- */
__device__ __forceinline__ float cqk_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t bits;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
    } else if (em >= 0x0400u) {
        bits = sign | ((em << 13) + ((uint32_t)(127 - 15) << 23));
    } else {
        bits = sign | __float_as_uint(__fmul_rn((float)em, 5.9604644775390625e-8f)); /* m * 2^-24, exact */
    }
    return __uint_as_float(bits);
}

__device__ __forceinline__ uint16_t cqk_f2h(float f) {
    uint32_t x = __float_as_uint(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        if (ax < 0x33000000u) return sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23);
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((r - ((uint32_t)(127 - 15) << 23)) >> 13));
}

__device__ __forceinline__ float cqk_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t cqk_f2bf(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- typed element access: T is float, cqk_f16_t or cqk_bf16_t ------------------- */
struct cqk_f16_t { uint16_t b; };
struct cqk_bf16_t { uint16_t b; };

template <typename T> struct cqk_io;
/* ld2/st2 (ld4/st4): elements i .. i + 1 (i + 3) in one access; p + i aligned to two (four) elements */
template <> struct cqk_io<float> {
    static __device__ __forceinline__ float4 ld4(const float *p, int64_t i) { return *(const float4 *)(p + i); }
    static __device__ __forceinline__ void st4(float *p, int64_t i, float4 v) { *(float4 *)(p + i) = v; }
    static __device__ __forceinline__ float ld(const float *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ void st(float *p, int64_t i, float v) { p[i] = v; }
    static __device__ __forceinline__ float2 ld2(const float *p, int64_t i) { return *(const float2 *)(p + i); }
    static __device__ __forceinline__ void st2(float *p, int64_t i, float a, float b) { *(float2 *)(p + i) = make_float2(a, b); }
};
/* the two 16-bit types share everything but their converters (C: dec(uint16_t) -> float, enc(float)) */
template <typename T, typename C> struct cqk_io16 {
    static __device__ __forceinline__ uint32_t pack(float a, float b) {
        return (uint32_t)C::enc(a) | ((uint32_t)C::enc(b) << 16);
    }
    static __device__ __forceinline__ float2 unpack(uint32_t u) {
        return make_float2(C::dec((uint16_t)u), C::dec((uint16_t)(u >> 16)));
    }
    static __device__ __forceinline__ float4 ld4(const T *p, int64_t i) {
        const uint2 u = *(const uint2 *)(p + i);
        const float2 lo = unpack(u.x), hi = unpack(u.y);
        return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    static __device__ __forceinline__ void st4(T *p, int64_t i, float4 v) {
        *(uint2 *)(p + i) = make_uint2(pack(v.x, v.y), pack(v.z, v.w));
    }
    static __device__ __forceinline__ float ld(const T *p, int64_t i) { return C::dec(p[i].b); }
    static __device__ __forceinline__ void st(T *p, int64_t i, float v) { p[i].b = C::enc(v); }
    static __device__ __forceinline__ float2 ld2(const T *p, int64_t i) { return unpack(*(const uint32_t *)(p + i)); }
    static __device__ __forceinline__ void st2(T *p, int64_t i, float a, float b) { *(uint32_t *)(p + i) = pack(a, b); }
};
struct cqk_conv_f16 {
    static __device__ __forceinline__ float dec(uint16_t h) { return cqk_h2f(h); }
    static __device__ __forceinline__ uint16_t enc(float f) { return cqk_f2h(f); }
};
struct cqk_conv_bf16 {
    static __device__ __forceinline__ float dec(uint16_t h) { return cqk_bf2f(h); }
    static __device__ __forceinline__ uint16_t enc(float f) { return cqk_f2bf(f); }
};
template <> struct cqk_io<cqk_f16_t> : cqk_io16<cqk_f16_t, cqk_conv_f16> {};
template <> struct cqk_io<cqk_bf16_t> : cqk_io16<cqk_bf16_t, cqk_conv_bf16> {};

template <typename T> __device__ __forceinline__ float cqk_ld(const void *p, int64_t i) {
    return cqk_io<T>::ld((const T *)p, i);
}
template <typename T> __device__ __forceinline__ void cqk_st(void *p, int64_t i, float v) {
    cqk_io<T>::st((T *)p, i, v);
}

/* Run-time dtype -> template instance. Usage:
 *   CQK_DISPATCH(dt, T, { kernel<T><<<...>>>(...); });  (returns cudaErrorInvalidValue for others) */
#define CQK_DISPATCH(dt, T, ...)                              \
    do {                                                      \
        switch (dt) {                                         \
        case CQK_F32: { typedef float T; __VA_ARGS__ } break; \
        case CQK_F16: { typedef cqk_f16_t T; __VA_ARGS__ } break; \
        case CQK_BF16: { typedef cqk_bf16_t T; __VA_ARGS__ } break; \
        default: return cudaErrorInvalidValue;                \
        }                                                     \
    } while (0)

/* ---- failure reports ------------------------------------------------------------- */
/* The first failing thread since the last sync records its report; later ones
 * are dropped (the first cause is the useful one). */
__device__ __forceinline__ void cqk_report(cqk_status *st, unsigned code, unsigned op, unsigned seq, long long where,
                                           long long value) {
    if (atomicCAS(&st->code, 0u, code) == 0u) {
        st->op = op;
        st->seq = seq;
        st->where = where;
        st->value = value;
    }
}

/* Carried into kernels by value (cqk_ctx holds host-only fields too). */
struct cqk_dev {
    cqk_status *st;
    unsigned op, seq;
    int check;
};
static inline cqk_dev cqk_dev_of(const cqk_ctx *c) {
    cqk_dev d;
    d.st = c->st;
    d.op = c->op;
    d.seq = c->seq;
    d.check = c->check;
    return d;
}

__device__ __forceinline__ void cqk_check_value(const cqk_dev &d, float v, int64_t where) {
    if (d.check && !isfinite(v)) cqk_report(d.st, CQK_ERR_NONFINITE, d.op, d.seq, where, 0);
}

/* ---- grid sizing ------------------------------------------------------------------ */
/* Blocks for a grid-stride loop over n items: enough to fill the device, capped
 * so launches stay cheap for huge n. */
static inline unsigned cqk_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 8192) b = 8192;
    return (unsigned)b;
}

#define CQK_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Launch status without waiting for the device. */
static inline cudaError_t cqk_launched(void) { return cudaGetLastError(); }

/* Keys visible to attention query i (ops.h): [lo, lim), lo from cqk_attn_lower, lim here: vis[i] clamped to
 * [0, P + Nk], or P + i + 1 when causal, or all. Shared by the attention kernels (k_attention.cu, k_flash.cu); cqk_attn is in cuda_kernels.h. */
__device__ __forceinline__ int64_t cqk_attn_limit(const cqk_attn &a, int64_t i) {
    const int64_t T = a.P + a.Nk;
    if (a.vis) {
        int64_t v = a.vis[i];
        return v < 0 ? 0 : (v > T ? T : v);
    }
    if (a.causal) return a.P + i + 1 < T ? a.P + i + 1 : T;
    return T;
}

/* The first key visible to query i: vis_lo[i] clamped to [0, P + Nk], or 0. A row with lo >= its limit sees
 * nothing. Read only when vis_lo is given, so the paths without one load nothing more. */
__device__ __forceinline__ int64_t cqk_attn_lower(const cqk_attn &a, int64_t i) {
    if (!a.vis_lo) return 0;
    const int64_t T = a.P + a.Nk, v = a.vis_lo[i];
    return v < 0 ? 0 : (v > T ? T : v);
}


/* ---- attention helpers shared by the flash kernels ------------------------------------------ */
/* two values rounded by the backend's rounding into a bf16 pair (lo in the low half) */
__device__ __forceinline__ uint32_t cqk_pack_bf16(float lo, float hi) {
    return (uint32_t)cqk_f2bf(lo) | ((uint32_t)cqk_f2bf(hi) << 16);
}
/* probabilities only: finite values in [0, 1], where the hardware's round-to-nearest-even equals
 * cqk_f2bf bit for bit, in one instruction per pair */
__device__ __forceinline__ uint32_t cqk_pack_p(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float cqk_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---- scaled f16 rows (the matmul operands, cuda_kernels.h) ---------------------------------------- */
/* The power-of-two exponent e that puts a row's absmax in [2^13, 2^14) once scaled by 2^e; 0 for a row of
 * zeros or a non-finite absmax. |e| <= 120 keeps 2^-e a normal f32 (every finite absmax above 2^-106). */
__device__ __forceinline__ int cqk_row_exponent(float absmax) {
    if (!(absmax > 0.0f) || !isfinite(absmax)) return 0;
    int x;
    frexpf(absmax, &x); /* absmax in [2^(x-1), 2^x) */
    const int e = 14 - x;
    return e < -120 ? -120 : (e > 120 ? 120 : e);
}

/* |v| for an absmax, NaN counted as +inf so the row keeps e = 0. */
__device__ __forceinline__ float cqk_mag(float v) { return isnan(v) ? INFINITY : fabsf(v); }

/* Max over the block (<= 1024 threads); every thread gets the result. `sh` holds 32 floats and may be reused
 * at once by the next call. */
__device__ __forceinline__ float cqk_block_maxf(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
    return t;
}

/* The scale of a staged row from its absmax m (this thread's part; the block reduces it): returns 2^e for the
 * values, and thread 0 stores 2^-e at *rowscale. `sh` as cqk_block_maxf's. */
__device__ __forceinline__ float cqk_row_scale(float m, float *sh, float *rowscale) {
    const int e = cqk_row_exponent(cqk_block_maxf(m, sh));
    const float p = ldexpf(1.0f, e); /* |e| <= 120: a normal f32; scaling by it is exact */
    if (threadIdx.x == 0) *rowscale = ldexpf(1.0f, -e);
    return p;
}

/* Four values scaled by the power of two p and rounded to f16, packed for one 8-byte store. */
__device__ __forceinline__ uint2 cqk_f16x4_scaled(float a, float b, float c, float d, float p) {
    return make_uint2((uint32_t)cqk_f2h(a * p) | ((uint32_t)cqk_f2h(b * p) << 16),
                      (uint32_t)cqk_f2h(c * p) | ((uint32_t)cqk_f2h(d * p) << 16));
}

#endif /* CQ_CUDA_K_COMMON_CUH */
