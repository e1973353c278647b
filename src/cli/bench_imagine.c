/*
 * bench_imagine.c — `cortiq bench imagine`: Qwen-Image-2.1 text to image end
 * to end, at the released model's configuration, with random weights.
 *
 * One temporary pack holds what `cortiq convert` makes of the diffusers
 * pipeline folder, at full size: the language half of Qwen3-VL-8B as text
 * tower (36 layers, 4096 wide, 32 heads / 8 K-V heads x 128, MLP 12288,
 * vocabulary 151936, RoPE theta 5e6 with interleaved mrope [24, 20, 20]; no
 * vision tower and no lm_head, which text to image never reads), the 7B
 * denoiser, the VAE (base 96, decoder base 144, z 64, dim_mult 1-2-4-8-8, two
 * residual blocks per level, f16 kernels), the scheduler config, the Qwen
 * tokenizer and the Qwen3-VL chat template (both from tests/fixtures). The
 * weights are random bytes in each codec's layout (bench_pack.c), the matrices
 * in the convert defaults: q8_2f, or q4tp for the denoiser with --quant q4tp
 * (the text tower stays at 8 bits, as convert keeps it).
 *
 * Then the real pipeline runs (cq_qi21_pipe_load + cq_qi21_pipe_generate) and
 * every phase is timed by the pipeline's phase and step callbacks: wall time,
 * process CPU time (on a busy machine the wall time says little alone) and
 * resident memory after it. The report projects 40 steps from the median
 * step.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gz.h"
#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "format/file_read.h"
#include "models/tables.h"
#include "ops/ops.h"
#include "pipelines/qi21_pipe.h"
#include "pipelines/residency.h"

#ifndef CQ_BENCH_FIXTURES
#define CQ_BENCH_FIXTURES "tests/fixtures"
#endif

/* The text tower: Qwen3-VL-8B's language model. */
#define TE_LAYERS 36
#define TE_HIDDEN 4096
#define TE_HEADS 32
#define TE_KV_HEADS 8
#define TE_HEAD_DIM 128
#define TE_INTER 12288
#define TE_VOCAB 151936
#define TE_MAX_POS 262144

/* The VAE. */

