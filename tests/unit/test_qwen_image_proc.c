/*
 * test_qwen_image_proc.c — picture input of the Qwen-Image edit pipelines
 * (src/image/) against the reference (tests/golden/qwen_image_proc, made by
 * tools/golden_qwen_image_proc.py: PIL 8-bit decoding, diffusers' Edit and
 * Edit-Plus pre-resize, transformers' Qwen2VLImageProcessor on the CPU).
 *
 * `test_qwen_image_proc --golden` (ctest test_qwen_image_proc_golden; exit
 * 77, skipped, while the folder is absent) requires every stage to be
 * bit-exact: the decoded RGB, PIL's Lanczos
 * resize, torch's uint8 bicubic, pixel_values and the VAE tensor are hashed
 * whole (FNV-1a 64 of the little-endian bytes, as the generator hashes them)
 * and compared; the rows the golden keeps are compared value by value too
 * (u8 exactly; floats |got - ref| <= 1e-6, with the maximum printed), so a
 * failure says where. grid_thw, the resized sizes and the pipelines' sizes
 * exactly.
 *
 * The plain run needs no golden data: smart_resize and calculate_dimensions on hand-worked
 * sizes (Python's half-to-even rounding included), resize invariants
 * (identity, constant pictures), integer weights worked out by hand for both
 * filters applied with the libraries' rounding, the patch order, and the readers' refusals: truncated and corrupt PNG and JPEG files,
 * CMYK JPEG, 16-bit grey PNG, limits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "format/safetensors.h"
#include "image/image_read.h"
#include "image/qwen_image_proc.h"
#include "image/resample.h"
#include "testutil.h"

#ifdef CQ_HAVE_JPEG
#include <jpeglib.h>
#endif
#ifdef CQ_HAVE_PNG
#include <png.h>
#endif

#define QP_DIR CQ_SOURCE_DIR "/tests/golden/qwen_image_proc"

static uint64_t fnv1a64(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

/* ---- sizes --------------------------------------------------------------- */

static void expect_smart(int h, int w, int64_t mn, int64_t mx, int want_h, int want_w) {
    int oh = 0, ow = 0;
    assert_int_equal(cq_qwen_smart_resize(h, w, 28, mn, mx, &oh, &ow), CQ_OK);
    if (oh != want_h || ow != want_w)
        fail_msg("smart_resize(%d, %d, %lld, %lld) = %dx%d, want %dx%d", h, w, (long long)mn, (long long)mx, oh, ow,
                 want_h, want_w);
}

static void test_smart_resize(void **state) {
    (void)state;
    const int64_t mn = 56 * 56, mx = 28 * 28 * 1280;
    expect_smart(75, 100, mn, mx, 84, 112);          /* rounding up both sides */
    expect_smart(517, 333, mn, mx, 504, 336);        /* down one side, up the other */
    expect_smart(30, 40, mn, mx, 56, 84);            /* below min_pixels: ceil after scaling */
    expect_smart(517, 333, mn, 28 * 28 * 40, 196, 140); /* above max_pixels: floor after scaling */
    expect_smart(70, 280, mn, mx, 56, 280);          /* 2.5 rounds to 2 (half to even) */
    expect_smart(42, 280, mn, mx, 56, 280);          /* 1.5 rounds to 2 */
    expect_smart(896, 1184, mn, mx, 868, 1148);      /* an Edit picture: over max by rounding */
    expect_smart(10, 2000, mn, mx, 28, 812);         /* a side rounding to 0: the min branch */
    int oh = 0, ow = 0;
    tu_expect_err(cq_qwen_smart_resize(1, 201, 28, mn, mx, &oh, &ow), CQ_ERR_INVALID_ARG, "aspect ratio");
    tu_expect_err(cq_qwen_smart_resize(0, 20, 28, mn, mx, &oh, &ow), CQ_ERR_INVALID_ARG, "bad arguments");
    tu_expect_err(cq_qwen_smart_resize(20, 20, 28, mn, mx, NULL, &ow), CQ_ERR_INVALID_ARG, "no output");
}

