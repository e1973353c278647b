/*
 * test_ltx2.c — LTX-2's audio-video denoiser (models/ltx2.h) against
 * diffusers' LTX2VideoTransformer3DModel (tests/golden/ltx2_dit, made by
 * tools/golden_ltx2_dit.py), on the backend named by the one argument
 * (testutil.h: `test_ltx2 cpu`; `test_ltx2 cuda` as test_ltx2_cuda, label
 * gpu; `test_ltx2 vulkan`). Exits 77 (skipped) where the backend is not
 * built or no device is present, and when the golden folder is absent.
 *
 * Errors are max|err| / RMS(reference) per tensor.
 *  - Every golden case (one sigma, two sigmas, 1 and 3 latent frames, 1 and
 *    9 audio frames, STG at block 1, isolated modalities, a per-token video
 *    timestep, the legacy cross timestep), the model converted to f32 by the
 *    library's convert: both outputs and every tap the golden holds (the
 *    eight adaLN-single tables per run of timesteps, both streams after
 *    proj_in and after each block, block 0's attention and FF inputs and
 *    outputs, block 1's self-attentions under STG) within 1e-4 on the host
 *    and a quarter of the case's bf16 error (the reference's own) on a
 *    device; the RoPE tables within 1e-6 absolute.
 *  - A q8_2f pack (the modulation tables quantized too) within 8e-2.
 *  - Steps on one prepared state equal fresh forwards bit for bit while the
 *    sigmas, STG, isolation and per-token timesteps change between them, a
 *    second state alive; steady steps allocate nothing (host or device).
 *  - Bad packs (a missing tensor, configs this implementation refuses) and
 *    bad inputs (counts, sizes, non-finite values, STG blocks out of range)
 *    fail with messages naming what is wrong; every allocation of a load
 *    and a forward failing in turn gives CQ_ERR_NOMEM.
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
#include "models/ltx2.h"
#include "models/tables.h"
#include "ops/backend.h"

#define LG_DIR CQ_SOURCE_DIR "/tests/golden/ltx2_dit"
#define F32_BOUND 1e-4
#define ROPE_ABS 1e-6
#define LG_MIN_CASES 8

typedef struct lcase {
    char name[32];
    cq_st *st;
    cq_ltx2_inputs in;
    float *video, *audio, *ctx, *actx, *ts, *ats; /* owned input arrays */
    int stg[4];
    float *ref_v, *ref_a;
    size_t n_v, n_a;
    double bf16_v, bf16_a;
    const cJSON *tap_bf16; /* the reference's own bf16 error per tap (max |diff| / rms), where recorded */
} lcase;

static tu_backend_arg g_arg;
static char g_dir[1024];
static char g_pack[1200];
static cq_backend *g_be;
static cq_cmf *g_cmf;
static cq_ltx2 *g_m;
static cJSON *g_index;
static lcase g_cases[16];
static int g_n;

static double bound_v(const lcase *g) { return g_arg.device ? g->bf16_v / 4 : F32_BOUND; }
static double bound_a(const lcase *g) { return g_arg.device ? g->bf16_a / 4 : F32_BOUND; }

static double jnum(const cJSON *c, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static bool jbool(const cJSON *c, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, key)); }

/* golden tensor `name` with `want` values (0: any), malloc'd */
static float *gfloats(const lcase *g, const char *name, size_t want, size_t *n) {
    size_t k = 0;
    float *v = tu_st_floats(g->st, name, &k);
    if (!v || (want && k != want)) {
        fprintf(stderr, "%s: tensor %s missing or of %zu values (want %zu)\n", g->name, name, k, want);
        free(v);
        return NULL;
    }
    if (n) *n = k;
    return v;
}

