/*
 * bench_ltx2.c — `cortiq bench ltx25`: LTX-2.5's audio-video denoiser,
 * LTX2VideoTransformer3DModel, at its released 22B shape (48 blocks; video
 * 32 heads x 128 = 4096, FF 16384 without bias; audio 32 heads x 64 = 2048,
 * FF 8192 with bias; gated attentions, the 9-row adaLN with the prompt's
 * timestep-dependent modulation) with random weights.
 *
 * The weights come from the model's tensor table in the chosen codec,
 * written to a temporary .cmf under $TMPDIR, mapped as a real model is and
 * unlinked at once (bench_pack.h). The geometry is the pipeline's: W x H
 * pixels and F frames (8k + 1) give a latent grid of (F - 1) / 8 + 1 frames
 * of H/32 x W/32 video tokens, round(F / fps x 25) audio tokens, and both
 * prompts are the connectors' 1024 rows (the tokenizer pads to 1024). Timed:
 * the prepare (prompt rows, RoPE tables; once per prompt and grid) and the
 * denoising step, both streams through every block, after warm-ups (the
 * first sizes what the runs of timesteps need, the second is recorded where
 * the backend records), the median of --steps runs. FLOPs count every matmul
 * and both attention products (2 per multiply-add) as the model runs them;
 * the element-wise work and the adaLN MLPs are left out. --layers N builds N
 * of the 48 blocks and scales the step to 48 by FLOPs, saying so.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "models/ltx2.h"
#include "ops/ops.h"

#define B_CMD "bench ltx25"
#define B_TEXT 1024 /* the prompt's rows in each stream: the tokenizer pads to 1024, the connectors keep them */
#define B_MAX_FRAMES 1025

typedef struct bench_opts {
    cq_bench_model_opts m;
    int width, height, frames, text, steps, layers;
    double fps;
    cq_dtype quant;
} bench_opts;

static void help(void) {
    printf("usage: cortiq bench ltx25 [--width W] [--height H] [--frames F] [--fps R] [--text-rows N]\n"
           "                          [--steps N] [--layers N] [--quant q8_2f|q4tp|bf16] [--threads N]\n"
           "                          [--backend cpu|cuda|vulkan]\n"
           "\n"
           "Time LTX-2.5's audio-video denoiser at its released 22B shape (48 blocks; video 32 heads x 128,\n"
           "FF 16384; audio 32 heads x 64, FF 8192) with random weights: the prepare (the prompts' rows and\n"
           "the RoPE tables, once per prompt and grid) and the denoising step for F frames of W x H pixels\n"
           "((F-1)/8+1 latent frames of H/32 x W/32 video tokens, round(F/fps x 25) audio tokens, each\n"
           "prompt %d rows as the pipeline pads it). The weights are written in the chosen codec to a\n"
           "temporary .cmf under $TMPDIR (about 23 GB for q8_2f, 13 GB for q4tp, 44 GB for bf16; removed\n"
           "when the file is mapped) and mapped as a real model is. Reports the median of --steps runs\n"
           "after the warm-up, FLOP/s (matmuls and attention products, 2 FLOPs per multiply-add) and the\n"
           "peak memory.\n"
           "\n"
           "options:\n"
           "  --width W       video width in pixels, a multiple of 32 (default 768)\n"
           "  --height H      video height in pixels, a multiple of 32 (default 512)\n"
           "  --frames F      video frames, 8k + 1 (default 121)\n"
           "  --fps R         frame rate (default 24): the audio's length and the time positions\n"
           "  --text-rows N   each prompt's rows (default %d; 1 .. 4096)\n"
           "  --steps N       timed runs after the warm-up (default 3 on the CPU, 5 on a GPU)\n"
           "  --layers N      build only N of the 48 blocks and scale the step to 48 by FLOPs\n"
           "  --quant C       weight codec: q8_2f (default), q4tp or bf16\n"
           "  --threads N     worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B     cpu (default), cuda, cuda:N or vulkan\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help      this text\n",
           B_TEXT, B_TEXT);
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, true, i, &o->quant);
    const int r = cq_bench_clip_arg(cmd, a, v, B_MAX_FRAMES, i, &o->frames, &o->fps);
    if (r) return r;
    if (strcmp(a, "--width") == 0 || strcmp(a, "--height") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 32, 8192, &n)) return 2;
        if (n % 32) return cq_cli_usage_error(cmd, "%s must be a multiple of 32 (the VAE's factor), got %ld", a, n);
        *(a[2] == 'w' ? &o->width : &o->height) = (int)n;
    } else if (strcmp(a, "--text-rows") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 4096, &n)) return 2;
        o->text = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 100, &n)) return 2;
        o->steps = (int)n;
    } else if (strcmp(a, "--layers") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, CQ_BENCH_LTX2_LAYERS, &n)) return 2;
        o->layers = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* ---- FLOPs, as the model computes them -------------------------------------------------------------- */
/* One step on nv video and na audio tokens with lv / la prompt rows: proj_in, then per block each stream's
 * self-attention (q, k, v, out and both products), prompt attention (q, out on the tokens, k, v on the prompt
 * rows), the audio->video attention (queries from video, keys and values from audio, inner the audio width)
 * and video->audio (the other way round), the per-head gates, and the two FFs; then proj_out. */
