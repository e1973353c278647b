/*
 * test_qwen3_cuda.c — the Qwen3 / Qwen3-VL text tower (the LLM behind
 * `cortiq run`, and the Qwen-Image-2.1 pipeline's text encoder) on the CUDA
 * backend against transformers' golden tensors (tests/golden/qwen3, made by
 * tools/golden_qwen3.py), label gpu. Every tiny configuration, converted to
 * f32:
 *  - a whole-sequence forward of both golden prompts: every layer's hidden
 *    state, the final norm's output and the logits within 3e-3 of
 *    transformers (rel = max|err| / max|ref|, test_qwen3's measure; the
 *    device rounds GEMM operands to f16 and, at head_dim 128, attention
 *    operands to bf16: the bound the denoiser's device test holds);
 *  - decoding with the K/V cache, teacher-forced on transformers' 32 greedy
 *    tokens after a prompt prefilled in chunks of 7: every step's logits
 *    within 3e-3 of the CPU backend's on the same inputs, and the device's
 *    greedy choice equal to transformers' wherever the CPU's top two logits
 *    are further apart than the bound allows either backend to move them.
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "testutil.h"
#include "format/cmf.h"
#include "models/qwen3.h"
#include "qwen3_golden.h"

#define DEVICE_BOUND 3e-3
#define GREEDY 32

static cq_backend *g_be, *g_cpu;

typedef struct model {
    cq_cmf *cmf;
    cq_qwen3 *dev, *cpu;
    cq_st *gold;
} model;

static void open_model(model *m, const char *cfg) {
    memset(m, 0, sizeof *m);
    const char *path = qw_convert(cfg);
    if (cq_cmf_open(path, &m->cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    if (cq_qwen3_load(m->cmf, "", g_be, &m->dev) != CQ_OK) fail_msg("load %s on the GPU: %s", cfg, cq_last_error());
    if (cq_qwen3_load(m->cmf, "", g_cpu, &m->cpu) != CQ_OK) fail_msg("load %s on the CPU: %s", cfg, cq_last_error());
    char g[1100];
    snprintf(g, sizeof g, "%s/golden.safetensors", qw_golden_dir(cfg));
    if (cq_st_open(g, &m->gold) != CQ_OK) fail_msg("open %s: %s", g, cq_last_error());
}

static void close_model(model *m) {
    cq_st_close(m->gold);
    cq_qwen3_free(m->dev);
    cq_qwen3_free(m->cpu);
    cq_cmf_close(m->cmf);
}

static void check(const char *what, double e) {
    if (!(e <= DEVICE_BOUND)) fail_msg("%s: rel %.3g (> %g)", what, e, DEVICE_BOUND);
}

static void test_forward(void **state) {
    (void)state;
    for (int i = 0; i < QW_CONFIGS; i++) {
        model m;
        open_model(&m, qw_cfgs[i]);
        const cq_qwen3_config *c = cq_qwen3_get_config(m.dev);
        const size_t H = (size_t)c->hidden, V = (size_t)c->vocab_size, L = (size_t)c->n_layers;
        for (const char *p = "ab"; *p; p++) {
            char name[64], what[128];
            snprintf(name, sizeof name, "ids_%c", *p);
            int T;
            int32_t *ids = qw_ids(m.gold, name, &T);
            float *all = malloc((L + 1) * T * H * sizeof(float)), *normed = malloc(T * H * sizeof(float));
            float *logits = malloc(T * V * sizeof(float));
            assert_true(all && normed && logits);
            cq_qwen3_outputs o = {.all_hidden = all, .normed = normed, .logits = logits};
            if (cq_qwen3_forward(m.dev, ids, T, &o) != CQ_OK) fail_msg("forward: %s", cq_last_error());
            snprintf(name, sizeof name, "hidden_%c", *p);
            float *gh = qw_floats(m.gold, name, (L + 1) * T * H);
            double worst = 0;
            for (size_t l = 0; l <= L; l++) {
                const double e = qw_rel_err(all + l * T * H, gh + l * T * H, T * H);
                snprintf(what, sizeof what, "%s prompt %c hidden state %zu", qw_cfgs[i], *p, l);
                check(what, e);
                worst = fmax(worst, e);
            }
            snprintf(name, sizeof name, "normed_%c", *p);
            float *gn = qw_floats(m.gold, name, T * H);
            snprintf(name, sizeof name, "logits_%c", *p);
            float *gl = qw_floats(m.gold, name, T * V);
            const double en = qw_rel_err(normed, gn, T * H), el = qw_rel_err(logits, gl, T * V);
            printf("  %s prompt %c on %s: hidden states worst rel %.3g, normed %.3g, logits %.3g (bound %g)\n",
                   qw_cfgs[i], *p, cq_backend_name(g_be), worst, en, el, DEVICE_BOUND);
            snprintf(what, sizeof what, "%s prompt %c normed output", qw_cfgs[i], *p);
            check(what, en);
            snprintf(what, sizeof what, "%s prompt %c logits", qw_cfgs[i], *p);
            check(what, el);
            free(gh);
            free(gn);
            free(gl);
            free(all);
            free(normed);
            free(logits);
            free(ids);
        }
        close_model(&m);
    }
}

/* The prompt, then transformers' greedy tokens one at a time, into a cache on each backend; the logits of every
 * step compared. */
