/*
 * jinja_ops.c — Python arithmetic and comparison on template values: int
 * math that refuses to overflow 64 bits (Python would grow the integer),
 * float floor division and modulo as CPython computes them, str/list
 * concatenation and repetition, Markup + str escaping the plain side,
 * `str % args`, and ==, <, in (which consumes generators as Python does).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

/* ---- arithmetic -------------------------------------------------------------------- */
static const char *op_sym(int op) {
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**"};
    return op <= CQ_JOP_POW ? s[op] : "?";
}

static cq_status type_err(int op, cq_jv a, cq_jv b, uint32_t line) {
    if (op == CQ_JOP_ADD && a.kind == CQ_JV_STR)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "can only concatenate str (not \"%s\") to str",
                            cq_jv_type_name(b));
    return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                        "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op),
                        cq_jv_type_name(a), cq_jv_type_name(b));
}

static cq_status overflow(uint32_t line) {
    return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "integer result does not fit in 64 bits");
}

static cq_status repeat(cq_jrender *r, cq_jv seq, int64_t times, uint32_t line, cq_jv *out) {
    if (times < 0) times = 0;
    if (seq.kind == CQ_JV_STR) {
        cq_jbuf b = {0};
        cq_status s = CQ_OK;
        for (int64_t k = 0; k < times && s == CQ_OK; k++)
            s = cq_jbuf_append(r, &b, seq.u.s->s, seq.u.s->len);
        const cq_jstr *res = NULL;
        if (s == CQ_OK) s = cq_jbuf_to_str(r, &b, &res);
        cq_jbuf_free(&b);
        CQ_TRY(s);
        *out = seq.markup ? cq_jv_markup(res) : cq_jv_strv(res);
        return CQ_OK;
    }
    const cq_jlist *l = seq.u.list;
    uint64_t total;
    if (!cq_mul_u64(l->n, (uint64_t)times, &total) || total > 100000000)
        return cq_jinja_err(CQ_ERR_BOUNDS, line, "repeated list is too large");
    cq_jlist *res = cq_jlist_new(&r->arena, (size_t)total);
    if (!res) return CQ_ERR_NOMEM;
    res->tuple = l->tuple;
    for (int64_t k = 0; k < times; k++)
        for (size_t j = 0; j < l->n; j++) res->v[res->n++] = l->v[j];
    *out = cq_jv_list(res);
    return CQ_OK;
}

/* CPython's float floor division and modulo. */
static void py_float_divmod(double vx, double wx, double *floordiv, double *mod) {
    double m = fmod(vx, wx);
    double div = (vx - m) / wx;
    if (m != 0.0) {
        if ((wx < 0) != (m < 0)) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, wx);
    }
    double fd;
    if (div != 0.0) {
        fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, vx / wx);
    }
    *floordiv = fd;
    *mod = m;
}

