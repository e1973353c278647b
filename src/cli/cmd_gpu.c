/*
 * cmd_gpu.c — `cortiq gpu`: the devices this build can run on and the
 * backend a command would pick. Until a GPU backend is built in, that is the
 * CPU backend, and this command says so rather than pretending.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "ops/ops.h"

int cq_cmd_gpu(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            printf("usage: cortiq gpu\n\n"
                   "List the GPUs this build can use and the backend commands would pick\n"
                   "(CORTIQ_BACKEND or --backend choose another).\n");
            return 0;
        }
        return cq_cli_usage_error("gpu", "unexpected argument '%s'", argv[i]);
    }
    printf("GPU backends in this build: none (CUDA and Vulkan backends are not built yet)\n");
    cq_backend *be = NULL;
    cq_status s = cq_backend_create(NULL, 0, &be);
    if (s != CQ_OK) return cq_cli_fail("gpu", s, "creating the default backend");
    const cq_cpu_features *f = cq_cpu();
    printf("backend used: %s — %s, %d logical cores\n", cq_backend_name(be), f->model, f->logical_cores);
    cq_backend_free(be);
    return 0;
}
