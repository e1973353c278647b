/*
 * ltx2_pipe.c — LTX-2.5 text to video with sound (ltx2_pipe.h): the prompt
 * encoder (tokenizer, Gemma-4 tower, connectors), the guided flow-matching
 * sampler over the audio-video DiT, and the two decoders.
 */
#include "pipelines/ltx2_pipe.h"

#include <math.h>
#include <string.h>

#include "base/base.h"
#include "image/resample.h"
#include "io/image_crf.h"
#include "models/gemma4.h"
#include "models/ltx2.h"
#include "models/ltx2_audio.h"
#include "models/ltx2_text.h"
#include "models/ltx2_upsampler.h"
#include "models/ltx2_vae.h"
#include "tokenizer/tokenizer.h"

#define NAME "ltx2 pipeline"

struct cq_ltx2_pipe {
    const cq_cmf *cmf;
    cq_tokenizer *tok;
    int32_t pad_id;
    cq_gemma4_config tcfg;
    cq_ltx2_text_config ccfg;
    cq_ltx2_config dcfg;
    cq_ltx2_vae_config vcfg;
    cq_ltx2_audio_vae_config acfg;
    cq_ltx2_vocoder_config ocfg;
    cq_ltx2_ups_config ucfg;
    bool has_ups, has_encoder;
    cq_flow_config sched;
    cq_ltx2_geo_params geo;
    cq_backend *be;
    cq_gemma4 *te;
    cq_ltx2_text *conn;
    cq_ltx2 *dit;
    cq_ltx2_vae *vae;
    cq_ltx2_audio_vae *avae;
    cq_ltx2_vocoder *voc;
    cq_ltx2_ups *ups;
    float *vmean, *vstd; /* the video latents' statistics (two stages) */
};

void cq_ltx2_gen_opts_init(cq_ltx2_gen_opts *o) {
    *o = (cq_ltx2_gen_opts){.width = 768, .height = 512, .frames = 121, .fps = 24.0, .steps = 8, .ladder = true,
                            .guidance = 1.0, .audio_guidance = 1.0, .modality = 1.0, .audio_modality = 1.0,
                            .eta = 1.0, .s_noise = 1.0, .image_crf = -1,
                            .max_tokens = CQ_LTX2_PIPE_MAX_TOKENS};
}

void cq_ltx2_result_free(cq_ltx2_result *r) {
    if (!r) return;
    cq_free(r->latents);
    cq_free(r->audio_latents);
    cq_free(r->stage1_latents);
    cq_free(r->stage2_init);
    cq_free(r->stage2_audio_init);
    *r = (cq_ltx2_result){0};
}

/* ---- open: configs and their agreement ---- */
static cq_status read_scheduler(cq_ltx2_pipe *p) {
    const cq_tensor_view *v = cq_cmf_find(p->cmf, "scheduler.config_json");
    if (!v)
        return cq_fail(CQ_ERR_MISSING, NAME ": the file has no scheduler.config_json (convert the pipeline folder "
                       "with its scheduler/)");
    CQ_TRY(cq_cmf_check_tensor(v));
    return cq_flow_config_parse((const char *)v->data, (size_t)v->nbytes, &p->sched);
}

static cq_status check_widths(cq_ltx2_pipe *p) {
    const cq_gemma4_config *t = &p->tcfg;
    const cq_ltx2_text_config *c = &p->ccfg;
    const cq_ltx2_config *d = &p->dcfg;
    if (c->caption_channels != t->hidden || c->n_states != t->n_layers + 1)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the connectors read %d states of width %d; the text tower gives %d of "
                       "width %d", c->n_states, c->caption_channels, t->n_layers + 1, t->hidden);
    if (c->conn[CQ_LTX2_VIDEO].dim != d->dim || c->conn[CQ_LTX2_AUDIO].dim != d->audio_dim)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the connectors give %d / %d wide rows; the denoiser's streams are %d / %d "
                       "wide", c->conn[CQ_LTX2_VIDEO].dim, c->conn[CQ_LTX2_AUDIO].dim, d->dim, d->audio_dim);
    const cq_ltx2_vae_config *v = &p->vcfg;
    if (d->in_channels != v->latent_channels || d->out_channels != v->latent_channels)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser takes %d and gives %d video channels; the VAE's latents have "
                       "%d", d->in_channels, d->out_channels, v->latent_channels);
    const cq_ltx2_audio_vae_config *a = &p->acfg;
    const int af = a->latent_channels * a->latent_mel;
    if (d->audio_in_channels != af || d->audio_out_channels != af)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the denoiser takes %d and gives %d audio features; the audio VAE's "
                       "latents have %d x %d", d->audio_in_channels, d->audio_out_channels, a->latent_channels,
                       a->latent_mel);
    if (p->ocfg.gen.in_channels != a->output_channels * a->mel_bins)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the vocoder reads %d channels; the audio VAE's mel has %d x %d",
                       p->ocfg.gen.in_channels, a->output_channels, a->mel_bins);
    if (a->n_levels < 1 || a->n_levels > 8 || a->latent_mel < 1 || a->mel_bins % a->latent_mel)
        return cq_fail(CQ_ERR_SHAPE, NAME ": the audio VAE's %d levels and %d / %d mel bins do not make a latent grid",
                       a->n_levels, a->mel_bins, a->latent_mel);
    return CQ_OK;
}

