/*
 * gen_defaults.c — the header's generation defaults (see gen_defaults.h):
 * reading with every bound checked, the KEY=VALUE form of convert's
 * --default, merging and writing back.
 */
#include "format/gen_defaults.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define WHERE "header JSON: '" CQ_GEN_DEFAULTS_KEY

void cq_gen_defaults_free(cq_gen_defaults *d) {
    if (!d) return;
    cq_free(d->negative);
    memset(d, 0, sizeof *d);
}

static cq_status check_side(const char *what, double v) {
    if (!(v >= CQ_GEN_SIDE_MIN && v <= CQ_GEN_SIDE_MAX) || v != floor(v) || fmod(v, 16.0) != 0.0)
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a whole multiple of 16 in [%d, %d]", what, v,
                       CQ_GEN_SIDE_MIN, CQ_GEN_SIDE_MAX);
    return CQ_OK;
}

static cq_status check_steps(const char *what, double v) {
    if (!(v >= 1 && v <= CQ_GEN_STEPS_MAX) || v != floor(v))
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a whole number in [1, %d]", what, v, CQ_GEN_STEPS_MAX);
    return CQ_OK;
}

static cq_status check_guidance(const char *what, double v) {
    if (!(v >= 0.0 && v <= CQ_GEN_GUIDANCE_MAX))
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a number in [0, %g]", what, v, CQ_GEN_GUIDANCE_MAX);
    return CQ_OK;
}

static cq_status check_shift(const char *what, double v) {
    if (!(v > 0.0 && v <= CQ_GEN_SHIFT_MAX))
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a number in (0, %g]", what, v, CQ_GEN_SHIFT_MAX);
    return CQ_OK;
}

static cq_status check_frames(const char *what, double v) {
    if (!(v >= 1 && v <= CQ_GEN_FRAMES_MAX) || v != floor(v))
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a whole number in [1, %d]", what, v, CQ_GEN_FRAMES_MAX);
    return CQ_OK;
}

static cq_status check_fps(const char *what, double v) {
    if (!(v > 0.0 && v <= CQ_GEN_FPS_MAX))
        return cq_fail(CQ_ERR_PARSE, "%s is %g; it must be a number in (0, %g]", what, v, CQ_GEN_FPS_MAX);
    return CQ_OK;
}

static cq_status check_negative(const char *what, const char *s) {
    const size_t n = strlen(s);
    if (n > CQ_GEN_NEGATIVE_MAX)
        return cq_fail(CQ_ERR_PARSE, "%s is %zu bytes; at most %d", what, n, CQ_GEN_NEGATIVE_MAX);
    const long bad = cq_utf8_invalid_at(s);
    if (bad >= 0) return cq_fail(CQ_ERR_PARSE, "%s is not valid UTF-8 (byte %ld)", what, bad + 1);
    return CQ_OK;
}

static const char *const k_keys[] = {"width", "height", "steps", "guidance", "shift", "negative_prompt", "frames",
                                     "fps"};

static cq_status number(const cJSON *v, const char *key, double *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return cq_fail(CQ_ERR_PARSE, WHERE ".%s' must be a finite number", key);
    *out = v->valuedouble;
    return CQ_OK;
}

static cq_status read_object(const cJSON *obj, cq_gen_defaults *d) {
    if (!cJSON_IsObject(obj)) return cq_fail(CQ_ERR_PARSE, WHERE "' must be an object");
    unsigned seen = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        for (size_t k = 0; c->string && k < CQ_ARRAY_LEN(k_keys); k++) {
            if (strcmp(c->string, k_keys[k]) != 0) continue;
            if (seen & (1u << k)) return cq_fail(CQ_ERR_PARSE, WHERE ".%s' appears twice", k_keys[k]);
            seen |= 1u << k;
        }
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(obj, "width");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, "height");
    if (!w != !h) return cq_fail(CQ_ERR_PARSE, WHERE "' gives %s without %s", w ? "width" : "height", w ? "height" : "width");
    double v = 0.0;
    if (w) {
        CQ_TRY(number(w, "width", &v));
        CQ_TRY(check_side(WHERE ".width'", v));
        d->width = (int)v;
        CQ_TRY(number(h, "height", &v));
        CQ_TRY(check_side(WHERE ".height'", v));
        d->height = (int)v;
        d->has_size = true;
    }
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, "steps");
    if (it) {
        CQ_TRY(number(it, "steps", &v));
        CQ_TRY(check_steps(WHERE ".steps'", v));
        d->steps = (int)v;
        d->has_steps = true;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(obj, "guidance"))) {
        CQ_TRY(number(it, "guidance", &v));
        CQ_TRY(check_guidance(WHERE ".guidance'", v));
        d->guidance = v;
        d->has_guidance = true;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(obj, "shift"))) {
        CQ_TRY(number(it, "shift", &v));
        CQ_TRY(check_shift(WHERE ".shift'", v));
        d->shift = v;
        d->has_shift = true;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(obj, "frames"))) {
        CQ_TRY(number(it, "frames", &v));
        CQ_TRY(check_frames(WHERE ".frames'", v));
        d->frames = (int)v;
        d->has_frames = true;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(obj, "fps"))) {
        CQ_TRY(number(it, "fps", &v));
        CQ_TRY(check_fps(WHERE ".fps'", v));
        d->fps = v;
        d->has_fps = true;
    }
    if ((it = cJSON_GetObjectItemCaseSensitive(obj, "negative_prompt"))) {
        if (!cJSON_IsString(it)) return cq_fail(CQ_ERR_PARSE, WHERE ".negative_prompt' must be a string");
        CQ_TRY(check_negative(WHERE ".negative_prompt'", it->valuestring));
        if (!(d->negative = cq_strdup(it->valuestring))) return CQ_ERR_NOMEM;
        d->has_negative = true;
    }
    return CQ_OK;
}

