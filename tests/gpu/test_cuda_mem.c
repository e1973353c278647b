/*
 * test_cuda_mem.c — the CUDA backend under a device-memory budget, and its
 * COMPACT weights (label gpu):
 *  - weights bound COMPACT (q8_2f, q8_row, q4tp, q4_block, bf16) give the
 *    PLANES results bit for bit (memcmp): matmul (plain, SwiGLU with two
 *    compact weights, fused SwiGLU), conv2d (3x3, strided, 1x1; the kernel
 *    4-D where the codec allows, else [Cout, Cin*kh*kw]), get_rows and
 *    copy, directly and inside a recording replayed on new inputs; a bad
 *    get_rows id on a compact table is the usual deferred error;
 *  - cq_backend_weight_cost equals what binding adds to mem_in_use and
 *    weight_bytes, in both modes, and a compact weight's slot equals what its
 *    first use adds;
 *  - a request beyond the budget fails with CQ_ERR_NOMEM and the message, the
 *    cache is released before refusing, and the backend goes on working;
 *  - trim leaves in_use + cached at the live bytes, the driver's free memory
 *    rises by what was released, and a recording made before it goes stale;
 *  - a pack's weights bound with their hash check folded into the upload:
 *    intact ones match unchecked binds, damaged ones are refused and freed.
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "cmf_testfile.h"
#include "backends/cuda/cuda_cost.h"
#include "cli/env.h"
#include "codec/codec.h"
#include "format/cmf.h"
#include "ops/ops.h"
#include "testutil.h"

static tu_rng g_rng;

#define MIB ((uint64_t)1 << 20)

/* The shapes of the ops compared: x [M, K], W [N, K], an image [IH*IW, CIN] and its kernels [COUT, CIN, k, k]. */
enum { M = 9, N = 48, K = 96, CIN = 32, COUT = 8, IH = 5, IW = 6, NIDS = 6 };
#define CIN_ ((uint64_t)CIN)
#define COUT_ ((uint64_t)COUT)

/* The options the CORTIQ_CUDA_* variables give, with a budget (0: the default). */
static cq_backend *open_be(uint64_t budget) {
    cq_backend_opts o;
    if (cq_env_backend_opts("cuda", &o) != CQ_OK) memset(&o, 0, sizeof o);
    o.cuda.mem_budget = budget;
    cq_backend *be = NULL;
    cq_status s = cq_backend_cuda_open(-1, &o.cuda, &be);
    if (s != CQ_OK) fail_msg("cuda backend: %s", cq_last_error());
    return be;
}

static cq_backend_stats stats(cq_backend *be) {
    cq_backend_stats st;
    memset(&st, 0, sizeof st);
    cq_status s = cq_backend_get_stats(be, &st, false);
    if (s != CQ_OK) fail_msg("stats: %s", cq_last_error());
    return st;
}

static cq_tensor_view view_of(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *p, uint64_t nbytes) {
    return tu_view(dt, ndim, shape, p, nbytes);
}

/* Random values (rows of different magnitudes) encoded with the codec's encoder. */
static uint8_t *encode_random(cq_dtype dt, int ndim, const uint64_t *shape, uint64_t *nbytes) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    assert_int_equal(cq_codec_nbytes(dt, ndim, shape, nbytes), CQ_OK);
    float *v = malloc(sizeof(float) * n);
    tu_fill_normal(&g_rng, v, n, 0.7f);
    for (uint64_t i = 0; i < n; i++) v[i] *= 0.25f + (float)((i / shape[ndim - 1]) % 7) * 0.5f;
    uint8_t *p = malloc(*nbytes);
    assert_int_equal(cq_codec_quantize(dt, ndim, shape, v, p, *nbytes), CQ_OK);
    free(v);
    return p;
}

/* A convolution kernel [COUT, CIN, k, k], or [COUT, CIN*k*k] for the codecs that are 2-D only (q8_row, q8_2f,
 * q4tp: conv2d takes that layout too, through the matmul's operand path instead of the tap-major plane). */
static int conv_shape(cq_dtype dt, int k, uint64_t *shape) {
    uint64_t nb;
    const uint64_t s4[4] = {COUT_, CIN_, (uint64_t)k, (uint64_t)k};
    memcpy(shape, s4, sizeof s4);
    if (cq_codec_nbytes(dt, 4, s4, &nb) == CQ_OK) return 4;
    shape[1] = CIN_ * (uint64_t)(k * k);
    return 2;
}

static void bind_in(cq_backend *be, cq_weight_mode mode, const cq_tensor_view *v, cq_tensor *t) {
    assert_int_equal(cq_backend_set_weight_mode(be, mode), CQ_OK);
    cq_status s = cq_tensor_bind_weight(be, v, t);
    if (s != CQ_OK) fail_msg("bind %s %s: %s", cq_dtype_name(v->dtype), cq_weight_mode_name(mode), cq_last_error());
    assert_int_equal(cq_backend_set_weight_mode(be, CQ_WEIGHTS_DEFAULT), CQ_OK);
}

static cq_tensor act(cq_backend *be, int64_t rows, int64_t cols, const float *data) {
    cq_tensor t;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, rows, cols, &t), CQ_OK);
    if (data) assert_int_equal(cq_tensor_upload(&t, data, sizeof(float) * (size_t)(rows * cols)), CQ_OK);
    return t;
}

static float *download(cq_tensor *t) {
    size_t n = (size_t)cq_tensor_nelem(t);
    float *h = malloc(sizeof(float) * n);
    cq_status s = cq_tensor_download(t, h, sizeof(float) * n);
    if (s != CQ_OK) fail_msg("download: %s", cq_last_error());
    return h;
}