cq_status cq_ltx2_pipe_open(const cq_cmf *cmf, cq_ltx2_pipe **out) {
    *out = NULL;
    cq_ltx2_pipe *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    p->cmf = cmf;
    size_t tl = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    cq_status s = tj ? cq_tokenizer_load(tj, tl, &p->tok)
                     : cq_fail(CQ_ERR_MISSING, NAME ": the file has no tokenizer section (convert the pipeline folder "
                               "with its tokenizer/)");
    if (s == CQ_OK) s = cq_gemma4_parse_config(cmf, "te.", &p->tcfg);
    if (s == CQ_OK) s = cq_ltx2_text_parse_config(cmf, "connectors.", &p->ccfg);
    if (s == CQ_OK) s = cq_ltx2_parse_config(cmf, "dit.", &p->dcfg);
    if (s == CQ_OK) s = cq_ltx2_vae_parse_config(cmf, "vae.", &p->vcfg);
    if (s == CQ_OK) s = cq_ltx2_audio_vae_parse_config(cmf, "audio_vae.", &p->acfg);
    if (s == CQ_OK) s = cq_ltx2_vocoder_parse_config(cmf, "vocoder.", &p->ocfg);
    if (s == CQ_OK) s = read_scheduler(p);
    if (s == CQ_OK) s = check_widths(p);
    if (s == CQ_OK && cq_cmf_find(cmf, "upsampler.config_json")) {
        s = cq_ltx2_ups_parse_config(cmf, "upsampler.", &p->ucfg);
        if (s == CQ_OK && p->ucfg.in_channels != p->vcfg.latent_channels)
            s = cq_fail(CQ_ERR_SHAPE, NAME ": the latent upsampler takes %d channels, the video VAE's latents "
                        "have %d", p->ucfg.in_channels, p->vcfg.latent_channels);
        p->has_ups = s == CQ_OK;
    }
    p->has_encoder = cq_cmf_find(cmf, "vae.encoder.conv_in.conv.weight") != NULL;
    if (s == CQ_OK) {
        /* pads are never read (the tower masks them, the connectors replace them); Gemma's is "<pad>" */
        p->pad_id = cq_tokenizer_token_to_id(p->tok, "<pad>", 5);
        if (p->pad_id < 0) p->pad_id = 0;
        cq_ltx2_geo_params *g = &p->geo;
        cq_ltx2_geo_params_default(g);
        g->spatial_ratio = p->vcfg.s_up;
        g->temporal_ratio = p->vcfg.t_up;
        g->video_channels = p->vcfg.latent_channels;
        g->sample_rate = p->acfg.sample_rate;
        g->hop_length = p->acfg.hop_length;
        g->audio_temporal_ratio = 1 << (p->acfg.n_levels - 1);
        g->mel_bins = p->acfg.mel_bins;
        g->mel_ratio = p->acfg.mel_bins / p->acfg.latent_mel;
        g->audio_channels = p->acfg.latent_channels;
    }
    if (s != CQ_OK) {
        cq_ltx2_pipe_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}

void cq_ltx2_pipe_free(cq_ltx2_pipe *p) {
    if (!p) return;
    cq_gemma4_free(p->te);
    cq_ltx2_text_free(p->conn);
    cq_ltx2_free(p->dit);
    cq_ltx2_vae_free(p->vae);
    cq_ltx2_audio_vae_free(p->avae);
    cq_ltx2_vocoder_free(p->voc);
    cq_ltx2_ups_free(p->ups);
    cq_free(p->vmean);
    cq_free(p->vstd);
    cq_tokenizer_free(p->tok);
    cq_free(p);
}

cq_status cq_ltx2_pipe_load_weights(cq_ltx2_pipe *p, cq_backend *be) {
    if (p->dit) return CQ_OK;
    p->be = be;
    cq_status s = cq_gemma4_load(p->cmf, "te.", be, &p->te);
    if (s == CQ_OK) s = cq_ltx2_text_load(p->cmf, "connectors.", be, &p->conn);
    if (s == CQ_OK) s = cq_ltx2_vae_load(p->cmf, "vae.", be, &p->vae);
    if (s == CQ_OK) s = cq_ltx2_audio_vae_load(p->cmf, "audio_vae.", be, &p->avae);
    if (s == CQ_OK) s = cq_ltx2_vocoder_load(p->cmf, "vocoder.", be, &p->voc);
    if (s == CQ_OK) s = cq_ltx2_load(p->cmf, "dit.", be, &p->dit);
    return s;
}

bool cq_ltx2_pipe_has_upsampler(const cq_ltx2_pipe *p) { return p->has_ups; }
bool cq_ltx2_pipe_has_encoder(const cq_ltx2_pipe *p) { return p->has_encoder; }

cq_status cq_ltx2_pipe_load_upsampler(cq_ltx2_pipe *p) {
    if (p->ups) return CQ_OK;
    if (!p->has_ups)
        return cq_fail(CQ_ERR_MISSING, NAME ": the file has no latent upsampler (convert the pipeline folder with "
                       "its latent_upsampler/ beside the other components)");
    if (!p->be) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": load the weights before the upsampler");
    const int C = p->vcfg.latent_channels;
    p->vmean = cq_mallocn((size_t)C, sizeof(float));
    p->vstd = cq_mallocn((size_t)C, sizeof(float));
    if (!p->vmean || !p->vstd) return CQ_ERR_NOMEM;
    CQ_TRY(cq_ltx2_latent_stats_read(p->cmf, "vae.", C, p->vmean, p->vstd));
    return cq_ltx2_ups_load(p->cmf, "upsampler.", p->be, &p->ups);
}

/* ---- the prompt ---- */
static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

cq_status cq_ltx2_pipe_tokens(cq_ltx2_pipe *p, const char *prompt, int max_tokens, int *n, int32_t *ids) {
    if (!prompt) prompt = "";
    if (max_tokens <= 0) max_tokens = CQ_LTX2_PIPE_MAX_TOKENS;
    /* the reference's prompt.strip() (ASCII white space) */
    size_t a = 0, b = strlen(prompt);
    while (a < b && is_space((unsigned char)prompt[a])) a++;
    while (b > a && is_space((unsigned char)prompt[b - 1])) b--;
    cq_tokens t = {0};
    CQ_TRY(cq_tokenizer_encode(p->tok, prompt + a, b - a, CQ_TOK_ADD_SPECIAL, &t));
    cq_status s = CQ_OK;
    if (t.n > (size_t)max_tokens)
        s = cq_fail(CQ_ERR_INVALID_ARG, "the prompt is %zu tokens long; the encoder reads at most %d (the reference "
                    "would cut it there)", t.n, max_tokens);
    if (s == CQ_OK && t.n == 0) s = cq_fail(CQ_ERR_INVALID_ARG, "the prompt gives no tokens");
    if (s == CQ_OK) {
        *n = (int)t.n;
        if (ids) {
            const int pads = max_tokens - (int)t.n;
            for (int i = 0; i < pads; i++) ids[i] = p->pad_id;
            memcpy(ids + pads, t.ids, t.n * sizeof *ids);
        }
    }
    cq_tokens_free(&t);
    return s;
}

