/*
 * cmd_video.c — `cortiq video PACK.cmf "a prompt" -o clip.mp4`: text to video
 * with sound from an LTX-2.5 pack (pipelines/ltx2_pipe.h): the prompt
 * encoder, the sampler, the video VAE's stream decode, the audio VAE and
 * vocoder, then the writer (io/video_out.h: an MP4 through FFmpeg's
 * libraries, or PNG frames and a WAV). Every check runs before any weight is
 * read, and the outputs are opened (their temporaries made) before the work;
 * nothing partial is left on failure or Ctrl-C.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "image/image_read.h"
#include "io/video_out.h"
#include "ops/ops.h"
#include "pipelines/ltx2_pipe.h"

#define CMD "video"

static void usage(FILE *f) {
    fprintf(f,
            "usage: cortiq video PACK.cmf \"prompt\" -o clip.mp4 [options]\n\n"
            "Text (or a first frame and text) to video with its own soundtrack (LTX-2.5 packs: `cortiq\n"
            "convert` of a diffusers LTX2Pipeline folder, with latent_upsampler/ for --two-stage). Writes an\n"
            "MP4 (H.264 + AAC) through FFmpeg's libraries; a build\n"
            "without them writes PNG frames and a WAV instead and prints the ffmpeg command that muxes them.\n\n"
            "options:\n"
            "  -o, --output FILE      the MP4 to write (replaced only when complete)\n"
            "  --size WxH             pixels, multiples of 32 (default: the pack's, else 768x512)\n"
            "  --frames N             8k + 1 frames (default: the pack's, else 121)\n"
            "  --fps F                frame rate (default: the pack's, else 24)\n"
            "  --steps N              denoising steps (default: the pack's, else 8)\n"
            "  --sigmas ladder|linspace  the distilled 8-step ladder (the default for 8 steps with a\n"
            "                         distilled scheduler) or linspace(1, 1/N, N)\n"
            "  --seed S               noise seed (default 42): torch.Generator(\"cpu\").manual_seed(S)\n"
            "  --sampler euler|ancestral  stage 1's step: diffusers' Euler (default) or ltx-core's ancestral\n"
            "                         Euler, eta 1 (ltx-pipelines' LTX-2.5 distilled stage 1; noise seed S + 10000)\n"
            "  --negative TEXT        the negative prompt of CFG (default \"\")\n"
            "  --guidance G           CFG scale, > 1 turns it on (default: the pack's, else 1)\n"
            "  --audio-guidance G     the audio stream's CFG scale (default: --guidance)\n"
            "  --stg S                STG scale, > 0 turns it on (needs --stg-blocks; default 0)\n"
            "  --stg-blocks I,J,...   the blocks whose self-attention STG perturbs\n"
            "  --modality M           modality-isolation scale, > 1 turns it on (default 1)\n"
            "  --rescale R            guidance rescale in [0, 1] (default 0)\n"
            "  --prompt-tokens N      the prompt's padded length (default 1024, the reference's)\n"
            "  --image FILE           image to video: the first frame (PNG or JPEG), resized to the size\n"
            "                         (bilinear, as the reference) and kept through the steps\n"
            "  --image-crf N          re-compress the first frame with H.264 at CRF N first, as the\n"
            "                         reference (default 18, LTX-2.5's; 0 uses the picture as given)\n"
            "  --two-stage            stage 1 at half the size, the x2 latent upscaler, 3 refine steps\n"
            "                         (distilled packs with a latent upsampler; the size a multiple of 64)\n"
            "  --no-audio             leave the sound out (the model still denoises it)\n"
            "  --frames-dir DIR       also (or, without -o, only) write PNG frames into DIR\n"
            "  --wav FILE             also (or only) write the sound as a 16-bit WAV\n"
            "  --crf N                H.264 quality 0..51 (default 18)\n"
            "  --backend NAME         cpu, cuda, vulkan or auto (default auto)\n"
            "  --threads N            CPU threads\n"
            "  --quiet                no progress or timings\n\n"
            "Ctrl-C stops after the current step and leaves nothing behind (exit 128 + the signal).\n\n"
            "example:\n"
            "  cortiq video ltx-2.5-distilled.cmf \"a fox runs through snow, wind howls\" -o fox.mp4 \\\n"
            "      --size 768x512 --frames 121 --seed 7\n");
}

typedef struct video_args {
    const char *model, *prompt, *out, *frames_dir, *wav, *negative, *backend, *image;
    int width, height, frames, steps, crf, threads, prompt_tokens, image_crf;
    double fps, guidance, audio_guidance, stg, modality, rescale;
    bool has_size, has_steps, has_guidance, has_audio_guidance, has_frames, has_fps, no_audio, quiet, two_stage;
    int sigmas; /* 0 auto, 1 ladder, 2 linspace */
    bool ancestral;
    uint64_t seed;
    int stg_blocks[CQ_LTX2_PIPE_MAX_STG], n_stg;
} video_args;

