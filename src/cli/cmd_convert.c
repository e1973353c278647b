/*
 * cmd_convert.c — `cortiq convert`: option parsing, the progress bar and the
 * summary around the conversion library (src/format/convert.c).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/outfile.h"
#include "cli/cli.h"
#include "format/convert.h"
#include "models/tables.h"

#define MAX_RULES 256
#define MAX_LISTED_FALLBACKS 12
#define MAX_LISTED_FINDINGS 20

static void help(void) {
    printf(
        "usage: cortiq convert SRC -o OUT.cmf [--quant CODEC] [--quant-rule 'GLOB=CODEC']... [--drop GLOB]...\n"
        "                      [--default KEY=VALUE]... [--quiet]\n"
        "\n"
        "Convert safetensors weights into one .cmf file. SRC is a folder:\n"
        "  - a diffusers pipeline (model_index.json; transformer/, text_encoder/, vae/ ...,\n"
        "    tokenizer/ or processor/): tensors are stored as dit.*, te.*, vae.* + their names;\n"
        "  - one component folder (a diffusers config.json with _class_name + safetensors):\n"
        "    dit.* (vae.* for an autoencoder);\n"
        "  - a Hugging Face model folder (config.json + model*.safetensors + tokenizer files):\n"
        "    names kept as they are.\n"
        "Each config.json is stored as a u8 tensor <prefix>.config_json, tokenizer.json in the\n"
        "tokenizer section (a gzipped tokenizer.json.gz is read where there is no tokenizer.json),\n"
        "the chat template and stop ids in the header. A pack of a known\n"
        "architecture (Qwen-Image-2.1, its VAE, Qwen3) is checked against the architecture's\n"
        "tensor table: the summary warns about missing tensors, tensors no loader reads and wrong shapes.\n"
        "SRC may also be a .cmf pack: its tensors are copied as they are stored (no re-encoding), to\n"
        "change its generation defaults or leave tensors out with --drop.\n"
        "\n"
        "Generation defaults: the header records the settings the model is meant to be drawn with\n"
        "(`cortiq imagine` uses them when not told, `cortiq info` shows them): Z-Image-Turbo\n"
        "(scheduler shift 3) 1024x1024, 8 steps, guidance 0, shift 3; Z-Image base (shift 6)\n"
        "1024x1024, 28 steps, guidance 4, shift 6; Qwen-Image-2.1 1024x1024, 40 steps, guidance 1.\n"
        "--default sets or overrides one of them.\n"
        "\n"
        "options:\n"
        "  -o, --output FILE        the .cmf to write; it appears only once complete and verified\n"
        "  --quant CODEC            codec for every 2-D weight (and for conv kernels when CODEC is\n"
        "                           f32/f16/bf16): f32 f16 bf16 q8_row q8_2f q4_block q4_tiled (q4t) q4tp\n"
        "  --quant-rule GLOB=CODEC  codec for tensors whose full name matches GLOB (fnmatch);\n"
        "                           repeatable, the first matching rule wins\n"
        "  --drop GLOB              leave out the tensors whose full name matches GLOB (parts a use\n"
        "                           never reads, e.g. the VAE encoder for text to image); repeatable;\n"
        "                           a pattern that matches nothing is an error\n"
        "  --default KEY=VALUE      a generation default for the header, over the model's recipe (or the\n"
        "                           source pack's): size=WxH (multiples of 16), steps=N (1..1000),\n"
        "                           guidance=G (0..100, the model's own guidance scale), shift=S, negative=TEXT,\n"
        "                           and for video models frames=N, fps=F;\n"
        "                           repeatable\n"
        "  -q, --quiet              no progress bar and no summary\n"
        "  -h, --help               this text\n"
        "\n"
        "defaults: vectors (norms, biases; [C,1,1] too) f32; 2-D weights q8_2f (dit, te, LLM), f16 (vae);\n"
        "conv kernels f32 (f16 in the vae). The text encoder never goes below 8 bits unless a rule\n"
        "says so. Quantized codecs never apply to 1-D tensors. A codec that cannot hold a tensor\n"
        "falls back (2-D: q8_2f, e.g. 4-bit codecs need cols %% 32 == 0; N-D: f16) and the\n"
        "summary lists it.\n"
        "\n"
        "examples:\n"
        "  cortiq convert Qwen-Image-2.1/ -o qi21.cmf\n"
        "  cortiq convert Qwen-Image-2.1/ -o qi21-q4.cmf --quant-rule 'dit.*=q4tp'\n"
        "  cortiq convert Qwen3-0.6B/ -o qwen3.cmf --quant q8_row --quant-rule '*embed_tokens*=f16'\n"
        "  cortiq convert Qwen-Image-2.1/ -o qi21-t2i.cmf --drop 'vae.encoder.*' --drop 'vae.quant_conv.*'\n"
        "  cortiq convert Z-Image-Turbo/ -o zimage.cmf --drop 'te.layers.35.*' --drop 'te.norm.weight'\n"
        "  cortiq convert models/shapes.cmf -o shapes2.cmf --default size=256x256 --default steps=20\n");
}

/* Two bars on one line in turn: writing the pack, then the writer's
 * read-back verification of it. */
