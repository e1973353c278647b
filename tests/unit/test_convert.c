/* test_convert.c — `convert` end to end on a random diffusers-style tree
 * (sharded transformer with an index, text encoder, VAE with conv kernels,
 * tokenizer, scheduler), an LLM folder and a lone component: every codec ->
 * open -> verify -> dequantized values within the codec's bound against the
 * source, names, prefixes, configs, tokenizer, chat bundle and header arch. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/codec.h"
#include "format/convert.h"
#include "format/convert_impl.h"
#include "format/safetensors.h"
#include "testutil.h"

#ifdef CQ_HAVE_ZLIB
#include <zlib.h>
#endif

/* ---- building the source tree ------------------------------------------- */

typedef struct src_tensor {
    const char *comp;  /* folder */
    const char *name;
    cq_st_dtype dtype;
    int ndim;
    uint64_t shape[4];
    int shard;         /* transformer only: 0 or 1 */
} src_tensor;

static const src_tensor k_tensors[] = {
    {"transformer", "img_in.weight", CQ_ST_F32, 2, {64, 64}, 0},
    {"transformer", "img_in.bias", CQ_ST_F32, 1, {64}, 0},
    {"transformer", "blocks.0.attn.to_q.weight", CQ_ST_BF16, 2, {64, 64}, 0},
    {"transformer", "blocks.0.attn.norm_q.weight", CQ_ST_BF16, 1, {16}, 0},
    {"transformer", "blocks.0.mlp.w1.weight", CQ_ST_F16, 2, {128, 64}, 1},
    {"transformer", "blocks.1.odd.weight", CQ_ST_F32, 2, {16, 40}, 1}, /* cols % 32 != 0 */
    {"transformer", "proj_out.weight", CQ_ST_F32, 2, {12, 64}, 1},
    {"text_encoder", "model.embed_tokens.weight", CQ_ST_BF16, 2, {100, 32}, 0},
    {"text_encoder", "model.layers.0.mlp.down_proj.weight", CQ_ST_F32, 2, {32, 64}, 0},
    {"text_encoder", "model.norm.weight", CQ_ST_BF16, 1, {32}, 0},
    {"vae", "decoder.conv_in.weight", CQ_ST_F32, 4, {8, 4, 3, 3}, 0},
    {"vae", "decoder.conv_in.bias", CQ_ST_F32, 1, {8}, 0},
    {"vae", "decoder.norm.gamma", CQ_ST_F32, 3, {8, 1, 1}, 0},
    {"vae", "quant.proj.weight", CQ_ST_F32, 2, {16, 64}, 0},
};
#define N_T (sizeof k_tensors / sizeof k_tensors[0])

static float *g_vals[N_T]; /* exact source values (after the source dtype's rounding) */

static const char *k_dit_config =
    "{\"_class_name\":\"QwenImage21Transformer2DModel\",\"num_layers\":2,\"num_attention_heads\":4,"
    "\"attention_head_dim\":16,\"mlp_ratio\":2.0,\"in_channels\":64,\"out_channels\":12}";
static const char *k_te_config =
    "{\"model_type\":\"qwen3_vl\",\"text_config\":{\"vocab_size\":100,\"max_position_embeddings\":512,"
    "\"hidden_size\":32}}";
static const char *k_tokenizer =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":5,\"content\":\"<|im_end|>\"},"
    "{\"id\":6,\"content\":\"<|endoftext|>\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1}}}";
static const char *k_jinja = "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}";

static void put(const char *root, const char *rel, const char *text) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    assert_int_equal(tu_system("mkdir -p '%s'", p), 0);
    *slash = '/';
    assert_int_equal(tu_write_file(p, text, strlen(text)), 0);
}

/* Random values, rounded through the source dtype so the pack can be compared
 * exactly; a few tiny and large magnitudes mixed in. */
static void make_values(tu_rng *r, int i, uint64_t n) {
    float *v = malloc(n * sizeof *v);
    tu_fill_normal(r, v, n, 0.05f);
    if (n > 8) v[3] = 1.5f, v[n - 2] = -0.75f;
    for (uint64_t k = 0; k < n; k++) {
        if (k_tensors[i].dtype == CQ_ST_BF16) v[k] = cq_bf16_to_f32(cq_f32_to_bf16(v[k]));
        if (k_tensors[i].dtype == CQ_ST_F16) v[k] = cq_f16_to_f32(cq_f32_to_f16(v[k]));
    }
    free(g_vals[i]);
    g_vals[i] = v;
}

