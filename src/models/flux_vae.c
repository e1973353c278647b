/*
 * flux_vae.c — the Flux VAE's layer graphs, the plan that decides which
 * levels run whole and which in bands, and the decode/encode drivers.
 *
 * Semantics follow diffusers' AutoencoderKL (58eb52c0) for one image:
 *  - GroupNorm(groups, eps 1e-6, affine) as x * (rstd * gamma) + (beta -
 *    mean * rstd * gamma), the statistics over the whole map of each group
 *    (f64 per-row moments merged in row order: kit/vae_stream.c);
 *  - ResnetBlock2D: shortcut + conv2(SiLU(norm2(conv1(SiLU(norm1(x)))))),
 *    the shortcut a 1x1 conv when the width changes (output scale 1);
 *  - mid block: resnet, x + to_out(softmax(q kᵀ / sqrt(C)) v) with q/k/v
 *    Linear layers on GroupNorm(x) (one head of C channels over every
 *    pixel), resnet;
 *  - decoder: post_quant_conv (when used) -> conv_in -> mid -> up blocks
 *    (resnets, then nearest x2 + 3x3 conv but on the last) -> norm -> SiLU
 *    -> conv_out; the raw output, not clamped;
 *  - encoder: conv_in -> down blocks (resnets, then F.pad (0, 1, 0, 1) and a
 *    3x3 stride-2 conv but on the last) -> mid -> norm -> SiLU -> conv_out
 *    -> quant_conv (when used): the moments, mean | logvar.
 *
 * The plan (see flux_vae.h and docs/ZIMAGE.md), found by dry runs of the
 * schedule (no buffer, no op: cheap on any backend): everything whole when
 * that fits the budget; otherwise the levels (the layers at one resolution)
 * with the largest maps stream, one more at a time, with bands halved until
 * the run fits. A streaming level's group norms take their statistics in
 * passes over bands, and the map at the boundary before it is held whole
 * (a checkpoint: the narrowest map there, before the decoder's upsampling
 * and after the encoder's downsampling), so a pass recomputes one level at
 * most.
 */
#include <limits.h>
#include <string.h>

#include "models/flux_vae_impl.h"

#define FV_BUDGET_DEFAULT ((size_t)7 << 28) /* 1.75 GiB */
/* A streamed level's first band: rows of its widest map per band row its
 * layers hold together (each conv keeps a band plus its halo of its input);
 * the dry runs then halve it until the plan fits. */
#define FV_STREAM_ROWS 12

void cq_flux_vae_set_budget(cq_flux_vae *v, size_t bytes) {
    if (v) v->budget = bytes;
}

void cq_flux_vae_set_band_rows(cq_flux_vae *v, int rows) {
    if (v) v->band_rows = rows < 0 ? 0 : rows;
}

void cq_flux_vae_set_progress(cq_flux_vae *v, cq_progress_fn fn, void *user) {
    if (!v) return;
    v->progress = fn;
    v->progress_user = user;
}

cq_flux_vae_stats cq_flux_vae_last_stats(const cq_flux_vae *v) {
    cq_flux_vae_stats s = {0};
    return v ? v->last : s;
}

/* ---- normalisation ------------------------------------------------------------------------ */
static cq_status check_latents(const cq_flux_vae *v, const float *z, int h, int w) {
    if (!v || !z) return cq_fail(CQ_ERR_INVALID_ARG, "vae: model and latents are required");
    if (h < 1 || w < 1 || (int64_t)h * w > ((int64_t)1 << 40))
        return cq_fail(CQ_ERR_SHAPE, "vae: latent grid %dx%d", h, w);
    return CQ_OK;
}

cq_status cq_flux_vae_normalize(const cq_flux_vae *v, float *z, int h, int w) {
    CQ_TRY(check_latents(v, z, h, w));
    const size_t n = (size_t)h * (size_t)w * (size_t)v->cfg.latent_channels;
    const float sh = v->cfg.shift_factor, sc = v->cfg.scaling_factor;
    for (size_t i = 0; i < n; i++) {
        float t = z[i] - sh; /* two roundings, as (latents - shift) * scale */
        z[i] = t * sc;
    }
    return CQ_OK;
}

