/*
 * test_ltx2_text.c — LTX-2.3 / 2.5's feature extractor and embeddings
 * connectors (models/ltx2_text.h) on the backend named by the one argument
 * (testutil.h: `test_ltx2_text cpu`, `test_ltx2_text vulkan`, ...).
 *
 * Always on:
 *  - two random configs written here into packs through the CMF writer
 *    (prefix "connectors."): a tiny one (video 2 heads x 16, gated, 2 blocks;
 *    audio 4 heads x 4, ungated, 2 blocks; 8 registers) and one with the real
 *    head widths (video 2 x 128, audio 2 x 64, gated, 1 block), each against
 *    a plain double-precision host loop written below from diffusers'
 *    LTX2TextConnectors: the features of every token (pads: the bias), each
 *    connector from given features, and the whole encode (its features and
 *    every block's output through the taps), within TOL_HOST x RMS where the
 *    backend computes in f32 (the CPU, Vulkan) and TOL_DEVICE where it rounds
 *    operands to f16/bf16; on a left padding as the pipeline pads, no
 *    padding, more pads than registers, and a mask with holes;
 *  - bad configs and bad inputs refused with messages that say why.
 * With tests/golden/ltx2_text (tools/golden_ltx2_text.py; skipped while it is
 * absent): each model folder converted as a user would, every case's
 * projected features, connector input, block outputs and final outputs
 * within 1e-4 x RMS of diffusers' f32 CPU run on the CPU, and on a device
 * within a quarter of the reference's own bf16 error stored per output
 * (both as max |d| / rms and as rms(d) / rms; at least 1e-4).
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
#include "models/ltx2_text.h"
#include "models/tables.h"
#include "ops/ops.h"

#define TOL_HOST 1e-5
#define TOL_WIDE 3e-5   /* 128-wide heads, 4096-long feature rows: more f32 rounding per value */
/* f16 GEMM operands on a device: test_ops holds one GEMM to 2.5e-3 of max|ref|, and a forward compounds a few of
 * them (5.5e-3 at most on the H200 (the wide connector)); the reference's own check of a device is the golden case's quarter of its bf16 error */
#define TOL_DEVICE 1e-2
#define TOL_GOLD 1e-4
#define MAXL 4

static tu_backend_arg g_arg;
static cq_backend *g_be;

/* ---- configs and weights ------------------------------------------------ */
typedef struct tcfg {
    int C, L;
    int heads[2], hd[2], layers[2], R[2];
    bool gated[2];
    bool proj_bias;
} tcfg;

static const tcfg k_tiny = {16, 4, {2, 4}, {16, 4}, {2, 2}, {8, 8}, {true, false}, true};
static const tcfg k_wide = {32, 4, {2, 2}, {128, 64}, {1, 1}, {8, 8}, {true, true}, true};

static int dimof(const tcfg *c, int s) { return c->heads[s] * c->hd[s]; }

static void config_json(const tcfg *c, char *buf, size_t cap) {
    snprintf(buf, cap,
             "{\"_class_name\": \"LTX2TextConnectors\", \"caption_channels\": %d, \"text_proj_in_factor\": %d,"
             " \"video_connector_num_attention_heads\": %d, \"video_connector_attention_head_dim\": %d,"
             " \"video_connector_num_layers\": %d, \"video_connector_num_learnable_registers\": %d,"
             " \"video_gated_attn\": %s, \"audio_connector_num_attention_heads\": %d,"
             " \"audio_connector_attention_head_dim\": %d, \"audio_connector_num_layers\": %d,"
             " \"audio_connector_num_learnable_registers\": %d, \"audio_gated_attn\": %s,"
             " \"connector_rope_base_seq_len\": 4096, \"rope_theta\": 10000.0, \"rope_double_precision\": true,"
             " \"causal_temporal_positioning\": false, \"rope_type\": \"split\", \"per_modality_projections\": true,"
             " \"video_hidden_dim\": %d, \"audio_hidden_dim\": %d, \"proj_bias\": %s}",
             c->C, c->L, c->heads[0], c->hd[0], c->layers[0], c->R[0], c->gated[0] ? "true" : "false", c->heads[1],
             c->hd[1], c->layers[1], c->R[1], c->gated[1] ? "true" : "false", dimof(c, 0), dimof(c, 1),
             c->proj_bias ? "true" : "false");
}

typedef struct blkw {
    float *q, *qb, *k, *kb, *v, *vb, *o, *ob, *nq, *nk, *gw, *gb, *f1, *f1b, *f2, *f2b;
} blkw;
typedef struct connw {
    float *proj, *projb, *reg;
    blkw b[MAXL];
} connw;
typedef struct weights {
    connw s[2];
} weights;

static float *rnd(tu_rng *r, size_t n, float scale, float base) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    tu_fill_normal(r, x, n, scale);
    for (size_t i = 0; i < n; i++) x[i] += base;
    return x;
}

static void make_weights(const tcfg *c, weights *w) {
    tu_rng r;
    tu_rng_seed(&r, 5151);
    memset(w, 0, sizeof *w);
    const size_t CL = (size_t)c->C * c->L;
    for (int s = 0; s < 2; s++) {
        const size_t D = (size_t)dimof(c, s);
        connw *x = &w->s[s];
        x->proj = rnd(&r, D * CL, 1.0f / sqrtf((float)CL), 0);
        x->projb = rnd(&r, D, 0.1f, 0);
        x->reg = rnd(&r, (size_t)c->R[s] * D, 0.6f, 0);
        const float sd = 1.0f / sqrtf((float)D), s4 = 1.0f / sqrtf(4.0f * (float)D);
        for (int l = 0; l < c->layers[s]; l++) {
            blkw *b = &x->b[l];
            b->q = rnd(&r, D * D, sd, 0), b->qb = rnd(&r, D, 0.1f, 0);
            b->k = rnd(&r, D * D, sd, 0), b->kb = rnd(&r, D, 0.1f, 0);
            b->v = rnd(&r, D * D, sd, 0), b->vb = rnd(&r, D, 0.1f, 0);
            b->o = rnd(&r, D * D, sd, 0), b->ob = rnd(&r, D, 0.1f, 0);
            b->nq = rnd(&r, D, 0.2f, 1), b->nk = rnd(&r, D, 0.2f, 1);
            if (c->gated[s]) b->gw = rnd(&r, (size_t)c->heads[s] * D, sd, 0), b->gb = rnd(&r, (size_t)c->heads[s], 0.5f, 0);
            b->f1 = rnd(&r, 4 * D * D, sd, 0), b->f1b = rnd(&r, 4 * D, 0.1f, 0);
            b->f2 = rnd(&r, 4 * D * D, s4, 0), b->f2b = rnd(&r, D, 0.1f, 0);
        }
    }
}

