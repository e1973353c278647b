/*
 * vae_stream.c — the row-streaming evaluator of a VAE's layer graph (see
 * vae_stream.h for the scheme): node construction, the input row ranges
 * each layer reads, the sliding windows, the group norms' statistics passes
 * and what they reset, and each layer's compute on the op layer.
 */
#include "models/kit/vae_stream.h"

#include <math.h>
#include <string.h>

#include "base/base.h"

/* ---- buffers (tracked for the peak-memory report) ------------------------------------ */
cq_tensor vs_phantom(cq_backend *be, int64_t rows, int64_t cols) {
    cq_tensor t;
    memset(&t, 0, sizeof t);
    t.be = be;
    t.dtype = CQ_DTYPE_F32;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.nbytes = (size_t)(rows * cols) * sizeof(float);
    t.flags = CQ_TENSOR_OWNED; /* counted as held; no buffer to free */
    return t;
}

static cq_status alloc_rows(vs_graph *g, int64_t rows, int64_t cols, cq_tensor *t) {
    if (g->dry)
        *t = vs_phantom(g->be, rows, cols);
    else
        CQ_TRY(cq_tensor_alloc_2d(g->be, CQ_DTYPE_F32, rows, cols, t));
    g->live += t->nbytes;
    if (g->live > g->peak) g->peak = g->live;
    return CQ_OK;
}

static void free_rows(vs_graph *g, cq_tensor *t) {
    if (t->flags & CQ_TENSOR_OWNED) g->live -= t->nbytes;
    cq_tensor_free(t);
}

void vs_init(vs_graph *g, cq_backend *be) {
    memset(g, 0, sizeof *g);
    g->be = be;
}

void vs_free(vs_graph *g) {
    for (int i = 0; i < g->count; i++) {
        vs_node *n = &g->n[i];
        if (n->kind != VS_SOURCE) free_rows(g, &n->cache);
        cq_tensor_free(&n->idx);
        free_rows(g, &n->scale);
        free_rows(g, &n->shift);
    }
    for (int i = 0; i < g->n_pass; i++) cq_free(g->pass[i].scope);
    cq_free(g->pass);
    cq_free(g->n);
    cq_free(g->tmp);
    cq_free(g->cons);
    g->cons = NULL;
    g->cons_count = 0;
    g->pass = NULL;
    g->n_pass = 0;
    g->n = NULL;
    g->tmp = NULL;
    g->count = g->cap = 0;
}

/* ---- construction ------------------------------------------------------------------- */
static cq_status add_node(vs_graph *g, vs_kind kind, int in0, int in1, int *out) {
    *out = -1;
    for (int i = 0; i < 2; i++) {
        int in = i ? in1 : in0;
        if (in >= g->count || in < -1 || (i == 1 && in >= 0 && in0 < 0))
            return cq_fail(CQ_ERR_INTERNAL, "vae: layer input %d does not exist", in);
    }
    if (g->count == g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        vs_node *nn = cq_reallocn(g->n, (size_t)cap, sizeof *nn);
        if (!nn) return CQ_ERR_NOMEM;
        g->n = nn;
        uint8_t *t = cq_realloc(g->tmp, (size_t)cap);
        if (!t) return CQ_ERR_NOMEM;
        g->tmp = t;
        g->cap = cap;
    }
    vs_node *n = &g->n[g->count];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->in[0] = in0;
    n->in[1] = in1;
    n->n_in = in0 < 0 ? 0 : in1 < 0 ? 1 : 2;
    n->align = 1;
    n->f = 1;
    n->stride = 1;
    n->k = 1;
    n->group = 1;
    *out = g->count++;
    g->settled_ok = false;
    return CQ_OK;
}

cq_status vs_source(vs_graph *g, const cq_tensor *t, int64_t H, int64_t W, int *out) {
    if (H < 1 || W < 1 || cq_tensor_rows(t) != H * W)
        return cq_fail(CQ_ERR_SHAPE, "vae: source tensor has %lld rows for a %lldx%lld grid",
                       (long long)cq_tensor_rows(t), (long long)H, (long long)W);
    CQ_TRY(add_node(g, VS_SOURCE, -1, -1, out));
    vs_node *n = &g->n[*out];
    n->H = H;
    n->W = W;
    n->C = cq_tensor_cols(t);
    n->cache = cq_tensor_rows_view(t, 0, H * W); /* a view: never freed here */
    n->hi = H;
    return CQ_OK;
}

/* A node with the geometry of its first input. */
static cq_status like_input(vs_graph *g, vs_kind kind, int in0, int in1, int *out) {
    if (in0 < 0 || in0 >= g->count) return cq_fail(CQ_ERR_INTERNAL, "vae: layer input %d does not exist", in0);
    CQ_TRY(add_node(g, kind, in0, in1, out));
    vs_node *n = &g->n[*out], *x = &g->n[in0];
    n->H = x->H;
    n->W = x->W;
    n->C = x->C;
    return CQ_OK;
}

