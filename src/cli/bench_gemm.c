/*
 * bench_gemm.c — `cortiq bench gemm`: y = x·Wᵀ on DiT-shaped problems (rows
 * 256…4096, widths 3072…12288) for every weight codec, with f32 and bf16
 * activations, on each requested ISA; in the same run the same problem on
 * OpenBLAS (cblas_sgemm, f32) and oneDNN (bf16 matmul, f32 out: AMX where
 * the CPU has it) when the build found them (CQ_BENCH_OPENBLAS /
 * CQ_BENCH_DNNL; bench-only, the library never links them). Prints GFLOP/s
 * (2·M·N·K / median time), our/peer ratios and, for the quantized codecs,
 * the ratio to our own bf16-weight path with the same activations.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/cli.h"
#include "codec/codec.h"

#ifdef CQ_BENCH_OPENBLAS
#include <cblas.h>
#endif
#ifdef CQ_BENCH_DNNL
#include <dnnl.h>
#endif

enum { MAX_LIST = 16 };

typedef struct shape {
    long K, N;
} shape;

/* ---- ours ------------------------------------------------------------------------- */
typedef struct ours_run {
    cq_backend *be;
    cq_tensor *y;
    const cq_tensor *x, *w;
} ours_run;

static int run_ours(void *arg) {
    ours_run *r = arg;
    if (cq_op_linear(r->be, r->y, r->x, r->w, NULL) != CQ_OK) return 1;
    return cq_backend_sync(r->be) != CQ_OK;
}

/* ---- OpenBLAS ---------------------------------------------------------------------- */
typedef struct blas_run {
    long M, N, K;
    const float *x, *w;
    float *y;
} blas_run;

#ifdef CQ_BENCH_OPENBLAS
static int run_openblas(void *arg) {
    blas_run *r = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)r->M, (int)r->N, (int)r->K, 1.0f, r->x, (int)r->K, r->w,
                (int)r->K, 0.0f, r->y, (int)r->N);
    return 0;
}
#endif

/* ---- oneDNN ------------------------------------------------------------------------ */
#ifdef CQ_BENCH_DNNL
typedef struct dnnl_run {
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, wei_packed;
    char impl[96];
} dnnl_run;

static int run_dnnl(void *arg) {
    dnnl_run *r = arg;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, r->src},
                               {DNNL_ARG_WEIGHTS, r->wei_packed ? r->wei_packed : r->wei},
                               {DNNL_ARG_DST, r->dst}};
    if (dnnl_primitive_execute(r->prim, r->st, 3, args) != dnnl_success) return 1;
    return dnnl_stream_wait(r->st) != dnnl_success;
}

static void dnnl_free(dnnl_run *r) {
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->src) dnnl_memory_destroy(r->src);
    if (r->wei) dnnl_memory_destroy(r->wei);
    if (r->wei_packed) dnnl_memory_destroy(r->wei_packed);
    if (r->dst) dnnl_memory_destroy(r->dst);
    if (r->st) dnnl_stream_destroy(r->st);
    if (r->eng) dnnl_engine_destroy(r->eng);
    memset(r, 0, sizeof *r);
}

/* bf16 x [M,K] · bf16 W stored [N,K] (tag ba of the [K,N] weight) -> f32 y.
 * packed: let oneDNN choose its weight layout and reorder once, untimed (how
 * it is used for inference with preprocessed weights). */
static bool dnnl_make(dnnl_run *r, long M, long K, long N, void *x16, void *w16, float *y, bool packed) {
    memset(r, 0, sizeof *r);
    if (dnnl_engine_create(&r->eng, dnnl_cpu, 0) != dnnl_success) return false;
    if (dnnl_stream_create(&r->st, r->eng, dnnl_stream_default_flags) != dnnl_success) return false;
    dnnl_memory_desc_t sd, wd, wplain, dd;
    dnnl_dims_t sdims = {M, K}, wdims = {K, N}, ddims = {M, N};
    dnnl_memory_desc_init_by_tag(&sd, 2, sdims, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&wplain, 2, wdims, dnnl_bf16, dnnl_ba);
    dnnl_memory_desc_init_by_tag(&wd, 2, wdims, dnnl_bf16, packed ? dnnl_format_tag_any : dnnl_ba);
    dnnl_memory_desc_init_by_tag(&dd, 2, ddims, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &sd, &wd, NULL, &dd) != dnnl_success) return false;
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, &md, NULL, r->eng, NULL) != dnnl_success) return false;
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(r->impl, sizeof r->impl, "%s", impl ? impl : "?");
    const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    bool ok = dnnl_primitive_create(&r->prim, pd) == dnnl_success;
    ok = ok && dnnl_memory_create(&r->src, &sd, r->eng, x16) == dnnl_success;
    ok = ok && dnnl_memory_create(&r->wei, &wplain, r->eng, w16) == dnnl_success;
    ok = ok && dnnl_memory_create(&r->dst, &dd, r->eng, y) == dnnl_success;
    if (ok && packed) {
        dnnl_primitive_desc_t rpd;
        dnnl_primitive_t reorder;
        ok = dnnl_memory_create(&r->wei_packed, wq, r->eng, DNNL_MEMORY_ALLOCATE) == dnnl_success;
        ok = ok && dnnl_reorder_primitive_desc_create(&rpd, &wplain, r->eng, wq, r->eng, NULL) == dnnl_success;
        if (ok) {
            ok = dnnl_primitive_create(&reorder, rpd) == dnnl_success;
            dnnl_primitive_desc_destroy(rpd);
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->wei}, {DNNL_ARG_TO, r->wei_packed}};
            ok = ok && dnnl_primitive_execute(reorder, r->st, 2, args) == dnnl_success;
            ok = ok && dnnl_stream_wait(r->st) == dnnl_success;
            if (reorder) dnnl_primitive_destroy(reorder);
        }
    }
    dnnl_primitive_desc_destroy(pd);
    return ok;
}
#endif

