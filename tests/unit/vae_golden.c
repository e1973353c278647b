/*
 * vae_golden.c — see vae_golden.h.
 */
#include "vae_golden.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"
#include "format/convert.h"

const char *const vg_sizes[VG_SIZES] = {"s", "m", "l"};

bool vg_have(void) {
    struct stat st;
    return stat(VG_DIR "/vae_a/golden.safetensors", &st) == 0 && stat(VG_DIR "/vae_b/golden.safetensors", &st) == 0;
}

cq_cmf *vg_convert(const char *name, int quant) { return vg_convert_dir(VG_DIR, name, quant); }

cq_cmf *vg_convert_dir(const char *root, const char *name, int quant) {
    char src[1024], out[1200], dir[96];
    snprintf(src, sizeof src, "%s/%s", root, name);
    /* the scratch folder names the golden set too: two sets may hold a model of the same name */
    const char *set = strrchr(root, '/');
    snprintf(dir, sizeof dir, "%s_%s_%s", set ? set + 1 : root, name,
             quant < 0 ? "default" : cq_dtype_name((cq_dtype)quant));
    snprintf(out, sizeof out, "%s/%s.cmf", tu_tmpdir(dir), name);
    cq_convert_opts opts = {.quant = quant};
    cq_convert_report rep;
    cq_status s = cq_convert(src, out, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert %s: %s", name, cq_last_error());
    cq_cmf *cmf = NULL;
    if (cq_cmf_open(out, &cmf) != CQ_OK) fail_msg("open %s: %s", out, cq_last_error());
    return cmf;
}

cq_st *vg_open_golden(const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s/golden.safetensors", VG_DIR, name);
    cq_st *st = NULL;
    if (cq_st_open(path, &st) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    return st;
}

float *vg_tensor(const cq_st *gold, const char *name, const char *what, const char *size, uint64_t shape[3]) {
    char key[32];
    snprintf(key, sizeof key, "%s_%s", what, size);
    const cq_st_tensor *t = cq_st_find(gold, key);
    if (!t || t->ndim != 3) fail_msg("%s: golden tensor %s missing or not 3-D", name, key);
    float *v = malloc(sizeof(float) * (size_t)t->nelem);
    assert_non_null(v);
    assert_int_equal(cq_st_read_f32(t, 0, t->nelem, v), CQ_OK);
    memcpy(shape, t->shape, 3 * sizeof(uint64_t));
    return v;
}

double vg_rel_err(const float *got, const float *ref, size_t n, double *rms_err) {
    double ss = 0.0, se = 0.0, mx = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = fabs((double)got[i] - ref[i]);
        ss += (double)ref[i] * ref[i];
        se += d * d;
        mx = fmax(mx, d);
    }
    if (rms_err) *rms_err = sqrt(se / ss);
    return mx / sqrt(ss / (double)n);
}

vg_result vg_run(cq_qi21_vae *vae, const cq_st *gold, const char *label) {
    const cq_qi21_vae_config *c = cq_qi21_vae_get_config(vae);
    vg_result r = {0};
    for (size_t k = 0; k < VG_SIZES; k++) {
        uint64_t zs[3], is[3], xs[3], ms[3];
        float *z = vg_tensor(gold, label, "z", vg_sizes[k], zs), *img = vg_tensor(gold, label, "image", vg_sizes[k], is);
        float *x = vg_tensor(gold, label, "x", vg_sizes[k], xs), *mom = vg_tensor(gold, label, "moments", vg_sizes[k], ms);
        assert_int_equal(zs[0], (uint64_t)c->z_dim);
        assert_int_equal(is[0], (uint64_t)c->image_channels);
        assert_int_equal(is[1], zs[1] * (uint64_t)c->spatial_factor);
        size_t n_img = (size_t)(is[0] * is[1] * is[2]), n_mom = (size_t)(ms[0] * ms[1] * ms[2]);
        float *got = malloc(sizeof(float) * n_img), *gm = malloc(sizeof(float) * n_mom);
        assert_true(got && gm);
        if (cq_qi21_vae_decode(vae, z, (int)zs[1], (int)zs[2], CQ_QI21_VAE_PLANAR, got) != CQ_OK)
            fail_msg("%s decode %s: %s", label, vg_sizes[k], cq_last_error());
        double rd, re;
        double ed = vg_rel_err(got, img, n_img, &rd);
        if (cq_qi21_vae_encode(vae, x, (int)xs[1], (int)xs[2], CQ_QI21_VAE_PLANAR, gm) != CQ_OK)
            fail_msg("%s encode %s: %s", label, vg_sizes[k], cq_last_error());
        double ee = vg_rel_err(gm, mom, n_mom, &re);
        printf("  %s %s: decode %lldx%lld -> %lldx%lld max err/RMS %.3g (RMS err %.3g); encode %.3g (%.3g)\n", label,
               vg_sizes[k], (long long)zs[1], (long long)zs[2], (long long)is[1], (long long)is[2], ed, rd, ee, re);
        r.dec = fmax(r.dec, ed);
        r.enc = fmax(r.enc, ee);
        r.rms = fmax(r.rms, fmax(rd, re));
        free(z);
        free(img);
        free(x);
        free(mom);
        free(got);
        free(gm);
    }
    return r;
}
