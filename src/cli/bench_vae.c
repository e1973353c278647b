/*
 * bench_vae.c — `cortiq bench vae`: a VAE at its released configuration
 * with random weights (f16 kernels as `cortiq convert` stores them),
 * decoding random latents into an image of the chosen size (and, with
 * --encode, encoding an image back): the median of --repeat runs after a
 * warm-up, on any backend.
 *  - --model qi21 (the default): the Qwen-Image-2.1 VAE
 *    (AutoencoderKLQwenImage21: base 96/144, z 64, dim_mult 1-2-4-8-8, 2
 *    residual blocks per level);
 *  - --model flux: the Flux VAE as Z-Image ships it (AutoencoderKL:
 *    block_out_channels 128-256-512-512, 2 layers per block, 32 groups,
 *    16 latent channels), with its memory plan (--budget, --bands) and
 *    --plan, which prints the plan of every size without computing.
 *
 * The weights are written to a temporary .cmf under $TMPDIR, mapped as a
 * real model is, and the file removed at once (bench_pack.h), as the other
 * model benchmarks do. tools/bench_peer_vae.py runs this next to diffusers'
 * AutoencoderKLQwenImage21 and AutoencoderKL on the same configurations.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "models/flux_vae.h"
#include "models/qi21_vae.h"

typedef struct bench_opts {
    cq_bench_model_opts m;
    int repeat;
    bool encode;
    bool flux;      /* --model flux */
    bool qimage;    /* --model qimage */
    long budget_mib; /* --budget (flux; 0: the model's default) */
    long bands;     /* --bands (flux; 0: the budget decides) */
    bool plan;      /* --plan (flux): plans only */
} bench_opts;

