/*
 * test_ltx2_upsampler.c — LTX-2's spatial latent upscaler x2
 * (models/ltx2_upsampler.h) on the backend named by the one argument
 * (testutil.h: `test_ltx2_upsampler cpu`, `test_ltx2_upsampler vulkan`, ...).
 *
 * Always on:
 *  - random configs written here into packs through the CMF writer (prefix
 *    "upsampler."): in 8, mid 64 (2 channels a group), 2 blocks a stage, on
 *    3 frames of 3 x 4 and on 1 frame of 2 x 2; in 8, mid 32, no blocks on 2
 *    frames of 1 x 3; each against a plain double-precision host loop
 *    written below from diffusers' LTX2LatentUpsamplerModel (zero padding in
 *    time and space, GroupNorm(32), the (c, p1, p2) pixel shuffle): every
 *    tap and the output within TOL_HOST x RMS where the backend's
 *    convolutions run in f32 (the CPU, Vulkan), TOL_DEVICE where they round
 *    operands to f16/bf16; the normalise wrapper around it;
 *  - a diffusers folder (5-D kernels in safetensors) converted as a user
 *    would: arch ltx2_upsampler, prefix "upsampler.", the table's tensors,
 *    the outputs of the pack written directly; by default f16 kernels; the
 *    same folder as a pipeline's latent_upsampler/;
 *  - the VAE statistics reader, bad configs and bad inputs refused with
 *    messages that say why, the real config's table.
 * With tests/golden/ltx2_upsampler (tools/golden_ltx2_upsampler.py; skipped
 * while it is absent): the model folder converted as a user would, each
 * case's taps and output within 1e-4 x RMS of diffusers' f32 CPU run on the
 * CPU, and on a device within a quarter of the reference's own bf16 error
 * stored per output (as max |d| / rms and rms(d) / rms; at least 1e-4).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/ltx2_upsampler.h"
#include "models/tables.h"
#include "ops/ops.h"

#define TOL_HOST 3e-5 /* f32 sums of up to 1728 products, each group norm rescaling the error by 1 / std */
#define TOL_DEVICE 3e-3 /* f16 conv operands on a device */
#define TOL_F16W 3e-3   /* f16 kernels (the default conversion) against f32 ones */
#define TOL_GOLD 1e-4
#define MAXB 4
#define PFX "upsampler."

static tu_backend_arg g_arg;
static cq_backend *g_be;

/* ---- configs and weights ------------------------------------------------ */
typedef struct tcfg {
    int C, M, B;
} tcfg;

static const tcfg k_tiny = {8, 64, 2};
static const tcfg k_bare = {8, 32, 0};

static void config_json(const tcfg *c, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\"_class_name\": \"LTX2LatentUpsamplerModel\", \"_diffusers_version\": \"0.40.0.dev0\","
             " \"in_channels\": %d, \"mid_channels\": %d, \"num_blocks_per_stage\": %d, \"dims\": 3,"
             " \"spatial_upsample\": true, \"temporal_upsample\": false, \"rational_spatial_scale\": 2.0,"
             " \"use_rational_resampler\": false}",
             c->C, c->M, c->B);
}

typedef struct convw {
    float *w, *b;
    int cout, cin, kt; /* kernel [cout, cin, kt, 3, 3] */
} convw;
typedef struct normw {
    float *g, *b;
} normw;
typedef struct resw {
    convw c1, c2;
    normw n1, n2;
} resw;
typedef struct weights {
    convw initial, up, final;
    normw in_norm;
    resw pre[MAXB], post[MAXB];
} weights;

static float *rnd(tu_rng *r, size_t n, float scale, float base) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    tu_fill_normal(r, x, n, scale);
    for (size_t i = 0; i < n; i++) x[i] += base;
    return x;
}

static void make_conv(tu_rng *r, convw *c, int cout, int cin, int kt) {
    c->cout = cout, c->cin = cin, c->kt = kt;
    const size_t n = (size_t)cout * cin * kt * 9;
    c->w = rnd(r, n, 1.0f / sqrtf((float)cin * kt * 9), 0);
    c->b = rnd(r, (size_t)cout, 0.1f, 0);
}

static void make_norm(tu_rng *r, normw *n, int c) {
    n->g = rnd(r, (size_t)c, 0.2f, 1);
    n->b = rnd(r, (size_t)c, 0.1f, 0);
}

static void make_weights(const tcfg *c, weights *w) {
    tu_rng r;
    tu_rng_seed(&r, 4242);
    memset(w, 0, sizeof *w);
    make_conv(&r, &w->initial, c->M, c->C, 3);
    make_norm(&r, &w->in_norm, c->M);
    for (int i = 0; i < c->B; i++) {
        resw *p[2] = {&w->pre[i], &w->post[i]};
        for (int k = 0; k < 2; k++) {
            make_conv(&r, &p[k]->c1, c->M, c->M, 3);
            make_norm(&r, &p[k]->n1, c->M);
            make_conv(&r, &p[k]->c2, c->M, c->M, 3);
            make_norm(&r, &p[k]->n2, c->M);
        }
    }
    make_conv(&r, &w->up, 4 * c->M, c->M, 1);
    make_conv(&r, &w->final, c->C, c->M, 3);
}

static void free_conv(convw *c) { free(c->w), free(c->b); }
static void free_norm(normw *n) { free(n->g), free(n->b); }

static void free_weights(const tcfg *c, weights *w) {
    free_conv(&w->initial), free_conv(&w->up), free_conv(&w->final), free_norm(&w->in_norm);
    for (int i = 0; i < c->B; i++) {
        resw *p[2] = {&w->pre[i], &w->post[i]};
        for (int k = 0; k < 2; k++) free_conv(&p[k]->c1), free_conv(&p[k]->c2), free_norm(&p[k]->n1), free_norm(&p[k]->n2);
    }
}

