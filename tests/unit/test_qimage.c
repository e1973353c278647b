/*
 * test_qimage.c — the Qwen-Image (v1) denoiser against the reference
 * (diffusers' QwenImageTransformer2DModel; golden data made by
 * tools/golden_qwenimage.py in tests/golden/qimage/), on the backend named
 * by the one argument (testutil.h: `test_qimage cpu`, label unit;
 * `test_qimage cuda` as test_qimage_cuda, label gpu; `test_qimage vulkan`).
 * Exits 77 (skipped) where the backend is not built or no device is present,
 * and when the golden folder is absent; any defect of the golden data that
 * is there fails.
 *
 * Errors are max|err| / RMS(reference) per tensor.
 *  - Every golden case (even and odd grids, a text mask with a hole, edit
 *    layouts with one and two condition images, zero_cond_t), the model
 *    converted to f32 by the library's convert (and to bf16: the golden
 *    weights are bf16 values, so that convert is lossless): the output and
 *    every tap (temb, txt_embed, img_embed, img_mod_0, txt_mod_0, img_<i>,
 *    txt_<i>, norm_out) within 1e-4 on the host and within a quarter of the
 *    case's bf16_max_rel (the reference's own bf16 error) on a device; the
 *    RoPE cos/sin tables within 1e-6 absolute.
 *  - The pack matches the tensor table (convert's check); steps at other
 *    timesteps on one conditioning and two conditionings alive at once give
 *    the forward's result bit for bit; steps allocate nothing after the
 *    first (two where the backend records); the denoiser interface.
 *  - Bad input: layouts beyond the RoPE tables or with several frames,
 *    non-finite rows, timesteps out of range, configs this implementation
 *    refuses.
 *  - The golden cases on the plain-C reference backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "testutil.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/qimage.h"
#include "models/tables.h"
#include "ops/backend.h"

#define QG_DIR CQ_SOURCE_DIR "/tests/golden/qimage"
#define QG_MIN_CASES 9
#define F32_BOUND 1e-4 /* host parity */
#define ROPE_ABS 1e-6  /* cos/sin tables, absolute */

/* the two models: the golden folder as it is, and the same weights with zero_cond_t */
enum { M_PLAIN, M_ZERO, M_COUNT };
enum { Q_F32, Q_BF16, Q_COUNT };
static const cq_dtype k_quant[Q_COUNT] = {CQ_DTYPE_F32, CQ_DTYPE_BF16};

typedef struct qcase {
    char name[32];
    int model;
    cq_st *st;
    int n_images;
    int32_t shapes[CQ_QIMAGE_MAX_IMAGES][3];
    int L, N;
    uint8_t *mask;  /* [L] or NULL */
    float *txt;     /* [L][joint] */
    float *img;     /* [N][in] */
    float t;
    float *ref;     /* out [N][out_dim] */
    size_t n_out;
    double ref_rms, bf16_max_rel;
} qcase;

static tu_backend_arg g_arg;
static char g_dir[1024];
static char g_src[M_COUNT][1200];
static cq_backend *g_be;
static cq_cmf *g_cmf[Q_COUNT][M_COUNT];
static cq_qimage *g_m[Q_COUNT][M_COUNT];
static qcase g_cases[16];
static int g_n;

/* The bound of a case on this run: the host's parity bound, or a quarter of the reference's bf16 error. */
static double case_bound(const qcase *g) { return g_arg.device ? g->bf16_max_rel / 4 : F32_BOUND; }

static cq_qimage_layout layout_of(const qcase *g) {
    return (cq_qimage_layout){.n_images = g->n_images, .img_shapes = (const int32_t(*)[3])g->shapes, .n_txt = g->L,
                              .txt_mask = g->mask};
}

/* ---- setup ----------------------------------------------------------------------------------------- */
/* The golden folder with its config's zero_cond_t set, in the test's directory. */
static int zero_cond_folder(void) {
    snprintf(g_src[M_PLAIN], sizeof g_src[M_PLAIN], "%s/dit", QG_DIR);
    snprintf(g_src[M_ZERO], sizeof g_src[M_ZERO], "%s/dit-zero-cond", g_dir);
    if (tu_system("rm -rf '%s' && cp -r '%s' '%s'", g_src[M_ZERO], g_src[M_PLAIN], g_src[M_ZERO]) != 0) return -1;
    char path[1300];
    snprintf(path, sizeof path, "%s/config.json", g_src[M_ZERO]);
    size_t len;
    uint8_t *txt = tu_read_file(path, &len);
    cJSON *j = txt ? cJSON_ParseWithLength((const char *)txt, len) : NULL;
    free(txt);
    if (!j) return -1;
    cJSON_DeleteItemFromObject(j, "zero_cond_t");
    cJSON_AddBoolToObject(j, "zero_cond_t", 1);
    char *out = cJSON_PrintUnformatted(j);
    int rc = tu_write_file(path, out, strlen(out));
    cJSON_free(out);
    cJSON_Delete(j);
    return rc;
}

