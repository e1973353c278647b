/*
 * k_convert.cu — dtype conversion (copy), GEMM operand staging as scaled f16
 * rows, the weight decoders and the non-finite scan.
 *
 * The decoders read the raw CMF payload that bind_weight uploaded and compute
 * each weight's f32 value with the same operations, in the same order, as
 * the codec layer's decoders (src/codec/decode.c, decode_ladder.c) and the
 * CPU backend's (cpu_weights.c), so the only difference a device weight has
 * is the final rounding to f16 (after an exact power-of-two row scale). Multiplications use __fmul_rn so the
 * compiler cannot contract or reorder them. Payloads are little-endian and
 * unaligned inside (q8_row scales start at rows*cols): bytes are read one at
 * a time, which costs nothing next to the upload that precedes a decode.
 */
#include "k_common.cuh"

/* ---- copy with conversion ------------------------------------------------------- */
template <typename TY, typename TX>
__global__ void k_convert(void *y, const void *x, int64_t n) {
    CQK_GRID_STRIDE(i, n) cqk_st<TY>(y, i, cqk_ld<TX>(x, i));
}

extern "C" cudaError_t cqk_convert(const cqk_ctx *c, void *y, int ydt, const void *x, int xdt, int64_t n) {
    if (n <= 0) return cudaSuccess;
    if (ydt == CQK_I32 || xdt == CQK_I32) {
        if (ydt != xdt) return cudaErrorInvalidValue;
        return cudaMemcpyAsync(y, x, (size_t)n * 4, cudaMemcpyDeviceToDevice, c->stream);
    }
    if (ydt == xdt) {
        size_t es = ydt == CQK_F32 ? 4 : 2;
        if (y == x) return cudaSuccess;
        return cudaMemcpyAsync(y, x, (size_t)n * es, cudaMemcpyDeviceToDevice, c->stream);
    }
    unsigned b = cqk_blocks(n, 256);
    CQK_DISPATCH(ydt, TY, { CQK_DISPATCH(xdt, TX, { k_convert<TY, TX><<<b, 256, 0, c->stream>>>(y, x, n); }); });
    return cqk_launched();
}

/* ---- weight decoders ------------------------------------------------------------- */
__device__ __forceinline__ uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
__device__ __forceinline__ uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* 5-bit LSB-first rung code g of a q4tp row (codec.h: cq_codec_tp_code). */
__device__ __forceinline__ unsigned tp_code(const uint8_t *codes, int64_t g) {
    int64_t bit = g * 5;
    int64_t b = bit >> 3;
    unsigned sh = (unsigned)(bit & 7);
    unsigned v = codes[b];
    if (sh > 3) v |= (unsigned)codes[b + 1] << 8;
    return (v >> sh) & 31u;
}

/* The f32 value of element (r, k) of the [rows, cols] matrix view; e = r*cols + k
 * is its flattened index (groups of the flat codecs run over it). */
