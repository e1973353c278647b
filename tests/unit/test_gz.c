/*
 * test_gz.c — gzip side files (base/gz.h): a round trip through zlib's own
 * compressor (one member and two concatenated), the golden tokenizer.json.gz
 * against its recorded size, and every way a file can be wrong failing
 * cleanly with a message naming it: truncated at each length, a flipped
 * byte, plain text, an empty file, trailing bytes, an output over the
 * limit, an absent file. Without zlib (-DCORTIQ_ZLIB=OFF) each call must say
 * that the build has none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gz.h"
#include "format/file_read.h"
#include "testutil.h"

#ifdef CQ_HAVE_ZLIB
#include <zlib.h>
#endif

#define GOLDEN_TOK CQ_SOURCE_DIR "/tests/golden/zimage/pipeline/tokenizer/tokenizer.json.gz"


static void expect_fail(cq_status want, const char *path, size_t max, const char *sub) {
    uint8_t *out = (uint8_t *)"stale";
    size_t len = 77;
    cq_clear_error();
    cq_status s = cq_file_read_gz(path, max, &out, &len);
    if (s != want) fail_msg("%s: got %s (%s), want %s", path, cq_status_str(s), cq_last_error(), cq_status_str(want));
    assert_null(out);
    assert_int_equal(len, 0);
    if (sub && !strstr(cq_last_error(), sub)) fail_msg("%s: message '%s' lacks '%s'", path, cq_last_error(), sub);
}

static void test_path_is_gz(void **state) {
    (void)state;
    assert_true(cq_path_is_gz("tokenizer.json.gz"));
    assert_true(cq_path_is_gz("/a/b.gz"));
    assert_false(cq_path_is_gz(".gz"));
    assert_false(cq_path_is_gz("tokenizer.json"));
    assert_false(cq_path_is_gz("x.gzip"));
    assert_false(cq_path_is_gz(NULL));
}

#ifdef CQ_HAVE_ZLIB

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* `n` bytes of text-like data that compresses but not to nothing. */
static uint8_t *sample(size_t n) {
    uint8_t *p = malloc(n);
    assert_non_null(p);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)("abcdefgh {}\":,\n"[(x >> 16) % 15]);
    }
    return p;
}

