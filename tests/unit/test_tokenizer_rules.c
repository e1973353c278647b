/* test_tokenizer_rules.c — the tokenizer on tiny hand-written tokenizer.json
 * files whose results can be worked out by hand from Hugging Face's rules:
 * BPE merge order, added tokens (longest first, lstrip, rstrip,
 * single_word, special skipping), post-processor templates, decoders without
 * a decoder, UTF-8 repair; then every malformed or unsupported file class
 * with the error it must give, and an allocation failure at every point of
 * loading and encoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "testutil.h"
#include "tokenizer/tokenizer-impl.h"
#include "tokenizer/tokenizer.h"

/* vocab a b c ab abc ' ' x y; merges a+b, ab+c; five added tokens */
#define TINY_MODEL                                                                            \
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4,\" \":5," \
    "\"x\":6,\"y\":7},\"merges\":[[\"a\",\"b\"],[\"ab\",\"c\"]]}"
#define TINY_ADDED                                                                            \
    "\"added_tokens\":["                                                                      \
    "{\"id\":8,\"content\":\"<a>\",\"special\":true,\"normalized\":false},"                   \
    "{\"id\":9,\"content\":\"<a><b>\",\"special\":true,\"normalized\":false},"                \
    "{\"id\":10,\"content\":\"[L]\",\"lstrip\":true,\"special\":true,\"normalized\":false},"  \
    "{\"id\":11,\"content\":\"[R]\",\"rstrip\":true,\"special\":true,\"normalized\":false},"  \
    "{\"id\":12,\"content\":\"w\",\"single_word\":true,\"normalized\":false}]"

static const char k_tiny[] =
    "{\"version\":\"1.0\"," TINY_ADDED ",\"normalizer\":null,\"pre_tokenizer\":null,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<a>\","
    "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[R]\","
    "\"type_id\":0}}],\"special_tokens\":{\"<a>\":{\"id\":\"<a>\",\"ids\":[8],\"tokens\":[\"<a>\"]},"
    "\"[R]\":{\"id\":\"[R]\",\"ids\":[11],\"tokens\":[\"[R]\"]}}},"
    "\"decoder\":{\"type\":\"Fuse\"}," TINY_MODEL "}";

static cq_tokenizer *tiny(void) {
    cq_tokenizer *t = NULL;
    cq_status st = cq_tokenizer_load(k_tiny, strlen(k_tiny), &t);
    if (st != CQ_OK) fail_msg("tiny tokenizer: %s", cq_last_error());
    return t;
}

