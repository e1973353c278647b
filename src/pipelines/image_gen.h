/*
 * image_gen.h — text to image over the component interfaces, the same for
 * every image model: each prompt through the text encoder and the
 * denoiser's prepare (once per prompt: twice with guidance), seeded noise
 * drawn in the codec's latent layout and packed into tokens, the flow
 * sampler (flow_sample.h), then unpack, denormalise and decode.
 *
 * A model's pipeline (qi21_pipe.c, zimage_pipe.c) supplies the components and
 * the data (schedule, timestep transform, prediction sign, guidance, noise
 * dtype) and checks a
 * request against its own limits before calling cq_image_job_run.
 */
#ifndef CQ_PIPELINES_IMAGE_GEN_H
#define CQ_PIPELINES_IMAGE_GEN_H

#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "pipelines/flow_sample.h"
#include "pipelines/torch_rng.h"

/* The phases of one generation, in order; text and prefill come once per
 * prompt (twice with guidance). DONE follows the decode. */
typedef enum cq_gen_phase {
    CQ_GEN_PHASE_TEXT = 0, /* tokenizer + text encoder */
    CQ_GEN_PHASE_PREFILL,  /* the denoiser's prepared conditioning */
    CQ_GEN_PHASE_STEPS,    /* the sampler loop (on_step after each step) */
    CQ_GEN_PHASE_VAE,      /* latents -> pixels */
    CQ_GEN_PHASE_DONE,
} cq_gen_phase;

typedef void (*cq_gen_phase_fn)(cq_gen_phase phase, void *user);

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

/* One generation's components and data. */
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
    cq_gen_phase_fn on_phase;
    void *user;
} cq_image_job;

cq_status cq_image_job_run(const cq_image_job *j, cq_image_result *res);

#endif /* CQ_PIPELINES_IMAGE_GEN_H */
