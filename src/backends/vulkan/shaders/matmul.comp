#version 450
// matmul.comp — the portable f32 matmul of ops.h:
//   v = act(scale * (x · Wᵀ) + bias), or silu(scale*(x·Wᵀ)+bias) ⊙ (scale*(x·W2ᵀ)+bias2),
//   y = v, or y += v, or y += gate ⊙ v.
// x [M, K] f32, f16 or bf16 (xdt), y [M, N] f32 or x's dtype (ydt), computed in f32; W, W2 [N, K] (fused SwiGLU: W [2N, K], gate rows
// first) in f32, f16, bf16, q8_row, q8_2f, q4_block, q4_tiled or q4tp, decoded from the stored words
// exactly as src/codec does (wdec.glsl), so the products are those of the CPU's decoded weights. A workgroup of 128
// computes a 16 x 16 output tile, two rows per invocation, through 16-wide
// K slices in shared memory; accumulation is f32. A non-finite output is reported in the status words
// (CQ_ERR_NUMERIC at sync, as the CUDA backend scans its matmul outputs).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
#include "act.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };
layout(std430, binding = 2) readonly buffer WF { float wf[]; };
layout(std430, binding = 2) readonly buffer WW { uint ww[]; };
layout(std430, binding = 3) readonly buffer W2F { float w2f[]; };
layout(std430, binding = 3) readonly buffer W2W { uint w2w[]; };
layout(std430, binding = 4) readonly buffer B1 { float bias[]; };
layout(std430, binding = 5) readonly buffer B2 { float bias2[]; };
layout(std430, binding = 6) readonly buffer G { float gate[]; };
layout(std430, binding = 7) buffer S { uint st[]; }; // code, op, seq, where, value: a non-finite output is code 2
layout(std430, binding = 8) readonly buffer E2 { float cq_exp2[]; }; // q4tp weights only (wdec.glsl)
layout(push_constant) uniform P {
    uint M, N, K, xo, yo, wo, w2o, bo, b2o, go;
    uint wdt, w2dt, act, flags; // flags: 1 bias, 2 bias2, 4 gate, 8 accumulate, 16 w2 given (else fused)
    float scale;
    uint op, seq;
    uint wrows, w2rows; // the weights' row counts (where the quantized codecs keep their scales and codes)
    uint xdt, ydt;      // the activations' dtypes: 0 f32, 1 f16, 2 bf16
} p;

shared float xs[16][17];
shared float ws[16][17];
shared float ws2[16][17];

#define WDEC_FN w1_dec
#define WDEC_WORDS ww
#define WDEC_FLOATS wf
#define WDEC_BYTE w1_byte
#define WDEC_H16 w1_h16
#include "wdec.glsl"
#undef WDEC_FN
#undef WDEC_WORDS
#undef WDEC_FLOATS
#undef WDEC_BYTE
#undef WDEC_H16
#define WDEC_FN w2_dec
#define WDEC_WORDS w2w
#define WDEC_FLOATS w2f
#define WDEC_BYTE w2_byte
#define WDEC_H16 w2_h16
#include "wdec.glsl"

float w1_at(uint row, uint k) { return w1_dec(p.wdt, p.wo, p.wrows, p.K, row, k); }
float w2_at(uint row, uint k) { return w2_dec(p.w2dt, p.w2o, p.w2rows, p.K, row, k); }

void main() {
    uint t = gl_LocalInvocationID.x, tx = t & 15u, ty = t >> 4;
    uint n0 = gl_WorkGroupID.x * 16u, m0 = gl_WorkGroupID.y * 16u;
    bool swiglu = p.act == 3u, fused = swiglu && (p.flags & 16u) == 0u;
    float a0 = 0.0, a1 = 0.0, c0 = 0.0, c1 = 0.0;
    for (uint k0 = 0u; k0 < p.K; k0 += 16u) {
        for (uint i = t; i < 256u; i += 128u) {
            uint r = i >> 4, k = i & 15u, kk = k0 + k;
            uint m = m0 + r, n = n0 + r;
            xs[r][k] = (m < p.M && kk < p.K) ? CQ_LD(x, CQ_XDT, p.xo + m * p.K + kk) : 0.0;
            bool wok = n < p.N && kk < p.K;
            ws[r][k] = wok ? w1_at(n, kk) : 0.0;
            if (swiglu) ws2[r][k] = !wok ? 0.0 : fused ? w1_at(p.N + n, kk) : w2_at(n, kk);
        }
        barrier();
        for (uint k = 0u; k < 16u; k++) {
            float wv = ws[tx][k];
            a0 += xs[ty][k] * wv;
            a1 += xs[ty + 8u][k] * wv;
            if (swiglu) {
                float w2v = ws2[tx][k];
                c0 += xs[ty][k] * w2v;
                c1 += xs[ty + 8u][k] * w2v;
            }
        }
        barrier();
    }
    uint n = n0 + tx;
    if (n >= p.N) return;
    float s = p.scale != 0.0 ? p.scale : 1.0;
    float b1 = (p.flags & 1u) != 0u ? bias[p.bo + n] : 0.0;
    float b2 = fused ? ((p.flags & 1u) != 0u ? bias[p.bo + p.N + n] : 0.0) : ((p.flags & 2u) != 0u ? bias2[p.b2o + n] : 0.0);
    float g = (p.flags & 4u) != 0u ? gate[p.go + n] : 1.0;
    for (uint h = 0u; h < 2u; h++) {
        uint m = m0 + ty + 8u * h;
        if (m >= p.M) continue;
        float v = s * (h == 0u ? a0 : a1) + b1;
        if (p.act == 1u) v = cq_gelu_tanh(v);
        else if (p.act == 2u) v = cq_silu(v);
        else if (swiglu) v = cq_silu(v) * (s * (h == 0u ? c0 : c1) + b2);
        uint o = p.yo + m * p.N + n;
        float r = (p.flags & 8u) != 0u ? CQ_LD(y, CQ_YDT, o) + g * v : v;
        CQ_ST(y, CQ_YDT, o, r);
        if ((isinf(r) || isnan(r)) && atomicCompSwap(st[0], 0u, 2u) == 0u) {
            st[1] = p.op;
            st[2] = p.seq;
            st[3] = m * p.N + n;
            st[4] = 0u;
        }
    }
}
