/*
 * qwen3_tensors.c — the Qwen3 / Qwen3-VL text tower's tensor table
 * (transformers' Qwen3ForCausalLM names under the stack prefix).
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
    VEC("layers.%d.self_attn.q_norm.weight", true, D_(HD)),
    VEC("layers.%d.self_attn.k_norm.weight", true, D_(HD)),
    VEC("layers.%d.post_attention_layernorm.weight", true, D_(H)),
    MAT("layers.%d.mlp.gate_proj.weight", true, D_(I), D_(H)),
    MAT("layers.%d.mlp.up_proj.weight", true, D_(I), D_(H)),
    MAT("layers.%d.mlp.down_proj.weight", true, D_(H), D_(I)),
};

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
    CQ_TRY(cq_tt_expand(out, sp, k_qwen3, CQ_ARRAY_LEN(k_qwen3), c->n_layers, sym));
    uint64_t head[2] = {(uint64_t)c->vocab_size, (uint64_t)c->hidden};
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_MATRIX, false, 0.0f, 2, head, "lm_head.weight"));
    /* Qwen3-VL: the vision tower sits beside the text tower; the text tower never reads it */
    return c->vl ? cq_tt_add_subtree(out, prefix, "model.visual.") : CQ_OK;
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
