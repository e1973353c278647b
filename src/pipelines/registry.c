/*
 * registry.c — the model table (see registry.h) and the adapters that put
 * each model's pipeline behind its task's interface.
 */
#include "pipelines/registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "models/qwen3.h"
#include "pipelines/qi21_pipe.h"
#include "pipelines/qimage_pipe.h"
#include "pipelines/zimage_pipe.h"

/* ---- Qwen-Image-2.1 ---- */

typedef struct qi21_extra {
    bool noise_bf16; /* --noise-dtype bf16 */
    int output_resolution;  /* --output-resolution (0: the reference's 1024) */
    int64_t vl_min_pixels;  /* --vl-min-pixels (0: the processor's) */
} qi21_extra;

static void qi21_extra_init(void *extra) { memset(extra, 0, sizeof(qi21_extra)); }

static bool number(const char *val, double *out);

static int qi21_extra_parse(void *extra, const char *opt, const char *val) {
    qi21_extra *e = extra;
    double v;
    if (strcmp(opt, "--output-resolution") == 0) {
        if (!number(val, &v) || v != floor(v) || v < 32 || v > 16384) {
            cq_fail(CQ_ERR_INVALID_ARG, "--output-resolution wants a whole number of pixels in [32, 16384], got '%s'",
                    val ? val : "");
            return -1;
        }
        e->output_resolution = (int)v;
        return 2;
    }
    if (strcmp(opt, "--vl-min-pixels") == 0) {
        if (!number(val, &v) || v != floor(v) || v < 1 || v > 16384.0 * 16384.0) {
            cq_fail(CQ_ERR_INVALID_ARG, "--vl-min-pixels wants a whole number of pixels in [1, 16384^2], got '%s'",
                    val ? val : "");
            return -1;
        }
        e->vl_min_pixels = (int64_t)v;
        return 2;
    }
    if (strcmp(opt, "--noise-dtype") != 0) return 0;
    if (!val || (strcmp(val, "f32") && strcmp(val, "bf16"))) {
        cq_fail(CQ_ERR_INVALID_ARG, "--noise-dtype wants f32 or bf16");
        return -1;
    }
    e->noise_bf16 = strcmp(val, "bf16") == 0;
    return 2;
}

static cq_qi21_gen_opts qi21_opts(const cq_image_req *o) {
    const qi21_extra *e = o->extra;
    return (cq_qi21_gen_opts){.prompt = o->prompt, .negative = o->negative, .width = o->width, .height = o->height,
                              .steps = o->steps, .seed = o->seed, .guidance = o->guidance,
                              .noise_bf16 = e && e->noise_bf16, .on_step = o->on_step, .on_phase = o->on_phase,
                              .user = o->user, .images = o->n_images ? o->images : NULL, .n_images = o->n_images,
                              .output_resolution = e ? e->output_resolution : 0,
                              .vl_min_pixels = e ? e->vl_min_pixels : 0};
}

static cq_status qi21_open(const cq_cmf *cmf, void **pipe) {
    cq_qi21_pipe *p = NULL;
    cq_status s = cq_qi21_pipe_open(cmf, &p);
    *pipe = p;
    return s;
}
static cq_status qi21_check(void *pipe, const cq_image_req *o) {
    const cq_qi21_gen_opts g = qi21_opts(o);
    return cq_qi21_pipe_check(pipe, &g);
}
static cq_status qi21_load_weights(void *pipe, cq_backend *be) { return cq_qi21_pipe_load_weights(pipe, be); }
static const cq_resid *qi21_residency(const void *pipe) { return cq_qi21_pipe_residency(pipe); }
static cq_status qi21_generate(void *pipe, const cq_image_req *o, cq_image_result *res) {
    const cq_qi21_gen_opts g = qi21_opts(o);
    return cq_qi21_pipe_generate(pipe, &g, res);
}
static void qi21_free(void *pipe) { cq_qi21_pipe_free(pipe); }

