/*
 * gz.c — gzip side files through zlib (gz.h). The compressed file is read
 * whole (side files are small: the Qwen3 tokenizer.json is 11 MiB, 2.4 MiB
 * gzipped) and inflated into a buffer grown by doubling up to the caller's
 * limit, so a file that inflates without end stops at the limit. inflate
 * checks each member's CRC-32 and length; the end of the input before the
 * end of a member is a truncated file, never a short result.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/gz.h"

#ifdef CQ_HAVE_ZLIB
#include <zlib.h>
#endif

bool cq_path_is_gz(const char *path) {
    size_t n = path ? strlen(path) : 0;
    return n > 3 && !strcmp(path + n - 3, ".gz");
}

#ifdef CQ_HAVE_ZLIB

bool cq_gz_available(void) { return true; }

cq_status cq_gz_inflate(const void *data, size_t n, size_t max_len, const char *what, uint8_t **out, size_t *len) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!out || !len || (!data && n)) return cq_fail(CQ_ERR_INVALID_ARG, "cq_gz_inflate: no input or no output");
    if (!what) what = "the data";
    const uint8_t *in = data;
    if (n < 2 || in[0] != 0x1f || in[1] != 0x8b)
        return cq_fail(CQ_ERR_PARSE, "%s is not gzip-compressed (no gzip magic)", what);
    size_t cap = n < (SIZE_MAX / 4) ? 4 * n + 4096 : n;
    if (cap > max_len) cap = max_len;
    uint8_t *buf = cq_malloc(cap + 1);
    if (!buf) return CQ_ERR_NOMEM;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip wrapper only */
        cq_free(buf);
        return cq_fail(CQ_ERR_NOMEM, "%s: zlib could not start inflating", what);
    }
    size_t used = 0, got = 0;
    cq_status s = CQ_OK;
    for (;;) {
        if (got == cap) {
            if (cap >= max_len) {
                s = cq_fail(CQ_ERR_BOUNDS, "%s inflates to more than the %zu bytes expected", what, max_len);
                break;
            }
            size_t ncap = cap <= max_len / 2 ? 2 * cap : max_len;
            uint8_t *b = cq_realloc(buf, ncap + 1);
            if (!b) {
                s = CQ_ERR_NOMEM;
                break;
            }
            buf = b;
            cap = ncap;
        }
        /* zlib counts in uInt: feed and drain at most 1 GiB a call */
        const size_t in_left = n - used, out_left = cap - got;
        z.next_in = (Bytef *)(in + used);
        z.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
        z.next_out = buf + got;
        z.avail_out = (uInt)(out_left < (1u << 30) ? out_left : (1u << 30));
        const uInt ai = z.avail_in, ao = z.avail_out;
        int r = inflate(&z, Z_NO_FLUSH);
        used += ai - z.avail_in;
        got += ao - z.avail_out;
        if (r == Z_STREAM_END) {
            if (used == n) break;
            /* another member follows (as `cat a.gz b.gz` makes), or bytes that are not gzip */
            if (n - used < 2 || in[used] != 0x1f || in[used + 1] != 0x8b) {
                s = cq_fail(CQ_ERR_PARSE, "%s has %zu bytes after its gzip data that are not gzip", what, n - used);
                break;
            }
            inflateReset(&z);
            continue;
        }
        if (r == Z_OK) continue;
        if (r == Z_BUF_ERROR && z.avail_out > 0 && used == n) {
            s = cq_fail(CQ_ERR_PARSE, "%s is truncated (the gzip data ends after %zu bytes, mid-stream)", what, n);
            break;
        }
        if (r == Z_BUF_ERROR) continue; /* the output was full: grown above */
        s = cq_fail(r == Z_MEM_ERROR ? CQ_ERR_NOMEM : CQ_ERR_PARSE, "%s: damaged gzip data (%s)", what,
                    z.msg ? z.msg : "zlib error");
        break;
    }
    inflateEnd(&z);
    if (s != CQ_OK) {
        cq_free(buf);
        return s;
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    return CQ_OK;
}

#else /* no zlib */

bool cq_gz_available(void) { return false; }

cq_status cq_gz_inflate(const void *data, size_t n, size_t max_len, const char *what, uint8_t **out, size_t *len) {
    (void)data;
    (void)n;
    (void)max_len;
    if (out) *out = NULL;
    if (len) *len = 0;
    return cq_fail(CQ_ERR_UNSUPPORTED, "%s is gzip-compressed and this build has no zlib (configured with "
                   "-DCORTIQ_ZLIB=OFF): gunzip it first", what ? what : "the data");
}

#endif
