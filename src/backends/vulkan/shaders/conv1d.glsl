// conv1d.glsl — the body of conv1d.comp (float kernels) and conv1dq.comp (CQ_CONV_Q: the quantized
// codecs): 1-D convolution (tr 0) and transposed convolution (tr 1) of channels-last f32, f16 or bf16
// signals (dt, summed in f32):
// y [Lo, Cout] from x [L, Cin], grouped. conv1d: kernel [Cout, Cin/G, k], stride, dilation, padding pl in zero,
// replicate or reflect mode. Transposed: kernel [Cin, Cout/G, k], stride, pl samples cropped from the front of
// the full result. Kernels (2-D [rows, K] for the per-row codecs) in any codec wdec.glsl decodes, bias optional;
// one invocation per output value, f32 sums.
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer WF { float wf[]; };
layout(std430, binding = 1) readonly buffer WW { uint ww[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(push_constant) uniform P {
    uint L, Cin, Cout, k, stride, dil, groups, pl, mode, Lo, tr, xo, yo, wo, bo, has_b, wdt, dt; // dt: x's and y's dtype (0 f32, 1 f16, 2 bf16)
} p;

#include "convw.glsl"

void main() {
    uint g = cq_gid();
    if (g >= p.Lo * p.Cout) return;
    uint co = g % p.Cout, o = g / p.Cout;
    uint cig = p.Cin / p.groups, cog = p.Cout / p.groups, grp = co / cog;
    float acc = p.has_b != 0u ? bias[p.bo + co] : 0.0;
    if (p.tr == 0u) {
        // kernel rows: Cout of cig * k
        uint c0 = grp * cig, K = cig * p.k;
        for (uint j = 0u; j < p.k; j++) {
            int i = pad_index(int(o * p.stride + j * p.dil) - int(p.pl), int(p.L));
            if (i < 0) continue;
            uint xb = p.xo + uint(i) * p.Cin + c0;
            for (uint ci = 0u; ci < cig; ci++)
                acc += conv_w(p.Cout, K, co, ci * p.k + j) * CQ_LD(x, CQ_XDT, xb + ci);
        }
    } else {
        // every (i, j) with i*stride + j = o + pl
        // kernel rows: Cin of cog * k
        uint full = o + p.pl, col = co % cog, K = cog * p.k;
        for (uint j = full % p.stride; j < p.k && j <= full; j += p.stride) {
            uint i = (full - j) / p.stride;
            if (i >= p.L) continue;
            uint xb = p.xo + i * p.Cin;
            for (uint ci = grp * cig; ci < (grp + 1u) * cig; ci++)
                acc += conv_w(p.Cin, K, ci, col * p.k + j) * CQ_LD(x, CQ_XDT, xb + ci);
        }
    }
    CQ_ST(y, CQ_XDT, p.yo + g, acc);
}
