/*
 * qimage_edit.c — Qwen-Image's editing pipelines (Edit, Edit-Plus: see
 * qimage_pipe.h) over the text-to-image pipe's parts and the generic
 * generation (image_gen.h), which sees two components of its own here:
 *  - a text encoder whose template holds the pictures' expanded pads, whose
 *    tower reads the vision rows in their place with the 3-D RoPE index, and
 *    which drops 64 rows; the vision tower runs once per request, at the
 *    first prompt encoded (positive and negative prompts read the same
 *    pictures);
 *  - a denoiser that runs [target | condition tokens] with one grid per
 *    picture and returns the target's rows; the condition tokens are copied
 *    in once per conditioning, the target's each step (no allocation in the
 *    step loop).
 * Everything input-dependent is checked before any weight is read: the
 * pictures' files, their count, the sizes both routes make, the tokens of
 * each prompt and the denoiser's layout.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "image/image_read.h"
#include "pipelines/qimage_pipe_impl.h"

#define EDIT_NAME "qwen_image edit pipeline"

/* The edit pipelines' system turn, shared by Edit and Edit-Plus; the picture placeholders go after "user\n". */
static const char k_head[] =
    "<|im_start|>system\nDescribe the key features of the input image (color, shape, size, texture, objects, "
    "background), then explain how the user's text instruction should alter or modify the image. Generate a new "
    "image that meets the user's requirements while maintaining consistency with the original input where "
    "appropriate.<|im_end|>\n<|im_start|>user\n";
static const char k_tail[] = "<|im_end|>\n<|im_start|>assistant\n";

static const char *kind_name(cq_qimage_kind k) {
    return k == CQ_QIMAGE_EDIT ? "Qwen-Image-Edit" : "Qwen-Image-Edit-Plus";
}

cq_status cq_qimage_edit_open(cq_qimage_pipe *p) {
    CQ_TRY(cq_qwen25vl_vision_parse_config(p->cmf, "te.", &p->vcfg));
    cq_qwen_vl_proc_defaults(&p->proc);
    const cq_tensor_view *v = cq_cmf_find(p->cmf, "processor.config_json");
    if (v) {
        CQ_TRY(cq_cmf_check_tensor(v));
        CQ_TRY(cq_qwen_vl_proc_parse((const char *)v->data, (size_t)v->nbytes, &p->proc));
    }
    if (p->proc.patch_size != p->vcfg.patch || p->proc.merge_size != p->vcfg.merge ||
        p->proc.temporal_patch_size != p->vcfg.temporal_patch || p->vcfg.in_channels != 3)
        return cq_fail(CQ_ERR_SHAPE, EDIT_NAME ": the processor makes patches of %d px, %d frames, merged %dx%d; the "
                       "vision tower reads %d px, %d frames, %dx%d, %d channels", p->proc.patch_size,
                       p->proc.temporal_patch_size, p->proc.merge_size, p->proc.merge_size, p->vcfg.patch,
                       p->vcfg.temporal_patch, p->vcfg.merge, p->vcfg.merge, p->vcfg.in_channels);
    if (p->vcfg.out_hidden != p->tcfg.hidden)
        return cq_fail(CQ_ERR_SHAPE, EDIT_NAME ": the vision tower gives %d-wide rows; the language model is %d wide",
                       p->vcfg.out_hidden, p->tcfg.hidden);
    if (!p->tcfg.mrope_section[0] && !p->tcfg.mrope_section[1] && !p->tcfg.mrope_section[2])
        return cq_fail(CQ_ERR_SHAPE, EDIT_NAME ": the language model has no mrope_section (the pictures' rows need "
                       "its 3-D positions)");
    p->image_pad = cq_tokenizer_token_to_id(p->tok, "<|image_pad|>", 13);
    p->vision_start = cq_tokenizer_token_to_id(p->tok, "<|vision_start|>", 16);
    p->vision_end = cq_tokenizer_token_to_id(p->tok, "<|vision_end|>", 14);
    if (p->image_pad < 0 || p->vision_start < 0 || p->vision_end < 0)
        return cq_fail(CQ_ERR_MISSING, EDIT_NAME ": the tokenizer lacks <|image_pad|>, <|vision_start|> or "
                       "<|vision_end|>");
    return CQ_OK;
}

