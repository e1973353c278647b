/*
 * image_gen.h — text to image over the component interfaces, the same for
 * every image model: seeded noise drawn in the codec's latent layout and
 * packed into tokens, each prompt through the text encoder (twice with
 * guidance), then each through the denoiser's prepare, the flow sampler
 * (flow_sample.h), then unpack, denormalise and decode. Every prompt is
 * encoded before the denoiser's first use, so a pipeline may release the
 * text encoder before it binds the denoiser (the stage hook, residency.h);
 * the two are independent, so the order changes no result.
 *
 * A model's pipeline (qi21_pipe.c, zimage_pipe.c) supplies the components and
 * the data (schedule, timestep transform, prediction sign, guidance, noise
 * dtype) and checks a
 * request against its own limits before calling cq_image_job_run.
 */
#ifndef CQ_PIPELINES_IMAGE_GEN_H
#define CQ_PIPELINES_IMAGE_GEN_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "pipelines/flow_sample.h"
#include "pipelines/torch_rng.h"

/* The phases of one generation, in order, each once (TEXT encodes every
 * prompt, PREFILL prepares each). DONE follows the decode. */
typedef enum cq_gen_phase {
    CQ_GEN_PHASE_TEXT = 0, /* tokenizer + text encoder */
    CQ_GEN_PHASE_PREFILL,  /* the denoiser's prepared conditioning */
    CQ_GEN_PHASE_STEPS,    /* the sampler loop (on_step after each step) */
    CQ_GEN_PHASE_VAE,      /* latents -> pixels */
    CQ_GEN_PHASE_DONE,
} cq_gen_phase;

typedef void (*cq_gen_phase_fn)(cq_gen_phase phase, void *user);
/* Called before the work of TEXT, PREFILL and VAE; a pipeline binds and
 * releases components here (residency.h). A non-OK status stops the run. */
typedef cq_status (*cq_gen_stage_fn)(cq_gen_phase phase, void *user);

typedef struct cq_gen_timings {
    double text, prefill, steps, vae; /* seconds */
} cq_gen_timings;

typedef struct cq_image_result {
    int width, height;
    int channels;        /* the codec's image channels */
    float *image;        /* planar [channels][height][width], in [-1, 1] */
    int tokens, latent_channels;
    float *latents;      /* final packed latents [tokens][latent_channels] */
    cq_gen_timings t;
} cq_image_result;

void cq_image_result_free(cq_image_result *r);

/* One generation's components and data. te, dn and codec may point at
 * structs the stage hook fills: dn->channels and the codec's fields and
 * pack are read before the first stage, the rest only after the stage of
 * the phase that uses them. */
typedef struct cq_image_job {
    const cq_text_encoder *te;
    const cq_denoiser *dn;
    const cq_latent_codec *codec;
    const cq_flow_config *sched;
    cq_flow_timestep timestep;
    bool negate;                /* the denoiser predicts -velocity (Z-Image) */
    cq_guidance guidance;       /* kind NONE: the negative prompt is not read */
    const char *prompt, *negative;
    int width, height;          /* pixels: lat_w * codec->factor, lat_h * codec->factor */
    int lat_w, lat_h;           /* the codec's latent grid */
    int tokens;                 /* denoiser tokens the packed latents make */
    int steps;
    uint64_t seed;
    cq_torch_dtype noise_dtype; /* the dtype torch.randn draws the noise in */
    cq_flow_step_fn on_step;
    cq_flow_latents_fn on_latents; /* tests: the latents after each step (NULL: none) */
    cq_gen_phase_fn on_phase;
    void *user;
    cq_gen_stage_fn stage;      /* NULL: every component stays bound */
    void *stage_user;
} cq_image_job;

cq_status cq_image_job_run(const cq_image_job *j, cq_image_result *res);

/* Whether a request of a model whose guidance is true CFG (1 = off) runs it: guidance above 1 with a negative
 * prompt. Warns, once per request, about a guidance without a negative prompt and a negative prompt that a
 * guidance of 1 or less leaves unused. */
bool cq_true_cfg_wanted(double guidance, const char *negative);

#endif /* CQ_PIPELINES_IMAGE_GEN_H */
