/*
 * ltx2_sample.c — LTX-2's sampling rules (ltx2_sample.h). Every float
 * operation is a statement of its own, in the reference's order and float32
 * precision (Python-float scalars meeting float32 tensors are rounded to
 * float32 first, as torch does for a wrapped scalar).
 */
#include "pipelines/ltx2_sample.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "base/base.h"

_Static_assert(FLT_EVAL_METHOD == 0, "ltx2_sample needs FLT_EVAL_METHOD == 0");

#define WHO "ltx2 sampling"

const double cq_ltx2_distilled_sigmas[CQ_LTX2_DISTILLED_STEPS] = {1.0,      0.99375, 0.9875, 0.98125,
                                                                   0.975,    0.909375, 0.725, 0.421875};
const double cq_ltx2_stage2_sigmas[CQ_LTX2_STAGE2_STEPS] = {0.909375, 0.725, 0.421875};

static void ltx2_flow_common(cq_flow_config *c) {
    memset(c, 0, sizeof *c);
    c->num_train_timesteps = 1000;
    c->shift = 1.0;
    c->base_shift = 0.95;
    c->max_shift = 2.05;
    c->base_image_seq_len = 1024;
    c->max_image_seq_len = 4096;
    c->shift_type = CQ_FLOW_SHIFT_EXPONENTIAL;
    c->sigmas = CQ_FLOW_SIGMAS_NUMPY;
}

void cq_ltx2_flow_config_distilled(cq_flow_config *c) {
    ltx2_flow_common(c);
    c->use_dynamic_shifting = false;
    c->shift_terminal = 0.0;
}

void cq_ltx2_flow_config_dev(cq_flow_config *c) {
    ltx2_flow_common(c);
    c->use_dynamic_shifting = true;
    c->shift_terminal = 0.1;
}

cq_status cq_ltx2_schedule(const cq_flow_config *c, const double *sigmas, int steps, int64_t video_tokens,
                           cq_flow_schedule *out) {
    if (!c) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": no scheduler config");
    if (!sigmas) {
        cq_flow_config k = *c;
        k.sigmas = CQ_FLOW_SIGMAS_NUMPY; /* np.linspace(1.0, 1 / N, N) */
        return cq_flow_schedule_make(&k, steps, video_tokens, out);
    }
    return cq_flow_schedule_from_sigmas(c, sigmas, steps, video_tokens, out);
}

void cq_ltx2_geo_params_default(cq_ltx2_geo_params *p) {
    memset(p, 0, sizeof *p);
    p->spatial_ratio = 32;
    p->temporal_ratio = 8;
    p->sample_rate = 16000;
    p->hop_length = 160;
    p->audio_temporal_ratio = 4;
    p->mel_bins = 64;
    p->mel_ratio = 4;
    p->video_channels = 128;
    p->audio_channels = 8;
    p->patch = 1;
    p->patch_t = 1;
}

cq_status cq_ltx2_geometry_make(const cq_ltx2_geo_params *p, int width, int height, int num_frames, double fps,
                                cq_ltx2_geometry *g) {
    if (!p || !g) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": geometry needs parameters and an output");
    memset(g, 0, sizeof *g);
    const int ints[] = {p->spatial_ratio, p->temporal_ratio, p->sample_rate, p->hop_length, p->audio_temporal_ratio,
                        p->mel_bins, p->mel_ratio, p->video_channels, p->audio_channels, p->patch, p->patch_t};
    for (size_t i = 0; i < CQ_ARRAY_LEN(ints); i++)
        if (ints[i] < 1 || ints[i] > (1 << 20))
            return cq_fail(CQ_ERR_INVALID_ARG, WHO ": geometry parameter %zu is %d (1 .. %d)", i, ints[i], 1 << 20);
    if (width < 1 || height < 1 || width % p->spatial_ratio || height % p->spatial_ratio || width > (1 << 20) ||
        height > (1 << 20))
        return cq_fail(CQ_ERR_SHAPE, WHO ": %d x %d: width and height must be positive multiples of %d", width,
                       height, p->spatial_ratio);
    if (num_frames < 1 || num_frames > (1 << 20))
        return cq_fail(CQ_ERR_SHAPE, WHO ": %d frames (1 .. %d)", num_frames, 1 << 20);
    if (!isfinite(fps) || !(fps > 0) || fps > 1e6) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": frame rate %g", fps);
    g->frames = (num_frames - 1) / p->temporal_ratio + 1;
    g->height = height / p->spatial_ratio;
    g->width = width / p->spatial_ratio;
    if (g->frames % p->patch_t || g->height % p->patch || g->width % p->patch)
        return cq_fail(CQ_ERR_SHAPE, WHO ": latent %d x %d x %d is not divisible by the patch sizes %d (time) and "
                       "%d (space)", g->frames, g->height, g->width, p->patch_t, p->patch);
    g->video_tokens = (int64_t)(g->frames / p->patch_t) * (g->height / p->patch) * (g->width / p->patch);
    g->video_features = p->video_channels * p->patch_t * p->patch * p->patch;
    /* Python: duration_s = num_frames / frame_rate; per_s = sr / hop / float(k); round(duration_s * per_s) */
    const double duration = (double)num_frames / fps;
    const double per_s = (double)p->sample_rate / (double)p->hop_length / (double)p->audio_temporal_ratio;
    const double l = duration * per_s;
    const double r = nearbyint(l); /* the default rounding mode: to nearest, ties to even (Python's round) */
    if (!(r >= 1) || r > (double)(1 << 24))
        return cq_fail(CQ_ERR_SHAPE, WHO ": %d frames at %g fps give %g audio latent frames (at least 1 needed)",
                       num_frames, fps, r);
    g->audio_frames = (int)r;
    g->audio_mel = p->mel_bins / p->mel_ratio;
    if (g->audio_mel < 1) return cq_fail(CQ_ERR_SHAPE, WHO ": %d mel bins over %d", p->mel_bins, p->mel_ratio);
    g->audio_features = p->audio_channels * g->audio_mel;
    return CQ_OK;
}

