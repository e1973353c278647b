/*
 * jinja_parse.c — builds the syntax tree of a template: data, {{ }} output
 * and statements (if/elif/else, for with target unpacking, `if` filter and
 * else, set with names/tuples/namespace attributes and the block form,
 * macro, call blocks, filter blocks, with, print, break/continue, and
 * transformers' generation block). Expressions are parsed in
 * jinja_parse_expr.c. Tags jinja2 has but this engine lacks (include,
 * extends, import, ...) and unknown tags fail with CQ_ERR_UNSUPPORTED;
 * malformed syntax with CQ_ERR_PARSE.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_parse_impl.h"

static cq_status subparse(cq_jparser *p, const char *const *end_tags, cq_jnvec *body);

/* ---- statements --------------------------------------------------------------------- */
static bool can_assign(const cq_jnode *t) {
    if (t->kind == CQ_JN_NAME || t->kind == CQ_JN_NSREF) return true;
    if (t->kind != CQ_JN_TUPLE) return false;
    for (uint32_t i = 0; i < t->nkids; i++)
        if (!can_assign(t->kids[i]) || t->kids[i]->kind == CQ_JN_NSREF) return false;
    return true;
}

static cq_status parse_assign_target(cq_jparser *p, bool with_namespace, const char *const *extra_end,
                                     cq_jnode **out) {
    const cq_jtok *t = cq_jp_cur(p);
    if (with_namespace && t->kind == CQ_JT_NAME && cq_jp_is_op(cq_jp_look(p), CQ_JTO_DOT)) {
        cq_jnode *ns = cq_jp_node(p, CQ_JN_NSREF, t->line);
        if (!ns) return CQ_ERR_NOMEM;
        ns->name = t->text;
        cq_jp_next(p);
        cq_jp_next(p);
        if (cq_jp_cur(p)->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "expected a name");
        ns->name2 = cq_jp_cur(p)->text;
        cq_jp_next(p);
        *out = ns;
        return CQ_OK;
    }
    CQ_TRY(cq_jp_tuple(p, CQ_JP_TUPLE_SIMPLE, extra_end, false, out));
    if (!can_assign(*out))
        return cq_jinja_err(CQ_ERR_PARSE, t->line, "can't assign to this expression");
    return CQ_OK;
}

static cq_status parse_body(cq_jparser *p, const char *const *end_tags, cq_jnvec *body) {
    if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_COLON)) cq_jp_next(p);
    CQ_TRY(cq_jp_expect_kind(p, CQ_JT_BLOCK_END, "expected end of statement block"));
    CQ_TRY(subparse(p, end_tags, body));
    if (cq_jp_cur(p)->kind == CQ_JT_EOF) {
        char want[128];
        size_t o = 0;
        for (const char *const *e = end_tags; *e && o < sizeof want - 24; e++)
            o += (size_t)snprintf(want + o, sizeof want - o, "%s'%s'", o ? " or " : "", *e);
        return cq_jinja_err(CQ_ERR_PARSE, cq_jp_cur(p)->line,
                            "unexpected end of template, looking for %s", want);
    }
    return CQ_OK;
}

static cq_status parse_for(cq_jparser *p, cq_jnode *nd) {
    static const char *const in_end[] = {"in", NULL};
    static const char *const rec_end[] = {"recursive", NULL};
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    CQ_TRY(parse_assign_target(p, false, in_end, &nd->a));
    if (!cq_jp_is_name(cq_jp_cur(p), "in")) return cq_jp_fail_at(p, "expected 'in'");
    cq_jp_next(p);
    CQ_TRY(cq_jp_tuple(p, CQ_JP_TUPLE_NOCOND, rec_end, false, &nd->b));
    if (cq_jp_is_name(cq_jp_cur(p), "if")) {
        cq_jp_next(p);
        CQ_TRY(cq_jp_expression(p, true, &nd->c));
    }
    if (cq_jp_is_name(cq_jp_cur(p), "recursive"))
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, cq_jp_cur(p)->line, "recursive for loops are not supported");
    cq_jnvec body = {0}, els = {0};
    p->loop_depth++;
    CQ_TRY(parse_body(p, body_end, &body));
    p->loop_depth--;
    bool has_else = cq_jp_is_name(cq_jp_cur(p), "else");
    cq_jp_next(p);
    if (has_else) {
        CQ_TRY(parse_body(p, else_end, &els));
        cq_jp_next(p);
    }
    nd->kids = body.v;
    nd->nkids = body.n;
    nd->kids2 = els.v;
    nd->nkids2 = els.n;
    return CQ_OK;
}