template <int CODEC>
__device__ __forceinline__ float decode_one(const uint8_t *p, int64_t rows, int64_t cols, int64_t r, int64_t k,
                                            const float *lut) {
    const int64_t e = r * cols + k;
    if (CODEC == CQK_W_F32) return __uint_as_float(rd32(p + 4 * e));
    if (CODEC == CQK_W_F16) return cqk_h2f(rd16(p + 2 * e));
    if (CODEC == CQK_W_BF16) return cqk_bf2f(rd16(p + 2 * e));
    if (CODEC == CQK_W_Q8_ROW) {
        /* [int8 q: rows*cols][f16 scale: rows]; w = q * s */
        const float s = cqk_h2f(rd16(p + rows * cols + 2 * r));
        return __fmul_rn((float)(int8_t)p[e], s);
    }
    if (CODEC == CQK_W_Q8_2F) {
        /* [int8 q][f16 row_scale: rows][f16 col: cols]; w = (q * row_scale) * col, in that order */
        const float s = cqk_h2f(rd16(p + rows * cols + 2 * r));
        const float cf = cqk_h2f(rd16(p + rows * cols + 2 * rows + 2 * k));
        return __fmul_rn(__fmul_rn((float)(int8_t)p[e], s), cf);
    }
    if (CODEC == CQK_W_Q4_BLOCK || CODEC == CQK_W_Q4_TILED) {
        /* groups of 32 over the flattened tensor; low nibble = even element, value nibble - 8 */
        const int64_t n = rows * cols, groups = n / 32 + (n % 32 != 0);
        const int64_t gi = e / 32;
        const int w = (int)(e % 32);
        uint8_t byte;
        float s;
        if (CODEC == CQK_W_Q4_BLOCK) { /* [nibbles: 16 per group][f16 scale per group] */
            byte = p[gi * 16 + w / 2];
            s = cqk_h2f(rd16(p + groups * 16 + gi * 2));
        } else { /* 18-byte tiles [f16 scale][16 nibble bytes] */
            byte = p[gi * 18 + 2 + w / 2];
            s = cqk_h2f(rd16(p + gi * 18));
        }
        const int nib = (w & 1) ? (byte >> 4) : (byte & 15);
        return __fmul_rn((float)(nib - 8), s);
    }
    if (CODEC == CQK_W_Q4TP) {
        /* plane A: 16 nibble bytes per tile; plane B: rows x [f16 lo][f16 step];
         * plane C: rows x ceil(5*gpr/8) bytes of 5-bit rung codes. The rung scale
         * is the chained ladder t[0] = exp2f(lo), t[c] = t[c-1] * exp2f(step)
         * (f32 multiplies in order), exp2f taken from the host's table. */
        const int64_t gpr = cols / 32, stride = (gpr * 5 + 7) / 8;
        const uint8_t *params = p + rows * gpr * 16 + 4 * r;
        const uint8_t *codes = p + rows * gpr * 16 + 4 * rows + r * stride;
        const int64_t gi = k / 32;
        const int w = (int)(k % 32);
        const unsigned code = tp_code(codes, gi);
        const float ratio = lut[rd16(params + 2)];
        float t = lut[rd16(params)];
        for (unsigned cc = 1; cc <= code; cc++) t = __fmul_rn(t, ratio);
        const uint8_t byte = p[(r * gpr + gi) * 16 + w / 2];
        const int nib = (w & 1) ? (byte >> 4) : (byte & 15);
        return __fmul_rn((float)(nib - 8), t);
    }
    return 0.0f;
}

/* ---- f16 rows with power-of-two scales (see cuda_kernels.h) ----------------------------- */
enum { ROWS_THREADS = 256 };

/* One block per row: the row's absmax, then the scaled f16 values. */
template <int CODEC>
__global__ void __launch_bounds__(ROWS_THREADS) k_decode_f16rows(const uint8_t *p, int64_t rows, int64_t cols,
                                                                 uint16_t *plane, int64_t ld, float *rowscale,
                                                                 const float *lut) {
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    float m = 0.0f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) m = fmaxf(m, cqk_mag(decode_one<CODEC>(p, rows, cols, r, k, lut)));
    const int e = cqk_row_exponent(cqk_block_maxf(m, sh));
    if (threadIdx.x == 0) rowscale[r] = ldexpf(1.0f, -e);
    for (int64_t k = threadIdx.x; k < ld; k += blockDim.x)
        plane[r * ld + k] = k < cols ? cqk_f2h(ldexpf(decode_one<CODEC>(p, rows, cols, r, k, lut), e)) : (uint16_t)0;
}

/* The q8 codecs' rows, sixteen values a thread: one 16-byte load of codes (and two of column factors for
 * q8_2f), the row's scale read once. The values are decode_one's to the bit (the same products in the same
 * order) and the scaling by 2^e is exact (|e| <= 120), so the plane is k_decode_f16rows's; it only costs
 * less per value. Needs cols % 16 == 0 and 16-byte aligned codes, factors and plane rows (the caller checks). */
template <bool TWO_F>
__device__ __forceinline__ void q8_decode16(const uint8_t *p, int64_t rows, int64_t cols, int64_t r, int64_t v,
                                            float s, float *w) {
    const uint4 qv = *reinterpret_cast<const uint4 *>(p + r * cols + 16 * v);
    const uint32_t qw[4] = {qv.x, qv.y, qv.z, qv.w};
    uint32_t cw[8];
    if (TWO_F) {
        const uint4 *cf = reinterpret_cast<const uint4 *>(p + rows * cols + 2 * rows + 32 * v);
        const uint4 c0 = cf[0], c1 = cf[1];
        cw[0] = c0.x, cw[1] = c0.y, cw[2] = c0.z, cw[3] = c0.w, cw[4] = c1.x, cw[5] = c1.y, cw[6] = c1.z, cw[7] = c1.w;
    }
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const float q = (float)(int8_t)(qw[j >> 2] >> (8 * (j & 3)));
        w[j] = __fmul_rn(q, s);
        if (TWO_F) w[j] = __fmul_rn(w[j], cqk_h2f((uint16_t)(cw[j >> 1] >> (16 * (j & 1)))));
    }
}

