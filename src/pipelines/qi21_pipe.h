/*
 * qi21_pipe.h — Qwen-Image-2.1 text-to-image, end to end, as diffusers'
 * QwenImage21Pipeline does it:
 *
 *   prompt -> the pipeline's prompt template -> tokenizer -> text tower (the
 *   final norm's output, the system turn's rows dropped) ->
 *   denoiser prefill (prefix K/V cached once per prompt) -> N flow-matching
 *   Euler steps from seeded noise (true CFG with a second cached prefix when
 *   guidance > 1 and a negative prompt is given) -> latents de-normalised ->
 *   VAE decode -> RGBA in [0, 1].
 *
 * The generation itself is the generic one (image_gen.h) over this model's
 * components (component.h); this file holds what is Qwen-Image-2.1's own:
 * the template, the schedule's defaults and the request's limits.
 *
 * Everything comes from one .cmf pack made by `cortiq convert` of a diffusers
 * pipeline folder: dit.*, te.*, vae.* tensors with their configs, the
 * scheduler config, the tokenizer, and the processor's chat template (used,
 * as by the reference, only to count the system turn's tokens).
 */
#ifndef CQ_PIPELINES_QI21_PIPE_H
#define CQ_PIPELINES_QI21_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"
#include "pipelines/residency.h"

typedef struct cq_qi21_pipe cq_qi21_pipe;

/* Per-step progress: step i (1-based) of n done. Return non-zero to cancel. */
typedef cq_flow_step_fn cq_qi21_step_fn;

/* The phases of one generation (image_gen.h), under this pipeline's names. */
typedef cq_gen_phase cq_qi21_phase;
enum {
    CQ_QI21_PHASE_TEXT = CQ_GEN_PHASE_TEXT,
    CQ_QI21_PHASE_PREFILL = CQ_GEN_PHASE_PREFILL, /* the denoiser's prefix cache */
    CQ_QI21_PHASE_STEPS = CQ_GEN_PHASE_STEPS,
    CQ_QI21_PHASE_VAE = CQ_GEN_PHASE_VAE,
    CQ_QI21_PHASE_DONE = CQ_GEN_PHASE_DONE,
};
typedef cq_gen_phase_fn cq_qi21_phase_fn;

typedef struct cq_qi21_gen_opts {
    const char *prompt;
    const char *negative;     /* NULL: none */
    int width, height;        /* multiples of 32 */
    int steps;                /* >= 2 (the reference's one-step schedule is not finite) */
    uint64_t seed;
    double guidance;          /* true CFG when > 1 and a negative prompt is given */
    bool noise_bf16;          /* draw the noise as a bfloat16 reference pipeline does */
    cq_qi21_step_fn on_step;
    cq_qi21_phase_fn on_phase; /* NULL: none */
    void *user;                /* passed to on_step and on_phase */
    /* Condition pictures (editing; qi21_cond.c): PNG or JPEG files made RGBA, n_images of them (1..
     * CQ_QI21_MAX_IMAGES; 0: text to image). A size of 0 (each side on its own) is the last picture's at the
     * output resolution's area, floored to multiples of 32. */
    const char *const *images;
    int n_images;
    int output_resolution;     /* the side whose square is the pictures' area (0: 1024, the reference's) */
    int64_t vl_min_pixels;     /* the processor's lower pixel bound (0: the pack's processor's) */
    cq_flow_latents_fn on_latents; /* tests: the latents after each step (NULL: none) */
} cq_qi21_gen_opts;

/* Condition pictures a request may hold (the reference sets none; the denoiser's positions bound them too). */
#define CQ_QI21_MAX_IMAGES 8
/* The reference's output_resolution. */
#define CQ_QI21_OUTPUT_RESOLUTION 1024

typedef cq_gen_timings cq_qi21_timings;
typedef cq_image_result cq_qi21_result; /* planar image in [-1, 1] (the decoder's clamp), channels 4: RGBA */

/* Two stages, so every check runs before any weight is read:
 *  - open: the tokenizer, the denoiser's and the text tower's configs, the
 *    scheduler and the template's system turn (no weights; milliseconds);
 *  - check: everything generate would refuse (size, steps, guidance, the
 *    schedule, each prompt's encoding and length against the model's real
 *    limits), with messages that give the limit;
 *  - load_weights: the text tower, denoiser and VAE on `be`.
 * cq_qi21_pipe_load is open + load_weights. The cmf must outlive the pipe. */
cq_status cq_qi21_pipe_open(const cq_cmf *cmf, cq_qi21_pipe **out);
cq_status cq_qi21_pipe_check(cq_qi21_pipe *p, const cq_qi21_gen_opts *o);
cq_status cq_qi21_pipe_load_weights(cq_qi21_pipe *p, cq_backend *be);
cq_status cq_qi21_pipe_load(const cq_cmf *cmf, cq_backend *be, cq_qi21_pipe **out);
void cq_qi21_pipe_free(cq_qi21_pipe *p);

/* Residency (residency.h): load_weights plans what each phase keeps bound
 * under the backend's memory budget, and every generation plans again for
 * its request. set_plan fixes a plan instead (NULL: plan again), so tests
 * can force each one on any backend; residency shows the plan and state. */
cq_status cq_qi21_pipe_set_plan(cq_qi21_pipe *p, const cq_resid_plan *plan);
const cq_resid *cq_qi21_pipe_residency(const cq_qi21_pipe *p);
/* What the plan was made from: each part's device bytes per weight mode and the phases' activations
 * (zeros on a backend without a budget). */
const cq_resid_need *cq_qi21_pipe_need(const cq_qi21_pipe *p);

/* Token counts of a prompt as cq_qi21_pipe_encode_prompt runs it: the text
 * tower reads *total tokens, the denoiser the last *rows of their states
 * (the system turn's are dropped). Tokenizes only. */
cq_status cq_qi21_pipe_prompt_tokens(cq_qi21_pipe *p, const char *prompt, int *total, int *rows);

/* The prompt embeddings the denoiser reads: [*n_rows][context_dim] (malloc'd). */
cq_status cq_qi21_pipe_encode_prompt(cq_qi21_pipe *p, const char *prompt, float **embeds, int *n_rows);

cq_status cq_qi21_pipe_generate(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_result *res);
void cq_qi21_result_free(cq_qi21_result *r);

#endif /* CQ_PIPELINES_QI21_PIPE_H */
