/*
 * gemma4.h — the Gemma-4 text decoder (transformers' Gemma4TextModel, the
 * language half of Gemma4ForConditionalGeneration / gemma4_unified): the
 * prompt encoder of LTX-2.5, which reads every layer's hidden state.
 *
 * Semantics (transformers models/gemma4/modeling_gemma4.py):
 *   x = embed_tokens[ids] * sqrt(hidden)          (the scale as an f32 number)
 *   per layer l (type sliding_attention or full_attention, config layer_types):
 *     h = RMSNorm(x) * w_in                        (plain weight, not 1 + w)
 *     q = RMSNorm_head(h Wq^T) * q_norm, RoPE_half
 *     k = RMSNorm_head(h Wk^T) * k_norm, RoPE_half
 *     v = RMSNorm_head(h Wv^T) (no weight)          full layers with attention_k_eq_v:
 *                                                  v = RMSNorm_head(h Wk^T), the raw key projection
 *     a = softmax(q k^T * 1.0 + mask) v            (scale 1: no 1/sqrt(d))
 *     x = x + RMSNorm(a Wo^T) * w_post_attn
 *     h = RMSNorm(x) * w_pre_ff
 *     x = x + RMSNorm(down(gelu_tanh(gate h) * up h)) * w_post_ff
 *     x = x * layer_scalar[l]
 *   out = RMSNorm(x) * w_norm
 * Sliding layers: head_dim, num_key_value_heads, RoPE rope_parameters
 * .sliding_attention (default: theta 1e4 over the whole head); a query at i
 * sees keys (i - sliding_window, i]. Full layers: global_head_dim,
 * num_global_key_value_heads (with attention_k_eq_v), RoPE
 * rope_parameters.full_attention (proportional: the first
 * partial_rotary_factor * head_dim / 2 frequencies 1/theta^(2j/head_dim),
 * the rest 0 so those channels do not turn; default: 1/theta^(2j/head_dim)
 * over head_dim, which must then equal the sliding head_dim).
 *
 * Hidden states as transformers returns them (output_hidden_states):
 * index 0 = the scaled embeddings, l in 1..n_layers-1 = the output of
 * decoder layer l-1, n_layers = the final norm of the last layer's output.
 *
 * Padding: an optional key mask (1 real, 0 pad) that must be a left padding
 * (zeros, then ones), as the LTX pipeline builds it; positions are 0..n-1
 * including the pads (transformers' default position_ids). Pad keys are never
 * seen; pad query rows see nothing and come out as the op layer's zero
 * attention rows (the reference's values there are not defined by the
 * model; LTX zeroes those rows).
 *
 * Not supported (refused by the config check): per-layer input embeddings
 * (hidden_size_per_layer_input > 0), shared K/V layers, MoE blocks, the
 * double-wide MLP, use_bidirectional_attention "all" ("vision", the
 * gemma4_unified default, leaves text causal), attention biases, RoPE types
 * other than default / proportional. gemma4_unified configs drop keys their
 * class fixes; absent, they take that class's values (no per-layer inputs,
 * attention_k_eq_v, a 1024-key window).
 */
#ifndef CQ_MODELS_GEMMA4_H
#define CQ_MODELS_GEMMA4_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_GEMMA4_MAX_LAYERS 512

typedef enum cq_gemma4_kind { CQ_GEMMA4_SLIDING = 0, CQ_GEMMA4_FULL = 1 } cq_gemma4_kind;

/* RoPE of one layer type. */
typedef struct cq_gemma4_rope {
    bool proportional;  /* rope_type "proportional" (else "default") */
    double theta;       /* rope_theta */
    double partial;     /* partial_rotary_factor (proportional only; 1 when absent) */
    double factor;      /* factor (proportional only; 1 when absent) */
} cq_gemma4_rope;

typedef struct cq_gemma4_config {
    int vocab_size, hidden, intermediate, n_layers;
    int n_heads;
    int head_dim[2];     /* per kind: head_dim, global_head_dim */
    int n_kv_heads[2];   /* per kind: num_key_value_heads, num_global_key_value_heads (k_eq_v) */
    bool k_eq_v;         /* attention_k_eq_v: full layers have no v_proj, V is the raw k_proj output */
    int sliding_window;
    float eps;           /* rms_norm_eps */
    cq_gemma4_rope rope[2];
    int max_positions;
    uint8_t kind[CQ_GEMMA4_MAX_LAYERS]; /* cq_gemma4_kind of each layer */
} cq_gemma4_config;

/* Whether layer l has its own v_proj. */
static inline bool cq_gemma4_has_v(const cq_gemma4_config *c, int l) {
    return !(c->k_eq_v && c->kind[l] == CQ_GEMMA4_FULL);
}

typedef struct cq_gemma4 cq_gemma4;

/* The config from `<prefix>config_json`: a Gemma4TextConfig (model_type gemma4_text) or a wrapper holding one in
 * text_config (gemma4, gemma4_unified). Every bound checked; unsupported features refused (CQ_ERR_UNSUPPORTED). */
cq_status cq_gemma4_parse_config(const cq_cmf *cmf, const char *prefix, cq_gemma4_config *cfg);
/* The config from a JSON text (the same checks; tests, tools). */
cq_status cq_gemma4_parse_config_text(const char *json, cq_gemma4_config *cfg);
/* Load from a pack: the stack under <prefix>model.language_model., <prefix>model., <prefix>language_model. or
 * <prefix> itself (the first holding embed_tokens.weight). */
cq_status cq_gemma4_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_gemma4 **out);
void cq_gemma4_free(cq_gemma4 *m);
const cq_gemma4_config *cq_gemma4_get_config(const cq_gemma4 *m);

/* Host outputs of a forward (NULL = not wanted), indices as transformers' hidden_states (see above). */
typedef struct cq_gemma4_outputs {
    int layer;          /* which hidden state `hidden` receives, 0..n_layers */
    float *hidden;      /* [n, hidden] */
    float *all_hidden;  /* [n_layers + 1, n, hidden] */
} cq_gemma4_outputs;

/* Run ids[0..n) (one sequence) from position 0. mask: NULL (all real) or [n] of 0/1, a left padding. */
cq_status cq_gemma4_forward(cq_gemma4 *m, const int32_t *ids, const uint8_t *mask, int n, const cq_gemma4_outputs *o);

#endif /* CQ_MODELS_GEMMA4_H */
