/*
 * ltx2_sample.h — the sampling rules of LTX-2's pipelines (diffusers'
 * LTX2Pipeline and LTX2ImageToVideoPipeline at 58eb52c0, ltx-core's
 * DistilledPipeline as the second reference), as pure functions on top of
 * the shared flow-match machinery (schedule.h) and torch's CPU generator
 * (torch_rng.h).
 *
 * Schedule. The pipeline passes its own sigmas to the scheduler
 * (set_timesteps(sigmas=..., mu=...)): the distilled ladder
 * (DISTILLED_SIGMA_VALUES, 8 steps; STAGE_2_DISTILLED_SIGMA_VALUES, 3 steps)
 * or np.linspace(1, 1/N, N), with mu = calculate_shift(video tokens,
 * base_image_seq_len, max_image_seq_len, base_shift, max_shift) of the
 * scheduler's config. The distilled checkpoints' scheduler has no dynamic
 * shifting, shift 1 and no terminal stretch, so the distilled sigmas are used
 * as given (rounded to float32) and the token count does not matter; the dev
 * one shifts by mu (0.95 at 1024 tokens, 2.05 at 4096) and stretches to a
 * terminal 0.1. Timesteps are 1000 sigma (float32); the audio stream runs a
 * copy of the same schedule.
 *
 * Latent geometry: F' = (frames - 1) / 8 + 1, H' = height / 32, W' = width /
 * 32 (height and width must be multiples of 32, as check_inputs requires);
 * audio latent frames L = round(frames / fps * sample_rate / hop /
 * temporal_compression) with Python's round (half to even), mel bins
 * mel_bins / mel_compression.
 *
 * Noise. One generator draws randn(1, C, F', H', W') then randn(1, Ca, L, M)
 * (prepare_latents, then prepare_audio_latents), float32. Packing with patch
 * size p, p_t: video token (f, y, x) has features (c, a, b, d) flattened c
 * slowest ([B, C, F/pt, pt, H/p, p, W/p, p] permuted to tokens); with p = pt
 * = 1 token f H W + y W + x holds its C channels. Audio without patching:
 * token l holds channel c, mel bin m at feature c M + m.
 *
 * Step. The pipeline turns the velocity into x0 = x - v sigma and, after
 * guidance (none for the distilled model), back into v = (x - x0) / sigma,
 * then the scheduler's Euler step x + (sigma_next - sigma) v, all in float32;
 * the round trip changes the last bits, so cq_ltx2_euler_step does it too.
 *
 * Image to video (LTX2ImageToVideoPipeline): the encoded, normalised image is
 * the first latent frame; its tokens have denoise mask 0 (conditioning mask
 * 1): the initial latent is init where the mask is 0 and noise elsewhere,
 * their timestep is t (1 - conditioning) = 0, and the scheduler steps only
 * the other tokens, so the first frame stays exactly the image (ltx-core's
 * rule x0 <- x0 mask + clean (1 - mask) before an Euler step gives the same
 * values: x - x0 is 0 there). Stage 2 re-noises: noise_scale noise +
 * (1 - noise_scale) clean.
 */
#ifndef CQ_PIPELINES_LTX2_SAMPLE_H
#define CQ_PIPELINES_LTX2_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "pipelines/schedule.h"
#include "pipelines/torch_rng.h"

#define CQ_LTX2_DISTILLED_STEPS 8
#define CQ_LTX2_STAGE2_STEPS 3
/* diffusers pipelines/ltx2/utils.py (ltx-pipelines' constants) */
extern const double cq_ltx2_distilled_sigmas[CQ_LTX2_DISTILLED_STEPS];
extern const double cq_ltx2_stage2_sigmas[CQ_LTX2_STAGE2_STEPS];

/* The two scheduler configs the diffusers converter writes for LTX-2: the distilled checkpoints' (no dynamic
 * shifting, no terminal stretch) and the dev one's (dynamic, base/max shift 0.95 / 2.05 over 1024 .. 4096 tokens,
 * terminal 0.1). */
void cq_ltx2_flow_config_distilled(cq_flow_config *c);
void cq_ltx2_flow_config_dev(cq_flow_config *c);

/* The pipeline's schedule: `sigmas` (steps values, e.g. cq_ltx2_distilled_sigmas) or NULL for
 * np.linspace(1, 1/steps, steps); mu from the video token count. */
cq_status cq_ltx2_schedule(const cq_flow_config *c, const double *sigmas, int steps, int64_t video_tokens,
                           cq_flow_schedule *out);

/* What the VAEs and the DiT fix: the defaults are LTX-2's (32, 8, 16000 Hz, hop 160, audio compression 4, 64 mel
 * bins, mel compression 4, 128 video and 8 audio latent channels, patch sizes 1). */
typedef struct cq_ltx2_geo_params {
    int spatial_ratio, temporal_ratio;
    int sample_rate, hop_length, audio_temporal_ratio;
    int mel_bins, mel_ratio;
    int video_channels, audio_channels;
    int patch, patch_t; /* the DiT's spatial and temporal patch sizes */
} cq_ltx2_geo_params;
void cq_ltx2_geo_params_default(cq_ltx2_geo_params *p);

