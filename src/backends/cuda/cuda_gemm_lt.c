/*
 * cuda_gemm_lt.c — the matmul's GEMMs on cuBLASLt: plans (descriptors and
 * one algorithm) cached per shape, pitch, alignment and output type, the
 * algorithm chosen by timing, and the cublasLtMatmul call.
 *
 * Why time: cublasLtMatmulAlgoGetHeuristic orders its candidates by an
 * estimate, and its first choice is not always the fastest on the device at
 * hand (on an H200 the DiT's GEMMs ran at ~476 TFLOP/s where PyTorch's bf16
 * GEMMs of the same shapes reach 570-600). So a new plan asks for up to CQ_CUDA_TUNE_ALGOS
 * candidates and runs each on the call's own operands: one warm-up, then
 * CQ_CUDA_TUNE_RUNS timed runs, the rounds interleaved so a clock change hits
 * every candidate alike, each run between two CUDA events on the backend's
 * stream; the fastest by its best run wins. The heuristic's first choice is
 * kept unless another beats it by more than 2%, below which the difference is
 * run-to-run noise (and a closer call would flip between processes).
 *
 * Only when the GEMM does not read its output (beta == 0): then the extra
 * runs are harmless, and the caller's own run afterwards leaves exactly the
 * chosen algorithm's result in D. Accumulating GEMMs, a stream being captured
 * into a CUDA graph (the timing waits for the stream) and
 * CORTIQ_CUDA_GEMM_TUNE=0 keep the heuristic's first choice. A plan's
 * algorithm never changes afterwards, so every call of a shape computes the
 * same bits.
 *
 * Cost: per new plan, (1 + CQ_CUDA_TUNE_RUNS) runs of up to 8 candidates and
 * one stream wait (~26 ms for the 7B DiT's largest GEMMs at 1024²). Plans are
 * made in a model's first step and then reused (CQ_CUDA_PLANS of them, least
 * recently used evicted), so later steps neither time nor wait; the events
 * are made once and nothing here allocates device memory.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"

/* A candidate is taken over the heuristic's first only below this fraction of its time. */
#define TUNE_MARGIN 0.98f

static void plan_release(cq_cuda_plan *p) {
    if (p->a) cq_lt.cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cq_lt.cublasLtMatrixLayoutDestroy(p->b);
    if (p->d) cq_lt.cublasLtMatrixLayoutDestroy(p->d);
    if (p->op) cq_lt.cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

void cq_cuda_plans_destroy(cq_cuda *c) {
    for (int i = 0; i < CQ_CUDA_PLANS; i++) plan_release(&c->plans[i]);
    for (int i = 0; i < CQ_CUDA_TUNE_EVENTS; i++)
        if (c->tune_ev[i]) {
            cudaEventDestroy(c->tune_ev[i]);
            c->tune_ev[i] = NULL;
        }
}

static unsigned ptr_align(const void *p) {
    uintptr_t u = (uintptr_t)p;
    unsigned a = 256;
    while (a > 1 && (u % a)) a >>= 1;
    return a > 16 ? 16 : a;
}

static cq_status lt_check(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return CQ_OK;
    return cq_fail(CQ_ERR_INTERNAL, "cuda matmul: %s failed: %s", what, cq_lt.cublasLtGetStatusString(s));
}

static cublasStatus_t lt_run(cq_cuda *c, const cq_cuda_plan *p, const cublasLtMatmulAlgo_t *algo,
                             const cq_cuda_gemm_call *g) {
    return cq_lt.cublasLtMatmul(c->lt, p->op, &g->alpha, g->A, p->a, g->B, p->b, &g->beta, g->D, p->d, g->D, p->d,
                                algo, c->lt_ws, c->lt_ws_size, c->stream);
}

/* "algo 21 tile 31 stages 22 split-k 1 cluster 2" for the debug log. */
static void algo_name(const cublasLtMatmulAlgo_t *a, char *buf, size_t n) {
    int32_t id = -1, splitk = 0;
    uint32_t tile = 0, stages = 0;
    uint16_t cluster = 0;
    size_t w;
    cq_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cq_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
    cq_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
    cq_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
    cq_lt.cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w);
    snprintf(buf, n, "algo %d tile %u stages %u split-k %d cluster %u", (int)id, tile, stages, (int)splitk,
             (unsigned)cluster);
}