static void free_weights(const tcfg *c, weights *w) {
    for (int s = 0; s < 2; s++) {
        connw *x = &w->s[s];
        free(x->proj), free(x->projb), free(x->reg);
        for (int l = 0; l < c->layers[s]; l++) {
            blkw *b = &x->b[l];
            float *p[] = {b->q, b->qb, b->k, b->kb, b->v, b->vb, b->o, b->ob, b->nq, b->nk, b->gw, b->gb,
                          b->f1, b->f1b, b->f2, b->f2b};
            for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
        }
    }
}

/* Where the weights go: a CMF pack (names under "connectors.") or a diffusers folder's safetensors (bare names). */
typedef struct sink {
    cq_cmf_writer *cmf;
    cq_st_writer *st;
} sink;

static void add_f32(const sink *k, const char *name, const float *d, int ndim, uint64_t a, uint64_t b) {
    uint64_t shape[2] = {a, b};
    uint64_t n = ndim == 1 ? a : a * b;
    cq_status s = k->cmf ? cq_cmf_writer_add(k->cmf, name, CQ_DTYPE_F32, ndim, shape, d, n * sizeof(float))
                         : cq_st_writer_add_f32(k->st, name + strlen("connectors."), ndim, shape, d);
    if (s != CQ_OK) fail_msg("add %s: %s", name, cq_last_error());
}

static const char k_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"ltx2_connectors\",\"hidden_size\":32,"
    "\"intermediate_size\":128,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":2,\"head_dim\":16,"
    "\"vocab_size\":0,\"max_position_embeddings\":0,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
    "\"rms_norm_eps\":1e-6}}";

static void write_weights(const sink *wr, const tcfg *c, const weights *w, const char *skip);

/* The pack of w under "connectors." with `config`; skip names the one tensor left out (NULL: none). */
static const char *write_pack(const char *dir, const tcfg *c, const weights *w, const char *leaf, const char *config,
                              const char *skip) {
    const char *path = tu_path(dir, leaf);
    sink k = {0};
    assert_int_equal(cq_cmf_writer_create(path, &k.cmf), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(k.cmf, k_header, strlen(k_header)), CQ_OK);
    uint64_t cl[1] = {strlen(config)};
    assert_int_equal(cq_cmf_writer_add(k.cmf, "connectors.config_json", CQ_DTYPE_U8, 1, cl, config, cl[0]), CQ_OK);
    write_weights(&k, c, w, skip);
    if (cq_cmf_writer_finish(k.cmf) != CQ_OK) fail_msg("finish: %s", cq_last_error());
    cq_cmf_writer_free(k.cmf);
    return path;
}

/* The same weights as a diffusers LTX2TextConnectors folder (config.json, diffusion_pytorch_model.safetensors). */
static const char *write_folder(const char *dir, const tcfg *c, const weights *w, const char *leaf,
                                const char *config) {
    static char keep[1200];
    snprintf(keep, sizeof keep, "%s", tu_path(dir, leaf));
    assert_int_equal(tu_system("mkdir -p '%s'", keep), 0);
    sink k = {0};
    assert_int_equal(cq_st_writer_create(&k.st), CQ_OK);
    write_weights(&k, c, w, NULL);
    if (cq_st_writer_save(k.st, tu_path(keep, "diffusion_pytorch_model.safetensors")) != CQ_OK)
        fail_msg("save: %s", cq_last_error());
    cq_st_writer_free(k.st);
    assert_int_equal(tu_write_file(tu_path(keep, "config.json"), config, strlen(config)), 0);
    return keep;
}

static void write_weights(const sink *wr, const tcfg *c, const weights *w, const char *skip) {
    static const char *const sn[2] = {"video", "audio"};
    char n[192];
#define ADD(d_, nd_, a_, b_, ...)                                                      \
    do {                                                                               \
        snprintf(n, sizeof n, __VA_ARGS__);                                            \
        if (!skip || strcmp(skip, n) != 0) add_f32(wr, n, d_, nd_, a_, b_);            \
    } while (0)
    for (int s = 0; s < 2; s++) {
        const connw *x = &w->s[s];
        const uint64_t D = (uint64_t)dimof(c, s), CL = (uint64_t)c->C * c->L;
        ADD(x->proj, 2, D, CL, "connectors.%s_text_proj_in.weight", sn[s]);
        if (c->proj_bias) ADD(x->projb, 1, D, 0, "connectors.%s_text_proj_in.bias", sn[s]);
        ADD(x->reg, 2, (uint64_t)c->R[s], D, "connectors.%s_connector.learnable_registers", sn[s]);
        for (int l = 0; l < c->layers[s]; l++) {
            const blkw *b = &x->b[l];
#define BL(d_, nd_, a_, b_, leaf) ADD(d_, nd_, a_, b_, "connectors.%s_connector.transformer_blocks.%d.%s", sn[s], l, leaf)
            BL(b->q, 2, D, D, "attn1.to_q.weight");
            BL(b->qb, 1, D, 0, "attn1.to_q.bias");
            BL(b->k, 2, D, D, "attn1.to_k.weight");
            BL(b->kb, 1, D, 0, "attn1.to_k.bias");
            BL(b->v, 2, D, D, "attn1.to_v.weight");
            BL(b->vb, 1, D, 0, "attn1.to_v.bias");
            BL(b->o, 2, D, D, "attn1.to_out.0.weight");
            BL(b->ob, 1, D, 0, "attn1.to_out.0.bias");
            BL(b->nq, 1, D, 0, "attn1.norm_q.weight");
            BL(b->nk, 1, D, 0, "attn1.norm_k.weight");
            if (c->gated[s]) {
                BL(b->gw, 2, (uint64_t)c->heads[s], D, "attn1.to_gate_logits.weight");
                BL(b->gb, 1, (uint64_t)c->heads[s], 0, "attn1.to_gate_logits.bias");
            }
            BL(b->f1, 2, 4 * D, D, "ff.net.0.proj.weight");
            BL(b->f1b, 1, 4 * D, 0, "ff.net.0.proj.bias");
            BL(b->f2, 2, D, 4 * D, "ff.net.2.weight");
            BL(b->f2b, 1, D, 0, "ff.net.2.bias");
#undef BL
        }
    }
#undef ADD
}

