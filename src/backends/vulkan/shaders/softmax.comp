#version 450
// softmax.comp — row-wise softmax of x * scale on f32, f16 or bf16 (computed in f32); y may be x.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo; float scale; uint dt; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float m = -3.402823466e38;
    for (uint c = t; c < p.cols; c += 128u) m = max(m, p.scale * CQ_LD(x, CQ_XDT, xb + c));
    m = cq_wg_max(m);
    float s = 0.0;
    for (uint c = t; c < p.cols; c += 128u) s += exp(p.scale * CQ_LD(x, CQ_XDT, xb + c) - m);
    s = cq_wg_sum(s);
    float inv = 1.0 / s;
    for (uint c = t; c < p.cols; c += 128u) CQ_ST(y, CQ_XDT, yb + c, exp(p.scale * CQ_LD(x, CQ_XDT, xb + c) - m) * inv);
}