static void test_calculate_dimensions(void **state) {
    (void)state;
    int w = 0, h = 0;
    assert_int_equal(cq_qwen_calculate_dimensions(384 * 384, 333, 517, &w, &h), CQ_OK);
    assert_int_equal(w, 320), assert_int_equal(h, 480);
    assert_int_equal(cq_qwen_calculate_dimensions(1024 * 1024, 333, 517, &w, &h), CQ_OK);
    assert_int_equal(w, 832), assert_int_equal(h, 1280);
    assert_int_equal(cq_qwen_calculate_dimensions(1024 * 1024, 100, 75, &w, &h), CQ_OK);
    assert_int_equal(w, 1184), assert_int_equal(h, 896);
    assert_int_equal(cq_qwen_calculate_dimensions(384 * 384, 100, 75, &w, &h), CQ_OK);
    assert_int_equal(w, 448), assert_int_equal(h, 320);
    assert_int_equal(cq_qwen_calculate_dimensions(1024 * 1024, 64, 64, &w, &h), CQ_OK);
    assert_int_equal(w, 1024), assert_int_equal(h, 1024);
    /* exact halves round to even: width sqrt(1600 * 4) = 80 = 2.5 * 32 -> 64; 112 = 3.5 * 32 -> 128 */
    assert_int_equal(cq_qwen_calculate_dimensions(1600, 4, 1, &w, &h), CQ_OK);
    assert_int_equal(w, 64), assert_int_equal(h, 32);
    assert_int_equal(cq_qwen_calculate_dimensions(112 * 112, 5, 5, &w, &h), CQ_OK);
    assert_int_equal(w, 128), assert_int_equal(h, 128);
    tu_expect_err(cq_qwen_calculate_dimensions(384 * 384, 1, 2000, &w, &h), CQ_ERR_INVALID_ARG, "too extreme");
    tu_expect_err(cq_qwen_calculate_dimensions(0, 10, 10, &w, &h), CQ_ERR_INVALID_ARG, "bad arguments");
}

/* ---- resize invariants --------------------------------------------------- */

static void test_resample_basics(void **state) {
    (void)state;
    enum { SW = 37, SH = 23 };
    uint8_t src[SW * SH * 3], dst[80 * 60 * 3];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 131 + (i >> 3));
    for (int f = 0; f < CQ_RESAMPLE_FILTER_COUNT; f++) {
        /* same size: a copy */
        assert_int_equal(cq_resample_u8((cq_resample_filter)f, src, SW, SH, 3, dst, SW, SH), CQ_OK);
        assert_memory_equal(src, dst, sizeof src);
        /* a constant picture stays constant, up and down, one axis or both */
        uint8_t flat[SW * SH * 3];
        memset(flat, 0, sizeof flat);
        for (int c = 0; c < SW * SH; c++) flat[c * 3] = 200, flat[c * 3 + 1] = 7, flat[c * 3 + 2] = 255;
        const int sizes[][2] = {{80, 60}, {5, 3}, {37, 60}, {80, 23}, {1, 1}, {19, 23}};
        for (size_t k = 0; k < CQ_ARRAY_LEN(sizes); k++) {
            const int dw = sizes[k][0], dh = sizes[k][1];
            assert_int_equal(cq_resample_u8((cq_resample_filter)f, flat, SW, SH, 3, dst, dw, dh), CQ_OK);
            for (int i = 0; i < dw * dh; i++) {
                if (dst[i * 3] != 200 || dst[i * 3 + 1] != 7 || dst[i * 3 + 2] != 255)
                    fail_msg("filter %d, %dx%d: pixel %d is (%d, %d, %d)", f, dw, dh, i, dst[i * 3], dst[i * 3 + 1],
                             dst[i * 3 + 2]);
            }
        }
        tu_expect_err(cq_resample_u8((cq_resample_filter)f, src, SW, SH, 3, dst, 0, 5), CQ_ERR_INVALID_ARG,
                      "outside");
        tu_expect_err(cq_resample_u8((cq_resample_filter)f, src, SW, SH, 5, dst, 4, 5), CQ_ERR_INVALID_ARG,
                      "channels");
        tu_expect_err(cq_resample_u8((cq_resample_filter)f, NULL, SW, SH, 3, dst, 4, 5), CQ_ERR_INVALID_ARG,
                      "no image");
    }
    tu_expect_err(cq_resample_u8(CQ_RESAMPLE_FILTER_COUNT, src, SW, SH, 3, dst, 4, 5), CQ_ERR_INVALID_ARG, "filter");
}

