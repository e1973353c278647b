/*
 * bench_ltx2_vae.c — `cortiq bench ltx25-vae`: LTX-2.5's output decoders at
 * their released configuration (diffusers' converter, "2.5") with random
 * weights: the conv video VAE's decoder (AutoencoderKLLTX2Video: 128 latent
 * channels, x32 in space, x8 in time), the audio VAE's decoder
 * (AutoencoderKLLTX2Audio) and the vocoder with bandwidth extension to 48 kHz
 * (LTX2VocoderWithBWE), each timed on its own on the latents a W x H x F clip
 * gives, as the pipeline runs them after the last step.
 *
 * One pack holds the three components under "vae.", "audio_vae." and
 * "vocoder." with their configs, in the codecs `cortiq convert` gives them
 * (the video VAE's kernels f16, the audio VAE's and the vocoder's f32, the
 * STFT and mel tables f32), written to a temporary .cmf under $TMPDIR,
 * mapped as a real model is and unlinked at once (bench_pack.h). The video
 * encoder is not written: a decode never reads it.
 *
 * What the released config does not say: timestep_conditioning (the
 * converter sets it from a flag; the 2.5 conv checkpoint is expected to have
 * it off, docs/LTX2.md) is taken as false, the only value the model runs.
 * The default LTX-2.5 video VAE of ltx-pipelines is the diffusion decoder
 * (not implemented); this is the conv VAE.
 *
 * --tiny swaps in small widths with the same factors (x32, x8, 160 samples a
 * mel frame, x3 to 48 kHz) so the whole benchmark runs in a second on a CPU;
 * its timings mean nothing. tools/bench_peer_ltx2_vae.py times diffusers on
 * the same shapes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "models/kit/tensors.h"
#include "models/ltx2_audio.h"
#include "models/ltx2_vae.h"
#include "models/tables.h"

#define B_CMD "bench ltx25-vae"
#define B_MAX_FRAMES 1025

typedef enum { MODE_STREAM, MODE_UNTILED, MODE_TILED } video_mode;
static const char *const k_modes[] = {"stream", "untiled", "tiled"};

typedef struct bench_opts {
    cq_bench_model_opts m;
    int width, height, frames, iters, warmup;
    double fps;
    video_mode mode;
    int tile[3]; /* tiled: a box's latent frames, rows, columns (0: the whole extent) */
    bool tiny, sized, framed, tiled;
} bench_opts;

/* ---- the configs ------------------------------------------------------------------------------------- */
/* The widths that differ between the released config and --tiny; everything else is the release's. */
typedef struct widths {
    int latent;                       /* video latent channels */
    const char *enc, *dec, *layers, *dec_layers;
    int base, res_blocks, alatent, mel_bins;          /* the audio VAE */
    int voc_in, voc_hidden, bwe_in, bwe_hidden, mels; /* the vocoder and its BWE */
} widths;
/* get_ltx2_video_vae_config / get_ltx2_audio_vae_config / get_ltx2_vocoder_config("2.5") */
static const widths k_real = {128, "256, 512, 1024, 1024", "256, 512, 512, 1024", "4, 6, 4, 2, 2", "4, 6, 4, 2, 2",
                              128, 2, 8, 64, 128, 1536, 128, 512, 64};
static const widths k_tiny = {8, "16, 32, 64, 64", "8, 16, 16, 32", "1, 1, 2, 1, 1", "1, 2, 1, 1, 1",
                              16, 1, 4, 16, 32, 64, 16, 32, 8};

typedef struct configs {
    char video[2048], audio[1024], vocoder[2048];
} configs;

