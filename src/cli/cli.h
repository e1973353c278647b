/*
 * cli.h — shared pieces of the `cortiq` command: one file per subcommand,
 * each exporting `int cq_cmd_<name>(int argc, char **argv)` where argv[0] is
 * the subcommand name. Exit codes: 0 success, 1 the operation failed (bad
 * file, hash mismatch...), 2 usage error.
 */
#ifndef CQ_CLI_H
#define CQ_CLI_H

#include <stdbool.h>

#include "base/base.h"

int cq_cmd_info(int argc, char **argv);
int cq_cmd_verify(int argc, char **argv);
int cq_cmd_convert(int argc, char **argv);
int cq_cmd_bench(int argc, char **argv);
int cq_cmd_forward(int argc, char **argv);
int cq_cmd_run(int argc, char **argv);
int cq_cmd_imagine(int argc, char **argv);
int cq_cmd_gpu(int argc, char **argv);
int cq_cmd_video(int argc, char **argv);

/* `cortiq-bench <what>` benchmarks (`cortiq bench <what>` runs them), one file each (bench_<what>.c);
 * argv[0] = "<what>". They build into the cortiq-bench program only. */
int cq_bench_gemm(int argc, char **argv);
int cq_bench_attention(int argc, char **argv);
int cq_bench_qi21(int argc, char **argv);
int cq_bench_zimage(int argc, char **argv);
int cq_bench_qimage(int argc, char **argv);
int cq_bench_vision(int argc, char **argv);
int cq_bench_imagine(int argc, char **argv);
int cq_bench_vae(int argc, char **argv);
int cq_bench_ltx2(int argc, char **argv);
int cq_bench_ltx2_vae(int argc, char **argv);
int cq_bench_tokenizer(int argc, char **argv);
int cq_bench_hash(int argc, char **argv);

/* Print "cortiq <cmd>: error: <what>: <cq_last_error()>" and return 1. */
int cq_cli_fail(const char *cmd, cq_status s, const char *what);
/* Print "cortiq <cmd>: <fmt>" + hint to use --help; return 2. */
int cq_cli_usage_error(const char *cmd, const char *fmt, ...) CQ_PRINTF(2, 3);
/* True when argv[i] is -h or --help. */
bool cq_cli_is_help(const char *arg);
/* Parse a positive integer option value; false (and an error printed) on junk. */
bool cq_cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);

/* The backend a command runs on, chosen once its options are parsed. */
typedef struct cq_cli_backend {
    char name[64];       /* concrete: "cpu", "cuda:0", "vulkan" ("auto" resolved) */
    char why[320];       /* "auto: NVIDIA H200, 139 GiB free", "--backend", "CORTIQ_BACKEND" */
    uint64_t mem_budget; /* --gpu-memory or CORTIQ_GPU_MEMORY in bytes; 0: the backend's default */
} cq_cli_backend;
/* Choose it: `given` (--backend; may be NULL), else CORTIQ_BACKEND, else
 * `dflt` ("auto" for imagine and run); the budget from `gpu_memory`
 * (--gpu-memory; may be NULL), else CORTIQ_GPU_MEMORY. 0, or 2 after a usage
 * error naming the bad name or size. */
int cq_cli_backend_pick(const char *cmd, const char *given, const char *dflt, const char *gpu_memory,
                        cq_cli_backend *out);
/* "backend: cuda:0 (auto: NVIDIA H200, 139 GiB free)", on standard error. */
void cq_cli_backend_say(const cq_cli_backend *b);

/* The text of `path` ("-": standard input), one final line ending removed;
 * NULL after printing why (unreadable, over 4 MiB, a NUL byte). cq_free it. */
char *cq_cli_read_text(const char *cmd, const char *path);

/* What a pack holds (pack_kind.c). */
typedef enum cq_cli_pack_kind {
    CQ_PACK_UNKNOWN = 0,
    CQ_PACK_IMAGE_PIPELINE, /* dit.*, te.*, vae.* with their configs */
    CQ_PACK_LANGUAGE_MODEL, /* config_json + the LLM's tensors */
    CQ_PACK_DENOISER,       /* dit.* alone */
    CQ_PACK_AUTOENCODER,    /* vae.* alone */
} cq_cli_pack_kind;
cq_cli_pack_kind cq_cli_pack_classify(const cq_cmf *c);
/* "a language model (arch qwen3), which `cortiq run` chats with" */
const char *cq_cli_pack_describe(const cq_cmf *c, char *buf, size_t len);

/* Signals (interrupt.c): route SIGINT/SIGTERM/SIGHUP to the library's
 * cancellation flag (a second one removes live temporaries and exits). */
void cq_cli_catch_signals(void);
int cq_cli_signal(void);                /* the signal received, 0 for none */
const char *cq_cli_signal_name(int sig);
/* Print "cortiq <cmd>: interrupted by SIGINT; <what>" and return 128 + the signal. */
int cq_cli_interrupted(const char *cmd, const char *what);

#endif
