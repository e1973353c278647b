/*
 * jinja_eval.c — executes the syntax tree: statements write to the current
 * output buffer, expressions produce values with Python/jinja2 semantics.
 *
 * Scopes follow jinja2: `if` has none; every for-loop iteration, macro call,
 * with-block and block set/filter/generation body gets a fresh frame whose
 * parent is the enclosing one, so a `set` inside a loop body is gone at the
 * next iteration and after the loop (namespace() objects are how templates
 * carry state out of loops).
 *
 * Constant subexpressions are first tried the way jinja2's compile-time
 * folding evaluates them (which differs from run time in a few corners,
 * e.g. slicing a constant that cannot be sliced gives Undefined there).
 * Operators live in jinja_ops.c, attribute/item access in jinja_access.c.
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
    *out = cq_jv_undef_fmt(r, "'%.*s' is undefined", name);
    return CQ_OK;
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
    /* Folding reached something that is not constant (a name, a call, a
     * filter that needs the render context): jinja2 gives up on the fold and
     * evaluates the whole expression at run time instead. */
    if (r->const_mode && !e->is_const) return CQ_ERR_INTERRUPTED;
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
        if (e->b->kind == CQ_JN_SLICE) return cq_jinja_eval_slice(r, obj, e->b, f, out);
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
            else if (v.u.i == INT64_MIN)
                return cq_jinja_err(CQ_ERR_UNSUPPORTED, e->line, "integer result does not fit in 64 bits");
            else v.u.i = -v.u.i;
        }
        *out = v;
        return CQ_OK;
    }
    case CQ_JN_BINOP: {
        cq_jv a, b;
        CQ_TRY(cq_jinja_eval(r, e->a, f, &a));
        CQ_TRY(cq_jinja_eval(r, e->b, f, &b));
        return cq_jinja_binop(r, e->op, a, b, e->line, out);
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
            CQ_TRY(cq_jinja_compare_op(r, e->ops[i], left, right, e->line, &res));
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
