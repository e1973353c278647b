/*
 * qi21_cond.c — Qwen-Image-2.1 with condition pictures (QwenImage21Pipeline's
 * image route) over the text-to-image pipe's parts and the generic
 * generation (image_gen.h), which sees two components of its own here:
 *  - a text encoder whose template holds "Picture i: " and each picture's
 *    expanded pads after "user\n", whose tower reads the Qwen3-VL vision rows
 *    in their place (with the deepstack rows added after its first layers),
 *    and which drops the system turn's rows as text to image does; the
 *    vision tower runs once per request, at the first prompt encoded (the
 *    negative prompt reads the same pictures);
 *  - a denoiser whose prefix is [text rows with the pads' slots | the
 *    pictures' latent tokens], cached once per prompt (causal condition),
 *    stepped with the target's tokens alone.
 * The pictures: each made RGBA, resized once to the output resolution's area
 * (image/qwen_image_proc.h), that picture made RGB for the processor and
 * encoded by the VAE on four channels. The processor must keep its size (it
 * is a multiple of 32 already) so that its pads and the VAE's latents
 * describe the same grid; a lower bound that would enlarge it is refused
 * with the option that lowers it.
 * Everything input-dependent is checked before any weight is read.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "image/image_read.h"
#include "pipelines/latents.h"
#include "pipelines/qi21_pipe_impl.h"

#define COND_NAME "qi21 pipeline"
/* The processor's RGB picture of an RGBA one: transformers' convert_to_rgb is PIL's convert("RGB"). */
#define COND_RGBA_RULE CQ_RGBA_DROP_ALPHA

static bool has_vision_weights(const cq_cmf *cmf) {
    return cq_cmf_find(cmf, "te.model.visual.patch_embed.proj.weight") != NULL ||
           cq_cmf_find(cmf, "te.visual.patch_embed.proj.weight") != NULL;
}

cq_status cq_qi21_cond_open(cq_qi21_pipe *p) {
    p->has_vision = false;
    if (!has_vision_weights(p->cmf)) return CQ_OK; /* text to image only; pictures are refused with a message */
    CQ_TRY(cq_qwen3vl_vision_parse_config(p->cmf, "te.", &p->vcfg));
    /* without the pack's preprocessor_config.json: Qwen2VLImageProcessor's class defaults at the tower's patch,
     * merge and frame sizes (what a processor built with those sizes alone uses) */
    cq_qwen_vl_proc_defaults(&p->proc);
    p->proc.patch_size = p->vcfg.patch;
    p->proc.merge_size = p->vcfg.merge;
    p->proc.temporal_patch_size = p->vcfg.temporal_patch;
    const cq_tensor_view *v = cq_cmf_find(p->cmf, "processor.config_json");
    if (v) {
        CQ_TRY(cq_cmf_check_tensor(v));
        CQ_TRY(cq_qwen_vl_proc_parse((const char *)v->data, (size_t)v->nbytes, &p->proc));
    }
    if (p->proc.patch_size != p->vcfg.patch || p->proc.merge_size != p->vcfg.merge ||
        p->proc.temporal_patch_size != p->vcfg.temporal_patch || p->vcfg.in_channels != 3)
        return cq_fail(CQ_ERR_SHAPE, COND_NAME ": the processor makes patches of %d px, %d frames, merged %dx%d; the "
                       "vision tower reads %d px, %d frames, %dx%d, %d channels", p->proc.patch_size,
                       p->proc.temporal_patch_size, p->proc.merge_size, p->proc.merge_size, p->vcfg.patch,
                       p->vcfg.temporal_patch, p->vcfg.merge, p->vcfg.merge, p->vcfg.in_channels);
    if (p->vcfg.out_hidden != p->tcfg.hidden)
        return cq_fail(CQ_ERR_SHAPE, COND_NAME ": the vision tower gives %d-wide rows; the language model is %d wide",
                       p->vcfg.out_hidden, p->tcfg.hidden);
    if (p->vcfg.n_deepstack > p->tcfg.n_layers)
        return cq_fail(CQ_ERR_SHAPE, COND_NAME ": %d deepstack levels for a language model of %d layers",
                       p->vcfg.n_deepstack, p->tcfg.n_layers);
    p->image_pad = cq_tokenizer_token_to_id(p->tok, "<|image_pad|>", 13);
    p->vision_start = cq_tokenizer_token_to_id(p->tok, "<|vision_start|>", 16);
    p->vision_end = cq_tokenizer_token_to_id(p->tok, "<|vision_end|>", 14);
    if (p->image_pad < 0 || p->vision_start < 0 || p->vision_end < 0)
        return cq_fail(CQ_ERR_MISSING, COND_NAME ": the tokenizer lacks <|image_pad|>, <|vision_start|> or "
                       "<|vision_end|>");
    p->has_vision = true;
    return CQ_OK;
}

