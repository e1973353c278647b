/*
 * cuda.h — the CUDA backend's extras, beyond the op layer: device listing
 * for `cortiq gpu`, the cuBLASLt library choice, creation by device number
 * and a test hook. Everything else goes through ops.h and the registry
 * (cq_backend_open("cuda:N", ...)).
 *
 * Every function here exists in every build: without the backend
 * (src/ops/cuda_absent.c) they say that plainly, so callers need no #ifdefs.
 */
#ifndef CQ_BACKENDS_CUDA_H
#define CQ_BACKENDS_CUDA_H

#include "ops/ops.h"

typedef struct cq_gpu_info {
    char name[256];
    uint64_t mem_total, mem_free;
    int cc_major, cc_minor;
    int sm_count;
} cq_gpu_info;
/* Whether this build contains the CUDA backend. */
bool cq_cuda_built(void);
/* CUDA devices visible to this process; 0 when the backend is not built,
 * there is no driver or no device, with the reason in `why` (may be NULL). */
int cq_cuda_device_count(char *why, size_t why_len);
/* Whether the backend's cuBLASLt loads: the library is opened by the first
 * CUDA backend created, or by this call, never when the program starts.
 * `what` (may be NULL) gets the file and its version, or why it does not load. */
bool cq_cuda_load_cublaslt(char *what, size_t what_len);
/* The cuBLASLt file to open instead of libcublasLt.so.<major> (a path or a
 * name; NULL or "" for the default). Takes effect before the first load. */
void cq_cuda_set_cublaslt(const char *path);
cq_status cq_cuda_device_info(int device, cq_gpu_info *out);
/* One line about a device (name, memory, compute capability), for the registry. */
cq_status cq_cuda_describe(int device, char *buf, size_t len);

/* The CUDA backend on device `device` (< 0: 0) with options (NULL:
 * defaults). CQ_ERR_UNSUPPORTED, saying why, when this build has no CUDA
 * backend, there is no driver or no such device, or the device is older
 * than compute capability 8.0 (the kernels use bf16 tensor cores). */
cq_status cq_backend_cuda_open(int device, const cq_cuda_opts *opts, cq_backend **out);
/* cq_backend_cuda_open with default options. */
cq_status cq_backend_cuda_create(int device, cq_backend **out);

/* Test support: decode a weight payload on the device to f32 (before the
 * bf16 rounding of the device planes) and copy it to out[n] (n = nelem), so
 * tests can compare the device decoders with the codec layer bit for bit. */
cq_status cq_cuda_decode_f32(cq_backend *be, const cq_tensor_view *v, float *out, size_t n);

#endif /* CQ_BACKENDS_CUDA_H */
