/*
 * cpu_impl.h — internals of the CPU backend shared by its files.
 *
 * Structure
 *  - cpu_backend.c: the vtable, ISA selection, supports().
 *  - cpu_kit: what differs per ISA. Each ISA file (gemm_generic.c,
 *    gemm_avx2.c, gemm_avx512.c, gemm_amx.c, gemm_neon.c) exports one
 *    cq_cpu_kit: microkernels, vector decoders, attention row helpers.
 *    Drivers (GEMM blocking, flash attention, conv) are ISA-neutral and call
 *    the kit, so a new ISA is one file plus a line in cpu_backend.c.
 *  - cpu_weights.c: weight matrices in any supported codec, decoded on the
 *    fly row segment by row segment (never a whole dequantized copy), as
 *    f32 or, for bf16 activations, as exact bf16 pairs.
 *  - cpu_gemm.c: blocked GEMM driver with fused epilogues; matmul and conv2d
 *    run on it, attention uses the same f32 microkernel.
 *  - attention_generic.c, rowops_generic.c, eltwise_generic.c,
 *    image_generic.c: the other ops, threaded over rows/heads.
 */
#ifndef CQ_CPU_IMPL_H
#define CQ_CPU_IMPL_H

#include <math.h>
#include <string.h>

#include "ops/backend.h"

/* ---- per-ISA kit ---------------------------------------------------------------- */
/* The f32 microkernel: C[i][j] (+)= sum_k a[i*lda + k] * b[k*ldb + j] for
 * i < mr, j < nr, k < kc. A is read row by row (weight rows, query rows,
 * probability rows: no packing needed), B column-block by k (packed
 * activation panels, transposed keys, value rows). acc = 0 overwrites C. */
typedef void (*cq_cpu_ukernel_fn)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                                  int64_t ldc, int acc);
/* The bf16-pair microkernel: operands are pairs of bf16 (k, k+1) packed in a
 * uint32 (low half = even k), A rows a[i*lda + p], B b[p*ldb + j], f32
 * accumulation: C[i][j] (+)= sum_p a.lo*b.lo + a.hi*b.hi. Products of two
 * bf16 are exact in f32, so with bf16 activations and weights that are bf16
 * or small integers this is the f32 path's math in another order. */
typedef void (*cq_cpu_ukernel_pair_fn)(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb,
                                       float *c, int64_t ldc, int acc);
/* The same for weights with a scale per row and group of gp pairs (the q4
 * codecs, whose nibbles are exact in bf16): C[i][j] (+)= sum_g s[i*lds + g] *
 * (sum over the group's pairs); kp is a multiple of gp. */
typedef void (*cq_cpu_ukernel_pair_grouped_fn)(int64_t kp, int64_t gp, const uint32_t *a, int64_t lda,
                                               const uint32_t *b, int64_t ldb, const float *s, int64_t lds, float *c,
                                               int64_t ldc, int acc);
/* n f16 (little-endian bytes) / bf16 values to f32. */
typedef void (*cq_cpu_cvt_fn)(const uint8_t *src, float *dst, int64_t n);

typedef struct cq_cpu_kit {
    cq_cpu_isa isa;
    const char *name;
    int mr, nr; /* f32 microkernel tile: mr weight (A) rows x nr activation (B) columns */
    cq_cpu_ukernel_fn ukernel;
    /* bf16 pairs (NULL where the ISA has no bf16 dot product): tile mr2 x nr2 */
    int mr2, nr2;
    cq_cpu_ukernel_pair_fn ukernel_pair;
    cq_cpu_ukernel_pair_grouped_fn ukernel_pair_grouped; /* may be NULL */
    /* called by the GEMM driver around its pair-path work on each thread
     * (AMX: load the tile configuration, release it); may be NULL */
    void (*pair_begin)(void);
    void (*pair_end)(void);
    /* row conversions and decoders (weight decoding, activation loads) */
    cq_cpu_cvt_fn f16_to_f32;
    cq_cpu_cvt_fn bf16_to_f32;
    /* out[i] = (q[i] * s) * col[i] (col NULL: q[i] * s), rounded in that order */
    void (*i8_to_f32)(const int8_t *q, float s, const float *col, float *out, int64_t n);
    /* ng groups of 32 4-bit values (16 bytes each, `stride` bytes apart, low nibble first):
     * out[32g + j] = (nibble - 8) * s[g] */
    void (*q4_to_f32)(const uint8_t *nib, int64_t stride, const float *s, float *out, int64_t ng);
    /* bf16-pair decoders (with ukernel_pair): exact integers as bf16 */
    void (*i8_to_bf16)(const int8_t *q, uint16_t *out, int64_t n);
    void (*q4_to_bf16)(const uint8_t *nib, int64_t stride, uint16_t *out, int64_t ng);
    float (*dot)(const float *a, const float *b, int64_t n); /* skinny (GEMV) matmuls */
    /* attention: s[i] *= scale, returns max s[i] (n >= 1) */
    float (*scale_max)(float *s, int64_t n, float scale);
    /* attention: s[i] = exp(s[i] - m), returns the sum (cq_cpu_expf accuracy) */
    float (*exp_sum)(float *s, int64_t n, float m);
} cq_cpu_kit;