cq_status cq_flux_vae_denormalize(const cq_flux_vae *v, float *z, int h, int w) {
    CQ_TRY(check_latents(v, z, h, w));
    const size_t n = (size_t)h * (size_t)w * (size_t)v->cfg.latent_channels;
    const float sh = v->cfg.shift_factor, sc = v->cfg.scaling_factor;
    for (size_t i = 0; i < n; i++) {
        float t = z[i] / sc; /* latents / scale + shift */
        z[i] = t + sh;
    }
    return CQ_OK;
}

/* ---- the plan ------------------------------------------------------------------------------- */
/* Levels of the decoder (l = 0 at the latent grid) or the encoder (l = 0 at
 * the image): their grids and widest channel counts, everything whole. */
static void plan_geometry(const fv_coder *c, bool decode, int64_t H0, int64_t W0, fv_plan *p) {
    memset(p, 0, sizeof *p);
    p->n = c->n_levels;
    for (int l = 0; l < p->n; l++) {
        p->H[l] = decode ? H0 << l : H0 >> l;
        p->W[l] = decode ? W0 << l : W0 >> l;
        p->C[l] = CQ_MAX((int64_t)c->lv[l].cin, (int64_t)c->lv[l].cout);
        p->band[l] = p->H[l];
    }
}

/* Coarse checkpoints in front of every level that streams (its passes stop there). */
static void plan_holds(fv_plan *p) {
    for (int l = 0; l < p->n; l++) p->hold[l] = p->band[l] < p->H[l] && l ? FV_COARSE : FV_WHOLE;
}

/* `rows` image rows at every level, scaled to its resolution (the forced bands). */
static void plan_forced(fv_plan *p, bool decode, int64_t rows) {
    const int64_t Himg = p->H[decode ? p->n - 1 : 0];
    for (int l = 0; l < p->n; l++) {
        double r = (double)rows * (double)p->H[l] / (double)Himg;
        p->band[l] = r >= (double)p->H[l] ? p->H[l] : CQ_MAX((int64_t)1, (int64_t)r);
    }
    plan_holds(p);
}

static cq_status run_plan(cq_flux_vae *v, bool decode, int H0, int W0, const fv_plan *p, bool dry, const float *in,
                          float *out);

/* Candidate t (its streaming levels' bands set to their first guess) with
 * its bands halved until a dry run fits the budget; *fits says whether one
 * did, v->last holds its stats, t the plan. */
static cq_status fit_bands(cq_flux_vae *v, bool decode, int H0, int W0, size_t budget, fv_plan *t, bool *fits) {
    for (;;) {
        CQ_TRY(run_plan(v, decode, H0, W0, t, true, NULL, NULL));
        if ((*fits = v->last.peak_bytes <= budget)) return CQ_OK;
        bool smaller = false;
        for (int m = 0; m < t->n; m++)
            if (t->band[m] < t->H[m] && t->band[m] > 1) {
                t->band[m] = CQ_MAX((int64_t)1, t->band[m] / 2);
                smaller = true;
            }
        if (!smaller) return CQ_OK;
    }
}

/* The budget's plan: everything whole if a dry run of that fits; else, of
 * the candidates that fit, the one with the fewest multiply-adds: the k
 * levels with the largest maps stream (the smallest k that fits), their checkpoints
 * all fine, all coarse, or one kind for the largest level and the other for
 * the rest, each with its bands halved from a first guess until it fits (a
 * smaller band costs only more and smaller ops). When nothing fits, the
 * smallest plan tried. */
static cq_status plan_budget(cq_flux_vae *v, bool decode, int H0, int W0, fv_plan *p) {
    const size_t budget = v->budget ? v->budget : FV_BUDGET_DEFAULT;
    CQ_TRY(run_plan(v, decode, H0, W0, p, true, NULL, NULL));
    if (v->last.peak_bytes <= budget) return CQ_OK;
    const fv_plan all = *p;
    bool found = false;
    uint64_t best = UINT64_MAX;
    size_t least = SIZE_MAX;
    /* streaming one more level only adds recomputation: stop at the first k that fits */
    for (int k = 1; k <= all.n && !found; k++)
        for (int mode = 0; mode < 4; mode++) {
            if (k == 1 && mode >= 2) continue; /* the same as modes 0 and 1 */
            fv_plan t = all;
            for (int i = 0; i < k; i++) {
                const int m = decode ? all.n - 1 - i : i; /* the decoder's last levels, the encoder's first */
                const double r = (double)budget / ((double)t.W[m] * (double)t.C[m] * 4.0 * FV_STREAM_ROWS);
                t.band[m] = CQ_MIN(t.H[m] - 1, CQ_MAX((int64_t)1, (int64_t)r));
                const bool largest = i == 0;
                t.hold[m] = mode == 0 || (mode == 2 && !largest) || (mode == 3 && largest) ? FV_FINE : FV_COARSE;
            }
            bool fits;
            CQ_TRY(fit_bands(v, decode, H0, W0, budget, &t, &fits));
            if (fits ? v->last.macs < best : !found && v->last.peak_bytes < least) {
                *p = t;
                if (fits) best = v->last.macs;
                else least = v->last.peak_bytes;
                found = found || fits;
            }
        }
    return CQ_OK;
}

