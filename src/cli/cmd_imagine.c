/*
 * cmd_imagine.c — `cortiq imagine PACK.cmf "a prompt" -o out.png`: text to
 * image (or, with --image, an edit of input pictures) with any pack whose
 * arch the model registry (pipelines/registry.h) lists for images, the same picture the reference pipeline draws for the
 * same seed and settings. The shared options are parsed here once; an
 * option of one architecture is handed to that architecture's parser.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "base/outfile.h"
#include "cli/cli.h"
#include "cli/env.h"
#include "format/cmf.h"
#include "ops/ops.h"
#include "pipelines/png_write.h"
#include "pipelines/registry.h"

static void usage(FILE *f) {
    char archs[256];
    fprintf(f,
            "usage: cortiq imagine PACK.cmf \"PROMPT\" [-o OUT.png] [options]\n"
            "       cortiq imagine PACK.cmf --prompt-file FILE|- [-o OUT.png] [options]\n"
            "       cortiq imagine EDIT.cmf \"INSTRUCTION\" --image IN.png [--image IN2.png ...] [-o OUT.png]\n\n"
            "Draw the prompt with a text-to-image pipeline pack (made by `cortiq convert` of the\n"
            "diffusers pipeline folder) of arch %s. The same seed and settings give the same\n"
            "picture as the reference pipeline (diffusers' QwenImage21Pipeline, ZImagePipeline) run\n"
            "in float32. Size, steps, guidance and the negative prompt left out are the pack's\n"
            "recommended ones (`cortiq info` shows them; `cortiq convert` writes them), else the\n"
            "architecture's; one line on standard error says which were used. An editing pack\n"
            "(qwen_image_edit, qwen_image_edit_plus: Qwen-Image-Edit, -2509, -2511) draws the\n"
            "instruction applied to its input pictures, as diffusers' QwenImageEditPipeline and\n"
            "QwenImageEditPlusPipeline do; a qwen_image21 pack given --image draws from its condition\n"
            "pictures as QwenImage21Pipeline does.\n\n"
            "options:\n"
            "  -o, --output FILE     PNG to write (default: out.png); '-' writes it to standard output.\n"
            "                        Only a .png name, and only a regular file (or a link to one) is\n"
            "                        replaced, in one step once the picture is done; a directory,\n"
            "                        device or FIFO is refused before any work\n"
            "  --prompt-file FILE    read the prompt from FILE ('-': standard input; one final newline\n"
            "                        is dropped) instead of the command line\n"
            "  --image FILE          an input picture (PNG or JPEG) of an editing pack, read as RGB (alpha\n"
            "                        dropped); qwen_image_edit takes one, qwen_image_edit_plus up to 8\n"
            "                        (repeat the option, \"Picture 1\" first); qwen_image21 takes up to 8\n"
            "                        condition pictures, read as RGBA. z_image and qwen_image refuse it\n"
            "  --size WxH            image size in pixels (default: the pack's; an editing pack's: the\n"
            "                        last input picture's at its VAE area, qwen_image21's at its output\n"
            "                        resolution's area); multiples of 32 for\n"
            "                        qwen_image21, of 16 for the others\n"
            "  --steps N             denoising steps, 1..1000 (default: the pack's; qwen_image21 and\n"
            "                        qwen_image need 2)\n"
            "  --seed S              noise seed, 0..2^64-1 (default: 0)\n"
            "  --guidance G          the reference pipeline's own guidance_scale, as the model defines\n"
            "                        it (default: the pack's); see \"guidance\" under each arch below\n"
            "  --negative TEXT       the negative prompt guidance reads (default: the pack's, else none;\n"
            "                        z_image: the empty prompt)\n"
            "  --rgba                keep the alpha channel (default: composite over white, RGB)\n"
            "  --threads N           CPU threads (default: all cores, or CORTIQ_THREADS)\n"
            "  --backend NAME        auto (default), cpu, ref, cuda[:N] or vulkan[:N]; also CORTIQ_BACKEND. auto\n"
            "                        takes the GPU (CUDA, compute capability 8.0 or newer) where this build\n"
            "                        and the machine have one, else the CPU; one line on standard error\n"
            "                        says which and why. With cuda the text tower, the denoiser and the VAE\n"
            "                        all run on the GPU; vulkan is used only when named (the ops it does not\n"
            "                        run natively run on the CPU); cpu forces the CPU\n"
            "  --gpu-memory GiB      the most device memory the GPU backend may use, a positive decimal such\n"
            "                        as 7.5 (default: what the device has free, less a margin); also\n"
            "                        CORTIQ_GPU_MEMORY. The CPU ignores it. Under it the model keeps what\n"
            "                        fits (the text tower released before the denoiser, else weights kept\n"
            "                        in their codec, else the rest streamed from host memory before each\n"
            "                        use), with the same picture; the summary names the plan\n"
            "  --no-verify           do not check each tensor's hash when it is first read (the header and\n"
            "                        directory hashes are still checked; `cortiq verify` checks everything)\n"
            "  -q, --quiet           no progress bar and no summary\n"
            "  --                    the end of the options (a prompt may then start with '-')\n"
            "  -h, --help            this text\n",
            cq_arch_list(CQ_TASK_IMAGE, archs, sizeof archs));
    for (size_t i = 0; i < cq_arch_count(); i++) {
        const cq_arch_entry *e = cq_arch_at(i);
        if (e->task != CQ_TASK_IMAGE) continue;
        const cq_image_arch *ia = e->image;
        char size[64];
        if (ia->default_width) snprintf(size, sizeof size, "%dx%d", ia->default_width, ia->default_height);
        else snprintf(size, sizeof size, "the last input picture's size");
        fprintf(f, "\narch %s (%s):\n  guidance: %s\n  without pack defaults: %s, %d steps, guidance %g\n", e->arch,
                e->family, ia->guidance_help ? ia->guidance_help : "", size, ia->default_steps, ia->default_guidance);
        if (ia->extra_help && *ia->extra_help) fprintf(f, "%s", ia->extra_help);
    }
    fprintf(f,
            "\nEverything is checked before the model is loaded: the output path, the size and steps\n"
            "against what the model can represent, the prompt's encoding and its length in tokens\n"
            "against the model's limits. Ctrl-C (SIGINT, SIGTERM, SIGHUP) stops after the current\n"
            "step and leaves nothing behind (exit 128 + the signal number, 130 for Ctrl-C).\n"
            "The PNG carries the prompt, seed, steps, size, guidance and model in text chunks.\n\n"
            "example:\n"
            "  cortiq imagine models/shapes.cmf \"a red circle on a blue background\" --size 256x256 \\\n"
            "      --steps 20 -o shapes.png\n"
            "  cortiq imagine qwen-image-edit-2511.cmf \"put the cat of picture 2 on the sofa of picture 1\" \\\n"
            "      --image sofa.png --image cat.jpg --negative \" \" -o edited.png\n"
            "  cortiq imagine qwen-image-2.1.cmf \"make the sky purple\" --image photo.png -o edited.png\n");
}

typedef struct step_ui {
    cq_progress bar;
} step_ui;

static int on_progress(cq_image_phase phase, int step, int n, void *user) {
    step_ui *ui = user;
    if (phase != CQ_IMAGE_PHASE_STEPS || step == 0) return 0;
    if (step >= n)
        cq_progress_end(&ui->bar); /* the bar covers the denoising steps; the VAE follows */
    else
        cq_progress_update(&ui->bar, (uint64_t)step);
    return 0;
}

