/*
 * component.c — helpers the component implementations share.
 */
#include "models/component.h"

void cq_latents_chw_to_tokens(const float *chw, float *tokens, int channels, size_t hw) {
    const size_t c = (size_t)channels;
    for (size_t ch = 0; ch < c; ch++)
        for (size_t t = 0; t < hw; t++) tokens[t * c + ch] = chw[ch * hw + t];
}

void cq_latents_tokens_to_chw(const float *tokens, float *chw, int channels, size_t hw) {
    const size_t c = (size_t)channels;
    for (size_t ch = 0; ch < c; ch++)
        for (size_t t = 0; t < hw; t++) chw[ch * hw + t] = tokens[t * c + ch];
}

/* Value v of token (y/2)*(w/2) + x/2 <-> latent (c, y, x): channel fastest (Z-Image) or slowest (Qwen-Image). */
static inline size_t in_token(size_t c, size_t y, size_t x, size_t C, bool channel_major) {
    size_t sub = (y % 2) * 2 + x % 2;
    return channel_major ? c * 4 + sub : sub * C + c;
}

/* pack: chw -> tokens (src chw, dst tokens); else tokens -> chw (src tokens, dst chw). */
static void patch2(const float *src, float *dst, int channels, int h, int w, bool channel_major, bool pack) {
    const size_t C = (size_t)channels, H = (size_t)h, W = (size_t)w, tw = W / 2;
    for (size_t c = 0; c < C; c++)
        for (size_t y = 0; y < H / 2 * 2; y++)
            for (size_t x = 0; x < tw * 2; x++) {
                size_t t = ((y / 2) * tw + x / 2) * 4 * C + in_token(c, y, x, C, channel_major), l = (c * H + y) * W + x;
                dst[pack ? t : l] = src[pack ? l : t];
            }
}

void cq_latents_patchify2(const float *chw, float *tokens, int channels, int h, int w) {
    patch2(chw, tokens, channels, h, w, false, true);
}

void cq_latents_unpatchify2(const float *tokens, float *chw, int channels, int h, int w) {
    patch2(tokens, chw, channels, h, w, false, false);
}

void cq_latents_pack2x2(const float *chw, float *tokens, int channels, int h, int w) {
    patch2(chw, tokens, channels, h, w, true, true);
}

void cq_latents_unpack2x2(const float *tokens, float *chw, int channels, int h, int w) {
    patch2(tokens, chw, channels, h, w, true, false);
}
