/* test_cmf_corrupt.c — one hand-made damaged file per defect class, each
 * asserting the exact status the reader (or verify) returns and that the
 * message names the field or tensor. Files are assembled byte by byte
 * (cmf_testfile.h), not produced by the library's writer. Most damage here
 * is patched in after assembly, which a default open would refuse as a
 * directory hash mismatch (test_cmf_integrity.c covers that); to reach the
 * parsers these tests open with the hash checks off, as `cortiq verify`
 * does. */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cmf_testfile.h"
#include "format/cmf.h"
#include "testutil.h"

static uint8_t g_data[256];

/* A valid base: "a" f32[2,4] at 0, "b" f16[8] at 64, a small vocab. */
static tf_file base_file(void) {
    for (size_t i = 0; i < sizeof g_data; i++) g_data[i] = (uint8_t)(i * 7 + 1);
    tf_file f;
    memset(&f, 0, sizeof f);
    f.nt = 2;
    f.t[0] = (tf_tensor){.name = "a", .dtype = CQ_DTYPE_F32, .ndim = 2, .shape = {2, 4}, .off = 0, .nbytes = 32};
    f.t[1] = (tf_tensor){.name = "b", .dtype = CQ_DTYPE_F16, .ndim = 1, .shape = {8}, .off = 64, .nbytes = 16};
    f.data = g_data;
    f.data_len = 80;
    static const uint8_t vocab[] = "{\"model\":{}}";
    f.vocab = vocab;
    f.vocab_len = sizeof vocab - 1;
    return f;
}

/* Structure only: no hash is checked at open. */
static const cq_cmf_open_opts k_parse_only = {.no_verify = true, .no_envelope_hashes = true};

/* Open from memory, expect `want`; the message must contain `needle`. */
static void expect_open(const uint8_t *buf, size_t len, cq_status want, const char *needle) {
    cq_cmf *c = NULL;
    cq_status s = cq_cmf_open_memory_ex(buf, len, &k_parse_only, &c);
    if (s != want || (needle && !strstr(cq_last_error(), needle)))
        fprintf(stderr, "got %s: %s (want %s, '%s')\n", cq_status_str(s), cq_last_error(), cq_status_str(want),
                needle ? needle : "");
    assert_int_equal(s, want);
    if (needle) assert_non_null(strstr(cq_last_error(), needle));
    if (s == CQ_OK) {
        assert_non_null(c);
        cq_cmf_close(c);
    } else {
        assert_null(c);
    }
}

static void expect_file(const tf_file *f, cq_status want, const char *needle) {
    size_t len;
    uint8_t *buf = tf_assemble(f, &len);
    expect_open(buf, len, want, needle);
    free(buf);
}

static void expect_header(const char *json, cq_status want, const char *needle) {
    tf_file f = base_file();
    f.header = json;
    expect_file(&f, want, needle);
}

/* The base itself is valid, and so is its exact copy on the heap. */
static void test_base_is_valid(void **st) {
    (void)st;
    tf_file f = base_file();
    expect_file(&f, CQ_OK, NULL);
}

/* ---- envelope ---- */
static void test_short_file(void **st) {
    (void)st;
    static const uint8_t four[4] = {'C', 'M', 'F', 1};
    expect_open(four, sizeof four, CQ_ERR_BOUNDS, "smaller than the 128-byte");
    expect_open(NULL, 0, CQ_ERR_BOUNDS, "0 bytes");
}

static void patch_and_expect(void (*patch)(uint8_t *, size_t *), cq_status want, const char *needle) {
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    patch(buf, &len);
    expect_open(buf, len, want, needle);
    free(buf);
}

