/*
 * qi21_tensors.c — the Qwen-Image-2.1 denoiser's tensor table: diffusers'
 * QwenImage21Transformer2DModel names, no biases anywhere.
 */
#include "models/tables.h"

enum { S_1, S_D, S_M, S_CTX, S_IN, S_OUT, S_HD, S_TPROJ };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define D4(s) {S_##s, 4}

static const cq_tt_pattern k_qi21[] = {
    MAT("time_text_embed.timestep_embedder.linear_1.weight", false, D_(D), D_(TPROJ)),
    MAT("time_text_embed.timestep_embedder.linear_2.weight", false, D_(D), D_(D)),
    VEC("txt_in.text_norm.weight", false, 0.0f, D_(CTX)), /* zero-centred: the gain is w + 1 */
    MAT("txt_in.in_layer.weight", false, D_(D), D_(CTX)),
    MAT("txt_in.out_layer.weight", false, D_(D), D_(D)),
    MAT("img_in.weight", false, D_(D), D_(IN)),
    MAT("modulation.1.weight", false, D4(D), D_(D)),
    MAT("norm_out.linear.weight", false, D_(D), D_(D)),
    MAT("proj_out.weight", false, D_(OUT), D_(D)),
    MAT("transformer_blocks.%d.attn.to_q.weight", true, D_(D), D_(D)),
    MAT("transformer_blocks.%d.attn.to_k.weight", true, D_(D), D_(D)),
    MAT("transformer_blocks.%d.attn.to_v.weight", true, D_(D), D_(D)),
    MAT("transformer_blocks.%d.attn.to_out.0.weight", true, D_(D), D_(D)),
    VEC("transformer_blocks.%d.attn.norm_q.weight", true, 1.0f, D_(HD)),
    VEC("transformer_blocks.%d.attn.norm_k.weight", true, 1.0f, D_(HD)),
    MAT("transformer_blocks.%d.img_mlp.gate_layer.weight", true, D_(M), D_(D)),
    MAT("transformer_blocks.%d.img_mlp.proj.weight", true, D_(M), D_(D)),
    MAT("transformer_blocks.%d.img_mlp.out.weight", true, D_(D), D_(M)),
};

cq_status cq_qi21_tensors(const cq_qi21_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_D] = c->inner;
    sym[S_M] = c->mlp_hidden;
    sym[S_CTX] = c->context_in_dim;
    sym[S_IN] = c->in_channels;
    sym[S_OUT] = c->out_channels;
    sym[S_HD] = c->head_dim;
    sym[S_TPROJ] = CQ_QI21_TIMESTEP_CHANNELS;
    return cq_tt_expand(out, prefix ? prefix : "", k_qi21, CQ_ARRAY_LEN(k_qi21), c->num_layers, sym);
}
