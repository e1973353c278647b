/* cmd_imagine.c — `cortiq imagine` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_imagine(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq imagine: not available in this build yet\n");
    return 1;
}