static cq_status make_plan(cq_flux_vae *v, bool decode, int H0, int W0, fv_plan *p) {
    plan_geometry(decode ? &v->dec : &v->enc, decode, H0, W0, p);
    if (v->band_rows > 0) {
        plan_forced(p, decode, v->band_rows);
        return CQ_OK;
    }
    /* the last plan of each direction is kept: a run of the same size and settings plans once */
    fv_plan_memo *m = &v->memo[decode];
    if (m->valid && m->H0 == H0 && m->W0 == W0 && m->budget == v->budget) {
        *p = m->plan;
        return CQ_OK;
    }
    CQ_TRY(plan_budget(v, decode, H0, W0, p));
    *m = (fv_plan_memo){.valid = true, .H0 = H0, .W0 = W0, .budget = v->budget, .plan = *p};
    return CQ_OK;
}

/* ---- graphs ---------------------------------------------------------------------------------- */
static cq_status conv_node(vs_graph *g, int in, const vw_conv *c, int stride, int pt, int pb, int pl, int pr, int *out) {
    return vs_conv(g, in, &c->w, c->b, c->cout, c->k, stride, pt, pb, pl, pr, out);
}

static cq_status same_conv(vs_graph *g, int in, const vw_conv *c, int *out) {
    int p = c->k / 2;
    return conv_node(g, in, c, 1, p, p, p, p, out);
}

/* Rows a checkpoint or the attention of level l pulls at a time: its band,
 * or all of them where the level runs whole (its checkpoint's map is then
 * allocated once the level is done and its own maps are gone). */
static int64_t chunk(const fv_plan *p, int l) { return CQ_MIN(p->band[l], p->H[l]); }

/* A checkpoint of x when `want` (and x is not one already). */
static cq_status hold(vs_graph *g, bool want, int64_t band, int *x) {
    if (!want || g->n[*x].kind == VS_HOLD) return CQ_OK;
    return vs_hold(g, *x, band, x);
}

/* A resnet; `fine`: its output checkpointed, gathered `chunk` rows at a time. */
static cq_status res_nodes(vs_graph *g, int x, const fv_res *r, int64_t band, bool fine, int64_t chunk, int *out) {
    int sc = x, t;
    if (r->has_sc) CQ_TRY(same_conv(g, x, &r->sc, &sc));
    CQ_TRY(vs_gnorm(g, x, &r->n1, true, band, &t));
    CQ_TRY(same_conv(g, t, &r->c1, &t));
    CQ_TRY(vs_gnorm(g, t, &r->n2, true, band, &t));
    CQ_TRY(same_conv(g, t, &r->c2, &t));
    CQ_TRY(vs_add(g, t, sc, out));
    return hold(g, fine, chunk, out);
}

static cq_status mid_nodes(vs_graph *g, int x, const fv_coder *c, int64_t band, bool fine, int64_t chunk, int *out) {
    CQ_TRY(res_nodes(g, x, &c->mid[0], band, fine, chunk, &x));
    if (c->attn) {
        int a;
        CQ_TRY(vs_gnorm(g, x, &c->attn_gn, false, band, &a));
        CQ_TRY(vs_attention(g, a, &c->attn_w, &a));
        CQ_TRY(vs_add(g, a, x, &x));
    }
    return res_nodes(g, x, &c->mid[1], band, fine, chunk, out);
}

