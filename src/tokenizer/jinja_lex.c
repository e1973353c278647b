/*
 * jinja_lex.c — splits template text into tokens the way jinja2's lexer
 * does with trim_blocks=True and lstrip_blocks=True:
 *   - "\r\n" and "\r" become "\n"; one trailing newline is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}" etc.
 *     all whitespace after it;
 *   - a block or comment tag alone on its line (after spaces/tabs) takes the
 *     indentation with it (lstrip_blocks), unless opened with "{%+";
 *   - the first newline after "%}" or "#}" is removed (trim_blocks), unless
 *     closed with "+%}";
 *   - "{% raw %}...{% endraw %}" is data;
 *   - inside tags, "%}" / "}}" only end the tag outside brackets.
 * String literals are unescaped like Python's unicode-escape codec.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

typedef struct lexer {
    cq_jarena *a;
    const char *s;
    size_t n;
    size_t pos;
    uint32_t line;
    cq_jtok *toks;
    size_t ntoks, cap;
    bool line_starting;
} lexer;

static cq_status push(lexer *L, cq_jtok t) {
    if (L->ntoks == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256, sz;
        if (!cq_mul_size(nc, sizeof(cq_jtok), &sz)) return cq_fail(CQ_ERR_NOMEM, "too many tokens");
        cq_jtok *nt = cq_jarena_alloc(L->a, sz);
        if (!nt) return CQ_ERR_NOMEM;
        if (L->ntoks) memcpy(nt, L->toks, L->ntoks * sizeof(cq_jtok));
        L->toks = nt;
        L->cap = nc;
    }
    L->toks[L->ntoks++] = t;
    return CQ_OK;
}

static cq_status push_kind(lexer *L, int kind, uint32_t line) {
    cq_jtok t = {.kind = (uint8_t)kind, .line = line};
    return push(L, t);
}

static uint32_t count_nl(const char *s, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

/* Length of the whitespace code point at s[i] (0 if none). */
static size_t ws_at(const char *s, size_t n, size_t i) {
    size_t j = i;
    uint32_t cp = cq_utf8_next(s, n, &j);
    return cq_py_isspace(cp) ? j - i : 0;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    size_t k;
    while (i < n && (k = ws_at(s, n, i)) > 0) i += k;
    return i;
}

/* Length of text after right-stripping Python whitespace. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t end = n, i = 0, last_non_ws = 0;
    (void)end;
    while (i < n) {
        size_t st = i;
        uint32_t cp = cq_utf8_next(s, n, &i);
        if (!cq_py_isspace(cp)) last_non_ws = i;
        (void)st;
    }
    return last_non_ws;
}

static bool all_ws(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp = cq_utf8_next(s, n, &i);
        if (!cq_py_isspace(cp)) return false;
    }
    return true;
}

/* Emit the text before a tag, applying "-" stripping or lstrip_blocks. */
static cq_status emit_text(lexer *L, size_t start, size_t end, char sign, bool lstrip_ok) {
    const char *t = L->s + start;
    size_t n = end - start;
    if (sign == '-') {
        n = rstrip_len(t, n);
    } else if (sign != '+' && lstrip_ok) {
        size_t l_pos = 0;
        for (size_t i = n; i > 0; i--)
            if (t[i - 1] == '\n') {
                l_pos = i;
                break;
            }
        if ((l_pos > 0 || L->line_starting) && n > l_pos && all_ws(t + l_pos, n - l_pos)) n = l_pos;
    }
    uint32_t line = L->line;
    L->line += count_nl(L->s + start, end - start);
    if (n == 0) return CQ_OK;
    const cq_jstr *d = cq_jstr_new(L->a, t, n);
    if (!d) return CQ_ERR_NOMEM;
    cq_jtok tok = {.kind = CQ_JT_DATA, .line = line, .text = d};
    return push(L, tok);
}

