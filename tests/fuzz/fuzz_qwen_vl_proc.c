/* fuzz_qwen_vl_proc.c — an editing pack's processor config (its
 * preprocessor_config.json, stored as processor.config_json) on arbitrary
 * bytes: the parser returns settings or an error, never crashes or leaks, and
 * settings it accepts are within the bounds it promises, so a small picture
 * through them is prepared or refused cleanly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/base.h"
#include "image/qwen_image_proc.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cq_qwen_vl_proc p;
    if (cq_qwen_vl_proc_parse((const char *)data, size, &p) != CQ_OK) return 0;
    if (p.patch_size < 1 || p.patch_size > 64 || p.merge_size < 1 || p.merge_size > 16 || p.min_pixels > p.max_pixels ||
        p.temporal_patch_size < 1 || p.temporal_patch_size > 16 || !(p.rescale_factor > 0.0))
        abort();
    if (p.patch_size * p.merge_size > 56 || p.temporal_patch_size > 4) return 0; /* keep an execution short */
    if (p.max_pixels > 28 * 28 * 64) p.max_pixels = 28 * 28 * 64;
    if (p.min_pixels > p.max_pixels) p.min_pixels = p.max_pixels;
    uint8_t rgb[24 * 20 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 7);
    cq_qwen_vl_image vl;
    if (cq_qwen_vl_preprocess(&p, rgb, 24, 20, &vl) == CQ_OK) {
        sink += vl.pixel_values[0] > 0.0f;
        cq_qwen_vl_image_free(&vl);
    }
    return 0;
}
