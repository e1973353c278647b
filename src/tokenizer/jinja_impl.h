/*
 * jinja_impl.h — internals of the chat-template engine (a Jinja subset).
 *
 * The engine is split by concern:
 *   jinja_lex.c          template text -> tokens (whitespace control, trim/lstrip)
 *   jinja_parse.c        statements -> syntax tree   } jinja_parse_impl.h
 *   jinja_parse_expr.c   expressions -> syntax tree  }
 *   jinja_eval.c         statements, expressions, scopes, macros, calls
 *   jinja_access.c       obj.attr / obj[key] / slices under the sandbox rules
 *   jinja_ops.c          arithmetic, comparison, `in`
 *   jinja_value.c        arena, the value type, ==, <, truthiness, len, iteration
 *   jinja_repr.c         str(), repr(), markupsafe escape
 *   jinja_unicode.c      UTF-8 and Python character classes / case mapping
 *   jinja_json.c         json.dumps as transformers' tojson calls it, float repr
 *   jinja_filters.c      filter table, argument helpers, value filters
 *   jinja_filters_str.c  string filters and shared str algorithms
 *   jinja_filters_seq.c  sequence filters (generators like jinja2's)
 *   jinja_tests.c        `is` tests
 *   jinja_methods.c      method lookup, dict/list methods, globals
 *   jinja_strmethods.c   Python str methods
 *   jinja_format.c       `str % args` and str.format
 *   chat_template.c      the API in chat_template.h
 *
 * Semantics follow Python jinja2 as transformers' apply_chat_template sets it
 * up: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * loopcontrols), a tojson filter that is json.dumps(ensure_ascii=False, ...),
 * raise_exception and strftime_now globals, and the default Undefined.
 *
 * Memory: a compiled template owns one arena (its tokens and tree); a
 * render owns another that every value lives in
 * and that is dropped whole when the render ends, so values need no
 * reference counts and cycles (a namespace holding itself) cannot leak.
 */
#ifndef CQ_JINJA_IMPL_H
#define CQ_JINJA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "tokenizer/chat_template.h"

/* ---- arena ------------------------------------------------------------- */
typedef struct cq_jchunk cq_jchunk;
typedef struct cq_jarena {
    cq_jchunk *head;
    size_t used;  /* bytes handed out from chunks (for the limit) */
    size_t limit; /* 0 = no limit */
} cq_jarena;
/* Zeroed memory, 16-byte aligned. NULL after cq_fail(CQ_ERR_NOMEM). */
void *cq_jarena_alloc(cq_jarena *a, size_t n);
void cq_jarena_free(cq_jarena *a);

/* ---- values ------------------------------------------------------------ */
typedef enum cq_jv_kind {
    CQ_JV_UNDEF = 0,
    CQ_JV_NONE,
    CQ_JV_BOOL,
    CQ_JV_INT,
    CQ_JV_FLOAT,
    CQ_JV_STR,
    CQ_JV_LIST,  /* also tuples (cq_jlist.tuple) */
    CQ_JV_DICT,
    CQ_JV_NS,    /* namespace(): a mutable dict with attribute syntax */
    CQ_JV_LOOP,  /* the `loop` variable of a for statement */
    CQ_JV_MACRO,
    CQ_JV_FUNC,  /* a builtin function or bound method */
    CQ_JV_COUNT
} cq_jv_kind;

typedef struct cq_jstr {
    size_t len;
    char s[]; /* NUL-terminated for convenience; may contain NULs */
} cq_jstr;

struct cq_jlist;
struct cq_jdict;
struct cq_jloop;
struct cq_jmacro;
struct cq_jfunc;

typedef struct cq_jv {
    uint8_t kind;
    uint8_t unsafe; /* UNDEF from a blocked attribute (sandbox) */
    uint8_t markup; /* STR that is markupsafe.Markup (from |e, |safe): combining
                       it with plain strings HTML-escapes them */
    union {
        bool b;
        int64_t i;
        double f;
        const cq_jstr *s;
        struct cq_jlist *list;
        struct cq_jdict *dict;
        struct cq_jloop *loop;
        struct cq_jmacro *macro;
        struct cq_jfunc *func;
        const char *undef; /* what was undefined, for messages (may be NULL) */
    } u;
} cq_jv;