static bool write_configs(const widths *s, configs *c) {
    const int kv = snprintf(
        c->video, sizeof c->video,
        "{\"_class_name\": \"AutoencoderKLLTX2Video\", \"in_channels\": 3, \"out_channels\": 3, \"latent_channels\": %d,"
        " \"block_out_channels\": [%s], \"down_block_types\": [\"LTX2VideoDownBlock3D\", \"LTX2VideoDownBlock3D\","
        " \"LTX2VideoDownBlock3D\", \"LTX2VideoDownBlock3D\"], \"decoder_block_out_channels\": [%s],"
        " \"layers_per_block\": [%s], \"decoder_layers_per_block\": [%s],"
        " \"spatio_temporal_scaling\": [true, true, true, true],"
        " \"decoder_spatio_temporal_scaling\": [true, true, true, true],"
        " \"decoder_inject_noise\": [false, false, false, false, false],"
        " \"downsample_type\": [\"spatial\", \"temporal\", \"spatiotemporal\", \"spatiotemporal\"],"
        " \"upsample_type\": [\"spatiotemporal\", \"spatiotemporal\", \"temporal\", \"spatial\"],"
        " \"upsample_residual\": [false, false, false, false], \"upsample_factor\": [2, 2, 1, 2],"
        " \"timestep_conditioning\": false, \"patch_size\": 4, \"patch_size_t\": 1, \"resnet_norm_eps\": 1e-06,"
        " \"scaling_factor\": 1.0, \"encoder_causal\": true, \"decoder_causal\": false,"
        " \"encoder_spatial_padding_mode\": \"zeros\", \"decoder_spatial_padding_mode\": \"zeros\","
        " \"spatial_compression_ratio\": 32, \"temporal_compression_ratio\": 8}",
        s->latent, s->enc, s->dec, s->layers, s->dec_layers);
    const int ka = snprintf(
        c->audio, sizeof c->audio,
        "{\"_class_name\": \"AutoencoderKLLTX2Audio\", \"base_channels\": %d, \"output_channels\": 2,"
        " \"ch_mult\": [1, 2, 4], \"num_res_blocks\": %d, \"attn_resolutions\": null, \"in_channels\": 2,"
        " \"resolution\": 256, \"latent_channels\": %d, \"norm_type\": \"pixel\", \"causality_axis\": \"height\","
        " \"dropout\": 0.0, \"mid_block_add_attention\": false, \"sample_rate\": 16000, \"mel_hop_length\": 160,"
        " \"is_causal\": true, \"mel_bins\": %d, \"double_z\": true}",
        s->base, s->res_blocks, s->alatent, s->mel_bins);
    static const char gen[] =
        "\"%supsample_kernel_sizes\": [%s], \"%supsample_factors\": [%s], \"%sresnet_kernel_sizes\": [3, 7, 11],"
        " \"%sresnet_dilations\": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], \"%sact_fn\": \"snakebeta\","
        " \"%sleaky_relu_negative_slope\": 0.1, \"%santialias\": true, \"%santialias_ratio\": 2,"
        " \"%santialias_kernel_size\": 12, \"%sfinal_act_fn\": null, \"%sfinal_bias\": false";
    char g1[640], g2[640];
    const char *p = "", *b = "bwe_";
    snprintf(g1, sizeof g1, gen, p, "11, 4, 4, 4, 4, 4", p, "5, 2, 2, 2, 2, 2", p, p, p, p, p, p, p, p, p);
    snprintf(g2, sizeof g2, gen, b, "12, 11, 4, 4, 4", b, "6, 5, 2, 2, 2", b, b, b, b, b, b, b, b, b);
    const int ko = snprintf(
        c->vocoder, sizeof c->vocoder,
        "{\"_class_name\": \"LTX2VocoderWithBWE\", \"in_channels\": %d, \"hidden_channels\": %d, \"out_channels\": 2,"
        " %s, \"bwe_in_channels\": %d, \"bwe_hidden_channels\": %d, \"bwe_out_channels\": 2, %s,"
        " \"filter_length\": 512, \"hop_length\": 80, \"window_length\": 512, \"num_mel_channels\": %d,"
        " \"input_sampling_rate\": 16000, \"output_sampling_rate\": 48000}",
        s->voc_in, s->voc_hidden, g1, s->bwe_in, s->bwe_hidden, g2, s->mels);
    return kv > 0 && (size_t)kv < sizeof c->video && ka > 0 && (size_t)ka < sizeof c->audio && ko > 0 &&
           (size_t)ko < sizeof c->vocoder;
}

/* The tensors of table t that a decode reads (the video encoder and the unused STFT inverse left out): kernels
 * in f16 (the video VAE, as a pipeline's vae/ converts) or f32 (the other components), vectors f32. */
