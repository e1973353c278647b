// common.glsl — what every compute shader of the Vulkan backend shares (included
// after the local_size declaration, which gl_WorkGroupSize reads): the
// linear invocation index over a 2-D grid of 128-wide workgroups (the host
// splits large dispatches over y, vk_ops.c), and the 16-bit float formats
// decoded from and encoded to 32-bit words exactly as src/codec does
// (round to nearest even; NaN stays NaN).
#extension GL_GOOGLE_include_directive : enable

uint cq_gid() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
}

uint cq_half_of(uint word, uint e) { return (e & 1u) != 0u ? word >> 16 : word & 0xffffu; }

float cq_bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

float cq_f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) return uintBitsToFloat(s) + (s != 0u ? -1.0 : 1.0) * float(m) * 5.9604644775390625e-8;
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint cq_f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

uint cq_f32_to_f16(float f) {
    uint u = floatBitsToUint(f);
    uint s = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return s | 0x7e00u | ((a >> 13) & 0x3ffu);     // NaN, quiet
    if (a >= 0x477ff000u) return s | 0x7c00u;                          // rounds to infinity
    if (a < 0x38800000u) {                                             // f16 subnormal or zero
        if (a < 0x33000000u) return s;                                 // below half the smallest subnormal
        uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;                                         // 14 + (113 - e) - 1 ... in [14, 24]
        uint r = m >> shift, rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) r += 1u;
        return s | r;
    }
    uint r = a - 0x38000000u;                                           // rebias the exponent by 112
    r += 0xfffu + ((r >> 13) & 1u);
    return s | (r >> 13);
}

// dt: 0 f32, 1 f16, 2 bf16 (vk_impl.h VK_DT_*)
float cq_load_word(uint w, uint e, uint dt) {
    uint h = cq_half_of(w, e);
    return dt == 1u ? cq_f16_to_f32(h) : cq_bf16_to_f32(h);
}

// a * b rounded once: never fused with a later add (the codecs' decodes are defined as single products)
float cq_mul(float a, float b) {
    precise float r = a * b;
    return r;
}

// ---- activations: f32, f16 or bf16 tensors in buffers declared as uint[] ----
// The activations' dtype (and the output's where it may differ: matmul's y) are specialization constants,
// set per pipeline variant (vk_impl.h CQ_VK_VARIANT), so the dtype tests below fold away when the driver
// compiles the pipeline and the f32 variant is the plain f32 code. The push constants' dtype words repeat
// them for the record.
layout(constant_id = 0) const uint CQ_XDT = 0u;
layout(constant_id = 1) const uint CQ_YDT = 0u;
// Element e (in elements of its dtype from the buffer's start) of an activation of dtype dt (0 f32, 1 f16,
// 2 bf16): f32 is the word's bits; a 16-bit element is one half of the 32-bit word e >> 1 (the low half for an
// even e), so any element offset and count works without 16-bit storage (VK_KHR_16bit_storage is optional).
float cq_act_word(uint w, uint e, uint dt) { return dt == 0u ? uintBitsToFloat(w) : cq_load_word(w, e, dt); }
#define CQ_LD(buf, dt, e) cq_act_word(buf[(dt) == 0u ? (e) : ((e) >> 1)], (e), (dt))

uint cq_to_half(float v, uint dt) { return dt == 1u ? cq_f32_to_f16(v) : cq_f32_to_bf16(v); }
// Store v at element e. A 16-bit element shares its word with a neighbour that another invocation (or another
// workgroup: a row's first and last words) may write in the same dispatch, so the half is replaced with two
// atomics that touch only its own bits (clear, then set): no lost updates whatever the order. The buffer must
// not be declared writeonly/readonly.
#define CQ_ST(buf, dt, e, v)                                                                                   \
    do {                                                                                                       \
        uint e_ = (e);                                                                                         \
        float v_ = (v);                                                                                        \
        if ((dt) == 0u) buf[e_] = floatBitsToUint(v_);                                                         \
        else {                                                                                                 \
            uint sh_ = (e_ & 1u) * 16u;                                                                        \
            atomicAnd(buf[e_ >> 1], ~(0xffffu << sh_));                                                        \
            atomicOr(buf[e_ >> 1], cq_to_half(v_, (dt)) << sh_);                                               \
        }                                                                                                      \
    } while (false)