typedef struct cq_ltx2_geometry {
    int frames, height, width; /* latent F', H', W' */
    int64_t video_tokens;       /* F'/pt * H'/p * W'/p */
    int video_features;         /* C pt p p */
    int audio_frames, audio_mel; /* L, latent mel bins M */
    int audio_features;          /* Ca M */
} cq_ltx2_geometry;

/* The latent geometry of a clip of `num_frames` frames of width x height at fps; refuses what the pipeline
 * refuses (sizes not multiples of the spatial ratio) and what cannot be sampled (no audio frame, latent sizes not
 * divisible by the patch sizes), naming the value. */
cq_status cq_ltx2_geometry_make(const cq_ltx2_geo_params *p, int width, int height, int num_frames, double fps,
                                cq_ltx2_geometry *g);

/* [C][F][H][W] (one batch) <-> tokens [F/pt * H/p * W/p][C pt p p], as _pack_latents / _unpack_latents. */
void cq_ltx2_pack_video(const float *cfhw, float *tokens, int C, int F, int H, int W, int p, int pt);
void cq_ltx2_unpack_video(const float *tokens, float *cfhw, int C, int F, int H, int W, int p, int pt);
/* [C][L][M] <-> tokens [L][C M], as _pack_audio_latents / _unpack_audio_latents without patching. */
void cq_ltx2_pack_audio(const float *clm, float *tokens, int C, int L, int M);
void cq_ltx2_unpack_audio(const float *tokens, float *clm, int C, int L, int M);

/* The initial noise of the text-to-video pipeline from generator g (torch.Generator("cpu").manual_seed(seed) for
 * a seed): video tokens [video_tokens][video_features] then audio tokens [audio_frames][audio_features], packed;
 * g advances as torch's does. */
cq_status cq_ltx2_initial_noise(cq_torch_gen *g, cq_torch_f32_kernel kernel, const cq_ltx2_geometry *geo,
                                const cq_ltx2_geo_params *p, float *video, float *audio);

/* x0 = x - v sigma, and v = (x - x0) / sigma (float32, each operation rounded). out may alias an input. */
void cq_ltx2_velocity_to_x0(float *x0, const float *x, const float *v, size_t n, float sigma);
void cq_ltx2_x0_to_velocity(float *v, const float *x, const float *x0, size_t n, float sigma);
/* One step of the pipeline without guidance: v through x0 and back, then the Euler step, x in place (v is not
 * changed). With a mask [tokens] (NULL: every token), only tokens with mask 1 move. */
void cq_ltx2_euler_step(float *x, const float *v, const uint8_t *mask, int64_t tokens, int features, float sigma,
                        float sigma_next);

/* ltx-core's ancestral Euler step in its rectified-flow form (EulerAncestralDiffusionStep; ltx-pipelines' distilled
 * stage 1 for LTX-2.5 checkpoints, eta = s_noise = 1): to sigma_down = sigma_next (1 + (sigma_next / sigma - 1) eta)
 * by x'' = r x + (1 - r) x0 (r = sigma_down / sigma), then back up to sigma_next by (a_n / a_d) x'' + s_noise
 * noise sqrt(max(0, sigma_next^2 - sigma_down^2 a_n^2 / a_d^2)) with a = 1 - sigma; the prediction itself when
 * sigma_next is 0. Float32, each operation rounded as the reference's 0-d tensors round; noise [tokens][features]
 * (unused when eta is 0); tokens whose mask is 0 stay (the reference's post-step blend with the clean latent). */
void cq_ltx2_ancestral_step(float *x, const float *x0, const float *noise, const uint8_t *mask, int64_t tokens,
                            int features, float sigma, float sigma_next, double eta, double s_noise);

/* Image to video: the denoise mask [video_tokens] with the first latent frame's tokens 0, the others 1 (patch
 * sizes 1, as the reference requires). */
cq_status cq_ltx2_first_frame_mask(const cq_ltx2_geometry *geo, const cq_ltx2_geo_params *p, uint8_t *mask);
/* Per-token timesteps: t where the mask is 1, 0 where it is 0 (t (1 - conditioning), float32). */
void cq_ltx2_token_timesteps(float t, const uint8_t *mask, int64_t tokens, float *out);
/* The initial latent: clean where the mask is 0, noise where it is 1 (init c + noise (1 - c)); out may alias. */
void cq_ltx2_cond_init(float *out, const float *clean, const float *noise, const uint8_t *mask, int64_t tokens,
                       int features);
/* ltx-core's post-prediction blend: x0 <- x0 where the mask is 1, clean where it is 0. */
void cq_ltx2_blend_x0(float *x0, const float *clean, const uint8_t *mask, int64_t tokens, int features);
/* Stage 2's re-noise (_create_noised_state): out = scale noise + (1 - scale) clean, float32; out may alias. */
void cq_ltx2_noised_state(float *out, const float *clean, const float *noise, size_t n, double scale);

#endif /* CQ_PIPELINES_LTX2_SAMPLE_H */