/* Integer weights worked out by hand from the formulas (scale in/out, support
 * 2 * max(scale, 1) for torch's Keys cubic a = -0.5, 3 * max(scale, 1) for
 * PIL's Lanczos; normalised, then rounded at torch's chosen precision or at
 * PIL's 22 bits), applied with the libraries' rounding and clamping. E.g.
 * torch 4 -> 2: taps at x = -0.25, 0.25, 0.75, 1.25 (times 1/scale) give
 * 0.8671875, 0.8671875, 0.2265625, -0.0703125, sum 1.890625; the largest
 * normalised weight 0.45868 fixes the precision at 16 bits. */
typedef struct hand_taps {
    cq_resample_filter filter;
    int in, out, precision;
    int first[4];
    int n[4];
    int32_t w[4][5];
} hand_taps;

static const hand_taps k_hand[] = {
    {CQ_RESAMPLE_TORCH_BICUBIC_AA, 4, 2, 16, {0, 0}, {4, 4}, {{30060, 30060, 7853, -2437}, {-2437, 7853, 30060, 30060}}},
    {CQ_RESAMPLE_TORCH_BICUBIC_AA, 2, 4, 14, {0, 0, 0, 0}, {2, 2, 2, 2},
     {{17830, -1446}, {12990, 3394}, {3394, 12990}, {-1446, 17830}}},
    {CQ_RESAMPLE_TORCH_BICUBIC_AA, 5, 3, 15, {0, 0, 1}, {4, 5, 4},
     {{19157, 14620, 0, -1008}, {-1219, 8078, 19051, 8078, -1219}, {-1008, 0, 14620, 19157}}},
    {CQ_RESAMPLE_PIL_LANCZOS, 4, 2, 22, {0, 0}, {4, 4},
     {{1946964, 1946964, 591023, -290647}, {-290647, 591023, 1946964, 1946964}}},
    {CQ_RESAMPLE_PIL_LANCZOS, 2, 4, 22, {0, 0, 0, 0}, {2, 2, 2, 2},
     {{4930311, -736007}, {3217574, 976730}, {976730, 3217574}, {-736007, 4930311}}},
};

