/*
 * bench_zimage.c — `cortiq bench zimage`: the Z-Image denoiser at its real
 * 6B shape (dim 3840 = 30 heads x 128, 30 layers, 2 noise and 2 context
 * refiner blocks, FFN 10240, caption width 2560, RoPE axes 32/48/48) with
 * random weights.
 *
 * The weights are generated from the model's tensor table directly in the
 * target codec (bench_pack.h), written to a temporary .cmf under $TMPDIR,
 * mapped as a real model is and unlinked at once. Then the caption's
 * preparation (embedder + context refiner, once per prompt; 512 rows by
 * default, the pipeline's maximum) and the denoising step for a SIZE x SIZE
 * image ((SIZE/16)^2 image tokens, padded to a multiple of 32, beside the
 * caption's rows) are timed: warm-up steps (the first sizes the buffers, the
 * second is recorded where the backend records), then the median of --steps
 * runs. FLOPs count every matmul and both attention products (2 per
 * multiply-add) as the model runs them, pad rows included; element-wise work
 * is left out. --layers N builds N of the 30 main layers and scales the
 * step to 30, saying so; --heads N builds a narrower model (dim 128 N) whose
 * numbers describe that model only (a quick check of the whole path).
 *
 * --backend cuda runs the same code on the GPU (the backend is opened before
 * the weights are written, so a machine without one fails at once) and
 * reports device memory instead of CPU use.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "codec/codec.h"
#include "models/zimage.h"
#include "ops/ops.h"

#define B_CAPTION 512 /* the pipeline's max_sequence_length */
#define B_MAX_CAPTION 1472 /* keeps the image's frame position inside the released table (1536) */

typedef struct bench_opts {
    cq_bench_model_opts m;
    int layers, heads, caption, steps;
    cq_dtype quant;
    bool gpu;
} bench_opts;

static void help(void) {
    printf("usage: cortiq bench zimage [--size 256|512|1024|2048] [--caption L] [--steps N] [--layers N]\n"
           "                           [--heads N] [--quant q8_2f|q4tp|bf16] [--threads N] [--backend cpu|cuda]\n"
           "\n"
           "Time the Z-Image denoiser at its real 6B shape (dim 3840, 30 layers, 2 + 2 refiner blocks) with\n"
           "random weights: the caption's preparation (embedder and context refiner, once per prompt) and\n"
           "the denoising step for a SIZE x SIZE image ((SIZE/16)^2 image tokens beside the caption rows).\n"
           "The weights are written in the chosen codec to a temporary .cmf under $TMPDIR (about 6.5 GB\n"
           "for q8_2f, 3.5 GB for q4tp, 12 GB for bf16; removed when the file is mapped) and mapped as a\n"
           "real model is. Reports the median of --steps steps after the warm-up, FLOP/s (matmuls and\n"
           "attention products, 2 FLOPs per multiply-add) and the peak memory.\n"
           "\n"
           "options:\n"
           "  --size N      image side in pixels: 256, 512, 1024 (default) or 2048\n"
           "  --caption L   caption rows (default %d, the pipeline's maximum; 1 .. %d)\n"
           "  --steps N     timed steps after the warm-up (default 3 on the CPU, 5 on a GPU)\n"
           "  --layers N    build only N of the 30 main layers and scale the step to 30 by FLOPs\n"
           "  --heads N     build N of the 30 heads (dim 128 N): a narrower model, for a quick check\n"
           "  --quant C     weight codec: q8_2f (default), q4tp or bf16\n"
           "  --threads N   worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B   cpu (default), cuda or cuda:N; the steps after the warm-up replay a recorded\n"
           "                CUDA graph (CORTIQ_CUDA_PROFILE=1 times each op class instead)\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help    this text\n",
           B_CAPTION, B_MAX_CAPTION);
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, true, i, &o->quant);
    if (strcmp(a, "--layers") == 0 || strcmp(a, "--heads") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 30, &n)) return 2;
        *(a[2] == 'l' ? &o->layers : &o->heads) = (int)n;
    } else if (strcmp(a, "--caption") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, B_MAX_CAPTION, &n)) return 2;
        o->caption = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 100, &n)) return 2;
        o->steps = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

static int parse(int argc, char **argv, bench_opts *o, bool *done) {
    return cq_bench_model_args("bench zimage", argc, argv, &o->m, help, opt, o, done);
}

