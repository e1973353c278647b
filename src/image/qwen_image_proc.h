/*
 * qwen_image_proc.h — a picture into the Qwen-Image edit pipelines, following
 * the reference's arithmetic as read from its source (diffusers 58eb52c0,
 * transformers 5.17) and matched byte for byte against the reference's
 * outputs (tests/golden/qwen_image_proc, test_qwen_image_proc_golden, and
 * the edit pipelines' pictures in tests/unit/test_pipeline_qimage_edit.c):
 *
 * The pipelines' own resize (diffusers VaeImageProcessor, PIL Lanczos):
 *   calculate_dimensions(area, w / h): width = sqrt(area * ratio),
 *   height = width / ratio, each rounded half-to-even to a multiple of 32
 *   (float64, Python's round).
 *   - Edit-Plus (2509/2511): the VL picture is the input resized to the
 *     384^2-area size; the VAE picture the input resized to the 1024^2-area
 *     size (VaeImageProcessor.preprocess: the size floored to multiples of 16
 *     first, a no-op for multiples of 32).
 *   - Edit: one resize to the 1024^2-area size feeds both routes.
 *   - VAE tensor: v = 2 * (u / 255) - 1, float32 operations in that order,
 *     planar [3, H, W].
 *
 * Qwen2VLImageProcessor (the torchvision backend, on the CPU):
 *   smart_resize (factor patch * merge = 28): each side rounded half-to-even
 *   to a multiple of 28; above max_pixels both sides scaled by
 *   beta = sqrt(h * w / max_pixels) and floored to multiples of 28 (at least
 *   28); below min_pixels scaled by sqrt(min_pixels / (h * w)) and rounded
 *   up; aspect ratios above 200 refused. The resize is torch's uint8
 *   antialiased bicubic (image/resample.h), skipped when the size is kept.
 *   pixel = (u - mean * 255) / (std * 255) in float32 (the processor fuses
 *   the 1/255 rescale into the mean and std: float32 mean times 255, then a
 *   subtraction and a division). The frame is repeated to temporal_patch
 *   frames; pixel_values rows run over (h/2, w/2, 2, 2) patch blocks, each
 *   row (C, T, 14, 14): [grid_t * grid_h * grid_w, 3 * 2 * 14 * 14].
 *   image_grid_thw = (1, h / 14, w / 14).
 */
#ifndef CQ_IMAGE_QWEN_IMAGE_PROC_H
#define CQ_IMAGE_QWEN_IMAGE_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

/* The pipelines' target areas. */
#define CQ_QWEN_EDIT_PLUS_VL_AREA (384 * 384)
#define CQ_QWEN_EDIT_VAE_AREA (1024 * 1024)

typedef struct cq_qwen_vl_proc {
    int patch_size;          /* 14 */
    int temporal_patch_size; /* 2 */
    int merge_size;          /* 2 */
    int64_t min_pixels;      /* 56 * 56 */
    int64_t max_pixels;      /* 28 * 28 * 1280 */
    float mean[3], std[3];   /* OpenAI CLIP's */
    double rescale_factor;   /* 1 / 255 */
} cq_qwen_vl_proc;

/* transformers 5.17's class defaults (the values above). */
void cq_qwen_vl_proc_defaults(cq_qwen_vl_proc *p);
/* A processor folder's preprocessor_config.json over the defaults: size
 * {shortest_edge, longest_edge}, then min_pixels / max_pixels (which win, as
 * in transformers' constructor), patch_size, temporal_patch_size,
 * merge_size, image_mean, image_std, rescale_factor; each checked
 * (CQ_ERR_PARSE naming the key; *p holds the defaults then). */
cq_status cq_qwen_vl_proc_parse(const char *json, size_t len, cq_qwen_vl_proc *p);

/* smart_resize; CQ_ERR_INVALID_ARG for sizes < 1, aspect ratios above 200 or
 * a result outside 1..CQ_RESAMPLE_MAX_SIDE per side. */
cq_status cq_qwen_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels,
                               int *out_height, int *out_width);

typedef struct cq_qwen_vl_image {
    int resized_w, resized_h;
    int grid_thw[3];
    int64_t n_patches, patch_dim; /* pixel_values is n_patches x patch_dim */
    float *pixel_values;
    uint8_t *resized; /* the resized RGB picture, resized_h x resized_w x 3 */
} cq_qwen_vl_image;

