/*
 * vulkan.h — the Vulkan backend's extras, beyond the op layer: whether it is
 * built, device listing and description for `cortiq gpu` and the registry,
 * and creation by device number. Everything else goes through ops.h and the
 * registry (cq_backend_open("vulkan:N", ...)).
 *
 * Every function here exists in every build: without the backend
 * (src/ops/vulkan_absent.c) they say that plainly, so callers need no #ifdefs.
 * Nothing of Vulkan is loaded until one of them (or a backend's creation)
 * needs the driver: the loader libvulkan.so.1 is opened then, with dlopen.
 */
#ifndef CQ_BACKENDS_VULKAN_H
#define CQ_BACKENDS_VULKAN_H

#include "ops/ops.h"

typedef struct cq_vulkan_info {
    char name[256];
    const char *type; /* "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other" */
    char driver[544]; /* the driver's name and version, where the driver says */
    uint32_t api_major, api_minor, api_patch;
    uint64_t mem_device_local; /* the device-local heaps' bytes */
    uint64_t max_buffer_range; /* maxStorageBufferRange: the largest buffer the backend allocates */
    uint32_t subgroup_size;
    bool storage16;   /* 16-bit storage buffers (VK_KHR_16bit_storage) */
    bool float16;     /* f16 arithmetic in shaders (shaderFloat16) */
    bool coopmat_khr; /* VK_KHR_cooperative_matrix */
    bool coopmat_nv;  /* VK_NV_cooperative_matrix */
} cq_vulkan_info;

/* Whether this build contains the Vulkan backend. */
bool cq_vulkan_built(void);
/* Vulkan devices with a compute queue; 0 when the backend is not built, the
 * loader is missing or there is no device, with the reason in `why` (may be
 * NULL). Numbered in the backend's order of preference (ops.h, cq_vulkan_opts). */
int cq_vulkan_device_count(char *why, size_t why_len);
cq_status cq_vulkan_device_info(int device, cq_vulkan_info *out);
/* One line about a device (name, type, memory, API version, the features the backend uses). */
cq_status cq_vulkan_describe(int device, char *buf, size_t len);

/* The Vulkan backend on device `device` (< 0: 0) with options (NULL:
 * defaults). CQ_ERR_UNSUPPORTED, saying why, when this build has no Vulkan
 * backend, the loader or a driver is missing, or there is no such device. */
cq_status cq_backend_vulkan_open(int device, const cq_vulkan_opts *opts, cq_backend **out);

#endif /* CQ_BACKENDS_VULKAN_H */