static bool parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X')) return false;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || *end || a <= 0 || b <= 0 || a > 16384 || b > 16384) return false;
    *w = (int)a;
    *h = (int)b;
    return true;
}

#define MAX_EXTRA 16
#define MAX_IMAGES 64 /* --image options kept; the model says how many it takes */

typedef struct imagine_args {
    const char *model, *prompt, *prompt_file, *out, *negative, *backend, *gpu_memory;
    int width, height, steps, threads; /* 0: the architecture's default */
    uint64_t seed;
    double guidance;                   /* < 0: the architecture's default */
    bool rgba, quiet, no_verify;
    cq_cli_backend be; /* the backend chosen once the options are parsed */
    /* options of one architecture, applied once the pack says which */
    const char *extra_opt[MAX_EXTRA], *extra_val[MAX_EXTRA];
    int n_extra;
    const char *images[MAX_IMAGES];
    int n_images;
} imagine_args;

/* An option no shared one matched: some image architecture's own? Returns
 * the arguments it takes (1 or 2), 0 for none, -1 for a bad value. */
static int probe_extra(const char *opt, const char *val) {
    int used = 0;
    for (size_t i = 0; i < cq_arch_count() && used == 0; i++) {
        const cq_arch_entry *e = cq_arch_at(i);
        if (e->task != CQ_TASK_IMAGE || !e->image->extra_parse) continue;
        void *scratch = cq_calloc(1, e->image->extra_size ? e->image->extra_size : 1);
        if (!scratch) return -1;
        if (e->image->extra_init) e->image->extra_init(scratch);
        used = e->image->extra_parse(scratch, opt, val);
        cq_free(scratch);
    }
    return used;
}

