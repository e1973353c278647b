/*
 * jinja_eval.c — executes the syntax tree: statements write to the current
 * output buffer, expressions produce values with Python/jinja2 semantics.
 *
 * Scopes follow jinja2: `if` has none; every for-loop iteration, macro call
 * and with-block gets a fresh frame whose parent is the enclosing one, so a
 * `set` inside a loop body is gone at the next iteration and after the loop
 * (namespace() objects are how templates carry state out of loops).
 *
 * Attribute and item access follow the immutable sandbox: obj.name tries the
 * Python attribute (methods of str/dict/list) first and then obj["name"];
 * obj[key] tries the item first and then, for string keys, the attribute;
 * missing things are Undefined, and touching Undefined further fails the
 * way jinja2's default Undefined does.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

enum { CTRL_NONE = 0, CTRL_BREAK = 1, CTRL_CONTINUE = 2 };

cq_jframe *cq_jframe_new(cq_jrender *r, cq_jframe *parent) {
    cq_jframe *f = cq_jarena_alloc(&r->arena, sizeof *f);
    if (!f) return NULL;
    f->parent = parent;
    f->vars = cq_jdict_new(&r->arena, 0);
    return f->vars ? f : NULL;
}

static cq_status frame_set(cq_jrender *r, cq_jframe *f, const cq_jstr *name, cq_jv v) {
    return cq_jdict_set(&r->arena, f->vars, cq_jv_strv(name), v);
}

static cq_jv undef_named(cq_jrender *r, const char *fmt, const cq_jstr *name) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, name->len > 80 ? 80 : (int)name->len, name->s);
    const cq_jstr *m = cq_jstr_new(&r->arena, msg, strlen(msg));
    return cq_jv_undef(m ? m->s : NULL);
}

static cq_status lookup(cq_jrender *r, cq_jframe *f, const cq_jstr *name, cq_jv *out) {
    for (cq_jframe *fr = f; fr; fr = fr->parent) {
        cq_jv *v = cq_jdict_get_str(fr->vars, name->s, name->len);
        if (v) {
            *out = *v;
            return CQ_OK;
        }
    }
    bool found;
    CQ_TRY(cq_jinja_global(r, name, out, &found));
    if (found) return CQ_OK;
    *out = undef_named(r, "'%.*s' is undefined", name);
    return CQ_OK;
}

/* ---- attribute and item access ----------------------------------------------------- */
static cq_status loop_attr(cq_jrender *r, cq_jloop *L, const cq_jstr *name, cq_jv *out,
                           bool *found) {
    size_t n = L->items->n, i = L->index0;
    *found = true;
    if (cq_jstr_eq(name, "index")) *out = cq_jv_int((int64_t)i + 1);
    else if (cq_jstr_eq(name, "index0")) *out = cq_jv_int((int64_t)i);
    else if (cq_jstr_eq(name, "revindex")) *out = cq_jv_int((int64_t)(n - i));
    else if (cq_jstr_eq(name, "revindex0")) *out = cq_jv_int((int64_t)(n - i - 1));
    else if (cq_jstr_eq(name, "first")) *out = cq_jv_bool(i == 0);
    else if (cq_jstr_eq(name, "last")) *out = cq_jv_bool(i + 1 == n);
    else if (cq_jstr_eq(name, "length")) *out = cq_jv_int((int64_t)n);
    else if (cq_jstr_eq(name, "depth")) *out = cq_jv_int(L->depth);
    else if (cq_jstr_eq(name, "depth0")) *out = cq_jv_int(L->depth - 1);
    else if (cq_jstr_eq(name, "previtem"))
        *out = i > 0 ? L->items->v[i - 1] : cq_jv_undef("there is no previous item");
    else if (cq_jstr_eq(name, "nextitem"))
        *out = i + 1 < n ? L->items->v[i + 1] : cq_jv_undef("there is no next item");
    else if (cq_jstr_eq(name, "cycle") || cq_jstr_eq(name, "changed")) {
        cq_jfunc *fn = cq_jarena_alloc(&r->arena, sizeof *fn);
        if (!fn) return CQ_ERR_NOMEM;
        fn->id = cq_jstr_eq(name, "cycle") ? CQ_JF_LOOP_CYCLE : CQ_JF_LOOP_CHANGED;
        fn->self.kind = CQ_JV_LOOP;
        fn->self.u.loop = L;
        out->kind = CQ_JV_FUNC;
        out->unsafe = 0;
        out->u.func = fn;
    } else *found = false;
    return CQ_OK;
}

