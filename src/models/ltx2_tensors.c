/*
 * ltx2_tensors.c — LTX-2's audio-video denoiser's tensor table: diffusers'
 * LTX2VideoTransformer3DModel names. Every attention projection has a bias;
 * the per-head gates, the video and audio FF biases, the prompt tables and
 * the prompt adaLN-single follow the config. The block norms and the output
 * LayerNorm have no weights. The modulation tables ([rows, width]) are
 * matrices: a pack may hold them in any codec, the loader dequantizes them.
 */
#include "models/tables.h"

enum { S_1, S_DV, S_DA, S_HV, S_HA, S_CIV, S_COV, S_CIA, S_COA, S_T, S_KV, S_KA };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define DM(s, k) {S_##s, k}

/* An adaLN-single module: the timestep MLP (256 -> D -> D) and the modulation Linear (D -> k D). */
#define ADALN(stem, D, k)                                                          \
    MAT(stem ".emb.timestep_embedder.linear_1.weight", false, D_(D), D_(T)),       \
    VEC(stem ".emb.timestep_embedder.linear_1.bias", false, 0.0f, D_(D)),          \
    MAT(stem ".emb.timestep_embedder.linear_2.weight", false, D_(D), D_(D)),       \
    VEC(stem ".emb.timestep_embedder.linear_2.bias", false, 0.0f, D_(D)),          \
    MAT(stem ".linear.weight", false, DM(D, k), D_(D)),                            \
    VEC(stem ".linear.bias", false, 0.0f, DM(D, k))

/* An attention of a block: query width Q, key/value input width K, inner width I (heads x head dim). */
#define ATTN(stem, Q, K, I)                                                        \
    MAT("transformer_blocks.%d." stem ".to_q.weight", true, D_(I), D_(Q)),         \
    VEC("transformer_blocks.%d." stem ".to_q.bias", true, 0.0f, D_(I)),            \
    MAT("transformer_blocks.%d." stem ".to_k.weight", true, D_(I), D_(K)),         \
    VEC("transformer_blocks.%d." stem ".to_k.bias", true, 0.0f, D_(I)),            \
    MAT("transformer_blocks.%d." stem ".to_v.weight", true, D_(I), D_(K)),         \
    VEC("transformer_blocks.%d." stem ".to_v.bias", true, 0.0f, D_(I)),            \
    MAT("transformer_blocks.%d." stem ".to_out.0.weight", true, D_(Q), D_(I)),     \
    VEC("transformer_blocks.%d." stem ".to_out.0.bias", true, 0.0f, D_(Q)),        \
    VEC("transformer_blocks.%d." stem ".norm_q.weight", true, 1.0f, D_(I)),        \
    VEC("transformer_blocks.%d." stem ".norm_k.weight", true, 1.0f, D_(I))
#define GATE(stem, H, Q)                                                           \
    MAT("transformer_blocks.%d." stem ".to_gate_logits.weight", true, D_(H), D_(Q)), \
    VEC("transformer_blocks.%d." stem ".to_gate_logits.bias", true, 0.0f, D_(H))

static const cq_tt_pattern k_top[] = {
    MAT("proj_in.weight", false, D_(DV), D_(CIV)),
    VEC("proj_in.bias", false, 0.0f, D_(DV)),
    MAT("audio_proj_in.weight", false, D_(DA), D_(CIA)),
    VEC("audio_proj_in.bias", false, 0.0f, D_(DA)),
    ADALN("av_cross_attn_video_scale_shift", DV, 4),
    ADALN("av_cross_attn_audio_scale_shift", DA, 4),
    ADALN("av_cross_attn_video_a2v_gate", DV, 1),
    ADALN("av_cross_attn_audio_v2a_gate", DA, 1),
    MAT("scale_shift_table", false, DM(1, 2), D_(DV)),
    MAT("audio_scale_shift_table", false, DM(1, 2), D_(DA)),
    MAT("proj_out.weight", false, D_(COV), D_(DV)),
    VEC("proj_out.bias", false, 0.0f, D_(COV)),
    MAT("audio_proj_out.weight", false, D_(COA), D_(DA)),
    VEC("audio_proj_out.bias", false, 0.0f, D_(COA)),
};
/* the main adaLN-single of each stream: 9 rows with the prompt cross-attention's query modulation, else 6 */
static const cq_tt_pattern k_time_v[] = {ADALN("time_embed", DV, 9)};
static const cq_tt_pattern k_time_v6[] = {ADALN("time_embed", DV, 6)};
static const cq_tt_pattern k_time_a[] = {ADALN("audio_time_embed", DA, 9)};
static const cq_tt_pattern k_time_a6[] = {ADALN("audio_time_embed", DA, 6)};
static const cq_tt_pattern k_prompt_adaln[] = {
    ADALN("prompt_adaln", DV, 2),
    ADALN("audio_prompt_adaln", DA, 2),
};
static const cq_tt_pattern k_keyframes[] = {VEC("keyframes_abs_pos_embedding", false, 0.0f, D_(DV))};

static const cq_tt_pattern k_block[] = {
    ATTN("attn1", DV, DV, DV),
    ATTN("audio_attn1", DA, DA, DA),
    ATTN("attn2", DV, DV, DV),
    ATTN("audio_attn2", DA, DA, DA),
    ATTN("audio_to_video_attn", DV, DA, DA),
    ATTN("video_to_audio_attn", DA, DV, DA),
    MAT("transformer_blocks.%d.ff.net.0.proj.weight", true, DM(DV, 4), D_(DV)),
    MAT("transformer_blocks.%d.ff.net.2.weight", true, D_(DV), DM(DV, 4)),
    MAT("transformer_blocks.%d.audio_ff.net.0.proj.weight", true, DM(DA, 4), D_(DA)),
    MAT("transformer_blocks.%d.audio_ff.net.2.weight", true, D_(DA), DM(DA, 4)),
    MAT("transformer_blocks.%d.scale_shift_table", true, D_(KV), D_(DV)),
    MAT("transformer_blocks.%d.audio_scale_shift_table", true, D_(KA), D_(DA)),
    MAT("transformer_blocks.%d.video_a2v_cross_attn_scale_shift_table", true, DM(1, 5), D_(DV)),
    MAT("transformer_blocks.%d.audio_a2v_cross_attn_scale_shift_table", true, DM(1, 5), D_(DA)),
};
static const cq_tt_pattern k_gate_v[] = {GATE("attn1", HV, DV), GATE("attn2", HV, DV),
                                         GATE("audio_to_video_attn", HA, DV)};
static const cq_tt_pattern k_gate_a[] = {GATE("audio_attn1", HA, DA), GATE("audio_attn2", HA, DA),
                                         GATE("video_to_audio_attn", HA, DA)};
static const cq_tt_pattern k_ff_bias_v[] = {
    VEC("transformer_blocks.%d.ff.net.0.proj.bias", true, 0.0f, DM(DV, 4)),
    VEC("transformer_blocks.%d.ff.net.2.bias", true, 0.0f, D_(DV)),
};
static const cq_tt_pattern k_ff_bias_a[] = {
    VEC("transformer_blocks.%d.audio_ff.net.0.proj.bias", true, 0.0f, DM(DA, 4)),
    VEC("transformer_blocks.%d.audio_ff.net.2.bias", true, 0.0f, D_(DA)),
};
static const cq_tt_pattern k_prompt_tables[] = {
    MAT("transformer_blocks.%d.prompt_scale_shift_table", true, DM(1, 2), D_(DV)),
    MAT("transformer_blocks.%d.audio_prompt_scale_shift_table", true, DM(1, 2), D_(DA)),
};

cq_status cq_ltx2_tensors(const cq_ltx2_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_DV] = c->dim;
    sym[S_DA] = c->audio_dim;
    sym[S_HV] = c->heads;
    sym[S_HA] = c->audio_heads;
    sym[S_CIV] = c->in_channels;
    sym[S_COV] = c->out_channels;
    sym[S_CIA] = c->audio_in_channels;
    sym[S_COA] = c->audio_out_channels;
    sym[S_T] = CQ_LTX2_TIMESTEP_CHANNELS;
    sym[S_KV] = c->cross_attn_mod ? 9 : 6;
    sym[S_KA] = c->audio_cross_attn_mod ? 9 : 6;
    if (!prefix) prefix = "";
#define ADD(pats, layers) CQ_TRY(cq_tt_expand(out, prefix, pats, CQ_ARRAY_LEN(pats), layers, sym))
    ADD(k_top, 0);
    if (c->cross_attn_mod) ADD(k_time_v, 0);
    else ADD(k_time_v6, 0);
    if (c->audio_cross_attn_mod) ADD(k_time_a, 0);
    else ADD(k_time_a6, 0);
    if (c->prompt_adaln) ADD(k_prompt_adaln, 0);
    if (c->keyframes) ADD(k_keyframes, 0);
    ADD(k_block, c->n_layers);
    if (c->gated_attn) ADD(k_gate_v, c->n_layers);
    if (c->audio_gated_attn) ADD(k_gate_a, c->n_layers);
    if (c->ff_bias) ADD(k_ff_bias_v, c->n_layers);
    if (c->audio_ff_bias) ADD(k_ff_bias_a, c->n_layers);
    if (c->cross_attn_mod || c->audio_cross_attn_mod) ADD(k_prompt_tables, c->n_layers);
#undef ADD
    return CQ_OK;
}
