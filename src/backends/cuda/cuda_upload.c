/*
 * cuda_upload.c — weight payloads to the device through a pinned staging ring.
 *
 * A payload lives in the pack's mapping, pageable memory: a cudaMemcpyAsync
 * from there is synchronous for the host and goes through the driver's small
 * bounce buffer, which bounds a pack's load at a few GB/s. Instead the host
 * copies the payload into page-locked buffers (several threads for a large
 * piece) and queues an asynchronous copy from there, so the host fills the
 * next buffer while the DMA engine drains the last and the device decodes the
 * weight before. The bytes on the device are the same; only the path changes.
 *
 * The ring: CQ_CUDA_RING_N buffers of CQ_CUDA_RING_BYTES, cudaHostAlloc'd
 * once at the first weight upload and freed when the backend is destroyed.
 * It is host memory, outside the device budget (docs/CUDA.md, Weights).
 * Payloads are packed one after another into the current buffer (256-byte
 * aligned); one that does not fit goes to the next buffer, one larger than a
 * buffer goes in buffer-sized pieces. Each buffer has an event recorded on
 * the stream after the last copy out of it.
 *
 * Ordering: the host writes only bytes no queued copy reads. Within the
 * current buffer it writes past the end of what was queued from it; before
 * it moves on to another buffer it waits for that buffer's event, i.e. for
 * every copy out of it (the event is re-recorded after each one, and the
 * stream runs them in order). So the host runs at most the ring's size ahead
 * of the device. When cq_cuda_upload returns, the source has been read in
 * full: the mapping may be released at once.
 *
 * If the ring cannot be allocated (pinned memory is a limited resource), the
 * backend says so once and uploads from the mapping directly, as before.
 * One backend's uploads are not concurrent (nor is anything else of it).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>

#include "backends/cuda/cuda_impl.h"
#include "format/cmf.h"

#define RING_ALIGN 256
/* below this a piece is copied by the calling thread alone */
#define PAR_MIN ((size_t)4 << 20)
/* host copy threads: past a few, a memcpy out of the page cache is bound by memory bandwidth */
#define COPY_THREADS 16

static void ring_free(cq_cuda_ring *r) {
    for (int i = 0; i < CQ_CUDA_RING_N; i++) {
        if (r->ev[i]) cudaEventDestroy(r->ev[i]);
        if (r->buf[i]) cudaFreeHost(r->buf[i]);
        r->ev[i] = NULL;
        r->buf[i] = NULL;
        r->queued[i] = false;
    }
    cq_pool_free(r->pool);
    r->pool = NULL;
    r->ready = false;
}

/* The ring at the first upload; on failure r->failed (said once) and the direct path. */
static void ring_init(cq_cuda *c) {
    cq_cuda_ring *r = &c->ring;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < CQ_CUDA_RING_N && e == cudaSuccess; i++) {
        e = cudaHostAlloc(&r->buf[i], CQ_CUDA_RING_BYTES, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&r->ev[i], cudaEventDisableTiming);
        else r->buf[i] = NULL;
    }
    if (e != cudaSuccess) {
        char b[32];
        (void)cudaGetLastError(); /* not sticky: the backend goes on */
        CQ_WARN("cuda: no pinned staging for weight uploads (%d x %s: %s); uploading from the mapping directly, "
                "which is slower",
                CQ_CUDA_RING_N, cq_fmt_bytes(CQ_CUDA_RING_BYTES, b, sizeof b), cudaGetErrorString(e));
        ring_free(r);
        r->failed = true;
        return;
    }
    int n = cq_default_threads();
    if (n > COPY_THREADS) n = COPY_THREADS;
    if (n < 2 || cq_pool_create(n, &r->pool) != CQ_OK) r->pool = NULL; /* one thread copies: slower, still right */
    r->cur = 0;
    r->fill = 0;
    r->ready = true;
}

void cq_cuda_ring_destroy(cq_cuda *c) { ring_free(&c->ring); }

/* a piece of a thread's share is copied, then hashed while it is still in the cache */
#define HASH_CHUNK ((size_t)256 << 10)

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t n, per;
    bool hash;      /* fold dst's words into acc */
    uint64_t first; /* the payload's word index of dst[0] */
    _Atomic uint64_t acc;
} copy_job;

/* bytes [o, o + len) of the job; o is a multiple of 8, and only the payload's last piece ends inside a word */
static void copy_span(copy_job *j, size_t o, size_t len) {
    if (!j->hash) {
        memcpy(j->dst + o, j->src + o, len);
        return;
    }
    uint64_t acc = 0;
    for (size_t d = 0; d < len; d += HASH_CHUNK) {
        const size_t k = CQ_MIN(HASH_CHUNK, len - d);
        memcpy(j->dst + o + d, j->src + o + d, k);
        acc ^= cq_hash64_fold(j->dst + o + d, k / 8, j->first + (o + d) / 8);
    }
    atomic_fetch_xor_explicit(&j->acc, acc, memory_order_relaxed);
}

