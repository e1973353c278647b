/*
 * cpu_weights.c — weight matrices of the CPU backend, decoded on the fly.
 *
 * A weight stays in its codec in the file mapping; kernels decode only the
 * row segments a tile needs into f32 (cache-sized panels), so no layer ever
 * holds a whole dequantized copy. The decoders follow docs of the CMF codecs
 * (codec.h) literally, element for element, so that the CPU result uses the
 * very same weights as the reference (tests check this for every codec):
 *   q8_row   w = q * f16 row_scale
 *   q8_2f    w = (q * f16 row_scale) * f16 col[k]       (this order, in f32)
 *   q4_block w = (nibble - 8) * f16 scale[g], groups of 32 over the
 *            flattened tensor, scales after all nibbles
 *   q4_tiled the same values in 18-byte tiles [f16 scale][16 nibble bytes]
 *   q4tp     w = (nibble - 8) * t[code], t[0] = exp2f(lo), t[c] = t[c-1] *
 *            exp2f(step) (the format's chained ladder, not the closed form)
 * Payloads are unaligned little-endian: read bytewise. Whole groups and
 * long runs go through the kit's vector decoders.
 *
 * bf16-pair decoders (for bf16 activations on kits with a bf16 dot product)
 * emit the exact bf16 form of what the codec stores: bf16 weights as they
 * are, q8 integers and q4 nibbles as small integers (exact in bf16) with the
 * scales left to the caller (q8_row: per row in the epilogue; q4: per group
 * in the grouped microkernel). Codecs without such a form (f16: 11-bit
 * mantissas; q8_2f: per-column factors) have none and take the f32 path.
 */
#include "backends/cpu/cpu_impl.h"
#include "codec/codec.h"

void cq_cpu_load_row(const void *src, cq_dtype dt, int64_t i0, float *dst, int64_t n) {
    const uint8_t *p = src;
    switch ((int)dt) {
    case CQ_DTYPE_F32: memcpy(dst, p + 4 * i0, (size_t)n * 4); break;
    case CQ_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_h2f(cq_cpu_rd16(p + 2 * (i0 + i)));
        break;
    case CQ_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = cq_cpu_bf2f(cq_cpu_rd16(p + 2 * (i0 + i)));
        break;
    default: break;
    }
}

void cq_cpu_store_row(void *dst, cq_dtype dt, int64_t i0, const float *src, int64_t n) {
    uint8_t *p = dst;
    switch ((int)dt) {
    case CQ_DTYPE_F32: memcpy(p + 4 * i0, src, (size_t)n * 4); break;
    case CQ_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = cq_cpu_f2h(src[i]);
            memcpy(p + 2 * (i0 + i), &h, 2);
        }
        break;
    case CQ_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = cq_cpu_f2bf(src[i]);
            memcpy(p + 2 * (i0 + i), &h, 2);
        }
        break;
    default: break;
    }
}

/* ---- decoders: out[i] = w[r][k0 + i] for i < n --------------------------------------- */
static void dec_f32(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    memcpy(out, w->p + 4 * (r * w->cols + k0), (size_t)n * 4);
}

static void dec_f16(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    w->kit->f16_to_f32(w->p + 2 * (r * w->cols + k0), out, n);
}

static void dec_bf16(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    w->kit->bf16_to_f32(w->p + 2 * (r * w->cols + k0), out, n);
}

float cq_cpu_wmat_row_scale(const cq_cpu_wmat *w, int64_t r) {
    return cq_cpu_h2f(cq_cpu_rd16(w->p + w->rows * w->cols + 2 * r));
}

static void dec_q8_row(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    w->kit->i8_to_f32((const int8_t *)w->p + r * w->cols + k0, cq_cpu_wmat_row_scale(w, r), NULL, out, n);
}

static void dec_q8_2f(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    w->kit->i8_to_f32((const int8_t *)w->p + r * w->cols + k0, cq_cpu_wmat_row_scale(w, r), w->col + k0, out, n);
}

/* One element of a group of 32 4-bit values, low nibble first, value nibble - 8. */
static inline float q4_elem(const uint8_t *nib, int64_t j, float s) {
    uint8_t b = nib[j >> 1];
    return (float)((int)((j & 1) ? b >> 4 : b & 15) - 8) * s;
}

enum { RUN = 64 }; /* groups decoded per kit call (scales gathered on the stack) */

/* q4_block / q4_tiled: groups run over the flattened tensor (they may cross
 * rows when cols % 32 != 0), so work on flat element indices; whole groups go
 * to the kit's vector decoder, partial ones element by element. */
