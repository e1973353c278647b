/*
 * latents.c — Qwen-Image-2.1 latent grid, token packing and the seeded
 * initial latents (see latents.h for the reference's layout).
 */
#include <string.h>

#include "base/base.h"
#include "pipelines/latents.h"
#include "models/component.h"

cq_status cq_qi21_latent_grid(int width, int height, int *lat_w, int *lat_h) {
    if (width < 32 || height < 32 || width > 65536 || height > 65536)
        return cq_fail(CQ_ERR_INVALID_ARG, "image size %dx%d: each side must be 32..65536 pixels", width, height);
    if (width % 32 != 0 || height % 32 != 0)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "image size %dx%d: sides must be multiples of 32 (the reference pipeline would "
                       "render %dx%d)",
                       width, height, width / 32 * 32, height / 32 * 32);
    if (lat_w) *lat_w = width / 16;
    if (lat_h) *lat_h = height / 16;
    return CQ_OK;
}

void cq_qi21_pack_latents(const float *chw, float *tokens, int batch, int channels, int lat_h, int lat_w) {
    const size_t hw = (size_t)lat_h * (size_t)lat_w, c = (size_t)channels;
    for (size_t b = 0; b < (size_t)batch; b++) cq_latents_chw_to_tokens(chw + b * c * hw, tokens + b * hw * c, channels, hw);
}

void cq_qi21_unpack_latents(const float *tokens, float *chw, int batch, int channels, int lat_h, int lat_w) {
    const size_t hw = (size_t)lat_h * (size_t)lat_w, c = (size_t)channels;
    for (size_t b = 0; b < (size_t)batch; b++) cq_latents_tokens_to_chw(tokens + b * hw * c, chw + b * c * hw, channels, hw);
}

cq_status cq_latent_noise(uint64_t seed, cq_torch_dtype dtype, cq_torch_f32_kernel kernel, size_t n, float *out) {
    if (!out || n == 0) return cq_fail(CQ_ERR_INVALID_ARG, "initial latents: no values or no output");
    const size_t es = cq_torch_dtype_size(dtype);
    if (es == 0) return cq_fail(CQ_ERR_INVALID_ARG, "initial latents: unknown dtype %d", (int)dtype);
    void *raw = cq_mallocn(n, es);
    cq_status s = raw ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        cq_torch_gen g;
        cq_torch_gen_seed(&g, seed);
        s = cq_torch_randn(&g, dtype, kernel, raw, n);
    }
    if (s == CQ_OK) {
        for (size_t i = 0; i < n; i++) {
            switch (dtype) {
            case CQ_TORCH_F32: out[i] = ((const float *)raw)[i]; break;
            case CQ_TORCH_F64: out[i] = (float)((const double *)raw)[i]; break;
            case CQ_TORCH_BF16: out[i] = cq_torch_bf16_to_f32(((const uint16_t *)raw)[i]); break;
            case CQ_TORCH_F16: out[i] = cq_torch_f16_to_f32(((const uint16_t *)raw)[i]); break;
            default: s = cq_fail(CQ_ERR_INTERNAL, "initial latents: dtype %d", (int)dtype); break;
            }
            if (s != CQ_OK) break;
        }
    }
    cq_free(raw);
    return s;
}

cq_status cq_qi21_initial_latents(uint64_t seed, cq_torch_dtype dtype, cq_torch_f32_kernel kernel, int batch,
                                    int channels, int lat_h, int lat_w, float *tokens) {
    if (!tokens || batch < 1 || channels < 1 || lat_h < 1 || lat_w < 1)
        return cq_fail(CQ_ERR_INVALID_ARG, "initial latents: bad shape %dx%dx%dx%d or no output", batch,
                       channels, lat_h, lat_w);
    if (cq_torch_dtype_size(dtype) == 0) return cq_fail(CQ_ERR_INVALID_ARG, "initial latents: unknown dtype %d", (int)dtype);
    size_t n = (size_t)batch;
    if (!cq_mul_size(n, (size_t)channels, &n) || !cq_mul_size(n, (size_t)lat_h, &n) ||
        !cq_mul_size(n, (size_t)lat_w, &n))
        return cq_fail(CQ_ERR_NOMEM, "initial latents: size overflows");
    float *chw = cq_mallocn(n, sizeof *chw);
    if (!chw) return CQ_ERR_NOMEM;
    cq_status s = cq_latent_noise(seed, dtype, kernel, n, chw);
    if (s == CQ_OK) cq_qi21_pack_latents(chw, tokens, batch, channels, lat_h, lat_w);
    cq_free(chw);
    return s;
}
