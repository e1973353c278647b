/*
 * qi21_pipe.c — the Qwen-Image-2.1 text-to-image pipeline (see qi21_pipe.h).
 *
 * Order of operations and precision follow diffusers' QwenImage21Pipeline run
 * in float32 on the CPU, so that the same seed gives the same latents:
 *  - the prompt goes into the pipeline's fixed template (not the chat
 *    template); an empty prompt becomes " ";
 *  - the number of rows to drop is the token count of the processor's chat
 *    template rendered for the system turn alone;
 *  - noise: torch.randn((1, 1, C, h, w)) from a CPU generator seeded with the
 *    seed, packed to tokens;
 *  - schedule: linspace(1, 1/N, N), dynamic shift from the token count,
 *    terminal stretch, final 0; the denoiser sees timestep / 1000;
 *  - Euler step and true CFG in float32 with each operation rounded;
 *  - latents * std + mean, VAE decode, clamp to [-1, 1].
 */
#include "pipelines/qi21_pipe.h"

#include <cJSON.h>
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "models/qi21.h"
#include "models/qwen3.h"
#include "models/qi21_vae.h"
#include "pipelines/latents.h"
#include "pipelines/schedule.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define QI21_SYSTEM_PROMPT "Comprehend and analyze the provided prompt."

struct cq_qi21_pipe {
    const cq_cmf *cmf;
    cq_qi21_config dcfg;   /* the denoiser's and the text tower's configs, read at open */
    cq_qwen3_config tcfg;
    cq_backend *be;
    cq_tokenizer *tok;
    cq_qwen3 *te;
    cq_qi21 *dit;
    cq_qi21_vae *vae;
    cq_flow_config sched;
    int drop_idx;          /* leading rows of the text tower's output that are dropped */
    int32_t image_pad_id;  /* <|image_pad|>: not allowed in a text-to-image prompt */
};

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
    if (s == CQ_OK) {
        p->image_pad_id = cq_tokenizer_token_to_id(p->tok, "<|image_pad|>", 13);
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

cq_status cq_qi21_pipe_load_weights(cq_qi21_pipe *p, cq_backend *be) {
    if (!p || !be) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: no pipeline or backend");
    if (p->te) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are already loaded");
    const cq_cmf *cmf = p->cmf;
    p->be = be;
    cq_status s = cq_qwen3_load(cmf, "te.", be, &p->te);
    if (s == CQ_OK) s = cq_qi21_load(cmf, "dit.", be, &p->dit);
    /* an op the backend lacks (the VAE's convolutions, say) runs on its host backend (ops/fallback.c) */
    if (s == CQ_OK) s = cq_qi21_vae_load(cmf, "vae.", be, &p->vae);
    if (s == CQ_OK) {
        const cq_qi21_config *dc = cq_qi21_get_config(p->dit);
        const cq_qi21_vae_config *vc = cq_qi21_vae_get_config(p->vae);
        if (dc->in_channels != vc->z_dim || dc->out_channels != vc->z_dim)
            s = cq_fail(CQ_ERR_SHAPE, "qi21 pipeline: the denoiser has %d/%d latent channels, the VAE %d",
                        dc->in_channels, dc->out_channels, vc->z_dim);
    }
    if (s != CQ_OK) {
        cq_qi21_vae_free(p->vae);
        cq_qi21_free(p->dit);
        cq_qwen3_free(p->te);
        p->vae = NULL;
        p->dit = NULL;
        p->te = NULL;
    }
    return s;
}

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
    cq_qi21_vae_free(p->vae);
    cq_qi21_free(p->dit);
    cq_qwen3_free(p->te);
    cq_tokenizer_free(p->tok);
    cq_free(p);
}

/* ------------------------------------------------------------------------ */
/* The prompt in the pipeline's template, tokenized; refuses what the text tower must not read. */
static cq_status tokenize_prompt(cq_qi21_pipe *p, const char *prompt, cq_tokens *ids) {
    if (!prompt || !*prompt) prompt = " "; /* Qwen has no BOS: an empty prompt leaves nothing to read */
    static const char head[] = "<|im_start|>system\n" QI21_SYSTEM_PROMPT "<|im_end|>\n<|im_start|>user\n";
    static const char tail[] = "<|im_end|>\n<|im_start|>assistant\n";
    size_t pl = strlen(prompt), n = sizeof head - 1 + pl + sizeof tail - 1;
    char *text = cq_malloc(n + 1);
    if (!text) return CQ_ERR_NOMEM;
    memcpy(text, head, sizeof head - 1);
    memcpy(text + sizeof head - 1, prompt, pl);
    memcpy(text + sizeof head - 1 + pl, tail, sizeof tail);
    cq_status s = cq_tokenizer_encode(p->tok, text, n, CQ_TOK_ADD_SPECIAL, ids);
    cq_free(text);
    if (s != CQ_OK) {
        cq_tokens_free(ids); /* a failed encode leaves its buffer to the caller */
        return s;
    }
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] == p->image_pad_id) {
            cq_tokens_free(ids);
            return cq_fail(CQ_ERR_INVALID_ARG, "the prompt contains <|image_pad|>, a placeholder for a condition image; "
                           "text-to-image prompts cannot hold one");
        }
    if ((int64_t)ids->n <= p->drop_idx) {
        cq_tokens_free(ids);
        return cq_fail(CQ_ERR_INTERNAL, "qi21 pipeline: the prompt has no tokens after the system turn");
    }
    return CQ_OK;
}

