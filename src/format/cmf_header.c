/*
 * cmf_header.c — the header JSON section: parse, schema check, and the
 * facts the rest of the container needs (arch name, quant type, chat
 * bundle, skills registry, section_hashes, shard coordinates).
 */
#include <string.h>

#include "format/cmf_impl.h"
#include "format/gen_defaults.h"
#include "format/jsonutil.h"

static const char *str_or_null(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

cq_status cq_cmf_parse_header(cq_cmf *c) {
    const cq_cmf_section *s = &c->sec[CQ_CMF_SEC_HEADER];
    CQ_TRY(cq_json_parse(c->base + s->off, (size_t)s->len, "header JSON", &c->header));
    CQ_TRY(cq_cmf_header_check(c->header));

    c->arch = cJSON_GetObjectItemCaseSensitive(c->header, "arch");
    c->arch_name = str_or_null(c->arch, "arch_name");
    c->quant_type = str_or_null(c->header, "quant_type");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->header, "tokenizer_config");
    c->tok_config = cJSON_IsObject(tc) ? tc : NULL;
    c->chat_template = c->tok_config ? str_or_null(c->tok_config, "chat_template") : NULL;

    const cJSON *sk = cJSON_GetObjectItemCaseSensitive(c->header, "skills");
    c->skills = cJSON_IsArray(sk) ? sk : NULL;
    c->n_skills = c->skills ? (size_t)cJSON_GetArraySize(c->skills) : 0;
    if (c->n_skills) {
        c->skill_ids = cq_mallocn(c->n_skills, sizeof *c->skill_ids);
        if (!c->skill_ids) return CQ_ERR_NOMEM;
        size_t i = 0;
        for (const cJSON *r = c->skills->child; r; r = r->next) c->skill_ids[i++] = str_or_null(r, "id");
    }

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(c->header, "section_hashes");
    if (cJSON_IsObject(sh)) {
        static const cq_cmf_section_id ids[] = {CQ_CMF_SEC_MASKS, CQ_CMF_SEC_VOCAB, CQ_CMF_SEC_INDEX};
        for (size_t i = 0; i < CQ_ARRAY_LEN(ids); i++) {
            const char *t = str_or_null(sh, cq_cmf_section_name(ids[i]));
            c->sec_hash_present[ids[i]] = t != NULL;
            c->sec_hash_text[ids[i]] = t;
        }
    }
    return CQ_OK;
}

uint64_t cq_cmf_arch_u64(const cq_cmf *c, const char *key, uint64_t dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->arch, key);
    if (!cJSON_IsNumber(v)) return dflt;
    return (uint64_t)v->valuedouble; /* the schema guaranteed a whole number in [0, 2^64) */
}

const cJSON *cq_cmf_header(const cq_cmf *c) { return c ? c->header : NULL; }
const cJSON *cq_cmf_arch(const cq_cmf *c) { return c ? c->arch : NULL; }
const cJSON *cq_cmf_tokenizer_config(const cq_cmf *c) { return c ? c->tok_config : NULL; }
size_t cq_cmf_skill_count(const cq_cmf *c) { return c ? c->n_skills : 0; }

const cJSON *cq_cmf_skill(const cq_cmf *c, size_t i) {
    if (!c || i >= c->n_skills) return NULL;
    return cJSON_GetArrayItem(c->skills, (int)i);
}

const char *cq_cmf_skill_id(const cq_cmf *c, size_t i) {
    if (!c || i >= c->n_skills) return NULL;
    return c->skill_ids[i];
}

bool cq_cmf_shard(const cq_cmf *c, uint64_t *no, uint64_t *count) {
    const cJSON *sh = c ? cJSON_GetObjectItemCaseSensitive(c->header, "shard") : NULL;
    if (!cJSON_IsObject(sh)) return false;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(sh, "no");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(sh, "count");
    if (no) *no = (uint64_t)n->valuedouble;
    if (count) *count = (uint64_t)k->valuedouble;
    return true;
}

const char *cq_cmf_chat_template(const cq_cmf *c) { return c ? c->chat_template : NULL; }

cq_status cq_cmf_gen_defaults(const cq_cmf *c, cq_gen_defaults *out) {
    if (!c) return cq_fail(CQ_ERR_INVALID_ARG, "generation defaults: no file");
    return cq_gen_defaults_from_json(cJSON_GetObjectItemCaseSensitive(c->header, CQ_GEN_DEFAULTS_KEY), out);
}
