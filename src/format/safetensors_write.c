/*
 * safetensors_write.c — a small safetensors writer: tensors are collected
 * (copied) and written in insertion order, the header padded with spaces to
 * a multiple of 8 bytes so the data buffer starts aligned, the file written
 * through cq_outfile (base/outfile.h): a temporary beside the target,
 * renamed into place; only a regular file is ever replaced.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/outfile.h"
#include "codec/codec.h"
#include "format/safetensors.h"

typedef struct wt {
    char *name;
    cq_st_dtype dtype;
    int ndim;
    uint64_t shape[CQ_MAX_DIMS];
    uint8_t *data;
    uint64_t nbytes;
} wt;

struct cq_st_writer {
    wt *t;
    size_t n;
    char **meta; /* key, value pairs */
    size_t n_meta;
};

cq_status cq_st_writer_create(cq_st_writer **out) {
    *out = cq_calloc(1, sizeof **out);
    return *out ? CQ_OK : CQ_ERR_NOMEM;
}

void cq_st_writer_free(cq_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        cq_free(w->t[i].name);
        cq_free(w->t[i].data);
    }
    for (size_t i = 0; i < 2 * w->n_meta; i++) cq_free(w->meta[i]);
    cq_free(w->meta);
    cq_free(w->t);
    cq_free(w);
}

cq_status cq_st_writer_add(cq_st_writer *w, const char *name, cq_st_dtype dtype, int ndim, const uint64_t *shape,
                           const void *data, uint64_t nbytes) {
    if (!w || !name) return cq_fail(CQ_ERR_INVALID_ARG, "safetensors writer: NULL argument");
    if ((unsigned)dtype >= CQ_ST_DTYPE_COUNT) return cq_fail(CQ_ERR_DTYPE, "tensor '%s': bad dtype", name);
    if (ndim < 0 || ndim > CQ_MAX_DIMS || (ndim && !shape))
        return cq_fail(CQ_ERR_SHAPE, "tensor '%s': %d dimensions", name, ndim);
    if (strcmp(name, "__metadata__") == 0) return cq_fail(CQ_ERR_INVALID_ARG, "'__metadata__' is reserved");
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) return cq_fail(CQ_ERR_INVALID_ARG, "duplicate tensor name '%s'", name);
    uint64_t n = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (!cq_mul_u64(n, shape[i], &n)) return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': size overflows", name);
    if (!cq_mul_u64(n, cq_st_dtype_size(dtype), &bytes) || bytes != nbytes || (nbytes && !data))
        return cq_fail(CQ_ERR_SHAPE, "tensor '%s': %llu bytes given, shape needs %llu", name,
                       (unsigned long long)nbytes, (unsigned long long)bytes);
    if (nbytes > SIZE_MAX) return cq_fail(CQ_ERR_NOMEM, "tensor '%s' too large", name);
    wt *grown = cq_reallocn(w->t, w->n + 1, sizeof *grown);
    if (!grown) return CQ_ERR_NOMEM;
    w->t = grown;
    wt t = {.dtype = dtype, .ndim = ndim, .nbytes = nbytes};
    for (int i = 0; i < ndim; i++) t.shape[i] = shape[i];
    t.name = cq_strdup(name);
    t.data = cq_malloc((size_t)nbytes);
    if (!t.name || !t.data) {
        cq_free(t.name);
        cq_free(t.data);
        return CQ_ERR_NOMEM;
    }
    if (nbytes) memcpy(t.data, data, (size_t)nbytes);
    w->t[w->n++] = t;
    return CQ_OK;
}

cq_status cq_st_writer_add_f32(cq_st_writer *w, const char *name, int ndim, const uint64_t *shape, const float *data) {
    uint64_t n = 1;
    for (int i = 0; i < ndim && shape; i++)
        if (!cq_mul_u64(n, shape[i], &n) || n > UINT64_MAX / 4)
            return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': size overflows", name ? name : "?");
    /* Little-endian on disk: copy through the byte writer. */
    if (n > SIZE_MAX / 4) return cq_fail(CQ_ERR_NOMEM, "tensor too large");
    uint8_t *le = cq_malloc((size_t)n * 4);
    if (!le) return CQ_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &data[i], 4);
        cq_wr32(le + 4 * i, u);
    }
    cq_status s = cq_st_writer_add(w, name, CQ_ST_F32, ndim, shape, le, n * 4);
    cq_free(le);
    return s;
}

cq_status cq_st_writer_set_metadata(cq_st_writer *w, const char *key, const char *value) {
    if (!w || !key || !value) return cq_fail(CQ_ERR_INVALID_ARG, "safetensors writer: NULL metadata");
    for (size_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[2 * i], key) == 0) {
            char *v = cq_strdup(value);
            if (!v) return CQ_ERR_NOMEM;
            cq_free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = v;
            return CQ_OK;
        }
    char **grown = cq_reallocn(w->meta, 2 * (w->n_meta + 1), sizeof *grown);
    if (!grown) return CQ_ERR_NOMEM;
    w->meta = grown;
    char *k = cq_strdup(key), *v = cq_strdup(value);
    if (!k || !v) {
        cq_free(k);
        cq_free(v);
        return CQ_ERR_NOMEM;
    }
    w->meta[2 * w->n_meta] = k;
    w->meta[2 * w->n_meta + 1] = v;
    w->n_meta++;
    return CQ_OK;
}

