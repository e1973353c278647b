/*
 * test_qwen3.c — the Qwen3 / Qwen3-VL text tower (the LLM behind `cortiq
 * run`, and the Qwen-Image-2.1 pipeline's text encoder) against
 * transformers, on the backend named by the one argument (testutil.h:
 * `test_qwen3 cpu`, label unit; `test_qwen3 cuda`, registered as
 * test_qwen3_cuda, label gpu; exits 77, skipped, where the backend is not
 * built or no device is present).
 *
 * tests/golden/qwen3/<cfg>/ are Hugging Face folders of tiny random models
 * (tools/golden_qwen3.py) with golden.safetensors: per prompt the ids, every
 * layer's hidden state (embeddings first, the last one before the final
 * norm), the final norm's output, the logits and 32 greedy tokens; and a
 * chat conversation's ids with its 32 greedy tokens. Each folder is
 * converted to an f32 .cmf here, as a user would.
 *
 * Tolerances: for every compared tensor (one layer's [T, H] hidden state,
 * the normed output, the [T, V] logits) the error is
 *     rel = max |ours - ref| / max |ref|
 * and must be <= 1e-4 against transformers on the CPU, <= 3e-3 on a device
 * (it rounds GEMM operands to f16 and, at head_dim 128, attention operands
 * to bf16: the bound the denoiser's device test holds).
 *
 * On the CPU, the cached path (prefill, then one token at a time) against a
 * whole-sequence recompute must agree to 1e-5 (only the summation order
 * differs), and greedy tokens must be identical for all 32 steps. Also: the
 * tower under a `te.` prefix and with transformers 4.57's config layout,
 * scaled RoPE refused, missing tensors named, and quantized conversions (CPU
 * backend = reference backend).
 *
 * On a device, decoding with the K/V cache, teacher-forced on transformers'
 * 32 greedy tokens after a prompt prefilled in chunks of 7: every step's
 * logits within 3e-3 of the CPU backend's on the same inputs, and the
 * device's greedy choice equal to transformers' wherever the CPU's top two
 * logits are further apart than the bound allows either backend to move
 * them.
 *
 * Bad ids and cache arguments are refused on both (checked before any op).
 *
 * Multimodal input: cq_qwen3_rope_index against hand-numbered sequences and
 * its refusals (host); with all axes at 0..n-1 and image rows given their own
 * embeddings the multimodal forward equals the text forward (bit for bit on
 * the CPU); and against transformers (mrope.safetensors in the qwen25vl_a
 * and qwen3vl_a folders, tools/golden_qwen25vl_mrope.py), text with one and
 * with two images, image rows injected: the position ids of the model's own
 * get_rope_index exactly, and every hidden state and the normed output with
 * max |ours - ref| <= 1e-4 x RMS(ref) on the CPU (on a device: the 3e-3
 * relative bound above).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/qwen3.h"
#include "ops/ops.h"
#include "qwen3_golden.h"

#define TOL_REF 1e-4      /* against transformers, on the CPU */
#define TOL_CACHE 1e-5
#define DEVICE_BOUND 3e-3 /* against transformers, and the device's cached decode against the CPU's */
#define GREEDY 32

static tu_backend_arg g_arg;
static double g_tol_ref = TOL_REF; /* the backend under test against transformers */

typedef struct fixture {
    const char *cfg;
    cq_cmf *cmf;
    cq_backend *be, *cpu; /* the backend under test; on a device run, the CPU backend too */
    cq_qwen3 *m, *cpu_m;
    cq_st *gold;
} fixture;

