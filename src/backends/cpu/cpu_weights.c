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
 * Payloads are unaligned little-endian: read bytewise.
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

static void dec_q8_row(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    const int8_t *q = (const int8_t *)w->p + r * w->cols + k0;
    float s = cq_cpu_h2f(cq_cpu_rd16(w->p + w->rows * w->cols + 2 * r));
    for (int64_t i = 0; i < n; i++) out[i] = (float)q[i] * s;
}

static void dec_q8_2f(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    const int8_t *q = (const int8_t *)w->p + r * w->cols + k0;
    float s = cq_cpu_h2f(cq_cpu_rd16(w->p + w->rows * w->cols + 2 * r));
    const float *col = w->col + k0;
    for (int64_t i = 0; i < n; i++) out[i] = ((float)q[i] * s) * col[i];
}

/* One group of 32 4-bit values, low nibble first, value nibble - 8. */
static inline void q4_group(const uint8_t *nib, float s, float *out) {
    for (int j = 0; j < 16; j++) {
        out[2 * j] = (float)((int)(nib[j] & 15) - 8) * s;
        out[2 * j + 1] = (float)((int)(nib[j] >> 4) - 8) * s;
    }
}

static inline float q4_elem(const uint8_t *nib, int64_t j, float s) {
    uint8_t b = nib[j >> 1];
    return (float)((int)((j & 1) ? b >> 4 : b & 15) - 8) * s;
}

/* q4_block / q4_tiled: groups run over the flattened tensor (they may cross
 * rows when cols % 32 != 0), so work on flat element indices. */
static void dec_q4_flat(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out, bool tiled) {
    int64_t f = r * w->cols + k0, end = f + n;
    int64_t G = (w->rows * w->cols + 31) / 32;
    float grp[32];
    while (f < end) {
        int64_t g = f / 32, j0 = f % 32, cnt = CQ_MIN(32 - j0, end - f);
        const uint8_t *nib = tiled ? w->p + 18 * g + 2 : w->p + 16 * g;
        float s = cq_cpu_h2f(cq_cpu_rd16(tiled ? w->p + 18 * g : w->p + 16 * G + 2 * g));
        if (j0 == 0 && cnt == 32) {
            q4_group(nib, s, out);
        } else {
            q4_group(nib, s, grp);
            memcpy(out, grp + j0, (size_t)cnt * sizeof(float));
        }
        out += cnt;
        f += cnt;
    }
}

static void dec_q4_tiled(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    dec_q4_flat(w, r, k0, n, out, true);
}

static void dec_q4_block(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    dec_q4_flat(w, r, k0, n, out, false);
}

static void dec_q4tp(const cq_cpu_wmat *w, int64_t r, int64_t k0, int64_t n, float *out) {
    int64_t gpr = w->gpr;
    const uint8_t *nibs = w->p + 16 * r * gpr;
    const uint8_t *par = w->p + 16 * w->rows * gpr + 4 * r;
    const uint8_t *codes = w->p + 16 * w->rows * gpr + 4 * w->rows + r * w->code_stride;
    float t[32];
    cq_codec_q4tp_ladder(par, t); /* the codec's own chain: bit-identical rungs */
    int64_t k = k0, end = k0 + n;
    while (k < end) {
        int64_t g = k / 32, j0 = k % 32, cnt = CQ_MIN(32 - j0, end - k);
        float s = t[cq_codec_tp_code(codes, (uint64_t)g)];
        if (j0 == 0 && cnt == 32) {
            q4_group(nibs + 16 * g, s, out);
        } else {
            for (int64_t j = 0; j < cnt; j++) out[j] = q4_elem(nibs + 16 * g, j0 + j, s);
        }
        out += cnt;
        k += cnt;
    }
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
    switch ((int)t->dtype) {
    case CQ_DTYPE_F32: w->decode = dec_f32; break;
    case CQ_DTYPE_F16: w->decode = dec_f16; break;
    case CQ_DTYPE_BF16: w->decode = dec_bf16; break;
    case CQ_DTYPE_Q8_ROW: w->decode = dec_q8_row; break;
    case CQ_DTYPE_Q8_2F: {
        w->decode = dec_q8_2f;
        w->col = cq_cpu_scratch_get(cb, slot, (size_t)w->cols * sizeof(float));
        if (!w->col) return CQ_ERR_NOMEM;
        const uint8_t *c = w->p + w->rows * w->cols + 2 * w->rows;
        for (int64_t k = 0; k < w->cols; k++) w->col[k] = cq_cpu_h2f(cq_cpu_rd16(c + 2 * k));
        break;
    }
    case CQ_DTYPE_Q4_BLOCK: w->decode = dec_q4_block; break;
    case CQ_DTYPE_Q4_TILED: w->decode = dec_q4_tiled; break;
    case CQ_DTYPE_Q4TP:
        if (w->cols % 32) return cq_fail(CQ_ERR_SHAPE, "q4tp weight with %lld columns", (long long)w->cols);
        w->decode = dec_q4tp;
        w->gpr = w->cols / 32;
        w->code_stride = (int64_t)cq_codec_tp_code_stride((uint64_t)w->gpr);
        break;
    default: return cq_fail(CQ_ERR_UNSUPPORTED, "cpu backend: no decoder for %s", cq_dtype_name(t->dtype));
    }
    return CQ_OK;
}

void cq_cpu_wmat_free(cq_cpu_wmat *w) {
    if (!w) return;
    if (w->col) cq_cpu_scratch_put(w->cb, w->slot, w->col);
    w->col = NULL;
}

void cq_cpu_pack_b(const cq_cpu_wmat *w, int64_t r0, int64_t nr, int64_t k0, int64_t kc, int NR, float *dst,
                   float *tmp) {
    for (int64_t p = 0; p < nr; p += NR) {
        int64_t rows = CQ_MIN(NR, nr - p);
        for (int64_t j = 0; j < rows; j++) w->decode(w, r0 + p + j, k0, kc, tmp + j * kc);
        float *d = dst + p * kc;
        /* Transpose the NR decoded row segments into the panel [kc][NR]. */
        for (int64_t k = 0; k < kc; k++) {
            for (int64_t j = 0; j < rows; j++) d[k * NR + j] = tmp[j * kc + k];
            for (int64_t j = rows; j < NR; j++) d[k * NR + j] = 0.0f;
        }
    }
}