static uint64_t nelem(const src_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static void add_tensor(cq_st_writer *w, int i) {
    const src_tensor *t = &k_tensors[i];
    uint64_t n = nelem(t);
    if (t->dtype == CQ_ST_F32) {
        assert_int_equal(cq_st_writer_add_f32(w, t->name, t->ndim, t->shape, g_vals[i]), CQ_OK);
        return;
    }
    uint8_t *b = malloc(2 * n);
    for (uint64_t k = 0; k < n; k++)
        cq_wr16(b + 2 * k, t->dtype == CQ_ST_F16 ? cq_f32_to_f16(g_vals[i][k]) : cq_f32_to_bf16(g_vals[i][k]));
    assert_int_equal(cq_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, b, 2 * n), CQ_OK);
    free(b);
}

static void save_comp(const char *root, const char *comp, int shard, const char *file) {
    cq_st_writer *w;
    assert_int_equal(cq_st_writer_create(&w), CQ_OK);
    for (size_t i = 0; i < N_T; i++)
        if (strcmp(k_tensors[i].comp, comp) == 0 && (shard < 0 || k_tensors[i].shard == shard)) add_tensor(w, (int)i);
    char p[2048];
    snprintf(p, sizeof p, "%s/%s/%s", root, comp, file);
    assert_int_equal(cq_st_writer_save(w, p), CQ_OK);
    cq_st_writer_free(w);
}

static void build_tree(const char *root, uint64_t seed) {
    tu_rng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < N_T; i++) make_values(&r, (int)i, nelem(&k_tensors[i]));
    put(root, "model_index.json",
        "{\"_class_name\":\"QwenImage21Pipeline\",\"_diffusers_version\":\"0.36.0\","
        "\"scheduler\":[\"diffusers\",\"FlowMatchEulerDiscreteScheduler\"],"
        "\"text_encoder\":[\"transformers\",\"Qwen3VLForConditionalGeneration\"],"
        "\"tokenizer\":[\"transformers\",\"Qwen2Tokenizer\"],"
        "\"transformer\":[\"diffusers\",\"QwenImage21Transformer2DModel\"],"
        "\"vae\":[\"diffusers\",\"AutoencoderKLQwenImage21\"]}");
    put(root, "scheduler/scheduler_config.json", "{\"_class_name\":\"FlowMatchEulerDiscreteScheduler\",\"shift\":3.0}");
    put(root, "transformer/config.json", k_dit_config);
    put(root, "text_encoder/config.json", k_te_config);
    put(root, "text_encoder/generation_config.json", "{\"eos_token_id\":[5,7],\"pad_token_id\":6}");
    put(root, "vae/config.json", "{\"_class_name\":\"AutoencoderKLQwenImage21\",\"z_dim\":16}");
    put(root, "tokenizer/tokenizer.json", k_tokenizer);
    put(root, "tokenizer/tokenizer_config.json",
        "{\"eos_token\":\"<|im_end|>\",\"pad_token\":{\"content\":\"<|endoftext|>\"},\"chat_template\":\"ignored\"}");
    put(root, "tokenizer/chat_template.jinja", k_jinja);
    save_comp(root, "transformer", 0, "diffusion_pytorch_model-00001-of-00002.safetensors");
    save_comp(root, "transformer", 1, "diffusion_pytorch_model-00002-of-00002.safetensors");
    char idx[8192];
    size_t o = (size_t)snprintf(idx, sizeof idx, "{\"metadata\":{},\"weight_map\":{");
    bool first = true;
    for (size_t i = 0; i < N_T; i++) {
        if (strcmp(k_tensors[i].comp, "transformer") != 0) continue;
        o += (size_t)snprintf(idx + o, sizeof idx - o, "%s\"%s\":\"diffusion_pytorch_model-0000%d-of-00002.safetensors\"",
                              first ? "" : ",", k_tensors[i].name, k_tensors[i].shard + 1);
        first = false;
    }
    snprintf(idx + o, sizeof idx - o, "}}");
    put(root, "transformer/diffusion_pytorch_model.safetensors.index.json", idx);
    save_comp(root, "text_encoder", -1, "model.safetensors");
    save_comp(root, "vae", -1, "diffusion_pytorch_model.safetensors");
}

/* ---- checking a pack ------------------------------------------------------ */

static const char *prefix_of(const char *comp) {
    return strcmp(comp, "transformer") == 0 ? "dit" : strcmp(comp, "text_encoder") == 0 ? "te" : "vae";
}

