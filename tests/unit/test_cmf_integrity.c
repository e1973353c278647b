/* test_cmf_integrity.c — integrity on load: a damaged file must be refused
 * where it is damaged, never read as if whole. The header and directory
 * hashes are checked at open; a tensor's hash the first time it is bound or
 * dequantized (once); no_verify skips the tensor check, no_envelope_hashes
 * the open-time one. Files are assembled byte by byte (cmf_testfile.h). */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cmf_testfile.h"
#include "format/cmf.h"
#include "format/hash64_impl.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "testutil.h"

static uint8_t g_data[256];

/* "a" f32[2,4] at 0, "b" f16[8] at 64, "c" f32[4] at 128, a small vocab. */
static tf_file base_file(void) {
    for (size_t i = 0; i < sizeof g_data; i++) g_data[i] = (uint8_t)(i * 5 + 3);
    tf_file f;
    memset(&f, 0, sizeof f);
    f.nt = 3;
    f.t[0] = (tf_tensor){.name = "a", .dtype = CQ_DTYPE_F32, .ndim = 2, .shape = {2, 4}, .off = 0, .nbytes = 32};
    f.t[1] = (tf_tensor){.name = "b", .dtype = CQ_DTYPE_F16, .ndim = 1, .shape = {8}, .off = 64, .nbytes = 16};
    f.t[2] = (tf_tensor){.name = "c", .dtype = CQ_DTYPE_F32, .ndim = 1, .shape = {4}, .off = 128, .nbytes = 16};
    f.data = g_data;
    f.data_len = 144;
    static const uint8_t vocab[] = "{\"model\":{}}";
    f.vocab = vocab;
    f.vocab_len = sizeof vocab - 1;
    return f;
}

static size_t data_off(const uint8_t *buf) { return (size_t)tf_get64(buf + TF_DATA_OFF); }

static void expect_msg(const char *needle) {
    if (!strstr(cq_last_error(), needle)) fprintf(stderr, "message: %s\n(want '%s')\n", cq_last_error(), needle);
    assert_non_null(strstr(cq_last_error(), needle));
}

/* One flipped payload byte: the file opens (nothing else is wrong), the
 * damaged tensor is refused when bound or dequantized, naming it; the
 * others read fine; with no_verify everything reads. */
static void test_flipped_tensor_byte(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    buf[data_off(buf) + 64 + 5] ^= 0x10; /* inside "b" */
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    float out[8];
    const cq_tensor_view *a = cq_cmf_find(c, "a"), *b = cq_cmf_find(c, "b");
    assert_ptr_equal(b->owner, c);
    assert_int_equal(b->index, 1);
    assert_int_equal(cq_cmf_dequantize(a, out, 8), CQ_OK);
    assert_int_equal(cq_cmf_dequantize(b, out, 8), CQ_ERR_HASH);
    expect_msg("tensor 'b' is damaged");
    expect_msg("do not match the hash recorded in the file");
    expect_msg("cortiq verify");
    expect_msg("--no-verify");
    assert_int_equal(cq_cmf_check_tensor(b), CQ_ERR_HASH); /* a failure is not remembered as a pass */

    cq_backend *be = NULL;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_tensor w;
    assert_int_equal(cq_tensor_bind_weight(be, b, &w), CQ_ERR_HASH);
    expect_msg("tensor 'b' is damaged");
    assert_int_equal(cq_tensor_bind_weight(be, a, &w), CQ_OK);
    cq_tensor_free(&w);
    cq_cmf_close(c);

    cq_cmf_open_opts o = {.no_verify = true};
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
    b = cq_cmf_find(c, "b");
    assert_int_equal(cq_cmf_check_tensor(b), CQ_OK);
    assert_int_equal(cq_cmf_dequantize(b, out, 8), CQ_OK);
    assert_int_equal(cq_tensor_bind_weight(be, b, &w), CQ_OK);
    cq_tensor_free(&w);
    cq_cmf_close(c);
    cq_backend_free(be);
    free(buf);
}

/* A tensor is hashed once: after a pass, damage done to the caller's buffer
 * goes unseen (the check is not on the hot path), while a tensor not yet
 * read is still caught. */
static void test_checked_once(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    const cq_tensor_view *a = cq_cmf_find(c, "a"), *cv = cq_cmf_find(c, "c");
    assert_int_equal(cq_cmf_check_tensor(a), CQ_OK);
    buf[data_off(buf) + 1] ^= 1;   /* in "a", after its check */
    buf[data_off(buf) + 129] ^= 1; /* in "c", before any */
    assert_int_equal(cq_cmf_check_tensor(a), CQ_OK);
    cq_tensor_view copy = *a; /* a copy of the directory's view shares its state */
    assert_int_equal(cq_cmf_check_tensor(&copy), CQ_OK);
    assert_int_equal(cq_cmf_check_tensor(cv), CQ_ERR_HASH);
    expect_msg("tensor 'c'");
    /* a view made by the caller (no owner) is never checked */
    cq_tensor_view mine = *cv;
    mine.owner = NULL;
    assert_int_equal(cq_cmf_check_tensor(&mine), CQ_OK);
    cq_cmf_close(c);
    free(buf);
}

