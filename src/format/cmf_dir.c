/*
 * cmf_dir.c — the tensor directory: [u64 count][u64 pool_off][56-byte
 * records][name pool], every record checked before use, and the O(1)
 * name table.
 *
 * Per record (reference order and error kinds): ndim <= 6, name inside the
 * pool and valid UTF-8 (PARSE); dtype id known (DTYPE); off 64-aligned and
 * off + nbytes inside the data section (BOUNDS); shape product without
 * overflow (BOUNDS); nbytes equal to the codec's size rule, or the payload
 * passing the codec's structural validation for variable-size codecs.
 * Duplicate names are PARSE.
 * Strict extras: a name may not contain NUL (the format says the pool has
 * none), and the names together may not be longer than the pool — writers
 * lay names end to end, so more name bytes than pool bytes means names
 * overlap, and refusing that bounds the memory a crafted directory can
 * make us allocate.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format/cmf_impl.h"
#include "format/jsonutil.h"

static void shape_str(const cq_tensor_view *t, char *buf, size_t len) {
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

/* Size rule / structural validation of one payload (the codec layer owns
 * the rules; this decides what a mismatch means for the container). */
static cq_status check_payload(const cq_tensor_view *t) {
    char shp[96];
    switch (cq_codec_size_kind_of(t->dtype)) {
    case CQ_SIZE_FIXED: {
        uint64_t expect = 0;
        cq_status s = cq_codec_nbytes(t->dtype, t->ndim, t->shape, &expect);
        if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s' (%s): ", t->name, cq_dtype_name(t->dtype));
        if (expect != t->nbytes) {
            shape_str(t, shp, sizeof shp);
            return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': nbytes %" PRIu64 " != %" PRIu64 " expected for %s%s",
                           t->name, t->nbytes, expect, cq_dtype_name(t->dtype), shp);
        }
        return CQ_OK;
    }
    case CQ_SIZE_VARIABLE: {
        cq_status s = cq_codec_validate(t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s' (%s): ", t->name, cq_dtype_name(t->dtype));
        return CQ_OK;
    }
    case CQ_SIZE_UNCHECKED:
    default: return CQ_OK; /* u8 and the reserved ids: any length, as the reference reader */
    }
}

static cq_status decode_record(cq_cmf *c, size_t i, const uint8_t *r, const uint8_t *pool, uint64_t pool_len,
                               char *name_dst) {
    cq_tensor_view *t = &c->tensors[i];
    uint32_t name_off = cq_rd32(r);
    uint16_t name_len = cq_rd16(r + 4);
    uint8_t dtype = r[6], ndim = r[7];
    if (ndim > CQ_MAX_DIMS) return cq_fail(CQ_ERR_PARSE, "tensor #%zu: ndim %u > 6", i, ndim);
    if ((uint64_t)name_off + name_len > pool_len)
        return cq_fail(CQ_ERR_PARSE, "tensor #%zu: name [%u, +%u) lies outside the name pool (%" PRIu64 " bytes)",
                       i, name_off, name_len, pool_len);
    const uint8_t *nm = pool + name_off;
    if (!cq_utf8_valid(nm, name_len)) return cq_fail(CQ_ERR_PARSE, "tensor #%zu: name is not valid UTF-8", i);
    if (memchr(nm, 0, name_len)) return cq_fail(CQ_ERR_PARSE, "tensor #%zu: name contains a NUL byte", i);
    memcpy(name_dst, nm, name_len);
    name_dst[name_len] = '\0';
    t->name = name_dst;
    c->name_lens[i] = name_len;
    if (dtype >= CQ_DTYPE_COUNT)
        return cq_fail(CQ_ERR_DTYPE, "tensor '%s': unknown dtype id %u", t->name, dtype);
    t->dtype = (cq_dtype)dtype;
    t->ndim = ndim;
    uint64_t n = 1;
    bool overflow = false;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = cq_rd32(r + 8 + 4 * d);
        if (!cq_mul_u64(n, t->shape[d], &n)) overflow = true;
    }
    uint64_t off = cq_rd64(r + 32);
    t->nbytes = cq_rd64(r + 40);
    t->hash = cq_rd64(r + 48);

    const cq_cmf_section *data = &c->sec[CQ_CMF_SEC_DATA];
    if (off % CQ_CMF_TENSOR_ALIGN != 0)
        return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': offset %" PRIu64 " is not 64-byte aligned", t->name, off);
    uint64_t end;
    if (!cq_add_u64(off, t->nbytes, &end) || end > data->len)
        return cq_fail(CQ_ERR_BOUNDS,
                       "tensor '%s': payload [%" PRIu64 ", +%" PRIu64 ") exceeds the data section (%" PRIu64
                       " bytes)",
                       t->name, off, t->nbytes, data->len);
    if (overflow) return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': shape product overflows", t->name);
    t->nelem = n;
    /* data->len > 0 here unless the payload is empty; an empty payload gets
     * a valid pointer rather than one derived from an ignored offset. */
    t->file_offset = data->len ? data->off + off : 0;
    t->data = data->len ? c->base + data->off + off : c->base;
    t->owner = c;
    t->index = i;
    return check_payload(t);
}

static size_t table_slot(const cq_cmf *c, uint64_t h) { return (size_t)(h & c->slot_mask); }

