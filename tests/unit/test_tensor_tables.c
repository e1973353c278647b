/*
 * test_tensor_tables.c — the architectures' tensor tables (models/tables.h)
 * and the kit that reads them: the expanded lists, packs generated from them
 * load, and a pack with a missing tensor, a wrong shape or a wrong codec fails
 * with a message naming the tensor and both shapes; the pack check counts
 * missing and unexpected tensors (Qwen-Image-2.1, Qwen-Image, Z-Image, LTX-2,
 * Qwen3, the VAEs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "base/gz.h"
#include "codec/codec.h"
#include "format/convert.h"
#include "models/ltx2.h"
#include "models/qi21_vae.h"
#include "models/tables.h"
#include "testutil.h"

static const char k_header[] =
    "{\"version\":2,\"quant_type\":\"F32\",\"arch\":{\"arch_name\":\"tiny\",\"hidden_size\":8,"
    "\"intermediate_size\":16,\"num_layers\":2,\"num_attention_heads\":2,\"num_kv_heads\":1,\"head_dim\":4,"
    "\"vocab_size\":32,\"max_position_embeddings\":64,\"layer_types\":[\"FullAttention\",\"FullAttention\"],"
    "\"rms_norm_eps\":1e-6}}";

/* inner 16 (2 heads x 8), mlp 48, context 12, 4 channels in and out, 2 layers */
static const char k_dit_cfg[] =
    "{\"_class_name\":\"QwenImage21Transformer2DModel\",\"num_layers\":2,\"num_attention_heads\":2,"
    "\"attention_head_dim\":8,\"mlp_ratio\":3,\"in_channels\":4,\"out_channels\":4,\"context_in_dim\":12,"
    "\"axes_dims_rope\":[2,2,4]}";
static const char k_te_cfg[] =
    "{\"model_type\":\"qwen3\",\"vocab_size\":20,\"hidden_size\":8,\"intermediate_size\":12,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":4}";
static const char k_vae_cfg[] =
    "{\"_class_name\":\"AutoencoderKLQwenImage21\",\"base_dim\":4,\"decoder_base_dim\":4,\"z_dim\":4,"
    "\"num_res_blocks\":1,\"in_channels\":3,\"out_channels\":3,\"dim_mult\":[1,2],\"temperal_downsample\":[true],"
    "\"latents_mean\":[0,0,0,0],\"latents_std\":[1,1,1,1]}";

/* What to do to one tensor of the generated pack. */
typedef struct change {
    const char *name;   /* the tensor changed (NULL: none) */
    int what;           /* 0 leave out, 1 second dimension + 1, 2 store as u8 */
    const char *extra;  /* a tensor no table lists, added (NULL: none) */
} change;

static void add_tensor(cq_cmf_writer *w, const cq_tt_entry *e, const change *ch) {
    uint64_t shape[4];
    memcpy(shape, e->shape, sizeof shape);
    int ndim = e->ndim;
    bool is = ch && ch->name && strcmp(ch->name, e->name) == 0;
    if (is && ch->what == 0) return;
    if (is && ch->what == 1) {
        if (ndim == 1) shape[ndim++] = 1;
        shape[1]++;
    }
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    cq_dtype dt = is && ch->what == 2 ? CQ_DTYPE_U8 : e->codec == CQ_TT_KERNEL ? CQ_DTYPE_F16 : CQ_DTYPE_F32;
    size_t nb = (size_t)n * (dt == CQ_DTYPE_F32 ? 4 : dt == CQ_DTYPE_F16 ? 2 : 1);
    uint8_t *buf = calloc(nb ? nb : 1, 1);
    assert_non_null(buf);
    for (uint64_t i = 0; i < n && dt != CQ_DTYPE_U8; i++) {
        float v = e->codec == CQ_TT_VECTOR ? e->base : 0.01f * (float)((i * 7) % 13) - 0.06f;
        if (dt == CQ_DTYPE_F32)
            memcpy(buf + 4 * i, &v, 4);
        else
            cq_wr16(buf + 2 * i, cq_f32_to_f16(v));
    }
    if (cq_cmf_writer_add(w, e->name, dt, ndim, shape, buf, nb) != CQ_OK) fail_msg("add: %s", cq_last_error());
    free(buf);
}

static void add_config(cq_cmf_writer *w, const char *name, const char *cfg) {
    uint64_t shape[1] = {strlen(cfg)};
    assert_int_equal(cq_cmf_writer_add(w, name, CQ_DTYPE_U8, 1, shape, cfg, shape[0]), CQ_OK);
}

/* A pack of `t`'s entries (optional ones too unless skip_optional) and the
 * configs, with one change, opened. */
static cq_cmf *write_pack(const char *leaf, const cq_tt_list *t, bool skip_optional, const char *const *cfg_names,
                          const char *const *cfgs, int n_cfg, const change *ch) {
    const char *path = tu_path(tu_tmpdir("tensor_tables"), leaf);
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, k_header, strlen(k_header)), CQ_OK);
    for (int i = 0; i < n_cfg; i++) add_config(w, cfg_names[i], cfgs[i]);
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].required || !skip_optional) add_tensor(w, &t->e[i], ch);
    if (ch && ch->extra) {
        cq_tt_entry e = {.ndim = 2, .shape = {3, 5}, .codec = CQ_TT_MATRIX};
        snprintf(e.name, sizeof e.name, "%s", ch->extra);
        add_tensor(w, &e, NULL);
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("finish: %s", cq_last_error());
    cq_cmf_writer_free(w);
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(path, &cmf), CQ_OK);
    return cmf;
}