/* Times res[0, n) (n >= 2) on the call's operands; *pick = the one to keep. */
static cq_status tune(cq_cuda *c, const cq_cuda_plan *p, const cq_cuda_gemm_call *g,
                      const cublasLtMatmulHeuristicResult_t *res, int n, int *pick) {
    bool live[CQ_CUDA_TUNE_ALGOS];
    float ms[CQ_CUDA_TUNE_ALGOS];
    *pick = 0;
    for (int i = 0; i < CQ_CUDA_TUNE_EVENTS; i++)
        if (!c->tune_ev[i]) CQ_CUDA_TRY(cudaEventCreate(&c->tune_ev[i]), "matmul", "cudaEventCreate (GEMM timing)");
    /* warm-up round; a candidate cuBLASLt refuses to launch is dropped (and
     * its launch error cleared, so no later kernel check reports it) */
    for (int i = 0; i < n; i++) {
        live[i] = lt_run(c, p, &res[i].algo, g) == CUBLAS_STATUS_SUCCESS;
        if (!live[i]) (void)cudaGetLastError();
        ms[i] = INFINITY;
    }
    for (int r = 0; r < CQ_CUDA_TUNE_RUNS; r++)
        for (int i = 0; i < n; i++) {
            if (!live[i]) continue;
            cudaEvent_t *ev = &c->tune_ev[2 * (r * CQ_CUDA_TUNE_ALGOS + i)];
            CQ_CUDA_TRY(cudaEventRecord(ev[0], c->stream), "matmul", "cudaEventRecord (GEMM timing)");
            if (lt_run(c, p, &res[i].algo, g) != CUBLAS_STATUS_SUCCESS) {
                live[i] = false;
                (void)cudaGetLastError();
            }
            CQ_CUDA_TRY(cudaEventRecord(ev[1], c->stream), "matmul", "cudaEventRecord (GEMM timing)");
        }
    CQ_CUDA_TRY(cudaStreamSynchronize(c->stream), "matmul", "waiting for the GEMM algorithm timing runs");
    int first = -1, best = -1;
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        for (int r = 0; r < CQ_CUDA_TUNE_RUNS; r++) {
            const cudaEvent_t *ev = &c->tune_ev[2 * (r * CQ_CUDA_TUNE_ALGOS + i)];
            float t = 0.0f;
            if (cudaEventElapsedTime(&t, ev[0], ev[1]) == cudaSuccess && t < ms[i]) ms[i] = t;
        }
        (void)cudaGetLastError();
        if (!(ms[i] < INFINITY)) continue;
        if (first < 0) first = i;
        if (best < 0 || ms[i] < ms[best]) best = i;
    }
    if (best < 0) { /* nothing could be timed: the heuristic's first choice, whose own run reports any failure */
        CQ_DEBUG("cuda matmul: M=%lld N=%lld K=%lld: no candidate could be timed; using the heuristic's first",
                 (long long)p->M, (long long)p->N, (long long)p->K);
        return CQ_OK;
    }
    if (best != first && !(ms[best] < TUNE_MARGIN * ms[first])) best = first;
    *pick = best;

    char list[640], name[96];
    size_t at = 0;
    list[0] = 0;
    for (int i = 0; i < n && at < sizeof list; i++) {
        const char *sep = i ? ", " : "";
        int w = live[i] && ms[i] < INFINITY ? snprintf(list + at, sizeof list - at, "%s#%d %.3f", sep, i, (double)ms[i])
                                            : snprintf(list + at, sizeof list - at, "%s#%d failed", sep, i);
        if (w < 0) break;
        at += (size_t)w;
    }
    algo_name(&res[best].algo, name, sizeof name);
    const double flop = 2.0 * (double)p->M * (double)p->N * (double)p->K;
    CQ_DEBUG("cuda matmul: M=%lld N=%lld K=%lld: timed %d cuBLASLt candidates (ms, best of %d runs: %s); chose #%d (%s, "
             "workspace %zu B): %.3f ms, %.1f TFLOP/s",
             (long long)p->M, (long long)p->N, (long long)p->K, n, CQ_CUDA_TUNE_RUNS, list, best, name,
             res[best].workspaceSize, (double)ms[best], flop / ((double)ms[best] * 1e9));
    return CQ_OK;
}

