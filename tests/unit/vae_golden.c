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

float *vg_read3(const cq_st *st, const char *case_name, const char *what, uint64_t shape[3]) {
    const cq_st_tensor *t = cq_st_find(st, what);
    if (!t || t->ndim != 3) fail_msg("%s: golden tensor %s missing or not 3-D", case_name, what);
    float *v = malloc(sizeof(float) * (size_t)t->nelem);
    assert_non_null(v);
    assert_int_equal(cq_st_read_f32(t, 0, t->nelem, v), CQ_OK);
    if (shape) memcpy(shape, t->shape, sizeof(uint64_t) * 3);
    return v;
}

void vg_check_case(const char *case_name, const char *label, const char *backend, bool device, const float *got,
                   const float *ref, size_t n, double bf16_max, double bf16_rms) {
    double rms, e = vg_rel_err(got, ref, n, &rms);
    printf("  %s (%s) on %s: max err/RMS %.3g, RMS err %.3g (bf16 reference: %.3g / %.3g)\n", case_name, label,
           backend, e, rms, bf16_max, bf16_rms);
    if (device) {
        if (e > bf16_max / 4 || rms > bf16_rms / 4)
            fail_msg("%s: %.3g / %.3g beyond a quarter of the bf16 reference's %.3g / %.3g", case_name, e, rms,
                     bf16_max, bf16_rms);
    } else if (e > 1e-4) {
        fail_msg("%s (%s): max err/RMS %.3g > 1e-4", case_name, label, e);
    }
}

void vg_bad_config(const char *src, const char *from, const char *to, cq_backend *be, cq_status want, const char *msg) {
    char dir[1100], out[1200];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("vae_badcfg"));
    assert_int_equal(tu_system("cp '%s/config.json' '%s/diffusion_pytorch_model.safetensors' '%s/'", src, src, dir), 0);
    size_t len;
    uint8_t *raw = tu_read_file(tu_path(dir, "config.json"), &len);
    assert_non_null(raw);
    char *cfg = malloc(len + 1); /* the file's bytes, NUL-terminated */
    memcpy(cfg, raw, len);
    cfg[len] = '\0';
    free(raw);
    char *at = strstr(cfg, from);
    if (!at) fail_msg("config of %s has no '%s'", src, from);
    char *fixed = malloc(len + strlen(to) + 1);
    size_t head = (size_t)(at - cfg);
    memcpy(fixed, cfg, head);
    strcpy(fixed + head, to);
    strcat(fixed, at + strlen(from));
    assert_int_equal(tu_write_file(tu_path(dir, "config.json"), fixed, strlen(fixed)), 0);
    free(cfg);
    free(fixed);
    snprintf(out, sizeof out, "%s/bad.cmf", dir);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(dir, out, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fail_msg("convert: %s", cq_last_error());
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    cq_qi21_vae *v = NULL;
    s = cq_qi21_vae_load(cmf, "vae.", be, &v);
    if (s != want || !strstr(cq_last_error(), msg))
        fail_msg("config with '%s': got %s '%s', want %s containing '%s'", to, cq_status_str(s), cq_last_error(),
                 cq_status_str(want), msg);
    assert_null(v);
    cq_cmf_close(cmf);
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