static cq_status attr_lookup(cq_jrender *r, cq_jv obj, const cq_jstr *name, uint32_t line,
                             cq_jv *out, bool *found) {
    *found = false;
    if (name->len >= 1 && name->s[0] == '_') return CQ_OK; /* sandbox: private attributes */
    if (obj.kind == CQ_JV_NS) {
        cq_jv *v = cq_jdict_get_str(obj.u.dict, name->s, name->len);
        if (v) {
            *out = *v;
            *found = true;
        }
        return CQ_OK;
    }
    if (obj.kind == CQ_JV_LOOP) return loop_attr(r, obj.u.loop, name, out, found);
    if (obj.kind == CQ_JV_STR || obj.kind == CQ_JV_DICT || obj.kind == CQ_JV_LIST) {
        bool unsafe = false;
        CQ_TRY(cq_jinja_method_lookup(r, obj, name, out, found, &unsafe));
        if (*found && unsafe) {
            char msg[160];
            snprintf(msg, sizeof msg, "access to attribute '%.*s' of '%s' object is unsafe.",
                     name->len > 60 ? 60 : (int)name->len, name->s, cq_jv_type_name(obj));
            const cq_jstr *m = cq_jstr_new(&r->arena, msg, strlen(msg));
            *out = cq_jv_undef(m ? m->s : NULL);
            out->unsafe = 1;
        }
    }
    (void)line;
    return CQ_OK;
}

static cq_jv no_attr(cq_jrender *r, cq_jv obj, const cq_jstr *name) {
    char fmt[96];
    snprintf(fmt, sizeof fmt, "'%s object' has no attribute '%%.*s'", cq_jv_type_name(obj));
    return undef_named(r, fmt, name);
}

static cq_status item_lookup(cq_jrender *r, cq_jv obj, cq_jv key, cq_jv *out, bool *found) {
    *found = false;
    if (obj.kind == CQ_JV_DICT) {
        cq_jv *v = cq_jdict_get(obj.u.dict, key);
        if (v) {
            *out = *v;
            *found = true;
        }
    } else if (((obj.kind == CQ_JV_LIST && !obj.u.list->gen) || obj.kind == CQ_JV_STR) &&
               (key.kind == CQ_JV_INT || key.kind == CQ_JV_BOOL)) {
        int64_t i = key.kind == CQ_JV_BOOL ? key.u.b : key.u.i;
        if (obj.kind == CQ_JV_LIST) {
            int64_t n = (int64_t)obj.u.list->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.list->v[i];
                *found = true;
            }
        } else {
            const cq_jstr *s = obj.u.s;
            int64_t n = (int64_t)cq_utf8_count(s->s, s->len);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t st = cq_utf8_offset(s->s, s->len, (size_t)i), e = st;
                cq_utf8_next(s->s, s->len, &e);
                const cq_jstr *c = cq_jstr_new(&r->arena, s->s + st, e - st);
                if (!c) return CQ_ERR_NOMEM;
                *out = obj.markup ? cq_jv_markup(c) : cq_jv_strv(c);
                *found = true;
            }
        }
    }
    return CQ_OK;
}

cq_status cq_jinja_getattr(cq_jrender *r, cq_jv obj, const cq_jstr *name, uint32_t line,
                           cq_jv *out) {
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, line);
    bool found;
    CQ_TRY(attr_lookup(r, obj, name, line, out, &found));
    if (found) return CQ_OK;
    CQ_TRY(item_lookup(r, obj, cq_jv_strv(name), out, &found));
    if (found) return CQ_OK;
    *out = no_attr(r, obj, name);
    return CQ_OK;
}

cq_status cq_jinja_getitem(cq_jrender *r, cq_jv obj, cq_jv key, uint32_t line, cq_jv *out) {
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, line);
    bool found;
    CQ_TRY(item_lookup(r, obj, key, out, &found));
    if (found) return CQ_OK;
    if (key.kind == CQ_JV_STR) {
        CQ_TRY(attr_lookup(r, obj, key.u.s, line, out, &found));
        if (found) return CQ_OK;
        *out = no_attr(r, obj, key.u.s);
        return CQ_OK;
    }
    *out = cq_jv_undef("no such element");
    return CQ_OK;
}