static void expect_encode(cq_tokenizer *t, const char *text, unsigned flags, const int32_t *want, size_t n) {
    cq_tokens ids = {0};
    assert_int_equal(cq_tokenizer_encode(t, text, strlen(text), flags, &ids), CQ_OK);
    if (ids.n != n || memcmp(ids.ids, want, n * sizeof *want) != 0) {
        char got[256] = "";
        for (size_t i = 0; i < ids.n && strlen(got) < 200; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%d ", ids.ids[i]);
        fail_msg("'%s': got [%s], want %zu ids", text, got, n);
    }
    cq_tokens_free(&ids);
}
#define EXPECT(t, text, flags, ...)                                           \
    do {                                                                      \
        const int32_t w_[] = {__VA_ARGS__};                                   \
        expect_encode(t, text, flags, w_, sizeof w_ / sizeof w_[0]);          \
    } while (0)

static void test_bpe_merges(void **state) {
    (void)state;
    cq_tokenizer *t = tiny();
    EXPECT(t, "abc", 0, 4);
    EXPECT(t, "ab", 0, 3);
    EXPECT(t, "ba", 0, 1, 0);
    EXPECT(t, "abcab", 0, 4, 3);  /* no pre-tokenizer: one word, ranks decide */
    EXPECT(t, "aab", 0, 0, 3);
    EXPECT(t, "zaz", 0, 0);       /* 'z' is unknown and there is no unk: dropped */
    /* A word with no known character pushes no id: twice (the second time from
     * the word cache) into a fresh list, whose ids pointer is still NULL. */
    for (int pass = 0; pass < 2; pass++) {
        cq_tokens empty = {0};
        assert_int_equal(cq_tokenizer_encode(t, "zz", 2, 0, &empty), CQ_OK);
        assert_int_equal(empty.n, 0);
        cq_tokens_free(&empty);
    }
    cq_tokens none = {0};
    assert_int_equal(cq_tokenizer_encode(t, "", 0, 0, &none), CQ_OK);
    assert_int_equal(none.n, 0);
    assert_int_equal(cq_tokenizer_vocab_size(t), 13);
    cq_tokenizer_free(t);
}

static void test_added_tokens(void **state) {
    (void)state;
    cq_tokenizer *t = tiny();
    EXPECT(t, "abc<a><b>ab", 0, 4, 9, 3);       /* longest match wins */
    EXPECT(t, "ab<a>c", 0, 3, 8, 2);
    EXPECT(t, "<a><a>", 0, 8, 8);
    EXPECT(t, "x  [L]y", 0, 6, 10, 7);          /* lstrip eats the spaces before */
    EXPECT(t, "x[R]  y", 0, 6, 11, 7);          /* rstrip eats the spaces after */
    EXPECT(t, "x [R] [L] y", 0, 6, 5, 11, 10, 5, 7);
    EXPECT(t, "w xwx w", 0, 12, 5, 6, 6, 5, 12); /* single_word: only the free-standing ones */
    EXPECT(t, "<a>", CQ_TOK_SPLIT_SPECIAL, 0);   /* '<' '>' unknown, 'a' kept */
    EXPECT(t, "w", CQ_TOK_SPLIT_SPECIAL, 12);    /* not special: still matched */
    EXPECT(t, "ab", CQ_TOK_ADD_SPECIAL, 8, 3, 11);
    EXPECT(t, "", CQ_TOK_ADD_SPECIAL, 8, 11);
    assert_int_equal(cq_tokenizer_token_to_id(t, "<a><b>", 6), 9);
    assert_int_equal(cq_tokenizer_token_to_id(t, "abc", 3), 4);
    assert_int_equal(cq_tokenizer_token_to_id(t, "zzz", 3), -1);
    size_t len;
    assert_string_equal(cq_tokenizer_id_to_token(t, 10, &len), "[L]");
    assert_null(cq_tokenizer_id_to_token(t, 13, &len));
    assert_null(cq_tokenizer_id_to_token(t, -1, &len));
    assert_true(cq_tokenizer_is_special(t, 8));
    assert_false(cq_tokenizer_is_special(t, 12));
    assert_false(cq_tokenizer_is_special(t, 4));
    cq_tokenizer_free(t);
}

static void test_decode_rules(void **state) {
    (void)state;
    cq_tokenizer *t = tiny();
    const int32_t ids[] = {4, 9, 3, 12, 99, -5};
    char *out;
    size_t ol;
    assert_int_equal(cq_tokenizer_decode(t, ids, 6, 0, &out, &ol), CQ_OK);
    assert_string_equal(out, "abc<a><b>abw"); /* unknown ids vanish */
    assert_int_equal(ol, 12);
    cq_free(out);
    assert_int_equal(cq_tokenizer_decode(t, ids, 6, CQ_TOK_SKIP_SPECIAL, &out, &ol), CQ_OK);
    assert_string_equal(out, "abcabw");
    cq_free(out);
    assert_int_equal(cq_tokenizer_decode(t, NULL, 0, 0, &out, &ol), CQ_OK);
    assert_string_equal(out, "");
    cq_free(out);
    cq_tokenizer_free(t);

    /* without a decoder, tokens are joined with spaces */
    static const char nodec[] = "{" TINY_MODEL "}";
    assert_int_equal(cq_tokenizer_load(nodec, strlen(nodec), &t), CQ_OK);
    assert_int_equal(cq_tokenizer_decode(t, ids, 3, 0, &out, &ol), CQ_OK);
    assert_string_equal(out, "abc ab"); /* 9 is not in this tokenizer */
    cq_free(out);
    cq_tokenizer_free(t);
}

/* Templates with nothing before the text: the bare sequence (what `tokenizers` saves for a BPE trained
 * without special tokens in its template) and a sequence followed by one special token. */
static void test_template_without_prefix(void **state) {
    (void)state;
    static const char bare[] =
        "{" TINY_ADDED ",\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":"
        "{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{}}," TINY_MODEL "}";
    static const char suffix[] =
        "{" TINY_ADDED ",\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":"
        "{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[R]\",\"type_id\":0}}],"
        "\"special_tokens\":{\"[R]\":{\"id\":\"[R]\",\"ids\":[11],\"tokens\":[\"[R]\"]}}}," TINY_MODEL "}";
    cq_tokenizer *t;
    assert_int_equal(cq_tokenizer_load(bare, strlen(bare), &t), CQ_OK);
    EXPECT(t, "abcx", CQ_TOK_ADD_SPECIAL, 4, 6);
    EXPECT(t, "abcx", 0, 4, 6);
    cq_tokens none = {0};
    assert_int_equal(cq_tokenizer_encode(t, "", 0, CQ_TOK_ADD_SPECIAL, &none), CQ_OK);
    assert_int_equal(none.n, 0);
    cq_tokens_free(&none);
    cq_tokenizer_free(t);
    assert_int_equal(cq_tokenizer_load(suffix, strlen(suffix), &t), CQ_OK);
    EXPECT(t, "abcx", CQ_TOK_ADD_SPECIAL, 4, 6, 11);
    EXPECT(t, "", CQ_TOK_ADD_SPECIAL, 11);
    cq_tokenizer_free(t);
}

/* Ill-formed UTF-8 becomes U+FFFD per maximal subpart before tokenizing. */
static void test_invalid_utf8(void **state) {
    (void)state;
    static const char bl[] =
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"\xef\xbf\xbd\":1},\"merges\":[]},"
        "\"decoder\":{\"type\":\"Fuse\"}}";
    cq_tokenizer *t;
    assert_int_equal(cq_tokenizer_load(bl, strlen(bl), &t), CQ_OK);
    EXPECT(t, "a\xff" "a", 0, 0, 1, 0);
    EXPECT(t, "\xc0\xaf", 0, 1, 1);             /* two invalid lead bytes */
    EXPECT(t, "\xe2\x82" "a", 0, 1, 0);         /* one truncated sequence */
    EXPECT(t, "\xed\xa0\x80", 0, 1, 1, 1);      /* a surrogate: three subparts */
    EXPECT(t, "\xf0\x9f\x98", 0, 1);            /* truncated at the end */
    EXPECT(t, "\xf4\x90\x80\x80", 0, 1, 1, 1, 1);
    cq_tokenizer_free(t);
}

/* A Replace whose pattern matches the empty string inserts its content at every
 * position; three in a row would multiply a short text by a million. The
 * normalizer stops at 64 times the text (plus 4 KiB) with an error instead. */
static void test_normalizer_growth(void **state) {
    (void)state;
    char c100[101];
    memset(c100, 'x', 100);
    c100[100] = 0;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
             "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\"},\"content\":\"%s\"},"
             "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\"},\"content\":\"%s\"},"
             "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\"},\"content\":\"%s\"}]},"
             "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"x\":1},\"merges\":[]}}",
             c100, c100, c100);
    cq_tokenizer *t;
    assert_int_equal(cq_tokenizer_load(json, strlen(json), &t), CQ_OK);
    cq_tokens ids = {0};
    assert_int_equal(cq_tokenizer_encode(t, "abc", 3, 0, &ids), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "grow text without bound"));
    cq_tokens_free(&ids);
    cq_tokenizer_free(t);
    snprintf(json, sizeof json,
             "{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\"\"},\"content\":\"x\"},"
             "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"x\":1},\"merges\":[]}}");
    assert_int_equal(cq_tokenizer_load(json, strlen(json), &t), CQ_OK);
    EXPECT(t, "aa", 0, 1, 0, 1, 0, 1); /* one such Replace is within the bound: x a x a x */
    cq_tokenizer_free(t);
}

