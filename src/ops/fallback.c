/*
 * fallback.c — ops a device backend does not run, run on its host backend
 * with the operands copied across (fallback.h says what is promised).
 *
 * Each op's function lists its tensors: in() gives a host copy of an input
 * (a weight is bound zero-copy from the pack's mapping; an activation is
 * downloaded), out() a host copy of the output (downloaded too, since ops
 * may accumulate into it or work in place), and finish() uploads the output
 * and frees the copies. An output identical to an input (in place, which the
 * front end allows only exactly) gets its own copy: the host op then reads
 * the input's copy and writes the output's, with the same result.
 */
#include <string.h>

#include "ops/fallback.h"

bool cq_fallback_route(cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt, cq_dtype wdt2) {
    if (!be || be->vt->is_host || be->no_fallback || (unsigned)op >= CQ_OP_COUNT) return false;
    if (!be->host) {
        if (cq_backend_cpu_open(&be->host_opts, &be->host) != CQ_OK) {
            CQ_WARN("backend %s: no host backend for the ops it lacks: %s", be->name, cq_last_error());
            be->host = NULL;
            return false;
        }
    }
    cq_backend *h = be->host;
    if (!cq_backend_supports(h, op, wdt, xdt) || (wdt2 != wdt && !cq_backend_supports(h, op, wdt2, xdt))) return false;
    uint32_t bit = (uint32_t)1 << op;
    if (!(be->fallback_logged & bit)) {
        be->fallback_logged |= bit;
        CQ_INFO("backend %s does not run %s (%s activations); it runs on %s with its operands copied across (slow)",
                be->name, cq_op_name(op), cq_dtype_name(xdt), h->name);
    }
    return true;
}

#define FB_MAX 8

typedef struct fb {
    cq_backend *be, *host;
    cq_tensor copy[FB_MAX];
    int n;
    cq_tensor *out_dev; /* the device tensor the output goes back to */
    cq_tensor *out_host;
    cq_status err;
} fb;

static void fb_begin(fb *f, cq_backend *be) {
    memset(f, 0, sizeof *f);
    f->be = be;
    f->host = be->host;
}

static cq_tensor *fb_slot(fb *f) {
    if (f->err) return NULL;
    if (f->n == FB_MAX) {
        f->err = cq_fail(CQ_ERR_INTERNAL, "op fallback: more than %d operands", FB_MAX);
        return NULL;
    }
    return &f->copy[f->n++];
}

static const cq_tensor *in(fb *f, const cq_tensor *t) {
    if (!t || f->err) return NULL;
    cq_tensor *h = fb_slot(f);
    if (!h) return NULL;
    if (t->flags & CQ_TENSOR_WEIGHT) {
        if (!t->wsrc && t->wsrc_bytes) {
            f->err = cq_fail(CQ_ERR_UNSUPPORTED, "op fallback: a weight of backend %s has no host payload", f->be->name);
            return NULL;
        }
        /* already validated and hash-checked when it was bound on the device backend */
        cq_tensor_view v;
        memset(&v, 0, sizeof v);
        v.name = "fallback weight";
        v.dtype = t->dtype;
        v.ndim = t->ndim;
        v.nelem = 1;
        for (int i = 0; i < t->ndim; i++) {
            v.shape[i] = (uint64_t)t->shape[i];
            v.nelem *= (uint64_t)t->shape[i];
        }
        v.data = t->wsrc;
        v.nbytes = t->wsrc_bytes;
        memset(h, 0, sizeof *h);
        h->dtype = t->dtype;
        h->ndim = t->ndim;
        memcpy(h->shape, t->shape, sizeof h->shape);
        h->flags = CQ_TENSOR_WEIGHT;
        h->wsrc = t->wsrc;
        h->wsrc_bytes = t->wsrc_bytes;
        f->err = f->host->vt->bind_weight(f->host, &v, h);
        if (f->err) {
            memset(h, 0, sizeof *h);
            return NULL;
        }
        h->be = f->host;
        return h;
    }
    f->err = cq_tensor_alloc(f->host, t->dtype, t->ndim, t->shape, h);
    if (!f->err) f->err = cq_tensor_download(t, cq_host_ptr(h), h->nbytes);
    return f->err ? NULL : h;
}

