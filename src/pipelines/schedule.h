/*
 * schedule.h — the flow-match Euler schedule as the Qwen-Image-2.1 pipeline
 * drives diffusers' FlowMatchEulerDiscreteScheduler, the Euler step and the
 * true-CFG combination, each in the precision the reference computes it.
 *
 * The reference, step by step (QwenImage21Pipeline.__call__, numpy 2 rules):
 *  1. lin = np.linspace(1.0, 1/N, N) in float64: lin[i] = i*step + 1 with
 *     step = (1/N - 1)/(N - 1), the last entry set to 1/N exactly.
 *  2. mu = calculate_shift(L, base_seq, max_seq, base_shift, max_shift) in
 *     double: m = (max_shift - base_shift)/(max_seq - base_seq);
 *     b = base_shift - m*base_seq; mu = L*m + b, where L is the number of
 *     image tokens (latent h * latent w).
 *  3. set_timesteps(sigmas=lin, mu=mu): s = float32(lin); then in float32:
 *     exponential shift s = E / (E + (1/s - 1)) with E = float32(exp(mu))
 *     (linear: mu instead of E); then, if shift_terminal is set, the terminal
 *     stretch: z = 1 - s; f = z[N-1] / float32(1 - shift_terminal);
 *     s = 1 - z/f. sigmas = s followed by 0; timesteps = s * 1000 (float32).
 *  4. The transformer gets timestep = t.to(latents dtype) / 1000: on CUDA the
 *     division is a multiply by float32(1/1000); on the CPU a true division;
 *     for bf16 the timestep is rounded to bf16 first and the result again.
 *  5. Euler step in float32: x + (sigma_next - sigma) * v, the product and
 *     the sum each rounded (the scheduler upcasts the sample to float32).
 *  6. True CFG (guidance > 1 with a negative prompt): neg + g * (pos - neg),
 *     each operation rounded in the prediction's type, g as float32. There is
 *     no norm rescaling in Qwen-Image-2.1.
 *
 * Z-Image (ZImagePipeline) differs in step 1: its sigmas are
 * torch.linspace(1.0, 1/N, N) in float32 on the CPU (passed through
 * .tolist(), i.e. exactly), which torch computes as
 *   step = (end - start) / (N - 1)          in float32, end = float32(1/N);
 *   lin[i] = start + step * i               for i <  N / 2,
 *   lin[i] = end - step * (N - 1 - i)       for i >= N / 2
 * (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, scalar kernel; N = 1
 * gives [start]), each a fused multiply-add: torch's vectorised-ISA builds
 * of that kernel are compiled with FMA contraction. Its scheduler shifts
 * statically (step 3's else branch, shift from scheduler_config.json), and
 * its pipeline hands the transformer (1000 - t) / 1000 (flow_sample.h).
 */
#ifndef CQ_PIPELINES_SCHEDULE_H
#define CQ_PIPELINES_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

typedef enum cq_flow_shift_type {
    CQ_FLOW_SHIFT_EXPONENTIAL = 0,
    CQ_FLOW_SHIFT_LINEAR = 1,
    CQ_FLOW_SHIFT_TYPE_COUNT
} cq_flow_shift_type;

/* Where the unshifted sigmas of step 1 come from (the pipeline's choice, not
 * the scheduler config's). */
typedef enum cq_flow_sigmas {
    CQ_FLOW_SIGMAS_NUMPY = 0,     /* numpy.linspace(1, 1/N, N) in float64 (Qwen-Image) */
    CQ_FLOW_SIGMAS_TORCH_F32 = 1, /* torch.linspace(1, 1/N, N) in float32 on the CPU (Z-Image) */
    CQ_FLOW_SIGMAS_COUNT
} cq_flow_sigmas;

