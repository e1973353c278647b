/*
 * zimage_pipe.h — Z-Image (Turbo and base) text-to-image, end to end, as
 * diffusers' ZImagePipeline does it:
 *
 *   prompt -> the pack's chat template (one user message, generation prompt,
 *   enable_thinking=True, no system turn) -> tokenizer, cut at 512 tokens ->
 *   Qwen3 text tower, hidden_states[-2] (the raw output of the layer before
 *   the last), nothing dropped -> the denoiser's prepare (caption embedder and
 *   context refiner, once per prompt) -> N flow-matching Euler steps from
 *   seeded noise over the sigmas torch.linspace(1, 1/N, N) with the
 *   scheduler's static shift; the denoiser sees 1 - sigma and predicts -v;
 *   guidance pos + g (pos - neg) when g > 0, with the negative prompt ("" by
 *   default), optionally capped in norm and truncated -> latents / 0.3611 +
 *   0.1159 -> the Flux VAE decode -> RGB.
 *
 * The generation is the generic one (image_gen.h) over this model's
 * components (component.h); this file holds what is Z-Image's own: the
 * template, the schedule's and guidance's data and the request's limits.
 *
 * Everything comes from one .cmf pack made by `cortiq convert` of a diffusers
 * ZImagePipeline folder: dit.*, te.*, vae.* tensors with their configs, the
 * scheduler config, the tokenizer and its chat template. The text tower may
 * leave out its last layer and final norm (never read).
 */
#ifndef CQ_PIPELINES_ZIMAGE_PIPE_H
#define CQ_PIPELINES_ZIMAGE_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"
#include "pipelines/residency.h"

#define CQ_ZIMAGE_MAX_TOKENS 512 /* the pipeline's max_sequence_length */

typedef struct cq_zimage_pipe cq_zimage_pipe;

typedef struct cq_zimage_gen_opts {
    const char *prompt;
    const char *negative;     /* NULL: the empty prompt (read only with guidance) */
    int width, height;        /* multiples of 16 */
    int steps;                /* 1..1000 */
    uint64_t seed;
    double guidance;          /* the pipeline's guidance_scale: pos + g (pos - neg) when > 0; 0: off */
    double cfg_normalization; /* > 0: ||pred|| capped at this times ||pos|| (the reference's True is 1); 0: off */
    double cfg_truncation;    /* steps whose progress (1000 - t) / 1000 is above it run unguided; the
                               * reference's default is 1 (every step guided) */
    double shift;             /* > 0: the static shift; 0: the pack's default, else the scheduler config's */
    cq_flow_step_fn on_step;
    cq_gen_phase_fn on_phase; /* NULL: none */
    void *user;               /* passed to on_step and on_phase */
} cq_zimage_gen_opts;

/* The reference's defaults for the fields above that are not the request's
 * own (cfg_truncation 1; everything else 0). */
void cq_zimage_gen_opts_init(cq_zimage_gen_opts *o);

/* Two stages, so every check runs before any weight is read:
 *  - open: the tokenizer and chat template, the text tower's, denoiser's and
 *    scheduler's configs (no weights; milliseconds);
 *  - check: everything generate would refuse (size, steps, guidance and its
 *    options, the schedule, each prompt's encoding and the sequence it makes
 *    against the denoiser's position tables);
 *  - load_weights: the text tower (its first n_layers - 1 layers), the
 *    denoiser and the VAE on `be`.
 * The cmf must outlive the pipe. */
cq_status cq_zimage_pipe_open(const cq_cmf *cmf, cq_zimage_pipe **out);
cq_status cq_zimage_pipe_check(cq_zimage_pipe *p, const cq_zimage_gen_opts *o);
cq_status cq_zimage_pipe_load_weights(cq_zimage_pipe *p, cq_backend *be);
/* The text tower alone (load_weights does it first): enough for
 * cq_zimage_pipe_encode_prompt. */
cq_status cq_zimage_pipe_load_text(cq_zimage_pipe *p, cq_backend *be);
/* Residency, as cq_qi21_pipe_set_plan / cq_qi21_pipe_residency (qi21_pipe.h). */
cq_status cq_zimage_pipe_set_plan(cq_zimage_pipe *p, const cq_resid_plan *plan);
const cq_resid *cq_zimage_pipe_residency(const cq_zimage_pipe *p);
/* What the plan was made from, as cq_qi21_pipe_need. */
const cq_resid_need *cq_zimage_pipe_need(const cq_zimage_pipe *p);
void cq_zimage_pipe_free(cq_zimage_pipe *p);

/* Tokens of a prompt with the template (*total, after the cut at 512;
 * *full before it). Tokenizes only. */
cq_status cq_zimage_pipe_prompt_tokens(cq_zimage_pipe *p, const char *prompt, int *total, int *full);
/* The rows the denoiser reads: [*n_rows][hidden] (cq_malloc'd). */
cq_status cq_zimage_pipe_encode_prompt(cq_zimage_pipe *p, const char *prompt, float **embeds, int *n_rows);
/* The schedule a request runs (its steps and shift). */
cq_status cq_zimage_pipe_schedule(cq_zimage_pipe *p, const cq_zimage_gen_opts *o, cq_flow_schedule *out);

/* The planar RGB image in the decoder's range (the caller maps x / 2 + 0.5
 * and clamps to [0, 1], as the reference's postprocess does). */
cq_status cq_zimage_pipe_generate(cq_zimage_pipe *p, const cq_zimage_gen_opts *o, cq_image_result *res);

#endif /* CQ_PIPELINES_ZIMAGE_PIPE_H */
