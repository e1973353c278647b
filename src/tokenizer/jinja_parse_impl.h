/*
 * jinja_parse_impl.h — what the two halves of the template parser share:
 * the token cursor, node/array allocation in the template arena, error
 * helpers and the nesting guard. Internal to jinja_parse*.c.
 */
#ifndef CQ_JINJA_PARSE_IMPL_H
#define CQ_JINJA_PARSE_IMPL_H

#include "tokenizer/jinja_impl.h"

/* Expression nesting bound: hostile input cannot exhaust the stack. */
#define CQ_JP_MAX_NEST 96

typedef struct cq_jparser {
    cq_jarena *a;
    const cq_jtok *t;
    size_t n, i;
    int nest;
    int loop_depth;
} cq_jparser;

/* A growable array of node pointers / names in the arena. */
typedef struct cq_jnvec {
    cq_jnode **v;
    uint32_t n, cap;
} cq_jnvec;
typedef struct cq_jsvec {
    const cq_jstr **v;
    uint32_t n, cap;
} cq_jsvec;

enum { CQ_JP_TUPLE_FULL, CQ_JP_TUPLE_NOCOND, CQ_JP_TUPLE_SIMPLE };

static inline const cq_jtok *cq_jp_cur(cq_jparser *p) {
    return &p->t[p->i < p->n ? p->i : p->n - 1];
}

static inline const cq_jtok *cq_jp_look(cq_jparser *p) {
    return &p->t[p->i + 1 < p->n ? p->i + 1 : p->n - 1];
}

static inline void cq_jp_next(cq_jparser *p) {
    if (p->i < p->n - 1) p->i++;
}

static inline bool cq_jp_is_op(const cq_jtok *t, int op) {
    return t->kind == CQ_JT_OP && t->op == op;
}

static inline bool cq_jp_is_name(const cq_jtok *t, const char *s) {
    return t->kind == CQ_JT_NAME && cq_jstr_eq(t->text, s);
}

const char *cq_jp_tok_desc(const cq_jtok *t);
cq_status cq_jp_fail_at(cq_jparser *p, const char *what);
cq_status cq_jp_expect_op(cq_jparser *p, int op, const char *what);
cq_status cq_jp_expect_kind(cq_jparser *p, int kind, const char *what);
cq_jnode *cq_jp_node(cq_jparser *p, int kind, uint32_t line);
cq_status cq_jp_nvec_push(cq_jparser *p, cq_jnvec *v, cq_jnode *x);
cq_status cq_jp_svec_push(cq_jparser *p, cq_jsvec *v, const cq_jstr *x);
cq_status cq_jp_enter(cq_jparser *p);

/* Expressions (jinja_parse_expr.c). */
cq_status cq_jp_expression(cq_jparser *p, bool with_condexpr, cq_jnode **out);
/* mode: CQ_JP_TUPLE_*; extra_end: names that also end the tuple (NULL-terminated). */
cq_status cq_jp_tuple(cq_jparser *p, int mode, const char *const *extra_end, bool explicit_paren,
                      cq_jnode **out);
cq_status cq_jp_primary(cq_jparser *p, cq_jnode **out);
/* A chain of `|name(args)` filters applied to *nd (NULL for filter blocks). */
cq_status cq_jp_filter(cq_jparser *p, cq_jnode **nd, bool start_inline);

#endif /* CQ_JINJA_PARSE_IMPL_H */