static cq_status parse_if(cq_jparser *p, cq_jnode *nd) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const endif[] = {"endif", NULL};
    cq_jnode *cur_if = nd;
    for (;;) {
        CQ_TRY(cq_jp_tuple(p, CQ_JP_TUPLE_NOCOND, NULL, false, &cur_if->a));
        cq_jnvec body = {0};
        CQ_TRY(parse_body(p, ends, &body));
        cur_if->kids = body.v;
        cur_if->nkids = body.n;
        const cq_jtok *t = cq_jp_cur(p);
        cq_jp_next(p);
        if (cq_jp_is_name(t, "elif")) {
            cq_jnode *e = cq_jp_node(p, CQ_JN_IF, cq_jp_cur(p)->line);
            if (!e) return CQ_ERR_NOMEM;
            cq_jnode **k = cq_jarena_alloc(p->a, sizeof *k);
            if (!k) return CQ_ERR_NOMEM;
            k[0] = e;
            cur_if->kids2 = k;
            cur_if->nkids2 = 1;
            cur_if = e;
            continue;
        }
        if (cq_jp_is_name(t, "else")) {
            cq_jnvec els = {0};
            CQ_TRY(parse_body(p, endif, &els));
            cq_jp_next(p);
            cur_if->kids2 = els.v;
            cur_if->nkids2 = els.n;
        }
        return CQ_OK;
    }
}

static cq_status parse_set(cq_jparser *p, cq_jnode *nd) {
    static const char *const endset[] = {"endset", NULL};
    CQ_TRY(parse_assign_target(p, true, NULL, &nd->a));
    if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_ASSIGN)) {
        cq_jp_next(p);
        return cq_jp_tuple(p, CQ_JP_TUPLE_FULL, NULL, false, &nd->b);
    }
    nd->kind = CQ_JN_SETBLOCK;
    cq_jnode *chain = NULL;
    CQ_TRY(cq_jp_filter(p, &chain, false));
    nd->c = chain;
    cq_jnvec body = {0};
    CQ_TRY(parse_body(p, endset, &body));
    cq_jp_next(p);
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_signature(cq_jparser *p, cq_jnode *nd) {
    CQ_TRY(cq_jp_expect_op(p, CQ_JTO_LPAREN, "expected '('"));
    cq_jsvec params = {0};
    cq_jnvec defaults = {0};
    while (!cq_jp_is_op(cq_jp_cur(p), CQ_JTO_RPAREN)) {
        if (params.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cq_jp_cur(p)->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "expected a parameter name");
        CQ_TRY(cq_jp_svec_push(p, &params, cq_jp_cur(p)->text));
        cq_jp_next(p);
        if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_ASSIGN)) {
            cq_jp_next(p);
            cq_jnode *d;
            CQ_TRY(cq_jp_expression(p, true, &d));
            CQ_TRY(cq_jp_nvec_push(p, &defaults, d));
        } else if (defaults.n) {
            return cq_jinja_err(CQ_ERR_PARSE, cq_jp_cur(p)->line,
                                "non-default argument follows default argument");
        }
    }
    cq_jp_next(p);
    nd->names = params.v;
    nd->nnames = params.n;
    nd->kids2 = defaults.v;
    nd->nkids2 = defaults.n;
    return CQ_OK;
}

/* Body of a macro or call block, where break/continue cannot reach an
 * enclosing loop. */