/* ---- the pictures ---- */
void cq_qi21_cond_inputs_free(cq_qi21_cond_inputs *in) {
    if (!in) return;
    for (int i = 0; i < CQ_QI21_MAX_IMAGES; i++) {
        cq_qi21_picture_free(&in->pic[i].pic);
        cq_free(in->pic[i].pixel_values);
    }
    memset(in, 0, sizeof *in);
}

static int resolution_of(const cq_qi21_gen_opts *o) {
    return o->output_resolution > 0 ? o->output_resolution : CQ_QI21_OUTPUT_RESOLUTION;
}

static cq_status one_picture(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, const cq_qwen_vl_proc *proc,
                             const char *path, cq_qi21_cond_picture *pc) {
    cq_image8 img = {0};
    CQ_TRY(cq_image_read_rgba(path, &img));
    pc->width = img.width;
    pc->height = img.height;
    const double r = resolution_of(o);
    cq_status s = cq_qi21_picture_prepare(img.pixels, img.width, img.height, r * r, &pc->pic);
    cq_image8_free(&img);
    CQ_TRY(s);
    const int w = pc->pic.w, h = pc->pic.h, f = p->codec.factor > 0 ? p->codec.factor : 16;
    uint8_t *rgb = cq_mallocn((size_t)w * (size_t)h, 3);
    if (!rgb) return CQ_ERR_NOMEM;
    cq_rgba_to_rgb_pixels(pc->pic.rgba, (size_t)w * (size_t)h, COND_RGBA_RULE, rgb);
    cq_qwen_vl_image vl = {0};
    s = cq_qwen_vl_preprocess(proc, rgb, w, h, &vl);
    cq_free(rgb);
    if (s == CQ_OK && (vl.resized_w != w || vl.resized_h != h))
        s = cq_fail(CQ_ERR_INVALID_ARG,
                    "resized to %dx%d (the output resolution %d's area), the processor would resize it again to "
                    "%dx%d (its pixel bounds %lld..%lld), and its rows would no longer match the VAE's latents; "
                    "%s", w, h, resolution_of(o), vl.resized_w, vl.resized_h, (long long)proc->min_pixels,
                    (long long)proc->max_pixels,
                    (int64_t)w * h < proc->min_pixels ? "lower the bound with --vl-min-pixels or raise "
                                                        "--output-resolution"
                                                      : "lower --output-resolution");
    /* each pad (a merged 2x2 of patches) must be one 2x2 group of the denoiser's latent tokens */
    if (s == CQ_OK && p->proc.patch_size * p->proc.merge_size != 2 * f)
        s = cq_fail(CQ_ERR_SHAPE, COND_NAME ": the processor's %d px patches merged %dx%d do not cover the "
                    "denoiser's 2x2 groups of %d px latents", p->proc.patch_size, p->proc.merge_size,
                    p->proc.merge_size, f);
    if (s == CQ_OK) {
        for (int a = 0; a < 3; a++) pc->grid[a] = vl.grid_thw[a];
        pc->n_patches = vl.n_patches;
        pc->pixel_values = vl.pixel_values;
        vl.pixel_values = NULL;
    }
    cq_qwen_vl_image_free(&vl);
    return s;
}

