/* test_safetensors.c — the safetensors reader and writer: round trips of every
 * dtype, exact element conversion (f16/bf16/f8 corner values, integer
 * exactness), one hand-made corrupt file per defect class with its exact
 * status, sharded checkpoints with their index, folder resolution, and clean
 * failure under allocation faults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/safetensors.h"
#include "testutil.h"

/* A file image from a header JSON and `data_len` bytes of data (value i&0xff). */
static uint8_t *mk(const char *json, size_t data_len, size_t *len) {
    size_t hl = strlen(json);
    *len = 8 + hl + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (uint8_t)i;
    return b;
}

/* Open a hand-made image; return the status (and close on success). */
static cq_status try_open(const char *json, size_t data_len) {
    size_t len;
    uint8_t *b = mk(json, data_len, &len);
    cq_st *st = NULL;
    cq_status s = cq_st_open_memory(b, len, "case", &st);
    if (s == CQ_OK) assert_non_null(st);
    else assert_null(st);
    cq_st_close(st);
    free(b);
    return s;
}

static void expect(const char *json, size_t data_len, cq_status want, const char *msg_part) {
    cq_status s = try_open(json, data_len);
    if (s != want || (msg_part && !strstr(cq_last_error(), msg_part)))
        fail_msg("case %s: got %s (%s), want %s mentioning '%s'", json, cq_status_str(s), cq_last_error(),
                 cq_status_str(want), msg_part ? msg_part : "");
}