static cq_status parse_macro_body(cq_jparser *p, cq_jnode *nd, const char *const *end) {
    int saved = p->loop_depth;
    p->loop_depth = 0;
    cq_jnvec body = {0};
    CQ_TRY(parse_body(p, end, &body));
    p->loop_depth = saved;
    cq_jp_next(p);
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_macro(cq_jparser *p, cq_jnode *nd) {
    static const char *const end[] = {"endmacro", NULL};
    if (cq_jp_cur(p)->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "expected a macro name");
    nd->name = cq_jp_cur(p)->text;
    cq_jp_next(p);
    CQ_TRY(parse_signature(p, nd));
    return parse_macro_body(p, nd, end);
}

static cq_status parse_call_block(cq_jparser *p, cq_jnode *nd) {
    static const char *const end[] = {"endcall", NULL};
    nd->name = cq_jstr_new(p->a, "caller", 6);
    if (!nd->name) return CQ_ERR_NOMEM;
    if (cq_jp_is_op(cq_jp_cur(p), CQ_JTO_LPAREN)) CQ_TRY(parse_signature(p, nd));
    uint32_t line = cq_jp_cur(p)->line;
    CQ_TRY(cq_jp_expression(p, true, &nd->a));
    if (nd->a->kind != CQ_JN_CALL) return cq_jinja_err(CQ_ERR_PARSE, line, "expected call");
    return parse_macro_body(p, nd, end);
}

static cq_status parse_with(cq_jparser *p, cq_jnode *nd) {
    static const char *const end[] = {"endwith", NULL};
    cq_jsvec names = {0};
    cq_jnvec vals = {0};
    while (cq_jp_cur(p)->kind != CQ_JT_BLOCK_END) {
        if (names.n) CQ_TRY(cq_jp_expect_op(p, CQ_JTO_COMMA, "expected ','"));
        if (cq_jp_cur(p)->kind != CQ_JT_NAME)
            return cq_jinja_err(CQ_ERR_UNSUPPORTED, cq_jp_cur(p)->line,
                                "only plain names are supported as with targets");
        CQ_TRY(cq_jp_svec_push(p, &names, cq_jp_cur(p)->text));
        cq_jp_next(p);
        CQ_TRY(cq_jp_expect_op(p, CQ_JTO_ASSIGN, "expected '='"));
        cq_jnode *v;
        CQ_TRY(cq_jp_expression(p, true, &v));
        CQ_TRY(cq_jp_nvec_push(p, &vals, v));
    }
    cq_jnvec body = {0};
    CQ_TRY(parse_body(p, end, &body));
    cq_jp_next(p);
    nd->names = names.v;
    nd->nnames = names.n;
    nd->kids2 = vals.v;
    nd->nkids2 = vals.n;
    nd->kids = body.v;
    nd->nkids = body.n;
    return CQ_OK;
}

static cq_status parse_statement(cq_jparser *p, cq_jnode **out) {
    const cq_jtok *t = cq_jp_cur(p);
    if (t->kind != CQ_JT_NAME) return cq_jp_fail_at(p, "tag name expected");
    CQ_TRY(cq_jp_enter(p));
    uint32_t line = t->line;
    cq_jnode *nd = cq_jp_node(p, CQ_JN_BODY, line);
    if (!nd) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    cq_jp_next(p);
    if (cq_jp_is_name(t, "for")) {
        nd->kind = CQ_JN_FOR;
        s = parse_for(p, nd);
    } else if (cq_jp_is_name(t, "if")) {
        nd->kind = CQ_JN_IF;
        s = parse_if(p, nd);
    } else if (cq_jp_is_name(t, "set")) {
        nd->kind = CQ_JN_SET;
        s = parse_set(p, nd);
    } else if (cq_jp_is_name(t, "macro")) {
        nd->kind = CQ_JN_MACRO;
        s = parse_macro(p, nd);
    } else if (cq_jp_is_name(t, "filter")) {
        static const char *const end[] = {"endfilter", NULL};
        nd->kind = CQ_JN_FILTERBLOCK;
        cq_jnode *chain = NULL;
        s = cq_jp_filter(p, &chain, true);
        nd->c = chain;
        cq_jnvec body = {0};
        if (s == CQ_OK) s = parse_body(p, end, &body);
        if (s == CQ_OK) cq_jp_next(p);
        nd->kids = body.v;
        nd->nkids = body.n;
    } else if (cq_jp_is_name(t, "call")) {
        nd->kind = CQ_JN_CALLBLOCK;
        s = parse_call_block(p, nd);
    } else if (cq_jp_is_name(t, "with")) {
        nd->kind = CQ_JN_WITH;
        s = parse_with(p, nd);
    } else if (cq_jp_is_name(t, "print")) {
        nd->kind = CQ_JN_OUTPUT;
        s = cq_jp_tuple(p, CQ_JP_TUPLE_FULL, NULL, false, &nd->a);
    } else if (cq_jp_is_name(t, "break") || cq_jp_is_name(t, "continue")) {
        nd->kind = cq_jp_is_name(t, "break") ? CQ_JN_BREAK : CQ_JN_CONTINUE;
        if (p->loop_depth == 0)
            s = cq_jinja_err(CQ_ERR_PARSE, line, "'%s' outside of a loop", t->text->s);
    } else if (cq_jp_is_name(t, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        cq_jnvec body = {0};
        s = parse_body(p, end, &body);
        if (s == CQ_OK) cq_jp_next(p);
        nd->kids = body.v;
        nd->nkids = body.n;
    } else {
        static const char *const known_end[] = {
            "endif", "endfor", "else", "elif", "endset", "endmacro", "endfilter", "endwith",
            "endgeneration", "endraw", "endcall", "endblock", "endautoescape", NULL};
        for (const char *const *k = known_end; *k; k++)
            if (cq_jp_is_name(t, *k)) {
                p->nest--;
                return cq_jinja_err(CQ_ERR_PARSE, line, "unexpected tag '%s'", t->text->s);
            }
        s = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "the '%s' tag is not supported", t->text->s);
    }
    p->nest--;
    *out = nd;
    return s;
}

static bool at_end_tag(cq_jparser *p, const char *const *end_tags) {
    if (!end_tags) return false;
    for (; *end_tags; end_tags++)
        if (cq_jp_is_name(cq_jp_cur(p), *end_tags)) return true;
    return false;
}

static cq_status subparse(cq_jparser *p, const char *const *end_tags, cq_jnvec *body) {
    for (;;) {
        const cq_jtok *t = cq_jp_cur(p);
        if (t->kind == CQ_JT_EOF) return CQ_OK;
        if (t->kind == CQ_JT_DATA) {
            cq_jnode *d = cq_jp_node(p, CQ_JN_DATA, t->line);
            if (!d) return CQ_ERR_NOMEM;
            d->cval = cq_jv_strv(t->text);
            CQ_TRY(cq_jp_nvec_push(p, body, d));
            cq_jp_next(p);
        } else if (t->kind == CQ_JT_VAR_BEGIN) {
            cq_jp_next(p);
            cq_jnode *o = cq_jp_node(p, CQ_JN_OUTPUT, t->line);
            if (!o) return CQ_ERR_NOMEM;
            CQ_TRY(cq_jp_tuple(p, CQ_JP_TUPLE_FULL, NULL, false, &o->a));
            CQ_TRY(cq_jp_expect_kind(p, CQ_JT_VAR_END, "expected end of print statement"));
            CQ_TRY(cq_jp_nvec_push(p, body, o));
        } else if (t->kind == CQ_JT_BLOCK_BEGIN) {
            cq_jp_next(p);
            if (at_end_tag(p, end_tags)) return CQ_OK;
            cq_jnode *st = NULL;
            CQ_TRY(parse_statement(p, &st));
            CQ_TRY(cq_jp_expect_kind(p, CQ_JT_BLOCK_END, "expected end of statement block"));
            CQ_TRY(cq_jp_nvec_push(p, body, st));
        } else {
            return cq_jp_fail_at(p, "unexpected token");
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
    cq_jparser p = {.a = a, .t = toks, .n = ntoks};
    cq_jnvec b = {0};
    CQ_TRY(subparse(&p, NULL, &b));
    for (uint32_t i = 0; i < b.n; i++) mark_const(b.v[i]);
    *body = b.v;
    *nbody = b.n;
    return CQ_OK;
}
