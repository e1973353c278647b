/*
 * file_read.c — whole-file reads of small side files (see file_read.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "format/file_read.h"

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

bool cq_file_is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

bool cq_file_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}
