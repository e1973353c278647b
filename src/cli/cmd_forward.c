/*
 * cmd_forward.c — `cortiq forward`: one denoiser forward on tensors from a
 * safetensors file, written to another. This is the parity contract
 * (README.md, "cortiq forward"): inputs named like the reference forward's
 * arguments. The pack's denoiser config decides the model:
 *  - Qwen-Image-2.1: output `velocity` for the target rows; by default the
 *    cached path (prefill + step) runs, --no-cache runs the whole joint
 *    sequence at once;
 *  - Z-Image: x, cap_feats, t -> `out` (models/zimage_inputs.h), prepare and
 *    one step;
 *  - Qwen-Image: hidden_states, encoder_hidden_states (and its mask),
 *    timestep, img_shapes -> `out` (models/qimage_inputs.h), prepare and one
 *    step;
 *  - LTX-2 (LTX2VideoTransformer3DModel, the 2.3 / 2.5 layout): both streams'
 *    latents and prompts, timesteps, sigmas and the grid -> `sample` and
 *    `audio_sample` (models/ltx2_inputs.h), prepare and one step.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/env.h"
#include "format/safetensors.h"
#include "models/qi21.h"
#include "models/qi21_inputs.h"
#include "models/kit/config.h"
#include "models/ltx2.h"
#include "models/ltx2_inputs.h"
#include "models/qimage.h"
#include "models/qimage_inputs.h"
#include "models/zimage.h"
#include "models/zimage_inputs.h"
#include "ops/ops.h"

static void help(void) {
    printf(
        "usage: cortiq forward MODEL.cmf --inputs IN.safetensors --output OUT.safetensors\n"
        "                      [--no-cache] [--threads N] [--backend NAME] [--no-verify]\n"
        "\n"
        "Run the denoiser of MODEL once on the tensors of IN and write its output to OUT. MODEL is a\n"
        "pipeline pack or a bare transformer converted with `cortiq convert` (tensors dit.*, config\n"
        "dit.config_json): Qwen-Image-2.1 (QwenImage21Transformer2DModel), Qwen-Image\n"
        "(QwenImageTransformer2DModel), Z-Image (ZImageTransformer2DModel) or LTX-2.5's audio-video\n"
        "denoiser (LTX2VideoTransformer3DModel). Tensors of other names in IN are ignored.\n"
        "\n"
        "Qwen-Image-2.1: IN holds (names as the reference forward's arguments; each may have a\n"
        "leading batch of 1):\n"
        "  hidden_states          f32 [N_image_tokens, in_channels]  condition images first, target last\n"
        "  encoder_hidden_states  f32 [vlm_len - target_slots, context_in_dim]  one row per position of\n"
        "                         the vision-language sequence before the target's slots (rows at\n"
        "                         condition-image slots are placeholders and ignored)\n"
        "  timestep               f32 [1]  in [0, 1]\n"
        "  img_shapes             i32 [k, 3]  (frame, height, width) in latent tokens per image block,\n"
        "                         target last (i64 accepted); frame must be 1\n"
        "  img_mask               u8 [vlm_len]  1 at image slots, the target's included; each slot\n"
        "                         stands for 2x2 latent tokens (bool, i32, i64 accepted)\n"
        "OUT gets:\n"
        "  velocity               f32 [target_tokens, out_channels]\n"
        "\n"
        "Z-Image: IN holds\n"
        "  x                      f32 [C, 1, H, W] or [C, H, W]  the latent of one image (H, W even)\n"
        "  cap_feats              f32 [L, cap_feat_dim]  the caption rows (a leading batch of 1 accepted)\n"
        "  t                      f32 [1]  the model's timestep in [0, 1] (the pipeline passes 1 - sigma)\n"
        "OUT gets:\n"
        "  out                    f32, x's shape: the model's raw output (the pipeline negates it)\n"
        "\n"
        "Qwen-Image: IN holds (each may have a leading batch of 1)\n"
        "  hidden_states          f32 [N, in_channels]  packed 2x2 tokens: the target's, then each\n"
        "                         condition image's\n"
        "  encoder_hidden_states  f32 [L, joint_attention_dim]  the text rows\n"
        "  encoder_hidden_states_mask  optional [L]  nonzero at valid rows (f32, u8, bool, i32, i64)\n"
        "  timestep               f32 [1]  sigma in [0, 1]\n"
        "  img_shapes             i32 [k, 3]  (frame, height, width) in tokens, the target first\n"
        "OUT gets:\n"
        "  out                    f32 [N, 4 out_channels]  proj_out for every token\n"
        "\n"
        "LTX-2.5: IN holds (each may have a leading batch of 1; scalars [1] or 0-D)\n"
        "  hidden_states          f32 [T, in_channels]  video tokens, (frame, row, col) order\n"
        "  audio_hidden_states    f32 [Ta, audio_in_channels]  audio tokens in time order\n"
        "  encoder_hidden_states  f32 [L, dim]  the video prompt rows (the connector's output)\n"
        "  audio_encoder_hidden_states  f32 [La, audio_dim]  the audio prompt rows\n"
        "  timestep               f32 [1] or [T]  1000 sigma in [0, 1000]; per token for a conditioned frame\n"
        "  audio_timestep         f32 [1] or [Ta]  optional: the video's when that is one value\n"
        "  sigma                  f32 [1]  1000 sigma; audio_sigma f32 [1] optional (sigma's value)\n"
        "  num_frames, height, width  int [1]  the latent grid: T = num_frames x height x width\n"
        "  fps                    [1]  optional, default 24; audio_num_frames int [1] optional (= Ta)\n"
        "  video_coords           f32 [3, T, 2], audio_coords f32 [1, Ta, 2]  optional: must be the grid's\n"
        "  use_cross_timestep     int [1]  optional, default 1; isolate_modalities int [1], default 0\n"
        "  spatio_temporal_guidance_blocks  int [k]  optional: the STG blocks\n"
        "OUT gets:\n"
        "  sample                 f32 [T, out_channels]  the video velocity\n"
        "  audio_sample           f32 [Ta, audio_out_channels]  the audio velocity\n"
        "\n"
        "options:\n"
        "  -i, --inputs FILE   the input tensors\n"
        "  -o, --output FILE   where to write the velocity (safetensors)\n"
        "  --no-cache          Qwen-Image-2.1: run the whole joint sequence at once instead of prefill +\n"
        "                      step (Z-Image, Qwen-Image and LTX-2.5 have one path: prepare, then one step)\n"
        "  --threads N         worker threads (default: CORTIQ_THREADS or all cores)\n"
        "  --backend NAME      cpu (default), ref (the plain-C reference ops; slow), cuda[:N] or vulkan[:N]\n"
        "  --no-verify         do not check each tensor's hash when it is first read (the header and\n"
        "                      directory hashes are still checked; `cortiq verify` checks everything)\n"
        "  -h, --help          this text\n"
        "\n"
        "Both paths compute the same thing; the cached one is what image generation runs.\n");
}

typedef struct fwd_opts {
    const char *model, *inputs, *output, *backend;
    bool no_cache, no_verify;
    int threads;
} fwd_opts;

static int parse(int argc, char **argv, fwd_opts *o, bool *done) {
    const char *cmd = "forward";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cq_cli_is_help(a)) {
            help();
            *done = true;
            return 0;
        } else if (strcmp(a, "-i") == 0 || strcmp(a, "--inputs") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "%s needs a file name", a);
            o->inputs = argv[i];
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "%s needs a file name", a);
            o->output = argv[i];
        } else if (strcmp(a, "--no-cache") == 0) {
            o->no_cache = true;
        } else if (strcmp(a, "--no-verify") == 0) {
            o->no_verify = true;
        } else if (strcmp(a, "--threads") == 0) {
            long v;
            if (!cq_cli_parse_int(cmd, a, i + 1 < argc ? argv[++i] : NULL, 1, 4096, &v)) return 2;
            o->threads = (int)v;
        } else if (strcmp(a, "--backend") == 0) {
            if (++i >= argc) return cq_cli_usage_error(cmd, "--backend needs a name");
            o->backend = argv[i];
            if (cq_backend_lookup(o->backend, NULL, NULL) != CQ_OK) return cq_cli_usage_error(cmd, "%s", cq_last_error());
        } else if (a[0] == '-' && a[1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (!o->model) return cq_cli_usage_error(cmd, "missing the model (.cmf)");
    if (!o->inputs) return cq_cli_usage_error(cmd, "missing --inputs IN.safetensors");
    if (!o->output) return cq_cli_usage_error(cmd, "missing --output OUT.safetensors");
    return 0;
}

/* The denoiser's tensor prefix in the pack: "dit." (pipeline or converted
 * transformer folder), or none for a pack of bare names. */
