/*
 * convert.c — the conversion loop: plan every tensor (name, codec, size),
 * check the disk has room (through the writer), then stream tensor by tensor from the safetensors
 * mappings through the codec into the CMF writer, measuring each tensor's
 * quantization error as it goes. Only one tensor is ever held in memory.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "codec/codec.h"
#include "format/convert_impl.h"
#include "format/file_read.h"

#define CV_CHUNK ((size_t)1 << 20) /* elements per streamed chunk */

typedef struct cv_item {
    const cv_comp *comp;   /* NULL for a config blob */
    const cq_st_tensor *t;
    const cv_blob *blob;
    char *name;
    cv_choice ch;
    uint64_t nbytes;       /* payload size in the pack */
    bool last_tap;         /* a 5-D kernel stored as its last temporal tap (cv_comp.last_tap), shape[] below */
    uint64_t shape[4];
} cv_item;

typedef struct cv_run {
    const cq_convert_opts *opts;
    cq_convert_report *rep;
    cq_cmf_writer *w;
    uint64_t done, total;  /* progress, source bytes */
    float *f32;            /* whole-tensor / chunk buffers, grown on demand */
    size_t f32_cap;
    uint8_t *out;
    size_t out_cap;
    float *deq;            /* per-task dequantization scratch */
    size_t deq_cap;
    cq_pool *pool;         /* NULL: run tasks on the calling thread */
} cv_run;

#define CV_MAX_TASKS 64
#define CV_ERR_SLICE ((size_t)1 << 16) /* floats of dequant scratch per task */

static void run_tasks(cq_pool *p, size_t n, cq_pool_fn fn, void *arg) {
    if (p)
        cq_pool_run(p, n, fn, arg);
    else
        for (size_t k = 0; k < n; k++) fn(k, n, arg);
}

static size_t n_tasks_for(const cv_run *r, uint64_t work) {
    uint64_t t = r->pool ? (uint64_t)cq_pool_threads(r->pool) * 4 : 1;
    t = CQ_MIN(t, (uint64_t)CV_MAX_TASKS);
    return (size_t)CQ_MAX((uint64_t)1, CQ_MIN(t, work));
}

/* Whole-tensor read to f32 in parallel ranges; also finds non-finite values
 * for the quantized path. Worker threads cannot hand an error message back
 * (messages are per thread), so a failing range is re-read on the caller. */
typedef struct par_read {
    const cq_st_tensor *t;
    float *dst;
    cq_status st[CV_MAX_TASKS];
    uint64_t bad[CV_MAX_TASKS];
} par_read;

static void read_task(size_t k, size_t nt, void *arg) {
    par_read *a = arg;
    uint64_t n = a->t->nelem, i0 = n / nt * k + CQ_MIN((uint64_t)k, n % nt), len = n / nt + (k < n % nt);
    a->bad[k] = UINT64_MAX;
    a->st[k] = cq_st_read_f32(a->t, i0, len, a->dst + i0);
    for (uint64_t i = i0; a->st[k] == CQ_OK && i < i0 + len; i++)
        if (!isfinite(a->dst[i])) {
            a->bad[k] = i;
            break;
        }
}

static cq_status read_all(cv_run *r, const cq_st_tensor *t, float *dst, uint64_t *first_bad) {
    par_read a = {.t = t, .dst = dst};
    size_t nt = n_tasks_for(r, t->nelem / 65536 + 1);
    run_tasks(r->pool, nt, read_task, &a);
    *first_bad = UINT64_MAX;
    for (size_t k = 0; k < nt; k++) {
        if (a.st[k] != CQ_OK) return cq_st_read_f32(t, 0, t->nelem, dst); /* sets the message */
        if (*first_bad == UINT64_MAX) *first_bad = a.bad[k];
    }
    return CQ_OK;
}

/* ||w - deq(q(w))||^2 and ||w||^2 over row ranges, each task with its own
 * scratch; the partial sums are added in task order (deterministic). */
