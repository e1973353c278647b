/*
 * ltx2_inputs.c — reading the `cortiq forward` inputs of the LTX-2 denoiser
 * from safetensors (the contract is in ltx2_inputs.h): presence, dtype, rank
 * (an optional leading batch of 1) and sizes against the config and the
 * grid before the big tensors are read, then finiteness and the timestep
 * ranges, then the given coords against the grid's.
 */
#include "models/ltx2_inputs.h"

#include <math.h>
#include <string.h>

#include "models/kit/inputs.h"
#include "models/ltx2_rope.h"

/* The timesteps and sigmas arrive as 1000 sigma (LTX2Pipeline's scaling). */
#define TS_MAX 1000.0f

static cq_status want_f32(const cq_st_tensor *t) {
    if (t->dtype != CQ_ST_F32)
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected F32", t->name, cq_st_dtype_name(t->dtype));
    return CQ_OK;
}

/* An f32 matrix [rows, cols] (a leading 1 allowed), cols fixed, rows in [1, 2^24]. */
static cq_status matrix(const cq_st *st, const char *name, int cols, const char *what, uint64_t *rows,
                        const cq_st_tensor **out) {
    uint64_t d[2];
    CQ_TRY(cq_in_tensor(st, name, 2, true, d, out));
    CQ_TRY(want_f32(*out));
    if (d[1] != (uint64_t)cols || d[0] == 0 || d[0] > (1u << 24))
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' is [%llu, %llu]; the model takes [%s, %d] (%s at least 1)",
                       name, (unsigned long long)d[0], (unsigned long long)d[1], what, cols, what);
    *rows = d[0];
    return CQ_OK;
}

/* Read all of t as f32 and check every value is finite. */
static cq_status read_finite(const cq_st_tensor *t, float **out) {
    CQ_TRY(cq_st_read_all_f32(t, out));
    for (uint64_t i = 0; i < t->nelem; i++)
        if (!isfinite((*out)[i]))
            return cq_fail(CQ_ERR_NUMERIC, "input tensor '%s' holds a non-finite value at element %llu", t->name,
                           (unsigned long long)i);
    return CQ_OK;
}

/* A scalar: one element, [1] or 0-D (a [1, 1] batch too). Absent: CQ_OK, *out NULL, or CQ_ERR_MISSING. */
static cq_status scalar(const cq_st *st, const char *name, bool required, const cq_st_tensor **out) {
    const cq_st_tensor *t = cq_st_find(st, name);
    *out = NULL;
    if (!t) return required ? cq_fail(CQ_ERR_MISSING, "input tensor '%s' is missing", name) : CQ_OK;
    if (t->nelem != 1 || t->ndim > 2)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' must hold one value ([1]), it has %llu in %d dimensions",
                       name, (unsigned long long)t->nelem, t->ndim);
    *out = t;
    return CQ_OK;
}

static bool is_int(cq_st_dtype d) {
    return d == CQ_ST_I64 || d == CQ_ST_I32 || d == CQ_ST_U8 || d == CQ_ST_BOOL;
}

/* An integer scalar in [lo, hi]; *v keeps its default when absent and not required. */
static cq_status int_scalar(const cq_st *st, const char *name, bool required, int64_t lo, int64_t hi, int64_t *v) {
    const cq_st_tensor *t;
    CQ_TRY(scalar(st, name, required, &t));
    if (!t) return CQ_OK;
    if (!is_int(t->dtype))
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected an integer (I64, I32, U8 or BOOL)", name,
                       cq_st_dtype_name(t->dtype));
    const int64_t x = cq_in_int_at(t, 0);
    if (x < lo || x > hi)
        return cq_fail(CQ_ERR_INVALID_ARG, "input tensor '%s' is %lld; expected %lld to %lld", name, (long long)x,
                       (long long)lo, (long long)hi);
    *v = x;
    return CQ_OK;
}

