/*
 * cmf_open.c — opening a CMF v2 container: the mapping (or a caller's
 * buffer), the 128-byte envelope, section bounds, then the header,
 * directory, masks and sparse index in the reference reader's order.
 *
 * Checks beyond the reference reader (strict extras, all CQ_ERR_BOUNDS):
 *  - non-empty sections must not overlap the envelope or one another
 *    (no writer produces that; a file that does is damaged or crafted);
 * Offsets of empty sections are ignored, as the format says.
 * Unless the options say otherwise, the recorded hashes of the header,
 * directory and small sections are checked here too (cmf_check.c): before
 * each is parsed, so damage reads as damage, not as a puzzling parse error.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/cmf_impl.h"
#include "format/jsonutil.h"

static const char *const k_section_names[CQ_CMF_SEC_COUNT] = {"header", "dir", "data", "masks", "vocab", "index"};

const char *cq_cmf_section_name(cq_cmf_section_id id) {
    return (unsigned)id < CQ_CMF_SEC_COUNT ? k_section_names[id] : "?";
}

static cq_status parse_envelope(cq_cmf *c) {
    const uint8_t *p = c->base;
    if (c->size < CQ_CMF_ENVELOPE_LEN)
        return cq_fail(CQ_ERR_BOUNDS, "file is %zu bytes, smaller than the %u-byte CMF envelope", c->size,
                       CQ_CMF_ENVELOPE_LEN);
    if (memcmp(p, CQ_CMF_MAGIC, 4) != 0)
        return cq_fail(CQ_ERR_MAGIC, "not a CMF file (magic %02x %02x %02x %02x, expected 43 4d 46 01)", p[0],
                       p[1], p[2], p[3]);
    c->version = cq_rd32(p + 4);
    if (c->version != CQ_CMF_VERSION)
        return cq_fail(CQ_ERR_VERSION, "envelope: unsupported CMF version %u (this reader knows version 2)",
                       c->version);
    c->flags = cq_rd32(p + 8);
    c->features = cq_rd32(p + 12);
    uint32_t unknown = c->features & ~CQ_CMF_SUPPORTED_FEATURES;
    if (unknown)
        return cq_fail(CQ_ERR_FEATURE, "envelope: required_features 0x%x has unsupported bits 0x%x", c->features,
                       unknown);
    for (int i = 0; i < CQ_CMF_SEC_COUNT; i++) {
        c->sec[i].off = cq_rd64(p + 16 + 16 * i);
        c->sec[i].len = cq_rd64(p + 24 + 16 * i);
    }
    c->header_hash = cq_rd64(p + 0x70);
    c->dir_hash = cq_rd64(p + 0x78);

    if (c->sec[CQ_CMF_SEC_HEADER].len == 0) return cq_fail(CQ_ERR_BOUNDS, "envelope: header_len is 0 (required)");
    if (c->sec[CQ_CMF_SEC_DIR].len == 0) return cq_fail(CQ_ERR_BOUNDS, "envelope: dir_len is 0 (required)");
    for (int i = 0; i < CQ_CMF_SEC_COUNT; i++) {
        const cq_cmf_section *s = &c->sec[i];
        if (s->len == 0) continue;
        uint64_t end;
        if (!cq_add_u64(s->off, s->len, &end) || end > c->size)
            return cq_fail(CQ_ERR_BOUNDS,
                           "envelope: %s section [%llu, +%llu) lies outside the file (%zu bytes)",
                           k_section_names[i], (unsigned long long)s->off, (unsigned long long)s->len, c->size);
        if (s->off < CQ_CMF_ENVELOPE_LEN)
            return cq_fail(CQ_ERR_BOUNDS, "envelope: %s section at offset %llu overlaps the 128-byte envelope",
                           k_section_names[i], (unsigned long long)s->off);
    }
    const cq_cmf_section *d = &c->sec[CQ_CMF_SEC_DATA];
    if (d->len > 0 && d->off % CQ_CMF_DATA_ALIGN != 0)
        return cq_fail(CQ_ERR_BOUNDS, "envelope: data_off %llu is not a multiple of 4096",
                       (unsigned long long)d->off);
    for (int i = 0; i < CQ_CMF_SEC_COUNT; i++) {
        for (int j = i + 1; j < CQ_CMF_SEC_COUNT; j++) {
            const cq_cmf_section *a = &c->sec[i], *b = &c->sec[j];
            if (!a->len || !b->len) continue;
            if (a->off < b->off + b->len && b->off < a->off + a->len)
                return cq_fail(CQ_ERR_BOUNDS, "envelope: sections '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                               k_section_names[i], (unsigned long long)a->off,
                               (unsigned long long)(a->off + a->len), k_section_names[j],
                               (unsigned long long)b->off, (unsigned long long)(b->off + b->len));
        }
    }
    return CQ_OK;
}

static cq_status open_common(cq_cmf *c, const cq_cmf_open_opts *o) {
    c->no_verify = o->no_verify;
    c->hash_threads = o->threads;
    CQ_TRY(parse_envelope(c));
    if (!o->no_envelope_hashes) CQ_TRY(cq_cmf_check_envelope_hashes(c));
    CQ_TRY(cq_cmf_parse_header(c));
    if (!o->no_verify) CQ_TRY(cq_cmf_check_section_hashes(c));
    CQ_TRY(cq_cmf_parse_dir(c));
    CQ_TRY(cq_cmf_parse_masks(c));
    CQ_TRY(cq_cmf_parse_index(c));
    if (!o->no_verify) CQ_TRY(cq_cmf_check_init(c));
    return CQ_OK;
}

static const cq_cmf_open_opts k_defaults = {false, false, 0};

cq_status cq_cmf_open_memory_ex(const void *buf, size_t len, const cq_cmf_open_opts *opts, cq_cmf **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_open_memory: out is NULL");
    *out = NULL;
    if (!buf && len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_open_memory: buffer is NULL");
    cq_cmf *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    static const uint8_t empty = 0;
    c->base = buf ? buf : &empty;
    c->size = len;
    cq_status s = open_common(c, opts ? opts : &k_defaults);
    if (s != CQ_OK) {
        cq_cmf_close(c);
        return s;
    }
    *out = c;
    return CQ_OK;
}

cq_status cq_cmf_open_memory(const void *buf, size_t len, cq_cmf **out) {
    return cq_cmf_open_memory_ex(buf, len, NULL, out);
}

cq_status cq_cmf_open_ex(const char *path, const cq_cmf_open_opts *opts, cq_cmf **out) {
    if (!out || !path) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_open: path or out is NULL");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return cq_fail(e == ENOENT ? CQ_ERR_MISSING : CQ_ERR_IO, "cannot open '%s': %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return cq_fail(CQ_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cq_fail(CQ_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return cq_fail(CQ_ERR_BOUNDS, "'%s' is too large to map on this platform", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cq_fail(CQ_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, size, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file */
    cq_cmf *c = cq_calloc(1, sizeof *c);
    char *name = cq_strdup(path);
    if (!c || !name) {
        if (map) munmap(map, size);
        cq_free(c);
        cq_free(name);
        return CQ_ERR_NOMEM;
    }
    static const uint8_t empty = 0;
    c->base = map ? map : &empty;
    c->size = size;
    c->mapped = map != NULL;
    c->path = name;
    cq_status s = open_common(c, opts ? opts : &k_defaults);
    if (s != CQ_OK) {
        cq_fail_prefix(s, "%s: ", path);
        cq_cmf_close(c);
        return s;
    }
    *out = c;
    return CQ_OK;
}

cq_status cq_cmf_open(const char *path, cq_cmf **out) { return cq_cmf_open_ex(path, NULL, out); }

void cq_cmf_close(cq_cmf *c) {
    if (!c) return;
    cq_cmf_check_free(c);
    cJSON_Delete(c->header);
    cJSON_Delete(c->masks_meta);
    cq_free(c->skill_ids);
    cq_free(c->tensors);
    cq_free(c->names);
    cq_free(c->name_lens);
    cq_free(c->slots);
    cq_free(c->slot_hash);
    cq_free(c->masks);
    cq_free(c->index);
    if (c->mapped) munmap((void *)c->base, c->size);
    cq_free(c);
}
