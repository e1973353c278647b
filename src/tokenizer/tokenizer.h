/*
 * tokenizer.h — the library-internal tokenizer API: load a Hugging Face
 * `tokenizer.json` (byte-level or SentencePiece-style BPE), encode text to
 * token ids and decode ids back to text, token by token if need be.
 *
 * What it promises
 *  - Ids identical to Hugging Face `tokenizers` (Tokenizer.encode /
 *    Tokenizer.decode) for the components it accepts; a component it does
 *    not implement makes loading fail with CQ_ERR_UNSUPPORTED naming it, a
 *    malformed file fails with CQ_ERR_PARSE naming the field. It never
 *    guesses.
 *  - Input text is bytes. Valid UTF-8 is tokenized as is. Ill-formed UTF-8
 *    is first repaired the way Python's bytes.decode('utf-8', 'replace')
 *    (and Rust's String::from_utf8_lossy) do it: every maximal ill-formed
 *    subpart becomes one U+FFFD. That is exactly the Python str the golden
 *    generator hands to Hugging Face, so ids agree for any byte string.
 *  - Decoding drops ids the tokenizer does not know (as Hugging Face does)
 *    and returns valid UTF-8.
 *
 * Threads: a loaded tokenizer is immutable except for its word cache, so one
 * handle may be shared by threads that each call cq_tokenizer_encode only if
 * the caller serialises encode calls; decode and streams never touch the
 * cache and may run concurrently.
 */
#ifndef CQ_TOKENIZER_H
#define CQ_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

typedef struct cq_tokenizer cq_tokenizer;

/* A growable list of token ids; zero-initialise, release with cq_tokens_free. */
typedef struct cq_tokens {
    int32_t *ids;
    size_t n, cap;
} cq_tokens;
void cq_tokens_free(cq_tokens *t);

/* Parse `tokenizer.json` bytes (need not be NUL-terminated; copied, so the
 * buffer may be released afterwards). */
cq_status cq_tokenizer_load(const void *json, size_t len, cq_tokenizer **out);
cq_status cq_tokenizer_load_file(const char *path, cq_tokenizer **out);
void cq_tokenizer_free(cq_tokenizer *t);

/* One past the largest id the tokenizer can produce or decode. */
size_t cq_tokenizer_vocab_size(const cq_tokenizer *t);
/* Exact-string lookup over the model vocabulary and the added tokens;
 * -1 when absent. */
int32_t cq_tokenizer_token_to_id(const cq_tokenizer *t, const char *s, size_t len);
/* The token's string as stored in tokenizer.json (byte-level tokens are in
 * their mapped alphabet, e.g. "Ġthe"); NULL for an unknown id. */
const char *cq_tokenizer_id_to_token(const cq_tokenizer *t, int32_t id, size_t *len);
/* Whether the id is an added token marked "special" (skipped by
 * CQ_TOK_SKIP_SPECIAL when decoding). */
bool cq_tokenizer_is_special(const cq_tokenizer *t, int32_t id);

/* Encode flags. */
enum {
    /* Apply the post-processor's template (e.g. a BOS id in front). Hugging
     * Face's add_special_tokens=True. Byte-level post-processors add
     * nothing, so Qwen/Llama-3 ids are the same either way. */
    CQ_TOK_ADD_SPECIAL = 1 << 0,
    /* Do not match special added tokens in the text: "<|im_start|>" is then
     * tokenized as ordinary text (Hugging Face's encode_special_tokens). */
    CQ_TOK_SPLIT_SPECIAL = 1 << 1,
};
/* Append the ids of text[0..len) to `out` (which keeps what it had). */
cq_status cq_tokenizer_encode(cq_tokenizer *t, const char *text, size_t len, unsigned flags,
                              cq_tokens *out);

/* Decode flags. */
enum {
    CQ_TOK_SKIP_SPECIAL = 1 << 0, /* leave special added tokens out */
};
/* Decode ids into a fresh NUL-terminated UTF-8 string (*out, release with
 * cq_free); *out_len (optional) receives its length. */
cq_status cq_tokenizer_decode(const cq_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                              char **out, size_t *out_len);

/* ---- streaming decode ----------------------------------------------------
 * Feed generated ids one at a time and get the text they complete. Text is
 * held back while the decoded tail is an incomplete UTF-8 sequence (e.g. the
 * first byte token of an emoji) or may still change (a decoder that strips a
 * leading space). The concatenation of everything pushed out equals
 * cq_tokenizer_decode of all ids whenever that ends in a complete character.
 * Same algorithm as Hugging Face's DecodeStream. */
typedef struct cq_tokenizer_stream cq_tokenizer_stream;
cq_status cq_tokenizer_stream_create(const cq_tokenizer *t, unsigned decode_flags,
                                     cq_tokenizer_stream **out);
/* *text points at the new text (possibly empty, *len 0), valid until the
 * next call on this stream. */
cq_status cq_tokenizer_stream_push(cq_tokenizer_stream *s, int32_t id, const char **text,
                                   size_t *len);
void cq_tokenizer_stream_free(cq_tokenizer_stream *s);

/* ---- benchmark hook (`cortiq bench tokenizer`) --------------------------
 * Encodes `text` repeatedly for at least `min_seconds` (and at least once)
 * and reports throughput. The word cache is cleared before the first pass,
 * so a short run measures cold and a long run mostly warm behaviour. */
typedef struct cq_tokenizer_bench_result {
    double seconds;        /* wall time of the timed passes */
    size_t passes;         /* how many times text was encoded */
    size_t tokens;         /* ids per pass */
    double mb_per_s;       /* input MB (1e6 bytes) per second */
    double tokens_per_s;
} cq_tokenizer_bench_result;
cq_status cq_tokenizer_bench_encode(cq_tokenizer *t, const char *text, size_t len,
                                    double min_seconds, cq_tokenizer_bench_result *out);

#endif /* CQ_TOKENIZER_H */