/* ---- string literal unescaping (Python unicode-escape) ------------------- */
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static cq_status unescape(lexer *L, const char *s, size_t n, uint32_t line, const cq_jstr **out) {
    char *buf = cq_jarena_alloc(L->a, n + 1);
    if (!buf) return CQ_ERR_NOMEM;
    size_t o = 0, i = 0;
    while (i < n) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            buf[o++] = c;
            i++;
            continue;
        }
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': buf[o++] = '\\'; break;
        case '\'': buf[o++] = '\''; break;
        case '"': buf[o++] = '"'; break;
        case 'a': buf[o++] = '\a'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'v': buf[o++] = '\v'; break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            uint32_t v = (uint32_t)(e - '0');
            for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++, i++)
                v = v * 8 + (uint32_t)(s[i] - '0');
            char u[4];
            size_t m = cq_utf8_put(v, u);
            memcpy(buf + o, u, m);
            o += m;
            break;
        }
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + (size_t)k < n ? hexval(s[i + (size_t)k]) : -1;
                if (h < 0)
                    return cq_jinja_err(CQ_ERR_PARSE, line, "truncated \\%c escape in a string", e);
                v = v * 16 + (uint32_t)h;
            }
            i += (size_t)digits;
            if (v > 0x10ffff)
                return cq_jinja_err(CQ_ERR_PARSE, line, "illegal Unicode character in a string");
            char u[4];
            size_t m = cq_utf8_put(v, u);
            memcpy(buf + o, u, m);
            o += m;
            break;
        }
        case 'N':
            return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "\\N{...} escapes are not supported");
        default:
            /* Unknown escapes keep the backslash, as Python does. */
            buf[o++] = '\\';
            buf[o++] = e;
            break;
        }
    }
    *out = cq_jstr_new(L->a, buf, o);
    return *out ? CQ_OK : CQ_ERR_NOMEM;
}

/* ---- numbers ---------------------------------------------------------------- */
static bool isdig(char c) { return c >= '0' && c <= '9'; }

/* (\d+_)*\d+ starting at i; returns end or i when nothing matched. */
static size_t digits_us(const char *s, size_t n, size_t i) {
    size_t j = i;
    if (j >= n || !isdig(s[j])) return i;
    while (j < n && isdig(s[j])) j++;
    while (j + 1 < n && s[j] == '_' && isdig(s[j + 1])) {
        j++;
        while (j < n && isdig(s[j])) j++;
    }
    return j;
}

static size_t match_float(const char *s, size_t n, size_t i) {
    if (i > 0 && s[i - 1] == '.') return 0;
    size_t j = digits_us(s, n, i);
    if (j == i) return 0;
    size_t frac_end = j;
    if (j + 1 < n && s[j] == '.' && isdig(s[j + 1])) frac_end = digits_us(s, n, j + 1);
    size_t k = frac_end;
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        size_t m = k + 1;
        if (m < n && (s[m] == '+' || s[m] == '-')) m++;
        size_t e = digits_us(s, n, m);
        if (e > m) return e - i;
    }
    if (frac_end > j) return frac_end - i;
    return 0;
}

static size_t match_int(const char *s, size_t n, size_t i, int *base) {
    *base = 10;
    if (i + 1 < n && s[i] == '0' && strchr("bBoOxX", s[i + 1]) && s[i + 1]) {
        char k = (char)(s[i + 1] | 32);
        *base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        size_t j = i + 2, groups = 0;
        for (;;) {
            size_t m = j;
            if (m < n && s[m] == '_') m++;
            int h = m < n ? hexval(s[m]) : -1;
            if (h < 0 || h >= *base) break;
            j = m + 1;
            groups++;
        }
        if (groups) return j - i;
        *base = 10;
        return 1; /* just the "0" */
    }
    if (i < n && s[i] >= '1' && s[i] <= '9') {
        size_t j = i + 1;
        for (;;) {
            size_t m = j;
            if (m < n && s[m] == '_') m++;
            if (m < n && isdig(s[m])) j = m + 1;
            else break;
        }
        return j - i;
    }
    if (i < n && s[i] == '0') {
        size_t j = i + 1;
        for (;;) {
            size_t m = j;
            if (m < n && s[m] == '_') m++;
            if (m < n && s[m] == '0') j = m + 1;
            else break;
        }
        return j - i;
    }
    return 0;
}

