/*
 * qwen3_tensors.c — the Qwen3 / Qwen3-VL text tower's tensor table
 * (transformers' Qwen3ForCausalLM names under the stack prefix), and the
 * Qwen2 / Qwen2.5-VL family's (q/k/v biases instead of the q/k norms).
 */
#include <stdio.h>
#include <string.h>

#include "models/tables.h"

enum { S_1, S_H, S_I, S_V, S_Q, S_KV, S_HD };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define VEC(n, per, len) {n, per, CQ_TT_VECTOR, true, 1.0f, 1, {len}}
#define D_(s) {S_##s, 1}

static const cq_tt_pattern k_qwen3[] = {
    MAT("embed_tokens.weight", false, D_(V), D_(H)),
    VEC("norm.weight", false, D_(H)),
    VEC("layers.%d.input_layernorm.weight", true, D_(H)),
    MAT("layers.%d.self_attn.q_proj.weight", true, D_(Q), D_(H)),
    MAT("layers.%d.self_attn.k_proj.weight", true, D_(KV), D_(H)),
    MAT("layers.%d.self_attn.v_proj.weight", true, D_(KV), D_(H)),
    MAT("layers.%d.self_attn.o_proj.weight", true, D_(H), D_(Q)),
    VEC("layers.%d.self_attn.q_norm.weight", true, D_(HD)), /* Qwen3 only */
    VEC("layers.%d.self_attn.k_norm.weight", true, D_(HD)),
    VEC("layers.%d.post_attention_layernorm.weight", true, D_(H)),
    MAT("layers.%d.mlp.gate_proj.weight", true, D_(I), D_(H)),
    MAT("layers.%d.mlp.up_proj.weight", true, D_(I), D_(H)),
    MAT("layers.%d.mlp.down_proj.weight", true, D_(H), D_(I)),
};

/* The Qwen2 family's attention biases, after the projections. */
static const cq_tt_pattern k_qkv_bias[] = {
    {"layers.%d.self_attn.q_proj.bias", true, CQ_TT_VECTOR, true, 0.0f, 1, {D_(Q)}},
    {"layers.%d.self_attn.k_proj.bias", true, CQ_TT_VECTOR, true, 0.0f, 1, {D_(KV)}},
    {"layers.%d.self_attn.v_proj.bias", true, CQ_TT_VECTOR, true, 0.0f, 1, {D_(KV)}},
};

/* The family's table in layer order: k_qwen3 without the q/k norms when the family has none, with the
 * biases after o_proj when it has them. */
static size_t family_table(const cq_qwen3_config *c, cq_tt_pattern *out) {
    size_t n = 0;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_qwen3); i++) {
        if (!cq_qwen3_has_qk_norm(c) && strstr(k_qwen3[i].name, "_norm.weight") && strstr(k_qwen3[i].name, "self_attn.")) continue;
        out[n++] = k_qwen3[i];
        if (cq_qwen3_has_qkv_bias(c) && strstr(k_qwen3[i].name, "o_proj.weight"))
            for (size_t j = 0; j < CQ_ARRAY_LEN(k_qkv_bias); j++) out[n++] = k_qkv_bias[j];
    }
    return n;
}

cq_status cq_qwen3_tensors(const cq_qwen3_config *c, const char *prefix, const char *stack, cq_tt_list *out) {
    if (!prefix) prefix = "";
    char sp[256];
    int k = snprintf(sp, sizeof sp, "%s%s", prefix, stack ? stack : "");
    if (k < 0 || (size_t)k >= sizeof sp) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: tensor prefix is too long");
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_H] = c->hidden;
    sym[S_I] = c->intermediate;
    sym[S_V] = c->vocab_size;
    sym[S_Q] = (int64_t)c->n_heads * c->head_dim;
    sym[S_KV] = (int64_t)c->n_kv_heads * c->head_dim;
    sym[S_HD] = c->head_dim;
    cq_tt_pattern pats[CQ_ARRAY_LEN(k_qwen3) + CQ_ARRAY_LEN(k_qkv_bias)];
    CQ_TRY(cq_tt_expand(out, sp, pats, family_table(c, pats), c->n_layers, sym));
    uint64_t head[2] = {(uint64_t)c->vocab_size, (uint64_t)c->hidden};
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_MATRIX, false, 0.0f, 2, head, "lm_head.weight"));
    /* Qwen3-VL, Qwen2.5-VL: the vision tower sits beside the text tower (model.visual., or visual. in the
     * layout transformers 4 saved); the text tower never reads it */
    if (!c->vl) return CQ_OK;
    CQ_TRY(cq_tt_add_subtree(out, prefix, "model.visual."));
    return cq_tt_add_subtree(out, prefix, "visual.");
}

cq_status cq_qwen3_tensors_upto(const cq_qwen3_config *c, const char *prefix, const char *stack, int layers,
                                cq_tt_list *out) {
    CQ_TRY(cq_qwen3_tensors(c, prefix, stack, out));
    if (layers <= 0 || layers >= c->n_layers) return CQ_OK;
    for (size_t i = 0; i < out->n; i++) {
        cq_tt_entry *e = &out->e[i];
        if (e->layer >= layers || (e->pattern && strcmp(e->pattern, "norm.weight") == 0)) e->required = false;
    }
    return CQ_OK;
}
