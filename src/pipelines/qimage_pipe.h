/*
 * qimage_pipe.h — Qwen-Image (v1) text to image, end to end, as diffusers'
 * QwenImagePipeline does it:
 *
 *   prompt -> the pipeline's fixed template (a system turn asking for a
 *   detailed description, the prompt as the user turn, the assistant turn
 *   opened) -> tokenizer, cut at 1024 + 34 tokens -> the Qwen2.5-VL language
 *   model, hidden_states[-1] (the final norm's output) -> the first 34 rows
 *   (the system turn) dropped, at most 512 kept -> the denoiser's prepare
 *   (txt_norm, txt_in, RoPE tables) -> N flow-matching Euler steps from seeded
 *   noise over the sigmas linspace(1, 1/N, N) with the dynamic exponential
 *   shift and terminal stretch of the scheduler config; the denoiser sees
 *   sigma; true CFG neg + g (pos - neg) when g > 1 and a negative prompt is
 *   given, each token then scaled back to the positive prediction's norm ->
 *   unpack, latents / (1 / std) + mean -> the VAE decode -> RGB.
 *
 * The generation is the generic one (image_gen.h) over this model's
 * components (component.h): the text tower is models/qwen3.c in its Qwen2
 * family, the denoiser models/qimage.c, the VAE models/qi21_vae.c in its
 * Qwen-Image structure. Everything comes from one .cmf pack made by
 * `cortiq convert` of a diffusers QwenImagePipeline folder.
 *
 * Editing (qimage_edit.c), as QwenImageEditPipeline (arch qwen_image_edit)
 * and QwenImageEditPlusPipeline (qwen_image_edit_plus: Edit-2509, and 2511
 * whose denoiser has zero_cond_t) do it: each input picture takes two routes.
 *   - Through the text encoder: the picture resized (PIL Lanczos) to its
 *     calculate_dimensions size (Edit: the VAE area's, 1024^2; Edit-Plus: the
 *     VL area's, 384^2), the Qwen2-VL processor (the pack's
 *     processor.config_json), the Qwen2.5-VL vision tower; the edit template
 *     (Edit: one <|vision_start|><|image_pad|>*n<|vision_end|> before the
 *     prompt; Edit-Plus: "Picture i: " and the same per picture) with each
 *     pad expanded to the picture's merged grid, the tower's rows in place of
 *     the pads; the final norm's output less its first 64 rows (no cut at
 *     512). Positions: the reference (diffusers 58eb52c0 on transformers
 *     5.17, which computes Qwen2.5-VL's 3-D index only when given
 *     mm_token_type_ids, and the pipelines do not pass them) runs every row
 *     at 0..n-1 on all three axes, as measured on the golden data;
 *     vl_rope_3d asks for the 3-D index instead (the pictures' rows on their
 *     grid, as earlier transformers releases computed it).
 *   - Through the VAE: the picture resized to the VAE area's size, encoded,
 *     the posterior mean normalised and packed 2x2, placed after the target's
 *     tokens; the denoiser sees [target | picture 1 | ...] with one grid per
 *     picture (frame index i) and its output is cut to the target.
 * The output size defaults to the VAE area's size of the last picture
 * (Edit-Plus; Edit's only one), floored to multiples of 16.
 */
#ifndef CQ_PIPELINES_QIMAGE_PIPE_H
#define CQ_PIPELINES_QIMAGE_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"
#include "pipelines/residency.h"

#define CQ_QIMAGE_DROP_ROWS 34     /* the template's system turn, prompt_template_encode_start_idx */
#define CQ_QIMAGE_MAX_ROWS 512     /* the pipeline's max_sequence_length */
#define CQ_QIMAGE_MAX_TOKENS (1024 + CQ_QIMAGE_DROP_ROWS) /* the tokenizer's max_length */
#define CQ_QIMAGE_EDIT_DROP_ROWS 64 /* the edit template's system turn and more, prompt_template_encode_start_idx */
/* input pictures of one edit: the denoiser's layouts hold the target and 15 more */
#define CQ_QIMAGE_EDIT_MAX_IMAGES 8
/* the text encoder's tokens of an edit request (template, expanded pads, prompt): a bound on the work */
#define CQ_QIMAGE_EDIT_MAX_TOKENS 32768

/* Which pipeline a pack is, from its arch_name. */
typedef enum cq_qimage_kind {
    CQ_QIMAGE_T2I = 0,   /* qwen_image */
    CQ_QIMAGE_EDIT,      /* qwen_image_edit */
    CQ_QIMAGE_EDIT_PLUS, /* qwen_image_edit_plus (2509, 2511) */
} cq_qimage_kind;

typedef struct cq_qimage_pipe cq_qimage_pipe;

typedef struct cq_qimage_gen_opts {
    const char *prompt;
    const char *negative;     /* NULL: none (no guidance); " " is the usual empty negative */
    int width, height;        /* multiples of 16; editing: 0 = from the last input picture */
    const char *const *images; /* editing: the input pictures' files (PNG or JPEG), n_images of them */
    int n_images;
    double vae_area, vl_area; /* editing: the pictures' areas, 0: the pipelines' 1024^2 and 384^2 */
    bool vl_rope_3d;          /* editing: Qwen2.5-VL's 3-D RoPE index for the text tower (see below) */
    int steps;                /* 2..1000 (the reference's one-step schedule is not finite) */
    uint64_t seed;
    double guidance;          /* true_cfg_scale: guided when > 1 and a negative prompt is given */
    cq_flow_step_fn on_step;
    cq_flow_latents_fn on_latents; /* tests: the packed latents after each step (NULL: none) */
    cq_gen_phase_fn on_phase; /* NULL: none */
    void *user;               /* passed to on_step and on_phase */
} cq_qimage_gen_opts;

