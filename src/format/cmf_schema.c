/*
 * cmf_schema.c — the header JSON schema of CMF v2 (and of the masks meta
 * JSON), checked with cJSON the way the reference reader's typed parser
 * accepts documents:
 *   - required keys must be present with the right JSON type;
 *   - Option-typed keys may be absent or null;
 *   - keys that only have a default may be absent but never null;
 *   - integers must be whole, non-negative and in range (u32 / u64);
 *     numbers must be finite;
 *   - enum strings must be one of their set;
 *   - unknown keys are ignored, a known key given twice is an error.
 * One limitation: cJSON keeps numbers as doubles, so "5120.0" passes where
 * the reference would want an integer literal.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/cmf_impl.h"
#include "format/gen_defaults.h"

typedef enum jkind {
    J_STR, J_U32, J_U64, J_NUM, J_BOOL, J_ANY, J_OBJ, J_ENUM,
    J_ARR_U64, J_ARR_U32, J_ARR_NUM, J_ARR_ENUM, J_ARR_OBJ
} jkind;
typedef enum jpres { REQ, OPT, DEF } jpres; /* required / Option / has a default */

typedef struct jschema jschema;
typedef struct jfield {
    const char *key;
    jkind kind;
    jpres pres;
    const jschema *sub;        /* J_OBJ, J_ARR_OBJ */
    const char *const *enums;  /* J_ENUM, J_ARR_ENUM: NULL-terminated */
} jfield;
struct jschema {
    const jfield *f;
    size_t n;
};
#define SCHEMA(arr) {arr, sizeof(arr) / sizeof(arr[0])}

static const char *const k_quant_types[] = {"Q8_ROW", "Q4_BLOCK", "Q8_2F", "VBIT", "BF16", "F16", "F32", NULL};
static const char *const k_layer_types[] = {"FullAttention", "SlidingAttention", "LinearAttention",
                                            "ShortConv", "Kda", NULL};
static const char *const k_norm_styles[] = {"qwen", "gemma", NULL};
static const char *const k_priorities[] = {"Fallback", "Normal", "Primary", NULL};

/* ---- arch sub-objects ---- */
static const jfield k_yarn_f[] = {
    {"factor", J_NUM, REQ, 0, 0}, {"original_max_position_embeddings", J_U64, REQ, 0, 0},
    {"beta_fast", J_NUM, DEF, 0, 0}, {"beta_slow", J_NUM, DEF, 0, 0},
    {"attention_factor", J_NUM, DEF, 0, 0}, {"mscale_all_dim", J_NUM, OPT, 0, 0},
};
static const jschema k_yarn = SCHEMA(k_yarn_f);
static const jfield k_mla_f[] = {
    {"kv_lora_rank", J_U64, REQ, 0, 0}, {"qk_rope_head_dim", J_U64, REQ, 0, 0},
    {"qk_nope_head_dim", J_U64, REQ, 0, 0}, {"v_head_dim", J_U64, REQ, 0, 0},
    {"q_lora_rank", J_U64, OPT, 0, 0}, {"nope", J_BOOL, DEF, 0, 0},
};
static const jschema k_mla = SCHEMA(k_mla_f);
static const jfield k_mtp_f[] = {
    {"num_layers", J_U64, REQ, 0, 0}, {"share_lm_head", J_BOOL, DEF, 0, 0}, {"share_embed", J_BOOL, DEF, 0, 0},
};
static const jschema k_mtp = SCHEMA(k_mtp_f);
static const jfield k_moe_f[] = {
    {"num_experts", J_U64, REQ, 0, 0}, {"top_k", J_U64, REQ, 0, 0},
    {"moe_intermediate_size", J_U64, REQ, 0, 0}, {"norm_topk_prob", J_BOOL, DEF, 0, 0},
    {"shared_expert_intermediate_size", J_U64, OPT, 0, 0}, {"router_sigmoid", J_BOOL, DEF, 0, 0},
    {"routed_scaling_factor", J_NUM, OPT, 0, 0}, {"router_resonance", J_BOOL, DEF, 0, 0},
};
static const jschema k_moe = SCHEMA(k_moe_f);
static const jfield k_linear_core_f[] = {
    {"kind", J_STR, REQ, 0, 0}, {"num_heads", J_U64, REQ, 0, 0},
    {"nphase", J_U64, OPT, 0, 0}, {"value_head_dim", J_U64, REQ, 0, 0},
};
static const jschema k_linear_core = SCHEMA(k_linear_core_f);
static const jfield k_g3n_f[] = {
    {"altup_num_inputs", J_U64, REQ, 0, 0}, {"laurel_rank", J_U64, REQ, 0, 0},
    {"ple_dim", J_U64, REQ, 0, 0}, {"ple_vocab", J_U64, REQ, 0, 0},
    {"num_kv_shared_layers", J_U64, REQ, 0, 0}, {"activation_sparsity", J_ARR_NUM, REQ, 0, 0},
};
static const jschema k_g3n = SCHEMA(k_g3n_f);

