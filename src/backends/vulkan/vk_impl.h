/*
 * vk_impl.h — the Vulkan backend's private state, shared by its files:
 * vk_loader.c (the loader opened with dlopen, the function table),
 * vk_devices.c (device listing and description), vk_backend.c (instance,
 * device choice, memory, submission, sync and the deferred errors,
 * recordings, the vtable), vk_ops.c (the native ops) and vk_shaders.c (the
 * embedded SPIR-V and the pipelines).
 *
 * Execution: ops are recorded into one open command buffer, each dispatch
 * followed by a compute-to-compute memory barrier; the buffer is submitted
 * and waited for at sync, download and upload (which therefore see every
 * op queued before them), and when its op count reaches a bound. A Vulkan
 * call that fails marks the backend: the first failure's message is kept
 * and returned by the next sync (as the CUDA backend reports its deferred
 * errors); ops after it are skipped.
 */
#ifndef CQ_BACKENDS_VULKAN_IMPL_H
#define CQ_BACKENDS_VULKAN_IMPL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backends/vulkan/vulkan.h"
#include "ops/backend.h"

/* ---- the loader (vk_loader.c) ---------------------------------------------------------------------------- */
#define CQ_VK_INSTANCE_FNS(X)                                                                                          \
    X(vkDestroyInstance)                                                                                               \
    X(vkEnumeratePhysicalDevices)                                                                                      \
    X(vkGetPhysicalDeviceProperties)                                                                                   \
    X(vkGetPhysicalDeviceProperties2)                                                                                  \
    X(vkGetPhysicalDeviceFeatures2)                                                                                    \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                                        \
    X(vkGetPhysicalDeviceMemoryProperties)                                                                             \
    X(vkEnumerateDeviceExtensionProperties)                                                                            \
    X(vkCreateDevice)                                                                                                  \
    X(vkGetDeviceProcAddr)

#define CQ_VK_DEVICE_FNS(X)                                                                                            \
    X(vkDestroyDevice)                                                                                                 \
    X(vkGetDeviceQueue)                                                                                                \
    X(vkCreateCommandPool)                                                                                             \
    X(vkDestroyCommandPool)                                                                                            \
    X(vkAllocateCommandBuffers)                                                                                        \
    X(vkFreeCommandBuffers)                                                                                            \
    X(vkBeginCommandBuffer)                                                                                            \
    X(vkEndCommandBuffer)                                                                                              \
    X(vkResetCommandBuffer)                                                                                            \
    X(vkQueueSubmit)                                                                                                   \
    X(vkCreateFence)                                                                                                   \
    X(vkDestroyFence)                                                                                                  \
    X(vkWaitForFences)                                                                                                 \
    X(vkResetFences)                                                                                                   \
    X(vkCreateBuffer)                                                                                                  \
    X(vkDestroyBuffer)                                                                                                 \
    X(vkGetBufferMemoryRequirements)                                                                                   \
    X(vkAllocateMemory)                                                                                                \
    X(vkFreeMemory)                                                                                                    \
    X(vkBindBufferMemory)                                                                                              \
    X(vkMapMemory)                                                                                                     \
    X(vkUnmapMemory)                                                                                                   \
    X(vkCreateShaderModule)                                                                                            \
    X(vkDestroyShaderModule)                                                                                           \
    X(vkCreateDescriptorSetLayout)                                                                                     \
    X(vkDestroyDescriptorSetLayout)                                                                                    \
    X(vkCreatePipelineLayout)                                                                                          \
    X(vkDestroyPipelineLayout)                                                                                         \
    X(vkCreateComputePipelines)                                                                                        \
    X(vkDestroyPipeline)                                                                                               \
    X(vkCreateDescriptorPool)                                                                                          \
    X(vkDestroyDescriptorPool)                                                                                         \
    X(vkResetDescriptorPool)                                                                                           \
    X(vkAllocateDescriptorSets)                                                                                        \
    X(vkUpdateDescriptorSets)                                                                                          \
    X(vkCmdBindPipeline)                                                                                               \
    X(vkCmdBindDescriptorSets)                                                                                         \
    X(vkCmdPushConstants)                                                                                              \
    X(vkCmdDispatch)                                                                                                   \
    X(vkCmdPipelineBarrier)                                                                                            \
    X(vkCmdCopyBuffer)                                                                                                 \
    X(vkCmdFillBuffer)

typedef struct cq_vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    PFN_vkCreateInstance vkCreateInstance;
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion; /* NULL on a 1.0 loader */
#define CQ_VK_FN_MEMBER_(f) PFN_##f f;
    CQ_VK_INSTANCE_FNS(CQ_VK_FN_MEMBER_)
    CQ_VK_DEVICE_FNS(CQ_VK_FN_MEMBER_)
