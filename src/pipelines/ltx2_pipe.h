/*
 * ltx2_pipe.h — LTX-2.5 text to video with sound, end to end, as diffusers'
 * LTX2Pipeline.__call__ does it (58eb52c0), from one pack made by `cortiq
 * convert` of an LTX2Pipeline folder (te. dit. connectors. vae. audio_vae.
 * vocoder. with their configs, scheduler.config_json, the tokenizer):
 *
 *   prompt.strip() -> the tokenizer with its post-processor (BOS), left-padded
 *   to max_tokens (the reference's max_sequence_length, 1024) -> the Gemma-4
 *   tower, every hidden state -> the feature extractor and the two connectors
 *   (video and audio prompt rows) -> noise from torch's CPU generator (video,
 *   then audio) -> N flow-matching Euler steps over the pack's scheduler with
 *   the distilled ladder or linspace(1, 1/N, N); each step's velocities go to
 *   x0 = x - v sigma, guidance combines them there:
 *       x0 = pos + (g - 1)(pos - neg) + s (pos - stg) + (m - 1)(pos - iso)
 *   (CFG against the negative prompt when g > 1, STG with the perturbed blocks
 *   when s > 0, modality isolation when m > 1, per stream with its own
 *   scales), then the guidance rescale (std of pos over std of the combination,
 *   mixed by r) when r > 0, back to v = (x - x0) / sigma and the Euler step ->
 *   the video latents de-normalised and decoded by the video VAE (stream
 *   decode: bounded device memory), mapped x / 2 + 1 / 2 and clamped; the
 *   audio latents de-normalised, decoded to a mel by the audio VAE and turned
 *   into a waveform by the vocoder (48 kHz stereo with LTX-2.5's bandwidth
 *   extender).
 *
 * Image to video (LTX2ImageToVideoPipeline): the first frame given as an
 * 8-bit RGB picture, resized to the stage's size as the reference's video
 * processor does (PIL bilinear), mapped to [-1, 1], encoded by the video VAE
 * (posterior mean) and normalised; its latent tokens replace the first
 * latent frame's noise, their timesteps are 0 (per-token timesteps), and the
 * Euler step leaves them where they are.
 *
 * Two stages (diffusers' distilled two-stage recipe: LTX2Pipeline, then
 * LTX2LatentUpsamplePipeline, then LTX2Pipeline on the upscaled latents):
 * stage 1 at half the size with the steps above; its latents de-normalised,
 * upscaled x2 by the pack's latent upsampler and normalised again; then
 * re-noised at the first refine sigma, s noise + (1 - s) x, video and audio,
 * with noise drawn from the same generator after stage 1's (video first, in
 * the packed token order for text to video and in [C][F][H][W] order with the
 * first frame kept for image to video, as each reference draws it), and the
 * 3 refine steps (0.909375, 0.725, 0.421875) without guidance.
 *
 * The first frame is re-compressed by H.264 first (image_crf, 18 for
 * LTX-2.5) as the reference does, unless image_crf is 0.
 *
 * Not here yet: prompt enhancement, batches.
 */
#ifndef CQ_PIPELINES_LTX2_PIPE_H
#define CQ_PIPELINES_LTX2_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"
#include "pipelines/ltx2_sample.h"

#define CQ_LTX2_PIPE_MAX_TOKENS 1024 /* the reference's max_sequence_length */
#define CQ_LTX2_PIPE_MAX_STG 64

typedef struct cq_ltx2_pipe cq_ltx2_pipe;

/* Called after step `step` (1-based) of `n`; non-zero stops the run (CQ_ERR_INTERRUPTED). */
typedef int (*cq_ltx2_step_fn)(int step, int n, void *user);

/* Stage 1's step rule: diffusers' Euler (the default: LTX2Pipeline's), or ltx-core's ancestral Euler (ltx-pipelines'
 * distilled stage 1 for LTX-2.5), its noise from torch.Generator("cpu").manual_seed(seed + 10000), float32, per
 * step the video's then the sound's (ltx-core draws it on its device in the latents' dtype). Stage 2 is Euler. */
