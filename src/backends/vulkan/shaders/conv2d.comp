#version 450
// conv2d.comp — direct 2-D convolution of channels-last f32, f16 or bf16 (dt, accumulated in f32) images: y [Ho*Wo, Cout] from x [H*W, Cin] and a
// PyTorch-layout kernel [Cout, Cin, kh, kw] (or [Cout, Cin*kh*kw] for the per-row codecs) in any codec
// wdec.glsl decodes, as src/codec does, bias optional, strides, padding in zero,
// replicate or reflect mode (reflect mirrors without repeating the edge). One invocation per output value,
// accumulating in f32.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer WF { float wf[]; };
layout(std430, binding = 1) readonly buffer WW { uint ww[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(std430, binding = 8) readonly buffer E2 { float cq_exp2[]; }; // q4tp kernels only
layout(push_constant) uniform P {
    uint H, W, Cin, Cout, kh, kw, sy, sx, pl, pt, Ho, Wo, mode, xo, yo, wo, bo, has_b, wdt, dt; // dt: x's and y's dtype (0 f32, 1 f16, 2 bf16)
} p;

#define WDEC_FN w_dec
#define WDEC_WORDS ww
#define WDEC_FLOATS wf
#define WDEC_BYTE w_byte
#define WDEC_H16 w_h16
#include "wdec.glsl"

int pad_index(int i, int n) {
    if (i >= 0 && i < n) return i;
    if (p.mode == 1u) return i < 0 ? 0 : n - 1;
    if (p.mode == 2u) return i < 0 ? -i : 2 * (n - 1) - i;
    return -1;
}

void main() {
    uint g = cq_gid();
    if (g >= p.Ho * p.Wo * p.Cout) return;
    uint co = g % p.Cout, pix = g / p.Cout, oy = pix / p.Wo, ox = pix % p.Wo;
    uint K = p.Cin * p.kh * p.kw;
    float acc = p.has_b != 0u ? bias[p.bo + co] : 0.0;
    for (uint ky = 0u; ky < p.kh; ky++) {
        int iy = pad_index(int(oy * p.sy + ky) - int(p.pt), int(p.H));
        if (iy < 0) continue;
        for (uint kx = 0u; kx < p.kw; kx++) {
            int ix = pad_index(int(ox * p.sx + kx) - int(p.pl), int(p.W));
            if (ix < 0) continue;
            uint xb = p.xo + (uint(iy) * p.W + uint(ix)) * p.Cin, wc = ky * p.kw + kx;
            for (uint ci = 0u; ci < p.Cin; ci++) {
                float wv = w_dec(p.wdt, p.wo, p.Cout, K, co, wc + ci * p.kh * p.kw);
                acc += wv * CQ_LD(x, CQ_XDT, xb + ci);
            }
        }
    }
    CQ_ST(y, CQ_XDT, p.yo + g, acc);
}