/* ---- the pictures ---- */
void cq_qimage_edit_inputs_free(cq_qimage_edit_inputs *in) {
    if (!in) return;
    for (int i = 0; i < CQ_QIMAGE_EDIT_MAX_IMAGES; i++) {
        cq_free(in->pic[i].vl_rgb);
        cq_free(in->pic[i].pixel_values);
        cq_free(in->pic[i].vae);
    }
    memset(in, 0, sizeof *in);
}

static double area_or(double a, double def) { return a > 0.0 ? a : def; }

static cq_status check_areas(const cq_qimage_gen_opts *o) {
    const double lim = (double)CQ_GEN_SIDE_MAX * CQ_GEN_SIDE_MAX;
    if (o->vae_area < 0 || o->vae_area > lim || (o->vae_area > 0 && o->vae_area < 32.0 * 32.0) || isnan(o->vae_area))
        return cq_fail(CQ_ERR_INVALID_ARG, "the VAE picture's area %g is outside [32^2, %d^2] pixels", o->vae_area,
                       CQ_GEN_SIDE_MAX);
    if (o->vl_area < 0 || o->vl_area > lim || (o->vl_area > 0 && o->vl_area < 32.0 * 32.0) || isnan(o->vl_area))
        return cq_fail(CQ_ERR_INVALID_ARG, "the VL picture's area %g is outside [32^2, %d^2] pixels", o->vl_area,
                       CQ_GEN_SIDE_MAX);
    return CQ_OK;
}

static cq_status one_picture(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, const char *path,
                             cq_qimage_edit_picture *pic) {
    cq_image8 img = {0};
    CQ_TRY(cq_image_read_rgb(path, &img));
    pic->width = img.width;
    pic->height = img.height;
    const cq_qwen_edit_kind k = p->kind == CQ_QIMAGE_EDIT ? CQ_QWEN_EDIT : CQ_QWEN_EDIT_PLUS;
    cq_qwen_edit_image ep = {0};
    cq_status s = cq_qwen_edit_prepare_areas(k, img.pixels, img.width, img.height,
                                             area_or(o->vae_area, CQ_QWEN_EDIT_VAE_AREA),
                                             area_or(o->vl_area, CQ_QWEN_EDIT_PLUS_VL_AREA), &ep);
    cq_image8_free(&img);
    cq_qwen_vl_image vl = {0};
    if (s == CQ_OK) s = cq_qwen_vl_preprocess(&p->proc, ep.vl_rgb, ep.vl_w, ep.vl_h, &vl);
    if (s == CQ_OK) {
        pic->vl_w = ep.vl_w;
        pic->vl_h = ep.vl_h;
        pic->vl_rgb = ep.vl_rgb;
        pic->vae_w = ep.vae_w;
        pic->vae_h = ep.vae_h;
        pic->vae = ep.vae;
        ep.vl_rgb = NULL;
        ep.vae = NULL;
        for (int a = 0; a < 3; a++) pic->grid[a] = vl.grid_thw[a];
        pic->n_patches = vl.n_patches;
        pic->pixel_values = vl.pixel_values;
        vl.pixel_values = NULL;
    }
    cq_qwen_vl_image_free(&vl);
    cq_qwen_edit_image_free(&ep);
    return s;
}