/* ---- the random model -------------------------------------------------------------------------- */
static cq_status map_model(const bench_opts *o, const cq_zimage_config *c, cq_cmf **cmf, uint64_t *bytes) {
    cq_bench_pack pk = {0};
    char cfg[1024], hdr[4096];
    cq_status s = cq_bench_zimage_weights(&pk, o->quant, c);
    if (s == CQ_OK && cq_bench_zimage_config_json(cfg, sizeof cfg, c) < 0) s = CQ_ERR_INTERNAL;
    int h = snprintf(hdr, sizeof hdr,
                     "{\"format\":\"cmf\",\"version\":2,\"arch\":{\"arch_name\":\"z_image\",\"hidden_size\":%d,"
                     "\"intermediate_size\":%d,\"num_layers\":%d,\"num_attention_heads\":%d,\"num_kv_heads\":%d,"
                     "\"head_dim\":%d,\"vocab_size\":0,\"max_position_embeddings\":0,\"rms_norm_eps\":1e-05,"
                     "\"layer_types\":[",
                     c->dim, c->ffn_hidden, c->n_layers, c->n_heads, c->n_heads, c->head_dim);
    for (int l = 0; l < c->n_layers; l++) h += snprintf(hdr + h, sizeof hdr - (size_t)h, "%s\"FullAttention\"", l ? "," : "");
    snprintf(hdr + h, sizeof hdr - (size_t)h, "]},\"quant_type\":\"%s\",\"provenance\":{\"tool\":\"cortiq bench zimage\"}}",
             o->quant == CQ_DTYPE_Q8_2F ? "Q8_2F" : o->quant == CQ_DTYPE_BF16 ? "BF16" : "Q4_BLOCK");
    *bytes = cq_bench_pack_bytes(&pk);
    cq_bench_blob blob = {"dit.config_json", cfg, strlen(cfg)};
    cq_bench_file f = {.tag = "zimage", .header = hdr, .blobs = &blob, .n_blobs = 1, .weights = &pk,
                       .no_verify = o->m.no_verify, .threads = o->m.threads};
    uint64_t file_bytes;
    if (s == CQ_OK) s = cq_bench_pack_map(&f, cmf, &file_bytes);
    cq_bench_pack_free(&pk);
    return s;
}

/* ---- FLOPs, as the model computes them ------------------------------------------------------------- */
/* One block on n rows: q, k, v, out; w1, w3, w2; QK^T and PV over all n keys. */
static double flops_block(const cq_zimage_config *c, double n) {
    const double D = c->dim, F = c->ffn_hidden;
    return 2 * n * D * D * 4 + 2 * n * D * F * 3 + 4 * n * n * D;
}

static double flops_step(const cq_zimage_config *c, const cq_zimage_layout *l, int layers) {
    const double D = c->dim, A = c->adaln_dim, P = c->patch_channels;
    double t = 2.0 * (CQ_ZIMAGE_TIMESTEP_CHANNELS * CQ_ZIMAGE_TIMESTEP_MID + CQ_ZIMAGE_TIMESTEP_MID * A);
    double mod = 2.0 * A * 4 * D * (c->n_refiner_layers + layers) + 2.0 * A * D;
    double embed = 2.0 * l->n_img * P * D, final = 2.0 * l->n_img * D * P;
    return t + mod + embed + c->n_refiner_layers * flops_block(c, l->n_img_pad) +
           layers * flops_block(c, (double)l->n_img_pad + l->n_cap_pad) + final;
}

static double flops_prepare(const cq_zimage_config *c, const cq_zimage_layout *l) {
    return 2.0 * l->n_cap * c->cap_feat_dim * c->dim + c->n_refiner_layers * flops_block(c, l->n_cap_pad);
}

