/*
 * convert_header.c — the CMF header JSON a conversion writes: the `arch`
 * block with every key the format requires (from an LLM's config.json, or
 * derived from a pipeline's DiT config; see docs/FORMAT.md), quant_type,
 * provenance, and the chat bundle (`tokenizer_config`: chat template, stop
 * ids, bos/pad ids resolved through the tokenizer's added tokens).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gz.h"
#include "format/convert_impl.h"
#include "format/file_read.h"
#include "format/jsonutil.h"

#define CV_MAX_TOKENIZER (512u << 20)

/* The format's integer keys must be JSON integers: cJSON prints integral
 * doubles without a fraction. */
static bool add_uint(cJSON *o, const char *key, uint64_t v) { return cJSON_AddNumberToObject(o, key, (double)v) != NULL; }

/* First present non-negative integer among keys, in `a` then `b`. */
static uint64_t pick_uint(const cJSON *a, const cJSON *b, const char *const *keys, uint64_t dflt) {
    uint64_t v;
    for (const char *const *k = keys; *k; k++) {
        if (a && cv_json_uint(a, *k, &v)) return v;
        if (b && cv_json_uint(b, *k, &v)) return v;
    }
    return dflt;
}

static double pick_num(const cJSON *a, const cJSON *b, const char *const *keys, double dflt) {
    double v;
    for (const char *const *k = keys; *k; k++) {
        if (a && cv_json_num(a, *k, &v)) return v;
        if (b && cv_json_num(b, *k, &v)) return v;
    }
    return dflt;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

static bool add_layer_types(cJSON *arch, uint64_t n, const cJSON *from, cq_status *err) {
    cJSON *lt = cJSON_AddArrayToObject(arch, "layer_types");
    if (!lt) return false;
    if (cJSON_IsArray(from) && (uint64_t)cJSON_GetArraySize(from) == n) {
        static const struct {
            const char *hf, *cmf;
        } map[] = {{"full_attention", "FullAttention"},
                   {"sliding_attention", "SlidingAttention"},
                   {"linear_attention", "LinearAttention"},
                   {"conv", "ShortConv"},
                   {"short_conv", "ShortConv"},
                   {"kda", "Kda"}};
        for (const cJSON *e = from->child; e; e = e->next) {
            const char *cmf = NULL;
            for (size_t i = 0; cJSON_IsString(e) && i < CQ_ARRAY_LEN(map); i++)
                if (strcmp(e->valuestring, map[i].hf) == 0) cmf = map[i].cmf;
            if (!cmf) {
                *err = cq_fail(CQ_ERR_UNSUPPORTED, "config.json layer_types: unknown layer type '%s'",
                               cJSON_IsString(e) ? e->valuestring : "?");
                return false;
            }
            if (!cJSON_AddItemToArray(lt, cJSON_CreateString(cmf))) return false;
        }
        return true;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!cJSON_AddItemToArray(lt, cJSON_CreateString("FullAttention"))) return false;
    return true;
}

static const cJSON *comp_config(const cv_source *src, cv_role role) {
    for (size_t i = 0; i < src->n_comp; i++)
        if (src->comp[i].role == role) return src->comp[i].config;
    return NULL;
}

/* arch for an LLM folder: the config's own numbers (text_config first for
 * multimodal wrappers). */
static cq_status arch_llm(const cv_source *src, cJSON *arch) {
    const cJSON *cfg = comp_config(src, CV_LLM_ROLE);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    if (!cJSON_IsObject(tc)) tc = cfg;
    uint64_t hidden = pick_uint(tc, cfg, KEYS("hidden_size", "n_embd", "d_model"), 0);
    uint64_t heads = pick_uint(tc, cfg, KEYS("num_attention_heads", "n_head"), 0);
    uint64_t layers = pick_uint(tc, cfg, KEYS("num_hidden_layers", "n_layer", "num_layers"), 0);
    uint64_t head_dim = pick_uint(tc, cfg, KEYS("head_dim"), heads ? hidden / heads : 0);
    bool ok = add_uint(arch, "hidden_size", hidden) &&
              add_uint(arch, "intermediate_size",
                       pick_uint(tc, cfg, KEYS("intermediate_size", "moe_intermediate_size", "n_inner"), 0)) &&
              add_uint(arch, "num_layers", layers) && add_uint(arch, "num_attention_heads", heads) &&
              add_uint(arch, "num_kv_heads", pick_uint(tc, cfg, KEYS("num_key_value_heads"), heads)) &&
              add_uint(arch, "head_dim", head_dim) &&
              add_uint(arch, "vocab_size", pick_uint(tc, cfg, KEYS("vocab_size"), 0)) &&
              add_uint(arch, "max_position_embeddings",
                       pick_uint(tc, cfg, KEYS("max_position_embeddings", "n_positions"), 0)) &&
              cJSON_AddNumberToObject(arch, "rms_norm_eps",
                                      pick_num(tc, cfg, KEYS("rms_norm_eps", "layer_norm_eps", "norm_eps"), 1e-6));
    if (!ok) return cq_fail(CQ_ERR_NOMEM, "header JSON");
    cq_status err = CQ_OK;
    if (!add_layer_types(arch, layers, cJSON_GetObjectItemCaseSensitive(tc, "layer_types"), &err))
        return err != CQ_OK ? err : cq_fail(CQ_ERR_NOMEM, "header JSON");
    /* Optional keys, only when the config states them with the right type. */
    const char *mt = src->arch;
    /* zero-centred norm weights, x*(1+w); Gemma-4's RMSNorm multiplies by the plain weight */
    if ((strncmp(mt, "gemma", 5) == 0 && strncmp(mt, "gemma4", 6) != 0) || strstr(mt, "_gemma") ||
        strncmp(mt, "qwen3_5", 7) == 0 || strncmp(mt, "qwen3_next", 10) == 0)
        ok = ok && cJSON_AddStringToObject(arch, "norm_style", "gemma");
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
    double v;
    if (cv_json_num(tc, "rope_theta", &v) || cv_json_num(cfg, "rope_theta", &v) || cv_json_num(rp, "rope_theta", &v))
        ok = ok && cJSON_AddNumberToObject(arch, "rope_theta", v);
    if (cv_json_num(tc, "partial_rotary_factor", &v) || cv_json_num(rp, "partial_rotary_factor", &v))
        ok = ok && cJSON_AddNumberToObject(arch, "partial_rotary_factor", v);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    if (!cJSON_IsBool(tie)) tie = cJSON_GetObjectItemCaseSensitive(tc, "tie_word_embeddings");
    if (cJSON_IsBool(tie)) ok = ok && cJSON_AddBoolToObject(arch, "tie_word_embeddings", cJSON_IsTrue(tie));
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(tc, "hidden_act");
    if (cJSON_IsString(act)) ok = ok && cJSON_AddStringToObject(arch, "hidden_act", act->valuestring);
    uint64_t u;
    if (cv_json_uint(tc, "sliding_window", &u)) ok = ok && add_uint(arch, "sliding_window", u);
    uint64_t experts, moe_inter;
    if (cv_json_uint(tc, "num_experts", &experts) && experts > 0 &&
        cv_json_uint(tc, "moe_intermediate_size", &moe_inter)) {
        cJSON *moe = ok ? cJSON_AddObjectToObject(arch, "moe") : NULL;
        ok = moe && add_uint(moe, "num_experts", experts) &&
             add_uint(moe, "top_k", pick_uint(tc, NULL, KEYS("num_experts_per_tok"), 2)) &&
             add_uint(moe, "moe_intermediate_size", moe_inter);
        const cJSON *ntp = cJSON_GetObjectItemCaseSensitive(tc, "norm_topk_prob");
        if (ok && cJSON_IsBool(ntp)) ok = cJSON_AddBoolToObject(moe, "norm_topk_prob", cJSON_IsTrue(ntp)) != NULL;
    }
    return ok ? CQ_OK : cq_fail(CQ_ERR_NOMEM, "header JSON");
}

/* arch for a pipeline or a lone component: the denoiser's geometry (see
 * docs/FORMAT.md); vocab/positions from the text encoder when there is one. */
static cq_status arch_pipeline(const cv_source *src, cJSON *arch) {
    const cJSON *dit = comp_config(src, CV_DIT);
    const cJSON *te = comp_config(src, CV_TE);
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(te, "text_config");
    if (!cJSON_IsObject(tt)) tt = te;
    uint64_t heads = pick_uint(dit, NULL, KEYS("num_attention_heads", "num_heads", "n_heads"), 0);
    uint64_t head_dim = pick_uint(dit, NULL, KEYS("attention_head_dim", "head_dim"), 0);
    uint64_t hidden = pick_uint(dit, NULL, KEYS("hidden_size", "inner_dim"), heads * head_dim);
    if (hidden == 0) hidden = pick_uint(dit, NULL, KEYS("dim"), 0);
    if (head_dim == 0 && heads) head_dim = hidden / heads;
    uint64_t layers = pick_uint(dit, NULL, KEYS("num_layers", "num_hidden_layers", "depth", "n_layers"), 0);
    layers += pick_uint(dit, NULL, KEYS("num_single_layers"), 0);
    double ratio;
    uint64_t inter = pick_uint(dit, NULL, KEYS("intermediate_size", "ffn_dim"), 0);
    if (inter == 0 && strcmp(src->arch, "z_image") == 0)
        inter = (uint64_t)((double)hidden / 3.0 * 8.0); /* its FeedForward's hidden width, int(dim / 3 * 8) */
    if (inter == 0) inter = cv_json_num(dit, "mlp_ratio", &ratio) && ratio > 0 && ratio < 1e6
                                ? (uint64_t)llround((double)hidden * ratio)
                                : 4 * hidden;
    bool ok = add_uint(arch, "hidden_size", hidden) && add_uint(arch, "intermediate_size", inter) &&
              add_uint(arch, "num_layers", layers) && add_uint(arch, "num_attention_heads", heads) &&
              add_uint(arch, "num_kv_heads", heads) && add_uint(arch, "head_dim", head_dim) &&
              add_uint(arch, "vocab_size", pick_uint(tt, te, KEYS("vocab_size"), 0)) &&
              add_uint(arch, "max_position_embeddings", pick_uint(tt, te, KEYS("max_position_embeddings"), 0)) &&
              cJSON_AddNumberToObject(arch, "rms_norm_eps", pick_num(dit, NULL, KEYS("eps", "norm_eps", "rms_norm_eps"), 1e-6));
    cq_status err = CQ_OK;
    if (!ok || !add_layer_types(arch, layers, NULL, &err)) return cq_fail(CQ_ERR_NOMEM, "header JSON");
    double v;
    if (cv_json_num(dit, "rope_theta", &v) && !cJSON_AddNumberToObject(arch, "rope_theta", v))
        return cq_fail(CQ_ERR_NOMEM, "header JSON");
    return CQ_OK;
}

/* ---- the chat bundle ---- */

static const char *token_content(const cJSON *t) {
    if (cJSON_IsString(t)) return t->valuestring;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "content"); /* an AddedToken object */
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

/* Token string -> id through tokenizer.json's added_tokens, then
 * tokenizer_config's added_tokens_decoder, then the BPE vocab. -1 if unknown. */
static int64_t resolve_token(const char *content, const cJSON *tok, const cJSON *tcfg) {
    if (!content) return -1;
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(tok, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(at) ? at->child : NULL; e; e = e->next) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        uint64_t id;
        if (cJSON_IsString(c) && strcmp(c->valuestring, content) == 0 && cv_json_uint(e, "id", &id) &&
            id <= UINT32_MAX)
            return (int64_t)id;
    }
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(tcfg, "added_tokens_decoder");
    for (const cJSON *e = cJSON_IsObject(dec) ? dec->child : NULL; e; e = e->next) {
        const char *c = token_content(e);
        char *end;
        unsigned long long id = e->string ? strtoull(e->string, &end, 10) : 0;
        if (c && strcmp(c, content) == 0 && e->string[0] && *end == '\0' && id <= UINT32_MAX) return (int64_t)id;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tok, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    uint64_t id;
    if (cJSON_IsObject(vocab) && cv_json_uint(vocab, content, &id) && id <= UINT32_MAX) return (int64_t)id;
    return -1;
}

static bool has_id(const cJSON *arr, double id) {
    for (const cJSON *e = arr->child; e; e = e->next)
        if (e->valuedouble == id) return true;
    return false;
}

/* Add one id or an array of ids (generation_config / config style);
 * false when out of memory. */
static bool add_ids(cJSON *arr, const cJSON *v) {
    const cJSON *one = v;
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : one; e; e = cJSON_IsArray(v) ? e->next : NULL) {
        double d = e->valuedouble;
        if (cJSON_IsNumber(e) && d >= 0 && d <= UINT32_MAX && d == floor(d) && !has_id(arr, d) &&
            !cJSON_AddItemToArray(arr, cJSON_CreateNumber(d)))
            return false;
    }
    return true;
}

