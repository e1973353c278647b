/*
 * test_ltx2_audio.c — LTX-2.3 / 2.5's audio VAE decoder, vocoder and
 * bandwidth extender (models/ltx2_audio.h) and the WAV writer
 * (pipelines/wav_write.h), on the backend named by the one argument
 * (testutil.h: `test_ltx2_audio cpu`, `test_ltx2_audio vulkan`, ...).
 *
 * Always on:
 *  - tiny random packs written here through the CMF writer, their tensors
 *    listed by the models' own tables and filled by kind (the anti-aliasing
 *    filters BigVGAN's kaiser sinc, as the reference builds them; a
 *    positive mel filterbank; a random STFT basis of the real 512 taps and
 *    hop 80): an audio VAE in LTX-2.5's structure (ch_mult 1, 2, 4; pixel
 *    norm; causal in time) at base width 16, and an LTX2VocoderWithBWE
 *    with the real strides, kernels, dilations and rate ratio at widths 64
 *    and 32, each against a plain double-precision host loop written below
 *    from diffusers' modules: the mel (also through the un-normalisation),
 *    the 16 kHz output, the BWE's log-mel and the 48 kHz output, within
 *    TOL_MEL x RMS and TOL_WAV x full scale on a backend that computes in
 *    f32 (the CPU, Vulkan), TOL_DEVICE where it rounds operands to f16;
 *  - diffusers folders of both converted by `cortiq convert` (arch names,
 *    prefixes, the table's tensors, the same outputs);
 *  - bad configs and inputs refused with messages that say why;
 *  - the WAV writer: a round trip through the reader, the sample rule, the
 *    header, refusals (NaN, a directory) that leave nothing behind.
 * With tests/golden/ltx2_audio (tools/golden_ltx2_audio.py; skipped while it
 * is absent): the folders converted, every case's mel within 1e-4 x RMS and
 * each waveform within 1e-4 of full scale of diffusers' f32 CPU run on the
 * CPU, or twice the reference's own f32 error where that is larger; on a
 * device within a quarter of the reference's own bf16 error (at least 1e-4).
 * The reference's own f32 error is index.json's "f64" record (its f32 output
 * against the same modules in float64); without it, the golden against the
 * f64 host loop below run on the golden's weights and mel (printed per stage
 * as "host-f64"). Measured: diffusers' 48 kHz output is 8.9e-5 (t2) / 9.0e-5
 * (t4) of full scale off the exact one (ours 7.2e-5 / 1.1e-4; ours against
 * the golden 7.6e-5 / 1.2e-4), at interior samples, while the 16 kHz signal
 * and the BWE's log-mel agree to 7e-6: the random BWE generator amplifies
 * its input's f32 rounding (the golden's own f32 log-mel alone moves the
 * exact output by 8.5e-5), so the 48 kHz bound is 1.8e-4 there.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/ltx2_audio.h"
#include "models/tables.h"
#include "ops/ops.h"
#include "pipelines/wav_write.h"

#define TOL_MEL 1e-5    /* of the mel's RMS */
#define TOL_WAV 1e-4    /* of full scale (max(1, max |ref|)) */
#define TOL_DEVICE 3e-2 /* f16 GEMM operands on a device through a random vocoder, which amplifies rounding ~20x
                           * (the f32 CPU path shows the same gain); the H200 measured 1.19e-2 (Tm 5, 16 kHz) */
#define TOL_GOLD 1e-4

static tu_backend_arg g_arg;
static cq_backend *g_be;

/* ---- configs ------------------------------------------------------------- */
static const char k_vae_cfg[] =
    "{\"_class_name\": \"AutoencoderKLLTX2Audio\", \"base_channels\": 16, \"output_channels\": 2,"
    " \"ch_mult\": [1, 2, 4], \"num_res_blocks\": 1, \"attn_resolutions\": null, \"in_channels\": 2,"
    " \"resolution\": 256, \"latent_channels\": 4, \"norm_type\": \"pixel\", \"causality_axis\": \"height\","
    " \"dropout\": 0.0, \"mid_block_add_attention\": false, \"sample_rate\": 16000, \"mel_hop_length\": 160,"
    " \"is_causal\": true, \"mel_bins\": 16, \"double_z\": true}";

static const char k_voc_cfg[] =
    "{\"_class_name\": \"LTX2VocoderWithBWE\", \"in_channels\": 32, \"hidden_channels\": 64, \"out_channels\": 2,"
    " \"upsample_kernel_sizes\": [11, 4, 4, 4, 4, 4], \"upsample_factors\": [5, 2, 2, 2, 2, 2],"
    " \"resnet_kernel_sizes\": [3, 7, 11], \"resnet_dilations\": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],"
    " \"act_fn\": \"snakebeta\", \"leaky_relu_negative_slope\": 0.1, \"antialias\": true, \"antialias_ratio\": 2,"
    " \"antialias_kernel_size\": 12, \"final_act_fn\": null, \"final_bias\": false, \"bwe_in_channels\": 16,"
    " \"bwe_hidden_channels\": 32, \"bwe_out_channels\": 2, \"bwe_upsample_kernel_sizes\": [12, 11, 4, 4, 4],"
    " \"bwe_upsample_factors\": [6, 5, 2, 2, 2], \"bwe_resnet_kernel_sizes\": [3, 7, 11],"
    " \"bwe_resnet_dilations\": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], \"bwe_act_fn\": \"snakebeta\","
    " \"bwe_leaky_relu_negative_slope\": 0.1, \"bwe_antialias\": true, \"bwe_antialias_ratio\": 2,"
    " \"bwe_antialias_kernel_size\": 12, \"bwe_final_act_fn\": null, \"bwe_final_bias\": false,"
    " \"filter_length\": 512, \"hop_length\": 80, \"window_length\": 512, \"num_mel_channels\": 8,"
    " \"input_sampling_rate\": 16000, \"output_sampling_rate\": 48000}";

/* ---- weights: named arrays filled by the kind the table gives them ------- */
typedef struct wt {
    char name[192];
    int ndim;
    uint64_t shape[4];
    size_t n;
    float *v;
} wt;
typedef struct wset {
    wt *w;
    size_t n;
} wset;

static const wt *wfind(const wset *s, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->w[i].name, name)) return &s->w[i];
    fail_msg("no weight %s", name);
    return NULL;
}
#define W(...) (wfind(ws, __VA_ARGS__)->v)

static bool ends(const char *s, const char *e) {
    size_t n = strlen(s), m = strlen(e);
    return n >= m && !strcmp(s + n - m, e);
}

/* BigVGAN's kaiser-windowed sinc low-pass (cutoff 0.5 / ratio, half width 0.6 / ratio), as the reference builds
 * its filters: the test's packs hold the values a real one holds. */
static void kaiser_filter(int ratio, int k, float *f) {
    const double cutoff = 0.5 / ratio, hw = 0.6 / ratio, df = 4 * hw;
    const int half = k / 2;
    const double amp = 2.285 * (half - 1) * M_PI * df + 7.95;
    const double beta = amp > 50 ? 0.1102 * (amp - 8.7) : amp >= 21 ? 0.5842 * pow(amp - 21, 0.4) + 0.07886 * (amp - 21) : 0;
    double sum = 0, tmp[64];
    for (int i = 0; i < k; i++) {
        /* numpy's kaiser: I0(beta sqrt(1 - (2i/(k-1) - 1)^2)) / I0(beta) */
        const double r = 2.0 * i / (k - 1) - 1.0, x = beta * sqrt(fmax(0.0, 1 - r * r));
        double i0a = 1, i0b = 1, ta = 1, tb = 1;
        for (int j = 1; j < 60; j++) {
            ta *= (x / 2) / j, tb *= (beta / 2) / j;
            i0a += ta * ta, i0b += tb * tb;
        }
        const double t = (k % 2 == 0 ? i - half + 0.5 : i - half) * 2 * cutoff;
        const double sinc = t == 0 ? 1 : sin(M_PI * t) / (M_PI * t);
        tmp[i] = 2 * cutoff * (i0a / i0b) * sinc;
        sum += tmp[i];
    }
    for (int i = 0; i < k; i++) f[i] = (float)(tmp[i] / sum);
}