static void expect_load_error(const char *json, cq_status want, const char *needle) {
    cq_tokenizer *t = (cq_tokenizer *)0x1;
    cq_status st = cq_tokenizer_load(json, strlen(json), &t);
    if (st != want) fail_msg("want %s, got %s (%s) for %s", cq_status_str(want), cq_status_str(st),
                             cq_last_error(), json);
    assert_null(t);
    if (!strstr(cq_last_error(), needle))
        fail_msg("message '%s' does not mention '%s'", cq_last_error(), needle);
}

#define VOCAB "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"
static void test_load_errors(void **state) {
    (void)state;
    expect_load_error("{\"model\": {", CQ_ERR_PARSE, "not valid JSON");
    expect_load_error("[1,2]", CQ_ERR_PARSE, "top level");
    /* JSON text is UTF-8: a stray byte in a string (here a decoder's Replace content, which decoding would
     * hand out as it is) is refused at load, as the reference's parser refuses it (found by fuzzing) */
    expect_load_error("{\"decoder\":{\"type\":\"Replace\",\"pattern\":{\"String\":\"_\"},\"content\":\"\x8d\"},"
                      "\"model\":{\"type\":\"BPE\",\"vocab\":{\"_\":0},\"merges\":[]}}",
                      CQ_ERR_PARSE, "not valid UTF-8 (byte 66 of 120)");
    expect_load_error("{}", CQ_ERR_PARSE, "model");
    expect_load_error("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", CQ_ERR_UNSUPPORTED, "Unigram");
    expect_load_error("{\"model\":{\"type\":\"Magic\"}}", CQ_ERR_UNSUPPORTED, "Magic");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", CQ_ERR_PARSE,
                      "model.vocab['a']");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5},\"merges\":[]}}", CQ_ERR_PARSE,
                      "model.vocab['a']");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", CQ_ERR_PARSE,
                      "model.vocab['a']");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999999},\"merges\":[]}}",
                      CQ_ERR_PARSE, "model.vocab['a']");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}}", CQ_ERR_PARSE,
                      "twice");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", CQ_ERR_PARSE,
                      "id 0");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB "}}", CQ_ERR_PARSE, "model.merges");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[[\"a\",\"c\"]]}}", CQ_ERR_PARSE,
                      "model.merges[0]");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[[\"b\",\"a\"]]}}", CQ_ERR_PARSE,
                      "merged token 'ba'");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a b c\"]}}", CQ_ERR_PARSE,
                      "model.merges[0]");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[\"a b\",[\"a\",\"b\"]]}}",
                      CQ_ERR_PARSE, "model.merges[1]");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[],\"dropout\":0.1}}",
                      CQ_ERR_UNSUPPORTED, "dropout");
    expect_load_error("{\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[],\"byte_fallback\":1}}",
                      CQ_ERR_PARSE, "model.byte_fallback");
    expect_load_error("{\"version\":\"2.0\",\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_UNSUPPORTED, "version");
    expect_load_error("{\"truncation\":{\"max_length\":5},\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_UNSUPPORTED, "truncation");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"model\":{\"type\":\"BPE\"," VOCAB
                      ",\"merges\":[]}}", CQ_ERR_UNSUPPORTED, "pre-tokenizer type 'Whitespace'");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                      "\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false}]},"
                      "\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_PARSE, "pre_tokenizer.pretokenizers[0].pattern");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"x\"},"
                      "\"behavior\":\"Sideways\",\"invert\":false},\"model\":{\"type\":\"BPE\"," VOCAB
                      ",\"merges\":[]}}", CQ_ERR_PARSE, "pre_tokenizer.behavior");
    expect_load_error("{\"normalizer\":{\"type\":\"Precompiled\"},\"model\":{\"type\":\"BPE\"," VOCAB
                      ",\"merges\":[]}}", CQ_ERR_UNSUPPORTED, "normalizer type 'Precompiled'");
    expect_load_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{}]},"
                      "\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}", CQ_ERR_PARSE,
                      "normalizer.normalizers[1].type");
    expect_load_error("{\"decoder\":{\"type\":\"WordPiece\"},\"model\":{\"type\":\"BPE\"," VOCAB
                      ",\"merges\":[]}}", CQ_ERR_UNSUPPORTED, "decoder type 'WordPiece'");
    expect_load_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
                      "{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
                      "\"special_tokens\":{}},\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_PARSE, "'<s>' missing");
    /* a special token whose id the vocabulary does not have (found by fuzz_tokenizer: encoding then produced an
     * id outside the vocabulary) */
    expect_load_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":"
                      "{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
                      "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[99],\"tokens\":[\"<s>\"]}}},"
                      "\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_PARSE, "token id 99, which is not in the vocabulary");
    expect_load_error("{\"added_tokens\":[{\"id\":3}],\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_PARSE, "added_tokens[0].content");
    expect_load_error("{\"added_tokens\":{},\"model\":{\"type\":\"BPE\"," VOCAB ",\"merges\":[]}}",
                      CQ_ERR_PARSE, "added_tokens");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"\xff\":0},\"merges\":[]}}", CQ_ERR_PARSE,
                      "UTF-8");

    cq_tokenizer *t;
    assert_int_equal(cq_tokenizer_load(NULL, 0, &t), CQ_ERR_PARSE);
    assert_int_equal(cq_tokenizer_load(NULL, 3, &t), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_tokenizer_load("{}", 2, NULL), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_tokenizer_load_file("/nonexistent/tokenizer.json", &t), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "/nonexistent/tokenizer.json"));
    cq_tokenizer_free(NULL);
    cq_tokens_free(NULL);
    cq_tokenizer_stream_free(NULL);
}

