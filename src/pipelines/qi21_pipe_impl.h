/*
 * qi21_pipe_impl.h — what a Qwen-Image-2.1 pipe holds, shared by its text to
 * image (qi21_pipe.c) and condition-picture (qi21_cond.c) halves. Not
 * installed.
 */
#ifndef CQ_PIPELINES_QI21_PIPE_IMPL_H
#define CQ_PIPELINES_QI21_PIPE_IMPL_H

#include "image/qwen_image_proc.h"
#include "models/component.h"
#include "models/qi21.h"
#include "models/qi21_vae.h"
#include "models/qwen3.h"
#include "models/qwen3_text.h"
#include "models/qwen3vl_vision.h"
#include "pipelines/qi21_pipe.h"
#include "pipelines/residency.h"
#include "pipelines/schedule.h"
#include "tokenizer/tokenizer.h"

#define QI21_SYSTEM_PROMPT "Comprehend and analyze the provided prompt."

struct cq_qi21_pipe {
    const cq_cmf *cmf;
    cq_qi21_config dcfg;   /* the denoiser's and the text tower's configs, read at open */
    cq_qwen3_config tcfg;
    cq_backend *be;
    cq_tokenizer *tok;
    cq_qwen3_text text;    /* the text encoder: the tower with the pipeline's template */
    cq_qwen3 *te;
    cq_qi21 *dit;
    cq_qi21_vae *vae;
    cq_flow_config sched;
    int drop_idx;          /* leading rows of the text tower's output that are dropped */
    cq_resid resid;        /* what is bound per phase under the backend's budget (residency.h) */
    cq_resid_need need;    /* the parts' device costs (activations per request) */
    cq_denoiser dn;        /* the bound parts as components (filled by bind) */
    cq_latent_codec codec;
    /* condition pictures (qi21_cond.c): the vision tower (bound with the text tower) where the pack has one,
     * the processor, the vision tokens */
    bool has_vision;
    cq_qwen3vl_vision_config vcfg;
    cq_qwen3vl_vision *vis;
    cq_qwen_vl_proc proc;
    int32_t image_pad, vision_start, vision_end;
};


/* The pipeline's template around the user turn (qi21_pipe.c). */
extern const char cq_qi21_head[], cq_qi21_tail[];

/* The request's plan (qi21_pipe.c): a width x height target beside cond_tokens condition tokens, a prompt of
 * `total` tokens making `rows` text rows. */
cq_status cq_qi21_plan_request(cq_qi21_pipe *p, int width, int height, int cond_tokens, int total, int rows);
/* The checks every request shares: size, steps, guidance, the schedule (qi21_pipe.c). */
cq_status cq_qi21_check_common(cq_qi21_pipe *p, const cq_qi21_gen_opts *o);
/* The generic generation's job for a width x height request (already checked) over these components. */
cq_image_job cq_qi21_job(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, const cq_text_encoder *te,
                         const cq_denoiser *dn, int width, int height, bool cfg);
/* Whether the RoPE table has room for `rows` text rows beside images whose longer sides (in latent tokens) sum
 * to `sides`: CQ_ERR_INVALID_ARG naming `what` otherwise. */
cq_status cq_qi21_check_positions(const char *what, int rows, int sides, int width, int height);

/* One condition picture as both routes receive it. */
typedef struct cq_qi21_cond_picture {
    int width, height;      /* the file's */
    cq_qi21_picture pic;    /* resized RGBA (the processor's picture) and the VAE's planes */
    int grid[3];            /* the processor's (t, h, w) in patches */
    int64_t n_patches;
    float *pixel_values;    /* [n_patches][patch_dim] */
} cq_qi21_cond_picture;

/* A request's pictures and what follows from them without weights. */
typedef struct cq_qi21_cond_inputs {
    int n;
    cq_qi21_cond_picture pic[CQ_QI21_MAX_IMAGES];
    int width, height;      /* the output size: the request's, else the last picture's */
    int64_t n_patches;      /* all pictures' */
    int n_pad_rows;         /* <|image_pad|> rows: n_patches / merge^2 */
    int n_cond_tokens;      /* the pictures' denoiser tokens (4 per pad row) */
    int sides;              /* the pictures' longer sides in latent tokens, summed (their RoPE positions) */
} cq_qi21_cond_inputs;

/* Read and prepare the pictures (each file's errors name it), the output size, and the checks of the sizes
 * against the processor and the denoiser. No weights. */
cq_status cq_qi21_cond_inputs_make(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_cond_inputs *in);
void cq_qi21_cond_inputs_free(cq_qi21_cond_inputs *in);
/* The template's tokens of a prompt with these pictures (*ids cq_malloc'd); refuses a prompt holding a vision
 * token or too long for the text tower. */
cq_status cq_qi21_cond_tokens(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, const char *prompt, int32_t **ids,
                              int *n);
/* The vision tower's rows [n_pad_rows][hidden] and deepstack rows [n_deepstack][n_pad_rows][hidden] (weights
 * loaded; *deep NULL without deepstack). */
cq_status cq_qi21_cond_vision(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, float **rows, float **deep);
/* The rows the denoiser reads for a prompt, [*n_rows][hidden], and which of them are image pads
 * (*pad_mask [*n_rows], NULL not wanted). */
cq_status cq_qi21_cond_encode(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, const float *vision, const float *deep,
                              const char *prompt, float **embeds, int *n_rows, uint8_t **pad_mask);
/* The pictures' packed, normalised latents [n_cond_tokens][in_channels] (weights loaded). */
cq_status cq_qi21_cond_latents(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, float **tokens);

/* Condition pictures (qi21_cond.c): open reads the vision tower's config, the processor and the vision tokens
 * where the pack has a vision tower; check and generate serve requests with pictures. */
cq_status cq_qi21_cond_open(cq_qi21_pipe *p);
cq_status cq_qi21_cond_check(cq_qi21_pipe *p, const cq_qi21_gen_opts *o);
cq_status cq_qi21_cond_generate(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_image_result *res);

#endif /* CQ_PIPELINES_QI21_PIPE_IMPL_H */
