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
#include "cli/env.h"
#include "format/cmf.h"

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

int cq_bench_clip_arg(const char *cmd, const char *a, const char *v, int max_frames, int *i, int *frames, double *fps) {
    if (strcmp(a, "--frames") == 0) {
        long n;
        if (!cq_cli_parse_int(cmd, a, v, 1, max_frames, &n)) return 2;
        if ((n - 1) % 8) return cq_cli_usage_error(cmd, "--frames must be 8k + 1 (1, 9, 17, ... 121, ...), got %ld", n);
        *frames = (int)n;
    } else if (strcmp(a, "--fps") == 0) {
        char *end = NULL;
        double f = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !(f >= 1 && f <= 240))
            return cq_cli_usage_error(cmd, "--fps wants a number in [1, 240], got '%s'", v ? v : "");
        *fps = f;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* ---- the run the component benchmarks share --------------------------------------------------- */
static const char *quant_type(cq_dtype q) {
    return q == CQ_DTYPE_Q8_2F ? "Q8_2F" : q == CQ_DTYPE_BF16 ? "BF16" : q == CQ_DTYPE_F16 ? "F16" : "Q4_BLOCK";
}

/* The pack header: the arch fields the format requires, every layer FullAttention, the codec, the tool. */
static cq_status component_header(const cq_bench_component *c, char **out) {
    const cq_bench_arch *a = &c->arch;
    const size_t len = 1024 + 20 * (size_t)a->layers;
    char *h = cq_malloc(len);
    if (!h) return CQ_ERR_NOMEM;
    int k = snprintf(h, len,
                     "{\"format\":\"cmf\",\"version\":2,\"arch\":{\"arch_name\":\"%s\",\"hidden_size\":%d,"
                     "\"intermediate_size\":%d,\"num_layers\":%d,\"num_attention_heads\":%d,\"num_kv_heads\":%d,"
                     "\"head_dim\":%d,\"vocab_size\":0,\"max_position_embeddings\":0,\"rms_norm_eps\":%s,"
                     "\"layer_types\":[",
                     a->name, a->hidden, a->intermediate, a->layers, a->heads, a->kv_heads, a->head_dim, a->eps);
    for (int l = 0; k > 0 && (size_t)k < len && l < a->layers; l++)
        k += snprintf(h + k, len - (size_t)k, "%s\"FullAttention\"", l ? "," : "");
    if (k > 0 && (size_t)k < len)
        k += snprintf(h + k, len - (size_t)k, "]},\"quant_type\":\"%s\",\"provenance\":{\"tool\":\"%s\"}}",
                      quant_type(c->quant), c->tool);
    if (k < 0 || (size_t)k >= len) {
        cq_free(h);
        return cq_fail(CQ_ERR_INTERNAL, "bench: the pack header does not fit");
    }
    *out = h;
    return CQ_OK;
}

void cq_bench_model_close(cq_bench_model *bm) {
    cq_backend_free(bm->be);
    cq_cmf_close(bm->cmf);
    bm->be = NULL;
    bm->cmf = NULL;
}

int cq_bench_model_open(cq_bench_model *bm, const char *cmd, const cq_bench_model_opts *m,
                        const cq_bench_component *c, cq_status listed) {
    memset(bm, 0, sizeof *bm);
    if (listed != CQ_OK) return cq_cli_fail(cmd, listed, "listing the weights");
    bm->cmd = cmd;
    bm->threads = m->threads > 0 ? m->threads : cq_default_threads();
    cq_status s = cq_env_backend_create(m->backend, m->threads, &bm->be);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, "creating the backend");
    bm->gpu = !cq_backend_is_host(bm->be);
    char *hdr = NULL;
    double t0 = cq_now();
    s = component_header(c, &hdr);
    cq_bench_blob *blobs = s == CQ_OK ? cq_mallocn(1 + c->n_more, sizeof *blobs) : NULL;
    if (s == CQ_OK && !blobs) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        blobs[0] = (cq_bench_blob){c->blob_name, c->blob, strlen(c->blob)};
        for (size_t i = 0; i < c->n_more; i++) blobs[1 + i] = c->more[i];
        cq_bench_file f = {.tag = c->tag, .header = hdr, .blobs = blobs, .n_blobs = 1 + c->n_more,
                           .weights = c->weights, .no_verify = m->no_verify, .threads = m->threads, .cold = m->cold};
        uint64_t file_bytes;
        s = cq_bench_pack_map(&f, &bm->cmf, &file_bytes);
    }
    cq_free(blobs);
    cq_free(hdr);
    if (s != CQ_OK) {
        int rc = cq_cli_fail(cmd, s, "writing the temporary model");
        cq_bench_model_close(bm);
        return rc;
    }
    char b[32];
    printf("weights %s written and verified in %.1f s (temporary file, already removed)\n",
           cq_fmt_bytes(cq_bench_pack_bytes(c->weights), b, sizeof b), cq_now() - t0);
    fflush(stdout);
    return 0;
}