static bool parse_double(const char *opt, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    const double d = v ? strtod(v, &end) : NAN;
    if (!v || end == v || *end || !isfinite(d) || d < lo || d > hi) {
        cq_cli_usage_error(CMD, "%s wants a number in [%g, %g], not '%s'", opt, lo, hi, v ? v : "");
        return false;
    }
    *out = d;
    return true;
}

static int parse_args(int argc, char **argv, video_args *a) {
    *a = (video_args){.frames = 121, .fps = 24.0, .crf = -1, .image_crf = -1, .seed = 42, .modality = 1.0,
                      .prompt_tokens = CQ_LTX2_PIPE_MAX_TOKENS};
    const char *pos[2] = {NULL, NULL};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (cq_cli_is_help(o)) {
            usage(stdout);
            return -1;
        }
#define NEED()                                                                  \
    do {                                                                        \
        if (!v) return cq_cli_usage_error(CMD, "%s needs a value", o);          \
        i++;                                                                    \
    } while (0)
        if (!strcmp(o, "-o") || !strcmp(o, "--output")) { NEED(); a->out = v; }
        else if (!strcmp(o, "--frames-dir")) { NEED(); a->frames_dir = v; }
        else if (!strcmp(o, "--wav")) { NEED(); a->wav = v; }
        else if (!strcmp(o, "--negative")) { NEED(); a->negative = v; }
        else if (!strcmp(o, "--backend")) { NEED(); a->backend = v; }
        else if (!strcmp(o, "--size")) {
            NEED();
            char *x = NULL;
            const long w = strtol(v, &x, 10);
            char *e = NULL;
            const long h = (x && (*x == 'x' || *x == 'X')) ? strtol(x + 1, &e, 10) : -1;
            if (w < 32 || h < 32 || w > CQ_VIDEO_MAX_SIDE || h > CQ_VIDEO_MAX_SIDE || !e || *e)
                return cq_cli_usage_error(CMD, "--size wants WxH (32..%d each), not '%s'", CQ_VIDEO_MAX_SIDE, v);
            a->width = (int)w, a->height = (int)h, a->has_size = true;
        } else if (!strcmp(o, "--frames")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 1, CQ_VIDEO_MAX_FRAMES, &n)) return 2;
            a->frames = (int)n, a->has_frames = true;
        } else if (!strcmp(o, "--steps")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 1, 1000, &n)) return 2;
            a->steps = (int)n, a->has_steps = true;
        } else if (!strcmp(o, "--crf")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 0, 51, &n)) return 2;
            a->crf = (int)n;
        } else if (!strcmp(o, "--threads")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 1, 4096, &n)) return 2;
            a->threads = (int)n;
        } else if (!strcmp(o, "--prompt-tokens")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 1, 65536, &n)) return 2;
            a->prompt_tokens = (int)n;
        } else if (!strcmp(o, "--seed")) {
            NEED();
            char *e = NULL;
            const unsigned long long s = strtoull(v, &e, 10);
            if (!*v || *v == '-' || *e) return cq_cli_usage_error(CMD, "--seed wants a non-negative integer, not '%s'", v);
            a->seed = s;
        } else if (!strcmp(o, "--fps")) {
            NEED();
            if (!parse_double(o, v, 1e-3, CQ_VIDEO_MAX_FPS, &a->fps)) return 2;
            a->has_fps = true;
        } else if (!strcmp(o, "--guidance")) {
            NEED();
            if (!parse_double(o, v, 0, 100, &a->guidance)) return 2;
            a->has_guidance = true;
        } else if (!strcmp(o, "--audio-guidance")) {
            NEED();
            if (!parse_double(o, v, 0, 100, &a->audio_guidance)) return 2;
            a->has_audio_guidance = true;
        } else if (!strcmp(o, "--stg")) {
            NEED();
            if (!parse_double(o, v, 0, 100, &a->stg)) return 2;
        } else if (!strcmp(o, "--modality")) {
            NEED();
            if (!parse_double(o, v, 0, 100, &a->modality)) return 2;
        } else if (!strcmp(o, "--rescale")) {
            NEED();
            if (!parse_double(o, v, 0, 1, &a->rescale)) return 2;
        } else if (!strcmp(o, "--stg-blocks")) {
            NEED();
            a->n_stg = 0;
            for (const char *s = v; *s;) {
                char *e = NULL;
                const long b = strtol(s, &e, 10);
                if (e == s || b < 0 || b > 100000 || (*e && *e != ',') || a->n_stg >= CQ_LTX2_PIPE_MAX_STG)
                    return cq_cli_usage_error(CMD, "--stg-blocks wants block numbers like 28 or 27,28, not '%s'", v);
                a->stg_blocks[a->n_stg++] = (int)b;
                s = *e ? e + 1 : e;
            }
        } else if (!strcmp(o, "--sigmas")) {
            NEED();
            if (!strcmp(v, "ladder")) a->sigmas = 1;
            else if (!strcmp(v, "linspace")) a->sigmas = 2;
            else return cq_cli_usage_error(CMD, "--sigmas wants ladder or linspace, not '%s'", v);
        } else if (!strcmp(o, "--sampler")) {
            NEED();
            if (!strcmp(v, "euler")) a->ancestral = false;
            else if (!strcmp(v, "ancestral")) a->ancestral = true;
            else return cq_cli_usage_error(CMD, "--sampler wants euler or ancestral, not '%s'", v);
        } else if (!strcmp(o, "--no-audio")) a->no_audio = true;
        else if (!strcmp(o, "--quiet") || !strcmp(o, "-q")) a->quiet = true;
        else if (!strcmp(o, "--image")) { NEED(); a->image = v; }
        else if (!strcmp(o, "--image-crf")) {
            NEED();
            if (!cq_cli_parse_int(CMD, o, v, 0, 51, &n)) return 2;
            a->image_crf = (int)n;
        }
        else if (!strcmp(o, "--two-stage")) a->two_stage = true;
        else if (o[0] == '-' && o[1]) return cq_cli_usage_error(CMD, "unknown option %s", o);
        else if (np < 2) pos[np++] = o;
        else return cq_cli_usage_error(CMD, "one pack and one prompt, then options (got '%s' too)", o);
