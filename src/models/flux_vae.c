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
 * The plan (see flux_vae.h and docs/ZIMAGE.md): a level (the layers at one
 * resolution) runs whole when a few of its widest maps fit the budget;
 * otherwise its group norms take their statistics in passes over bands
 * sized to the budget, and the map at the boundary before it is held whole
 * (a checkpoint: the narrowest map there, before the decoder's upsampling
 * and after the encoder's downsampling), so a pass recomputes one level at
 * most.
 */
#include <limits.h>
#include <string.h>

#include "models/flux_vae_impl.h"

#define FV_BUDGET_DEFAULT ((size_t)7 << 28) /* 1.75 GiB */
/* A level runs whole when this many of its widest maps fit the budget (a
 * resnet holds its input and the first conv's output whole for the two
 * group norms, plus the maps in flight). */
#define FV_WHOLE_MAPS 4
/* A streamed level's windows: rows of its widest map per band row that its
 * layers hold together (each conv keeps a band plus its halo of its input). */
#define FV_STREAM_ROWS 24

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
typedef struct fv_plan {
    int64_t H[CQ_FLUX_VAE_MAX_LEVELS], W[CQ_FLUX_VAE_MAX_LEVELS]; /* each level's map */
    int64_t band[CQ_FLUX_VAE_MAX_LEVELS]; /* rows per band at that resolution (>= H: whole) */
    bool hold[CQ_FLUX_VAE_MAX_LEVELS];    /* checkpoint the map entering level l (l >= 1) */
} fv_plan;

static bool whole(const fv_plan *p, int l) { return p->band[l] >= p->H[l]; }

/* Levels of the decoder (l = 0 at the latent grid) or the encoder (l = 0 at
 * the image): their grids and widest channel counts, then the bands. */
static void make_plan(const cq_flux_vae *v, const fv_coder *c, bool decode, int64_t H0, int64_t W0, fv_plan *p) {
    memset(p, 0, sizeof *p);
    const int nl = c->n_levels;
    const size_t budget = v->budget ? v->budget : FV_BUDGET_DEFAULT;
    const int64_t Himg = decode ? H0 << (nl - 1) : H0;
    for (int l = 0; l < nl; l++) {
        p->H[l] = decode ? H0 << l : H0 >> l;
        p->W[l] = decode ? W0 << l : W0 >> l;
        const int64_t C = CQ_MAX((int64_t)c->lv[l].cin, (int64_t)c->lv[l].cout);
        const double bytes_row = (double)p->W[l] * (double)C * 4.0;
        if (v->band_rows > 0) {
            /* forced: the same image rows at every level */
            double r = (double)v->band_rows * (double)p->H[l] / (double)Himg;
            p->band[l] = r >= (double)p->H[l] ? p->H[l] : CQ_MAX((int64_t)1, (int64_t)r);
        } else if (bytes_row * (double)p->H[l] * FV_WHOLE_MAPS <= (double)budget) {
            p->band[l] = p->H[l];
        } else {
            /* half the budget for the windows, the rest for the checkpoints and the maps a pass keeps */
            double r = (double)budget / 2.0 / (bytes_row * FV_STREAM_ROWS);
            p->band[l] = CQ_MIN(p->H[l] - 1, CQ_MAX((int64_t)1, (int64_t)r));
        }
    }
    for (int l = 1; l < nl; l++) p->hold[l] = !whole(p, l);
}

/* ---- graphs ---------------------------------------------------------------------------------- */
static cq_status conv_node(vs_graph *g, int in, const vw_conv *c, int stride, int pt, int pb, int pl, int pr, int *out) {
    return vs_conv(g, in, &c->w, c->b, c->cout, c->k, stride, pt, pb, pl, pr, out);
}

static cq_status same_conv(vs_graph *g, int in, const vw_conv *c, int *out) {
    int p = c->k / 2;
    return conv_node(g, in, c, 1, p, p, p, p, out);
}

static cq_status res_nodes(vs_graph *g, int x, const fv_res *r, int64_t band, int *out) {
    int sc = x, t;
    if (r->has_sc) CQ_TRY(same_conv(g, x, &r->sc, &sc));
    CQ_TRY(vs_gnorm(g, x, &r->n1, true, band, &t));
    CQ_TRY(same_conv(g, t, &r->c1, &t));
    CQ_TRY(vs_gnorm(g, t, &r->n2, true, band, &t));
    CQ_TRY(same_conv(g, t, &r->c2, &t));
    return vs_add(g, t, sc, out);
}

static cq_status mid_nodes(vs_graph *g, int x, const fv_coder *c, int64_t band, int *out) {
    CQ_TRY(res_nodes(g, x, &c->mid[0], band, &x));
    if (c->attn) {
        int a;
        CQ_TRY(vs_gnorm(g, x, &c->attn_gn, false, band, &a));
        CQ_TRY(vs_attention(g, a, &c->attn_w, &a));
        CQ_TRY(vs_add(g, a, x, &x));
    }
    return res_nodes(g, x, &c->mid[1], band, out);
}

/* z [h*w, C] -> image [H*W, out_channels] */
static cq_status build_decoder(const cq_flux_vae *v, vs_graph *g, const cq_tensor *z, int h, int w, const fv_plan *p) {
    const fv_coder *d = &v->dec;
    int x;
    CQ_TRY(vs_source(g, z, h, w, &x));
    if (v->cfg.use_post_quant_conv) CQ_TRY(same_conv(g, x, &v->post_quant, &x));
    CQ_TRY(same_conv(g, x, &d->conv_in, &x));
    CQ_TRY(mid_nodes(g, x, d, p->band[0], &x));
    g->attn_chunk = p->band[0];
    for (int i = 0; i < d->n_levels; i++) {
        const fv_level *lv = &d->lv[i];
        for (int j = 0; j < lv->n_res; j++) CQ_TRY(res_nodes(g, x, &lv->res[j], p->band[i], &x));
        if (!lv->resample) continue;
        if (p->hold[i + 1]) CQ_TRY(vs_hold(g, x, p->band[i], &x));
        CQ_TRY(vs_upsample(g, x, 2, &x));
        CQ_TRY(same_conv(g, x, &lv->rs, &x));
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
    for (int i = 0; i < e->n_levels; i++) {
        const fv_level *lv = &e->lv[i];
        for (int j = 0; j < lv->n_res; j++) CQ_TRY(res_nodes(g, x, &lv->res[j], p->band[i], &x));
        if (!lv->resample) continue;
        CQ_TRY(conv_node(g, x, &lv->rs, 2, 0, 1, 0, 1, &x)); /* F.pad (0, 1, 0, 1), stride 2 */
        if (p->hold[i + 1]) CQ_TRY(vs_hold(g, x, p->band[i + 1], &x));
    }
    CQ_TRY(mid_nodes(g, x, e, p->band[top], &x));
    g->attn_chunk = p->band[top];
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
    uint64_t done, total; /* progress, in pixels of work */
} fv_run;

static int on_work(void *user, uint64_t pixels) {
    fv_run *r = user;
    r->done += pixels;
    return r->v->progress ? r->v->progress(r->done, r->total, r->v->progress_user) : 0;
}

/* The graph over `src` ([rows, cin], already uploaded unless dry), its
 * progress total: every group norm's input pixels, plus `sink_px`. */
static cq_status run_begin(fv_run *r, cq_flux_vae *v, bool decode, int H0, int W0, bool dry, uint64_t sink_px) {
    vs_init(&r->g, v->be);
    r->v = v;
    r->g.dry = dry;
    fv_plan p;
    make_plan(v, decode ? &v->dec : &v->enc, decode, H0, W0, &p);
    CQ_TRY(decode ? build_decoder(v, &r->g, &r->src, H0, W0, &p) : build_encoder(v, &r->g, &r->src, H0, W0, &p));
    r->total = sink_px;
    for (int i = 0; i < r->g.count; i++) {
        const vs_node *n = &r->g.n[i];
        if (n->kind != VS_GNORM) continue;
        const vs_node *x = &r->g.n[n->in[0]];
        r->total += (uint64_t)(x->H * x->W);
        if (n->band > 0 && n->band < x->H) v->last.stat_passes++;
    }
    r->g.work = on_work;
    r->g.work_user = r;
    return CQ_OK;
}

static void run_end(fv_run *r) {
    r->v->last.peak_bytes = r->g.peak + r->src.nbytes;
    r->v->last.computed = r->g.computed;
    vs_free(&r->g);
    cq_tensor_free(&r->src);
}

/* The last node's rows in bands of `band`, each downloaded (unless dry) into
 * out [C, H, W] planar; `report`: each band counts its pixels of progress. */
static cq_status pull_sink(fv_run *r, int64_t band, float *out, bool report) {
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
        if (report && on_work(r, (uint64_t)((y1 - y0) * W))) s = cq_fail(CQ_ERR_INTERRUPTED, "vae: cancelled");
    }
    cq_free(buf);
    if (s == CQ_OK && !g->dry) s = cq_backend_sync(g->be);
    return s;
}

/* Upload planar x [C, n] as channels-last [n, C] (allocated only when dry). */
static cq_status upload_planar(fv_run *r, const float *x, int64_t n, int64_t C) {
    CQ_TRY(cq_tensor_alloc_2d(r->v->be, CQ_DTYPE_F32, n, C, &r->src));
    if (r->g.dry || !x) return CQ_OK;
    float *tmp = cq_mallocn((size_t)(n * C), sizeof(float));
    if (!tmp) return CQ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) tmp[i * C + c] = x[c * n + i];
    cq_status s = cq_tensor_upload(&r->src, tmp, (size_t)(n * C) * sizeof(float));
    cq_free(tmp);
    return s;
}