static uint8_t hand_apply(const hand_taps *t, int i, const uint8_t *v, size_t stride) {
    int64_t acc = (int64_t)1 << (t->precision - 1);
    for (int j = 0; j < t->n[i]; j++) acc += (int64_t)v[(size_t)(t->first[i] + j) * stride] * t->w[i][j];
    const int64_t r = acc >> t->precision; /* floor */
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

static void test_resample_weights(void **state) {
    (void)state;
    const uint8_t rows[3][5] = {{10, 200, 30, 250, 0}, {0, 255, 0, 255, 255}, {255, 0, 255, 3, 128}};
    for (size_t k = 0; k < CQ_ARRAY_LEN(k_hand); k++) {
        const hand_taps *t = &k_hand[k];
        for (size_t r = 0; r < 3; r++) {
            uint8_t got[8], want[8];
            /* along a row (horizontal pass) and along a column (vertical pass) */
            assert_int_equal(cq_resample_u8(t->filter, rows[r], t->in, 1, 1, got, t->out, 1), CQ_OK);
            for (int i = 0; i < t->out; i++) want[i] = hand_apply(t, i, rows[r], 1);
            assert_memory_equal(got, want, (size_t)t->out);
            assert_int_equal(cq_resample_u8(t->filter, rows[r], 1, t->in, 1, got, 1, t->out), CQ_OK);
            assert_memory_equal(got, want, (size_t)t->out);
        }
        /* both axes: horizontal first, rounded to 8 bits, then vertical */
        uint8_t img[5 * 5], mid[5 * 4], got[4 * 4], want[4 * 4];
        for (int i = 0; i < t->in * t->in; i++) img[i] = (uint8_t)(i * 53 + 7);
        for (int y = 0; y < t->in; y++)
            for (int x = 0; x < t->out; x++) mid[y * t->out + x] = hand_apply(t, x, img + y * t->in, 1);
        for (int y = 0; y < t->out; y++)
            for (int x = 0; x < t->out; x++) want[y * t->out + x] = hand_apply(t, y, mid + x, (size_t)t->out);
        assert_int_equal(cq_resample_u8(t->filter, img, t->in, t->in, 1, got, t->out, t->out), CQ_OK);
        assert_memory_equal(got, want, (size_t)(t->out * t->out));
    }
}

/* The patch order on a picture whose every pixel names its place. */
static void test_patch_order(void **state) {
    (void)state;
    enum { W = 56, H = 84 }; /* kept by smart_resize: 56 * 84 = 4704 >= 3136 */
    uint8_t *rgb = malloc(W * H * 3);
    assert_non_null(rgb);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) rgb[(y * W + x) * 3 + c] = (uint8_t)((y * 3 + x * 5 + c * 101) & 255);
    cq_qwen_vl_proc p;
    cq_qwen_vl_proc_defaults(&p);
    cq_qwen_vl_image vl;
    assert_int_equal(cq_qwen_vl_preprocess(&p, rgb, W, H, &vl), CQ_OK);
    assert_int_equal(vl.resized_w, W), assert_int_equal(vl.resized_h, H);
    assert_memory_equal(vl.resized, rgb, W * H * 3);
    assert_int_equal(vl.grid_thw[0], 1), assert_int_equal(vl.grid_thw[1], 6), assert_int_equal(vl.grid_thw[2], 4);
    assert_int_equal(vl.n_patches, 24), assert_int_equal(vl.patch_dim, 1176);
    const double mean[3] = {0.48145466, 0.4578275, 0.40821073}, sd[3] = {0.26862954, 0.26130258, 0.27577711};
    float m[3], s[3];
    for (int c = 0; c < 3; c++) {
        assert_true(p.mean[c] == (float)mean[c] && p.std[c] == (float)sd[c]);
        m[c] = (float)mean[c] * 255.0f;
        s[c] = (float)sd[c] * 255.0f;
    }
    /* reshape (gh/2, 2, 14, gw/2, 2, 14), rows (bh, bw, mh, mw), columns (c, t, py, px) */
    for (int r = 0; r < 24; r++) {
        const int bh = r / 8, bw = (r / 4) % 2, mh = (r / 2) % 2, mw = r % 2;
        for (int col = 0; col < 1176; col++) {
            const int c = col / 392, py = (col % 196) / 14, px = col % 14;
            const int y = (bh * 2 + mh) * 14 + py, x = (bw * 2 + mw) * 14 + px;
            const float want = ((float)rgb[(y * W + x) * 3 + c] - m[c]) / s[c];
            if (vl.pixel_values[r * 1176 + col] != want)
                fail_msg("row %d col %d: %.9g, want %.9g", r, col, vl.pixel_values[r * 1176 + col], want);
        }
    }
    cq_qwen_vl_image_free(&vl);
    free(rgb);
}

/* ---- readers ------------------------------------------------------------- */

#ifdef CQ_HAVE_JPEG
static uint8_t *make_jpeg(int w, int h, int comps, J_COLOR_SPACE cs, size_t *len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buf, &size);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    unsigned char *row = malloc((size_t)w * (size_t)comps);
    while (c.next_scanline < c.image_height) {
        for (int i = 0; i < w * comps; i++) row[i] = (unsigned char)(i * 9 + c.next_scanline * 17);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *len = size;
    return buf;
}