/* The shipped model's two worst single-byte flips moved a tensor's offset
 * onto other bytes. Here "c" moves onto "a"'s first 16 bytes and its record
 * hash is made to match them, so only the directory hash can tell: the
 * default open refuses the file naming the directory; with every check off
 * it opens and "c" reads a's bytes. */
static void test_moved_directory_entry(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    size_t rec = tf_rec(buf, 2);
    tf_put64(buf + rec + 32, 0);                                    /* c's offset: 128 -> 0 */
    tf_put64(buf + rec + 48, cq_hash64(buf + data_off(buf), 16)); /* its hash: of what is there now */
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_ERR_HASH);
    assert_null(c);
    expect_msg("the directory section is damaged");
    expect_msg("run `cortiq verify");
    cq_cmf_open_opts o = {.no_verify = true}; /* the directory is checked all the same */
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_ERR_HASH);
    expect_msg("directory");
    o.no_envelope_hashes = true;
    o.no_verify = false;
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
    const cq_tensor_view *cv = cq_cmf_find(c, "c");
    assert_int_equal(cq_cmf_check_tensor(cv), CQ_OK); /* the moved record is self-consistent */
    assert_ptr_equal(cv->data, cq_cmf_find(c, "a")->data);
    size_t problems = 0;
    assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_ERR_HASH);
    assert_int_equal(problems, 1);
    expect_msg("section 'dir'");
    cq_cmf_close(c);
    free(buf);
}

static void test_header_flip_refused(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    uint8_t *at = memmem(buf + 128, tf_get64(buf + TF_HDR_LEN), "\"hidden_size\":8", 15);
    assert_non_null(at);
    at[14] = '9'; /* still valid JSON, still the schema: only the hash notices */
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_ERR_HASH);
    expect_msg("the header section is damaged");
    expect_msg("envelope");
    cq_cmf_open_opts o = {.no_envelope_hashes = true};
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
    cq_cmf_close(c);
    free(buf);
}

/* A damaged tokenizer section (its hash in header.section_hashes) is refused
 * at open unless no_verify. */
static void test_section_hash_at_open(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "%.*s,\"section_hashes\":{\"vocab\":\"%016llx\"}}", (int)(strlen(tf_default_header) - 1),
             tf_default_header, (unsigned long long)cq_hash64(f.vocab, f.vocab_len));
    free(buf);
    f.header = hdr;
    buf = tf_assemble(&f, &len);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    cq_cmf_close(c);
    buf[tf_get64(buf + TF_VOCAB_OFF) + 2] ^= 0x01;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_ERR_HASH);
    expect_msg("the tokenizer section is damaged");
    expect_msg("section_hashes");
    cq_cmf_open_opts o = {.no_verify = true};
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
    cq_cmf_close(c);
    free(buf);
}

/* Zero envelope hashes mean "not recorded": such a file opens; its tensors
 * are still checked (their hashes are always recorded). */
static void test_zero_hashes_open(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    tf_put64(buf + TF_HDR_HASH, 0);
    tf_put64(buf + TF_DIR_HASH, 0);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    for (size_t i = 0; i < cq_cmf_tensor_count(c); i++) assert_int_equal(cq_cmf_check_tensor(cq_cmf_tensor_at(c, i)), CQ_OK);
    cq_cmf_close(c);
    buf[data_off(buf) + 3] ^= 0x80;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    assert_int_equal(cq_cmf_check_tensor(cq_cmf_find(c, "a")), CQ_ERR_HASH);
    cq_cmf_close(c);
    free(buf);
}

/* Through a file path the messages name the file to verify. */
static void test_messages_name_the_file(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_integrity");
    const char *path = tu_path(dir, "damaged.cmf");
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    buf[data_off(buf) + 64] ^= 0x01;
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open(path, &c), CQ_OK);
    assert_int_equal(cq_cmf_check_tensor(cq_cmf_find(c, "b")), CQ_ERR_HASH);
    char want[1200];
    snprintf(want, sizeof want, "run `cortiq verify %s`", path);
    expect_msg(want);
    cq_cmf_close(c);
    buf[data_off(buf) + 64] ^= 0x01;
    buf[tf_rec(buf, 0) + 8 + 4 * 5] ^= 0x01; /* an unused shape slot of "a" */
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    assert_int_equal(cq_cmf_open(path, &c), CQ_ERR_HASH);
    expect_msg(path);
    expect_msg("directory section is damaged");
    free(buf);
}

