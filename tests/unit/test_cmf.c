/* test_cmf.c — the CMF v2 container end to end through the library's own
 * writer and reader: hash64 vectors, write -> read round trips with every
 * codec id (encoded by the codec layer where it can, hand-built or raw
 * payloads for the rest), alignment, name lookup, skills / masks / sparse
 * index / tokenizer / chat template exposure, feature bits, and verify
 * detecting one flipped byte in each kind of section. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "cmf_testfile.h"
#include "codec/codec.h"
#include "format/cmf.h"
#include "testutil.h"

/* ---- hash64 ---- */
static void test_hash64_vectors(void **st) {
    (void)st;
    assert_true(cq_hash64("", 0) == 0);
    assert_true(cq_hash64("CMF", 3) == 0xb59aa39a074033ecull);
    assert_true(cq_hash64("0123456789abcdef", 16) == 0x30d401310062ea9full);
    assert_true(cq_hash64("a", 1) == 0x247f1eaecb8be39aull);
    assert_true(cq_hash64("abcdefgh", 8) == 0x47da24881d1e74a9ull);
    assert_true(cq_hash64("abcdefghi", 9) == 0x0a845f71003c71e6ull);
    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    assert_true(cq_hash64(all, 256) == 0x9955bb876c0706bfull);
}

static void test_hash64_streaming(void **st) {
    (void)st;
    tu_rng r;
    tu_rng_seed(&r, 7);
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)tu_rng_u64(&r);
    for (int trial = 0; trial < 50; trial++) {
        size_t n = (size_t)(tu_rng_u64(&r) % sizeof buf);
        cq_hash64_state hs;
        cq_hash64_init(&hs);
        for (size_t at = 0; at < n;) {
            size_t k = (size_t)(tu_rng_u64(&r) % 20);
            if (k > n - at) k = n - at;
            cq_hash64_update(&hs, buf + at, k);
            at += k;
        }
        assert_true(cq_hash64_final(&hs) == cq_hash64(buf, n));
    }
}

/* ---- helpers ---- */
static const char *k_header_extra =
    "{\"version\":2,\"quant_type\":\"Q8_2F\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
    "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
    "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
    "\"rms_norm_eps\":1e-6%s},\"tokenizer_config\":{\"chat_template\":\"{{ messages }}\",\"eos_token_ids\":[3,4]},"
    "\"skills\":[{\"id\":\"sql\",\"name\":\"SQL\",\"layers\":[1]},{\"id\":\"ru\"%s}]}";

static char *make_header(const char *arch_extra, const char *skill_extra) {
    static char buf[2048];
    snprintf(buf, sizeof buf, k_header_extra, arch_extra, skill_extra);
    return buf;
}

static cq_cmf *reopen(const char *path) {
    cq_cmf *c = NULL;
    cq_status s = cq_cmf_open(path, &c);
    if (s != CQ_OK) fprintf(stderr, "open: %s\n", cq_last_error());
    assert_int_equal(s, CQ_OK);
    return c;
}

/* Masks section for the tiny arch: F = 2, H = 1, G = 1, L = 2 (blob 7 bytes
 * legacy; with num_loops 2 the loop layout has 4 FFN rows: 11 bytes).
 * blob_off values sit inside the JSON they are measured from, so iterate
 * until the meta length is stable, as the format's writers do. */
static size_t build_masks(uint8_t *out, const char *const *names, const uint8_t *const *blobs, size_t blob_len,
                          size_t n) {
    char meta[2048];
    size_t meta_len = 0;
    for (int iter = 0; iter < 8; iter++) {
        size_t off = (8 + meta_len + 7) / 8 * 8;
        int k = snprintf(meta, sizeof meta, "{\"default_task\":\"%s\",\"masks\":[", names[0]);
        for (size_t i = 0; i < n; i++) {
            k += snprintf(meta + k, sizeof meta - (size_t)k,
                          "%s{\"task_id\":%zu,\"name\":\"%s\",\"description\":null,\"sparsity\":0.25,\"quality\":null,"
                          "\"parent\":null,\"priority\":\"%s\",\"has_hot_pack\":false,\"blob_off\":%zu,\"blob_len\":%zu}",
                          i ? "," : "", i, names[i], i ? "Normal" : "Fallback", off + i * ((blob_len + 7) / 8 * 8),
                          blob_len);
        }
        k += snprintf(meta + k, sizeof meta - (size_t)k, "]}");
        if ((size_t)k == meta_len) break;
        meta_len = (size_t)k;
    }
    size_t off = (8 + meta_len + 7) / 8 * 8;
    memset(out, 0, off + n * ((blob_len + 7) / 8 * 8));
    tf_put32(out, (uint32_t)n);
    tf_put32(out + 4, (uint32_t)meta_len);
    memcpy(out + 8, meta, meta_len);
    for (size_t i = 0; i < n; i++) memcpy(out + off + i * ((blob_len + 7) / 8 * 8), blobs[i], blob_len);
    return off + (n - 1) * ((blob_len + 7) / 8 * 8) + blob_len;
}