#undef NEED
    }
    if (np < 2) return cq_cli_usage_error(CMD, "a pack and a prompt are needed");
    if (!a->out && !a->frames_dir && !a->wav) return cq_cli_usage_error(CMD, "no output: give -o, --frames-dir or --wav");
    a->model = pos[0];
    a->prompt = pos[1];
    return 0;
}

typedef struct step_ui {
    cq_progress bar;
} step_ui;

static int on_step(int step, int n, void *user) {
    step_ui *ui = user;
    if (step >= n) cq_progress_end(&ui->bar);
    else cq_progress_update(&ui->bar, (uint64_t)step);
    return 0;
}

/* The pack's defaults (size, steps, guidance, negative prompt) where the command gave none. */
static cq_status apply_defaults(const cq_cmf *cmf, video_args *a) {
    cq_gen_defaults d;
    CQ_TRY(cq_cmf_gen_defaults(cmf, &d));
    if (!a->has_size) {
        a->width = d.has_size ? d.width : 768;
        a->height = d.has_size ? d.height : 512;
    }
    if (!a->has_steps) a->steps = d.has_steps ? d.steps : 8;
    if (!a->has_frames && d.has_frames) a->frames = d.frames;
    if (!a->has_fps && d.has_fps) a->fps = d.fps;
    if (!a->has_guidance) a->guidance = d.has_guidance ? d.guidance : 1.0;
    if (!a->has_audio_guidance) a->audio_guidance = a->guidance;
    static char neg[CQ_GEN_NEGATIVE_MAX + 1];
    if (!a->negative && d.has_negative) {
        snprintf(neg, sizeof neg, "%s", d.negative);
        a->negative = neg;
    }
    cq_gen_defaults_free(&d);
    return CQ_OK;
}

