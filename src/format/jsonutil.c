/*
 * jsonutil.c — strict UTF-8 validation and the cJSON front end used for
 * every JSON document read from a model file (see jsonutil.h).
 */
#include <pthread.h>
#include <string.h>

#include "format/jsonutil.h"

bool cq_utf8_valid(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) {
            need = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            need = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            need = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (len - i <= need) return false;
        for (size_t k = 1; k <= need; k++) {
            uint8_t t = s[i + k];
            if ((t & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (t & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += need + 1;
    }
    return true;
}

/* Set when an allocation made on behalf of cJSON failed on this thread, so
 * a NULL from cJSON_Parse can be reported as CQ_ERR_NOMEM, not as bad JSON. */
static _Thread_local bool t_json_oom;

static void *json_malloc(size_t n) {
    void *p = cq_malloc(n);
    if (!p) t_json_oom = true;
    return p;
}

static void json_free(void *p) { cq_free(p); }

static pthread_once_t g_json_once = PTHREAD_ONCE_INIT;

static void json_install_hooks(void) {
    cJSON_Hooks h = {json_malloc, json_free};
    cJSON_InitHooks(&h);
}

void cq_json_init(void) { pthread_once(&g_json_once, json_install_hooks); }

static bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

cq_status cq_json_parse(const void *text, size_t len, const char *what, cJSON **out) {
    *out = NULL;
    cq_json_init();
    const char *s = text;
    if (!cq_utf8_valid(text, len)) return cq_fail(CQ_ERR_PARSE, "%s: not valid UTF-8", what);
    if (memchr(s, '\0', len))
        return cq_fail(CQ_ERR_PARSE, "%s: contains a NUL byte at offset %zu", what,
                       (size_t)((const char *)memchr(s, '\0', len) - s));
    const char *end = NULL;
    t_json_oom = false;
    cJSON *root = cJSON_ParseWithLengthOpts(s, len, &end, false);
    if (!root) {
        if (t_json_oom) return cq_fail(CQ_ERR_NOMEM, "%s: out of memory while parsing", what);
        /* cJSON reports the failure position through `end` (its global
         * error pointer is not thread-safe, so it is not used). */
        size_t at = (end && end >= s && end <= s + len) ? (size_t)(end - s) : 0;
        return cq_fail(CQ_ERR_PARSE, "%s: malformed JSON near byte %zu of %zu", what, at, len);
    }
    size_t pos = (end && end >= s && end <= s + len) ? (size_t)(end - s) : len;
    while (pos < len && is_json_space(s[pos])) pos++;
    if (pos != len) {
        cJSON_Delete(root);
        return cq_fail(CQ_ERR_PARSE, "%s: trailing characters after the JSON value at byte %zu", what, pos);
    }
    *out = root;
    return CQ_OK;
}

cq_status cq_json_print(const cJSON *item, char **out, size_t *len) {
    cq_json_init();
    t_json_oom = false;
    char *s = cJSON_PrintUnformatted(item);
    if (!s) {
        *out = NULL;
        return t_json_oom ? cq_fail(CQ_ERR_NOMEM, "out of memory serializing JSON")
                          : cq_fail(CQ_ERR_INTERNAL, "cannot serialize JSON");
    }
    *out = s;
    if (len) *len = strlen(s);
    return CQ_OK;
}