static void fx_open(fixture *f, const char *cfg) {
    memset(f, 0, sizeof *f);
    f->cfg = cfg;
    const char *path = qw_convert(cfg);
    if (cq_cmf_open(path, &f->cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (tu_backend_create(&g_arg, 0, &f->be) != CQ_OK) fail_msg("backend %s: %s", g_arg.name, cq_last_error());
    if (cq_qwen3_load(f->cmf, "", f->be, &f->m) != CQ_OK)
        fail_msg("load %s on %s: %s", cfg, cq_backend_name(f->be), cq_last_error());
    if (g_arg.device) {
        assert_int_equal(cq_backend_create("cpu", 0, &f->cpu), CQ_OK);
        if (cq_qwen3_load(f->cmf, "", f->cpu, &f->cpu_m) != CQ_OK) fail_msg("load %s on the CPU: %s", cfg, cq_last_error());
    }
    char g[1100];
    snprintf(g, sizeof g, "%s/golden.safetensors", qw_golden_dir(cfg));
    if (cq_st_open(g, &f->gold) != CQ_OK) fail_msg("open %s: %s", g, cq_last_error());
}

static void fx_close(fixture *f) {
    cq_st_close(f->gold);
    cq_qwen3_free(f->m);
    cq_qwen3_free(f->cpu_m);
    cq_backend_free(f->be);
    cq_backend_free(f->cpu);
    cq_cmf_close(f->cmf);
}

/* Whole-sequence forward of prompt `p` against every golden tensor. */
static void check_forward(fixture *f, const char *p) {
    const cq_qwen3_config *c = cq_qwen3_get_config(f->m);
    char name[64];
    snprintf(name, sizeof name, "ids_%s", p);
    int T;
    int32_t *ids = qw_ids(f->gold, name, &T);
    size_t H = (size_t)c->hidden, V = (size_t)c->vocab_size, L = (size_t)c->n_layers;
    float *all = malloc((L + 1) * T * H * sizeof(float)), *normed = malloc(T * H * sizeof(float));
    float *logits = malloc(T * V * sizeof(float)), *last = malloc(T * H * sizeof(float));
    assert_true(all && normed && logits && last);
    cq_qwen3_outputs o = {.all_hidden = all, .normed = normed, .logits = logits};
    if (cq_qwen3_forward(f->m, ids, T, &o) != CQ_OK) fail_msg("forward: %s", cq_last_error());

    snprintf(name, sizeof name, "hidden_%s", p);
    float *gh = qw_floats(f->gold, name, (L + 1) * T * H);
    for (size_t l = 0; l <= L; l++) {
        double e = qw_rel_err(all + l * T * H, gh + l * T * H, T * H);
        printf("  %s prompt %s hidden[%zu]%s: rel %.3g\n", f->cfg, p, l, l == L ? " (pre-norm)" : "", e);
        if (!(e <= g_tol_ref))
            fail_msg("%s prompt %s: hidden state %zu off by %.3g (> %g)", f->cfg, p, l, e, g_tol_ref);
    }
    snprintf(name, sizeof name, "normed_%s", p);
    float *gn = qw_floats(f->gold, name, T * H);
    double en = qw_rel_err(normed, gn, T * H);
    snprintf(name, sizeof name, "logits_%s", p);
    float *gl = qw_floats(f->gold, name, T * V);
    double el = qw_rel_err(logits, gl, T * V);
    printf("  %s prompt %s on %s normed: rel %.3g  logits: rel %.3g (bound %g)\n", f->cfg, p, cq_backend_name(f->be),
           en, el, g_tol_ref);
    if (!(en <= g_tol_ref)) fail_msg("%s prompt %s: normed output off by %.3g (> %g)", f->cfg, p, en, g_tol_ref);
    if (!(el <= g_tol_ref)) fail_msg("%s prompt %s: logits off by %.3g (> %g)", f->cfg, p, el, g_tol_ref);

    /* Asking for one layer's hidden state only runs that deep and gives the same rows (the CPU sums in a fixed
     * order whatever the depth). */
    for (int l = 0; !g_arg.device && l <= (int)L; l += (int)L) {
        cq_qwen3_outputs one = {.layer = l, .hidden = last};
        assert_int_equal(cq_qwen3_forward(f->m, ids, T, &one), CQ_OK);
        assert_memory_equal(last, all + (size_t)l * T * H, T * H * sizeof(float));
    }
    free(gh);
    free(gn);
    free(gl);
    free(all);
    free(normed);
    free(logits);
    free(last);
    free(ids);
}

/* Greedy decoding with the cache from golden ids `ids_name`, compared with
 * `greedy_name`; the step logits are checked against a full recompute. */
static void check_greedy(fixture *f, const char *ids_name, const char *greedy_name) {
    const cq_qwen3_config *c = cq_qwen3_get_config(f->m);
    int T, G;
    int32_t *ids = qw_ids(f->gold, ids_name, &T);
    int32_t *want = qw_ids(f->gold, greedy_name, &G);
    assert_int_equal(G, GREEDY);
    size_t V = (size_t)c->vocab_size;
    int32_t *seq = malloc((size_t)(T + G) * sizeof(int32_t));
    float *step = malloc((size_t)G * V * sizeof(float)), *full = malloc((size_t)(T + G) * V * sizeof(float));
    assert_true(seq && step && full);
    memcpy(seq, ids, (size_t)T * sizeof(int32_t));
    cq_qwen3_cache *cache;
    /* a small prefill chunk so that the prompt spans several chunks */
    assert_int_equal(cq_qwen3_cache_create(f->m, T + G, 7, &cache), CQ_OK);
    if (cq_qwen3_cache_feed(cache, ids, T, step) != CQ_OK) fail_msg("prefill: %s", cq_last_error());
    for (int i = 0; i < G; i++) {
        seq[T + i] = qw_argmax(step + (size_t)i * V, (int)V);
        if (seq[T + i] != want[i])
            fail_msg("%s %s: greedy token %d is %d, transformers chose %d", f->cfg, greedy_name, i, seq[T + i], want[i]);
        if (i + 1 < G) assert_int_equal(cq_qwen3_cache_feed(cache, &seq[T + i], 1, step + (size_t)(i + 1) * V), CQ_OK);
    }
    assert_int_equal(cq_qwen3_cache_len(cache), T + G - 1);
    /* the cached logits at each step equal the recomputed rows */
    cq_qwen3_outputs o = {.logits = full};
    assert_int_equal(cq_qwen3_forward(f->m, seq, T + G - 1, &o), CQ_OK);
    double worst = 0;
    for (int i = 0; i < G; i++) {
        double e = qw_rel_err(step + (size_t)i * V, full + (size_t)(T - 1 + i) * V, V);
        if (e > worst) worst = e;
    }
    printf("  %s %s: %d greedy tokens identical; cache vs recompute rel %.3g\n", f->cfg, greedy_name, G, worst);
    assert_true(worst <= TOL_CACHE);

    /* rewinding the cache and feeding again reproduces the same logits */
    float *again = malloc(V * sizeof(float));
    assert_non_null(again);
    assert_int_equal(cq_qwen3_cache_truncate(cache, T - 1), CQ_OK);
    assert_int_equal(cq_qwen3_cache_feed(cache, &seq[T - 1], 2, again), CQ_OK);
    assert_true(qw_rel_err(again, step + V, V) <= TOL_CACHE);
    /* the cache refuses to overflow and keeps its state */
    assert_int_equal(cq_qwen3_cache_len(cache), T + 1);
    int32_t two[2] = {seq[0], seq[1]};
    assert_int_equal(cq_qwen3_cache_truncate(cache, T + G - 2), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_cache_feed(cache, seq, T + G, NULL), CQ_ERR_BOUNDS);
    assert_int_equal(cq_qwen3_cache_len(cache), T + 1);
    assert_int_equal(cq_qwen3_cache_feed(cache, two, 2, NULL), CQ_OK);
    free(again);
    cq_qwen3_cache_free(cache);
    free(seq);
    free(step);
    free(full);
    free(ids);
    free(want);
}

/* The prompt, then transformers' greedy tokens one at a time, into a cache on the device and one on the CPU; the
 * logits of every step compared. */
static void check_cached_decode(fixture *f) {
    const size_t V = (size_t)cq_qwen3_get_config(f->m)->vocab_size;
    int T, G;
    int32_t *ids = qw_ids(f->gold, "ids_a", &T), *want = qw_ids(f->gold, "greedy_a", &G);
    assert_int_equal(G, GREEDY);
    float *ld = malloc(V * sizeof(float)), *lc = malloc(V * sizeof(float));
    assert_true(ld && lc);
    cq_qwen3_cache *cd, *cc;
    assert_int_equal(cq_qwen3_cache_create(f->m, T + G, 7, &cd), CQ_OK);
    assert_int_equal(cq_qwen3_cache_create(f->cpu_m, T + G, 7, &cc), CQ_OK);
    if (cq_qwen3_cache_feed(cd, ids, T, ld) != CQ_OK) fail_msg("prefill on %s: %s", cq_backend_name(f->be), cq_last_error());
    assert_int_equal(cq_qwen3_cache_feed(cc, ids, T, lc), CQ_OK);
    double worst = 0;
    int agree = 0, decided = 0;
    for (int s = 0; s < G; s++) {
        const double e = qw_rel_err(ld, lc, V);
        if (!(e <= DEVICE_BOUND))
            fail_msg("%s decode step %d (device against CPU): rel %.3g (> %g)", f->cfg, s, e, DEVICE_BOUND);
        worst = fmax(worst, e);
        /* the CPU's margin between its top two logits, against what the bound lets the device move */
        const int top = qw_argmax(lc, (int)V);
        double second = -INFINITY, big = 0;
        for (size_t v = 0; v < V; v++) {
            if ((int)v != top) second = fmax(second, lc[v]);
            big = fmax(big, fabs(lc[v]));
        }
        const int dev_top = qw_argmax(ld, (int)V);
        agree += dev_top == want[s];
        if (lc[top] - second > 2 * DEVICE_BOUND * big && top == want[s]) {
            decided++;
            if (dev_top != want[s])
                fail_msg("%s decode step %d: the device chose %d, transformers and the CPU %d (margin %.3g)", f->cfg, s,
                         dev_top, want[s], lc[top] - second);
        }
        if (s + 1 < G) {
            assert_int_equal(cq_qwen3_cache_feed(cd, &want[s], 1, ld), CQ_OK);
            assert_int_equal(cq_qwen3_cache_feed(cc, &want[s], 1, lc), CQ_OK);
        }
    }
    printf("  %s cached decode on %s: %d steps, logits worst rel %.3g against the CPU; greedy choice equal to "
           "transformers' at %d of %d steps (%d with a clear margin, all equal)\n", f->cfg, cq_backend_name(f->be), G,
           worst, agree, G, decided);
    cq_qwen3_cache_free(cd);
    cq_qwen3_cache_free(cc);
    free(ld);
    free(lc);
    free(ids);
    free(want);
}

/* Every configuration: the whole-sequence forward of both prompts against transformers; then, on the CPU, greedy
 * decoding with the cache against transformers' tokens, and on a device the cached decode against the CPU's. */
static void test_golden(void **state) {
    (void)state;
    for (size_t i = 0; i < CQ_ARRAY_LEN(qw_cfgs); i++) {
        fixture f;
        fx_open(&f, qw_cfgs[i]);
        const cq_qwen3_config *c = cq_qwen3_get_config(f.m);
        assert_true(c->has_lm_head);
        assert_int_equal(c->vl, strstr(qw_cfgs[i], "vl") != NULL);
        check_forward(&f, "a");
        check_forward(&f, "b");
        if (g_arg.device) {
            check_cached_decode(&f);
        } else {
            check_greedy(&f, "ids_a", "greedy_a");
            check_greedy(&f, "ids_b", "greedy_b");
            check_greedy(&f, "chat_ids", "chat_greedy");
        }
        fx_close(&f);
    }
}

/* ------------------------------------------------------------------------ */
/* Prefixes and config layouts: rewrite the converted Qwen3-VL file         */
/* ------------------------------------------------------------------------ */
/* Copy every tensor of `src` into `path` with `prefix` in front of its name,
 * replacing config_json by `config` when given. */
static void repack(const cq_cmf *src, const char *path, const char *prefix, const char *config, const char *drop) {
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    size_t hl;
    const char *hdr = cq_cmf_header_json(src, &hl);
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, hl), CQ_OK);
    for (size_t i = 0; i < cq_cmf_tensor_count(src); i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(src, i);
        if (drop && strcmp(v->name, drop) == 0) continue;
        char name[512];
        snprintf(name, sizeof name, "%s%s", prefix, v->name);
        const void *data = v->data;
        uint64_t nb = v->nbytes, shape[CQ_MAX_DIMS];
        memcpy(shape, v->shape, sizeof shape);
        if (config && strcmp(v->name, "config_json") == 0) {
            data = config;
            nb = shape[0] = strlen(config);
        }
        assert_int_equal(cq_cmf_writer_add(w, name, v->dtype, v->ndim, shape, data, nb), CQ_OK);
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("repack: %s", cq_last_error());
    cq_cmf_writer_free(w);
}

static float *logits_on(const char *backend, const char *path, const char *prefix, const int32_t *ids, int T,
                        size_t V, cq_status *st) {
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    cq_backend *be;
    assert_int_equal(cq_backend_create(backend, 0, &be), CQ_OK);
    cq_qwen3 *m = NULL;
    float *lg = malloc((size_t)T * V * sizeof(float));
    assert_non_null(lg);
    *st = cq_qwen3_load(cmf, prefix, be, &m);
    if (*st == CQ_OK) {
        cq_qwen3_outputs o = {.logits = lg};
        *st = cq_qwen3_forward(m, ids, T, &o);
    }
    cq_qwen3_free(m);
    cq_backend_free(be);
    cq_cmf_close(cmf);
    return lg;
}

static float *logits_of(const char *path, const char *prefix, const int32_t *ids, int T, size_t V, cq_status *st) {
    return logits_on(g_arg.name, path, prefix, ids, T, V, st);
}

static void test_prefix_and_layouts(void **state) {
    (void)state;
    fixture f;
    fx_open(&f, "qwen3vl_a");
    const cq_qwen3_config *c = cq_qwen3_get_config(f.m);
    assert_int_equal(c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2], c->head_dim / 2);
    assert_true(c->mrope_interleaved);
    assert_true(c->rope_theta == 5000000.0);
    int T;
    int32_t *ids = qw_ids(f.gold, "ids_b", &T);
    size_t V = (size_t)c->vocab_size;
    float *gl = qw_floats(f.gold, "logits_b", (size_t)T * V);
    const char *dir = tu_tmpdir("qwen3_repack");
    cq_status s;

    /* inside an image pack: te.model.language_model.*, te.config_json, te.lm_head.weight */
    repack(f.cmf, tu_path(dir, "te.cmf"), "te.", NULL, NULL);
    float *lg = logits_of(tu_path(dir, "te.cmf"), "te.", ids, T, V, &s);
    if (s != CQ_OK) fail_msg("te. prefix: %s", cq_last_error());
    assert_true(qw_rel_err(lg, gl, (size_t)T * V) <= TOL_REF);
    free(lg);

    /* transformers 4.57's layout: rope_theta and rope_scaling in text_config */
    static const char cfg457[] =
        "{\"architectures\": [\"Qwen3VLForConditionalGeneration\"], \"model_type\": \"qwen3_vl\","
        " \"tie_word_embeddings\": false, \"text_config\": {\"head_dim\": 16, \"hidden_act\": \"silu\","
        " \"hidden_size\": 64, \"intermediate_size\": 160, \"model_type\": \"qwen3_vl_text\","
        " \"num_attention_heads\": 4, \"num_hidden_layers\": 3, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
        " \"rope_scaling\": {\"mrope_interleaved\": true, \"mrope_section\": [2, 3, 3], \"rope_type\": \"default\"},"
        " \"rope_theta\": 5000000.0, \"vocab_size\": 384}}";
    repack(f.cmf, tu_path(dir, "v457.cmf"), "", cfg457, NULL);
    lg = logits_of(tu_path(dir, "v457.cmf"), "", ids, T, V, &s);
    if (s != CQ_OK) fail_msg("4.57 config: %s", cq_last_error());
    assert_true(qw_rel_err(lg, gl, (size_t)T * V) <= TOL_REF);
    free(lg);

    /* the theta really is read: another theta changes the logits */
    char other[sizeof cfg457 + 8];
    snprintf(other, sizeof other, "%s", cfg457);
    memcpy(strstr(other, "5000000.0"), "5000.0000", 9);
    repack(f.cmf, tu_path(dir, "theta.cmf"), "", other, NULL);
    lg = logits_of(tu_path(dir, "theta.cmf"), "", ids, T, V, &s);
    assert_int_equal(s, CQ_OK);
    assert_true(qw_rel_err(lg, gl, (size_t)T * V) > 1e-3);
    free(lg);

    /* scaled RoPE is refused by name */
    snprintf(other, sizeof other, "%s", cfg457);
    memcpy(strstr(other, "\"default\""), "\"yarn\"   ", 9);
    repack(f.cmf, tu_path(dir, "yarn.cmf"), "", other, NULL);
    lg = logits_of(tu_path(dir, "yarn.cmf"), "", ids, T, V, &s);
    assert_int_equal(s, CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "yarn"));
    free(lg);

    /* no lm_head and untied: hidden states only, logits refused */
    repack(f.cmf, tu_path(dir, "nohead.cmf"), "", NULL, "lm_head.weight");
    lg = logits_of(tu_path(dir, "nohead.cmf"), "", ids, T, V, &s);
    assert_int_equal(s, CQ_ERR_UNSUPPORTED);
    free(lg);

    /* a missing layer tensor is named */
    repack(f.cmf, tu_path(dir, "missing.cmf"), "", NULL, "model.language_model.layers.2.mlp.up_proj.weight");
    lg = logits_of(tu_path(dir, "missing.cmf"), "", ids, T, V, &s);
    assert_int_equal(s, CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "layers.2.mlp.up_proj.weight"));
    free(lg);

    free(gl);
    free(ids);
    fx_close(&f);
}

