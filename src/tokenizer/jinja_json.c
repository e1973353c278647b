/*
 * jinja_json.c — Python's json.dumps for template values, as transformers'
 * tojson filter calls it (ensure_ascii, indent, separators, sort_keys), and
 * Python's repr() of floats, which both json.dumps and str() print.
 *
 * Float repr is the shortest decimal string that reads back to the same
 * double (what CPython prints), laid out with CPython's rule: exponent form
 * when the decimal point position is below -3 or above 16.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

void cq_py_float_repr(double f, char *buf, size_t cap) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    if (f == 0.0) {
        snprintf(buf, cap, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]XX */
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    char digits[24];
    int nd = 0;
    while (*p && *p != 'e') {
        if (*p >= '0' && *p <= '9' && nd < 20) digits[nd++] = *p;
        p++;
    }
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt <= -4 || decpt > 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        int e = decpt - 1;
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++) out[o++] = '0';
        for (int i = 0; i < nd; i++) out[o++] = digits[i];
    } else if (decpt >= nd) {
        for (int i = 0; i < nd; i++) out[o++] = digits[i];
        for (int i = nd; i < decpt; i++) out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    } else {
        for (int i = 0; i < decpt; i++) out[o++] = digits[i];
        out[o++] = '.';
        for (int i = decpt; i < nd; i++) out[o++] = digits[i];
    }
    out[o] = 0;
    snprintf(buf, cap, "%s", out);
}

static cq_status put_u(cq_jrender *r, cq_jbuf *b, uint32_t u) {
    char e[8];
    snprintf(e, sizeof e, "\\u%04x", u & 0xffff);
    return cq_jbuf_append(r, b, e, 6);
}

static cq_status json_str(cq_jrender *r, cq_jbuf *b, const char *s, size_t n,
                          const cq_json_opts *o) {
    CQ_TRY(cq_jbuf_append(r, b, "\"", 1));
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        /* Copy the longest run needing no escape in one append. */
        while (i < n) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == '"' || c == '\\') break;
            if (c >= 0x80 && o->ensure_ascii) break;
            if (o->html_safe && (c == '<' || c == '>' || c == '&' || c == '\'')) break;
            i++;
        }
        if (i > run) CQ_TRY(cq_jbuf_append(r, b, s + run, i - run));
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default: break;
        }
        if (e) {
            CQ_TRY(cq_jbuf_append(r, b, e, 2));
            i++;
        } else if (c < 0x80) {
            CQ_TRY(put_u(r, b, c));
            i++;
        } else {
            uint32_t cp = cq_utf8_next(s, n, &i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                CQ_TRY(put_u(r, b, 0xd800 + (cp >> 10)));
                CQ_TRY(put_u(r, b, 0xdc00 + (cp & 0x3ff)));
            } else {
                CQ_TRY(put_u(r, b, cp));
            }
        }
    }
    return cq_jbuf_append(r, b, "\"", 1);
}

static cq_status newline_indent(cq_jrender *r, cq_jbuf *b, const cq_json_opts *o, int level) {
    CQ_TRY(cq_jbuf_append(r, b, "\n", 1));
    for (int l = 0; l < level; l++) {
        if (o->indent_str) CQ_TRY(cq_jbuf_append(r, b, o->indent_str->s, o->indent_str->len));
        else
            for (int k = 0; k < o->indent; k++) CQ_TRY(cq_jbuf_append(r, b, " ", 1));
    }
    return CQ_OK;
}

static bool has_indent(const cq_json_opts *o) { return o->indent_str || o->indent >= 0; }

static cq_status item_sep(cq_jrender *r, cq_jbuf *b, const cq_json_opts *o) {
    if (o->item_sep) return cq_jbuf_append(r, b, o->item_sep->s, o->item_sep->len);
    return has_indent(o) ? cq_jbuf_append(r, b, ",", 1) : cq_jbuf_append(r, b, ", ", 2);
}