static cq_status lex_number(lexer *L, size_t flen, size_t ilen, int base) {
    const char *p = L->s + L->pos;
    size_t len = flen ? flen : ilen;
    char buf[128];
    size_t o = 0;
    for (size_t k = 0; k < len && o + 1 < sizeof buf; k++)
        if (p[k] != '_') buf[o++] = p[k];
    buf[o] = 0;
    cq_jtok t = {.line = L->line};
    if (flen) {
        if (len >= sizeof buf - 1)
            return cq_jinja_err(CQ_ERR_UNSUPPORTED, L->line, "number literal too long");
        t.kind = CQ_JT_FLOAT;
        t.fval = strtod(buf, NULL);
    } else {
        t.kind = CQ_JT_INT;
        const char *d = base == 10 ? buf : buf + 2;
        uint64_t v = 0;
        for (; *d; d++) {
            int h = hexval(*d);
            if (v > (UINT64_MAX - (uint64_t)h) / (uint64_t)base || v * (uint64_t)base + (uint64_t)h > (uint64_t)INT64_MAX)
                return cq_jinja_err(CQ_ERR_UNSUPPORTED, L->line,
                                    "integer literal does not fit in 64 bits");
            v = v * (uint64_t)base + (uint64_t)h;
        }
        t.ival = (int64_t)v;
    }
    L->pos += len;
    return push(L, t);
}

/* ---- tags ------------------------------------------------------------------------ */
static const char *const g_ops2[] = {"//", "**", "==", "!=", ">=", "<="};
static const uint8_t g_ops2_id[] = {CQ_JTO_FLOORDIV, CQ_JTO_POW, CQ_JTO_EQ,
                                    CQ_JTO_NE, CQ_JTO_GTEQ, CQ_JTO_LTEQ};
static const char g_ops1[] = "+-/*%~[](){}><=.:|,;";
static const uint8_t g_ops1_id[] = {CQ_JTO_ADD, CQ_JTO_SUB, CQ_JTO_DIV, CQ_JTO_MUL, CQ_JTO_MOD,
                                    CQ_JTO_TILDE, CQ_JTO_LBRACKET, CQ_JTO_RBRACKET,
                                    CQ_JTO_LPAREN, CQ_JTO_RPAREN, CQ_JTO_LBRACE, CQ_JTO_RBRACE,
                                    CQ_JTO_GT, CQ_JTO_LT, CQ_JTO_ASSIGN, CQ_JTO_DOT,
                                    CQ_JTO_COLON, CQ_JTO_PIPE, CQ_JTO_COMMA, CQ_JTO_SEMICOLON};