/* The pooled hash equals the one-shot hash for every split: pending bytes
 * before, a tail after, spans around the parallel threshold. */
static void test_pool_hash_matches(void **st) {
    (void)st;
    size_t n = CQ_HASH64_PAR_MIN + (3u << 20) + 5;
    uint8_t *p = cq_malloc(n);
    assert_non_null(p);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    cq_pool *pool = NULL;
    assert_int_equal(cq_pool_create(3, &pool), CQ_OK);
    static const size_t heads[] = {0, 1, 3, 7, 8, 9};
    for (size_t k = 0; k < CQ_ARRAY_LEN(heads); k++) {
        uint64_t want = cq_hash64(p, n - k);
        cq_hash64_state s;
        cq_hash64_init(&s);
        cq_hash64_update(&s, p, heads[k]);
        cq_hash64_update_pool(&s, p + heads[k], n - k - heads[k], pool);
        assert_true(cq_hash64_final(&s) == want);
    }
    cq_hash64_state s;
    cq_hash64_init(&s);
    cq_hash64_update_pool(&s, p, CQ_HASH64_PAR_MIN - 1, pool); /* below the threshold: serial */
    assert_true(cq_hash64_final(&s) == cq_hash64(p, CQ_HASH64_PAR_MIN - 1));
    cq_pool_free(pool);
    cq_free(p);
}

/* The AVX-512 fold (when this CPU has it) equals the portable one for every
 * length around its 8- and 16-word steps and for any first word index. */
static void test_simd_fold_matches(void **st) {
    (void)st;
#if defined(CQ_ARCH_X86)
    const cq_cpu_features *f = cq_cpu();
    if (!f->avx512f || !f->avx512dq) skip();
    uint8_t p[8 * 300 + 3];
    for (size_t i = 0; i < sizeof p; i++) p[i] = (uint8_t)(i * 131 + (i >> 3));
    static const uint64_t firsts[] = {0, 1, 7, 123456789, UINT64_MAX / 3};
    for (uint64_t n = 0; n <= 300; n++)
        for (size_t k = 0; k < CQ_ARRAY_LEN(firsts); k++)
            assert_true(cq_hash64_fold_avx512(p + 3 * (n % 2), n, firsts[k]) ==
                        cq_hash64_fold_scalar(p + 3 * (n % 2), n, firsts[k]));
#else
    skip();
#endif
}

/* The folded hash (the pieces a copy hashes on its own threads, in any
 * order) equals the one-shot hash for every length and split. */
static void test_folded_hash_matches(void **st) {
    (void)st;
    uint8_t p[1000];
    for (size_t i = 0; i < sizeof p; i++) p[i] = (uint8_t)(i * 37 + 11);
    static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 255, 256, 999, 1000};
    for (size_t k = 0; k < CQ_ARRAY_LEN(lens); k++) {
        const size_t n = lens[k], words = n / 8;
        /* three pieces of whole words, folded last to first */
        const size_t cut1 = words / 3, cut2 = 2 * words / 3;
        uint64_t acc = cq_hash64_fold(p + 8 * cut2, words - cut2, cut2);
        acc ^= cq_hash64_fold(p + 8 * cut1, cut2 - cut1, cut1);
        acc ^= cq_hash64_fold(p, cut1, 0);
        assert_true(cq_hash64_folded(acc, p, n) == cq_hash64(p, n));
    }
    /* a wrong word index is a different hash */
    assert_true(cq_hash64_folded(cq_hash64_fold(p, 4, 1), p, 32) != cq_hash64(p, 32));
}

/* A backend that hashes while it copies (bind_weight_hashing): here the
 * host backend's in-place bind plus the payload folded in two pieces, as a
 * copying backend folds them. */
static cq_backend_vtbl g_hashing_vt;
static int g_hashing_binds, g_plain_binds, g_releases;

static cq_status hashing_bind(cq_backend *be, const cq_tensor_view *v, cq_tensor *t, uint64_t *hash) {
    g_hashing_binds++;
    CQ_TRY(cq_host_bind_weight(be, v, t));
    const uint64_t words = v->nbytes / 8, half = words / 2;
    const uint8_t *p = v->data;
    *hash = cq_hash64_folded(cq_hash64_fold(p + 8 * half, words - half, half) ^ cq_hash64_fold(p, half, 0), p,
                             v->nbytes);
    return CQ_OK;
}

static cq_status plain_bind(cq_backend *be, const cq_tensor_view *v, cq_tensor *t) {
    g_plain_binds++;
    return cq_host_bind_weight(be, v, t);
}

static void counted_release(cq_backend *be, cq_tensor *t) {
    (void)be;
    (void)t;
    g_releases++;
}