/* ---- the double-precision host loop (diffusers' LTX2TextConnectors) ------ */
static void rmsnorm(double *x, int n, const float *w) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    const double r = 1.0 / sqrt(s / n + 1e-6);
    for (int i = 0; i < n; i++) x[i] = x[i] * r * (w ? (double)w[i] : 1.0);
}

static void linear(double *y, const float *W, const float *b, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = b ? (double)b[r] : 0.0;
        for (int k = 0; k < cols; k++) s += (double)W[(size_t)r * cols + k] * x[k];
        y[r] = s;
    }
}

static double gelu_tanh(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/* features of stream s for every token: out [T][D] (a pad token's row is the bias) */
static void host_features(const tcfg *c, const weights *w, int s, const float *hidden, const uint8_t *mask, int T,
                          double *out) {
    const int C = c->C, L = c->L, D = dimof(c, s);
    double *f = malloc((size_t)C * L * sizeof(double)), *row = malloc((size_t)C * sizeof(double));
    assert_true(f && row);
    const double scale = sqrt((double)D / (double)C);
    for (int t = 0; t < T; t++) {
        const bool real = !mask || mask[t];
        for (int l = 0; l < L; l++) {
            for (int k = 0; k < C; k++) row[k] = hidden[((size_t)l * T + t) * C + k];
            rmsnorm(row, C, NULL);
            for (int k = 0; k < C; k++) f[(size_t)k * L + l] = real ? row[k] * scale : 0.0; /* state index fastest */
        }
        linear(out + (size_t)t * D, w->s[s].proj, c->proj_bias ? w->s[s].projb : NULL, f, D, C * L);
    }
    free(f), free(row);
}

/* the connector of stream s on features feat [T][D]: out [T][D]; blocks [layers][T][D] (NULL: not wanted) */
static void host_connector(const tcfg *c, const weights *w, int s, const double *feat, const uint8_t *mask, int T,
                           double *out, double *blocks) {
    const int D = dimof(c, s), H = c->heads[s], hd = c->hd[s], R = c->R[s], half = D / 2;
    const connw *cw = &w->s[s];
    double *x = malloc((size_t)T * D * sizeof(double)), *hn = malloc((size_t)T * D * sizeof(double));
    double *q = malloc((size_t)T * D * sizeof(double)), *k = malloc((size_t)T * D * sizeof(double));
    double *v = malloc((size_t)T * D * sizeof(double)), *a = malloc((size_t)D * sizeof(double));
    double *t1 = malloc((size_t)D * sizeof(double)), *ff = malloc((size_t)4 * D * sizeof(double));
    double *sc = malloc((size_t)T * sizeof(double)), *g = malloc((size_t)H * sizeof(double));
    double *cs = malloc((size_t)T * half * sizeof(double)), *sn = malloc((size_t)T * half * sizeof(double));
    assert_true(x && hn && q && k && v && a && t1 && ff && sc && g && cs && sn);
    /* valid rows first in order, then register i mod R */
    int j = 0;
    for (int i = 0; i < T; i++)
        if (!mask || mask[i]) memcpy(x + (size_t)j++ * D, feat + (size_t)i * D, (size_t)D * sizeof(double));
    for (int i = j; i < T; i++)
        for (int d = 0; d < D; d++) x[(size_t)i * D + d] = cw->reg[(size_t)(i % R) * D + d];
    /* the 1-axis ladder over the whole width: frequency f_j = theta^(j / (half - 1)) pi / 2, in float64 then
     * rounded to f32, and the angle (2 i / 4096 - 1) f_j formed in f32 as the reference forms it (at f_j near
     * 1.6e4 the f32 rounding of the angle is ~1e-3: part of the semantics, not an error) */
    for (int i = 0; i < T; i++)
        for (int jj = 0; jj < half; jj++) {
            const float fr = (float)(pow(10000.0, half > 1 ? (double)jj / (double)(half - 1) : 0.0) * M_PI / 2.0);
            const float u = ((float)i / 4096.0f) * 2.0f - 1.0f;
            const float ang = u * fr;
            cs[(size_t)i * half + jj] = cos((double)ang);
            sn[(size_t)i * half + jj] = sin((double)ang);
        }
    for (int l = 0; l < c->layers[s]; l++) {
        const blkw *b = &cw->b[l];
        for (int i = 0; i < T; i++) {
            double *h = hn + (size_t)i * D;
            memcpy(h, x + (size_t)i * D, (size_t)D * sizeof(double));
            rmsnorm(h, D, NULL);
            linear(q + (size_t)i * D, b->q, b->qb, h, D, D);
            linear(k + (size_t)i * D, b->k, b->kb, h, D, D);
            linear(v + (size_t)i * D, b->v, b->vb, h, D, D);
            rmsnorm(q + (size_t)i * D, D, b->nq);
            rmsnorm(k + (size_t)i * D, D, b->nk);
            for (int hh = 0; hh < H; hh++)
                for (int p = 0; p < hd / 2; p++) {
                    const size_t col = (size_t)i * half + (size_t)hh * (hd / 2) + p;
                    double *bufs[2] = {q + (size_t)i * D + (size_t)hh * hd, k + (size_t)i * D + (size_t)hh * hd};
                    for (int z = 0; z < 2; z++) {
                        const double x1 = bufs[z][p], x2 = bufs[z][p + hd / 2];
                        bufs[z][p] = x1 * cs[col] - x2 * sn[col];
                        bufs[z][p + hd / 2] = x2 * cs[col] + x1 * sn[col];
                    }
                }
        }
        double *nx = malloc((size_t)T * D * sizeof(double));
        assert_non_null(nx);
        for (int i = 0; i < T; i++) {
            for (int hh = 0; hh < H; hh++) {
                const double *qi = q + (size_t)i * D + (size_t)hh * hd;
                double mx = -INFINITY, den = 0;
                for (int jj = 0; jj < T; jj++) {
                    double sum = 0;
                    for (int d = 0; d < hd; d++) sum += qi[d] * k[(size_t)jj * D + (size_t)hh * hd + d];
                    sc[jj] = sum / sqrt((double)hd);
                    if (sc[jj] > mx) mx = sc[jj];
                }
                double *ai = a + (size_t)hh * hd;
                memset(ai, 0, (size_t)hd * sizeof(double));
                for (int jj = 0; jj < T; jj++) {
                    const double e = exp(sc[jj] - mx);
                    den += e;
                    for (int d = 0; d < hd; d++) ai[d] += e * v[(size_t)jj * D + (size_t)hh * hd + d];
                }
                for (int d = 0; d < hd; d++) ai[d] /= den;
            }
            if (c->gated[s]) {
                linear(g, b->gw, b->gb, hn + (size_t)i * D, H, D);
                for (int hh = 0; hh < H; hh++)
                    for (int d = 0; d < hd; d++) a[(size_t)hh * hd + d] *= 2.0 / (1.0 + exp(-g[hh]));
            }
            linear(t1, b->o, b->ob, a, D, D);
            for (int d = 0; d < D; d++) nx[(size_t)i * D + d] = x[(size_t)i * D + d] + t1[d];
            double *h = hn + (size_t)i * D;
            memcpy(h, nx + (size_t)i * D, (size_t)D * sizeof(double));
            rmsnorm(h, D, NULL);
            linear(ff, b->f1, b->f1b, h, 4 * D, D);
            for (int d = 0; d < 4 * D; d++) ff[d] = gelu_tanh(ff[d]);
            linear(t1, b->f2, b->f2b, ff, D, 4 * D);
            for (int d = 0; d < D; d++) nx[(size_t)i * D + d] += t1[d];
        }
        memcpy(x, nx, (size_t)T * D * sizeof(double));
        free(nx);
        if (blocks) memcpy(blocks + (size_t)l * T * D, x, (size_t)T * D * sizeof(double));
    }
    for (int i = 0; i < T; i++) rmsnorm(x + (size_t)i * D, D, NULL);
    memcpy(out, x, (size_t)T * D * sizeof(double));
    free(x), free(hn), free(q), free(k), free(v), free(a), free(t1), free(ff), free(sc), free(g), free(cs), free(sn);
}

/* max |ours - ref| / RMS(ref) over n values */
static double err_d(const float *ours, const double *ref, size_t n) {
    double ss = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)ours[i] - ref[i]);
        ss += ref[i] * ref[i];
        if (!(d <= mx)) mx = d;
    }
    const double rms = sqrt(ss / (double)(n ? n : 1));
    return rms > 0 ? mx / rms : mx;
}

