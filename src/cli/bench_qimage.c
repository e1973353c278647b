/*
 * bench_qimage.c — `cortiq bench qwen_image`: the Qwen-Image (v1) denoiser,
 * QwenImageTransformer2DModel, at its real 20B shape (60 dual-stream blocks,
 * 24 heads x 128 = 3072, MLP 12288, text rows 3584 wide, RoPE axes
 * 16/56/56) with random weights.
 *
 * The weights are generated from the model's tensor table in the chosen
 * codec, written to a temporary .cmf under $TMPDIR, mapped as a real model
 * is and unlinked at once (bench_pack.h). Then the text's preparation
 * (txt_norm and txt_in, once per prompt) and the denoising step for a SIZE x
 * SIZE image ((SIZE/16)^2 image tokens beside the prompt's text rows; both
 * streams run every block) are timed: warm-up steps (the first sizes
 * nothing more, the second is recorded where the backend records), then the
 * median of --steps runs. With --cfg the step with true CFG is timed too, as
 * QwenImagePipeline runs it: the positive and the negative prompt as two
 * passes (each its own conditioning, the negative of --neg-rows rows), then
 * the combination neg + 4 (pos - neg) with each token rescaled to the
 * positive's norm (pipelines/flow_sample.h, on the host as the pipeline does
 * it). FLOPs count every matmul and both attention products (2 per
 * multiply-add) as the model runs them; element-wise work is left out.
 * --layers N builds N of the 60 blocks and scales the step to 60, saying
 * so; --heads N builds a narrower model (inner 128 N) whose numbers describe
 * that model only (a quick check of the whole path).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "codec/codec.h"
#include "models/qimage.h"
#include "ops/ops.h"
#include "pipelines/flow_sample.h"

#define B_CMD "bench qwen_image"
#define B_TEXT 64        /* text rows of the default prompt (after the template's system rows are dropped) */
#define B_MAX_TEXT 2048  /* keeps the text rows' RoPE positions inside the reference's table at 2048^2 */
#define B_CFG_SCALE 4.0  /* the pipeline's true_cfg_scale */

typedef struct bench_opts {
    cq_bench_model_opts m;
    int layers, heads, text, neg, steps;
    bool cfg;
    cq_dtype quant;
} bench_opts;

static void help(void) {
    printf("usage: cortiq bench qwen_image [--size 256|512|1024|2048] [--text-rows N] [--cfg] [--neg-rows M]\n"
           "                               [--steps N] [--layers N] [--heads N] [--quant q8_2f|q4tp|bf16]\n"
           "                               [--threads N] [--backend cpu|cuda|vulkan]\n"
           "\n"
           "Time the Qwen-Image denoiser at its real 20B shape (60 dual-stream blocks, 24 heads x 128, MLP\n"
           "12288, text rows 3584 wide) with random weights: the text's preparation (txt_norm and txt_in,\n"
           "once per prompt) and the denoising step for a SIZE x SIZE image ((SIZE/16)^2 image tokens beside\n"
           "the text rows), and with --cfg also the step with true CFG (the positive and the negative prompt\n"
           "as two passes, as QwenImagePipeline runs them, then their combination). The weights are written\n"
           "in the chosen codec to a temporary .cmf under $TMPDIR (about 20 GB for q8_2f, 11 GB for q4tp,\n"
           "41 GB for bf16; removed when the file is mapped) and mapped as a real model is. Reports the\n"
           "median of --steps runs after the warm-up, FLOP/s (matmuls and attention products, 2 FLOPs per\n"
           "multiply-add) and the peak memory.\n"
           "\n"
           "options:\n"
           "  --size N        image side in pixels: 256, 512, 1024 (default) or 2048\n"
           "  --text-rows N   the prompt's text rows (default %d; 1 .. %d)\n"
           "  --cfg           also time the step with true CFG (two passes and the combination)\n"
           "  --neg-rows M    the negative prompt's text rows with --cfg (default: as --text-rows)\n"
           "  --steps N       timed runs after the warm-up (default 3 on the CPU, 5 on a GPU)\n"
           "  --layers N      build only N of the 60 blocks and scale the step to 60 by FLOPs\n"
           "  --heads N       build N of the 24 heads (inner 128 N): a narrower model, for a quick check\n"
           "  --quant C       weight codec: q8_2f (default), q4tp or bf16\n"
           "  --threads N     worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B     cpu (default), cuda, cuda:N or vulkan; after the warm-up the steps replay what\n"
           "                  was recorded, per conditioning (CORTIQ_CUDA_PROFILE=1 times each op class instead)\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help      this text\n",
           B_TEXT, B_MAX_TEXT);
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, true, i, &o->quant);
    if (strcmp(a, "--cfg") == 0) {
        o->cfg = true;
        return 1;
    }
    if (strcmp(a, "--layers") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, CQ_BENCH_QIMAGE_LAYERS, &n)) return 2;
        o->layers = (int)n;
    } else if (strcmp(a, "--heads") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, CQ_BENCH_QIMAGE_HEADS, &n)) return 2;
        o->heads = (int)n;
    } else if (strcmp(a, "--text-rows") == 0 || strcmp(a, "--neg-rows") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, B_MAX_TEXT, &n)) return 2;
        *(a[2] == 't' ? &o->text : &o->neg) = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 100, &n)) return 2;
        o->steps = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* ---- FLOPs, as the model computes them ------------------------------------------------------------- */
