/*
 * image.c — cq_image: text to image through the implementation the model
 * registry gives for the pack's arch (pipelines/registry.h), the decoder's
 * floats turned into 8-bit pixels as diffusers does (pipelines/png_write.h),
 * and the PNG with the settings in text chunks.
 */
#include <stdio.h>
#include <string.h>

#include "api/api_impl.h"
#include "base/base.h"
#include "base/outfile.h"
#include "pipelines/png_write.h"
#include "pipelines/registry.h"

struct cq_image {
    cq_image8 img;
    cq_image_timings t;
    char *prompt, *negative, *model;
    uint64_t seed;
    int steps;
    double guidance;
};

void cq_image_opts_init(cq_image_opts *o) {
    if (!o) return;
    *o = (cq_image_opts){.guidance = -1.0};
}

typedef struct progress_ctx {
    const cq_image_opts *o;
    int steps;
    int stop;
} progress_ctx;

static int on_step(int step, int n, void *user) {
    progress_ctx *c = user;
    if (c->o->progress && c->o->progress(CQ_IMAGE_PHASE_STEPS, step, n, c->o->user)) c->stop = 1;
    return c->stop;
}

static void on_phase(cq_gen_phase ph, void *user) {
    progress_ctx *c = user;
    static const cq_image_phase map[] = {
        [CQ_GEN_PHASE_TEXT] = CQ_IMAGE_PHASE_TEXT,   [CQ_GEN_PHASE_PREFILL] = CQ_IMAGE_PHASE_PREFILL,
        [CQ_GEN_PHASE_STEPS] = CQ_IMAGE_PHASE_STEPS, [CQ_GEN_PHASE_VAE] = CQ_IMAGE_PHASE_DECODE,
        [CQ_GEN_PHASE_DONE] = CQ_IMAGE_PHASE_DONE,
    };
    if (c->o->progress && (unsigned)ph < CQ_ARRAY_LEN(map) && c->o->progress(map[ph], 0, c->steps, c->o->user))
        c->stop = 1;
}

static cq_status image_model(const cq_model *m) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "image generation: no model");
    if (m->kind != CQ_MODEL_IMAGE)
        return cq_fail(CQ_ERR_INVALID_ARG, "image generation: '%s' is a language model (arch %s), not an image pipeline",
                       m->name, m->arch);
    if (!m->pipe) /* a failed load could not reopen it */
        return cq_fail(CQ_ERR_INVALID_ARG, "image generation: '%s' could not be reopened after a failed load; open it again",
                       m->name);
    return CQ_OK;
}

cq_status cq_image_get_defaults(cq_model *m, cq_image_defaults *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_image_get_defaults: no output");
    memset(out, 0, sizeof *out);
    CQ_TRY(image_model(m));
    const cq_image_arch *ia = m->entry->image;
    const cq_gen_defaults *d = &m->defaults;
    *out = (cq_image_defaults){
        .width = d->has_size ? d->width : ia->default_width,
        .height = d->has_size ? d->height : ia->default_height,
        .steps = d->has_steps ? d->steps : ia->default_steps,
        .guidance = d->has_guidance ? d->guidance : ia->default_guidance,
        .negative = d->has_negative ? d->negative : NULL,
        .shift = d->has_shift ? d->shift : 0.0,
        .size_from_pack = d->has_size,
        .steps_from_pack = d->has_steps,
        .guidance_from_pack = d->has_guidance,
        .size_multiple = ia->size_multiple,
        .min_steps = ia->min_steps,
        .guidance_rule = ia->guidance_help ? ia->guidance_help : "",
        .max_images = ia->max_images,
        .images_optional = ia->images_optional,
    };
    return CQ_OK;
}

