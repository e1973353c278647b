/*
 * qwen3_load.c — loading the Qwen3 decoder from a CMF file: the config
 * (`<prefix>config_json`, a Qwen3 or Qwen3-VL config.json as converted) and
 * the weight binding (zero-copy on the CPU; norm weights converted once to
 * F32 backend tensors).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/jsonutil.h"
#include "models/kit/config.h"
#include "models/qwen3_impl.h"
#include "models/tables.h"

/* ------------------------------------------------------------------------ */
/* Config                                                                   */
/* ------------------------------------------------------------------------ */
/* buf = a + b; false (and an empty buf) when it does not fit. Names are
 * bounded by the load's prefix check, so this never fails in practice. */
static bool cat2(char *buf, size_t cap, const char *a, const char *b) {
    int n = snprintf(buf, cap, "%s%s", a, b);
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = 0;
        return false;
    }
    return true;
}

static const cJSON *jget(const cJSON *o, const char *key) {
    const cJSON *it = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return (it && !cJSON_IsNull(it)) ? it : NULL;
}

/* The models' config convention (models/kit/config.h): absent or null takes
 * the default (a default outside the range: required), anything else must be
 * in range. `where` is the object's path in messages. */
static cq_status cfg_int(const cJSON *o, const char *where, const char *key, int def, int lo, int hi, int *out) {
    const cq_cfg g = {o, "qwen3", where};
    return cq_cfg_int(&g, key, def, lo, hi, out);
}

static cq_status cfg_num(const cJSON *it, const char *what, double lo, double hi, double *out) {
    const cq_cfg g = {NULL, "qwen3", ""};
    return cq_cfg_num_item(&g, it, what, lo, true, hi, out);
}

static cq_status cfg_bool(const cJSON *o, const char *key, bool def, bool *out) {
    const cq_cfg g = {o, "qwen3", ""};
    return cq_cfg_bool(&g, key, def, out);
}

/* RoPE: transformers 5 keeps everything in rope_parameters; 4.x has
 * rope_theta next to rope_scaling (Qwen3-VL: {mrope_section,
 * mrope_interleaved, rope_type}). Only unscaled RoPE is implemented. */
static cq_status parse_rope(const cJSON *root, const cJSON *tc, cq_qwen3_config *c) {
    const cJSON *rp = jget(tc, "rope_parameters"), *rs = jget(tc, "rope_scaling");
    if (rp && !cJSON_IsObject(rp)) return cq_fail(CQ_ERR_PARSE, "qwen3: config rope_parameters must be an object");
    if (rs && !cJSON_IsObject(rs)) return cq_fail(CQ_ERR_PARSE, "qwen3: config rope_scaling must be an object or null");
    const cJSON *theta = jget(rp, "rope_theta");
    if (!theta) theta = jget(tc, "rope_theta");
    if (!theta) theta = jget(root, "rope_theta");
    c->rope_theta = 10000.0; /* transformers' default for Qwen3 configs without one */
    if (theta) CQ_TRY(cfg_num(theta, "rope_theta", 1.0, 1e12, &c->rope_theta));
    const cJSON *type = jget(rp, "rope_type");
    if (!type) type = jget(rs, "rope_type");
    if (!type) type = jget(rs, "type");
    if (type) {
        if (!cJSON_IsString(type)) return cq_fail(CQ_ERR_PARSE, "qwen3: config rope_type must be a string");
        if (strcmp(type->valuestring, "default") != 0 && strcmp(type->valuestring, "mrope") != 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: rope_type '%s' is not supported (only unscaled RoPE: 'default')",
                           type->valuestring);
    }
    const cJSON *sec = jget(rp, "mrope_section");
    if (!sec) sec = jget(rs, "mrope_section");
    if (sec) {
        if (!cJSON_IsArray(sec) || cJSON_GetArraySize(sec) != 3)
            return cq_fail(CQ_ERR_PARSE, "qwen3: config mrope_section must be an array of 3 integers");
        int sum = 0;
        for (int i = 0; i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(sec, i);
            double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
            if (!(v >= 0 && v <= 4096) || v != floor(v))
                return cq_fail(CQ_ERR_PARSE, "qwen3: config mrope_section[%d] must be a non-negative integer", i);
            c->mrope_section[i] = (int)v;
            sum += (int)v;
        }
        /* the sections split the head_dim/2 frequencies between t, h, w */
        if (sum != c->head_dim / 2)
            return cq_fail(CQ_ERR_PARSE, "qwen3: config mrope_section sums to %d, head_dim/2 is %d", sum, c->head_dim / 2);
    }
    const cJSON *il = jget(rp, "mrope_interleaved");
    if (!il) il = jget(rs, "mrope_interleaved");
    c->mrope_interleaved = il && cJSON_IsTrue(il);
    return CQ_OK;
}

