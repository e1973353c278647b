#version 450
// d2s3.comp — 3-D depth-to-space of channels-last f32, f16 or bf16 (dt) video: x [T*H*W, C*pt*ph*pw] -> y [(pt T)(ph H)(pw W), C];
// input channel ((c*pt + a)*ph + b)*pw + d of voxel (f, h, w) is output channel c of voxel
// (pt f + a, ph h + b, pw w + d). One invocation per output value.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint n, H, W, C, pt, ph, pw, xo, yo, dt; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    uint Ho = p.H * p.ph, Wo = p.W * p.pw, P = p.pt * p.ph * p.pw;
    uint c = g % p.C, vox = g / p.C, X = vox % Wo, Yv = (vox / Wo) % Ho, F = vox / (Wo * Ho);
    uint src = ((F / p.pt * p.H + Yv / p.ph) * p.W + X / p.pw) * (p.C * P) +
               ((c * p.pt + F % p.pt) * p.ph + Yv % p.ph) * p.pw + X % p.pw;
    CQ_ST(y, CQ_XDT, p.yo + g, CQ_LD(x, CQ_XDT, p.xo + src));
}
