/*
 * gemma4_load.c — the Gemma-4 text decoder's config (every bound checked,
 * unsupported features refused), its tensor table and the weight binding.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "models/gemma4_impl.h"
#include "models/kit/config.h"
#include "models/tables.h"

#define WHO "gemma4"

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
static const char *const k_kind_name[2] = {"sliding_attention", "full_attention"};

static cq_status parse_rope(const cJSON *rp, int kind, cq_gemma4_config *c) {
    cq_gemma4_rope *r = &c->rope[kind];
    /* transformers' defaults when rope_parameters (or the entry) is absent */
    *r = kind == CQ_GEMMA4_SLIDING ? (cq_gemma4_rope){false, 1e4, 1.0, 1.0} : (cq_gemma4_rope){true, 1e6, 0.25, 1.0};
    const cJSON *e = rp ? cJSON_GetObjectItemCaseSensitive(rp, k_kind_name[kind]) : NULL;
    if (!e || cJSON_IsNull(e)) return CQ_OK;
    char where[64];
    snprintf(where, sizeof where, "rope_parameters.%s.", k_kind_name[kind]);
    if (!cJSON_IsObject(e)) return cq_fail(CQ_ERR_PARSE, WHO ": config rope_parameters.%s must be an object", k_kind_name[kind]);
    const cq_cfg g = {e, WHO, where};
    const cJSON *t = cq_cfg_get(&g, "rope_type");
    const char *type = "default";
    if (t) {
        if (!cJSON_IsString(t)) return cq_fail(CQ_ERR_PARSE, WHO ": config %srope_type must be a string", where);
        type = t->valuestring;
    }
    if (strcmp(type, "default") == 0) r->proportional = false;
    else if (strcmp(type, "proportional") == 0) r->proportional = true;
    else
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %srope_type '%s' is not supported (default, proportional)",
                       where, type);
    CQ_TRY(cq_cfg_num(&g, "rope_theta", -1.0, 0.0, true, 1e12, &r->theta));
    r->partial = 1.0;
    r->factor = 1.0;
    if (r->proportional) {
        CQ_TRY(cq_cfg_num(&g, "partial_rotary_factor", 1.0, 0.0, false, 1.0, &r->partial));
        CQ_TRY(cq_cfg_num(&g, "factor", 1.0, 0.0, true, 1e6, &r->factor));
    }
    return CQ_OK;
}

/* Refuse a boolean feature that is on (absent: off). */
static cq_status refuse_on(const cq_cfg *g, const char *key, const char *what) {
    bool v = false;
    CQ_TRY(cq_cfg_bool(g, key, false, &v));
    if (v) return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %s%s is true: %s is not supported", g->where, key, what);
    return CQ_OK;
}

/* transformers 5.x's per_layer_config ({"5": {"head_dim": 512, "num_key_value_heads": 1}, ...}, which newer
 * versions save instead of global_head_dim / num_global_key_value_heads): the overrides of each listed layer.
 * Every layer of one kind must end up with the same head dim and KV heads; those become the kind's. */