/* Where the weights go: a CMF pack (names under "upsampler.") or a diffusers folder's safetensors (bare names). */
typedef struct sink {
    cq_cmf_writer *cmf;
    cq_st_writer *st;
    const char *skip;
} sink;

static void add_f32(const sink *k, const char *name, const float *d, int ndim, const uint64_t *shape) {
    if (k->skip && strcmp(k->skip, name) == 0) return;
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    cq_status s = k->cmf ? cq_cmf_writer_add(k->cmf, name, CQ_DTYPE_F32, ndim, shape, d, n * sizeof(float))
                         : cq_st_writer_add_f32(k->st, name + strlen(PFX), ndim, shape, d);
    if (s != CQ_OK) fail_msg("add %s: %s", name, cq_last_error());
}

static void add_conv(const sink *k, const char *stem, const convw *c) {
    char n[192];
    /* PyTorch's shapes: Conv3d [cout, cin, 3, 3, 3], the upsampler's Conv2d [cout, cin, 3, 3] */
    const uint64_t w5[5] = {(uint64_t)c->cout, (uint64_t)c->cin, 3, 3, 3};
    const uint64_t w4[4] = {(uint64_t)c->cout, (uint64_t)c->cin, 3, 3};
    const uint64_t b1[1] = {(uint64_t)c->cout};
    snprintf(n, sizeof n, PFX "%s.weight", stem);
    add_f32(k, n, c->w, c->kt == 3 ? 5 : 4, c->kt == 3 ? w5 : w4);
    snprintf(n, sizeof n, PFX "%s.bias", stem);
    add_f32(k, n, c->b, 1, b1);
}

static void add_norm(const sink *k, const char *stem, const normw *nw, int C) {
    char n[192];
    const uint64_t s1[1] = {(uint64_t)C};
    snprintf(n, sizeof n, PFX "%s.weight", stem);
    add_f32(k, n, nw->g, 1, s1);
    snprintf(n, sizeof n, PFX "%s.bias", stem);
    add_f32(k, n, nw->b, 1, s1);
}

static void write_weights(const sink *k, const tcfg *c, const weights *w) {
    char n[128];
    add_conv(k, "initial_conv", &w->initial);
    add_norm(k, "initial_norm", &w->in_norm, c->M);
    for (int i = 0; i < c->B; i++)
        for (int st = 0; st < 2; st++) {
            const resw *r = st ? &w->post[i] : &w->pre[i];
            const char *stage = st ? "post_upsample_res_blocks" : "res_blocks";
            snprintf(n, sizeof n, "%s.%d.conv1", stage, i);
            add_conv(k, n, &r->c1);
            snprintf(n, sizeof n, "%s.%d.norm1", stage, i);
            add_norm(k, n, &r->n1, c->M);
            snprintf(n, sizeof n, "%s.%d.conv2", stage, i);
            add_conv(k, n, &r->c2);
            snprintf(n, sizeof n, "%s.%d.norm2", stage, i);
            add_norm(k, n, &r->n2, c->M);
        }
    add_conv(k, "upsampler.0", &w->up);
    add_conv(k, "final_conv", &w->final);
}

static const char k_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"ltx2_upsampler\",\"hidden_size\":64,"
    "\"intermediate_size\":0,\"num_layers\":2,\"num_attention_heads\":0,\"num_kv_heads\":0,\"head_dim\":0,"
    "\"vocab_size\":0,\"max_position_embeddings\":0,\"layer_types\":[],\"rms_norm_eps\":1e-5}}";

/* The pack of w under "upsampler." with `config`; skip names the one tensor left out (NULL: none); stats adds
 * vae.latents_mean / latents_std of C values (mean, std; NULL: none). */
static const char *write_pack(const char *dir, const tcfg *c, const weights *w, const char *leaf, const char *config,
                              const char *skip, const float *mean, const float *std) {
    const char *path = tu_path(dir, leaf);
    sink k = {0};
    k.skip = skip;
    assert_int_equal(cq_cmf_writer_create(path, &k.cmf), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(k.cmf, k_header, strlen(k_header)), CQ_OK);
    uint64_t cl[1] = {strlen(config)};
    assert_int_equal(cq_cmf_writer_add(k.cmf, PFX "config_json", CQ_DTYPE_U8, 1, cl, config, cl[0]), CQ_OK);
    if (w) write_weights(&k, c, w);
    if (mean && std) {
        const uint64_t s1[1] = {(uint64_t)c->C};
        assert_int_equal(cq_cmf_writer_add(k.cmf, "vae.latents_mean", CQ_DTYPE_F32, 1, s1, mean,
                                           (size_t)c->C * sizeof(float)), CQ_OK);
        assert_int_equal(cq_cmf_writer_add(k.cmf, "vae.latents_std", CQ_DTYPE_F32, 1, s1, std,
                                           (size_t)c->C * sizeof(float)), CQ_OK);
    }
    if (cq_cmf_writer_finish(k.cmf) != CQ_OK) fail_msg("finish: %s", cq_last_error());
    cq_cmf_writer_free(k.cmf);
    return path;
}

/* The same weights as a diffusers LTX2LatentUpsamplerModel folder (config.json, diffusion_pytorch_model.safetensors). */
static const char *write_folder(const char *dir, const tcfg *c, const weights *w, const char *leaf,
                                const char *config) {
    static char keep[1200];
    snprintf(keep, sizeof keep, "%s", tu_path(dir, leaf));
    assert_int_equal(tu_system("mkdir -p '%s'", keep), 0);
    sink k = {0};
    assert_int_equal(cq_st_writer_create(&k.st), CQ_OK);
    write_weights(&k, c, w);
    if (cq_st_writer_save(k.st, tu_path(keep, "diffusion_pytorch_model.safetensors")) != CQ_OK)
        fail_msg("save: %s", cq_last_error());
    cq_st_writer_free(k.st);
    assert_int_equal(tu_write_file(tu_path(keep, "config.json"), config, strlen(config)), 0);
    return keep;
}

