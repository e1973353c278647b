/*
 * ltx2_vae.c — LTX-2.x's conv video VAE on the op layer (ltx2_vae.h): the
 * stages of the decoder (conv_in, mid block, each up block, the head) and of
 * the encoder (conv_in, each down block, the mid block and head), each a
 * function from one channels-last map [T*H*W, C] to the next, and the
 * decode / encode drivers around them (host layouts, un-patchify, patchify).
 *
 * Semantics follow diffusers' AutoencoderKLLTX2Video (58eb52c0) for batch 1:
 *  - PixelNorm (PerChannelRMSNorm): x / sqrt(mean_c x^2 + 1e-8), the rmsnorm
 *    op without a weight;
 *  - LTX2VideoCausalConv3d: time padded by repeating the first frame twice
 *    (causal) or the first and the last once (non-causal), space zero-padded
 *    by 1, a 3x3x3 conv with bias: cq_op_conv3d with those pads;
 *  - LTX2VideoUpsampler3d (no residual): conv, depth-to-space (c, pt, ph, pw)
 *    with c slowest, the first pt - 1 frames dropped (a row view);
 *  - LTX2VideoDownsampler3d: pt - 1 copies of frame 0 in front, then
 *    space-to-depth of the conv's output plus the channel-group mean of the
 *    space-to-depth of its input. Space-to-depth with channels
 *    ((c st0 + a) st1 + b) st2 + d is a time fold (per pair of frames, a
 *    transpose of [st0, P C] to [P C, st0]: channel c st0 + a) followed by
 *    pixel_unshuffle over the frames stacked as one tall image (channel
 *    c' st1 st2 + b st2 + d; row pairs never straddle a frame, H being a
 *    multiple of st1).
 * Every activation is f32; the scratch is allocated per stage and freed as
 * soon as the next map exists (the whole video is held, untiled).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/ltx2_vae_impl.h"

#define WHO "ltx2_vae"
#define PN_EPS 1e-8f              /* PerChannelRMSNorm's default */
#define MAX_ELEMS ((int64_t)1 << 36) /* the largest map this untiled path holds (256 GiB of f32) */

typedef struct lv_map {
    cq_tensor t; /* [T*H*W, C] f32 */
    int T, H, W, C;
} lv_map;

static void map_free(lv_map *m) {
    cq_tensor_free(&m->t);
    memset(m, 0, sizeof *m);
}

static cq_status map_alloc(cq_backend *be, int T, int H, int W, int C, lv_map *m) {
    memset(m, 0, sizeof *m);
    const int64_t rows = (int64_t)T * H * W;
    if (rows * C > MAX_ELEMS)
        return cq_fail(CQ_ERR_SHAPE, WHO ": a %d x %d x %d x %d map exceeds the %lld values an untiled run holds", T, H,
                       W, C, (long long)MAX_ELEMS);
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, rows, C, &m->t));
    m->T = T, m->H = H, m->W = W, m->C = C;
    return CQ_OK;
}

static void tap(const cq_ltx2_vae *v, const char *name, const lv_map *m) {
    if (v->tap) v->tap(v->tap_user, name, &m->t, m->T, m->H, m->W);
}

/* y = conv(x): a fresh map of c->cout channels on x's grid. */
static cq_status conv(cq_ltx2_vae *v, const lv_conv *c, const lv_map *x, bool causal, lv_map *y) {
    CQ_TRY(map_alloc(v->be, x->T, x->H, x->W, c->cout, y));
    const cq_conv3d_args a = {.y = &y->t, .x = &x->t, .w = &c->w, .bias = &c->b, .T = x->T, .H = x->H, .W = x->W,
                              .kt = 3, .kh = 3, .kw = 3, .stride_t = 1, .stride_y = 1, .stride_x = 1,
                              .pad_front = causal ? 2 : 1, .pad_back = causal ? 0 : 1, .pad_l = 1, .pad_r = 1,
                              .pad_t = 1, .pad_b = 1, .mode = CQ_PAD_ZERO};
    cq_status s = cq_op_conv3d(v->be, &a);
    if (s != CQ_OK) map_free(y);
    return s;
}

/* y = SiLU(PixelNorm(x)); y may be x. */
static cq_status norm_silu(cq_ltx2_vae *v, cq_tensor *y, const cq_tensor *x) {
    CQ_TRY(cq_op_rmsnorm(v->be, y, x, NULL, NULL, false, PN_EPS));
    return cq_op_unary(v->be, y, y, CQ_UNARY_SILU, 0.0f, 0.0f);
}