static void expect_same(cq_tensor *a, cq_tensor *b, const char *what, cq_dtype dt) {
    float *x = download(a), *y = download(b);
    size_t n = (size_t)cq_tensor_nelem(a);
    assert_int_equal(n, (size_t)cq_tensor_nelem(b));
    if (memcmp(x, y, sizeof(float) * n)) {
        size_t i = 0;
        while (i < n && !memcmp(&x[i], &y[i], 4)) i++;
        fail_msg("%s %s: compact differs from planes at element %zu: %.9g vs %.9g", cq_dtype_name(dt), what, i, y[i],
                 x[i]);
    }
    bool nonzero = false;
    for (size_t i = 0; i < n; i++) nonzero |= x[i] != 0.0f;
    if (!nonzero) fail_msg("%s %s: an all-zero output proves nothing", cq_dtype_name(dt), what);
    free(x);
    free(y);
}

/* ---- the ops the bit-for-bit comparison runs, on one weight set --------------------------------------------- */

typedef struct wset {
    cq_tensor w, w2, conv3, conv1; /* [N, K], [N, K], [COUT, CIN, 3, 3], [COUT, CIN, 1, 1] */
} wset;

static void bind_set(cq_backend *be, cq_weight_mode mode, const cq_tensor_view *vw, const cq_tensor_view *vw2,
                     const cq_tensor_view *v3, const cq_tensor_view *v1, wset *w) {
    bind_in(be, mode, vw, &w->w);
    bind_in(be, mode, vw2, &w->w2);
    bind_in(be, mode, v3, &w->conv3);
    bind_in(be, mode, v1, &w->conv1);
}

typedef struct outs {
    cq_tensor lin, swi, fused, c3, c3s, c1, rows;
} outs;

static void outs_alloc(cq_backend *be, outs *o) {
    o->lin = act(be, M, N, NULL);
    o->swi = act(be, M, N, NULL);
    o->fused = act(be, M, N / 2, NULL);
    o->c3 = act(be, IH * IW, COUT, NULL);
    o->c3s = act(be, ((IH + 2 - 3) / 2 + 1) * ((IW + 2 - 3) / 2 + 1), COUT, NULL);
    o->c1 = act(be, IH * IW, COUT, NULL);
    o->rows = act(be, NIDS, K, NULL);
}

static void outs_zero(outs *o) {
    cq_tensor *t[] = {&o->lin, &o->swi, &o->fused, &o->c3, &o->c3s, &o->c1, &o->rows};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) assert_int_equal(cq_tensor_zero(t[i]), CQ_OK);
}

static void outs_free(outs *o) {
    cq_tensor *t[] = {&o->lin, &o->swi, &o->fused, &o->c3, &o->c3s, &o->c1, &o->rows};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
}

static cq_status conv(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                      int k, int stride) {
    const int pad = k / 2;
    cq_conv2d_args a = {.y = y, .x = x, .w = w, .bias = bias, .H = IH, .W = IW, .kh = k, .kw = k, .stride_y = stride,
                        .stride_x = stride, .pad_l = pad, .pad_r = pad, .pad_t = pad, .pad_b = pad};
    return cq_op_conv2d(be, &a);
}

/* Every op of the comparison; no upload, so it can be recorded. */
static cq_status run_ops(cq_backend *be, const wset *w, outs *o, const cq_tensor *x, const cq_tensor *img,
                         const cq_tensor *bias, const cq_tensor *ids) {
    CQ_TRY(cq_op_linear(be, &o->lin, x, &w->w, bias));
    cq_matmul_args s = {.y = &o->swi, .x = x, .w = &w->w, .w2 = &w->w2, .bias = bias, .bias2 = bias,
                        .act = CQ_ACT_SWIGLU};
    CQ_TRY(cq_op_matmul(be, &s));
    cq_matmul_args f = {.y = &o->fused, .x = x, .w = &w->w, .act = CQ_ACT_SWIGLU};
    CQ_TRY(cq_op_matmul(be, &f));
    CQ_TRY(conv(be, &o->c3, img, &w->conv3, NULL, 3, 1));
    CQ_TRY(conv(be, &o->c3s, img, &w->conv3, NULL, 3, 2));
    CQ_TRY(conv(be, &o->c1, img, &w->conv1, NULL, 1, 1));
    return cq_op_get_rows(be, &o->rows, &w->w, ids);
}

static void expect_outs_same(outs *p, outs *c, cq_dtype dt, const char *when) {
    char what[64];
    const struct {
        const char *name;
        cq_tensor *a, *b;
    } k[] = {{"linear", &p->lin, &c->lin},     {"swiglu", &p->swi, &c->swi}, {"fused swiglu", &p->fused, &c->fused},
             {"conv 3x3", &p->c3, &c->c3},     {"conv 3x3 stride 2", &p->c3s, &c->c3s},
             {"conv 1x1", &p->c1, &c->c1},     {"get_rows", &p->rows, &c->rows}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
        snprintf(what, sizeof what, "%s (%s)", k[i].name, when);
        expect_same(k[i].a, k[i].b, what, dt);
    }
}

