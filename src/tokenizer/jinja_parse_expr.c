/*
 * jinja_parse_expr.c — template expressions with jinja2's grammar and
 * precedence (lowest first): conditional `a if c else b`, or, and, not,
 * comparisons (chained, in, not in), + -, ~, * / // %, **, unary - +, then
 * postfix access (. [] calls) with filters (|) and tests (is) binding to the
 * operand on their left; literals, lists, dicts, tuples, slices, keyword and
 * *args and **kwargs call arguments. Also the parser's shared helpers.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_parse_impl.h"

/* ---- shared helpers ---- */
const char *cq_jp_tok_desc(const cq_jtok *t) {
    switch (t->kind) {
    case CQ_JT_EOF: return "end of template";
    case CQ_JT_DATA: return "template data";
    case CQ_JT_VAR_BEGIN: return "begin of print statement";
    case CQ_JT_VAR_END: return "end of print statement";
    case CQ_JT_BLOCK_BEGIN: return "begin of statement block";
    case CQ_JT_BLOCK_END: return "end of statement block";
    case CQ_JT_NAME: return t->text->s;
    case CQ_JT_STRING: return "string";
    case CQ_JT_INT: return "integer";
    case CQ_JT_FLOAT: return "float";
    default: {
        static const char *const ops[CQ_JTO_COUNT] = {
            "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")", "{", "}",
            "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";"};
        return t->op < CQ_JTO_COUNT ? ops[t->op] : "operator";
    }
    }
}

cq_status cq_jp_fail_at(cq_jparser *p, const char *what) {
    const cq_jtok *t = cq_jp_cur(p);
    return cq_jinja_err(CQ_ERR_PARSE, t->line, "%s, got '%s'", what, cq_jp_tok_desc(t));
}

cq_status cq_jp_expect_op(cq_jparser *p, int op, const char *what) {
    if (!cq_jp_is_op(cq_jp_cur(p), op)) return cq_jp_fail_at(p, what);
    cq_jp_next(p);
    return CQ_OK;
}

cq_status cq_jp_expect_kind(cq_jparser *p, int kind, const char *what) {
    if (cq_jp_cur(p)->kind != kind) return cq_jp_fail_at(p, what);
    cq_jp_next(p);
    return CQ_OK;
}

cq_jnode *cq_jp_node(cq_jparser *p, int kind, uint32_t line) {
    cq_jnode *nd = cq_jarena_alloc(p->a, sizeof *nd);
    if (nd) {
        nd->kind = (uint8_t)kind;
        nd->line = line;
    }
    return nd;
}

cq_status cq_jp_nvec_push(cq_jparser *p, cq_jnvec *v, cq_jnode *x) {
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 4;
        if (nc < v->cap) return cq_fail(CQ_ERR_NOMEM, "too many template nodes");
        cq_jnode **nv = cq_jarena_alloc(p->a, (size_t)nc * sizeof *nv);
        if (!nv) return CQ_ERR_NOMEM;
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return CQ_OK;
}

cq_status cq_jp_svec_push(cq_jparser *p, cq_jsvec *v, const cq_jstr *x) {
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 4;
        const cq_jstr **nv = cq_jarena_alloc(p->a, (size_t)nc * sizeof *nv);
        if (!nv) return CQ_ERR_NOMEM;
        if (v->n) memcpy(nv, v->v, v->n * sizeof *nv);
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return CQ_OK;
}

cq_status cq_jp_enter(cq_jparser *p) {
    if (++p->nest > CQ_JP_MAX_NEST)
        return cq_jinja_err(CQ_ERR_PARSE, cq_jp_cur(p)->line, "template nested too deeply");
    return CQ_OK;
}

static cq_status parse_postfix(cq_jparser *p, cq_jnode **nd);
static cq_status parse_filter_expr(cq_jparser *p, cq_jnode **nd);
static cq_status parse_unary(cq_jparser *p, bool with_filter, cq_jnode **out);

