/*
 * bench_pack.c — random-weight packs for the model benchmarks and the
 * temporary file they live in (see bench_pack.h).
 *
 * Payloads are random bytes in the codec's exact layout with the scales set
 * for unit variance, so writing a 16 GB pack costs about what the disk
 * costs: no float is quantized. The file is created under $TMPDIR, opened
 * (mmap, zero-copy, as a real model is) and unlinked at once; while it is
 * being written a signal handler removes it if the process is interrupted.
 */
#include "cli/bench_pack.h"
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "codec/codec.h"
#include "format/cmf.h"
#include "models/tables.h"

/* ---- the list ---------------------------------------------------------------------------- */
static cq_status addv(cq_bench_pack *p, cq_dtype dt, int ndim, const uint64_t *shape, float base, const char *fmt,
                      va_list ap) {
    if (ndim < 1 || ndim > 4) return cq_fail(CQ_ERR_INVALID_ARG, "bench pack: %d dimensions", ndim);
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        cq_bench_weight *w = cq_reallocn(p->w, cap, sizeof *w);
        if (!w) return CQ_ERR_NOMEM;
        p->w = w;
        p->cap = cap;
    }
    cq_bench_weight *w = &p->w[p->n];
    memset(w, 0, sizeof *w);
    int k = vsnprintf(w->name, sizeof w->name, fmt, ap);
    if (k < 0 || (size_t)k >= sizeof w->name) return cq_fail(CQ_ERR_INVALID_ARG, "bench pack: tensor name too long");
    w->dtype = dt;
    w->ndim = ndim;
    memcpy(w->shape, shape, (size_t)ndim * sizeof *shape);
    w->base = base;
    p->n++;
    return CQ_OK;
}

cq_status cq_bench_pack_add(cq_bench_pack *p, cq_dtype dt, int ndim, const uint64_t *shape, float base,
                            const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cq_status s = addv(p, dt, ndim, shape, base, fmt, ap);
    va_end(ap);
    return s;
}

void cq_bench_pack_free(cq_bench_pack *p) {
    if (!p) return;
    cq_free(p->w);
    memset(p, 0, sizeof *p);
}

static uint64_t weight_bytes(const cq_bench_weight *w) {
    uint64_t nb = 0;
    return cq_codec_nbytes(w->dtype, w->ndim, w->shape, &nb) == CQ_OK ? nb : 0;
}

uint64_t cq_bench_pack_bytes(const cq_bench_pack *p) {
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) total += weight_bytes(&p->w[i]);
    return total;
}

/* ---- from a tensor table ------------------------------------------------------------------- */
cq_status cq_bench_pack_table(cq_bench_pack *p, const cq_tt_list *t, cq_dtype quant) {
    for (size_t i = 0; i < t->n; i++) {
        const cq_tt_entry *e = &t->e[i];
        if (e->subtree) continue; /* another component's tensors, not listed one by one */
        /* matrices in the chosen quantization, vectors f32, kernels f16 (as `cortiq convert` stores them) */
        cq_dtype dt = e->codec == CQ_TT_MATRIX ? quant : e->codec == CQ_TT_KERNEL ? CQ_DTYPE_F16 : CQ_DTYPE_F32;
        CQ_TRY(cq_bench_pack_add(p, dt, e->ndim, e->shape, e->base, "%s", e->name));
    }
    return CQ_OK;
}

/* The table t into p when `listed` (what made t) is CQ_OK, then t freed either way. */
static cq_status pack_listed(cq_bench_pack *p, cq_status listed, cq_tt_list *t, cq_dtype quant) {
    cq_status s = listed == CQ_OK ? cq_bench_pack_table(p, t, quant) : listed;
    cq_tt_list_free(t);
    return s;
}

/* ---- the released denoiser ------------------------------------------------------------------ */
cq_status cq_bench_dit_weights(cq_bench_pack *p, cq_dtype q, int layers) {
    const int D = CQ_BENCH_DIT_HEADS * CQ_BENCH_DIT_HEAD_DIM;
    const cq_qi21_config c = {.in_channels = CQ_BENCH_DIT_CH, .out_channels = CQ_BENCH_DIT_CH, .num_layers = layers,
                              .n_heads = CQ_BENCH_DIT_HEADS, .head_dim = CQ_BENCH_DIT_HEAD_DIM, .inner = D,
                              .context_in_dim = CQ_BENCH_DIT_CTX, .mlp_hidden = D * CQ_BENCH_DIT_RATIO};
    _Static_assert(CQ_BENCH_DIT_TPROJ == CQ_QI21_TIMESTEP_CHANNELS, "the table's timestep width");
    cq_tt_list t = {0};
    return pack_listed(p, cq_qi21_tensors(&c, "dit.", &t), &t, q);
}

int cq_bench_dit_config(char *buf, size_t len, int layers) {
    int k = snprintf(buf, len,
                     "{\"_class_name\": \"QwenImage21Transformer2DModel\", \"patch_size\": 1, \"in_channels\": %d, "
                     "\"out_channels\": %d, \"num_layers\": %d, \"attention_head_dim\": %d, \"num_attention_heads\": %d, "
                     "\"context_in_dim\": %d, \"mlp_ratio\": %d, \"axes_dims_rope\": [16, 56, 56], \"eps\": 1e-06, "
                     "\"causal_condition\": true}",
                     CQ_BENCH_DIT_CH, CQ_BENCH_DIT_CH, layers, CQ_BENCH_DIT_HEAD_DIM, CQ_BENCH_DIT_HEADS,
                     CQ_BENCH_DIT_CTX, CQ_BENCH_DIT_RATIO);
    return k < 0 || (size_t)k >= len ? -1 : k;
}

