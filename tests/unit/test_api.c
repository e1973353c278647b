/*
 * test_api.c — the public runtime API (include/cortiq.h: cq_model, cq_image,
 * cq_session) against the pipelines it is a layer over: an image drawn with
 * models/shapes.cmf through the API has the pixels the pipeline gives for the
 * same options, the progress callback sees the phases in order and can stop
 * the work, cancellation and bad requests fail with their codes; a chat
 * session on the tiny golden Qwen3 model streams the same tokens as the chat
 * pipeline with the same sampling. Image cases are skipped (77) where
 * models/shapes.cmf is absent.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "models/qwen3.h"
#include "ops/ops.h"
#include "pipelines/chat.h"
#include "pipelines/png_write.h"
#include "pipelines/qi21_pipe.h"
#include "pipelines/sampler.h"

#define SHAPES CQ_SOURCE_DIR "/models/shapes.cmf"
#define PROMPT "a red circle on a blue background"
#define SIDE 64
#define STEPS 4

static char g_lm[1024], g_dir[1024]; /* the scratch directory (tu_tmpdir empties it: once) */

static cq_image_opts small_opts(void) {
    cq_image_opts o;
    cq_image_opts_init(&o);
    o.prompt = PROMPT;
    o.width = o.height = SIDE;
    o.steps = STEPS;
    o.seed = 5;
    return o;
}

static void test_defaults(void **state) {
    (void)state;
    cq_image_opts o;
    memset(&o, 0xab, sizeof o);
    cq_image_opts_init(&o);
    /* "the model's": size, steps and guidance left to the pack, else the architecture */
    assert_int_equal(o.width, 0);
    assert_int_equal(o.height, 0);
    assert_int_equal(o.steps, 0);
    assert_true(o.guidance < 0);
    assert_null(o.prompt);
    assert_null(o.progress);
    assert_null(o.arch_opts);
    cq_model *m = NULL;
    assert_int_equal(cq_model_open(SHAPES, NULL, &m), CQ_OK);
    /* the pack's recommended size, steps and guidance (its header's generation_defaults: converted from the
     * pipeline folder, it carries Qwen-Image-2.1's recipe guidance besides the size and steps given) */
    cq_image_defaults d;
    assert_int_equal(cq_image_get_defaults(m, &d), CQ_OK);
    assert_true(d.width == 256 && d.height == 256 && d.steps == 20 && d.guidance == 1.0);
    assert_true(d.size_from_pack && d.steps_from_pack && d.guidance_from_pack);
    assert_null(d.negative);
    assert_true(d.shift == 0.0);
    assert_int_equal(d.size_multiple, 32);
    assert_int_equal(d.min_steps, 2);
    assert_non_null(strstr(d.guidance_rule, "1 = off"));
    /* condition pictures are optional for Qwen-Image-2.1 */
    assert_int_equal(d.max_images, 8);
    assert_true(d.images_optional);
    assert_int_equal(cq_image_resolve(m, &o), CQ_OK);
    assert_int_equal(o.width, 256);
    assert_int_equal(o.height, 256);
    assert_int_equal(o.steps, 20);
    assert_true(o.guidance == 1.0);
    assert_null(o.negative);
    o.width = o.height = 128;
    o.steps = 7;
    o.guidance = 3.5;
    assert_int_equal(cq_image_resolve(m, &o), CQ_OK); /* what was set stays */
    assert_int_equal(o.width, 128);
    assert_int_equal(o.steps, 7);
    assert_true(o.guidance == 3.5);
    /* an option of no architecture, and one of Qwen-Image-2.1's with a bad value: refused before any work */
    o.prompt = PROMPT;
    static const char *const bad[] = {"--no-such", "x", NULL}, *const badval[] = {"--noise-dtype", "f8", NULL},
                             *const good[] = {"--noise-dtype", "bf16", NULL};
    o.arch_opts = bad;
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "--no-such is not an option of arch qwen_image21"));
    o.arch_opts = badval;
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "--noise-dtype wants f32 or bf16"));
    o.arch_opts = good;
    assert_int_equal(cq_image_check(m, &o), CQ_OK);
    cq_model_free(m);
    cq_session_opts so;
    memset(&so, 0xab, sizeof so);
    cq_session_opts_init(&so);
    assert_int_equal(so.max_tokens, 512);
    assert_int_equal(so.top_k, 20);
    assert_int_equal(so.enable_thinking, -1);
    assert_true(so.temperature == 0.7f && so.top_p == 0.8f && so.min_p == 0.0f);
    assert_false(so.greedy);
}