/* The kit of an ISA built into this library (NULL: not built for this
 * architecture). It may only be called when cq_cpu_isa_available(isa). */
const cq_cpu_kit *cq_cpu_kit_for(cq_cpu_isa isa);
const cq_cpu_kit *cq_cpu_kit_generic(void);
#if defined(CQ_ARCH_X86)
const cq_cpu_kit *cq_cpu_kit_avx2(void);
const cq_cpu_kit *cq_cpu_kit_avx512(void);
const cq_cpu_kit *cq_cpu_kit_amx(void);
#endif
#if defined(CQ_ARCH_ARM64)
const cq_cpu_kit *cq_cpu_kit_neon(void);
#endif

/* exp(x) in plain C with the steps every kit vectorises (bit-identical
 * results): x = n ln2 + r, |r| <= ln2/2, exp(r) by its degree-7 Taylor
 * polynomial; relative error <= 1.5e-7 on [-87.3, 88] (tested in
 * test_cpu_kits.c), 0 below -87.33654 (no denormal results), NaN kept. */
float cq_cpu_expf(float x);

/* ---- the backend ------------------------------------------------------------------ */
/* Per-op scratch kept by the backend, one buffer per use that can be live at
 * once within an op, so ops in a steady loop (a denoiser step) allocate
 * nothing: each grows to the largest request and is reused. */
typedef enum cq_cpu_scratch_slot {
    CQ_CPU_SCRATCH_WORK = 0, /* per-thread work areas (GEMM panels, attention tiles, ...) */
    CQ_CPU_SCRATCH_X,        /* a converted activation operand */
    CQ_CPU_SCRATCH_W1,       /* decoded per-column factors / q4tp ladders of the first weight */
    CQ_CPU_SCRATCH_W2,       /* ... of the second (SwiGLU) */
    CQ_CPU_SCRATCH_KV,       /* attention: keys and values packed for a round of kv heads */
    CQ_CPU_SCRATCH_COUNT
} cq_cpu_scratch_slot;

typedef struct cq_cpu_backend {
    cq_backend base; /* first: a cq_backend* is a cq_cpu_backend* */
    cq_pool *pool;
    int threads;
    const cq_cpu_kit *kit;
    void *scratch[CQ_CPU_SCRATCH_COUNT];
    size_t scratch_cap[CQ_CPU_SCRATCH_COUNT];
} cq_cpu_backend;

/* At least `bytes` of 64-byte aligned scratch for `slot`, valid until the
 * matching put. A nested op (issued from inside a pool task, while the
 * outer op may hold the slot) gets a private allocation instead. NULL (with
 * CQ_ERR_NOMEM recorded) when out of memory. */
void *cq_cpu_scratch_get(cq_cpu_backend *cb, cq_cpu_scratch_slot slot, size_t bytes);
/* Frees `p` if it was a private allocation; the slot's buffer is kept. */
void cq_cpu_scratch_put(cq_cpu_backend *cb, cq_cpu_scratch_slot slot, void *p);

static inline cq_cpu_backend *cq_cpu_of(cq_backend *be) { return (cq_cpu_backend *)be; }

/* Run fn over [0, n) in chunks of at most `grain` items on the pool. `slot` is unique
 * among concurrently running calls and < cb->threads, so it indexes
 * per-thread scratch. */
typedef void (*cq_cpu_range_fn)(void *ctx, int slot, int64_t begin, int64_t end);
void cq_cpu_parallel(cq_cpu_backend *cb, int64_t n, int64_t grain, cq_cpu_range_fn fn, void *ctx);
/* A grain that gives each thread a few chunks of about `work_per_item` units. */
int64_t cq_cpu_grain(const cq_cpu_backend *cb, int64_t n, int64_t work_per_item);

/* ---- scalar conversions: round-to-nearest-even as PyTorch does for activations
 * (codec.h's file encoder rounds exact subnormal ties away from zero instead). */
