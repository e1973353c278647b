/*
 * cuda_kernels.h — the boundary between the CUDA backend's C host code and
 * its kernels (*.cu). Plain C on both sides: the .cu files export one
 * `cqk_*` launcher per kernel family with C linkage; each launcher picks the
 * template instance for the dtypes, enqueues on ctx->stream and returns the
 * launch status (cudaGetLastError), never waiting for the device.
 *
 * Numbers are passed as enums of their own (CQK_*), mirrored from ops.h and
 * checked against it at compile time in cuda_backend.c, so the .cu files need
 * no project headers.
 *
 * Device-side failures (an index out of range, a non-finite output) are
 * reported through one cqk_status word per backend: the first kernel that
 * fails records what happened; sync reads it back.
 */
#ifndef CQ_CUDA_KERNELS_H
#define CQ_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation element types (cq_dtype F32/F16/BF16 map onto these). */
enum { CQK_F32 = 0, CQK_F16 = 1, CQK_BF16 = 2, CQK_I32 = 3 };

/* Weight codecs the device decoders know (cq_dtype ids). */
enum {
    CQK_W_F32 = 0,
    CQK_W_F16 = 1,
    CQK_W_BF16 = 2,
    CQK_W_Q8_ROW = 3,
    CQK_W_Q4_BLOCK = 4,
    CQK_W_Q8_2F = 9,
    CQK_W_Q4_TILED = 11,
    CQK_W_Q4TP = 15,
};

/* What a failing kernel records (cqk_status.code). */
enum { CQK_ERR_NONE = 0, CQK_ERR_INDEX = 1, CQK_ERR_NONFINITE = 2 };

typedef struct cqk_status {
    unsigned int code;  /* CQK_ERR_* of the first failure since the last sync; 0 = none */
    unsigned int op;    /* cq_op of the op that failed */
    unsigned int seq;   /* the op's number since the last sync (0-based) */
    unsigned int pad;
    long long where;    /* element / position index */
    long long value;    /* the offending index value (CQK_ERR_INDEX) */
} cqk_status;

/* Passed to every launcher. */
typedef struct cqk_ctx {
    cudaStream_t stream;
    cqk_status *st;   /* device memory */
    unsigned int op;  /* cq_op being run (for reports) */
    unsigned int seq; /* op number since the last sync */
    int check;        /* also scan this op's output for non-finite values */
} cqk_ctx;

/* A producer's side copy of its f32 output as the next matmul would stage it (below): f16 rows [rows, ld]
 * scaled by powers of two, and their scales [rows]. */
typedef struct cqk_side {
    uint16_t *y;
    int64_t ld;
    float *scale;
} cqk_side;

/* ---- conversions, copies, weight decoding (k_convert.cu) ----------------- */
/* y[i] = x[i] over n elements, converting between F32/F16/BF16 (I32 only to I32).
 * Rounding: round-to-nearest-even, overflow to inf, subnormals kept: the
 * same bits as the CPU backend's cq_cpu_f2h / cq_cpu_f2bf. */
cudaError_t cqk_convert(const cqk_ctx *c, void *y, int ydt, const void *x, int xdt, int64_t n);
/* GEMM operands are f16 with a power-of-two scale per row (the range
 * guard): row r is stored as f16(v * 2^e_r) with e_r chosen so the row's
 * absmax lands in [2^13, 2^14) (no overflow, no subnormals for all but
 * values 2^-27 below the absmax), and rowscale[r] = 2^-e_r is multiplied
 * back into the f32 GEMM result by the epilogue (exact: powers of two). A
 * row that is all zeros or holds a non-finite value keeps e = 0 (a NaN/Inf
 * then shows in the output, where the non-finite check reports it).
 * Padding columns [cols, ld) are written as zeros. */
/* x [rows, cols] (pitch ldx, dtype xdt) -> y f16 [rows, ldy] + rowscale [rows]. */
cudaError_t cqk_stage_f16_rows(const cqk_ctx *c, uint16_t *y, int64_t ldy, float *rowscale, const void *x, int xdt,
                               int64_t ldx, int64_t rows, int64_t cols);
