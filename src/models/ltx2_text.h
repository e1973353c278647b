/*
 * ltx2_text.h — LTX-2.3 / 2.5's text side between the Gemma tower and the
 * DiT: the feature extractor ("V2") over every hidden state of the tower and
 * the two embeddings connectors (diffusers' LTX2TextConnectors at 58eb52c0,
 * per_modality_projections true; ltx-core's FeatureExtractorV2 and
 * Embeddings1DConnector as the second reference).
 *
 * Features, per token t (the tower's L = text_proj_in_factor hidden states
 * of width C = caption_channels, transformers' order):
 *   n[t, c, l] = h_l[t, c] / sqrt(mean_c h_l[t, c]^2 + 1e-6)   (per token and state)
 *   f[t]       = n[t] flattened with the state index fastest (c * L + l),
 *                zero on pad tokens
 *   video[t]   = W_v (f[t] * sqrt(video_hidden_dim / C)) + b_v
 *   audio[t]   = W_a (f[t] * sqrt(audio_hidden_dim / C)) + b_a
 * (the biases when proj_bias; a pad token's features are the bias alone).
 *
 * A connector (one per stream, width D = heads * head_dim, which must be
 * the stream's projection width), on the T features of one prompt:
 *   1. the valid tokens move to the front in their order (a stable sort on
 *      the mask); row i >= #valid becomes learnable_registers[i mod R]
 *      (T must be a multiple of R); the attention then sees every row;
 *   2. blocks: x += to_out(gate * attn(RMS(x))), x += FF(RMS(x)), where the
 *      norms are weightless (eps 1e-6), attn has q/k/v/out biases, q and k
 *      RMS-normed with a weight across the whole width, split RoPE per head
 *      (positions 0..T-1 over connector_rope_base_seq_len, the DiT's 1-axis
 *      ladder over the whole width D: head h owns frequencies
 *      [h dh/2, (h+1) dh/2)), softmax scale 1/sqrt(dh), the gate
 *      2 sigmoid(Linear(RMS(x))) per head (gated configs); FF is
 *      Linear(4D, bias) -> gelu-tanh -> Linear(D, bias);
 *   3. a final weightless RMS norm.
 * The video output is multiplied by the binary mask the connector returns,
 * which is all ones with registers: no change, and no mask downstream.
 *
 * Followed from the config: caption_channels, text_proj_in_factor, both
 * connectors' heads, head dims, layers, register counts and gating,
 * video_hidden_dim / audio_hidden_dim, proj_bias,
 * connector_rope_base_seq_len, rope_theta, rope_double_precision.
 * Refused with a message: per_modality_projections false (LTX-2.0's one
 * projection and masked mean/range norm), rope_type other than "split",
 * connectors without registers (null or 0: the attention mask path),
 * projection widths unequal to the connector widths.
 * causal_temporal_positioning is accepted: both references store it and
 * neither reads it.
 *
 * Batch 1; one prompt of T tokens; a mask of 0/1 per token (any pattern:
 * the pipeline's is a left padding).
 */
#ifndef CQ_MODELS_LTX2_TEXT_H
#define CQ_MODELS_LTX2_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

typedef enum cq_ltx2_stream { CQ_LTX2_VIDEO = 0, CQ_LTX2_AUDIO = 1, CQ_LTX2_STREAMS = 2 } cq_ltx2_stream;

#define CQ_LTX2_TEXT_MAX_TOKENS 65536

typedef struct cq_ltx2_connector_config {
    int heads, head_dim, dim; /* dim = heads * head_dim */
    int n_layers;
    int n_registers;          /* learnable registers (>= 1) */
    bool gated;               /* per-head attention gates */
} cq_ltx2_connector_config;

typedef struct cq_ltx2_text_config {
    int caption_channels;     /* C: the tower's hidden width */
    int n_states;             /* L: text_proj_in_factor, the tower's layers + 1 */
    int proj_dim[CQ_LTX2_STREAMS]; /* video_hidden_dim, audio_hidden_dim */
    bool proj_bias;
    cq_ltx2_connector_config conn[CQ_LTX2_STREAMS];
    int rope_base;            /* connector_rope_base_seq_len */
    double rope_theta;
    bool rope_f64;            /* rope_double_precision */
} cq_ltx2_text_config;

typedef struct cq_ltx2_text cq_ltx2_text;

/* The config from `<prefix>config_json` (diffusers' LTX2TextConnectors config.json); refuses what is not run
 * (see above), naming the member. */
cq_status cq_ltx2_text_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_text_config *c);
/* The same from a JSON text (tests, tools). */
cq_status cq_ltx2_text_parse_config_text(const char *json, cq_ltx2_text_config *c);
/* Load from a pack: tensors `<prefix><diffusers name>` ("connectors." as `cortiq convert` writes a pipeline's
 * connectors/ folder or a lone LTX2TextConnectors folder). */
cq_status cq_ltx2_text_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_text **out);
void cq_ltx2_text_free(cq_ltx2_text *m);
const cq_ltx2_text_config *cq_ltx2_text_get_config(const cq_ltx2_text *m);

/* The projected features of every token: hidden [L][T][C] (cq_gemma4_outputs.all_hidden's layout), mask NULL
 * (all real) or [T] of 0/1; video [T][video_hidden_dim], audio [T][audio_hidden_dim] (either may be NULL), in
 * the tokens' order (a pad token's row is the bias). */
cq_status cq_ltx2_features(cq_ltx2_text *m, const float *hidden, const uint8_t *mask, int T, float *video,
                           float *audio);
/* One connector on projected features feat [T][dim] with their mask (NULL: all real): out [T][dim]. T must be a
 * multiple of the connector's register count. */
cq_status cq_ltx2_connector_forward(cq_ltx2_text *m, cq_ltx2_stream stream, const float *feat, const uint8_t *mask,
                                    int T, float *out);
/* Both: the prompt's context rows for the DiT, video [T][video dim] and audio [T][audio dim]. Only the valid
 * tokens' features are computed (the pads' rows become registers). */
cq_status cq_ltx2_text_encode(cq_ltx2_text *m, const float *hidden, const uint8_t *mask, int T, float *video,
                              float *audio);

/* Tests: called with each intermediate device tensor. Names, s = "video" / "audio":
 *   "<s>_features" [#valid, dim]: the valid tokens' projected features, in order (encode);
 *   "<s>_in" [T, dim]: the connector's input after the registers;
 *   "rope_<s>_cos" / "rope_<s>_sin" [T, dim / 2];
 *   "<s>_block<i>" [T, dim]: after block i;
 *   "<s>_out" [T, dim].
 * The tensors are valid during the call only. NULL clears it. */
typedef void (*cq_ltx2_text_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_ltx2_text_set_tap(cq_ltx2_text *m, cq_ltx2_text_tap_fn fn, void *user);

#endif /* CQ_MODELS_LTX2_TEXT_H */
