/*
 * cmf_writer.c — the streaming CMF v2 writer.
 *
 * Layout: the weight blob starts at data_off = 4096 and tensors are
 * appended as they arrive (payloads >= 16 KiB at 4096-byte offsets, smaller
 * ones at 64, zero padding), then the masks, tokenizer and sparse-index
 * sections. The header JSON and the directory are only known at the end:
 * when both fit in the zero gap [128, 4096) they go there (the file then
 * looks exactly like one from the ordinary writer), otherwise they are
 * appended after the last section. The envelope is written last. Readers
 * navigate only through the envelope, and the public Python reader does
 * too, so both layouts read everywhere.
 *
 * Safety: the target goes through cq_outfile (base/outfile.h): only a
 * regular file (or a link to one) is replaced, everything is written to an
 * O_EXCL temporary beside it; on finish the file is fsync'd, re-opened and
 * fully verified, and only then renamed over the target (and the directory
 * fsync'd). A writer freed before finish, or one that failed, removes its
 * temporary file, so no partial file is ever left under the final name. Memory is the directory
 * and the header, never the model.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "format/cmf_impl.h"
#include "format/jsonutil.h"

static const uint8_t k_zeros[4096];

/* Poison the writer after a failure that left it inconsistent. */
cq_status cq_cmf_writer_poison(cq_cmf_writer *w, cq_status s) {
    w->failed = true;
    return s;
}

cq_status cq_cmf_writer_usable(const cq_cmf_writer *w, const char *what) {
    if (!w) return cq_fail(CQ_ERR_INVALID_ARG, "%s: writer is NULL", what);
    if (w->finished) return cq_fail(CQ_ERR_INVALID_ARG, "%s: the writer has already finished", what);
    if (w->failed) return cq_fail(CQ_ERR_INVALID_ARG, "%s: the writer failed earlier and must be freed", what);
    return CQ_OK;
}

/* ---- raw I/O -------------------------------------------------------------- */
cq_status cq_cmf_writer_pwrite(cq_cmf_writer *w, const void *data, size_t len, uint64_t pos) {
    return cq_outfile_pwrite(&w->out, data, len, pos);
}

cq_status cq_cmf_writer_flush(cq_cmf_writer *w) {
    if (!w->buf_used) return CQ_OK;
    CQ_TRY(cq_cmf_writer_pwrite(w, w->buf, w->buf_used, w->buf_pos));
    w->buf_pos += w->buf_used;
    w->buf_used = 0;
    return CQ_OK;
}

cq_status cq_cmf_writer_stream(cq_cmf_writer *w, const void *data, size_t len) {
    if (len == 0) return CQ_OK;
    if (w->buf_used + len > CQ_CMF_WRITER_BUF) CQ_TRY(cq_cmf_writer_flush(w));
    if (len >= CQ_CMF_WRITER_BUF) {
        CQ_TRY(cq_cmf_writer_pwrite(w, data, len, w->buf_pos));
        w->buf_pos += len;
        return CQ_OK;
    }
    memcpy(w->buf + w->buf_used, data, len);
    w->buf_used += len;
    return CQ_OK;
}

static cq_status stream_zeros(cq_cmf_writer *w, uint64_t n) {
    while (n) {
        size_t k = (size_t)CQ_MIN(n, (uint64_t)sizeof k_zeros);
        CQ_TRY(cq_cmf_writer_stream(w, k_zeros, k));
        n -= k;
    }
    return CQ_OK;
}


/* ---- life cycle ----------------------------------------------------------- */
cq_status cq_cmf_writer_create(const char *path, cq_cmf_writer **out) {
    if (!out || !path || !*path) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_create: path or out is NULL");
    *out = NULL;
    cq_cmf_writer *w = cq_calloc(1, sizeof *w);
    if (!w) return CQ_ERR_NOMEM;
    w->fd = -1;
    w->out.fd = -1;
    w->out.slot = -1;
    w->path = cq_strdup(path);
    w->buf = cq_malloc(CQ_CMF_WRITER_BUF);
    if (!w->path || !w->buf) {
        cq_cmf_writer_free(w);
        return CQ_ERR_NOMEM;
    }
    const cq_outfile_opts o = {.format = "CMF"};
    cq_status s = cq_outfile_open(path, &o, &w->out);
    if (s != CQ_OK) {
        cq_cmf_writer_free(w);
        return s;
    }
    w->fd = w->out.fd;
    w->tmp = w->out.tmp;
    w->buf_pos = CQ_CMF_WRITER_DATA_OFF;
    *out = w;
    return CQ_OK;
}

