/*
 * registry.c — the one table of backends: name, whether this build has it,
 * creation from cq_backend_opts, device listing. Every list of backend names
 * (the CLI's --backend checks and help texts, `cortiq gpu`, the tests) comes
 * from here. Adding a backend is a line in k_backends (and its folder).
 *
 * cq_backend_open parses "name" or "name:N", creates the backend, checks its
 * vtable (cq_backend_check), records the host options its fallbacks use and
 * applies the activation dtype the options ask for (cq_backend_opts.act_dtype).
 *
 * "auto" is not a backend but a choice made here (cq_backend_resolve): CUDA
 * where this build has it and the device is usable (compute capability 8.0
 * or newer, cuBLASLt loads), else the CPU, with the reason in one line. The
 * Vulkan backend is never chosen automatically: on many machines its device
 * is lavapipe or an integrated GPU slower than the CPU kit, and ops it lacks
 * run on the host. NULL or "" keeps meaning the CPU (what embedders get
 * unless they ask).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/cuda/cuda.h"
#include "backends/vulkan/vulkan.h"
#include "ops/backend.h"

static bool always(void) { return true; }

static cq_status cpu_create(int device, const cq_backend_opts *o, cq_backend **out) {
    (void)device;
    return cq_backend_cpu_open(&o->cpu, out);
}

static cq_status ref_create(int device, const cq_backend_opts *o, cq_backend **out) {
    (void)device;
    (void)o;
    return cq_backend_ref_create(out);
}

/* device: the N of "name:N", or -1 when the name has none (each backend's default then) */
static cq_status cuda_create(int device, const cq_backend_opts *o, cq_backend **out) {
    cq_cuda_opts co = o->cuda; /* the backend-wide budget, where the CUDA options name none */
    if (!co.mem_budget) co.mem_budget = o->mem_budget;
    return cq_backend_cuda_open(device < 0 ? o->device : device, &co, out);
}

static cq_status vulkan_create(int device, const cq_backend_opts *o, cq_backend **out) {
    return cq_backend_vulkan_open(device < 0 ? o->vulkan.device : device, &o->vulkan, out);
}

static const cq_backend_desc k_backends[] = {
    {"cpu", "CPU", "the CPU (AVX2 / AVX-512 / AMX / NEON kits chosen at run time)", false, always, cpu_create, NULL, NULL},
    {"ref", "reference", "the plain-C reference ops (slow; for checking and debugging)", false, always, ref_create, NULL, NULL},
    {"cuda", "CUDA", "NVIDIA GPUs of compute capability 8.0 or newer", true, cq_cuda_built, cuda_create, cq_cuda_device_count,
     cq_cuda_describe},
    {"vulkan", "Vulkan", "GPUs with a Vulkan 1.1 driver (AMD, Intel, NVIDIA; lavapipe on the CPU for testing)", true,
     cq_vulkan_built, vulkan_create, cq_vulkan_device_count, cq_vulkan_describe},
};

size_t cq_backend_registry_count(void) { return CQ_ARRAY_LEN(k_backends); }

const cq_backend_desc *cq_backend_registry_get(size_t i) {
    return i < CQ_ARRAY_LEN(k_backends) ? &k_backends[i] : NULL;
}

const char *cq_backend_names(char *buf, size_t len) {
    if (!buf || !len) return "";
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_backends) && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s%s", i ? ", " : "", k_backends[i].name,
                              k_backends[i].has_devices ? "[:N]" : "");
    return buf;
}

bool cq_backend_is_auto(const char *name) { return name && !strcasecmp(name, "auto"); }

bool cq_backend_is_host(const cq_backend *be) { return be && be->vt && be->vt->is_host; }

/* Why CUDA device `dev` cannot be the automatic choice (false), or its name
 * and free memory (true), in `why`. */
