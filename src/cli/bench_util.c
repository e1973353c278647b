/*
 * bench_util.c — common machinery of `cortiq bench`: options, the machine
 * line, timing (one warm-up, then the median of several runs), data.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/bench.h"
#include "cli/bench_pack.h"
#include "cli/cli.h"

const char *cq_bench_common_help(void) {
    return "  --quick          the small size set (a few seconds on a small machine)\n"
           "  --threads N      worker threads for cortiq and the peers (default: all cores)\n"
           "  --runs N         timed runs per measurement, median reported (default 5, quick 3)\n"
           "  --isa LIST       generic,avx2,avx512,amx,neon or all (default: the best available)\n"
           "  --cpu-clock      time with the process CPU clock instead of the wall clock\n"
           "                   (for --threads 1 on a machine other jobs share)\n";
}

int cq_bench_common_opt(const char *cmd, int argc, char **argv, int *i, cq_bench_opts *o) {
    const char *a = argv[*i];
    long v;
    if (strcmp(a, "--quick") == 0) {
        o->quick = true;
        return 1;
    }
    if (strcmp(a, "--cpu-clock") == 0) {
        o->cpu_clock = true;
        return 1;
    }
    if (strcmp(a, "--threads") == 0 || strcmp(a, "--runs") == 0) {
        const char *val = *i + 1 < argc ? argv[++*i] : NULL;
        if (!cq_cli_parse_int(cmd, a, val, 1, 4096, &v)) return -1;
        if (a[2] == 't') o->threads = (int)v;
        else o->runs = (int)v;
        return 1;
    }
    if (strcmp(a, "--isa") == 0) {
        const char *val = *i + 1 < argc ? argv[++*i] : NULL;
        if (!val) return cq_cli_usage_error(cmd, "--isa needs a value"), -1;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", val);
        o->n_isa = 0;
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcasecmp(tok, "all")) {
                o->n_isa = 0;
                for (int k = CQ_CPU_GENERIC; k < CQ_CPU_ISA_COUNT; k++)
                    if (cq_cpu_isa_available((cq_cpu_isa)k)) o->isas[o->n_isa++] = (cq_cpu_isa)k;
                break;
            }
            int k = CQ_CPU_GENERIC;
            for (; k < CQ_CPU_ISA_COUNT; k++)
                if (!strcasecmp(tok, cq_cpu_isa_name((cq_cpu_isa)k))) break;
            if (k == CQ_CPU_ISA_COUNT) return cq_cli_usage_error(cmd, "unknown ISA '%s'", tok), -1;
            if (!cq_cpu_isa_available((cq_cpu_isa)k))
                return cq_cli_usage_error(cmd, "ISA '%s' is not available on this machine or build", tok), -1;
            if (o->n_isa < CQ_CPU_ISA_COUNT) o->isas[o->n_isa++] = (cq_cpu_isa)k;
        }
        return 1;
    }
    return 0;
}

void cq_bench_finish_opts(cq_bench_opts *o, int default_runs) {
    if (o->threads <= 0) o->threads = cq_default_threads();
    if (o->runs <= 0) o->runs = o->quick ? CQ_MAX(1, default_runs - 2) : default_runs;
    if (o->n_isa == 0) o->isas[o->n_isa++] = CQ_CPU_AUTO;
}

void cq_bench_print_machine(const cq_bench_opts *o, const char *what) {
    const cq_cpu_features *f = cq_cpu();
    char isa[160] = "";
#define ADD(cond, s)                                             \
    do {                                                         \
        if (cond) strncat(isa, s, sizeof isa - strlen(isa) - 1); \
    } while (0)
    ADD(f->avx2, " avx2");
    ADD(f->avx512f, " avx512");
    ADD(f->avx512bf16, " avx512_bf16");
    ADD(f->avx512vnni, " vnni");
    ADD(f->amx_tile, " amx");
    ADD(f->neon, " neon");
    ADD(f->neon_bf16, " neon_bf16");
#undef ADD
    printf("cortiq bench %s\n", what);
    printf("machine: %s, %d logical cores, ISA:%s%s\n", f->model[0] ? f->model : "unknown CPU", f->logical_cores,
           isa[0] ? isa : " baseline", f->amx_tile || !f->avx512f ? "" : " (no amx)");
    printf("threads: %d; each number is the median of %d timed runs after 1 warm-up (%s clock)\n", o->threads,
           o->runs, o->cpu_clock ? "process CPU" : "wall");
}

static double clock_s(bool cpu) {
    struct timespec t;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cq_bench_time(const cq_bench_opts *o, cq_bench_fn fn, void *arg, double *best) {
    double t[64];
    int n = CQ_MIN(o->runs, 64);
    if (fn(arg) != 0) return -1.0;
    for (int r = 0; r < n; r++) {
        double t0 = clock_s(o->cpu_clock);
        if (fn(arg) != 0) return -1.0;
        t[r] = clock_s(o->cpu_clock) - t0;
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    if (best) *best = t[0];
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

void cq_bench_fill(float *v, size_t n, uint64_t seed, float scale) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i += 2) {
        /* xorshift64* pairs through Box-Muller */
        double u[2];
        for (int k = 0; k < 2; k++) {
            s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
            u[k] = ((double)((s * 0x2545f4914f6cdd1dull) >> 11) + 0.5) / 9007199254740992.0;
        }
        double r = sqrt(-2.0 * log(u[0])), th = 6.283185307179586 * u[1];
        v[i] = (float)(r * cos(th)) * scale;
        if (i + 1 < n) v[i + 1] = (float)(r * sin(th)) * scale;
    }
}

bool cq_bench_parse_list(const char *s, long *out, int max, int *n) {
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || *n >= max) return false;
        out[(*n)++] = v;
        if (*end == ',') end++;
        else if (*end) return false;
        s = end;
    }
    return *n > 0;
}

int cq_bench_model_args(const char *cmd, int argc, char **argv, cq_bench_model_opts *m, void (*help)(void),
                        cq_bench_arg_fn opt, void *ctx, bool *done) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = cq_bench_model_opt(cmd, argc, argv, &i, m);
        if (r == 0 && cq_cli_is_help(a)) {
            help();
            *done = true;
            return 0;
        }
        if (r == 0) r = opt(cmd, a, i + 1 < argc ? argv[i + 1] : NULL, &i, ctx);
        if (r == 0) return cq_cli_usage_error(cmd, "unknown argument '%s'", a);
        if (r != 1) return r;
    }
    return 0;
}

int cq_bench_quant_arg(const char *cmd, const char *v, bool with_bf16, int *i, cq_dtype *out) {
    int d = v ? cq_dtype_from_name(v) : -1;
    if (d != CQ_DTYPE_Q8_2F && d != CQ_DTYPE_Q4TP && !(with_bf16 && d == CQ_DTYPE_BF16))
        return cq_cli_usage_error(cmd, with_bf16 ? "--quant must be q8_2f, q4tp or bf16" : "--quant must be q8_2f or q4tp");
    *out = (cq_dtype)d;
    (*i)++;
    return 1;
}