cq_status cq_ltx2_pipe_encode(cq_ltx2_pipe *p, const char *prompt, int max_tokens, float *video, float *audio) {
    if (!p->te) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    if (max_tokens <= 0) max_tokens = CQ_LTX2_PIPE_MAX_TOKENS;
    const int T = max_tokens, L = p->tcfg.n_layers + 1, C = p->tcfg.hidden;
    int32_t *ids = cq_malloc((size_t)T * sizeof *ids);
    uint8_t *mask = cq_malloc((size_t)T);
    float *hidden = cq_malloc((size_t)L * T * C * sizeof *hidden);
    int n = 0;
    cq_status s = (ids && mask && hidden) ? cq_ltx2_pipe_tokens(p, prompt, T, &n, ids) : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        for (int i = 0; i < T; i++) mask[i] = i >= T - n;
        const cq_gemma4_outputs go = {.all_hidden = hidden};
        s = cq_gemma4_forward(p->te, ids, mask, T, &go);
    }
    if (s == CQ_OK) s = cq_ltx2_text_encode(p->conn, hidden, mask, T, video, audio);
    cq_free(ids);
    cq_free(mask);
    cq_free(hidden);
    return s;
}

bool cq_ltx2_pipe_distilled(const cq_ltx2_pipe *p) { return !p->sched.use_dynamic_shifting; }

void cq_ltx2_pipe_widths(const cq_ltx2_pipe *p, int *video, int *audio) {
    *video = p->dcfg.dim;
    *audio = p->dcfg.audio_dim;
}

cq_status cq_ltx2_pipe_noise(cq_ltx2_pipe *p, uint64_t seed, const cq_ltx2_geometry *g, float *video, float *audio) {
    cq_torch_gen gen;
    cq_torch_gen_seed(&gen, seed);
    return cq_ltx2_initial_noise(&gen, cq_torch_f32_kernel_native(), g, &p->geo, video, audio);
}

/* ---- checks ---- */
cq_status cq_ltx2_pipe_geometry(cq_ltx2_pipe *p, int width, int height, int frames, double fps, cq_ltx2_geometry *g) {
    if (width % 32 || height % 32 || width <= 0 || height <= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "the size %dx%d is not a multiple of 32 on each side (the reference "
                       "refuses it)", width, height);
    const int tr = p->geo.temporal_ratio;
    if (frames < 1 || (frames - 1) % tr)
        return cq_fail(CQ_ERR_INVALID_ARG, "%d frames: the video VAE makes %dk + 1 frames (1, %d, %d, ...)", frames, tr,
                       tr + 1, 2 * tr + 1);
    if (!(fps > 0 && fps <= 240)) return cq_fail(CQ_ERR_INVALID_ARG, "the frame rate %g is outside (0, 240]", fps);
    return cq_ltx2_geometry_make(&p->geo, width, height, frames, fps, g);
}

static bool finite_in(double v, double lo, double hi) { return isfinite(v) && v >= lo && v <= hi; }