static void test_roundtrip_all_dtypes(void **state) {
    (void)state;
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    float f[6] = {1.5f, -2.25f, 0.0f, 65504.0f, 1e-8f, -3.0f};
    uint64_t s23[2] = {2, 3};
    assert_int_equal(cq_st_writer_add_f32(w, "a.weight", 2, s23, f), CQ_OK);
    /* f16: 1.0, -2.0, smallest subnormal, largest normal */
    uint8_t h[8] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xFF, 0x7B};
    uint64_t s4 = 4;
    assert_int_equal(cq_st_writer_add(w, "b.f16", CQ_ST_F16, 1, &s4, h, 8), CQ_OK);
    uint8_t bf[4] = {0x80, 0x3F, 0xC0, 0xC0}; /* 1.0, -6.0 */
    uint64_t s2 = 2;
    assert_int_equal(cq_st_writer_add(w, "c.bf16", CQ_ST_BF16, 1, &s2, bf, 4), CQ_OK);
    int32_t iv[3] = {-7, 0, 1 << 24};
    uint64_t s3 = 3;
    assert_int_equal(cq_st_writer_add(w, "img_shapes", CQ_ST_I32, 1, &s3, iv, 12), CQ_OK);
    uint8_t u8[3] = {0, 1, 255};
    assert_int_equal(cq_st_writer_add(w, "mask", CQ_ST_U8, 1, &s3, u8, 3), CQ_OK);
    uint8_t e4[5] = {0x38, 0xB8, 0x7E, 0x01, 0x7F}; /* 1, -1, 448, 2^-9, NaN */
    uint64_t s5 = 5;
    assert_int_equal(cq_st_writer_add(w, "f8", CQ_ST_F8_E4M3, 1, &s5, e4, 5), CQ_OK);
    uint8_t e5[2] = {0x3C, 0x7C}; /* 1.0, +inf */
    assert_int_equal(cq_st_writer_add(w, "f8b", CQ_ST_F8_E5M2, 1, &s2, e5, 2), CQ_OK);
    float scalar = 42.0f;
    assert_int_equal(cq_st_writer_add_f32(w, "scalar", 0, NULL, &scalar), CQ_OK);
    uint64_t s0[2] = {0, 5};
    assert_int_equal(cq_st_writer_add(w, "empty", CQ_ST_F32, 2, s0, NULL, 0), CQ_OK);
    assert_int_equal(cq_st_writer_set_metadata(w, "format", "pt"), CQ_OK);
    assert_int_equal(cq_st_writer_set_metadata(w, "note", "say \"hi\"\n"), CQ_OK);
    /* rejects duplicates and size mismatches */
    assert_int_equal(cq_st_writer_add_f32(w, "a.weight", 2, s23, f), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_st_writer_add(w, "bad", CQ_ST_F16, 1, &s4, h, 6), CQ_ERR_SHAPE);

    uint8_t *buf;
    size_t len;
    assert_int_equal(cq_st_writer_to_memory(w, &buf, &len), CQ_OK);
    assert_int_equal(buf[0] % 8, 0); /* header length: data starts 8-aligned */
    const char *dir = tu_tmpdir("st_rt");
    const char *path = tu_path(dir, "x.safetensors");
    assert_int_equal(cq_st_writer_save(w, path), CQ_OK);
    cq_st_writer_free(w);
    size_t flen;
    uint8_t *fbuf = tu_read_file(path, &flen);
    assert_int_equal(flen, len);
    assert_memory_equal(fbuf, buf, len);
    free(fbuf);

    for (int pass = 0; pass < 2; pass++) {
        cq_st *st;
        if (pass == 0)
            assert_int_equal(cq_st_open_memory(buf, len, NULL, &st), CQ_OK);
        else
            assert_int_equal(cq_st_open(path, &st), CQ_OK);
        assert_int_equal(cq_st_count(st), 9);
        assert_string_equal(cq_st_metadata_get(st, "format"), "pt");
        assert_string_equal(cq_st_metadata_get(st, "note"), "say \"hi\"\n");
        assert_null(cq_st_metadata_get(st, "nope"));
        assert_null(cq_st_find(st, "nope"));
        const cq_st_tensor *t = cq_st_find(st, "a.weight");
        assert_non_null(t);
        assert_int_equal(t->dtype, CQ_ST_F32);
        assert_int_equal(t->ndim, 2);
        assert_int_equal(t->shape[0], 2);
        assert_int_equal(t->shape[1], 3);
        float out[6];
        assert_int_equal(cq_st_read_f32(t, 0, 6, out), CQ_OK);
        assert_memory_equal(out, f, sizeof f);
        assert_int_equal(cq_st_read_f32(t, 2, 2, out), CQ_OK);
        assert_true(out[0] == 0.0f && out[1] == 65504.0f);
        assert_int_equal(cq_st_read_f32(t, 5, 2, out), CQ_ERR_BOUNDS);

        t = cq_st_find(st, "b.f16");
        assert_int_equal(cq_st_read_f32(t, 0, 4, out), CQ_OK);
        assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == ldexpf(1.0f, -24) && out[3] == 65504.0f);
        t = cq_st_find(st, "c.bf16");
        assert_int_equal(cq_st_read_f32(t, 0, 2, out), CQ_OK);
        assert_true(out[0] == 1.0f && out[1] == -6.0f);
        t = cq_st_find(st, "img_shapes");
        assert_int_equal(t->dtype, CQ_ST_I32);
        assert_int_equal(cq_st_read_f32(t, 0, 3, out), CQ_OK);
        assert_true(out[0] == -7.0f && out[1] == 0.0f && out[2] == 16777216.0f);
        t = cq_st_find(st, "mask");
        assert_memory_equal(t->data, u8, 3);
        t = cq_st_find(st, "f8");
        assert_int_equal(cq_st_read_f32(t, 0, 5, out), CQ_OK);
        assert_true(out[0] == 1.0f && out[1] == -1.0f && out[2] == 448.0f && out[3] == ldexpf(1.0f, -9));
        assert_true(isnan(out[4]));
        t = cq_st_find(st, "f8b");
        assert_int_equal(cq_st_read_f32(t, 0, 2, out), CQ_OK);
        assert_true(out[0] == 1.0f && isinf(out[1]));
        t = cq_st_find(st, "scalar");
        assert_int_equal(t->ndim, 0);
        assert_int_equal(t->nelem, 1);
        assert_int_equal(cq_st_read_f32(t, 0, 1, out), CQ_OK);
        assert_true(out[0] == 42.0f);
        t = cq_st_find(st, "empty");
        assert_int_equal(t->nelem, 0);
        assert_int_equal(t->nbytes, 0);
        /* data-offset order within the file: insertion order here */
        assert_string_equal(cq_st_at(st, 0)->name, "a.weight");
        assert_int_equal(cq_st_total_bytes(st), 24 + 8 + 4 + 12 + 3 + 5 + 2 + 4);
        cq_st_release(st, cq_st_find(st, "a.weight"));
        cq_st_close(st);
    }
    cq_free(buf);
}

static void test_integer_exactness(void **state) {
    (void)state;
    int64_t v[3] = {1 << 30, -(1ll << 40), (1 << 24) + 1};
    uint64_t s3 = 3;
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    assert_int_equal(cq_st_writer_add(w, "ids", CQ_ST_I64, 1, &s3, v, 24), CQ_OK);
    uint8_t *buf;
    size_t len;
    assert_int_equal(cq_st_writer_to_memory(w, &buf, &len), CQ_OK);
    cq_st_writer_free(w);
    cq_st *st;
    assert_int_equal(cq_st_open_memory(buf, len, NULL, &st), CQ_OK);
    float out[3];
    const cq_st_tensor *t = cq_st_find(st, "ids");
    assert_int_equal(cq_st_read_f32(t, 0, 2, out), CQ_OK);
    assert_true(out[0] == 1073741824.0f && out[1] == -1099511627776.0f);
    assert_int_equal(cq_st_read_f32(t, 0, 3, out), CQ_ERR_NUMERIC);
    assert_non_null(strstr(cq_last_error(), "'ids'"));
    cq_st_close(st);
    cq_free(buf);
}