static const jfield k_arch_f[] = {
    {"arch_name", J_STR, REQ, 0, 0},
    {"hidden_size", J_U64, REQ, 0, 0},
    {"intermediate_size", J_U64, REQ, 0, 0},
    {"num_layers", J_U64, REQ, 0, 0},
    {"num_attention_heads", J_U64, REQ, 0, 0},
    {"num_kv_heads", J_U64, REQ, 0, 0},
    {"head_dim", J_U64, REQ, 0, 0},
    {"vocab_size", J_U64, REQ, 0, 0},
    {"max_position_embeddings", J_U64, REQ, 0, 0},
    {"layer_types", J_ARR_ENUM, REQ, 0, k_layer_types},
    {"rms_norm_eps", J_NUM, REQ, 0, 0},
    {"norm_style", J_ENUM, DEF, 0, k_norm_styles},
    {"rope_theta", J_NUM, DEF, 0, 0},
    {"tie_word_embeddings", J_BOOL, DEF, 0, 0},
    {"partial_rotary_factor", J_NUM, DEF, 0, 0},
    {"hidden_act", J_STR, DEF, 0, 0},
    {"embed_multiplier", J_NUM, DEF, 0, 0},
    {"num_loops", J_U64, DEF, 0, 0},
    {"loop_final_norm", J_BOOL, DEF, 0, 0},
    {"attn_v_norm", J_BOOL, DEF, 0, 0},
    {"yarn", J_OBJ, OPT, &k_yarn, 0},
    {"attention_heads_per_layer", J_ARR_U64, OPT, 0, 0},
    {"query_pre_attn_scalar", J_NUM, OPT, 0, 0},
    {"sliding_window", J_U64, OPT, 0, 0},
    {"sliding_window_pattern", J_U64, OPT, 0, 0},
    {"rope_local_base_freq", J_NUM, OPT, 0, 0},
    {"local_partial_rotary_factor", J_NUM, OPT, 0, 0},
    {"global_head_dim", J_U64, OPT, 0, 0},
    {"num_global_kv_heads", J_U64, OPT, 0, 0},
    {"global_partial_rotary_factor", J_NUM, OPT, 0, 0},
    {"final_logit_softcapping", J_NUM, OPT, 0, 0},
    {"mla", J_OBJ, OPT, &k_mla, 0},
    {"activation_situ_beta", J_NUM, OPT, 0, 0},
    {"activation_situ_linear_beta", J_NUM, OPT, 0, 0},
    {"attn_logit_softcapping", J_NUM, OPT, 0, 0},
    {"mtp", J_OBJ, OPT, &k_mtp, 0},
    {"moe", J_OBJ, OPT, &k_moe, 0},
    {"linear_core", J_OBJ, OPT, &k_linear_core, 0},
    {"head_clusters", J_U64, OPT, 0, 0},
    {"linear_conv_kernel_dim", J_U64, OPT, 0, 0},
    {"linear_num_key_heads", J_U64, OPT, 0, 0},
    {"linear_num_value_heads", J_U64, OPT, 0, 0},
    {"linear_key_head_dim", J_U64, OPT, 0, 0},
    {"linear_value_head_dim", J_U64, OPT, 0, 0},
    {"rope_freq_factors", J_ARR_NUM, OPT, 0, 0},
    {"logit_multiplier", J_NUM, OPT, 0, 0},
    {"g3n", J_OBJ, OPT, &k_g3n, 0},
    {"kda_gate_lower_bound", J_NUM, OPT, 0, 0},
};
static const jschema k_arch = SCHEMA(k_arch_f);

