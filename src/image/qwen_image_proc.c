/*
 * qwen_image_proc.c — the Qwen-Image edit pipelines' image preparation and
 * the Qwen2-VL image processor (see the header for the reference arithmetic
 * this follows). Sizes follow Python's float64 rules: round() is half to
 * even (nearbyint in the default rounding mode), int / int a correctly
 * rounded double, which C's division of two exact doubles also is.
 */
#include <cJSON.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "image/qwen_image_proc.h"
#include "image/resample.h"

void cq_qwen_vl_proc_defaults(cq_qwen_vl_proc *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->patch_size = 14;
    p->temporal_patch_size = 2;
    p->merge_size = 2;
    p->min_pixels = 56 * 56;
    p->max_pixels = 28 * 28 * 1280;
    /* Python floats made float32 by torch.tensor: decimal -> double -> float
     * (a float literal would round once, which can differ) */
    const double mean[3] = {0.48145466, 0.4578275, 0.40821073};
    const double std[3] = {0.26862954, 0.26130258, 0.27577711};
    for (int c = 0; c < 3; c++) {
        p->mean[c] = (float)mean[c];
        p->std[c] = (float)std[c];
    }
    p->rescale_factor = 1.0 / 255.0;
}

static bool json_num(const cJSON *o, const char *key, double *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(j)) return false;
    *v = j->valuedouble;
    return true;
}

static cq_status json_int(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    double v;
    if (!json_num(o, key, &v)) return CQ_OK; /* absent: the default stays */
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v))
        return cq_fail(CQ_ERR_PARSE, "processor config: %s = %g is not an integer in [%lld, %lld]", key, v,
                       (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return CQ_OK;
}

static cq_status json_vec3(const cJSON *o, const char *key, bool positive, float *out) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!a) return CQ_OK;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
        return cq_fail(CQ_ERR_PARSE, "processor config: %s is not a list of 3 numbers", key);
    for (int c = 0; c < 3; c++) {
        const cJSON *e = cJSON_GetArrayItem(a, c);
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || (positive && !(e->valuedouble > 0.0)) ||
            fabs(e->valuedouble) > 1e6)
            return cq_fail(CQ_ERR_PARSE, "processor config: %s[%d] is not a usable number", key, c);
        out[c] = (float)e->valuedouble;
    }
    return CQ_OK;
}

cq_status cq_qwen_vl_proc_parse(const char *json, size_t len, cq_qwen_vl_proc *p) {
    if (!p) return cq_fail(CQ_ERR_INVALID_ARG, "processor config: no output");
    cq_qwen_vl_proc_defaults(p);
    if (!json) return cq_fail(CQ_ERR_INVALID_ARG, "processor config: no text");
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return cq_fail(CQ_ERR_PARSE, "processor config: not a JSON object");
    }
    int64_t patch = p->patch_size, tp = p->temporal_patch_size, merge = p->merge_size;
    int64_t lo = p->min_pixels, hi = p->max_pixels;
    const int64_t max_px = (int64_t)CQ_RESAMPLE_MAX_SIDE * CQ_RESAMPLE_MAX_SIDE;
    /* transformers 5 keeps the limits in size {shortest_edge, longest_edge}; min_pixels / max_pixels, when
     * given, override them as its constructor does */
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(root, "size");
    cq_status s = CQ_OK;
    if (cJSON_IsObject(size)) {
        s = json_int(size, "shortest_edge", 0, max_px, &lo);
        if (s == CQ_OK) s = json_int(size, "longest_edge", 1, max_px, &hi);
    }
    if (s == CQ_OK) s = json_int(root, "min_pixels", 0, max_px, &lo);
    if (s == CQ_OK) s = json_int(root, "max_pixels", 1, max_px, &hi);
    if (s == CQ_OK) s = json_int(root, "patch_size", 1, 64, &patch);
    if (s == CQ_OK) s = json_int(root, "temporal_patch_size", 1, 16, &tp);
    if (s == CQ_OK) s = json_int(root, "merge_size", 1, 16, &merge);
    if (s == CQ_OK) s = json_vec3(root, "image_mean", false, p->mean);
    if (s == CQ_OK) s = json_vec3(root, "image_std", true, p->std);
    double rf = p->rescale_factor;
    if (s == CQ_OK && json_num(root, "rescale_factor", &rf) && !(rf > 0.0 && rf <= 1.0))
        s = cq_fail(CQ_ERR_PARSE, "processor config: rescale_factor %g is not in (0, 1]", rf);
    if (s == CQ_OK && lo > hi)
        s = cq_fail(CQ_ERR_PARSE, "processor config: min_pixels %lld is above max_pixels %lld", (long long)lo,
                    (long long)hi);
    cJSON_Delete(root);
    if (s != CQ_OK) {
        cq_qwen_vl_proc_defaults(p);
        return s;
    }
    p->patch_size = (int)patch;
    p->temporal_patch_size = (int)tp;
    p->merge_size = (int)merge;
    p->min_pixels = lo;
    p->max_pixels = hi;
    p->rescale_factor = rf;
    return CQ_OK;
}