cq_status cq_image_resolve(cq_model *m, cq_image_opts *o) {
    CQ_TRY(image_model(m));
    if (!o) return cq_fail(CQ_ERR_INVALID_ARG, "cq_image_resolve: no options");
    cq_image_defaults d;
    CQ_TRY(cq_image_get_defaults(m, &d));
    /* a model that takes pictures optionally derives each side left at 0 from them */
    const bool from_pictures = o->n_images > 0 && m->entry->image->images_optional;
    if (o->width == 0 && o->height == 0 && !from_pictures) { /* an editing model without a pack size: the pictures' */
        o->width = d.width;
        o->height = d.height;
    }
    if (o->steps == 0) o->steps = d.steps;
    if (o->guidance < 0) o->guidance = d.guidance;
    if (!o->negative) o->negative = d.negative;
    return CQ_OK;
}

/* The request in the registry's terms, the architecture's own options parsed
 * into *extra (cq_free it). */
static cq_status to_req(cq_model *m, const cq_image_opts *o, progress_ctx *pc, cq_image_req *r, void **extra) {
    *extra = NULL;
    CQ_TRY(image_model(m));
    if (!o) return cq_fail(CQ_ERR_INVALID_ARG, "image generation: no options");
    if (!o->prompt) return cq_fail(CQ_ERR_INVALID_ARG, "image generation: no prompt");
    cq_image_opts d = *o;
    CQ_TRY(cq_image_resolve(m, &d));
    const cq_image_arch *ia = m->entry->image;
    if (o->n_images < 0 || (o->n_images > 0 && !o->images))
        return cq_fail(CQ_ERR_INVALID_ARG, "image generation: %d input pictures without their list", o->n_images);
    if (o->n_images > 0 && ia->max_images == 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "'%s' (arch %s, %s) draws from text alone and takes no input picture; "
                       "editing needs a Qwen-Image-Edit pack (arch qwen_image_edit or qwen_image_edit_plus) or a "
                       "Qwen-Image-2.1 one (qwen_image21)",
                       m->name, m->entry->arch, m->entry->family);
    if (o->n_images == 0 && ia->max_images > 0 && !ia->images_optional)
        return cq_fail(CQ_ERR_INVALID_ARG, "'%s' (arch %s, %s) edits pictures: give the input picture (--image FILE%s)",
                       m->name, m->entry->arch, m->entry->family, ia->max_images > 1 ? ", repeatable" : "");
    if (o->n_images > ia->max_images)
        return cq_fail(CQ_ERR_INVALID_ARG, "'%s' (arch %s, %s) takes at most %d input picture%s (got %d)", m->name,
                       m->entry->arch, m->entry->family, ia->max_images, ia->max_images == 1 ? "" : "s", o->n_images);
    void *x = cq_calloc(1, ia->extra_size ? ia->extra_size : 1);
    if (!x) return CQ_ERR_NOMEM;
    if (ia->extra_init) ia->extra_init(x);
    for (const char *const *w = o->arch_opts; w && *w;) {
        const int used = ia->extra_parse ? ia->extra_parse(x, w[0], w[1]) : 0;
        if (used <= 0) {
            cq_free(x);
            if (used < 0) return CQ_ERR_INVALID_ARG; /* the architecture's message */
            return cq_fail(CQ_ERR_INVALID_ARG, "image generation: %s is not an option of arch %s (%s)", w[0],
                           m->entry->arch, m->entry->family);
        }
        w += used;
    }
    *extra = x;
    *r = (cq_image_req){.prompt = d.prompt, .negative = d.negative, .width = d.width, .height = d.height,
                        .steps = d.steps, .seed = d.seed, .guidance = d.guidance,
                        .extra = ia->extra_size ? x : NULL, /* no block of its own: NULL, its defaults */
                        .images = o->images, .n_images = o->n_images};
    if (pc) {
        *pc = (progress_ctx){.o = o, .steps = d.steps};
        r->on_step = on_step;
        r->on_phase = on_phase;
        r->user = pc;
    }
    return CQ_OK;
}

cq_status cq_image_check(cq_model *m, const cq_image_opts *o) {
    cq_image_req r;
    void *extra = NULL;
    cq_status s = to_req(m, o, NULL, &r, &extra);
    if (s == CQ_OK) s = m->entry->image->check(m->pipe, &r);
    cq_free(extra);
    return s;
}

