/*
 * vk_devices.c — the Vulkan devices for `cortiq gpu` and the registry: how
 * many there are (those of Vulkan 1.1 or newer with a compute queue, in the
 * backend's order of preference, vk_loader.c), and what each is: name, type,
 * memory, API version and driver, the largest storage buffer, the subgroup
 * size and the features the backend's fast paths use. Each query makes and
 * destroys an instance of its own.
 */
#include <stdio.h>
#include <string.h>

#include "backends/vulkan/vk_impl.h"

/* ---- devices ------------------------------------------------------------------------------------------------ */
bool cq_vulkan_built(void) { return true; }

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

/* An instance and the ranked devices, for the listing functions. */
typedef struct probe {
    cq_vk_fns f;
    VkInstance inst;
    VkPhysicalDevice dev[64];
    uint32_t n;
} probe;

static cq_status probe_open(probe *p) {
    memset(p, 0, sizeof *p);
    CQ_TRY(cq_vk_instance(&p->inst, &p->f));
    p->n = cq_vk_ranked_devices(&p->f, p->inst, p->dev, 64);
    return CQ_OK;
}

static void probe_close(probe *p) {
    if (p->inst) p->f.vkDestroyInstance(p->inst, NULL);
    p->inst = VK_NULL_HANDLE;
}

int cq_vulkan_device_count(char *why, size_t why_len) {
    probe p;
    if (probe_open(&p) != CQ_OK) {
        if (why && why_len) snprintf(why, why_len, "%s", cq_last_error());
        return 0;
    }
    int n = (int)p.n;
    if (n == 0 && why && why_len)
        snprintf(why, why_len,
                 "the Vulkan loader reports no device of Vulkan 1.1 or newer with a compute queue "
                 "(no driver installed? Debian: mesa-vulkan-drivers, or the GPU vendor's)");
    probe_close(&p);
    return n;
}

static bool has_ext(const cq_vk_fns *f, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (f->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || !n) return false;
    VkExtensionProperties *e = cq_calloc(n, sizeof *e);
    if (!e) return false;
    bool found = false;
    if (f->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, name);
    cq_free(e);
    return found;
}

static void fill_info(const cq_vk_fns *f, VkPhysicalDevice pd, cq_vulkan_info *out) {
    memset(out, 0, sizeof *out);
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    f->vkGetPhysicalDeviceProperties2(pd, &p2);
    const VkPhysicalDeviceProperties *p = &p2.properties;
    snprintf(out->name, sizeof out->name, "%s", p->deviceName);
    out->type = type_name(p->deviceType);
    out->api_major = VK_API_VERSION_MAJOR(p->apiVersion);
    out->api_minor = VK_API_VERSION_MINOR(p->apiVersion);
    out->api_patch = VK_API_VERSION_PATCH(p->apiVersion);
    out->max_buffer_range = p->limits.maxStorageBufferRange;
    out->subgroup_size = sg.subgroupSize;
    VkPhysicalDeviceMemoryProperties mp;
    f->vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) out->mem_device_local += mp.memoryHeaps[i].size;
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
    f->vkGetPhysicalDeviceFeatures2(pd, &f2);
    out->storage16 = s16.storageBuffer16BitAccess;
    out->float16 = has_ext(f, pd, "VK_KHR_shader_float16_int8");
    out->coopmat_khr = has_ext(f, pd, "VK_KHR_cooperative_matrix");
    out->coopmat_nv = has_ext(f, pd, "VK_NV_cooperative_matrix");
    if (has_ext(f, pd, "VK_KHR_driver_properties")) {
        VkPhysicalDeviceDriverProperties dp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceProperties2 q = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &dp};
        f->vkGetPhysicalDeviceProperties2(pd, &q);
        snprintf(out->driver, sizeof out->driver, "%s %s", dp.driverName, dp.driverInfo);
    }
}

cq_status cq_vulkan_device_info(int device, cq_vulkan_info *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_vulkan_device_info: out is NULL");
    memset(out, 0, sizeof *out);
    probe p;
    CQ_TRY(probe_open(&p));
    cq_status s = CQ_OK;
    if (device < 0 || (uint32_t)device >= p.n)
        s = cq_fail(CQ_ERR_UNSUPPORTED, "vulkan: device %d does not exist (%u device%s visible)", device, p.n,
                    p.n == 1 ? "" : "s");
    else
        fill_info(&p.f, p.dev[device], out);
    probe_close(&p);
    return s;
}

cq_status cq_vulkan_describe(int device, char *buf, size_t len) {
    if (!buf || !len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_vulkan_describe: no buffer");
    *buf = '\0';
    cq_vulkan_info d;
    CQ_TRY(cq_vulkan_device_info(device, &d));
    char mem[32], rng[32];
    snprintf(buf, len,
             "%s (%s), %s device-local memory, Vulkan %u.%u.%u%s%s%s; largest buffer %s, subgroup %u; "
             "16-bit storage %s, f16 arithmetic %s, cooperative matrices %s (the backend uses f32 compute)",
             d.name, d.type, cq_fmt_bytes(d.mem_device_local, mem, sizeof mem), d.api_major, d.api_minor, d.api_patch,
             d.driver[0] ? " (" : "", d.driver, d.driver[0] ? ")" : "",
             cq_fmt_bytes(d.max_buffer_range, rng, sizeof rng), d.subgroup_size, d.storage16 ? "yes" : "no",
             d.float16 ? "yes" : "no",
             d.coopmat_khr  ? (d.coopmat_nv ? "KHR and NV" : "KHR")
             : d.coopmat_nv ? "NV"
                            : "none");
    return CQ_OK;
}