typedef struct par_err {
    cq_dtype dt;
    const cq_st_tensor *t;
    const uint8_t *payload;
    uint64_t nbytes, rows, cols;
    const float *w;
    float *scratch;
    size_t slice;
    double err2[CV_MAX_TASKS], ref2[CV_MAX_TASKS];
    cq_status st[CV_MAX_TASKS];
} par_err;

static void err_task(size_t k, size_t nt, void *arg) {
    par_err *a = arg;
    uint64_t r0 = a->rows / nt * k + CQ_MIN((uint64_t)k, a->rows % nt), nr_all = a->rows / nt + (k < a->rows % nt);
    uint64_t step = CQ_MAX((uint64_t)1, (uint64_t)a->slice / a->cols);
    float *deq = a->scratch + k * a->slice;
    double e2 = 0, r2 = 0;
    a->st[k] = CQ_OK;
    for (uint64_t row = r0; row < r0 + nr_all; row += step) {
        uint64_t nr = CQ_MIN(step, r0 + nr_all - row);
        a->st[k] = cq_codec_dequant_rows(a->dt, a->t->ndim, a->t->shape, a->payload, a->nbytes, row, nr, deq);
        if (a->st[k] != CQ_OK) break;
        const float *w = a->w + row * a->cols;
        for (uint64_t i = 0; i < nr * a->cols; i++) {
            double d = (double)w[i] - deq[i];
            e2 += d * d;
            r2 += (double)w[i] * w[i];
        }
    }
    a->err2[k] = e2;
    a->ref2[k] = r2;
}

static cq_status grow(void **buf, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return CQ_OK;
    cq_free(*buf);
    *buf = cq_mallocn(n, elem);
    *cap = *buf ? n : 0;
    return *buf ? CQ_OK : CQ_ERR_NOMEM;
}

static cq_status progress(cv_run *r, uint64_t add) {
    r->done += add;
    if (r->opts->progress && r->opts->progress(r->done, r->total, r->opts->progress_user))
        return cq_fail(CQ_ERR_INTERRUPTED, "conversion cancelled");
    return CQ_OK;
}

static cq_status add_fallback(cq_convert_report *rep, const char *name, cq_dtype wanted, cq_dtype used,
                              const char *why) {
    cq_convert_fallback *g = cq_reallocn(rep->fallbacks, rep->n_fallbacks + 1, sizeof *g);
    if (!g) return CQ_ERR_NOMEM;
    rep->fallbacks = g;
    cq_convert_fallback *f = &g[rep->n_fallbacks++];
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->why, sizeof f->why, "%s", why ? why : "");
    f->wanted = wanted;
    f->used = used;
    return CQ_OK;
}

static void record(cq_convert_report *rep, const char *name, cq_dtype dt, uint64_t nbytes, double err2, double ref2) {
    cq_convert_codec_stat *c = &rep->codec[dt];
    c->tensors++;
    c->bytes += nbytes;
    double rel = ref2 > 0 ? sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
    if (rel > c->worst_rel_rms || c->tensors == 1) {
        c->worst_rel_rms = rel;
        snprintf(c->worst_name, sizeof c->worst_name, "%s", name);
    }
    rep->tensors++;
}

/* Would any finite value of v[0..n) overflow f16? (Rounding reaches inf at 65520.) */
static bool beyond_f16(const float *v, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (isfinite(v[k]) && fabsf(v[k]) >= 65520.0f) return true;
    return false;
}