/* oneDNN runs on OpenMP here; set its team size without linking OpenMP. */
static void peer_threads(int n) {
#ifdef CQ_BENCH_OPENBLAS
    openblas_set_num_threads(n);
#endif
    void (*omp_set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (omp_set) omp_set(n);
}

/* ---- the benchmark ------------------------------------------------------------------- */
static void help(void) {
    printf("usage: cortiq bench gemm [options]\n"
           "\n"
           "y = x·Wᵀ with W [N, K] in each weight codec and x [M, K] in f32 and bf16, on\n"
           "DiT-shaped problems, against OpenBLAS (f32 sgemm) and oneDNN (bf16 matmul) when\n"
           "this build found them. GFLOP/s = 2·M·N·K / median time.\n"
           "\n"
           "options:\n"
           "  --rows LIST      M values (default 256,1024,4096; quick 256,1024)\n"
           "  --shapes LIST    KxN pairs (default 3072x3072,3072x12288,12288x3072; quick 3072x3072)\n"
           "  --codecs LIST    weight codecs (default f32,f16,bf16,q8_row,q8_2f,q4_tiled,q4tp)\n"
           "  --x LIST         activation dtypes, f32 and/or bf16 (default both)\n"
           "  --no-peers       skip OpenBLAS and oneDNN\n"
           "%s"
           "  -h, --help       this text\n",
           cq_bench_common_help());
}

static bool parse_shapes(const char *s, shape *out, int *n) {
    *n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        long K, N;
        char tail;
        if (*n >= MAX_LIST || sscanf(tok, "%ldx%ld%c", &K, &N, &tail) != 2 || K <= 0 || N <= 0) return false;
        out[(*n)++] = (shape){K, N};
    }
    return *n > 0;
}

static double gflops(long M, long N, long K, double t) { return t > 0 ? 2.0 * (double)M * (double)N * (double)K / t / 1e9 : 0; }

typedef struct bench_state {
    cq_bench_opts o;
    long rows[MAX_LIST];
    int n_rows;
    shape shapes[MAX_LIST];
    int n_shapes;
    cq_dtype codecs[MAX_LIST];
    int n_codecs;
    cq_dtype xdts[2];
    int n_xdt;
    bool no_peers;
    cq_backend *be[CQ_CPU_ISA_COUNT];
} bench_state;