static cq_tensor *out(fb *f, cq_tensor *t) {
    cq_tensor *h = (cq_tensor *)in(f, t);
    if (h) {
        f->out_dev = t;
        f->out_host = h;
    }
    return h;
}

static cq_status finish(fb *f, cq_status s) {
    if (!f->err) f->err = s;
    if (!f->err && f->out_dev) f->err = cq_tensor_upload(f->out_dev, cq_host_ptr(f->out_host), f->out_host->nbytes);
    for (int i = 0; i < f->n; i++) cq_tensor_free(&f->copy[i]);
    return f->err;
}

/* Run host op `name` once every copy was made (`call` uses the copies). */
#define FB_RUN(f, name, ...) finish(&(f), (f).err ? (f).err : (f).host->vt->name((f).host, __VA_ARGS__))

cq_status cq_fallback_matmul(cq_backend *be, const cq_matmul_args *a) {
    fb f;
    fb_begin(&f, be);
    cq_matmul_args h = *a;
    h.y = out(&f, a->y);
    h.x = in(&f, a->x);
    h.w = in(&f, a->w);
    h.w2 = in(&f, a->w2);
    h.bias = in(&f, a->bias);
    h.bias2 = in(&f, a->bias2);
    h.gate = in(&f, a->gate);
    return FB_RUN(f, matmul, &h);
}

cq_status cq_fallback_attention(cq_backend *be, const cq_attn_args *a) {
    fb f;
    fb_begin(&f, be);
    cq_attn_args h = *a;
    h.o = out(&f, a->o);
    h.q = in(&f, a->q);
    h.k_prefix = in(&f, a->k_prefix);
    h.v_prefix = in(&f, a->v_prefix);
    h.k = in(&f, a->k);
    h.v = in(&f, a->v);
    h.vis = in(&f, a->vis);
    h.vis_lo = in(&f, a->vis_lo);
    return FB_RUN(f, attention, &h);
}

cq_status cq_fallback_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                                const cq_tensor *shift, float eps) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *hs = in(&f, scale), *hsh = in(&f, shift);
    return FB_RUN(f, layernorm, hy, hx, hs, hsh, eps);
}

cq_status cq_fallback_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w,
                              const cq_tensor *bias, bool zero_centered, float eps) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *hw = in(&f, w), *hb = in(&f, bias);
    return FB_RUN(f, rmsnorm, hy, hx, hw, hb, zero_centered, eps);
}

cq_status cq_fallback_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                                const cq_tensor *beta, float eps) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *hg = in(&f, gamma), *hb = in(&f, beta);
    return FB_RUN(f, groupnorm, hy, hx, groups, hg, hb, eps);
}

cq_status cq_fallback_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hm = out(&f, m);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, group_moments, hm, hx, groups, block);
}

cq_status cq_fallback_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w,
                                   float eps, const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode,
                                   int rope_dim) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *ht = out(&f, t);
    const cq_tensor *hw = in(&f, w), *hc = in(&f, cos_t), *hs = in(&f, sin_t);
    return FB_RUN(f, qk_norm_rope, ht, n_heads, head_dim, hw, eps, hc, hs, mode, rope_dim);
}

cq_status cq_fallback_unary(cq_backend *be, cq_tensor *y, const cq_tensor *x, cq_unary fn, float alpha, float beta) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, unary, hy, hx, fn, alpha, beta);
}

cq_status cq_fallback_binary(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b, cq_binary fn) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *ha = in(&f, a), *hb = in(&f, b);
    return FB_RUN(f, binary, hy, ha, hb, fn);
}

cq_status cq_fallback_gated_add(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *gate) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *hg = in(&f, gate);
    return FB_RUN(f, gated_add, hy, hx, hg);
}

