/*
 * cmd_run.c — `cortiq run`: option parsing, the one-shot and interactive
 * (--chat) loops, streaming to stdout and timing to stderr around a chat
 * session of the public runtime API (cq_model, cq_session in
 * include/cortiq.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/env.h"
#include "format/cmf.h"
#include "pipelines/registry.h"
#include "pipelines/sampler.h"

static void help(void) {
    printf(
        "usage: cortiq run MODEL.cmf --prompt TEXT [options]\n"
        "       cortiq run MODEL.cmf --chat [--prompt FIRST] [options]\n"
        "\n"
        "Generate text with a language model converted by `cortiq convert` (Qwen3 family: the\n"
        "archs qwen3, qwen3_vl, qwen3_vl_text). The message is wrapped in the model's chat\n"
        "template (ChatML when the file has none), generated text streams to stdout, and\n"
        "token rates go to stderr. A reply ends at the\n"
        "model's stop tokens (the header's eos ids) or after --max-tokens.\n"
        "\n"
        "options:\n"
        "  -p, --prompt TEXT   the user message (\"-\": read it from stdin); with --chat the first one\n"
        "  -s, --system TEXT   a system message before the conversation\n"
        "  --chat              interactive: one user message per line of stdin until EOF or /exit;\n"
        "                      the K/V cache is kept between turns (only new tokens are computed)\n"
        "  --greedy            always take the most likely token (same as --temperature 0)\n"
        "  --temperature T     sampling temperature (default 0.7)\n"
        "  --top-k K           keep the K most likely tokens (default 20; 0 = off)\n"
        "  --top-p P           keep the smallest set of tokens with probability >= P (default 0.8; 1 = off)\n"
        "  --min-p M           drop tokens below M x the top token's probability (default 0 = off)\n"
        "  --seed S            seed of the sampler (default: from the clock; printed with -v)\n"
        "  --max-tokens N      at most N tokens per reply (default 512)\n"
        "  --ctx N             context length in tokens (default: the model's maximum, at most 4096)\n"
        "  --threads N         worker threads (default: CORTIQ_THREADS or all cores)\n"
        "  --backend NAME      auto (default), cpu, ref, cuda[:N] or vulkan[:N]; also CORTIQ_BACKEND. auto\n"
        "                      takes the GPU (CUDA, compute capability 8.0 or newer) where there is one,\n"
        "                      else the CPU; one line on stderr says which and why (not with -q)\n"
        "  --gpu-memory GiB    the most device memory the GPU backend may use, e.g. 7.5 (default: what\n"
        "                      the device has free, less a margin); also CORTIQ_GPU_MEMORY\n"
        "  --think, --no-think set the template's enable_thinking (Qwen3) to true / false\n"
        "  --raw               no chat template: the model continues the prompt text\n"
        "  --print-ids         after each reply print its token ids to stderr: \"ids: 1 2 3 [stop 7]\"\n"
        "  --no-verify         do not check each tensor's hash when it is first read (the header and\n"
        "                      directory hashes are still checked; `cortiq verify` checks everything)\n"
        "  -v, --verbose       also print the backend and the seed\n"
        "  -q, --quiet         no token rates\n"
        "  -h, --help          this text\n"
        "\n"
        "Sampling order: temperature -> top-k -> top-p -> min-p, then one draw from a seeded\n"
        "generator; candidates are ranked by logit and then by id, so the same seed and options\n"
        "give the same text on every machine.\n"
        "\n"
        "examples:\n"
        "  cortiq run qwen3.cmf --prompt \"Why is the sky blue?\"\n"
        "  cortiq run qwen3.cmf --chat --system \"You are terse.\" --no-think\n"
        "  cortiq run qwen3.cmf --prompt \"Once upon a time\" --raw --greedy --max-tokens 64\n");
}

typedef struct run_opts {
    const char *model, *prompt, *system, *backend, *gpu_memory;
    cq_cli_backend be; /* chosen once the options are parsed */
    bool chat, raw, print_ids, verbose, quiet, seed_given, no_verify;
    int threads, max_tokens, ctx, thinking;
    cq_sampler_params sp;
} run_opts;

static bool parse_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out) {
    char *end;
    double v = val ? strtod(val, &end) : 0;
    if (!val || *val == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
        cq_cli_usage_error(cmd, "%s wants a number in [%g, %g], got '%s'", opt, lo, hi, val ? val : "");
        return false;
    }
    *out = (float)v;
    return true;
}