/* x += conv2(SiLU(PN(conv1(SiLU(PN(x)))))), in place. */
static cq_status resblock(cq_ltx2_vae *v, const lv_res *r, lv_map *x, bool causal) {
    lv_map a = {0}, h = {0}, o = {0};
    cq_status s = map_alloc(v->be, x->T, x->H, x->W, x->C, &a);
    if (s == CQ_OK) s = norm_silu(v, &a.t, &x->t);
    if (s == CQ_OK) s = conv(v, &r->c1, &a, causal, &h);
    map_free(&a);
    if (s == CQ_OK) s = norm_silu(v, &h.t, &h.t);
    if (s == CQ_OK) s = conv(v, &r->c2, &h, causal, &o);
    map_free(&h);
    if (s == CQ_OK) s = cq_op_binary(v->be, &x->t, &x->t, &o.t, CQ_BINARY_ADD);
    map_free(&o);
    return s;
}

static cq_status resblocks(cq_ltx2_vae *v, const lv_res *r, int n, lv_map *x, bool causal) {
    for (int j = 0; j < n; j++) {
        if (cq_cancel_requested()) return cq_fail(CQ_ERR_INTERRUPTED, WHO ": interrupted");
        CQ_TRY(resblock(v, &r[j], x, causal));
    }
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Decoder stages                                                           */
/* ------------------------------------------------------------------------ */
static cq_status dec_conv_in(cq_ltx2_vae *v, lv_map *x) {
    lv_map y;
    CQ_TRY(conv(v, &v->dec.conv_in, x, v->cfg.dec_causal, &y));
    map_free(x);
    *x = y;
    tap(v, "dec_conv_in", x);
    return CQ_OK;
}

static cq_status dec_mid(cq_ltx2_vae *v, lv_map *x) {
    CQ_TRY(resblocks(v, v->dec.mid, v->cfg.dec_mid_layers, x, v->cfg.dec_causal));
    tap(v, "dec_mid", x);
    return CQ_OK;
}

/* Conv, depth-to-space, the first pt - 1 frames dropped. */
static cq_status upsample(cq_ltx2_vae *v, const cq_ltx2_vae_block *B, const lv_conv *c, lv_map *x) {
    const int pt = B->st[0], ph = B->st[1], pw = B->st[2];
    lv_map y = {0}, d = {0}, o = {0};
    cq_status s = conv(v, c, x, v->cfg.dec_causal, &y);
    if (s == CQ_OK) s = map_alloc(v->be, x->T * pt, x->H * ph, x->W * pw, B->cout, &d);
    if (s == CQ_OK) s = cq_op_depth_to_space3d(v->be, &d.t, &y.t, x->T, x->H, x->W, pt, ph, pw);
    map_free(&y);
    if (s == CQ_OK && pt == 1) { /* nothing dropped: the depth-to-space output is the block's map */
        map_free(x);
        *x = d;
        return CQ_OK;
    }
    const int To = d.T - (pt - 1);
    if (s == CQ_OK) s = map_alloc(v->be, To, d.H, d.W, d.C, &o);
    if (s == CQ_OK) {
        const int64_t frame = (int64_t)d.H * d.W;
        cq_tensor kept = cq_tensor_rows_view(&d.t, (int64_t)(pt - 1) * frame, (int64_t)To * frame);
        s = cq_op_copy(v->be, &o.t, &kept);
        cq_tensor_free(&kept);
    }
    map_free(&d);
    if (s != CQ_OK) {
        map_free(&o);
        return s;
    }
    map_free(x);
    *x = o;
    return CQ_OK;
}

static cq_status dec_up(cq_ltx2_vae *v, int i, lv_map *x) {
    const cq_ltx2_vae_block *B = &v->cfg.up[i];
    if (B->resample) CQ_TRY(upsample(v, B, &v->dec.blk[i].rs, x));
    CQ_TRY(resblocks(v, v->dec.blk[i].res, B->n_res, x, v->cfg.dec_causal));
    char nm[32];
    snprintf(nm, sizeof nm, "dec_up%d", i);
    tap(v, nm, x);
    return CQ_OK;
}

/* PixelNorm, SiLU, conv_out: x becomes the patchified frames [T*H*W, out_channels p^2]. */
static cq_status dec_head(cq_ltx2_vae *v, lv_map *x) {
    CQ_TRY(norm_silu(v, &x->t, &x->t));
    lv_map y;
    CQ_TRY(conv(v, &v->dec.conv_out, x, v->cfg.dec_causal, &y));
    map_free(x);
    *x = y;
    tap(v, "dec_conv_out", x);
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Shapes, normalisation                                                    */
/* ------------------------------------------------------------------------ */
static cq_status check_grid(const char *what, int F, int h, int w) {
    if (F < 1 || h < 1 || w < 1 || F > 65536 || h > 65536 || w > 65536)
        return cq_fail(CQ_ERR_SHAPE, WHO ": %s grid %d x %d x %d (each must be in [1, 65536])", what, F, h, w);
    return CQ_OK;
}

cq_status cq_ltx2_vae_decode_shape(const cq_ltx2_vae *v, int F, int h, int w, int *Fo, int *Ho, int *Wo) {
    if (!v || !Fo || !Ho || !Wo) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": decode_shape needs a model and outputs");
    CQ_TRY(check_grid("latent", F, h, w));
    const cq_ltx2_vae_config *c = &v->cfg;
    int64_t T = F;
    for (int i = 0; i < c->n_up; i++)
        if (c->up[i].resample) T = T * c->up[i].st[0] - (c->up[i].st[0] - 1);
    const int64_t H = (int64_t)h * c->s_up, W = (int64_t)w * c->s_up;
    if (T > (1 << 20) || H > (1 << 20) || W > (1 << 20))
        return cq_fail(CQ_ERR_SHAPE, WHO ": a %d x %d x %d latent decodes to %lld x %lld x %lld frames, too large", F,
                       h, w, (long long)T, (long long)H, (long long)W);
    *Fo = (int)T, *Ho = (int)H, *Wo = (int)W;
    return CQ_OK;
}

cq_status cq_ltx2_vae_encode_shape(const cq_ltx2_vae *v, int F, int H, int W, int *Fo, int *Ho, int *Wo) {
    if (!v || !Fo || !Ho || !Wo) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": encode_shape needs a model and outputs");
    CQ_TRY(check_grid("frame", F, H, W));
    const cq_ltx2_vae_config *c = &v->cfg;
    if (H % c->s_down || W % c->s_down)
        return cq_fail(CQ_ERR_SHAPE, WHO ": frames of %d x %d: both sides must be multiples of %d", H, W, c->s_down);
    int T = F;
    for (int i = 0; i < c->n_down; i++) {
        const int st = c->down[i].resample ? c->down[i].st[0] : 1;
        if ((T + st - 1) % st)
            return cq_fail(CQ_ERR_SHAPE, WHO ": %d frames do not fold through down block %d (%d frames + %d in front "
                           "is not a multiple of %d); the encoder takes %d k + 1 frames", F, i, T, st - 1, st,
                           c->t_down);
        T = (T + st - 1) / st;
    }
    *Fo = T, *Ho = H / c->s_down, *Wo = W / c->s_down;
    return CQ_OK;
}