static cq_status f16_overflows(cv_run *r, const cq_st_tensor *t, bool *over) {
    *over = false;
    if (t->dtype == CQ_ST_F16 || t->dtype == CQ_ST_F8_E4M3 || t->dtype == CQ_ST_F8_E5M2) return CQ_OK;
    CQ_TRY(grow((void **)&r->f32, &r->f32_cap, CV_CHUNK, sizeof(float)));
    for (uint64_t i = 0; i < t->nelem && !*over; i += CV_CHUNK) {
        size_t n = (size_t)CQ_MIN((uint64_t)CV_CHUNK, t->nelem - i);
        CQ_TRY(cq_st_read_f32(t, i, n, r->f32));
        *over = beyond_f16(r->f32, n);
    }
    return CQ_OK;
}

/* v[0..n) in float codec dt (f32, f16 or bf16) into out, adding the rounding error's and the values' squares. */
static void encode_floats(cq_dtype dt, const float *v, size_t n, uint8_t *out, double *err2, double *ref2) {
    for (size_t k = 0; k < n; k++) {
        float x = v[k], back = x;
        if (dt == CQ_DTYPE_F32) {
            uint32_t u;
            memcpy(&u, &x, 4);
            cq_wr32(out + 4 * k, u);
        } else {
            uint16_t h = dt == CQ_DTYPE_F16 ? cq_f32_to_f16(x) : cq_f32_to_bf16(x);
            cq_wr16(out + 2 * k, h);
            back = dt == CQ_DTYPE_F16 ? cq_f16_to_f32(h) : cq_bf16_to_f32(h);
        }
        if (isfinite(x)) {
            *err2 += ((double)x - back) * ((double)x - back);
            *ref2 += (double)x * x;
        }
    }
}

/* Float targets stream in chunks; same-type copies are byte copies. */
static cq_status write_float(cv_run *r, cv_item *it) {
    const cq_st_tensor *t = it->t;
    cq_dtype dt = it->ch.dtype;
    if (dt == CQ_DTYPE_F16) {
        bool over;
        CQ_TRY(f16_overflows(r, t, &over));
        if (over) {
            CQ_TRY(add_fallback(r->rep, it->name, it->ch.wanted, CQ_DTYPE_F32, "values exceed the f16 range"));
            dt = it->ch.dtype = CQ_DTYPE_F32;
            CQ_TRY(cq_codec_nbytes(dt, t->ndim, t->shape, &it->nbytes));
        }
    }
    CQ_TRY(cq_cmf_writer_begin(r->w, it->name, dt, t->ndim, t->shape, it->nbytes));
    bool raw = (dt == CQ_DTYPE_F32 && t->dtype == CQ_ST_F32) || (dt == CQ_DTYPE_F16 && t->dtype == CQ_ST_F16) ||
               (dt == CQ_DTYPE_BF16 && t->dtype == CQ_ST_BF16);
    size_t es = dt == CQ_DTYPE_F32 ? 4 : 2;
    double err2 = 0, ref2 = 0;
    if (!raw) {
        CQ_TRY(grow((void **)&r->f32, &r->f32_cap, CV_CHUNK, sizeof(float)));
        CQ_TRY(grow((void **)&r->out, &r->out_cap, CV_CHUNK * 4, 1));
    }
    for (uint64_t i = 0; i < t->nelem; i += CV_CHUNK) {
        size_t n = (size_t)CQ_MIN((uint64_t)CV_CHUNK, t->nelem - i);
        size_t srcb = n * cq_st_dtype_size(t->dtype);
        if (raw) {
            CQ_TRY(cq_cmf_writer_write(r->w, t->data + i * es, n * es));
        } else {
            CQ_TRY(cq_st_read_f32(t, i, n, r->f32));
            encode_floats(dt, r->f32, n, r->out, &err2, &ref2);
            CQ_TRY(cq_cmf_writer_write(r->w, r->out, n * es));
        }
        CQ_TRY(progress(r, srcb));
    }
    CQ_TRY(cq_cmf_writer_end(r->w));
    record(r->rep, it->name, dt, it->nbytes, err2, ref2);
    return CQ_OK;
}

