/*
 * tok_bpe.c — the BPE model: split a piece into characters (with byte
 * fallback and unk handling), then apply merges lowest rank first, leftmost
 * first among equal ranks, exactly as Hugging Face's Word::merge_all does
 * with its priority queue. Merge ranks live in an (id, id) hash table;
 * finished words go into a cache so repeated words cost one lookup.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

#define CACHE_MAX_WORD 256     /* longer pieces are not cached (as in HF) */
#define CACHE_MAX_ENTRIES 65536 /* then the cache starts over */

cq_status tok_bpe_init_tables(tok_bpe *b) {
    for (int i = 0; i < 256; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", i);
        b->byte_ids[i] = tok_map_get(&b->vocab, name, 6);
    }
    /* The direct table covers the single-character tokens below U+10000,
     * sized to the largest one (a byte-level alphabet ends at U+0143). */
    uint32_t max_cp = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            b->n_char_ids = (size_t)max_cp + 1;
            b->char_ids = cq_mallocn(b->n_char_ids, sizeof *b->char_ids);
            if (!b->char_ids) return CQ_ERR_NOMEM;
            for (size_t i = 0; i < b->n_char_ids; i++) b->char_ids[i] = -1;
        }
        for (size_t i = 0; i < b->vocab.cap; i++) {
            const tok_map_slot *s = &b->vocab.slots[i];
            if (s->len == UINT32_MAX || s->len == 0 || s->len > 3) continue;
            const char *k = b->vocab.keys.p + s->off;
            uint32_t cp;
            if (tok_utf8_decode(k, s->len, &cp) != s->len || cp >= 0x10000) continue;
            if (pass == 0) max_cp = CQ_MAX(max_cp, cp);
            else b->char_ids[cp] = s->val;
        }
    }
    b->unk_id = b->unk ? tok_map_get(&b->vocab, b->unk, strlen(b->unk)) : -1;
    return tok_map_init(&b->cache, 1024);
}

void tok_bpe_free(tok_bpe *b) {
    tok_map_free(&b->vocab);
    tok_pairmap_free(&b->merges);
    tok_map_free(&b->cache);
    cq_free(b->cache_ids);
    cq_free(b->char_ids);
    cq_free(b->unk);
    cq_free(b->prefix);
    cq_free(b->suffix);
    memset(b, 0, sizeof *b);
}

void tok_bpe_clear_cache(tok_bpe *b) {
    if (b->cache.slots) tok_map_clear(&b->cache);
    b->cache_n = 0;
}

typedef struct sym {
    int32_t c;
    int32_t prev, next;
    uint32_t len;
} sym;

typedef struct hent {
    uint32_t rank, pos;
    int32_t new_id;
} hent;

