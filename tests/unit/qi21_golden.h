/*
 * qi21_golden.h — the Qwen-Image-2.1 denoiser's golden cases
 * (tests/golden/qi21, made by tools/golden_qi21.py with diffusers) for the
 * test that checks a backend against them (test_qi21, run on the CPU and,
 * as test_qi21_cuda, on the GPU): the two tiny models converted with a codec,
 * every case's inputs and reference velocity, and the error measures both
 * runs state their bounds in (relative to the reference's RMS).
 */
#ifndef CQ_TESTS_QI21_GOLDEN_H
#define CQ_TESTS_QI21_GOLDEN_H

#include <stddef.h>

#include "format/cmf.h"
#include "format/safetensors.h"
#include "models/qi21.h"
#include "models/qi21_inputs.h"

#define QG_DIR CQ_SOURCE_DIR "/tests/golden/qi21"
#define QG_MODELS 2
extern const char *const qg_models[QG_MODELS]; /* "tiny_a", "tiny_b" */

typedef struct qg_case {
    char name[64];
    int model;          /* index into qg_models */
    cq_st *st;          /* the case file, mapped: inputs and reference point into it */
    cq_qi21_inputs in;
    const float *ref;   /* velocity [n_target, out_channels] */
    double ref_rms;
} qg_case;

typedef struct qg_set {
    qg_case cases[32];
    int n;
} qg_set;

double qg_rms(const float *x, size_t n);
/* max |a - b| / ref_rms (NaN propagates) */
double qg_rel_err(const float *a, const float *b, size_t n, double ref_rms);
/* RMS(a - b) / ref_rms */
double qg_rms_err(const float *a, const float *b, size_t n, double ref_rms);

/* Convert golden model m with `quant` into dir/<model>-<codec>.cmf (path
 * written to `path`) and open it. 0, or -1 with the reason on stderr. */
int qg_convert(const char *dir, int m, cq_dtype quant, char *path, size_t cap, cq_cmf **cmf);
/* Every case of index.json, in its order; cfg[m] is model m's config (the
 * inputs and the velocity are checked against it). 0, or -1 with the reason
 * on stderr. */
int qg_load_cases(qg_set *s, const cq_qi21_config *const cfg[QG_MODELS]);
void qg_free_cases(qg_set *s);
/* The case named `name`; fails the running test when there is none. */
const qg_case *qg_find(const qg_set *s, const char *name);

/* Two prompts a and b of model m (velocity length n) with caches alive at once, stepped in turn at several
 * timesteps: each step equals the same step on a cache of its own, bit for bit, and both are within `bound`
 * (max|err| / RMS) of the reference. Fails the running test otherwise. Each of the two caches takes
 * QG_TWO_CACHES_STEPS steps. */
#define QG_TWO_CACHES_STEPS 6
void qg_two_caches(cq_qi21 *m, const qg_case *a, const qg_case *b, size_t n, double bound);

#endif