static void make_set(const cq_tt_list *t, const char *prefix, uint64_t seed, wset *s) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    s->n = t->n;
    s->w = calloc(t->n, sizeof *s->w);
    assert_non_null(s->w);
    float kf[64];
    for (size_t i = 0; i < t->n; i++) {
        const cq_tt_entry *e = &t->e[i];
        wt *w = &s->w[i];
        snprintf(w->name, sizeof w->name, "%s", e->name + strlen(prefix));
        w->ndim = e->ndim;
        w->n = 1;
        for (int d = 0; d < e->ndim; d++) w->shape[d] = e->shape[d], w->n *= e->shape[d];
        if (e->subtree) { /* the encoder: one placeholder tensor under it */
            snprintf(w->name, sizeof w->name, "%sconv_in.conv.bias", e->name + strlen(prefix));
            w->ndim = 1, w->shape[0] = 3, w->n = 3;
        }
        w->v = malloc(w->n * sizeof(float));
        assert_non_null(w->v);
        if (ends(w->name, ".filter")) {
            kaiser_filter(2, (int)w->n, kf);
            memcpy(w->v, kf, w->n * sizeof(float));
        } else if (ends(w->name, "mel_basis")) {
            for (size_t j = 0; j < w->n; j++) w->v[j] = 0.02f * tu_rng_uniform(&r);
        } else if (ends(w->name, "_basis")) {
            tu_fill_normal(&r, w->v, w->n, 0.05f);
        } else if (ends(w->name, ".alpha") || ends(w->name, ".beta")) {
            tu_fill_normal(&r, w->v, w->n, 0.3f); /* logs */
        } else if (ends(w->name, "latents_std")) {
            for (size_t j = 0; j < w->n; j++) w->v[j] = 0.5f + tu_rng_uniform(&r);
        } else if (e->ndim >= 2) {
            const uint64_t fan = ends(w->name, "weight") && strstr(w->name, "upsamplers.") ? w->n / w->shape[1]
                                                                                              : w->n / w->shape[0];
            /* conv_out small, so the waveforms stay near full scale as a trained model's do */
            tu_fill_normal(&r, w->v, w->n, (ends(w->name, "conv_out.weight") ? 0.2f : 1.0f) / sqrtf((float)fan));
        } else {
            tu_fill_normal(&r, w->v, w->n, 0.1f);
        }
    }
}

static void free_set(wset *s) {
    for (size_t i = 0; i < s->n; i++) free(s->w[i].v);
    free(s->w);
}

static const char k_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"ltx2_audio\",\"hidden_size\":16,"
    "\"intermediate_size\":16,\"num_layers\":1,\"num_attention_heads\":1,\"num_kv_heads\":1,\"head_dim\":16,"
    "\"vocab_size\":0,\"max_position_embeddings\":0,\"layer_types\":[\"FullAttention\"],\"rms_norm_eps\":1e-6}}";

/* a pack of both components (either set may be NULL); skip names one tensor left out */
static const char *write_pack(const char *dir, const char *leaf, const wset *vae, const wset *voc, const char *skip) {
    const char *path = tu_path(dir, leaf);
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, k_header, strlen(k_header)), CQ_OK);
    const wset *sets[2] = {vae, voc};
    const char *pre[2] = {"audio_vae.", "vocoder."}, *cfg[2] = {k_vae_cfg, k_voc_cfg};
    char n[256];
    for (int k = 0; k < 2; k++) {
        if (!sets[k]) continue;
        snprintf(n, sizeof n, "%sconfig_json", pre[k]);
        uint64_t cl[1] = {strlen(cfg[k])};
        assert_int_equal(cq_cmf_writer_add(w, n, CQ_DTYPE_U8, 1, cl, cfg[k], cl[0]), CQ_OK);
        for (size_t i = 0; i < sets[k]->n; i++) {
            const wt *t = &sets[k]->w[i];
            snprintf(n, sizeof n, "%s%s", pre[k], t->name);
            if (skip && !strcmp(skip, n)) continue;
            if (cq_cmf_writer_add(w, n, CQ_DTYPE_F32, t->ndim, t->shape, t->v, t->n * sizeof(float)) != CQ_OK)
                fail_msg("add %s: %s", n, cq_last_error());
        }
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("finish: %s", cq_last_error());
    cq_cmf_writer_free(w);
    return path;
}

/* a diffusers folder (config.json, diffusion_pytorch_model.safetensors) */
static void write_folder(const char *folder, const wset *s, const char *cfg) {
    assert_int_equal(tu_system("mkdir -p '%s'", folder), 0);
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    for (size_t i = 0; i < s->n; i++)
        if (cq_st_writer_add_f32(w, s->w[i].name, s->w[i].ndim, s->w[i].shape, s->w[i].v) != CQ_OK)
            fail_msg("add %s: %s", s->w[i].name, cq_last_error());
    char p[1400];
    snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors", folder);
    if (cq_st_writer_save(w, p) != CQ_OK) fail_msg("save: %s", cq_last_error());
    cq_st_writer_free(w);
    snprintf(p, sizeof p, "%s/config.json", folder);
    assert_int_equal(tu_write_file(p, cfg, strlen(cfg)), 0);
}

/* ---- the double-precision host loop: the decoder -------------------------- */
/* maps are [C][H][W] (PyTorch's layout, batch dropped) */
static double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

static double silu(double x) { return x / (1 + exp(-x)); }

/* LTX2AudioCausalConv2d (height causal): pad (W: k/2 each side, H: k-1 before), then a plain conv */
static double *h_conv2(const wset *ws, const char *name, const double *x, int cin, int cout, int k, int H, int W) {
    const float *w = W("%s.conv.weight", name), *b = W("%s.conv.bias", name);
    double *y = dalloc((size_t)cout * H * W);
    const int pl = (k - 1) / 2, pt = k - 1;
    for (int co = 0; co < cout; co++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) {
                double s = b[co];
                for (int ci = 0; ci < cin; ci++)
                    for (int a = 0; a < k; a++)
                        for (int c = 0; c < k; c++) {
                            const int ii = i + a - pt, jj = j + c - pl;
                            if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                            s += w[(((size_t)co * cin + ci) * k + a) * k + c] * x[((size_t)ci * H + ii) * W + jj];
                        }
                y[((size_t)co * H + i) * W + j] = s;
            }
    return y;
}

static double *h_pn_silu(const double *x, int C, int H, int W) {
    double *y = dalloc((size_t)C * H * W);
    for (int p = 0; p < H * W; p++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[(size_t)c * H * W + p] * x[(size_t)c * H * W + p];
        const double r = 1 / sqrt(ss / C + 1e-6);
        for (int c = 0; c < C; c++) y[(size_t)c * H * W + p] = silu(x[(size_t)c * H * W + p] * r);
    }
    return y;
}

static double *h_res2(const wset *ws, const char *name, double *x, int cin, int cout, int H, int W) {
    char n[200];
    double *h = h_pn_silu(x, cin, H, W);
    snprintf(n, sizeof n, "%s.conv1", name);
    double *t = h_conv2(ws, n, h, cin, cout, 3, H, W);
    free(h);
    h = h_pn_silu(t, cout, H, W);
    free(t);
    snprintf(n, sizeof n, "%s.conv2", name);
    double *y = h_conv2(ws, n, h, cout, cout, 3, H, W);
    free(h);
    double *sk = x;
    if (cin != cout) {
        snprintf(n, sizeof n, "%s.nin_shortcut", name);
        sk = h_conv2(ws, n, x, cin, cout, 1, H, W);
    }
    for (size_t i = 0; i < (size_t)cout * H * W; i++) y[i] += sk[i];
    if (sk != x) free(sk);
    free(x);
    return y;
}

/* AutoencoderKLLTX2Audio.decode of the pipeline's un-normalised, unpacked latents; mel [2][Tm][M] */
static void host_decode(const wset *ws, const float *packed, int T, bool denorm, double *mel) {
    const int C = 4, Ml = 4, base = 16, mult[3] = {1, 2, 4}, nrb = 1, M = 16;
    double *x = dalloc((size_t)C * T * Ml);
    const float *mean = W("latents_mean"), *std = W("latents_std");
    for (int t = 0; t < T; t++)
        for (int j = 0; j < C * Ml; j++) {
            double v = packed[(size_t)t * C * Ml + j];
            if (denorm) v = v * std[j] + mean[j];
            x[((size_t)(j / Ml) * T + t) * Ml + j % Ml] = v; /* unflatten (C, Ml), transpose */
        }
    int H = T, Wd = Ml, ch = base * mult[2];
    double *h = h_conv2(ws, "decoder.conv_in", x, C, ch, 3, H, Wd);
    free(x);
    h = h_res2(ws, "decoder.mid.block_1", h, ch, ch, H, Wd);
    h = h_res2(ws, "decoder.mid.block_2", h, ch, ch, H, Wd);
    char n[200];
    for (int level = 2; level >= 0; level--) {
        for (int j = 0; j <= nrb; j++) {
            snprintf(n, sizeof n, "decoder.up.%d.block.%d", level, j);
            h = h_res2(ws, n, h, ch, base * mult[level], H, Wd);
            ch = base * mult[level];
        }
        if (level == 0) continue;
        double *u = dalloc((size_t)ch * 4 * H * Wd);
        for (int c = 0; c < ch; c++)
            for (int i = 0; i < 2 * H; i++)
                for (int j = 0; j < 2 * Wd; j++)
                    u[((size_t)c * 2 * H + i) * 2 * Wd + j] = h[((size_t)c * H + i / 2) * Wd + j / 2];
        free(h);
        snprintf(n, sizeof n, "decoder.up.%d.upsample.conv", level);
        double *v = h_conv2(ws, n, u, ch, ch, 3, 2 * H, 2 * Wd);
        free(u);
        h = dalloc((size_t)ch * (2 * H - 1) * 2 * Wd);
        for (int c = 0; c < ch; c++) /* x[:, :, 1:, :] */
            memcpy(h + (size_t)c * (2 * H - 1) * 2 * Wd, v + ((size_t)c * 2 * H + 1) * 2 * Wd,
                   (size_t)(2 * H - 1) * 2 * Wd * sizeof(double));
        free(v);
        H = 2 * H - 1, Wd = 2 * Wd;
    }
    double *p = h_pn_silu(h, ch, H, Wd);
    free(h);
    double *o = h_conv2(ws, "decoder.conv_out", p, ch, 2, 3, H, Wd);
    free(p);
    const int Tm = T * 4 - 3 > 1 ? T * 4 - 3 : 1;
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < Tm; t++)
            for (int m = 0; m < M; m++)
                mel[((size_t)c * Tm + t) * M + m] = t < H && m < Wd ? o[((size_t)c * H + t) * Wd + m] : 0.0;
    free(o);
}