static int load_case(lcase *g, const cJSON *c) {
    snprintf(g->name, sizeof g->name, "%s", c->string);
    char path[1200];
    snprintf(path, sizeof path, "%s/cases/%s.safetensors", LG_DIR, g->name);
    if (cq_st_open(path, &g->st) != CQ_OK) return -1;
    const cq_ltx2_config *cf = cq_ltx2_get_config(g_m);
    cq_ltx2_inputs *in = &g->in;
    in->frames = (int)jnum(c, "frames");
    in->height = (int)jnum(c, "height");
    in->width = (int)jnum(c, "width");
    in->fps = jnum(c, "fps");
    in->audio_frames = (int)jnum(c, "audio_frames");
    in->n_ctx = (int)jnum(c, "text_rows");
    in->n_audio_ctx = (int)jnum(c, "audio_text_rows");
    in->use_cross_timestep = jbool(c, "use_cross_timestep");
    in->isolate_modalities = jbool(c, "isolate_modalities");
    g->bf16_v = jnum(c, "bf16_max_rel");
    g->bf16_a = jnum(c, "audio_bf16_max_rel");
    g->tap_bf16 = cJSON_GetObjectItemCaseSensitive(c, "tap_bf16_max_rel");
    if (in->frames < 1 || in->height < 1 || in->width < 1 || in->audio_frames < 1 || in->n_ctx < 1 ||
        in->n_audio_ctx < 1 || !(g->bf16_v > 0) || !(g->bf16_a > 0))
        return -1;
    const cJSON *stg = cJSON_GetObjectItemCaseSensitive(c, "stg_blocks"), *e;
    cJSON_ArrayForEach(e, stg) {
        if (in->n_stg_blocks == 4) return -1;
        g->stg[in->n_stg_blocks++] = e->valueint;
    }
    in->stg_blocks = g->stg;
    const size_t nv = (size_t)in->frames * in->height * in->width, na = (size_t)in->audio_frames;
    size_t nt = 0, nat = 0;
    if (!(g->video = gfloats(g, "hidden_states", nv * cf->in_channels, NULL))) return -1;
    if (!(g->audio = gfloats(g, "audio_hidden_states", na * cf->audio_in_channels, NULL))) return -1;
    if (!(g->ctx = gfloats(g, "encoder_hidden_states", (size_t)in->n_ctx * cf->dim, NULL))) return -1;
    if (!(g->actx = gfloats(g, "audio_encoder_hidden_states", (size_t)in->n_audio_ctx * cf->audio_dim, NULL)))
        return -1;
    if (!(g->ts = gfloats(g, "timestep", 0, &nt)) || !(g->ats = gfloats(g, "audio_timestep", 0, &nat))) return -1;
    float *sg = gfloats(g, "sigma", 1, NULL), *asg = gfloats(g, "audio_sigma", 1, NULL);
    if (!sg || !asg) return -1;
    in->sigma = sg[0];
    in->audio_sigma = asg[0];
    free(sg);
    free(asg);
    in->video = g->video;
    in->audio = g->audio;
    in->ctx = g->ctx;
    in->audio_ctx = g->actx;
    in->timestep = g->ts;
    in->n_timestep = (int)nt;
    in->audio_timestep = g->ats;
    in->n_audio_timestep = (int)nat;
    g->n_v = nv * cf->out_channels;
    g->n_a = na * cf->audio_out_channels;
    if (!(g->ref_v = gfloats(g, "sample", g->n_v, NULL)) || !(g->ref_a = gfloats(g, "audio_sample", g->n_a, NULL)))
        return -1;
    return 0;
}