cq_status cq_qi21_cond_inputs_make(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_cond_inputs *in) {
    memset(in, 0, sizeof *in);
    if (!p || !o) return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": no pipeline or options");
    if (o->n_images < 1 || !o->images)
        return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": %d condition pictures%s", o->n_images,
                       o->images ? "" : " without their list");
    if (!p->has_vision)
        return cq_fail(CQ_ERR_UNSUPPORTED, "this Qwen-Image-2.1 pack has no vision tower (te.model.visual.*), so it "
                       "draws from text alone; convert the pipeline folder with its text encoder's visual weights "
                       "to give it pictures");
    if (!cq_cmf_find(p->cmf, "vae.encoder.conv_in.weight"))
        return cq_fail(CQ_ERR_UNSUPPORTED, "this Qwen-Image-2.1 pack's VAE has no encoder (a decode-only pack: "
                       "vae.encoder.* was left out), so it cannot read condition pictures; convert the pipeline "
                       "folder without dropping it");
    if (o->n_images > CQ_QI21_MAX_IMAGES)
        return cq_fail(CQ_ERR_INVALID_ARG, "Qwen-Image-2.1 takes at most %d condition pictures (got %d)",
                       CQ_QI21_MAX_IMAGES, o->n_images);
    if (o->output_resolution < 0 || (o->output_resolution > 0 && (o->output_resolution < 32 ||
                                                                  o->output_resolution > CQ_GEN_SIDE_MAX)))
        return cq_fail(CQ_ERR_INVALID_ARG, "the output resolution %d is outside [32, %d]", o->output_resolution,
                       CQ_GEN_SIDE_MAX);
    cq_qwen_vl_proc proc = p->proc;
    if (o->vl_min_pixels < 0 || o->vl_min_pixels > proc.max_pixels)
        return cq_fail(CQ_ERR_INVALID_ARG, "the processor's lower pixel bound %lld is outside [1, %lld] (its upper "
                       "bound)", (long long)o->vl_min_pixels, (long long)proc.max_pixels);
    if (o->vl_min_pixels > 0) proc.min_pixels = o->vl_min_pixels;
    const int m2 = p->vcfg.merge * p->vcfg.merge;
    for (int i = 0; i < o->n_images; i++) {
        if (!o->images[i]) {
            cq_qi21_cond_inputs_free(in);
            return cq_fail(CQ_ERR_INVALID_ARG, "condition picture %d: no file name", i + 1);
        }
        const cq_status s = one_picture(p, o, &proc, o->images[i], &in->pic[i]);
        in->n = i + 1;
        if (s != CQ_OK) {
            cq_qi21_cond_inputs_free(in);
            return cq_fail_prefix(s, "condition picture %d ('%s'): ", i + 1, o->images[i]);
        }
        const cq_qi21_cond_picture *pc = &in->pic[i];
        const int lh = pc->pic.h / 16, lw = pc->pic.w / 16;
        in->n_patches += pc->n_patches;
        in->n_pad_rows += (int)(pc->n_patches / m2);
        in->n_cond_tokens += lh * lw;
        in->sides += lh > lw ? lh : lw;
    }
    int32_t grid[CQ_QI21_MAX_IMAGES][3];
    for (int i = 0; i < in->n; i++)
        for (int a = 0; a < 3; a++) grid[i][a] = in->pic[i].grid[a];
    int64_t rows = 0;
    cq_status s = cq_qwen3vl_vision_rows(&p->vcfg, (const int32_t(*)[3])grid, in->n, &rows);
    if (s == CQ_OK && rows != in->n_patches)
        s = cq_fail(CQ_ERR_INTERNAL, COND_NAME ": %lld patches, the grids make %lld", (long long)in->n_patches,
                    (long long)rows);
    /* the output size: each side the request's, else the last picture's at the resolution's area */
    const cq_qi21_cond_picture *last = &in->pic[in->n - 1];
    int dw = 0, dh = 0;
    const double r = resolution_of(o);
    if (s == CQ_OK) s = cq_qwen_calculate_dimensions(r * r, last->width, last->height, &dw, &dh);
    if (s == CQ_OK) {
        in->width = o->width > 0 ? o->width : dw;
        in->height = o->height > 0 ? o->height : dh;
    }
    if (s != CQ_OK) cq_qi21_cond_inputs_free(in);
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

