/*
 * safetensors.c — the safetensors header parser and tensor access.
 *
 * Layout: [u64 LE header_len][header_len bytes of JSON][data buffer]. The
 * JSON maps each tensor name to {dtype, shape, data_offsets:[begin, end]}
 * (offsets relative to the data buffer) plus an optional "__metadata__"
 * object of string values. Nothing is trusted: every number is checked to be
 * a non-negative integer below 2^53 (JSON numbers are doubles), products are
 * overflow-checked, every range must lie inside the buffer, match the dtype
 * and shape exactly, and not overlap another tensor.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/codec.h"
#include "format/jsonutil.h"
#include "format/safetensors_impl.h"

static const struct {
    const char *name;
    size_t size;
} k_dtypes[CQ_ST_DTYPE_COUNT] = {
    [CQ_ST_F64] = {"F64", 8},          [CQ_ST_F32] = {"F32", 4},   [CQ_ST_F16] = {"F16", 2},
    [CQ_ST_BF16] = {"BF16", 2},        [CQ_ST_F8_E4M3] = {"F8_E4M3", 1},
    [CQ_ST_F8_E5M2] = {"F8_E5M2", 1}, [CQ_ST_I64] = {"I64", 8},   [CQ_ST_I32] = {"I32", 4},
    [CQ_ST_I16] = {"I16", 2},          [CQ_ST_I8] = {"I8", 1},     [CQ_ST_U64] = {"U64", 8},
    [CQ_ST_U32] = {"U32", 4},          [CQ_ST_U16] = {"U16", 2},   [CQ_ST_U8] = {"U8", 1},
    [CQ_ST_BOOL] = {"BOOL", 1},
};
_Static_assert(CQ_ST_DTYPE_COUNT == 15, "dtype table out of date");

/* JSON numbers are doubles: integers are exact only up to 2^53. */
#define ST_MAX_JSON_INT 9007199254740992.0

const char *cq_st_dtype_name(cq_st_dtype dt) {
    return ((unsigned)dt < CQ_ST_DTYPE_COUNT) ? k_dtypes[dt].name : "?";
}

int cq_st_dtype_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < CQ_ST_DTYPE_COUNT; i++)
        if (strcmp(k_dtypes[i].name, name) == 0) return i;
    return -1;
}

size_t cq_st_dtype_size(cq_st_dtype dt) { return ((unsigned)dt < CQ_ST_DTYPE_COUNT) ? k_dtypes[dt].size : 0; }

bool cq_st_dtype_is_float(cq_st_dtype dt) { return dt <= CQ_ST_F8_E5M2; }

/* ---- validation helpers -------------------------------------------------- */

/* A JSON integer in [0, 2^53]. */
static bool json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_JSON_INT || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

static cq_status grow_tensors(cq_st *st) {
    if (st->n < st->cap) return CQ_OK;
    size_t cap = st->cap ? st->cap * 2 : 64;
    cq_st_tensor *t = cq_reallocn(st->t, cap, sizeof *t);
    if (!t) return CQ_ERR_NOMEM;
    st->t = t;
    st->cap = cap;
    return CQ_OK;
}

static cq_status parse_metadata(cq_st *st, const cJSON *m, const char *file, bool keep) {
    if (!cJSON_IsObject(m)) return cq_fail(CQ_ERR_PARSE, "%s: __metadata__ is not an object", file);
    size_t n = 0;
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->string)
            return cq_fail(CQ_ERR_PARSE, "%s: __metadata__ entry '%s' is not a string", file,
                           e->string ? e->string : "?");
        n++;
    }
    if (!keep || n == 0) return CQ_OK;
    st->meta = cq_calloc(2 * n, sizeof *st->meta);
    if (!st->meta) return CQ_ERR_NOMEM;
    for (const cJSON *e = m->child; e; e = e->next) {
        st->meta[2 * st->n_meta] = cq_strdup(e->string);
        st->meta[2 * st->n_meta + 1] = cq_strdup(e->valuestring);
        if (!st->meta[2 * st->n_meta] || !st->meta[2 * st->n_meta + 1]) {
            st->n_meta++; /* so close() frees the half-made pair */
            return CQ_ERR_NOMEM;
        }
        st->n_meta++;
    }
    return CQ_OK;
}