static cq_status apply_per_layer(const cq_cfg *g, cq_gemma4_config *c) {
    const cJSON *plc = cq_cfg_get(g, "per_layer_config");
    if (!plc) return CQ_OK;
    if (!cJSON_IsObject(plc)) return cq_fail(CQ_ERR_PARSE, WHO ": config %sper_layer_config must be an object", g->where);
    int hd[2] = {-1, -1}, kv[2] = {-1, -1};
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the listed layers set their kind's values; pass 1: every layer must agree with them */
        for (int l = 0; l < c->n_layers; l++) {
            int kind = c->kind[l];
            char key[16], where[64];
            snprintf(key, sizeof key, "%d", l);
            snprintf(where, sizeof where, "per_layer_config.%d.", l);
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(plc, key);
            if (e && !cJSON_IsObject(e))
                return cq_fail(CQ_ERR_PARSE, WHO ": config %s%s must be an object", g->where, where);
            const cq_cfg h = {e, WHO, where};
            int lh = 0, lk = 0;
            int dh = pass ? hd[kind] : c->head_dim[kind], dk = pass ? kv[kind] : c->n_kv_heads[kind];
            if (pass && !e) dh = c->head_dim[kind], dk = c->n_kv_heads[kind];
            CQ_TRY(cq_cfg_int(&h, "head_dim", dh, 2, 4096, &lh));
            CQ_TRY(cq_cfg_int(&h, "num_key_value_heads", dk, 1, 1024, &lk));
            if (pass == 0) {
                if (e && hd[kind] < 0) hd[kind] = lh, kv[kind] = lk;
                continue;
            }
            if (lh != hd[kind] || lk != kv[kind])
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config per_layer_config gives layer %d (%s) head_dim %d with "
                               "%d KV heads, other %s layers %d with %d: per-layer overrides are not supported", l,
                               k_kind_name[kind], lh, lk, k_kind_name[kind], hd[kind], kv[kind]);
        }
        for (int k = 0; pass == 0 && k < 2; k++)
            if (hd[k] < 0) hd[k] = c->head_dim[k], kv[k] = c->n_kv_heads[k];
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, plc) {
        char *end = NULL;
        long l = e->string ? strtol(e->string, &end, 10) : -1;
        if (!e->string || end == e->string || *end || l < 0 || l >= c->n_layers)
            return cq_fail(CQ_ERR_PARSE, WHO ": config per_layer_config key '%s' is not a layer index in [0, %d)",
                           e->string ? e->string : "?", c->n_layers);
        const cJSON *it;
        cJSON_ArrayForEach(it, e) {
            if (strcmp(it->string, "head_dim") != 0 && strcmp(it->string, "num_key_value_heads") != 0)
                return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config per_layer_config.%ld.%s is not supported (only "
                               "head_dim, num_key_value_heads)", l, it->string);
        }
    }
    for (int k = 0; k < 2; k++) c->head_dim[k] = hd[k], c->n_kv_heads[k] = kv[k];
    return CQ_OK;
}