/* Quantized weights run through the same code (get_rows and matmul decode
 * every codec): the CPU backend must match the plain-C reference backend on
 * the same file to TOL_REF; the error against the f32 transformers logits is
 * reported and bounded per codec family (a broken decode is off by ~100%). */
static void test_quantized(void **state) {
    (void)state;
    static const struct {
        int quant;
        double tol;
    } cases[] = {{-1, 0.05}, {CQ_DTYPE_Q8_ROW, 0.05}, {CQ_DTYPE_BF16, 0.01}, {CQ_DTYPE_F16, 0.01},
                 {CQ_DTYPE_Q4TP, 0.5}};
    char gp[1100];
    snprintf(gp, sizeof gp, "%s/golden.safetensors", qw_golden_dir("qwen3_a"));
    cq_st *gold;
    assert_int_equal(cq_st_open(gp, &gold), CQ_OK);
    int T;
    int32_t *ids = qw_ids(gold, "ids_b", &T);
    size_t V = 384;
    float *gl = qw_floats(gold, "logits_b", (size_t)T * V);
    for (size_t i = 0; i < CQ_ARRAY_LEN(cases); i++) {
        const char *path = tu_path(tu_tmpdir("qwen3_quant"), "q.cmf");
        const char *name = cases[i].quant < 0 ? "default (q8_2f)" : cq_dtype_name((cq_dtype)cases[i].quant);
        cq_convert_opts opts = {.quant = cases[i].quant};
        cq_convert_report rep;
        cq_status s = cq_convert(qw_golden_dir("qwen3_a"), path, &opts, &rep);
        cq_convert_report_free(&rep);
        if (s != CQ_OK) fail_msg("convert: %s", cq_last_error());
        float *lg = logits_of(path, "", ids, T, V, &s);
        if (s != CQ_OK) fail_msg("run: %s", cq_last_error());
        float *lr = logits_on("ref", path, "", ids, T, V, &s);
        if (s != CQ_OK) fail_msg("run on ref: %s", cq_last_error());
        double e = qw_rel_err(lg, gl, (size_t)T * V), er = qw_rel_err(lg, lr, (size_t)T * V);
        printf("  qwen3_a weights %s: logits rel %.3g vs transformers (f32), %.3g vs the ref backend\n", name, e, er);
        if (!(er <= TOL_REF)) fail_msg("%s: cpu and ref backends differ by %.3g", name, er);
        if (!(e > 0 && e <= cases[i].tol)) fail_msg("%s: logits off by %.3g (> %g)", name, e, cases[i].tol);
        free(lg);
        free(lr);
    }
    free(gl);
    free(ids);
    cq_st_close(gold);
}