static const cq_image_arch k_qi21 = {
    .default_width = 1024,
    .default_height = 1024,
    .default_steps = 40,
    .default_guidance = 1.0,
    .size_multiple = 32,
    .min_steps = 2,
    .max_images = CQ_QI21_MAX_IMAGES,
    .images_optional = true,
    .guidance_help = "true CFG, neg + G (pos - neg) with --negative; 1 = off",
    .extra_help = "  --noise-dtype f32|bf16  draw the initial noise as a float32 (default) or a bfloat16\n"
                  "                        reference pipeline does (the two differ for the same seed)\n"
                  "  --image FILE          condition pictures (editing), up to 8, \"Picture 1\" first; the size\n"
                  "                        then defaults to the last one's at the output resolution's area\n"
                  "  --output-resolution N the side whose square is each condition picture's area, and so the\n"
                  "                        default size's with --image (default 1024, the reference's)\n"
                  "  --vl-min-pixels N     the vision processor's lower pixel bound (default: the pack's\n"
                  "                        processor's); a picture it would enlarge is refused\n",
    .extra_size = sizeof(qi21_extra),
    .extra_init = qi21_extra_init,
    .extra_parse = qi21_extra_parse,
    .open = qi21_open,
    .check = qi21_check,
    .load_weights = qi21_load_weights,
    .generate = qi21_generate,
    .free = qi21_free,
    .residency = qi21_residency,
};

/* ---- Z-Image ---- */

typedef struct zimage_extra {
    double cfg_normalization, cfg_truncation, shift;
} zimage_extra;

static void zimage_extra_init(void *extra) {
    cq_zimage_gen_opts d;
    cq_zimage_gen_opts_init(&d);
    *(zimage_extra *)extra = (zimage_extra){.cfg_normalization = d.cfg_normalization,
                                            .cfg_truncation = d.cfg_truncation, .shift = d.shift};
}

static bool number(const char *val, double *out) {
    char *end;
    if (!val || !*val) return false;
    *out = strtod(val, &end);
    return !*end && isfinite(*out);
}

static int zimage_extra_parse(void *extra, const char *opt, const char *val) {
    zimage_extra *e = extra;
    double v;
    if (strcmp(opt, "--cfg-normalization") == 0) {
        /* a bare flag is the reference's cfg_normalization=True, i.e. 1 */
        if (!number(val, &v)) {
            e->cfg_normalization = 1.0;
            return 1;
        }
        if (!(v >= 0.0 && v <= 100.0)) {
            cq_fail(CQ_ERR_INVALID_ARG, "--cfg-normalization wants a number in [0, 100] (0: off), got '%s'", val);
            return -1;
        }
        e->cfg_normalization = v;
        return 2;
    }
    if (strcmp(opt, "--cfg-truncation") == 0) {
        if (!number(val, &v)) {
            cq_fail(CQ_ERR_INVALID_ARG, "--cfg-truncation wants a number (1: guidance at every step), got '%s'",
                    val ? val : "");
            return -1;
        }
        e->cfg_truncation = v;
        return 2;
    }
    if (strcmp(opt, "--shift") == 0) {
        if (!number(val, &v) || !(v > 0.0 && v <= 100.0)) {
            cq_fail(CQ_ERR_INVALID_ARG, "--shift wants a number in (0, 100], got '%s'", val ? val : "");
            return -1;
        }
        e->shift = v;
        return 2;
    }
    return 0;
}

static cq_zimage_gen_opts zimage_opts(const cq_image_req *o) {
    cq_zimage_gen_opts g;
    cq_zimage_gen_opts_init(&g);
    const zimage_extra *e = o->extra;
    g.prompt = o->prompt;
    g.negative = o->negative;
    g.width = o->width;
    g.height = o->height;
    g.steps = o->steps;
    g.seed = o->seed;
    g.guidance = o->guidance;
    if (e) {
        g.cfg_normalization = e->cfg_normalization;
        g.cfg_truncation = e->cfg_truncation;
        g.shift = e->shift;
    }
    g.on_step = o->on_step;
    g.on_phase = o->on_phase;
    g.user = o->user;
    return g;
}

static cq_status zimage_open(const cq_cmf *cmf, void **pipe) {
    cq_zimage_pipe *p = NULL;
    cq_status s = cq_zimage_pipe_open(cmf, &p);
    *pipe = p;
    return s;
}
static cq_status zimage_check(void *pipe, const cq_image_req *o) {
    const cq_zimage_gen_opts g = zimage_opts(o);
    return cq_zimage_pipe_check(pipe, &g);
}
static cq_status zimage_load_weights(void *pipe, cq_backend *be) { return cq_zimage_pipe_load_weights(pipe, be); }
static const cq_resid *zimage_residency(const void *pipe) { return cq_zimage_pipe_residency(pipe); }
static cq_status zimage_generate(void *pipe, const cq_image_req *o, cq_image_result *res) {
    const cq_zimage_gen_opts g = zimage_opts(o);
    return cq_zimage_pipe_generate(pipe, &g, res);
}
static void zimage_free(void *pipe) { cq_zimage_pipe_free(pipe); }