/* z [h*w, C] -> image [H*W, out_channels] */
static cq_status build_decoder(const cq_flux_vae *v, vs_graph *g, const cq_tensor *z, int h, int w, const fv_plan *p) {
    const fv_coder *d = &v->dec;
    int x;
    CQ_TRY(vs_source(g, z, h, w, &x));
    if (v->cfg.use_post_quant_conv) CQ_TRY(same_conv(g, x, &v->post_quant, &x));
    CQ_TRY(same_conv(g, x, &d->conv_in, &x));
    CQ_TRY(hold(g, p->hold[0] == FV_FINE, chunk(p, 0), &x));
    CQ_TRY(mid_nodes(g, x, d, p->band[0], p->hold[0] == FV_FINE, chunk(p, 0), &x));
    g->attn_chunk = chunk(p, 0);
    for (int i = 0; i < d->n_levels; i++) {
        const fv_level *lv = &d->lv[i];
        for (int j = 0; j < lv->n_res; j++)
            CQ_TRY(res_nodes(g, x, &lv->res[j], p->band[i], p->hold[i] == FV_FINE, chunk(p, i), &x));
        if (!lv->resample) continue;
        /* the next level's checkpoint: before the upsampling (the narrowest map), or after its conv (fine) */
        CQ_TRY(hold(g, p->hold[i + 1] == FV_COARSE, chunk(p, i), &x));
        CQ_TRY(vs_upsample(g, x, 2, &x));
        CQ_TRY(same_conv(g, x, &lv->rs, &x));
        CQ_TRY(hold(g, p->hold[i + 1] == FV_FINE, chunk(p, i + 1), &x));
    }
    const int top = d->n_levels - 1;
    CQ_TRY(vs_gnorm(g, x, &d->norm_out, true, p->band[top], &x));
    return same_conv(g, x, &d->conv_out, &x);
}

/* x [H*W, in_channels] -> moments [h*w, 2C] */
static cq_status build_encoder(const cq_flux_vae *v, vs_graph *g, const cq_tensor *img, int H, int W, const fv_plan *p) {
    const fv_coder *e = &v->enc;
    const int top = e->n_levels - 1;
    int x;
    CQ_TRY(vs_source(g, img, H, W, &x));
    CQ_TRY(same_conv(g, x, &e->conv_in, &x));
    CQ_TRY(hold(g, p->hold[0] == FV_FINE, chunk(p, 0), &x));
    for (int i = 0; i < e->n_levels; i++) {
        const fv_level *lv = &e->lv[i];
        for (int j = 0; j < lv->n_res; j++)
            CQ_TRY(res_nodes(g, x, &lv->res[j], p->band[i], p->hold[i] == FV_FINE, chunk(p, i), &x));
        if (!lv->resample) continue;
        CQ_TRY(conv_node(g, x, &lv->rs, 2, 0, 1, 0, 1, &x)); /* F.pad (0, 1, 0, 1), stride 2 */
        CQ_TRY(hold(g, p->hold[i + 1] != FV_WHOLE, chunk(p, i + 1), &x));
    }
    CQ_TRY(mid_nodes(g, x, e, p->band[top], p->hold[top] == FV_FINE, chunk(p, top), &x));
    g->attn_chunk = chunk(p, top);
    CQ_TRY(vs_gnorm(g, x, &e->norm_out, true, p->band[top], &x));
    CQ_TRY(same_conv(g, x, &e->conv_out, &x));
    if (v->cfg.use_quant_conv) CQ_TRY(same_conv(g, x, &v->quant, &x));
    return CQ_OK;
}

/* ---- running a graph ------------------------------------------------------------------------ */
typedef struct fv_run {
    cq_flux_vae *v;
    vs_graph g;
    cq_tensor src;
    bool report;          /* progress goes to the model's callback */
    uint64_t done, total; /* progress, in pixels of work */
} fv_run;

static int on_work(void *user, uint64_t pixels) {
    fv_run *r = user;
    r->done += pixels;
    return r->report && r->v->progress ? r->v->progress(r->done, r->total, r->v->progress_user) : 0;
}

/* The last node's rows in bands of `band`, each downloaded (unless dry) into
 * out [C, H, W] planar; `sink_work`: each band counts its pixels of progress. */