static void test_compact_bitexact(void **state) {
    (void)state;
    cq_backend *be = open_be(0);
    static const cq_dtype codecs[] = {CQ_DTYPE_Q8_2F, CQ_DTYPE_Q8_ROW, CQ_DTYPE_Q4TP, CQ_DTYPE_Q4_BLOCK, CQ_DTYPE_BF16};
    const uint64_t s2[2] = {N, K};
    float xh[M * K], x2h[M * K], imgh[IH * IW * CIN], img2h[IH * IW * CIN], bh[N];
    const int32_t idh[NIDS] = {47, 0, 3, 3, 20, 11};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(codecs); ci++) {
        const cq_dtype dt = codecs[ci];
        tu_fill_normal(&g_rng, xh, M * K, 1.0f);
        tu_fill_normal(&g_rng, x2h, M * K, 3.0f);
        tu_fill_normal(&g_rng, imgh, IH * IW * CIN, 1.0f);
        tu_fill_normal(&g_rng, img2h, IH * IW * CIN, 0.5f);
        tu_fill_normal(&g_rng, bh, N, 0.1f);
        uint64_t nb[4], s3[4], s1[4];
        const int nd3 = conv_shape(dt, 3, s3), nd1 = conv_shape(dt, 1, s1);
        uint8_t *pw = encode_random(dt, 2, s2, &nb[0]), *pw2 = encode_random(dt, 2, s2, &nb[1]);
        uint8_t *p3 = encode_random(dt, nd3, s3, &nb[2]), *p1 = encode_random(dt, nd1, s1, &nb[3]);
        const cq_tensor_view vw = view_of(dt, 2, s2, pw, nb[0]), vw2 = view_of(dt, 2, s2, pw2, nb[1]);
        const cq_tensor_view v3 = view_of(dt, nd3, s3, p3, nb[2]), v1 = view_of(dt, nd1, s1, p1, nb[3]);
        /* every one of these codecs is kept compact (bf16's plane with its scales is larger than its payload) */
        uint64_t cb, cs, pb, ps;
        assert_int_equal(cq_backend_weight_cost(be, &vw, CQ_WEIGHTS_COMPACT, &cb, &cs), CQ_OK);
        assert_int_equal(cq_backend_weight_cost(be, &vw, CQ_WEIGHTS_PLANES, &pb, &ps), CQ_OK);
        if (!(cb < pb && cs == pb && ps == 0))
            fail_msg("%s: compact %llu + slot %llu, planes %llu + %llu", cq_dtype_name(dt), (unsigned long long)cb,
                     (unsigned long long)cs, (unsigned long long)pb, (unsigned long long)ps);
        wset wp, wc;
        bind_set(be, CQ_WEIGHTS_PLANES, &vw, &vw2, &v3, &v1, &wp);
        bind_set(be, CQ_WEIGHTS_COMPACT, &vw, &vw2, &v3, &v1, &wc);
        cq_tensor x = act(be, M, K, xh), img = act(be, IH * IW, CIN, imgh), bias, ids;
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, (const int64_t[]){N}, &bias), CQ_OK);
        assert_int_equal(cq_tensor_upload(&bias, bh, sizeof bh), CQ_OK);
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, (const int64_t[]){NIDS}, &ids), CQ_OK);
        assert_int_equal(cq_tensor_upload(&ids, idh, sizeof idh), CQ_OK);
        outs op, oc;
        outs_alloc(be, &op);
        outs_alloc(be, &oc);
        cq_status s = run_ops(be, &wp, &op, &x, &img, &bias, &ids);
        if (s != CQ_OK) fail_msg("%s planes: %s", cq_dtype_name(dt), cq_last_error());
        s = run_ops(be, &wc, &oc, &x, &img, &bias, &ids);
        if (s != CQ_OK) fail_msg("%s compact: %s", cq_dtype_name(dt), cq_last_error());
        expect_outs_same(&op, &oc, dt, "direct");
        /* a 2-D float weight read back whole (copy) */
        if (dt == CQ_DTYPE_BF16) {
            cq_tensor yp = act(be, N, K, NULL), yc = act(be, N, K, NULL);
            assert_int_equal(cq_op_copy(be, &yp, &wp.w), CQ_OK);
            assert_int_equal(cq_op_copy(be, &yc, &wc.w), CQ_OK);
            expect_same(&yp, &yc, "copy", dt);
            cq_tensor_free(&yp);
            cq_tensor_free(&yc);
        }
        /* recorded (the first run sized every slot), replayed on the first inputs and on new ones */
        if (cq_backend_can_record(be)) {
            cq_recording *rec = NULL;
            assert_int_equal(cq_backend_record_begin(be), CQ_OK);
            s = run_ops(be, &wc, &oc, &x, &img, &bias, &ids);
            if (s != CQ_OK) fail_msg("%s compact, recording: %s", cq_dtype_name(dt), cq_last_error());
            assert_int_equal(cq_backend_record_end(be, true, &rec), CQ_OK);
            outs_zero(&oc);
            assert_int_equal(cq_recording_replay(rec), CQ_OK);
            expect_outs_same(&op, &oc, dt, "replayed");
            assert_int_equal(cq_tensor_upload(&x, x2h, sizeof x2h), CQ_OK);
            assert_int_equal(cq_tensor_upload(&img, img2h, sizeof img2h), CQ_OK);
            assert_int_equal(run_ops(be, &wp, &op, &x, &img, &bias, &ids), CQ_OK);
            outs_zero(&oc);
            assert_int_equal(cq_recording_replay(rec), CQ_OK);
            expect_outs_same(&op, &oc, dt, "replayed on new inputs");
            cq_recording_free(rec);
        } else {
            print_message("%s: recordings are off (CORTIQ_CUDA_* settings): replay not checked\n", cq_dtype_name(dt));
        }
        /* a bad id on a compact table: the deferred error get_rows always gives */
        const int32_t bad[NIDS] = {1, 2, N, 3, 4, 5};
        assert_int_equal(cq_tensor_upload(&ids, bad, sizeof bad), CQ_OK);
        assert_int_equal(cq_op_get_rows(be, &oc.rows, &wc.w, &ids), CQ_OK);
        assert_int_equal(cq_backend_sync(be), CQ_ERR_BOUNDS);
        if (!strstr(cq_last_error(), "get_rows: id 48 at position 2"))
            fail_msg("%s: bad id reported as: %s", cq_dtype_name(dt), cq_last_error());
        assert_int_equal(cq_backend_sync(be), CQ_OK);
        outs_free(&op);
        outs_free(&oc);
        cq_tensor *all[] = {&wp.w, &wp.w2, &wp.conv3, &wp.conv1, &wc.w, &wc.w2, &wc.conv3, &wc.conv1, &x, &img, &bias,
                            &ids};
        for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
        free(pw);
        free(pw2);
        free(p3);
        free(p1);
    }
    cq_backend_free(be);
}