/* The codec the policy in convert.h promises for a tensor under --quant q. */
static cq_dtype expected_codec(const src_tensor *t, int q) {
    bool te = strcmp(t->comp, "text_encoder") == 0, vae = strcmp(t->comp, "vae") == 0;
    int big = 0;
    for (int i = 0; i < t->ndim; i++) big += t->shape[i] > 1;
    if (t->ndim <= 1 || big <= 1) return CQ_DTYPE_F32; /* vectors, incl. [C, 1, 1] gammas */
    bool qfloat = q == CQ_DTYPE_F32 || q == CQ_DTYPE_F16 || q == CQ_DTYPE_BF16;
    if (t->ndim > 2) return (q >= 0 && qfloat) ? (cq_dtype)q : vae ? CQ_DTYPE_F16 : CQ_DTYPE_F32;
    if (q < 0) return vae ? CQ_DTYPE_F16 : CQ_DTYPE_Q8_2F;
    bool four_bit = q == CQ_DTYPE_Q4_TILED || q == CQ_DTYPE_Q4TP || q == CQ_DTYPE_Q4_BLOCK;
    if (four_bit && (te || t->shape[1] % 32 != 0)) return CQ_DTYPE_Q8_2F;
    return (cq_dtype)q;
}

static float f16_at(const uint8_t *p) { return cq_f16_to_f32(cq_rd16(p)); }

/* |w - w'| within the codec's stated bound (codec.h), element by element. */
static void check_values(const cq_tensor_view *v, const float *w, const char *name) {
    uint64_t n = v->nelem;
    float *d = malloc((n ? n : 1) * sizeof *d);
    assert_int_equal(cq_cmf_dequantize(v, d, n), CQ_OK);
    double bound = cq_codec_rel_error_bound(v->dtype);
    const double floor_abs = ldexp(1.0, -15); /* scale floor, see codec.h */
    uint64_t rows = v->ndim == 2 ? v->shape[0] : 1, cols = n / (rows ? rows : 1);
    for (uint64_t k = 0; k < n; k++) {
        double err = fabs((double)w[k] - d[k]), lim = 0;
        uint64_t r = k / cols, c = k % cols;
        switch (v->dtype) {
        case CQ_DTYPE_F32: lim = 0; break;
        case CQ_DTYPE_F16: lim = fabs(w[k]) * ldexp(1.0, -11) + ldexp(1.0, -25); break;
        case CQ_DTYPE_BF16: lim = fabs(w[k]) * ldexp(1.0, -8) + 1e-38; break;
        case CQ_DTYPE_Q8_ROW: {
            double amax = 0;
            for (uint64_t j = 0; j < cols; j++) amax = fmax(amax, fabs(w[r * cols + j]));
            lim = bound * amax + floor_abs;
            break;
        }
        case CQ_DTYPE_Q8_2F: { /* the bound holds in the column-normalised domain */
            const uint8_t *colp = v->data + rows * cols + 2 * rows;
            double amax = 0;
            for (uint64_t j = 0; j < cols; j++) amax = fmax(amax, fabs(w[r * cols + j]) / f16_at(colp + 2 * j));
            lim = (bound * amax + floor_abs) * f16_at(colp + 2 * c);
            break;
        }
        case CQ_DTYPE_Q4_TILED:
        case CQ_DTYPE_Q4TP: {
            uint64_t g0 = k / 32 * 32;
            double amax = 0;
            for (uint64_t j = g0; j < g0 + 32 && j < n; j++) amax = fmax(amax, fabs(w[j]));
            double b = bound;
            if (v->dtype == CQ_DTYPE_Q4TP) {
                uint64_t gpr = cols / 32;
                b = cq_codec_q4tp_rel_bound(f16_at(v->data + 16 * rows * gpr + 4 * r + 2));
            }
            lim = b * amax + floor_abs;
            break;
        }
        default: fail_msg("%s: unexpected codec %s", name, cq_dtype_name(v->dtype));
        }
        if (err > lim * (1 + 1e-6))
            fail_msg("%s (%s) element %llu: source %.9g, pack %.9g, error %.3g > bound %.3g", name,
                     cq_dtype_name(v->dtype), (unsigned long long)k, w[k], d[k], err, lim);
    }
    free(d);
}

static cJSON *header_of(const cq_cmf *cmf) {
    size_t len;
    const char *h = cq_cmf_header_json(cmf, &len);
    cJSON *j = cJSON_ParseWithLength(h, len);
    assert_non_null(j);
    return j;
}

static double jnum(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    if (!cJSON_IsNumber(cur)) fail_msg("header has no number at %s", path);
    return cur->valuedouble;
}

