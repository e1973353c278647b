/*
 * gemma4_impl.h — what gemma4_load.c (config, tensor table, binding) and
 * gemma4.c (the forward) share: the loaded model.
 */
#ifndef CQ_MODELS_GEMMA4_IMPL_H
#define CQ_MODELS_GEMMA4_IMPL_H

#include "models/gemma4.h"
#include "models/kit/tensors.h"

typedef struct g4_layer {
    cq_tensor q, k, v, o;           /* attention projections (v unset where V is the raw key projection) */
    cq_tensor q_norm, k_norm;       /* F32 [head_dim] */
    cq_tensor gate, up, down;       /* MLP */
    cq_tensor in_norm, post_attn_norm, pre_ff_norm, post_ff_norm; /* F32 [hidden] */
    float scalar;                   /* layer_scalar */
} g4_layer;

struct cq_gemma4 {
    cq_backend *be;
    cq_gemma4_config cfg;
    cq_tensor embed, norm;
    g4_layer *layers;
    cq_tt_held held;
    float *inv_freq[2];             /* per kind [head_dim / 2] (into freq_store) */
    float freq_store[2][2048];
};

/* The inverse RoPE frequencies of one layer kind into out[head_dim / 2] (gemma4_load.c). */
void g4_inv_freq(const cq_gemma4_config *c, int kind, float *out);

#endif /* CQ_MODELS_GEMMA4_IMPL_H */