static cq_status build_name_table(cq_cmf *c) {
    size_t cap = 16;
    while (cap < 2 * c->n_tensors) cap *= 2;
    c->slots = cq_calloc(cap, sizeof *c->slots);
    c->slot_hash = cq_calloc(cap, sizeof *c->slot_hash);
    if (!c->slots || !c->slot_hash) return CQ_ERR_NOMEM;
    c->slot_mask = cap - 1;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const char *nm = c->tensors[i].name;
        uint64_t h = cq_hash64(nm, c->name_lens[i]);
        size_t k = table_slot(c, h);
        while (c->slots[k]) {
            size_t j = c->slots[k] - 1;
            if (c->slot_hash[k] == h && c->name_lens[j] == c->name_lens[i] && memcmp(c->tensors[j].name, nm, c->name_lens[i]) == 0)
                return cq_fail(CQ_ERR_PARSE, "duplicate tensor name '%s' in the directory (records #%zu and #%zu)",
                               nm, j, i);
            k = (k + 1) & c->slot_mask;
        }
        c->slots[k] = (uint32_t)(i + 1);
        c->slot_hash[k] = h;
    }
    return CQ_OK;
}

cq_status cq_cmf_parse_dir(cq_cmf *c) {
    const cq_cmf_section *s = &c->sec[CQ_CMF_SEC_DIR];
    const uint8_t *dir = c->base + s->off;
    uint64_t dlen = s->len;
    if (dlen < 16) return cq_fail(CQ_ERR_PARSE, "tensor directory too short (%" PRIu64 " bytes)", dlen);
    uint64_t count = cq_rd64(dir), pool_off = cq_rd64(dir + 8), rec_bytes, rec_end;
    if (!cq_mul_u64(count, CQ_CMF_DIR_RECORD_LEN, &rec_bytes) || !cq_add_u64(16, rec_bytes, &rec_end))
        return cq_fail(CQ_ERR_PARSE, "tensor directory: record count %" PRIu64 " overflows", count);
    if (rec_end > dlen || pool_off > dlen || pool_off < rec_end)
        return cq_fail(CQ_ERR_PARSE,
                       "tensor directory malformed: count %" PRIu64 ", pool_off %" PRIu64 ", length %" PRIu64,
                       count, pool_off, dlen);
    if (count >= UINT32_MAX) return cq_fail(CQ_ERR_PARSE, "tensor directory: %" PRIu64 " tensors is too many", count);
    const uint8_t *pool = dir + pool_off;
    uint64_t pool_len = dlen - pool_off;

    /* Names first: bounds the copy we make (see the file comment). */
    uint64_t name_bytes = 0;
    for (uint64_t i = 0; i < count; i++) name_bytes += cq_rd16(dir + 16 + CQ_CMF_DIR_RECORD_LEN * i + 4);
    if (name_bytes > pool_len)
        return cq_fail(CQ_ERR_PARSE,
                       "tensor directory: names total %" PRIu64 " bytes but the pool holds %" PRIu64
                       " (names overlap)",
                       name_bytes, pool_len);

    c->n_tensors = (size_t)count;
    c->tensors = cq_calloc(c->n_tensors ? c->n_tensors : 1, sizeof *c->tensors);
    c->name_lens = cq_calloc(c->n_tensors ? c->n_tensors : 1, sizeof *c->name_lens);
    c->names = cq_malloc((size_t)(name_bytes + count + 1));
    if (!c->tensors || !c->name_lens || !c->names) return CQ_ERR_NOMEM;
    char *dst = c->names;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const uint8_t *r = dir + 16 + CQ_CMF_DIR_RECORD_LEN * i;
        CQ_TRY(decode_record(c, i, r, pool, pool_len, dst));
        dst += c->name_lens[i] + 1;
    }
    return build_name_table(c);
}

const cq_tensor_view *cq_cmf_find_parts(const cq_cmf *c, const char *const *parts, const size_t *lens,
                                        size_t nparts) {
    if (!c || !c->slots) return NULL;
    cq_hash64_state st;
    cq_hash64_init(&st);
    size_t total = 0;
    for (size_t p = 0; p < nparts; p++) {
        cq_hash64_update(&st, parts[p], lens[p]);
        total += lens[p];
    }
    uint64_t h = cq_hash64_final(&st);
    for (size_t k = table_slot(c, h); c->slots[k]; k = (k + 1) & c->slot_mask) {
        if (c->slot_hash[k] != h) continue;
        size_t j = c->slots[k] - 1;
        if (c->name_lens[j] != total) continue;
        const char *nm = c->tensors[j].name;
        size_t at = 0;
        bool eq = true;
        for (size_t p = 0; p < nparts && eq; p++) {
            eq = memcmp(nm + at, parts[p], lens[p]) == 0;
            at += lens[p];
        }
        if (eq) return &c->tensors[j];
    }
    return NULL;
}

const cq_tensor_view *cq_cmf_find(const cq_cmf *c, const char *name) {
    if (!name) return NULL;
    size_t len = strlen(name);
    return cq_cmf_find_parts(c, &name, &len, 1);
}

const cq_tensor_view *cq_cmf_find_skill(const cq_cmf *c, const char *skill, const char *name) {
    if (!name) return NULL;
    if (skill) {
        const char *parts[4] = {"skill.", skill, ".", name};
        size_t lens[4] = {6, strlen(skill), 1, strlen(name)};
        const cq_tensor_view *t = cq_cmf_find_parts(c, parts, lens, 4);
        if (t) return t;
    }
    return cq_cmf_find(c, name);
}

size_t cq_cmf_tensor_count(const cq_cmf *c) { return c ? c->n_tensors : 0; }

const cq_tensor_view *cq_cmf_tensor_at(const cq_cmf *c, size_t i) {
    return c && i < c->n_tensors ? &c->tensors[i] : NULL;
}
