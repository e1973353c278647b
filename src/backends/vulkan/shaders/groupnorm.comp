#version 450
// groupnorm.comp — group norm of channels-last f32, f16 or bf16 rows x [R, C] (dt; computed in f32), statistics over all rows of each group's
// C/groups channels (two passes, biased variance, eps inside the root), then * gamma + beta (each
// optional). One workgroup per group: the group's elements are its own, so y may be x.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer G { float gamma[]; };
layout(std430, binding = 2) readonly buffer B { float beta[]; };
layout(std430, binding = 3) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint R, C, groups, xo, yo, go, bo, has_g, has_b; float eps; uint dt; } p;

void main() {
    uint g = cq_row();
    if (g >= p.groups) return;
    uint t = gl_LocalInvocationID.x, cg = p.C / p.groups, n = p.R * cg;
    float s = 0.0;
    for (uint e = t; e < n; e += 128u) s += CQ_LD(x, CQ_XDT, p.xo + (e / cg) * p.C + g * cg + e % cg);
    float mean = cq_wg_sum(s) / float(n);
    float v = 0.0;
    for (uint e = t; e < n; e += 128u) {
        float d = CQ_LD(x, CQ_XDT, p.xo + (e / cg) * p.C + g * cg + e % cg) - mean;
        v += d * d;
    }
    float inv = 1.0 / sqrt(cq_wg_sum(v) / float(n) + p.eps);
    for (uint e = t; e < n; e += 128u) {
        uint c = g * cg + e % cg, o = (e / cg) * p.C + c;
        float a = p.has_g != 0u ? gamma[p.go + c] : 1.0, b = p.has_b != 0u ? beta[p.bo + c] : 0.0;
        CQ_ST(y, CQ_XDT, p.yo + o, (CQ_LD(x, CQ_XDT, p.xo + o) - mean) * inv * a + b);
    }
}
