#version 450
// layernorm.comp — y = LN(x) * (1 + scale) + shift over each row of f32, f16 or bf16 x (computed in f32; scale
// and shift f32; biased variance from a second pass, eps inside the root); y may be x.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer S { float scale[]; };
layout(std430, binding = 2) readonly buffer T { float shift[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint rows, cols, xo, yo, so, to, has_s, has_t; float eps; uint dt; } p;

void main() {
    uint r = cq_row();
    if (r >= p.rows) return;
    uint t = gl_LocalInvocationID.x, xb = p.xo + r * p.cols, yb = p.yo + r * p.cols;
    float s = 0.0;
    for (uint c = t; c < p.cols; c += 128u) s += CQ_LD(x, CQ_XDT, xb + c);
    float mean = cq_wg_sum(s) / float(p.cols);
    float v = 0.0;
    for (uint c = t; c < p.cols; c += 128u) {
        float d = CQ_LD(x, CQ_XDT, xb + c) - mean;
        v += d * d;
    }
    float inv = 1.0 / sqrt(cq_wg_sum(v) / float(p.cols) + p.eps);
    for (uint c = t; c < p.cols; c += 128u) {
        float a = p.has_s != 0u ? 1.0 + scale[p.so + c] : 1.0;
        float b = p.has_t != 0u ? shift[p.to + c] : 0.0;
        CQ_ST(y, CQ_XDT, yb + c, (CQ_LD(x, CQ_XDT, xb + c) - mean) * inv * a + b);
    }
}
