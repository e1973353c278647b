/*
 * config.c — the config reader every architecture uses (config.h).
 */
#include "models/kit/config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/jsonutil.h"

cq_status cq_cfg_open(const cq_cmf *cmf, const char *prefix, const char *who, cJSON **root) {
    *root = NULL;
    char name[512];
    int k = snprintf(name, sizeof name, "%sconfig_json", prefix ? prefix : "");
    if (k < 0 || (size_t)k >= sizeof name) return cq_fail(CQ_ERR_INVALID_ARG, "%s: tensor prefix is too long", who);
    const cq_tensor_view *v = cq_cmf_find(cmf, name);
    if (!v)
        return cq_fail(CQ_ERR_MISSING, "%s: '%s' is missing (convert the model folder with `cortiq convert`)", who,
                       name);
    if (v->dtype != CQ_DTYPE_U8) return cq_fail(CQ_ERR_DTYPE, "%s: '%s' is not a u8 tensor", who, name);
    CQ_TRY(cq_cmf_check_tensor(v));
    cJSON *j = NULL;
    CQ_TRY(cq_json_parse(v->data, (size_t)v->nbytes, name, &j));
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cq_fail(CQ_ERR_PARSE, "%s: '%s' is not a JSON object", who, name);
    }
    *root = j;
    return CQ_OK;
}

cq_status cq_cfg_read(const cq_cmf *cmf, const char *prefix, const char *who, cq_cfg_parser parse, void *out) {
    cJSON *j = NULL;
    CQ_TRY(cq_cfg_open(cmf, prefix ? prefix : "", who, &j));
    cq_status s = parse(j, out);
    cJSON_Delete(j);
    return s;
}

const cJSON *cq_cfg_get(const cq_cfg *c, const char *key) {
    const cJSON *it = c->o ? cJSON_GetObjectItemCaseSensitive(c->o, key) : NULL;
    return it && !cJSON_IsNull(it) ? it : NULL;
}

cq_status cq_cfg_int(const cq_cfg *c, const char *key, int def, int lo, int hi, int *out) {
    const cJSON *it = cq_cfg_get(c, key);
    if (!it) {
        if (def < lo || def > hi) return cq_fail(CQ_ERR_PARSE, "%s: config %s%s is missing", c->who, c->where, key);
        *out = def;
        return CQ_OK;
    }
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!(v >= lo && v <= hi) || v != floor(v))
        return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be an integer in [%d, %d]", c->who, c->where, key, lo, hi);
    *out = (int)v;
    return CQ_OK;
}

cq_status cq_cfg_num_item(const cq_cfg *c, const cJSON *it, const char *key, double lo, bool lo_open, double hi,
                          double *out) {
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
        return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be a number in %s%g, %g]", c->who, c->where, key,
                       lo_open ? "(" : "[", lo, hi);
    *out = v;
    return CQ_OK;
}

cq_status cq_cfg_num(const cq_cfg *c, const char *key, double def, double lo, bool lo_open, double hi, double *out) {
    const cJSON *it = cq_cfg_get(c, key);
    if (!it) {
        *out = def;
        return CQ_OK;
    }
    return cq_cfg_num_item(c, it, key, lo, lo_open, hi, out);
}

cq_status cq_cfg_class(const cq_cfg *c, const char *want, bool required) {
    const cJSON *cls = cq_cfg_get(c, "_class_name");
    if (!cJSON_IsString(cls)) {
        if (!required) return CQ_OK;
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: config names no _class_name (%s expected)", c->who, want);
    }
    if (strcmp(cls->valuestring, want) != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: config is for '%s', not %s", c->who, cls->valuestring, want);
    return CQ_OK;
}

cq_status cq_cfg_bool(const cq_cfg *c, const char *key, bool def, bool *out) {
    const cJSON *it = cq_cfg_get(c, key);
    if (!it) {
        *out = def;
        return CQ_OK;
    }
    if (!cJSON_IsBool(it)) return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be true or false", c->who, c->where, key);
    *out = cJSON_IsTrue(it);
    return CQ_OK;
}

cq_status cq_cfg_ints(const cq_cfg *c, const char *key, int min_n, int max_n, int lo, int hi, int *out, int *n) {
    *n = 0;
    const cJSON *a = cq_cfg_get(c, key);
    if (!a) return CQ_OK;
    int len = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (len < min_n || len > max_n) {
        if (min_n == max_n)
            return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be an array of %d integers", c->who, c->where, key,
                           min_n);
        return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be an array of %d .. %d integers", c->who, c->where, key,
                       min_n, max_n);
    }
    for (int i = 0; i < len; i++) {
        const cJSON *e = cJSON_GetArrayItem(a, i);
        double v = cJSON_IsNumber(e) ? e->valuedouble : NAN;
        if (!(v >= lo && v <= hi) || v != floor(v))
            return cq_fail(CQ_ERR_PARSE, "%s: config %s%s[%d] must be an integer in [%d, %d]", c->who, c->where, key, i,
                           lo, hi);
        out[i] = (int)v;
    }
    *n = len;
    return CQ_OK;
}

cq_status cq_cfg_floats(const cq_cfg *c, const char *key, int n, float *out) {
    const cJSON *a = cq_cfg_get(c, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        return cq_fail(CQ_ERR_PARSE, "%s: config %s%s must be an array of %d numbers", c->who, c->where, key, n);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
            return cq_fail(CQ_ERR_PARSE, "%s: config %s%s[%d] is not a finite number", c->who, c->where, key, i);
        out[i++] = (float)it->valuedouble; /* torch.tensor(list) rounds to f32 */
    }
    return CQ_OK;
}