/* ---- the released Qwen-Image denoiser ------------------------------------------------------------ */
void cq_bench_qimage_config(cq_qimage_config *c, int heads, int layers) {
    const int D = heads * 128;
    *c = (cq_qimage_config){.patch = 2, .in_channels = 4 * CQ_BENCH_QIMAGE_Z, .out_channels = CQ_BENCH_QIMAGE_Z,
                            .out_dim = 4 * CQ_BENCH_QIMAGE_Z, .num_layers = layers, .n_heads = heads, .head_dim = 128,
                            .inner = D, .mlp_hidden = 4 * D, .joint_dim = CQ_BENCH_QIMAGE_CTX, .axes = {16, 56, 56}};
}

cq_status cq_bench_qimage_weights(cq_bench_pack *p, cq_dtype q, const cq_qimage_config *c) {
    cq_tt_list t = {0};
    return pack_listed(p, cq_qimage_tensors(c, "dit.", &t), &t, q);
}

int cq_bench_qimage_config_json(char *buf, size_t len, const cq_qimage_config *c) {
    int k = snprintf(buf, len,
                     "{\"_class_name\": \"QwenImageTransformer2DModel\", \"patch_size\": %d, \"in_channels\": %d, "
                     "\"out_channels\": %d, \"num_layers\": %d, \"attention_head_dim\": %d, "
                     "\"num_attention_heads\": %d, \"joint_attention_dim\": %d, \"pooled_projection_dim\": 768, "
                     "\"guidance_embeds\": false, \"axes_dims_rope\": [%d, %d, %d], \"zero_cond_t\": %s}",
                     c->patch, c->in_channels, c->out_channels, c->num_layers, c->head_dim, c->n_heads, c->joint_dim,
                     c->axes[0], c->axes[1], c->axes[2], c->zero_cond_t ? "true" : "false");
    return k < 0 || (size_t)k >= len ? -1 : k;
}

cq_status cq_bench_qimage_dit_weights(cq_bench_pack *p, cq_dtype q, int layers) {
    cq_qimage_config c;
    cq_bench_qimage_config(&c, CQ_BENCH_QIMAGE_HEADS, layers);
    return cq_bench_qimage_weights(p, q, &c);
}

int cq_bench_qimage_dit_config(char *buf, size_t len, int layers) {
    cq_qimage_config c;
    cq_bench_qimage_config(&c, CQ_BENCH_QIMAGE_HEADS, layers);
    return cq_bench_qimage_config_json(buf, len, &c);
}

/* ---- the released Qwen2.5-VL-7B vision tower ------------------------------------------------------- */
void cq_bench_vision_config(cq_qwen25vl_vision_config *c, int depth) {
    memset(c, 0, sizeof *c);
    c->depth = depth;
    c->hidden = CQ_BENCH_VISION_HIDDEN;
    c->intermediate = CQ_BENCH_VISION_MLP;
    c->n_heads = CQ_BENCH_VISION_HEADS;
    c->head_dim = CQ_BENCH_VISION_HIDDEN / CQ_BENCH_VISION_HEADS;
    c->out_hidden = CQ_BENCH_QIMAGE_CTX;
    c->patch = 14;
    c->temporal_patch = 2;
    c->merge = 2;
    c->in_channels = 3;
    c->window = 112;
    c->window_units = 112 / 2 / 14;
    for (int b = 7; b < depth; b += 8) c->full[c->n_full++] = b; /* 7, 15, 23, 31 */
    c->eps = 1e-6f;
    c->rope_theta = 10000.0;
}

cq_status cq_bench_vision_weights(cq_bench_pack *p, cq_dtype q, const cq_qwen25vl_vision_config *c) {
    cq_tt_list t = {0};
    return pack_listed(p, cq_qwen25vl_vision_tensors(c, "te.", "model.visual.", &t), &t, q);
}

int cq_bench_vision_config_object(char *buf, size_t len, const cq_qwen25vl_vision_config *c) {
    int k = snprintf(buf, len,
                     "{\"model_type\": \"qwen2_5_vl\", \"depth\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
                     "\"num_heads\": %d, \"out_hidden_size\": %d, \"patch_size\": %d, \"temporal_patch_size\": %d, "
                     "\"spatial_merge_size\": %d, \"in_channels\": %d, \"window_size\": %d, \"hidden_act\": \"silu\", "
                     "\"fullatt_block_indexes\": [",
                     c->depth, c->hidden, c->intermediate, c->n_heads, c->out_hidden, c->patch, c->temporal_patch,
                     c->merge, c->in_channels, c->window);
    for (int i = 0; k > 0 && (size_t)k < len && i < c->n_full; i++)
        k += snprintf(buf + k, len - (size_t)k, "%s%d", i ? ", " : "", c->full[i]);
    if (k > 0 && (size_t)k < len) k += snprintf(buf + k, len - (size_t)k, "], \"tokens_per_second\": 2}");
    return k < 0 || (size_t)k >= len ? -1 : k;
}

