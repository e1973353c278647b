/*
 * resample.h — the two 8-bit resizes the Qwen-Image edit pipelines run, each
 * written to follow its library's integer arithmetic step by step, and
 * byte-identical to the libraries' own outputs on the golden cases
 * (`test_qwen_image_proc --golden`, tests/golden/qwen_image_proc):
 *
 *  - PIL's Image.resize(..., LANCZOS) (diffusers' VaeImageProcessor.resize,
 *    reducing_gap None): a = 3 windowed sinc, support 3 * max(scale, 1),
 *    coefficients normalised in double and rounded to 22-bit fixed point,
 *    horizontal pass first, each pass rounded (+2^21) and clamped to u8;
 *  - torch's uint8 bicubic with antialias=True on the CPU (torchvision's
 *    resize of a uint8 tensor, the path transformers' Qwen2VLImageProcessor
 *    takes): Keys' cubic with a = -0.5 (torch uses -0.75 only without
 *    antialias), support 2 * max(scale, 1), weights normalised in double and
 *    rounded to int16 at the largest precision p <= 22 for which the
 *    dimension's largest weight times 2^(p+1) stays below 2^15; horizontal
 *    pass first, each pass rounded (+2^(p-1)), shifted and clamped to u8.
 *
 *  - PIL's Image.resize(..., BILINEAR) (the LTX-2 video processor's): the
 *    same arithmetic as its Lanczos with the triangle 1 - |x| on |x| < 1.
 *
 * A dimension whose size does not change is not resampled (both libraries
 * skip it). Images are interleaved, `channels` bytes a pixel, rows packed.
 */
#ifndef CQ_IMAGE_RESAMPLE_H
#define CQ_IMAGE_RESAMPLE_H

#include <stdint.h>

#include "cortiq.h"

typedef enum cq_resample_filter {
    CQ_RESAMPLE_PIL_LANCZOS = 0,   /* PIL Image.resize(LANCZOS) on an 8-bit image */
    CQ_RESAMPLE_TORCH_BICUBIC_AA,  /* torch uint8 bicubic, antialias=True, CPU */
    CQ_RESAMPLE_PIL_BILINEAR,      /* PIL Image.resize(BILINEAR): the triangle, support 1 * max(scale, 1) */
    CQ_RESAMPLE_FILTER_COUNT
} cq_resample_filter;

/* Largest side either resize accepts (in or out). */
#define CQ_RESAMPLE_MAX_SIDE 32768

/* Resize src (sw x sh) to dst (dw x dh). dst is dw * dh * channels bytes and
 * may not overlap src. CQ_ERR_INVALID_ARG for sizes outside 1..MAX_SIDE or
 * channels outside 1..4; CQ_ERR_NOMEM. */
cq_status cq_resample_u8(cq_resample_filter filter, const uint8_t *src, int sw, int sh, int channels, uint8_t *dst,
                         int dw, int dh);

#endif /* CQ_IMAGE_RESAMPLE_H */
