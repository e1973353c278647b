/*
 * tok_json.h — strict little readers over cJSON for tokenizer.json: each
 * takes the dotted path of the field for its error message ("tokenizer.json:
 * model.vocab['x']: expected an integer id") and fails with CQ_ERR_PARSE.
 */
#ifndef CQ_TOK_JSON_H
#define CQ_TOK_JSON_H

#include <cjson/cJSON.h>

#include "tokenizer/tokenizer-impl.h"

#define TOK_PATH 192 /* room for a field path in messages */

/* The member `key` of obj, or NULL when absent or JSON null. */
static inline const cJSON *tok_jget(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return (it && !cJSON_IsNull(it)) ? it : NULL;
}

static inline cq_status tok_jbool(const cJSON *obj, const char *key, const char *where, bool def,
                                  bool *out) {
    const cJSON *it = tok_jget(obj, key);
    if (!it) {
        *out = def;
        return CQ_OK;
    }
    if (!cJSON_IsBool(it))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.%s: expected true or false", where, key);
    *out = cJSON_IsTrue(it);
    return CQ_OK;
}

/* String member; *out = NULL when absent/null and !required. */
static inline cq_status tok_jstr(const cJSON *obj, const char *key, const char *where, bool required,
                                 const char **out) {
    const cJSON *it = tok_jget(obj, key);
    *out = NULL;
    if (!it) {
        if (required)
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.%s: missing (a string is required)",
                           where, key);
        return CQ_OK;
    }
    if (!cJSON_IsString(it) || !it->valuestring)
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.%s: expected a string", where, key);
    *out = it->valuestring;
    return CQ_OK;
}

/* An integer in [0, limit). */
static inline cq_status tok_jint(const cJSON *it, const char *where, double limit, int64_t *out) {
    if (!it || !cJSON_IsNumber(it))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected an integer", where);
    double v = it->valuedouble;
    if (!(v >= 0) || v >= limit || v != (double)(int64_t)v)
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: %g is not an integer in [0, %.0f)", where,
                       v, limit);
    *out = (int64_t)v;
    return CQ_OK;
}

/* The component's "type" string. */
static inline cq_status tok_jtype(const cJSON *obj, const char *where, const char **out) {
    if (!cJSON_IsObject(obj))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected an object or null", where);
    return tok_jstr(obj, "type", where, true, out);
}

#endif /* CQ_TOK_JSON_H */
