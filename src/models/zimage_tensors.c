/*
 * zimage_tensors.c — the Z-Image denoiser's tensor table: diffusers'
 * ZImageTransformer2DModel names. The embedders and the final layer have
 * biases, the blocks none except their adaLN Linear; the context refiner's
 * blocks have no adaLN at all.
 */
#include "models/tables.h"

enum { S_1, S_D, S_F, S_HD, S_A, S_TMID, S_TPROJ, S_CAP, S_P };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define D4(s) {S_##s, 4}

/* One transformer block under `stem` ("layers", "noise_refiner", "context_refiner"). */
#define BLOCK(stem)                                                  \
    MAT(stem ".%d.attention.to_q.weight", true, D_(D), D_(D)),       \
    MAT(stem ".%d.attention.to_k.weight", true, D_(D), D_(D)),       \
    MAT(stem ".%d.attention.to_v.weight", true, D_(D), D_(D)),       \
    MAT(stem ".%d.attention.to_out.0.weight", true, D_(D), D_(D)),   \
    VEC(stem ".%d.attention.norm_q.weight", true, 1.0f, D_(HD)),     \
    VEC(stem ".%d.attention.norm_k.weight", true, 1.0f, D_(HD)),     \
    MAT(stem ".%d.feed_forward.w1.weight", true, D_(F), D_(D)),      \
    MAT(stem ".%d.feed_forward.w2.weight", true, D_(D), D_(F)),      \
    MAT(stem ".%d.feed_forward.w3.weight", true, D_(F), D_(D)),      \
    VEC(stem ".%d.attention_norm1.weight", true, 1.0f, D_(D)),       \
    VEC(stem ".%d.attention_norm2.weight", true, 1.0f, D_(D)),       \
    VEC(stem ".%d.ffn_norm1.weight", true, 1.0f, D_(D)),             \
    VEC(stem ".%d.ffn_norm2.weight", true, 1.0f, D_(D))
#define MODULATION(stem)                                             \
    MAT(stem ".%d.adaLN_modulation.0.weight", true, D4(D), D_(A)),   \
    VEC(stem ".%d.adaLN_modulation.0.bias", true, 0.0f, D4(D))

static const cq_tt_pattern k_top[] = {
    MAT("t_embedder.mlp.0.weight", false, D_(TMID), D_(TPROJ)),
    VEC("t_embedder.mlp.0.bias", false, 0.0f, D_(TMID)),
    MAT("t_embedder.mlp.2.weight", false, D_(A), D_(TMID)),
    VEC("t_embedder.mlp.2.bias", false, 0.0f, D_(A)),
    VEC("cap_embedder.0.weight", false, 1.0f, D_(CAP)),
    MAT("cap_embedder.1.weight", false, D_(D), D_(CAP)),
    VEC("cap_embedder.1.bias", false, 0.0f, D_(D)),
    MAT("all_x_embedder.2-1.weight", false, D_(D), D_(P)),
    VEC("all_x_embedder.2-1.bias", false, 0.0f, D_(D)),
    MAT("all_final_layer.2-1.adaLN_modulation.1.weight", false, D_(D), D_(A)),
    VEC("all_final_layer.2-1.adaLN_modulation.1.bias", false, 0.0f, D_(D)),
    MAT("all_final_layer.2-1.linear.weight", false, D_(P), D_(D)),
    VEC("all_final_layer.2-1.linear.bias", false, 0.0f, D_(P)),
    VEC("x_pad_token", false, 0.0f, D_(D)),   /* stored [1, dim] */
    VEC("cap_pad_token", false, 0.0f, D_(D)),
};
static const cq_tt_pattern k_layers[] = {BLOCK("layers"), MODULATION("layers")};
static const cq_tt_pattern k_noise[] = {BLOCK("noise_refiner"), MODULATION("noise_refiner")};
static const cq_tt_pattern k_context[] = {BLOCK("context_refiner")};

cq_status cq_zimage_tensors(const cq_zimage_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_D] = c->dim;
    sym[S_F] = c->ffn_hidden;
    sym[S_HD] = c->head_dim;
    sym[S_A] = c->adaln_dim;
    sym[S_TMID] = CQ_ZIMAGE_TIMESTEP_MID;
    sym[S_TPROJ] = CQ_ZIMAGE_TIMESTEP_CHANNELS;
    sym[S_CAP] = c->cap_feat_dim;
    sym[S_P] = c->patch_channels;
    if (!prefix) prefix = "";
    CQ_TRY(cq_tt_expand(out, prefix, k_top, CQ_ARRAY_LEN(k_top), 0, sym));
    CQ_TRY(cq_tt_expand(out, prefix, k_noise, CQ_ARRAY_LEN(k_noise), c->n_refiner_layers, sym));
    CQ_TRY(cq_tt_expand(out, prefix, k_context, CQ_ARRAY_LEN(k_context), c->n_refiner_layers, sym));
    return cq_tt_expand(out, prefix, k_layers, CQ_ARRAY_LEN(k_layers), c->n_layers, sym);
}