/* A growable text buffer for the header; `ok` goes false on the first
 * allocation failure and stays false. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool ok;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    size_t need;
    if (!b->ok || !cq_add_size(b->len, n, &need) || !cq_add_size(need, 1, &need)) {
        b->ok = false;
        return;
    }
    if (need > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < need) nc *= 2;
        char *g = cq_realloc(b->p, nc);
        if (!g) {
            b->ok = false;
            return;
        }
        b->p = g;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string literal, escaped by cJSON. */
static void sb_json_string(sbuf *b, const char *s) {
    cJSON *j = cJSON_CreateString(s);
    char *p = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!p) {
        b->ok = false;
        return;
    }
    sb_str(b, p);
    cJSON_free(p);
}

/* The header JSON, padded. Numbers are printed by hand: cJSON would print
 * large integers in exponent form. */
static cq_status build_header(const cq_st_writer *w, char **out, size_t *out_len) {
    sbuf b = {.ok = true};
    sb_str(&b, "{");
    bool first = true;
    if (w->n_meta) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i) sb_str(&b, ",");
            sb_json_string(&b, w->meta[2 * i]);
            sb_str(&b, ":");
            sb_json_string(&b, w->meta[2 * i + 1]);
        }
        sb_str(&b, "}");
        first = false;
    }
    uint64_t off = 0;
    char num[96];
    for (size_t i = 0; i < w->n; i++) {
        if (!first) sb_str(&b, ",");
        first = false;
        sb_json_string(&b, w->t[i].name);
        snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", cq_st_dtype_name(w->t[i].dtype));
        sb_str(&b, num);
        for (int d = 0; d < w->t[i].ndim; d++) {
            snprintf(num, sizeof num, "%s%llu", d ? "," : "", (unsigned long long)w->t[i].shape[d]);
            sb_str(&b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + w->t[i].nbytes));
        sb_str(&b, num);
        off += w->t[i].nbytes;
    }
    sb_str(&b, "}");
    /* Pad so the data buffer starts 8-aligned (8-byte length prefix + header). */
    while (b.ok && b.len % 8) sb_str(&b, " ");
    if (!b.ok) {
        cq_free(b.p);
        return cq_fail(CQ_ERR_NOMEM, "safetensors header: out of memory");
    }
    *out = b.p;
    *out_len = b.len;
    return CQ_OK;
}

cq_status cq_st_writer_to_memory(const cq_st_writer *w, uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    char *h;
    size_t hl;
    CQ_TRY(build_header(w, &h, &hl));
    size_t total = 8 + hl;
    for (size_t i = 0; i < w->n; i++)
        if (!cq_add_size(total, (size_t)w->t[i].nbytes, &total)) {
            cq_free(h);
            return cq_fail(CQ_ERR_NOMEM, "safetensors file too large");
        }
    uint8_t *b = cq_malloc(total);
    if (!b) {
        cq_free(h);
        return CQ_ERR_NOMEM;
    }
    cq_wr64(b, hl);
    memcpy(b + 8, h, hl);
    size_t p = 8 + hl;
    for (size_t i = 0; i < w->n; i++) {
        if (w->t[i].nbytes) memcpy(b + p, w->t[i].data, (size_t)w->t[i].nbytes);
        p += (size_t)w->t[i].nbytes;
    }
    cq_free(h);
    *buf = b;
    *len = total;
    return CQ_OK;
}

cq_status cq_st_writer_save(const cq_st_writer *w, const char *path) {
    if (!w || !path) return cq_fail(CQ_ERR_INVALID_ARG, "safetensors writer: NULL argument");
    char *h;
    size_t hl;
    CQ_TRY(build_header(w, &h, &hl));
    uint64_t total = 8 + hl;
    for (size_t i = 0; i < w->n; i++) total += w->t[i].nbytes;
    cq_outfile f;
    const cq_outfile_opts o = {.format = "safetensors", .size_hint = total};
    cq_status s = cq_outfile_open(path, &o, &f);
    if (s != CQ_OK) {
        cq_free(h);
        return s;
    }
    uint8_t len8[8];
    cq_wr64(len8, hl);
    s = cq_outfile_write(&f, len8, 8);
    if (s == CQ_OK) s = cq_outfile_write(&f, h, hl);
    for (size_t i = 0; s == CQ_OK && i < w->n; i++)
        if (w->t[i].nbytes) s = cq_outfile_write(&f, w->t[i].data, (size_t)w->t[i].nbytes);
    if (s == CQ_OK) s = cq_outfile_commit(&f);
    else cq_outfile_abort(&f);
    cq_free(h);
    return s;
}