static void test_open_errors(void **state) {
    (void)state;
    cq_model *m = (cq_model *)(uintptr_t)1;
    assert_int_equal(cq_model_open(CQ_SOURCE_DIR "/no/such.cmf", NULL, &m), CQ_ERR_MISSING);
    assert_null(m);
    assert_int_equal(cq_model_open(NULL, NULL, &m), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_model_open_cmf(NULL, NULL, &m), CQ_ERR_INVALID_ARG);
    /* a container of neither kind: the message says what can be run */
    const char *path = tu_path(g_dir, "plain.cmf");
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    const char hdr[] =
        "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"mystery\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
        "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
        "\"rms_norm_eps\":1e-6}}";
    if (cq_cmf_writer_set_header(w, hdr, sizeof hdr - 1) != CQ_OK) fail_msg("header: %s", cq_last_error());
    const float v[2] = {1, 2};
    const uint64_t shape[1] = {2};
    assert_int_equal(cq_cmf_writer_add(w, "x", CQ_DTYPE_F32, 1, shape, v, sizeof v), CQ_OK);
    assert_int_equal(cq_cmf_writer_finish(w), CQ_OK);
    cq_cmf_writer_free(w);
    assert_int_equal(cq_model_open(path, NULL, &m), CQ_ERR_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(cq_last_error(), "qwen_image21"));
    assert_non_null(strstr(cq_last_error(), "qwen3"));
    assert_non_null(strstr(cq_last_error(), "mystery"));
    /* destructors take NULL, accessors answer */
    cq_model_free(NULL);
    cq_image_free(NULL);
    cq_session_free(NULL);
    assert_string_equal(cq_model_backend_name(NULL), "");
    int wd = -1;
    assert_null(cq_image_pixels(NULL, &wd, NULL, NULL));
    assert_int_equal(wd, 0);
}

static bool have_shapes(void) {
    FILE *f = fopen(SHAPES, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static void test_image_check(void **state) {
    (void)state;
    if (!have_shapes()) skip();
    cq_model *m;
    assert_int_equal(cq_model_open(SHAPES, NULL, &m), CQ_OK);
    assert_int_equal(cq_model_get_kind(m), CQ_MODEL_IMAGE);
    assert_string_equal(cq_model_arch(m), "qwen_image21");
    assert_string_equal(cq_model_backend_name(m), ""); /* nothing loaded by opening */
    assert_true(cq_model_load_seconds(m) == 0);
    cq_image_opts o = small_opts();
    assert_int_equal(cq_image_check(m, &o), CQ_OK);
    o.width = 48; /* not a multiple of 32 */
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_INVALID_ARG);
    o = small_opts();
    o.steps = 1;
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_INVALID_ARG);
    o = small_opts();
    o.prompt = NULL;
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_INVALID_ARG);
    /* a condition picture: this pack has no vision tower, said before any weight is read */
    o = small_opts();
    static const char *const pics[] = {CQ_SOURCE_DIR "/tests/golden/pipeline_qi21_cond/cond_rgb.png"};
    o.images = pics;
    o.n_images = 1;
    assert_int_equal(cq_image_check(m, &o), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "has no vision tower"));
    o = small_opts();
    o.prompt = NULL;
    cq_image *img = (cq_image *)(uintptr_t)1;
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_ERR_INVALID_ARG);
    assert_null(img);
    assert_string_equal(cq_model_backend_name(m), ""); /* a refused request reads no weight */
    cq_session_opts so;
    cq_session_opts_init(&so);
    cq_session *s = NULL;
    assert_int_equal(cq_session_open(m, &so, &s), CQ_ERR_INVALID_ARG);
    assert_null(s);
    cq_model_free(m);
}

typedef struct trace {
    int calls[CQ_IMAGE_PHASE_DONE + 1];
    int order[64], n; /* phase * 100 + step */
    int stop_at;      /* return 1 after this step (0: never) */
} trace;

static int record(cq_image_phase phase, int step, int n_steps, void *user) {
    trace *t = user;
    assert_int_equal(n_steps, STEPS);
    t->calls[phase]++;
    if (t->n < 64) t->order[t->n++] = (int)phase * 100 + step;
    return t->stop_at && phase == CQ_IMAGE_PHASE_STEPS && step == t->stop_at;
}

