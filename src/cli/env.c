/*
 * env.c — the one reader of the CORTIQ_* environment (env.h lists it): the
 * words and the messages for bad values are the ones the variables have
 * always had.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_impl.h"
#include "backends/cuda/cuda.h"
#include "cli/env.h"

static int env_level(void) {
    const char *e = getenv("CORTIQ_LOG");
    if (!e) return CQ_LOG_WARN;
    static const char *const names[] = {"debug", "info", "warn", "error", "none"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(e, names[i]) == 0) return i;
    return CQ_LOG_WARN;
}

static int env_threads(void) {
    const char *e = getenv("CORTIQ_THREADS");
    if (e && *e) {
        char *end;
        long n = strtol(e, &end, 10);
        if (*end == '\0' && n > 0 && n <= 4096) return (int)n;
        CQ_WARN("ignoring CORTIQ_THREADS='%s' (want a positive integer)", e);
    }
    return 0;
}

void cq_env_apply(void) {
    cq_set_log_level((cq_log_level)env_level());
    cq_set_default_threads(env_threads());
    const char *lt = getenv("CORTIQ_CUDA_CUBLASLT");
    if (lt && *lt) cq_cuda_set_cublaslt(lt);
}

const char *cq_env_backend_name(void) {
    const char *e = getenv("CORTIQ_BACKEND");
    return e && *e ? e : "cpu";
}

static cq_status env_isa(cq_cpu_isa *isa) {
    const char *e = getenv("CORTIQ_CPU");
    if (!e || !*e || !strcasecmp(e, "auto")) return CQ_OK;
    for (int i = CQ_CPU_GENERIC; i < CQ_CPU_ISA_COUNT; i++)
        if (!strcasecmp(e, cq_cpu_isa_name((cq_cpu_isa)i))) {
            *isa = (cq_cpu_isa)i;
            return CQ_OK;
        }
    return cq_fail(CQ_ERR_INVALID_ARG, "CORTIQ_CPU='%s' is not one of generic, avx2, avx512, amx, neon, auto", e);
}

static int env_choice(const char *name, const char *const *words, int n, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, words[i])) return i;
    CQ_WARN("%s='%s' is not one of the accepted values; using the default", name, v);
    return dflt;
}

static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static void env_cuda(cq_backend_opts *o) {
    static const char *const check_words[] = {"0", "1", "2"};
    static const char *const gemm_words[] = {"auto", "simt", "wgmma", "cublaslt"};
    static const char *const onoff_words[] = {"0", "1"};
    static const char *const attn_words[] = {"auto", "generic", "wmma", "flash128", "flash64", "flash128w4", "wgmma"};
    _Static_assert(CQ_ARRAY_LEN(gemm_words) == CQ_CUDA_GEMM_COUNT, "CORTIQ_CUDA_GEMM words out of date");
    _Static_assert(CQ_ARRAY_LEN(attn_words) == CQ_CUDA_ATTN_COUNT, "CORTIQ_CUDA_ATTN words out of date");
    static const cq_cuda_check checks[] = {CQ_CUDA_CHECK_OFF, CQ_CUDA_CHECK_MATMUL, CQ_CUDA_CHECK_ALL};
    int check = env_choice("CORTIQ_CUDA_CHECK", check_words, 3, -1);
    o->cuda.check = check < 0 ? CQ_CUDA_CHECK_DEFAULT : checks[check];
    o->cuda.gemm = (cq_cuda_gemm)env_choice("CORTIQ_CUDA_GEMM", gemm_words, 4, 0);
    o->cuda.gemm_tune = env_choice("CORTIQ_CUDA_GEMM_TUNE", onoff_words, 2, 0) == 1;
    o->cuda.attn = (cq_cuda_attn)env_choice("CORTIQ_CUDA_ATTN", attn_words, 7, 0);
    o->cuda.sync_each_op = env_on("CORTIQ_CUDA_SYNC");
    o->cuda.no_side_copy = env_choice("CORTIQ_CUDA_SIDE", onoff_words, 2, 1) != 1;
    o->cuda.no_graphs = env_choice("CORTIQ_CUDA_GRAPH", onoff_words, 2, 1) != 1;
    o->cuda.profile = env_on("CORTIQ_CUDA_PROFILE");
    const char *e = getenv("CORTIQ_CUDA_DEVICE");
    o->device = e && *e ? atoi(e) : 0;
}

static void env_vulkan(cq_backend_opts *o) {
    const char *e = getenv("CORTIQ_VULKAN_DEVICE");
    if (e && *e) {
        char *end;
        long n = strtol(e, &end, 10);
        if (*end == '\0' && n >= 0 && n <= 1024) o->vulkan.device = (int)n;
        else CQ_WARN("ignoring CORTIQ_VULKAN_DEVICE='%s' (want a device number; `cortiq gpu` lists them)", e);
    }
    o->vulkan.sync_each_op = env_on("CORTIQ_VULKAN_SYNC");
    o->vulkan.records = env_on("CORTIQ_VULKAN_RECORD");
    o->vulkan.staging = env_on("CORTIQ_VULKAN_STAGING");
}

cq_status cq_env_backend_opts(const char *name, cq_backend_opts *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_env_backend_opts: out is NULL");
    memset(out, 0, sizeof *out);
    if (!name || !*name) name = cq_env_backend_name();
    CQ_TRY(env_isa(&out->cpu.isa));
    const cq_backend_desc *d;
    if (cq_backend_lookup(name, &d, NULL) == CQ_OK && !strcmp(d->name, "cuda")) env_cuda(out);
    if (cq_backend_lookup(name, &d, NULL) == CQ_OK && !strcmp(d->name, "vulkan")) env_vulkan(out);
    return CQ_OK;
}

cq_status cq_env_backend_create(const char *name, int threads, cq_backend **out) {
    if (!name || !*name) name = cq_env_backend_name();
    cq_backend_opts o;
    CQ_TRY(cq_env_backend_opts(name, &o));
    o.cpu.threads = threads;
    return cq_backend_open(name, &o, out);
}

cq_status cq_env_model_load(cq_model *m, const char *name, int threads) {
    cq_backend *be = NULL;
    CQ_TRY(cq_env_backend_create(name, threads, &be));
    CQ_TRY(cq_api_model_use_backend(m, be)); /* the model owns it, also on failure */
    return cq_model_load(m);
}
