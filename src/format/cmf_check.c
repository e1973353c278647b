/*
 * cmf_check.c — integrity on load: what cq_cmf_open checks beyond the
 * structure, so that a damaged file is refused instead of drawing a
 * different picture.
 *
 *  - At open, the envelope's header and directory hash64 (a zero means "not
 *    recorded"). They cover a few KiB, cost microseconds and catch the worst
 *    single-byte damage: a directory whose offset field moved a tensor onto
 *    another tensor's bytes still parses, and its payload hash still matches.
 *  - At open, the masks / tokenizer / index hashes the header lists.
 *  - Each tensor's payload, the first time something reads it for decoding
 *    or upload (cq_cmf_check_tensor). A bit per tensor records a match, so a
 *    tensor bound twice is hashed once and the hot path is one atomic load.
 *    Two threads racing on the same unchecked tensor may both hash it; both
 *    get the same answer.
 *
 * Tensors of CQ_HASH64_PAR_MIN bytes or more are hashed on a pool the
 * container creates on first need (the hash is an XOR fold of per-word
 * terms, so pieces combine exactly); the small ones on the calling thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format/cmf_impl.h"

#define MAX_HASH_THREADS 32 /* hashing is memory-bound long before this */

static const char *human_section(cq_cmf_section_id id) {
    switch (id) {
    case CQ_CMF_SEC_DIR: return "directory";
    case CQ_CMF_SEC_VOCAB: return "tokenizer";
    case CQ_CMF_SEC_INDEX: return "sparse index";
    default: return cq_cmf_section_name(id);
    }
}

/* "run `cortiq verify FILE`" with the file's path when there is one. */
static void verify_hint(const cq_cmf *c, char *buf, size_t len) {
    if (c->path)
        snprintf(buf, len, "run `cortiq verify %s`", c->path);
    else
        snprintf(buf, len, "run `cortiq verify` on the file");
}

bool cq_cmf_parse_hex64(const char *s, uint64_t *out) {
    size_t n = strlen(s);
    if (n == 0 || n > 16) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) return false;
        v = (v << 4) | (uint64_t)d;
    }
    *out = v;
    return true;
}

cq_pool *cq_cmf_hash_pool(const cq_cmf *cc) {
    cq_cmf *c = (cq_cmf *)cc; /* the pool is lazily built state, not part of what the container says */
    cq_pool *p = atomic_load_explicit(&c->pool, memory_order_acquire);
    if (p) return p;
    int n = c->hash_threads > 0 ? c->hash_threads : cq_default_threads();
    if (n > MAX_HASH_THREADS) n = MAX_HASH_THREADS;
    if (n < 2) return NULL;
    cq_pool *mine = NULL;
    if (cq_pool_create(n, &mine) != CQ_OK) {
        cq_clear_error(); /* no pool: the caller's thread hashes alone */
        return NULL;
    }
    cq_pool *expect = NULL;
    if (!atomic_compare_exchange_strong_explicit(&c->pool, &expect, mine, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        cq_pool_free(mine); /* another thread won the race */
        return expect;
    }
    return mine;
}

uint64_t cq_cmf_hash_span(const cq_cmf *c, const uint8_t *p, uint64_t len) {
    cq_hash64_state st;
    cq_hash64_init(&st);
    /* a span lies inside the mapping, so it fits size_t */
    cq_pool *pool = len >= CQ_HASH64_PAR_MIN ? cq_cmf_hash_pool(c) : NULL;
    cq_hash64_update_pool(&st, p, (size_t)len, pool);
    return cq_hash64_final(&st);
}

static cq_status section_damaged(const cq_cmf *c, cq_cmf_section_id id, const char *where, uint64_t stored,
                                 uint64_t computed) {
    char hint[1200];
    verify_hint(c, hint, sizeof hint);
    return cq_fail(CQ_ERR_HASH,
                   "the %s section is damaged: its bytes do not match the hash recorded in the %s (stored %016" PRIx64
                   ", computed %016" PRIx64 "); %s",
                   human_section(id), where, stored, computed, hint);
}

cq_status cq_cmf_check_envelope_hashes(cq_cmf *c) {
    static const cq_cmf_section_id ids[2] = {CQ_CMF_SEC_HEADER, CQ_CMF_SEC_DIR};
    const uint64_t stored[2] = {c->header_hash, c->dir_hash};
    for (int i = 0; i < 2; i++) {
        if (!stored[i]) continue; /* not recorded */
        const cq_cmf_section *s = &c->sec[ids[i]];
        uint64_t h = cq_cmf_hash_span(c, c->base + s->off, s->len);
        if (h != stored[i]) return section_damaged(c, ids[i], "envelope", stored[i], h);
    }
    return CQ_OK;
}

cq_status cq_cmf_check_section_hashes(cq_cmf *c) {
    for (int id = CQ_CMF_SEC_MASKS; id <= CQ_CMF_SEC_INDEX; id++) {
        const cq_cmf_section *s = &c->sec[id];
        if (!c->sec_hash_present[id] || s->len == 0) continue;
        uint64_t want;
        if (!cq_cmf_parse_hex64(c->sec_hash_text[id], &want)) {
            char hint[1200];
            verify_hint(c, hint, sizeof hint);
            return cq_fail(CQ_ERR_HASH, "header section_hashes.%s is not a hex hash64 (\"%.40s\"); %s",
                           cq_cmf_section_name((cq_cmf_section_id)id), c->sec_hash_text[id], hint);
        }
        if (!want) continue; /* not recorded */
        uint64_t h = cq_cmf_hash_span(c, c->base + s->off, s->len);
        if (h != want) return section_damaged(c, (cq_cmf_section_id)id, "header's section_hashes", want, h);
    }
    return CQ_OK;
}

cq_status cq_cmf_check_init(cq_cmf *c) {
    size_t words = (c->n_tensors + 63) / 64;
    c->checked = cq_calloc(words ? words : 1, sizeof *c->checked);
    if (!c->checked) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < (words ? words : 1); i++) atomic_init(&c->checked[i], 0);
    return CQ_OK;
}