static cq_status add_table(cq_bench_pack *p, cq_status listed, cq_tt_list *t, bool f32_kernels) {
    cq_status s = listed;
    for (size_t i = 0; s == CQ_OK && i < t->n; i++) {
        const cq_tt_entry *e = &t->e[i];
        if (e->subtree || !e->required) continue;
        const bool vec = e->codec == CQ_TT_VECTOR;
        s = cq_bench_pack_add(p, vec || f32_kernels ? CQ_DTYPE_F32 : CQ_DTYPE_F16, e->ndim, e->shape, e->base, "%s",
                              e->name);
        if (s == CQ_OK) p->w[p->n - 1].dense = !vec;
    }
    cq_tt_list_free(t);
    return s;
}

/* The three components' weights; bytes[] receives each one's share of the pack. */
static cq_status list_weights(const configs *c, cq_bench_pack *p, uint64_t bytes[3]) {
    cq_ltx2_vae_config vc;
    cq_ltx2_audio_vae_config ac;
    cq_ltx2_vocoder_config oc;
    CQ_TRY(cq_ltx2_vae_parse_config_text(c->video, &vc));
    CQ_TRY(cq_ltx2_audio_vae_parse_config_text(c->audio, &ac));
    CQ_TRY(cq_ltx2_vocoder_parse_config_text(c->vocoder, &oc));
    cq_tt_list t = {0};
    uint64_t b0 = 0;
    CQ_TRY(add_table(p, cq_ltx2_vae_tensors(&vc, "vae.", &t), &t, false));
    bytes[0] = cq_bench_pack_bytes(p) - b0, b0 += bytes[0];
    CQ_TRY(add_table(p, cq_ltx2_audio_vae_tensors(&ac, "audio_vae.", &t), &t, true));
    bytes[1] = cq_bench_pack_bytes(p) - b0, b0 += bytes[1];
    CQ_TRY(add_table(p, cq_ltx2_vocoder_tensors(&oc, "vocoder.", &t), &t, true));
    bytes[2] = cq_bench_pack_bytes(p) - b0;
    return CQ_OK;
}

/* ---- options ------------------------------------------------------------------------------------------ */
static void help(void) {
    printf("usage: cortiq bench ltx25-vae [--size WxH] [--frames F] [--fps R] [--mode stream|untiled|tiled]\n"
           "                              [--tile FxHxW] [--iters N] [--warmup N] [--tiny] [--threads N]\n"
           "                              [--backend cpu|cuda|vulkan]\n"
           "\n"
           "Time LTX-2.5's output decoders at their released configuration (diffusers' converter, \"2.5\") with\n"
           "random weights, each on its own, on what a clip of F frames of W x H pixels gives:\n"
           "  video decode   the conv video VAE's decoder (AutoencoderKLLTX2Video: 128 latent channels, x32 in\n"
           "                 space, x8 in time, decoder widths 1024 | 512, 512, 256, 128) on (F-1)/8+1 latent\n"
           "                 frames of H/32 x W/32 latents, into F frames of W x H;\n"
           "  audio decode   the audio VAE's decoder (AutoencoderKLLTX2Audio) on round(F/fps x 25) latent\n"
           "                 frames, into a stereo log-mel of 4T-3 frames x 64 bins;\n"
           "  vocoder        LTX2VocoderWithBWE on that mel: 16 kHz (BigVGAN-v2, x160), then the bandwidth\n"
           "                 extension to 48 kHz stereo.\n"
           "The weights are written in the codecs `cortiq convert` gives them (video VAE kernels f16, the audio\n"
           "VAE's and the vocoder's f32; 1.4 GiB, the video encoder left out) to a temporary .cmf under\n"
           "$TMPDIR, mapped as a real model is and removed when mapped. Reports each component's median of\n"
           "--iters runs after --warmup runs, in ms, and its peak memory (device memory on a GPU, resident on\n"
           "the CPU). A video decode that does not fit the device's free memory (or the machine's, on the\n"
           "CPU) is refused before it starts, with the estimate.\n"
           "Assumed: timestep_conditioning false (the released config leaves it to a converter flag; the 2.5\n"
           "conv VAE is expected to have it off). The diffusion decoder that ltx-pipelines defaults to is not\n"
           "this VAE and is not run.\n"
           "\n"
           "options:\n"
           "  --size WxH      width x height in pixels, multiples of 32 (default 768x512; --tiny 64x64)\n"
           "  --frames F      frames, 8k + 1 (default 121; --tiny 9)\n"
           "  --fps R         frame rate (default 24): the audio's length\n"
           "  --mode M        the video decode: stream (default: a few frames a layer on the device, the\n"
           "                  pipeline's), untiled (the whole video at once) or tiled (boxes of --tile latents\n"
           "                  with the exact halo, 15 latent frames and 17 latents: equal to untiled)\n"
           "  --tile FxHxW    tiled: a box's latent frames, rows and columns, 0 for the whole extent\n"
           "                  (default 0x16x16: 512-pixel tiles, as diffusers' tiling)\n"
           "  --iters N       timed runs of each component (default 1 on the CPU, 3 on a GPU)\n"
           "  --warmup N      untimed runs before them (default 1)\n"
           "  --tiny          small widths with the released factors, for a test in seconds on the CPU (its\n"
           "                  timings mean nothing)\n"
           "  --threads N     worker threads (default: CORTIQ_THREADS or all cores)\n"
           "  --backend B     cpu (default), cuda, cuda:N or vulkan\n"
           CQ_BENCH_NO_VERIFY_HELP
           "  -h, --help      this text\n");
}

