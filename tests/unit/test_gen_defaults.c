/*
 * test_gen_defaults.c — a pack's generation defaults (format/gen_defaults.h):
 * the header object with each bound on both sides, the KEY=VALUE settings of
 * convert's --default, merging, writing back, and a pack whose header holds
 * a bad value refusing to open with the key named.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "cmf_testfile.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"
#include "testutil.h"

static cq_status parse(const char *json, cq_gen_defaults *d) { return cq_gen_defaults_parse(json, strlen(json), d); }

static void test_json(void **state) {
    (void)state;
    cq_gen_defaults d;
    assert_int_equal(parse("{\"width\": 1024, \"height\": 512, \"steps\": 8, \"guidance\": 0, \"shift\": 3,"
                           " \"negative_prompt\": \"blurry\", \"later_key\": [1]}",
                           &d),
                     CQ_OK);
    assert_true(d.has_size && d.width == 1024 && d.height == 512);
    assert_true(d.has_steps && d.steps == 8 && d.has_guidance && d.guidance == 0.0);
    assert_true(d.has_shift && d.shift == 3.0 && d.has_negative && strcmp(d.negative, "blurry") == 0);
    char buf[160];
    assert_string_equal(cq_gen_defaults_describe(&d, buf, sizeof buf),
                        "1024x512, 8 steps, guidance 0, shift 3, negative prompt \"blurry\"");
    cq_gen_defaults_free(&d);
    /* nothing set: an empty object, null */
    assert_int_equal(parse("{}", &d), CQ_OK);
    assert_false(d.has_size || d.has_steps || d.has_guidance || d.has_shift || d.has_negative);
    assert_int_equal(cq_gen_defaults_from_json(NULL, &d), CQ_OK);
    assert_false(d.has_size);
    /* the bounds, each just inside and just outside */
    static const struct {
        const char *json;
        cq_status want;
        const char *says;
    } cases[] = {
        {"{\"width\": 16, \"height\": 16384}", CQ_OK, NULL},
        {"{\"width\": 0, \"height\": 16}", CQ_ERR_PARSE, "width"},
        {"{\"width\": 16400, \"height\": 16}", CQ_ERR_PARSE, "width"},
        {"{\"width\": 24, \"height\": 16}", CQ_ERR_PARSE, "multiple of 16"},
        {"{\"width\": 32.5, \"height\": 16}", CQ_ERR_PARSE, "width"},
        {"{\"width\": 32}", CQ_ERR_PARSE, "without height"},
        {"{\"height\": 32}", CQ_ERR_PARSE, "without width"},
        {"{\"steps\": 1}", CQ_OK, NULL},
        {"{\"steps\": 1000}", CQ_OK, NULL},
        {"{\"steps\": 0}", CQ_ERR_PARSE, "steps"},
        {"{\"steps\": 1001}", CQ_ERR_PARSE, "steps"},
        {"{\"steps\": \"8\"}", CQ_ERR_PARSE, "finite number"},
        {"{\"guidance\": 100}", CQ_OK, NULL},
        {"{\"guidance\": -0.5}", CQ_ERR_PARSE, "guidance"},
        {"{\"guidance\": 100.5}", CQ_ERR_PARSE, "guidance"},
        {"{\"shift\": 0}", CQ_ERR_PARSE, "shift"},
        {"{\"shift\": 1e300}", CQ_ERR_PARSE, "shift"},
        {"{\"shift\": 0.001}", CQ_OK, NULL},
        {"{\"negative_prompt\": 3}", CQ_ERR_PARSE, "negative_prompt"},
        {"{\"frames\": 1}", CQ_OK, NULL},
        {"{\"frames\": 99999}", CQ_OK, NULL},
        {"{\"frames\": 0}", CQ_ERR_PARSE, "frames"},
        {"{\"frames\": 100000}", CQ_ERR_PARSE, "frames"},
        {"{\"frames\": 12.5}", CQ_ERR_PARSE, "frames"},
        {"{\"fps\": 240}", CQ_OK, NULL},
        {"{\"fps\": 23.976}", CQ_OK, NULL},
        {"{\"fps\": 0}", CQ_ERR_PARSE, "fps"},
        {"{\"fps\": 240.5}", CQ_ERR_PARSE, "fps"},
        {"{\"frames\": 9, \"frames\": 17}", CQ_ERR_PARSE, "twice"},
        {"{\"steps\": 8, \"steps\": 9}", CQ_ERR_PARSE, "twice"},
        {"[1]", CQ_ERR_PARSE, "object"},
        {"{", CQ_ERR_PARSE, "invalid JSON"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(cases); i++) {
        cq_status s = parse(cases[i].json, &d);
        if (s != cases[i].want) fail_msg("%s: status %d, want %d (%s)", cases[i].json, s, cases[i].want, cq_last_error());
        if (cases[i].says && !strstr(cq_last_error(), cases[i].says))
            fail_msg("%s: message '%s' does not say '%s'", cases[i].json, cq_last_error(), cases[i].says);
        cq_gen_defaults_free(&d);
    }
    /* a negative prompt that is not UTF-8 */
    assert_int_equal(parse("{\"negative_prompt\": \"\xff\"}", &d), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "UTF-8"));
}