/* A float scalar (any dtype cq_st_read_f32 converts), finite, in [lo, hi]. */
static cq_status float_scalar(const cq_st *st, const char *name, bool required, float lo, float hi, float *v) {
    const cq_st_tensor *t;
    CQ_TRY(scalar(st, name, required, &t));
    if (!t) return CQ_OK;
    float x;
    CQ_TRY(cq_st_read_f32(t, 0, 1, &x));
    if (!isfinite(x)) return cq_fail(CQ_ERR_NUMERIC, "input tensor '%s' holds a non-finite value", name);
    if (!(x >= lo && x <= hi))
        return cq_fail(CQ_ERR_INVALID_ARG, "input tensor '%s' is %g; expected %g to %g", name, (double)x, (double)lo,
                       (double)hi);
    *v = x;
    return CQ_OK;
}

/* A timestep vector of 1 or n values (a leading batch of 1 allowed), each in [0, 1000]. */
static cq_status timesteps(const cq_st *st, const char *name, uint64_t n, const char *what, float **out, int *count) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) return CQ_OK;
    CQ_TRY(want_f32(t));
    const bool ok = t->ndim <= 2 && (t->nelem == 1 || t->nelem == n) &&
                    (t->ndim < 2 || t->shape[0] == 1);
    if (!ok)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' must be [1] or [%llu] (one per %s), it has %llu values in %d "
                       "dimensions", name, (unsigned long long)n, what, (unsigned long long)t->nelem, t->ndim);
    CQ_TRY(read_finite(t, out));
    for (uint64_t i = 0; i < t->nelem; i++)
        if (!((*out)[i] >= 0.0f && (*out)[i] <= TS_MAX))
            return cq_fail(CQ_ERR_INVALID_ARG, "input tensor '%s' holds %g at element %llu; timesteps are 1000 sigma, "
                           "in [0, 1000]", name, (double)(*out)[i], (unsigned long long)i);
    *count = (int)t->nelem;
    return CQ_OK;
}

/* Given coords [axes, n, 2] (a leading 1 allowed) against the computed midpoints pos[n][axes]. */
static cq_status coords(const cq_st *st, const char *name, int axes, uint64_t n, const float *pos, bool *given) {
    uint64_t d[3];
    const cq_st_tensor *t;
    CQ_TRY(cq_in_tensor(st, name, 3, false, d, &t));
    *given = t != NULL;
    if (!t) return CQ_OK;
    CQ_TRY(want_f32(t));
    if (d[0] != (uint64_t)axes || d[1] != n || d[2] != 2)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' is [%llu, %llu, %llu]; the grid needs [%d, %llu, 2]", name,
                       (unsigned long long)d[0], (unsigned long long)d[1], (unsigned long long)d[2], axes,
                       (unsigned long long)n);
    float *c = NULL;
    cq_status s = read_finite(t, &c);
    for (uint64_t i = 0; s == CQ_OK && i < n; i++)
        for (int a = 0; a < axes; a++) {
            const float *se = c + ((uint64_t)a * n + i) * 2;
            const double mid = ((double)se[0] + se[1]) / 2, want = pos[i * (uint64_t)axes + (uint64_t)a];
            if (!(fabs(mid - want) <= 1e-5 * fmax(1.0, fabs(want)))) {
                s = cq_fail(CQ_ERR_UNSUPPORTED, "input tensor '%s': token %llu axis %d is [%g, %g), midpoint %g; the "
                            "grid gives %g (coords are computed from num_frames, height, width, fps and "
                            "audio_num_frames; other coords are not supported)", name, (unsigned long long)i, a,
                            (double)se[0], (double)se[1], mid, want);
                break;
            }
        }
    cq_free(c);
    return s;
}