static const char *find_prefix(const cq_cmf *cmf) {
    return cq_cmf_find(cmf, "dit.config_json") || !cq_cmf_find(cmf, "config_json") ? "dit." : "";
}

/* Whether the denoiser config names the class `cls`. */
static bool is_class(const cq_cmf *cmf, const char *prefix, const char *cls) {
    cJSON *j = NULL;
    if (cq_cfg_open(cmf, prefix, "forward", &j) != CQ_OK) return false;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "_class_name");
    bool z = cJSON_IsString(c) && strcmp(c->valuestring, cls) == 0;
    cJSON_Delete(j);
    return z;
}

static cq_status run_qimage(const fwd_opts *o, cq_backend *be, cq_cmf *cmf, cq_st *st, const char **what) {
    cq_qimage *m = NULL;
    cq_qimage_inputs in = {0};
    float *out = NULL;
    cq_st_writer *w = NULL;
    *what = "loading the model";
    cq_status s = cq_qimage_load(cmf, find_prefix(cmf), be, &m);
    const cq_qimage_config *cfg = s == CQ_OK ? cq_qimage_get_config(m) : NULL;
    if (s == CQ_OK) {
        *what = "reading the inputs";
        s = cq_qimage_inputs_read(st, cfg, &in);
    }
    if (s == CQ_OK && !(out = cq_mallocn((size_t)in.n_img * (size_t)cfg->out_dim, sizeof(float)))) s = CQ_ERR_NOMEM;
    double t0 = cq_now();
    if (s == CQ_OK) {
        *what = "running the denoiser";
        s = cq_qimage_forward(m, &in.layout, in.txt, in.img, in.t, out);
    }
    double t1 = cq_now();
    if (s == CQ_OK) {
        *what = "writing the output";
        const uint64_t shape[2] = {(uint64_t)in.n_img, (uint64_t)cfg->out_dim};
        s = cq_st_writer_create(&w);
        if (s == CQ_OK) s = cq_st_writer_add_f32(w, "out", 2, shape, out);
        if (s == CQ_OK) s = cq_st_writer_save(w, o->output);
        if (s == CQ_OK)
            printf("out [%d, %d] -> %s (%s: %.3f s)\n", in.n_img, cfg->out_dim, o->output, cq_backend_name(be), t1 - t0);
    }
    cq_st_writer_free(w);
    cq_free(out);
    cq_qimage_inputs_free(&in);
    cq_qimage_free(m);
    return s;
}

