/*
 * tables.h — the tensor table of each architecture (kit/tensors.h): what a
 * pack of it holds, as a function of the config. The loaders bind from these
 * lists, the benchmark packs are generated from them and `cortiq convert`
 * checks a converted pack against them.
 */
#ifndef CQ_MODELS_TABLES_H
#define CQ_MODELS_TABLES_H

#include <stdbool.h>

#include "models/flux_vae.h"
#include "models/gemma4.h"
#include "models/kit/tensors.h"
#include "models/ltx2.h"
#include "models/ltx2_audio.h"
#include "models/ltx2_text.h"
#include "models/ltx2_upsampler.h"
#include "models/ltx2_vae.h"
#include "models/qi21.h"
#include "models/qi21_vae.h"
#include "models/qimage.h"
#include "models/qwen25vl_vision.h"
#include "models/qwen3.h"
#include "models/qwen3vl_vision.h"
#include "models/zimage.h"

/* The Qwen-Image-2.1 denoiser's tensors, names under `prefix` ("dit."). */
cq_status cq_qi21_tensors(const cq_qi21_config *c, const char *prefix, cq_tt_list *out);
/* The sinusoidal timestep features the denoiser's first Linear reads. */
#define CQ_QI21_TIMESTEP_CHANNELS 256

/* The Qwen-Image (v1) denoiser's tensors, names under `prefix` ("dit."). */
cq_status cq_qimage_tensors(const cq_qimage_config *c, const char *prefix, cq_tt_list *out);

/* The Z-Image denoiser's tensors, names under `prefix` ("dit."). */
cq_status cq_zimage_tensors(const cq_zimage_config *c, const char *prefix, cq_tt_list *out);

/* LTX-2's audio-video denoiser's tensors, names under `prefix` ("dit."). */
cq_status cq_ltx2_tensors(const cq_ltx2_config *c, const char *prefix, cq_tt_list *out);

/* LTX-2.3 / 2.5's feature projections and embeddings connectors, names under `prefix` ("connectors."). */
cq_status cq_ltx2_text_tensors(const cq_ltx2_text_config *c, const char *prefix, cq_tt_list *out);

/* LTX-2's spatial latent upscaler x2, names under `prefix` ("upsampler."). */
cq_status cq_ltx2_ups_tensors(const cq_ltx2_ups_config *c, const char *prefix, cq_tt_list *out);
/* LTX-2.3 / 2.5's audio VAE (its decoder and latent statistics; the encoder a subtree nobody binds), names
 * under `prefix` ("audio_vae."). */
cq_status cq_ltx2_audio_vae_tensors(const cq_ltx2_audio_vae_config *c, const char *prefix, cq_tt_list *out);
/* LTX-2.3 / 2.5's conv video VAE (the decoder required; the encoder optional, all or nothing; the latent
 * statistics), names under `prefix` ("vae."). */
cq_status cq_ltx2_vae_tensors(const cq_ltx2_vae_config *c, const char *prefix, cq_tt_list *out);
/* The vocoder (with its BWE: both generators and the STFT / mel tables), names under `prefix` ("vocoder."). */
cq_status cq_ltx2_vocoder_tensors(const cq_ltx2_vocoder_config *c, const char *prefix, cq_tt_list *out);

/* The Qwen3 text tower's tensors: the stack under prefix + stack ("te." +
 * "model." or "model.language_model."), the head at prefix + "lm_head.weight"
 * (optional: tied embeddings or a tower without logits). */
cq_status cq_qwen3_tensors(const cq_qwen3_config *c, const char *prefix, const char *stack, cq_tt_list *out);
/* The same for a text encoder that reads hidden state `layers` (cq_qwen3_load_encoder): decoder layers from
 * `layers` on and the final norm are optional (a pack made for it may leave them out). */
cq_status cq_qwen3_tensors_upto(const cq_qwen3_config *c, const char *prefix, const char *stack, int layers,
                                cq_tt_list *out);
/* Where the stack lives after `prefix`: the first of "model.language_model.", "model.", "language_model.", ""
 * holding embed_tokens.weight, or NULL. */
const char *cq_qwen3_stack_prefix(const cq_cmf *cmf, const char *prefix);

/* The Gemma-4 text tower's tensors: the stack under prefix + stack ("" + "model."), per layer as its kind
 * (sliding or full) shapes it, v_proj only where the layer has one; the head at prefix + "lm_head.weight" is
 * optional (tied), a multimodal wrapper's vision and audio towers are subtrees nobody binds. */
