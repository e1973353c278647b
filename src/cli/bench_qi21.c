/*
 * bench_qi21.c — `cortiq bench qi21`: the Qwen-Image-2.1 denoiser at its
 * real 7B shape (32 layers, 32 heads x 128, context 4096, mlp_ratio 3,
 * in/out 64, RoPE axes 16/56/56) with random weights.
 *
 * The weights are generated directly in the target codec (random payloads
 * in the codec's exact layout, scaled so every linear keeps unit variance;
 * no encoder runs over 7B floats) and streamed through the CMF writer into a
 * temporary file under $TMPDIR, which is opened (mmap, as a real model is)
 * and unlinked at once, so it never outlives the run. Then one prefill of
 * 18 text rows and the denoising step at 256x256 pixels (16x16 = 256 target
 * tokens; 512 -> 1024, 1024 -> 4096, 2048 -> 16384) are timed: a warm-up,
 * then the median of --repeat runs. FLOPs count every matmul and both
 * attention products (2 per multiply-add), as the model runs them;
 * element-wise work is left out. --layers N builds N of the 32 layers and
 * scales the per-layer part to 32, saying so.
 *
 * --backend cuda runs the same code on the GPU backend (the backend is
 * opened before the weights are written, so a machine without a GPU fails
 * at once) and reports device memory instead of CPU use; with
 * CORTIQ_CUDA_PROFILE=1 also the device time per op class of the timed steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "codec/codec.h"
#include "models/qi21.h"
#include "ops/ops.h"

/* The released model's shape. */
#define B_LAYERS CQ_BENCH_DIT_LAYERS
#define B_HEADS CQ_BENCH_DIT_HEADS
#define B_HEAD_DIM CQ_BENCH_DIT_HEAD_DIM
#define B_CTX CQ_BENCH_DIT_CTX
#define B_RATIO CQ_BENCH_DIT_RATIO
#define B_CH CQ_BENCH_DIT_CH
#define B_TEXT 18
#define B_TPROJ CQ_BENCH_DIT_TPROJ

typedef struct bench_opts {
    cq_bench_model_opts m;
    int layers, repeat;
    cq_dtype quant;
    bool gpu;
} bench_opts;

#define B_MAX_SIDE 2048 /* pixels: 16384 target tokens */

static void help(void) {
    printf("usage: cortiq bench qi21 [--size 256|512|1024|2048] [--quant q8_2f|q4tp|bf16] [--threads N]\n"
           "                         [--layers N] [--repeat N] [--backend cpu|cuda]\n"
           "\n"
           "Time the Qwen-Image-2.1 denoiser at its real 7B shape with random weights: one prefill of\n"
           "%d text rows and the denoising step for a SIZE x SIZE image ((SIZE/16)^2 target tokens).\n"
           "The weights are written in the chosen codec to a temporary .cmf under $TMPDIR (about\n"
           "7.5 GB for q8_2f, 4 GB for q4tp; removed when the file is mapped) and mapped as a real\n"
           "model is. Reports the median of --repeat runs after a warm-up, GFLOP/s (matmuls and\n"
           "attention products, 2 FLOPs per multiply-add), one MLP-shaped matmul of the same codec for\n"
           "comparison, and the peak resident memory (the mapped weights included).\n"
           "\n"
           "options:\n"
           "  --size N      image side in pixels: 256 (default), 512, 1024 or 2048\n"
           "  --quant C     weight codec: q8_2f (default), q4tp or bf16 (15 GB)\n"
           "  --threads N   worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --layers N    build only N of the 32 layers and scale the per-layer time to 32\n"
           "                (for machines where the whole model is too slow or too big)\n"
           "  --repeat N    timed runs after the warm-up (default 3 on the CPU, 5 on a GPU)\n"
           "  --backend B   cpu (default), cuda or cuda:N; with cuda, CORTIQ_CUDA_PROFILE=1 adds the\n"
           "                device time per op class (GEMM, attention, row ops; the steps then run op by\n"
           "                op), otherwise the steps after the warm-up replay a recorded CUDA graph\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help    this text\n",
           B_TEXT);
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, true, i, &o->quant);
    if (strcmp(a, "--layers") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, B_LAYERS, &n)) return 2;
        o->layers = (int)n;
    } else if (strcmp(a, "--repeat") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 100, &n)) return 2;
        o->repeat = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

static int parse(int argc, char **argv, bench_opts *o, bool *done) {
    return cq_bench_model_args("bench qi21", argc, argv, &o->m, help, opt, o, done);
}

/* ---- the random model ---------------------------------------------------------------------- */
/* The backend, then the random model written to a temporary file and mapped (the file is gone when this
 * returns). */
