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

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qwen3", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    g_tol_ref = g_arg.device ? DEVICE_BOUND : TOL_REF;
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_prefix_and_layouts),
        cmocka_unit_test(test_quantized),
        cmocka_unit_test(test_bad_input),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_bad_input),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qwen3 (device)", device, NULL, NULL);
    return cmocka_run_group_tests_name("test_qwen3 (host)", host, NULL, NULL);
}
