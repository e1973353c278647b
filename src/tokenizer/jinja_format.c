/*
 * jinja_format.c — Python string formatting as templates use it:
 * printf-style `fmt % args` (also the |format filter) and str.format with
 * positional, numbered and named fields, attribute/index lookups through the
 * sandbox, !r/!s conversions and the common format-spec subset (fill, align,
 * sign, zero padding, width, grouping, precision, s d f e g x o b %). On a
 * Markup format string the arguments are escaped, as markupsafe does.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

/* ---- printf-style % formatting ----------------------------------------------------------- */
static cq_status pct_arg(const cq_jlist *tuple, cq_jv single, bool is_tuple, size_t *next, uint32_t line,
                         cq_jv *out) {
    if (is_tuple) {
        if (*next >= tuple->n)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not enough arguments for format string");
        *out = tuple->v[(*next)++];
        return CQ_OK;
    }
    if (*next >= 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not enough arguments for format string");
    (*next)++;
    *out = single;
    return CQ_OK;
}

static cq_status pad_field(cq_jrender *r, cq_jbuf *b, const char *s, size_t n, int64_t width,
                           bool left) {
    int64_t len = (int64_t)cq_utf8_count(s, n);
    if (!left)
        for (int64_t k = len; k < width; k++) CQ_TRY(cq_jbuf_append(r, b, " ", 1));
    CQ_TRY(cq_jbuf_append(r, b, s, n));
    if (left)
        for (int64_t k = len; k < width; k++) CQ_TRY(cq_jbuf_append(r, b, " ", 1));
    return CQ_OK;
}

cq_status cq_jinja_str_mod(cq_jrender *r, const cq_jstr *fmt, cq_jv args, uint32_t line, cq_jv *out,
                           bool markup) {
    bool is_tuple = args.kind == CQ_JV_LIST && args.u.list->tuple;
    bool is_map = args.kind == CQ_JV_DICT;
    /* Python treats any argument with __getitem__ (but a tuple or str) as a
     * mapping: it never complains about unused arguments then. */
    bool mapping_like = is_map || args.kind == CQ_JV_UNDEF ||
                        (args.kind == CQ_JV_LIST && !args.u.list->tuple && !args.u.list->gen);
    const cq_jlist *tuple = is_tuple ? args.u.list : NULL;
    size_t next = 0;
    bool used_map = false;
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    const char *s = fmt->s;
    size_t n = fmt->len, i = 0;
    while (i < n && st == CQ_OK) {
        if (s[i] != '%') {
            size_t j = i;
            while (j < n && s[j] != '%') j++;
            st = cq_jbuf_append(r, &b, s + i, j - i);
            i = j;
            continue;
        }
        i++;
        if (i >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format");
            break;
        }
        cq_jv val;
        bool have_val = false;
        if (s[i] == '(') {
            size_t k = i + 1;
            int depth = 1;
            while (k < n && depth) {
                if (s[k] == '(') depth++;
                else if (s[k] == ')') depth--;
                k++;
            }
            if (depth) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format key");
                break;
            }
            if (!is_map) {
                st = args.kind == CQ_JV_UNDEF ? cq_jv_undef_error(args, line)
                                              : cq_jinja_err(CQ_ERR_INVALID_ARG, line, "format requires a mapping");
                break;
            }
            cq_jv *x = cq_jdict_get_str(args.u.dict, s + i + 1, k - i - 2);
            if (!x) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "missing format key");
                break;
            }
            val = *x;
            have_val = true;
            used_map = true;
            i = k;
        }
        bool left = false, plus = false, space = false, zero = false, alt = false;
        for (; i < n && strchr("-+ 0#", s[i]) && s[i]; i++) {
            if (s[i] == '-') left = true;
            else if (s[i] == '+') plus = true;
            else if (s[i] == ' ') space = true;
            else if (s[i] == '0') zero = true;
            else alt = true;
        }
        int64_t width = -1, prec = -1;
        if (i < n && s[i] == '*') {
            st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "'*' width in %% formatting is not supported");
            break;
        }
        while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000) width = (width < 0 ? 0 : width) * 10 + (s[i++] - '0');
        if (i < n && s[i] == '.') {
            i++;
            prec = 0;
            while (i < n && s[i] >= '0' && s[i] <= '9' && prec < 100000) prec = prec * 10 + (s[i++] - '0');
        }
        while (i < n && (s[i] == 'l' || s[i] == 'h' || s[i] == 'L')) i++;
        if (i >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format");
            break;
        }
        char type = s[i++];
        if (type == '%') {
            st = cq_jbuf_append(r, &b, "%", 1);
            continue;
        }
        if (width > 100000 || prec > 1000) {
            st = cq_jinja_err(CQ_ERR_BOUNDS, line, "format width or precision too large");
            break;
        }
        if (!have_val) {
            if (is_map) val = args; /* "%s" % {...} prints the dict */
            else {
                st = pct_arg(tuple, args, is_tuple, &next, line, &val);
                if (st != CQ_OK) break;
            }
        }
        if (type == 's' || type == 'r' || type == 'a') {
            cq_jbuf t = {0};
            if (markup && type == 's') {
                /* Markup % args escapes the arguments */
                cq_jv ev;
                st = cq_jinja_escape(r, val, false, line, &ev);
                if (st == CQ_OK) st = cq_jbuf_append(r, &t, ev.u.s->s, ev.u.s->len);
            } else {
                st = type == 's' ? cq_jv_str_append(r, &t, val, line) : cq_jv_repr_append(r, &t, val, line);
                if (st == CQ_OK && markup) {
                    const cq_jstr *rs = NULL;
                    cq_jv ev;
                    st = cq_jbuf_to_str(r, &t, &rs);
                    if (st == CQ_OK) st = cq_jinja_escape(r, cq_jv_strv(rs), false, line, &ev);
                    if (st == CQ_OK) {
                        t.len = 0;
                        st = cq_jbuf_append(r, &t, ev.u.s->s, ev.u.s->len);
                    }
                }
            }
            if (st == CQ_OK) {
                size_t len = t.len;
                if (prec >= 0) len = cq_utf8_offset(t.p ? t.p : "", t.len, (size_t)prec);
                st = pad_field(r, &b, t.p ? t.p : "", len, width, left);
            }
            cq_jbuf_free(&t);
            continue;
        }
        char spec[32], tmp[1536];
        size_t o = 0;
        spec[o++] = '%';
        if (left) spec[o++] = '-';
        if (plus) spec[o++] = '+';
        if (space) spec[o++] = ' ';
        if (zero) spec[o++] = '0';
        if (alt) spec[o++] = '#';
        spec[o++] = '*';
        spec[o++] = '.';
        spec[o++] = '*';
        if (strchr("diuoxX", type)) {
            int64_t iv;
            if (val.kind == CQ_JV_FLOAT && strchr("diu", type)) {
                if (!isfinite(val.u.f) || fabs(val.u.f) >= 9.2e18) {
                    st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "cannot format this float as an integer");
                    break;
                }
                iv = (int64_t)val.u.f;
            } else if (val.kind == CQ_JV_INT || val.kind == CQ_JV_BOOL) {
                iv = val.kind == CQ_JV_BOOL ? val.u.b : val.u.i;
            } else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%%%c format: a real number is required, not %s",
                                  type, cq_jv_type_name(val));
                break;
            }
            spec[o++] = 'l';
            spec[o++] = 'l';
            spec[o++] = type == 'i' || type == 'u' ? 'd' : type;
            spec[o] = 0;
            /* Python's alternate octal prefix is 0o, not 0. */
            if (alt && type == 'o') {
                st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "%%#o is not supported");
                break;
            }
            snprintf(tmp, sizeof tmp, spec, (int)(width < 0 ? 0 : width), (int)(prec < 0 ? 1 : prec), (long long)iv);
            st = cq_jbuf_puts(r, &b, tmp);
        } else if (strchr("eEfFgG", type)) {
            double fv;
            if (val.kind == CQ_JV_FLOAT) fv = val.u.f;
            else if (val.kind == CQ_JV_INT || val.kind == CQ_JV_BOOL) fv = (double)(val.kind == CQ_JV_BOOL ? val.u.b : val.u.i);
            else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "must be real number, not %s", cq_jv_type_name(val));
                break;
            }
            spec[o++] = type;
            spec[o] = 0;
            snprintf(tmp, sizeof tmp, spec, (int)(width < 0 ? 0 : width), (int)(prec < 0 ? 6 : prec), fv);
            st = cq_jbuf_puts(r, &b, tmp);
        } else if (type == 'c') {
            char u[4];
            size_t m;
            if (val.kind == CQ_JV_INT && val.u.i >= 0 && val.u.i <= 0x10ffff) m = cq_utf8_put((uint32_t)val.u.i, u);
            else if (val.kind == CQ_JV_STR && cq_utf8_count(val.u.s->s, val.u.s->len) == 1) {
                m = val.u.s->len;
                memcpy(u, val.u.s->s, m);
            } else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%%c requires int or char");
                break;
            }
            st = pad_field(r, &b, u, m, width, left);
        } else {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "unsupported format character '%c'", type);
        }
    }
    if (st == CQ_OK && !mapping_like && !used_map) {
        size_t total = is_tuple ? tuple->n : 1;
        if (next < total)
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not all arguments converted during string formatting");
    }
    if (st == CQ_OK && n == 0) {
        cq_jbuf_free(&b);
        CQ_TRY(cq_jv_new_str(r, "", 0, out));
    } else {
        CQ_TRY(cq_jv_from_buf(r, &b, st, out));
    }
    out->markup = markup;
    return CQ_OK;
}