static double flops_step(const cq_ltx2_config *c, double nv, double na, double lv, double la, int layers) {
    const double Dv = c->dim, Da = c->audio_dim, Hv = c->heads, Ha = c->audio_heads;
    double v = 4 * nv * Dv * Dv + 2 * nv * nv * Dv;                  /* attn1 */
    v += 2 * nv * Dv * Dv + 2 * lv * Dv * Dv + 2 * nv * lv * Dv;     /* attn2 */
    v += nv * Dv * Da + 2 * na * Da * Da + nv * Da * Dv + 2 * nv * na * Da; /* audio -> video */
    v += 8 * nv * Dv * Dv;                                           /* FF */
    double a = 4 * na * Da * Da + 2 * na * na * Da;                  /* audio_attn1 */
    a += 2 * na * Da * Da + 2 * la * Da * Da + 2 * na * la * Da;     /* audio_attn2 */
    a += na * Da * Da + 2 * nv * Dv * Da + na * Da * Da + 2 * na * nv * Da; /* video -> audio */
    a += 8 * na * Da * Da;                                           /* audio FF */
    double g = 0;
    if (c->gated_attn) g += 3 * nv * Dv * Hv;       /* attn1, attn2, a2v on the video tokens */
    if (c->audio_gated_attn) g += 3 * na * Da * Ha; /* audio_attn1, audio_attn2, v2a */
    const double io = nv * (c->in_channels + c->out_channels) * Dv + na * (c->audio_in_channels + c->audio_out_channels) * Da;
    return 2.0 * (layers * (v + a + g) + io);
}

/* ---- the run -------------------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_ltx2 *m;
    cq_ltx2_cond *c;
    cq_ltx2_inputs in;
    float *ctx, *actx, *x, *ax, *out, *aout;
    float t;
    int n_calls;
} bench_run;

static cq_status prepare_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    cq_ltx2_cond_free(r->c);
    r->c = NULL;
    return cq_ltx2_prepare(r->m, &r->in, &r->c);
}

/* Each call its own sigma, as a sampler's steps have (one run of timesteps per stream). */
static cq_status step_call(void *ctx, int i) {
    bench_run *r = ctx;
    const float sigma = 1.0f - (float)i / (float)(r->n_calls + 1);
    r->t = 1000.0f * sigma;
    r->in.sigma = r->in.audio_sigma = r->t;
    return cq_ltx2_step(r->c, &r->in, r->out, r->aout);
}

static void run_free(bench_run *r) {
    cq_ltx2_cond_free(r->c);
    cq_ltx2_free(r->m);
    cq_free(r->ctx);
    cq_free(r->actx);
    cq_free(r->x);
    cq_free(r->ax);
    cq_free(r->out);
    cq_free(r->aout);
}

static float *rows_of(size_t rows, size_t cols, uint64_t *rng) {
    float *v = cq_mallocn(rows * cols, sizeof(float));
    for (size_t i = 0; v && i < rows * cols; i++) v[i] = 2.0f * cq_bench_rng_unit(rng);
    return v;
}

static bool all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