/* Python slice index adjustment (PySlice_AdjustIndices). */
static size_t slice_indices(int64_t len, bool has_start, int64_t start, bool has_stop, int64_t stop,
                            int64_t step, int64_t *ostart) {
    if (!has_start) start = step < 0 ? INT64_MAX : 0;
    if (!has_stop) stop = step < 0 ? INT64_MIN : INT64_MAX;
    if (start < 0) {
        start = start < -len ? (step < 0 ? -1 : 0) : start + len;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (stop < 0) {
        stop = stop < -len ? (step < 0 ? -1 : 0) : stop + len;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    *ostart = start;
    if (step < 0) return stop < start ? (size_t)((start - stop - 1) / (-step) + 1) : 0;
    return start < stop ? (size_t)((stop - start - 1) / step + 1) : 0;
}

static cq_status slice_part(cq_jrender *r, const cq_jnode *e, cq_jframe *f, bool *has, int64_t *v) {
    *has = false;
    if (!e) return CQ_OK;
    cq_jv x;
    CQ_TRY(cq_jinja_eval(r, e, f, &x));
    if (x.kind == CQ_JV_NONE) return CQ_OK;
    if (x.kind == CQ_JV_INT || x.kind == CQ_JV_BOOL) {
        *has = true;
        *v = x.kind == CQ_JV_BOOL ? x.u.b : x.u.i;
        return CQ_OK;
    }
    if (x.kind == CQ_JV_UNDEF) return cq_jv_undef_error(x, e->line);
    return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line,
                        "slice indices must be integers or None or have an __index__ method");
}

static cq_status eval_slice(cq_jrender *r, cq_jv obj, const cq_jnode *sl, cq_jframe *f, cq_jv *out) {
    bool hs, he, hp;
    int64_t s = 0, e = 0, step = 1;
    CQ_TRY(slice_part(r, sl->a, f, &hs, &s));
    CQ_TRY(slice_part(r, sl->b, f, &he, &e));
    CQ_TRY(slice_part(r, sl->c, f, &hp, &step));
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, sl->line);
    /* jinja2 compiles slices to a plain Python subscript: no Undefined
     * fallback, unsliceable values raise -- except when the whole subscript
     * is constant, which jinja2 folds at compile time through its getitem
     * (and so gets Undefined). */
    if ((obj.kind != CQ_JV_LIST && obj.kind != CQ_JV_STR) || (obj.kind == CQ_JV_LIST && obj.u.list->gen)) {
        if (r->const_mode) {
            *out = cq_jv_undef("object is not subscriptable");
            return CQ_OK;
        }
        return cq_jinja_err(CQ_ERR_INVALID_ARG, sl->line, "'%s' object is not subscriptable",
                            cq_jv_type_name(obj));
    }
    if (!hp) step = 1;
    if (step == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, sl->line, "slice step cannot be zero");
    if (step == INT64_MIN) step = INT64_MIN + 1;
    if (obj.kind == CQ_JV_LIST) {
        const cq_jlist *l = obj.u.list;
        int64_t st;
        size_t cnt = slice_indices((int64_t)l->n, hs, s, he, e, step, &st);
        cq_jlist *res = cq_jlist_new(&r->arena, cnt);
        if (!res) return CQ_ERR_NOMEM;
        res->tuple = l->tuple;
        for (size_t k = 0; k < cnt; k++) res->v[k] = l->v[st + (int64_t)k * step];
        res->n = cnt;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    /* strings: slice code points */
    const cq_jstr *str = obj.u.s;
    size_t ncp = cq_utf8_count(str->s, str->len);
    size_t *offs = cq_jarena_alloc(&r->arena, (ncp + 1) * sizeof(size_t));
    if (!offs) return CQ_ERR_NOMEM;
    size_t i = 0, k = 0;
    while (i < str->len) {
        offs[k++] = i;
        cq_utf8_next(str->s, str->len, &i);
    }
    offs[k] = str->len;
    int64_t st;
    size_t cnt = slice_indices((int64_t)ncp, hs, s, he, e, step, &st);
    if (step == 1) {
        const cq_jstr *res = cq_jstr_new(&r->arena, str->s + offs[st], offs[st + (int64_t)cnt] - offs[st]);
        if (!res) return CQ_ERR_NOMEM;
        *out = obj.markup ? cq_jv_markup(res) : cq_jv_strv(res);
        return CQ_OK;
    }
    cq_jbuf b = {0};
    cq_status rc = CQ_OK;
    for (size_t j = 0; j < cnt && rc == CQ_OK; j++) {
        int64_t c = st + (int64_t)j * step;
        rc = cq_jbuf_append(r, &b, str->s + offs[c], offs[c + 1] - offs[c]);
    }
    const cq_jstr *res = NULL;
    if (rc == CQ_OK) rc = cq_jbuf_to_str(r, &b, &res);
    cq_jbuf_free(&b);
    CQ_TRY(rc);
    *out = obj.markup ? cq_jv_markup(res) : cq_jv_strv(res);
    return CQ_OK;
}

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

static cq_status binop(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, cq_jv *out) {
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

static cq_status compare_op(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, bool *out) {
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

/* ---- calls ----------------------------------------------------------------------- */
static cq_status call_macro(cq_jrender *r, const cq_jmacro *m, const cq_jv *args, size_t nargs,
                            const cq_jstr *const *kwn, const cq_jv *kwv, size_t nkw, uint32_t line,
                            cq_jv *out) {
    const cq_jnode *def = m->def;
    cq_jframe *f = cq_jframe_new(r, m->closure);
    if (!f) return CQ_ERR_NOMEM;
    uint32_t np = def->nnames, nd = def->nkids2;
    cq_jv caller = cq_jv_undef("'caller' is undefined");
    cq_jlist *varargs = cq_jlist_new(&r->arena, 0);
    cq_jdict *kwargs = cq_jdict_new(&r->arena, 0);
    if (!varargs || !kwargs) return CQ_ERR_NOMEM;
    varargs->tuple = true;
    bool *bound = cq_jarena_alloc(&r->arena, np + 1);
    if (!bound) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < nargs; i++) {
        if (i < np) {
            CQ_TRY(frame_set(r, f, def->names[i], args[i]));
            bound[i] = true;
        } else {
            CQ_TRY(cq_jlist_push(&r->arena, varargs, args[i]));
        }
    }
    for (size_t k = 0; k < nkw; k++) {
        uint32_t i;
        for (i = 0; i < np; i++)
            if (def->names[i]->len == kwn[k]->len && memcmp(def->names[i]->s, kwn[k]->s, kwn[k]->len) == 0)
                break;
        if (i == np && cq_jstr_eq(kwn[k], "caller")) {
            caller = kwv[k];
        } else if (i < np) {
            if (bound[i])
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "macro '%s' got multiple values for argument '%s'",
                                    def->name->s, kwn[k]->s);
            CQ_TRY(frame_set(r, f, def->names[i], kwv[k]));
            bound[i] = true;
        } else {
            CQ_TRY(cq_jdict_set(&r->arena, kwargs, cq_jv_strv(kwn[k]), kwv[k]));
        }
    }
    for (uint32_t i = 0; i < np; i++) {
        if (bound[i]) continue;
        cq_jv v;
        if (i >= np - nd) {
            CQ_TRY(cq_jinja_eval(r, def->kids2[i - (np - nd)], f, &v));
        } else {
            char msg[128];
            snprintf(msg, sizeof msg, "parameter '%s' was not provided", def->names[i]->s);
            const cq_jstr *s = cq_jstr_new(&r->arena, msg, strlen(msg));
            v = cq_jv_undef(s ? s->s : NULL);
        }
        CQ_TRY(frame_set(r, f, def->names[i], v));
    }
    const cq_jstr *k_varargs = cq_jstr_new(&r->arena, "varargs", 7);
    const cq_jstr *k_kwargs = cq_jstr_new(&r->arena, "kwargs", 6);
    const cq_jstr *k_caller = cq_jstr_new(&r->arena, "caller", 6);
    if (!k_varargs || !k_kwargs || !k_caller) return CQ_ERR_NOMEM;
    CQ_TRY(frame_set(r, f, k_varargs, cq_jv_list(varargs)));
    CQ_TRY(frame_set(r, f, k_kwargs, cq_jv_dict(kwargs)));
    CQ_TRY(frame_set(r, f, k_caller, caller));
    const cq_jstr *res;
    CQ_TRY(cq_jinja_render_capture(r, def->kids, def->nkids, f, line, &res));
    *out = cq_jv_strv(res);
    return CQ_OK;
}

cq_status cq_jinja_call(cq_jrender *r, cq_jv callee, const cq_jv *args, size_t nargs,
                        const cq_jstr *const *kwnames, const cq_jv *kwvals, size_t nkw,
                        uint32_t line, cq_jv *out) {
    CQ_TRY(cq_jinja_step(r, line));
    switch (callee.kind) {
    case CQ_JV_UNDEF: return cq_jv_undef_error(callee, line);
    case CQ_JV_MACRO: return call_macro(r, callee.u.macro, args, nargs, kwnames, kwvals, nkw, line, out);
    case CQ_JV_FUNC: {
        cq_jargs a = {.pos = args, .npos = nargs, .kwnames = kwnames, .kwvals = kwvals, .nkw = nkw};
        return cq_jinja_builtin_call(r, callee.u.func, &a, line, out);
    }
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "'%s' object is not callable",
                            cq_jv_type_name(callee));
    }
}

