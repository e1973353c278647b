/*
 * cmf.h — the CMF v2 container as the rest of the library sees it, beyond
 * the public API in cortiq.h: the six envelope sections, the parsed header
 * JSON, the task-mask catalog and sparse index, the skills registry, shard
 * coordinates, the streaming hash64, and writer extras.
 *
 * Everything returned points into the open container (its mapping or its
 * parsed JSON) and stays valid until cq_cmf_close().
 */
#ifndef CQ_FORMAT_CMF_H
#define CQ_FORMAT_CMF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/base.h"

/* ---- layout constants ---------------------------------------------------- */
#define CQ_CMF_MAGIC "CMF\x01"
#define CQ_CMF_VERSION 2u
#define CQ_CMF_ENVELOPE_LEN 128u
#define CQ_CMF_DIR_RECORD_LEN 56u
#define CQ_CMF_DATA_ALIGN 4096u        /* data_off */
#define CQ_CMF_TENSOR_ALIGN 64u        /* every tensor off */
#define CQ_CMF_LARGE_TENSOR_MIN 16384u /* payloads this big are written ... */
#define CQ_CMF_LARGE_TENSOR_ALIGN 4096u /* ... at this alignment */
#define CQ_CMF_SUPPORTED_FEATURES 0x67u

/* ---- streaming hash64 ---------------------------------------------------- */
typedef struct cq_hash64_state {
    uint64_t acc;   /* XOR fold of the finished words */
    uint64_t words; /* finished words */
    uint64_t len;   /* bytes seen */
    uint8_t pend[8];
    unsigned npend;
} cq_hash64_state;
void cq_hash64_init(cq_hash64_state *st);
void cq_hash64_update(cq_hash64_state *st, const void *data, size_t len);
uint64_t cq_hash64_final(const cq_hash64_state *st);
/* cq_hash64_update with the whole words of a long span split over `pool`
 * (the hash is an XOR fold of per-word terms, so pieces combine exactly).
 * Spans under CQ_HASH64_PAR_MIN, a NULL pool or a one-thread pool hash on
 * the calling thread. */
#define CQ_HASH64_PAR_MIN (4u << 20)
void cq_hash64_update_pool(cq_hash64_state *st, const void *data, size_t len, cq_pool *pool);
/* For a caller that hashes a span in pieces on its own threads (a copy that
 * hashes what it moves, cq_backend_vtbl.bind_weight_hashing): the fold of
 * `nwords` whole 8-byte words that start at word `first` of the span. The
 * XOR of the folds of all the span's whole words, finished by
 * cq_hash64_folded (which reads only the span's last len % 8 bytes), is the
 * span's cq_hash64. */
uint64_t cq_hash64_fold(const void *words, uint64_t nwords, uint64_t first);
/* Which word fold this CPU runs: "avx512" or "portable" (CORTIQ_HASH_PORTABLE=1 forces the latter). */
const char *cq_hash64_impl(void);
uint64_t cq_hash64_folded(uint64_t acc, const void *data, size_t len);

/* The check of cq_cmf_check_tensor in two halves, for a backend that hashes
 * the payload while it copies it: whether the tensor still needs its check
 * (its container verifies and it has not matched yet), and the comparison of
 * a hash computed elsewhere with its record (a match is remembered; a
 * mismatch is CQ_ERR_HASH with cq_cmf_check_tensor's message). */
bool cq_cmf_tensor_unchecked(const cq_tensor_view *t);
cq_status cq_cmf_check_tensor_hash(const cq_tensor_view *t, uint64_t computed);

/* ---- sections ------------------------------------------------------------ */
typedef enum cq_cmf_section_id {
    CQ_CMF_SEC_HEADER = 0,
    CQ_CMF_SEC_DIR,
    CQ_CMF_SEC_DATA,
    CQ_CMF_SEC_MASKS,
    CQ_CMF_SEC_VOCAB,
    CQ_CMF_SEC_INDEX,
    CQ_CMF_SEC_COUNT
} cq_cmf_section_id;

typedef struct cq_cmf_section {
    uint64_t off, len; /* absolute; len 0 = absent (off is then meaningless) */
} cq_cmf_section;

const char *cq_cmf_section_name(cq_cmf_section_id id); /* "header", "dir", ... */
cq_cmf_section cq_cmf_section_get(const cq_cmf *cmf, cq_cmf_section_id id);
/* Bytes of a section inside the mapping (NULL with *len 0 when absent). */
const uint8_t *cq_cmf_section_bytes(const cq_cmf *cmf, cq_cmf_section_id id, size_t *len);
/* The whole file / buffer. */
const uint8_t *cq_cmf_bytes(const cq_cmf *cmf, size_t *len);
/* Envelope header_hash (0x70) and dir_hash (0x78) as stored. */
uint64_t cq_cmf_stored_header_hash(const cq_cmf *cmf);
uint64_t cq_cmf_stored_dir_hash(const cq_cmf *cmf);