template <bool TWO_F>
__global__ void __launch_bounds__(ROWS_THREADS) k_decode_q8_f16rows(const uint8_t *p, int64_t rows, int64_t cols,
                                                                    uint16_t *plane, int64_t ld, float *rowscale) {
    __shared__ float sh[32];
    const int64_t r = blockIdx.x, nv = cols / 16;
    const float s = cqk_h2f(*reinterpret_cast<const uint16_t *>(p + rows * cols + 2 * r));
    float w[16], m = 0.0f;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        q8_decode16<TWO_F>(p, rows, cols, r, v, s, w);
#pragma unroll
        for (int j = 0; j < 16; j++) m = fmaxf(m, cqk_mag(w[j]));
    }
    const float f = cqk_row_scale(m, sh, rowscale + r);
    uint16_t *row = plane + r * ld;
    for (int64_t v = threadIdx.x; v < nv; v += blockDim.x) {
        q8_decode16<TWO_F>(p, rows, cols, r, v, s, w);
        uint4 *o = reinterpret_cast<uint4 *>(row + 16 * v);
        const uint2 a = cqk_f16x4_scaled(w[0], w[1], w[2], w[3], f), b = cqk_f16x4_scaled(w[4], w[5], w[6], w[7], f);
        const uint2 c = cqk_f16x4_scaled(w[8], w[9], w[10], w[11], f),
                    d = cqk_f16x4_scaled(w[12], w[13], w[14], w[15], f);
        o[0] = make_uint4(a.x, a.y, b.x, b.y);
        o[1] = make_uint4(c.x, c.y, d.x, d.y);
    }
    for (int64_t k = cols + threadIdx.x; k < ld; k += blockDim.x) row[k] = 0;
}

/* The same plane with a convolution kernel's columns in tap-major order: source column k = ci*taps + t lands at
 * t*cin + ci, as cqk_plane_taps_first moves it, so the bits equal decode + relayout without the second plane. */
template <int CODEC>
__global__ void __launch_bounds__(ROWS_THREADS) k_decode_f16rows_taps(const uint8_t *p, int64_t rows, int64_t cols,
                                                                      uint16_t *plane, int64_t ld, float *rowscale,
                                                                      const float *lut, int taps) {
    __shared__ float sh[32];
    const int64_t r = blockIdx.x, cin = cols / taps;
    float m = 0.0f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) m = fmaxf(m, cqk_mag(decode_one<CODEC>(p, rows, cols, r, k, lut)));
    const int e = cqk_row_exponent(cqk_block_maxf(m, sh));
    if (threadIdx.x == 0) rowscale[r] = ldexpf(1.0f, -e);
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
        const int64_t ci = k / taps, t = k - ci * taps;
        plane[r * ld + t * cin + ci] = cqk_f2h(ldexpf(decode_one<CODEC>(p, rows, cols, r, k, lut), e));
    }
    for (int64_t k = cols + threadIdx.x; k < ld; k += blockDim.x) plane[r * ld + k] = 0;
}

/* Rows of a compact weight straight to an activation: y row i = row ids[i] (ids NULL: row i) of the plane
 * k_decode_f16rows would write, times its row scale, converted to TY; the same operations as that decode
 * followed by k_get_rows (or k_plane_to_act), hence the same bits, with no plane in between. A bad id is
 * reported as k_get_rows reports it (position i, the id) and its row left unwritten. */
template <int CODEC, typename TY>
__global__ void __launch_bounds__(ROWS_THREADS) k_decode_rows_act(cqk_dev d, const uint8_t *p, int64_t rows,
                                                                  int64_t cols, const float *lut, const int32_t *ids,
                                                                  void *y) {
    __shared__ float sh[32];
    const int64_t i = blockIdx.x;
    const int64_t r = ids ? (int64_t)ids[i] : i;
    if (r < 0 || r >= rows) { /* the whole block leaves, before any barrier */
        if (threadIdx.x == 0) cqk_report(d.st, CQK_ERR_INDEX, d.op, d.seq, i, r);
        return;
    }
    float m = 0.0f;
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) m = fmaxf(m, cqk_mag(decode_one<CODEC>(p, rows, cols, r, k, lut)));
    const int e = cqk_row_exponent(cqk_block_maxf(m, sh));
    const float rs = ldexpf(1.0f, -e);
    for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
        const float v = cqk_h2f(cqk_f2h(ldexpf(decode_one<CODEC>(p, rows, cols, r, k, lut), e)));
        cqk_st<TY>(y, i * cols + k, v * rs);
    }
}