cq_status cq_gen_defaults_from_json(const cJSON *obj, cq_gen_defaults *d) {
    memset(d, 0, sizeof *d);
    if (!obj || cJSON_IsNull(obj)) return CQ_OK;
    cq_status s = read_object(obj, d);
    if (s != CQ_OK) cq_gen_defaults_free(d);
    return s;
}

cq_status cq_gen_defaults_parse(const char *json, size_t len, cq_gen_defaults *d) {
    memset(d, 0, sizeof *d);
    if (!json) return cq_fail(CQ_ERR_INVALID_ARG, "generation defaults: no input");
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return cq_fail(CQ_ERR_PARSE, "generation defaults: invalid JSON");
    cq_status s = cq_gen_defaults_from_json(root, d);
    cJSON_Delete(root);
    return s;
}

/* ---- KEY=VALUE ---- */

static bool parse_num(const char *s, double *out) {
    if (!*s || *s == ' ') return false;
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return !*end && errno != ERANGE && isfinite(*out);
}

/* the bound's message, under the setting's name */
static cq_status bad_value(const char *kv) {
    char why[256];
    snprintf(why, sizeof why, "%s", cq_last_error());
    return cq_fail(CQ_ERR_INVALID_ARG, "--default %.80s: %s", kv, why);
}

cq_status cq_gen_defaults_set(cq_gen_defaults *d, const char *kv) {
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq)
        return cq_fail(CQ_ERR_INVALID_ARG, "--default wants KEY=VALUE (size=WxH, steps=N, guidance=G, shift=S, "
                                           "frames=N, fps=F or negative=TEXT), got '%s'", kv ? kv : "");
    const size_t kl = (size_t)(eq - kv);
    const char *val = eq + 1;
    double a = 0.0, b = 0.0;
    if (kl == 4 && strncmp(kv, "size", 4) == 0) {
        const char *x = strchr(val, 'x');
        char w[32];
        if (!x || (size_t)(x - val) >= sizeof w)
            return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: size wants WxH, e.g. 1024x1024", kv);
        memcpy(w, val, (size_t)(x - val));
        w[x - val] = 0;
        if (!parse_num(w, &a) || !parse_num(x + 1, &b))
            return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: size wants WxH, e.g. 1024x1024", kv);
        if (check_side("the width", a) != CQ_OK || check_side("the height", b) != CQ_OK)
            return bad_value(kv);
        d->width = (int)a;
        d->height = (int)b;
        d->has_size = true;
    } else if (kl == 5 && strncmp(kv, "steps", 5) == 0) {
        if (!parse_num(val, &a)) return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: steps wants a number", kv);
        if (check_steps("steps", a) != CQ_OK) return bad_value(kv);
        d->steps = (int)a;
        d->has_steps = true;
    } else if (kl == 8 && strncmp(kv, "guidance", 8) == 0) {
        if (!parse_num(val, &a)) return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: guidance wants a number", kv);
        if (check_guidance("guidance", a) != CQ_OK) return bad_value(kv);
        d->guidance = a;
        d->has_guidance = true;
    } else if (kl == 5 && strncmp(kv, "shift", 5) == 0) {
        if (!parse_num(val, &a)) return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: shift wants a number", kv);
        if (check_shift("shift", a) != CQ_OK) return bad_value(kv);
        d->shift = a;
        d->has_shift = true;
    } else if (kl == 6 && strncmp(kv, "frames", 6) == 0) {
        if (!parse_num(val, &a)) return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: frames wants a number", kv);
        if (check_frames("frames", a) != CQ_OK) return bad_value(kv);
        d->frames = (int)a;
        d->has_frames = true;
    } else if (kl == 3 && strncmp(kv, "fps", 3) == 0) {
        if (!parse_num(val, &a)) return cq_fail(CQ_ERR_INVALID_ARG, "--default %s: fps wants a number", kv);
        if (check_fps("fps", a) != CQ_OK) return bad_value(kv);
        d->fps = a;
        d->has_fps = true;
    } else if (kl == 8 && strncmp(kv, "negative", 8) == 0) {
        if (check_negative("the negative prompt", val) != CQ_OK) return bad_value(kv);
        char *c = cq_strdup(val);
        if (!c) return CQ_ERR_NOMEM;
        cq_free(d->negative);
        d->negative = c;
        d->has_negative = true;
    } else {
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "--default %.*s: unknown key; the keys are size=WxH, steps=N, guidance=G, shift=S, "
                       "frames=N, fps=F and negative=TEXT", (int)CQ_MIN(kl, (size_t)64), kv);
    }
    return CQ_OK;
}