/* ---- the double-precision host loop (diffusers' LTX2LatentUpsamplerModel) -------------------- */
/* Channels-last [F][H][W][C] everywhere, as the model's interface. */
typedef struct vol {
    int F, H, W, C;
    double *v;
} vol;

static vol vol_new(int F, int H, int W, int C) {
    vol o = {F, H, W, C, calloc((size_t)F * H * W * C, sizeof(double))};
    assert_non_null(o.v);
    return o;
}

/* Conv3d (kt 3) or the per-frame Conv2d (kt 1), kernel 3 in space, zero padding (kt - 1) / 2 in time, 1 in space. */
static vol host_conv(const vol *x, const convw *c) {
    vol y = vol_new(x->F, x->H, x->W, c->cout);
    const int pt = (c->kt - 1) / 2, K = c->cin * c->kt * 9;
    for (int f = 0; f < x->F; f++)
        for (int h = 0; h < x->H; h++)
            for (int w = 0; w < x->W; w++)
                for (int co = 0; co < c->cout; co++) {
                    double acc = c->b[co];
                    for (int dt = 0; dt < c->kt; dt++) {
                        const int it = f + dt - pt;
                        if (it < 0 || it >= x->F) continue;
                        for (int dy = 0; dy < 3; dy++) {
                            const int iy = h + dy - 1;
                            if (iy < 0 || iy >= x->H) continue;
                            for (int dx = 0; dx < 3; dx++) {
                                const int ix = w + dx - 1;
                                if (ix < 0 || ix >= x->W) continue;
                                const double *xr = x->v + (((size_t)it * x->H + iy) * x->W + ix) * x->C;
                                const float *wr = c->w + (size_t)co * K + (dt * 3 + dy) * 3 + dx;
                                for (int ci = 0; ci < c->cin; ci++) acc += (double)wr[(size_t)ci * c->kt * 9] * xr[ci];
                            }
                        }
                    }
                    y.v[(((size_t)f * x->H + h) * x->W + w) * c->cout + co] = acc;
                }
    return y;
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* GroupNorm(32, affine, eps 1e-5) over all F H W values of each group, in place; then SiLU when act. */
static void host_gn(vol *x, const normw *n, bool act) {
    const int G = CQ_LTX2_UPS_GROUPS, cg = x->C / G;
    const size_t P = (size_t)x->F * x->H * x->W;
    for (int g = 0; g < G; g++) {
        double s = 0, ss = 0;
        for (size_t p = 0; p < P; p++)
            for (int k = 0; k < cg; k++) s += x->v[p * x->C + g * cg + k];
        const double mean = s / ((double)P * cg);
        for (size_t p = 0; p < P; p++)
            for (int k = 0; k < cg; k++) {
                const double d = x->v[p * x->C + g * cg + k] - mean;
                ss += d * d;
            }
        const double inv = 1.0 / sqrt(ss / ((double)P * cg) + 1e-5);
        for (size_t p = 0; p < P; p++)
            for (int k = 0; k < cg; k++) {
                const int c = g * cg + k;
                double v = (x->v[p * x->C + c] - mean) * inv * n->g[c] + n->b[c];
                x->v[p * x->C + c] = act ? silu(v) : v;
            }
    }
}

static void host_res(vol *h, const resw *r) {
    vol t = host_conv(h, &r->c1);
    host_gn(&t, &r->n1, true);
    vol u = host_conv(&t, &r->c2);
    host_gn(&u, &r->n2, false);
    const size_t n = (size_t)h->F * h->H * h->W * h->C;
    for (size_t i = 0; i < n; i++) h->v[i] = silu(h->v[i] + u.v[i]);
    free(t.v), free(u.v);
}

/* b (c p1 p2) h w -> b c (h p1) (w p2), per frame */
static vol host_shuffle(const vol *x) {
    const int C = x->C / 4;
    vol y = vol_new(x->F, 2 * x->H, 2 * x->W, C);
    for (int f = 0; f < x->F; f++)
        for (int h = 0; h < x->H; h++)
            for (int w = 0; w < x->W; w++)
                for (int c = 0; c < C; c++)
                    for (int p1 = 0; p1 < 2; p1++)
                        for (int p2 = 0; p2 < 2; p2++)
                            y.v[(((size_t)f * y.H + 2 * h + p1) * y.W + 2 * w + p2) * C + c] =
                                x->v[(((size_t)f * x->H + h) * x->W + w) * x->C + c * 4 + p1 * 2 + p2];
    return y;
}

/* The forward with its taps: ref[0] initial, ref[1 .. B] pre, ref[B + 1] upsampled, ref[B + 2 ..] post, then out. */
static int host_forward(const tcfg *c, const weights *w, const float *x, int F, int H, int W, vol *ref) {
    vol in = vol_new(F, H, W, c->C);
    for (size_t i = 0; i < (size_t)F * H * W * c->C; i++) in.v[i] = x[i];
    int k = 0;
    vol h = host_conv(&in, &w->initial);
    free(in.v);
    host_gn(&h, &w->in_norm, true);
    ref[k++] = (vol){h.F, h.H, h.W, h.C, malloc((size_t)h.F * h.H * h.W * h.C * sizeof(double))};
    memcpy(ref[k - 1].v, h.v, (size_t)h.F * h.H * h.W * h.C * sizeof(double));
    for (int i = 0; i < c->B; i++) {
        host_res(&h, &w->pre[i]);
        ref[k] = vol_new(h.F, h.H, h.W, h.C);
        memcpy(ref[k++].v, h.v, (size_t)h.F * h.H * h.W * h.C * sizeof(double));
    }
    vol u = host_conv(&h, &w->up);
    free(h.v);
    h = host_shuffle(&u);
    free(u.v);
    ref[k] = vol_new(h.F, h.H, h.W, h.C);
    memcpy(ref[k++].v, h.v, (size_t)h.F * h.H * h.W * h.C * sizeof(double));
    for (int i = 0; i < c->B; i++) {
        host_res(&h, &w->post[i]);
        ref[k] = vol_new(h.F, h.H, h.W, h.C);
        memcpy(ref[k++].v, h.v, (size_t)h.F * h.H * h.W * h.C * sizeof(double));
    }
    ref[k++] = host_conv(&h, &w->final);
    free(h.v);
    return k;
}

/* ---- taps ---------------------------------------------------------------- */
#define MAX_TAPS 24
typedef struct taps {
    int n;
    char name[MAX_TAPS][32];
    float *v[MAX_TAPS];
    size_t len[MAX_TAPS];
} taps;

static void tap_fn(void *user, const char *name, const cq_tensor *t) {
    taps *tp = user;
    if (tp->n == MAX_TAPS) return;
    const size_t n = (size_t)cq_tensor_nelem(t);
    float *v = malloc(n * sizeof(float));
    assert_non_null(v);
    if (cq_backend_sync(g_be) != CQ_OK || cq_tensor_download(t, v, n * sizeof(float)) != CQ_OK)
        fail_msg("tap %s: %s", name, cq_last_error());
    snprintf(tp->name[tp->n], sizeof tp->name[0], "%s", name);
    tp->v[tp->n] = v;
    tp->len[tp->n++] = n;
}

static const float *tap_get(const taps *tp, const char *name, size_t want) {
    for (int i = 0; i < tp->n; i++)
        if (strcmp(tp->name[i], name) == 0) {
            if (tp->len[i] != want) fail_msg("tap %s holds %zu values, want %zu", name, tp->len[i], want);
            return tp->v[i];
        }
    fail_msg("no tap %s", name);
    return NULL;
}

static void taps_free(taps *tp) {
    for (int i = 0; i < tp->n; i++) free(tp->v[i]);
    tp->n = 0;
}

/* ---- the host-loop checks ------------------------------------------------ */
static double host_tol(void) {
    const bool f32 = cq_backend_op_precision(g_be, CQ_OP_CONV3D, CQ_DTYPE_F32) == CQ_DTYPE_F32;
    return f32 ? TOL_HOST : TOL_DEVICE;
}

/* max |ours - ref| / rms(ref) */
static double err_d(const float *ours, const double *ref, size_t n) {
    double ss = 0, m = 0;
    for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
    const double rms = sqrt(ss / (double)n);
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)ours[i] - ref[i]);
        if (!(d <= m)) m = d;
    }
    return rms > 0 ? m / rms : m;
}