/* "AxBxC" into n values of [lo, hi]; false on anything else. */
static bool parse_dims(const char *v, int n, long lo, long hi, int *out) {
    const char *s = v ? v : "";
    for (int i = 0; i < n; i++) {
        char *end;
        if (*s < '0' || *s > '9') return false;
        long x = strtol(s, &end, 10);
        if (x < lo || x > hi || *end != (i + 1 < n ? 'x' : '\0')) return false;
        out[i] = (int)x;
        s = end + (i + 1 < n);
    }
    return true;
}

static int opt(const char *cmd, const char *a, const char *v, int *i, void *ctx) {
    bench_opts *o = ctx;
    long n;
    if (strcmp(a, "--tiny") == 0) {
        o->tiny = true;
        return 1;
    }
    const int r = cq_bench_clip_arg(cmd, a, v, B_MAX_FRAMES, i, &o->frames, &o->fps);
    if (r == 1 && strcmp(a, "--frames") == 0) o->framed = true;
    if (r) return r;
    if (strcmp(a, "--size") == 0) {
        int wh[2];
        if (!parse_dims(v, 2, 32, 8192, wh))
            return cq_cli_usage_error(cmd, "--size wants WxH in pixels, each 32 .. 8192 (768x512), got '%s'", v ? v : "");
        if (wh[0] % 32 || wh[1] % 32)
            return cq_cli_usage_error(cmd, "--size: %dx%d is not a multiple of 32 (the VAE's factor)", wh[0], wh[1]);
        o->width = wh[0], o->height = wh[1], o->sized = true;
    } else if (strcmp(a, "--mode") == 0) {
        int k = 0;
        while (k < 3 && !(v && strcmp(v, k_modes[k]) == 0)) k++;
        if (k == 3) return cq_cli_usage_error(cmd, "--mode must be stream, untiled or tiled, got '%s'", v ? v : "");
        o->mode = (video_mode)k;
    } else if (strcmp(a, "--tile") == 0) {
        if (!parse_dims(v, 3, 0, 4096, o->tile))
            return cq_cli_usage_error(cmd, "--tile wants FxHxW in latents (0: the whole extent), got '%s'", v ? v : "");
        o->tiled = true;
    } else if (strcmp(a, "--iters") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 100, &n)) return 2;
        o->iters = (int)n;
    } else if (strcmp(a, "--warmup") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 0, 10, &n)) return 2;
        o->warmup = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* ---- the run --------------------------------------------------------------------------------------- */
typedef struct bench_run {
    cq_ltx2_vae *vae;
    cq_ltx2_audio_vae *avae;
    cq_ltx2_vocoder *voc;
    video_mode mode;
    cq_ltx2_vae_tiling tiling;
    int F, h, w, T, Tm, Cm, M;
    float *z, *frames, *alat, *mel, *wav;
    uint64_t stream_bytes;
} bench_run;

