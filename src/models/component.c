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

void cq_latents_patchify2(const float *chw, float *tokens, int channels, int h, int w) {
    const size_t C = (size_t)channels, H = (size_t)h, W = (size_t)w, tw = W / 2;
    for (size_t c = 0; c < C; c++)
        for (size_t y = 0; y < H / 2 * 2; y++)
            for (size_t x = 0; x < tw * 2; x++)
                tokens[((y / 2) * tw + x / 2) * 4 * C + ((y % 2) * 2 + x % 2) * C + c] = chw[(c * H + y) * W + x];
}

void cq_latents_unpatchify2(const float *tokens, float *chw, int channels, int h, int w) {
    const size_t C = (size_t)channels, H = (size_t)h, W = (size_t)w, tw = W / 2;
    for (size_t c = 0; c < C; c++)
        for (size_t y = 0; y < H / 2 * 2; y++)
            for (size_t x = 0; x < tw * 2; x++)
                chw[(c * H + y) * W + x] = tokens[((y / 2) * tw + x / 2) * 4 * C + ((y % 2) * 2 + x % 2) * C + c];
}
