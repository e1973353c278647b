/*
 * zimage_pipe.c — the Z-Image text-to-image pipeline (see zimage_pipe.h).
 *
 * Order of operations and precision follow diffusers' ZImagePipeline run in
 * float32 on the CPU, so that the same seed gives the same latents:
 *  - the prompt (and, with guidance, the negative prompt, "" when none) is
 *    the content of one user message rendered with the tokenizer's chat
 *    template, add_generation_prompt=True, enable_thinking=True; tokenized
 *    with truncation at 512 (the closing template tokens of a longer prompt
 *    are lost, as in the reference, which pads to 512 on the right and keeps
 *    the masked rows: with a causal tower those equal an unpadded run);
 *  - the text tower's hidden_states[-2]: the output of decoder layer
 *    n_layers - 2 before the final norm (cq_qwen3_outputs.layer n_layers - 1);
 *  - noise: torch.randn((1, 16, H/8, W/8)) in float32 from a CPU generator
 *    seeded with the seed, patchified by the codec;
 *  - schedule: torch.linspace(1, 1/N, N) in float32, static shift
 *    s*x / (1 + (s-1)*x) in float32, a final 0; timesteps = sigma * 1000;
 *  - the denoiser sees (1000 - t) / 1000, its output is negated after the
 *    guidance; guidance pos + g (pos - neg) when g > 0, then the norm cap
 *    (cfg_normalization), dropped at steps whose (1000 - t) / 1000 exceeds
 *    cfg_truncation; Euler in float32;
 *  - latents / scaling + shift (the codec's denormalize), the VAE decode.
 */
#include "pipelines/zimage_pipe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "models/flux_vae.h"
#include "models/qwen3.h"
#include "models/qwen3_text.h"
#include "models/zimage.h"
#include "pipelines/residency.h"
#include "pipelines/schedule.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define NAME "z_image pipeline"

struct cq_zimage_pipe {
    const cq_cmf *cmf;
    cq_zimage_config dcfg; /* the denoiser's and the text tower's configs, read at open */
    cq_qwen3_config tcfg;
    cq_tokenizer *tok;
    cq_chat_template *tmpl;
    cq_qwen3_text text;    /* the text encoder: the tower behind the chat template */
    cq_backend *be;        /* the weights' backend (borrowed) */
    cq_qwen3 *te;
    cq_zimage *dit;
    cq_flux_vae *vae;
    cq_flow_config sched;  /* the scheduler config's shift */
    double pack_shift;     /* the pack's default shift, 0 when it has none */
    cq_resid resid;        /* what is bound per phase under the backend's budget (residency.h) */
    cq_resid_need need;    /* the parts' device costs (activations per request) */
    cq_denoiser dn;        /* the bound parts as components (filled by bind) */
    cq_latent_codec codec;
};

void cq_zimage_gen_opts_init(cq_zimage_gen_opts *o) { *o = (cq_zimage_gen_opts){.cfg_truncation = 1.0}; }

/* ------------------------------------------------------------------------ */
static cq_status load_scheduler(cq_zimage_pipe *p, const cq_cmf *cmf) {
    const cq_tensor_view *v = cq_cmf_find(cmf, "scheduler.config_json");
    if (!v) return cq_fail(CQ_ERR_MISSING, NAME ": the file has no scheduler.config_json (convert the pipeline folder "
                           "with its scheduler/)");
    CQ_TRY(cq_cmf_check_tensor(v));
    CQ_TRY(cq_flow_config_parse((const char *)v->data, (size_t)v->nbytes, &p->sched));
    if (p->sched.use_dynamic_shifting)
        return cq_fail(CQ_ERR_UNSUPPORTED, NAME ": the scheduler config asks for dynamic shifting; Z-Image's "
                       "scheduler shifts statically (use_dynamic_shifting false)");
    if (p->sched.shift_terminal != 0.0)
        return cq_fail(CQ_ERR_UNSUPPORTED, NAME ": the scheduler config sets shift_terminal %g; Z-Image's has none",
                       p->sched.shift_terminal);
    if (!(p->sched.shift > 0.0 && p->sched.shift <= CQ_GEN_SHIFT_MAX))
        return cq_fail(CQ_ERR_PARSE, NAME ": the scheduler config's shift %g is outside (0, %g]", p->sched.shift,
                       CQ_GEN_SHIFT_MAX);
    p->sched.sigmas = CQ_FLOW_SIGMAS_TORCH_F32;
    cq_gen_defaults d;
    CQ_TRY(cq_cmf_gen_defaults(cmf, &d));
    p->pack_shift = d.has_shift ? d.shift : 0.0;
    cq_gen_defaults_free(&d);
    return CQ_OK;
}

