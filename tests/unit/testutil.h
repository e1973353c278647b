/*
 * testutil.h — helpers shared by the cmocka unit tests: deterministic random
 * numbers, scratch directories, small file helpers, running the CLI, and the
 * backend a model test runs on.
 */
#ifndef CQ_TESTUTIL_H
#define CQ_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "format/safetensors.h"
#include "ops/ops.h"

/* splitmix64-seeded xorshift generator; same sequence on every platform. */
typedef struct tu_rng { uint64_t s; } tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_u64(tu_rng *r);
float tu_rng_uniform(tu_rng *r);          /* [0, 1) */
float tu_rng_normal(tu_rng *r);           /* standard normal (Box-Muller) */
void tu_fill_normal(tu_rng *r, float *x, size_t n, float scale);

/* A fresh directory under the build tree (CQ_BINARY_DIR/tmp/<name>-<pid>),
 * emptied first. Returns a static buffer. */
const char *tu_tmpdir(const char *name);
/* path = dir + "/" + leaf into a static rotating buffer. */
const char *tu_path(const char *dir, const char *leaf);
/* Whole-file read (malloc'd, caller frees) / write. */
uint8_t *tu_read_file(const char *path, size_t *len);
/* A whole JSON file parsed (cJSON_Delete it); NULL when it is absent or not JSON. */
struct cJSON *tu_read_json(const char *path);
/* A caller-built weight view named "test.weight": dtype, shape (ndim dims), payload. */
cq_tensor_view tu_view(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *data, uint64_t nbytes);
int tu_write_file(const char *path, const void *data, size_t len);
/* Run a shell command; returns its exit status (or -1). */
int tu_system(const char *fmt, ...);

/* ---- comparing with golden tensors --------------------------------------------- */
/* RMS of x[0..n). */
double tu_rms(const float *x, size_t n);
/* max |a - b| / rms over [0..n) (a NaN anywhere gives NaN). */
double tu_max_rel(const float *a, const float *b, size_t n, double rms);
/* An F32 tensor of a golden file as malloc'd floats (the mapping is not aligned in general); *n its element
 * count. NULL when absent or not F32. */
float *tu_st_floats(const cq_st *st, const char *name, size_t *n);
/* A pipeline's planar picture [c][h][w] in the decoder's range [-1, 1] against the reference's postprocessed
 * [h][w][c] in [0, 1]: returns the largest difference after the reference's postprocess (x / 2 + 0.5, clamped),
 * and *worst8 the largest difference after 8-bit rounding. */
double tu_image_err(const float *planar, int c, int w, int h, const float *want_hwc, int *worst8);
/* Fails the test unless s == want and the last error mentions needle. */
void tu_expect_err(cq_status s, cq_status want, const char *needle);

/* ---- the backend a model test runs on ----------------------------------------
 * A model test is one program run once per backend: `test_qi21 [BACKEND]`,
 * BACKEND one of cpu (the default), cuda[:N] or vulkan[:N]. ctest runs each
 * such program once per backend (cq_add_backend_test in CMakeLists.txt):
 * `test_x cpu`, label unit, `test_x cuda` as test_x_cuda, label gpu, and
 * `test_x vulkan` as test_x_vulkan, label unit (lavapipe runs it anywhere;
 * skipped without a Vulkan device). The host backend (cpu) is
 * held to the CPU bounds; any other is a device, held to the device bounds
 * and, where a test says so, to the CPU backend running the same file.
 * BACKEND may end in "@f16" or "@bf16" (`test_qi21 cuda@f16`): the backend
 * then allocates the models' activations in that dtype (a measurement: the
 * file's bounds stay those of the backend's own dtype). */
typedef struct tu_backend_arg {
    char name[32];    /* the backend as given, less any "@dtype": "cpu", "cuda", "cuda:1", "vulkan" */
    bool device;      /* not the host (CPU) backend */
    cq_dtype act;     /* "@f16" / "@bf16": the activation dtype asked for (cq_backend_opts.act_dtype); 0: the
                       * backend's own */
} tu_backend_arg;
/* Read the backend from argv (at most one argument) and check that it opens
 * here. Returns -1 when the tests should run; otherwise the code main returns:
 * TU_SKIP (the backend is not built or this machine has no device for it; the
 * reason printed as "<prog>: skipped: ...") or 1 (a bad argument, with the
 * usage, or another failure to open, with its message). */
#define TU_SKIP 77
int tu_backend_select(const char *prog, int argc, char **argv, tu_backend_arg *out);
/* The selected backend with `threads` (<= 0: the default count; host backends only). */
cq_status tu_backend_create(const tu_backend_arg *b, int threads, cq_backend **out);

#endif