/* ---- expressions ------------------------------------------------------------------ */
static cq_status parse_call_args(cq_jparser *p, cq_jnode *call) {
    cq_jnvec args = {0}, kwv = {0};
    cq_jsvec kwn = {0};
    uint32_t line = cq_jp_cur(p)->line;
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_LPAREN, "expected '('"));
    bool require_comma = false;
    while (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RPAREN)) {
        if (require_comma) {
            CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
            if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RPAREN)) break;
        }
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_MUL)) {
            if (call->b || call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            cq_jp_next(p);
            CQ_TRY(cq_jp_expression(p, true, &call->b));
        } else if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_POW)) {
            if (call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            cq_jp_next(p);
            CQ_TRY(cq_jp_expression(p, true, &call->c));
        } else if (cq_jp_cur(p)->kind == CQ_JT_NAME && cq_jp_is_op(cq_jp_look(p), CQ_JTO_ASSIGN)) {
            const cq_jstr *key = cq_jp_cur(p)->text;
            cq_jp_next(p);
            cq_jp_next(p);
            cq_jnode *v;
            CQ_TRY(cq_jp_expression(p, true, &v));
            CQ_TRY(cq_jp_svec_push(p, &kwn, key));
            CQ_TRY(cq_jp_nvec_push(p, &kwv, v));
        } else {
            if (kwn.n || call->b || call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            cq_jnode *v;
            CQ_TRY(cq_jp_expression(p, true, &v));
            CQ_TRY(cq_jp_nvec_push(p, &args, v));
        }
        require_comma = true;
    }
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_RPAREN, "expected ')'"));
    call->kids = args.v;
    call->nkids = args.n;
    call->kids2 = kwv.v;
    call->nkids2 = kwv.n;
    call->names = kwn.v;
    call->nnames = kwn.n;
    return CQ_OK;
}

static cq_status parse_dotted_name(cq_jparser *p, const cq_jstr **out) {
    if (cq_jp_cur(p)->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "expected a name");
    const cq_jstr *name = cq_jp_cur(p)->text;
    cq_jp_next(p);
    while (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_DOT)) {
        cq_jp_next(p);
        if (cq_jp_cur(p)->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "expected a name");
        const cq_jstr *dot = cq_jstr_new(p->a, ".", 1);
        if (!dot) return CQ_ERR_NOMEM;
        name = cq_jstr_cat(p->a, name, dot);
        if (!name) return CQ_ERR_NOMEM;
        name = cq_jstr_cat(p->a, name, cq_jp_cur(p)->text);
        if (!name) return CQ_ERR_NOMEM;
        cq_jp_next(p);
    }
    *out = name;
    return CQ_OK;
}

/* Filters after `|`; `nd` may be NULL (filter blocks, set blocks). */
cq_status cq_jp_filter(cq_jparser *p, cq_jnode **nd, bool start_inline) {
    while (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_PIPE) || start_inline) {
        if (!start_inline) cq_jp_next(p);
        uint32_t line = cq_jp_cur(p)->line;
        cq_jnode *f = cq_jp_node(p, CQ_JN_FILTER, line);
        if (!f) return CQ_ERR_NOMEM;
        CQ_TRY(parse_dotted_name(p, &f->name));
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_LPAREN)) CQ_TRY(parse_call_args(p, f));
        f->a = *nd;
        *nd = f;
        start_inline = false;
    }
    return CQ_OK;
}