/* Evaluated call-style arguments of a CALL/FILTER/TEST node, with *args
 * and **kwargs spread in. */
typedef struct evargs {
    cq_jv *pos;
    size_t npos;
    const cq_jstr **kwn;
    cq_jv *kwv;
    size_t nkw;
} evargs;

static cq_status eval_args(cq_jrender *r, const cq_jnode *e, cq_jframe *f, evargs *out) {
    memset(out, 0, sizeof *out);
    const cq_jlist *extra = NULL;
    const cq_jdict *extra_kw = NULL;
    if (e->b) {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->b, f, &v));
        CQ_TRY(cq_jv_iterate(r, v, e->line, &extra));
    }
    if (e->c) {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->c, f, &v));
        if (v.kind != CQ_JV_DICT)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line, "argument after ** must be a mapping, not %s",
                                cq_jv_type_name(v));
        extra_kw = v.u.dict;
    }
    size_t np = e->nkids + (extra ? extra->n : 0), nk = e->nkids2 + (extra_kw ? extra_kw->n : 0);
    if (np) {
        out->pos = cq_jarena_alloc(&r->arena, np * sizeof(cq_jv));
        if (!out->pos) return CQ_ERR_NOMEM;
    }
    if (nk) {
        out->kwv = cq_jarena_alloc(&r->arena, nk * sizeof(cq_jv));
        out->kwn = cq_jarena_alloc(&r->arena, nk * sizeof(cq_jstr *));
        if (!out->kwv || !out->kwn) return CQ_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < e->nkids; i++) CQ_TRY(cq_jinja_eval(r, e->kids[i], f, &out->pos[out->npos++]));
    if (extra)
        for (size_t i = 0; i < extra->n; i++) out->pos[out->npos++] = extra->v[i];
    for (uint32_t i = 0; i < e->nkids2; i++) {
        out->kwn[out->nkw] = e->names[i];
        CQ_TRY(cq_jinja_eval(r, e->kids2[i], f, &out->kwv[out->nkw++]));
    }
    if (extra_kw)
        for (size_t i = 0; i < extra_kw->n; i++) {
            if (extra_kw->k[i].kind != CQ_JV_STR)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line, "keywords must be strings");
            out->kwn[out->nkw] = extra_kw->k[i].u.s;
            out->kwv[out->nkw++] = extra_kw->v[i];
        }
    return CQ_OK;
}