/* One header entry -> a tensor (not yet bound to data). */
static cq_status parse_entry(const cJSON *e, const char *file, uint64_t data_len, cq_st_tensor *t, uint64_t *begin) {
    const char *name = e->string;
    if (!cq_utf8_valid((const uint8_t *)name, strlen(name)))
        return cq_fail(CQ_ERR_PARSE, "%s: a tensor name is not valid UTF-8", file);
    if (!cJSON_IsObject(e)) return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s': entry is not an object", file, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd)) return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s': missing string 'dtype'", file, name);
    int dt = cq_st_dtype_from_name(jd->valuestring);
    if (dt < 0) return cq_fail(CQ_ERR_DTYPE, "%s: tensor '%s': unknown dtype '%s'", file, name, jd->valuestring);
    if (!cJSON_IsArray(js)) return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s': missing array 'shape'", file, name);
    int ndim = cJSON_GetArraySize(js);
    if (ndim > CQ_MAX_DIMS)
        return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s': %d dimensions (at most %d supported)", file, name, ndim,
                       CQ_MAX_DIMS);
    *t = (cq_st_tensor){.dtype = (cq_st_dtype)dt, .ndim = ndim, .nelem = 1};
    int k = 0;
    for (const cJSON *d = js->child; d; d = d->next, k++) {
        if (!json_uint(d, &t->shape[k]))
            return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s': shape[%d] is not a non-negative integer", file, name, k);
        if (!cq_mul_u64(t->nelem, t->shape[k], &t->nelem))
            return cq_fail(CQ_ERR_BOUNDS, "%s: tensor '%s': element count overflows", file, name);
    }
    if (!cq_mul_u64(t->nelem, k_dtypes[dt].size, &t->nbytes))
        return cq_fail(CQ_ERR_BOUNDS, "%s: tensor '%s': byte size overflows", file, name);
    uint64_t b, end;
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || !json_uint(jo->child, &b) ||
        !json_uint(jo->child->next, &end))
        return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s': 'data_offsets' must be [begin, end] integers", file, name);
    if (b > end || end > data_len)
        return cq_fail(CQ_ERR_BOUNDS,
                       "%s: tensor '%s': data_offsets [%llu, %llu] outside the data buffer (%llu bytes)", file,
                       name, (unsigned long long)b, (unsigned long long)end, (unsigned long long)data_len);
    if (end - b != t->nbytes)
        return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s': data_offsets span %llu bytes but %s x %llu elements need %llu",
                       file, name, (unsigned long long)(end - b), k_dtypes[dt].name, (unsigned long long)t->nelem,
                       (unsigned long long)t->nbytes);
    *begin = b;
    return CQ_OK;
}

typedef struct {
    uint64_t begin;
    size_t idx;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static cq_status parse_header(cq_st *st, size_t fi, const cJSON *root, const uint8_t *data, uint64_t data_len,
                              bool keep_meta) {
    const char *file = st->files[fi].path;
    size_t first = st->n;
    bool meta_seen = false;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!e->string) return cq_fail(CQ_ERR_PARSE, "%s: header entry without a name", file);
        if (strcmp(e->string, "__metadata__") == 0) {
            /* JSON allows a key twice; a second __metadata__ would also append past the first one's table */
            if (meta_seen) return cq_fail(CQ_ERR_PARSE, "%s: duplicate __metadata__ entry", file);
            meta_seen = true;
            CQ_TRY(parse_metadata(st, e, file, keep_meta));
            continue;
        }
        CQ_TRY(grow_tensors(st));
        cq_st_tensor t;
        uint64_t begin = 0;
        CQ_TRY(parse_entry(e, file, data_len, &t, &begin));
        t.name = cq_strdup(e->string);
        if (!t.name) return CQ_ERR_NOMEM;
        t.data = data + begin;
        t.file_index = fi;
        st->t[st->n++] = t;
    }
    /* Order this file's tensors by offset (sequential reads) and reject
     * overlaps; empty tensors occupy nothing and never overlap. */
    size_t n = st->n - first;
    if (n == 0) return CQ_OK;
    span *sp = cq_mallocn(n, sizeof *sp);
    cq_st_tensor *tmp = cq_mallocn(n, sizeof *tmp);
    if (!sp || !tmp) {
        cq_free(sp);
        cq_free(tmp);
        return CQ_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) sp[i] = (span){(uint64_t)(st->t[first + i].data - data), first + i};
    qsort(sp, n, sizeof *sp, cmp_span);
    cq_status s = CQ_OK;
    uint64_t prev_end = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < n && s == CQ_OK; i++) {
        const cq_st_tensor *t = &st->t[sp[i].idx];
        if (t->nbytes == 0) continue;
        if (prev && sp[i].begin < prev_end)
            s = cq_fail(CQ_ERR_BOUNDS, "%s: tensors '%s' and '%s' overlap in the data buffer", file, prev, t->name);
        prev_end = sp[i].begin + t->nbytes;
        prev = t->name;
    }
    if (s == CQ_OK) {
        for (size_t i = 0; i < n; i++) tmp[i] = st->t[sp[i].idx];
        memcpy(st->t + first, tmp, n * sizeof *tmp);
    }
    cq_free(sp);
    cq_free(tmp);
    return s;
}