/* Sparse index with one entry per layer of task 0. */
static size_t build_index(uint8_t *out) {
    memset(out, 0, 64);
    tf_put32(out, 2);
    size_t pos = 8;
    for (uint32_t l = 0; l < 2; l++) {
        tf_put32(out + pos, 0);
        tf_put32(out + pos + 4, l);
        tf_put32(out + pos + 8, 1);
        tf_put32(out + pos + 12, 2);
        pos += 16;
        tf_put16(out + pos, (uint16_t)l);
        out[pos + 2] = 0;
        out[pos + 3] = 1;
        pos += 4;
    }
    return pos;
}

/* ---- round trip with every dtype id ---- */
#define RT_ROWS 6
#define RT_COLS 64

/* A structurally valid payload for a variable-size codec, built by hand. */
static uint8_t *variable_payload(cq_dtype dt, tu_rng *r, uint64_t *nbytes) {
    static const uint8_t widths[RT_ROWS] = {3, 4, 5, 6, 8, 4};
    const uint64_t gpr = RT_COLS / 32, G = RT_ROWS * gpr;
    uint8_t *p = calloc(1, 4096);
    size_t k = 0;
    if (dt == CQ_DTYPE_VBIT || dt == CQ_DTYPE_VBIT_RO) {
        memcpy(p, widths, RT_ROWS);
        k = RT_ROWS;
        for (uint64_t i = 0; i < RT_ROWS * gpr; i++, k += 2) tf_put16(p + k, cq_f32_to_f16(0.01f * (float)(i + 1)));
        if (dt == CQ_DTYPE_VBIT_RO) {
            uint32_t at = 0;
            for (int i = 0; i <= RT_ROWS; i++, k += 4) {
                tf_put32(p + k, at);
                if (i < RT_ROWS) at += (uint32_t)(RT_COLS * widths[i] / 8);
            }
        }
        for (int i = 0; i < RT_ROWS; i++)
            for (int b = 0; b < RT_COLS * widths[i] / 8; b++) p[k++] = (uint8_t)tu_rng_u64(r);
    } else if (dt == CQ_DTYPE_Q1S || dt == CQ_DTYPE_Q1T) {
        size_t tile = dt == CQ_DTYPE_Q1S ? 6 : 9;
        for (uint64_t g = 0; g < G; g++, k += tile) {
            tf_put16(p + k, cq_f32_to_f16(0.05f));
            for (size_t b = 2; b < tile; b++) p[k + b] = (uint8_t)(dt == CQ_DTYPE_Q1S ? tu_rng_u64(r) : tu_rng_u64(r) % 243);
            if (dt == CQ_DTYPE_Q1T) p[k + 8] = (uint8_t)(tu_rng_u64(r) % 9); /* the last block holds 2 codes */
        }
        if (dt == CQ_DTYPE_Q1S) { /* two outliers */
            tf_put32(p + k, 2), k += 4;
            tf_put32(p + k, 5), tf_put16(p + k + 4, cq_f32_to_f16(1.5f)), k += 6;
            tf_put32(p + k, 300), tf_put16(p + k + 4, cq_f32_to_f16(-2.0f)), k += 6;
        } else { /* row_ptr, one outlier in row 0 at col 7 */
            for (int i = 0; i <= RT_ROWS; i++, k += 4) tf_put32(p + k, i == 0 ? 0 : 1);
            tf_put16(p + k, 7), tf_put16(p + k + 2, cq_f32_to_f16(0.75f)), k += 4;
        }
    }
    *nbytes = k;
    return p;
}

typedef struct rt_item {
    char name[32];
    cq_dtype dt;
    uint64_t shape[2];
    uint8_t *payload;
    uint64_t nbytes;
    float *src; /* encoded from, or NULL */
} rt_item;