static cq_status check_latents(const cq_ltx2_vae *v, const float *z, int F, int h, int w) {
    if (!v || !z) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a model and latents are required");
    return check_grid("latent", F, h, w);
}

cq_status cq_ltx2_vae_denormalize(const cq_ltx2_vae *v, float *z, int F, int h, int w) {
    CQ_TRY(check_latents(v, z, F, h, w));
    const size_t plane = (size_t)F * h * w;
    const float sf = (float)v->cfg.scaling_factor;
    for (int c = 0; c < v->cfg.latent_channels; c++)
        for (size_t i = 0; i < plane; i++) {
            float t = z[(size_t)c * plane + i] * v->std[c]; /* latents * std / scaling_factor + mean, in f32 */
            t = t / sf;
            z[(size_t)c * plane + i] = t + v->mean[c];
        }
    return CQ_OK;
}

cq_status cq_ltx2_vae_normalize(const cq_ltx2_vae *v, float *z, int F, int h, int w) {
    CQ_TRY(check_latents(v, z, F, h, w));
    const size_t plane = (size_t)F * h * w;
    const float sf = (float)v->cfg.scaling_factor;
    for (int c = 0; c < v->cfg.latent_channels; c++)
        for (size_t i = 0; i < plane; i++) {
            float t = z[(size_t)c * plane + i] - v->mean[c]; /* (latents - mean) * scaling_factor / std, in f32 */
            t = t * sf;
            z[(size_t)c * plane + i] = t / v->std[c];
        }
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                   */
/* ------------------------------------------------------------------------ */
/* The stages on channels-last host latents zcl [F*h*w, C]: *out (host, the caller frees) receives the head's
 * output [T*H*W, out_channels p^2] on the patch grid T x H x W. */
static cq_status decode_cl(cq_ltx2_vae *v, const float *zcl, int F, int h, int w, float **out, int *T, int *H,
                           int *W) {
    const cq_ltx2_vae_config *c = &v->cfg;
    const int C = c->latent_channels;
    const size_t P = (size_t)F * h * w;
    *out = NULL;
    lv_map x;
    CQ_TRY(map_alloc(v->be, F, h, w, C, &x));
    cq_status s = cq_tensor_upload(&x.t, zcl, P * C * sizeof(float));
    if (s == CQ_OK) s = dec_conv_in(v, &x);
    if (s == CQ_OK) s = dec_mid(v, &x);
    for (int i = 0; s == CQ_OK && i < c->n_up; i++) s = dec_up(v, i, &x);
    if (s == CQ_OK) s = dec_head(v, &x);
    if (s == CQ_OK) s = cq_backend_sync(v->be);
    const size_t n = (size_t)x.T * x.H * x.W * x.C;
    if (s == CQ_OK && !(*out = cq_mallocn(n, sizeof(float)))) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_tensor_download(&x.t, *out, n * sizeof(float));
    if (s == CQ_OK) *T = x.T, *H = x.H, *W = x.W;
    else cq_free(*out), *out = NULL;
    map_free(&x);
    return s;
}

/* The frames of a decoded box: local voxel (t, y, x) of the patch grid is global (t0 + t, y0 + y, x0 + x); only the
 * global frames [ta, tb) and patch rows / columns [ya, yb) x [xa, xb) are written into frames
 * [out_channels, Fo, Ho, Wo]. Un-patchify: pixel (y p + q, x p + r) of colour c is channel c p^2 + r p + q. */
typedef struct lv_box {
    int t0, y0, x0;      /* the global position of the box's local origin */
    int ta, tb, ya, yb, xa, xb; /* the global range it owns */
} lv_box;

static void unpatchify(const cq_ltx2_vae_config *c, const float *src, int T, int H, int W, const lv_box *b,
                       float *frames, int Fo, int Ho, int Wo) {
    const int p = c->patch, pp = p * p, oc = c->out_channels, K = oc * pp;
    const size_t plane = (size_t)Ho * Wo;
    for (int t = b->ta; t < b->tb; t++)
        for (int yy = b->ya; yy < b->yb; yy++)
            for (int xx = b->xa; xx < b->xb; xx++) {
                const int lt = t - b->t0, ly = yy - b->y0, lx = xx - b->x0;
                if (lt < 0 || lt >= T || ly < 0 || ly >= H || lx < 0 || lx >= W) continue; /* not reached */
                const float *s = src + (((size_t)lt * H + ly) * W + lx) * K;
                for (int col = 0; col < oc; col++)
                    for (int r = 0; r < p; r++)
                        for (int q = 0; q < p; q++)
                            frames[((size_t)col * Fo + t) * plane + (size_t)(yy * p + q) * Wo + xx * p + r] =
                                s[col * pp + r * p + q];
            }
}

void cq_ltx2_vae_unpatchify_frame(const cq_ltx2_vae_config *c, const float *src, int H, int W, int t, float *frames,
                                  int Fo, int Ho, int Wo) {
    const lv_box b = {t, 0, 0, t, t + 1, 0, H, 0, W};
    unpatchify(c, src, 1, H, W, &b, frames, Fo, Ho, Wo);
}

static cq_status check_finite(const float *z, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(z[i])) return cq_fail(CQ_ERR_NUMERIC, WHO ": latent value %zu is %g", i, (double)z[i]);
    return CQ_OK;
}