static cq_status parse_json(const cJSON *root, void *out) {
    cq_qwen3_config *c = out;
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "qwen3: config is not a JSON object");
    const cJSON *tc = jget(root, "text_config");
    const char *where = "";
    if (tc) {
        if (!cJSON_IsObject(tc)) return cq_fail(CQ_ERR_PARSE, "qwen3: config text_config must be an object");
        c->vl = true;
        where = "text_config.";
    } else {
        tc = root;
    }
    /* the family, from the tower's model_type (else the top level's): Qwen3 unless it names Qwen2 */
    const cJSON *mt = jget(tc, "model_type");
    if (!mt) mt = jget(root, "model_type");
    if (mt) {
        static const struct {
            const char *name;
            bool qwen2, vl;
        } k_types[] = {{"qwen3", false, false},         {"qwen3_vl_text", false, true}, {"qwen3_vl", false, true},
                       {"qwen2", true, false},          {"qwen2_5_vl_text", true, true}, {"qwen2_5_vl", true, true},
                       {"qwen2_vl_text", true, true},   {"qwen2_vl", true, true}};
        size_t i = 0;
        while (cJSON_IsString(mt) && i < CQ_ARRAY_LEN(k_types) && strcmp(mt->valuestring, k_types[i].name) != 0) i++;
        if (!cJSON_IsString(mt) || i == CQ_ARRAY_LEN(k_types))
            return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: model_type '%s' is not a Qwen3, Qwen3-VL, Qwen2 or Qwen2.5-VL "
                           "decoder", cJSON_IsString(mt) ? mt->valuestring : "?");
        c->family = k_types[i].qwen2 ? CQ_QWEN_FAMILY_2 : CQ_QWEN_FAMILY_3;
        c->vl |= k_types[i].vl; /* a flat Qwen2.5-VL config keeps the tower's keys at the top level */
    }
    CQ_TRY(cfg_int(tc, where, "vocab_size", -1, 1, 1 << 24, &c->vocab_size));
    CQ_TRY(cfg_int(tc, where, "hidden_size", -1, 1, 1 << 16, &c->hidden));
    CQ_TRY(cfg_int(tc, where, "intermediate_size", -1, 1, 1 << 20, &c->intermediate));
    CQ_TRY(cfg_int(tc, where, "num_hidden_layers", -1, 1, 1024, &c->n_layers));
    CQ_TRY(cfg_int(tc, where, "num_attention_heads", -1, 1, 1024, &c->n_heads));
    CQ_TRY(cfg_int(tc, where, "num_key_value_heads", c->n_heads, 1, 1024, &c->n_kv_heads));
    int hd_def = c->hidden % c->n_heads == 0 ? c->hidden / c->n_heads : -1;
    CQ_TRY(cfg_int(tc, where, "head_dim", hd_def, 2, 512, &c->head_dim));
    CQ_TRY(cfg_int(tc, where, "max_position_embeddings", 0, 0, 1 << 30, &c->max_positions));
    if (c->head_dim % 2) return cq_fail(CQ_ERR_PARSE, "qwen3: head_dim %d must be even (RoPE rotates pairs)", c->head_dim);
    if (c->n_heads % c->n_kv_heads)
        return cq_fail(CQ_ERR_PARSE, "qwen3: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                       c->n_heads, c->n_kv_heads);
    if ((int64_t)c->n_heads * c->head_dim > (1 << 20))
        return cq_fail(CQ_ERR_PARSE, "qwen3: num_attention_heads x head_dim is too large");
    const cJSON *eps = jget(tc, "rms_norm_eps");
    double e = 1e-6;
    if (eps) CQ_TRY(cfg_num(eps, "rms_norm_eps", 0.0, 1.0, &e));
    c->eps = (float)e;
    /* Qwen3-VL ties at the top level; a plain Qwen3 config has it in the same object. */
    const cJSON *tie = jget(root, "tie_word_embeddings");
    CQ_TRY(cfg_bool(tie ? root : tc, "tie_word_embeddings", false, &c->tie_embeddings));
    const cJSON *act = jget(tc, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: hidden_act '%s' is not supported (silu)",
                       cJSON_IsString(act) ? act->valuestring : "?");
    bool bias = false, sliding = false;
    CQ_TRY(cfg_bool(tc, "attention_bias", false, &bias));
    if (bias && !cq_qwen3_has_qkv_bias(c))
        return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: attention_bias is not supported (Qwen3 has no biases)");
    CQ_TRY(cfg_bool(tc, "use_sliding_window", false, &sliding));
    if (sliding) return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: sliding-window attention is not supported");
    const cJSON *lt = jget(tc, "layer_types");
    for (int i = 0; lt && i < cJSON_GetArraySize(lt); i++) {
        const cJSON *t = cJSON_GetArrayItem(lt, i);
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention") != 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "qwen3: layer_types[%d] is not 'full_attention'", i);
    }
    return parse_rope(root, tc, c);
}

