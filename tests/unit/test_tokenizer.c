/* test_tokenizer.c — the tokenizer against Hugging Face `tokenizers` on real
 * tokenizer.json files: exact ids for every corpus case (golden files made by
 * tools/golden_tokenizer.py), decode and streaming decode against the same
 * goldens, plus round trips and partial-UTF-8 streaming that need no golden.
 *
 * Golden files: tests/golden/tokenizer/<tokenizer>.json (or the directory in
 * CQ_TOKENIZER_GOLDEN_DIR). Each names a fixture in tests/fixtures/tokenizers
 * (<name>.json or <name>.json.gz) and records, per corpus case, what Hugging
 * Face produced. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <utf8proc.h>

#include "base/base.h"
#include "base/gz.h"
#include "format/file_read.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

#define FIXTURES CQ_SOURCE_DIR "/tests/fixtures/tokenizers"
#define CORPUS CQ_SOURCE_DIR "/tests/golden/tokenizer/corpus"

/* Read a fixture, gunzipping <name>.json.gz when there is no <name>.json (NULL without zlib). */
static char *read_fixture(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", FIXTURES, name);
    char *d = (char *)tu_read_file(path, len);
    if (d) return d;
    snprintf(path, sizeof path, "%s/%s.json.gz", FIXTURES, name);
    uint8_t *z = NULL;
    if (cq_file_read_gz(path, (size_t)1 << 30, &z, len) != CQ_OK) return NULL;
    return (char *)z; /* cq_malloc is malloc: the callers' free() takes it */
}

/* Whether fixture `name` is stored only gzipped and this build cannot read it. */
static bool unreadable_here(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", FIXTURES, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return !f && !cq_gz_available();
}

static cq_tokenizer *load_fixture(const char *name) {
    size_t len = 0;
    char *json = read_fixture(name, &len);
    if (!json && unreadable_here(name))
        print_message("the %s fixture is %s.json.gz and this build has no zlib: skipped\n", name, name);
    if (!json) return NULL;
    cq_tokenizer *t = NULL;
    cq_status st = cq_tokenizer_load(json, len, &t);
    free(json);
    if (st != CQ_OK) fail_msg("loading %s: %s: %s", name, cq_status_str(st), cq_last_error());
    return t;
}

static char *read_case(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.txt", CORPUS, name);
    *len = 0;
    return (char *)tu_read_file(path, len);
}

/* ids == the JSON array `want`; reports the first difference. */
static void expect_ids(const char *what, const cq_tokens *got, const cJSON *want) {
    assert_true(cJSON_IsArray(want));
    size_t n = (size_t)cJSON_GetArraySize(want), i = 0;
    const cJSON *it = want->child;
    for (; i < n && i < got->n; i++, it = it->next)
        if (got->ids[i] != (int32_t)it->valuedouble) break;
    if (i != n || i != got->n)
        fail_msg("%s: ids differ at %zu (got %zu ids, want %zu): got %d, want %d", what, i, got->n, n,
                 i < got->n ? got->ids[i] : -1, i < n ? (int)it->valuedouble : -1);
}

/* Decoded text in a golden file: a JSON string, or {"utf8_hex": "..."} for
 * text with NUL bytes. */
static char *golden_text(const cJSON *want, size_t *len) {
    const cJSON *hex = cJSON_IsObject(want) ? cJSON_GetObjectItem(want, "utf8_hex") : NULL;
    if (!hex) {
        assert_true(cJSON_IsString(want));
        *len = strlen(want->valuestring);
        return strdup(want->valuestring);
    }
    size_t n = strlen(hex->valuestring) / 2;
    char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex->valuestring + 2 * i, "%2x", &v), 1);
        b[i] = (char)v;
    }
    *len = n;
    return b;
}

static void expect_text(const char *what, const char *got, size_t got_len, const cJSON *want) {
    size_t wl;
    char *w = golden_text(want, &wl);
    if (wl != got_len || memcmp(got, w, wl) != 0) {
        size_t i = 0;
        while (i < wl && i < got_len && got[i] == w[i]) i++;
        free(w);
        fail_msg("%s: text differs at byte %zu (got %zu bytes, want %zu)", what, i, got_len, wl);
    }
    free(w);
}

