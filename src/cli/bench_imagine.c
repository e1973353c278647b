/*
 * bench_imagine.c — `cortiq bench imagine`: text to image end to end, at a
 * released model's configuration, with random weights: Qwen-Image-2.1
 * (--model qi21, the default), Z-Image Turbo (--model zimage) or Qwen-Image
 * (--model qimage), or an edit with Qwen-Image-Edit-2511 (--model
 * qimage_edit_plus) of generated input pictures.
 *
 * One temporary pack holds what `cortiq convert` makes of the model's
 * diffusers pipeline folder, at full size: the text tower, the denoiser, the
 * VAE, the scheduler config, the Qwen tokenizer and the chat template (both
 * from tests/fixtures: Qwen3-VL's for Qwen-Image-2.1, Qwen3's for Z-Image;
 * Qwen-Image's pipeline has its own fixed template, so none is stored).
 * What each pack holds is in bench_imagine_models.c; the weights are random
 * bytes in each codec's layout (bench_pack.c), the matrices in the convert
 * defaults: q8_2f, or q4tp for the denoiser with --quant q4tp (the text tower
 * stays at 8 bits, as convert keeps it).
 *
 * Then the real pipeline runs (its open + load_weights, then generate) and
 * every phase is timed by the pipeline's phase and step callbacks: wall time,
 * process CPU time (on a busy machine the wall time says little alone) and
 * resident memory after it. The report projects the model's usual number of
 * steps (Qwen-Image-2.1 40, Z-Image Turbo 8, Qwen-Image 50) from the median
 * step. Every step is one denoiser pass: no model runs with guidance here
 * (Qwen-Image's true CFG needs a negative prompt and then doubles a step). On a
 * device backend a --gpu-memory list runs the pipeline once per budget, each
 * on a new backend, and ends with one table of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/gz.h"
#include "cli/bench_imagine.h"
#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "format/file_read.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"
#include "pipelines/png_write.h"
#include "pipelines/qimage_pipe.h"
#include "pipelines/residency.h"

#ifndef CQ_BENCH_FIXTURES
#define CQ_BENCH_FIXTURES "tests/fixtures"
#endif

#define CMD "bench imagine"
#define MAX_STEPS 100
#define DEFAULT_IMAGES 2 /* an edit's input pictures (Edit-Plus's usual two) */
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct bench_opts {
    cq_bench_model_opts m;
    const cq_imagine_model *model;
    const char *steps_arg, *layers_arg, *images_arg; /* checked against the model's limits once the line is read */
    int steps, layers, n_images;
    cq_dtype quant;
    const char *prompt, *tokenizer, *chat_template;
    char template_path[512];
    uint64_t gpu_memory; /* --gpu-memory in bytes; 0: CORTIQ_GPU_MEMORY, else the backend's default */
    uint64_t more[8];    /* further budgets of a --gpu-memory list, each run after the first (0: the default) */
    int n_more;
} bench_opts;

/* Where a device backend's load went: the payload bytes it copied through host memory, the host's time in
 * those copies (the integrity hash is folded into them) and waiting for the device to drain its staging. */
static void print_upload(cq_backend *be, double load_s, double open_s) {
    cq_backend_stats st;
    memset(&st, 0, sizeof st);
    if (cq_backend_get_stats(be, &st, false) != CQ_OK || !st.upload_bytes) {
        cq_clear_error();
        return;
    }
    printf("load: %.2f GiB of payloads through host memory in %.2f s (%.1f GB/s): the tokenizer, template and "
           "configs %.2f s, copies %.2f s (the hash folded in), waits for the device %.2f s, pinning host memory "
           "%.2f s, %llu device allocations %.2f s, the rest %.2f s\n",
           (double)st.upload_bytes / GIB, load_s, load_s > 0 ? (double)st.upload_bytes / load_s / 1e9 : 0.0, open_s,
           st.upload_copy_s, st.upload_wait_s, st.host_pin_s, (unsigned long long)st.device_allocs, st.device_alloc_s,
           load_s - open_s - st.upload_copy_s - st.upload_wait_s - st.host_pin_s - st.device_alloc_s);
}