cq_status cq_st_parse_file(cq_st *st, size_t fi, bool keep_meta) {
    const st_file *f = &st->files[fi];
    const char *file = f->path;
    if (f->len < 8)
        return cq_fail(CQ_ERR_BOUNDS, "%s: %zu bytes, too short for the 8-byte header length", file, f->len);
    uint64_t hlen = cq_rd64(f->base);
    if (hlen > f->len - 8)
        return cq_fail(CQ_ERR_BOUNDS, "%s: header length %llu exceeds the file (%zu bytes)", file,
                       (unsigned long long)hlen, f->len);
    if (hlen > CQ_ST_MAX_HEADER)
        return cq_fail(CQ_ERR_BOUNDS, "%s: header length %llu exceeds the %u-byte limit", file,
                       (unsigned long long)hlen, CQ_ST_MAX_HEADER);
    if (hlen < 2) return cq_fail(CQ_ERR_PARSE, "%s: header JSON is empty", file);
    char what[512];
    snprintf(what, sizeof what, "%s: header JSON", file);
    cJSON *root = NULL;
    CQ_TRY(cq_json_parse(f->base + 8, (size_t)hlen, what, &root)); /* also rejects trailing garbage */
    cq_status s = CQ_OK;
    if (!cJSON_IsObject(root)) s = cq_fail(CQ_ERR_PARSE, "%s: header JSON is not an object", file);
    if (s == CQ_OK)
        s = parse_header(st, fi, root, f->base + 8 + hlen, (uint64_t)(f->len - 8 - (size_t)hlen), keep_meta);
    cJSON_Delete(root);
    return s;
}

/* ---- names ---------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t idx;
} named;

static int cmp_named(const void *a, const void *b) {
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

cq_status cq_st_index_names(cq_st *st) {
    cq_free(st->by_name);
    st->by_name = cq_mallocn(st->n ? st->n : 1, sizeof *st->by_name);
    named *nm = cq_mallocn(st->n ? st->n : 1, sizeof *nm);
    if (!st->by_name || !nm) {
        cq_free(nm);
        return CQ_ERR_NOMEM;
    }
    st->total_bytes = 0;
    for (size_t i = 0; i < st->n; i++) {
        nm[i] = (named){st->t[i].name, i};
        st->total_bytes += st->t[i].nbytes; /* each is bounded by its file size */
    }
    qsort(nm, st->n, sizeof *nm, cmp_named);
    for (size_t i = 0; i < st->n; i++) st->by_name[i] = nm[i].idx;
    cq_free(nm);
    for (size_t i = 1; i < st->n; i++) {
        const cq_st_tensor *a = &st->t[st->by_name[i - 1]], *b = &st->t[st->by_name[i]];
        if (strcmp(a->name, b->name) == 0) {
            if (a->file_index == b->file_index)
                return cq_fail(CQ_ERR_PARSE, "%s: duplicate tensor name '%s'", st->files[a->file_index].path,
                               a->name);
            return cq_fail(CQ_ERR_PARSE, "tensor '%s' appears in both %s and %s", a->name,
                           st->files[a->file_index].path, st->files[b->file_index].path);
        }
    }
    return CQ_OK;
}

cq_status cq_st_add_file(cq_st *st, const char *path, const uint8_t *base, size_t len, bool mapped, size_t *index) {
    st_file *f = cq_reallocn(st->files, st->n_files + 1, sizeof *f);
    if (!f) return CQ_ERR_NOMEM;
    st->files = f;
    char *p = cq_strdup(path ? path : "<memory>");
    if (!p) return CQ_ERR_NOMEM;
    st->files[st->n_files] = (st_file){.path = p, .base = base, .len = len, .mapped = mapped};
    *index = st->n_files++;
    return CQ_OK;
}