static void p_magic(uint8_t *b, size_t *n) { (void)n, b[3] = 2; }
static void p_version3(uint8_t *b, size_t *n) { (void)n, tf_put32(b + TF_VERSION, 3); }
static void p_feature80(uint8_t *b, size_t *n) { (void)n, tf_put32(b + TF_FEATURES, 0x81); }
static void p_feature_delta(uint8_t *b, size_t *n) { (void)n, tf_put32(b + TF_FEATURES, 0x09); }
static void p_header_past_eof(uint8_t *b, size_t *n) { tf_put64(b + TF_HDR_LEN, *n); }
static void p_header_len0(uint8_t *b, size_t *n) { (void)n, tf_put64(b + TF_HDR_LEN, 0); }
static void p_dir_len0(uint8_t *b, size_t *n) { (void)n, tf_put64(b + TF_DIR_LEN, 0); }
static void p_offset_wraps(uint8_t *b, size_t *n) { (void)n, tf_put64(b + TF_VOCAB_OFF, UINT64_MAX - 3); }
static void p_overlap(uint8_t *b, size_t *n) {
    (void)n; /* vocab moved onto the directory */
    tf_put64(b + TF_VOCAB_OFF, tf_get64(b + TF_DIR_OFF) + 4);
}
static void p_overlap_envelope(uint8_t *b, size_t *n) { (void)n, tf_put64(b + TF_VOCAB_OFF, 100); }
static void p_data_misaligned(uint8_t *b, size_t *n) {
    (void)n;
    tf_put64(b + TF_DATA_OFF, tf_get64(b + TF_DATA_OFF) - 64);
}
static void p_truncate_half(uint8_t *b, size_t *n) { (void)b, *n /= 2; }
static void p_empty_vocab_bad_off(uint8_t *b, size_t *n) {
    (void)n; /* an absent section's offset is ignored */
    tf_put64(b + TF_VOCAB_LEN, 0);
    tf_put64(b + TF_VOCAB_OFF, UINT64_MAX);
}

static void test_bad_magic(void **st) { (void)st, patch_and_expect(p_magic, CQ_ERR_MAGIC, "not a CMF file"); }
static void test_version3(void **st) { (void)st, patch_and_expect(p_version3, CQ_ERR_VERSION, "version 3"); }
static void test_unknown_feature(void **st) {
    (void)st;
    patch_and_expect(p_feature80, CQ_ERR_FEATURE, "0x80");
    patch_and_expect(p_feature_delta, CQ_ERR_FEATURE, "0x8");
}
static void test_header_past_eof(void **st) { (void)st, patch_and_expect(p_header_past_eof, CQ_ERR_BOUNDS, "header section"); }
static void test_required_sections(void **st) {
    (void)st;
    patch_and_expect(p_header_len0, CQ_ERR_BOUNDS, "header_len is 0");
    patch_and_expect(p_dir_len0, CQ_ERR_BOUNDS, "dir_len is 0");
}
static void test_offset_wraps(void **st) { (void)st, patch_and_expect(p_offset_wraps, CQ_ERR_BOUNDS, "vocab section"); }
static void test_overlapping_sections(void **st) {
    (void)st;
    patch_and_expect(p_overlap, CQ_ERR_BOUNDS, "'dir'");
    patch_and_expect(p_overlap_envelope, CQ_ERR_BOUNDS, "overlaps the 128-byte envelope");
}
static void test_data_misaligned(void **st) { (void)st, patch_and_expect(p_data_misaligned, CQ_ERR_BOUNDS, "data_off"); }
static void test_truncated_blob(void **st) { (void)st, patch_and_expect(p_truncate_half, CQ_ERR_BOUNDS, "outside the file"); }
static void test_absent_section_offset_ignored(void **st) { (void)st, patch_and_expect(p_empty_vocab_bad_off, CQ_OK, NULL); }

/* ---- header JSON ---- */
#define ARCH_OK                                                                                                 \
    "\"arch\":{\"arch_name\":\"t\",\"hidden_size\":8,\"intermediate_size\":16,\"num_layers\":2,"                \
    "\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,\"vocab_size\":32,\"max_position_embeddings\":64," \
    "\"layer_types\":[\"FullAttention\",\"Kda\"],\"rms_norm_eps\":1e-6}"

static void test_header_malformed_json(void **st) {
    (void)st;
    expect_header("{\"version\":2, \"arch\": {", CQ_ERR_PARSE, "malformed JSON");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK "} x", CQ_ERR_PARSE, "trailing");
    expect_header("[1,2]", CQ_ERR_PARSE, "must be an object");
    tf_file f = base_file();
    static const char bad_utf8[] = "{\"version\":2,\"quant_type\":\"F32\",\"x\":\"\xC0\xAF\"," ARCH_OK "}";
    f.header = bad_utf8;
    expect_file(&f, CQ_ERR_PARSE, "UTF-8");
}