cq_status cq_qi21_cond_tokens(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, const char *prompt, int32_t **ids,
                              int *n) {
    *ids = NULL;
    *n = 0;
    if (!prompt) prompt = "";
    const long bad = cq_utf8_invalid_at(prompt);
    if (bad >= 0)
        return cq_fail(CQ_ERR_INVALID_ARG, "not valid UTF-8 (byte %ld of %zu)", bad + 1, strlen(prompt));
    char *text = NULL;
    size_t len = 0, cap = 0;
    cq_status s = append(&text, &len, &cap, cq_qi21_head, strlen(cq_qi21_head));
    const int m2 = p->vcfg.merge * p->vcfg.merge;
    for (int i = 0; s == CQ_OK && i < in->n; i++) {
        /* the reference draws the label from four; "Picture " is the first of them */
        char pre[48];
        const int k = snprintf(pre, sizeof pre, "%sPicture %d: <|vision_start|>", i ? " " : "", i + 1);
        s = append(&text, &len, &cap, pre, (size_t)k);
        for (int64_t r = 0; s == CQ_OK && r < in->pic[i].n_patches / m2; r++)
            s = append(&text, &len, &cap, "<|image_pad|>", 13);
        if (s == CQ_OK) s = append(&text, &len, &cap, "<|vision_end|>", 14);
    }
    if (s == CQ_OK) s = append(&text, &len, &cap, prompt, strlen(prompt));
    if (s == CQ_OK) s = append(&text, &len, &cap, cq_qi21_tail, strlen(cq_qi21_tail));
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
        s = cq_fail(CQ_ERR_INVALID_ARG, "it contains <|image_pad|>, <|vision_start|> or <|vision_end|>, "
                    "placeholders of the condition pictures; prompts cannot hold them");
    else if (p->tcfg.max_positions > 0 && t.n > (size_t)p->tcfg.max_positions)
        s = cq_fail(CQ_ERR_INVALID_ARG, "too long: with the pipeline's template and the pictures' %d rows it is %zu "
                    "tokens, and the text encoder reads at most %d (its max_position_embeddings)", in->n_pad_rows,
                    t.n, p->tcfg.max_positions);
    else if ((int64_t)t.n <= p->drop_idx)
        s = cq_fail(CQ_ERR_INTERNAL, COND_NAME ": the template makes %zu tokens, no row after the %d dropped", t.n,
                    p->drop_idx);
    if (s != CQ_OK) {
        cq_tokens_free(&t);
        return s;
    }
    *ids = t.ids;
    *n = (int)t.n;
    return CQ_OK;
}

static void grids_of(const cq_qi21_cond_inputs *in, int32_t (*grid)[3]) {
    for (int i = 0; i < in->n; i++)
        for (int a = 0; a < 3; a++) grid[i][a] = in->pic[i].grid[a];
}

cq_status cq_qi21_cond_vision(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, float **rows, float **deep) {
    *rows = NULL;
    *deep = NULL;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    if (!p->vis) return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": the vision tower is not loaded");
    const size_t pd = (size_t)cq_qwen3vl_vision_patch_dim(&p->vcfg), hid = (size_t)p->vcfg.out_hidden;
    float *pix = cq_mallocn((size_t)in->n_patches, pd * sizeof(float));
    float *out = cq_mallocn((size_t)in->n_pad_rows, hid * sizeof(float));
    float *ds = p->vcfg.n_deepstack ? cq_mallocn((size_t)p->vcfg.n_deepstack * (size_t)in->n_pad_rows,
                                                 hid * sizeof(float))
                                    : NULL;
    if (!pix || !out || (p->vcfg.n_deepstack && !ds)) {
        cq_free(pix);
        cq_free(out);
        cq_free(ds);
        return CQ_ERR_NOMEM;
    }
    size_t off = 0;
    for (int i = 0; i < in->n; i++) {
        memcpy(pix + off * pd, in->pic[i].pixel_values, (size_t)in->pic[i].n_patches * pd * sizeof(float));
        off += (size_t)in->pic[i].n_patches;
    }
    int32_t grid[CQ_QI21_MAX_IMAGES][3];
    grids_of(in, grid);
    const cq_qwen3vl_vision_outputs vo = {.out = out, .deepstack = ds};
    const cq_status s = cq_qwen3vl_vision_forward(p->vis, pix, in->n_patches, (const int32_t(*)[3])grid, in->n, &vo);
    cq_free(pix);
    if (s != CQ_OK) {
        cq_free(out);
        cq_free(ds);
        return s;
    }
    *rows = out;
    *deep = ds;
    return CQ_OK;
}

