#version 450
// swiglu.comp — y = silu(a) ⊙ b on f32, f16 or bf16 (computed in f32); fused (b absent): a [M, 2F] holds
// gate|up.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer B { uint b[]; };
layout(std430, binding = 2) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint n, ao, bo, yo, F, fused, dt; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    float gv, uv;
    if (p.fused != 0u) {
        uint r = g / p.F, f = g % p.F;
        gv = CQ_LD(a, CQ_XDT, p.ao + r * 2u * p.F + f);
        uv = CQ_LD(a, CQ_XDT, p.ao + r * 2u * p.F + p.F + f);
    } else {
        gv = CQ_LD(a, CQ_XDT, p.ao + g);
        uv = CQ_LD(b, CQ_XDT, p.bo + g);
    }
    CQ_ST(y, CQ_XDT, p.yo + g, gv / (1.0 + exp(-gv)) * uv);
}