static void help(void) {
    printf("usage: cortiq bench imagine [--model qi21|zimage|qimage|qimage_edit_plus] [--size 256|512|1024|2048]\n"
           "                            [--steps N] [--images N]\n"
           "                            [--quant q8_2f|q4tp] [--threads N] [--backend cpu|cuda]\n"
           "                            [--prompt TEXT] [--tokenizer FILE] [--chat-template FILE] [--layers N]\n"
           "                            [--gpu-memory GiB[,GiB...]] [--cold] [--no-verify]\n"
           "\n"
           "Time text to image (or an edit) end to end at a released model's configuration with random weights,\n"
           "with the real tokenizer, chat template and scheduler:\n"
           "  qi21    Qwen-Image-2.1: the Qwen3-VL-8B text tower (36 layers, 4096 wide), the 7B denoiser\n"
           "          and the VAE (base 96/144, z 64); 14.3 GiB with q8_2f, 11.1 GiB with q4tp\n"
           "  zimage  Z-Image Turbo: the Qwen3-4B text tower (36 layers stored, 35 run, 2560 wide), the\n"
           "          6.15B denoiser and the Flux VAE; 8 steps without guidance, as released;\n"
           "          9.6 GiB with q8_2f, 6.9 GiB with q4tp\n"
           "  qimage  Qwen-Image: the Qwen2.5-VL-7B text tower (28 layers, 3584 wide), the 20B\n"
           "          denoiser (60 layers) and the VAE (base 96, z 16); run without guidance (true CFG\n"
           "          needs a negative prompt and doubles each step); 25.7 GiB with q8_2f,\n"
           "          16.6 GiB with q4tp\n"
           "  qimage_edit_plus  Qwen-Image-Edit-2511: Qwen-Image's parts with the Qwen2.5-VL-7B vision\n"
           "          tower (32 blocks, 1280 wide) and the VAE's encoder, zero_cond_t; edits --images\n"
           "          generated pictures of --size (each read, resized as the pipeline does, through the\n"
           "          vision tower and the VAE encoder), without guidance\n"
           "The pack is written to a temporary .cmf under $TMPDIR (default /tmp; the free space is\n"
           "checked first) and mapped as a real model is; the file is removed as soon as it is mapped,\n"
           "and also when the run fails or is interrupted.\n"
           "\n"
           "Then the pipeline runs once and reports, per phase (load, text tower, prefill or caption\n"
           "prepare, each step, VAE decode): wall time, CPU time of all threads and resident memory\n"
           "after it; the total for --steps and for the model's usual steps (qi21 40, zimage 8,\n"
           "qimage 50, qimage_edit_plus 40) projected from the median step; the peak resident\n"
           "memory (mapped weights included) and the file size. An edit's row \"pictures read, VAE\n"
           "encode\" times its inputs up to the text phase (the vision tower runs in that phase).\n"
           "\n"
           "options:\n"
           "  --model M            qi21 (default), zimage, qimage or qimage_edit_plus\n"
           "  --size N             image side in pixels: 256 (default), 512, 1024 or 2048 (the last two\n"
           "                       are for a GPU: a CPU step at 1024 takes tens of minutes)\n"
           "  --steps N            denoising steps actually run: qi21, qimage and qimage_edit_plus\n"
           "                       2..%d (default 2), zimage 1..%d (default 8, the Turbo recipe)\n"
           "  --quant C            denoiser codec: q8_2f (default) or q4tp; the text tower stays q8_2f\n"
           "                       and the VAE f16, as `cortiq convert` makes them\n"
           "  --threads N          worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B          cpu (default), cuda or cuda:N: every phase runs there (with cuda the\n"
           "                       weights are uploaded and decoded on the device during the load)\n"
           "  --gpu-memory GiB     the device-memory budget of a GPU backend, a positive decimal such as\n"
           "                       7.5 (default: CORTIQ_GPU_MEMORY, else what the device has free less a\n"
           "                       margin): how a smaller card is simulated. A list (\"default,24,16,8\")\n"
           "                       runs the pipeline once per budget on the same pack, each on a\n"
           "                       new backend, and ends with a table: the residency plan, load, median\n"
           "                       step, VAE and total times, the device memory measured at its peak\n"
           "                       and the weight bytes streamed per step\n"
           "  --cold               drop the pack's pages from the page cache before the load, so it reads\n"
           "                       the disk (needs TMPDIR on a disk: tmpfs such as /dev/shm keeps them)\n"
           "  --no-verify          load without checking each tensor's hash (the load's time with and\n"
           "                       without it is what the check costs)\n"
           "  --prompt TEXT        the prompt (default: a fixed 15-word one)\n"
           "  --tokenizer FILE     Qwen tokenizer.json, optionally gzip-compressed\n"
           "                       (default: %s/tokenizers/qwen3.json.gz)\n"
           "  --chat-template FILE the chat template (default: %s/chat_templates/\n"
           "                       qwen3_vl.jinja for qi21, qwen3.jinja for zimage; qimage takes none:\n"
           "                       its pipeline's template is fixed)\n"
           "  --layers N           build only the first N layers of the denoiser (qi21 1..32, zimage\n"
           "                       1..30, qimage and qimage_edit_plus 1..60) and N of the text tower (zimage: N + 1 stored,\n"
           "                       N run; qimage: at most its 28; qimage_edit_plus also N vision blocks,\n"
           "                       at most its 32): a quick check of the whole path (the times are then\n"
           "                       not the model's)\n"
           "  --images N           qimage_edit_plus: the input pictures, 1..%d (default %d), written under\n"
           "                       $TMPDIR for the run and removed after it\n"
           "  -h, --help           this text\n",
           MAX_STEPS, MAX_STEPS, CQ_BENCH_FIXTURES, CQ_BENCH_FIXTURES, CQ_QIMAGE_EDIT_MAX_IMAGES, DEFAULT_IMAGES);
}

