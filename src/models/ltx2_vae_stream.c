/*
 * ltx2_vae_stream.c — the decoder as a stream of frames (ltx2_vae.h,
 * cq_ltx2_vae_decode_stream): the same ops as the untiled decode, but each
 * node of the decoder's graph (a conv with its input's PixelNorm and SiLU
 * folded in, a residual add, a depth-to-space step) produces one output
 * frame at a time on demand and keeps only the last few it made. A 3x3x3
 * conv needs input frames t - 1, t, t + 1 (clamped at the ends: the
 * replicate padding in time; t - 2, t - 1, t when causal); an upsampler's
 * output frame t is sub-frame (t + pt - 1) mod pt of input frame
 * (t + pt - 1) / pt (the first pt - 1 dropped). Frames are pulled in order,
 * so with CACHE frames a node every frame is computed once; the device holds
 * CACHE frames a node (three a ResBlock) instead of whole videos, whatever
 * the length. Each output frame is the conv of the same three input frames
 * as in the untiled run, so the result is the same (bit for bit on the CPU).
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "models/ltx2_vae_impl.h"

#define WHO "ltx2_vae"
#define PN_EPS 1e-8f
#define CACHE 4 /* a ResBlock's input is asked for frame t + 3 before frame t + 1's sum */

typedef enum { SN_INPUT, SN_CONV, SN_ADD, SN_D2S } sn_kind;

typedef struct sn {
    sn_kind kind;
    int a, b;           /* children (node indices) */
    const lv_conv *conv; /* SN_CONV */
    bool prenorm;       /* SN_CONV: SiLU(PixelNorm(input)) before the conv */
    int st[3];          /* SN_D2S */
    int T, H, W, C;     /* the frames it gives and each frame's grid */
    cq_tensor slot[CACHE];
    int idx[CACHE];
    int n_slot;
} sn;

typedef struct stream {
    cq_ltx2_vae *v;
    sn *n;
    int count, cap;
    const float *z; /* host latents, channels-last */
    cq_tensor win, d2s; /* shared scratch: a conv's three input frames, a depth-to-space output */
    uint64_t bytes;
    bool causal;
} stream;

static int add_node(stream *s, sn node) {
    if (s->count == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 64;
        sn *m = cq_reallocn(s->n, (size_t)cap, sizeof *m);
        if (!m) return -1;
        s->n = m, s->cap = cap;
    }
    for (int k = 0; k < CACHE; k++) node.idx[k] = -1;
    node.n_slot = 0;
    s->n[s->count] = node;
    return s->count++;
}

static int conv_node(stream *s, int in, const lv_conv *c, int cout, bool prenorm) {
    const sn *x = &s->n[in];
    return add_node(s, (sn){.kind = SN_CONV, .a = in, .conv = c, .prenorm = prenorm, .T = x->T, .H = x->H, .W = x->W,
                            .C = cout});
}

/* d NULL: the shapes only (cq_ltx2_vae_stream_bytes) */
#define CONV_OF(expr) (d ? &(expr) : NULL)

static int res_node(stream *s, int x, const lv_res *r) {
    const int w = s->n[x].C;
    const int c1 = conv_node(s, x, r ? &r->c1 : NULL, w, true);
    const int c2 = c1 < 0 ? -1 : conv_node(s, c1, r ? &r->c2 : NULL, w, true);
    if (c2 < 0) return -1;
    const sn *X = &s->n[x];
    return add_node(s, (sn){.kind = SN_ADD, .a = x, .b = c2, .T = X->T, .H = X->H, .W = X->W, .C = X->C});
}

/* The decoder's graph over F x h x w latents (d NULL: shapes only); returns the head's node or -1 (no memory). */
static int build(stream *s, const cq_ltx2_vae_config *c, const lv_coder *d, int F, int h, int w) {
    int x = add_node(s, (sn){.kind = SN_INPUT, .T = F, .H = h, .W = w, .C = c->latent_channels});
    if (x >= 0) x = conv_node(s, x, CONV_OF(d->conv_in), c->dec_width, false);
    for (int j = 0; x >= 0 && j < c->dec_mid_layers; j++) x = res_node(s, x, CONV_OF(d->mid[j]));
    for (int i = 0; x >= 0 && i < c->n_up; i++) {
        const cq_ltx2_vae_block *B = &c->up[i];
        if (B->resample) {
            x = conv_node(s, x, CONV_OF(d->blk[i].rs), B->conv_out, false);
            if (x < 0) break;
            const sn *y = &s->n[x];
            x = add_node(s, (sn){.kind = SN_D2S, .a = x, .st = {B->st[0], B->st[1], B->st[2]},
                                 .T = y->T * B->st[0] - (B->st[0] - 1), .H = y->H * B->st[1], .W = y->W * B->st[2],
                                 .C = B->cout});
        }
        for (int j = 0; x >= 0 && j < B->n_res; j++) x = res_node(s, x, CONV_OF(d->blk[i].res[j]));
    }
    if (x >= 0) x = conv_node(s, x, CONV_OF(d->conv_out), c->out_channels * c->patch * c->patch, true);
    return x;
}

