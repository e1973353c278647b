/* cmd_bench.c — `cortiq bench <name>`: dispatches to one file per benchmark. */
#include <stdio.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/cli.h"

typedef struct bench_entry {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} bench_entry;

static const bench_entry k_benches[] = {
    {"gemm", cq_bench_gemm, "matmul GFLOP/s per weight codec and ISA, against OpenBLAS and oneDNN"},
    {"attention", cq_bench_attention, "flash attention GFLOP/s against our matmul throughput"},
};

static void help(FILE *f) {
    fprintf(f, "usage: cortiq bench <name> [options]   (`cortiq bench <name> --help` for its options)\n\n");
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_benches); i++) fprintf(f, "  %-10s %s\n", k_benches[i].name, k_benches[i].summary);
}

int cq_cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        help(stderr);
        return 2;
    }
    if (cq_cli_is_help(argv[1])) {
        help(stdout);
        return 0;
    }
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_benches); i++)
        if (strcmp(argv[1], k_benches[i].name) == 0) return k_benches[i].fn(argc - 1, argv + 1);
    return cq_cli_usage_error("bench", "unknown benchmark '%s'", argv[1]);
}