/* ---- header JSON --------------------------------------------------------- */
/* The parsed, schema-checked header (read-only). */
const cJSON *cq_cmf_header(const cq_cmf *cmf);
const cJSON *cq_cmf_arch(const cq_cmf *cmf);
/* The chat bundle object, or NULL when absent/null. */
const cJSON *cq_cmf_tokenizer_config(const cq_cmf *cmf);
/* Skills registry: record i of header.skills (an object with at least "id"). */
size_t cq_cmf_skill_count(const cq_cmf *cmf);
const cJSON *cq_cmf_skill(const cq_cmf *cmf, size_t i);
/* Shard coordinates from header.shard; false for a plain file. */
bool cq_cmf_shard(const cq_cmf *cmf, uint64_t *no, uint64_t *count);

/* The header's generation defaults (format/gen_defaults.h; all unset when it
 * has none). Free *out with cq_gen_defaults_free. */
struct cq_gen_defaults;
cq_status cq_cmf_gen_defaults(const cq_cmf *cmf, struct cq_gen_defaults *out);

/* Validate a header JSON document against the schema (§2 of the format
 * digest). CQ_ERR_PARSE naming the key path on failure. Used by the reader
 * and by the writer before anything is written. */
cq_status cq_cmf_header_check(const cJSON *root);

/* ---- task masks (masks section) ------------------------------------------ */
typedef enum cq_mask_priority {
    CQ_MASK_FALLBACK = 0,
    CQ_MASK_NORMAL = 1,
    CQ_MASK_PRIMARY = 2
} cq_mask_priority;

typedef struct cq_cmf_mask {
    uint32_t task_id;
    const char *name;        /* from the meta JSON */
    const char *description; /* NULL when absent */
    const char *parent;      /* NULL when absent */
    float sparsity;
    cq_mask_priority priority;
    bool has_hot_pack;
    bool has_expert_fields;
    bool loop_layout;        /* FFN rows per virtual layer (pass-major) */
    const cJSON *meta;       /* the entry's JSON object (quality, ...) */
    const uint8_t *blob;     /* inside the mapping */
    uint64_t blob_len;
    /* Geometry, from arch: bytes per FFN row / head row / expert row,
     * gate bytes, and the number of FFN rows stored (L or L*loops). */
    uint64_t ffn_row_bytes, head_row_bytes, gate_bytes, expert_row_bytes;
    uint64_t ffn_rows, num_layers;
} cq_cmf_mask;

size_t cq_cmf_mask_count(const cq_cmf *cmf);
const cq_cmf_mask *cq_cmf_mask_at(const cq_cmf *cmf, size_t i);
const cq_cmf_mask *cq_cmf_mask_find(const cq_cmf *cmf, const char *name);
const char *cq_cmf_mask_default_task(const cq_cmf *cmf); /* NULL without masks */
const cJSON *cq_cmf_masks_meta(const cq_cmf *cmf);        /* NULL without masks */
/* Rows of one mask (bit i of a row: item i active, LSB-first). `pass` is
 * the loop pass; a legacy (physical-row) mask serves every pass with the
 * same row. NULL when out of range / absent (expert rows without the
 * expert area). */
const uint8_t *cq_cmf_mask_ffn_row(const cq_cmf_mask *m, uint64_t layer, uint64_t pass);
const uint8_t *cq_cmf_mask_head_row(const cq_cmf_mask *m, uint64_t layer);
const uint8_t *cq_cmf_mask_expert_row(const cq_cmf_mask *m, uint64_t layer);
/* Layer gate: alive unless its bit is clear; layers beyond the list read
 * as alive. */
bool cq_cmf_mask_layer_alive(const cq_cmf_mask *m, uint64_t layer);

/* ---- sparse index (deprecation-pending, parsed and bounds-checked) -------- */
typedef struct cq_cmf_index_entry {
    uint32_t task_id, layer_idx, n_groups, n_heads;
    const uint8_t *groups; /* n_groups little-endian u16, unaligned */
    const uint8_t *heads;  /* n_heads u8 */
} cq_cmf_index_entry;
size_t cq_cmf_index_count(const cq_cmf *cmf);
const cq_cmf_index_entry *cq_cmf_index_at(const cq_cmf *cmf, size_t i);

/* ---- writer extras ------------------------------------------------------- */
/* Raw masks section and sparse index to carry into the file (copied), e.g.
 * from another container's cq_cmf_section_bytes(). They are validated
 * against the header's arch when the written file is re-opened. */
cq_status cq_cmf_writer_set_masks(cq_cmf_writer *w, const void *masks, size_t masks_len, const void *index,
                                  size_t index_len);
/* The path of the temporary file while writing (tests). */
const char *cq_cmf_writer_temp_path(const cq_cmf_writer *w);

#endif /* CQ_FORMAT_CMF_H */