/* One step on n image tokens and l text rows: the timestep embedder, both streams' modulation, img_in, then per
 * block each stream's q, k, v, out and MLP and the joint attention over all n + l rows, then norm_out and
 * proj_out. */
static double flops_step(const cq_qimage_config *c, double n, double l, int layers) {
    const double D = c->inner, M = c->mlp_hidden, r = n + l;
    double t = 2.0 * (CQ_QIMAGE_TIMESTEP_CHANNELS * D + D * D) + 2.0 * D * 2 * D;
    double block = 2.0 * 2 * D * 6 * D + 2 * r * D * D * 4 + 2 * r * D * M * 2 + 4 * r * r * D;
    return t + 2.0 * n * c->in_channels * D + layers * block + 2.0 * n * D * c->out_dim;
}

static double flops_prepare(const cq_qimage_config *c, double l) { return 2.0 * l * c->joint_dim * c->inner; }

/* ---- the run -------------------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_qimage *m;
    cq_qimage_layout lay[2]; /* positive, negative */
    cq_qimage_cond *c[2];
    const float *txt[2];
    float *pos_txt, *neg_txt, *x, *out, *neg_out;
    int n_calls, n_tok, out_dim;
} bench_run;

typedef struct prep_call {
    bench_run *r;
    int which;
} prep_call;

static cq_status prepare_call(void *ctx, int i) {
    (void)i;
    const prep_call *p = ctx;
    bench_run *r = p->r;
    cq_qimage_cond_free(r->c[p->which]);
    r->c[p->which] = NULL;
    return cq_qimage_prepare(r->m, &r->lay[p->which], r->txt[p->which], &r->c[p->which]);
}

static float sigma_of(const bench_run *r, int i) { return 1.0f - (float)i / (float)r->n_calls; }

static cq_status step_call(void *ctx, int i) {
    bench_run *r = ctx;
    return cq_qimage_step(r->m, r->c[0], r->x, sigma_of(r, i), r->out);
}

/* True CFG as the pipeline runs it: two passes, then the combination with each token renormalised. */
static cq_status cfg_step_call(void *ctx, int i) {
    bench_run *r = ctx;
    CQ_TRY(cq_qimage_step(r->m, r->c[0], r->x, sigma_of(r, i), r->out));
    CQ_TRY(cq_qimage_step(r->m, r->c[1], r->x, sigma_of(r, i), r->neg_out));
    const cq_guidance g = {.kind = CQ_GUIDANCE_CFG, .scale = B_CFG_SCALE, .norm = CQ_GUIDANCE_NORM_ROWS};
    cq_guidance_combine(&g, r->out, r->out, r->neg_out, (size_t)r->n_tok, (size_t)r->out_dim);
    return CQ_OK;
}

static void run_free(bench_run *r) {
    cq_free(r->pos_txt);
    cq_free(r->neg_txt);
    cq_free(r->x);
    cq_free(r->out);
    cq_free(r->neg_out);
    cq_qimage_cond_free(r->c[0]);
    cq_qimage_cond_free(r->c[1]);
    cq_qimage_free(r->m);
}

static int open_model(const bench_opts *o, const cq_qimage_config *c, cq_bench_model *bm) {
    cq_bench_pack pk = {0};
    char cfg[1024];
    cq_status s = cq_bench_qimage_weights(&pk, o->quant, c);
    if (s == CQ_OK && cq_bench_qimage_config_json(cfg, sizeof cfg, c) < 0) s = CQ_ERR_INTERNAL;
    const cq_bench_component comp = {
        .tag = "qimage", .tool = "cortiq " B_CMD, .quant = o->quant, .weights = &pk,
        .blob_name = "dit.config_json", .blob = cfg,
        .arch = {"qwen_image", c->inner, c->mlp_hidden, c->num_layers, c->n_heads, c->n_heads, c->head_dim, "1e-06"}};
    int rc = cq_bench_model_open(bm, B_CMD, &o->m, &comp, s);
    cq_bench_pack_free(&pk);
    return rc;
}

