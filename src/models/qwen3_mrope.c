/*
 * qwen3_mrope.c — the multimodal side of the Qwen decoder's RoPE: which of
 * the three position axes each frequency channel reads (Qwen2.5-VL's
 * sectioned layout, Qwen3-VL's interleaved one), and Qwen2.5-VL's 3-D
 * position ids of a sequence of text and images (its get_rope_index).
 * Pure host code; the forward pass (qwen3.c) turns positions into cos/sin.
 */
#include <string.h>

#include "base/base.h"
#include "models/qwen3_impl.h"

void q3_rope_axes(const cq_qwen3_config *c, uint8_t *axis) {
    int half = c->head_dim / 2;
    const int *s = c->mrope_section;
    /* Qwen3-VL's rotary class interleaves whatever the flag says; a config may spell it out */
    bool interleaved = c->mrope_interleaved || (c->vl && c->family == CQ_QWEN_FAMILY_3);
    bool sections = s[0] + s[1] + s[2] > 0;
    for (int j = 0; j < half; j++) {
        uint8_t a = 0;
        if (!sections) {
            a = 0;
        } else if (interleaved) {
            if (j % 3 == 1 && j < 3 * s[1]) a = 1;
            else if (j % 3 == 2 && j < 3 * s[2]) a = 2;
        } else if (j >= s[0] + s[1]) {
            a = 2;
        } else if (j >= s[0]) {
            a = 1;
        }
        axis[j] = a;
    }
}

cq_status cq_qwen3_rope_index(const int32_t *ids, int n, int32_t image_token, int32_t vision_start,
                              const int32_t (*grid_thw)[3], int n_images, int merge, int32_t *pos, int32_t *delta) {
    if (!ids || n < 1 || !pos || n_images < 0 || (n_images > 0 && !grid_thw))
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: needs ids (n >= 1), the output and the image grids");
    if (merge < 1) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: spatial merge size %d < 1", merge);
    if (image_token == vision_start)
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: the image and vision-start ids are both %d", image_token);
    int32_t *pt = pos, *ph = pos + n, *pw = pos + 2 * (size_t)n;
    int64_t p = 0; /* the next text position */
    int64_t top = -1;
    int img = 0;
    for (int i = 0; i < n;) {
        if (ids[i] != image_token) {
            if (p > INT32_MAX) return cq_fail(CQ_ERR_BOUNDS, "qwen3 rope index: positions overflow at token %d", i);
            pt[i] = ph[i] = pw[i] = (int32_t)p;
            top = p++;
            i++;
            continue;
        }
        if (img == n_images)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: an image at token %d, but only %d image grids", i,
                           n_images);
        if (i == 0 || ids[i - 1] != vision_start)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: image %d (token %d) does not follow a vision-start "
                           "token (%d)", img, i, (int)vision_start);
        const int32_t *g = grid_thw[img];
        if (g[0] != 1)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3 rope index: image %d has %d frames (only single-frame images)",
                           img, (int)g[0]);
        if (g[1] < merge || g[2] < merge || g[1] % merge || g[2] % merge)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: image %d's grid %dx%d is not a positive multiple of "
                           "the merge size %d", img, (int)g[1], (int)g[2], merge);
        int64_t gh = g[1] / merge, gw = g[2] / merge, len = gh * gw;
        if (len > n - i)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: image %d needs %lld image tokens from token %d, the "
                           "sequence has %d more", img, (long long)len, i, n - i);
        for (int64_t k = 0; k < len; k++)
            if (ids[i + k] != image_token)
                return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: image %d (%lldx%lld merged) has %lld image "
                               "tokens from token %d, not %lld", img, (long long)gh, (long long)gw, (long long)k, i,
                               (long long)len);
        if (i + len < n && ids[i + len] == image_token)
            return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: image %d (%lld tokens from token %d) is followed by "
                           "more image tokens", img, (long long)len, i);
        int64_t last = p + CQ_MAX(gh, gw) - 1;
        if (last > INT32_MAX) return cq_fail(CQ_ERR_BOUNDS, "qwen3 rope index: positions overflow at token %d", i);
        for (int64_t r = 0, k = i; r < gh; r++)
            for (int64_t col = 0; col < gw; col++, k++) {
                pt[k] = (int32_t)p;
                ph[k] = (int32_t)(p + r);
                pw[k] = (int32_t)(p + col);
            }
        top = CQ_MAX(top, last);
        p += CQ_MAX(gh, gw);
        i += (int)len;
        img++;
    }
    if (img != n_images)
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3 rope index: %d image grids given, the ids hold %d images", n_images,
                       img);
    if (delta) *delta = (int32_t)(top + 1 - n);
    return CQ_OK;
}