static void check_blob(const cq_cmf *cmf, const char *name, const char *root, const char *rel) {
    const cq_tensor_view *v = cq_cmf_find(cmf, name);
    if (!v) fail_msg("pack lacks %s", name);
    assert_int_equal(v->dtype, CQ_DTYPE_U8);
    assert_int_equal(v->ndim, 1);
    size_t len;
    uint8_t *want = tu_read_file(tu_path(root, rel), &len);
    assert_non_null(want);
    assert_int_equal(v->nbytes, len);
    assert_memory_equal(v->data, want, len);
    free(want);
}

static void check_pipeline_pack(const char *path, const char *root, int q, const cq_convert_report *rep) {
    cq_cmf *cmf;
    if (cq_cmf_open(path, &cmf) != CQ_OK) fail_msg("open %s: %s", path, cq_last_error());
    size_t problems = 99;
    assert_int_equal(cq_cmf_verify(cmf, &problems, NULL, NULL), CQ_OK);
    assert_int_equal(problems, 0);
    assert_int_equal(cq_cmf_tensor_count(cmf), N_T + 5);
    assert_int_equal(rep->tensors, N_T + 5);
    for (size_t i = 0; i < N_T; i++) {
        const src_tensor *t = &k_tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%s.%s", prefix_of(t->comp), t->name);
        const cq_tensor_view *v = cq_cmf_find(cmf, name);
        if (!v) fail_msg("pack lacks %s", name);
        cq_dtype want = expected_codec(t, q);
        if (v->dtype != want)
            fail_msg("%s: codec %s, expected %s (--quant %s)", name, cq_dtype_name(v->dtype), cq_dtype_name(want),
                     q < 0 ? "default" : cq_dtype_name((cq_dtype)q));
        assert_int_equal(v->ndim, t->ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(v->shape[d], t->shape[d]);
        check_values(v, g_vals[i], name);
    }
    check_blob(cmf, "dit.config_json", root, "transformer/config.json");
    check_blob(cmf, "te.config_json", root, "text_encoder/config.json");
    check_blob(cmf, "vae.config_json", root, "vae/config.json");
    check_blob(cmf, "pipeline.config_json", root, "model_index.json");
    check_blob(cmf, "scheduler.config_json", root, "scheduler/scheduler_config.json");
    size_t tl;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    assert_int_equal(tl, strlen(k_tokenizer));
    assert_memory_equal(tj, k_tokenizer, tl);
    assert_non_null(cq_cmf_chat_template(cmf));
    assert_string_equal(cq_cmf_chat_template(cmf), k_jinja); /* the .jinja file wins */
    cJSON *h = header_of(cmf);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(h, "arch");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(arch, "arch_name")->valuestring, "qwen_image21");
    assert_true(jnum(h, "arch.hidden_size") == 64 && jnum(h, "arch.num_layers") == 2);
    assert_true(jnum(h, "arch.num_attention_heads") == 4 && jnum(h, "arch.num_kv_heads") == 4);
    assert_true(jnum(h, "arch.head_dim") == 16 && jnum(h, "arch.intermediate_size") == 128);
    assert_true(jnum(h, "arch.vocab_size") == 100 && jnum(h, "arch.max_position_embeddings") == 512);
    assert_true(jnum(h, "arch.rms_norm_eps") > 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(arch, "layer_types")), 2);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(h, "tokenizer_config");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(tc, "eos_token_ids");
    assert_int_equal(cJSON_GetArraySize(eos), 2); /* 5 from the tokenizer and generation_config, 7 */
    assert_true(cJSON_GetArrayItem(eos, 0)->valuedouble == 5 && cJSON_GetArrayItem(eos, 1)->valuedouble == 7);
    assert_true(jnum(h, "tokenizer_config.pad_token_id") == 6);
    const char *qt = cJSON_GetObjectItemCaseSensitive(h, "quant_type")->valuestring;
    assert_string_equal(qt, rep->quant_type);
    cq_cmf_info in;
    assert_int_equal(cq_cmf_get_info(cmf, &in), CQ_OK);
    assert_string_equal(in.arch_name, "qwen_image21");
    assert_true(in.has_tokenizer && in.has_chat_template);
    cJSON_Delete(h);
    cq_cmf_close(cmf);
}

static const cq_dtype k_codecs[] = {CQ_DTYPE_F32,  CQ_DTYPE_F16,      CQ_DTYPE_BF16, CQ_DTYPE_Q8_ROW,
                                    CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4_TILED, CQ_DTYPE_Q4TP};