static cq_status check_coords(const cq_st *st, const cq_ltx2_config *cfg, cq_ltx2_file_inputs *o) {
    const cq_ltx2_inputs *in = &o->in;
    const uint64_t nv = (uint64_t)in->frames * (uint64_t)in->height * (uint64_t)in->width;
    const bool any = cq_st_find(st, "video_coords") || cq_st_find(st, "audio_coords");
    if (!any) return CQ_OK;
    float *pv = cq_mallocn((size_t)nv * 3, sizeof(float)), *pa = cq_mallocn((size_t)in->audio_frames, sizeof(float));
    cq_status s = pv && pa ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK)
        s = cq_ltx2_video_positions(in->frames, in->height, in->width, cfg->vae_scale, cfg->causal_offset, in->fps, pv);
    if (s == CQ_OK)
        s = cq_ltx2_audio_positions(in->audio_frames, 0, cfg->audio_scale, cfg->causal_offset, cfg->audio_hop,
                                    cfg->audio_rate, pa);
    if (s == CQ_OK) s = coords(st, "video_coords", 3, nv, pv, &o->video_coords);
    if (s == CQ_OK) s = coords(st, "audio_coords", 1, (uint64_t)in->audio_frames, pa, &o->audio_coords);
    cq_free(pv);
    cq_free(pa);
    return s;
}

/* The reference's masks are not run here: one that keeps every row is accepted (the same forward), others refused
 * rather than ignored as an unknown name would be. */
static cq_status no_mask(const cq_st *st, const char *name) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) return CQ_OK;
    float *m = NULL;
    cq_status s = cq_st_read_all_f32(t, &m);
    for (uint64_t i = 0; s == CQ_OK && i < t->nelem; i++)
        if (m[i] != 1.0f)
            s = cq_fail(CQ_ERR_UNSUPPORTED, "input tensor '%s' masks row %llu; attention masks are not supported (one "
                        "of all ones is accepted)", name, (unsigned long long)i);
    cq_free(m);
    return s;
}

static cq_status read_stg(const cq_st *st, const cq_ltx2_config *cfg, cq_ltx2_file_inputs *o) {
    const char *name = "spatio_temporal_guidance_blocks";
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) return CQ_OK;
    if (!is_int(t->dtype) || t->dtype == CQ_ST_BOOL)
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected I64 or I32", name, cq_st_dtype_name(t->dtype));
    if (t->ndim > 1 || t->nelem > CQ_LTX2_INPUTS_MAX_STG)
        return cq_fail(CQ_ERR_SHAPE, "input tensor '%s' must be [k] with k at most %d", name, CQ_LTX2_INPUTS_MAX_STG);
    if (t->nelem && !cfg->perturbed_attn)
        return cq_fail(CQ_ERR_UNSUPPORTED, "input tensor '%s' names STG blocks, but the model has no perturbed_attn",
                       name);
    for (uint64_t i = 0; i < t->nelem; i++) {
        const int64_t b = cq_in_int_at(t, i);
        if (b < 0 || b >= cfg->n_layers)
            return cq_fail(CQ_ERR_INVALID_ARG, "input tensor '%s' names block %lld; the model has blocks 0 to %d", name,
                           (long long)b, cfg->n_layers - 1);
        o->stg[i] = (int)b;
    }
    o->in.stg_blocks = o->stg;
    o->in.n_stg_blocks = (int)t->nelem;
    return CQ_OK;
}

