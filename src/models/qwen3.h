/*
 * qwen3.h — the Qwen3 decoder (Qwen3ForCausalLM, and the language half of
 * Qwen3VLForConditionalGeneration): the text tower of Qwen-Image-2.1 and the
 * model behind `cortiq run`. The same code runs the Qwen2 family's decoder
 * (Qwen2ForCausalLM, the language half of Qwen2.5-VL: Qwen-Image's text
 * tower), which differs only in its attention (q/k/v biases, no q/k norm).
 *
 * Two ways to run it:
 *  - cq_qwen3_forward: one token sequence at once, returning the hidden
 *    states of any layer (the last layer's output BEFORE the final norm is
 *    what the Qwen-Image-2.1 denoiser reads), the final-norm output and/or
 *    the logits of every row.
 *  - a cache (cq_qwen3_cache): an incremental K/V cache for generation.
 *    cq_qwen3_cache_feed appends tokens (a prompt, then one token at a time)
 *    and returns the logits of the last one; the cache can be rewound to any
 *    earlier length (chat turns reuse the common prefix). Feeding allocates
 *    nothing: every buffer is sized when the cache is created.
 *
 * Multimodal RoPE (cq_qwen3_forward_mm): each token has a position on three
 * axes (temporal, height, width) and frequency channel j of the head_dim/2
 * ladder rotates with one of them. Qwen2.5-VL's sectioned layout takes
 * channels [0, s0) from axis 0, the next s1 from axis 1, the last s2 from
 * axis 2 (mrope_section [s0, s1, s2]); Qwen3-VL's interleaved one takes
 * channel j from axis 1 when j mod 3 == 1 and j < 3 s1, from axis 2 when
 * j mod 3 == 2 and j < 3 s2, else from axis 0. Text has the same position on
 * all three axes, so cq_qwen3_forward (positions 0..n-1) is plain 1-D RoPE
 * for every layout. cq_qwen3_rope_index gives the positions of a sequence
 * of text and images as Qwen2.5-VL numbers them.
 */
#ifndef CQ_MODELS_QWEN3_H
#define CQ_MODELS_QWEN3_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"

typedef enum cq_qwen_family { CQ_QWEN_FAMILY_3 = 0, CQ_QWEN_FAMILY_2 } cq_qwen_family;

typedef struct cq_qwen3_config {
    int vocab_size;
    int hidden;            /* hidden_size */
    int intermediate;      /* intermediate_size */
    int n_layers;
    int n_heads, n_kv_heads, head_dim;
    float eps;             /* rms_norm_eps */
    double rope_theta;
    bool tie_embeddings;   /* tie_word_embeddings */
    bool vl;               /* the config was a Qwen3-VL config (text_config holds the tower) */
    int mrope_section[3];  /* Qwen2.5-VL / Qwen3-VL: channels per axis (sum head_dim/2); zeros without */
    bool mrope_interleaved;
    int max_positions;     /* max_position_embeddings (0 = not given) */
    bool has_lm_head;      /* logits are available (lm_head.weight, or tied embeddings) */
    /* The family, which sets the attention: Qwen3 (the zero value) normalises each head's q and k (q_norm,
     * k_norm) and has no projection biases; Qwen2 / Qwen2.5-VL (model_type qwen2, qwen2_5_vl,
     * qwen2_5_vl_text) add biases to q, k and v and have no q/k norm. */
    cq_qwen_family family;
} cq_qwen3_config;

/* What the family's attention has (see cq_qwen3_config.family). */
static inline bool cq_qwen3_has_qk_norm(const cq_qwen3_config *c) { return c->family == CQ_QWEN_FAMILY_3; }
static inline bool cq_qwen3_has_qkv_bias(const cq_qwen3_config *c) { return c->family == CQ_QWEN_FAMILY_2; }

typedef struct cq_qwen3 cq_qwen3;
typedef struct cq_qwen3_cache cq_qwen3_cache;

/* Load from a CMF file. `prefix` is the component prefix: "" for an LLM
 * .cmf (bare Hugging Face names, config in `config_json`), "te." for the
 * text encoder inside an image pack (`te.config_json`). The decoder stack is
 * found under <prefix>model.language_model. (Qwen3-VL), <prefix>model.
 * (Qwen3), <prefix>language_model. or <prefix> itself; the head is
 * <prefix>lm_head.weight, else the embedding table when the config ties
 * them. A model without a head still runs (hidden states only). The config
 * may be a Qwen3 config.json or a Qwen3-VL one (text_config; rope in
 * transformers 5's rope_parameters or 4.x's rope_theta + rope_scaling). */
/* The config alone (no weights), as cq_qwen3_load reads it from `<prefix>config_json`. */
cq_status cq_qwen3_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen3_config *cfg);
cq_status cq_qwen3_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen3 **out);
/* A text encoder that reads hidden state `layers` (1..n_layers; see
 * cq_qwen3_outputs): only the embedding and decoder layers 0..layers-1 are
 * bound, so a pack made for it may leave out the later layers, the final
 * norm and the head (`cortiq convert --drop`). With layers == n_layers the
 * final norm is bound too, as by cq_qwen3_load. Such a model runs
 * cq_qwen3_forward up to its layers; normed outputs, logits and the cache
 * need a full tower. */