void cq_ltx2_pack_video(const float *cfhw, float *tokens, int C, int F, int H, int W, int p, int pt) {
    const int Fp = F / pt, Hp = H / p, Wp = W / p, D = C * pt * p * p;
    for (int f = 0; f < Fp; f++)
        for (int y = 0; y < Hp; y++)
            for (int x = 0; x < Wp; x++) {
                float *t = tokens + (((size_t)f * Hp + y) * Wp + x) * D;
                for (int c = 0; c < C; c++)
                    for (int a = 0; a < pt; a++)
                        for (int b = 0; b < p; b++)
                            for (int d = 0; d < p; d++)
                                t[((c * pt + a) * p + b) * p + d] =
                                    cfhw[(((size_t)c * F + f * pt + a) * H + y * p + b) * W + x * p + d];
            }
}

void cq_ltx2_unpack_video(const float *tokens, float *cfhw, int C, int F, int H, int W, int p, int pt) {
    const int Fp = F / pt, Hp = H / p, Wp = W / p, D = C * pt * p * p;
    for (int f = 0; f < Fp; f++)
        for (int y = 0; y < Hp; y++)
            for (int x = 0; x < Wp; x++) {
                const float *t = tokens + (((size_t)f * Hp + y) * Wp + x) * D;
                for (int c = 0; c < C; c++)
                    for (int a = 0; a < pt; a++)
                        for (int b = 0; b < p; b++)
                            for (int d = 0; d < p; d++)
                                cfhw[(((size_t)c * F + f * pt + a) * H + y * p + b) * W + x * p + d] =
                                    t[((c * pt + a) * p + b) * p + d];
            }
}

void cq_ltx2_pack_audio(const float *clm, float *tokens, int C, int L, int M) {
    for (int l = 0; l < L; l++)
        for (int c = 0; c < C; c++)
            for (int m = 0; m < M; m++) tokens[((size_t)l * C + c) * M + m] = clm[((size_t)c * L + l) * M + m];
}

void cq_ltx2_unpack_audio(const float *tokens, float *clm, int C, int L, int M) {
    for (int l = 0; l < L; l++)
        for (int c = 0; c < C; c++)
            for (int m = 0; m < M; m++) clm[((size_t)c * L + l) * M + m] = tokens[((size_t)l * C + c) * M + m];
}

cq_status cq_ltx2_initial_noise(cq_torch_gen *g, cq_torch_f32_kernel kernel, const cq_ltx2_geometry *geo,
                                const cq_ltx2_geo_params *p, float *video, float *audio) {
    if (!g || !geo || !p || !video || !audio)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": initial noise needs a generator, the geometry and outputs");
    const size_t nv = (size_t)geo->video_tokens * (size_t)geo->video_features;
    const size_t na = (size_t)geo->audio_frames * (size_t)geo->audio_features;
    const size_t big = nv > na ? nv : na;
    float *raw = cq_mallocn(big, sizeof(float));
    if (!raw) return CQ_ERR_NOMEM;
    /* prepare_latents: randn((1, C, F', H', W')) then _pack_latents; prepare_audio_latents: randn((1, Ca, L, M)) */
    cq_status s = cq_torch_randn_f32(g, kernel, raw, nv);
    if (s == CQ_OK)
        cq_ltx2_pack_video(raw, video, p->video_channels, geo->frames, geo->height, geo->width, p->patch, p->patch_t);
    if (s == CQ_OK) s = cq_torch_randn_f32(g, kernel, raw, na);
    if (s == CQ_OK) cq_ltx2_pack_audio(raw, audio, p->audio_channels, geo->audio_frames, geo->audio_mel);
    cq_free(raw);
    return s;
}

void cq_ltx2_velocity_to_x0(float *x0, const float *x, const float *v, size_t n, float sigma) {
    for (size_t i = 0; i < n; i++) {
        const float q = v[i] * sigma;
        x0[i] = x[i] - q;
    }
}