cq_status cq_ltx2_pipe_check(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o) {
    cq_ltx2_geometry g;
    CQ_TRY(cq_ltx2_pipe_geometry(p, o->width, o->height, o->frames, o->fps, &g));
    if (o->steps < 1 || o->steps > 1000) return cq_fail(CQ_ERR_INVALID_ARG, "%d steps is outside 1..1000", o->steps);
    if (o->ladder && o->steps != CQ_LTX2_DISTILLED_STEPS)
        return cq_fail(CQ_ERR_INVALID_ARG, "the distilled ladder has %d steps, not %d (without it the steps are "
                       "linspace(1, 1/N, N))", CQ_LTX2_DISTILLED_STEPS, o->steps);
    const double scales[] = {o->guidance, o->audio_guidance, o->stg, o->audio_stg, o->modality, o->audio_modality};
    const char *names[] = {"guidance", "audio guidance", "STG", "audio STG", "modality", "audio modality"};
    for (int i = 0; i < 6; i++)
        if (!finite_in(scales[i], 0, 100)) return cq_fail(CQ_ERR_INVALID_ARG, "the %s scale %g is outside [0, 100]",
                                                          names[i], scales[i]);
    if (!finite_in(o->rescale, 0, 1) || !finite_in(o->audio_rescale, 0, 1))
        return cq_fail(CQ_ERR_INVALID_ARG, "the guidance rescale %g / %g is outside [0, 1]", o->rescale,
                       o->audio_rescale);
    if (o->stg > 0 || o->audio_stg > 0) {
        if (!p->dcfg.perturbed_attn)
            return cq_fail(CQ_ERR_UNSUPPORTED, "STG needs a denoiser with perturbed attention (perturbed_attn)");
        if (o->n_stg_blocks < 1) return cq_fail(CQ_ERR_INVALID_ARG, "STG is on but no block is perturbed");
    }
    if (o->n_stg_blocks < 0 || o->n_stg_blocks > CQ_LTX2_PIPE_MAX_STG)
        return cq_fail(CQ_ERR_INVALID_ARG, "%d STG blocks", o->n_stg_blocks);
    for (int i = 0; i < o->n_stg_blocks; i++)
        if (o->stg_blocks[i] < 0 || o->stg_blocks[i] >= p->dcfg.n_layers)
            return cq_fail(CQ_ERR_INVALID_ARG, "STG block %d: the denoiser has blocks 0..%d", o->stg_blocks[i],
                           p->dcfg.n_layers - 1);
    if (o->sampler != CQ_LTX2_SAMPLER_EULER && o->sampler != CQ_LTX2_SAMPLER_ANCESTRAL)
        return cq_fail(CQ_ERR_INVALID_ARG, "unknown sampler %d", (int)o->sampler);
    if (!finite_in(o->eta, 0, 1) || !finite_in(o->s_noise, 0, 10))
        return cq_fail(CQ_ERR_INVALID_ARG, "the ancestral step's eta %g (in [0, 1]) or s_noise %g (in [0, 10])", o->eta,
                       o->s_noise);
    if (o->two_stage) {
        if (!p->has_ups)
            return cq_fail(CQ_ERR_MISSING, "two stages need the pack's latent upsampler (convert the pipeline folder "
                           "with its latent_upsampler/)");
        if (!cq_ltx2_pipe_distilled(p))
            return cq_fail(CQ_ERR_UNSUPPORTED, "two stages need the distilled denoiser for the refine steps (the "
                           "reference refines the dev model with the distilled LoRA, which packs do not carry)");
        if (o->width % 64 || o->height % 64)
            return cq_fail(CQ_ERR_INVALID_ARG, "two stages: %dx%d is not a multiple of 64 on each side (stage 1 runs "
                           "at half the size, a multiple of 32)", o->width, o->height);
    }
    if (o->image) {
        if (!p->has_encoder)
            return cq_fail(CQ_ERR_MISSING, "image to video needs the video VAE's encoder, which this pack leaves "
                           "out");
        if (o->image_width < 1 || o->image_height < 1 || o->image_width > CQ_RESAMPLE_MAX_SIDE ||
            o->image_height > CQ_RESAMPLE_MAX_SIDE)
            return cq_fail(CQ_ERR_INVALID_ARG, "the first frame's size %dx%d is outside 1..%d per side",
                           o->image_width, o->image_height, CQ_RESAMPLE_MAX_SIDE);
        if (o->image_crf < -1 || o->image_crf > 51)
            return cq_fail(CQ_ERR_INVALID_ARG, "the first frame's CRF %d is outside 0..51", o->image_crf);
        if (o->image_crf != 0 && !cq_image_crf_available())
            return cq_fail(CQ_ERR_UNSUPPORTED, "this build cannot re-compress the first frame with H.264 as the "
                           "reference does (it needs FFmpeg with libx264); CRF 0 uses the picture as given");
        if (o->image_crf != 0 && (o->image_width < 2 || o->image_height < 2))
            return cq_fail(CQ_ERR_INVALID_ARG, "the first frame's size %dx%d: H.264 needs at least 2x2 (CRF 0 takes "
                           "any)", o->image_width, o->image_height);
        if (p->geo.patch != 1 || p->geo.patch_t != 1)
            return cq_fail(CQ_ERR_UNSUPPORTED, "image to video with patch sizes %d / %d (the reference takes 1 "
                           "only)", p->geo.patch, p->geo.patch_t);
    }
    const int T = o->max_tokens > 0 ? o->max_tokens : CQ_LTX2_PIPE_MAX_TOKENS;
    if (T > CQ_LTX2_TEXT_MAX_TOKENS) return cq_fail(CQ_ERR_INVALID_ARG, "%d prompt tokens is too many", T);
    for (int s = 0; s < CQ_LTX2_STREAMS; s++)
        if (T % p->ccfg.conn[s].n_registers)
            return cq_fail(CQ_ERR_INVALID_ARG, "the prompt length %d is not a multiple of the connectors' %d "
                           "registers", T, p->ccfg.conn[s].n_registers);
    int n;
    cq_status s = cq_ltx2_pipe_tokens(p, o->prompt, T, &n, NULL);
    if (s != CQ_OK) return s;
    if (o->guidance > 1 || o->audio_guidance > 1) {
        s = cq_ltx2_pipe_tokens(p, o->negative ? o->negative : "", T, &n, NULL);
        if (s != CQ_OK) return cq_fail_prefix(s, "the negative prompt: ");
    }
    return CQ_OK;
}

/* ---- the sampler ---- */

/* One stream's buffers: the state, the velocities of up to four passes and their x0. */
typedef struct stream_buf {
    size_t n;
    float *x, *v[4], *x0[4], *g;
} stream_buf;

enum { PASS_POS = 0, PASS_NEG, PASS_STG, PASS_ISO };

static cq_status stream_alloc(stream_buf *b, size_t n) {
    b->n = n;
    if (!(b->x = cq_malloc(n * sizeof(float))) || !(b->g = cq_malloc(n * sizeof(float)))) return CQ_ERR_NOMEM;
    for (int i = 0; i < 4; i++)
        if (!(b->v[i] = cq_malloc(n * sizeof(float))) || !(b->x0[i] = cq_malloc(n * sizeof(float))))
            return CQ_ERR_NOMEM;
    return CQ_OK;
}

static void stream_free(stream_buf *b) {
    cq_free(b->g);
    for (int i = 0; i < 4; i++) {
        cq_free(b->v[i]);
        cq_free(b->x0[i]);
    }
    b->x = NULL; /* handed to the result or freed by the caller */
}

/* torch.std (unbiased), accumulated in double. */
static double std_of(const float *x, size_t n) {
    double m = 0, q = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) q += ((double)x[i] - m) * ((double)x[i] - m);
    return n > 1 ? sqrt(q / (double)(n - 1)) : 0.0;
}

/* The guided x0 of one stream (the reference's sum of deltas, each rounded as f32 tensors round), its rescale, back
 * to a velocity and the Euler step, x in place. */
/* The step rule of a stage: Euler through the velocity, or ltx-core's ancestral step on x0 with its noise. */
typedef struct step_rule {
    bool ancestral;
    const float *noise;
    double eta, s_noise;
} step_rule;