typedef struct cq_jlist {
    size_t n, cap;
    cq_jv *v;
    bool tuple;
    /* A Python generator (what map/select/reject/... return in jinja2):
     * always true, no len(), not subscriptable, and consumed by iterating,
     * from gen_pos on. */
    bool gen;
    size_t gen_pos;
    /* A generator that fails after its n items (a non-iterable input, or
     * an element its filter/test raised on): jinja2 only fails when the
     * generator is consumed that far, with this message. */
    const char *gen_err;
} cq_jlist;

typedef struct cq_jdict {
    size_t n, cap;
    cq_jv *k;
    cq_jv *v;
} cq_jdict;

/* ---- syntax tree --------------------------------------------------------- */
typedef enum cq_jnode_kind {
    /* expressions */
    CQ_JN_CONST,     /* cval */
    CQ_JN_NAME,      /* name */
    CQ_JN_LIST,      /* kids */
    CQ_JN_TUPLE,     /* kids */
    CQ_JN_DICT,      /* kids = keys, kids2 = values */
    CQ_JN_GETATTR,   /* a.name */
    CQ_JN_GETITEM,   /* a[b] */
    CQ_JN_SLICE,     /* a:b:c, each may be NULL (only inside GETITEM) */
    CQ_JN_CALL,      /* a(kids..., names[i]=kids2[i]..., *b, **c) */
    CQ_JN_FILTER,    /* a|name(args, *b, **c); a NULL in filter blocks */
    CQ_JN_TEST,      /* a is name(args) */
    CQ_JN_NOT,       /* not a */
    CQ_JN_NEG,       /* -a */
    CQ_JN_POS,       /* +a */
    CQ_JN_BINOP,     /* a op b, op = CQ_JOP_* */
    CQ_JN_CONCAT,    /* kids joined with ~ */
    CQ_JN_COMPARE,   /* a ops[i] kids[i] ... */
    CQ_JN_AND,
    CQ_JN_OR,
    CQ_JN_CONDEXPR,  /* b if a else c (c may be NULL) */
    CQ_JN_NSREF,     /* name.attr as an assignment target (attr in name2) */
    /* statements */
    CQ_JN_DATA,      /* literal template text in cval */
    CQ_JN_OUTPUT,    /* {{ a }} */
    CQ_JN_IF,        /* if a: kids else kids2 (elif nests an IF in kids2) */
    CQ_JN_FOR,       /* for a in b if c: kids else kids2 */
    CQ_JN_SET,       /* a = b */
    CQ_JN_SETBLOCK,  /* a = render(kids) | filter chain c */
    CQ_JN_MACRO,     /* name(names = defaults kids2[tail]) body kids */
    CQ_JN_FILTERBLOCK, /* render(kids) | filter chain c */
    CQ_JN_WITH,      /* names = kids2, body kids */
    CQ_JN_BREAK,
    CQ_JN_CONTINUE,
    CQ_JN_BODY,      /* kids (a {% generation %} block renders its body) */
    CQ_JN_CALLBLOCK, /* call a (a CALL) with caller = macro(names = kids2) body kids */
    CQ_JN_COUNT
} cq_jnode_kind;

typedef enum cq_jop {
    CQ_JOP_ADD, CQ_JOP_SUB, CQ_JOP_MUL, CQ_JOP_DIV, CQ_JOP_FLOORDIV, CQ_JOP_MOD, CQ_JOP_POW,
    CQ_JOP_EQ, CQ_JOP_NE, CQ_JOP_LT, CQ_JOP_LE, CQ_JOP_GT, CQ_JOP_GE, CQ_JOP_IN, CQ_JOP_NOTIN
} cq_jop;

typedef struct cq_jnode cq_jnode;
struct cq_jnode {
    uint8_t kind;
    uint8_t op;
    uint8_t is_const; /* expression jinja2's optimizer can fold (literals and pure operators) */
    uint32_t line;
    cq_jnode *a, *b, *c;
    cq_jnode **kids;
    uint32_t nkids;
    cq_jnode **kids2;
    uint32_t nkids2;
    const cq_jstr *name;
    const cq_jstr *name2;
    const cq_jstr **names;
    uint32_t nnames;
    uint8_t *ops;
    cq_jv cval;
};

