/*
 * main.c — the `cortiq` command: dispatches to one file per subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/env.h"
#include "ops/ops.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command k_commands[] = {
    {"info", cq_cmd_info, "show what a .cmf file holds (arch, sections, tensors, codecs)"},
    {"verify", cq_cmd_verify, "check every integrity hash of a .cmf file"},
    {"convert", cq_cmd_convert, "convert safetensors / diffusers / Hugging Face folders to .cmf"},
    {"bench", cq_cmd_bench, "benchmarks (gemm, attention, qi21, ...): runs cortiq-bench, a separate program"},
    {"forward", cq_cmd_forward, "run one denoiser forward on tensors from a safetensors file"},
    {"run", cq_cmd_run, "chat with / generate from a language model"},
    {"imagine", cq_cmd_imagine, "text to image"},
    {"video", cq_cmd_video, "text to video with sound (LTX-2.5 packs): an MP4"},
    {"gpu", cq_cmd_gpu, "list GPUs and the backend that would be used"},
};

static void usage(FILE *f) {
    fprintf(f,
            "cortiq %s — inference runtime for CMF model files\n\n"
            "usage: cortiq <command> [options]\n\ncommands:\n",
            cq_version());
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_commands); i++)
        fprintf(f, "  %-9s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f,
            "\n`cortiq <command> --help` describes each command.\n"
            "Environment: CORTIQ_THREADS (worker threads), CORTIQ_CPU (generic|avx2|avx512|amx|neon),\n"
            "CORTIQ_BACKEND (cpu|cuda), CORTIQ_LOG (debug|info|warn|error|none).\n");
}

int main(int argc, char **argv) {
    /* the environment is the CLI's to read (env.c); the library takes settings through calls and options */
    cq_env_apply();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (cq_cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
        if (argc >= 3 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < CQ_ARRAY_LEN(k_commands); i++)
                if (strcmp(k_commands[i].name, argv[2]) == 0) {
                    char *hargv[] = {argv[2], (char *)"--help", NULL};
                    return k_commands[i].fn(2, hargv);
                }
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("cortiq %s\n", cq_version());
        return 0;
    }
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_commands); i++)
        if (strcmp(k_commands[i].name, cmd) == 0) return k_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "cortiq: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