static void test_jpeg_errors(void **state) {
    (void)state;
    size_t len = 0;
    uint8_t *ok = make_jpeg(40, 24, 3, JCS_RGB, &len);
    cq_image8 img;
    assert_int_equal(cq_image_read_rgb_mem(ok, len, &img), CQ_OK);
    assert_int_equal(img.width, 40), assert_int_equal(img.height, 24), assert_int_equal(img.channels, 3);
    cq_image8_free(&img);
    /* every truncation fails cleanly (the end-of-image marker included) */
    for (size_t cut = 0; cut + 2 <= len; cut += (cut < 64 ? 1 : 23)) {
        const cq_status s = cq_image_read_rgb_mem(ok, cut, &img);
        if (s == CQ_OK) fail_msg("a JPEG cut to %zu of %zu bytes was accepted", cut, len);
        assert_true(s == CQ_ERR_MAGIC || s == CQ_ERR_PARSE);
        assert_null(img.pixels);
    }
    tu_expect_err(cq_jpeg_read_mem(ok, len / 2, &img), CQ_ERR_PARSE, "truncated");
    /* a corrupt frame header: 9-bit samples */
    uint8_t *bad = malloc(len);
    memcpy(bad, ok, len);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < len && !sof; i++)
        if (bad[i] == 0xFF && bad[i + 1] == 0xC0) sof = i;
    assert_true(sof > 0);
    bad[sof + 4] = 9;
    tu_expect_err(cq_jpeg_read_mem(bad, len, &img), CQ_ERR_PARSE, "jpeg: ");
    assert_null(img.pixels);
    /* a huge declared size (SOF0 height/width) is refused before decoding */
    memcpy(bad, ok, len);
    bad[sof + 5] = 0x7F, bad[sof + 6] = 0xFF; /* height 32767 */
    bad[sof + 7] = 0x7F, bad[sof + 8] = 0xFF; /* width 32767 */
    tu_expect_err(cq_jpeg_read_mem(bad, len, &img), CQ_ERR_BOUNDS, "outside the limits");
    free(bad);
    free(ok);
    /* CMYK is refused with a message */
    uint8_t *cmyk = make_jpeg(16, 8, 4, JCS_CMYK, &len);
    tu_expect_err(cq_image_read_rgb_mem(cmyk, len, &img), CQ_ERR_UNSUPPORTED, "CMYK");
    free(cmyk);
    /* grey is replicated */
    uint8_t *grey = make_jpeg(9, 5, 1, JCS_GRAYSCALE, &len);
    assert_int_equal(cq_image_read_rgb_mem(grey, len, &img), CQ_OK);
    for (int i = 0; i < 45; i++) {
        assert_int_equal(img.pixels[i * 3], img.pixels[i * 3 + 1]);
        assert_int_equal(img.pixels[i * 3], img.pixels[i * 3 + 2]);
    }
    cq_image8_free(&img);
    free(grey);
}
#endif

