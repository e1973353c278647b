/*
 * cmf_writer_finish.c — closing a streaming write: the sections after the
 * data, the final header JSON (with section_hashes), the directory, the
 * feature bits and the envelope; then fsync, re-open + full verify of the
 * temporary file, and the rename into place (see cmf_writer.c for the
 * layout and the safety rules).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "format/cmf_impl.h"
#include "format/jsonutil.h"

/* Replace header.section_hashes with the hashes of the present sections
 * (or drop it when none is present). */
static cq_status set_section_hashes(cq_cmf_writer *w) {
    cJSON_DeleteItemFromObjectCaseSensitive(w->header, "section_hashes");
    const struct {
        const char *key;
        const uint8_t *p;
        size_t len;
    } secs[] = {{"masks", w->masks, w->masks_len}, {"vocab", w->vocab, w->vocab_len}, {"index", w->index, w->index_len}};
    if (!w->masks_len && !w->vocab_len && !w->index_len) return CQ_OK;
    cJSON *obj = cJSON_CreateObject();
    if (!obj) return cq_fail(CQ_ERR_NOMEM, "out of memory building section_hashes");
    for (size_t i = 0; i < CQ_ARRAY_LEN(secs); i++) {
        if (!secs[i].len) continue;
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, cq_hash64(secs[i].p, secs[i].len));
        if (!cJSON_AddStringToObject(obj, secs[i].key, hex)) {
            cJSON_Delete(obj);
            return cq_fail(CQ_ERR_NOMEM, "out of memory building section_hashes");
        }
    }
    if (!cJSON_AddItemToObject(w->header, "section_hashes", obj)) {
        cJSON_Delete(obj);
        return cq_fail(CQ_ERR_NOMEM, "out of memory building section_hashes");
    }
    return CQ_OK;
}

static uint32_t feature_bits(const cq_cmf_writer *w) {
    uint32_t f = CQ_FEATURE_TENSOR_DIR;
    if (w->masks_len) {
        f |= CQ_FEATURE_BINARY_MASKS;
        const cJSON *arch = cJSON_GetObjectItemCaseSensitive(w->header, "arch");
        const cJSON *loops = cJSON_GetObjectItemCaseSensitive(arch, "num_loops");
        if (cJSON_IsNumber(loops) && loops->valuedouble > 1) f |= CQ_FEATURE_LOOP_MASKS;
    }
    if (w->quant_2f) f |= CQ_FEATURE_QUANT_2F;
    const cJSON *skills = cJSON_GetObjectItemCaseSensitive(w->header, "skills");
    for (const cJSON *s = cJSON_IsArray(skills) ? skills->child : NULL; s; s = s->next)
        if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s, "base_dir_hash"))) f |= CQ_FEATURE_SKILL_FILE;
    return f;
}

static cq_status build_dir(const cq_cmf_writer *w, uint8_t **out, size_t *len) {
    size_t rec = CQ_CMF_DIR_RECORD_LEN * w->n_recs, n = 16 + rec + w->pool_len;
    uint8_t *d = cq_malloc(n);
    if (!d) return CQ_ERR_NOMEM;
    cq_wr64(d, w->n_recs);
    cq_wr64(d + 8, 16 + rec);
    if (rec) memcpy(d + 16, w->recs, rec);
    if (w->pool_len) memcpy(d + 16 + rec, w->pool, w->pool_len);
    *out = d;
    *len = n;
    return CQ_OK;
}