void cq_image_free(cq_image *img) {
    if (!img) return;
    cq_image8_free(&img->img);
    cq_free(img->prompt);
    cq_free(img->negative);
    cq_free(img->model);
    cq_free(img);
}

cq_status cq_image_generate(cq_model *m, const cq_image_opts *o, cq_image **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_image_generate: out is NULL");
    *out = NULL;
    progress_ctx pc;
    cq_image_req q;
    void *extra = NULL;
    CQ_TRY(to_req(m, o, &pc, &q, &extra));
    const cq_image_arch *ia = m->entry->image;
    cq_status s = ia->check(m->pipe, &q); /* before the weights are read */
    double load = 0;
    if (s == CQ_OK && !m->be) {
        s = cq_model_load(m);
        load = m->load_s;
    }
    cq_image *img = s == CQ_OK ? cq_calloc(1, sizeof *img) : NULL;
    if (s == CQ_OK && !img) s = CQ_ERR_NOMEM;
    cq_image_result r;
    if (s == CQ_OK) s = ia->generate(m->pipe, &q, &r);
    cq_free(extra);
    if (s != CQ_OK) {
        cq_free(img);
        return s;
    }
    const int oc = o->rgba && r.channels == 4 ? 4 : 3;
    s = cq_png_from_planar(r.image, r.channels, r.width, r.height, oc, &img->img);
    img->t = (cq_image_timings){.load = load, .text = r.t.text, .prefill = r.t.prefill, .steps = r.t.steps,
                                .decode = r.t.vae};
    cq_image_result_free(&r);
    img->prompt = cq_strdup(q.prompt);
    img->negative = q.negative ? cq_strdup(q.negative) : NULL;
    img->model = cq_strdup(m->name);
    img->seed = q.seed;
    img->steps = q.steps;
    img->guidance = q.guidance;
    if (s == CQ_OK && (!img->prompt || !img->model || (q.negative && !img->negative))) s = CQ_ERR_NOMEM;
    if (s != CQ_OK) {
        cq_image_free(img);
        return s;
    }
    *out = img;
    return CQ_OK;
}

const uint8_t *cq_image_pixels(const cq_image *img, int *width, int *height, int *channels) {
    if (width) *width = img ? img->img.width : 0;
    if (height) *height = img ? img->img.height : 0;
    if (channels) *channels = img ? img->img.channels : 0;
    return img ? img->img.pixels : NULL;
}

cq_image_timings cq_image_get_timings(const cq_image *img) {
    return img ? img->t : (cq_image_timings){0};
}

cq_status cq_api_image_png_out(const cq_image *img, struct cq_outfile *f) {
    if (!img || !f) return cq_fail(CQ_ERR_INVALID_ARG, "PNG output: no image or file");
    char sz[32], sd[32], st[16], gd[32];
    snprintf(sz, sizeof sz, "%dx%d", img->img.width, img->img.height);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)img->seed);
    snprintf(st, sizeof st, "%d", img->steps);
    snprintf(gd, sizeof gd, "%g", img->guidance);
    cq_png_text texts[8] = {{"prompt", img->prompt}, {"seed", sd},       {"steps", st},
                            {"size", sz},            {"guidance", gd},   {"model", img->model},
                            {"software", "cortiq"}};
    size_t nt = 7;
    if (img->negative) texts[nt++] = (cq_png_text){"negative", img->negative};
    return cq_png_write_out(f, img->img.pixels, img->img.width, img->img.height, img->img.channels, texts, nt);
}

cq_status cq_image_write_png(const cq_image *img, const char *path, double *seconds) {
    if (!img || !path) return cq_fail(CQ_ERR_INVALID_ARG, "cq_image_write_png: no image or path");
    double t = cq_now();
    cq_outfile f;
    const cq_outfile_opts oo = {.format = "PNG", .allow_stdout = true};
    CQ_TRY(cq_outfile_open(path, &oo, &f));
    cq_status s = cq_api_image_png_out(img, &f);
    if (s == CQ_OK) s = cq_outfile_commit(&f);
    cq_outfile_abort(&f);
    if (seconds) *seconds = cq_now() - t;
    return s;
}