cq_status cq_zimage_pipe_open(const cq_cmf *cmf, cq_zimage_pipe **out) {
    *out = NULL;
    cq_zimage_pipe *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    p->cmf = cmf;
    size_t tl = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    const char *ct = cq_cmf_chat_template(cmf);
    cq_status s = CQ_OK;
    if (!tj) s = cq_fail(CQ_ERR_MISSING, NAME ": the file has no tokenizer section");
    else if (!ct)
        s = cq_fail(CQ_ERR_MISSING, NAME ": the file has no chat template (convert the pipeline folder with its "
                    "tokenizer/, whose tokenizer_config.json holds it): the prompt is rendered with it");
    if (s == CQ_OK) s = cq_tokenizer_load(tj, tl, &p->tok);
    if (s == CQ_OK) s = cq_chat_template_compile(ct, strlen(ct), &p->tmpl);
    if (s == CQ_OK) s = cq_qwen3_parse_config(cmf, "te.", &p->tcfg);
    if (s == CQ_OK) s = cq_zimage_parse_config(cmf, "dit.", &p->dcfg);
    if (s == CQ_OK) s = load_scheduler(p, cmf);
    if (s == CQ_OK && p->tcfg.n_layers < 2)
        s = cq_fail(CQ_ERR_UNSUPPORTED, NAME ": the text tower has %d layer; Z-Image reads the layer before the last",
                    p->tcfg.n_layers);
    if (s == CQ_OK && p->dcfg.cap_feat_dim != p->tcfg.hidden)
        s = cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser reads %d-wide caption rows but the text tower is %d wide",
                    p->dcfg.cap_feat_dim, p->tcfg.hidden);
    if (s == CQ_OK)
        p->text = (cq_qwen3_text){
            .name = NAME,
            .tok = p->tok,
            .layer = p->tcfg.n_layers - 1, /* hidden_states[-2] */
            .tmpl = {.chat = p->tmpl, .enable_thinking = 1, .max_tokens = CQ_ZIMAGE_MAX_TOKENS, .forbid_id = -1}};
    if (s != CQ_OK) {
        cq_zimage_pipe_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}

/* ---- the parts, bound and released per phase (residency.h) ---- */
static cq_status bind_part(void *pipe, cq_part part) {
    cq_zimage_pipe *p = pipe;
    switch (part) {
    case CQ_PART_TEXT:
        /* the text tower up to the layer it returns: a pack may leave the rest out */
        CQ_TRY(cq_qwen3_load_encoder(p->cmf, "te.", p->be, p->text.layer, &p->te));
        p->text.model = p->te;
        return CQ_OK;
    case CQ_PART_DENOISER:
        CQ_TRY(cq_zimage_load(p->cmf, "dit.", p->be, &p->dit));
        p->dn = cq_zimage_denoiser(p->dit);
        return CQ_OK;
    case CQ_PART_CODEC: {
        /* an op the backend lacks runs on its host backend (ops/fallback.c) */
        CQ_TRY(cq_flux_vae_load(p->cmf, "vae.", p->be, &p->vae));
        const cq_latent_codec codec = cq_flux_vae_codec(p->vae);
        if (codec.channels != p->dcfg.in_channels || p->dcfg.patch_channels != 4 * codec.channels) {
            cq_flux_vae_free(p->vae);
            p->vae = NULL;
            return cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser has %d latent channels (%d per token), the VAE %d",
                           p->dcfg.in_channels, p->dcfg.patch_channels, codec.channels);
        }
        p->codec = codec;
        return CQ_OK;
    }
    default: return cq_fail(CQ_ERR_INTERNAL, NAME ": no part %d", (int)part);
    }
}

static void release_part(void *pipe, cq_part part) {
    cq_zimage_pipe *p = pipe;
    if (part == CQ_PART_TEXT) {
        cq_qwen3_free(p->te);
        p->te = NULL;
        p->text.model = NULL;
    } else if (part == CQ_PART_DENOISER) {
        cq_zimage_free(p->dit);
        p->dit = NULL;
        p->dn.self = NULL;
    } else if (part == CQ_PART_CODEC) {
        cq_flux_vae_free(p->vae);
        p->vae = NULL;
        p->codec.self = NULL;
    }
}

static const cq_resid_ops k_parts = {bind_part, release_part};

static void drop_weights(cq_zimage_pipe *p) {
    if (p->be) cq_resid_release_all(&p->resid);
    p->be = NULL;
}

