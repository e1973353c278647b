/*
 * jinja_repr.c — how values print: Python's str() (what {{ }} and ~ output)
 * and repr() (what lists and dicts show of their items, Markup('...')
 * included), and markupsafe's escape() that |e and Markup arithmetic use.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

#ifdef CQ_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

/* ---- str() and repr() --------------------------------------------------------------- */
static bool py_isprintable(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7f) return false;
    if (cp < 0x7f) return true;
#ifdef CQ_HAVE_UTF8PROC
    if (cp > 0x10ffff) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    switch (c) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
#else
    return !(cp >= 0x80 && cp <= 0xa0);
#endif
}

static cq_status repr_str(cq_jrender *r, cq_jbuf *b, const cq_jstr *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL;
    bool has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    CQ_TRY(cq_jbuf_append(r, b, &q, 1));
    size_t i = 0;
    while (i < s->len) {
        size_t st = i;
        uint32_t cp = cq_utf8_next(s->s, s->len, &i);
        char esc[16];
        const char *e = NULL;
        if (cp == '\\') e = "\\\\";
        else if (cp == (uint32_t)q) e = q == '\'' ? "\\'" : "\\\"";
        else if (cp == '\n') e = "\\n";
        else if (cp == '\r') e = "\\r";
        else if (cp == '\t') e = "\\t";
        else if (!py_isprintable(cp)) {
            if (cp < 0x100) snprintf(esc, sizeof esc, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(esc, sizeof esc, "\\u%04x", cp);
            else snprintf(esc, sizeof esc, "\\U%08x", cp);
            e = esc;
        }
        if (e) CQ_TRY(cq_jbuf_puts(r, b, e));
        else CQ_TRY(cq_jbuf_append(r, b, s->s + st, i - st));
    }
    return cq_jbuf_append(r, b, &q, 1);
}

static cq_status repr_any(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line, int depth);

static cq_status str_any(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line, int depth) {
    char tmp[48];
    switch (v.kind) {
    case CQ_JV_UNDEF:
        if (v.unsafe) return cq_jv_undef_error(v, line);
        return CQ_OK;
    case CQ_JV_NONE: return cq_jbuf_puts(r, b, "None");
    case CQ_JV_BOOL: return cq_jbuf_puts(r, b, v.u.b ? "True" : "False");
    case CQ_JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return cq_jbuf_puts(r, b, tmp);
    case CQ_JV_FLOAT:
        cq_py_float_repr(v.u.f, tmp, sizeof tmp);
        return cq_jbuf_puts(r, b, tmp);
    case CQ_JV_STR: return cq_jbuf_append(r, b, v.u.s->s, v.u.s->len);
    default: return repr_any(r, b, v, line, depth);
    }
}

/* Namespaces being printed, to print a self-reference as Python does. */
typedef struct repr_stack {
    const cq_jdict *d[64];
    int n;
} repr_stack;
static _Thread_local repr_stack g_repr;

static cq_status repr_any(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line, int depth) {
    if (depth > 256) return cq_jinja_err(CQ_ERR_BOUNDS, line, "value nested too deeply to print");
    if (depth == 0) g_repr.n = 0;
    switch (v.kind) {
    case CQ_JV_UNDEF: return cq_jbuf_puts(r, b, "Undefined");
    case CQ_JV_STR:
        if (v.markup) {
            CQ_TRY(cq_jbuf_puts(r, b, "Markup("));
            CQ_TRY(repr_str(r, b, v.u.s));
            return cq_jbuf_puts(r, b, ")");
        }
        return repr_str(r, b, v.u.s);
    case CQ_JV_LIST: {
        const cq_jlist *l = v.u.list;
        if (l->gen)
            return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "printing a generator is not supported");
        CQ_TRY(cq_jbuf_puts(r, b, l->tuple ? "(" : "["));
        for (size_t i = 0; i < l->n; i++) {
            if (i) CQ_TRY(cq_jbuf_puts(r, b, ", "));
            CQ_TRY(repr_any(r, b, l->v[i], line, depth + 1));
        }
        if (l->tuple && l->n == 1) CQ_TRY(cq_jbuf_puts(r, b, ","));
        return cq_jbuf_puts(r, b, l->tuple ? ")" : "]");
    }
    case CQ_JV_DICT:
    case CQ_JV_NS: {
        const cq_jdict *d = v.u.dict;
        if (v.kind == CQ_JV_NS) {
            for (int k = 0; k < g_repr.n; k++)
                if (g_repr.d[k] == d) return cq_jbuf_puts(r, b, "<Namespace {...}>");
            if (g_repr.n == (int)CQ_ARRAY_LEN(g_repr.d))
                return cq_jinja_err(CQ_ERR_BOUNDS, line, "value nested too deeply to print");
            g_repr.d[g_repr.n++] = d;
            CQ_TRY(cq_jbuf_puts(r, b, "<Namespace "));
        }
        CQ_TRY(cq_jbuf_puts(r, b, "{"));
        for (size_t i = 0; i < d->n; i++) {
            if (i) CQ_TRY(cq_jbuf_puts(r, b, ", "));
            CQ_TRY(repr_any(r, b, d->k[i], line, depth + 1));
            CQ_TRY(cq_jbuf_puts(r, b, ": "));
            CQ_TRY(repr_any(r, b, d->v[i], line, depth + 1));
        }
        CQ_TRY(cq_jbuf_puts(r, b, "}"));
        if (v.kind == CQ_JV_NS) {
            g_repr.n--;
            CQ_TRY(cq_jbuf_puts(r, b, ">"));
        }
        return CQ_OK;
    }
    case CQ_JV_LOOP: {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v.u.loop->index0 + 1,
                 v.u.loop->items->n);
        return cq_jbuf_puts(r, b, tmp);
    }
    case CQ_JV_MACRO: {
        CQ_TRY(cq_jbuf_puts(r, b, "<Macro '"));
        const cq_jstr *n = v.u.macro->def->name;
        CQ_TRY(cq_jbuf_append(r, b, n->s, n->len));
        return cq_jbuf_puts(r, b, "'>");
    }
    case CQ_JV_FUNC:
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "printing a function or method is not supported");
    default: return str_any(r, b, v, line, depth);
    }
}