cq_status cq_jinja_binop(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, cq_jv *out) {
    /* str % x formats before Undefined gets a say (str.__mod__ comes first) */
    if (op == CQ_JOP_MOD && a.kind == CQ_JV_STR) return cq_jinja_str_mod(r, a.u.s, b, line, out, a.markup);
    if (a.kind == CQ_JV_UNDEF) return cq_jv_undef_error(a, line);
    if (b.kind == CQ_JV_UNDEF) return cq_jv_undef_error(b, line);
    bool an = cq_jv_is_num(a), bn = cq_jv_is_num(b);
    if (an && bn) {
        bool fl = a.kind == CQ_JV_FLOAT || b.kind == CQ_JV_FLOAT;
        if (!fl && op != CQ_JOP_DIV) {
            int64_t x = a.kind == CQ_JV_BOOL ? a.u.b : a.u.i;
            int64_t y = b.kind == CQ_JV_BOOL ? b.u.b : b.u.i;
            int64_t z;
            switch (op) {
            case CQ_JOP_ADD:
                if (__builtin_add_overflow(x, y, &z)) return overflow(line);
                break;
            case CQ_JOP_SUB:
                if (__builtin_sub_overflow(x, y, &z)) return overflow(line);
                break;
            case CQ_JOP_MUL:
                if (__builtin_mul_overflow(x, y, &z)) return overflow(line);
                break;
            case CQ_JOP_FLOORDIV:
            case CQ_JOP_MOD: {
                if (y == 0)
                    return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) return overflow(line);
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q -= 1;
                    m += y;
                }
                z = op == CQ_JOP_FLOORDIV ? q : m;
                break;
            }
            case CQ_JOP_POW: {
                if (y < 0) {
                    if (x == 0)
                        return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                                            "0.0 cannot be raised to a negative power");
                    *out = cq_jv_float(pow((double)x, (double)y));
                    return CQ_OK;
                }
                z = 1;
                int64_t base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if (e & 1)
                        if (__builtin_mul_overflow(z, base, &z)) return overflow(line);
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow(line);
                }
                break;
            }
            default: return type_err(op, a, b, line);
            }
            *out = cq_jv_int(z);
            return CQ_OK;
        }
        double x = a.kind == CQ_JV_FLOAT ? a.u.f : (double)(a.kind == CQ_JV_BOOL ? a.u.b : a.u.i);
        double y = b.kind == CQ_JV_FLOAT ? b.u.f : (double)(b.kind == CQ_JV_BOOL ? b.u.b : b.u.i);
        double z, fd, m;
        switch (op) {
        case CQ_JOP_ADD: z = x + y; break;
        case CQ_JOP_SUB: z = x - y; break;
        case CQ_JOP_MUL: z = x * y; break;
        case CQ_JOP_DIV:
            if (y == 0.0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "division by zero");
            z = x / y;
            break;
        case CQ_JOP_FLOORDIV:
        case CQ_JOP_MOD:
            if (y == 0.0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "float modulo or division by zero");
            py_float_divmod(x, y, &fd, &m);
            z = op == CQ_JOP_FLOORDIV ? fd : m;
            break;
        case CQ_JOP_POW:
            if (x == 0.0 && y < 0)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "0.0 cannot be raised to a negative power");
            if (x < 0 && y != floor(y))
                return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "complex results are not supported");
            z = pow(x, y);
            if (isinf(z) && isfinite(x) && isfinite(y))
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "numerical result out of range");
            break;
        default: return type_err(op, a, b, line);
        }
        *out = cq_jv_float(z);
        return CQ_OK;
    }
    if (op == CQ_JOP_ADD) {
        if (a.kind == CQ_JV_STR && b.kind == CQ_JV_STR) {
            bool mk = a.markup || b.markup;
            /* Markup + str escapes the plain side */
            if (mk) {
                CQ_TRY(cq_jinja_escape(r, a, false, line, &a));
                CQ_TRY(cq_jinja_escape(r, b, false, line, &b));
            }
            const cq_jstr *s = cq_jstr_cat(&r->arena, a.u.s, b.u.s);
            if (!s) return CQ_ERR_NOMEM;
            *out = mk ? cq_jv_markup(s) : cq_jv_strv(s);
            return CQ_OK;
        }
        if (a.kind == CQ_JV_LIST && b.kind == CQ_JV_LIST && a.u.list->tuple == b.u.list->tuple &&
            !a.u.list->gen && !b.u.list->gen) {
            cq_jlist *l = cq_jlist_new(&r->arena, a.u.list->n + b.u.list->n);
            if (!l) return CQ_ERR_NOMEM;
            l->tuple = a.u.list->tuple;
            for (size_t i = 0; i < a.u.list->n; i++) l->v[l->n++] = a.u.list->v[i];
            for (size_t i = 0; i < b.u.list->n; i++) l->v[l->n++] = b.u.list->v[i];
            *out = cq_jv_list(l);
            return CQ_OK;
        }
    }
    if (op == CQ_JOP_MUL) {
        if ((a.kind == CQ_JV_STR || (a.kind == CQ_JV_LIST && !a.u.list->gen)) &&
            (b.kind == CQ_JV_INT || b.kind == CQ_JV_BOOL))
            return repeat(r, a, b.kind == CQ_JV_BOOL ? b.u.b : b.u.i, line, out);
        if ((b.kind == CQ_JV_STR || (b.kind == CQ_JV_LIST && !b.u.list->gen)) &&
            (a.kind == CQ_JV_INT || a.kind == CQ_JV_BOOL))
            return repeat(r, b, a.kind == CQ_JV_BOOL ? a.u.b : a.u.i, line, out);
    }
    return type_err(op, a, b, line);
}