static void check_case(cq_tokenizer *t, const char *tname, const char *cname, const cJSON *c) {
    size_t len;
    char *text = read_case(cname, &len);
    if (!text) fail_msg("corpus case %s missing", cname);
    char what[160];
    cq_tokens ids = {0};
    snprintf(what, sizeof what, "%s/%s", tname, cname);
    assert_int_equal(cq_tokenizer_encode(t, text, len, 0, &ids), CQ_OK);
    expect_ids(what, &ids, cJSON_GetObjectItem(c, "ids"));

    const cJSON *sp = cJSON_GetObjectItem(c, "ids_add_special");
    if (sp) {
        cq_tokens with = {0};
        snprintf(what, sizeof what, "%s/%s (add special)", tname, cname);
        assert_int_equal(cq_tokenizer_encode(t, text, len, CQ_TOK_ADD_SPECIAL, &with), CQ_OK);
        expect_ids(what, &with, cJSON_IsString(sp) ? cJSON_GetObjectItem(c, "ids") : sp);
        cq_tokens_free(&with);
    }
    const cJSON *ss = cJSON_GetObjectItem(c, "ids_split_special");
    if (ss) {
        cq_tokens split = {0};
        snprintf(what, sizeof what, "%s/%s (split special)", tname, cname);
        assert_int_equal(cq_tokenizer_encode(t, text, len, CQ_TOK_SPLIT_SPECIAL, &split), CQ_OK);
        expect_ids(what, &split, cJSON_IsString(ss) ? cJSON_GetObjectItem(c, "ids") : ss);
        cq_tokens_free(&split);
    }
    for (int skip = 0; skip < 2; skip++) {
        const cJSON *d = cJSON_GetObjectItem(c, skip ? "decoded_skip_special" : "decoded");
        if (!d) continue;
        if (cJSON_GetObjectItem(d, "same")) d = cJSON_GetObjectItem(c, "decoded");
        char *out;
        size_t ol;
        snprintf(what, sizeof what, "%s/%s (decode%s)", tname, cname, skip ? ", skip special" : "");
        assert_int_equal(cq_tokenizer_decode(t, ids.ids, ids.n, skip ? CQ_TOK_SKIP_SPECIAL : 0, &out, &ol),
                         CQ_OK);
        expect_text(what, out, ol, d);
        cq_free(out);
    }
    const cJSON *st = cJSON_GetObjectItem(c, "stream");
    if (st) {
        cq_tokenizer_stream *s;
        assert_int_equal(cq_tokenizer_stream_create(t, 0, &s), CQ_OK);
        assert_int_equal((size_t)cJSON_GetArraySize(st), ids.n);
        const cJSON *it = st->child;
        for (size_t i = 0; i < ids.n; i++, it = it->next) {
            const char *chunk;
            size_t cl;
            assert_int_equal(cq_tokenizer_stream_push(s, ids.ids[i], &chunk, &cl), CQ_OK);
            snprintf(what, sizeof what, "%s/%s (stream step %zu)", tname, cname, i);
            if (cJSON_IsNull(it)) {
                if (cl != 0) fail_msg("%s: got %zu bytes, want none", what, cl);
            } else {
                expect_text(what, chunk, cl, it);
            }
        }
        cq_tokenizer_stream_free(s);
    }
    cq_tokens_free(&ids);
    free(text);
}

static void test_golden(void **state) {
    (void)state;
    const char *dir = getenv("CQ_TOKENIZER_GOLDEN_DIR");
    if (!dir) dir = CQ_SOURCE_DIR "/tests/golden/tokenizer";
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0, cases = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *js = (char *)tu_read_file(path, &len);
        assert_non_null(js);
        cJSON *root = cJSON_ParseWithLength(js, len);
        free(js);
        assert_non_null(root);
        const char *tname = cJSON_GetObjectItem(root, "tokenizer")->valuestring;
        if (unreadable_here(tname)) {
            print_message("golden %s left out: its fixture is %s.json.gz and this build has no zlib\n", tname, tname);
            cJSON_Delete(root);
            continue;
        }
        cq_tokenizer *t = load_fixture(tname);
        if (!t) fail_msg("fixture for golden %s not found", tname);
        for (const cJSON *c = cJSON_GetObjectItem(root, "cases")->child; c; c = c->next) {
            check_case(t, tname, c->string, c);
            cases++;
        }
        cq_tokenizer_free(t);
        cJSON_Delete(root);
        files++;
    }
    closedir(d);
    if (files == 0) {
        /* The goldens come from a machine with Hugging Face tokenizers
         * (tools/golden_tokenizer.py); without them there is nothing to check. */
        print_message("no golden files in %s: run tools/golden_tokenizer.py\n", dir);
        skip();
    }
    print_message("golden: %d tokenizers, %d cases matched\n", files, cases);
}

/* decode(encode(text)) == NFC(text) for every valid UTF-8 case: Qwen3's
 * tokenizer normalises to NFC and has a byte-level alphabet, so nothing else
 * is lost. */
