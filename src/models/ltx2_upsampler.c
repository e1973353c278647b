/*
 * ltx2_upsampler.c — LTX-2's spatial latent upscaler x2 (semantics in
 * ltx2_upsampler.h), written once against the op layer. Every activation is
 * f32 on every backend.
 *
 * The reference pads every 3-D convolution with zeros in time as well as in
 * space; the op layer's conv3d pads time by replicating frames (LTX's causal
 * VAE convs). So each stage keeps its activations in buffers with one zero
 * frame before and one after the F real ones, and the convolutions read
 * those F + 2 frames with no time padding of their own: the norms, SiLUs and
 * residual adds write the interior, the border frames stay zero. The
 * per-frame Conv2d of the upsampler is conv3d with kt = 1 over all frames
 * (the same [4M, M * 9] kernel), and the 2-D pixel shuffle with the
 * (c, p1, p2) split is depth_to_space3d with pt = 1.
 *
 * Three scratch buffers sized for the upscaled stage serve both stages
 * (views of their first elements at the low resolution): hb holds the
 * padded hidden state h, pb the padded input of a res block's second conv
 * (and the model's padded input), tb a convolution's output. The scratch
 * is allocated per call: a latent is upscaled once.
 */
#include "models/ltx2_upsampler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/ltx2_upsampler_impl.h"

#define WHO "ltx2_upsampler"
#define LU_EPS 1e-5f /* torch.nn.GroupNorm's default */

typedef struct lu_bufs {
    cq_tensor hb, pb, tb, xin, out;
} lu_bufs;

static void bufs_free(lu_bufs *b) {
    cq_tensor_free(&b->hb);
    cq_tensor_free(&b->pb);
    cq_tensor_free(&b->tb);
    cq_tensor_free(&b->xin);
    cq_tensor_free(&b->out);
}