cq_status cq_qimage_edit_inputs_make(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_qimage_edit_inputs *in) {
    memset(in, 0, sizeof *in);
    if (!p || p->kind == CQ_QIMAGE_T2I) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": not an editing pipeline");
    const int max = p->kind == CQ_QIMAGE_EDIT ? 1 : CQ_QIMAGE_EDIT_MAX_IMAGES;
    if (o->n_images < 1 || !o->images)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s edits pictures: give the input picture with --image FILE (%d at most)",
                       kind_name(p->kind), max);
    if (o->n_images > max)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s takes at most %d input picture%s (got %d)%s", kind_name(p->kind), max,
                       max == 1 ? "" : "s", o->n_images,
                       max == 1 ? "; Edit-Plus packs (Edit-2509, Edit-2511) take several" : "");
    CQ_TRY(check_areas(o));
    in->rope_3d = o->vl_rope_3d;
    for (int i = 0; i < o->n_images; i++) {
        if (!o->images[i]) {
            cq_qimage_edit_inputs_free(in);
            return cq_fail(CQ_ERR_INVALID_ARG, "input picture %d: no file name", i + 1);
        }
        const cq_status s = one_picture(p, o, o->images[i], &in->pic[i]);
        in->n = i + 1;
        if (s != CQ_OK) {
            cq_qimage_edit_inputs_free(in);
            return cq_fail_prefix(s, "input picture %d: ", i + 1);
        }
        const cq_qimage_edit_picture *pc = &in->pic[i];
        const int m2 = p->vcfg.merge * p->vcfg.merge;
        in->n_patches += pc->n_patches;
        in->n_pad_rows += (int)(pc->n_patches / m2);
        in->n_cond_tokens += (pc->vae_h / 16) * (pc->vae_w / 16);
    }
    int32_t grid[CQ_QIMAGE_EDIT_MAX_IMAGES][3];
    for (int i = 0; i < in->n; i++)
        for (int a = 0; a < 3; a++) grid[i][a] = in->pic[i].grid[a];
    int64_t rows = 0;
    cq_status s = cq_qwen25vl_vision_rows(&p->vcfg, (const int32_t(*)[3])grid, in->n, &rows);
    if (s == CQ_OK && rows != in->n_patches)
        s = cq_fail(CQ_ERR_INTERNAL, EDIT_NAME ": %lld patches, the grids make %lld", (long long)in->n_patches,
                    (long long)rows);
    /* the output size: the request's, else the last picture's at the VAE area (the only one for Edit), floored */
    const cq_qimage_edit_picture *last = &in->pic[in->n - 1];
    int dw = 0, dh = 0;
    if (s == CQ_OK)
        s = cq_qwen_calculate_dimensions(area_or(o->vae_area, CQ_QWEN_EDIT_VAE_AREA), last->width, last->height,
                                         &dw, &dh);
    if (s == CQ_OK) {
        in->width = (o->width > 0 ? o->width : dw) / 16 * 16;
        in->height = (o->height > 0 ? o->height : dh) / 16 * 16;
        if (o->width > 0 && o->width % 16) in->width = o->width; /* refused by the size check with its message */
        if (o->height > 0 && o->height % 16) in->height = o->height;
    }
    if (s != CQ_OK) cq_qimage_edit_inputs_free(in);
    return s;
}

/* ---- the text route ---- */
static cq_status append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 1024;
        while (c < *len + n + 1) c *= 2;
        char *b = cq_realloc(*buf, c);
        if (!b) return CQ_ERR_NOMEM;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return CQ_OK;
}

cq_status cq_qimage_edit_tokens(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, const char *prompt,
                                int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!prompt) prompt = "";
    char *text = NULL;
    size_t len = 0, cap = 0;
    cq_status s = append(&text, &len, &cap, k_head, strlen(k_head));
    const int m2 = p->vcfg.merge * p->vcfg.merge;
    for (int i = 0; s == CQ_OK && i < in->n; i++) {
        char pre[48];
        if (p->kind == CQ_QIMAGE_EDIT_PLUS) {
            const int k = snprintf(pre, sizeof pre, "Picture %d: ", i + 1);
            s = append(&text, &len, &cap, pre, (size_t)k);
        }
        if (s == CQ_OK) s = append(&text, &len, &cap, "<|vision_start|>", 16);
        for (int64_t r = 0; s == CQ_OK && r < in->pic[i].n_patches / m2; r++)
            s = append(&text, &len, &cap, "<|image_pad|>", 13);
        if (s == CQ_OK) s = append(&text, &len, &cap, "<|vision_end|>", 14);
    }
    if (s == CQ_OK) s = append(&text, &len, &cap, prompt, strlen(prompt));
    if (s == CQ_OK) s = append(&text, &len, &cap, k_tail, strlen(k_tail));
    cq_tokens t = {0};
    if (s == CQ_OK) s = cq_tokenizer_encode(p->tok, text, len, CQ_TOK_ADD_SPECIAL, &t);
    cq_free(text);
    if (s != CQ_OK) {
        cq_tokens_free(&t);
        return s;
    }
    /* the template's own placeholders and nothing more: a prompt holding one would shift every picture */
    int64_t pads = 0, starts = 0, ends = 0;
    for (size_t i = 0; i < t.n; i++) {
        pads += t.ids[i] == p->image_pad;
        starts += t.ids[i] == p->vision_start;
        ends += t.ids[i] == p->vision_end;
    }
    if (pads != in->n_pad_rows || starts != in->n || ends != in->n)
        s = cq_fail(CQ_ERR_INVALID_ARG, "the prompt contains <|image_pad|>, <|vision_start|> or <|vision_end|>, "
                    "placeholders of the input pictures; prompts cannot hold them");
    else if (t.n > CQ_QIMAGE_EDIT_MAX_TOKENS)
        s = cq_fail(CQ_ERR_INVALID_ARG, "the prompt with the template and the pictures' %d rows is %zu tokens; the "
                    "limit is %d", in->n_pad_rows, t.n, CQ_QIMAGE_EDIT_MAX_TOKENS);
    else if ((int64_t)t.n <= CQ_QIMAGE_EDIT_DROP_ROWS)
        s = cq_fail(CQ_ERR_INTERNAL, EDIT_NAME ": the template makes %zu tokens, no row after the %d dropped", t.n,
                    CQ_QIMAGE_EDIT_DROP_ROWS);
    if (s != CQ_OK) {
        cq_tokens_free(&t);
        return s;
    }
    *ids = t.ids;
    *n = (int)t.n;
    return CQ_OK;
}