static void test_roundtrip_all_dtypes(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_rt");
    const char *path = tu_path(dir, "rt.cmf");
    tu_rng r;
    tu_rng_seed(&r, 42);
    rt_item items[CQ_DTYPE_COUNT + 1];
    size_t n_items = 0;
    for (int d = 0; d < CQ_DTYPE_COUNT; d++) {
        rt_item *it = &items[n_items++];
        memset(it, 0, sizeof *it);
        it->dt = (cq_dtype)d;
        snprintf(it->name, sizeof it->name, "w.%s", cq_dtype_name(it->dt));
        it->shape[0] = RT_ROWS;
        it->shape[1] = RT_COLS;
        if (cq_codec_can_encode(it->dt)) {
            assert_int_equal(cq_codec_nbytes(it->dt, 2, it->shape, &it->nbytes), CQ_OK);
            it->src = malloc(RT_ROWS * RT_COLS * sizeof(float));
            tu_fill_normal(&r, it->src, RT_ROWS * RT_COLS, 0.5f);
            it->payload = malloc(it->nbytes);
            assert_int_equal(cq_codec_quantize(it->dt, 2, it->shape, it->src, it->payload, it->nbytes), CQ_OK);
        } else if (cq_codec_size_kind_of(it->dt) == CQ_SIZE_VARIABLE) {
            it->payload = variable_payload(it->dt, &r, &it->nbytes);
        } else {
            if (cq_codec_size_kind_of(it->dt) == CQ_SIZE_FIXED)
                assert_int_equal(cq_codec_nbytes(it->dt, 2, it->shape, &it->nbytes), CQ_OK);
            else
                it->nbytes = it->dt == CQ_DTYPE_U8 ? RT_ROWS * RT_COLS : 100; /* reserved ids: any length */
            it->payload = malloc(it->nbytes);
            for (uint64_t i = 0; i < it->nbytes; i++) it->payload[i] = (uint8_t)tu_rng_u64(&r);
            if (it->dt == CQ_DTYPE_Q1 || it->dt == CQ_DTYPE_Q2TP) /* keep scales/params finite-ish: any bytes decode */
                for (uint64_t i = 0; i < it->nbytes; i++) it->payload[i] &= 0x3B;
        }
    }
    /* A large tensor: >= 16 KiB goes to a 4096-aligned offset. */
    rt_item *big = &items[n_items++];
    memset(big, 0, sizeof *big);
    snprintf(big->name, sizeof big->name, "big");
    big->dt = CQ_DTYPE_F32;
    big->shape[0] = 64;
    big->shape[1] = 64;
    big->nbytes = 64 * 64 * 4;
    big->src = malloc(big->nbytes);
    tu_fill_normal(&r, big->src, 64 * 64, 1.0f);
    big->payload = malloc(big->nbytes);
    memcpy(big->payload, big->src, big->nbytes);

    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    const char *hdr = make_header("", "");
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, strlen(hdr)), CQ_OK);
    for (size_t i = 0; i < n_items; i++) {
        rt_item *it = &items[i];
        cq_status s;
        if (i % 2 == 0) {
            s = cq_cmf_writer_add(w, it->name, it->dt, 2, it->shape, it->payload, it->nbytes);
        } else { /* odd ones in uneven chunks */
            s = cq_cmf_writer_begin(w, it->name, it->dt, 2, it->shape, it->nbytes);
            for (uint64_t at = 0; s == CQ_OK && at < it->nbytes; at += 37)
                s = cq_cmf_writer_write(w, it->payload + at, (size_t)CQ_MIN(37, it->nbytes - at));
            if (s == CQ_OK) s = cq_cmf_writer_end(w);
        }
        if (s != CQ_OK) fprintf(stderr, "%s: %s\n", it->name, cq_last_error());
        assert_int_equal(s, CQ_OK);
    }
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);

    cq_cmf *c = reopen(path);
    assert_int_equal(cq_cmf_tensor_count(c), n_items);
    size_t problems = 7;
    assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_OK);
    assert_int_equal(problems, 0);
    cq_cmf_info info;
    assert_int_equal(cq_cmf_get_info(c, &info), CQ_OK);
    /* vbit (8) and q8_2f (9) are present: QUANT_2F; no masks. */
    assert_int_equal(info.features, CQ_FEATURE_TENSOR_DIR | CQ_FEATURE_QUANT_2F);
    uint64_t data_off = cq_cmf_section_get(c, CQ_CMF_SEC_DATA).off;
    assert_int_equal(data_off % 4096, 0);
    for (size_t i = 0; i < n_items; i++) {
        rt_item *it = &items[i];
        const cq_tensor_view *t = cq_cmf_find(c, it->name);
        assert_non_null(t);
        assert_ptr_equal(t, cq_cmf_tensor_at(c, i)); /* caller order is kept */
        assert_string_equal(t->name, it->name);
        assert_int_equal(t->dtype, it->dt);
        assert_int_equal(t->ndim, 2);
        assert_int_equal(t->shape[0], it->shape[0]);
        assert_int_equal(t->shape[1], it->shape[1]);
        assert_int_equal(t->nelem, it->shape[0] * it->shape[1]);
        assert_int_equal(t->nbytes, it->nbytes);
        assert_memory_equal(t->data, it->payload, it->nbytes);
        assert_true(t->hash == cq_hash64(it->payload, it->nbytes));
        assert_int_equal((t->file_offset - data_off) % (it->nbytes >= 16384 ? 4096 : 64), 0);
        float *got = malloc(t->nelem * sizeof(float));
        cq_status s = cq_cmf_dequantize(t, got, t->nelem);
        if (!cq_codec_can_decode(it->dt)) {
            assert_int_equal(s, CQ_ERR_UNSUPPORTED);
            assert_non_null(strstr(cq_last_error(), it->name));
            free(got);
            continue;
        }
        assert_int_equal(s, CQ_OK);
        float *want = malloc(t->nelem * sizeof(float));
        assert_int_equal(cq_codec_dequant_rows(it->dt, 2, it->shape, it->payload, it->nbytes, 0, it->shape[0], want),
                         CQ_OK);
        assert_memory_equal(got, want, t->nelem * sizeof(float)); /* bit-identical to the codec on the same bytes */
        if (it->dt == CQ_DTYPE_U8)
            for (uint64_t k = 0; k < t->nelem; k++) assert_true(got[k] == (float)it->payload[k]);
        if (it->src) {
            /* Sanity of the whole path against the source (the codec tests
             * hold each codec to its precise bound): exact for f32, within a
             * quarter of the absmax (4-bit worst case ~1/7) otherwise. */
            float amax = 0, err = 0;
            for (uint64_t k = 0; k < t->nelem; k++) {
                amax = fmaxf(amax, fabsf(it->src[k]));
                err = fmaxf(err, fabsf(got[k] - it->src[k]));
            }
            if (it->dt == CQ_DTYPE_F32) assert_true(err == 0.0f);
            else assert_true(err <= 0.25f * amax);
        }
        free(want);
        free(got);
    }
    float tiny[4];
    assert_int_equal(cq_cmf_dequantize(cq_cmf_find(c, "big"), tiny, 4), CQ_ERR_INVALID_ARG);
    cq_cmf_close(c);
    for (size_t i = 0; i < n_items; i++) {
        free(items[i].payload);
        free(items[i].src);
    }
}

/* Scalars and N-D tensors: ndim 0 has one element, ndim 3 rows of shape[2]. */
static void test_roundtrip_shapes(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_shapes");
    const char *path = tu_path(dir, "s.cmf");
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);
    float one = 3.25f, cube[2 * 3 * 5];
    for (int i = 0; i < 30; i++) cube[i] = (float)i - 7.5f;
    uint16_t h[30];
    for (int i = 0; i < 30; i++) h[i] = cq_f32_to_f16(cube[i]);
    uint64_t s3[3] = {2, 3, 5}, s1[1] = {30}, s0[1] = {0};
    assert_int_equal(cq_cmf_writer_add(w, "scalar", CQ_DTYPE_F32, 0, NULL, &one, 4), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "cube", CQ_DTYPE_F32, 3, s3, cube, sizeof cube), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "vec16", CQ_DTYPE_F16, 1, s1, h, sizeof h), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "empty", CQ_DTYPE_F32, 1, s0, NULL, 0), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "", CQ_DTYPE_U8, 1, s0, NULL, 0), CQ_OK); /* empty name is legal */
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
    cq_cmf *c = reopen(path);
    assert_int_equal(cq_cmf_verify(c, NULL, NULL, NULL), CQ_OK);
    const cq_tensor_view *t = cq_cmf_find(c, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->nelem, 1);
    float v[30];
    assert_int_equal(cq_cmf_dequantize(t, v, 1), CQ_OK);
    assert_true(v[0] == 3.25f);
    t = cq_cmf_find(c, "cube");
    assert_int_equal(t->nelem, 30);
    assert_int_equal(cq_cmf_dequantize(t, v, 30), CQ_OK);
    assert_memory_equal(v, cube, sizeof cube);
    t = cq_cmf_find(c, "vec16");
    assert_int_equal(cq_cmf_dequantize(t, v, 30), CQ_OK);
    assert_memory_equal(v, cube, sizeof cube); /* these values are exact in f16 */
    t = cq_cmf_find(c, "empty");
    assert_int_equal(t->nelem, 0);
    assert_int_equal(cq_cmf_dequantize(t, NULL, 0), CQ_OK);
    assert_non_null(cq_cmf_find(c, ""));
    cq_cmf_close(c);
}

/* ---- skills, masks, index, tokenizer, chat template ---- */
static const char k_tokenizer[] = "{\"version\":\"1.0\",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}";

static void write_exposure_file(const char *path, const char *arch_extra, const char *skill_extra, bool loops) {
    static const uint8_t m0[11] = {0xFF, 0xFF, 0x0F, 0xF0, 0x03, 0x01, 0x03, 0x55, 0xAA, 0x01, 0x02};
    static const uint8_t m1[11] = {0x01, 0x00, 0x00, 0x80, 0x01, 0x02, 0x02, 0x11, 0x22, 0x33, 0x44};
    const char *names[2] = {"general", "coding"};
    const uint8_t *blobs[2] = {m0, m1};
    uint8_t masks[4096], index[64];
    size_t mlen = build_masks(masks, names, blobs, loops ? 11 : 7, 2), ilen = build_index(index);
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    const char *hdr = make_header(arch_extra, skill_extra);
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, strlen(hdr)), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_tokenizer(w, k_tokenizer, strlen(k_tokenizer)), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_masks(w, masks, mlen, index, ilen), CQ_OK);
    float a[16] = {1, 2, 3}, b[16] = {4, 5, 6};
    uint64_t shp[2] = {4, 4};
    assert_int_equal(cq_cmf_writer_add(w, "model.w", CQ_DTYPE_F32, 2, shp, a, sizeof a), CQ_OK);
    assert_int_equal(cq_cmf_writer_add(w, "skill.sql.model.w", CQ_DTYPE_F32, 2, shp, b, sizeof b), CQ_OK);
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
}

static void test_exposure(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_expose");
    const char *path = tu_path(dir, "x.cmf");
    write_exposure_file(path, "", "", false);
    cq_cmf *c = reopen(path);
    assert_int_equal(cq_cmf_verify(c, NULL, NULL, NULL), CQ_OK);
    cq_cmf_info info;
    assert_int_equal(cq_cmf_get_info(c, &info), CQ_OK);
    assert_int_equal(info.version, 2);
    assert_int_equal(info.features, CQ_FEATURE_TENSOR_DIR | CQ_FEATURE_BINARY_MASKS);
    assert_string_equal(info.arch_name, "tiny");
    assert_string_equal(info.quant_type, "Q8_2F");
    assert_int_equal(info.tensor_count, 2);
    assert_int_equal(info.skill_count, 2);
    assert_int_equal(info.mask_count, 2);
    assert_true(info.has_tokenizer && info.has_chat_template);
    assert_int_equal(info.vocab_len, strlen(k_tokenizer));
    assert_string_equal(cq_cmf_chat_template(c), "{{ messages }}");
    assert_string_equal(cq_cmf_skill_id(c, 0), "sql");
    assert_string_equal(cq_cmf_skill_id(c, 1), "ru");
    assert_null(cq_cmf_skill_id(c, 2));
    const cJSON *sk = cq_cmf_skill(c, 0);
    assert_string_equal(cJSON_GetObjectItem(sk, "name")->valuestring, "SQL");
    const cJSON *eos = cJSON_GetObjectItem(cq_cmf_tokenizer_config(c), "eos_token_ids");
    assert_int_equal(cJSON_GetArraySize(eos), 2);
    size_t tl = 0;
    const uint8_t *tok = cq_cmf_tokenizer_json(c, &tl);
    assert_int_equal(tl, strlen(k_tokenizer));
    assert_memory_equal(tok, k_tokenizer, tl);
    /* The header the writer stored: valid JSON with section_hashes for the
     * three present sections, each the hash64 of the bytes as written. */
    const cJSON *sh = cJSON_GetObjectItem(cq_cmf_header(c), "section_hashes");
    static const cq_cmf_section_id ids[3] = {CQ_CMF_SEC_MASKS, CQ_CMF_SEC_VOCAB, CQ_CMF_SEC_INDEX};
    for (int i = 0; i < 3; i++) {
        size_t n;
        const uint8_t *p = cq_cmf_section_bytes(c, ids[i], &n);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)cq_hash64(p, n));
        assert_string_equal(cJSON_GetObjectItem(sh, cq_cmf_section_name(ids[i]))->valuestring, hex);
    }
    /* skill resolution */
    assert_string_equal(cq_cmf_find_skill(c, "sql", "model.w")->name, "skill.sql.model.w");
    assert_string_equal(cq_cmf_find_skill(c, "ru", "model.w")->name, "model.w");
    assert_string_equal(cq_cmf_find_skill(c, NULL, "model.w")->name, "model.w");
    assert_null(cq_cmf_find_skill(c, "sql", "model.v"));
    assert_null(cq_cmf_find(c, "model."));
    /* masks: legacy layout, rows from the blob */
    assert_string_equal(cq_cmf_mask_default_task(c), "general");
    const cq_cmf_mask *m = cq_cmf_mask_find(c, "coding");
    assert_non_null(m);
    assert_ptr_equal(m, cq_cmf_mask_at(c, 1));
    assert_int_equal(m->task_id, 1);
    assert_int_equal(m->priority, CQ_MASK_NORMAL);
    assert_false(m->loop_layout);
    assert_null(m->description);
    assert_true(fabsf(m->sparsity - 0.25f) < 1e-7f);
    assert_int_equal(m->blob_len, 7);
    assert_int_equal(cq_cmf_mask_ffn_row(m, 1, 0)[0], 0x00); /* bytes 2..3 = layer 1 */
    assert_int_equal(cq_cmf_mask_ffn_row(m, 1, 0)[1], 0x80);
    assert_ptr_equal(cq_cmf_mask_ffn_row(m, 1, 5), cq_cmf_mask_ffn_row(m, 1, 0)); /* legacy: every pass */
    assert_int_equal(cq_cmf_mask_head_row(m, 0)[0], 0x01);
    assert_int_equal(cq_cmf_mask_head_row(m, 1)[0], 0x02);
    assert_false(cq_cmf_mask_layer_alive(m, 0)); /* gate byte 0x02: layer 1 alive only */
    assert_true(cq_cmf_mask_layer_alive(m, 1));
    assert_true(cq_cmf_mask_layer_alive(m, 9)); /* beyond the list: alive */
    assert_null(cq_cmf_mask_expert_row(m, 0));
    assert_null(cq_cmf_mask_ffn_row(m, 2, 0));
    /* sparse index */
    assert_int_equal(cq_cmf_index_count(c), 2);
    const cq_cmf_index_entry *e = cq_cmf_index_at(c, 1);
    assert_int_equal(e->layer_idx, 1);
    assert_int_equal(e->n_groups, 1);
    assert_int_equal(e->n_heads, 2);
    assert_int_equal(cq_rd16(e->groups), 1);
    assert_int_equal(e->heads[1], 1);
    assert_null(cq_cmf_index_at(c, 2));
    cq_cmf_close(c);
}