static cq_status parse_json(const cJSON *root, void *out) {
    cq_gemma4_config *c = out;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, WHO ": config is not a JSON object");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    const char *where = "";
    if (tc && !cJSON_IsNull(tc)) {
        if (!cJSON_IsObject(tc)) return cq_fail(CQ_ERR_PARSE, WHO ": config text_config must be an object");
        where = "text_config.";
    } else {
        tc = root;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    if (!cJSON_IsString(mt)) mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsString(mt) || strncmp(mt->valuestring, "gemma4", 6) != 0 || strstr(mt->valuestring, "vision") ||
        strstr(mt->valuestring, "audio"))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": model_type '%s' is not a Gemma-4 text model (gemma4_text, gemma4, "
                       "gemma4_unified)", cJSON_IsString(mt) ? mt->valuestring : "(none)");
    const cq_cfg g = {tc, WHO, where};
    /* gemma4_unified (LTX-2.5's encoder) drops some keys its class fixes: no per-layer inputs, K = V on full
     * layers, a 1024-key window */
    const bool unified = strstr(mt->valuestring, "unified") != NULL;
    CQ_TRY(cq_cfg_int(&g, "vocab_size", -1, 1, 1 << 24, &c->vocab_size));
    CQ_TRY(cq_cfg_int(&g, "hidden_size", -1, 1, 1 << 16, &c->hidden));
    CQ_TRY(cq_cfg_int(&g, "intermediate_size", -1, 1, 1 << 20, &c->intermediate));
    CQ_TRY(cq_cfg_int(&g, "num_hidden_layers", -1, 1, CQ_GEMMA4_MAX_LAYERS, &c->n_layers));
    CQ_TRY(cq_cfg_int(&g, "num_attention_heads", -1, 1, 1024, &c->n_heads));
    CQ_TRY(cq_cfg_int(&g, "num_key_value_heads", -1, 1, 1024, &c->n_kv_heads[CQ_GEMMA4_SLIDING]));
    CQ_TRY(cq_cfg_int(&g, "head_dim", 256, 2, 4096, &c->head_dim[CQ_GEMMA4_SLIDING]));
    CQ_TRY(cq_cfg_bool(&g, "attention_k_eq_v", unified, &c->k_eq_v));
    /* transformers: global_head_dim defaults to 512; null falls back to head_dim */
    const cJSON *ghd = cJSON_GetObjectItemCaseSensitive(tc, "global_head_dim");
    if (ghd && cJSON_IsNull(ghd)) c->head_dim[CQ_GEMMA4_FULL] = c->head_dim[CQ_GEMMA4_SLIDING];
    else CQ_TRY(cq_cfg_int(&g, "global_head_dim", 512, 2, 4096, &c->head_dim[CQ_GEMMA4_FULL]));
    bool ghd_given = !(ghd && cJSON_IsNull(ghd));
    const bool plc = cq_cfg_get(&g, "per_layer_config") != NULL;
    c->n_kv_heads[CQ_GEMMA4_FULL] = c->n_kv_heads[CQ_GEMMA4_SLIDING];
    /* with attention_k_eq_v, full layers have num_global_key_value_heads (or per_layer_config's) */
    if (c->k_eq_v)
        CQ_TRY(cq_cfg_int(&g, "num_global_key_value_heads", plc ? c->n_kv_heads[CQ_GEMMA4_SLIDING] : -1, 1, 1024,
                          &c->n_kv_heads[CQ_GEMMA4_FULL]));
    CQ_TRY(cq_cfg_int(&g, "sliding_window", unified ? 1024 : 512, 1, 1 << 30, &c->sliding_window));
    CQ_TRY(cq_cfg_int(&g, "max_position_embeddings", 131072, 1, 1 << 30, &c->max_positions));
    double eps = 1e-6;
    CQ_TRY(cq_cfg_num(&g, "rms_norm_eps", 1e-6, 0.0, true, 1.0, &eps));
    c->eps = (float)eps;
    /* layer types: the config's, else transformers' default 5:1 pattern; the last is forced to full attention */
    const cJSON *lt = cq_cfg_get(&g, "layer_types");
    if (lt && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers))
        return cq_fail(CQ_ERR_PARSE, WHO ": config %slayer_types must be an array of num_hidden_layers (%d) strings",
                       where, c->n_layers);
    for (int i = 0; i < c->n_layers; i++) {
        if (!lt) {
            c->kind[i] = (i + 1) % 6 ? CQ_GEMMA4_SLIDING : CQ_GEMMA4_FULL;
            continue;
        }
        const cJSON *t = cJSON_GetArrayItem(lt, i);
        if (cJSON_IsString(t) && strcmp(t->valuestring, k_kind_name[0]) == 0) c->kind[i] = CQ_GEMMA4_SLIDING;
        else if (cJSON_IsString(t) && strcmp(t->valuestring, k_kind_name[1]) == 0) c->kind[i] = CQ_GEMMA4_FULL;
        else
            return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %slayer_types[%d] is '%s' (sliding_attention or "
                           "full_attention)", where, i, cJSON_IsString(t) ? t->valuestring : "?");
    }
    c->kind[c->n_layers - 1] = CQ_GEMMA4_FULL;
    CQ_TRY(apply_per_layer(&g, c));
    for (int k = 0; k < 2; k++) {
        if (c->head_dim[k] % 2)
            return cq_fail(CQ_ERR_PARSE, WHO ": config %s head dim %d must be even (RoPE rotates pairs)",
                           k_kind_name[k], c->head_dim[k]);
        if (c->n_heads % c->n_kv_heads[k])
            return cq_fail(CQ_ERR_PARSE, WHO ": config num_attention_heads %d is not a multiple of the %s layers' %d "
                           "KV heads", c->n_heads, k_kind_name[k], c->n_kv_heads[k]);
        if ((int64_t)c->n_heads * c->head_dim[k] > (1 << 20))
            return cq_fail(CQ_ERR_PARSE, WHO ": config num_attention_heads x head dim is too large");
    }
    /* features this tower does not implement */
    const cJSON *act = cq_cfg_get(&g, "hidden_activation");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "gelu_pytorch_tanh") != 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %shidden_activation '%s' is not supported (gelu_pytorch_tanh)",
                       where, cJSON_IsString(act) ? act->valuestring : "?");
    int ple = 0, shared = 0;
    /* transformers' default is 256 (on) for gemma4; null, like 0, turns the per-layer inputs off; gemma4_unified has
     * none (its config drops the key) */
    const cJSON *ple_it = cJSON_GetObjectItemCaseSensitive(tc, "hidden_size_per_layer_input");
    if (!(ple_it && cJSON_IsNull(ple_it)))
        CQ_TRY(cq_cfg_int(&g, "hidden_size_per_layer_input", unified ? 0 : 256, 0, 1 << 16, &ple));
    if (ple > 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %shidden_size_per_layer_input is %d: per-layer input "
                       "embeddings are not supported (0 or null turns them off)", where, ple);
    CQ_TRY(cq_cfg_int(&g, "num_kv_shared_layers", 0, 0, CQ_GEMMA4_MAX_LAYERS, &shared));
    if (shared > 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %snum_kv_shared_layers is %d: shared K/V layers are not "
                       "supported", where, shared);
    CQ_TRY(refuse_on(&g, "enable_moe_block", "a mixture-of-experts block"));
    CQ_TRY(refuse_on(&g, "use_double_wide_mlp", "the double-wide MLP"));
    CQ_TRY(refuse_on(&g, "attention_bias", "attention with biases"));
    /* "vision" (gemma4_unified's default) makes only image tokens bidirectional: text stays causal */
    const cJSON *bidi = cq_cfg_get(&g, "use_bidirectional_attention");
    if (bidi && !(cJSON_IsString(bidi) && strcmp(bidi->valuestring, "vision") == 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": config %suse_bidirectional_attention is '%s': only causal attention "
                       "(null or \"vision\" with text input) is supported", where,
                       cJSON_IsString(bidi) ? bidi->valuestring : "?");
    const cJSON *rp = cq_cfg_get(&g, "rope_parameters");
    if (rp && !cJSON_IsObject(rp)) return cq_fail(CQ_ERR_PARSE, WHO ": config %srope_parameters must be an object", where);
    for (int k = 0; k < 2; k++) CQ_TRY(parse_rope(rp, k, c));
    /* the default type's frequencies span the sliding head_dim whatever the layer (the reference's
     * compute_default_rope_parameters); a full layer of another width could not use them */
    if (!c->rope[CQ_GEMMA4_FULL].proportional && c->head_dim[CQ_GEMMA4_FULL] != c->head_dim[CQ_GEMMA4_SLIDING])
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": default RoPE on full layers of head dim %d (sliding %d) is not "
                       "supported", c->head_dim[CQ_GEMMA4_FULL], c->head_dim[CQ_GEMMA4_SLIDING]);
    if (c->rope[CQ_GEMMA4_FULL].proportional && !ghd_given && !plc)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": proportional RoPE with global_head_dim null is not supported");
    return CQ_OK;
}

