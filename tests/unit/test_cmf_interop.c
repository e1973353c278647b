/* test_cmf_interop.c — files written by the format's public Python writer
 * (converter/convert_dtgma_to_cmf.py on tests/make_tiny_model.py, see
 * tests/fixtures/pywriter/README.md) must open, verify and dequantize in
 * cortiq.c exactly as the public Python reader (python/cmf_reader.py)
 * decodes them. expected.tsv holds what that reader produced: per file the
 * tensor count, mask names and tokenizer hash; per tensor the dtype, shape
 * and the hash64 of its dequantized values as little-endian f32 bytes (so a
 * single differing bit fails), their sum and the first and last value. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "codec/codec.h"
#include "format/cmf.h"
#include "testutil.h"

#define FIXDIR CQ_SOURCE_DIR "/tests/fixtures/pywriter"

static char *next_field(char **s) {
    char *f = *s, *tab = strchr(f, '\t');
    if (tab) {
        *tab = 0;
        *s = tab + 1;
    } else {
        *s = f + strlen(f);
    }
    return f;
}

static void check_tensor(const cq_cmf *c, char *line, int *tensors_checked) {
    char *s = line;
    next_field(&s); /* "T" */
    const char *name = next_field(&s), *dtype = next_field(&s);
    char *shape = next_field(&s);
    unsigned long long nelem = strtoull(next_field(&s), NULL, 10);
    unsigned long long want_hash = strtoull(next_field(&s), NULL, 16);
    double want_sum = strtod(next_field(&s), NULL);
    float want_first = strtof(next_field(&s), NULL), want_last = strtof(next_field(&s), NULL);

    const cq_tensor_view *t = cq_cmf_find(c, name);
    if (!t) fprintf(stderr, "missing tensor %s\n", name);
    assert_non_null(t);
    assert_string_equal(cq_dtype_name(t->dtype), dtype);
    int d = 0;
    for (char *tok = strtok(shape, ","); tok; tok = strtok(NULL, ","), d++)
        assert_int_equal(t->shape[d], strtoull(tok, NULL, 10));
    assert_int_equal(t->ndim, d);
    assert_int_equal(t->nelem, nelem);
    float *v = malloc(nelem * sizeof(float));
    uint8_t *le = malloc(nelem * 4);
    assert_int_equal(cq_cmf_dequantize(t, v, nelem), CQ_OK);
    double sum = 0;
    for (size_t i = 0; i < nelem; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        cq_wr32(le + 4 * i, u);
        sum += v[i];
    }
    uint64_t h = cq_hash64(le, nelem * 4);
    if (h != want_hash) fprintf(stderr, "%s: dequantized values differ from the Python reader's\n", name);
    assert_true(h == want_hash);
    assert_true(v[0] == want_first);
    assert_true(v[nelem - 1] == want_last);
    assert_true(fabs(sum - want_sum) <= 1e-6 * (fabs(want_sum) + 1.0));
    free(v);
    free(le);
    (*tensors_checked)++;
}

static void test_python_written_files(void **st) {
    (void)st;
    size_t len;
    char *tsv = (char *)tu_read_file(FIXDIR "/expected.tsv", &len);
    assert_non_null(tsv);
    tsv = realloc(tsv, len + 1);
    tsv[len] = 0;
    cq_cmf *c = NULL;
    int files = 0, tensors = 0, expected_tensors = 0, shard_tensors = 0;
    for (char *line = strtok(tsv, "\n"), *save = NULL; line; line = strtok(save, "\n")) {
        save = line + strlen(line) + 1;
        if (save > tsv + len) save = tsv + len;
        if (line[0] == 'T') {
            check_tensor(c, line, &tensors);
            continue;
        }
        assert_int_equal(line[0], 'F');
        if (c) {
            assert_int_equal(tensors, expected_tensors);
            cq_cmf_close(c);
        }
        char *s = line;
        next_field(&s);
        char path[1024];
        snprintf(path, sizeof path, FIXDIR "/%s", next_field(&s));
        expected_tensors = atoi(next_field(&s));
        char *masks = next_field(&s);
        size_t vocab_len = (size_t)strtoull(next_field(&s), NULL, 10);
        unsigned long long vocab_hash = strtoull(next_field(&s), NULL, 16);
        cq_status st2 = cq_cmf_open(path, &c);
        if (st2 != CQ_OK) fprintf(stderr, "%s\n", cq_last_error());
        assert_int_equal(st2, CQ_OK);
        size_t problems = 1;
        assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_OK);
        assert_int_equal(problems, 0);
        assert_int_equal(cq_cmf_tensor_count(c), (size_t)expected_tensors);
        if (strcmp(masks, "-") == 0) {
            assert_int_equal(cq_cmf_mask_count(c), 0);
        } else {
            size_t i = 0;
            for (char *m = strtok(masks, ","); m; m = strtok(NULL, ","), i++)
                assert_string_equal(cq_cmf_mask_at(c, i)->name, m);
            assert_int_equal(cq_cmf_mask_count(c), i);
            assert_string_equal(cq_cmf_mask_default_task(c), "general");
            assert_true(cq_cmf_index_count(c) > 0);
        }
        size_t tl = 0;
        const uint8_t *tok = cq_cmf_tokenizer_json(c, &tl);
        assert_int_equal(tl, vocab_len);
        if (tl) assert_true(cq_hash64(tok, tl) == vocab_hash);
        assert_string_equal(cJSON_GetObjectItem(cq_cmf_arch(c), "arch_name")->valuestring, "tiny-qwen");
        uint64_t no = 0, count = 0;
        if (strstr(path, "-of-")) {
            assert_true(cq_cmf_shard(c, &no, &count));
            assert_int_equal(count, 4);
            assert_int_equal(no, (uint64_t)(strstr(path, "-of-")[-1] - '0'));
            shard_tensors += expected_tensors;
        } else {
            assert_false(cq_cmf_shard(c, &no, &count));
            assert_int_equal(expected_tensors, 34);
        }
        tensors = 0;
        files++;
    }
    assert_int_equal(tensors, expected_tensors);
    cq_cmf_close(c);
    free(tsv);
    assert_int_equal(files, 9);        /* F16, Q8_ROW, Q8_2F, Q4_BLOCK, VBIT and 4 F32 shards */
    assert_int_equal(shard_tensors, 34); /* the shards hold the whole model */
}