int cq_bench_vision_config_json(char *buf, size_t len, const cq_qwen25vl_vision_config *c) {
    int k = snprintf(buf, len, "{\"model_type\": \"qwen2_5_vl\", \"vision_config\": ");
    if (k < 0 || (size_t)k >= len) return -1;
    int v = cq_bench_vision_config_object(buf + k, len - (size_t)k, c);
    if (v < 0 || (size_t)(k + v) + 1 >= len) return -1;
    buf[k + v] = '}';
    buf[k + v + 1] = '\0';
    return k + v + 1;
}

/* ---- the released Z-Image denoiser ------------------------------------------------------------ */
void cq_bench_zimage_config(cq_zimage_config *c, int heads, int layers) {
    const int D = 128 * heads;
    *c = (cq_zimage_config){.in_channels = 16, .patch_channels = 64, .dim = D, .n_heads = heads, .head_dim = 128,
                            .n_layers = layers, .n_refiner_layers = CQ_BENCH_ZI_REFINERS,
                            .ffn_hidden = (int)((double)D / 3.0 * 8.0), .adaln_dim = D < 256 ? D : 256,
                            .cap_feat_dim = CQ_BENCH_ZI_CAP, .axes_dims = {32, 48, 48}, .axes_lens = {1536, 512, 512},
                            .rope_theta = 256.0, .t_scale = 1000.0f, .norm_eps = 1e-5f};
}

cq_status cq_bench_zimage_weights(cq_bench_pack *p, cq_dtype q, const cq_zimage_config *c) {
    cq_tt_list t = {0};
    return pack_listed(p, cq_zimage_tensors(c, "dit.", &t), &t, q);
}

int cq_bench_zimage_config_json(char *buf, size_t len, const cq_zimage_config *c) {
    int k = snprintf(buf, len,
                     "{\"_class_name\": \"ZImageTransformer2DModel\", \"all_patch_size\": [2], \"all_f_patch_size\": [1], "
                     "\"in_channels\": %d, \"dim\": %d, \"n_layers\": %d, \"n_refiner_layers\": %d, \"n_heads\": %d, "
                     "\"n_kv_heads\": %d, \"norm_eps\": 1e-05, \"qk_norm\": true, \"cap_feat_dim\": %d, "
                     "\"rope_theta\": 256.0, \"t_scale\": 1000.0, \"axes_dims\": [%d, %d, %d], \"axes_lens\": [%d, %d, %d]}",
                     c->in_channels, c->dim, c->n_layers, c->n_refiner_layers, c->n_heads, c->n_heads, c->cap_feat_dim,
                     c->axes_dims[0], c->axes_dims[1], c->axes_dims[2], c->axes_lens[0], c->axes_lens[1],
                     c->axes_lens[2]);
    return k < 0 || (size_t)k >= len ? -1 : k;
}

/* ---- LTX-2.5's audio-video denoiser ------------------------------------------------------ */
int cq_bench_ltx2_config_json(char *buf, size_t len, int layers) {
    int k = snprintf(
        buf, len,
        "{\"_class_name\": \"LTX2VideoTransformer3DModel\", \"in_channels\": 128, \"out_channels\": 128, "
        "\"patch_size\": 1, \"patch_size_t\": 1, \"num_attention_heads\": %d, \"attention_head_dim\": 128, "
        "\"cross_attention_dim\": %d, \"vae_scale_factors\": [8, 32, 32], \"pos_embed_max_pos\": 20, "
        "\"base_height\": 2048, \"base_width\": 2048, \"gated_attn\": true, \"cross_attn_mod\": true, "
        "\"audio_in_channels\": 128, \"audio_out_channels\": 128, \"audio_patch_size\": 1, "
        "\"audio_patch_size_t\": 1, \"audio_num_attention_heads\": %d, \"audio_attention_head_dim\": 64, "
        "\"audio_cross_attention_dim\": %d, \"audio_scale_factor\": 4, \"audio_pos_embed_max_pos\": 20, "
        "\"audio_sampling_rate\": 16000, \"audio_hop_length\": 160, \"audio_gated_attn\": true, "
        "\"audio_cross_attn_mod\": true, \"num_layers\": %d, \"activation_fn\": \"gelu-approximate\", "
        "\"qk_norm\": \"rms_norm_across_heads\", \"norm_elementwise_affine\": false, \"norm_eps\": 1e-06, "
        "\"caption_channels\": 3840, \"attention_bias\": true, \"attention_out_bias\": true, "
        "\"rope_theta\": 10000.0, \"rope_double_precision\": true, \"causal_offset\": 1, "
        "\"timestep_scale_multiplier\": 1000, \"cross_attn_timestep_scale_multiplier\": 1000, "
        "\"rope_type\": \"split\", \"use_prompt_embeddings\": false, \"perturbed_attn\": true, "
        "\"ff_bias\": false, \"audio_ff_bias\": true, \"use_prompt_adaln_single\": true, "
        "\"use_keyframes_abs_pos_embedding\": true}",
        CQ_BENCH_LTX2_HEADS, CQ_BENCH_LTX2_HEADS * 128, CQ_BENCH_LTX2_HEADS, CQ_BENCH_LTX2_HEADS * 64, layers);
    return k < 0 || (size_t)k >= len ? -1 : k;
}

