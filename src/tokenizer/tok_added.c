/*
 * tok_added.c — matching added tokens in text before BPE.
 *
 * Two byte tries hold the added tokens: one with tokens matched on the raw
 * text (normalized == false, usually the special tokens) and one with the
 * normalized content of the others. The scan is leftmost-longest, the match
 * kind Hugging Face builds its automaton with; after a match the scan
 * resumes at its end even when the match is then discarded (single_word, or
 * a special token while special matching is off), as the automaton's
 * iterator does. lstrip/rstrip widen a kept match over neighbouring
 * Unicode white space.
 */
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

static cq_status trie_node(tok_trie *t, int32_t *out) {
    if (t->n_nodes == t->cap_nodes) {
        size_t cap = t->cap_nodes ? t->cap_nodes * 2 : 256;
        int32_t *fe = cq_reallocn(t->first_edge, cap, sizeof *fe);
        if (!fe) return CQ_ERR_NOMEM;
        t->first_edge = fe;
        int32_t *val = cq_reallocn(t->value, cap, sizeof *val);
        if (!val) return CQ_ERR_NOMEM;
        t->value = val;
        t->cap_nodes = cap;
    }
    t->first_edge[t->n_nodes] = -1;
    t->value[t->n_nodes] = -1;
    *out = (int32_t)t->n_nodes++;
    return CQ_OK;
}

static int32_t trie_child(const tok_trie *t, int32_t node, uint8_t byte) {
    for (int32_t e = t->first_edge[node]; e >= 0; e = t->edges[e].next)
        if (t->edges[e].byte == byte) return t->edges[e].child;
    return -1;
}

static cq_status trie_insert(tok_trie *t, const char *s, size_t n, int32_t value) {
    int32_t node = t->root[(uint8_t)s[0]];
    if (node < 0) {
        CQ_TRY(trie_node(t, &node));
        t->root[(uint8_t)s[0]] = node;
    }
    for (size_t i = 1; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        int32_t ch = trie_child(t, node, c);
        if (ch < 0) {
            CQ_TRY(trie_node(t, &ch));
            if (t->n_edges == t->cap_edges) {
                size_t cap = t->cap_edges ? t->cap_edges * 2 : 256;
                tok_trie_edge *e = cq_reallocn(t->edges, cap, sizeof *e);
                if (!e) return CQ_ERR_NOMEM;
                t->edges = e;
                t->cap_edges = cap;
            }
            t->edges[t->n_edges] = (tok_trie_edge){ch, t->first_edge[node], c};
            t->first_edge[node] = (int32_t)t->n_edges++;
        }
        node = ch;
    }
    t->value[node] = value;
    return CQ_OK;
}

void tok_trie_free(tok_trie *t) {
    cq_free(t->first_edge);
    cq_free(t->value);
    cq_free(t->edges);
    memset(t, 0, sizeof *t);
}

cq_status tok_trie_build(tok_trie *t, const cq_tokenizer *tk, bool normalized) {
    tok_trie_free(t);
    for (int i = 0; i < 256; i++) t->root[i] = -1;
    t->empty = true;
    for (size_t i = 0; i < tk->n_added; i++) {
        const tok_added *a = &tk->added[i];
        /* an id later reassigned to another content no longer matches */
        if (a->id < 0 || tk->id_added[a->id] != (int32_t)i) continue;
        if (a->normalized != normalized) continue;
        const char *s = normalized && a->norm ? a->norm : a->content;
        size_t n = normalized && a->norm ? a->norm_len : a->len;
        if (n == 0) continue;
        CQ_TRY(trie_insert(t, s, n, (int32_t)i));
        t->empty = false;
    }
    return CQ_OK;
}

void tok_splits_free(tok_splits *s) {
    cq_free(s->v);
    memset(s, 0, sizeof *s);
}

static cq_status splits_push(tok_splits *s, size_t a, size_t b, int32_t id) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        tok_split *v = cq_reallocn(s->v, cap, sizeof *v);
        if (!v) return CQ_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (tok_split){a, b, id};
    return CQ_OK;
}

/* Last character of s[0..n) (n > 0). */
static uint32_t last_cp(const char *s, size_t n, size_t *start) {
    size_t j = n - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    uint32_t cp;
    tok_utf8_decode(s + j, n - j, &cp);
    if (start) *start = j;
    return cp;
}

cq_status tok_added_find(const cq_tokenizer *tk, const tok_trie *trie, const char *s, size_t n,
                         bool split_special, tok_splits *out) {
    out->n = 0;
    if (n == 0) return splits_push(out, 0, 0, -1);
    if (trie->empty) return splits_push(out, 0, n, -1);
    size_t start_offset = 0;
    size_t p = 0;
    while (p < n) {
        int32_t node = trie->root[(uint8_t)s[p]];
        if (node < 0) {
            p++;
            continue;
        }
        int32_t best = -1;
        size_t best_end = 0;
        size_t q = p + 1;
        for (;;) {
            if (trie->value[node] >= 0) {
                best = trie->value[node];
                best_end = q;
            }
            if (q >= n) break;
            node = trie_child(trie, node, (uint8_t)s[q]);
            if (node < 0) break;
            q++;
        }
        if (best < 0) {
            p++;
            continue;
        }
        size_t start = p, stop = best_end;
        p = best_end;
        const tok_added *a = &tk->added[best];
        if (split_special && a->special) continue;
        if (a->single_word) {
            bool start_space = start == 0 || !tok_cp_is_word(last_cp(s, start, NULL));
            uint32_t nc = 0;
            if (stop < n) tok_utf8_decode(s + stop, n - stop, &nc);
            bool stop_space = stop == n || !tok_cp_is_word(nc);
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t j;
                uint32_t cp = last_cp(s, ns, &j);
                if (!tok_cp_is_whitespace(cp)) break;
                ns = j;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                uint32_t cp;
                size_t k = tok_utf8_decode(s + stop, n - stop, &cp);
                if (!tok_cp_is_whitespace(cp)) break;
                stop += k;
            }
        }
        if (start_offset < start) CQ_TRY(splits_push(out, start_offset, start, -1));
        CQ_TRY(splits_push(out, start, stop, a->id));
        start_offset = stop;
    }
    if (start_offset != n) CQ_TRY(splits_push(out, start_offset, n, -1));
    return CQ_OK;
}