static inline bool hless(const hent *a, const hent *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void hpush(hent *h, size_t *n, hent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hless(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static hent hpop(hent *h, size_t *n) {
    hent top = h[0];
    hent last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        size_t c = (l + 1 < m && hless(&h[l + 1], &h[l])) ? l + 1 : l;
        if (!hless(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = last;
    return top;
}

typedef struct word {
    sym *s;
    size_t n, cap;
} word;

static cq_status word_add(word *w, int32_t id, size_t len) {
    if (w->n == w->cap) {
        size_t cap = w->cap * 2;
        sym *p = cq_mallocn(cap, sizeof *p);
        if (!p) return CQ_ERR_NOMEM;
        memcpy(p, w->s, w->n * sizeof *p);
        /* the first block is on the caller's stack; later ones are ours */
        if (w->cap > 64) cq_free(w->s);
        w->s = p;
        w->cap = cap;
    }
    int32_t i = (int32_t)w->n;
    w->s[w->n++] = (sym){id, i - 1, i + 1, (uint32_t)len};
    return CQ_OK;
}

/* Split into initial symbols (Hugging Face BPE::merge_word, before merging). */
static cq_status split_chars(tok_bpe *b, const char *w, size_t n, word *out) {
    int32_t unk_id = -1;
    size_t unk_len = 0;
    bool have_unk = false;
    tok_buf tmp = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < n && st == CQ_OK;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(w + i, n - i, &cp);
        bool first = i == 0, last = i + k == n;
        const char *s = w + i;
        size_t slen = k;
        int32_t id;
        bool decorated = (!first && b->prefix) || (last && b->suffix);
        if (decorated) {
            tmp.n = 0;
            if (!first && b->prefix) st = tok_buf_append(&tmp, b->prefix, b->prefix_len);
            if (st == CQ_OK) st = tok_buf_append(&tmp, s, k);
            if (st == CQ_OK && last && b->suffix) st = tok_buf_append(&tmp, b->suffix, b->suffix_len);
            if (st != CQ_OK) break;
            s = tmp.p;
            slen = tmp.n;
            id = tok_map_get(&b->vocab, s, slen);
        } else {
            id = cp < b->n_char_ids ? b->char_ids[cp] : tok_map_get(&b->vocab, s, slen);
        }
        i += k;
        if (id >= 0) {
            if (have_unk) {
                st = word_add(out, unk_id, unk_len);
                have_unk = false;
            }
            if (st == CQ_OK) st = word_add(out, id, k);
            continue;
        }
        if (b->byte_fallback) {
            bool all = true;
            for (size_t j = 0; j < slen; j++)
                if (b->byte_ids[(unsigned char)s[j]] < 0) all = false;
            if (all) {
                /* as in HF, a pending unk is not flushed before these */
                for (size_t j = 0; j < slen && st == CQ_OK; j++)
                    st = word_add(out, b->byte_ids[(unsigned char)s[j]], 1);
                continue;
            }
        }
        if (b->unk) {
            if (b->unk_id < 0) {
                st = cq_fail(CQ_ERR_PARSE,
                             "tokenizer.json: model.unk_token '%s' is not in model.vocab", b->unk);
                break;
            }
            if (have_unk && b->fuse_unk) {
                unk_len += k;
            } else {
                if (have_unk) st = word_add(out, unk_id, unk_len);
                unk_id = b->unk_id;
                unk_len = k;
                have_unk = true;
            }
        }
        /* no unk token: the character is dropped, as Hugging Face does */
    }
    if (st == CQ_OK && have_unk) st = word_add(out, unk_id, unk_len);
    tok_buf_free(&tmp);
    return st;
}

static cq_status merge_all(const tok_bpe *b, word *w) {
    size_t n = w->n;
    if (n < 2) return CQ_OK;
    hent stack_heap[192];
    size_t hcap = 3 * n; /* n-1 initial pairs plus at most 2 per merge */
    hent *h = hcap <= 192 ? stack_heap : cq_mallocn(hcap, sizeof *h);
    if (!h) return CQ_ERR_NOMEM;
    size_t hn = 0;
    sym *s = w->s;
    for (size_t i = 0; i + 1 < n; i++) {
        const tok_merge *m = tok_pairmap_get(&b->merges, s[i].c, s[i + 1].c);
        if (m) hpush(h, &hn, (hent){m->rank, (uint32_t)i, m->new_id});
    }
    while (hn > 0) {
        hent top = hpop(h, &hn);
        sym *cur = &s[top.pos];
        if (cur->len == 0 || cur->next < 0 || (size_t)cur->next >= n) continue;
        sym *right = &s[cur->next];
        const tok_merge *m = tok_pairmap_get(&b->merges, cur->c, right->c);
        if (!m || m->new_id != top.new_id) continue; /* stale entry */
        cur->c = top.new_id;
        cur->len += right->len;
        cur->next = right->next;
        right->len = 0;
        if (cur->next >= 0 && (size_t)cur->next < n) s[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0) {
            const tok_merge *pm = tok_pairmap_get(&b->merges, s[cur->prev].c, cur->c);
            if (pm) hpush(h, &hn, (hent){pm->rank, (uint32_t)cur->prev, pm->new_id});
        }
        if (cur->next >= 0 && (size_t)cur->next < n) {
            const tok_merge *nm = tok_pairmap_get(&b->merges, cur->c, s[cur->next].c);
            if (nm) hpush(h, &hn, (hent){nm->rank, top.pos, nm->new_id});
        }
    }
    if (h != stack_heap) cq_free(h);
    return CQ_OK;
}

static cq_status cache_put(tok_bpe *b, const char *w, size_t n, const int32_t *ids, size_t k) {
    if (b->cache.count >= CACHE_MAX_ENTRIES || b->cache_n > ((size_t)1 << 22)) tok_bpe_clear_cache(b);
    size_t need = b->cache_n + k + 1;
    if (need > b->cache_cap) {
        size_t cap = b->cache_cap ? b->cache_cap : 4096;
        while (cap < need) cap *= 2;
        int32_t *p = cq_reallocn(b->cache_ids, cap, sizeof *p);
        if (!p) return CQ_ERR_NOMEM;
        b->cache_ids = p;
        b->cache_cap = cap;
    }
    size_t off = b->cache_n;
    b->cache_ids[off] = (int32_t)k;
    if (k) memcpy(b->cache_ids + off + 1, ids, k * sizeof *ids);
    CQ_TRY(tok_map_put(&b->cache, w, n, (int32_t)off, NULL));
    b->cache_n = need;
    return CQ_OK;
}

cq_status tok_bpe_encode_word(tok_bpe *b, const char *w, size_t n, cq_tokens *out) {
    if (n == 0) return CQ_OK;
    if (b->ignore_merges) {
        int32_t id = tok_map_get(&b->vocab, w, n);
        if (id >= 0) return tok_ids_push(out, id);
    }
    bool cacheable = n < CACHE_MAX_WORD;
    if (cacheable) {
        int32_t off = tok_map_get(&b->cache, w, n);
        if (off >= 0) {
            const int32_t *e = b->cache_ids + off;
            for (int32_t i = 0; i < e[0]; i++) CQ_TRY(tok_ids_push(out, e[1 + i]));
            return CQ_OK;
        }
    }
    sym stack_syms[64];
    word wd = {stack_syms, 0, 64};
    cq_status st = split_chars(b, w, n, &wd);
    if (st == CQ_OK) st = merge_all(b, &wd);
    size_t first = out->n;
    for (size_t i = 0; st == CQ_OK && i < wd.n; i++)
        if (wd.s[i].len != 0) st = tok_ids_push(out, wd.s[i].c);
    /* A word whose every character is unknown (no unk token) pushes no id: then
     * out->ids may still be NULL, and no pointer arithmetic is done on it. */
    size_t k = out->n - first;
    if (st == CQ_OK && cacheable) st = cache_put(b, w, n, k ? out->ids + first : NULL, k);
    if (wd.s != stack_syms) cq_free(wd.s);
    return st;
}