static void test_pipeline_every_codec(void **state) {
    (void)state;
    char root[1024], out[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_pipe"));
    build_tree(root, 11);
    snprintf(out, sizeof out, "%s/pack.cmf", root);
    for (int c = -1; c < (int)CQ_ARRAY_LEN(k_codecs); c++) {
        int q = c < 0 ? -1 : (int)k_codecs[c];
        cq_convert_opts opts = {.quant = q};
        cq_convert_report rep;
        cq_status s = cq_convert(root, out, &opts, &rep);
        if (s != CQ_OK) fail_msg("convert --quant %s: %s", q < 0 ? "default" : cq_dtype_name((cq_dtype)q), cq_last_error());
        assert_string_equal(rep.arch, "qwen_image21");
        assert_string_equal(rep.layout, "pipeline");
        bool four = q == CQ_DTYPE_Q4_TILED || q == CQ_DTYPE_Q4TP;
        /* fallbacks: the odd-column tensor, and the two te matrices kept at 8 bits */
        assert_int_equal(rep.n_fallbacks, four ? 3 : 0);
        if (q >= 0 && !four && q != CQ_DTYPE_F32 && q != CQ_DTYPE_U8)
            assert_true(rep.codec[q].tensors > 0 && rep.codec[q].worst_rel_rms > 0 &&
                        rep.codec[q].worst_rel_rms < 0.2);
        check_pipeline_pack(out, root, q, &rep);
        cq_convert_report_free(&rep);
    }
}

static void test_rules(void **state) {
    (void)state;
    char root[1024], out[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_rules"));
    build_tree(root, 12);
    snprintf(out, sizeof out, "%s/rules.cmf", root);
    cq_convert_rule rules[5];
    assert_int_equal(cq_convert_parse_rule("dit.blocks.*=q4tp", &rules[0]), CQ_OK);
    assert_int_equal(cq_convert_parse_rule("*.norm*=f16", &rules[1]), CQ_OK);
    assert_int_equal(cq_convert_parse_rule("vae.decoder.conv_in.*=q8_row", &rules[2]), CQ_OK);
    assert_int_equal(cq_convert_parse_rule("vae.*=f32", &rules[3]), CQ_OK);
    assert_int_equal(cq_convert_parse_rule("nocodec", &rules[4]), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_convert_parse_rule("x=q9", &rules[4]), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_convert_parse_rule("x=vbit", &rules[4]), CQ_ERR_INVALID_ARG); /* cannot encode */
    assert_int_equal(cq_convert_parse_rule("x=u8", &rules[4]), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_convert_parse_rule("=f16", &rules[4]), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_convert_parse_rule("te.model.layers.*=q4t", &rules[4]), CQ_OK);
    assert_string_equal(rules[4].glob, "te.model.layers.*");
    assert_int_equal(rules[4].dtype, CQ_DTYPE_Q4_TILED);
    cq_convert_opts opts = {.quant = -1, .rules = rules, .n_rules = 5};
    cq_convert_report rep;
    if (cq_convert(root, out, &opts, &rep) != CQ_OK) fail_msg("convert: %s", cq_last_error());
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    static const struct {
        const char *name;
        cq_dtype dt;
    } want[] = {
        {"dit.blocks.0.attn.to_q.weight", CQ_DTYPE_Q4TP},
        {"dit.blocks.0.attn.norm_q.weight", CQ_DTYPE_F32}, /* rule 0 wins, but 1-D stays f32 */
        {"dit.blocks.1.odd.weight", CQ_DTYPE_Q8_2F},       /* cols 40: fallback */
        {"dit.img_in.weight", CQ_DTYPE_Q8_2F},
        {"te.model.norm.weight", CQ_DTYPE_F16},
        {"te.model.layers.0.mlp.down_proj.weight", CQ_DTYPE_Q4_TILED}, /* a rule may go below 8 bits */
        {"te.model.embed_tokens.weight", CQ_DTYPE_Q8_2F},
        {"vae.decoder.conv_in.weight", CQ_DTYPE_F16}, /* q8_row cannot hold 4-D: fallback */
        {"vae.decoder.conv_in.bias", CQ_DTYPE_F32},
        {"vae.decoder.norm.gamma", CQ_DTYPE_F16},     /* a float rule applies to N-D */
        {"vae.quant.proj.weight", CQ_DTYPE_F32},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(want); i++) {
        const cq_tensor_view *v = cq_cmf_find(cmf, want[i].name);
        assert_non_null(v);
        if (v->dtype != want[i].dt)
            fail_msg("%s: %s, expected %s", want[i].name, cq_dtype_name(v->dtype), cq_dtype_name(want[i].dt));
    }
    assert_int_equal(rep.n_fallbacks, 2); /* 1-D tensors under a q4tp rule are not fallbacks */
    bool saw_odd = false;
    for (size_t i = 0; i < rep.n_fallbacks; i++)
        if (strcmp(rep.fallbacks[i].name, "dit.blocks.1.odd.weight") == 0) {
            saw_odd = true;
            assert_int_equal(rep.fallbacks[i].wanted, CQ_DTYPE_Q4TP);
            assert_int_equal(rep.fallbacks[i].used, CQ_DTYPE_Q8_2F);
        }
    assert_true(saw_odd);
    cq_cmf_close(cmf);
    cq_convert_report_free(&rep);
}

static void test_lone_component(void **state) {
    (void)state;
    char root[1024], out[1200], comp[1100];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_comp"));
    build_tree(root, 13);
    snprintf(comp, sizeof comp, "%s/transformer", root);
    snprintf(out, sizeof out, "%s/dit.cmf", root);
    cq_convert_report rep;
    if (cq_convert(comp, out, NULL, &rep) != CQ_OK) fail_msg("convert: %s", cq_last_error());
    assert_string_equal(rep.layout, "component");
    assert_string_equal(rep.arch, "qwen_image21");
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    assert_int_equal(cq_cmf_tensor_count(cmf), 7 + 1);
    assert_non_null(cq_cmf_find(cmf, "dit.blocks.0.mlp.w1.weight"));
    check_blob(cmf, "dit.config_json", root, "transformer/config.json");
    size_t tl = 1;
    assert_null(cq_cmf_tokenizer_json(cmf, &tl));
    assert_int_equal(tl, 0);
    cJSON *h = header_of(cmf);
    assert_true(jnum(h, "arch.hidden_size") == 64 && jnum(h, "arch.vocab_size") == 0);
    cJSON_Delete(h);
    cq_cmf_close(cmf);
    cq_convert_report_free(&rep);
}

/* A small Hugging Face LLM folder; the weights are returned for checks. */
static void build_llm(const char *root, float *w, float *n) {
    put(root, "config.json",
        "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"hidden_size\":32,"
        "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
        "\"head_dim\":8,\"vocab_size\":100,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-6,"
        "\"rope_theta\":1000000,\"tie_word_embeddings\":true,\"hidden_act\":\"silu\",\"eos_token_id\":6,"
        "\"layer_types\":[\"full_attention\",\"sliding_attention\"]}");
    put(root, "tokenizer.json", k_tokenizer);
    put(root, "tokenizer_config.json",
        "{\"eos_token\":\"<|im_end|>\",\"bos_token\":null,\"chat_template\":\"TEMPLATE\","
        "\"added_tokens_decoder\":{\"9\":{\"content\":\"<|x|>\"}}}");
    put(root, "generation_config.json", "{\"eos_token_id\":[5,6],\"bos_token_id\":9}");
    tu_rng r;
    tu_rng_seed(&r, 5);
    tu_fill_normal(&r, w, 32 * 64, 0.1f);
    tu_fill_normal(&r, n, 32, 1.0f);
    cq_st_writer *sw;
    assert_int_equal(cq_st_writer_create(&sw), CQ_OK);
    uint64_t s2[2] = {64, 32}, s1 = 32;
    assert_int_equal(cq_st_writer_add_f32(sw, "model.layers.0.mlp.up_proj.weight", 2, s2, w), CQ_OK);
    assert_int_equal(cq_st_writer_add_f32(sw, "model.norm.weight", 1, &s1, n), CQ_OK);
    assert_int_equal(cq_st_writer_save(sw, tu_path(root, "model.safetensors")), CQ_OK);
    cq_st_writer_free(sw);
}

static void test_llm_folder(void **state) {
    (void)state;
    char root[1024], out[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_llm"));
    float w[32 * 64], n[32];
    build_llm(root, w, n);
    snprintf(out, sizeof out, "%s/llm.cmf", root);
    cq_convert_report rep;
    cq_convert_opts opts = {.quant = CQ_DTYPE_Q4TP};
    if (cq_convert(root, out, &opts, &rep) != CQ_OK) fail_msg("convert: %s", cq_last_error());
    assert_string_equal(rep.layout, "llm");
    assert_string_equal(rep.arch, "qwen3");
    assert_string_equal(rep.quant_type, "Q4_BLOCK");
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    assert_int_equal(cq_cmf_verify(cmf, NULL, NULL, NULL), CQ_OK);
    const cq_tensor_view *v = cq_cmf_find(cmf, "model.layers.0.mlp.up_proj.weight");
    assert_non_null(v);
    assert_int_equal(v->dtype, CQ_DTYPE_Q4TP); /* an LLM's matrices follow --quant */
    check_values(v, w, v->name);
    v = cq_cmf_find(cmf, "model.norm.weight");
    assert_int_equal(v->dtype, CQ_DTYPE_F32);
    check_values(v, n, v->name);
    check_blob(cmf, "config_json", root, "config.json");
    assert_string_equal(cq_cmf_chat_template(cmf), "TEMPLATE");
    cJSON *h = header_of(cmf);
    assert_true(jnum(h, "arch.hidden_size") == 32 && jnum(h, "arch.num_kv_heads") == 2 && jnum(h, "arch.head_dim") == 8);
    assert_true(jnum(h, "arch.num_layers") == 2 && jnum(h, "arch.max_position_embeddings") == 256);
    assert_true(jnum(h, "arch.rope_theta") == 1000000 && jnum(h, "tokenizer_config.bos_token_id") == 9);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h, "arch"), "layer_types");
    assert_string_equal(cJSON_GetArrayItem(lt, 1)->valuestring, "SlidingAttention");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h, "tokenizer_config"),
                                                        "eos_token_ids");
    assert_int_equal(cJSON_GetArraySize(eos), 2); /* 5 (<|im_end|>) and 6 */
    cJSON_Delete(h);
    cq_cmf_close(cmf);
    cq_convert_report_free(&rep);
}