/* ---- the host loop: the vocoder (signals [C][L]) -------------------------- */
typedef struct sig {
    int C;
    int64_t L;
    double *v;
} sig;

static sig snew(int C, int64_t L) { return (sig){C, L, dalloc((size_t)C * L)}; }

/* F.pad(x, (lo, hi)) in zero or replicate mode */
static sig h_pad(const sig *x, int lo, int hi, bool replicate) {
    sig y = snew(x->C, x->L + lo + hi);
    for (int c = 0; c < x->C; c++)
        for (int64_t i = 0; i < y.L; i++) {
            int64_t s = i - lo;
            if (replicate) s = s < 0 ? 0 : s >= x->L ? x->L - 1 : s;
            y.v[(size_t)c * y.L + i] = s >= 0 && s < x->L ? x->v[(size_t)c * x->L + s] : 0.0;
        }
    return y;
}

/* nn.Conv1d on an already padded x: w [cout, cin/g, k] */
static sig h_conv1(const sig *x, const float *w, const float *b, int cout, int k, int stride, int dil, int groups) {
    const int cin = x->C, cg = cin / groups, og = cout / groups;
    const int64_t Lo = (x->L - (int64_t)dil * (k - 1) - 1) / stride + 1;
    sig y = snew(cout, Lo);
    for (int co = 0; co < cout; co++) {
        const int g = co / og;
        for (int64_t o = 0; o < Lo; o++) {
            double s = b ? b[co] : 0.0;
            for (int ci = 0; ci < cg; ci++)
                for (int j = 0; j < k; j++)
                    s += (double)w[((size_t)co * cg + ci) * k + j] *
                         x->v[(size_t)(g * cg + ci) * x->L + o * stride + (int64_t)j * dil];
            y.v[(size_t)co * Lo + o] = s;
        }
    }
    return y;
}

/* nn.ConvTranspose1d (padding p both ends, dilation 1): w [cin, cout/g, k] */
static sig h_convt(const sig *x, const float *w, const float *b, int cout, int k, int stride, int groups, int pl,
                   int pr, double gain) {
    const int cin = x->C, cg = cin / groups, og = cout / groups;
    const int64_t full = (x->L - 1) * stride + k, Lo = full - pl - pr;
    sig y = snew(cout, Lo);
    for (int co = 0; co < cout; co++)
        for (int64_t o = 0; o < Lo; o++) y.v[(size_t)co * Lo + o] = b ? b[co] : 0.0;
    for (int ci = 0; ci < cin; ci++) {
        const int g = ci / cg;
        for (int cc = 0; cc < og; cc++) {
            const int co = g * og + cc;
            for (int64_t i = 0; i < x->L; i++)
                for (int j = 0; j < k; j++) {
                    const int64_t o = i * stride + j - pl;
                    if (o < 0 || o >= Lo) continue;
                    y.v[(size_t)co * Lo + o] +=
                        gain * (double)w[((size_t)ci * og + cc) * k + j] * x->v[(size_t)ci * x->L + i];
                }
        }
    }
    return y;
}

/* AntiAliasAct1d(SnakeBeta) of a generator's ratio 2, kernel 12 */
static sig h_aa(const wset *ws, const char *name, const sig *x) {
    const int r = 2, k = 12, C = x->C, pad = k / r - 1, pl = pad * r + (k - r) / 2, pr = pad * r + (k - r + 1) / 2;
    const float *fu = W("%s.upsample.filter", name), *fd = W("%s.downsample.filter", name);
    float *wu = calloc((size_t)C * k, sizeof(float)), *wd = calloc((size_t)C * k, sizeof(float));
    if (!wu || !wd) fail_msg("out of memory");
    for (int c = 0; c < C; c++)
        for (int j = 0; j < k; j++) wu[c * k + j] = fu[j], wd[c * k + j] = fd[j];
    sig p = h_pad(x, pad, pad, true);
    sig u = h_convt(&p, wu, NULL, C, k, r, C, pl, pr, (double)r);
    free(p.v);
    const float *al = W("%s.act.alpha", name), *be = W("%s.act.beta", name);
    for (int c = 0; c < C; c++) {
        const double a = exp((double)al[c]), bb = exp((double)be[c]);
        for (int64_t i = 0; i < u.L; i++) {
            double *v = &u.v[(size_t)c * u.L + i];
            const double sn = sin(*v * a);
            *v = *v + 1.0 / (bb + 1e-9) * sn * sn;
        }
    }
    p = h_pad(&u, k / 2 + k % 2 - 1, k / 2, true);
    free(u.v);
    sig y = h_conv1(&p, wd, NULL, C, k, r, 1, C);
    free(p.v), free(wu), free(wd);
    return y;
}

/* LTX2Vocoder.forward on x [in][L] (already [B, C*M, T]) */
static sig h_gen(const wset *ws, const char *st, const sig *x, int hidden, int out, const int *upk, const int *upf,
                 int nups) {
    static const int rk[3] = {3, 7, 11}, dil[3] = {1, 3, 5};
    char n[256];
    sig p = h_pad(x, 3, 3, false);
    snprintf(n, sizeof n, "%sconv_in", st);
    sig h = h_conv1(&p, W("%s.weight", n), W("%s.bias", n), hidden, 7, 1, 1, 1);
    free(p.v);
    int ch = hidden;
    for (int i = 0; i < nups; i++) {
        const int co = ch / 2, pp = (upk[i] - upf[i]) / 2;
        sig u = h_convt(&h, W("%supsamplers.%d.weight", st, i), W("%supsamplers.%d.bias", st, i), co, upk[i],
                        upf[i], 1, pp, pp, 1.0);
        free(h.v);
        ch = co;
        sig acc = snew(ch, u.L);
        for (int j = 0; j < 3; j++) {
            const int ri = i * 3 + j, k = rk[j];
            sig y = snew(ch, u.L);
            memcpy(y.v, u.v, (size_t)ch * u.L * sizeof(double));
            for (int d = 0; d < 3; d++) {
                snprintf(n, sizeof n, "%sresnets.%d.acts1.%d", st, ri, d);
                sig a = h_aa(ws, n, &y);
                const int t1 = dil[d] * (k - 1);
                sig q = h_pad(&a, t1 / 2, t1 - t1 / 2, false);
                free(a.v);
                snprintf(n, sizeof n, "%sresnets.%d.convs1.%d", st, ri, d);
                sig c1 = h_conv1(&q, W("%s.weight", n), W("%s.bias", n), ch, k, 1, dil[d], 1);
                free(q.v);
                snprintf(n, sizeof n, "%sresnets.%d.acts2.%d", st, ri, d);
                a = h_aa(ws, n, &c1);
                free(c1.v);
                q = h_pad(&a, (k - 1) / 2, (k - 1) - (k - 1) / 2, false);
                free(a.v);
                snprintf(n, sizeof n, "%sresnets.%d.convs2.%d", st, ri, d);
                sig c2 = h_conv1(&q, W("%s.weight", n), W("%s.bias", n), ch, k, 1, 1, 1);
                free(q.v);
                for (size_t z = 0; z < (size_t)ch * u.L; z++) y.v[z] += c2.v[z];
                free(c2.v);
            }
            for (size_t z = 0; z < (size_t)ch * u.L; z++) acc.v[z] += y.v[z] / 3.0;
            free(y.v);
        }
        free(u.v);
        h = acc;
    }
    snprintf(n, sizeof n, "%sact_out", st);
    sig a = h_aa(ws, n, &h);
    free(h.v);
    p = h_pad(&a, 3, 3, false);
    free(a.v);
    snprintf(n, sizeof n, "%sconv_out", st);
    sig y = h_conv1(&p, W("%s.weight", n), NULL, out, 7, 1, 1, 1);
    free(p.v);
    return y;
}

/* the vocoder's sizes the host loop needs (the generators' strides, kernels and dilations are LTX-2.5's) */
typedef struct hdims {
    int M, hidden, bwe_hidden, n_mels, N, hop;
} hdims;

static hdims dims_of(const cq_ltx2_vocoder_config *c) {
    return (hdims){c->gen.in_channels / 2, c->gen.hidden_channels, c->bwe_gen.hidden_channels, c->n_mels,
                   c->filter_length, c->hop_length};
}

/* the stages of the BWE the host loop also hands back (each may be NULL) */
typedef struct hstages {
    sig *res, *skip;  /* the BWE generator's output, the resampled input ([2][3 Lpad]) */
    const float *mel; /* when set, the BWE generator runs on this log-mel [F][2 * n_mels] instead of its own */
} hstages;

