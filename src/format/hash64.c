/*
 * hash64.c — the CMF integrity hash (one-shot and streaming).
 *
 * Every 8-byte little-endian word i contributes fmix64(word) ^ (i * K); the
 * contributions are XOR-folded, so the order in which words arrive does not
 * matter and a stream can be hashed in pieces of any size. A short tail is
 * zero-padded to a word and salted with the number of whole words, the byte
 * length is folded in, and fmix64 finishes. The empty input hashes to 0.
 * cq_hash64_update_pool splits a long span's words over a thread pool; on a
 * CPU with AVX-512F and DQ the fold runs eight words at a time
 * (hash64_avx512.c), with the same result.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "format/cmf.h"
#include "format/hash64_impl.h"

static inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= CQ_HASH_M1;
    x ^= x >> 33;
    x *= CQ_HASH_M2;
    x ^= x >> 33;
    return x;
}

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Fold `nwords` whole words starting at word index `first`. Four
 * independent lanes keep the multipliers busy; XOR makes the split free. */
uint64_t cq_hash64_fold_scalar(const uint8_t *p, uint64_t nwords, uint64_t first) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, salt = first * CQ_HASH_K, i = 0;
    for (; i + 4 <= nwords; i += 4, p += 32) {
        a0 ^= fmix64(load_le64(p)) ^ salt;
        a1 ^= fmix64(load_le64(p + 8)) ^ (salt + CQ_HASH_K);
        a2 ^= fmix64(load_le64(p + 16)) ^ (salt + 2 * CQ_HASH_K);
        a3 ^= fmix64(load_le64(p + 24)) ^ (salt + 3 * CQ_HASH_K);
        salt += 4 * CQ_HASH_K;
    }
    for (; i < nwords; i++, p += 8) {
        a0 ^= fmix64(load_le64(p)) ^ salt;
        salt += CQ_HASH_K;
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

#if defined(CQ_ARCH_X86)
/* 1: AVX-512F and DQ (vpmullq), 0: not, -1: not asked yet; CORTIQ_HASH_PORTABLE=1 forces the portable fold */
static _Atomic int g_avx512 = -1;

static bool use_avx512(void) {
    int v = atomic_load_explicit(&g_avx512, memory_order_relaxed);
    if (v < 0) {
        const cq_cpu_features *f = cq_cpu();
        const char *e = getenv("CORTIQ_HASH_PORTABLE");
        v = f->avx512f && f->avx512dq && !(e && *e && strcmp(e, "0") != 0);
        atomic_store_explicit(&g_avx512, v, memory_order_relaxed);
    }
    return v == 1;
}
#endif

const char *cq_hash64_impl(void) {
#if defined(CQ_ARCH_X86)
    if (use_avx512()) return "avx512";
#endif
    return "portable";
}

static uint64_t fold_words(const uint8_t *p, uint64_t nwords, uint64_t first) {
#if defined(CQ_ARCH_X86)
    if (nwords >= 64 && use_avx512()) return cq_hash64_fold_avx512(p, nwords, first);
#endif
    return cq_hash64_fold_scalar(p, nwords, first);
}

void cq_hash64_init(cq_hash64_state *st) { memset(st, 0, sizeof *st); }

void cq_hash64_update(cq_hash64_state *st, const void *data, size_t len) {
    const uint8_t *p = data;
    if (len == 0) return;
    if (st->npend) {
        size_t take = CQ_MIN(len, (size_t)(8 - st->npend));
        memcpy(st->pend + st->npend, p, take);
        st->npend += (unsigned)take;
        p += take;
        len -= take;
        st->len += take;
        if (st->npend < 8) return;
        st->acc ^= fold_words(st->pend, 1, st->words);
        st->words++;
        st->npend = 0;
    }
    uint64_t nw = len / 8;
    st->acc ^= fold_words(p, nw, st->words);
    st->words += nw;
    st->len += 8 * nw;
    p += 8 * nw;
    len -= 8 * nw;
    if (len) {
        memcpy(st->pend, p, len);
        st->npend = (unsigned)len;
        st->len += len;
    }
}

uint64_t cq_hash64_final(const cq_hash64_state *st) {
    if (st->len == 0) return 0;
    uint64_t acc = st->acc;
    if (st->npend) {
        uint8_t w[8] = {0};
        memcpy(w, st->pend, st->npend);
        acc ^= fmix64(load_le64(w)) ^ (st->words * CQ_HASH_K);
    }
    acc ^= st->len;
    return fmix64(acc);
}

uint64_t cq_hash64_fold(const void *words, uint64_t nwords, uint64_t first) { return fold_words(words, nwords, first); }

uint64_t cq_hash64_folded(uint64_t acc, const void *data, size_t len) {
    if (len == 0) return 0;
    const uint64_t nw = len / 8;
    const size_t tail = len % 8;
    if (tail) {
        uint8_t w[8] = {0};
        memcpy(w, (const uint8_t *)data + 8 * nw, tail);
        acc ^= fmix64(load_le64(w)) ^ (nw * CQ_HASH_K);
    }
    acc ^= (uint64_t)len;
    return fmix64(acc);
}

/* ---- the same hash on several threads ---- */
#define PAR_CHUNK_WORDS ((uint64_t)(1u << 20) / 8) /* 1 MiB a task: even load, little overhead */

typedef struct par_job {
    const uint8_t *p;
    uint64_t nwords, first;
    _Atomic uint64_t acc;
} par_job;

static void par_task(size_t task, size_t n_tasks, void *arg) {
    (void)n_tasks;
    par_job *j = arg;
    uint64_t w0 = (uint64_t)task * PAR_CHUNK_WORDS;
    uint64_t nw = CQ_MIN(PAR_CHUNK_WORDS, j->nwords - w0);
    atomic_fetch_xor_explicit(&j->acc, fold_words(j->p + 8 * w0, nw, j->first + w0), memory_order_relaxed);
}

void cq_hash64_update_pool(cq_hash64_state *st, const void *data, size_t len, cq_pool *pool) {
    const uint8_t *p = data;
    if (!pool || len < CQ_HASH64_PAR_MIN || cq_pool_threads(pool) < 2) {
        cq_hash64_update(st, p, len);
        return;
    }
    if (st->npend) { /* complete the pending word so the rest starts on a word boundary */
        size_t take = 8 - st->npend;
        cq_hash64_update(st, p, take);
        p += take;
        len -= take;
    }
    uint64_t nw = len / 8;
    par_job j = {.p = p, .nwords = nw, .first = st->words};
    atomic_init(&j.acc, 0);
    cq_pool_run(pool, (size_t)((nw + PAR_CHUNK_WORDS - 1) / PAR_CHUNK_WORDS), par_task, &j);
    st->acc ^= atomic_load_explicit(&j.acc, memory_order_relaxed);
    st->words += nw;
    st->len += 8 * nw;
    cq_hash64_update(st, p + 8 * nw, len - 8 * nw); /* the tail becomes the pending word */
}

uint64_t cq_hash64(const void *data, size_t len) {
    cq_hash64_state st;
    cq_hash64_init(&st);
    cq_hash64_update(&st, data, len);
    return cq_hash64_final(&st);
}