static void grids_of(const cq_qimage_edit_inputs *in, int32_t (*grid)[3]) {
    for (int i = 0; i < in->n; i++)
        for (int a = 0; a < 3; a++) grid[i][a] = in->pic[i].grid[a];
}

cq_status cq_qimage_edit_vision(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, float **rows) {
    *rows = NULL;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    if (!p->vis) return cq_fail(CQ_ERR_INVALID_ARG, EDIT_NAME ": the vision tower is not loaded");
    const size_t pd = (size_t)cq_qwen25vl_vision_patch_dim(&p->vcfg);
    float *pix = cq_mallocn((size_t)in->n_patches, pd * sizeof(float));
    float *out = cq_mallocn((size_t)in->n_pad_rows, (size_t)p->vcfg.out_hidden * sizeof(float));
    if (!pix || !out) {
        cq_free(pix);
        cq_free(out);
        return CQ_ERR_NOMEM;
    }
    size_t off = 0;
    for (int i = 0; i < in->n; i++) {
        memcpy(pix + off * pd, in->pic[i].pixel_values, (size_t)in->pic[i].n_patches * pd * sizeof(float));
        off += (size_t)in->pic[i].n_patches;
    }
    int32_t grid[CQ_QIMAGE_EDIT_MAX_IMAGES][3];
    grids_of(in, grid);
    const cq_qwen25vl_vision_outputs vo = {.out = out};
    cq_status s = cq_qwen25vl_vision_forward(p->vis, pix, in->n_patches, (const int32_t(*)[3])grid, in->n, &vo);
    cq_free(pix);
    if (s != CQ_OK) {
        cq_free(out);
        return s;
    }
    *rows = out;
    return CQ_OK;
}

