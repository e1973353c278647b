/*
 * ltx2_text_tensors.c — the tensor table of LTX-2.3 / 2.5's text connectors:
 * diffusers' LTX2TextConnectors names (per_modality_projections). The block
 * norms and the final norm have no weights; every attention projection and
 * both FF layers have biases; the gates and the projections' biases follow
 * the config. The registers ([R, dim]) are a matrix: a pack may hold them in
 * any codec, the loader dequantizes them once.
 */
#include "models/tables.h"

enum { S_1, S_C, S_DV, S_DA, S_HV, S_HA, S_RV, S_RA };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define DM(s, k) {S_##s, k}

/* One connector block of width D (stem "video_connector" / "audio_connector"). */
#define BLOCK(stem, D)                                                                        \
    MAT(stem ".transformer_blocks.%d.attn1.to_q.weight", true, D_(D), D_(D)),                 \
    VEC(stem ".transformer_blocks.%d.attn1.to_q.bias", true, 0.0f, D_(D)),                    \
    MAT(stem ".transformer_blocks.%d.attn1.to_k.weight", true, D_(D), D_(D)),                 \
    VEC(stem ".transformer_blocks.%d.attn1.to_k.bias", true, 0.0f, D_(D)),                    \
    MAT(stem ".transformer_blocks.%d.attn1.to_v.weight", true, D_(D), D_(D)),                 \
    VEC(stem ".transformer_blocks.%d.attn1.to_v.bias", true, 0.0f, D_(D)),                    \
    MAT(stem ".transformer_blocks.%d.attn1.to_out.0.weight", true, D_(D), D_(D)),             \
    VEC(stem ".transformer_blocks.%d.attn1.to_out.0.bias", true, 0.0f, D_(D)),                \
    VEC(stem ".transformer_blocks.%d.attn1.norm_q.weight", true, 1.0f, D_(D)),                \
    VEC(stem ".transformer_blocks.%d.attn1.norm_k.weight", true, 1.0f, D_(D)),                \
    MAT(stem ".transformer_blocks.%d.ff.net.0.proj.weight", true, DM(D, 4), D_(D)),           \
    VEC(stem ".transformer_blocks.%d.ff.net.0.proj.bias", true, 0.0f, DM(D, 4)),              \
    MAT(stem ".transformer_blocks.%d.ff.net.2.weight", true, D_(D), DM(D, 4)),                \
    VEC(stem ".transformer_blocks.%d.ff.net.2.bias", true, 0.0f, D_(D))
#define GATE(stem, H, D)                                                                      \
    MAT(stem ".transformer_blocks.%d.attn1.to_gate_logits.weight", true, D_(H), D_(D)),       \
    VEC(stem ".transformer_blocks.%d.attn1.to_gate_logits.bias", true, 0.0f, D_(H))

static const cq_tt_pattern k_top[] = {
    MAT("video_text_proj_in.weight", false, D_(DV), D_(C)),
    MAT("audio_text_proj_in.weight", false, D_(DA), D_(C)),
    MAT("video_connector.learnable_registers", false, D_(RV), D_(DV)),
    MAT("audio_connector.learnable_registers", false, D_(RA), D_(DA)),
};
static const cq_tt_pattern k_proj_bias[] = {
    VEC("video_text_proj_in.bias", false, 0.0f, D_(DV)),
    VEC("audio_text_proj_in.bias", false, 0.0f, D_(DA)),
};
static const cq_tt_pattern k_block_v[] = {BLOCK("video_connector", DV)};
static const cq_tt_pattern k_block_a[] = {BLOCK("audio_connector", DA)};
static const cq_tt_pattern k_gate_v[] = {GATE("video_connector", HV, DV)};
static const cq_tt_pattern k_gate_a[] = {GATE("audio_connector", HA, DA)};

cq_status cq_ltx2_text_tensors(const cq_ltx2_text_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_C] = (int64_t)c->caption_channels * c->n_states;
    sym[S_DV] = c->conn[CQ_LTX2_VIDEO].dim;
    sym[S_DA] = c->conn[CQ_LTX2_AUDIO].dim;
    sym[S_HV] = c->conn[CQ_LTX2_VIDEO].heads;
    sym[S_HA] = c->conn[CQ_LTX2_AUDIO].heads;
    sym[S_RV] = c->conn[CQ_LTX2_VIDEO].n_registers;
    sym[S_RA] = c->conn[CQ_LTX2_AUDIO].n_registers;
    if (!prefix) prefix = "";
#define ADD(pats, layers) CQ_TRY(cq_tt_expand(out, prefix, pats, CQ_ARRAY_LEN(pats), layers, sym))
    ADD(k_top, 0);
    if (c->proj_bias) ADD(k_proj_bias, 0);
    ADD(k_block_v, c->conn[CQ_LTX2_VIDEO].n_layers);
    if (c->conn[CQ_LTX2_VIDEO].gated) ADD(k_gate_v, c->conn[CQ_LTX2_VIDEO].n_layers);
    ADD(k_block_a, c->conn[CQ_LTX2_AUDIO].n_layers);
    if (c->conn[CQ_LTX2_AUDIO].gated) ADD(k_gate_a, c->conn[CQ_LTX2_AUDIO].n_layers);
#undef ADD
    return CQ_OK;
}