/* Quantized targets need the whole tensor (column statistics, planes). */
static cq_status write_quant(cv_run *r, cv_item *it) {
    const cq_st_tensor *t = it->t;
    cq_dtype dt = it->ch.dtype;
    if (t->nelem > SIZE_MAX / sizeof(float) || it->nbytes > SIZE_MAX)
        return cq_fail(CQ_ERR_NOMEM, "tensor '%s' is too large for this system", it->name);
    size_t n = (size_t)t->nelem;
    CQ_TRY(grow((void **)&r->f32, &r->f32_cap, n, sizeof(float)));
    CQ_TRY(grow((void **)&r->out, &r->out_cap, (size_t)it->nbytes, 1));
    uint64_t bad;
    CQ_TRY(read_all(r, t, r->f32, &bad));
    if (bad != UINT64_MAX)
        return cq_fail(CQ_ERR_NUMERIC,
                       "tensor '%s' holds a non-finite value at element %llu; %s needs finite weights "
                       "(keep it float with --quant-rule '%s=f32')",
                       it->name, (unsigned long long)bad, cq_dtype_name(dt), it->name);
    cq_status s = cq_codec_quantize(dt, t->ndim, t->shape, r->f32, r->out, it->nbytes);
    if (s != CQ_OK) return cq_fail_prefix(s, "tensor '%s': ", it->name);
    CQ_TRY(cq_cmf_writer_add(r->w, it->name, dt, t->ndim, t->shape, r->out, it->nbytes));
    /* Error of what was written, decoded by the same codec layer that reads it. */
    par_err a = {.dt = dt, .t = t, .payload = r->out, .nbytes = it->nbytes, .w = r->f32};
    cq_codec_rows(t->ndim, t->shape, &a.rows, &a.cols);
    double err2 = 0, ref2 = 0;
    if (a.rows && a.cols) {
        size_t nt = n_tasks_for(r, a.rows);
        a.slice = (size_t)CQ_MAX((uint64_t)CV_ERR_SLICE, a.cols);
        size_t need;
        if (!cq_mul_size(nt, a.slice, &need)) return cq_fail(CQ_ERR_NOMEM, "tensor '%s': row too long", it->name);
        CQ_TRY(grow((void **)&r->deq, &r->deq_cap, need, sizeof(float)));
        a.scratch = r->deq;
        run_tasks(r->pool, nt, err_task, &a);
        for (size_t k = 0; k < nt; k++) {
            if (a.st[k] != CQ_OK)
                return cq_fail(a.st[k], "tensor '%s': decoding the encoded payload failed (%s)", it->name,
                               cq_status_str(a.st[k]));
            err2 += a.err2[k];
            ref2 += a.ref2[k];
        }
    }
    record(r->rep, it->name, dt, it->nbytes, err2, ref2);
    return progress(r, t->nbytes);
}

/* A 5-D kernel [cout, cin, t, k, k] as its last temporal tap [cout, cin, k, k]: read whole, compacted in
 * place, then stored in a float codec (cv_plan_tensor gives one to every tensor that is not 2-D). */