/* A comma-separated --gpu-memory list into o->gpu_memory and o->more; "default" is the backend's default. */
static int gpu_memory_arg(const char *v, bench_opts *o) {
    if (!v) return cq_cli_usage_error(CMD, "--gpu-memory needs a size in GiB, e.g. 7.5");
    char buf[256];
    uint64_t one;
    if (!*v && cq_env_parse_gib(v, &one) != CQ_OK) return cq_cli_usage_error(CMD, "--gpu-memory: %s", cq_last_error());
    if (strlen(v) >= sizeof buf) return cq_cli_usage_error(CMD, "--gpu-memory: the list is too long");
    strcpy(buf, v);
    o->n_more = -1;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint64_t b = 0;
        if (strcmp(t, "default") && cq_env_parse_gib(t, &b) != CQ_OK)
            return cq_cli_usage_error(CMD, "--gpu-memory: %s", cq_last_error());
        if (o->n_more < 0) {
            o->gpu_memory = b;
        } else {
            if (o->n_more >= (int)CQ_ARRAY_LEN(o->more))
                return cq_cli_usage_error(CMD, "--gpu-memory: at most %d budgets", (int)CQ_ARRAY_LEN(o->more) + 1);
            o->more[o->n_more] = b;
        }
        o->n_more++;
    }
    if (o->n_more < 0) return cq_cli_usage_error(CMD, "--gpu-memory needs a size in GiB, e.g. 7.5");
    return 1;
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, false, i, &o->quant);
    if (strcmp(a, "--model") == 0) {
        const char *names;
        if (!v) return cq_cli_usage_error(cmd, "--model needs a value");
        o->model = cq_imagine_model_find(v, &names);
        if (!o->model) return cq_cli_usage_error(cmd, "--model wants one of %s, got '%s'", names, v);
    } else if (strcmp(a, "--steps") == 0 || strcmp(a, "--layers") == 0 || strcmp(a, "--images") == 0) {
        if (!v) return cq_cli_usage_error(cmd, "%s needs a value", a);
        *(a[2] == 's' ? &o->steps_arg : a[2] == 'l' ? &o->layers_arg : &o->images_arg) = v;
    } else if (strcmp(a, "--gpu-memory") == 0) {
        int r = gpu_memory_arg(v, o);
        if (r != 1) return r;
    } else if (strcmp(a, "--prompt") == 0) {
        if (!v) return cq_cli_usage_error(cmd, "--prompt needs a value");
        o->prompt = v;
    } else if (strcmp(a, "--tokenizer") == 0 || strcmp(a, "--chat-template") == 0) {
        if (!v || !*v) return cq_cli_usage_error(cmd, "%s needs a file name", a);
        *(a[2] == 't' ? &o->tokenizer : &o->chat_template) = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* The whole line; then what depends on the model: the bounds of --steps and --layers, the template. */
static int parse(int argc, char **argv, bench_opts *o, bool *done) {
    int rc = cq_bench_model_args(CMD, argc, argv, &o->m, help, opt, o, done);
    if (rc || *done) return rc;
    const cq_imagine_model *md = o->model;
    long n;
    o->steps = md->default_steps;
    if (o->steps_arg && !cq_cli_parse_int(CMD, "--steps", o->steps_arg, md->min_steps, MAX_STEPS, &n)) return 2;
    if (o->steps_arg) o->steps = (int)n;
    if (o->layers_arg && !cq_cli_parse_int(CMD, "--layers", o->layers_arg, 1, md->dit_layers, &n)) return 2;
    if (o->layers_arg) o->layers = (int)n;
    if (o->images_arg && !md->vision_layers)
        return cq_cli_usage_error(CMD, "--images: %s draws from text alone (qimage_edit_plus edits pictures)", md->title);
    o->n_images = md->vision_layers ? DEFAULT_IMAGES : 0;
    if (o->images_arg && !cq_cli_parse_int(CMD, "--images", o->images_arg, 1, CQ_QIMAGE_EDIT_MAX_IMAGES, &n)) return 2;
    if (o->images_arg) o->n_images = (int)n;
    if (o->chat_template && !md->chat_template)
        return cq_cli_usage_error(CMD, "--chat-template: %s's pipeline uses its own fixed template", md->title);
    if (!o->chat_template && md->chat_template) {
        snprintf(o->template_path, sizeof o->template_path, "%s/%s", CQ_BENCH_FIXTURES, md->chat_template);
        o->chat_template = o->template_path;
    }
    return 0;
}

/* ---- inputs: tokenizer and chat template ---------------------------------------------------- */
/* A whole file, NUL-terminated: gunzipped when its name ends in .gz. */
static cq_status read_input(const char *path, const char *what, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    const size_t limit = (size_t)256 << 20;
    uint8_t *b = NULL;
    cq_status s = cq_path_is_gz(path) ? cq_file_read_gz(path, limit, &b, len) : cq_file_read_all(path, limit, &b, len);
    if (s == CQ_ERR_MISSING)
        return cq_fail(CQ_ERR_IO, "cannot open the %s '%s' (see --help for the option that names another)", what, path);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    *out = (char *)b;
    return CQ_OK;
}

/* ---- the run's state ------------------------------------------------------------------------------ */
typedef struct mark {
    double wall, cpu;
    uint64_t rss;
    bool set;
} mark;

typedef struct bench_run {
    char *tok, *tmpl;
    size_t tok_len, tmpl_len;
    cq_imagine_pack pack;
    cq_cmf *cmf;
    cq_backend *be;
    cq_imagine_pipe pipe;
    mark *steps;
    double *st; /* [steps] seconds of each step */
    char pic[CQ_QIMAGE_EDIT_MAX_IMAGES][1024]; /* an edit's input pictures under $TMPDIR, removed at the end */
    const char *pics[CQ_QIMAGE_EDIT_MAX_IMAGES];
    int n_pics;
} bench_run;

static void remove_pictures(bench_run *r) {
    for (int i = 0; i < r->n_pics; i++) remove(r->pic[i]);
    r->n_pics = 0;
}

/* n side x side RGB pictures, smooth and different from each other (an edit's inputs: their content does not
 * change the work), written under $TMPDIR; *r owns them from the first one written. */
static cq_status write_pictures(bench_run *r, int n, int side) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    uint8_t *px = cq_mallocn((size_t)side * side, 3);
    if (!px) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    for (int i = 0; i < n && s == CQ_OK; i++) {
        int k = snprintf(r->pic[i], sizeof r->pic[i], "%s/cortiq-bench-edit-%ld-%d.png", dir, (long)getpid(), i);
        if (k < 0 || (size_t)k >= sizeof r->pic[i]) {
            s = cq_fail(CQ_ERR_INVALID_ARG, "TMPDIR '%s' is too long", dir);
            break;
        }
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++)
                for (int c = 0; c < 3; c++) {
                    const double v = sin(0.013 * (c + 1) * x + 0.021 * (i + 1) * y + 1.7 * c + 0.9 * i);
                    px[((size_t)y * side + x) * 3 + c] = (uint8_t)lrint(127.5 + 120.0 * v);
                }
        s = cq_png_write(r->pic[i], px, side, side, 3, NULL, 0);
        if (s == CQ_OK) r->pics[r->n_pics++] = r->pic[i];
    }
    cq_free(px);
    return s;
}

