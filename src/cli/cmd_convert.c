/* cmd_convert.c — `cortiq convert` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_convert(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq convert: not available in this build yet\n");
    return 1;
}