/* The same staging for a convolution's implicit matrix (im2col): row r is output pixel m = row0 + r of a
 * conv2d (ops.h: x [H*W, Cin] channels-last, padding by mode), its columns the receptive field: in the weight's
 * PyTorch order, column ci*kh*kw + t = x at tap t = ky*kw + kx, i.e. (oy*sy + ky - pad_t, ox*sx + kx*dx - pad_l),
 * channel ci; or with taps_first, column t*Cin + ci (a kernel plane laid out by cqk_plane_taps_first; the input
 * pixels are then copied whole, which is much faster).
 * A conv3d's (kt >= 1; x [T*H*W, Cin]): row m is output voxel (ot, oy, ox) of a [To, Ho, Wo] grid, tap
 * t = (a*kh + ky)*kw + kx (PyTorch's [Cout, Cin, kt, kh, kw] flattened), frame ot*st + a - pad_f clamped to
 * [0, T) (the replicated first and last frames), space padded by mode as above. kt = 0 is a conv2d (T = 1).
 * A conv1d is a conv3d of one frame and one row (H = 1, kh = 1), with the dilation dx along W. */
typedef struct cqk_im2col {
    const void *x; int xdt;
    int64_t H, W, Cin, Wo;
    int kh, kw, sy, sx, pad_t, pad_l, mode; /* mode: 0 zeros, 1 replicate, 2 reflect (cq_pad_mode) */
    int64_t T, Ho;                          /* conv3d: frames in, output rows per frame */
    int kt, st, pad_f;                      /* conv3d: time taps, stride, front padding (replicated) */
    int dx;                                 /* dilation along W (0 = 1) */
} cqk_im2col;
cudaError_t cqk_stage_im2col_f16(const cqk_ctx *c, uint16_t *y, int64_t ldy, float *rowscale, const cqk_im2col *g,
                                 int64_t row0, int64_t rows, int taps_first);
/* A convolution kernel's plane [rows, ld] with columns ci*taps + t (PyTorch's [Cout, Cin, kh, kw]) rewritten into
 * dst with columns t*Cin + ci (Cin = cols / taps); padding columns zero. */
cudaError_t cqk_plane_taps_first(const cqk_ctx *c, uint16_t *dst, const uint16_t *src, int64_t rows, int64_t cols,
                                 int64_t ld, int taps);
/* Decode a raw CMF payload (device memory) of a [rows, cols] matrix view into
 * the f16 plane [rows, ld] + rowscale [rows] described above. The f32 value
 * of every element is computed exactly as the codec layer's decoder does
 * (src/codec/decode*.c) before the scaling and the one rounding to f16.
 * exp2_lut: 65536 floats, exp2f(f16 value of each bit pattern) computed on
 * the host (q4tp only). */
cudaError_t cqk_decode_weight(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows, int64_t cols,
                              uint16_t *plane, int64_t ld, float *rowscale, const float *exp2_lut);
/* cqk_decode_weight for a convolution kernel (taps > 1: columns ci*taps + t, PyTorch's [Cout, Cin, kh, kw]):
 * the plane in tap-major column order, the bits of cqk_decode_weight then cqk_plane_taps_first. taps <= 1:
 * cqk_decode_weight. */
cudaError_t cqk_decode_weight_taps(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows, int64_t cols,
                                   uint16_t *plane, int64_t ld, float *rowscale, const float *exp2_lut, int taps);
/* y [n, cols] (ydt) = rows ids[i] (ids NULL: rows 0..n-1) of a raw payload's plane times their row scales: the
 * bits of cqk_decode_weight then cqk_get_rows (or cqk_plane_to_act), with no plane. A bad id is reported as
 * cqk_get_rows reports it. */
cudaError_t cqk_decode_rows_act(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows, int64_t cols,
                                const float *exp2_lut, const int32_t *ids, int64_t n, void *y, int ydt);
/* The same decoders into f32 [rows, cols] (no rounding): the test hook. */
cudaError_t cqk_decode_weight_f32(const cqk_ctx *c, int codec, const uint8_t *raw, int64_t rows, int64_t cols,
                                  float *out, const float *exp2_lut);
/* y [rows, cols] (ydt) = plane [rows, ld] * rowscale: a weight read back as an activation; taps > 1: the plane is
 * a convolution kernel's in tap-major order (cqk_plane_taps_first), read back in PyTorch's order. */
cudaError_t cqk_plane_to_act(const cqk_ctx *c, void *y, int ydt, const uint16_t *plane, int64_t ld,
                             const float *rowscale, int64_t rows, int64_t cols, int taps);