static void guided_step(stream_buf *b, const bool on[4], double cfg, double stg, double iso, double rescale,
                        float sigma, float sigma_next, const uint8_t *mask, int features, const step_rule *rule) {
    const size_t n = b->n;
    for (int k = 0; k < 4; k++)
        if (on[k]) cq_ltx2_velocity_to_x0(b->x0[k], b->x, b->v[k], n, sigma);
    const float *pos = b->x0[PASS_POS];
    const float fc = (float)(cfg - 1.0), fs = (float)stg, fi = (float)(iso - 1.0);
    for (size_t i = 0; i < n; i++) {
        float g = pos[i];
        if (on[PASS_NEG]) g = g + fc * (pos[i] - b->x0[PASS_NEG][i]);
        if (on[PASS_STG]) g = g + fs * (pos[i] - b->x0[PASS_STG][i]);
        if (on[PASS_ISO]) g = g + fi * (pos[i] - b->x0[PASS_ISO][i]);
        b->g[i] = g;
    }
    if (rescale > 0) {
        const float st = (float)std_of(pos, n), sc = (float)std_of(b->g, n);
        const float ratio = st / sc, r = (float)rescale, r1 = (float)(1.0 - rescale);
        for (size_t i = 0; i < n; i++) {
            const float scaled = b->g[i] * ratio;
            b->g[i] = r * scaled + r1 * b->g[i];
        }
    }
    if (rule->ancestral) {
        cq_ltx2_ancestral_step(b->x, b->g, rule->noise, mask, (int64_t)(n / (size_t)features), features, sigma,
                               sigma_next, rule->eta, rule->s_noise);
        return;
    }
    float *v = b->v[PASS_POS];
    cq_ltx2_x0_to_velocity(v, b->x, b->g, n, sigma);
    const float dt = sigma_next - sigma;
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i / (size_t)features]) continue; /* a conditioning token stays */
        const float d = dt * v[i];
        b->x[i] = b->x[i] + d;
    }
}

static bool all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* One stage's sampler run: the steps of `sigmas` (NULL: linspace) over geometry g from the states in vb / ab, in
 * place; guidance as the options say when `guided`, else the positive pass only; `mask` [video_tokens] (NULL:
 * every token) leaves the conditioning tokens at timestep 0 and unmoved. Progress counts from step0 of n_all. */
typedef struct stage_run {
    const cq_ltx2_geometry *g;
    const double *sigmas;
    int steps;
    bool guided;
    const uint8_t *mask;
    int step0, n_all;
    cq_torch_gen *noise_gen; /* the ancestral step's noise (NULL: Euler) */
} stage_run;

static cq_status run_stage(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o, float *const ctx[2], float *const actx[2],
                           int T, const stage_run *st, stream_buf *vb, stream_buf *ab) {
    const cq_ltx2_geometry *g = st->g;
    const bool cfg = st->guided && (o->guidance > 1 || o->audio_guidance > 1);
    const bool stg = st->guided && (o->stg > 0 || o->audio_stg > 0);
    const bool iso = st->guided && (o->modality > 1 || o->audio_modality > 1);
    const bool on[4] = {true, cfg, stg, iso};
    const size_t nv = vb->n, na = ab->n;
    cq_flow_schedule sch = {0};
    cq_ltx2_cond *cond[2] = {NULL, NULL};
    float *tt = st->mask ? cq_mallocn((size_t)g->video_tokens, sizeof(float)) : NULL;
    float *vn = st->noise_gen ? cq_mallocn(nv, sizeof(float)) : NULL;
    float *an = st->noise_gen ? cq_mallocn(na, sizeof(float)) : NULL;
    cq_status s = (st->mask && !tt) || (st->noise_gen && (!vn || !an)) ? CQ_ERR_NOMEM : CQ_OK;
    if (s == CQ_OK) s = cq_ltx2_schedule(&p->sched, st->sigmas, st->steps, g->video_tokens, &sch);
    cq_ltx2_inputs in = {.frames = g->frames, .height = g->height, .width = g->width, .fps = o->fps,
                         .audio_frames = g->audio_frames, .n_ctx = T, .n_audio_ctx = T, .n_timestep = 1,
                         .n_audio_timestep = 1, .use_cross_timestep = true};
    for (int k = 0; k < (cfg ? 2 : 1) && s == CQ_OK; k++) {
        in.video = vb->x;
        in.audio = ab->x;
        in.ctx = ctx[k];
        in.audio_ctx = actx[k];
        s = cq_ltx2_prepare(p->dit, &in, &cond[k]);
    }
    for (int i = 0; i < st->steps && s == CQ_OK; i++) {
        const float t = sch.timesteps[i], sigma = sch.sigmas[i], sigma_next = sch.sigmas[i + 1];
        in.video = vb->x;
        in.audio = ab->x;
        if (st->mask) {
            cq_ltx2_token_timesteps(t, st->mask, g->video_tokens, tt);
            in.timestep = tt;
            in.n_timestep = (int)g->video_tokens;
        } else {
            in.timestep = &t;
        }
        in.audio_timestep = &t;
        in.sigma = t;
        in.audio_sigma = t;
        for (int k = 0; k < 4 && s == CQ_OK; k++) {
            if (!on[k]) continue;
            in.isolate_modalities = k == PASS_ISO;
            in.stg_blocks = k == PASS_STG ? o->stg_blocks : NULL;
            in.n_stg_blocks = k == PASS_STG ? o->n_stg_blocks : 0;
            s = cq_ltx2_step(cond[k == PASS_NEG ? 1 : 0], &in, vb->v[k], ab->v[k]);
            if (s == CQ_OK && (!all_finite(vb->v[k], nv) || !all_finite(ab->v[k], na)))
                s = cq_fail(CQ_ERR_NUMERIC, NAME ": the denoiser's velocity at step %d is not finite",
                            st->step0 + i + 1);
        }
        if (s != CQ_OK) break;
        step_rule rv = {.ancestral = st->noise_gen != NULL, .noise = vn, .eta = o->eta, .s_noise = o->s_noise};
        step_rule ra = rv;
        ra.noise = an;
        if (st->noise_gen && sigma_next != 0.0f && o->eta > 0) {
            /* ltx-core: one draw per stream and step, the video's first; none at the terminal step */
            const cq_torch_f32_kernel kern = cq_torch_f32_kernel_native();
            s = cq_torch_randn_f32(st->noise_gen, kern, vn, nv);
            if (s == CQ_OK) s = cq_torch_randn_f32(st->noise_gen, kern, an, na);
            if (s != CQ_OK) break;
        }
        guided_step(vb, on, o->guidance, o->stg, o->modality, o->rescale, sigma, sigma_next, st->mask,
                    g->video_features, &rv);
        guided_step(ab, on, o->audio_guidance, o->audio_stg, o->audio_modality, o->audio_rescale, sigma, sigma_next,
                    NULL, g->audio_features, &ra);
        const int done = st->step0 + i + 1;
        if (cq_cancel_requested() || (o->on_step && o->on_step(done, st->n_all, o->user)))
            s = cq_fail(CQ_ERR_INTERRUPTED, "interrupted after step %d of %d", done, st->n_all);
    }
    for (int k = 0; k < 2; k++) cq_ltx2_cond_free(cond[k]);
    cq_flow_schedule_free(&sch);
    cq_free(tt);
    cq_free(vn);
    cq_free(an);
    return s;
}

