/*
 * ltx2_vae.h — LTX-2.x's conv video VAE (diffusers' AutoencoderKLLTX2Video
 * at 58eb52c0, the LTX-2.3 / 2.5 layout; ltx-core's video_vae as the second
 * reference): latents [C, F, h, w] decode to frames [3, 8(F-1)+1, 32h, 32w]
 * and frames encode to the posterior mean.
 *
 * Decoder, in decode order (diffusers' LTX2VideoDecoder3d, the config's
 * decoder lists walked backwards, upsample_type read forwards as the
 * reference reads it):
 *   conv_in (latent -> w0); mid block: ResBlocks at w0;
 *   up block i: an upsampler (conv w -> w * pt ph pw / factor, then
 *   depth-to-space with channels (c, pt, ph, pw), c slowest, the first
 *   pt - 1 frames dropped), then ResBlocks at its width;
 *   PixelNorm, SiLU, conv_out -> 3 p^2; un-patchify: output (y p + q, x p + r)
 *   of colour c is channel c p^2 + r p + q (the column offset slower).
 * ResBlock: x + conv2(SiLU(PN(conv1(SiLU(PN(x)))))), PN the weightless RMS
 * over channels, eps 1e-8. Every conv is 3x3x3 with zero spatial padding 1
 * and time padding by replicating edge frames: non-causal (the decoder of
 * LTX-2.x) one frame each side, causal (the encoder) two in front.
 *
 * Encoder (LTX2VideoEncoder3d): patchify (the same channel order), causal
 * conv_in (3 p^2 -> latent), down blocks (ResBlocks at the block's input
 * width, then a space-to-depth downsampler: the first frame repeated
 * st - 1 times in front, main = S2D(conv(x)), skip = the mean of groups of
 * in * st^3 / out channels of S2D(x), out = main + skip), mid ResBlocks,
 * PixelNorm, SiLU, conv_out -> latent + 1; the posterior mean is the first
 * `latent` channels (the last is the shared log-variance, unused).
 *
 * The pipeline's normalisation (LTX2Pipeline): before decoding
 * z = z * latents_std / scaling_factor + latents_mean; after encoding
 * z = (mu - latents_mean) * scaling_factor / latents_std, per channel.
 *
 * Followed from the config: latent_channels, patch_size, the decoder's
 * block widths, layers, spatio-temporal scaling, upsample types and factors,
 * decoder_causal; the encoder's widths, layers, scaling and downsample
 * types, encoder_causal; scaling_factor. Refused with a message naming the
 * member: timestep_conditioning, decoder_inject_noise, upsample_residual,
 * a spatial padding mode other than "zeros", patch_size_t other than 1,
 * up blocks whose width changes (the conv_in ResBlock with a shortcut),
 * downsample_type "conv", block types other than LTX2VideoDownBlock3D.
 *
 * Layouts: the decoder takes latents in the DiT's layout, channels-last
 * frame-major [F*h*w, C] (cq_ltx2_vae_decode_tokens, _decode_tiled), or
 * planar [C, F, h, w] as diffusers holds them (cq_ltx2_vae_decode); frames
 * come out planar [3, Fo, Ho, Wo] in the decoder's range (about [-1, 1],
 * not clamped; cq_ltx2_vae_frames_to_unit applies the pipeline's
 * x / 2 + 1 / 2 and clamp). The encoder takes planar frames and gives the
 * planar posterior mean. Every activation is f32 and channels-last
 * [F*H*W, C] on the backend; each stage is its own function of that layout.
 *
 * Bounded memory: cq_ltx2_vae_decode_stream makes the frames one at a time,
 * each layer keeping four frames (ltx2_vae_stream.c), equal to the untiled
 * decode. cq_ltx2_vae_decode_tiled decodes boxes of latent frames,
 * rows and columns, each widened by a halo, and keeps each box's own part.
 * With the halo cq_ltx2_vae_decode_halo gives (the decoder's receptive
 * field plus one) the result equals the untiled decode: the ops are local
 * (PixelNorm is per voxel) and the box's zero / replicate padding only
 * reaches voxels inside the halo. A smaller halo trades exactness for
 * memory; the reference's own tiling (diffusers' tiled_decode, ltx-core's
 * trapezoid blends) is never exact, and this is not that.
 */