/* The FlowMatchEulerDiscreteScheduler options the pipeline uses. */
typedef struct cq_flow_config {
    int num_train_timesteps;    /* 1000 */
    bool use_dynamic_shifting;  /* true: shift by mu; false: by `shift` */
    double shift;               /* static shift (without dynamic shifting) */
    double base_shift;          /* 0.5 */
    double max_shift;           /* 0.9 */
    int64_t base_image_seq_len; /* 256 */
    int64_t max_image_seq_len;  /* 8192 */
    double shift_terminal;      /* 0.02; 0 disables the terminal stretch */
    cq_flow_shift_type shift_type;
    cq_flow_sigmas sigmas;      /* set by the pipeline; cq_flow_config_parse leaves NUMPY */
} cq_flow_config;

/* Qwen/Qwen-Image-2.1 scheduler/scheduler_config.json. */
void cq_flow_config_qi21(cq_flow_config *c);

/* Read a diffusers scheduler_config.json (len bytes, not NUL-terminated
 * needed). Missing keys keep the diffusers defaults of the class; options
 * this module does not implement (karras/exponential/beta sigmas,
 * invert_sigmas, stochastic_sampling) fail with CQ_ERR_UNSUPPORTED. */
cq_status cq_flow_config_parse(const char *json, size_t len, cq_flow_config *c);

/* calculate_shift: mu for an image of image_seq_len tokens. */
double cq_flow_mu(const cq_flow_config *c, int64_t image_seq_len);

/* numpy.linspace(start, stop, n) in float64, numpy's formula. */
void cq_flow_linspace(double start, double stop, int n, double *out);

/* torch.linspace(start, end, n) in float32 on the CPU, torch's formula (see
 * the top of this file); start and end are rounded to float32 first. */
void cq_flow_linspace_torch_f32(double start, double end, int n, float *out);

typedef struct cq_flow_schedule {
    int steps;        /* N */
    double mu;        /* the shift used (NAN without dynamic shifting) */
    float *sigmas;    /* N + 1 values, sigmas[N] == 0 */
    float *timesteps; /* N values: sigmas * num_train_timesteps */
} cq_flow_schedule;

/* The schedule for `steps` steps and an image of image_seq_len tokens.
 * Fails (CQ_ERR_NUMERIC) where the reference schedule is not finite: one step
 * with a terminal stretch divides 0 by 0 there. Free with
 * cq_flow_schedule_free. */
cq_status cq_flow_schedule_make(const cq_flow_config *c, int steps, int64_t image_seq_len,
                                cq_flow_schedule *out);
void cq_flow_schedule_free(cq_flow_schedule *s);
/* The same from the pipeline's own unshifted sigmas (set_timesteps(sigmas=..., mu=...)): each value rounded to
 * float32 (np.array(sigmas).astype(np.float32)), then steps 3 and on as above, mu from image_seq_len. Each value
 * must be in (0, 1]. LTX-2's distilled ladder is such a list (ltx2_sample.h). */
cq_status cq_flow_schedule_from_sigmas(const cq_flow_config *c, const double *sigmas, int steps,
                                       int64_t image_seq_len, cq_flow_schedule *out);

/* The timestep value the transformer receives for scheduler timestep t.
 * bf16: the pipeline runs in bfloat16 (t and the result are rounded to bf16;
 * the value is returned widened to float). cuda_style: the division by 1000
 * is done as torch does it on CUDA (multiply by float(1/1000)); otherwise as
 * on the CPU (a true division). */
float cq_flow_model_timestep(float t, bool bf16, bool cuda_style);

/* x[i] = x[i] + (sigma_next - sigma) * v[i], float32, no fused multiply-add. */
void cq_flow_euler_step(float *x, const float *v, size_t n, float sigma, float sigma_next);

/* out[i] = neg[i] + (float)guidance * (pos[i] - neg[i]), float32, each
 * operation rounded. out may alias pos or neg. */
void cq_flow_cfg_combine(float *out, const float *pos, const float *neg, size_t n, double guidance);

#endif /* CQ_PIPELINES_SCHEDULE_H */