typedef enum cq_ltx2_sampler { CQ_LTX2_SAMPLER_EULER = 0, CQ_LTX2_SAMPLER_ANCESTRAL = 1 } cq_ltx2_sampler;
#define CQ_LTX2_ANCESTRAL_SEED_OFFSET 10000

typedef struct cq_ltx2_gen_opts {
    const char *prompt;
    const char *negative;  /* NULL: "" (read only with CFG) */
    int width, height;     /* pixels: multiples of 32 and of the VAE's spatial factor */
    int frames;            /* 8k + 1 (the VAE's temporal factor) */
    double fps;
    int steps;             /* 1..1000 */
    bool ladder;           /* the distilled 8-step sigmas (steps must be 8); else linspace(1, 1/N, N) */
    uint64_t seed;
    /* guidance per stream, the reference's meaning: CFG scale (> 1 on), STG scale (> 0 on), modality scale
     * (> 1 on), rescale (> 0 on) */
    double guidance, audio_guidance, stg, audio_stg, modality, audio_modality, rescale, audio_rescale;
    int stg_blocks[CQ_LTX2_PIPE_MAX_STG];
    int n_stg_blocks;
    int max_tokens;        /* the prompt's padded length (0: CQ_LTX2_PIPE_MAX_TOKENS) */
    const float *noise;    /* the packed initial latents [tokens][features] (NULL: drawn from the seed) */
    const float *audio_noise;
    /* image to video: the first frame, 8-bit RGB interleaved, image_width x image_height (NULL: text to video) */
    const uint8_t *image;
    int image_width, image_height;
    int image_crf;         /* its H.264 re-compression first (io/image_crf.h): -1 the default, 18 (LTX-2.5's Gemma-4
                            * tower), 0 none (the picture as given), else the CRF */
    /* two stages: stage 1 at width/2 x height/2 (each a multiple of 32), the upscaler, 3 refine steps; needs the
     * distilled denoiser and the pack's latent upsampler loaded (cq_ltx2_pipe_load_upsampler) */
    bool two_stage;
    const float *noise2;   /* stage 2's re-noise, packed (NULL: the generator continued after stage 1) */
    const float *audio_noise2;
    cq_ltx2_sampler sampler;
    double eta, s_noise;   /* the ancestral step's (1, 1) */
    cq_ltx2_step_fn on_step;
    void *user;
} cq_ltx2_gen_opts;

/* The distilled recipe's defaults: 768x512, 121 frames at 24 fps, 8 ladder steps, no guidance, 1024 tokens. */
void cq_ltx2_gen_opts_init(cq_ltx2_gen_opts *o);

typedef struct cq_ltx2_timings {
    double text, steps, upscale, video, audio; /* seconds (steps: both stages') */
} cq_ltx2_timings;

typedef struct cq_ltx2_result {
    cq_ltx2_geometry geo;
    float *latents;        /* [video_tokens][video_features] after the last step */
    float *audio_latents;  /* [audio_frames][audio_features] */
    /* two stages: stage 1's geometry and final latents, and stage 2's re-noised initial state (tests) */
    cq_ltx2_geometry geo1;
    float *stage1_latents, *stage2_init, *stage2_audio_init;
    int width, height, frames; /* the decoded video's */
    cq_ltx2_timings t;
} cq_ltx2_result;
void cq_ltx2_result_free(cq_ltx2_result *r);

/* open: the tokenizer and every config, their widths checked against each other (no weights); check: every
 * refusal of generate (size, frames, steps, guidance, STG blocks, the prompts' token counts); load_weights: the
 * tower, connectors, DiT, video VAE, audio VAE and vocoder on `be` (borrowed). The cmf must outlive the pipe. */
cq_status cq_ltx2_pipe_open(const cq_cmf *cmf, cq_ltx2_pipe **out);
cq_status cq_ltx2_pipe_check(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o);
cq_status cq_ltx2_pipe_load_weights(cq_ltx2_pipe *p, cq_backend *be);
/* Whether the pack has a latent upsampler (`upsampler.`, convert's prefix for latent_upsampler/), and its loading
 * on the weights' backend (after load_weights; two stages need it). */
