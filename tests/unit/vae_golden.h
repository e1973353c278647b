/*
 * vae_golden.h — the Qwen-Image-2.1 VAE's golden data (tests/golden/vae,
 * made by tools/golden_vae.py with diffusers) for the test that checks a
 * backend against it (test_vae, run on the CPU and, as test_vae_cuda, on the
 * GPU): the two tiny configurations converted with a codec, the reference
 * tensors, the error measure both runs state their bounds in, and one decode
 * + encode of every golden size.
 */
#ifndef CQ_TESTS_VAE_GOLDEN_H
#define CQ_TESTS_VAE_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/cmf.h"
#include "format/safetensors.h"
#include "models/qi21_vae.h"

#define VG_DIR CQ_SOURCE_DIR "/tests/golden/vae"
#define VG_SIZES 3
extern const char *const vg_sizes[VG_SIZES]; /* "s", "m", "l" */

/* Both configurations' golden files are present. */
bool vg_have(void);
/* tests/golden/vae/<name> converted with codec `quant` (-1: convert's defaults) into a scratch directory and
 * opened; fails the test on error. */
cq_cmf *vg_convert(const char *name, int quant);
/* The same for the folder <root>/<name> (another model's golden data). */
cq_cmf *vg_convert_dir(const char *root, const char *name, int quant);
/* tests/golden/vae/<name>/golden.safetensors, opened; fails the test on error. */
cq_st *vg_open_golden(const char *name);
/* Golden tensor <what>_<size> as f32 (malloc'd), with its 3-D shape; fails the test if missing. */
float *vg_tensor(const cq_st *gold, const char *name, const char *what, const char *size, uint64_t shape[3]);
/* max |got - ref| / RMS(ref), infinite for a non-finite got; *rms_err (optional) = RMS(got - ref) / RMS(ref). */
double vg_rel_err(const float *got, const float *ref, size_t n, double *rms_err);

/* Tensor `what` of a golden case file as f32 (malloc'd), with its 3-D shape (shape may be NULL); fails the test if
 * it is missing or not 3-D. */
float *vg_read3(const cq_st *st, const char *case_name, const char *what, uint64_t shape[3]);
/* One golden case's output against the reference, printed; fails the test beyond the bound: on the CPU max err /
 * RMS 1e-4, on a device a quarter of the reference's own bf16 errors (max, RMS). */
void vg_check_case(const char *case_name, const char *label, const char *backend, bool device, const float *got,
                   const float *ref, size_t n, double bf16_max, double bf16_rms);
/* The diffusers folder `src` copied with `from` replaced by `to` in its config.json, converted and loaded as a
 * Qwen-Image VAE on `be`: the load must fail with `want` and a message containing `msg`. */
void vg_bad_config(const char *src, const char *from, const char *to, cq_backend *be, cq_status want, const char *msg);

/* The worst errors of one decode and one encode per golden size (each printed). */
typedef struct vg_result {
    double dec, enc; /* max err / RMS */
    double rms;      /* the larger RMS err / RMS of the two */
} vg_result;
/* Decode and encode every size with `vae` against `gold`; `label` names the run in the printout. */
vg_result vg_run(cq_qi21_vae *vae, const cq_st *gold, const char *label);

#endif
