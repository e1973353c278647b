/* fuzz_gen_defaults.c — libFuzzer target for a pack's generation defaults
 * (format/gen_defaults.h): the buffer as the header's generation_defaults
 * JSON, and each of its lines as one KEY=VALUE setting of convert's
 * --default. Whatever is accepted must be within the documented bounds,
 * write back into a header and read back to the same values. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "format/gen_defaults.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const cq_gen_defaults *d) {
    if (d->has_size && !(d->width >= CQ_GEN_SIDE_MIN && d->width <= CQ_GEN_SIDE_MAX && d->width % 16 == 0 &&
                         d->height >= CQ_GEN_SIDE_MIN && d->height <= CQ_GEN_SIDE_MAX && d->height % 16 == 0))
        __builtin_trap();
    if (d->has_steps && !(d->steps >= 1 && d->steps <= CQ_GEN_STEPS_MAX)) __builtin_trap();
    if (d->has_guidance && !(d->guidance >= 0.0 && d->guidance <= CQ_GEN_GUIDANCE_MAX)) __builtin_trap();
    if (d->has_shift && !(d->shift > 0.0 && d->shift <= CQ_GEN_SHIFT_MAX)) __builtin_trap();
    if (d->has_negative && (!d->negative || strlen(d->negative) > CQ_GEN_NEGATIVE_MAX ||
                            cq_utf8_invalid_at(d->negative) >= 0))
        __builtin_trap();
    /* written into a header and read back: the same values */
    cJSON *h = cJSON_CreateObject();
    if (!h) return;
    cq_gen_defaults back;
    if (cq_gen_defaults_to_header(d, h) == CQ_OK &&
        cq_gen_defaults_from_json(cJSON_GetObjectItemCaseSensitive(h, CQ_GEN_DEFAULTS_KEY), &back) == CQ_OK) {
        if (back.has_size != d->has_size || back.has_steps != d->has_steps || back.has_guidance != d->has_guidance ||
            back.has_shift != d->has_shift || back.has_negative != d->has_negative)
            __builtin_trap();
        if ((d->has_size && (back.width != d->width || back.height != d->height)) ||
            (d->has_steps && back.steps != d->steps) || (d->has_negative && strcmp(back.negative, d->negative)))
            __builtin_trap();
        cq_gen_defaults_free(&back);
    }
    cJSON_Delete(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cq_gen_defaults d;
    if (cq_gen_defaults_parse((const char *)data, size, &d) == CQ_OK) check(&d);
    cq_gen_defaults_free(&d);
    /* each line as a --default setting, all into one set */
    char line[512];
    cq_gen_defaults s = {0};
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && data[j] != '\n') j++;
        const size_t n = j - i < sizeof line - 1 ? j - i : sizeof line - 1;
        memcpy(line, data + i, n);
        line[n] = 0;
        if (strlen(line) == n) (void)cq_gen_defaults_set(&s, line); /* a NUL inside the line ends the C string */
        i = j + 1;
    }
    check(&s);
    cq_gen_defaults_free(&s);
    return 0;
}