static void expect_error(cq_status got, cq_status want, const char *const *parts) {
    assert_int_equal(got, want);
    for (int i = 0; parts[i]; i++)
        if (!strstr(cq_last_error(), parts[i])) fail_msg("'%s' is not in the message: %s", parts[i], cq_last_error());
}

/* ---- the kit ------------------------------------------------------------------------------- */
static void test_expand_patterns(void **st) {
    (void)st;
    enum { S1, SA, SB };
    static const cq_tt_pattern pats[] = {
        {"blocks.%d.w", true, CQ_TT_MATRIX, true, 0.0f, 2, {{SA, 3}, {SB, 1}}},
        {"head", false, CQ_TT_VECTOR, false, 1.0f, 1, {{SB, 2}}},
        {"blocks.%d.g", true, CQ_TT_VECTOR, true, 1.0f, 1, {{S1, 7}}},
    };
    int64_t sym[CQ_TT_MAX_SYMS] = {1, 5, 11};
    cq_tt_list t = {0};
    assert_int_equal(cq_tt_expand(&t, "p.", pats, 3, 2, sym), CQ_OK);
    /* the non-layer patterns first, then layer 0 and layer 1 in table order */
    assert_int_equal(t.n, 5);
    const char *names[] = {"p.head", "p.blocks.0.w", "p.blocks.0.g", "p.blocks.1.w", "p.blocks.1.g"};
    for (int i = 0; i < 5; i++) assert_string_equal(t.e[i].name, names[i]);
    assert_int_equal(t.e[0].shape[0], 22);
    assert_int_equal(t.e[0].layer, -1);
    assert_false(t.e[0].required);
    assert_int_equal(t.e[3].shape[0], 15);
    assert_int_equal(t.e[3].shape[1], 11);
    assert_int_equal(t.e[3].layer, 1);
    assert_string_equal(t.e[3].pattern, "blocks.%d.w");
    assert_int_equal(t.e[4].shape[0], 7);
    assert_ptr_equal(cq_tt_find(&t, "p.blocks.1.g"), &t.e[4]);
    assert_null(cq_tt_find(&t, "p.blocks.2.g"));
    cq_tt_list_free(&t);
}

static void test_check_policies(void **st) {
    (void)st;
    cq_tt_entry vec = {.name = "g", .ndim = 1, .shape = {6}, .codec = CQ_TT_VECTOR};
    cq_tensor_view v = {.name = "g", .dtype = CQ_DTYPE_F32, .ndim = 3, .shape = {6, 1, 1}, .nelem = 6};
    assert_int_equal(cq_tt_check("t", &vec, &v), CQ_OK); /* a gamma stored [C, 1, 1] */
    v.dtype = CQ_DTYPE_BF16;
    assert_int_equal(cq_tt_check("t", &vec, &v), CQ_OK);
    v.dtype = CQ_DTYPE_Q8_2F;
    expect_error(cq_tt_check("t", &vec, &v), CQ_ERR_DTYPE, (const char *[]){"'g'", "q8_2f", "vector", NULL});
    v.dtype = CQ_DTYPE_F32;
    v.nelem = 7;
    v.shape[0] = 7;
    expect_error(cq_tt_check("t", &vec, &v), CQ_ERR_SHAPE,
                 (const char *[]){"t: tensor 'g' has shape [7 x 1 x 1], the config implies [6]", NULL});
    cq_tt_entry mat = {.name = "w", .ndim = 2, .shape = {4, 6}, .codec = CQ_TT_MATRIX};
    cq_tensor_view m = {.name = "w", .dtype = CQ_DTYPE_Q4TP, .ndim = 2, .shape = {4, 6}, .nelem = 24};
    assert_int_equal(cq_tt_check("t", &mat, &m), CQ_OK);
    m.shape[0] = 6;
    m.shape[1] = 4;
    expect_error(cq_tt_check("t", &mat, &m), CQ_ERR_SHAPE, (const char *[]){"[6 x 4]", "[4 x 6]", NULL});
    m.shape[0] = 4;
    m.shape[1] = 6;
    m.dtype = CQ_DTYPE_U8;
    expect_error(cq_tt_check("t", &mat, &m), CQ_ERR_DTYPE, (const char *[]){"'w'", "u8", NULL});
    cq_tt_entry ker = {.name = "k", .ndim = 4, .shape = {8, 4, 3, 3}, .codec = CQ_TT_KERNEL};
    cq_tensor_view k = {.name = "k", .dtype = CQ_DTYPE_F16, .ndim = 4, .shape = {8, 4, 3, 3}, .nelem = 288};
    assert_int_equal(cq_tt_check("t", &ker, &k), CQ_OK);
    k.shape[1] = 3;
    k.shape[2] = 4; /* same count, other layout */
    assert_int_equal(cq_tt_check("t", &ker, &k), CQ_ERR_SHAPE);
}

/* ---- the denoiser --------------------------------------------------------------------------- */
static cq_tt_list qi21_table(void) {
    cq_qi21_config c = {.in_channels = 4, .out_channels = 4, .num_layers = 2, .n_heads = 2, .head_dim = 8,
                        .inner = 16, .context_in_dim = 12, .mlp_hidden = 48, .axes = {2, 2, 4}};
    cq_tt_list t = {0};
    assert_int_equal(cq_qi21_tensors(&c, "dit.", &t), CQ_OK);
    return t;
}

static cq_status load_qi21(cq_cmf *cmf) {
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_qi21 *m = NULL;
    cq_status s = cq_qi21_load(cmf, "dit.", be, &m);
    assert_true((s == CQ_OK) == (m != NULL));
    cq_qi21_free(m);
    cq_backend_free(be);
    return s;
}

