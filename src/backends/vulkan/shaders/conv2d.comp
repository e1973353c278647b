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
layout(push_constant) uniform P {
    uint H, W, Cin, Cout, kh, kw, sy, sx, pl, pt, Ho, Wo, mode, xo, yo, wo, bo, has_b, wdt, dt; // dt: x's and y's dtype (0 f32, 1 f16, 2 bf16)
} p;

#define CQ_CONV_Q 1 // one shader for every codec (conv2d is not on the LTX hot path)
#include "convw.glsl"

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
                float wv = conv_w(p.Cout, K, co, wc + ci * p.kh * p.kw);
                acc += wv * CQ_LD(x, CQ_XDT, xb + ci);
            }
        }
    }
    CQ_ST(y, CQ_XDT, p.yo + g, acc);
}