typedef struct bar_pair {
    cq_progress conv, ver;
    bool verifying;
} bar_pair;

static int on_progress(uint64_t done, uint64_t total, void *user) {
    bar_pair *b = user;
    b->conv.total = total;
    cq_progress_update(&b->conv, done);
    return 0;
}

static int on_verify(uint64_t done, uint64_t total, void *user) {
    bar_pair *b = user;
    if (!b->verifying) {
        cq_progress_end(&b->conv);
        cq_progress_begin(&b->ver, "verifying ", total, false);
        b->verifying = true;
    }
    b->ver.total = total;
    cq_progress_update(&b->ver, done);
    return 0;
}

static void summary(const char *out, const cq_convert_report *r) {
    char a[32], b[32];
    const bool repack = strcmp(r->layout, "cmf") == 0;
    printf("wrote %s: %s %s, %zu tensors, %s (from %s of %s) in %.1f s\n", out, r->arch, r->layout, r->tensors,
           cq_fmt_bytes(r->file_size, a, sizeof a), cq_fmt_bytes(r->bytes_in, b, sizeof b),
           repack ? "the source pack's tensors, copied" : "safetensors", r->seconds);
    if (r->dropped)
        printf("  left out (--drop): %zu tensors, %s of safetensors\n", r->dropped, cq_fmt_bytes(r->dropped_bytes, a, sizeof a));
    if (r->last_taps)
        printf("  causal 3-D kernels: %zu stored as their last temporal tap (what a single image reads)\n",
               r->last_taps);
    printf("  %-9s %8s %12s  %s\n", "codec", "tensors", "bytes", "worst relative RMS error");
    for (int d = 0; d < CQ_DTYPE_COUNT; d++) {
        const cq_convert_codec_stat *c = &r->codec[d];
        if (!c->tensors) continue;
        printf("  %-9s %8zu %12s", cq_dtype_name((cq_dtype)d), c->tensors, cq_fmt_bytes(c->bytes, a, sizeof a));
        if (d == CQ_DTYPE_U8 || (d == CQ_DTYPE_F32 && c->worst_rel_rms == 0))
            printf("  exact\n");
        else
            printf("  %.3g (%s)\n", c->worst_rel_rms, c->worst_name);
    }
    printf("  header quant_type %s; tokenizer %s; chat template %s\n", r->quant_type, r->has_tokenizer ? "yes" : "no",
           r->has_chat_template ? "yes" : "no");
    if (r->n_fallbacks) {
        printf("  %zu tensor%s stored with another codec than asked:\n", r->n_fallbacks, r->n_fallbacks == 1 ? "" : "s");
        for (size_t i = 0; i < r->n_fallbacks && i < MAX_LISTED_FALLBACKS; i++)
            printf("    %s: %s -> %s (%s)\n", r->fallbacks[i].name, cq_dtype_name(r->fallbacks[i].wanted),
                   cq_dtype_name(r->fallbacks[i].used), r->fallbacks[i].why);
        if (r->n_fallbacks > MAX_LISTED_FALLBACKS) printf("    ... and %zu more\n", r->n_fallbacks - MAX_LISTED_FALLBACKS);
    }
    if (r->defaults[0]) printf("  generation defaults: %s\n", r->defaults);
    for (size_t i = 0; i < r->n_notes; i++) printf("  note: %s\n", r->notes[i]);
}

typedef struct findings {
    size_t n;
} findings;

static void on_finding(void *user, const char *line) {
    findings *f = user;
    if (f->n++ < MAX_LISTED_FINDINGS) printf("  warning: %s\n", line);
}

/* A pack of a known architecture against its tensor tables: what is missing,
 * what no loader reads, what has another shape or codec than the config
 * implies, listed after the summary. Warnings only: the pack is written either way. */
