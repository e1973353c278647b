/*
 * bench_attention.c — `cortiq bench attention`: the attention op on a
 * DiT-shaped problem (4096 queries x 4096 keys, head_dim 128, several heads,
 * full visibility by default), reported in GFLOP/s (4·Nq·keys seen·D per
 * head: Q·Kᵀ and P·V) next to our own f32 matmul throughput on the block's
 * projection shape (M = Nq, K = N = 3072) measured in the same run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "cli/cli.h"

typedef struct attn_run {
    cq_backend *be;
    cq_attn_args a;
} attn_run;

static int run_attn(void *arg) {
    attn_run *r = arg;
    if (cq_op_attention(r->be, &r->a) != CQ_OK) return 1;
    return cq_backend_sync(r->be) != CQ_OK;
}

typedef struct mm_run {
    cq_backend *be;
    cq_tensor *y;
    const cq_tensor *x, *w;
} mm_run;

static int run_mm(void *arg) {
    mm_run *r = arg;
    if (cq_op_linear(r->be, r->y, r->x, r->w, NULL) != CQ_OK) return 1;
    return cq_backend_sync(r->be) != CQ_OK;
}

static void help(void) {
    printf("usage: cortiq bench attention [options]\n"
           "\n"
           "Multi-head attention (q [Nq, H*D], k/v [Nk, H*D]) in GFLOP/s = 4*D*H*(query,key)\n"
           "pairs seen / median time, against our f32 matmul on M = Nq, K = N = 3072.\n"
           "\n"
           "options:\n"
           "  --q N            query rows (default 4096; quick 1024)\n"
           "  --kv N           key rows (default 4096; quick 1024)\n"
           "  --heads H        heads (default 8; quick 4)\n"
           "  --dim D          head dim (default 128)\n"
           "  --causal         causal visibility (default: every query sees every key)\n"
           "%s"
           "  -h, --help       this text\n",
           cq_bench_common_help());
}

static int bench_isa(const cq_bench_opts *o, cq_cpu_isa isa, long Nq, long Nk, long H, long D, bool causal) {
    const char *cmd = "bench attention";
    cq_backend *be;
    cq_status s = cq_backend_cpu_create(o->threads, isa, &be);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, "cpu backend");
    int rc = 1;
    const long W = 3072;
    cq_tensor q = {0}, k = {0}, v = {0}, out = {0}, x = {0}, w = {0}, y = {0};
    float *hq = malloc(sizeof(float) * (size_t)(Nq * H * D)), *hk = malloc(sizeof(float) * (size_t)(Nk * H * D));
    float *hx = malloc(sizeof(float) * (size_t)(Nq * W)), *hw = malloc(sizeof(float) * (size_t)(W * W));
    if (!hq || !hk || !hx || !hw) {
        fprintf(stderr, "cortiq %s: out of memory\n", cmd);
        goto done;
    }
    if (cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nq, H * D, &q) || cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nk, H * D, &k) ||
        cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nk, H * D, &v) || cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nq, H * D, &out) ||
        cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nq, W, &x) || cq_tensor_alloc_2d(be, CQ_DTYPE_F32, Nq, W, &y)) {
        rc = cq_cli_fail(cmd, CQ_ERR_NOMEM, "tensors");
        goto done;
    }
    cq_bench_fill(hq, (size_t)(Nq * H * D), 3, 1.0f);
    cq_tensor_upload(&q, hq, sizeof(float) * (size_t)(Nq * H * D));
    cq_bench_fill(hk, (size_t)(Nk * H * D), 4, 1.0f);
    cq_tensor_upload(&k, hk, sizeof(float) * (size_t)(Nk * H * D));
    cq_bench_fill(hk, (size_t)(Nk * H * D), 5, 1.0f);
    cq_tensor_upload(&v, hk, sizeof(float) * (size_t)(Nk * H * D));
    cq_bench_fill(hx, (size_t)(Nq * W), 6, 1.0f);
    cq_tensor_upload(&x, hx, sizeof(float) * (size_t)(Nq * W));
    cq_bench_fill(hw, (size_t)(W * W), 7, 1.0f / sqrtf((float)W));
    cq_tensor_view wv = {.name = "bench.weight", .dtype = CQ_DTYPE_F32, .ndim = 2, .shape = {(uint64_t)W, (uint64_t)W},
                         .nelem = (uint64_t)(W * W), .data = (const uint8_t *)hw, .nbytes = sizeof(float) * (uint64_t)(W * W)};
    if ((s = cq_tensor_bind_weight(be, &wv, &w)) != CQ_OK) {
        rc = cq_cli_fail(cmd, s, "weight");
        goto done;
    }
    attn_run ar = {be, {.o = &out, .q = &q, .k = &k, .v = &v, .n_heads = (int)H, .n_kv_heads = (int)H,
                        .head_dim = (int)D, .causal = causal}};
    mm_run mr = {be, &y, &x, &w};
    double t_att = cq_bench_time(o, run_attn, &ar, NULL), t_mm = cq_bench_time(o, run_mm, &mr, NULL);
    if (t_att < 0 || t_mm < 0) {
        rc = cq_cli_fail(cmd, CQ_ERR_INVALID_ARG, "run");
        goto done;
    }
    double pairs = 0; /* (query, key) pairs that are actually visible */
    for (long i = 0; i < Nq; i++) pairs += causal ? (double)CQ_MIN(Nk, i + 1) : (double)Nk;
    double g_att = 4.0 * (double)D * (double)H * pairs / t_att / 1e9;
    double g_mm = 2.0 * (double)Nq * (double)W * (double)W / t_mm / 1e9;
    printf("  %-10s attention %ld x %ld, %ld heads, D=%ld%s: %7.1f GFLOP/s (%.3f s)\n", cq_backend_name(be), Nq, Nk,
           H, D, causal ? ", causal" : "", g_att, t_att);
    printf("  %-10s matmul f32 M=%ld K=N=%ld:              %7.1f GFLOP/s  ->  attention at %.0f%% of matmul\n",
           cq_backend_name(be), Nq, W, g_mm, 100.0 * g_att / g_mm);
    rc = 0;