static inline const uint8_t *q4f_nib(const cq_cpu_wmat *w, int64_t g) {
    return w->dt == CQ_DTYPE_Q4_TILED ? w->p + 18 * g + 2 : w->p + 16 * g;
}
static inline float q4f_scale(const cq_cpu_wmat *w, int64_t g) {
    int64_t G = (w->rows * w->cols + 31) / 32;
    return cq_cpu_h2f(cq_cpu_rd16(w->dt == CQ_DTYPE_Q4_TILED ? w->p + 18 * g : w->p + 16 * G + 2 * g));
}

static void dec_q4_flat(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    int64_t f = r * w->cols + k0, end = f + n;
    int64_t stride = w->dt == CQ_DTYPE_Q4_TILED ? 18 : 16;
    float sc[RUN];
    while (f < end) {
        int64_t g = f / 32, j0 = f % 32;
        if (j0 == 0 && end - f >= 32) {
            int64_t ng = CQ_MIN((int64_t)RUN, (end - f) / 32);
            for (int64_t i = 0; i < ng; i++) sc[i] = q4f_scale(w, g + i);
            w->kit->q4_to_f32(q4f_nib(w, g), stride, sc, out, ng);
            out += 32 * ng;
            f += 32 * ng;
            continue;
        }
        int64_t cnt = CQ_MIN(32 - j0, end - f);
        float s = q4f_scale(w, g);
        for (int64_t j = 0; j < cnt; j++) out[j] = q4_elem(q4f_nib(w, g), j0 + j, s);
        out += cnt;
        f += cnt;
    }
}

static inline const uint8_t *q4tp_nib(const cq_cpu_wmat *w, int64_t r) { return w->p + 16 * r * w->gpr; }
static inline const uint8_t *q4tp_par(const cq_cpu_wmat *w, int64_t r) {
    return w->p + 16 * w->rows * w->gpr + 4 * r;
}
static inline const uint8_t *q4tp_codes(const cq_cpu_wmat *w, int64_t r) {
    return w->p + 16 * w->rows * w->gpr + 4 * w->rows + r * w->code_stride;
}

/* The row's 32 rungs: the codec's own chain (bit-identical), computed once
 * per matmul when prepared, else on the spot into tmp. */
static inline const float *q4tp_ladder(const cq_cpu_wmat *w, int64_t r, float *tmp) {
    if (w->ladder) return w->ladder + 32 * r;
    cq_codec_q4tp_ladder(q4tp_par(w, r), tmp);
    return tmp;
}

static void dec_q4tp(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    const uint8_t *nibs = q4tp_nib(w, r), *codes = q4tp_codes(w, r);
    float tl[32], sc[RUN];
    const float *t = q4tp_ladder(w, r, tl);
    int64_t k = k0, end = k0 + n;
    while (k < end) {
        int64_t g = k / 32, j0 = k % 32;
        if (j0 == 0 && end - k >= 32) {
            int64_t ng = CQ_MIN((int64_t)RUN, (end - k) / 32);
            for (int64_t i = 0; i < ng; i++) sc[i] = t[cq_codec_tp_code(codes, (uint64_t)(g + i))];
            w->kit->q4_to_f32(nibs + 16 * g, 16, sc, out, ng);
            out += 32 * ng;
            k += 32 * ng;
            continue;
        }
        int64_t cnt = CQ_MIN(32 - j0, end - k);
        float s = t[cq_codec_tp_code(codes, (uint64_t)g)];
        for (int64_t j = 0; j < cnt; j++) out[j] = q4_elem(nibs + 16 * g, j0 + j, s);
        out += cnt;
        k += cnt;
    }
}

/* ---- bf16-pair decoders (exact values, scales left out) ------------------------------- */
static void decp_bf16(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, uint16_t *out, float *gs) {
    (void)gs;
    memcpy(out, w->p + 2 * (r * w->cols + k0), (size_t)n * 2);
}

static void decp_q8_row(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, uint16_t *out, float *gs) {
    (void)gs;
    w->kit->i8_to_bf16((const int8_t *)w->p + r * w->cols + k0, out, n);
}

/* cols % 32 == 0 here, so groups never cross rows. */
static void decp_q4_flat(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, uint16_t *out, float *gs) {
    int64_t g0 = (r * w->cols + k0) / 32, ng = n / 32;
    for (int64_t i = 0; i < ng; i++) gs[i] = q4f_scale(w, g0 + i);
    w->kit->q4_to_bf16(q4f_nib(w, g0), w->dt == CQ_DTYPE_Q4_TILED ? 18 : 16, out, ng);
}