static int bench_shape(bench_state *b, shape sh) {
    const long K = sh.K, N = sh.N;
    long Mmax = 0;
    for (int i = 0; i < b->n_rows; i++) Mmax = CQ_MAX(Mmax, b->rows[i]);
    int rc = 1;
    float *wf = malloc(sizeof(float) * (size_t)(N * K));
    float *xf = malloc(sizeof(float) * (size_t)(Mmax * K));
    uint16_t *x16 = malloc(sizeof(uint16_t) * (size_t)(Mmax * K));
    uint16_t *w16 = malloc(sizeof(uint16_t) * (size_t)(N * K));
    float *yh = malloc(sizeof(float) * (size_t)(Mmax * N));
    uint8_t *payload[MAX_LIST] = {0};
    uint64_t plen[MAX_LIST] = {0};
    cq_tensor wt[CQ_CPU_ISA_COUNT][MAX_LIST];
    memset(wt, 0, sizeof wt);
    if (!wf || !xf || !x16 || !w16 || !yh) {
        fprintf(stderr, "cortiq bench gemm: out of memory\n");
        goto done;
    }
    cq_bench_fill(wf, (size_t)(N * K), 1, 1.0f / sqrtf((float)K));
    cq_bench_fill(xf, (size_t)(Mmax * K), 2, 1.0f);
    for (size_t i = 0; i < (size_t)(Mmax * K); i++) x16[i] = cq_f32_to_bf16(xf[i]);
    for (size_t i = 0; i < (size_t)(N * K); i++) w16[i] = cq_f32_to_bf16(wf[i]);
    uint64_t us[2] = {(uint64_t)N, (uint64_t)K};
    for (int c = 0; c < b->n_codecs; c++) {
        if (cq_codec_nbytes(b->codecs[c], 2, us, &plen[c]) != CQ_OK || !(payload[c] = malloc(plen[c])) ||
            cq_codec_quantize(b->codecs[c], 2, us, wf, payload[c], plen[c]) != CQ_OK) {
            fprintf(stderr, "cortiq bench gemm: cannot encode %ldx%ld as %s: %s\n", N, K, cq_dtype_name(b->codecs[c]),
                    cq_last_error());
            goto done;
        }
        cq_tensor_view v = {.name = "bench.weight", .dtype = b->codecs[c], .ndim = 2, .shape = {us[0], us[1]},
                            .nelem = us[0] * us[1], .data = payload[c], .nbytes = plen[c]};
        for (int i = 0; i < b->o.n_isa; i++)
            if (cq_tensor_bind_weight(b->be[i], &v, &wt[i][c]) != CQ_OK) {
                fprintf(stderr, "cortiq bench gemm: %s\n", cq_last_error());
                goto done;
            }
    }
    for (int ri = 0; ri < b->n_rows; ri++) {
        const long M = b->rows[ri];
        /* Peers first (their thread pools spin for a while after a call; the
         * warm-up run of the next measurement absorbs that). */
        double t_blas = -1, t_dnnl = -1, t_dnnl_packed = -1;
        char dnnl_impl[96] = "";
#ifdef CQ_BENCH_OPENBLAS
        blas_run br = {M, N, K, xf, wf, yh};
        if (!b->no_peers) t_blas = cq_bench_time(&b->o, run_openblas, &br, NULL);
#endif
#ifdef CQ_BENCH_DNNL
        for (int packed = 0; packed < 2 && !b->no_peers; packed++) {
            dnnl_run dr;
            if (dnnl_make(&dr, M, K, N, x16, w16, yh, packed)) {
                double t = cq_bench_time(&b->o, run_dnnl, &dr, NULL);
                if (packed) {
                    t_dnnl_packed = t;
                } else {
                    t_dnnl = t;
                    snprintf(dnnl_impl, sizeof dnnl_impl, "%s", dr.impl);
                }
            }
            dnnl_free(&dr);
        }
#endif
        printf("\nM=%ld K=%ld N=%ld (%.1f GFLOP per product)\n", M, K, N, 2e-9 * (double)M * (double)N * (double)K);
        if (t_blas > 0) printf("  %-10s %-5s %-9s %8.1f GFLOP/s\n", "openblas", "f32", "f32", gflops(M, N, K, t_blas));
        if (t_dnnl > 0)
            printf("  %-10s %-5s %-9s %8.1f GFLOP/s  (%s; weights prepacked by oneDNN: %.1f)\n", "onednn", "bf16", "bf16",
                   gflops(M, N, K, t_dnnl), dnnl_impl, gflops(M, N, K, t_dnnl_packed));
        for (int i = 0; i < b->o.n_isa; i++) {
            cq_tensor x, y;
            for (int xi = 0; xi < b->n_xdt; xi++) {
                cq_dtype xdt = b->xdts[xi];
                if (cq_tensor_alloc_2d(b->be[i], xdt, M, K, &x) != CQ_OK ||
                    cq_tensor_alloc_2d(b->be[i], CQ_DTYPE_F32, M, N, &y) != CQ_OK) {
                    fprintf(stderr, "cortiq bench gemm: %s\n", cq_last_error());
                    goto done;
                }
                cq_tensor_upload(&x, xdt == CQ_DTYPE_F32 ? (const void *)xf : (const void *)x16,
                                 (size_t)(M * K) * (xdt == CQ_DTYPE_F32 ? 4 : 2));
                double t_bf16w = -1;
                for (int c = 0; c < b->n_codecs; c++) {
                    cq_dtype wdt = b->codecs[c];
                    if (xdt == CQ_DTYPE_BF16 && (wdt == CQ_DTYPE_F32 || wdt == CQ_DTYPE_F16)) continue;
                    ours_run r = {b->be[i], &y, &x, &wt[i][c]};
                    double t = cq_bench_time(&b->o, run_ours, &r, NULL);
                    if (t < 0) {
                        fprintf(stderr, "cortiq bench gemm: %s\n", cq_last_error());
                        goto done;
                    }
                    if (wdt == CQ_DTYPE_BF16) t_bf16w = t;
                    double peer = xdt == CQ_DTYPE_F32 ? t_blas : t_dnnl;
                    printf("  %-10s %-5s %-9s %8.1f GFLOP/s", cq_backend_name(b->be[i]), cq_dtype_name(xdt),
                           cq_dtype_name(wdt), gflops(M, N, K, t));
                    if (peer > 0) printf("  %5.2fx %s", peer / t, xdt == CQ_DTYPE_F32 ? "openblas" : "onednn");
                    if (t_bf16w > 0 && wdt != CQ_DTYPE_BF16) printf("  %5.2fx our bf16 weights", t_bf16w / t);
                    printf("\n");
                    fflush(stdout);
                }
                cq_tensor_free(&x);
                cq_tensor_free(&y);
            }
        }
    }
    rc = 0;
done:
    for (int i = 0; i < b->o.n_isa; i++)
        for (int c = 0; c < b->n_codecs; c++) cq_tensor_free(&wt[i][c]);
    for (int c = 0; c < b->n_codecs; c++) free(payload[c]);
    free(wf);
    free(xf);
    free(x16);
    free(w16);
    free(yh);
    return rc;
}