cq_status cq_ltx2_vae_decode_tokens(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames) {
    if (!frames) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": decode needs an output");
    CQ_TRY(check_latents(v, z, F, h, w));
    int Fo, Ho, Wo;
    CQ_TRY(cq_ltx2_vae_decode_shape(v, F, h, w, &Fo, &Ho, &Wo));
    CQ_TRY(check_finite(z, (size_t)F * h * w * v->cfg.latent_channels));
    float *out;
    int T, H, W;
    CQ_TRY(decode_cl(v, z, F, h, w, &out, &T, &H, &W));
    const int p = v->cfg.patch;
    cq_status s = CQ_OK;
    if (T != Fo || H * p != Ho || W * p != Wo)
        s = cq_fail(CQ_ERR_INTERNAL, WHO ": the decoder produced %d x %d x %d, not the %d frames of %d x %d", T,
                    H * p, W * p, Fo, Ho, Wo);
    const lv_box b = {0, 0, 0, 0, T, 0, H, 0, W};
    if (s == CQ_OK) unpatchify(&v->cfg, out, T, H, W, &b, frames, Fo, Ho, Wo);
    cq_free(out);
    return s;
}

cq_status cq_ltx2_vae_decode(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames) {
    if (!frames) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": decode needs an output");
    CQ_TRY(check_latents(v, z, F, h, w));
    const int C = v->cfg.latent_channels, P = F * h * w;
    float *cl = cq_mallocn((size_t)C * P, sizeof(float));
    if (!cl) return CQ_ERR_NOMEM;
    for (int ch = 0; ch < C; ch++)
        for (int q = 0; q < P; q++) cl[(size_t)q * C + ch] = z[(size_t)ch * P + q];
    cq_status s = cq_ltx2_vae_decode_tokens(v, cl, F, h, w, frames);
    cq_free(cl);
    return s;
}

