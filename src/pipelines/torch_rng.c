/*
 * torch_rng.c — PyTorch's CPU generator (mt19937 as torch seeds it) and
 * torch.randn's sampling paths, so a seed gives the reference pipeline's
 * initial noise bit for bit. The header states what torch does; the Cephes
 * float32 kernel lives in torch_rng_cephes.c.
 *
 * Every float operation below is its own statement, in torch's order and
 * type, so the compiler's contraction mode cannot fuse what torch rounds.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "pipelines/torch_rng.h"

_Static_assert(FLT_EVAL_METHOD == 0, "torch_rng needs FLT_EVAL_METHOD == 0");

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

/* c10::pi<double> times 2.0 (exact in double). */
#define TWO_PI_D (2.0 * 3.14159265358979323846)

static const size_t dtype_sizes[] = {4, 2, 2, 8};
static const char *const dtype_names[] = {"float32", "bfloat16", "float16", "float64"};
_Static_assert(CQ_ARRAY_LEN(dtype_sizes) == CQ_TORCH_DTYPE_COUNT, "dtype table");
_Static_assert(CQ_ARRAY_LEN(dtype_names) == CQ_TORCH_DTYPE_COUNT, "dtype table");

size_t cq_torch_dtype_size(cq_torch_dtype dt) {
    return (unsigned)dt < CQ_TORCH_DTYPE_COUNT ? dtype_sizes[dt] : 0;
}

const char *cq_torch_dtype_name(cq_torch_dtype dt) {
    return (unsigned)dt < CQ_TORCH_DTYPE_COUNT ? dtype_names[dt] : "?";
}

cq_torch_f32_kernel cq_torch_f32_kernel_native(void) {
#if defined(__x86_64__) || defined(_M_X64)
    /* torch's AVX2 capability needs AVX2 + FMA; its AVX512 one runs the same
     * normal kernel. Below that, the DEFAULT kernel. */
    const cq_cpu_features *f = cq_cpu();
    if (f->avx2 && f->fma) return CQ_TORCH_F32_CEPHES;
#endif
    return CQ_TORCH_F32_LIBM;
}

/* ---- mt19937 (torch's at::mt19937_engine) ---------------------------- */

void cq_torch_gen_seed(cq_torch_gen *g, uint64_t seed) {
    g->seed = seed;
    g->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (uint32_t j = 1; j < CQ_TORCH_MT_N; j++) {
        const uint32_t prev = g->state[j - 1];
        g->state[j] = 1812433253u * (prev ^ (prev >> 30)) + j;
    }
    g->left = 1;
    g->next = 0;
    g->has_next_normal = false;
    g->next_normal = 0.0;
}