cq_status cq_ltx2_pipe_image_tokens(cq_ltx2_pipe *p, const uint8_t *rgb, int iw, int ih, int width, int height,
                                    float *tokens) {
    if (!p->vae) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    const int C = p->vcfg.latent_channels;
    int Fo, h, w;
    CQ_TRY(cq_ltx2_vae_encode_shape(p->vae, 1, height, width, &Fo, &h, &w));
    const size_t np = (size_t)width * height;
    uint8_t *px = cq_mallocn(np, 3);
    float *planar = cq_mallocn(np * 3, sizeof(float)), *mean = cq_mallocn((size_t)C * h * w, sizeof(float));
    cq_status s = px && planar && mean ? CQ_OK : CQ_ERR_NOMEM;
    /* the video processor: PIL bilinear to the size, / 255 in float32, 2 x - 1 */
    if (s == CQ_OK) s = cq_resample_u8(CQ_RESAMPLE_PIL_BILINEAR, rgb, iw, ih, 3, px, width, height);
    if (s == CQ_OK) {
        for (int c = 0; c < 3; c++)
            for (size_t i = 0; i < np; i++) {
                const float u = (float)px[i * 3 + (size_t)c] / 255.0f;
                const float v = 2.0f * u;
                planar[(size_t)c * np + i] = v - 1.0f;
            }
        s = cq_ltx2_vae_encode(p->vae, planar, 1, height, width, mean);
    }
    if (s == CQ_OK) s = cq_ltx2_vae_normalize(p->vae, mean, 1, h, w);
    if (s == CQ_OK) cq_ltx2_pack_video(mean, tokens, C, 1, h, w, 1, 1);
    cq_free(px);
    cq_free(planar);
    cq_free(mean);
    return s;
}

/* The stage's conditioning: the first frame's tokens over the noise (cond_init), the mask kept. */
static cq_status condition_first_frame(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o, const cq_ltx2_geometry *g,
                                       int width, int height, float *x, uint8_t **mask) {
    *mask = cq_malloc((size_t)g->video_tokens);
    float *clean = cq_calloc((size_t)g->video_tokens * g->video_features, sizeof(float));
    cq_status s = *mask && clean ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_ltx2_first_frame_mask(g, &p->geo, *mask);
    /* the reference re-compresses the picture before resizing it (apply_image_conditioning_crf) */
    const int crf = o->image_crf < 0 ? CQ_IMAGE_CRF_LTX25 : o->image_crf;
    uint8_t *px = NULL;
    int pw = o->image_width, ph = o->image_height;
    if (s == CQ_OK && crf > 0) s = cq_image_crf(o->image, o->image_width, o->image_height, crf, &px, &pw, &ph);
    if (s == CQ_OK) s = cq_ltx2_pipe_image_tokens(p, px ? px : o->image, pw, ph, width, height, clean);
    cq_free(px);
    if (s == CQ_OK) cq_ltx2_cond_init(x, clean, x, *mask, g->video_tokens, g->video_features);
    cq_free(clean);
    return s;
}

/* Stage 2's start from stage 1's latents x1 (geometry g1): upscaled into vb (geometry g2), then video and audio
 * re-noised at s with noise from gen (or the options'), as the reference's prepare_latents and
 * prepare_audio_latents draw it. */
