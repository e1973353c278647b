/*
 * env.c — the one reader of the CORTIQ_* environment (env.h lists it): the
 * words and the messages for bad values are the ones the variables have
 * always had.
 */
#include <stdint.h>
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

const char *cq_env_backend_name(void) { return cq_env_backend_or(NULL, "cpu", NULL); }

const char *cq_env_backend_or(const char *given, const char *dflt, const char **from) {
    const char *e = getenv("CORTIQ_BACKEND");
    const char *src = given ? "--backend" : e && *e ? "CORTIQ_BACKEND" : "default";
    if (from) *from = src;
    return given ? given : e && *e ? e : dflt;
}

cq_status cq_env_parse_gib(const char *text, uint64_t *bytes) {
    if (bytes) *bytes = 0;
    if (!text || !bytes) return cq_fail(CQ_ERR_INVALID_ARG, "cq_env_parse_gib: no text or no output");
    /* digits with at most one point: strtod alone would also take "inf", "1e3", hex and leading spaces */
    bool plain = *text != '\0';
    int points = 0, digits = 0;
    for (const char *p = text; *p && plain; p++) {
        if (*p == '.') plain = ++points <= 1;
        else if (*p >= '0' && *p <= '9') digits++;
        else plain = false;
    }
    const double gib = plain && digits ? strtod(text, NULL) : -1;
    /* at least 1 MiB, at most 64 TiB (the byte count then fits with room to spare) */
    if (!(gib >= 1.0 / 1024 && gib <= CQ_ENV_GIB_MAX))
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "'%s' is not a device-memory size: want GiB as a positive decimal such as 7.5 or 24 "
                       "(1/1024 to %d)",
                       text, CQ_ENV_GIB_MAX);
    *bytes = (uint64_t)(gib * 1073741824.0 + 0.5);
    return CQ_OK;
}

cq_status cq_env_gpu_memory(const char *given, uint64_t *bytes) {
    *bytes = 0;
    if (given) return cq_env_parse_gib(given, bytes);
    const char *e = getenv("CORTIQ_GPU_MEMORY");
    if (!e || !*e) return CQ_OK;
    if (cq_env_parse_gib(e, bytes) == CQ_OK) return CQ_OK;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", cq_last_error());
    return cq_fail(CQ_ERR_INVALID_ARG, "CORTIQ_GPU_MEMORY: %s", msg);
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
    /* "auto" may become CUDA: its device (CORTIQ_CUDA_DEVICE) decides, and its knobs apply if it does; the
     * lookup is by name only, so that nothing is probed here */
    const char *colon = strchr(name, ':');
    const size_t n = colon ? (size_t)(colon - name) : strlen(name);
    if ((n == 4 && !strncasecmp(name, "cuda", 4)) || cq_backend_is_auto(name)) env_cuda(out);
    if (n == 6 && !strncasecmp(name, "vulkan", 6)) env_vulkan(out);
    return CQ_OK;
}

cq_status cq_env_backend_resolve(const char *name, char *out, size_t out_len, char *why, size_t why_len) {
    if (!name || !*name) name = cq_env_backend_name();
    cq_backend_opts o;
    CQ_TRY(cq_env_backend_opts(name, &o));
    return cq_backend_resolve(name, &o, out, out_len, why, why_len);
}

cq_status cq_env_backend_open(const char *name, int threads, uint64_t mem_budget, cq_backend **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_env_backend_open: out is NULL");
    *out = NULL;
    if (!name || !*name) name = cq_env_backend_name();
    cq_backend_opts o;
    CQ_TRY(cq_env_backend_opts(name, &o));
    o.cpu.threads = threads;
    /* the variable only where the command gave no size (its option wins) */
    if (!mem_budget) CQ_TRY(cq_env_gpu_memory(NULL, &mem_budget));
    o.mem_budget = mem_budget;
    return cq_backend_open(name, &o, out);
}

cq_status cq_env_backend_create(const char *name, int threads, cq_backend **out) {
    return cq_env_backend_open(name, threads, 0, out);
}

cq_status cq_env_model_load(cq_model *m, const char *name, int threads, uint64_t mem_budget) {
    cq_backend *be = NULL;
    CQ_TRY(cq_env_backend_open(name, threads, mem_budget, &be));
    CQ_TRY(cq_api_model_use_backend(m, be)); /* the model owns it, also on failure */
    return cq_model_load(m);
}