static int convert(int q, int m) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s-%s.cmf", g_dir, m == M_ZERO ? "zero" : "plain", cq_dtype_name(k_quant[q]));
    cq_convert_opts opts = {.quant = (int)k_quant[q]};
    cq_convert_report rep;
    cq_status s = cq_convert(g_src[m], path, &opts, &rep);
    if (s == CQ_OK && strcmp(rep.arch, "qwen_image") != 0)
        s = cq_fail(CQ_ERR_INTERNAL, "arch '%s', not qwen_image", rep.arch);
    cq_convert_report_free(&rep);
    if (s == CQ_OK) s = cq_cmf_open(path, &g_cmf[q][m]);
    if (s == CQ_OK) s = cq_qimage_load(g_cmf[q][m], "dit.", g_be, &g_m[q][m]);
    if (s != CQ_OK) {
        fprintf(stderr, "%s: %s\n", path, cq_last_error());
        return -1;
    }
    return 0;
}

static int load_case(qcase *g, const cJSON *c) {
    snprintf(g->name, sizeof g->name, "%s", c->string);
    const cJSON *zc = cJSON_GetObjectItemCaseSensitive(c, "zero_cond_t");
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(c, "bf16_max_rel");
    if (!cJSON_IsBool(zc) || !cJSON_IsNumber(bf) || !(bf->valuedouble > 0)) return -1;
    g->model = cJSON_IsTrue(zc) ? M_ZERO : M_PLAIN;
    g->bf16_max_rel = bf->valuedouble;
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", QG_DIR, g->name);
    if (cq_st_open(path, &g->st) != CQ_OK) return -1;
    const cq_qimage_config *cf = cq_qimage_get_config(g_m[Q_F32][g->model]);
    const cq_st_tensor *sh = cq_st_find(g->st, "img_shapes");
    if (!sh || sh->dtype != CQ_ST_I32 || sh->ndim != 2 || sh->shape[1] != 3 || sh->shape[0] < 1 ||
        sh->shape[0] > CQ_QIMAGE_MAX_IMAGES)
        return -1;
    g->n_images = (int)sh->shape[0];
    memcpy(g->shapes, sh->data, (size_t)g->n_images * 3 * sizeof(int32_t));
    size_t n;
    if (!(g->txt = tu_st_floats(g->st, "encoder_hidden_states", &n)) || n % (size_t)cf->joint_dim) return -1;
    g->L = (int)(n / (size_t)cf->joint_dim);
    if (!(g->img = tu_st_floats(g->st, "hidden_states", &n)) || n % (size_t)cf->in_channels) return -1;
    g->N = (int)(n / (size_t)cf->in_channels);
    float *mask = tu_st_floats(g->st, "encoder_hidden_states_mask", &n);
    if (mask) {
        if (n != (size_t)g->L) return -1;
        g->mask = malloc((size_t)g->L);
        for (int j = 0; j < g->L; j++) g->mask[j] = mask[j] != 0.0f;
        free(mask);
    }
    float *t = tu_st_floats(g->st, "timestep", &n);
    if (!t || n != 1) return -1;
    g->t = t[0];
    free(t);
    int n_img;
    cq_qimage_layout lay = layout_of(g);
    if (cq_qimage_layout_sizes(&lay, &n_img, NULL) != CQ_OK || n_img != g->N) return -1;
    if (!(g->ref = tu_st_floats(g->st, "out", &g->n_out)) || g->n_out != (size_t)g->N * (size_t)cf->out_dim) return -1;
    g->ref_rms = tu_rms(g->ref, g->n_out);
    return 0;
}

