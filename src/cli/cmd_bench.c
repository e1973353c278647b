/* cmd_bench.c — `cortiq bench` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq bench: not available in this build yet\n");
    return 1;
}
