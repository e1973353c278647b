/*
 * jsonutil.h — helpers for untrusted JSON and text inside model files:
 * strict UTF-8 validation and a cJSON front end whose allocations go
 * through cq_malloc (so fault injection reaches them) and which tells an
 * out-of-memory failure apart from malformed input.
 */
#ifndef CQ_FORMAT_JSONUTIL_H
#define CQ_FORMAT_JSONUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/base.h"

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF),
 * as Rust's str::from_utf8 accepts it. */
bool cq_utf8_valid(const uint8_t *s, size_t len);

/* Route cJSON's allocations through cq_malloc/cq_free (idempotent and
 * thread-safe; every entry point below calls it). */
void cq_json_init(void);

/* Parse exactly `len` bytes as one JSON value: the bytes must be valid
 * UTF-8 and nothing but whitespace may follow the value. `what` names the
 * document in error messages ("header JSON"). CQ_ERR_PARSE on bad input
 * (with the byte offset), CQ_ERR_NOMEM when an allocation failed. */
cq_status cq_json_parse(const void *text, size_t len, const char *what, cJSON **out);

/* Serialize compactly into a cq_malloc'd NUL-terminated string. */
cq_status cq_json_print(const cJSON *item, char **out, size_t *len);

#endif /* CQ_FORMAT_JSONUTIL_H */