#ifndef CQ_MODELS_LTX2_VAE_H
#define CQ_MODELS_LTX2_VAE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"

#define CQ_LTX2_VAE_MAX_BLOCKS 8

/* An up block in decode order (up_blocks.i) or a down block (down_blocks.i). */
typedef struct cq_ltx2_vae_block {
    int cin;        /* channels into the block */
    int cout;       /* channels out of it (its resampler's output) */
    int width;      /* its ResBlocks' width: cout for an up block (after the upsampler), cin for a down block */
    int n_res;
    bool resample;  /* upsampler / downsampler present */
    int st[3];      /* its strides (time, rows, columns) */
    int conv_out;   /* the resampler conv's output channels */
    int group;      /* down blocks: channels averaged into one skip channel */
} cq_ltx2_vae_block;

typedef struct cq_ltx2_vae_config {
    int in_channels, out_channels, latent_channels, patch;
    double scaling_factor;
    /* decoder */
    int dec_width;       /* conv_in's output, the mid block's width */
    int dec_mid_layers;
    int n_up;
    cq_ltx2_vae_block up[CQ_LTX2_VAE_MAX_BLOCKS];
    int dec_out_width;   /* the last up block's width, conv_out's input */
    bool dec_causal;
    /* encoder */
    int n_down;
    cq_ltx2_vae_block down[CQ_LTX2_VAE_MAX_BLOCKS];
    int enc_mid_layers;
    int enc_width;       /* the mid block's width, conv_out's input */
    bool enc_causal;
    /* derived: frames and pixels per latent step */
    int t_up, s_up;      /* the decoder's temporal and spatial upsampling (with the patch) */
    int t_down, s_down;  /* the encoder's */
} cq_ltx2_vae_config;

typedef struct cq_ltx2_vae cq_ltx2_vae;

/* The config from `<prefix>config_json` (diffusers' AutoencoderKLLTX2Video config.json); refuses what is not run
 * (see above), naming the member; another class is CQ_ERR_UNSUPPORTED. */
cq_status cq_ltx2_vae_parse_config(const cq_cmf *cmf, const char *prefix, cq_ltx2_vae_config *c);
/* The same from a JSON text (tests, tools). */
cq_status cq_ltx2_vae_parse_config_text(const char *json, cq_ltx2_vae_config *c);

/* Load from a pack: tensors `<prefix><diffusers name>` ("vae." as `cortiq convert` writes a pipeline's vae/
 * folder or a lone AutoencoderKLLTX2Video folder). Kernels [cout, cin, 3, 3, 3] in f32, f16 or bf16, biases and
 * the statistics in any float codec. The encoder is optional, all or nothing. */
cq_status cq_ltx2_vae_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_ltx2_vae **out);
void cq_ltx2_vae_free(cq_ltx2_vae *v);
const cq_ltx2_vae_config *cq_ltx2_vae_get_config(const cq_ltx2_vae *v);
bool cq_ltx2_vae_has_encoder(const cq_ltx2_vae *v);

/* The frames a decode of F x h x w latents gives (*Fo, *Ho, *Wo), checked (1 <= F, h, w and sizes in range). */
cq_status cq_ltx2_vae_decode_shape(const cq_ltx2_vae *v, int F, int h, int w, int *Fo, int *Ho, int *Wo);
/* The latent grid an encode of F x H x W frames gives, checked (H, W multiples of the spatial factor, every
 * temporal downsampler's input frames + st - 1 divisible by st: 8k + 1 frames for LTX-2.x). */
cq_status cq_ltx2_vae_encode_shape(const cq_ltx2_vae *v, int F, int H, int W, int *Fo, int *Ho, int *Wo);

/* The pipeline's normalisation in place on z [C, F, h, w]: denormalize (before decoding) and normalize (after
 * encoding), as above. */