static const char *const k_valid_cases[] = {
    "empty", "english", "multilingual", "cjk", "emoji", "code", "numbers", "special",
    "whitespace", "control", "contractions", "tiny", "newline", "single_letter", "long_100k",
};

static void round_trip(cq_tokenizer *t, const char *text, size_t len, const char *what) {
    cq_tokens ids = {0};
    assert_int_equal(cq_tokenizer_encode(t, text, len, 0, &ids), CQ_OK);
    char *out;
    size_t ol;
    assert_int_equal(cq_tokenizer_decode(t, ids.ids, ids.n, 0, &out, &ol), CQ_OK);
    /* the expected text: NFC of the input (utf8proc stops at NUL, so compose
     * NUL-separated pieces one by one) */
    char *want = malloc(len * 3 + 1);
    assert_non_null(want);
    size_t wl = 0;
    for (size_t i = 0; i <= len;) {
        size_t j = i;
        while (j < len && text[j] != '\0') j++;
        utf8proc_uint8_t *piece = NULL;
        utf8proc_ssize_t pl = utf8proc_map((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(j - i), &piece,
                                           UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        assert_true(pl >= 0);
        memcpy(want + wl, piece, (size_t)pl);
        wl += (size_t)pl;
        free(piece);
        if (j < len) want[wl++] = '\0';
        i = j + 1;
    }
    if (ol != wl || memcmp(out, want, wl) != 0) fail_msg("round trip of %s changed the text", what);
    free(want);
    cq_free(out);
    cq_tokens_free(&ids);
}

static void test_round_trip(void **state) {
    (void)state;
    cq_tokenizer *t = load_fixture("qwen3");
    if (!t) skip();
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_valid_cases); i++) {
        size_t len;
        char *text = read_case(k_valid_cases[i], &len);
        assert_non_null(text);
        round_trip(t, text, len, k_valid_cases[i]);
        free(text);
    }
    /* random valid UTF-8: code points from every plane except surrogates */
    tu_rng r;
    tu_rng_seed(&r, 1234);
    char buf[4096];
    for (int rep = 0; rep < 200; rep++) {
        size_t n = 0;
        size_t chars = (size_t)(tu_rng_u64(&r) % 300);
        for (size_t k = 0; k < chars; k++) {
            uint64_t x = tu_rng_u64(&r);
            uint32_t cp;
            switch (x % 4) {
            case 0: cp = (uint32_t)(x >> 8) % 0x80; break;
            case 1: cp = 0x80 + (uint32_t)(x >> 8) % 0x780; break;
            case 2: cp = 0x800 + (uint32_t)(x >> 8) % 0xF800; break;
            default: cp = 0x10000 + (uint32_t)(x >> 8) % 0x100000; break;
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            if (cp < 0x80) buf[n++] = (char)cp;
            else if (cp < 0x800) { buf[n++] = (char)(0xC0 | (cp >> 6)); buf[n++] = (char)(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                buf[n++] = (char)(0xE0 | (cp >> 12)); buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xF0 | (cp >> 18)); buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        round_trip(t, buf, n, "random UTF-8");
    }
    cq_tokenizer_free(t);
}

/* Qwen3 splits an emoji over byte tokens: the stream holds the partial
 * bytes back and releases the character whole; the concatenated stream
 * equals the full decode. */
static void test_stream_partial_utf8(void **state) {
    (void)state;
    cq_tokenizer *t = load_fixture("qwen3");
    if (!t) skip();
    const char *text = "A🤖b 日本語 👨‍👩‍👧 é\xcc\x81 end";
    cq_tokens ids = {0};
    assert_int_equal(cq_tokenizer_encode(t, text, strlen(text), 0, &ids), CQ_OK);
    char *full;
    size_t fl;
    assert_int_equal(cq_tokenizer_decode(t, ids.ids, ids.n, 0, &full, &fl), CQ_OK);

    cq_tokenizer_stream *s;
    assert_int_equal(cq_tokenizer_stream_create(t, 0, &s), CQ_OK);
    char acc[256];
    size_t an = 0, held = 0;
    for (size_t i = 0; i < ids.n; i++) {
        const char *chunk;
        size_t cl;
        assert_int_equal(cq_tokenizer_stream_push(s, ids.ids[i], &chunk, &cl), CQ_OK);
        if (cl == 0) held++;
        /* every chunk is whole characters */
        for (size_t k = 0; k < cl;) {
            unsigned char c = (unsigned char)chunk[k];
            size_t need = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            assert_true(c < 0x80 || c >= 0xC2);
            assert_true(k + need <= cl);
            k += need;
        }
        assert_true(an + cl < sizeof acc);
        memcpy(acc + an, chunk, cl);
        an += cl;
    }
    assert_true(held > 0); /* the emoji really was split across tokens */
    assert_int_equal(an, fl);
    assert_memory_equal(acc, full, fl);
    cq_tokenizer_stream_free(s);

    /* U+1FAE0 alone is three ids of bytes: nothing comes out until the last */
    cq_tokens r = {0};
    assert_int_equal(cq_tokenizer_encode(t, "🫠", 4, 0, &r), CQ_OK);
    assert_int_equal(r.n, 3);
    assert_int_equal(cq_tokenizer_stream_create(t, 0, &s), CQ_OK);
    for (size_t i = 0; i < r.n; i++) {
        const char *chunk;
        size_t cl;
        assert_int_equal(cq_tokenizer_stream_push(s, r.ids[i], &chunk, &cl), CQ_OK);
        if (i + 1 < r.n) assert_int_equal(cl, 0);
        else {
            assert_int_equal(cl, 4);
            assert_memory_equal(chunk, "🫠", 4);
        }
    }
    cq_tokenizer_stream_free(s);
    cq_tokens_free(&r);
    cq_free(full);
    cq_tokens_free(&ids);
    cq_tokenizer_free(t);
}

/* Special tokens inside text, on the real Qwen3 file: matched whole, not
 * when incomplete, and not at all with CQ_TOK_SPLIT_SPECIAL. */
static void test_qwen_specials(void **state) {
    (void)state;
    cq_tokenizer *t = load_fixture("qwen3");
    if (!t) skip();
    int32_t im_start = cq_tokenizer_token_to_id(t, "<|im_start|>", 12);
    int32_t im_end = cq_tokenizer_token_to_id(t, "<|im_end|>", 10);
    assert_int_equal(im_start, 151644);
    assert_int_equal(im_end, 151645);
    assert_true(cq_tokenizer_is_special(t, im_start));
    assert_false(cq_tokenizer_is_special(t, 9707));
    cq_tokens ids = {0};
    const char *s = "<|im_start|>user\nhi<|im_end|>";
    assert_int_equal(cq_tokenizer_encode(t, s, strlen(s), 0, &ids), CQ_OK);
    assert_int_equal(ids.ids[0], im_start);
    assert_int_equal(ids.ids[ids.n - 1], im_end);
    /* Qwen adds no BOS: the byte-level post-processor adds nothing */
    cq_tokens with = {0};
    assert_int_equal(cq_tokenizer_encode(t, s, strlen(s), CQ_TOK_ADD_SPECIAL, &with), CQ_OK);
    assert_int_equal(with.n, ids.n);
    assert_memory_equal(with.ids, ids.ids, ids.n * sizeof *ids.ids);
    cq_tokens split = {0};
    assert_int_equal(cq_tokenizer_encode(t, s, strlen(s), CQ_TOK_SPLIT_SPECIAL, &split), CQ_OK);
    for (size_t i = 0; i < split.n; i++) assert_true(split.ids[i] < 151643);
    cq_tokens part = {0};
    assert_int_equal(cq_tokenizer_encode(t, "<|im_start|", 11, 0, &part), CQ_OK);
    for (size_t i = 0; i < part.n; i++) assert_true(part.ids[i] < 151643);
    char *out;
    size_t ol;
    assert_int_equal(cq_tokenizer_decode(t, ids.ids, ids.n, CQ_TOK_SKIP_SPECIAL, &out, &ol), CQ_OK);
    assert_string_equal(out, "user\nhi");
    cq_free(out);
    cq_tokens_free(&ids);
    cq_tokens_free(&with);
    cq_tokens_free(&split);
    cq_tokens_free(&part);
    cq_tokenizer_free(t);
}

/* The bench hook runs and reports sane numbers. */
static void test_bench_hook(void **state) {
    (void)state;
    cq_tokenizer *t = load_fixture("qwen3");
    if (!t) skip();
    size_t len;
    char *text = read_case("english", &len);
    cq_tokenizer_bench_result r;
    assert_int_equal(cq_tokenizer_bench_encode(t, text, len, 0.05, &r), CQ_OK);
    assert_true(r.passes >= 1);
    assert_true(r.tokens > 10 && r.tokens < len);
    assert_true(r.mb_per_s > 0);
    free(text);
    cq_tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_stream_partial_utf8),
        cmocka_unit_test(test_qwen_specials),
        cmocka_unit_test(test_bench_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
