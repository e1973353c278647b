#version 450
// move.comp — the data-movement ops on f32, f16 or bf16 (dt; values pass through f32, exact), one invocation per output element, each a mode (vk_ops.c):
// 0 transpose, 1 concat_cols, 2 upsample_nearest, 3 pixel_shuffle, 4 pixel_unshuffle (PyTorch's channel
// order), 5 gather_cols (an index of -1 adds zero; one outside [-1, K) is reported in the status words).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer X2 { uint x2[]; };
layout(std430, binding = 2) readonly buffer I { int idx[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(std430, binding = 7) buffer S { uint st[]; }; // code, op, seq, where, value
layout(push_constant) uniform P { uint mode, n, xo, x2o, io, yo, a, b, c, d, op, seq; float scale; uint dt; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    float v;
    if (p.mode == 0u) { // x [a, b] -> y [b, a]
        v = CQ_LD(x, CQ_XDT, p.xo + (g % p.a) * p.b + g / p.a);
    } else if (p.mode == 1u) { // [a rows] of b | c columns
        uint r = g / (p.b + p.c), col = g % (p.b + p.c);
        v = col < p.b ? CQ_LD(x, CQ_XDT, p.xo + r * p.b + col) : CQ_LD(x2, CQ_XDT, p.x2o + r * p.c + col - p.b);
    } else if (p.mode == 2u) { // H a, W b, factor c, channels d
        uint pix = g / p.d, ch = g % p.d, wo = p.b * p.c, oy = pix / wo, ox = pix % wo;
        v = CQ_LD(x, CQ_XDT, p.xo + ((oy / p.c) * p.b + ox / p.c) * p.d + ch);
    } else if (p.mode == 3u) { // H a, W b, r c, output channels d
        uint r = p.c, pix = g / p.d, ch = g % p.d, wo = p.b * r, oy = pix / wo, ox = pix % wo;
        v = CQ_LD(x, CQ_XDT, p.xo + ((oy / r) * p.b + ox / r) * (p.d * r * r) + ch * r * r + (oy % r) * r + ox % r);
    } else if (p.mode == 4u) { // output grid H a, W b, r c, input channels d
        uint r = p.c, co = p.d * r * r, pix = g / co, cc = g % co, h = pix / p.b, w = pix % p.b;
        uint ch = cc / (r * r), i = (cc / r) % r, j = cc % r;
        v = CQ_LD(x, CQ_XDT, p.xo + ((r * h + i) * (p.b * r) + r * w + j) * p.d + ch);
    } else { // gather_cols: x cols a, y cols b, group c
        uint row = g / p.b, col = g % p.b;
        v = 0.0;
        for (uint k = 0u; k < p.c; k++) {
            uint at = col * p.c + k;
            int id = idx[p.io + at];
            if (id == -1) continue;
            if (id < -1 || id >= int(p.a)) {
                if (row == 0u && atomicCompSwap(st[0], 0u, 1u) == 0u) {
                    st[1] = p.op;
                    st[2] = p.seq;
                    st[3] = at;
                    st[4] = uint(id);
                }
                continue;
            }
            v += CQ_LD(x, CQ_XDT, p.xo + row * p.a + uint(id));
        }
        v *= p.scale;
    }
    CQ_ST(y, CQ_XDT, p.yo + g, v);
}