/* ---- lexer --------------------------------------------------------------- */
typedef enum cq_jtok_kind {
    CQ_JT_EOF = 0,
    CQ_JT_DATA,
    CQ_JT_VAR_BEGIN,
    CQ_JT_VAR_END,
    CQ_JT_BLOCK_BEGIN,
    CQ_JT_BLOCK_END,
    CQ_JT_NAME,
    CQ_JT_STRING,
    CQ_JT_INT,
    CQ_JT_FLOAT,
    CQ_JT_OP /* op holds the operator spelling index, see cq_jinja_op_names */
} cq_jtok_kind;

typedef enum cq_jtok_op {
    CQ_JTO_ADD, CQ_JTO_SUB, CQ_JTO_DIV, CQ_JTO_FLOORDIV, CQ_JTO_MUL, CQ_JTO_MOD, CQ_JTO_POW,
    CQ_JTO_TILDE, CQ_JTO_LBRACKET, CQ_JTO_RBRACKET, CQ_JTO_LPAREN, CQ_JTO_RPAREN,
    CQ_JTO_LBRACE, CQ_JTO_RBRACE, CQ_JTO_EQ, CQ_JTO_NE, CQ_JTO_GT, CQ_JTO_GTEQ, CQ_JTO_LT,
    CQ_JTO_LTEQ, CQ_JTO_ASSIGN, CQ_JTO_DOT, CQ_JTO_COLON, CQ_JTO_PIPE, CQ_JTO_COMMA,
    CQ_JTO_SEMICOLON, CQ_JTO_COUNT
} cq_jtok_op;

typedef struct cq_jtok {
    uint8_t kind;
    uint8_t op;
    uint32_t line;
    const cq_jstr *text; /* DATA, NAME, STRING (unescaped) */
    int64_t ival;
    double fval;
} cq_jtok;

/* Tokenize `src` (whole template). Tokens and their strings live in `a`. */
cq_status cq_jinja_lex(cq_jarena *a, const char *src, size_t len, cq_jtok **toks, size_t *ntoks);

/* Parse tokens into a statement list (the template body). */
cq_status cq_jinja_parse(cq_jarena *a, const cq_jtok *toks, size_t ntoks, cq_jnode ***body,
                         uint32_t *nbody);

/* ---- render state -------------------------------------------------------- */
typedef struct cq_jbuf {
    char *p;
    size_t len, cap;
} cq_jbuf;

typedef struct cq_jframe {
    struct cq_jframe *parent;
    cq_jdict *vars;
} cq_jframe;

typedef struct cq_jrender {
    cq_jarena arena;
    cq_chat_template_limits lim;
    cq_jbuf *out;       /* where output goes now (captures swap it) */
    size_t out_total;   /* bytes written to all buffers, for the limit */
    uint64_t steps;     /* loop iterations + calls, for the limit */
    uint64_t scan;      /* element visits not yet charged as steps */
    int depth;          /* macro / capture nesting */
    uint8_t ctrl;       /* pending break (1) / continue (2) */
    int const_mode;     /* evaluating an output expression jinja2 folds at compile time */
    cq_jframe *root;
} cq_jrender;

typedef struct cq_jloop {
    const cq_jlist *items;
    size_t index0;
    int depth;
    cq_jv last_changed; /* for loop.changed() */
    bool changed_set;
} cq_jloop;

typedef struct cq_jmacro {
    const cq_jnode *def;
    cq_jframe *closure;
} cq_jmacro;