/* Scan rows x cols (pitch ld) for NaN/Inf; the first one found is reported. */
cudaError_t cqk_check_finite(const cqk_ctx *c, const void *y, int dt, int64_t rows, int64_t cols, int64_t ld);

/* ---- GEMM support (k_gemm.cu) -------------------------------------------- */
/* Plain tiled GEMM on CUDA cores: D[M,N] (pitch ldd, F32 or BF16) =
 * alpha * B·Aᵀ + beta * D, with A [N,K] (pitch lda) and B [M,K] (pitch ldb)
 * f16, f32 accumulation. The fallback when cuBLASLt has no algorithm, and a
 * debugging aid (CORTIQ_CUDA_GEMM=simt). */
cudaError_t cqk_gemm_simt(const cqk_ctx *c, const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, void *D,
                          int ddt, int64_t ldd, int64_t M, int64_t N, int64_t K, float alpha, float beta);

enum { CQK_ACT_NONE = 0, CQK_ACT_GELU_TANH = 1, CQK_ACT_SILU = 2, CQK_ACT_SWIGLU = 3 };
typedef struct cqk_epilogue {
    const float *acc1; int64_t ld1; /* x·Wᵀ of the scaled operands (the gate half for SwiGLU) */
    const float *acc2; int64_t ld2; /* x·W2ᵀ (the up half), SwiGLU only */
    const float *xscale;            /* [M]: x's row scales */
    const float *wscale1, *wscale2; /* [N]: W's (and W2's / the up half's) row scales */
    const float *bias, *bias2, *gate; /* [N] or NULL */
    float scale;
    int act;
    int accumulate;
    void *y; int ydt; int64_t ldy;
    int64_t M, N;
} cqk_epilogue;
/* y (+)= gate ⊙ act(scale·acc + bias), the matmul contract of ops.h; checks finiteness when c->check. */
cudaError_t cqk_matmul_epilogue(const cqk_ctx *c, const cqk_epilogue *e);

/* The matmul on Hopper with the epilogue in registers (k_gemm90.cu, compute
 * capability 9.0 only): y (+)= gate ⊙ act(scale · (x·W1ᵀ) · xscale · ws1 + bias),
 * SwiGLU with the up half from w2 (rows n of w2 pair with rows n of w1). x
 * [M, ldx] and W [rows, ldw] f16 with one scale per row, K-contiguous, pitches
 * multiples of 8. Needs cqk_gemm90_smem() bytes of shared memory per block. */
typedef struct cqk_gemm90 {
    const uint16_t *x; int64_t ldx; const float *xscale;
    const uint16_t *w1; int64_t ldw1; const float *ws1; int64_t rows1; /* rows of w1 (bounds its reads) */
    const uint16_t *w2; int64_t ldw2; const float *ws2;               /* SwiGLU's up half: N rows */
    const float *bias, *bias2, *gate;
    float scale;
    int act, accumulate;
    void *y; int ydt; int64_t ldy;
    int64_t M, N, K;
} cqk_gemm90;
cudaError_t cqk_gemm90_run(const cqk_ctx *c, const cqk_gemm90 *g);
size_t cqk_gemm90_smem(void);

/* ---- attention (k_attention.cu) ------------------------------------------ */
typedef struct cqk_attn {
    const void *q, *kp, *vp, *k, *v; /* kp/vp NULL when P == 0, k/v NULL when Nk == 0 */
    void *o;
    const int32_t *vis;              /* [Nq] or NULL */
    const int32_t *vis_lo;           /* [Nq] or NULL (lower bounds = 0) */
    int dt;
    int64_t Nq, P, Nk;
    int Hq, Hkv, D;
    float scale;
    int causal;
} cqk_attn;
/* Any head_dim up to CQK_ATTN_GENERIC_MAX_D, any dtype: one warp per (query, head), f32 online softmax. */
#define CQK_ATTN_GENERIC_MAX_D 2048
cudaError_t cqk_attention_generic(const cqk_ctx *c, const cqk_attn *a);
/* head_dim 128 or 80 on tensor cores (bf16 WMMA, f32 accumulation): 64
 * queries x 64 keys per step, online softmax in shared memory. Needs
 * cqk_attention_wmma_smem(D) bytes of dynamic shared memory per block; 0 for
 * a head_dim it does not take. */
