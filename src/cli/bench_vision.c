/*
 * bench_vision.c — `cortiq bench vision`: the vision tower of Qwen-Image's
 * Edit pipelines, Qwen2.5-VL-7B's (transformers'
 * Qwen2_5_VisionTransformerPretrainedModel: 32 blocks, hidden 1280 = 16
 * heads x 80, MLP 3420, window attention over 112 px windows with full
 * attention in blocks 7, 15, 23 and 31, the 2x2 merger to 3584) with random
 * weights, on one condition picture of SIZE x SIZE pixels.
 *
 * The picture (random RGB) goes through the Qwen2-VL image processor as
 * the pipelines call it (image/qwen_image_proc.h: smart_resize to multiples
 * of 28 within the class's pixel limits, the antialiased bicubic resize,
 * the normalisation and the patch rows), which is timed on its own; then the
 * tower's forward on those rows (window permutation, patch embedding, the
 * blocks, the merger, the rows put back in order, host buffers in and out)
 * is timed: a warm-up, then the median of --repeat runs. FLOPs count every
 * matmul and both attention products (2 per multiply-add, each window's
 * attention over its own rows). --layers N builds the first N of the 32
 * blocks (full attention where the released indices fall among them) and
 * scales the forward to 32 by FLOPs, saying so.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "codec/codec.h"
#include "image/qwen_image_proc.h"
#include "models/qwen25vl_vision.h"
#include "ops/ops.h"

#define B_CMD "bench vision"

typedef struct bench_opts {
    cq_bench_model_opts m;
    int layers, repeat;
    cq_dtype quant;
} bench_opts;

static void help(void) {
    printf("usage: cortiq bench vision [--size N] [--model qwen25vl] [--layers N] [--repeat N]\n"
           "                           [--quant q8_2f|bf16] [--threads N] [--backend cpu|cuda|vulkan]\n"
           "\n"
           "Time the Qwen2.5-VL-7B vision tower (32 blocks, hidden 1280 = 16 heads x 80, MLP 3420, 112 px\n"
           "windows, full attention in blocks 7/15/23/31, merger to 3584), the one Qwen-Image's Edit\n"
           "pipelines run on each condition picture, with random weights, on one SIZE x SIZE picture: the\n"
           "Qwen2-VL image processor (smart_resize to multiples of 28 within 3136 .. 1003520 pixels, the\n"
           "bicubic resize, the normalisation, the patch rows) and the tower's forward on its rows. The\n"
           "weights are written in the chosen codec to a temporary .cmf under $TMPDIR (about 0.7 GB for\n"
           "q8_2f, 1.3 GB for bf16; removed when the file is mapped) and mapped as a real model is. Reports\n"
           "the median of --repeat runs after a warm-up, FLOP/s (matmuls and attention products, 2 FLOPs\n"
           "per multiply-add) and the peak memory. A square picture of the Edit pipeline reaches the tower\n"
           "at --size 1024 (980 x 980 after smart_resize), one of Edit-Plus (2509, 2511) at --size 384.\n"
           "\n"
           "options:\n"
           "  --size N      the picture's side in pixels, 28 .. 4096 (default 1024)\n"
           "  --model M     the tower: qwen25vl (the only one so far)\n"
           "  --layers N    build only the first N of the 32 blocks and scale the forward to 32 by FLOPs\n"
           "  --repeat N    timed runs after the warm-up (default 3 on the CPU, 5 on a GPU)\n"
           "  --quant C     weight codec of the matrices: q8_2f (default) or bf16 (q4tp cannot hold the\n"
           "                MLP's 3420 input columns)\n"
           "  --threads N   worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B   cpu (default), cuda, cuda:N or vulkan (with cuda, CORTIQ_CUDA_PROFILE=1 adds the\n"
           "                device time per op class)\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help    this text\n");
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) {
        if (v && strcmp(v, "q4tp") == 0)
            return cq_cli_usage_error(cmd, "--quant q4tp cannot hold the MLP's down_proj (3420 columns, not a "
                                      "multiple of 32): use q8_2f or bf16");
        return cq_bench_quant_arg(cmd, v, true, i, &o->quant);
    }
    if (strcmp(a, "--model") == 0) {
        if (!v || strcmp(v, "qwen25vl") != 0) return cq_cli_usage_error(cmd, "--model must be qwen25vl");
    } else if (strcmp(a, "--layers") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, CQ_BENCH_VISION_DEPTH, &n)) return 2;
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

/* ---- FLOPs, as the model computes them ------------------------------------------------------------- */
/* The forward on n patch rows: the patch embedding, per block qkv, proj and the SwiGLU MLP and the attention
 * within each segment (seg2: the sum of the squared window lengths, frame2 of the frames'), the merger. */