/* As the other pipelines: open reads the tokenizer and the configs (no weights), check refuses what generate
 * would refuse, load_weights binds the parts under the backend's budget (residency.h). The cmf must outlive
 * the pipe. */
cq_status cq_qimage_pipe_open(const cq_cmf *cmf, cq_qimage_pipe **out);
cq_qimage_kind cq_qimage_pipe_kind(const cq_qimage_pipe *p);
cq_status cq_qimage_pipe_check(cq_qimage_pipe *p, const cq_qimage_gen_opts *o);
cq_status cq_qimage_pipe_load_weights(cq_qimage_pipe *p, cq_backend *be);
cq_status cq_qimage_pipe_set_plan(cq_qimage_pipe *p, const cq_resid_plan *plan);
const cq_resid *cq_qimage_pipe_residency(const cq_qimage_pipe *p);
/* What the plan was made from, as cq_qi21_pipe_need. */
const cq_resid_need *cq_qimage_pipe_need(const cq_qimage_pipe *p);
void cq_qimage_pipe_free(cq_qimage_pipe *p);

/* Tokens of a prompt with the template (*total, after the cut) and the rows the denoiser reads (*rows); text to
 * image only (an edit's tokens depend on its pictures: cq_qimage_edit_inputs). */
cq_status cq_qimage_pipe_prompt_tokens(cq_qimage_pipe *p, const char *prompt, int *total, int *rows);
/* The rows the denoiser reads: [*n_rows][hidden] (cq_malloc'd). The weights must be loaded. */
cq_status cq_qimage_pipe_encode_prompt(cq_qimage_pipe *p, const char *prompt, float **embeds, int *n_rows);
/* The schedule a request runs. */
cq_status cq_qimage_pipe_schedule(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_flow_schedule *out);
/* The planar RGB image in the decoder's range [-1, 1]. */
cq_status cq_qimage_pipe_generate(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_image_result *res);

/* ---- editing (qimage_edit.c) ---- */

/* One picture as both routes receive it. */
typedef struct cq_qimage_edit_picture {
    int width, height;     /* the file's */
    int vl_w, vl_h;        /* the picture the processor receives */
    uint8_t *vl_rgb;       /* [vl_h][vl_w][3] */
    int grid[3];           /* the processor's (t, h, w) in patches */
    int64_t n_patches;
    float *pixel_values;   /* [n_patches][patch_dim] */
    int vae_w, vae_h;      /* the VAE picture */
    float *vae;            /* [3][vae_h][vae_w] in [-1, 1] */
} cq_qimage_edit_picture;

/* An edit request's pictures and what follows from them without weights. */
typedef struct cq_qimage_edit_inputs {
    int n;
    cq_qimage_edit_picture pic[CQ_QIMAGE_EDIT_MAX_IMAGES];
    int width, height;      /* the output size: the request's, else the default */
    int64_t n_patches;      /* all pictures' */
    int n_pad_rows;         /* <|image_pad|> rows: n_patches / merge^2 */
    int n_cond_tokens;      /* the pictures' denoiser tokens */
    bool rope_3d;           /* the request's vl_rope_3d */
} cq_qimage_edit_inputs;

/* Read and prepare the request's pictures (each file's errors name it), the output size, and check the sizes
 * against the denoiser. Needs an edit pipe; no weights. */
cq_status cq_qimage_edit_inputs_make(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_qimage_edit_inputs *in);
void cq_qimage_edit_inputs_free(cq_qimage_edit_inputs *in);
/* The template's tokens of a prompt with these pictures (*ids cq_malloc'd, *n of them); refuses a prompt that
 * holds a vision token. */
cq_status cq_qimage_edit_tokens(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, const char *prompt,
                                int32_t **ids, int *n);
/* The vision tower's rows of the pictures, [in->n_pad_rows][hidden] (weights loaded). */
cq_status cq_qimage_edit_vision(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, float **rows);
/* The text rows the denoiser reads for a prompt, given the vision rows: [*n_rows][hidden]. */
cq_status cq_qimage_edit_encode(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, const float *vision,
                                const char *prompt, float **embeds, int *n_rows);
/* The pictures' packed, normalised latents [in->n_cond_tokens][in_channels] (weights loaded). */
cq_status cq_qimage_edit_cond_latents(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, float **tokens);
/* Bytes of activations what runs beside the language model in the text phase needs (the residency plan's text
 * phase holds the larger): the vision tower over every picture's patches, the VAE encoder on the largest picture
 * (the decoder's estimate at that size, which bounds the encoder's narrower feature maps). */
uint64_t cq_qimage_edit_text_side(const cq_qimage_pipe *p, const cq_qimage_edit_inputs *in);

#endif /* CQ_PIPELINES_QIMAGE_PIPE_H */