cq_status cq_qwen3_parse_config(const cq_cmf *cmf, const char *prefix, cq_qwen3_config *cfg) {
    return cq_cfg_read(cmf, prefix, "qwen3", parse_json, cfg);
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */
/* ------------------------------------------------------------------------ */
/* Binding from the tensor table (models/tables.h): each tensor checked
 * against the shape the config implies and the codec policy. */
typedef struct qwen3_binder {
    cq_qwen3 *m;
    const cq_cmf *cmf;
    cq_tt_list table;
} qwen3_binder;

static cq_status bind2(qwen3_binder *b, const char *pre, const char *name, cq_tensor *out) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get("qwen3", &b->table, b->cmf, &v, "%s%s", pre, name));
    return cq_tensor_bind_weight(b->m->be, v, out);
}

static cq_status keep(cq_qwen3 *m, cq_tensor *t) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        cq_tensor *o = cq_reallocn(m->owned, (size_t)cap, sizeof *o);
        if (!o) return CQ_ERR_NOMEM;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = *t;
    return CQ_OK;
}

/* A norm weight as an F32 backend tensor (dequantized once). */
static cq_status bind_vec(qwen3_binder *b, const char *pre, const char *name, cq_tensor *out) {
    cq_qwen3 *m = b->m;
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get("qwen3", &b->table, b->cmf, &v, "%s%s", pre, name));
    int64_t n = (int64_t)v->nelem;
    float *tmp = cq_mallocn((size_t)n, sizeof(float));
    if (!tmp) return CQ_ERR_NOMEM;
    int64_t shape[1] = {n};
    cq_status s = cq_cmf_dequantize(v, tmp, (size_t)n);
    if (s == CQ_OK) s = cq_tensor_alloc(m->be, CQ_DTYPE_F32, 1, shape, out);
    if (s == CQ_OK) s = cq_tensor_upload(out, tmp, (size_t)n * sizeof(float));
    cq_free(tmp);
    if (s == CQ_OK) s = keep(m, out);
    if (s != CQ_OK) {
        cq_tensor_free(out);
        return cq_fail_prefix(s, "qwen3: tensor '%s%s': ", pre, name);
    }
    return CQ_OK;
}