/* num_loops 2 with masks: LOOP_MASKS, FFN rows per virtual layer; a
 * skill with base_dir_hash: SKILL_FILE. */
static void test_loop_masks_and_skill_file(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_loops");
    const char *path = tu_path(dir, "l.cmf");
    write_exposure_file(path, ",\"num_loops\":2", ",\"base_dir_hash\":\"0123456789abcdef\"", true);
    cq_cmf *c = reopen(path);
    cq_cmf_info info;
    cq_cmf_get_info(c, &info);
    assert_int_equal(info.features, CQ_FEATURE_TENSOR_DIR | CQ_FEATURE_BINARY_MASKS | CQ_FEATURE_LOOP_MASKS |
                                        CQ_FEATURE_SKILL_FILE);
    const cq_cmf_mask *m = cq_cmf_mask_at(c, 0);
    assert_true(m->loop_layout);
    assert_int_equal(m->ffn_rows, 4);
    /* row = pass * L + layer, 2 bytes each: {FF FF} {0F F0} {03 01} {03 55} */
    assert_int_equal(cq_cmf_mask_ffn_row(m, 1, 0)[1], 0xF0);
    assert_int_equal(cq_cmf_mask_ffn_row(m, 0, 1)[0], 0x03);
    assert_int_equal(cq_cmf_mask_ffn_row(m, 1, 1)[1], 0x55);
    assert_null(cq_cmf_mask_ffn_row(m, 0, 2));
    assert_int_equal(cq_cmf_mask_head_row(m, 0)[0], 0xAA);
    assert_int_equal(cq_cmf_mask_head_row(m, 1)[0], 0x01);
    assert_false(cq_cmf_mask_layer_alive(m, 0)); /* gate byte 0x02 */
    assert_true(cq_cmf_mask_layer_alive(m, 1));
    cq_cmf_close(c);
}