/* Builtin functions and bound methods (cq_jfunc.id). */
typedef enum cq_jfunc_id {
    CQ_JF_RANGE, CQ_JF_NAMESPACE, CQ_JF_DICT, CQ_JF_RAISE, CQ_JF_STRFTIME_NOW,
    CQ_JF_LOOP_CYCLE, CQ_JF_LOOP_CHANGED, CQ_JF_CYCLER, CQ_JF_JOINER, CQ_JF_LIPSUM,
    /* str methods */
    CQ_JF_S_STARTSWITH, CQ_JF_S_ENDSWITH, CQ_JF_S_STRIP, CQ_JF_S_LSTRIP, CQ_JF_S_RSTRIP,
    CQ_JF_S_SPLIT, CQ_JF_S_RSPLIT, CQ_JF_S_SPLITLINES, CQ_JF_S_UPPER, CQ_JF_S_LOWER,
    CQ_JF_S_TITLE, CQ_JF_S_CAPITALIZE, CQ_JF_S_REPLACE, CQ_JF_S_FIND, CQ_JF_S_RFIND,
    CQ_JF_S_INDEX, CQ_JF_S_RINDEX, CQ_JF_S_COUNT, CQ_JF_S_JOIN, CQ_JF_S_FORMAT,
    CQ_JF_S_ISDIGIT, CQ_JF_S_ISALPHA, CQ_JF_S_ISALNUM, CQ_JF_S_ISSPACE, CQ_JF_S_ISLOWER,
    CQ_JF_S_ISUPPER, CQ_JF_S_ZFILL, CQ_JF_S_CENTER, CQ_JF_S_LJUST, CQ_JF_S_RJUST,
    CQ_JF_S_PARTITION, CQ_JF_S_RPARTITION, CQ_JF_S_REMOVEPREFIX, CQ_JF_S_REMOVESUFFIX,
    CQ_JF_S_SWAPCASE, CQ_JF_S_CASEFOLD, CQ_JF_S_ISNUMERIC, CQ_JF_S_ISDECIMAL,
    CQ_JF_S_ISTITLE, CQ_JF_S_EXPANDTABS,
    /* dict methods */
    CQ_JF_D_ITEMS, CQ_JF_D_KEYS, CQ_JF_D_VALUES, CQ_JF_D_GET, CQ_JF_D_COPY,
    /* list methods */
    CQ_JF_L_INDEX, CQ_JF_L_COUNT, CQ_JF_L_COPY,
    CQ_JF_UNSUPPORTED, /* a Python method this engine does not implement */
    CQ_JF_COUNT
} cq_jfunc_id;

typedef struct cq_jfunc {
    uint16_t id;
    cq_jv self;
    const cq_jstr *name; /* for messages */
} cq_jfunc;

/* Errors carry the template line: "chat template line N: ...". */
cq_status cq_jinja_err(cq_status s, uint32_t line, const char *fmt, ...) CQ_PRINTF(3, 4);

/* Counts one unit of work (loop iteration, call); fails past the limit. */
cq_status cq_jinja_step(cq_jrender *r, uint32_t line);
/* Counts `units` element visits of a scan (16 visits = one step). */
cq_status cq_jinja_charge(cq_jrender *r, size_t units, uint32_t line);

/* ---- value helpers (jinja_value.c) ------------------------------------- */
static inline cq_jv cq_jv_undef(const char *what) {
    cq_jv v = {.kind = CQ_JV_UNDEF};
    v.u.undef = what;
    return v;
}
static inline cq_jv cq_jv_none(void) { return (cq_jv){.kind = CQ_JV_NONE}; }
static inline cq_jv cq_jv_bool(bool b) {
    cq_jv v = {.kind = CQ_JV_BOOL};
    v.u.b = b;
    return v;
}
static inline cq_jv cq_jv_int(int64_t i) {
    cq_jv v = {.kind = CQ_JV_INT};
    v.u.i = i;
    return v;
}
static inline cq_jv cq_jv_float(double f) {
    cq_jv v = {.kind = CQ_JV_FLOAT};
    v.u.f = f;
    return v;
}
static inline cq_jv cq_jv_strv(const cq_jstr *s) {
    cq_jv v = {.kind = CQ_JV_STR};
    v.u.s = s;
    return v;
}
static inline cq_jv cq_jv_markup(const cq_jstr *s) {
    cq_jv v = {.kind = CQ_JV_STR, .markup = 1};
    v.u.s = s;
    return v;
}
static inline bool cq_jv_is_num(cq_jv v) {
    return v.kind == CQ_JV_INT || v.kind == CQ_JV_FLOAT || v.kind == CQ_JV_BOOL;
}

const cq_jstr *cq_jstr_new(cq_jarena *a, const char *s, size_t n);
const cq_jstr *cq_jstr_cat(cq_jarena *a, const cq_jstr *x, const cq_jstr *y);
/* Empty string constant (not in any arena). */
const cq_jstr *cq_jstr_empty(void);
bool cq_jstr_eq(const cq_jstr *s, const char *lit);