static int setup(void **state) {
    (void)state;
    char tag[64];
    snprintf(tag, sizeof tag, "ltx2_%s", g_arg.name);
    snprintf(g_dir, sizeof g_dir, "%s", tu_tmpdir(tag));
    if (tu_backend_create(&g_arg, 2, &g_be) != CQ_OK) return -1;
    snprintf(g_pack, sizeof g_pack, "%s/ltx2-f32.cmf", g_dir);
    cq_convert_opts opts = {.quant = (int)CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(LG_DIR "/model", g_pack, &opts, &rep);
    if (s == CQ_OK && strcmp(rep.arch, "ltx2") != 0) s = cq_fail(CQ_ERR_INTERNAL, "arch '%s', not ltx2", rep.arch);
    cq_convert_report_free(&rep);
    if (s == CQ_OK) s = cq_cmf_open(g_pack, &g_cmf);
    if (s == CQ_OK) s = cq_ltx2_load(g_cmf, "dit.", g_be, &g_m);
    if (s != CQ_OK) {
        fprintf(stderr, "%s: %s\n", g_pack, cq_last_error());
        return -1;
    }
    g_index = tu_read_json(LG_DIR "/index.json");
    if (!g_index) return -1;
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(g_index, "cases"), *c;
    cJSON_ArrayForEach(c, cases) {
        if (g_n == (int)CQ_ARRAY_LEN(g_cases) || load_case(&g_cases[g_n++], c) != 0) {
            fprintf(stderr, "golden case %s does not load\n", c->string);
            return -1;
        }
    }
    if (g_n < LG_MIN_CASES) {
        fprintf(stderr, "index.json lists %d cases, expected at least %d\n", g_n, LG_MIN_CASES);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < g_n; i++) {
        lcase *g = &g_cases[i];
        free(g->video);
        free(g->audio);
        free(g->ctx);
        free(g->actx);
        free(g->ts);
        free(g->ats);
        free(g->ref_v);
        free(g->ref_a);
        cq_st_close(g->st);
    }
    cJSON_Delete(g_index);
    cq_ltx2_free(g_m);
    cq_cmf_close(g_cmf);
    cq_backend_free(g_be);
    return 0;
}

/* ---- the golden cases with their taps ------------------------------------------------------------ */
typedef struct tap_check {
    const lcase *g;
    double worst;
    char worst_name[48];
    int checked, tables, blocks;
    char error[256]; /* the first failed check: the tap callback must not jump out of the forward */
} tap_check;

#define TAP_FAIL(k, ...)                                                                                            \
    do {                                                                                                            \
        if (!(k)->error[0]) snprintf((k)->error, sizeof (k)->error, __VA_ARGS__);                                   \
    } while (0)

/* A tap's bound: on the host F32_BOUND; on a device a quarter of the reference's own bf16 error on the case's
 * outputs, or on that tap where the generator recorded it and it is larger (an intermediate the reference itself
 * computes less exactly than its outputs, e.g. an attention output before its gated residual add). */
static double tap_bound(const lcase *g, const char *name) {
    double b = fmin(bound_v(g), bound_a(g));
    const cJSON *t = g_arg.device && g->tap_bf16 ? cJSON_GetObjectItemCaseSensitive(g->tap_bf16, name) : NULL;
    if (cJSON_IsNumber(t) && t->valuedouble / 4 > b) b = t->valuedouble / 4;
    return b;
}

/* The runs of equal timesteps (as the model forms them): *G runs starting at r0[]. */
static int runs(const float *t, int nt, int64_t n, int64_t *r0) {
    int G = 0;
    for (int64_t i = 0; i < (nt == 1 ? 1 : n); i++)
        if (i == 0 || t[i] != t[i - 1]) r0[G++] = i;
    return G;
}

/* A table tap [runs, w] against the golden [1 or tokens, w]. */
static double check_table(tap_check *k, const char *name, const float *got, int64_t rows, int64_t cols,
                          const float *ref, size_t nref) {
    const lcase *g = k->g;
    const bool audio = strncmp(name, "audio_", 6) == 0 || strncmp(name, "av_audio", 8) == 0;
    const cq_ltx2_inputs *in = &g->in;
    int64_t r0[CQ_LTX2_MAX_RUNS];
    const int64_t n = audio ? in->audio_frames : (int64_t)in->frames * in->height * in->width;
    const int G = audio ? runs(in->audio_timestep, in->n_audio_timestep, n, r0)
                        : runs(in->timestep, in->n_timestep, n, r0);
    if (rows != G) {
        TAP_FAIL(k, "%s: table %s has %lld rows, the timesteps %d runs", g->name, name, (long long)rows, G);
        return INFINITY;
    }
    const size_t ref_rows = nref / (size_t)cols;
    if (ref_rows * (size_t)cols != nref || (ref_rows != 1 && ref_rows != (size_t)n)) {
        TAP_FAIL(k, "%s: golden %s has %zu values, not a multiple of %lld for 1 or %lld rows", g->name, name, nref,
                 (long long)cols, (long long)n);
        return INFINITY;
    }
    const double rms = tu_rms(ref, nref);
    double e = 0;
    for (int r = 0; r < G; r++) {
        const float *want = ref + (ref_rows == 1 ? 0 : (size_t)r0[r] * (size_t)cols);
        e = fmax(e, tu_max_rel(got + (size_t)r * cols, want, (size_t)cols, rms));
    }
    return e;
}

static void on_tap(void *user, const char *name, const cq_tensor *t) {
    tap_check *k = user;
    const lcase *g = k->g;
    if (k->error[0]) return;
    const size_t n = (size_t)cq_tensor_nelem(t);
    const cq_st_tensor *st = cq_st_find(g->st, name);
    if (!st) return; /* a tap the reference did not record (later blocks' internals) */
    size_t nr = 0;
    float *got = malloc(n * sizeof(float)), *ref = tu_st_floats(g->st, name, &nr);
    const size_t len = strlen(name);
    double e = INFINITY, bound = 0;
    if (!got || cq_tensor_download(t, got, n * sizeof(float)) != CQ_OK) {
        TAP_FAIL(k, "%s: tap %s could not be read: %s", g->name, name, cq_last_error());
    } else if (!ref) {
        TAP_FAIL(k, "%s: golden %s is not f32", g->name, name);
    } else if (strncmp(name, "rope_", 5) == 0) {
        if (nr != n) TAP_FAIL(k, "%s: tap %s has %zu values, the reference %zu", g->name, name, n, nr);
        e = 0;
        for (size_t i = 0; i < n && i < nr; i++) e = fmax(e, fabs((double)got[i] - ref[i]));
        bound = ROPE_ABS;
    } else if (len > 4 && (strcmp(name + len - 4, "_mod") == 0 || strcmp(name + len - 4, "_emb") == 0)) {
        e = check_table(k, name, got, cq_tensor_rows(t), cq_tensor_cols(t), ref, nr);
        bound = tap_bound(g, name);
        k->tables++;
    } else if (nr != n) {
        TAP_FAIL(k, "%s: tap %s has %zu values, the reference %zu", g->name, name, n, nr);
    } else {
        e = tu_max_rel(got, ref, n, tu_rms(ref, n));
        bound = tap_bound(g, name);
        if (strncmp(name, "block", 5) == 0) k->blocks++;
    }
    if (!(e <= bound)) TAP_FAIL(k, "%s: tap %s differs by %.3e (bound %.1e)", g->name, name, e, bound);
    if (!k->error[0] && strncmp(name, "rope_", 5) != 0 && !(e <= k->worst)) {
        k->worst = e;
        snprintf(k->worst_name, sizeof k->worst_name, "%s", name);
    }
    k->checked++;
    free(ref);
    free(got);
}

static void test_golden(void **state) {
    (void)state;
    const cq_ltx2_config *cf = cq_ltx2_get_config(g_m);
    for (int i = 0; i < g_n; i++) {
        const lcase *g = &g_cases[i];
        tap_check k = {.g = g};
        float *v = malloc(g->n_v * sizeof(float)), *a = malloc(g->n_a * sizeof(float));
        assert_non_null(v);
        assert_non_null(a);
        cq_ltx2_set_tap(g_m, on_tap, &k);
        cq_status s = cq_ltx2_forward(g_m, &g->in, v, a);
        cq_ltx2_set_tap(g_m, NULL, NULL);
        if (s != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
        if (k.error[0]) fail_msg("%s", k.error);
        /* the eight tables (mod and emb each), both streams after each block */
        assert_int_equal(k.tables, 16);
        assert_int_equal(k.blocks, 2 * cf->n_layers);
        const double ev = tu_max_rel(v, g->ref_v, g->n_v, tu_rms(g->ref_v, g->n_v));
        const double ea = tu_max_rel(a, g->ref_a, g->n_a, tu_rms(g->ref_a, g->n_a));
        print_message("%-9s %dx%dx%d + %2d audio, %d/%d timesteps: video %.3e (bound %.1e), audio %.3e (bound %.1e); "
                      "%d taps, worst %s %.3e\n", g->name, g->in.frames, g->in.height, g->in.width,
                      g->in.audio_frames, g->in.n_timestep, g->in.n_audio_timestep, ev, bound_v(g), ea, bound_a(g),
                      k.checked, k.worst_name, k.worst);
        if (!(ev <= bound_v(g))) fail_msg("%s: video output differs by %.3e", g->name, ev);
        if (!(ea <= bound_a(g))) fail_msg("%s: audio output differs by %.3e", g->name, ea);
        /* a second forward without taps gives the same values */
        float *v2 = malloc(g->n_v * sizeof(float)), *a2 = malloc(g->n_a * sizeof(float));
        assert_non_null(v2);
        assert_non_null(a2);
        assert_int_equal(cq_ltx2_forward(g_m, &g->in, v2, a2), CQ_OK);
        assert_memory_equal(v, v2, g->n_v * sizeof(float));
        assert_memory_equal(a, a2, g->n_a * sizeof(float));
        free(v2);
        free(a2);
        free(v);
        free(a);
    }
}

/* A q8_2f pack (convert's default for matrices; the modulation tables quantized too and dequantized at load):
 * every case within Q8_BOUND of the reference (3.7e-2 measured on the CPU, about twice that allowed). */
#define Q8_BOUND 8e-2
static void test_golden_q8(void **state) {
    (void)state;
    char pack[1300];
    snprintf(pack, sizeof pack, "%s/ltx2-q8.cmf", g_dir);
    cq_convert_opts opts = {.quant = (int)CQ_DTYPE_Q8_2F};
    cq_convert_report rep;
    assert_int_equal(cq_convert(LG_DIR "/model", pack, &opts, &rep), CQ_OK);
    cq_convert_report_free(&rep);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(pack, &cmf), CQ_OK);
    cq_ltx2 *m;
    if (cq_ltx2_load(cmf, "dit.", g_be, &m) != CQ_OK) fail_msg("%s", cq_last_error());
    double worst = 0;
    for (int i = 0; i < g_n; i++) {
        const lcase *g = &g_cases[i];
        float *v = malloc(g->n_v * sizeof(float)), *a = malloc(g->n_a * sizeof(float));
        assert_true(v && a);
        if (cq_ltx2_forward(m, &g->in, v, a) != CQ_OK) fail_msg("%s: %s", g->name, cq_last_error());
        worst = fmax(worst, tu_max_rel(v, g->ref_v, g->n_v, tu_rms(g->ref_v, g->n_v)));
        worst = fmax(worst, tu_max_rel(a, g->ref_a, g->n_a, tu_rms(g->ref_a, g->n_a)));
        free(v);
        free(a);
    }
    print_message("q8_2f pack: worst output max|err|/RMS %.3e over %d cases (bound %.0e)\n", worst, g_n, Q8_BOUND);
    assert_true(worst <= Q8_BOUND);
    cq_ltx2_free(m);
    cq_cmf_close(cmf);
}

/* ---- steps on a prepared state ------------------------------------------------------------------ */
static const lcase *find_case(const char *name) {
    for (int i = 0; i < g_n; i++)
        if (strcmp(g_cases[i].name, name) == 0) return &g_cases[i];
    fail_msg("no golden case '%s'", name);
    return NULL;
}

/* Steps on one state give what fresh forwards give, bit for bit, whatever changes between them (sigmas, STG,
 * isolation, per-token timesteps: the cases share one grid and prompt rows' count), with a second state alive;
 * after the first steps (two where the backend records) a step allocates nothing, on the host or the device. */
static void test_steps(void **state) {
    (void)state;
    static const char *const order[] = {"t2v", "sigmas", "sigmas", "stg", "isolate", "pertoken", "pertoken",
                                        "legacy", "t2v", "t2v", "t2v"};
    const lcase *first = find_case("t2v");
    cq_ltx2_cond *c = NULL, *other = NULL;
    assert_int_equal(cq_ltx2_prepare(g_m, &first->in, &c), CQ_OK);
    assert_int_equal(cq_ltx2_prepare(g_m, &find_case("f1a1")->in, &other), CQ_OK);
    float *v = malloc(first->n_v * sizeof(float)), *a = malloc(first->n_a * sizeof(float));
    float *vf = malloc(first->n_v * sizeof(float)), *af = malloc(first->n_a * sizeof(float));
    assert_true(v && a && vf && af);
    for (size_t i = 0; i < CQ_ARRAY_LEN(order); i++) {
        const lcase *g = find_case(order[i]);
        assert_int_equal(g->n_v, first->n_v);
        assert_int_equal(g->n_a, first->n_a);
        cq_ltx2_inputs in = g->in;
        in.ctx = first->in.ctx; /* the state's prompts: what the step runs with */
        in.audio_ctx = first->in.audio_ctx;
        in.n_ctx = first->in.n_ctx;
        in.n_audio_ctx = first->in.n_audio_ctx;
        if (cq_ltx2_step(c, &in, v, a) != CQ_OK) fail_msg("step %zu (%s): %s", i, g->name, cq_last_error());
        assert_int_equal(cq_ltx2_forward(g_m, &in, vf, af), CQ_OK);
        assert_memory_equal(v, vf, g->n_v * sizeof(float));
        assert_memory_equal(a, af, g->n_a * sizeof(float));
    }
    /* the steady state: the same layout over and over */
    cq_backend_stats s0, s1;
    assert_int_equal(cq_backend_get_stats(g_be, &s0, false), CQ_OK);
    const int warm = cq_backend_can_record(g_be) ? 2 : 1;
    for (int i = 0; i < 5; i++) {
        cq_ltx2_inputs in = find_case(i % 2 ? "sigmas" : "t2v")->in;
        cq_alloc_fail_at(0);
        assert_int_equal(cq_ltx2_step(c, &in, v, a), CQ_OK);
        const long allocs = cq_alloc_fail_at(0);
        if (i >= warm && allocs != 0 && !g_be->fallback_logged)
            fail_msg("step %d made %ld host allocations", i, allocs);
    }
    assert_int_equal(cq_backend_get_stats(g_be, &s1, false), CQ_OK);
    if (s1.device_allocs != s0.device_allocs || s1.mem_in_use != s0.mem_in_use)
        fail_msg("steps allocated device memory");
    /* the other state still gives its own case */
    const lcase *g1 = find_case("f1a1");
    float *v1 = malloc(g1->n_v * sizeof(float)), *a1 = malloc(g1->n_a * sizeof(float));
    assert_true(v1 && a1);
    assert_int_equal(cq_ltx2_step(other, &g1->in, v1, a1), CQ_OK);
    assert_true(tu_max_rel(v1, g1->ref_v, g1->n_v, tu_rms(g1->ref_v, g1->n_v)) <= bound_v(g1));
    /* a step on another grid than the prepared one */
    tu_expect_err(cq_ltx2_step(other, &first->in, v, a), CQ_ERR_SHAPE, "prepared for");
    free(v1);
    free(a1);
    free(v);
    free(a);
    free(vf);
    free(af);
    cq_ltx2_cond_free(c);
    cq_ltx2_cond_free(other);
}

/* STG and isolated modalities change the output (the cases are not trivially the plain one). */
static void test_variants_differ(void **state) {
    (void)state;
    const lcase *t2v = NULL, *stg = NULL;
    for (int i = 0; i < g_n; i++) {
        if (strcmp(g_cases[i].name, "t2v") == 0) t2v = &g_cases[i];
        if (strcmp(g_cases[i].name, "stg") == 0) stg = &g_cases[i];
    }
    assert_non_null(t2v);
    assert_non_null(stg);
    float *v = malloc(t2v->n_v * sizeof(float)), *a = malloc(t2v->n_a * sizeof(float));
    float *v1 = malloc(t2v->n_v * sizeof(float)), *a1 = malloc(t2v->n_a * sizeof(float));
    assert_true(v && a && v1 && a1);
    cq_ltx2_inputs in = t2v->in;
    assert_int_equal(cq_ltx2_forward(g_m, &in, v, a), CQ_OK);
    const int blk = 1;
    in.stg_blocks = &blk;
    in.n_stg_blocks = 1;
    assert_int_equal(cq_ltx2_forward(g_m, &in, v1, a1), CQ_OK);
    assert_true(tu_max_rel(v, v1, t2v->n_v, tu_rms(v, t2v->n_v)) > 1e-3);
    in.n_stg_blocks = 0;
    in.isolate_modalities = true;
    assert_int_equal(cq_ltx2_forward(g_m, &in, v1, a1), CQ_OK);
    assert_true(tu_max_rel(a, a1, t2v->n_a, tu_rms(a, t2v->n_a)) > 1e-3);
    free(v);
    free(a);
    free(v1);
    free(a1);
}

/* ---- bad input ---------------------------------------------------------------------------------- */
static void test_bad_input(void **state) {
    (void)state;
    const lcase *g = &g_cases[0];
    float *v = malloc(g->n_v * sizeof(float)), *a = malloc(g->n_a * sizeof(float));
    assert_true(v && a);
    cq_ltx2_inputs in = g->in;
    tu_expect_err(cq_ltx2_forward(g_m, NULL, v, a), CQ_ERR_INVALID_ARG, "inputs");
    tu_expect_err(cq_ltx2_forward(g_m, &in, NULL, a), CQ_ERR_INVALID_ARG, "outputs");
    in.frames = 0;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "latent grid");
    in = g->in;
    in.frames = 1 << 20;
    in.height = 1 << 10;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "latent grid");
    in = g->in;
    in.audio_frames = 0;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "audio frames");
    in = g->in;
    in.n_ctx = 0;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "prompts");
    in = g->in;
    in.n_timestep = 2;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "video timesteps");
    in = g->in;
    in.n_audio_timestep = 3;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_SHAPE, "audio timesteps");
    in = g->in;
    in.fps = 0;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_INVALID_ARG, "fps");
    in = g->in;
    const int bad_blk = 7;
    in.stg_blocks = &bad_blk;
    in.n_stg_blocks = 1;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_INVALID_ARG, "STG block 7");
    in = g->in;
    in.sigma = NAN;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_NUMERIC, "sigma");
    /* a non-finite value in each input names it */
    const cq_ltx2_config *cf = cq_ltx2_get_config(g_m);
    const size_t nv = (size_t)g->in.frames * g->in.height * g->in.width;
    float *bad = malloc(nv * (size_t)cf->in_channels * sizeof(float));
    assert_non_null(bad);
    memcpy(bad, g->in.video, nv * (size_t)cf->in_channels * sizeof(float));
    bad[5] = INFINITY;
    in = g->in;
    in.video = bad;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_NUMERIC, "video tokens");
    free(bad);
    float ts[2] = {NAN, 0};
    in = g->in;
    in.timestep = ts;
    in.n_timestep = 1;
    tu_expect_err(cq_ltx2_forward(g_m, &in, v, a), CQ_ERR_NUMERIC, "video timesteps");
    free(v);
    free(a);
}