/* One RGB picture (w x h, interleaved) through the processor. */
cq_status cq_qwen_vl_preprocess(const cq_qwen_vl_proc *p, const uint8_t *rgb, int w, int h, cq_qwen_vl_image *out);
void cq_qwen_vl_image_free(cq_qwen_vl_image *img);

/* calculate_dimensions(area, w / h) -> (out_w, out_h), multiples of 32;
 * CQ_ERR_INVALID_ARG when a side rounds to 0 or exceeds the resize limit. */
cq_status cq_qwen_calculate_dimensions(double area, int w, int h, int *out_w, int *out_h);

typedef struct cq_qwen_edit_image {
    uint8_t *vl_rgb; /* the picture the VL processor receives, vl_h x vl_w x 3 */
    int vl_w, vl_h;
    float *vae;      /* [3, vae_h, vae_w] in [-1, 1], what the VAE encodes */
    int vae_w, vae_h;
} cq_qwen_edit_image;

typedef enum cq_qwen_edit_kind {
    CQ_QWEN_EDIT = 0, /* QwenImageEditPipeline */
    CQ_QWEN_EDIT_PLUS /* QwenImageEditPlusPipeline (2509, 2511) */
} cq_qwen_edit_kind;

/* One input picture (RGB, w x h) as the pipeline prepares it for both routes. */
cq_status cq_qwen_edit_prepare(cq_qwen_edit_kind kind, const uint8_t *rgb, int w, int h, cq_qwen_edit_image *out);
/* The same at other areas than the pipelines' (the VAE picture's 1024^2, Edit-Plus's VL picture's 384^2; the
 * golden data's tiny pipelines use small ones). vl_area is not read for Edit. */
cq_status cq_qwen_edit_prepare_areas(cq_qwen_edit_kind kind, const uint8_t *rgb, int w, int h, double vae_area,
                                     double vl_area, cq_qwen_edit_image *out);
void cq_qwen_edit_image_free(cq_qwen_edit_image *img);

/* VaeImageProcessor.preprocess of an RGB picture to (width, height): sizes
 * floored to multiples of 16, PIL Lanczos when the size changes, then
 * 2 * (u / 255) - 1 planar. *out (3 x out_h x out_w floats) is the caller's
 * to free with cq_free. */
cq_status cq_qwen_vae_preprocess(const uint8_t *rgb, int w, int h, int width, int height, float **out, int *out_w,
                                 int *out_h);


/* ---- Qwen-Image-2.1's condition pictures (QwenImage21Pipeline) ----
 * Each picture is made RGBA (PIL convert: RGB gains alpha 255) and resized
 * once, to calculate_dimensions(area, w / h) with PIL Lanczos; PIL resizes
 * an RGBA picture premultiplied: every colour becomes c * a / 255 rounded
 * ((v + 128 + ((v + 128) >> 8)) >> 8), the four channels are resampled
 * alike, and each colour is divided back (255 c / a, truncated, clamped; a of
 * 0 or 255 keeps the value). No resize when the size is kept. That one
 * picture feeds the processor (made RGB by the rule below) and, as
 * 2 * (u / 255) - 1 on all four planes, the VAE encoder. */
typedef enum cq_rgba_to_rgb {
    CQ_RGBA_DROP_ALPHA = 0, /* PIL convert("RGB"): the colour channels kept (transformers' convert_to_rgb) */
    CQ_RGBA_OVER_WHITE,     /* PIL alpha_composite over opaque white, then RGB */
    CQ_RGBA_TO_RGB_COUNT
} cq_rgba_to_rgb;

/* PIL Image.resize(LANCZOS) of an RGBA picture (premultiplied as above); dst is dw * dh * 4 bytes. */
cq_status cq_pil_resize_rgba(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);
/* n RGBA pixels to RGB by the rule (rgb: 3 n bytes). */
void cq_rgba_to_rgb_pixels(const uint8_t *rgba, size_t n, cq_rgba_to_rgb rule, uint8_t *rgb);

typedef struct cq_qi21_picture {
    int w, h;       /* the resized size (multiples of 32) */
    uint8_t *rgba;  /* [h][w][4]: the resized picture */
    float *vae;     /* [4][h][w] in [-1, 1]: what the VAE encodes */
} cq_qi21_picture;

/* One RGBA picture (w x h) resized to the area's size for both routes. */
cq_status cq_qi21_picture_prepare(const uint8_t *rgba, int w, int h, double area, cq_qi21_picture *out);
void cq_qi21_picture_free(cq_qi21_picture *p);

#endif /* CQ_IMAGE_QWEN_IMAGE_PROC_H */