static int setup(void **state) {
    (void)state;
    char tag[64];
    snprintf(tag, sizeof tag, "qimage_%s", g_arg.name);
    snprintf(g_dir, sizeof g_dir, "%s", tu_tmpdir(tag));
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    if (zero_cond_folder() != 0) return -1;
    for (int q = 0; q < Q_COUNT; q++)
        for (int m = 0; m < M_COUNT; m++)
            if (convert(q, m) != 0) return -1;
    cJSON *j = tu_read_json(QG_DIR "/index.json");
    if (!j) return -1;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(j, "cases"), *c;
    int rc = cJSON_IsObject(cases) ? 0 : -1;
    cJSON_ArrayForEach(c, cases) {
        if (g_n == (int)CQ_ARRAY_LEN(g_cases) || load_case(&g_cases[g_n++], c) != 0) {
            fprintf(stderr, "golden case %s: %s\n", c->string, cq_last_error());
            rc = -1;
            break;
        }
    }
    cJSON_Delete(j);
    if (rc == 0 && g_n < QG_MIN_CASES) {
        fprintf(stderr, "index.json lists %d cases, expected at least %d\n", g_n, QG_MIN_CASES);
        rc = -1;
    }
    return rc;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < g_n; i++) {
        qcase *g = &g_cases[i];
        free(g->mask);
        free(g->txt);
        free(g->img);
        free(g->ref);
        cq_st_close(g->st);
    }
    for (int q = 0; q < Q_COUNT; q++)
        for (int m = 0; m < M_COUNT; m++) {
            cq_qimage_free(g_m[q][m]);
            cq_cmf_close(g_cmf[q][m]);
        }
    cq_backend_free(g_be);
    return 0;
}

static const qcase *find_case(const char *name) {
    for (int i = 0; i < g_n; i++)
        if (strcmp(g_cases[i].name, name) == 0) return &g_cases[i];
    fail_msg("no golden case '%s'", name);
    return NULL;
}