static cq_status run_zimage(const fwd_opts *o, cq_backend *be, cq_cmf *cmf, cq_st *st, const char **what) {
    cq_zimage *m = NULL;
    cq_zimage_inputs in = {0};
    float *out = NULL;
    cq_st_writer *w = NULL;
    *what = "loading the model";
    cq_status s = cq_zimage_load(cmf, find_prefix(cmf), be, &m);
    if (s == CQ_OK) {
        *what = "reading the inputs";
        s = cq_zimage_inputs_read(st, cq_zimage_get_config(m), &in);
    }
    const size_t n = (size_t)in.x_shape[0] * (size_t)in.lat_h * (size_t)in.lat_w;
    if (s == CQ_OK && !(out = cq_mallocn(n, sizeof(float)))) s = CQ_ERR_NOMEM;
    double t0 = cq_now();
    if (s == CQ_OK) {
        *what = "running the denoiser";
        s = cq_zimage_forward(m, in.latent, in.lat_h, in.lat_w, in.cap, in.n_cap, in.t, out);
    }
    double t1 = cq_now();
    if (s == CQ_OK) {
        *what = "writing the output";
        s = cq_st_writer_create(&w);
        if (s == CQ_OK) s = cq_st_writer_add_f32(w, "out", in.x_ndim, in.x_shape, out);
        if (s == CQ_OK) s = cq_st_writer_save(w, o->output);
        if (s == CQ_OK)
            printf("out [%llu, %d, %d] -> %s (%s: %.3f s)\n", (unsigned long long)in.x_shape[0], in.lat_h, in.lat_w,
                   o->output, cq_backend_name(be), t1 - t0);
    }
    cq_st_writer_free(w);
    cq_free(out);
    cq_zimage_inputs_free(&in);
    cq_zimage_free(m);
    return s;
}

