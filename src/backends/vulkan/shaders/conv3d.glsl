// conv3d.glsl — the body of conv3d.comp (float kernels) and conv3dq.comp (CQ_CONV_Q: the quantized codecs):
// direct 3-D convolution of channels-last f32, f16 or bf16 (dt, accumulated in f32) video: y [To*Ho*Wo, Cout]
// from x [T*H*W, Cin] and a PyTorch-layout kernel [Cout, Cin, kt, kh, kw] (or [Cout, Cin*kt*kh*kw] for the per-row codecs) in any codec
// wdec.glsl decodes, as src/codec does, bias optional, strides. Time is padded by
// replicating the first and last frames (LTX's causal conv), space in zero, replicate or reflect mode. One
// invocation per output value, accumulating in f32.
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer WF { float wf[]; };
layout(std430, binding = 1) readonly buffer WW { uint ww[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(push_constant) uniform P {
    uint T, H, W, Cin, Cout, kt, kh, kw, st, sy, sx, pf, pl, pt, To, Ho, Wo, mode, xo, yo, wo, bo, has_b, wdt, dt; // dt: x's and y's dtype (0 f32, 1 f16, 2 bf16)
} p;

#include "convw.glsl"

void main() {
    uint g = cq_gid();
    if (g >= p.To * p.Ho * p.Wo * p.Cout) return;
    uint co = g % p.Cout, vox = g / p.Cout, ox = vox % p.Wo, oy = (vox / p.Wo) % p.Ho, ot = vox / (p.Wo * p.Ho);
    uint taps = p.kt * p.kh * p.kw, K = p.Cin * taps;
    float acc = p.has_b != 0u ? bias[p.bo + co] : 0.0;
    for (uint kd = 0u; kd < p.kt; kd++) {
        int it = clamp(int(ot * p.st + kd) - int(p.pf), 0, int(p.T) - 1);
        for (uint ky = 0u; ky < p.kh; ky++) {
            int iy = pad_index(int(oy * p.sy + ky) - int(p.pt), int(p.H));
            if (iy < 0) continue;
            for (uint kx = 0u; kx < p.kw; kx++) {
                int ix = pad_index(int(ox * p.sx + kx) - int(p.pl), int(p.W));
                if (ix < 0) continue;
                uint xb = p.xo + ((uint(it) * p.H + uint(iy)) * p.W + uint(ix)) * p.Cin;
                uint wc = (kd * p.kh + ky) * p.kw + kx;
                for (uint ci = 0u; ci < p.Cin; ci++) acc += conv_w(p.Cout, K, co, wc + ci * taps) * CQ_LD(x, CQ_XDT, xb + ci);
            }
        }
    }
    CQ_ST(y, CQ_XDT, p.yo + g, acc);
}