cq_status cq_gemma4_tensors(const cq_gemma4_config *c, const char *prefix, const char *stack, cq_tt_list *out);
/* Where the Gemma-4 stack lives after `prefix` (as cq_qwen3_stack_prefix), or NULL. */
const char *cq_gemma4_stack_prefix(const cq_cmf *cmf, const char *prefix);

/* The Qwen2.5-VL vision tower's tensors under prefix + stem ("te." + "model.visual." or "visual."). */
cq_status cq_qwen25vl_vision_tensors(const cq_qwen25vl_vision_config *c, const char *prefix, const char *stem,
                                     cq_tt_list *out);

/* The Qwen3-VL vision tower's tensors under prefix + stem ("te." + "model.visual." or "visual."): the tower,
 * then the deepstack mergers. */
cq_status cq_qwen3vl_vision_tensors(const cq_qwen3vl_vision_config *c, const char *prefix, const char *stem,
                                    cq_tt_list *out);

/* The geometry of a Qwen-Image VAE (Qwen-Image-2.1's or Qwen-Image's, qi21_vae.h), as its config gives it. */
#define CQ_QI21_VAE_MAX_LEVELS 8
typedef struct cq_qi21_vae_geometry {
    cq_qi21_vae_kind kind;
    int base_dim, decoder_base_dim, z_dim, num_res_blocks, in_channels, out_channels, patch;
    int n_mult, mult[CQ_QI21_VAE_MAX_LEVELS];
    bool tdown[CQ_QI21_VAE_MAX_LEVELS];
} cq_qi21_vae_geometry;
/* Channel widths of every level: encoder level i maps enc[i] -> enc[i + 1]; decoder level i maps dec_in[i] ->
 * dec_out[i] and (but the last) upsamples to up_out[i] channels, dec_in[i + 1] (Qwen-Image halves them there). */
typedef struct cq_qi21_vae_widths {
    int enc[CQ_QI21_VAE_MAX_LEVELS + 1];
    int dec_mid;  /* the decoder's conv_in and mid block */
    int dec_in[CQ_QI21_VAE_MAX_LEVELS], dec_out[CQ_QI21_VAE_MAX_LEVELS], up_out[CQ_QI21_VAE_MAX_LEVELS];
} cq_qi21_vae_widths;
void cq_qi21_vae_get_widths(const cq_qi21_vae_geometry *g, cq_qi21_vae_widths *w);
/* The file name of a block: residual block j of level `level` (j >= 0) or the level's resampler (j < 0), in the
 * encoder or the decoder ("encoder.down_blocks.4" or "encoder.down_blocks.1.resnets.1", ...). */
cq_status cq_qi21_vae_block_name(const cq_qi21_vae_geometry *g, bool encoder, int level, int j, char *dst, size_t len);
/* The geometry from `<prefix>config_json` (the checks of the VAE's loader). */
cq_status cq_qi21_vae_parse_geometry(const cq_cmf *cmf, const char *prefix, cq_qi21_vae_geometry *g);
/* The VAE's tensors under `prefix` ("vae."): the encoder and quant_conv are
 * optional (text to image never encodes), the temporal convolutions too (a
 * single frame never runs them). */
cq_status cq_qi21_vae_tensors(const cq_qi21_vae_geometry *g, const char *prefix, cq_tt_list *out);

/* The Flux VAE's (AutoencoderKL's) tensors under `prefix` ("vae."): the
 * encoder and quant_conv are optional, all or nothing (text to image never
 * encodes); quant_conv and post_quant_conv as the config has them. */
cq_status cq_flux_vae_tensors(const cq_flux_vae_config *c, const char *prefix, cq_tt_list *out);

/* Check every component of a known architecture in the pack against its
 * table (tables_check.c): the image pipeline's dit. / te. / vae., a lone
 * denoiser (Qwen-Image-2.1, Qwen-Image or Z-Image) or VAE, a Qwen3 language model, a Qwen2.5-VL text encoder's
 * vision tower where the pack keeps it. Findings go to note; the counts
 * add up in *rep; *n_checked receives the number of components checked (0:
 * no known architecture). */
cq_status cq_tables_check_pack(const cq_cmf *cmf, cq_tt_note_fn note, void *user, cq_tt_report *rep, int *n_checked);

#endif /* CQ_MODELS_TABLES_H */