static inline uint32_t mt_twist(uint32_t u, uint32_t v) {
    return (((u & MT_UPPER) | (v & MT_LOWER)) >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

static void mt_next_state(cq_torch_gen *g) {
    uint32_t *p = g->state;
    int j;
    for (j = 0; j < CQ_TORCH_MT_N - MT_M; j++) p[j] = p[j + MT_M] ^ mt_twist(p[j], p[j + 1]);
    for (; j < CQ_TORCH_MT_N - 1; j++) p[j] = p[j + MT_M - CQ_TORCH_MT_N] ^ mt_twist(p[j], p[j + 1]);
    p[j] = p[j + MT_M - CQ_TORCH_MT_N] ^ mt_twist(p[j], p[0]);
    g->left = CQ_TORCH_MT_N;
    g->next = 0;
}

uint32_t cq_torch_gen_random(cq_torch_gen *g) {
    if (--g->left == 0) mt_next_state(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t cq_torch_gen_random64(cq_torch_gen *g) {
    const uint32_t hi = cq_torch_gen_random(g);
    const uint32_t lo = cq_torch_gen_random(g);
    return ((uint64_t)hi << 32) | lo;
}

/* ---- 16-bit float conversions (c10's round-to-nearest-even) ---------- */

static inline uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t cq_torch_f32_to_bf16(float x) {
    if (isnan(x)) return 0x7fc0;
    const uint32_t u = f32_bits(x);
    const uint32_t bias = ((u >> 16) & 1u) + 0x7fffu;
    return (uint16_t)((u + bias) >> 16);
}

float cq_torch_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t cq_torch_f32_to_f16(float x) {
    const uint32_t u = f32_bits(x);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65536: inf */
    if (a < 0x38800000u) {
        /* below the smallest normal half (2^-14): subnormal or zero. Adding
         * 0.5 (2^-1) in float aligns the value so its low bits are the half
         * subnormal's mantissa, rounded to nearest even by the add itself. */
        const float r = bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(f32_bits(r) - f32_bits(0.5f)));
    }
    /* normal: rebias the exponent, round the 13 dropped mantissa bits */
    const uint32_t odd = (a >> 13) & 1u;
    const uint32_t v = a + 0xc8000fffu + odd; /* (-112 << 23) + 0xfff + odd, mod 2^32 */
    return (uint16_t)(sign | (uint16_t)(v >> 13));
}

float cq_torch_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    const uint32_t m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        /* subnormal or zero: m * 2^-24, exact in float */
        const float v = (float)m * 5.9604644775390625e-08f;
        return bits_f32(sign | f32_bits(v));
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- uniforms (at::uniform_real_distribution<T>(0, 1)) --------------- */

static inline float uniform_f32(cq_torch_gen *g) {
    return (float)(cq_torch_gen_random(g) & 0xffffffu) * (1.0f / 16777216.0f);
}
static inline double uniform_f64(cq_torch_gen *g) {
    return (double)(cq_torch_gen_random64(g) & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}
/* bfloat16 keeps 8 significant bits, float16 11: (r & mask) / 2^digits is
 * exact in the 16-bit type. */
static inline float uniform_bf16(cq_torch_gen *g) {
    return (float)(cq_torch_gen_random(g) & 0xffu) * (1.0f / 256.0f);
}
static inline float uniform_f16(cq_torch_gen *g) {
    return (float)(cq_torch_gen_random(g) & 0x7ffu) * (1.0f / 2048.0f);
}

/* ---- Box-Muller on 16 values (torch's normal_fill_16<scalar_t>) ------ */

void cq_torch_normal16_libm(float *d) {
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - d[j];
        const float u2 = d[j + 8];
        const float lg = logf(u1);
        const float m = -2.0f * lg;
        const float radius = sqrtf(m);
        /* 2.0f * c10::pi<double> * u2 is a double product, stored as float */
        const float theta = (float)(TWO_PI_D * (double)u2);
        const float c = cosf(theta);
        const float s = sinf(theta);
        const float n1 = radius * c;
        const float n2 = radius * s;
        d[j] = n1 + 0.0f; /* * std (1) + mean (0): -0 becomes +0 */
        d[j + 8] = n2 + 0.0f;
    }
}

static void normal16_f64(double *d) {
    for (int j = 0; j < 8; j++) {
        const double u1 = 1.0 - d[j];
        const double u2 = d[j + 8];
        const double lg = log(u1);
        const double m = -2.0 * lg;
        const double radius = sqrt(m);
        const double theta = TWO_PI_D * u2;
        const double c = cos(theta);
        const double s = sin(theta);
        const double n1 = radius * c;
        const double n2 = radius * s;
        d[j] = n1 + 0.0;
        d[j + 8] = n2 + 0.0;
    }
}

/* The 16-bit types: c10::BFloat16 / c10::Half do each operation in float and
 * round the result back to the 16-bit type; std::log/sqrt/cos/sin on them go
 * through the float functions and round back too. */
typedef uint16_t (*round16_fn)(float);
typedef float (*widen16_fn)(uint16_t);

static void normal16_half(uint16_t *d, round16_fn rnd, widen16_fn wid) {
    for (int j = 0; j < 8; j++) {
        const uint16_t u1 = rnd(1.0f - wid(d[j]));
        const uint16_t u2 = d[j + 8];
        const uint16_t lg = rnd(logf(wid(u1)));
        const uint16_t m = rnd(-2.0f * wid(lg));
        const uint16_t radius = rnd(sqrtf(wid(m)));
        /* double product, converted double -> float -> 16-bit */
        const uint16_t theta = rnd((float)(TWO_PI_D * (double)wid(u2)));
        const uint16_t c = rnd(cosf(wid(theta)));
        const uint16_t s = rnd(sinf(wid(theta)));
        uint16_t n1 = rnd(wid(radius) * wid(c));
        uint16_t n2 = rnd(wid(radius) * wid(s));
        n1 = rnd(wid(n1) * 1.0f);
        n2 = rnd(wid(n2) * 1.0f);
        d[j] = rnd(wid(n1) + 0.0f);
        d[j + 8] = rnd(wid(n2) + 0.0f);
    }
}

/* ---- the scalar sampler for n < 16 (at::normal_distribution<double>) -- */

static double scalar_normal(cq_torch_gen *g) {
    if (g->has_next_normal) {
        g->has_next_normal = false;
        return g->next_normal * 1.0 + 0.0;
    }
    const double u1 = uniform_f64(g);
    const double u2 = uniform_f64(g);
    const double l = log1p(-u2);
    const double m = -2.0 * l;
    const double r = sqrt(m);
    const double theta = TWO_PI_D * u1;
    const double sn = sin(theta);
    const double cs = cos(theta);
    g->next_normal = r * sn;
    g->has_next_normal = true;
    const double ret = r * cs;
    return ret * 1.0 + 0.0; /* transformation::normal(ret, mean 0, std 1) */
}

/* ---- randn ------------------------------------------------------------ */

static void randn_f32(cq_torch_gen *g, cq_torch_f32_kernel kernel, float *x, size_t n) {
    void (*block)(float *) = kernel == CQ_TORCH_F32_LIBM ? cq_torch_normal16_libm : cq_torch_normal16_cephes;
    for (size_t i = 0; i < n; i++) x[i] = uniform_f32(g);
    for (size_t i = 0; i + 16 <= n; i += 16) block(x + i);
    if (n % 16 != 0) {
        /* torch redraws the last 16 uniforms and transforms that block again */
        float *t = x + n - 16;
        for (int i = 0; i < 16; i++) t[i] = uniform_f32(g);
        block(t);
    }
}

static void randn_f64(cq_torch_gen *g, double *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = uniform_f64(g);
    for (size_t i = 0; i + 16 <= n; i += 16) normal16_f64(x + i);
    if (n % 16 != 0) {
        double *t = x + n - 16;
        for (int i = 0; i < 16; i++) t[i] = uniform_f64(g);
        normal16_f64(t);
    }
}

static void randn_half(cq_torch_gen *g, uint16_t *x, size_t n, bool bf16) {
    const round16_fn rnd = bf16 ? cq_torch_f32_to_bf16 : cq_torch_f32_to_f16;
    const widen16_fn wid = bf16 ? cq_torch_bf16_to_f32 : cq_torch_f16_to_f32;
    for (size_t i = 0; i < n; i++) x[i] = rnd(bf16 ? uniform_bf16(g) : uniform_f16(g));
    for (size_t i = 0; i + 16 <= n; i += 16) normal16_half(x + i, rnd, wid);
    if (n % 16 != 0) {
        uint16_t *t = x + n - 16;
        for (int i = 0; i < 16; i++) t[i] = rnd(bf16 ? uniform_bf16(g) : uniform_f16(g));
        normal16_half(t, rnd, wid);
    }
}

cq_status cq_torch_randn(cq_torch_gen *g, cq_torch_dtype dt, cq_torch_f32_kernel kernel,
                         void *out, size_t n) {
    if (!g) return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: no generator");
    if ((unsigned)dt >= CQ_TORCH_DTYPE_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: unknown dtype %d", (int)dt);
    if ((unsigned)kernel >= CQ_TORCH_F32_KERNEL_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: unknown float32 kernel %d", (int)kernel);
    if (n == 0) return CQ_OK;
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: no output buffer for %zu values", n);
    if ((uintptr_t)out % dtype_sizes[dt] != 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: output buffer not aligned for %s", dtype_names[dt]);
    if (g->left < 1 || g->left > CQ_TORCH_MT_N || g->next > CQ_TORCH_MT_N)
        return cq_fail(CQ_ERR_INVALID_ARG, "torch randn: generator state is not seeded");

    if (n < 16) {
        /* torch's scalar sampler, one double normal per element */
        for (size_t i = 0; i < n; i++) {
            const double v = scalar_normal(g);
            switch (dt) {
            case CQ_TORCH_F32: ((float *)out)[i] = (float)v; break;
            case CQ_TORCH_F64: ((double *)out)[i] = v; break;
            /* static_cast<BFloat16/Half>(double) goes through float */
            case CQ_TORCH_BF16: ((uint16_t *)out)[i] = cq_torch_f32_to_bf16((float)v); break;
            case CQ_TORCH_F16: ((uint16_t *)out)[i] = cq_torch_f32_to_f16((float)v); break;
            default: return cq_fail(CQ_ERR_INTERNAL, "torch randn: dtype %d", (int)dt);
            }
        }
        return CQ_OK;
    }
    switch (dt) {
    case CQ_TORCH_F32: randn_f32(g, kernel, out, n); break;
    case CQ_TORCH_F64: randn_f64(g, out, n); break;
    case CQ_TORCH_BF16: randn_half(g, out, n, true); break;
    case CQ_TORCH_F16: randn_half(g, out, n, false); break;
    default: return cq_fail(CQ_ERR_INTERNAL, "torch randn: dtype %d", (int)dt);
    }
    return CQ_OK;
}

cq_status cq_torch_randn_f32(cq_torch_gen *g, cq_torch_f32_kernel kernel, float *out, size_t n) {
    return cq_torch_randn(g, CQ_TORCH_F32, kernel, out, n);
}
cq_status cq_torch_randn_f64(cq_torch_gen *g, double *out, size_t n) {
    return cq_torch_randn(g, CQ_TORCH_F64, CQ_TORCH_F32_CEPHES, out, n);
}
cq_status cq_torch_randn_bf16(cq_torch_gen *g, uint16_t *out, size_t n) {
    return cq_torch_randn(g, CQ_TORCH_BF16, CQ_TORCH_F32_CEPHES, out, n);
}
cq_status cq_torch_randn_f16(cq_torch_gen *g, uint16_t *out, size_t n) {
    return cq_torch_randn(g, CQ_TORCH_F16, CQ_TORCH_F32_CEPHES, out, n);
}
