#version 450
// rmsnorm.comp — y = x / rms(x) * w (or * (1 + w)) + bias over each f32 row; y may be x.
#extension GL_GOOGLE_include_directive : enable
#include "rows.glsl"
layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo, wo, bo, has_w, has_b, zero_centered; float eps; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float ss = 0.0;
    for (uint c = t; c < p.cols; c += 128u) ss += x[xb + c] * x[xb + c];
    ss = cq_wg_sum(ss);
    float inv = inversesqrt(ss / float(p.cols) + p.eps);
    for (uint c = t; c < p.cols; c += 128u) {
        float wc = p.has_w != 0u ? (p.zero_centered != 0u ? 1.0 + w[p.wo + c] : w[p.wo + c]) : 1.0;
        float b = p.has_b != 0u ? bias[p.bo + c] : 0.0;
        y[yb + c] = x[xb + c] * inv * wc + b;
    }
}