static cq_status contains(cq_jrender *r, cq_jv hay, cq_jv needle, uint32_t line, bool *out) {
    CQ_TRY(cq_jinja_charge(r, hay.kind == CQ_JV_STR ? hay.u.s->len / 16 : hay.kind == CQ_JV_LIST ? hay.u.list->n : 0, line));
    switch (hay.kind) {
    case CQ_JV_STR:
        if (needle.kind != CQ_JV_STR) {
            if (needle.kind == CQ_JV_UNDEF) return cq_jv_undef_error(needle, line);
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                                "'in <string>' requires string as left operand, not %s",
                                cq_jv_type_name(needle));
        }
        if (needle.u.s->len == 0) *out = true;
        else if (needle.u.s->len > hay.u.s->len) *out = false;
        else {
            *out = false;
            const char *h = hay.u.s->s;
            size_t hn = hay.u.s->len, nn = needle.u.s->len;
            for (size_t i = 0; i + nn <= hn; i++)
                if (h[i] == needle.u.s->s[0] && memcmp(h + i, needle.u.s->s, nn) == 0) {
                    *out = true;
                    break;
                }
        }
        return CQ_OK;
    case CQ_JV_LIST: {
        cq_jlist *l = hay.u.list;
        size_t i = l->gen ? l->gen_pos : 0;
        *out = false;
        for (; i < l->n; i++)
            if (cq_jv_equal(l->v[i], needle)) {
                *out = true;
                break;
            }
        if (!*out && l->gen_err) return cq_fail(CQ_ERR_INVALID_ARG, "%s", l->gen_err);
        /* `in` on a generator consumes it up to the match */
        if (l->gen) l->gen_pos = i < l->n ? i + 1 : l->n;
        return CQ_OK;
    }
    case CQ_JV_DICT:
        if ((needle.kind == CQ_JV_LIST && !needle.u.list->tuple) || needle.kind == CQ_JV_DICT)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "unhashable type: '%s'", cq_jv_type_name(needle));
        *out = cq_jdict_get(hay.u.dict, needle) != NULL;
        return CQ_OK;
    case CQ_JV_UNDEF:
        if (hay.unsafe) return cq_jv_undef_error(hay, line);
        *out = false;
        return CQ_OK;
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "argument of type '%s' is not iterable",
                            cq_jv_type_name(hay));
    }
}

cq_status cq_jinja_compare_op(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, bool *out) {
    switch (op) {
    case CQ_JOP_EQ: *out = cq_jv_equal(a, b); return CQ_OK;
    case CQ_JOP_NE: *out = !cq_jv_equal(a, b); return CQ_OK;
    case CQ_JOP_IN: return contains(r, b, a, line, out);
    case CQ_JOP_NOTIN: {
        bool in;
        CQ_TRY(contains(r, b, a, line, &in));
        *out = !in;
        return CQ_OK;
    }
    default: {
        int c;
        CQ_TRY(cq_jv_compare(a, b, line, &c));
        if (c == 2) *out = false; /* NaN */
        else if (op == CQ_JOP_LT) *out = c < 0;
        else if (op == CQ_JOP_LE) *out = c <= 0;
        else if (op == CQ_JOP_GT) *out = c > 0;
        else *out = c >= 0;
        return CQ_OK;
    }
    }
}

