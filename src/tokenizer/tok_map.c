/*
 * tok_map.c — the tokenizer's containers: a growable byte buffer, id lists,
 * a string -> id hash map (vocabularies, the word cache) and an (id, id) ->
 * merge hash map (BPE ranks). Open addressing with linear probing; tables
 * are kept at most half full so probes stay short.
 */
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

cq_status tok_buf_reserve(tok_buf *b, size_t extra) {
    size_t need;
    if (!cq_add_size(b->n, extra, &need) || need == SIZE_MAX)
        return cq_fail(CQ_ERR_NOMEM, "tokenizer: buffer size overflows");
    need += 1; /* room for a terminating NUL */
    if (need <= b->cap) return CQ_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = cq_realloc(b->p, cap);
    if (!p) return CQ_ERR_NOMEM;
    b->p = p;
    b->cap = cap;
    return CQ_OK;
}

cq_status tok_buf_append(tok_buf *b, const void *s, size_t n) {
    CQ_TRY(tok_buf_reserve(b, n));
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return CQ_OK;
}

void tok_buf_free(tok_buf *b) {
    cq_free(b->p);
    memset(b, 0, sizeof *b);
}

cq_status tok_ids_push(cq_tokens *t, int32_t id) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *p = cq_reallocn(t->ids, cap, sizeof *p);
        if (!p) return CQ_ERR_NOMEM;
        t->ids = p;
        t->cap = cap;
    }
    t->ids[t->n++] = id;
    return CQ_OK;
}

void cq_tokens_free(cq_tokens *t) {
    if (!t) return;
    cq_free(t->ids);
    memset(t, 0, sizeof *t);
}

/* 32-bit hash, 8 bytes a step (keys are short words; quality over
 * cryptographic strength is all that matters here). */
uint32_t tok_hash(const void *k, size_t n) {
    const unsigned char *p = k;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    h = (h ^ v) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
    return (uint32_t)h;
}

static size_t pow2_for(size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 1) cap *= 2;
    return cap;
}

cq_status tok_map_init(tok_map *m, size_t expected) {
    memset(m, 0, sizeof *m);
    if (expected > ((size_t)1 << 28)) return cq_fail(CQ_ERR_NOMEM, "tokenizer: map too large");
    m->cap = pow2_for(expected);
    m->slots = cq_mallocn(m->cap, sizeof *m->slots);
    if (!m->slots) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) m->slots[i].len = UINT32_MAX;
    return CQ_OK;
}

void tok_map_free(tok_map *m) {
    cq_free(m->slots);
    tok_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

void tok_map_clear(tok_map *m) {
    for (size_t i = 0; i < m->cap; i++) m->slots[i].len = UINT32_MAX;
    m->count = 0;
    m->keys.n = 0;
}

static tok_map_slot *map_find(const tok_map *m, const char *k, size_t n, uint32_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        tok_map_slot *s = &m->slots[i];
        if (s->len == UINT32_MAX) return s;
        if (s->hash == h && s->len == n && memcmp(m->keys.p + s->off, k, n) == 0) return s;
    }
}

static cq_status map_grow(tok_map *m) {
    size_t cap = m->cap * 2;
    tok_map_slot *slots = cq_mallocn(cap, sizeof *slots);
    if (!slots) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < cap; i++) slots[i].len = UINT32_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        tok_map_slot *s = &m->slots[i];
        if (s->len == UINT32_MAX) continue;
        size_t j = s->hash & (cap - 1);
        while (slots[j].len != UINT32_MAX) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    cq_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return CQ_OK;
}

cq_status tok_map_put(tok_map *m, const char *k, size_t n, int32_t val, int32_t *prev) {
    if (n >= UINT32_MAX || m->keys.n + n >= UINT32_MAX)
        return cq_fail(CQ_ERR_NOMEM, "tokenizer: map keys exceed 4 GiB");
    if ((m->count + 1) * 2 > m->cap) CQ_TRY(map_grow(m));
    uint32_t h = tok_hash(k, n);
    tok_map_slot *s = map_find(m, k, n, h);
    if (s->len != UINT32_MAX) {
        if (prev) *prev = s->val;
        s->val = val;
        return CQ_OK;
    }
    if (prev) *prev = -1;
    uint32_t off = (uint32_t)m->keys.n;
    CQ_TRY(tok_buf_append(&m->keys, k, n));
    s->hash = h;
    s->off = off;
    s->len = (uint32_t)n;
    s->val = val;
    m->count++;
    return CQ_OK;
}

int32_t tok_map_get(const tok_map *m, const char *k, size_t n) {
    if (!m->slots || n >= UINT32_MAX) return -1;
    const tok_map_slot *s = map_find(m, k, n, tok_hash(k, n));
    return s->len == UINT32_MAX ? -1 : s->val;
}

/* ---- (id, id) -> merge ---------------------------------------------------- */
static inline size_t pair_slot(uint64_t key, size_t cap) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

cq_status tok_pairmap_init(tok_pairmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    if (expected > ((size_t)1 << 28)) return cq_fail(CQ_ERR_NOMEM, "tokenizer: too many merges");
    m->cap = pow2_for(expected);
    m->slots = cq_mallocn(m->cap, sizeof *m->slots);
    if (!m->slots) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) m->slots[i].key = UINT64_MAX;
    return CQ_OK;
}

void tok_pairmap_free(tok_pairmap *m) {
    cq_free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The table was sized for every merge up front, so it never fills. A pair
 * listed twice keeps the later rank, as a Rust HashMap collect does. */
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = pair_slot(key, m->cap);
    while (m->slots[i].key != UINT64_MAX && m->slots[i].key != key) i = (i + 1) & (m->cap - 1);
    if (m->slots[i].key == UINT64_MAX) m->count++;
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].new_id = new_id;
}

const tok_merge *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = pair_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        const tok_merge *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}