cq_status cq_qi21_cond_encode(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, const float *vision, const float *deep,
                              const char *prompt, float **embeds, int *n_rows, uint8_t **pad_mask) {
    *embeds = NULL;
    *n_rows = 0;
    if (pad_mask) *pad_mask = NULL;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_TEXT));
    if (!p->te) return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": the text encoder is not loaded");
    int32_t *ids = NULL;
    int n = 0;
    CQ_TRY(cq_qi21_cond_tokens(p, in, prompt, &ids, &n));
    int32_t grid[CQ_QI21_MAX_IMAGES][3];
    grids_of(in, grid);
    const int hidden = p->tcfg.hidden, rows = n - p->drop_idx;
    int32_t *pos = cq_mallocn((size_t)n, 3 * sizeof(int32_t));
    float *all = cq_mallocn((size_t)n, (size_t)hidden * sizeof(float));
    uint8_t *mask = pad_mask ? cq_malloc((size_t)rows) : NULL;
    cq_status s = pos && all && (!pad_mask || mask) ? CQ_OK : CQ_ERR_NOMEM;
    /* Qwen3-VL's 3-D index (the pictures' rows on their merged grid): the reference's processor gives the
     * text encoder the token types it computes it from (unlike Qwen-Image-Edit's Qwen2.5-VL route) */
    if (s == CQ_OK)
        s = cq_qwen3_rope_index(ids, n, p->image_pad, p->vision_start, (const int32_t(*)[3])grid, in->n,
                                p->vcfg.merge, pos, NULL);
    if (s == CQ_OK) {
        const cq_qwen3_mm mm = {.positions = pos, .image_token = p->image_pad, .image_embeds = vision,
                                .n_image_rows = in->n_pad_rows, .deepstack = deep,
                                .n_deepstack = deep ? p->vcfg.n_deepstack : 0};
        /* the same hidden state as text to image (the reference reads hidden_states[-1] in both routes) */
        cq_qwen3_outputs out = {.layer = p->text.layer > 0 ? p->text.layer : p->tcfg.n_layers};
        if (p->text.normed) out.normed = all;
        else out.hidden = all;
        s = cq_qwen3_forward_mm(p->te, ids, n, &mm, &out);
    }
    if (s == CQ_OK && mask)
        for (int i = 0; i < rows; i++) mask[i] = ids[p->drop_idx + i] == p->image_pad;
    cq_free(ids);
    cq_free(pos);
    if (s != CQ_OK) {
        cq_free(all);
        cq_free(mask);
        return s;
    }
    /* every row after the drop, the pictures' included */
    memmove(all, all + (size_t)p->drop_idx * hidden, (size_t)rows * hidden * sizeof(float));
    *embeds = all;
    *n_rows = rows;
    if (pad_mask) *pad_mask = mask;
    return CQ_OK;
}

/* ---- the VAE route ---- */
cq_status cq_qi21_cond_latents(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, float **tokens) {
    *tokens = NULL;
    if (p->be) CQ_TRY(cq_resid_ensure(&p->resid, CQ_PART_CODEC));
    const cq_latent_codec *c = &p->codec;
    if (!c->self || !c->encode)
        return cq_fail(CQ_ERR_UNSUPPORTED, COND_NAME ": the pack's VAE has no encoder (a decode-only pack); "
                       "condition pictures need it");
    if (c->image_channels != 4 || c->factor != 16)
        return cq_fail(CQ_ERR_SHAPE, COND_NAME ": the VAE reads %d-channel pictures at %dx; condition pictures are "
                       "RGBA at 16x", c->image_channels, c->factor);
    const int tc = c->channels;
    float *out = cq_mallocn((size_t)in->n_cond_tokens, (size_t)tc * sizeof(float));
    if (!out) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    size_t off = 0;
    for (int i = 0; i < in->n && s == CQ_OK; i++) {
        const cq_qi21_cond_picture *pc = &in->pic[i];
        const int lh = pc->pic.h / c->factor, lw = pc->pic.w / c->factor;
        float *mom = cq_mallocn((size_t)2 * c->channels, (size_t)lh * lw * sizeof(float));
        if (!mom) s = CQ_ERR_NOMEM;
        if (s == CQ_OK) s = c->encode(c->self, pc->pic.vae, pc->pic.h, pc->pic.w, mom);
        /* the posterior's mode is its mean, the first channels; then (z - mean) / std and the flattening */
        if (s == CQ_OK) s = c->normalize(c->self, mom, lh, lw);
        if (s == CQ_OK) c->pack(c->self, mom, out + off * (size_t)tc, lh, lw);
        off += (size_t)lh * lw;
        cq_free(mom);
    }
    if (s != CQ_OK) {
        cq_free(out);
        return s;
    }
    *tokens = out;
    return CQ_OK;
}