/* Lay out and write everything after the last tensor, then the envelope. */
static cq_status write_tail(cq_cmf_writer *w) {
    CQ_TRY(set_section_hashes(w));
    char *hdr = NULL;
    size_t hdr_len = 0, dir_len = 0;
    uint8_t *dir = NULL;
    cq_status s = cq_json_print(w->header, &hdr, &hdr_len);
    if (s == CQ_OK) s = build_dir(w, &dir, &dir_len);
    if (s != CQ_OK) goto out;

    cq_cmf_section sec[CQ_CMF_SEC_COUNT] = {{0, 0}};
    sec[CQ_CMF_SEC_DATA] = (cq_cmf_section){CQ_CMF_WRITER_DATA_OFF, w->cursor};
    const struct {
        cq_cmf_section_id id;
        const void *p;
        size_t len;
    } tail[] = {{CQ_CMF_SEC_MASKS, w->masks, w->masks_len},
                {CQ_CMF_SEC_VOCAB, w->vocab, w->vocab_len},
                {CQ_CMF_SEC_INDEX, w->index, w->index_len}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(tail) && s == CQ_OK; i++) {
        if (!tail[i].len) continue;
        sec[tail[i].id] = (cq_cmf_section){w->buf_pos + w->buf_used, tail[i].len};
        s = cq_cmf_writer_stream(w, tail[i].p, tail[i].len);
    }
    if (s != CQ_OK) goto out;
    /* Header + directory in the gap before the data when they fit (the
     * ordinary writer's layout), else after everything else. */
    if ((uint64_t)CQ_CMF_ENVELOPE_LEN + hdr_len + dir_len <= CQ_CMF_WRITER_DATA_OFF) {
        s = cq_cmf_writer_flush(w);
        sec[CQ_CMF_SEC_HEADER] = (cq_cmf_section){CQ_CMF_ENVELOPE_LEN, hdr_len};
        sec[CQ_CMF_SEC_DIR] = (cq_cmf_section){CQ_CMF_ENVELOPE_LEN + hdr_len, dir_len};
        if (s == CQ_OK) s = cq_cmf_writer_pwrite(w, hdr, hdr_len, CQ_CMF_ENVELOPE_LEN);
        if (s == CQ_OK) s = cq_cmf_writer_pwrite(w, dir, dir_len, CQ_CMF_ENVELOPE_LEN + hdr_len);
    } else {
        sec[CQ_CMF_SEC_HEADER] = (cq_cmf_section){w->buf_pos + w->buf_used, hdr_len};
        s = cq_cmf_writer_stream(w, hdr, hdr_len);
        sec[CQ_CMF_SEC_DIR] = (cq_cmf_section){w->buf_pos + w->buf_used, dir_len};
        if (s == CQ_OK) s = cq_cmf_writer_stream(w, dir, dir_len);
        if (s == CQ_OK) s = cq_cmf_writer_flush(w);
    }
    if (s != CQ_OK) goto out;

    uint8_t env[CQ_CMF_ENVELOPE_LEN] = {0};
    memcpy(env, CQ_CMF_MAGIC, 4);
    cq_wr32(env + 4, CQ_CMF_VERSION);
    cq_wr32(env + 8, 0);
    cq_wr32(env + 12, feature_bits(w));
    for (int i = 0; i < CQ_CMF_SEC_COUNT; i++) {
        cq_wr64(env + 16 + 16 * i, sec[i].off);
        cq_wr64(env + 24 + 16 * i, sec[i].len);
    }
    cq_wr64(env + 0x70, cq_hash64(hdr, hdr_len));
    cq_wr64(env + 0x78, cq_hash64(dir, dir_len));
    s = cq_cmf_writer_pwrite(w, env, sizeof env, 0);
out:
    cq_free(hdr);
    cq_free(dir);
    return s;
}

cq_status cq_cmf_writer_finish(cq_cmf_writer *w) {
    CQ_TRY(cq_cmf_writer_usable(w, "cq_cmf_writer_finish"));
    if (w->in_tensor) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_finish: the last tensor was not ended");
    if (!w->header) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_writer_finish: no header was set");

    cq_status s = write_tail(w);
    if (s != CQ_OK) return cq_cmf_writer_poison(w, s);
    /* Read back what is on disk, exactly as a reader will (the pages written
     * through the descriptor are what the mapping sees). */
    cq_cmf *c = NULL;
    const cq_cmf_open_opts all_off = {.no_verify = true, .no_envelope_hashes = true}; /* verify checks them all */
    s = cq_cmf_open_ex(w->tmp, &all_off, &c);
    if (s == CQ_OK) s = cq_cmf_verify(c, NULL, w->progress, w->progress_user);
    cq_cmf_close(c);
    if (s != CQ_OK) {
        if (s != CQ_ERR_INTERRUPTED) cq_fail_prefix(s, "the written file did not read back: ");
        return cq_cmf_writer_poison(w, s);
    }
    /* fsync, rename over the target, fsync the directory */
    s = cq_outfile_commit(&w->out);
    w->fd = -1;
    w->tmp = NULL;
    if (s != CQ_OK) return cq_cmf_writer_poison(w, s);
    w->finished = true;
    return CQ_OK;
}
