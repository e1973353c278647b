/*
 * qimage_pipe_impl.h — what a Qwen-Image pipe holds, shared by its text to
 * image (qimage_pipe.c) and editing (qimage_edit.c) halves. Not installed.
 */
#ifndef CQ_PIPELINES_QIMAGE_PIPE_IMPL_H
#define CQ_PIPELINES_QIMAGE_PIPE_IMPL_H

#include "image/qwen_image_proc.h"
#include "models/qi21_vae.h"
#include "models/qimage.h"
#include "models/qwen25vl_vision.h"
#include "models/qwen3.h"
#include "models/qwen3_text.h"
#include "pipelines/qimage_pipe.h"
#include "pipelines/schedule.h"
#include "tokenizer/tokenizer.h"

#define NAME "qwen_image pipeline"

struct cq_qimage_pipe {
    const cq_cmf *cmf;
    cq_qimage_kind kind;
    cq_qimage_config dcfg; /* the denoiser's and the text tower's configs, read at open */
    cq_qwen3_config tcfg;
    cq_tokenizer *tok;
    cq_qwen3_text text;    /* the text encoder: the tower behind the template (text to image) */
    cq_backend *be;        /* the weights' backend (borrowed) */
    cq_qwen3 *te;
    cq_qimage *dit;
    cq_qi21_vae *vae;
    cq_flow_config sched;
    cq_resid resid;        /* what is bound per phase under the backend's budget (residency.h) */
    cq_resid_need need;    /* the parts' device costs (activations per request) */
    cq_denoiser dn;        /* the bound parts as components (filled by bind) */
    cq_latent_codec codec;
    /* editing: the vision tower (bound with the text tower), the processor, the special tokens */
    cq_qwen25vl_vision_config vcfg;
    cq_qwen25vl_vision *vis;
    cq_qwen_vl_proc proc;
    int32_t image_pad, vision_start, vision_end;
};

/* Editing's open (configs, processor, tokens), check and generate (qimage_edit.c). */
cq_status cq_qimage_edit_open(cq_qimage_pipe *p);
cq_status cq_qimage_edit_check(cq_qimage_pipe *p, const cq_qimage_gen_opts *o);
cq_status cq_qimage_edit_generate(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_image_result *res);
/* The request's plan (qimage_pipe.c): a width x height target beside cond_tokens condition tokens, a prompt of
 * `total` tokens making `rows` text rows; `text_side`: activations of what else runs in the text phase (editing:
 * the vision tower and the VAE encoder on the input pictures), the phase planned for the larger of the two. */
cq_status cq_qimage_plan_request(cq_qimage_pipe *p, int width, int height, int cond_tokens, int total, int rows,
                                 uint64_t text_side);
/* The checks every request shares: size, steps, guidance, the schedule. */
cq_status cq_qimage_check_common(cq_qimage_pipe *p, const cq_qimage_gen_opts *o);

#endif /* CQ_PIPELINES_QIMAGE_PIPE_IMPL_H */