/* ---- bad packs ---------------------------------------------------------------------------------- */
/* A copy of the golden model folder with config.json edited by `edit` (a key set to a JSON value). */
static const char *edited_folder(const char *tag, const char *key, const char *json_value) {
    static char dir[1300];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, tag);
    assert_int_equal(tu_system("mkdir -p '%s' && ln -sf '%s/model/diffusion_pytorch_model.safetensors' '%s/'", dir,
                               LG_DIR, dir), 0);
    size_t len;
    uint8_t *raw = tu_read_file(LG_DIR "/model/config.json", &len);
    assert_non_null(raw);
    cJSON *j = cJSON_ParseWithLength((const char *)raw, len);
    free(raw);
    assert_non_null(j);
    cJSON *v = cJSON_Parse(json_value);
    assert_non_null(v);
    if (cJSON_GetObjectItemCaseSensitive(j, key)) cJSON_ReplaceItemInObjectCaseSensitive(j, key, v);
    else cJSON_AddItemToObject(j, key, v);
    char *txt = cJSON_Print(j);
    cJSON_Delete(j);
    assert_int_equal(tu_write_file(tu_path(dir, "config.json"), txt, strlen(txt)), 0);
    free(txt);
    return dir;
}

static void expect_load_fails(const char *src, const cq_convert_opts *opts, cq_status want, const char *needle) {
    char pack[1400];
    snprintf(pack, sizeof pack, "%s/bad.cmf", g_dir);
    cq_convert_report rep;
    assert_int_equal(cq_convert(src, pack, opts, &rep), CQ_OK);
    cq_convert_report_free(&rep);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(pack, &cmf), CQ_OK);
    cq_ltx2 *m = NULL;
    tu_expect_err(cq_ltx2_load(cmf, "dit.", g_be, &m), want, needle);
    assert_null(m);
    cq_cmf_close(cmf);
}