/* The activation operand's staging, once per matmul on the hot path: one block per row. VEC (the row's
 * columns, both pitches and both pointers in whole groups of four) reads and writes four values per access;
 * the second pass reads the row again (from L2). Scaling by the power of two p = 2^e is exact, as ldexpf. */
template <typename TX, bool VEC>
__global__ void __launch_bounds__(ROWS_THREADS) k_stage_f16rows(uint16_t *y, int64_t ldy, float *rowscale, const void *x,
                                                                int64_t ldx, int64_t cols) {
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    const TX *xr = (const TX *)x + r * ldx;
    uint16_t *yr = y + r * ldy;
    float m = 0.0f;
    if (VEC)
        for (int64_t k = 4 * (int64_t)threadIdx.x; k < cols; k += 4 * (int64_t)blockDim.x) {
            const float4 v = cqk_io<TX>::ld4(xr, k);
            m = fmaxf(m, fmaxf(fmaxf(cqk_mag(v.x), cqk_mag(v.y)), fmaxf(cqk_mag(v.z), cqk_mag(v.w))));
        }
    else
        for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) m = fmaxf(m, cqk_mag(cqk_io<TX>::ld(xr, k)));
    const float p = cqk_row_scale(m, sh, rowscale + r);
    if (VEC)
        for (int64_t k = 4 * (int64_t)threadIdx.x; k < ldy; k += 4 * (int64_t)blockDim.x) {
            uint2 o = make_uint2(0u, 0u); /* padding columns [cols, ldy) are zeros */
            if (k < cols) {
                const float4 v = cqk_io<TX>::ld4(xr, k);
                o = cqk_f16x4_scaled(v.x, v.y, v.z, v.w, p);
            }
            *(uint2 *)(yr + k) = o;
        }
    else
        for (int64_t k = threadIdx.x; k < ldy; k += blockDim.x) yr[k] = k < cols ? cqk_f2h(cqk_io<TX>::ld(xr, k) * p) : (uint16_t)0;
}

/* The same for rows of at most 4·NC·ROWS_THREADS (padded) columns in whole groups of four (VEC's conditions):
 * each thread keeps its NC groups in registers, so the row is read once, all of a thread's loads in flight
 * together (the two-pass kernel reads a long row twice, the second time after the block's reduction). Same
 * arithmetic, so the same bits. */
template <typename TX, int NC>
__global__ void __launch_bounds__(ROWS_THREADS) k_stage_f16rows_reg(uint16_t *y, int64_t ldy, float *rowscale,
                                                                    const void *x, int64_t ldx, int64_t cols) {
    __shared__ float sh[32];
    const int64_t r = blockIdx.x;
    const TX *xr = (const TX *)x + r * ldx;
    uint16_t *yr = y + r * ldy;
    float4 v[NC];
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < NC; i++) {
        const int64_t k = 4 * ((int64_t)threadIdx.x + (int64_t)i * ROWS_THREADS);
        v[i] = k < cols ? cqk_io<TX>::ld4(xr, k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        m = fmaxf(m, fmaxf(fmaxf(cqk_mag(v[i].x), cqk_mag(v[i].y)), fmaxf(cqk_mag(v[i].z), cqk_mag(v[i].w))));
    }
    const float p = cqk_row_scale(m, sh, rowscale + r);
#pragma unroll
    for (int i = 0; i < NC; i++) {
        const int64_t k = 4 * ((int64_t)threadIdx.x + (int64_t)i * ROWS_THREADS);
        if (k < ldy) /* padding columns [cols, ldy) are zeros: v holds zeros there */
            *(uint2 *)(yr + k) = cqk_f16x4_scaled(v[i].x, v[i].y, v[i].z, v[i].w, p);
    }
}

