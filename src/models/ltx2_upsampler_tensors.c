/*
 * ltx2_upsampler_tensors.c — the tensor table of LTX-2's spatial latent
 * upscaler (diffusers' LTX2LatentUpsamplerModel names, the plain resampler):
 * 3-D kernels [cout, cin, 3, 3, 3] (listed as [cout, cin, 27]: the count and
 * the first dimension are checked), the per-frame upsampler conv
 * [4M, M, 3, 3] (index 0 of its Sequential), biases and GroupNorm affines
 * [M] as vectors.
 */
#include "models/tables.h"

enum { S_1, S_C, S_M };

#define K3(n, per, co, ci) {n, per, CQ_TT_KERNEL, true, 0.0f, 3, {co, ci, {0, 27}}}
#define VEC(n, per, base, len) {n, per, CQ_TT_VECTOR, true, base, 1, {len}}
#define D_(s) {S_##s, 1}
#define DM(s, k) {S_##s, k}

#define RES(stem)                                             \
    K3(stem ".%d.conv1.weight", true, D_(M), D_(M)),          \
    VEC(stem ".%d.conv1.bias", true, 0.0f, D_(M)),            \
    VEC(stem ".%d.norm1.weight", true, 1.0f, D_(M)),          \
    VEC(stem ".%d.norm1.bias", true, 0.0f, D_(M)),            \
    K3(stem ".%d.conv2.weight", true, D_(M), D_(M)),          \
    VEC(stem ".%d.conv2.bias", true, 0.0f, D_(M)),            \
    VEC(stem ".%d.norm2.weight", true, 1.0f, D_(M)),          \
    VEC(stem ".%d.norm2.bias", true, 0.0f, D_(M))

static const cq_tt_pattern k_top[] = {
    K3("initial_conv.weight", false, D_(M), D_(C)),
    VEC("initial_conv.bias", false, 0.0f, D_(M)),
    VEC("initial_norm.weight", false, 1.0f, D_(M)),
    VEC("initial_norm.bias", false, 0.0f, D_(M)),
    {"upsampler.0.weight", false, CQ_TT_KERNEL, true, 0.0f, 4, {DM(M, 4), D_(M), {0, 3}, {0, 3}}},
    VEC("upsampler.0.bias", false, 0.0f, DM(M, 4)),
    K3("final_conv.weight", false, D_(C), D_(M)),
    VEC("final_conv.bias", false, 0.0f, D_(C)),
};
static const cq_tt_pattern k_pre[] = {RES("res_blocks")};
static const cq_tt_pattern k_post[] = {RES("post_upsample_res_blocks")};

cq_status cq_ltx2_ups_tensors(const cq_ltx2_ups_config *c, const char *prefix, cq_tt_list *out) {
    int64_t sym[CQ_TT_MAX_SYMS] = {0};
    sym[S_1] = 1;
    sym[S_C] = c->in_channels;
    sym[S_M] = c->mid_channels;
    if (!prefix) prefix = "";
    CQ_TRY(cq_tt_expand(out, prefix, k_top, CQ_ARRAY_LEN(k_top), 0, sym));
    CQ_TRY(cq_tt_expand(out, prefix, k_pre, CQ_ARRAY_LEN(k_pre), c->n_blocks, sym));
    return cq_tt_expand(out, prefix, k_post, CQ_ARRAY_LEN(k_post), c->n_blocks, sym);
}