/* Peaks of a and b, the rest from b. */
static cq_backend_stats stats_merge(const cq_backend_stats *a, const cq_backend_stats *b) {
    cq_backend_stats m = *b;
    m.mem_peak = CQ_MAX(a->mem_peak, b->mem_peak);
    return m;
}

static float *rows_of(size_t rows, size_t cols, uint64_t *rng) {
    float *v = cq_mallocn(rows * cols, sizeof(float));
    for (size_t i = 0; v && i < rows * cols; i++) v[i] = 2.0f * cq_bench_rng_unit(rng);
    return v;
}

int cq_bench_qimage(int argc, char **argv) {
    bench_opts o = {.m = {.size = 1024, .backend = "cpu"}, .layers = CQ_BENCH_QIMAGE_LAYERS,
                    .heads = CQ_BENCH_QIMAGE_HEADS, .text = B_TEXT, .quant = CQ_DTYPE_Q8_2F};
    bool done = false;
    int rc = cq_bench_model_args(B_CMD, argc, argv, &o.m, help, opt, &o, &done);
    if (rc || done) return rc;
    if (o.neg && !o.cfg) return cq_cli_usage_error(B_CMD, "--neg-rows needs --cfg");
    if (!o.neg) o.neg = o.text;
    const bool gpu = strncmp(o.m.backend, "cpu", 3) != 0; /* a device: more runs by default */
    if (o.steps == 0) o.steps = gpu ? 5 : 3;
    cq_qimage_config cfg;
    cq_bench_qimage_config(&cfg, o.heads, o.layers);
    const int side = o.m.size / 16;
    const int32_t shapes[1][3] = {{1, side, side}};
    bench_run r = {.lay = {{1, shapes, o.text, NULL}, {1, shapes, o.neg, NULL}}, .out_dim = cfg.out_dim};
    for (int k = 0; k < (o.cfg ? 2 : 1); k++)
        if (cq_qimage_layout_sizes(&r.lay[k], &r.n_tok, NULL) != CQ_OK)
            return cq_cli_fail(B_CMD, CQ_ERR_SHAPE, "sizing the sequence");

    printf("Qwen-Image denoiser, %s shape (%d block%s%s, %d heads x %d = %d, MLP %d, text rows %d wide), random %s "
           "weights\n",
           o.heads == CQ_BENCH_QIMAGE_HEADS ? "20B" : "narrowed", o.layers, o.layers == 1 ? "" : "s",
           o.layers < CQ_BENCH_QIMAGE_LAYERS ? " of 60 built" : "", cfg.n_heads, cfg.head_dim, cfg.inner,
           cfg.mlp_hidden, cfg.joint_dim, cq_dtype_name(o.quant));
    fflush(stdout);
    cq_bench_model bm;
    if ((rc = open_model(&o, &cfg, &bm)) != 0) return rc;

    const char *what = "allocating";
    const int warm = cq_backend_can_record(bm.be) ? 2 : 1;
    r.n_calls = warm + o.steps;
    uint64_t rng = 12345;
    r.pos_txt = rows_of((size_t)o.text, (size_t)cfg.joint_dim, &rng);
    r.neg_txt = o.cfg ? rows_of((size_t)o.neg, (size_t)cfg.joint_dim, &rng) : NULL;
    r.x = rows_of((size_t)r.n_tok, (size_t)cfg.in_channels, &rng);
    r.out = cq_mallocn((size_t)r.n_tok * (size_t)cfg.out_dim, sizeof(float));
    r.neg_out = o.cfg ? cq_mallocn((size_t)r.n_tok * (size_t)cfg.out_dim, sizeof(float)) : NULL;
    r.txt[0] = r.pos_txt;
    r.txt[1] = r.neg_txt;
    cq_status s = r.pos_txt && r.x && r.out && (!o.cfg || (r.neg_txt && r.neg_out)) ? CQ_OK : CQ_ERR_NOMEM;
    double t0 = cq_now();
    if (s == CQ_OK) {
        what = "loading the model";
        s = cq_qimage_load(bm.cmf, "dit.", bm.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(bm.be);
    }
    if (s == CQ_OK) cq_bench_model_loaded(&bm, cq_now() - t0);

    /* each prepare: a warm-up (the first touches the mapped weights), then the timed runs */
    double t_prep[2] = {0}, c_prep[2] = {0}, t_step = 0, c_step = 0, t_cfg = 0, c_cfg = 0;
    prep_call pc[2] = {{&r, 0}, {&r, 1}};
    for (int k = 0; s == CQ_OK && k < (o.cfg ? 2 : 1); k++) {
        what = k ? "the negative prompt's prepare" : "prepare";
        s = cq_bench_repeat(prepare_call, &pc[k], 1, o.steps, NULL, NULL, &t_prep[k], &c_prep[k]);
    }
    /* steps: the first warm-up runs op by op, the second is recorded where the backend records (each
     * conditioning its own recording); the timed ones replay. Op times: the last measurement's timed runs. */
    cq_backend_stats st0, st, cst0, cst;
    memset(&st0, 0, sizeof st0);
    memset(&st, 0, sizeof st);
    memset(&cst0, 0, sizeof cst0);
    memset(&cst, 0, sizeof cst);
    if (s == CQ_OK) {
        what = "step";
        s = cq_bench_repeat(step_call, &r, warm, o.steps, bm.be, &st0, &t_step, &c_step);
        if (s == CQ_OK) s = cq_backend_get_stats(bm.be, &st, false);
    }
    if (s == CQ_OK && o.cfg) {
        what = "the step with true CFG";
        s = cq_bench_repeat(cfg_step_call, &r, warm, o.steps, bm.be, &cst0, &t_cfg, &c_cfg);
        if (s == CQ_OK) s = cq_backend_get_stats(bm.be, &cst, false);
    }
    if (s != CQ_OK) {
        rc = cq_cli_fail(B_CMD, s, what);
        run_free(&r);
        cq_bench_model_close(&bm);
        return rc;
    }
    for (size_t i = 0; i < (size_t)r.n_tok * (size_t)cfg.out_dim; i++)
        if (!isfinite(r.out[i])) {
            fprintf(stderr, "cortiq " B_CMD ": warning: the output holds non-finite values\n");
            break;
        }

    const double fs = flops_step(&cfg, r.n_tok, o.text, o.layers);
    const double fc = fs + flops_step(&cfg, r.n_tok, o.neg, o.layers);
    char l[4][96];
    snprintf(l[0], sizeof l[0], "prepare (%d text rows)", o.text);
    snprintf(l[1], sizeof l[1], "prepare, negative (%d text rows)", o.neg);
    snprintf(l[2], sizeof l[2], "step (%dx%d px, %d+%d rows)", o.m.size, o.m.size, r.n_tok, o.text);
    snprintf(l[3], sizeof l[3], "step with true CFG (2 passes, +%d rows)", o.neg);
    cq_bench_table_head(&bm, 40);
    cq_bench_table_row(&bm, 40, l[0], t_prep[0], c_prep[0], flops_prepare(&cfg, o.text));
    if (o.cfg) cq_bench_table_row(&bm, 40, l[1], t_prep[1], c_prep[1], flops_prepare(&cfg, o.neg));
    cq_bench_table_row(&bm, 40, l[2], t_step, c_step, fs);
    if (o.cfg) cq_bench_table_row(&bm, 40, l[3], t_cfg, c_cfg, fc);
    if (o.layers < CQ_BENCH_QIMAGE_LAYERS) {
        /* the blocks carry all but a fraction of a percent of the step */
        double k = flops_step(&cfg, r.n_tok, o.text, CQ_BENCH_QIMAGE_LAYERS) / fs;
        printf("scaled to 60 blocks by FLOPs: step ~%.4f s (x%.2f)", t_step * k, k);
        if (o.cfg) {
            double kc = (flops_step(&cfg, r.n_tok, o.text, CQ_BENCH_QIMAGE_LAYERS) +
                         flops_step(&cfg, r.n_tok, o.neg, CQ_BENCH_QIMAGE_LAYERS)) / fc;
            printf(", with true CFG ~%.4f s", t_cfg * kc);
        }
        printf("\n");
    }
    if (o.cfg) {
        const cq_backend_stats all0 = stats_merge(&st0, &cst0), all = stats_merge(&st, &cst);
        cq_bench_memory_lines(&bm, &all0, &all, o.steps, warm, "CFG step");
    } else {
        cq_bench_memory_lines(&bm, &st0, &st, o.steps, warm, "step");
    }
    run_free(&r);
    cq_bench_model_close(&bm);
    return 0;
}