extern "C" cudaError_t cqk_stage_f16_rows(const cqk_ctx *c, uint16_t *y, int64_t ldy, float *rowscale, const void *x,
                                          int xdt, int64_t ldx, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff || ldy < cols) return cudaErrorInvalidValue;
    CQK_DISPATCH(xdt, TX, {
        const bool vec = cols % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && (uintptr_t)x % (4 * sizeof(TX)) == 0 &&
                         (uintptr_t)y % 8 == 0;
        const unsigned g = (unsigned)rows;
        const int nc = !vec                            ? 0
                       : ldy <= 4 * 4 * ROWS_THREADS  ? 4
                       : ldy <= 4 * 12 * ROWS_THREADS ? 12
                       : ldy <= 4 * 16 * ROWS_THREADS ? 16
                                                      : 0;
        if (nc == 4) k_stage_f16rows_reg<TX, 4><<<g, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, x, ldx, cols);
        else if (nc == 12) k_stage_f16rows_reg<TX, 12><<<g, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, x, ldx, cols);
        else if (nc == 16) k_stage_f16rows_reg<TX, 16><<<g, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, x, ldx, cols);
        else if (vec) k_stage_f16rows<TX, true><<<g, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, x, ldx, cols);
        else k_stage_f16rows<TX, false><<<g, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, x, ldx, cols);
    });
    return cqk_launched();
}

/* ---- a convolution's implicit matrix (im2col), staged as scaled f16 rows ---------------------------------- */
/* Source coordinate of padded coordinate i in [0, n) (ref_elem.c's pad_index): -1 is a zero sample. */
__device__ __forceinline__ int64_t pad_src(int64_t i, int64_t n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 1) return i < 0 ? 0 : n - 1;
    if (mode == 2) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}

/* x's element offset for tap t of output row m, channel 0; -1 for a zero sample. g is normalized by
 * im2col_norm (kt, st, dx >= 1, Ho set), so the conv2d and conv3d cases are one formula. */
__device__ __forceinline__ int64_t tap_base(const cqk_im2col &g, int64_t m, int t) {
    const int khw = g.kh * g.kw, a = t / khw, r = t - a * khw, ky = r / g.kw, kx = r - ky * g.kw;
    const int64_t hw = g.Ho * g.Wo, ot = m / hw, q = m - ot * hw, oy = q / g.Wo, ox = q - oy * g.Wo;
    int64_t it = ot * g.st + a - g.pad_f;
    it = it < 0 ? 0 : it >= g.T ? g.T - 1 : it;
    const int64_t iy = pad_src(oy * g.sy + ky - g.pad_t, g.H, g.mode);
    const int64_t ix = pad_src(ox * g.sx + (int64_t)kx * g.dx - g.pad_l, g.W, g.mode);
    return iy < 0 || ix < 0 ? -1 : ((it * g.H + iy) * g.W + ix) * g.Cin;
}

/* One block per output pixel. SMEM: the row is gathered once into shared memory (K floats), reading x with
 * consecutive threads on consecutive channels of one tap, then written out in column order; otherwise (rows
 * too long for it) each column is gathered twice, for the absmax and for the store. Same values, same scale
 * rule as cqk_stage_f16_rows, so a convolution's operand equals the matmul staging of its im2col matrix. */
template <typename TX, bool SMEM>
__global__ void __launch_bounds__(ROWS_THREADS) k_stage_im2col(uint16_t *y, int64_t ldy, float *rowscale, cqk_im2col g,
                                                               int64_t row0) {
    extern __shared__ float gath[];
    __shared__ float sh[32];
    const int64_t r = blockIdx.x, m = row0 + r;
    const int khw = g.kt * g.kh * g.kw; /* taps */
    const int64_t K = g.Cin * khw;
    uint16_t *yr = y + r * ldy;
    float mx = 0.0f;
    if (SMEM) {
        for (int t = 0; t < khw; t++) {
            const int64_t b = tap_base(g, m, t);
            for (int64_t ci = threadIdx.x; ci < g.Cin; ci += blockDim.x) {
                const float v = b < 0 ? 0.0f : cqk_ld<TX>(g.x, b + ci);
                gath[ci * khw + t] = v;
                mx = fmaxf(mx, cqk_mag(v));
            }
        }
    } else {
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            const int64_t ci = k / khw, b = tap_base(g, m, (int)(k - ci * khw));
            mx = fmaxf(mx, cqk_mag(b < 0 ? 0.0f : cqk_ld<TX>(g.x, b + ci)));
        }
    }
    const float p = cqk_row_scale(mx, sh, rowscale + r); /* its barriers also publish gath */
    for (int64_t k = threadIdx.x; k < ldy; k += blockDim.x) {
        float v = 0.0f; /* padding columns [K, ldy) are zeros */
        if (k < K) {
            if (SMEM) v = gath[k];
            else {
                const int64_t ci = k / khw, b = tap_base(g, m, (int)(k - ci * khw));
                v = b < 0 ? 0.0f : cqk_ld<TX>(g.x, b + ci);
            }
        }
        yr[k] = cqk_f2h(v * p);
    }
}

