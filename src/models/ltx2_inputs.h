/*
 * ltx2_inputs.h — the `cortiq forward` input contract of LTX-2's audio-video
 * denoiser: the arguments of one reference forward
 * (LTX2VideoTransformer3DModel.forward at 58eb52c0, batch 1, no masks) read
 * from a safetensors file, checked against a model's configuration, and laid
 * out as cq_ltx2_inputs. Names are the reference's argument names; every
 * tensor may carry a leading batch of 1; scalars are [1] or 0-D.
 *
 *   hidden_states               f32 [T, in_channels]   T = num_frames * height * width, (frame, row, col) order
 *   audio_hidden_states         f32 [Ta, audio_in_channels]
 *   encoder_hidden_states       f32 [L, dim]           the video prompt rows (the connector's output)
 *   audio_encoder_hidden_states f32 [La, audio_dim]
 *   timestep                    f32 [1] or [T]         1000 sigma, in [0, 1000]; per token (a conditioned
 *                                                      first frame at 0) as the pipeline shapes it
 *   audio_timestep              f32 [1] or [Ta]        optional: the video's when that is one value
 *   sigma                       f32 [1]                the sigma argument (1000 sigma, in [0, 1000])
 *   audio_sigma                 f32 [1]                optional: sigma's value
 *   num_frames, height, width   int [1]                the latent grid (any integer dtype)
 *   fps                         [1]                    optional, default 24 (any float or integer dtype)
 *   audio_num_frames            int [1]                optional; must equal Ta
 *   video_coords                f32 [3, T, 2]          optional: each token's [start, end) per axis
 *   audio_coords                f32 [1, Ta, 2]         optional
 *   use_cross_timestep          int/bool [1]           optional, default 1 (as LTX2Pipeline calls it)
 *   isolate_modalities          int/bool [1]           optional, default 0
 *   spatio_temporal_guidance_blocks  int [k]           optional: the STG blocks (perturbed_attn packs)
 *   encoder_attention_mask, audio_encoder_attention_mask  optional: refused unless all ones (no masks here)
 *
 * The reference uses coords as given; this runtime computes them from the
 * grid (ltx2_rope.h), so given coords must be the grid's: each token's
 * midpoint within 1e-5 (relative, at least 1e-5 absolute) of the computed
 * one, else they are refused as coords this runtime cannot use. Tensors of
 * other names are ignored (a golden case holding outputs and taps reads as
 * its inputs). Errors name the tensor. README.md ("cortiq forward")
 * documents the contract; the outputs are `sample` [T, out_channels] and
 * `audio_sample` [Ta, audio_out_channels].
 */
#ifndef CQ_MODELS_LTX2_INPUTS_H
#define CQ_MODELS_LTX2_INPUTS_H

#include "format/safetensors.h"
#include "models/ltx2.h"

#define CQ_LTX2_INPUTS_MAX_STG 64

typedef struct cq_ltx2_file_inputs {
    cq_ltx2_inputs in;           /* points into the buffers below */
    float *video, *audio, *ctx, *audio_ctx, *timestep, *audio_timestep;
    int stg[CQ_LTX2_INPUTS_MAX_STG];
    bool video_coords, audio_coords; /* whether the file gave them (and they matched) */
} cq_ltx2_file_inputs;

/* Read and validate the inputs of one forward for a model with config `cfg`; *out is cleared on failure. */
cq_status cq_ltx2_file_inputs_read(const cq_st *st, const cq_ltx2_config *cfg, cq_ltx2_file_inputs *out);
void cq_ltx2_file_inputs_free(cq_ltx2_file_inputs *in);

#endif /* CQ_MODELS_LTX2_INPUTS_H */