/* The chat template: chat_template.jinja, else tokenizer_config's
 * chat_template (a string, or a list of {name, template} -> "default"),
 * else chat_template.json. Returns a cq_malloc'd string or NULL. */
static cq_status find_template(const char *dir, const cJSON *tcfg, char **out) {
    *out = NULL;
    char *p = cv_join(dir, "chat_template.jinja");
    if (!p) return CQ_ERR_NOMEM;
    size_t len;
    cq_status s = CQ_OK;
    if (cq_file_is_regular(p)) {
        s = cq_file_read_all(p, 16u << 20, (uint8_t **)out, &len);
        cq_free(p);
        return s;
    }
    cq_free(p);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(tcfg, "chat_template");
    if (cJSON_IsArray(ct)) {
        const cJSON *pick = NULL;
        for (const cJSON *e = ct->child; e; e = e->next) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            if (!pick || (cJSON_IsString(nm) && strcmp(nm->valuestring, "default") == 0)) pick = e;
        }
        ct = cJSON_GetObjectItemCaseSensitive(pick, "template");
    }
    if (cJSON_IsString(ct)) {
        *out = cq_strdup(ct->valuestring);
        return *out ? CQ_OK : CQ_ERR_NOMEM;
    }
    p = cv_join(dir, "chat_template.json");
    if (!p) return CQ_ERR_NOMEM;
    if (cq_file_is_regular(p)) {
        cJSON *j;
        s = cv_read_json(p, 16u << 20, &j);
        if (s == CQ_OK) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
            if (cJSON_IsString(t) && !(*out = cq_strdup(t->valuestring))) s = CQ_ERR_NOMEM;
            cJSON_Delete(j);
        }
    }
    cq_free(p);
    return s;
}

