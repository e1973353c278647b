/* test_cmf_writer.c — the streaming writer's promises: nothing appears under
 * the final name unless the file was finished, re-opened and verified; a
 * writer freed early or failing leaves no temporary file; bad arguments are
 * refused with the right status before anything is written; chunked and
 * whole-payload tensors give identical bytes; every allocation failure in
 * write and open ends in CQ_ERR_NOMEM with nothing leaked. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "cmf_testfile.h"
#include "codec/codec.h"
#include "format/cmf.h"
#include "testutil.h"

/* Number of directory entries other than . and .. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static const uint64_t k_shape[2] = {4, 8};

static cq_status write_simple(const char *path, int chunked) {
    cq_cmf_writer *w = NULL;
    CQ_TRY(cq_cmf_writer_create(path, &w));
    float v[32];
    for (int i = 0; i < 32; i++) v[i] = (float)i * 0.5f - 3.0f;
    uint8_t q[4 * 8 + 8];
    cq_status s = cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header));
    if (s == CQ_OK) s = cq_cmf_writer_set_tokenizer(w, "{}", 2);
    if (s == CQ_OK) s = cq_codec_quantize(CQ_DTYPE_Q8_ROW, 2, k_shape, v, q, sizeof q);
    if (s == CQ_OK && !chunked) s = cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 2, k_shape, v, sizeof v);
    if (s == CQ_OK && chunked) {
        s = cq_cmf_writer_begin(w, "a", CQ_DTYPE_F32, 2, k_shape, sizeof v);
        for (size_t at = 0; s == CQ_OK && at < sizeof v; at += 24)
            s = cq_cmf_writer_write(w, (uint8_t *)v + at, CQ_MIN(24, sizeof v - at));
        if (s == CQ_OK) s = cq_cmf_writer_end(w);
    }
    if (s == CQ_OK) s = cq_cmf_writer_add(w, "b", CQ_DTYPE_Q8_ROW, 2, k_shape, q, sizeof q);
    if (s == CQ_OK) s = cq_cmf_writer_finish(w);
    cq_cmf_writer_free(w);
    return s;
}

static void test_chunked_equals_whole_and_deterministic(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_det");
    char p1[1200], p2[1200], p3[1200];
    snprintf(p1, sizeof p1, "%s", tu_path(dir, "1.cmf"));
    snprintf(p2, sizeof p2, "%s", tu_path(dir, "2.cmf"));
    snprintf(p3, sizeof p3, "%s", tu_path(dir, "3.cmf"));
    assert_int_equal(write_simple(p1, 0), CQ_OK);
    assert_int_equal(write_simple(p2, 1), CQ_OK);
    assert_int_equal(write_simple(p3, 0), CQ_OK);
    size_t n1, n2, n3;
    uint8_t *a = tu_read_file(p1, &n1), *b = tu_read_file(p2, &n2), *c = tu_read_file(p3, &n3);
    assert_int_equal(n1, n2);
    assert_int_equal(n1, n3);
    assert_memory_equal(a, b, n1);
    assert_memory_equal(a, c, n1);
    free(a), free(b), free(c);
    assert_int_equal(count_entries(dir), 3); /* no temporary files left */
}

static void test_free_before_finish_leaves_nothing(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_abandon");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_true(exists(cq_cmf_writer_temp_path(w))); /* data goes to the temp name ... */
    assert_false(exists(path));                      /* ... never to the final one */
    float v[32] = {0};
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_OK);
    assert_int_equal(cq_cmf_writer_begin(w, "b", CQ_DTYPE_F32, 2, k_shape, sizeof v), CQ_OK);
    assert_int_equal(cq_cmf_writer_write(w, v, 16), CQ_OK); /* interrupted mid-tensor */
    cq_cmf_writer_free(w);
    assert_false(exists(path));
    assert_int_equal(count_entries(dir), 0);
    cq_cmf_writer_free(NULL);
}

/* A failed finish (the payload of a variable-size codec does not validate
 * when the file is read back) keeps an existing file untouched. */
static void test_failed_finish_keeps_old_file(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_fail");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    assert_int_equal(tu_write_file(path, "old", 3), 0);
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);
    uint8_t junk[64];
    memset(junk, 7, sizeof junk); /* vbit widths of 7 are invalid */
    uint64_t shp[2] = {2, 32};
    assert_int_equal(cq_cmf_writer_add(w, "v", CQ_DTYPE_VBIT, 2, shp, junk, sizeof junk) != CQ_OK, 1);
    assert_non_null(strstr(cq_last_error(), "tensor 'v'"));
    /* streamed, the same bytes are only caught at the read-back */
    assert_int_equal(cq_cmf_writer_begin(w, "v", CQ_DTYPE_VBIT, 2, shp, sizeof junk), CQ_OK);
    assert_int_equal(cq_cmf_writer_write(w, junk, sizeof junk), CQ_OK);
    assert_int_equal(cq_cmf_writer_end(w), CQ_OK);
    cq_status s = cq_cmf_writer_finish(w);
    assert_int_not_equal(s, CQ_OK);
    assert_non_null(strstr(cq_last_error(), "did not read back"));
    assert_non_null(strstr(cq_last_error(), "tensor 'v'"));
    assert_int_equal(cq_cmf_writer_finish(w), CQ_ERR_INVALID_ARG); /* poisoned */
    cq_cmf_writer_free(w);
    size_t n;
    uint8_t *old = tu_read_file(path, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(old, "old", 3);
    free(old);
    assert_int_equal(count_entries(dir), 1);
}

