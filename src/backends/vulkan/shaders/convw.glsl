// convw.glsl — what conv2d.comp, conv3d.glsl and conv1d.glsl share, included after their bindings (X, WF, WW)
// and push constants `p` (with wdt, wo and mode):
//   conv_w(rows, cols, r, c): element (r, c) of the kernel viewed as [rows, cols]: with CQ_CONV_Q wdec.glsl's
//     decoder of every codec (binding 8 holds the q4tp exp2 table), else the plain f32 / f16 / bf16 load, so a
//     float kernel's inner loop carries no decoder;
//   pad_index(i, n): an input index after padding mode p.mode (0 zero: -1 outside, 1 replicate, 2 reflect without
//     repeating the edge).
#ifdef CQ_CONV_Q
layout(std430, binding = 8) readonly buffer E2 { float cq_exp2[]; };
#define WDEC_FN w_dec
#define WDEC_WORDS ww
#define WDEC_FLOATS wf
#define WDEC_BYTE w_byte
#define WDEC_H16 w_h16
#include "wdec.glsl"
float conv_w(uint rows, uint cols, uint r, uint c) { return w_dec(p.wdt, p.wo, rows, cols, r, c); }
#else
float conv_w(uint rows, uint cols, uint r, uint c) {
    uint e = p.wo + r * cols + c;
    return p.wdt == 0u ? wf[e] : cq_load_word(ww[e >> 1], e, p.wdt);
}
#endif

int pad_index(int i, int n) {
    if (i >= 0 && i < n) return i;
    if (p.mode == 1u) return i < 0 ? 0 : n - 1;
    if (p.mode == 2u) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}