/* ---- public access --------------------------------------------------------- */

cq_status cq_st_open_memory(const void *buf, size_t len, const char *label, cq_st **out) {
    *out = NULL;
    if (!buf && len) return cq_fail(CQ_ERR_INVALID_ARG, "safetensors: NULL buffer");
    cq_st *st = cq_calloc(1, sizeof *st);
    if (!st) return CQ_ERR_NOMEM;
    size_t fi;
    cq_status s = cq_st_add_file(st, label ? label : "<memory>", buf, len, false, &fi);
    if (s == CQ_OK) s = cq_st_parse_file(st, fi, true);
    if (s == CQ_OK) s = cq_st_index_names(st);
    if (s != CQ_OK) {
        cq_st_close(st);
        return s;
    }
    *out = st;
    return CQ_OK;
}

void cq_st_close(cq_st *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) cq_free((void *)st->t[i].name);
    for (size_t i = 0; i < st->n_files; i++) {
        if (st->files[i].mapped && st->files[i].len) munmap((void *)st->files[i].base, st->files[i].len);
        cq_free(st->files[i].path);
    }
    for (size_t i = 0; i < 2 * st->n_meta; i++) cq_free(st->meta[i]);
    cq_free(st->meta);
    cq_free(st->files);
    cq_free(st->t);
    cq_free(st->by_name);
    cq_free(st);
}

size_t cq_st_count(const cq_st *st) { return st ? st->n : 0; }
const cq_st_tensor *cq_st_at(const cq_st *st, size_t i) { return (st && i < st->n) ? &st->t[i] : NULL; }
uint64_t cq_st_total_bytes(const cq_st *st) { return st ? st->total_bytes : 0; }
size_t cq_st_file_count(const cq_st *st) { return st ? st->n_files : 0; }
const char *cq_st_file_path(const cq_st *st, size_t i) { return (st && i < st->n_files) ? st->files[i].path : NULL; }

