/*
 * cmd_gpu.c — `cortiq gpu`: the GPU devices this build can run on (name,
 * memory free and total, compute capability), the backend `imagine` and
 * `run` pick by default ("auto": the CUDA GPU where there is a usable one,
 * else the CPU) and why, and the backend CORTIQ_BACKEND would give. It is
 * the one command that loads the CUDA driver and cuBLASLt, and the Vulkan
 * loader, without being asked to run on the GPU (elsewhere they load when a
 * backend is chosen or created), so it also says whether cuBLASLt loads.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "ops/ops.h"

/* A registered device backend: built or not, its devices, one line each. */
static void list_devices(const cq_backend_desc *d) {
    if (!d->built()) {
        printf("%s backend: not built (%s)\n", d->label,
               !strcmp(d->name, "cuda")     ? "no CUDA toolkit when this build was configured; -DCORTIQ_CUDA=ON requires it"
               : !strcmp(d->name, "vulkan") ? "no Vulkan headers or glslc when this build was configured; "
                                              "-DCORTIQ_VULKAN=ON requires them"
                                            : "not in this build");
        return;
    }
    char why[256] = "";
    int n = d->device_count(why, sizeof why);
    printf("%s backend: built; %d device%s visible%s%s\n", d->label, n, n == 1 ? "" : "s", n ? "" : ": ", n ? "" : why);
    for (int i = 0; i < n; i++) {
        char line[512];
        if (d->describe(i, line, sizeof line) != CQ_OK)
            printf("  %s:%d  (cannot be queried: %s)\n", d->name, i, cq_last_error());
        else
            printf("  %s:%d  %s\n", d->name, i, line);
    }
    if (!strcmp(d->name, "cuda")) {
        char lt[1024] = "";
        bool lt_ok = cq_cuda_load_cublaslt(lt, sizeof lt);
        printf("  cuBLASLt: %s%s\n", lt_ok ? "" : "not loadable: ", lt);
    }
}

int cq_cmd_gpu(int argc, char **argv) {
    char names[128];
    cq_backend_names(names, sizeof names);
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            printf("usage: cortiq gpu\n\n"
                   "List the GPUs this build can use, with their free memory, and the backend\n"
                   "`cortiq imagine` and `cortiq run` pick by default (auto: a CUDA GPU of compute\n"
                   "capability 8.0 or newer where this build and the machine have one, else the CPU;\n"
                   "Vulkan only when named). CORTIQ_BACKEND or --backend choose another (%s, auto);\n"
                   "--backend cpu forces the CPU.\n",
                   names);
            return 0;
        }
        return cq_cli_usage_error("gpu", "unexpected argument '%s'", argv[i]);
    }
    for (size_t i = 0; i < cq_backend_registry_count(); i++) {
        const cq_backend_desc *d = cq_backend_registry_get(i);
        if (d->has_devices) list_devices(d);
    }
    /* what auto picks, whatever CORTIQ_BACKEND says (CORTIQ_CUDA_DEVICE still names the device it looks at) */
    char pick[64], why[256];
    cq_status s = cq_env_backend_resolve("auto", pick, sizeof pick, why, sizeof why);
    if (s != CQ_OK) return cq_cli_fail("gpu", s, "choosing the default backend");
    printf("default backend: auto picks %s — %s\n", pick, why);
    const char *from;
    const char *name = cq_env_backend_or(NULL, "auto", &from);
    cq_backend *be = NULL;
    s = cq_env_backend_create(name, 0, &be);
    if (s != CQ_OK) return cq_cli_fail("gpu", s, "creating the default backend");
    const char *note = strcmp(from, "CORTIQ_BACKEND") ? "" : " (from CORTIQ_BACKEND)";
    if (cq_backend_is_host(be)) {
        const cq_cpu_features *f = cq_cpu();
        printf("backend used: %s — %s, %d logical cores%s\n", cq_backend_name(be), f->model, f->logical_cores, note);
    } else if (cq_backend_mem_budget(be)) {
        char b[32];
        printf("backend used: %s%s; device-memory budget %s\n", cq_backend_name(be), note,
               cq_fmt_bytes(cq_backend_mem_budget(be), b, sizeof b));
    } else {
        printf("backend used: %s%s\n", cq_backend_name(be), note);
    }
    cq_backend_free(be);
    return 0;
}