static cq_status stage2_init(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o, cq_torch_gen *gen, const float *x1,
                             const cq_ltx2_geometry *g1, const cq_ltx2_geometry *g2, const uint8_t *mask, double sc,
                             stream_buf *vb, stream_buf *ab) {
    const int C = g2->video_features;
    const size_t nv = vb->n, na = ab->n;
    CQ_TRY(cq_ltx2_ups_upscale(p->ups, p->vmean, p->vstd, (float)p->vcfg.scaling_factor, x1, g1->frames, g1->height,
                               g1->width, vb->x));
    float *nz = cq_mallocn(nv, sizeof(float)), *an = cq_mallocn(na, sizeof(float));
    cq_status s = nz && an ? CQ_OK : CQ_ERR_NOMEM;
    const cq_torch_f32_kernel kern = cq_torch_f32_kernel_native();
    if (s == CQ_OK && o->noise2 && o->audio_noise2) {
        memcpy(nz, o->noise2, nv * sizeof(float));
        memcpy(an, o->audio_noise2, na * sizeof(float));
    } else if (s == CQ_OK) {
        if (mask) {
            /* image to video draws the noise over the [C][F][H][W] latents, then packs them */
            float *cf = cq_mallocn(nv, sizeof(float));
            s = cf ? cq_torch_randn_f32(gen, kern, cf, nv) : CQ_ERR_NOMEM;
            if (s == CQ_OK) cq_ltx2_pack_video(cf, nz, C, g2->frames, g2->height, g2->width, 1, 1);
            cq_free(cf);
        } else {
            s = cq_torch_randn_f32(gen, kern, nz, nv); /* text to video: over the packed tokens */
        }
        if (s == CQ_OK) s = cq_torch_randn_f32(gen, kern, an, na);
    }
    if (s == CQ_OK) {
        if (mask) {
            /* noise_scale (1 - mask) as a float32 tensor, then s n + (1 - s) x in float32 */
            const float sf = (float)sc, rf = 1.0f - sf;
            for (size_t i = 0; i < nv; i++) {
                if (!mask[i / (size_t)C]) continue;
                const float a = sf * nz[i];
                const float b = rf * vb->x[i];
                vb->x[i] = a + b;
            }
        } else {
            cq_ltx2_noised_state(vb->x, vb->x, nz, nv, sc);
        }
        /* the reference de-normalises stage 1's sound and normalises it again: a round trip of rounding only */
        cq_ltx2_noised_state(ab->x, ab->x, an, na, sc);
    }
    cq_free(nz);
    cq_free(an);
    return s;
}

static float *copy_of(const float *x, size_t n) {
    float *c = cq_mallocn(n, sizeof(float));
    if (c) memcpy(c, x, n * sizeof(float));
    return c;
}

cq_status cq_ltx2_pipe_generate(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o, cq_ltx2_result *r) {
    *r = (cq_ltx2_result){0};
    if (!p->dit) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    CQ_TRY(cq_ltx2_pipe_check(p, o));
    if (o->two_stage && !p->ups)
        return cq_fail(CQ_ERR_INVALID_ARG, NAME ": two stages need the upsampler loaded (cq_ltx2_pipe_load_upsampler)");
    const int T = o->max_tokens > 0 ? o->max_tokens : CQ_LTX2_PIPE_MAX_TOKENS;
    const int D = p->dcfg.dim, Da = p->dcfg.audio_dim;
    const bool cfg = o->guidance > 1 || o->audio_guidance > 1;
    const int w1 = o->two_stage ? o->width / 2 : o->width, h1 = o->two_stage ? o->height / 2 : o->height;

    cq_ltx2_geometry g, g1;
    CQ_TRY(cq_ltx2_pipe_geometry(p, o->width, o->height, o->frames, o->fps, &g));
    CQ_TRY(cq_ltx2_pipe_geometry(p, w1, h1, o->frames, o->fps, &g1));
    r->geo = g;
    r->geo1 = g1;
    r->width = o->width;
    r->height = o->height;
    r->frames = p->vcfg.t_up * (g.frames - 1) + 1;

    float *ctx[2] = {NULL, NULL}, *actx[2] = {NULL, NULL};
    stream_buf vb = {0}, ab = {0}, vb2 = {0};
    uint8_t *mask = NULL, *mask2 = NULL;
    cq_status s = CQ_OK;
    double t0 = cq_now();
    for (int k = 0; k < (cfg ? 2 : 1) && s == CQ_OK; k++) {
        ctx[k] = cq_malloc((size_t)T * D * sizeof(float));
        actx[k] = cq_malloc((size_t)T * Da * sizeof(float));
        s = (ctx[k] && actx[k]) ? cq_ltx2_pipe_encode(p, k ? (o->negative ? o->negative : "") : o->prompt, T, ctx[k],
                                                      actx[k])
                                : CQ_ERR_NOMEM;
        if (s != CQ_OK && k) s = cq_fail_prefix(s, "the negative prompt: ");
    }
    r->t.text = cq_now() - t0;
    t0 = cq_now();
    const size_t nv1 = (size_t)g1.video_tokens * g1.video_features, na = (size_t)g1.audio_frames * g1.audio_features;
    cq_torch_gen gen;
    cq_torch_gen_seed(&gen, o->seed);
    if (s == CQ_OK) s = stream_alloc(&vb, nv1);
    if (s == CQ_OK) s = stream_alloc(&ab, na);
    if (s == CQ_OK) {
        if (o->noise && o->audio_noise) {
            memcpy(vb.x, o->noise, nv1 * sizeof(float));
            memcpy(ab.x, o->audio_noise, na * sizeof(float));
        } else {
            s = cq_ltx2_initial_noise(&gen, cq_torch_f32_kernel_native(), &g1, &p->geo, vb.x, ab.x);
        }
    }
    if (s == CQ_OK && o->image) s = condition_first_frame(p, o, &g1, w1, h1, vb.x, &mask);
    const int n_all = o->steps + (o->two_stage ? CQ_LTX2_STAGE2_STEPS : 0);
    cq_torch_gen agen;
    cq_torch_gen_seed(&agen, o->seed + CQ_LTX2_ANCESTRAL_SEED_OFFSET);
    const stage_run st1 = {&g1, o->ladder ? cq_ltx2_distilled_sigmas : NULL, o->steps, true, mask, 0, n_all,
                           o->sampler == CQ_LTX2_SAMPLER_ANCESTRAL ? &agen : NULL};
    if (s == CQ_OK) s = run_stage(p, o, ctx, actx, T, &st1, &vb, &ab);
    if (s == CQ_OK && o->two_stage) {
        const double tu = cq_now();
        const size_t nv = (size_t)g.video_tokens * g.video_features;
        s = stream_alloc(&vb2, nv);
        if (s == CQ_OK && o->image) {
            mask2 = cq_malloc((size_t)g.video_tokens);
            s = mask2 ? cq_ltx2_first_frame_mask(&g, &p->geo, mask2) : CQ_ERR_NOMEM;
        }
        if (s == CQ_OK && !(r->stage1_latents = copy_of(vb.x, nv1))) s = CQ_ERR_NOMEM;
        if (s == CQ_OK) s = stage2_init(p, o, &gen, vb.x, &g1, &g, mask2, cq_ltx2_stage2_sigmas[0], &vb2, &ab);
        if (s == CQ_OK && (!(r->stage2_init = copy_of(vb2.x, nv)) || !(r->stage2_audio_init = copy_of(ab.x, na))))
            s = CQ_ERR_NOMEM;
        r->t.upscale = cq_now() - tu;
        const stage_run st2 = {&g, cq_ltx2_stage2_sigmas, CQ_LTX2_STAGE2_STEPS, false, mask2, o->steps, n_all, NULL};
        if (s == CQ_OK) s = run_stage(p, o, ctx, actx, T, &st2, &vb2, &ab);
        cq_free(vb.x);
        vb.x = vb2.x;
        stream_free(&vb2);
    }
    r->t.steps = cq_now() - t0 - r->t.upscale;
    for (int k = 0; k < 2; k++) {
        cq_free(ctx[k]);
        cq_free(actx[k]);
    }
    cq_free(mask);
    cq_free(mask2);
    r->latents = vb.x;
    r->audio_latents = ab.x;
    stream_free(&vb);
    stream_free(&ab);
    if (s != CQ_OK) cq_ltx2_result_free(r);
    return s;
}

