/*
 * component.h — the interfaces a model implements so the pipelines run it
 * without knowing which model it is. Each is a struct of function pointers
 * and the `self` they are called with; the struct is a value (copy it
 * freely), `self` belongs to whoever made it and must outlive every copy.
 *
 *  - cq_text_encoder: a prompt, wrapped in the encoder's own template, to the
 *    rows a denoiser reads. Counting tokens needs no weights, so requests can
 *    be checked before any weight is read.
 *  - cq_denoiser: the conditioning prepared once per prompt (Qwen-Image-2.1
 *    computes a prefix K/V cache), then one velocity per step(x, t).
 *  - cq_latent_codec: the latent space of an image model: packing the
 *    codec's [C][h][w] latents into the denoiser's tokens and back, the
 *    normalisation between the two spaces, decoding to pixels and encoding.
 *  - cq_causal_lm: a language model behind a K/V cache: feed tokens, get the
 *    last one's logits, rewind.
 *
 * Qwen-Image-2.1 implements the first three (models/qi21.c, qi21_vae.c with
 * models/qwen3_text.c for its text tower), Qwen3 the last (models/qwen3.c);
 * Qwen-Image's VAE (qi21_vae.c too) is a latent codec;
 * the Qwen-Image (v1) DiT is a denoiser (models/qimage.c);
 * the Flux VAE (models/flux_vae.c, Z-Image's) is a latent codec.
 */
#ifndef CQ_MODELS_COMPONENT_H
#define CQ_MODELS_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

/* ------------------------------------------------------------------------ */
typedef struct cq_text_encoder {
    void *self;
    int width; /* floats per row */
    /* Token counts of `prompt` in the template: the encoder reads *total
     * tokens and returns the last *rows of their states. Tokenizes only;
     * refuses what the encoder must not read, saying why. */
    cq_status (*count)(void *self, const char *prompt, int *total, int *rows);
    /* The rows: *out [*n_rows][width], cq_malloc'd (the caller frees it). */
    cq_status (*encode)(void *self, const char *prompt, float **out, int *n_rows);
} cq_text_encoder;

/* ------------------------------------------------------------------------ */
typedef struct cq_denoiser {
    void *self;
    int channels; /* floats per latent token, in x and in the velocity */
    /* The conditioning of one prompt's rows [n_rows][row width] for a target
     * of lat_h x lat_w codec latents; *cond is freed with cond_free. */
    cq_status (*prepare)(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond);
    /* x [tokens][channels] at model timestep t -> velocity [tokens][channels]. */
    cq_status (*step)(void *self, void *cond, const float *x, float t, float *velocity);
    void (*cond_free)(void *self, void *cond);
} cq_denoiser;

/* ------------------------------------------------------------------------ */
typedef struct cq_latent_codec {
    void *self;
    int channels;       /* latent channels C */
    int image_channels; /* channels of a decoded image */
    int factor;         /* image pixels per latent pixel along each side */
    /* [C][h][w] latents <-> [tokens][token channels], the denoiser's order */
    void (*pack)(void *self, const float *chw, float *tokens, int lat_h, int lat_w);
    void (*unpack)(void *self, const float *tokens, float *chw, int lat_h, int lat_w);
    /* in place on [C][h][w]: normalise (codec space -> denoiser space) and back */
    cq_status (*normalize)(void *self, float *z, int lat_h, int lat_w);
    cq_status (*denormalize)(void *self, float *z, int lat_h, int lat_w);
    /* z [C][h][w] (codec space) -> image [image_channels][h*factor][w*factor] in [-1, 1] */
    cq_status (*decode)(void *self, const float *z, int lat_h, int lat_w, float *image);
    /* image [image_channels][H][W] -> moments [2C][H/factor][W/factor] (mean | logvar); NULL: decode only */
    cq_status (*encode)(void *self, const float *image, int H, int W, float *moments);
} cq_latent_codec;

/* ------------------------------------------------------------------------ */
typedef struct cq_causal_lm {
    void *self;
    int vocab;         /* logits per position */
    int max_positions; /* the model's position limit, 0 when it gives none */
    bool has_logits;   /* false: the model has no head and cannot generate */
    /* a cache of max_tokens positions, prompts fed in chunks of max_batch rows */
    cq_status (*cache_create)(void *self, int max_tokens, int max_batch, void **cache);
    void (*cache_free)(void *cache);
    int (*capacity)(const void *cache);
    /* forget everything after the first n positions */
    cq_status (*truncate)(void *cache, int n);
    /* append ids[0..n); logits (when not NULL) receives the last one's [vocab] */
    cq_status (*feed)(void *cache, const int32_t *ids, int n, float *logits);
} cq_causal_lm;

/* ------------------------------------------------------------------------ */
/* [C][hw] channel-major latents <-> [hw][C] tokens (one token per latent
 * pixel, as Qwen-Image-2.1's _pack_latents lays them out), and back. */
void cq_latents_chw_to_tokens(const float *chw, float *tokens, int channels, size_t hw);
void cq_latents_tokens_to_chw(const float *tokens, float *chw, int channels, size_t hw);

/* [C][h][w] latents <-> Z-Image's 2x2 patch tokens: token (y/2)*(w/2) + x/2
 * holds 4C values, value (py*2 + px)*C + c = latent (c, y, x) with py = y%2,
 * px = x%2 (channel fastest, as the DiT's patchify permutes them); h and w
 * even. */
void cq_latents_patchify2(const float *chw, float *tokens, int channels, int h, int w);
void cq_latents_unpatchify2(const float *tokens, float *chw, int channels, int h, int w);
/* The same 2x2 tokens with the channel slowest, as Qwen-Image's _pack_latents
 * permutes them: value c*4 + (y%2)*2 + x%2 = latent (c, y, x). */
void cq_latents_pack2x2(const float *chw, float *tokens, int channels, int h, int w);
void cq_latents_unpack2x2(const float *tokens, float *chw, int channels, int h, int w);

#endif /* CQ_MODELS_COMPONENT_H */