/* STREAMED weights: the results of planes bit for bit, nothing on the device while bound, each use copying the
 * payload once (get_rows reads its rows from host memory), no recordings while bound, and set_stream_keep's
 * share kept on the device, spread evenly. */
static void test_streamed_bitexact(void **state) {
    (void)state;
    cq_backend *be = open_be(0);
    static const cq_dtype codecs[] = {CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4TP, CQ_DTYPE_BF16};
    const uint64_t s2[2] = {N, K};
    float xh[M * K], imgh[IH * IW * CIN], bh[N];
    const int32_t idh[NIDS] = {47, 0, 3, 3, 20, 11};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(codecs); ci++) {
        const cq_dtype dt = codecs[ci];
        tu_fill_normal(&g_rng, xh, M * K, 1.0f);
        tu_fill_normal(&g_rng, imgh, IH * IW * CIN, 1.0f);
        tu_fill_normal(&g_rng, bh, N, 0.1f);
        uint64_t nb[4], s3[4], s1[4];
        const int nd3 = conv_shape(dt, 3, s3), nd1 = conv_shape(dt, 1, s1);
        uint8_t *pw = encode_random(dt, 2, s2, &nb[0]), *pw2 = encode_random(dt, 2, s2, &nb[1]);
        uint8_t *p3 = encode_random(dt, nd3, s3, &nb[2]), *p1 = encode_random(dt, nd1, s1, &nb[3]);
        const cq_tensor_view vw = view_of(dt, 2, s2, pw, nb[0]), vw2 = view_of(dt, 2, s2, pw2, nb[1]);
        const cq_tensor_view v3 = view_of(dt, nd3, s3, p3, nb[2]), v1 = view_of(dt, nd1, s1, p1, nb[3]);
        wset wp, ws;
        bind_set(be, CQ_WEIGHTS_PLANES, &vw, &vw2, &v3, &v1, &wp);
        const cq_backend_stats st0 = stats(be);
        assert_true(cq_backend_can_record(be));
        assert_int_equal(cq_backend_set_stream_keep(be, 0, 0), CQ_OK);
        bind_set(be, CQ_WEIGHTS_STREAMED, &vw, &vw2, &v3, &v1, &ws);
        const cq_backend_stats st1 = stats(be);
        assert_int_equal(st1.weight_bytes, st0.weight_bytes); /* nothing of them on the device */
        assert_int_equal(st1.host_pinned - st0.host_pinned, nb[0] + nb[1] + nb[2] + nb[3]);
        assert_false(cq_backend_can_record(be));
        cq_tensor x = act(be, M, K, xh), img = act(be, IH * IW, CIN, imgh), bias, ids;
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, (const int64_t[]){N}, &bias), CQ_OK);
        assert_int_equal(cq_tensor_upload(&bias, bh, sizeof bh), CQ_OK);
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, (const int64_t[]){NIDS}, &ids), CQ_OK);
        assert_int_equal(cq_tensor_upload(&ids, idh, sizeof idh), CQ_OK);
        outs op, os;
        outs_alloc(be, &op);
        outs_alloc(be, &os);
        cq_status s = run_ops(be, &wp, &op, &x, &img, &bias, &ids);
        if (s != CQ_OK) fail_msg("%s planes: %s", cq_dtype_name(dt), cq_last_error());
        for (int pass = 0; pass < 2; pass++) { /* the second pass reuses the slots the first made */
            const uint64_t before = stats(be).streamed_bytes;
            outs_zero(&os);
            s = run_ops(be, &ws, &os, &x, &img, &bias, &ids);
            if (s != CQ_OK) fail_msg("%s streamed: %s", cq_dtype_name(dt), cq_last_error());
            expect_outs_same(&op, &os, dt, pass ? "streamed, again" : "streamed");
            /* linear, both SwiGLU halves, the fused SwiGLU, two 3x3 convolutions and a 1x1 */
            const uint64_t moved = stats(be).streamed_bytes - before, want = 3 * nb[0] + nb[1] + 2 * nb[2] + nb[3];
            if (moved != want)
                fail_msg("%s: %llu bytes streamed, want %llu", cq_dtype_name(dt), (unsigned long long)moved,
                         (unsigned long long)want);
        }
        /* a bad id on a streamed table: the same deferred error */
        const int32_t bad[NIDS] = {1, 2, N, 3, 4, 5};
        assert_int_equal(cq_tensor_upload(&ids, bad, sizeof bad), CQ_OK);
        assert_int_equal(cq_op_get_rows(be, &os.rows, &ws.w, &ids), CQ_OK);
        assert_int_equal(cq_backend_sync(be), CQ_ERR_BOUNDS);
        assert_non_null(strstr(cq_last_error(), "get_rows: id 48 at position 2"));
        assert_int_equal(cq_backend_sync(be), CQ_OK);
        outs_free(&op);
        outs_free(&os);
        cq_tensor *all[] = {&wp.w, &wp.w2, &wp.conv3, &wp.conv1, &ws.w, &ws.w2, &ws.conv3, &ws.conv1, &x, &img, &bias,
                            &ids};
        for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
        assert_int_equal(stats(be).host_pinned, st0.host_pinned);
        assert_true(cq_backend_can_record(be));
        free(pw2);
        free(p3);
        free(p1);

        /* keep 2 of 4 equal weights: streamed, kept, streamed, kept */
        uint64_t cb, cs;
        assert_int_equal(cq_backend_weight_cost(be, &vw, CQ_WEIGHTS_COMPACT, &cb, &cs), CQ_OK);
        assert_int_equal(cq_backend_set_stream_keep(be, 2 * cb, 4 * cb), CQ_OK);
        cq_tensor four[4];
        for (int i = 0; i < 4; i++) {
            const cq_backend_stats a = stats(be);
            bind_in(be, CQ_WEIGHTS_STREAMED, &vw, &four[i]);
            const cq_backend_stats b = stats(be);
            const bool kept = b.weight_bytes > a.weight_bytes;
            if (kept != (i % 2 == 1))
                fail_msg("%s: weight %d of 4 %s", cq_dtype_name(dt), i, kept ? "kept" : "streamed");
            assert_int_equal(kept ? b.weight_bytes - a.weight_bytes : b.host_pinned - a.host_pinned, kept ? cb : nb[0]);
        }
        for (int i = 0; i < 4; i++) cq_tensor_free(&four[i]);
        free(pw);
    }
    assert_int_equal(cq_backend_trim(be), CQ_OK);
    cq_backend_free(be);
}