static bool cuda_usable(int dev, char *why, size_t why_len) {
    if (!cq_cuda_built()) {
        snprintf(why, why_len, "this build has no CUDA backend");
        return false;
    }
    char reason[256] = "";
    int n = cq_cuda_device_count(reason, sizeof reason);
    if (n <= 0) {
        snprintf(why, why_len, "no CUDA device visible: %s", reason);
        return false;
    }
    if (dev >= n) {
        snprintf(why, why_len, "CUDA device %d does not exist (%d visible)", dev, n);
        return false;
    }
    cq_gpu_info g;
    if (cq_cuda_device_info(dev, &g) != CQ_OK) {
        snprintf(why, why_len, "CUDA device %d cannot be queried: %s", dev, cq_last_error());
        return false;
    }
    if (g.cc_major < 8) {
        snprintf(why, why_len, "CUDA device %d (%s) is cc %d.%d, needs 8.0", dev, g.name, g.cc_major, g.cc_minor);
        return false;
    }
    /* the backend opens cuBLASLt when it is created: a machine with a driver but without the library runs on the
     * CPU rather than failing */
    if (!cq_cuda_load_cublaslt(reason, sizeof reason)) {
        snprintf(why, why_len, "CUDA device %d has no cuBLASLt: %s", dev, reason);
        return false;
    }
    char fr[32];
    snprintf(why, why_len, "%s, %s free", g.name, cq_fmt_bytes(g.mem_free, fr, sizeof fr));
    return true;
}

cq_status cq_backend_resolve(const char *name, const cq_backend_opts *opts, char *out, size_t out_len, char *why,
                             size_t why_len) {
    char scratch[8];
    if (!why || !why_len) {
        why = scratch;
        why_len = sizeof scratch;
    }
    *why = '\0';
    if (!out || !out_len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_resolve: no buffer for the name");
    *out = '\0';
    if (!name || !*name) name = "cpu";
    if (!cq_backend_is_auto(name)) {
        CQ_TRY(cq_backend_lookup(name, NULL, NULL));
        if ((size_t)snprintf(out, out_len, "%s", name) >= out_len)
            return cq_fail(CQ_ERR_INVALID_ARG, "backend name '%s' is too long", name);
        return CQ_OK;
    }
    const int dev = opts && opts->device > 0 ? opts->device : 0;
    if (cuda_usable(dev, why, why_len)) snprintf(out, out_len, "cuda:%d", dev);
    else snprintf(out, out_len, "cpu");
    return CQ_OK;
}

cq_status cq_backend_lookup(const char *name, const cq_backend_desc **desc, int *device) {
    if (desc) *desc = NULL;
    if (device) *device = -1;
    if (!name || !*name) name = "cpu";
    if (cq_backend_is_auto(name)) {
        /* a choice, not an entry: which one is made when the backend is opened */
        char pick[32];
        CQ_TRY(cq_backend_resolve(name, NULL, pick, sizeof pick, NULL, 0));
        return cq_backend_lookup(pick, desc, device);
    }
    const char *colon = strchr(name, ':');
    size_t n = colon ? (size_t)(colon - name) : strlen(name);
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_backends); i++) {
        const cq_backend_desc *d = &k_backends[i];
        if (strlen(d->name) != n || strncasecmp(name, d->name, n)) continue;
        int dev = -1;
        if (colon) {
            if (!d->has_devices)
                return cq_fail(CQ_ERR_INVALID_ARG, "backend '%s': %s has no devices to number (want %s)", name,
                               d->name, d->name);
            char *end = NULL;
            long v = strtol(colon + 1, &end, 10);
            if (end == colon + 1 || *end || v < 0 || v > 1024)
                return cq_fail(CQ_ERR_INVALID_ARG, "backend '%s': want %s or %s:N with N a device number", name,
                               d->name, d->name);
            dev = (int)v;
        }
        if (desc) *desc = d;
        if (device) *device = dev;
        return CQ_OK;
    }
    char names[128], missing[128] = "";
    size_t o = 0;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_backends); i++)
        if (!k_backends[i].built() && o < sizeof missing)
            o += (size_t)snprintf(missing + o, sizeof missing - o, "%s%s", o ? ", " : "; this build has no ",
                                  k_backends[i].name);
    return cq_fail(CQ_ERR_UNSUPPORTED, "unknown backend '%s' (have: %s, auto%s)", name,
                   cq_backend_names(names, sizeof names), missing);
}