const char *cq_qwen3_stack_prefix(const cq_cmf *cmf, const char *prefix) {
    static const char *const cand[] = {"model.language_model.", "model.", "language_model.", ""};
    for (size_t i = 0; i < CQ_ARRAY_LEN(cand); i++) {
        char name[768];
        snprintf(name, sizeof name, "%s%sembed_tokens.weight", prefix, cand[i]);
        if (cq_cmf_find(cmf, name)) return cand[i];
    }
    return NULL;
}

static cq_status bind_layer(qwen3_binder *b, const char *sp, int l) {
    qwen3_layer *L = &b->m->layers[l];
    char pre[600];
    snprintf(pre, sizeof pre, "%slayers.%d.", sp, l);
    CQ_TRY(bind2(b, pre, "self_attn.q_proj.weight", &L->q));
    CQ_TRY(bind2(b, pre, "self_attn.k_proj.weight", &L->k));
    CQ_TRY(bind2(b, pre, "self_attn.v_proj.weight", &L->v));
    CQ_TRY(bind2(b, pre, "self_attn.o_proj.weight", &L->o));
    CQ_TRY(bind2(b, pre, "mlp.gate_proj.weight", &L->gate));
    CQ_TRY(bind2(b, pre, "mlp.up_proj.weight", &L->up));
    CQ_TRY(bind2(b, pre, "mlp.down_proj.weight", &L->down));
    if (cq_qwen3_has_qk_norm(&b->m->cfg)) {
        CQ_TRY(bind_vec(b, pre, "self_attn.q_norm.weight", &L->q_norm));
        CQ_TRY(bind_vec(b, pre, "self_attn.k_norm.weight", &L->k_norm));
    }
    if (cq_qwen3_has_qkv_bias(&b->m->cfg)) {
        CQ_TRY(bind_vec(b, pre, "self_attn.q_proj.bias", &L->q_bias));
        CQ_TRY(bind_vec(b, pre, "self_attn.k_proj.bias", &L->k_bias));
        CQ_TRY(bind_vec(b, pre, "self_attn.v_proj.bias", &L->v_bias));
    }
    CQ_TRY(bind_vec(b, pre, "input_layernorm.weight", &L->in_norm));
    CQ_TRY(bind_vec(b, pre, "post_attention_layernorm.weight", &L->post_norm));
    return CQ_OK;
}

static cq_status bind_stack(qwen3_binder *b, const char *prefix, const char *stack) {
    cq_qwen3 *m = b->m;
    cq_qwen3_config *c = &m->cfg;
    char sp[512];
    snprintf(sp, sizeof sp, "%s%s", prefix, stack);
    CQ_TRY(bind2(b, sp, "embed_tokens.weight", &m->embed));
    m->layers = cq_calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return CQ_ERR_NOMEM;
    for (int l = 0; l < m->n_loaded; l++) CQ_TRY(bind_layer(b, sp, l));
    if (m->n_loaded < c->n_layers) return CQ_OK; /* a text encoder: no final norm, no head */
    CQ_TRY(bind_vec(b, sp, "norm.weight", &m->norm));
    m->has_norm = true;
    char head[512];
    if (cat2(head, sizeof head, prefix, "lm_head.weight") && cq_cmf_find(b->cmf, head)) {
        CQ_TRY(bind2(b, prefix, "lm_head.weight", &m->lm_head));
        c->has_lm_head = true;
    } else if (c->tie_embeddings) {
        m->lm_head = m->embed; /* shared binding: released once, with embed */
        c->has_lm_head = true;
    }
    return CQ_OK;
}

