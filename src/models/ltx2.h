/*
 * ltx2.h — LTX-2's audio-video denoiser (diffusers'
 * LTX2VideoTransformer3DModel at 58eb52c0, the LTX-2.3 / 2.5 layout): two
 * residual streams, video tokens [frames * rows * cols, dim] and audio
 * tokens [audio frames, audio_dim], run side by side through the same
 * blocks. Per block and stream: self-attention (3-D or 1-D split RoPE),
 * prompt cross-attention (no RoPE), then audio->video and video->audio
 * attention (time-only RoPE on both sides), then the feed-forward; each
 * modulated by its stream's adaLN-single tables plus the block's learned
 * rows. The output head is a LayerNorm modulated by the embedded timestep,
 * then a projection to the latent channels. The model predicts a velocity.
 *
 * What it takes (as the reference's forward, batch 1, no masks):
 *  - latent tokens: video [T, in_channels] in (frame, row, col) order, audio
 *    [Ta, audio_in_channels] in time order (already patchified, patch 1);
 *  - the prompt rows of each stream, already as wide as the stream (the
 *    connectors' outputs: use_prompt_embeddings false);
 *  - the timesteps as the model receives them (LTX2Pipeline passes 1000
 *    sigma): one value for the stream or one per token; `sigma` and
 *    `audio_sigma` as its sigma arguments (the same 1000 sigma there);
 *  - use_cross_timestep (LTX2Pipeline: true), isolate_modalities, the STG
 *    blocks (their self-attentions return their values; needs
 *    perturbed_attn).
 * Per-token timesteps are handled as runs of equal values (the modulation
 * is computed once per run; at most CQ_LTX2_MAX_RUNS runs per stream).
 *
 * Not here: the caption projection of LTX-2.0 (use_prompt_embeddings),
 * interleaved RoPE, attention masks, the keyframe row (diffusers stores it
 * and does not apply it; neither does this), batches.
 */
#ifndef CQ_MODELS_LTX2_H
#define CQ_MODELS_LTX2_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_LTX2_TIMESTEP_CHANNELS 256 /* the sinusoid every adaLN-single reads */
#define CQ_LTX2_MAX_RUNS 256          /* runs of equal per-token timesteps per stream */

typedef struct cq_ltx2_config {
    /* video stream */
    int in_channels, out_channels;
    int heads, head_dim, dim;       /* dim = heads * head_dim */
    bool gated_attn, cross_attn_mod, ff_bias;
    /* audio stream */
    int audio_in_channels, audio_out_channels;
    int audio_heads, audio_head_dim, audio_dim;
    bool audio_gated_attn, audio_cross_attn_mod, audio_ff_bias;
    /* shared */
    int n_layers;
    bool prompt_adaln;     /* use_prompt_adaln_single with a prompt modulation (timestep-dependent context K/V) */
    bool perturbed_attn;   /* STG support */
    bool keyframes;        /* use_keyframes_abs_pos_embedding: the row is in the pack, not applied */
    float norm_eps;
    float gate_factor;     /* cross_attn_timestep_scale_multiplier / timestep_scale_multiplier */
    /* positions and RoPE */
    double rope_theta;
    bool rope_f64;
    int vae_scale[3];      /* (time, height, width) */
    int audio_scale, audio_rate, audio_hop, causal_offset;
    float max_pos[3];      /* pos_embed_max_pos, base_height, base_width */
    float audio_max_pos;   /* audio_pos_embed_max_pos */
    float cross_max_pos;   /* the larger of the two */
} cq_ltx2_config;

typedef struct cq_ltx2 cq_ltx2;

/* The config alone from `<prefix>config_json`. Refuses what this
 * implementation does not run, naming it (patch sizes other than 1, the
 * caption projection, interleaved RoPE, affine block norms, other q/k norms
 * or activations, attention without biases, prompt widths unequal to the
 * streams', unequal head counts). */
cq_status cq_ltx2_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_config *c);
/* The same from a config.json's text. */
cq_status cq_ltx2_parse_config_json(const char *json, cq_ltx2_config *c);
/* Load from a CMF pack: tensors `<prefix><diffusers name>` ("dit." as
 * `cortiq convert` writes a transformer folder). */