/* LTX2VocoderWithBWE.forward: low [2][L], bwe_mel [F][2 * n_mels] (channel c * n_mels + m), out [2][3 L] */
static void host_vocoder(const wset *ws, const hdims *d, const float *mel, int Tm, sig *low, double **bmel,
                         int64_t *F, sig *out, const hstages *hs) {
    static const int upk[6] = {11, 4, 4, 4, 4, 4}, upf[6] = {5, 2, 2, 2, 2, 2};
    static const int bk[5] = {12, 11, 4, 4, 4}, bf[5] = {6, 5, 2, 2, 2};
    const int M = d->M, nm = d->n_mels, N = d->N, hop = d->hop, nf = N / 2 + 1;
    sig x = snew(2 * M, Tm);
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < Tm; t++)
            for (int m = 0; m < M; m++) x.v[(size_t)(c * M + m) * Tm + t] = mel[((size_t)c * Tm + t) * M + m];
    *low = h_gen(ws, "vocoder.", &x, d->hidden, 2, upk, upf, 6);
    free(x.v);
    const int64_t L = low->L, rem = L % hop;
    sig xp = h_pad(low, 0, rem ? (int)(hop - rem) : 0, false);
    /* CausalSTFT: left pad N - hop, conv1d with forward_basis [2 nf, 1, N], stride hop; magnitude; mel; log */
    const float *basis = W("mel_stft.stft_fn.forward_basis"), *mb = W("mel_stft.mel_basis");
    *F = xp.L / hop;
    *bmel = dalloc((size_t)*F * 2 * nm);
    sig mx = snew(2 * nm, *F);
    double *mag = dalloc((size_t)nf);
    for (int c = 0; c < 2; c++)
        for (int64_t f = 0; f < *F; f++) {
            for (int r = 0; r < nf; r++) {
                double re = 0, im = 0;
                for (int n = 0; n < N; n++) {
                    const int64_t t = f * hop - (N - hop) + n;
                    const double s = t >= 0 ? xp.v[(size_t)c * xp.L + t] : 0.0;
                    re += basis[(size_t)r * N + n] * s;
                    im += basis[(size_t)(nf + r) * N + n] * s;
                }
                mag[r] = sqrt(re * re + im * im);
            }
            for (int m = 0; m < nm; m++) {
                double s = 0;
                for (int r = 0; r < nf; r++) s += mb[(size_t)m * nf + r] * mag[r];
                const double lm = log(fmax(s, 1e-5));
                (*bmel)[(size_t)f * 2 * nm + c * nm + m] = lm;
                mx.v[(size_t)(c * nm + m) * *F + f] = hs && hs->mel ? hs->mel[(size_t)f * 2 * nm + c * nm + m] : lm;
            }
        }
    free(mag);
    sig res = h_gen(ws, "bwe_generator.", &mx, d->bwe_hidden, 2, bk, bf, 5);
    free(mx.v);
    /* UpSample1d(3, "hann"): width 7, k 43 */
    const int ratio = 3, width = 7, k = 2 * width * ratio + 1;
    float hf[2 * 43];
    for (int i = 0; i < k; i++) {
        const double t = ((double)i / ratio - width) * 0.99, tc = fmin(fmax(t, -6.0), 6.0);
        const double wv = cos(tc * M_PI / 12) * cos(tc * M_PI / 12), sc = t == 0 ? 1 : sin(M_PI * t) / (M_PI * t);
        hf[i] = hf[k + i] = (float)(sc * wv * 0.99 / ratio);
    }
    sig p = h_pad(&xp, width, width, true);
    sig skip = h_convt(&p, hf, NULL, 2, k, ratio, 2, 2 * width * ratio, k - ratio, (double)ratio);
    free(p.v), free(xp.v);
    assert_int_equal(skip.L, res.L);
    *out = snew(2, L * 3);
    for (int c = 0; c < 2; c++)
        for (int64_t i = 0; i < L * 3; i++) {
            const double v = res.v[(size_t)c * res.L + i] + skip.v[(size_t)c * skip.L + i];
            out->v[(size_t)c * out->L + i] = fmin(fmax(v, -1.0), 1.0);
        }
    if (hs && hs->res) *hs->res = res;
    else free(res.v);
    if (hs && hs->skip) *hs->skip = skip;
    else free(skip.v);
}

/* ---- comparisons ------------------------------------------------------------ */
static bool f32_backend(void) {
    const cq_op ops[] = {CQ_OP_CONV2D, CQ_OP_CONV1D, CQ_OP_CONV_TRANSPOSE1D, CQ_OP_MATMUL};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (cq_backend_op_precision(g_be, ops[i], CQ_DTYPE_F32) != CQ_DTYPE_F32) return false;
    return true;
}

/* max |ours - ref| over n values, divided by `scale` */
static double err_of(const float *ours, const double *ref, size_t n, double scale) {
    double mx = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)ours[i] - ref[i]);
        if (!(d <= mx)) mx = d;
    }
    return mx / scale;
}

static double rms_d(const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s / (double)(n ? n : 1));
}