static void run_free(bench_run *r) {
    remove_pictures(r);
    cq_imagine_pipe_free(&r->pipe);
    cq_backend_free(r->be);
    cq_cmf_close(r->cmf);
    cq_imagine_pack_free(&r->pack);
    cq_free(r->tok);
    cq_free(r->tmpl);
    cq_free(r->steps);
    cq_free(r->st);
}

static int fail(bench_run *r, cq_status s, const char *what) {
    int rc = cq_cli_fail(CMD, s, what);
    run_free(r);
    return rc;
}

/* ---- timing the pipeline ---------------------------------------------------------------------- */
typedef struct watch {
    mark start;                        /* when the generation began (an edit reads and encodes its pictures) */
    mark phase[CQ_GEN_PHASE_DONE + 1]; /* when each phase began (DONE: when the VAE ended) */
    mark *step;                        /* [steps]: when each step ended */
    int threads;
    cq_backend *be;                    /* a device backend: its streamed bytes read at each phase */
    uint64_t streamed[CQ_GEN_PHASE_DONE + 1];
    uint64_t pinned;                   /* page-locked host bytes of streamed weights when the steps began */
    const cq_imagine_pipe *pipe;       /* its seconds of binds and releases read at each phase */
    const char *prefill;               /* the model's name for the PREFILL phase */
    double staged0, staged[CQ_GEN_PHASE_DONE + 1];
} watch;

static double stage_seconds(const cq_imagine_pipe *p) {
    const cq_resid *r = p ? cq_imagine_pipe_residency(p) : NULL;
    return r ? r->stage_s : 0;
}

static mark mark_now(void) { return (mark){cq_now(), cq_bench_cpu_seconds(), cq_bench_rss(), true}; }

/* the binds and releases inside the text phase's interval: those of the stage before the prefill */
static double text_binds(const watch *w) { return w->staged[CQ_GEN_PHASE_PREFILL] - w->staged[CQ_GEN_PHASE_TEXT]; }

static void on_phase(cq_gen_phase ph, void *user) {
    watch *w = user;
    cq_backend_stats st;
    /* the stats wait for the queued work: the phases' times stay their own */
    if (w->be && (ph == CQ_GEN_PHASE_STEPS || ph == CQ_GEN_PHASE_VAE) && cq_backend_get_stats(w->be, &st, false) == CQ_OK)
        w->streamed[ph] = st.streamed_bytes, w->pinned = ph == CQ_GEN_PHASE_STEPS ? st.host_pinned : w->pinned;
    w->phase[ph] = mark_now();
    w->staged[ph] = stage_seconds(w->pipe);
    const char *const what[] = {"text tower", w->prefill, "denoising", "VAE decode", NULL};
    if (what[ph]) {
        fprintf(stderr, "  %s...\n", what[ph]);
        fflush(stderr);
    }
}

static int on_step(int step, int n, void *user) {
    watch *w = user;
    w->step[step - 1] = mark_now();
    const mark *from = step > 1 ? &w->step[step - 2] : &w->phase[CQ_GEN_PHASE_STEPS];
    fprintf(stderr, "    step %d/%d: %.1f s\n", step, n, w->step[step - 1].wall - from->wall);
    fflush(stderr);
    return 0;
}

static void row(const char *label, const mark *a, const mark *b, int threads) {
    double wall = b->wall - a->wall, cpu = b->cpu - a->cpu;
    char rss[32] = "-";
    if (b->rss) snprintf(rss, sizeof rss, "%.2f GiB", (double)b->rss / GIB);
    printf("%-40s %9.2f %9.2f %8.0f%% %11s\n", label, wall, cpu, wall > 0 ? 100.0 * cpu / (wall * threads) : 0.0, rss);
}

/* Largest |x| and whether every value is finite. */
static bool all_finite(const float *x, size_t n, double *maxabs) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return false;
        if (fabs(x[i]) > m) m = fabs(x[i]);
    }
    *maxabs = m;
    return true;
}

/* ---- one run per budget ------------------------------------------------------------------------- */
typedef struct budget_row {
    uint64_t budget;          /* what the backend enforced */
    char plan[320];
    double load, text, step, vae, total; /* s (step: the median; text: without the binds in it) */
    double binds;             /* s of binds and releases between the phases (the denoiser's after the text) */
    uint64_t peak, weights;   /* the allocator's high-water mark and the weights bound at the end */
    uint64_t cached;          /* freed blocks the allocator keeps after the run (the budget counts them) */
    uint64_t dev_used;        /* the driver's own reading after the run: total - free */
    uint64_t streamed_step;   /* weight bytes copied to the device per step (measured) */
    uint64_t pinned;          /* page-locked host bytes holding streamed weights during the steps */
    bool ok;
    char err[160];
} budget_row;

