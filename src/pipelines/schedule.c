/*
 * schedule.c — flow-match Euler schedule, Euler step and true-CFG combination
 * for the Qwen-Image-2.1 pipeline. The header lists the reference's formulas;
 * here each float operation is a statement of its own, in the reference's
 * order and precision (numpy float32 / Python float64), so no compiler
 * contraction or reordering can change a bit.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "pipelines/schedule.h"
#include "pipelines/torch_rng.h"

_Static_assert(FLT_EVAL_METHOD == 0, "schedule needs FLT_EVAL_METHOD == 0");

void cq_flow_config_qi21(cq_flow_config *c) {
    memset(c, 0, sizeof *c);
    c->num_train_timesteps = 1000;
    c->use_dynamic_shifting = true;
    c->shift = 1.0;
    c->base_shift = 0.5;
    c->max_shift = 0.9;
    c->base_image_seq_len = 256;
    c->max_image_seq_len = 8192;
    c->shift_terminal = 0.02;
    c->shift_type = CQ_FLOW_SHIFT_EXPONENTIAL;
}

/* diffusers' FlowMatchEulerDiscreteScheduler.__init__ defaults */
static void config_class_defaults(cq_flow_config *c) {
    memset(c, 0, sizeof *c);
    c->num_train_timesteps = 1000;
    c->use_dynamic_shifting = false;
    c->shift = 1.0;
    c->base_shift = 0.5;
    c->max_shift = 1.15;
    c->base_image_seq_len = 256;
    c->max_image_seq_len = 4096;
    c->shift_terminal = 0.0;
    c->shift_type = CQ_FLOW_SHIFT_EXPONENTIAL;
}

static cq_status json_number(const cJSON *root, const char *key, double *out, bool nullable) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it) return CQ_OK;
    if (cJSON_IsNull(it) && nullable) {
        *out = 0.0;
        return CQ_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return cq_fail(CQ_ERR_PARSE, "scheduler config: '%s' is not a finite number", key);
    *out = it->valuedouble;
    return CQ_OK;
}

static cq_status json_bool(const cJSON *root, const char *key, bool *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it) return CQ_OK;
    if (!cJSON_IsBool(it)) return cq_fail(CQ_ERR_PARSE, "scheduler config: '%s' is not a boolean", key);
    *out = cJSON_IsTrue(it);
    return CQ_OK;
}