#ifdef CQ_HAVE_PNG
static void test_png_input(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("qwen_image_proc_png");
    assert_non_null(dir);
    /* RGBA: the alpha is dropped, not composited */
    uint8_t px[6 * 4 * 4];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 29 + 3);
    const char *path = tu_path(dir, "rgba.png");
    assert_int_equal(cq_png_write(path, px, 6, 4, 4, NULL, 0), CQ_OK);
    cq_image8 img;
    assert_int_equal(cq_image_read_rgb(path, &img), CQ_OK);
    assert_int_equal(img.channels, 3);
    for (int i = 0; i < 24; i++)
        for (int c = 0; c < 3; c++) assert_int_equal(img.pixels[i * 3 + c], px[i * 4 + c]);
    cq_image8_free(&img);
    size_t len = 0;
    uint8_t *data = tu_read_file(path, &len);
    assert_non_null(data);
    for (size_t cut = 0; cut < len; cut++) {
        const cq_status s = cq_image_read_rgb_mem(data, cut, &img);
        assert_true(s == CQ_ERR_MAGIC || s == CQ_ERR_PARSE);
        assert_null(img.pixels);
    }
    data[len / 2] ^= 0x40;
    assert_int_not_equal(cq_image_read_rgb_mem(data, len, &img), CQ_OK);
    assert_null(img.pixels);
    free(data);
    tu_expect_err(cq_image_read_rgb_mem((const uint8_t *)"GIF89a....", 10, &img), CQ_ERR_MAGIC, "neither");
    tu_expect_err(cq_image_read_rgb(tu_path(dir, "absent.png"), &img), CQ_ERR_MISSING, "absent.png");
    /* 16-bit grey is refused (PIL would clip it to near white) */
    FILE *f = fopen(tu_path(dir, "grey16.png"), "wb");
    assert_non_null(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, 3, 2, 16, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    uint8_t row[6] = {1, 2, 3, 4, 5, 6};
    png_write_row(png, row);
    png_write_row(png, row);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    tu_expect_err(cq_image_read_rgb(tu_path(dir, "grey16.png"), &img), CQ_ERR_UNSUPPORTED, "16-bit");
}
#endif

/* ---- golden -------------------------------------------------------------- */

typedef struct golden {
    cJSON *index;
    cq_st *st;
    double worst_f32; /* largest |got - ref| over the kept float rows */
    int hashes, hash_misses;
} golden;

static const cJSON *jget(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fail_msg("index.json: '%s' missing", k);
    return v;
}

static int jint(const cJSON *o, const char *k) { return (int)jget(o, k)->valuedouble; }

/* Compare one output: its whole-tensor hash and the kept rows. `got` is laid
 * out as the golden shape says (the caller converts layouts first). */
static void check_output(golden *g, const char *case_name, const cJSON *entry, const char *what, const void *got,
                         size_t elem) {
    const cJSON *o = jget(entry, what);
    const cJSON *shape = jget(o, "shape");
    const int ndim = cJSON_GetArraySize(shape);
    size_t dims[4] = {1, 1, 1, 1}, total = 1;
    for (int i = 0; i < ndim; i++) total *= dims[i] = (size_t)cJSON_GetArrayItem(shape, i)->valuedouble;
    const char *want = jget(o, "fnv1a64")->valuestring;
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64(got, total * elem));
    g->hashes++;
    const bool hash_ok = strcmp(hash, want) == 0;
    if (!hash_ok) g->hash_misses++;
    /* kept rows */
    char name[96];
    snprintf(name, sizeof name, "%s.%s.rows", case_name, what);
    const cq_st_tensor *rows = cq_st_find(g->st, name);
    snprintf(name, sizeof name, "%s.%s.sample", case_name, what);
    const cq_st_tensor *sample = cq_st_find(g->st, name);
    if (!rows || !sample || rows->dtype != CQ_ST_I64) fail_msg("%s.%s: rows/sample missing", case_name, what);
    const int rdim = jint(o, "rows_dim");
    const size_t inner = rdim == 0 ? total / dims[0] : dims[2] * (ndim > 3 ? dims[3] : 1);
    const size_t outer = rdim == 0 ? 1 : dims[0];
    const size_t nrows = (size_t)rows->nelem, dimlen = dims[rdim];
    if (sample->nbytes != outer * nrows * inner * elem) fail_msg("%s.%s: sample size", case_name, what);
    double worst = 0.0;
    size_t bad = 0;
    for (size_t o2 = 0; o2 < outer; o2++)
        for (size_t r = 0; r < nrows; r++) {
            int64_t row = 0;
            memcpy(&row, rows->data + r * 8, 8);
            if (row < 0 || (size_t)row >= dimlen) fail_msg("%s.%s: row %lld", case_name, what, (long long)row);
            const size_t gbase = (o2 * dimlen + (size_t)row) * inner, sbase = (o2 * nrows + r) * inner;
            for (size_t i = 0; i < inner; i++) {
                if (elem == 1) {
                    const uint8_t a = ((const uint8_t *)got)[gbase + i], b = sample->data[sbase + i];
                    if (a != b) bad++;
                    if (fabs((double)a - b) > worst) worst = fabs((double)a - b);
                } else {
                    float a = ((const float *)got)[gbase + i], b;
                    memcpy(&b, sample->data + (sbase + i) * 4, 4);
                    const double d = fabs((double)a - (double)b);
                    if (!(d <= 1e-6)) bad++;
                    if (d > worst || d != d) worst = d;
                }
            }
        }
    if (elem == 4 && worst > g->worst_f32) g->worst_f32 = worst;
    print_message("  %-12s %-8s hash %s  kept rows: max |diff| %.3g, %zu off\n", case_name, what,
                  hash_ok ? "equal" : "DIFFERS", worst, bad);
    if (!hash_ok || bad) fail_msg("%s.%s: hash %s (want %s), %zu kept values off (max %.3g)", case_name, what, hash,
                                  want, bad, worst);
}

