/*
 * gz.h — gzip-compressed side files (a tokenizer.json.gz, say) read whole
 * into memory through zlib. Only gzip is accepted, never a plain file taken
 * as it is, so a caller that asked for ".gz" learns when the file is not one.
 * In a build without zlib (-DCORTIQ_ZLIB=OFF) every call fails with
 * CQ_ERR_UNSUPPORTED saying so.
 */
#ifndef CQ_BASE_GZ_H
#define CQ_BASE_GZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Whether this build reads gzip (zlib linked). */
bool cq_gz_available(void);
/* Whether `path` ends in ".gz". */
bool cq_path_is_gz(const char *path);
/* Gunzip data[0..n) (one gzip member or several, one after the other) into a
 * new buffer (cq_malloc; NUL-terminated one byte past *len, so JSON text can
 * be used as a C string). More than max_len bytes out: CQ_ERR_BOUNDS. Not
 * gzip, damaged (a CRC or length mismatch), truncated, or followed by bytes
 * that are not gzip: CQ_ERR_PARSE naming `what`. */
cq_status cq_gz_inflate(const void *data, size_t n, size_t max_len, const char *what, uint8_t **out, size_t *len);
/* Reading a .gz file whole: cq_file_read_gz (format/file_read.h). */

#endif /* CQ_BASE_GZ_H */
