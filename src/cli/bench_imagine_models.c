/*
 * bench_imagine_models.c — the three models of `cortiq bench imagine` (see
 * bench_imagine.h): each one's pack at the released configuration and its
 * pipeline's calls.
 *
 * Qwen-Image-2.1: the language half of Qwen3-VL-8B as text tower (36 layers,
 * 4096 wide, 32 heads / 8 K-V heads x 128, MLP 12288, vocabulary 151936, RoPE
 * theta 5e6 with interleaved mrope [24, 20, 20]; no vision tower and no
 * lm_head, which text to image never reads), the 7B denoiser and its VAE
 * (base 96, decoder base 144, z 64, dim_mult 1-2-4-8-8).
 *
 * Z-Image Turbo: Qwen3-4B as text tower (36 layers, 2560 wide, 32 heads / 8
 * K-V heads x 128, MLP 9728, vocabulary 151936, RoPE theta 1e6, tied
 * embeddings; all 36 layers and the final norm stored, as convert keeps them
 * unless told to --drop them, though the pipeline runs only the first 35),
 * the 6.15B denoiser (30 layers, 2 noise and 2 context refiners, dim 3840)
 * and the Flux VAE (128-256-512-512, z 16); the scheduler's static shift 3
 * and the generation defaults convert writes for it (1024x1024, 8 steps, no
 * guidance).
 *
 * Qwen-Image: the language model of Qwen2.5-VL-7B as text tower (28 layers,
 * 3584 wide, 28 heads / 4 K-V heads x 128 with q/k/v biases, MLP 18944,
 * vocabulary 152064, RoPE theta 1e6 with mrope [16, 24, 24], untied; its
 * vision tower and lm_head left out as for Qwen-Image-2.1), the 20B denoiser
 * (60 dual-stream blocks, 24 heads x 128, text rows 3584 wide) and its VAE
 * (base 96, z 16, dim_mult 1-2-4-4, the published latent statistics); the
 * scheduler is Qwen-Image-2.1's (dynamic exponential shift 0.5 to 0.9 over
 * 256 to 8192 tokens, terminal 0.02). The pipeline's template is its own, so
 * the pack carries no chat template.
 *
 * Qwen-Image-Edit-2511 (QwenImageEditPlusPipeline): Qwen-Image's parts with
 * the text encoder's vision tower (Qwen2.5-VL-7B's: 32 blocks, 1280 wide, 16
 * heads x 80, window 112 px with full attention in blocks 7, 15, 23 and 31,
 * 2x2 merger to 3584), the VAE's encoder used (each input picture is encoded)
 * and the denoiser's zero_cond_t (condition tokens modulated at t = 0). The
 * processor config is left out: the pipeline's defaults are the released
 * Qwen2-VL processor's.
 *
 * The weights are random bytes in each codec's layout (bench_pack.c): the
 * matrices in q8_2f, the denoiser's in q4tp when asked (the text tower stays
 * at 8 bits, as convert keeps it), the VAEs' kernels in f16.
 */
#include "cli/bench_imagine.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "codec/codec.h"
#include "models/tables.h"
#include "models/zimage.h"
#include "pipelines/qi21_pipe.h"
#include "pipelines/qimage_pipe.h"
#include "pipelines/zimage_pipe.h"

/* ---- what differs between the packs ---------------------------------------------------------- */
typedef struct pack_desc {
    cq_qwen3_config te;  /* n_layers set per pack */
    const char *stack;   /* where convert puts the text tower's stack under "te." */
    const char *te_config, *pipeline_config, *scheduler_config; /* te_config: %d is the layers */
    const char *defaults; /* the header's generation_defaults as convert writes them, or NULL */
    /* the header's arch: the denoiser's geometry */
    const char *arch_name;
    int hidden, intermediate, heads, head_dim, max_positions;
    double eps, rope_theta; /* rope_theta 0: not written */
    cq_status (*dit_weights)(cq_bench_pack *p, cq_dtype quant, int layers);
    int (*dit_config)(char *buf, size_t len, int layers);
    cq_status (*vae_weights)(cq_bench_pack *p);
    char *(*vae_config)(void);
    bool vision;          /* the text encoder's vision tower is in the pack (te_config gets its vision_config) */
} pack_desc;

#define VOCAB 151936