cq_jlist *cq_jlist_new(cq_jarena *a, size_t cap);
cq_status cq_jlist_push(cq_jarena *a, cq_jlist *l, cq_jv v);
cq_jdict *cq_jdict_new(cq_jarena *a, size_t cap);
/* Insert or replace (Python dict semantics: equal keys are one key). */
cq_status cq_jdict_set(cq_jarena *a, cq_jdict *d, cq_jv k, cq_jv v);
/* Lookup; NULL when absent. */
cq_jv *cq_jdict_get(const cq_jdict *d, cq_jv k);
cq_jv *cq_jdict_get_str(const cq_jdict *d, const char *k, size_t klen);

cq_jv cq_jv_list(cq_jlist *l);
cq_jv cq_jv_dict(cq_jdict *d);

/* Python truthiness. */
bool cq_jv_truthy(cq_jv v);
/* Python ==, with jinja2's Undefined (equal only to Undefined). */
bool cq_jv_equal(cq_jv a, cq_jv b);
/* Python <: sets *out to -1/0/1; fails (TypeError) for unorderable pairs. */
cq_status cq_jv_compare(cq_jv a, cq_jv b, uint32_t line, int *out);
/* str(v) into `b`, repr(v) into `b`. Fails for values with no text form. */
cq_status cq_jv_str_append(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line);
cq_status cq_jv_repr_append(cq_jrender *r, cq_jbuf *b, cq_jv v, uint32_t line);
/* markupsafe.escape(v): Markup stays as it is (unless force), anything else
 * is str()-ed and gets & < > " ' replaced by entities; the result is Markup. */
cq_status cq_jinja_escape(cq_jrender *r, cq_jv v, bool force, uint32_t line, cq_jv *out);
/* str(v) as a string value (strings are returned as they are). */
cq_status cq_jv_to_str(cq_jrender *r, cq_jv v, uint32_t line, const cq_jstr **out);
/* Python type name for messages ("str", "int", "dict", "Undefined"...). */
const char *cq_jv_type_name(cq_jv v);
/* Iterate like Python iter(): list/tuple items, dict keys, string chars,
 * Undefined -> empty. Fails for non-iterables. */
cq_status cq_jv_iterate(cq_jrender *r, cq_jv v, uint32_t line, const cq_jlist **out);
/* len(v): strings count code points. Fails for values without a length. */
cq_status cq_jv_length(cq_jv v, uint32_t line, int64_t *out);
/* A fresh list/dict value built from cJSON (numbers without a fraction that
 * fit in 2^53 become ints). */
cq_status cq_jv_from_cjson(cq_jarena *a, const void *cjson_item, int depth, cq_jv *out);
/* Undefined used where a value is needed: fails with jinja2's message. */
cq_status cq_jv_undef_error(cq_jv v, uint32_t line);

/* Output buffers: every append counts toward the render's output limit. */
cq_status cq_jbuf_append(cq_jrender *r, cq_jbuf *b, const char *s, size_t n);
static inline cq_status cq_jbuf_puts(cq_jrender *r, cq_jbuf *b, const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return cq_jbuf_append(r, b, s, n);
}
void cq_jbuf_free(cq_jbuf *b);
/* Copies the buffer contents into the arena as a string. */
cq_status cq_jbuf_to_str(cq_jrender *r, const cq_jbuf *b, const cq_jstr **out);

/* ---- UTF-8 and Python string helpers -------------------------------------- */
/* Decode one code point at s[*i] (advancing *i); an invalid byte decodes to
 * itself so every byte string has a length. */
uint32_t cq_utf8_next(const char *s, size_t n, size_t *i);
size_t cq_utf8_put(uint32_t cp, char out[4]);
/* Number of code points. */
size_t cq_utf8_count(const char *s, size_t n);
/* Byte offset of code point index `cp` (clamped to n). */
size_t cq_utf8_offset(const char *s, size_t n, size_t cp);
/* Python str.isspace() for one code point. */
bool cq_py_isspace(uint32_t cp);
uint32_t cq_py_upper(uint32_t cp);
uint32_t cq_py_lower(uint32_t cp);
/* Full (possibly one-to-many) case mapping as Python's str.upper/lower. */
size_t cq_py_case_full(uint32_t cp, bool upper, uint32_t out[3]);
bool cq_py_isalpha(uint32_t cp);
bool cq_py_isdigit(uint32_t cp);