cq_status cq_fallback_swiglu(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *ha = in(&f, a), *hb = in(&f, b);
    return FB_RUN(f, swiglu, hy, ha, hb);
}

cq_status cq_fallback_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, softmax, hy, hx, scale);
}

cq_status cq_fallback_copy(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, copy, hy, hx);
}

cq_status cq_fallback_transpose(cq_backend *be, cq_tensor *y, const cq_tensor *x) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, transpose, hy, hx);
}

cq_status cq_fallback_concat_cols(cq_backend *be, cq_tensor *y, const cq_tensor *a, const cq_tensor *b) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *ha = in(&f, a), *hb = in(&f, b);
    return FB_RUN(f, concat_cols, hy, ha, hb);
}

cq_status cq_fallback_get_rows(cq_backend *be, cq_tensor *y, const cq_tensor *w, const cq_tensor *ids) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hw = in(&f, w), *hi = in(&f, ids);
    return FB_RUN(f, get_rows, hy, hw, hi);
}

cq_status cq_fallback_conv2d(cq_backend *be, const cq_conv2d_args *a) {
    fb f;
    fb_begin(&f, be);
    cq_conv2d_args h = *a;
    h.y = out(&f, a->y);
    h.x = in(&f, a->x);
    h.w = in(&f, a->w);
    h.bias = in(&f, a->bias);
    return FB_RUN(f, conv2d, &h);
}

cq_status cq_fallback_upsample_nearest(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int fct) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, upsample_nearest, hy, hx, H, W, fct);
}

cq_status cq_fallback_pixel_shuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, pixel_shuffle, hy, hx, H, W, r);
}

cq_status cq_fallback_pixel_unshuffle(cq_backend *be, cq_tensor *y, const cq_tensor *x, int H, int W, int r) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, pixel_unshuffle, hy, hx, H, W, r);
}

cq_status cq_fallback_gather_cols(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *idx, int group,
                                  float scale) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *hi = in(&f, idx);
    return FB_RUN(f, gather_cols, hy, hx, hi, group, scale);
}

cq_status cq_fallback_conv3d(cq_backend *be, const cq_conv3d_args *a) {
    fb f;
    fb_begin(&f, be);
    cq_conv3d_args h = *a;
    h.y = out(&f, a->y);
    h.x = in(&f, a->x);
    h.w = in(&f, a->w);
    h.bias = in(&f, a->bias);
    return FB_RUN(f, conv3d, &h);
}

cq_status cq_fallback_depth_to_space3d(cq_backend *be, cq_tensor *y, const cq_tensor *x, int T, int H, int W, int pt,
                                       int ph, int pw) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x);
    return FB_RUN(f, depth_to_space3d, hy, hx, T, H, W, pt, ph, pw);
}

static cq_status fb_conv1d(cq_backend *be, const cq_conv1d_args *a, bool transposed) {
    fb f;
    fb_begin(&f, be);
    cq_conv1d_args h = *a;
    h.y = out(&f, a->y);
    h.x = in(&f, a->x);
    h.w = in(&f, a->w);
    h.bias = in(&f, a->bias);
    return transposed ? FB_RUN(f, conv_transpose1d, &h) : FB_RUN(f, conv1d, &h);
}

cq_status cq_fallback_conv1d(cq_backend *be, const cq_conv1d_args *a) { return fb_conv1d(be, a, false); }

cq_status cq_fallback_conv_transpose1d(cq_backend *be, const cq_conv1d_args *a) { return fb_conv1d(be, a, true); }

cq_status cq_fallback_snake(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *alpha,
                            const cq_tensor *beta, bool logscale, float eps) {
    fb f;
    fb_begin(&f, be);
    cq_tensor *hy = out(&f, y);
    const cq_tensor *hx = in(&f, x), *ha = in(&f, alpha), *hb = in(&f, beta);
    return FB_RUN(f, snake, hy, hx, ha, hb, logscale, eps);
}
