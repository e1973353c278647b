/*
 * cuda_lt_load.c — cuBLASLt, opened with dlopen when the first CUDA backend
 * is created (or `cortiq gpu` asks), never linked. The library is over
 * 500 MB and its initialisers run in every process that maps it: linked, they
 * cost every command ~0.35 s and ~210 MB resident before main, a CPU-only run
 * and `cortiq --version` alike (docs/PERFORMANCE.md, Start-up). The CUDA
 * runtime is linked statically and loads the driver at its first call, so
 * with this nothing of CUDA is loaded until a command asks for the GPU.
 *
 * Which file: the one cq_cuda_set_cublaslt named (a path, or a name the
 * dynamic loader searches for; the cortiq command maps CORTIQ_CUDA_CUBLASLT
 * onto it, the library reads no environment), else libcublasLt.so.<major>
 * of the cuBLAS headers the build used (the dynamic loader's search:
 * LD_LIBRARY_PATH, ld.so.cache), then
 * the same name in the build toolkit's library directory. A library that is
 * missing, or lacks one of the functions, makes cq_cuda_lt_load fail with a
 * message naming it; the program itself always starts.
 *
 * Once per process (pthread_once); the library is never unloaded, since
 * plans and handles may outlive any one backend and cuBLASLt's own
 * destructors are not meant to run before exit.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

#define LT_STR_(x) #x
#define LT_STR(x) LT_STR_(x)
#define LT_SONAME "libcublasLt.so." LT_STR(CUBLAS_VER_MAJOR)

/* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer of this size. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers must be pointer-sized for dlsym");

cq_cuda_lt_api cq_lt;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cq_status g_status = CQ_ERR_INTERNAL;
static char g_why[1280];  /* the failure, ready for cq_fail */
static char g_path[512]; /* the file loaded */
static char g_want[512]; /* cq_cuda_set_cublaslt's choice, "" for the default */

void cq_cuda_set_cublaslt(const char *path) { snprintf(g_want, sizeof g_want, "%s", path ? path : ""); }

static void dl_reason(char *buf, size_t n) {
    const char *e = dlerror();
    snprintf(buf, n, "%s", e ? e : "unknown dynamic loader error");
}

/* The library's handle, or NULL with g_why set. */
static void *lt_open(void) {
    const char *want = g_want;
    char why[512];
    if (*want) {
        void *h = dlopen(want, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        dl_reason(why, sizeof why);
        snprintf(g_why, sizeof g_why,
                 "cuda backend: cannot load %s: %s; name the CUDA toolkit's libcublasLt instead (the cortiq command: "
                 "CORTIQ_CUDA_CUBLASLT), or use --backend cpu",
                 want, why);
        return NULL;
    }
    void *h = dlopen(LT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    dl_reason(why, sizeof why);
#ifdef CQ_CUDA_TOOLKIT_LIBDIR
    h = dlopen(CQ_CUDA_TOOLKIT_LIBDIR "/" LT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    (void)dlerror();
#define LT_ALSO " (nor in " CQ_CUDA_TOOLKIT_LIBDIR ")"
#else
#define LT_ALSO ""
#endif
    snprintf(g_why, sizeof g_why,
             "cuda backend: cannot load " LT_SONAME LT_ALSO ": %s; install the CUDA toolkit's cuBLAS (or add its "
             "library directory to LD_LIBRARY_PATH) or use --backend cpu",
             why);
    return NULL;
}

static void lt_load_once(void) {
    void *h = lt_open();
    if (!h) {
        g_status = CQ_ERR_UNSUPPORTED;
        return;
    }
    cq_cuda_lt_api api;
    memset(&api, 0, sizeof api);
    void *sym = NULL;
#define CQ_CUBLASLT_LOAD(f)                                                                                     \
    (void)dlerror();                                                                                           \
    sym = dlsym(h, #f);                                                                                         \
    if (!sym) {                                                                                                 \
        char why[512];                                                                                          \
        dl_reason(why, sizeof why);                                                                             \
        snprintf(g_why, sizeof g_why,                                                                           \
                 "cuda backend: the cuBLASLt library loaded lacks %s (%s): it is not the cuBLAS %d this build "    \
                 "needs; install it or use --backend cpu",                                                      \
                 #f, why, CUBLAS_VER_MAJOR);                                                                    \
        g_status = CQ_ERR_UNSUPPORTED;                                                                          \
        return; /* the handle stays open: unloading a library whose initialisers ran gains nothing here */     \
    }                                                                                                           \
    memcpy(&api.f, &sym, sizeof sym);
    CQ_CUBLASLT_FUNCS(CQ_CUBLASLT_LOAD)
#undef CQ_CUBLASLT_LOAD
    Dl_info info;
    memset(&info, 0, sizeof info);
    memcpy(&sym, &api.cublasLtCreate, sizeof sym);
    if (dladdr(sym, &info) && info.dli_fname)
        snprintf(g_path, sizeof g_path, "%s", info.dli_fname);
    else
        snprintf(g_path, sizeof g_path, "%s", LT_SONAME);
    cq_lt = api;
    g_status = CQ_OK;
    CQ_DEBUG("cuda: loaded cuBLASLt %zu from %s (built with cuBLAS %d.%d)", api.cublasLtGetVersion(), g_path,
             CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR);
}

cq_status cq_cuda_lt_load(const char **path) {
    if (path) *path = NULL;
    if (pthread_once(&g_once, lt_load_once) != 0)
        return cq_fail(CQ_ERR_INTERNAL, "cuda backend: pthread_once failed while loading cuBLASLt");
    if (g_status != CQ_OK) return cq_fail(g_status, "%s", g_why);
    if (path) *path = g_path;
    return CQ_OK;
}