static void test_bad_input(void **state) {
    (void)state;
    fixture f;
    fx_open(&f, "qwen3_b");
    const cq_qwen3_config *c = cq_qwen3_get_config(f.m);
    assert_true(c->tie_embeddings && c->has_lm_head);
    int32_t bad[3] = {1, c->vocab_size, 2};
    float h[3 * 48];
    cq_qwen3_outputs o = {.layer = 1, .hidden = h};
    assert_int_equal(cq_qwen3_forward(f.m, bad, 3, &o), CQ_ERR_INVALID_ARG);
    bad[1] = -1;
    assert_int_equal(cq_qwen3_forward(f.m, bad, 3, &o), CQ_ERR_INVALID_ARG);
    bad[1] = 5;
    o.layer = c->n_layers + 1;
    assert_int_equal(cq_qwen3_forward(f.m, bad, 3, &o), CQ_ERR_INVALID_ARG);
    cq_qwen3_cache *cache;
    assert_int_equal(cq_qwen3_cache_create(f.m, 0, 0, &cache), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_cache_create(f.m, 4, 0, &cache), CQ_OK);
    assert_int_equal(cq_qwen3_cache_feed(cache, bad, 0, NULL), CQ_ERR_INVALID_ARG);
    bad[1] = 1000;
    assert_int_equal(cq_qwen3_cache_feed(cache, bad, 3, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_cache_len(cache), 0);
    cq_qwen3_cache_free(cache);
    cq_qwen3_free(NULL);
    cq_qwen3_cache_free(NULL);
    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* Multimodal input: 3-D positions, injected image rows                     */
/* ------------------------------------------------------------------------ */
/* max |a - ref| / RMS(ref): the CPU's bound against transformers is 1e-4 of the reference's RMS for every element */
static double rms_err(const float *a, const float *ref, size_t n) {
    double num = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= num)) num = d; /* NaN propagates as a failure */
        ss += (double)ref[i] * ref[i];
    }
    double rms = sqrt(ss / (double)(n ? n : 1));
    return rms > 0 ? num / rms : num;
}