static void print_rows(const budget_row *rows, int n) {
    printf("\n%-10s %7s %7s %7s %8s %7s %8s %10s %10s %10s %11s %10s  %s\n", "budget", "load s", "text s", "binds s",
           "step s", "VAE s", "total s", "peak GiB", "cached GiB", "driver GiB", "stream/step", "pinned GiB", "plan");
    for (int i = 0; i < n; i++) {
        const budget_row *b = &rows[i];
        if (!b->ok) {
            printf("%7.2f GiB  failed: %s\n", (double)b->budget / GIB, b->err);
            continue;
        }
        printf("%7.2f GiB %7.2f %7.2f %7.2f %8.3f %7.2f %8.2f %10.2f %10.2f %10.2f %7.2f GiB %10.2f  %s\n",
               (double)b->budget / GIB, b->load, b->text, b->binds, b->step, b->vae, b->total, (double)b->peak / GIB,
               (double)b->cached / GIB, (double)b->dev_used / GIB, (double)b->streamed_step / GIB,
               (double)b->pinned / GIB, b->plan);
    }
    printf("text: the text phase without binds; binds: parts bound and released between the phases (the\n"
           "denoiser after the text, the VAE before the decode); the total counts both\n"
           "peak: the backend's live buffers at their high-water mark (weights, activations, scratch);\n"
           "cached: freed blocks the allocator keeps for reuse after the run (the budget counts live + cached);\n"
           "driver: the device's used memory after the run as the driver reports it (the context, kernels and\n"
           "cuBLASLt included; other processes too); stream/step: weight bytes copied from host memory to the\n"
           "device per step (measured), pinned: the page-locked host memory holding the streamed weights\n"
           "during the steps\n");
}

/* A finished run's row: its times from the marks (load from l0 to l1), its device memory and its plan. */
static budget_row budget_of(cq_backend *be, const cq_imagine_pipe *pipe, const watch *w, const mark *l0,
                            const mark *l1, double step_median, int steps) {
    const mark *ph = w->phase;
    budget_row b = {.ok = true, .load = l1->wall - l0->wall,
                    .text = ph[CQ_GEN_PHASE_PREFILL].wall - ph[CQ_GEN_PHASE_TEXT].wall - text_binds(w),
                    .binds = w->staged[CQ_GEN_PHASE_DONE] - w->staged0, .step = step_median,
                    .vae = ph[CQ_GEN_PHASE_DONE].wall - ph[CQ_GEN_PHASE_VAE].wall,
                    .total = ph[CQ_GEN_PHASE_DONE].wall - l0->wall};
    cq_backend_stats st;
    b.budget = cq_backend_mem_budget(be);
    b.pinned = w->pinned;
    b.streamed_step = (w->streamed[CQ_GEN_PHASE_VAE] - w->streamed[CQ_GEN_PHASE_STEPS]) / (uint64_t)(steps > 0 ? steps : 1);
    if (cq_backend_get_stats(be, &st, false) == CQ_OK) {
        b.peak = st.mem_peak;
        b.weights = st.weight_bytes;
        b.cached = st.mem_cached;
        b.dev_used = st.device_total - st.device_free;
    }
    const cq_resid *rs = cq_imagine_pipe_residency(pipe);
    if (rs) cq_resid_plan_describe(&rs->plan, b.plan, sizeof b.plan);
    return b;
}

/* ---- one load and generation -------------------------------------------------------------------- */
/* The pipeline's open and weights on r->be (a device backend uploads and decodes asynchronously: waited for,
 * so the load's time is its own), timed from *l0 to *l1; *open_s: the open's share. */
static cq_status load_timed(bench_run *r, const bench_opts *o, mark *l0, mark *l1, double *open_s) {
    *l0 = mark_now();
    cq_status s = cq_imagine_pipe_open(o->model, r->cmf, &r->pipe);
    *open_s = cq_now() - l0->wall;
    if (s == CQ_OK) s = cq_imagine_pipe_load_weights(&r->pipe, r->be);
    if (s == CQ_OK) s = cq_backend_sync(r->be);
    *l1 = mark_now();
    return s;
}

/* The benchmark's request: its prompt, size, steps and pictures, watched by *w (NULL: none). */
static cq_imagine_req request(const bench_run *r, const bench_opts *o, watch *w) {
    return (cq_imagine_req){.prompt = o->prompt, .side = o->m.size, .steps = o->steps, .images = r->pics,
                            .n_images = r->n_pics, .on_step = w ? on_step : NULL, .on_phase = w ? on_phase : NULL,
                            .user = w};
}

/* A generation watched by *w (its step marks in r->steps), then each step's seconds into r->st and their
 * median into *median. The image is freed unless `res` is given (and on failure). */
