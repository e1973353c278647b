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
static int open_model(const bench_opts *o, const cq_zimage_config *c, cq_bench_model *bm) {
    cq_bench_pack pk = {0};
    char cfg[1024];
    cq_status s = cq_bench_zimage_weights(&pk, o->quant, c);
    if (s == CQ_OK && cq_bench_zimage_config_json(cfg, sizeof cfg, c) < 0) s = CQ_ERR_INTERNAL;
    const cq_bench_component comp = {
        .tag = "zimage", .tool = "cortiq bench zimage", .quant = o->quant, .weights = &pk,
        .blob_name = "dit.config_json", .blob = cfg,
        .arch = {"z_image", c->dim, c->ffn_hidden, c->n_layers, c->n_heads, c->n_heads, c->head_dim, "1e-05"}};
    int rc = cq_bench_model_open(bm, "bench zimage", &o->m, &comp, s);
    cq_bench_pack_free(&pk);
    return rc;
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
    bench_opts *o;
    cq_zimage *m;
    cq_zimage_cond *c;
    float *cap, *x, *out;
    int lat, n_calls;
} bench_run;

static void run_free(bench_run *r) {
    cq_free(r->cap);
    cq_free(r->x);
    cq_free(r->out);
    cq_zimage_cond_free(r->c);
    cq_zimage_free(r->m);
}

static cq_status prepare_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    cq_zimage_cond_free(r->c);
    r->c = NULL;
    return cq_zimage_prepare(r->m, r->cap, r->o->caption, r->lat, r->lat, &r->c);
}

static cq_status step_call(void *ctx, int i) {
    bench_run *r = ctx;
    return cq_zimage_step(r->m, r->c, r->x, 1.0f - (float)i / (float)r->n_calls, r->out);
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
    cq_bench_model bm;
    if ((rc = open_model(&o, &cfg, &bm)) != 0) return rc;

    const char *what = "allocating";
    const size_t ncap = (size_t)o.caption * cfg.cap_feat_dim, nx = (size_t)lay.n_img * cfg.patch_channels;
    const int warm = cq_backend_can_record(bm.be) ? 2 : 1;
    bench_run r = {.o = &o, .lat = lat, .n_calls = warm + o.steps};
    r.cap = cq_mallocn(ncap, sizeof(float));
    r.x = cq_mallocn(nx, sizeof(float));
    r.out = cq_mallocn(nx, sizeof(float));
    cq_status s = r.cap && r.x && r.out ? CQ_OK : CQ_ERR_NOMEM;
    double t0 = cq_now();
    if (s == CQ_OK) {
        what = "loading the model";
        s = cq_zimage_load(bm.cmf, "dit.", bm.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(bm.be);
    }
    double t_load = cq_now() - t0;
    uint64_t rng = 12345;
    for (size_t i = 0; s == CQ_OK && i < ncap; i++) r.cap[i] = 2.0f * cq_bench_rng_unit(&rng);
    for (size_t i = 0; s == CQ_OK && i < nx; i++) r.x[i] = 2.0f * cq_bench_rng_unit(&rng);
    if (s == CQ_OK) cq_bench_model_loaded(&bm, t_load);
    /* prepare: a warm-up (first touch of the mapped weights), then the timed runs */
    double t_prep = 0, c_prep = 0, t_step = 0, c_step = 0;
    if (s == CQ_OK) {
        what = "prepare";
        s = cq_bench_repeat(prepare_call, &r, 1, o.steps, NULL, NULL, &t_prep, &c_prep);
    }
    /* steps: the first warm-up runs op by op and the second is recorded where the backend records; the timed
     * ones replay (op times: timed steps only) */
    cq_backend_stats st, st0;
    memset(&st, 0, sizeof st);
    memset(&st0, 0, sizeof st0);
    if (s == CQ_OK) {
        what = "step";
        s = cq_bench_repeat(step_call, &r, warm, o.steps, bm.be, &st0, &t_step, &c_step);
    }
    if (s == CQ_OK) s = cq_backend_get_stats(bm.be, &st, false);
    if (s != CQ_OK) {
        rc = cq_cli_fail("bench zimage", s, what);
        run_free(&r);
        cq_bench_model_close(&bm);
        return rc;
    }
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(r.out[i])) {
            fprintf(stderr, "cortiq bench zimage: warning: the output holds non-finite values\n");
            break;
        }
    const double fs = flops_step(&cfg, &lay, o.layers), fp = flops_prepare(&cfg, &lay);
    char lp[64], ls[96];
    snprintf(lp, sizeof lp, "prepare (%d caption rows)", o.caption);
    snprintf(ls, sizeof ls, "step (%dx%d px, %d+%d rows)", o.m.size, o.m.size, lay.n_img_pad, lay.n_cap_pad);
    cq_bench_table_head(&bm, 36);
    cq_bench_table_row(&bm, 36, lp, t_prep, c_prep, fp);
    cq_bench_table_row(&bm, 36, ls, t_step, c_step, fs);
    if (o.layers < CQ_BENCH_ZI_LAYERS) {
        double k = flops_step(&cfg, &lay, CQ_BENCH_ZI_LAYERS) / fs;
        printf("scaled to 30 layers by FLOPs: step ~%.4f s (x%.2f)\n", t_step * k, k);
    }
    cq_bench_memory_lines(&bm, &st0, &st, o.steps, warm, "step");
    run_free(&r);
    cq_bench_model_close(&bm);
    return 0;
}