/* 0 = parsed, else the exit code. */
static int parse(int argc, char **argv, run_opts *o) {
    const char *cmd = "run";
    memset(o, 0, sizeof *o);
    o->max_tokens = 512;
    o->thinking = -1;
    o->sp = (cq_sampler_params){.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.0f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (cq_cli_is_help(a)) {
            help();
            return -1;
        } else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            if (!v) return cq_cli_usage_error(cmd, "%s needs the text", a);
            o->prompt = argv[++i];
        } else if (strcmp(a, "-s") == 0 || strcmp(a, "--system") == 0) {
            if (!v) return cq_cli_usage_error(cmd, "%s needs the text", a);
            o->system = argv[++i];
        } else if (strcmp(a, "--chat") == 0) {
            o->chat = true;
        } else if (strcmp(a, "--greedy") == 0) {
            o->sp.greedy = true;
        } else if (strcmp(a, "--temperature") == 0) {
            if (!parse_float(cmd, a, v, 0, 100, &o->sp.temperature)) return 2;
            i++;
            if (o->sp.temperature == 0) o->sp.greedy = true;
        } else if (strcmp(a, "--top-k") == 0) {
            if (!cq_cli_parse_int(cmd, a, v, 0, 1 << 24, &n)) return 2;
            o->sp.top_k = (int)n;
            i++;
        } else if (strcmp(a, "--top-p") == 0) {
            if (!parse_float(cmd, a, v, 1e-6, 1, &o->sp.top_p)) return 2;
            i++;
        } else if (strcmp(a, "--min-p") == 0) {
            if (!parse_float(cmd, a, v, 0, 1, &o->sp.min_p)) return 2;
            i++;
        } else if (strcmp(a, "--seed") == 0) {
            char *end;
            unsigned long long s = v ? strtoull(v, &end, 10) : 0;
            if (!v || !*v || *end || v[0] == '-') return cq_cli_usage_error(cmd, "--seed wants a non-negative integer");
            o->sp.seed = (uint64_t)s;
            o->seed_given = true;
            i++;
        } else if (strcmp(a, "--max-tokens") == 0) {
            if (!cq_cli_parse_int(cmd, a, v, 1, 1 << 24, &n)) return 2;
            o->max_tokens = (int)n;
            i++;
        } else if (strcmp(a, "--ctx") == 0) {
            if (!cq_cli_parse_int(cmd, a, v, 2, 1 << 24, &n)) return 2;
            o->ctx = (int)n;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (!cq_cli_parse_int(cmd, a, v, 1, 4096, &n)) return 2;
            o->threads = (int)n;
            i++;
        } else if (strcmp(a, "--backend") == 0) {
            if (!v) return cq_cli_usage_error(cmd, "--backend needs a name");
            o->backend = argv[++i];
        } else if (strcmp(a, "--gpu-memory") == 0) {
            if (!v) return cq_cli_usage_error(cmd, "--gpu-memory needs a size in GiB, e.g. 7.5");
            o->gpu_memory = argv[++i];
        } else if (strcmp(a, "--think") == 0 || strcmp(a, "--no-think") == 0) {
            o->thinking = strcmp(a, "--think") == 0;
        } else if (strcmp(a, "--raw") == 0) {
            o->raw = true;
        } else if (strcmp(a, "--print-ids") == 0) {
            o->print_ids = true;
        } else if (strcmp(a, "--no-verify") == 0) {
            o->no_verify = true;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            o->quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s' (quote the prompt and pass it with --prompt)", a);
        }
    }
    if (!o->model) return cq_cli_usage_error(cmd, "missing the model file");
    if (!o->chat && !o->prompt) return cq_cli_usage_error(cmd, "missing --prompt (or use --chat)");
    if (o->raw && (o->chat || o->system)) return cq_cli_usage_error(cmd, "--raw takes a single --prompt and no --system");
    const int rc = cq_cli_backend_pick(cmd, o->backend, "auto", o->gpu_memory, &o->be);
    if (rc) return rc;
    if (!o->seed_given) o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    return 0;
}

/* Whole stdin as the prompt ("--prompt -"). */
static char *read_stdin(void) {
    size_t n = 0, cap = 4096;
    char *b = cq_malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            char *nb = cq_realloc(b, cap * 2);
            if (!nb) cq_free(b);
            b = nb;
            cap *= 2;
        }
    }
    if (b) b[n] = 0;
    return b;
}

typedef struct turn_out {
    const run_opts *o;
    int32_t *ids;
    int n, cap;
} turn_out;