static cq_status optional_json(const char *dir, const char *leaf, size_t max, cJSON **out) {
    *out = NULL;
    if (!dir) return CQ_OK;
    char *p = cv_join(dir, leaf);
    if (!p) return CQ_ERR_NOMEM;
    cq_status s = cq_file_is_regular(p) ? cv_read_json(p, max, out) : CQ_OK;
    cq_free(p);
    return s;
}

/* A tokenizer saved after use keeps the truncation and padding of its last
 * call in tokenizer.json; transformers sets both anew on every call (the
 * pipelines' own max_length and padding), so they are no property of the
 * model: the pack's copy has them null. Otherwise the bytes stay verbatim. */
static cq_status drop_call_state(cJSON *tok, uint8_t **bytes, size_t *len, cq_convert_report *rep) {
    static const char *const keys[] = {"truncation", "padding"};
    bool changed = false;
    for (size_t i = 0; i < CQ_ARRAY_LEN(keys); i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(tok, keys[i]);
        if (!v || cJSON_IsNull(v)) continue;
        cJSON *null = cJSON_CreateNull();
        if (!null || !cJSON_ReplaceItemInObjectCaseSensitive(tok, keys[i], null)) {
            cJSON_Delete(null);
            return cq_fail(CQ_ERR_NOMEM, "tokenizer.json: out of memory");
        }
        CQ_TRY(cv_note(rep, "tokenizer.json's %s (the state of its last call) is left out: transformers sets it on "
                       "every call", keys[i]));
        changed = true;
    }
    if (!changed) return CQ_OK;
    char *out;
    size_t n;
    CQ_TRY(cq_json_print(tok, &out, &n));
    cq_free(*bytes);
    *bytes = (uint8_t *)out;
    *len = n;
    return CQ_OK;
}