/* ---- JSON (jinja_json.c) --------------------------------------------------- */
typedef struct cq_json_opts {
    bool ensure_ascii;
    bool sort_keys;
    bool html_safe;       /* jinja2's own tojson: <>&' as \u003c... */
    int indent;           /* -1: none */
    const cq_jstr *indent_str; /* string indent (overrides `indent`) */
    const cq_jstr *item_sep; /* NULL: ", " (or "," with indent) */
    const cq_jstr *key_sep;  /* NULL: ": " */
} cq_json_opts;
cq_status cq_jv_json_append(cq_jrender *r, cq_jbuf *b, cq_jv v, const cq_json_opts *o,
                            uint32_t line);
/* Python repr(float) into buf (at least 32 bytes). */
void cq_py_float_repr(double f, char *buf, size_t cap);

/* ---- evaluation (jinja_eval.c) ------------------------------------------------ */
cq_status cq_jinja_render_body(cq_jrender *r, cq_jnode *const *body, uint32_t n, cq_jframe *f);
cq_status cq_jinja_eval(cq_jrender *r, const cq_jnode *e, cq_jframe *f, cq_jv *out);
cq_status cq_jinja_call(cq_jrender *r, cq_jv callee, const cq_jv *args, size_t nargs,
                        const cq_jstr *const *kwnames, const cq_jv *kwvals, size_t nkw,
                        uint32_t line, cq_jv *out);
/* a op b for CQ_JOP_ADD..POW; comparisons CQ_JOP_EQ..NOTIN to a bool. */
cq_status cq_jinja_binop(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, cq_jv *out);
cq_status cq_jinja_compare_op(cq_jrender *r, int op, cq_jv a, cq_jv b, uint32_t line, bool *out);
/* obj[slice node]. */
cq_status cq_jinja_eval_slice(cq_jrender *r, cq_jv obj, const cq_jnode *sl, cq_jframe *f, cq_jv *out);
/* An Undefined whose message is fmt with "%.*s" filled from name. */
cq_jv cq_jv_undef_fmt(cq_jrender *r, const char *fmt, const cq_jstr *name);
/* Attribute and item access with jinja2's sandboxed getattr/getitem rules. */
cq_status cq_jinja_getattr(cq_jrender *r, cq_jv obj, const cq_jstr *name, uint32_t line,
                           cq_jv *out);
cq_status cq_jinja_getitem(cq_jrender *r, cq_jv obj, cq_jv key, uint32_t line, cq_jv *out);
cq_jframe *cq_jframe_new(cq_jrender *r, cq_jframe *parent);
/* Render a body into a fresh buffer and return it as a string. */
cq_status cq_jinja_render_capture(cq_jrender *r, cq_jnode *const *body, uint32_t n, cq_jframe *f,
                                  uint32_t line, const cq_jstr **out);

/* ---- filters, tests, methods ----------------------------------------------- */
/* Arguments of a filter/test/method call after evaluation. */
typedef struct cq_jargs {
    const cq_jv *pos;
    size_t npos;
    const cq_jstr *const *kwnames;
    const cq_jv *kwvals;
    size_t nkw;
} cq_jargs;
/* Fetch argument `idx` (positional) or `name` (keyword); *present false when
 * neither was given. Fails on a duplicate. */
cq_status cq_jargs_get(const cq_jargs *a, size_t idx, const char *name, uint32_t line,
                       cq_jv *out, bool *present);
/* Fails when more positional arguments or unknown keywords were given. */
cq_status cq_jargs_check(const cq_jargs *a, size_t max_pos, const char *const *names,
                         const char *fn, uint32_t line);

cq_status cq_jinja_filter(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *args,
                          uint32_t line, cq_jv *out);
/* One filter: `name` is the name it was called by (several names share one). */
typedef cq_status (*cq_jfilter_fn)(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a,
                                   uint32_t line, cq_jv *out);