static double run_forward(cq_qimage *m, const qcase *g, float *out) {
    cq_qimage_layout lay = layout_of(g);
    cq_status s = cq_qimage_forward(m, &lay, g->txt, g->img, g->t, out);
    if (s != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
    return tu_max_rel(out, g->ref, g->n_out, g->ref_rms);
}

/* ---- the golden cases with their taps ------------------------------------------------------------ */
typedef struct tap_check {
    const qcase *g;
    double bound, worst;
    int checked;
    char worst_name[32];
    float *cos_v, *sin_v; /* the model's RoPE tables, kept for the comparison after the forward */
    size_t rope_rows;
} tap_check;

static void on_tap(void *user, const char *name, const cq_tensor *t) {
    tap_check *k = user;
    size_t n = (size_t)cq_tensor_nelem(t);
    float *got = malloc(n * sizeof(float));
    assert_non_null(got);
    assert_int_equal(cq_tensor_download(t, got, n * sizeof(float)), CQ_OK);
    if (strcmp(name, "rope_cos") == 0 || strcmp(name, "rope_sin") == 0) {
        k->rope_rows = (size_t)cq_tensor_rows(t);
        if (name[5] == 'c') k->cos_v = got;
        else k->sin_v = got;
        return;
    }
    size_t nr;
    float *ref = tu_st_floats(k->g->st, name, &nr);
    if (!ref) fail_msg("%s: the golden case has no tap '%s'", k->g->name, name);
    if (nr != n) fail_msg("%s: tap %s has %zu values, the reference %zu", k->g->name, name, n, nr);
    double e = tu_max_rel(got, ref, n, tu_rms(ref, n));
    if (!(e <= k->bound)) fail_msg("%s: tap %s differs by %.3e of its RMS (bound %.1e)", k->g->name, name, e, k->bound);
    if (!(e <= k->worst)) {
        k->worst = e;
        snprintf(k->worst_name, sizeof k->worst_name, "%s", name);
    }
    k->checked++;
    free(ref);
    free(got);
}

/* cos/sin within ROPE_ABS: rows [0, L) against rope_txt, [L, L + N) against rope_img ([rows, half, 2]). */
static void check_rope(const tap_check *k, int half) {
    const qcase *g = k->g;
    assert_int_equal(k->rope_rows, (size_t)g->L + (size_t)g->N);
    static const char *const rn[2] = {"rope_txt", "rope_img"};
    for (int part = 0; part < 2; part++) {
        const size_t r0 = part ? (size_t)g->L : 0, nr = part ? (size_t)g->N : (size_t)g->L;
        size_t n;
        float *ref = tu_st_floats(g->st, rn[part], &n);
        if (!ref || n != nr * (size_t)half * 2) fail_msg("%s: %s missing or not [%zu, %d, 2]", g->name, rn[part], nr, half);
        double worst = 0;
        for (size_t i = 0; i < nr; i++)
            for (int f = 0; f < half; f++) {
                size_t o = (r0 + i) * (size_t)half + (size_t)f, r = (i * (size_t)half + (size_t)f) * 2;
                worst = fmax(worst, fmax(fabs((double)k->cos_v[o] - ref[r]), fabs((double)k->sin_v[o] - ref[r + 1])));
            }
        if (!(worst <= ROPE_ABS)) fail_msg("%s: %s differs by %.3e (bound %.0e)", g->name, rn[part], worst, ROPE_ABS);
        free(ref);
    }
}

static void test_golden_taps(void **state) {
    (void)state;
    for (int i = 0; i < g_n; i++) {
        const qcase *g = &g_cases[i];
        cq_qimage *m = g_m[Q_F32][g->model];
        const cq_qimage_config *cf = cq_qimage_get_config(m);
        tap_check k = {.g = g, .bound = case_bound(g)};
        float *out = malloc(g->n_out * sizeof(float));
        assert_non_null(out);
        cq_qimage_set_tap(m, on_tap, &k);
        cq_qimage_layout lay = layout_of(g);
        cq_status s = cq_qimage_forward(m, &lay, g->txt, g->img, g->t, out);
        cq_qimage_set_tap(m, NULL, NULL);
        if (s != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
        /* txt_embed, temb, img_mod_0, txt_mod_0, img_embed, norm_out, two per block */
        assert_int_equal(k.checked, 6 + 2 * cf->num_layers);
        check_rope(&k, cf->head_dim / 2);
        double e = tu_max_rel(out, g->ref, g->n_out, g->ref_rms);
        print_message("%-14s %d image(s) %3d tokens L=%d%s t=%.3f  out max|err|/RMS %.3e (bound %.1e); worst tap %s "
                      "%.3e\n", g->name, g->n_images, g->N, g->L, g->mask ? " masked" : "", (double)g->t, e, k.bound,
                      k.worst_name, k.worst);
        if (!(e <= k.bound)) fail_msg("%s: output differs by %.3e of RMS (bound %.1e)", g->name, e, k.bound);
        free(k.cos_v);
        free(k.sin_v);
        free(out);
    }
}

/* The bf16 convert of bf16 weights is lossless: the f32 bound holds. */
static void test_golden_bf16(void **state) {
    (void)state;
    double worst = 0;
    for (int i = 0; i < g_n; i++) {
        const qcase *g = &g_cases[i];
        float *out = malloc(g->n_out * sizeof(float));
        assert_non_null(out);
        double e = run_forward(g_m[Q_BF16][g->model], g, out);
        if (!(e <= case_bound(g))) fail_msg("bf16 %s: %.3e (bound %.1e)", g->name, e, case_bound(g));
        worst = fmax(worst, e);
        free(out);
    }
    print_message("bf16 weights on %s: worst max|err|/RMS %.3e\n", cq_backend_name(g_be), worst);
}

/* The converted pack matches the tensor table: nothing missing, unexpected or mis-shaped. */
static void test_table(void **state) {
    (void)state;
    for (int m = 0; m < M_COUNT; m++) {
        cq_tt_report rep;
        int n;
        assert_int_equal(cq_tables_check_pack(g_cmf[Q_F32][m], NULL, NULL, &rep, &n), CQ_OK);
        assert_int_equal(n, 1);
        assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    }
    assert_false(cq_qimage_get_config(g_m[Q_F32][M_PLAIN])->zero_cond_t);
    assert_true(cq_qimage_get_config(g_m[Q_F32][M_ZERO])->zero_cond_t);
}

/* ---- steps, conditionings, the denoiser interface ------------------------------------------------------- */
static void test_steps(void **state) {
    (void)state;
    const qcase *a = find_case("edit2"), *b = find_case("mask");
    assert_int_equal(a->model, b->model);
    cq_qimage *m = g_m[Q_F32][a->model];
    float *fa = malloc(a->n_out * sizeof(float)), *fb = malloc(b->n_out * sizeof(float));
    float *va = malloc(a->n_out * sizeof(float)), *vb = malloc(b->n_out * sizeof(float));
    assert_true(fa && fb && va && vb);
    run_forward(m, a, fa);
    run_forward(m, b, fb);
    cq_qimage_cond *ca = NULL, *cb = NULL;
    cq_qimage_layout la = layout_of(a), lb = layout_of(b);
    assert_int_equal(cq_qimage_prepare(m, &la, a->txt, &ca), CQ_OK);
    assert_int_equal(cq_qimage_prepare(m, &lb, b->txt, &cb), CQ_OK);
    assert_int_equal(cq_qimage_cond_tokens(ca), a->N);
    assert_int_equal(cq_qimage_cond_text_rows(cb), b->L);
    cq_backend_stats s0, s1;
    assert_int_equal(cq_backend_get_stats(g_be, &s0, false), CQ_OK);
    const float ts[3] = {0.9f, 0.05f, 1.0f};
    for (int round = 0; round < 3; round++) {
        assert_int_equal(cq_qimage_step(m, ca, a->img, ts[round], va), CQ_OK);
        assert_int_equal(cq_qimage_step(m, cb, b->img, ts[2 - round], vb), CQ_OK);
        cq_alloc_fail_at(0);
        assert_int_equal(cq_qimage_step(m, ca, a->img, a->t, va), CQ_OK);
        long allocs = cq_alloc_fail_at(0);
        if (round > 0 && allocs != 0 && !g_be->fallback_logged) fail_msg("a step made %ld host allocations", allocs);
        assert_memory_equal(va, fa, a->n_out * sizeof(float));
        assert_int_equal(cq_qimage_step(m, cb, b->img, b->t, vb), CQ_OK);
        assert_memory_equal(vb, fb, b->n_out * sizeof(float));
    }
    assert_int_equal(cq_backend_get_stats(g_be, &s1, false), CQ_OK);
    if (s1.device_allocs != s0.device_allocs || s1.mem_in_use != s0.mem_in_use) fail_msg("steps allocated device memory");
    /* the timestep matters: another t is far from the reference */
    assert_int_equal(cq_qimage_step(m, ca, a->img, 0.2f, va), CQ_OK);
    assert_true(tu_max_rel(va, a->ref, a->n_out, a->ref_rms) > 1e-2);
    cq_qimage_cond_free(ca);
    cq_qimage_cond_free(cb);
    /* the mask and zero_cond_t matter: without the mask, or the zero_cond_t case on the plain model, the
     * output is far from the reference */
    cq_qimage_layout lu = lb;
    lu.txt_mask = NULL;
    assert_int_equal(cq_qimage_forward(m, &lu, b->txt, b->img, b->t, vb), CQ_OK);
    assert_true(tu_max_rel(vb, b->ref, b->n_out, b->ref_rms) > 1e-2);
    const qcase *z = find_case("zero_cond");
    float *vz = malloc(z->n_out * sizeof(float));
    assert_non_null(vz);
    cq_qimage_layout lz = layout_of(z);
    assert_int_equal(cq_qimage_forward(g_m[Q_F32][M_PLAIN], &lz, z->txt, z->img, z->t, vz), CQ_OK);
    assert_true(tu_max_rel(vz, z->ref, z->n_out, z->ref_rms) > 1e-2);
    free(vz);
    /* the denoiser interface on a text-to-image case: a target of (lat_h / 2) x (lat_w / 2) tokens */
    const qcase *e = find_case("even");
    cq_qimage *me = g_m[Q_F32][e->model];
    cq_denoiser dn = cq_qimage_denoiser(me);
    assert_int_equal(dn.channels, cq_qimage_get_config(me)->in_channels);
    void *cd = NULL;
    float *ve = malloc(e->n_out * sizeof(float));
    assert_non_null(ve);
    assert_int_equal(dn.prepare(dn.self, e->txt, e->L, 2 * e->shapes[0][1], 2 * e->shapes[0][2], &cd), CQ_OK);
    assert_int_equal(dn.step(dn.self, cd, e->img, e->t, ve), CQ_OK);
    double de = tu_max_rel(ve, e->ref, e->n_out, e->ref_rms);
    if (!(de <= case_bound(e))) fail_msg("denoiser: %.3e", de);
    dn.cond_free(dn.self, cd);
    tu_expect_err(dn.prepare(dn.self, e->txt, e->L, 7, 8, &cd), CQ_ERR_SHAPE, "7x8 latent");
    assert_null(cd);
    free(fa);
    free(fb);
    free(va);
    free(vb);
    free(ve);
}

/* ---- bad input ------------------------------------------------------------------------------------ */
static void test_bad_input(void **state) {
    (void)state;
    const qcase *g = find_case("edit1");
    cq_qimage *m = g_m[Q_F32][g->model];
    const cq_qimage_config *cf = cq_qimage_get_config(m);
    int32_t sh[2][3] = {{1, 4, 4}, {1, 2, 2}};
    cq_qimage_layout lay = {.n_images = 2, .img_shapes = (const int32_t(*)[3])sh, .n_txt = 5};
    int n_img, n_t;
    assert_int_equal(cq_qimage_layout_sizes(&lay, &n_img, &n_t), CQ_OK);
    assert_int_equal(n_img, 20);
    assert_int_equal(n_t, 16);
    /* positions: text after the largest half side (2), the target at frame 0 centred, the condition at frame 1 */
    int32_t pos[25][3];
    cq_qimage_positions(&lay, &pos[0][0]);
    assert_int_equal(pos[0][0], 2);
    assert_int_equal(pos[4][2], 6);
    assert_int_equal(pos[5][0], 0);
    assert_int_equal(pos[5][1], -2);
    assert_int_equal(pos[5][2], -2);
    assert_int_equal(pos[20][1], 1);
    assert_int_equal(pos[21][0], 1);
    assert_int_equal(pos[21][1], -1);
    assert_int_equal(pos[24][2], 0);
    sh[1][0] = 2;
    tu_expect_err(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_ERR_UNSUPPORTED, "img_shapes[1] has 2 frames");
    sh[1][0] = 1;
    sh[0][1] = 0;
    tu_expect_err(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_ERR_SHAPE, "not a valid token grid");
    sh[0][1] = 8000; /* offset 4000: 96 text rows fit, 97 do not */
    lay.n_txt = 96;
    assert_int_equal(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_OK);
    lay.n_txt = 97;
    tu_expect_err(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_ERR_SHAPE, "reach RoPE position 4096");
    lay.n_txt = 0;
    tu_expect_err(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_ERR_SHAPE, "0 text rows");
    lay.n_images = 0;
    tu_expect_err(cq_qimage_layout_sizes(&lay, NULL, NULL), CQ_ERR_INVALID_ARG, "1 .. 16 images");
    /* non-finite inputs, named with their row */
    cq_qimage_layout gl = layout_of(g);
    size_t tn = (size_t)g->L * cf->joint_dim, in = (size_t)g->N * cf->in_channels;
    float *txt = malloc(tn * sizeof(float)), *img = malloc(in * sizeof(float)), *out = malloc(g->n_out * sizeof(float));
    assert_true(txt && img && out);
    memcpy(txt, g->txt, tn * sizeof(float));
    memcpy(img, g->img, in * sizeof(float));
    txt[3 * cf->joint_dim + 5] = NAN;
    cq_qimage_cond *c = (cq_qimage_cond *)&c;
    tu_expect_err(cq_qimage_prepare(m, &gl, txt, &c), CQ_ERR_NUMERIC, "text row 3");
    assert_null(c);
    assert_int_equal(cq_qimage_prepare(m, &gl, g->txt, &c), CQ_OK);
    img[2 * cf->in_channels + 1] = INFINITY;
    tu_expect_err(cq_qimage_step(m, c, img, 0.5f, out), CQ_ERR_NUMERIC, "image tokens row 2");
    tu_expect_err(cq_qimage_step(m, c, g->img, 1.5f, out), CQ_ERR_INVALID_ARG, "outside [0, 1]");
    tu_expect_err(cq_qimage_step(m, c, g->img, NAN, out), CQ_ERR_INVALID_ARG, "outside [0, 1]");
    tu_expect_err(cq_qimage_step(m, c, NULL, 0.5f, out), CQ_ERR_INVALID_ARG, "image tokens");
    tu_expect_err(cq_qimage_step(g_m[Q_F32][1 - g->model], c, g->img, 0.5f, out), CQ_ERR_INVALID_ARG, "this model");
    /* errors leave the conditioning usable */
    assert_int_equal(cq_qimage_step(m, c, g->img, g->t, out), CQ_OK);
    assert_true(tu_max_rel(out, g->ref, g->n_out, g->ref_rms) <= case_bound(g));
    cq_qimage_cond_free(c);
    cq_qimage_cond_free(NULL);
    cq_qimage_free(NULL);
    free(txt);
    free(img);
    free(out);
}

/* Configs this implementation refuses, each named. */
static void test_bad_config(void **state) {
    (void)state;
    static const struct {
        const char *key, *value;
        cq_status want;
        const char *needle;
    } cfgs[] = {
        {"patch_size", "1", CQ_ERR_UNSUPPORTED, "patch_size 1"},
        {"guidance_embeds", "true", CQ_ERR_UNSUPPORTED, "guidance_embeds"},
        {"use_additional_t_cond", "true", CQ_ERR_UNSUPPORTED, "use_additional_t_cond"},
        {"use_layer3d_rope", "true", CQ_ERR_UNSUPPORTED, "use_layer3d_rope"},
        {"axes_dims_rope", "[8, 12, 10]", CQ_ERR_PARSE, "axes_dims_rope sum to 30"},
        {"attention_head_dim", "31", CQ_ERR_PARSE, "head dim must be even"},
        {"_class_name", "\"ZImageTransformer2DModel\"", CQ_ERR_UNSUPPORTED, "not QwenImageTransformer2DModel"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(cfgs); i++) {
        char dir[1200], path[1300], out[1300];
        snprintf(dir, sizeof dir, "%s/bad-config-%zu", g_dir, i);
        assert_int_equal(tu_system("rm -rf '%s' && cp -r '%s' '%s'", dir, g_src[M_PLAIN], dir), 0);
        snprintf(path, sizeof path, "%s/config.json", dir);
        size_t len;
        uint8_t *txt = tu_read_file(path, &len);
        cJSON *j = txt ? cJSON_ParseWithLength((const char *)txt, len) : NULL;
        free(txt);
        assert_non_null(j);
        cJSON_DeleteItemFromObject(j, cfgs[i].key);
        cJSON_AddItemToObject(j, cfgs[i].key, cJSON_Parse(cfgs[i].value));
        char *s = cJSON_PrintUnformatted(j);
        assert_int_equal(tu_write_file(path, s, strlen(s)), 0);
        cJSON_free(s);
        cJSON_Delete(j);
        snprintf(out, sizeof out, "%s.cmf", dir);
        cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
        cq_convert_report rep;
        cq_status st = cq_convert(dir, out, &opts, &rep);
        cq_convert_report_free(&rep);
        if (st != CQ_OK) fail_msg("convert %s: %s", dir, cq_last_error());
        cq_cmf *cmf;
        assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
        cq_qimage_config c;
        cq_qimage *m = (cq_qimage *)&m;
        tu_expect_err(cq_qimage_parse_config(cmf, "dit.", &c), cfgs[i].want, cfgs[i].needle);
        tu_expect_err(cq_qimage_load(cmf, "dit.", g_be, &m), cfgs[i].want, cfgs[i].needle);
        assert_null(m);
        cq_cmf_close(cmf);
    }
}

/* The golden cases on the plain-C reference backend. */
static void test_golden_ref_backend(void **state) {
    (void)state;
    cq_backend *be;
    assert_int_equal(cq_backend_create("ref", 1, &be), CQ_OK);
    for (int mi = 0; mi < M_COUNT; mi++) {
        cq_qimage *m;
        assert_int_equal(cq_qimage_load(g_cmf[Q_F32][mi], "dit.", be, &m), CQ_OK);
        for (int i = 0; i < g_n; i++) {
            const qcase *g = &g_cases[i];
            if (g->model != mi) continue;
            float *out = malloc(g->n_out * sizeof(float));
            assert_non_null(out);
            double e = run_forward(m, g, out);
            print_message("ref    %-14s max|err|/RMS %.3e\n", g->name, e);
            if (!(e <= F32_BOUND)) fail_msg("ref backend %s: %.3e", g->name, e);
            free(out);
        }
        cq_qimage_free(m);
    }
    cq_backend_free(be);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_qimage", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    if (access(QG_DIR, F_OK) != 0) {
        printf("test_qimage: skipped: the golden folder is absent (%s; made by tools/golden_qwenimage.py)\n", QG_DIR);
        return TU_SKIP;
    }
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden_taps),  cmocka_unit_test(test_golden_bf16),
        cmocka_unit_test(test_table),        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_bad_input),    cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_golden_ref_backend),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden_taps), cmocka_unit_test(test_golden_bf16),
        cmocka_unit_test(test_steps),       cmocka_unit_test(test_bad_input),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_qimage (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_qimage (host)", host, setup, teardown);
}
