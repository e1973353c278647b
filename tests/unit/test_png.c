/* test_png.c — decoder floats to pixels as diffusers rounds them, alpha over
 * white as PIL's paste does it, PNG write/read round trips with text chunks,
 * the atomic write, and the reader's rejection of damaged files. Goldens from
 * tests/golden/image (tools/golden_schedule_noise.py) when present. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "pipelines/png_write.h"
#include "testutil.h"

#ifdef CQ_HAVE_PNG
#include <png.h>
#endif

#define IMAGE_DIR CQ_SOURCE_DIR "/tests/golden/image"

static void test_quantize(void **state) {
    (void)state;
    assert_int_equal(cq_png_quantize(-1.0f), 0);
    assert_int_equal(cq_png_quantize(1.0f), 255);
    assert_int_equal(cq_png_quantize(0.0f), 128); /* 127.5 rounds half to even */
    assert_int_equal(cq_png_quantize(-5.0f), 0);
    assert_int_equal(cq_png_quantize(5.0f), 255);
    assert_int_equal(cq_png_quantize_unit(0.5f / 255.0f), 0);  /* 0.5 -> even 0 */
    assert_int_equal(cq_png_quantize_unit(1.5f / 255.0f), 2);  /* 1.5 -> even 2 */
    assert_int_equal(cq_png_quantize_unit(NAN), 0);
    /* every level k is reached from the x that decodes to k/255 */
    for (int k = 0; k < 256; k++) assert_int_equal(cq_png_quantize((float)(2.0 * k / 255.0 - 1.0)), k);
}

static void test_over_white(void **state) {
    (void)state;
    for (int a = 0; a < 256; a++) {
        for (int c = 0; c < 256; c++) {
            /* round((c*a + 255*(255-a)) / 255), halves up, in exact integers */
            const int v = c * a + 255 * (255 - a);
            const int want = (2 * v + 255) / 510;
            assert_int_equal(cq_png_over_white((uint8_t)c, (uint8_t)a), want);
        }
    }
    assert_int_equal(cq_png_over_white(0, 0), 255);
    assert_int_equal(cq_png_over_white(17, 255), 17);
}

static void test_golden_image(void **state) {
    (void)state;
    FILE *d = fopen(IMAGE_DIR, "rb");
    if (!d) {
        print_message("golden image data absent (%s): run tools/golden_schedule_noise.py; skipped\n", IMAGE_DIR);
        skip();
    }
    fclose(d);
    size_t len = 0;
    char *text = (char *)tu_read_file(IMAGE_DIR "/image.json", &len);
    assert_non_null(text);
    cJSON *root = cJSON_ParseWithLength(text, len);
    assert_non_null(root);
    const cJSON *q = cJSON_GetObjectItem(root, "quantize");
    const cJSON *xs = cJSON_GetObjectItem(q, "x_f32"), *us = cJSON_GetObjectItem(q, "u8");
    assert_int_equal(cJSON_GetArraySize(xs), cJSON_GetArraySize(us));
    int n = 0;
    for (const cJSON *x = xs->child, *u = us->child; x && u; x = x->next, u = u->next, n++) {
        const uint32_t bits = (uint32_t)x->valuedouble;
        float v;
        memcpy(&v, &bits, 4);
        if (cq_png_quantize(v) != (uint8_t)u->valueint)
            fail_msg("golden quantize [%d]: x = %.9g gives %d, diffusers %d", n, v, cq_png_quantize(v), u->valueint);
    }
    size_t nw = 0;
    uint8_t *ow = tu_read_file(IMAGE_DIR "/over_white.bin", &nw);
    assert_non_null(ow);
    assert_int_equal(nw, 65536);
    for (int a = 0; a < 256; a++)
        for (int c = 0; c < 256; c++)
            if (cq_png_over_white((uint8_t)c, (uint8_t)a) != ow[a * 256 + c])
                fail_msg("golden over_white c=%d a=%d: %d, PIL %d", c, a, cq_png_over_white((uint8_t)c, (uint8_t)a),
                         ow[a * 256 + c]);
    print_message("golden image: %d quantized values and 65536 compositing pairs match\n", n);
    free(ow);
    cJSON_Delete(root);
    free(text);
}