static cq_status pull_sink(fv_run *r, int64_t band, float *out, bool sink_work) {
    vs_graph *g = &r->g;
    const int sink = g->count - 1;
    const int64_t H = g->n[sink].H, W = g->n[sink].W, C = g->n[sink].C, n = H * W;
    if (band < 1 || band > H) band = H;
    float *buf = g->dry ? NULL : cq_mallocn((size_t)(band * W * C), sizeof(float));
    if (!g->dry && !buf) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    for (int64_t y0 = 0; y0 < H && s == CQ_OK; y0 += band) {
        const int64_t y1 = CQ_MIN(H, y0 + band);
        cq_tensor rows;
        s = vs_ensure(g, sink, y1);
        if (s == CQ_OK) s = vs_rows(g, sink, y0, y1, &rows);
        if (s == CQ_OK && buf) s = cq_tensor_download(&rows, buf, (size_t)((y1 - y0) * W * C) * sizeof(float));
        if (s != CQ_OK) break;
        vs_release(g, y1);
        for (int64_t i = 0; buf && i < (y1 - y0) * W; i++)
            for (int64_t c = 0; c < C; c++) out[c * n + y0 * W + i] = buf[i * C + c];
        if (sink_work && on_work(r, (uint64_t)((y1 - y0) * W))) s = cq_fail(CQ_ERR_INTERRUPTED, "vae: cancelled");
    }
    cq_free(buf);
    if (s == CQ_OK && !g->dry) s = cq_backend_sync(g->be);
    return s;
}

/* Upload planar x [C, n] as channels-last [n, C] (a phantom when dry). */
static cq_status upload_planar(fv_run *r, const float *x, int64_t n, int64_t C) {
    if (r->g.dry) {
        r->src = vs_phantom(r->v->be, n, C);
        return CQ_OK;
    }
    CQ_TRY(cq_tensor_alloc_2d(r->v->be, CQ_DTYPE_F32, n, C, &r->src));
    float *tmp = cq_mallocn((size_t)(n * C), sizeof(float));
    if (!tmp) return CQ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) tmp[i * C + c] = x[c * n + i];
    cq_status s = cq_tensor_upload(&r->src, tmp, (size_t)(n * C) * sizeof(float));
    cq_free(tmp);
    return s;
}

/* Decode bands: the top level's band, or a quarter of the image when it runs whole. */
static int64_t sink_band(const fv_plan *p) {
    const int top = p->n - 1;
    return p->band[top] < p->H[top] ? p->band[top] : CQ_MAX((int64_t)1, (p->H[top] + 3) / 4);
}

/* One decode (in = z [C, H0, W0], out = the image) or encode (in = the image
 * [C, H0, W0], out = the moments) with plan p; dry: the schedule alone, for
 * the stats. v->last receives the stats either way. */
static cq_status run_plan(cq_flux_vae *v, bool decode, int H0, int W0, const fv_plan *p, bool dry, const float *in,
                          float *out) {
    fv_run r;
    memset(&r, 0, sizeof r);
    r.v = v;
    r.report = !dry;
    vs_init(&r.g, v->be);
    r.g.dry = dry;
    const int64_t F = v->cfg.spatial_factor, n = (int64_t)H0 * W0;
    cq_status s = upload_planar(&r, in, n, decode ? v->cfg.latent_channels : v->cfg.in_channels);
    if (s == CQ_OK)
        s = decode ? build_decoder(v, &r.g, &r.src, H0, W0, p) : build_encoder(v, &r.g, &r.src, H0, W0, p);
    int passes = 0, holds = 0;
    for (int i = 0; s == CQ_OK && i < r.g.count; i++) {
        const vs_node *nd = &r.g.n[i];
        holds += nd->kind == VS_HOLD;
        if (nd->kind != VS_GNORM) continue;
        const vs_node *x = &r.g.n[nd->in[0]];
        r.total += (uint64_t)(x->H * x->W);
        passes += nd->band > 0 && nd->band < x->H;
    }
    r.total += decode ? (uint64_t)(n * F * F) : 0;
    r.g.work = on_work;
    r.g.work_user = &r;
    if (s == CQ_OK) s = pull_sink(&r, decode ? sink_band(p) : 0, out, decode);
    v->last = (cq_flux_vae_stats){.peak_bytes = r.g.peak + r.src.nbytes, .macs = r.g.macs, .stat_passes = passes,
                                  .checkpoints = holds};
    vs_free(&r.g);
    cq_tensor_free(&r.src);
    return s;
}

static cq_status check_decode(const cq_flux_vae *v, const float *z, int h, int w, const float *image, bool dry) {
    if (!v || (!dry && (!z || !image))) return cq_fail(CQ_ERR_INVALID_ARG, "vae: model, latents and image are required");
    const int64_t F = v->cfg.spatial_factor;
    if (h < 1 || w < 1 || (int64_t)h * F > INT_MAX / 4 || (int64_t)w * F > INT_MAX / 4 || (int64_t)h * w * F * F > INT32_MAX)
        return cq_fail(CQ_ERR_SHAPE, "vae: a %dx%d latent does not decode here (each side 1 to %lld latent pixels, an "
                                     "image of at most 2^31 pixels)", h, w, (long long)(INT_MAX / 4 / F));
    return CQ_OK;
}