static cq_status parse_test(cq_jparser *p, cq_jnode **nd) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jp_next(p); /* is */
    bool negated = false;
    if (cq_jp_is_name(cq_jp_cur(p), "not")) {
        cq_jp_next(p);
        negated = true;
    }
    cq_jnode *t = cq_jp_node(p, CQ_JN_TEST, line);
    if (!t) return CQ_ERR_NOMEM;
    CQ_TRY(parse_dotted_name(p, &t->name));
    const cq_jtok *c = cq_jp_cur(p);
    if (cq_jp_is_op(c, CQ_JTO_LPAREN)) {
        CQ_TRY(parse_call_args(p, t));
    } else if ((c->kind == CQ_JT_NAME || c->kind == CQ_JT_STRING || c->kind == CQ_JT_INT ||
                c->kind == CQ_JT_FLOAT || cq_jp_is_op(c, CQ_JTO_LBRACKET) || cq_jp_is_op(c, CQ_JTO_LBRACE)) &&
               !cq_jp_is_name(c, "else") && !cq_jp_is_name(c, "or") && !cq_jp_is_name(c, "and")) {
        if (cq_jp_is_name(c, "is"))
            return cq_jinja_err(CQ_ERR_PARSE, c->line, "You cannot chain multiple tests with is");
        cq_jnode *arg;
        CQ_TRY(cq_jp_primary(p, &arg));
        CQ_TRY(parse_postfix(p, &arg));
        cq_jnode **kids = cq_jarena_alloc(p->a, sizeof *kids);
        if (!kids) return CQ_ERR_NOMEM;
        kids[0] = arg;
        t->kids = kids;
        t->nkids = 1;
    }
    t->a = *nd;
    *nd = t;
    if (negated) {
        cq_jnode *no = cq_jp_node(p, CQ_JN_NOT, line);
        if (!no) return CQ_ERR_NOMEM;
        no->a = t;
        *nd = no;
    }
    return CQ_OK;
}

static cq_status parse_subscribed(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jnode *parts[3] = {NULL, NULL, NULL};
    if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COLON)) {
        cq_jp_next(p);
    } else {
        cq_jnode *e;
        CQ_TRY(cq_jp_expression(p, true, &e));
        if (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COLON)) {
            *out = e;
            return CQ_OK;
        }
        cq_jp_next(p);
        parts[0] = e;
    }
    if (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COLON) && !cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACKET) &&
        !cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COMMA))
        CQ_TRY(cq_jp_expression(p, true, &parts[1]));
    if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COLON)) {
        cq_jp_next(p);
        if (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACKET) && !cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COMMA))
            CQ_TRY(cq_jp_expression(p, true, &parts[2]));
    }
    cq_jnode *s = cq_jp_node(p, CQ_JN_SLICE, line);
    if (!s) return CQ_ERR_NOMEM;
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    *out = s;
    return CQ_OK;
}

static cq_status parse_subscript(cq_jparser *p, cq_jnode **nd) {
    const cq_jtok *t = cq_jp_cur(p);
    uint32_t line = t->line;
    if (cq_jp_is_op(t, CQ_JTO_DOT)) {
        cq_jp_next(p);
        const cq_jtok *at = cq_jp_cur(p);
        if (at->kind == CQ_JT_NAME) {
            cq_jnode *g = cq_jp_node(p, CQ_JN_GETATTR, line);
            if (!g) return CQ_ERR_NOMEM;
            g->a = *nd;
            g->name = at->text;
            cq_jp_next(p);
            *nd = g;
            return CQ_OK;
        }
        if (at->kind != CQ_JT_INT) return cq_jp_fail_at(p, "expected name or number");
        cq_jnode *k = cq_jp_node(p, CQ_JN_CONST, at->line);
        cq_jnode *g = cq_jp_node(p, CQ_JN_GETITEM, line);
        if (!k || !g) return CQ_ERR_NOMEM;
        k->cval = cq_jv_int(at->ival);
        cq_jp_next(p);
        g->a = *nd;
        g->b = k;
        *nd = g;
        return CQ_OK;
    }
    /* [ ... ] */
    cq_jp_next(p);
    cq_jnvec args = {0};
    while (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACKET)) {
        if (args.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        cq_jnode *a;
        CQ_TRY(parse_subscribed(p, &a));
        CQ_TRY(cq_jp_nvec_push(p, &args, a));
    }
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_RBRACKET, "expected ']'"));
    cq_jnode *g = cq_jp_node(p, CQ_JN_GETITEM, line);
    if (!g) return CQ_ERR_NOMEM;
    g->a = *nd;
    if (args.n == 1) {
        g->b = args.v[0];
    } else {
        cq_jnode *tu = cq_jp_node(p, CQ_JN_TUPLE, line);
        if (!tu) return CQ_ERR_NOMEM;
        tu->kids = args.v;
        tu->nkids = args.n;
        g->b = tu;
    }
    *nd = g;
    return CQ_OK;
}

