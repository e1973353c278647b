/*
 * ltx2_audio.h — LTX-2.3 / 2.5's audio output path on the op layer: the audio
 * VAE's decoder (latent tokens to a log-mel spectrogram), the BigVGAN-v2
 * vocoder (mel to a 16 kHz waveform) and the bandwidth extender (BWE: that
 * waveform to 48 kHz). References: diffusers at 58eb52c0,
 * models/autoencoders/autoencoder_kl_ltx2_audio.py (AutoencoderKLLTX2Audio's
 * LTX2AudioDecoder) and pipelines/ltx2/vocoder.py (LTX2Vocoder,
 * LTX2VocoderWithBWE); ltx-core's audio_vae package as the second one.
 *
 * Decoder (batch 1). The input is what the DiT produces: audio tokens
 * [T, C * Ml] (C = latent_channels, Ml = mel_bins / 4 latent mel bins, the
 * channel slowest: column c * Ml + m). With `denormalize` each column is
 * un-normalised first, x * latents_std + latents_mean (the pipeline's step,
 * on this packed view; it needs base_channels = C * Ml statistics). Then,
 * on the [T, Ml] grid (time = height, mel = width), every convolution 2-D
 * with a 3x3 kernel padded causally in time (2 rows before, none after) and
 * by 1 zero column each side in mel (1x1 shortcuts unpadded):
 *   conv_in C -> base * ch_mult[n-1]; mid: 2 ResBlocks; levels n-1 .. 0,
 *   each num_res_blocks + 1 ResBlocks to base * ch_mult[level], then (but
 *   level 0) nearest x2 in both axes, a conv, and the first time row
 *   dropped; PixelNorm, SiLU, conv_out -> output_channels.
 *   ResBlock: PN -> SiLU -> conv -> PN -> SiLU -> conv, plus the input
 *   (through a 1x1 nin_shortcut when the width changes); PixelNorm is
 *   x / sqrt(mean_c x^2 + 1e-6) per pixel.
 * The mel [output_channels][Tm][mel_bins] is cropped or zero-padded to
 * Tm = max(4T - 3, 1) frames and mel_bins bins, as the reference does.
 * Accepted: the LTX-2.0 .. 2.5 config (norm_type "pixel", causality_axis
 * "height", no attention); refused with a message naming the member:
 * other norms, other causality axes, attn_resolutions, mid-block attention.
 *
 * Vocoder (LTX2VocoderWithBWE, or a lone LTX2Vocoder generator). The mel
 * [Cm][Tm][M] becomes Cm * M channels (c * M + m) over Tm frames; a
 * generator is
 *   conv_in (k 7) -> per level: ConvTranspose1d (stride s, kernel k,
 *   padding (k - s) / 2) halving the width, then the mean of its ResBlocks
 *   (one per resnet kernel, each x += conv2(act2(conv1_dil(act1(x)))) per
 *   dilation, "same" zero padding) -> act_out -> conv_out (k 7, bias as
 *   final_bias) -> final activation (none, tanh or clamp to [-1, 1]);
 * every activation is anti-aliased SnakeBeta: x2 upsample (replicate pad,
 * a transposed depthwise conv with the stored kaiser-sinc filter, times the
 * ratio, trimmed), x + sin^2(e^a x) / (e^b + 1e-9), then the replicate-
 * padded depthwise low-pass with the other stored filter and stride ratio.
 * The BWE takes the main generator's L samples (zero-padded to a multiple of
 * hop_length), a causal log-mel of each channel (the stored STFT basis
 * [2 * (N/2+1), 1, N] slid with hop_length over window_length - hop_length
 * leading zeros, magnitude, the stored mel_basis, ln(max(., 1e-5))), its
 * generator on that mel (the residual), plus the input upsampled by
 * output / input rate through the Hann-windowed sinc the reference builds
 * (not stored: rolloff 0.99, 6 zero crossings), clamped to [-1, 1] and cut
 * to L * rate ratio samples: 48 kHz stereo for LTX-2.5.
 * Refused with a message naming the member: act_fn other than "snakebeta",
 * antialias false, a filter_length unequal to window_length, a BWE whose
 * upsampling is not hop_length * the rate ratio, widths that do not chain.
 *
 * Every activation is f32 on every backend (the reference runs the vocoder
 * in f32 because bf16 costs 40-90 % on spectral metrics). Scratch is
 * allocated per call.
 */
#ifndef CQ_MODELS_LTX2_AUDIO_H
#define CQ_MODELS_LTX2_AUDIO_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_LTX2_AUDIO_MAX_LEVELS 8
#define CQ_LTX2_VOC_MAX_UPS 8
#define CQ_LTX2_VOC_MAX_RES 4
#define CQ_LTX2_VOC_MAX_DIL 4
/* Longest latent (frames) and mel (frames) a call takes: ~21 minutes of 16 kHz audio. */
#define CQ_LTX2_AUDIO_MAX_FRAMES 32768
#define CQ_LTX2_VOC_MAX_FRAMES 131072

/* ---- the audio VAE's decoder --------------------------------------------------------- */
typedef struct cq_ltx2_audio_vae_config {
    int base_channels, output_channels, latent_channels, num_res_blocks;
    int n_levels, ch_mult[CQ_LTX2_AUDIO_MAX_LEVELS];
    int mel_bins;    /* the mel's bins (64) */
    int latent_mel;  /* mel_bins / 4: the latent grid's width */
    int sample_rate, hop_length; /* carried (16000, 160): the vocoder's frame rate */
} cq_ltx2_audio_vae_config;