/* Apply a filter node chain (innermost operand NULL) to value v. */
static cq_status apply_filter_chain(cq_jrender *r, const cq_jnode *chain, cq_jframe *f, cq_jv v,
                                    cq_jv *out) {
    if (!chain) {
        *out = v;
        return CQ_OK;
    }
    cq_jv inner;
    CQ_TRY(apply_filter_chain(r, chain->a, f, v, &inner));
    evargs ev;
    CQ_TRY(eval_args(r, chain, f, &ev));
    cq_jargs a = {.pos = ev.pos, .npos = ev.npos, .kwnames = ev.kwn, .kwvals = ev.kwv, .nkw = ev.nkw};
    return cq_jinja_filter(r, chain->name, inner, &a, chain->line, out);
}

/* ---- expressions ----------------------------------------------------------------- */
/* Python values jinja2 accepts as folded constants (has_safe_repr). */
static bool safe_repr(cq_jv v, int depth) {
    switch (v.kind) {
    case CQ_JV_NONE:
    case CQ_JV_BOOL:
    case CQ_JV_INT:
    case CQ_JV_FLOAT:
    case CQ_JV_STR: return true;
    case CQ_JV_LIST:
        if (v.u.list->gen || depth > 64) return false;
        for (size_t i = 0; i < v.u.list->n; i++)
            if (!safe_repr(v.u.list->v[i], depth + 1)) return false;
        return true;
    case CQ_JV_DICT:
        if (depth > 64) return false;
        for (size_t i = 0; i < v.u.dict->n; i++)
            if (!safe_repr(v.u.dict->k[i], depth + 1) || !safe_repr(v.u.dict->v[i], depth + 1)) return false;
        return true;
    default: return false;
    }
}

static cq_status eval_node(cq_jrender *r, const cq_jnode *e, cq_jframe *f, cq_jv *out);

/* jinja2 folds constant subexpressions at compile time with its getitem
 * rules, so e.g. slicing a constant that cannot be sliced gives Undefined
 * inside a folded expression instead of failing; a fold that fails or does
 * not give a plain constant is left to run time. */
cq_status cq_jinja_eval(cq_jrender *r, const cq_jnode *e, cq_jframe *f, cq_jv *out) {
    if (r->const_mode && (e->kind == CQ_JN_NAME || e->kind == CQ_JN_CALL || e->b || e->c) &&
        (e->kind == CQ_JN_NAME || e->kind == CQ_JN_CALL || e->kind == CQ_JN_FILTER || e->kind == CQ_JN_TEST))
        return CQ_ERR_INTERRUPTED; /* not a constant: jinja2 evaluates it at run time */
    if (e->is_const && !r->const_mode && e->kind != CQ_JN_CONST) {
        r->const_mode++;
        cq_status s = eval_node(r, e, f, out);
        r->const_mode--;
        if (s == CQ_OK && safe_repr(*out, 0)) return CQ_OK;
        if (s == CQ_ERR_NOMEM || s == CQ_ERR_BOUNDS) return s;
    }
    return eval_node(r, e, f, out);
}