/* Build the descriptors and choose the plan's algorithm; g is the call that needs the plan. */
static cq_status plan_make(cq_cuda *c, cq_cuda_plan *p, const cq_cuda_gemm_call *g) {
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cudaDataType_t dt = p->ddt == CQK_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_HOST; /* alpha/beta by value: nothing to keep alive */
    CQ_TRY(lt_check(cq_lt.cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                    "cublasLtMatmulDescCreate"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                    "TRANSA"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                    "TRANSB"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm),
                    "POINTER_MODE"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16F, (uint64_t)p->K, (uint64_t)p->N, p->lda),
                    "layout A"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16F, (uint64_t)p->K, (uint64_t)p->M, p->ldb),
                    "layout B"));
    CQ_TRY(lt_check(cq_lt.cublasLtMatrixLayoutCreate(&p->d, dt, (uint64_t)p->N, (uint64_t)p->M, p->ldd),
                    "layout D"));
    cublasLtMatmulPreference_t pref = NULL;
    CQ_TRY(lt_check(cq_lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
    /* 32 MiB (cuda_backend.c) is NVIDIA's recommended cuBLAS workspace on
     * Hopper; the heuristic offers only candidates that fit in it */
    uint64_t ws = c->lt_ws_size;
    uint32_t al = p->align;
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    /* Split-K reductions: not INPLACE, whose parts meet in the output under
     * counters in the workspace with no documented order (a plan must give the
     * same bits every call); with a bf16 output not OUTPUT_TYPE either, which
     * would round every partial sum to bf16. Algorithms without split-K
     * (scheme NONE) always pass the mask. */
    uint32_t rm = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (p->ddt == CQK_F32) rm |= CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    cq_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &rm, sizeof rm);
    cublasLtMatmulHeuristicResult_t res[CQ_CUDA_TUNE_ALGOS];
    int n = 0;
    const bool timed = c->gemm_tune && !p->beta_nonzero;
    memset(res, 0, sizeof res);
    cublasStatus_t s = cq_lt.cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->d, p->d, pref,
                                                            timed ? CQ_CUDA_TUNE_ALGOS : 1, res, &n);
    cq_lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS) n = 0;
    int kept = 0; /* the usable results, in the heuristic's order */
    for (int i = 0; i < n && i < CQ_CUDA_TUNE_ALGOS; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= c->lt_ws_size) res[kept++] = res[i];
    if (kept == 0) {
        CQ_DEBUG("cuda matmul: cuBLASLt has no algorithm for M=%lld N=%lld K=%lld (lda %lld ldb %lld ldd %lld, "
                 "align %u): using the CUDA-core kernel",
                 (long long)p->M, (long long)p->N, (long long)p->K, (long long)p->lda, (long long)p->ldb,
                 (long long)p->ldd, p->align);
        p->ok = 0;
        return CQ_OK;
    }
    int pick = 0;
    if (timed && kept > 1) {
        enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(c->stream, &cs) != cudaSuccess) (void)cudaGetLastError();
        if (cs == cudaStreamCaptureStatusNone)
            CQ_TRY(tune(c, p, g, res, kept, &pick));
        else
            CQ_DEBUG("cuda matmul: M=%lld N=%lld K=%lld planned during a stream capture: the heuristic's first "
                     "choice, untimed", (long long)p->M, (long long)p->N, (long long)p->K);
    }
    p->algo = res[pick].algo;
    p->ws_needed = res[pick].workspaceSize;
    p->ok = 1;
    return CQ_OK;
}

static cq_status plan_get(cq_cuda *c, const cq_cuda_gemm_call *g, cq_cuda_plan **out) {
    unsigned align = ptr_align(g->A);
    if (ptr_align(g->B) < align) align = ptr_align(g->B);
    if (ptr_align(g->D) < align) align = ptr_align(g->D);
    const int beta_nonzero = g->beta != 0.0f;
    cq_cuda_plan *victim = &c->plans[0];
    c->plan_clock++;
    for (int i = 0; i < CQ_CUDA_PLANS; i++) {
        cq_cuda_plan *p = &c->plans[i];
        if (p->op && p->M == g->M && p->N == g->N && p->K == g->K && p->lda == g->lda && p->ldb == g->ldb &&
            p->ldd == g->ldd && p->ddt == g->ddt && p->beta_nonzero == beta_nonzero && p->align == align) {
            p->last_use = c->plan_clock;
            *out = p;
            return CQ_OK;
        }
        if (!victim->op) continue;
        if (!p->op || p->last_use < victim->last_use) victim = p;
    }
    plan_release(victim);
    victim->M = g->M, victim->N = g->N, victim->K = g->K, victim->lda = g->lda, victim->ldb = g->ldb;
    victim->ldd = g->ldd, victim->ddt = g->ddt, victim->beta_nonzero = beta_nonzero, victim->align = align;
    victim->last_use = c->plan_clock;
    cq_status s = plan_make(c, victim, g);
    if (s != CQ_OK) {
        plan_release(victim);
        return s;
    }
    *out = victim;
    return CQ_OK;
}

cq_status cq_cuda_lt_gemm(cq_cuda *c, const cq_cuda_gemm_call *g, bool *done) {
    *done = false;
    cq_cuda_plan *p = NULL;
    CQ_TRY(plan_get(c, g, &p));
    if (!p->ok) return CQ_OK;
    cublasStatus_t s = lt_run(c, p, &p->algo, g);
    if (s != CUBLAS_STATUS_SUCCESS)
        return cq_fail(CQ_ERR_INTERNAL, "cuda matmul: cublasLtMatmul failed: %s (M=%lld N=%lld K=%lld)",
                       cq_lt.cublasLtGetStatusString(s), (long long)g->M, (long long)g->N, (long long)g->K);
    *done = true;
    return CQ_OK;
}
