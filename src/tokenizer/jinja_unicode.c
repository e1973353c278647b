/*
 * jinja_unicode.c — code points in UTF-8 strings and the character classes
 * and case mappings Python's str methods use (isspace, upper/lower with the
 * one-to-many special cases, isalpha, isdigit), from utf8proc when present.
 * A byte that is not valid UTF-8 decodes to itself, so every byte string
 * has a defined length and iteration.
 */
#include <string.h>

#include "tokenizer/jinja_impl.h"

#ifdef CQ_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

/* ---- UTF-8 --------------------------------------------------------------------------- */
uint32_t cq_utf8_next(const char *s_, size_t n, size_t *i) {
    const unsigned char *s = (const unsigned char *)s_;
    size_t p = *i;
    unsigned char c = s[p];
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
        *i = p + 1;
        return c;
    } else if ((c & 0xe0) == 0xc0) {
        cp = c & 0x1f;
        len = 2;
    } else if ((c & 0xf0) == 0xe0) {
        cp = c & 0x0f;
        len = 3;
    } else if ((c & 0xf8) == 0xf0) {
        cp = c & 0x07;
        len = 4;
    } else {
        *i = p + 1;
        return c;
    }
    if (n - p < len) {
        *i = p + 1;
        return c;
    }
    for (size_t k = 1; k < len; k++) {
        if ((s[p + k] & 0xc0) != 0x80) {
            *i = p + 1;
            return c;
        }
        cp = (cp << 6) | (s[p + k] & 0x3f);
    }
    /* Overlong forms and out-of-range values decode as single bytes too. */
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff) {
        *i = p + 1;
        return c;
    }
    *i = p + len;
    return cp;
}

size_t cq_utf8_put(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t cq_utf8_count(const char *s, size_t n) {
    size_t i = 0, c = 0;
    while (i < n) {
        cq_utf8_next(s, n, &i);
        c++;
    }
    return c;
}

size_t cq_utf8_offset(const char *s, size_t n, size_t cp) {
    size_t i = 0;
    while (cp-- > 0 && i < n) cq_utf8_next(s, n, &i);
    return i;
}

bool cq_py_isspace(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x1c: case 0x1d: case 0x1e:
    case 0x1f: case 0x20: case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202f: case 0x205f: case 0x3000:
        return true;
    default: return cp >= 0x2000 && cp <= 0x200a;
    }
}

uint32_t cq_py_upper(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
#ifdef CQ_HAVE_UTF8PROC
    if (cp <= 0x10ffff) return (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp);
#endif
    return cp;
}

uint32_t cq_py_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
#ifdef CQ_HAVE_UTF8PROC
    if (cp <= 0x10ffff) return (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
#endif
    return cp;
}

size_t cq_py_case_full(uint32_t cp, bool upper, uint32_t out[3]) {
    /* The SpecialCasing entries Python applies that a one-to-one mapping
     * cannot express (the common ones; the rest map one-to-one). */
    static const struct {
        uint32_t cp;
        uint32_t to[3];
        uint8_t n;
    } up[] = {{0xdf, {'S', 'S'}, 2},        {0x149, {0x2bc, 'N'}, 2}, {0xfb00, {'F', 'F'}, 2},
              {0xfb01, {'F', 'I'}, 2},      {0xfb02, {'F', 'L'}, 2},  {0xfb03, {'F', 'F', 'I'}, 3},
              {0xfb04, {'F', 'F', 'L'}, 3}, {0xfb05, {'S', 'T'}, 2},  {0xfb06, {'S', 'T'}, 2}};
    if (upper) {
        for (size_t i = 0; i < CQ_ARRAY_LEN(up); i++)
            if (up[i].cp == cp) {
                memcpy(out, up[i].to, sizeof up[i].to);
                return up[i].n;
            }
        out[0] = cq_py_upper(cp);
        return 1;
    }
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = cq_py_lower(cp);
    return 1;
}

bool cq_py_isalpha(uint32_t cp) {
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
#ifdef CQ_HAVE_UTF8PROC
    if (cp > 0x10ffff) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
#else
    return false;
#endif
}

bool cq_py_isdigit(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
#ifdef CQ_HAVE_UTF8PROC
    if (cp > 0x10ffff) return false;
    return utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_ND;
#else
    return false;
#endif
}