static void test_header_schema(void **st) {
    (void)st;
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"skills\":null}", CQ_ERR_PARSE, "'skills' is null");
    expect_header("{\"version\":2,\"quant_type\":\"Q3_K\"," ARCH_OK "}", CQ_ERR_PARSE, "'quant_type'");
    expect_header("{\"version\":2," ARCH_OK "}", CQ_ERR_PARSE, "'quant_type' is missing");
    expect_header("{\"quant_type\":\"F32\"," ARCH_OK "}", CQ_ERR_PARSE, "'version' is missing");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"}", CQ_ERR_PARSE, "'arch' is missing");
    expect_header("{\"version\":-2,\"quant_type\":\"F32\"," ARCH_OK "}", CQ_ERR_PARSE, "'version'");
    expect_header("{\"version\":2.5,\"quant_type\":\"F32\"," ARCH_OK "}", CQ_ERR_PARSE, "'version'");
    expect_header("{\"version\":2,\"quant_type\":\"F32\",\"quant_type\":\"F16\"," ARCH_OK "}", CQ_ERR_PARSE, "twice");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"skills\":[{\"name\":\"x\"}]}", CQ_ERR_PARSE,
                  "'skills[0].id' is missing");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK
                  ",\"skills\":[{\"id\":\"x\",\"selection\":{\"metric\":\"mse\",\"phi_layer\":1,\"mean\":\"\",\"basis\":\"\"}}]}",
                  CQ_ERR_PARSE, "'skills[0].selection.rank' is missing");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"tokenizer_config\":\"chatml\"}", CQ_ERR_PARSE,
                  "'tokenizer_config' must be an object");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"tokenizer_config\":{\"eos_token_ids\":[1,-1]}}",
                  CQ_ERR_PARSE, "eos_token_ids[1]");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"shard\":{\"no\":1}}", CQ_ERR_PARSE,
                  "'shard.count' is missing");
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"section_hashes\":{\"vocab\":5}}", CQ_ERR_PARSE,
                  "'section_hashes.vocab'");
    /* Option-typed keys may be null; unknown keys are ignored. */
    expect_header("{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK
                  ",\"tokenizer_config\":null,\"shard\":null,\"provenance\":{\"a\":[1]},\"zzz\":1}",
                  CQ_OK, NULL);
}

static void test_header_arch_schema(void **st) {
    (void)st;
    char buf[1024];
    static const struct {
        const char *from, *to, *needle;
    } cases[] = {
        {"\"Kda\"", "\"Mamba\"", "'arch.layer_types[1]'"},
        {"\"hidden_size\":8", "\"hidden_size\":\"8\"", "'arch.hidden_size'"},
        {"\"head_dim\":4,", "", "'arch.head_dim' is missing"},
        {"\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-6,\"norm_style\":\"llama\"", "'arch.norm_style'"},
        {"\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-6,\"num_loops\":null", "'arch.num_loops' is null"},
        {"\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e-6,\"moe\":{\"num_experts\":8,\"top_k\":2}",
         "'arch.moe.moe_intermediate_size' is missing"},
        {"\"rms_norm_eps\":1e-6", "\"rms_norm_eps\":1e999", "'arch.rms_norm_eps'"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(cases); i++) {
        const char *h = "{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK "}";
        const char *at = strstr(h, cases[i].from);
        assert_non_null(at);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - h), h, cases[i].to, at + strlen(cases[i].from));
        expect_header(buf, CQ_ERR_PARSE, cases[i].needle);
    }
}

/* ---- directory ---- */
static void test_dir_count_overflows(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    tf_put64(buf + tf_get64(buf + TF_DIR_OFF), UINT64_MAX);
    expect_open(buf, len, CQ_ERR_PARSE, "overflows");
    tf_put64(buf + tf_get64(buf + TF_DIR_OFF), 1000); /* fits u64 math, not the section */
    expect_open(buf, len, CQ_ERR_PARSE, "malformed");
    free(buf);
}

static void test_dir_too_short(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    tf_put64(buf + TF_DIR_LEN, 8);
    expect_open(buf, len, CQ_ERR_PARSE, "too short");
    free(buf);
}