static void test_corrupt_files(void **state) {
    (void)state;
    cq_st *st = NULL;
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    assert_int_equal(cq_st_open_memory(tiny, sizeof tiny, "t", &st), CQ_ERR_BOUNDS);
    assert_null(st);
    /* a header length of 2^60 */
    uint8_t huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x10, '{', '}'};
    assert_int_equal(cq_st_open_memory(huge, sizeof huge, "t", &st), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "1152921504606846976"));
    /* header length just past EOF */
    size_t len;
    uint8_t *b = mk("{}", 0, &len);
    b[0] = 3;
    assert_int_equal(cq_st_open_memory(b, len, "t", &st), CQ_ERR_BOUNDS);
    free(b);

    expect("{}", 0, CQ_OK, NULL);
    expect("{}  ", 0, CQ_OK, NULL);
    expect("[1,2]", 0, CQ_ERR_PARSE, "not an object");
    expect("{\"a\":", 0, CQ_ERR_PARSE, "JSON");
    expect("{}xx", 0, CQ_ERR_PARSE, "trailing");
    expect("", 0, CQ_ERR_PARSE, "empty");
    expect("{\"w\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, CQ_ERR_DTYPE, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, CQ_ERR_PARSE, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, CQ_ERR_PARSE, "shape");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":\"1\",\"data_offsets\":[0,4]}}", 4, CQ_ERR_PARSE, "shape");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, CQ_ERR_BOUNDS, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, CQ_ERR_BOUNDS, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 4, CQ_ERR_PARSE, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, CQ_ERR_PARSE, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, CQ_ERR_PARSE, "data_offsets");
    expect("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, CQ_ERR_PARSE, "dtype");
    expect("{\"w\":[1]}", 4, CQ_ERR_PARSE, "'w'");
    /* dtype/shape vs byte span */
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16, CQ_ERR_SHAPE, "'w'");
    expect("{\"w\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, CQ_ERR_SHAPE, "'w'");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
           CQ_ERR_BOUNDS, "overflow");
    expect("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, CQ_ERR_SHAPE, "'w'");
    /* overlapping tensors, adjacent ones fine, zero-size ones never overlap */
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, CQ_ERR_BOUNDS, "overlap");
    expect("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
           16, CQ_OK, NULL);
    expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, CQ_ERR_PARSE, "duplicate tensor name 'a'");
    expect("{\"__metadata__\":{\"k\":1}}", 0, CQ_ERR_PARSE, "__metadata__");
    expect("{\"__metadata__\":[]}", 0, CQ_ERR_PARSE, "__metadata__");
    /* a second __metadata__ (found by the fuzzer: it wrote past the first one's table) */
    expect("{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
           "\"__metadata__\":{\"format\":\"pt\"}}",
           4, CQ_ERR_PARSE, "duplicate __metadata__");
    expect("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, CQ_ERR_PARSE, "UTF-8");
}

