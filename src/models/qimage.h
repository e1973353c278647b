/*
 * qimage.h — the Qwen-Image (v1) denoiser, diffusers' QwenImageTransformer2DModel:
 * a dual-stream DiT (MMDiT). Text rows and image tokens keep their own
 * weights everywhere (modulation, projections, q/k norms, MLPs) and meet in
 * one joint attention over [text | image] per block; the output head reads
 * the image stream only.
 *
 * Usage: load once per model; prepare once per prompt and image layout (the
 * text embedder and the RoPE tables do not depend on t); step once per
 * denoising step with the packed image tokens and sigma. Several
 * conditionings may live at once (the positive and negative prompts of
 * classifier-free guidance).
 *
 * Tokens: each image of the layout is a grid of 2x2 latent patches in
 * raster order, one token of in_channels (64) floats each, channel slowest
 * (value c * 4 + py * 2 + px, as the pipeline's _pack_latents); the target's
 * tokens come first, then each condition image's (the edit pipelines).
 * step returns proj_out for every token, condition tokens included (the
 * pipelines keep the target's rows).
 */
#ifndef CQ_MODELS_QIMAGE_H
#define CQ_MODELS_QIMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

#define CQ_QIMAGE_TIMESTEP_CHANNELS 256 /* sinusoidal features the t-embedder reads */
#define CQ_QIMAGE_MAX_IMAGES 16         /* target + condition images in one layout */

typedef struct cq_qimage_config {
    int patch;         /* patch_size: 2 */
    int in_channels;   /* floats per packed token (img_in's input) */
    int out_channels;  /* latent channels of the output (out_channels, or in_channels when null) */
    int out_dim;       /* floats per output token: patch * patch * out_channels */
    int num_layers;
    int n_heads, head_dim, inner; /* inner = n_heads * head_dim */
    int mlp_hidden;    /* the FeedForward's 4 * inner */
    int joint_dim;     /* joint_attention_dim: width of the text rows */
    int axes[3];       /* RoPE dims of the frame, height, width axes; sum = head_dim */
    bool zero_cond_t;  /* condition-image tokens modulated at t = 0 (Edit-2511) */
} cq_qimage_config;

typedef struct cq_qimage cq_qimage;
typedef struct cq_qimage_cond cq_qimage_cond;

/* The config alone (no weights) from `<prefix>config_json`. Refuses, naming
 * it, what this implementation does not run: guidance_embeds,
 * use_additional_t_cond, use_layer3d_rope (Qwen-Image-Layered). */
cq_status cq_qimage_parse_config(const cq_cmf *cmf, const char *prefix, cq_qimage_config *c);
/* Load from a CMF pack: tensors `<prefix><diffusers name>` (prefix "dit." as
 * `cortiq convert` writes a transformer folder and a pipeline's transformer/). */
cq_status cq_qimage_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qimage **out);
void cq_qimage_free(cq_qimage *m);
const cq_qimage_config *cq_qimage_get_config(const cq_qimage *m);

/* One prompt's layout: img_shapes[n_images] = (frame, height, width) in
 * patch tokens, the target first (frame 1 each); n_txt text rows and an
 * optional text mask (txt_mask[n_txt], nonzero = a valid row; NULL: every
 * row valid). Masked rows still run through the text stream but no query
 * attends to them. */
typedef struct cq_qimage_layout {
    int n_images;
    const int32_t (*img_shapes)[3];
    int n_txt;
    const uint8_t *txt_mask;
} cq_qimage_layout;
/* Check a layout (frames, sides, the reference's RoPE table of positions
 * -4096 .. 4095, sizes) and count its image tokens (*n_img, all images) and
 * the target's (*n_target); either may be NULL. */
cq_status cq_qimage_layout_sizes(const cq_qimage_layout *lay, int *n_img, int *n_target);
/* RoPE positions (frame, row, column) of the joint sequence, pos[n_txt + n_img][3]: text row j at (m + j) on all
 * three axes, m the largest max(h / 2, w / 2) of the images; then image i's token (r, c) at
 * (i, r - (h - h / 2), c - (w - w / 2)) (centred grids). The layout must have passed cq_qimage_layout_sizes. */
void cq_qimage_positions(const cq_qimage_layout *lay, int32_t *pos);

/* The conditioning of one prompt: txt [n_txt][joint_dim] (finite: CQ_ERR_NUMERIC naming the row) through
 * txt_norm and txt_in, the RoPE tables of the layout and the step's buffers (steps allocate nothing). The
 * layout's arrays are copied. */
cq_status cq_qimage_prepare(cq_qimage *m, const cq_qimage_layout *lay, const float *txt, cq_qimage_cond **out);
/* One step: img [n_img][in_channels] tokens at sigma t in [0, 1] (the model multiplies by 1000 inside) ->
 * out [n_img][out_dim]. A device backend records the second step and replays it after. A model, its backend
 * and its conditionings are used by one thread at a time. */
cq_status cq_qimage_step(cq_qimage *m, cq_qimage_cond *c, const float *img, float t, float *out);
void cq_qimage_cond_free(cq_qimage_cond *c);
/* prepare, one step, free: one reference forward. */
cq_status cq_qimage_forward(cq_qimage *m, const cq_qimage_layout *lay, const float *txt, const float *img, float t,
                            float *out);
/* Image tokens (all images) and text rows of a conditioning. */
int cq_qimage_cond_tokens(const cq_qimage_cond *c);
int cq_qimage_cond_text_rows(const cq_qimage_cond *c);

/* Tests: called with each intermediate tensor as it is made (device
 * tensors; the callback may download them). Names and shapes:
 * "rope_cos" / "rope_sin" [L + N, head_dim / 2] (text rows first) and
 * "txt_embed" [L, inner] in prepare; "temb" [T, inner] (T = 2 with
 * zero_cond_t: rows t and 0), "img_embed" [N, inner], "img_mod_0" [T, 6 inner],
 * "txt_mod_0" [1, 6 inner], "img_<i>" [N, inner] / "txt_<i>" [L, inner]
 * after block i and "norm_out" [N, inner] in each step. While a tap is set
 * steps run op by op (never recorded). NULL clears it. */
typedef void (*cq_qimage_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_qimage_set_tap(cq_qimage *m, cq_qimage_tap_fn fn, void *user);

/* The model as a denoiser (component.h) for text to image: prepare is cq_qimage_prepare of a target of
 * (lat_h / 2) x (lat_w / 2) tokens and every text row valid, step cq_qimage_step (sigma as t). Needs
 * out_dim == in_channels. m must outlive the copies. */
cq_denoiser cq_qimage_denoiser(cq_qimage *m);

#endif /* CQ_MODELS_QIMAGE_H */