/* Tap-major columns (t * Cin + ci, the layout cqk_plane_taps_first gives a kernel's plane): a row is its taps'
 * input pixels one after the other, Cin contiguous channels each, so a warp per output pixel reads and writes whole
 * runs (VEC: four channels per access, Cin a multiple of four). Eight pixels per block, no block barriers; the
 * input pixels stay in L2 for the nine or so warps that read each. Same values and scale as the column-major
 * kernel above, in another column order. */
template <typename TX, bool VEC>
__global__ void __launch_bounds__(ROWS_THREADS) k_stage_im2col_taps(uint16_t *y, int64_t ldy, float *rowscale,
                                                                    cqk_im2col g, int64_t row0, int64_t rows) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return; /* whole warps */
    const int64_t m = row0 + r;
    const int khw = g.kt * g.kh * g.kw; /* taps */
    const TX *x = (const TX *)g.x;
    uint16_t *yr = y + r * ldy;
    float mx = 0.0f;
    for (int t = 0; t < khw; t++) {
        const int64_t b = tap_base(g, m, t);
        if (b < 0) continue;
        if (VEC)
            for (int64_t ci = 4 * lane; ci < g.Cin; ci += 128) {
                const float4 v = cqk_io<TX>::ld4(x, b + ci);
                mx = fmaxf(mx, fmaxf(fmaxf(cqk_mag(v.x), cqk_mag(v.y)), fmaxf(cqk_mag(v.z), cqk_mag(v.w))));
            }
        else
            for (int64_t ci = lane; ci < g.Cin; ci += 32) mx = fmaxf(mx, cqk_mag(cqk_io<TX>::ld(x, b + ci)));
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const int e = cqk_row_exponent(mx);
    const float p = ldexpf(1.0f, e);
    if (lane == 0) rowscale[r] = ldexpf(1.0f, -e);
    for (int t = 0; t < khw; t++) {
        const int64_t b = tap_base(g, m, t);
        uint16_t *d = yr + (int64_t)t * g.Cin;
        if (VEC)
            for (int64_t ci = 4 * lane; ci < g.Cin; ci += 128) {
                const float4 v = b < 0 ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : cqk_io<TX>::ld4(x, b + ci);
                *(uint2 *)(d + ci) = cqk_f16x4_scaled(v.x, v.y, v.z, v.w, p);
            }
        else
            for (int64_t ci = lane; ci < g.Cin; ci += 32) d[ci] = cqk_f2h((b < 0 ? 0.0f : cqk_io<TX>::ld(x, b + ci)) * p);
    }
    for (int64_t k = g.Cin * khw + lane; k < ldy; k += 32) yr[k] = 0; /* padding columns */
}

extern "C" cudaError_t cqk_stage_im2col_f16(const cqk_ctx *c, uint16_t *y, int64_t ldy, float *rowscale,
                                            const cqk_im2col *g0, int64_t row0, int64_t rows, int taps_first) {
    if (rows <= 0) return cudaSuccess;
    if (g0->Wo < 1) return cudaErrorInvalidValue;
    cqk_im2col n = *g0; /* a conv2d's: one frame, every row of the band in it */
    const cqk_im2col *g = &n;
    if (n.kt < 1) n.kt = 1, n.st = 1, n.pad_f = 0, n.T = 1, n.Ho = (row0 + rows + n.Wo - 1) / n.Wo;
    if (n.dx < 1) n.dx = 1;
    if (n.st < 1 || n.Ho < 1 || n.T < 1) return cudaErrorInvalidValue;
    const int64_t K = g->Cin * g->kt * g->kh * g->kw;
    if (rows > 0x7fffffff || ldy < K) return cudaErrorInvalidValue;
    const unsigned b = (unsigned)rows;
    const size_t smem = (size_t)K * sizeof(float);
    CQK_DISPATCH(g->xdt, TX, {
        if (taps_first) {
            const unsigned wb = (unsigned)((rows * 32 + ROWS_THREADS - 1) / ROWS_THREADS);
            const bool vec = g->Cin % 4 == 0 && ldy % 4 == 0 && (uintptr_t)g->x % (4 * sizeof(TX)) == 0 &&
                             (uintptr_t)y % 8 == 0;
            if (vec) k_stage_im2col_taps<TX, true><<<wb, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, *g, row0, rows);
            else k_stage_im2col_taps<TX, false><<<wb, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, *g, row0, rows);
        } else if (smem <= 48 * 1024) {
            k_stage_im2col<TX, true><<<b, ROWS_THREADS, smem, c->stream>>>(y, ldy, rowscale, *g, row0);
        } else {
            k_stage_im2col<TX, false><<<b, ROWS_THREADS, 0, c->stream>>>(y, ldy, rowscale, *g, row0);
        }
    });
    return cqk_launched();
}

