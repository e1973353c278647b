/*
 * qi21_golden.c — loading and measuring the Qwen-Image-2.1 golden cases
 * (qi21_golden.h).
 */
#include "qi21_golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "format/convert.h"
#include "testutil.h"

const char *const qg_models[QG_MODELS] = {"tiny_a", "tiny_b"};

double qg_rms(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

double qg_rel_err(const float *a, const float *b, size_t n, double ref_rms) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m / ref_rms;
}

double qg_rms_err(const float *a, const float *b, size_t n, double ref_rms) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n) / ref_rms;
}

int qg_convert(const char *dir, int m, cq_dtype quant, char *path, size_t cap, cq_cmf **cmf) {
    char src[1024];
    snprintf(src, sizeof src, "%s/%s", QG_DIR, qg_models[m]);
    snprintf(path, cap, "%s/%s-%s.cmf", dir, qg_models[m], cq_dtype_name(quant));
    cq_convert_opts opts = {.quant = (int)quant};
    cq_convert_report rep;
    cq_status s = cq_convert(src, path, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s == CQ_OK) s = cq_cmf_open(path, cmf);
    if (s != CQ_OK) {
        fprintf(stderr, "%s: %s\n", path, cq_last_error());
        return -1;
    }
    return 0;
}

static int model_index(const char *name) {
    for (int m = 0; name && m < QG_MODELS; m++)
        if (strcmp(name, qg_models[m]) == 0) return m;
    return -1;
}

/* One case: its file, inputs for the model's config and the reference velocity. */
static int load_case(qg_case *g, const cJSON *c, const cq_qi21_config *const cfg[QG_MODELS]) {
    snprintf(g->name, sizeof g->name, "%s", c->string);
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(c, "model");
    g->model = model_index(cJSON_IsString(mn) ? mn->valuestring : NULL);
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", QG_DIR, g->name);
    if (g->model < 0 || cq_st_open(path, &g->st) != CQ_OK) return -1;
    const char *meta = cq_st_metadata_get(g->st, "model");
    if (!meta || strcmp(meta, qg_models[g->model]) != 0) return -1;
    const cq_qi21_config *mc = cfg[g->model];
    if (cq_qi21_inputs_read(g->st, mc, &g->in) != CQ_OK) return -1;
    const cq_st_tensor *v = cq_st_find(g->st, "velocity");
    if (!v || v->dtype != CQ_ST_F32 || v->nelem != (uint64_t)g->in.n_target * (uint64_t)mc->out_channels ||
        ((uintptr_t)v->data & 3))
        return -1;
    g->ref = (const float *)v->data;
    g->ref_rms = qg_rms(g->ref, (size_t)v->nelem);
    return 0;
}

int qg_load_cases(qg_set *s, const cq_qi21_config *const cfg[QG_MODELS]) {
    memset(s, 0, sizeof *s);
    cJSON *j = tu_read_json(QG_DIR "/index.json");
    if (!j) return -1;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases"), *c;
    int rc = cJSON_IsObject(cases) ? 0 : -1;
    cJSON_ArrayForEach(c, cases) {
        if (s->n == (int)(sizeof s->cases / sizeof s->cases[0])) {
            rc = -1;
            break;
        }
        qg_case *g = &s->cases[s->n++];
        if (load_case(g, c, cfg) != 0) {
            fprintf(stderr, "golden case %s: %s\n", g->name, cq_last_error());
            rc = -1;
            break;
        }
    }
    cJSON_Delete(j);
    return rc == 0 && s->n >= 9 ? 0 : -1;
}

void qg_free_cases(qg_set *s) {
    for (int i = 0; i < s->n; i++) {
        cq_qi21_inputs_free(&s->cases[i].in);
        cq_st_close(s->cases[i].st);
    }
    s->n = 0;
}

const qg_case *qg_find(const qg_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->cases[i].name, name) == 0) return &s->cases[i];
    fail_msg("no golden case '%s'", name);
    return NULL;
}

void qg_two_caches(cq_qi21 *m, const qg_case *a, const qg_case *b, size_t n, double bound) {
    assert_int_equal(a->model, b->model);
    assert_int_equal(a->in.n_target, b->in.n_target);
    float *va = malloc(n * sizeof(float)), *vb = malloc(n * sizeof(float)), *v = malloc(n * sizeof(float));
    assert_true(va && vb && v);
    /* alone first */
    cq_qi21_cache *ca = NULL, *cb = NULL;
    assert_int_equal(cq_qi21_prefill(m, &a->in.layout, a->in.ctx, a->in.cond, &ca), CQ_OK);
    assert_int_equal(cq_qi21_step(m, ca, a->in.target, a->in.t, va), CQ_OK);
    cq_qi21_cache_free(ca);
    assert_int_equal(cq_qi21_prefill(m, &b->in.layout, b->in.ctx, b->in.cond, &cb), CQ_OK);
    assert_int_equal(cq_qi21_step(m, cb, b->in.target, b->in.t, vb), CQ_OK);
    cq_qi21_cache_free(cb);
    /* together, interleaved, other timesteps in between: 2 steps per cache and round */
    assert_int_equal(cq_qi21_prefill(m, &a->in.layout, a->in.ctx, a->in.cond, &ca), CQ_OK);
    assert_int_equal(cq_qi21_prefill(m, &b->in.layout, b->in.ctx, b->in.cond, &cb), CQ_OK);
    const float ts[QG_TWO_CACHES_STEPS / 2] = {0.9f, 0.05f, 0.0f};
    for (int round = 0; round < QG_TWO_CACHES_STEPS / 2; round++) {
        assert_int_equal(cq_qi21_step(m, cb, b->in.target, ts[round], v), CQ_OK);
        assert_int_equal(cq_qi21_step(m, ca, a->in.target, ts[2 - round], v), CQ_OK);
        assert_int_equal(cq_qi21_step(m, ca, a->in.target, a->in.t, v), CQ_OK);
        assert_memory_equal(v, va, n * sizeof(float)); /* deterministic: bit-identical */
        assert_int_equal(cq_qi21_step(m, cb, b->in.target, b->in.t, v), CQ_OK);
        assert_memory_equal(v, vb, n * sizeof(float));
    }
    assert_true(qg_rel_err(va, a->ref, n, a->ref_rms) <= bound);
    assert_true(qg_rel_err(vb, b->ref, n, b->ref_rms) <= bound);
    /* the two prompts really differ */
    assert_true(qg_rel_err(va, vb, n, a->ref_rms) > 1e-2);
    cq_qi21_cache_free(ca);
    cq_qi21_cache_free(cb);
    free(va);
    free(vb);
    free(v);
}
