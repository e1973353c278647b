/*
 * flow_sample.h — the one flow-matching sampler loop every image model runs:
 * for each step of a schedule, the denoiser's velocity at the model's
 * timestep (twice with guidance: the positive and the negative
 * conditioning), the guidance combination, a finiteness check and the Euler
 * step, with progress and cancellation between steps.
 *
 * What differs between models is data, not code:
 *  - the schedule: a cq_flow_config (static shift, dynamic exponential or
 *    linear shift from the token count, terminal stretch; schedule.h);
 *  - the timestep transform: what the denoiser is given for the scheduler's
 *    timestep t (t / T, (T - t) / T or t itself, T the training timesteps;
 *    optionally rounded as a bfloat16 pipeline rounds it);
 *  - the guidance: none; true CFG from a negative prompt, as
 *    neg + g (pos - neg) or pos + g (pos - neg); optionally renormalised
 *    (each row to the positive row's norm, or the whole prediction capped at
 *    k times the positive's norm); optionally truncated, i.e. dropped (and
 *    the negative pass skipped) once the progress 1 - t / T is above a
 *    fraction;
 *  - the prediction's sign: the velocity itself, or its negation (Z-Image's
 *    transformer predicts -v; the guidance combines the raw outputs and the
 *    sign is flipped after it, as the reference does).
 * Every float operation is rounded as the reference computes it (schedule.h).
 */
#ifndef CQ_PIPELINES_FLOW_SAMPLE_H
#define CQ_PIPELINES_FLOW_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>

#include "cortiq.h"
#include "models/component.h"
#include "pipelines/schedule.h"

typedef enum cq_flow_t_kind {
    CQ_FLOW_T_SIGMA = 0,     /* t / T: the sigma (Qwen-Image, Qwen-Image-2.1) */
    CQ_FLOW_T_ONE_MINUS = 1, /* (T - t) / T: the progress (Z-Image) */
    CQ_FLOW_T_RAW = 2,       /* t itself */
    CQ_FLOW_T_KIND_COUNT
} cq_flow_t_kind;

typedef struct cq_flow_timestep {
    cq_flow_t_kind kind;
    bool bf16;       /* t and the result rounded to bfloat16, as a bf16 pipeline does */
    bool cuda_style; /* the division as torch does it on CUDA (a multiply by float(1/T)) */
} cq_flow_timestep;

/* The value the denoiser gets for scheduler timestep t with T training timesteps. */
float cq_flow_timestep_apply(const cq_flow_timestep *ts, float t, int num_train_timesteps);

typedef enum cq_guidance_kind {
    CQ_GUIDANCE_NONE = 0,
    CQ_GUIDANCE_CFG = 1,     /* neg + g (pos - neg) */
    CQ_GUIDANCE_CFG_POS = 2, /* pos + g (pos - neg) */
    CQ_GUIDANCE_KIND_COUNT
} cq_guidance_kind;

typedef enum cq_guidance_norm {
    CQ_GUIDANCE_NORM_NONE = 0,
    CQ_GUIDANCE_NORM_ROWS = 1, /* each row scaled to the norm of the positive's row */
    CQ_GUIDANCE_NORM_CAP = 2,  /* the whole prediction scaled down to at most norm_cap x the positive's norm */
    CQ_GUIDANCE_NORM_COUNT
} cq_guidance_norm;

typedef struct cq_guidance {
    cq_guidance_kind kind;
    double scale;          /* g */
    cq_guidance_norm norm;
    double norm_cap;       /* CQ_GUIDANCE_NORM_CAP: k > 0 */
    bool truncate;         /* false: guided at every step */
    double truncate_after; /* truncate: no guidance (one forward) at steps whose progress (T - t) / T, in
                            * float32, is above it (any finite value: below 0 none is guided, 1 or more all) */
} cq_guidance;

/* Whether step i of schedule `sch` is guided (kind and truncation). */
bool cq_guidance_active(const cq_guidance *g, const cq_flow_schedule *sch, int num_train_timesteps, int i);

/* The guided prediction of rows x cols values into out (may alias pos or
 * neg): the combination of g->kind, then g->norm. Norms are summed in
 * double and the scale rounded to float; a row (or a prediction) whose
 * combined norm is 0 is left as it is. */
void cq_guidance_combine(const cq_guidance *g, float *out, const float *pos, const float *neg, size_t rows,
                         size_t cols);

/* Progress: step i (1-based) of n done; non-zero cancels. */
typedef int (*cq_flow_step_fn)(int step, int n_steps, void *user);
/* Tests: the packed latents x [tokens][channels] after step i (1-based). */
typedef void (*cq_flow_latents_fn)(int step, const float *x, int tokens, void *user);

typedef struct cq_flow_sample_opts {
    const cq_flow_schedule *sch;
    int num_train_timesteps; /* T of the timestep transform and of the truncation */
    cq_flow_timestep timestep;
    bool negate;             /* the denoiser's output is -velocity (negated after the guidance) */
    cq_guidance guidance;    /* kind NONE, or a negative conditioning in `neg` */
    const cq_denoiser *dn;
    void *pos, *neg;         /* the denoiser's prepared conditionings (neg: NULL without guidance) */
    int tokens;              /* rows of x; dn->channels floats each */
    cq_flow_step_fn on_step; /* NULL: none */
    cq_flow_latents_fn on_latents; /* NULL: none; called before on_step with the same user */
    void *user;
} cq_flow_sample_opts;

/* Run every step of o->sch on x [tokens][channels] (the initial noise in,
 * the final latents out). Fails with CQ_ERR_NUMERIC when the velocity is
 * not finite, CQ_ERR_INTERRUPTED when cancelled (by on_step or
 * cq_cancel_request), naming the step. */
cq_status cq_flow_sample(const cq_flow_sample_opts *o, float *x);

#endif /* CQ_PIPELINES_FLOW_SAMPLE_H */