cq_status cq_qwen3_load_encoder(const cq_cmf *cmf, const char *prefix, cq_backend *be, int layers, cq_qwen3 **out);
/* Decoder layers bound (n_layers for cq_qwen3_load). */
int cq_qwen3_layers_loaded(const cq_qwen3 *m);
void cq_qwen3_free(cq_qwen3 *m);
const cq_qwen3_config *cq_qwen3_get_config(const cq_qwen3 *m);
cq_backend *cq_qwen3_backend(const cq_qwen3 *m);

/* What cq_qwen3_forward returns (host buffers; NULL = not wanted). Layer
 * index l: 0 = the input embeddings, l in 1..n_layers = the output of
 * decoder layer l-1 (l = n_layers is before the final norm). Layers after
 * the last one needed are not run. */
typedef struct cq_qwen3_outputs {
    int layer;          /* which hidden state `hidden` receives */
    float *hidden;      /* [n, hidden] */
    float *all_hidden;  /* [n_layers + 1, n, hidden] */
    float *normed;      /* [n, hidden]: the final norm's output */
    float *logits;      /* [n, vocab_size] */
} cq_qwen3_outputs;

/* Run ids[0..n) from position 0 with causal attention. */
cq_status cq_qwen3_forward(cq_qwen3 *m, const int32_t *ids, int n, const cq_qwen3_outputs *out);

/* Multimodal input of one sequence. */
typedef struct cq_qwen3_mm {
    /* [3][n], axis-major (temporal, height, width), e.g. from cq_qwen3_rope_index; every value >= 0. NULL:
     * 0..n-1 on every axis. Needs a config with mrope_section. */
    const int32_t *positions;
    /* The rows whose id is image_token (Qwen2.5-VL's <|image_pad|>) get these vectors instead of their
     * embedding, in row order, as the reference's masked_scatter does: [n_image_rows, hidden] (the vision
     * tower's output). n_image_rows must equal the number of such ids. NULL (with 0 rows): nothing replaced. */
    int32_t image_token;
    const float *image_embeds;
    int n_image_rows;
    /* Qwen3-VL's deepstack rows (the vision tower's deepstack mergers, in order): [n_deepstack][n_image_rows]
     * [hidden]; level k is added to the image rows of decoder layer k's output (k < n_deepstack <= n_layers),
     * as the reference's text model does after its first layers, so the next layer and the hidden states read
     * the sum. Needs image_embeds. NULL (with 0): none. */
    const float *deepstack;
    int n_deepstack;
} cq_qwen3_mm;

/* cq_qwen3_forward with per-axis positions and injected image rows (mm NULL: as cq_qwen3_forward). */
cq_status cq_qwen3_forward_mm(cq_qwen3 *m, const int32_t *ids, int n, const cq_qwen3_mm *mm,
                              const cq_qwen3_outputs *out);

/* Qwen2.5-VL's 3-D position ids (get_rope_index; Qwen3-VL's are the same for images) of one unpadded sequence
 * ids[0..n). Image i is a run of t * (h / merge) * (w / merge) image_token ids, where grid_thw[i] = {t, h, w}
 * is its patch grid (image_grid_thw) and merge the vision tower's spatial_merge_size; each run must follow a
 * vision_start id, be followed by a token that is not image_token, and the runs must use all n_images grids in
 * order. Images are
 * single frames (t == 1). A text token gets p on all axes, p = one past the previous token's (0 first); an
 * image starting at p gets (p, p + row, p + col) over its merged grid in row-major order, and the text after
 * it continues at p + max(h, w) / merge. Writes pos[3 * n] (axis-major, as cq_qwen3_mm.positions) and, when
 * not NULL, *delta = max(pos) + 1 - n (where generation continues: position len + delta). */
cq_status cq_qwen3_rope_index(const int32_t *ids, int n, int32_t image_token, int32_t vision_start,
                              const int32_t (*grid_thw)[3], int n_images, int merge, int32_t *pos, int32_t *delta);

/* A K/V cache for up to `max_tokens` positions; prompts are processed in
 * chunks of at most `max_batch` rows (<= 0: min(max_tokens, 512)). */
cq_status cq_qwen3_cache_create(cq_qwen3 *m, int max_tokens, int max_batch, cq_qwen3_cache **out);
void cq_qwen3_cache_free(cq_qwen3_cache *c);
int cq_qwen3_cache_len(const cq_qwen3_cache *c);
int cq_qwen3_cache_capacity(const cq_qwen3_cache *c);
/* Forget everything after the first n positions (0 <= n <= len). */
cq_status cq_qwen3_cache_truncate(cq_qwen3_cache *c, int n);
/* Append ids[0..n) (n >= 1) at positions len..len+n-1; when `logits` is not
 * NULL it receives the [vocab_size] logits of the last of them. Fails with
 * CQ_ERR_BOUNDS (nothing changed) when the cache would overflow. On any
 * other failure the cache keeps its previous length. */
cq_status cq_qwen3_cache_feed(cq_qwen3_cache *c, const int32_t *ids, int n, float *logits);

/* The model as a causal LM (component.h); m must outlive the copies. */
cq_causal_lm cq_qwen3_causal_lm(cq_qwen3 *m);

#endif /* CQ_MODELS_QWEN3_H */