static cq_status generate(bench_run *r, const bench_opts *o, watch *w, cq_image_result *res, double *median) {
    w->step = r->steps;
    w->pipe = &r->pipe;
    w->prefill = o->model->prefill;
    w->staged0 = stage_seconds(&r->pipe);
    const cq_imagine_req rq = request(r, o, w);
    w->start = mark_now();
    cq_image_result own = {0};
    cq_image_result *out = res ? res : &own;
    cq_status s = cq_imagine_pipe_generate(&r->pipe, &rq, out);
    if (s == CQ_OK) s = cq_backend_sync(r->be);
    if (s != CQ_OK || !res) cq_image_result_free(out);
    if (s != CQ_OK) return s;
    for (int i = 0; i < o->steps; i++)
        r->st[i] = r->steps[i].wall - (i ? r->steps[i - 1].wall : w->phase[CQ_GEN_PHASE_STEPS].wall);
    double *tmp = cq_mallocn((size_t)o->steps, sizeof *tmp); /* the median sorts its input */
    if (!tmp) return CQ_ERR_NOMEM;
    memcpy(tmp, r->st, (size_t)o->steps * sizeof *tmp);
    *median = cq_bench_median(tmp, o->steps);
    cq_free(tmp);
    return CQ_OK;
}

/* The further budgets of a --gpu-memory list, each on a new backend, into rows[0 .. n_more). */
static cq_status more_budgets(bench_run *r, const bench_opts *o, int threads, budget_row *rows) {
    for (int k = 0; k < o->n_more; k++) {
        budget_row *b = &rows[k];
        cq_imagine_pipe_free(&r->pipe);
        cq_backend_free(r->be);
        r->be = NULL;
        printf("\n== budget %d of %d\n", 2 + k, 1 + o->n_more);
        fflush(stdout);
        CQ_TRY(cq_env_backend_open(o->m.backend, o->m.threads, o->more[k], &r->be));
        b->budget = cq_backend_mem_budget(r->be);
        mark l0, l1;
        double open_s = 0, median = 0;
        cq_status s = load_timed(r, o, &l0, &l1, &open_s);
        if (s == CQ_OK) print_upload(r->be, l1.wall - l0.wall, open_s);
        watch w = {.threads = threads, .be = r->be};
        if (s == CQ_OK) s = generate(r, o, &w, NULL, &median);
        if (s != CQ_OK) {
            snprintf(b->err, sizeof b->err, "%s", cq_last_error());
            cq_clear_error();
            continue;
        }
        *b = budget_of(r->be, &r->pipe, &w, &l0, &l1, median, o->steps);
    }
    return CQ_OK;
}

/* ---- the report's parts ------------------------------------------------------------------------- */
static void print_pack(const bench_opts *o, const cq_imagine_pack *pk, int te_layers, int vision_layers,
                       int dit_layers) {
    const cq_imagine_model *md = o->model;
    char b1[32], b2[32], b3[32], b4[32];
    if (o->layers)
        printf("ONLY %d of the %d text tower layers and %d of the %d denoiser layers are built (--layers)\n", te_layers,
               md->te_layers, dit_layers, md->dit_layers);
    if (o->layers && md->vision_layers)
        printf("ONLY %d of the %d vision tower blocks are built (--layers)\n", vision_layers, md->vision_layers);
    const uint64_t b_all = pk->b_te + pk->b_dit + pk->b_vae;
    printf("%s %s, real configuration, random weights\n", md->title,
           md->vision_layers ? "edit of input pictures" : "text to image");
    if (md->vision_layers)
        printf("  vision      %s: q8_2f, %s (with the text tower's)\n", md->vision_what,
               cq_fmt_bytes(pk->b_vision, b1, sizeof b1));
    printf("  text tower  %s: q8_2f, %s\n"
           "  denoiser    %s: %s, %s\n"
           "  VAE         %s: f16 kernels, %s\n"
           "  weights     %s in all\n",
           md->te_what, cq_fmt_bytes(pk->b_te, b1, sizeof b1), md->dit_what, cq_dtype_name(o->quant),
           cq_fmt_bytes(pk->b_dit, b2, sizeof b2), md->vae_what, cq_fmt_bytes(pk->b_vae, b3, sizeof b3),
           cq_fmt_bytes(b_all, b4, sizeof b4));
    uint64_t ram = cq_bench_ram();
    if (ram) {
        /* mapped pages are file pages: the kernel can drop and re-read them, but a run whose weights
         * do not stay resident reads the disk in every phase */
        bool fits = b_all + ((uint64_t)2 << 30) <= ram;
        printf("  memory      %s of RAM: the weights %s\n", cq_fmt_bytes(ram, b1, sizeof b1),
               fits ? "fit with 2 GiB to spare" : "do NOT fit with 2 GiB to spare");
        if (!fits && o->quant == CQ_DTYPE_Q8_2F && pk->b_dit_q4tp < pk->b_dit)
            printf("              (--quant q4tp makes the denoiser about %.1f GiB smaller)\n",
                   (double)(pk->b_dit - pk->b_dit_q4tp) / GIB);
    }
    fflush(stdout);
}

/* The device bytes the residency plan was made from, per part and weight mode. */
static void print_need(const cq_resid_need *nd) {
    printf("device bytes planned (GiB): %-13s %8s %8s %8s %13s %11s\n", "part", "planes", "compact", "slot",
           "stream slots", "activations");
    for (int part = 0; part < CQ_PART_COUNT; part++)
        printf("                            %-13s %8.2f %8.2f %8.2f %13.2f %11.2f\n", cq_part_name((cq_part)part),
               (double)nd->weights[part][CQ_WEIGHTS_DEFAULT] / GIB, (double)nd->weights[part][CQ_WEIGHTS_COMPACT] / GIB,
               (double)nd->slot[part][CQ_WEIGHTS_COMPACT] / GIB, (double)nd->slot[part][CQ_WEIGHTS_STREAMED] / GIB,
               (double)nd->act[part] / GIB);
}

