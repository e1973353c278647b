/*
 * flux_vae.h — the Flux VAE (diffusers AutoencoderKL, the autoencoder of
 * Z-Image and Flux; SD-style VAEs with quant convs load too): latents
 * [C, h, w] decode to images [3, 8h, 8w] (F = 2^(levels-1) in general) and
 * images encode to the posterior moments (mean | logvar).
 *
 * Structure (diffusers' Encoder / Decoder): ResnetBlock2D = GroupNorm ->
 * SiLU -> 3x3 conv -> GroupNorm -> SiLU -> 3x3 conv, plus a 1x1 shortcut
 * conv when the width changes; the mid block is a resnet, single-head
 * attention over all pixels (GroupNorm, q/k/v/out Linear layers, residual)
 * and a resnet; decoder levels end in nearest x2 + 3x3 conv, encoder levels
 * in zero padding (0, 1, 0, 1) + 3x3 stride-2 conv (the last level in
 * neither). Every GroupNorm has eps 1e-6.
 *
 * Memory: every layer runs on the row stream of models/kit/vae_stream.h.
 * A group norm needs its whole input's statistics, so where a level's maps
 * are too large to hold whole (the 128- and 256-channel full-resolution
 * levels of a 2048x2048 decode take 2-4 GiB each), the group norm first
 * streams its input in bands to gather per-row moments and the layers are
 * computed again to normalise: exact (the statistics are the same numbers
 * the whole-map computation uses), at the price of recomputing the layers
 * between a group norm and the checkpoint before it. What fits the
 * activation budget is computed whole (no recomputation): the whole image
 * when it fits, else all but the largest levels (cq_flux_vae_set_budget);
 * docs/ZIMAGE.md ("The Flux VAE") gives the figures.
 *
 * Layouts: latents, images and moments are planar f32 host arrays
 * ([C, H, W], the reference's order).
 */
#ifndef CQ_MODELS_FLUX_VAE_H
#define CQ_MODELS_FLUX_VAE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

typedef struct cq_flux_vae cq_flux_vae;

#define CQ_FLUX_VAE_MAX_LEVELS 8

/* The AutoencoderKL config (config.json) as this model reads it. */
typedef struct cq_flux_vae_config {
    int in_channels, out_channels; /* image channels into the encoder / out of the decoder (3) */
    int latent_channels;           /* C (16 for Flux) */
    int n_levels;                  /* len(block_out_channels) */
    int block_out_channels[CQ_FLUX_VAE_MAX_LEVELS];
    int layers_per_block;          /* resnets per encoder level; the decoder has one more */
    int norm_num_groups;
    float scaling_factor, shift_factor; /* f32, as the pipeline multiplies with them */
    bool mid_attention;            /* mid_block_add_attention */
    bool use_quant_conv, use_post_quant_conv;
    int spatial_factor;            /* image pixels per latent pixel along each side: 2^(n_levels-1) */
    bool has_encoder;              /* false: a decode-only file (the encoder and quant_conv left out) */
} cq_flux_vae_config;

/* The config from `<prefix>config_json`, checked: CQ_ERR_UNSUPPORTED for
 * another class (its name in the message) or for what this model does not
 * run (act_fn other than silu, other block types, ...), naming the field. */
cq_status cq_flux_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_flux_vae_config *c);

/* Load from a CMF pack: tensors `<prefix><diffusers name>` and the config as
 * the u8 tensor `<prefix>config_json` (prefix "vae." in a pipeline pack or
 * a converted AutoencoderKL folder). Kernels and matrices in any codec the
 * backend runs (f16 by default); norms and biases in any float codec
 * (converted to f32 once). The encoder (encoder.* and quant_conv when the
 * config has it) is optional, all or nothing. */
cq_status cq_flux_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_flux_vae **out);
void cq_flux_vae_free(cq_flux_vae *v);
const cq_flux_vae_config *cq_flux_vae_get_config(const cq_flux_vae *v);

/* Bytes of activations a decode/encode may hold (0 = the default, 1.75 GiB):
 * dry runs of the schedule pick the plan that fits with the least
 * recomputation (everything whole when it fits). */
void cq_flux_vae_set_budget(cq_flux_vae *v, size_t bytes);
/* Force bands of `rows` image rows at every level instead (scaled to each
 * level's resolution, at least one row); 0 = the budget decides, INT_MAX =
 * everything whole (no statistics pass, no recomputation). Any value gives
 * the same result (vae_stream.h). */
void cq_flux_vae_set_band_rows(cq_flux_vae *v, int rows);
/* Progress of decode and encode in pixels of work (done, total): each group
 * norm's statistics count its map's pixels, each decoded band its image
 * pixels. A non-zero return cancels the call with CQ_ERR_INTERRUPTED. */
void cq_flux_vae_set_progress(cq_flux_vae *v, cq_progress_fn fn, void *user);

/* What the last decode/encode (or plan) held and did: the peak bytes of
 * activations this model allocated on the backend (op-internal scratch not
 * included) and the multiply-adds its convolutions and attention did (a
 * recomputed row counts again; the whole-image run's count is the minimum). */
typedef struct cq_flux_vae_stats {
    size_t peak_bytes;
    uint64_t macs;
    int stat_passes; /* group norms that ran a statistics pass of their own (recomputation) */
    int checkpoints; /* maps held whole so that passes stop there */
} cq_flux_vae_stats;
cq_flux_vae_stats cq_flux_vae_last_stats(const cq_flux_vae *v);

/* Plan a decode of an h x w latent (decode true) or an encode of an h x w
 * image: the stats a run would report, found by running the schedule without
 * computing anything (no op runs; the buffers are allocated but never
 * written). */
cq_status cq_flux_vae_plan(cq_flux_vae *v, bool decode, int h, int w, cq_flux_vae_stats *out);

/* The pipeline's latent normalisation, in place on z [C, h, w] (f32 in the
 * reference's order): normalize z = (z - shift) * scale (after encoding,
 * into the denoiser's space); denormalize z = z / scale + shift (before
 * decoding). */
cq_status cq_flux_vae_normalize(const cq_flux_vae *v, float *z, int h, int w);
cq_status cq_flux_vae_denormalize(const cq_flux_vae *v, float *z, int h, int w);

/* Decode z [C, h, w] (VAE space, already denormalized) into image
 * [out_channels, h*F, w*F]: the raw decoder output, not clamped. */
cq_status cq_flux_vae_decode(cq_flux_vae *v, const float *z, int h, int w, float *image);

/* Encode x [in_channels, H, W] (values in [-1, 1]; H and W positive
 * multiples of F) into moments [2C, H/F, W/F]: channels [0, C) the
 * posterior mean, [C, 2C) the raw log-variance (the encoder's output, after
 * quant_conv where the model has it). */
cq_status cq_flux_vae_encode(cq_flux_vae *v, const float *x, int H, int W, float *moments);

/* The VAE as the latent codec (component.h): pack/unpack are Z-Image's 2x2
 * patchify (cq_latents_patchify2: tokens of 4C values, even h and w),
 * normalize/denormalize as above, decode clamps to [-1, 1] (the image
 * processor's range); encode is NULL for a decode-only file. v must outlive
 * the copies. */
cq_latent_codec cq_flux_vae_codec(cq_flux_vae *v);

#endif /* CQ_MODELS_FLUX_VAE_H */
