/*
 * qwen3_impl.h — what qwen3_load.c (config parsing, weight binding) and
 * qwen3.c (forward passes, K/V cache) share: the loaded model.
 */
#ifndef CQ_MODELS_QWEN3_IMPL_H
#define CQ_MODELS_QWEN3_IMPL_H

#include "models/qwen3.h"

typedef struct qwen3_layer {
    cq_tensor q, k, v, o;           /* attention projections (any codec) */
    cq_tensor q_norm, k_norm;       /* F32 [head_dim]; unset without q/k norm (Qwen2) */
    cq_tensor q_bias, k_bias, v_bias; /* F32 [heads * head_dim]; unset without biases (Qwen3) */
    cq_tensor gate, up, down;       /* MLP */
    cq_tensor in_norm, post_norm;   /* F32 [hidden] */
} qwen3_layer;

struct cq_qwen3 {
    cq_backend *be;
    cq_qwen3_config cfg;
    cq_tensor embed;                /* [vocab, hidden] */
    cq_tensor lm_head;              /* [vocab, hidden]; a copy of `embed` when tied; unset without a head */
    cq_tensor norm;                 /* F32 [hidden] */
    qwen3_layer *layers;
    int n_loaded;                   /* decoder layers bound: n_layers, or fewer for a text encoder */
    bool has_norm;                  /* the final norm is bound (a full tower) */
    cq_tensor *owned;               /* F32 copies made at load, freed with the model */
    int n_owned, cap_owned;
    float *inv_freq;                /* [head_dim / 2], f32 as the reference computes it */
    uint8_t *rope_axis;             /* [head_dim / 2]: the position axis (0..2) each frequency reads */
};

/* The position axis of each of the head_dim/2 frequency channels under the
 * config's multimodal RoPE layout (qwen3_mrope.c; all 0 without mrope_section). */
void q3_rope_axes(const cq_qwen3_config *c, uint8_t *axis);

#endif /* CQ_MODELS_QWEN3_IMPL_H */