static int64_t round_half_even(double x) { return (int64_t)nearbyint(x); }

cq_status cq_qwen_smart_resize(int height, int width, int factor, int64_t min_pixels, int64_t max_pixels,
                               int *out_height, int *out_width) {
    if (!out_height || !out_width) return cq_fail(CQ_ERR_INVALID_ARG, "smart_resize: no output");
    if (height < 1 || width < 1 || factor < 1 || min_pixels < 0 || max_pixels < 1 ||
        height > CQ_RESAMPLE_MAX_SIDE || width > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "smart_resize: bad arguments (%dx%d, factor %d, pixels %lld..%lld)",
                       width, height, factor, (long long)min_pixels, (long long)max_pixels);
    const int big = CQ_MAX(height, width), small = CQ_MIN(height, width);
    if ((double)big / (double)small > 200.0)
        return cq_fail(CQ_ERR_INVALID_ARG, "smart_resize: aspect ratio %dx%d is above 200", width, height);
    const double hw = (double)height * (double)width; /* exact below 2^53 */
    int64_t hb = round_half_even((double)height / factor) * factor;
    int64_t wb = round_half_even((double)width / factor) * factor;
    if (hb * wb > max_pixels) {
        const double beta = sqrt(hw / (double)max_pixels);
        hb = CQ_MAX((int64_t)factor, (int64_t)floor((double)height / beta / factor) * factor);
        wb = CQ_MAX((int64_t)factor, (int64_t)floor((double)width / beta / factor) * factor);
    } else if (hb * wb < min_pixels) {
        const double beta = sqrt((double)min_pixels / hw);
        hb = (int64_t)ceil((double)height * beta / factor) * factor;
        wb = (int64_t)ceil((double)width * beta / factor) * factor;
    }
    if (hb < 1 || wb < 1 || hb > CQ_RESAMPLE_MAX_SIDE || wb > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "smart_resize: %dx%d gives %lldx%lld, outside 1..%d per side", width,
                       height, (long long)wb, (long long)hb, CQ_RESAMPLE_MAX_SIDE);
    *out_height = (int)hb;
    *out_width = (int)wb;
    return CQ_OK;
}

void cq_qwen_vl_image_free(cq_qwen_vl_image *img) {
    if (!img) return;
    cq_free(img->pixel_values);
    cq_free(img->resized);
    memset(img, 0, sizeof *img);
}

static cq_status check_picture(const uint8_t *rgb, int w, int h, const char *what) {
    if (!rgb) return cq_fail(CQ_ERR_INVALID_ARG, "%s: no picture", what);
    if (w < 1 || h < 1 || w > CQ_RESAMPLE_MAX_SIDE || h > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: picture of %dx%d is outside 1..%d per side", what, w, h,
                       CQ_RESAMPLE_MAX_SIDE);
    return CQ_OK;
}

