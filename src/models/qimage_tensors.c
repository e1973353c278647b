/*
 * qimage_tensors.c — the Qwen-Image (v1) denoiser's tensor table: diffusers'
 * QwenImageTransformer2DModel names. Every Linear has a bias; the image and
 * text streams of each block have their own modulation, projections, q/k
 * norms and MLP.
 */
#include "models/tables.h"

enum { S_1, S_D, S_M, S_J, S_IN, S_OUT, S_HD, S_TPROJ };

#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define DK(s, k) {S_##s, k}
/* A Linear `n` of [rows, cols] with its bias. */
#define LIN(n, per, r, c) \
    {n ".weight", per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}, {n ".bias", per, CQ_TT_VECTOR, true, 0.0f, 1, {r}}

static const cq_tt_pattern k_qimage[] = {
    LIN("time_text_embed.timestep_embedder.linear_1", false, D_(D), D_(TPROJ)),
    LIN("time_text_embed.timestep_embedder.linear_2", false, D_(D), D_(D)),
    VEC("txt_norm.weight", false, 1.0f, D_(J)),
    LIN("img_in", false, D_(D), D_(IN)),
    LIN("txt_in", false, D_(D), D_(J)),
    LIN("norm_out.linear", false, DK(D, 2), D_(D)), /* [scale | shift] */
    LIN("proj_out", false, D_(OUT), D_(D)),
    LIN("transformer_blocks.%d.img_mod.1", true, DK(D, 6), D_(D)),
    LIN("transformer_blocks.%d.txt_mod.1", true, DK(D, 6), D_(D)),
    LIN("transformer_blocks.%d.attn.to_q", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.to_k", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.to_v", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.add_q_proj", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.add_k_proj", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.add_v_proj", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.to_out.0", true, D_(D), D_(D)),
    LIN("transformer_blocks.%d.attn.to_add_out", true, D_(D), D_(D)),
    VEC("transformer_blocks.%d.attn.norm_q.weight", true, 1.0f, D_(HD)),
    VEC("transformer_blocks.%d.attn.norm_k.weight", true, 1.0f, D_(HD)),
    VEC("transformer_blocks.%d.attn.norm_added_q.weight", true, 1.0f, D_(HD)),
    VEC("transformer_blocks.%d.attn.norm_added_k.weight", true, 1.0f, D_(HD)),
    LIN("transformer_blocks.%d.img_mlp.net.0.proj", true, D_(M), D_(D)),
    LIN("transformer_blocks.%d.img_mlp.net.2", true, D_(D), D_(M)),
    LIN("transformer_blocks.%d.txt_mlp.net.0.proj", true, D_(M), D_(D)),
    LIN("transformer_blocks.%d.txt_mlp.net.2", true, D_(D), D_(M)),
};

cq_status cq_qimage_tensors(const cq_qimage_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_D] = c->inner;
    sym[S_M] = c->mlp_hidden;
    sym[S_J] = c->joint_dim;
    sym[S_IN] = c->in_channels;
    sym[S_OUT] = c->out_dim;
    sym[S_HD] = c->head_dim;
    sym[S_TPROJ] = CQ_QIMAGE_TIMESTEP_CHANNELS;
    return cq_tt_expand(out, prefix ? prefix : "", k_qimage, CQ_ARRAY_LEN(k_qimage), c->num_layers, sym);
}