/* HWC -> CHW (the processor's resized tensor is planar). */
static uint8_t *to_planar(const uint8_t *hwc, int w, int h) {
    uint8_t *p = malloc((size_t)w * (size_t)h * 3);
    assert_non_null(p);
    const size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < 3; c++) p[c * n + i] = hwc[i * 3 + c];
    return p;
}

static void check_processor(golden *g, const char *name, const cJSON *entry, const uint8_t *rgb, int w, int h) {
    const cJSON *pj = jget(entry, "proc");
    cq_qwen_vl_proc p;
    cq_qwen_vl_proc_defaults(&p);
    p.min_pixels = (int64_t)jget(pj, "min_pixels")->valuedouble;
    p.max_pixels = (int64_t)jget(pj, "max_pixels")->valuedouble;
    cq_qwen_vl_image vl;
    assert_int_equal(cq_qwen_vl_preprocess(&p, rgb, w, h, &vl), CQ_OK);
    const cJSON *rhw = jget(pj, "resized_hw"), *thw = jget(pj, "grid_thw");
    assert_int_equal(vl.resized_h, cJSON_GetArrayItem(rhw, 0)->valueint);
    assert_int_equal(vl.resized_w, cJSON_GetArrayItem(rhw, 1)->valueint);
    for (int i = 0; i < 3; i++) assert_int_equal(vl.grid_thw[i], cJSON_GetArrayItem(thw, i)->valueint);
    uint8_t *planar = to_planar(vl.resized, vl.resized_w, vl.resized_h);
    check_output(g, name, entry, "resized", planar, 1);
    free(planar);
    check_output(g, name, entry, "pv", vl.pixel_values, 4);
    cq_qwen_vl_image_free(&vl);
}

