/*
 * utf8.c — strict UTF-8 validation (no overlong forms, no surrogates, at
 * most U+10FFFF), for prompts and text chunks.
 */
#include <string.h>

#include "base/base.h"

long cq_utf8_invalid_at(const char *s) { return cq_utf8_invalid_at_n(s, strlen(s)); }

long cq_utf8_invalid_at_n(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *b = p, *e = p + len;
    while (p < e) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n;
        uint32_t cp;
        if ((*p & 0xe0) == 0xc0) n = 1, cp = *p & 0x1fu;
        else if ((*p & 0xf0) == 0xe0) n = 2, cp = *p & 0x0fu;
        else if ((*p & 0xf8) == 0xf0) n = 3, cp = *p & 0x07u;
        else return (long)(p - b);
        if (e - p <= n) return (long)(p - b); /* cut short */
        const unsigned char *q = p + 1;
        for (int i = 0; i < n; i++, q++) {
            if ((*q & 0xc0) != 0x80) return (long)(p - b);
            cp = (cp << 6) | (*q & 0x3fu);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return (long)(p - b);
        p = q;
    }
    return -1;
}
