/*
 * latents.h — Qwen-Image-2.1's latent grid and initial noise, laid out as the
 * reference pipeline lays them out.
 *
 * QwenImage21Pipeline: width and height are floored to multiples of 32
 * (vae_scale_factor 16, times 2), the latent grid is h = H/16, w = W/16 (both
 * even), and prepare_latents draws
 *   randn_tensor((B, 1, C, h, w), generator, dtype=prompt_embeds.dtype)
 * with C = transformer.config.in_channels (64). With one CPU generator that is
 * one torch.randn of B*C*h*w values in the pipeline's dtype (bfloat16 for a
 * bf16 pipeline), moved to the device afterwards. _pack_latents then views it
 * as (B, C, h*w) and transposes to tokens (B, h*w, C):
 *   tokens[b][y*w + x][c] = noise[((b*C) + c)*h*w + y*w + x].
 * The image token count L = h*w is what the schedule's mu uses.
 */
#ifndef CQ_PIPELINES_LATENTS_H
#define CQ_PIPELINES_LATENTS_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "pipelines/torch_rng.h"

/* The latent grid for a width x height image. The reference silently floors
 * sizes to multiples of 32; here anything else is an error naming the size
 * the reference would render instead. */
cq_status cq_qi21_latent_grid(int width, int height, int *lat_w, int *lat_h);

/* (B, C, h*w) channel-major values -> (B, h*w, C) tokens, and back. */
void cq_qi21_pack_latents(const float *chw, float *tokens, int batch, int channels, int lat_h, int lat_w);
void cq_qi21_unpack_latents(const float *tokens, float *chw, int batch, int channels, int lat_h, int lat_w);

/* n values of torch.randn in `dtype` from a generator seeded with `seed`,
 * widened to float: the noise every flow-matching pipeline starts from, in
 * its latent layout. */
cq_status cq_latent_noise(uint64_t seed, cq_torch_dtype dtype, cq_torch_f32_kernel kernel, size_t n, float *out);

/* The initial latents of the reference for `seed`: one generator seeded with
 * it draws batch*channels*lat_h*lat_w values of `dtype` (widened to float
 * here), packed into tokens (batch * lat_h*lat_w * channels floats). */
cq_status cq_qi21_initial_latents(uint64_t seed, cq_torch_dtype dtype, cq_torch_f32_kernel kernel, int batch,
                                    int channels, int lat_h, int lat_w, float *tokens);

#endif /* CQ_PIPELINES_LATENTS_H */