static cq_status eval_node(cq_jrender *r, const cq_jnode *e, cq_jframe *f, cq_jv *out) {
    switch (e->kind) {
    case CQ_JN_CONST: *out = e->cval; return CQ_OK;
    case CQ_JN_NAME: return lookup(r, f, e->name, out);
    case CQ_JN_LIST:
    case CQ_JN_TUPLE: {
        cq_jlist *l = cq_jlist_new(&r->arena, e->nkids);
        if (!l) return CQ_ERR_NOMEM;
        l->tuple = e->kind == CQ_JN_TUPLE;
        for (uint32_t i = 0; i < e->nkids; i++) CQ_TRY(cq_jinja_eval(r, e->kids[i], f, &l->v[i]));
        l->n = e->nkids;
        *out = cq_jv_list(l);
        return CQ_OK;
    }
    case CQ_JN_DICT: {
        cq_jdict *d = cq_jdict_new(&r->arena, e->nkids);
        if (!d) return CQ_ERR_NOMEM;
        for (uint32_t i = 0; i < e->nkids; i++) {
            cq_jv k, v;
            CQ_TRY(cq_jinja_eval(r, e->kids[i], f, &k));
            CQ_TRY(cq_jinja_eval(r, e->kids2[i], f, &v));
            if (k.kind == CQ_JV_LIST && !k.u.list->tuple)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line, "unhashable type: 'list'");
            if (k.kind == CQ_JV_DICT || k.kind == CQ_JV_NS)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line, "unhashable type: '%s'",
                                    cq_jv_type_name(k));
            CQ_TRY(cq_jdict_set(&r->arena, d, k, v));
        }
        *out = cq_jv_dict(d);
        return CQ_OK;
    }
    case CQ_JN_GETATTR: {
        cq_jv obj;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &obj));
        return cq_jinja_getattr(r, obj, e->name, e->line, out);
    }
    case CQ_JN_GETITEM: {
        cq_jv obj;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &obj));
        if (e->b->kind == CQ_JN_SLICE) return eval_slice(r, obj, e->b, f, out);
        cq_jv key;
        CQ_TRY(cq_jinja_eval(r, e->b, f, &key));
        return cq_jinja_getitem(r, obj, key, e->line, out);
    }
    case CQ_JN_SLICE:
        return cq_jinja_err(CQ_ERR_PARSE, e->line, "a slice is only valid inside []");
    case CQ_JN_CALL: {
        cq_jv callee;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &callee));
        evargs ev;
        CQ_TRY(eval_args(r, e, f, &ev));
        return cq_jinja_call(r, callee, ev.pos, ev.npos, ev.kwn, ev.kwv, ev.nkw, e->line, out);
    }
    case CQ_JN_FILTER: {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &v));
        evargs ev;
        CQ_TRY(eval_args(r, e, f, &ev));
        cq_jargs a = {.pos = ev.pos, .npos = ev.npos, .kwnames = ev.kwn, .kwvals = ev.kwv, .nkw = ev.nkw};
        return cq_jinja_filter(r, e->name, v, &a, e->line, out);
    }
    case CQ_JN_TEST: {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &v));
        evargs ev;
        CQ_TRY(eval_args(r, e, f, &ev));
        cq_jargs a = {.pos = ev.pos, .npos = ev.npos, .kwnames = ev.kwn, .kwvals = ev.kwv, .nkw = ev.nkw};
        bool res;
        CQ_TRY(cq_jinja_test(r, e->name, v, &a, e->line, &res));
        *out = cq_jv_bool(res);
        return CQ_OK;
    }
    case CQ_JN_NOT: {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &v));
        if (v.kind == CQ_JV_UNDEF && v.unsafe) return cq_jv_undef_error(v, e->line);
        *out = cq_jv_bool(!cq_jv_truthy(v));
        return CQ_OK;
    }
    case CQ_JN_NEG:
    case CQ_JN_POS: {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &v));
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, e->line);
        if (!cq_jv_is_num(v))
            return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line, "bad operand type for unary %s: '%s'",
                                e->kind == CQ_JN_NEG ? "-" : "+", cq_jv_type_name(v));
        if (v.kind == CQ_JV_BOOL) v = cq_jv_int(v.u.b);
        if (e->kind == CQ_JN_NEG) {
            if (v.kind == CQ_JV_FLOAT) v.u.f = -v.u.f;
            else if (v.u.i == INT64_MIN) return overflow(e->line);
            else v.u.i = -v.u.i;
        }
        *out = v;
        return CQ_OK;
    }
    case CQ_JN_BINOP: {
        cq_jv a, b;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &a));
        CQ_TRY(cq_jinja_eval(r, e->b, f, &b));
        return binop(r, e->op, a, b, e->line, out);
    }
    case CQ_JN_CONCAT: {
        cq_jbuf b = {0};
        cq_status s = CQ_OK;
        for (uint32_t i = 0; i < e->nkids && s == CQ_OK; i++) {
            cq_jv v;
            s = cq_jinja_eval(r, e->kids[i], f, &v);
            if (s == CQ_OK) s = cq_jv_str_append(r, &b, v, e->line);
        }
        const cq_jstr *res = NULL;
        if (s == CQ_OK) s = cq_jbuf_to_str(r, &b, &res);
        cq_jbuf_free(&b);
        CQ_TRY(s);
        *out = cq_jv_strv(res);
        return CQ_OK;
    }
    case CQ_JN_COMPARE: {
        cq_jv left;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &left));
        for (uint32_t i = 0; i < e->nkids; i++) {
            cq_jv right;
            CQ_TRY(cq_jinja_eval(r, e->kids[i], f, &right));
            bool res;
            CQ_TRY(compare_op(r, e->ops[i], left, right, e->line, &res));
            if (!res) {
                *out = cq_jv_bool(false);
                return CQ_OK;
            }
            left = right;
        }
        *out = cq_jv_bool(true);
        return CQ_OK;
    }
    case CQ_JN_AND:
    case CQ_JN_OR: {
        cq_jv a;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &a));
        if (a.kind == CQ_JV_UNDEF && a.unsafe) return cq_jv_undef_error(a, e->line);
        bool t = cq_jv_truthy(a);
        if ((e->kind == CQ_JN_AND) ? !t : t) {
            *out = a;
            return CQ_OK;
        }
        return cq_jinja_eval(r, e->b, f, out);
    }
    case CQ_JN_CONDEXPR: {
        cq_jv c;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &c));
        if (c.kind == CQ_JV_UNDEF && c.unsafe) return cq_jv_undef_error(c, e->line);
        if (cq_jv_truthy(c)) return cq_jinja_eval(r, e->b, f, out);
        if (e->c) return cq_jinja_eval(r, e->c, f, out);
        *out = cq_jv_undef("the inline if-expression evaluated to false and no else section was defined");
        return CQ_OK;
    }
    default:
        return cq_jinja_err(CQ_ERR_INTERNAL, e->line, "unexpected node %d in an expression", e->kind);
    }
}