/* The backend the weights go to: the first call sets it, later ones must name the same. */
static cq_status use_backend(cq_zimage_pipe *p, cq_backend *be) {
    if (!p || !be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": no pipeline or backend");
    if (p->be && p->be != be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the text tower is on another backend");
    if (!p->be) {
        p->be = be;
        cq_resid_init(&p->resid, be, &k_parts, p);
    }
    return CQ_OK;
}

cq_status cq_zimage_pipe_load_text(cq_zimage_pipe *p, cq_backend *be) {
    CQ_TRY(use_backend(p, be));
    return cq_resid_ensure(&p->resid, CQ_PART_TEXT);
}

/* The plan for a width x height image and a caption of `total` tokens. */
static cq_status plan_request(cq_zimage_pipe *p, int width, int height, int total) {
    const int64_t tokens = (int64_t)(width / 16) * (height / 16);
    cq_resid_request_acts(&p->need, cq_act_dtype_size(cq_backend_act_dtype(p->be)), total, p->tcfg.hidden,
                          p->tcfg.intermediate, tokens + total, p->dcfg.dim, p->dcfg.ffn_hidden, (int64_t)width * height);
    return cq_resid_replan(&p->resid, &p->need, "Z-Image");
}

/* The load's plan: a 128-token caption (16 for the smallest request). */
static cq_status plan_for(void *pipe, int width, int height, bool smallest) {
    return plan_request(pipe, width, height, smallest ? 16 : 128);
}

cq_status cq_zimage_pipe_load_weights(cq_zimage_pipe *p, cq_backend *be) {
    if (p && p->dit) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are already loaded");
    CQ_TRY(use_backend(p, be));
    cq_status s = cq_resid_load(&p->resid, &p->need, p->cmf, plan_for, p);
    if (s != CQ_OK) drop_weights(p);
    return s;
}

cq_status cq_zimage_pipe_set_plan(cq_zimage_pipe *p, const cq_resid_plan *plan) {
    if (!p || !p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    cq_resid_set_plan(&p->resid, plan);
    return CQ_OK;
}

const cq_resid *cq_zimage_pipe_residency(const cq_zimage_pipe *p) { return p ? &p->resid : NULL; }

const cq_resid_need *cq_zimage_pipe_need(const cq_zimage_pipe *p) { return p ? &p->need : NULL; }

void cq_zimage_pipe_free(cq_zimage_pipe *p) {
    if (!p) return;
    drop_weights(p);
    cq_chat_template_free(p->tmpl);
    cq_tokenizer_free(p->tok);
    cq_free(p);
}

/* ------------------------------------------------------------------------ */
cq_status cq_zimage_pipe_prompt_tokens(cq_zimage_pipe *p, const char *prompt, int *total, int *full) {
    cq_tokens ids = {0};
    int f = 0;
    CQ_TRY(cq_qwen3_text_tokenize(&p->text, prompt, &ids, &f));
    *total = (int)ids.n;
    if (full) *full = f;
    cq_tokens_free(&ids);
    return CQ_OK;
}

cq_status cq_zimage_pipe_encode_prompt(cq_zimage_pipe *p, const char *prompt, float **embeds, int *n_rows) {
    *embeds = NULL;
    *n_rows = 0;
    if (!p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the text tower is not loaded");
    CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    return te.encode(te.self, prompt, embeds, n_rows);
}

static cq_flow_config schedule_config(const cq_zimage_pipe *p, const cq_zimage_gen_opts *o) {
    cq_flow_config c = p->sched;
    if (o->shift > 0.0) c.shift = o->shift;
    else if (p->pack_shift > 0.0) c.shift = p->pack_shift;
    return c;
}

cq_status cq_zimage_pipe_schedule(cq_zimage_pipe *p, const cq_zimage_gen_opts *o, cq_flow_schedule *out) {
    const cq_flow_config c = schedule_config(p, o);
    const int64_t tokens = (int64_t)(o->height / 16) * (o->width / 16);
    return cq_flow_schedule_make(&c, o->steps, tokens > 0 ? tokens : 1, out);
}

static cq_status check_prompt(cq_zimage_pipe *p, const char *what, const char *prompt, int lat_h, int lat_w) {
    const long bad = prompt ? cq_utf8_invalid_at(prompt) : -1;
    if (bad >= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "the %s is not valid UTF-8 (byte %ld of %zu)", what, bad + 1, strlen(prompt));
    int total = 0;
    cq_status s = cq_zimage_pipe_prompt_tokens(p, prompt, &total, NULL);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    /* the caption's and the image's RoPE positions against the denoiser's tables */
    cq_zimage_layout lay;
    s = cq_zimage_layout_for(&p->dcfg, total, lat_h, lat_w, &lay);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s (%d tokens with the template): ", what, total);
    return CQ_OK;
}

cq_status cq_zimage_pipe_check(cq_zimage_pipe *p, const cq_zimage_gen_opts *o) {
    if (!p || !o) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": no pipeline or options");
    if (o->width < 16 || o->height < 16 || o->width > CQ_GEN_SIDE_MAX || o->height > CQ_GEN_SIDE_MAX ||
        o->width % 16 || o->height % 16)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "image size %dx%d: Z-Image draws sides that are multiples of 16 in [16, %d] (each 2x2 patch "
                       "of 8-pixel latents is one token; the reference refuses other sizes)",
                       o->width, o->height, CQ_GEN_SIDE_MAX);
    if (o->steps < 1 || o->steps > 1000) return cq_fail(CQ_ERR_INVALID_ARG, "steps must be in [1, 1000] (got %d)", o->steps);
    if (!(o->guidance >= 0.0 && o->guidance <= 100.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "guidance %g is out of range [0, 100] (Z-Image: pos + g (pos - neg); 0 is off)",
                       o->guidance);
    if (!(o->cfg_normalization >= 0.0 && o->cfg_normalization <= 100.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "--cfg-normalization %g is out of range [0, 100] (0: off)", o->cfg_normalization);
    if (!isfinite(o->cfg_truncation))
        return cq_fail(CQ_ERR_INVALID_ARG, "--cfg-truncation %g is not a finite number", o->cfg_truncation);
    if (!(o->shift >= 0.0 && o->shift <= CQ_GEN_SHIFT_MAX))
        return cq_fail(CQ_ERR_INVALID_ARG, "--shift %g is out of range (0, %g]", o->shift, CQ_GEN_SHIFT_MAX);
    cq_flow_schedule sch = {0};
    cq_status s = cq_zimage_pipe_schedule(p, o, &sch);
    cq_flow_schedule_free(&sch);
    CQ_TRY(s);
    const int lat_h = o->height / 8, lat_w = o->width / 8;
    CQ_TRY(check_prompt(p, "prompt", o->prompt, lat_h, lat_w));
    if (o->guidance > 0.0) CQ_TRY(check_prompt(p, "negative prompt", o->negative ? o->negative : "", lat_h, lat_w));
    return CQ_OK;
}

cq_status cq_zimage_pipe_generate(cq_zimage_pipe *p, const cq_zimage_gen_opts *o, cq_image_result *res) {
    memset(res, 0, sizeof *res);
    CQ_TRY(cq_zimage_pipe_check(p, o));
    if (!p->be || !p->resid.bound[CQ_PART_CODEC])
        return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    CQ_TRY(cq_check_cancel("image generation"));
    const bool cfg = o->guidance > 0.0;
    if (!cfg && o->negative && *o->negative)
        CQ_WARN("a negative prompt is used only with guidance > 0 (Z-Image: pos + g (pos - neg)); ignoring it");
    /* the plan for this request: the longer caption and the image's tokens */
    int total = 0, nt = 0;
    CQ_TRY(cq_zimage_pipe_prompt_tokens(p, o->prompt, &total, NULL));
    if (cfg) CQ_TRY(cq_zimage_pipe_prompt_tokens(p, o->negative ? o->negative : "", &nt, NULL));
    CQ_TRY(plan_request(p, o->width, o->height, total > nt ? total : nt));
    /* the codec is bound in every phase; the denoiser's entries are read after the PREFILL stage binds it */
    CQ_TRY(cq_resid_stage(&p->resid, CQ_RESID_TEXT));
    const cq_text_encoder te = cq_qwen3_text_encoder(&p->text);
    p->dn.channels = p->dcfg.patch_channels;
    const cq_latent_codec codec = p->codec;
    const cq_flow_config sched = schedule_config(p, o);
    cq_guidance g = {.kind = CQ_GUIDANCE_NONE};
    if (cfg) {
        g = (cq_guidance){.kind = CQ_GUIDANCE_CFG_POS, .scale = o->guidance, .truncate = true,
                          .truncate_after = o->cfg_truncation};
        if (o->cfg_normalization > 0.0) {
            g.norm = CQ_GUIDANCE_NORM_CAP;
            g.norm_cap = o->cfg_normalization;
        }
    }
    const int lat_h = o->height / codec.factor, lat_w = o->width / codec.factor;
    const cq_image_job j = {
        .te = &te,
        .dn = &p->dn,
        .codec = &p->codec,
        .sched = &sched,
        .timestep = {.kind = CQ_FLOW_T_ONE_MINUS}, /* (1000 - t) / 1000 in float32 on the CPU */
        .negate = true,
        .guidance = g,
        .prompt = o->prompt,
        .negative = o->negative ? o->negative : "",
        .width = o->width,
        .height = o->height,
        .lat_w = lat_w,
        .lat_h = lat_h,
        .tokens = (lat_h / 2) * (lat_w / 2),
        .steps = o->steps,
        .seed = o->seed,
        .noise_dtype = CQ_TORCH_F32, /* float32 even in a bf16 pipeline */
        .on_step = o->on_step,
        .on_phase = o->on_phase,
        .user = o->user,
        .stage = cq_resid_gen_stage,
        .stage_user = &p->resid,
    };
    return cq_image_job_run(&j, res);
}