static cq_status video_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    switch (r->mode) {
    case MODE_STREAM: return cq_ltx2_vae_decode_stream(r->vae, r->z, r->F, r->h, r->w, r->frames, &r->stream_bytes);
    case MODE_UNTILED: return cq_ltx2_vae_decode_tokens(r->vae, r->z, r->F, r->h, r->w, r->frames);
    default: return cq_ltx2_vae_decode_tiled(r->vae, r->z, r->F, r->h, r->w, &r->tiling, r->frames);
    }
}

/* The pipeline's step: the DiT's audio tokens un-normalised, then decoded. */
static cq_status audio_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    return cq_ltx2_audio_decode(r->avae, r->alat, r->T, true, r->mel);
}

static cq_status vocoder_call(void *ctx, int i) {
    (void)i;
    bench_run *r = ctx;
    return cq_ltx2_vocoder_forward(r->voc, r->mel, r->Cm, r->Tm, r->M, NULL, r->wav);
}

static void run_free(bench_run *r) {
    cq_ltx2_vae_free(r->vae);
    cq_ltx2_audio_vae_free(r->avae);
    cq_ltx2_vocoder_free(r->voc);
    cq_free(r->z);
    cq_free(r->frames);
    cq_free(r->alat);
    cq_free(r->mel);
    cq_free(r->wav);
}

static float *random_rows(size_t n, uint64_t seed) {
    float *v = cq_mallocn(n, sizeof(float));
    for (size_t i = 0; v && i < n; i++) v[i] = 2.0f * cq_bench_rng_unit(&seed);
    return v;
}

static bool all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

/* The video decode's memory: what the mode holds on the backend (*dev) and in host memory besides the pack
 * (*host: the latents and frames, and on a host backend the activations too). */
static void video_bytes(const bench_run *r, const cq_ltx2_vae_config *c, video_mode mode, bool host_backend,
                        size_t nframes, uint64_t *dev, uint64_t *host) {
    int ht, hs;
    cq_ltx2_vae_decode_halo(c, &ht, &hs);
    const int t[3] = {r->tiling.frames, r->tiling.rows, r->tiling.cols};
    const int ext[3] = {r->F, r->h, r->w}, halo[3] = {ht, hs, hs};
    int box[3];
    for (int k = 0; k < 3; k++) box[k] = t[k] && t[k] + 2 * halo[k] < ext[k] ? t[k] + 2 * halo[k] : ext[k];
    *dev = mode == MODE_STREAM    ? cq_ltx2_vae_stream_bytes(c, r->h, r->w)
           : mode == MODE_UNTILED ? cq_ltx2_vae_decode_bytes(c, r->F, r->h, r->w)
                                  : cq_ltx2_vae_decode_bytes(c, box[0], box[1], box[2]);
    *host = (uint64_t)(nframes + (size_t)c->latent_channels * r->F * r->h * r->w) * sizeof(float);
    if (host_backend) *host += *dev;
}

/* Refuse a video decode that cannot fit: the estimate against the device's free memory (and the budget the
 * backend keeps to), and the host's part against the machine's memory. */
static cq_status check_memory(const bench_run *r, cq_backend *be, const cq_ltx2_vae_config *c, size_t nframes) {
    const bool host = cq_backend_is_host(be);
    uint64_t dev, hst, sdev, shst;
    video_bytes(r, c, r->mode, host, nframes, &dev, &hst);
    video_bytes(r, c, MODE_STREAM, host, nframes, &sdev, &shst);
    const uint64_t ram = cq_bench_ram(), rss = cq_bench_rss(), hfree = ram > rss ? ram - rss : 0;
    char hint[160] = "";
    if (r->mode != MODE_STREAM)
        snprintf(hint, sizeof hint, "; --mode stream needs about %.2f GiB there", gib(host ? shst : sdev));
    if (ram && hst > hfree)
        return cq_fail(CQ_ERR_NOMEM, "the %s video decode of %dx%dx%d latents needs about %.2f GiB of host memory, "
                       "and this machine has %.2f GiB free%s; give a smaller --size or --frames",
                       k_modes[r->mode], r->F, r->h, r->w, gib(hst), gib(hfree), host ? hint : "");
    if (host) return CQ_OK;
    cq_backend_stats st;
    CQ_TRY(cq_backend_get_stats(be, &st, false));
    uint64_t avail = st.device_free;
    const uint64_t budget = cq_backend_mem_budget(be);
    if (budget) avail = budget > st.mem_in_use ? CQ_MIN(avail, budget - st.mem_in_use) : 0;
    if (st.device_total && dev > avail)
        return cq_fail(CQ_ERR_NOMEM, "the %s video decode of %dx%dx%d latents needs about %.2f GiB on %s, which has "
                       "%.2f GiB free for it%s", k_modes[r->mode], r->F, r->h, r->w, gib(dev), cq_backend_name(be),
                       gib(avail), hint);
    return CQ_OK;
}