static bool is_name_start(char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

/* Lex the inside of a {{ }} (is_block false) or {% %} tag, including its end. */
static cq_status lex_tag(lexer *L, bool is_block, uint32_t open_line) {
    char stack[256];
    size_t depth = 0;
    const char *s = L->s;
    size_t n = L->n;
    for (;;) {
        if (L->pos >= n)
            return cq_jinja_err(CQ_ERR_PARSE, open_line, "unexpected end of template, expected '%s'",
                                is_block ? "%}" : "}}");
        size_t i = L->pos;
        char c = s[i];
        if (depth == 0) {
            /* end of tag */
            if (is_block) {
                if (c == '+' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
                    L->pos = i + 3;
                    L->line_starting = false;
                    return push_kind(L, CQ_JT_BLOCK_END, L->line);
                }
                if (c == '-' && i + 2 < n && s[i + 1] == '%' && s[i + 2] == '}') {
                    size_t e = skip_ws(s, n, i + 3);
                    CQ_TRY(push_kind(L, CQ_JT_BLOCK_END, L->line));
                    L->line += count_nl(s + i, e - i);
                    L->line_starting = e > i + 3 && s[e - 1] == '\n';
                    L->pos = e;
                    return CQ_OK;
                }
                if (c == '%' && i + 1 < n && s[i + 1] == '}') {
                    size_t e = i + 2;
                    CQ_TRY(push_kind(L, CQ_JT_BLOCK_END, L->line));
                    if (e < n && s[e] == '\n') {
                        e++;
                        L->line++;
                        L->line_starting = true;
                    } else {
                        L->line_starting = false;
                    }
                    L->pos = e;
                    return CQ_OK;
                }
            } else {
                if (c == '-' && i + 2 < n && s[i + 1] == '}' && s[i + 2] == '}') {
                    size_t e = skip_ws(s, n, i + 3);
                    CQ_TRY(push_kind(L, CQ_JT_VAR_END, L->line));
                    L->line += count_nl(s + i, e - i);
                    L->line_starting = e > i + 3 && s[e - 1] == '\n';
                    L->pos = e;
                    return CQ_OK;
                }
                if (c == '}' && i + 1 < n && s[i + 1] == '}') {
                    L->pos = i + 2;
                    L->line_starting = false;
                    return push_kind(L, CQ_JT_VAR_END, L->line);
                }
            }
        }
        size_t w = ws_at(s, n, i);
        if (w) {
            size_t e = skip_ws(s, n, i);
            L->line += count_nl(s + i, e - i);
            L->pos = e;
            continue;
        }
        int base = 10;
        size_t fl = match_float(s, n, i);
        size_t il = fl ? 0 : match_int(s, n, i, &base);
        if (fl || il) {
            CQ_TRY(lex_number(L, fl, il, base));
            continue;
        }
        if (is_name_start(c) || c == '_') {
            size_t j = i + 1;
            while (j < n && (is_name_start(s[j]) || s[j] == '_' || isdig(s[j]))) j++;
            if (j < n && (unsigned char)s[j] >= 0x80)
                return cq_jinja_err(CQ_ERR_UNSUPPORTED, L->line, "non-ASCII identifiers are not supported");
            const cq_jstr *nm = cq_jstr_new(L->a, s + i, j - i);
            if (!nm) return CQ_ERR_NOMEM;
            cq_jtok t = {.kind = CQ_JT_NAME, .line = L->line, .text = nm};
            CQ_TRY(push(L, t));
            L->pos = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c) j += (s[j] == '\\' && j + 1 < n) ? 2 : 1;
            if (j >= n) return cq_jinja_err(CQ_ERR_PARSE, L->line, "unterminated string literal");
            cq_jtok t = {.kind = CQ_JT_STRING, .line = L->line};
            CQ_TRY(unescape(L, s + i + 1, j - i - 1, L->line, &t.text));
            CQ_TRY(push(L, t));
            L->line += count_nl(s + i, j - i);
            L->pos = j + 1;
            continue;
        }
        int op = -1;
        size_t olen = 0;
        for (size_t k = 0; k < CQ_ARRAY_LEN(g_ops2); k++)
            if (i + 1 < n && s[i] == g_ops2[k][0] && s[i + 1] == g_ops2[k][1]) {
                op = g_ops2_id[k];
                olen = 2;
                break;
            }
        if (op < 0) {
            const char *p = c ? strchr(g_ops1, c) : NULL;
            if (p) {
                op = g_ops1_id[p - g_ops1];
                olen = 1;
            }
        }
        if (op < 0) {
            if ((unsigned char)c >= 0x80)
                return cq_jinja_err(CQ_ERR_UNSUPPORTED, L->line,
                                    "non-ASCII characters outside strings are not supported");
            return cq_jinja_err(CQ_ERR_PARSE, L->line, "unexpected char '%c'", c);
        }
        if (op == CQ_JTO_LBRACE || op == CQ_JTO_LPAREN || op == CQ_JTO_LBRACKET) {
            if (depth == sizeof stack)
                return cq_jinja_err(CQ_ERR_PARSE, L->line, "brackets nested too deeply");
            stack[depth++] = op == CQ_JTO_LBRACE ? '}' : op == CQ_JTO_LPAREN ? ')' : ']';
        } else if (op == CQ_JTO_RBRACE || op == CQ_JTO_RPAREN || op == CQ_JTO_RBRACKET) {
            if (depth == 0) return cq_jinja_err(CQ_ERR_PARSE, L->line, "unexpected '%c'", c);
            if (stack[depth - 1] != c)
                return cq_jinja_err(CQ_ERR_PARSE, L->line, "unexpected '%c', expected '%c'", c,
                                    stack[depth - 1]);
            depth--;
        }
        cq_jtok t = {.kind = CQ_JT_OP, .op = (uint8_t)op, .line = L->line};
        CQ_TRY(push(L, t));
        L->pos = i + olen;
    }
}

/* {%[-+]?\s*raw\s*(-%}\s*|%}) at i: returns the length of the opener or 0. */
static size_t match_raw_open(const char *s, size_t n, size_t i, char *sign, bool *strip_after) {
    size_t j = i + 2;
    *sign = 0;
    if (j < n && (s[j] == '-' || s[j] == '+')) *sign = s[j++];
    j = skip_ws(s, n, j);
    if (n - j < 3 || memcmp(s + j, "raw", 3) != 0) return 0;
    j = skip_ws(s, n, j + 3);
    if (n - j >= 3 && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') {
        *strip_after = true;
        return skip_ws(s, n, j + 3) - i;
    }
    if (n - j >= 2 && s[j] == '%' && s[j + 1] == '}') {
        *strip_after = false;
        return j + 2 - i;
    }
    return 0;
}