/* ---- the decoders ---- */
cq_status cq_ltx2_pipe_decode_latents(cq_ltx2_pipe *p, const float *z, int F, int h, int w, float **frames) {
    *frames = NULL;
    const int C = p->vcfg.latent_channels;
    int Fo, Ho, Wo;
    CQ_TRY(cq_ltx2_vae_decode_shape(p->vae, F, h, w, &Fo, &Ho, &Wo));
    const size_t nz = (size_t)C * F * h * w, no = (size_t)3 * Fo * Ho * Wo;
    float *tok = cq_malloc(nz * sizeof *tok), *out = cq_malloc(no * sizeof *out);
    cq_status s = (tok && out) ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        /* the stream decode reads the DiT's channels-last layout and holds a few frames a layer on the device */
        cq_ltx2_pack_video(z, tok, C, F, h, w, 1, 1);
        s = cq_ltx2_vae_decode_stream(p->vae, tok, F, h, w, out, NULL);
    }
    if (s == CQ_OK) s = cq_ltx2_vae_frames_to_unit(out, no);
    cq_free(tok);
    if (s != CQ_OK) {
        cq_free(out);
        return s;
    }
    *frames = out;
    return CQ_OK;
}

cq_status cq_ltx2_pipe_decode_video(cq_ltx2_pipe *p, cq_ltx2_result *r, float **frames) {
    *frames = NULL;
    const cq_ltx2_geometry *g = &r->geo;
    const int C = g->video_features, F = g->frames, h = g->height, w = g->width;
    float *z = cq_malloc((size_t)C * F * h * w * sizeof *z);
    if (!z) return CQ_ERR_NOMEM;
    const double t0 = cq_now();
    cq_ltx2_unpack_video(r->latents, z, C, F, h, w, 1, 1);
    cq_status s = cq_ltx2_vae_denormalize(p->vae, z, F, h, w);
    if (s == CQ_OK) s = cq_ltx2_pipe_decode_latents(p, z, F, h, w, frames);
    r->t.video = cq_now() - t0;
    cq_free(z);
    return s;
}

cq_status cq_ltx2_pipe_decode_mel(cq_ltx2_pipe *p, const cq_ltx2_result *r, float **mel, int *Tm) {
    *mel = NULL;
    const int L = r->geo.audio_frames, Cm = p->acfg.output_channels, M = p->acfg.mel_bins;
    *Tm = cq_ltx2_audio_mel_frames(L);
    float *m = cq_malloc((size_t)Cm * *Tm * M * sizeof *m);
    cq_status s = m ? cq_ltx2_audio_decode(p->avae, r->audio_latents, L, true, m) : CQ_ERR_NOMEM;
    if (s != CQ_OK) {
        cq_free(m);
        return s;
    }
    *mel = m;
    return CQ_OK;
}

cq_status cq_ltx2_pipe_vocode(cq_ltx2_pipe *p, const float *mel, int Tm, float **samples, int64_t *n, int *channels,
                              int *rate) {
    *samples = NULL;
    int64_t n_out = 0;
    cq_ltx2_vocoder_lengths(p->voc, Tm, NULL, &n_out);
    const int ch = p->ocfg.bwe ? p->ocfg.bwe_gen.out_channels : p->ocfg.gen.out_channels;
    float *wav = cq_malloc((size_t)n_out * ch * sizeof *wav);
    cq_status s = wav ? cq_ltx2_vocoder_forward(p->voc, mel, p->acfg.output_channels, Tm, p->acfg.mel_bins, NULL, wav)
                      : CQ_ERR_NOMEM;
    if (s != CQ_OK) {
        cq_free(wav);
        return s;
    }
    *samples = wav;
    *n = n_out;
    *channels = ch;
    *rate = p->ocfg.bwe ? p->ocfg.out_rate : p->ocfg.in_rate;
    return CQ_OK;
}

cq_status cq_ltx2_pipe_decode_audio(cq_ltx2_pipe *p, cq_ltx2_result *r, float **samples, int64_t *n, int *channels,
                                    int *rate) {
    double t0 = cq_now();
    float *mel = NULL;
    int Tm = 0;
    cq_status s = cq_ltx2_pipe_decode_mel(p, r, &mel, &Tm);
    if (s == CQ_OK) s = cq_ltx2_pipe_vocode(p, mel, Tm, samples, n, channels, rate);
    cq_free(mel);
    r->t.audio = cq_now() - t0;
    return s;
}