static cq_cmf *qi21_pack(const char *leaf, const change *ch) {
    cq_tt_list t = qi21_table();
    const char *names[] = {"dit.config_json"}, *cfgs[] = {k_dit_cfg};
    cq_cmf *cmf = write_pack(leaf, &t, false, names, cfgs, 1, ch);
    cq_tt_list_free(&t);
    return cmf;
}

static void test_qi21_table(void **st) {
    (void)st;
    cq_tt_list t = qi21_table();
    assert_int_equal(t.n, 9 + 2 * 9);
    const cq_tt_entry *e = cq_tt_find(&t, "dit.transformer_blocks.1.img_mlp.out.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 16);
    assert_int_equal(e->shape[1], 48);
    assert_int_equal(e->layer, 1);
    e = cq_tt_find(&t, "dit.modulation.1.weight");
    assert_int_equal(e->shape[0], 64);
    e = cq_tt_find(&t, "dit.time_text_embed.timestep_embedder.linear_1.weight");
    assert_int_equal(e->shape[1], CQ_QI21_TIMESTEP_CHANNELS);
    e = cq_tt_find(&t, "dit.transformer_blocks.0.attn.norm_k.weight");
    assert_int_equal(e->codec, CQ_TT_VECTOR);
    assert_int_equal(e->shape[0], 8);
    cq_tt_list_free(&t);
}

static void test_qi21_pack_loads_and_checks_clean(void **st) {
    (void)st;
    cq_cmf *cmf = qi21_pack("ok.cmf", NULL);
    assert_int_equal(load_qi21(cmf), CQ_OK);
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    cq_cmf_close(cmf);
}

static void test_qi21_missing_tensor(void **st) {
    (void)st;
    change ch = {"dit.transformer_blocks.1.attn.to_k.weight", 0, NULL};
    cq_cmf *cmf = qi21_pack("missing.cmf", &ch);
    expect_error(load_qi21(cmf), CQ_ERR_MISSING,
                 (const char *[]){"qi21: tensor 'dit.transformer_blocks.1.attn.to_k.weight' [16 x 16] is missing", NULL});
    cq_tt_report rep;
    int n;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(rep.missing, 1);
    assert_int_equal(rep.unexpected, 0);
    cq_cmf_close(cmf);
}

static void test_qi21_wrong_shape(void **st) {
    (void)st;
    change ch = {"dit.img_in.weight", 1, NULL};
    cq_cmf *cmf = qi21_pack("shape.cmf", &ch);
    expect_error(load_qi21(cmf), CQ_ERR_SHAPE,
                 (const char *[]){"qi21: tensor 'dit.img_in.weight' has shape [16 x 5], the config implies [16 x 4]",
                                  NULL});
    cq_tt_report rep;
    int n;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(rep.mismatched, 1);
    cq_cmf_close(cmf);
}

static void test_qi21_wrong_codec(void **st) {
    (void)st;
    change ch = {"dit.transformer_blocks.0.attn.norm_q.weight", 2, NULL};
    cq_cmf *cmf = qi21_pack("codec.cmf", &ch);
    expect_error(load_qi21(cmf), CQ_ERR_DTYPE,
                 (const char *[]){"'dit.transformer_blocks.0.attn.norm_q.weight' is stored as u8", NULL});
    cq_cmf_close(cmf);
}

static void note_count(void *user, const char *line) {
    int *n = user;
    if (strstr(line, "'dit.extra.weight' [3 x 5] is not one the architecture uses")) (*n)++;
}

static void test_qi21_unexpected_tensor(void **st) {
    (void)st;
    change ch = {NULL, 0, "dit.extra.weight"};
    cq_cmf *cmf = qi21_pack("extra.cmf", &ch);
    assert_int_equal(load_qi21(cmf), CQ_OK); /* an extra tensor is no reason to refuse */
    cq_tt_report rep;
    int n, seen = 0;
    assert_int_equal(cq_tables_check_pack(cmf, note_count, &seen, &rep, &n), CQ_OK);
    assert_int_equal(rep.unexpected, 1);
    assert_int_equal(rep.missing, 0);
    assert_int_equal(seen, 1);
    cq_cmf_close(cmf);
}

/* ---- the Z-Image denoiser ------------------------------------------------------------------ */
/* dim 16 (2 heads x 8), FFN int(16 / 3 * 8) = 42, 2 layers, 1 refiner, caption 12, 4 latent channels */
static const char k_zi_cfg[] =
    "{\"_class_name\":\"ZImageTransformer2DModel\",\"in_channels\":4,\"dim\":16,\"n_layers\":2,"
    "\"n_refiner_layers\":1,\"n_heads\":2,\"n_kv_heads\":2,\"cap_feat_dim\":12,\"axes_dims\":[2,2,4],"
    "\"axes_lens\":[64,16,16]}";

static cq_cmf *zimage_pack(const char *leaf, const change *ch, cq_zimage_config *c) {
    cq_cmf *cfg_only = NULL;
    {
        cq_tt_list none = {0};
        const char *names[] = {"dit.config_json"}, *cfgs[] = {k_zi_cfg};
        cfg_only = write_pack("zi_cfg.cmf", &none, false, names, cfgs, 1, NULL);
    }
    assert_int_equal(cq_zimage_parse_config(cfg_only, "dit.", c), CQ_OK);
    cq_cmf_close(cfg_only);
    cq_tt_list t = {0};
    assert_int_equal(cq_zimage_tensors(c, "dit.", &t), CQ_OK);
    const char *names[] = {"dit.config_json"}, *cfgs[] = {k_zi_cfg};
    cq_cmf *cmf = write_pack(leaf, &t, false, names, cfgs, 1, ch);
    cq_tt_list_free(&t);
    return cmf;
}

static cq_status load_zimage(cq_cmf *cmf, bool run) {
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_zimage *m = NULL;
    cq_status s = cq_zimage_load(cmf, "dit.", be, &m);
    assert_true((s == CQ_OK) == (m != NULL));
    if (s == CQ_OK && run) {
        /* the generated weights run: a 4x6 latent (6 tokens, 26 pad rows), 3 caption rows; finite output */
        float lat[4 * 4 * 6], cap[3 * 12], out[4 * 4 * 6];
        for (int i = 0; i < 96; i++) lat[i] = 0.1f * (float)(i % 7) - 0.3f;
        for (int i = 0; i < 36; i++) cap[i] = 0.05f * (float)(i % 5);
        assert_int_equal(cq_zimage_forward(m, lat, 4, 6, cap, 3, 0.5f, out), CQ_OK);
        for (int i = 0; i < 96; i++) assert_true(isfinite(out[i]));
    }
    cq_zimage_free(m);
    cq_backend_free(be);
    return s;
}

static void test_zimage_table(void **st) {
    (void)st;
    cq_zimage_config c;
    cq_cmf *cmf = zimage_pack("zi.cmf", NULL, &c);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.ffn_hidden, 42);
    assert_int_equal(c.adaln_dim, 16);
    assert_int_equal(c.patch_channels, 16);
    cq_tt_list t = {0};
    assert_int_equal(cq_zimage_tensors(&c, "dit.", &t), CQ_OK);
    assert_int_equal(t.n, 15 + 15 + 13 + 2 * 15); /* top level, noise refiner, context refiner, layers */
    const cq_tt_entry *e = cq_tt_find(&t, "dit.layers.1.feed_forward.w2.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 16);
    assert_int_equal(e->shape[1], 42);
    e = cq_tt_find(&t, "dit.noise_refiner.0.adaLN_modulation.0.weight");
    assert_int_equal(e->shape[0], 64);
    assert_int_equal(e->shape[1], 16);
    assert_null(cq_tt_find(&t, "dit.context_refiner.0.adaLN_modulation.0.weight"));
    e = cq_tt_find(&t, "dit.t_embedder.mlp.0.weight");
    assert_int_equal(e->shape[0], CQ_ZIMAGE_TIMESTEP_MID);
    assert_int_equal(e->shape[1], CQ_ZIMAGE_TIMESTEP_CHANNELS);
    e = cq_tt_find(&t, "dit.all_x_embedder.2-1.weight");
    assert_int_equal(e->shape[1], 16);
    e = cq_tt_find(&t, "dit.x_pad_token");
    assert_int_equal(e->codec, CQ_TT_VECTOR);
    cq_tt_list_free(&t);
    assert_int_equal(load_zimage(cmf, true), CQ_OK);
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    cq_cmf_close(cmf);
}

static void test_zimage_bad_packs(void **st) {
    (void)st;
    cq_zimage_config c;
    change missing = {"dit.context_refiner.0.ffn_norm2.weight", 0, NULL};
    cq_cmf *cmf = zimage_pack("zi_missing.cmf", &missing, &c);
    expect_error(load_zimage(cmf, false), CQ_ERR_MISSING,
                 (const char *[]){"zimage: tensor 'dit.context_refiner.0.ffn_norm2.weight' [16] is missing", NULL});
    cq_cmf_close(cmf);
    change shape = {"dit.cap_embedder.1.weight", 1, NULL};
    cmf = zimage_pack("zi_shape.cmf", &shape, &c);
    expect_error(load_zimage(cmf, false), CQ_ERR_SHAPE,
                 (const char *[]){"zimage: tensor 'dit.cap_embedder.1.weight' has shape [16 x 13], the config implies "
                                  "[16 x 12]", NULL});
    cq_tt_report rep;
    int n;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(rep.mismatched, 1);
    cq_cmf_close(cmf);
    change codec = {"dit.x_pad_token", 2, NULL};
    cmf = zimage_pack("zi_codec.cmf", &codec, &c);
    expect_error(load_zimage(cmf, false), CQ_ERR_DTYPE, (const char *[]){"'dit.x_pad_token' is stored as u8", NULL});
    cq_cmf_close(cmf);
}

/* ---- the Qwen-Image (v1) denoiser ----------------------------------------------------------- */
/* inner 16 (2 heads x 8), MLP 64, joint 12, 16 channels in, 4 out (16 per token), 2 layers */
static const char k_qimage_cfg[] =
    "{\"_class_name\":\"QwenImageTransformer2DModel\",\"patch_size\":2,\"in_channels\":16,\"out_channels\":4,"
    "\"num_layers\":2,\"attention_head_dim\":8,\"num_attention_heads\":2,\"joint_attention_dim\":12,"
    "\"axes_dims_rope\":[2,2,4],\"zero_cond_t\":true}";

static cq_cmf *qimage_pack(const char *leaf, const change *ch, cq_qimage_config *c) {
    const char *names[] = {"dit.config_json"}, *cfgs[] = {k_qimage_cfg};
    cq_tt_list none = {0};
    cq_cmf *cfg_only = write_pack("qimage_cfg.cmf", &none, false, names, cfgs, 1, NULL);
    assert_int_equal(cq_qimage_parse_config(cfg_only, "dit.", c), CQ_OK);
    cq_cmf_close(cfg_only);
    cq_tt_list t = {0};
    assert_int_equal(cq_qimage_tensors(c, "dit.", &t), CQ_OK);
    cq_cmf *cmf = write_pack(leaf, &t, false, names, cfgs, 1, ch);
    cq_tt_list_free(&t);
    return cmf;
}

static cq_status load_qimage(cq_cmf *cmf, bool run) {
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_qimage *m = NULL;
    cq_status s = cq_qimage_load(cmf, "dit.", be, &m);
    assert_true((s == CQ_OK) == (m != NULL));
    if (s == CQ_OK && run) {
        /* the generated weights run: a 2x3 target and a 1x2 condition image, 3 text rows; finite output */
        const int32_t shapes[2][3] = {{1, 2, 3}, {1, 1, 2}};
        const cq_qimage_layout lay = {.n_images = 2, .img_shapes = shapes, .n_txt = 3};
        float img[8 * 16], txt[3 * 12], out[8 * 16];
        for (int i = 0; i < 128; i++) img[i] = 0.1f * (float)(i % 7) - 0.3f;
        for (int i = 0; i < 36; i++) txt[i] = 0.05f * (float)(i % 5);
        assert_int_equal(cq_qimage_forward(m, &lay, txt, img, 0.5f, out), CQ_OK);
        for (int i = 0; i < 128; i++) assert_true(isfinite(out[i]));
    }
    cq_qimage_free(m);
    cq_backend_free(be);
    return s;
}

static void test_qimage_table(void **st) {
    (void)st;
    cq_qimage_config c;
    cq_cmf *cmf = qimage_pack("qimage.cmf", NULL, &c);
    assert_int_equal(c.inner, 16);
    assert_int_equal(c.mlp_hidden, 64);
    assert_int_equal(c.out_dim, 16);
    assert_true(c.zero_cond_t);
    cq_tt_list t = {0};
    assert_int_equal(cq_qimage_tensors(&c, "dit.", &t), CQ_OK);
    assert_int_equal(t.n, 13 + 2 * 32); /* top level: 6 Linears and txt_norm; per block: 14 Linears and 4 norms */
    const cq_tt_entry *e = cq_tt_find(&t, "dit.transformer_blocks.1.txt_mlp.net.2.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 16);
    assert_int_equal(e->shape[1], 64);
    e = cq_tt_find(&t, "dit.transformer_blocks.0.img_mod.1.bias");
    assert_int_equal(e->codec, CQ_TT_VECTOR);
    assert_int_equal(e->shape[0], 96);
    e = cq_tt_find(&t, "dit.norm_out.linear.weight");
    assert_int_equal(e->shape[0], 32);
    e = cq_tt_find(&t, "dit.time_text_embed.timestep_embedder.linear_1.weight");
    assert_int_equal(e->shape[1], CQ_QIMAGE_TIMESTEP_CHANNELS);
    e = cq_tt_find(&t, "dit.transformer_blocks.0.attn.norm_added_k.weight");
    assert_int_equal(e->shape[0], 8);
    cq_tt_list_free(&t);
    assert_int_equal(load_qimage(cmf, true), CQ_OK);
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    cq_cmf_close(cmf);
}

static void test_qimage_bad_packs(void **st) {
    (void)st;
    cq_qimage_config c;
    change missing = {"dit.transformer_blocks.1.attn.to_add_out.bias", 0, NULL};
    cq_cmf *cmf = qimage_pack("qimage_missing.cmf", &missing, &c);
    expect_error(load_qimage(cmf, false), CQ_ERR_MISSING,
                 (const char *[]){"qimage: tensor 'dit.transformer_blocks.1.attn.to_add_out.bias' [16] is missing", NULL});
    cq_tt_report rep;
    int n;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(rep.missing, 1);
    cq_cmf_close(cmf);
    change shape = {"dit.txt_in.weight", 1, NULL};
    cmf = qimage_pack("qimage_shape.cmf", &shape, &c);
    expect_error(load_qimage(cmf, false), CQ_ERR_SHAPE,
                 (const char *[]){"qimage: tensor 'dit.txt_in.weight' has shape [16 x 13], the config implies [16 x 12]",
                                  NULL});
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(rep.mismatched, 1);
    cq_cmf_close(cmf);
    change codec = {"dit.txt_norm.weight", 2, NULL};
    cmf = qimage_pack("qimage_codec.cmf", &codec, &c);
    expect_error(load_qimage(cmf, false), CQ_ERR_DTYPE, (const char *[]){"'dit.txt_norm.weight' is stored as u8", NULL});
    cq_cmf_close(cmf);
}

/* ---- the text tower ------------------------------------------------------------------------- */
static void test_qwen3_pack(void **st) {
    (void)st;
    cq_qwen3_config c = {.vocab_size = 20, .hidden = 8, .intermediate = 12, .n_layers = 2, .n_heads = 2,
                         .n_kv_heads = 1, .head_dim = 4};
    cq_tt_list t = {0};
    assert_int_equal(cq_qwen3_tensors(&c, "te.", "model.", &t), CQ_OK);
    assert_int_equal(t.n, 2 + 2 * 11 + 1);
    const cq_tt_entry *e = cq_tt_find(&t, "te.model.layers.1.self_attn.k_proj.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 4); /* one key/value head of 4 */
    assert_int_equal(e->shape[1], 8);
    e = cq_tt_find(&t, "te.lm_head.weight");
    assert_non_null(e);
    assert_false(e->required);
    /* the Qwen2 family: q/k/v biases in place of the q/k norms, in layer order after o_proj */
    cq_qwen3_config c2 = c;
    c2.family = CQ_QWEN_FAMILY_2;
    cq_tt_list t2 = {0};
    assert_int_equal(cq_qwen3_tensors(&c2, "te.", "model.", &t2), CQ_OK);
    assert_int_equal(t2.n, 2 + 2 * 12 + 1);
    assert_null(cq_tt_find(&t2, "te.model.layers.0.self_attn.q_norm.weight"));
    e = cq_tt_find(&t2, "te.model.layers.1.self_attn.k_proj.bias");
    assert_non_null(e);
    assert_int_equal(e->ndim, 1);
    assert_int_equal(e->shape[0], 4);
    assert_int_equal(cq_tt_find(&t2, "te.model.layers.1.self_attn.q_proj.bias")->shape[0], 8);
    assert_ptr_equal(cq_tt_find(&t2, "te.model.layers.0.self_attn.q_proj.bias"), &t2.e[2 + 5]);
    cq_tt_list_free(&t2);
    const char *names[] = {"te.config_json"}, *cfgs[] = {k_te_cfg};
    for (int k = 0; k < 2; k++) {
        change ch = {"te.model.layers.0.self_attn.q_norm.weight", 0, NULL};
        cq_cmf *cmf = write_pack(k ? "te_missing.cmf" : "te.cmf", &t, true, names, cfgs, 1, k ? &ch : NULL);
        cq_backend *be;
        assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
        cq_qwen3 *m = NULL;
        cq_status s = cq_qwen3_load(cmf, "te.", be, &m);
        if (k)
            expect_error(s, CQ_ERR_MISSING,
                         (const char *[]){"qwen3: tensor 'te.model.layers.0.self_attn.q_norm.weight' [4] is missing",
                                          NULL});
        else
            assert_int_equal(s, CQ_OK);
        cq_qwen3_free(m);
        cq_backend_free(be);
        cq_tt_report rep;
        int n;
        assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
        assert_int_equal(n, 1);
        assert_int_equal(rep.missing, (size_t)k); /* the head is optional */
        cq_cmf_close(cmf);
    }
    cq_tt_list_free(&t);
}

/* ---- the VAE -------------------------------------------------------------------------------- */
static void test_vae_pack(void **st) {
    (void)st;
    cq_qi21_vae_geometry g = {.base_dim = 4, .decoder_base_dim = 4, .z_dim = 4, .num_res_blocks = 1,
                              .in_channels = 3, .out_channels = 3, .patch = 1, .n_mult = 2, .mult = {1, 2},
                              .tdown = {true}};
    cq_tt_list t = {0};
    assert_int_equal(cq_qi21_vae_tensors(&g, "vae.", &t), CQ_OK);
    const cq_tt_entry *e = cq_tt_find(&t, "vae.decoder.up_blocks.0.resnets.0.conv1.weight");
    assert_non_null(e); /* decoder level 0: 8 -> 8 channels (decoder_base x dim_mult[-1]) */
    assert_int_equal(e->shape[0], 8);
    assert_int_equal(e->shape[1], 8);
    assert_int_equal(e->codec, CQ_TT_KERNEL);
    e = cq_tt_find(&t, "vae.decoder.up_blocks.1.resnets.0.conv_shortcut.weight");
    assert_non_null(e); /* level 1: 8 -> 4 channels, so a shortcut */
    assert_int_equal(e->shape[1], 8);
    assert_int_equal(e->shape[0], 4);
    e = cq_tt_find(&t, "vae.encoder.conv_in.weight");
    assert_false(e->required);
    e = cq_tt_find(&t, "vae.decoder.up_blocks.0.upsampler.time_conv.weight");
    assert_non_null(e);
    assert_false(e->required);
    const char *names[] = {"vae.config_json"}, *cfgs[] = {k_vae_cfg};
    cq_cmf *cmf = write_pack("vae.cmf", &t, true, names, cfgs, 1, NULL); /* no encoder */
    cq_qi21_vae_geometry pg;
    assert_int_equal(cq_qi21_vae_parse_geometry(cmf, "vae.", &pg), CQ_OK);
    assert_int_equal(pg.n_mult, 2);
    assert_int_equal(pg.mult[1], 2);
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_qi21_vae *v = NULL;
    if (cq_qi21_vae_load(cmf, "vae.", be, &v) != CQ_OK) fail_msg("vae load: %s", cq_last_error());
    assert_false(cq_qi21_vae_get_config(v)->has_encoder);
    cq_qi21_vae_free(v);
    cq_cmf_close(cmf);
    change ch = {"vae.decoder.mid_block.attentions.0.to_qkv.weight", 1, NULL};
    cmf = write_pack("vae_shape.cmf", &t, true, names, cfgs, 1, &ch);
    v = NULL;
    expect_error(cq_qi21_vae_load(cmf, "vae.", be, &v), CQ_ERR_SHAPE,
                 (const char *[]){"vae: tensor 'vae.decoder.mid_block.attentions.0.to_qkv.weight' has shape "
                                  "[24 x 9 x 1 x 1], the config implies [24 x 8 x 1 x 1]",
                                  NULL});
    assert_null(v);
    cq_cmf_close(cmf);
    cq_backend_free(be);
    cq_tt_list_free(&t);
}

/* ---- the reference's own names ------------------------------------------------------------- */
static void print_note(void *user, const char *line) {
    (void)user;
    print_message("  %s\n", line);
}

/* A pack against the tables: every component known, nothing missing, unexpected or mis-shaped. */
static void expect_clean(const cq_cmf *cmf, const char *what, int components) {
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(cmf, print_note, NULL, &rep, &n), CQ_OK);
    if (n != components || rep.missing || rep.unexpected || rep.mismatched)
        fail_msg("%s: %d components checked (expected %d), %zu missing, %zu unexpected, %zu mismatched", what, n,
                 components, rep.missing, rep.unexpected, rep.mismatched);
}

/* The golden folders hold the reference implementations' own state dicts (diffusers' save_pretrained,
 * transformers' save_pretrained): converted, each matches its table exactly. */
/* ---- LTX-2's audio-video denoiser ------------------------------------------------------------- */
/* The flags the golden model does not take: video 2 x 8 without gates or query modulation and with FF biases;
 * audio 2 x 4 with gates, the 9-row adaLN and no FF biases; the prompt tables and the prompt adaLN-single. */
static const char k_lx_cfg[] =
    "{\"_class_name\":\"LTX2VideoTransformer3DModel\",\"in_channels\":4,\"out_channels\":3,"
    "\"num_attention_heads\":2,\"attention_head_dim\":8,\"cross_attention_dim\":16,\"audio_in_channels\":6,"
    "\"audio_out_channels\":5,\"audio_num_attention_heads\":2,\"audio_attention_head_dim\":4,"
    "\"audio_cross_attention_dim\":8,\"num_layers\":2,\"gated_attn\":false,\"cross_attn_mod\":false,"
    "\"audio_gated_attn\":true,\"audio_cross_attn_mod\":true,\"ff_bias\":true,\"audio_ff_bias\":false,"
    "\"rope_type\":\"split\",\"use_prompt_embeddings\":false,\"perturbed_attn\":true}";

static cq_cmf *ltx2_pack(const char *leaf, const change *ch, cq_ltx2_config *c) {
    const char *names[] = {"dit.config_json"}, *cfgs[] = {k_lx_cfg};
    cq_tt_list none = {0};
    cq_cmf *cfg_only = write_pack("lx_cfg.cmf", &none, false, names, cfgs, 1, NULL);
    assert_int_equal(cq_ltx2_parse_config(cfg_only, "dit.", c), CQ_OK);
    cq_cmf_close(cfg_only);
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_tensors(c, "dit.", &t), CQ_OK);
    cq_cmf *cmf = write_pack(leaf, &t, false, names, cfgs, 1, ch);
    cq_tt_list_free(&t);
    return cmf;
}

static cq_status load_ltx2(cq_cmf *cmf, bool run) {
    cq_backend *be;
    assert_int_equal(cq_backend_create("cpu", 1, &be), CQ_OK);
    cq_ltx2 *m = NULL;
    cq_status s = cq_ltx2_load(cmf, "dit.", be, &m);
    assert_true((s == CQ_OK) == (m != NULL));
    if (s == CQ_OK && run) {
        /* 2 latent frames of 1 x 2 with the first frame at timestep 0, 3 audio frames, STG in block 1 */
        float vid[4 * 4], aud[3 * 6], ctx[2 * 16], actx[3 * 8], vo[4 * 3], ao[3 * 5];
        for (int i = 0; i < 16; i++) vid[i] = 0.1f * (float)(i % 7) - 0.3f;
        for (int i = 0; i < 18; i++) aud[i] = 0.07f * (float)(i % 5) - 0.1f;
        for (int i = 0; i < 32; i++) ctx[i] = 0.05f * (float)(i % 5);
        for (int i = 0; i < 24; i++) actx[i] = 0.03f * (float)(i % 4);
        const float ts[4] = {0.0f, 0.0f, 600.0f, 600.0f}, ats[1] = {400.0f};
        const int stg[1] = {1};
        const cq_ltx2_inputs in = {.video = vid, .frames = 2, .height = 1, .width = 2, .fps = 24.0, .audio = aud,
                                   .audio_frames = 3, .ctx = ctx, .n_ctx = 2, .audio_ctx = actx, .n_audio_ctx = 3,
                                   .timestep = ts, .n_timestep = 4, .audio_timestep = ats, .n_audio_timestep = 1,
                                   .sigma = 600.0f, .audio_sigma = 400.0f, .use_cross_timestep = true,
                                   .stg_blocks = stg, .n_stg_blocks = 1};
        assert_int_equal(cq_ltx2_forward(m, &in, vo, ao), CQ_OK);
        for (int i = 0; i < 12; i++) assert_true(isfinite(vo[i]));
        for (int i = 0; i < 15; i++) assert_true(isfinite(ao[i]));
    }
    cq_ltx2_free(m);
    cq_backend_free(be);
    return s;
}

static void test_ltx2_table(void **st) {
    (void)st;
    cq_ltx2_config c;
    cq_cmf *cmf = ltx2_pack("lx.cmf", NULL, &c);
    assert_int_equal(c.dim, 16);
    assert_int_equal(c.audio_dim, 8);
    assert_true(c.prompt_adaln);
    cq_tt_list t = {0};
    assert_int_equal(cq_ltx2_tensors(&c, "dit.", &t), CQ_OK);
    /* top level: 4 projections in, 4 A<->V adaLN-singles, 2 tables, 4 projections out, 2 main and 2 prompt
     * adaLN-singles (6 each); per layer: 6 attentions, 4 FF matrices, 4 tables, the audio gates, the video FF
     * biases, the prompt tables */
    assert_int_equal(t.n, 4 + 24 + 2 + 4 + 24 + 2 * (60 + 4 + 4 + 6 + 2 + 2));
    const cq_tt_entry *e = cq_tt_find(&t, "dit.transformer_blocks.1.audio_to_video_attn.to_out.0.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 16);
    assert_int_equal(e->shape[1], 8);
    e = cq_tt_find(&t, "dit.transformer_blocks.0.video_to_audio_attn.to_gate_logits.weight");
    assert_non_null(e);
    assert_int_equal(e->shape[0], 2);
    assert_int_equal(e->shape[1], 8);
    assert_null(cq_tt_find(&t, "dit.transformer_blocks.0.audio_to_video_attn.to_gate_logits.weight"));
    e = cq_tt_find(&t, "dit.transformer_blocks.0.scale_shift_table");
    assert_int_equal(e->shape[0], 6);
    e = cq_tt_find(&t, "dit.transformer_blocks.0.audio_scale_shift_table");
    assert_int_equal(e->shape[0], 9);
    e = cq_tt_find(&t, "dit.time_embed.linear.weight");
    assert_int_equal(e->shape[0], 6 * 16);
    assert_non_null(cq_tt_find(&t, "dit.transformer_blocks.1.ff.net.2.bias"));
    assert_null(cq_tt_find(&t, "dit.transformer_blocks.1.audio_ff.net.2.bias"));
    cq_tt_list_free(&t);
    assert_int_equal(load_ltx2(cmf, true), CQ_OK);
    cq_tt_report rep;
    int n = -1;
    assert_int_equal(cq_tables_check_pack(cmf, NULL, NULL, &rep, &n), CQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rep.missing + rep.unexpected + rep.mismatched, 0);
    cq_cmf_close(cmf);
    cq_ltx2_config c2;
    change missing = {"dit.transformer_blocks.1.audio_prompt_scale_shift_table", 0, NULL};
    cmf = ltx2_pack("lx_missing.cmf", &missing, &c2);
    expect_error(load_ltx2(cmf, false), CQ_ERR_MISSING,
                 (const char *[]){"ltx2: tensor 'dit.transformer_blocks.1.audio_prompt_scale_shift_table' [2 x 8] is "
                                  "missing", NULL});
    cq_cmf_close(cmf);
    change shape = {"dit.audio_proj_in.weight", 1, NULL};
    cmf = ltx2_pack("lx_shape.cmf", &shape, &c2);
    expect_error(load_ltx2(cmf, false), CQ_ERR_SHAPE,
                 (const char *[]){"'dit.audio_proj_in.weight' has shape [8 x 7], the config implies [8 x 6]", NULL});
    cq_cmf_close(cmf);
}

static void test_golden_folders_match_tables(void **st) {
    (void)st;
    static const char *const dirs[] = {"qi21/tiny_a",    "qi21/tiny_b",   "vae/vae_a",     "vae/vae_b",
                                       "qwen3/qwen3_a",  "qwen3/qwen3_b", "qwen3/qwen3vl_a", "qwen3/qwen25vl_a",
                                       "zimage/dit_a",   "zimage/dit_b",  "zimage/vae_a",  "zimage/vae_b",
                                       "zimage/pipeline", "qimage/dit",   "qimage_vae/vae", "qwen25vl_vision/model",
                                       "qwen3vl_vision/model", "ltx2_dit/model"};
    int done = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s/tests/golden/%s", CQ_SOURCE_DIR, dirs[i]);
        FILE *f = fopen(src, "r");
        if (!f) continue; /* a checkout without the golden data */
        fclose(f);
        if (strstr(dirs[i], "pipeline") && !cq_gz_available()) {
            print_message("%s left out: its tokenizer is tokenizer.json.gz and this build has no zlib\n", dirs[i]);
            continue;
        }
        char leaf[64];
        snprintf(leaf, sizeof leaf, "golden_%zu.cmf", i);
        const char *out = tu_path(tu_tmpdir("tensor_tables"), leaf);
        cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
        cq_convert_report rep;
        cq_status s = cq_convert(src, out, &opts, &rep);
        cq_convert_report_free(&rep);
        if (s != CQ_OK) fail_msg("convert %s: %s", dirs[i], cq_last_error());
        cq_cmf *cmf;
        assert_int_equal(cq_cmf_open(out, &cmf), CQ_OK);
        /* a pipeline: dit., te., vae.; a Qwen2.5-VL or Qwen3-VL model: its text tower and its vision tower */
        const bool vl = strstr(dirs[i], "qwen25vl") || strstr(dirs[i], "qwen3vl");
        expect_clean(cmf, dirs[i], strstr(dirs[i], "pipeline") ? 3 : vl ? 2 : 1);
        cq_cmf_close(cmf);
        done++;
    }
    if (!done) skip();
}

/* The shipped model: a whole pipeline (denoiser, text tower, VAE). */
static void test_shipped_pipeline_matches_tables(void **st) {
    (void)st;
    cq_cmf *cmf;
    if (cq_cmf_open(CQ_SOURCE_DIR "/models/shapes.cmf", &cmf) != CQ_OK) skip();
    expect_clean(cmf, "models/shapes.cmf", 3);
    cq_cmf_close(cmf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_patterns),
        cmocka_unit_test(test_check_policies),
        cmocka_unit_test(test_qi21_table),
        cmocka_unit_test(test_qi21_pack_loads_and_checks_clean),
        cmocka_unit_test(test_qi21_missing_tensor),
        cmocka_unit_test(test_qi21_wrong_shape),
        cmocka_unit_test(test_qi21_wrong_codec),
        cmocka_unit_test(test_qi21_unexpected_tensor),
        cmocka_unit_test(test_zimage_table),
        cmocka_unit_test(test_zimage_bad_packs),
        cmocka_unit_test(test_qimage_table),
        cmocka_unit_test(test_qimage_bad_packs),
        cmocka_unit_test(test_ltx2_table),
        cmocka_unit_test(test_qwen3_pack),
        cmocka_unit_test(test_vae_pack),
        cmocka_unit_test(test_golden_folders_match_tables),
        cmocka_unit_test(test_shipped_pipeline_matches_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