int cq_bench_gemm(int argc, char **argv) {
    const char *cmd = "bench gemm";
    bench_state b;
    memset(&b, 0, sizeof b);
    const char *rows = NULL, *shapes = NULL, *codecs = "f32,f16,bf16,q8_row,q8_2f,q4_tiled,q4tp", *xs = "f32,bf16";
    for (int i = 1; i < argc; i++) {
        int c = cq_bench_common_opt(cmd, argc, argv, &i, &b.o);
        if (c < 0) return 2;
        if (c > 0) continue;
        if (cq_cli_is_help(argv[i])) {
            help();
            return 0;
        } else if (!strcmp(argv[i], "--no-peers")) {
            b.no_peers = true;
        } else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            rows = argv[++i];
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            shapes = argv[++i];
        } else if (!strcmp(argv[i], "--codecs") && i + 1 < argc) {
            codecs = argv[++i];
        } else if (!strcmp(argv[i], "--x") && i + 1 < argc) {
            xs = argv[++i];
        } else {
            return cq_cli_usage_error(cmd, "unknown option or missing value '%s'", argv[i]);
        }
    }
    cq_bench_finish_opts(&b.o, 5);
    if (!rows) rows = b.o.quick ? "256,1024" : "256,1024,4096";
    if (!shapes) shapes = b.o.quick ? "3072x3072" : "3072x3072,3072x12288,12288x3072";
    if (!cq_bench_parse_list(rows, b.rows, MAX_LIST, &b.n_rows)) return cq_cli_usage_error(cmd, "bad --rows '%s'", rows);
    if (!parse_shapes(shapes, b.shapes, &b.n_shapes)) return cq_cli_usage_error(cmd, "bad --shapes '%s'", shapes);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", codecs);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int dt = cq_dtype_from_name(tok);
        if (dt < 0 || !cq_codec_can_encode((cq_dtype)dt) || b.n_codecs >= MAX_LIST)
            return cq_cli_usage_error(cmd, "unknown or unencodable codec '%s'", tok);
        b.codecs[b.n_codecs++] = (cq_dtype)dt;
    }
    snprintf(buf, sizeof buf, "%s", xs);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "f32") && b.n_xdt < 2) b.xdts[b.n_xdt++] = CQ_DTYPE_F32;
        else if (!strcmp(tok, "bf16") && b.n_xdt < 2) b.xdts[b.n_xdt++] = CQ_DTYPE_BF16;
        else return cq_cli_usage_error(cmd, "--x takes f32 and/or bf16, not '%s'", tok);
    }
    int rc = 0;
    for (int i = 0; i < b.o.n_isa; i++) {
        cq_status s = cq_backend_cpu_create(b.o.threads, b.o.isas[i], &b.be[i]);
        if (s != CQ_OK) {
            rc = cq_cli_fail(cmd, s, "cpu backend");
            goto out;
        }
    }
    peer_threads(b.o.threads);
    cq_bench_print_machine(&b.o, "gemm");
    for (int s = 0; s < b.n_shapes && rc == 0; s++) rc = bench_shape(&b, b.shapes[s]);
out:
    for (int i = 0; i < b.o.n_isa; i++) cq_backend_free(b.be[i]);
    return rc;
}
