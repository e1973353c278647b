#version 450
// group_moments.comp — the moments of ops.h's group_moments: for each block b of `block` consecutive rows of
// channels-last f32, f16 or bf16 x [R, C] (dt; m f32) and each group g of C/groups channels, m[b, 2g] = the mean of the block's values
// of the group and m[b, 2g + 1] = the sum of their squared deviations from it.
// One invocation per (block, group), neighbours taking neighbouring groups (their reads are adjacent), no
// barriers: a workgroup-wide reduction per pair costs more than the sums themselves on CPU drivers (lavapipe).
// The reference accumulates in f64; here f32 with compensated (Kahan) sums in two passes, the mean corrected
// by the deviations' own sum and the squared deviations less (that sum)² / n (the corrected two-pass
// formula), so the error does not grow with the block's size and stays within f32 tolerances where the mean
// is large next to the spread. `precise` keeps the compiler from folding the compensation away.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer M { float m[]; };
layout(push_constant) uniform P { uint C, groups, block, nb, xo, mo, dt; } p;

void main() {
    uint i = cq_gid();
    if (i >= p.nb * p.groups) return;
    uint b = i / p.groups, g = i % p.groups, cg = p.C / p.groups;
    uint base = p.xo + b * p.block * p.C + g * cg;
    precise float s = 0.0, sc = 0.0;
    for (uint r = 0u; r < p.block; r++)
        for (uint c = 0u; c < cg; c++) {
            precise float y = CQ_LD(x, CQ_XDT, base + r * p.C + c) - sc;
            precise float t = s + y;
            sc = (t - s) - y;
            s = t;
        }
    float n = float(p.block * cg), mean = s / n;
    precise float d1 = 0.0, d1c = 0.0, d2 = 0.0, d2c = 0.0;
    for (uint r = 0u; r < p.block; r++)
        for (uint c = 0u; c < cg; c++) {
            precise float d = CQ_LD(x, CQ_XDT, base + r * p.C + c) - mean;
            precise float y1 = d - d1c;
            precise float t1 = d1 + y1;
            d1c = (t1 - d1) - y1;
            d1 = t1;
            precise float y2 = d * d - d2c;
            precise float t2 = d2 + y2;
            d2c = (t2 - d2) - y2;
            d2 = t2;
        }
    m[p.mo + b * 2u * p.groups + 2u * g] = mean + d1 / n;
    m[p.mo + b * 2u * p.groups + 2u * g + 1u] = max(d2 - d1 * d1 / n, 0.0);
}
