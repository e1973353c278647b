/*
 * test_model_config.c — the models' one config convention
 * (models/kit/config.h): defaults for absent and null members, required
 * members, ranges and types with messages naming the model and the member's
 * path, and the three architectures' readers built on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "models/kit/config.h"
#include "models/tables.h"
#include "testutil.h"

static const char k_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
    "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
    "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
    "\"rms_norm_eps\":1e-6}}";

static void expect_msg(cq_status got, cq_status want, const char *msg) {
    assert_int_equal(got, want);
    if (msg && !strstr(cq_last_error(), msg)) fail_msg("'%s' is not in: %s", msg, cq_last_error());
}

static void test_members(void **st) {
    (void)st;
    cJSON *o = cJSON_Parse("{\"a\": 3, \"n\": null, \"f\": 2.5, \"s\": \"x\", \"b\": true, \"arr\": [1, 2, 3],"
                           "\"fl\": [0.5, -1]}");
    assert_non_null(o);
    const cq_cfg g = {o, "m", "text_config."};
    int v = -1;
    assert_int_equal(cq_cfg_int(&g, "a", 7, 1, 10, &v), CQ_OK);
    assert_int_equal(v, 3);
    assert_int_equal(cq_cfg_int(&g, "n", 7, 1, 10, &v), CQ_OK); /* null: the default */
    assert_int_equal(v, 7);
    assert_int_equal(cq_cfg_int(&g, "absent", 7, 1, 10, &v), CQ_OK);
    assert_int_equal(v, 7);
    expect_msg(cq_cfg_int(&g, "absent", -1, 1, 10, &v), CQ_ERR_PARSE, "m: config text_config.absent is missing");
    expect_msg(cq_cfg_int(&g, "a", 7, 4, 10, &v), CQ_ERR_PARSE, "m: config text_config.a must be an integer in [4, 10]");
    expect_msg(cq_cfg_int(&g, "f", 7, 1, 10, &v), CQ_ERR_PARSE, "f must be an integer");
    expect_msg(cq_cfg_int(&g, "s", 7, 1, 10, &v), CQ_ERR_PARSE, "s must be an integer");
    double d = 0;
    assert_int_equal(cq_cfg_num(&g, "f", 1.0, 0.0, true, 3.0, &d), CQ_OK);
    assert_true(d == 2.5);
    assert_int_equal(cq_cfg_num(&g, "absent", 1.25, 0.0, true, 3.0, &d), CQ_OK);
    assert_true(d == 1.25);
    expect_msg(cq_cfg_num(&g, "f", 1.0, 0.0, true, 2.0, &d), CQ_ERR_PARSE, "f must be a number in (0, 2]");
    expect_msg(cq_cfg_num(&g, "s", 1.0, 0.0, false, 2.0, &d), CQ_ERR_PARSE, "s must be a number in [0, 2]");
    bool b = false;
    assert_int_equal(cq_cfg_bool(&g, "b", false, &b), CQ_OK);
    assert_true(b);
    assert_int_equal(cq_cfg_bool(&g, "n", false, &b), CQ_OK);
    assert_false(b);
    expect_msg(cq_cfg_bool(&g, "a", false, &b), CQ_ERR_PARSE, "a must be true or false");
    int arr[4] = {9, 9, 9, 9}, n = -1;
    assert_int_equal(cq_cfg_ints(&g, "arr", 1, 4, 0, 5, arr, &n), CQ_OK);
    assert_int_equal(n, 3);
    assert_int_equal(arr[2], 3);
    assert_int_equal(arr[3], 9);
    assert_int_equal(cq_cfg_ints(&g, "absent", 1, 4, 0, 5, arr, &n), CQ_OK);
    assert_int_equal(n, 0);
    expect_msg(cq_cfg_ints(&g, "arr", 2, 2, 0, 5, arr, &n), CQ_ERR_PARSE, "arr must be an array of 2 integers");
    expect_msg(cq_cfg_ints(&g, "arr", 1, 4, 0, 2, arr, &n), CQ_ERR_PARSE, "arr[2] must be an integer in [0, 2]");
    float fl[2];
    assert_int_equal(cq_cfg_floats(&g, "fl", 2, fl), CQ_OK);
    assert_true(fl[0] == 0.5f && fl[1] == -1.0f);
    expect_msg(cq_cfg_floats(&g, "fl", 3, fl), CQ_ERR_PARSE, "fl must be an array of 3 numbers");
    expect_msg(cq_cfg_floats(&g, "absent", 3, fl), CQ_ERR_PARSE, "absent must be an array of 3 numbers");
    cJSON_Delete(o);
}

