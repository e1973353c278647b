/*
 * qi21_pipe.c — the Qwen-Image-2.1 text-to-image pipeline (see qi21_pipe.h).
 *
 * Order of operations and precision follow diffusers' QwenImage21Pipeline run
 * in float32 on the CPU, so that the same seed gives the same latents:
 *  - the prompt goes into the pipeline's fixed template (not the chat
 *    template); an empty prompt becomes " ";
 *  - the number of rows to drop is the token count of the processor's chat
 *    template rendered for the system turn alone;
 *  - the text rows are the text tower's hidden_states[-1], the final norm's
 *    output (transformers' rule for the last hidden state);
 *  - noise: torch.randn((1, 1, C, h, w)) from a CPU generator seeded with the
 *    seed, packed to tokens;
 *  - schedule: linspace(1, 1/N, N), dynamic shift from the token count,
 *    terminal stretch, final 0; the denoiser sees timestep / 1000;
 *  - Euler step and true CFG in float32 with each operation rounded;
 *  - latents * std + mean, VAE decode, clamp to [-1, 1].
 */
#include "pipelines/qi21_pipe_impl.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "models/qi21.h"
#include "models/qwen3.h"
#include "models/qi21_vae.h"
#include "models/qwen3_text.h"
#include "pipelines/latents.h"
#include "pipelines/residency.h"
#include "pipelines/schedule.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

const char cq_qi21_head[] = "<|im_start|>system\n" QI21_SYSTEM_PROMPT "<|im_end|>\n<|im_start|>user\n";
const char cq_qi21_tail[] = "<|im_end|>\n<|im_start|>assistant\n";

/* ------------------------------------------------------------------------ */
static cq_status drop_count(cq_qi21_pipe *p, const cq_cmf *cmf) {
    const char *tmpl = cq_cmf_chat_template(cmf);
    if (!tmpl)
        return cq_fail(CQ_ERR_MISSING, "qi21 pipeline: the file has no chat template (convert the pipeline folder with "
                       "its processor/ or tokenizer/ so the system turn's length can be counted)");
    cq_chat_template *ct;
    CQ_TRY(cq_chat_template_compile(tmpl, strlen(tmpl), &ct));
    /* [{"role": "system", "content": [{"type": "text", "text": SYS}]}], as the reference builds it */
    cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject(), *content = cJSON_CreateArray(),
          *item = cJSON_CreateObject();
    cq_status s = CQ_OK;
    if (!msgs || !m || !content || !item) s = cq_fail(CQ_ERR_NOMEM, "qi21 pipeline: out of memory");
    if (s == CQ_OK) {
        cJSON_AddStringToObject(item, "type", "text");
        cJSON_AddStringToObject(item, "text", QI21_SYSTEM_PROMPT);
        cJSON_AddItemToArray(content, item);
        item = NULL;
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddItemToObject(m, "content", content);
        content = NULL;
        cJSON_AddItemToArray(msgs, m);
        m = NULL;
    }
    char *text = NULL;
    size_t len = 0;
    if (s == CQ_OK) s = cq_chat_template_apply(ct, msgs, NULL, NULL, false, NULL, &text, &len);
    cq_tokens ids = {0};
    if (s == CQ_OK) s = cq_tokenizer_encode(p->tok, text, len, CQ_TOK_ADD_SPECIAL, &ids);
    if (s == CQ_OK) p->drop_idx = (int)ids.n;
    cq_tokens_free(&ids);
    cq_free(text);
    cJSON_Delete(item);
    cJSON_Delete(content);
    cJSON_Delete(m);
    cJSON_Delete(msgs);
    cq_chat_template_free(ct);
    if (s != CQ_OK) return cq_fail_prefix(s, "qi21 pipeline: counting the system turn's tokens: ");
    return CQ_OK;
}

static cq_status load_scheduler(cq_qi21_pipe *p, const cq_cmf *cmf) {
    const cq_tensor_view *v = cq_cmf_find(cmf, "scheduler.config_json");
    if (!v) {
        CQ_WARN("qi21 pipeline: no scheduler.config_json in the file; using Qwen-Image-2.1's scheduler settings");
        cq_flow_config_qi21(&p->sched);
        return CQ_OK;
    }
    CQ_TRY(cq_cmf_check_tensor(v));
    return cq_flow_config_parse((const char *)v->data, (size_t)v->nbytes, &p->sched);
}