static cq_status get(stream *s, int id, int t, const cq_tensor **out);

/* A free slot of node id for frame t: an empty one, else the oldest frame's (pulls go forward). */
static cq_status take_slot(stream *s, int id, int t, cq_tensor **out) {
    sn *n = &s->n[id];
    int k = -1;
    for (int i = 0; i < CACHE; i++)
        if (n->idx[i] < 0) {
            k = i;
            break;
        }
    if (k < 0) {
        k = 0;
        for (int i = 1; i < CACHE; i++)
            if (n->idx[i] < n->idx[k]) k = i;
    }
    if (!n->slot[k].base) {
        CQ_TRY(cq_tensor_alloc_2d(s->v->be, CQ_DTYPE_F32, (int64_t)n->H * n->W, n->C, &n->slot[k]));
        s->bytes += (uint64_t)n->H * n->W * n->C * sizeof(float);
    }
    n->idx[k] = -1; /* invalid until filled */
    *out = &n->slot[k];
    n->n_slot = k; /* the slot being filled (no other call fills this node's slots meanwhile: the graph is acyclic) */
    (void)t;
    return CQ_OK;
}

static cq_status compute(stream *s, int id, int t, cq_tensor *y) {
    sn *n = &s->n[id];
    cq_backend *be = s->v->be;
    const int64_t P = (int64_t)n->H * n->W;
    switch (n->kind) {
    case SN_INPUT:
        return cq_tensor_upload(y, s->z + (size_t)t * P * n->C, (size_t)P * n->C * sizeof(float));
    case SN_ADD: {
        const cq_tensor *b, *a;
        CQ_TRY(get(s, n->b, t, &b)); /* the branch first: it asks for later frames of a */
        CQ_TRY(get(s, n->a, t, &a));
        return cq_op_binary(be, y, a, b, CQ_BINARY_ADD);
    }
    case SN_D2S: {
        const sn *c = &s->n[n->a];
        const int g = t + n->st[0] - 1, f = g / n->st[0], sub = g % n->st[0];
        const cq_tensor *x;
        CQ_TRY(get(s, n->a, f, &x));
        cq_tensor d = cq_tensor_rows_view(&s->d2s, 0, (int64_t)n->st[0] * P * n->C);
        cq_tensor d2;
        cq_status st = cq_tensor_reshape(&d, 2, (const int64_t[2]){(int64_t)n->st[0] * P, n->C}, &d2);
        if (st == CQ_OK) st = cq_op_depth_to_space3d(be, &d2, x, 1, c->H, c->W, n->st[0], n->st[1], n->st[2]);
        if (st == CQ_OK) {
            cq_tensor keep = cq_tensor_rows_view(&d2, (int64_t)sub * P, P);
            st = cq_op_copy(be, y, &keep);
            cq_tensor_free(&keep);
        }
        cq_tensor_free(&d2), cq_tensor_free(&d);
        return st;
    }
    case SN_CONV: {
        const sn *c = &s->n[n->a];
        const int64_t Pi = (int64_t)c->H * c->W;
        int src[3];
        for (int k = 0; k < 3; k++) {
            int u = s->causal ? t - 2 + k : t - 1 + k;
            src[k] = u < 0 ? 0 : u >= c->T ? c->T - 1 : u;
        }
        const cq_tensor *x[3];
        for (int k = 0; k < 3; k++) CQ_TRY(get(s, n->a, src[k], &x[k]));
        cq_tensor w = cq_tensor_rows_view(&s->win, 0, 3 * Pi * c->C);
        cq_tensor w2;
        cq_status st = cq_tensor_reshape(&w, 2, (const int64_t[2]){3 * Pi, c->C}, &w2);
        for (int k = 0; st == CQ_OK && k < 3; k++) {
            cq_tensor dst = cq_tensor_rows_view(&w2, k * Pi, Pi);
            st = cq_op_copy(be, &dst, x[k]);
            if (st == CQ_OK && n->prenorm) st = cq_op_rmsnorm(be, &dst, &dst, NULL, NULL, false, PN_EPS);
            if (st == CQ_OK && n->prenorm) st = cq_op_unary(be, &dst, &dst, CQ_UNARY_SILU, 0.0f, 0.0f);
            cq_tensor_free(&dst);
        }
        const cq_conv3d_args ca = {.y = y, .x = &w2, .w = &n->conv->w, .bias = &n->conv->b, .T = 3, .H = c->H,
                                   .W = c->W, .kt = 3, .kh = 3, .kw = 3, .stride_t = 1, .stride_y = 1,
                                   .stride_x = 1, .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1,
                                   .mode = CQ_PAD_ZERO};
        if (st == CQ_OK) st = cq_op_conv3d(be, &ca);
        cq_tensor_free(&w2), cq_tensor_free(&w);
        return st;
    }
    }
    return cq_fail(CQ_ERR_INTERNAL, WHO ": a stream node of kind %d", (int)n->kind);
}