static int open_model(const bench_opts *o, cq_bench_model *bm) {
    cq_bench_pack pk = {0};
    char cfg[512];
    cq_status s = cq_bench_dit_weights(&pk, o->quant, o->layers);
    if (s == CQ_OK && cq_bench_dit_config(cfg, sizeof cfg, o->layers) < 0) s = CQ_ERR_INTERNAL;
    const cq_bench_component comp = {
        .tag = "qi21", .tool = "cortiq bench qi21", .quant = o->quant, .weights = &pk,
        .blob_name = "dit.config_json", .blob = cfg,
        .arch = {"qwen_image21", B_HEADS * B_HEAD_DIM, B_HEADS * B_HEAD_DIM * B_RATIO, o->layers, B_HEADS, B_HEADS,
                 B_HEAD_DIM, "1e-06"}};
    int rc = cq_bench_model_open(bm, "bench qi21", &o->m, &comp, s);
    cq_bench_pack_free(&pk);
    return rc;
}

/* ---- FLOPs, as the model computes them ------------------------------------------------ */
static double flops_mod(void) {
    const double D = B_HEADS * B_HEAD_DIM;
    return 2.0 * 2.0 * (B_TPROJ * D + D * D + D * 4 * D + D * D); /* two timestep rows */
}

static double flops_step(double T, double P, int layers) {
    const double D = B_HEADS * B_HEAD_DIM, M = D * B_RATIO;
    double per_layer = 2 * T * D * D * 4 + 2 * T * D * M * 3 + 4 * T * (P + T) * D;
    return flops_mod() + 2 * T * B_CH * D + layers * per_layer + 2 * T * D * B_CH;
}

static double flops_prefill(double P, int layers) {
    const double D = B_HEADS * B_HEAD_DIM, M = D * B_RATIO;
    /* block-causal: text row i sees i + 1 keys; the last layer only makes keys and values */
    double per_layer = 2 * P * D * D * 4 + 2 * P * D * M * 3 + 4 * D * P * (P + 1) / 2;
    return flops_mod() + 2 * P * B_CTX * D + 2 * P * D * D + (layers - 1) * per_layer + 2 * 2 * P * D * D;
}

/* ---- the run ---------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_bench_model bm;
    cq_cmf *cmf;     /* bm's */
    cq_backend *be;  /* bm's */
    cq_qi21 *m;
    float *ctx, *target, *vel;
    double *times, *cpu;
} bench_run;

static void run_free(bench_run *r) {
    cq_free(r->ctx);
    cq_free(r->target);
    cq_free(r->vel);
    cq_free(r->times);
    cq_free(r->cpu);
    cq_qi21_free(r->m);
    cq_bench_model_close(&r->bm);
}

/* Median seconds of one [T, D] x [M, D]^T matmul (the MLP gate's shape) in the bench's codec. */
static cq_status matmul_ref(bench_run *r, int T, int repeat, double *sec) {
    const cq_tensor_view *v = cq_cmf_find(r->cmf, "dit.transformer_blocks.0.img_mlp.gate_layer.weight");
    if (!v) return cq_fail(CQ_ERR_MISSING, "bench: the gate weight is missing");
    cq_tensor w = {0}, x = {0}, y = {0};
    cq_status s = cq_tensor_bind_weight(r->be, v, &w);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(r->be, CQ_DTYPE_F32, T, (int64_t)v->shape[1], &x);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(r->be, CQ_DTYPE_F32, T, (int64_t)v->shape[0], &y);
    if (s == CQ_OK) s = cq_tensor_zero(&x);
    for (int i = 0; s == CQ_OK && i <= repeat; i++) {
        double t0 = cq_now();
        s = cq_op_linear(r->be, &y, &x, &w, NULL);
        if (s == CQ_OK) s = cq_backend_sync(r->be);
        if (i) r->times[i - 1] = cq_now() - t0;
    }
    if (s == CQ_OK) *sec = cq_bench_median(r->times, repeat);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
    cq_tensor_free(&w);
    return s;
}

