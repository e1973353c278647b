/*
 * qi21_vae.c — the VAE's layer graphs and its decode/encode drivers.
 *
 * Semantics follow diffusers' AutoencoderKLQwenImage21 and
 * AutoencoderKLQwenImage for one frame:
 *  - every CausalConv3d is a 2-D conv with symmetric zero padding (the
 *    feature cache is never filled for a single frame, so the temporal
 *    convs of the 3-D resamplers are skipped: the "Rep" path; Qwen-Image's
 *    3-D kernels reach us as their last temporal tap, the one that meets
 *    the frame behind the two causal zero frames);
 *  - RMS_norm = F.normalize over channels * sqrt(C) * gamma;
 *  - ResidualBlock: x + shortcut -> conv2(SiLU(norm2(conv1(SiLU(norm1(x))))))
 *    plus the 1x1 (or identity) shortcut;
 *  - down level: residual blocks, ZeroPad2d((0,1,0,1)) + 3x3 stride-2 conv,
 *    plus (2.1) AvgDown3D of the level input; up level: residual blocks,
 *    nearest-exact x2 (= nearest for x2) + 3x3 conv (Qwen-Image: to half the
 *    width), plus (2.1) DupUp3D of the level input (first chunk);
 *  - mid block: residual, single-head attention over all pixels, residual;
 *  - decode: post_quant_conv -> decoder -> unpatchify -> clamp to [-1, 1];
 *    encode: patchify -> encoder -> quant_conv (mean | logvar).
 * Patchify (2.1 only) folds a p x p block into channel c*p*p + (col sub)*p +
 * (row sub) (the reference's permute order, transposed relative to
 * pixel_unshuffle); it is done on the host while uploading/downloading.
 */
#include <limits.h>
#include <string.h>

#include "models/qi21_vae_impl.h"

/* Activations the automatic band height aims at (bytes). */
#define QI21_VAE_BAND_BUDGET ((size_t)1 << 30)

void cq_qi21_vae_set_band_rows(cq_qi21_vae *v, int rows) {
    if (v) v->band_rows = rows < 0 ? 0 : rows;
}

void cq_qi21_vae_set_progress(cq_qi21_vae *v, cq_progress_fn fn, void *user) {
    if (!v) return;
    v->progress = fn;
    v->progress_user = user;
}

size_t cq_qi21_vae_last_peak_bytes(const cq_qi21_vae *v) { return v ? v->peak : 0; }

/* ---- normalisation -------------------------------------------------------------------- */
static cq_status check_latents(const cq_qi21_vae *v, const float *x, int h, int w, cq_qi21_vae_layout layout) {
    if (!v || !x) return cq_fail(CQ_ERR_INVALID_ARG, "vae: model and latents are required");
    if (h < 1 || w < 1 || (int64_t)h * w > ((int64_t)1 << 40))
        return cq_fail(CQ_ERR_SHAPE, "vae: latent grid %dx%d", h, w);
    if (layout != CQ_QI21_VAE_PLANAR && layout != CQ_QI21_VAE_CHANNELS_LAST)
        return cq_fail(CQ_ERR_INVALID_ARG, "vae: unknown layout %d", (int)layout);
    return CQ_OK;
}

/* Element (pixel i, channel c) of an [n, C] or [C, n] array. */
static inline size_t at(cq_qi21_vae_layout layout, int64_t i, int64_t c, int64_t n, int64_t C) {
    return layout == CQ_QI21_VAE_PLANAR ? (size_t)(c * n + i) : (size_t)(i * C + c);
}

cq_status cq_qi21_vae_denormalize(const cq_qi21_vae *v, float *x, int h, int w, cq_qi21_vae_layout layout) {
    CQ_TRY(check_latents(v, x, h, w, layout));
    int64_t n = (int64_t)h * w, C = v->cfg.z_dim;
    if (v->cfg.kind == CQ_QI21_VAE_QIMAGE) {
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < C; c++) {
                float *p = &x[at(layout, i, c, n, C)];
                float t = *p / v->std_inv[c]; /* latents / (1 / std) + mean, each op rounded */
                *p = t + v->mean[c];
            }
        return CQ_OK;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) {
            float *p = &x[at(layout, i, c, n, C)];
            float t = *p * v->std[c]; /* two roundings, as latents * std + mean */
            *p = t + v->mean[c];
        }
    return CQ_OK;
}

cq_status cq_qi21_vae_normalize(const cq_qi21_vae *v, float *z, int h, int w, cq_qi21_vae_layout layout) {
    CQ_TRY(check_latents(v, z, h, w, layout));
    int64_t n = (int64_t)h * w, C = v->cfg.z_dim;
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++) {
            float *p = &z[at(layout, i, c, n, C)];
            float t = *p - v->mean[c];
            *p = t / v->std[c];
        }
    return CQ_OK;
}

