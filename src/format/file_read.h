/*
 * file_read.h — reading small side files (JSON configs, tokenizer files,
 * safetensors indexes) whole into memory, with a size cap so a wrong path
 * cannot make us swallow a multi-GB file.
 */
#ifndef CQ_FILE_READ_H
#define CQ_FILE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Read `path` into a new buffer (cq_malloc; NUL-terminated one byte past
 * len, so JSON text can be used as a C string). Fails with CQ_ERR_MISSING if
 * absent, CQ_ERR_BOUNDS if larger than max_len, CQ_ERR_IO otherwise. */
cq_status cq_file_read_all(const char *path, size_t max_len, uint8_t **buf, size_t *len);
/* The file at `path` (compressed, at most 1 GiB) gunzipped as cq_gz_inflate
 * (base/gz.h) does, at most max_len bytes out; an absent file is
 * CQ_ERR_MISSING, an unreadable one CQ_ERR_IO. */
cq_status cq_file_read_gz(const char *path, size_t max_len, uint8_t **out, size_t *len);
/* True if path names an existing regular file / directory. */
bool cq_file_is_regular(const char *path);
bool cq_file_is_dir(const char *path);

#endif