cq_status cq_qi21_pipe_prompt_tokens(cq_qi21_pipe *p, const char *prompt, int *total, int *rows) {
    *total = *rows = 0;
    cq_tokens ids = {0};
    CQ_TRY(tokenize_prompt(p, prompt, &ids));
    *total = (int)ids.n;
    *rows = (int)ids.n - p->drop_idx;
    cq_tokens_free(&ids);
    return CQ_OK;
}

cq_status cq_qi21_pipe_encode_prompt(cq_qi21_pipe *p, const char *prompt, float **embeds, int *n_rows) {
    *embeds = NULL;
    *n_rows = 0;
    if (!p->te) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are not loaded");
    cq_tokens ids = {0};
    CQ_TRY(tokenize_prompt(p, prompt, &ids));
    const cq_qwen3_config *tc = cq_qwen3_get_config(p->te);
    int total = (int)ids.n, rows = total - p->drop_idx;
    float *all = cq_mallocn((size_t)total * tc->hidden, sizeof(float));
    if (!all) {
        cq_tokens_free(&ids);
        return CQ_ERR_NOMEM;
    }
    /* the last decoder layer's output, before the final norm */
    cq_qwen3_outputs o = {.layer = tc->n_layers, .hidden = all};
    cq_status s = cq_qwen3_forward(p->te, ids.ids, total, &o);
    cq_tokens_free(&ids);
    if (s != CQ_OK) {
        cq_free(all);
        return s;
    }
    memmove(all, all + (size_t)p->drop_idx * tc->hidden, (size_t)rows * tc->hidden * sizeof(float));
    *embeds = all;
    *n_rows = rows;
    return CQ_OK;
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
    /* RoPE: each text row takes one frame position, the image its longer side (cq_qi21_layout_sizes) */
    const int side = lat_h > lat_w ? lat_h : lat_w, room = cq_qi21_max_position() - side;
    if (rows > room)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "the %s is too long: with the pipeline's template it takes %d positions of the denoiser's "
                       "sequence, and at %dx%d there is room for %d (its RoPE table ends at position %d; the image "
                       "takes %d)",
                       what, rows, width, height, room < 0 ? 0 : room, cq_qi21_max_position(), side);
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

cq_status cq_qi21_pipe_check(cq_qi21_pipe *p, const cq_qi21_gen_opts *o) {
    if (!p || !o) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: no pipeline or options");
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
    CQ_TRY(s);
    CQ_TRY(check_prompt(p, "prompt", o->prompt, o->width, o->height, lat_h, lat_w));
    if (o->negative && o->guidance > 1.0)
        CQ_TRY(check_prompt(p, "negative prompt", o->negative, o->width, o->height, lat_h, lat_w));
    return CQ_OK;
}

/* A prefill for one prompt: layout (text rows, then the target's slots). */
static void phase(const cq_qi21_gen_opts *o, cq_qi21_phase ph) {
    if (o->on_phase) o->on_phase(ph, o->user);
}

static cq_status prefill_prompt(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, const char *prompt, int lat_h, int lat_w,
                                cq_qi21_cache **cache, cq_qi21_timings *t) {
    float *emb;
    int rows;
    phase(o, CQ_QI21_PHASE_TEXT);
    double a = cq_now();
    CQ_TRY(cq_qi21_pipe_encode_prompt(p, prompt, &emb, &rows));
    phase(o, CQ_QI21_PHASE_PREFILL);
    double b = cq_now();
    t->text += b - a;
    int slots = lat_h * lat_w / 4, vlm = rows + slots;
    uint8_t *mask = cq_calloc((size_t)vlm, 1);
    if (!mask) {
        cq_free(emb);
        return CQ_ERR_NOMEM;
    }
    memset(mask + rows, 1, (size_t)slots);
    const int32_t shapes[1][3] = {{1, lat_h, lat_w}};
    cq_qi21_layout lay = {.vlm_len = vlm, .img_mask = mask, .n_images = 1, .img_shapes = shapes};
    cq_status s = cq_qi21_prefill(p->dit, &lay, emb, NULL, cache);
    t->prefill += cq_now() - b;
    cq_free(mask);
    cq_free(emb);
    return s;
}

void cq_qi21_result_free(cq_qi21_result *r) {
    if (!r) return;
    cq_free(r->image);
    cq_free(r->latents);
    memset(r, 0, sizeof *r);
}

