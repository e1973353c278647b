/*
 * vk_backend.c — the Vulkan backend: device choice, memory, the command
 * stream and its submission, sync with the deferred errors, recordings and
 * the vtable (vk_impl.h describes the execution model; the device listing
 * for `cortiq gpu` is vk_devices.c).
 *
 * Memory: one VkDeviceMemory per buffer. On a discrete GPU buffers are
 * device-local and uploads and downloads go through a host-visible staging
 * buffer; where device-local memory is also host-visible and coherent
 * (integrated GPUs, lavapipe) buffers are mapped and copied with memcpy.
 * A buffer larger than the device's maxStorageBufferRange is refused with
 * that limit in the message (shaders bind whole buffers).
 *
 * Weights: f32, f16, bf16, q8_row, q8_2f, q4_block, q4_tiled and q4tp
 * payloads are uploaded as they are stored (the shaders decode them,
 * wdec.glsl; no f32 copy is made anywhere). q4tp's ladder is defined through
 * exp2f, so the first q4tp weight also uploads exp2f of every f16 bit
 * pattern as this host's libm computes it (256 KiB, once per backend), as
 * the CUDA backend does. Other codecs are not uploaded: the ops that read
 * them say supports() false and run on the host backend, which reads the
 * pack's mapping (fallback.c), so no host-side copy is made either.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_impl.h"
#include "codec/codec.h"

enum { LIVE_OPS_MAX = 1024 }; /* the live stream is submitted when it holds this many dispatches */

/* A placeholder base for weights kept only in the pack's mapping (quantized codecs). */
static cq_vk_buf k_host_only;

/* ---- errors ------------------------------------------------------------------------------------------------ */
cq_status cq_vk_fail(cq_vk *c, VkResult r, const char *what) {
    cq_status s = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY     ? CQ_ERR_NOMEM
                  : r == VK_ERROR_FEATURE_NOT_PRESENT || r == VK_ERROR_EXTENSION_NOT_PRESENT ? CQ_ERR_UNSUPPORTED
                                                                                             : CQ_ERR_INTERNAL;
    if (r == VK_ERROR_DEVICE_LOST && c && !c->err) { /* sticky: nothing runs on a lost device */
        c->err = CQ_ERR_INTERNAL;
        snprintf(c->err_msg, sizeof c->err_msg,
                 "vulkan %s: the device was lost (VK_ERROR_DEVICE_LOST); "
                 "CORTIQ_VULKAN_SYNC=1 waits after every op to name the failing one",
                 what);
    }
    return cq_fail(s, "vulkan %s failed: %s", what, cq_vk_result_str(r));
}

static cq_status not_while_recording(const char *what) {
    return cq_fail(CQ_ERR_INVALID_ARG, "vulkan: %s cannot be recorded (end the recording first; ops.h)", what);
}

/* ---- memory ------------------------------------------------------------------------------------------------ */
static int find_type(const cq_vk *c, uint32_t bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < c->memprops.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (c->memprops.memoryTypes[i].propertyFlags & want) == want) return (int)i;
    return -1;
}

