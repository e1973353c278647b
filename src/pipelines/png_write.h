/*
 * png_write.h — the picture's last mile: decoder floats to 8-bit pixels the
 * way diffusers does it, alpha composited over white, PNG files (libpng)
 * with text chunks, written atomically; and a validating PNG reader for
 * tests and condition images.
 *
 * Pixel values (diffusers VaeImageProcessor.postprocess, output "pil"/"np"):
 *   y = clamp(x * 0.5 + 0.5, 0, 1)     float32, two rounded operations
 *   p = round_half_even(y * 255)        float32 product, numpy's round
 * so cq_png_quantize(-1) = 0, (0) = 128 (127.5 rounds to even), (1) = 255.
 * NaN has no pixel value: the converters report CQ_ERR_NUMERIC.
 *
 * Alpha over white, on the 8-bit values (what PIL's
 * white.paste(img, mask=img.getchannel("A")) gives, and how the reference
 * flattens RGBA condition images):
 *   out = div255(c * a + 255 * (255 - a)),  div255(v) = floor(v / 255 + 1/2)
 */
#ifndef CQ_PIPELINES_PNG_WRITE_H
#define CQ_PIPELINES_PNG_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

/* Largest side and pixel count the reader accepts. */
#define CQ_PNG_MAX_SIDE 32768
#define CQ_PNG_MAX_PIXELS (UINT64_C(1) << 28)
/* Text chunks: keyword 1..79 bytes; values up to 1 MiB. */
#define CQ_PNG_MAX_TEXT (1u << 20)

typedef struct cq_png_text {
    char *key;
    char *value;
} cq_png_text;

/* An 8-bit image, interleaved rows of width * channels bytes. */
typedef struct cq_image8 {
    int width, height;
    int channels; /* 3 (RGB) or 4 (RGBA) */
    uint8_t *pixels;
    cq_png_text *texts; /* text chunks read from a file (owned) */
    size_t n_texts;
} cq_image8;

void cq_image8_free(cq_image8 *img);

/* diffusers' postprocess of one decoder value in [-1, 1] (see above). */
uint8_t cq_png_quantize(float x);
/* The same from a value already in [0, 1] (skips the x*0.5+0.5). */
uint8_t cq_png_quantize_unit(float y);
/* 8-bit alpha compositing over white (see above). */
uint8_t cq_png_over_white(uint8_t c, uint8_t a);

/* Planar decoder output (channels planes of height x width floats, in [-1,1])
 * to an interleaved 8-bit image of out_channels (3 or 4). From 4 planes to 3
 * channels the alpha is composited over white; from 3 planes to 4 channels
 * alpha is 255. Fails with CQ_ERR_NUMERIC on NaN. */
cq_status cq_png_from_planar(const float *planes, int channels, int width, int height, int out_channels,
                             cq_image8 *out);

/* Write an 8-bit RGB or RGBA PNG to path through cq_outfile (base/outfile.h):
 * only a regular file (or "-", standard output) is written, through a
 * temporary renamed over it, so a reader never sees half a file and nothing
 * but a file is ever replaced. Text values that are plain ASCII go into tEXt
 * chunks, others (UTF-8 prompts) into iTXt. */
cq_status cq_png_write(const char *path, const uint8_t *pixels, int width, int height, int channels,
                       const cq_png_text *texts, size_t n_texts);
/* The same into an outfile the caller opened (before its work) and commits. */
struct cq_outfile;
cq_status cq_png_write_out(struct cq_outfile *f, const uint8_t *pixels, int width, int height, int channels,
                           const cq_png_text *texts, size_t n_texts);
/* Whether a text chunk can hold (key, value): the checks cq_png_write makes,
 * for callers that check before their work. The message says what is wrong
 * (a control character and where, bad UTF-8, too long). */
cq_status cq_png_check_text(const char *key, const char *value);

/* Read a PNG (any bit depth / colour type) as 8-bit RGB, or RGBA when the file
 * has alpha (or force_rgba), with its text chunks. Rejects truncated or
 * corrupt data and images beyond the limits above with a message. */
cq_status cq_png_read(const char *path, bool force_rgba, cq_image8 *out);
cq_status cq_png_read_mem(const uint8_t *data, size_t len, bool force_rgba, cq_image8 *out);

/* The value of text chunk `key` in img, or NULL. */
const char *cq_image8_text(const cq_image8 *img, const char *key);

#endif /* CQ_PIPELINES_PNG_WRITE_H */
