/*
 * cmf_access.c — read-only accessors of an open container (sections,
 * envelope facts, the info summary, tokenizer bytes) and whole-tensor
 * dequantization through the codec layer.
 */
#include <inttypes.h>
#include <string.h>

#include "format/cmf_impl.h"

cq_cmf_section cq_cmf_section_get(const cq_cmf *c, cq_cmf_section_id id) {
    cq_cmf_section none = {0, 0};
    if (!c || (unsigned)id >= CQ_CMF_SEC_COUNT) return none;
    return c->sec[id];
}

const uint8_t *cq_cmf_section_bytes(const cq_cmf *c, cq_cmf_section_id id, size_t *len) {
    if (len) *len = 0;
    if (!c || (unsigned)id >= CQ_CMF_SEC_COUNT || c->sec[id].len == 0) return NULL;
    if (len) *len = (size_t)c->sec[id].len;
    return c->base + c->sec[id].off;
}

const uint8_t *cq_cmf_bytes(const cq_cmf *c, size_t *len) {
    if (len) *len = c ? c->size : 0;
    return c ? c->base : NULL;
}

uint64_t cq_cmf_stored_header_hash(const cq_cmf *c) { return c ? c->header_hash : 0; }
uint64_t cq_cmf_stored_dir_hash(const cq_cmf *c) { return c ? c->dir_hash : 0; }

cq_status cq_cmf_get_info(const cq_cmf *c, cq_cmf_info *out) {
    if (!c || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    out->version = c->version;
    out->features = c->features;
    out->file_size = c->size;
    out->arch_name = c->arch_name;
    out->quant_type = c->quant_type;
    out->tensor_count = c->n_tensors;
    out->skill_count = c->n_skills;
    out->mask_count = c->n_masks;
    out->has_tokenizer = c->sec[CQ_CMF_SEC_VOCAB].len > 0;
    out->has_chat_template = c->chat_template != NULL;
    out->header_len = c->sec[CQ_CMF_SEC_HEADER].len;
    out->dir_len = c->sec[CQ_CMF_SEC_DIR].len;
    out->data_len = c->sec[CQ_CMF_SEC_DATA].len;
    out->masks_len = c->sec[CQ_CMF_SEC_MASKS].len;
    out->vocab_len = c->sec[CQ_CMF_SEC_VOCAB].len;
    out->index_len = c->sec[CQ_CMF_SEC_INDEX].len;
    return CQ_OK;
}

const char *cq_cmf_header_json(const cq_cmf *c, size_t *len) {
    size_t n = 0;
    const uint8_t *p = cq_cmf_section_bytes(c, CQ_CMF_SEC_HEADER, &n);
    if (len) *len = n;
    return (const char *)p;
}

const uint8_t *cq_cmf_tokenizer_json(const cq_cmf *c, size_t *len) {
    return cq_cmf_section_bytes(c, CQ_CMF_SEC_VOCAB, len);
}

cq_status cq_cmf_dequantize(const cq_tensor_view *t, float *out, size_t out_len) {
    if (!t) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_dequantize: tensor is NULL");
    if (out_len < t->nelem)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor '%s': output holds %zu floats, the tensor has %" PRIu64, t->name,
                       out_len, t->nelem);
    if (t->nelem == 0) return CQ_OK;
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_dequantize: output is NULL");
    if (!cq_codec_can_decode(t->dtype))
        return cq_fail(CQ_ERR_UNSUPPORTED, "tensor '%s': decoding dtype %s is not supported yet", t->name,
                       cq_dtype_name(t->dtype));
    CQ_TRY(cq_cmf_check_tensor(t));
    uint64_t rows = 0, cols = 0;
    cq_codec_rows(t->ndim, t->shape, &rows, &cols);
    cq_status s = cq_codec_dequant_rows(t->dtype, t->ndim, t->shape, t->data, t->nbytes, 0, rows, out);
    if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s': ", t->name);
    return CQ_OK;
}
