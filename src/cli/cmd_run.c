/* cmd_run.c — `cortiq run` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq run: not available in this build yet\n");
    return 1;
}
