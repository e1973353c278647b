#version 450
// copy.comp — y = x with dtype conversion (f32, f16, bf16; i32 to i32 as raw
// words). One invocation per output word: a 16-bit output writes both halves
// of its word, keeping the half outside the tensor as it was, so no two
// invocations write the same word.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
layout(std430, binding = 0) readonly buffer XW { uint xw[]; };
layout(std430, binding = 1) buffer YW { uint yw[]; };
layout(push_constant) uniform P {
    uint n, xo, yo, xdt, ydt; // offsets in elements of their dtype; dt: 0 f32 (or i32), 1 f16, 2 bf16
} p;

uint src_bits(uint i) { // element i of x, as f32 bits (i32 passes through)
    uint e = p.xo + i;
    if (p.xdt == 0u) return xw[e];
    return floatBitsToUint(cq_load_word(xw[e >> 1], e, p.xdt));
}

uint dst_half(uint i) {
    float v = uintBitsToFloat(src_bits(i));
    return p.ydt == 1u ? cq_f32_to_f16(v) : cq_f32_to_bf16(v);
}

void main() {
    uint g = cq_gid();
    if (p.ydt == 0u) {
        if (g < p.n) yw[p.yo + g] = src_bits(g);
        return;
    }
    uint w = (p.yo >> 1) + g;       // the output word this invocation owns
    uint e0 = 2u * w, end = p.yo + p.n;
    if (e0 >= end) return;
    uint old = yw[w];
    uint lo = e0 >= p.yo ? dst_half(e0 - p.yo) : old & 0xffffu;
    uint hi = e0 + 1u < end ? dst_half(e0 + 1u - p.yo) : old >> 16;
    yw[w] = lo | (hi << 16);
}