static void test_pool_off_inside_records(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    tf_put64(buf + tf_get64(buf + TF_DIR_OFF) + 8, 16 + 56);
    expect_open(buf, len, CQ_ERR_PARSE, "pool_off");
    free(buf);
}

static void test_record_past_blob(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[1].nbytes = 64; /* 64 + 64 > 80 */
    f.t[1].dtype = CQ_DTYPE_U8;
    expect_file(&f, CQ_ERR_BOUNDS, "tensor 'b'");
    f = base_file();
    f.t[1].off = UINT64_MAX - 63; /* aligned, wraps */
    expect_file(&f, CQ_ERR_BOUNDS, "exceeds the data section");
}

static void test_dtype_99(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[0].dtype = 99;
    expect_file(&f, CQ_ERR_DTYPE, "unknown dtype id 99");
    f.t[0].dtype = CQ_DTYPE_COUNT; /* first id past the table */
    expect_file(&f, CQ_ERR_DTYPE, "tensor 'a'");
}

static void test_shape_bytes_mismatch(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[0].shape[1] = 5; /* f32[2,5] needs 40 bytes, record says 32 */
    expect_file(&f, CQ_ERR_BOUNDS, "nbytes 32 != 40");
    f = base_file();
    f.t[0].dtype = CQ_DTYPE_Q8_ROW; /* q8_row[2,4] needs 8 + 4 */
    expect_file(&f, CQ_ERR_BOUNDS, "tensor 'a'");
}

static void test_shape_product_overflows(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[0] = (tf_tensor){.name = "a", .dtype = CQ_DTYPE_U8, .ndim = 6,
                         .shape = {UINT32_MAX, UINT32_MAX, UINT32_MAX, 2, 2, 2}, .off = 0, .nbytes = 0};
    expect_file(&f, CQ_ERR_BOUNDS, "shape product overflows");
}

static void test_ndim_7(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[0].ndim = 7;
    expect_file(&f, CQ_ERR_PARSE, "ndim 7");
}

static void test_q4tp_bad_shape(void **st) {
    (void)st;
    /* q4tp needs 2-D with cols % 32 == 0: the reference reader lets this
     * through; we refuse it at open. */
    tf_file f = base_file();
    f.t[0] = (tf_tensor){.name = "q", .dtype = CQ_DTYPE_Q4TP, .ndim = 2, .shape = {1, 40}, .off = 0, .nbytes = 32};
    expect_file(&f, CQ_ERR_SHAPE, "tensor 'q'");
    f.t[0].ndim = 1;
    f.t[0].shape[0] = 64;
    expect_file(&f, CQ_ERR_SHAPE, "tensor 'q'");
}

static void test_misaligned_offset(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[1].off = 40;
    expect_file(&f, CQ_ERR_BOUNDS, "not 64-byte aligned");
}

static void test_duplicate_name(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[1].name = "a";
    expect_file(&f, CQ_ERR_PARSE, "duplicate tensor name 'a'");
}

static void test_name_not_utf8(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[1].name = "b\xFF\xFE";
    expect_file(&f, CQ_ERR_PARSE, "tensor #1: name is not valid UTF-8");
    f.t[1].name = "\xED\xA0\x80"; /* an encoded surrogate */
    expect_file(&f, CQ_ERR_PARSE, "not valid UTF-8");
    f.t[1].name = "b\0c";
    f.t[1].name_len = 3;
    expect_file(&f, CQ_ERR_PARSE, "NUL");
    f.t[1].name = "\xC3\xA9t\xC3\xA9"; /* "été" is fine */
    f.t[1].name_len = 0;
    expect_file(&f, CQ_OK, NULL);
}

static void test_name_outside_pool(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    tf_put32(buf + tf_rec(buf, 1), 2); /* pool is 2 bytes: [2, 3) is past it */
    expect_open(buf, len, CQ_ERR_PARSE, "outside the name pool");
    tf_put32(buf + tf_rec(buf, 1), 0);
    tf_put16(buf + tf_rec(buf, 1) + 4, 2); /* "ab" + "a": 3 name bytes in a 2-byte pool */
    expect_open(buf, len, CQ_ERR_PARSE, "names overlap");
    free(buf);
}