cq_status cq_qimage_edit_encode(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, const float *vision,
                                const char *prompt, float **embeds, int *n_rows) {
    *embeds = NULL;
    *n_rows = 0;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    if (!p->te) return cq_fail(CQ_ERR_INVALID_ARG, EDIT_NAME ": the text encoder is not loaded");
    int32_t *ids = NULL;
    int n = 0;
    CQ_TRY(cq_qimage_edit_tokens(p, in, prompt, &ids, &n));
    int32_t grid[CQ_QIMAGE_EDIT_MAX_IMAGES][3];
    grids_of(in, grid);
    const int hidden = p->tcfg.hidden;
    int32_t *pos = cq_mallocn((size_t)n, 3 * sizeof(int32_t));
    float *all = cq_mallocn((size_t)n, (size_t)hidden * sizeof(float));
    cq_status s = pos && all ? CQ_OK : CQ_ERR_NOMEM;
    /* The reference (transformers 5.17 called by diffusers without mm_token_type_ids) gives every row the plain
     * position 0..n-1 on all three axes; Qwen2.5-VL's 3-D index (the pictures' rows on their grid) on request. */
    if (s == CQ_OK && in->rope_3d)
        s = cq_qwen3_rope_index(ids, n, p->image_pad, p->vision_start, (const int32_t(*)[3])grid, in->n,
                                p->vcfg.merge, pos, NULL);
    else if (s == CQ_OK)
        for (int a = 0; a < 3; a++)
            for (int i = 0; i < n; i++) pos[(size_t)a * n + i] = i;
    if (s == CQ_OK) {
        const cq_qwen3_mm mm = {.positions = pos, .image_token = p->image_pad, .image_embeds = vision,
                                .n_image_rows = in->n_pad_rows};
        const cq_qwen3_outputs out = {.layer = p->tcfg.n_layers, .normed = all}; /* hidden_states[-1] */
        s = cq_qwen3_forward_mm(p->te, ids, n, &mm, &out);
    }
    cq_free(ids);
    cq_free(pos);
    if (s != CQ_OK) {
        cq_free(all);
        return s;
    }
    const int rows = n - CQ_QIMAGE_EDIT_DROP_ROWS; /* every row after the drop, the pictures' included */
    memmove(all, all + (size_t)CQ_QIMAGE_EDIT_DROP_ROWS * hidden, (size_t)rows * hidden * sizeof(float));
    *embeds = all;
    *n_rows = rows;
    return CQ_OK;
}

/* ---- the VAE route ---- */
cq_status cq_qimage_edit_cond_latents(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, float **tokens) {
    *tokens = NULL;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_CODEC));
    const cq_latent_codec *c = &p->codec;
    if (!c->self || !c->encode) return cq_fail(CQ_ERR_INVALID_ARG, EDIT_NAME ": the VAE encoder is not loaded");
    const int tc = 4 * c->channels;
    float *out = cq_mallocn((size_t)in->n_cond_tokens, (size_t)tc * sizeof(float));
    if (!out) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    size_t off = 0;
    for (int i = 0; i < in->n && s == CQ_OK; i++) {
        const cq_qimage_edit_picture *pc = &in->pic[i];
        const int lh = pc->vae_h / c->factor, lw = pc->vae_w / c->factor;
        float *mom = cq_mallocn((size_t)2 * c->channels, (size_t)lh * lw * sizeof(float));
        if (!mom) s = CQ_ERR_NOMEM;
        if (s == CQ_OK) s = c->encode(c->self, pc->vae, pc->vae_h, pc->vae_w, mom);
        /* the posterior's mode is its mean, the first channels; then (z - mean) / std and the 2x2 packing */
        if (s == CQ_OK) s = c->normalize(c->self, mom, lh, lw);
        if (s == CQ_OK) c->pack(c->self, mom, out + off * (size_t)tc, lh, lw);
        off += (size_t)(lh / 2) * (lw / 2);
        cq_free(mom);
    }
    if (s != CQ_OK) {
        cq_free(out);
        return s;
    }
    *tokens = out;
    return CQ_OK;
}

/* ---- the checks ---- */
static cq_status layout_for(const cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, int width, int height,
                            int n_txt, int32_t (*shapes)[3], cq_qimage_layout *lay) {
    (void)p;
    shapes[0][0] = 1;
    shapes[0][1] = height / 16;
    shapes[0][2] = width / 16;
    for (int i = 0; i < in->n; i++) {
        shapes[1 + i][0] = 1;
        shapes[1 + i][1] = in->pic[i].vae_h / 16;
        shapes[1 + i][2] = in->pic[i].vae_w / 16;
    }
    *lay = (cq_qimage_layout){.n_images = 1 + in->n, .img_shapes = (const int32_t(*)[3])shapes, .n_txt = n_txt};
    return cq_qimage_layout_sizes(lay, NULL, NULL);
}

static cq_status check_prompt(cq_qimage_pipe *p, const cq_qimage_edit_inputs *in, const char *what,
                              const char *prompt, int *total) {
    const long bad = prompt ? cq_utf8_invalid_at(prompt) : -1;
    if (bad >= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "the %s is not valid UTF-8 (byte %ld of %zu)", what, bad + 1, strlen(prompt));
    int32_t *ids = NULL;
    int n = 0;
    cq_status s = cq_qimage_edit_tokens(p, in, prompt, &ids, &n);
    cq_free(ids);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    int32_t shapes[CQ_QIMAGE_EDIT_MAX_IMAGES + 1][3];
    cq_qimage_layout lay;
    s = layout_for(p, in, in->width, in->height, n - CQ_QIMAGE_EDIT_DROP_ROWS, shapes, &lay);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s (%d text rows) with the pictures: ", what,
                                          n - CQ_QIMAGE_EDIT_DROP_ROWS);
    *total = n;
    return CQ_OK;
}