/* rows x cols of t starting at row `row0` (of that width), or a zeroed tensor every op refuses. */
static cq_tensor view(const cq_tensor *t, int64_t row0, int64_t rows, int64_t cols) {
    cq_tensor o;
    if (cq_tensor_subview(t, row0 * cols, 2, (const int64_t[2]){rows, cols}, &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o;
}

static void tap(const cq_ltx2_ups *m, const char *name, const cq_tensor *t) {
    if (m->tap) m->tap(m->tap_user, name, t);
}

/* y [F*hw, cout] = conv(x), x the F + 2 frames of a padded buffer ([(F+2)*hw, cin]); zero padding 1 in space. */
static cq_status conv(cq_backend *be, const lu_conv *c, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int kt) {
    const cq_conv3d_args a = {.y = y, .x = x, .w = &c->w, .bias = &c->b, .T = T, .H = H, .W = W, .kt = kt, .kh = 3,
                              .kw = 3, .stride_t = 1, .stride_y = 1, .stride_x = 1, .pad_l = 1, .pad_r = 1,
                              .pad_t = 1, .pad_b = 1, .mode = CQ_PAD_ZERO};
    return cq_op_conv3d(be, &a);
}

/* h = SiLU(h + GN2(conv2(SiLU(GN1(conv1(h)))))) on hb's interior, hw pixels a frame. */
static cq_status res_block(cq_ltx2_ups *m, const lu_res *r, lu_bufs *b, int F, int H, int W) {
    cq_backend *be = m->be;
    const int64_t M = m->cfg.mid_channels, hw = (int64_t)H * W, n = F * hw;
    cq_tensor hp = view(&b->hb, 0, n + 2 * hw, M), hi = view(&b->hb, hw, n, M);
    cq_tensor pp = view(&b->pb, 0, n + 2 * hw, M), pi = view(&b->pb, hw, n, M);
    cq_tensor t = view(&b->tb, 0, n, M);
    CQ_TRY(conv(be, &r->c1, &t, &hp, F + 2, H, W, 3));
    CQ_TRY(cq_op_groupnorm(be, &pi, &t, CQ_LTX2_UPS_GROUPS, &r->n1.g, &r->n1.b, LU_EPS));
    CQ_TRY(cq_op_unary(be, &pi, &pi, CQ_UNARY_SILU, 0.0f, 0.0f));
    CQ_TRY(conv(be, &r->c2, &t, &pp, F + 2, H, W, 3));
    CQ_TRY(cq_op_groupnorm(be, &pi, &t, CQ_LTX2_UPS_GROUPS, &r->n2.g, &r->n2.b, LU_EPS));
    CQ_TRY(cq_op_binary(be, &hi, &hi, &pi, CQ_BINARY_ADD));
    return cq_op_unary(be, &hi, &hi, CQ_UNARY_SILU, 0.0f, 0.0f);
}

/* Sizes: every product checked; the largest buffer bounded by CQ_LTX2_UPS_MAX_VALUES. */
static cq_status check_geometry(const cq_ltx2_ups *m, int F, int H, int W, int64_t *big) {
    if (F < 1 || H < 1 || W < 1 || F > 65536 || H > 65536 || W > 65536)
        return cq_fail(CQ_ERR_SHAPE, WHO ": latent of %d frames x %d x %d (each 1 .. 65536)", F, H, W);
    const int64_t C = m->cfg.in_channels, M = m->cfg.mid_channels;
    const int64_t up = (int64_t)(F + 2) * 4 * H * W; /* padded rows of the upscaled stage */
    if (up > CQ_LTX2_UPS_MAX_VALUES / M || up > CQ_LTX2_UPS_MAX_VALUES / C)
        return cq_fail(CQ_ERR_SHAPE, WHO ": latent of %d frames x %d x %d is too large (%lld padded rows of %lld "
                       "channels exceed %lld values)", F, H, W, (long long)up, (long long)M,
                       (long long)CQ_LTX2_UPS_MAX_VALUES);
    *big = up * M;
    return CQ_OK;
}

cq_status cq_ltx2_ups_forward(cq_ltx2_ups *m, const float *x, int F, int H, int W, float *y) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no model");
    if (!x || !y) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": forward needs an input and an output");
    int64_t big;
    CQ_TRY(check_geometry(m, F, H, W, &big));
    cq_backend *be = m->be;
    const int64_t C = m->cfg.in_channels, M = m->cfg.mid_channels;
    const int64_t lo = (int64_t)H * W, hi = 4 * lo, nlo = F * lo, nhi = F * hi;
    for (int64_t i = 0; i < nlo * C; i++)
        if (!isfinite(x[i])) return cq_fail(CQ_ERR_NUMERIC, WHO ": input value %lld is not finite", (long long)i);
    lu_bufs b;
    memset(&b, 0, sizeof b);
    const int64_t pin = (F + 2) * lo * C; /* the padded input */
    cq_status s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, big / M, M, &b.hb);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, (big > pin ? big : pin) / M + 1, M, &b.pb);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, nhi, M, &b.tb);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, nlo, C, &b.xin);
    if (s == CQ_OK) s = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, nhi, C, &b.out);
    if (s == CQ_OK) s = cq_tensor_upload(&b.xin, x, (size_t)(nlo * C) * sizeof(float));
    /* the input, zero-padded in time */
    cq_tensor xp = view(&b.pb, 0, nlo + 2 * lo, C), xi = view(&b.pb, lo, nlo, C);
    if (s == CQ_OK) s = cq_tensor_zero(&b.pb);
    if (s == CQ_OK) s = cq_op_copy(be, &xi, &b.xin);
    cq_tensor t = view(&b.tb, 0, nlo, M), h = view(&b.hb, lo, nlo, M);
    if (s == CQ_OK) s = conv(be, &m->initial, &t, &xp, F + 2, H, W, 3);
    if (s == CQ_OK) s = cq_tensor_zero(&b.hb);
    if (s == CQ_OK) s = cq_tensor_zero(&b.pb); /* the input's rows overlap the mid layout's border frames */
    if (s == CQ_OK)
        s = cq_op_groupnorm(be, &h, &t, CQ_LTX2_UPS_GROUPS, &m->initial_norm.g, &m->initial_norm.b, LU_EPS);
    if (s == CQ_OK) s = cq_op_unary(be, &h, &h, CQ_UNARY_SILU, 0.0f, 0.0f);
    if (s == CQ_OK) tap(m, "initial", &h);
    char name[32];
    for (int i = 0; s == CQ_OK && i < m->cfg.n_blocks; i++) {
        s = res_block(m, &m->pre[i], &b, F, H, W);
        snprintf(name, sizeof name, "pre%d", i);
        if (s == CQ_OK) tap(m, name, &h);
    }
    /* per frame Conv2d M -> 4M (conv3d, kt 1, on the unpadded frames), then the (c, p1, p2) pixel shuffle */
    cq_tensor u = view(&b.tb, 0, nlo, 4 * M), hu = view(&b.hb, hi, nhi, M);
    if (s == CQ_OK) s = conv(be, &m->up, &u, &h, F, H, W, 1);
    if (s == CQ_OK) s = cq_tensor_zero(&b.hb);
    if (s == CQ_OK) s = cq_tensor_zero(&b.pb); /* the low stage's rows overlap the upscaled border frames */
    if (s == CQ_OK) s = cq_op_depth_to_space3d(be, &hu, &u, F, H, W, 1, 2, 2);
    if (s == CQ_OK) tap(m, "upsampled", &hu);
    for (int i = 0; s == CQ_OK && i < m->cfg.n_blocks; i++) {
        s = res_block(m, &m->post[i], &b, F, 2 * H, 2 * W);
        snprintf(name, sizeof name, "post%d", i);
        if (s == CQ_OK) tap(m, name, &hu);
    }
    cq_tensor hp = view(&b.hb, 0, nhi + 2 * hi, M);
    if (s == CQ_OK) s = conv(be, &m->final, &b.out, &hp, F + 2, 2 * H, 2 * W, 3);
    if (s == CQ_OK) tap(m, "out", &b.out);
    if (s == CQ_OK) s = cq_backend_sync(be);
    if (s == CQ_OK) s = cq_tensor_download(&b.out, y, (size_t)(nhi * C) * sizeof(float));
    bufs_free(&b);
    return s;
}