static bool parse_seed(const char *val, uint64_t *out) {
    if (!val || !*val || val[0] == '-' || val[0] == '+' || val[0] == ' ') return false;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(val, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = (uint64_t)v;
    return true;
}

/* 0: parsed; -1: --help printed; 2: usage error printed. */
static int parse_args(int argc, char **argv, imagine_args *a) {
    const char *cmd = "imagine";
    *a = (imagine_args){.out = "out.png", .guidance = -1.0};
    bool opts_done = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (opts_done || o[0] != '-' || !o[1]) {
            if (!a->model) a->model = o;
            else if (!a->prompt && !a->prompt_file) a->prompt = o;
            else return cq_cli_usage_error(cmd, "unexpected argument '%s' (quote the prompt)", o);
            continue;
        }
        if (!strcmp(o, "--")) {
            opts_done = true;
        } else if (cq_cli_is_help(o)) {
            usage(stdout);
            return -1;
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!val || !*val) return cq_cli_usage_error(cmd, "%s needs a file name", o);
            a->out = val;
            i++;
        } else if (!strcmp(o, "--prompt-file")) {
            if (!val || !*val) return cq_cli_usage_error(cmd, "--prompt-file needs a file name (or - for stdin)");
            a->prompt_file = val;
            i++;
        } else if (!strcmp(o, "--size")) {
            if (!val || !parse_size(val, &a->width, &a->height))
                return cq_cli_usage_error(cmd, "--size wants WxH with sides of 1..16384, e.g. 1024x1024 (got '%s')",
                                          val ? val : "");
            i++;
        } else if (!strcmp(o, "--steps")) {
            if (!cq_cli_parse_int(cmd, o, val, 1, 1000, &n)) return 2;
            a->steps = (int)n;
            i++;
        } else if (!strcmp(o, "--seed")) {
            if (!parse_seed(val, &a->seed))
                return cq_cli_usage_error(cmd, "--seed wants an integer in [0, 2^64-1 = 18446744073709551615], got '%s'",
                                          val ? val : "");
            i++;
        } else if (!strcmp(o, "--guidance")) {
            char *end;
            if (!val) return cq_cli_usage_error(cmd, "--guidance needs a value");
            a->guidance = strtod(val, &end);
            if (!*val || *end || !(a->guidance >= 0 && a->guidance <= 100))
                return cq_cli_usage_error(cmd, "--guidance wants a number in [0, 100], got '%s'", val);
            i++;
        } else if (!strcmp(o, "--negative")) {
            if (!val) return cq_cli_usage_error(cmd, "--negative needs a prompt");
            a->negative = val;
            i++;
        } else if (!strcmp(o, "--threads")) {
            if (!cq_cli_parse_int(cmd, o, val, 1, 4096, &n)) return 2;
            a->threads = (int)n;
            i++;
        } else if (!strcmp(o, "--backend")) {
            if (!val) return cq_cli_usage_error(cmd, "--backend needs a name");
            a->backend = val;
            i++;
        } else if (!strcmp(o, "--gpu-memory")) {
            if (!val) return cq_cli_usage_error(cmd, "--gpu-memory needs a size in GiB, e.g. 7.5");
            a->gpu_memory = val;
            i++;
        } else if (!strcmp(o, "--image")) {
            if (!val || !*val) return cq_cli_usage_error(cmd, "--image needs a file name");
            if (a->n_images == MAX_IMAGES)
                return cq_cli_usage_error(cmd, "more than %d --image options", MAX_IMAGES);
            a->images[a->n_images++] = val;
            i++;
        } else if (!strcmp(o, "--rgba")) {
            a->rgba = true;
        } else if (!strcmp(o, "--no-verify")) {
            a->no_verify = true;
        } else if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) {
            a->quiet = true;
        } else {
            const int used = probe_extra(o, val);
            if (used < 0) return cq_cli_usage_error(cmd, "%s", cq_last_error());
            if (used == 0 || a->n_extra == MAX_EXTRA)
                return cq_cli_usage_error(cmd, "unknown option '%s' (a prompt that starts with '-' goes after --)", o);
            a->extra_opt[a->n_extra] = o;
            a->extra_val[a->n_extra++] = used == 2 ? val : NULL;
            i += used - 1;
        }
    }
    if (!a->model || (!a->prompt && !a->prompt_file)) {
        usage(stderr);
        return 2;
    }
    if (a->prompt && a->prompt_file)
        return cq_cli_usage_error(cmd, "give the prompt either as an argument or with --prompt-file, not both");
    if (strcmp(a->out, "-") != 0 && !cq_path_has_ext(a->out, ".png"))
        return cq_cli_usage_error(cmd,
                                  "-o %s: cortiq imagine writes PNG files only; name the output *.png (or - for "
                                  "standard output)",
                                  a->out);
    /* a bad backend name or size now, before any file is opened */
    const int rc = cq_cli_backend_pick(cmd, a->backend, "auto", a->gpu_memory, &a->be);
    if (rc) return rc;
    return 0; /* the size and steps against the model once the pack says which */
}