static void test_from_planar(void **state) {
    (void)state;
    /* 2x1 image, 4 planes: pixel 0 opaque red, pixel 1 transparent black */
    const float planes[8] = {1.0f, -1.0f, -1.0f, -1.0f, -1.0f, -1.0f, 1.0f, -1.0f};
    cq_image8 img;
    assert_int_equal(cq_png_from_planar(planes, 4, 2, 1, 3, &img), CQ_OK);
    const uint8_t want_rgb[6] = {255, 0, 0, 255, 255, 255};
    assert_memory_equal(img.pixels, want_rgb, 6);
    cq_image8_free(&img);
    assert_int_equal(cq_png_from_planar(planes, 4, 2, 1, 4, &img), CQ_OK);
    const uint8_t want_rgba[8] = {255, 0, 0, 255, 0, 0, 0, 0};
    assert_memory_equal(img.pixels, want_rgba, 8);
    cq_image8_free(&img);
    assert_int_equal(cq_png_from_planar(planes, 3, 2, 1, 4, &img), CQ_OK); /* no alpha plane: opaque */
    assert_int_equal(img.pixels[3], 255);
    assert_int_equal(img.pixels[7], 255);
    cq_image8_free(&img);
    float bad[8];
    memcpy(bad, planes, sizeof bad);
    bad[5] = NAN;
    assert_int_equal(cq_png_from_planar(bad, 4, 2, 1, 3, &img), CQ_ERR_NUMERIC);
    assert_null(img.pixels);
    assert_int_equal(cq_png_from_planar(planes, 2, 2, 1, 3, &img), CQ_ERR_INVALID_ARG);
    cq_image8_free(NULL);
}

#ifdef CQ_HAVE_PNG

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void test_round_trip(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("png_round_trip");
    assert_non_null(dir);
    const char *path = tu_path(dir, "out.png");
    const int w = 37, h = 23;
    uint8_t *px = malloc((size_t)w * h * 4);
    assert_non_null(px);
    tu_rng r;
    tu_rng_seed(&r, 3);
    for (int i = 0; i < w * h * 4; i++) px[i] = (uint8_t)tu_rng_u64(&r);
    const cq_png_text texts[] = {
        {"prompt", "a red circle on a blue background"}, {"seed", "42"},  {"steps", "8"},
        {"size", "1024x1024"}, {"guidance", "4"}, {"model", "qwen_image21"},
        {"negative", "\xe4\xb8\x80\xe5\x8f\xaa\xe7\x8c\xab (a cat)"}, /* UTF-8: iTXt */
    };
    for (int ch = 3; ch <= 4; ch++) {
        assert_int_equal(cq_png_write(path, px, w, h, ch, texts, CQ_ARRAY_LEN(texts)), CQ_OK);
        assert_int_equal(count_entries(dir), 1); /* the temporary file is gone */
        cq_image8 img;
        assert_int_equal(cq_png_read(path, false, &img), CQ_OK);
        assert_int_equal(img.width, w);
        assert_int_equal(img.height, h);
        assert_int_equal(img.channels, ch);
        if (ch == 4) {
            assert_memory_equal(img.pixels, px, (size_t)w * h * 4);
        } else {
            for (int i = 0; i < w * h; i++) assert_memory_equal(img.pixels + i * 3, px + i * 3, 3);
        }
        for (size_t t = 0; t < CQ_ARRAY_LEN(texts); t++) {
            const char *v = cq_image8_text(&img, texts[t].key);
            assert_non_null(v);
            assert_string_equal(v, texts[t].value);
        }
        assert_null(cq_image8_text(&img, "absent"));
        cq_image8_free(&img);
        /* an RGB file read as RGBA gets opaque alpha */
        if (ch == 3) {
            assert_int_equal(cq_png_read(path, true, &img), CQ_OK);
            assert_int_equal(img.channels, 4);
            assert_int_equal(img.pixels[3], 255);
            assert_memory_equal(img.pixels, px, 3);
            cq_image8_free(&img);
        }
    }
    free(px);
}

static void test_write_errors(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("png_write_errors");
    assert_non_null(dir);
    const uint8_t px[12] = {0};
    const cq_png_text badkey[] = {{" lead", "x"}};
    assert_int_equal(cq_png_write(tu_path(dir, "a.png"), px, 2, 2, 3, badkey, 1), CQ_ERR_INVALID_ARG);
    const cq_png_text badutf[] = {{"prompt", "\xff\xfe"}};
    assert_int_equal(cq_png_write(tu_path(dir, "a.png"), px, 2, 2, 3, badutf, 1), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_png_write(tu_path(dir, "a.png"), px, 2, 2, 2, NULL, 0), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_png_write(tu_path(dir, "a.png"), px, 0, 2, 3, NULL, 0), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_png_write(tu_path(dir, "no/such/dir/a.png"), px, 2, 2, 3, NULL, 0), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "does not exist"));
    assert_int_equal(count_entries(dir), 0);
}

