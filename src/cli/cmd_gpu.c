/*
 * cmd_gpu.c — `cortiq gpu`: the GPU devices this build can run on (name,
 * memory, compute capability) and the backend a command would pick. The CPU
 * stays the default until the CUDA backend runs every op the pipelines need;
 * this command says how to choose CUDA where it is usable. It is the one
 * command that loads the CUDA driver and cuBLASLt, and the Vulkan loader,
 * without being asked to run on the GPU (elsewhere they load when a backend
 * is created), so it also says whether cuBLASLt loads.
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
                   "List the GPUs this build can use and the backend commands would pick\n"
                   "(CORTIQ_BACKEND or --backend choose another: %s).\n",
                   names);
            return 0;
        }
        return cq_cli_usage_error("gpu", "unexpected argument '%s'", argv[i]);
    }
    for (size_t i = 0; i < cq_backend_registry_count(); i++) {
        const cq_backend_desc *d = cq_backend_registry_get(i);
        if (d->has_devices) list_devices(d);
    }
    const char *dflt = cq_env_backend_name();
    cq_backend *be = NULL;
    cq_status s = cq_env_backend_create(NULL, 0, &be);
    if (s != CQ_OK) return cq_cli_fail("gpu", s, "creating the default backend");
    if (!strncmp(cq_backend_name(be), "cpu", 3)) {
        const cq_cpu_features *f = cq_cpu();
        printf("backend used: %s — %s, %d logical cores%s\n", cq_backend_name(be), f->model, f->logical_cores,
               strcmp(dflt, "cpu") ? " (from CORTIQ_BACKEND)" : "");
        if (cq_cuda_built() && cq_cuda_device_count(NULL, 0) > 0)
            printf("the GPU runs the whole Qwen-Image-2.1 pipeline (text tower, denoiser, VAE): choose it "
                   "with --backend cuda or CORTIQ_BACKEND=cuda\n");
    } else {
        printf("backend used: %s (from CORTIQ_BACKEND)\n", cq_backend_name(be));
    }
    cq_backend_free(be);
    return 0;
}