cq_status cq_bench_ltx2_weights(cq_bench_pack *p, cq_dtype q, const cq_ltx2_config *c) {
    cq_tt_list t = {0};
    return pack_listed(p, cq_ltx2_tensors(c, "dit.", &t), &t, q);
}

/* ---- the released Qwen-Image-2.1 VAE --------------------------------------------------- */
static const int k_vae_mult[CQ_BENCH_VAE_LEVELS] = {1, 2, 4, 8, 8};
static const bool k_vae_tdown[CQ_BENCH_VAE_LEVELS - 1] = {false, true, true, true};

/* Every tensor of AutoencoderKLQwenImage21 as converted (the temporal convs too, which a
 * single frame never runs, so the file has the real size). */
cq_status cq_bench_vae_weights(cq_bench_pack *p) {
    cq_qi21_vae_geometry g = {.base_dim = CQ_BENCH_VAE_BASE, .decoder_base_dim = CQ_BENCH_VAE_DEC_BASE,
                              .z_dim = CQ_BENCH_VAE_Z, .num_res_blocks = CQ_BENCH_VAE_RES,
                              .in_channels = CQ_BENCH_VAE_IO, .out_channels = CQ_BENCH_VAE_IO, .patch = 1,
                              .n_mult = CQ_BENCH_VAE_LEVELS};
    for (int i = 0; i < CQ_BENCH_VAE_LEVELS; i++) g.mult[i] = k_vae_mult[i];
    for (int i = 0; i < CQ_BENCH_VAE_LEVELS - 1; i++) g.tdown[i] = k_vae_tdown[i];
    cq_tt_list t = {0};
    return pack_listed(p, cq_qi21_vae_tensors(&g, "vae.", &t), &t, CQ_DTYPE_F16);
}

/* A VAE config object with the latent statistics mean[z] and std[z], or random ones for z channels when NULL. */
static cJSON *vae_config_stats(int z, const double *mean_v, const double *std_v) {
    cJSON *j = cJSON_CreateObject(), *mean = cJSON_AddArrayToObject(j, "latents_mean"),
          *std = cJSON_AddArrayToObject(j, "latents_std");
    uint64_t rng = 777;
    for (int i = 0; i < z; i++) {
        double m = 0.4 * cq_bench_rng_unit(&rng), d = 1.0 + 0.8 * cq_bench_rng_unit(&rng);
        cJSON_AddItemToArray(mean, cJSON_CreateNumber(mean_v ? mean_v[i] : m));
        cJSON_AddItemToArray(std, cJSON_CreateNumber(std_v ? std_v[i] : d));
    }
    return j;
}

char *cq_bench_vae_config(void) {
    cJSON *j = vae_config_stats(CQ_BENCH_VAE_Z, NULL, NULL);
    cJSON_AddStringToObject(j, "_class_name", "AutoencoderKLQwenImage21");
    cJSON_AddItemToObject(j, "attn_scales", cJSON_CreateArray());
    cJSON_AddNumberToObject(j, "base_dim", CQ_BENCH_VAE_BASE);
    cJSON_AddNumberToObject(j, "decoder_base_dim", CQ_BENCH_VAE_DEC_BASE);
    cJSON_AddItemToObject(j, "dim_mult", cJSON_CreateIntArray(k_vae_mult, CQ_BENCH_VAE_LEVELS));
    cJSON_AddNumberToObject(j, "dropout", 0.0);
    cJSON_AddNumberToObject(j, "in_channels", CQ_BENCH_VAE_IO);
    cJSON_AddBoolToObject(j, "is_residual", true);
    cJSON_AddNumberToObject(j, "num_res_blocks", CQ_BENCH_VAE_RES);
    cJSON_AddNumberToObject(j, "out_channels", CQ_BENCH_VAE_IO);
    cJSON_AddNullToObject(j, "patch_size");
    cJSON_AddNumberToObject(j, "scale_factor_spatial", 16);
    cJSON_AddNumberToObject(j, "scale_factor_temporal", 8);
    cJSON *td = cJSON_AddArrayToObject(j, "temperal_downsample");
    for (int i = 0; i < CQ_BENCH_VAE_LEVELS - 1; i++) cJSON_AddItemToArray(td, cJSON_CreateBool(k_vae_tdown[i]));
    cJSON_AddNumberToObject(j, "z_dim", CQ_BENCH_VAE_Z);
    char *s = cJSON_PrintUnformatted(j); /* NULL when any allocation above failed */
    cJSON_Delete(j);
    return s;
}

/* ---- the released Qwen-Image VAE ------------------------------------------------------------ */
static const int k_qimage_mult[4] = {1, 2, 4, 4};

cq_status cq_bench_qimage_vae_weights(cq_bench_pack *p) {
    cq_qi21_vae_geometry g = {.kind = CQ_QI21_VAE_QIMAGE, .base_dim = 96, .decoder_base_dim = 96,
                              .z_dim = CQ_BENCH_QIMAGE_Z, .num_res_blocks = 2, .in_channels = 3, .out_channels = 3,
                              .patch = 1, .n_mult = 4, .tdown = {false, true, true}};
    for (int i = 0; i < 4; i++) g.mult[i] = k_qimage_mult[i];
    cq_tt_list t = {0};
    return pack_listed(p, cq_qi21_vae_tensors(&g, "vae.", &t), &t, CQ_DTYPE_F16);
}

