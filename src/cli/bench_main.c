/*
 * bench_main.c — the `cortiq-bench` program: the benchmarks and their peers
 * (OpenBLAS, oneDNN when found at build time), apart from the shipped
 * `cortiq`, whose `cortiq bench` runs this program from beside it. Each
 * benchmark lives in its own file (bench_<what>.c) exporting
 * `int cq_bench_<what>(int argc, char **argv)` (argv[0] = "<what>"), declared
 * in cli.h; to add one, add a row to k_benches below.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/env.h"

typedef struct bench {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} bench;

static const bench k_benches[] = {
    {"gemm", cq_bench_gemm, "matmul GFLOP/s per weight codec and ISA, against OpenBLAS and oneDNN"},
    {"attention", cq_bench_attention, "flash attention GFLOP/s against our matmul throughput"},
    {"qi21", cq_bench_qi21, "the Qwen-Image-2.1 denoiser (real 7B shape, random weights): prefill and step"},
    {"zimage", cq_bench_zimage, "the Z-Image denoiser (real 6B shape, random weights): caption prepare and step"},
    {"qwen_image", cq_bench_qimage,
     "the Qwen-Image denoiser (real 20B shape, random weights): text prepare, step, step with true CFG"},
    {"vision", cq_bench_vision, "the Qwen2.5-VL vision tower (real 7B-VL shape, random weights) on one picture"},
    {"imagine", cq_bench_imagine,
     "Qwen-Image-2.1, Z-Image or Qwen-Image text to image end to end (real configuration, random weights)"},
    {"ltx25", cq_bench_ltx2,
     "the LTX-2.5 audio-video denoiser (real 22B shape, random weights): prepare and step"},
    {"ltx25-vae", cq_bench_ltx2_vae,
     "LTX-2.5's video VAE decode, audio VAE decode and vocoder with BWE (released configuration, random weights)"},
    {"vae", cq_bench_vae, "the Qwen-Image-2.1 VAE (real configuration, random weights): decode and encode"},
    {"tokenizer", cq_bench_tokenizer, "tokenizer encoding speed (MB/s, tokens/s)"},
    {"hash", cq_bench_hash, "hash64 GB/s, 1 thread and a pool: the cost of checking a pack's tensors on load"},
};

static void help(FILE *f) {
    fprintf(f, "usage: cortiq bench <what> [options]   (or cortiq-bench <what> [options])\n\nbenchmarks:\n");
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_benches); i++) fprintf(f, "  %-10s %s\n", k_benches[i].name, k_benches[i].summary);
    fprintf(f, "\n`cortiq bench <what> --help` lists each one's options.\n");
}

int main(int argc, char **argv) {
    cq_env_apply();
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