/* Qwen3-VL-8B's config.json (the vision part left out: text to image never runs it). */
static const char k_qi21_te_config[] =
    "{\"architectures\": [\"Qwen3VLForConditionalGeneration\"], \"model_type\": \"qwen3_vl\", "
    "\"image_token_id\": 151655, \"video_token_id\": 151656, \"vision_start_token_id\": 151652, "
    "\"vision_end_token_id\": 151653, \"tie_word_embeddings\": false, \"text_config\": {"
    "\"attention_bias\": false, \"attention_dropout\": 0.0, \"head_dim\": 128, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 12288, "
    "\"max_position_embeddings\": 262144, \"model_type\": \"qwen3_vl_text\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": %d, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, \"rope_parameters\": "
    "{\"mrope_interleaved\": true, \"mrope_section\": [24, 20, 20], \"rope_theta\": 5000000.0, \"rope_type\": "
    "\"default\"}, \"use_cache\": true, \"vocab_size\": 151936}}";

/* Qwen-Image's and Qwen-Image-2.1's alike. */
static const char k_qwen_image_scheduler_config[] =
    "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"base_image_seq_len\": 256, \"base_shift\": 0.5, "
    "\"invert_sigmas\": false, \"max_image_seq_len\": 8192, \"max_shift\": 0.9, \"num_train_timesteps\": 1000, "
    "\"shift\": 1.0, \"shift_terminal\": 0.02, \"stochastic_sampling\": false, \"time_shift_type\": \"exponential\", "
    "\"use_beta_sigmas\": false, \"use_dynamic_shifting\": true, \"use_exponential_sigmas\": false, "
    "\"use_karras_sigmas\": false}";

static const char k_qi21_pipeline_config[] =
    "{\"_class_name\": \"QwenImage21Pipeline\", \"processor\": [\"transformers\", \"Qwen3VLProcessor\"], "
    "\"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], \"text_encoder\": [\"transformers\", "
    "\"Qwen3VLForConditionalGeneration\"], \"transformer\": [\"diffusers\", \"QwenImage21Transformer2DModel\"], "
    "\"vae\": [\"diffusers\", \"AutoencoderKLQwenImage21\"]}";

/* Qwen2.5-VL-7B-Instruct's config.json, as Qwen-Image's text_encoder/ ships it (the vision part left out). */
static const char k_qimage_te_config[] =
    "{\"architectures\": [\"Qwen2_5_VLForConditionalGeneration\"], \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 3584, "
    "\"image_token_id\": 151655, \"initializer_range\": 0.02, \"intermediate_size\": 18944, "
    "\"max_position_embeddings\": 128000, \"max_window_layers\": 28, \"model_type\": \"qwen2_5_vl\", "
    "\"num_attention_heads\": 28, \"num_hidden_layers\": %d, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, "
    "\"rope_scaling\": {\"mrope_section\": [16, 24, 24], \"rope_type\": \"default\", \"type\": \"default\"}, "
    "\"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false, "
    "\"video_token_id\": 151656, \"vision_end_token_id\": 151653, \"vision_start_token_id\": 151652, "
    "\"vision_token_id\": 151654, \"vocab_size\": 152064}";

static const char k_qimage_pipeline_config[] =
    "{\"_class_name\": \"QwenImagePipeline\", \"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], "
    "\"text_encoder\": [\"transformers\", \"Qwen2_5_VLForConditionalGeneration\"], \"tokenizer\": [\"transformers\", "
    "\"Qwen2Tokenizer\"], \"transformer\": [\"diffusers\", \"QwenImageTransformer2DModel\"], \"vae\": [\"diffusers\", "
    "\"AutoencoderKLQwenImage\"]}";

static const char k_qimage_edit_plus_pipeline_config[] =
    "{\"_class_name\": \"QwenImageEditPlusPipeline\", \"processor\": [\"transformers\", \"Qwen2VLProcessor\"], "
    "\"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], \"text_encoder\": [\"transformers\", "
    "\"Qwen2_5_VLForConditionalGeneration\"], \"tokenizer\": [\"transformers\", \"Qwen2Tokenizer\"], "
    "\"transformer\": [\"diffusers\", \"QwenImageTransformer2DModel\"], \"vae\": [\"diffusers\", "
    "\"AutoencoderKLQwenImage\"]}";

