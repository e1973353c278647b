/*
 * safetensors.h — reading and writing Hugging Face safetensors files.
 *
 * Reader: one file, an in-memory buffer, or a sharded checkpoint described by
 * a `*.safetensors.index.json` weight_map (or a folder holding either). Files
 * are mmap'd; tensors are zero-copy views into the mapping. Everything in the
 * header is validated before use: the 8-byte header length, the JSON, every
 * dtype/shape/data_offsets entry (inside the buffer, size == product x element
 * size with overflow checks, no two tensors overlapping), duplicate names and
 * the __metadata__ block. Errors name the file and the tensor.
 *
 * Writer: collects tensors (copied) and writes one file with the header padded
 * to 8 bytes, via a temporary name renamed into place. Meant for small and
 * medium outputs (forward results, test fixtures), not for whole models.
 */
#ifndef CQ_SAFETENSORS_H
#define CQ_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Element types of the safetensors format. Names as in the file ("F32"). */
typedef enum cq_st_dtype {
    CQ_ST_F64 = 0,
    CQ_ST_F32,
    CQ_ST_F16,
    CQ_ST_BF16,
    CQ_ST_F8_E4M3,
    CQ_ST_F8_E5M2,
    CQ_ST_I64,
    CQ_ST_I32,
    CQ_ST_I16,
    CQ_ST_I8,
    CQ_ST_U64,
    CQ_ST_U32,
    CQ_ST_U16,
    CQ_ST_U8,
    CQ_ST_BOOL,
    CQ_ST_DTYPE_COUNT
} cq_st_dtype;

/* Largest header the reader accepts (the reference implementation's limit). */
#define CQ_ST_MAX_HEADER (100u * 1000u * 1000u)

const char *cq_st_dtype_name(cq_st_dtype dt);   /* "F32"; "?" outside the table */
int cq_st_dtype_from_name(const char *name);    /* exact, case-sensitive; -1 if unknown */
size_t cq_st_dtype_size(cq_st_dtype dt);        /* bytes per element; 0 outside the table */
bool cq_st_dtype_is_float(cq_st_dtype dt);      /* F64/F32/F16/BF16/F8_* */

typedef struct cq_st_tensor {
    const char *name;        /* NUL-terminated, owned by the handle */
    cq_st_dtype dtype;
    int ndim;                /* 0..CQ_MAX_DIMS */
    uint64_t shape[CQ_MAX_DIMS];
    uint64_t nelem;          /* 1 for ndim 0 */
    const uint8_t *data;     /* in the mapping; NOT aligned in general */
    uint64_t nbytes;
    size_t file_index;       /* which file of a sharded checkpoint */
} cq_st_tensor;

typedef struct cq_st cq_st;

/* Open `path`: a .safetensors file, a *.safetensors.index.json, or a folder
 * (its single non-variant index, else its one .safetensors file, else
 * `model.safetensors` / `diffusion_pytorch_model.safetensors`, else all of its
 * .safetensors files). */
cq_status cq_st_open(const char *path, cq_st **out);
/* Parse a caller-owned buffer holding one safetensors file; the buffer must
 * outlive the handle. `label` names it in error messages (may be NULL). */
cq_status cq_st_open_memory(const void *buf, size_t len, const char *label, cq_st **out);
void cq_st_close(cq_st *st);

/* Tensors in file order, and within a file in data-offset order (sequential
 * reads when converting). */
size_t cq_st_count(const cq_st *st);
const cq_st_tensor *cq_st_at(const cq_st *st, size_t i);
/* Lookup by exact name (binary search); NULL if absent. */
const cq_st_tensor *cq_st_find(const cq_st *st, const char *name);
/* Total payload bytes of all tensors. */
uint64_t cq_st_total_bytes(const cq_st *st);
size_t cq_st_file_count(const cq_st *st);
const char *cq_st_file_path(const cq_st *st, size_t i);   /* label for memory buffers */

/* __metadata__ of the first file: number of entries, i-th key/value, lookup. */
size_t cq_st_metadata_count(const cq_st *st);
const char *cq_st_metadata_key(const cq_st *st, size_t i);
const char *cq_st_metadata_value(const cq_st *st, size_t i);
const char *cq_st_metadata_get(const cq_st *st, const char *key);

/* Convert elements [first, first+n) of a tensor to f32. Floating types
 * convert exactly (F64 rounds to nearest); F8_E4M3 is the "fn" variant (no
 * infinities, S.1111.111 is NaN). Integer and BOOL tensors convert too, but
 * fail with CQ_ERR_NUMERIC naming the tensor if a value is not exactly
 * representable in f32. */
cq_status cq_st_read_f32(const cq_st_tensor *t, uint64_t first, uint64_t n, float *out);
/* The whole tensor so converted into a new array (cq_free; one element long at least). */
cq_status cq_st_read_all_f32(const cq_st_tensor *t, float **out);

/* Hint that a tensor's pages are no longer needed (drops them from this
 * process's resident set for mmap'd files; no effect for memory buffers). */
void cq_st_release(const cq_st *st, const cq_st_tensor *t);

/* ---- writer ------------------------------------------------------------- */
typedef struct cq_st_writer cq_st_writer;

cq_status cq_st_writer_create(cq_st_writer **out);
/* Add a tensor; `data` (nbytes, which must equal nelem x element size) is
 * copied. Names must be unique and not "__metadata__". */
cq_status cq_st_writer_add(cq_st_writer *w, const char *name, cq_st_dtype dtype, int ndim, const uint64_t *shape,
                           const void *data, uint64_t nbytes);
/* Convenience: an f32 tensor. */
cq_status cq_st_writer_add_f32(cq_st_writer *w, const char *name, int ndim, const uint64_t *shape,
                               const float *data);
cq_status cq_st_writer_set_metadata(cq_st_writer *w, const char *key, const char *value);
/* Serialize to a new malloc'd (cq_malloc) buffer; the caller frees it with cq_free. */
cq_status cq_st_writer_to_memory(const cq_st_writer *w, uint8_t **buf, size_t *len);
/* Write to `path` (via `path.tmp`, renamed into place). */
cq_status cq_st_writer_save(const cq_st_writer *w, const char *path);
void cq_st_writer_free(cq_st_writer *w);

#endif /* CQ_SAFETENSORS_H */
