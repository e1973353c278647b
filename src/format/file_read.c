/*
 * file_read.c — whole-file reads of small side files (see file_read.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "format/file_read.h"

#include "base/gz.h"

cq_status cq_file_read_all(const char *path, size_t max_len, uint8_t **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return cq_fail(errno == ENOENT ? CQ_ERR_MISSING : CQ_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return cq_fail(CQ_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)max_len) {
        fclose(f);
        return cq_fail(CQ_ERR_BOUNDS, "%s: %lld bytes, more than the %zu expected for this kind of file", path,
                       (long long)sb.st_size, max_len);
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *b = cq_malloc(n + 1);
    if (!b) {
        fclose(f);
        return CQ_ERR_NOMEM;
    }
    size_t got = n ? fread(b, 1, n, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        cq_free(b);
        return cq_fail(CQ_ERR_IO, "%s: short read", path);
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return CQ_OK;
}

cq_status cq_file_read_gz(const char *path, size_t max_len, uint8_t **out, size_t *len) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!path || !out || !len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_file_read_gz: no path or no output");
    if (!cq_gz_available()) return cq_gz_inflate(NULL, 0, max_len, path, out, len);
    uint8_t *z;
    size_t n;
    CQ_TRY(cq_file_read_all(path, (size_t)1 << 30, &z, &n));
    cq_status s = cq_gz_inflate(z, n, max_len, path, out, len);
    cq_free(z);
    return s;
}

bool cq_file_is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

bool cq_file_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}