const cq_st_tensor *cq_st_find(const cq_st *st, const char *name) {
    if (!st || !name || !st->by_name) return NULL;
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->t[st->by_name[mid]].name, name);
        if (c == 0) return &st->t[st->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t cq_st_metadata_count(const cq_st *st) { return st ? st->n_meta : 0; }
const char *cq_st_metadata_key(const cq_st *st, size_t i) { return (st && i < st->n_meta) ? st->meta[2 * i] : NULL; }
const char *cq_st_metadata_value(const cq_st *st, size_t i) {
    return (st && i < st->n_meta) ? st->meta[2 * i + 1] : NULL;
}
const char *cq_st_metadata_get(const cq_st *st, const char *key) {
    for (size_t i = 0; st && key && i < st->n_meta; i++)
        if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
    return NULL;
}

void cq_st_release(const cq_st *st, const cq_st_tensor *t) {
    if (!st || !t || t->file_index >= st->n_files || !st->files[t->file_index].mapped || t->nbytes == 0) return;
    const st_file *f = &st->files[t->file_index];
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    /* Only whole pages inside the tensor: neighbours keep theirs. */
    uintptr_t b = (uintptr_t)t->data, e = b + (uintptr_t)t->nbytes;
    uintptr_t pb = (b + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg, pe = e / (uintptr_t)pg * (uintptr_t)pg;
    if (pb < pe && pb >= (uintptr_t)f->base) madvise((void *)pb, pe - pb, MADV_DONTNEED);
}

/* ---- element conversion ------------------------------------------------------ */

/* float8 e4m3 "fn": bias 7, no infinities, S.1111.111 is NaN. */
static float e4m3_to_f32(uint8_t b) {
    int e = (b >> 3) & 15, m = b & 7;
    float v;
    if (e == 15 && m == 7)
        v = NAN;
    else if (e == 0)
        v = ldexpf((float)m, -9); /* subnormal: m/8 * 2^-6 */
    else
        v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return (b & 0x80) ? -v : v;
}

/* An integer is exact in f32 when its significant bits fit in 24. */
static bool u64_fits_f32(uint64_t a) { return a == 0 || (a >> __builtin_ctzll(a)) <= (1u << 24); }
static bool i64_fits_f32(int64_t v) { return u64_fits_f32(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v); }

cq_status cq_st_read_f32(const cq_st_tensor *t, uint64_t first, uint64_t n, float *out) {
    uint64_t last;
    if (!t || (!out && n)) return cq_fail(CQ_ERR_INVALID_ARG, "cq_st_read_f32: NULL argument");
    if (!cq_add_u64(first, n, &last) || last > t->nelem)
        return cq_fail(CQ_ERR_BOUNDS, "tensor '%s': elements [%llu, +%llu) outside its %llu", t->name,
                       (unsigned long long)first, (unsigned long long)n, (unsigned long long)t->nelem);
    const uint8_t *p = t->data + first * cq_st_dtype_size(t->dtype);
    switch (t->dtype) {
    case CQ_ST_F32: memcpy(out, p, (size_t)n * 4); return CQ_OK;
    case CQ_ST_F64:
        for (uint64_t i = 0; i < n; i++) {
            uint64_t u = cq_rd64(p + 8 * i);
            double d;
            memcpy(&d, &u, 8);
            out[i] = (float)d;
        }
        return CQ_OK;
    case CQ_ST_F16:
        for (uint64_t i = 0; i < n; i++) out[i] = cq_f16_to_f32(cq_rd16(p + 2 * i));
        return CQ_OK;
    case CQ_ST_BF16:
        for (uint64_t i = 0; i < n; i++) out[i] = cq_bf16_to_f32(cq_rd16(p + 2 * i));
        return CQ_OK;
    case CQ_ST_F8_E4M3:
        for (uint64_t i = 0; i < n; i++) out[i] = e4m3_to_f32(p[i]);
        return CQ_OK;
    case CQ_ST_F8_E5M2: /* the top byte of an f16 */
        for (uint64_t i = 0; i < n; i++) out[i] = cq_f16_to_f32((uint16_t)(p[i] << 8));
        return CQ_OK;
    case CQ_ST_BOOL:
        for (uint64_t i = 0; i < n; i++) out[i] = p[i] ? 1.0f : 0.0f;
        return CQ_OK;
    case CQ_ST_U8:
        for (uint64_t i = 0; i < n; i++) out[i] = (float)p[i];
        return CQ_OK;
    case CQ_ST_I8:
        for (uint64_t i = 0; i < n; i++) out[i] = (float)(int8_t)p[i];
        return CQ_OK;
    case CQ_ST_U16:
        for (uint64_t i = 0; i < n; i++) out[i] = (float)cq_rd16(p + 2 * i);
        return CQ_OK;
    case CQ_ST_I16:
        for (uint64_t i = 0; i < n; i++) out[i] = (float)(int16_t)cq_rd16(p + 2 * i);
        return CQ_OK;
    case CQ_ST_U32:
    case CQ_ST_I32:
    case CQ_ST_U64:
    case CQ_ST_I64: {
        size_t es = cq_st_dtype_size(t->dtype);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t u = es == 4 ? cq_rd32(p + 4 * i) : cq_rd64(p + 8 * i);
            bool ok;
            if (t->dtype == CQ_ST_I32) {
                int32_t v = (int32_t)(uint32_t)u;
                ok = i64_fits_f32(v);
                out[i] = (float)v;
            } else if (t->dtype == CQ_ST_I64) {
                int64_t v = (int64_t)u;
                ok = i64_fits_f32(v);
                out[i] = (float)v;
            } else {
                ok = u64_fits_f32(u);
                out[i] = (float)u;
            }
            if (!ok)
                return cq_fail(CQ_ERR_NUMERIC, "tensor '%s': %s value at element %llu is not exact in f32",
                               t->name, cq_st_dtype_name(t->dtype), (unsigned long long)(first + i));
        }
        return CQ_OK;
    }
    default: return cq_fail(CQ_ERR_DTYPE, "tensor '%s': unknown dtype", t->name);
    }
}

cq_status cq_st_read_all_f32(const cq_st_tensor *t, float **out) {
    if (!t || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_st_read_all_f32: NULL argument");
    float *p = cq_mallocn(t->nelem ? (size_t)t->nelem : 1, sizeof(float));
    if (!p) return CQ_ERR_NOMEM;
    cq_status s = cq_st_read_f32(t, 0, t->nelem, p);
    if (s != CQ_OK) {
        cq_free(p);
        return s;
    }
    *out = p;
    return CQ_OK;
}