/* ---- str.format ------------------------------------------------------------------------------ */
static cq_status format_spec(cq_jrender *r, cq_jbuf *b, cq_jv v, const char *spec, size_t n,
                             uint32_t line) {
    if (n == 0) return cq_jv_str_append(r, b, v, line);
    size_t i = 0;
    char fill = ' ', align = 0, sign = 0;
    bool zero = false;
    int64_t width = -1, prec = -1;
    if (n >= 2 && strchr("<>^=", spec[1]) && spec[1]) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (strchr("<>^=", spec[0]) && spec[0]) {
        align = spec[0];
        i = 1;
    }
    if (i < n && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
    if (i < n && spec[i] == '0') {
        zero = true;
        i++;
    }
    while (i < n && spec[i] >= '0' && spec[i] <= '9' && width < 100000) width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0');
    char group = 0;
    if (i < n && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
    if (i < n && spec[i] == '.') {
        i++;
        prec = 0;
        while (i < n && spec[i] >= '0' && spec[i] <= '9' && prec < 1000) prec = prec * 10 + (spec[i++] - '0');
    }
    char type = 0;
    if (i < n) type = spec[i++];
    if (group && (type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'e' || type == 'E' ||
                  type == 'g' || type == 'G'))
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "digit grouping with '%c' is not supported", type);
    if (i != n || (type && !strchr("sdfFeEgGxXob%", type)) || (unsigned char)fill >= 0x80)
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "format spec '%.*s' is not supported", (int)n, spec);
    if (width > 100000) return cq_jinja_err(CQ_ERR_BOUNDS, line, "format width too large");
    char tmp[1536];
    const char *body;
    size_t blen;
    cq_jbuf t = {0};
    bool numeric = false;
    if (v.kind == CQ_JV_STR || (!cq_jv_is_num(v))) {
        if (type && type != 's')
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code '%c' for object of type '%s'",
                                type, cq_jv_type_name(v));
        CQ_TRY(cq_jv_str_append(r, &t, v, line));
        body = t.p ? t.p : "";
        blen = t.len;
        if (prec >= 0) blen = cq_utf8_offset(body, blen, (size_t)prec);
        if (!align) align = '<';
    } else {
        numeric = true;
        bool is_float = v.kind == CQ_JV_FLOAT || (type && strchr("fFeEgG%", type));
        double fv = v.kind == CQ_JV_FLOAT ? v.u.f : (double)(v.kind == CQ_JV_BOOL ? v.u.b : v.u.i);
        char sg[2] = {sign == '+' || sign == ' ' ? sign : 0, 0};
        if (type == 's')
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code 's' for a number");
        if (!is_float) {
            if (v.kind == CQ_JV_FLOAT) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code for float");
            long long iv = v.kind == CQ_JV_BOOL ? v.u.b : v.u.i;
            char ty = type ? type : 'd';
            if (ty == 'b') {
                char bits[80];
                int k = 0;
                unsigned long long u = iv < 0 ? 0ULL - (unsigned long long)iv : (unsigned long long)iv;
                do {
                    bits[k++] = (char)('0' + (u & 1));
                    u >>= 1;
                } while (u);
                size_t o = 0;
                if (iv < 0) tmp[o++] = '-';
                else if (sg[0]) tmp[o++] = sg[0];
                while (k) tmp[o++] = bits[--k];
                tmp[o] = 0;
            } else {
                char f[8] = {'%', 0};
                size_t o = 1;
                if (sg[0]) f[o++] = sg[0];
                f[o++] = 'l';
                f[o++] = 'l';
                f[o++] = ty;
                f[o] = 0;
                snprintf(tmp, sizeof tmp, f, iv);
            }
        } else {
            char ty = type ? type : 'g';
            bool pct = ty == '%';
            if (pct) {
                fv *= 100;
                ty = 'f';
            }
            if (!type && prec < 0) {
                cq_py_float_repr(fv, tmp, sizeof tmp);
                if (sg[0] && fv >= 0) {
                    memmove(tmp + 1, tmp, strlen(tmp) + 1);
                    tmp[0] = sg[0];
                }
            } else {
                char f[12] = {'%', 0};
                size_t o = 1;
                if (sg[0]) f[o++] = sg[0];
                f[o++] = '.';
                f[o++] = '*';
                f[o++] = ty;
                f[o] = 0;
                snprintf(tmp, sizeof tmp, f, (int)(prec < 0 ? 6 : prec), fv);
                if (pct) strncat(tmp, "%", sizeof tmp - strlen(tmp) - 1);
            }
        }
        if (group) {
            /* insert the separator every three digits of the integer part */
            char g[sizeof tmp];
            size_t tl = strlen(tmp), st0 = (tmp[0] == '-' || tmp[0] == '+' || tmp[0] == ' ') ? 1 : 0, ie = st0;
            while (ie < tl && tmp[ie] >= '0' && tmp[ie] <= '9') ie++;
            size_t o = 0, nd = ie - st0;
            memcpy(g, tmp, st0);
            o = st0;
            for (size_t k = 0; k < nd; k++) {
                if (k && (nd - k) % 3 == 0) g[o++] = group;
                g[o++] = tmp[st0 + k];
            }
            if (o + (tl - ie) + 1 > sizeof g)
                return cq_jinja_err(CQ_ERR_BOUNDS, line, "formatted number too long");
            memcpy(g + o, tmp + ie, tl - ie + 1);
            memcpy(tmp, g, o + (tl - ie) + 1);
        }
        body = tmp;
        blen = strlen(tmp);
        if (!align) align = zero ? '=' : '>';
        if (zero && fill == ' ' && !(n >= 2 && strchr("<>^=", spec[1]) && spec[1])) fill = '0';
    }
    int64_t len = (int64_t)cq_utf8_count(body, blen);
    int64_t padn = width > len ? width - len : 0;
    cq_status st = CQ_OK;
    size_t signlen = numeric && align == '=' && blen && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    int64_t left = align == '<' ? 0 : align == '^' ? padn / 2 : padn;
    if (align == '=') {
        st = cq_jbuf_append(r, b, body, signlen);
        for (int64_t k = 0; k < padn && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
        if (st == CQ_OK) st = cq_jbuf_append(r, b, body + signlen, blen - signlen);
    } else {
        for (int64_t k = 0; k < left && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
        if (st == CQ_OK) st = cq_jbuf_append(r, b, body, blen);
        for (int64_t k = 0; k < padn - left && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
    }
    cq_jbuf_free(&t);
    return st;
}

cq_status cq_jinja_str_format(cq_jrender *r, const cq_jstr *fmt, const cq_jargs *a, uint32_t line,
                              cq_jv *out, bool markup) {
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    const char *s = fmt->s;
    size_t n = fmt->len, i = 0, auto_idx = 0;
    bool used_auto = false, used_manual = false;
    while (i < n && st == CQ_OK) {
        char c = s[i];
        if (c == '{' && i + 1 < n && s[i + 1] == '{') {
            st = cq_jbuf_append(r, &b, "{", 1);
            i += 2;
            continue;
        }
        if (c == '}' && i + 1 < n && s[i + 1] == '}') {
            st = cq_jbuf_append(r, &b, "}", 1);
            i += 2;
            continue;
        }
        if (c == '}') {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Single '}' encountered in format string");
            break;
        }
        if (c != '{') {
            size_t j = i;
            while (j < n && s[j] != '{' && s[j] != '}') j++;
            st = cq_jbuf_append(r, &b, s + i, j - i);
            i = j;
            continue;
        }
        size_t j = i + 1;
        int depth = 1;
        while (j < n && depth) {
            if (s[j] == '{') depth++;
            else if (s[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Single '{' encountered in format string");
            break;
        }
        const char *field = s + i + 1;
        size_t flen = j - i - 1;
        i = j + 1;
        /* split field into name[!conv][:spec] */
        size_t k = 0;
        while (k < flen && field[k] != '!' && field[k] != ':') k++;
        size_t name_len = k;
        char conv = 0;
        if (k < flen && field[k] == '!') {
            if (k + 1 < flen) conv = field[k + 1];
            k += 2;
        }
        const char *spec = "";
        size_t slen = 0;
        if (k < flen && field[k] == ':') {
            spec = field + k + 1;
            slen = flen - k - 1;
        }
        if (memchr(spec, '{', slen)) {
            st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "nested format fields are not supported");
            break;
        }
        /* first part of the name: index, keyword or empty */
        size_t p = 0;
        while (p < name_len && field[p] != '.' && field[p] != '[') p++;
        cq_jv v;
        if (p == 0) {
            if (used_manual) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "cannot switch from manual field specification to automatic field numbering");
                break;
            }
            used_auto = true;
            if (auto_idx >= a->npos) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Replacement index %zu out of range", auto_idx);
                break;
            }
            v = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            if (used_auto) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "cannot switch from automatic field numbering to manual field specification");
                break;
            }
            used_manual = true;
            size_t idx = 0;
            for (size_t q = 0; q < p && idx < 100000; q++) idx = idx * 10 + (size_t)(field[q] - '0');
            if (idx >= a->npos) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Replacement index %zu out of range", idx);
                break;
            }
            v = a->pos[idx];
        } else {
            bool found = false;
            for (size_t q = 0; q < a->nkw; q++)
                if (a->kwnames[q]->len == p && memcmp(a->kwnames[q]->s, field, p) == 0) {
                    v = a->kwvals[q];
                    found = true;
                }
            if (!found) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "format key '%.*s' not given", (int)p, field);
                break;
            }
        }
        /* .attr and [key] chains, through the sandboxed accessors */
        while (st == CQ_OK && p < name_len) {
            if (field[p] == '.') {
                size_t q = p + 1;
                while (q < name_len && field[q] != '.' && field[q] != '[') q++;
                const cq_jstr *an = cq_jstr_new(&r->arena, field + p + 1, q - p - 1);
                if (!an) st = CQ_ERR_NOMEM;
                else st = cq_jinja_getattr(r, v, an, line, &v);
                p = q;
            } else {
                size_t q = p + 1;
                while (q < name_len && field[q] != ']') q++;
                const char *key = field + p + 1;
                size_t kl = q - p - 1;
                bool digits = kl > 0 && kl < 18;
                int64_t num = 0;
                for (size_t z = 0; z < kl && digits; z++) {
                    if (key[z] < '0' || key[z] > '9') digits = false;
                    else num = num * 10 + (key[z] - '0');
                }
                cq_jv kv;
                if (digits) kv = cq_jv_int(num);
                else {
                    const cq_jstr *ks = cq_jstr_new(&r->arena, key, kl);
                    if (!ks) {
                        st = CQ_ERR_NOMEM;
                        break;
                    }
                    kv = cq_jv_strv(ks);
                }
                st = cq_jinja_getitem(r, v, kv, line, &v);
                p = q + 1;
            }
        }
        if (st != CQ_OK) break;
        if (conv == 'r' || conv == 'a') {
            cq_jbuf t = {0};
            st = cq_jv_repr_append(r, &t, v, line);
            const cq_jstr *x = NULL;
            if (st == CQ_OK) st = cq_jbuf_to_str(r, &t, &x);
            cq_jbuf_free(&t);
            if (st != CQ_OK) break;
            v = cq_jv_strv(x);
        } else if (conv == 's') {
            const cq_jstr *x = NULL;
            st = cq_jv_to_str(r, v, line, &x);
            if (st != CQ_OK) break;
            v = cq_jv_strv(x);
        } else if (conv) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown conversion specifier %c", conv);
            break;
        }
        if (v.kind == CQ_JV_UNDEF && slen) {
            st = cq_jv_undef_error(v, line);
            break;
        }
        if (!markup) {
            st = format_spec(r, &b, v, spec, slen, line);
        } else if (v.kind == CQ_JV_STR && v.markup && !slen) {
            st = cq_jbuf_append(r, &b, v.u.s->s, v.u.s->len);
        } else {
            /* Markup.format escapes every formatted field */
            cq_jbuf fb = {0};
            const cq_jstr *fs = NULL;
            cq_jv ev;
            st = format_spec(r, &fb, v, spec, slen, line);
            if (st == CQ_OK) st = cq_jbuf_to_str(r, &fb, &fs);
            cq_jbuf_free(&fb);
            if (st == CQ_OK) st = cq_jinja_escape(r, cq_jv_strv(fs), false, line, &ev);
            if (st == CQ_OK) st = cq_jbuf_append(r, &b, ev.u.s->s, ev.u.s->len);
        }
    }
    if (st == CQ_OK && n == 0) {
        cq_jbuf_free(&b);
        CQ_TRY(cq_jv_new_str(r, "", 0, out));
    } else {
        CQ_TRY(cq_jv_from_buf(r, &b, st, out));
    }
    out->markup = markup;
    return CQ_OK;
}

