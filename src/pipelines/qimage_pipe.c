/*
 * qimage_pipe.c — the Qwen-Image (v1) text-to-image pipeline (see
 * qimage_pipe.h).
 *
 * Order of operations and precision follow diffusers' QwenImagePipeline run
 * in float32 on the CPU, so that the same seed gives the same latents:
 *  - the template's text is tokenized with truncation at 1024 + 34 tokens;
 *    the text tower's final-norm output loses its first 34 rows, and at most
 *    512 rows stay (batch 1: no padding, so no text mask);
 *  - noise: torch.randn((1, 1, 16, H/8, W/8)) in float32 from a CPU
 *    generator seeded with the seed, packed 2x2 with the channel slowest;
 *  - schedule: np.linspace(1, 1/N, N) in float64, the dynamic exponential
 *    shift at mu from the target's token count and the terminal stretch,
 *    then float32 and a final 0; timesteps = sigma * 1000;
 *  - the denoiser sees timestep / 1000 in float32; true CFG
 *    neg + g (pos - neg) with each token rescaled to the positive's norm;
 *    Euler in float32;
 *  - unpack, latents / (1 / std) + mean (the codec's denormalize), decode.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "pipelines/qimage_pipe_impl.h"

static const char k_head[] = "<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, "
                             "quantity, text, spatial relationships of the objects and background:<|im_end|>\n"
                             "<|im_start|>user\n";
static const char k_tail[] = "<|im_end|>\n<|im_start|>assistant\n";

/* ------------------------------------------------------------------------ */
static cq_status load_scheduler(cq_qimage_pipe *p, const cq_cmf *cmf) {
    const cq_tensor_view *v = cq_cmf_find(cmf, "scheduler.config_json");
    if (!v) return cq_fail(CQ_ERR_MISSING, NAME ": the file has no scheduler.config_json (convert the pipeline folder "
                           "with its scheduler/)");
    CQ_TRY(cq_cmf_check_tensor(v));
    return cq_flow_config_parse((const char *)v->data, (size_t)v->nbytes, &p->sched);
}

cq_status cq_qimage_pipe_open(const cq_cmf *cmf, cq_qimage_pipe **out) {
    *out = NULL;
    cq_qimage_pipe *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    p->cmf = cmf;
    cq_cmf_info info;
    cq_status s = cq_cmf_get_info(cmf, &info);
    if (s == CQ_OK && info.arch_name && !strcmp(info.arch_name, "qwen_image_edit")) p->kind = CQ_QIMAGE_EDIT;
    if (s == CQ_OK && info.arch_name && !strcmp(info.arch_name, "qwen_image_edit_plus")) p->kind = CQ_QIMAGE_EDIT_PLUS;
    size_t tl = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    if (s == CQ_OK && !tj) s = cq_fail(CQ_ERR_MISSING, NAME ": the file has no tokenizer section");
    if (s == CQ_OK) s = cq_tokenizer_load(tj, tl, &p->tok);
    if (s == CQ_OK) s = cq_qwen3_parse_config(cmf, "te.", &p->tcfg);
    if (s == CQ_OK) s = cq_qimage_parse_config(cmf, "dit.", &p->dcfg);
    if (s == CQ_OK) s = load_scheduler(p, cmf);
    if (s == CQ_OK && p->dcfg.joint_dim != p->tcfg.hidden)
        s = cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser reads %d-wide text rows but the text tower is %d wide",
                    p->dcfg.joint_dim, p->tcfg.hidden);
    if (s == CQ_OK && p->dcfg.out_dim != p->dcfg.in_channels)
        s = cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser returns %d floats per token for %d in; text to image needs the "
                    "same", p->dcfg.out_dim, p->dcfg.in_channels);
    if (s == CQ_OK)
        p->text = (cq_qwen3_text){
            .name = NAME,
            .tok = p->tok,
            .normed = true, /* hidden_states[-1] */
            .tmpl = {.head = k_head, .tail = k_tail, .enable_thinking = -1, .drop_rows = CQ_QIMAGE_DROP_ROWS,
                     .max_tokens = CQ_QIMAGE_MAX_TOKENS, .max_rows = CQ_QIMAGE_MAX_ROWS,
                     .forbid_id = cq_tokenizer_token_to_id(p->tok, "<|image_pad|>", 13),
                     .forbid_why = "the prompt contains <|image_pad|>, a placeholder for a condition image; "
                                   "text-to-image prompts cannot hold one"}};
    if (s == CQ_OK && p->kind != CQ_QIMAGE_T2I) s = cq_qimage_edit_open(p);
    if (s != CQ_OK) {
        cq_qimage_pipe_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}