/* gzip with zlib's deflate (level 9, gzip wrapper): *zn bytes, malloc'd. */
static uint8_t *gzip_bytes(const uint8_t *p, size_t n, size_t *zn) {
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    z.next_in = (Bytef *)p;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *zn = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void test_round_trip(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("gz");
    const size_t sizes[] = {0, 1, 1000, 300000};
    for (size_t k = 0; k < CQ_ARRAY_LEN(sizes); k++) {
        const size_t n = sizes[k];
        uint8_t *p = sample(n ? n : 1);
        size_t zn;
        uint8_t *z = gzip_bytes(p, n, &zn);
        char name[32];
        snprintf(name, sizeof name, "rt%zu.gz", k);
        const char *path = tu_path(dir, name);
        write_file(path, z, zn);
        uint8_t *out = NULL;
        size_t len = 1;
        assert_int_equal(cq_file_read_gz(path, 1 << 20, &out, &len), CQ_OK);
        assert_int_equal(len, n);
        if (n) assert_memory_equal(out, p, n);
        assert_int_equal(out[n], 0); /* NUL-terminated past the data */
        cq_free(out);
        /* from memory too */
        assert_int_equal(cq_gz_inflate(z, zn, 1 << 20, "mem", &out, &len), CQ_OK);
        assert_int_equal(len, n);
        if (n) assert_memory_equal(out, p, n);
        cq_free(out);
        /* exactly the limit is accepted, one byte less is not */
        if (n) {
            assert_int_equal(cq_file_read_gz(path, n, &out, &len), CQ_OK);
            assert_int_equal(len, n);
            cq_free(out);
            expect_fail(CQ_ERR_BOUNDS, path, n - 1, "inflates to more than the");
        }
        free(z);
        free(p);
    }
    /* two members one after the other, as `cat a.gz b.gz` makes: the concatenation */
    uint8_t *a = sample(5000), *b = sample(7000);
    size_t an, bn;
    uint8_t *za = gzip_bytes(a, 5000, &an), *zb = gzip_bytes(b, 7000, &bn);
    uint8_t *cat = malloc(an + bn);
    assert_non_null(cat);
    memcpy(cat, za, an);
    memcpy(cat + an, zb, bn);
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(cq_gz_inflate(cat, an + bn, 1 << 20, "two members", &out, &len), CQ_OK);
    assert_int_equal(len, 12000);
    assert_memory_equal(out, a, 5000);
    assert_memory_equal(out + 5000, b, 7000);
    cq_free(out);
    /* bytes after the data that are not another member */
    memcpy(cat + an, "garbage!", 8);
    cq_clear_error();
    assert_int_equal(cq_gz_inflate(cat, an + 8, 1 << 20, "trailing", &out, &len), CQ_ERR_PARSE);
    assert_null(out);
    assert_non_null(strstr(cq_last_error(), "trailing has 8 bytes after its gzip data that are not gzip"));
    free(cat);
    free(za);
    free(zb);
    free(a);
    free(b);
}

static void test_bad_files(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("gz_bad");
    const size_t n = 20000;
    uint8_t *p = sample(n);
    size_t zn;
    uint8_t *z = gzip_bytes(p, n, &zn);
    /* truncated at every length from the header to one byte short: never a short result */
    const char *cut = tu_path(dir, "cut.gz");
    for (size_t k = 0; k < zn; k += (k < 64 ? 1 : 97)) {
        write_file(cut, z, k);
        expect_fail(CQ_ERR_PARSE, cut, 1 << 20, k < 2 ? "is not gzip-compressed" : NULL);
    }
    write_file(cut, z, zn - 1); /* the length field's last byte missing */
    expect_fail(CQ_ERR_PARSE, cut, 1 << 20, "truncated");
    write_file(cut, z, zn / 2);
    expect_fail(CQ_ERR_PARSE, cut, 1 << 20, "is truncated (the gzip data ends after");
    /* a flipped byte in the CRC-32 of the trailer, and one in the compressed data */
    const char *flip = tu_path(dir, "flip.gz");
    z[zn - 6] ^= 0x40;
    write_file(flip, z, zn);
    expect_fail(CQ_ERR_PARSE, flip, 1 << 20, "damaged gzip data");
    z[zn - 6] ^= 0x40;
    z[zn / 2] ^= 0xff;
    write_file(flip, z, zn);
    expect_fail(CQ_ERR_PARSE, flip, 1 << 20, flip);
    /* plain text, an empty file, an absent one, a directory */
    const char *plain = tu_path(dir, "plain.json.gz");
    write_file(plain, "{\"model\": {}}", 13);
    expect_fail(CQ_ERR_PARSE, plain, 1 << 20, "plain.json.gz is not gzip-compressed (no gzip magic)");
    const char *empty = tu_path(dir, "empty.gz");
    write_file(empty, "", 0);
    expect_fail(CQ_ERR_PARSE, empty, 1 << 20, "is not gzip-compressed");
    expect_fail(CQ_ERR_MISSING, tu_path(dir, "absent.gz"), 1 << 20, "absent.gz");
    expect_fail(CQ_ERR_IO, dir, 1 << 20, "not a regular file");
    free(z);
    free(p);
}

/* The golden pipeline's tokenizer (what `cortiq convert` reads from the folder): its recorded size and a JSON
 * start. */
static void test_golden_tokenizer(void **state) {
    (void)state;
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(cq_file_read_gz(GOLDEN_TOK, 64u << 20, &out, &len), CQ_OK);
    assert_int_equal(len, 11422748);
    assert_int_equal(out[0], '{');
    assert_non_null(strstr((const char *)out, "\"model\""));
    cq_free(out);
}

#else /* no zlib */

static void test_without_zlib(void **state) {
    (void)state;
    assert_false(cq_gz_available());
    expect_fail(CQ_ERR_UNSUPPORTED, GOLDEN_TOK, 64u << 20, "this build has no zlib (configured with -DCORTIQ_ZLIB=OFF)");
    uint8_t *out;
    size_t len;
    cq_clear_error();
    assert_int_equal(cq_gz_inflate("\x1f\x8b", 2, 100, "mem", &out, &len), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "mem is gzip-compressed and this build has no zlib"));
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_is_gz),
#ifdef CQ_HAVE_ZLIB
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_golden_tokenizer),
#else
        cmocka_unit_test(test_without_zlib),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