static void check_tables(const char *out) {
    cq_cmf *cmf = NULL;
    if (cq_cmf_open(out, &cmf) != CQ_OK) return; /* it was verified a moment ago; nothing to add */
    findings f = {0};
    cq_tt_report rep;
    int n = 0;
    if (cq_tables_check_pack(cmf, on_finding, &f, &rep, &n) == CQ_OK && f.n) {
        if (f.n > MAX_LISTED_FINDINGS)
            printf("  warning: ... and %zu more\n", f.n - MAX_LISTED_FINDINGS);
        if (rep.missing || rep.mismatched)
            printf("  warning: %zu tensor%s missing and %zu with another shape or codec than the architecture's "
                   "table: loading this pack will fail\n", rep.missing, rep.missing == 1 ? "" : "s", rep.mismatched);
    }
    cq_cmf_close(cmf);
}

int cq_cmd_convert(int argc, char **argv) {
    const char *cmd = "convert", *src = NULL, *out = NULL;
    static cq_convert_rule rules[MAX_RULES];
    static const char *drops[MAX_RULES];
    size_t n_rules = 0, n_drops = 0;
    int quant = -1;
    bool quiet = false;
    static cq_gen_defaults defaults; /* static, as the rules: an early usage error leaves it reachable */
    bool any_default = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cq_cli_is_help(a)) {
            help();
            return 0;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "%s needs a file name", a);
            out = argv[i];
        } else if (strcmp(a, "--quant") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "--quant needs a codec name");
            quant = cq_dtype_from_name(argv[i]);
            if (quant < 0) return cq_cli_usage_error(cmd, "unknown codec '%s'", argv[i]);
            if (cq_convert_check_codec((cq_dtype)quant) != CQ_OK) return cq_cli_usage_error(cmd, "%s", cq_last_error());
        } else if (strcmp(a, "--quant-rule") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "--quant-rule needs GLOB=CODEC");
            if (n_rules == MAX_RULES) return cq_cli_usage_error(cmd, "at most %d rules", MAX_RULES);
            if (cq_convert_parse_rule(argv[i], &rules[n_rules]) != CQ_OK)
                return cq_cli_usage_error(cmd, "%s", cq_last_error());
            n_rules++;
        } else if (strcmp(a, "--drop") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "--drop needs a GLOB");
            if (n_drops == MAX_RULES) return cq_cli_usage_error(cmd, "at most %d drop patterns", MAX_RULES);
            drops[n_drops++] = argv[i];
        } else if (strcmp(a, "--default") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "--default needs KEY=VALUE");
            if (cq_gen_defaults_set(&defaults, argv[i]) != CQ_OK) {
                cq_gen_defaults_free(&defaults);
                return cq_cli_usage_error(cmd, "%s", cq_last_error());
            }
            any_default = true;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (a[0] == '-' && a[1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!src) {
            src = a;
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    int bad = 0;
    if (!src) bad = cq_cli_usage_error(cmd, "missing the source folder (or .cmf pack)");
    else if (!out) bad = cq_cli_usage_error(cmd, "missing -o OUT.cmf");
    else if (!cq_path_has_ext(out, ".cmf"))
        bad = cq_cli_usage_error(cmd, "-o %s: convert writes CMF files; name the output *.cmf", out);
    if (bad) {
        cq_gen_defaults_free(&defaults);
        return bad;
    }
    cq_cli_catch_signals();

    /* The bar is for people watching; piped runs stay clean. */
    bar_pair bars = {.conv = {.bytes = true}, .ver = {.bytes = true}};
    bool show_bar = !quiet && isatty(STDERR_FILENO);
    cq_progress_begin(&bars.conv, "converting", 0, !show_bar);
    cq_convert_opts opts = {.quant = quant, .rules = rules, .n_rules = n_rules, .drop = drops, .n_drop = n_drops,
                            .defaults = any_default ? &defaults : NULL};
    if (show_bar) {
        opts.progress = on_progress;
        opts.progress_user = &bars;
        opts.verify_progress = on_verify;
        opts.verify_user = &bars;
    }
    cq_convert_report rep;
    cq_status s = cq_convert(src, out, &opts, &rep);
    if (show_bar && bars.verifying && s == CQ_OK) cq_progress_end(&bars.ver);
    else if (show_bar && s == CQ_OK) cq_progress_end(&bars.conv);
    else if (show_bar) fputc('\n', stderr);
    int rc = 0;
    if (s == CQ_ERR_INTERRUPTED && cq_cli_signal()) {
        rc = cq_cli_interrupted(cmd, "the partial output was removed; nothing was written");
    } else if (s != CQ_OK) {
        char what[4200];
        snprintf(what, sizeof what, "converting%s%s", strstr(cq_last_error(), src) ? "" : " ", strstr(cq_last_error(), src) ? "" : src);
        rc = cq_cli_fail(cmd, s, what);
    } else if (!quiet) {
        summary(out, &rep);
        check_tables(out);
    }
    cq_convert_report_free(&rep);
    cq_gen_defaults_free(&defaults);
    return rc;
}