done:
    cq_tensor_free(&q), cq_tensor_free(&k), cq_tensor_free(&v), cq_tensor_free(&out);
    cq_tensor_free(&x), cq_tensor_free(&y), cq_tensor_free(&w);
    free(hq), free(hk), free(hx), free(hw);
    cq_backend_free(be);
    return rc;
}

int cq_bench_attention(int argc, char **argv) {
    const char *cmd = "bench attention";
    cq_bench_opts o;
    memset(&o, 0, sizeof o);
    long Nq = 0, Nk = 0, H = 0, D = 128;
    bool causal = false;
    for (int i = 1; i < argc; i++) {
        int c = cq_bench_common_opt(cmd, argc, argv, &i, &o);
        if (c < 0) return 2;
        if (c > 0) continue;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (cq_cli_is_help(a)) {
            help();
            return 0;
        } else if (!strcmp(a, "--causal")) {
            causal = true;
        } else if (!strcmp(a, "--q") || !strcmp(a, "--kv") || !strcmp(a, "--heads") || !strcmp(a, "--dim")) {
            long v;
            if (!cq_cli_parse_int(cmd, a, val, 1, !strcmp(a, "--dim") ? 256 : 1 << 20, &v)) return 2;
            i++;
            if (!strcmp(a, "--q")) Nq = v;
            else if (!strcmp(a, "--kv")) Nk = v;
            else if (!strcmp(a, "--heads")) H = v;
            else D = v;
        } else {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        }
    }
    cq_bench_finish_opts(&o, 5);
    if (!Nq) Nq = o.quick ? 1024 : 4096;
    if (!Nk) Nk = o.quick ? 1024 : 4096;
    if (!H) H = o.quick ? 4 : 8;
    cq_bench_print_machine(&o, "attention");
    for (int i = 0; i < o.n_isa; i++) {
        int rc = bench_isa(&o, o.isas[i], Nq, Nk, H, D, causal);
        if (rc) return rc;
    }
    return 0;
}
