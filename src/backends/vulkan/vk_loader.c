/*
 * vk_loader.c — the Vulkan loader, opened at run time: dlopen("libvulkan.so.1")
 * at the first backend creation or device query (never when the program
 * starts), vkGetInstanceProcAddr from it, and every other function through
 * that and vkGetDeviceProcAddr. Nothing of Vulkan is linked.
 */
#include <dlfcn.h>
#if defined(CQ_SANITIZE) && defined(__linux__)
#include <link.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_impl.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_lib;
static PFN_vkGetInstanceProcAddr g_gipa;
static char g_why[400];

cq_status cq_vk_load(void) {
    pthread_mutex_lock(&g_lock);
    if (!g_lib && !g_why[0]) {
        static const char *const names[] = {"libvulkan.so.1", "libvulkan.so"};
        char first[256] = "";
        for (size_t i = 0; i < CQ_ARRAY_LEN(names) && !g_lib; i++) {
            g_lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            if (!g_lib && !first[0]) {
                const char *e = dlerror();
                snprintf(first, sizeof first, "%s", e ? e : "not found");
            }
        }
        if (!g_lib) {
            snprintf(g_why, sizeof g_why,
                     "cannot load the Vulkan loader libvulkan.so.1 (%s); install it (Debian: libvulkan1) and a driver "
                     "(mesa-vulkan-drivers, or the GPU vendor's)",
                     first);
        } else {
            void *sym = dlsym(g_lib, "vkGetInstanceProcAddr");
            memcpy(&g_gipa, &sym, sizeof g_gipa);
            if (!g_gipa) {
                snprintf(g_why, sizeof g_why, "the Vulkan loader libvulkan.so.1 lacks vkGetInstanceProcAddr");
                dlclose(g_lib);
                g_lib = NULL;
            }
        }
    }
    bool ok = g_lib != NULL;
    pthread_mutex_unlock(&g_lock);
    return ok ? CQ_OK : cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: %s", g_why);
}

const char *cq_vk_result_str(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver, or none new enough)";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "a Vulkan error";
    }
}

#define LOAD_I_(f)                                                                                                     \
    do {                                                                                                               \
        PFN_vkVoidFunction p_ = g_gipa(*inst, #f);                                                                     \
        memcpy(&fns->f, &p_, sizeof p_);                                                                               \
        if (!fns->f) missing = #f;                                                                                     \
    } while (0);

cq_status cq_vk_instance(VkInstance *inst, cq_vk_fns *fns) {
    *inst = VK_NULL_HANDLE;
    memset(fns, 0, sizeof *fns);
    CQ_TRY(cq_vk_load());
    fns->vkGetInstanceProcAddr = g_gipa;
    PFN_vkVoidFunction p = g_gipa(VK_NULL_HANDLE, "vkCreateInstance");
    memcpy(&fns->vkCreateInstance, &p, sizeof p);
    p = g_gipa(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
    memcpy(&fns->vkEnumerateInstanceVersion, &p, sizeof p);
    if (!fns->vkCreateInstance)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: the loader has no vkCreateInstance");
    uint32_t ver = VK_API_VERSION_1_0;
    if (fns->vkEnumerateInstanceVersion) fns->vkEnumerateInstanceVersion(&ver);
    if (ver < VK_API_VERSION_1_1)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: the Vulkan loader is version %u.%u; the backend needs 1.1",
                       VK_API_VERSION_MAJOR(ver), VK_API_VERSION_MINOR(ver));
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "cortiq",
                             .pEngineName = "cortiq",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = fns->vkCreateInstance(&ci, NULL, inst);
    if (r != VK_SUCCESS) {
        *inst = VK_NULL_HANDLE;
        return cq_fail(r == VK_ERROR_INCOMPATIBLE_DRIVER ? CQ_ERR_UNSUPPORTED : CQ_ERR_INTERNAL,
                       "vulkan backend: vkCreateInstance failed: %s", cq_vk_result_str(r));
    }
    const char *missing = NULL;
    CQ_VK_INSTANCE_FNS(LOAD_I_)
    if (missing) {
        PFN_vkDestroyInstance d = fns->vkDestroyInstance;
        if (d) d(*inst, NULL);
        *inst = VK_NULL_HANDLE;
        return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: the loader lacks %s", missing);
    }
    return CQ_OK;
}

#define LOAD_D_(f)                                                                                                     \
    do {                                                                                                               \
        PFN_vkVoidFunction p_ = fns->vkGetDeviceProcAddr(dev, #f);                                                     \
        memcpy(&fns->f, &p_, sizeof p_);                                                                               \
        if (!fns->f) missing = #f;                                                                                     \
    } while (0);

cq_status cq_vk_device_fns(VkDevice dev, cq_vk_fns *fns) {
    const char *missing = NULL;
    CQ_VK_DEVICE_FNS(LOAD_D_)
    if (missing) return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: the driver lacks %s", missing);
    return CQ_OK;
}

static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static bool has_compute(const cq_vk_fns *f, VkPhysicalDevice pd) {
    uint32_t n = 0;
    f->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties q[16];
    if (n > 16) n = 16;
    f->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    for (uint32_t i = 0; i < n; i++)
        if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return true;
    return false;
}

#if defined(CQ_SANITIZE) && defined(__linux__)
/* Sanitizer builds only: keep every library loaded so far (the Vulkan drivers the loader opened for this
 * instance among them) mapped for the life of the process. The loader unloads its drivers at
 * vkDestroyInstance, so LeakSanitizer, which reports at exit, could not name a driver's own leaks (Mesa's
 * lavapipe keeps 128 bytes per instance) and tests/lsan.supp could not tell them from ours. */
static int pin_one(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size;
    (void)user;
    if (info->dlpi_name && info->dlpi_name[0]) {
        void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        if (h) dlclose(h); /* RTLD_NODELETE stays with the library */
    }
    return 0;
}
static void pin_drivers(void) { dl_iterate_phdr(pin_one, NULL); }
#else
static void pin_drivers(void) {}
#endif

uint32_t cq_vk_ranked_devices(const cq_vk_fns *f, VkInstance inst, VkPhysicalDevice *out, uint32_t cap) {
    uint32_t n = 0;
    if (f->vkEnumeratePhysicalDevices(inst, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkPhysicalDevice all[64];
    if (n > 64) n = 64;
    VkResult r = f->vkEnumeratePhysicalDevices(inst, &n, all);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return 0;
    pin_drivers();
    uint32_t k = 0;
    for (int rank = 0; rank <= 4; rank++) /* stable: the driver's order within a rank */
        for (uint32_t i = 0; i < n && k < cap; i++) {
            VkPhysicalDeviceProperties p;
            f->vkGetPhysicalDeviceProperties(all[i], &p);
            if (type_rank(p.deviceType) == rank && p.apiVersion >= VK_API_VERSION_1_1 && has_compute(f, all[i]))
                out[k++] = all[i];
        }
    return k;
}