typedef struct line_buf {
    char s[320];
    size_t n;
} line_buf;

static void append(line_buf *b, const char *fmt, ...) CQ_PRINTF(2, 3);
static void append(line_buf *b, const char *fmt, ...) {
    if (b->n + 1 >= sizeof b->s) return;
    if (b->n) b->n += (size_t)snprintf(b->s + b->n, sizeof b->s - b->n, ", ");
    if (b->n + 1 >= sizeof b->s) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n = CQ_MIN(sizeof b->s - 1, b->n + (size_t)k);
}

/* One line on stderr: the settings the user left out and where they came from. */
static void say_defaults(cq_model *model, const imagine_args *given, const cq_image_opts *o) {
    cq_image_defaults d;
    if (cq_image_get_defaults(model, &d) != CQ_OK) return;
    line_buf pack = {0}, arch = {0};
    if (!given->width && o->width) append(d.size_from_pack ? &pack : &arch, "%dx%d", o->width, o->height);
    if (!given->width && !o->width) append(&arch, "the last input picture's size");
    if (!given->steps) append(d.steps_from_pack ? &pack : &arch, "%d steps", o->steps);
    if (given->guidance < 0) append(d.guidance_from_pack ? &pack : &arch, "guidance %g", o->guidance);
    if (!given->negative && d.negative)
        append(&pack, "negative prompt \"%.60s%s\"", d.negative, strlen(d.negative) > 60 ? "..." : "");
    if (d.shift > 0) append(&pack, "shift %g", d.shift);
    if (!pack.n && !arch.n) return;
    fprintf(stderr, "imagine: %s%s%s%s%s%s; guidance is %s\n", pack.n ? "the pack's defaults " : "", pack.s,
            pack.n && arch.n ? "; " : "", arch.n ? cq_model_arch(model) : "", arch.n ? "'s defaults " : "", arch.s,
            d.guidance_rule);
}