/* ---- graphs ------------------------------------------------------------------------------ */
static cq_status conv_node(vs_graph *g, int in, const qv_conv *c, int stride, int pt, int pb, int pl, int pr, int *out) {
    return vs_conv(g, in, &c->w, c->b, c->cout, c->k, stride, pt, pb, pl, pr, out);
}

static cq_status same_conv(vs_graph *g, int in, const qv_conv *c, int *out) {
    int p = c->k / 2;
    return conv_node(g, in, c, 1, p, p, p, p, out);
}

static cq_status res_nodes(vs_graph *g, int x, const qv_res *r, int *out) {
    int h = x, t;
    if (r->has_sc) CQ_TRY(same_conv(g, x, &r->sc, &h));
    CQ_TRY(vs_norm(g, x, r->g1, true, &t));
    CQ_TRY(same_conv(g, t, &r->c1, &t));
    CQ_TRY(vs_norm(g, t, r->g2, true, &t));
    CQ_TRY(same_conv(g, t, &r->c2, &t));
    return vs_add(g, t, h, out);
}

static cq_status mid_nodes(vs_graph *g, int x, const qv_coder *c, int *out) {
    CQ_TRY(res_nodes(g, x, &c->mid[0], &x));
    CQ_TRY(vs_attention(g, x, &c->attn, &x));
    return res_nodes(g, x, &c->mid[1], out);
}

/* z [h*w, z_dim] -> decoder output [H*W, out_channels] (patched grid). */
static cq_status build_decoder(const cq_qi21_vae *v, vs_graph *g, const cq_tensor *z, int h, int w) {
    const qv_coder *d = &v->dec;
    int x, s;
    CQ_TRY(vs_source(g, z, h, w, &x));
    CQ_TRY(same_conv(g, x, &v->post_quant, &x));
    CQ_TRY(same_conv(g, x, &d->conv_in, &x));
    CQ_TRY(mid_nodes(g, x, d, &x));
    for (int i = 0; i < d->n_levels; i++) {
        const qv_level *lv = &d->lv[i];
        int in = x;
        for (int j = 0; j < lv->n_res; j++) CQ_TRY(res_nodes(g, x, &lv->res[j], &x));
        if (lv->resample) {
            CQ_TRY(vs_upsample(g, x, 2, &x));
            CQ_TRY(same_conv(g, x, &lv->rs, &x));
        }
        if (lv->shortcut) {
            CQ_TRY(vs_dupup(g, in, lv->cout, lv->ft, lv->fs, &s));
            CQ_TRY(vs_add(g, x, s, &x));
        }
    }
    CQ_TRY(vs_norm(g, x, d->norm_out, true, &x));
    return same_conv(g, x, &d->conv_out, &x);
}

/* x [H*W, in_channels] (patched) -> moments [h*w, 2*z_dim]. */
static cq_status build_encoder(const cq_qi21_vae *v, vs_graph *g, const cq_tensor *img, int H, int W) {
    const qv_coder *e = &v->enc;
    int x, s;
    CQ_TRY(vs_source(g, img, H, W, &x));
    CQ_TRY(same_conv(g, x, &e->conv_in, &x));
    for (int i = 0; i < e->n_levels; i++) {
        const qv_level *lv = &e->lv[i];
        int in = x;
        for (int j = 0; j < lv->n_res; j++) CQ_TRY(res_nodes(g, x, &lv->res[j], &x));
        if (lv->resample) CQ_TRY(conv_node(g, x, &lv->rs, 2, 0, 1, 0, 1, &x)); /* ZeroPad2d((0, 1, 0, 1)) */
        if (lv->shortcut) {
            CQ_TRY(vs_avgdown(g, in, lv->cout, lv->ft, lv->fs, &s));
            CQ_TRY(vs_add(g, x, s, &x));
        }
    }
    CQ_TRY(mid_nodes(g, x, e, &x));
    CQ_TRY(vs_norm(g, x, e->norm_out, true, &x));
    CQ_TRY(same_conv(g, x, &e->conv_out, &x));
    return same_conv(g, x, &v->quant, &x);
}

/* Rows of node `ref` per band so the widest layer's band (times the few such
 * tensors alive at once) fits the budget: bytes of one `ref` row, summed
 * through the resolution ratio, for the largest layer. */
static int64_t auto_band(const vs_graph *g, int ref) {
    const int64_t Href = g->n[ref].H;
    double worst = 1.0;
    for (int i = 0; i < g->count; i++) {
        const vs_node *n = &g->n[i];
        double per_ref_row = (double)n->W * (double)n->C * 4.0 * (double)n->H / (double)Href;
        if (per_ref_row > worst) worst = per_ref_row;
    }
    double rows = (double)QI21_VAE_BAND_BUDGET / (6.0 * worst);
    if (rows < 1.0) rows = 1.0;
    return rows >= (double)Href ? Href : (int64_t)rows;
}