/* Qwen3-4B's config.json, as Z-Image's text_encoder/ ships it. */
static const char k_zi_te_config[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 2560, \"initializer_range\": 0.02, \"intermediate_size\": 9728, "
    "\"max_position_embeddings\": 40960, \"max_window_layers\": 36, \"model_type\": \"qwen3\", "
    "\"num_attention_heads\": 32, \"num_hidden_layers\": %d, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

/* Z-Image Turbo's: static shift 3 (the base model's is 6). */
static const char k_zi_scheduler_config[] =
    "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"num_train_timesteps\": 1000, \"shift\": 3.0, "
    "\"use_dynamic_shifting\": false}";

static const char k_zi_pipeline_config[] =
    "{\"_class_name\": \"ZImagePipeline\", \"scheduler\": [\"diffusers\", \"FlowMatchEulerDiscreteScheduler\"], "
    "\"text_encoder\": [\"transformers\", \"Qwen3Model\"], \"tokenizer\": [\"transformers\", \"Qwen2Tokenizer\"], "
    "\"transformer\": [\"diffusers\", \"ZImageTransformer2DModel\"], \"vae\": [\"diffusers\", \"AutoencoderKL\"]}";

/* convert's recipe for a Z-Image scheduler with shift 3 (Turbo) */
static const char k_zi_defaults[] = "{\"width\": 1024, \"height\": 1024, \"steps\": 8, \"guidance\": 0, \"shift\": 3}";

static cq_status zi_dit_weights(cq_bench_pack *p, cq_dtype quant, int layers) {
    cq_zimage_config c;
    cq_bench_zimage_config(&c, CQ_BENCH_ZI_HEADS, layers);
    return cq_bench_zimage_weights(p, quant, &c);
}

static int zi_dit_config(char *buf, size_t len, int layers) {
    cq_zimage_config c;
    cq_bench_zimage_config(&c, CQ_BENCH_ZI_HEADS, layers);
    return cq_bench_zimage_config_json(buf, len, &c);
}

/* Qwen-Image-Edit-2511's denoiser: Qwen-Image's with zero_cond_t */
static int edit_plus_dit_config(char *buf, size_t len, int layers) {
    cq_qimage_config c;
    cq_bench_qimage_config(&c, CQ_BENCH_QIMAGE_HEADS, layers);
    c.zero_cond_t = true;
    return cq_bench_qimage_config_json(buf, len, &c);
}

static const pack_desc k_packs[] = {
    [CQ_IMAGINE_QI21] = {.te = {.vocab_size = VOCAB, .hidden = 4096, .intermediate = 12288, .n_heads = 32,
                                .n_kv_heads = 8, .head_dim = 128},
                         .stack = "model.language_model.",
                         .te_config = k_qi21_te_config,
                         .pipeline_config = k_qi21_pipeline_config,
                         .scheduler_config = k_qwen_image_scheduler_config,
                         .arch_name = "qwen_image21",
                         .hidden = CQ_BENCH_DIT_HEADS * CQ_BENCH_DIT_HEAD_DIM,
                         .intermediate = CQ_BENCH_DIT_HEADS * CQ_BENCH_DIT_HEAD_DIM * CQ_BENCH_DIT_RATIO,
                         .heads = CQ_BENCH_DIT_HEADS,
                         .head_dim = CQ_BENCH_DIT_HEAD_DIM,
                         .max_positions = 262144,
                         .eps = 1e-6,
                         .dit_weights = cq_bench_dit_weights,
                         .dit_config = cq_bench_dit_config,
                         .vae_weights = cq_bench_vae_weights,
                         .vae_config = cq_bench_vae_config},
    [CQ_IMAGINE_ZIMAGE] = {.te = {.vocab_size = VOCAB, .hidden = 2560, .intermediate = 9728, .n_heads = 32,
                                  .n_kv_heads = 8, .head_dim = 128},
                           .stack = "", /* Qwen3Model's names: layers.N..., embed_tokens, norm */
                           .te_config = k_zi_te_config,
                           .pipeline_config = k_zi_pipeline_config,
                           .scheduler_config = k_zi_scheduler_config,
                           .defaults = k_zi_defaults,
                           .arch_name = "z_image",
                           .hidden = CQ_BENCH_ZI_HEADS * 128,
                           .intermediate = CQ_BENCH_ZI_HEADS * 128 / 3 * 8, /* int(dim / 3 * 8) = 10240 */
                           .heads = CQ_BENCH_ZI_HEADS,
                           .head_dim = 128,
                           .max_positions = 40960,
                           .eps = 1e-5,
                           .rope_theta = 256.0,
                           .dit_weights = zi_dit_weights,
                           .dit_config = zi_dit_config,
                           .vae_weights = cq_bench_flux_vae_weights,
                           .vae_config = cq_bench_flux_vae_config},
    [CQ_IMAGINE_QIMAGE] = {.te = {.vocab_size = 152064, .hidden = 3584, .intermediate = 18944, .n_heads = 28,
                                  .n_kv_heads = 4, .head_dim = 128, .family = CQ_QWEN_FAMILY_2},
                           .stack = "model.", /* the names its text_encoder/ shards carry */
                           .te_config = k_qimage_te_config,
                           .pipeline_config = k_qimage_pipeline_config,
                           .scheduler_config = k_qwen_image_scheduler_config,
                           .arch_name = "qwen_image",
                           .hidden = CQ_BENCH_QIMAGE_HEADS * 128,
                           .intermediate = 4 * CQ_BENCH_QIMAGE_HEADS * 128,
                           .heads = CQ_BENCH_QIMAGE_HEADS,
                           .head_dim = 128,
                           .max_positions = 128000,
                           .eps = 1e-6,
                           .dit_weights = cq_bench_qimage_dit_weights,
                           .dit_config = cq_bench_qimage_dit_config,
                           .vae_weights = cq_bench_qimage_vae_weights,
                           .vae_config = cq_bench_qimage_vae_config},
    [CQ_IMAGINE_QIMAGE_EDIT_PLUS] = {.te = {.vocab_size = 152064, .hidden = 3584, .intermediate = 18944,
                                            .n_heads = 28, .n_kv_heads = 4, .head_dim = 128,
                                            .family = CQ_QWEN_FAMILY_2},
                                     .stack = "model.",
                                     .te_config = k_qimage_te_config,
                                     .pipeline_config = k_qimage_edit_plus_pipeline_config,
                                     .scheduler_config = k_qwen_image_scheduler_config,
                                     .arch_name = "qwen_image_edit_plus",
                                     .hidden = CQ_BENCH_QIMAGE_HEADS * 128,
                                     .intermediate = 4 * CQ_BENCH_QIMAGE_HEADS * 128,
                                     .heads = CQ_BENCH_QIMAGE_HEADS,
                                     .head_dim = 128,
                                     .max_positions = 128000,
                                     .eps = 1e-6,
                                     .dit_weights = cq_bench_qimage_dit_weights,
                                     .dit_config = edit_plus_dit_config,
                                     .vae_weights = cq_bench_qimage_vae_weights,
                                     .vae_config = cq_bench_qimage_vae_config,
                                     .vision = true},
};

static const cq_imagine_model k_models[] = {
    {.kind = CQ_IMAGINE_QI21, .name = "qi21", .title = "Qwen-Image-2.1", .te_layers = 36,
     .dit_layers = CQ_BENCH_DIT_LAYERS, .min_steps = 2, .default_steps = 2, .project_steps = 40,
     .chat_template = "chat_templates/qwen3_vl.jinja",
     .te_what = "Qwen3-VL-8B language model (36 layers, 4096 wide, 32/8 heads x 128, MLP 12288)",
     .dit_what = "7B (32 layers, 32 heads x 128, MLP 12288)",
     .vae_what = "base 96/144, z 64, dim_mult 1-2-4-8-8, 2 res blocks",
     .prefill = "prefill", .prefill_rows = "text rows", .rows = "rows after the system turn"},
    {.kind = CQ_IMAGINE_ZIMAGE, .name = "zimage", .title = "Z-Image Turbo", .te_layers = 36, .te_unread = 1,
     .dit_layers = CQ_BENCH_ZI_LAYERS, .min_steps = 1, .default_steps = 8, .project_steps = 8,
     .chat_template = "chat_templates/qwen3.jinja",
     .te_what = "Qwen3-4B (36 layers, the first 35 run; 2560 wide, 32/8 heads x 128, MLP 9728)",
     .dit_what = "6.15B (30 layers + 2 noise and 2 context refiners, 30 heads x 128, FFN 10240)",
     .vae_what = "Flux, 128-256-512-512, z 16, 2 res blocks",
     .prefill = "caption prepare", .prefill_rows = "rows", .rows = "caption rows"},
    {.kind = CQ_IMAGINE_QIMAGE, .name = "qimage", .title = "Qwen-Image", .te_layers = 28,
     .dit_layers = CQ_BENCH_QIMAGE_LAYERS, .min_steps = 2, .default_steps = 2, .project_steps = 50,
     .te_what = "Qwen2.5-VL-7B language model (28 layers, 3584 wide, 28/4 heads x 128, MLP 18944)",
     .dit_what = "20B (60 dual-stream layers, 24 heads x 128, MLP 12288)",
     .vae_what = "base 96, z 16, dim_mult 1-2-4-4, 2 res blocks",
     .prefill = "prefill", .prefill_rows = "text rows", .rows = "rows after the system turn"},
    {.kind = CQ_IMAGINE_QIMAGE_EDIT_PLUS, .name = "qimage_edit_plus", .title = "Qwen-Image-Edit-2511",
     .te_layers = 28, .dit_layers = CQ_BENCH_QIMAGE_LAYERS, .min_steps = 2, .default_steps = 2, .project_steps = 40,
     .te_what = "Qwen2.5-VL-7B language model (28 layers, 3584 wide, 28/4 heads x 128, MLP 18944)",
     .dit_what = "20B (60 dual-stream layers, 24 heads x 128, MLP 12288), zero_cond_t",
     .vae_what = "base 96, z 16, dim_mult 1-2-4-4, 2 res blocks, encoder and decoder",
     .prefill = "prefill", .prefill_rows = "text rows", .rows = "rows after the template's first 64",
     .vision_layers = CQ_BENCH_VISION_DEPTH,
     .vision_what = "Qwen2.5-VL-7B vision tower (32 blocks, 1280 wide, 16 heads x 80, window 112 px)"},
};

const cq_imagine_model *cq_imagine_model_find(const char *name, const char **names) {
    if (names) *names = "qi21, zimage, qimage, qimage_edit_plus";
    for (size_t i = 0; name && i < CQ_ARRAY_LEN(k_models); i++)
        if (strcmp(name, k_models[i].name) == 0) return &k_models[i];
    return NULL;
}

/* ---- the pack ---------------------------------------------------------------------------------- */
static cq_status te_weights(cq_bench_pack *p, const pack_desc *d, int layers) {
    cq_qwen3_config c = d->te;
    c.n_layers = layers;
    cq_tt_list t = {0};
    cq_status s = cq_qwen3_tensors(&c, "te.", d->stack, &t);
    /* the table ends with the optional head: Qwen3-VL's and Qwen2.5-VL's are never read, Qwen3-4B ties it to
     * the embeddings */
    if (s == CQ_OK && t.n && strcmp(t.e[t.n - 1].pattern, "lm_head.weight") == 0) t.n--;
    /* convert keeps the text tower at 8 bits */
    if (s == CQ_OK) s = cq_bench_pack_table(p, &t, CQ_DTYPE_Q8_2F);
    cq_tt_list_free(&t);
    return s;
}

/* The header's quant_type as convert labels it: the codec holding the most bytes among the weight matrices and
 * kernels (q8_2f even with --quant q4tp, the 8-bit text tower being the larger part). */
static const char *quant_type(const cq_bench_pack *p) {
    uint64_t q8 = 0, q4 = 0, f16 = 0;
    for (size_t i = 0; i < p->n; i++) {
        const cq_bench_weight *w = &p->w[i];
        uint64_t nb = 0;
        if (w->ndim < 2 || cq_codec_nbytes(w->dtype, w->ndim, w->shape, &nb) != CQ_OK) continue;
        *(w->dtype == CQ_DTYPE_Q8_2F ? &q8 : w->dtype == CQ_DTYPE_Q4TP ? &q4 : &f16) += nb;
    }
    return q8 >= q4 && q8 >= f16 ? "Q8_2F" : q4 >= f16 ? "Q4_BLOCK" : "F16";
}

/* The header as convert writes it for a pipeline: the denoiser's shape as arch, the chat bundle. */
static char *header_json(const pack_desc *d, const char *quant, int dit_layers, const char *chat_template) {
    cJSON *h = cJSON_CreateObject(), *arch = cJSON_AddObjectToObject(h, "arch");
    cJSON_AddStringToObject(h, "format", "cmf");
    cJSON_AddNumberToObject(h, "version", 2);
    cJSON_AddStringToObject(arch, "arch_name", d->arch_name);
    cJSON_AddNumberToObject(arch, "hidden_size", d->hidden);
    cJSON_AddNumberToObject(arch, "intermediate_size", d->intermediate);
    cJSON_AddNumberToObject(arch, "num_layers", dit_layers);
    cJSON_AddNumberToObject(arch, "num_attention_heads", d->heads);
    cJSON_AddNumberToObject(arch, "num_kv_heads", d->heads);
    cJSON_AddNumberToObject(arch, "head_dim", d->head_dim);
    cJSON_AddNumberToObject(arch, "vocab_size", d->te.vocab_size);
    cJSON_AddNumberToObject(arch, "max_position_embeddings", d->max_positions);
    cJSON_AddNumberToObject(arch, "rms_norm_eps", d->eps);
    cJSON *lt = cJSON_AddArrayToObject(arch, "layer_types");
    for (int l = 0; l < dit_layers; l++) cJSON_AddItemToArray(lt, cJSON_CreateString("FullAttention"));
    if (d->rope_theta > 0) cJSON_AddNumberToObject(arch, "rope_theta", d->rope_theta);
    cJSON_AddStringToObject(h, "quant_type", quant);
    cJSON *prov = cJSON_AddObjectToObject(h, "provenance");
    cJSON_AddStringToObject(prov, "tool", "cortiq bench imagine");
    cJSON_AddStringToObject(prov, "source", "random weights");
    cJSON *tok = cJSON_AddObjectToObject(h, "tokenizer_config");
    if (chat_template) cJSON_AddStringToObject(tok, "chat_template", chat_template);
    int eos = 151645;
    cJSON_AddItemToObject(tok, "eos_token_ids", cJSON_CreateIntArray(&eos, 1));
    cJSON_AddNumberToObject(tok, "pad_token_id", 151643);
    if (d->defaults) cJSON_AddItemToObject(h, "generation_defaults", cJSON_Parse(d->defaults));
    char *s = cJSON_PrintUnformatted(h); /* NULL when any allocation above failed */
    cJSON_Delete(h);
    return s;
}

/* The text encoder's config.json: the language model's, with the vision tower's vision_config when it has one. */
static int te_config(char *buf, size_t len, const pack_desc *d, int te_layers, const cq_qwen25vl_vision_config *vc) {
    int k = snprintf(buf, len, d->te_config, te_layers);
    if (k <= 0 || (size_t)k >= len || !d->vision) return k <= 0 || (size_t)k >= len ? -1 : k;
    k--; /* over the closing brace */
    int n = snprintf(buf + k, len - (size_t)k, ", \"vision_config\": ");
    if (n < 0 || (size_t)(k + n) >= len) return -1;
    k += n;
    n = cq_bench_vision_config_object(buf + k, len - (size_t)k, vc);
    if (n < 0 || (size_t)(k + n) + 1 >= len) return -1;
    k += n;
    buf[k++] = '}';
    buf[k] = '\0';
    return k;
}

cq_status cq_imagine_pack_build(const cq_imagine_model *m, cq_dtype quant, int te_layers, int vision_layers,
                                int dit_layers, const char *chat_template, cq_imagine_pack *out) {
    const pack_desc *d = &k_packs[m->kind];
    cq_bench_pack *p = &out->weights;
    cq_qwen25vl_vision_config vc;
    cq_bench_vision_config(&vc, vision_layers);
    cq_status s = te_weights(p, d, te_layers);
    const uint64_t b_lm = cq_bench_pack_bytes(p);
    /* the vision tower's matrices stay at 8 bits with the rest of the text encoder */
    if (s == CQ_OK && d->vision) s = cq_bench_vision_weights(p, CQ_DTYPE_Q8_2F, &vc);
    out->b_te = cq_bench_pack_bytes(p);
    out->b_vision = out->b_te - b_lm;
    if (s == CQ_OK) s = d->dit_weights(p, quant, dit_layers);
    out->b_dit = cq_bench_pack_bytes(p) - out->b_te;
    if (s == CQ_OK) s = d->vae_weights(p);
    out->b_vae = cq_bench_pack_bytes(p) - out->b_te - out->b_dit;
    /* the denoiser in the other codec, listed only to be counted */
    cq_bench_pack q4 = {0};
    if (s == CQ_OK) s = d->dit_weights(&q4, CQ_DTYPE_Q4TP, dit_layers);
    out->b_dit_q4tp = cq_bench_pack_bytes(&q4);
    cq_bench_pack_free(&q4);
    if (s != CQ_OK) return s;
    int k = te_config(out->te_cfg, sizeof out->te_cfg, d, te_layers, &vc);
    out->vae_cfg = d->vae_config();
    out->header = header_json(d, quant_type(p), dit_layers, chat_template);
    if (k < 0 || d->dit_config(out->dit_cfg, sizeof out->dit_cfg, dit_layers) < 0)
        return cq_fail(CQ_ERR_INTERNAL, "bench imagine: a config does not fit its buffer");
    if (!out->vae_cfg || !out->header) return CQ_ERR_NOMEM;
    const cq_bench_blob blobs[] = {{"te.config_json", out->te_cfg, strlen(out->te_cfg)},
                                   {"dit.config_json", out->dit_cfg, strlen(out->dit_cfg)},
                                   {"vae.config_json", out->vae_cfg, strlen(out->vae_cfg)},
                                   {"pipeline.config_json", d->pipeline_config, strlen(d->pipeline_config)},
                                   {"scheduler.config_json", d->scheduler_config, strlen(d->scheduler_config)}};
    _Static_assert(CQ_ARRAY_LEN(blobs) == CQ_ARRAY_LEN(out->blobs), "one blob per config");
    memcpy(out->blobs, blobs, sizeof blobs);
    return CQ_OK;
}

void cq_imagine_pack_free(cq_imagine_pack *p) {
    cq_bench_pack_free(&p->weights);
    cJSON_free(p->vae_cfg);
    cJSON_free(p->header);
    p->vae_cfg = p->header = NULL;
}

/* ---- the pipelines ------------------------------------------------------------------------------- */
#define QI(p) ((cq_qi21_pipe *)(p)->p)
#define ZI(p) ((cq_zimage_pipe *)(p)->p)
#define QV1(p) ((cq_qimage_pipe *)(p)->p)

cq_status cq_imagine_pipe_open(const cq_imagine_model *m, const cq_cmf *cmf, cq_imagine_pipe *out) {
    out->m = m;
    out->p = NULL;
    switch (m->kind) {
    case CQ_IMAGINE_ZIMAGE: return cq_zimage_pipe_open(cmf, (cq_zimage_pipe **)&out->p);
    case CQ_IMAGINE_QIMAGE:
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: return cq_qimage_pipe_open(cmf, (cq_qimage_pipe **)&out->p);
    default: return cq_qi21_pipe_open(cmf, (cq_qi21_pipe **)&out->p);
    }
}

cq_status cq_imagine_pipe_load_weights(cq_imagine_pipe *p, cq_backend *be) {
    switch (p->m->kind) {
    case CQ_IMAGINE_ZIMAGE: return cq_zimage_pipe_load_weights(ZI(p), be);
    case CQ_IMAGINE_QIMAGE:
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: return cq_qimage_pipe_load_weights(QV1(p), be);
    default: return cq_qi21_pipe_load_weights(QI(p), be);
    }
}

void cq_imagine_pipe_free(cq_imagine_pipe *p) {
    if (!p->m) return;
    switch (p->m->kind) {
    case CQ_IMAGINE_ZIMAGE: cq_zimage_pipe_free(ZI(p)); break;
    case CQ_IMAGINE_QIMAGE:
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: cq_qimage_pipe_free(QV1(p)); break;
    default: cq_qi21_pipe_free(QI(p)); break;
    }
    p->p = NULL;
}

const cq_resid *cq_imagine_pipe_residency(const cq_imagine_pipe *p) {
    if (!p->p) return NULL;
    switch (p->m->kind) {
    case CQ_IMAGINE_ZIMAGE: return cq_zimage_pipe_residency(ZI(p));
    case CQ_IMAGINE_QIMAGE:
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: return cq_qimage_pipe_residency(QV1(p));
    default: return cq_qi21_pipe_residency(QI(p));
    }
}

const cq_resid_need *cq_imagine_pipe_need(const cq_imagine_pipe *p) {
    switch (p->m->kind) {
    case CQ_IMAGINE_ZIMAGE: return cq_zimage_pipe_need(ZI(p));
    case CQ_IMAGINE_QIMAGE:
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: return cq_qimage_pipe_need(QV1(p));
    default: return cq_qi21_pipe_need(QI(p));
    }
}

/* Qwen-Image's options for a request: no negative prompt, so one denoiser pass per step, as the reference runs
 * without one; an edit reads its pictures, the output at the request's size. */
static cq_qimage_gen_opts qimage_opts(const cq_imagine_req *rq, uint64_t seed) {
    return (cq_qimage_gen_opts){.prompt = rq->prompt, .width = rq->side, .height = rq->side, .images = rq->images,
                                .n_images = rq->n_images, .steps = rq->steps, .seed = seed, .guidance = 1.0,
                                .on_step = rq->on_step, .on_phase = rq->on_phase, .user = rq->user};
}

static cq_status edit_tokens(cq_imagine_pipe *p, const cq_imagine_req *rq, int *total, int *rows, int *cond) {
    const cq_qimage_gen_opts o = qimage_opts(rq, 0);
    cq_qimage_edit_inputs in;
    CQ_TRY(cq_qimage_edit_inputs_make(QV1(p), &o, &in));
    int32_t *ids = NULL;
    int n = 0;
    cq_status s = cq_qimage_edit_tokens(QV1(p), &in, rq->prompt, &ids, &n);
    *total = n;
    *rows = n - CQ_QIMAGE_EDIT_DROP_ROWS;
    *cond = in.n_cond_tokens;
    cq_free(ids);
    cq_qimage_edit_inputs_free(&in);
    return s;
}

cq_status cq_imagine_pipe_tokens(cq_imagine_pipe *p, const cq_imagine_req *rq, int *total, int *rows, int *cond) {
    *cond = 0;
    switch (p->m->kind) {
    case CQ_IMAGINE_ZIMAGE:
        /* Z-Image's denoiser reads every row of the caption (there is no system turn) */
        CQ_TRY(cq_zimage_pipe_prompt_tokens(ZI(p), rq->prompt, total, NULL));
        *rows = *total;
        return CQ_OK;
    case CQ_IMAGINE_QIMAGE: return cq_qimage_pipe_prompt_tokens(QV1(p), rq->prompt, total, rows);
    case CQ_IMAGINE_QIMAGE_EDIT_PLUS: return edit_tokens(p, rq, total, rows, cond);
    default: return cq_qi21_pipe_prompt_tokens(QI(p), rq->prompt, total, rows);
    }
}

cq_status cq_imagine_pipe_generate(cq_imagine_pipe *p, const cq_imagine_req *rq, cq_image_result *res) {
    const uint64_t seed = 42;
    if (p->m->kind == CQ_IMAGINE_ZIMAGE) {
        cq_zimage_gen_opts o;
        cq_zimage_gen_opts_init(&o); /* guidance 0: Turbo runs without CFG */
        o.prompt = rq->prompt;
        o.width = o.height = rq->side;
        o.steps = rq->steps;
        o.seed = seed;
        o.on_step = rq->on_step;
        o.on_phase = rq->on_phase;
        o.user = rq->user;
        return cq_zimage_pipe_generate(ZI(p), &o, res);
    }
    if (p->m->kind == CQ_IMAGINE_QIMAGE || p->m->kind == CQ_IMAGINE_QIMAGE_EDIT_PLUS) {
        const cq_qimage_gen_opts o = qimage_opts(rq, seed);
        return cq_qimage_pipe_generate(QV1(p), &o, res);
    }
    const cq_qi21_gen_opts o = {.prompt = rq->prompt, .width = rq->side, .height = rq->side, .steps = rq->steps,
                                .seed = seed, .guidance = 1.0, .on_step = rq->on_step, .on_phase = rq->on_phase,
                                .user = rq->user};
    return cq_qi21_pipe_generate(QI(p), &o, res);
}