/* ---- masks and sparse index ---- */
/* Geometry of the default arch: F = 2, H = 1, G = 1, L = 2 -> blob 7 bytes. */
static size_t build_masks(uint8_t *out, uint32_t n_claimed, const char *blob_len, const char *extra) {
    char meta[512];
    int m = snprintf(meta, sizeof meta,
                     "{\"default_task\":\"all\",\"masks\":[{\"task_id\":0,\"name\":\"all\",\"sparsity\":0.0,"
                     "\"priority\":\"Fallback\",\"blob_off\":%s,\"blob_len\":%s%s}]}",
                     "BLOBOFF", blob_len, extra);
    (void)m;
    /* patch the blob offset in once the meta length is known */
    char final[512];
    size_t meta_len = strlen(meta) - strlen("BLOBOFF") + 2; /* offset has 2 digits */
    size_t blob_off = (8 + meta_len + 7) / 8 * 8;
    char *at = strstr(meta, "BLOBOFF");
    snprintf(final, sizeof final, "%.*s%2zu%s", (int)(at - meta), meta, blob_off, at + 7);
    tf_put32(out, n_claimed);
    tf_put32(out + 4, (uint32_t)strlen(final));
    memcpy(out + 8, final, strlen(final));
    memset(out + 8 + strlen(final), 0, blob_off - 8 - strlen(final));
    static const uint8_t blob[7] = {0xFF, 0xFF, 0x0F, 0x00, 0x03, 0x01, 0x03};
    memcpy(out + blob_off, blob, sizeof blob);
    return blob_off + sizeof blob;
}

static void test_masks(void **st) {
    (void)st;
    uint8_t masks[1024];
    tf_file f = base_file();
    f.masks = masks;
    f.masks_len = build_masks(masks, 1, "7", "");
    f.features = CQ_FEATURE_TENSOR_DIR | CQ_FEATURE_BINARY_MASKS;
    expect_file(&f, CQ_OK, NULL);
    f.masks_len = build_masks(masks, 2, "7", "");
    expect_file(&f, CQ_ERR_PARSE, "masks count mismatch");
    f.masks_len = build_masks(masks, 1, "8", "");
    expect_file(&f, CQ_ERR_PARSE, "blob_len 8 != 7");
    f.masks_len = build_masks(masks, 1, "7", ",\"has_expert_fields\":true");
    expect_file(&f, CQ_ERR_PARSE, "no MoE block");
    f.masks_len = build_masks(masks, 1, "7", ",\"priority\":\"High\"");
    expect_file(&f, CQ_ERR_PARSE, "twice");
    f.masks_len = build_masks(masks, 1, "7", "") - 1; /* blob cut by one byte */
    expect_file(&f, CQ_ERR_PARSE, "outside the masks section");
    tf_put32(masks + 4, 4000); /* meta_len past the section */
    expect_file(&f, CQ_ERR_PARSE, "masks meta");
    f.masks_len = 5;
    expect_file(&f, CQ_ERR_PARSE, "masks section too short");
}

static void test_sparse_index(void **st) {
    (void)st;
    uint8_t idx[64] = {0};
    tf_file f = base_file();
    f.index = idx;
    tf_put32(idx, 1);                               /* one entry */
    tf_put32(idx + 8 + 8, 2);                       /* n_groups */
    tf_put32(idx + 8 + 12, 1);                      /* n_heads */
    f.index_len = 8 + 16 + 4 + 1;
    expect_file(&f, CQ_OK, NULL);
    f.index_len = 8 + 16 + 4; /* the head byte is missing */
    expect_file(&f, CQ_ERR_PARSE, "sparse index: entry 0");
    tf_put32(idx, 0xFFFFFFFFu);
    f.index_len = 64;
    expect_file(&f, CQ_ERR_PARSE, "cannot fit");
    f.index_len = 4;
    expect_file(&f, CQ_ERR_PARSE, "sparse index: too short");
}

/* ---- integrity: open succeeds, verify names the damage ---- */
static void expect_verify(uint8_t *buf, size_t len, const char *needle) {
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &k_parse_only, &c), CQ_OK);
    size_t problems = 99;
    cq_status s = cq_cmf_verify(c, &problems, NULL, NULL);
    if (s != CQ_ERR_HASH || !strstr(cq_last_error(), needle)) fprintf(stderr, "verify: %s\n", cq_last_error());
    assert_int_equal(s, CQ_ERR_HASH);
    assert_int_equal(problems, 1);
    assert_non_null(strstr(cq_last_error(), needle));
    cq_cmf_close(c);
}