cq_status cq_ltx2_ups_upscale(cq_ltx2_ups *m, const float *mean, const float *std, float scaling, const float *z,
                              int F, int H, int W, float *out) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no model");
    if (!mean || !std || !z || !out)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": upscale needs the statistics, an input and an output");
    if (!(scaling > 0) || !isfinite(scaling))
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": scaling factor %g (must be positive and finite)", (double)scaling);
    int64_t big;
    CQ_TRY(check_geometry(m, F, H, W, &big));
    const int C = m->cfg.in_channels;
    for (int c = 0; c < C; c++)
        if (!isfinite(mean[c]) || !(std[c] > 0) || !isfinite(std[c]))
            return cq_fail(CQ_ERR_NUMERIC, WHO ": channel %d's statistics (mean %g, std %g) are not a finite mean "
                           "and a positive std", c, (double)mean[c], (double)std[c]);
    const size_t nlo = (size_t)F * H * W, nhi = 4 * nlo;
    float *x = cq_mallocn(nlo * (size_t)C, sizeof(float));
    if (!x) return CQ_ERR_NOMEM;
    /* the reference's order: x * std / scaling + mean, then (y - mean) * scaling / std */
    for (size_t r = 0; r < nlo; r++)
        for (int c = 0; c < C; c++) x[r * C + c] = z[r * C + c] * std[c] / scaling + mean[c];
    cq_status s = cq_ltx2_ups_forward(m, x, F, H, W, out);
    cq_free(x);
    if (s != CQ_OK) return s;
    for (size_t r = 0; r < nhi; r++)
        for (int c = 0; c < C; c++) out[r * C + c] = (out[r * C + c] - mean[c]) * scaling / std[c];
    return CQ_OK;
}