/* cq_qwen3_rope_index on hand-numbered sequences, and what it refuses. */
static void test_rope_index(void **state) {
    (void)state;
    enum { VS = 7, IM = 9, VE = 8 };
    /* text 5 6, image 1 (grid 1x4x6: 2x3 merged), text, image 2 (1x4x4: 2x2), text */
    const int32_t ids[] = {5, 6, VS, IM, IM, IM, IM, IM, IM, VE, 17, VS, IM, IM, IM, IM, VE, 18};
    const int32_t grid[2][3] = {{1, 4, 6}, {1, 4, 4}};
    /* by hand: text counts up; an image at p holds (p, p + row, p + col); text resumes at p + max(rows, cols) */
    const int32_t want[3][18] = {{0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8, 9, 9, 9, 9, 11, 12},
                                 {0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8, 9, 9, 10, 10, 11, 12},
                                 {0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8, 9, 10, 9, 10, 11, 12}};
    const int n = (int)CQ_ARRAY_LEN(ids);
    int32_t pos[3 * 18], delta = 0;
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, grid, 2, 2, pos, &delta), CQ_OK);
    assert_memory_equal(pos, want, sizeof pos);
    assert_int_equal(delta, 13 - 18);
    /* text alone: 0..n-1 on every axis */
    assert_int_equal(cq_qwen3_rope_index(ids, 2, IM, VS, NULL, 0, 2, pos, &delta), CQ_OK);
    assert_int_equal(pos[0], 0);
    assert_int_equal(pos[1], 1);
    assert_int_equal(pos[2], 0);
    assert_int_equal(pos[5], 1);
    assert_int_equal(delta, 0);
    /* refused: too few and too many grids, a grid that does not match its run, a run without vision start,
     * two frames, a grid not divisible by the merge size, bad arguments */
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, grid, 1, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    const int32_t three[3][3] = {{1, 4, 6}, {1, 4, 4}, {1, 2, 2}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, three, 3, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    const int32_t longer[2][3] = {{1, 4, 6}, {1, 4, 6}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, longer, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    const int32_t shorter[2][3] = {{1, 4, 4}, {1, 4, 4}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, shorter, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    int32_t nostart[18];
    memcpy(nostart, ids, sizeof nostart);
    nostart[11] = 3;
    assert_int_equal(cq_qwen3_rope_index(nostart, n, IM, VS, grid, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    const int32_t frames[2][3] = {{2, 4, 6}, {1, 4, 4}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, frames, 2, 2, pos, NULL), CQ_ERR_UNSUPPORTED);
    const int32_t odd[2][3] = {{1, 3, 8}, {1, 4, 4}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, odd, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    const int32_t zero[2][3] = {{1, 0, 6}, {1, 4, 4}};
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, zero, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, grid, 2, 0, pos, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, IM, grid, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_rope_index(ids, 0, IM, VS, grid, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_qwen3_rope_index(ids, n, IM, VS, NULL, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
    /* an image cut off by the end of the sequence */
    assert_int_equal(cq_qwen3_rope_index(ids, 14, IM, VS, grid, 2, 2, pos, NULL), CQ_ERR_INVALID_ARG);
}

/* One golden case (tools/golden_qwen25vl_mrope.py) of text and images: the model's own position ids exactly, then
 * every hidden state and the normed output with the image rows injected. */
static void check_mrope_case(fixture *f, const cq_st *gold, const char *key) {
    const cq_qwen3_config *c = cq_qwen3_get_config(f->m);
    char name[64];
    int T, ng, np;
    snprintf(name, sizeof name, "mrope_ids_%s", key);
    int32_t *ids = qw_ids(gold, name, &T);
    snprintf(name, sizeof name, "mrope_grid_%s", key);
    int32_t *grid = qw_ids(gold, name, &ng);
    snprintf(name, sizeof name, "mrope_pos_%s", key);
    int32_t *want = qw_ids(gold, name, &np);
    assert_int_equal(ng % 3, 0);
    assert_int_equal(np, 3 * T);
    /* the tiny configs' token ids (golden_qwen3.py's SPECIALS) and Qwen2.5-VL's merge size */
    const int32_t vs = 7, im = 9;
    int32_t *pos = malloc((size_t)np * sizeof(int32_t));
    assert_non_null(pos);
    if (cq_qwen3_rope_index(ids, T, im, vs, (const int32_t(*)[3])grid, ng / 3, 2, pos, NULL) != CQ_OK)
        fail_msg("%s %s: rope index: %s", f->cfg, key, cq_last_error());
    assert_memory_equal(pos, want, (size_t)np * sizeof(int32_t));
    int k = 0;
    for (int i = 0; i < T; i++) k += ids[i] == im;
    size_t H = (size_t)c->hidden, L = (size_t)c->n_layers;
    snprintf(name, sizeof name, "mrope_image_%s", key);
    float *img = qw_floats(gold, name, (size_t)k * H);
    float *all = malloc((L + 1) * T * H * sizeof(float)), *normed = malloc(T * H * sizeof(float));
    assert_true(all && normed);
    cq_qwen3_mm mm = {.positions = pos, .image_token = im, .image_embeds = img, .n_image_rows = k};
    cq_qwen3_outputs o = {.all_hidden = all, .normed = normed};
    if (cq_qwen3_forward_mm(f->m, ids, T, &mm, &o) != CQ_OK)
        fail_msg("%s %s: forward: %s", f->cfg, key, cq_last_error());
    snprintf(name, sizeof name, "mrope_hidden_%s", key);
    float *gh = qw_floats(gold, name, (L + 1) * T * H);
    snprintf(name, sizeof name, "mrope_normed_%s", key);
    float *gn = qw_floats(gold, name, T * H);
    for (size_t l = 0; l <= L + 1; l++) {
        const float *a = l <= L ? all + l * T * H : normed, *r = l <= L ? gh + l * T * H : gn;
        double er = rms_err(a, r, T * H), em = qw_rel_err(a, r, T * H);
        printf("  %s %s (%d rows, %d image) %s[%zu]: max/rms %.3g, max/max %.3g\n", f->cfg, key, T, k,
               l <= L ? "hidden" : "normed", l <= L ? l : 0, er, em);
        /* the CPU: every element within 1e-4 of the reference's RMS; a device: the bound of the text runs */
        if (g_arg.device ? !(em <= g_tol_ref) : !(er <= TOL_REF))
            fail_msg("%s %s: %s %zu off by %.3g of the RMS, %.3g of the max", f->cfg, key,
                     l <= L ? "hidden state" : "normed output", l, er, em);
    }
    free(ids);
    free(grid);
    free(want);
    free(pos);
    free(img);
    free(all);
    free(normed);
    free(gh);
    free(gn);
}

/* Qwen2.5-VL (sectioned) and Qwen3-VL (interleaved) with one and two images against transformers. */
static void test_mrope_golden(void **state) {
    (void)state;
    static const char *const cfgs[] = {"qwen25vl_a", "qwen3vl_a"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(cfgs); i++) {
        fixture f;
        fx_open(&f, cfgs[i]);
        char g[1100];
        snprintf(g, sizeof g, "%s/mrope.safetensors", qw_golden_dir(cfgs[i]));
        cq_st *gold = NULL;
        if (cq_st_open(g, &gold) != CQ_OK) fail_msg("open %s: %s", g, cq_last_error());
        check_mrope_case(&f, gold, "one");
        check_mrope_case(&f, gold, "two");
        cq_st_close(gold);
        fx_close(&f);
    }
}

/* With every axis at 0..n-1 and the image rows given their own embeddings, the multimodal forward is the text
 * forward, bit for bit on the CPU; and its arguments are checked. */
static void test_mrope_plain(void **state) {
    (void)state;
    fixture f;
    fx_open(&f, "qwen25vl_a");
    const cq_qwen3_config *c = cq_qwen3_get_config(f.m);
    int T;
    int32_t *ids = qw_ids(f.gold, "ids_b", &T);
    size_t H = (size_t)c->hidden, L = (size_t)c->n_layers;
    float *emb = qw_floats(f.gold, "hidden_b", (L + 1) * T * H); /* row block 0: the embeddings */
    const int32_t im = ids[T / 2];
    int k = 0;
    float *img = malloc(T * H * sizeof(float));
    int32_t *pos = malloc(3 * (size_t)T * sizeof(int32_t));
    float *a = malloc(T * H * sizeof(float)), *b = malloc(T * H * sizeof(float));
    assert_true(img && pos && a && b);
    for (int i = 0; i < T; i++) {
        if (ids[i] == im) memcpy(img + (size_t)k++ * H, emb + (size_t)i * H, H * sizeof(float));
        for (int ax = 0; ax < 3; ax++) pos[ax * T + i] = i;
    }
    cq_qwen3_outputs o = {.normed = a}, o2 = {.normed = b};
    assert_int_equal(cq_qwen3_forward(f.m, ids, T, &o), CQ_OK);
    cq_qwen3_mm mm = {.positions = pos, .image_token = im, .image_embeds = img, .n_image_rows = k};
    assert_int_equal(cq_qwen3_forward_mm(f.m, ids, T, &mm, &o2), CQ_OK);
    if (!g_arg.device) assert_memory_equal(a, b, T * H * sizeof(float));
    else assert_true(qw_rel_err(b, a, T * H) <= g_tol_ref);
    /* refused before any op: a row count that does not match, rows without vectors, a negative position */
    mm.n_image_rows = k + 1;
    assert_int_equal(cq_qwen3_forward_mm(f.m, ids, T, &mm, &o2), CQ_ERR_INVALID_ARG);
    mm.n_image_rows = k;
    mm.image_embeds = NULL;
    assert_int_equal(cq_qwen3_forward_mm(f.m, ids, T, &mm, &o2), CQ_ERR_INVALID_ARG);
    mm.image_embeds = img;
    pos[2 * T + 1] = -1;
    assert_int_equal(cq_qwen3_forward_mm(f.m, ids, T, &mm, &o2), CQ_ERR_INVALID_ARG);
    fx_close(&f);
    /* a plain-RoPE model takes no three-axis positions */
    fx_open(&f, "qwen3_b");
    pos[2 * T + 1] = 1;
    cq_qwen3_mm pm = {.positions = pos};
    cq_qwen3_outputs o3 = {.normed = a};
    int32_t small[4] = {1, 2, 3, 4};
    assert_int_equal(cq_qwen3_forward_mm(f.m, small, 4, &pm, &o3), CQ_ERR_UNSUPPORTED);
    fx_close(&f);
    free(ids);
    free(emb);
    free(img);
    free(pos);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qwen3", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    g_tol_ref = g_arg.device ? DEVICE_BOUND : TOL_REF;
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_prefix_and_layouts),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_rope_index),
        cmocka_unit_test(test_mrope_plain),
        cmocka_unit_test(test_mrope_golden),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_mrope_plain),
        cmocka_unit_test(test_mrope_golden),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qwen3 (device)", device, NULL, NULL);
    return cmocka_run_group_tests_name("test_qwen3 (host)", host, NULL, NULL);
}
