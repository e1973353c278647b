// act.glsl — activations in f32 as the reference defines them (ops.h). tanh
// and erf are written out: GLSL's tanh loses relative accuracy near 0 and
// GLSL has no erf.
float cq_tanh(float v) {
    float a = abs(v);
    if (a < 0.625) { // odd polynomial: relative error near 1e-7 on this range
        float z = v * v;
        return v + v * z * ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z -
                            3.33332819422e-1);
    }
    if (a > 9.0) return sign(v);
    float r = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    return v < 0.0 ? -r : r;
}

// erfc for z >= 0 with a fractional error near 1.2e-7 (a Chebyshev fit of erfc(z) e^{z^2})
float cq_erfc_pos(float z) {
    float t = 1.0 / (1.0 + 0.5 * z);
    float q = -z * z - 1.26551223 +
              t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 +
              t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(q);
}

float cq_gelu_erf(float v) { // 0.5 v (1 + erf(v / sqrt 2)) = 0.5 v erfc(-v / sqrt 2)
    float z = v * 0.70710678118654752;
    float c = z >= 0.0 ? 2.0 - cq_erfc_pos(z) : cq_erfc_pos(-z);
    return 0.5 * v * c;
}

float cq_silu(float v) { return v / (1.0 + exp(-v)); }

float cq_gelu_tanh(float v) { return 0.5 * v * (1.0 + cq_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }
