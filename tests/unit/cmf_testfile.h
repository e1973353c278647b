/*
 * cmf_testfile.h — a hand assembler for CMF v2 files in memory, used by the
 * CMF tests to build valid files byte by byte (independently of the
 * library's writer) and then damage exactly one thing. Header-only: each
 * test program includes it once.
 *
 * Layout is the ordinary writer's: envelope, header at 128, directory after
 * it, data at the next 4096 boundary, then masks, vocab, index. Record
 * hashes are computed from the data unless `keep_hash` is set; the header
 * and directory hashes are filled in.
 */
#ifndef CQ_CMF_TESTFILE_H
#define CQ_CMF_TESTFILE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq.h"

#define TF_MAX_TENSORS 16

typedef struct tf_tensor {
    const char *name;
    size_t name_len; /* 0: strlen(name) */
    uint8_t dtype, ndim;
    uint32_t shape[6];
    uint64_t off, nbytes, hash;
    int keep_hash;
} tf_tensor;

typedef struct tf_file {
    const char *header; /* JSON; NULL: tf_default_header */
    size_t header_len;  /* 0: strlen */
    tf_tensor t[TF_MAX_TENSORS];
    int nt;
    const uint8_t *data;
    size_t data_len;
    const uint8_t *masks, *vocab, *index;
    size_t masks_len, vocab_len, index_len;
    uint32_t features; /* 0: TENSOR_DIR */
} tf_file;

/* A minimal header that satisfies the schema. */
static const char tf_default_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
    "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
    "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
    "\"rms_norm_eps\":1e-6}}";

static inline void tf_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static inline void tf_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void tf_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t tf_get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* Envelope field offsets. */
enum { TF_VERSION = 4, TF_FEATURES = 12, TF_HDR_OFF = 16, TF_HDR_LEN = 24, TF_DIR_OFF = 32, TF_DIR_LEN = 40,
       TF_DATA_OFF = 48, TF_DATA_LEN = 56, TF_MASKS_OFF = 64, TF_MASKS_LEN = 72, TF_VOCAB_OFF = 80,
       TF_VOCAB_LEN = 88, TF_INDEX_OFF = 96, TF_INDEX_LEN = 104, TF_HDR_HASH = 112, TF_DIR_HASH = 120 };

/* Offset of record i's field inside the file (dir_off from the envelope). */
static inline size_t tf_rec(const uint8_t *f, int i) { return (size_t)tf_get64(f + TF_DIR_OFF) + 16 + 56 * (size_t)i; }

static inline uint8_t *tf_assemble(const tf_file *in, size_t *out_len) {
    const char *hdr = in->header ? in->header : tf_default_header;
    size_t hlen = in->header_len ? in->header_len : strlen(hdr);
    size_t pool_len = 0;
    for (int i = 0; i < in->nt; i++) pool_len += in->t[i].name_len ? in->t[i].name_len : strlen(in->t[i].name);
    size_t dir_len = 16 + 56 * (size_t)in->nt + pool_len;
    size_t dir_off = 128 + hlen;
    size_t data_off = (dir_off + dir_len + 4095) / 4096 * 4096;
    size_t pos = data_off + in->data_len;
    size_t masks_off = in->masks_len ? pos : 0;
    pos += in->masks_len;
    size_t vocab_off = in->vocab_len ? pos : 0;
    pos += in->vocab_len;
    size_t index_off = in->index_len ? pos : 0;
    pos += in->index_len;
    uint8_t *f = calloc(1, pos);
    memcpy(f, "CMF\x01", 4);
    tf_put32(f + TF_VERSION, 2);
    tf_put32(f + TF_FEATURES, in->features ? in->features : CQ_FEATURE_TENSOR_DIR);
    tf_put64(f + TF_HDR_OFF, 128);
    tf_put64(f + TF_HDR_LEN, hlen);
    tf_put64(f + TF_DIR_OFF, dir_off);
    tf_put64(f + TF_DIR_LEN, dir_len);
    tf_put64(f + TF_DATA_OFF, data_off);
    tf_put64(f + TF_DATA_LEN, in->data_len);
    tf_put64(f + TF_MASKS_OFF, masks_off);
    tf_put64(f + TF_MASKS_LEN, in->masks_len);
    tf_put64(f + TF_VOCAB_OFF, vocab_off);
    tf_put64(f + TF_VOCAB_LEN, in->vocab_len);
    tf_put64(f + TF_INDEX_OFF, index_off);
    tf_put64(f + TF_INDEX_LEN, in->index_len);
    memcpy(f + 128, hdr, hlen);
    uint8_t *d = f + dir_off;
    tf_put64(d, (uint64_t)in->nt);
    tf_put64(d + 8, 16 + 56 * (uint64_t)in->nt);
    size_t name_at = 0;
    for (int i = 0; i < in->nt; i++) {
        const tf_tensor *t = &in->t[i];
        size_t nl = t->name_len ? t->name_len : strlen(t->name);
        uint8_t *r = d + 16 + 56 * i;
        tf_put32(r, (uint32_t)name_at);
        tf_put16(r + 4, (uint16_t)nl);
        r[6] = t->dtype;
        r[7] = t->ndim;
        for (int k = 0; k < 6; k++) tf_put32(r + 8 + 4 * k, t->shape[k]);
        tf_put64(r + 32, t->off);
        tf_put64(r + 40, t->nbytes);
        uint64_t h = t->hash;
        if (!t->keep_hash && t->off + t->nbytes <= in->data_len) h = cq_hash64(in->data + t->off, t->nbytes);
        tf_put64(r + 48, h);
        memcpy(d + 16 + 56 * in->nt + name_at, t->name, nl);
        name_at += nl;
    }
    if (in->data_len) memcpy(f + data_off, in->data, in->data_len);
    if (in->masks_len) memcpy(f + masks_off, in->masks, in->masks_len);
    if (in->vocab_len) memcpy(f + vocab_off, in->vocab, in->vocab_len);
    if (in->index_len) memcpy(f + index_off, in->index, in->index_len);
    tf_put64(f + TF_HDR_HASH, cq_hash64(f + 128, hlen));
    tf_put64(f + TF_DIR_HASH, cq_hash64(d, dir_len));
    *out_len = pos;
    return f;
}

#endif