void cq_bench_model_loaded(const cq_bench_model *bm, double load_s) {
    printf("backend %s", cq_backend_name(bm->be));
    if (!bm->gpu) printf(", %d threads", bm->threads);
    printf("; model loaded in %.2f s\n", load_s);
    fflush(stdout);
}

cq_status cq_bench_repeat(cq_bench_call_fn fn, void *ctx, int warm, int n, cq_backend *be,
                          cq_backend_stats *after_warm, double *wall, double *cpu) {
    double tw[100], tc[100];
    if (n < 1 || n > 100 || warm < 0) return cq_fail(CQ_ERR_INVALID_ARG, "bench: %d timed runs (1 .. 100)", n);
    for (int i = 0; i < warm + n; i++) {
        if (i == warm && be && after_warm) CQ_TRY(cq_backend_get_stats(be, after_warm, true));
        double t0 = cq_now(), c0 = cq_bench_cpu_seconds();
        CQ_TRY(fn(ctx, i));
        if (i >= warm) tw[i - warm] = cq_now() - t0, tc[i - warm] = cq_bench_cpu_seconds() - c0;
    }
    *wall = cq_bench_median(tw, n);
    *cpu = cq_bench_median(tc, n);
    return CQ_OK;
}

void cq_bench_table_head(const cq_bench_model *bm, int width) {
    if (bm->gpu) printf("%-*s %9s %10s %9s\n", width, "", "ms", "GFLOP", "TFLOP/s");
    else printf("%-*s %9s %10s %9s %9s %10s\n", width, "", "wall s", "GFLOP", "GFLOP/s", "CPU s", "CPU share");
}

/* CPU time over wall time x threads, in percent */
static double cpu_share(const cq_bench_model *bm, double wall, double cpu) {
    return wall > 0 ? 100.0 * cpu / (wall * bm->threads) : 0.0;
}

void cq_bench_table_row(const cq_bench_model *bm, int width, const char *label, double wall, double cpu,
                        double flops) {
    if (flops <= 0) { /* work that is not counted in FLOPs (a picture's resize) */
        if (bm->gpu) printf("%-*s %9.2f %10s %9s\n", width, label, 1e3 * wall, "-", "-");
        else printf("%-*s %9.3f %10s %9s %9.2f %9.0f%%\n", width, label, wall, "-", "-", cpu, cpu_share(bm, wall, cpu));
        return;
    }
    if (bm->gpu)
        printf("%-*s %9.2f %10.1f %9.1f\n", width, label, 1e3 * wall, flops * 1e-9, flops * 1e-12 / wall);
    else
        printf("%-*s %9.3f %10.1f %9.1f %9.2f %9.0f%%\n", width, label, wall, flops * 1e-9, flops * 1e-9 / wall, cpu,
               cpu_share(bm, wall, cpu));
}

void cq_bench_memory_lines(const cq_bench_model *bm, const cq_backend_stats *st0, const cq_backend_stats *st,
                           int runs, int warm, const char *per) {
    char b1[32], b2[32], b3[32], b4[32];
    if (bm->gpu) {
        printf("device memory: peak %s in use by the backend (weights %s), %s of %s used on the device; median of %d "
               "%ss after %d warm-up\n",
               cq_fmt_bytes(CQ_MAX(st->mem_peak, st0->mem_peak), b1, sizeof b1),
               cq_fmt_bytes(st->weight_bytes, b2, sizeof b2),
               cq_fmt_bytes(st->device_total - st->device_free, b3, sizeof b3),
               cq_fmt_bytes(st->device_total, b4, sizeof b4), runs, per, warm);
        if (st->timed) cq_bench_print_op_classes(st, runs, per);
    } else {
        printf("peak resident memory %.2f GiB (mapped weights included); median of %d %ss after %d warm-up\n",
               (double)cq_bench_peak_rss() / (1024.0 * 1024.0 * 1024.0), runs, per, warm);
        printf("CPU share = CPU time / (wall time x %d threads): below ~90%% the machine was busy with other work\n",
               bm->threads);
    }
}