/* The phase table of the first run and the totals under it. */
static void print_phases(const bench_run *r, const bench_opts *o, const watch *w, const mark *l0, const mark *l1,
                         int total, int rows, int tokens, int cond, int threads, double step_med) {
    const mark *ph = w->phase;
    const char *pre = o->model->prefill;
    char label[64];
    printf("\n%-40s %9s %9s %9s %11s\n", "phase", "wall s", "CPU s", "CPU share", "RSS after");
    row("load (weights bound in place)", l0, l1, threads);
    if (r->n_pics) {
        snprintf(label, sizeof label, "%d picture%s read, VAE encode", r->n_pics, r->n_pics == 1 ? "" : "s");
        row(label, &w->start, &ph[CQ_GEN_PHASE_TEXT], threads);
    }
    snprintf(label, sizeof label, r->n_pics ? "vision + text tower (%d tokens)" : "text tower (%d tokens)", total);
    row(label, &ph[CQ_GEN_PHASE_TEXT], &ph[CQ_GEN_PHASE_PREFILL], threads);
    printf("  of which binds and releases %.2f s (the parts the %s needs bound, those it does not released)\n",
           text_binds(w), pre);
    snprintf(label, sizeof label, "%s (%d %s)", pre, rows, o->model->prefill_rows);
    row(label, &ph[CQ_GEN_PHASE_PREFILL], &ph[CQ_GEN_PHASE_STEPS], threads);
    for (int i = 0; i < o->steps; i++) {
        if (cond)
            snprintf(label, sizeof label, "step %d/%d (%dx%d, %d + %d tokens)", i + 1, o->steps, o->m.size, o->m.size,
                     tokens, cond);
        else
            snprintf(label, sizeof label, "step %d/%d (%dx%d, %d tokens)", i + 1, o->steps, o->m.size, o->m.size,
                     tokens);
        row(label, i ? &r->steps[i - 1] : &ph[CQ_GEN_PHASE_STEPS], &r->steps[i], threads);
    }
    snprintf(label, sizeof label, "%d step%s", o->steps, o->steps == 1 ? "" : "s");
    row(label, &ph[CQ_GEN_PHASE_STEPS], &ph[CQ_GEN_PHASE_VAE], threads);
    snprintf(label, sizeof label, "VAE decode (%dx%d)", o->m.size, o->m.size);
    row(label, &ph[CQ_GEN_PHASE_VAE], &ph[CQ_GEN_PHASE_DONE], threads);
    snprintf(label, sizeof label, "total, %d steps (load to image)", o->steps);
    row(label, l0, &ph[CQ_GEN_PHASE_DONE], threads);
    const int k = o->model->project_steps;
    double fixed = (l1->wall - l0->wall) + (ph[CQ_GEN_PHASE_STEPS].wall - w->start.wall) +
                   (ph[CQ_GEN_PHASE_DONE].wall - ph[CQ_GEN_PHASE_VAE].wall);
    printf("\nmedian step %.2f s; %d steps projected: %.1f s = load + %stext + %s + VAE (%.1f s) + %d x %.2f s\n",
           step_med, k, fixed + k * step_med, r->n_pics ? "pictures + " : "", pre, fixed, k, step_med);
}