/* The pack must be an image pipeline of an architecture the registry draws with. */
static cq_status check_pack(const cq_cmf *cmf, const char *path) {
    char what[256];
    if (cq_cli_pack_classify(cmf) != CQ_PACK_IMAGE_PIPELINE)
        return cq_fail(CQ_ERR_UNSUPPORTED, "'%s' holds %s, not a text-to-image pipeline", path,
                       cq_cli_pack_describe(cmf, what, sizeof what));
    const cq_arch_entry *entry;
    return cq_arch_for_pack(cmf, path, CQ_TASK_IMAGE, &entry);
}

static int finish_interrupted(const char *cmd, const step_ui *ui, bool quiet, bool to_stdout) {
    if (!quiet && ui->bar.tty && ui->bar.total && ui->bar.done < ui->bar.total) fputc('\n', stderr);
    char what[160];
    if (ui->bar.done > 0 && ui->bar.done < ui->bar.total)
        snprintf(what, sizeof what, "stopped after step %llu of %llu; %s", (unsigned long long)ui->bar.done,
                 (unsigned long long)ui->bar.total, to_stdout ? "nothing was written" : "no file was written");
    else
        snprintf(what, sizeof what, "%s", to_stdout ? "nothing was written" : "no file was written");
    return cq_cli_interrupted(cmd, what);
}

