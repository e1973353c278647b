/*
 * tokenizer-impl.h — what the tokenizer's files share and nobody else sees:
 * byte buffers, hash maps, the UTF-8 helpers, the regex wrapper, and the
 * loaded pipeline (normalizer, pre-tokenizer, BPE model, added tokens,
 * post-processor, decoder) as plain tagged structs.
 *
 * The pipeline mirrors Hugging Face `tokenizers`: added tokens are cut out
 * of the raw text first, the rest is normalized, cut again on "normalized"
 * added tokens, pre-tokenized into pieces, and every piece is run through
 * BPE. All strings here are UTF-8 with explicit lengths.
 */
#ifndef CQ_TOKENIZER_IMPL_H
#define CQ_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"

/* Largest id accepted in a tokenizer.json: ids index dense arrays. */
#define TOK_MAX_ID (1 << 24)

/* ---- growable byte buffer ---------------------------------------------- */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
cq_status tok_buf_reserve(tok_buf *b, size_t extra);
cq_status tok_buf_append(tok_buf *b, const void *s, size_t n);
void tok_buf_free(tok_buf *b);
cq_status tok_ids_push(cq_tokens *t, int32_t id);

/* ---- UTF-8 (tok_utf8.c) -------------------------------------------------- */
/* Length of the well-formed sequence at s[0..n), or 0 if ill-formed. */
size_t tok_utf8_valid_len(const unsigned char *s, size_t n);
/* Decode the (well-formed) character at s; returns its length. */
size_t tok_utf8_decode(const char *s, size_t n, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
bool tok_utf8_is_valid(const char *s, size_t n);
/* Append s to out with every maximal ill-formed subpart replaced by U+FFFD
 * (Python 'replace' / Rust from_utf8_lossy). */
cq_status tok_utf8_append_lossy(tok_buf *out, const char *s, size_t n);
/* Unicode classes with the meaning Rust gives them. */
bool tok_cp_is_whitespace(uint32_t cp); /* White_Space */
bool tok_cp_is_word(uint32_t cp);       /* regex \w: Alphabetic, M, Nd, Pc, Join_Control */
bool tok_cp_is_numeric(uint32_t cp);    /* char::is_numeric: Nd, Nl, No */

/* ---- hash maps (tok_map.c) ----------------------------------------------
 * tok_map: string -> int32, keys copied into its own arena.
 * tok_pairmap: (id, id) -> (rank, new id) for BPE merges. */
typedef struct tok_map_slot {
    uint32_t hash, off, len; /* len == UINT32_MAX: empty */
    int32_t val;
} tok_map_slot;
typedef struct tok_map {
    tok_map_slot *slots;
    size_t cap, count;
    tok_buf keys;
} tok_map;
cq_status tok_map_init(tok_map *m, size_t expected);
void tok_map_free(tok_map *m);
void tok_map_clear(tok_map *m);
/* Insert or overwrite; *prev (optional) gets the old value or -1. */
cq_status tok_map_put(tok_map *m, const char *k, size_t n, int32_t val, int32_t *prev);
int32_t tok_map_get(const tok_map *m, const char *k, size_t n);
uint32_t tok_hash(const void *k, size_t n);

typedef struct tok_merge {
    uint64_t key; /* (a << 32) | b; UINT64_MAX = empty */
    uint32_t rank;
    int32_t new_id;
} tok_merge;
typedef struct tok_pairmap {
    tok_merge *slots;
    size_t cap, count;
} tok_pairmap;
cq_status tok_pairmap_init(tok_pairmap *m, size_t expected);
void tok_pairmap_free(tok_pairmap *m);
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id);
const tok_merge *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b);

/* ---- regex (tok_regex.c) ------------------------------------------------
 * A Split/Replace pattern: a PCRE2 regex (Unicode properties, Oniguruma's
 * meaning of \s) or a literal string. Matches are enumerated the way the
 * Oniguruma crate's find_iter does it, including empty matches. */
typedef struct tok_regex tok_regex;
typedef struct tok_span {
    size_t start, end;
} tok_span;
typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
    void *md; /* regex match data, kept between calls (it owns a 20 KiB frame buffer) */
} tok_spans;
cq_status tok_regex_compile(const char *pat, size_t len, bool literal, const char *field,
                            tok_regex **out);