static void test_call_errors(void **state) {
    (void)state;
    cq_tokenizer *t = tiny();
    cq_tokens ids = {0};
    assert_int_equal(cq_tokenizer_encode(t, NULL, 3, 0, &ids), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_tokenizer_encode(NULL, "a", 1, 0, &ids), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_tokenizer_encode(t, NULL, 0, 0, &ids), CQ_OK);
    char *out;
    assert_int_equal(cq_tokenizer_decode(t, NULL, 2, 0, &out, NULL), CQ_ERR_INVALID_ARG);
    cq_tokenizer_stream *s;
    assert_int_equal(cq_tokenizer_stream_create(NULL, 0, &s), CQ_ERR_INVALID_ARG);
    /* encode appends: a second call keeps what the first produced */
    assert_int_equal(cq_tokenizer_encode(t, "ab", 2, 0, &ids), CQ_OK);
    assert_int_equal(cq_tokenizer_encode(t, "abc", 3, 0, &ids), CQ_OK);
    assert_int_equal(ids.n, 2);
    assert_int_equal(ids.ids[0], 3);
    assert_int_equal(ids.ids[1], 4);
    cq_tokens_free(&ids);
    cq_tokenizer_free(t);
}

/* A failed allocation anywhere in loading or encoding gives a clean error
 * (ASan checks nothing leaks), and a later call still works. */