/* ---- the parts, bound and released per phase (residency.h) ---- */
static cq_status bind_part(void *pipe, cq_part part) {
    cq_qimage_pipe *p = pipe;
    switch (part) {
    case CQ_PART_TEXT:
        CQ_TRY(cq_qwen3_load(p->cmf, "te.", p->be, &p->te));
        p->text.model = p->te;
        if (p->kind != CQ_QIMAGE_T2I) {
            /* the vision tower serves the text encoder alone: bound and released with it */
            const cq_status s = cq_qwen25vl_vision_load(p->cmf, "te.", p->be, &p->vis);
            if (s != CQ_OK) {
                cq_qwen3_free(p->te);
                p->te = NULL;
                p->text.model = NULL;
                return s;
            }
        }
        return CQ_OK;
    case CQ_PART_DENOISER:
        CQ_TRY(cq_qimage_load(p->cmf, "dit.", p->be, &p->dit));
        p->dn = cq_qimage_denoiser(p->dit);
        return CQ_OK;
    case CQ_PART_CODEC: {
        /* an op the backend lacks runs on its host backend (ops/fallback.c) */
        CQ_TRY(cq_qi21_vae_load(p->cmf, "vae.", p->be, &p->vae));
        const cq_qi21_vae_config *vc = cq_qi21_vae_get_config(p->vae);
        const cq_latent_codec codec = cq_qi21_vae_codec(p->vae);
        if (vc->kind != CQ_QI21_VAE_QIMAGE || 4 * codec.channels != p->dcfg.in_channels) {
            cq_qi21_vae_free(p->vae);
            p->vae = NULL;
            return cq_fail(CQ_ERR_SHAPE, NAME ": the VAE is not Qwen-Image's AutoencoderKLQwenImage with %d latent "
                           "channels (the denoiser reads %d per token)", p->dcfg.in_channels / 4, p->dcfg.in_channels);
        }
        if (p->kind != CQ_QIMAGE_T2I && !codec.encode) {
            cq_qi21_vae_free(p->vae);
            p->vae = NULL;
            return cq_fail(CQ_ERR_MISSING, NAME ": the pack's VAE has no encoder (vae.encoder.*, vae.quant_conv.*); "
                           "editing encodes the input pictures");
        }
        p->codec = codec;
        return CQ_OK;
    }
    default: return cq_fail(CQ_ERR_INTERNAL, NAME ": no part %d", (int)part);
    }
}

static void release_part(void *pipe, cq_part part) {
    cq_qimage_pipe *p = pipe;
    if (part == CQ_PART_TEXT) {
        cq_qwen25vl_vision_free(p->vis);
        p->vis = NULL;
        cq_qwen3_free(p->te);
        p->te = NULL;
        p->text.model = NULL;
    } else if (part == CQ_PART_DENOISER) {
        cq_qimage_free(p->dit);
        p->dit = NULL;
        p->dn.self = NULL;
    } else if (part == CQ_PART_CODEC) {
        cq_qi21_vae_free(p->vae);
        p->vae = NULL;
        p->codec.self = NULL;
    }
}

static const cq_resid_ops k_parts = {bind_part, release_part};

/* The plan for a width x height image and a prompt of `total` tokens making `rows` text rows. */
cq_status cq_qimage_plan_request(cq_qimage_pipe *p, int width, int height, int cond_tokens, int total, int rows,
                                 uint64_t text_side) {
    const int64_t tokens = (int64_t)(width / 16) * (height / 16) + cond_tokens;
    cq_resid_request_acts(&p->need, cq_act_dtype_size(cq_backend_act_dtype(p->be)), total, p->tcfg.hidden,
                          p->tcfg.intermediate, tokens + rows, p->dcfg.inner, p->dcfg.mlp_hidden,
                          (int64_t)width * height);
    if (p->need.act[CQ_RESID_TEXT] < text_side) p->need.act[CQ_RESID_TEXT] = text_side;
    return cq_resid_replan(&p->resid, &p->need, "Qwen-Image");
}