void tok_regex_free(tok_regex *re);
/* Replace *out's contents with the matches in s[0..n). */
cq_status tok_regex_find_all(const tok_regex *re, const char *s, size_t n, tok_spans *out);
void tok_spans_free(tok_spans *s);

/* ---- pipeline components ------------------------------------------------ */
typedef enum tok_norm_type {
    TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD,
    TOK_NORM_SEQUENCE, TOK_NORM_REPLACE, TOK_NORM_PREPEND,
    TOK_NORM_LOWERCASE, TOK_NORM_STRIP,
} tok_norm_type;
typedef struct tok_norm {
    tok_norm_type type;
    tok_regex *re;           /* REPLACE */
    char *text;              /* REPLACE content, PREPEND prefix */
    size_t text_len;
    bool left, right;        /* STRIP */
    struct tok_norm *items;  /* SEQUENCE */
    size_t n_items;
} tok_norm;

typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT, TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;
typedef enum tok_pretok_type {
    TOK_PRE_SEQUENCE, TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL, TOK_PRE_METASPACE, TOK_PRE_DIGITS,
} tok_pretok_type;
typedef enum tok_prepend_scheme { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;
typedef struct tok_pretok {
    tok_pretok_type type;
    tok_regex *re;                /* SPLIT pattern; BYTELEVEL's GPT-2 regex when use_regex */
    tok_split_behavior behavior;  /* SPLIT */
    bool invert;                  /* SPLIT */
    bool add_prefix_space;        /* BYTELEVEL */
    char rep[4];                  /* METASPACE replacement character */
    size_t rep_len;
    tok_prepend_scheme scheme;    /* METASPACE */
    bool split;                   /* METASPACE */
    bool individual_digits;       /* DIGITS */
    struct tok_pretok *items;     /* SEQUENCE */
    size_t n_items;
} tok_pretok;

typedef enum tok_dec_type {
    TOK_DEC_SEQUENCE, TOK_DEC_BYTELEVEL, TOK_DEC_REPLACE, TOK_DEC_BYTEFALLBACK,
    TOK_DEC_FUSE, TOK_DEC_STRIP, TOK_DEC_METASPACE, TOK_DEC_BPE,
} tok_dec_type;
typedef struct tok_decoder {
    tok_dec_type type;
    tok_regex *re;             /* REPLACE */
    char *text;                /* REPLACE content, BPE suffix */
    size_t text_len;
    uint32_t strip_cp;         /* STRIP content; METASPACE replacement */
    size_t start, stop;        /* STRIP */
    tok_prepend_scheme scheme; /* METASPACE */
    struct tok_decoder *items; /* SEQUENCE */
    size_t n_items;
} tok_decoder;

typedef enum tok_post_type { TOK_POST_SEQUENCE, TOK_POST_NOOP, TOK_POST_TEMPLATE } tok_post_type;
typedef struct tok_post {
    tok_post_type type;
    /* TEMPLATE (also Bert/Roberta, single sequence): ids before and after A. */
    int32_t *before, *after;
    size_t n_before, n_after;
    struct tok_post *items; /* SEQUENCE */
    size_t n_items;
} tok_post;

typedef struct tok_added {
    char *content;      /* as written in tokenizer.json */
    size_t len;
    char *norm;         /* normalized content when `normalized` and a normalizer exists */
    size_t norm_len;
    int32_t id;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Byte trie over added-token contents for leftmost-longest matching. */
typedef struct tok_trie_edge {
    int32_t child, next;
    uint8_t byte;
} tok_trie_edge;
typedef struct tok_trie {
    int32_t root[256];   /* child node per first byte, -1 if none */
    int32_t *first_edge; /* per node: first outgoing edge or -1 */
    int32_t *value;      /* per node: added-token index ending here or -1 */
    size_t n_nodes, cap_nodes;
    tok_trie_edge *edges;
    size_t n_edges, cap_edges;
    bool empty;
} tok_trie;

typedef struct tok_bpe {
    tok_map vocab;              /* model vocabulary */
    size_t vocab_count;         /* entries (HF get_vocab_size) */
    tok_pairmap merges;
    char *unk;                  /* unk_token or NULL */
    int32_t unk_id;             /* -1 when unk is absent from vocab */
    char *prefix, *suffix;      /* continuing_subword_prefix / end_of_word_suffix (NULL = none) */
    size_t prefix_len, suffix_len;
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256];      /* "<0xXX>" ids for byte fallback, -1 if absent */
    int32_t *char_ids;          /* id of the one-character token per code point, -1 */
    size_t n_char_ids;          /* table length (largest such code point below U+10000, + 1) */
    /* word cache: piece -> offset of [count, ids...] in cache_ids */
    tok_map cache;
    int32_t *cache_ids;
    size_t cache_n, cache_cap;
} tok_bpe;

/* Pre-tokenized pieces: (offset, length) into a buffer. */
typedef struct tok_piece {
    uint32_t off, len;
    bool orig0; /* starts at offset 0 of the original input (Metaspace "first") */
} tok_piece;
typedef struct tok_pieces {
    tok_piece *v;
    size_t n, cap;
    tok_buf buf;
} tok_pieces;
/* Added-token matches over a string. */
typedef struct tok_split {
    size_t start, end;
    int32_t id; /* -1: text to process further */
} tok_split;
typedef struct tok_splits {
    tok_split *v;
    size_t n, cap;
} tok_splits;

struct cq_tokenizer {
    tok_bpe bpe;
    /* id -> string, for decoding: model vocab, then added tokens override. */
    size_t n_ids;              /* one past the largest id */
    uint32_t *id_off, *id_len; /* into bpe.vocab's key arena; id_len UINT32_MAX = unknown id */
    int32_t *id_added;         /* id -> index in added[] or -1 */
    tok_added *added;
    size_t n_added;
    tok_map added_map;         /* content -> id */
    tok_trie trie_raw;         /* normalized == false */
    tok_trie trie_norm;        /* normalized == true (normalized content) */
    tok_norm *normalizer;      /* NULL = none */
    tok_pretok *pretok;        /* NULL = none */
    tok_post *post;            /* NULL = none */
    tok_decoder *decoder;      /* NULL = tokens joined with ' ' */
    /* encode scratch, reused between calls */
    tok_buf s_text, s_norm;
    tok_pieces s_pieces, s_pieces_tmp;
    tok_spans s_spans;
    tok_splits s_raw, s_norm_splits;
};

/* ---- component entry points ---------------------------------------------- */
/* tok_load.c */
void tok_norm_free(tok_norm *n);
void tok_pretok_free(tok_pretok *p);
void tok_decoder_free(tok_decoder *d);
void tok_post_free(tok_post *p);

/* tok_normalize.c: out receives normalize(s) (out is cleared first). */
cq_status tok_normalize(const tok_norm *n, const char *s, size_t len, tok_buf *out);

/* tok_pretok.c */
cq_status tok_pieces_push(tok_pieces *p, const char *s, size_t len, bool orig0);
/* Byte of a byte-level alphabet code point, -1 if cp is not in it. */
int32_t tok_bytelevel_byte_of(uint32_t cp);
void tok_pieces_free(tok_pieces *p);
/* Pre-tokenize s into `out` (cleared first); `tmp` is scratch. */
cq_status tok_pretokenize(const tok_pretok *pt, const char *s, size_t len, bool orig0,
                          tok_pieces *out, tok_pieces *tmp, tok_spans *spans);

/* tok_bpe.c */
cq_status tok_bpe_init_tables(tok_bpe *b);
void tok_bpe_free(tok_bpe *b);
cq_status tok_bpe_encode_word(tok_bpe *b, const char *w, size_t n, cq_tokens *out);
void tok_bpe_clear_cache(tok_bpe *b);

/* tok_added.c */
cq_status tok_trie_build(tok_trie *t, const cq_tokenizer *tk, bool normalized);
void tok_trie_free(tok_trie *t);
/* Hugging Face AddedVocabulary::find_matches over s (splits cleared first). */
cq_status tok_added_find(const cq_tokenizer *tk, const tok_trie *trie, const char *s, size_t n,
                         bool split_special, tok_splits *out);
void tok_splits_free(tok_splits *s);

/* tok_decode.c: apply the decoder chain to a list of token strings. */
typedef struct tok_strs {
    uint32_t *off, *len;
    size_t n, cap;
    tok_buf buf;
} tok_strs;
cq_status tok_strs_push(tok_strs *l, const char *s, size_t n);
void tok_strs_free(tok_strs *l);

#endif /* CQ_TOKENIZER_IMPL_H */