/* One component: warm-ups, the timed runs, the median and the peak memory of the timed runs. */
typedef struct timing {
    double ms;
    uint64_t peak;
} timing;

static cq_status time_part(cq_bench_call_fn fn, bench_run *r, const bench_opts *o, cq_backend *be, timing *t) {
    const bool host = cq_backend_is_host(be);
    if (host) cq_bench_reset_peak_rss();
    cq_backend_stats st0, st;
    double wall, cpu;
    CQ_TRY(cq_bench_repeat(fn, r, o->warmup, o->iters, be, &st0, &wall, &cpu));
    CQ_TRY(cq_backend_get_stats(be, &st, false));
    t->ms = 1e3 * wall;
    t->peak = host ? cq_bench_peak_rss() : st.mem_peak; /* the timed runs': the stats were reset after the warm-ups */
    return CQ_OK;
}

static void part_line(const char *what, const timing *t, const bench_opts *o, bool host, const char *rate) {
    printf("%s: %.2f ms (median of %d after %d warm-up%s)%s; %s %.2f GiB\n", what, t->ms, o->iters, o->warmup,
           o->warmup == 1 ? "" : "s", rate, host ? "peak resident" : "device peak", gib(t->peak));
}

static int fail(bench_run *r, cq_bench_model *bm, cq_status s, const char *what) {
    int rc = cq_cli_fail(B_CMD, s, what);
    run_free(r);
    cq_bench_model_close(bm);
    return rc;
}

/* The buffers of one run of each component; CQ_ERR_NOMEM when one is not there. */
static cq_status alloc_run(bench_run *r, size_t nz, size_t nframes, size_t na, size_t nmel, size_t nwav) {
    r->z = random_rows(nz, 4242);
    r->alat = random_rows(na, 777);
    r->frames = cq_mallocn(nframes, sizeof(float));
    r->mel = cq_mallocn(nmel, sizeof(float));
    r->wav = cq_mallocn(nwav, sizeof(float));
    return r->z && r->alat && r->frames && r->mel && r->wav ? CQ_OK : CQ_ERR_NOMEM;
}