/* A pack holding `name` = text (u8, or f32 bytes when as_f32). */
static cq_cmf *pack(const char *leaf, const char *name, const char *text, bool as_f32) {
    const char *path = tu_path(tu_tmpdir("model_config"), leaf);
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, k_header, strlen(k_header)), CQ_OK);
    uint64_t len = strlen(text), shape[1] = {as_f32 ? 1 : len};
    float one = 1.0f;
    assert_int_equal(cq_cmf_writer_add(w, name, as_f32 ? CQ_DTYPE_F32 : CQ_DTYPE_U8, 1, shape,
                                       as_f32 ? (const void *)&one : text, as_f32 ? 4 : len),
                     CQ_OK);
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("finish: %s", cq_last_error());
    cq_cmf_writer_free(w);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    return cmf;
}

static void test_open(void **st) {
    (void)st;
    cJSON *j = NULL;
    cq_cmf *cmf = pack("open.cmf", "x.config_json", "{\"k\": 1}", false);
    assert_int_equal(cq_cfg_open(cmf, "x.", "m", &j), CQ_OK);
    assert_true(cJSON_IsObject(j));
    cJSON_Delete(j);
    expect_msg(cq_cfg_open(cmf, "y.", "m", &j), CQ_ERR_MISSING, "m: 'y.config_json' is missing");
    assert_null(j);
    cq_cmf_close(cmf);
    cmf = pack("array.cmf", "config_json", "[1, 2]", false);
    expect_msg(cq_cfg_open(cmf, "", "m", &j), CQ_ERR_PARSE, "'config_json' is not a JSON object");
    cq_cmf_close(cmf);
    cmf = pack("f32.cmf", "config_json", "{}", true);
    expect_msg(cq_cfg_open(cmf, "", "m", &j), CQ_ERR_DTYPE, "not a u8 tensor");
    cq_cmf_close(cmf);
}

static cq_status qi21_cfg(const char *json, cq_qi21_config *c) {
    cq_cmf *cmf = pack("qi21.cmf", "dit.config_json", json, false);
    cq_status s = cq_qi21_parse_config(cmf, "dit.", c);
    cq_cmf_close(cmf);
    return s;
}