static void help(void) {
    printf("usage: cortiq bench vae [--model qi21|qimage|flux] [--size 256|512|1024|2048] [--repeat N] [--encode]\n"
           "                        [--budget MIB] [--bands ROWS] [--plan] [--threads N] [--backend B]\n"
           "\n"
           "Time a VAE at its released configuration with random weights, f16 kernels as `cortiq convert`\n"
           "stores them: decoding random latents into a SIZE x SIZE image (and with --encode, encoding\n"
           "an image of that size). The weights are written to a temporary .cmf under $TMPDIR, mapped as a\n"
           "real model is, and removed as soon as they are mapped. Reports the median of --repeat runs\n"
           "after a warm-up, megapixels per second, and the activations' peak.\n"
           "\n"
           "models:\n"
           "  qi21          the Qwen-Image-2.1 VAE (base 96/144, z 64, dim_mult 1-2-4-8-8, 2 residual blocks\n"
           "                per level; about 0.9 GB of weights); the default\n"
           "  qimage        the Qwen-Image VAE (AutoencoderKLQwenImage: base 96, z 16, dim_mult 1-2-4-4,\n"
           "                2 residual blocks per level, RGB at 8x; 0.1 GB of single-frame weights)\n"
           "  flux          the Flux VAE as Z-Image ships it (AutoencoderKL, block_out_channels\n"
           "                128-256-512-512, 2 layers per block, 32 groups, 16 latent channels; 160 MB)\n"
           "\n"
           "options:\n"
           "  --model M     qi21 (default), qimage or flux\n"
           "  --size N      image side in pixels: 256, 512, 1024 (default) or 2048\n"
           "  --repeat N    timed runs after the warm-up (default 5; 1 on the CPU)\n"
           "  --encode      also time the encoder on an image of the same size\n"
           "  --budget MIB  flux: the activation budget the memory plan keeps to (default 1792)\n"
           "  --bands ROWS  flux: bands of ROWS image rows at every level instead of the plan's\n"
           "  --plan        flux: print the memory plan (peak, statistics passes, recomputation) of a decode\n"
           "                and an encode at every size, computing nothing\n"
           "  --threads N   worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B   cpu (default), cuda or cuda:N; with cuda, CORTIQ_CUDA_PROFILE=1 adds the\n"
           "                device time per op class and per op\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help    this text\n");
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--encode") == 0 || strcmp(a, "--plan") == 0) { /* flags: no value */
        *(a[2] == 'e' ? &o->encode : &o->plan) = true;
        return 1;
    }
    if (strcmp(a, "--repeat") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 1000, &n)) return 2;
        o->repeat = (int)n;
    } else if (strcmp(a, "--model") == 0) {
        if (!v || (strcmp(v, "qi21") != 0 && strcmp(v, "qimage") != 0 && strcmp(v, "flux") != 0))
            return cq_cli_usage_error(cmd, "--model must be qi21, qimage or flux");
        o->flux = strcmp(v, "flux") == 0;
        o->qimage = strcmp(v, "qimage") == 0;
    } else if (strcmp(a, "--budget") == 0 || strcmp(a, "--bands") == 0) {
        long *to = strcmp(a, "--budget") == 0 ? &o->budget_mib : &o->bands;
        if (!cq_cli_parse_int(cmd, a, v, 1, 1 << 20, to)) return 2;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

static int parse(int argc, char **argv, bench_opts *o, bool *done) {
    const char *cmd = "bench vae";
    int rc = cq_bench_model_args(cmd, argc, argv, &o->m, help, opt, o, done);
    if (rc || *done) return rc;
    if (!o->flux && (o->budget_mib || o->bands || o->plan))
        return cq_cli_usage_error(cmd, "--budget, --bands and --plan are options of --model flux");
    return 0;
}

/* One benchmark: the backend, the pack and one of the two VAEs, its buffers. */
typedef struct bench_run {
    cq_cmf *cmf;
    cq_backend *be;
    cq_qi21_vae *vae;  /* --model qi21 */
    cq_flux_vae *flux; /* --model flux */
    float *z, *img, *mom;
    double *t;
    bool cpu;
} bench_run;

static void run_free(bench_run *r) {
    cq_qi21_vae_free(r->vae);
    cq_flux_vae_free(r->flux);
    cq_backend_free(r->be);
    cq_cmf_close(r->cmf);
    cq_free(r->z);
    cq_free(r->img);
    cq_free(r->mom);
    cq_free(r->t);
}

static int fail(bench_run *r, cq_status s, const char *what) {
    run_free(r);
    return cq_cli_fail("bench vae", s, what);
}

/* The random VAE, as `cortiq convert` writes a VAE-only pack (no transformer shape). */
static cq_status map_vae(const bench_opts *o, cq_cmf **cmf, uint64_t *bytes) {
    cq_bench_pack pk = {0};
    char *cfg = o->flux ? cq_bench_flux_vae_config() : o->qimage ? cq_bench_qimage_vae_config() : cq_bench_vae_config();
    cq_status s = !cfg      ? CQ_ERR_NOMEM
                  : o->flux ? cq_bench_flux_vae_weights(&pk)
                  : o->qimage ? cq_bench_qimage_vae_weights(&pk)
                              : cq_bench_vae_weights(&pk);
    char hdr[640];
    snprintf(hdr, sizeof hdr,
             "{\"format\":\"cmf\",\"version\":2,\"arch\":{\"arch_name\":\"%s\",\"hidden_size\":0,"
             "\"intermediate_size\":0,\"num_layers\":0,\"num_attention_heads\":0,\"num_kv_heads\":0,\"head_dim\":0,"
             "\"vocab_size\":0,\"max_position_embeddings\":0,\"rms_norm_eps\":1e-06,\"layer_types\":[]},"
             "\"quant_type\":\"F16\",\"provenance\":{\"tool\":\"cortiq bench vae\"}}",
             o->flux ? "flux_vae" : o->qimage ? "qwen_image_vae" : "autoencoder_kl_qwen_image21");
    cq_bench_blob blob = {"vae.config_json", cfg, cfg ? strlen(cfg) : 0};
    cq_bench_file f = {.tag = o->flux ? "flux-vae" : "vae", .header = hdr, .blobs = &blob, .n_blobs = 1,
                       .weights = &pk, .no_verify = o->m.no_verify, .threads = o->m.threads};
    *bytes = cq_bench_pack_bytes(&pk);
    uint64_t file_bytes;
    if (s == CQ_OK) s = cq_bench_pack_map(&f, cmf, &file_bytes);
    cq_bench_pack_free(&pk);
    cJSON_free(cfg);
    return s;
}

/* The backend (first: a missing GPU fails before the weights are written), the pack and the VAE of
 * --model; the default --repeat for the backend. 0, or the exit code with r freed. */
static int open_run(bench_opts *o, bench_run *r, uint64_t *wbytes, double *t_write, double *t_load) {
    cq_status s = cq_env_backend_create(o->m.backend, o->m.threads, &r->be);
    if (s != CQ_OK) return fail(r, s, "creating the backend");
    r->cpu = strncmp(cq_backend_name(r->be), "cpu", 3) == 0 || strcmp(cq_backend_name(r->be), "ref") == 0;
    if (o->repeat == 0) o->repeat = r->cpu ? 1 : 5;
    double t0 = cq_now();
    s = map_vae(o, &r->cmf, wbytes);
    if (s != CQ_OK) return fail(r, s, "writing the temporary model");
    *t_write = cq_now() - t0;
    t0 = cq_now();
    s = o->flux ? cq_flux_vae_load(r->cmf, "vae.", r->be, &r->flux) : cq_qi21_vae_load(r->cmf, "vae.", r->be, &r->vae);
    if (s == CQ_OK) s = cq_backend_sync(r->be);
    if (s != CQ_OK) return fail(r, s, "loading the VAE");
    *t_load = cq_now() - t0;
    return 0;
}

/* Random latents (nz values), room for the image (ni) and the moments (2 nz), the run times. 0, or the exit
 * code with r freed. */
static int alloc_inputs(bench_run *r, size_t nz, size_t ni, int repeat) {
    r->z = cq_mallocn(nz, sizeof(float));
    r->img = cq_mallocn(ni, sizeof(float));
    r->mom = cq_mallocn(2 * nz, sizeof(float));
    r->t = cq_mallocn((size_t)repeat, sizeof(double));
    if (!r->z || !r->img || !r->mom || !r->t) return fail(r, CQ_ERR_NOMEM, "allocating the inputs");
    uint64_t rng = 4242;
    for (size_t i = 0; i < nz; i++) r->z[i] = 2.0f * cq_bench_rng_unit(&rng);
    return 0;
}

/* The decoded image is finite; with clamp it is brought into the encoder's input range [-1, 1]. 0, or the
 * exit code with r freed. */
static int check_image(bench_run *r, size_t ni, bool clamp) {
    for (size_t i = 0; i < ni; i++) {
        if (!isfinite(r->img[i])) return fail(r, cq_fail(CQ_ERR_NUMERIC, "the image holds non-finite values"), "checking");
        if (clamp) r->img[i] = r->img[i] < -1.0f ? -1.0f : r->img[i] > 1.0f ? 1.0f : r->img[i];
    }
    return 0;
}

static void print_device_memory(const bench_run *r) {
    cq_backend_stats st;
    if (!r->cpu && cq_backend_get_stats(r->be, &st, false) == CQ_OK && st.mem_peak)
        printf("device memory: peak %.2f GiB (weights %.2f GiB)\n", (double)st.mem_peak / (1 << 30),
               (double)st.weight_bytes / (1 << 30));
}

/* One decode of size/F latents into a size x size image, or the encode of that image. */
static cq_status run_once(const bench_run *r, bool decode, int size) {
    if (r->flux) {
        const int h = size / cq_flux_vae_get_config(r->flux)->spatial_factor;
        return decode ? cq_flux_vae_decode(r->flux, r->z, h, h, r->img)
                      : cq_flux_vae_encode(r->flux, r->img, size, size, r->mom);
    }
    const int F = cq_qi21_vae_get_config(r->vae)->spatial_factor, h = size / F;
    return decode ? cq_qi21_vae_decode(r->vae, r->z, h, h, CQ_QI21_VAE_PLANAR, r->img)
                  : cq_qi21_vae_encode(r->vae, r->img, h * F, h * F, CQ_QI21_VAE_PLANAR, r->mom);
}

/* Warm-up, then `repeat` timed runs of the decode or the encode; the median in *sec. */
static cq_status time_runs(bench_run *r, bool decode, int size, int repeat, double *sec) {
    for (int i = 0; i <= repeat; i++) {
        double t0 = cq_now();
        CQ_TRY(run_once(r, decode, size));
        if (i) {
            r->t[i - 1] = cq_now() - t0;
            continue;
        }
        fprintf(stderr, "  %s warm-up: %.3f s\n", decode ? "decode" : "encode", cq_now() - t0);
        cq_backend_stats st; /* the op times of the timed runs only */
        CQ_TRY(cq_backend_get_stats(r->be, &st, true));
    }
    *sec = cq_bench_median(r->t, repeat);
    cq_backend_stats st;
    CQ_TRY(cq_backend_get_stats(r->be, &st, false));
    if (st.timed) cq_bench_print_op_classes(&st, repeat, decode ? "decode" : "encode");
    return CQ_OK;
}

/* ---- the Flux VAE ------------------------------------------------------------------------ */
/* The plan of one decode (of size/F latents) or encode against the whole-image run. */
static cq_status flux_plan_line(cq_flux_vae *v, bool decode, int size, int bands) {
    const int F = cq_flux_vae_get_config(v)->spatial_factor, n = decode ? size / F : size;
    cq_flux_vae_stats whole, plan;
    cq_flux_vae_set_band_rows(v, INT_MAX);
    CQ_TRY(cq_flux_vae_plan(v, decode, n, n, &whole));
    cq_flux_vae_set_band_rows(v, bands);
    const double t0 = cq_now();
    CQ_TRY(cq_flux_vae_plan(v, decode, n, n, &plan));
    printf("  %s %4dx%-4d  whole image %6.2f GiB  plan %6.2f GiB  %2d statistics passes  %.2fx the whole image's "
           "%.2f TMAC  (planned in %.0f ms)\n", decode ? "decode" : "encode", size, size,
           (double)whole.peak_bytes / (1 << 30), (double)plan.peak_bytes / (1 << 30), plan.stat_passes,
           (double)plan.macs / (double)whole.macs, (double)whole.macs / 1e12, 1e3 * (cq_now() - t0));
    return CQ_OK;
}

/* The timed runs and the plan's statistics of the last one. */
static cq_status flux_time(bench_run *r, bool decode, int size, int repeat, double *sec) {
    CQ_TRY(time_runs(r, decode, size, repeat, sec));
    const cq_flux_vae_stats fs = cq_flux_vae_last_stats(r->flux);
    const double mpix = (double)size * size / 1e6;
    printf("%s %dx%d: %.4f s (median of %d), %.3g Mpixel/s; activations' peak %.2f GiB, %d statistics passes, "
           "%.2f TMAC\n", decode ? "decode" : "encode", size, size, *sec, repeat, mpix / *sec,
           (double)fs.peak_bytes / (1 << 30), fs.stat_passes, (double)fs.macs / 1e12);
    return CQ_OK;
}

static int bench_flux(bench_opts *o) {
    bench_run r = {0};
    uint64_t wbytes;
    double t_write, t_load;
    int rc = open_run(o, &r, &wbytes, &t_write, &t_load);
    if (rc) return rc;
    cq_flux_vae_set_budget(r.flux, (size_t)o->budget_mib << 20);
    char b1[32];
    printf("Flux VAE (Z-Image's AutoencoderKL), released configuration, random weights: %s of f16 kernels; written "
           "and mapped in %.1f s\nbackend %s; loaded in %.2f s; budget %s\n", cq_fmt_bytes(wbytes, b1, sizeof b1),
           t_write, cq_backend_name(r.be), t_load, o->bands ? "none (forced bands)" : o->budget_mib ? "set" : "default");
    cq_status s = CQ_OK;
    if (o->plan) {
        static const int sizes[] = {256, 512, 1024, 2048};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && s == CQ_OK; i++) {
            s = flux_plan_line(r.flux, true, sizes[i], (int)o->bands);
            if (s == CQ_OK) s = flux_plan_line(r.flux, false, sizes[i], (int)o->bands);
        }
        if (s != CQ_OK) return fail(&r, s, "planning");
        run_free(&r);
        return 0;
    }
    cq_flux_vae_set_band_rows(r.flux, (int)o->bands);
    const int F = cq_flux_vae_get_config(r.flux)->spatial_factor, h = o->m.size / F;
    const size_t nz = (size_t)CQ_BENCH_FLUX_VAE_Z * h * h, ni = (size_t)3 * o->m.size * o->m.size;
    if ((rc = alloc_inputs(&r, nz, ni, o->repeat)) != 0) return rc;
    double sec;
    s = flux_time(&r, true, o->m.size, o->repeat, &sec);
    if (s != CQ_OK) return fail(&r, s, "decoding");
    if ((rc = check_image(&r, ni, true)) != 0) return rc;
    if (o->encode) {
        s = flux_time(&r, false, o->m.size, o->repeat, &sec);
        if (s != CQ_OK) return fail(&r, s, "encoding");
    }
    print_device_memory(&r);
    run_free(&r);
    return 0;
}

