/*
 * testutil.h — helpers shared by the cmocka unit tests: deterministic random
 * numbers, scratch directories, small file helpers, running the CLI.
 */
#ifndef CQ_TESTUTIL_H
#define CQ_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* splitmix64-seeded xorshift generator; same sequence on every platform. */
typedef struct tu_rng { uint64_t s; } tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_u64(tu_rng *r);
float tu_rng_uniform(tu_rng *r);          /* [0, 1) */
float tu_rng_normal(tu_rng *r);           /* standard normal (Box-Muller) */
void tu_fill_normal(tu_rng *r, float *x, size_t n, float scale);

/* A fresh directory under the build tree (CQ_BINARY_DIR/tmp/<name>-<pid>),
 * emptied first. Returns a static buffer. */
const char *tu_tmpdir(const char *name);
/* path = dir + "/" + leaf into a static rotating buffer. */
const char *tu_path(const char *dir, const char *leaf);
/* Whole-file read (malloc'd, caller frees) / write. */
uint8_t *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *data, size_t len);
/* Run a shell command; returns its exit status (or -1). */
int tu_system(const char *fmt, ...);

#endif
