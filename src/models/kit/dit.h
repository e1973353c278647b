/*
 * dit.h — pieces every diffusion transformer repeats, written once:
 *  - sinusoidal timestep features with the reference's knobs (diffusers'
 *    get_timestep_embedding: flip_sin_to_cos, downscale_freq_shift, scale,
 *    max_period);
 *  - N-axis RoPE tables: per-axis inverse frequencies and the cos/sin table
 *    of rows at integer or fractional positions (one column per frequency,
 *    the axes side by side; the op pairs them, interleaved or split halves,
 *    by its cq_rope_mode); the angles formed in f32 (Qwen-Image) or in f64
 *    and rounded to f32 (Z-Image's tables are built in float64);
 *  - modulated norms and gated residuals over row groups (runs of rows that
 *    read one row of a modulation table);
 *  - the record/replay step driver: a denoising step run op by op until the
 *    buffers are sized, then recorded once and replayed.
 * Results are bit-identical to the code these replace: every float formula
 * keeps the reference's f32 order of operations.
 */
#ifndef CQ_MODELS_KIT_DIT_H
#define CQ_MODELS_KIT_DIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "cortiq.h"
#include "ops/ops.h"

/* ---- timestep features ---------------------------------------------------------------- */
typedef struct cq_dit_tproj {
    int dim;                    /* features per row (even) */
    bool flip_sin_to_cos;       /* true: [cos | sin], false: [sin | cos] */
    float downscale_freq_shift; /* frequencies exp(-log(max_period) * i / (dim/2 - shift)) */
    float scale;                /* angles = scale * t * freq (1: none) */
    float max_period;           /* 10000 in every model so far */
} cq_dit_tproj;

/* out[r][dim] for the timesteps t[0..n) (as the model feeds them: qi21 passes 1000 t). */
void cq_dit_timestep_features(const cq_dit_tproj *p, const float *t, int n, float *out);

/* ---- RoPE tables ---------------------------------------------------------------------- */
#define CQ_DIT_ROPE_MAX_AXES 4
#define CQ_DIT_ROPE_MAX_FREQS 64 /* per axis: dims up to 128 */
typedef struct cq_dit_rope {
    int n_axes;
    int dims[CQ_DIT_ROPE_MAX_AXES];                         /* rotated dims per axis (even) */
    float freq[CQ_DIT_ROPE_MAX_AXES][CQ_DIT_ROPE_MAX_FREQS]; /* 1 / theta^(2i / dim), in f32 as the reference */
    int half;                                               /* sum of dims / 2: the table's columns */
    bool f64;                                               /* angles in f64 from freq64, rounded to f32 */
    double freq64[CQ_DIT_ROPE_MAX_AXES][CQ_DIT_ROPE_MAX_FREQS]; /* f64: 1 / theta^(2i / dim), in f64 */
} cq_dit_rope;

/* The frequencies of n_axes axes of dims[] rotated dims each; CQ_ERR_INVALID_ARG for an odd, empty or too wide
 * axis. */
cq_status cq_dit_rope_init(cq_dit_rope *r, int n_axes, const int *dims, float theta);
/* The same with the frequencies and the angles (position * frequency) in f64, each angle rounded to f32 before
 * its cos/sin, as a reference that builds its table in float64 and casts it with .float() (Z-Image). */
cq_status cq_dit_rope_init_f64(cq_dit_rope *r, int n_axes, const int *dims, double theta);
/* cos/sin [n][half] for rows at integer positions pos[n][n_axes]. */
void cq_dit_rope_tables(const cq_dit_rope *r, const int32_t *pos, int n, float *cosv, float *sinv);
/* The same at fractional positions pos[n][n_axes] (an integer position gives what cq_dit_rope_tables gives). */
void cq_dit_rope_tables_f32(const cq_dit_rope *r, const float *pos, int n, float *cosv, float *sinv);

/* The tables of rows at pos[n][n_axes] into the F32 tensors cos_t / sin_t [n, half] (device or host). */
cq_status cq_dit_rope_upload(const cq_dit_rope *r, const int32_t *pos, int n, cq_tensor *cos_t, cq_tensor *sin_t);

/* ---- modulation over row groups ------------------------------------------------------- */
/* A run of consecutive rows that read one row of the modulation table. */
typedef struct cq_dit_group {
    int64_t r0, n;
    int mod_row;
} cq_dit_group;

/* A modulation table: rows of `per_row` vectors of `dim` values each, vector `which` of row r at (r * per_row +
 * which) * dim. */
typedef struct cq_dit_mod {
    const cq_tensor *t;
    int64_t dim;
    int per_row;
} cq_dit_mod;

/* The [dim] vector `which` of row r (a zeroed tensor when out of range). */
cq_tensor cq_dit_mod_vec(const cq_dit_mod *m, int row, int which);
/* y = LN(x) * (1 + scale) + shift per group, scale the group's vector `which`, shift its vector `shift` (none
 * when negative). */
cq_status cq_dit_modulated_ln(cq_backend *be, const cq_dit_group *g, int n_groups, cq_tensor *y, const cq_tensor *x,
                              const cq_dit_mod *m, int which, int shift, float eps);
/* x += gate ⊙ (in · wᵀ + bias) per group, gate the group's vector `which` (a gated residual; bias may be NULL). */
cq_status cq_dit_gated_proj(cq_backend *be, const cq_dit_group *g, int n_groups, cq_tensor *x, const cq_tensor *in,
                            const cq_tensor *w, const cq_tensor *bias, const cq_dit_mod *m, int which);

/* ---- inputs ------------------------------------------------------------------------- */
/* x [rows][cols] must be finite (a NaN would spread through attention to every row, far from its cause):
 * CQ_ERR_NUMERIC "<who>: <what> row R holds a non-finite value (column C)". */
cq_status cq_dit_check_finite(const char *who, const char *what, const float *x, size_t rows, size_t cols);

/* ---- the step driver ------------------------------------------------------------------ */
/* A step's device ops, run directly, recorded or re-run. */
typedef cq_status (*cq_dit_step_ops)(void *user);

typedef struct cq_dit_stepper {
    cq_recording *rec;
    int direct_steps; /* steps run op by op so far */
    bool no_rec;      /* recording failed once: op by op from then on */
} cq_dit_stepper;

/* Run one step's ops: op by op on the first step (it sizes every buffer) and
 * on a backend that cannot record; recorded at the second step and replayed
 * from then on; re-recorded when the backend replaced a buffer a recording
 * used (CQ_ERR_AGAIN from a replay); op by op for good when recording fails.
 * `who` names the model in the debug log. */
cq_status cq_dit_stepper_run(cq_dit_stepper *s, cq_backend *be, cq_dit_step_ops ops, void *user, const char *who);
void cq_dit_stepper_free(cq_dit_stepper *s);

#endif /* CQ_MODELS_KIT_DIT_H */