static void test_settings(void **state) {
    (void)state;
    cq_gen_defaults d = {0}, o = {0};
    assert_int_equal(cq_gen_defaults_set(&d, "size=256x256"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "steps=20"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "guidance=4"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "shift=6"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "negative=low quality, a=b"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "frames=121"), CQ_OK);
    assert_int_equal(cq_gen_defaults_set(&d, "fps=24"), CQ_OK);
    assert_true(d.has_frames && d.frames == 121 && d.has_fps && d.fps == 24.0);
    assert_true(d.width == 256 && d.height == 256 && d.steps == 20 && d.guidance == 4.0 && d.shift == 6.0);
    assert_string_equal(d.negative, "low quality, a=b");
    static const char *const bad[] = {"steps", "steps=", "steps=0", "steps=2.5", "steps=x", "size=256",
                                      "size=256x", "size=250x256", "size=x256", "guidance=-1", "guidance=nan",
                                      "shift=0", "shift=inf", "seed=3", "=3", "frames=0", "frames=1.5", "fps=0",
                                      "fps=300"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(bad); i++) {
        if (cq_gen_defaults_set(&o, bad[i]) != CQ_ERR_INVALID_ARG) fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(cq_last_error(), "--default"));
    }
    assert_false(o.has_size || o.has_steps || o.has_guidance || o.has_shift || o.has_negative || o.has_frames ||
                 o.has_fps);
    /* merge: what the override sets wins, the rest stays */
    assert_int_equal(cq_gen_defaults_set(&o, "steps=8"), CQ_OK);
    assert_int_equal(cq_gen_defaults_merge(&d, &o), CQ_OK);
    assert_true(d.steps == 8 && d.width == 256 && d.guidance == 4.0);
    /* written into a header and read back */
    cJSON *h = cJSON_CreateObject();
    assert_int_equal(cq_gen_defaults_to_header(&d, h), CQ_OK);
    cq_gen_defaults back;
    assert_int_equal(cq_gen_defaults_from_json(cJSON_GetObjectItemCaseSensitive(h, CQ_GEN_DEFAULTS_KEY), &back), CQ_OK);
    assert_true(back.has_size && back.width == 256 && back.steps == 8 && back.guidance == 4.0 && back.shift == 6.0);
    assert_true(back.has_frames && back.frames == 121 && back.has_fps && back.fps == 24.0);
    char buf[200];
    assert_string_equal(cq_gen_defaults_describe(&back, buf, sizeof buf),
                        "256x256, 8 steps, guidance 4, shift 6, 121 frames, 24 fps, negative prompt \"low quality, a=b\"");
    assert_string_equal(back.negative, "low quality, a=b");
    cq_gen_defaults_free(&back);
    /* nothing set removes the object */
    cq_gen_defaults none = {0};
    assert_int_equal(cq_gen_defaults_to_header(&none, h), CQ_OK);
    assert_null(cJSON_GetObjectItemCaseSensitive(h, CQ_GEN_DEFAULTS_KEY));
    cJSON_Delete(h);
    cq_gen_defaults_free(&d);
    cq_gen_defaults_free(&o);
}

/* A pack with the object in its header: opens and reads back; a bad bound is refused at open. */
static void test_in_pack(void **state) {
    (void)state;
    static const char base[] =
        "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
        "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
        "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
        "\"rms_norm_eps\":1e-6},\"generation_defaults\":%s}";
    char hdr[1024];
    snprintf(hdr, sizeof hdr, base, "{\"width\":256,\"height\":256,\"steps\":20}");
    tf_file f = {.header = hdr};
    size_t len;
    uint8_t *buf = tf_assemble(&f, &len);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open_memory(buf, len, &cmf), CQ_OK);
    cq_gen_defaults d;
    assert_int_equal(cq_cmf_gen_defaults(cmf, &d), CQ_OK);
    assert_true(d.has_size && d.width == 256 && d.has_steps && d.steps == 20 && !d.has_guidance);
    cq_gen_defaults_free(&d);
    cq_cmf_close(cmf);
    free(buf);
    snprintf(hdr, sizeof hdr, base, "{\"steps\":5000}");
    buf = tf_assemble(&f, &len);
    assert_int_equal(cq_cmf_open_memory(buf, len, &cmf), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "generation_defaults.steps"));
    free(buf);
    /* a pack without the object has none */
    tf_file plain = {0};
    buf = tf_assemble(&plain, &len);
    assert_int_equal(cq_cmf_open_memory(buf, len, &cmf), CQ_OK);
    assert_int_equal(cq_cmf_gen_defaults(cmf, &d), CQ_OK);
    assert_false(d.has_size || d.has_steps);
    cq_cmf_close(cmf);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_in_pack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