static cq_status json_int(const cJSON *root, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    double v = (double)*out;
    CQ_TRY(json_number(root, key, &v, false));
    if (v != floor(v) || v < (double)lo || v > (double)hi)
        return cq_fail(CQ_ERR_PARSE, "scheduler config: '%s' = %g is not an integer in [%lld, %lld]", key, v,
                       (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return CQ_OK;
}

static cq_status config_from_json(const cJSON *root, cq_flow_config *c) {
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "scheduler config: not a JSON object");
    int64_t ntt = c->num_train_timesteps;
    CQ_TRY(json_int(root, "num_train_timesteps", 1, 1000000000, &ntt));
    c->num_train_timesteps = (int)ntt;
    CQ_TRY(json_number(root, "shift", &c->shift, false));
    CQ_TRY(json_bool(root, "use_dynamic_shifting", &c->use_dynamic_shifting));
    CQ_TRY(json_number(root, "base_shift", &c->base_shift, false));
    CQ_TRY(json_number(root, "max_shift", &c->max_shift, false));
    CQ_TRY(json_int(root, "base_image_seq_len", 0, INT64_C(1) << 40, &c->base_image_seq_len));
    CQ_TRY(json_int(root, "max_image_seq_len", 0, INT64_C(1) << 40, &c->max_image_seq_len));
    CQ_TRY(json_number(root, "shift_terminal", &c->shift_terminal, true));
    if (c->max_image_seq_len == c->base_image_seq_len)
        return cq_fail(CQ_ERR_PARSE, "scheduler config: max_image_seq_len equals base_image_seq_len");
    if (c->shift_terminal >= 1.0)
        return cq_fail(CQ_ERR_PARSE, "scheduler config: shift_terminal %g is not below 1", c->shift_terminal);

    const cJSON *tst = cJSON_GetObjectItemCaseSensitive(root, "time_shift_type");
    if (tst) {
        if (cJSON_IsString(tst) && strcmp(tst->valuestring, "exponential") == 0)
            c->shift_type = CQ_FLOW_SHIFT_EXPONENTIAL;
        else if (cJSON_IsString(tst) && strcmp(tst->valuestring, "linear") == 0)
            c->shift_type = CQ_FLOW_SHIFT_LINEAR;
        else
            return cq_fail(CQ_ERR_PARSE, "scheduler config: time_shift_type must be \"exponential\" or \"linear\"");
    }
    static const char *const unsupported[] = {"invert_sigmas", "use_karras_sigmas", "use_exponential_sigmas",
                                              "use_beta_sigmas", "stochastic_sampling"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(unsupported); i++) {
        bool on = false;
        CQ_TRY(json_bool(root, unsupported[i], &on));
        if (on) return cq_fail(CQ_ERR_UNSUPPORTED, "scheduler config: '%s' is not supported", unsupported[i]);
    }
    return CQ_OK;
}

cq_status cq_flow_config_parse(const char *json, size_t len, cq_flow_config *c) {
    if (!json || !c) return cq_fail(CQ_ERR_INVALID_ARG, "scheduler config: no input");
    cq_flow_config tmp;
    config_class_defaults(&tmp);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return cq_fail(CQ_ERR_PARSE, "scheduler config: invalid JSON");
    cq_status s = config_from_json(root, &tmp);
    cJSON_Delete(root);
    if (s == CQ_OK) *c = tmp;
    return s;
}

double cq_flow_mu(const cq_flow_config *c, int64_t image_seq_len) {
    /* Python floats: every operation rounded in double, in this order */
    const double num = c->max_shift - c->base_shift;
    const double den = (double)(c->max_image_seq_len - c->base_image_seq_len);
    const double m = num / den;
    const double mb = m * (double)c->base_image_seq_len;
    const double b = c->base_shift - mb;
    const double lm = (double)image_seq_len * m;
    return lm + b;
}

void cq_flow_linspace(double start, double stop, int n, double *out) {
    if (n <= 0) return;
    if (n == 1) {
        out[0] = start; /* 0 * delta + start */
        return;
    }
    const double delta = stop - start;
    const double step = delta / (double)(n - 1);
    for (int i = 0; i < n; i++) {
        double y;
        if (step == 0.0) {
            /* numpy's path for a step that underflows: (i / div) * delta */
            y = (double)i / (double)(n - 1);
            y = y * delta;
        } else {
            y = (double)i * step;
        }
        out[i] = y + start;
    }
    out[n - 1] = stop;
}

void cq_flow_linspace_torch_f32(double start, double end, int n, float *out) {
    if (n <= 0) return;
    const float a = (float)start, b = (float)end;
    if (n == 1) {
        out[0] = a; /* torch fills a one-step linspace with start */
        return;
    }
    const float d = b - a;
    const float step = d / (float)(n - 1);
    const int half = n / 2;
    /* torch's CPU kernels are compiled with FMA contraction (the AVX2 and AVX-512 builds torch dispatches to),
     * so each value is one fused multiply-add: a + step*i and b - step*(n-1-i) rounded once (the golden tables
     * of tests/golden/zimage pin this; the unfused form differs from N = 9 on) */
    for (int i = 0; i < n; i++) out[i] = i < half ? fmaf(step, (float)i, a) : fmaf(-step, (float)(n - 1 - i), b);
}

static cq_status check_args(const cq_flow_config *c, int steps, int64_t image_seq_len, cq_flow_schedule *out) {
    if (!c || !out) return cq_fail(CQ_ERR_INVALID_ARG, "schedule: no config or output");
    memset(out, 0, sizeof *out);
    if (steps < 1 || steps > 100000) return cq_fail(CQ_ERR_INVALID_ARG, "schedule: %d steps (need 1..100000)", steps);
    if (image_seq_len < 1) return cq_fail(CQ_ERR_INVALID_ARG, "schedule: %lld image tokens", (long long)image_seq_len);
    if ((unsigned)c->shift_type >= CQ_FLOW_SHIFT_TYPE_COUNT || (unsigned)c->sigmas >= CQ_FLOW_SIGMAS_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "schedule: unknown shift type %d or sigma source %d", (int)c->shift_type,
                       (int)c->sigmas);
    if (!c->use_dynamic_shifting && !(isfinite(c->shift) && c->shift > 0.0))
        return cq_fail(CQ_ERR_INVALID_ARG, "schedule: static shift %g is not a positive number", c->shift);
    return CQ_OK;
}

static cq_status shift_and_finish(const cq_flow_config *c, int steps, int64_t image_seq_len, double *lin,
                                  cq_flow_schedule *out);

cq_status cq_flow_schedule_make(const cq_flow_config *c, int steps, int64_t image_seq_len,
                                cq_flow_schedule *out) {
    CQ_TRY(check_args(c, steps, image_seq_len, out));
    double *lin = cq_mallocn((size_t)steps, sizeof *lin);
    if (!lin) return CQ_ERR_NOMEM;
    /* 1 / N in Python (double); the torch variant rounds it to float32 */
    if (c->sigmas == CQ_FLOW_SIGMAS_TORCH_F32) {
        float *f = cq_mallocn((size_t)steps, sizeof *f);
        if (!f) {
            cq_free(lin);
            return CQ_ERR_NOMEM;
        }
        cq_flow_linspace_torch_f32(1.0, 1.0 / (double)steps, steps, f);
        for (int i = 0; i < steps; i++) lin[i] = f[i]; /* exact: .tolist() then float32 again */
        cq_free(f);
    } else {
        cq_flow_linspace(1.0, 1.0 / (double)steps, steps, lin);
    }
    return shift_and_finish(c, steps, image_seq_len, lin, out);
}

cq_status cq_flow_schedule_from_sigmas(const cq_flow_config *c, const double *sigmas, int steps,
                                       int64_t image_seq_len, cq_flow_schedule *out) {
    CQ_TRY(check_args(c, steps, image_seq_len, out));
    if (!sigmas) return cq_fail(CQ_ERR_INVALID_ARG, "schedule: no sigmas");
    for (int i = 0; i < steps; i++)
        if (!isfinite(sigmas[i]) || !(sigmas[i] > 0.0) || sigmas[i] > 1.0)
            return cq_fail(CQ_ERR_INVALID_ARG, "schedule: sigma %d is %g (each must be in (0, 1])", i, sigmas[i]);
    double *lin = cq_mallocn((size_t)steps, sizeof *lin);
    if (!lin) return CQ_ERR_NOMEM;
    memcpy(lin, sigmas, (size_t)steps * sizeof *lin);
    return shift_and_finish(c, steps, image_seq_len, lin, out);
}

/* Steps 3 and on of the header on the unshifted sigmas lin[steps] (taken over and freed). */
static cq_status shift_and_finish(const cq_flow_config *c, int steps, int64_t image_seq_len, double *lin,
                                  cq_flow_schedule *out) {
    float *sig = cq_mallocn((size_t)steps + 1, sizeof *sig);
    float *ts = cq_mallocn((size_t)steps, sizeof *ts);
    if (!sig || !ts) {
        cq_free(lin);
        cq_free(sig);
        cq_free(ts);
        return CQ_ERR_NOMEM;
    }
    const double mu = cq_flow_mu(c, image_seq_len);
    for (int i = 0; i < steps; i++) {
        const float s = (float)lin[i];
        float r;
        if (c->use_dynamic_shifting) {
            /* math.exp(mu) (or mu) is a Python float meeting a float32 array:
             * numpy 2 rounds it to float32 and computes in float32 */
            const float e = c->shift_type == CQ_FLOW_SHIFT_EXPONENTIAL ? (float)exp(mu) : (float)mu;
            const float inv = 1.0f / s;
            const float q = inv - 1.0f; /* ** 1.0 is the identity */
            const float d = e + q;
            r = e / d;
        } else {
            const float a = (float)c->shift * s;
            const float k = (float)(c->shift - 1.0); /* Python evaluates shift - 1 first */
            const float b = k * s;
            const float d = 1.0f + b;
            r = a / d;
        }
        sig[i] = r;
    }
    if (c->shift_terminal != 0.0) {
        const float z_last = 1.0f - sig[steps - 1];
        const float keep = (float)(1.0 - c->shift_terminal);
        const float f = z_last / keep;
        for (int i = 0; i < steps; i++) {
            const float z = 1.0f - sig[i];
            const float q = z / f;
            sig[i] = 1.0f - q;
        }
    }
    sig[steps] = 0.0f;
    const float ntt = (float)c->num_train_timesteps;
    for (int i = 0; i < steps; i++) ts[i] = sig[i] * ntt;
    cq_free(lin);

    for (int i = 0; i < steps; i++) {
        if (!isfinite(sig[i])) {
            cq_free(sig);
            cq_free(ts);
            return cq_fail(CQ_ERR_NUMERIC,
                           "schedule: sigma %d of %d is not finite (the reference's terminal stretch "
                           "divides 0 by 0 for a single step; use 2 or more steps)",
                           i, steps);
        }
    }
    out->steps = steps;
    out->mu = c->use_dynamic_shifting ? mu : NAN;
    out->sigmas = sig;
    out->timesteps = ts;
    return CQ_OK;
}

void cq_flow_schedule_free(cq_flow_schedule *s) {
    if (!s) return;
    cq_free(s->sigmas);
    cq_free(s->timesteps);
    memset(s, 0, sizeof *s);
}

float cq_flow_model_timestep(float t, bool bf16, bool cuda_style) {
    /* torch: timestep = t.to(dtype); timestep / 1000. The CUDA kernel turns a
     * division by a CPU scalar into a multiply by its float reciprocal. */
    const float recip = 1.0f / 1000.0f;
    if (bf16) {
        const float tb = cq_torch_bf16_to_f32(cq_torch_f32_to_bf16(t));
        const float q = cuda_style ? tb * recip : tb / 1000.0f;
        return cq_torch_bf16_to_f32(cq_torch_f32_to_bf16(q));
    }
    return cuda_style ? t * recip : t / 1000.0f;
}

void cq_flow_euler_step(float *x, const float *v, size_t n, float sigma, float sigma_next) {
    const float dt = sigma_next - sigma;
    for (size_t i = 0; i < n; i++) {
        const float p = dt * v[i];
        x[i] = x[i] + p;
    }
}

void cq_flow_cfg_combine(float *out, const float *pos, const float *neg, size_t n, double guidance) {
    const float g = (float)guidance;
    for (size_t i = 0; i < n; i++) {
        const float d = pos[i] - neg[i];
        const float s = g * d;
        out[i] = neg[i] + s;
    }
}
