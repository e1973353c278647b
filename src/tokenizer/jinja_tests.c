/*
 * jinja_tests.c — jinja2's tests (x is defined, none, string, mapping,
 * iterable, sequence, number, odd/even, divisibleby, equalto, in, lower,
 * ...) with Python semantics (bool is a number, Undefined is iterable).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

/* ---- tests ------------------------------------------------------------------------------ */
static const char *const g_tests[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq",
    "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
    "ge", ">=", "odd", "even", "divisibleby", "lower", "upper", "filter", "test", NULL};

bool cq_jinja_has_test(const char *name, size_t n) {
    for (const char *const *t = g_tests; *t; t++)
        if (strlen(*t) == n && memcmp(*t, name, n) == 0) return true;
    return false;
}

static bool str_is_case(const cq_jstr *s, bool lower) {
    bool cased = false;
    size_t i = 0;
    while (i < s->len) {
        uint32_t cp = cq_utf8_next(s->s, s->len, &i);
        uint32_t up = cq_py_upper(cp), lo = cq_py_lower(cp);
        if (up == lo) continue; /* uncased */
        if (lower ? cp != lo : cp != up) return false;
        cased = true;
    }
    return cased;
}

cq_status cq_jinja_test(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *a,
                        uint32_t line, bool *out) {
    const char *n = name->s;
#define IS(x) (strcmp(n, x) == 0)
    cq_jv other = cq_jv_undef(NULL);
    bool has_other = a->npos > 0;
    if (has_other) other = a->pos[0];
    if (IS("defined")) *out = v.kind != CQ_JV_UNDEF;
    else if (IS("undefined")) *out = v.kind == CQ_JV_UNDEF;
    else if (IS("none")) *out = v.kind == CQ_JV_NONE;
    else if (IS("boolean")) *out = v.kind == CQ_JV_BOOL;
    else if (IS("false")) *out = v.kind == CQ_JV_BOOL && !v.u.b;
    else if (IS("true")) *out = v.kind == CQ_JV_BOOL && v.u.b;
    else if (IS("integer")) *out = v.kind == CQ_JV_INT;
    else if (IS("float")) *out = v.kind == CQ_JV_FLOAT;
    else if (IS("number")) *out = cq_jv_is_num(v);
    else if (IS("string")) *out = v.kind == CQ_JV_STR;
    else if (IS("mapping")) *out = v.kind == CQ_JV_DICT;
    else if (IS("iterable"))
        *out = v.kind == CQ_JV_STR || v.kind == CQ_JV_LIST || v.kind == CQ_JV_DICT ||
               v.kind == CQ_JV_UNDEF || v.kind == CQ_JV_LOOP;
    else if (IS("sequence"))
        *out = v.kind == CQ_JV_STR || (v.kind == CQ_JV_LIST && !v.u.list->gen) || v.kind == CQ_JV_DICT || v.kind == CQ_JV_UNDEF;
    else if (IS("callable"))
        *out = v.kind == CQ_JV_MACRO || v.kind == CQ_JV_FUNC || v.kind == CQ_JV_UNDEF;
    else if (IS("escaped")) *out = v.kind == CQ_JV_STR && v.markup;
    else if (IS("sameas")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "sameas needs an argument");
        if (v.kind != other.kind) *out = false;
        else if (v.kind == CQ_JV_NONE || v.kind == CQ_JV_UNDEF) *out = v.kind == CQ_JV_NONE;
        else if (v.kind == CQ_JV_BOOL) *out = v.u.b == other.u.b;
        else if (v.kind == CQ_JV_INT) *out = v.u.i == other.u.i && v.u.i >= -5 && v.u.i <= 256;
        else if (v.kind == CQ_JV_STR) *out = v.u.s == other.u.s;
        else if (v.kind == CQ_JV_LIST) *out = v.u.list == other.u.list;
        else if (v.kind == CQ_JV_DICT || v.kind == CQ_JV_NS) *out = v.u.dict == other.u.dict;
        else *out = cq_jv_equal(v, other);
    } else if (IS("in")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "in needs an argument");
        if (other.kind == CQ_JV_STR) {
            if (v.kind != CQ_JV_STR)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "'in <string>' requires string as left operand");
            *out = false;
            if (v.u.s->len == 0) *out = true;
            for (size_t i = 0; !*out && i + v.u.s->len <= other.u.s->len; i++)
                *out = memcmp(other.u.s->s + i, v.u.s->s, v.u.s->len) == 0;
        } else if (other.kind == CQ_JV_LIST) {
            *out = false;
            for (size_t i = 0; i < other.u.list->n && !*out; i++) *out = cq_jv_equal(other.u.list->v[i], v);
        } else if (other.kind == CQ_JV_DICT) *out = cq_jdict_get(other.u.dict, v) != NULL;
        else if (other.kind == CQ_JV_UNDEF) *out = false;
        else return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "argument of type '%s' is not iterable",
                                 cq_jv_type_name(other));
    } else if (IS("eq") || IS("equalto") || IS("==")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        *out = cq_jv_equal(v, other);
    } else if (IS("ne") || IS("!=")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        *out = !cq_jv_equal(v, other);
    } else if (IS("lt") || IS("lessthan") || IS("<") || IS("le") || IS("<=") || IS("gt") ||
               IS("greaterthan") || IS(">") || IS("ge") || IS(">=")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        int c;
        CQ_TRY(cq_jv_compare(v, other, line, &c));
        if (c == 2) *out = false;
        else if (IS("lt") || IS("lessthan") || IS("<")) *out = c < 0;
        else if (IS("le") || IS("<=")) *out = c <= 0;
        else if (IS("gt") || IS("greaterthan") || IS(">")) *out = c > 0;
        else *out = c >= 0;
    } else if (IS("odd") || IS("even") || IS("divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0 in Python terms */
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        if (!cq_jv_is_num(v)) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs a number", n);
        cq_jv d = cq_jv_int(2);
        if (IS("divisibleby")) {
            if (!has_other || !cq_jv_is_num(other))
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "divisibleby needs a number");
            d = other;
        }
        bool fl = v.kind == CQ_JV_FLOAT || d.kind == CQ_JV_FLOAT;
        double x = v.kind == CQ_JV_FLOAT ? v.u.f : (double)(v.kind == CQ_JV_BOOL ? v.u.b : v.u.i);
        double y = d.kind == CQ_JV_FLOAT ? d.u.f : (double)(d.kind == CQ_JV_BOOL ? d.u.b : d.u.i);
        if (y == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "integer division or modulo by zero");
        double m;
        if (fl) {
            m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
        } else {
            int64_t xi = v.kind == CQ_JV_BOOL ? v.u.b : v.u.i, yi = d.kind == CQ_JV_BOOL ? d.u.b : d.u.i;
            int64_t mi = yi == -1 ? 0 : xi % yi;
            if (mi != 0 && ((mi < 0) != (yi < 0))) mi += yi;
            m = (double)mi;
        }
        *out = IS("odd") ? m == 1 : m == 0;
    } else if (IS("lower") || IS("upper")) {
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        *out = str_is_case(s, IS("lower"));
    } else if (IS("filter")) {
        if (v.kind != CQ_JV_STR) *out = false;
        else *out = cq_jinja_has_filter(v.u.s->s, v.u.s->len);
    } else if (IS("test")) {
        if (v.kind != CQ_JV_STR) *out = false;
        else *out = cq_jinja_has_test(v.u.s->s, v.u.s->len);
    } else {
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "no test named '%s'", n);
    }
    return CQ_OK;
#undef IS
}
