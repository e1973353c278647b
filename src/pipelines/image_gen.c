/*
 * image_gen.c — text to image over the component interfaces (see
 * image_gen.h). The order of the work is the reference pipelines' order, so
 * each model's results are those of its own reference.
 */
#include "pipelines/image_gen.h"

#include <string.h>

#include "base/base.h"
#include "pipelines/latents.h"

void cq_image_result_free(cq_image_result *r) {
    if (!r) return;
    cq_free(r->image);
    cq_free(r->latents);
    memset(r, 0, sizeof *r);
}

static void phase(const cq_image_job *j, cq_gen_phase ph) {
    if (j->on_phase) j->on_phase(ph, j->user);
}

static cq_status stage(const cq_image_job *j, cq_gen_phase ph) {
    return j->stage ? j->stage(ph, j->stage_user) : CQ_OK;
}

/* every prompt through the text encoder (rows[i], n_rows[i]), then each through the denoiser's prepare */
static cq_status condition(const cq_image_job *j, int n, const char *const *prompts, void **cond, cq_gen_timings *t) {
    float *rows[2] = {NULL, NULL};
    int n_rows[2] = {0, 0};
    CQ_TRY(stage(j, CQ_GEN_PHASE_TEXT));
    phase(j, CQ_GEN_PHASE_TEXT);
    double a = cq_now();
    cq_status s = CQ_OK;
    for (int i = 0; i < n && s == CQ_OK; i++) s = j->te->encode(j->te->self, prompts[i], &rows[i], &n_rows[i]);
    t->text += cq_now() - a;
    if (s == CQ_OK) s = stage(j, CQ_GEN_PHASE_PREFILL);
    if (s == CQ_OK) phase(j, CQ_GEN_PHASE_PREFILL);
    double b = cq_now();
    for (int i = 0; i < n && s == CQ_OK; i++) s = j->dn->prepare(j->dn->self, rows[i], n_rows[i], j->lat_h, j->lat_w, &cond[i]);
    t->prefill += cq_now() - b;
    for (int i = 0; i < n; i++) cq_free(rows[i]);
    return s;
}

static cq_status check_job(const cq_image_job *j) {
    if (!j || !j->te || !j->dn || !j->codec || !j->sched)
        return cq_fail(CQ_ERR_INVALID_ARG, "image generation: missing a component or the schedule");
    if (j->lat_w < 1 || j->lat_h < 1 || j->tokens < 1 || j->width != j->lat_w * j->codec->factor ||
        j->height != j->lat_h * j->codec->factor)
        return cq_fail(CQ_ERR_INVALID_ARG, "image generation: %dx%d pixels do not match a %dx%d latent grid", j->width,
                       j->height, j->lat_w, j->lat_h);
    if ((size_t)j->tokens * (size_t)j->dn->channels != (size_t)j->lat_w * j->lat_h * (size_t)j->codec->channels)
        return cq_fail(CQ_ERR_SHAPE, "image generation: %d tokens of %d channels do not hold %dx%dx%d latents",
                       j->tokens, j->dn->channels, j->codec->channels, j->lat_h, j->lat_w);
    return CQ_OK;
}

bool cq_true_cfg_wanted(double guidance, const char *negative) {
    if (guidance > 1.0 && !negative)
        CQ_WARN("guidance %g needs a negative prompt (--negative, \" \" for an empty one); running without "
                "classifier-free guidance", guidance);
    if (guidance <= 1.0 && negative) CQ_WARN("a negative prompt is used only when guidance > 1; ignoring it");
    return guidance > 1.0 && negative != NULL;
}

cq_status cq_image_job_run(const cq_image_job *j, cq_image_result *res) {
    memset(res, 0, sizeof *res);
    CQ_TRY(check_job(j));
    const cq_latent_codec *codec = j->codec;
    const bool guided = j->guidance.kind != CQ_GUIDANCE_NONE;
    const size_t n = (size_t)j->lat_h * (size_t)j->lat_w * (size_t)codec->channels;

    cq_status s = CQ_OK;
    cq_flow_schedule sch = {0};
    void *pos = NULL, *neg = NULL;
    float *x = cq_mallocn(n, sizeof(float));
    float *z = cq_mallocn(n, sizeof(float));
    if (!x || !z) s = CQ_ERR_NOMEM;
    /* the noise in the codec's layout, packed into the denoiser's tokens */
    if (s == CQ_OK)
        s = cq_latent_noise(j->seed, j->noise_dtype, cq_torch_f32_kernel_native(), n, z);
    if (s == CQ_OK) codec->pack(codec->self, z, x, j->lat_h, j->lat_w);
    if (s == CQ_OK) s = cq_flow_schedule_make(j->sched, j->steps, j->tokens, &sch);
    const char *const prompts[2] = {j->prompt, j->negative};
    void *cond[2] = {NULL, NULL};
    if (s == CQ_OK) s = condition(j, guided ? 2 : 1, prompts, cond, &res->t);
    pos = cond[0];
    neg = cond[1];
    if (s == CQ_OK) phase(j, CQ_GEN_PHASE_STEPS);
    double t_steps = cq_now();
    if (s == CQ_OK) {
        const cq_flow_sample_opts so = {.sch = &sch, .num_train_timesteps = j->sched->num_train_timesteps,
                                        .timestep = j->timestep, .negate = j->negate,
                                        .guidance = j->guidance, .dn = j->dn,
                                        .pos = pos, .neg = neg, .tokens = j->tokens, .on_step = j->on_step,
                                        .on_latents = j->on_latents,
                                        .user = j->user};
        s = cq_flow_sample(&so, x);
    }
    t_steps = cq_now() - t_steps;
    /* the conditioning goes before the decode: its memory is free for it, and the stage may release the denoiser */
    if (pos) j->dn->cond_free(j->dn->self, pos);
    if (neg) j->dn->cond_free(j->dn->self, neg);
    pos = neg = NULL;
    if (s == CQ_OK) s = stage(j, CQ_GEN_PHASE_VAE);
    if (s == CQ_OK) phase(j, CQ_GEN_PHASE_VAE);
    double t_vae = cq_now();
    if (s == CQ_OK) {
        codec->unpack(codec->self, x, z, j->lat_h, j->lat_w);
        s = codec->denormalize(codec->self, z, j->lat_h, j->lat_w);
        res->channels = codec->image_channels;
        res->image = cq_mallocn((size_t)codec->image_channels * (size_t)j->width * (size_t)j->height, sizeof(float));
        if (s == CQ_OK && !res->image) s = CQ_ERR_NOMEM;
    }
    if (s == CQ_OK) s = codec->decode(codec->self, z, j->lat_h, j->lat_w, res->image);
    t_vae = cq_now() - t_vae;
    if (s == CQ_OK) phase(j, CQ_GEN_PHASE_DONE);
    if (s == CQ_OK) {
        res->width = j->width;
        res->height = j->height;
        res->tokens = j->tokens;
        res->latent_channels = j->dn->channels;
        res->latents = x;
        x = NULL;
        res->t.steps = t_steps;
        res->t.vae = t_vae;
    } else {
        cq_image_result_free(res);
    }
    cq_flow_schedule_free(&sch);
    cq_free(x);
    cq_free(z);
    return s;
}