static void test_alloc_failures(void **state) {
    (void)state;
    int ok_at = -1;
    for (long n = 1; n < 5000; n++) {
        cq_tokenizer *t = NULL;
        cq_alloc_fail_at(n);
        cq_status st = cq_tokenizer_load(k_tiny, strlen(k_tiny), &t);
        cq_alloc_fail_at(0);
        if (st == CQ_OK) {
            ok_at = (int)n;
            cq_tokenizer_free(t);
            break;
        }
        assert_int_equal(st, CQ_ERR_NOMEM);
        assert_null(t);
    }
    assert_true(ok_at > 10); /* loading does allocate; every failure point was visited */
    cq_tokenizer *t = tiny();
    const char *text = "abc<a><b>ab x  [L]y w xwx w";
    for (long n = 1; n < 1000; n++) {
        cq_tokens ids = {0};
        cq_alloc_fail_at(n);
        cq_status st = cq_tokenizer_encode(t, text, strlen(text), CQ_TOK_ADD_SPECIAL, &ids);
        char *out = NULL;
        cq_status st2 = st == CQ_OK ? cq_tokenizer_decode(t, ids.ids, ids.n, 0, &out, NULL) : CQ_OK;
        cq_alloc_fail_at(0);
        cq_free(out);
        cq_tokens_free(&ids);
        if (st == CQ_OK && st2 == CQ_OK) break;
        assert_int_equal(st == CQ_OK ? st2 : st, CQ_ERR_NOMEM);
    }
    EXPECT(t, "abc<a><b>ab", 0, 4, 9, 3);
    cq_tokenizer_free(t);
}