cq_status cq_gemma4_parse_config(const cq_cmf *cmf, const char *prefix, cq_gemma4_config *cfg) {
    return cq_cfg_read(cmf, prefix, WHO, parse_json, cfg);
}

cq_status cq_gemma4_parse_config_text(const char *json, cq_gemma4_config *cfg) {
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    if (!j) return cq_fail(CQ_ERR_PARSE, WHO ": config is not valid JSON");
    cq_status s = parse_json(j, cfg);
    cJSON_Delete(j);
    return s;
}

/* The inverse frequencies of one layer kind ([head_dim / 2], f32 as transformers forms them). */
void g4_inv_freq(const cq_gemma4_config *c, int kind, float *out) {
    const cq_gemma4_rope *r = &c->rope[kind];
    int hd = c->head_dim[kind], half = hd / 2;
    if (!r->proportional) {
        int dim = c->head_dim[CQ_GEMMA4_SLIDING]; /* == hd (checked) */
        for (int j = 0; j < half; j++) out[j] = 1.0f / powf((float)r->theta, (float)(2 * j) / (float)dim);
        return;
    }
    int angles = (int)floor(r->partial * hd / 2.0);
    if (angles > half) angles = half;
    for (int j = 0; j < half; j++) {
        float f = j < angles ? 1.0f / powf((float)r->theta, (float)(2 * j) / (float)hd) : 0.0f;
        out[j] = f / (float)r->factor;
    }
}