static double flops_forward(const cq_qwen25vl_vision_config *c, double n, double seg2, double frame2, int layers) {
    const double D = c->hidden, I = c->intermediate, U = (double)c->merge * c->merge;
    double f = 2.0 * n * cq_qwen25vl_vision_patch_dim(c) * D;
    for (int l = 0; l < layers; l++) {
        bool full = false;
        for (int k = 0; k < c->n_full; k++) full |= c->full[k] == l;
        f += 2 * n * D * 3 * D + 2 * n * D * D + 2 * n * D * I * 3 + 4 * D * (full ? frame2 : seg2);
    }
    return f + 2.0 * (n / U) * (U * D) * (U * D) + 2.0 * (n / U) * (U * D) * c->out_hidden;
}

/* ---- the run -------------------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_qwen25vl_vision *m;
    cq_qwen_vl_proc proc;
    cq_qwen_vl_image img;
    uint8_t *rgb;
    int side;
    int32_t grid[1][3];
    float *out;
} bench_run;

static cq_status preprocess_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    cq_qwen_vl_image_free(&r->img);
    return cq_qwen_vl_preprocess(&r->proc, r->rgb, r->side, r->side, &r->img);
}

static cq_status forward_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    const cq_qwen25vl_vision_outputs out = {.out = r->out};
    return cq_qwen25vl_vision_forward(r->m, r->img.pixel_values, r->img.n_patches, (const int32_t(*)[3])r->grid, 1,
                                      &out);
}

static void run_free(bench_run *r) {
    cq_qwen_vl_image_free(&r->img);
    cq_free(r->rgb);
    cq_free(r->out);
    cq_qwen25vl_vision_free(r->m);
}

static int open_model(const bench_opts *o, const cq_qwen25vl_vision_config *c, cq_bench_model *bm) {
    cq_bench_pack pk = {0};
    char cfg[1024];
    cq_status s = cq_bench_vision_weights(&pk, o->quant, c);
    if (s == CQ_OK && cq_bench_vision_config_json(cfg, sizeof cfg, c) < 0) s = CQ_ERR_INTERNAL;
    const cq_bench_component comp = {
        .tag = "vision", .tool = "cortiq " B_CMD, .quant = o->quant, .weights = &pk,
        .blob_name = "te.config_json", .blob = cfg,
        .arch = {"qwen25vl_vision", c->hidden, c->intermediate, c->depth, c->n_heads, c->n_heads, c->head_dim,
                 "1e-06"}};
    int rc = cq_bench_model_open(bm, B_CMD, &o->m, &comp, s);
    cq_bench_pack_free(&pk);
    return rc;
}

/* The attention's segments of the grid: the sums of the squared window lengths and frame lengths (rows). */
static cq_status segments(const cq_qwen25vl_vision_config *c, const int32_t (*grid)[3], int64_t rows, int *n_win,
                          double *seg2, double *frame2) {
    const int64_t units = rows / ((int64_t)c->merge * c->merge);
    int32_t *idx = cq_mallocn((size_t)units, sizeof(int32_t)), *cu = cq_mallocn((size_t)units + 1, sizeof(int32_t));
    cq_status s = idx && cu ? cq_qwen25vl_vision_window_index(c, grid, 1, idx, cu, n_win) : CQ_ERR_NOMEM;
    *seg2 = 0;
    for (int w = 0; s == CQ_OK && w < *n_win; w++) *seg2 += (double)(cu[w + 1] - cu[w]) * (cu[w + 1] - cu[w]);
    *frame2 = (double)grid[0][0] * ((double)grid[0][1] * grid[0][2]) * ((double)grid[0][1] * grid[0][2]);
    cq_free(idx);
    cq_free(cu);
    return s;
}

