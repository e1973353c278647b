/*
 * gen_defaults.h — a pack's recommended generation defaults: the header's
 * optional `generation_defaults` object (docs/FORMAT.md), what `cortiq
 * convert` writes for a known recipe (Z-Image-Turbo: 1024x1024, 8 steps, no
 * guidance, shift 3) or is told with --default, and what `cortiq imagine` and
 * cq_image_resolve use where the caller gives nothing.
 *
 *   "generation_defaults": {"width": 1024, "height": 1024, "steps": 8,
 *                           "guidance": 0, "shift": 3, "negative_prompt": ""}
 *   (a video model also "frames": 121, "fps": 24; LTX-2.5 distilled:
 *   768x512, 121 frames at 24 fps, 8 steps, guidance 1)
 *
 * Every key is optional; width and height come together. Bounds (a value
 * outside them makes the header invalid, so the pack does not open):
 * width/height 16..16384 and multiples of 16, steps 1..1000, guidance a
 * finite number in [0, 100] (the model's own guidance_scale: what it means is
 * the architecture's), shift a finite number in (0, 100], a video model's
 * frames 1..99999 and fps a finite number in (0, 240], negative_prompt
 * valid UTF-8 of at most CQ_GEN_NEGATIVE_MAX bytes. Unknown keys inside the
 * object are ignored, as everywhere in the header, so a later writer may add
 * some; a known key given twice is an error.
 */
#ifndef CQ_FORMAT_GEN_DEFAULTS_H
#define CQ_FORMAT_GEN_DEFAULTS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "cortiq.h"

#define CQ_GEN_DEFAULTS_KEY "generation_defaults"
#define CQ_GEN_SIDE_MIN 16
#define CQ_GEN_SIDE_MAX 16384
#define CQ_GEN_STEPS_MAX 1000
#define CQ_GEN_GUIDANCE_MAX 100.0
#define CQ_GEN_SHIFT_MAX 100.0
#define CQ_GEN_NEGATIVE_MAX 65536
#define CQ_GEN_FRAMES_MAX 99999
#define CQ_GEN_FPS_MAX 240.0

typedef struct cq_gen_defaults {
    bool has_size, has_steps, has_guidance, has_shift, has_negative, has_frames, has_fps;
    int width, height, steps;
    double guidance, shift;
    int frames;     /* video models: frames of a clip */
    double fps;     /* video models: its frame rate */
    char *negative; /* owned (cq_gen_defaults_free) */
} cq_gen_defaults;

void cq_gen_defaults_free(cq_gen_defaults *d);

/* The `generation_defaults` object (NULL or JSON null: nothing set) into *d,
 * every bound checked; CQ_ERR_PARSE naming the key otherwise. */
cq_status cq_gen_defaults_from_json(const cJSON *obj, cq_gen_defaults *d);
/* The same from JSON text (len bytes; the object itself). */
cq_status cq_gen_defaults_parse(const char *json, size_t len, cq_gen_defaults *d);

/* One "KEY=VALUE" setting into *d (convert's --default): size=WxH, steps=N,
 * guidance=G, shift=S, frames=N, fps=F, negative=TEXT; the same bounds. CQ_ERR_INVALID_ARG
 * with the accepted keys for anything else. */
cq_status cq_gen_defaults_set(cq_gen_defaults *d, const char *kv);

/* The fields `over` sets replace those of *into (the negative prompt copied). */
cq_status cq_gen_defaults_merge(cq_gen_defaults *into, const cq_gen_defaults *over);

/* Write d as header[CQ_GEN_DEFAULTS_KEY] (replacing one there; nothing set
 * removes it). */
cq_status cq_gen_defaults_to_header(const cq_gen_defaults *d, cJSON *header);

/* "1024x1024, 8 steps, guidance 0, shift 3" (the fields set); "" for none. */
const char *cq_gen_defaults_describe(const cq_gen_defaults *d, char *buf, size_t cap);

#endif /* CQ_FORMAT_GEN_DEFAULTS_H */