static cq_status parse_postfix(cq_jparser *p, cq_jnode **nd) {
    for (;;) {
        const cq_jtok *t = cq_jp_cur(p);
        if (cq_jp_is_op(t, CQ_JTO_DOT) || cq_jp_is_op(t, CQ_JTO_LBRACKET)) {
            CQ_TRY(parse_subscript(p, nd));
        } else if (cq_jp_is_op(t, CQ_JTO_LPAREN)) {
            cq_jnode *c = cq_jp_node(p, CQ_JN_CALL, t->line);
            if (!c) return CQ_ERR_NOMEM;
            CQ_TRY(parse_call_args(p, c));
            c->a = *nd;
            *nd = c;
        } else {
            return CQ_OK;
        }
    }
}

static cq_status parse_filter_expr(cq_jparser *p, cq_jnode **nd) {
    for (;;) {
        const cq_jtok *t = cq_jp_cur(p);
        if (cq_jp_is_op(t, CQ_JTO_PIPE)) {
            CQ_TRY(cq_jp_filter(p, nd, false));
        } else if (cq_jp_is_name(t, "is")) {
            CQ_TRY(parse_test(p, nd));
        } else if (cq_jp_is_op(t, CQ_JTO_LPAREN)) {
            cq_jnode *c = cq_jp_node(p, CQ_JN_CALL, t->line);
            if (!c) return CQ_ERR_NOMEM;
            CQ_TRY(parse_call_args(p, c));
            c->a = *nd;
            *nd = c;
        } else {
            return CQ_OK;
        }
    }
}

static cq_status parse_list_lit(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jp_next(p);
    cq_jnvec items = {0};
    while (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACKET)) {
        if (items.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACKET)) break;
        cq_jnode *e;
        CQ_TRY(cq_jp_expression(p, true, &e));
        CQ_TRY(cq_jp_nvec_push(p, &items, e));
    }
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_RBRACKET, "expected ']'"));
    cq_jnode *l = cq_jp_node(p, CQ_JN_LIST, line);
    if (!l) return CQ_ERR_NOMEM;
    l->kids = items.v;
    l->nkids = items.n;
    *out = l;
    return CQ_OK;
}

static cq_status parse_dict_lit(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jp_next(p);
    cq_jnvec keys = {0}, vals = {0};
    while (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACE)) {
        if (keys.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RBRACE)) break;
        cq_jnode *k, *v;
        CQ_TRY(cq_jp_expression(p, true, &k));
        CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COLON, "expected ':'"));
        CQ_TRY(cq_jp_expression(p, true, &v));
        CQ_TRY(cq_jp_nvec_push(p, &keys, k));
        CQ_TRY(cq_jp_nvec_push(p, &vals, v));
    }
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_RBRACE, "expected '}'"));
    cq_jnode *d = cq_jp_node(p, CQ_JN_DICT, line);
    if (!d) return CQ_ERR_NOMEM;
    d->kids = keys.v;
    d->nkids = keys.n;
    d->kids2 = vals.v;
    d->nkids2 = vals.n;
    *out = d;
    return CQ_OK;
}