/* ---- weight_cost against the allocator ---------------------------------------------------------------- */
/* Binding `v` in `mode` adds exactly the cost to mem_in_use and weight_bytes, and releasing it takes it back. */
static void expect_bind_cost(cq_backend *be, const cq_tensor_view *v, cq_weight_mode mode, cq_tensor *t) {
    uint64_t bytes, slot;
    assert_int_equal(cq_backend_weight_cost(be, v, mode, &bytes, &slot), CQ_OK);
    cq_tensor warm; /* the first bind may grow the upload slot or make the q4tp table: not the weight's cost */
    bind_in(be, mode, v, &warm);
    cq_tensor_free(&warm);
    const cq_backend_stats a = stats(be);
    bind_in(be, mode, v, t);
    const cq_backend_stats b = stats(be);
    if (b.mem_in_use - a.mem_in_use != bytes || b.weight_bytes - a.weight_bytes != bytes)
        fail_msg("%s [%llu, ...] %s: cost %llu bytes, binding added %llu in use, %llu of weights",
                 cq_dtype_name(v->dtype), (unsigned long long)v->shape[0], cq_weight_mode_name(mode),
                 (unsigned long long)bytes, (unsigned long long)(b.mem_in_use - a.mem_in_use),
                 (unsigned long long)(b.weight_bytes - a.weight_bytes));
}

/* A compact weight's slot is what its first use adds, once the activation slots are sized by the same op on the
 * plane (trim first: no slot of an earlier weight is left). */
static void expect_slot(cq_backend *be, const cq_tensor_view *v, cq_tensor *wp, cq_tensor *wc, bool is_conv) {
    uint64_t bytes, slot;
    assert_int_equal(cq_backend_weight_cost(be, v, CQ_WEIGHTS_COMPACT, &bytes, &slot), CQ_OK);
    assert_int_equal(cq_backend_trim(be), CQ_OK);
    float xh[IH * IW * K];
    tu_fill_normal(&g_rng, xh, CQ_ARRAY_LEN(xh), 1.0f);
    cq_tensor x = is_conv ? act(be, IH * IW, CIN, xh) : act(be, M, K, xh);
    cq_tensor y = is_conv ? act(be, IH * IW, COUT, NULL) : act(be, M, N, NULL);
    assert_int_equal(is_conv ? conv(be, &y, &x, wp, NULL, 3, 1) : cq_op_linear(be, &y, &x, wp, NULL), CQ_OK);
    const cq_backend_stats a = stats(be);
    assert_int_equal(is_conv ? conv(be, &y, &x, wc, NULL, 3, 1) : cq_op_linear(be, &y, &x, wc, NULL), CQ_OK);
    const cq_backend_stats b = stats(be);
    if (b.mem_in_use - a.mem_in_use != slot)
        fail_msg("%s %s: slot %llu bytes, the first use added %llu", cq_dtype_name(v->dtype), is_conv ? "conv" : "matmul",
                 (unsigned long long)slot, (unsigned long long)(b.mem_in_use - a.mem_in_use));
    /* a second use reuses it */
    assert_int_equal(is_conv ? conv(be, &y, &x, wc, NULL, 3, 1) : cq_op_linear(be, &y, &x, wc, NULL), CQ_OK);
    assert_int_equal(stats(be).mem_in_use, b.mem_in_use);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
}

