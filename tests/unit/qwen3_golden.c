/*
 * qwen3_golden.c — see qwen3_golden.h.
 */
#include "qwen3_golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "format/convert.h"

const char *const qw_cfgs[QW_CONFIGS] = {"qwen3_a", "qwen3_b", "qwen3vl_a", "qwen25vl_a"};

const char *qw_golden_dir(const char *cfg) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/tests/golden/qwen3/%s", CQ_SOURCE_DIR, cfg);
    return p;
}

const char *qw_convert(const char *cfg) {
    static char out[1024];
    const char *dir = tu_tmpdir(cfg);
    snprintf(out, sizeof out, "%s/%s.cmf", dir, cfg);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(qw_golden_dir(cfg), out, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", cfg, cq_last_error());
    return out;
}

float *qw_floats(const cq_st *st, const char *name, uint64_t want) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    if (t->nelem != want) fail_msg("golden tensor %s has %llu elements, expected %llu", name,
                                   (unsigned long long)t->nelem, (unsigned long long)want);
    float *v = malloc((size_t)want * sizeof(float));
    assert_non_null(v);
    assert_int_equal(cq_st_read_f32(t, 0, want, v), CQ_OK);
    return v;
}

int32_t *qw_ids(const cq_st *st, const char *name, int *n) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t || t->dtype != CQ_ST_I32) fail_msg("golden tensor %s missing or not I32", name);
    *n = (int)t->nelem;
    int32_t *v = malloc((size_t)*n * sizeof(int32_t));
    assert_non_null(v);
    memcpy(v, t->data, (size_t)*n * sizeof(int32_t));
    return v;
}

double qw_rel_err(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= num)) num = d; /* NaN propagates as a failure */
        if (fabs(ref[i]) > den) den = fabs(ref[i]);
    }
    return den > 0 ? num / den : num;
}

int qw_argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}