typedef struct cq_ltx2_audio_vae cq_ltx2_audio_vae;

/* The config from `<prefix>config_json` (diffusers' AutoencoderKLLTX2Audio config.json). */
cq_status cq_ltx2_audio_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_audio_vae_config *c);
cq_status cq_ltx2_audio_vae_parse_config_text(const char *json, cq_ltx2_audio_vae_config *c);
/* Load the decoder (and the latent statistics) from tensors `<prefix><diffusers name>` ("audio_vae.");
 * the encoder's tensors are not read. */
cq_status cq_ltx2_audio_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_audio_vae **out);
void cq_ltx2_audio_vae_free(cq_ltx2_audio_vae *m);
const cq_ltx2_audio_vae_config *cq_ltx2_audio_vae_get_config(const cq_ltx2_audio_vae *m);
/* The mel's frames for T latent frames: max(4T - 3, 1). */
int cq_ltx2_audio_mel_frames(int T);
/* latents [T][latent_channels * latent_mel] (packed, column c * latent_mel + m) -> mel
 * [output_channels][cq_ltx2_audio_mel_frames(T)][mel_bins]. */
cq_status cq_ltx2_audio_decode(cq_ltx2_audio_vae *m, const float *latents, int T, bool denormalize, float *mel);

/* ---- the vocoder --------------------------------------------------------------------- */
typedef enum cq_ltx2_voc_final { CQ_LTX2_VOC_FINAL_NONE = 0, CQ_LTX2_VOC_FINAL_TANH, CQ_LTX2_VOC_FINAL_CLAMP } cq_ltx2_voc_final;

typedef struct cq_ltx2_voc_gen_config {
    int in_channels, hidden_channels, out_channels;
    int n_ups, up_kernel[CQ_LTX2_VOC_MAX_UPS], up_factor[CQ_LTX2_VOC_MAX_UPS];
    int n_res, res_kernel[CQ_LTX2_VOC_MAX_RES];
    int n_dil[CQ_LTX2_VOC_MAX_RES], dil[CQ_LTX2_VOC_MAX_RES][CQ_LTX2_VOC_MAX_DIL];
    int aa_ratio, aa_kernel;
    cq_ltx2_voc_final final_act;
    bool final_bias;
    int total_up; /* the product of up_factor */
} cq_ltx2_voc_gen_config;

typedef struct cq_ltx2_vocoder_config {
    bool bwe;                       /* LTX2VocoderWithBWE (else a lone LTX2Vocoder) */
    cq_ltx2_voc_gen_config gen;     /* the main generator ("vocoder." inside a BWE model) */
    cq_ltx2_voc_gen_config bwe_gen; /* the BWE generator ("bwe_generator.") */
    int filter_length, hop_length, window_length, n_mels;
    int in_rate, out_rate, rate_ratio; /* output / input sampling rate (3) */
} cq_ltx2_vocoder_config;

typedef struct cq_ltx2_vocoder cq_ltx2_vocoder;

cq_status cq_ltx2_vocoder_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_vocoder_config *c);
cq_status cq_ltx2_vocoder_parse_config_text(const char *json, cq_ltx2_vocoder_config *c);
/* Load from tensors `<prefix><diffusers name>` ("vocoder."). */
cq_status cq_ltx2_vocoder_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_vocoder **out);
void cq_ltx2_vocoder_free(cq_ltx2_vocoder *v);
const cq_ltx2_vocoder_config *cq_ltx2_vocoder_get_config(const cq_ltx2_vocoder *v);
/* Samples per channel for Tm mel frames: *n_low from the main generator (Tm * its total upsampling), *n_out
 * the final output's (n_low * rate_ratio with the BWE, n_low without). Either may be NULL. */
void cq_ltx2_vocoder_lengths(const cq_ltx2_vocoder *v, int Tm, int64_t *n_low, int64_t *n_out);
/* mel [Cm][Tm][M] (the decoder's output; Cm * M = the generator's in_channels) -> low [n_low][channels] (the
 * main generator's output, interleaved; may be NULL) and out [n_out][channels] (the final waveform, interleaved;
 * may be NULL; without the BWE it equals low). */
cq_status cq_ltx2_vocoder_forward(cq_ltx2_vocoder *v, const float *mel, int Cm, int Tm, int M, float *low,
                                  float *out);

/* Tests: called with each intermediate device tensor (valid during the call only). Names:
 *   decoder: "dec_in" [T * Ml, C] (after the un-normalisation, channels-last), "dec_mid" [T * Ml, C0],
 *            "dec_up<level>" (after each level, its upsample included), "dec_out" [Ho * Wo, out] (conv_out);
 *   vocoder: "voc_in" [Tm, Cin], "voc_low" [n_low, ch] (the main generator), "bwe_mel" [F, ch * n_mels]
 *            (the BWE's log-mel, channel c * n_mels + m), "bwe_residual", "bwe_skip" [F * up, ch],
 *            "voc_out" [n_out, ch].
 * NULL clears it. */
typedef void (*cq_ltx2_audio_tap_fn)(void *user, const char *name, const cq_tensor *t);
void cq_ltx2_audio_vae_set_tap(cq_ltx2_audio_vae *m, cq_ltx2_audio_tap_fn fn, void *user);
void cq_ltx2_vocoder_set_tap(cq_ltx2_vocoder *v, cq_ltx2_audio_tap_fn fn, void *user);

#endif /* CQ_MODELS_LTX2_AUDIO_H */