cq_status cq_qwen_vl_preprocess(const cq_qwen_vl_proc *p, const uint8_t *rgb, int w, int h, cq_qwen_vl_image *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "vl processor: no output");
    memset(out, 0, sizeof *out);
    if (!p) return cq_fail(CQ_ERR_INVALID_ARG, "vl processor: no settings");
    CQ_TRY(check_picture(rgb, w, h, "vl processor"));
    const int P = p->patch_size, T = p->temporal_patch_size, M = p->merge_size;
    if (P < 1 || P > 64 || T < 1 || T > 16 || M < 1 || M > 16 || !(p->rescale_factor > 0.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "vl processor: patch %d, temporal %d, merge %d, rescale %g", P, T, M,
                       p->rescale_factor);
    for (int c = 0; c < 3; c++)
        if (!(p->std[c] != 0.0f) || !isfinite(p->std[c]) || !isfinite(p->mean[c]))
            return cq_fail(CQ_ERR_INVALID_ARG, "vl processor: mean/std of channel %d unusable", c);
    int rh = 0, rw = 0;
    CQ_TRY(cq_qwen_smart_resize(h, w, P * M, p->min_pixels, p->max_pixels, &rh, &rw));
    const int gh = rh / P, gw = rw / P;
    if (rh % (P * M) != 0 || rw % (P * M) != 0) /* smart_resize's multiples; a guard for odd settings */
        return cq_fail(CQ_ERR_INVALID_ARG, "vl processor: %dx%d is not a multiple of %d", rw, rh, P * M);
    out->resized = cq_mallocn((size_t)rw * (size_t)rh, 3);
    if (!out->resized) return CQ_ERR_NOMEM;
    cq_status s = cq_resample_u8(CQ_RESAMPLE_TORCH_BICUBIC_AA, rgb, w, h, 3, out->resized, rw, rh);
    if (s != CQ_OK) {
        cq_qwen_vl_image_free(out);
        return s;
    }
    out->resized_w = rw;
    out->resized_h = rh;
    out->grid_thw[0] = 1; /* one picture, repeated to T frames: one temporal patch */
    out->grid_thw[1] = gh;
    out->grid_thw[2] = gw;
    out->n_patches = (int64_t)gh * gw;
    out->patch_dim = (int64_t)3 * T * P * P;
    out->pixel_values = cq_mallocn((size_t)out->n_patches, (size_t)out->patch_dim * sizeof(float));
    if (!out->pixel_values) {
        cq_qwen_vl_image_free(out);
        return CQ_ERR_NOMEM;
    }
    /* the fused rescale: float32 mean and std times (float)(1 / rescale) */
    const float k = (float)(1.0 / p->rescale_factor);
    float m[3], sd[3];
    for (int c = 0; c < 3; c++) {
        m[c] = p->mean[c] * k;
        sd[c] = p->std[c] * k;
    }
    const size_t pp = (size_t)P * (size_t)P, row_len = (size_t)out->patch_dim;
    float *dst = out->pixel_values;
    for (int bh = 0; bh < gh / M; bh++)
        for (int bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++) {
                    const int y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    for (int c = 0; c < 3; c++)
                        for (int py = 0; py < P; py++)
                            for (int px = 0; px < P; px++) {
                                const uint8_t u = out->resized[((size_t)(y0 + py) * (size_t)rw + (size_t)(x0 + px)) * 3 +
                                                               (size_t)c];
                                const float v = ((float)u - m[c]) / sd[c];
                                for (int t = 0; t < T; t++)
                                    dst[(size_t)c * (size_t)T * pp + (size_t)t * pp + (size_t)py * (size_t)P +
                                        (size_t)px] = v;
                            }
                    dst += row_len;
                }
    return CQ_OK;
}

cq_status cq_qwen_calculate_dimensions(double area, int w, int h, int *out_w, int *out_h) {
    if (!out_w || !out_h) return cq_fail(CQ_ERR_INVALID_ARG, "calculate_dimensions: no output");
    if (w < 1 || h < 1 || !(area > 0.0) || !isfinite(area))
        return cq_fail(CQ_ERR_INVALID_ARG, "calculate_dimensions: bad arguments (%dx%d, area %g)", w, h, area);
    const double ratio = (double)w / (double)h;
    const double width = sqrt(area * ratio);
    const double height = width / ratio;
    const int64_t ow = round_half_even(width / 32) * 32, oh = round_half_even(height / 32) * 32;
    if (ow < 1 || oh < 1 || ow > CQ_RESAMPLE_MAX_SIDE || oh > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "calculate_dimensions: a %dx%d picture gives %lldx%lld at area %g (aspect ratio too extreme)",
                       w, h, (long long)ow, (long long)oh, area);
    *out_w = (int)ow;
    *out_h = (int)oh;
    return CQ_OK;
}

static void vae_normalise(const uint8_t *rgb, int w, int h, float *out) {
    const size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < 3; c++) {
            const float unit = (float)rgb[i * 3 + c] / 255.0f; /* numpy float32 / 255 */
            const float twice = 2.0f * unit;                   /* torch 2.0 * images */
            out[c * n + i] = twice - 1.0f;                     /* - 1.0 */
        }
}