cq_status cq_vk_buf_create(cq_vk *c, VkDeviceSize n, bool staging, cq_vk_buf **out) {
    *out = NULL;
    VkDeviceSize size = (n + 15) & ~(VkDeviceSize)15;
    if (size == 0) size = 16;
    if (!staging && size > c->limits.maxStorageBufferRange) {
        char a[32], b[32];
        return cq_fail(
            CQ_ERR_UNSUPPORTED,
            "vulkan: a buffer of %s is larger than device %s's largest storage buffer (maxStorageBufferRange "
            "%s); this backend does not split buffers yet: use a smaller size or another backend",
            cq_fmt_bytes(n, a, sizeof a), c->dev_name, cq_fmt_bytes(c->limits.maxStorageBufferRange, b, sizeof b));
    }
    cq_vk_buf *b = cq_calloc(1, sizeof *b);
    if (!b) return CQ_ERR_NOMEM;
    b->size = size;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        cq_free(b);
        return cq_vk_fail(c, r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    c->f.vkGetBufferMemoryRequirements(c->dev, b->buf, &req);
    const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int t = -1;
    if (staging) {
        t = find_type(c, req.memoryTypeBits, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        if (t < 0) t = find_type(c, req.memoryTypeBits, hv);
    } else {
        if (c->device_mapped) t = find_type(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | hv);
        if (t < 0) t = find_type(c, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        if (t < 0) t = find_type(c, req.memoryTypeBits, 0);
    }
    if (t < 0) {
        c->f.vkDestroyBuffer(c->dev, b->buf, NULL);
        cq_free(b);
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan: device %s has no memory type for %s buffers", c->dev_name,
                       staging ? "staging" : "storage");
    }
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = (uint32_t)t};
    r = c->f.vkAllocateMemory(c->dev, &ai, NULL, &b->mem);
    if (r == VK_SUCCESS) r = c->f.vkBindBufferMemory(c->dev, b->buf, b->mem, 0);
    /* mapped: staging buffers, and buffers where device memory is host memory (not a discrete GPU's BAR) */
    if (r == VK_SUCCESS && (staging || c->device_mapped) && (c->memprops.memoryTypes[t].propertyFlags & hv) == hv)
        r = c->f.vkMapMemory(c->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS) {
        char sz[32];
        if (b->mem) c->f.vkFreeMemory(c->dev, b->mem, NULL);
        c->f.vkDestroyBuffer(c->dev, b->buf, NULL);
        cq_free(b);
        cq_status s = cq_vk_fail(c, r, "allocating device memory");
        return cq_fail(s, "vulkan: allocating %s on %s failed: %s", cq_fmt_bytes(n, sz, sizeof sz), c->dev_name,
                       cq_vk_result_str(r));
    }
    if (!staging) {
        c->allocs++;
        c->in_use += size;
        if (c->in_use > c->peak) c->peak = c->in_use;
    }
    *out = b;
    return CQ_OK;
}

static void buf_release(cq_vk *c, cq_vk_buf *b, bool counted) {
    if (!b || b == &k_host_only) return;
    if (b->map) c->f.vkUnmapMemory(c->dev, b->mem);
    c->f.vkDestroyBuffer(c->dev, b->buf, NULL);
    c->f.vkFreeMemory(c->dev, b->mem, NULL);
    if (counted) c->in_use -= b->size;
    cq_free(b);
}

void cq_vk_buf_destroy(cq_vk *c, cq_vk_buf *b) { buf_release(c, b, false); }

/* Freed while the live stream may still read it: kept until the stream's next submission is done. */
static void buf_retire(cq_vk *c, cq_vk_buf *b) {
    if (!b || b == &k_host_only) return;
    if (c->live.ops == 0 && !c->rec) {
        buf_release(c, b, true);
        return;
    }
    b->next_free = c->pending_free;
    c->pending_free = b;
}

/* ---- streams --------------------------------------------------------------------------------------------- */
cq_vk_stream *cq_vk_cur(cq_vk *c) { return c->rec ? &c->rec->s : &c->live; }

static cq_status stream_begin(cq_vk *c, cq_vk_stream *s, bool once) {
    if (s->open) return CQ_OK;
    if (!s->cb) {
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = c->cmd_pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        VkResult r = c->f.vkAllocateCommandBuffers(c->dev, &ai, &s->cb);
        if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkAllocateCommandBuffers");
    }
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = once ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0};
    VkResult r = c->f.vkBeginCommandBuffer(s->cb, &bi);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkBeginCommandBuffer");
    s->open = true;
    return CQ_OK;
}

static void stream_free(cq_vk *c, cq_vk_stream *s) {
    if (s->cb) c->f.vkFreeCommandBuffers(c->dev, c->cmd_pool, 1, &s->cb);
    for (int i = 0; i < s->npools; i++) c->f.vkDestroyDescriptorPool(c->dev, s->pools[i], NULL);
    cq_free(s->pools);
    memset(s, 0, sizeof *s);
}