/* AutoencoderKLQwenImage's published per-channel statistics (its class defaults, which the released config
 * repeats) */
static const double k_qimage_mean[CQ_BENCH_QIMAGE_Z] = {-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517,
                                                        1.5508,  0.4134,  -0.0715, 0.5517, -0.3632, -0.1922, -0.9497,
                                                        0.2503,  -0.2921};
static const double k_qimage_std[CQ_BENCH_QIMAGE_Z] = {2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                                                       3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160};

char *cq_bench_qimage_vae_config(void) {
    cJSON *j = vae_config_stats(CQ_BENCH_QIMAGE_Z, k_qimage_mean, k_qimage_std);
    cJSON_AddStringToObject(j, "_class_name", "AutoencoderKLQwenImage");
    cJSON_AddItemToObject(j, "attn_scales", cJSON_CreateArray());
    cJSON_AddNumberToObject(j, "base_dim", 96);
    cJSON_AddItemToObject(j, "dim_mult", cJSON_CreateIntArray(k_qimage_mult, 4));
    cJSON_AddNumberToObject(j, "input_channels", 3);
    cJSON_AddNumberToObject(j, "num_res_blocks", 2);
    cJSON *td = cJSON_AddArrayToObject(j, "temperal_downsample");
    for (int i = 0; i < 3; i++) cJSON_AddItemToArray(td, cJSON_CreateBool(i > 0));
    cJSON_AddNumberToObject(j, "z_dim", CQ_BENCH_QIMAGE_Z);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

/* ---- the Flux VAE ------------------------------------------------------------------------ */
static const int k_flux_channels[CQ_BENCH_FLUX_VAE_LEVELS] = {128, 256, 512, 512};

static cq_flux_vae_config flux_config(void) {
    cq_flux_vae_config c = {.in_channels = 3, .out_channels = 3, .latent_channels = CQ_BENCH_FLUX_VAE_Z,
                            .n_levels = CQ_BENCH_FLUX_VAE_LEVELS, .layers_per_block = CQ_BENCH_FLUX_VAE_LAYERS,
                            .norm_num_groups = CQ_BENCH_FLUX_VAE_GROUPS, .mid_attention = true};
    for (int i = 0; i < CQ_BENCH_FLUX_VAE_LEVELS; i++) c.block_out_channels[i] = k_flux_channels[i];
    return c;
}

cq_status cq_bench_flux_vae_weights(cq_bench_pack *p) {
    const cq_flux_vae_config c = flux_config();
    cq_tt_list t = {0};
    return pack_listed(p, cq_flux_vae_tensors(&c, "vae.", &t), &t, CQ_DTYPE_F16);
}

char *cq_bench_flux_vae_config(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "_class_name", "AutoencoderKL");
    cJSON_AddStringToObject(j, "act_fn", "silu");
    cJSON_AddItemToObject(j, "block_out_channels", cJSON_CreateIntArray(k_flux_channels, CQ_BENCH_FLUX_VAE_LEVELS));
    cJSON *down = cJSON_AddArrayToObject(j, "down_block_types"), *up = cJSON_AddArrayToObject(j, "up_block_types");
    for (int i = 0; i < CQ_BENCH_FLUX_VAE_LEVELS; i++) {
        cJSON_AddItemToArray(down, cJSON_CreateString("DownEncoderBlock2D"));
        cJSON_AddItemToArray(up, cJSON_CreateString("UpDecoderBlock2D"));
    }
    cJSON_AddBoolToObject(j, "force_upcast", true);
    cJSON_AddNumberToObject(j, "in_channels", 3);
    cJSON_AddNumberToObject(j, "latent_channels", CQ_BENCH_FLUX_VAE_Z);
    cJSON_AddNullToObject(j, "latents_mean");
    cJSON_AddNullToObject(j, "latents_std");
    cJSON_AddNumberToObject(j, "layers_per_block", CQ_BENCH_FLUX_VAE_LAYERS);
    cJSON_AddBoolToObject(j, "mid_block_add_attention", true);
    cJSON_AddNumberToObject(j, "norm_num_groups", CQ_BENCH_FLUX_VAE_GROUPS);
    cJSON_AddNumberToObject(j, "out_channels", 3);
    cJSON_AddNumberToObject(j, "sample_size", 1024);
    cJSON_AddNumberToObject(j, "scaling_factor", 0.3611);
    cJSON_AddNumberToObject(j, "shift_factor", 0.1159);
    cJSON_AddBoolToObject(j, "use_post_quant_conv", false);
    cJSON_AddBoolToObject(j, "use_quant_conv", false);
    char *s = cJSON_PrintUnformatted(j); /* NULL when any allocation above failed */
    cJSON_Delete(j);
    return s;
}

/* ---- random payloads in the codec's layout ------------------------------------------------ */
static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Every byte 0x80 of v made 0x81 (exact, branch-free): a q8 weight of -128
 * is outside the encoder's range [-127, 127]. */
static uint64_t no_0x80(uint64_t v) {
    const uint64_t lo7 = 0x7F7F7F7F7F7F7F7FULL;
    uint64_t x = v ^ 0x8080808080808080ULL; /* the 0x80 bytes of v are the zero bytes of x */
    uint64_t zero = ~(((x & lo7) + lo7) | x | lo7);
    return v | (zero >> 7);
}