static void expect_close(const char *what, const char *name, const float *ours, const double *ref, size_t n,
                         double tol) {
    const double e = err_d(ours, ref, n);
    printf("  %s %s: max|d|/rms %.3g (bound %g)\n", what, name, e, tol);
    if (!(e <= tol)) fail_msg("%s: %s off by %.3g x RMS (> %g)", what, name, e, tol);
}

static float *latent(int F, int H, int W, int C, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    float *x = rnd(&r, (size_t)F * H * W * C, 1.0f, 0.0f);
    for (size_t i = 0; i < (size_t)F * H * W * C; i++) x[i] = x[i] * (1.0f + 0.3f * (float)(i % 5)) + 0.2f;
    return x;
}

static void run_case(cq_ltx2_ups *m, const tcfg *c, const weights *w, int F, int H, int W) {
    char what[64];
    snprintf(what, sizeof what, "%dx%dx%d mid %d", F, H, W, c->M);
    const double tol = host_tol();
    float *x = latent(F, H, W, c->C, 100 + (uint64_t)(F * 31 + H * 7 + W));
    const size_t nlo = (size_t)F * H * W, nhi = 4 * nlo;
    float *y = malloc(nhi * c->C * sizeof(float));
    assert_non_null(y);
    taps tp = {0};
    cq_ltx2_ups_set_tap(m, tap_fn, &tp);
    if (cq_ltx2_ups_forward(m, x, F, H, W, y) != CQ_OK) fail_msg("forward: %s", cq_last_error());
    cq_ltx2_ups_set_tap(m, NULL, NULL);
    vol ref[2 * MAXB + 4];
    const int nr = host_forward(c, w, x, F, H, W, ref);
    assert_int_equal(nr, 2 * c->B + 3);
    char nm[32];
    int k = 0;
    expect_close(what, "initial", tap_get(&tp, "initial", nlo * c->M), ref[k++].v, nlo * c->M, tol);
    for (int i = 0; i < c->B; i++) {
        snprintf(nm, sizeof nm, "pre%d", i);
        expect_close(what, nm, tap_get(&tp, nm, nlo * c->M), ref[k++].v, nlo * c->M, tol);
    }
    expect_close(what, "upsampled", tap_get(&tp, "upsampled", nhi * c->M), ref[k++].v, nhi * c->M, tol);
    for (int i = 0; i < c->B; i++) {
        snprintf(nm, sizeof nm, "post%d", i);
        expect_close(what, nm, tap_get(&tp, nm, nhi * c->M), ref[k++].v, nhi * c->M, tol);
    }
    expect_close(what, "out", y, ref[k].v, nhi * c->C, tol);
    assert_memory_equal(tap_get(&tp, "out", nhi * c->C), y, nhi * c->C * sizeof(float));
    /* the pipeline's wrapper: de-normalise, forward, normalise */
    float *mean = malloc((size_t)c->C * sizeof(float)), *std = malloc((size_t)c->C * sizeof(float));
    float *z = malloc(nlo * c->C * sizeof(float)), *zo = malloc(nhi * c->C * sizeof(float));
    double *zr = malloc(nhi * c->C * sizeof(double));
    assert_true(mean && std && z && zo && zr);
    for (int ch = 0; ch < c->C; ch++) mean[ch] = 0.3f * (float)(ch % 3) - 0.2f, std[ch] = 0.5f + 0.25f * (float)(ch % 4);
    const float sc = 1.0f;
    for (size_t i = 0; i < nlo * c->C; i++) z[i] = (x[i] - mean[i % c->C]) * sc / std[i % c->C];
    if (cq_ltx2_ups_upscale(m, mean, std, sc, z, F, H, W, zo) != CQ_OK) fail_msg("upscale: %s", cq_last_error());
    for (size_t i = 0; i < nhi * c->C; i++) zr[i] = (ref[k].v[i] - mean[i % c->C]) * sc / std[i % c->C];
    expect_close(what, "upscale (normalised)", zo, zr, nhi * c->C, tol);
    for (int i = 0; i < nr; i++) free(ref[i].v);
    taps_free(&tp);
    free(x), free(y), free(mean), free(std), free(z), free(zo), free(zr);
}