/* Run-time weight codec -> the decoder's template instance, launched by LAUNCH(codec constant); q4tp needs
 * the exp2 table and whole 32-column groups. Returns cudaErrorInvalidValue for anything else. */
#define CODEC_SWITCH(codec, lut, cols, LAUNCH)                        \
    switch (codec) {                                                  \
    case CQK_W_F32: LAUNCH(CQK_W_F32); break;                         \
    case CQK_W_F16: LAUNCH(CQK_W_F16); break;                         \
    case CQK_W_BF16: LAUNCH(CQK_W_BF16); break;                       \
    case CQK_W_Q8_ROW: LAUNCH(CQK_W_Q8_ROW); break;                   \
    case CQK_W_Q8_2F: LAUNCH(CQK_W_Q8_2F); break;                     \
    case CQK_W_Q4_BLOCK: LAUNCH(CQK_W_Q4_BLOCK); break;               \
    case CQK_W_Q4_TILED: LAUNCH(CQK_W_Q4_TILED); break;               \
    case CQK_W_Q4TP:                                                  \
        if (!(lut) || (cols) % 32) return cudaErrorInvalidValue;      \
        LAUNCH(CQK_W_Q4TP);                                           \
        break;                                                        \
    default: return cudaErrorInvalidValue;                            \
    }

extern "C" cudaError_t cqk_decode_weight(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows, int64_t cols,
                                         uint16_t *plane, int64_t ld, float *rowscale, const float *exp2_lut) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff || ld < cols) return cudaErrorInvalidValue;
    const unsigned g = (unsigned)rows;
    /* the q8 codecs' common shapes, sixteen values a thread (the same bits) */
    const bool two_f = codec == CQK_W_Q8_2F;
    if ((two_f || codec == CQK_W_Q8_ROW) && cols % 16 == 0 && ld % 8 == 0 && (uintptr_t)raw % 16 == 0 &&
        (uintptr_t)plane % 16 == 0 && (!two_f || (rows * cols + 2 * rows) % 16 == 0)) {
        if (two_f) k_decode_q8_f16rows<true><<<g, ROWS_THREADS, 0, c->stream>>>(raw, rows, cols, plane, ld, rowscale);
        else k_decode_q8_f16rows<false><<<g, ROWS_THREADS, 0, c->stream>>>(raw, rows, cols, plane, ld, rowscale);
        return cqk_launched();
    }
#define DEC(C) k_decode_f16rows<C><<<g, ROWS_THREADS, 0, c->stream>>>(raw, rows, cols, plane, ld, rowscale, exp2_lut)
    CODEC_SWITCH(codec, exp2_lut, cols, DEC);
#undef DEC
    return cqk_launched();
}

extern "C" cudaError_t cqk_decode_weight_taps(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows,
                                              int64_t cols, uint16_t *plane, int64_t ld, float *rowscale,
                                              const float *exp2_lut, int taps) {
    if (taps <= 1) return cqk_decode_weight(c, codec, raw, rows, cols, plane, ld, rowscale, exp2_lut);
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (rows > 0x7fffffff || ld < cols || cols % taps) return cudaErrorInvalidValue;
    const unsigned g = (unsigned)rows;
#define DEC(C) \
    k_decode_f16rows_taps<C><<<g, ROWS_THREADS, 0, c->stream>>>(raw, rows, cols, plane, ld, rowscale, exp2_lut, taps)
    CODEC_SWITCH(codec, exp2_lut, cols, DEC);
#undef DEC
    return cqk_launched();
}

extern "C" cudaError_t cqk_decode_rows_act(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows,
                                           int64_t cols, const float *exp2_lut, const int32_t *ids, int64_t n, void *y,
                                           int ydt) {
    if (n <= 0 || rows <= 0 || cols <= 0) return cudaSuccess;
    if (n > 0x7fffffff || (!ids && n > rows)) return cudaErrorInvalidValue;
    const unsigned g = (unsigned)n;
    const cqk_dev d = cqk_dev_of(c);
#define DEC(C)                                                                                                       \
    CQK_DISPATCH(ydt, TY, {                                                                                          \
        k_decode_rows_act<C, TY><<<g, ROWS_THREADS, 0, c->stream>>>(d, raw, rows, cols, exp2_lut, ids, y);          \
    })
    CODEC_SWITCH(codec, exp2_lut, cols, DEC);
#undef DEC
    return cqk_launched();
}

