/*
 * cmd_bench.c — `cortiq bench <what>`: the front door of the benchmarks.
 * They are a separate program, cortiq-bench (bench_main.c), so that the
 * shipped cortiq links neither the benchmark code nor its peers (OpenBLAS,
 * oneDNN); this command runs the cortiq-bench found beside the cortiq binary
 * with the same arguments, or says how to get it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define BENCH_PROGRAM "cortiq-bench"

/* "<directory of this executable>/cortiq-bench" into buf; false when the directory is unknown. */
static bool bench_path(char *buf, size_t len) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = 0;
    int w = snprintf(buf, len, "%s/" BENCH_PROGRAM, self);
    return w > 0 && (size_t)w < len;
}

int cq_cmd_bench(int argc, char **argv) {
    char path[PATH_MAX + 32];
    const bool known = bench_path(path, sizeof path);
    if (known && access(path, X_OK) == 0) {
        char *args[argc + 1];
        args[0] = (char *)BENCH_PROGRAM;
        for (int i = 1; i < argc; i++) args[i] = argv[i];
        args[argc] = NULL;
        fflush(NULL);
        execv(path, args);
        fprintf(stderr, "cortiq bench: error: cannot run %s: %s\n", path, strerror(errno));
        return 1;
    }
    FILE *f = argc >= 2 && cq_cli_is_help(argv[1]) ? stdout : stderr;
    fprintf(f,
            "cortiq bench: the benchmarks are a separate program, " BENCH_PROGRAM ", which is not installed beside\n"
            "this cortiq%s%s%s. A build from source makes it with the rest (`make`, or\n"
            "`cmake --build build --target " BENCH_PROGRAM "`) in the build directory, next to cortiq; run\n"
            "`cortiq bench` from there, or " BENCH_PROGRAM " directly with the same arguments.\n",
            known ? " (" : "", known ? path : "", known ? ")" : "");
    return f == stdout ? 0 : 1;
}