/* ------------------------------------------------------------------------ */
/* Tensor table                                                             */
/* ------------------------------------------------------------------------ */
cq_status cq_gemma4_tensors(const cq_gemma4_config *c, const char *prefix, const char *stack, cq_tt_list *out) {
    if (!prefix) prefix = "";
    char sp[256];
    int k = snprintf(sp, sizeof sp, "%s%s", prefix, stack ? stack : "");
    if (k < 0 || (size_t)k >= sizeof sp) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": tensor prefix is too long");
    uint64_t H = (uint64_t)c->hidden, I = (uint64_t)c->intermediate;
    uint64_t emb[2] = {(uint64_t)c->vocab_size, H}, h1[1] = {H}, one[1] = {1};
    CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, emb, "embed_tokens.weight"));
    CQ_TRY(cq_tt_add(out, sp, CQ_TT_VECTOR, true, 1.0f, 1, h1, "norm.weight"));
    static const char *const norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                        "post_feedforward_layernorm"};
    for (int l = 0; l < c->n_layers; l++) {
        int kind = c->kind[l];
        uint64_t hd = (uint64_t)c->head_dim[kind], Q = (uint64_t)c->n_heads * hd, KV = (uint64_t)c->n_kv_heads[kind] * hd;
        uint64_t q[2] = {Q, H}, kv[2] = {KV, H}, o[2] = {H, Q}, gu[2] = {I, H}, d[2] = {H, I}, hv[1] = {hd};
        for (size_t i = 0; i < CQ_ARRAY_LEN(norms); i++)
            CQ_TRY(cq_tt_add(out, sp, CQ_TT_VECTOR, true, 1.0f, 1, h1, "layers.%d.%s.weight", l, norms[i]));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, q, "layers.%d.self_attn.q_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, kv, "layers.%d.self_attn.k_proj.weight", l));
        if (cq_gemma4_has_v(c, l))
            CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, kv, "layers.%d.self_attn.v_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, o, "layers.%d.self_attn.o_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_VECTOR, true, 1.0f, 1, hv, "layers.%d.self_attn.q_norm.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_VECTOR, true, 1.0f, 1, hv, "layers.%d.self_attn.k_norm.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, gu, "layers.%d.mlp.gate_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, gu, "layers.%d.mlp.up_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_MATRIX, true, 0.0f, 2, d, "layers.%d.mlp.down_proj.weight", l));
        CQ_TRY(cq_tt_add(out, sp, CQ_TT_VECTOR, true, 1.0f, 1, one, "layers.%d.layer_scalar", l));
    }
    /* the head (tied to the embeddings when absent); the encoder never reads it */
    CQ_TRY(cq_tt_add(out, prefix, CQ_TT_MATRIX, false, 0.0f, 2, emb, "lm_head.weight"));
    /* a multimodal wrapper's towers sit beside the text tower */
    CQ_TRY(cq_tt_add_subtree(out, prefix, "model.vision_tower."));
    CQ_TRY(cq_tt_add_subtree(out, prefix, "model.audio_tower."));
    CQ_TRY(cq_tt_add_subtree(out, prefix, "model.embed_vision."));
    return cq_tt_add_subtree(out, prefix, "model.embed_audio.");
}

