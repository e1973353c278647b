/*
 * vk_shaders.c — the compute shaders, compiled by glslc at build time
 * (shaders/<name>.comp -> <build>/vk_spv/<name>.spv.h, a C array initializer) and
 * embedded here, and their pipelines: one per shader and activation-dtype
 * variant (CQ_VK_VARIANT: the specialization constants CQ_XDT, CQ_YDT),
 * created at its first use on a backend (the driver translates the SPIR-V
 * then) and kept.
 */
#include <string.h>

#include "backends/vulkan/vk_impl.h"

static const uint32_t k_spv_copy[] =
#include "copy.spv.h"
    ;
static const uint32_t k_spv_unary[] =
#include "unary.spv.h"
    ;
static const uint32_t k_spv_binary[] =
#include "binary.spv.h"
    ;
static const uint32_t k_spv_gated_add[] =
#include "gated_add.spv.h"
    ;
static const uint32_t k_spv_swiglu[] =
#include "swiglu.spv.h"
    ;
static const uint32_t k_spv_softmax[] =
#include "softmax.spv.h"
    ;
static const uint32_t k_spv_rmsnorm[] =
#include "rmsnorm.spv.h"
    ;
static const uint32_t k_spv_layernorm[] =
#include "layernorm.spv.h"
    ;
static const uint32_t k_spv_matmul[] =
#include "matmul.spv.h"
    ;
static const uint32_t k_spv_attention[] =
#include "attention.spv.h"
    ;
static const uint32_t k_spv_qk_norm_rope[] =
#include "qk_norm_rope.spv.h"
    ;
static const uint32_t k_spv_move[] =
#include "move.spv.h"
    ;
static const uint32_t k_spv_groupnorm[] =
#include "groupnorm.spv.h"
    ;
static const uint32_t k_spv_group_moments[] =
#include "group_moments.spv.h"
    ;
static const uint32_t k_spv_conv2d[] =
#include "conv2d.spv.h"
    ;
static const uint32_t k_spv_conv3d[] =
#include "conv3d.spv.h"
    ;
static const uint32_t k_spv_conv3dq[] =
#include "conv3dq.spv.h"
    ;
static const uint32_t k_spv_conv1d[] =
#include "conv1d.spv.h"
    ;
static const uint32_t k_spv_conv1dq[] =
#include "conv1dq.spv.h"
    ;
static const uint32_t k_spv_snake[] =
#include "snake.spv.h"
    ;
static const uint32_t k_spv_d2s3[] =
#include "d2s3.spv.h"
    ;
static const uint32_t k_spv_get_rows[] =
#include "get_rows.spv.h"
    ;

static const struct {
    const char *name;
    const uint32_t *code;
    size_t bytes;
} k_shaders[CQ_VK_SH_COUNT] = {
#define CQ_VK_SHADER_ROW_(n) [CQ_VK_SH_##n] = {#n, k_spv_##n, sizeof k_spv_##n},
    CQ_VK_SHADERS(CQ_VK_SHADER_ROW_)
#undef CQ_VK_SHADER_ROW_
};

cq_status cq_vk_pipeline(cq_vk *c, cq_vk_shader sh, uint32_t variant, VkPipeline *out) {
    if (variant >= CQ_VK_VARIANTS)
        return cq_fail(CQ_ERR_INTERNAL, "vulkan: shader %s: variant %u", k_shaders[sh].name, variant);
    VkPipeline *slot = &c->pipe[sh][variant];
    if (*slot) {
        *out = *slot;
        return CQ_OK;
    }
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = k_shaders[sh].bytes,
                                   .pCode = k_shaders[sh].code};
    VkShaderModule mod;
    VkResult r = c->f.vkCreateShaderModule(c->dev, &mi, NULL, &mod);
    if (r != VK_SUCCESS)
        return cq_fail(CQ_ERR_INTERNAL, "vulkan: shader %s: vkCreateShaderModule failed: %s", k_shaders[sh].name,
                       cq_vk_result_str(r));
    /* constant_id 0 CQ_XDT, 1 CQ_YDT (common.glsl); a shader that declares neither ignores them */
    const uint32_t spec[2] = {variant / 3u, variant % 3u};
    const VkSpecializationMapEntry map[2] = {{0, 0, sizeof(uint32_t)}, {1, sizeof(uint32_t), sizeof(uint32_t)}};
    const VkSpecializationInfo si = {2, map, sizeof spec, spec};
    VkComputePipelineCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                                .module = mod,
                                                .pName = "main",
                                                .pSpecializationInfo = &si},
                                      .layout = c->layout};
    r = c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pi, NULL, slot);
    c->f.vkDestroyShaderModule(c->dev, mod, NULL);
    if (r != VK_SUCCESS) {
        *slot = VK_NULL_HANDLE;
        return cq_fail(CQ_ERR_INTERNAL, "vulkan: shader %s: vkCreateComputePipelines failed: %s", k_shaders[sh].name,
                       cq_vk_result_str(r));
    }
    *out = *slot;
    return CQ_OK;
}

void cq_vk_pipelines_destroy(cq_vk *c) {
    for (int i = 0; i < CQ_VK_SH_COUNT; i++)
        for (int v = 0; v < CQ_VK_VARIANTS; v++)
            if (c->pipe[i][v]) c->f.vkDestroyPipeline(c->dev, c->pipe[i][v], NULL);
    memset(c->pipe, 0, sizeof c->pipe);
}