int cq_cmd_imagine(int argc, char **argv) {
    const char *cmd = "imagine";
    imagine_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    char *prompt_buf = NULL;
    if (a.prompt_file) {
        if (!(prompt_buf = cq_cli_read_text(cmd, a.prompt_file))) return 1;
        a.prompt = prompt_buf;
    }
    /* what the PNG's text chunks must hold, checked now rather than after the picture */
    cq_status s = cq_png_check_text("prompt", a.prompt);
    if (s == CQ_OK && a.negative) s = cq_png_check_text("negative", a.negative);
    if (s != CQ_OK) {
        cq_free(prompt_buf);
        return cq_cli_usage_error(cmd, "%s", cq_last_error());
    }
    cq_cli_catch_signals();

    /* the output first: a bad path fails now, not after the work */
    cq_outfile out;
    const cq_outfile_opts oo = {.format = "PNG", .allow_stdout = true};
    s = cq_outfile_open(a.out, &oo, &out);
    if (s != CQ_OK) {
        cq_free(prompt_buf);
        return cq_cli_fail(cmd, s, NULL);
    }
    const bool to_stdout = out.to_stdout;

    double t_load = cq_now();
    cq_cmf *cmf = NULL;
    cq_model *model = NULL;
    cq_image *img = NULL;
    step_ui ui = {0};
    cq_image_opts o;
    cq_image_opts_init(&o);
    o.prompt = a.prompt;
    o.negative = a.negative;
    o.width = a.width;
    o.height = a.height;
    o.steps = a.steps;
    o.seed = a.seed;
    o.guidance = a.guidance;
    o.rgba = a.rgba;
    o.images = a.n_images ? a.images : NULL;
    o.n_images = a.n_images;
    /* the architecture's own options, as the words given (the model's arch parses them) */
    const char *words[2 * MAX_EXTRA + 1];
    int nw = 0;
    for (int i = 0; i < a.n_extra; i++) {
        words[nw++] = a.extra_opt[i];
        if (a.extra_val[i]) words[nw++] = a.extra_val[i];
    }
    words[nw] = NULL;
    o.arch_opts = nw ? words : NULL;
    o.progress = on_progress;
    o.user = &ui;
    const cq_cmf_open_opts co = {.no_verify = a.no_verify, .threads = a.threads};
    s = cq_cmf_open_ex(a.model, &co, &cmf);
    if (s != CQ_OK) {
        rc = cq_cli_fail(cmd, s, a.model);
        goto done;
    }
    if ((s = check_pack(cmf, a.model)) != CQ_OK) {
        rc = cq_cli_fail(cmd, s, NULL);
        goto done;
    }
    const char *base = strrchr(a.model, '/');
    const cq_model_opts mo = {.threads = a.threads, .name = base ? base + 1 : a.model};
    if ((s = cq_model_open_cmf(cmf, &mo, &model)) != CQ_OK) {
        rc = cq_cli_fail(cmd, s, a.model);
        goto done;
    }
    /* the architecture's defaults where an option was not given */
    if ((s = cq_image_resolve(model, &o)) != CQ_OK) {
        rc = cq_cli_fail(cmd, s, a.model);
        goto done;
    }
    if (!a.quiet) say_defaults(model, &a, &o);
    a.width = o.width;
    a.height = o.height;
    a.steps = o.steps;
    a.guidance = o.guidance;
    a.negative = o.negative;
    /* size, steps, schedule, the architecture's options and prompt lengths against the model, before any
     * weight is read */
    if ((s = cq_image_check(model, &o)) != CQ_OK) {
        rc = cq_cli_usage_error(cmd, "%s", cq_last_error());
        goto done;
    }
    if (!a.quiet) cq_cli_backend_say(&a.be);
    s = cq_env_model_load(model, a.be.name, a.threads, a.be.mem_budget);
    if (s != CQ_OK) {
        rc = cq_cli_fail(cmd, s, "loading the pipeline");
        goto done;
    }
    t_load = cq_now() - t_load;

    cq_progress_begin(&ui.bar, "denoising", (uint64_t)a.steps, a.quiet);
    s = cq_image_generate(model, &o, &img);
    if (s == CQ_ERR_INTERRUPTED || cq_cli_signal()) {
        rc = finish_interrupted(cmd, &ui, a.quiet, to_stdout);
        goto done;
    }
    if (s != CQ_OK && !a.quiet && ui.bar.tty && ui.bar.done < ui.bar.total) fputc('\n', stderr);
    if (s != CQ_OK) {
        rc = cq_cli_fail(cmd, s, "generating");
        goto done;
    }
    {
        int oc, ow, oh;
        cq_image_pixels(img, &ow, &oh, &oc);
        const cq_image_timings t = cq_image_get_timings(img);
        double t_png = cq_now();
        s = cq_api_image_png_out(img, &out);
        if (s == CQ_OK && cq_cli_signal()) s = cq_fail(CQ_ERR_INTERRUPTED, "interrupted while writing");
        if (s == CQ_OK) s = cq_outfile_commit(&out);
        t_png = cq_now() - t_png;
        if (s == CQ_ERR_INTERRUPTED) {
            rc = finish_interrupted(cmd, &ui, a.quiet, to_stdout);
        } else if (s != CQ_OK) {
            rc = cq_cli_fail(cmd, s, NULL);
        } else if (!a.quiet) {
            double total = t_load + t.text + t.prefill + t.steps + t.decode + t_png;
            fprintf(stderr,
                    "wrote %s (%dx%d, %s, seed %llu, %d steps, guidance %g)\n"
                    "time: load %.2fs, text %.2fs, prefill %.2fs, steps %.2fs (%.3fs/step), vae %.2fs, png %.2fs; "
                    "total %.2fs on %s\n",
                    to_stdout ? "the PNG to standard output" : a.out, ow, oh, oc == 4 ? "RGBA" : "RGB",
                    (unsigned long long)a.seed, a.steps, a.guidance, t_load,
                    t.text, t.prefill, t.steps, t.steps / a.steps, t.decode, t_png, total,
                    cq_model_backend_name(model));
            char plan[256];
            if (*cq_model_memory_plan(model, plan, sizeof plan)) fprintf(stderr, "device memory: %s\n", plan);
        }
    }
done:
    cq_outfile_abort(&out); /* nothing once committed */
    cq_image_free(img);
    cq_model_free(model);
    cq_cmf_close(cmf);
    cq_free(prompt_buf);
    return rc;
}