/* Re-writing a Python-written file through cortiq.c's writer (same header,
 * tokenizer, masks, index, and the tensors in directory order) gives the same
 * data blob byte for byte (these files hold only tensors under 16 KiB, which
 * both writers put at 64-byte offsets; larger ones the Python writer does
 * not page-align),
 * the same optional sections and the same section_hashes. */
static void test_rewrite_matches_python_writer(void **st) {
    (void)st;
    static const char *const files[] = {"tiny-Q8_ROW.cmf", "tiny-VBIT.cmf", "tiny-F16.cmf", "tiny-Q4_BLOCK.cmf"};
    const char *dir = tu_tmpdir("cmf_rewrite");
    for (size_t f = 0; f < CQ_ARRAY_LEN(files); f++) {
        char src_path[1024];
        snprintf(src_path, sizeof src_path, FIXDIR "/%s", files[f]);
        cq_cmf *a = NULL, *b = NULL;
        assert_int_equal(cq_cmf_open(src_path, &a), CQ_OK);
        const char *out = tu_path(dir, files[f]);
        cq_cmf_writer *w = NULL;
        assert_int_equal(cq_cmf_writer_create(out, &w), CQ_OK);
        size_t n, n2;
        const char *hdr = cq_cmf_header_json(a, &n);
        assert_int_equal(cq_cmf_writer_set_header(w, hdr, n), CQ_OK);
        const uint8_t *tok = cq_cmf_tokenizer_json(a, &n);
        assert_int_equal(cq_cmf_writer_set_tokenizer(w, tok, n), CQ_OK);
        const uint8_t *m = cq_cmf_section_bytes(a, CQ_CMF_SEC_MASKS, &n);
        const uint8_t *ix = cq_cmf_section_bytes(a, CQ_CMF_SEC_INDEX, &n2);
        assert_int_equal(cq_cmf_writer_set_masks(w, m, n, ix, n2), CQ_OK);
        for (size_t i = 0; i < cq_cmf_tensor_count(a); i++) {
            const cq_tensor_view *t = cq_cmf_tensor_at(a, i);
            assert_int_equal(cq_cmf_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes), CQ_OK);
        }
        assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
        cq_cmf_writer_free(w);
        assert_int_equal(cq_cmf_open(out, &b), CQ_OK);
        assert_int_equal(cq_cmf_verify(b, NULL, NULL, NULL), CQ_OK);
        cq_cmf_info ia, ib;
        cq_cmf_get_info(a, &ia);
        cq_cmf_get_info(b, &ib);
        assert_int_equal(ia.features, ib.features);
        for (int id = CQ_CMF_SEC_DATA; id < CQ_CMF_SEC_COUNT; id++) {
            const uint8_t *pa = cq_cmf_section_bytes(a, (cq_cmf_section_id)id, &n);
            const uint8_t *pb = cq_cmf_section_bytes(b, (cq_cmf_section_id)id, &n2);
            assert_int_equal(n, n2);
            if (n) assert_memory_equal(pa, pb, n);
        }
        const cJSON *ha = cJSON_GetObjectItem(cq_cmf_header(a), "section_hashes");
        const cJSON *hb = cJSON_GetObjectItem(cq_cmf_header(b), "section_hashes");
        static const char *const keys[] = {"masks", "vocab", "index"};
        for (int k = 0; k < 3; k++) {
            const cJSON *x = cJSON_GetObjectItem(ha, keys[k]), *y = cJSON_GetObjectItem(hb, keys[k]);
            assert_int_equal(x == NULL, y == NULL);
            if (x) assert_string_equal(x->valuestring, y->valuestring);
        }
        cq_cmf_close(a);
        cq_cmf_close(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_written_files),
        cmocka_unit_test(test_rewrite_matches_python_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