static void test_cached_decode(void **state) {
    (void)state;
    for (int i = 0; i < QW_CONFIGS; i++) {
        model m;
        open_model(&m, qw_cfgs[i]);
        const size_t V = (size_t)cq_qwen3_get_config(m.dev)->vocab_size;
        int T, G;
        int32_t *ids = qw_ids(m.gold, "ids_a", &T), *want = qw_ids(m.gold, "greedy_a", &G);
        assert_int_equal(G, GREEDY);
        float *ld = malloc(V * sizeof(float)), *lc = malloc(V * sizeof(float));
        assert_true(ld && lc);
        cq_qwen3_cache *cd, *cc;
        assert_int_equal(cq_qwen3_cache_create(m.dev, T + G, 7, &cd), CQ_OK);
        assert_int_equal(cq_qwen3_cache_create(m.cpu, T + G, 7, &cc), CQ_OK);
        if (cq_qwen3_cache_feed(cd, ids, T, ld) != CQ_OK) fail_msg("prefill on the GPU: %s", cq_last_error());
        assert_int_equal(cq_qwen3_cache_feed(cc, ids, T, lc), CQ_OK);
        double worst = 0;
        int agree = 0, decided = 0;
        for (int s = 0; s < G; s++) {
            const double e = qw_rel_err(ld, lc, V);
            char what[96];
            snprintf(what, sizeof what, "%s decode step %d (device against CPU)", qw_cfgs[i], s);
            check(what, e);
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
                    fail_msg("%s decode step %d: the device chose %d, transformers and the CPU %d (margin %.3g)",
                             qw_cfgs[i], s, dev_top, want[s], lc[top] - second);
            }
            if (s + 1 < G) {
                assert_int_equal(cq_qwen3_cache_feed(cd, &want[s], 1, ld), CQ_OK);
                assert_int_equal(cq_qwen3_cache_feed(cc, &want[s], 1, lc), CQ_OK);
            }
        }
        printf("  %s cached decode on %s: %d steps, logits worst rel %.3g against the CPU; greedy choice equal to "
               "transformers' at %d of %d steps (%d with a clear margin, all equal)\n", qw_cfgs[i],
               cq_backend_name(g_be), G, worst, agree, G, decided);
        cq_qwen3_cache_free(cd);
        cq_qwen3_cache_free(cc);
        free(ld);
        free(lc);
        free(ids);
        free(want);
        close_model(&m);
    }
}

static int setup(void **state) {
    (void)state;
    if (cq_backend_cuda_create(-1, &g_be) != CQ_OK || cq_backend_cpu_create(0, CQ_CPU_AUTO, &g_cpu) != CQ_OK) return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_backend_free(g_be);
    cq_backend_free(g_cpu);
    return 0;
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_qwen3_cuda: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_cached_decode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
