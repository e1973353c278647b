/*
 * jinja_parse.c — builds the syntax tree from tokens with jinja2's grammar
 * and precedence (lowest first): conditional `a if c else b`, or, and, not,
 * comparisons (chained, in, not in), + -, ~, * / // %, **, unary - +, then
 * postfix access (. [] calls) with filters (|) and tests (is) binding to the
 * operand on their left.
 *
 * Statements: if/elif/else, for (target unpacking, `if` filter, else), set
 * (names, tuples, namespace attributes, block form with filters), macro,
 * filter blocks, with, print, break/continue, and transformers' generation
 * block. Tags jinja2 has but this engine lacks (include, extends, import,
 * call blocks, ...) and unknown tags fail with CQ_ERR_UNSUPPORTED; malformed
 * syntax with CQ_ERR_PARSE. Nesting depth is bounded so hostile input cannot
 * exhaust the stack.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

#define MAX_NEST 96

typedef struct parser {
    cq_jarena *a;
    const cq_jtok *t;
    size_t n, i;
    int nest;
    int loop_depth;
} parser;

static const cq_jtok *cur(parser *p) { return &p->t[p->i < p->n ? p->i : p->n - 1]; }
static const cq_jtok *look(parser *p) { return &p->t[p->i + 1 < p->n ? p->i + 1 : p->n - 1]; }
static void next(parser *p) {
    if (p->i < p->n - 1) p->i++;
}

static bool is_op(const cq_jtok *t, int op) { return t->kind == CQ_JT_OP && t->op == op; }
static bool is_name(const cq_jtok *t, const char *s) {
    return t->kind == CQ_JT_NAME && cq_jstr_eq(t->text, s);
}

static const char *tok_desc(const cq_jtok *t) {
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

static cq_status fail_at(parser *p, const char *what) {
    const cq_jtok *t = cur(p);
    return cq_jinja_err(CQ_ERR_PARSE, t->line, "%s, got '%s'", what, tok_desc(t));
}

static cq_status expect_op(parser *p, int op, const char *what) {
    if (!is_op(cur(p), op)) return fail_at(p, what);
    next(p);
    return CQ_OK;
}

static cq_status expect_kind(parser *p, int kind, const char *what) {
    if (cur(p)->kind != kind) return fail_at(p, what);
    next(p);
    return CQ_OK;
}

static cq_jnode *node(parser *p, int kind, uint32_t line) {
    cq_jnode *nd = cq_jarena_alloc(p->a, sizeof *nd);
    if (nd) {
        nd->kind = (uint8_t)kind;
        nd->line = line;
    }
    return nd;
}

/* A growable array of node pointers in the arena. */
typedef struct nvec {
    cq_jnode **v;
    uint32_t n, cap;
} nvec;