int cq_bench_vision(int argc, char **argv) {
    bench_opts o = {.m = {.size = 1024, .any_size = true, .backend = "cpu"}, .layers = CQ_BENCH_VISION_DEPTH,
                    .quant = CQ_DTYPE_Q8_2F};
    bool done = false;
    int rc = cq_bench_model_args(B_CMD, argc, argv, &o.m, help, opt, &o, &done);
    if (rc || done) return rc;
    const bool gpu = strncmp(o.m.backend, "cpu", 3) != 0; /* a device: more runs by default */
    if (o.repeat == 0) o.repeat = gpu ? 5 : 3;
    cq_qwen25vl_vision_config cfg;
    cq_bench_vision_config(&cfg, o.layers);
    bench_run r = {.side = o.m.size};
    cq_qwen_vl_proc_defaults(&r.proc);
    int rh, rw;
    if (cq_qwen_smart_resize(r.side, r.side, r.proc.patch_size * r.proc.merge_size, r.proc.min_pixels,
                             r.proc.max_pixels, &rh, &rw) != CQ_OK)
        return cq_cli_fail(B_CMD, CQ_ERR_SHAPE, "sizing the picture");
    r.grid[0][0] = 1;
    r.grid[0][1] = rh / r.proc.patch_size;
    r.grid[0][2] = rw / r.proc.patch_size;
    const int64_t rows = (int64_t)r.grid[0][1] * r.grid[0][2], tokens = rows / 4;
    int n_win = 0;
    double seg2 = 0, frame2 = 0;
    if (segments(&cfg, (const int32_t(*)[3])r.grid, rows, &n_win, &seg2, &frame2) != CQ_OK)
        return cq_cli_fail(B_CMD, CQ_ERR_SHAPE, "sizing the windows");

    printf("Qwen2.5-VL vision tower, 7B-VL shape (%d block%s%s, hidden %d = %d heads x %d, MLP %d, out %d), random %s "
           "weights\n",
           o.layers, o.layers == 1 ? "" : "s", o.layers < CQ_BENCH_VISION_DEPTH ? " of 32 built" : "", cfg.hidden,
           cfg.n_heads, cfg.head_dim, cfg.intermediate, cfg.out_hidden, cq_dtype_name(o.quant));
    printf("picture %dx%d -> smart_resize %dx%d: grid 1 x %d x %d, %lld patch rows in %d windows, %lld tokens out\n",
           r.side, r.side, rw, rh, r.grid[0][1], r.grid[0][2], (long long)rows, n_win, (long long)tokens);
    fflush(stdout);
    cq_bench_model bm;
    if ((rc = open_model(&o, &cfg, &bm)) != 0) return rc;

    const char *what = "allocating";
    r.rgb = cq_mallocn((size_t)r.side * (size_t)r.side, 3);
    r.out = cq_mallocn((size_t)tokens * (size_t)cfg.out_hidden, sizeof(float));
    cq_status s = r.rgb && r.out ? CQ_OK : CQ_ERR_NOMEM;
    uint64_t rng = 12345;
    for (size_t i = 0; s == CQ_OK && i < (size_t)r.side * (size_t)r.side * 3; i++)
        r.rgb[i] = (uint8_t)(256.0f * (cq_bench_rng_unit(&rng) + 0.5f));
    double t0 = cq_now();
    if (s == CQ_OK) {
        what = "loading the model";
        s = cq_qwen25vl_vision_load(bm.cmf, "te.", bm.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(bm.be);
    }
    if (s == CQ_OK) cq_bench_model_loaded(&bm, cq_now() - t0);
    double t_proc = 0, c_proc = 0, t_fwd = 0, c_fwd = 0;
    if (s == CQ_OK) {
        what = "the image processor";
        s = cq_bench_repeat(preprocess_call, &r, 1, o.repeat, NULL, NULL, &t_proc, &c_proc);
    }
    if (s == CQ_OK && r.img.n_patches != rows) s = cq_fail(CQ_ERR_INTERNAL, "the processor's grid differs");
    cq_backend_stats st0, st;
    memset(&st0, 0, sizeof st0);
    memset(&st, 0, sizeof st);
    if (s == CQ_OK) {
        what = "forward";
        s = cq_bench_repeat(forward_call, &r, 1, o.repeat, bm.be, &st0, &t_fwd, &c_fwd);
        if (s == CQ_OK) s = cq_backend_get_stats(bm.be, &st, false);
    }
    if (s != CQ_OK) {
        rc = cq_cli_fail(B_CMD, s, what);
        run_free(&r);
        cq_bench_model_close(&bm);
        return rc;
    }
    for (size_t i = 0; i < (size_t)tokens * (size_t)cfg.out_hidden; i++)
        if (!isfinite(r.out[i])) {
            fprintf(stderr, "cortiq " B_CMD ": warning: the output holds non-finite values\n");
            break;
        }
    const double ff = flops_forward(&cfg, (double)rows, seg2, frame2, o.layers);
    char lp[96], lf[96];
    snprintf(lp, sizeof lp, "processor (%dx%d -> %dx%d)", r.side, r.side, rw, rh);
    snprintf(lf, sizeof lf, "forward (%lld rows -> %lld tokens)", (long long)rows, (long long)tokens);
    cq_bench_table_head(&bm, 40);
    cq_bench_table_row(&bm, 40, lp, t_proc, c_proc, 0);
    cq_bench_table_row(&bm, 40, lf, t_fwd, c_fwd, ff);
    if (o.layers < CQ_BENCH_VISION_DEPTH) {
        cq_qwen25vl_vision_config full;
        cq_bench_vision_config(&full, CQ_BENCH_VISION_DEPTH);
        double k = flops_forward(&full, (double)rows, seg2, frame2, CQ_BENCH_VISION_DEPTH) / ff;
        printf("scaled to 32 blocks by FLOPs: forward ~%.4f s (x%.2f)\n", t_fwd * k, k);
    }
    cq_bench_memory_lines(&bm, &st0, &st, o.repeat, 1, "forward");
    run_free(&r);
    cq_bench_model_close(&bm);
    return 0;
}
