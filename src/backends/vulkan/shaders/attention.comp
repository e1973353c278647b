#version 450
// attention.comp — multi-head attention with an online softmax (ops.h cq_attn_args) on f32, f16
// or bf16 q/k/v/o (one dtype, dt), computed in f32. One workgroup per
// (query row, head): keys in blocks of 128, one per invocation (its score over the whole head), the block's
// max and sum through the workgroup; then each invocation updates the output dims it owns (d = t + 128 r,
// r < 8) with the block's probabilities. A head wider than 1024 dims takes one such pass per 1024 dims
// (scores recomputed): any head_dim runs. Keys are the
// prefix rows then k's rows; query i sees [lo, hi): hi = vis[i] (clamped), or P + i + 1 when causal, or all;
// lo = vis_lo[i] (clamped) or 0. The key blocks start at lo, so keys outside the range cost nothing.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x = 128) in;
#include "common.glsl"
#include "rows.glsl"
layout(std430, binding = 0) readonly buffer Q { uint q[]; };
layout(std430, binding = 1) readonly buffer KP { uint kp[]; };
layout(std430, binding = 2) readonly buffer VP { uint vp[]; };
layout(std430, binding = 3) readonly buffer K { uint k[]; };
layout(std430, binding = 4) readonly buffer V { uint v[]; };
layout(std430, binding = 5) readonly buffer VIS { int vis[]; };
layout(std430, binding = 6) buffer O { uint o[]; };
layout(std430, binding = 8) readonly buffer VISLO { int vis_lo[]; };
layout(push_constant) uniform P {
    uint Nq, Hq, Hkv, D, P, Nk, qo, kpo, vpo, ko, vo, viso, oo, has_vis, causal, visloo, has_vis_lo;
    float scale;
    uint dt;
} p;

shared float ps[128];

float key_at(uint j, uint base) { return j < p.P ? CQ_LD(kp, CQ_XDT, p.kpo + j * p.Hkv * p.D + base) : CQ_LD(k, CQ_XDT, p.ko + (j - p.P) * p.Hkv * p.D + base); }
float val_at(uint j, uint base) { return j < p.P ? CQ_LD(vp, CQ_XDT, p.vpo + j * p.Hkv * p.D + base) : CQ_LD(v, CQ_XDT, p.vo + (j - p.P) * p.Hkv * p.D + base); }

void main() {
    uint wg = cq_row();
    if (wg >= p.Nq * p.Hq) return;
    uint i = wg / p.Hq, h = wg % p.Hq, hk = h / (p.Hq / p.Hkv), t = gl_LocalInvocationID.x;
    uint T = p.P + p.Nk, nvis = T;
    if (p.has_vis != 0u) nvis = uint(clamp(vis[p.viso + i], 0, int(T)));
    else if (p.causal != 0u) nvis = min(p.P + i + 1u, T);
    uint lo = 0u;
    if (p.has_vis_lo != 0u) lo = uint(clamp(vis_lo[p.visloo + i], 0, int(T)));
    uint qb = p.qo + i * p.Hq * p.D + h * p.D, ob = p.oo + i * p.Hq * p.D + h * p.D;
    for (uint dc = 0u; dc < p.D; dc += 1024u) {
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float m = -3.402823466e38, l = 0.0;
    for (uint j0 = lo; j0 < nvis; j0 += 128u) {
        uint j = j0 + t;
        float s = -3.402823466e38;
        if (j < nvis) {
            float dot = 0.0;
            for (uint d = 0u; d < p.D; d++) dot += CQ_LD(q, CQ_XDT, qb + d) * key_at(j, hk * p.D + d);
            s = dot * p.scale;
        }
        float mn = max(m, cq_wg_max(s));
        float alpha = exp(m - mn);
        float pj = j < nvis ? exp(s - mn) : 0.0;
        ps[t] = pj;
        l = l * alpha + cq_wg_sum(pj); // the sum's barriers also publish ps
        uint nb = min(128u, nvis - j0);
        for (uint r = 0u; r < 8u; r++) {
            uint d = dc + t + 128u * r;
            if (d >= p.D) break;
            float a = acc[r] * alpha;
            for (uint jj = 0u; jj < nb; jj++) a += ps[jj] * val_at(j0 + jj, hk * p.D + d);
            acc[r] = a;
        }
        m = mn;
        barrier(); // ps is rewritten by the next block
    }
    float inv = nvis > lo ? 1.0 / l : 0.0;
    for (uint r = 0u; r < 8u; r++) {
        uint d = dc + t + 128u * r;
        if (d >= p.D) break;
        CQ_ST(o, CQ_XDT, ob + d, acc[r] * inv);
    }
    }
}
