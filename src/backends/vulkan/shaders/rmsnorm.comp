#version 450
// rmsnorm.comp — y = x / rms(x) * w (or * (1 + w)) + bias over each row of f32, f16 or bf16 x (computed in
// f32; w and bias f32); y may be x.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo, wo, bo, has_w, has_b, zero_centered; float eps; uint dt; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float ss = 0.0;
    for (uint c = t; c < p.cols; c += 128u) {
        float v = CQ_LD(x, CQ_XDT, xb + c);
        ss += v * v;
    }
    ss = cq_wg_sum(ss);
    float inv = inversesqrt(ss / float(p.cols) + p.eps);
    for (uint c = t; c < p.cols; c += 128u) {
        float wc = p.has_w != 0u ? (p.zero_centered != 0u ? 1.0 + w[p.wo + c] : w[p.wo + c]) : 1.0;
        float b = p.has_b != 0u ? bias[p.bo + c] : 0.0;
        CQ_ST(y, CQ_XDT, yb + c, CQ_LD(x, CQ_XDT, xb + c) * inv * wc + b);
    }
}