static inline float cq_cpu_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t bits;
    if (em >= 0x7c00u) {
        bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13); /* inf / nan */
    } else if (em >= 0x0400u) {
        bits = sign | ((em << 13) + ((uint32_t)(127 - 15) << 23)); /* normal */
    } else {
        float f = (float)em * 5.9604644775390625e-8f; /* subnormal: m * 2^-24, exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

static inline uint16_t cq_cpu_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (ax < 0x38800000u) {                                   /* below the smallest normal: subnormal */
        if (ax < 0x33000000u) return sign;                    /* < 2^-25 rounds to 0 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23); /* 14 .. 24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | ((r - ((uint32_t)(127 - 15) << 23)) >> 13));
}

static inline float cq_cpu_bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t cq_cpu_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline uint16_t cq_cpu_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Rows of activations as f32, and back (F32/F16/BF16). */
void cq_cpu_load_row(const void *src, cq_dtype dt, int64_t i0, float *dst, int64_t n);
void cq_cpu_store_row(void *dst, cq_dtype dt, int64_t i0, const float *src, int64_t n);

static inline float cq_cpu_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float cq_cpu_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* ---- weights ----------------------------------------------------------------------- */
/* A matrix operand read as [rows = shape[0], cols = nelem/rows]: a weight in
 * any codec this backend decodes, or a float activation. */
typedef struct cq_cpu_wmat cq_cpu_wmat;
/* elements [k0, k0+n) of row r as f32, exactly the codec's values */
typedef void (*cq_cpu_wdecode_fn)(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out);
/* the same as exact bf16 values with the scale left out: none (bf16), one
 * per row (CQ_CPU_WSCALE_ROW, see cq_cpu_wmat_row_scale) or one per group of
 * 32 (CQ_CPU_WSCALE_GROUP, written to gs[0 .. n/32); k0 and n are then
 * multiples of 32) */
typedef void (*cq_cpu_wdecode_pair_fn)(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, uint16_t *out,
                                       float *gs);
typedef enum cq_cpu_wscale { CQ_CPU_WSCALE_NONE = 0, CQ_CPU_WSCALE_ROW, CQ_CPU_WSCALE_GROUP } cq_cpu_wscale;
struct cq_cpu_wmat {
    cq_dtype dt;
    const uint8_t *p;
    int64_t rows, cols;
    float *col;               /* q8_2f: decoded column factors [cols] (backend scratch) */
    int64_t gpr, code_stride; /* q4tp */
    float *ladder;            /* q4tp: [rows][32] rungs once prepared (backend scratch), else NULL */
    const cq_cpu_kit *kit;
    cq_cpu_backend *cb;
    cq_cpu_scratch_slot slot; /* where `col` / `ladder` live */
    cq_cpu_wdecode_fn decode;
    cq_cpu_wdecode_pair_fn decode_pair; /* NULL: no exact bf16 form (or no kit support) */
    cq_cpu_wscale pair_scale;
};
bool cq_cpu_wcodec_supported(cq_dtype dt);
/* `slot` (W1 or W2) holds per-matrix decoded tables until cq_cpu_wmat_free. */
cq_status cq_cpu_wmat_init(cq_cpu_wmat *w, const cq_tensor *t, cq_cpu_backend *cb, cq_cpu_scratch_slot slot);
void cq_cpu_wmat_free(cq_cpu_wmat *w);
/* For products that decode each row many times (M > a few rows): compute
 * per-row tables once (q4tp ladders) instead of per decode call. */
cq_status cq_cpu_wmat_prepare(cq_cpu_wmat *w);
/* The per-row scale a CQ_CPU_WSCALE_ROW pair decoder leaves out. */
float cq_cpu_wmat_row_scale(const cq_cpu_wmat *w, int64_t r);

/* ---- GEMM driver -------------------------------------------------------------------- */
/* The activation operand ("A" of y = A·Wᵀ; the B side of the microkernel,
 * which reads it as panels of NR rows laid out [k][NR]). */
typedef struct cq_cpu_asrc cq_cpu_asrc;
/* Fill one panel dst[k*MR + i] = A[m0+i][k0+k] for i < mr (rows mr..MR-1 zero). */
typedef void (*cq_cpu_apack_fn)(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR,
                                float *dst);
struct cq_cpu_asrc {
    cq_cpu_apack_fn pack;
    const void *x;      /* matrix rows or the conv input image */
    cq_dtype dt;
    int64_t ld;         /* elements per row */
    const cq_conv2d_args *conv; /* conv im2col source */
    const cq_conv3d_args *conv3;
    const cq_conv1d_args *conv1;
    int64_t Ho, Wo, Cin, L;
};
void cq_cpu_apack_matrix(const cq_cpu_asrc *a, int64_t m0, int64_t mr, int64_t k0, int64_t kc, int MR, float *dst);

typedef struct cq_cpu_gemm {
    int64_t M, N, K;
    cq_cpu_asrc a;
    const cq_cpu_wmat *w1, *w2; /* w2: second SwiGLU operand (may be w1 itself) */
    int64_t w1_row0, w2_row0;
    float scale;
    cq_act act;
    bool accumulate;
    const float *bias, *bias2, *gate;
    void *y;
    cq_dtype ydt;
} cq_cpu_gemm;
cq_status cq_cpu_gemm_run(cq_cpu_backend *cb, const cq_cpu_gemm *g);

/* ---- ops (vtable entries) ----------------------------------------------------------- */
/* cq_status cq_cpu_<name>(cq_backend *be, ...) for every op of ops_list.h */
CQ_OPS_DECLARE(cq_cpu_)

#endif /* CQ_CPU_IMPL_H */
