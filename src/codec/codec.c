/*
 * codec.c — the codec table of CMF v2: names, the size rule and shape rule
 * of every dtype id, and the checked entry points (validate, dequantize
 * rows, quantize) that dispatch to the per-codec files.
 *
 * Shape rules are stricter than the reference reader where it lets a tensor
 * open that could never decode: q8_row/q8_2f must be 2-D, and q4tp, q2tp,
 * vbit, vbit_ro, q1s and q1t must be 2-D with cols a positive multiple of 32
 * (q1t also cols <= 65536, its overlay stores u16 columns).
 */
#include <inttypes.h>
#include <stdio.h>
#include <strings.h>

#include "codec/codec_impl.h"

typedef cq_status (*cq_codec_encode_fn)(const cq_codec_geom *g, const float *src, uint8_t *out);

typedef struct cq_codec_info {
    const char *name;
    cq_codec_size_kind size_kind;
    bool quantized;          /* encoder rejects non-finite input */
    cq_codec_decode_fn decode; /* NULL: recognised, not decodable */
    cq_codec_encode_fn encode; /* NULL: not encodable */
} cq_codec_info;

/* Indexed by dtype id; ids are on disk, so the table is append-only. */
static const cq_codec_info k_codecs[] = {
    [CQ_DTYPE_F32] = {"f32", CQ_SIZE_FIXED, false, cq_codec_decode_f32, cq_codec_encode_f32},
    [CQ_DTYPE_F16] = {"f16", CQ_SIZE_FIXED, false, cq_codec_decode_f16, cq_codec_encode_f16},
    [CQ_DTYPE_BF16] = {"bf16", CQ_SIZE_FIXED, false, cq_codec_decode_bf16, cq_codec_encode_bf16},
    [CQ_DTYPE_Q8_ROW] = {"q8_row", CQ_SIZE_FIXED, true, cq_codec_decode_q8_row, cq_codec_encode_q8_row},
    [CQ_DTYPE_Q4_BLOCK] = {"q4_block", CQ_SIZE_FIXED, true, cq_codec_decode_q4_block, cq_codec_encode_q4_block},
    [CQ_DTYPE_MIX8_4] = {"mix8_4", CQ_SIZE_UNCHECKED, false, NULL, NULL},
    [CQ_DTYPE_U8] = {"u8", CQ_SIZE_UNCHECKED, false, cq_codec_decode_u8, NULL},
    [CQ_DTYPE_Q4_COL] = {"q4_col", CQ_SIZE_UNCHECKED, false, NULL, NULL},
    [CQ_DTYPE_VBIT] = {"vbit", CQ_SIZE_VARIABLE, true, cq_codec_decode_vbit, NULL},
    [CQ_DTYPE_Q8_2F] = {"q8_2f", CQ_SIZE_FIXED, true, cq_codec_decode_q8_2f, cq_codec_encode_q8_2f},
    [CQ_DTYPE_VBIT_RO] = {"vbit_ro", CQ_SIZE_VARIABLE, true, cq_codec_decode_vbit_ro, NULL},
    [CQ_DTYPE_Q4_TILED] = {"q4_tiled", CQ_SIZE_FIXED, true, cq_codec_decode_q4_tiled, cq_codec_encode_q4_tiled},
    [CQ_DTYPE_Q1] = {"q1", CQ_SIZE_FIXED, true, cq_codec_decode_q1, NULL},
    [CQ_DTYPE_Q1S] = {"q1s", CQ_SIZE_VARIABLE, true, cq_codec_decode_q1s, NULL},
    [CQ_DTYPE_Q1T] = {"q1t", CQ_SIZE_VARIABLE, true, cq_codec_decode_q1t, NULL},
    [CQ_DTYPE_Q4TP] = {"q4tp", CQ_SIZE_FIXED, true, cq_codec_decode_q4tp, cq_codec_encode_q4tp},
    [CQ_DTYPE_Q2TP] = {"q2tp", CQ_SIZE_FIXED, true, cq_codec_decode_q2tp, NULL},
};
_Static_assert(sizeof(k_codecs) / sizeof(k_codecs[0]) == CQ_DTYPE_COUNT, "codec table must cover every dtype id");

static const cq_codec_info *codec_info(cq_dtype dt) {
    if ((int)dt < 0 || (int)dt >= CQ_DTYPE_COUNT) return NULL;
    return &k_codecs[dt];
}

static cq_status unknown_dtype(cq_dtype dt) {
    return cq_fail(CQ_ERR_DTYPE, "unknown dtype id %d (this build knows ids 0..%d)", (int)dt, CQ_DTYPE_COUNT - 1);
}

