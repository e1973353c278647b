/*
 * vulkan_absent.c — the entry points of backends/vulkan/vulkan.h in a build
 * without the Vulkan backend (no headers or no glslc, CORTIQ_VULKAN=OFF, or
 * the fuzz build): they report that plainly, so callers and `cortiq gpu` need
 * no #ifdefs. With the backend built (CQ_HAVE_VULKAN), src/backends/vulkan/
 * defines them instead.
 */
#include "backends/vulkan/vulkan.h"

#ifndef CQ_HAVE_VULKAN

#include <stdio.h>
#include <string.h>

static const char k_not_built[] = "this build has no Vulkan backend (configure with the Vulkan headers and glslc "
                                  "installed, or -DCORTIQ_VULKAN=ON to require them)";

bool cq_vulkan_built(void) { return false; }

int cq_vulkan_device_count(char *why, size_t why_len) {
    if (why && why_len) snprintf(why, why_len, "%s", k_not_built);
    return 0;
}

cq_status cq_vulkan_device_info(int device, cq_vulkan_info *out) {
    (void)device;
    if (out) memset(out, 0, sizeof *out);
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s", k_not_built);
}

cq_status cq_vulkan_describe(int device, char *buf, size_t len) {
    (void)device;
    if (buf && len) *buf = '\0';
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s", k_not_built);
}

cq_status cq_backend_vulkan_open(int device, const cq_vulkan_opts *opts, cq_backend **out) {
    (void)device;
    (void)opts;
    if (out) *out = NULL;
    return cq_fail(CQ_ERR_UNSUPPORTED, "vulkan backend: %s", k_not_built);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int cq_vulkan_absent_unused;

#endif