cq_status vs_norm(vs_graph *g, int in, const cq_tensor *gamma, bool silu, int *out) {
    CQ_TRY(like_input(g, VS_NORM, in, -1, out));
    g->n[*out].gamma = gamma;
    g->n[*out].silu = silu;
    return CQ_OK;
}

cq_status vs_conv(vs_graph *g, int in, const cq_tensor *w, const cq_tensor *b, int64_t cout, int k, int s, int pt,
                  int pb, int pl, int pr, int *out) {
    CQ_TRY(like_input(g, VS_CONV, in, -1, out));
    vs_node *n = &g->n[*out];
    int64_t hp = n->H + pt + pb, wp = n->W + pl + pr;
    if (k < 1 || s < 1 || pt < 0 || pb < 0 || pl < 0 || pr < 0 || hp < k || wp < k)
        return cq_fail(CQ_ERR_SHAPE, "vae: a %dx%d convolution (stride %d) does not fit a %lldx%lld feature map", k, k,
                       s, (long long)n->H, (long long)n->W);
    n->H = (hp - k) / s + 1;
    n->W = (wp - k) / s + 1;
    n->C = cout;
    n->w = w;
    n->b = b;
    n->k = k;
    n->stride = s;
    n->pad_t = pt;
    n->pad_l = pl;
    n->pad_r = pr;
    return CQ_OK;
}

cq_status vs_add(vs_graph *g, int a, int b, int *out) {
    if (b < 0 || b >= g->count) return cq_fail(CQ_ERR_INTERNAL, "vae: layer input %d does not exist", b);
    CQ_TRY(like_input(g, VS_ADD, a, b, out));
    const vs_node *x = &g->n[a], *y = &g->n[b];
    if (x->H != y->H || x->W != y->W || x->C != y->C)
        return cq_fail(CQ_ERR_SHAPE, "vae: adding a %lldx%lldx%lld map to a %lldx%lldx%lld one", (long long)x->H,
                       (long long)x->W, (long long)x->C, (long long)y->H, (long long)y->W, (long long)y->C);
    return CQ_OK;
}

cq_status vs_upsample(vs_graph *g, int in, int f, int *out) {
    if (f < 1) return cq_fail(CQ_ERR_INTERNAL, "vae: upsampling factor %d", f);
    CQ_TRY(like_input(g, VS_UPSAMPLE, in, -1, out));
    vs_node *n = &g->n[*out];
    n->H *= f;
    n->W *= f;
    n->f = f;
    n->align = f;
    return CQ_OK;
}

static cq_status upload_idx(vs_graph *g, vs_node *n, const int32_t *idx, int64_t count) {
    CQ_TRY(cq_tensor_alloc_2d(g->be, CQ_DTYPE_I32, 1, count, &n->idx));
    return cq_tensor_upload(&n->idx, idx, (size_t)count * sizeof(int32_t));
}

/* DupUp3D on one frame, first chunk: repeat_interleave(r) over channels, view
 * as [cout, ft, fs, fs], keep temporal slot ft-1. Output channel o at
 * sub-pixel (i, j) reads input channel (((o*ft + ft-1)*fs + i)*fs + j) / r.
 * The gather produces channels in pixel_shuffle order o*fs*fs + i*fs + j. */