/* Everything the request needs checked, and its pictures (*in, the caller frees them). *total: the longer
 * prompt's tokens. */
static cq_status check_request(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_qimage_edit_inputs *in,
                               int *total) {
    CQ_TRY(cq_qimage_edit_inputs_make(p, o, in));
    cq_qimage_gen_opts q = *o;
    q.width = in->width;
    q.height = in->height;
    cq_status s = cq_qimage_check_common(p, &q);
    int a = 0, b = 0;
    if (s == CQ_OK) s = check_prompt(p, in, "prompt", o->prompt, &a);
    if (s == CQ_OK && o->negative && o->guidance > 1.0) s = check_prompt(p, in, "negative prompt", o->negative, &b);
    if (s != CQ_OK) cq_qimage_edit_inputs_free(in);
    *total = a > b ? a : b;
    return s;
}

cq_status cq_qimage_edit_check(cq_qimage_pipe *p, const cq_qimage_gen_opts *o) {
    cq_qimage_edit_inputs in;
    int total = 0;
    CQ_TRY(check_request(p, o, &in, &total));
    cq_qimage_edit_inputs_free(&in);
    return CQ_OK;
}

/* ---- the components of one generation ---- */
typedef struct edit_run {
    cq_qimage_pipe *p;
    const cq_qimage_edit_inputs *in;
    float *vision;       /* the vision tower's rows, made at the first encode */
    const float *cond;   /* [n_cond_tokens][in_channels] */
} edit_run;

typedef struct edit_cond {
    cq_qimage_cond *c;
    float *x, *out;      /* [target | condition] tokens in, every token's output */
    int n_target;
} edit_cond;

static cq_status te_count(void *self, const char *prompt, int *total, int *rows) {
    edit_run *r = self;
    int32_t *ids = NULL;
    int n = 0;
    *total = *rows = 0;
    CQ_TRY(cq_qimage_edit_tokens(r->p, r->in, prompt, &ids, &n));
    cq_free(ids);
    *total = n;
    *rows = n - CQ_QIMAGE_EDIT_DROP_ROWS;
    return CQ_OK;
}

static cq_status te_encode(void *self, const char *prompt, float **out, int *n_rows) {
    edit_run *r = self;
    if (!r->vision) CQ_TRY(cq_qimage_edit_vision(r->p, r->in, &r->vision));
    return cq_qimage_edit_encode(r->p, r->in, r->vision, prompt, out, n_rows);
}

static void dn_cond_free(void *self, void *cond) {
    (void)self;
    edit_cond *c = cond;
    if (!c) return;
    cq_qimage_cond_free(c->c);
    cq_free(c->x);
    cq_free(c->out);
    cq_free(c);
}

static cq_status dn_prepare(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond) {
    edit_run *r = self;
    *cond = NULL;
    if (!r->p->dit) return cq_fail(CQ_ERR_INVALID_ARG, EDIT_NAME ": the denoiser is not loaded");
    int32_t shapes[CQ_QIMAGE_EDIT_MAX_IMAGES + 1][3];
    cq_qimage_layout lay;
    CQ_TRY(layout_for(r->p, r->in, lat_w * 8, lat_h * 8, n_rows, shapes, &lay));
    const cq_qimage_config *dc = &r->p->dcfg;
    edit_cond *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->n_target = (lat_h / 2) * (lat_w / 2);
    const size_t all = (size_t)c->n_target + (size_t)r->in->n_cond_tokens;
    c->x = cq_mallocn(all, (size_t)dc->in_channels * sizeof(float));
    c->out = cq_mallocn(all, (size_t)dc->out_dim * sizeof(float));
    cq_status s = c->x && c->out ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_qimage_prepare(r->p->dit, &lay, rows, &c->c);
    if (s != CQ_OK) {
        dn_cond_free(self, c);
        return s;
    }
    memcpy(c->x + (size_t)c->n_target * dc->in_channels, r->cond,
           (size_t)r->in->n_cond_tokens * dc->in_channels * sizeof(float));
    *cond = c;
    return CQ_OK;
}

