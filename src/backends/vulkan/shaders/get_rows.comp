#version 450
// get_rows.comp — y [n, C] f32 = rows ids[i] of a table W [V, C] in f32, f16 or bf16. An id outside [0, V)
// gives a zero row and is reported in the status word (the first such failure since the last sync wins;
// vk_backend.c turns it into CQ_ERR_BOUNDS at sync).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer WF { float wf[]; };
layout(std430, binding = 0) readonly buffer WW { uint ww[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 7) buffer S { uint st[]; }; // code, op, seq, where, value
layout(push_constant) uniform P { uint n, C, V, wo, io, yo, wdt, op, seq; } p;

void main() {
    uint g = cq_gid();
    if (g >= p.n * p.C) return;
    uint i = g / p.C, col = g % p.C;
    int id = ids[p.io + i];
    if (id < 0 || uint(id) >= p.V) {
        if (col == 0u && atomicCompSwap(st[0], 0u, 1u) == 0u) {
            st[1] = p.op;
            st[2] = p.seq;
            st[3] = i;
            st[4] = uint(id);
        }
        y[p.yo + g] = 0.0;
        return;
    }
    uint e = p.wo + uint(id) * p.C + col;
    y[p.yo + g] = p.wdt == 0u ? wf[e] : cq_load_word(ww[e >> 1], e, p.wdt);
}