const char *cq_gemma4_stack_prefix(const cq_cmf *cmf, const char *prefix) {
    static const char *const cand[] = {"model.language_model.", "model.", "language_model.", ""};
    for (size_t i = 0; i < CQ_ARRAY_LEN(cand); i++) {
        char name[768];
        snprintf(name, sizeof name, "%s%sembed_tokens.weight", prefix ? prefix : "", cand[i]);
        if (cq_cmf_find(cmf, name)) return cand[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Load                                                                     */
/* ------------------------------------------------------------------------ */
static cq_status bind_all(cq_gemma4 *m, const cq_cmf *cmf, const char *prefix) {
    const char *stack = cq_gemma4_stack_prefix(cmf, prefix);
    if (!stack)
        return cq_fail(CQ_ERR_MISSING, WHO ": no '%smodel.embed_tokens.weight' (nor '%smodel.language_model."
                       "embed_tokens.weight') in the file", prefix, prefix);
    const cq_gemma4_config *c = &m->cfg;
    cq_tt_list table = {0};
    cq_status s = cq_gemma4_tensors(c, prefix, stack, &table);
    const cq_tt_binder b = {WHO, &table, cmf, m->be, &m->held};
    char sp[512];
    snprintf(sp, sizeof sp, "%s%s", prefix, stack);
    if (s == CQ_OK) s = cq_tt_bind_weight(&b, &m->embed, "%sembed_tokens.weight", sp);
    if (s == CQ_OK) s = cq_tt_bind_vector(&b, &m->norm, "%snorm.weight", sp);
    if (s == CQ_OK && !(m->layers = cq_calloc((size_t)c->n_layers, sizeof *m->layers))) s = CQ_ERR_NOMEM;
    for (int l = 0; s == CQ_OK && l < c->n_layers; l++) {
        g4_layer *L = &m->layers[l];
        const char *p = "layers";
        s = cq_tt_bind_vector(&b, &L->in_norm, "%s%s.%d.input_layernorm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_vector(&b, &L->post_attn_norm, "%s%s.%d.post_attention_layernorm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_vector(&b, &L->pre_ff_norm, "%s%s.%d.pre_feedforward_layernorm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_vector(&b, &L->post_ff_norm, "%s%s.%d.post_feedforward_layernorm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->q, "%s%s.%d.self_attn.q_proj.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->k, "%s%s.%d.self_attn.k_proj.weight", sp, p, l);
        if (s == CQ_OK && cq_gemma4_has_v(c, l))
            s = cq_tt_bind_weight(&b, &L->v, "%s%s.%d.self_attn.v_proj.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->o, "%s%s.%d.self_attn.o_proj.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_vector(&b, &L->q_norm, "%s%s.%d.self_attn.q_norm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_vector(&b, &L->k_norm, "%s%s.%d.self_attn.k_norm.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->gate, "%s%s.%d.mlp.gate_proj.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->up, "%s%s.%d.mlp.up_proj.weight", sp, p, l);
        if (s == CQ_OK) s = cq_tt_bind_weight(&b, &L->down, "%s%s.%d.mlp.down_proj.weight", sp, p, l);
        const cq_tensor_view *v = NULL;
        if (s == CQ_OK) s = cq_tt_get(WHO, &table, cmf, &v, "%s%s.%d.layer_scalar", sp, p, l);
        if (s == CQ_OK) s = cq_tt_read_vector(WHO, v, &L->scalar, 1);
        if (s == CQ_OK && !isfinite(L->scalar))
            s = cq_fail(CQ_ERR_PARSE, WHO ": '%s%s.%d.layer_scalar' is not finite", sp, p, l);
    }
    cq_tt_list_free(&table);
    return s;
}

void cq_gemma4_free(cq_gemma4 *m) {
    if (!m) return;
    cq_tt_held_free(&m->held);
    cq_free(m->layers);
    cq_free(m);
}

cq_status cq_gemma4_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_gemma4 **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": file or backend is NULL");
    if (!prefix) prefix = "";
    if (strlen(prefix) > 200) return cq_fail(CQ_ERR_INVALID_ARG, WHO ": tensor prefix is too long");
    cq_gemma4 *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_gemma4_parse_config(cmf, prefix, &m->cfg);
    if (s == CQ_OK) s = bind_all(m, cmf, prefix);
    for (int k = 0; s == CQ_OK && k < 2; k++) g4_inv_freq(&m->cfg, k, m->inv_freq[k] = m->freq_store[k]);
    if (s != CQ_OK) {
        cq_gemma4_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

const cq_gemma4_config *cq_gemma4_get_config(const cq_gemma4 *m) { return &m->cfg; }