static cq_status alloc_set(cq_vk *c, cq_vk_stream *s, VkDescriptorSet *set) {
    if (s->npools == 0 || s->used == CQ_VK_POOL_SETS) {
        int next = s->npools == 0 ? 0 : s->cur + 1;
        if (next == s->npools) {
            VkDescriptorPool *np = cq_realloc(s->pools, (size_t)(s->npools + 1) * sizeof *np);
            if (!np) return CQ_ERR_NOMEM;
            s->pools = np;
            VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, CQ_VK_POOL_SETS * CQ_VK_BINDINGS};
            VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                             .maxSets = CQ_VK_POOL_SETS,
                                             .poolSizeCount = 1,
                                             .pPoolSizes = &ps};
            VkResult r = c->f.vkCreateDescriptorPool(c->dev, &pi, NULL, &s->pools[s->npools]);
            if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkCreateDescriptorPool");
            s->npools++;
        }
        s->cur = next;
        s->used = 0;
    }
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = s->pools[s->cur],
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &c->dsl};
    VkResult r = c->f.vkAllocateDescriptorSets(c->dev, &ai, set);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkAllocateDescriptorSets");
    s->used++;
    return CQ_OK;
}

static void barrier(cq_vk *c, VkCommandBuffer cb) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    c->f.vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Submit a stream's command buffer and wait for it. */
static cq_status submit_wait(cq_vk *c, VkCommandBuffer cb) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    VkResult r = c->f.vkQueueSubmit(c->queue, 1, &si, c->fence);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkQueueSubmit");
    r = c->f.vkWaitForFences(c->dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
    VkResult r2 = c->f.vkResetFences(c->dev, 1, &c->fence);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "waiting for the queued work");
    if (r2 != VK_SUCCESS) return cq_vk_fail(c, r2, "vkResetFences");
    return CQ_OK;
}

static void free_pending(cq_vk *c) {
    while (c->pending_free) {
        cq_vk_buf *b = c->pending_free;
        c->pending_free = b->next_free;
        buf_release(c, b, true);
    }
}

cq_status cq_vk_flush(cq_vk *c) {
    if (c->err) return CQ_OK; /* reported by sync */
    cq_vk_stream *s = &c->live;
    cq_status st = CQ_OK;
    if (s->open) {
        s->open = false;
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        c->f.vkCmdPipelineBarrier(s->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                  VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        VkResult r = c->f.vkEndCommandBuffer(s->cb);
        if (r != VK_SUCCESS)
            st = cq_vk_fail(c, r, "vkEndCommandBuffer");
        else
            st = submit_wait(c, s->cb);
        c->f.vkResetCommandBuffer(s->cb, 0);
        for (int i = 0; i < s->npools && i <= s->cur; i++) c->f.vkResetDescriptorPool(c->dev, s->pools[i], 0);
        s->cur = 0;
        s->used = 0;
        s->ops = 0;
    }
    if (!c->rec) free_pending(c);
    return st;
}

cq_status cq_vk_grid(const cq_vk *c, uint64_t groups, uint32_t *gx, uint32_t *gy) {
    uint64_t mx = c->limits.maxComputeWorkGroupCount[0], my = c->limits.maxComputeWorkGroupCount[1];
    if (groups == 0) groups = 1;
    uint64_t x = groups < mx ? groups : mx, y = (groups + x - 1) / x;
    if (y > my)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan: %llu workgroups exceed the device's grid",
                       (unsigned long long)groups);
    *gx = (uint32_t)x;
    *gy = (uint32_t)y;
    return CQ_OK;
}

cq_status cq_vk_dispatch(cq_vk *c, cq_op op, cq_vk_shader sh, cq_vk_buf *const *bufs, int nbufs, const void *push,
                         uint32_t push_bytes, uint32_t gx, uint32_t gy) {
    return cq_vk_dispatch_v(c, op, sh, 0, bufs, nbufs, push, push_bytes, gx, gy);
}