bool cq_ltx2_pipe_has_upsampler(const cq_ltx2_pipe *p);
cq_status cq_ltx2_pipe_load_upsampler(cq_ltx2_pipe *p);
/* Whether the pack's video VAE has its encoder (image to video needs it). */
bool cq_ltx2_pipe_has_encoder(const cq_ltx2_pipe *p);
void cq_ltx2_pipe_free(cq_ltx2_pipe *p);

/* The geometry of a request, checked. */
cq_status cq_ltx2_pipe_geometry(cq_ltx2_pipe *p, int width, int height, int frames, double fps, cq_ltx2_geometry *g);
/* The prompt's tokens (after strip, with BOS) and the ids left-padded to max_tokens ([max_tokens], may be
 * NULL). Tokenizes only; refuses a prompt over max_tokens. */
cq_status cq_ltx2_pipe_tokens(cq_ltx2_pipe *p, const char *prompt, int max_tokens, int *n, int32_t *ids);
/* The connectors' rows of a prompt: video [max_tokens][video dim], audio [max_tokens][audio dim]. */
cq_status cq_ltx2_pipe_encode(cq_ltx2_pipe *p, const char *prompt, int max_tokens, float *video, float *audio);

/* Whether the pack's scheduler is the distilled checkpoints' (no dynamic shifting: the 8-step ladder is its
 * recipe). */
bool cq_ltx2_pipe_distilled(const cq_ltx2_pipe *p);
/* The prompt rows' widths (the DiT's video and audio stream widths). */
void cq_ltx2_pipe_widths(const cq_ltx2_pipe *p, int *video, int *audio);
/* The first frame's latent tokens for a stage of geometry g (width x height pixels): the picture resized, encoded
 * and normalised, [height/s * width/s][video_features] (the first latent frame's tokens). */
cq_status cq_ltx2_pipe_image_tokens(cq_ltx2_pipe *p, const uint8_t *rgb, int iw, int ih, int width, int height,
                                    float *tokens);
/* The initial noise of a seed, as generate draws it: video then audio, packed. */
cq_status cq_ltx2_pipe_noise(cq_ltx2_pipe *p, uint64_t seed, const cq_ltx2_geometry *g, float *video, float *audio);

/* Text, then the steps: the final latents in *r (free with cq_ltx2_result_free). */
cq_status cq_ltx2_pipe_generate(cq_ltx2_pipe *p, const cq_ltx2_gen_opts *o, cq_ltx2_result *r);
/* The latents' frames: planar RGB [3][frames][height][width] in [0, 1] (cq_malloc'd). */
cq_status cq_ltx2_pipe_decode_video(cq_ltx2_pipe *p, cq_ltx2_result *r, float **frames);
/* The video VAE on de-normalised latents z [C][F][h][w] (what decode_video decodes after de-normalising): planar
 * RGB in [0, 1] as above (tests: the decoder alone on the reference's latents). */
cq_status cq_ltx2_pipe_decode_latents(cq_ltx2_pipe *p, const float *z, int F, int h, int w, float **frames);
/* The audio VAE's mel of the latents, [Cm][Tm][M] (cq_malloc'd; *Tm its frames), and the vocoder on a mel (tests;
 * decode_audio is the two). */
cq_status cq_ltx2_pipe_decode_mel(cq_ltx2_pipe *p, const cq_ltx2_result *r, float **mel, int *Tm);
cq_status cq_ltx2_pipe_vocode(cq_ltx2_pipe *p, const float *mel, int Tm, float **samples, int64_t *n, int *channels,
                              int *rate);
/* The sound: [*n][*channels] interleaved samples at *rate Hz in [-1, 1] (cq_malloc'd). */
cq_status cq_ltx2_pipe_decode_audio(cq_ltx2_pipe *p, cq_ltx2_result *r, float **samples, int64_t *n, int *channels,
                                    int *rate);

#endif /* CQ_PIPELINES_LTX2_PIPE_H */