#undef CQ_VK_FN_MEMBER_
} cq_vk_fns;

/* The loader's global functions: dlopen("libvulkan.so.1") at the first call, kept for the process. */
cq_status cq_vk_load(void);
/* Create an instance (Vulkan 1.1) and fill the instance-level functions of `f`. */
cq_status cq_vk_instance(VkInstance *inst, cq_vk_fns *f);
/* Fill the device-level functions of `f`. */
cq_status cq_vk_device_fns(VkDevice dev, cq_vk_fns *f);
const char *cq_vk_result_str(VkResult r);

/* Physical devices with a compute queue, in the order of preference (discrete, integrated, virtual, CPU,
 * other); at most `cap`. Returns how many. */
uint32_t cq_vk_ranked_devices(const cq_vk_fns *f, VkInstance inst, VkPhysicalDevice *out, uint32_t cap);

/* ---- the backend ------------------------------------------------------------------------------------------- */
/* The weight codes of the shaders (wdec.glsl). */
typedef enum {
    VK_DT_F32 = 0,
    VK_DT_F16 = 1,
    VK_DT_BF16 = 2,
    VK_DT_Q8_ROW = 3,
    VK_DT_Q8_2F = 4,
    VK_DT_Q4_BLOCK = 5,
    VK_DT_Q4_TILED = 6,
    VK_DT_Q4TP = 7
} cq_vk_dt;

/* One allocation: the `base` handle of tensors. */
typedef struct cq_vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    void *map; /* host address when the memory is host-visible (lavapipe, UMA devices) */
    struct cq_vk_buf *next_free;
} cq_vk_buf;

#define CQ_VK_BINDINGS 9    /* storage buffers per dispatch (one descriptor set layout for every shader) */
#define CQ_VK_POOL_SETS 256 /* descriptor sets per pool */
#define CQ_VK_PUSH_BYTES 128
#define CQ_VK_STATUS_BINDING 7 /* every dispatch binds the status words here */
#define CQ_VK_EXP2_BINDING 8   /* the q4tp exp2 table, for the shaders that decode weights (wdec.glsl) */

/* A command stream: the live one, or a recording's. */
typedef struct cq_vk_stream {
    VkCommandBuffer cb;
    bool open;    /* begun, not ended */
    unsigned ops; /* dispatches in it */
    VkDescriptorPool *pools;
    int npools, cur; /* pools [0, cur] are in use */
    uint32_t used;   /* sets taken from pools[cur] */
} cq_vk_stream;

#define CQ_VK_SHADERS(X)                                                                                               \
    X(copy)                                                                                                            \
    X(unary)                                                                                                           \
    X(binary)                                                                                                          \
    X(gated_add)                                                                                                       \
    X(swiglu)                                                                                                          \
    X(softmax)                                                                                                         \
    X(rmsnorm)                                                                                                         \
    X(layernorm)                                                                                                       \
    X(matmul)                                                                                                          \
    X(get_rows)                                                                                                        \
    X(attention)                                                                                                       \
    X(qk_norm_rope)                                                                                                    \
    X(move)                                                                                                            \
    X(groupnorm)                                                                                                       \
    X(group_moments)                                                                                                   \
    X(conv2d)                                                                                                          \
    X(conv3d)                                                                                                          \
    X(conv3dq)                                                                                                         \
    X(conv1d)                                                                                                          \
    X(conv1dq)                                                                                                         \
    X(snake)                                                                                                           \
    X(d2s3)

/* A pipeline variant: the shaders' specialization constants 0 (CQ_XDT, the activations' dtype) and 1 (CQ_YDT,
 * the output's where it may differ: matmul's y), each VK_DT_F32, _F16 or _BF16, so the dtype branches of
 * CQ_LD / CQ_ST fold away when the driver compiles the pipeline. Variant 0 is all f32. */
#define CQ_VK_VARIANTS 9
#define CQ_VK_VARIANT(xdt, ydt) ((uint32_t)(xdt) * 3u + (uint32_t)(ydt))

typedef enum {
#define CQ_VK_SHADER_ENUM_(n) CQ_VK_SH_##n,
    CQ_VK_SHADERS(CQ_VK_SHADER_ENUM_)
#undef CQ_VK_SHADER_ENUM_
    CQ_VK_SH_COUNT
} cq_vk_shader;