#define PROJECT_STEPS 40
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct bench_opts {
    cq_bench_model_opts m;
    int steps, layers;
    cq_dtype quant;
    const char *prompt, *tokenizer, *chat_template;
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
    printf("usage: cortiq bench imagine [--size 256|512|1024|2048] [--steps N] [--quant q8_2f|q4tp]\n"
           "                            [--threads N] [--backend cpu|cuda] [--prompt TEXT] [--tokenizer FILE]\n"
           "                            [--chat-template FILE] [--layers N] [--gpu-memory GiB[,GiB...]]\n"
           "                            [--cold] [--no-verify]\n"
           "\n"
           "Time Qwen-Image-2.1 text to image end to end at the released configuration with random\n"
           "weights: the Qwen3-VL-8B text tower (36 layers, 4096 wide), the 7B denoiser and the VAE\n"
           "(base 96/144, z 64), with the real tokenizer, chat template and scheduler. The pack is\n"
           "written to a temporary .cmf under $TMPDIR (default /tmp; 14.3 GiB with q8_2f, 11.1 GiB with\n"
           "q4tp; the free space is checked first) and mapped as a real model is; the file is\n"
           "removed as soon as it is mapped, and also when the run fails or is interrupted.\n"
           "\n"
           "Then the pipeline runs once and reports, per phase (load, text tower, prefill, each step,\n"
           "VAE decode): wall time, CPU time of all threads and resident memory after it; the total\n"
           "for --steps and for %d steps projected from the median step; the peak resident memory\n"
           "(mapped weights included) and the file size.\n"
           "\n"
           "options:\n"
           "  --size N             image side in pixels: 256 (default), 512, 1024 or 2048 (the last two\n"
           "                       are for a GPU: a CPU step at 1024 takes tens of minutes)\n"
           "  --steps N            denoising steps actually run, 2..100 (default 2)\n"
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
           "                       step, VAE and total times, and the device memory measured at its peak\n"
           "  --cold               drop the pack's pages from the page cache before the load, so it reads\n"
           "                       the disk (needs TMPDIR on a disk: tmpfs such as /dev/shm keeps them)\n"
           "  --no-verify          load without checking each tensor's hash (the load's time with and\n"
           "                       without it is what the check costs)\n"
           "  --prompt TEXT        the prompt (default: a fixed 15-word one)\n"
           "  --tokenizer FILE     Qwen tokenizer.json, optionally gzip-compressed\n"
           "                       (default: %s/tokenizers/qwen3.json.gz)\n"
           "  --chat-template FILE the processor's chat template\n"
           "                       (default: %s/chat_templates/qwen3_vl.jinja)\n"
           "  --layers N           build only the first N layers of the text tower and the denoiser: a\n"
           "                       quick check of the whole path (the times are then not the model's)\n"
           "  -h, --help           this text\n",
           PROJECT_STEPS, CQ_BENCH_FIXTURES, CQ_BENCH_FIXTURES);
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--quant") == 0) return cq_bench_quant_arg(cmd, v, false, i, &o->quant);
    if (strcmp(a, "--steps") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 2, 100, &n)) return 2;
        o->steps = (int)n;
    } else if (strcmp(a, "--layers") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, CQ_BENCH_DIT_LAYERS, &n)) return 2;
        o->layers = (int)n;
    } else if (strcmp(a, "--gpu-memory") == 0) {
        if (!v) return cq_cli_usage_error(cmd, "--gpu-memory needs a size in GiB, e.g. 7.5");
        /* a comma-separated list; "default" is the backend's default */
        char buf[256];
        uint64_t one;
        if (!*v && cq_env_parse_gib(v, &one) != CQ_OK) return cq_cli_usage_error(cmd, "--gpu-memory: %s", cq_last_error());
        if (strlen(v) >= sizeof buf) return cq_cli_usage_error(cmd, "--gpu-memory: the list is too long");
        strcpy(buf, v);
        o->n_more = -1;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            uint64_t b = 0;
            if (strcmp(t, "default") && cq_env_parse_gib(t, &b) != CQ_OK)
                return cq_cli_usage_error(cmd, "--gpu-memory: %s", cq_last_error());
            if (o->n_more < 0) {
                o->gpu_memory = b;
            } else {
                if (o->n_more >= (int)CQ_ARRAY_LEN(o->more))
                    return cq_cli_usage_error(cmd, "--gpu-memory: at most %d budgets", (int)CQ_ARRAY_LEN(o->more) + 1);
                o->more[o->n_more] = b;
            }
            o->n_more++;
        }
        if (o->n_more < 0) return cq_cli_usage_error(cmd, "--gpu-memory needs a size in GiB, e.g. 7.5");
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

