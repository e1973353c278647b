#version 450
// qk_norm_rope.comp — in place on t [N, H*D] f32, f16 or bf16 (dt; computed in f32, w/cos/sin f32): per-head RMSNorm with weight w (optional; the normed value
// rounded to f32 as the model does), then rotary embedding of the first rope_dim dims with cos/sin
// [N, rope_dim/2] (mode 1 interleaved pairs (2i, 2i+1), mode 2 halves (i, i + rope_dim/2), 0 none). One
// workgroup per (row, head); each rotated pair belongs to one invocation.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) buffer T { uint x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer CO { float cs[]; };
layout(std430, binding = 3) readonly buffer SI { float sn[]; };
layout(push_constant) uniform P { uint N, H, D, rd, to, wo, co, so, has_w, mode; float eps; uint dt; } p;

void main() {
    uint wg = cq_row();
    if (wg >= p.N * p.H) return;
    uint n = wg / p.H, t = gl_LocalInvocationID.x, base = p.to + wg * p.D, half_ = p.rd / 2u;
    float inv = 1.0;
    if (p.has_w != 0u) {
        float ss = 0.0;
        for (uint d = t; d < p.D; d += 128u) {
            float xv = CQ_LD(x, CQ_XDT, base + d);
            ss += xv * xv;
        }
        inv = 1.0 / sqrt(cq_wg_sum(ss) / float(p.D) + p.eps);
    }
    if (p.mode != 0u) {
        for (uint i = t; i < half_; i += 128u) {
            uint i0 = p.mode == 1u ? 2u * i : i, i1 = p.mode == 1u ? 2u * i + 1u : i + half_;
            float x0 = CQ_LD(x, CQ_XDT, base + i0), x1 = CQ_LD(x, CQ_XDT, base + i1);
            if (p.has_w != 0u) {
                x0 = x0 * inv * w[p.wo + i0];
                x1 = x1 * inv * w[p.wo + i1];
            }
            float c = cs[p.co + n * half_ + i], s = sn[p.so + n * half_ + i];
            CQ_ST(x, CQ_XDT, base + i0, x0 * c - x1 * s);
            CQ_ST(x, CQ_XDT, base + i1, x0 * s + x1 * c);
        }
    }
    if (p.has_w != 0u)
        for (uint d = (p.mode != 0u ? 2u * half_ : 0u) + t; d < p.D; d += 128u)
            CQ_ST(x, CQ_XDT, base + d, CQ_LD(x, CQ_XDT, base + d) * inv * w[p.wo + d]);
}