typedef struct cq_vk {
    cq_backend base;
    cq_vk_fns f;
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    int index;
    char dev_name[256];
    VkPhysicalDeviceLimits limits;
    VkPhysicalDeviceMemoryProperties memprops;
    uint32_t mt_device, mt_staging; /* memory types: buffers; host-visible staging */
    bool device_mapped;             /* the buffers' memory type is host-visible and coherent */
    VkCommandPool cmd_pool;
    VkFence fence;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe[CQ_VK_SH_COUNT][CQ_VK_VARIANTS]; /* per shader and activation-dtype variant */
    cq_vk_buf *dummy;  /* bound to the bindings a dispatch does not use */
    cq_vk_buf *status; /* host-visible status words the shaders report failures in (bound at CQ_VK_STATUS_BINDING) */
    cq_vk_buf *exp2;   /* exp2f of every f16 bit pattern (65536 floats), made when the first q4tp weight is bound */
    unsigned seq;      /* dispatches since the last sync, for the error messages */
    cq_vk_stream live;
    struct cq_vk_rec *rec;   /* the recording in progress, or NULL */
    cq_vk_buf *pending_free; /* freed while the live stream may still use them */
    bool sync_each_op, records;
    /* the first failure since the last sync */
    cq_status err;
    char err_msg[512];
    /* statistics */
    uint64_t in_use, peak, weight_bytes, allocs, replays;
} cq_vk;

typedef struct cq_vk_rec {
    cq_vk_stream s;
    bool failed;
} cq_vk_rec;

static inline cq_vk *cq_vk_of(cq_backend *be) { return (cq_vk *)be->impl; }

/* Keep the first failure (reported by the next sync); returns it. */
cq_status cq_vk_fail(cq_vk *c, VkResult r, const char *what);
/* The stream ops go to (the recording's while recording). */
cq_vk_stream *cq_vk_cur(cq_vk *c);
/* Submit the live stream and wait for it; free what was freed meanwhile. */
cq_status cq_vk_flush(cq_vk *c);

/* One dispatch: bind the shader, the buffers (NULL: the dummy; whole buffers, offsets go in the push
 * constants), the push constants and a gx * gy grid of workgroups, followed by a barrier. */
cq_status cq_vk_dispatch(cq_vk *c, cq_op op, cq_vk_shader sh, cq_vk_buf *const *bufs, int nbufs, const void *push,
                         uint32_t push_bytes, uint32_t gx, uint32_t gy);
/* The same with the pipeline of one activation-dtype variant (CQ_VK_VARIANT). */
cq_status cq_vk_dispatch_v(cq_vk *c, cq_op op, cq_vk_shader sh, uint32_t variant, cq_vk_buf *const *bufs, int nbufs,
                           const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy);
/* A grid of `groups` workgroups as gx * gy within the device's limits (shaders index it as y * gx + x). */
cq_status cq_vk_grid(const cq_vk *c, uint64_t groups, uint32_t *gx, uint32_t *gy);
/* The pipelines (vk_shaders.c): created at the first use of each shader. */
cq_status cq_vk_pipeline(cq_vk *c, cq_vk_shader sh, uint32_t variant, VkPipeline *out);
void cq_vk_pipelines_destroy(cq_vk *c);

/* memory (vk_backend.c) */
cq_status cq_vk_buf_create(cq_vk *c, VkDeviceSize n, bool staging, cq_vk_buf **out);
void cq_vk_buf_destroy(cq_vk *c, cq_vk_buf *b);

/* ops (vk_ops.c) */
bool cq_vk_supports(const cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt);
cq_status cq_vk_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x);
cq_status cq_vk_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta);
cq_status cq_vk_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn);
cq_status cq_vk_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate);
cq_status cq_vk_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
cq_status cq_vk_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale);
cq_status cq_vk_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                        bool zero_centered, float eps);
cq_status cq_vk_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                          const cq_tensor *shift, float eps);
cq_status cq_vk_matmul(cq_backend *be, const cq_matmul_args *a);
cq_status cq_vk_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                             const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim);
cq_status cq_vk_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x);
cq_status cq_vk_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b);
cq_status cq_vk_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int f);
cq_status cq_vk_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r);
cq_status cq_vk_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r);
cq_status cq_vk_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                            float scale);
cq_status cq_vk_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                          const cq_tensor *beta, float eps);
cq_status cq_vk_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block);
cq_status cq_vk_conv2d(cq_backend *be, const cq_conv2d_args *a);
cq_status cq_vk_conv3d(cq_backend *be, const cq_conv3d_args *a);
cq_status cq_vk_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt, int ph,
                                 int pw);
cq_status cq_vk_conv1d(cq_backend *be, const cq_conv1d_args *a);
cq_status cq_vk_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a);
cq_status cq_vk_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha, const cq_tensor *beta,
                      bool logscale, float eps);
cq_status cq_vk_attention(cq_backend *be, const cq_attn_args *a);
cq_status cq_vk_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids);

#endif /* CQ_BACKENDS_VULKAN_IMPL_H */
