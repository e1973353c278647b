/* utf8_check.h — the fuzz targets' check that decoded text is well-formed
 * UTF-8: every lead byte legal (no 0xC0/0xC1/0xF5+), every sequence complete. */
#ifndef CQ_FUZZ_UTF8_CHECK_H
#define CQ_FUZZ_UTF8_CHECK_H

#include <stddef.h>

static inline int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3
                 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        if (k == 0 || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

#endif