/* ---- the decoders to f32 (test hook) ------------------------------------------------------ */
template <int CODEC>
__global__ void k_decode_f32(const uint8_t *p, int64_t rows, int64_t cols, float *out, const float *lut) {
    const int64_t n = rows * cols;
    CQK_GRID_STRIDE(e, n) {
        const int64_t r = e / cols, k = e - r * cols;
        out[e] = decode_one<CODEC>(p, rows, cols, r, k, lut);
    }
}

extern "C" cudaError_t cqk_decode_weight_f32(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows,
                                             int64_t cols, float *out, const float *exp2_lut) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const unsigned b = cqk_blocks(rows * cols, 256);
#define DEC(C) k_decode_f32<C><<<b, 256, 0, c->stream>>>(raw, rows, cols, out, exp2_lut)
    CODEC_SWITCH(codec, exp2_lut, cols, DEC);
#undef DEC
    return cqk_launched();
}

/* ---- a plane read back as an activation ------------------------------------------------- */
template <typename TY>
__global__ void k_plane_to_act(void *y, const uint16_t *plane, int64_t ld, const float *rowscale, int64_t rows,
                               int64_t cols, int taps) {
    const int64_t n = rows * cols, cin = cols / taps;
    CQK_GRID_STRIDE(i, n) {
        const int64_t r = i / cols, k = i - r * cols, ci = k / taps;
        cqk_st<TY>(y, i, cqk_h2f(plane[r * ld + (k - ci * taps) * cin + ci]) * rowscale[r]);
    }
}

extern "C" cudaError_t cqk_plane_to_act(const cqk_ctx *c, void *y, int ydt, const uint16_t *plane, int64_t ld,
                                        const float *rowscale, int64_t rows, int64_t cols, int taps) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (taps < 1 || cols % taps) return cudaErrorInvalidValue;
    unsigned b = cqk_blocks(rows * cols, 256);
    CQK_DISPATCH(ydt, TY, { k_plane_to_act<TY><<<b, 256, 0, c->stream>>>(y, plane, ld, rowscale, rows, cols, taps); });
    return cqk_launched();
}

/* ---- a convolution kernel's plane in tap-major column order ------------------------------------------ */
__global__ void k_plane_taps_first(uint16_t *dst, const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, int taps) {
    const int64_t n = rows * ld, cin = cols / taps;
    CQK_GRID_STRIDE(i, n) {
        const int64_t r = i / ld, k = i - r * ld; /* k: the destination column, tap t = k / cin, channel ci */
        const int64_t t = k / cin, ci = k - t * cin;
        dst[i] = k < cols ? src[r * ld + ci * taps + t] : (uint16_t)0;
    }
}

extern "C" cudaError_t cqk_plane_taps_first(const cqk_ctx *c, uint16_t *dst, const uint16_t *src, int64_t rows,
                                            int64_t cols, int64_t ld, int taps) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    if (taps < 1 || cols % taps || ld < cols) return cudaErrorInvalidValue;
    k_plane_taps_first<<<cqk_blocks(rows * ld, 256), 256, 0, c->stream>>>(dst, src, rows, cols, ld, taps);
    return cqk_launched();
}

/* ---- non-finite scan -------------------------------------------------------------- */
template <typename T>
__global__ void k_check_finite(cqk_dev d, const void *y, int64_t rows, int64_t cols, int64_t ld) {
    const int64_t n = rows * cols;
    CQK_GRID_STRIDE(i, n) {
        int64_t r = i / cols, k = i - r * cols;
        float v = cqk_ld<T>(y, r * ld + k);
        if (!isfinite(v)) cqk_report(d.st, CQK_ERR_NONFINITE, d.op, d.seq, i, 0);
    }
}

extern "C" cudaError_t cqk_check_finite(const cqk_ctx *c, const void *y, int dt, int64_t rows, int64_t cols,
                                        int64_t ld) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    unsigned b = cqk_blocks(rows * cols, 256);
    cqk_dev d = cqk_dev_of(c);
    CQK_DISPATCH(dt, T, { k_check_finite<T><<<b, 256, 0, c->stream>>>(d, y, rows, cols, ld); });
    return cqk_launched();
}