/* ---- taps ---------------------------------------------------------------- */
#define MAX_TAPS 32
typedef struct taps {
    int n;
    char name[MAX_TAPS][48];
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
static double host_tol(const tcfg *c) {
    const bool f32 = cq_backend_op_precision(g_be, CQ_OP_MATMUL, CQ_DTYPE_F32) == CQ_DTYPE_F32 &&
                     cq_backend_op_precision(g_be, CQ_OP_ATTENTION, CQ_DTYPE_F32) == CQ_DTYPE_F32;
    if (!f32) return TOL_DEVICE;
    return c->hd[0] > 32 ? TOL_WIDE : TOL_HOST;
}

static void expect_close(const char *what, const char *name, const float *ours, const double *ref, size_t n,
                         double tol) {
    const double e = err_d(ours, ref, n);
    printf("  %s %s: max|d|/rms %.3g (bound %g)\n", what, name, e, tol);
    if (!(e <= tol)) fail_msg("%s: %s off by %.3g x RMS (> %g)", what, name, e, tol);
}

static void run_case(cq_ltx2_text *m, const tcfg *c, const weights *w, const char *what, int T, const uint8_t *mask) {
    const double tol = host_tol(c);
    tu_rng r;
    tu_rng_seed(&r, 77 + (uint64_t)T);
    float *hidden = rnd(&r, (size_t)c->L * T * c->C, 1.0f, 0.0f);
    for (size_t i = 0; i < (size_t)c->L * T * c->C; i++) hidden[i] *= 1.0f + 0.5f * (float)(i % 7); /* uneven scales */
    float *ours[2], *outs[2];
    double *ref[2], *rout[2], *rblk[2];
    for (int s = 0; s < 2; s++) {
        const size_t n = (size_t)T * dimof(c, s);
        ours[s] = malloc(n * sizeof(float)), outs[s] = malloc(n * sizeof(float));
        ref[s] = malloc(n * sizeof(double)), rout[s] = malloc(n * sizeof(double));
        rblk[s] = malloc((size_t)c->layers[s] * n * sizeof(double));
        assert_true(ours[s] && outs[s] && ref[s] && rout[s] && rblk[s]);
        host_features(c, w, s, hidden, mask, T, ref[s]);
    }
    /* the features of every token */
    if (cq_ltx2_features(m, hidden, mask, T, ours[0], ours[1]) != CQ_OK) fail_msg("features: %s", cq_last_error());
    char nm[64];
    for (int s = 0; s < 2; s++) {
        snprintf(nm, sizeof nm, "%s features", s ? "audio" : "video");
        expect_close(what, nm, ours[s], ref[s], (size_t)T * dimof(c, s), tol);
    }
    /* each connector from the features it is given (the C features, so the connector alone is measured) */
    for (int s = 0; s < 2; s++) {
        const size_t n = (size_t)T * dimof(c, s);
        double *fd = malloc(n * sizeof(double));
        assert_non_null(fd);
        for (size_t i = 0; i < n; i++) fd[i] = ours[s][i];
        host_connector(c, w, s, fd, mask, T, rout[s], NULL);
        free(fd);
        if (cq_ltx2_connector_forward(m, (cq_ltx2_stream)s, ours[s], mask, T, outs[s]) != CQ_OK)
            fail_msg("connector: %s", cq_last_error());
        snprintf(nm, sizeof nm, "%s connector", s ? "audio" : "video");
        expect_close(what, nm, outs[s], rout[s], n, tol);
    }
    /* the whole encode, with its taps */
    for (int s = 0; s < 2; s++) host_connector(c, w, s, ref[s], mask, T, rout[s], rblk[s]);
    taps tp = {0};
    cq_ltx2_text_set_tap(m, tap_fn, &tp);
    if (cq_ltx2_text_encode(m, hidden, mask, T, outs[0], outs[1]) != CQ_OK) fail_msg("encode: %s", cq_last_error());
    cq_ltx2_text_set_tap(m, NULL, NULL);
    int nv = 0;
    for (int i = 0; i < T; i++) nv += !mask || mask[i];
    for (int s = 0; s < 2; s++) {
        const int D = dimof(c, s);
        const char *sn = s ? "audio" : "video";
        snprintf(nm, sizeof nm, "%s_features", sn);
        const float *fv = tap_get(&tp, nm, (size_t)nv * D);
        double *fr = malloc((size_t)nv * D * sizeof(double));
        assert_non_null(fr);
        for (int i = 0, j = 0; i < T; i++)
            if (!mask || mask[i]) memcpy(fr + (size_t)j++ * D, ref[s] + (size_t)i * D, (size_t)D * sizeof(double));
        expect_close(what, nm, fv, fr, (size_t)nv * D, tol);
        free(fr);
        for (int l = 0; l < c->layers[s]; l++) {
            snprintf(nm, sizeof nm, "%s_block%d", sn, l);
            expect_close(what, nm, tap_get(&tp, nm, (size_t)T * D), rblk[s] + (size_t)l * T * D, (size_t)T * D, tol);
        }
        snprintf(nm, sizeof nm, "%s encode", sn);
        expect_close(what, nm, outs[s], rout[s], (size_t)T * D, tol);
        snprintf(nm, sizeof nm, "%s_out", sn);
        assert_memory_equal(tap_get(&tp, nm, (size_t)T * D), outs[s], (size_t)T * D * sizeof(float));
    }
    taps_free(&tp);
    for (int s = 0; s < 2; s++) free(ours[s]), free(outs[s]), free(ref[s]), free(rout[s]), free(rblk[s]);
    free(hidden);
}

static void open_pack(const char *path, cq_cmf **cmf, cq_ltx2_text **m) {
    if (cq_cmf_open(path, cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (cq_ltx2_text_load(*cmf, "connectors.", g_be, m) != CQ_OK) fail_msg("load: %s", cq_last_error());
}

static void host_cases(const tcfg *c, const char *leaf, bool full_checks) {
    weights w;
    make_weights(c, &w);
    char cfg[2048];
    config_json(c, cfg, sizeof cfg);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_text"));
    const char *path = write_pack(dir, c, &w, leaf, cfg, NULL);
    cq_cmf *cmf;
    cq_ltx2_text *m;
    open_pack(path, &cmf, &m);
    const cq_ltx2_text_config *k = cq_ltx2_text_get_config(m);
    assert_int_equal(k->conn[CQ_LTX2_VIDEO].dim, dimof(c, 0));
    assert_int_equal(k->conn[CQ_LTX2_AUDIO].n_registers, c->R[1]);
    /* the pack is what the table says */
    cq_tt_report rep;
    int nc = 0;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &nc), CQ_OK);
    assert_int_equal(nc, 1);
    assert_true(rep.missing == 0 && rep.unexpected == 0 && rep.mismatched == 0);
    uint8_t left[16], holes[16], few[24];
    for (int i = 0; i < 16; i++) left[i] = i >= 5, holes[i] = (i % 3) != 1;
    for (int i = 0; i < 24; i++) few[i] = i >= 20;
    run_case(m, c, &w, "left-padded", 16, left);
    if (full_checks) {
        run_case(m, c, &w, "unpadded", 16, NULL);
        run_case(m, c, &w, "more pads than registers", 24, few);
        run_case(m, c, &w, "mask with holes", 16, holes);
    }
    if (full_checks) {
        /* bad inputs */
        const size_t n = (size_t)c->L * 24 * c->C;
        float *h = calloc(n, sizeof(float)), *o0 = malloc((size_t)24 * dimof(c, 0) * sizeof(float)),
              *o1 = malloc((size_t)24 * dimof(c, 1) * sizeof(float));
        assert_true(h && o0 && o1);
        uint8_t none[24] = {0}, two[24];
        memset(two, 1, sizeof two);
        two[3] = 2;
        tu_expect_err(cq_ltx2_text_encode(m, h, left, 12, o0, o1), CQ_ERR_SHAPE, "not a multiple of the video");
        tu_expect_err(cq_ltx2_text_encode(m, h, none, 24, o0, o1), CQ_ERR_INVALID_ARG, "no real token");
        tu_expect_err(cq_ltx2_text_encode(m, h, two, 24, o0, o1), CQ_ERR_INVALID_ARG, "mask[3] is 2");
        tu_expect_err(cq_ltx2_text_encode(m, h, NULL, 0, o0, o1), CQ_ERR_SHAPE, "0 tokens");
        tu_expect_err(cq_ltx2_text_encode(m, NULL, NULL, 24, o0, o1), CQ_ERR_INVALID_ARG, "no hidden states");
        tu_expect_err(cq_ltx2_text_encode(m, h, NULL, 24, o0, NULL), CQ_ERR_INVALID_ARG, "both outputs");
        tu_expect_err(cq_ltx2_connector_forward(m, (cq_ltx2_stream)2, o0, NULL, 24, o1), CQ_ERR_INVALID_ARG,
                      "stream 2");
        tu_expect_err(cq_ltx2_features(m, h, NULL, 24, NULL, NULL), CQ_ERR_INVALID_ARG, "neither stream");
        h[5] = NAN;
        tu_expect_err(cq_ltx2_features(m, h, NULL, 24, o0, NULL), CQ_ERR_NUMERIC, "hidden states");
        free(h), free(o0), free(o1);
    }
    cq_ltx2_text_free(m);
    cq_cmf_close(cmf);
    if (full_checks) {
        /* a missing tensor is named */
        const char *miss = "connectors.audio_connector.transformer_blocks.1.attn1.norm_k.weight";
        path = write_pack(dir, c, &w, "missing.cmf", cfg, miss);
        assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
        cq_status s = cq_ltx2_text_load(cmf, "connectors.", g_be, &m);
        assert_int_not_equal(s, CQ_OK);
        if (!strstr(cq_last_error(), miss)) fail_msg("message: %s", cq_last_error());
        cq_cmf_close(cmf);
    }
    free_weights(c, &w);
}

static void test_tiny(void **st) {
    (void)st;
    host_cases(&k_tiny, "tiny.cmf", true);
}

/* A diffusers folder of the tiny model converted as a user would: arch ltx2_connectors, prefix "connectors.", the
 * table's tensors and nothing else, and the same outputs as the pack written directly (bit for bit on the host). */
static void test_convert(void **st) {
    (void)st;
    const tcfg *c = &k_tiny;
    weights w;
    make_weights(c, &w);
    char cfg[2048];
    config_json(c, cfg, sizeof cfg);
    char dir[1100], dp[1200], pack[1200];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("ltx2_text"));
    snprintf(dp, sizeof dp, "%s", write_pack(dir, c, &w, "direct.cmf", cfg, NULL));
    const char *folder = write_folder(dir, c, &w, "folder", cfg);
    snprintf(pack, sizeof pack, "%s", tu_path(dir, "converted.cmf"));
    cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(folder, pack, &opts, &rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
    if (strcmp(rep.arch, "ltx2_connectors") != 0) fail_msg("arch '%s', not ltx2_connectors", rep.arch);
    cq_convert_report_free(&rep);
    cq_cmf *ca, *cb;
    cq_ltx2_text *ma, *mb;
    open_pack(dp, &ca, &ma);
    open_pack(pack, &cb, &mb);
    cq_tt_report tr;
    int nc = 0;
    assert_int_equal(cq_tables_check_pack(cb, NULL, NULL, &tr, &nc), CQ_OK);
    assert_int_equal(nc, 1);
    assert_true(tr.missing == 0 && tr.unexpected == 0 && tr.mismatched == 0);
    const int T = 16;
    uint8_t mask[16];
    for (int i = 0; i < T; i++) mask[i] = i >= 5;
    tu_rng r;
    tu_rng_seed(&r, 9);
    float *h = rnd(&r, (size_t)c->L * T * c->C, 1.0f, 0.0f);
    const size_t nv = (size_t)T * dimof(c, 0), na = (size_t)T * dimof(c, 1);
    float *va = malloc(nv * sizeof(float)), *aa = malloc(na * sizeof(float));
    float *vb = malloc(nv * sizeof(float)), *ab = malloc(na * sizeof(float));
    assert_true(va && aa && vb && ab);
    assert_int_equal(cq_ltx2_text_encode(ma, h, mask, T, va, aa), CQ_OK);
    assert_int_equal(cq_ltx2_text_encode(mb, h, mask, T, vb, ab), CQ_OK);
    if (!g_arg.device) {
        assert_memory_equal(va, vb, nv * sizeof(float));
        assert_memory_equal(aa, ab, na * sizeof(float));
    } else {
        assert_true(tu_max_rel(vb, va, nv, tu_rms(va, nv)) <= 1e-6 && tu_max_rel(ab, aa, na, tu_rms(aa, na)) <= 1e-6);
    }
    free(h), free(va), free(aa), free(vb), free(ab);
    cq_ltx2_text_free(ma);
    cq_ltx2_text_free(mb);
    cq_cmf_close(ca);
    cq_cmf_close(cb);
    free_weights(c, &w);
}

static void test_wide(void **st) {
    (void)st;
    host_cases(&k_wide, "wide.cmf", false);
}

/* ---- configs refused ---------------------------------------------------- */
static void expect_bad(const char *from, const char *to, cq_status want, const char *needle) {
    char cfg[2048], buf[2048];
    config_json(&k_tiny, cfg, sizeof cfg);
    const char *at = strstr(cfg, from);
    if (!at) fail_msg("'%s' is not in the test config", from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    cq_ltx2_text_config c;
    tu_expect_err(cq_ltx2_text_parse_config_text(buf, &c), want, needle);
}

static void test_bad_config(void **st) {
    (void)st;
    char cfg[2048];
    config_json(&k_tiny, cfg, sizeof cfg);
    cq_ltx2_text_config c;
    assert_int_equal(cq_ltx2_text_parse_config_text(cfg, &c), CQ_OK);
    assert_int_equal(c.caption_channels, 16);
    assert_int_equal(c.n_states, 4);
    assert_true(c.conn[0].gated && !c.conn[1].gated && c.proj_bias && c.rope_f64);
    expect_bad("\"per_modality_projections\": true", "\"per_modality_projections\": false", CQ_ERR_UNSUPPORTED,
               "LTX-2.0's single projection");
    expect_bad("\"rope_type\": \"split\", ", "", CQ_ERR_UNSUPPORTED, "no rope_type");
    expect_bad("\"rope_type\": \"split\"", "\"rope_type\": \"interleaved\"", CQ_ERR_UNSUPPORTED,
               "rope_type is \"interleaved\"");
    expect_bad("\"video_connector_num_learnable_registers\": 8", "\"video_connector_num_learnable_registers\": null",
               CQ_ERR_UNSUPPORTED, "without learnable registers");
    expect_bad("\"audio_connector_num_learnable_registers\": 8", "\"audio_connector_num_learnable_registers\": 0",
               CQ_ERR_UNSUPPORTED, "is 0");
    expect_bad("\"video_hidden_dim\": 32", "\"video_hidden_dim\": 64", CQ_ERR_UNSUPPORTED,
               "video_hidden_dim 64 differs from the video connector's width");
    expect_bad("\"audio_connector_attention_head_dim\": 4", "\"audio_connector_attention_head_dim\": 5", CQ_ERR_PARSE,
               "must be even");
    expect_bad("\"caption_channels\": 16", "\"caption_channels\": 0", CQ_ERR_PARSE, "caption_channels must be");
    expect_bad("\"LTX2TextConnectors\"", "\"LTX2VideoTransformer3DModel\"", CQ_ERR_UNSUPPORTED, "");
    tu_expect_err(cq_ltx2_text_parse_config_text("[1]", &c), CQ_ERR_PARSE, "not a JSON object");
    /* the real LTX-2.5 config (diffusers' converter, "2.5", Gemma-4 12B: hidden 3840, 48 layers) */
    static const char real[] =
        "{\"_class_name\": \"LTX2TextConnectors\", \"caption_channels\": 3840, \"text_proj_in_factor\": 49,"
        " \"video_connector_num_attention_heads\": 32, \"video_connector_attention_head_dim\": 128,"
        " \"video_connector_num_layers\": 8, \"video_connector_num_learnable_registers\": 128,"
        " \"video_gated_attn\": true, \"audio_connector_num_attention_heads\": 32,"
        " \"audio_connector_attention_head_dim\": 64, \"audio_connector_num_layers\": 8,"
        " \"audio_connector_num_learnable_registers\": 128, \"audio_gated_attn\": true,"
        " \"connector_rope_base_seq_len\": 4096, \"rope_theta\": 10000.0, \"rope_double_precision\": true,"
        " \"causal_temporal_positioning\": false, \"rope_type\": \"split\", \"per_modality_projections\": true,"
        " \"video_hidden_dim\": 4096, \"audio_hidden_dim\": 2048, \"proj_bias\": true}";
    if (cq_ltx2_text_parse_config_text(real, &c) != CQ_OK) fail_msg("the LTX-2.5 config: %s", cq_last_error());
    assert_int_equal(c.conn[0].dim, 4096);
    assert_int_equal(c.conn[1].dim, 2048);
    assert_int_equal(c.conn[0].n_layers, 8);
    assert_int_equal(c.n_states, 49);
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_text_tensors(&c, "connectors.", &t), CQ_OK);
    /* 4 top-level matrices + 2 biases, 14 tensors a block plus the 2 of its gate, 8 blocks a stream */
    assert_int_equal((int)t.n, 6 + 2 * 8 * 16);
    const cq_tt_entry *e = cq_tt_find(&t, "connectors.video_text_proj_in.weight");
    assert_non_null(e);
    assert_true(e->shape[0] == 4096 && e->shape[1] == 188160);
    cq_tt_list_free(&t);
}

/* ---- golden data from diffusers ------------------------------------------ */
#define GOLD_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_text"

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

/* ours against the golden tensor `name` ([rows][cols]: want rows; NULL keep: every row), bounded by 1e-4 on the
 * host and a quarter of the reference's bf16 errors of that output (case's "bf16" object) on a device */
static void gold_check(const char *cs, const cq_st *g, const cJSON *bf16, const char *name, const float *ours,
                       size_t n, const uint8_t *keep, int T) {
    size_t nr = 0;
    float *ref = tu_st_floats(g, name, &nr);
    if (!ref || nr != n) fail_msg("case %s: golden %s missing or of %zu values (want %zu)", cs, name, nr, n);
    if (keep) { /* the rows kept, in order */
        const size_t cols = n / (size_t)T;
        size_t j = 0;
        for (int i = 0; i < T; i++)
            if (keep[i]) memmove(ref + j++ * cols, ref + (size_t)i * cols, cols * sizeof(float));
        n = j * cols;
    }
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

static void golden_case(cq_ltx2_text *m, const cJSON *cs, const char *dir) {
    const cq_ltx2_text_config *c = cq_ltx2_text_get_config(m);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cs, "name");
    const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(cs, "bf16");
    if (!cJSON_IsString(nm) || !cJSON_IsObject(bf16)) fail_msg("index.json: a case without name or bf16");
    char path[1300];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", dir, nm->valuestring);
    cq_st *g;
    if (cq_st_open(path, &g) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    const cq_st_tensor *tm = cq_st_find(g, "mask");
    if (!tm || tm->dtype != CQ_ST_I32) fail_msg("case %s: mask missing or not I32", nm->valuestring);
    const int T = (int)tm->nelem;
    uint8_t *mask = malloc((size_t)T);
    int32_t *mk = malloc((size_t)T * sizeof(int32_t));
    assert_true(mask && mk);
    memcpy(mk, tm->data, (size_t)T * sizeof(int32_t));
    for (int i = 0; i < T; i++) mask[i] = (uint8_t)(mk[i] != 0);
    size_t nh = 0;
    float *hidden = tu_st_floats(g, "hidden_states", &nh);
    if (!hidden || nh != (size_t)c->n_states * T * c->caption_channels)
        fail_msg("case %s: hidden_states missing or mis-sized", nm->valuestring);
    float *feat[2], *out[2];
    for (int s = 0; s < 2; s++) {
        feat[s] = malloc((size_t)T * c->conn[s].dim * sizeof(float));
        out[s] = malloc((size_t)T * c->conn[s].dim * sizeof(float));
        assert_true(feat[s] && out[s]);
    }
    /* every token's features */
    if (cq_ltx2_features(m, hidden, mask, T, feat[0], feat[1]) != CQ_OK) fail_msg("features: %s", cq_last_error());
    gold_check(nm->valuestring, g, bf16, "video_features", feat[0], (size_t)T * c->conn[0].dim, NULL, T);
    gold_check(nm->valuestring, g, bf16, "audio_features", feat[1], (size_t)T * c->conn[1].dim, NULL, T);
    /* the encode with its taps */
    taps tp = {0};
    cq_ltx2_text_set_tap(m, tap_fn, &tp);
    if (cq_ltx2_text_encode(m, hidden, mask, T, out[0], out[1]) != CQ_OK) fail_msg("encode: %s", cq_last_error());
    cq_ltx2_text_set_tap(m, NULL, NULL);
    char k[64];
    for (int s = 0; s < 2; s++) {
        const char *sn = s ? "audio" : "video";
        const size_t n = (size_t)T * c->conn[s].dim;
        int nv = 0;
        for (int i = 0; i < T; i++) nv += mask[i];
        snprintf(k, sizeof k, "%s_features", sn);
        gold_check(nm->valuestring, g, bf16, k, tap_get(&tp, k, (size_t)nv * c->conn[s].dim),
                   (size_t)T * c->conn[s].dim, mask, T);
        snprintf(k, sizeof k, "%s_in", sn);
        gold_check(nm->valuestring, g, bf16, k, tap_get(&tp, k, n), n, NULL, T);
        for (int l = 0; l < c->conn[s].n_layers; l++) {
            snprintf(k, sizeof k, "%s_block%d", sn, l);
            gold_check(nm->valuestring, g, bf16, k, tap_get(&tp, k, n), n, NULL, T);
        }
        snprintf(k, sizeof k, "%s_out", sn);
        gold_check(nm->valuestring, g, bf16, k, out[s], n, NULL, T);
        /* the RoPE tables: the same ladder, within f32 cos/sin rounding */
        for (int z = 0; z < 2; z++) {
            snprintf(k, sizeof k, "rope_%s_%s", sn, z ? "sin" : "cos");
            size_t nr = 0;
            float *ref = tu_st_floats(g, k, &nr);
            const float *ours = tap_get(&tp, k, (size_t)T * c->conn[s].dim / 2);
            if (!ref || nr != (size_t)T * c->conn[s].dim / 2) fail_msg("case %s: %s missing", nm->valuestring, k);
            double worst = 0;
            for (size_t i = 0; i < nr; i++) worst = fmax(worst, fabs((double)ours[i] - ref[i]));
            printf("  golden %s %s: max|d| %.3g\n", nm->valuestring, k, worst);
            if (!(worst <= 1e-6)) fail_msg("golden %s: %s off by %.3g", nm->valuestring, k, worst);
            free(ref);
        }
        /* the connector alone from the reference's features */
        size_t nf = 0;
        snprintf(k, sizeof k, "%s_features", sn);
        float *rf = tu_st_floats(g, k, &nf);
        assert_non_null(rf);
        if (cq_ltx2_connector_forward(m, (cq_ltx2_stream)s, rf, mask, T, out[s]) != CQ_OK)
            fail_msg("connector: %s", cq_last_error());
        snprintf(k, sizeof k, "%s_out", sn);
        gold_check(nm->valuestring, g, bf16, k, out[s], n, NULL, T);
        free(rf);
    }
    taps_free(&tp);
    for (int s = 0; s < 2; s++) free(feat[s]), free(out[s]);
    free(hidden), free(mask), free(mk);
    cq_st_close(g);
}

static void test_golden(void **st) {
    (void)st;
    cJSON *root = tu_read_json(GOLD_DIR "/index.json");
    if (!root) {
        printf("  %s is absent (run tools/golden_ltx2_text.py): skipped\n", GOLD_DIR);
        skip();
    }
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models"), *mo;
    if (!cJSON_IsObject(models) || !models->child) fail_msg("index.json: no models");
    int n_cases = 0;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s", tu_tmpdir("ltx2_text_golden"));
    cJSON_ArrayForEach(mo, models) {
        char folder[1200], pack[1300];
        snprintf(folder, sizeof folder, "%s/%s", GOLD_DIR, mo->string);
        snprintf(pack, sizeof pack, "%s/%s-f32.cmf", tmp, mo->string);
        cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
        cq_convert_report rep;
        cq_status s = cq_convert(folder, pack, &opts, &rep);
        if (s == CQ_OK && strcmp(rep.arch, "ltx2_connectors") != 0)
            s = cq_fail(CQ_ERR_INTERNAL, "arch '%s', not ltx2_connectors", rep.arch);
        cq_convert_report_free(&rep);
        if (s != CQ_OK) fail_msg("convert %s: %s", folder, cq_last_error());
        cq_cmf *cmf;
        cq_ltx2_text *m;
        open_pack(pack, &cmf, &m);
        const cJSON *cases = cJSON_GetObjectItemCaseSensitive(mo, "cases"), *cs;
        if (!cJSON_IsArray(cases) || cJSON_GetArraySize(cases) < 1) fail_msg("index.json: model %s has no cases", mo->string);
        cJSON_ArrayForEach(cs, cases) {
            golden_case(m, cs, GOLD_DIR);
            n_cases++;
        }
        cq_ltx2_text_free(m);
        cq_cmf_close(cmf);
    }
    if (n_cases < 4) fail_msg("index.json lists %d cases, expected at least 4", n_cases);
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
    int rc = tu_backend_select("test_ltx2_text", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests_name(g_arg.device ? "test_ltx2_text (device)" : "test_ltx2_text (host)", tests,
                                       setup, teardown);
}