void cq_ltx2_x0_to_velocity(float *v, const float *x, const float *x0, size_t n, float sigma) {
    for (size_t i = 0; i < n; i++) {
        const float d = x[i] - x0[i];
        v[i] = d / sigma;
    }
}

void cq_ltx2_euler_step(float *x, const float *v, const uint8_t *mask, int64_t tokens, int features, float sigma,
                        float sigma_next) {
    const float dt = sigma_next - sigma;
    for (int64_t t = 0; t < tokens; t++) {
        if (mask && !mask[t]) continue;
        float *xr = x + (size_t)t * features;
        const float *vr = v + (size_t)t * features;
        for (int i = 0; i < features; i++) {
            const float q = vr[i] * sigma;
            const float x0 = xr[i] - q;
            const float d = xr[i] - x0;
            const float v2 = d / sigma;
            const float p = dt * v2;
            xr[i] = xr[i] + p;
        }
    }
}

void cq_ltx2_ancestral_step(float *x, const float *x0, const float *noise, const uint8_t *mask, int64_t tokens,
                            int features, float sigma, float sigma_next, double eta, double s_noise) {
    const size_t F = (size_t)features;
    if (sigma_next == 0.0f) { /* the terminal step returns the prediction */
        for (int64_t t = 0; t < tokens; t++)
            if (!mask || mask[t]) memcpy(x + (size_t)t * F, x0 + (size_t)t * F, F * sizeof(float));
        return;
    }
    /* 0-d float32 tensors meeting Python floats, as ltx-core's EulerAncestralDiffusionStep writes them */
    const float q = sigma_next / sigma, qm = q - 1.0f, qe = qm * (float)eta, ratio = 1.0f + qe;
    const float sd = sigma_next * ratio, sdr = sd / sigma, sdr1 = 1.0f - sdr;
    float renoise = 0.0f, scale = 1.0f;
    if (eta > 0) {
        const float an = 1.0f - sigma_next, ad = 1.0f - sd;
        const float sn2 = sigma_next * sigma_next, sd2 = sd * sd, an2 = an * an, ad2 = ad * ad;
        const float a = sd2 * an2, b = a / ad2, c = sn2 - b;
        renoise = sqrtf(c > 0.0f ? c : 0.0f);
        scale = an / ad;
    }
    const float sn = (float)s_noise;
    for (int64_t t = 0; t < tokens; t++) {
        if (mask && !mask[t]) continue;
        float *xr = x + (size_t)t * F;
        const float *dr = x0 + (size_t)t * F, *nr = noise ? noise + (size_t)t * F : NULL;
        for (size_t i = 0; i < F; i++) {
            const float u = sdr * xr[i], w = sdr1 * dr[i];
            float y = u + w;
            if (eta > 0) {
                const float m = scale * y, e1 = nr[i] * sn, e2 = e1 * renoise;
                y = m + e2;
            }
            xr[i] = y;
        }
    }
}

cq_status cq_ltx2_first_frame_mask(const cq_ltx2_geometry *geo, const cq_ltx2_geo_params *p, uint8_t *mask) {
    if (!geo || !p || !mask) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": the first-frame mask needs its inputs");
    /* the reference packs a [B, 1, F, H, W] mask and squeezes its one feature: patch sizes 1 only */
    if (p->patch != 1 || p->patch_t != 1)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": image conditioning with patch sizes %d / %d (the reference "
                       "takes 1 only)", p->patch, p->patch_t);
    const int64_t per_frame = (int64_t)geo->height * geo->width;
    for (int64_t t = 0; t < geo->video_tokens; t++) mask[t] = t >= per_frame;
    return CQ_OK;
}

void cq_ltx2_token_timesteps(float t, const uint8_t *mask, int64_t tokens, float *out) {
    for (int64_t i = 0; i < tokens; i++) {
        const float keep = mask[i] ? 1.0f : 0.0f; /* 1 - conditioning */
        out[i] = t * keep;
    }
}

void cq_ltx2_cond_init(float *out, const float *clean, const float *noise, const uint8_t *mask, int64_t tokens,
                       int features) {
    for (int64_t t = 0; t < tokens; t++) {
        const float c = mask[t] ? 0.0f : 1.0f; /* the conditioning mask */
        const float k = 1.0f - c;
        for (int i = 0; i < features; i++) {
            const size_t j = (size_t)t * features + (size_t)i;
            const float a = clean[j] * c;
            const float b = noise[j] * k;
            out[j] = a + b;
        }
    }
}

void cq_ltx2_blend_x0(float *x0, const float *clean, const uint8_t *mask, int64_t tokens, int features) {
    for (int64_t t = 0; t < tokens; t++)
        if (!mask[t]) memcpy(x0 + (size_t)t * features, clean + (size_t)t * features, (size_t)features * sizeof(float));
}

void cq_ltx2_noised_state(float *out, const float *clean, const float *noise, size_t n, double scale) {
    const float s = (float)scale, r = (float)(1.0 - scale); /* Python evaluates 1 - noise_scale in double */
    for (size_t i = 0; i < n; i++) {
        const float a = s * noise[i];
        const float b = r * clean[i];
        out[i] = a + b;
    }
}
