/*
 * qi21_vae.h — the Wan-style autoencoders of the Qwen-Image family,
 * specialised to single images: decoding latents [z_dim, h, w] into images
 * [C, F*h, F*w] in [-1, 1] and encoding images into the posterior moments
 * (mean | logvar). Two structures share this code:
 *  - Qwen-Image-2.1's AutoencoderKLQwenImage21 (Wan-2.2 style): residual
 *    levels with space-to-depth shortcuts, optional patching; 64 latents,
 *    RGBA, F = 16;
 *  - Qwen-Image's AutoencoderKLQwenImage (Wan-2.1 style, Qwen-Image and its
 *    Edit models): plain levels, upsampling convs that halve the width; 16
 *    latents, RGB, F = 8. Its causal 3-D kernels are stored as their last
 *    temporal tap (what `cortiq convert` writes), the only one a lone frame
 *    reads.
 *
 * Memory: everything between the mid block's global attention and the
 * image runs as a row stream (models/kit/vae_stream.c): the output is produced in
 * horizontal bands and every layer keeps only the rows its consumers still
 * need, so no full-resolution activation ever exists and no row is computed
 * twice. The result equals the untiled computation exactly (same arithmetic
 * per pixel); the band height only trades memory for per-call overhead.
 *
 * Layouts: every pixel array crossing this interface is f32 host memory in
 * one of two layouts, chosen per call: PLANAR [C, H, W] (the reference's
 * order) or CHANNELS_LAST [H, W, C] (the DiT's token order; interleaved
 * pixels for image writers).
 */
#ifndef CQ_MODELS_QI21_VAE_H
#define CQ_MODELS_QI21_VAE_H

#include <stdbool.h>
#include <stddef.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

typedef struct cq_qi21_vae cq_qi21_vae;

typedef enum cq_qi21_vae_layout {
    CQ_QI21_VAE_PLANAR = 0,        /* [C, H, W] */
    CQ_QI21_VAE_CHANNELS_LAST = 1, /* [H, W, C] */
} cq_qi21_vae_layout;

/* Which structure a file holds (its config's _class_name). */
typedef enum cq_qi21_vae_kind {
    CQ_QI21_VAE_QI21 = 0,   /* AutoencoderKLQwenImage21 */
    CQ_QI21_VAE_QIMAGE = 1, /* AutoencoderKLQwenImage */
    CQ_QI21_VAE_KIND_COUNT
} cq_qi21_vae_kind;

typedef struct cq_qi21_vae_config {
    cq_qi21_vae_kind kind;
    int z_dim;                 /* latent channels (64 in the real model) */
    int image_channels;        /* channels of the image (4 = RGBA in the real model) */
    int patch_size;            /* 1 = no patching */
    int spatial_factor;        /* image pixels per latent pixel along each axis (16) */
    int base_dim, decoder_base_dim, num_res_blocks, n_levels;
    const float *latents_mean; /* [z_dim], f32 as the pipeline builds them */
    const float *latents_std;  /* [z_dim] */
    bool has_encoder;          /* false: a decode-only file (the encoder and quant_conv left out) */
} cq_qi21_vae_config;

/* Load from a CMF pack: tensors `<prefix><diffusers name>` and the config as
 * the u8 tensor `<prefix>config_json` (prefix "vae." in a pipeline pack).
 * Conv kernels may be in any codec the backend runs (f16 by default);
 * norm gammas and biases in any float codec (converted to f32 once). The
 * config's _class_name picks the structure (absent: AutoencoderKLQwenImage21);
 * what neither structure implements (2.1 with is_residual false, attention
 * levels through attn_scales) fails with CQ_ERR_UNSUPPORTED naming the config
 * field. The encoder (encoder.* and
 * quant_conv) is optional, all or nothing: without it the model decodes and
 * cq_qi21_vae_encode fails with CQ_ERR_UNSUPPORTED. */
cq_status cq_qi21_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qi21_vae **out);
void cq_qi21_vae_free(cq_qi21_vae *v);
const cq_qi21_vae_config *cq_qi21_vae_get_config(const cq_qi21_vae *v);

/* Output rows per band of the streamed part (image rows; 0 = automatic,
 * sized for about 1 GiB of activations: 75 rows and 850 MiB measured for
 * a 2048x2048 decode of Qwen-Image-2.1's model; 0.47 GiB of activations and
 * 0.84 GiB resident for the whole process for Qwen-Image's, on the CPU).
 * Any value gives the same result; INT_MAX decodes in one band (untiled). */
void cq_qi21_vae_set_band_rows(cq_qi21_vae *v, int rows);
/* Progress in image rows (done, total): decode reports after each output
 * band, encode after each band of latent rows gathered for the mid block.
 * A non-zero return cancels the call with CQ_ERR_INTERRUPTED. */
void cq_qi21_vae_set_progress(cq_qi21_vae *v, cq_progress_fn fn, void *user);
/* Peak bytes of activations held by the last decode/encode (buffers this
 * model allocated on the backend; op-internal scratch not included). */
size_t cq_qi21_vae_last_peak_bytes(const cq_qi21_vae *v);

/* The pipeline's latent normalisation, in place on n = h*w pixels of z_dim
 * channels: denormalize (DiT space -> VAE space, before decoding) z = x * std
 * + mean (Qwen-Image-2.1's pipeline) or z = x / (1 / std) + mean (Qwen-Image's:
 * it divides by the f32 reciprocal, which rounds differently), normalize x =
 * (z - mean) / std (after encoding, both). f32 arithmetic in the reference's
 * order. */
cq_status cq_qi21_vae_denormalize(const cq_qi21_vae *v, float *x, int h, int w, cq_qi21_vae_layout layout);
cq_status cq_qi21_vae_normalize(const cq_qi21_vae *v, float *z, int h, int w, cq_qi21_vae_layout layout);

/* Decode latents z [z_dim, h, w] (VAE space, i.e. already denormalized) into
 * image [image_channels, h*F, w*F] (F = spatial_factor), clamped to
 * [-1, 1]. Both arrays in `layout`. */
cq_status cq_qi21_vae_decode(cq_qi21_vae *v, const float *z, int h, int w, cq_qi21_vae_layout layout, float *image);

/* Encode image x [image_channels, H, W] (values in [-1, 1]; H and W
 * multiples of spatial_factor) into moments [2*z_dim, H/F, W/F]: channels
 * [0, z_dim) are the posterior mean (the latents the pipeline uses, before
 * normalize), [z_dim, 2*z_dim) the raw log-variance. Both arrays in
 * `layout`. */
cq_status cq_qi21_vae_encode(cq_qi21_vae *v, const float *x, int H, int W, cq_qi21_vae_layout layout, float *moments);

/* The VAE as the latent codec (component.h), planar layouts; v must outlive
 * the copies. encode is NULL for a decode-only file. */
cq_latent_codec cq_qi21_vae_codec(cq_qi21_vae *v);

#endif /* CQ_MODELS_QI21_VAE_H */