static cq_status write_last_tap(cv_run *r, cv_item *it) {
    const cq_st_tensor *t = it->t;
    if (t->nelem > SIZE_MAX / sizeof(float)) return cq_fail(CQ_ERR_NOMEM, "tensor '%s' is too large", it->name);
    const size_t n = (size_t)t->nelem, plane = (size_t)(t->shape[3] * t->shape[4]), taps = (size_t)t->shape[2];
    const size_t m = n / taps;
    CQ_TRY(grow((void **)&r->f32, &r->f32_cap, n, sizeof(float)));
    CQ_TRY(grow((void **)&r->out, &r->out_cap, m * 4, 1));
    uint64_t bad;
    CQ_TRY(read_all(r, t, r->f32, &bad));
    for (size_t b = 0; b < m / plane; b++) /* block b = (cout, cin): its taps are planes b*taps .. b*taps+taps-1 */
        memmove(r->f32 + b * plane, r->f32 + (b * taps + taps - 1) * plane, plane * sizeof(float));
    cq_dtype dt = it->ch.dtype;
    if (dt == CQ_DTYPE_F16 && beyond_f16(r->f32, m)) {
        CQ_TRY(add_fallback(r->rep, it->name, it->ch.wanted, CQ_DTYPE_F32, "values exceed the f16 range"));
        dt = it->ch.dtype = CQ_DTYPE_F32;
        CQ_TRY(cq_codec_nbytes(dt, 4, it->shape, &it->nbytes));
    }
    double err2 = 0, ref2 = 0;
    encode_floats(dt, r->f32, m, r->out, &err2, &ref2);
    CQ_TRY(cq_cmf_writer_add(r->w, it->name, dt, 4, it->shape, r->out, it->nbytes));
    record(r->rep, it->name, dt, it->nbytes, err2, ref2);
    return progress(r, t->nbytes);
}

static cq_status write_item(cv_run *r, cv_item *it) {
    if (it->blob) {
        uint64_t shape = it->blob->len;
        CQ_TRY(cq_cmf_writer_add(r->w, it->name, CQ_DTYPE_U8, 1, &shape, it->blob->data, it->blob->len));
        record(r->rep, it->name, CQ_DTYPE_U8, it->blob->len, 0, 0);
        return CQ_OK;
    }
    if (it->ch.why) CQ_TRY(add_fallback(r->rep, it->name, it->ch.wanted, it->ch.dtype, it->ch.why));
    cq_status s;
    if (it->ch.dtype == CQ_DTYPE_U8) {
        s = cq_cmf_writer_add(r->w, it->name, CQ_DTYPE_U8, it->t->ndim, it->t->shape, it->t->data, it->t->nbytes);
        if (s == CQ_OK) {
            record(r->rep, it->name, CQ_DTYPE_U8, it->t->nbytes, 0, 0);
            s = progress(r, it->t->nbytes);
        }
    } else if (it->last_tap) {
        s = write_last_tap(r, it);
    } else if (cv_codec_is_float(it->ch.dtype)) {
        s = write_float(r, it);
    } else {
        s = write_quant(r, it);
    }
    cq_st_release(it->comp->st, it->t);
    return s;
}

/* Payload bytes + directory + header + alignment slack of the pack. */
static uint64_t estimate_size(const cv_item *items, size_t n, size_t header_len, size_t tok_len) {
    uint64_t total = 2 * 4096 + 128 + header_len + tok_len + 16;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = items[i].nbytes >= 16384 ? 4096 : 64;
        total += (items[i].nbytes + a - 1) / a * a + 56 + strlen(items[i].name);
    }
    return total;
}

/* The drop glob `name` matches first, or -1. */
static int dropped_by(const cq_convert_opts *opts, const char *name) {
    for (size_t i = 0; i < opts->n_drop; i++)
        if (fnmatch(opts->drop[i], name, 0) == 0) return (int)i;
    return -1;
}

