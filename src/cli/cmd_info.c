/* cmd_info.c — `cortiq info` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq info: not available in this build yet\n");
    return 1;
}