int cq_bench_ltx2_vae(int argc, char **argv) {
    bench_opts o = {.m = {.backend = "cpu", .own_size = true}, .width = 768, .height = 512, .frames = 121, .fps = 24,
                    .mode = MODE_STREAM, .tile = {0, 16, 16}, .warmup = 1};
    bool done = false;
    int rc = cq_bench_model_args(B_CMD, argc, argv, &o.m, help, opt, &o, &done);
    if (rc || done) return rc;
    if (o.tiled && o.mode != MODE_TILED) return cq_cli_usage_error(B_CMD, "--tile is an option of --mode tiled");
    if (o.tiny && !o.sized) o.width = o.height = 64;
    if (o.tiny && !o.framed) o.frames = 9;
    const int T = (int)lrint((double)o.frames / o.fps * 25.0);
    if (T < 1) return cq_cli_usage_error(B_CMD, "%d frames at %g fps give no audio latent frame", o.frames, o.fps);

    configs cfg;
    if (!write_configs(o.tiny ? &k_tiny : &k_real, &cfg)) return cq_cli_fail(B_CMD, CQ_ERR_INTERNAL, "the configs");
    cq_bench_pack pk = {0};
    uint64_t part[3] = {0};
    cq_status s = list_weights(&cfg, &pk, part);
    const cq_bench_blob more[2] = {{"audio_vae.config_json", cfg.audio, strlen(cfg.audio)},
                                   {"vocoder.config_json", cfg.vocoder, strlen(cfg.vocoder)}};
    const cq_bench_component comp = {.tag = "ltx2-vae", .tool = "cortiq " B_CMD, .quant = CQ_DTYPE_F16,
                                     .weights = &pk, .blob_name = "vae.config_json", .blob = cfg.video,
                                     .more = more, .n_more = 2, .arch = {"ltx2_vae", 0, 0, 0, 0, 0, 0, "1e-06"}};
    printf("LTX-2.5 video VAE decoder, audio VAE decoder and vocoder with BWE, %s, random weights "
           "(timestep_conditioning false, assumed)\n", o.tiny ? "TINY widths (--tiny: timings mean nothing)"
                                                               : "released configuration");
    char b[3][32];
    printf("video decoder %s (f16 kernels), audio VAE decoder %s, vocoder %s (f32 kernels)\n",
           cq_fmt_bytes(part[0], b[0], sizeof b[0]), cq_fmt_bytes(part[1], b[1], sizeof b[1]),
           cq_fmt_bytes(part[2], b[2], sizeof b[2]));
    fflush(stdout);
    cq_bench_model bm;
    rc = cq_bench_model_open(&bm, B_CMD, &o.m, &comp, s);
    cq_bench_pack_free(&pk);
    if (rc) return rc;
    const bool host = cq_backend_is_host(bm.be);
    if (o.iters == 0) o.iters = host ? 1 : 3;

    bench_run r = {.mode = o.mode, .T = T};
    double t0 = cq_now();
    s = cq_ltx2_vae_load(bm.cmf, "vae.", bm.be, &r.vae);
    if (s == CQ_OK) s = cq_ltx2_audio_vae_load(bm.cmf, "audio_vae.", bm.be, &r.avae);
    if (s == CQ_OK) s = cq_ltx2_vocoder_load(bm.cmf, "vocoder.", bm.be, &r.voc);
    if (s == CQ_OK) s = cq_backend_sync(bm.be);
    if (s != CQ_OK) return fail(&r, &bm, s, "loading the decoders");
    cq_bench_model_loaded(&bm, cq_now() - t0);

    const cq_ltx2_vae_config *vc = cq_ltx2_vae_get_config(r.vae);
    const cq_ltx2_audio_vae_config *ac = cq_ltx2_audio_vae_get_config(r.avae);
    const cq_ltx2_vocoder_config *oc = cq_ltx2_vocoder_get_config(r.voc);
    r.F = (o.frames - 1) / vc->t_up + 1, r.h = o.height / vc->s_up, r.w = o.width / vc->s_up;
    r.tiling = (cq_ltx2_vae_tiling){o.tile[0], o.tile[1], o.tile[2], -1, -1};
    int Fo, Ho, Wo;
    s = cq_ltx2_vae_decode_shape(r.vae, r.F, r.h, r.w, &Fo, &Ho, &Wo);
    if (s != CQ_OK) return fail(&r, &bm, s, "the video's shape");
    r.Tm = cq_ltx2_audio_mel_frames(T), r.Cm = ac->output_channels, r.M = ac->mel_bins;
    int64_t n_out = 0;
    cq_ltx2_vocoder_lengths(r.voc, r.Tm, NULL, &n_out);
    const int ch = oc->bwe ? oc->bwe_gen.out_channels : oc->gen.out_channels;
    const int rate = oc->bwe ? oc->out_rate : oc->in_rate;
    const size_t nframes = (size_t)vc->out_channels * Fo * Ho * Wo, nmel = (size_t)r.Cm * r.Tm * r.M;
    printf("%dx%d px, %d frames at %g fps: %d latent frames of %dx%d x %d channels; %d audio latent frames -> mel "
           "%dx%dx%d -> %lld samples x %d at %d Hz\n", o.width, o.height, o.frames, o.fps, r.F, r.w, r.h,
           vc->latent_channels, T, r.Cm, r.Tm, r.M, (long long)n_out, ch, rate);
    if (o.mode == MODE_TILED) {
        int ht, hs;
        cq_ltx2_vae_decode_halo(vc, &ht, &hs);
        const int ext[3] = {r.F, r.h, r.w};
        int boxes = 1;
        for (int k = 0; k < 3; k++) boxes *= o.tile[k] ? (ext[k] + o.tile[k] - 1) / o.tile[k] : 1;
        printf("tiled: %d box%s of %dx%dx%d latents (0: the whole extent), each with the exact halo of %d latent "
               "frames and %d latents\n", boxes, boxes == 1 ? "" : "es", o.tile[0], o.tile[1], o.tile[2], ht, hs);
    }
    fflush(stdout);
    s = check_memory(&r, bm.be, vc, nframes);
    if (s != CQ_OK) return fail(&r, &bm, s, "not run");
    s = alloc_run(&r, (size_t)vc->latent_channels * r.F * r.h * r.w, nframes,
                  (size_t)T * ac->latent_channels * ac->latent_mel, nmel, (size_t)n_out * ch);
    if (s != CQ_OK) return fail(&r, &bm, s, "allocating the inputs and outputs");

    timing tv, ta, to;
    s = time_part(video_call, &r, &o, bm.be, &tv);
    if (s == CQ_ERR_NOMEM)
        cq_fail_prefix(s, "out of memory%s: ", o.mode == MODE_STREAM ? "" : " (--mode stream holds the least)");
    if (s != CQ_OK) return fail(&r, &bm, s, "the video decode");
    s = time_part(audio_call, &r, &o, bm.be, &ta);
    if (s != CQ_OK) return fail(&r, &bm, s, "the audio decode");
    if (!all_finite(r.mel, nmel)) fprintf(stderr, "cortiq " B_CMD ": warning: the mel holds non-finite values\n");
    s = time_part(vocoder_call, &r, &o, bm.be, &to);
    if (s != CQ_OK) return fail(&r, &bm, s, "the vocoder");
    if (!all_finite(r.frames, nframes) || !all_finite(r.wav, (size_t)n_out * ch))
        fprintf(stderr, "cortiq " B_CMD ": warning: the output holds non-finite values\n");

    char what[160], rt[96];
    snprintf(what, sizeof what, "video decode %dx%dx%d latents (FxHxW) -> %d frames of %dx%d (%s)", r.F, r.h, r.w, Fo,
             Wo, Ho,
             k_modes[o.mode]);
    snprintf(rt, sizeof rt, ", %.1f frames/s", Fo / (tv.ms * 1e-3));
    part_line(what, &tv, &o, host, rt);
    if (o.mode == MODE_STREAM)
        printf("  the stream decode allocated %.2f GiB on the backend\n", gib(r.stream_bytes));
    snprintf(what, sizeof what, "audio decode %d latent frames -> mel %dx%dx%d", T, r.Cm, r.Tm, r.M);
    part_line(what, &ta, &o, host, "");
    const double secs = (double)n_out / rate;
    snprintf(what, sizeof what, "vocoder %d mel frames -> %lld samples x %d at %d Hz (%s)", r.Tm, (long long)n_out, ch,
             rate, oc->bwe ? "with BWE" : "no BWE");
    snprintf(rt, sizeof rt, ", %.3gx real time", secs / (to.ms * 1e-3));
    part_line(what, &to, &o, host, rt);
    printf("total (video + audio + vocoder): %.2f ms for %.2f s of %s\n", tv.ms + ta.ms + to.ms, secs,
           o.tiny ? "tiny output" : "video and audio");
    cq_backend_stats st;
    if (!host && cq_backend_get_stats(bm.be, &st, false) == CQ_OK) {
        char b1[32], b2[32], b3[32];
        printf("device memory: weights %s; %s of %s used on the device\n", cq_fmt_bytes(st.weight_bytes, b1, sizeof b1),
               cq_fmt_bytes(st.device_total - st.device_free, b2, sizeof b2),
               cq_fmt_bytes(st.device_total, b3, sizeof b3));
    }
    run_free(&r);
    cq_bench_model_close(&bm);
    return 0;
}