/* The load's plan: a prompt of 64 text rows (16 for the smallest request) after the template's dropped rows. */
static cq_status plan_for(void *pipe, int width, int height, bool smallest) {
    const int rows = smallest ? 16 : 64;
    const cq_qimage_pipe *p = pipe;
    const int drop = p->kind == CQ_QIMAGE_T2I ? CQ_QIMAGE_DROP_ROWS : CQ_QIMAGE_EDIT_DROP_ROWS;
    return cq_qimage_plan_request(pipe, width, height, 0, drop + rows, rows, 0);
}

cq_status cq_qimage_pipe_load_weights(cq_qimage_pipe *p, cq_backend *be) {
    if (!p || !be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": no pipeline or backend");
    if (p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are already loaded");
    p->be = be;
    cq_resid_init(&p->resid, be, &k_parts, p);
    cq_status s = cq_resid_load(&p->resid, &p->need, p->cmf, plan_for, p);
    if (s != CQ_OK) p->be = NULL;
    return s;
}

cq_status cq_qimage_pipe_set_plan(cq_qimage_pipe *p, const cq_resid_plan *plan) {
    if (!p || !p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    cq_resid_set_plan(&p->resid, plan);
    return CQ_OK;
}

const cq_resid *cq_qimage_pipe_residency(const cq_qimage_pipe *p) { return p ? &p->resid : NULL; }

const cq_resid_need *cq_qimage_pipe_need(const cq_qimage_pipe *p) { return p ? &p->need : NULL; }

cq_qimage_kind cq_qimage_pipe_kind(const cq_qimage_pipe *p) { return p ? p->kind : CQ_QIMAGE_T2I; }

void cq_qimage_pipe_free(cq_qimage_pipe *p) {
    if (!p) return;
    if (p->be) cq_resid_release_all(&p->resid);
    cq_tokenizer_free(p->tok);
    cq_free(p);
}

/* ------------------------------------------------------------------------ */
cq_status cq_qimage_pipe_prompt_tokens(cq_qimage_pipe *p, const char *prompt, int *total, int *rows) {
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    return te.count(te.self, prompt, total, rows);
}

cq_status cq_qimage_pipe_encode_prompt(cq_qimage_pipe *p, const char *prompt, float **embeds, int *n_rows) {
    *embeds = NULL;
    *n_rows = 0;
    if (!p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    return te.encode(te.self, prompt, embeds, n_rows);
}

cq_status cq_qimage_pipe_schedule(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_flow_schedule *out) {
    const int64_t tokens = (int64_t)(o->height / 16) * (o->width / 16);
    return cq_flow_schedule_make(&p->sched, o->steps, tokens > 0 ? tokens : 1, out);
}

static cq_status check_prompt(cq_qimage_pipe *p, const char *what, const char *prompt, int lat_h, int lat_w) {
    const long bad = prompt ? cq_utf8_invalid_at(prompt) : -1;
    if (bad >= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "the %s is not valid UTF-8 (byte %ld of %zu)", what, bad + 1, strlen(prompt));
    int total = 0, rows = 0;
    cq_status s = cq_qimage_pipe_prompt_tokens(p, prompt, &total, &rows);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    /* the text rows' and the image's RoPE positions against the denoiser's tables */
    const int32_t shape[1][3] = {{1, lat_h / 2, lat_w / 2}};
    const cq_qimage_layout lay = {.n_images = 1, .img_shapes = shape, .n_txt = rows};
    s = cq_qimage_layout_sizes(&lay, NULL, NULL);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s (%d text rows): ", what, rows);
    return CQ_OK;
}

cq_status cq_qimage_check_common(cq_qimage_pipe *p, const cq_qimage_gen_opts *o) {
    if (o->width < 16 || o->height < 16 || o->width > CQ_GEN_SIDE_MAX || o->height > CQ_GEN_SIDE_MAX ||
        o->width % 16 || o->height % 16)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "image size %dx%d: Qwen-Image draws sides that are multiples of 16 in [16, %d] (each 2x2 patch "
                       "of 8-pixel latents is one token; the reference would resize other sizes)",
                       o->width, o->height, CQ_GEN_SIDE_MAX);
    if (o->steps < 2 || o->steps > 1000)
        return cq_fail(CQ_ERR_INVALID_ARG, "steps must be in [2, 1000] (got %d): the reference schedule is not finite for "
                       "one step", o->steps);
    if (!(o->guidance >= 0.0 && o->guidance <= 100.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "guidance %g is out of range [0, 100] (true CFG when > 1 with a negative "
                       "prompt)", o->guidance);
    cq_flow_schedule sch = {0};
    cq_status s = cq_qimage_pipe_schedule(p, o, &sch);
    cq_flow_schedule_free(&sch);
    if (s != CQ_OK) return cq_fail_prefix(s, "image size %dx%d at %d steps: ", o->width, o->height, o->steps);
    return CQ_OK;
}

cq_status cq_qimage_pipe_check(cq_qimage_pipe *p, const cq_qimage_gen_opts *o) {
    if (!p || !o) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": no pipeline or options");
    if (p->kind != CQ_QIMAGE_T2I) return cq_qimage_edit_check(p, o);
    if (o->n_images > 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "this Qwen-Image pack draws from text only; input pictures need an editing "
                       "pack (arch qwen_image_edit or qwen_image_edit_plus)");
    CQ_TRY(cq_qimage_check_common(p, o));
    const int lat_h = o->height / 8, lat_w = o->width / 8;
    CQ_TRY(check_prompt(p, "prompt", o->prompt, lat_h, lat_w));
    if (o->negative && o->guidance > 1.0) CQ_TRY(check_prompt(p, "negative prompt", o->negative, lat_h, lat_w));
    return CQ_OK;
}

cq_status cq_qimage_pipe_generate(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_image_result *res) {
    memset(res, 0, sizeof *res);
    if (!p || !p->be || !p->resid.bound[CQ_PART_CODEC])
        return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    if (p->kind != CQ_QIMAGE_T2I) return cq_qimage_edit_generate(p, o, res);
    CQ_TRY(cq_qimage_pipe_check(p, o));
    CQ_TRY(cq_check_cancel("image generation"));
    const bool cfg = cq_true_cfg_wanted(o->guidance, o->negative);
    /* the plan for this request: the longer prompt and the image's tokens */
    int total = 0, rows = 0, nt = 0, nr = 0;
    CQ_TRY(cq_qimage_pipe_prompt_tokens(p, o->prompt, &total, &rows));
    if (cfg) CQ_TRY(cq_qimage_pipe_prompt_tokens(p, o->negative, &nt, &nr));
    CQ_TRY(cq_qimage_plan_request(p, o->width, o->height, 0, total > nt ? total : nt, rows > nr ? rows : nr, 0));
    /* the codec is bound in every phase; the denoiser's entries are read after the PREFILL stage binds it */
    CQ_TRY(cq_resid_stage(&p->resid, CQ_RESID_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    p->dn.channels = p->dcfg.in_channels;
    const int lat_h = o->height / p->codec.factor, lat_w = o->width / p->codec.factor;
    const cq_image_job j = {
        .te = &te,
        .dn = &p->dn,
        .codec = &p->codec,
        .sched = &p->sched,
        .timestep = {.kind = CQ_FLOW_T_SIGMA}, /* timestep / 1000 in float32 on the CPU */
        .guidance = {.kind = cfg ? CQ_GUIDANCE_CFG : CQ_GUIDANCE_NONE, .scale = o->guidance,
                     .norm = CQ_GUIDANCE_NORM_ROWS},
        .prompt = o->prompt,
        .negative = o->negative,
        .width = o->width,
        .height = o->height,
        .lat_w = lat_w,
        .lat_h = lat_h,
        .tokens = (lat_h / 2) * (lat_w / 2),
        .steps = o->steps,
        .seed = o->seed,
        .noise_dtype = CQ_TORCH_F32, /* the text encoder's dtype, float32 here */
        .on_step = o->on_step,
        .on_phase = o->on_phase,
        .user = o->user,
        .stage = cq_resid_gen_stage,
        .stage_user = &p->resid,
    };
    return cq_image_job_run(&j, res);
}