static double full_scale(const double *x, size_t n) {
    double m = 1.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void expect(const char *what, double e, double tol) {
    printf("  %s: %.3g (bound %g)\n", what, e, tol);
    if (!(e <= tol)) fail_msg("%s: %.3g > %g", what, e, tol);
}

/* interleave a host-loop signal [C][L] as [L][C] */
static double *inter(const sig *s) {
    double *o = dalloc((size_t)s->C * s->L);
    for (int c = 0; c < s->C; c++)
        for (int64_t i = 0; i < s->L; i++) o[(size_t)i * s->C + c] = s->v[(size_t)c * s->L + i];
    return o;
}

/* ---- taps ------------------------------------------------------------------ */
#define MAX_TAPS 16
typedef struct taps {
    int n;
    char name[MAX_TAPS][32];
    float *v[MAX_TAPS];
    size_t len[MAX_TAPS];
} taps;

static void tap_fn(void *user, const char *name, const cq_tensor *t) {
    taps *tp = user;
    if (tp->n == MAX_TAPS) return;
    const size_t n = (size_t)cq_tensor_nelem(t);
    float *v = malloc(n * sizeof(float));
    assert_non_null(v);
    if (cq_backend_sync(g_be) != CQ_OK || cq_tensor_download(t, v, n * sizeof(float)) != CQ_OK)
        fail_msg("tap %s: %s", name, cq_last_error());
    snprintf(tp->name[tp->n], sizeof tp->name[0], "%s", name);
    tp->v[tp->n] = v;
    tp->len[tp->n++] = n;
}

static const float *tap_get(const taps *tp, const char *name, size_t want) {
    for (int i = 0; i < tp->n; i++)
        if (!strcmp(tp->name[i], name)) {
            if (tp->len[i] != want) fail_msg("tap %s holds %zu values, want %zu", name, tp->len[i], want);
            return tp->v[i];
        }
    fail_msg("no tap %s", name);
    return NULL;
}

static void taps_free(taps *tp) {
    for (int i = 0; i < tp->n; i++) free(tp->v[i]);
    tp->n = 0;
}

/* ---- the models against the host loop ------------------------------------------ */
typedef struct fixture {
    char dir[1100];
    cq_tt_list tvae, tvoc;
    wset vae, voc;
} fixture;

static void fixture_make(fixture *fx) {
    snprintf(fx->dir, sizeof fx->dir, "%s", tu_tmpdir("ltx2_audio"));
    cq_ltx2_audio_vae_config ac;
    cq_ltx2_vocoder_config vc;
    if (cq_ltx2_audio_vae_parse_config_text(k_vae_cfg, &ac) != CQ_OK) fail_msg("vae config: %s", cq_last_error());
    if (cq_ltx2_vocoder_parse_config_text(k_voc_cfg, &vc) != CQ_OK) fail_msg("vocoder config: %s", cq_last_error());
    memset(&fx->tvae, 0, sizeof fx->tvae);
    memset(&fx->tvoc, 0, sizeof fx->tvoc);
    assert_int_equal(cq_ltx2_audio_vae_tensors(&ac, "audio_vae.", &fx->tvae), CQ_OK);
    assert_int_equal(cq_ltx2_vocoder_tensors(&vc, "vocoder.", &fx->tvoc), CQ_OK);
    make_set(&fx->tvae, "audio_vae.", 4242, &fx->vae);
    make_set(&fx->tvoc, "vocoder.", 777, &fx->voc);
}

static void fixture_free(fixture *fx) {
    free_set(&fx->vae), free_set(&fx->voc);
    cq_tt_list_free(&fx->tvae), cq_tt_list_free(&fx->tvoc);
}

static void load_both(const char *path, cq_cmf **cmf, cq_ltx2_audio_vae **a, cq_ltx2_vocoder **v) {
    if (cq_cmf_open(path, cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (a && cq_ltx2_audio_vae_load(*cmf, "audio_vae.", g_be, a) != CQ_OK) fail_msg("vae: %s", cq_last_error());
    if (v && cq_ltx2_vocoder_load(*cmf, "vocoder.", g_be, v) != CQ_OK) fail_msg("vocoder: %s", cq_last_error());
}

static void test_decoder(void **st) {
    (void)st;
    fixture fx;
    fixture_make(&fx);
    const char *path = write_pack(fx.dir, "both.cmf", &fx.vae, &fx.voc, NULL);
    cq_cmf *cmf;
    cq_ltx2_audio_vae *m;
    load_both(path, &cmf, &m, NULL);
    cq_tt_report rep;
    int nc = 0;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &nc), CQ_OK);
    assert_int_equal(nc, 2);
    assert_true(rep.missing == 0 && rep.unexpected == 0 && rep.mismatched == 0);
    const double tol = f32_backend() ? TOL_MEL : TOL_DEVICE;
    const wset *ws = &fx.vae;
    const int Ts[3] = {1, 3, 4};
    for (int ti = 0; ti < 3; ti++) {
        const int T = Ts[ti], Tm = cq_ltx2_audio_mel_frames(T);
        tu_rng r;
        tu_rng_seed(&r, 99 + (uint64_t)T);
        float *lat = malloc((size_t)T * 16 * sizeof(float)), *mel = malloc((size_t)2 * Tm * 16 * sizeof(float));
        double *ref = dalloc((size_t)2 * Tm * 16);
        assert_true(lat && mel);
        tu_fill_normal(&r, lat, (size_t)T * 16, 1.0f);
        for (int dn = 0; dn < 2; dn++) {
            taps tp = {0};
            cq_ltx2_audio_vae_set_tap(m, tap_fn, &tp);
            if (cq_ltx2_audio_decode(m, lat, T, dn, mel) != CQ_OK) fail_msg("decode: %s", cq_last_error());
            cq_ltx2_audio_vae_set_tap(m, NULL, NULL);
            host_decode(ws, lat, T, dn, ref);
            char what[96];
            snprintf(what, sizeof what, "T %d%s: mel max|d|/rms", T, dn ? " (un-normalised)" : "");
            expect(what, err_of(mel, ref, (size_t)2 * Tm * 16, rms_d(ref, (size_t)2 * Tm * 16)), tol);
            tap_get(&tp, "dec_in", (size_t)T * 16);
            tap_get(&tp, "dec_up0", (size_t)Tm * 16 * 16);
            tap_get(&tp, "dec_out", (size_t)Tm * 16 * 2);
            taps_free(&tp);
        }
        free(lat), free(mel), free(ref);
    }
    /* bad inputs */
    float z[64] = {0}, out[4096];
    tu_expect_err(cq_ltx2_audio_decode(m, z, 0, false, out), CQ_ERR_SHAPE, "0 latent frames");
    tu_expect_err(cq_ltx2_audio_decode(m, NULL, 1, false, out), CQ_ERR_INVALID_ARG, "needs a model");
    z[3] = NAN;
    tu_expect_err(cq_ltx2_audio_decode(m, z, 1, false, out), CQ_ERR_NUMERIC, "latents[3]");
    cq_ltx2_audio_vae_free(m);
    cq_cmf_close(cmf);
    /* a missing tensor is named */
    const char *miss = "audio_vae.decoder.up.1.block.0.nin_shortcut.conv.weight";
    path = write_pack(fx.dir, "missing.cmf", &fx.vae, NULL, miss);
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    assert_int_not_equal(cq_ltx2_audio_vae_load(cmf, "audio_vae.", g_be, &m), CQ_OK);
    if (!strstr(cq_last_error(), miss)) fail_msg("message: %s", cq_last_error());
    cq_cmf_close(cmf);
    fixture_free(&fx);
}

static void test_vocoder(void **st) {
    (void)st;
    fixture fx;
    fixture_make(&fx);
    const char *path = write_pack(fx.dir, "voc.cmf", NULL, &fx.voc, NULL);
    cq_cmf *cmf;
    cq_ltx2_vocoder *v;
    load_both(path, &cmf, NULL, &v);
    const bool f32 = f32_backend();
    const int Tms[2] = {1, 5};
    for (int ti = 0; ti < 2; ti++) {
        const int Tm = Tms[ti];
        int64_t nl, no;
        cq_ltx2_vocoder_lengths(v, Tm, &nl, &no);
        assert_int_equal(nl, (int64_t)Tm * 160);
        assert_int_equal(no, nl * 3);
        tu_rng r;
        tu_rng_seed(&r, 31 + (uint64_t)Tm);
        float *mel = malloc((size_t)2 * Tm * 16 * sizeof(float));
        float *low = malloc((size_t)nl * 2 * sizeof(float)), *out = malloc((size_t)no * 2 * sizeof(float));
        assert_true(mel && low && out);
        tu_fill_normal(&r, mel, (size_t)2 * Tm * 16, 1.0f);
        taps tp = {0};
        cq_ltx2_vocoder_set_tap(v, tap_fn, &tp);
        if (cq_ltx2_vocoder_forward(v, mel, 2, Tm, 16, low, out) != CQ_OK) fail_msg("vocoder: %s", cq_last_error());
        cq_ltx2_vocoder_set_tap(v, NULL, NULL);
        sig hl, ho;
        double *bm;
        int64_t F;
        const cq_ltx2_vocoder_config *vc = cq_ltx2_vocoder_get_config(v);
        const hdims hd = dims_of(vc);
        host_vocoder(&fx.voc, &hd, mel, Tm, &hl, &bm, &F, &ho, NULL);
        double *il = inter(&hl), *io = inter(&ho);
        char what[96];
        snprintf(what, sizeof what, "Tm %d: 16 kHz max|d|/full scale", Tm);
        expect(what, err_of(low, il, (size_t)nl * 2, full_scale(il, (size_t)nl * 2)), f32 ? TOL_WAV : TOL_DEVICE);
        snprintf(what, sizeof what, "Tm %d: BWE log-mel max|d|/rms", Tm);
        expect(what, err_of(tap_get(&tp, "bwe_mel", (size_t)F * 16), bm, (size_t)F * 16, rms_d(bm, (size_t)F * 16)),
               f32 ? TOL_WAV : TOL_DEVICE);
        snprintf(what, sizeof what, "Tm %d: 48 kHz max|d|/full scale", Tm);
        expect(what, err_of(out, io, (size_t)no * 2, 1.0), f32 ? TOL_WAV : TOL_DEVICE);
        /* not a constant: the output moves, and is clamped */
        double mx = 0, ml = 0;
        for (size_t i = 0; i < (size_t)no * 2; i++) mx = fmax(mx, fabs(out[i]));
        for (size_t i = 0; i < (size_t)nl * 2; i++) ml = fmax(ml, fabs(low[i]));
        printf("  Tm %d: max |16 kHz| %.3g, max |48 kHz| %.3g\n", Tm, ml, mx);
        assert_true(mx > 0.05 && mx <= 1.0 && ml > 0.05);
        /* the 16 kHz output alone */
        assert_int_equal(cq_ltx2_vocoder_forward(v, mel, 2, Tm, 16, low, NULL), CQ_OK);
        taps_free(&tp);
        free(mel), free(low), free(out), free(hl.v), free(ho.v), free(bm), free(il), free(io);
    }
    float mel[64] = {0}, o[8192];
    tu_expect_err(cq_ltx2_vocoder_forward(v, mel, 2, 1, 8, o, NULL), CQ_ERR_SHAPE, "the vocoder takes 32 inputs");
    tu_expect_err(cq_ltx2_vocoder_forward(v, mel, 2, 0, 16, o, NULL), CQ_ERR_SHAPE, "0 mel frames");
    tu_expect_err(cq_ltx2_vocoder_forward(v, mel, 2, 1, 16, NULL, NULL), CQ_ERR_INVALID_ARG, "at least one output");
    mel[7] = INFINITY;
    tu_expect_err(cq_ltx2_vocoder_forward(v, mel, 2, 1, 16, o, NULL), CQ_ERR_NUMERIC, "not finite");
    cq_ltx2_vocoder_free(v);
    cq_cmf_close(cmf);
    fixture_free(&fx);
}

/* diffusers folders converted as a user would: arch names, prefixes, the tables' tensors, the same outputs */
static void test_convert(void **st) {
    (void)st;
    fixture fx;
    fixture_make(&fx);
    const char *direct = write_pack(fx.dir, "direct.cmf", &fx.vae, &fx.voc, NULL);
    char dp[1200];
    snprintf(dp, sizeof dp, "%s", direct);
    static const char *const leaf[2] = {"audio_vae", "vocoder"}, *arch[2] = {"ltx2_audio_vae", "ltx2_vocoder"};
    const wset *sets[2] = {&fx.vae, &fx.voc};
    const char *cfgs[2] = {k_vae_cfg, k_voc_cfg};
    char packs[2][1200];
    for (int k = 0; k < 2; k++) {
        char folder[1200];
        snprintf(folder, sizeof folder, "%s/%s", fx.dir, leaf[k]);
        write_folder(folder, sets[k], cfgs[k]);
        snprintf(packs[k], sizeof packs[k], "%s/%s.cmf", fx.dir, leaf[k]);
        cq_convert_opts opts = {.quant = -1}; /* the default policy: the kernels and tables stay f32 */
        cq_convert_report rep;
        if (cq_convert(folder, packs[k], &opts, &rep) != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
        if (strcmp(rep.arch, arch[k]) != 0) fail_msg("arch '%s', not %s", rep.arch, arch[k]);
        cq_convert_report_free(&rep);
    }
    cq_cmf *ca, *cb, *cc;
    cq_ltx2_audio_vae *ma, *mb;
    cq_ltx2_vocoder *va, *vb;
    load_both(dp, &ca, &ma, &va);
    load_both(packs[0], &cb, &mb, NULL);
    load_both(packs[1], &cc, NULL, &vb);
    const cq_cmf *conv[2] = {cb, cc};
    for (int k = 0; k < 2; k++) {
        cq_tt_report tr;
        int nc = 0;
        assert_int_equal(cq_tables_check_pack(conv[k], NULL, NULL, &tr, &nc), CQ_OK);
        assert_int_equal(nc, 1);
        assert_true(tr.missing == 0 && tr.unexpected == 0 && tr.mismatched == 0);
    }
    const cq_tensor_view *mbv = cq_cmf_find(cc, "vocoder.mel_stft.mel_basis");
    assert_non_null(mbv);
    assert_int_equal(mbv->dtype, CQ_DTYPE_F32);
    tu_rng r;
    tu_rng_seed(&r, 5);
    float lat[2 * 16], mel_a[2 * 5 * 16], mel_b[2 * 5 * 16], wa[5 * 160 * 3 * 2], wb[5 * 160 * 3 * 2];
    tu_fill_normal(&r, lat, 32, 1.0f);
    assert_int_equal(cq_ltx2_audio_decode(ma, lat, 2, true, mel_a), CQ_OK);
    assert_int_equal(cq_ltx2_audio_decode(mb, lat, 2, true, mel_b), CQ_OK);
    assert_int_equal(cq_ltx2_vocoder_forward(va, mel_a, 2, 5, 16, NULL, wa), CQ_OK);
    assert_int_equal(cq_ltx2_vocoder_forward(vb, mel_a, 2, 5, 16, NULL, wb), CQ_OK);
    if (!g_arg.device) {
        assert_memory_equal(mel_a, mel_b, sizeof mel_a);
        assert_memory_equal(wa, wb, sizeof wa);
    } else {
        assert_true(tu_max_rel(mel_b, mel_a, 160, tu_rms(mel_a, 160)) <= 1e-6);
        assert_true(tu_max_rel(wb, wa, 4800, 1.0) <= 1e-6);
    }
    cq_ltx2_audio_vae_free(ma), cq_ltx2_audio_vae_free(mb);
    cq_ltx2_vocoder_free(va), cq_ltx2_vocoder_free(vb);
    cq_cmf_close(ca), cq_cmf_close(cb), cq_cmf_close(cc);
    fixture_free(&fx);
}

/* ---- configs refused -------------------------------------------------------------- */
static void edit(const char *cfg, const char *from, const char *to, char *buf, size_t cap) {
    const char *at = strstr(cfg, from);
    if (!at) fail_msg("'%s' is not in the test config", from);
    snprintf(buf, cap, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
}

static void bad_vae(const char *from, const char *to, cq_status want, const char *needle) {
    char buf[4096];
    edit(k_vae_cfg, from, to, buf, sizeof buf);
    cq_ltx2_audio_vae_config c;
    tu_expect_err(cq_ltx2_audio_vae_parse_config_text(buf, &c), want, needle);
}

static void bad_voc(const char *from, const char *to, cq_status want, const char *needle) {
    char buf[4096];
    edit(k_voc_cfg, from, to, buf, sizeof buf);
    cq_ltx2_vocoder_config c;
    tu_expect_err(cq_ltx2_vocoder_parse_config_text(buf, &c), want, needle);
}

static void test_bad_config(void **st) {
    (void)st;
    bad_vae("\"norm_type\": \"pixel\"", "\"norm_type\": \"group\"", CQ_ERR_UNSUPPORTED, "norm_type is \"group\"");
    bad_vae("\"causality_axis\": \"height\"", "\"causality_axis\": \"width\"", CQ_ERR_UNSUPPORTED,
            "causality_axis is \"width\"");
    bad_vae("\"attn_resolutions\": null", "\"attn_resolutions\": [16]", CQ_ERR_UNSUPPORTED, "attn_resolutions");
    bad_vae("\"mid_block_add_attention\": false", "\"mid_block_add_attention\": true", CQ_ERR_UNSUPPORTED,
            "mid_block_add_attention");
    bad_vae("\"mel_bins\": 16", "\"mel_bins\": 18", CQ_ERR_PARSE, "mel_bins 18 is not a multiple of 4");
    bad_vae("\"base_channels\": 16", "\"base_channels\": 0", CQ_ERR_PARSE, "base_channels must be");
    bad_voc("\"act_fn\": \"snakebeta\"", "\"act_fn\": \"leaky_relu\"", CQ_ERR_UNSUPPORTED, "act_fn is \"leaky_relu\"");
    bad_voc("\"bwe_antialias\": true", "\"bwe_antialias\": false", CQ_ERR_UNSUPPORTED, "bwe_antialias is false");
    bad_voc("\"window_length\": 512", "\"window_length\": 400", CQ_ERR_UNSUPPORTED, "filter_length 512 differs");
    bad_voc("\"bwe_in_channels\": 16", "\"bwe_in_channels\": 32", CQ_ERR_PARSE, "bwe_in_channels 32");
    bad_voc("\"bwe_upsample_factors\": [6, 5, 2, 2, 2]", "\"bwe_upsample_factors\": [6, 5, 2, 2, 1]", CQ_ERR_PARSE,
            "multiply to 120");
    bad_voc("\"final_act_fn\": null", "\"final_act_fn\": \"relu\"", CQ_ERR_UNSUPPORTED, "final_act_fn is \"relu\"");
    bad_voc("\"resnet_dilations\": [[1, 3, 5], [1, 3, 5], [1, 3, 5]]", "\"resnet_dilations\": [[1, 3, 5]]",
            CQ_ERR_PARSE, "one array of dilations");
    bad_voc("\"hidden_channels\": 64", "\"hidden_channels\": 48", CQ_ERR_PARSE, "cannot be halved");
    cq_ltx2_vocoder_config vc;
    tu_expect_err(cq_ltx2_vocoder_parse_config_text("{\"_class_name\": \"LTX2Vocoder\"}", &vc), CQ_ERR_UNSUPPORTED,
                  "leaky_relu");
    /* the real LTX-2.5 configs (diffusers' converter, "2.5") */
    static const char real_vae[] =
        "{\"_class_name\": \"AutoencoderKLLTX2Audio\", \"base_channels\": 128, \"output_channels\": 2,"
        " \"ch_mult\": [1, 2, 4], \"num_res_blocks\": 2, \"attn_resolutions\": null, \"in_channels\": 2,"
        " \"resolution\": 256, \"latent_channels\": 8, \"norm_type\": \"pixel\", \"causality_axis\": \"height\","
        " \"dropout\": 0.0, \"mid_block_add_attention\": false, \"sample_rate\": 16000, \"mel_hop_length\": 160,"
        " \"is_causal\": true, \"mel_bins\": 64, \"double_z\": true}";
    cq_ltx2_audio_vae_config ac;
    if (cq_ltx2_audio_vae_parse_config_text(real_vae, &ac) != CQ_OK) fail_msg("real vae: %s", cq_last_error());
    assert_int_equal(ac.latent_mel, 16);
    assert_int_equal(ac.latent_channels * ac.latent_mel, ac.base_channels);
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_audio_vae_tensors(&ac, "audio_vae.", &t), CQ_OK);
    const cq_tt_entry *e = cq_tt_find(&t, "audio_vae.decoder.conv_in.conv.weight");
    assert_non_null(e);
    assert_true(e->shape[0] == 512 && e->shape[1] == 8);
    assert_non_null(cq_tt_find(&t, "audio_vae.decoder.up.2.block.2.conv2.conv.weight"));
    assert_non_null(cq_tt_find(&t, "audio_vae.decoder.up.1.block.0.nin_shortcut.conv.weight"));
    assert_null(cq_tt_find(&t, "audio_vae.decoder.up.0.upsample.conv.conv.weight"));
    cq_tt_list_free(&t);
    /* LTX2VocoderWithBWE's defaults are LTX-2.5's config */
    if (cq_ltx2_vocoder_parse_config_text("{\"_class_name\": \"LTX2VocoderWithBWE\"}", &vc) != CQ_OK)
        fail_msg("real vocoder: %s", cq_last_error());
    assert_true(vc.bwe && vc.gen.hidden_channels == 1536 && vc.gen.n_ups == 6 && vc.gen.total_up == 160);
    assert_true(vc.bwe_gen.hidden_channels == 512 && vc.bwe_gen.total_up == 240 && vc.rate_ratio == 3);
    assert_true(vc.gen.final_act == CQ_LTX2_VOC_FINAL_NONE && !vc.gen.final_bias);
    assert_int_equal(cq_ltx2_vocoder_tensors(&vc, "vocoder.", &t), CQ_OK);
    /* per generator: conv_in 2, upsamplers 2 each, 3 resnets x 3 dilations x 2 x (conv 2 + act 4), act_out 4,
     * conv_out 1; then the three tables */
    assert_int_equal((int)t.n, (2 + 6 * 2 + 6 * 3 * 3 * 12 + 4 + 1) + (2 + 5 * 2 + 5 * 3 * 3 * 12 + 4 + 1) + 3);
    e = cq_tt_find(&t, "vocoder.vocoder.upsamplers.0.weight");
    assert_true(e && e->shape[0] == 1536 && e->shape[1] == 768 && e->shape[2] == 11);
    e = cq_tt_find(&t, "vocoder.bwe_generator.resnets.14.acts2.2.downsample.filter");
    assert_true(e && e->shape[0] == 12);
    assert_non_null(cq_tt_find(&t, "vocoder.mel_stft.mel_basis"));
    cq_tt_list_free(&t);
}

/* ---- the WAV writer ------------------------------------------------------------------ */
static void test_wav(void **st) {
    (void)st;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_audio_wav"));
    assert_int_equal(cq_wav_quantize(-1.0f), -32767);
    assert_int_equal(cq_wav_quantize(-3.0f), -32767);
    assert_int_equal(cq_wav_quantize(0.0f), 0);
    assert_int_equal(cq_wav_quantize(1.0f), 32767);
    assert_int_equal(cq_wav_quantize(2.0f), 32767);
    assert_int_equal(cq_wav_quantize(0.5f), 16384); /* 16383.5 to even */
    enum { N = 4801 };
    float *s = malloc((size_t)N * 2 * sizeof(float));
    assert_non_null(s);
    for (int i = 0; i < N; i++) {
        s[2 * i] = (float)sin(2 * M_PI * 440.0 * i / 48000.0) * 1.2f; /* clips */
        s[2 * i + 1] = (float)(i % 100) / 50.0f - 1.0f;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/out.wav", dir);
    assert_int_equal(cq_wav_write(path, s, N, 2, 48000), CQ_OK);
    size_t len = 0;
    uint8_t *raw = tu_read_file(path, &len);
    assert_non_null(raw);
    assert_int_equal(len, 44 + (size_t)N * 4);
    assert_memory_equal(raw, "RIFF", 4);
    assert_memory_equal(raw + 8, "WAVEfmt ", 8);
    assert_true(raw[22] == 2 && raw[24] == 0x80 && raw[25] == 0xbb); /* 2 channels, 48000 Hz */
    cq_wav16 w;
    assert_int_equal(cq_wav_read_mem(raw, len, &w), CQ_OK);
    assert_true(w.channels == 2 && w.rate == 48000 && w.n_frames == N);
    for (int i = 0; i < 2 * N; i++)
        if (w.samples[i] != cq_wav_quantize(s[i])) fail_msg("sample %d: %d, want %d", i, w.samples[i],
                                                            cq_wav_quantize(s[i]));
    cq_wav16_free(&w);
    /* truncated and foreign files are refused */
    tu_expect_err(cq_wav_read_mem(raw, len - 1, &w), CQ_ERR_PARSE, "truncated");
    raw[20] = 3;
    tu_expect_err(cq_wav_read_mem(raw, len, &w), CQ_ERR_UNSUPPORTED, "only 16-bit PCM");
    free(raw);
    /* rewriting replaces the whole file */
    assert_int_equal(cq_wav_write(path, s, 10, 1, 16000), CQ_OK);
    assert_int_equal(cq_wav_read(path, &w), CQ_OK);
    assert_true(w.channels == 1 && w.rate == 16000 && w.n_frames == 10);
    cq_wav16_free(&w);
    /* NaN: refused before anything is written; the old file stays */
    s[7] = NAN;
    tu_expect_err(cq_wav_write(path, s, N, 2, 48000), CQ_ERR_NUMERIC, "frame 3, channel 1");
    assert_int_equal(cq_wav_read(path, &w), CQ_OK);
    assert_true(w.n_frames == 10);
    cq_wav16_free(&w);
    /* a directory is never replaced; bad arguments */
    assert_int_not_equal(cq_wav_write(dir, s, 4, 2, 48000), CQ_OK);
    struct stat sb;
    assert_true(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
    tu_expect_err(cq_wav_write(path, s, 4, 0, 48000), CQ_ERR_INVALID_ARG, "0 channels");
    tu_expect_err(cq_wav_write(path, s, 4, 2, 0), CQ_ERR_INVALID_ARG, "sample rate 0");
    free(s);
}

/* ---- golden data from diffusers ------------------------------------------ */
#define GOLD_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_audio"

static double jnum(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* ours against golden `name`: max |d| over scale (the reference's RMS for a mel, full scale for a waveform), and
 * rms(d) over the same scale. Bounds: on the host 1e-4, or twice the reference's own f32 error where that is
 * larger (index.json's "f64" record: its f32 output against the same modules run in float64; where the record is
 * absent, `own` >= 0: the golden against this file's float64 host loop on the same weights and mel, a max only);
 * on a device a quarter of the case's bf16 errors (at least 1e-4). */
static void gold_check(const char *cs, const cq_st *g, const cJSON *cj, const char *name, const float *ours,
                       size_t n, bool wave, double own) {
    const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(cj, "bf16"), *f64 = cJSON_GetObjectItemCaseSensitive(cj, "f64");
    size_t nr = 0;
    float *ref = tu_st_floats(g, name, &nr);
    if (!ref || nr != n) fail_msg("case %s: golden %s missing or of %zu values (want %zu)", cs, name, nr, n);
    double scale = wave ? 1.0 : 0.0, mx = 0, ss = 0;
    for (size_t i = 0; i < n; i++) scale = wave ? fmax(scale, fabs(ref[i])) : scale + (double)ref[i] * ref[i];
    if (!wave) scale = sqrt(scale / (double)n);
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)ours[i] - ref[i]);
        mx = fmax(mx, d), ss += d * d;
    }
    mx /= scale;
    const double rr = sqrt(ss / (double)n) / scale;
    double bmx = TOL_GOLD, brr = TOL_GOLD;
    const char *why = "";
    if (g_arg.device) {
        const double m4 = jnum(bf16, name, "max_rel") / 4, r4 = jnum(bf16, name, "rms_rel") / 4;
        if (!(m4 >= 0) || !(r4 >= 0)) fail_msg("case %s: index.json has no bf16 errors for %s", cs, name);
        bmx = fmax(m4, TOL_GOLD), brr = fmax(r4, TOL_GOLD);
    } else if (cJSON_IsObject(f64)) {
        const double m2 = 2 * jnum(f64, name, "max_rel"), r2 = 2 * jnum(f64, name, "rms_rel");
        if (!(m2 >= 0) || !(r2 >= 0)) fail_msg("case %s: index.json's f64 record has no %s", cs, name);
        bmx = fmax(m2, TOL_GOLD), brr = fmax(r2, TOL_GOLD), why = " (2 x the reference's f32 error, recorded)";
    } else if (own >= 0) {
        bmx = fmax(2 * own, TOL_GOLD), why = " (2 x the golden's error against the f64 host loop)";
    }
    printf("  golden %s %s: max|d| %.3g, rms(d) %.3g of %s (bounds %.3g, %.3g%s)\n", cs, name, mx, rr,
           wave ? "full scale" : "the RMS", bmx, brr, why);
    if (!(mx <= bmx) || !(rr <= brr)) fail_msg("golden %s: %s off by %.3g max / %.3g rms (> %.3g / %.3g)", cs, name,
                                               mx, rr, bmx, brr);
    free(ref);
}

/* the vocoder's tensors from a converted F32 pack, named as make_set names them (prefix dropped) */
static void set_from_pack(const cq_cmf *cmf, const cq_ltx2_vocoder_config *vc, wset *s) {
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_vocoder_tensors(vc, "vocoder.", &t), CQ_OK);
    s->w = calloc(t.n, sizeof *s->w);
    assert_non_null(s->w);
    s->n = 0;
    for (size_t i = 0; i < t.n; i++) {
        const cq_tensor_view *tv = cq_cmf_find(cmf, t.e[i].name);
        if (!tv) continue;
        if (tv->dtype != CQ_DTYPE_F32) fail_msg("%s is not f32", t.e[i].name);
        wt *w = &s->w[s->n++];
        snprintf(w->name, sizeof w->name, "%s", t.e[i].name + strlen("vocoder."));
        w->ndim = tv->ndim, w->n = (size_t)tv->nelem;
        for (int d = 0; d < tv->ndim && d < 4; d++) w->shape[d] = tv->shape[d];
        w->v = malloc(w->n * sizeof(float));
        assert_non_null(w->v);
        memcpy(w->v, tv->data, w->n * sizeof(float));
    }
    cq_tt_list_free(&t);
}

/* max |a - b| over full scale (wave) or b's RMS, with the sample (row) where it sits */
static double gap_at(const float *a, const double *b, size_t n, int ch, bool wave, int64_t *at) {
    const double scale = wave ? full_scale(b, n) : rms_d(b, n);
    double mx = 0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > mx) mx = d, *at = (int64_t)(i / (size_t)ch);
    }
    return mx / scale;
}

static float *to_f(const double *x, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}

/* the golden's and ours against the double-precision host loop on the golden's weights and mel, per stage */
static void golden_vs_host(const char *cs, const cq_st *g, const wset *ws, const cq_ltx2_vocoder_config *vc,
                           const float *rmel, int Tm, const float *low, const float *out, const taps *tp,
                           double own[3]) {
    const hdims hd = dims_of(vc);
    sig hl, ho, hres, hskip;
    double *bm;
    int64_t F;
    hstages hs = {&hres, &hskip, NULL};
    host_vocoder(ws, &hd, rmel, Tm, &hl, &bm, &F, &ho, &hs);
    const size_t nl = (size_t)hl.L * 2, no = (size_t)ho.L * 2, nb = (size_t)F * 2 * hd.n_mels;
    double *il = inter(&hl), *io = inter(&ho), *ir = inter(&hres), *isk = inter(&hskip);
    size_t n;
    float *g16 = tu_st_floats(g, "wav16", &n), *gbm = tu_st_floats(g, "bwe_mel", &n), *g48 = tu_st_floats(g, "wav48", &n);
    assert_true(g16 && gbm && g48);
    int64_t a1, a2;
    double e1, e2;
    e1 = gap_at(g16, il, nl, 2, true, &a1), e2 = gap_at(low, il, nl, 2, true, &a2);
    own[0] = e1;
    printf("  host-f64 %s wav16:   golden %.3g (at %lld), ours %.3g (at %lld) of full scale\n", cs, e1, (long long)a1,
           e2, (long long)a2);
    e1 = gap_at(gbm, bm, nb, 2 * hd.n_mels, false, &a1);
    e2 = gap_at(tap_get(tp, "bwe_mel", nb), bm, nb, 2 * hd.n_mels, false, &a2);
    own[1] = e1;
    printf("  host-f64 %s bwe_mel: golden %.3g (frame %lld), ours %.3g (frame %lld) of the RMS\n", cs, e1,
           (long long)a1, e2, (long long)a2);
    const size_t nr = (size_t)hres.L * 2;
    e2 = gap_at(tap_get(tp, "bwe_residual", nr), ir, nr, 2, true, &a2);
    printf("  host-f64 %s residual: ours %.3g (at %lld of %lld), max |res| %.3g\n", cs, e2, (long long)a2,
           (long long)hres.L, full_scale(ir, nr));
    e2 = gap_at(tap_get(tp, "bwe_skip", nr), isk, nr, 2, true, &a2);
    printf("  host-f64 %s skip:    ours %.3g (at %lld)\n", cs, e2, (long long)a2);
    e1 = gap_at(g48, io, no, 2, true, &a1), e2 = gap_at(out, io, no, 2, true, &a2);
    own[2] = e1;
    printf("  host-f64 %s wav48:   golden %.3g (at %lld), ours %.3g (at %lld) of full scale\n", cs, e1, (long long)a1,
           e2, (long long)a2);
    /* sensitivity: the host's BWE generator on the golden's own f32 log-mel, and on ours */
    const float *mels[2] = {gbm, tap_get(tp, "bwe_mel", nb)};
    const char *who[2] = {"golden's", "ours"};
    for (int k = 0; k < 2; k++) {
        sig l2, o2;
        double *b2;
        int64_t F2;
        hstages h2 = {NULL, NULL, mels[k]};
        host_vocoder(ws, &hd, rmel, Tm, &l2, &b2, &F2, &o2, &h2);
        double *i2 = inter(&o2);
        float *f2 = to_f(i2, no);
        e1 = gap_at(f2, io, no, 2, true, &a1);
        e2 = gap_at(k ? out : g48, i2, no, 2, true, &a2);
        printf("  host-f64 %s wav48 from %s f32 log-mel: moves %.3g (at %lld); then %s wav48 is off it by %.3g\n", cs,
               who[k], e1, (long long)a1, who[k], e2);
        free(l2.v), free(o2.v), free(b2), free(i2), free(f2);
    }
    free(g16), free(gbm), free(g48);
    free(hl.v), free(ho.v), free(hres.v), free(hskip.v), free(bm), free(il), free(io), free(ir), free(isk);
}

static void convert_one(const char *folder, const char *pack, const char *arch) {
    cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(folder, pack, &opts, &rep);
    if (s == CQ_OK && strcmp(rep.arch, arch) != 0) s = cq_fail(CQ_ERR_INTERNAL, "arch '%s', not %s", rep.arch, arch);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
}

static void test_golden(void **st) {
    (void)st;
    cJSON *root = tu_read_json(GOLD_DIR "/index.json");
    if (!root) {
        printf("  %s is absent (run tools/golden_ltx2_audio.py): skipped\n", GOLD_DIR);
        skip();
    }
    char tmp[1100], pa[1200], pv[1200];
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir("ltx2_audio_golden"));
    snprintf(pa, sizeof pa, "%s/audio_vae.cmf", tmp);
    snprintf(pv, sizeof pv, "%s/vocoder.cmf", tmp);
    convert_one(GOLD_DIR "/audio_vae", pa, "ltx2_audio_vae");
    convert_one(GOLD_DIR "/vocoder", pv, "ltx2_vocoder");
    cq_cmf *ca, *cv;
    cq_ltx2_audio_vae *m;
    cq_ltx2_vocoder *v;
    load_both(pa, &ca, &m, NULL);
    load_both(pv, &cv, NULL, &v);
    const cq_ltx2_audio_vae_config *ac = cq_ltx2_audio_vae_get_config(m);
    const cq_ltx2_vocoder_config *vc = cq_ltx2_vocoder_get_config(v);
    wset hws;
    set_from_pack(cv, vc, &hws);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases"), *cs;
    int n_cases = 0;
    cJSON_ArrayForEach(cs, cases) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cs, "name"));
        const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(cs, "bf16");
        if (!name || !cJSON_IsObject(bf16)) fail_msg("index.json: a case without name or bf16");
        char path[1300];
        snprintf(path, sizeof path, "%s/cases/%s.safetensors", GOLD_DIR, name);
        cq_st *g;
        if (cq_st_open(path, &g) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
        size_t nl = 0, nm = 0;
        float *lat = tu_st_floats(g, "latents", &nl);
        const int D = ac->latent_channels * ac->latent_mel;
        if (!lat || nl % (size_t)D) fail_msg("case %s: latents missing or mis-sized", name);
        const int T = (int)(nl / (size_t)D), Tm = cq_ltx2_audio_mel_frames(T), M = ac->mel_bins;
        const int Cm = ac->output_channels, ch = vc->gen.out_channels;
        float *mel = malloc((size_t)Cm * Tm * M * sizeof(float));
        assert_non_null(mel);
        if (cq_ltx2_audio_decode(m, lat, T, true, mel) != CQ_OK) fail_msg("decode: %s", cq_last_error());
        gold_check(name, g, cs, "mel", mel, (size_t)Cm * Tm * M, false, -1);
        /* the vocoder from the reference's mel, so it is measured alone */
        float *rmel = tu_st_floats(g, "mel", &nm);
        assert_true(rmel && nm == (size_t)Cm * Tm * M);
        int64_t n_low, n_out;
        cq_ltx2_vocoder_lengths(v, Tm, &n_low, &n_out);
        float *low = malloc((size_t)n_low * ch * sizeof(float)), *out = malloc((size_t)n_out * ch * sizeof(float));
        assert_true(low && out);
        taps tp = {0};
        cq_ltx2_vocoder_set_tap(v, tap_fn, &tp);
        if (cq_ltx2_vocoder_forward(v, rmel, Cm, Tm, M, low, out) != CQ_OK) fail_msg("vocoder: %s", cq_last_error());
        cq_ltx2_vocoder_set_tap(v, NULL, NULL);
        double own[3] = {-1, -1, -1};
        if (vc->bwe) golden_vs_host(name, g, &hws, vc, rmel, Tm, low, out, &tp, own);
        gold_check(name, g, cs, "wav16", low, (size_t)n_low * ch, true, own[0]);
        if (vc->bwe) {
            const int64_t F = (n_low + vc->hop_length - 1) / vc->hop_length;
            gold_check(name, g, cs, "bwe_mel", tap_get(&tp, "bwe_mel", (size_t)F * ch * vc->n_mels),
                       (size_t)F * ch * vc->n_mels, false, own[1]);
            gold_check(name, g, cs, "wav48", out, (size_t)n_out * ch, true, own[2]);
        }
        taps_free(&tp);
        free(lat), free(mel), free(rmel), free(low), free(out);
        cq_st_close(g);
        n_cases++;
    }
    if (n_cases < 2) fail_msg("index.json lists %d cases, expected at least 2", n_cases);
    free_set(&hws);
    cq_ltx2_audio_vae_free(m);
    cq_ltx2_vocoder_free(v);
    cq_cmf_close(ca), cq_cmf_close(cv);
    cJSON_Delete(root);
}

static int setup(void **st) {
    (void)st;
    return tu_backend_create(&g_arg, 0, &g_be) == CQ_OK ? 0 : -1;
}

static int teardown(void **st) {
    (void)st;
    cq_backend_free(g_be);
    return 0;
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_ltx2_audio", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder), cmocka_unit_test(test_vocoder), cmocka_unit_test(test_convert),
        cmocka_unit_test(test_bad_config), cmocka_unit_test(test_wav), cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests_name(g_arg.device ? "test_ltx2_audio (device)" : "test_ltx2_audio (host)", tests,
                                       setup, teardown);
}