cq_status cq_qwen_vae_preprocess(const uint8_t *rgb, int w, int h, int width, int height, float **out, int *out_w,
                                 int *out_h) {
    if (!out || !out_w || !out_h) return cq_fail(CQ_ERR_INVALID_ARG, "vae preprocess: no output");
    *out = NULL;
    CQ_TRY(check_picture(rgb, w, h, "vae preprocess"));
    const int tw = width - width % 16, th = height - height % 16; /* get_default_height_width */
    if (tw < 16 || th < 16 || tw > CQ_RESAMPLE_MAX_SIDE || th > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "vae preprocess: size %dx%d is outside 16..%d per side", width, height,
                       CQ_RESAMPLE_MAX_SIDE);
    uint8_t *tmp = NULL;
    const uint8_t *src = rgb;
    if (tw != w || th != h) {
        tmp = cq_mallocn((size_t)tw * (size_t)th, 3);
        if (!tmp) return CQ_ERR_NOMEM;
        const cq_status s = cq_resample_u8(CQ_RESAMPLE_PIL_LANCZOS, rgb, w, h, 3, tmp, tw, th);
        if (s != CQ_OK) {
            cq_free(tmp);
            return s;
        }
        src = tmp;
    }
    float *v = cq_mallocn((size_t)tw * (size_t)th * 3, sizeof(float));
    if (!v) {
        cq_free(tmp);
        return CQ_ERR_NOMEM;
    }
    vae_normalise(src, tw, th, v);
    cq_free(tmp);
    *out = v;
    *out_w = tw;
    *out_h = th;
    return CQ_OK;
}

void cq_qwen_edit_image_free(cq_qwen_edit_image *img) {
    if (!img) return;
    cq_free(img->vl_rgb);
    cq_free(img->vae);
    memset(img, 0, sizeof *img);
}

cq_status cq_qwen_edit_prepare(cq_qwen_edit_kind kind, const uint8_t *rgb, int w, int h, cq_qwen_edit_image *out) {
    return cq_qwen_edit_prepare_areas(kind, rgb, w, h, CQ_QWEN_EDIT_VAE_AREA, CQ_QWEN_EDIT_PLUS_VL_AREA, out);
}

cq_status cq_qwen_edit_prepare_areas(cq_qwen_edit_kind kind, const uint8_t *rgb, int w, int h, double vae_area,
                                     double vl_area, cq_qwen_edit_image *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "edit input: no output");
    memset(out, 0, sizeof *out);
    if (kind != CQ_QWEN_EDIT && kind != CQ_QWEN_EDIT_PLUS) return cq_fail(CQ_ERR_INVALID_ARG, "edit input: kind");
    CQ_TRY(check_picture(rgb, w, h, "edit input"));
    int vw = 0, vh = 0, cw = 0, ch = 0;
    CQ_TRY(cq_qwen_calculate_dimensions(vae_area, w, h, &vw, &vh));
    if (kind == CQ_QWEN_EDIT_PLUS) CQ_TRY(cq_qwen_calculate_dimensions(vl_area, w, h, &cw, &ch));
    else cw = vw, ch = vh;
    cq_status s = CQ_OK;
    out->vl_rgb = cq_mallocn((size_t)cw * (size_t)ch, 3);
    if (!out->vl_rgb) s = CQ_ERR_NOMEM;
    /* VaeImageProcessor.resize: PIL resize straight to the size (no flooring;
     * PIL copies when the size is the same) */
    if (s == CQ_OK) s = cq_resample_u8(CQ_RESAMPLE_PIL_LANCZOS, rgb, w, h, 3, out->vl_rgb, cw, ch);
    if (s == CQ_OK) {
        out->vl_w = cw;
        out->vl_h = ch;
        /* Edit: the VAE picture is the resized one (resized again to its own
         * size: a copy); Edit-Plus: the input resized to the VAE size */
        if (kind == CQ_QWEN_EDIT) s = cq_qwen_vae_preprocess(out->vl_rgb, cw, ch, vw, vh, &out->vae, &out->vae_w, &out->vae_h);
        else s = cq_qwen_vae_preprocess(rgb, w, h, vw, vh, &out->vae, &out->vae_w, &out->vae_h);
    }
    if (s != CQ_OK) cq_qwen_edit_image_free(out);
    return s;
}

/* ---- Qwen-Image-2.1's condition pictures ---- */

/* PIL's MULDIV255: a * b / 255 rounded to nearest */
static uint8_t muldiv255(unsigned a, unsigned b) {
    const unsigned t = a * b + 128u;
    return (uint8_t)(((t >> 8) + t) >> 8);
}