cq_status vs_dupup(vs_graph *g, int in, int64_t cout, int ft, int fs, int *out) {
    CQ_TRY(like_input(g, VS_DUPUP, in, -1, out));
    vs_node *n = &g->n[*out];
    int64_t cin = n->C, fac = (int64_t)ft * fs * fs;
    if (ft < 1 || fs < 1 || cout < 1 || (cout * fac) % cin)
        return cq_fail(CQ_ERR_SHAPE, "vae: DupUp from %lld to %lld channels with factors (%d, %d, %d) is not a whole repeat",
                       (long long)cin, (long long)cout, ft, fs, fs);
    int64_t r = cout * fac / cin, n_idx = cout * fs * fs;
    n->H *= fs;
    n->W *= fs;
    n->C = cout;
    n->f = fs;
    n->align = fs;
    int32_t *idx = cq_mallocn((size_t)n_idx, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    bool nearest = true;
    for (int64_t o = 0; o < cout; o++)
        for (int64_t s = 0; s < (int64_t)fs * fs; s++) {
            int64_t k = (o * ft + ft - 1) * fs * fs + s;
            idx[o * fs * fs + s] = (int32_t)(k / r);
            nearest = nearest && k / r == o;
        }
    n->plain = nearest; /* the gather is the identity: plain nearest upsampling */
    cq_status st = nearest ? CQ_OK : upload_idx(g, n, idx, n_idx);
    cq_free(idx);
    return st;
}

/* AvgDown3D on one frame: ft-1 zero frames padded in front, then channel k =
 * ((c*ft + t)*fs + i)*fs + j of the space-to-depth fold, averaged over
 * groups of G = cin*ft*fs*fs/cout consecutive k. pixel_unshuffle gives
 * channel c*fs*fs + i*fs + j for the real frame (t = ft-1); the zero frames
 * are index -1. *out is `in` itself when the shortcut is the identity. */
cq_status vs_avgdown(vs_graph *g, int in, int64_t cout, int ft, int fs, int *out) {
    if (in < 0 || in >= g->count) return cq_fail(CQ_ERR_INTERNAL, "vae: layer input %d does not exist", in);
    const vs_node *x = &g->n[in];
    int64_t cin = x->C, fac = (int64_t)ft * fs * fs;
    if (ft < 1 || fs < 1 || cout < 1 || (cin * fac) % cout || x->H % fs || x->W % fs)
        return cq_fail(CQ_ERR_SHAPE, "vae: AvgDown from %lld to %lld channels with factors (%d, %d, %d) on a %lldx%lld map",
                       (long long)cin, (long long)cout, ft, fs, fs, (long long)x->H, (long long)x->W);
    int64_t G = cin * fac / cout, n_idx = cout * G;
    if (fac == 1 && G == 1) {
        *out = in;
        return CQ_OK;
    }
    CQ_TRY(like_input(g, VS_AVGDOWN, in, -1, out));
    vs_node *n = &g->n[*out];
    n->H /= fs;
    n->W /= fs;
    n->C = cout;
    n->f = fs;
    n->group = (int)G;
    int32_t *idx = cq_mallocn((size_t)n_idx, sizeof(int32_t));
    if (!idx) return CQ_ERR_NOMEM;
    for (int64_t k = 0; k < n_idx; k++) {
        int64_t j = k % fs, i = k / fs % fs, t = k / ((int64_t)fs * fs) % ft, c = k / fac;
        idx[k] = t == ft - 1 ? (int32_t)(c * fs * fs + i * fs + j) : -1;
    }
    cq_status st = upload_idx(g, n, idx, n_idx);
    cq_free(idx);
    return st;
}

cq_status vs_attention(vs_graph *g, int in, const vs_attn_w *a, int *out) {
    CQ_TRY(like_input(g, VS_ATTN, in, -1, out));
    vs_node *n = &g->n[*out];
    n->align = (int)n->H; /* all rows at once */
    n->attn = a;
    return CQ_OK;
}

cq_status vs_gnorm(vs_graph *g, int in, const vs_gn_w *w, bool silu, int64_t band, int *out) {
    CQ_TRY(like_input(g, VS_GNORM, in, -1, out));
    vs_node *n = &g->n[*out];
    if (!w || w->groups < 1 || n->C % w->groups)
        return cq_fail(CQ_ERR_SHAPE, "vae: %d groups do not divide %lld channels", w ? w->groups : 0, (long long)n->C);
    n->gn = w;
    n->silu = silu;
    n->band = band;
    return CQ_OK;
}

cq_status vs_hold(vs_graph *g, int in, int64_t band, int *out) {
    CQ_TRY(like_input(g, VS_HOLD, in, -1, out));
    vs_node *n = &g->n[*out];
    n->align = (int)n->H;
    n->band = band;
    return CQ_OK;
}

/* ---- row ranges ----------------------------------------------------------------------- */
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Lowest input row read by output rows >= p. */
static int64_t in_lo(const vs_graph *g, const vs_node *n, int slot, int64_t p) {
    int64_t Hin = g->n[n->in[slot]].H;
    switch (n->kind) {
    case VS_CONV: return clamp64(p * n->stride - n->pad_t, 0, Hin);
    case VS_UPSAMPLE:
    case VS_DUPUP: return p / n->f;
    case VS_AVGDOWN: return clamp64(p * n->f, 0, Hin);
    case VS_ATTN:
    case VS_HOLD: return p >= n->H ? Hin : 0;
    default: return p;
    }
}

/* One past the highest input row read by output rows < q (q >= 1). */
static int64_t in_hi(const vs_graph *g, const vs_node *n, int slot, int64_t q) {
    int64_t Hin = g->n[n->in[slot]].H;
    switch (n->kind) {
    case VS_CONV: return clamp64((q - 1) * n->stride - n->pad_t + n->k, 0, Hin);
    case VS_UPSAMPLE:
    case VS_DUPUP: return (q + n->f - 1) / n->f;
    case VS_AVGDOWN: return clamp64(q * n->f, 0, Hin);
    case VS_ATTN:
    case VS_HOLD: return Hin;
    default: return q;
    }
}

/* Nodes a statistics pass never resets: what they computed stays valid. */
static bool is_protected(const vs_node *n) { return n->kind == VS_SOURCE || n->kind == VS_ATTN || n->kind == VS_HOLD; }

/* st[i] = 1 when node i will read its inputs upward from its current needs
 * from now on: it is protected (never reset), or no group norm without
 * statistics lies below it short of a protected node (no pass will reset
 * it), and it is not itself such a group norm (which reads its input once
 * for the statistics and then again from the top). Once true it stays. */
static void settled_all(const vs_graph *g, uint8_t *st) {
    for (int i = g->count - 1; i >= 0; i--) {
        const vs_node *n = &g->n[i];
        bool ok = is_protected(n) || !(n->kind == VS_GNORM && !n->have_stats);
        for (int j = i + 1; ok && !is_protected(n) && j < g->count; j++)
            for (int s = 0; s < g->n[j].n_in; s++)
                if (g->n[j].in[s] == i && !st[j]) ok = false;
        st[i] = ok;
    }
}

/* The lowest row any consumer (or the caller, for the last node) may still
 * read. Inside a statistics pass, a node of the pass's scope serves only the
 * pass (the pass resets it afterwards, and every other consumer gets it
 * recomputed). A protected node also keeps every row a consumer that a later
 * pass may reset could read again. */
static int64_t retain_lo(vs_graph *g, int id) {
    const vs_pass *p = g->n_pass ? &g->pass[g->n_pass - 1] : NULL;
    const bool scoped = p && p->scope[id];
    const bool prot = is_protected(&g->n[id]);
    if (prot && !g->settled_ok) {
        settled_all(g, g->tmp); /* changes only when a group norm gets its statistics */
        g->settled_ok = true;
    }
    int64_t r = INT64_MAX;
    for (int e = g->n[id].cons0; e < g->n[id].cons0 + g->n[id].n_cons; e++) {
        const int j = g->cons[e] >> 1, s = g->cons[e] & 1;
        if (scoped && !p->scope[j] && j != p->gn) continue;
        if (prot && !g->tmp[j]) return 0;
        if (g->n[j].need[s] < r) r = g->n[j].need[s];
    }
    if (id == g->count - 1 && !scoped && g->sink_need < r) r = g->sink_need;
    return r;
}

cq_status vs_rows(const vs_graph *g, int id, int64_t r0, int64_t r1, cq_tensor *out) {
    const vs_node *n = &g->n[id];
    if (r0 < n->lo || r1 > n->hi || r0 >= r1)
        return cq_fail(CQ_ERR_INVALID_ARG, "vae: rows [%lld, %lld) of layer %d are not held (have [%lld, %lld))",
                       (long long)r0, (long long)r1, id, (long long)n->lo, (long long)n->hi);
    *out = cq_tensor_rows_view(&n->cache, (r0 - n->lo) * n->W, (r1 - r0) * n->W);
    return CQ_OK;
}

/* Drop rows no consumer needs any more (the kept tail moves to a small buffer). */
static cq_status trim(vs_graph *g, int id) {
    vs_node *n = &g->n[id];
    if (n->kind == VS_SOURCE) return CQ_OK;
    int64_t r = retain_lo(g, id);
    if (r <= n->lo) return CQ_OK;
    /* A whole map (attention, checkpoint) goes all at once: moving its tail
     * would copy most of it, and hold it twice meanwhile. */
    if (is_protected(n) && r < n->hi) return CQ_OK;
    if (r >= n->hi) {
        free_rows(g, &n->cache);
        n->lo = n->hi;
        return CQ_OK;
    }
    cq_tensor t, src;
    CQ_TRY(alloc_rows(g, (n->hi - r) * n->W, n->C, &t));
    cq_status s = vs_rows(g, id, r, n->hi, &src);
    if (s == CQ_OK && !g->dry) s = cq_op_copy(g->be, &t, &src);
    if (s != CQ_OK) {
        free_rows(g, &t);
        return s;
    }
    free_rows(g, &n->cache);
    n->cache = t;
    n->lo = r;
    return CQ_OK;
}

void vs_release(vs_graph *g, int64_t row) {
    g->sink_need = row;
    (void)trim(g, g->count - 1); /* only shrinks; on failure the rows simply stay */
}

/* ---- layer compute: output rows [p, q) into y --------------------------------------------- */
static cq_status run_conv(vs_graph *g, const vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    const vs_node *x = &g->n[n->in[0]];
    int64_t first = p * n->stride - n->pad_t, last = (q - 1) * n->stride - n->pad_t + n->k;
    int64_t lo = clamp64(first, 0, x->H), hi = clamp64(last, 0, x->H);
    if (hi <= lo) return cq_fail(CQ_ERR_INVALID_ARG, "vae: convolution rows [%lld, %lld) read no input", (long long)p, (long long)q);
    cq_tensor xv;
    CQ_TRY(vs_rows(g, n->in[0], lo, hi, &xv));
    cq_conv2d_args a = {.y = y, .x = &xv, .w = n->w, .bias = n->b, .H = (int)(hi - lo), .W = (int)x->W, .kh = n->k,
                        .kw = n->k, .stride_y = n->stride, .stride_x = n->stride, .pad_l = n->pad_l, .pad_r = n->pad_r,
                        .pad_t = (int)(lo - first), .pad_b = (int)(last - hi), .mode = CQ_PAD_ZERO};
    return cq_op_conv2d(g->be, &a);
}

/* F.normalize(x, dim=C) * sqrt(C) * gamma = x / rms(x) * gamma; the eps of the
 * mean square reproduces F.normalize's clamp of the norm at 1e-12. */
static cq_status run_norm(vs_graph *g, const vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    cq_tensor xv;
    CQ_TRY(vs_rows(g, n->in[0], p, q, &xv));
    CQ_TRY(cq_op_rmsnorm(g->be, y, &xv, n->gamma, NULL, false, 1e-24f / (float)n->C));
    return n->silu ? cq_op_unary(g->be, y, y, CQ_UNARY_SILU, 0.0f, 0.0f) : CQ_OK;
}

static cq_status run_resample(vs_graph *g, const vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    const vs_node *x = &g->n[n->in[0]];
    int f = n->f;
    int64_t rows = (q - p) / f;
    cq_tensor xv, tmp;
    CQ_TRY(vs_rows(g, n->in[0], p / f, q / f, &xv));
    if (n->kind == VS_UPSAMPLE || n->plain) return cq_op_upsample_nearest(g->be, y, &xv, (int)rows, (int)x->W, f);
    CQ_TRY(alloc_rows(g, rows * x->W, n->C * f * f, &tmp));
    cq_status s = cq_op_gather_cols(g->be, &tmp, &xv, &n->idx, 1, 1.0f);
    if (s == CQ_OK) s = cq_op_pixel_shuffle(g->be, y, &tmp, (int)rows, (int)x->W, f);
    free_rows(g, &tmp);
    return s;
}

static cq_status run_avgdown(vs_graph *g, const vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    const vs_node *x = &g->n[n->in[0]];
    int f = n->f;
    cq_tensor xv, tmp;
    CQ_TRY(vs_rows(g, n->in[0], p * f, q * f, &xv));
    float scale = (float)(1.0 / n->group);
    if (f == 1) return cq_op_gather_cols(g->be, y, &xv, &n->idx, n->group, scale);
    CQ_TRY(alloc_rows(g, (q - p) * n->W, x->C * f * f, &tmp));
    cq_status s = cq_op_pixel_unshuffle(g->be, &tmp, &xv, (int)(q - p), (int)n->W, f);
    if (s == CQ_OK) s = cq_op_gather_cols(g->be, y, &tmp, &n->idx, n->group, scale);
    free_rows(g, &tmp);
    return s;
}

/* Pull every row of node n's input through the stream `step` rows at a time
 * (so the layers before it stay banded), copying them into dst (all rows,
 * [H*W, C], allocated here: dst comes zeroed). `report`: an attention node's
 * pull, which the caller's progress callback follows. */
static cq_status gather_input(vs_graph *g, vs_node *n, cq_tensor *dst, int64_t step, bool report) {
    const int in = n->in[0];
    const int64_t Hin = g->n[in].H, W = g->n[in].W;
    if (step <= 0 || step > Hin) step = Hin;
    for (int64_t r = 0; r < Hin; r += step) {
        int64_t r1 = CQ_MIN(Hin, r + step);
        CQ_TRY(vs_ensure(g, in, r1));
        /* dst is allocated once the first rows are there: whatever that took (statistics passes, checkpoints
         * further up) has come and gone by then */
        if (!dst->be) CQ_TRY(alloc_rows(g, Hin * W, n->C, dst));
        cq_tensor src, d = cq_tensor_rows_view(dst, r * W, (r1 - r) * W);
        CQ_TRY(vs_rows(g, in, r, r1, &src));
        if (!g->dry) CQ_TRY(cq_op_copy(g->be, &d, &src));
        n->need[0] = r1;
        CQ_TRY(trim(g, in));
        if (report && g->progress && g->progress((uint64_t)r1, (uint64_t)Hin, g->progress_user))
            return cq_fail(CQ_ERR_INTERRUPTED, "vae: cancelled");
    }
    return CQ_OK;
}

/* One head of C channels over every pixel: q/k/v = linear(h), o =
 * softmax(q kᵀ / sqrt(C)) v, then y = x + proj(o) with h = norm(x) (with a
 * gamma), or y = proj(o) with h the node's input (without: the caller adds
 * the residual). y is allocated here (it comes zeroed), last, as every
 * temporary is when it is needed and freed when it is not. */
static cq_status run_attn(vs_graph *g, vs_node *n, cq_tensor *y) {
    const vs_attn_w *a = n->attn;
    const bool bare = a->gamma == NULL, dry = g->dry;
    int64_t N = n->H * n->W, C = n->C;
    cq_tensor t[6]; /* normed x, q, k, v, o, x */
    memset(t, 0, sizeof t);
    cq_status s = gather_input(g, n, &t[5], g->attn_chunk, true);
    const cq_tensor *xv = &t[5], *h = bare ? xv : &t[0];
    for (int i = bare ? 1 : 0; i < 4 && s == CQ_OK; i++) s = alloc_rows(g, N, C, &t[i]);
    if (s == CQ_OK && !dry && !bare) s = cq_op_rmsnorm(g->be, &t[0], xv, a->gamma, NULL, false, 1e-24f / (float)C);
    if (s == CQ_OK && !dry) s = cq_op_linear(g->be, &t[1], h, a->wq, a->bq);
    if (s == CQ_OK && !dry) s = cq_op_linear(g->be, &t[2], h, a->wk, a->bk);
    if (s == CQ_OK && !dry) s = cq_op_linear(g->be, &t[3], h, a->wv, a->bv);
    free_rows(g, &t[0]);
    if (bare) free_rows(g, &t[5]); /* no residual to add here */
    if (s == CQ_OK) s = alloc_rows(g, N, C, &t[4]);
    if (s == CQ_OK && !dry) {
        cq_attn_args at = {.o = &t[4], .q = &t[1], .k = &t[2], .v = &t[3], .n_heads = 1, .n_kv_heads = 1,
                           .head_dim = (int)C};
        s = cq_op_attention(g->be, &at);
    }
    for (int i = 1; i < 4; i++) free_rows(g, &t[i]);
    if (s == CQ_OK) s = alloc_rows(g, N, C, y);
    if (s == CQ_OK && !dry && bare) s = cq_op_linear(g->be, y, &t[4], a->wo, a->bo);
    if (s == CQ_OK && !dry && !bare) s = cq_op_copy(g->be, y, xv);
    if (s == CQ_OK && !dry && !bare) {
        cq_matmul_args m = {.y = y, .x = &t[4], .w = a->wo, .bias = a->bo, .scale = 1.0f, .accumulate = true};
        s = cq_op_matmul(g->be, &m);
    }
    for (int i = 0; i < 6; i++) free_rows(g, &t[i]);
    return s;
}

/* y = x * scale + shift per channel (the group's statistics and the affine
 * weights folded into one pair, as the reference's kernel applies them),
 * then SiLU. */
static cq_status run_gnorm(vs_graph *g, const vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    cq_tensor xv;
    CQ_TRY(vs_rows(g, n->in[0], p, q, &xv));
    CQ_TRY(cq_op_binary(g->be, y, &xv, &n->scale, CQ_BINARY_MUL));
    CQ_TRY(cq_op_binary(g->be, y, y, &n->shift, CQ_BINARY_ADD));
    return n->silu ? cq_op_unary(g->be, y, y, CQ_UNARY_SILU, 0.0f, 0.0f) : CQ_OK;
}

static cq_status compute(vs_graph *g, vs_node *n, cq_tensor *y, int64_t p, int64_t q) {
    if (g->dry) return CQ_OK;
    switch (n->kind) {
    case VS_NORM: return run_norm(g, n, y, p, q);
    case VS_CONV: return run_conv(g, n, y, p, q);
    case VS_ADD: {
        cq_tensor a, b;
        CQ_TRY(vs_rows(g, n->in[0], p, q, &a));
        CQ_TRY(vs_rows(g, n->in[1], p, q, &b));
        return cq_op_binary(g->be, y, &a, &b, CQ_BINARY_ADD);
    }
    case VS_UPSAMPLE:
    case VS_DUPUP: return run_resample(g, n, y, p, q);
    case VS_AVGDOWN: return run_avgdown(g, n, y, p, q);
    case VS_GNORM: return run_gnorm(g, n, y, p, q);
    default: return cq_fail(CQ_ERR_INVALID_ARG, "vae: layer kind %d cannot be computed", (int)n->kind);
    }
}

/* A checkpoint is complete or statistics are known: rows protected nodes
 * below `id` kept for consumers that might have been reset may go. */
static cq_status release_protected(vs_graph *g, int id) {
    for (int i = 0; i < id; i++)
        if (is_protected(&g->n[i])) CQ_TRY(trim(g, i));
    return CQ_OK;
}

/* ---- group norm statistics --------------------------------------------------------------- */
/* The pass's scope: the input's ancestors (the input included) up to the
 * nearest protected nodes, which it does not reset. */
static cq_status push_pass(vs_graph *g, int id) {
    vs_pass *np = cq_reallocn(g->pass, (size_t)g->n_pass + 1, sizeof *np);
    if (!np) return CQ_ERR_NOMEM;
    g->pass = np;
    uint8_t *sc = cq_calloc((size_t)g->count, 1);
    if (!sc) return CQ_ERR_NOMEM;
    const int in = g->n[id].in[0];
    sc[in] = !is_protected(&g->n[in]);
    for (int i = in; i >= 0; i--)
        if (sc[i])
            for (int k = 0; k < g->n[i].n_in; k++)
                if (!is_protected(&g->n[g->n[i].in[k]])) sc[g->n[i].in[k]] = 1;
    g->pass[g->n_pass++] = (vs_pass){.gn = id, .scope = sc};
    return CQ_OK;
}

/* Forget what the innermost pass computed: the normalising pass computes it again. */
static void pop_pass(vs_graph *g) {
    vs_pass *p = &g->pass[--g->n_pass];
    for (int i = 0; i < g->count; i++) {
        if (!p->scope[i]) continue;
        vs_node *m = &g->n[i];
        free_rows(g, &m->cache);
        m->lo = m->hi = 0;
        m->need[0] = m->need[1] = 0;
    }
    cq_free(p->scope);
}

/* Chan et al.'s pairwise merge of per-row (mean, M2) pairs in row order, in
 * f64: the whole map's mean and biased variance per group, whatever the
 * bands were. Then scale = gamma / sqrt(var + eps), shift = beta - mean *
 * scale, rounded to f32 once each. */
static cq_status gn_finish(vs_graph *g, vs_node *n, const float *mom, int64_t rows, int64_t per_row) {
    const int64_t C = n->C, G = n->gn->groups, cg = C / G;
    float *sc = cq_mallocn((size_t)(2 * C), sizeof(float));
    if (!sc) return CQ_ERR_NOMEM;
    float *sh = sc + C;
    for (int64_t gi = 0; gi < G && !g->dry; gi++) {
        double cnt = 0.0, mean = 0.0, m2 = 0.0;
        const double nb = (double)(per_row * cg);
        for (int64_t r = 0; r < rows; r++) {
            const double mb = mom[r * 2 * G + 2 * gi], qb = mom[r * 2 * G + 2 * gi + 1];
            const double tot = cnt + nb, d = mb - mean;
            mean += d * (nb / tot);
            m2 += qb + d * d * (cnt * nb / tot);
            cnt = tot;
        }
        double var = m2 / cnt;
        if (var < 0.0) var = 0.0;
        const double inv = 1.0 / sqrt(var + (double)n->gn->eps);
        for (int64_t c = gi * cg; c < (gi + 1) * cg; c++) {
            const double k = inv * (n->gn->gamma ? (double)n->gn->gamma[c] : 1.0);
            sc[c] = (float)k;
            sh[c] = (float)((n->gn->beta ? (double)n->gn->beta[c] : 0.0) - mean * k);
        }
    }
    cq_status s = CQ_OK;
    cq_tensor *t[2] = {&n->scale, &n->shift};
    for (int i = 0; i < 2 && s == CQ_OK; i++) {
        s = alloc_rows(g, 1, C, t[i]); /* [1, C]: broadcast to every row */
        if (s == CQ_OK && !g->dry) s = cq_tensor_upload(t[i], i ? sh : sc, (size_t)C * sizeof(float));
    }
    cq_free(sc);
    return s;
}

/* The statistics of group norm `id`'s whole input: per-row moments of every
 * band, merged. With a band shorter than the input, a pass of its own (see
 * vae_stream.h); else the input is computed whole and kept. */
static cq_status gn_statistics(vs_graph *g, int id) {
    vs_node *n = &g->n[id];
    const int in = n->in[0];
    const int64_t H = g->n[in].H, W = g->n[in].W, G = n->gn->groups;
    const int64_t band = n->band > 0 && n->band < H ? n->band : H;
    const bool streamed = band < H;
    if (H * W > INT32_MAX) return cq_fail(CQ_ERR_SHAPE, "vae: a %lldx%lld map is too large", (long long)H, (long long)W);
    cq_tensor M;
    CQ_TRY(alloc_rows(g, H, 2 * G, &M));
    float *host = cq_calloc((size_t)(H * 2 * G), sizeof(float));
    cq_status s = host ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK && streamed) s = push_pass(g, id);
    const bool pushed = s == CQ_OK && streamed;
    for (int64_t r = 0; r < H && s == CQ_OK; r += band) {
        const int64_t r1 = CQ_MIN(H, r + band);
        cq_tensor xv, mv = cq_tensor_rows_view(&M, r, r1 - r);
        s = vs_ensure(g, in, r1);
        if (s == CQ_OK) s = vs_rows(g, in, r, r1, &xv);
        if (s == CQ_OK && !g->dry) s = cq_op_group_moments(g->be, &mv, &xv, (int)G, (int)W);
        if (s == CQ_OK && streamed) {
            n->need[0] = r1;
            s = trim(g, in);
        }
    }
    if (s == CQ_OK && !g->dry) s = cq_tensor_download(&M, host, (size_t)(H * 2 * G) * sizeof(float));
    if (pushed) {
        n->need[0] = 0;
        pop_pass(g);
    }
    free_rows(g, &M);
    if (s == CQ_OK) s = gn_finish(g, n, host, H, W);
    cq_free(host);
    if (s != CQ_OK) return s;
    n->have_stats = true;
    g->settled_ok = false;
    CQ_TRY(release_protected(g, id));
    if (g->work && g->work(g->work_user, (uint64_t)(H * W))) return cq_fail(CQ_ERR_INTERRUPTED, "vae: cancelled");
    return CQ_OK;
}