static void open_pack(const char *path, cq_cmf **cmf, cq_ltx2_ups **m) {
    if (cq_cmf_open(path, cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (cq_ltx2_ups_load(*cmf, PFX, g_be, m) != CQ_OK) fail_msg("load: %s", cq_last_error());
}

static void host_cases(const tcfg *c, const char *leaf, const int (*geo)[3], int n_geo, bool full_checks) {
    weights w;
    make_weights(c, &w);
    char cfg[1024];
    config_json(c, cfg, sizeof cfg);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_upsampler"));
    const char *path = write_pack(dir, c, &w, leaf, cfg, NULL, NULL, NULL);
    cq_cmf *cmf;
    cq_ltx2_ups *m;
    open_pack(path, &cmf, &m);
    const cq_ltx2_ups_config *k = cq_ltx2_ups_get_config(m);
    assert_true(k->in_channels == c->C && k->mid_channels == c->M && k->n_blocks == c->B);
    cq_tt_report rep;
    int nc = 0;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &nc), CQ_OK);
    assert_int_equal(nc, 1);
    assert_true(rep.missing == 0 && rep.unexpected == 0 && rep.mismatched == 0);
    for (int i = 0; i < n_geo; i++) run_case(m, c, &w, geo[i][0], geo[i][1], geo[i][2]);
    if (full_checks) {
        float *x = latent(2, 2, 2, c->C, 1), *y = malloc((size_t)2 * 4 * 4 * c->C * sizeof(float));
        float mean[8] = {0}, std[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        assert_non_null(y);
        tu_expect_err(cq_ltx2_ups_forward(m, x, 0, 2, 2, y), CQ_ERR_SHAPE, "0 frames");
        tu_expect_err(cq_ltx2_ups_forward(m, x, 2, 2, -1, y), CQ_ERR_SHAPE, "each 1 .. 65536");
        tu_expect_err(cq_ltx2_ups_forward(m, x, 65536, 65536, 2, y), CQ_ERR_SHAPE, "too large");
        tu_expect_err(cq_ltx2_ups_forward(m, NULL, 2, 2, 2, y), CQ_ERR_INVALID_ARG, "an input and an output");
        tu_expect_err(cq_ltx2_ups_upscale(m, mean, std, 0.0f, x, 2, 2, 2, y), CQ_ERR_INVALID_ARG, "scaling factor");
        std[3] = 0;
        tu_expect_err(cq_ltx2_ups_upscale(m, mean, std, 1.0f, x, 2, 2, 2, y), CQ_ERR_NUMERIC, "channel 3");
        x[5] = NAN;
        tu_expect_err(cq_ltx2_ups_forward(m, x, 2, 2, 2, y), CQ_ERR_NUMERIC, "input value 5");
        free(x), free(y);
    }
    cq_ltx2_ups_free(m);
    cq_cmf_close(cmf);
    if (full_checks) {
        /* a missing tensor is named */
        const char *miss = PFX "post_upsample_res_blocks.1.norm2.bias";
        path = write_pack(dir, c, &w, "missing.cmf", cfg, miss, NULL, NULL);
        assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
        cq_status s = cq_ltx2_ups_load(cmf, PFX, g_be, &m);
        assert_int_not_equal(s, CQ_OK);
        if (!strstr(cq_last_error(), miss)) fail_msg("message: %s", cq_last_error());
        cq_cmf_close(cmf);
    }
    free_weights(c, &w);
}

static void test_tiny(void **st) {
    (void)st;
    static const int geo[][3] = {{3, 3, 4}, {1, 2, 2}};
    host_cases(&k_tiny, "tiny.cmf", geo, 2, true);
}

static void test_bare(void **st) {
    (void)st;
    static const int geo[][3] = {{2, 1, 3}};
    host_cases(&k_bare, "bare.cmf", geo, 1, false);
}

/* A diffusers folder converted as a user would: arch ltx2_upsampler, prefix "upsampler.", the table's tensors and
 * nothing else; with f32 kernels the outputs of the pack written directly (bit for bit on the host), by default
 * f16 kernels within their rounding. */
static void test_convert(void **st) {
    (void)st;
    const tcfg *c = &k_tiny;
    weights w;
    make_weights(c, &w);
    char cfg[1024];
    config_json(c, cfg, sizeof cfg);
    char dir[1100], dp[1200], pack[1200], pack16[1200];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_upsampler"));
    snprintf(dp, sizeof dp, "%s", write_pack(dir, c, &w, "direct.cmf", cfg, NULL, NULL, NULL));
    const char *folder = write_folder(dir, c, &w, "folder", cfg);
    snprintf(pack, sizeof pack, "%s", tu_path(dir, "converted.cmf"));
    snprintf(pack16, sizeof pack16, "%s", tu_path(dir, "converted16.cmf"));
    cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(folder, pack, &opts, &rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
    if (strcmp(rep.arch, "ltx2_upsampler") != 0) fail_msg("arch '%s', not ltx2_upsampler", rep.arch);
    cq_convert_report_free(&rep);
    cq_convert_opts dflt = {.quant = -1};
    s = cq_convert(folder, pack16, &dflt, &rep);
    if (s != CQ_OK) fail_msg("convert %s (default codecs): %s", folder, cq_last_error());
    cq_convert_report_free(&rep);
    cq_cmf *ca, *cb, *cc;
    cq_ltx2_ups *ma, *mb, *mc;
    open_pack(dp, &ca, &ma);
    open_pack(pack, &cb, &mb);
    open_pack(pack16, &cc, &mc);
    const cq_tensor_view *kv = cq_cmf_find(cc, PFX "res_blocks.0.conv1.weight");
    assert_non_null(kv);
    assert_int_equal(kv->dtype, CQ_DTYPE_F16);
    assert_int_equal(kv->ndim, 5);
    cq_tt_report tr;
    int nc = 0;
    assert_int_equal(cq_tables_check_pack(cb, NULL, NULL, &tr, &nc), CQ_OK);
    assert_int_equal(nc, 1);
    assert_true(tr.missing == 0 && tr.unexpected == 0 && tr.mismatched == 0);
    const int F = 2, H = 3, W = 2;
    float *x = latent(F, H, W, c->C, 9);
    const size_t n = (size_t)F * 4 * H * W * c->C;
    float *ya = malloc(n * sizeof(float)), *yb = malloc(n * sizeof(float)), *yc = malloc(n * sizeof(float));
    assert_true(ya && yb && yc);
    assert_int_equal(cq_ltx2_ups_forward(ma, x, F, H, W, ya), CQ_OK);
    assert_int_equal(cq_ltx2_ups_forward(mb, x, F, H, W, yb), CQ_OK);
    assert_int_equal(cq_ltx2_ups_forward(mc, x, F, H, W, yc), CQ_OK);
    if (!g_arg.device) assert_memory_equal(ya, yb, n * sizeof(float));
    else assert_true(tu_max_rel(yb, ya, n, tu_rms(ya, n)) <= 1e-6);
    const double e16 = tu_max_rel(yc, ya, n, tu_rms(ya, n));
    printf("  f16 kernels against f32: max|d|/rms %.3g (bound %g)\n", e16, TOL_F16W);
    if (!(e16 <= TOL_F16W)) fail_msg("f16 kernels off by %.3g x RMS", e16);
    /* the same folder as a pipeline's latent_upsampler/: the prefix "upsampler." again */
    char pipe[1200], sub[1300], pp[1200];
    snprintf(pipe, sizeof pipe, "%s", tu_path(dir, "pipe"));
    snprintf(sub, sizeof sub, "%s/latent_upsampler", pipe);
    assert_int_equal(tu_system("mkdir -p '%s' && cp -r '%s/.' '%s'", sub, folder, sub), 0);
    static const char mi[] = "{\"_class_name\": \"LTX2Pipeline\", \"latent_upsampler\": [\"diffusers\", "
                             "\"LTX2LatentUpsamplerModel\"]}";
    assert_int_equal(tu_write_file(tu_path(pipe, "model_index.json"), mi, strlen(mi)), 0);
    snprintf(pp, sizeof pp, "%s", tu_path(dir, "pipe.cmf"));
    s = cq_convert(pipe, pp, &opts, &rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", pipe, cq_last_error());
    cq_convert_report_free(&rep);
    cq_cmf *cp;
    cq_ltx2_ups *mp;
    open_pack(pp, &cp, &mp);
    assert_int_equal(cq_ltx2_ups_forward(mp, x, F, H, W, yb), CQ_OK);
    if (!g_arg.device) assert_memory_equal(ya, yb, n * sizeof(float));
    cq_ltx2_ups_free(mp);
    cq_cmf_close(cp);
    free(x), free(ya), free(yb), free(yc);
    cq_ltx2_ups_free(ma);
    cq_ltx2_ups_free(mb);
    cq_ltx2_ups_free(mc);
    cq_cmf_close(ca);
    cq_cmf_close(cb);
    cq_cmf_close(cc);
    free_weights(c, &w);
}

/* The VAE statistics: read back as written; a non-positive std, a wrong count and an absent tensor refused. */
static void test_stats(void **st) {
    (void)st;
    const tcfg *c = &k_bare;
    char cfg[1024], dir[1100];
    config_json(c, cfg, sizeof cfg);
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_upsampler"));
    float mean[8], std[8], gm[8], gs[8];
    for (int i = 0; i < 8; i++) mean[i] = 0.1f * (float)i - 0.3f, std[i] = 0.4f + 0.1f * (float)i;
    const char *path = write_pack(dir, c, NULL, "stats.cmf", cfg, NULL, mean, std);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    if (cq_ltx2_latent_stats_read(cmf, "vae.", 8, gm, gs) != CQ_OK) fail_msg("stats: %s", cq_last_error());
    assert_memory_equal(gm, mean, sizeof mean);
    assert_memory_equal(gs, std, sizeof std);
    tu_expect_err(cq_ltx2_latent_stats_read(cmf, "vae.", 16, gm, gs), CQ_ERR_SHAPE, "vae.latents_mean");
    tu_expect_err(cq_ltx2_latent_stats_read(cmf, "other.", 8, gm, gs), CQ_ERR_MISSING, "other.latents_mean");
    cq_cmf_close(cmf);
    std[6] = 0.0f;
    path = write_pack(dir, c, NULL, "stats_bad.cmf", cfg, NULL, mean, std);
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    tu_expect_err(cq_ltx2_latent_stats_read(cmf, "vae.", 8, gm, gs), CQ_ERR_NUMERIC, "latents_std[6]");
    cq_cmf_close(cmf);
}

/* ---- configs refused ---------------------------------------------------- */
static void expect_bad(const char *from, const char *to, cq_status want, const char *needle) {
    char cfg[1024], buf[1024];
    config_json(&k_tiny, cfg, sizeof cfg);
    const char *at = strstr(cfg, from);
    if (!at) fail_msg("'%s' is not in the test config", from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    cq_ltx2_ups_config c;
    tu_expect_err(cq_ltx2_ups_parse_config_text(buf, &c), want, needle);
}

static void test_bad_config(void **st) {
    (void)st;
    char cfg[1024];
    config_json(&k_tiny, cfg, sizeof cfg);
    cq_ltx2_ups_config c;
    assert_int_equal(cq_ltx2_ups_parse_config_text(cfg, &c), CQ_OK);
    assert_true(c.in_channels == 8 && c.mid_channels == 64 && c.n_blocks == 2);
    expect_bad("\"use_rational_resampler\": false", "\"use_rational_resampler\": true", CQ_ERR_UNSUPPORTED,
               "use_rational_resampler is true");
    expect_bad(", \"use_rational_resampler\": false", "", CQ_ERR_UNSUPPORTED,
               "use_rational_resampler is absent");
    expect_bad("\"temporal_upsample\": false", "\"temporal_upsample\": true", CQ_ERR_UNSUPPORTED,
               "temporal_upsample is true");
    expect_bad("\"spatial_upsample\": true", "\"spatial_upsample\": false", CQ_ERR_UNSUPPORTED,
               "spatial_upsample is false");
    expect_bad("\"dims\": 3", "\"dims\": 2", CQ_ERR_UNSUPPORTED, "dims is 2");
    expect_bad("\"mid_channels\": 64", "\"mid_channels\": 48", CQ_ERR_PARSE, "multiple of 32");
    expect_bad("\"mid_channels\": 64", "\"mid_channels\": 16", CQ_ERR_PARSE, "mid_channels must be");
    expect_bad("\"in_channels\": 8", "\"in_channels\": 0", CQ_ERR_PARSE, "in_channels must be");
    expect_bad("\"num_blocks_per_stage\": 2", "\"num_blocks_per_stage\": 2.5", CQ_ERR_PARSE, "num_blocks_per_stage");
    expect_bad("\"LTX2LatentUpsamplerModel\"", "\"LTXLatentUpsamplerModel\"", CQ_ERR_UNSUPPORTED, "not LTX2Latent");
    tu_expect_err(cq_ltx2_ups_parse_config_text("[1]", &c), CQ_ERR_PARSE, "not a JSON object");
    /* the LTX-2.3 / 2.5 config (diffusers' converter: mid 1024, 4 + 4 blocks, the plain resampler) */
    static const char real[] =
        "{\"_class_name\": \"LTX2LatentUpsamplerModel\", \"in_channels\": 128, \"mid_channels\": 1024,"
        " \"num_blocks_per_stage\": 4, \"dims\": 3, \"spatial_upsample\": true, \"temporal_upsample\": false,"
        " \"rational_spatial_scale\": 2.0, \"use_rational_resampler\": false}";
    if (cq_ltx2_ups_parse_config_text(real, &c) != CQ_OK) fail_msg("the LTX-2.5 config: %s", cq_last_error());
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_ups_tensors(&c, PFX, &t), CQ_OK);
    /* initial conv + norm, upsampler, final conv: 8; 8 a block, 4 + 4 blocks */
    assert_int_equal((int)t.n, 8 + 8 * 8);
    const cq_tt_entry *e = cq_tt_find(&t, PFX "upsampler.0.weight");
    assert_non_null(e);
    assert_true(e->ndim == 4 && e->shape[0] == 4096 && e->shape[1] == 1024 && e->shape[2] == 3 && e->shape[3] == 3);
    e = cq_tt_find(&t, PFX "post_upsample_res_blocks.3.conv2.weight");
    assert_non_null(e);
    assert_true(e->shape[0] == 1024 && e->shape[1] == 1024 && e->shape[2] == 27);
    uint64_t params = 0;
    for (size_t i = 0; i < t.n; i++) {
        uint64_t p = 1;
        for (int d = 0; d < t.e[i].ndim; d++) p *= t.e[i].shape[d];
        params += p;
    }
    printf("  LTX-2.5 upscaler: %llu parameters\n", (unsigned long long)params);
    assert_true(params > 490000000ull && params < 505000000ull); /* the release's 0.498 B */
    cq_tt_list_free(&t);
}

/* ---- golden data from diffusers ------------------------------------------ */
#define GOLD_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_upsampler"

static double jnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* max |a - b| / rms(b) and rms(a - b) / rms(b) */
static void errs(const float *a, const float *b, size_t n, double *mx, double *rr) {
    double ss = 0, dd = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - (double)b[i];
        ss += (double)b[i] * b[i];
        dd += d * d;
        if (!(fabs(d) <= m)) m = fabs(d);
    }
    const double rms = sqrt(ss / (double)(n ? n : 1));
    *mx = rms > 0 ? m / rms : m;
    *rr = rms > 0 ? sqrt(dd / (double)(n ? n : 1)) / rms : sqrt(dd / (double)(n ? n : 1));
}

static void gold_check(const char *cs, const cq_st *g, const cJSON *bf16, const char *name, const float *ours,
                       size_t n) {
    size_t nr = 0;
    float *ref = tu_st_floats(g, name, &nr);
    if (!ref || nr != n) fail_msg("case %s: golden %s missing or of %zu values (want %zu)", cs, name, nr, n);
    double mx, rr;
    errs(ours, ref, n, &mx, &rr);
    double bmx = TOL_GOLD, brr = TOL_GOLD;
    if (g_arg.device) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(bf16, name);
        const double m4 = jnum(e, "max_rel") / 4, r4 = jnum(e, "rms_rel") / 4;
        if (!(m4 >= 0) || !(r4 >= 0)) fail_msg("case %s: index.json has no bf16 errors for %s", cs, name);
        bmx = m4 > TOL_GOLD ? m4 : TOL_GOLD;
        brr = r4 > TOL_GOLD ? r4 : TOL_GOLD;
    }
    printf("  golden %s %s: max|d|/rms %.3g (bound %.3g), rms(d)/rms %.3g (bound %.3g)\n", cs, name, mx, bmx, rr, brr);
    if (!(mx <= bmx) || !(rr <= brr))
        fail_msg("golden %s: %s off by %.3g max / %.3g rms x RMS (> %.3g / %.3g)", cs, name, mx, rr, bmx, brr);
    free(ref);
}

static int jint(const cJSON *o, const char *key) {
    const double v = jnum(o, key);
    if (!(v >= 1 && v <= 4096) || v != floor(v)) fail_msg("index.json: case member %s is not a size", key);
    return (int)v;
}

static void golden_case(cq_ltx2_ups *m, const cJSON *cs, const char *dir) {
    const cq_ltx2_ups_config *c = cq_ltx2_ups_get_config(m);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cs, "name");
    const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(cs, "bf16");
    if (!cJSON_IsString(nm) || !cJSON_IsObject(bf16)) fail_msg("index.json: a case without name or bf16");
    const char *cn = nm->valuestring;
    const int F = jint(cs, "frames"), H = jint(cs, "height"), W = jint(cs, "width");
    char path[1300];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", dir, cn);
    cq_st *g;
    if (cq_st_open(path, &g) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    const size_t nlo = (size_t)F * H * W, nhi = 4 * nlo, C = (size_t)c->in_channels, M = (size_t)c->mid_channels;
    size_t n = 0;
    float *x = tu_st_floats(g, "x", &n);
    if (!x || n != nlo * C) fail_msg("case %s: x missing or mis-sized", cn);
    float *y = malloc(nhi * C * sizeof(float));
    assert_non_null(y);
    taps tp = {0};
    cq_ltx2_ups_set_tap(m, tap_fn, &tp);
    if (cq_ltx2_ups_forward(m, x, F, H, W, y) != CQ_OK) fail_msg("forward: %s", cq_last_error());
    cq_ltx2_ups_set_tap(m, NULL, NULL);
    char k[32];
    gold_check(cn, g, bf16, "initial", tap_get(&tp, "initial", nlo * M), nlo * M);
    for (int i = 0; i < c->n_blocks; i++) {
        snprintf(k, sizeof k, "pre%d", i);
        gold_check(cn, g, bf16, k, tap_get(&tp, k, nlo * M), nlo * M);
    }
    gold_check(cn, g, bf16, "upsampled", tap_get(&tp, "upsampled", nhi * M), nhi * M);
    for (int i = 0; i < c->n_blocks; i++) {
        snprintf(k, sizeof k, "post%d", i);
        gold_check(cn, g, bf16, k, tap_get(&tp, k, nhi * M), nhi * M);
    }
    gold_check(cn, g, bf16, "out", y, nhi * C);
    taps_free(&tp);
    /* the pipeline's wrapper on the normalised latent */
    size_t nm_ = 0, ns = 0, nz = 0;
    float *mean = tu_st_floats(g, "latents_mean", &nm_), *std = tu_st_floats(g, "latents_std", &ns);
    float *z = tu_st_floats(g, "z", &nz);
    const double sc = jnum(cs, "scaling_factor");
    if (!mean || !std || !z || nm_ != C || ns != C || nz != nlo * C || !(sc > 0))
        fail_msg("case %s: latents_mean / latents_std / z / scaling_factor missing or mis-sized", cn);
    if (cq_ltx2_ups_upscale(m, mean, std, (float)sc, z, F, H, W, y) != CQ_OK) fail_msg("upscale: %s", cq_last_error());
    gold_check(cn, g, bf16, "z_out", y, nhi * C);
    free(mean), free(std), free(z), free(x), free(y);
    cq_st_close(g);
}

static void test_golden(void **st) {
    (void)st;
    cJSON *root = tu_read_json(GOLD_DIR "/index.json");
    if (!root) {
        printf("  %s is absent (run tools/golden_ltx2_upsampler.py): skipped\n", GOLD_DIR);
        skip();
    }
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models"), *mo;
    if (!cJSON_IsObject(models) || !models->child) fail_msg("index.json: no models");
    int n_cases = 0;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir("ltx2_upsampler_golden"));
    cJSON_ArrayForEach(mo, models) {
        char folder[1200], pack[1300];
        snprintf(folder, sizeof folder, "%s/%s", GOLD_DIR, mo->string);
        snprintf(pack, sizeof pack, "%s/%s-f32.cmf", tmp, mo->string);
        cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
        cq_convert_report rep;
        cq_status s = cq_convert(folder, pack, &opts, &rep);
        if (s == CQ_OK && strcmp(rep.arch, "ltx2_upsampler") != 0)
            s = cq_fail(CQ_ERR_INTERNAL, "arch '%s', not ltx2_upsampler", rep.arch);
        cq_convert_report_free(&rep);
        if (s != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
        cq_cmf *cmf;
        cq_ltx2_ups *m;
        open_pack(pack, &cmf, &m);
        const cJSON *cases = cJSON_GetObjectItemCaseSensitive(mo, "cases"), *cs;
        if (!cJSON_IsArray(cases) || cJSON_GetArraySize(cases) < 1)
            fail_msg("index.json: model %s has no cases", mo->string);
        cJSON_ArrayForEach(cs, cases) {
            golden_case(m, cs, GOLD_DIR);
            n_cases++;
        }
        cq_ltx2_ups_free(m);
        cq_cmf_close(cmf);
    }
    if (n_cases < 3) fail_msg("index.json lists %d cases, expected at least 3", n_cases);
    cJSON_Delete(root);
}

static int setup(void **st) {
    (void)st;
    return tu_backend_create(&g_arg, 0, &g_be) == CQ_OK ? 0 : -1;
}

static int teardown(void **st) {
    (void)st;
    cq_backend_free(g_be);
    return 0;
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_ltx2_upsampler", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_bare),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests_name(g_arg.device ? "test_ltx2_upsampler (device)" : "test_ltx2_upsampler (host)",
                                       tests, setup, teardown);
}
