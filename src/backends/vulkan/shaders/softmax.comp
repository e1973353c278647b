#version 450
// softmax.comp — row-wise softmax of x * scale on f32; y may be x.
#extension GL_GOOGLE_include_directive : enable
#include "rows.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo; float scale; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float m = -3.402823466e38;
    for (uint c = t; c < p.cols; c += 128u) m = max(m, p.scale * x[xb + c]);
    m = cq_wg_max(m);
    float s = 0.0;
    for (uint c = t; c < p.cols; c += 128u) s += exp(p.scale * x[xb + c] - m);
    s = cq_wg_sum(s);
    float inv = 1.0 / s;
    for (uint c = t; c < p.cols; c += 128u) y[yb + c] = exp(p.scale * x[xb + c] - m) * inv;
}