/* ---- the layout ---- */

/* The reference's img_mask and img_shapes for `n_rows` text rows (pads flagged in mask[0..n_rows)) and a
 * width x height target: mask gains the target's slots; shapes [pictures..., target]. */
static cq_status layout_for(const cq_qi21_cond_inputs *in, uint8_t *mask, int n_rows, int width, int height,
                            int32_t (*shapes)[3], cq_qi21_layout *lay) {
    for (int i = 0; i < in->n; i++) {
        shapes[i][0] = 1;
        shapes[i][1] = in->pic[i].pic.h / 16;
        shapes[i][2] = in->pic[i].pic.w / 16;
    }
    shapes[in->n][0] = 1;
    shapes[in->n][1] = height / 16;
    shapes[in->n][2] = width / 16;
    const int slots = (height / 16) * (width / 16) / 4;
    memset(mask + n_rows, 1, (size_t)slots);
    *lay = (cq_qi21_layout){.vlm_len = n_rows + slots, .img_mask = mask, .n_images = in->n + 1,
                            .img_shapes = (const int32_t(*)[3])shapes};
    return cq_qi21_layout_sizes(lay, NULL, NULL, NULL);
}

/* A prompt's tokens, and its layout checked against the denoiser; *total its tokens. */
static cq_status check_prompt(cq_qi21_pipe *p, const cq_qi21_cond_inputs *in, const char *what, const char *prompt,
                              int *total) {
    int32_t *ids = NULL;
    int n = 0;
    cq_status s = cq_qi21_cond_tokens(p, in, prompt, &ids, &n);
    if (s != CQ_OK) return cq_fail_prefix(s, "the %s: ", what);
    const int rows = n - p->drop_idx, slots = (in->height / 16) * (in->width / 16) / 4;
    s = cq_qi21_check_positions(what, rows - in->n_pad_rows, in->sides + (in->height > in->width ? in->height : in->width) / 16,
                                in->width, in->height);
    uint8_t *mask = s == CQ_OK ? cq_malloc((size_t)rows + (size_t)slots) : NULL;
    if (s == CQ_OK && !mask) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        for (int i = 0; i < rows; i++) mask[i] = ids[p->drop_idx + i] == p->image_pad;
        int32_t shapes[CQ_QI21_MAX_IMAGES + 1][3];
        cq_qi21_layout lay;
        s = layout_for(in, mask, rows, in->width, in->height, shapes, &lay);
        if (s != CQ_OK) s = cq_fail_prefix(s, "the %s (%d text rows) with the pictures: ", what, rows);
    }
    cq_free(mask);
    cq_free(ids);
    *total = n;
    return s;
}

static cq_status check_request(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_qi21_cond_inputs *in, int *total) {
    CQ_TRY(cq_qi21_cond_inputs_make(p, o, in));
    cq_qi21_gen_opts q = *o;
    q.width = in->width;
    q.height = in->height;
    cq_status s = cq_qi21_check_common(p, &q);
    int a = 0, b = 0;
    if (s == CQ_OK) s = check_prompt(p, in, "prompt", o->prompt, &a);
    if (s == CQ_OK && o->negative && o->guidance > 1.0) s = check_prompt(p, in, "negative prompt", o->negative, &b);
    if (s != CQ_OK) cq_qi21_cond_inputs_free(in);
    *total = a > b ? a : b;
    return s;
}

cq_status cq_qi21_cond_check(cq_qi21_pipe *p, const cq_qi21_gen_opts *o) {
    cq_qi21_cond_inputs in;
    int total = 0;
    CQ_TRY(check_request(p, o, &in, &total));
    cq_qi21_cond_inputs_free(&in);
    return CQ_OK;
}

/* ---- the components of one generation ---- */
typedef struct cond_run {
    cq_qi21_pipe *p;
    const cq_qi21_cond_inputs *in;
    float *vision, *deep; /* the vision tower's rows, made at the first encode */
    const float *cond;    /* [n_cond_tokens][in_channels] */
    const char *prompt;   /* the pads' rows are those of every prompt: the pictures come before the text */
} cond_run;

static cq_status te_count(void *self, const char *prompt, int *total, int *rows) {
    cond_run *r = self;
    int32_t *ids = NULL;
    int n = 0;
    *total = *rows = 0;
    CQ_TRY(cq_qi21_cond_tokens(r->p, r->in, prompt, &ids, &n));
    cq_free(ids);
    *total = n;
    *rows = n - r->p->drop_idx;
    return CQ_OK;
}