/* Frame t of node id, from its cache or made now (its children's frames asked for first). */
static cq_status get(stream *s, int id, int t, const cq_tensor **out) {
    sn *n = &s->n[id];
    for (int k = 0; k < CACHE; k++)
        if (n->idx[k] == t) {
            *out = &n->slot[k];
            return CQ_OK;
        }
    if (cq_cancel_requested()) return cq_fail(CQ_ERR_INTERRUPTED, WHO ": interrupted");
    cq_tensor *y;
    CQ_TRY(take_slot(s, id, t, &y));
    const int k = n->n_slot;
    CQ_TRY(compute(s, id, t, y));
    s->n[id].idx[k] = t; /* s->n is not reallocated after build */
    *out = y;
    return CQ_OK;
}

/* The largest three-frame conv input and depth-to-space output of the graph, as values. */
static void scratch_sizes(const stream *s, int64_t *win, int64_t *d2s) {
    *win = *d2s = 1;
    for (int i = 0; i < s->count; i++) {
        const sn *n = &s->n[i];
        if (n->kind == SN_CONV) {
            const sn *c = &s->n[n->a];
            const int64_t v = 3 * (int64_t)c->H * c->W * c->C;
            if (v > *win) *win = v;
        } else if (n->kind == SN_D2S) {
            const int64_t v = (int64_t)n->st[0] * n->H * n->W * n->C;
            if (v > *d2s) *d2s = v;
        }
    }
}

static void stream_free(stream *s) {
    for (int i = 0; i < s->count; i++)
        for (int k = 0; k < CACHE; k++) cq_tensor_free(&s->n[i].slot[k]);
    cq_tensor_free(&s->win);
    cq_tensor_free(&s->d2s);
    cq_free(s->n);
}

cq_status cq_ltx2_vae_decode_stream(cq_ltx2_vae *v, const float *z, int F, int h, int w, float *frames,
                                    uint64_t *device_bytes) {
    if (!v || !z || !frames) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a stream decode needs a model, latents and "
                                            "an output");
    int Fo, Ho, Wo;
    CQ_TRY(cq_ltx2_vae_decode_shape(v, F, h, w, &Fo, &Ho, &Wo));
    const cq_ltx2_vae_config *c = &v->cfg;
    for (size_t i = 0; i < (size_t)F * h * w * c->latent_channels; i++)
        if (!isfinite(z[i])) return cq_fail(CQ_ERR_NUMERIC, WHO ": latent value %zu is %g", i, (double)z[i]);
    stream s = {.v = v, .z = z, .causal = c->dec_causal};
    const int root = build(&s, c, &v->dec, F, h, w);
    cq_status st = root < 0 ? CQ_ERR_NOMEM : CQ_OK;
    int64_t nw = 0, nd = 0;
    if (st == CQ_OK) {
        scratch_sizes(&s, &nw, &nd);
        st = cq_tensor_alloc_2d(v->be, CQ_DTYPE_F32, nw, 1, &s.win);
        if (st == CQ_OK) st = cq_tensor_alloc_2d(v->be, CQ_DTYPE_F32, nd, 1, &s.d2s);
        s.bytes += (uint64_t)(nw + nd) * sizeof(float);
    }
    const sn *r = st == CQ_OK ? &s.n[root] : NULL;
    if (st == CQ_OK && (r->T != Fo || r->H * c->patch != Ho || r->W * c->patch != Wo))
        st = cq_fail(CQ_ERR_INTERNAL, WHO ": the stream gives %d frames of %d x %d, not %d of %d x %d", r->T,
                     r->H * c->patch, r->W * c->patch, Fo, Ho, Wo);
    float *host = NULL;
    const size_t fr = r ? (size_t)r->H * r->W * r->C : 0;
    if (st == CQ_OK && !(host = cq_mallocn(fr, sizeof(float)))) st = CQ_ERR_NOMEM;
    for (int t = 0; st == CQ_OK && t < Fo; t++) {
        const cq_tensor *y;
        st = get(&s, root, t, &y);
        if (st == CQ_OK) st = cq_backend_sync(v->be);
        if (st == CQ_OK) st = cq_tensor_download(y, host, fr * sizeof(float));
        if (st == CQ_OK) cq_ltx2_vae_unpatchify_frame(c, host, r->H, r->W, t, frames, Fo, Ho, Wo);
    }
    if (device_bytes) *device_bytes = s.bytes;
    cq_free(host);
    stream_free(&s);
    return st;
}

uint64_t cq_ltx2_vae_stream_bytes(const cq_ltx2_vae_config *c, int h, int w) {
    stream s = {0};
    if (!c || build(&s, c, NULL, 2, h, w) < 0) {
        cq_free(s.n);
        return 0;
    }
    double bytes = 0;
    for (int i = 1; i < s.count; i++) /* the input's frames are uploaded into its slots too */
        bytes += (double)CACHE * s.n[i].H * s.n[i].W * s.n[i].C * sizeof(float);
    bytes += (double)CACHE * h * w * c->latent_channels * sizeof(float);
    int64_t nw, nd;
    scratch_sizes(&s, &nw, &nd);
    cq_free(s.n);
    return (uint64_t)(bytes + (double)(nw + nd) * sizeof(float));
}