/* tokenizer.json.gz where the folder has no tokenizer.json; the plain file wins where both are. */
static const char *k_tokenizer_gz =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":5,\"content\":\"<|im_end|>\"},"
    "{\"id\":6,\"content\":\"<|endoftext|>\"}],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2}}}";

#ifdef CQ_HAVE_ZLIB
static void expect_pack_tokenizer(const char *root, const char *out, const char *want) {
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    if (cq_convert(root, out, &opts, &rep) != CQ_OK) fail_msg("convert: %s", cq_last_error());
    cq_convert_report_free(&rep);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
    size_t len = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &len);
    assert_non_null(tj);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(tj, want, len);
    cq_cmf_close(cmf);
}
#endif

static void test_gz_tokenizer(void **state) {
    (void)state;
    char root[1024], out[1200], gz[1200], plain[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_gz"));
    build_tree(root, 5);
    snprintf(out, sizeof out, "%s/pack.cmf", root);
    snprintf(gz, sizeof gz, "%s/tokenizer/tokenizer.json.gz", root);
    snprintf(plain, sizeof plain, "%s/tokenizer/tokenizer.json", root);
#ifdef CQ_HAVE_ZLIB
    gzFile f = gzopen(gz, "wb9");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, k_tokenizer_gz, (unsigned)strlen(k_tokenizer_gz)), (int)strlen(k_tokenizer_gz));
    assert_int_equal(gzclose(f), Z_OK);
    expect_pack_tokenizer(root, out, k_tokenizer); /* both: the plain file */
    assert_int_equal(unlink(plain), 0);
    expect_pack_tokenizer(root, out, k_tokenizer_gz); /* only the gzipped one */
    /* a .gz that is not gzip fails, naming it */
    put(root, "tokenizer/tokenizer.json.gz", k_tokenizer);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_clear_error();
    assert_int_equal(cq_convert(root, out, &opts, &rep), CQ_ERR_PARSE);
    cq_convert_report_free(&rep);
    if (!strstr(cq_last_error(), "tokenizer.json.gz is not gzip-compressed")) fail_msg("message: %s", cq_last_error());