static cq_status run_ltx2(const fwd_opts *o, cq_backend *be, cq_cmf *cmf, cq_st *st, const char **what) {
    cq_ltx2 *m = NULL;
    cq_ltx2_cond *c = NULL;
    cq_ltx2_file_inputs in = {0};
    float *v = NULL, *a = NULL;
    cq_st_writer *w = NULL;
    *what = "loading the model";
    cq_status s = cq_ltx2_load(cmf, find_prefix(cmf), be, &m);
    const cq_ltx2_config *cfg = s == CQ_OK ? cq_ltx2_get_config(m) : NULL;
    if (s == CQ_OK) {
        *what = "reading the inputs";
        s = cq_ltx2_file_inputs_read(st, cfg, &in);
    }
    const size_t nv = (size_t)in.in.frames * (size_t)in.in.height * (size_t)in.in.width;
    const size_t na = (size_t)in.in.audio_frames;
    if (s == CQ_OK) {
        v = cq_mallocn(nv * (size_t)cfg->out_channels, sizeof(float));
        a = cq_mallocn(na * (size_t)cfg->audio_out_channels, sizeof(float));
        if (!v || !a) s = CQ_ERR_NOMEM;
    }
    double t0 = cq_now(), t1 = t0;
    if (s == CQ_OK) {
        *what = "preparing the denoiser";
        s = cq_ltx2_prepare(m, &in.in, &c);
        t1 = cq_now();
    }
    if (s == CQ_OK) {
        *what = "running the denoiser";
        s = cq_ltx2_step(c, &in.in, v, a);
    }
    double t2 = cq_now();
    if (s == CQ_OK) {
        *what = "writing the output";
        const uint64_t vs[2] = {(uint64_t)nv, (uint64_t)cfg->out_channels};
        const uint64_t as[2] = {(uint64_t)na, (uint64_t)cfg->audio_out_channels};
        s = cq_st_writer_create(&w);
        if (s == CQ_OK) s = cq_st_writer_add_f32(w, "sample", 2, vs, v);
        if (s == CQ_OK) s = cq_st_writer_add_f32(w, "audio_sample", 2, as, a);
        if (s == CQ_OK) s = cq_st_writer_save(w, o->output);
        if (s == CQ_OK)
            printf("sample [%zu, %d], audio_sample [%zu, %d] -> %s (%s: prepare %.3f s, step %.3f s)\n", nv,
                   cfg->out_channels, na, cfg->audio_out_channels, o->output, cq_backend_name(be), t1 - t0, t2 - t1);
    }
    cq_st_writer_free(w);
    cq_free(v);
    cq_free(a);
    cq_ltx2_cond_free(c);
    cq_ltx2_file_inputs_free(&in);
    cq_ltx2_free(m);
    return s;
}