static void test_image_matches_pipeline(void **state) {
    (void)state;
    if (!have_shapes()) skip();
    /* the pipeline itself, as the API's callers would otherwise drive it */
    cq_cmf *cmf;
    cq_backend *be;
    cq_qi21_pipe *pipe;
    assert_int_equal(cq_cmf_open(SHAPES, &cmf), CQ_OK);
    assert_int_equal(cq_backend_create("cpu", 0, &be), CQ_OK);
    assert_int_equal(cq_qi21_pipe_load(cmf, be, &pipe), CQ_OK);
    cq_qi21_gen_opts g = {.prompt = PROMPT, .width = SIDE, .height = SIDE, .steps = STEPS, .seed = 5, .guidance = 1};
    cq_qi21_result r;
    assert_int_equal(cq_qi21_pipe_generate(pipe, &g, &r), CQ_OK);
    cq_image8 want;
    assert_int_equal(cq_png_from_planar(r.image, r.channels, r.width, r.height, 3, &want), CQ_OK);

    cq_model *m;
    const cq_model_opts mo = {.backend = "cpu"};
    assert_int_equal(cq_model_open(SHAPES, &mo, &m), CQ_OK);
    trace t = {0};
    cq_image_opts o = small_opts();
    o.progress = record;
    o.user = &t;
    cq_image *img;
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_OK);
    assert_non_null(strstr(cq_model_backend_name(m), "cpu"));
    int w, h, c;
    const uint8_t *px = cq_image_pixels(img, &w, &h, &c);
    assert_int_equal(w, SIDE);
    assert_int_equal(h, SIDE);
    assert_int_equal(c, 3);
    assert_memory_equal(px, want.pixels, (size_t)SIDE * SIDE * 3);
    /* phases in order, one call per step */
    const int order[] = {0, 100, 200, 201, 202, 203, 204, 300, 400};
    assert_int_equal(t.n, (int)CQ_ARRAY_LEN(order));
    assert_memory_equal(t.order, order, sizeof order);
    const cq_image_timings tm = cq_image_get_timings(img);
    assert_true(tm.load > 0 && tm.steps > 0 && tm.decode > 0 && tm.text > 0 && tm.prefill > 0);
    assert_true(cq_model_load_seconds(m) == tm.load);

    /* the PNG holds those pixels and the settings */
    const char *png = tu_path(g_dir, "api.png");
    double secs = -1;
    assert_int_equal(cq_image_write_png(img, png, &secs), CQ_OK);
    assert_true(secs >= 0);
    cq_image8 back;
    assert_int_equal(cq_png_read(png, false, &back), CQ_OK);
    assert_int_equal(back.width, SIDE);
    assert_int_equal(back.channels, 3);
    assert_memory_equal(back.pixels, want.pixels, (size_t)SIDE * SIDE * 3);
    assert_string_equal(cq_image8_text(&back, "prompt"), PROMPT);
    assert_string_equal(cq_image8_text(&back, "seed"), "5");
    assert_string_equal(cq_image8_text(&back, "steps"), "4");
    assert_string_equal(cq_image8_text(&back, "size"), "64x64");
    assert_string_equal(cq_image8_text(&back, "model"), "shapes.cmf");
    cq_image8_free(&back);
    cq_image_free(img);

    /* a second picture with the weights already bound: no load time, alpha kept */
    o.rgba = true;
    o.progress = NULL;
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_OK);
    cq_image_pixels(img, NULL, NULL, &c);
    assert_int_equal(c, 4);
    assert_true(cq_image_get_timings(img).load == 0);
    cq_image_free(img);

    cq_model_free(m);
    cq_image8_free(&want);
    cq_qi21_result_free(&r);
    cq_qi21_pipe_free(pipe);
    cq_backend_free(be);
    cq_cmf_close(cmf);
}