const char *cq_dtype_name(cq_dtype dt) {
    const cq_codec_info *ci = codec_info(dt);
    return ci ? ci->name : "?";
}

int cq_dtype_from_name(const char *name) {
    if (!name) return -1;
    if (strcasecmp(name, "q4t") == 0) return CQ_DTYPE_Q4_TILED; /* the reference CLI's name */
    for (int i = 0; i < CQ_DTYPE_COUNT; i++)
        if (strcasecmp(name, k_codecs[i].name) == 0) return i;
    return -1;
}

cq_codec_size_kind cq_codec_size_kind_of(cq_dtype dt) {
    const cq_codec_info *ci = codec_info(dt);
    return ci ? ci->size_kind : CQ_SIZE_UNCHECKED;
}

bool cq_codec_can_decode(cq_dtype dt) {
    const cq_codec_info *ci = codec_info(dt);
    return ci && ci->decode;
}

bool cq_codec_can_encode(cq_dtype dt) {
    const cq_codec_info *ci = codec_info(dt);
    return ci && ci->encode;
}

/* ---- geometry and shape rules ------------------------------------------ */

void cq_codec_rows(int ndim, const uint64_t *shape, uint64_t *rows, uint64_t *cols) {
    uint64_t r = 1, c = 1;
    if (ndim >= 1) {
        c = shape[ndim - 1];
        for (int i = 0; i < ndim - 1; i++) r *= shape[i]; /* callers checked the product */
    }
    if (rows) *rows = r;
    if (cols) *cols = c;
}

const char *cq_codec_shape_str(int ndim, const uint64_t *shape, char *buf, size_t len) {
    size_t k = 0;
    if (len == 0) return buf;
    buf[0] = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRIu64, i ? ", " : "", shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

cq_status cq_codec_geom_init(cq_codec_geom *g, cq_dtype dt, int ndim, const uint64_t *shape) {
    if (ndim < 0 || ndim > CQ_MAX_DIMS) return cq_fail(CQ_ERR_INVALID_ARG, "ndim %d outside 0..%d", ndim, CQ_MAX_DIMS);
    if (ndim > 0 && !shape) return cq_fail(CQ_ERR_INVALID_ARG, "shape is NULL");
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (!cq_mul_u64(n, shape[i], &n)) {
            char sb[160];
            return cq_fail(CQ_ERR_BOUNDS, "element count of shape %s overflows 64 bits",
                           cq_codec_shape_str(ndim, shape, sb, sizeof sb));
        }
    }
    g->dt = dt;
    g->ndim = ndim;
    g->shape = shape;
    g->n = n;
    cq_codec_rows(ndim, shape, &g->rows, &g->cols);
    return CQ_OK;
}

cq_status cq_codec_check_shape(const cq_codec_geom *g) {
    char sb[160];
    const char *name = cq_dtype_name(g->dt);
    switch (g->dt) {
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F:
        if (g->ndim != 2)
            return cq_fail(CQ_ERR_SHAPE, "%s needs a 2-D shape, got %s", name,
                           cq_codec_shape_str(g->ndim, g->shape, sb, sizeof sb));
        return CQ_OK;
    case CQ_DTYPE_Q4TP:
    case CQ_DTYPE_Q2TP:
    case CQ_DTYPE_VBIT:
    case CQ_DTYPE_VBIT_RO:
    case CQ_DTYPE_Q1S:
    case CQ_DTYPE_Q1T:
        if (g->ndim != 2)
            return cq_fail(CQ_ERR_SHAPE, "%s needs a 2-D shape, got %s", name,
                           cq_codec_shape_str(g->ndim, g->shape, sb, sizeof sb));
        if (g->cols == 0 || g->cols % CQ_GROUP != 0)
            return cq_fail(CQ_ERR_SHAPE, "%s needs cols to be a positive multiple of %d, got %s", name, CQ_GROUP,
                           cq_codec_shape_str(g->ndim, g->shape, sb, sizeof sb));
        if (g->dt == CQ_DTYPE_Q1T && g->cols > 65536)
            return cq_fail(CQ_ERR_SHAPE, "q1t stores overlay columns as u16, so cols must be <= 65536, got %s",
                           cq_codec_shape_str(g->ndim, g->shape, sb, sizeof sb));
        return CQ_OK;
    default:
        return CQ_OK;
    }
}

/* ---- size rule ----------------------------------------------------------- */

/* a*b + c*d + e*f, overflow-checked. */
static bool sum3(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f, uint64_t *out) {
    uint64_t x, y, z;
    return cq_mul_u64(a, b, &x) && cq_mul_u64(c, d, &y) && cq_mul_u64(e, f, &z) && cq_add_u64(x, y, &x) &&
           cq_add_u64(x, z, out);
}