/* Patterns mean what Oniguruma makes of them, and matches are enumerated
 * like its find_iter (empty matches included). */
static void expect_matches(const char *pat, bool literal, const char *text, const char *want) {
    tok_regex *re;
    assert_int_equal(tok_regex_compile(pat, strlen(pat), literal, "test", &re), CQ_OK);
    tok_spans sp = {0};
    assert_int_equal(tok_regex_find_all(re, text, strlen(text), &sp), CQ_OK);
    char got[256] = "";
    for (size_t i = 0; i < sp.n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%zu-%zu", i ? " " : "", sp.v[i].start,
                 sp.v[i].end);
    if (strcmp(got, want) != 0) fail_msg("/%s/ on '%s': got '%s', want '%s'", pat, text, got, want);
    tok_spans_free(&sp);
    tok_regex_free(re);
}

static void test_regex_semantics(void **state) {
    (void)state;
#ifdef CQ_HAVE_PCRE2
    expect_matches("\\s+", false, "a \xe1\xa0\x8e\xc2\x85" "b", "1-2 5-7");     /* U+180E is not space, NEL is */
    expect_matches("[\\s\\d]+", false, "x1 \xe3\x80\x80y", "1-6");          /* inside a class too */
    expect_matches("\\w+", false, "e\xcc\x81x\xe2\x80\xbfz \xe2\x85\xa0", "0-8 9-12");  /* marks, Pc, Nl */
    expect_matches("\\h+", false, "zz0fGa9", "2-4 5-7");                      /* hex digits */
    expect_matches("x*", false, "axxb", "0-0 1-3 4-4");                       /* empty matches */
    expect_matches("(?i:'s|'t)", false, "'S '\xc5\xbf 'T", "0-2 3-6 7-9");     /* long s folds to s */
#endif
    expect_matches("ab", true, "xabab aab", "1-3 3-5 7-9");
    expect_matches("", true, "ab", "0-0 1-1 2-2");
    tok_regex *re = NULL;
#ifdef CQ_HAVE_PCRE2
    assert_int_equal(tok_regex_compile("(", 1, false, "f.pattern", &re), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "f.pattern"));
#endif
    assert_null(re);
}

int main(void) {
    cq_set_log(NULL, NULL, CQ_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merges),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_decode_rules),
        cmocka_unit_test(test_template_without_prefix),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_normalizer_growth),
        cmocka_unit_test(test_regex_semantics),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_call_errors),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