cq_status cq_pil_resize_rgba(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    CQ_TRY(check_picture(src, sw, sh, "rgba resize"));
    if (!dst || dw < 1 || dh < 1 || dw > CQ_RESAMPLE_MAX_SIDE || dh > CQ_RESAMPLE_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "rgba resize: size %dx%d is outside 1..%d per side", dw, dh,
                       CQ_RESAMPLE_MAX_SIDE);
    const size_t n = (size_t)sw * (size_t)sh, m = (size_t)dw * (size_t)dh;
    if (dw == sw && dh == sh) { /* PIL copies a picture whose size is kept */
        memcpy(dst, src, n * 4);
        return CQ_OK;
    }
    uint8_t *pre = cq_mallocn(n, 4);
    if (!pre) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) { /* RGBA -> RGBa */
        const unsigned a = src[4 * i + 3];
        for (int c = 0; c < 3; c++) pre[4 * i + c] = muldiv255(src[4 * i + c], a);
        pre[4 * i + 3] = (uint8_t)a;
    }
    const cq_status s = cq_resample_u8(CQ_RESAMPLE_PIL_LANCZOS, pre, sw, sh, 4, dst, dw, dh);
    cq_free(pre);
    CQ_TRY(s);
    for (size_t i = 0; i < m; i++) { /* RGBa -> RGBA */
        const unsigned a = dst[4 * i + 3];
        if (a == 0 || a == 255) continue;
        for (int c = 0; c < 3; c++) {
            const unsigned v = 255u * dst[4 * i + c] / a;
            dst[4 * i + c] = (uint8_t)(v > 255u ? 255u : v);
        }
    }
    return CQ_OK;
}

/* PIL's alpha_composite of (r, g, b, a) over opaque white, 7 extra bits of precision, divisions rounded */
static void over_white(const uint8_t *px, uint8_t *out) {
    const unsigned a = px[3];
    if (a == 0) {
        out[0] = out[1] = out[2] = 255;
        return;
    }
    const unsigned blend = 255u * (255u - a), outa255 = a * 255u + blend;
    const unsigned coef1 = a * 255u * 255u * 128u / outa255, coef2 = 255u * 128u - coef1;
    for (int c = 0; c < 3; c++) {
        const unsigned t = px[c] * coef1 + 255u * coef2 + (0x80u << 7);
        out[c] = (uint8_t)((((t >> 8) + t) >> 8) >> 7);
    }
}

void cq_rgba_to_rgb_pixels(const uint8_t *rgba, size_t n, cq_rgba_to_rgb rule, uint8_t *rgb) {
    for (size_t i = 0; i < n; i++) {
        if (rule == CQ_RGBA_OVER_WHITE) {
            over_white(rgba + 4 * i, rgb + 3 * i);
        } else {
            rgb[3 * i + 0] = rgba[4 * i + 0];
            rgb[3 * i + 1] = rgba[4 * i + 1];
            rgb[3 * i + 2] = rgba[4 * i + 2];
        }
    }
}

void cq_qi21_picture_free(cq_qi21_picture *p) {
    if (!p) return;
    cq_free(p->rgba);
    cq_free(p->vae);
    memset(p, 0, sizeof *p);
}

cq_status cq_qi21_picture_prepare(const uint8_t *rgba, int w, int h, double area, cq_qi21_picture *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "condition picture: no output");
    memset(out, 0, sizeof *out);
    CQ_TRY(check_picture(rgba, w, h, "condition picture"));
    int cw = 0, ch = 0;
    CQ_TRY(cq_qwen_calculate_dimensions(area, w, h, &cw, &ch));
    const size_t n = (size_t)cw * (size_t)ch;
    out->rgba = cq_mallocn(n, 4);
    out->vae = cq_mallocn(n * 4, sizeof(float));
    cq_status s = out->rgba && out->vae ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_pil_resize_rgba(rgba, w, h, out->rgba, cw, ch);
    if (s != CQ_OK) {
        cq_qi21_picture_free(out);
        return s;
    }
    /* VaeImageProcessor.preprocess resizes the same picture to the same size (multiples of 32 are kept by its
     * flooring), then numpy float32 / 255, torch 2 * x - 1, planar */
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < 4; c++) {
            const float unit = (float)out->rgba[i * 4 + c] / 255.0f;
            out->vae[c * n + i] = 2.0f * unit - 1.0f;
        }
    out->w = cw;
    out->h = ch;
    return CQ_OK;
}