static cq_status nvec_push(parser *p, nvec *v, cq_jnode *x) {
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

typedef struct svec {
    const cq_jstr **v;
    uint32_t n, cap;
} svec;

static cq_status svec_push(parser *p, svec *v, const cq_jstr *x) {
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

static cq_status enter(parser *p) {
    if (++p->nest > MAX_NEST)
        return cq_jinja_err(CQ_ERR_PARSE, cur(p)->line, "template nested too deeply");
    return CQ_OK;
}

static cq_status parse_expression(parser *p, bool with_condexpr, cq_jnode **out);
static cq_status parse_tuple(parser *p, int mode, const char *const *extra_end, bool explicit_paren,
                             cq_jnode **out);
static cq_status parse_primary(parser *p, cq_jnode **out);
static cq_status parse_postfix(parser *p, cq_jnode **nd);
static cq_status parse_filter_expr(parser *p, cq_jnode **nd);
static cq_status parse_unary(parser *p, bool with_filter, cq_jnode **out);
static cq_status subparse(parser *p, const char *const *end_tags, nvec *body);

enum { TUPLE_FULL, TUPLE_NOCOND, TUPLE_SIMPLE };

/* ---- expressions ------------------------------------------------------------------ */
static cq_status parse_call_args(parser *p, cq_jnode *call) {
    nvec args = {0}, kwv = {0};
    svec kwn = {0};
    uint32_t line = cur(p)->line;
    CQ_TRY(expect_op(p, CQ_JTO_LPAREN, "expected '('"));
    bool require_comma = false;
    while (!is_op(cur(p), CQ_JTO_RPAREN)) {
        if (require_comma) {
            CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
            if (is_op(cur(p), CQ_JTO_RPAREN)) break;
        }
        if (is_op(cur(p), CQ_JTO_MUL)) {
            if (call->b || call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            next(p);
            CQ_TRY(parse_expression(p, true, &call->b));
        } else if (is_op(cur(p), CQ_JTO_POW)) {
            if (call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            next(p);
            CQ_TRY(parse_expression(p, true, &call->c));
        } else if (cur(p)->kind == CQ_JT_NAME && is_op(look(p), CQ_JTO_ASSIGN)) {
            const cq_jstr *key = cur(p)->text;
            next(p);
            next(p);
            cq_jnode *v;
            CQ_TRY(parse_expression(p, true, &v));
            CQ_TRY(svec_push(p, &kwn, key));
            CQ_TRY(nvec_push(p, &kwv, v));
        } else {
            if (kwn.n || call->b || call->c)
                return cq_jinja_err(CQ_ERR_PARSE, line, "invalid syntax for function call expression");
            cq_jnode *v;
            CQ_TRY(parse_expression(p, true, &v));
            CQ_TRY(nvec_push(p, &args, v));
        }
        require_comma = true;
    }
    CQ_TRY(expect_op(p, CQ_JTO_RPAREN, "expected ')'"));
    call->kids = args.v;
    call->nkids = args.n;
    call->kids2 = kwv.v;
    call->nkids2 = kwv.n;
    call->names = kwn.v;
    call->nnames = kwn.n;
    return CQ_OK;
}

static cq_status parse_dotted_name(parser *p, const cq_jstr **out) {
    if (cur(p)->kind != CQ_JT_NAME) return fail_at(p, "expected a name");
    const cq_jstr *name = cur(p)->text;
    next(p);
    while (is_op(cur(p), CQ_JTO_DOT)) {
        next(p);
        if (cur(p)->kind != CQ_JT_NAME) return fail_at(p, "expected a name");
        const cq_jstr *dot = cq_jstr_new(p->a, ".", 1);
        if (!dot) return CQ_ERR_NOMEM;
        name = cq_jstr_cat(p->a, name, dot);
        if (!name) return CQ_ERR_NOMEM;
        name = cq_jstr_cat(p->a, name, cur(p)->text);
        if (!name) return CQ_ERR_NOMEM;
        next(p);
    }
    *out = name;
    return CQ_OK;
}

/* Filters after `|`; `nd` may be NULL (filter blocks, set blocks). */
static cq_status parse_filter(parser *p, cq_jnode **nd, bool start_inline) {
    while (is_op(cur(p), CQ_JTO_PIPE) || start_inline) {
        if (!start_inline) next(p);
        uint32_t line = cur(p)->line;
        cq_jnode *f = node(p, CQ_JN_FILTER, line);
        if (!f) return CQ_ERR_NOMEM;
        CQ_TRY(parse_dotted_name(p, &f->name));
        if (is_op(cur(p), CQ_JTO_LPAREN)) CQ_TRY(parse_call_args(p, f));
        f->a = *nd;
        *nd = f;
        start_inline = false;
    }
    return CQ_OK;
}

static cq_status parse_test(parser *p, cq_jnode **nd) {
    uint32_t line = cur(p)->line;
    next(p); /* is */
    bool negated = false;
    if (is_name(cur(p), "not")) {
        next(p);
        negated = true;
    }
    cq_jnode *t = node(p, CQ_JN_TEST, line);
    if (!t) return CQ_ERR_NOMEM;
    CQ_TRY(parse_dotted_name(p, &t->name));
    const cq_jtok *c = cur(p);
    if (is_op(c, CQ_JTO_LPAREN)) {
        CQ_TRY(parse_call_args(p, t));
    } else if ((c->kind == CQ_JT_NAME || c->kind == CQ_JT_STRING || c->kind == CQ_JT_INT ||
                c->kind == CQ_JT_FLOAT || is_op(c, CQ_JTO_LBRACKET) || is_op(c, CQ_JTO_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            return cq_jinja_err(CQ_ERR_PARSE, c->line, "You cannot chain multiple tests with is");
        cq_jnode *arg;
        CQ_TRY(parse_primary(p, &arg));
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
        cq_jnode *no = node(p, CQ_JN_NOT, line);
        if (!no) return CQ_ERR_NOMEM;
        no->a = t;
        *nd = no;
    }
    return CQ_OK;
}

static cq_status parse_subscribed(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    cq_jnode *parts[3] = {NULL, NULL, NULL};
    if (is_op(cur(p), CQ_JTO_COLON)) {
        next(p);
    } else {
        cq_jnode *e;
        CQ_TRY(parse_expression(p, true, &e));
        if (!is_op(cur(p), CQ_JTO_COLON)) {
            *out = e;
            return CQ_OK;
        }
        next(p);
        parts[0] = e;
    }
    if (!is_op(cur(p), CQ_JTO_COLON) && !is_op(cur(p), CQ_JTO_RBRACKET) &&
        !is_op(cur(p), CQ_JTO_COMMA))
        CQ_TRY(parse_expression(p, true, &parts[1]));
    if (is_op(cur(p), CQ_JTO_COLON)) {
        next(p);
        if (!is_op(cur(p), CQ_JTO_RBRACKET) && !is_op(cur(p), CQ_JTO_COMMA))
            CQ_TRY(parse_expression(p, true, &parts[2]));
    }
    cq_jnode *s = node(p, CQ_JN_SLICE, line);
    if (!s) return CQ_ERR_NOMEM;
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    *out = s;
    return CQ_OK;
}

static cq_status parse_subscript(parser *p, cq_jnode **nd) {
    const cq_jtok *t = cur(p);
    uint32_t line = t->line;
    if (is_op(t, CQ_JTO_DOT)) {
        next(p);
        const cq_jtok *at = cur(p);
        if (at->kind == CQ_JT_NAME) {
            cq_jnode *g = node(p, CQ_JN_GETATTR, line);
            if (!g) return CQ_ERR_NOMEM;
            g->a = *nd;
            g->name = at->text;
            next(p);
            *nd = g;
            return CQ_OK;
        }
        if (at->kind != CQ_JT_INT) return fail_at(p, "expected name or number");
        cq_jnode *k = node(p, CQ_JN_CONST, at->line);
        cq_jnode *g = node(p, CQ_JN_GETITEM, line);
        if (!k || !g) return CQ_ERR_NOMEM;
        k->cval = cq_jv_int(at->ival);
        next(p);
        g->a = *nd;
        g->b = k;
        *nd = g;
        return CQ_OK;
    }
    /* [ ... ] */
    next(p);
    nvec args = {0};
    while (!is_op(cur(p), CQ_JTO_RBRACKET)) {
        if (args.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        cq_jnode *a;
        CQ_TRY(parse_subscribed(p, &a));
        CQ_TRY(nvec_push(p, &args, a));
    }
    CQ_TRY(expect_op(p, CQ_JTO_RBRACKET, "expected ']'"));
    cq_jnode *g = node(p, CQ_JN_GETITEM, line);
    if (!g) return CQ_ERR_NOMEM;
    g->a = *nd;
    if (args.n == 1) {
        g->b = args.v[0];
    } else {
        cq_jnode *tu = node(p, CQ_JN_TUPLE, line);
        if (!tu) return CQ_ERR_NOMEM;
        tu->kids = args.v;
        tu->nkids = args.n;
        g->b = tu;
    }
    *nd = g;
    return CQ_OK;
}

static cq_status parse_postfix(parser *p, cq_jnode **nd) {
    for (;;) {
        const cq_jtok *t = cur(p);
        if (is_op(t, CQ_JTO_DOT) || is_op(t, CQ_JTO_LBRACKET)) {
            CQ_TRY(parse_subscript(p, nd));
        } else if (is_op(t, CQ_JTO_LPAREN)) {
            cq_jnode *c = node(p, CQ_JN_CALL, t->line);
            if (!c) return CQ_ERR_NOMEM;
            CQ_TRY(parse_call_args(p, c));
            c->a = *nd;
            *nd = c;
        } else {
            return CQ_OK;
        }
    }
}

static cq_status parse_filter_expr(parser *p, cq_jnode **nd) {
    for (;;) {
        const cq_jtok *t = cur(p);
        if (is_op(t, CQ_JTO_PIPE)) {
            CQ_TRY(parse_filter(p, nd, false));
        } else if (is_name(t, "is")) {
            CQ_TRY(parse_test(p, nd));
        } else if (is_op(t, CQ_JTO_LPAREN)) {
            cq_jnode *c = node(p, CQ_JN_CALL, t->line);
            if (!c) return CQ_ERR_NOMEM;
            CQ_TRY(parse_call_args(p, c));
            c->a = *nd;
            *nd = c;
        } else {
            return CQ_OK;
        }
    }
}

static cq_status parse_list_lit(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    next(p);
    nvec items = {0};
    while (!is_op(cur(p), CQ_JTO_RBRACKET)) {
        if (items.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (is_op(cur(p), CQ_JTO_RBRACKET)) break;
        cq_jnode *e;
        CQ_TRY(parse_expression(p, true, &e));
        CQ_TRY(nvec_push(p, &items, e));
    }
    CQ_TRY(expect_op(p, CQ_JTO_RBRACKET, "expected ']'"));
    cq_jnode *l = node(p, CQ_JN_LIST, line);
    if (!l) return CQ_ERR_NOMEM;
    l->kids = items.v;
    l->nkids = items.n;
    *out = l;
    return CQ_OK;
}

static cq_status parse_dict_lit(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    next(p);
    nvec keys = {0}, vals = {0};
    while (!is_op(cur(p), CQ_JTO_RBRACE)) {
        if (keys.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (is_op(cur(p), CQ_JTO_RBRACE)) break;
        cq_jnode *k, *v;
        CQ_TRY(parse_expression(p, true, &k));
        CQ_TRY(expect_op(p, CQ_JTO_COLON, "expected ':'"));
        CQ_TRY(parse_expression(p, true, &v));
        CQ_TRY(nvec_push(p, &keys, k));
        CQ_TRY(nvec_push(p, &vals, v));
    }
    CQ_TRY(expect_op(p, CQ_JTO_RBRACE, "expected '}'"));
    cq_jnode *d = node(p, CQ_JN_DICT, line);
    if (!d) return CQ_ERR_NOMEM;
    d->kids = keys.v;
    d->nkids = keys.n;
    d->kids2 = vals.v;
    d->nkids2 = vals.n;
    *out = d;
    return CQ_OK;
}

static cq_status parse_primary(parser *p, cq_jnode **out) {
    CQ_TRY(enter(p));
    const cq_jtok *t = cur(p);
    cq_jnode *nd = NULL;
    cq_status st = CQ_OK;
    if (t->kind == CQ_JT_NAME) {
        nd = node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        if (is_name(t, "true") || is_name(t, "True")) nd->cval = cq_jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) nd->cval = cq_jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) nd->cval = cq_jv_none();
        else {
            nd->kind = CQ_JN_NAME;
            nd->name = t->text;
        }
        next(p);
    } else if (t->kind == CQ_JT_STRING) {
        nd = node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        const cq_jstr *s = t->text;
        next(p);
        /* adjacent string literals concatenate */
        while (cur(p)->kind == CQ_JT_STRING) {
            s = cq_jstr_cat(p->a, s, cur(p)->text);
            if (!s) return CQ_ERR_NOMEM;
            next(p);
        }
        nd->cval = cq_jv_strv(s);
    } else if (t->kind == CQ_JT_INT || t->kind == CQ_JT_FLOAT) {
        nd = node(p, CQ_JN_CONST, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        nd->cval = t->kind == CQ_JT_INT ? cq_jv_int(t->ival) : cq_jv_float(t->fval);
        next(p);
    } else if (is_op(t, CQ_JTO_LPAREN)) {
        next(p);
        st = parse_tuple(p, TUPLE_FULL, NULL, true, &nd);
        if (st == CQ_OK) st = expect_op(p, CQ_JTO_RPAREN, "expected ')'");
    } else if (is_op(t, CQ_JTO_LBRACKET)) {
        st = parse_list_lit(p, &nd);
    } else if (is_op(t, CQ_JTO_LBRACE)) {
        st = parse_dict_lit(p, &nd);
    } else {
        st = cq_jinja_err(CQ_ERR_PARSE, t->line, "unexpected '%s'", tok_desc(t));
    }
    p->nest--;
    *out = nd;
    return st;
}

static cq_status parse_unary(parser *p, bool with_filter, cq_jnode **out) {
    CQ_TRY(enter(p));
    const cq_jtok *t = cur(p);
    cq_jnode *nd;
    if (is_op(t, CQ_JTO_SUB) || is_op(t, CQ_JTO_ADD)) {
        nd = node(p, is_op(t, CQ_JTO_SUB) ? CQ_JN_NEG : CQ_JN_POS, t->line);
        if (!nd) return CQ_ERR_NOMEM;
        next(p);
        CQ_TRY(parse_unary(p, false, &nd->a));
    } else {
        CQ_TRY(parse_primary(p, &nd));
    }
    CQ_TRY(parse_postfix(p, &nd));
    if (with_filter) CQ_TRY(parse_filter_expr(p, &nd));
    p->nest--;
    *out = nd;
    return CQ_OK;
}

static cq_status binop(parser *p, int op, uint32_t line, cq_jnode *l, cq_jnode *r, cq_jnode **out) {
    cq_jnode *b = node(p, CQ_JN_BINOP, line);
    if (!b) return CQ_ERR_NOMEM;
    b->op = (uint8_t)op;
    b->a = l;
    b->b = r;
    *out = b;
    return CQ_OK;
}

static cq_status parse_pow(parser *p, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(parse_unary(p, true, &l));
    while (is_op(cur(p), CQ_JTO_POW)) {
        uint32_t line = cur(p)->line;
        next(p);
        cq_jnode *r;
        CQ_TRY(parse_unary(p, true, &r));
        CQ_TRY(binop(p, CQ_JOP_POW, line, l, r, &l));
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_math2(parser *p, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(parse_pow(p, &l));
    for (;;) {
        const cq_jtok *t = cur(p);
        int op;
        if (is_op(t, CQ_JTO_MUL)) op = CQ_JOP_MUL;
        else if (is_op(t, CQ_JTO_DIV)) op = CQ_JOP_DIV;
        else if (is_op(t, CQ_JTO_FLOORDIV)) op = CQ_JOP_FLOORDIV;
        else if (is_op(t, CQ_JTO_MOD)) op = CQ_JOP_MOD;
        else break;
        uint32_t line = t->line;
        next(p);
        cq_jnode *r;
        CQ_TRY(parse_pow(p, &r));
        CQ_TRY(binop(p, op, line, l, r, &l));
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_concat(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    cq_jnode *first;
    CQ_TRY(parse_math2(p, &first));
    if (!is_op(cur(p), CQ_JTO_TILDE)) {
        *out = first;
        return CQ_OK;
    }
    nvec args = {0};
    CQ_TRY(nvec_push(p, &args, first));
    while (is_op(cur(p), CQ_JTO_TILDE)) {
        next(p);
        cq_jnode *e;
        CQ_TRY(parse_math2(p, &e));
        CQ_TRY(nvec_push(p, &args, e));
    }
    cq_jnode *c = node(p, CQ_JN_CONCAT, line);
    if (!c) return CQ_ERR_NOMEM;
    c->kids = args.v;
    c->nkids = args.n;
    *out = c;
    return CQ_OK;
}

static cq_status parse_math1(parser *p, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(parse_concat(p, &l));
    for (;;) {
        const cq_jtok *t = cur(p);
        int op;
        if (is_op(t, CQ_JTO_ADD)) op = CQ_JOP_ADD;
        else if (is_op(t, CQ_JTO_SUB)) op = CQ_JOP_SUB;
        else break;
        uint32_t line = t->line;
        next(p);
        cq_jnode *r;
        CQ_TRY(parse_concat(p, &r));
        CQ_TRY(binop(p, op, line, l, r, &l));
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_compare(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    cq_jnode *e;
    CQ_TRY(parse_math1(p, &e));
    nvec operands = {0};
    uint8_t ops[64];
    uint32_t nops = 0;
    for (;;) {
        const cq_jtok *t = cur(p);
        int op = -1;
        if (is_op(t, CQ_JTO_EQ)) op = CQ_JOP_EQ;
        else if (is_op(t, CQ_JTO_NE)) op = CQ_JOP_NE;
        else if (is_op(t, CQ_JTO_LT)) op = CQ_JOP_LT;
        else if (is_op(t, CQ_JTO_LTEQ)) op = CQ_JOP_LE;
        else if (is_op(t, CQ_JTO_GT)) op = CQ_JOP_GT;
        else if (is_op(t, CQ_JTO_GTEQ)) op = CQ_JOP_GE;
        if (op >= 0) {
            next(p);
        } else if (is_name(t, "in")) {
            op = CQ_JOP_IN;
            next(p);
        } else if (is_name(t, "not") && is_name(look(p), "in")) {
            op = CQ_JOP_NOTIN;
            next(p);
            next(p);
        } else {
            break;
        }
        if (nops == sizeof ops)
            return cq_jinja_err(CQ_ERR_PARSE, t->line, "comparison chain too long");
        cq_jnode *r;
        CQ_TRY(parse_math1(p, &r));
        ops[nops++] = (uint8_t)op;
        CQ_TRY(nvec_push(p, &operands, r));
    }
    if (!nops) {
        *out = e;
        return CQ_OK;
    }
    cq_jnode *c = node(p, CQ_JN_COMPARE, line);
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

static cq_status parse_not(parser *p, cq_jnode **out) {
    if (is_name(cur(p), "not")) {
        CQ_TRY(enter(p));
        cq_jnode *n = node(p, CQ_JN_NOT, cur(p)->line);
        if (!n) return CQ_ERR_NOMEM;
        next(p);
        CQ_TRY(parse_not(p, &n->a));
        p->nest--;
        *out = n;
        return CQ_OK;
    }
    return parse_compare(p, out);
}

static cq_status parse_and(parser *p, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(parse_not(p, &l));
    while (is_name(cur(p), "and")) {
        cq_jnode *n = node(p, CQ_JN_AND, cur(p)->line);
        if (!n) return CQ_ERR_NOMEM;
        next(p);
        n->a = l;
        CQ_TRY(parse_not(p, &n->b));
        l = n;
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_or(parser *p, cq_jnode **out) {
    cq_jnode *l;
    CQ_TRY(parse_and(p, &l));
    while (is_name(cur(p), "or")) {
        cq_jnode *n = node(p, CQ_JN_OR, cur(p)->line);
        if (!n) return CQ_ERR_NOMEM;
        next(p);
        n->a = l;
        CQ_TRY(parse_and(p, &n->b));
        l = n;
    }
    *out = l;
    return CQ_OK;
}

static cq_status parse_condexpr(parser *p, cq_jnode **out) {
    uint32_t line = cur(p)->line;
    cq_jnode *e1;
    CQ_TRY(parse_or(p, &e1));
    while (is_name(cur(p), "if")) {
        next(p);
        cq_jnode *c = node(p, CQ_JN_CONDEXPR, line);
        if (!c) return CQ_ERR_NOMEM;
        CQ_TRY(parse_or(p, &c->a));
        if (is_name(cur(p), "else")) {
            next(p);
            CQ_TRY(enter(p));
            CQ_TRY(parse_condexpr(p, &c->c));
            p->nest--;
        }
        c->b = e1;
        e1 = c;
        line = cur(p)->line;
    }
    *out = e1;
    return CQ_OK;
}

static cq_status parse_expression(parser *p, bool with_condexpr, cq_jnode **out) {
    CQ_TRY(enter(p));
    cq_status s = with_condexpr ? parse_condexpr(p, out) : parse_or(p, out);
    p->nest--;
    return s;
}

static bool is_tuple_end(parser *p, const char *const *extra_end) {
    const cq_jtok *t = cur(p);
    if (t->kind == CQ_JT_VAR_END || t->kind == CQ_JT_BLOCK_END || is_op(t, CQ_JTO_RPAREN))
        return true;
    if (extra_end)
        for (; *extra_end; extra_end++)
            if (is_name(t, *extra_end)) return true;
    return false;
}

static cq_status parse_tuple(parser *p, int mode, const char *const *extra_end, bool explicit_paren,
                             cq_jnode **out) {
    uint32_t line = cur(p)->line;
    nvec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (is_tuple_end(p, extra_end)) break;
        cq_jnode *e;
        if (mode == TUPLE_SIMPLE) CQ_TRY(parse_primary(p, &e));
        else CQ_TRY(parse_expression(p, mode == TUPLE_FULL, &e));
        CQ_TRY(nvec_push(p, &args, e));
        if (is_op(cur(p), CQ_JTO_COMMA)) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (args.n) {
            *out = args.v[0];
            return CQ_OK;
        }
        if (!explicit_paren) return fail_at(p, "expected an expression");
    }
    cq_jnode *t = node(p, CQ_JN_TUPLE, line);
    if (!t) return CQ_ERR_NOMEM;
    t->kids = args.v;
    t->nkids = args.n;
    *out = t;
    return CQ_OK;
}

/* ---- statements --------------------------------------------------------------------- */
static bool can_assign(const cq_jnode *t) {
    if (t->kind == CQ_JN_NAME || t->kind == CQ_JN_NSREF) return true;
    if (t->kind != CQ_JN_TUPLE) return false;
    for (uint32_t i = 0; i < t->nkids; i++)
        if (!can_assign(t->kids[i]) || t->kids[i]->kind == CQ_JN_NSREF) return false;
    return true;
}

static cq_status parse_assign_target(parser *p, bool with_namespace, const char *const *extra_end,
                                     cq_jnode **out) {
    const cq_jtok *t = cur(p);
    if (with_namespace && t->kind == CQ_JT_NAME && is_op(look(p), CQ_JTO_DOT)) {
        cq_jnode *ns = node(p, CQ_JN_NSREF, t->line);
        if (!ns) return CQ_ERR_NOMEM;
        ns->name = t->text;
        next(p);
        next(p);
        if (cur(p)->kind != CQ_JT_NAME) return fail_at(p, "expected a name");
        ns->name2 = cur(p)->text;
        next(p);
        *out = ns;
        return CQ_OK;
    }
    CQ_TRY(parse_tuple(p, TUPLE_SIMPLE, extra_end, false, out));
    if (!can_assign(*out))
        return cq_jinja_err(CQ_ERR_PARSE, t->line, "can't assign to this expression");
    return CQ_OK;
}

static cq_status parse_body(parser *p, const char *const *end_tags, nvec *body) {
    if (is_op(cur(p), CQ_JTO_COLON)) next(p);
    CQ_TRY(expect_kind(p, CQ_JT_BLOCK_END, "expected end of statement block"));
    CQ_TRY(subparse(p, end_tags, body));
    if (cur(p)->kind == CQ_JT_EOF) {
        char want[128];
        size_t o = 0;
        for (const char *const *e = end_tags; *e && o < sizeof want - 24; e++)
            o += (size_t)snprintf(want + o, sizeof want - o, "%s'%s'", o ? " or " : "", *e);
        return cq_jinja_err(CQ_ERR_PARSE, cur(p)->line,
                            "unexpected end of template, looking for %s", want);
    }
    return CQ_OK;
}

static cq_status parse_for(parser *p, cq_jnode *nd) {
    static const char *const in_end[] = {"in", NULL};
    static const char *const rec_end[] = {"recursive", NULL};
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    CQ_TRY(parse_assign_target(p, false, in_end, &nd->a));
    if (!is_name(cur(p), "in")) return fail_at(p, "expected 'in'");
    next(p);
    CQ_TRY(parse_tuple(p, TUPLE_NOCOND, rec_end, false, &nd->b));
    if (is_name(cur(p), "if")) {
        next(p);
        CQ_TRY(parse_expression(p, true, &nd->c));
    }
    if (is_name(cur(p), "recursive"))
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, cur(p)->line, "recursive for loops are not supported");
    nvec body = {0}, els = {0};
    p->loop_depth++;
    CQ_TRY(parse_body(p, body_end, &body));
    p->loop_depth--;
    bool has_else = is_name(cur(p), "else");
    next(p);
    if (has_else) {
        CQ_TRY(parse_body(p, else_end, &els));
        next(p);
    }
    nd->kids = body.v;
    nd->nkids = body.n;
    nd->kids2 = els.v;
    nd->nkids2 = els.n;
    return CQ_OK;
}

static cq_status parse_if(parser *p, cq_jnode *nd) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    cq_jnode *cur_if = nd;
    for (;;) {
        CQ_TRY(parse_tuple(p, TUPLE_NOCOND, NULL, false, &cur_if->a));
        nvec body = {0};
        CQ_TRY(parse_body(p, ends, &body));
        cur_if->kids = body.v;
        cur_if->nkids = body.n;
        const cq_jtok *t = cur(p);
        next(p);
        if (is_name(t, "elif")) {
            cq_jnode *e = node(p, CQ_JN_IF, cur(p)->line);
            if (!e) return CQ_ERR_NOMEM;
            cq_jnode **k = cq_jarena_alloc(p->a, sizeof *k);
            if (!k) return CQ_ERR_NOMEM;
            k[0] = e;
            cur_if->kids2 = k;
            cur_if->nkids2 = 1;
            cur_if = e;
            continue;
        }
        if (is_name(t, "else")) {
            nvec els = {0};
            CQ_TRY(parse_body(p, endif, &els));
            next(p);
            cur_if->kids2 = els.v;
            cur_if->nkids2 = els.n;
        }
        return CQ_OK;
    }
}

static cq_status parse_set(parser *p, cq_jnode *nd) {
    static const char *const endset[] = {"endset", NULL};
    CQ_TRY(parse_assign_target(p, true, NULL, &nd->a));
    if (is_op(cur(p), CQ_JTO_ASSIGN)) {
        next(p);
        return parse_tuple(p, TUPLE_FULL, NULL, false, &nd->b);
    }
    nd->kind = CQ_JN_SETBLOCK;
    cq_jnode *chain = NULL;
    CQ_TRY(parse_filter(p, &chain, false));
    nd->c = chain;
    nvec body = {0};
    CQ_TRY(parse_body(p, endset, &body));
    next(p);
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_signature(parser *p, cq_jnode *nd) {
    CQ_TRY(expect_op(p, CQ_JTO_LPAREN, "expected '('"));
    svec params = {0};
    nvec defaults = {0};
    while (!is_op(cur(p), CQ_JTO_RPAREN)) {
        if (params.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cur(p)->kind != CQ_JT_NAME) return fail_at(p, "expected a parameter name");
        CQ_TRY(svec_push(p, &params, cur(p)->text));
        next(p);
        if (is_op(cur(p), CQ_JTO_ASSIGN)) {
            next(p);
            cq_jnode *d;
            CQ_TRY(parse_expression(p, true, &d));
            CQ_TRY(nvec_push(p, &defaults, d));
        } else if (defaults.n) {
            return cq_jinja_err(CQ_ERR_PARSE, cur(p)->line,
                                "non-default argument follows default argument");
        }
    }
    next(p);
    nd->names = params.v;
    nd->nnames = params.n;
    nd->kids2 = defaults.v;
    nd->nkids2 = defaults.n;
    return CQ_OK;
}

/* Body of a macro or call block, where break/continue cannot reach an
 * enclosing loop. */
static cq_status parse_macro_body(parser *p, cq_jnode *nd, const char *const *end) {
    int saved = p->loop_depth;
    p->loop_depth = 0;
    nvec body = {0};
    CQ_TRY(parse_body(p, end, &body));
    p->loop_depth = saved;
    next(p);
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_macro(parser *p, cq_jnode *nd) {
    static const char *const end[] = {"endmacro", NULL};
    if (cur(p)->kind != CQ_JT_NAME) return fail_at(p, "expected a macro name");
    nd->name = cur(p)->text;
    next(p);
    CQ_TRY(parse_signature(p, nd));
    return parse_macro_body(p, nd, end);
}

static cq_status parse_call_block(parser *p, cq_jnode *nd) {
    static const char *const end[] = {"endcall", NULL};
    nd->name = cq_jstr_new(p->a, "caller", 6);
    if (!nd->name) return CQ_ERR_NOMEM;
    if (is_op(cur(p), CQ_JTO_LPAREN)) CQ_TRY(parse_signature(p, nd));
    uint32_t line = cur(p)->line;
    CQ_TRY(parse_expression(p, true, &nd->a));
    if (nd->a->kind != CQ_JN_CALL) return cq_jinja_err(CQ_ERR_PARSE, line, "expected call");
    return parse_macro_body(p, nd, end);
}

static cq_status parse_with(parser *p, cq_jnode *nd) {
    static const char *const end[] = {"endwith", NULL};
    svec names = {0};
    nvec vals = {0};
    while (cur(p)->kind != CQ_JT_BLOCK_END) {
        if (names.n) CQ_TRY(expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cur(p)->kind != CQ_JT_NAME)
            return cq_jinja_err(CQ_ERR_UNSUPPORTED, cur(p)->line,
                                "only plain names are supported as with targets");
        CQ_TRY(svec_push(p, &names, cur(p)->text));
        next(p);
        CQ_TRY(expect_op(p, CQ_JTO_ASSIGN, "expected '='"));
        cq_jnode *v;
        CQ_TRY(parse_expression(p, true, &v));
        CQ_TRY(nvec_push(p, &vals, v));
    }
    nvec body = {0};
    CQ_TRY(parse_body(p, end, &body));
    next(p);
    nd->names = names.v;
    nd->nnames = names.n;
    nd->kids2 = vals.v;
    nd->nkids2 = vals.n;
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_statement(parser *p, cq_jnode **out) {
    const cq_jtok *t = cur(p);
    if (t->kind != CQ_JT_NAME) return fail_at(p, "tag name expected");
    CQ_TRY(enter(p));
    uint32_t line = t->line;
    cq_jnode *nd = node(p, CQ_JN_BODY, line);
    if (!nd) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    next(p);
    if (is_name(t, "for")) {
        nd->kind = CQ_JN_FOR;
        s = parse_for(p, nd);
    } else if (is_name(t, "if")) {
        nd->kind = CQ_JN_IF;
        s = parse_if(p, nd);
    } else if (is_name(t, "set")) {
        nd->kind = CQ_JN_SET;
        s = parse_set(p, nd);
    } else if (is_name(t, "macro")) {
        nd->kind = CQ_JN_MACRO;
        s = parse_macro(p, nd);
    } else if (is_name(t, "filter")) {
        static const char *const end[] = {"endfilter", NULL};
        nd->kind = CQ_JN_FILTERBLOCK;
        cq_jnode *chain = NULL;
        s = parse_filter(p, &chain, true);
        nd->c = chain;
        nvec body = {0};
        if (s == CQ_OK) s = parse_body(p, end, &body);
        if (s == CQ_OK) next(p);
        nd->kids = body.v;
        nd->nkids = body.n;
    } else if (is_name(t, "call")) {
        nd->kind = CQ_JN_CALLBLOCK;
        s = parse_call_block(p, nd);
    } else if (is_name(t, "with")) {
        nd->kind = CQ_JN_WITH;
        s = parse_with(p, nd);
    } else if (is_name(t, "print")) {
        nd->kind = CQ_JN_OUTPUT;
        s = parse_tuple(p, TUPLE_FULL, NULL, false, &nd->a);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        nd->kind = is_name(t, "break") ? CQ_JN_BREAK : CQ_JN_CONTINUE;
        if (p->loop_depth == 0)
            s = cq_jinja_err(CQ_ERR_PARSE, line, "'%s' outside of a loop", t->text->s);
    } else if (is_name(t, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        nvec body = {0};
        s = parse_body(p, end, &body);
        if (s == CQ_OK) next(p);
        nd->kids = body.v;
        nd->nkids = body.n;
    } else {
        static const char *const known_end[] = {
            "endif", "endfor", "else", "elif", "endset", "endmacro", "endfilter", "endwith",
            "endgeneration", "endraw", "endcall", "endblock", "endautoescape", NULL};
        for (const char *const *k = known_end; *k; k++)
            if (is_name(t, *k)) {
                p->nest--;
                return cq_jinja_err(CQ_ERR_PARSE, line, "unexpected tag '%s'", t->text->s);
            }
        s = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "the '%s' tag is not supported", t->text->s);
    }
    p->nest--;
    *out = nd;
    return s;
}

static bool at_end_tag(parser *p, const char *const *end_tags) {
    if (!end_tags) return false;
    for (; *end_tags; end_tags++)
        if (is_name(cur(p), *end_tags)) return true;
    return false;
}

static cq_status subparse(parser *p, const char *const *end_tags, nvec *body) {
    for (;;) {
        const cq_jtok *t = cur(p);
        if (t->kind == CQ_JT_EOF) return CQ_OK;
        if (t->kind == CQ_JT_DATA) {
            cq_jnode *d = node(p, CQ_JN_DATA, t->line);
            if (!d) return CQ_ERR_NOMEM;
            d->cval = cq_jv_strv(t->text);
            CQ_TRY(nvec_push(p, body, d));
            next(p);
        } else if (t->kind == CQ_JT_VAR_BEGIN) {
            next(p);
            cq_jnode *o = node(p, CQ_JN_OUTPUT, t->line);
            if (!o) return CQ_ERR_NOMEM;
            CQ_TRY(parse_tuple(p, TUPLE_FULL, NULL, false, &o->a));
            CQ_TRY(expect_kind(p, CQ_JT_VAR_END, "expected end of print statement"));
            CQ_TRY(nvec_push(p, body, o));
        } else if (t->kind == CQ_JT_BLOCK_BEGIN) {
            next(p);
            if (at_end_tag(p, end_tags)) return CQ_OK;
            cq_jnode *st = NULL;
            CQ_TRY(parse_statement(p, &st));
            CQ_TRY(expect_kind(p, CQ_JT_BLOCK_END, "expected end of statement block"));
            CQ_TRY(nvec_push(p, body, st));
        } else {
            return fail_at(p, "unexpected token");
        }
    }
}

/* Mark the expressions jinja2's optimizer may fold to constants: literals
 * and pure operators over them (names and calls are never constant; a
 * conditional, and/or only needs the parts it evaluates, which the
 * evaluator finds out). */
static bool mark_const(cq_jnode *e) {
    if (!e) return true;
    bool ca = mark_const(e->a), cb = mark_const(e->b), cc = mark_const(e->c);
    bool c = ca && cb && cc;
    for (uint32_t i = 0; i < e->nkids; i++) c &= mark_const(e->kids[i]);
    for (uint32_t i = 0; i < e->nkids2; i++) c &= mark_const(e->kids2[i]);
    if (e->kind == CQ_JN_CONDEXPR) c = ca && (cb || cc);
    if (e->kind == CQ_JN_AND || e->kind == CQ_JN_OR) c = ca;
    switch (e->kind) {
    case CQ_JN_CONST:
    case CQ_JN_LIST:
    case CQ_JN_TUPLE:
    case CQ_JN_DICT:
    case CQ_JN_CONCAT:
    case CQ_JN_COMPARE:
    case CQ_JN_BINOP:
    case CQ_JN_AND:
    case CQ_JN_OR:
    case CQ_JN_GETITEM:
    case CQ_JN_SLICE:
    case CQ_JN_CONDEXPR:
    case CQ_JN_NOT:
    case CQ_JN_NEG:
    case CQ_JN_POS:
    case CQ_JN_GETATTR: break;
    case CQ_JN_FILTER:
    case CQ_JN_TEST:
        if (!e->a || e->b || e->c) c = false;
        /* filters that take the render context are never folded */
        if (e->kind == CQ_JN_FILTER &&
            (cq_jstr_eq(e->name, "map") || cq_jstr_eq(e->name, "select") || cq_jstr_eq(e->name, "reject") ||
             cq_jstr_eq(e->name, "selectattr") || cq_jstr_eq(e->name, "rejectattr") ||
             cq_jstr_eq(e->name, "random")))
            c = false;
        break;
    default: c = false;
    }
    e->is_const = c;
    return c;
}

cq_status cq_jinja_parse(cq_jarena *a, const cq_jtok *toks, size_t ntoks, cq_jnode ***body,
                         uint32_t *nbody) {
    if (ntoks == 0 || toks[ntoks - 1].kind != CQ_JT_EOF)
        return cq_fail(CQ_ERR_INTERNAL, "token stream without end");
    parser p = {.a = a, .t = toks, .n = ntoks};
    nvec b = {0};
    CQ_TRY(subparse(&p, NULL, &b));
    for (uint32_t i = 0; i < b.n; i++) mark_const(b.v[i]);
    *body = b.v;
    *nbody = b.n;
    return CQ_OK;
}
