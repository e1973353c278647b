/* cmd_gpu.c — `cortiq gpu` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_gpu(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq gpu: not available in this build yet\n");
    return 1;
}
