/*
 * residency.c — the per-phase residency planner and its driver (see
 * residency.h).
 */
#include "pipelines/residency.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

const char *cq_part_name(cq_part p) {
    switch (p) {
    case CQ_PART_TEXT: return "text encoder";
    case CQ_PART_DENOISER: return "denoiser";
    case CQ_PART_CODEC: return "VAE";
    default: return "?";
    }
}

const char *cq_resid_phase_name(cq_resid_phase p) {
    switch (p) {
    case CQ_RESID_TEXT: return "text";
    case CQ_RESID_DENOISE: return "denoise";
    case CQ_RESID_DECODE: return "decode";
    default: return "?";
    }
}

/* ---- planning --------------------------------------------------------------------------------- */
static uint64_t phase_need(const cq_resid_need *n, const cq_resid_plan *p, cq_resid_phase ph) {
    uint64_t w = 0, slot = 0;
    for (int part = 0; part < CQ_PART_COUNT; part++) {
        if (!p->keep[ph][part]) continue;
        const cq_weight_mode m = p->mode[part];
        w += n->weights[part][m] + (m == CQ_WEIGHTS_STREAMED ? p->keep_bytes[part] : 0);
        if (n->slot[part][m] > slot) slot = n->slot[part][m];
    }
    return w + slot + n->act[ph];
}

static void finish(const cq_resid_need *n, cq_resid_plan *p) {
    p->peak = 0;
    for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++) {
        p->phase_bytes[ph] = phase_need(n, p, (cq_resid_phase)ph);
        if (p->phase_bytes[ph] > p->peak) p->peak = p->phase_bytes[ph];
    }
}

/* A part STREAMED in phase `ph` (where it works): keep on the device what fits beside the phase's other needs
 * under budget, at most what its matrices take compact (budget 0: keep nothing). */
static void stream_part(const cq_resid_need *n, cq_resid_plan *p, cq_part part, cq_resid_phase ph, uint64_t budget) {
    p->mode[part] = CQ_WEIGHTS_STREAMED;
    const uint64_t compact = n->weights[part][CQ_WEIGHTS_COMPACT], left = n->weights[part][CQ_WEIGHTS_STREAMED];
    p->stream_of[part] = compact > left ? compact - left : 0;
    p->keep_bytes[part] = 0;
    const uint64_t need = phase_need(n, p, ph);
    const uint64_t room = budget > need ? budget - need : 0;
    p->keep_bytes[part] = CQ_MIN(room, p->stream_of[part]);
}

/* Plan `level` (1..7) for n; the decode keeps the denoiser when it fits beside it under budget. */
static void plan_level(const cq_resid_need *n, int level, uint64_t budget, cq_resid_plan *p) {
    memset(p, 0, sizeof *p);
    p->level = level;
    p->budget = budget;
    /* DEFAULT is the backend's fastest form (planes on CUDA), the form of an unbudgeted run */
    for (int part = 0; part < CQ_PART_COUNT; part++) p->mode[part] = CQ_WEIGHTS_DEFAULT;
    if (level >= 3) p->mode[CQ_PART_DENOISER] = CQ_WEIGHTS_COMPACT;
    if (level >= 4) p->mode[CQ_PART_TEXT] = CQ_WEIGHTS_COMPACT;
    if (level >= 5) p->mode[CQ_PART_CODEC] = CQ_WEIGHTS_COMPACT;
    for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++) p->keep[ph][CQ_PART_CODEC] = true;
    if (level == 1) {
        for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++)
            p->keep[ph][CQ_PART_TEXT] = p->keep[ph][CQ_PART_DENOISER] = true;
    } else {
        p->keep[CQ_RESID_TEXT][CQ_PART_TEXT] = true;
        p->keep[CQ_RESID_DENOISE][CQ_PART_DENOISER] = true;
        if (level >= 6) stream_part(n, p, CQ_PART_DENOISER, CQ_RESID_DENOISE, budget);
        if (level >= 7) stream_part(n, p, CQ_PART_TEXT, CQ_RESID_TEXT, budget);
        p->keep[CQ_RESID_DECODE][CQ_PART_DENOISER] = true;
        finish(n, p);
        if (p->phase_bytes[CQ_RESID_DECODE] > budget) p->keep[CQ_RESID_DECODE][CQ_PART_DENOISER] = false;
    }
    finish(n, p);
}