/* Builds `tokenizer_config` into hdr (when anything was found) and returns
 * the tokenizer.json bytes. */
static cq_status chat_bundle(const cv_source *src, cJSON *hdr, cq_convert_report *rep, uint8_t **tok_bytes,
                             size_t *tok_len) {
    *tok_bytes = NULL;
    *tok_len = 0;
    cJSON *tok = NULL, *tcfg = NULL, *gen = NULL;
    char *tmpl = NULL;
    cq_status s = CQ_OK;
    if (src->tok_dir) {
        /* tokenizer.json, else its gzipped copy tokenizer.json.gz (the plain file wins where both are) */
        char *p = cv_join(src->tok_dir, "tokenizer.json");
        char *pz = cv_join(src->tok_dir, "tokenizer.json.gz");
        if (!p || !pz) {
            cq_free(p);
            cq_free(pz);
            return CQ_ERR_NOMEM;
        }
        const bool plain = cq_file_is_regular(p), gz = !plain && cq_file_is_regular(pz);
        if (plain || gz) {
            const char *path = plain ? p : pz;
            s = plain ? cq_file_read_all(p, CV_MAX_TOKENIZER, tok_bytes, tok_len)
                      : cq_file_read_gz(pz, CV_MAX_TOKENIZER, tok_bytes, tok_len);
            if (s == CQ_OK) s = cq_json_parse(*tok_bytes, *tok_len, path, &tok);
            if (s == CQ_OK) s = drop_call_state(tok, tok_bytes, tok_len, rep);
        } else {
            s = cv_note(rep,
                        "no tokenizer.json (or tokenizer.json.gz) in %s: the pack has no tokenizer section (a slow "
                        "tokenizer's vocab.json/merges.txt are not converted; transformers' save_pretrained of "
                        "the fast tokenizer writes tokenizer.json)",
                        src->tok_dir);
        }
        cq_free(p);
        cq_free(pz);
        if (s == CQ_OK) s = optional_json(src->tok_dir, "tokenizer_config.json", CV_MAX_TOKENIZER, &tcfg);
        if (s == CQ_OK) s = find_template(src->tok_dir, tcfg, &tmpl);
    }
    if (s == CQ_OK) s = optional_json(src->te_dir, "generation_config.json", 16u << 20, &gen);
    cJSON *bundle = NULL;
    if (s == CQ_OK && (tmpl || tcfg || gen)) {
        bundle = cJSON_AddObjectToObject(hdr, "tokenizer_config");
        cJSON *eos = bundle ? cJSON_AddArrayToObject(bundle, "eos_token_ids") : NULL;
        if (!eos) s = cq_fail(CQ_ERR_NOMEM, "header JSON");
        if (s == CQ_OK && tmpl && !cJSON_AddStringToObject(bundle, "chat_template", tmpl))
            s = cq_fail(CQ_ERR_NOMEM, "header JSON");
        if (s == CQ_OK) {
            /* Stop ids: the tokenizer's eos token and generation_config's
             * list (chat models stop on the turn-end token too). */
            const cJSON *cfg = src->layout == CV_LLM ? comp_config(src, CV_LLM_ROLE) : NULL;
            const char *eos_text = token_content(cJSON_GetObjectItemCaseSensitive(tcfg, "eos_token"));
            int64_t id = resolve_token(eos_text, tok, tcfg);
            cJSON *idj = id >= 0 ? cJSON_CreateNumber((double)id) : NULL;
            bool ok = (id < 0 || (idj && add_ids(eos, idj))) && add_ids(eos, cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id")) &&
                      add_ids(eos, cJSON_GetObjectItemCaseSensitive(cfg, "eos_token_id"));
            cJSON_Delete(idj);
            if (!ok) s = cq_fail(CQ_ERR_NOMEM, "header JSON");
            if (s == CQ_OK && eos_text && id < 0) s = cv_note(rep, "eos token '%s' not found in the tokenizer", eos_text);
            static const char *const keys[2] = {"bos", "pad"};
            for (int k = 0; k < 2 && s == CQ_OK; k++) {
                char tkey[16], ikey[16];
                snprintf(tkey, sizeof tkey, "%s_token", keys[k]);
                snprintf(ikey, sizeof ikey, "%s_token_id", keys[k]);
                int64_t v = resolve_token(token_content(cJSON_GetObjectItemCaseSensitive(tcfg, tkey)), tok, tcfg);
                uint64_t u;
                if (v < 0 && (cv_json_uint(gen, ikey, &u) || (cfg && cv_json_uint(cfg, ikey, &u))) && u <= UINT32_MAX)
                    v = (int64_t)u;
                if (v >= 0 && !add_uint(bundle, ikey, (uint64_t)v)) s = cq_fail(CQ_ERR_NOMEM, "header JSON");
            }
        }
    }
    rep->has_tokenizer = *tok_len > 0;
    rep->has_chat_template = tmpl != NULL;
    cq_free(tmpl);
    cJSON_Delete(tok);
    cJSON_Delete(tcfg);
    cJSON_Delete(gen);
    if (s != CQ_OK) {
        cq_free(*tok_bytes);
        *tok_bytes = NULL;
        *tok_len = 0;
    }
    return s;
}

static const char *layout_name(cv_layout l) {
    return l == CV_PIPELINE ? "pipeline" : l == CV_COMPONENT ? "component" : "llm";
}

/* ---- generation defaults ---- */

static void set_recipe(cq_gen_defaults *d, int side, int steps, double guidance, double shift) {
    d->has_size = true;
    d->width = d->height = side;
    d->has_steps = true;
    d->steps = steps;
    d->has_guidance = true;
    d->guidance = guidance;
    if (shift > 0.0) {
        d->has_shift = true;
        d->shift = shift;
    }
}

cq_status cv_recipe(const char *arch, const cJSON *scheduler, cq_gen_defaults *d, cq_convert_report *rep) {
    memset(d, 0, sizeof *d);
    if (strcmp(arch, "qwen_image21") == 0) {
        set_recipe(d, 1024, 40, 1.0, 0.0); /* dynamic shifting: no shift to recommend */
    } else if (strcmp(arch, "z_image") == 0) {
        /* Turbo and base share every config but the scheduler's shift */
        double shift = 0.0;
        if (!cv_json_num(scheduler, "shift", &shift))
            return cv_note(rep, "z_image: no scheduler shift to tell Turbo from base; no generation defaults written "
                           "(give them with --default)");
        if (shift == 3.0)
            set_recipe(d, 1024, 8, 0.0, 3.0); /* Z-Image-Turbo: 8 steps, no guidance */
        else if (shift == 6.0)
            set_recipe(d, 1024, 28, 4.0, 6.0); /* Z-Image base: guidance 4 with the empty negative prompt */
        else
            return cv_note(rep, "z_image: scheduler shift %g is neither Turbo's (3) nor base's (6); no generation "
                           "defaults written (give them with --default)", shift);
    } else if (strcmp(arch, "ltx2") == 0 && scheduler) {
        /* the distilled checkpoints' scheduler does not shift; the dev one's does, and its recipe (30 steps with
         * CFG, STG at chosen blocks and modality guidance) is more than these keys say */
        const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(scheduler, "use_dynamic_shifting");
        if (!cJSON_IsFalse(dyn))
            return cv_note(rep, "ltx2: a scheduler with dynamic shifting (the dev model): no generation defaults "
                           "written (give them with --default)");
        d->has_size = true;
        d->width = 768;
        d->height = 512;
        d->has_steps = true;
        d->steps = 8;
        d->has_guidance = true;
        d->guidance = 1.0;
        d->has_frames = true;
        d->frames = 121;
        d->has_fps = true;
        d->fps = 24.0;
    }
    return CQ_OK;
}

static cq_status add_defaults(const cv_source *src, const cq_gen_defaults *over, cJSON *h, cq_convert_report *rep) {
    cJSON *sched = NULL;
    for (size_t i = 0; i < src->n_blob; i++)
        if (strcmp(src->blob[i].name, "scheduler.config_json") == 0)
            sched = cJSON_ParseWithLength((const char *)src->blob[i].data, src->blob[i].len);
    cq_gen_defaults d;
    cq_status s = cv_recipe(src->arch, sched, &d, rep);
    cJSON_Delete(sched);
    if (s == CQ_OK && over) s = cq_gen_defaults_merge(&d, over);
    if (s == CQ_OK) s = cq_gen_defaults_to_header(&d, h);
    if (s == CQ_OK) cq_gen_defaults_describe(&d, rep->defaults, sizeof rep->defaults);
    cq_gen_defaults_free(&d);
    return s;
}

cq_status cv_build_header(const cv_source *src, const char *quant_type, const cq_gen_defaults *over,
                          cq_convert_report *rep, char **json, uint8_t **tokenizer, size_t *tokenizer_len) {
    *json = NULL;
    *tokenizer = NULL;
    *tokenizer_len = 0;
    cJSON *h = cJSON_CreateObject(), *arch = NULL;
    cq_status s = CQ_OK;
    if (!h || !cJSON_AddStringToObject(h, "format", "cmf") || !cJSON_AddNumberToObject(h, "version", 2) ||
        !(arch = cJSON_AddObjectToObject(h, "arch")) || !cJSON_AddStringToObject(arch, "arch_name", src->arch)) {
        s = cq_fail(CQ_ERR_NOMEM, "header JSON");
        goto done;
    }
    s = src->layout == CV_LLM ? arch_llm(src, arch) : arch_pipeline(src, arch);
    if (s != CQ_OK) goto done;
    if (!cJSON_AddStringToObject(h, "quant_type", quant_type)) {
        s = cq_fail(CQ_ERR_NOMEM, "header JSON");
        goto done;
    }
    char tool[64];
    snprintf(tool, sizeof tool, "cortiq.c %s convert", cq_version());
    const char *base = strrchr(src->root, '/');
    cJSON *prov = cJSON_AddObjectToObject(h, "provenance");
    bool ok = prov && cJSON_AddStringToObject(prov, "tool", tool) &&
              cJSON_AddStringToObject(prov, "source", base ? base + 1 : src->root) &&
              cJSON_AddStringToObject(prov, "layout", layout_name(src->layout)) &&
              (!src->class_name[0] || cJSON_AddStringToObject(prov, "class_name", src->class_name));
    cJSON *comps = ok ? cJSON_AddObjectToObject(prov, "components") : NULL;
    ok = comps != NULL;
    for (size_t i = 0; ok && i < src->n_comp; i++)
        if (src->comp[i].prefix[0]) ok = cJSON_AddStringToObject(comps, src->comp[i].prefix, src->comp[i].folder) != NULL;
    if (!ok) {
        s = cq_fail(CQ_ERR_NOMEM, "header JSON");
        goto done;
    }
    s = chat_bundle(src, h, rep, tokenizer, tokenizer_len);
    if (s == CQ_OK) s = add_defaults(src, over, h, rep);
    if (s != CQ_OK) goto done;
    size_t len;
    s = cq_json_print(h, json, &len);
done:
    cJSON_Delete(h);
    if (s != CQ_OK) {
        cq_free(*tokenizer);
        *tokenizer = NULL;
        *tokenizer_len = 0;
    }
    return s;
}
