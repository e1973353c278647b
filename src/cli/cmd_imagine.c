/*
 * cmd_imagine.c — `cortiq imagine PACK.cmf "a prompt" -o out.png`: text to
 * image with a Qwen-Image-2.1 pack, the same picture the reference pipeline
 * draws for the same seed and settings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ops/ops.h"
#include "pipelines/png_write.h"
#include "pipelines/qi21_pipe.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: cortiq imagine PACK.cmf \"PROMPT\" [-o OUT.png] [options]\n\n"
            "Draw the prompt with a Qwen-Image-2.1 pipeline pack (made by `cortiq convert` of the\n"
            "diffusers pipeline folder). The same seed and settings give the same picture as diffusers'\n"
            "QwenImage21Pipeline run in float32.\n\n"
            "options:\n"
            "  -o, --output FILE     PNG to write (default: out.png)\n"
            "  --size WxH            image size in pixels, multiples of 32 (default: 1024x1024)\n"
            "  --steps N             denoising steps, >= 2 (default: 40)\n"
            "  --seed S              noise seed, 0..2^64-1 (default: 0)\n"
            "  --guidance G          true classifier-free guidance scale; used when > 1 together with\n"
            "                        --negative (default: 1, i.e. none, as the model is meant to be sampled)\n"
            "  --negative TEXT       negative prompt for guidance\n"
            "  --noise-dtype f32|bf16  draw the initial noise as a float32 (default) or a bfloat16\n"
            "                        reference pipeline does (the two differ for the same seed)\n"
            "  --rgba                keep the alpha channel (default: composite over white, RGB)\n"
            "  --threads N           CPU threads (default: all cores, or CORTIQ_THREADS)\n"
            "  --backend NAME        cpu (default), ref or cuda[:N]; also CORTIQ_BACKEND (with cuda the text\n"
            "                        tower, the denoiser and the VAE all run on the GPU)\n"
            "  --no-verify           do not check each tensor's hash when it is first read (the header and\n"
            "                        directory hashes are still checked; `cortiq verify` checks everything)\n"
            "  -q, --quiet           no progress bar and no summary\n"
            "  -h, --help            this text\n\n"
            "The PNG carries the prompt, seed, steps, size, guidance and model in text chunks.\n\n"
            "example:\n"
            "  cortiq imagine models/shapes.cmf \"a red circle on a blue background\" --size 256x256 \\\n"
            "      --steps 20 -o shapes.png\n");
}

typedef struct step_ui {
    cq_progress bar;
} step_ui;

static int on_step(int step, int n, void *user) {
    step_ui *ui = user;
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

int cq_cmd_imagine(int argc, char **argv) {
    const char *cmd = "imagine", *model = NULL, *prompt = NULL, *out = "out.png", *negative = NULL;
    const char *backend = NULL;
    int width = 1024, height = 1024, steps = 40, threads = 0;
    uint64_t seed = 0;
    double guidance = 1.0;
    bool rgba = false, quiet = false, bf16 = false, no_verify = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (cq_cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!val) return cq_cli_usage_error(cmd, "%s needs a file name", a);
            out = val;
            i++;
        } else if (!strcmp(a, "--size")) {
            if (!val || !parse_size(val, &width, &height))
                return cq_cli_usage_error(cmd, "--size wants WxH, e.g. 1024x1024 (got '%s')", val ? val : "");
            i++;
        } else if (!strcmp(a, "--steps")) {
            if (!cq_cli_parse_int(cmd, a, val, 2, 1000, &n)) return 2;
            steps = (int)n;
            i++;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            if (!val || !*val || val[0] == '-') return cq_cli_usage_error(cmd, "--seed wants an integer in [0, 2^64-1]");
            unsigned long long sv = strtoull(val, &end, 10);
            if (*end) return cq_cli_usage_error(cmd, "--seed wants an integer in [0, 2^64-1], got '%s'", val);
            seed = sv;
            i++;
        } else if (!strcmp(a, "--guidance")) {
            char *end;
            if (!val) return cq_cli_usage_error(cmd, "--guidance needs a value");
            guidance = strtod(val, &end);
            if (*end || !(guidance >= 0 && guidance <= 100))
                return cq_cli_usage_error(cmd, "--guidance wants a number in [0, 100], got '%s'", val);
            i++;
        } else if (!strcmp(a, "--negative")) {
            if (!val) return cq_cli_usage_error(cmd, "--negative needs a prompt");
            negative = val;
            i++;
        } else if (!strcmp(a, "--noise-dtype")) {
            if (!val || (strcmp(val, "f32") && strcmp(val, "bf16")))
                return cq_cli_usage_error(cmd, "--noise-dtype wants f32 or bf16");
            bf16 = !strcmp(val, "bf16");
            i++;
        } else if (!strcmp(a, "--threads")) {
            if (!cq_cli_parse_int(cmd, a, val, 1, 4096, &n)) return 2;
            threads = (int)n;
            i++;
        } else if (!strcmp(a, "--backend")) {
            if (!val) return cq_cli_usage_error(cmd, "--backend needs a name");
            backend = val;
            i++;
        } else if (!strcmp(a, "--rgba")) {
            rgba = true;
        } else if (!strcmp(a, "--no-verify")) {
            no_verify = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!model) {
            model = a;
        } else if (!prompt) {
            prompt = a;
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s' (quote the prompt)", a);
        }
    }
    if (!model || !prompt) {
        usage(stderr);
        return 2;
    }
    if (width % 32 || height % 32) {
        int w2 = width / 32 * 32, h2 = height / 32 * 32;
        return cq_cli_usage_error(cmd,
                                  "--size %dx%d: width and height must be multiples of 32 (each 2x2 group of 16-pixel "
                                  "latent tokens is one slot of the model's sequence); the reference pipeline would "
                                  "silently draw %dx%d",
                                  width, height, w2 ? w2 : 32, h2 ? h2 : 32);
    }

    double t_load = cq_now();
    cq_cmf *cmf = NULL;
    cq_backend *be = NULL;
    cq_qi21_pipe *pipe = NULL;
    cq_cmf_open_opts oo = {.no_verify = no_verify, .threads = threads};
    cq_status s = cq_cmf_open_ex(model, &oo, &cmf);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, model);
    s = cq_backend_create(backend, threads, &be);
    if (s == CQ_OK) s = cq_qi21_pipe_load(cmf, be, &pipe);
    if (s != CQ_OK) {
        cq_cli_fail(cmd, s, "loading the pipeline");
        cq_backend_free(be);
        cq_cmf_close(cmf);
        return 1;
    }
    t_load = cq_now() - t_load;

    step_ui ui = {0};
    cq_progress_begin(&ui.bar, "denoising", (uint64_t)steps, quiet);
    cq_qi21_gen_opts o = {.prompt = prompt, .negative = negative, .width = width, .height = height, .steps = steps,
                          .seed = seed, .guidance = guidance, .noise_bf16 = bf16, .on_step = on_step, .user = &ui};
    cq_qi21_result r;
    s = cq_qi21_pipe_generate(pipe, &o, &r);
    if (s != CQ_OK && !quiet && ui.bar.tty && ui.bar.done < ui.bar.total) fputc('\n', stderr);

    int rc = 0;
    if (s != CQ_OK) {
        rc = cq_cli_fail(cmd, s, "generating");
    } else {
        cq_image8 img = {0};
        int oc = rgba && r.channels == 4 ? 4 : 3;
        double t_png = cq_now();
        s = cq_png_from_planar(r.image, r.channels, r.width, r.height, oc, &img);
        char sz[32], sd[32], st[16], gd[32];
        snprintf(sz, sizeof sz, "%dx%d", width, height);
        snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
        snprintf(st, sizeof st, "%d", steps);
        snprintf(gd, sizeof gd, "%g", guidance);
        const char *base = strrchr(model, '/');
        base = base ? base + 1 : model;
        cq_png_text texts[8] = {{"prompt", (char *)prompt}, {"seed", sd}, {"steps", st}, {"size", sz},
                                {"guidance", gd}, {"model", (char *)base}, {"software", "cortiq"}};
        size_t nt = 7;
        if (negative) texts[nt++] = (cq_png_text){"negative", (char *)negative};
        if (s == CQ_OK) s = cq_png_write(out, img.pixels, img.width, img.height, img.channels, texts, nt);
        cq_image8_free(&img);
        t_png = cq_now() - t_png;
        if (s != CQ_OK) {
            rc = cq_cli_fail(cmd, s, out);
        } else if (!quiet) {
            double total = t_load + r.t.text + r.t.prefill + r.t.steps + r.t.vae + t_png;
            fprintf(stderr,
                    "wrote %s (%dx%d, %s, seed %llu, %d steps%s)\n"
                    "time: load %.2fs, text %.2fs, prefill %.2fs, steps %.2fs (%.3fs/step), vae %.2fs, png %.2fs; "
                    "total %.2fs on %s\n",
                    out, width, height, oc == 4 ? "RGBA" : "RGB", (unsigned long long)seed, steps,
                    guidance > 1 && negative ? ", true CFG" : "", t_load, r.t.text, r.t.prefill, r.t.steps,
                    r.t.steps / steps, r.t.vae, t_png, total, cq_backend_name(be));
        }
        cq_qi21_result_free(&r);
    }
    cq_qi21_pipe_free(pipe);
    cq_backend_free(be);
    cq_cmf_close(cmf);
    return rc;
}