cq_status cq_gen_defaults_merge(cq_gen_defaults *into, const cq_gen_defaults *over) {
    if (over->has_size) {
        into->width = over->width;
        into->height = over->height;
        into->has_size = true;
    }
    if (over->has_steps) into->steps = over->steps, into->has_steps = true;
    if (over->has_guidance) into->guidance = over->guidance, into->has_guidance = true;
    if (over->has_shift) into->shift = over->shift, into->has_shift = true;
    if (over->has_frames) into->frames = over->frames, into->has_frames = true;
    if (over->has_fps) into->fps = over->fps, into->has_fps = true;
    if (over->has_negative) {
        char *c = cq_strdup(over->negative ? over->negative : "");
        if (!c) return CQ_ERR_NOMEM;
        cq_free(into->negative);
        into->negative = c;
        into->has_negative = true;
    }
    return CQ_OK;
}

cq_status cq_gen_defaults_to_header(const cq_gen_defaults *d, cJSON *header) {
    cJSON_DeleteItemFromObjectCaseSensitive(header, CQ_GEN_DEFAULTS_KEY);
    if (!d->has_size && !d->has_steps && !d->has_guidance && !d->has_shift && !d->has_negative && !d->has_frames &&
        !d->has_fps)
        return CQ_OK;
    cJSON *o = cJSON_AddObjectToObject(header, CQ_GEN_DEFAULTS_KEY);
    bool ok = o != NULL;
    if (ok && d->has_size)
        ok = cJSON_AddNumberToObject(o, "width", d->width) && cJSON_AddNumberToObject(o, "height", d->height);
    if (ok && d->has_steps) ok = cJSON_AddNumberToObject(o, "steps", d->steps) != NULL;
    if (ok && d->has_guidance) ok = cJSON_AddNumberToObject(o, "guidance", d->guidance) != NULL;
    if (ok && d->has_shift) ok = cJSON_AddNumberToObject(o, "shift", d->shift) != NULL;
    if (ok && d->has_frames) ok = cJSON_AddNumberToObject(o, "frames", d->frames) != NULL;
    if (ok && d->has_fps) ok = cJSON_AddNumberToObject(o, "fps", d->fps) != NULL;
    if (ok && d->has_negative) ok = cJSON_AddStringToObject(o, "negative_prompt", d->negative ? d->negative : "") != NULL;
    return ok ? CQ_OK : cq_fail(CQ_ERR_NOMEM, "header JSON: out of memory");
}

const char *cq_gen_defaults_describe(const cq_gen_defaults *d, char *buf, size_t cap) {
    size_t o = 0;
    if (cap) buf[0] = 0;
#define PUT(...)                                                                    \
    do {                                                                            \
        int k_ = snprintf(buf + o, cap > o ? cap - o : 0, __VA_ARGS__);             \
        if (k_ > 0) o = CQ_MIN(cap ? cap - 1 : 0, o + (size_t)k_);                  \
    } while (0)
    if (d->has_size) PUT("%dx%d", d->width, d->height);
    if (d->has_steps) PUT("%s%d steps", o ? ", " : "", d->steps);
    if (d->has_guidance) PUT("%sguidance %g", o ? ", " : "", d->guidance);
    if (d->has_shift) PUT("%sshift %g", o ? ", " : "", d->shift);
    if (d->has_frames) PUT("%s%d frames", o ? ", " : "", d->frames);
    if (d->has_fps) PUT("%s%g fps", o ? ", " : "", d->fps);
    if (d->has_negative) PUT("%snegative prompt \"%.40s%s\"", o ? ", " : "", d->negative ? d->negative : "",
                             d->negative && strlen(d->negative) > 40 ? "..." : "");
#undef PUT
    return buf;
}