/* Multiply-adds of `rows` output rows of n (convolutions and attention: the cost). */
static uint64_t node_macs(const vs_graph *g, const vs_node *n, int64_t rows) {
    const double px = (double)rows * (double)n->W;
    if (n->kind == VS_CONV) return (uint64_t)(px * (double)n->C * (double)g->n[n->in[0]].C * n->k * n->k);
    if (n->kind == VS_ATTN) return (uint64_t)(px * (double)n->C * (4.0 * (double)n->C + 2.0 * px));
    return 0;
}

/* Attention and checkpoints: every row at once, the first time (they pull
 * their input themselves, band by band, and allocate their output last). */
static cq_status ensure_whole(vs_graph *g, int id) {
    vs_node *n = &g->n[id];
    cq_tensor y;
    memset(&y, 0, sizeof y);
    cq_status s = n->kind == VS_HOLD ? gather_input(g, n, &y, n->band, false) : run_attn(g, n, &y);
    if (s != CQ_OK) {
        free_rows(g, &y);
        return s;
    }
    g->macs += node_macs(g, n, n->H);
    free_rows(g, &n->cache);
    n->cache = y;
    n->lo = 0;
    n->hi = n->H;
    n->need[0] = in_lo(g, n, 0, n->H);
    CQ_TRY(trim(g, n->in[0]));
    return n->kind == VS_HOLD ? release_protected(g, id) : CQ_OK;
}