static cq_status check_encode(const cq_flux_vae *v, const float *x, int H, int W, const float *moments, bool dry) {
    if (!v || (!dry && (!x || !moments))) return cq_fail(CQ_ERR_INVALID_ARG, "vae: model, image and moments are required");
    if (!v->cfg.has_encoder)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: this file holds no encoder (it was converted for decoding only), so "
                                           "it cannot encode images");
    const int F = v->cfg.spatial_factor;
    if (H < F || W < F || H % F || W % F || H > INT_MAX / 4 || W > INT_MAX / 4 || (int64_t)H * W > INT32_MAX)
        return cq_fail(CQ_ERR_SHAPE, "vae: image %dx%d is not a positive multiple of %d in both sides (at most 2^31 "
                                     "pixels)", W, H, F);
    return CQ_OK;
}

static cq_status run(cq_flux_vae *v, bool decode, int H0, int W0, const float *in, float *out, bool dry) {
    CQ_TRY(decode ? check_decode(v, in, H0, W0, out, dry) : check_encode(v, in, H0, W0, out, dry));
    fv_plan p;
    CQ_TRY(make_plan(v, decode, H0, W0, &p));
    return run_plan(v, decode, H0, W0, &p, dry, in, out);
}

cq_status cq_flux_vae_decode(cq_flux_vae *v, const float *z, int h, int w, float *image) {
    return run(v, true, h, w, z, image, false);
}

cq_status cq_flux_vae_encode(cq_flux_vae *v, const float *x, int H, int W, float *moments) {
    return run(v, false, H, W, x, moments, false);
}

cq_status cq_flux_vae_plan(cq_flux_vae *v, bool decode, int h, int w, cq_flux_vae_stats *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_flux_vae_plan: out is NULL");
    memset(out, 0, sizeof *out);
    CQ_TRY(run(v, decode, h, w, NULL, NULL, true));
    *out = v->last;
    return CQ_OK;
}

/* ---- the latent codec ----------------------------------------------------------------------- */
static void codec_pack(void *self, const float *chw, float *tokens, int lat_h, int lat_w) {
    const cq_flux_vae *v = self;
    cq_latents_patchify2(chw, tokens, v->cfg.latent_channels, lat_h, lat_w);
}

static void codec_unpack(void *self, const float *tokens, float *chw, int lat_h, int lat_w) {
    const cq_flux_vae *v = self;
    cq_latents_unpatchify2(tokens, chw, v->cfg.latent_channels, lat_h, lat_w);
}

static cq_status codec_normalize(void *self, float *z, int lat_h, int lat_w) {
    return cq_flux_vae_normalize(self, z, lat_h, lat_w);
}

static cq_status codec_denormalize(void *self, float *z, int lat_h, int lat_w) {
    return cq_flux_vae_denormalize(self, z, lat_h, lat_w);
}

/* The raw decode clamped to [-1, 1] (NaN passes, as torch.clamp). */
static cq_status codec_decode(void *self, const float *z, int lat_h, int lat_w, float *image) {
    cq_flux_vae *v = self;
    CQ_TRY(cq_flux_vae_decode(v, z, lat_h, lat_w, image));
    const size_t F = (size_t)v->cfg.spatial_factor;
    const size_t n = (size_t)v->cfg.out_channels * (size_t)lat_h * F * (size_t)lat_w * F;
    for (size_t i = 0; i < n; i++) image[i] = image[i] < -1.0f ? -1.0f : image[i] > 1.0f ? 1.0f : image[i];
    return CQ_OK;
}

static cq_status codec_encode(void *self, const float *image, int H, int W, float *moments) {
    return cq_flux_vae_encode(self, image, H, W, moments);
}

cq_latent_codec cq_flux_vae_codec(cq_flux_vae *v) {
    const cq_flux_vae_config *c = cq_flux_vae_get_config(v);
    return (cq_latent_codec){.self = v, .channels = c->latent_channels, .image_channels = c->out_channels,
                             .factor = c->spatial_factor, .pack = codec_pack, .unpack = codec_unpack,
                             .normalize = codec_normalize, .denormalize = codec_denormalize, .decode = codec_decode,
                             .encode = c->has_encoder ? codec_encode : NULL};
}
