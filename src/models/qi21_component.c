/*
 * qi21_component.c — Qwen-Image-2.1 behind the component interfaces
 * (component.h): the denoiser, whose prepared conditioning is the prompt's
 * prefix K/V cache, and the VAE as the latent codec (Qwen-Image's VAE too).
 */
#include <string.h>

#include "base/base.h"
#include "models/qi21.h"
#include "models/qi21_vae.h"

/* ---- the denoiser ---- */

/* The layout of one text-to-image prompt: its text rows, then the target's
 * slots (one per 2x2 group of latent tokens). */
static cq_status dn_prepare(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond) {
    *cond = NULL;
    const int slots = lat_h * lat_w / 4, vlm = n_rows + slots;
    uint8_t *mask = cq_calloc((size_t)vlm, 1);
    if (!mask) return CQ_ERR_NOMEM;
    memset(mask + n_rows, 1, (size_t)slots);
    const int32_t shapes[1][3] = {{1, lat_h, lat_w}};
    const cq_qi21_layout lay = {.vlm_len = vlm, .img_mask = mask, .n_images = 1, .img_shapes = shapes};
    cq_qi21_cache *c = NULL;
    cq_status s = cq_qi21_prefill(self, &lay, rows, NULL, &c);
    cq_free(mask);
    *cond = c;
    return s;
}

static cq_status dn_step(void *self, void *cond, const float *x, float t, float *velocity) {
    return cq_qi21_step(self, cond, x, t, velocity);
}

static void dn_cond_free(void *self, void *cond) {
    (void)self;
    cq_qi21_cache_free(cond);
}

cq_denoiser cq_qi21_denoiser(cq_qi21 *m) {
    return (cq_denoiser){.self = m, .channels = cq_qi21_get_config(m)->in_channels, .prepare = dn_prepare,
                         .step = dn_step, .cond_free = dn_cond_free};
}

/* ---- the VAE as the latent codec (planar latents and images) ---- */

/* Qwen-Image-2.1's denoiser reads one token per latent pixel, Qwen-Image's one per 2x2 patch (channel slowest). */
static void vae_pack(void *self, const float *chw, float *tokens, int lat_h, int lat_w) {
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(self);
    if (c->kind == CQ_QI21_VAE_QIMAGE)
        cq_latents_pack2x2(chw, tokens, c->z_dim, lat_h, lat_w);
    else
        cq_latents_chw_to_tokens(chw, tokens, c->z_dim, (size_t)lat_h * (size_t)lat_w);
}

static void vae_unpack(void *self, const float *tokens, float *chw, int lat_h, int lat_w) {
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(self);
    if (c->kind == CQ_QI21_VAE_QIMAGE)
        cq_latents_unpack2x2(tokens, chw, c->z_dim, lat_h, lat_w);
    else
        cq_latents_tokens_to_chw(tokens, chw, c->z_dim, (size_t)lat_h * (size_t)lat_w);
}

static cq_status vae_normalize(void *self, float *z, int lat_h, int lat_w) {
    return cq_qi21_vae_normalize(self, z, lat_h, lat_w, CQ_QI21_VAE_PLANAR);
}

static cq_status vae_denormalize(void *self, float *z, int lat_h, int lat_w) {
    return cq_qi21_vae_denormalize(self, z, lat_h, lat_w, CQ_QI21_VAE_PLANAR);
}

static cq_status vae_decode(void *self, const float *z, int lat_h, int lat_w, float *image) {
    return cq_qi21_vae_decode(self, z, lat_h, lat_w, CQ_QI21_VAE_PLANAR, image);
}

static cq_status vae_encode(void *self, const float *image, int H, int W, float *moments) {
    return cq_qi21_vae_encode(self, image, H, W, CQ_QI21_VAE_PLANAR, moments);
}

cq_latent_codec cq_qi21_vae_codec(cq_qi21_vae *v) {
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(v);
    return (cq_latent_codec){.self = v, .channels = c->z_dim, .image_channels = c->image_channels,
                             .factor = c->spatial_factor, .pack = vae_pack, .unpack = vae_unpack,
                             .normalize = vae_normalize, .denormalize = vae_denormalize, .decode = vae_decode,
                             .encode = c->has_encoder ? vae_encode : NULL};
}