cudaError_t cqk_attention_wmma(const cqk_ctx *c, const cqk_attn *a);
size_t cqk_attention_wmma_smem(int D);
/* head_dim 128 or 80, FlashAttention-2 style (k_flash.cu): mma.sync bf16 with
 * scores and output in registers. K and V are first packed into `scratch`
 * (cqk_attention_flash_scratch(a) bytes, bf16, padded); a block shape
 * (cqk_flash_shape) needs cqk_attention_flash_smem(shape, D) bytes of shared
 * memory per block (0: a head_dim it does not take). */
enum cqk_flash_shape {
    CQK_FLASH_128 = 0,   /* 128 queries per block: 8 warps x 16 rows, 3 stages */
    CQK_FLASH_64 = 1,    /* 64 queries: 4 warps x 16 rows, 2 stages */
    CQK_FLASH_128W4 = 2, /* 128 queries: 4 warps x 32 rows, Q in shared memory, 2 stages (the default) */
};
cudaError_t cqk_attention_flash(const cqk_ctx *c, const cqk_attn *a, void *scratch, int shape);
size_t cqk_attention_flash_scratch(const cqk_attn *a);
size_t cqk_attention_flash_smem(int shape, int D);
/* head_dim 128 on Hopper (k_flash90.cu, compute capability 9.0 only): wgmma
 * products, K/V tiles moved by bulk copies from `scratch`
 * (cqk_attention_flash90_scratch(a) bytes, where they are first packed as
 * swizzled bf16 tiles), two warpgroups taking turns; `stages` (2 or 3) K/V
 * tiles in flight need cqk_attention_flash90_smem(stages) bytes of shared
 * memory per block. */
cudaError_t cqk_attention_flash90(const cqk_ctx *c, const cqk_attn *a, void *scratch, int stages);
size_t cqk_attention_flash90_scratch(const cqk_attn *a);
size_t cqk_attention_flash90_smem(int stages);

/* ---- row ops (k_rows.cu) -------------------------------------------------- */
/* side (NULL: none; f32 y only, side->ld >= cols, a multiple of 4): y also written as the next matmul would
 * stage it (cqk_stage_f16_rows), from the same values, where the row fits the kernel that keeps it in
 * registers (up to 12288 columns, aligned groups of four); *side_written (with side) says whether it was */
cudaError_t cqk_layernorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols,
                          const float *scale, const float *shift, float eps, const cqk_side *side, int *side_written);
/* GroupNorm (ops.h) over x [R, C]: `scratch` holds cqk_groupnorm_scratch(groups) bytes; deterministic (partial
 * sums added in a fixed order), double sums as the reference. y may be x. */
cudaError_t cqk_groupnorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t C, int groups,
                          const float *gamma, const float *beta, float eps, void *scratch);
size_t cqk_groupnorm_scratch(int groups);
/* Group moments (ops.h cq_op_group_moments) of x [R, C] into m [R / block, 2 * groups]. */
cudaError_t cqk_group_moments(const cqk_ctx *c, float *m, const void *x, int dt, int64_t R, int64_t C, int groups,
                              int block);
cudaError_t cqk_rmsnorm(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols, const float *w,
                        const float *bias, int zero_centered, float eps);
enum { CQK_ROPE_NONE = 0, CQK_ROPE_INTERLEAVED = 1, CQK_ROPE_HALF = 2 };
cudaError_t cqk_qk_norm_rope(const cqk_ctx *c, void *t, int dt, int64_t N, int H, int D, const float *w, float eps,
                             const float *cos_t, const float *sin_t, int mode, int rope_dim);
cudaError_t cqk_softmax(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols, float scale);

/* ---- element-wise and data movement (k_eltwise.cu) ------------------------ */
enum {
    CQK_UNARY_SILU = 0, CQK_UNARY_GELU_TANH, CQK_UNARY_GELU_ERF, CQK_UNARY_TANH, CQK_UNARY_SIGMOID,
    CQK_UNARY_NEG, CQK_UNARY_EXP, CQK_UNARY_SCALE, CQK_UNARY_ADD_SCALAR, CQK_UNARY_CLAMP, CQK_UNARY_LOG,
    CQK_UNARY_SQRT, CQK_UNARY_COUNT
};
enum { CQK_BINARY_ADD = 0, CQK_BINARY_SUB, CQK_BINARY_MUL, CQK_BINARY_DIV, CQK_BINARY_COUNT };
cudaError_t cqk_unary(const cqk_ctx *c, void *y, const void *x, int dt, int64_t n, int fn, float alpha, float beta);
/* b is [n] (bcast 0) or one row of `cols` (bcast 1). */
cudaError_t cqk_binary(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t n, int64_t cols,
                       int bcast, int fn);