/* Without pack defaults: the reference pipeline's own call defaults (a pack converted by cortiq carries the
 * recipe of its model: Turbo 8 steps without guidance, base 28 steps at guidance 4). */
static const cq_image_arch k_zimage = {
    .default_width = 1024,
    .default_height = 1024,
    .default_steps = 50,
    .default_guidance = 5.0,
    .size_multiple = 16,
    .min_steps = 1,
    .guidance_help = "pos + G (pos - neg) with --negative (default: the empty prompt); 0 = off",
    .extra_help = "  --cfg-normalization [C]  cap the guided prediction's norm at C times the positive one's\n"
                  "                        (C = 1 when no number follows, the reference's True; default: off)\n"
                  "  --cfg-truncation F    guidance only at steps whose progress (1000 - t) / 1000 is at most F\n"
                  "                        (default 1: every step)\n"
                  "  --shift S             the schedule's static shift (default: the pack's, else the scheduler's:\n"
                  "                        3 for Turbo, 6 for base)\n",
    .extra_size = sizeof(zimage_extra),
    .extra_init = zimage_extra_init,
    .extra_parse = zimage_extra_parse,
    .open = zimage_open,
    .check = zimage_check,
    .load_weights = zimage_load_weights,
    .generate = zimage_generate,
    .free = zimage_free,
    .residency = zimage_residency,
};

/* ---- Qwen-Image ---- */

/* The edit archs' own options: the pictures' areas (the reference's are fixed; smaller ones serve small models). */
typedef struct qimage_extra {
    double vae_area, vl_area;
    bool rope_3d;
} qimage_extra;

static cq_qimage_gen_opts qimage_opts(const cq_image_req *o) {
    const qimage_extra *x = o->extra;
    return (cq_qimage_gen_opts){.prompt = o->prompt, .negative = o->negative, .width = o->width, .height = o->height,
                                .steps = o->steps, .seed = o->seed, .guidance = o->guidance, .on_step = o->on_step,
                                .on_phase = o->on_phase, .user = o->user, .images = o->images,
                                .n_images = o->n_images, .vae_area = x ? x->vae_area : 0, .vl_area = x ? x->vl_area : 0,
                                .vl_rope_3d = x ? x->rope_3d : false};
}

static int area_opt(double *dst, const char *opt, const char *val) {
    double v;
    if (!number(val, &v) || !(v >= 32.0 * 32.0 && v <= 16384.0 * 16384.0) || v != floor(v)) {
        cq_fail(CQ_ERR_INVALID_ARG, "%s wants a whole number of pixels in [1024, 16384^2] (e.g. 1048576 for 1024^2), "
                "got '%s'", opt, val ? val : "");
        return -1;
    }
    *dst = v;
    return 2;
}

static int qimage_edit_parse(void *extra, const char *opt, const char *val) {
    qimage_extra *e = extra;
    if (strcmp(opt, "--vae-area") == 0) return area_opt(&e->vae_area, opt, val);
    if (strcmp(opt, "--vl-rope-3d") == 0) {
        e->rope_3d = true;
        return 1;
    }
    return 0;
}

static int qimage_edit_plus_parse(void *extra, const char *opt, const char *val) {
    qimage_extra *e = extra;
    if (strcmp(opt, "--vl-area") == 0) return area_opt(&e->vl_area, opt, val);
    return qimage_edit_parse(extra, opt, val);
}

static cq_status qimage_open(const cq_cmf *cmf, void **pipe) {
    cq_qimage_pipe *p = NULL;
    cq_status s = cq_qimage_pipe_open(cmf, &p);
    *pipe = p;
    return s;
}
static cq_status qimage_check(void *pipe, const cq_image_req *o) {
    const cq_qimage_gen_opts g = qimage_opts(o);
    return cq_qimage_pipe_check(pipe, &g);
}
static cq_status qimage_load_weights(void *pipe, cq_backend *be) { return cq_qimage_pipe_load_weights(pipe, be); }
static const cq_resid *qimage_residency(const void *pipe) { return cq_qimage_pipe_residency(pipe); }
static cq_status qimage_generate(void *pipe, const cq_image_req *o, cq_image_result *res) {
    const cq_qimage_gen_opts g = qimage_opts(o);
    return cq_qimage_pipe_generate(pipe, &g, res);
}
static void qimage_free(void *pipe) { cq_qimage_pipe_free(pipe); }

