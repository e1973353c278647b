/*
 * ltx2_upsampler.h — LTX-2.3 / 2.5's spatial latent upscaler x2 (diffusers'
 * LTX2LatentUpsamplerModel, pipelines/ltx2/latent_upsampler.py at 58eb52c0;
 * ltx-core's LatentUpsampler as the second reference), on the op layer.
 *
 * On a video latent of C = in_channels channels, F frames of H x W, in the
 * raw (de-normalised) scale of the video VAE, with M = mid_channels and
 * B = num_blocks_per_stage:
 *   h = SiLU(GN(Conv3d_{C->M}(x)))
 *   B times  h = ResBlock(h)
 *   per frame: h = PixelShuffle2(Conv2d_{M->4M}(h))      (F x 2H x 2W)
 *   B times  h = ResBlock(h)
 *   y = Conv3d_{M->C}(h)
 * where every convolution has kernel 3 and zero padding 1 on each axis
 * (time too), GN is GroupNorm(32 groups, affine, eps 1e-5), and
 *   ResBlock(h) = SiLU(h + GN2(Conv3d(SiLU(GN1(Conv3d(h)))))).
 * The pixel shuffle splits the 4M channels as (c, p1, p2), c slowest: channel
 * 4c + 2 p1 + p2 of pixel (r, s) goes to pixel (2r + p1, 2s + p2), channel c.
 *
 * The pipeline wraps it (ltx-core's upsample_video; diffusers'
 * LTX2LatentUpsamplePipeline with latents_normalized): de-normalise with
 * the video VAE's per-channel statistics, x = z std / scaling + mean,
 * upscale, then normalise again, z' = (y - mean) scaling / std.
 *
 * Followed from the config: in_channels, mid_channels (a multiple of 32),
 * num_blocks_per_stage. Refused with a message naming the member: dims other
 * than 3, temporal_upsample, spatial_upsample false, use_rational_resampler
 * true or absent (the class default; LTX-2.0's rational resampler: conv,
 * shuffle by the numerator, blur-downsample by the denominator). With the
 * plain resampler rational_spatial_scale is not read (as in the reference).
 *
 * Latents are channels-last, frame-major: x [F][H][W][C] (the DiT's video
 * tokens with patch size 1), y [F][2H][2W][C]. Batch 1.
 */
#ifndef CQ_MODELS_LTX2_UPSAMPLER_H
#define CQ_MODELS_LTX2_UPSAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_LTX2_UPS_GROUPS 32
#define CQ_LTX2_UPS_MAX_BLOCKS 64
/* The largest latent the forward takes: F x 2H x 2W x mid values in one buffer. */
#define CQ_LTX2_UPS_MAX_VALUES ((int64_t)1 << 34)

typedef struct cq_ltx2_ups_config {
    int in_channels;  /* C: the video latent's channels (128) */
    int mid_channels; /* M (1024) */
    int n_blocks;     /* num_blocks_per_stage (4) */
} cq_ltx2_ups_config;

typedef struct cq_ltx2_ups cq_ltx2_ups;

/* The config from `<prefix>config_json` (diffusers' config.json); refuses what is not run (see above). */
cq_status cq_ltx2_ups_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_ups_config *c);
/* The same from a JSON text (tests, tools). */
cq_status cq_ltx2_ups_parse_config_text(const char *json, cq_ltx2_ups_config *c);
/* Load from a pack: tensors `<prefix><diffusers name>` ("upsampler." as `cortiq convert` writes a
 * latent_upsampler/ folder or a lone LTX2LatentUpsamplerModel folder). */
cq_status cq_ltx2_ups_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_ups **out);
void cq_ltx2_ups_free(cq_ltx2_ups *m);
const cq_ltx2_ups_config *cq_ltx2_ups_get_config(const cq_ltx2_ups *m);

/* The model on a de-normalised latent x [F][H][W][C]: y [F][2H][2W][C]. */
cq_status cq_ltx2_ups_forward(cq_ltx2_ups *m, const float *x, int F, int H, int W, float *y);
/* The pipeline's step on a normalised latent z [F][H][W][C]: de-normalise with mean/std [C] and `scaling` (the
 * VAE's scaling_factor, 1 for LTX-2), forward, normalise: z' [F][2H][2W][C]. std must be positive, all finite. */
cq_status cq_ltx2_ups_upscale(cq_ltx2_ups *m, const float *mean, const float *std, float scaling, const float *z,
                              int F, int H, int W, float *out);
/* The video VAE's per-channel statistics from a pack: `<prefix>latents_mean` and `<prefix>latents_std` (diffusers'
 * AutoencoderKLLTX2Video buffers; "vae."), each of C values, into mean/std [C]; std must be positive. */
cq_status cq_ltx2_latent_stats_read(const cq_cmf *cmf, const char *prefix, int C, float *mean, float *std);

/* Tests: called with each intermediate device tensor (valid during the call only). Names:
 *   "initial" [F*H*W, M]: after the first conv, norm and SiLU;
 *   "pre<i>" [F*H*W, M]: after res block i before the upsampler;
 *   "upsampled" [F*2H*2W, M]: after the pixel shuffle;
 *   "post<i>" [F*2H*2W, M]: after res block i after it;
 *   "out" [F*2H*2W, C].
 * NULL clears it. */
typedef void (*cq_ltx2_ups_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_ltx2_ups_set_tap(cq_ltx2_ups *m, cq_ltx2_ups_tap_fn fn, void *user);

#endif /* CQ_MODELS_LTX2_UPSAMPLER_H */
