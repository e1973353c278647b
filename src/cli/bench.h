/*
 * bench.h — pieces shared by the kernel benchmarks (`cortiq bench gemm`,
 * `cortiq bench attention`): option parsing, timing with warm-up and
 * medians, the machine description line, random data.
 */
#ifndef CQ_CLI_BENCH_H
#define CQ_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

/* Options every benchmark takes. */
typedef struct cq_bench_opts {
    bool quick;       /* the small size set */
    int threads;      /* <= 0: all cores (CORTIQ_THREADS) */
    int runs;         /* timed runs per measurement (median reported) */
    bool cpu_clock;   /* time with the process CPU clock (1 thread on a busy machine) */
    cq_cpu_isa isas[CQ_CPU_ISA_COUNT];
    int n_isa;        /* 0: the best one */
} cq_bench_opts;

/* Parse a common option at argv[*i] (advancing *i past a value). Returns 1 when
 * consumed, 0 when not a common option, -1 (message printed) on a bad value. */
int cq_bench_common_opt(const char *cmd, int argc, char **argv, int *i, cq_bench_opts *o);
/* Help text for the common options. */
const char *cq_bench_common_help(void);
/* Fill defaults after parsing (threads, runs, ISA list). */
void cq_bench_finish_opts(cq_bench_opts *o, int default_runs);
/* "AMD EPYC 9xx (2 cores, avx512 avx512_bf16 vnni, no amx)" */
void cq_bench_print_machine(const cq_bench_opts *o, const char *what);

/* Time fn(arg) once untimed, then `runs` times; returns the median seconds
 * (and the fastest in *best if not NULL). A failing call returns -1. */
typedef int (*cq_bench_fn)(void *arg);
double cq_bench_time(const cq_bench_opts *o, cq_bench_fn fn, void *arg, double *best);

/* Deterministic normal(0, scale) values. */
void cq_bench_fill(float *v, size_t n, uint64_t seed, float scale);
/* Parse "a,b,c" into at most max longs; false on junk. */
bool cq_bench_parse_list(const char *s, long *out, int max, int *n);

#endif