static void test_weight_cost_measured(void **state) {
    (void)state;
    cq_backend *be = open_be(0);
    static const cq_dtype codecs[] = {CQ_DTYPE_Q8_2F, CQ_DTYPE_Q8_ROW, CQ_DTYPE_Q4TP, CQ_DTYPE_Q4_BLOCK,
                                      CQ_DTYPE_BF16,  CQ_DTYPE_F32};
    const uint64_t s2[2] = {N, K}, s1[1] = {1000};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(codecs); ci++) {
        const cq_dtype dt = codecs[ci];
        uint64_t nb2, nb3, s3[4];
        const int nd3 = conv_shape(dt, 3, s3);
        uint8_t *p2 = encode_random(dt, 2, s2, &nb2), *p3 = encode_random(dt, nd3, s3, &nb3);
        const cq_tensor_view v2 = view_of(dt, 2, s2, p2, nb2), v3 = view_of(dt, nd3, s3, p3, nb3);
        cq_tensor w2p, w2c, w3p, w3c;
        expect_bind_cost(be, &v2, CQ_WEIGHTS_PLANES, &w2p);
        expect_bind_cost(be, &v2, CQ_WEIGHTS_COMPACT, &w2c);
        expect_bind_cost(be, &v3, CQ_WEIGHTS_PLANES, &w3p);
        expect_bind_cost(be, &v3, CQ_WEIGHTS_COMPACT, &w3c);
        uint64_t bytes, slot;
        assert_int_equal(cq_backend_weight_cost(be, &v2, CQ_WEIGHTS_COMPACT, &bytes, &slot), CQ_OK);
        if (slot) { /* f32 stays a plane: no slot */
            expect_slot(be, &v2, &w2p, &w2c, false);
            expect_slot(be, &v3, &w3p, &w3c, true);
        } else {
            assert_int_equal(dt, CQ_DTYPE_F32);
        }
        /* releasing gives back what binding took */
        const cq_backend_stats a = stats(be);
        cq_tensor_free(&w2c);
        const cq_backend_stats b = stats(be);
        assert_int_equal(a.mem_in_use - b.mem_in_use, bytes);
        assert_int_equal(a.weight_bytes - b.weight_bytes, bytes);
        cq_tensor_free(&w2p);
        cq_tensor_free(&w3p);
        cq_tensor_free(&w3c);
        free(p2);
        free(p3);
    }
    /* a 1-D vector: its payload in both modes */
    float vh[1000];
    tu_fill_normal(&g_rng, vh, 1000, 1.0f);
    const cq_tensor_view v1 = view_of(CQ_DTYPE_F32, 1, s1, (const uint8_t *)vh, sizeof vh);
    cq_tensor t1, t2;
    expect_bind_cost(be, &v1, CQ_WEIGHTS_PLANES, &t1);
    expect_bind_cost(be, &v1, CQ_WEIGHTS_COMPACT, &t2);
    cq_tensor_free(&t1);
    cq_tensor_free(&t2);
    cq_backend_free(be);
}

/* ---- the budget -------------------------------------------------------------------------------------- */
static void test_budget(void **state) {
    (void)state;
    /* the default: what the device had free at creation, less 5 % of it and 256 MiB */
    cq_backend *dflt = open_be(0);
    const cq_backend_stats d = stats(dflt);
    const uint64_t budget = cq_backend_mem_budget(dflt);
    if (!(budget > 0 && budget <= d.device_total - d.device_total / 20 - 256 * MIB))
        fail_msg("default budget %llu of a %llu-byte device", (unsigned long long)budget,
                 (unsigned long long)d.device_total);
    cq_backend_free(dflt);

    cq_backend *be = open_be(256 * MIB);
    assert_int_equal(cq_backend_mem_budget(be), 256 * MIB);
    const cq_backend_stats s0 = stats(be);
    /* a 512 MiB buffer cannot fit a 256 MiB budget: refused with the figures, nothing allocated */
    cq_tensor big;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 128, (int64_t)MIB, &big), CQ_ERR_NOMEM);
    const char *msg = cq_last_error();
    if (!strstr(msg, "more needed for a 512.0 MiB buffer") || !strstr(msg, "of the 256.0 MiB budget in use") ||
        !strstr(msg, "raise --gpu-memory"))
        fail_msg("the refusal says: %s", msg);
    const cq_backend_stats s1 = stats(be);
    assert_int_equal(s1.mem_in_use, s0.mem_in_use);
    assert_int_equal(s1.device_allocs, s0.device_allocs);
    /* the cache is released before refusing: 120 MiB cached and 140 MiB more pass the budget together, not
     * once the cache is gone (both are whole size classes: 2 MiB steps above 8 MiB) */
    cq_tensor a, b, c;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 30, (int64_t)MIB, &a), CQ_OK);
    cq_tensor_free(&a);
    assert_int_equal(stats(be).mem_cached, 120 * MIB);
    cq_status st = cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 35, (int64_t)MIB, &b);
    if (st != CQ_OK) fail_msg("140 MiB with 120 MiB cached under 256 MiB: %s", cq_last_error());
    const cq_backend_stats s2 = stats(be);
    assert_int_equal(s2.mem_cached, 0);
    assert_int_equal(s2.mem_in_use, s0.mem_in_use + 140 * MIB);
    /* and with the live bytes alone too many, refused, naming the weights' share */
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 50, (int64_t)MIB, &c), CQ_ERR_NOMEM);
    if (!strstr(cq_last_error(), "(weights 0 B)")) fail_msg("the refusal says: %s", cq_last_error());
    /* the backend still works for a smaller request */
    float xh[M * K], got[M * N], want[M * N];
    tu_fill_normal(&g_rng, xh, M * K, 1.0f);
    const uint64_t s2d[2] = {N, K};
    uint64_t nb;
    uint8_t *pw = encode_random(CQ_DTYPE_Q8_2F, 2, s2d, &nb);
    const cq_tensor_view vw = view_of(CQ_DTYPE_Q8_2F, 2, s2d, pw, nb);
    cq_tensor w, x = act(be, M, K, xh), y = act(be, M, N, NULL);
    bind_in(be, CQ_WEIGHTS_COMPACT, &vw, &w);
    assert_int_equal(cq_op_linear(be, &y, &x, &w, NULL), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
    /* the same product through the weight's plane (one backend: the same GEMM plan) */
    cq_tensor w_p;
    bind_in(be, CQ_WEIGHTS_PLANES, &vw, &w_p);
    assert_int_equal(cq_op_linear(be, &y, &x, &w_p, NULL), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, want, sizeof want), CQ_OK);
    assert_memory_equal(got, want, sizeof got);
    cq_tensor_free(&w_p);
    cq_tensor_free(&w);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
    cq_tensor_free(&b);
    free(pw);
    cq_backend_free(be);
}