cq_status cq_jv_str_append(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line) {
    return str_any(r, b, v, line, 0);
}

cq_status cq_jv_repr_append(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line) {
    return repr_any(r, b, v, line, 0);
}

cq_status cq_jv_to_str(cq_jrender *r, cq_jv v, uint32_t line, const cq_jstr **out) {
    if (v.kind == CQ_JV_STR) {
        *out = v.u.s;
        return CQ_OK;
    }
    cq_jbuf b = {0};
    cq_status s = str_any(r, &b, v, line, 0);
    if (s == CQ_OK) s = cq_jbuf_to_str(r, &b, out);
    cq_jbuf_free(&b);
    return s;
}

cq_status cq_jinja_escape(cq_jrender *r, cq_jv v, bool force, uint32_t line, cq_jv *out) {
    if (v.kind == CQ_JV_STR && v.markup && !force) {
        *out = v;
        return CQ_OK;
    }
    const cq_jstr *s;
    CQ_TRY(cq_jv_to_str(r, v, line, &s));
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    size_t run = 0;
    for (size_t i = 0; i < s->len && st == CQ_OK; i++) {
        const char *e = NULL;
        switch (s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&#34;"; break;
        case '\'': e = "&#39;"; break;
        default: continue;
        }
        st = cq_jbuf_append(r, &b, s->s + run, i - run);
        if (st == CQ_OK) st = cq_jbuf_puts(r, &b, e);
        run = i + 1;
    }
    if (run == 0) {
        cq_jbuf_free(&b);
        *out = cq_jv_markup(s);
        return CQ_OK;
    }
    if (st == CQ_OK) st = cq_jbuf_append(r, &b, s->s + run, s->len - run);
    const cq_jstr *res = NULL;
    if (st == CQ_OK) st = cq_jbuf_to_str(r, &b, &res);
    cq_jbuf_free(&b);
    CQ_TRY(st);
    *out = cq_jv_markup(res);
    return CQ_OK;
}