/* The front end lets such a backend hash the first bind of a tensor, checks
 * the hash it returns, releases the weight on a mismatch (with the same
 * message as the separate check), remembers a match (the next bind is a
 * plain one), and never asks for the hash when the container does not verify. */
static void test_bind_hashing_backend(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    buf[data_off(buf) + 64 + 5] ^= 0x10; /* inside "b" */
    cq_backend *be = NULL;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    const cq_backend_vtbl *cpu_vt = be->vt;
    g_hashing_vt = *be->vt;
    g_hashing_vt.bind_weight = plain_bind;
    g_hashing_vt.bind_weight_hashing = hashing_bind;
    g_hashing_vt.release_weight = counted_release;
    be->vt = &g_hashing_vt;
    g_hashing_binds = g_plain_binds = g_releases = 0;

    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK);
    const cq_tensor_view *a = cq_cmf_find(c, "a"), *b = cq_cmf_find(c, "b");
    cq_tensor w;
    assert_true(cq_cmf_tensor_unchecked(a));
    assert_int_equal(cq_tensor_bind_weight(be, a, &w), CQ_OK);
    assert_int_equal(g_hashing_binds, 1);
    assert_int_equal(g_plain_binds, 0);
    assert_false(cq_cmf_tensor_unchecked(a)); /* the match is remembered */
    cq_tensor_free(&w);
    assert_int_equal(cq_tensor_bind_weight(be, a, &w), CQ_OK);
    assert_int_equal(g_hashing_binds, 1);
    assert_int_equal(g_plain_binds, 1);
    cq_tensor_free(&w);
    g_releases = 0;

    assert_int_equal(cq_tensor_bind_weight(be, b, &w), CQ_ERR_HASH);
    expect_msg("tensor 'b' is damaged");
    expect_msg("--no-verify");
    assert_int_equal(g_hashing_binds, 2);
    assert_int_equal(g_releases, 1); /* bound, found damaged, released */
    assert_null(w.be);
    assert_true(cq_cmf_tensor_unchecked(b)); /* a failure is not remembered as a pass */
    cq_cmf_close(c);

    cq_cmf_open_opts o = {.no_verify = true};
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
    b = cq_cmf_find(c, "b");
    assert_false(cq_cmf_tensor_unchecked(b));
    assert_int_equal(cq_tensor_bind_weight(be, b, &w), CQ_OK);
    assert_int_equal(g_hashing_binds, 2); /* nothing to check: a plain bind */
    assert_int_equal(g_plain_binds, 2);
    cq_tensor_free(&w);
    cq_cmf_close(c);
    be->vt = cpu_vt;
    cq_backend_free(be);
    free(buf);
}

/* A large tensor (hashed on the container's pool) is checked right, and a
 * flip in its last piece is found. */
static void test_large_tensor_threads(void **st) {
    (void)st;
    size_t n = CQ_HASH64_PAR_MIN * 2 + 64;
    uint8_t *data = cq_calloc(1, n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 31 + (i >> 9));
    tf_file f;
    memset(&f, 0, sizeof f);
    f.nt = 1;
    f.t[0] = (tf_tensor){.name = "big", .dtype = CQ_DTYPE_U8, .ndim = 1, .shape = {(uint32_t)n}, .off = 0, .nbytes = n};
    f.data = data;
    f.data_len = n;
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    for (int threads = 1; threads <= 4; threads += 3) {
        cq_cmf_open_opts o = {.threads = threads};
        cq_cmf *c = NULL;
        assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
        assert_int_equal(cq_cmf_check_tensor(cq_cmf_find(c, "big")), CQ_OK);
        cq_cmf_close(c);
        buf[len - 7] ^= 0x40;
        assert_int_equal(cq_cmf_open_memory_ex(buf, len, &o, &c), CQ_OK);
        assert_int_equal(cq_cmf_check_tensor(cq_cmf_find(c, "big")), CQ_ERR_HASH);
        expect_msg("tensor 'big'");
        assert_int_equal(cq_cmf_verify(c, NULL, NULL, NULL), CQ_ERR_HASH);
        cq_cmf_close(c);
        buf[len - 7] ^= 0x40;
    }
    free(buf);
    cq_free(data);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flipped_tensor_byte),
        cmocka_unit_test(test_checked_once),
        cmocka_unit_test(test_moved_directory_entry),
        cmocka_unit_test(test_header_flip_refused),
        cmocka_unit_test(test_section_hash_at_open),
        cmocka_unit_test(test_zero_hashes_open),
        cmocka_unit_test(test_messages_name_the_file),
        cmocka_unit_test(test_pool_hash_matches),
        cmocka_unit_test(test_large_tensor_threads),
        cmocka_unit_test(test_folded_hash_matches),
        cmocka_unit_test(test_simd_fold_matches),
        cmocka_unit_test(test_bind_hashing_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