cq_status cq_qi21_pipe_open(const cq_cmf *cmf, cq_qi21_pipe **out) {
    *out = NULL;
    cq_qi21_pipe *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    p->cmf = cmf;
    size_t tl = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    cq_status s = CQ_OK;
    if (!tj) s = cq_fail(CQ_ERR_MISSING, "qi21 pipeline: the file has no tokenizer section");
    if (s == CQ_OK) s = cq_tokenizer_load(tj, tl, &p->tok);
    if (s == CQ_OK) s = cq_qwen3_parse_config(cmf, "te.", &p->tcfg);
    if (s == CQ_OK) s = cq_qi21_parse_config(cmf, "dit.", &p->dcfg);
    if (s == CQ_OK) s = load_scheduler(p, cmf);
    if (s == CQ_OK) s = drop_count(p, cmf);
    if (s == CQ_OK) s = cq_qi21_cond_open(p);
    if (s == CQ_OK) {
        p->text = (cq_qwen3_text){
            .name = "qi21 pipeline",
            .tok = p->tok,
            .normed = true, /* hidden_states[-1]: the final norm's output */
            .tmpl = {.head = cq_qi21_head, .tail = cq_qi21_tail, .enable_thinking = -1, .empty = " ",
                     .drop_rows = p->drop_idx,
                     .forbid_id = cq_tokenizer_token_to_id(p->tok, "<|image_pad|>", 13),
                     .forbid_why = "the prompt contains <|image_pad|>, a placeholder for a condition image; "
                                   "text-to-image prompts cannot hold one"}};
        if (p->dcfg.context_in_dim != p->tcfg.hidden)
            s = cq_fail(CQ_ERR_SHAPE, "qi21 pipeline: the denoiser reads %d-wide text rows but the text tower is %d wide",
                        p->dcfg.context_in_dim, p->tcfg.hidden);
    }
    if (s != CQ_OK) {
        cq_qi21_pipe_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}

/* ---- the parts, bound and released per phase (residency.h) ---- */
static cq_status bind_part(void *pipe, cq_part part) {
    cq_qi21_pipe *p = pipe;
    switch (part) {
    case CQ_PART_TEXT:
        CQ_TRY(cq_qwen3_load(p->cmf, "te.", p->be, &p->te));
        p->text.model = p->te;
        if (p->has_vision) {
            /* the vision tower serves the text encoder alone: bound and released with it */
            const cq_status s = cq_qwen3vl_vision_load(p->cmf, "te.", p->be, &p->vis);
            if (s != CQ_OK) {
                cq_qwen3_free(p->te);
                p->te = NULL;
                p->text.model = NULL;
                return s;
            }
        }
        return CQ_OK;
    case CQ_PART_DENOISER:
        CQ_TRY(cq_qi21_load(p->cmf, "dit.", p->be, &p->dit));
        p->dn = cq_qi21_denoiser(p->dit);
        return CQ_OK;
    case CQ_PART_CODEC: {
        /* an op the backend lacks (the VAE's convolutions, say) runs on its host backend (ops/fallback.c) */
        CQ_TRY(cq_qi21_vae_load(p->cmf, "vae.", p->be, &p->vae));
        const cq_qi21_vae_config *vc = cq_qi21_vae_get_config(p->vae);
        if (p->dcfg.in_channels != vc->z_dim || p->dcfg.out_channels != vc->z_dim) {
            cq_qi21_vae_free(p->vae);
            p->vae = NULL;
            return cq_fail(CQ_ERR_SHAPE, "qi21 pipeline: the denoiser has %d/%d latent channels, the VAE %d",
                           p->dcfg.in_channels, p->dcfg.out_channels, vc->z_dim);
        }
        p->codec = cq_qi21_vae_codec(p->vae);
        return CQ_OK;
    }
    default: return cq_fail(CQ_ERR_INTERNAL, "qi21 pipeline: no part %d", (int)part);
    }
}

static void release_part(void *pipe, cq_part part) {
    cq_qi21_pipe *p = pipe;
    if (part == CQ_PART_TEXT) {
        cq_qwen3_free(p->te);
        p->te = NULL;
        p->text.model = NULL;
        cq_qwen3vl_vision_free(p->vis);
        p->vis = NULL;
    } else if (part == CQ_PART_DENOISER) {
        cq_qi21_free(p->dit);
        p->dit = NULL;
        p->dn.self = NULL;
    } else if (part == CQ_PART_CODEC) {
        cq_qi21_vae_free(p->vae);
        p->vae = NULL;
        p->codec.self = NULL;
    }
}

static const cq_resid_ops k_parts = {bind_part, release_part};

/* The plan for a width x height image beside cond_tokens condition tokens and a prompt of `rows` text rows (of
 * `total` tokens); the condition pictures' encoder reads fewer pixels than the decoder writes for the target
 * (the decoder's bound covers it) unless they are larger, and the vision tower's rows are fewer than the text
 * tower's tokens (its pads stand for four patches each) and narrower. */
cq_status cq_qi21_plan_request(cq_qi21_pipe *p, int width, int height, int cond_tokens, int total, int rows) {
    const int64_t tokens = (int64_t)(width / 16) * (height / 16) + cond_tokens;
    const int64_t pixels = (int64_t)width * height > (int64_t)cond_tokens * 256 ? (int64_t)width * height
                                                                                 : (int64_t)cond_tokens * 256;
    cq_resid_request_acts(&p->need, cq_act_dtype_size(cq_backend_act_dtype(p->be)), total, p->tcfg.hidden,
                          p->tcfg.intermediate, tokens + rows, p->dcfg.inner, p->dcfg.mlp_hidden,
                          pixels);
    return cq_resid_replan(&p->resid, &p->need, "Qwen-Image-2.1");
}

/* The plan for a width x height image and a prompt of 64 text rows (16 for the smallest request), with the
 * template's dropped rows before them. */
static cq_status plan_for(void *pipe, int width, int height, bool smallest) {
    cq_qi21_pipe *p = pipe;
    const int rows = smallest ? 16 : 64;
    return cq_qi21_plan_request(p, width, height, 0, p->drop_idx + rows, rows);
}

cq_status cq_qi21_pipe_load_weights(cq_qi21_pipe *p, cq_backend *be) {
    if (!p || !be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: no pipeline or backend");
    if (p->be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are already loaded");
    p->be = be;
    cq_resid_init(&p->resid, be, &k_parts, p);
    cq_status s = cq_resid_load(&p->resid, &p->need, p->cmf, plan_for, p);
    if (s != CQ_OK) p->be = NULL;
    return s;
}

cq_status cq_qi21_pipe_set_plan(cq_qi21_pipe *p, const cq_resid_plan *plan) {
    if (!p || !p->be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are not loaded");
    cq_resid_set_plan(&p->resid, plan);
    return CQ_OK;
}

const cq_resid *cq_qi21_pipe_residency(const cq_qi21_pipe *p) { return p ? &p->resid : NULL; }
const cq_resid_need *cq_qi21_pipe_need(const cq_qi21_pipe *p) { return p ? &p->need : NULL; }

cq_status cq_qi21_pipe_load(const cq_cmf *cmf, cq_backend *be, cq_qi21_pipe **out) {
    *out = NULL;
    cq_qi21_pipe *p;
    CQ_TRY(cq_qi21_pipe_open(cmf, &p));
    cq_status s = cq_qi21_pipe_load_weights(p, be);
    if (s != CQ_OK) {
        cq_qi21_pipe_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}

void cq_qi21_pipe_free(cq_qi21_pipe *p) {
    if (!p) return;
    if (p->be) cq_resid_release_all(&p->resid);
    cq_tokenizer_free(p->tok);
    cq_free(p);
}

/* ------------------------------------------------------------------------ */
/* The prompt in the pipeline's template, tokenized; refuses what the text tower must not read. */
static cq_status tokenize_prompt(cq_qi21_pipe *p, const char *prompt, cq_tokens *ids) {
    return cq_qwen3_text_tokenize(&p->text, prompt, ids, NULL);
}

cq_status cq_qi21_pipe_prompt_tokens(cq_qi21_pipe *p, const char *prompt, int *total, int *rows) {
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    return te.count(te.self, prompt, total, rows);
}

cq_status cq_qi21_pipe_encode_prompt(cq_qi21_pipe *p, const char *prompt, float **embeds, int *n_rows) {
    *embeds = NULL;
    *n_rows = 0;
    if (!p->be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are not loaded");
    CQ_TRY(cq_resid_stage(&p->resid, CQ_RESID_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    return te.encode(te.self, prompt, embeds, n_rows);
}

static cq_status check_prompt(cq_qi21_pipe *p, const char *what, const char *prompt, int width, int height, int lat_h,
                              int lat_w) {
    const long bad = prompt ? cq_utf8_invalid_at(prompt) : -1;
    if (bad >= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "the %s is not valid UTF-8 (byte %ld of %zu)", what, bad + 1, strlen(prompt));
    cq_tokens ids = {0};
    cq_status s = tokenize_prompt(p, prompt, &ids);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    const int total = (int)ids.n, rows = total - p->drop_idx;
    cq_tokens_free(&ids);
    if (p->tcfg.max_positions > 0 && total > p->tcfg.max_positions)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "the %s is too long: with the pipeline's template it is %d tokens, and the text encoder reads "
                       "at most %d (its max_position_embeddings)",
                       what, total, p->tcfg.max_positions);
    return cq_qi21_check_positions(what, rows, lat_h > lat_w ? lat_h : lat_w, width, height);
}

cq_status cq_qi21_check_positions(const char *what, int rows, int sides, int width, int height) {
    /* RoPE: each text row takes one frame position, each image its longer side (cq_qi21_layout_sizes) */
    const int room = cq_qi21_max_position() - sides;
    if (rows > room)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "the %s is too long: with the pipeline's template it takes %d positions of the denoiser's "
                       "sequence, and at %dx%d there is room for %d (its RoPE table ends at position %d; the "
                       "images take %d)",
                       what, rows, width, height, room < 0 ? 0 : room, cq_qi21_max_position(), sides);
    return CQ_OK;
}

/* Largest square side (a multiple of 32, at most `side`) whose schedule is finite, or 0. */
static int largest_schedulable_side(const cq_flow_config *c, int steps, int side) {
    for (int s = side / 32 * 32; s >= 32; s -= 32) {
        cq_flow_schedule sch = {0};
        const int64_t t = (int64_t)(s / 16) * (s / 16);
        const bool ok = cq_flow_schedule_make(c, steps, t, &sch) == CQ_OK;
        cq_flow_schedule_free(&sch);
        if (ok) return s;
    }
    cq_clear_error();
    return 0;
}

cq_status cq_qi21_check_common(cq_qi21_pipe *p, const cq_qi21_gen_opts *o) {
    int lat_w, lat_h;
    CQ_TRY(cq_qi21_latent_grid(o->width, o->height, &lat_w, &lat_h));
    if (lat_w > cq_qi21_max_side() || lat_h > cq_qi21_max_side())
        return cq_fail(CQ_ERR_INVALID_ARG, "image size %dx%d: the denoiser's position tables allow sides up to %d pixels",
                       o->width, o->height, cq_qi21_max_side() * 16);
    if (o->steps < 2 || o->steps > 1000)
        return cq_fail(CQ_ERR_INVALID_ARG, "steps must be in [2, 1000] (got %d): the reference schedule is not finite for "
                       "one step", o->steps);
    if (!(o->guidance >= 0.0 && o->guidance <= 100.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "guidance %g is out of range [0, 100]", o->guidance);
    const int64_t T = (int64_t)lat_h * lat_w;
    cq_flow_schedule sch = {0};
    cq_status s = cq_flow_schedule_make(&p->sched, o->steps, T, &sch);
    cq_flow_schedule_free(&sch);
    if (s == CQ_ERR_NUMERIC) {
        const double mu = cq_flow_mu(&p->sched, T);
        const int best = largest_schedulable_side(&p->sched, o->steps, o->width > o->height ? o->width : o->height);
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "image size %dx%d (%lld latent tokens) is beyond what this model's scheduler can represent: "
                       "its dynamic shift (mu %.1f) rounds every sigma to 1 in float32, so the schedule is not finite; "
                       "the largest square size it schedules at %d steps is %dx%d",
                       o->width, o->height, (long long)T, mu, o->steps, best, best);
    }
    return s;
}

cq_status cq_qi21_pipe_check(cq_qi21_pipe *p, const cq_qi21_gen_opts *o) {
    if (!p || !o) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: no pipeline or options");
    if (o->n_images != 0) return cq_qi21_cond_check(p, o);
    CQ_TRY(cq_qi21_check_common(p, o));
    int lat_w, lat_h;
    CQ_TRY(cq_qi21_latent_grid(o->width, o->height, &lat_w, &lat_h));
    CQ_TRY(check_prompt(p, "prompt", o->prompt, o->width, o->height, lat_h, lat_w));
    if (o->negative && o->guidance > 1.0)
        CQ_TRY(check_prompt(p, "negative prompt", o->negative, o->width, o->height, lat_h, lat_w));
    return CQ_OK;
}

void cq_qi21_result_free(cq_qi21_result *r) { cq_image_result_free(r); }

cq_image_job cq_qi21_job(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, const cq_text_encoder *te,
                         const cq_denoiser *dn, int width, int height, bool cfg) {
    int lat_w = 0, lat_h = 0;
    (void)cq_qi21_latent_grid(width, height, &lat_w, &lat_h); /* the size was checked by the caller */
    return (cq_image_job){
        .te = te,
        .dn = dn,
        .codec = &p->codec,
        .sched = &p->sched,
        .timestep = {.kind = CQ_FLOW_T_SIGMA},
        .guidance = {.kind = cfg ? CQ_GUIDANCE_CFG : CQ_GUIDANCE_NONE, .scale = o->guidance},
        .prompt = o->prompt,
        .negative = o->negative,
        .width = width,
        .height = height,
        .lat_w = lat_w,
        .lat_h = lat_h,
        .tokens = lat_h * lat_w,
        .steps = o->steps,
        .seed = o->seed,
        .noise_dtype = o->noise_bf16 ? CQ_TORCH_BF16 : CQ_TORCH_F32,
        .on_step = o->on_step,
        .on_latents = o->on_latents,
        .on_phase = o->on_phase,
        .user = o->user,
        .stage = cq_resid_gen_stage,
        .stage_user = &p->resid,
    };
}

cq_status cq_qi21_pipe_generate(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_result *res) {
    memset(res, 0, sizeof *res);
    if (!p || !p->be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are not loaded");
    if (o->n_images != 0) return cq_qi21_cond_generate(p, o, res);
    CQ_TRY(cq_qi21_pipe_check(p, o));
    CQ_TRY(cq_check_cancel("image generation"));
    const bool cfg = cq_true_cfg_wanted(o->guidance, o->negative);
    /* the plan for this request: the longer prompt's rows and the image's tokens */
    int total = 0, rows = 0, nt = 0, nr = 0;
    CQ_TRY(cq_qi21_pipe_prompt_tokens(p, o->prompt, &total, &rows));
    if (cfg) CQ_TRY(cq_qi21_pipe_prompt_tokens(p, o->negative, &nt, &nr));
    CQ_TRY(cq_qi21_plan_request(p, o->width, o->height, 0, total > nt ? total : nt, rows > nr ? rows : nr));
    /* the codec is bound in every phase; the denoiser's entries are read after the PREFILL stage binds it */
    CQ_TRY(cq_resid_stage(&p->resid, CQ_RESID_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    p->dn.channels = p->dcfg.in_channels;
    /* the schedule's defaults are the reference's: timestep / 1000 in float32 on the CPU, true CFG
     * without renormalisation or truncation, float32 noise unless asked otherwise */
    const cq_image_job j = cq_qi21_job(p, o, &te, &p->dn, o->width, o->height, cfg);
    return cq_image_job_run(&j, res);
}