cq_status cq_vk_dispatch_v(cq_vk *c, cq_op op, cq_vk_shader sh, uint32_t variant, cq_vk_buf *const *bufs, int nbufs,
                           const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy) {
    if (c->err) return CQ_OK; /* the backend failed earlier: sync reports it */
    if (c->rec && c->rec->failed) return CQ_ERR_INVALID_ARG;
    if (gy > c->limits.maxComputeWorkGroupCount[1] || gx > c->limits.maxComputeWorkGroupCount[0])
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan %s: a grid of %u x %u workgroups exceeds the device's",
                       cq_op_name(op), gx, gy);
    VkPipeline pipe;
    CQ_TRY(cq_vk_pipeline(c, sh, variant, &pipe));
    cq_vk_stream *s = cq_vk_cur(c);
    CQ_TRY(stream_begin(c, s, !c->rec));
    VkDescriptorSet set;
    CQ_TRY(alloc_set(c, s, &set));
    VkDescriptorBufferInfo bi[CQ_VK_BINDINGS];
    VkWriteDescriptorSet w[CQ_VK_BINDINGS];
    for (int i = 0; i < CQ_VK_BINDINGS; i++) {
        const cq_vk_buf *b = i == CQ_VK_STATUS_BINDING                         ? c->status
                             : i < nbufs && bufs[i] && bufs[i] != &k_host_only ? bufs[i]
                                                                               : c->dummy;
        bi[i] = (VkDescriptorBufferInfo){.buffer = b->buf, .offset = 0, .range = VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = set,
                                      .dstBinding = (uint32_t)i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    c->f.vkUpdateDescriptorSets(c->dev, CQ_VK_BINDINGS, w, 0, NULL);
    c->f.vkCmdBindPipeline(s->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    c->f.vkCmdBindDescriptorSets(s->cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &set, 0, NULL);
    if (push_bytes) c->f.vkCmdPushConstants(s->cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    c->f.vkCmdDispatch(s->cb, gx, gy, 1);
    barrier(c, s->cb);
    s->ops++;
    c->seq++;
    if (!c->rec && (c->sync_each_op || s->ops >= LIVE_OPS_MAX)) {
        cq_status st = cq_vk_flush(c);
        if (st != CQ_OK) return cq_fail_prefix(st, "%s: ", cq_op_name(op));
    }
    return CQ_OK;
}

/* ---- buffers (vtable) ---------------------------------------------------------------------------------------- */
static cq_status vk_buf_alloc(cq_backend *be, size_t nbytes, void **base) {
    cq_vk_buf *b;
    CQ_TRY(cq_vk_buf_create(cq_vk_of(be), nbytes, false, &b));
    *base = b;
    return CQ_OK;
}

static void vk_buf_free(cq_backend *be, void *base) { buf_retire(cq_vk_of(be), base); }

/* A one-off copy between a buffer and a staging buffer, run at once. */
static cq_status copy_now(cq_vk *c, VkBuffer src, VkDeviceSize so, VkBuffer dst, VkDeviceSize dof, VkDeviceSize n) {
    CQ_TRY(stream_begin(c, &c->live, true));
    VkBufferCopy r = {.srcOffset = so, .dstOffset = dof, .size = n};
    c->f.vkCmdCopyBuffer(c->live.cb, src, dst, 1, &r);
    barrier(c, c->live.cb);
    c->live.ops++;
    return cq_vk_flush(c);
}

/* The kept failure, else what a shader reported in the status words (cleared once reported). */
static cq_status sync_err(cq_vk *c) {
    if (c->err) return cq_fail(c->err, "%s", c->err_msg);
    if (c->rec) return CQ_OK;
    uint32_t *st = c->status->map;
    if (st[0] == 0) return CQ_OK;
    uint32_t code = st[0], op = st[1], seq = st[2], where = st[3];
    int32_t value = (int32_t)st[4];
    memset(st, 0, 5 * sizeof *st);
    if (code == 1 && op == CQ_OP_GET_ROWS)
        return cq_fail(CQ_ERR_BOUNDS,
                       "get_rows: id %d at position %u is outside the table (op #%u since the last sync)", value, where,
                       seq);
    if (code == 2)
        return cq_fail(CQ_ERR_NUMERIC,
                       "%s produced a non-finite value (output element %u; op #%u since the last sync): the inputs or "
                       "weights hold values too large for the computation",
                       op < CQ_OP_COUNT ? cq_op_name((cq_op)op) : "an op", where, seq);
    if (code == 1 && op == CQ_OP_GATHER_COLS)
        return cq_fail(CQ_ERR_BOUNDS,
                       "gather_cols: index %d at position %u is out of range (op #%u since the last sync)", value,
                       where, seq);
    return cq_fail(CQ_ERR_INTERNAL, "vulkan: unknown status code %u from %s (op #%u since the last sync)", code,
                   op < CQ_OP_COUNT ? cq_op_name((cq_op)op) : "an op", seq);
}

static cq_status vk_buf_upload(cq_backend *be, void *base, size_t offset, const void *src, size_t n) {
    cq_vk *c = cq_vk_of(be);
    cq_vk_buf *b = base;
    if (c->rec) return not_while_recording("an upload");
    if (!n) return CQ_OK;
    CQ_TRY(cq_vk_flush(c));
    CQ_TRY(sync_err(c));
    if (b->map) {
        memcpy((char *)b->map + offset, src, n);
        return CQ_OK;
    }
    cq_vk_buf *st;
    CQ_TRY(cq_vk_buf_create(c, n, true, &st));
    memcpy(st->map, src, n);
    cq_status s = copy_now(c, st->buf, 0, b->buf, offset, n);
    cq_vk_buf_destroy(c, st);
    return s == CQ_OK ? sync_err(c) : s;
}

static cq_status vk_buf_download(cq_backend *be, const void *base, size_t offset, void *dst, size_t n) {
    cq_vk *c = cq_vk_of(be);
    const cq_vk_buf *b = base;
    if (c->rec) return not_while_recording("a download");
    CQ_TRY(cq_vk_flush(c));
    CQ_TRY(sync_err(c));
    if (!n) return CQ_OK;
    if (b->map) {
        memcpy(dst, (const char *)b->map + offset, n);
        return CQ_OK;
    }
    cq_vk_buf *st;
    CQ_TRY(cq_vk_buf_create(c, n, true, &st));
    cq_status s = copy_now(c, b->buf, offset, st->buf, 0, n);
    if (s == CQ_OK) s = sync_err(c);
    if (s == CQ_OK) memcpy(dst, st->map, n);
    cq_vk_buf_destroy(c, st);
    return s;
}

static cq_status vk_buf_zero(cq_backend *be, void *base, size_t offset, size_t n) {
    cq_vk *c = cq_vk_of(be);
    cq_vk_buf *b = base;
    if (!n || c->err) return CQ_OK;
    if (offset % 4 == 0 && n % 4 == 0) { /* queued (and recordable) */
        cq_vk_stream *s = cq_vk_cur(c);
        CQ_TRY(stream_begin(c, s, !c->rec));
        c->f.vkCmdFillBuffer(s->cb, b->buf, offset, n, 0);
        barrier(c, s->cb);
        s->ops++;
        return CQ_OK;
    }
    if (c->rec) return not_while_recording("zeroing a tensor at an odd 16-bit offset");
    void *z = cq_calloc(1, n);
    if (!z) return CQ_ERR_NOMEM;
    cq_status s = vk_buf_upload(be, base, offset, z, n);
    cq_free(z);
    return s;
}

/* ---- weights ------------------------------------------------------------------------------------------------ */
/* The codecs the shaders decode (vk_ops.c's supports() says which op reads which). */
static bool plain_codec(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F32:
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16:
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F:
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED:
    case CQ_DTYPE_Q4TP: return true;
    default: return false;
    }
}

/* exp2f of every f16 bit pattern, the table the q4tp decode reads its ladder's first rung and ratio from. */
static cq_status exp2_table(cq_vk *c) {
    if (c->exp2) return CQ_OK;
    float *h = cq_mallocn(65536, sizeof *h);
    if (!h) return CQ_ERR_NOMEM;
    for (uint32_t i = 0; i < 65536; i++) h[i] = exp2f(cq_f16_to_f32((uint16_t)i));
    cq_vk_buf *b;
    cq_status s = cq_vk_buf_create(c, 65536 * sizeof *h, false, &b);
    if (s == CQ_OK) {
        s = vk_buf_upload(&c->base, b, 0, h, 65536 * sizeof *h);
        if (s == CQ_OK)
            c->exp2 = b;
        else
            buf_release(c, b, true);
    }
    cq_free(h);
    return s;
}

static cq_status vk_bind_weight(cq_backend *be, const cq_tensor_view *v, cq_tensor *t) {
    cq_vk *c = cq_vk_of(be);
    t->offset = 0;
    t->nbytes = (size_t)v->nbytes;
    if (!plain_codec(v->dtype)) { /* its ops run on the host backend, from the pack's mapping */
        t->base = &k_host_only;
        return CQ_OK;
    }
    if (v->dtype == CQ_DTYPE_Q4TP) CQ_TRY(exp2_table(c));
    cq_vk_buf *b;
    CQ_TRY(cq_vk_buf_create(c, v->nbytes, false, &b));
    cq_status s = vk_buf_upload(be, b, 0, v->data, (size_t)v->nbytes);
    if (s != CQ_OK) {
        buf_release(c, b, true);
        return s;
    }
    c->weight_bytes += b->size;
    t->base = b;
    return CQ_OK;
}

static void vk_release_weight(cq_backend *be, cq_tensor *t) {
    cq_vk *c = cq_vk_of(be);
    cq_vk_buf *b = t->base;
    if (!b || b == &k_host_only) return;
    c->weight_bytes -= b->size;
    buf_retire(c, b);
}

/* ---- sync, stats -------------------------------------------------------------------------------------------- */
static cq_status vk_sync(cq_backend *be) {
    cq_vk *c = cq_vk_of(be);
    if (c->rec) return not_while_recording("sync");
    CQ_TRY(cq_vk_flush(c));
    c->seq = 0;
    return sync_err(c);
}

static cq_status vk_stats(cq_backend *be, cq_backend_stats *out, bool reset) {
    cq_vk *c = cq_vk_of(be);
    CQ_TRY(vk_sync(be));
    out->mem_in_use = c->in_use;
    out->mem_peak = c->peak;
    out->weight_bytes = c->weight_bytes;
    out->device_allocs = c->allocs;
    out->replays = c->replays;
    for (uint32_t i = 0; i < c->memprops.memoryHeapCount; i++)
        if (c->memprops.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            out->device_total += c->memprops.memoryHeaps[i].size;
    if (reset) c->peak = c->in_use;
    return CQ_OK;
}

/* ---- recordings: a command buffer of its own, submitted again at each replay ------------------------------ */
static bool vk_can_record(const cq_backend *be) {
    const cq_vk *c = be->impl;
    return c->records && !c->sync_each_op;
}

static cq_status vk_record_begin(cq_backend *be) {
    cq_vk *c = cq_vk_of(be);
    if (c->rec) return cq_fail(CQ_ERR_INVALID_ARG, "vulkan: a recording is already in progress");
    CQ_TRY(cq_vk_flush(c));
    CQ_TRY(sync_err(c));
    cq_vk_rec *r = cq_calloc(1, sizeof *r);
    if (!r) return CQ_ERR_NOMEM;
    c->rec = r;
    cq_status s = stream_begin(c, &r->s, false);
    if (s != CQ_OK) {
        stream_free(c, &r->s);
        cq_free(r);
        c->rec = NULL;
    }
    return s;
}

static void rec_free(cq_vk *c, cq_vk_rec *r) {
    if (!r) return;
    if (r->s.open) c->f.vkEndCommandBuffer(r->s.cb);
    stream_free(c, &r->s);
    cq_free(r);
}

static cq_status vk_record_end(cq_backend *be, bool keep, void **handle) {
    cq_vk *c = cq_vk_of(be);
    if (handle) *handle = NULL;
    cq_vk_rec *r = c->rec;
    if (!r) return cq_fail(CQ_ERR_INVALID_ARG, "vulkan: no recording in progress");
    c->rec = NULL;
    if (!keep || r->failed) {
        rec_free(c, r);
        free_pending(c);
        return keep ? cq_fail(CQ_ERR_INVALID_ARG, "vulkan: the recording failed halfway") : CQ_OK;
    }
    r->s.open = false;
    VkResult vr = c->f.vkEndCommandBuffer(r->s.cb);
    if (vr != VK_SUCCESS) {
        rec_free(c, r);
        return cq_vk_fail(c, vr, "vkEndCommandBuffer (ending a recording)");
    }
    *handle = r;
    return CQ_OK;
}

static cq_status vk_replay(cq_backend *be, void *handle) {
    cq_vk *c = cq_vk_of(be);
    cq_vk_rec *r = handle;
    if (c->rec) return not_while_recording("a replay");
    CQ_TRY(cq_vk_flush(c));
    CQ_TRY(sync_err(c));
    if (r->s.ops) CQ_TRY(submit_wait(c, r->s.cb));
    c->replays++;
    return CQ_OK;
}

static void vk_record_free(cq_backend *be, void *handle) { rec_free(cq_vk_of(be), handle); }

/* ---- capabilities ---------------------------------------------------------------------------------------------- */
static cq_dtype vk_op_precision(const cq_backend *be, cq_op op, cq_dtype wdt) {
    (void)be;
    (void)op;
    (void)wdt;
    return CQ_DTYPE_F32; /* the portable path computes in f32, weights decoded exactly */
}

/* ---- lifecycle ---------------------------------------------------------------------------------------------- */
static void vk_destroy(cq_backend *be) {
    cq_vk *c = cq_vk_of(be);
    if (!c) return;
    if (c->dev) {
        if (c->live.open) (void)cq_vk_flush(c); /* nothing may be in flight when the device goes */
        if (c->rec) rec_free(c, c->rec);
        c->rec = NULL;
        stream_free(c, &c->live);
        free_pending(c);
        cq_vk_pipelines_destroy(c);
        if (c->dummy) buf_release(c, c->dummy, true);
        if (c->status) cq_vk_buf_destroy(c, c->status);
        if (c->exp2) buf_release(c, c->exp2, true);
        if (c->layout) c->f.vkDestroyPipelineLayout(c->dev, c->layout, NULL);
        if (c->dsl) c->f.vkDestroyDescriptorSetLayout(c->dev, c->dsl, NULL);
        if (c->fence) c->f.vkDestroyFence(c->dev, c->fence, NULL);
        if (c->cmd_pool) c->f.vkDestroyCommandPool(c->dev, c->cmd_pool, NULL);
        c->f.vkDestroyDevice(c->dev, NULL);
    }
    if (c->inst) c->f.vkDestroyInstance(c->inst, NULL);
    cq_free(c);
}

static const cq_backend_vtbl k_vk_vtbl = {
    .kind = "vulkan",
    .destroy = vk_destroy,
    .supports = cq_vk_supports,
    .buf_alloc = vk_buf_alloc,
    .buf_free = vk_buf_free,
    .buf_upload = vk_buf_upload,
    .buf_download = vk_buf_download,
    .buf_zero = vk_buf_zero,
    .bind_weight = vk_bind_weight,
    .release_weight = vk_release_weight,
    .sync = vk_sync,
    .copy = cq_vk_copy,
    .unary = cq_vk_unary,
    .binary = cq_vk_binary,
    .gated_add = cq_vk_gated_add,
    .swiglu = cq_vk_swiglu,
    .softmax = cq_vk_softmax,
    .rmsnorm = cq_vk_rmsnorm,
    .layernorm = cq_vk_layernorm,
    .matmul = cq_vk_matmul,
    .get_rows = cq_vk_get_rows,
    .attention = cq_vk_attention,
    .qk_norm_rope = cq_vk_qk_norm_rope,
    .transpose = cq_vk_transpose,
    .concat_cols = cq_vk_concat_cols,
    .upsample_nearest = cq_vk_upsample_nearest,
    .pixel_shuffle = cq_vk_pixel_shuffle,
    .pixel_unshuffle = cq_vk_pixel_unshuffle,
    .gather_cols = cq_vk_gather_cols,
    .groupnorm = cq_vk_groupnorm,
    .group_moments = cq_vk_group_moments,
    .conv2d = cq_vk_conv2d,
    .conv3d = cq_vk_conv3d,
    .depth_to_space3d = cq_vk_depth_to_space3d,
    .conv1d = cq_vk_conv1d,
    .conv_transpose1d = cq_vk_conv_transpose1d,
    .snake = cq_vk_snake,
    .op_precision = vk_op_precision,
    .stats = vk_stats,
    .can_record = vk_can_record,
    .record_begin = vk_record_begin,
    .record_end = vk_record_end,
    .replay = vk_replay,
    .record_free = vk_record_free,
};

/* ---- creation ------------------------------------------------------------------------------------------- */
static cq_status vk_init(cq_vk *c, int device, const cq_vulkan_opts *o) {
    CQ_TRY(cq_vk_instance(&c->inst, &c->f));
    VkPhysicalDevice devs[64];
    uint32_t n = cq_vk_ranked_devices(&c->f, c->inst, devs, 64);
    if (n == 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: no usable device: the Vulkan loader reports no device of "
                                           "Vulkan 1.1 or newer with a compute queue (no driver installed?)");
    if ((uint32_t)device >= n)
        return cq_fail(CQ_ERR_UNSUPPORTED,
                       "vulkan backend: device %d does not exist (%u device%s visible; `cortiq gpu` "
                       "lists them)",
                       device, n, n == 1 ? "" : "s");
    c->phys = devs[device];
    c->index = device;
    VkPhysicalDeviceProperties p;
    c->f.vkGetPhysicalDeviceProperties(c->phys, &p);
    snprintf(c->dev_name, sizeof c->dev_name, "%s", p.deviceName);
    c->limits = p.limits;
    if (p.limits.maxPerStageDescriptorStorageBuffers < CQ_VK_BINDINGS ||
        p.limits.maxPushConstantsSize < CQ_VK_PUSH_BYTES || p.limits.maxComputeWorkGroupInvocations < 128 ||
        p.limits.maxComputeSharedMemorySize < 4096)
        return cq_fail(CQ_ERR_UNSUPPORTED,
                       "vulkan backend: device %s is too small for the shaders (%u storage buffers per stage, %u bytes "
                       "of push constants; needs %d and %d)",
                       c->dev_name, p.limits.maxPerStageDescriptorStorageBuffers, p.limits.maxPushConstantsSize,
                       CQ_VK_BINDINGS, CQ_VK_PUSH_BYTES);
    c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memprops);
    /* mapped buffers where device-local memory is host memory anyway (not on a discrete GPU, whose host-visible
     * device memory is slow to read from the host) */
    if (p.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU && !o->staging) {
        const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        for (uint32_t i = 0; i < c->memprops.memoryTypeCount; i++)
            if ((c->memprops.memoryTypes[i].propertyFlags & want) == want) c->device_mapped = true;
    }
    uint32_t nq = 0;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, NULL);
    VkQueueFamilyProperties q[16];
    if (nq > 16) nq = 16;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, q);
    int fam = -1;
    for (uint32_t i = 0; i < nq && fam < 0; i++) /* a compute-only family first: it runs beside graphics work */
        if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) fam = (int)i;
    for (uint32_t i = 0; i < nq && fam < 0; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = (int)i;
    if (fam < 0) return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: device %s has no compute queue", c->dev_name);
    c->qfam = (uint32_t)fam;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = c->qfam,
                                  .queueCount = 1,
                                  .pQueuePriorities = &prio};
    VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    VkResult r = c->f.vkCreateDevice(c->phys, &di, NULL, &c->dev);
    if (r != VK_SUCCESS) {
        c->dev = VK_NULL_HANDLE;
        return cq_vk_fail(c, r, "vkCreateDevice");
    }
    CQ_TRY(cq_vk_device_fns(c->dev, &c->f));
    c->f.vkGetDeviceQueue(c->dev, c->qfam, 0, &c->queue);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = c->qfam};
    r = c->f.vkCreateCommandPool(c->dev, &pi, NULL, &c->cmd_pool);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkCreateCommandPool");
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = c->f.vkCreateFence(c->dev, &fi, NULL, &c->fence);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkCreateFence");
    VkDescriptorSetLayoutBinding b[CQ_VK_BINDINGS];
    for (int i = 0; i < CQ_VK_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = CQ_VK_BINDINGS, .pBindings = b};
    r = c->f.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &c->dsl);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = CQ_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &c->dsl,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pr};
    r = c->f.vkCreatePipelineLayout(c->dev, &pli, NULL, &c->layout);
    if (r != VK_SUCCESS) return cq_vk_fail(c, r, "vkCreatePipelineLayout");
    CQ_TRY(cq_vk_buf_create(c, 16, false, &c->dummy));
    CQ_TRY(cq_vk_buf_create(c, 64, true, &c->status)); /* host-visible, coherent: read after each wait */
    memset(c->status->map, 0, 64);
    c->sync_each_op = o->sync_each_op;
    c->records = o->records;
    c->base.vt = &k_vk_vtbl;
    c->base.act_dtype = CQ_DTYPE_F32; /* the portable path computes in f32 */
    c->base.impl = c;
    snprintf(c->base.name, sizeof c->base.name, "vulkan:%d (%.40s)", device, c->dev_name);
    return CQ_OK;
}

cq_status cq_backend_vulkan_open(int device, const cq_vulkan_opts *opts, cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_vulkan_open: out is NULL");
    *out = NULL;
    static const cq_vulkan_opts k_defaults;
    if (!opts) opts = &k_defaults;
    if (device < 0) device = 0;
    cq_vk *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->base.impl = c;
    cq_status s = vk_init(c, device, opts);
    if (s != CQ_OK) {
        vk_destroy(&c->base);
        return s;
    }
    *out = &c->base;
    return CQ_OK;
}