static void rng_fill_q8(uint64_t *s, uint8_t *p, size_t n, bool q8) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rng_next(s);
        if (q8) v = no_0x80(v);
        memcpy(p + i, &v, 8);
    }
    uint64_t v = rng_next(s);
    if (q8) v = no_0x80(v);
    for (; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

static void rng_fill(uint64_t *s, uint8_t *p, size_t n) { rng_fill_q8(s, p, n, false); }

float cq_bench_rng_unit(uint64_t *s) { return (float)(rng_next(s) >> 40) / (float)(1 << 24) - 0.5f; }

static void fill_q8_2f(uint8_t *p, uint64_t rows, uint64_t cols, double sigma, uint64_t *rng) {
    /* [int8 q: rows*cols][f16 row scale: rows][f16 col scale: cols]; q uniform in [-127, 127] (std ~73.3) */
    uint64_t n = rows * cols;
    rng_fill_q8(rng, p, (size_t)n, true);
    uint16_t rs = cq_f32_to_f16((float)(sigma / 73.3)), one = cq_f32_to_f16(1.0f);
    for (uint64_t r = 0; r < rows; r++) cq_wr16(p + n + 2 * r, rs);
    for (uint64_t c = 0; c < cols; c++) cq_wr16(p + n + 2 * rows + 2 * c, one);
}

static void fill_q4tp(uint8_t *p, uint64_t rows, uint64_t cols, double sigma, uint64_t *rng) {
    /* [nibbles: 16 per tile][params: f16 lo, f16 step per row][5-bit codes]; with the smallest
     * step every rung is the same scale, so random codes are all fine; nibble - 8 has std ~4.6 */
    uint64_t gpr = cols / 32, a_len = 16 * rows * gpr, stride = cq_codec_tp_code_stride(gpr);
    rng_fill(rng, p, (size_t)a_len);
    uint16_t lo = cq_f32_to_f16((float)log2(sigma / 4.6)), step = 0x0001;
    for (uint64_t r = 0; r < rows; r++) {
        cq_wr16(p + a_len + 4 * r, lo);
        cq_wr16(p + a_len + 4 * r + 2, step);
    }
    rng_fill(rng, p + a_len + 4 * rows, (size_t)(rows * stride));
}

/* Uniform in [-a, a) with a = sqrt(3) sigma, 16 random bits per weight, stored as f16 or bf16. */
static void fill_half(uint8_t *p, uint64_t n, double sigma, uint64_t *rng, bool bf16) {
    const float a = (float)(sqrt(3.0) * sigma) / 32768.0f;
    for (uint64_t i = 0; i < n; i += 4) {
        uint64_t v = rng_next(rng);
        for (uint64_t j = i; j < n && j < i + 4; j++, v >>= 16) {
            float x = (float)(int16_t)(uint16_t)v * a;
            cq_wr16(p + 2 * j, bf16 ? cq_f32_to_bf16(x) : cq_f32_to_f16(x));
        }
    }
}

/* The payload of w into p (nb bytes), validated as a reader will. */
static cq_status make_payload(const cq_bench_weight *w, uint8_t *p, uint64_t nb, uint64_t *rng) {
    uint64_t n = 1, fan_in = 1;
    for (int i = 0; i < w->ndim; i++) n *= w->shape[i];
    for (int i = 1; i < w->ndim; i++) fan_in *= w->shape[i];
    double sigma = 1.0 / sqrt((double)fan_in);
    switch (w->dtype) {
    case CQ_DTYPE_Q8_2F: fill_q8_2f(p, w->shape[0], w->shape[1], sigma, rng); break;
    case CQ_DTYPE_Q4TP: fill_q4tp(p, w->shape[0], w->shape[1], sigma, rng); break;
    case CQ_DTYPE_F16: fill_half(p, n, sigma, rng, false); break;
    case CQ_DTYPE_BF16: fill_half(p, n, sigma, rng, true); break;
    case CQ_DTYPE_F32:
        if (w->dense) { /* a kernel stored in f32: uniform in [-a, a), a = sqrt(3) sigma */
            for (uint64_t i = 0; i < n; i++) {
                float v = (float)(2.0 * sqrt(3.0) * sigma) * cq_bench_rng_unit(rng);
                memcpy(p + 4 * i, &v, 4);
            }
            break;
        }
        for (uint64_t i = 0; i < n; i++) {
            float v = w->base + 0.1f * cq_bench_rng_unit(rng);
            memcpy(p + 4 * i, &v, 4);
        }
        break;
    default: return cq_fail(CQ_ERR_UNSUPPORTED, "bench pack: no generator for codec %s", cq_dtype_name(w->dtype));
    }
    cq_status s = cq_codec_validate(w->dtype, w->ndim, w->shape, p, nb);
    return s == CQ_OK ? s : cq_fail_prefix(s, "bench pack: tensor '%s': ", w->name);
}

static cq_status write_weights(cq_cmf_writer *wr, const cq_bench_pack *pk, uint64_t seed) {
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t rng = seed ? seed : 0x9E3779B97F4A7C15ULL, done = 0;
    cq_progress bar = {.bytes = true};
    cq_progress_begin(&bar, "writing random weights", cq_bench_pack_bytes(pk), !isatty(STDERR_FILENO));
    cq_status s = CQ_OK;
    for (size_t i = 0; s == CQ_OK && i < pk->n; i++) {
        const cq_bench_weight *w = &pk->w[i];
        uint64_t nb;
        s = cq_codec_nbytes(w->dtype, w->ndim, w->shape, &nb);
        if (s == CQ_OK && nb > SIZE_MAX) s = cq_fail(CQ_ERR_NOMEM, "bench pack: tensor '%s' is too large", w->name);
        if (s == CQ_OK && nb > cap) {
            uint8_t *b = cq_realloc(buf, (size_t)nb);
            if (!b) {
                s = CQ_ERR_NOMEM;
                break;
            }
            buf = b;
            cap = (size_t)nb;
        }
        if (s == CQ_OK) s = make_payload(w, buf, nb, &rng);
        if (s == CQ_OK) s = cq_cmf_writer_add(wr, w->name, w->dtype, w->ndim, w->shape, buf, nb);
        done += nb;
        cq_progress_update(&bar, done);
    }
    cq_progress_end(&bar);
    cq_free(buf);
    return s;
}

/* ---- removal on interruption ---------------------------------------------------------------- */
/* The paths a signal handler unlinks (async-signal-safe: fixed buffers, unlink, raise). */
static char g_doomed[2][1100];
static volatile sig_atomic_t g_armed;
static const int k_signals[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction g_saved[3];

static void on_signal(int sig) {
    if (g_armed) {
        unlink(g_doomed[0]);
        unlink(g_doomed[1]);
    }
    signal(sig, SIG_DFL);
    raise(sig); /* delivered once this handler returns: the default action, as if never caught */
}

static void doom(const char *a, const char *b) {
    snprintf(g_doomed[0], sizeof g_doomed[0], "%s", a ? a : "");
    snprintf(g_doomed[1], sizeof g_doomed[1], "%s", b ? b : "");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_signals); i++) {
        sigaction(k_signals[i], NULL, &g_saved[i]);
        /* an ignored signal (nohup, a background job's SIGINT) stays ignored */
        if (g_saved[i].sa_handler != SIG_IGN) sigaction(k_signals[i], &sa, NULL);
    }
    g_armed = 1;
}