/* Qwen-Image's guidance, text to image and edit alike */
static const char k_qimage_guidance_help[] = "true CFG with --negative (\" \" for an empty one): neg + G (pos - neg), "
                                             "each token rescaled to the positive's norm; 1 = off";

/* The reference pipeline's call defaults: 1024 x 1024, 50 steps, true_cfg_scale 4 (guided only with a negative
 * prompt). */
static const cq_image_arch k_qimage = {
    .default_width = 1024,
    .default_height = 1024,
    .default_steps = 50,
    .default_guidance = 4.0,
    .size_multiple = 16,
    .min_steps = 2,
    .guidance_help = k_qimage_guidance_help,
    .open = qimage_open,
    .check = qimage_check,
    .load_weights = qimage_load_weights,
    .generate = qimage_generate,
    .free = qimage_free,
    .residency = qimage_residency,
};

/* The edit pipelines' call defaults: the size from the last input picture, 50 steps, true_cfg_scale 4 (guided only
 * with a negative prompt). */
static const cq_image_arch k_qimage_edit = {
    .default_steps = 50,
    .default_guidance = 4.0,
    .size_multiple = 16,
    .min_steps = 2,
    .max_images = 1,
    .guidance_help = k_qimage_guidance_help,
    .extra_help = "  --vae-area PIXELS     the area the input picture is resized to, for the VAE, the vision tower\n"
                  "                        and the default output size (default 1048576 = 1024^2, the reference's)\n"
                  "  --vl-rope-3d          the text tower reads the picture's rows at Qwen2.5-VL's 3-D positions\n"
                  "                        (default: 0..n-1 on every axis, as the reference runs on transformers 5)\n",
    .extra_size = sizeof(qimage_extra),
    .extra_parse = qimage_edit_parse,
    .open = qimage_open,
    .check = qimage_check,
    .load_weights = qimage_load_weights,
    .generate = qimage_generate,
    .free = qimage_free,
    .residency = qimage_residency,
};

static const cq_image_arch k_qimage_edit_plus = {
    .default_steps = 50,
    .default_guidance = 4.0,
    .size_multiple = 16,
    .min_steps = 2,
    .max_images = CQ_QIMAGE_EDIT_MAX_IMAGES,
    .guidance_help = k_qimage_guidance_help,
    .extra_help = "  --vae-area PIXELS     the area each input picture is resized to for the VAE, and the last one's\n"
                  "                        for the default output size (default 1048576 = 1024^2, the reference's)\n"
                  "  --vl-area PIXELS      the area each input picture is resized to for the vision tower\n"
                  "                        (default 147456 = 384^2, the reference's)\n"
                  "  --vl-rope-3d          the text tower reads the pictures' rows at Qwen2.5-VL's 3-D positions\n"
                  "                        (default: 0..n-1 on every axis, as the reference runs on transformers 5)\n",
    .extra_size = sizeof(qimage_extra),
    .extra_parse = qimage_edit_plus_parse,
    .open = qimage_open,
    .check = qimage_check,
    .load_weights = qimage_load_weights,
    .generate = qimage_generate,
    .free = qimage_free,
    .residency = qimage_residency,
};

/* ---- Qwen3 ---- */

/* The tower under the backend's budget: planes when they fit with a 4096-token cache and a 512-row
 * prefill, else its codec on the device (residency.h). */