void cq_cmf_writer_free(cq_cmf_writer *w) {
    if (!w) return;
    cq_outfile_abort(&w->out); /* closes and removes the temporary unless finished */
    cq_free(w->path);
    cq_free(w->buf);
    cJSON_Delete(w->header);
    cq_free(w->vocab);
    cq_free(w->masks);
    cq_free(w->index);
    cq_free(w->recs);
    cq_free(w->pool);
    cq_free(w->set_hash);
    cq_free(w->set_idx);
    cq_free(w);
}

const char *cq_cmf_writer_temp_path(const cq_cmf_writer *w) { return w && !w->finished ? w->tmp : NULL; }

void cq_cmf_writer_set_progress(cq_cmf_writer *w, cq_progress_fn fn, void *user) {
    if (!w) return;
    w->progress = fn;
    w->progress_user = user;
}

cq_status cq_cmf_writer_check_space(cq_cmf_writer *w, uint64_t planned_bytes) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_check_space"));
    struct statvfs sv;
    if (fstatvfs(w->fd, &sv) != 0) return CQ_OK; /* unknown: let the writes tell */
    uint64_t avail;
    if (!cq_mul_u64((uint64_t)sv.f_bavail, (uint64_t)sv.f_frsize, &avail)) return CQ_OK;
    if (planned_bytes > avail) {
        char need[32], have[32];
        return cq_fail(CQ_ERR_IO, "not enough free disk space for '%s': need %s, %s available", w->path,
                       cq_fmt_bytes(planned_bytes, need, sizeof need), cq_fmt_bytes(avail, have, sizeof have));
    }
    return CQ_OK;
}

/* ---- header, tokenizer, masks -------------------------------------------- */
cq_status cq_cmf_writer_set_header(cq_cmf_writer *w, const char *json, size_t len) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_set_header"));
    if (!json) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_set_header: json is NULL");
    cJSON *root = NULL;
    CQ_TRY(cq_json_parse(json, len, "header JSON", &root));
    cq_status s = cq_cmf_header_check(root);
    if (s != CQ_OK) {
        cJSON_Delete(root);
        return s;
    }
    cJSON_Delete(w->header);
    w->header = root;
    return CQ_OK;
}

static cq_status copy_blob(const void *src, size_t len, uint8_t **dst, size_t *dst_len) {
    uint8_t *p = NULL;
    if (len) {
        if (!src) return cq_fail(CQ_ERR_INVALID_ARG, "section bytes are NULL");
        p = cq_malloc(len);
        if (!p) return CQ_ERR_NOMEM;
        memcpy(p, src, len);
    }
    cq_free(*dst);
    *dst = p;
    *dst_len = len;
    return CQ_OK;
}

cq_status cq_cmf_writer_set_tokenizer(cq_cmf_writer *w, const void *json, size_t len) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_set_tokenizer"));
    return copy_blob(json, len, &w->vocab, &w->vocab_len);
}

cq_status cq_cmf_writer_set_masks(cq_cmf_writer *w, const void *masks, size_t masks_len, const void *index,
                                  size_t index_len) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_set_masks"));
    CQ_TRY(copy_blob(masks, masks_len, &w->masks, &w->masks_len));
    return copy_blob(index, index_len, &w->index, &w->index_len);
}

/* ---- tensors -------------------------------------------------------------- */
static bool set_contains(const cq_cmf_writer *w, const char *name, size_t len, uint64_t h) {
    if (!w->set_idx) return false;
    for (size_t k = h & w->set_mask; w->set_idx[k]; k = (k + 1) & w->set_mask) {
        if (w->set_hash[k] != h) continue;
        const uint8_t *r = w->recs + CQ_CMF_DIR_RECORD_LEN * (w->set_idx[k] - 1);
        if (cq_rd16(r + 4) == len && memcmp(w->pool + cq_rd32(r), name, len) == 0) return true;
    }
    return false;
}

static void set_put(uint64_t *hs, uint32_t *ix, size_t mask, uint64_t h, uint32_t idx1) {
    size_t k = h & mask;
    while (ix[k]) k = (k + 1) & mask;
    ix[k] = idx1;
    hs[k] = h;
}

