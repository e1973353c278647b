/*
 * cmf_impl.h — the open-container struct and the steps of cq_cmf_open,
 * shared by the files of src/format only.
 */
#ifndef CQ_FORMAT_CMF_IMPL_H
#define CQ_FORMAT_CMF_IMPL_H

#include <stdatomic.h>

#include "codec/codec.h"
#include "base/outfile.h"
#include "format/cmf.h"

struct cq_cmf {
    const uint8_t *base; /* the mapping or the caller's buffer */
    size_t size;
    bool mapped;         /* munmap on close */

    uint32_t version, flags, features;
    cq_cmf_section sec[CQ_CMF_SEC_COUNT];
    uint64_t header_hash, dir_hash;

    /* header */
    cJSON *header;
    const cJSON *arch, *tok_config, *skills;
    const char *arch_name, *quant_type, *chat_template;
    size_t n_skills;
    const char **skill_ids;
    bool sec_hash_present[CQ_CMF_SEC_COUNT]; /* section_hashes lists it */
    const char *sec_hash_text[CQ_CMF_SEC_COUNT];

    /* directory */
    cq_tensor_view *tensors;
    size_t n_tensors;
    char *names;       /* all names, NUL-terminated, back to back */
    uint16_t *name_lens;
    uint32_t *slots;   /* open addressing: tensor index + 1, 0 = empty */
    uint64_t *slot_hash;
    size_t slot_mask;

    /* masks + sparse index */
    cJSON *masks_meta;
    const char *default_task;
    cq_cmf_mask *masks;
    size_t n_masks;
    cq_cmf_index_entry *index;
    size_t n_index;

    /* integrity on load (cmf_check.c) */
    char *path;                /* for the messages; NULL when opened from memory */
    bool no_verify;            /* tensor payloads are not checked */
    int hash_threads;          /* cq_cmf_open_opts.threads */
    _Atomic uint64_t *checked; /* bit i: tensor i's payload matched its hash */
    _Atomic(cq_pool *) pool;   /* hashes large tensors; made on first need */
};

/* ---- the writer (cmf_writer.c, cmf_writer_finish.c) ---- */
#define CQ_CMF_WRITER_BUF (1u << 20)
#define CQ_CMF_WRITER_DATA_OFF CQ_CMF_DATA_ALIGN

struct cq_cmf_writer {
    cq_outfile out;  /* the target and its temporary (base/outfile.h) */
    char *path;      /* the target as given */
    const char *tmp; /* out.tmp while the temporary exists */
    int fd;          /* out.fd */
    bool failed, finished;

    /* buffered, append-only stream; the next byte goes to file offset
     * buf_pos + buf_used */
    uint8_t *buf;
    size_t buf_used;
    uint64_t buf_pos;
    uint64_t cursor; /* end of the last payload, relative to data_off */

    cJSON *header;
    uint8_t *vocab, *masks, *index;
    size_t vocab_len, masks_len, index_len;

    uint8_t *recs; /* 56-byte directory records */
    size_t n_recs, cap_recs;
    char *pool;
    size_t pool_len, pool_cap;
    uint64_t *set_hash; /* name set: hash + record index + 1 */
    uint32_t *set_idx;
    size_t set_mask;
    bool quant_2f;

    bool in_tensor;
    uint64_t t_nbytes, t_written;
    cq_hash64_state t_hash;

    cq_progress_fn progress;
    void *progress_user;
};

cq_status cq_cmf_writer_usable(const cq_cmf_writer *w, const char *what);
cq_status cq_cmf_writer_poison(cq_cmf_writer *w, cq_status s); /* marks failed, returns s */
cq_status cq_cmf_writer_pwrite(cq_cmf_writer *w, const void *data, size_t len, uint64_t pos);
cq_status cq_cmf_writer_stream(cq_cmf_writer *w, const void *data, size_t len); /* append */
cq_status cq_cmf_writer_flush(cq_cmf_writer *w);

/* Steps of open, in order; each fails with a status and a message. The
 * check_* steps are skipped as cq_cmf_open_opts says. */
cq_status cq_cmf_check_envelope_hashes(cq_cmf *c); /* header + dir hash64 (cmf_check.c) */
cq_status cq_cmf_parse_header(cq_cmf *c);
cq_status cq_cmf_check_section_hashes(cq_cmf *c);  /* masks / vocab / index (cmf_check.c) */
cq_status cq_cmf_parse_dir(cq_cmf *c);
cq_status cq_cmf_parse_masks(cq_cmf *c);
cq_status cq_cmf_parse_index(cq_cmf *c);
cq_status cq_cmf_check_init(cq_cmf *c);            /* the per-tensor "checked" bitmap */
void cq_cmf_check_free(cq_cmf *c);

/* The container's hashing pool (NULL: hash on the calling thread). */
cq_pool *cq_cmf_hash_pool(const cq_cmf *c);
/* hash64 of a span, on the hashing pool when it is long. */
uint64_t cq_cmf_hash_span(const cq_cmf *c, const uint8_t *p, uint64_t len);
/* Parse a section_hashes value (hex u64, either case). */
bool cq_cmf_parse_hex64(const char *s, uint64_t *out);

/* Schema of the masks meta JSON (cmf_schema.c). */
cq_status cq_cmf_masks_meta_check(const cJSON *root);

/* Arch facts the masks geometry needs (validated by the schema). */
uint64_t cq_cmf_arch_u64(const cq_cmf *c, const char *key, uint64_t dflt);

/* Name lookup over pieces concatenated (no allocation): used by find and
 * find_skill. */
const cq_tensor_view *cq_cmf_find_parts(const cq_cmf *c, const char *const *parts, const size_t *lens,
                                        size_t nparts);

#endif /* CQ_FORMAT_CMF_IMPL_H */