/* ---- many names: O(1) lookup, and a head too big for the gap ---- */
static void test_many_tensors_lookup(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_many");
    const char *path = tu_path(dir, "m.cmf");
    enum { N = 1500 };
    cq_cmf_writer *w = NULL;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);
    char name[64];
    for (int i = 0; i < N; i++) {
        uint8_t v[3] = {(uint8_t)i, (uint8_t)(i >> 8), 0xAB};
        uint64_t s = 3;
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", i);
        assert_int_equal(cq_cmf_writer_add(w, name, CQ_DTYPE_U8, 1, &s, v, 3), CQ_OK);
    }
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
    cq_cmf *c = reopen(path);
    assert_int_equal(cq_cmf_verify(c, NULL, NULL, NULL), CQ_OK);
    /* header + directory (~140 KB) did not fit before the data: they follow it */
    assert_true(cq_cmf_section_get(c, CQ_CMF_SEC_HEADER).off > cq_cmf_section_get(c, CQ_CMF_SEC_DATA).off);
    assert_true(cq_cmf_section_get(c, CQ_CMF_SEC_DIR).off > cq_cmf_section_get(c, CQ_CMF_SEC_HEADER).off);
    for (int i = N - 1; i >= 0; i--) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", i);
        const cq_tensor_view *t = cq_cmf_find(c, name);
        assert_non_null(t);
        assert_string_equal(t->name, name);
        assert_int_equal(t->data[0], (uint8_t)i);
        assert_int_equal(t->data[1], (uint8_t)(i >> 8));
    }
    assert_null(cq_cmf_find(c, "model.layers.1500.mlp.gate_proj.weight"));
    assert_null(cq_cmf_find(c, "model.layers.1.mlp.gate_proj.weigh"));
    cq_cmf_close(c);
    /* A small file keeps the ordinary layout: header at 128. */
    path = tu_path(dir, "small.cmf");
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, tf_default_header, strlen(tf_default_header)), CQ_OK);
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
    c = reopen(path);
    assert_int_equal(cq_cmf_section_get(c, CQ_CMF_SEC_HEADER).off, 128);
    assert_int_equal(cq_cmf_section_get(c, CQ_CMF_SEC_DIR).off, 128 + cq_cmf_section_get(c, CQ_CMF_SEC_HEADER).len);
    assert_int_equal(cq_cmf_section_get(c, CQ_CMF_SEC_DATA).off, 4096);
    assert_int_equal(cq_cmf_tensor_count(c), 0);
    cq_cmf_close(c);
}

/* ---- verify: one flipped byte in each kind of section ---- */
static uint8_t *g_file;
static size_t g_file_len;

/* As `cortiq verify` opens: every open-time check off, verify reports. */
static const cq_cmf_open_opts k_verify_opts = {.no_verify = true, .no_envelope_hashes = true};

/* The default open refuses a damaged header or section naming it
 * (open_needle); damage in a tensor opens, and checking that tensor fails. */
static void flip_and_verify(size_t at, uint8_t mask, const char *needle, const char *open_needle) {
    uint8_t *copy = malloc(g_file_len);
    memcpy(copy, g_file, g_file_len);
    copy[at] ^= mask;
    cq_cmf *c = NULL;
    cq_status s = cq_cmf_open_memory(copy, g_file_len, &c);
    if (open_needle) {
        if (s != CQ_ERR_HASH || !strstr(cq_last_error(), open_needle))
            fprintf(stderr, "default open after flip at %zu: %s\n", at, cq_last_error());
        assert_int_equal(s, CQ_ERR_HASH);
        assert_non_null(strstr(cq_last_error(), open_needle));
        assert_non_null(strstr(cq_last_error(), "cortiq verify"));
    } else {
        assert_int_equal(s, CQ_OK);
        size_t bad = 0;
        for (size_t i = 0; i < cq_cmf_tensor_count(c); i++)
            bad += cq_cmf_check_tensor(cq_cmf_tensor_at(c, i)) == CQ_ERR_HASH;
        assert_int_equal(bad, 1);
        cq_cmf_close(c);
    }
    c = NULL;
    s = cq_cmf_open_memory_ex(copy, g_file_len, &k_verify_opts, &c);
    if (s != CQ_OK) fprintf(stderr, "open after flip at %zu: %s\n", at, cq_last_error());
    assert_int_equal(s, CQ_OK);
    size_t problems = 0;
    s = cq_cmf_verify(c, &problems, NULL, NULL);
    if (s != CQ_ERR_HASH || !strstr(cq_last_error(), needle))
        fprintf(stderr, "flip at %zu: %s: %s\n", at, cq_status_str(s), cq_last_error());
    assert_int_equal(s, CQ_ERR_HASH);
    assert_int_equal(problems, 1);
    assert_non_null(strstr(cq_last_error(), needle));
    cq_cmf_close(c);
    free(copy);
}

