/*
 * main.c — the `cortiq` command: dispatches to one file per subcommand.
 */
#include <stdarg.h>
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
    {"bench", cq_cmd_bench, "benchmarks (gemm, attention, qi21, tokenizer)"},
    {"forward", cq_cmd_forward, "run one denoiser forward on tensors from a safetensors file"},
    {"run", cq_cmd_run, "chat with / generate from a language model"},
    {"imagine", cq_cmd_imagine, "text to image"},
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

int cq_cli_fail(const char *cmd, cq_status s, const char *what) {
    if (s == CQ_ERR_INTERRUPTED && cq_cli_signal()) return cq_cli_interrupted(cmd, cq_last_error());
    const char *msg = cq_last_error();
    if (what && *what && *msg && strstr(msg, what)) what = NULL; /* the message names it already (a path, say) */
    fprintf(stderr, "cortiq %s: error: %s%s%s (%s)\n", cmd, what ? what : "", (what && *what && *msg) ? ": " : "", msg,
            cq_status_str(s));
    return 1;
}

int cq_cli_usage_error(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "cortiq %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `cortiq %s --help`)\n", cmd);
    return 2;
}

bool cq_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

bool cq_cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    if (!val) {
        cq_cli_usage_error(cmd, "%s needs a value", opt);
        return false;
    }
    char *end;
    long v = strtol(val, &end, 10);
    if (*val == '\0' || *end != '\0' || v < lo || v > hi) {
        cq_cli_usage_error(cmd, "%s wants an integer in [%ld, %ld], got '%s'", opt, lo, hi, val);
        return false;
    }
    *out = v;
    return true;
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
