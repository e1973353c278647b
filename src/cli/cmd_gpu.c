/*
 * cmd_gpu.c — `cortiq gpu`: the GPU devices this build can run on (name,
 * memory, compute capability) and the backend a command would pick. The CPU
 * stays the default until the CUDA backend runs every op the pipelines need;
 * this command says how to choose CUDA where it is usable. It is the one
 * command that loads the CUDA driver and cuBLASLt without being asked to run
 * on the GPU (elsewhere they load when a CUDA backend is created), so it also
 * says whether cuBLASLt loads.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "ops/ops.h"

static void list_cuda(void) {
    if (!cq_cuda_built()) {
        printf("CUDA backend: not built (no CUDA toolkit when this build was configured; -DCORTIQ_CUDA=ON requires it)\n");
        return;
    }
    char why[256] = "";
    int n = cq_cuda_device_count(why, sizeof why);
    printf("CUDA backend: built; %d device%s visible%s%s\n", n, n == 1 ? "" : "s", n ? "" : ": ", n ? "" : why);
    for (int i = 0; i < n; i++) {
        cq_gpu_info g;
        if (cq_cuda_device_info(i, &g) != CQ_OK) {
            printf("  cuda:%d  (cannot be queried: %s)\n", i, cq_last_error());
            continue;
        }
        char tot[32], fr[32];
        printf("  cuda:%d  %s, %s (%s free), compute capability %d.%d, %d multiprocessors%s\n", i, g.name,
               cq_fmt_bytes(g.mem_total, tot, sizeof tot), cq_fmt_bytes(g.mem_free, fr, sizeof fr), g.cc_major,
               g.cc_minor, g.sm_count, g.cc_major < 8 ? " — too old for this backend (needs 8.0)" : "");
    }
    char lt[1024] = "";
    bool lt_ok = cq_cuda_load_cublaslt(lt, sizeof lt);
    printf("  cuBLASLt: %s%s\n", lt_ok ? "" : "not loadable: ", lt);
}

int cq_cmd_gpu(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            printf("usage: cortiq gpu\n\n"
                   "List the GPUs this build can use and the backend commands would pick\n"
                   "(CORTIQ_BACKEND or --backend choose another: cpu, ref, cuda, cuda:N).\n");
            return 0;
        }
        return cq_cli_usage_error("gpu", "unexpected argument '%s'", argv[i]);
    }
    list_cuda();
    printf("Vulkan backend: not built yet\n");
    const char *dflt = cq_backend_default_name();
    cq_backend *be = NULL;
    cq_status s = cq_backend_create(NULL, 0, &be);
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
