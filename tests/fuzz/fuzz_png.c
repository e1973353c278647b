/* fuzz_png.c — the PNG reader on arbitrary bytes: it must return an image or
 * an error, never crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "pipelines/png_write.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cq_image8 img;
    for (int force = 0; force < 2; force++) {
        if (cq_png_read_mem(data, size, force != 0, &img) == CQ_OK) {
            /* touch every pixel so a short buffer would show */
            const size_t n = (size_t)img.width * (size_t)img.height * (size_t)img.channels;
            for (size_t i = 0; i < n; i++) sink += img.pixels[i];
            for (size_t t = 0; t < img.n_texts; t++) sink += (unsigned)img.texts[t].value[0];
            cq_image8_free(&img);
        }
    }
    return 0;
}