cq_status cq_resid_plan_make(const cq_resid_need *n, uint64_t budget, const char *what, cq_resid_plan *out) {
    if (!n || !out) return cq_fail(CQ_ERR_INVALID_ARG, "residency plan: NULL argument");
    if (!what) what = "the model";
    if (!budget) {
        memset(out, 0, sizeof *out);
        for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++)
            for (int part = 0; part < CQ_PART_COUNT; part++) out->keep[ph][part] = true;
        finish(n, out);
        out->level = 0;
        return CQ_OK;
    }
    uint64_t least = UINT64_MAX;
    for (int level = 1; level <= 7; level++) {
        cq_resid_plan p;
        plan_level(n, level, budget, &p);
        if (p.peak <= budget) {
            *out = p;
            return CQ_OK;
        }
        /* the smallest budget under which some level fits (the decode then releases the denoiser) */
        cq_resid_plan tight;
        plan_level(n, level, 0, &tight);
        if (tight.peak < least) least = tight.peak;
    }
    memset(out, 0, sizeof *out);
    return cq_fail(CQ_ERR_NOMEM,
                   "%s does not fit in a device-memory budget of %.2f GiB: it needs at least %.2f GiB (its "
                   "matrices streamed from host memory, the text encoder released before the denoiser); raise "
                   "--gpu-memory, use a smaller request or codec, or --backend cpu",
                   what, (double)budget / GIB, (double)least / GIB);
}

cq_status cq_resid_plan_single(const cq_resid_need *n, uint64_t budget, const char *what, cq_resid_plan *out) {
    if (!n || !out) return cq_fail(CQ_ERR_INVALID_ARG, "residency plan: NULL argument");
    if (!what) what = "the model";
    memset(out, 0, sizeof *out);
    out->single = true;
    out->budget = budget;
    out->keep[CQ_RESID_TEXT][CQ_PART_TEXT] = true;
    if (budget) {
        out->level = 1;
        finish(n, out);
        if (out->peak <= budget) return CQ_OK;
        out->mode[CQ_PART_TEXT] = CQ_WEIGHTS_COMPACT;
        finish(n, out);
        if (out->peak <= budget) return CQ_OK;
        stream_part(n, out, CQ_PART_TEXT, CQ_RESID_TEXT, budget);
        finish(n, out);
        if (out->peak <= budget) return CQ_OK;
        const uint64_t least = out->peak;
        memset(out, 0, sizeof *out);
        return cq_fail(CQ_ERR_NOMEM,
                       "%s does not fit in a device-memory budget of %.2f GiB: it needs at least %.2f GiB (its "
                       "matrices streamed from host memory); raise --gpu-memory, use a smaller codec, or --backend "
                       "cpu",
                       what, (double)budget / GIB, (double)least / GIB);
    }
    finish(n, out);
    return CQ_OK;
}

cq_status cq_resid_plan_at(const cq_resid_need *n, int level, uint64_t budget, cq_resid_plan *out) {
    if (!n || !out || level < 1 || level > 7) return cq_fail(CQ_ERR_INVALID_ARG, "residency plan: bad level %d", level);
    plan_level(n, level, budget, out);
    return CQ_OK;
}

uint64_t cq_resid_streamed(const cq_resid_plan *p, cq_part part) {
    if (!p || (unsigned)part >= CQ_PART_COUNT || p->mode[part] != CQ_WEIGHTS_STREAMED) return 0;
    return p->stream_of[part] > p->keep_bytes[part] ? p->stream_of[part] - p->keep_bytes[part] : 0;
}

cq_status cq_resid_apply_mode(cq_backend *be, const cq_resid_plan *p, cq_part part) {
    CQ_TRY(cq_backend_set_weight_mode(be, p->mode[part]));
    if (p->mode[part] == CQ_WEIGHTS_STREAMED) CQ_TRY(cq_backend_set_stream_keep(be, p->keep_bytes[part], p->stream_of[part]));
    return CQ_OK;
}

