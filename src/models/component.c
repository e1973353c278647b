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