static cq_status report(cq_qi21_vae *v, int64_t done, int64_t total) {
    if (v->progress && v->progress((uint64_t)done, (uint64_t)total, v->progress_user))
        return cq_fail(CQ_ERR_INTERRUPTED, "vae: cancelled");
    return CQ_OK;
}

/* ---- decode ------------------------------------------------------------------------------- */
typedef struct dec_run {
    cq_qi21_vae *v;
    vs_graph g;
    cq_tensor z;
    float *band;
} dec_run;

static cq_status decode_stream(dec_run *r, cq_qi21_vae_layout layout, float *image) {
    cq_qi21_vae *v = r->v;
    vs_graph *g = &r->g;
    const int p = v->cfg.patch_size, Ci = v->cfg.image_channels, Cp = v->out_channels;
    const int sink = g->count - 1;
    const int64_t Hs = g->n[sink].H, Ws = g->n[sink].W, Hi = Hs * p, Wi = Ws * p;
    const int64_t n_img = Hi * Wi;
    int64_t B = v->band_rows > 0 ? ((int64_t)v->band_rows + p - 1) / p : auto_band(g, sink);
    if (B > Hs) B = Hs;
    /* The attention input sits at the latent grid: pull it in bands of the
     * same image height. */
    g->attn_chunk = CQ_MAX((int64_t)1, B * p / v->cfg.spatial_factor);
    r->band = cq_mallocn((size_t)(B * Ws * Cp), sizeof(float));
    if (!r->band) return CQ_ERR_NOMEM;
    for (int64_t y0 = 0; y0 < Hs; y0 += B) {
        int64_t y1 = CQ_MIN(Hs, y0 + B);
        cq_tensor rows;
        CQ_TRY(vs_ensure(g, sink, y1));
        CQ_TRY(vs_rows(g, sink, y0, y1, &rows));
        CQ_TRY(cq_tensor_download(&rows, r->band, (size_t)((y1 - y0) * Ws * Cp) * sizeof(float)));
        vs_release(g, y1);
        /* unpatchify: channel c*p*p + a*p + b -> pixel (row*p + b, col*p + a), channel c; then clamp */
        for (int64_t yy = y0; yy < y1; yy++)
            for (int64_t xx = 0; xx < Ws; xx++) {
                const float *src = r->band + ((yy - y0) * Ws + xx) * Cp;
                for (int c = 0; c < Ci; c++)
                    for (int a = 0; a < p; a++)
                        for (int b = 0; b < p; b++) {
                            float val = src[(c * p + a) * p + b];
                            val = val < -1.0f ? -1.0f : val > 1.0f ? 1.0f : val; /* NaN passes, as torch.clamp */
                            int64_t pix = (yy * p + b) * Wi + xx * p + a;
                            image[at(layout, pix, c, n_img, Ci)] = val;
                        }
            }
        CQ_TRY(report(v, y1 * p, Hi));
    }
    return CQ_OK;
}

cq_status cq_qi21_vae_decode(cq_qi21_vae *v, const float *z, int h, int w, cq_qi21_vae_layout layout, float *image) {
    CQ_TRY(check_latents(v, z, h, w, layout));
    if (!image) return cq_fail(CQ_ERR_INVALID_ARG, "vae: image buffer is NULL");
    const int F = v->cfg.spatial_factor, C = v->cfg.z_dim;
    if ((int64_t)h * F > INT_MAX / 4 || (int64_t)w * F > INT_MAX / 4)
        return cq_fail(CQ_ERR_SHAPE, "vae: a %dx%d latent decodes to an image too large", h, w);
    dec_run r;
    memset(&r, 0, sizeof r);
    r.v = v;
    vs_init(&r.g, v->be);
    const int64_t n = (int64_t)h * w;
    float *tmp = cq_mallocn((size_t)(n * C), sizeof(float));
    cq_status s = tmp ? cq_tensor_alloc_2d(v->be, CQ_DTYPE_F32, n, C, &r.z) : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        for (int64_t i = 0; i < n; i++)
            for (int c = 0; c < C; c++) tmp[i * C + c] = z[at(layout, i, c, n, C)];
        s = cq_tensor_upload(&r.z, tmp, (size_t)(n * C) * sizeof(float));
    }
    cq_free(tmp);
    if (s == CQ_OK) s = build_decoder(v, &r.g, &r.z, h, w);
    if (s == CQ_OK) s = decode_stream(&r, layout, image);
    if (s == CQ_OK) s = cq_backend_sync(v->be);
    v->peak = r.g.peak + r.z.nbytes;
    vs_free(&r.g);
    cq_tensor_free(&r.z);
    cq_free(r.band);
    return s;
}