bool cq_backend_has_entry(const cq_backend *be, cq_op op) {
    if (!be || !be->vt) return false;
    switch (op) {
#define CQ_OP_HAS_(E, name, P, A, u)                                                                                   \
    case CQ_OP_##E: return be->vt->name != NULL;
        CQ_OPS_LIST(CQ_OP_HAS_, _)
#undef CQ_OP_HAS_
    default: return false;
    }
}

cq_status cq_backend_check(const cq_backend *be) {
    if (!be || !be->vt) return cq_fail(CQ_ERR_INTERNAL, "backend has no vtable");
    const cq_backend_vtbl *vt = be->vt;
    const struct {
        const char *what;
        bool ok;
    } req[] = {
        {"kind", vt->kind != NULL},           {"destroy", vt->destroy != NULL},
        {"supports", vt->supports != NULL},   {"buf_alloc", vt->buf_alloc != NULL},
        {"buf_free", vt->buf_free != NULL},   {"buf_upload", vt->buf_upload != NULL},
        {"buf_download", vt->buf_download != NULL}, {"buf_zero", vt->buf_zero != NULL},
        {"bind_weight", vt->bind_weight != NULL},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(req); i++)
        if (!req[i].ok) return cq_fail(CQ_ERR_INTERNAL, "backend %s: its vtable lacks '%s'", be->name, req[i].what);
    int rec = !!vt->can_record + !!vt->record_begin + !!vt->record_end + !!vt->replay + !!vt->record_free;
    if (rec != 0 && rec != 5)
        return cq_fail(CQ_ERR_INTERNAL, "backend %s: its recording entries are partly given (%d of 5)", be->name, rec);
    if (vt->is_host)
        for (int op = 0; op < CQ_OP_COUNT; op++)
            if (!cq_backend_has_entry(be, (cq_op)op))
                return cq_fail(CQ_ERR_INTERNAL, "backend %s: host backend without a '%s' entry (nothing to fall back to)",
                               be->name, cq_op_name((cq_op)op));
    return CQ_OK;
}

cq_status cq_backend_open(const char *name, const cq_backend_opts *opts, cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_backend_open: out is NULL");
    *out = NULL;
    static const cq_backend_opts k_defaults;
    if (!opts) opts = &k_defaults;
    const cq_backend_desc *d;
    int dev;
    char pick[32];
    if (cq_backend_is_auto(name)) {
        CQ_TRY(cq_backend_resolve(name, opts, pick, sizeof pick, NULL, 0));
        name = pick;
    }
    CQ_TRY(cq_backend_lookup(name, &d, &dev));
    if (opts->act_dtype != CQ_DTYPE_F32 && opts->act_dtype != CQ_DTYPE_F16 && opts->act_dtype != CQ_DTYPE_BF16)
        return cq_fail(CQ_ERR_INVALID_ARG, "backend '%s': activation dtype %s is not one of f32, f16, bf16", name,
                       (unsigned)opts->act_dtype < CQ_DTYPE_COUNT ? cq_dtype_name(opts->act_dtype) : "(unknown)");
    cq_backend *be = NULL;
    CQ_TRY(d->create(dev, opts, &be));
    cq_status s = cq_backend_check(be);
    if (s != CQ_OK) {
        cq_backend_free(be);
        return s;
    }
    be->host_opts = opts->cpu;
    be->no_fallback = opts->no_fallback;
    if (opts->act_dtype != CQ_DTYPE_F32) be->act_dtype = opts->act_dtype; /* 0 keeps the backend's own */
    *out = be;
    return CQ_OK;
}

cq_status cq_backend_create(const char *name, int threads, cq_backend **out) {
    cq_backend_opts o = {.cpu = {.threads = threads}};
    return cq_backend_open(name, &o, out);
}