static void reprieve(void) {
    g_armed = 0;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_signals); i++) sigaction(k_signals[i], &g_saved[i], NULL);
}

/* ---- the temporary file ---------------------------------------------------------------------- */
typedef struct verify_ui {
    cq_progress bar;
    bool begun;
} verify_ui;

static int verify_progress(uint64_t done, uint64_t total, void *user) {
    verify_ui *u = user;
    if (!u->begun) {
        u->bar.bytes = true;
        cq_progress_begin(&u->bar, "reading the file back", total, !isatty(STDERR_FILENO));
        u->begun = true;
    }
    cq_progress_update(&u->bar, done);
    return 0;
}

/* --cold: the file written back and its pages dropped from the page cache (the open mapped it but read
 * only the header and directory), then what is still cached reported, measured with mincore. */
static void evict(const char *path, uint64_t bytes) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        printf("--cold: cannot open %s again to drop its pages (%s)\n", path, strerror(errno));
        return;
    }
    int rc = fdatasync(fd);
    if (rc == 0) rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    long page = sysconf(_SC_PAGESIZE);
    double left = -1;
    void *m = bytes && page > 0 ? mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) {
        size_t pages = (size_t)((bytes + (uint64_t)page - 1) / (uint64_t)page), in = 0;
        unsigned char *vec = malloc(pages);
        if (vec && mincore(m, (size_t)bytes, vec) == 0) {
            for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
            left = (double)in / (double)pages;
        }
        free(vec);
        munmap(m, (size_t)bytes);
    }
    close(fd);
    if (rc != 0)
        printf("--cold: the pages could not be dropped (%s)\n", strerror(rc > 0 ? rc : errno));
    else if (left >= 0)
        printf("--cold: %.1f%% of the file is left in the page cache%s\n", 100 * left,
               left > 0.5 ? " (tmpfs keeps its pages: set TMPDIR to a disk for a cold load)" : "");
    fflush(stdout);
}