int cq_bench_vae(int argc, char **argv) {
    bench_opts o = {.m = {.size = 1024, .backend = "cpu"}};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    if (o.flux) return bench_flux(&o);
    bench_run r = {0};
    uint64_t wbytes;
    double t_write, t_load;
    if ((rc = open_run(&o, &r, &wbytes, &t_write, &t_load)) != 0) return rc;
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(r.vae);
    const int F = c->spatial_factor, h = o.m.size / F, w = o.m.size / F;
    char b1[32];
    printf("%s VAE, released configuration, random weights: %s of f16 kernels; written and mapped in %.1f s\n"
           "backend %s; loaded in %.2f s\n", o.qimage ? "Qwen-Image" : "Qwen-Image-2.1",
           cq_fmt_bytes(wbytes, b1, sizeof b1), t_write, cq_backend_name(r.be), t_load);
    fflush(stdout);
    const size_t nz = (size_t)c->z_dim * h * w, ni = (size_t)c->image_channels * o.m.size * o.m.size;
    if ((rc = alloc_inputs(&r, nz, ni, o.repeat)) != 0) return rc;
    double dec = 0, enc = 0;
    cq_status s = time_runs(&r, true, o.m.size, o.repeat, &dec);
    if (s != CQ_OK) return fail(&r, s, "decoding");
    const size_t dpeak = cq_qi21_vae_last_peak_bytes(r.vae);
    if ((rc = check_image(&r, ni, false)) != 0) return rc;
    const double mpix = (double)o.m.size * o.m.size / 1e6;
    printf("decode %lldx%lld latents -> %dx%d: %.4f s (median of %d), %.3g Mpixel/s; activations' peak %.2f GiB\n",
           (long long)h, (long long)w, o.m.size, o.m.size, dec, o.repeat, mpix / dec, (double)dpeak / (1 << 30));
    if (o.encode && c->has_encoder) {
        s = time_runs(&r, false, o.m.size, o.repeat, &enc);
        if (s != CQ_OK) return fail(&r, s, "encoding");
        printf("encode %dx%d -> %lldx%lld moments: %.4f s (median of %d), %.3g Mpixel/s; activations' peak %.2f GiB\n",
               o.m.size, o.m.size, (long long)h, (long long)w, enc, o.repeat, mpix / enc,
               (double)cq_qi21_vae_last_peak_bytes(r.vae) / (1 << 30));
    }
    print_device_memory(&r);
    run_free(&r);
    return 0;
}