cq_status cq_qi21_pipe_generate(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_result *res) {
    memset(res, 0, sizeof *res);
    if (!p || !p->dit) return cq_fail(CQ_ERR_INVALID_ARG, "qi21 pipeline: the weights are not loaded");
    CQ_TRY(cq_qi21_pipe_check(p, o));
    CQ_TRY(cq_check_cancel("image generation"));
    int lat_w, lat_h;
    CQ_TRY(cq_qi21_latent_grid(o->width, o->height, &lat_w, &lat_h));
    const cq_qi21_config *dc = cq_qi21_get_config(p->dit);
    const cq_qi21_vae_config *vc = cq_qi21_vae_get_config(p->vae);
    const int C = dc->in_channels, T = lat_h * lat_w;
    bool cfg = o->guidance > 1.0 && o->negative != NULL;
    if (o->guidance > 1.0 && !o->negative)
        CQ_WARN("guidance %g needs a negative prompt (--negative); running without classifier-free guidance", o->guidance);
    if (o->guidance <= 1.0 && o->negative)
        CQ_WARN("a negative prompt is used only when guidance > 1; ignoring it");

    cq_status s = CQ_OK;
    cq_flow_schedule sch = {0};
    cq_qi21_cache *pos = NULL, *neg = NULL;
    float *x = cq_mallocn((size_t)T * C, sizeof(float));
    float *v = cq_mallocn((size_t)T * C, sizeof(float));
    float *vn = cfg ? cq_mallocn((size_t)T * C, sizeof(float)) : NULL;
    float *z = cq_mallocn((size_t)T * C, sizeof(float));
    if (!x || !v || !z || (cfg && !vn)) s = CQ_ERR_NOMEM;

    if (s == CQ_OK)
        s = cq_qi21_initial_latents(o->seed, o->noise_bf16 ? CQ_TORCH_BF16 : CQ_TORCH_F32,
                                      cq_torch_f32_kernel_native(), 1, C, lat_h, lat_w, x);
    if (s == CQ_OK) s = cq_flow_schedule_make(&p->sched, o->steps, T, &sch);
    /* text tower + prefill, once per prompt */
    if (s == CQ_OK) s = prefill_prompt(p, o, o->prompt, lat_h, lat_w, &pos, &res->t);
    if (s == CQ_OK && cfg) s = prefill_prompt(p, o, o->negative, lat_h, lat_w, &neg, &res->t);
    if (s == CQ_OK) phase(o, CQ_QI21_PHASE_STEPS);
    double t_steps = cq_now();
    for (int i = 0; s == CQ_OK && i < sch.steps; i++) {
        float tm = cq_flow_model_timestep(sch.timesteps[i], false, false);
        s = cq_qi21_step(p->dit, pos, x, tm, v);
        if (s == CQ_OK && cfg) {
            s = cq_qi21_step(p->dit, neg, x, tm, vn);
            if (s == CQ_OK) cq_flow_cfg_combine(v, v, vn, (size_t)T * C, o->guidance);
        }
        if (s == CQ_OK) {
            for (size_t k = 0; k < (size_t)T * C; k++)
                if (!isfinite(v[k])) {
                    s = cq_fail(CQ_ERR_NUMERIC, "the denoiser produced a non-finite value at step %d", i + 1);
                    break;
                }
        }
        if (s == CQ_OK) cq_flow_euler_step(x, v, (size_t)T * C, sch.sigmas[i], sch.sigmas[i + 1]);
        if (s == CQ_OK && o->on_step && o->on_step(i + 1, sch.steps, o->user))
            s = cq_fail(CQ_ERR_INTERRUPTED, "cancelled after step %d", i + 1);
        if (s == CQ_OK && cq_cancel_requested())
            s = cq_fail(CQ_ERR_INTERRUPTED, "interrupted after step %d of %d", i + 1, sch.steps);
    }
    t_steps = cq_now() - t_steps;
    /* latents -> the VAE's space: unpack to [C][h][w], then * std + mean per channel */
    if (s == CQ_OK) phase(o, CQ_QI21_PHASE_VAE);
    double t_vae = cq_now();
    if (s == CQ_OK) {
        cq_qi21_unpack_latents(x, z, 1, C, lat_h, lat_w);
        s = cq_qi21_vae_denormalize(p->vae, z, lat_h, lat_w, CQ_QI21_VAE_PLANAR);
        res->channels = vc->image_channels;
        res->image = cq_mallocn((size_t)vc->image_channels * (size_t)o->width * o->height, sizeof(float));
        if (s == CQ_OK && !res->image) s = CQ_ERR_NOMEM;
    }
    if (s == CQ_OK) s = cq_qi21_vae_decode(p->vae, z, lat_h, lat_w, CQ_QI21_VAE_PLANAR, res->image);
    t_vae = cq_now() - t_vae;
    if (s == CQ_OK) phase(o, CQ_QI21_PHASE_DONE);
    if (s == CQ_OK) {
        res->width = o->width;
        res->height = o->height;
        res->tokens = T;
        res->latent_channels = C;
        res->latents = x;
        x = NULL;
        res->t.steps = t_steps;
        res->t.vae = t_vae;
    } else {
        cq_qi21_result_free(res);
    }
    cq_qi21_cache_free(pos);
    cq_qi21_cache_free(neg);
    cq_flow_schedule_free(&sch);
    cq_free(x);
    cq_free(v);
    cq_free(vn);
    cq_free(z);
    return s;
}
