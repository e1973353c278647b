/*
 * cuda_stream.c — STREAMED weights: kept in page-locked host memory and
 * copied to the device just before each use.
 *
 * Under a device-memory budget too small for a model's weights even in their
 * codec, the residency planner binds some of them STREAMED
 * (cq_backend_set_stream_keep says how many bytes of every so many stay on the
 * device; the rest stream, spread evenly through the blocks). Binding copies
 * the payload once from the mapping into cudaHostAlloc'd memory, mapped into
 * the device's address space: the DMA engine reads it at the bus's full rate,
 * and get_rows / copy read just the rows they need straight from it.
 *
 * Each use (cq_cuda_weight_operand) enqueues the payload's copy into the next
 * of CQ_CUDA_STREAM_SLOTS device slots on a copy stream of its own, makes the
 * compute stream wait for it, decodes it there into the plane slot as a
 * COMPACT weight is, and records that the slot's reads are enqueued. The copy
 * into a slot waits for the reads of its previous payload. The host enqueues
 * a step far ahead of the device, so the copy engine runs up to
 * CQ_CUDA_STREAM_SLOTS weights ahead of the compute: a streamed weight's copy
 * overlaps the ops of the weights before it, and the step waits on the bus
 * only where the copies are slower than those ops. The bits are those of the
 * COMPACT mode: the same payload reaches the same decoder.
 *
 * A recording (CUDA graph) captures one stream; while streamed weights are
 * bound the backend does not record (cq_cuda_can_record), so the steps run
 * op by op.
 */
#include <string.h>

#include "backends/cuda/cuda_impl.h"

static cq_status xfer_init(cq_cuda *c) {
    cq_cuda_xfer *x = &c->xfer;
    if (x->stream) return CQ_OK;
    for (int i = 0; i < CQ_CUDA_STREAM_SLOTS; i++) {
        if (!x->ready[i])
            CQ_CUDA_TRY(cudaEventCreateWithFlags(&x->ready[i], cudaEventDisableTiming), "stream", "making an event");
        if (!x->done[i])
            CQ_CUDA_TRY(cudaEventCreateWithFlags(&x->done[i], cudaEventDisableTiming), "stream", "making an event");
    }
    CQ_CUDA_TRY(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking), "stream", "making the copy stream");
    return CQ_OK;
}

void cq_cuda_stream_release_slots(cq_cuda *c) {
    cq_cuda_xfer *x = &c->xfer;
    for (int i = 0; i < CQ_CUDA_STREAM_SLOTS; i++) {
        if (x->slot[i]) cq_cuda_free(c, x->slot[i]);
        x->slot[i] = NULL;
    }
    x->cap = 0;
}

void cq_cuda_stream_destroy(cq_cuda *c) {
    cq_cuda_xfer *x = &c->xfer;
    if (x->stream) cudaStreamSynchronize(x->stream);
    cq_cuda_stream_release_slots(c);
    for (int i = 0; i < CQ_CUDA_STREAM_SLOTS; i++) {
        if (x->ready[i]) cudaEventDestroy(x->ready[i]);
        if (x->done[i]) cudaEventDestroy(x->done[i]);
        x->ready[i] = x->done[i] = NULL;
    }
    if (x->stream) cudaStreamDestroy(x->stream);
    x->stream = NULL;
}

cq_status cq_cuda_set_stream_keep(cq_backend *be, uint64_t keep, uint64_t of) {
    cq_cuda_xfer *x = &cq_cuda_of(be)->xfer;
    x->keep = keep;
    x->of = of;
    x->kept = x->seen = 0;
    return CQ_OK;
}

bool cq_cuda_stream_keeps(cq_cuda *c, uint64_t compact) {
    cq_cuda_xfer *x = &c->xfer;
    x->seen += compact;
    if (!x->keep || !x->of) return false;
    /* within keep/of of what was seen: the kept ones spread evenly, and at most `keep` of `of` in all */
    const double limit = x->keep >= x->of ? (double)x->seen : (double)x->keep * ((double)x->seen / (double)x->of);
    if ((double)(x->kept + compact) > limit) return false;
    x->kept += compact;
    return true;
}