static int on_token(int32_t id, const char *text, size_t len, void *user) {
    turn_out *t = user;
    if (len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    if (t->n < t->cap) t->ids[t->n++] = id;
    return cq_cancel_requested() ? 1 : 0; /* Ctrl-C: the reply stops here */
}

static void report(const run_opts *o, const cq_turn_stats *st, const turn_out *t) {
    if (o->print_ids) {
        fprintf(stderr, "ids:");
        for (int i = 0; i < t->n; i++) fprintf(stderr, " %d", (int)t->ids[i]);
        if (st->stop_id >= 0) fprintf(stderr, " [stop %d]", (int)st->stop_id);
        fprintf(stderr, "\n");
    }
    if (st->context_full) fprintf(stderr, "cortiq run: the context is full (%s)\n", "raise --ctx");
    if (o->quiet) return;
    int fed = st->prompt_tokens - st->reused_tokens;
    fprintf(stderr, "[prompt: %d tokens (%d reused) in %.3f s, %.1f tokens/s | generation: %d tokens in %.3f s, %.1f tokens/s]\n",
            fed, st->reused_tokens, st->prefill_s, st->prefill_s > 0 ? fed / st->prefill_s : 0.0, st->generated,
            st->generate_s, st->generate_s > 0 ? st->generated / st->generate_s : 0.0);
}

static int one_turn(cq_session *chat, const run_opts *o, const char *msg, turn_out *t) {
    cq_turn_stats st;
    t->n = 0;
    cq_status s = cq_session_turn(chat, msg, on_token, t, &st);
    fputc('\n', stdout);
    fflush(stdout);
    if (cq_cli_signal()) return cq_cli_interrupted("run", "the reply was cut short");
    if (s != CQ_OK) return cq_cli_fail("run", s, "generation");
    report(o, &st, t);
    return 0;
}

static int chat_loop(cq_session *chat, const run_opts *o, turn_out *t) {
    bool tty = isatty(fileno(stdin));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (tty) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0) break;
        rc = one_turn(chat, o, line, t);
        if (rc) break;
    }
    free(line); /* getline's buffer comes from malloc */
    if (!rc && cq_cli_signal()) rc = cq_cli_interrupted("run", "the conversation ended");
    return rc;
}

int cq_cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    cq_cmf *cmf = NULL;
    cq_model *model = NULL;
    cq_session *chat = NULL;
    char *stdin_prompt = NULL;
    turn_out t = {.o = &o};
    cq_cmf_open_opts oo = {.no_verify = o.no_verify, .threads = o.threads};
    cq_status s = cq_cmf_open_ex(o.model, &oo, &cmf);
    if (s != CQ_OK) return cq_cli_fail("run", s, o.model);
    if (cq_cli_pack_classify(cmf) != CQ_PACK_LANGUAGE_MODEL) {
        char what[256];
        fprintf(stderr, "cortiq run: error: '%s' holds %s, not a language model\n", o.model,
                cq_cli_pack_describe(cmf, what, sizeof what));
        cq_cmf_close(cmf);
        return 1;
    }
    const cq_arch_entry *entry = NULL;
    if ((s = cq_arch_for_pack(cmf, o.model, CQ_TASK_CHAT, &entry)) != CQ_OK) {
        cq_cmf_close(cmf);
        return cq_cli_fail("run", s, NULL);
    }
    cq_cli_catch_signals();
    const cq_model_opts mo = {.threads = o.threads, .name = o.model};
    s = cq_model_open_cmf(cmf, &mo, &model);
    if (s == CQ_OK && !o.quiet) cq_cli_backend_say(&o.be);
    if (s == CQ_OK) s = cq_env_model_load(model, o.be.name, o.threads, o.be.mem_budget);
    if (s == CQ_OK) {
        cq_session_opts so;
        cq_session_opts_init(&so);
        so.context = o.ctx;
        so.enable_thinking = o.thinking;
        so.raw = o.raw;
        so.system = o.system;
        so.max_tokens = o.max_tokens;
        so.greedy = o.sp.greedy;
        so.temperature = o.sp.temperature;
        so.top_k = o.sp.top_k;
        so.top_p = o.sp.top_p;
        so.min_p = o.sp.min_p;
        so.seed = o.sp.seed;
        s = cq_session_open(model, &so, &chat);
    }
    if (s == CQ_OK) {
        t.cap = o.max_tokens;
        t.ids = cq_mallocn((size_t)t.cap, sizeof(int32_t));
        if (!t.ids) s = CQ_ERR_NOMEM;
    }
    if (s != CQ_OK) {
        rc = cq_cli_fail("run", s, NULL);
    } else {
        char plan[256];
        if (o.verbose)
            fprintf(stderr, "model %s on %s, seed %llu\n", o.model, cq_model_backend_name(model),
                    (unsigned long long)o.sp.seed);
        if (o.verbose && *cq_model_memory_plan(model, plan, sizeof plan)) fprintf(stderr, "device memory: %s\n", plan);
        const char *first = o.prompt;
        if (first && strcmp(first, "-") == 0 && !o.chat) {
            first = stdin_prompt = read_stdin();
            if (!first) rc = cq_cli_fail("run", CQ_ERR_NOMEM, "reading stdin");
        }
        if (!rc && first) rc = one_turn(chat, &o, first, &t);
        if (!rc && o.chat) rc = chat_loop(chat, &o, &t);
    }
    cq_free(stdin_prompt);
    cq_free(t.ids);
    cq_session_free(chat);
    cq_model_free(model);
    cq_cmf_close(cmf);
    return rc;
}