cq_status cq_ltx2_vae_denormalize(const cq_ltx2_vae *v, float *z, int F, int h, int w);
cq_status cq_ltx2_vae_normalize(const cq_ltx2_vae *v, float *z, int F, int h, int w);

/* Decode z [C, F, h, w] (VAE space, already denormalized) into frames [out_channels, Fo, Ho, Wo]
 * (cq_ltx2_vae_decode_shape): the raw decoder output, not clamped. The whole video is held at once. */
cq_status cq_ltx2_vae_decode(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames);
/* The same from channels-last frame-major latents z [F*h*w, C] (the DiT's token layout, denormalized). */
cq_status cq_ltx2_vae_decode_tokens(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames);

/* Boxes of `frames` latent frames x `rows` x `cols` latents (0: the whole extent), each decoded with a halo of
 * `halo_t` latent frames and `halo_s` latents (negative: cq_ltx2_vae_decode_halo's, the exact one). Chunks of
 * frames need halo_t >= 1. */
typedef struct cq_ltx2_vae_tiling {
    int frames, rows, cols;
    int halo_t, halo_s;
} cq_ltx2_vae_tiling;
/* Decode z [F*h*w, C] (channels-last, denormalized) box by box into frames [out_channels, Fo, Ho, Wo]; the
 * device holds one box at a time (cq_ltx2_vae_decode_bytes of the box with its halo). */
cq_status cq_ltx2_vae_decode_tiled(cq_ltx2_vae *v, const float *z, int F, int h, int w,
                                   const cq_ltx2_vae_tiling *t, float *frames);
/* The halo that makes a tiled decode exact: the decoder's receptive field in latent frames and latents, plus one
 * (LTX-2.5: see docs/LTX2.md). */
void cq_ltx2_vae_decode_halo(const cq_ltx2_vae_config *c, int *halo_t, int *halo_s);
/* The peak bytes an untiled decode of F x h x w latents holds (f32 activations on the backend plus the host
 * copies; the backends' bounded conv scratch not counted). */
uint64_t cq_ltx2_vae_decode_bytes(const cq_ltx2_vae_config *c, int F, int h, int w);
/* Decode z [F*h*w, C] (channels-last, denormalized) as a stream of frames: each conv makes one output frame from
 * three input frames when asked, each node of the graph keeping its last 4 frames, so the device holds a few
 * frames a layer whatever the video's length; the frames equal the untiled decode's (bit for bit on the CPU).
 * *device_bytes (may be NULL) receives the bytes it allocated on the backend. */
cq_status cq_ltx2_vae_decode_stream(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames,
                                    uint64_t *device_bytes);
/* The most bytes a stream decode of h x w latents allocates on the backend (any number of frames; fewer when the
 * video has fewer than 4 frames at some stage). */
uint64_t cq_ltx2_vae_stream_bytes(const cq_ltx2_vae_config *c, int h, int w);
/* The pipeline's output mapping in place: x / 2 + 1 / 2 clamped to [0, 1]. */
cq_status cq_ltx2_vae_frames_to_unit(float *frames, size_t n);

/* Encode frames [in_channels, F, H, W] (values in [-1, 1]) into the posterior mean [C, Fo, Ho, Wo]
 * (cq_ltx2_vae_encode_shape), not normalized. */
cq_status cq_ltx2_vae_encode(cq_ltx2_vae *v, const float *frames, int F, int H, int W, float *mean);

/* Tests: called with each stage's output, channels-last [T*H*W, C] on the backend, valid during the call only.
 * Decoder: "dec_conv_in", "dec_mid", "dec_up<i>", "dec_conv_out" (before the un-patchify). Encoder:
 * "enc_conv_in", "enc_down<i>", "enc_mid", "enc_conv_out" (all latent + 1 channels). `T, H, W` give the grid.
 * NULL clears it. */
typedef void (*cq_ltx2_vae_tap_fn)(void *user, const char *name, const cq_tensor *t, int T, int H, int W);
void cq_ltx2_vae_set_tap(cq_ltx2_vae *v, cq_ltx2_vae_tap_fn fn, void *user);

#endif /* CQ_MODELS_LTX2_VAE_H */