/* ---- statements -------------------------------------------------------------------- */
static cq_status assign(cq_jrender *r, const cq_jnode *target, cq_jv v, cq_jframe *f) {
    if (target->kind == CQ_JN_NAME) return frame_set(r, f, target->name, v);
    if (target->kind == CQ_JN_NSREF) {
        cq_jv ns;
        CQ_TRY(lookup(r, f, target->name, &ns));
        if (ns.kind != CQ_JV_NS)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, target->line,
                                "cannot assign attribute on non-namespace object");
        return cq_jdict_set(&r->arena, ns.u.dict, cq_jv_strv(target->name2), v);
    }
    /* tuple unpacking */
    const cq_jlist *items;
    CQ_TRY(cq_jv_iterate(r, v, target->line, &items));
    if (items->n != target->nkids)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, target->line, "%s values to unpack (expected %u, got %zu)",
                            items->n > target->nkids ? "too many" : "not enough", target->nkids, items->n);
    for (uint32_t i = 0; i < target->nkids; i++) CQ_TRY(assign(r, target->kids[i], items->v[i], f));
    return CQ_OK;
}

cq_status cq_jinja_render_capture(cq_jrender *r, cq_jnode *const *body, uint32_t n, cq_jframe *f,
                                  uint32_t line, const cq_jstr **out) {
    if (r->depth >= r->lim.max_depth)
        return cq_jinja_err(CQ_ERR_BOUNDS, line, "macro calls or captures nested deeper than %d",
                            r->lim.max_depth);
    cq_jbuf buf = {0};
    cq_jbuf *saved = r->out;
    r->out = &buf;
    r->depth++;
    cq_status s = cq_jinja_render_body(r, body, n, f);
    r->depth--;
    r->out = saved;
    r->ctrl = CTRL_NONE;
    if (s == CQ_OK) s = cq_jbuf_to_str(r, &buf, out);
    cq_jbuf_free(&buf);
    return s;
}

static cq_status exec_for(cq_jrender *r, const cq_jnode *nd, cq_jframe *f) {
    cq_jv it;
    CQ_TRY(cq_jinja_eval(r, nd->b, f, &it));
    const cq_jlist *items;
    CQ_TRY(cq_jv_iterate(r, it, nd->b->line, &items));
    if (nd->c) {
        cq_jlist *kept = cq_jlist_new(&r->arena, items->n);
        if (!kept) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < items->n; i++) {
            CQ_TRY(cq_jinja_step(r, nd->line));
            cq_jframe *tf = cq_jframe_new(r, f);
            if (!tf) return CQ_ERR_NOMEM;
            CQ_TRY(assign(r, nd->a, items->v[i], tf));
            cq_jv c;
            CQ_TRY(cq_jinja_eval(r, nd->c, tf, &c));
            if (c.kind == CQ_JV_UNDEF && c.unsafe) return cq_jv_undef_error(c, nd->c->line);
            if (cq_jv_truthy(c)) kept->v[kept->n++] = items->v[i];
        }
        items = kept;
    }
    if (items->n == 0) return cq_jinja_render_body(r, nd->kids2, nd->nkids2, f);
    cq_jloop *L = cq_jarena_alloc(&r->arena, sizeof *L);
    if (!L) return CQ_ERR_NOMEM;
    L->items = items;
    /* Without recursive loops (unsupported) jinja2's loop.depth is always 1. */
    L->depth = 1;
    const cq_jstr *loopname = cq_jstr_new(&r->arena, "loop", 4);
    if (!loopname) return CQ_ERR_NOMEM;
    cq_jv lv = {.kind = CQ_JV_LOOP};
    lv.u.loop = L;
    /* jinja2 runs the else block unless some iteration reached the end of
     * its body: a loop left by break (or only ever continued) runs it too. */
    bool run_else = true;
    for (size_t i = 0; i < items->n; i++) {
        CQ_TRY(cq_jinja_step(r, nd->line));
        L->index0 = i;
        cq_jframe *tf = cq_jframe_new(r, f);
        if (!tf) return CQ_ERR_NOMEM;
        CQ_TRY(frame_set(r, tf, loopname, lv));
        CQ_TRY(assign(r, nd->a, items->v[i], tf));
        CQ_TRY(cq_jinja_render_body(r, nd->kids, nd->nkids, tf));
        if (r->ctrl == CTRL_BREAK) {
            r->ctrl = CTRL_NONE;
            break;
        }
        if (r->ctrl == CTRL_NONE) run_else = false;
        r->ctrl = CTRL_NONE;
    }
    if (run_else) return cq_jinja_render_body(r, nd->kids2, nd->nkids2, f);
    return CQ_OK;
}

