/* fuzz_jpeg.c — the picture input of the edit pipelines on arbitrary bytes:
 * the JPEG reader, the PNG-or-JPEG RGB and RGBA readers, and for a small
 * decoded picture the Qwen2-VL processor, the edit pipelines' resizes and
 * Qwen-Image-2.1's condition-picture preparation (premultiplied RGBA
 * Lanczos, both RGB rules). Each must return a result or an error, never
 * crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "image/image_read.h"
#include "image/qwen_image_proc.h"

static volatile unsigned sink;

static void touch(const cq_image8 *img) {
    const size_t n = (size_t)img->width * (size_t)img->height * (size_t)img->channels;
    for (size_t i = 0; i < n; i++) sink += img->pixels[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cq_image8 img;
    if (cq_jpeg_read_mem(data, size, &img) == CQ_OK) {
        touch(&img);
        cq_image8_free(&img);
    }
    if (cq_image_read_rgba_mem(data, size, &img) == CQ_OK) {
        touch(&img);
        if (img.channels == 4 && (uint64_t)img.width * (uint64_t)img.height <= 4096) {
            cq_qi21_picture pic;
            if (cq_qi21_picture_prepare(img.pixels, img.width, img.height, 64.0 * 64.0, &pic) == CQ_OK) {
                uint8_t rgb[3 * 64];
                const size_t n = (size_t)pic.w * (size_t)pic.h < 64 ? (size_t)pic.w * (size_t)pic.h : 64;
                for (int rule = 0; rule < CQ_RGBA_TO_RGB_COUNT; rule++) {
                    cq_rgba_to_rgb_pixels(pic.rgba, n, (cq_rgba_to_rgb)rule, rgb);
                    sink += rgb[0];
                }
                sink += pic.vae[0] > 0.0f;
                cq_qi21_picture_free(&pic);
            }
        }
        cq_image8_free(&img);
    }
    if (cq_image_read_rgb_mem(data, size, &img) != CQ_OK) return 0;
    touch(&img);
    if (img.channels == 3 && (uint64_t)img.width * (uint64_t)img.height <= 4096) {
        /* small bounds keep an execution short whatever the aspect ratio */
        cq_qwen_vl_proc p;
        cq_qwen_vl_proc_defaults(&p);
        p.max_pixels = 28 * 28 * 16;
        cq_qwen_vl_image vl;
        if (cq_qwen_vl_preprocess(&p, img.pixels, img.width, img.height, &vl) == CQ_OK) {
            for (int64_t i = 0; i < vl.n_patches * vl.patch_dim; i += 97) sink += vl.pixel_values[i] > 0.0f;
            cq_qwen_vl_image_free(&vl);
        }
        float *vae = NULL;
        int vw = 0, vh = 0;
        if (cq_qwen_vae_preprocess(img.pixels, img.width, img.height, 64, 48, &vae, &vw, &vh) == CQ_OK) {
            sink += vae[0] > 0.0f;
            cq_free(vae);
        }
    }
    cq_image8_free(&img);
    return 0;
}
