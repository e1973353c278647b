#version 450
// gated_add.comp — y += gate ⊙ x on f32, gate [C] per channel (has_gate 0: 1).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float gate[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform P { uint n, xo, go, yo, cols, has_gate; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n) return;
    float w = p.has_gate != 0u ? gate[p.go + g % p.cols] : 1.0;
    y[p.yo + g] = y[p.yo + g] + w * x[p.xo + g];
}