/* Data-offset order: tensors come back sorted by their position in the file. */
static void test_offset_order(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = mk("{\"late\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},"
                    "\"early\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                    8, &len);
    cq_st *st;
    assert_int_equal(cq_st_open_memory(b, len, NULL, &st), CQ_OK);
    assert_string_equal(cq_st_at(st, 0)->name, "early");
    assert_string_equal(cq_st_at(st, 1)->name, "late");
    assert_int_equal(cq_st_at(st, 1)->data[0], 4);
    cq_st_close(st);
    free(b);
}

static void save_one(const char *dir, const char *leaf, const char *name, float v) {
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    uint64_t s = 2;
    float d[2] = {v, -v};
    assert_int_equal(cq_st_writer_add_f32(w, name, 1, &s, d), CQ_OK);
    assert_int_equal(cq_st_writer_save(w, tu_path(dir, leaf)), CQ_OK);
    cq_st_writer_free(w);
}

static void write_text(const char *dir, const char *leaf, const char *text) {
    assert_int_equal(tu_write_file(tu_path(dir, leaf), text, strlen(text)), 0);
}

static void test_sharded(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("st_shard"));
    save_one(dir, "m-00001-of-00002.safetensors", "x", 1.0f);
    save_one(dir, "m-00002-of-00002.safetensors", "y", 2.0f);
    const char *idx = "m.safetensors.index.json";
    write_text(dir, idx,
               "{\"metadata\":{\"total_size\":16},\"weight_map\":{\"y\":\"m-00002-of-00002.safetensors\","
               "\"x\":\"m-00001-of-00002.safetensors\"}}");
    for (int pass = 0; pass < 2; pass++) {
        cq_st *st;
        assert_int_equal(cq_st_open(pass ? tu_path(dir, idx) : dir, &st), CQ_OK);
        assert_int_equal(cq_st_file_count(st), 2);
        assert_int_equal(cq_st_count(st), 2);
        assert_string_equal(cq_st_at(st, 0)->name, "x"); /* shard order */
        const cq_st_tensor *t = cq_st_find(st, "y");
        assert_int_equal(t->file_index, 1);
        assert_non_null(strstr(cq_st_file_path(st, 1), "m-00002-of-00002"));
        float out[2];
        assert_int_equal(cq_st_read_f32(t, 0, 2, out), CQ_OK);
        assert_true(out[0] == 2.0f && out[1] == -2.0f);
        cq_st_close(st);
    }
    cq_st *st = NULL;
    /* listed in the wrong shard */
    write_text(dir, idx, "{\"weight_map\":{\"y\":\"m-00001-of-00002.safetensors\",\"x\":\"m-00002-of-00002.safetensors\"}}");
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "is listed in"));
    /* listed but absent */
    write_text(dir, idx,
               "{\"weight_map\":{\"x\":\"m-00001-of-00002.safetensors\",\"y\":\"m-00002-of-00002.safetensors\","
               "\"z\":\"m-00002-of-00002.safetensors\"}}");
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_MISSING);
    assert_non_null(strstr(cq_last_error(), "'z'"));
    /* held by a shard but not listed */
    save_one(dir, "m-00002-of-00002.safetensors", "y", 2.0f);
    write_text(dir, idx, "{\"weight_map\":{\"x\":\"m-00001-of-00002.safetensors\"}}");
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    uint64_t s = 1;
    float v = 1;
    assert_int_equal(cq_st_writer_add_f32(w, "x", 1, &s, &v), CQ_OK);
    assert_int_equal(cq_st_writer_add_f32(w, "stray", 1, &s, &v), CQ_OK);
    assert_int_equal(cq_st_writer_save(w, tu_path(dir, "m-00001-of-00002.safetensors")), CQ_OK);
    cq_st_writer_free(w);
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "'stray'"));
    /* shard names must be plain file names */
    write_text(dir, idx, "{\"weight_map\":{\"x\":\"../m-00001-of-00002.safetensors\"}}");
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_PARSE);
    write_text(dir, idx, "{\"weight_map\":[]}");
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_PARSE);
    write_text(dir, idx, "{\"weight_map\":{\"x\":\"missing.safetensors\"}}");
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_MISSING);
    assert_null(st);
}

static void test_folders(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("st_dirs"));
    cq_st *st = NULL;
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_MISSING);
    save_one(dir, "model.safetensors", "a", 1.0f);
    save_one(dir, "model.fp16.safetensors", "a", 1.0f); /* a variant with the same names */
    assert_int_equal(cq_st_open(dir, &st), CQ_OK);      /* picks model.safetensors */
    assert_int_equal(cq_st_file_count(st), 1);
    cq_st_close(st);
    /* two unrelated files without an index: both are read, names must not clash */
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("st_dirs2"));
    save_one(dir, "part1.safetensors", "a", 1.0f);
    save_one(dir, "part2.safetensors", "b", 1.0f);
    assert_int_equal(cq_st_open(dir, &st), CQ_OK);
    assert_int_equal(cq_st_count(st), 2);
    cq_st_close(st);
    save_one(dir, "part2.safetensors", "a", 1.0f);
    assert_int_equal(cq_st_open(dir, &st), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "'a' appears in both"));
    assert_int_equal(cq_st_open(tu_path(dir, "nope.safetensors"), &st), CQ_ERR_MISSING);
}

/* Every allocation of an open may fail: a clean error, never a crash or leak. */
static void test_alloc_faults(void **state) {
    (void)state;
    size_t len;
    uint8_t *b = mk("{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                    8, &len);
    int failures = 0;
    for (long k = 1; k < 200; k++) {
        cq_alloc_fail_at(k);
        cq_st *st = NULL;
        cq_status s = cq_st_open_memory(b, len, NULL, &st);
        cq_alloc_fail_at(0);
        if (s == CQ_OK) {
            assert_int_equal(cq_st_count(st), 2);
            cq_st_close(st);
            break;
        }
        assert_int_equal(s, CQ_ERR_NOMEM);
        assert_null(st);
        failures++;
    }
    assert_true(failures >= 5);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_dtypes), cmocka_unit_test(test_integer_exactness),
        cmocka_unit_test(test_corrupt_files),       cmocka_unit_test(test_offset_order),
        cmocka_unit_test(test_sharded),             cmocka_unit_test(test_folders),
        cmocka_unit_test(test_alloc_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