cq_status cq_cuda_stream_bind(cq_cuda *c, const cq_tensor_view *v, cq_cuda_weight *w) {
    cq_cuda_xfer *x = &c->xfer;
    void *h = NULL, *d = NULL;
    const double t0 = cq_now();
    cudaError_t e = cudaHostAlloc(&h, (size_t)v->nbytes, cudaHostAllocMapped | cudaHostAllocPortable);
    x->pin_s += cq_now() - t0;
    if (e != cudaSuccess) {
        char a[32], b[32];
        (void)cudaGetLastError(); /* not sticky: the backend goes on */
        return cq_fail(CQ_ERR_NOMEM,
                       "cuda: streaming %s needs %s of page-locked host memory more (%s held already): %s; raise "
                       "--gpu-memory so less streams, or free host memory",
                       v->name, cq_fmt_bytes((uint64_t)v->nbytes, a, sizeof a), cq_fmt_bytes(x->pinned, b, sizeof b),
                       cudaGetErrorString(e));
    }
    e = cudaHostGetDevicePointer(&d, h, 0);
    if (e != cudaSuccess) {
        cudaFreeHost(h);
        return cq_cuda_fail(e, "bind_weight", "mapping a streamed weight's host memory");
    }
    cq_cuda_host_copy(c, h, v->data, (size_t)v->nbytes);
    w->host = h;
    w->packed = d;
    w->payload = (size_t)v->nbytes;
    w->streamed = true;
    w->codec = (int)v->dtype;
    x->pinned += w->payload;
    x->n_bound++;
    return CQ_OK;
}

void cq_cuda_stream_free_weight(cq_cuda *c, cq_cuda_weight *w) {
    if (!w->host) return;
    cq_cuda_xfer *x = &c->xfer;
    /* a queued copy (copy stream) or a row read (compute stream) may still read it */
    if (x->stream) cudaStreamSynchronize(x->stream);
    cudaStreamSynchronize(c->stream);
    const double t0 = cq_now();
    cudaFreeHost(w->host);
    x->pin_s += cq_now() - t0;
    w->host = w->packed = NULL;
    x->pinned -= w->payload;
    x->n_bound--;
}

/* Slots of `cap` bytes, once both streams are idle (no copy writes, no decode reads the old ones). */
static cq_status grow(cq_cuda *c, size_t cap) {
    cq_cuda_xfer *x = &c->xfer;
    CQ_CUDA_TRY(cudaStreamSynchronize(x->stream), "stream", "waiting for the queued copies");
    CQ_CUDA_TRY(cudaStreamSynchronize(c->stream), "stream", "waiting for the queued work");
    cq_cuda_stream_release_slots(c);
    for (int i = 0; i < CQ_CUDA_STREAM_SLOTS; i++) CQ_TRY(cq_cuda_malloc(c, cap, &x->slot[i]));
    x->cap = cap;
    return CQ_OK;
}

cq_status cq_cuda_stream_fetch(cq_cuda *c, const cq_cuda_weight *w, const void **dev, int *slot) {
    if (c->recording) return cq_cuda_not_while_recording("a streamed weight's copy");
    cq_cuda_xfer *x = &c->xfer;
    CQ_TRY(xfer_init(c));
    /* grown to the largest payload fetched, not the largest bound: a token table that only get_rows reads
     * (from host memory) is never copied, and the plan counts no slot for it */
    if (x->cap < w->payload) CQ_TRY(grow(c, w->payload));
    const int i = x->next;
    x->next = (i + 1) % CQ_CUDA_STREAM_SLOTS;
    CQ_CUDA_TRY(cudaStreamWaitEvent(x->stream, x->done[i], 0), "stream", "ordering a copy after the slot's reads");
    CQ_CUDA_TRY(cudaMemcpyAsync(x->slot[i], w->host, w->payload, cudaMemcpyHostToDevice, x->stream), "stream",
                "copying a streamed weight to the device");
    CQ_CUDA_TRY(cudaEventRecord(x->ready[i], x->stream), "stream", "marking a copied weight");
    CQ_CUDA_TRY(cudaStreamWaitEvent(c->stream, x->ready[i], 0), "stream", "ordering the use after the copy");
    x->bytes += w->payload;
    *dev = x->slot[i];
    *slot = i;
    return CQ_OK;
}

cq_status cq_cuda_stream_fetched(cq_cuda *c, int slot) {
    CQ_CUDA_TRY(cudaEventRecord(c->xfer.done[slot], c->stream), "stream", "marking a slot's reads");
    return CQ_OK;
}