/* ", the denoiser streams 1.20 of 6.50 GiB per step" for each streamed part */
static void describe_streams(const cq_resid_plan *p, char *buf, size_t len) {
    size_t o = strlen(buf);
    for (int part = 0; part < CQ_PART_COUNT && o < len; part++)
        if (p->mode[part] == CQ_WEIGHTS_STREAMED)
            o += (size_t)snprintf(buf + o, len - o, "; the %s streams %.2f of %.2f GiB per %s", cq_part_name((cq_part)part),
                                  (double)cq_resid_streamed(p, (cq_part)part) / GIB, (double)p->stream_of[part] / GIB,
                                  part == CQ_PART_DENOISER ? "step" : "use");
}

const char *cq_resid_plan_describe(const cq_resid_plan *p, char *buf, size_t len) {
    if (!buf || !len) return "";
    if (!p || p->level == 0) {
        snprintf(buf, len, "everything bound (no device-memory budget)");
        return buf;
    }
    if (p->single) {
        const cq_weight_mode m = p->mode[CQ_PART_TEXT];
        snprintf(buf, len, "all resident, %s, plan %.2f GiB of %.2f GiB",
                 m == CQ_WEIGHTS_STREAMED  ? "weights in their codec, some streamed from host memory"
                 : m == CQ_WEIGHTS_COMPACT ? "weights in their codec (expanded per use)"
                                           : "weights as planes",
                 (double)p->peak / GIB, (double)p->budget / GIB);
        describe_streams(p, buf, len);
        return buf;
    }
    char modes[96] = "";
    size_t o = 0;
    for (int part = 0; part < CQ_PART_COUNT && o < sizeof modes; part++)
        if (p->mode[part] == CQ_WEIGHTS_COMPACT || p->mode[part] == CQ_WEIGHTS_STREAMED)
            o += (size_t)snprintf(modes + o, sizeof modes - o, "%s%s", o ? ", " : "", cq_part_name((cq_part)part));
    snprintf(buf, len, "%s%s, %s%s, plan %.2f GiB of %.2f GiB",
             p->level == 1 ? "all resident" : "phased (the text encoder released before the denoiser",
             p->level == 1 ? "" : (p->keep[CQ_RESID_DECODE][CQ_PART_DENOISER] ? ")" : "; the denoiser before the decode)"),
             o ? "in their codec: " : "weights as planes", modes, (double)p->peak / GIB, (double)p->budget / GIB);
    describe_streams(p, buf, len);
    return buf;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

cq_status cq_resid_weight_cost(const cq_backend *be, const cq_cmf *cmf, const char *prefix, const char *rows_only,
                               cq_weight_mode mode, uint64_t *bytes, uint64_t *slot) {
    if (!be || !cmf || !prefix || !bytes || !slot) return cq_fail(CQ_ERR_INVALID_ARG, "residency: NULL argument");
    *bytes = *slot = 0;
    const size_t pl = strlen(prefix), n = cq_cmf_tensor_count(cmf);
    for (size_t i = 0; i < n; i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(cmf, i);
        /* u8 tensors are blobs (configs, tables) the models read on the host, never bound */
        if (!v || strncmp(v->name, prefix, pl) || v->dtype == CQ_DTYPE_U8) continue;
        uint64_t b = 0, s = 0;
        CQ_TRY(cq_backend_weight_cost(be, v, mode, &b, &s));
        *bytes += b;
        if (rows_only && ends_with(v->name, rows_only)) continue;
        if (s > *slot) *slot = s;
    }
    return CQ_OK;
}

cq_status cq_resid_need_part(cq_resid_need *n, const cq_backend *be, const cq_cmf *cmf, cq_part part,
                             const char *prefix, const char *rows_only) {
    if (!n || (unsigned)part >= CQ_PART_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "residency: bad part");
    for (int m = 0; m < CQ_WEIGHTS_MODE_COUNT; m++)
        CQ_TRY(cq_resid_weight_cost(be, cmf, prefix, rows_only, (cq_weight_mode)m, &n->weights[part][m],
                                    &n->slot[part][m]));
    return CQ_OK;
}

#define MIB (1024ull * 1024ull)

uint64_t cq_resid_act_tower(int64_t n, int width, int ffn, size_t act) {
    if (n < 1) n = 1;
    const uint64_t u = (uint64_t)n;
    /* the residual, the norm's output, q/k/v and the attention output (6 x width), the MLP's two
     * halves and its product (3 x ffn), the modulation and the staged f16 copies of the GEMM inputs
     * (6 x width more); and the workspace */
    return u * (12ull * (uint64_t)width + 3ull * (uint64_t)ffn) * act + 512ull * MIB;
}

uint64_t cq_resid_act_decoder(int64_t pixels) {
    if (pixels < 1) pixels = 1;
    /* four f32 feature maps of 128 channels at full resolution (input, output, skip, norm) */
    return (uint64_t)pixels * 4ull * 128ull * 4ull + 256ull * MIB;
}

cq_status cq_resid_need_parts(cq_resid_need *n, const cq_backend *be, const cq_cmf *cmf, const char *text,
                              const char *denoiser, const char *codec) {
    CQ_TRY(cq_resid_need_part(n, be, cmf, CQ_PART_TEXT, text, "embed_tokens.weight"));
    CQ_TRY(cq_resid_need_part(n, be, cmf, CQ_PART_DENOISER, denoiser, NULL));
    return cq_resid_need_part(n, be, cmf, CQ_PART_CODEC, codec, NULL);
}

void cq_resid_load_size(const cq_cmf *cmf, int *width, int *height) {
    *width = *height = 1024;
    cq_gen_defaults d = {0};
    if (cmf && cq_cmf_gen_defaults(cmf, &d) == CQ_OK && d.has_size && d.width > 0 && d.height > 0) {
        *width = d.width;
        *height = d.height;
    }
    cq_gen_defaults_free(&d);
    cq_clear_error();
}

void cq_resid_request_acts(cq_resid_need *n, size_t act, int64_t text_tokens, int tw, int tf, int64_t dit_tokens, int dw,
                           int df, int64_t pixels) {
    n->act[CQ_RESID_TEXT] = cq_resid_act_tower(text_tokens, tw, tf, act);
    n->act[CQ_RESID_DENOISE] = cq_resid_act_tower(dit_tokens, dw, df, act);
    n->act[CQ_RESID_DECODE] = cq_resid_act_decoder(pixels);
}

cq_status cq_resid_load(cq_resid *r, cq_resid_need *n, const cq_cmf *cmf,
                        cq_status (*plan_for)(void *pipe, int width, int height, bool smallest), void *pipe) {
    cq_status s = CQ_OK;
    if (cq_backend_mem_budget(r->be)) {
        s = cq_resid_need_parts(n, r->be, cmf, "te.", "dit.", "vae.");
        int w, h;
        cq_resid_load_size(cmf, &w, &h);
        if (s == CQ_OK) s = plan_for(pipe, w, h, false);
        if (s == CQ_ERR_NOMEM) {
            char why[512];
            snprintf(why, sizeof why, "%s", cq_last_error());
            s = plan_for(pipe, 64, 64, true);
            if (s != CQ_OK) s = cq_fail(CQ_ERR_NOMEM, "%s", why);
        }
    }
    /* what the text phase keeps: everything, or the text tower and the VAE when phased */
    if (s == CQ_OK) s = cq_resid_stage(r, CQ_RESID_TEXT);
    if (s != CQ_OK) cq_resid_release_all(r);
    return s;
}

/* ---- driving ---------------------------------------------------------------------------------- */
void cq_resid_init(cq_resid *r, cq_backend *be, const cq_resid_ops *ops, void *pipe) {
    memset(r, 0, sizeof *r);
    r->be = be;
    r->ops = ops;
    r->pipe = pipe;
    cq_resid_plan_make(&(cq_resid_need){0}, 0, NULL, &r->plan);
}

void cq_resid_set_plan(cq_resid *r, const cq_resid_plan *plan) {
    r->fixed = plan != NULL;
    if (plan) r->plan = *plan;
}

cq_status cq_resid_replan(cq_resid *r, const cq_resid_need *n, const char *what) {
    if (r->fixed) return CQ_OK;
    cq_resid_plan p;
    CQ_TRY(cq_resid_plan_make(n, cq_backend_mem_budget(r->be), what, &p));
    r->plan = p;
    return CQ_OK;
}

cq_status cq_resid_gen_stage(cq_gen_phase phase, void *user) {
    return cq_resid_stage(user, phase == CQ_GEN_PHASE_TEXT      ? CQ_RESID_TEXT
                                : phase == CQ_GEN_PHASE_PREFILL ? CQ_RESID_DENOISE
                                                                : CQ_RESID_DECODE);
}

static void release(cq_resid *r, cq_part part) {
    if (!r->bound[part]) return;
    r->ops->release(r->pipe, part);
    r->bound[part] = false;
}

static cq_status bind(cq_resid *r, cq_part part, cq_resid_phase phase) {
    const cq_weight_mode before = cq_backend_weight_mode(r->be);
    cq_status s = cq_resid_apply_mode(r->be, &r->plan, part);
    if (s == CQ_OK) s = r->ops->bind(r->pipe, part);
    cq_status s2 = cq_backend_set_weight_mode(r->be, before);
    if (s != CQ_OK)
        return cq_fail_prefix(s, "binding the %s for the %s phase: ", cq_part_name(part), cq_resid_phase_name(phase));
    r->bound[part] = true;
    r->bound_mode[part] = r->plan.mode[part];
    r->bound_keep[part] = r->plan.keep_bytes[part];
    r->binds++;
    return s2;
}

cq_status cq_resid_ensure(cq_resid *r, cq_part part) {
    if (!r || !r->be || (unsigned)part >= CQ_PART_COUNT) return cq_fail(CQ_ERR_INVALID_ARG, "residency: bad part");
    return r->bound[part] ? CQ_OK : bind(r, part, CQ_RESID_TEXT);
}

static cq_status stage(cq_resid *r, cq_resid_phase phase);

cq_status cq_resid_stage(cq_resid *r, cq_resid_phase phase) {
    if (!r || !r->be || (unsigned)phase >= CQ_RESID_PHASE_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "residency: no backend or a bad phase");
    const double t0 = cq_now();
    cq_status s = stage(r, phase);
    r->stage_s += cq_now() - t0;
    return s;
}

static cq_status stage(cq_resid *r, cq_resid_phase phase) {
    cq_resid_plan *p = &r->plan;
    /* a streamed part bound keeping no more than this plan keeps stays as it is (binding it again costs its
     * whole upload): the plan then states what it really keeps */
    for (int part = 0; part < CQ_PART_COUNT; part++)
        if (r->bound[part] && p->keep[phase][part] && p->mode[part] == CQ_WEIGHTS_STREAMED &&
            r->bound_mode[part] == CQ_WEIGHTS_STREAMED && r->bound_keep[part] < p->keep_bytes[part]) {
            const uint64_t less = p->keep_bytes[part] - r->bound_keep[part];
            p->keep_bytes[part] = r->bound_keep[part];
            p->peak = 0; /* each phase's need is linear in what the part keeps */
            for (int ph = 0; ph < CQ_RESID_PHASE_COUNT; ph++) {
                if (p->keep[ph][part]) p->phase_bytes[ph] -= less;
                if (p->phase_bytes[ph] > p->peak) p->peak = p->phase_bytes[ph];
            }
        }
    /* first everything this phase does not keep (or keeps in another mode or share), so its room is free */
    bool freed = false;
    for (int part = 0; part < CQ_PART_COUNT; part++)
        if (r->bound[part] && (!p->keep[phase][part] || r->bound_mode[part] != p->mode[part] ||
                               (p->mode[part] == CQ_WEIGHTS_STREAMED && r->bound_keep[part] != p->keep_bytes[part]))) {
            release(r, (cq_part)part);
            freed = true;
        }
    if (freed) CQ_TRY(cq_backend_trim(r->be));
    for (int part = 0; part < CQ_PART_COUNT; part++)
        if (p->keep[phase][part] && !r->bound[part]) CQ_TRY(bind(r, (cq_part)part, phase));
    return CQ_OK;
}

void cq_resid_release_all(cq_resid *r) {
    if (!r || !r->ops) return;
    for (int part = 0; part < CQ_PART_COUNT; part++) release(r, (cq_part)part);
}