int cq_cmd_video(int argc, char **argv) {
    video_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    cq_cli_catch_signals();
    cq_cli_backend be_pick;
    if ((rc = cq_cli_backend_pick(CMD, a.backend, "auto", NULL, &be_pick))) return rc;

    double t_load = cq_now();
    cq_cmf *cmf = NULL;
    cq_ltx2_pipe *pipe = NULL;
    cq_backend *be = NULL;
    cq_video_out *vo = NULL;
    cq_ltx2_result res = {0};
    float *frames = NULL, *wav = NULL;
    uint8_t *rgb = NULL;
    cq_image8 first = {0};
    step_ui ui = {0};
    cq_status s = cq_cmf_open(a.model, &cmf);
    if (s != CQ_OK) return cq_cli_fail(CMD, s, a.model);
    cq_cmf_info info;
    if (cq_cmf_get_info(cmf, &info) == CQ_OK && (!info.arch_name || strcmp(info.arch_name, "ltx2") != 0)) {
        char what[256];
        s = cq_fail(CQ_ERR_UNSUPPORTED, "'%s' holds %s; `cortiq video` needs an LTX-2 video pipeline (`cortiq "
                    "convert` of a diffusers LTX2Pipeline folder)", a.model, cq_cli_pack_describe(cmf, what, sizeof what));
        rc = cq_cli_fail(CMD, s, NULL);
        goto done;
    }
    if ((s = apply_defaults(cmf, &a)) != CQ_OK || (s = cq_ltx2_pipe_open(cmf, &pipe)) != CQ_OK) {
        rc = cq_cli_fail(CMD, s, a.model);
        goto done;
    }
    cq_ltx2_gen_opts o;
    cq_ltx2_gen_opts_init(&o);
    o.prompt = a.prompt;
    o.negative = a.negative;
    o.width = a.width;
    o.height = a.height;
    o.frames = a.frames;
    o.fps = a.fps;
    o.steps = a.steps;
    o.ladder = a.sigmas == 1 || (a.sigmas == 0 && cq_ltx2_pipe_distilled(pipe) && a.steps == CQ_LTX2_DISTILLED_STEPS);
    o.seed = a.seed;
    o.guidance = a.guidance;
    o.audio_guidance = a.audio_guidance;
    o.stg = o.audio_stg = a.stg;
    o.modality = o.audio_modality = a.modality;
    o.rescale = o.audio_rescale = a.rescale;
    memcpy(o.stg_blocks, a.stg_blocks, sizeof o.stg_blocks);
    o.n_stg_blocks = a.n_stg;
    o.max_tokens = a.prompt_tokens;
    o.on_step = a.quiet ? NULL : on_step;
    o.user = &ui;
    o.two_stage = a.two_stage;
    o.sampler = a.ancestral ? CQ_LTX2_SAMPLER_ANCESTRAL : CQ_LTX2_SAMPLER_EULER;
    if (a.image) {
        if ((s = cq_image_read_rgb(a.image, &first)) != CQ_OK) {
            rc = cq_cli_fail(CMD, s, a.image);
            goto done;
        }
        o.image = first.pixels;
        o.image_width = first.width;
        o.image_height = first.height;
        o.image_crf = a.image_crf;
    }
    if ((s = cq_ltx2_pipe_check(pipe, &o)) != CQ_OK) {
        rc = cq_cli_usage_error(CMD, "%s", cq_last_error());
        goto done;
    }
    /* the outputs now: a bad path fails before the work */
    cq_video_out_opts vopt;
    cq_video_out_opts_init(&vopt);
    vopt.path = a.out;
    vopt.frames_dir = a.frames_dir;
    vopt.wav_path = a.no_audio ? NULL : a.wav;
    vopt.width = a.width;
    vopt.height = a.height;
    vopt.fps_num = (int)lrint(a.fps * 1000);
    vopt.fps_den = 1000;
    if (fabs(a.fps - lrint(a.fps)) < 1e-9) vopt.fps_num = (int)lrint(a.fps), vopt.fps_den = 1;
    vopt.audio_rate = a.no_audio ? 0 : 48000;
    vopt.audio_channels = 2;
    vopt.frames_hint = a.frames;
    vopt.prompt = a.prompt;
    const char *base = strrchr(a.model, '/');
    vopt.model = base ? base + 1 : a.model;
    vopt.seed = a.seed;
    vopt.has_seed = true;
    vopt.crf = a.crf;
    if (a.no_audio && a.wav && !a.out && !a.frames_dir) {
        rc = cq_cli_usage_error(CMD, "--no-audio with only --wav leaves nothing to write");
        goto done;
    }
    if ((s = cq_video_out_open(&vopt, &vo)) != CQ_OK) {
        rc = cq_cli_fail(CMD, s, NULL);
        goto done;
    }
    if (!a.quiet) cq_cli_backend_say(&be_pick);
    if ((s = cq_env_backend_open(be_pick.name, a.threads, be_pick.mem_budget, &be)) != CQ_OK ||
        (s = cq_ltx2_pipe_load_weights(pipe, be)) != CQ_OK ||
        (a.two_stage && (s = cq_ltx2_pipe_load_upsampler(pipe)) != CQ_OK)) {
        rc = cq_cli_fail(CMD, s, "loading the pipeline");
        goto done;
    }
    t_load = cq_now() - t_load;
    const int n_steps = a.steps + (a.two_stage ? CQ_LTX2_STAGE2_STEPS : 0);
    cq_progress_begin(&ui.bar, "denoising", (uint64_t)n_steps, a.quiet);
    s = cq_ltx2_pipe_generate(pipe, &o, &res);
    if (s == CQ_OK && !cq_cli_signal()) s = cq_ltx2_pipe_decode_video(pipe, &res, &frames);
    int64_t ns = 0;
    int ch = 0, rate = 0;
    if (s == CQ_OK && !cq_cli_signal() && !a.no_audio) s = cq_ltx2_pipe_decode_audio(pipe, &res, &wav, &ns, &ch, &rate);
    if (s == CQ_OK && !a.no_audio && (rate != vopt.audio_rate || ch != vopt.audio_channels))
        s = cq_fail(CQ_ERR_UNSUPPORTED, "the vocoder gives %d channels at %d Hz; the writer was opened for %d at %d",
                    ch, rate, vopt.audio_channels, vopt.audio_rate);
    double t_write = cq_now();
    const size_t plane = (size_t)res.width * res.height;
    if (s == CQ_OK && !cq_cli_signal()) {
        rgb = cq_malloc(plane * 3);
        if (!rgb) s = CQ_ERR_NOMEM;
        const size_t nf = plane * (size_t)res.frames;
        for (int f = 0; f < res.frames && s == CQ_OK; f++) {
            for (size_t i = 0; i < plane; i++)
                for (int c = 0; c < 3; c++)
                    rgb[i * 3 + c] = (uint8_t)lrintf(frames[(size_t)c * nf + (size_t)f * plane + i] * 255.0f);
            s = cq_video_out_push_frames(vo, rgb, 1);
        }
    }
    if (s == CQ_OK && wav) s = cq_video_out_push_audio(vo, wav, (size_t)ns);
    if (s == CQ_OK && cq_cli_signal()) s = cq_fail(CQ_ERR_INTERRUPTED, "interrupted");
    if (s == CQ_OK) s = cq_video_out_finish(vo);
    t_write = cq_now() - t_write;
    if (s == CQ_ERR_INTERRUPTED || cq_cli_signal()) {
        if (!a.quiet && ui.bar.tty && ui.bar.done < ui.bar.total) fputc('\n', stderr);
        rc = cq_cli_interrupted(CMD, "no file was written");
        goto done;
    }
    if (s != CQ_OK) {
        if (!a.quiet && ui.bar.tty && ui.bar.done < ui.bar.total) fputc('\n', stderr);
        rc = cq_cli_fail(CMD, s, "generating");
        goto done;
    }
    if (!a.quiet) {
        const char *mp4 = cq_video_out_mp4_path(vo), *dir = cq_video_out_frames_dir(vo), *w = cq_video_out_wav_path(vo);
        if (mp4) fprintf(stderr, "wrote %s (%dx%d, %d frames at %g fps%s)\n", mp4, res.width, res.height, res.frames,
                         a.fps, a.no_audio ? ", no sound" : ", 48 kHz stereo sound");
        if (dir) fprintf(stderr, "wrote %d PNG frames into %s\n", res.frames, dir);
        if (w) fprintf(stderr, "wrote %s\n", w);
        if (a.out && !mp4) {
            char hint[2048];
            fprintf(stderr, "this build has no FFmpeg libraries: to make the MP4, run\n  %s\n",
                    cq_video_out_mux_hint(vo, a.out, hint, sizeof hint));
        }
        char up[64] = "";
        if (a.two_stage) snprintf(up, sizeof up, "upscale %.2fs, ", res.t.upscale);
        fprintf(stderr, "time: load %.2fs, text %.2fs, steps %.2fs (%.3fs/step), %svideo vae %.2fs, audio %.2fs, "
                "write %.2fs on %s\n", t_load, res.t.text, res.t.steps, res.t.steps / n_steps, up, res.t.video,
                res.t.audio, t_write, be_pick.name);
    }
done:
    cq_video_out_free(vo);
    cq_free(rgb);
    cq_image8_free(&first);
    cq_free(frames);
    cq_free(wav);
    cq_ltx2_result_free(&res);
    cq_ltx2_pipe_free(pipe);
    cq_backend_free(be);
    cq_cmf_close(cmf);
    return rc;
}