cq_status cq_jfilter_abs(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                         cq_jv *out);
cq_status cq_jfilter_attr(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_batch(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_center(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_default(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                             cq_jv *out);
cq_status cq_jfilter_dictsort(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                              cq_jv *out);
cq_status cq_jfilter_escape(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_first(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_float(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_format(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_indent(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_int(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                         cq_jv *out);
cq_status cq_jfilter_items(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_join(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_last(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_length(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_list(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_map(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                         cq_jv *out);
cq_status cq_jfilter_max(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                         cq_jv *out);
cq_status cq_jfilter_reject(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_rejectattr(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                                cq_jv *out);
cq_status cq_jfilter_replace(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                             cq_jv *out);
cq_status cq_jfilter_reverse(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                             cq_jv *out);
cq_status cq_jfilter_round(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_select(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_selectattr(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                                cq_jv *out);
cq_status cq_jfilter_sort(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_string(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_sum(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                         cq_jv *out);
cq_status cq_jfilter_tojson(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_trim(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                          cq_jv *out);
cq_status cq_jfilter_truncate(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                              cq_jv *out);
cq_status cq_jfilter_unique(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                            cq_jv *out);
cq_status cq_jfilter_upper(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                           cq_jv *out);
cq_status cq_jfilter_wordcount(cq_jrender *r, const char *name, cq_jv v, const cq_jargs *a, uint32_t line,
                               cq_jv *out);
/* Argument `idx`/`name`, or `def` when absent; an int argument. */
cq_status cq_jargs_opt(const cq_jargs *a, size_t idx, const char *name, cq_jv def, uint32_t line,
                       cq_jv *out);
cq_status cq_jv_want_int(cq_jv v, const char *what, uint32_t line, int64_t *out);
/* A string value copied into the arena; a buffer turned into one (the
 * buffer is freed; `s` is the status of filling it). */
cq_status cq_jv_new_str(cq_jrender *r, const char *s, size_t n, cq_jv *out);
cq_status cq_jv_from_buf(cq_jrender *r, cq_jbuf *b, cq_status s, cq_jv *out);
typedef enum { CQ_JCASE_UPPER, CQ_JCASE_LOWER, CQ_JCASE_CAPITALIZE, CQ_JCASE_TITLE } cq_jcase;
/* str.upper/lower/capitalize, or jinja2's title filter. */
cq_status cq_jinja_map_case(cq_jrender *r, const cq_jstr *s, cq_jcase m, cq_jv *out);
cq_status cq_jinja_test(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *args,
                        uint32_t line, bool *out);
bool cq_jinja_has_filter(const char *name, size_t n);
bool cq_jinja_has_test(const char *name, size_t n);
/* Bound method lookup for attribute `name` of a str/dict/list value;
 * *found false when the type has no such method. *unsafe is set for the
 * mutating list/dict methods the immutable sandbox blocks. */
cq_status cq_jinja_method_lookup(cq_jrender *r, cq_jv self, const cq_jstr *name, cq_jv *out,
                                 bool *found, bool *unsafe);
cq_status cq_jinja_builtin_call(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *args,
                                uint32_t line, cq_jv *out);
/* Shared string helpers (Python str.strip/replace/splitlines semantics);
 * chars NULL strips whitespace, count < 0 replaces all. */
cq_status cq_jinja_strip(cq_jrender *r, const cq_jstr *s, const cq_jstr *chars, bool left,
                         bool right, cq_jv *out);
cq_status cq_jinja_replace(cq_jrender *r, const cq_jstr *s, const cq_jstr *old, const cq_jstr *new_,
                           int64_t count, uint32_t line, cq_jv *out);
cq_status cq_jinja_splitlines(cq_jrender *r, const cq_jstr *s, bool keepends, cq_jlist **out);
/* A str method bound in fn (fn->self is the string). */
cq_status cq_jinja_str_method(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                              cq_jv *out);
/* str.format (Markup.format when markup). */
cq_status cq_jinja_str_format(cq_jrender *r, const cq_jstr *fmt, const cq_jargs *a, uint32_t line,
                              cq_jv *out, bool markup);
/* Python printf-style `fmt % args` (args: a tuple, a dict or one value). */
cq_status cq_jinja_str_mod(cq_jrender *r, const cq_jstr *fmt, cq_jv args, uint32_t line,
                           cq_jv *out, bool markup);
/* Global names (range, namespace, dict, raise_exception, strftime_now):
 * *found false when `name` is none of them. */
cq_status cq_jinja_global(cq_jrender *r, const cq_jstr *name, cq_jv *out, bool *found);

#endif /* CQ_JINJA_IMPL_H */