static cq_status fixed_nbytes(const cq_codec_geom *g, uint64_t *out) {
    uint64_t n = g->n, groups = n / CQ_GROUP + (n % CQ_GROUP != 0);
    uint64_t gpr = g->cols / CQ_GROUP;
    bool ok = false;
    switch (g->dt) {
    case CQ_DTYPE_F32: ok = cq_mul_u64(n, 4, out); break;
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16: ok = cq_mul_u64(n, 2, out); break;
    case CQ_DTYPE_Q8_ROW: ok = sum3(n, 1, g->rows, 2, 0, 0, out); break;
    /* The column field is n/max(rows,1) entries, as the reference size rule
     * says; for 2-D shapes with rows > 0 that is cols. */
    case CQ_DTYPE_Q8_2F: ok = sum3(n, 1, g->rows, 2, n / (g->rows ? g->rows : 1), 2, out); break;
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED: ok = cq_mul_u64(groups, 18, out); break;
    case CQ_DTYPE_Q1: ok = cq_mul_u64(groups, 6, out); break;
    case CQ_DTYPE_Q4TP:
    case CQ_DTYPE_Q2TP: {
        uint64_t tiles;
        ok = cq_mul_u64(g->rows, gpr, &tiles) &&
             sum3(tiles, g->dt == CQ_DTYPE_Q4TP ? 16 : 8, g->rows, 4, g->rows, cq_codec_tp_code_stride(gpr), out);
        break;
    }
    default: return cq_fail(CQ_ERR_INTERNAL, "no fixed size rule for %s", cq_dtype_name(g->dt));
    }
    if (!ok) {
        char sb[160];
        return cq_fail(CQ_ERR_BOUNDS, "%s payload size for shape %s overflows 64 bits", cq_dtype_name(g->dt),
                       cq_codec_shape_str(g->ndim, g->shape, sb, sizeof sb));
    }
    return CQ_OK;
}

cq_status cq_codec_nbytes(cq_dtype dt, int ndim, const uint64_t *shape, uint64_t *out) {
    const cq_codec_info *ci = codec_info(dt);
    if (!ci) return unknown_dtype(dt);
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_codec_nbytes: out is NULL");
    cq_codec_geom g;
    CQ_TRY(cq_codec_geom_init(&g, dt, ndim, shape));
    CQ_TRY(cq_codec_check_shape(&g));
    if (ci->size_kind != CQ_SIZE_FIXED)
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s payload size is not a function of the shape (%s)", ci->name,
                       ci->size_kind == CQ_SIZE_VARIABLE ? "validated from the payload" : "not checked");
    return fixed_nbytes(&g, out);
}

/* ---- validation ---------------------------------------------------------- */

cq_status cq_codec_validate(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *payload, uint64_t nbytes) {
    const cq_codec_info *ci = codec_info(dt);
    if (!ci) return unknown_dtype(dt);
    if (!payload && nbytes) return cq_fail(CQ_ERR_INVALID_ARG, "cq_codec_validate: payload is NULL");
    cq_codec_geom g;
    CQ_TRY(cq_codec_geom_init(&g, dt, ndim, shape));
    CQ_TRY(cq_codec_check_shape(&g));
    char sb[160];
    switch (ci->size_kind) {
    case CQ_SIZE_UNCHECKED: return CQ_OK;
    case CQ_SIZE_FIXED: {
        uint64_t want;
        CQ_TRY(fixed_nbytes(&g, &want));
        if (want != nbytes)
            return cq_fail(CQ_ERR_BOUNDS, "%s payload is %" PRIu64 " bytes, shape %s needs %" PRIu64, ci->name,
                           nbytes, cq_codec_shape_str(ndim, shape, sb, sizeof sb), want);
        return CQ_OK;
    }
    case CQ_SIZE_VARIABLE:
        switch (dt) {
        case CQ_DTYPE_VBIT: return cq_codec_validate_vbit(&g, payload, nbytes);
        case CQ_DTYPE_VBIT_RO: return cq_codec_validate_vbit_ro(&g, payload, nbytes);
        case CQ_DTYPE_Q1S: return cq_codec_validate_q1s(&g, payload, nbytes);
        case CQ_DTYPE_Q1T: return cq_codec_validate_q1t(&g, payload, nbytes);
        default: break;
        }
    }
    return cq_fail(CQ_ERR_INTERNAL, "no validator for %s", ci->name);
}

/* ---- decode / encode ----------------------------------------------------- */