/* The receptive field of the decoder in latent units: every 3x3x3 conv at a stage running at (st, ss) voxels per
 * latent voxel widens it by 1/st latent frames and 1/ss latent rows; counted in units of the finest grid
 * (1/t_up frames, 1/(s_up/p) rows) so the sum is exact, then rounded up, plus one latent unit for the
 * depth-to-space steps' rounding (each adds under half a unit of the grid it reads, a geometric sum under 1). */
void cq_ltx2_vae_decode_halo(const cq_ltx2_vae_config *c, int *halo_t, int *halo_s) {
    const int64_t Tt = c->t_up, Ts = c->s_up / c->patch;
    int64_t st = 1, ss = 1, rt = 0, rs = 0;
#define LV_CONVS(k) (rt += (k) * (Tt / st), rs += (k) * (Ts / ss))
    LV_CONVS(1 + 2 * (int64_t)c->dec_mid_layers); /* conv_in, the mid block */
    for (int i = 0; i < c->n_up; i++) {
        const cq_ltx2_vae_block *B = &c->up[i];
        if (B->resample) {
            LV_CONVS(1);
            st *= B->st[0], ss *= B->st[1];
        }
        LV_CONVS(2 * (int64_t)B->n_res);
    }
    LV_CONVS(1); /* conv_out */
#undef LV_CONVS
    *halo_t = (int)((rt + Tt - 1) / Tt) + 1;
    *halo_s = (int)((rs + Ts - 1) / Ts) + 1;
}

/* Peak bytes of an untiled decode of an F x h x w box as decode_cl runs it: the live f32 maps of each step (a
 * ResBlock holds three maps of its width, an upsampler its input, the conv's output and the depth-to-space
 * output, then the kept frames), plus the host copies (latents, the head's output, the frames). The backends'
 * conv scratch (bounded panels) is not counted. */
uint64_t cq_ltx2_vae_decode_bytes(const cq_ltx2_vae_config *c, int F, int h, int w) {
    double T = F, P = (double)h * w, peak = 0, cur;
    const double e = sizeof(float);
#define LV_PEAK(x) (cur = (x), peak = cur > peak ? cur : peak)
    LV_PEAK(T * P * (c->latent_channels + c->dec_width) * e);
    LV_PEAK(3 * T * P * c->dec_width * e);
    int width = c->dec_width;
    for (int i = 0; i < c->n_up; i++) {
        const cq_ltx2_vae_block *B = &c->up[i];
        if (B->resample) {
            const double prod = (double)B->st[0] * B->st[1] * B->st[2];
            const double To = T * B->st[0] - (B->st[0] - 1), Po = P * B->st[1] * B->st[2];
            LV_PEAK(T * P * (width + B->conv_out) * e + T * prod * P * B->cout * e);
            if (B->st[0] > 1) LV_PEAK(T * prod * P * B->cout * e + To * Po * B->cout * e);
            T = To, P = Po;
        }
        width = B->width;
        if (B->n_res) LV_PEAK(3 * T * P * width * e);
    }
    const double head = T * P * c->out_channels * c->patch * c->patch * e;
    LV_PEAK(T * P * width * e + head);
#undef LV_PEAK
    return (uint64_t)(peak + 2 * head + (double)F * h * w * c->latent_channels * e);
}

