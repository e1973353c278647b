#version 450
// layernorm.comp — y = LN(x) * (1 + scale) + shift over each f32 row (biased
// variance from a second pass, eps inside the root); y may be x.
#extension GL_GOOGLE_include_directive : enable
#include "rows.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float scale[]; };
layout(std430, binding = 2) readonly buffer T { float shift[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo, so, to, has_s, has_t; float eps; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float s = 0.0;
    for (uint c = t; c < p.cols; c += 128u) s += x[xb + c];
    float mean = cq_wg_sum(s) / float(p.cols);
    float v = 0.0;
    for (uint c = t; c < p.cols; c += 128u) {
        float d = x[xb + c] - mean;
        v += d * d;
    }
    float inv = 1.0 / sqrt(cq_wg_sum(v) / float(p.cols) + p.eps);
    for (uint c = t; c < p.cols; c += 128u) {
        float a = p.has_s != 0u ? 1.0 + scale[p.so + c] : 1.0;
        float b = p.has_t != 0u ? shift[p.to + c] : 0.0;
        y[yb + c] = (x[xb + c] - mean) * inv * a + b;
    }
}
