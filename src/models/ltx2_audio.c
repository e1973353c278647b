/*
 * ltx2_audio.c — the forwards of LTX-2.3 / 2.5's audio VAE decoder, vocoder
 * and bandwidth extender on the op layer (ltx2_audio.h has the semantics).
 *
 * Layouts: the decoder's maps are channels-last [time * mel, C] images (time
 * the height), so PixelNorm is a weightless row RMS norm and the causal
 * convs are conv2d with (left, right, top, bottom) = (1, 1, 2, 0) zeros; the
 * first time row an upsample drops is a row view. Signals are channels-last
 * [L, C]; a replicate or zero pad is a depthwise k = 1 conv1d with unit
 * weights and that padding (the transposed convolution pads nothing), and
 * the BWE's STFT is one conv1d over the signal viewed as blocks of
 * hop_length samples (ltx2_audio_load.c builds that kernel). Every tensor is
 * f32; each op's result gets a fresh tensor, freed as soon as the next one
 * no longer needs it.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/ltx2_audio_impl.h"

#define WHO_VAE "ltx2_audio_vae"
#define WHO_VOC "ltx2_vocoder"
#define PN_EPS 1e-6f
#define SNAKE_EPS 1e-9f

static cq_status alloc2(cq_backend *be, int64_t rows, int64_t cols, cq_tensor *t) {
    return cq_tensor_alloc_2d(be, CQ_DTYPE_F32, rows, cols, t);
}

/* Replace *own by the freshly made t (its buffer now the current one). */
static void take(cq_tensor *own, cq_tensor *t) {
    cq_tensor_free(own);
    *own = *t;
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* Decoder                                                                  */
/* ------------------------------------------------------------------------ */
/* y [H W, cout] = the causal conv of x [H W, cin]. */
static cq_status conv2(cq_backend *be, const la_conv *c, const cq_tensor *x, int H, int W, cq_tensor *y) {
    CQ_TRY(alloc2(be, (int64_t)H * W, c->cout, y));
    const int p = c->k == 3;
    cq_conv2d_args a = {.y = y, .x = x, .w = &c->w, .bias = &c->b, .H = H, .W = W, .kh = c->k, .kw = c->k,
                        .stride_y = 1, .stride_x = 1, .pad_l = p, .pad_r = p, .pad_t = 2 * p, .pad_b = 0,
                        .mode = CQ_PAD_ZERO};
    cq_status s = cq_op_conv2d(be, &a);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

/* PixelNorm then SiLU: a new tensor */
static cq_status pn_silu(cq_backend *be, const cq_tensor *x, cq_tensor *y) {
    CQ_TRY(alloc2(be, cq_tensor_rows(x), cq_tensor_cols(x), y));
    cq_status s = cq_op_rmsnorm(be, y, x, NULL, NULL, false, PN_EPS);
    if (s == CQ_OK) s = cq_op_unary(be, y, y, CQ_UNARY_SILU, 0.0f, 0.0f);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

static cq_status res2d(cq_backend *be, const la_res *r, const cq_tensor *x, int H, int W, cq_tensor *y) {
    cq_tensor h = {0}, t = {0}, sc = {0};
    memset(y, 0, sizeof *y);
    cq_status s = pn_silu(be, x, &h);
    if (s == CQ_OK) s = conv2(be, &r->c1, &h, H, W, &t);
    cq_tensor_free(&h);
    if (s == CQ_OK) s = pn_silu(be, &t, &h);
    cq_tensor_free(&t);
    if (s == CQ_OK) s = conv2(be, &r->c2, &h, H, W, y);
    cq_tensor_free(&h);
    if (s == CQ_OK && r->has_sc) s = conv2(be, &r->sc, x, H, W, &sc);
    if (s == CQ_OK) s = cq_op_binary(be, y, y, r->has_sc ? &sc : x, CQ_BINARY_ADD);
    cq_tensor_free(&sc);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

static void vae_tap(const cq_ltx2_audio_vae *m, const char *name, const cq_tensor *t) {
    if (m->tap) m->tap(m->tap_user, name, t);
}

int cq_ltx2_audio_mel_frames(int T) { return T * 4 - 3 > 1 ? T * 4 - 3 : 1; }

/* The decoder from the un-normalised, unpacked latent x [T Ml, C]; *own holds the result's buffer, *cur its view
 * [Ho Wo, out]. */
static cq_status decode_maps(cq_ltx2_audio_vae *m, cq_tensor *own, cq_tensor *cur, int *pH, int *pW) {
    cq_backend *be = m->be;
    const cq_ltx2_audio_vae_config *c = &m->cfg;
    int H = *pH, W = *pW;
    cq_tensor t = {0};
    CQ_TRY(conv2(be, &m->conv_in, cur, H, W, &t));
    take(own, &t), *cur = *own;
    for (int i = 0; i < 2; i++) {
        CQ_TRY(res2d(be, &m->mid[i], cur, H, W, &t));
        take(own, &t), *cur = *own;
    }
    vae_tap(m, "dec_mid", cur);
    for (int level = c->n_levels - 1; level >= 0; level--) {
        const la_level *L = &m->lv[level];
        for (int j = 0; j < L->n_res; j++) {
            CQ_TRY(res2d(be, &L->res[j], cur, H, W, &t));
            take(own, &t), *cur = *own;
        }
        if (L->up) {
            if ((int64_t)H * W * 4 > (int64_t)1 << 40) return cq_fail(CQ_ERR_SHAPE, WHO_VAE ": map too large");
            CQ_TRY(alloc2(be, (int64_t)4 * H * W, cq_tensor_cols(cur), &t));
            cq_status s = cq_op_upsample_nearest(be, &t, cur, H, W, 2);
            if (s != CQ_OK) {
                cq_tensor_free(&t);
                return s;
            }
            take(own, &t);
            CQ_TRY(conv2(be, &L->up_conv, own, 2 * H, 2 * W, &t));
            take(own, &t);
            H = 2 * H - 1, W = 2 * W;
            *cur = cq_tensor_rows_view(own, W, (int64_t)H * W); /* the first time row dropped */
        }
        char name[32];
        snprintf(name, sizeof name, "dec_up%d", level);
        vae_tap(m, name, cur);
    }
    CQ_TRY(pn_silu(be, cur, &t));
    take(own, &t), *cur = *own;
    CQ_TRY(conv2(be, &m->conv_out, cur, H, W, &t));
    take(own, &t), *cur = *own;
    vae_tap(m, "dec_out", cur);
    *pH = H, *pW = W;
    return CQ_OK;
}

cq_status cq_ltx2_audio_decode(cq_ltx2_audio_vae *m, const float *latents, int T, bool denormalize, float *mel) {
    if (!m || !latents || !mel) return cq_fail(CQ_ERR_INVALID_ARG, WHO_VAE ": decode needs a model, latents and a mel");
    if (T < 1 || T > CQ_LTX2_AUDIO_MAX_FRAMES)
        return cq_fail(CQ_ERR_SHAPE, WHO_VAE ": %d latent frames (1 to %d)", T, CQ_LTX2_AUDIO_MAX_FRAMES);
    const cq_ltx2_audio_vae_config *c = &m->cfg;
    if (denormalize && !m->has_stats)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO_VAE ": cannot un-normalise: the %d statistics (base_channels) do not "
                       "match the %d x %d packed latent columns", c->base_channels, c->latent_channels, c->latent_mel);
    const int C = c->latent_channels, Ml = c->latent_mel, D = C * Ml;
    for (size_t i = 0; i < (size_t)T * D; i++)
        if (!(latents[i] == latents[i]) || latents[i] - latents[i] != 0.0f)
            return cq_fail(CQ_ERR_NUMERIC, WHO_VAE ": latents[%zu] is not finite", i);
    cq_backend *be = m->be;
    cq_tensor xp = {0}, own = {0}, cur;
    cq_status s = alloc2(be, T, D, &xp);
    if (s == CQ_OK) s = cq_tensor_upload(&xp, latents, (size_t)T * D * sizeof(float));
    if (s == CQ_OK && denormalize) s = cq_op_binary(be, &xp, &xp, &m->std, CQ_BINARY_MUL);
    if (s == CQ_OK && denormalize) s = cq_op_binary(be, &xp, &xp, &m->mean, CQ_BINARY_ADD);
    if (s == CQ_OK) s = alloc2(be, T, D, &own);
    if (s == CQ_OK) s = cq_op_gather_cols(be, &own, &xp, &m->unpack_idx, 1, 1.0f);
    cq_tensor_free(&xp);
    int H = T, W = Ml;
    if (s == CQ_OK) s = cq_tensor_reshape(&own, 2, (const int64_t[2]){(int64_t)T * Ml, C}, &cur);
    if (s == CQ_OK) {
        vae_tap(m, "dec_in", &cur);
        s = decode_maps(m, &own, &cur, &H, &W);
    }
    const int out = c->output_channels, Tm = cq_ltx2_audio_mel_frames(T), Mb = c->mel_bins;
    float *host = NULL;
    if (s == CQ_OK) s = (host = cq_mallocn((size_t)H * W * out, sizeof(float))) ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = cq_backend_sync(be);
    if (s == CQ_OK) s = cq_tensor_download(&cur, host, (size_t)H * W * out * sizeof(float));
    cq_tensor_free(&own);
    /* cropped, or padded with zeros, to Tm frames and mel_bins bins, as the reference does */
    for (int ch = 0; s == CQ_OK && ch < out; ch++)
        for (int t = 0; t < Tm; t++)
            for (int b = 0; b < Mb; b++)
                mel[((size_t)ch * Tm + t) * Mb + b] = t < H && b < W ? host[((size_t)t * W + b) * out + ch] : 0.0f;
    cq_free(host);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Vocoder                                                                  */
/* ------------------------------------------------------------------------ */
static void voc_tap(const cq_ltx2_vocoder *v, const char *name, const cq_tensor *t) {
    if (v->tap) v->tap(v->tap_user, name, t);
}

/* y [L + lo + hi, C] = x [L, C] padded in `mode` (a depthwise k = 1 conv with unit weights). */
static cq_status pad_rows(const cq_ltx2_vocoder *v, const cq_tensor *x, int lo, int hi, cq_pad_mode mode,
                          cq_tensor *y) {
    const int64_t L = cq_tensor_rows(x), C = cq_tensor_cols(x);
    CQ_TRY(alloc2(v->be, L + lo + hi, C, y));
    cq_tensor w = cq_tensor_rows_view(&v->ones, 0, C);
    cq_conv1d_args a = {.y = y, .x = x, .w = &w, .k = 1, .stride = 1, .dilation = 1, .groups = (int)C,
                        .pad_l = lo, .pad_r = hi, .mode = mode};
    cq_status s = cq_op_conv1d(v->be, &a);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

/* y = conv1d(x) [Lo, cout] with "same"-style explicit pads; cout from the weight's first dimension. */
static cq_status conv1(cq_backend *be, const cq_tensor *x, const cq_tensor *w, const cq_tensor *b, int k, int dil,
                       int pad_l, int pad_r, int stride, int groups, cq_pad_mode mode, cq_tensor *y) {
    const int64_t L = cq_tensor_rows(x), Lo = (L + pad_l + pad_r - (int64_t)dil * (k - 1) - 1) / stride + 1;
    const int64_t cout = groups > 1 ? cq_tensor_cols(x) : w->shape[0];
    CQ_TRY(alloc2(be, Lo, cout, y));
    cq_conv1d_args a = {.y = y, .x = x, .w = w, .bias = b, .k = k, .stride = stride, .dilation = dil,
                        .groups = groups, .pad_l = pad_l, .pad_r = pad_r, .mode = mode};
    cq_status s = cq_op_conv1d(be, &a);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

/* y = conv_transpose1d(x) [(L-1) s + k - cl - cr, cout]. */
static cq_status convt1(cq_backend *be, const cq_tensor *x, const cq_tensor *w, const cq_tensor *b, int64_t cout,
                        int k, int stride, int groups, int cl, int cr, cq_tensor *y) {
    const int64_t Lo = (cq_tensor_rows(x) - 1) * stride + k - cl - cr;
    CQ_TRY(alloc2(be, Lo, cout, y));
    cq_conv1d_args a = {.y = y, .x = x, .w = w, .bias = b, .k = k, .stride = stride, .dilation = 1,
                        .groups = groups, .pad_l = cl, .pad_r = cr, .mode = CQ_PAD_ZERO};
    cq_status s = cq_op_conv_transpose1d(be, &a);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

/* The anti-aliased SnakeBeta: y [L, C] from x [L, C]. */
static cq_status aa_act(const cq_ltx2_vocoder *v, const cq_ltx2_voc_gen_config *g, const lv_act *a,
                        const cq_tensor *x, cq_tensor *y) {
    cq_backend *be = v->be;
    const int r = g->aa_ratio, k = g->aa_kernel, C = (int)cq_tensor_cols(x);
    const int pad = k / r - 1, pl = pad * r + (k - r) / 2, pr = pad * r + (k - r + 1) / 2;
    const int dl = k / 2 + k % 2 - 1, dr = k / 2;
    cq_tensor xp = {0}, u = {0};
    cq_status s = pad > 0 ? pad_rows(v, x, pad, pad, CQ_PAD_REPLICATE, &xp) : CQ_OK;
    if (s == CQ_OK) s = convt1(be, pad > 0 ? &xp : x, &a->up, NULL, C, k, r, C, pl, pr, &u);
    cq_tensor_free(&xp);
    if (s == CQ_OK) s = cq_op_snake(be, &u, &u, &a->alpha, &a->beta, true, SNAKE_EPS);
    if (s == CQ_OK) s = conv1(be, &u, &a->down, NULL, k, 1, dl, dr, r, C, CQ_PAD_REPLICATE, y);
    cq_tensor_free(&u);
    return s;
}

/* One AMP ResBlock: y = x, then y += conv2(act2(conv1_dil(act1(y)))) per dilation. */
static cq_status amp_block(const cq_ltx2_vocoder *v, const cq_ltx2_voc_gen_config *g, const lv_resblock *R,
                           const cq_tensor *x, cq_tensor *y) {
    cq_backend *be = v->be;
    CQ_TRY(alloc2(be, cq_tensor_rows(x), cq_tensor_cols(x), y));
    cq_status s = cq_op_copy(be, y, x);
    for (int d = 0; s == CQ_OK && d < R->n_dil; d++) {
        cq_tensor a = {0}, b = {0};
        const int t1 = R->dil[d] * (R->k - 1), t2 = R->k - 1;
        s = aa_act(v, g, &R->a1[d], y, &a);
        if (s == CQ_OK) s = conv1(be, &a, &R->c1[d], &R->b1[d], R->k, R->dil[d], t1 / 2, t1 - t1 / 2, 1, 1,
                                  CQ_PAD_ZERO, &b);
        cq_tensor_free(&a);
        if (s == CQ_OK) s = aa_act(v, g, &R->a2[d], &b, &a);
        cq_tensor_free(&b);
        if (s == CQ_OK) s = conv1(be, &a, &R->c2[d], &R->b2[d], R->k, 1, t2 / 2, t2 - t2 / 2, 1, 1, CQ_PAD_ZERO, &b);
        cq_tensor_free(&a);
        if (s == CQ_OK) s = cq_op_binary(be, y, y, &b, CQ_BINARY_ADD);
        cq_tensor_free(&b);
    }
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

/* A generator on x [L, in]: *y [Lo, out]. */
static cq_status gen_forward(const cq_ltx2_vocoder *v, const lv_gen *G, const cq_tensor *x, cq_tensor *y) {
    cq_backend *be = v->be;
    const cq_ltx2_voc_gen_config *g = G->cfg;
    cq_tensor h = {0}, t = {0};
    memset(y, 0, sizeof *y);
    CQ_TRY(conv1(be, x, &G->conv_in, &G->conv_in_b, 7, 1, 3, 3, 1, 1, CQ_PAD_ZERO, &h));
    cq_status s = CQ_OK;
    for (int i = 0; s == CQ_OK && i < g->n_ups; i++) {
        const int k = g->up_kernel[i], st = g->up_factor[i], p = (k - st) / 2;
        s = convt1(be, &h, &G->up[i], &G->up_b[i], cq_ltx2_voc_width(g, i), k, st, 1, p, p, &t);
        if (s == CQ_OK) take(&h, &t);
        /* the mean of the level's ResBlocks, each on the upsampled signal */
        cq_tensor acc = {0};
        for (int j = 0; s == CQ_OK && j < g->n_res; j++) {
            s = amp_block(v, g, &G->res[i * g->n_res + j], &h, &t);
            if (s == CQ_OK && j == 0) acc = t, memset(&t, 0, sizeof t);
            else if (s == CQ_OK) s = cq_op_binary(be, &acc, &acc, &t, CQ_BINARY_ADD);
            cq_tensor_free(&t);
        }
        if (s == CQ_OK && g->n_res > 1) s = cq_op_unary(be, &acc, &acc, CQ_UNARY_SCALE, 1.0f / (float)g->n_res, 0.0f);
        if (s == CQ_OK) take(&h, &acc);
        cq_tensor_free(&acc);
    }
    if (s == CQ_OK) s = aa_act(v, g, &G->act_out, &h, &t);
    if (s == CQ_OK) take(&h, &t);
    if (s == CQ_OK)
        s = conv1(be, &h, &G->conv_out, g->final_bias ? &G->conv_out_b : NULL, 7, 1, 3, 3, 1, 1, CQ_PAD_ZERO, y);
    cq_tensor_free(&h);
    if (s == CQ_OK && g->final_act == CQ_LTX2_VOC_FINAL_TANH) s = cq_op_unary(be, y, y, CQ_UNARY_TANH, 0.0f, 0.0f);
    if (s == CQ_OK && g->final_act == CQ_LTX2_VOC_FINAL_CLAMP)
        s = cq_op_unary(be, y, y, CQ_UNARY_CLAMP, -1.0f, 1.0f);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

static int64_t gen_length(const cq_ltx2_voc_gen_config *g, int64_t L) {
    for (int i = 0; i < g->n_ups; i++) {
        const int k = g->up_kernel[i], st = g->up_factor[i];
        L = (L - 1) * st + k - 2 * ((k - st) / 2);
    }
    return L;
}

void cq_ltx2_vocoder_lengths(const cq_ltx2_vocoder *v, int Tm, int64_t *n_low, int64_t *n_out) {
    const int64_t lo = gen_length(&v->cfg.gen, Tm);
    if (n_low) *n_low = lo;
    if (n_out) *n_out = v->cfg.bwe ? lo * v->cfg.rate_ratio : lo;
}

/* The BWE on the main generator's x [L, ch]: *y holds [Lpad ratio, ch], of which the first L ratio rows are the
 * output. */
static cq_status bwe_forward(const cq_ltx2_vocoder *v, const cq_tensor *x, cq_tensor *y) {
    cq_backend *be = v->be;
    const cq_ltx2_vocoder_config *c = &v->cfg;
    const int ch = c->gen.out_channels, h = c->hop_length, nf = c->filter_length / 2 + 1;
    const int64_t L = cq_tensor_rows(x), F = (L + h - 1) / h, Lpad = F * h;
    cq_tensor xp = {0}, spec = {0}, mag = {0}, mel = {0}, view, t = {0};
    memset(y, 0, sizeof *y);
    cq_status s = Lpad > L ? pad_rows(v, x, 0, (int)(Lpad - L), CQ_PAD_ZERO, &xp) : CQ_OK;
    const cq_tensor *xs = Lpad > L ? &xp : x;
    /* the causal log-mel of each channel */
    if (s == CQ_OK) s = cq_tensor_reshape(xs, 2, (const int64_t[2]){F, (int64_t)h * ch}, &view);
    if (s == CQ_OK) s = conv1(be, &view, &v->stft_w, NULL, v->stft_k, 1, v->stft_pad, 0, 1, 1, CQ_PAD_ZERO, &spec);
    if (s == CQ_OK) s = cq_op_binary(be, &spec, &spec, &spec, CQ_BINARY_MUL);
    if (s == CQ_OK) s = alloc2(be, F, (int64_t)ch * nf, &mag);
    if (s == CQ_OK) s = cq_op_gather_cols(be, &mag, &spec, &v->mag_idx, 2, 1.0f);
    cq_tensor_free(&spec);
    if (s == CQ_OK) s = cq_op_unary(be, &mag, &mag, CQ_UNARY_SQRT, 0.0f, 0.0f);
    if (s == CQ_OK) s = cq_tensor_reshape(&mag, 2, (const int64_t[2]){F * ch, nf}, &view);
    if (s == CQ_OK) s = conv1(be, &view, &v->mel_basis, NULL, 1, 1, 0, 0, 1, 1, CQ_PAD_ZERO, &mel);
    cq_tensor_free(&mag);
    if (s == CQ_OK) s = cq_op_unary(be, &mel, &mel, CQ_UNARY_LOG, 1e-5f, 0.0f);
    if (s == CQ_OK) s = cq_tensor_reshape(&mel, 2, (const int64_t[2]){F, (int64_t)ch * c->n_mels}, &view);
    if (s == CQ_OK) voc_tap(v, "bwe_mel", &view);
    /* the residual */
    if (s == CQ_OK) s = gen_forward(v, &v->bwe, &view, y);
    cq_tensor_free(&mel);
    if (s == CQ_OK) voc_tap(v, "bwe_residual", y);
    /* the skip: the Hann-windowed sinc upsampler of the padded input */
    cq_tensor xr = {0};
    if (s == CQ_OK) s = pad_rows(v, xs, v->resamp_pad, v->resamp_pad, CQ_PAD_REPLICATE, &xr);
    if (s == CQ_OK)
        s = convt1(be, &xr, &v->resamp, NULL, ch, v->resamp_k, c->rate_ratio, ch, v->resamp_crop_l,
                   v->resamp_crop_r, &t);
    cq_tensor_free(&xr);
    cq_tensor_free(&xp);
    if (s == CQ_OK && cq_tensor_rows(&t) != cq_tensor_rows(y))
        s = cq_fail(CQ_ERR_INTERNAL, WHO_VOC ": residual of %lld samples, skip of %lld",
                    (long long)cq_tensor_rows(y), (long long)cq_tensor_rows(&t));
    if (s == CQ_OK) voc_tap(v, "bwe_skip", &t);
    if (s == CQ_OK) s = cq_op_binary(be, y, y, &t, CQ_BINARY_ADD);
    if (s == CQ_OK) s = cq_op_unary(be, y, y, CQ_UNARY_CLAMP, -1.0f, 1.0f);
    cq_tensor_free(&t);
    if (s != CQ_OK) cq_tensor_free(y);
    return s;
}

cq_status cq_ltx2_vocoder_forward(cq_ltx2_vocoder *v, const float *mel, int Cm, int Tm, int M, float *low,
                                  float *out) {
    if (!v || !mel || (!low && !out))
        return cq_fail(CQ_ERR_INVALID_ARG, WHO_VOC ": forward needs a model, a mel and at least one output");
    const cq_ltx2_vocoder_config *c = &v->cfg;
    if (Tm < 1 || Tm > CQ_LTX2_VOC_MAX_FRAMES)
        return cq_fail(CQ_ERR_SHAPE, WHO_VOC ": %d mel frames (1 to %d)", Tm, CQ_LTX2_VOC_MAX_FRAMES);
    if (Cm < 1 || M < 1 || (int64_t)Cm * M != c->gen.in_channels)
        return cq_fail(CQ_ERR_SHAPE, WHO_VOC ": a mel of %d channels x %d bins; the vocoder takes %d inputs", Cm, M,
                       c->gen.in_channels);
    const int Cin = Cm * M, ch = c->gen.out_channels;
    float *x = cq_mallocn((size_t)Tm * Cin, sizeof(float));
    if (!x) return CQ_ERR_NOMEM;
    /* [Cm][Tm][M] -> [Tm][Cm M] (channel c M + m) */
    for (int cc = 0; cc < Cm; cc++)
        for (int t = 0; t < Tm; t++)
            for (int m = 0; m < M; m++) {
                const float val = mel[((size_t)cc * Tm + t) * M + m];
                if (!(val == val) || val - val != 0.0f) {
                    cq_free(x);
                    return cq_fail(CQ_ERR_NUMERIC, WHO_VOC ": mel[%d][%d][%d] is not finite", cc, t, m);
                }
                x[(size_t)t * Cin + (size_t)cc * M + m] = val;
            }
    cq_backend *be = v->be;
    int64_t n_low, n_out;
    cq_ltx2_vocoder_lengths(v, Tm, &n_low, &n_out);
    cq_tensor tx = {0}, tl = {0}, to = {0};
    cq_status s = alloc2(be, Tm, Cin, &tx);
    if (s == CQ_OK) s = cq_tensor_upload(&tx, x, (size_t)Tm * Cin * sizeof(float));
    cq_free(x);
    if (s == CQ_OK) voc_tap(v, "voc_in", &tx);
    if (s == CQ_OK) s = gen_forward(v, &v->gen, &tx, &tl);
    cq_tensor_free(&tx);
    if (s == CQ_OK && cq_tensor_rows(&tl) != n_low) s = cq_fail(CQ_ERR_INTERNAL, WHO_VOC ": generator length");
    if (s == CQ_OK) voc_tap(v, "voc_low", &tl);
    if (s == CQ_OK && c->bwe && out) s = bwe_forward(v, &tl, &to);
    cq_tensor ov = {0};
    if (s == CQ_OK && out) {
        ov = c->bwe ? cq_tensor_rows_view(&to, 0, n_out) : tl;
        voc_tap(v, "voc_out", &ov);
    }
    if (s == CQ_OK) s = cq_backend_sync(be);
    if (s == CQ_OK && low) s = cq_tensor_download(&tl, low, (size_t)n_low * ch * sizeof(float));
    if (s == CQ_OK && out) s = cq_tensor_download(&ov, out, (size_t)n_out * ch * sizeof(float));
    cq_tensor_free(&tl);
    cq_tensor_free(&to);
    return s;
}