/* ---- top-level sub-objects ---- */
static const jfield k_tok_f[] = {
    {"chat_template", J_STR, OPT, 0, 0}, {"eos_token_ids", J_ARR_U32, DEF, 0, 0},
    {"bos_token_id", J_U32, OPT, 0, 0}, {"pad_token_id", J_U32, OPT, 0, 0},
};
static const jschema k_tok = SCHEMA(k_tok_f);
static const jfield k_sechash_f[] = {
    {"masks", J_STR, OPT, 0, 0}, {"vocab", J_STR, OPT, 0, 0}, {"index", J_STR, OPT, 0, 0},
};
static const jschema k_sechash = SCHEMA(k_sechash_f);
static const jfield k_selection_f[] = {
    {"metric", J_STR, REQ, 0, 0}, {"phi_layer", J_U64, REQ, 0, 0}, {"mean", J_STR, REQ, 0, 0},
    {"basis", J_STR, REQ, 0, 0}, {"rank", J_U64, REQ, 0, 0}, {"err_mean", J_NUM, OPT, 0, 0},
    {"err_std", J_NUM, OPT, 0, 0}, {"holdout", J_STR, OPT, 0, 0}, {"holdout_n", J_U64, OPT, 0, 0},
};
static const jschema k_selection = SCHEMA(k_selection_f);
static const jfield k_skill_f[] = {
    {"id", J_STR, REQ, 0, 0}, {"name", J_STR, OPT, 0, 0}, {"layers", J_ARR_U64, DEF, 0, 0},
    {"selection", J_OBJ, OPT, &k_selection, 0}, {"input_mask_task", J_STR, OPT, 0, 0},
    {"quality", J_ANY, OPT, 0, 0}, {"base_dir_hash", J_STR, OPT, 0, 0}, {"base_arch", J_STR, OPT, 0, 0},
    {"task", J_STR, OPT, 0, 0}, {"provenance", J_ANY, OPT, 0, 0},
};
static const jschema k_skill = SCHEMA(k_skill_f);
static const jfield k_shard_f[] = {{"no", J_U64, REQ, 0, 0}, {"count", J_U64, REQ, 0, 0}};
static const jschema k_shard = SCHEMA(k_shard_f);
static const jfield k_calib_f[] = {
    {"temperature", J_NUM, REQ, 0, 0}, {"ece_before", J_NUM, OPT, 0, 0}, {"ece_after", J_NUM, OPT, 0, 0},
};
static const jschema k_calib = SCHEMA(k_calib_f);
static const jfield k_routing_f[] = {
    {"temperature", J_NUM, REQ, 0, 0}, {"novelty_theta", J_NUM, REQ, 0, 0},
    {"samples", J_U64, REQ, 0, 0}, {"target_fpr", J_NUM, REQ, 0, 0},
};
static const jschema k_routing = SCHEMA(k_routing_f);

static const jfield k_header_f[] = {
    {"format", J_STR, DEF, 0, 0},
    {"version", J_U32, REQ, 0, 0},
    {"arch", J_OBJ, REQ, &k_arch, 0},
    {"quant_type", J_ENUM, REQ, 0, k_quant_types},
    {"provenance", J_ANY, OPT, 0, 0},
    {"tokenizer_config", J_OBJ, OPT, &k_tok, 0},
    {"section_hashes", J_OBJ, OPT, &k_sechash, 0},
    {"skills", J_ARR_OBJ, DEF, &k_skill, 0},
    {"shard", J_OBJ, OPT, &k_shard, 0},
    {"calibration", J_OBJ, OPT, &k_calib, 0},
    {"routing", J_OBJ, OPT, &k_routing, 0},
    {CQ_GEN_DEFAULTS_KEY, J_ANY, OPT, 0, 0}, /* cortiq.c's; its bounds are checked by gen_defaults.c */
};
static const jschema k_header = SCHEMA(k_header_f);