int cq_bench_qi21(int argc, char **argv) {
    bench_opts o = {.m = {.size = 256, .backend = "cpu"}, .layers = B_LAYERS, .repeat = 0, .quant = CQ_DTYPE_Q8_2F};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    o.gpu = strncmp(o.m.backend, "cuda", 4) == 0;
    if (o.repeat == 0) o.repeat = o.gpu ? 5 : 3;
    const int side = o.m.size / 16, T = side * side; /* VAE /8, then 2x2 patches: 16 px per token */

    printf("Qwen-Image-2.1 denoiser, 7B shape (%d layers%s, %d heads x %d, context %d, mlp %d), random %s weights\n",
           o.layers, o.layers < B_LAYERS ? " of 32 built" : "", B_HEADS, B_HEAD_DIM, B_CTX,
           B_HEADS * B_HEAD_DIM * B_RATIO, cq_dtype_name(o.quant));
    fflush(stdout);
    /* the backend first: a missing GPU fails before gigabytes of weights are written */
    bench_run r = {0};
    if ((rc = open_model(&o, &r.bm)) != 0) return rc;
    r.be = r.bm.be;
    r.cmf = r.bm.cmf;
    cq_status s = CQ_OK;
    double t0 = cq_now();
    char b1[32];

    const char *what = "allocating";
    const size_t D = B_HEADS * B_HEAD_DIM;
    r.ctx = cq_mallocn((size_t)B_TEXT * B_CTX, sizeof(float));
    r.target = cq_mallocn((size_t)T * B_CH, sizeof(float));
    r.vel = cq_mallocn((size_t)T * B_CH, sizeof(float));
    r.times = cq_mallocn((size_t)o.repeat + 1, sizeof(double));
    r.cpu = cq_mallocn((size_t)o.repeat + 1, sizeof(double));
    if (s == CQ_OK && (!r.ctx || !r.target || !r.vel || !r.times || !r.cpu)) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        what = "loading the model";
        t0 = cq_now();
        s = cq_qi21_load(r.cmf, "dit.", r.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(r.be); /* a device backend uploads and decodes asynchronously */
    }
    double t_load = cq_now() - t0;
    uint64_t rng = 12345;
    for (size_t i = 0; s == CQ_OK && i < (size_t)B_TEXT * B_CTX; i++)
        r.ctx[i] = 2.0f * cq_bench_rng_unit(&rng);
    for (size_t i = 0; s == CQ_OK && i < (size_t)T * B_CH; i++)
        r.target[i] = 2.0f * cq_bench_rng_unit(&rng);
    static uint8_t mask[B_TEXT + (B_MAX_SIDE / 16) * (B_MAX_SIDE / 16) / 4];
    memset(mask, 0, B_TEXT);
    memset(mask + B_TEXT, 1, (size_t)T / 4);
    int32_t shapes[1][3] = {{1, side, side}};
    cq_qi21_layout lay = {.vlm_len = B_TEXT + T / 4, .img_mask = mask, .n_images = 1,
                          .img_shapes = (const int32_t(*)[3])shapes};
    if (s == CQ_OK) {
        if (o.gpu)
            printf("backend %s; model loaded (weights uploaded and decoded on the device) in %.2f s\n",
                   cq_backend_name(r.be), t_load);
        else
            printf("backend %s, %d threads; model loaded (weights bound in place) in %.2f s\n", cq_backend_name(r.be),
                   o.m.threads > 0 ? o.m.threads : cq_default_threads(), t_load);
        fflush(stdout);
    }

    /* prefill: warm-up (first touch of the mapped weights), then the timed runs; CPU time
     * alongside wall time tells how much of the cores the process really had */
    cq_qi21_cache *c = NULL;
    for (int i = 0; s == CQ_OK && i <= o.repeat; i++) {
        what = "prefill";
        cq_qi21_cache_free(c);
        c = NULL;
        t0 = cq_now();
        double c0 = cq_bench_cpu_seconds();
        s = cq_qi21_prefill(r.m, &lay, r.ctx, NULL, &c);
        if (i) r.times[i - 1] = cq_now() - t0, r.cpu[i - 1] = cq_bench_cpu_seconds() - c0;
    }
    double t_prefill = s == CQ_OK ? cq_bench_median(r.times, o.repeat) : 0, c_prefill = s == CQ_OK ? cq_bench_median(r.cpu, o.repeat) : 0;
    cq_backend_stats st, st0; /* st0: after the warm-up step (its peak covers loading and prefill) */
    memset(&st, 0, sizeof st);
    memset(&st0, 0, sizeof st0);
    for (int i = 0; s == CQ_OK && i <= o.repeat; i++) {
        what = "step";
        t0 = cq_now();
        double c0 = cq_bench_cpu_seconds();
        s = cq_qi21_step(r.m, c, r.target, 1.0f - (float)i / (float)(o.repeat + 1), r.vel);
        if (i) r.times[i - 1] = cq_now() - t0, r.cpu[i - 1] = cq_bench_cpu_seconds() - c0;
        if (s == CQ_OK && i == 0) s = cq_backend_get_stats(r.be, &st0, true); /* op times of the timed steps only */
    }
    if (s == CQ_OK) s = cq_backend_get_stats(r.be, &st, false);
    double t_step = s == CQ_OK ? cq_bench_median(r.times, o.repeat) : 0, c_step = s == CQ_OK ? cq_bench_median(r.cpu, o.repeat) : 0;
    cq_qi21_cache_free(c);
    double t_mm = 0;
    if (s == CQ_OK) {
        what = "the reference matmul";
        s = matmul_ref(&r, T, o.repeat, &t_mm);
    }
    if (s != CQ_OK) {
        rc = cq_cli_fail("bench qi21", s, what);
        run_free(&r);
        return rc;
    }
    for (size_t i = 0; i < (size_t)T * B_CH; i++)
        if (!isfinite(r.vel[i])) {
            fprintf(stderr, "cortiq bench qi21: warning: the velocity holds non-finite values\n");
            break;
        }

    double fs = flops_step(T, B_TEXT, o.layers), fp = flops_prefill(B_TEXT, o.layers);
    double fmm = 2.0 * T * D * D * B_RATIO;
    int threads = o.m.threads > 0 ? o.m.threads : cq_default_threads();
    char label[64];
    snprintf(label, sizeof label, "step (%dx%d px, %d tokens)", o.m.size, o.m.size, T);
    if (o.gpu) {
        printf("%-30s %9s %10s %9s\n", "", "ms", "GFLOP", "TFLOP/s");
        printf("%-30s %9.2f %10.1f %9.1f\n", "prefill (18 text rows)", 1e3 * t_prefill, fp * 1e-9, fp * 1e-12 / t_prefill);
        printf("%-30s %9.2f %10.1f %9.1f\n", label, 1e3 * t_step, fs * 1e-9, fs * 1e-12 / t_step);
        printf("one MLP matmul [%d x %zu] x [%zu x %zu]^T (%s): %.3f ms, %.1f TFLOP/s; the step runs at %.0f%% of it\n", T,
               D, D * B_RATIO, D, cq_dtype_name(o.quant), 1e3 * t_mm, fmm * 1e-12 / t_mm,
               100.0 * (fs / t_step) / (fmm / t_mm));
    } else {
        printf("%-30s %9s %10s %9s %9s %10s\n", "", "wall s", "GFLOP", "GFLOP/s", "CPU s", "CPU share");
        printf("%-30s %9.3f %10.1f %9.1f %9.2f %9.0f%%\n", "prefill (18 text rows)", t_prefill, fp * 1e-9,
               fp * 1e-9 / t_prefill, c_prefill, 100.0 * c_prefill / (t_prefill * threads));
        printf("%-30s %9.3f %10.1f %9.1f %9.2f %9.0f%%\n", label, t_step, fs * 1e-9, fs * 1e-9 / t_step, c_step,
               100.0 * c_step / (t_step * threads));
        printf("one MLP matmul [%d x %zu] x [%zu x %zu]^T (%s): %.3f s, %.1f GFLOP/s; the step runs at %.0f%% of it\n", T,
               D, D * B_RATIO, D, cq_dtype_name(o.quant), t_mm, fmm * 1e-9 / t_mm, 100.0 * (fs / t_step) / (fmm / t_mm));
    }
    if (o.layers < B_LAYERS) {
        /* per-layer work dominates: everything outside the blocks is under 1% of a layer's FLOPs */
        double k = (flops_step(T, B_TEXT, B_LAYERS) / fs), kp = flops_prefill(B_TEXT, B_LAYERS) / fp;
        printf("scaled to 32 layers by FLOPs: prefill ~%.4f s (x%.2f), step ~%.4f s (x%.2f)\n", t_prefill * kp, kp,
               t_step * k, k);
    }
    if (o.gpu) {
        char b2[32], b3[32], b4[32];
        printf("device memory: peak %s in use by the backend (weights %s), %s of %s used on the device; median of %d "
               "runs after a warm-up\n",
               cq_fmt_bytes(CQ_MAX(st.mem_peak, st0.mem_peak), b1, sizeof b1), cq_fmt_bytes(st.weight_bytes, b2, sizeof b2),
               cq_fmt_bytes(st.device_total - st.device_free, b3, sizeof b3), cq_fmt_bytes(st.device_total, b4, sizeof b4),
               o.repeat);
        if (st.timed) cq_bench_print_op_classes(&st, o.repeat, "step");
    } else {
        printf("peak resident memory %.2f GiB (mapped weights included); median of %d runs after a warm-up\n",
               (double)cq_bench_peak_rss() / (1024.0 * 1024.0 * 1024.0), o.repeat);
        printf("CPU share = CPU time / (wall time x %d threads): below ~90%% the machine was busy with other work\n",
               threads);
    }
    run_free(&r);
    return 0;
}
