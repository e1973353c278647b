/*
 * image_crf.h — the H.264 re-compression LTX-2's image-to-video pipelines
 * give their first frame (diffusers' apply_image_conditioning_crf, a port of
 * ltx-pipelines' media_io.preprocess): the model was trained on frames that
 * had been through the codec, so the conditioning picture goes through it
 * too. As the reference does it with PyAV: the picture cropped to even sides,
 * RGB24 -> yuv420p by libswscale (bilinear, its default BT.601 matrix, limited
 * range), one frame coded by libx264 at the CRF with preset veryfast, decoded
 * by FFmpeg's H.264 decoder and turned back into RGB24 the same way. CRF 0
 * is the reference's "no re-compression" (the picture unchanged, not cropped). On the
 * same FFmpeg build as the reference's PyAV the bytes are the same
 * (tests/golden/image_crf).
 */
#ifndef CQ_IO_IMAGE_CRF_H
#define CQ_IO_IMAGE_CRF_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"

/* The CRF LTX-2.5 was trained with (a Gemma-4 text encoder), and LTX-2.0 / 2.3's. */
#define CQ_IMAGE_CRF_LTX25 18
#define CQ_IMAGE_CRF_LTX2 33

/* Whether this build can re-compress (FFmpeg's libraries with libx264 and the H.264 decoder). */
bool cq_image_crf_available(void);

/* rgb: w x h RGB24 (rows packed). out (cq_malloc'd): (w & ~1) x (h & ~1) RGB24, *ow / *oh its size. crf 0..51;
 * 0 copies the picture as it is (w x h). Sides of at least 2. */
cq_status cq_image_crf(const uint8_t *rgb, int w, int h, int crf, uint8_t **out, int *ow, int *oh);

#endif /* CQ_IO_IMAGE_CRF_H */