static cq_status lex_raw(lexer *L) {
    const char *s = L->s;
    size_t n = L->n;
    size_t start = L->pos;
    for (size_t i = start; i + 1 < n; i++) {
        if (s[i] != '{' || s[i + 1] != '%') continue;
        size_t j = i + 2;
        char sign = 0;
        if (j < n && (s[j] == '-' || s[j] == '+')) sign = s[j++];
        j = skip_ws(s, n, j);
        if (n - j < 6 || memcmp(s + j, "endraw", 6) != 0) continue;
        j = skip_ws(s, n, j + 6);
        size_t end;
        if (n - j >= 3 && s[j] == '+' && s[j + 1] == '%' && s[j + 2] == '}') end = j + 3;
        else if (n - j >= 3 && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}')
            end = skip_ws(s, n, j + 3);
        else if (n - j >= 2 && s[j] == '%' && s[j + 1] == '}') {
            end = j + 2;
            if (end < n && s[end] == '\n') end++;
        } else continue;
        CQ_TRY(emit_text(L, start, i, sign, true));
        L->line += count_nl(s + i, end - i);
        L->line_starting = s[end - 1] == '\n';
        L->pos = end;
        return CQ_OK;
    }
    return cq_jinja_err(CQ_ERR_PARSE, L->line, "missing end of raw directive");
}

cq_status cq_jinja_lex(cq_jarena *a, const char *src, size_t len, cq_jtok **toks, size_t *ntoks) {
    /* Normalize newlines and drop one trailing newline (keep_trailing_newline
     * is off). */
    char *s = cq_jarena_alloc(a, len + 1);
    if (!s) return CQ_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    lexer L = {.a = a, .s = s, .n = n, .line = 1, .line_starting = true};
    while (L.pos < n) {
        /* find the next tag opener */
        size_t i = L.pos;
        size_t found = n;
        char kind = 0;
        for (; i + 1 < n; i++) {
            if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
                found = i;
                kind = s[i + 1];
                break;
            }
        }
        if (found == n) {
            size_t start = L.pos;
            L.line_starting = false;
            CQ_TRY(emit_text(&L, start, n, 0, false));
            L.pos = n;
            break;
        }
        char sign = 0, rsign;
        bool raw_strip_after = false;
        size_t rawlen = kind == '%' ? match_raw_open(s, n, found, &rsign, &raw_strip_after) : 0;
        if (rawlen) {
            CQ_TRY(emit_text(&L, L.pos, found, rsign, true));
            L.line += count_nl(s + found, rawlen);
            L.pos = found + rawlen;
            L.line_starting = s[L.pos - 1] == '\n';
            CQ_TRY(lex_raw(&L));
            continue;
        }
        size_t after = found + 2;
        if (after < n && (s[after] == '-' || s[after] == '+')) sign = s[after++];
        CQ_TRY(emit_text(&L, L.pos, found, sign, kind != '{'));
        L.pos = after;
        uint32_t open_line = L.line;
        if (kind == '#') {
            size_t j = after;
            size_t end = 0;
            for (; j + 1 < n; j++) {
                if (s[j] == '#' && s[j + 1] == '}') break;
            }
            if (j + 1 >= n) return cq_jinja_err(CQ_ERR_PARSE, open_line, "missing end of comment tag");
            if (j > after && s[j - 1] == '-') end = skip_ws(s, n, j + 2);
            else if (j > after && s[j - 1] == '+') end = j + 2;
            else {
                end = j + 2;
                if (end < n && s[end] == '\n') end++;
            }
            L.line += count_nl(s + after, end - after);
            L.line_starting = s[end - 1] == '\n';
            L.pos = end;
        } else if (kind == '{') {
            CQ_TRY(push_kind(&L, CQ_JT_VAR_BEGIN, open_line));
            CQ_TRY(lex_tag(&L, false, open_line));
        } else {
            CQ_TRY(push_kind(&L, CQ_JT_BLOCK_BEGIN, open_line));
            CQ_TRY(lex_tag(&L, true, open_line));
        }
    }
    CQ_TRY(push_kind(&L, CQ_JT_EOF, L.line));
    *toks = L.toks;
    *ntoks = L.ntoks;
    return CQ_OK;
}