static cq_status dn_step(void *self, void *cond, const float *x, float t, float *velocity) {
    edit_run *r = self;
    edit_cond *c = cond;
    const cq_qimage_config *dc = &r->p->dcfg;
    memcpy(c->x, x, (size_t)c->n_target * dc->in_channels * sizeof(float));
    CQ_TRY(cq_qimage_step(r->p->dit, c->c, c->x, t, c->out));
    /* the target's rows: the pipeline cuts the output before guidance and the Euler step */
    memcpy(velocity, c->out, (size_t)c->n_target * dc->out_dim * sizeof(float));
    return CQ_OK;
}

uint64_t cq_qimage_edit_text_side(const cq_qimage_pipe *p, const cq_qimage_edit_inputs *in) {
    uint64_t need = cq_resid_act_tower(in->n_patches, p->vcfg.hidden, p->vcfg.intermediate,
                                       cq_act_dtype_size(cq_backend_act_dtype(p->be)));
    for (int i = 0; i < in->n; i++) {
        const uint64_t enc = cq_resid_act_decoder((int64_t)in->pic[i].vae_w * in->pic[i].vae_h);
        if (enc > need) need = enc;
    }
    return need;
}

cq_status cq_qimage_edit_generate(cq_qimage_pipe *p, const cq_qimage_gen_opts *o, cq_image_result *res) {
    memset(res, 0, sizeof *res);
    if (!p->be || !p->resid.bound[CQ_PART_CODEC]) return cq_fail(CQ_ERR_INVALID_ARG, NAME ": the weights are not loaded");
    cq_qimage_edit_inputs in;
    int total = 0;
    CQ_TRY(check_request(p, o, &in, &total));
    const bool cfg = cq_true_cfg_wanted(o->guidance, o->negative);
    edit_run run = {.p = p, .in = &in};
    float *cond = NULL;
    cq_status s = cq_check_cancel("image generation");
    if (s == CQ_OK)
        s = cq_qimage_plan_request(p, in.width, in.height, in.n_cond_tokens, total, total - CQ_QIMAGE_EDIT_DROP_ROWS,
                                   cq_qimage_edit_text_side(p, &in));
    if (s == CQ_OK) s = cq_resid_stage(&p->resid, CQ_RESID_TEXT);
    if (s == CQ_OK) s = cq_resid_ensure(&p->resid, CQ_PART_CODEC);
    if (s == CQ_OK) s = cq_qimage_edit_cond_latents(p, &in, &cond);
    run.cond = cond;
    if (s == CQ_OK) {
        const cq_text_encoder te = {.self = &run, .width = p->tcfg.hidden, .count = te_count, .encode = te_encode};
        const cq_denoiser dn = {.self = &run, .channels = p->dcfg.in_channels, .prepare = dn_prepare,
                                .step = dn_step, .cond_free = dn_cond_free};
        const int lat_h = in.height / p->codec.factor, lat_w = in.width / p->codec.factor;
        const cq_image_job j = {
            .te = &te,
            .dn = &dn,
            .codec = &p->codec,
            .sched = &p->sched,
            .timestep = {.kind = CQ_FLOW_T_SIGMA},
            .guidance = {.kind = cfg ? CQ_GUIDANCE_CFG : CQ_GUIDANCE_NONE, .scale = o->guidance,
                         .norm = CQ_GUIDANCE_NORM_ROWS},
            .prompt = o->prompt,
            .negative = o->negative,
            .width = in.width,
            .height = in.height,
            .lat_w = lat_w,
            .lat_h = lat_h,
            .tokens = (lat_h / 2) * (lat_w / 2),
            .steps = o->steps,
            .seed = o->seed,
            .noise_dtype = CQ_TORCH_F32,
            .on_step = o->on_step,
            .on_latents = o->on_latents,
            .on_phase = o->on_phase,
            .user = o->user,
            .stage = cq_resid_gen_stage,
            .stage_user = &p->resid,
        };
        s = cq_image_job_run(&j, res);
    }
    cq_free(run.vision);
    cq_free(cond);
    cq_qimage_edit_inputs_free(&in);
    return s;
}
