/*
 * torch_rng.h — seeded noise bit-identical to PyTorch's CPU generator:
 * `torch.randn(n, generator=torch.Generator("cpu").manual_seed(seed), dtype=...)`.
 *
 * What PyTorch (2.11) does, and what this module reproduces:
 *
 *  Generator. mt19937 (Matsumoto-Nishimura, init_genrand), seeded with the
 *  LOW 32 BITS of the 64-bit seed (seed 2**32+5 draws like seed 5). random()
 *  is one 32-bit output; random64() is (first << 32) | second. The generator
 *  also caches the second Box-Muller value of its scalar normal sampler (a
 *  double); manual_seed clears that cache.
 *
 *  Uniforms. float: (r & 0xFFFFFF) * 2^-24 from one random(); bfloat16:
 *  (r & 0xFF) * 2^-8; float16: (r & 0x7FF) * 2^-11; double: (r64 & (2^53-1))
 *  * 2^-53 from one random64(). All lie in [0, 1).
 *
 *  randn, n >= 16 (contiguous): first all n uniforms in order, then Box-Muller
 *  in blocks of 16: for j in 0..7, u1 = 1 - x[j], u2 = x[j+8],
 *  x[j] = sqrt(-2 log u1) cos(2 pi u2), x[j+8] = sqrt(-2 log u1) sin(2 pi u2).
 *  If n % 16 != 0, 16 MORE uniforms are drawn into x[n-16 .. n-1] (overwriting
 *  normals already made there) and that last block is transformed again.
 *  - float32 on x86 CPUs with AVX2 or AVX-512 (torch's AVX2/AVX512 kernels):
 *    log and sincos are the Cephes polynomials of avx_mathfun.h, evaluated in
 *    float with the multiply-adds fused as GCC fuses them in torch's build,
 *    theta = float(2 pi) * u2 in float. No libm involved: exact everywhere.
 *  - float32 with torch's DEFAULT kernel (ARM, x86 without AVX2): logf,
 *    cosf, sinf from the C library, theta = float(double(2 pi) * u2). Exact
 *    only where this process's libm gives the same results as the reference
 *    machine's (glibc against glibc: yes).
 *  - bfloat16 / float16 / float64: the same scalar template in that type; for
 *    the 16-bit types every operation is done in float and rounded back to
 *    the 16-bit type (round to nearest even), libm for log/cos/sin.
 *  randn, n < 16: one normal at a time from torch's scalar sampler, in
 *  double: u1, u2 from two random64(); r = sqrt(-2 log1p(-u2)),
 *  theta = 2 pi u1; returns r cos(theta) and caches r sin(theta) for the
 *  next draw; the value is rounded to the tensor's type.
 *
 * diffusers' randn_tensor with a CPU generator calls torch.randn on the CPU in
 * the pipeline's dtype (the dtype of the prompt embeddings: bfloat16 for a
 * bf16 pipeline, float32 for an f32 one), then moves the tensor to the device.
 */
#ifndef CQ_PIPELINES_TORCH_RNG_H
#define CQ_PIPELINES_TORCH_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

#define CQ_TORCH_MT_N 624

/* The state of one torch.Generator("cpu"). Plain data: copy it to fork. */
typedef struct cq_torch_gen {
    uint32_t state[CQ_TORCH_MT_N];
    int left;            /* outputs left before the next twist, 1..624 */
    uint32_t next;       /* index of the next state word */
    uint64_t seed;       /* as given to manual_seed (only the low 32 bits draw) */
    bool has_next_normal;
    double next_normal;  /* cached second value of the scalar sampler */
} cq_torch_gen;

/* Which float32 kernel of torch to reproduce for n >= 16 (see above). */
typedef enum cq_torch_f32_kernel {
    CQ_TORCH_F32_CEPHES = 0, /* x86 with AVX2/AVX-512: torch's avx_mathfun path */
    CQ_TORCH_F32_LIBM = 1,   /* torch's DEFAULT kernel: C library logf/cosf/sinf */
    CQ_TORCH_F32_KERNEL_COUNT
} cq_torch_f32_kernel;

/* Element types randn can produce. */
typedef enum cq_torch_dtype {
    CQ_TORCH_F32 = 0,
    CQ_TORCH_BF16 = 1,
    CQ_TORCH_F16 = 2,
    CQ_TORCH_F64 = 3,
    CQ_TORCH_DTYPE_COUNT
} cq_torch_dtype;

/* Bytes per element of a cq_torch_dtype (0 for an unknown value). */
size_t cq_torch_dtype_size(cq_torch_dtype dt);
const char *cq_torch_dtype_name(cq_torch_dtype dt);

/* The kernel torch picks on this CPU: CEPHES on x86-64 with AVX2 (torch's
 * AVX2 and AVX512 capabilities both run it), LIBM otherwise. */
cq_torch_f32_kernel cq_torch_f32_kernel_native(void);

/* torch.Generator("cpu").manual_seed(seed). */
void cq_torch_gen_seed(cq_torch_gen *g, uint64_t seed);
/* One 32-bit output (CPUGeneratorImpl::random). */
uint32_t cq_torch_gen_random(cq_torch_gen *g);
/* (random() << 32) | random() (CPUGeneratorImpl::random64). */
uint64_t cq_torch_gen_random64(cq_torch_gen *g);

/* torch.randn of n elements of type dt into out (n * cq_torch_dtype_size(dt)
 * bytes, aligned for the type; 16-bit types are written as their raw bit
 * patterns), advancing g
 * exactly as torch does. kernel matters only for float32 with n >= 16. */
cq_status cq_torch_randn(cq_torch_gen *g, cq_torch_dtype dt, cq_torch_f32_kernel kernel,
                         void *out, size_t n);

/* Typed shorthands. */
cq_status cq_torch_randn_f32(cq_torch_gen *g, cq_torch_f32_kernel kernel, float *out, size_t n);
cq_status cq_torch_randn_f64(cq_torch_gen *g, double *out, size_t n);
cq_status cq_torch_randn_bf16(cq_torch_gen *g, uint16_t *out, size_t n);
cq_status cq_torch_randn_f16(cq_torch_gen *g, uint16_t *out, size_t n);

/* The two float32 Box-Muller kernels on one block of 16 uniforms, in place
 * (exposed for tests). */
void cq_torch_normal16_cephes(float *x);
void cq_torch_normal16_libm(float *x);

/* The Cephes log and sincos of torch's avx_mathfun.h, one lane at a time
 * (exposed for tests). */
float cq_torch_cephes_logf(float x);
void cq_torch_cephes_sincosf(float x, float *s, float *c);

/* Rounding float to the 16-bit types, nearest even, as c10 does (NaN stays a
 * quiet NaN). */
uint16_t cq_torch_f32_to_bf16(float x);
uint16_t cq_torch_f32_to_f16(float x);
float cq_torch_bf16_to_f32(uint16_t h);
float cq_torch_f16_to_f32(uint16_t h);

#endif /* CQ_PIPELINES_TORCH_RNG_H */