cq_status cq_jp_primary(cq_jparser *p, cq_jnode **out) {
    CQ_TRY(cq_jp_enter(p));
    const cq_jtok *t = cq_jp_cur(p);
    cq_jnode *nd = NULL;
    cq_status st = CQ_OK;
    if (t->kind == CQ_JT_NAME) {
        nd = cq_jp_node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        if (cq_jp_is_name(t, "true") || cq_jp_is_name(t, "True")) nd->cval = cq_jv_bool(true);
        else if (cq_jp_is_name(t, "false") || cq_jp_is_name(t, "False")) nd->cval = cq_jv_bool(false);
        else if (cq_jp_is_name(t, "none") || cq_jp_is_name(t, "None")) nd->cval = cq_jv_none();
        else {
            nd->kind = CQ_JN_NAME;
            nd->name = t->text;
        }
        cq_jp_next(p);
    } else if (t->kind == CQ_JT_STRING) {
        nd = cq_jp_node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        const cq_jstr *s = t->text;
        cq_jp_next(p);
        /* adjacent string literals concatenate */
        while (cq_jp_cur(p)->kind == CQ_JT_STRING) {
            s = cq_jstr_cat(p->a, s, cq_jp_cur(p)->text);
            if (!s) return CQ_ERR_NOMEM;
            cq_jp_next(p);
        }
        nd->cval = cq_jv_strv(s);
    } else if (t->kind == CQ_JT_INT || t->kind == CQ_JT_FLOAT) {
        nd = cq_jp_node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        nd->cval = t->kind == CQ_JT_INT ? cq_jv_int(t->ival) : cq_jv_float(t->fval);
        cq_jp_next(p);
    } else if (cq_jp_is_op(t, CQ_JTO_LPAREN)) {
        cq_jp_next(p);
        st = cq_jp_tuple(p, CQ_JP_TUPLE_FULL, NULL, true, &nd);
        if (st == CQ_OK) st = cq_jp_expect_op(p, CQ_JTO_RPAREN, "expected ')'");
    } else if (cq_jp_is_op(t, CQ_JTO_LBRACKET)) {
        st = parse_list_lit(p, &nd);
    } else if (cq_jp_is_op(t, CQ_JTO_LBRACE)) {
        st = parse_dict_lit(p, &nd);
    } else {
        st = cq_jinja_err(CQ_ERR_PARSE, t->line, "unexpected '%s'", cq_jp_tok_desc(t));
    }
    p->nest--;
    *out = nd;
    return st;
}