static void test_qi21_config(void **st) {
    (void)st;
    cq_qi21_config c;
    /* an empty config is the released model (diffusers' defaults) */
    assert_int_equal(qi21_cfg("{}", &c), CQ_OK);
    assert_int_equal(c.num_layers, 32);
    assert_int_equal(c.inner, 4096);
    assert_int_equal(c.mlp_hidden, 12288);
    assert_int_equal(c.context_in_dim, 4096);
    assert_int_equal(c.out_channels, 64);
    assert_int_equal(c.axes[1], 56);
    assert_true(c.causal_condition);
    assert_true(c.eps == 1e-6f);
    assert_int_equal(qi21_cfg("{\"in_channels\": 16, \"out_channels\": null, \"causal_condition\": false, "
                              "\"num_attention_heads\": 2, \"attention_head_dim\": 8, \"axes_dims_rope\": [2, 2, 4], "
                              "\"eps\": 1e-5}",
                              &c),
                     CQ_OK);
    assert_int_equal(c.out_channels, 16); /* `out_channels or in_channels` */
    assert_false(c.causal_condition);
    assert_int_equal(c.inner, 16);
    assert_true(c.eps == 1e-5f);
    expect_msg(qi21_cfg("{\"num_layers\": 0}", &c), CQ_ERR_PARSE, "qi21: config num_layers must be an integer in [1, 4096]");
    expect_msg(qi21_cfg("{\"mlp_ratio\": 2.5}", &c), CQ_ERR_PARSE, "qi21: config mlp_ratio must be an integer");
    expect_msg(qi21_cfg("{\"eps\": \"small\"}", &c), CQ_ERR_PARSE, "qi21: config eps must be a number in [0, 1]");
    expect_msg(qi21_cfg("{\"causal_condition\": 1}", &c), CQ_ERR_PARSE, "causal_condition must be true or false");
    expect_msg(qi21_cfg("{\"axes_dims_rope\": [16, 56]}", &c), CQ_ERR_PARSE, "axes_dims_rope must be an array of 3");
    expect_msg(qi21_cfg("{\"axes_dims_rope\": [16, 56, 58]}", &c), CQ_ERR_PARSE, "sum 130 != attention_head_dim 128");
    expect_msg(qi21_cfg("{\"patch_size\": 2}", &c), CQ_ERR_UNSUPPORTED, "patch_size 2");
    expect_msg(qi21_cfg("{\"_class_name\": \"FluxTransformer2DModel\"}", &c), CQ_ERR_UNSUPPORTED,
               "not QwenImage21Transformer2DModel");
}

static void test_qwen3_and_vae_config(void **st) {
    (void)st;
    cq_qwen3_config q;
    cq_cmf *cmf = pack("te.cmf", "te.config_json",
                       "{\"model_type\": \"qwen3_vl\", \"text_config\": {\"vocab_size\": 20, \"hidden_size\": 0}}", false);
    expect_msg(cq_qwen3_parse_config(cmf, "te.", &q), CQ_ERR_PARSE,
               "qwen3: config text_config.hidden_size must be an integer in [1, 65536]");
    cq_cmf_close(cmf);
    cmf = pack("te2.cmf", "config_json", "{\"vocab_size\": 20}", false);
    expect_msg(cq_qwen3_parse_config(cmf, "", &q), CQ_ERR_PARSE, "qwen3: config hidden_size is missing");
    cq_cmf_close(cmf);
    cq_qi21_vae_geometry g;
    cmf = pack("vae.cmf", "vae.config_json", "{\"dim_mult\": [1, 2], \"temperal_downsample\": [false], \"base_dim\": -4}",
               false);
    expect_msg(cq_qi21_vae_parse_geometry(cmf, "vae.", &g), CQ_ERR_PARSE, "vae: config base_dim must be an integer in [1, ");
    cq_cmf_close(cmf);
    cmf = pack("vae2.cmf", "vae.config_json", "{\"dim_mult\": [1, 2, 4], \"temperal_downsample\": [false, true]}", false);
    assert_int_equal(cq_qi21_vae_parse_geometry(cmf, "vae.", &g), CQ_OK);
    assert_int_equal(g.base_dim, 96);
    assert_int_equal(g.decoder_base_dim, 96);
    assert_int_equal(g.z_dim, 64);
    assert_int_equal(g.n_mult, 3);
    assert_int_equal(g.mult[2], 4);
    assert_true(g.tdown[1]);
    cq_cmf_close(cmf);
    cmf = pack("vae3.cmf", "vae.config_json", "{\"temperal_downsample\": []}", false);
    expect_msg(cq_qi21_vae_parse_geometry(cmf, "vae.", &g), CQ_ERR_PARSE, "vae: config dim_mult is missing");
    cq_cmf_close(cmf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members),
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_qi21_config),
        cmocka_unit_test(test_qwen3_and_vae_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