/* Sink band of the decode: the top level's band, or a quarter of the image when it runs whole. */
static int64_t sink_band(const vs_graph *g) {
    const vs_node *s = &g->n[g->count - 1], *norm = &g->n[s->in[0]]; /* conv_out <- SiLU(norm) */
    int64_t b = norm->kind == VS_GNORM ? norm->band : 0;
    return b > 0 && b < s->H ? b : CQ_MAX((int64_t)1, (s->H + 3) / 4);
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

static cq_status decode_run(cq_flux_vae *v, const float *z, int h, int w, float *image, bool dry) {
    CQ_TRY(check_decode(v, z, h, w, image, dry));
    memset(&v->last, 0, sizeof v->last);
    const int64_t F = v->cfg.spatial_factor;
    fv_run r;
    memset(&r, 0, sizeof r);
    r.g.dry = dry;
    r.v = v;
    cq_status s = upload_planar(&r, z, (int64_t)h * w, v->cfg.latent_channels);
    if (s == CQ_OK) s = run_begin(&r, v, true, h, w, dry, (uint64_t)((int64_t)h * w * F * F));
    if (s == CQ_OK) s = pull_sink(&r, sink_band(&r.g), image, true);
    run_end(&r);
    return s;
}

static cq_status encode_run(cq_flux_vae *v, const float *x, int H, int W, float *moments, bool dry) {
    CQ_TRY(check_encode(v, x, H, W, moments, dry));
    memset(&v->last, 0, sizeof v->last);
    fv_run r;
    memset(&r, 0, sizeof r);
    r.g.dry = dry;
    r.v = v;
    cq_status s = upload_planar(&r, x, (int64_t)H * W, v->cfg.in_channels);
    if (s == CQ_OK) s = run_begin(&r, v, false, H, W, dry, 0);
    if (s == CQ_OK) s = pull_sink(&r, 0, moments, false);
    run_end(&r);
    return s;
}

cq_status cq_flux_vae_decode(cq_flux_vae *v, const float *z, int h, int w, float *image) {
    return decode_run(v, z, h, w, image, false);
}

cq_status cq_flux_vae_encode(cq_flux_vae *v, const float *x, int H, int W, float *moments) {
    return encode_run(v, x, H, W, moments, false);
}

cq_status cq_flux_vae_plan(cq_flux_vae *v, bool decode, int h, int w, cq_flux_vae_stats *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_flux_vae_plan: out is NULL");
    memset(out, 0, sizeof *out);
    cq_progress_fn fn = v ? v->progress : NULL;
    if (v) v->progress = NULL;
    cq_status s = decode ? decode_run(v, NULL, h, w, NULL, true) : encode_run(v, NULL, h, w, NULL, true);
    if (v) v->progress = fn;
    if (s == CQ_OK) *out = v->last;
    return s;
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