static void test_verify_flipped_bytes(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_flip");
    const char *path = tu_path(dir, "f.cmf");
    write_exposure_file(path, "", "", false);
    g_file = tu_read_file(path, &g_file_len);
    assert_non_null(g_file);
    cq_cmf *c = NULL;
    assert_int_equal(cq_cmf_open_memory(g_file, g_file_len, &c), CQ_OK);
    cq_cmf_section hdr = cq_cmf_section_get(c, CQ_CMF_SEC_HEADER), dirs = cq_cmf_section_get(c, CQ_CMF_SEC_DIR);
    cq_cmf_section vocab = cq_cmf_section_get(c, CQ_CMF_SEC_VOCAB);
    cq_cmf_section index = cq_cmf_section_get(c, CQ_CMF_SEC_INDEX);
    const cq_tensor_view *t = cq_cmf_find(c, "skill.sql.model.w");
    size_t tensor_at = (size_t)t->file_offset + 5;
    size_t blob_at = (size_t)(cq_cmf_mask_at(c, 1)->blob - g_file);
    cq_cmf_close(c);
    const uint8_t *arch = memmem(g_file + hdr.off, hdr.len, "\"tiny\"", 6);
    assert_non_null(arch);
    flip_and_verify(tensor_at, 0x10, "tensor 'skill.sql.model.w': hash64 mismatch", NULL);
    flip_and_verify((size_t)(arch - g_file) + 2, 0x20, "section 'header'", "header section is damaged"); /* "tIny" */
    flip_and_verify((size_t)dirs.off + 16 + 8 + 4 * 5, 0x01, "section 'dir'", "directory section is damaged");
    flip_and_verify((size_t)vocab.off + 3, 0x01, "section 'vocab'", "tokenizer section is damaged");
    flip_and_verify(blob_at, 0x04, "section 'masks'", "masks section is damaged");
    flip_and_verify((size_t)index.off + 8 + 16, 0x01, "section 'index'", "sparse index section is damaged");
    /* Two damages: both counted, the first named. */
    uint8_t *copy = malloc(g_file_len);
    memcpy(copy, g_file, g_file_len);
    copy[tensor_at] ^= 1;
    copy[vocab.off] ^= 1;
    assert_int_equal(cq_cmf_open_memory_ex(copy, g_file_len, &k_verify_opts, &c), CQ_OK);
    size_t problems = 0;
    assert_int_equal(cq_cmf_verify(c, &problems, NULL, NULL), CQ_ERR_HASH);
    assert_int_equal(problems, 2);
    assert_non_null(strstr(cq_last_error(), "section 'vocab'"));
    assert_non_null(strstr(cq_last_error(), "1 more"));
    cq_cmf_close(c);
    free(copy);
    free(g_file);
}

/* ---- verify progress and cancellation ---- */
typedef struct prog {
    uint64_t last_done, total;
    int calls, cancel_at;
} prog;

static int on_progress(uint64_t done, uint64_t total, void *user) {
    prog *p = user;
    assert_true(done >= p->last_done);
    assert_true(done <= total);
    p->last_done = done;
    p->total = total;
    return ++p->calls == p->cancel_at;
}

static void test_verify_progress(void **st) {
    (void)st;
    const char *dir = tu_tmpdir("cmf_prog");
    const char *path = tu_path(dir, "p.cmf");
    write_exposure_file(path, "", "", false);
    cq_cmf *c = reopen(path);
    prog p = {0, 0, 0, 0};
    assert_int_equal(cq_cmf_verify(c, NULL, on_progress, &p), CQ_OK);
    cq_cmf_info info;
    cq_cmf_get_info(c, &info);
    /* header + dir + masks + vocab + index + two 64-byte tensors */
    assert_int_equal(p.total, info.header_len + info.dir_len + info.masks_len + info.vocab_len + info.index_len + 128);
    assert_int_equal(p.last_done, p.total);
    prog q = {0, 0, 0, 2};
    assert_int_equal(cq_cmf_verify(c, NULL, on_progress, &q), CQ_ERR_INTERRUPTED);
    assert_int_equal(q.calls, 2);
    cq_cmf_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash64_vectors),
        cmocka_unit_test(test_hash64_streaming),
        cmocka_unit_test(test_roundtrip_all_dtypes),
        cmocka_unit_test(test_roundtrip_shapes),
        cmocka_unit_test(test_exposure),
        cmocka_unit_test(test_loop_masks_and_skill_file),
        cmocka_unit_test(test_many_tensors_lookup),
        cmocka_unit_test(test_verify_flipped_bytes),
        cmocka_unit_test(test_verify_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