/* ---- the hash folded into the upload ---------------------------------------------------------------- */
/* A pack's weights bound with their check: the CUDA backend hashes each payload while it copies it (planes,
 * compact, streamed; a payload over the parallel copy threshold with a tail that is not a whole word), so a
 * bind reads the file's pages once. An intact pack binds, each tensor is then recorded as checked, and its
 * products equal those of the same bytes bound without a check (memcmp); a byte flipped anywhere (here the
 * last, inside the tail word, and one in the middle of a small tensor) is refused with the check's message,
 * and the failed binds give back every device and pinned byte they took. */
static void test_bind_hashed(void **state) {
    (void)state;
    enum { BR = 1024, BC = 1101 }; /* 4.3 MiB of f32: split over the copy threads; 4404 bytes a row */
    const uint64_t sw[2] = {N, K};
    uint64_t nb_w;
    uint8_t *pw = encode_random(CQ_DTYPE_Q8_2F, 2, sw, &nb_w); /* streams when streamed */
    const size_t nb_big = (size_t)BR * BC * 4, off_big = ((size_t)nb_w + 63) & ~(size_t)63;
    uint8_t *data = calloc(1, off_big + nb_big);
    assert_non_null(data);
    memcpy(data, pw, nb_w);
    free(pw);
    tu_fill_normal(&g_rng, (float *)(data + off_big), (size_t)BR * BC, 0.1f);
    tf_file f;
    memset(&f, 0, sizeof f);
    f.nt = 2;
    f.t[0] = (tf_tensor){.name = "w", .dtype = CQ_DTYPE_Q8_2F, .ndim = 2, .shape = {N, K}, .off = 0, .nbytes = nb_w};
    f.t[1] = (tf_tensor){.name = "big", .dtype = CQ_DTYPE_F32, .ndim = 2, .shape = {BR, BC}, .off = off_big,
                         .nbytes = nb_big};
    f.data = data;
    f.data_len = off_big + nb_big;
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    assert_non_null(buf);
    const size_t doff = (size_t)tf_get64(buf + TF_DATA_OFF);
    float xh[M * K];
    tu_fill_normal(&g_rng, xh, M * K, 1.0f);
    static const cq_weight_mode modes[] = {CQ_WEIGHTS_PLANES, CQ_WEIGHTS_COMPACT, CQ_WEIGHTS_STREAMED};
    for (size_t mi = 0; mi < CQ_ARRAY_LEN(modes); mi++) {
        cq_backend *be = open_be(0);
        assert_int_equal(cq_backend_set_stream_keep(be, 0, 0), CQ_OK);
        cq_cmf *c = NULL;
        assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
        const cq_tensor_view *vw = cq_cmf_find(c, "w"), *vb = cq_cmf_find(c, "big");
        cq_tensor w, big, w0;
        bind_in(be, modes[mi], vw, &w);
        bind_in(be, modes[mi], vb, &big);
        assert_false(cq_cmf_tensor_unchecked(vw));
        assert_false(cq_cmf_tensor_unchecked(vb));
        cq_tensor_view plain = *vw;
        plain.owner = NULL; /* the same bytes, never checked */
        bind_in(be, modes[mi], &plain, &w0);
        cq_tensor x = act(be, M, K, xh), y = act(be, M, N, NULL), y0 = act(be, M, N, NULL);
        assert_int_equal(cq_op_linear(be, &y, &x, &w, NULL), CQ_OK);
        assert_int_equal(cq_op_linear(be, &y0, &x, &w0, NULL), CQ_OK);
        float *a = download(&y), *b = download(&y0);
        assert_memory_equal(a, b, sizeof(float) * M * N);
        free(a);
        free(b);
        cq_tensor_free(&w);
        cq_tensor_free(&big);
        cq_tensor_free(&w0);
        cq_cmf_close(c);

        uint8_t *bad = malloc(len);
        assert_non_null(bad);
        for (int which = 0; which < 2; which++) {
            memcpy(bad, buf, len);
            if (which == 0) bad[doff + off_big + nb_big - 1] ^= 0x08; /* the tail word of "big" */
            else bad[doff + nb_w / 2] ^= 0x01;                          /* the middle of "w" */
            assert_int_equal(cq_cmf_open_memory(bad, len, &c), CQ_OK);
            const cq_tensor_view *v = cq_cmf_find(c, which == 0 ? "big" : "w");
            const cq_backend_stats s0 = stats(be);
            assert_int_equal(cq_backend_set_weight_mode(be, modes[mi]), CQ_OK);
            cq_tensor t;
            assert_int_equal(cq_tensor_bind_weight(be, v, &t), CQ_ERR_HASH);
            assert_non_null(strstr(cq_last_error(), "is damaged"));
            assert_int_equal(cq_backend_set_weight_mode(be, CQ_WEIGHTS_DEFAULT), CQ_OK);
            const cq_backend_stats s1 = stats(be);
            assert_int_equal(s1.weight_bytes, s0.weight_bytes);
            assert_int_equal(s1.host_pinned, s0.host_pinned);
            assert_true(cq_cmf_tensor_unchecked(v));
            cq_cmf_close(c);
        }
        free(bad);
        const cq_backend_stats st = stats(be);
        assert_true(st.upload_bytes >= 2 * (nb_w + nb_big)); /* both tensors' copies counted */
        cq_tensor_free(&x);
        cq_tensor_free(&y);
        cq_tensor_free(&y0);
        cq_backend_free(be);
    }
    free(buf);
    free(data);
}