cudaError_t cqk_gated_add(const cqk_ctx *c, void *y, const void *x, int dt, int64_t n, int64_t cols, const float *gate);
/* b NULL: a is [rows, 2F] gate|up. */
cudaError_t cqk_swiglu(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t rows, int64_t F);
cudaError_t cqk_transpose(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t C);
cudaError_t cqk_concat_cols(const cqk_ctx *c, void *y, const void *a, const void *b, int dt, int64_t R, int64_t Ca,
                            int64_t Cb);
/* y [n, C] (ydt) = rows ids[i] of w [V, C] (pitch ldw, wdt F32/F16/BF16),
 * times rowscale[id] when given (a weight's f16 plane). */
cudaError_t cqk_get_rows(const cqk_ctx *c, void *y, int ydt, const void *w, int wdt, int64_t V, int64_t C, int64_t ldw,
                         const float *rowscale, const int32_t *ids, int64_t n);
cudaError_t cqk_gather_cols(const cqk_ctx *c, void *y, const void *x, int dt, int64_t R, int64_t K, int64_t N,
                            const int32_t *idx, int group, float scale);
cudaError_t cqk_upsample_nearest(const cqk_ctx *c, void *y, const void *x, int dt, int H, int W, int64_t C, int f);
/* inverse 0: pixel_shuffle [H*W, C*r*r] -> [rH*rW, C]; 1: pixel_unshuffle back. C is the small channel count. */
cudaError_t cqk_pixel_shuffle(const cqk_ctx *c, void *y, const void *x, int dt, int H, int W, int64_t C, int r,
                              int inverse);

/* ---- the video VAE and vocoder (k_ltx.cu) ---------------------------------------------------------------- */
/* ops.h's depth_to_space3d: x [T*H*W, C*pt*ph*pw] -> y [(pt*T)*(ph*H)*(pw*W), C], C the output channels. */
cudaError_t cqk_depth_to_space3d(const cqk_ctx *c, void *y, const void *x, int dt, int T, int H, int W, int64_t C,
                                 int pt, int ph, int pw);
/* ops.h's snake over x [rows, cols] (alpha, beta f32 [cols]; beta NULL: alpha); y may be x. */
cudaError_t cqk_snake(const cqk_ctx *c, void *y, const void *x, int dt, int64_t rows, int64_t cols, const float *alpha,
                      const float *beta, int logscale, float eps);
/* A 1-D convolution kernel w [R, M, k] as f32 out [k][R][M]: from a weight's f16 plane [R, ld] times rowscale
 * (plane not NULL; columns in PyTorch's order), else from the activation src of dtype sdt. */
cudaError_t cqk_conv1d_weight_f32(const cqk_ctx *c, float *out, const void *src, int sdt, const uint16_t *plane,
                                  int64_t ld, const float *rowscale, int64_t R, int64_t M, int k);
/* conv1d and conv_transpose1d (ops.h) on x [L, Cin] -> y [Lo, Cout] (same dtype) with the kernel made by
 * cqk_conv1d_weight_f32 (conv1d: wt [k][Cout][Cin/G]; transposed: wt [k][Cin][Cout/G]), bias f32 or NULL.
 * f32 accumulation. The transposed one ignores dilation and mode. */
typedef struct cqk_conv1d {
    int64_t L, Cin, Cout, Lo;
    int k, stride, dilation, G, pad_l, mode;
} cqk_conv1d;
cudaError_t cqk_conv1d_direct(const cqk_ctx *c, void *y, const void *x, int dt, const float *wt, const float *bias,
                              const cqk_conv1d *p);
cudaError_t cqk_conv_transpose1d(const cqk_ctx *c, void *y, const void *x, int dt, const float *wt, const float *bias,
                                 const cqk_conv1d *p);

#ifdef __cplusplus
}
#endif

#endif /* CQ_CUDA_KERNELS_H */