static int parse(int argc, char **argv, bench_opts *o, bool *done) {
    return cq_bench_model_args("bench imagine", argc, argv, &o->m, help, opt, o, done);
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

/* ---- the pack's contents ---------------------------------------------------------------------- */
static cq_status te_weights(cq_bench_pack *p, int layers) {
    const cq_qwen3_config c = {.vocab_size = TE_VOCAB, .hidden = TE_HIDDEN, .intermediate = TE_INTER,
                               .n_layers = layers, .n_heads = TE_HEADS, .n_kv_heads = TE_KV_HEADS,
                               .head_dim = TE_HEAD_DIM};
    cq_tt_list t = {0};
    cq_status s = cq_qwen3_tensors(&c, "te.", "model.language_model.", &t);
    /* the table ends with the optional head, which the text tower never reads */
    if (s == CQ_OK && t.n && strcmp(t.e[t.n - 1].pattern, "lm_head.weight") == 0) t.n--;
    /* convert keeps the text tower at 8 bits */
    if (s == CQ_OK) s = cq_bench_pack_table(p, &t, CQ_DTYPE_Q8_2F);
    cq_tt_list_free(&t);
    return s;
}

/* Qwen3-VL-8B's config.json (the vision part left out: text to image never runs it). */
static const char k_te_config[] =
    "{\"architectures\": [\"Qwen3VLForConditionalGeneration\"], \"model_type\": \"qwen3_vl\", "
    "\"image_token_id\": 151655, \"video_token_id\": 151656, \"vision_start_token_id\": 151652, "
    "\"vision_end_token_id\": 151653, \"tie_word_embeddings\": false, \"text_config\": {"
    "\"attention_bias\": false, \"attention_dropout\": 0.0, \"head_dim\": 128, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 12288, "
    "\"max_position_embeddings\": 262144, \"model_type\": \"qwen3_vl_text\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": %d, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, \"rope_parameters\": "
    "{\"mrope_interleaved\": true, \"mrope_section\": [24, 20, 20], \"rope_theta\": 5000000.0, \"rope_type\": "
    "\"default\"}, \"use_cache\": true, \"vocab_size\": 151936}}";

static const char k_scheduler_config[] =
    "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"base_image_seq_len\": 256, \"base_shift\": 0.5, "
    "\"invert_sigmas\": false, \"max_image_seq_len\": 8192, \"max_shift\": 0.9, \"num_train_timesteps\": 1000, "
    "\"shift\": 1.0, \"shift_terminal\": 0.02, \"stochastic_sampling\": false, \"time_shift_type\": \"exponential\", "
    "\"use_beta_sigmas\": false, \"use_dynamic_shifting\": true, \"use_exponential_sigmas\": false, "
    "\"use_karras_sigmas\": false}";

static const char k_pipeline_config[] =
    "{\"_class_name\": \"QwenImage21Pipeline\", \"processor\": [\"transformers\", \"Qwen3VLProcessor\"], "
    "\"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], \"text_encoder\": [\"transformers\", "
    "\"Qwen3VLForConditionalGeneration\"], \"transformer\": [\"diffusers\", \"QwenImage21Transformer2DModel\"], "
    "\"vae\": [\"diffusers\", \"AutoencoderKLQwenImage21\"]}";

/* The VAE config; the latent statistics (per-channel mean and std) are random too. */
/* The header as convert writes it for a pipeline: the denoiser's shape as arch, the chat bundle. */
static char *header_json(cq_dtype quant, int dit_layers, const char *chat_template) {
    cJSON *h = cJSON_CreateObject(), *arch = cJSON_AddObjectToObject(h, "arch");
    cJSON_AddStringToObject(h, "format", "cmf");
    cJSON_AddNumberToObject(h, "version", 2);
    cJSON_AddStringToObject(arch, "arch_name", "qwen_image21");
    cJSON_AddNumberToObject(arch, "hidden_size", CQ_BENCH_DIT_HEADS * CQ_BENCH_DIT_HEAD_DIM);
    cJSON_AddNumberToObject(arch, "intermediate_size", CQ_BENCH_DIT_HEADS * CQ_BENCH_DIT_HEAD_DIM * CQ_BENCH_DIT_RATIO);
    cJSON_AddNumberToObject(arch, "num_layers", dit_layers);
    cJSON_AddNumberToObject(arch, "num_attention_heads", CQ_BENCH_DIT_HEADS);
    cJSON_AddNumberToObject(arch, "num_kv_heads", CQ_BENCH_DIT_HEADS);
    cJSON_AddNumberToObject(arch, "head_dim", CQ_BENCH_DIT_HEAD_DIM);
    cJSON_AddNumberToObject(arch, "vocab_size", TE_VOCAB);
    cJSON_AddNumberToObject(arch, "max_position_embeddings", TE_MAX_POS);
    cJSON_AddNumberToObject(arch, "rms_norm_eps", 1e-6);
    cJSON *lt = cJSON_AddArrayToObject(arch, "layer_types");
    for (int l = 0; l < dit_layers; l++) cJSON_AddItemToArray(lt, cJSON_CreateString("FullAttention"));
    cJSON_AddStringToObject(h, "quant_type", quant == CQ_DTYPE_Q8_2F ? "Q8_2F" : "Q4_BLOCK");
    cJSON *prov = cJSON_AddObjectToObject(h, "provenance");
    cJSON_AddStringToObject(prov, "tool", "cortiq bench imagine");
    cJSON_AddStringToObject(prov, "source", "random weights");
    cJSON *tok = cJSON_AddObjectToObject(h, "tokenizer_config");
    cJSON_AddStringToObject(tok, "chat_template", chat_template);
    int eos = 151645;
    cJSON_AddItemToObject(tok, "eos_token_ids", cJSON_CreateIntArray(&eos, 1));
    cJSON_AddNumberToObject(tok, "pad_token_id", 151643);
    char *s = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    return s;
}

/* ---- timing the pipeline ---------------------------------------------------------------------- */
typedef struct mark {
    double wall, cpu;
    uint64_t rss;
    bool set;
} mark;

typedef struct watch {
    mark phase[CQ_QI21_PHASE_DONE + 1]; /* when each phase began (DONE: when the VAE ended) */
    mark *step;                         /* [steps]: when each step ended */
    int threads;
    cq_backend *be;                     /* a device backend: its streamed bytes read at each phase */
    uint64_t streamed[CQ_QI21_PHASE_DONE + 1];
    uint64_t pinned;                    /* page-locked host bytes of streamed weights when the steps began */
    const cq_qi21_pipe *pipe;           /* its seconds of binds and releases read at each phase */
    double staged0, staged[CQ_QI21_PHASE_DONE + 1];
} watch;

static double stage_seconds(const cq_qi21_pipe *p) {
    const cq_resid *r = p ? cq_qi21_pipe_residency(p) : NULL;
    return r ? r->stage_s : 0;
}

static mark mark_now(void) { return (mark){cq_now(), cq_bench_cpu_seconds(), cq_bench_rss(), true}; }

/* the binds and releases inside the text phase's interval: those of the stage before the prefill */
static double text_binds(const watch *w) { return w->staged[CQ_QI21_PHASE_PREFILL] - w->staged[CQ_QI21_PHASE_TEXT]; }

static void on_phase(cq_qi21_phase ph, void *user) {
    watch *w = user;
    cq_backend_stats st;
    /* the stats wait for the queued work: the phases' times stay their own */
    if (w->be && (ph == CQ_GEN_PHASE_STEPS || ph == CQ_GEN_PHASE_VAE) && cq_backend_get_stats(w->be, &st, false) == CQ_OK)
        w->streamed[ph] = st.streamed_bytes, w->pinned = ph == CQ_GEN_PHASE_STEPS ? st.host_pinned : w->pinned;
    w->phase[ph] = mark_now();
    w->staged[ph] = stage_seconds(w->pipe);
    static const char *const what[] = {"text tower", "prefill", "denoising", "VAE decode", NULL};
    if (what[ph]) {
        fprintf(stderr, "  %s...\n", what[ph]);
        fflush(stderr);
    }
}

static int on_step(int step, int n, void *user) {
    watch *w = user;
    w->step[step - 1] = mark_now();
    const mark *from = step > 1 ? &w->step[step - 2] : &w->phase[CQ_QI21_PHASE_STEPS];
    fprintf(stderr, "    step %d/%d: %.1f s\n", step, n, w->step[step - 1].wall - from->wall);
    fflush(stderr);
    return 0;
}

static void row(const char *label, const mark *a, const mark *b, int threads) {
    double wall = b->wall - a->wall, cpu = b->cpu - a->cpu;
    char rss[32] = "-";
    if (b->rss) snprintf(rss, sizeof rss, "%.2f GiB", (double)b->rss / GIB);
    printf("%-34s %9.2f %9.2f %8.0f%% %11s\n", label, wall, cpu, wall > 0 ? 100.0 * cpu / (wall * threads) : 0.0, rss);
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

/* The device memory figures and the plan of a finished run. */
static void row_memory(cq_backend *be, const cq_qi21_pipe *pipe, const watch *w, int steps, budget_row *b) {
    cq_backend_stats st;
    b->budget = cq_backend_mem_budget(be);
    b->pinned = w->pinned;
    b->streamed_step = (w->streamed[CQ_QI21_PHASE_VAE] - w->streamed[CQ_QI21_PHASE_STEPS]) / (uint64_t)(steps > 0 ? steps : 1);
    if (cq_backend_get_stats(be, &st, false) == CQ_OK) {
        b->peak = st.mem_peak;
        b->weights = st.weight_bytes;
        b->cached = st.mem_cached;
        b->dev_used = st.device_total - st.device_free;
    }
    cq_resid_plan_describe(&cq_qi21_pipe_residency(pipe)->plan, b->plan, sizeof b->plan);
}

/* ---- the run ------------------------------------------------------------------------------------ */
typedef struct bench_run {
    char *tok, *tmpl, *vae_cfg, *hdr;
    size_t tok_len, tmpl_len;
    cq_bench_pack pack;
    cq_cmf *cmf;
    cq_backend *be;
    cq_qi21_pipe *pipe;
    mark *steps;
} bench_run;

/* cq_qi21_pipe_load in its two halves, the first (the tokenizer, the template, the configs) timed. */
static cq_status load_pipe(bench_run *r, double *open_s) {
    const double t0 = cq_now();
    CQ_TRY(cq_qi21_pipe_open(r->cmf, &r->pipe));
    *open_s = cq_now() - t0;
    cq_status s = cq_qi21_pipe_load_weights(r->pipe, r->be);
    if (s != CQ_OK) {
        cq_qi21_pipe_free(r->pipe);
        r->pipe = NULL;
    }
    return s;
}

static void run_free(bench_run *r) {
    cq_qi21_pipe_free(r->pipe);
    cq_backend_free(r->be);
    cq_cmf_close(r->cmf);
    cq_bench_pack_free(&r->pack);
    cJSON_free(r->hdr);
    cJSON_free(r->vae_cfg);
    cq_free(r->tok);
    cq_free(r->tmpl);
    cq_free(r->steps);
}

static int fail(bench_run *r, cq_status s, const char *what) {
    int rc = cq_cli_fail("bench imagine", s, what);
    run_free(r);
    return rc;
}

int cq_bench_imagine(int argc, char **argv) {
    bench_opts o = {.m = {.size = 256, .backend = "cpu"}, .steps = 2, .quant = CQ_DTYPE_Q8_2F, .layers = 0,
                    .prompt = "a red fox sitting in a snowy birch forest at dawn, soft golden light, detailed fur",
                    .tokenizer = CQ_BENCH_FIXTURES "/tokenizers/qwen3.json.gz",
                    .chat_template = CQ_BENCH_FIXTURES "/chat_templates/qwen3_vl.jinja"};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    bench_run r = {0};
    /* the backend first: a missing GPU fails before gigabytes of weights are written */
    cq_status s = cq_env_backend_open(o.m.backend, o.m.threads, o.gpu_memory, &r.be);
    if (s != CQ_OK) return fail(&r, s, "creating the backend");
    s = read_input(o.tokenizer, "tokenizer", &r.tok, &r.tok_len);
    if (s == CQ_OK) s = read_input(o.chat_template, "chat template", &r.tmpl, &r.tmpl_len);
    if (s != CQ_OK) return fail(&r, s, "reading the inputs");

    /* the pack: text tower, denoiser, VAE */
    int te_layers = o.layers ? o.layers : TE_LAYERS, dit_layers = o.layers ? o.layers : CQ_BENCH_DIT_LAYERS;
    s = te_weights(&r.pack, te_layers);
    uint64_t b_te = cq_bench_pack_bytes(&r.pack);
    if (s == CQ_OK) s = cq_bench_dit_weights(&r.pack, o.quant, dit_layers);
    uint64_t b_dit = cq_bench_pack_bytes(&r.pack) - b_te;
    if (s == CQ_OK) s = cq_bench_vae_weights(&r.pack);
    uint64_t b_all = cq_bench_pack_bytes(&r.pack), b_vae = b_all - b_te - b_dit;
    char dit_cfg[512], te_cfg[sizeof k_te_config + 16];
    snprintf(te_cfg, sizeof te_cfg, k_te_config, te_layers);
    r.vae_cfg = cq_bench_vae_config();
    r.hdr = header_json(o.quant, dit_layers, r.tmpl);
    if (s == CQ_OK && (!r.vae_cfg || !r.hdr || cq_bench_dit_config(dit_cfg, sizeof dit_cfg, dit_layers) < 0))
        s = CQ_ERR_NOMEM;
    if (s != CQ_OK) return fail(&r, s, "listing the weights");

    char b1[32], b2[32], b3[32], b4[32];
    if (o.layers)
        printf("ONLY %d of the 36 text tower layers and %d of the 32 denoiser layers are built (--layers)\n", te_layers,
               dit_layers);
    printf("Qwen-Image-2.1 text to image, real configuration, random weights\n"
           "  text tower  Qwen3-VL-8B language model (36 layers, 4096 wide, 32/8 heads x 128, MLP 12288): q8_2f, %s\n"
           "  denoiser    7B (32 layers, 32 heads x 128, MLP 12288): %s, %s\n"
           "  VAE         base 96/144, z 64, dim_mult 1-2-4-8-8, 2 res blocks: f16 kernels, %s\n"
           "  weights     %s in all\n",
           cq_fmt_bytes(b_te, b1, sizeof b1), cq_dtype_name(o.quant), cq_fmt_bytes(b_dit, b2, sizeof b2),
           cq_fmt_bytes(b_vae, b3, sizeof b3), cq_fmt_bytes(b_all, b4, sizeof b4));
    uint64_t ram = cq_bench_ram();
    if (ram) {
        /* mapped pages are file pages: the kernel can drop and re-read them, but a run whose weights
         * do not stay resident reads the disk in every phase */
        bool fits = b_all + ((uint64_t)2 << 30) <= ram;
        printf("  memory      %s of RAM: the weights %s\n", cq_fmt_bytes(ram, b1, sizeof b1),
               fits ? "fit with 2 GiB to spare" : "do NOT fit with 2 GiB to spare");
        if (!fits && o.quant == CQ_DTYPE_Q8_2F)
            printf("              (--quant q4tp makes the denoiser about 3.3 GiB smaller)\n");
    }
    fflush(stdout);

    /* write, map, remove */
    cq_bench_blob blobs[] = {{"te.config_json", te_cfg, strlen(te_cfg)},
                             {"dit.config_json", dit_cfg, strlen(dit_cfg)},
                             {"vae.config_json", r.vae_cfg, strlen(r.vae_cfg)},
                             {"pipeline.config_json", k_pipeline_config, sizeof k_pipeline_config - 1},
                             {"scheduler.config_json", k_scheduler_config, sizeof k_scheduler_config - 1}};
    cq_bench_file f = {.tag = "imagine", .header = r.hdr, .tokenizer = r.tok, .tokenizer_len = r.tok_len,
                       .blobs = blobs, .n_blobs = CQ_ARRAY_LEN(blobs), .weights = &r.pack,
                       .no_verify = o.m.no_verify, .threads = o.m.threads, .cold = o.m.cold};
    uint64_t file_bytes;
    mark m_w0 = mark_now();
    s = cq_bench_pack_map(&f, &r.cmf, &file_bytes);
    mark m_w1 = mark_now();
    if (s != CQ_OK) return fail(&r, s, "writing the temporary model");
    cq_bench_pack_free(&r.pack);
    cq_free(r.tok);
    r.tok = NULL;
    printf("file %s written, read back and mapped in %.1f s (temporary, already removed)\n",
           cq_fmt_bytes(file_bytes, b1, sizeof b1), m_w1.wall - m_w0.wall);
    /* the read-back maps and reads the whole file: the pipeline's own peak starts here */
    uint64_t peak_write = cq_bench_peak_rss();
    bool peak_reset = cq_bench_reset_peak_rss();

    /* load (a device backend uploads and decodes asynchronously: waited for, so the load's time is its own) */
    mark m_l0 = mark_now();
    double open_s = 0;
    s = load_pipe(&r, &open_s);
    if (s == CQ_OK) s = cq_backend_sync(r.be);
    mark m_l1 = mark_now();
    int total = 0, rows = 0;
    if (s == CQ_OK) s = cq_qi21_pipe_prompt_tokens(r.pipe, o.prompt, &total, &rows);
    if (s != CQ_OK) return fail(&r, s, "loading the pipeline");
    int threads = o.m.threads > 0 ? o.m.threads : cq_default_threads();
    char budget[48] = "";
    if (cq_backend_mem_budget(r.be)) {
        char b[32];
        snprintf(budget, sizeof budget, ", device-memory budget %s", cq_fmt_bytes(cq_backend_mem_budget(r.be), b, sizeof b));
    }
    printf("backend %s%s, %d threads; prompt \"%s\": %d tokens, %d rows after the system turn\n",
           cq_backend_name(r.be), budget, threads, o.prompt, total, rows);
    print_upload(r.be, m_l1.wall - m_l0.wall, open_s);
    if (cq_backend_mem_budget(r.be)) {
        const cq_resid_need *nd = cq_qi21_pipe_need(r.pipe);
        printf("device bytes planned (GiB): %-13s %8s %8s %8s %13s %11s\n", "part", "planes", "compact", "slot",
               "stream slots", "activations");
        for (int part = 0; part < CQ_PART_COUNT; part++)
            printf("                            %-13s %8.2f %8.2f %8.2f %13.2f %11.2f\n", cq_part_name((cq_part)part),
                   (double)nd->weights[part][CQ_WEIGHTS_DEFAULT] / GIB, (double)nd->weights[part][CQ_WEIGHTS_COMPACT] / GIB,
                   (double)nd->slot[part][CQ_WEIGHTS_COMPACT] / GIB, (double)nd->slot[part][CQ_WEIGHTS_STREAMED] / GIB,
                   (double)nd->act[part] / GIB);
    }
    fflush(stdout);

    /* generate */
    watch w = {.threads = threads, .be = cq_backend_is_host(r.be) ? NULL : r.be};
    r.steps = cq_calloc((size_t)o.steps, sizeof *r.steps);
    if (!r.steps) return fail(&r, CQ_ERR_NOMEM, "generating");
    w.step = r.steps;
    w.pipe = r.pipe;
    w.staged0 = stage_seconds(r.pipe);
    cq_qi21_gen_opts go = {.prompt = o.prompt, .width = o.m.size, .height = o.m.size, .steps = o.steps, .seed = 42,
                           .guidance = 1.0, .on_step = on_step, .on_phase = on_phase, .user = &w};
    cq_qi21_result res;
    s = cq_qi21_pipe_generate(r.pipe, &go, &res);
    if (s != CQ_OK) return fail(&r, s, "generating");
    double lat_max = 0, img_max = 0;
    bool finite = all_finite(res.latents, (size_t)res.tokens * res.latent_channels, &lat_max) &&
                  all_finite(res.image, (size_t)res.channels * res.width * res.height, &img_max);
    int tokens = res.tokens;
    cq_qi21_result_free(&res);
    if (!finite) return fail(&r, cq_fail(CQ_ERR_NUMERIC, "the latents or the image hold non-finite values"), "checking");

    /* report */
    const mark *ph = w.phase;
    char label[64];
    printf("\n%-34s %9s %9s %9s %11s\n", "phase", "wall s", "CPU s", "CPU share", "RSS after");
    row("load (weights bound in place)", &m_l0, &m_l1, threads);
    snprintf(label, sizeof label, "text tower (%d tokens)", total);
    row(label, &ph[CQ_QI21_PHASE_TEXT], &ph[CQ_QI21_PHASE_PREFILL], threads);
    printf("  of which binds and releases %.2f s (the parts the prefill needs bound, those it does not released)\n",
           text_binds(&w));
    snprintf(label, sizeof label, "prefill (%d text rows)", rows);
    row(label, &ph[CQ_QI21_PHASE_PREFILL], &ph[CQ_QI21_PHASE_STEPS], threads);
    double *st = cq_mallocn((size_t)o.steps, sizeof *st);
    if (!st) return fail(&r, CQ_ERR_NOMEM, "reporting");
    for (int i = 0; i < o.steps; i++) {
        const mark *a = i ? &r.steps[i - 1] : &ph[CQ_QI21_PHASE_STEPS];
        snprintf(label, sizeof label, "step %d/%d (%dx%d, %d tokens)", i + 1, o.steps, o.m.size, o.m.size, tokens);
        row(label, a, &r.steps[i], threads);
        st[i] = r.steps[i].wall - a->wall;
    }
    snprintf(label, sizeof label, "%d steps", o.steps);
    row(label, &ph[CQ_QI21_PHASE_STEPS], &ph[CQ_QI21_PHASE_VAE], threads);
    snprintf(label, sizeof label, "VAE decode (%dx%d)", o.m.size, o.m.size);
    row(label, &ph[CQ_QI21_PHASE_VAE], &ph[CQ_QI21_PHASE_DONE], threads);
    mark end = ph[CQ_QI21_PHASE_DONE];
    snprintf(label, sizeof label, "total, %d steps (load to image)", o.steps);
    row(label, &m_l0, &end, threads);
    double step_med = cq_bench_median(st, o.steps);
    double *st_k = st; /* reused by the further budgets' runs */
    double fixed = (m_l1.wall - m_l0.wall) + (ph[CQ_QI21_PHASE_STEPS].wall - ph[CQ_QI21_PHASE_TEXT].wall) +
                   (end.wall - ph[CQ_QI21_PHASE_VAE].wall);
    printf("\nmedian step %.2f s; %d steps projected: %.1f s = load + text + prefill + VAE (%.1f s) + %d x %.2f s\n",
           step_med, PROJECT_STEPS, fixed + PROJECT_STEPS * step_med, fixed, PROJECT_STEPS, step_med);
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
        runs[0] = (budget_row){.ok = true, .load = m_l1.wall - m_l0.wall,
                               .text = ph[CQ_QI21_PHASE_PREFILL].wall - ph[CQ_QI21_PHASE_TEXT].wall - text_binds(&w),
                               .binds = w.staged[CQ_QI21_PHASE_DONE] - w.staged0, .step = step_med,
                               .vae = end.wall - ph[CQ_QI21_PHASE_VAE].wall, .total = end.wall - m_l0.wall};
        row_memory(r.be, r.pipe, &w, o.steps, &runs[0]);
        for (int k = 0; k < o.n_more; k++) {
            budget_row *b = &runs[1 + k];
            cq_qi21_pipe_free(r.pipe);
            r.pipe = NULL;
            cq_backend_free(r.be);
            r.be = NULL;
            printf("\n== budget %d of %d\n", 2 + k, 1 + o.n_more);
            fflush(stdout);
            s = cq_env_backend_open(o.m.backend, o.m.threads, o.more[k], &r.be);
            if (s != CQ_OK) return fail(&r, s, "creating the backend");
            b->budget = cq_backend_mem_budget(r.be);
            mark l0 = mark_now();
            s = load_pipe(&r, &open_s);
            if (s == CQ_OK) s = cq_backend_sync(r.be);
            mark l1 = mark_now();
            if (s == CQ_OK) print_upload(r.be, l1.wall - l0.wall, open_s);
            watch w2 = {.threads = threads, .step = r.steps, .be = r.be, .pipe = r.pipe, .staged0 = stage_seconds(r.pipe)};
            go.user = &w2;
            if (s == CQ_OK) s = cq_qi21_pipe_generate(r.pipe, &go, &res);
            if (s == CQ_OK) s = cq_backend_sync(r.be);
            if (s != CQ_OK) {
                snprintf(b->err, sizeof b->err, "%s", cq_last_error());
                cq_clear_error();
                continue;
            }
            cq_qi21_result_free(&res);
            for (int i = 0; i < o.steps; i++)
                st_k[i] = r.steps[i].wall - (i ? r.steps[i - 1].wall : w2.phase[CQ_QI21_PHASE_STEPS].wall);
            *b = (budget_row){.ok = true, .load = l1.wall - l0.wall,
                              .text = w2.phase[CQ_QI21_PHASE_PREFILL].wall - w2.phase[CQ_QI21_PHASE_TEXT].wall -
                                      text_binds(&w2),
                              .binds = w2.staged[CQ_QI21_PHASE_DONE] - w2.staged0,
                              .step = cq_bench_median(st_k, o.steps),
                              .vae = w2.phase[CQ_QI21_PHASE_DONE].wall - w2.phase[CQ_QI21_PHASE_VAE].wall,
                              .total = w2.phase[CQ_QI21_PHASE_DONE].wall - l0.wall};
            row_memory(r.be, r.pipe, &w2, o.steps, b);
        }
        print_rows(runs, 1 + o.n_more);
    }
    cq_free(st_k);
    run_free(&r);
    return 0;
}