/* ---- trim ---------------------------------------------------------------------------------------------- */
static void test_trim(void **state) {
    (void)state;
    cq_backend *be = open_be(0);
    const cq_backend_stats s0 = stats(be);
    const uint64_t shape[2] = {N, K};
    uint64_t nb, wb, wslot, cb, cslot;
    uint8_t *pw = encode_random(CQ_DTYPE_Q8_2F, 2, shape, &nb);
    const cq_tensor_view vw = view_of(CQ_DTYPE_Q8_2F, 2, shape, pw, nb);
    assert_int_equal(cq_backend_weight_cost(be, &vw, CQ_WEIGHTS_PLANES, &wb, &wslot), CQ_OK);
    assert_int_equal(cq_backend_weight_cost(be, &vw, CQ_WEIGHTS_COMPACT, &cb, &cslot), CQ_OK);
    cq_tensor wp, wc;
    bind_in(be, CQ_WEIGHTS_PLANES, &vw, &wp);
    bind_in(be, CQ_WEIGHTS_COMPACT, &vw, &wc);
    float xh[M * K], before[M * N], after[M * N];
    tu_fill_normal(&g_rng, xh, M * K, 1.0f);
    cq_tensor x = act(be, M, K, xh), y = act(be, M, N, NULL);
    /* the live bytes: the backend's own (cuBLASLt's workspace), the weights, x and y in their size classes */
    const uint64_t live = s0.mem_in_use + wb + cb + cq_cuda_size_class(M * K * 4) + cq_cuda_size_class(M * N * 4);
    assert_int_equal(cq_op_linear(be, &y, &x, &wc, NULL), CQ_OK); /* grows the staging and weight slots */
    assert_int_equal(cq_tensor_download(&y, before, sizeof before), CQ_OK);
    cq_recording *rec = NULL;
    const bool recs = cq_backend_can_record(be);
    if (recs) {
        assert_int_equal(cq_backend_record_begin(be), CQ_OK);
        assert_int_equal(cq_op_linear(be, &y, &x, &wc, NULL), CQ_OK);
        assert_int_equal(cq_backend_record_end(be, true, &rec), CQ_OK);
    }
    /* 192 MiB of freed buffers in the cache */
    cq_tensor big[3];
    for (int i = 0; i < 3; i++) assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 16, (int64_t)MIB, &big[i]), CQ_OK);
    for (int i = 0; i < 3; i++) cq_tensor_free(&big[i]);
    const cq_backend_stats s1 = stats(be);
    assert_true(s1.mem_cached >= 192 * MIB);
    assert_true(s1.mem_in_use > live); /* the slots */
    assert_int_equal(cq_backend_trim(be), CQ_OK);
    const cq_backend_stats s2 = stats(be);
    assert_int_equal(s2.mem_cached, 0);
    if (s2.mem_in_use != live)
        fail_msg("after trim %llu bytes in use, %llu live", (unsigned long long)s2.mem_in_use, (unsigned long long)live);
    /* the driver got it back: its free memory rose by what was released (up to its own page rounding of the
     * small blocks, a few MiB) */
    const uint64_t released = s1.mem_in_use + s1.mem_cached - s2.mem_in_use;
    if (!(s2.device_free + 16 * MIB >= s1.device_free + released))
        fail_msg("trim released %llu bytes; the device's free memory went from %llu to %llu",
                 (unsigned long long)released, (unsigned long long)s1.device_free, (unsigned long long)s2.device_free);
    /* a recording that used the slots is stale; the ops themselves still run, to the same bits */
    if (recs) {
        assert_int_equal(cq_recording_replay(rec), CQ_ERR_AGAIN);
        cq_recording_free(rec);
    }
    assert_int_equal(cq_op_linear(be, &y, &x, &wc, NULL), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, after, sizeof after), CQ_OK);
    assert_memory_equal(before, after, sizeof before);
    cq_tensor_free(&wp);
    cq_tensor_free(&wc);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
    free(pw);
    cq_backend_free(be);
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_cuda_mem: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    tu_rng_seed(&g_rng, 21);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compact_bitexact),
        cmocka_unit_test(test_streamed_bitexact),
        cmocka_unit_test(test_weight_cost_measured),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_bind_hashed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