static cq_status exec(cq_jrender *r, const cq_jnode *nd, cq_jframe *f) {
    switch (nd->kind) {
    case CQ_JN_DATA: return cq_jbuf_append(r, r->out, nd->cval.u.s->s, nd->cval.u.s->len);
    case CQ_JN_OUTPUT: {
        cq_jv v;
        if (nd->a->is_const) {
            /* jinja2 evaluates a constant output expression at compile time
             * (slicing what cannot be sliced gives Undefined there) and prints
             * whatever that gives; when that fails it evaluates it again at
             * run time. */
            r->const_mode++;
            cq_status s = eval_node(r, nd->a, f, &v);
            r->const_mode--;
            if (s == CQ_OK && cq_jv_str_append(r, r->out, v, nd->line) == CQ_OK) return CQ_OK;
            if (s == CQ_ERR_NOMEM || s == CQ_ERR_BOUNDS) return s;
        }
        CQ_TRY(cq_jinja_eval(r, nd->a, f, &v));
        return cq_jv_str_append(r, r->out, v, nd->line);
    }
    case CQ_JN_IF: {
        cq_jv c;
        CQ_TRY(cq_jinja_eval(r, nd->a, f, &c));
        if (c.kind == CQ_JV_UNDEF && c.unsafe) return cq_jv_undef_error(c, nd->line);
        if (cq_jv_truthy(c)) return cq_jinja_render_body(r, nd->kids, nd->nkids, f);
        return cq_jinja_render_body(r, nd->kids2, nd->nkids2, f);
    }
    case CQ_JN_FOR: return exec_for(r, nd, f);
    case CQ_JN_SET: {
        cq_jv v;
        CQ_TRY(cq_jinja_eval(r, nd->b, f, &v));
        return assign(r, nd->a, v, f);
    }
    case CQ_JN_SETBLOCK: {
        /* block set, filter and generation blocks have their own scope */
        cq_jframe *bf = cq_jframe_new(r, f);
        if (!bf) return CQ_ERR_NOMEM;
        const cq_jstr *s;
        CQ_TRY(cq_jinja_render_capture(r, nd->kids, nd->nkids, bf, nd->line, &s));
        cq_jv v;
        CQ_TRY(apply_filter_chain(r, nd->c, f, cq_jv_strv(s), &v));
        return assign(r, nd->a, v, f);
    }
    case CQ_JN_MACRO: {
        cq_jmacro *m = cq_jarena_alloc(&r->arena, sizeof *m);
        if (!m) return CQ_ERR_NOMEM;
        m->def = nd;
        m->closure = f;
        cq_jv v = {.kind = CQ_JV_MACRO};
        v.u.macro = m;
        return frame_set(r, f, nd->name, v);
    }
    case CQ_JN_FILTERBLOCK: {
        cq_jframe *bf = cq_jframe_new(r, f);
        if (!bf) return CQ_ERR_NOMEM;
        const cq_jstr *s;
        CQ_TRY(cq_jinja_render_capture(r, nd->kids, nd->nkids, bf, nd->line, &s));
        cq_jv v;
        CQ_TRY(apply_filter_chain(r, nd->c, bf, cq_jv_strv(s), &v));
        return cq_jv_str_append(r, r->out, v, nd->line);
    }
    case CQ_JN_WITH: {
        cq_jframe *wf = cq_jframe_new(r, f);
        if (!wf) return CQ_ERR_NOMEM;
        for (uint32_t i = 0; i < nd->nnames; i++) {
            cq_jv v;
            CQ_TRY(cq_jinja_eval(r, nd->kids2[i], f, &v));
            CQ_TRY(frame_set(r, wf, nd->names[i], v));
        }
        return cq_jinja_render_body(r, nd->kids, nd->nkids, wf);
    }
    case CQ_JN_BREAK: r->ctrl = CTRL_BREAK; return CQ_OK;
    case CQ_JN_CONTINUE: r->ctrl = CTRL_CONTINUE; return CQ_OK;
    case CQ_JN_BODY: {
        cq_jframe *bf = cq_jframe_new(r, f);
        if (!bf) return CQ_ERR_NOMEM;
        return cq_jinja_render_body(r, nd->kids, nd->nkids, bf);
    }
    case CQ_JN_CALLBLOCK: {
        cq_jmacro *m = cq_jarena_alloc(&r->arena, sizeof *m);
        if (!m) return CQ_ERR_NOMEM;
        m->def = nd;
        m->closure = f;
        const cq_jnode *call = nd->a;
        cq_jv callee;
        CQ_TRY(cq_jinja_eval(r, call->a, f, &callee));
        evargs ev;
        CQ_TRY(eval_args(r, call, f, &ev));
        const cq_jstr **kwn = cq_jarena_alloc(&r->arena, (ev.nkw + 1) * sizeof *kwn);
        cq_jv *kwv = cq_jarena_alloc(&r->arena, (ev.nkw + 1) * sizeof *kwv);
        if (!kwn || !kwv) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < ev.nkw; i++) {
            kwn[i] = ev.kwn[i];
            kwv[i] = ev.kwv[i];
        }
        kwn[ev.nkw] = nd->name; /* "caller" */
        kwv[ev.nkw] = (cq_jv){.kind = CQ_JV_MACRO};
        kwv[ev.nkw].u.macro = m;
        cq_jv res;
        CQ_TRY(cq_jinja_call(r, callee, ev.pos, ev.npos, kwn, kwv, ev.nkw + 1, nd->line, &res));
        return cq_jv_str_append(r, r->out, res, nd->line);
    }
    default:
        return cq_jinja_err(CQ_ERR_INTERNAL, nd->line, "unexpected node %d in a statement", nd->kind);
    }
}

cq_status cq_jinja_render_body(cq_jrender *r, cq_jnode *const *body, uint32_t n, cq_jframe *f) {
    for (uint32_t i = 0; i < n; i++) {
        CQ_TRY(exec(r, body[i], f));
        if (r->ctrl != CTRL_NONE) return CQ_OK;
    }
    return CQ_OK;
}