static void test_image_stop_and_cancel(void **state) {
    (void)state;
    if (!have_shapes()) skip();
    cq_model *m;
    assert_int_equal(cq_model_open(SHAPES, NULL, &m), CQ_OK);
    assert_int_equal(cq_model_load(m), CQ_OK);
    assert_int_equal(cq_model_load(m), CQ_OK); /* a second load does nothing */
    trace t = {.stop_at = 2};
    cq_image_opts o = small_opts();
    o.progress = record;
    o.user = &t;
    cq_image *img = (cq_image *)(uintptr_t)1;
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_ERR_INTERRUPTED);
    assert_null(img);
    assert_int_equal(t.calls[CQ_IMAGE_PHASE_STEPS], 3); /* the phase's start, steps 1 and 2 */
    assert_int_equal(t.calls[CQ_IMAGE_PHASE_DECODE], 0);
    /* the process-wide flag stops it too */
    cq_cancel_request();
    o.progress = NULL;
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_ERR_INTERRUPTED);
    assert_null(img);
    cq_cancel_clear();
    assert_int_equal(cq_image_generate(m, &o, &img), CQ_OK);
    cq_image_free(img);
    cq_model_free(m);
}

/* ---- chat ---------------------------------------------------------------- */
typedef struct sink {
    int32_t ids[256];
    int n;
    char text[4096];
    size_t len;
    int stop_after;
} sink;

static int collect_pub(int32_t id, const char *text, size_t len, void *user) {
    sink *k = user;
    if (k->n < 256) k->ids[k->n++] = id;
    if (k->len + len < sizeof k->text) {
        memcpy(k->text + k->len, text, len);
        k->len += len;
        k->text[k->len] = 0;
    }
    return k->stop_after && k->n >= k->stop_after;
}

static int collect_int(void *user, int32_t id, const char *text, size_t len) {
    return collect_pub(id, text, len, user);
}

/* Two turns through the chat pipeline directly: what the session must equal. */
static void internal_turns(const cq_sampler_params *sp, const char *system, const char *m1, const char *m2, int max,
                           sink *k1, sink *k2) {
    cq_cmf *cmf;
    cq_backend *be;
    cq_qwen3 *lm;
    cq_causal_lm clm;
    cq_chat *chat;
    cq_sampler *smp;
    assert_int_equal(cq_cmf_open(g_lm, &cmf), CQ_OK);
    assert_int_equal(cq_backend_create("cpu", 0, &be), CQ_OK);
    assert_int_equal(cq_qwen3_load(cmf, "", be, &lm), CQ_OK);
    const cq_chat_opts co = {.enable_thinking = 0};
    clm = cq_qwen3_causal_lm(lm);
    assert_int_equal(cq_chat_create(cmf, &clm, &co, &chat), CQ_OK);
    assert_int_equal(cq_sampler_create(cq_qwen3_get_config(lm)->vocab_size, sp, &smp), CQ_OK);
    assert_int_equal(cq_chat_add_message(chat, "system", system), CQ_OK);
    cq_chat_stats st;
    assert_int_equal(cq_chat_turn(chat, m1, smp, max, collect_int, k1, &st), CQ_OK);
    assert_int_equal(cq_chat_turn(chat, m2, smp, max, collect_int, k2, &st), CQ_OK);
    cq_sampler_free(smp);
    cq_chat_free(chat);
    cq_qwen3_free(lm);
    cq_backend_free(be);
    cq_cmf_close(cmf);
}

static void session_turns(const cq_session_opts *so, const char *m1, const char *m2, sink *k1, sink *k2,
                          cq_turn_stats *st2) {
    cq_model *m;
    assert_int_equal(cq_model_open(g_lm, NULL, &m), CQ_OK);
    assert_int_equal(cq_model_get_kind(m), CQ_MODEL_TEXT);
    assert_string_equal(cq_model_arch(m), "qwen3");
    cq_image_opts io = small_opts();
    cq_image *img = NULL;
    assert_int_equal(cq_image_generate(m, &io, &img), CQ_ERR_INVALID_ARG);
    cq_session *s, *s2 = NULL;
    assert_int_equal(cq_session_open(m, so, &s), CQ_OK);
    assert_int_equal(cq_session_open(m, so, &s2), CQ_ERR_INVALID_ARG); /* one session per model */
    assert_null(s2);
    cq_turn_stats st;
    assert_int_equal(cq_session_turn(s, m1, collect_pub, k1, &st), CQ_OK);
    assert_int_equal(st.generated + (st.stop_id >= 0 ? 1 : 0), k1->n);
    assert_int_equal(cq_session_turn(s, m2, collect_pub, k2, st2), CQ_OK);
    assert_true(st2->reused_tokens > 0); /* the cache kept the first turn */
    cq_session_free(s);
    /* a session can be opened again once the first is freed */
    assert_int_equal(cq_session_open(m, so, &s), CQ_OK);
    cq_session_free(s);
    cq_model_free(m);
}