static void test_bad_tensor_hash(void **st) {
    (void)st;
    tf_file f = base_file();
    f.t[1].hash = 0x1234;
    f.t[1].keep_hash = 1;
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    expect_verify(buf, len, "tensor 'b': hash64 mismatch");
    free(buf);
}

static void test_bad_section_hashes(void **st) {
    (void)st;
    tf_file f = base_file();
    f.header = "{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"section_hashes\":{\"vocab\":\"not-hex\"}}";
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    expect_verify(buf, len, "section_hashes.vocab: malformed");
    free(buf);
    f.header = "{\"version\":2,\"quant_type\":\"F32\"," ARCH_OK ",\"section_hashes\":{\"vocab\":\"00000000000000ab\"}}";
    buf = tf_assemble(&f, &len);
    expect_verify(buf, len, "section 'vocab': hash64 mismatch");
    free(buf);
}

static void test_zero_hashes_mean_absent(void **st) {
    (void)st;
    tf_file f = base_file();
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    /* Change the header (arch_name "tiny" -> "tinY") and the directory
     * (tensor b's record hash field stays, its unused shape tail changes):
     * with both envelope hashes 0 nothing records them, so verify is clean. */
    uint8_t *at = memmem(buf + 128, tf_get64(buf + TF_HDR_LEN), "\"tiny\"", 6);
    assert_non_null(at);
    at[4] = 'Y';
    buf[tf_rec(buf, 1) + 8 + 4 * 5] = 0x7F;
    cq_cmf *c = NULL;
    expect_open(buf, len, CQ_OK, NULL);
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_ERR_HASH); /* both hashes still recorded */
    assert_non_null(strstr(cq_last_error(), "header section is damaged"));
    assert_null(c);
    assert_int_equal(cq_cmf_open_memory_ex(buf, len, &k_parse_only, &c), CQ_OK);
    size_t problems = 0;
    assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_ERR_HASH);
    assert_int_equal(problems, 2);
    cq_cmf_close(c);
    tf_put64(buf + TF_HDR_HASH, 0);
    tf_put64(buf + TF_DIR_HASH, 0);
    assert_int_equal(cq_cmf_open_memory(buf, len, &c), CQ_OK); /* the default open: nothing recorded, nothing checked */
    problems = 9;
    assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_OK);
    assert_int_equal(problems, 0);
    cq_cmf_close(c);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_is_valid),
        cmocka_unit_test(test_short_file),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_version3),
        cmocka_unit_test(test_unknown_feature),
        cmocka_unit_test(test_header_past_eof),
        cmocka_unit_test(test_required_sections),
        cmocka_unit_test(test_offset_wraps),
        cmocka_unit_test(test_overlapping_sections),
        cmocka_unit_test(test_data_misaligned),
        cmocka_unit_test(test_truncated_blob),
        cmocka_unit_test(test_absent_section_offset_ignored),
        cmocka_unit_test(test_header_malformed_json),
        cmocka_unit_test(test_header_schema),
        cmocka_unit_test(test_header_arch_schema),
        cmocka_unit_test(test_dir_count_overflows),
        cmocka_unit_test(test_dir_too_short),
        cmocka_unit_test(test_pool_off_inside_records),
        cmocka_unit_test(test_record_past_blob),
        cmocka_unit_test(test_dtype_99),
        cmocka_unit_test(test_shape_bytes_mismatch),
        cmocka_unit_test(test_shape_product_overflows),
        cmocka_unit_test(test_ndim_7),
        cmocka_unit_test(test_q4tp_bad_shape),
        cmocka_unit_test(test_misaligned_offset),
        cmocka_unit_test(test_duplicate_name),
        cmocka_unit_test(test_name_not_utf8),
        cmocka_unit_test(test_name_outside_pool),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_sparse_index),
        cmocka_unit_test(test_bad_tensor_hash),
        cmocka_unit_test(test_bad_section_hashes),
        cmocka_unit_test(test_zero_hashes_mean_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
