/*
 * cuda_graph.c — recordings (ops.h): a stream capture of a sequence of ops,
 * instantiated once as a CUDA graph and replayed with one launch.
 *
 * Why: the denoiser step is ~200 GEMMs and as many small kernels; launched
 * one by one the host pays each launch and the device idles between some of
 * them. The ops already only enqueue work on the backend's one stream, so
 * capturing that stream records the step as it runs.
 *
 * What cannot be recorded fails with a message instead of corrupting the
 * graph: uploads and downloads from pageable host memory, sync, and any
 * device allocation (the allocator and the scratch slots check `recording`).
 * Scratch slots grow on demand and a grown slot is a new buffer, so each
 * recording keeps the slots' generation at its capture; a replay after a
 * slot moved returns CQ_ERR_AGAIN and the caller runs the ops directly.
 *
 * A replay also advances the op counter and the op log by the recorded ops,
 * so a deferred error found by the next sync names ops as in a direct run
 * (the kernels recorded their op and number at capture; the numbers are
 * those since the sync before the capture, the same as on replay when each
 * step syncs once, as the denoiser does).
 */
#include <string.h>

#include "backends/cuda/cuda_impl.h"

typedef struct cq_cuda_rec {
    cudaGraphExec_t exec;
    unsigned scratch_gen;
    unsigned n_ops;
    unsigned char *ops; /* cq_op of each recorded op */
} cq_cuda_rec;

bool cq_cuda_can_record(const cq_backend *be) {
    const cq_cuda *c = (const cq_cuda *)be;
    /* a streamed weight's copy runs on a second stream, which the capture does not follow */
    return c->graphs && !c->prof.on && !c->sync_each_op && !c->recording && !c->xfer.n_bound;
}

cq_status cq_cuda_record_begin(cq_backend *be) {
    cq_cuda *c = cq_cuda_of(be);
    if (!cq_cuda_can_record(be))
        return cq_fail(CQ_ERR_UNSUPPORTED, "cuda: cannot record now (per-op timing, CORTIQ_CUDA_SYNC, "
                                           "CORTIQ_CUDA_GRAPH=0, streamed weights bound, or a recording "
                                           "already under way)");
    cudaSetDevice(c->device);
    /* thread-local: another thread's unrelated CUDA calls neither join nor break the capture */
    CQ_CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "record",
                "cudaStreamBeginCapture");
    c->recording = true;
    c->rec_seq0 = c->seq;
    c->staged_x.valid = false; /* a recording must hold its own stagings: replays start from anything */
    return CQ_OK;
}

cq_status cq_cuda_record_end(cq_backend *be, bool keep, void **handle) {
    cq_cuda *c = cq_cuda_of(be);
    *handle = NULL;
    if (!c->recording) return cq_fail(CQ_ERR_INVALID_ARG, "cuda: record_end without record_begin");
    cudaSetDevice(c->device);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    c->recording = false;
    c->staged_x.valid = false; /* the recorded stagings never ran */
    const unsigned n = c->seq - c->rec_seq0;
    if (e != cudaSuccess || !keep) {
        (void)cudaGetLastError();
        c->seq = c->rec_seq0; /* the recorded ops never run */
        if (g) cudaGraphDestroy(g);
        if (!keep) return CQ_OK;
        return cq_fail(CQ_ERR_INTERNAL, "cuda: the recording of %u ops failed: %s", n, cudaGetErrorString(e));
    }
    cq_cuda_rec *r = cq_calloc(1, sizeof *r);
    if (r) r->ops = cq_calloc(n ? n : 1, 1);
    if (!r || !r->ops) {
        cudaGraphDestroy(g);
        if (r) cq_free(r);
        return cq_fail(CQ_ERR_NOMEM, "cuda: out of memory keeping a recording");
    }
    for (unsigned i = 0; i < n; i++) r->ops[i] = c->op_log[(c->rec_seq0 + i) & 255];
    r->n_ops = n;
    r->scratch_gen = c->scratch_gen;
    e = cudaGraphInstantiate(&r->exec, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cq_free(r->ops);
        cq_free(r);
        return cq_fail(CQ_ERR_INTERNAL, "cuda: instantiating the recording of %u ops failed: %s", n,
                       cudaGetErrorString(e));
    }
    /* the ops were only recorded: the counter restarts where the capture began */
    c->seq = c->rec_seq0;
    *handle = r;
    return CQ_OK;
}

cq_status cq_cuda_replay(cq_backend *be, void *handle) {
    cq_cuda *c = cq_cuda_of(be);
    cq_cuda_rec *r = handle;
    if (c->recording) return cq_fail(CQ_ERR_INVALID_ARG, "cuda: cannot replay a recording while recording");
    if (r->scratch_gen != c->scratch_gen)
        return cq_fail(CQ_ERR_AGAIN, "cuda: the recording refers to scratch buffers that have since been replaced");
    cudaSetDevice(c->device);
    c->staged_x.valid = false; /* the slot now holds the recording's last staging */
    CQ_CUDA_TRY(cudaGraphLaunch(r->exec, c->stream), "replay", "cudaGraphLaunch");
    for (unsigned i = 0; i < r->n_ops; i++) c->op_log[(c->seq + i) & 255] = r->ops[i];
    c->seq += r->n_ops;
    c->replays++;
    return CQ_OK;
}

void cq_cuda_record_free(cq_backend *be, void *handle) {
    cq_cuda_rec *r = handle;
    (void)be;
    if (!r) return;
    if (r->exec) cudaGraphExecDestroy(r->exec);
    cq_free(r->ops);
    cq_free(r);
}