#else
    /* without zlib a folder with only the gzipped tokenizer fails, saying why */
    assert_int_equal(rename(plain, gz), 0);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_clear_error();
    assert_int_equal(cq_convert(root, out, &opts, &rep), CQ_ERR_UNSUPPORTED);
    cq_convert_report_free(&rep);
    if (!strstr(cq_last_error(), "this build has no zlib")) fail_msg("message: %s", cq_last_error());
    (void)k_tokenizer_gz;
#endif
}

static void test_errors(void **state) {
    (void)state;
    char root[1024], out[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_err"));
    snprintf(out, sizeof out, "%s/x.cmf", root);
    cq_convert_report rep;
    assert_int_equal(cq_convert(tu_path(root, "missing"), out, NULL, &rep), CQ_ERR_MISSING);
    cq_convert_report_free(&rep);
    assert_int_equal(cq_convert(root, out, NULL, &rep), CQ_ERR_MISSING); /* empty folder */
    assert_non_null(strstr(cq_last_error(), "model_index.json"));
    cq_convert_report_free(&rep);
    /* a NaN in a tensor that must be quantized: a clear error, no file left */
    put(root, "config.json", "{\"_class_name\":\"FooTransformer2DModel\",\"num_layers\":1}");
    float w[64 * 32] = {0};
    w[77] = NAN;
    uint64_t s2[2] = {32, 64};
    cq_st_writer *sw;
    assert_int_equal(cq_st_writer_create(&sw), CQ_OK);
    assert_int_equal(cq_st_writer_add_f32(sw, "a.weight", 2, s2, w), CQ_OK);
    assert_int_equal(cq_st_writer_save(sw, tu_path(root, "diffusion_pytorch_model.safetensors")), CQ_OK);
    cq_st_writer_free(sw);
    assert_int_equal(cq_convert(root, out, NULL, &rep), CQ_ERR_NUMERIC);
    assert_non_null(strstr(cq_last_error(), "dit.a.weight"));
    cq_convert_report_free(&rep);
    assert_int_equal(access(out, F_OK), -1);
    assert_int_equal(tu_system("ls '%s' | grep -q tmp", root), 1); /* no temporary file left */
    /* the same tensor kept f32 by a rule converts (NaN preserved) */
    cq_convert_rule rule;
    assert_int_equal(cq_convert_parse_rule("dit.a.*=f32", &rule), CQ_OK);
    cq_convert_opts opts = {.quant = -1, .rules = &rule, .n_rules = 1};
    assert_int_equal(cq_convert(root, out, &opts, &rep), CQ_OK);
    assert_string_equal(rep.arch, "foo");
    cq_convert_report_free(&rep);
    /* a codec that cannot be written */
    opts = (cq_convert_opts){.quant = CQ_DTYPE_VBIT};
    assert_int_equal(cq_convert(root, out, &opts, &rep), CQ_ERR_INVALID_ARG);
    cq_convert_report_free(&rep);
}

/* Every allocation of a conversion may fail: a clean CQ_ERR_NOMEM, no
 * leak (ASan), no temporary or partial file. */
static void test_alloc_faults(void **state) {
    (void)state;
    char root[1024], out[1200];
    snprintf(root, sizeof root, "%s", tu_tmpdir("cv_oom"));
    float w[32 * 64], n[32];
    build_llm(root, w, n);
    snprintf(out, sizeof out, "%s/oom.cmf", root);
    cq_convert_report rep;
    cq_alloc_fail_at(0);
    assert_int_equal(cq_convert(root, out, NULL, &rep), CQ_OK);
    long total = cq_alloc_fail_at(0);
    cq_convert_report_free(&rep);
    assert_true(total > 20);
    int failed = 0;
    for (long k = 1; k <= total; k++) {
        unlink(out);
        cq_alloc_fail_at(k);
        cq_status s = cq_convert(root, out, NULL, &rep);
        cq_alloc_fail_at(0);
        cq_convert_report_free(&rep);
        if (s == CQ_OK) continue; /* the allocation was optional (e.g. the thread pool) */
        if (s != CQ_ERR_NOMEM) fail_msg("allocation %ld of %ld: %s (%s)", k, total, cq_status_str(s), cq_last_error());
        assert_int_equal(access(out, F_OK), -1);
        failed++;
    }
    assert_int_equal(tu_system("ls '%s' | grep -q tmp", root), 1);
    print_message("%d of %ld allocation failures surfaced as CQ_ERR_NOMEM\n", failed, total);
    assert_true(failed > total / 2);
}

static void test_arch_names(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"QwenImage21Pipeline", "qwen_image21"},        {"QwenImage21Transformer2DModel", "qwen_image21"},
        {"QwenImagePipeline", "qwen_image"},            {"HunyuanVideoPipeline", "hunyuan_video"},
        {"SD3Transformer2DModel", "sd3"},               {"FluxPipeline", "flux"},
        {"WanTransformer3DModel", "wan"},               {"StableDiffusion3Pipeline", "stable_diffusion3"},
        {"AutoencoderKLWan", "autoencoder_kl_wan"},     {"AutoencoderKLQwenImage", "qwen_image_vae"},
        {"LTX2VideoTransformer3DModel", "ltx2"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(cases); i++) {
        char out[64];
        cv_arch_from_class(cases[i][0], out, sizeof out);
        assert_string_equal(out, cases[i][1]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arch_names),   cmocka_unit_test(test_pipeline_every_codec),
        cmocka_unit_test(test_rules),        cmocka_unit_test(test_lone_component),
        cmocka_unit_test(test_llm_folder),   cmocka_unit_test(test_errors),     cmocka_unit_test(test_gz_tokenizer),
        cmocka_unit_test(test_alloc_faults),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < N_T; i++) free(g_vals[i]);
    return rc;
}