static void test_bad_pack(void **state) {
    (void)state;
    const cq_convert_opts f32 = {.quant = (int)CQ_DTYPE_F32};
    /* a tensor the table needs is not in the pack */
    const char *drop[] = {"dit.transformer_blocks.1.video_to_audio_attn.to_k.weight"};
    cq_convert_opts dropped = f32;
    dropped.drop = drop;
    dropped.n_drop = 1;
    expect_load_fails(LG_DIR "/model", &dropped, CQ_ERR_MISSING, "transformer_blocks.1.video_to_audio_attn.to_k");
    /* the config asks for tensors the pack lacks (video FF biases) */
    expect_load_fails(edited_folder("ffb", "ff_bias", "true"), &f32, CQ_ERR_MISSING, "ff.net.0.proj.bias");
    /* configs this implementation does not run */
    expect_load_fails(edited_folder("interleaved", "rope_type", "\"interleaved\""), &f32, CQ_ERR_UNSUPPORTED,
                      "rope_type");
    expect_load_fails(edited_folder("caption", "use_prompt_embeddings", "true"), &f32, CQ_ERR_UNSUPPORTED,
                      "use_prompt_embeddings");
    expect_load_fails(edited_folder("heads", "audio_num_attention_heads", "4"), &f32, CQ_ERR_UNSUPPORTED, "heads");
    expect_load_fails(edited_folder("patch", "patch_size", "2"), &f32, CQ_ERR_UNSUPPORTED, "patch_size");
    expect_load_fails(edited_folder("xdim", "cross_attention_dim", "48"), &f32, CQ_ERR_UNSUPPORTED,
                      "cross_attention_dim");
}

