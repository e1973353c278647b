/* cmd_verify.c — `cortiq verify` (not built yet). */
#include <stdio.h>

#include "cli/cli.h"

int cq_cmd_verify(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cortiq verify: not available in this build yet\n");
    return 1;
}
