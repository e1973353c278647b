/*
 * env.h — the CORTIQ_* environment, mapped onto the library's options in one
 * place (env.c). The library reads no environment variable; the cortiq
 * command (and the tests that run under the same variables) call these.
 *
 *   CORTIQ_LOG             debug|info|warn|error|none  -> cq_set_log_level
 *   CORTIQ_THREADS         a positive integer           -> cq_set_default_threads
 *   CORTIQ_CUDA_CUBLASLT   a path or a file name        -> cq_cuda_set_cublaslt
 *   CORTIQ_BACKEND         a backend name or auto (the default of --backend; imagine and run
 *                          default to auto, the other commands to cpu)
 *   CORTIQ_GPU_MEMORY      GiB, a positive decimal (the default of --gpu-memory) -> cq_backend_opts.mem_budget
 *   CORTIQ_CPU             generic|avx2|avx512|amx|neon|auto   -> cq_cpu_opts.isa
 *   CORTIQ_CUDA_DEVICE     N (the device of "cuda" without ":N") -> cq_backend_opts.device
 *   CORTIQ_CUDA_CHECK      0|1|2, CORTIQ_CUDA_GEMM auto|simt|wgmma|cublaslt,
 *   CORTIQ_CUDA_GEMM_TUNE  0|1, CORTIQ_CUDA_ATTN auto|generic|wmma|flash128|flash64|flash128w4|wgmma,
 *   CORTIQ_CUDA_SYNC, CORTIQ_CUDA_PROFILE (on unless empty or 0), CORTIQ_CUDA_SIDE 0|1,
 *   CORTIQ_CUDA_GRAPH 0|1  -> cq_cuda_opts
 *   CORTIQ_VULKAN_DEVICE   N (the device of "vulkan" without ":N"; `cortiq gpu` numbers them),
 *   CORTIQ_VULKAN_SYNC, CORTIQ_VULKAN_RECORD, CORTIQ_VULKAN_STAGING (on unless empty or 0)  -> cq_vulkan_opts
 */
#ifndef CQ_CLI_ENV_H
#define CQ_CLI_ENV_H

#include "ops/ops.h"

/* The process-wide settings: log level, default thread count, cuBLASLt file. */
void cq_env_apply(void);
/* CORTIQ_BACKEND, or "cpu". */
const char *cq_env_backend_name(void);
/* The backend a command runs on: `given` (its --backend; may be NULL), else
 * CORTIQ_BACKEND, else `dflt`; *from (may be NULL) says which: "--backend",
 * "CORTIQ_BACKEND" or "default". */
const char *cq_env_backend_or(const char *given, const char *dflt, const char **from);
/* The largest --gpu-memory / CORTIQ_GPU_MEMORY, in GiB. */
#define CQ_ENV_GIB_MAX 65536
/* A device-memory size in GiB ("7.5", "24"): digits with at most one point,
 * from 1/1024 (1 MiB) to CQ_ENV_GIB_MAX; *bytes the byte count, rounded.
 * Anything else ("0", "-1", "abc", "1e9999", "inf", "") is CQ_ERR_INVALID_ARG
 * quoting it. */
cq_status cq_env_parse_gib(const char *text, uint64_t *bytes);
/* The budget a command asks for: `given` (its --gpu-memory; may be NULL)
 * parsed, else CORTIQ_GPU_MEMORY, else 0 (the backend's default). A bad
 * value fails as cq_env_parse_gib does, naming the variable. */
cq_status cq_env_gpu_memory(const char *given, uint64_t *bytes);
/* The options for backend `name` (NULL: cq_env_backend_name(); the budget
 * left at 0, cq_env_backend_open reads CORTIQ_GPU_MEMORY): a bad
 * CORTIQ_CPU fails (CQ_ERR_INVALID_ARG naming it); a bad CORTIQ_CUDA_* value
 * is warned about and left at its default. The CUDA part is read only for a
 * CUDA backend, the Vulkan part only for a Vulkan backend. */
cq_status cq_env_backend_opts(const char *name, cq_backend_opts *out);
/* cq_backend_resolve with the environment's options (CORTIQ_CUDA_DEVICE picks
 * the device "auto" looks at). */
cq_status cq_env_backend_resolve(const char *name, char *out, size_t out_len, char *why, size_t why_len);
/* The backend `name` (NULL: CORTIQ_BACKEND, else cpu; "auto" resolved) with
 * the environment's options, `threads` CPU threads (<= 0: the default) and
 * the device-memory budget `mem_budget` (0: CORTIQ_GPU_MEMORY, else the
 * backend's default). */
cq_status cq_env_backend_open(const char *name, int threads, uint64_t mem_budget, cq_backend **out);
/* cq_env_backend_open with the budget of the environment. */
cq_status cq_env_backend_create(const char *name, int threads, cq_backend **out);
/* Load a model of the public API on that backend (the API itself takes only a
 * backend name, without the environment's options). */
cq_status cq_env_model_load(cq_model *m, const char *name, int threads, uint64_t mem_budget);

#endif /* CQ_CLI_ENV_H */