static cq_status qwen3_load(const cq_cmf *cmf, cq_backend *be, void **model, cq_causal_lm *lm, cq_resid_plan *plan) {
    *model = NULL;
    cq_qwen3_config c;
    CQ_TRY(cq_qwen3_parse_config(cmf, "", &c));
    cq_resid_need n = {0};
    const uint64_t budget = cq_backend_mem_budget(be);
    if (budget) {
        const size_t a = cq_act_dtype_size(cq_backend_act_dtype(be));
        /* the token table is read by rows only, unless it is the head's matrix too */
        CQ_TRY(cq_resid_need_part(&n, be, cmf, CQ_PART_TEXT, "", c.tie_embeddings ? NULL : "embed_tokens.weight"));
        n.act[CQ_RESID_TEXT] = cq_resid_act_tower(512, c.hidden, c.intermediate, a) +
                               4096ull * (uint64_t)c.n_layers * 2ull * (uint64_t)c.n_kv_heads * (uint64_t)c.head_dim * a;
    }
    CQ_TRY(cq_resid_plan_single(&n, budget, "the language model", plan));
    const cq_weight_mode before = cq_backend_weight_mode(be);
    CQ_TRY(cq_resid_apply_mode(be, plan, CQ_PART_TEXT));
    cq_qwen3 *m = NULL;
    cq_status s = cq_qwen3_load(cmf, "", be, &m);
    cq_status s2 = cq_backend_set_weight_mode(be, before);
    if (s == CQ_OK) s = s2;
    if (s != CQ_OK) {
        cq_qwen3_free(m);
        return s;
    }
    *model = m;
    *lm = cq_qwen3_causal_lm(m);
    return CQ_OK;
}
static void qwen3_free(void *model) { cq_qwen3_free(model); }

static const cq_chat_arch k_qwen3 = {.load = qwen3_load, .free = qwen3_free};

/* ---- the table ---- */

static const cq_arch_entry k_models[] = {
    {"qwen_image21", "Qwen-Image-2.1", CQ_TASK_IMAGE, &k_qi21, NULL},
    {"z_image", "Z-Image", CQ_TASK_IMAGE, &k_zimage, NULL},
    {"qwen_image", "Qwen-Image", CQ_TASK_IMAGE, &k_qimage, NULL},
    {"qwen_image_edit", "Qwen-Image-Edit", CQ_TASK_IMAGE, &k_qimage_edit, NULL},
    {"qwen_image_edit_plus", "Qwen-Image-Edit-Plus (Edit-2509, Edit-2511)", CQ_TASK_IMAGE, &k_qimage_edit_plus, NULL},
    {"qwen3", "Qwen3", CQ_TASK_CHAT, NULL, &k_qwen3},
    {"qwen3_vl", "Qwen3-VL (its language model)", CQ_TASK_CHAT, NULL, &k_qwen3},
    {"qwen3_vl_text", "Qwen3-VL (its language model)", CQ_TASK_CHAT, NULL, &k_qwen3},
};

size_t cq_arch_count(void) { return CQ_ARRAY_LEN(k_models); }

const cq_arch_entry *cq_arch_at(size_t i) { return i < CQ_ARRAY_LEN(k_models) ? &k_models[i] : NULL; }

const cq_arch_entry *cq_arch_find(const char *arch, cq_arch_task task) {
    for (size_t i = 0; arch && i < CQ_ARRAY_LEN(k_models); i++)
        if (k_models[i].task == task && strcmp(k_models[i].arch, arch) == 0) return &k_models[i];
    return NULL;
}

const char *cq_arch_list(cq_arch_task task, char *buf, size_t len) {
    size_t o = 0;
    if (len) buf[0] = 0;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_models); i++) {
        if (k_models[i].task != task) continue;
        int n = snprintf(buf + o, len > o ? len - o : 0, "%s%s", o ? ", " : "", k_models[i].arch);
        if (n < 0 || (size_t)n >= (len > o ? len - o : 0)) break;
        o += (size_t)n;
    }
    return buf;
}

cq_status cq_arch_for_pack(const cq_cmf *cmf, const char *path, cq_arch_task task, const cq_arch_entry **out) {
    *out = NULL;
    if ((unsigned)task >= CQ_TASK_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "model registry: unknown task %d", task);
    cq_cmf_info info;
    CQ_TRY(cq_cmf_get_info(cmf, &info));
    *out = cq_arch_find(info.arch_name, task);
    if (*out) return CQ_OK;
    char list[512];
    cq_arch_list(task, list, sizeof list);
    static const char *const what[CQ_TASK_COUNT] = {"a pipeline", "a language model"};
    static const char *const how[CQ_TASK_COUNT] = {"cortiq imagine draws with", "cortiq run chats with"};
    return cq_fail(CQ_ERR_UNSUPPORTED, "'%s' is %s of arch '%s'; %s: %s", path ? path : "the pack", what[task],
                   info.arch_name ? info.arch_name : "(none)", how[task], list);
}