/* ---- evaluation ------------------------------------------------------------------------- */
/* Every node's consumers (node << 1 | input slot), made once the graph is complete (at the first request). */
static cq_status index_consumers(vs_graph *g) {
    int edges = 0;
    for (int i = 0; i < g->count; i++) edges += g->n[i].n_in;
    int *c = cq_mallocn((size_t)CQ_MAX(edges, 1), sizeof(int));
    if (!c) return CQ_ERR_NOMEM;
    cq_free(g->cons);
    g->cons = c;
    int e = 0;
    for (int i = 0; i < g->count; i++) {
        g->n[i].cons0 = e;
        g->n[i].n_cons = 0;
        for (int j = i + 1; j < g->count; j++)
            for (int s = 0; s < g->n[j].n_in; s++)
                if (g->n[j].in[s] == i) {
                    c[e++] = j << 1 | s;
                    g->n[i].n_cons++;
                }
    }
    g->cons_count = g->count;
    return CQ_OK;
}

cq_status vs_ensure(vs_graph *g, int id, int64_t b) {
    CQ_TRY(cq_check_cancel("the VAE")); /* polled per node and band: an atomic load */
    if (g->cons_count != g->count) CQ_TRY(index_consumers(g));
    vs_node *n = &g->n[id];
    if (b > n->H) b = n->H;
    if (b <= n->hi) return CQ_OK;
    if (n->align > 1) b = CQ_MIN(n->H, (b + n->align - 1) / n->align * n->align);
    if (n->kind == VS_GNORM && !n->have_stats) CQ_TRY(gn_statistics(g, id));
    if (n->kind == VS_ATTN || n->kind == VS_HOLD) return ensure_whole(g, id);
    for (int i = 0; i < n->n_in; i++) CQ_TRY(vs_ensure(g, n->in[i], in_hi(g, n, i, b)));
    int64_t keep = clamp64(retain_lo(g, id), n->lo, n->hi), old_hi = n->hi;
    cq_tensor nc, y, old;
    CQ_TRY(alloc_rows(g, (b - keep) * n->W, n->C, &nc));
    cq_status s = CQ_OK;
    if (old_hi > keep) {
        cq_tensor dst = cq_tensor_rows_view(&nc, 0, (old_hi - keep) * n->W);
        s = vs_rows(g, id, keep, old_hi, &old);
        if (s == CQ_OK && !g->dry) s = cq_op_copy(g->be, &dst, &old);
    }
    y = cq_tensor_rows_view(&nc, (old_hi - keep) * n->W, (b - old_hi) * n->W);
    if (s == CQ_OK) s = compute(g, n, &y, old_hi, b);
    if (s != CQ_OK) {
        free_rows(g, &nc);
        return s;
    }
    g->macs += node_macs(g, n, b - old_hi);
    free_rows(g, &n->cache);
    n->cache = nc;
    n->lo = keep;
    n->hi = b;
    for (int i = 0; i < n->n_in; i++) n->need[i] = in_lo(g, n, i, b);
    for (int i = 0; i < n->n_in; i++) CQ_TRY(trim(g, n->in[i]));
    return CQ_OK;
}