/* ---- the run -------------------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_cmf *cmf;
    cq_backend *be;
    cq_zimage *m;
    cq_zimage_cond *c;
    float *cap, *x, *out;
    double *times, *cpu;
} bench_run;

static void run_free(bench_run *r) {
    cq_free(r->cap);
    cq_free(r->x);
    cq_free(r->out);
    cq_free(r->times);
    cq_free(r->cpu);
    cq_zimage_cond_free(r->c);
    cq_zimage_free(r->m);
    cq_backend_free(r->be);
    cq_cmf_close(r->cmf);
}

static void print_row(bool gpu, const char *label, double t, double c, double flops, int threads) {
    if (gpu)
        printf("%-36s %9.2f %10.1f %9.1f\n", label, 1e3 * t, flops * 1e-9, flops * 1e-12 / t);
    else
        printf("%-36s %9.3f %10.1f %9.1f %9.2f %9.0f%%\n", label, t, flops * 1e-9, flops * 1e-9 / t, c,
               100.0 * c / (t * threads));
}

int cq_bench_zimage(int argc, char **argv) {
    bench_opts o = {.m = {.size = 1024, .backend = "cpu"}, .layers = CQ_BENCH_ZI_LAYERS, .heads = CQ_BENCH_ZI_HEADS,
                    .caption = B_CAPTION, .quant = CQ_DTYPE_Q8_2F};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    o.gpu = strncmp(o.m.backend, "cuda", 4) == 0;
    if (o.steps == 0) o.steps = o.gpu ? 5 : 3;
    cq_zimage_config cfg;
    cq_bench_zimage_config(&cfg, o.heads, o.layers);
    const int lat = o.m.size / 8;
    cq_zimage_layout lay;
    if (cq_zimage_layout_for(&cfg, o.caption, lat, lat, &lay) != CQ_OK)
        return cq_cli_fail("bench zimage", CQ_ERR_SHAPE, "sizing the sequence");

    printf("Z-Image denoiser, %s shape (dim %d = %d heads x %d, %d layer%s%s, %d + %d refiner blocks, FFN %d), random "
           "%s weights\n",
           o.heads == CQ_BENCH_ZI_HEADS ? "6B" : "narrowed", cfg.dim, cfg.n_heads, cfg.head_dim, o.layers,
           o.layers == 1 ? "" : "s", o.layers < CQ_BENCH_ZI_LAYERS ? " of 30 built" : "", cfg.n_refiner_layers, cfg.n_refiner_layers,
           cfg.ffn_hidden, cq_dtype_name(o.quant));
    fflush(stdout);
    bench_run r = {0};
    cq_status s = cq_env_backend_create(o.m.backend, o.m.threads, &r.be);
    if (s != CQ_OK) return cq_cli_fail("bench zimage", s, "creating the backend");
    uint64_t wbytes;
    double t0 = cq_now();
    s = map_model(&o, &cfg, &r.cmf, &wbytes);
    double t_write = cq_now() - t0;
    if (s != CQ_OK) {
        cq_backend_free(r.be);
        return cq_cli_fail("bench zimage", s, "writing the temporary model");
    }
    char b1[32];
    printf("weights %s written and verified in %.1f s (temporary file, already removed)\n",
           cq_fmt_bytes(wbytes, b1, sizeof b1), t_write);

    const char *what = "allocating";
    const size_t ncap = (size_t)o.caption * cfg.cap_feat_dim, nx = (size_t)lay.n_img * cfg.patch_channels;
    r.cap = cq_mallocn(ncap, sizeof(float));
    r.x = cq_mallocn(nx, sizeof(float));
    r.out = cq_mallocn(nx, sizeof(float));
    r.times = cq_mallocn((size_t)o.steps + 1, sizeof(double));
    r.cpu = cq_mallocn((size_t)o.steps + 1, sizeof(double));
    if (!r.cap || !r.x || !r.out || !r.times || !r.cpu) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        what = "loading the model";
        t0 = cq_now();
        s = cq_zimage_load(r.cmf, "dit.", r.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(r.be);
    }
    double t_load = cq_now() - t0;
    uint64_t rng = 12345;
    for (size_t i = 0; s == CQ_OK && i < ncap; i++) r.cap[i] = 2.0f * cq_bench_rng_unit(&rng);
    for (size_t i = 0; s == CQ_OK && i < nx; i++) r.x[i] = 2.0f * cq_bench_rng_unit(&rng);
    if (s == CQ_OK) {
        printf("backend %s", cq_backend_name(r.be));
        if (!o.gpu) printf(", %d threads", o.m.threads > 0 ? o.m.threads : cq_default_threads());
        printf("; model loaded in %.2f s\n", t_load);
        fflush(stdout);
    }
    /* prepare: a warm-up (first touch of the mapped weights), then the timed runs */
    for (int i = 0; s == CQ_OK && i <= o.steps; i++) {
        what = "prepare";
        cq_zimage_cond_free(r.c);
        r.c = NULL;
        t0 = cq_now();
        double c0 = cq_bench_cpu_seconds();
        s = cq_zimage_prepare(r.m, r.cap, o.caption, lat, lat, &r.c);
        if (i) r.times[i - 1] = cq_now() - t0, r.cpu[i - 1] = cq_bench_cpu_seconds() - c0;
    }
    double t_prep = s == CQ_OK ? cq_bench_median(r.times, o.steps) : 0;
    double c_prep = s == CQ_OK ? cq_bench_median(r.cpu, o.steps) : 0;
    /* steps: the warm-up sizes nothing more (prepare did) but the first runs op by op and the second is
     * recorded where the backend records; the timed ones replay */
    cq_backend_stats st, st0;
    memset(&st, 0, sizeof st);
    memset(&st0, 0, sizeof st0);
    const int warm = cq_backend_can_record(r.be) ? 2 : 1;
    for (int i = 0; s == CQ_OK && i < warm + o.steps; i++) {
        what = "step";
        t0 = cq_now();
        double c0 = cq_bench_cpu_seconds();
        s = cq_zimage_step(r.m, r.c, r.x, 1.0f - (float)i / (float)(warm + o.steps), r.out);
        if (i >= warm) r.times[i - warm] = cq_now() - t0, r.cpu[i - warm] = cq_bench_cpu_seconds() - c0;
        if (s == CQ_OK && i == warm - 1) s = cq_backend_get_stats(r.be, &st0, true); /* op times: timed steps only */
    }
    if (s == CQ_OK) s = cq_backend_get_stats(r.be, &st, false);
    double t_step = s == CQ_OK ? cq_bench_median(r.times, o.steps) : 0;
    double c_step = s == CQ_OK ? cq_bench_median(r.cpu, o.steps) : 0;
    if (s != CQ_OK) {
        rc = cq_cli_fail("bench zimage", s, what);
        run_free(&r);
        return rc;
    }
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(r.out[i])) {
            fprintf(stderr, "cortiq bench zimage: warning: the output holds non-finite values\n");
            break;
        }
    const int threads = o.m.threads > 0 ? o.m.threads : cq_default_threads();
    const double fs = flops_step(&cfg, &lay, o.layers), fp = flops_prepare(&cfg, &lay);
    char lp[64], ls[96];
    snprintf(lp, sizeof lp, "prepare (%d caption rows)", o.caption);
    snprintf(ls, sizeof ls, "step (%dx%d px, %d+%d rows)", o.m.size, o.m.size, lay.n_img_pad, lay.n_cap_pad);
    if (o.gpu) printf("%-36s %9s %10s %9s\n", "", "ms", "GFLOP", "TFLOP/s");
    else printf("%-36s %9s %10s %9s %9s %10s\n", "", "wall s", "GFLOP", "GFLOP/s", "CPU s", "CPU share");
    print_row(o.gpu, lp, t_prep, c_prep, fp, threads);
    print_row(o.gpu, ls, t_step, c_step, fs, threads);
    if (o.layers < CQ_BENCH_ZI_LAYERS) {
        double k = flops_step(&cfg, &lay, CQ_BENCH_ZI_LAYERS) / fs;
        printf("scaled to 30 layers by FLOPs: step ~%.4f s (x%.2f)\n", t_step * k, k);
    }
    if (o.gpu) {
        char b2[32], b3[32], b4[32];
        printf("device memory: peak %s in use by the backend (weights %s), %s of %s used on the device; median of %d "
               "steps after %d warm-up\n",
               cq_fmt_bytes(CQ_MAX(st.mem_peak, st0.mem_peak), b1, sizeof b1),
               cq_fmt_bytes(st.weight_bytes, b2, sizeof b2), cq_fmt_bytes(st.device_total - st.device_free, b3, sizeof b3),
               cq_fmt_bytes(st.device_total, b4, sizeof b4), o.steps, warm);
        if (st.timed) cq_bench_print_op_classes(&st, o.steps, "step");
    } else {
        printf("peak resident memory %.2f GiB (mapped weights included); median of %d steps after %d warm-up\n",
               (double)cq_bench_peak_rss() / (1024.0 * 1024.0 * 1024.0), o.steps, warm);
        printf("CPU share = CPU time / (wall time x %d threads): below ~90%% the machine was busy with other work\n",
               threads);
    }
    run_free(&r);
    return 0;
}