/* ---- the command ----------------------------------------------------------------------------------- */
int cq_bench_imagine(int argc, char **argv) {
    bench_opts o = {.m = {.size = 256, .backend = "cpu"}, .model = cq_imagine_model_find("qi21", NULL),
                    .quant = CQ_DTYPE_Q8_2F,
                    .prompt = "a red fox sitting in a snowy birch forest at dawn, soft golden light, detailed fur",
                    .tokenizer = CQ_BENCH_FIXTURES "/tokenizers/qwen3.json.gz"};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    const cq_imagine_model *md = o.model;
    bench_run r = {0};
    /* the backend first: a missing GPU fails before gigabytes of weights are written */
    cq_status s = cq_env_backend_open(o.m.backend, o.m.threads, o.gpu_memory, &r.be);
    if (s != CQ_OK) return fail(&r, s, "creating the backend");
    s = read_input(o.tokenizer, "tokenizer", &r.tok, &r.tok_len);
    if (s == CQ_OK && o.chat_template) s = read_input(o.chat_template, "chat template", &r.tmpl, &r.tmpl_len);
    if (s != CQ_OK) return fail(&r, s, "reading the inputs");

    /* the pack: text tower, denoiser, VAE (--layers N: N text layers run, those the pipeline never runs kept;
     * never more than the model has) */
    int te_layers = o.layers ? o.layers + md->te_unread : md->te_layers, dit_layers = o.layers ? o.layers : md->dit_layers;
    if (te_layers > md->te_layers) te_layers = md->te_layers;
    int vision_layers = o.layers && o.layers < md->vision_layers ? o.layers : md->vision_layers;
    s = cq_imagine_pack_build(md, o.quant, te_layers, vision_layers, dit_layers, r.tmpl, &r.pack);
    if (s != CQ_OK) return fail(&r, s, "listing the weights");
    print_pack(&o, &r.pack, te_layers, vision_layers, dit_layers);

    /* write, map, remove */
    cq_bench_file f = {.tag = "imagine", .header = r.pack.header, .tokenizer = r.tok, .tokenizer_len = r.tok_len,
                       .blobs = r.pack.blobs, .n_blobs = CQ_ARRAY_LEN(r.pack.blobs), .weights = &r.pack.weights,
                       .no_verify = o.m.no_verify, .threads = o.m.threads, .cold = o.m.cold};
    uint64_t file_bytes;
    char b1[32];
    mark m_w0 = mark_now();
    s = cq_bench_pack_map(&f, &r.cmf, &file_bytes);
    mark m_w1 = mark_now();
    if (s != CQ_OK) return fail(&r, s, "writing the temporary model");
    cq_bench_pack_free(&r.pack.weights);
    cq_free(r.tok);
    r.tok = NULL;
    printf("file %s written, read back and mapped in %.1f s (temporary, already removed)\n",
           cq_fmt_bytes(file_bytes, b1, sizeof b1), m_w1.wall - m_w0.wall);
    /* the read-back maps and reads the whole file: the pipeline's own peak starts here */
    uint64_t peak_write = cq_bench_peak_rss();
    bool peak_reset = cq_bench_reset_peak_rss();

    /* load */
    mark m_l0, m_l1;
    double open_s = 0;
    s = load_timed(&r, &o, &m_l0, &m_l1, &open_s);
    int total = 0, rows = 0, cond = 0;
    if (s == CQ_OK && o.n_images) {
        s = write_pictures(&r, o.n_images, o.m.size);
        if (s != CQ_OK) return fail(&r, s, "writing the input pictures");
    }
    if (s == CQ_OK) {
        const cq_imagine_req rq = request(&r, &o, NULL);
        s = cq_imagine_pipe_tokens(&r.pipe, &rq, &total, &rows, &cond);
    }
    if (s != CQ_OK) return fail(&r, s, "loading the pipeline");
    int threads = o.m.threads > 0 ? o.m.threads : cq_default_threads();
    char budget[48] = "";
    if (cq_backend_mem_budget(r.be)) {
        char b[32];
        snprintf(budget, sizeof budget, ", device-memory budget %s", cq_fmt_bytes(cq_backend_mem_budget(r.be), b, sizeof b));
    }
    printf("backend %s%s, %d threads; prompt \"%s\": %d tokens, %d %s\n", cq_backend_name(r.be), budget, threads,
           o.prompt, total, rows, md->rows);
    if (r.n_pics)
        printf("%d input picture%s of %dx%d (generated, under $TMPDIR): %d condition tokens in every step\n", r.n_pics,
               r.n_pics == 1 ? "" : "s", o.m.size, o.m.size, cond);
    print_upload(r.be, m_l1.wall - m_l0.wall, open_s);
    if (cq_backend_mem_budget(r.be)) print_need(cq_imagine_pipe_need(&r.pipe));
    fflush(stdout);

    /* generate */
    watch w = {.threads = threads, .be = cq_backend_is_host(r.be) ? NULL : r.be};
    r.steps = cq_calloc((size_t)o.steps, sizeof *r.steps);
    r.st = cq_calloc((size_t)o.steps, sizeof *r.st);
    if (!r.steps || !r.st) return fail(&r, CQ_ERR_NOMEM, "generating");
    cq_image_result res;
    double step_med = 0;
    s = generate(&r, &o, &w, &res, &step_med);
    if (s != CQ_OK) return fail(&r, s, "generating");
    double lat_max = 0, img_max = 0;
    bool finite = all_finite(res.latents, (size_t)res.tokens * res.latent_channels, &lat_max) &&
                  all_finite(res.image, (size_t)res.channels * res.width * res.height, &img_max);
    int tokens = res.tokens;
    cq_image_result_free(&res);
    if (!finite) return fail(&r, cq_fail(CQ_ERR_NUMERIC, "the latents or the image hold non-finite values"), "checking");

    /* report */
    print_phases(&r, &o, &w, &m_l0, &m_l1, total, rows, tokens, cond, threads, step_med);
    if (peak_reset)
        printf("peak resident memory %.2f GiB from load to image (mapped weights included), %.2f GiB while the file\n"
               "was read back; file %s (%.2f GiB)\n",
               (double)cq_bench_peak_rss() / GIB, (double)peak_write / GIB, cq_fmt_bytes(file_bytes, b1, sizeof b1),
               (double)file_bytes / GIB);
    else
        printf("peak resident memory %.2f GiB (mapped weights included; the file's read-back too); file %s (%.2f GiB)\n",
               (double)cq_bench_peak_rss() / GIB, cq_fmt_bytes(file_bytes, b1, sizeof b1), (double)file_bytes / GIB);
    printf("values finite throughout: final latents max |x| %.3g, image max |x| %.3g (the decoder clamps to 1)\n",
           lat_max, img_max);
    printf("CPU share = CPU time / (wall time x %d threads): below ~90%% the machine was busy with other work\n",
           threads);
    if (!cq_backend_is_host(r.be)) {
        budget_row runs[1 + CQ_ARRAY_LEN(o.more)] = {{0}};
        runs[0] = budget_of(r.be, &r.pipe, &w, &m_l0, &m_l1, step_med, o.steps);
        s = more_budgets(&r, &o, threads, runs + 1);
        if (s != CQ_OK) return fail(&r, s, "creating the backend");
        print_rows(runs, 1 + o.n_more);
    }
    run_free(&r);
    return 0;
}