static cq_status run(const fwd_opts *o, cq_backend *be, cq_cmf *cmf, cq_st *st, const char **what) {
    const bool z = is_class(cmf, find_prefix(cmf), "ZImageTransformer2DModel");
    const bool q = !z && is_class(cmf, find_prefix(cmf), "QwenImageTransformer2DModel");
    const bool l = !z && !q && is_class(cmf, find_prefix(cmf), "LTX2VideoTransformer3DModel");
    if ((z || q || l) && o->no_cache)
        return cq_fail(CQ_ERR_INVALID_ARG, "--no-cache applies to Qwen-Image-2.1 packs only");
    if (z) return run_zimage(o, be, cmf, st, what);
    if (q) return run_qimage(o, be, cmf, st, what);
    if (l) return run_ltx2(o, be, cmf, st, what);
    cq_qi21 *m = NULL;
    cq_qi21_cache *c = NULL;
    cq_qi21_inputs in = {0};
    float *vel = NULL;
    cq_st_writer *w = NULL;
    *what = "loading the model";
    cq_status s = cq_qi21_load(cmf, find_prefix(cmf), be, &m);
    const cq_qi21_config *cfg = s == CQ_OK ? cq_qi21_get_config(m) : NULL;
    if (s == CQ_OK) {
        *what = "reading the inputs";
        s = cq_qi21_inputs_read(st, cfg, &in);
    }
    if (s == CQ_OK) {
        vel = cq_mallocn((size_t)in.n_target * (size_t)cfg->out_channels, sizeof(float));
        if (!vel) s = CQ_ERR_NOMEM;
    }
    double t0 = cq_now(), t1 = t0;
    if (s == CQ_OK) {
        *what = "running the denoiser";
        if (o->no_cache) {
            s = cq_qi21_forward_full(m, &in.layout, in.ctx, in.cond, in.target, in.t, vel);
            t1 = cq_now();
        } else {
            s = cq_qi21_prefill(m, &in.layout, in.ctx, in.cond, &c);
            t1 = cq_now();
            if (s == CQ_OK) s = cq_qi21_step(m, c, in.target, in.t, vel);
        }
    }
    double t2 = cq_now();
    if (s == CQ_OK) {
        *what = "writing the output";
        uint64_t shape[2] = {(uint64_t)in.n_target, (uint64_t)cfg->out_channels};
        s = cq_st_writer_create(&w);
        if (s == CQ_OK) s = cq_st_writer_add_f32(w, "velocity", 2, shape, vel);
        if (s == CQ_OK) s = cq_st_writer_set_metadata(w, "path", o->no_cache ? "full" : "cached");
        if (s == CQ_OK) s = cq_st_writer_save(w, o->output);
        if (s == CQ_OK) {
            printf("velocity [%d, %d] -> %s (%s, %s", in.n_target, cfg->out_channels, o->output,
                   cq_backend_name(be), o->no_cache ? "no cache" : "cached");
            if (o->no_cache)
                printf(": %.3f s)\n", t1 - t0);
            else
                printf(": prefill %.3f s, step %.3f s)\n", t1 - t0, t2 - t1);
        }
    }
    cq_st_writer_free(w);
    cq_free(vel);
    cq_qi21_cache_free(c);
    cq_qi21_inputs_free(&in);
    cq_qi21_free(m);
    return s;
}

int cq_cmd_forward(int argc, char **argv) {
    fwd_opts o = {.backend = "cpu"};
    bool done = false;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done) return rc;
    cq_cmf *cmf = NULL;
    cq_st *st = NULL;
    cq_backend *be = NULL;
    cq_cmf_open_opts oo = {.no_verify = o.no_verify, .threads = o.threads};
    cq_status s = cq_cmf_open_ex(o.model, &oo, &cmf);
    if (s != CQ_OK) return cq_cli_fail("forward", s, o.model);
    if ((s = cq_st_open(o.inputs, &st)) != CQ_OK) {
        cq_cmf_close(cmf);
        return cq_cli_fail("forward", s, o.inputs);
    }
    const char *what = "creating the backend";
    s = cq_env_backend_create(o.backend, o.threads, &be);
    if (s == CQ_OK) s = run(&o, be, cmf, st, &what);
    if (s != CQ_OK) rc = cq_cli_fail("forward", s, what);
    cq_backend_free(be);
    cq_st_close(st);
    cq_cmf_close(cmf);
    return rc;
}