int cq_bench_ltx2(int argc, char **argv) {
    bench_opts o = {.m = {.backend = "cpu"}, .width = 768, .height = 512, .frames = 121, .fps = 24.0,
                    .text = B_TEXT, .layers = CQ_BENCH_LTX2_LAYERS, .quant = CQ_DTYPE_Q8_2F};
    bool done = false;
    int rc = cq_bench_model_args(B_CMD, argc, argv, &o.m, help, opt, &o, &done);
    if (rc || done) return rc;
    if (o.m.size) return cq_cli_usage_error(B_CMD, "--size is not an option here: give --width and --height");
    const bool gpu = strncmp(o.m.backend, "cpu", 3) != 0;
    if (o.steps == 0) o.steps = gpu ? 5 : 3;

    char cfg_json[4096];
    cq_ltx2_config cfg;
    if (cq_bench_ltx2_config_json(cfg_json, sizeof cfg_json, o.layers) < 0)
        return cq_cli_fail(B_CMD, CQ_ERR_INTERNAL, "writing the config");
    cq_status s = cq_ltx2_parse_config_json(cfg_json, &cfg);
    if (s != CQ_OK) return cq_cli_fail(B_CMD, s, "reading the config");
    const int lf = (o.frames - 1) / 8 + 1, lh = o.height / 32, lw = o.width / 32;
    const int nv = lf * lh * lw, na = (int)lrint((double)o.frames / o.fps * 25.0);
    if (na < 1) return cq_cli_usage_error(B_CMD, "%d frames at %g fps give no audio token", o.frames, o.fps);

    printf("LTX-2.5 audio-video denoiser, 22B shape (%d block%s%s; video %d heads x %d = %d, audio %d x %d = %d), "
           "random %s weights\n",
           o.layers, o.layers == 1 ? "" : "s", o.layers < CQ_BENCH_LTX2_LAYERS ? " of 48 built" : "", cfg.heads,
           cfg.head_dim, cfg.dim, cfg.audio_heads, cfg.audio_head_dim, cfg.audio_dim, cq_dtype_name(o.quant));
    printf("%dx%d px, %d frames at %g fps: %d latent frames of %dx%d = %d video tokens, %d audio tokens, %d prompt "
           "rows per stream\n",
           o.width, o.height, o.frames, o.fps, lf, lw, lh, nv, na, o.text);
    fflush(stdout);

    cq_bench_pack pk = {0};
    s = cq_bench_ltx2_weights(&pk, o.quant, &cfg);
    const cq_bench_component comp = {
        .tag = "ltx2", .tool = "cortiq " B_CMD, .quant = o.quant, .weights = &pk, .blob_name = "dit.config_json",
        .blob = cfg_json,
        .arch = {"ltx2", cfg.dim, 4 * cfg.dim, cfg.n_layers, cfg.heads, cfg.heads, cfg.head_dim, "1e-06"}};
    cq_bench_model bm;
    rc = cq_bench_model_open(&bm, B_CMD, &o.m, &comp, s);
    cq_bench_pack_free(&pk);
    if (rc) return rc;

    uint64_t rng = 12345;
    bench_run r = {0};
    const int warm = cq_backend_can_record(bm.be) ? 2 : 1;
    r.n_calls = warm + o.steps;
    r.ctx = rows_of((size_t)o.text, (size_t)cfg.dim, &rng);
    r.actx = rows_of((size_t)o.text, (size_t)cfg.audio_dim, &rng);
    r.x = rows_of((size_t)nv, (size_t)cfg.in_channels, &rng);
    r.ax = rows_of((size_t)na, (size_t)cfg.audio_in_channels, &rng);
    r.out = cq_mallocn((size_t)nv, (size_t)cfg.out_channels * sizeof(float));
    r.aout = cq_mallocn((size_t)na, (size_t)cfg.audio_out_channels * sizeof(float));
    r.t = 1000.0f;
    r.in = (cq_ltx2_inputs){.video = r.x, .frames = lf, .height = lh, .width = lw, .fps = o.fps, .audio = r.ax,
                            .audio_frames = na, .ctx = r.ctx, .n_ctx = o.text, .audio_ctx = r.actx,
                            .n_audio_ctx = o.text, .timestep = &r.t, .n_timestep = 1, .audio_timestep = &r.t,
                            .n_audio_timestep = 1, .sigma = r.t, .audio_sigma = r.t, .use_cross_timestep = true};
    const char *what = "allocating";
    s = r.ctx && r.actx && r.x && r.ax && r.out && r.aout ? CQ_OK : CQ_ERR_NOMEM;
    double t0 = cq_now();
    if (s == CQ_OK) {
        what = "loading the model";
        s = cq_ltx2_load(bm.cmf, "dit.", bm.be, &r.m);
        if (s == CQ_OK) s = cq_backend_sync(bm.be);
    }
    if (s == CQ_OK) cq_bench_model_loaded(&bm, cq_now() - t0);

    double t_prep = 0, c_prep = 0, t_step = 0, c_step = 0;
    cq_backend_stats st0, st;
    memset(&st0, 0, sizeof st0);
    memset(&st, 0, sizeof st);
    if (s == CQ_OK) {
        what = "prepare";
        s = cq_bench_repeat(prepare_call, &r, 1, o.steps, NULL, NULL, &t_prep, &c_prep);
    }
    if (s == CQ_OK) {
        what = "step";
        s = cq_bench_repeat(step_call, &r, warm, o.steps, bm.be, &st0, &t_step, &c_step);
        if (s == CQ_OK) s = cq_backend_get_stats(bm.be, &st, false);
    }
    if (s != CQ_OK) {
        rc = cq_cli_fail(B_CMD, s, what);
        run_free(&r);
        cq_bench_model_close(&bm);
        return rc;
    }
    if (!all_finite(r.out, (size_t)nv * cfg.out_channels) || !all_finite(r.aout, (size_t)na * cfg.audio_out_channels))
        fprintf(stderr, "cortiq " B_CMD ": warning: the output holds non-finite values\n");

    const double fs = flops_step(&cfg, nv, na, o.text, o.text, o.layers);
    char l[2][96];
    snprintf(l[0], sizeof l[0], "prepare (%d + %d prompt rows)", o.text, o.text);
    snprintf(l[1], sizeof l[1], "step (%d video + %d audio tokens)", nv, na);
    cq_bench_table_head(&bm, 40);
    cq_bench_table_row(&bm, 40, l[0], t_prep, c_prep, 0);
    cq_bench_table_row(&bm, 40, l[1], t_step, c_step, fs);
    if (o.layers < CQ_BENCH_LTX2_LAYERS) {
        const double k = flops_step(&cfg, nv, na, o.text, o.text, CQ_BENCH_LTX2_LAYERS) / fs;
        printf("scaled to 48 blocks by FLOPs: step ~%.4f s (x%.2f)\n", t_step * k, k);
    }
    cq_bench_memory_lines(&bm, &st0, &st, o.steps, warm, "step");
    run_free(&r);
    cq_bench_model_close(&bm);
    return 0;
}
