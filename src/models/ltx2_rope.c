/*
 * ltx2_rope.c — see ltx2_rope.h. Each expression keeps the reference's
 * float32 (or float64) operations one by one, so the tables agree with
 * diffusers' to the last bit up to the libm's cos/sin.
 */
#include "models/ltx2_rope.h"

#include <math.h>
#include <string.h>

#include "base/base.h"

static bool side_ok(int n) { return n >= 1 && n <= CQ_LTX2_MAX_SIDE; }

cq_status cq_ltx2_video_positions(int frames, int h, int w, const int scale[3], int causal_offset, double fps,
                                  float *pos) {
    if (!scale || !pos) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 positions: no scale or output");
    if (!side_ok(frames) || !side_ok(h) || !side_ok(w) || (int64_t)frames * h * w > (int64_t)1 << 26)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 positions: a %d x %d x %d latent grid (each side 1..%d)", frames, h,
                       w, CQ_LTX2_MAX_SIDE);
    for (int a = 0; a < 3; a++)
        if (scale[a] < 1 || scale[a] > 1024)
            return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 positions: scale factor %d (need 1..1024)", scale[a]);
    if (!(fps > 0.0) || !isfinite(fps)) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 positions: fps %g", fps);
    const float ffps = (float)fps;
    /* the time axis: [f, f + 1) latent frames -> pixel frames -> the causal shift -> seconds */
    for (int f = 0; f < frames; f++) {
        float t0 = (float)f * (float)scale[0], t1 = ((float)f + 1.0f) * (float)scale[0];
        t0 = (t0 + (float)causal_offset) - (float)scale[0];
        t1 = (t1 + (float)causal_offset) - (float)scale[0];
        t0 = (t0 < 0.0f ? 0.0f : t0) / ffps;
        t1 = (t1 < 0.0f ? 0.0f : t1) / ffps;
        const float tm = (t0 + t1) / 2.0f;
        for (int y = 0; y < h; y++) {
            const float y0 = (float)y * (float)scale[1], y1 = ((float)y + 1.0f) * (float)scale[1];
            const float ym = (y0 + y1) / 2.0f;
            for (int x = 0; x < w; x++) {
                const float x0 = (float)x * (float)scale[2], x1 = ((float)x + 1.0f) * (float)scale[2];
                float *p = pos + (((int64_t)f * h + y) * w + x) * 3;
                p[0] = tm;
                p[1] = ym;
                p[2] = (x0 + x1) / 2.0f;
            }
        }
    }
    return CQ_OK;
}

cq_status cq_ltx2_audio_positions(int n, int shift, int scale, int causal_offset, int hop, int rate, float *pos) {
    if (!pos) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 audio positions: no output");
    if (n < 1 || n > (1 << 24) || shift < 0 || shift > (1 << 24))
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 audio positions: %d frames from %d", n, shift);
    if (scale < 1 || scale > 1024 || hop < 1 || rate < 1)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 audio positions: scale %d, hop %d, rate %d", scale, hop, rate);
    for (int i = 0; i < n; i++) {
        const float g = (float)(i + shift);
        float m0 = g * (float)scale, m1 = (g + 1.0f) * (float)scale;
        m0 = (m0 + (float)causal_offset) - (float)scale;
        m1 = (m1 + (float)causal_offset) - (float)scale;
        m0 = m0 < 0.0f ? 0.0f : m0;
        m1 = m1 < 0.0f ? 0.0f : m1;
        const float s0 = (m0 * (float)hop) / (float)rate, s1 = (m1 * (float)hop) / (float)rate;
        pos[i] = (s0 + s1) / 2.0f;
    }
    return CQ_OK;
}

/* torch.linspace(0, 1, n) value i (its CPU kernel: the lower half from the start, the upper half back from the
 * end, each a fused multiply-add) */
static double linspace01(int i, int n) {
    if (n == 1) return 0.0;
    const double step = 1.0 / (double)(n - 1);
    return i < n / 2 ? fma(step, (double)i, 0.0) : fma(-step, (double)(n - 1 - i), 1.0);
}

static float linspace01f(int i, int n) {
    if (n == 1) return 0.0f;
    const float step = 1.0f / (float)(n - 1);
    return i < n / 2 ? fmaf(step, (float)i, 0.0f) : fmaf(-step, (float)(n - 1 - i), 1.0f);
}

cq_status cq_ltx2_rope_tables(const cq_ltx2_rope *r, const float *pos, int64_t n, float *cosv, float *sinv) {
    if (!r || !pos || !cosv || !sinv) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: no config, positions or output");
    if (r->n_axes < 1 || r->n_axes > CQ_LTX2_ROPE_MAX_AXES)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: %d position axes (need 1..%d)", r->n_axes,
                       CQ_LTX2_ROPE_MAX_AXES);
    if (r->dim < 2 * r->n_axes || r->dim % 2 || r->dim > (1 << 16))
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: width %d for %d axes", r->dim, r->n_axes);
    if (!(r->theta > 1.0) || !isfinite(r->theta)) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: theta %g", r->theta);
    for (int d = 0; d < r->n_axes; d++)
        if (!(r->max_pos[d] > 0.0f) || !isfinite(r->max_pos[d]))
            return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: axis %d's largest position %g", d, (double)r->max_pos[d]);
    if (n < 0 || n > ((int64_t)1 << 40) / r->dim) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2 rope: %lld rows", (long long)n);
    const int count = r->dim / (2 * r->n_axes), cols = r->dim / 2, pad = cols - count * r->n_axes;
    float *freq = cq_malloc((size_t)count * sizeof *freq);
    if (!freq) return cq_fail(CQ_ERR_NOMEM, "ltx2 rope: out of memory");
    for (int j = 0; j < count; j++) {
        if (r->f64) freq[j] = (float)((pow(r->theta, linspace01(j, count)) * M_PI) / 2.0);
        else freq[j] = (powf((float)r->theta, linspace01f(j, count)) * (float)M_PI) / 2.0f;
    }
    for (int64_t t = 0; t < n; t++) {
        float *c = cosv + t * cols, *s = sinv + t * cols;
        for (int k = 0; k < pad; k++) {
            c[k] = 1.0f;
            s[k] = 0.0f;
        }
        for (int d = 0; d < r->n_axes; d++) {
            const float frac = pos[t * r->n_axes + d] / r->max_pos[d];
            const float u = frac * 2.0f - 1.0f;
            for (int j = 0; j < count; j++) {
                const float a = u * freq[j];
                c[pad + j * r->n_axes + d] = cosf(a);
                s[pad + j * r->n_axes + d] = sinf(a);
            }
        }
    }
    cq_free(freq);
    return CQ_OK;
}