static void decp_q4tp(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, uint16_t *out, float *gs) {
    float tl[32];
    const float *t = q4tp_ladder(w, r, tl);
    const uint8_t *codes = q4tp_codes(w, r);
    int64_t g0 = k0 / 32, ng = n / 32;
    for (int64_t i = 0; i < ng; i++) gs[i] = t[cq_codec_tp_code(codes, (uint64_t)(g0 + i))];
    w->kit->q4_to_bf16(q4tp_nib(w, r) + 16 * g0, 16, out, ng);
}

bool cq_cpu_wcodec_supported(cq_dtype dt) {
    switch ((int)dt) {
    case CQ_DTYPE_F32:
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16:
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED:
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F:
    case CQ_DTYPE_Q4TP: return true;
    default: return false;
    }
}

cq_status cq_cpu_wmat_init(cq_cpu_wmat *w, const cq_tensor *t, cq_cpu_backend *cb, cq_cpu_scratch_slot slot) {
    memset(w, 0, sizeof *w);
    const cq_cpu_kit *kit = cb->kit;
    w->cb = cb;
    w->slot = slot;
    w->dt = t->dtype;
    w->p = cq_host_ptr(t);
    w->rows = t->shape[0];
    w->cols = cq_tensor_nelem(t) / t->shape[0];
    w->kit = kit;
    bool per_row = t->dtype == CQ_DTYPE_Q8_ROW || t->dtype == CQ_DTYPE_Q8_2F || t->dtype == CQ_DTYPE_Q4TP;
    if (per_row && t->ndim != 2)
        return cq_fail(CQ_ERR_UNSUPPORTED, "cpu backend: %s weights must be 2-D (this one has %d dims)",
                       cq_dtype_name(t->dtype), t->ndim);
    bool pairs = kit->ukernel_pair != NULL, grouped = pairs && kit->ukernel_pair_grouped != NULL;
    switch ((int)t->dtype) {
    case CQ_DTYPE_F32: w->decode = dec_f32; break;
    case CQ_DTYPE_F16: w->decode = dec_f16; break;
    case CQ_DTYPE_BF16:
        w->decode = dec_bf16;
        if (pairs) w->decode_pair = decp_bf16;
        break;
    case CQ_DTYPE_Q8_ROW:
        w->decode = dec_q8_row;
        if (pairs) w->decode_pair = decp_q8_row, w->pair_scale = CQ_CPU_WSCALE_ROW;
        break;
    case CQ_DTYPE_Q8_2F: {
        w->decode = dec_q8_2f;
        w->col = cq_cpu_scratch_get(cb, slot, (size_t)w->cols * sizeof(float));
        if (!w->col) return CQ_ERR_NOMEM;
        const uint8_t *c = w->p + w->rows * w->cols + 2 * w->rows;
        for (int64_t k = 0; k < w->cols; k++) w->col[k] = cq_cpu_h2f(cq_cpu_rd16(c + 2 * k));
        break;
    }
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED:
        w->decode = dec_q4_flat;
        if (grouped && w->cols % 32 == 0) w->decode_pair = decp_q4_flat, w->pair_scale = CQ_CPU_WSCALE_GROUP;
        break;
    case CQ_DTYPE_Q4TP:
        if (w->cols % 32) return cq_fail(CQ_ERR_SHAPE, "q4tp weight with %lld columns", (long long)w->cols);
        w->decode = dec_q4tp;
        w->gpr = w->cols / 32;
        w->code_stride = (int64_t)cq_codec_tp_code_stride((uint64_t)w->gpr);
        if (grouped) w->decode_pair = decp_q4tp, w->pair_scale = CQ_CPU_WSCALE_GROUP;
        break;
    default: return cq_fail(CQ_ERR_UNSUPPORTED, "cpu backend: no decoder for %s", cq_dtype_name(t->dtype));
    }
    return CQ_OK;
}

cq_status cq_cpu_wmat_prepare(cq_cpu_wmat *w) {
    if (w->dt != CQ_DTYPE_Q4TP || w->ladder) return CQ_OK;
    w->ladder = cq_cpu_scratch_get(w->cb, w->slot, (size_t)w->rows * 32 * sizeof(float));
    if (!w->ladder) return CQ_ERR_NOMEM;
    for (int64_t r = 0; r < w->rows; r++) cq_codec_q4tp_ladder(q4tp_par(w, r), w->ladder + 32 * r);
    return CQ_OK;
}

void cq_cpu_wmat_free(cq_cpu_wmat *w) {
    if (!w) return;
    if (w->col) cq_cpu_scratch_put(w->cb, w->slot, w->col);
    if (w->ladder) cq_cpu_scratch_put(w->cb, w->slot, w->ladder);
    w->col = NULL;
    w->ladder = NULL;
}