static void copy_task(size_t t, size_t n_tasks, void *arg) {
    (void)n_tasks;
    copy_job *j = arg;
    size_t o = t * j->per;
    if (o < j->n) copy_span(j, o, CQ_MIN(j->per, j->n - o));
}

/* n bytes that start `off` bytes (a multiple of 8) into their payload */
static void host_copy(cq_cuda_ring *r, void *dst, const void *src, size_t n, size_t off) {
    const double t0 = cq_now();
    copy_job j = {.dst = dst, .src = src, .n = n, .hash = r->hashing, .first = off / 8};
    atomic_init(&j.acc, 0);
    int nt = cq_pool_threads(r->pool);
    if (!r->pool || nt < 2 || n < PAR_MIN) {
        copy_span(&j, 0, n);
    } else {
        /* pieces of whole pages, one per thread */
        size_t per = (n + (size_t)nt - 1) / (size_t)nt;
        j.per = (per + 4095) & ~(size_t)4095;
        cq_pool_run(r->pool, (n + j.per - 1) / j.per, copy_task, &j);
    }
    r->acc ^= atomic_load_explicit(&j.acc, memory_order_relaxed);
    r->hashed += r->hashing ? n : 0;
    r->bytes += n;
    r->copy_s += cq_now() - t0;
}

/* A cold payload (its first or middle page not in memory): ask the kernel to read its pages ahead of the
 * copy threads, one large read instead of a fault per page and thread. A cached one is left alone (the
 * advice would walk every page of it). Advice only: ignored where it fails. */
static bool resident(uintptr_t a, uintptr_t page) {
    unsigned char v = 0;
    return mincore((void *)a, page, &v) != 0 || (v & 1);
}

static void prefetch(const void *src, size_t n) {
    const long ps = sysconf(_SC_PAGESIZE);
    if (n < PAR_MIN || ps <= 0) return;
    const uintptr_t page = (uintptr_t)ps, a = (uintptr_t)src & ~(page - 1), mid = ((uintptr_t)src + n / 2) & ~(page - 1);
    if (resident(a, page) && resident(mid, page)) return;
    (void)posix_madvise((void *)a, n + ((uintptr_t)src - a), POSIX_MADV_WILLNEED);
}

void cq_cuda_host_copy(cq_cuda *c, void *dst, const void *src, size_t n) {
    prefetch(src, n);
    if (!c->ring.ready && !c->ring.failed) ring_init(c);
    host_copy(&c->ring, dst, src, n, 0); /* on the ring's copy threads when it has them */
}

cq_status cq_cuda_upload(cq_cuda *c, void *dst, const void *src, size_t n) {
    /* a recorded copy would read the mapping again at every replay */
    if (c->recording) return cq_cuda_not_while_recording("a weight upload");
    cudaSetDevice(c->device);
    c->staged_x.valid = false;
    cq_cuda_ring *r = &c->ring;
    if (!r->ready && !r->failed) ring_init(c);
    if (!r->ready) {
        CQ_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream), "bind_weight",
                    "uploading the payload");
        if (r->hashing) { /* no host copy to fold the hash into: read the source once more */
            r->acc ^= cq_hash64_fold(src, n / 8, 0);
            r->hashed += n;
        }
        r->bytes += n;
        return CQ_OK;
    }
    prefetch(src, n);
    size_t done = 0;
    while (done < n) {
        size_t room = CQ_CUDA_RING_BYTES - r->fill;
        /* a payload that fits in a buffer is not split; a larger one fills what is left first */
        if (room == 0 || (n - done < CQ_CUDA_RING_BYTES && room < n - done)) {
            const int next = (r->cur + 1) % CQ_CUDA_RING_N;
            if (r->queued[next]) {
                /* every copy out of that buffer was queued before its event; on failure nothing has moved */
                const double t0 = cq_now();
                CQ_CUDA_TRY(cudaEventSynchronize(r->ev[next]), "bind_weight", "waiting for a staging buffer");
                r->wait_s += cq_now() - t0;
                r->queued[next] = false;
            }
            r->cur = next;
            r->fill = 0;
            room = CQ_CUDA_RING_BYTES;
        }
        const size_t k = CQ_MIN(room, n - done);
        char *stage = (char *)r->buf[r->cur] + r->fill;
        host_copy(r, stage, (const char *)src + done, k, done);
        CQ_CUDA_TRY(cudaMemcpyAsync((char *)dst + done, stage, k, cudaMemcpyHostToDevice, c->stream), "bind_weight",
                    "uploading the payload from pinned staging");
        cudaError_t e = cudaEventRecord(r->ev[r->cur], c->stream);
        if (e != cudaSuccess) {
            /* the copy is queued but unmarked: drain the stream so no later write can overtake it */
            (void)cudaStreamSynchronize(c->stream);
            return cq_cuda_fail(e, "bind_weight", "marking a staging buffer");
        }
        r->queued[r->cur] = true;
        r->fill = CQ_MIN(CQ_CUDA_RING_BYTES, (r->fill + k + RING_ALIGN - 1) & ~(size_t)(RING_ALIGN - 1));
        done += k;
    }
    return CQ_OK;
}