/* ---- masks meta ---- */
static const jfield k_quality_f[] = {
    {"metric", J_STR, REQ, 0, 0}, {"value", J_NUM, REQ, 0, 0}, {"baseline_dense", J_NUM, OPT, 0, 0},
    {"n_samples", J_U32, OPT, 0, 0}, {"dataset_sha256", J_STR, OPT, 0, 0},
};
static const jschema k_quality = SCHEMA(k_quality_f);
static const jfield k_mask_f[] = {
    {"task_id", J_U32, REQ, 0, 0}, {"name", J_STR, REQ, 0, 0}, {"description", J_STR, OPT, 0, 0},
    {"sparsity", J_NUM, REQ, 0, 0}, {"quality", J_OBJ, OPT, &k_quality, 0}, {"parent", J_STR, OPT, 0, 0},
    {"priority", J_ENUM, REQ, 0, k_priorities}, {"has_hot_pack", J_BOOL, DEF, 0, 0},
    {"has_expert_fields", J_BOOL, DEF, 0, 0}, {"blob_off", J_U64, REQ, 0, 0}, {"blob_len", J_U64, REQ, 0, 0},
};
static const jschema k_mask = SCHEMA(k_mask_f);
static const jfield k_masks_meta_f[] = {
    {"default_task", J_STR, REQ, 0, 0}, {"masks", J_ARR_OBJ, REQ, &k_mask, 0},
};
static const jschema k_masks_meta = SCHEMA(k_masks_meta_f);

/* ---- the checker ---- */
#define PATH_MAX_LEN 192

static cq_status check_object(const cJSON *obj, const jschema *s, const char *doc, const char *path);

static bool is_u64(const cJSON *v) {
    /* 2^64 itself is not representable as u64; every double below it that
     * is whole is. */
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 &&
           v->valuedouble < 18446744073709551616.0 && v->valuedouble == floor(v->valuedouble);
}
static bool is_u32(const cJSON *v) { return is_u64(v) && v->valuedouble <= 4294967295.0; }
static bool is_num(const cJSON *v) { return cJSON_IsNumber(v) && isfinite(v->valuedouble); }

static bool in_enum(const cJSON *v, const char *const *set) {
    if (!cJSON_IsString(v)) return false;
    for (; *set; set++)
        if (strcmp(v->valuestring, *set) == 0) return true;
    return false;
}

static const char *kind_name(jkind k) {
    switch (k) {
    case J_STR: return "a string";
    case J_U32: return "an unsigned 32-bit integer";
    case J_U64: return "an unsigned integer";
    case J_NUM: return "a finite number";
    case J_BOOL: return "a boolean";
    case J_ANY: return "any value";
    case J_OBJ: return "an object";
    case J_ENUM: return "one of the allowed strings";
    case J_ARR_U64: return "an array of unsigned integers";
    case J_ARR_U32: return "an array of unsigned 32-bit integers";
    case J_ARR_NUM: return "an array of numbers";
    case J_ARR_ENUM: return "an array of allowed strings";
    case J_ARR_OBJ: return "an array of objects";
    }
    return "?";
}

static cq_status bad(const char *doc, const char *path, const jfield *f, const cJSON *v) {
    if (f->enums && (f->kind == J_ENUM || f->kind == J_ARR_ENUM)) {
        char allowed[160] = "";
        for (const char *const *e = f->enums; *e; e++) {
            size_t n = strlen(allowed);
            snprintf(allowed + n, sizeof allowed - n, "%s%s", n ? ", " : "", *e);
        }
        if (v && cJSON_IsString(v))
            return cq_fail(CQ_ERR_PARSE, "%s: '%s' is \"%.64s\", expected one of: %s", doc, path,
                           v->valuestring, allowed);
        return cq_fail(CQ_ERR_PARSE, "%s: '%s' must be one of: %s", doc, path, allowed);
    }
    return cq_fail(CQ_ERR_PARSE, "%s: '%s' must be %s", doc, path, kind_name(f->kind));
}