/* ---- encode ------------------------------------------------------------------------------- */
/* Encoder progress: latent rows gathered for the mid block, as image rows. */
typedef struct enc_progress {
    cq_qi21_vae *v;
    int F, H;
} enc_progress;

static int enc_pulled(uint64_t done, uint64_t total, void *user) {
    const enc_progress *e = user;
    (void)total;
    return e->v->progress ? e->v->progress(done * (uint64_t)e->F, (uint64_t)e->H, e->v->progress_user) : 0;
}

cq_status cq_qi21_vae_encode(cq_qi21_vae *v, const float *x, int H, int W, cq_qi21_vae_layout layout, float *moments) {
    if (!v || !x || !moments) return cq_fail(CQ_ERR_INVALID_ARG, "vae: model, image and moments are required");
    if (!v->cfg.has_encoder)
        return cq_fail(CQ_ERR_UNSUPPORTED, "vae: this file holds no encoder (it was converted for decoding only), so "
                                           "it cannot encode images");
    if (layout != CQ_QI21_VAE_PLANAR && layout != CQ_QI21_VAE_CHANNELS_LAST)
        return cq_fail(CQ_ERR_INVALID_ARG, "vae: unknown layout %d", (int)layout);
    const int F = v->cfg.spatial_factor, p = v->cfg.patch_size, Ci = v->cfg.image_channels, Cp = v->in_channels;
    if (H < F || W < F || H % F || W % F || H > INT_MAX / 4 || W > INT_MAX / 4)
        return cq_fail(CQ_ERR_SHAPE, "vae: image %dx%d is not a positive multiple of %d in both sides", W, H, F);
    const int64_t Hp = H / p, Wp = W / p, n_img = (int64_t)H * W, h = H / F, w = W / F, Z = 2LL * v->cfg.z_dim;
    vs_graph g;
    vs_init(&g, v->be);
    cq_tensor src;
    memset(&src, 0, sizeof src);
    float *tmp = cq_mallocn((size_t)(Hp * Wp * Cp), sizeof(float));
    cq_status s = tmp ? cq_tensor_alloc_2d(v->be, CQ_DTYPE_F32, Hp * Wp, Cp, &src) : CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        /* patchify: pixel (row*p + b, col*p + a), channel c -> channel c*p*p + a*p + b */
        for (int64_t yy = 0; yy < Hp; yy++)
            for (int64_t xx = 0; xx < Wp; xx++)
                for (int c = 0; c < Ci; c++)
                    for (int a = 0; a < p; a++)
                        for (int b = 0; b < p; b++)
                            tmp[(yy * Wp + xx) * Cp + (c * p + a) * p + b] =
                                x[at(layout, (yy * p + b) * W + xx * p + a, c, n_img, Ci)];
        s = cq_tensor_upload(&src, tmp, (size_t)(Hp * Wp * Cp) * sizeof(float));
    }
    cq_free(tmp);
    tmp = NULL;
    if (s == CQ_OK) s = build_encoder(v, &g, &src, (int)Hp, (int)Wp);
    if (s == CQ_OK) {
        /* Everything up to the mid block's attention streams; its input (the
         * latent grid) is pulled in bands of about band_rows image rows. */
        int64_t B = v->band_rows > 0 ? ((int64_t)v->band_rows + p - 1) / p : auto_band(&g, 0);
        g.attn_chunk = CQ_MAX((int64_t)1, B * p / F);
        enc_progress ep = {v, F, H};
        g.progress = enc_pulled;
        g.progress_user = &ep;
        const int sink = g.count - 1;
        cq_tensor rows;
        s = vs_ensure(&g, sink, h);
        if (s == CQ_OK) s = vs_rows(&g, sink, 0, h, &rows);
        if (s == CQ_OK) s = (tmp = cq_mallocn((size_t)(h * w * Z), sizeof(float))) ? CQ_OK : CQ_ERR_NOMEM;
        if (s == CQ_OK) s = cq_tensor_download(&rows, tmp, (size_t)(h * w * Z) * sizeof(float));
        if (s == CQ_OK) s = cq_backend_sync(v->be);
        if (s == CQ_OK) {
            for (int64_t i = 0; i < h * w; i++)
                for (int64_t c = 0; c < Z; c++) moments[at(layout, i, c, h * w, Z)] = tmp[i * Z + c];
        }
    }
    v->peak = g.peak + src.nbytes;
    cq_free(tmp);
    vs_free(&g);
    cq_tensor_free(&src);
    return s;
}
