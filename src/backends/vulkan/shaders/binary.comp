#version 450
// binary.comp — y = a (op) b on f32, f16 or bf16 (computed in f32), b either a's shape or one row broadcast
// (bn = C).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer B { uint b[]; };
layout(std430, binding = 2) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint n, ao, bo, yo, cols, bcast, fn, dt; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    float u = CQ_LD(a, CQ_XDT, p.ao + g), v = CQ_LD(b, CQ_XDT, p.bo + (p.bcast != 0u ? g % p.cols : g)), r;
    if (p.fn == 0u) r = u + v;
    else if (p.fn == 1u) r = u - v;
    else if (p.fn == 2u) r = u * v;
    else r = u / v;
    CQ_ST(y, CQ_XDT, p.yo + g, r);
}