static cq_status te_encode(void *self, const char *prompt, float **out, int *n_rows) {
    cond_run *r = self;
    if (!r->vision) CQ_TRY(cq_qi21_cond_vision(r->p, r->in, &r->vision, &r->deep));
    return cq_qi21_cond_encode(r->p, r->in, r->vision, r->deep, prompt, out, n_rows, NULL);
}

static void dn_cond_free(void *self, void *cond) {
    (void)self;
    cq_qi21_cache_free(cond);
}

/* The prefix of one prompt: its rows with the pads' slots, the pictures' latents; the pads sit before the prompt's
 * text (the template puts the pictures first), at the same rows for every prompt. */
static cq_status dn_prepare(void *self, const float *rows, int n_rows, int lat_h, int lat_w, void **cond) {
    cond_run *r = self;
    *cond = NULL;
    cq_qi21_pipe *p = r->p;
    if (!p->dit) return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": the denoiser is not loaded");
    int32_t *ids = NULL;
    int n = 0;
    CQ_TRY(cq_qi21_cond_tokens(p, r->in, r->prompt, &ids, &n));
    const int slots = lat_h * lat_w / 4;
    uint8_t *mask = cq_calloc((size_t)n_rows + (size_t)slots, 1);
    cq_status s = mask ? CQ_OK : CQ_ERR_NOMEM;
    for (int i = 0; s == CQ_OK && i < n_rows && p->drop_idx + i < n; i++)
        mask[i] = ids[p->drop_idx + i] == p->image_pad;
    cq_free(ids);
    int32_t shapes[CQ_QI21_MAX_IMAGES + 1][3];
    cq_qi21_layout lay;
    if (s == CQ_OK) s = layout_for(r->in, mask, n_rows, lat_w * 16, lat_h * 16, shapes, &lay);
    cq_qi21_cache *c = NULL;
    if (s == CQ_OK) s = cq_qi21_prefill(p->dit, &lay, rows, r->cond, &c);
    cq_free(mask);
    *cond = c;
    return s;
}

static cq_status dn_step(void *self, void *cond, const float *x, float t, float *velocity) {
    cond_run *r = self;
    return cq_qi21_step(r->p->dit, cond, x, t, velocity);
}

cq_status cq_qi21_cond_generate(cq_qi21_pipe *p, const cq_qi21_gen_opts *o, cq_image_result *res) {
    memset(res, 0, sizeof *res);
    if (!p->be) return cq_fail(CQ_ERR_INVALID_ARG, COND_NAME ": the weights are not loaded");
    cq_qi21_cond_inputs in;
    int total = 0;
    CQ_TRY(check_request(p, o, &in, &total));
    const bool cfg = cq_true_cfg_wanted(o->guidance, o->negative);
    cond_run run = {.p = p, .in = &in, .prompt = o->prompt};
    float *cond = NULL;
    cq_status s = cq_check_cancel("image generation");
    if (s == CQ_OK)
        s = cq_qi21_plan_request(p, in.width, in.height, in.n_cond_tokens, total, total - p->drop_idx);
    if (s == CQ_OK) s = cq_resid_stage(&p->resid, CQ_RESID_TEXT);
    if (s == CQ_OK) s = cq_resid_ensure(&p->resid, CQ_PART_CODEC);
    if (s == CQ_OK) s = cq_qi21_cond_latents(p, &in, &cond);
    run.cond = cond;
    if (s == CQ_OK) {
        const cq_text_encoder te = {.self = &run, .width = p->tcfg.hidden, .count = te_count, .encode = te_encode};
        const cq_denoiser dn = {.self = &run, .channels = p->dcfg.in_channels, .prepare = dn_prepare,
                                .step = dn_step, .cond_free = dn_cond_free};
        s = cq_qi21_latent_grid(in.width, in.height, NULL, NULL);
        const cq_image_job j = cq_qi21_job(p, o, &te, &dn, in.width, in.height, cfg);
        if (s == CQ_OK) s = cq_image_job_run(&j, res);
    }
    cq_free(run.vision);
    cq_free(run.deep);
    cq_free(cond);
    cq_qi21_cond_inputs_free(&in);
    return s;
}
