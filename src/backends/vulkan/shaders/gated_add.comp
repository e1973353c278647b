#version 450
// gated_add.comp — y += gate ⊙ x on f32, f16 or bf16 activations (computed in f32), gate [C] f32 per channel
// (has_gate 0: 1).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer G { float gate[]; };
layout(std430, binding = 2) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint n, xo, go, yo, cols, has_gate, dt; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    float w = p.has_gate != 0u ? gate[p.go + g % p.cols] : 1.0;
    CQ_ST(y, CQ_XDT, p.yo + g, CQ_LD(y, CQ_XDT, p.yo + g) + w * CQ_LD(x, CQ_XDT, p.xo + g));
}