static cq_status json_key(cq_jrender *r, cq_jbuf *b, cq_jv k, const cq_json_opts *o,
                          uint32_t line) {
    char tmp[48];
    switch (k.kind) {
    case CQ_JV_STR: return json_str(r, b, k.u.s->s, k.u.s->len, o);
    case CQ_JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); break;
    case CQ_JV_BOOL: snprintf(tmp, sizeof tmp, "\"%s\"", k.u.b ? "true" : "false"); break;
    case CQ_JV_NONE: snprintf(tmp, sizeof tmp, "\"null\""); break;
    case CQ_JV_FLOAT: {
        char f[40];
        if (isnan(k.u.f)) snprintf(f, sizeof f, "NaN");
        else if (isinf(k.u.f)) snprintf(f, sizeof f, k.u.f < 0 ? "-Infinity" : "Infinity");
        else cq_py_float_repr(k.u.f, f, sizeof f);
        snprintf(tmp, sizeof tmp, "\"%s\"", f);
        break;
    }
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                            "keys must be str, int, float, bool or None, not %s",
                            cq_jv_type_name(k));
    }
    return cq_jbuf_puts(r, b, tmp);
}

static cq_status json_any(cq_jrender *r, cq_jbuf *b, cq_jv v, const cq_json_opts *o,
                          uint32_t line, int level) {
    char tmp[48];
    if (level > 256) return cq_jinja_err(CQ_ERR_BOUNDS, line, "value nested too deeply for tojson");
    switch (v.kind) {
    case CQ_JV_NONE: return cq_jbuf_puts(r, b, "null");
    case CQ_JV_BOOL: return cq_jbuf_puts(r, b, v.u.b ? "true" : "false");
    case CQ_JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return cq_jbuf_puts(r, b, tmp);
    case CQ_JV_FLOAT:
        if (isnan(v.u.f)) return cq_jbuf_puts(r, b, "NaN");
        if (isinf(v.u.f)) return cq_jbuf_puts(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        cq_py_float_repr(v.u.f, tmp, sizeof tmp);
        return cq_jbuf_puts(r, b, tmp);
    case CQ_JV_STR: return json_str(r, b, v.u.s->s, v.u.s->len, o);
    case CQ_JV_LIST: {
        const cq_jlist *l = v.u.list;
        if (l->gen)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Object of type generator is not JSON serializable");
        if (l->n == 0) return cq_jbuf_puts(r, b, "[]");
        CQ_TRY(cq_jbuf_puts(r, b, "["));
        for (size_t i = 0; i < l->n; i++) {
            if (i) CQ_TRY(item_sep(r, b, o));
            if (has_indent(o)) CQ_TRY(newline_indent(r, b, o, level + 1));
            CQ_TRY(json_any(r, b, l->v[i], o, line, level + 1));
        }
        if (has_indent(o)) CQ_TRY(newline_indent(r, b, o, level));
        return cq_jbuf_puts(r, b, "]");
    }
    case CQ_JV_DICT: {
        const cq_jdict *d = v.u.dict;
        if (d->n == 0) return cq_jbuf_puts(r, b, "{}");
        size_t *order = cq_jarena_alloc(&r->arena, d->n * sizeof(size_t));
        if (!order) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) {
            /* Insertion sort by Python ordering of the keys (stable; dicts in
             * templates are small). */
            for (size_t i = 1; i < d->n; i++) {
                size_t x = order[i], j = i;
                while (j > 0) {
                    int c;
                    CQ_TRY(cq_jv_compare(d->k[x], d->k[order[j - 1]], line, &c));
                    if (c >= 0) break;
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        CQ_TRY(cq_jbuf_puts(r, b, "{"));
        for (size_t i = 0; i < d->n; i++) {
            if (i) CQ_TRY(item_sep(r, b, o));
            if (has_indent(o)) CQ_TRY(newline_indent(r, b, o, level + 1));
            CQ_TRY(json_key(r, b, d->k[order[i]], o, line));
            if (o->key_sep) CQ_TRY(cq_jbuf_append(r, b, o->key_sep->s, o->key_sep->len));
            else CQ_TRY(cq_jbuf_puts(r, b, ": "));
            CQ_TRY(json_any(r, b, d->v[order[i]], o, line, level + 1));
        }
        if (has_indent(o)) CQ_TRY(newline_indent(r, b, o, level));
        return cq_jbuf_puts(r, b, "}");
    }
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Object of type %s is not JSON serializable",
                            cq_jv_type_name(v));
    }
}

cq_status cq_jv_json_append(cq_jrender *r, cq_jbuf *b, cq_jv v, const cq_json_opts *o,
                            uint32_t line) {
    return json_any(r, b, v, o, line, 0);
}