static void test_argument_checks(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_args");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(tu_path(dir, "no/such/dir/x.cmf"), &w), CQ_ERR_IO);
    assert_null(w);
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    float v[32] = {0};
    /* finish without a header: refused, the writer stays usable */
    assert_int_equal(cq_cmf_writer_finish(w), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_cmf_writer_set_header(w, "{\"version\":2}", 13), CQ_ERR_PARSE);
    assert_int_equal(cq_cmf_writer_set_header(w, "{\"version\":", 11), CQ_ERR_PARSE);
    const char *null_skills = "{\"version\":2,\"quant_type\":\"F32\",\"skills\":null}";
    assert_int_equal(cq_cmf_writer_set_header(w, null_skills, strlen(null_skills)), CQ_ERR_PARSE);
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);

    char *long_name = malloc(70000);
    memset(long_name, 'n', 65536);
    long_name[65536] = 0;
    assert_int_equal(cq_cmf_writer_add(w, long_name, CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "65535"));
    long_name[65535] = 0; /* exactly the limit is fine */
    assert_int_equal(cq_cmf_writer_add(w, long_name, CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_OK);
    free(long_name);
    assert_int_equal(cq_cmf_writer_add(w, "bad\xC3", CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_cmf_writer_add(w, "a", (cq_dtype)99, 2, k_shape, v, sizeof v), CQ_ERR_DTYPE);
    uint64_t seven[7] = {1, 1, 1, 1, 1, 1, 32};
    assert_int_equal(cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 7, seven, v, sizeof v), CQ_ERR_INVALID_ARG);
    uint64_t huge[2] = {1ull << 32, 1};
    assert_int_equal(cq_cmf_writer_begin(w, "a", CQ_DTYPE_U8, 2, huge, 4), CQ_ERR_SHAPE);
    assert_non_null(strstr(cq_last_error(), "u32"));
    assert_int_equal(cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 2, k_shape, v, 100), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "needs 128"));
    assert_int_equal(cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "a", CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "duplicate tensor name 'a'"));
    /* begin/write/end protocol */
    assert_int_equal(cq_cmf_writer_write(w, v, 4), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_cmf_writer_end(w), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_cmf_writer_begin(w, "c", CQ_DTYPE_F32, 2, k_shape, sizeof v), CQ_OK);
    assert_int_equal(cq_cmf_writer_begin(w, "d", CQ_DTYPE_F32, 2, k_shape, sizeof v), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_cmf_writer_write(w, v, 100), CQ_OK);
    assert_int_equal(cq_cmf_writer_write(w, v, 29), CQ_ERR_INVALID_ARG); /* past the declared 128 */
    assert_int_equal(cq_cmf_writer_end(w), CQ_ERR_INVALID_ARG);          /* 100 of 128 */
    assert_int_equal(cq_cmf_writer_finish(w), CQ_ERR_INVALID_ARG);       /* tensor still open */
    assert_int_equal(cq_cmf_writer_write(w, v, 28), CQ_OK);
    assert_int_equal(cq_cmf_writer_end(w), CQ_OK);
    /* disk space */
    assert_int_equal(cq_cmf_writer_check_space(w, UINT64_MAX / 2), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "disk space"));
    assert_int_equal(cq_cmf_writer_check_space(w, 4096), CQ_OK);
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "e", CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_ERR_INVALID_ARG);
    cq_cmf_writer_free(w);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open(path, &c), CQ_OK);
    assert_int_equal(cq_cmf_tensor_count(c), 3);
    cq_cmf_close(c);
    assert_int_equal(count_entries(dir), 1);
    /* Opening what is not there / not a file. */
    assert_int_equal(cq_cmf_open(tu_path(dir, "missing.cmf"), &c), CQ_ERR_MISSING);
    assert_int_equal(cq_cmf_open(dir, &c), CQ_ERR_IO);
    assert_null(c);
}