static uint32_t crc32_bytes(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

static void test_read_errors(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("png_read_errors");
    assert_non_null(dir);
    const char *path = tu_path(dir, "ok.png");
    uint8_t px[64 * 64 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 7);
    assert_int_equal(cq_png_write(path, px, 64, 64, 3, NULL, 0), CQ_OK);
    size_t len = 0;
    uint8_t *data = tu_read_file(path, &len);
    assert_non_null(data);
    cq_image8 img;
    assert_int_equal(cq_png_read_mem(data, len, false, &img), CQ_OK);
    cq_image8_free(&img);
    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 37)) {
        const cq_status s = cq_png_read_mem(data, cut, false, &img);
        assert_true(s == CQ_ERR_MAGIC || s == CQ_ERR_PARSE);
        assert_null(img.pixels);
    }
    /* a flipped byte inside the image data breaks its checksum */
    uint8_t *bad = malloc(len);
    assert_non_null(bad);
    memcpy(bad, data, len);
    bad[len / 2] ^= 0x55;
    assert_int_equal(cq_png_read_mem(bad, len, false, &img), CQ_ERR_PARSE);
    memcpy(bad, data, len);
    bad[0] = 'X';
    assert_int_equal(cq_png_read_mem(bad, len, false, &img), CQ_ERR_MAGIC);
    /* a header claiming a huge image is refused by the limits (CRC redone) */
    memcpy(bad, data, len);
    bad[16] = 0x7f; /* width = 0x7f000040 */
    const uint32_t crc = crc32_bytes(bad + 12, 17);
    bad[29] = (uint8_t)(crc >> 24), bad[30] = (uint8_t)(crc >> 16), bad[31] = (uint8_t)(crc >> 8), bad[32] = (uint8_t)crc;
    assert_int_equal(cq_png_read_mem(bad, len, false, &img), CQ_ERR_PARSE);
    /* a chunk claiming more bytes than the file has is refused before libpng
     * would allocate them */
    memcpy(bad, data, len);
    bad[33] = 0x31;
    assert_int_equal(cq_png_read_mem(bad, len, false, &img), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "claims"));
    assert_int_equal(cq_png_read(tu_path(dir, "missing.png"), false, &img), CQ_ERR_IO);
    free(bad);
    free(data);
}

/* Gray and 16-bit files, written with libpng directly, come back as RGB(A). */
static void write_raw_png(const char *path, int w, int h, int depth, int ctype, const uint8_t *rows_data,
                          size_t stride) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    assert_true(png && info);
    if (setjmp(png_jmpbuf(png))) fail_msg("libpng failed writing the test file");
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, ctype, PNG_INTERLACE_ADAM7,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int pass = 0; pass < png_set_interlace_handling(png); pass++)
        for (int y = 0; y < h; y++) png_write_row(png, rows_data + (size_t)y * stride);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

static void test_read_conversions(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("png_conversions");
    assert_non_null(dir);
    uint8_t gray[5 * 3];
    for (int i = 0; i < 15; i++) gray[i] = (uint8_t)(i * 17);
    write_raw_png(tu_path(dir, "gray.png"), 5, 3, 8, PNG_COLOR_TYPE_GRAY, gray, 5);
    cq_image8 img;
    assert_int_equal(cq_png_read(tu_path(dir, "gray.png"), false, &img), CQ_OK);
    assert_int_equal(img.channels, 3);
    for (int i = 0; i < 15; i++)
        for (int c = 0; c < 3; c++) assert_int_equal(img.pixels[i * 3 + c], gray[i]);
    cq_image8_free(&img);

    uint8_t rgba16[4 * 2 * 8]; /* 4x2 pixels, 16-bit big-endian samples */
    for (int i = 0; i < 4 * 2 * 4; i++) rgba16[2 * i] = (uint8_t)(i * 8), rgba16[2 * i + 1] = 0x11;
    write_raw_png(tu_path(dir, "rgba16.png"), 4, 2, 16, PNG_COLOR_TYPE_RGB_ALPHA, rgba16, 4 * 8);
    assert_int_equal(cq_png_read(tu_path(dir, "rgba16.png"), false, &img), CQ_OK);
    assert_int_equal(img.channels, 4);
    for (int i = 0; i < 4 * 2 * 4; i++) assert_int_equal(img.pixels[i], (uint8_t)(i * 8)); /* high bytes */
    cq_image8_free(&img);
}

#endif /* CQ_HAVE_PNG */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize),   cmocka_unit_test(test_over_white),   cmocka_unit_test(test_golden_image),
        cmocka_unit_test(test_from_planar),
#ifdef CQ_HAVE_PNG
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_write_errors), cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_read_conversions),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