/* The pack's tensors match the table exactly (nothing missing, unexpected or mis-shaped). */
static void test_table(void **state) {
    (void)state;
    cq_tt_report rep;
    int n = 0;
    assert_int_equal(cq_tables_check_pack(g_cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing, 0);
    assert_int_equal(rep.unexpected, 0);
    assert_int_equal(rep.mismatched, 0);
}

/* ---- allocation failures -------------------------------------------------------------------------- */
/* Load and one forward of the per-token case on a fresh backend. */
static cq_status run_everything(const lcase *g, float *v, float *a) {
    cq_backend *be = NULL;
    cq_ltx2 *m = NULL;
    cq_status s = tu_backend_create(&g_arg, 2, &be);
    if (s == CQ_OK) s = cq_ltx2_load(g_cmf, "dit.", be, &m);
    if (s == CQ_OK) s = cq_ltx2_forward(m, &g->in, v, a);
    cq_ltx2_free(m);
    cq_backend_free(be);
    return s;
}

/* Every allocation of a load and a forward failing in turn: a clean CQ_ERR_NOMEM each time (the sanitizer
 * build sees the leaks and double frees, if any). */
static void test_alloc_faults(void **state) {
    (void)state;
    const lcase *g = NULL;
    for (int i = 0; i < g_n; i++)
        if (strcmp(g_cases[i].name, "pertoken") == 0) g = &g_cases[i];
    assert_non_null(g);
    float *v = malloc(g->n_v * sizeof(float)), *a = malloc(g->n_a * sizeof(float));
    assert_true(v && a);
    cq_alloc_fail_at(0);
    assert_int_equal(run_everything(g, v, a), CQ_OK);
    const long total = cq_alloc_fail_at(0);
    int failed = 0;
    for (long k = 1; k <= total; k++) {
        cq_alloc_fail_at(k);
        cq_status s = run_everything(g, v, a);
        cq_alloc_fail_at(0);
        if (s == CQ_OK) continue; /* an optional allocation (a worker thread) */
        if (s != CQ_ERR_NOMEM) fail_msg("allocation %ld of %ld: %s (%s)", k, total, cq_status_str(s), cq_last_error());
        failed++;
    }
    print_message("%d of %ld allocation failures surfaced as CQ_ERR_NOMEM\n", failed, total);
    assert_true(failed > total / 2);
    free(v);
    free(a);
}

int main(int argc, char **argv) {
    int rc = tu_backend_select("test_ltx2", argc, argv, &g_arg);
    if (rc >= 0) return rc;
    if (access(LG_DIR "/index.json", R_OK) != 0) {
        printf("test_ltx2: skipped: the golden data is absent (%s; made by tools/golden_ltx2_dit.py)\n", LG_DIR);
        return TU_SKIP;
    }
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_golden),   cmocka_unit_test(test_golden_q8), cmocka_unit_test(test_steps),
        cmocka_unit_test(test_variants_differ),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_bad_pack), cmocka_unit_test(test_table), cmocka_unit_test(test_alloc_faults),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_golden_q8),
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_bad_input),
    };
    if (g_arg.device) return cmocka_run_group_tests_name("test_ltx2 (device)", device, setup, teardown);
    return cmocka_run_group_tests_name("test_ltx2 (host)", host, setup, teardown);
}