/* Finishing replaces an existing file only after verification. */
static void test_replaces_existing_file(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_replace");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    assert_int_equal(tu_write_file(path, "old", 3), 0);
    assert_int_equal(write_simple(path, 0), CQ_OK);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open(path, &c), CQ_OK);
    assert_int_equal(cq_cmf_verify(c, NULL, NULL, NULL), CQ_OK);
    cq_cmf_close(c);
}

/* ---- fault injection ---- */
static void test_alloc_failures_in_write(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfw_oom");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    int failures = 0;
    for (long n = 1;; n++) {
        unlink(path);
        cq_alloc_fail_at(n);
        cq_status s = write_simple(path, n % 2);
        long used = cq_alloc_fail_at(0);
        if (s == CQ_OK) {
            assert_true(used < n); /* the failure point was never reached */
            break;
        }
        if (s != CQ_ERR_NOMEM) fprintf(stderr, "n=%ld: %s %s\n", n, cq_status_str(s), cq_last_error());
        assert_int_equal(s, CQ_ERR_NOMEM);
        assert_false(exists(path));
        assert_int_equal(count_entries(dir), 0); /* no temp file either */
        failures++;
        assert_true(n < 10000);
    }
    assert_true(failures > 10);
    assert_int_equal(count_entries(dir), 1);
}

static void test_alloc_failures_in_open(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmfo_oom");
    char path[1200];
    snprintf(path, sizeof path, "%s", tu_path(dir, "x.cmf"));
    /* a file with every section: masks via the raw setter */
    static const uint8_t masks[] = {
        1, 0, 0, 0, 0, 0, 0, 0, /* n, meta_len patched below */
    };
    char meta[256];
    int ml = snprintf(meta, sizeof meta,
                      "{\"default_task\":\"t\",\"masks\":[{\"task_id\":0,\"name\":\"t\",\"sparsity\":0,"
                      "\"priority\":\"Primary\",\"blob_off\":%d,\"blob_len\":7}]}",
                      0);
    uint8_t sec[512] = {0};
    memcpy(sec, masks, 8);
    int off = (8 + ml + 7) / 8 * 8;
    ml = snprintf(meta, sizeof meta,
                  "{\"default_task\":\"t\",\"masks\":[{\"task_id\":0,\"name\":\"t\",\"sparsity\":0,"
                  "\"priority\":\"Primary\",\"blob_off\":%d,\"blob_len\":7}]}",
                  off);
    assert_int_equal((8 + ml + 7) / 8 * 8, off);
    tf_put32(sec + 4, (uint32_t)ml);
    memcpy(sec + 8, meta, (size_t)ml);
    memset(sec + off, 0xFF, 7);
    uint8_t index[8 + 16 + 4] = {1, 0, 0, 0};
    tf_put32(index + 8 + 8, 1);
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    const char *hdr = "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
                      "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,"
                      "\"head_dim\":4,\"vocab_size\":32,\"max_position_embeddings\":64,"
                      "\"layer_types\":[\"FullAttention\",\"FullAttention\"],\"rms_norm_eps\":1e-6},"
                      "\"skills\":[{\"id\":\"a\"},{\"id\":\"b\"}],\"tokenizer_config\":{\"chat_template\":\"x\"}}";
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, strlen(hdr)), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_masks(w, sec, (size_t)off + 7, index, sizeof index), CQ_OK);
    float v[32] = {1};
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "t%d", i);
        assert_int_equal(cq_cmf_writer_add(w, name, CQ_DTYPE_F32, 2, k_shape, v, sizeof v), CQ_OK);
    }
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    int failures = 0;
    for (long n = 1;; n++) {
        cq_cmf *c = NULL;
        cq_alloc_fail_at(n);
        cq_status s = n % 2 ? cq_cmf_open(path, &c) : cq_cmf_open_memory(bytes, len, &c);
        long used = cq_alloc_fail_at(0);
        if (s == CQ_OK) {
            assert_true(used < n);
            assert_int_equal(cq_cmf_mask_count(c), 1);
            assert_int_equal(cq_cmf_index_count(c), 1);
            assert_int_equal(cq_cmf_skill_count(c), 2);
            cq_cmf_close(c);
            break;
        }
        if (s != CQ_ERR_NOMEM) fprintf(stderr, "n=%ld: %s %s\n", n, cq_status_str(s), cq_last_error());
        assert_int_equal(s, CQ_ERR_NOMEM);
        assert_null(c);
        failures++;
        assert_true(n < 100000);
    }
    assert_true(failures > 10);
    free(bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_equals_whole_and_deterministic),
        cmocka_unit_test(test_free_before_finish_leaves_nothing),
        cmocka_unit_test(test_failed_finish_keeps_old_file),
        cmocka_unit_test(test_argument_checks),
        cmocka_unit_test(test_replaces_existing_file),
        cmocka_unit_test(test_alloc_failures_in_write),
        cmocka_unit_test(test_alloc_failures_in_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