static cq_status check_value(const cJSON *v, const jfield *f, const char *doc, const char *path) {
    switch (f->kind) {
    case J_STR: return cJSON_IsString(v) ? CQ_OK : bad(doc, path, f, v);
    case J_U32: return is_u32(v) ? CQ_OK : bad(doc, path, f, v);
    case J_U64: return is_u64(v) ? CQ_OK : bad(doc, path, f, v);
    case J_NUM: return is_num(v) ? CQ_OK : bad(doc, path, f, v);
    case J_BOOL: return cJSON_IsBool(v) ? CQ_OK : bad(doc, path, f, v);
    case J_ANY: return CQ_OK;
    case J_ENUM: return in_enum(v, f->enums) ? CQ_OK : bad(doc, path, f, v);
    case J_OBJ:
        if (!cJSON_IsObject(v)) return bad(doc, path, f, v);
        return check_object(v, f->sub, doc, path);
    default: break;
    }
    /* arrays */
    if (!cJSON_IsArray(v)) return bad(doc, path, f, v);
    size_t i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char sub[PATH_MAX_LEN];
        if (snprintf(sub, sizeof sub, "%s[%zu]", path, i) >= (int)sizeof sub) sub[sizeof sub - 2] = '~';
        bool ok;
        switch (f->kind) {
        case J_ARR_U64: ok = is_u64(e); break;
        case J_ARR_U32: ok = is_u32(e); break;
        case J_ARR_NUM: ok = is_num(e); break;
        case J_ARR_ENUM: ok = in_enum(e, f->enums); break;
        case J_ARR_OBJ:
            if (!cJSON_IsObject(e)) return cq_fail(CQ_ERR_PARSE, "%s: '%s' must be an object", doc, sub);
            CQ_TRY(check_object(e, f->sub, doc, sub));
            ok = true;
            break;
        default: ok = false; break;
        }
        if (!ok) {
            if (f->kind == J_ARR_ENUM) return bad(doc, sub, f, e);
            return cq_fail(CQ_ERR_PARSE, "%s: '%s' must be %s", doc, sub,
                           f->kind == J_ARR_NUM ? "a finite number"
                           : f->kind == J_ARR_U32 ? "an unsigned 32-bit integer"
                                                  : "an unsigned integer");
        }
    }
    return CQ_OK;
}

static cq_status check_object(const cJSON *obj, const jschema *s, const char *doc, const char *path) {
    /* Known keys seen so far: a repeated key is refused (the reference
     * parser rejects duplicate fields; cJSON would silently keep the first). */
    uint64_t seen[1] = {0};
    _Static_assert(sizeof(k_arch_f) / sizeof(k_arch_f[0]) <= 64, "seen-mask too small");
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!c->string) continue;
        for (size_t k = 0; k < s->n; k++) {
            if (strcmp(c->string, s->f[k].key) != 0) continue;
            if (seen[0] & (1ull << k))
                return cq_fail(CQ_ERR_PARSE, "%s: key '%s%s%s' appears twice", doc, path, *path ? "." : "",
                               c->string);
            seen[0] |= 1ull << k;
        }
    }
    for (size_t k = 0; k < s->n; k++) {
        const jfield *f = &s->f[k];
        char sub[PATH_MAX_LEN];
        if (snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", f->key) >= (int)sizeof sub)
            sub[sizeof sub - 2] = '~'; /* truncated path, still names the place */
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, f->key);
        if (!v) {
            if (f->pres == REQ) return cq_fail(CQ_ERR_PARSE, "%s: required key '%s' is missing", doc, sub);
            continue;
        }
        if (cJSON_IsNull(v)) {
            if (f->pres == OPT) continue;
            if (f->pres == REQ) return cq_fail(CQ_ERR_PARSE, "%s: required key '%s' is null", doc, sub);
            return cq_fail(CQ_ERR_PARSE, "%s: '%s' is null (omit the key to use its default)", doc, sub);
        }
        CQ_TRY(check_value(v, f, doc, sub));
    }
    return CQ_OK;
}

cq_status cq_cmf_header_check(const cJSON *root) {
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "header JSON: the top level must be an object");
    CQ_TRY(check_object(root, &k_header, "header JSON", ""));
    cq_gen_defaults d;
    CQ_TRY(cq_gen_defaults_from_json(cJSON_GetObjectItemCaseSensitive(root, CQ_GEN_DEFAULTS_KEY), &d));
    cq_gen_defaults_free(&d);
    return CQ_OK;
}

cq_status cq_cmf_masks_meta_check(const cJSON *root) {
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "masks meta JSON: the top level must be an object");
    return check_object(root, &k_masks_meta, "masks meta JSON", "");
}