cq_status cq_ltx2_vae_decode_tiled(cq_ltx2_vae *v, const float *z, int F, int h, int w, const cq_ltx2_vae_tiling *tl,
                                   float *frames) {
    if (!frames || !tl) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a tiled decode needs a tiling and an output");
    CQ_TRY(check_latents(v, z, F, h, w));
    const cq_ltx2_vae_config *c = &v->cfg;
    int Fo, Ho, Wo;
    CQ_TRY(cq_ltx2_vae_decode_shape(v, F, h, w, &Fo, &Ho, &Wo));
    int ht, hs;
    cq_ltx2_vae_decode_halo(c, &ht, &hs);
    if (tl->halo_t >= 0) ht = tl->halo_t;
    if (tl->halo_s >= 0) hs = tl->halo_s;
    const int cf = tl->frames > 0 ? tl->frames : F, cr = tl->rows > 0 ? tl->rows : h, cc = tl->cols > 0 ? tl->cols : w;
    if (ht < 1 && cf < F)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": chunks of frames need a time halo of at least 1 latent frame (a "
                       "chunk's first latent frame decodes to one frame; the %d before it come from the frame "
                       "in front)", c->t_up - 1);
    CQ_TRY(check_finite(z, (size_t)F * h * w * c->latent_channels));
    const int C = c->latent_channels, Tu = c->t_up, Su = c->s_up / c->patch;
    cq_status s = CQ_OK;
    float *sub = NULL;
    for (int a = 0; s == CQ_OK && a < F; a += cf) {
        const int b = a + cf < F ? a + cf : F, A = a - ht > 0 ? a - ht : 0, Bf = b + ht < F ? b + ht : F;
        for (int y0 = 0; s == CQ_OK && y0 < h; y0 += cr) {
            const int y1 = y0 + cr < h ? y0 + cr : h, Y0 = y0 - hs > 0 ? y0 - hs : 0, Y1 = y1 + hs < h ? y1 + hs : h;
            for (int x0 = 0; s == CQ_OK && x0 < w; x0 += cc) {
                const int x1 = x0 + cc < w ? x0 + cc : w, X0 = x0 - hs > 0 ? x0 - hs : 0;
                const int X1 = x1 + hs < w ? x1 + hs : w;
                const int nf = Bf - A, nh = Y1 - Y0, nw = X1 - X0;
                cq_free(sub);
                if (!(sub = cq_mallocn((size_t)nf * nh * nw * C, sizeof(float)))) {
                    s = CQ_ERR_NOMEM;
                    break;
                }
                for (int f = 0; f < nf; f++)
                    for (int yy = 0; yy < nh; yy++)
                        memcpy(sub + (((size_t)f * nh + yy) * nw) * C,
                               z + ((((size_t)(A + f) * h) + Y0 + yy) * w + X0) * C, (size_t)nw * C * sizeof(float));
                float *out;
                int T, H, W;
                s = decode_cl(v, sub, nf, nh, nw, &out, &T, &H, &W);
                if (s != CQ_OK) break;
                /* local frame j is global Tu A + j (a box's first latent frame decodes to one frame, the last of its
                 * group); the box owns the frames of latents [a, b): [Tu (a - 1) + 1, Tu (b - 1) + 1), from 0 for
                 * a = 0 */
                const lv_box bx = {Tu * A, Su * Y0, Su * X0, a ? Tu * (a - 1) + 1 : 0, Tu * (b - 1) + 1,
                                   Su * y0, Su * y1, Su * x0, Su * x1};
                unpatchify(c, out, T, H, W, &bx, frames, Fo, Ho, Wo);
                cq_free(out);
            }
        }
    }
    cq_free(sub);
    return s;
}