static void run_case(golden *g, const cJSON *entry) {
    const char *name = jget(entry, "name")->valuestring, *kind = jget(entry, "kind")->valuestring;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
    if (err) fail_msg("%s: the generator failed on this case: %s", name, cJSON_GetStringValue(err));
    const char *file = jget(entry, "file")->valuestring;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", QP_DIR, file);
    cq_image8 img;
    const cq_status s = cq_image_read_rgb(path, &img);
    if (s == CQ_ERR_UNSUPPORTED && !cq_jpeg_available()) {
        print_message("  %-12s skipped: %s\n", name, cq_last_error());
        return;
    }
    if (s != CQ_OK) fail_msg("%s: %s", name, cq_last_error());
    const cJSON *wh = jget(entry, "size_wh");
    assert_int_equal(img.width, cJSON_GetArrayItem(wh, 0)->valueint);
    assert_int_equal(img.height, cJSON_GetArrayItem(wh, 1)->valueint);
    check_output(g, name, entry, "rgb", img.pixels, 1);
    if (strcmp(kind, "proc") == 0) {
        check_processor(g, name, entry, img.pixels, img.width, img.height);
    } else if (strcmp(kind, "editplus") == 0 || strcmp(kind, "edit") == 0) {
        const bool plus = kind[4] == 'p';
        cq_qwen_edit_image e;
        assert_int_equal(cq_qwen_edit_prepare(plus ? CQ_QWEN_EDIT_PLUS : CQ_QWEN_EDIT, img.pixels, img.width,
                                              img.height, &e),
                         CQ_OK);
        const cJSON *vwh = jget(entry, "vae_wh");
        assert_int_equal(e.vae_w, cJSON_GetArrayItem(vwh, 0)->valueint);
        assert_int_equal(e.vae_h, cJSON_GetArrayItem(vwh, 1)->valueint);
        if (plus) {
            const cJSON *cwh = jget(entry, "cond_wh");
            assert_int_equal(e.vl_w, cJSON_GetArrayItem(cwh, 0)->valueint);
            assert_int_equal(e.vl_h, cJSON_GetArrayItem(cwh, 1)->valueint);
            check_output(g, name, entry, "cond", e.vl_rgb, 1);
            uint8_t *vae_u8 = malloc((size_t)e.vae_w * (size_t)e.vae_h * 3);
            assert_non_null(vae_u8);
            assert_int_equal(cq_resample_u8(CQ_RESAMPLE_PIL_LANCZOS, img.pixels, img.width, img.height, 3, vae_u8,
                                            e.vae_w, e.vae_h),
                             CQ_OK);
            check_output(g, name, entry, "vae_u8", vae_u8, 1);
            free(vae_u8);
        } else {
            assert_int_equal(e.vl_w, e.vae_w), assert_int_equal(e.vl_h, e.vae_h);
            check_output(g, name, entry, "vae_u8", e.vl_rgb, 1);
        }
        check_output(g, name, entry, "vae", e.vae, 4);
        check_processor(g, name, entry, e.vl_rgb, e.vl_w, e.vl_h);
        cq_qwen_edit_image_free(&e);
    }
    cq_image8_free(&img);
}

static void test_golden(void **state) {
    (void)state;
    size_t len = 0;
    char *text = (char *)tu_read_file(QP_DIR "/index.json", &len);
    if (!text) fail_msg("cannot read %s/index.json", QP_DIR);
    golden g = {0};
    g.index = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(g.index);
    assert_int_equal(cq_st_open(QP_DIR "/data.safetensors", &g.st), CQ_OK);
    const cJSON *cases = jget(g.index, "cases");
    const cJSON *c = NULL;
    int n = 0;
    cJSON_ArrayForEach(c, cases) {
        run_case(&g, c);
        n++;
    }
    print_message("  %d cases, %d whole-output hashes (%d differ), largest float difference in kept rows %.3g\n",
                  n, g.hashes, g.hash_misses, g.worst_f32);
    assert_true(n >= 10);
    cq_st_close(g.st);
    cJSON_Delete(g.index);
}

int main(int argc, char **argv) {
    /* `test_qwen_image_proc --golden`: the comparison with the reference
     * (its own ctest entry, exit 77 = skipped while the folder is absent) */
    if (argc > 1 && strcmp(argv[1], "--golden") == 0) {
        FILE *f = fopen(QP_DIR "/index.json", "rb");
        if (!f) {
            fprintf(stderr, "golden data absent (%s): run tools/golden_qwen_image_proc.py; skipped\n", QP_DIR);
            return 77;
        }
        fclose(f);
        const struct CMUnitTest golden_tests[] = {cmocka_unit_test(test_golden)};
        return cmocka_run_group_tests(golden_tests, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smart_resize),     cmocka_unit_test(test_calculate_dimensions),
        cmocka_unit_test(test_resample_basics),  cmocka_unit_test(test_resample_weights),
        cmocka_unit_test(test_patch_order),
#ifdef CQ_HAVE_JPEG
        cmocka_unit_test(test_jpeg_errors),
#endif
#ifdef CQ_HAVE_PNG
        cmocka_unit_test(test_png_input),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
