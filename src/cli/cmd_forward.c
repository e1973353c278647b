/* cmd_forward.c — `cortiq forward` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_forward(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq forward: not available in this build yet\n");
    return 1;
}