static cq_status parse_unary(cq_jparser *p, bool with_filter, cq_jnode **out) {
    CQ_TRY(cq_jp_enter(p));
    const cq_jtok *t = cq_jp_cur(p);
    cq_jnode *nd;
    if (cq_jp_is_op(t, CQ_JTO_SUB) || cq_jp_is_op(t, CQ_JTO_ADD)) {
        nd = cq_jp_node(p, cq_jp_is_op(t, CQ_JTO_SUB) ? CQ_JN_NEG : CQ_JN_POS, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        cq_jp_next(p);
        CQ_TRY(parse_unary(p, false, &nd->a));
    } else {
        CQ_TRY(cq_jp_primary(p, &nd));
    }
    CQ_TRY(parse_postfix(p, &nd));
    if (with_filter) CQ_TRY(parse_filter_expr(p, &nd));
    p->nest--;
    *out = nd;
    return CQ_OK;
}

static cq_status binop(cq_jparser *p, int op, uint32_t line, cq_jnode *l, cq_jnode *r, cq_jnode **out) {
    cq_jnode *b = cq_jp_node(p, CQ_JN_BINOP, line);
    if (!b) return CQ_ERR_NOMEM;
    b->op = (uint8_t)op;
    b->a = l;
    b->b = r;
    *out = b;
    return CQ_OK;
}

/* One level of left-associative binary operators: operand (op operand)*, each op one of `ops`
 * (Jinja's ** is left-associative too). */
typedef struct jbinop {
    int tok, op;
} jbinop;
typedef cq_status (*jlevel_fn)(cq_jparser *p, cq_jnode **out);

static cq_status parse_binary_level(cq_jparser *p, jlevel_fn operand, const jbinop *ops, int n_ops, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(operand(p, &l));
    for (;;) {
        const cq_jtok *t = cq_jp_cur(p);
        int k = 0;
        while (k < n_ops && !cq_jp_is_op(t, ops[k].tok)) k++;
        if (k == n_ops) break;
        uint32_t line = t->line;
        cq_jp_next(p);
        cq_jnode *r;
        CQ_TRY(operand(p, &r));
        CQ_TRY(binop(p, ops[k].op, line, l, r, &l));
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_unary_filtered(cq_jparser *p, cq_jnode **out) { return parse_unary(p, true, out); }

static cq_status parse_pow(cq_jparser *p, cq_jnode **out) {
    static const jbinop ops[] = {{CQ_JTO_POW, CQ_JOP_POW}};
    return parse_binary_level(p, parse_unary_filtered, ops, 1, out);
}

static cq_status parse_math2(cq_jparser *p, cq_jnode **out) {
    static const jbinop ops[] = {{CQ_JTO_MUL, CQ_JOP_MUL}, {CQ_JTO_DIV, CQ_JOP_DIV}, {CQ_JTO_FLOORDIV, CQ_JOP_FLOORDIV},
                                 {CQ_JTO_MOD, CQ_JOP_MOD}};
    return parse_binary_level(p, parse_pow, ops, 4, out);
}

static cq_status parse_concat(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jnode *first;
    CQ_TRY(parse_math2(p, &first));
    if (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_TILDE)) {
        *out = first;
        return CQ_OK;
    }
    cq_jnvec args = {0};
    CQ_TRY(cq_jp_nvec_push(p, &args, first));
    while (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_TILDE)) {
        cq_jp_next(p);
        cq_jnode *e;
        CQ_TRY(parse_math2(p, &e));
        CQ_TRY(cq_jp_nvec_push(p, &args, e));
    }
    cq_jnode *c = cq_jp_node(p, CQ_JN_CONCAT, line);
    if (!c) return CQ_ERR_NOMEM;
    c->kids = args.v;
    c->nkids = args.n;
    *out = c;
    return CQ_OK;
}

static cq_status parse_math1(cq_jparser *p, cq_jnode **out) {
    static const jbinop ops[] = {{CQ_JTO_ADD, CQ_JOP_ADD}, {CQ_JTO_SUB, CQ_JOP_SUB}};
    return parse_binary_level(p, parse_concat, ops, 2, out);
}

static cq_status parse_compare(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jnode *e;
    CQ_TRY(parse_math1(p, &e));
    cq_jnvec operands = {0};
    uint8_t ops[64];
    uint32_t nops = 0;
    for (;;) {
        const cq_jtok *t = cq_jp_cur(p);
        int op = -1;
        if (cq_jp_is_op(t, CQ_JTO_EQ)) op = CQ_JOP_EQ;
        else if (cq_jp_is_op(t, CQ_JTO_NE)) op = CQ_JOP_NE;
        else if (cq_jp_is_op(t, CQ_JTO_LT)) op = CQ_JOP_LT;
        else if (cq_jp_is_op(t, CQ_JTO_LTEQ)) op = CQ_JOP_LE;
        else if (cq_jp_is_op(t, CQ_JTO_GT)) op = CQ_JOP_GT;
        else if (cq_jp_is_op(t, CQ_JTO_GTEQ)) op = CQ_JOP_GE;
        if (op >= 0) {
            cq_jp_next(p);
        } else if (cq_jp_is_name(t, "in")) {
            op = CQ_JOP_IN;
            cq_jp_next(p);
        } else if (cq_jp_is_name(t, "not") && cq_jp_is_name(cq_jp_look(p), "in")) {
            op = CQ_JOP_NOTIN;
            cq_jp_next(p);
            cq_jp_next(p);
        } else {
            break;
        }
        if (nops == sizeof ops)
            return cq_jinja_err(CQ_ERR_PARSE, t->line, "comparison chain too long");
        cq_jnode *r;
        CQ_TRY(parse_math1(p, &r));
        ops[nops++] = (uint8_t)op;
        CQ_TRY(cq_jp_nvec_push(p, &operands, r));
    }
    if (!nops) {
        *out = e;
        return CQ_OK;
    }
    cq_jnode *c = cq_jp_node(p, CQ_JN_COMPARE, line);
    if (!c) return CQ_ERR_NOMEM;
    c->a = e;
    c->kids = operands.v;
    c->nkids = operands.n;
    c->ops = cq_jarena_alloc(p->a, nops);
    if (!c->ops) return CQ_ERR_NOMEM;
    memcpy(c->ops, ops, nops);
    *out = c;
    return CQ_OK;
}

static cq_status parse_not(cq_jparser *p, cq_jnode **out) {
    if (cq_jp_is_name(cq_jp_cur(p), "not")) {
        CQ_TRY(cq_jp_enter(p));
        cq_jnode *n = cq_jp_node(p, CQ_JN_NOT, cq_jp_cur(p)->line);
        if (!n) return CQ_ERR_NOMEM;
        cq_jp_next(p);
        CQ_TRY(parse_not(p, &n->a));
        p->nest--;
        *out = n;
        return CQ_OK;
    }
    return parse_compare(p, out);
}

/* `operand (word operand)*` for the keyword operators and / or, left-associative */
static cq_status parse_logic_level(cq_jparser *p, jlevel_fn operand, const char *word, int kind, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(operand(p, &l));
    while (cq_jp_is_name(cq_jp_cur(p), word)) {
        cq_jnode *n = cq_jp_node(p, kind, cq_jp_cur(p)->line);
        if (!n) return CQ_ERR_NOMEM;
        cq_jp_next(p);
        n->a = l;
        CQ_TRY(operand(p, &n->b));
        l = n;
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_and(cq_jparser *p, cq_jnode **out) { return parse_logic_level(p, parse_not, "and", CQ_JN_AND, out); }

static cq_status parse_or(cq_jparser *p, cq_jnode **out) { return parse_logic_level(p, parse_and, "or", CQ_JN_OR, out); }

static cq_status parse_condexpr(cq_jparser *p, cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jnode *e1;
    CQ_TRY(parse_or(p, &e1));
    while (cq_jp_is_name(cq_jp_cur(p), "if")) {
        cq_jp_next(p);
        cq_jnode *c = cq_jp_node(p, CQ_JN_CONDEXPR, line);
        if (!c) return CQ_ERR_NOMEM;
        CQ_TRY(parse_or(p, &c->a));
        if (cq_jp_is_name(cq_jp_cur(p), "else")) {
            cq_jp_next(p);
            CQ_TRY(cq_jp_enter(p));
            CQ_TRY(parse_condexpr(p, &c->c));
            p->nest--;
        }
        c->b = e1;
        e1 = c;
        line = cq_jp_cur(p)->line;
    }
    *out = e1;
    return CQ_OK;
}

cq_status cq_jp_expression(cq_jparser *p, bool with_condexpr, cq_jnode **out) {
    CQ_TRY(cq_jp_enter(p));
    cq_status s = with_condexpr ? parse_condexpr(p, out) : parse_or(p, out);
    p->nest--;
    return s;
}

static bool is_tuple_end(cq_jparser *p, const char *const *extra_end) {
    const cq_jtok *t = cq_jp_cur(p);
    if (t->kind == CQ_JT_VAR_END || t->kind == CQ_JT_BLOCK_END || cq_jp_is_op(t, CQ_JTO_RPAREN))
        return true;
    if (extra_end)
        for (; *extra_end; extra_end++)
            if (cq_jp_is_name(t, *extra_end)) return true;
    return false;
}

cq_status cq_jp_tuple(cq_jparser *p, int mode, const char *const *extra_end, bool explicit_paren,
                             cq_jnode **out) {
    uint32_t line = cq_jp_cur(p)->line;
    cq_jnvec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (is_tuple_end(p, extra_end)) break;
        cq_jnode *e;
        if (mode == CQ_JP_TUPLE_SIMPLE) CQ_TRY(cq_jp_primary(p, &e));
        else CQ_TRY(cq_jp_expression(p, mode == CQ_JP_TUPLE_FULL, &e));
        CQ_TRY(cq_jp_nvec_push(p, &args, e));
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) {
            *out = args.v[0];
            return CQ_OK;
        }
        if (!explicit_paren) return cq_jp_fail_at(p, "expected an expression");
    }
    cq_jnode *t = cq_jp_node(p, CQ_JN_TUPLE, line);
    if (!t) return CQ_ERR_NOMEM;
    t->kids = args.v;
    t->nkids = args.n;
    *out = t;
    return CQ_OK;
}