cq_status cq_bench_pack_map(const cq_bench_file *f, cq_cmf **out, uint64_t *file_bytes) {
    *out = NULL;
    *file_bytes = 0;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char path[1024];
    int k = snprintf(path, sizeof path, "%s/cortiq-bench-%s-%ld.cmf", dir, f->tag, (long)getpid());
    if (k < 0 || (size_t)k >= sizeof path) return cq_fail(CQ_ERR_INVALID_ARG, "TMPDIR '%s' is too long", dir);
    uint64_t planned = cq_bench_pack_bytes(f->weights) + f->tokenizer_len + (1u << 20);
    for (size_t i = 0; i < f->n_blobs; i++) planned += f->blobs[i].len;

    cq_cmf_writer *wr = NULL;
    cq_status s = cq_cmf_writer_create(path, &wr);
    if (s == CQ_OK) doom(cq_cmf_writer_temp_path(wr), path);
    /* alignment padding and the directory stay well under 1/16 of the payload */
    if (s == CQ_OK && cq_cmf_writer_check_space(wr, planned + (planned >> 4)) != CQ_OK)
        s = cq_fail_prefix(CQ_ERR_IO, "the temporary model does not fit (set TMPDIR to a larger disk): ");
    if (s == CQ_OK) s = cq_cmf_writer_set_header(wr, f->header, strlen(f->header));
    if (s == CQ_OK && f->tokenizer) s = cq_cmf_writer_set_tokenizer(wr, f->tokenizer, f->tokenizer_len);
    for (size_t i = 0; s == CQ_OK && i < f->n_blobs; i++) {
        uint64_t shape[1] = {f->blobs[i].len};
        s = cq_cmf_writer_add(wr, f->blobs[i].name, CQ_DTYPE_U8, 1, shape, f->blobs[i].data, f->blobs[i].len);
    }
    if (s == CQ_OK) s = write_weights(wr, f->weights, f->seed);
    verify_ui ui = {0};
    if (s == CQ_OK) {
        cq_cmf_writer_set_progress(wr, verify_progress, &ui);
        s = cq_cmf_writer_finish(wr);
        if (ui.begun) cq_progress_end(&ui.bar);
    }
    cq_cmf_writer_free(wr); /* removes the temporary file of an unfinished write */
    if (s == CQ_OK) {
        struct stat st;
        if (stat(path, &st) == 0) *file_bytes = (uint64_t)st.st_size;
        cq_cmf_open_opts oo = {.no_verify = f->no_verify, .threads = f->threads};
        s = cq_cmf_open_ex(path, &oo, out);
    }
    if (s == CQ_OK && f->cold) evict(path, *file_bytes);
    unlink(path); /* the mapping keeps the data; nothing is left behind */
    reprieve();
    return s;
}

/* ---- measurements ------------------------------------------------------------------------------ */
double cq_bench_cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

uint64_t cq_bench_peak_rss(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024u; /* KiB on Linux */
}

bool cq_bench_reset_peak_rss(void) {
    FILE *fp = fopen("/proc/self/clear_refs", "w");
    if (!fp) return false;
    bool ok = fputs("5", fp) >= 0; /* 5: reset the peak resident size to the current one */
    return fclose(fp) == 0 && ok;
}

uint64_t cq_bench_rss(void) {
    FILE *fp = fopen("/proc/self/statm", "r");
    if (!fp) return 0;
    unsigned long long size = 0, res = 0;
    int k = fscanf(fp, "%llu %llu", &size, &res);
    fclose(fp);
    long page = sysconf(_SC_PAGESIZE);
    return k == 2 && page > 0 ? (uint64_t)res * (uint64_t)page : 0;
}

uint64_t cq_bench_ram(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cq_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the device's time per op (a backend timing its ops: CORTIQ_CUDA_PROFILE=1) -------- */
void cq_bench_print_op_classes(const cq_backend_stats *st, int runs, const char *per) {
    double gemm = st->op_ms[CQ_OP_MATMUL], attn = st->op_ms[CQ_OP_ATTENTION], conv = st->op_ms[CQ_OP_CONV2D], all = 0;
    for (int i = 0; i < CQ_OP_COUNT; i++) all += st->op_ms[i];
    double rows = all - gemm - attn - conv;
    if (all <= 0 || runs <= 0) return;
    printf("device time per %s by op class: GEMM %.2f ms (%.0f%%), ", per, gemm / runs, 100 * gemm / all);
    if (conv > 0) printf("convolution %.2f ms (%.0f%%), ", conv / runs, 100 * conv / all);
    printf("attention %.2f ms (%.0f%%), row ops %.2f ms (%.0f%%); sum %.2f ms (timing events add a little)\n",
           attn / runs, 100 * attn / all, rows / runs, 100 * rows / all, all / runs);
    for (int i = 0; i < CQ_OP_COUNT; i++)
        if (st->op_calls[i])
            printf("  %-16s %6ld calls/%s %9.3f ms/%s\n", cq_op_name((cq_op)i), st->op_calls[i] / runs, per,
                   st->op_ms[i] / runs, per);
}

int cq_bench_model_opt(const char *cmd, int argc, char **argv, int *i, cq_bench_model_opts *o) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long n;
    if (strcmp(a, "--size") == 0 && !o->own_size) {
        if (!cq_cli_parse_int(cmd, a, v, o->any_size ? 28 : 1, o->any_size ? 4096 : 1 << 16, &n)) return 2;
        if (!o->any_size && n != 256 && n != 512 && n != 1024 && n != 2048)
            return cq_cli_usage_error(cmd, "--size must be 256, 512, 1024 or 2048");
        o->size = (int)n;
    } else if (strcmp(a, "--threads") == 0) {
        if (!cq_cli_parse_int(cmd, a, v, 1, 4096, &n)) return 2;
        o->threads = (int)n;
    } else if (strcmp(a, "--backend") == 0) {
        if (!v) return cq_cli_usage_error(cmd, "--backend needs a name");
        if (cq_backend_lookup(v, NULL, NULL) != CQ_OK) return cq_cli_usage_error(cmd, "%s", cq_last_error());
        o->backend = v;
    } else if (strcmp(a, "--no-verify") == 0) {
        o->no_verify = true;
        return 1; /* takes no value */
    } else if (strcmp(a, "--cold") == 0) {
        o->cold = true;
        return 1;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}