static void test_session_matches_chat(void **state) {
    (void)state;
    const char *sys = "You are a helpful assistant.", *m1 = "Hello! How are you today?", *m2 = "Tell me more.";
    for (int mode = 0; mode < 2; mode++) {
        const cq_sampler_params sp = mode == 0 ? (cq_sampler_params){.greedy = true}
                                               : (cq_sampler_params){.temperature = 0.9f, .top_k = 7, .top_p = 0.95f,
                                                                     .min_p = 0.01f, .seed = 1234};
        sink a1 = {0}, a2 = {0}, b1 = {0}, b2 = {0};
        internal_turns(&sp, sys, m1, m2, 12, &a1, &a2);
        cq_session_opts so;
        cq_session_opts_init(&so);
        so.enable_thinking = 0;
        so.system = sys;
        so.max_tokens = 12;
        so.greedy = sp.greedy;
        so.temperature = sp.temperature;
        so.top_k = sp.top_k;
        so.top_p = sp.top_p;
        so.min_p = sp.min_p;
        so.seed = sp.seed;
        cq_turn_stats st2;
        session_turns(&so, m1, m2, &b1, &b2, &st2);
        assert_true(a1.n > 0 && a2.n > 0);
        assert_int_equal(b1.n, a1.n);
        assert_memory_equal(b1.ids, a1.ids, sizeof(int32_t) * (size_t)a1.n);
        assert_int_equal(b2.n, a2.n);
        assert_memory_equal(b2.ids, a2.ids, sizeof(int32_t) * (size_t)a2.n);
        assert_string_equal(b1.text, a1.text);
    }
}

static void test_session_stop_and_errors(void **state) {
    (void)state;
    cq_model *m;
    assert_int_equal(cq_model_open(g_lm, NULL, &m), CQ_OK);
    cq_session_opts so;
    cq_session_opts_init(&so);
    so.greedy = true;
    so.max_tokens = 0;
    cq_session *s = NULL;
    assert_int_equal(cq_session_open(m, &so, &s), CQ_ERR_INVALID_ARG);
    so.max_tokens = 50;
    so.temperature = 0;
    so.greedy = false; /* temperature 0 without greedy: the sampler refuses it */
    assert_int_equal(cq_session_open(m, &so, &s), CQ_ERR_INVALID_ARG);
    assert_null(s);
    so.greedy = true;
    so.raw = true; /* plain continuation: the tiny model's chat replies stop after a token or two */
    assert_int_equal(cq_session_open(m, &so, &s), CQ_OK);
    sink k = {.stop_after = 3};
    cq_turn_stats st;
    assert_int_equal(cq_session_turn(s, "Once upon a time", collect_pub, &k, &st), CQ_OK);
    assert_int_equal(st.stop_id, -1);
    assert_int_equal(k.n, 3); /* the callback ended the reply */
    assert_int_equal(st.generated, 3);
    assert_int_equal(cq_session_turn(s, NULL, NULL, NULL, NULL), CQ_ERR_INVALID_ARG);
    cq_session_free(s);
    so.raw = false;
    assert_int_equal(cq_session_open(m, &so, &s), CQ_OK);
    assert_int_equal(cq_session_add_message(s, "user", "Hi."), CQ_OK);
    assert_int_equal(cq_session_add_message(s, "assistant", "Hello."), CQ_OK);
    assert_int_equal(cq_session_turn(s, "Again.", NULL, NULL, NULL), CQ_OK); /* no callback, no stats */
    cq_session_free(s);
    cq_model_free(m);
}

static int setup(void **state) {
    (void)state;
    char src[1024];
    snprintf(src, sizeof src, "%s/tests/golden/qwen3/qwen3_a", CQ_SOURCE_DIR);
    const char *d = tu_tmpdir("api");
    if (!d) return -1;
    snprintf(g_dir, sizeof g_dir, "%s", d);
    snprintf(g_lm, sizeof g_lm, "%s", tu_path(g_dir, "qwen3_a.cmf"));
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(src, g_lm, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) fprintf(stderr, "convert: %s\n", cq_last_error());
    return s == CQ_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_image_check),
        cmocka_unit_test(test_image_matches_pipeline),
        cmocka_unit_test(test_image_stop_and_cancel),
        cmocka_unit_test(test_session_matches_chat),
        cmocka_unit_test(test_session_stop_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
