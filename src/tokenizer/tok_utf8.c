/*
 * tok_utf8.c — UTF-8 validation and repair, and the few Unicode character
 * classes the tokenizer needs, defined the way Rust (and so Hugging Face
 * `tokenizers`) defines them.
 *
 * Repair follows the Unicode "maximal subpart" practice that Python's
 * decode(errors='replace') and Rust's from_utf8_lossy share: an ill-formed
 * sequence is replaced by one U+FFFD per maximal prefix of a well-formed
 * sequence, so b"\xE2\x82" is one U+FFFD but b"\xC0\xAF" is two.
 */
#include <string.h>

#ifdef CQ_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

#include "tokenizer/tokenizer-impl.h"

/* Valid range of the second byte for a lead byte (Unicode Table 3-7). */
static bool second_ok(unsigned char lead, unsigned char b) {
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
    }
}

static size_t lead_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Number of bytes of s that form the longest prefix of a well-formed
 * sequence (at least 1 when n >= 1); sets *complete when that prefix is a
 * whole character. */
static size_t prefix_len(const unsigned char *s, size_t n, bool *complete) {
    *complete = false;
    size_t need = lead_len(s[0]);
    if (need == 0) return 1;
    if (need == 1) {
        *complete = true;
        return 1;
    }
    size_t k = 1;
    while (k < need && k < n) {
        unsigned char b = s[k];
        bool ok = (k == 1) ? second_ok(s[0], b) : (b >= 0x80 && b <= 0xBF);
        if (!ok) break;
        k++;
    }
    *complete = (k == need);
    return k;
}

size_t tok_utf8_valid_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    bool complete;
    size_t k = prefix_len(s, n, &complete);
    return complete ? k : 0;
}

bool tok_utf8_is_valid(const char *str, size_t n) { return cq_utf8_invalid_at_n(str, n) < 0; }

size_t tok_utf8_decode(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (n == 0) {
        *cp = 0;
        return 0;
    }
    unsigned char c = s[0];
    if (c < 0x80 || n < 2) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0 || n < 4) {
        if (n < 3) {
            *cp = c;
            return 1;
        }
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
          ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

size_t tok_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

cq_status tok_utf8_append_lossy(tok_buf *out, const char *str, size_t n) {
    static const char k_repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0; /* run: start of the pending well-formed stretch */
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        bool complete;
        size_t k = prefix_len(s + i, n - i, &complete);
        if (complete) {
            i += k;
            continue;
        }
        CQ_TRY(tok_buf_append(out, str + run, i - run));
        CQ_TRY(tok_buf_append(out, k_repl, 3));
        i += k;
        run = i;
    }
    return tok_buf_append(out, str + run, n - run);
}

bool tok_cp_is_whitespace(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85) return false;
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

bool tok_cp_is_word(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    if (cp == 0x200C || cp == 0x200D) return true; /* Join_Control */
    /* Other_Alphabetic symbols outside the letter and mark categories. */
    if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
        (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
#ifdef CQ_HAVE_UTF8PROC
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
#else
    /* Without a Unicode database every non-space, non-ASCII character counts
     * as a word character (letters dominate outside ASCII). */
    return !tok_cp_is_whitespace(cp);
#endif
}

bool tok_cp_is_numeric(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
#ifdef CQ_HAVE_UTF8PROC
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
#else
    return false;
#endif
}