cq_status cq_codec_dequant_rows(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *payload,
                                uint64_t nbytes, uint64_t row0, uint64_t nrows, float *out) {
    const cq_codec_info *ci = codec_info(dt);
    if (!ci) return unknown_dtype(dt);
    if (!ci->decode)
        return cq_fail(CQ_ERR_UNSUPPORTED,
                       "decoding %s (dtype %d) is not supported yet: the id is reserved by the format and no "
                       "writer emits it",
                       ci->name, (int)dt);
    cq_codec_geom g;
    CQ_TRY(cq_codec_geom_init(&g, dt, ndim, shape));
    CQ_TRY(cq_codec_check_shape(&g));
    uint64_t end;
    if (!cq_add_u64(row0, nrows, &end) || end > g.rows)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s rows [%" PRIu64 ", +%" PRIu64 ") outside the %" PRIu64 " rows",
                       ci->name, row0, nrows, g.rows);
    if (nrows == 0 || g.cols == 0) return CQ_OK;
    if (!out || !payload) return cq_fail(CQ_ERR_INVALID_ARG, "%s decode: NULL payload or output", ci->name);
    if (ci->size_kind == CQ_SIZE_FIXED) {
        uint64_t want;
        CQ_TRY(fixed_nbytes(&g, &want));
        if (nbytes < want)
            return cq_fail(CQ_ERR_BOUNDS, "%s payload is %" PRIu64 " bytes, needs %" PRIu64, ci->name, nbytes, want);
    }
    return ci->decode(&g, payload, nbytes, row0, nrows, out);
}

cq_status cq_codec_quantize(cq_dtype dt, int ndim, const uint64_t *shape, const float *src, uint8_t *out,
                            uint64_t out_len) {
    const cq_codec_info *ci = codec_info(dt);
    if (!ci) return unknown_dtype(dt);
    if (!ci->encode) {
        if (dt == CQ_DTYPE_U8)
            return cq_fail(CQ_ERR_UNSUPPORTED, "encoding u8 is not supported: u8 payloads are raw bytes, "
                                               "written as they are");
        return cq_fail(CQ_ERR_UNSUPPORTED, "encoding %s is not supported yet", ci->name);
    }
    cq_codec_geom g;
    CQ_TRY(cq_codec_geom_init(&g, dt, ndim, shape));
    CQ_TRY(cq_codec_check_shape(&g));
    uint64_t want;
    CQ_TRY(fixed_nbytes(&g, &want));
    if (out_len < want)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s output buffer is %" PRIu64 " bytes, needs %" PRIu64, ci->name,
                       out_len, want);
    if (g.n && (!src || !out)) return cq_fail(CQ_ERR_INVALID_ARG, "%s encode: NULL input or output", ci->name);
    if (ci->quantized) {
        /* A NaN or inf would silently poison a whole row's scale. */
        for (uint64_t i = 0; i < g.n; i++) {
            if (!isfinite(src[i]))
                return cq_fail(CQ_ERR_NUMERIC, "cannot encode %s: element %" PRIu64 " (row %" PRIu64 ") is %g",
                               ci->name, i, g.cols ? i / g.cols : 0, (double)src[i]);
        }
    }
    if (want == 0) return CQ_OK;
    return ci->encode(&g, src, out);
}

/* ---- error bounds --------------------------------------------------------- */

/* Slack for the f16 rounding of a scale (half an ulp is 2^-11 relative; the
 * bound is stated a little wider so it is a bound, not an estimate). */
#define SCALE_SLACK (1.0 + 0x1p-10)

double cq_codec_rel_error_bound(cq_dtype dt) {
    switch (dt) {
    case CQ_DTYPE_F16: return 0x1p-11;
    case CQ_DTYPE_BF16: return 0x1p-8;
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F: return 0.5 / 127.0 * SCALE_SLACK;
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED: return 0.5 / 7.0 * SCALE_SLACK;
    case CQ_DTYPE_Q4TP: return cq_codec_q4tp_rel_bound(0.0f);
    default: return 0.0;
    }
}

double cq_codec_q4tp_rel_bound(float step) {
    double st = step > 0 ? (double)step : 0.0;
    /* lo is stored as f16; |lo| <= 16 for any finite ladder, so its rounding
     * moves the base rung by at most half an ulp of 2^-7, i.e. 2^-8 octaves.
     * 1e-5 covers the f32 chain and exp2f. */
    double lo_err = 0x1p-8;
    double up = exp2(1.5 * st + lo_err) * (1.0 + 0x1p-11) * (1.0 + 1e-5);
    double down = exp2(-2.5 * st - lo_err) * (1.0 - 0x1p-11) * (1.0 - 1e-5);
    double a = up / 14.0, b = 1.0 - down;
    return a > b ? a : b;
}