/* Room for one more record, its name and its name-set entry. */
static cq_status reserve_tensor(cq_cmf_writer *w, size_t name_len) {
    if (w->n_recs == w->cap_recs) {
        size_t cap = w->cap_recs ? 2 * w->cap_recs : 64;
        uint8_t *r = cq_reallocn(w->recs, cap, CQ_CMF_DIR_RECORD_LEN);
        if (!r) return CQ_ERR_NOMEM;
        w->recs = r;
        w->cap_recs = cap;
    }
    if (w->pool_len + name_len > w->pool_cap) {
        size_t cap = w->pool_cap ? w->pool_cap : 4096;
        while (cap < w->pool_len + name_len) cap *= 2;
        char *p = cq_realloc(w->pool, cap);
        if (!p) return CQ_ERR_NOMEM;
        w->pool = p;
        w->pool_cap = cap;
    }
    size_t slots = w->set_idx ? w->set_mask + 1 : 0;
    if (2 * (w->n_recs + 1) > slots) {
        size_t cap = slots ? 2 * slots : 128;
        uint64_t *hs = cq_calloc(cap, sizeof *hs);
        uint32_t *ix = cq_calloc(cap, sizeof *ix);
        if (!hs || !ix) {
            cq_free(hs);
            cq_free(ix);
            return CQ_ERR_NOMEM;
        }
        for (size_t k = 0; k < slots; k++)
            if (w->set_idx[k]) set_put(hs, ix, cap - 1, w->set_hash[k], w->set_idx[k]);
        cq_free(w->set_hash);
        cq_free(w->set_idx);
        w->set_hash = hs;
        w->set_idx = ix;
        w->set_mask = cap - 1;
    }
    return CQ_OK;
}

static cq_status check_tensor_args(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim,
                                   const uint64_t *shape, uint64_t nbytes, size_t *name_len) {
    if (!name) return cq_fail(CQ_ERR_INVALID_ARG, "tensor name is NULL");
    size_t len = strlen(name);
    if (len > UINT16_MAX)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor name of %zu bytes does not fit the directory (at most 65535)", len);
    if (!cq_utf8_valid((const uint8_t *)name, len))
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor name '%.80s' is not valid UTF-8", name);
    if ((unsigned)dtype >= CQ_DTYPE_COUNT) return cq_fail(CQ_ERR_DTYPE, "tensor '%s': unknown dtype id %d", name, (int)dtype);
    if (ndim < 0 || ndim > CQ_MAX_DIMS)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': ndim %d outside 0..6", name, ndim);
    if (ndim > 0 && !shape) return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': shape is NULL", name);
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] > UINT32_MAX)
            return cq_fail(CQ_ERR_SHAPE, "tensor '%s': dim %d = %" PRIu64 " does not fit the directory's u32", name, d,
                           shape[d]);
        if (!cq_mul_u64(n, shape[d], &n)) return cq_fail(CQ_ERR_SHAPE, "tensor '%s': shape product overflows", name);
    }
    if (cq_codec_size_kind_of(dtype) == CQ_SIZE_FIXED) {
        uint64_t expect = 0;
        cq_status s = cq_codec_nbytes(dtype, ndim, shape, &expect);
        if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s' (%s): ", name, cq_dtype_name(dtype));
        if (expect != nbytes)
            return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': payload is %" PRIu64 " bytes, %s needs %" PRIu64, name,
                           nbytes, cq_dtype_name(dtype), expect);
    }
    if (w->pool_len + len > UINT32_MAX)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': the name pool would exceed 4 GiB", name);
    if (set_contains(w, name, len, cq_hash64(name, len)))
        return cq_fail(CQ_ERR_INVALID_ARG, "duplicate tensor name '%s'", name);
    *name_len = len;
    return CQ_OK;
}