static cq_status plan(const cv_source *src, const cq_convert_opts *opts, cv_item **out_items, size_t *out_n,
                      uint64_t *bytes_in, cq_convert_report *rep) {
    size_t n = src->n_blob;
    for (size_t c = 0; c < src->n_comp; c++) n += cq_st_count(src->comp[c].st);
    cv_item *items = cq_calloc(n ? n : 1, sizeof *items);
    if (!items) return CQ_ERR_NOMEM;
    *out_items = items;
    *out_n = 0;
    *bytes_in = 0;
    size_t k = 0;
    for (size_t b = 0; b < src->n_blob; b++, k++) {
        items[k] = (cv_item){.blob = &src->blob[b], .nbytes = src->blob[b].len};
        if (!(items[k].name = cq_strdup(src->blob[b].name))) return CQ_ERR_NOMEM;
        *out_n = k + 1;
    }
    bool *used = cq_calloc(opts->n_drop ? opts->n_drop : 1, sizeof *used); /* drop globs that matched */
    if (!used) return CQ_ERR_NOMEM;
    for (size_t c = 0; c < src->n_comp; c++) {
        const cv_comp *comp = &src->comp[c];
        size_t kept = 0;
        for (size_t i = 0; i < cq_st_count(comp->st); i++) {
            const cq_st_tensor *t = cq_st_at(comp->st, i);
            cv_item *it = &items[k];
            *it = (cv_item){.comp = comp, .t = t};
            size_t pl = strlen(comp->prefix), nl = strlen(t->name);
            if (!(it->name = cq_malloc(pl + nl + 2))) {
                cq_free(used);
                return CQ_ERR_NOMEM;
            }
            snprintf(it->name, pl + nl + 2, "%s%s%s", comp->prefix, pl ? "." : "", t->name);
            const int drop = dropped_by(opts, it->name);
            if (drop >= 0) { /* left out: the slot is reused by the next tensor */
                used[drop] = true;
                rep->dropped++;
                rep->dropped_bytes += t->nbytes;
                cq_free(it->name);
                *it = (cv_item){0};
                continue;
            }
            *out_n = ++k;
            kept++;
            for (int d = 0; d < t->ndim; d++)
                if (t->shape[d] > UINT32_MAX) {
                    cq_free(used);
                    return cq_fail(CQ_ERR_SHAPE, "tensor '%s': dimension %d is %llu, more than CMF's 32-bit limit",
                                   it->name, d, (unsigned long long)t->shape[d]);
                }
            it->ch = cv_plan_tensor(opts, comp->role, it->name, t);
            it->last_tap = comp->last_tap && t->ndim == 5 && t->nelem > 0 && cv_codec_is_float(it->ch.dtype);
            if (it->last_tap) {
                const uint64_t s4[4] = {t->shape[0], t->shape[1], t->shape[3], t->shape[4]};
                memcpy(it->shape, s4, sizeof s4);
                rep->last_taps++;
            }
            if (it->ch.dtype == CQ_DTYPE_U8)
                it->nbytes = t->nbytes;
            else {
                cq_status s = it->last_tap ? cq_codec_nbytes(it->ch.dtype, 4, it->shape, &it->nbytes)
                                           : cq_codec_nbytes(it->ch.dtype, t->ndim, t->shape, &it->nbytes);
                if (s != CQ_OK) {
                    cq_free(used);
                    return cq_fail_prefix(s, "tensor '%s': ", it->name);
                }
            }
            *bytes_in += t->nbytes;
        }
        if (kept == 0 && cq_st_count(comp->st) > 0) { /* a pack that cannot run is no conversion */
            cq_free(used);
            return cq_fail(CQ_ERR_INVALID_ARG,
                           "convert: --drop leaves %s%s%s without any of its %zu tensors; drop fewer (a pack needs "
                           "the weights of each component it holds)",
                           *comp->prefix ? "the component '" : "the model", comp->prefix, *comp->prefix ? "'" : "",
                           cq_st_count(comp->st));
        }
    }
    for (size_t i = 0; i < opts->n_drop; i++)
        if (!used[i]) { /* a typo would otherwise keep what the user meant to leave out */
            cq_free(used);
            return cq_fail(CQ_ERR_INVALID_ARG, "convert: the drop pattern '%s' matches no tensor", opts->drop[i]);
        }
    cq_free(used);
    return CQ_OK;
}

/* quant_type: the codec holding the most bytes among the weight matrices. */
static const char *dominant_quant(const cv_item *items, size_t n) {
    uint64_t by[CQ_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < n; i++)
        if (items[i].t && items[i].t->ndim >= 2 && items[i].ch.dtype != CQ_DTYPE_U8) by[items[i].ch.dtype] += items[i].nbytes;
    int best = CQ_DTYPE_F32;
    for (int d = 0; d < CQ_DTYPE_COUNT; d++)
        if (by[d] > by[best]) best = d;
    return cv_quant_type_name((cq_dtype)best);
}

