#version 450
// unary.comp — y = fn(x, alpha, beta) on f32, f16 or bf16 activations computed in f32 (ops.h cq_unary, same
// numbering).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
#include "act.glsl"
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };
layout(push_constant) uniform P { uint n, xo, yo, fn; float alpha, beta; uint dt; } p;

float f(float v) {
    switch (p.fn) {
    case 0u: return cq_silu(v);
    case 1u: return cq_gelu_tanh(v);
    case 2u: return cq_gelu_erf(v);
    case 3u: return cq_tanh(v);
    case 4u: return 1.0 / (1.0 + exp(-v));
    case 5u: return -v;
    case 6u: return exp(v);
    case 7u: return v * p.alpha;
    case 8u: return v + p.alpha;
    case 9u: return min(max(v, p.alpha), p.beta);
    case 10u: return log(max(v, p.alpha));
    default: return sqrt(max(v, 0.0));
    }
}

void main() {
    uint g = cq_gid();
    if (g < p.n) CQ_ST(y, CQ_XDT, p.yo + g, f(CQ_LD(x, CQ_XDT, p.xo + g)));
}