cq_status cq_cmf_writer_begin(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim, const uint64_t *shape,
                              uint64_t nbytes) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_begin"));
    if (w->in_tensor) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_begin: the previous tensor was not ended");
    size_t nlen = 0;
    CQ_TRY(check_tensor_args(w, name, dtype, ndim, shape, nbytes, &nlen));
    if (nbytes >= (16u << 20)) CQ_TRY(cq_cmf_writer_check_space(w, nbytes));
    CQ_TRY(reserve_tensor(w, nlen));

    uint64_t align = nbytes >= CQ_CMF_LARGE_TENSOR_MIN ? CQ_CMF_LARGE_TENSOR_ALIGN : CQ_CMF_TENSOR_ALIGN;
    uint64_t off = cq_align_up_u64(w->cursor, align);
    cq_status s = stream_zeros(w, off - w->cursor);
    if (s != CQ_OK) return cq_cmf_writer_poison(w, s);
    w->cursor = off;

    uint8_t *r = w->recs + CQ_CMF_DIR_RECORD_LEN * w->n_recs;
    memset(r, 0, CQ_CMF_DIR_RECORD_LEN);
    cq_wr32(r, (uint32_t)w->pool_len);
    cq_wr16(r + 4, (uint16_t)nlen);
    r[6] = (uint8_t)dtype;
    r[7] = (uint8_t)ndim;
    for (int d = 0; d < ndim; d++) cq_wr32(r + 8 + 4 * d, (uint32_t)shape[d]);
    cq_wr64(r + 32, off);
    cq_wr64(r + 40, nbytes);
    memcpy(w->pool + w->pool_len, name, nlen);
    set_put(w->set_hash, w->set_idx, w->set_mask, cq_hash64(name, nlen), (uint32_t)(w->n_recs + 1));
    w->pool_len += nlen;
    w->n_recs++;
    if (dtype == CQ_DTYPE_VBIT || dtype == CQ_DTYPE_Q8_2F) w->quant_2f = true;

    w->in_tensor = true;
    w->t_nbytes = nbytes;
    w->t_written = 0;
    cq_hash64_init(&w->t_hash);
    return CQ_OK;
}

static const char *open_tensor_name(const cq_cmf_writer *w, char *buf, size_t len) {
    const uint8_t *r = w->recs + CQ_CMF_DIR_RECORD_LEN * (w->n_recs - 1);
    snprintf(buf, len, "%.*s", (int)CQ_MIN((size_t)cq_rd16(r + 4), len - 1), w->pool + cq_rd32(r));
    return buf;
}

cq_status cq_cmf_writer_write(cq_cmf_writer *w, const void *chunk, size_t len) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_write"));
    if (!w->in_tensor) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_write: no tensor was begun");
    if (len && !chunk) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_write: chunk is NULL");
    char nm[128];
    if (len > w->t_nbytes - w->t_written)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': %" PRIu64 " bytes written past its declared %" PRIu64,
                       open_tensor_name(w, nm, sizeof nm), w->t_written + len - w->t_nbytes, w->t_nbytes);
    cq_status s = cq_cmf_writer_stream(w, chunk, len);
    if (s != CQ_OK) return cq_cmf_writer_poison(w, s);
    cq_hash64_update(&w->t_hash, chunk, len);
    w->t_written += len;
    return CQ_OK;
}

cq_status cq_cmf_writer_end(cq_cmf_writer *w) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_end"));
    if (!w->in_tensor) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_end: no tensor was begun");
    char nm[128];
    if (w->t_written != w->t_nbytes)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': %" PRIu64 " of %" PRIu64 " bytes written",
                       open_tensor_name(w, nm, sizeof nm), w->t_written, w->t_nbytes);
    uint8_t *r = w->recs + CQ_CMF_DIR_RECORD_LEN * (w->n_recs - 1);
    cq_wr64(r + 48, cq_hash64_final(&w->t_hash));
    w->cursor += w->t_nbytes;
    w->in_tensor = false;
    return CQ_OK;
}

cq_status cq_cmf_writer_add(cq_cmf_writer *w, const char *name, cq_dtype dtype, int ndim, const uint64_t *shape,
                            const void *payload, uint64_t nbytes) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_add"));
    if (nbytes && !payload) return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': payload is NULL", name ? name : "?");
    if (nbytes > SIZE_MAX) return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': payload too large", name ? name : "?");
    if (name && (unsigned)dtype < CQ_DTYPE_COUNT && cq_codec_size_kind_of(dtype) == CQ_SIZE_VARIABLE &&
        ndim >= 0 && ndim <= CQ_MAX_DIMS && (ndim == 0 || shape)) {
        /* Whole payload at hand: check its structure now, naming the tensor,
         * rather than at the final re-open. */
        cq_status s = cq_codec_validate(dtype, ndim, shape, payload, nbytes);
        if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s' (%s): ", name, cq_dtype_name(dtype));
    }
    CQ_TRY(cq_cmf_writer_begin(w, name, dtype, ndim, shape, nbytes));
    CQ_TRY(cq_cmf_writer_write(w, payload, (size_t)nbytes));
    return cq_cmf_writer_end(w);
}