cq_status cq_ltx2_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2 **out);
void cq_ltx2_free(cq_ltx2 *m);
const cq_ltx2_config *cq_ltx2_get_config(const cq_ltx2 *m);

typedef struct cq_ltx2_inputs {
    const float *video;          /* [frames * height * width][in_channels] */
    int frames, height, width;   /* the latent grid */
    double fps;
    const float *audio;          /* [audio_frames][audio_in_channels] */
    int audio_frames;
    const float *ctx;            /* [n_ctx][dim] */
    int n_ctx;
    const float *audio_ctx;      /* [n_audio_ctx][audio_dim] */
    int n_audio_ctx;
    const float *timestep;       /* 1 or frames * height * width values */
    int n_timestep;
    const float *audio_timestep; /* 1 or audio_frames values */
    int n_audio_timestep;
    float sigma, audio_sigma;
    bool use_cross_timestep;     /* the A<->V tables read the other stream's sigma (else each its own timestep) */
    bool isolate_modalities;     /* no audio<->video attention */
    const int *stg_blocks;       /* blocks whose self-attentions are perturbed (perturbed_attn only) */
    int n_stg_blocks;
} cq_ltx2_inputs;


/* The state of one prompt and latent grid, for the steps of a sampler.
 * Several may live at once (the conditional and unconditional passes of
 * guidance). A model, its backend and its states are used by one thread at
 * a time. */
typedef struct cq_ltx2_cond cq_ltx2_cond;
/* Reads the grid (frames, height, width, fps, audio_frames) and both prompts
 * of `in`: the prompt rows are uploaded, the RoPE tables made and the token
 * buffers sized once. Sizes and values are checked (CQ_ERR_SHAPE,
 * CQ_ERR_INVALID_ARG, CQ_ERR_NUMERIC naming the input). */
cq_status cq_ltx2_prepare(cq_ltx2 *m, const cq_ltx2_inputs *in, cq_ltx2_cond **out);
/* One step: reads the tokens, timesteps, sigmas and flags of `in`, whose
 * grid must be the prepared one (its prompts are not read again):
 * video_out [T][out_channels], audio_out [Ta][audio_out_channels]. The
 * buffers sized by the runs of timesteps grow at the first step (and when
 * the runs outgrow them); other steps allocate nothing. A device backend
 * records the second step of an unchanged layout (runs, isolation, STG
 * blocks) and replays it from then on. */
cq_status cq_ltx2_step(cq_ltx2_cond *c, const cq_ltx2_inputs *in, float *video_out, float *audio_out);
void cq_ltx2_cond_free(cq_ltx2_cond *c);
/* One forward: prepare, one step, free. */
cq_status cq_ltx2_forward(cq_ltx2 *m, const cq_ltx2_inputs *in, float *video_out, float *audio_out);

/* Tests: called with each intermediate tensor as it is made (device
 * tensors). Names (the golden files' keys):
 *   "<table>_mod" [runs, k * width] and "<table>_emb" [runs, width] for the
 *   adaLN-single tables time_embed, audio_time_embed, prompt_adaln,
 *   audio_prompt_adaln, av_video_ss, av_audio_ss, av_video_gate,
 *   av_audio_gate, one row per run of the stream's timesteps;
 *   "rope_{video,audio,xvideo,xaudio}_{cos,sin}" [rows, width / 2];
 *   "proj_in" / "audio_proj_in", "block<i>_video" / "block<i>_audio";
 *   per block i, "b<i>_<a>_q" (the query input), "b<i>_<a>_kv" (the key and
 *   value input of cross attentions) and "b<i>_<a>_out" (after to_out) for
 *   a in attn1, audio_attn1, attn2, audio_attn2, a2v, v2a; "b<i>_ff_in",
 *   "b<i>_ff_out", "b<i>_audio_ff_in", "b<i>_audio_ff_out";
 *   "sample", "audio_sample". The RoPE tables come from prepare, the rest
 *   from each step; while a tap is set, steps run op by op (never
 *   recorded). NULL clears it. */
typedef void (*cq_ltx2_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_ltx2_set_tap(cq_ltx2 *m, cq_ltx2_tap_fn fn, void *user);

#endif /* CQ_MODELS_LTX2_H */
