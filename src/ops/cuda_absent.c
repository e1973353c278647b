/*
 * cuda_absent.c — the entry points of backends/cuda/cuda.h in a build without the CUDA
 * backend (no toolkit, CORTIQ_CUDA=OFF, or the fuzz build): they report that
 * plainly, so callers and `cortiq gpu` need no #ifdefs. With the backend
 * built (CQ_HAVE_CUDA), src/backends/cuda/ defines them instead.
 */
#include "backends/cuda/cuda.h"

#ifndef CQ_HAVE_CUDA

#include <stdio.h>

static const char k_not_built[] = "this build has no CUDA backend (configure with the CUDA toolkit installed, "
                                  "or -DCORTIQ_CUDA=ON to require it)";

bool cq_cuda_built(void) { return false; }

int cq_cuda_device_count(char *why, size_t why_len) {
    if (why && why_len) snprintf(why, why_len, "%s", k_not_built);
    return 0;
}

void cq_cuda_set_cublaslt(const char *path) { (void)path; }

bool cq_cuda_load_cublaslt(char *what, size_t what_len) {
    if (what && what_len) snprintf(what, what_len, "%s", k_not_built);
    return false;
}

cq_status cq_cuda_device_info(int device, cq_gpu_info *out) {
    (void)device;
    (void)out;
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s", k_not_built);
}

cq_status cq_cuda_describe(int device, char *buf, size_t len) {
    (void)device;
    if (buf && len) *buf = '\0';
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s", k_not_built);
}

cq_status cq_backend_cuda_open(int device, const cq_cuda_opts *opts, cq_backend **out) {
    (void)device;
    (void)opts;
    if (out) *out = NULL;
    return cq_fail(CQ_ERR_UNSUPPORTED, "cuda backend: %s", k_not_built);
}

cq_status cq_backend_cuda_create(int device, cq_backend **out) { return cq_backend_cuda_open(device, NULL, out); }

cq_status cq_cuda_decode_f32(cq_backend *be, const cq_tensor_view *v, float *out, size_t n) {
    (void)be;
    (void)v;
    (void)out;
    (void)n;
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s", k_not_built);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int cq_cuda_absent_unused;

#endif
