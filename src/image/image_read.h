/*
 * image_read.h — input pictures for the editing pipelines: a PNG or JPEG file
 * (told apart by its first bytes) decoded to 8-bit RGB, meant to give what the
 * reference pipelines see after PIL's Image.open(...).convert("RGB").
 *
 * What that means here (PIL's behaviour as documented and read from its
 * source; tests/golden/qwen_image_proc holds PIL's decodes of grey, palette,
 * RGBA and JPEG 4:2:0/4:2:2/4:4:4/grey files, matched byte for byte):
 *  - alpha is dropped, not composited (convert("RGB") of RGBA / LA / a
 *    palette or grey image with tRNS keeps the colour channels only);
 *  - grey is replicated to three channels, palettes are expanded;
 *  - 16-bit PNG samples keep their high byte (PIL's RGB;16B unpacking;
 *    16-bit grey differs: PIL opens it as I;16 and clips, see the .c);
 *  - no gamma, colour profile or EXIF orientation is applied (Image.open
 *    applies none; a caller that wants ImageOps.exif_transpose must rotate);
 *  - JPEG: libjpeg with its defaults (integer slow DCT, fancy upsampling),
 *    the settings PIL's decoder keeps; grey and YCbCr/RGB files only (CMYK
 *    and YCCK are refused: PIL inverts Adobe CMYK in a way not reproduced).
 *
 * Both readers check every size against the limits below before allocating,
 * refuse truncated or corrupt data with a message, and accept a memory buffer
 * so that the fuzzers reach them (tests/fuzz/fuzz_png.c, fuzz_jpeg.c).
 */
#ifndef CQ_IMAGE_IMAGE_READ_H
#define CQ_IMAGE_IMAGE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "pipelines/png_write.h" /* cq_image8, the PNG reader, CQ_PNG_MAX_* */

/* JPEG limits: the same as the PNG reader's. */
#define CQ_JPEG_MAX_SIDE CQ_PNG_MAX_SIDE
#define CQ_JPEG_MAX_PIXELS CQ_PNG_MAX_PIXELS

/* Whether this build reads JPEG files (libjpeg found at configure time). */
bool cq_jpeg_available(void);

/* A JPEG file to 8-bit RGB (3 channels). CQ_ERR_UNSUPPORTED without libjpeg
 * or for CMYK/YCCK files; CQ_ERR_PARSE for corrupt or truncated data. */
cq_status cq_jpeg_read_mem(const uint8_t *data, size_t len, cq_image8 *out);

/* Drop the alpha channel of a 4-channel image in place (convert("RGB")). */
void cq_image8_drop_alpha(cq_image8 *img);

/* A PNG or JPEG file (by its signature) to 8-bit RGB, alpha dropped. Text
 * chunks of a PNG are kept. Anything else: CQ_ERR_MAGIC. */
cq_status cq_image_read_rgb_mem(const uint8_t *data, size_t len, cq_image8 *out);
cq_status cq_image_read_rgb(const char *path, cq_image8 *out);

/* The same as 8-bit RGBA, as PIL's convert("RGBA") gives it: a PNG's alpha (or tRNS) kept, 255 elsewhere
 * (RGB and JPEG files). */
cq_status cq_image_read_rgba_mem(const uint8_t *data, size_t len, cq_image8 *out);
cq_status cq_image_read_rgba(const char *path, cq_image8 *out);

#endif /* CQ_IMAGE_IMAGE_READ_H */