cq_status cq_convert(const char *src_path, const char *out, const cq_convert_opts *opts_in, cq_convert_report *rep) {
    *rep = (cq_convert_report){0};
    if (!src_path || !out) return cq_fail(CQ_ERR_INVALID_ARG, "convert: source and output are required");
    cq_convert_opts opts = opts_in ? *opts_in : (cq_convert_opts){.quant = -1};
    if (opts.quant >= 0) CQ_TRY(cq_convert_check_codec((cq_dtype)opts.quant));
    for (size_t i = 0; i < opts.n_rules; i++) CQ_TRY(cq_convert_check_codec(opts.rules[i].dtype));
    if (cq_file_is_regular(src_path)) return cv_repack(src_path, out, &opts, rep);
    double t0 = cq_now();
    cv_source src;
    cv_item *items = NULL;
    size_t n = 0;
    char *header = NULL;
    uint8_t *tok = NULL;
    size_t tok_len = 0;
    cv_run run = {.opts = &opts, .rep = rep};
    if (cq_pool_create(cq_default_threads(), &run.pool) != CQ_OK) run.pool = NULL; /* serial is fine */
    cq_status s = cv_source_open(src_path, &src, rep);
    if (s == CQ_OK) {
        snprintf(rep->arch, sizeof rep->arch, "%s", src.arch);
        snprintf(rep->layout, sizeof rep->layout, "%s",
                 src.layout == CV_PIPELINE ? "pipeline" : src.layout == CV_COMPONENT ? "component" : "llm");
        s = plan(&src, &opts, &items, &n, &rep->bytes_in, rep);
    }
    if (s == CQ_OK) {
        snprintf(rep->quant_type, sizeof rep->quant_type, "%s", dominant_quant(items, n));
        s = cv_build_header(&src, rep->quant_type, opts.defaults, rep, &header, &tok, &tok_len);
    }
    if (s == CQ_OK) s = cq_cmf_writer_create(out, &run.w);
    if (s == CQ_OK) s = cq_cmf_writer_check_space(run.w, estimate_size(items, n, strlen(header), tok_len));
    if (s == CQ_OK) s = cq_cmf_writer_set_header(run.w, header, strlen(header));
    if (s == CQ_OK && tok_len) s = cq_cmf_writer_set_tokenizer(run.w, tok, tok_len);
    run.total = rep->bytes_in;
    for (size_t i = 0; s == CQ_OK && i < n; i++) {
        s = cq_check_cancel("the conversion");
        if (s == CQ_OK) s = write_item(&run, &items[i]);
    }
    if (s == CQ_OK && opts.verify_progress) cq_cmf_writer_set_progress(run.w, opts.verify_progress, opts.verify_user);
    if (s == CQ_OK) s = cq_cmf_writer_finish(run.w);
    cq_cmf_writer_free(run.w); /* removes the temporary file unless finished */
    if (s == CQ_OK) {
        struct stat sb;
        if (stat(out, &sb) == 0) rep->file_size = (uint64_t)sb.st_size;
    }
    rep->seconds = cq_now() - t0;
    for (size_t i = 0; i < n; i++) cq_free(items[i].name);
    cq_free(items);
    cq_free(header);
    cq_free(tok);
    cq_free(run.f32);
    cq_free(run.out);
    cq_free(run.deq);
    cq_pool_free(run.pool);
    cv_source_free(&src);
    return s;
}

void cq_convert_report_free(cq_convert_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_notes; i++) cq_free(r->notes[i]);
    cq_free(r->notes);
    cq_free(r->fallbacks);
    r->notes = NULL;
    r->fallbacks = NULL;
    r->n_notes = r->n_fallbacks = 0;
}