cq_status cq_ltx2_vae_frames_to_unit(float *frames, size_t n) {
    if (!frames && n) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no frames");
    for (size_t i = 0; i < n; i++) {
        const float u = frames[i] * 0.5f + 0.5f; /* the pipeline's postprocess: x / 2 + 1 / 2, clamped to [0, 1] */
        frames[i] = u < 0.0f ? 0.0f : u > 1.0f ? 1.0f : u;
    }
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Encoder stages                                                           */
/* ------------------------------------------------------------------------ */
/* Space-to-depth by st (time, rows, columns) with channels ((c st0 + a) st1 + b) st2 + d. */
static cq_status space_to_depth(cq_ltx2_vae *v, const lv_map *x, const int st[3], lv_map *y) {
    const int s0 = st[0], s1 = st[1];
    const int64_t P = (int64_t)x->H * x->W;
    lv_map f = {0};
    cq_status s = CQ_OK;
    const lv_map *src = x;
    if (s0 > 1) {
        s = map_alloc(v->be, x->T / s0, x->H, x->W, x->C * s0, &f);
        for (int g = 0; s == CQ_OK && g < f.T; g++) {
            cq_tensor in = cq_tensor_rows_view(&x->t, (int64_t)g * s0 * P, (int64_t)s0 * P);
            cq_tensor out = cq_tensor_rows_view(&f.t, (int64_t)g * P, P);
            cq_tensor in2, out2;
            s = cq_tensor_reshape(&in, 2, (const int64_t[2]){s0, P * x->C}, &in2);
            if (s == CQ_OK) s = cq_tensor_reshape(&out, 2, (const int64_t[2]){P * x->C, s0}, &out2);
            if (s == CQ_OK) s = cq_op_transpose(v->be, &out2, &in2);
            cq_tensor_free(&in2), cq_tensor_free(&out2), cq_tensor_free(&in), cq_tensor_free(&out);
        }
        src = &f;
    }
    if (s == CQ_OK && s1 > 1) {
        s = map_alloc(v->be, src->T, src->H / s1, src->W / s1, src->C * s1 * s1, y);
        if (s == CQ_OK) s = cq_op_pixel_unshuffle(v->be, &y->t, &src->t, src->T * y->H, y->W, s1);
        map_free(&f);
    } else if (s == CQ_OK) {
        if (src == &f) *y = f;
        else s = cq_fail(CQ_ERR_INTERNAL, WHO ": a space-to-depth of stride 1");
    } else {
        map_free(&f);
    }
    return s;
}

/* LTX2VideoDownsampler3d on x (replaced by the output). */
static cq_status downsample(cq_ltx2_vae *v, int i, lv_map *x) {
    const cq_ltx2_vae_block *B = &v->cfg.down[i];
    const lv_block *L = &v->enc.blk[i];
    const int pre = B->st[0] - 1;
    const int64_t P = (int64_t)x->H * x->W;
    lv_map xp = {0}, sk = {0}, skip = {0}, m = {0}, main = {0};
    cq_status s = map_alloc(v->be, x->T + pre, x->H, x->W, x->C, &xp);
    for (int k = 0; s == CQ_OK && k < pre; k++) { /* frame 0 repeated in front */
        cq_tensor dst = cq_tensor_rows_view(&xp.t, (int64_t)k * P, P), f0 = cq_tensor_rows_view(&x->t, 0, P);
        s = cq_op_copy(v->be, &dst, &f0);
        cq_tensor_free(&dst), cq_tensor_free(&f0);
    }
    if (s == CQ_OK) {
        cq_tensor dst = cq_tensor_rows_view(&xp.t, (int64_t)pre * P, (int64_t)x->T * P);
        s = cq_op_copy(v->be, &dst, &x->t);
        cq_tensor_free(&dst);
    }
    /* the skip: space-to-depth of the input, groups of channels averaged */
    if (s == CQ_OK) s = space_to_depth(v, &xp, B->st, &sk);
    if (s == CQ_OK) s = map_alloc(v->be, sk.T, sk.H, sk.W, B->cout, &skip);
    if (s == CQ_OK) s = cq_op_gather_cols(v->be, &skip.t, &sk.t, &L->gidx, B->group, 1.0f / (float)B->group);
    map_free(&sk);
    /* the main path: space-to-depth of the conv */
    if (s == CQ_OK) s = conv(v, &L->rs, &xp, v->cfg.enc_causal, &m);
    map_free(&xp);
    if (s == CQ_OK) s = space_to_depth(v, &m, B->st, &main);
    map_free(&m);
    if (s == CQ_OK) s = cq_op_binary(v->be, &main.t, &main.t, &skip.t, CQ_BINARY_ADD);
    map_free(&skip);
    if (s != CQ_OK) {
        map_free(&main);
        return s;
    }
    map_free(x);
    *x = main;
    return CQ_OK;
}

static cq_status enc_conv_in(cq_ltx2_vae *v, lv_map *x) {
    lv_map y;
    CQ_TRY(conv(v, &v->enc.conv_in, x, v->cfg.enc_causal, &y));
    map_free(x);
    *x = y;
    tap(v, "enc_conv_in", x);
    return CQ_OK;
}

static cq_status enc_down(cq_ltx2_vae *v, int i, lv_map *x) {
    const cq_ltx2_vae_block *B = &v->cfg.down[i];
    CQ_TRY(resblocks(v, v->enc.blk[i].res, B->n_res, x, v->cfg.enc_causal));
    if (B->resample) CQ_TRY(downsample(v, i, x));
    char nm[32];
    snprintf(nm, sizeof nm, "enc_down%d", i);
    tap(v, nm, x);
    return CQ_OK;
}

static cq_status enc_mid_head(cq_ltx2_vae *v, lv_map *x) {
    CQ_TRY(resblocks(v, v->enc.mid, v->cfg.enc_mid_layers, x, v->cfg.enc_causal));
    tap(v, "enc_mid", x);
    CQ_TRY(norm_silu(v, &x->t, &x->t));
    lv_map y;
    CQ_TRY(conv(v, &v->enc.conv_out, x, v->cfg.enc_causal, &y));
    map_free(x);
    *x = y;
    tap(v, "enc_conv_out", x);
    return CQ_OK;
}

cq_status cq_ltx2_vae_encode(cq_ltx2_vae *v, const float *frames, int F, int H, int W, float *mean) {
    if (!v || !frames || !mean) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": encode needs a model, frames and an output");
    if (!v->has_encoder) return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": the pack holds no encoder (a decode-only VAE)");
    int Fo, Ho, Wo;
    CQ_TRY(cq_ltx2_vae_encode_shape(v, F, H, W, &Fo, &Ho, &Wo));
    const cq_ltx2_vae_config *c = &v->cfg;
    const int p = c->patch, pp = p * p, ic = c->in_channels, h = H / p, w = W / p, K = ic * pp;
    const size_t n = (size_t)ic * F * H * W;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(frames[i])) return cq_fail(CQ_ERR_NUMERIC, WHO ": frame value %zu is %g", i, (double)frames[i]);
    /* patchify: channel c p^2 + r p + q holds pixel (y p + q, x p + r) of colour c */
    float *host = cq_mallocn(n, sizeof(float));
    if (!host) return CQ_ERR_NOMEM;
    const size_t plane = (size_t)H * W;
    for (int t = 0; t < F; t++)
        for (int yy = 0; yy < h; yy++)
            for (int xx = 0; xx < w; xx++) {
                float *dst = host + (((size_t)t * h + yy) * w + xx) * K;
                for (int col = 0; col < ic; col++)
                    for (int r = 0; r < p; r++)
                        for (int q = 0; q < p; q++)
                            dst[col * pp + r * p + q] =
                                frames[((size_t)col * F + t) * plane + (size_t)(yy * p + q) * W + xx * p + r];
            }
    lv_map x;
    cq_status s = map_alloc(v->be, F, h, w, K, &x);
    if (s == CQ_OK) s = cq_tensor_upload(&x.t, host, n * sizeof(float));
    cq_free(host);
    if (s == CQ_OK) s = enc_conv_in(v, &x);
    for (int i = 0; s == CQ_OK && i < c->n_down; i++) s = enc_down(v, i, &x);
    if (s == CQ_OK) s = enc_mid_head(v, &x);
    if (s == CQ_OK) s = cq_backend_sync(v->be);
    const int C = c->latent_channels;
    if (s == CQ_OK && (x.T != Fo || x.H != Ho || x.W != Wo || x.C != C + 1))
        s = cq_fail(CQ_ERR_INTERNAL, WHO ": the encoder produced %d x %d x %d x %d, not %d x %d x %d x %d", x.T, x.H,
                    x.W, x.C, Fo, Ho, Wo, C + 1);
    const size_t P = (size_t)Fo * Ho * Wo;
    float *out = NULL;
    if (s == CQ_OK && !(out = cq_mallocn(P * (size_t)(C + 1), sizeof(float)))) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_tensor_download(&x.t, out, P * (size_t)(C + 1) * sizeof(float));
    if (s == CQ_OK)
        for (size_t q = 0; q < P; q++)
            for (int ch = 0; ch < C; ch++) mean[(size_t)ch * P + q] = out[q * (size_t)(C + 1) + ch];
    cq_free(out);
    map_free(&x);
    return s;
}