static cq_status bind_all(cq_qwen3 *m, const cq_cmf *cmf, const char *prefix) {
    const char *stack = cq_qwen3_stack_prefix(cmf, prefix);
    if (!stack)
        return cq_fail(CQ_ERR_MISSING, "qwen3: no '%smodel.embed_tokens.weight' (nor '%smodel.language_model.embed_tokens."
                       "weight') in the file", prefix, prefix);
    qwen3_binder b = {m, cmf, {0}};
    cq_status s = cq_qwen3_tensors_upto(&m->cfg, prefix, stack, m->n_loaded, &b.table);
    if (s == CQ_OK) s = bind_stack(&b, prefix, stack);
    cq_tt_list_free(&b.table);
    return s;
}

static void free_weight(cq_tensor *t) {
    if (t->flags & CQ_TENSOR_WEIGHT) cq_tensor_free(t);
}

void cq_qwen3_free(cq_qwen3 *m) {
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) cq_tensor_free(&m->owned[i]);
    cq_free(m->owned);
    if (m->layers)
        for (int l = 0; l < m->cfg.n_layers; l++) {
            qwen3_layer *L = &m->layers[l];
            cq_tensor *w[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
            for (size_t i = 0; i < CQ_ARRAY_LEN(w); i++) free_weight(w[i]);
        }
    cq_free(m->layers);
    if (m->lm_head.base != m->embed.base || m->lm_head.offset != m->embed.offset) free_weight(&m->lm_head);
    free_weight(&m->embed);
    cq_free(m->inv_freq);
    cq_free(m->rope_axis);
    cq_free(m);
}

static cq_status load(const cq_cmf *cmf, const char *prefix, cq_backend *be, int layers, cq_qwen3 **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: out is NULL");
    *out = NULL;
    if (!cmf || !be) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: file or backend is NULL");
    if (!prefix) prefix = "";
    if (strlen(prefix) > 200) return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: tensor prefix is too long");
    cq_qwen3 *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->be = be;
    cq_status s = cq_qwen3_parse_config(cmf, prefix, &m->cfg);
    if (s == CQ_OK && layers > m->cfg.n_layers)
        s = cq_fail(CQ_ERR_INVALID_ARG, "qwen3: a text encoder reading layer %d of a %d-layer tower", layers,
                    m->cfg.n_layers);
    if (s == CQ_OK) m->n_loaded = layers > 0 ? layers : m->cfg.n_layers;
    if (s == CQ_OK) s = bind_all(m, cmf, prefix);
    if (s == CQ_OK) {
        int half = m->cfg.head_dim / 2;
        m->inv_freq = cq_mallocn((size_t)half, sizeof(float));
        m->rope_axis = cq_mallocn((size_t)half, sizeof(uint8_t));
        if (!m->inv_freq || !m->rope_axis) s = CQ_ERR_NOMEM;
        if (s == CQ_OK) q3_rope_axes(&m->cfg, m->rope_axis);
        /* 1 / theta^(2i / head_dim), formed in f32 as transformers does
         * (Qwen3-VL uses the same frequencies on every mrope axis). */
        for (int i = 0; s == CQ_OK && i < half; i++) {
            float e = (float)(2 * i) / (float)m->cfg.head_dim;
            m->inv_freq[i] = 1.0f / powf((float)m->cfg.rope_theta, e);
        }
    }
    if (s != CQ_OK) {
        cq_qwen3_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

cq_status cq_qwen3_load(const cq_cmf *cmf, const char *prefix, cq_backend *be, cq_qwen3 **out) {
    return load(cmf, prefix, be, 0, out);
}

cq_status cq_qwen3_load_encoder(const cq_cmf *cmf, const char *prefix, cq_backend *be, int layers, cq_qwen3 **out) {
    if (layers < 1) {
        if (out) *out = NULL;
        return cq_fail(CQ_ERR_INVALID_ARG, "qwen3: a text encoder needs at least one layer (got %d)", layers);
    }
    return load(cmf, prefix, be, layers, out);
}

int cq_qwen3_layers_loaded(const cq_qwen3 *m) { return m ? m->n_loaded : 0; }

const cq_qwen3_config *cq_qwen3_get_config(const cq_qwen3 *m) { return &m->cfg; }
cq_backend *cq_qwen3_backend(const cq_qwen3 *m) { return m->be; }
