/*
 * qwen3_golden.h — the Qwen3 / Qwen3-VL text tower's golden data
 * (tests/golden/qwen3, made by tools/golden_qwen3.py with transformers) for
 * the test that checks a backend against it (test_qwen3, run on the CPU and,
 * as test_qwen3_cuda, on the GPU): the tiny configurations converted to f32,
 * the reference tensors and the error measure both runs state their bounds in.
 */
#ifndef CQ_TESTS_QWEN3_GOLDEN_H
#define CQ_TESTS_QWEN3_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

#define QW_CONFIGS 4
extern const char *const qw_cfgs[QW_CONFIGS]; /* "qwen3_a", "qwen3_b", "qwen3vl_a", "qwen25vl_a" */

/* tests/golden/qwen3/<cfg> (a static buffer) */
const char *qw_golden_dir(const char *cfg);
/* The folder converted to <scratch>/<cfg>.cmf in f32; its path (a static buffer). Fails the test on error. */
const char *qw_convert(const char *cfg);
/* A golden f32 tensor of `want` elements (malloc'd), or an I32 one with its count; fail the test if missing. */
float *qw_floats(const cq_st *st, const char *name, uint64_t want);
int32_t *qw_ids(const cq_st *st, const char *name, int *n);
/* max |a - ref| / max |ref| (NaN propagates as a failure) */
double qw_rel_err(const float *a, const float *ref, size_t n);
int qw_argmax(const float *v, int n);

#endif
