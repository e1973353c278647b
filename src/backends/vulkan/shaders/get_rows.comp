#version 450
// get_rows.comp — y [n, C] f32, f16 or bf16 (ydt) = rows ids[i] of a table W [V, C] in any codec wdec.glsl decodes (f32, f16,
// bf16, q8_row, q8_2f, q4_block, q4_tiled, q4tp), decoded as src/codec does. An id outside [0, V)
// gives a zero row and is reported in the status word (the first such failure since the last sync wins;
// vk_backend.c turns it into CQ_ERR_BOUNDS at sync).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer WF { float wf[]; };
layout(std430, binding = 0) readonly buffer WW { uint ww[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 2) buffer Y { uint y[]; };
layout(std430, binding = 7) buffer S { uint st[]; }; // code, op, seq, where, value
layout(std430, binding = 8) readonly buffer E2 { float cq_exp2[]; }; // q4tp tables only
layout(push_constant) uniform P { uint n, C, V, wo, io, yo, wdt, op, seq, ydt; } p;

#define WDEC_FN w_dec
#define WDEC_WORDS ww
#define WDEC_FLOATS wf
#define WDEC_BYTE w_byte
#define WDEC_H16 w_h16
#include "wdec.glsl"

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
        CQ_ST(y, CQ_XDT, p.yo + g, 0.0);
        return;
    }
    CQ_ST(y, CQ_XDT, p.yo + g, w_dec(p.wdt, p.wo, p.V, p.C, uint(id), col));
}
