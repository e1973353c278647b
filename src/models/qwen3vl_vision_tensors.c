/*
 * qwen3vl_vision_tensors.c — the Qwen3-VL vision tower's tensor table
 * (transformers' names under the tower's prefix: "model.visual." as
 * transformers 5 names it, "visual." in older saves).
 */
#include <stdio.h>

#include "models/tables.h"

enum { S_1, S_D, S_I, S_O, S_K, S_M, S_P };

#define MAT(n, per, r, c) {n, per, CQ_TT_MATRIX, true, 0.0f, 2, {r, c}}
#define GAIN(n, per, len) {n, per, CQ_TT_VECTOR, true, 1.0f, 1, {len}}
#define BIAS(n, per, len) {n, per, CQ_TT_VECTOR, true, 0.0f, 1, {len}}
#define D_(s) {S_##s, 1}
#define DM(s, m) {S_##s, m}

/* the tower: patch and position embeddings, the merger, then the blocks */
static const cq_tt_pattern k_vision[] = {
    /* the Conv3d kernel [D, C, T, P, P], read as the matrix [D, C*T*P*P] */
    {"patch_embed.proj.weight", false, CQ_TT_KERNEL, true, 0.0f, 2, {D_(D), D_(K)}},
    BIAS("patch_embed.proj.bias", false, D_(D)),
    MAT("pos_embed.weight", false, D_(P), D_(D)),
    GAIN("merger.norm.weight", false, D_(D)),
    BIAS("merger.norm.bias", false, D_(D)),
    MAT("merger.linear_fc1.weight", false, D_(M), D_(M)),
    BIAS("merger.linear_fc1.bias", false, D_(M)),
    MAT("merger.linear_fc2.weight", false, D_(O), D_(M)),
    BIAS("merger.linear_fc2.bias", false, D_(O)),
    GAIN("blocks.%d.norm1.weight", true, D_(D)),
    BIAS("blocks.%d.norm1.bias", true, D_(D)),
    MAT("blocks.%d.attn.qkv.weight", true, DM(D, 3), D_(D)),
    BIAS("blocks.%d.attn.qkv.bias", true, DM(D, 3)),
    MAT("blocks.%d.attn.proj.weight", true, D_(D), D_(D)),
    BIAS("blocks.%d.attn.proj.bias", true, D_(D)),
    GAIN("blocks.%d.norm2.weight", true, D_(D)),
    BIAS("blocks.%d.norm2.bias", true, D_(D)),
    MAT("blocks.%d.mlp.linear_fc1.weight", true, D_(I), D_(D)),
    BIAS("blocks.%d.mlp.linear_fc1.bias", true, D_(I)),
    MAT("blocks.%d.mlp.linear_fc2.weight", true, D_(D), D_(I)),
    BIAS("blocks.%d.mlp.linear_fc2.bias", true, D_(D)),
};

/* one per deepstack index: the norm spans the merge unit's concatenated rows */
static const cq_tt_pattern k_deepstack[] = {
    GAIN("deepstack_merger_list.%d.norm.weight", true, D_(M)),
    BIAS("deepstack_merger_list.%d.norm.bias", true, D_(M)),
    MAT("deepstack_merger_list.%d.linear_fc1.weight", true, D_(M), D_(M)),
    BIAS("deepstack_merger_list.%d.linear_fc1.bias", true, D_(M)),
    MAT("deepstack_merger_list.%d.linear_fc2.weight", true, D_(O), D_(M)),
    BIAS("deepstack_merger_list.%d.linear_fc2.bias", true, D_(O)),
};

cq_status cq_qwen3vl_vision_tensors(const cq_qwen3vl_vision_config *c, const char *prefix, const char *stem,
                                    cq_tt_list *out) {
    char sp[256];
    int k = snprintf(sp, sizeof sp, "%s%s", prefix ? prefix : "", stem ? stem : "");
    if (k < 0 || (size_t)k >= sizeof sp)
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3vl_vision: tensor prefix is too long");
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_D] = c->hidden;
    sym[S_I] = c->intermediate;
    sym[S_O] = c->out_hidden;
    sym[S_K] = cq_qwen3vl_vision_patch_dim(c);
    sym[S_M] = (int64_t)c->hidden * c->merge * c->merge; /* a merge unit's concatenated rows */
    sym[S_P] = c->n_pos;
    CQ_TRY(cq_tt_expand(out, sp, k_vision, CQ_ARRAY_LEN(k_vision), c->depth, sym));
    return cq_tt_expand(out, sp, k_deepstack, CQ_ARRAY_LEN(k_deepstack), c->n_deepstack, sym);
}