void cq_cmf_check_free(cq_cmf *c) {
    cq_free((void *)c->checked);
    c->checked = NULL;
    cq_pool_free(atomic_load(&c->pool));
    atomic_store(&c->pool, NULL);
    cq_free(c->path);
    c->path = NULL;
}

/* The directory's own view of t when t is a copy of it (same bytes, same
 * hash): only such a view's match is remembered. */
static bool is_directory_view(const cq_cmf *c, const cq_tensor_view *t) {
    const cq_tensor_view *dir = &c->tensors[t->index];
    return dir->data == t->data && dir->nbytes == t->nbytes && dir->hash == t->hash;
}

bool cq_cmf_tensor_unchecked(const cq_tensor_view *t) {
    const cq_cmf *c = t ? t->owner : NULL;
    if (!c || c->no_verify || !c->checked || t->index >= c->n_tensors) return false;
    uint64_t bit = (uint64_t)1 << (t->index % 64);
    return !is_directory_view(c, t) || !(atomic_load_explicit(&c->checked[t->index / 64], memory_order_acquire) & bit);
}

cq_status cq_cmf_check_tensor_hash(const cq_tensor_view *t, uint64_t h) {
    if (!t) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_check_tensor_hash: tensor is NULL");
    const cq_cmf *c = t->owner;
    if (!c || c->no_verify || !c->checked) return CQ_OK;
    if (t->index >= c->n_tensors)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': index %zu is outside its container's directory (%zu)",
                       t->name ? t->name : "?", t->index, c->n_tensors);
    if (h != t->hash) {
        char hint[1200];
        verify_hint(c, hint, sizeof hint);
        return cq_fail(CQ_ERR_HASH,
                       "tensor '%s' is damaged: its bytes do not match the hash recorded in the file (stored %016" PRIx64
                       ", computed %016" PRIx64 "); %s (or --no-verify to skip this check)",
                       t->name, t->hash, h, hint);
    }
    /* A copy of a directory view is checked like the original; a view the
     * caller altered (other bytes, other hash) is hashed every time. */
    if (is_directory_view(c, t))
        atomic_fetch_or_explicit(&c->checked[t->index / 64], (uint64_t)1 << (t->index % 64), memory_order_release);
    return CQ_OK;
}

cq_status cq_cmf_check_tensor(const cq_tensor_view *t) {
    if (!t) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_check_tensor: tensor is NULL");
    const cq_cmf *c = t->owner;
    if (!c || c->no_verify || !c->checked) return CQ_OK;
    if (t->index >= c->n_tensors) return cq_cmf_check_tensor_hash(t, 0); /* its error: the index */
    if (!cq_cmf_tensor_unchecked(t)) return CQ_OK;
    return cq_cmf_check_tensor_hash(t, cq_cmf_hash_span(c, t->data, t->nbytes));
}