static cq_status read_all(const cq_st *st, const cq_ltx2_config *cfg, cq_ltx2_file_inputs *o) {
    cq_ltx2_inputs *in = &o->in;
    const cq_st_tensor *tv, *ta, *tc, *tac;
    uint64_t nv, na, nc, nac;
    CQ_TRY(matrix(st, "hidden_states", cfg->in_channels, "T", &nv, &tv));
    CQ_TRY(matrix(st, "audio_hidden_states", cfg->audio_in_channels, "Ta", &na, &ta));
    CQ_TRY(matrix(st, "encoder_hidden_states", cfg->dim, "L", &nc, &tc));
    CQ_TRY(matrix(st, "audio_encoder_hidden_states", cfg->audio_dim, "La", &nac, &tac));

    /* the grid: the token counts must be the grid's */
    int64_t f = 0, h = 0, w = 0, af = (int64_t)na;
    CQ_TRY(int_scalar(st, "num_frames", true, 1, CQ_LTX2_MAX_SIDE, &f));
    CQ_TRY(int_scalar(st, "height", true, 1, CQ_LTX2_MAX_SIDE, &h));
    CQ_TRY(int_scalar(st, "width", true, 1, CQ_LTX2_MAX_SIDE, &w));
    if ((uint64_t)f * (uint64_t)h * (uint64_t)w != nv)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'hidden_states' has %llu tokens; num_frames x height x width "
                       "(latent) is %lld x %lld x %lld = %llu", (unsigned long long)nv, (long long)f, (long long)h,
                       (long long)w, (unsigned long long)((uint64_t)f * (uint64_t)h * (uint64_t)w));
    CQ_TRY(int_scalar(st, "audio_num_frames", false, 1, 1 << 24, &af));
    if ((uint64_t)af != na)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'audio_hidden_states' has %llu tokens; audio_num_frames is %lld",
                       (unsigned long long)na, (long long)af);
    float fps = 24.0f;
    CQ_TRY(float_scalar(st, "fps", false, 1e-3f, 1e4f, &fps));
    in->frames = (int)f;
    in->height = (int)h;
    in->width = (int)w;
    in->fps = fps;
    in->audio_frames = (int)na;
    in->n_ctx = (int)nc;
    in->n_audio_ctx = (int)nac;

    /* timesteps and sigmas */
    if (!cq_st_find(st, "timestep")) return cq_fail(CQ_ERR_MISSING, "input tensor 'timestep' is missing");
    CQ_TRY(timesteps(st, "timestep", nv, "video token", &o->timestep, &in->n_timestep));
    CQ_TRY(timesteps(st, "audio_timestep", na, "audio token", &o->audio_timestep, &in->n_audio_timestep));
    if (!o->audio_timestep) {
        if (in->n_timestep != 1)
            return cq_fail(CQ_ERR_MISSING, "input tensor 'audio_timestep' is missing; it is needed when 'timestep' is "
                           "per token");
        in->n_audio_timestep = 1;
    }
    in->timestep = o->timestep;
    in->audio_timestep = o->audio_timestep ? o->audio_timestep : o->timestep;
    CQ_TRY(float_scalar(st, "sigma", true, 0.0f, TS_MAX, &in->sigma));
    in->audio_sigma = in->sigma;
    CQ_TRY(float_scalar(st, "audio_sigma", false, 0.0f, TS_MAX, &in->audio_sigma));

    /* flags */
    int64_t cross = 1, iso = 0;
    CQ_TRY(int_scalar(st, "use_cross_timestep", false, 0, 1, &cross));
    CQ_TRY(int_scalar(st, "isolate_modalities", false, 0, 1, &iso));
    in->use_cross_timestep = cross != 0;
    in->isolate_modalities = iso != 0;
    CQ_TRY(read_stg(st, cfg, o));
    CQ_TRY(no_mask(st, "encoder_attention_mask"));
    CQ_TRY(no_mask(st, "audio_encoder_attention_mask"));
    CQ_TRY(check_coords(st, cfg, o));

    /* the big tensors last, each checked finite */
    CQ_TRY(read_finite(tv, &o->video));
    CQ_TRY(read_finite(ta, &o->audio));
    CQ_TRY(read_finite(tc, &o->ctx));
    CQ_TRY(read_finite(tac, &o->audio_ctx));
    in->video = o->video;
    in->audio = o->audio;
    in->ctx = o->ctx;
    in->audio_ctx = o->audio_ctx;
    return CQ_OK;
}

cq_status cq_ltx2_file_inputs_read(const cq_st *st, const cq_ltx2_config *cfg, cq_ltx2_file_inputs *out) {
    memset(out, 0, sizeof *out);
    cq_status s = read_all(st, cfg, out);
    if (s != CQ_OK) cq_ltx2_file_inputs_free(out);
    return s;
}

void cq_ltx2_file_inputs_free(cq_ltx2_file_inputs *in) {
    if (!in) return;
    cq_free(in->video);
    cq_free(in->audio);
    cq_free(in->ctx);
    cq_free(in->audio_ctx);
    cq_free(in->timestep);
    cq_free(in->audio_timestep);
    memset(in, 0, sizeof *in);
}
