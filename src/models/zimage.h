/*
 * zimage.h — the Z-Image denoiser (diffusers' ZImageTransformer2DModel): a
 * single-stream DiT over [image tokens | caption rows], each part padded to
 * a multiple of 32 rows and first refined on its own (the image by the
 * modulated noise refiner, the caption by the unmodulated context refiner).
 *
 * Usage: load once per model; prepare once per prompt and latent size (the
 * caption embedder and the context refiner do not depend on t, so they run
 * there, once); step once per denoising step with the packed latent tokens
 * and the timestep. Several conditionings may live at once (the positive and
 * negative prompts of classifier-free guidance).
 *
 * Tokens: a latent [C][H][W] (H, W even) is cut into 2x2 patches in raster
 * order; token (h, w) holds latent pixel (2h + ph, 2w + pw) of channel c at
 * index (ph * 2 + pw) * C + c (channel fastest, the reference's patchify).
 * step returns the model's raw output in the same layout (the pipeline
 * negates it to get the flow velocity).
 */
#ifndef CQ_MODELS_ZIMAGE_H
#define CQ_MODELS_ZIMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

#define CQ_ZIMAGE_TIMESTEP_CHANNELS 256 /* sinusoidal features the t-embedder reads */
#define CQ_ZIMAGE_TIMESTEP_MID 1024     /* the t-embedder's hidden width */
#define CQ_ZIMAGE_ADALN_MAX 256         /* the adaLN input is min(dim, 256) wide */
#define CQ_ZIMAGE_SEQ_MULTIPLE 32       /* image tokens and caption rows are padded to multiples of this */

typedef struct cq_zimage_config {
    int in_channels;      /* latent channels C */
    int patch_channels;   /* floats per token: 4 C (2x2 patches, one frame) */
    int dim, n_heads, head_dim;
    int n_layers, n_refiner_layers;
    int ffn_hidden;       /* int(dim / 3 * 8), as the reference computes it */
    int adaln_dim;        /* min(dim, 256) */
    int cap_feat_dim;     /* width of the caption rows (the text encoder's) */
    int axes_dims[3];     /* RoPE dims of the frame, height, width axes; sum = head_dim */
    int axes_lens[3];     /* the reference's RoPE table lengths: positions must stay below them */
    double rope_theta;
    float t_scale;        /* the timestep is multiplied by it before the sinusoid */
    float norm_eps;       /* the block and caption RMSNorms (q/k norms use 1e-5, the final LayerNorm 1e-6) */
} cq_zimage_config;

typedef struct cq_zimage cq_zimage;
typedef struct cq_zimage_cond cq_zimage_cond;

/* The config alone (no weights) from `<prefix>config_json`. Refuses what
 * this implementation does not run, naming it: patch sizes other than 2 / 1,
 * several patch sizes, qk_norm false, the Omni variant (siglip_feat_dim). */
cq_status cq_zimage_parse_config(const cq_cmf *cmf, const char *prefix, cq_zimage_config *c);
/* Load from a CMF pack: tensors `<prefix><diffusers name>` (prefix "dit." as
 * `cortiq convert` writes a transformer folder and a pipeline's transformer/). */
cq_status cq_zimage_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_zimage **out);
void cq_zimage_free(cq_zimage *m);
const cq_zimage_config *cq_zimage_get_config(const cq_zimage *m);

/* The sequence of one prompt of n_cap caption rows and a lat_h x lat_w latent. */
typedef struct cq_zimage_layout {
    int lat_h, lat_w;         /* latent pixels */
    int tok_h, tok_w;         /* tokens: lat_h / 2, lat_w / 2 */
    int n_img, n_img_pad;     /* image tokens N and N' = N rounded up to 32 */
    int n_cap, n_cap_pad;     /* caption rows L and L' */
} cq_zimage_layout;
/* Check the sizes against the config (even sides, RoPE positions inside the
 * reference's tables, at least one caption row) and fill *lay. */
cq_status cq_zimage_layout_for(const cq_zimage_config *c, int n_cap, int lat_h, int lat_w, cq_zimage_layout *lay);
/* RoPE position ids of the unified sequence, pos[n_img_pad + n_cap_pad][3]:
 * image token (h, w) at (L' + 1, h, w), image pad rows at (0, 0, 0), caption
 * row i (pad rows included) at (1 + i, 0, 0). */
void cq_zimage_positions(const cq_zimage_layout *lay, int32_t *pos);

/* latent [C][lat_h][lat_w] <-> tokens [(lat_h/2)(lat_w/2)][4C] (even sides): cq_latents_patchify2 and
 * cq_latents_unpatchify2 (models/component.h), which the Flux VAE's codec packs with too. */

/* The conditioning of one prompt: cap_feats [n_cap][cap_feat_dim] (finite:
 * CQ_ERR_NUMERIC naming the row) through the caption embedder and the
 * context refiner, for a lat_h x lat_w latent. Sizes the step's buffers, so
 * steps allocate nothing. */
cq_status cq_zimage_prepare(cq_zimage *m, const float *cap_feats, int n_cap, int lat_h, int lat_w,
                            cq_zimage_cond **out);
/* One step: x [n_img][patch_channels] tokens at timestep t in [0, 1] (the
 * pipeline passes 1 - sigma) -> out [n_img][patch_channels], the model's raw
 * output. A device backend records the second step and replays it after. A
 * model, its backend and its conditionings are used by one thread at a time. */
cq_status cq_zimage_step(cq_zimage *m, cq_zimage_cond *c, const float *x, float t, float *out);
void cq_zimage_cond_free(cq_zimage_cond *c);
/* One reference forward on a latent: latent [C][lat_h][lat_w] and caption ->
 * out [C][lat_h][lat_w] (prepare, patchify, one step, unpatchify). */
cq_status cq_zimage_forward(cq_zimage *m, const float *latent, int lat_h, int lat_w, const float *cap_feats, int n_cap,
                            float t, float *out);
/* The sequence a conditioning was prepared for. */
const cq_zimage_layout *cq_zimage_cond_layout(const cq_zimage_cond *c);

/* Tests: called with each intermediate tensor as it is made (device
 * tensors; the callback may download them). Names and shapes:
 * "rope_cos" / "rope_sin" [N'+L', head_dim/2] and "cap_embed" / "cap_refined"
 * [L', dim] in prepare; "adaln_input" [1, adaln_dim], "x_embed" / "x_refined"
 * [N', dim] and "layer_<i>" [N'+L', dim] (image rows first) in each step.
 * While a tap is set steps run op by op (never recorded). NULL clears it. */
typedef void (*cq_zimage_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_zimage_set_tap(cq_zimage *m, cq_zimage_tap_fn fn, void *user);

/* The model as a denoiser (component.h): prepare is cq_zimage_prepare, step
 * cq_zimage_step on tokens of 4C channels. m must outlive the copies. */
cq_denoiser cq_zimage_denoiser(cq_zimage *m);

#endif /* CQ_MODELS_ZIMAGE_H */
