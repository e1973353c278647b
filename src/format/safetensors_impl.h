/*
 * safetensors_impl.h — the reader's private state, shared by the parser
 * (safetensors.c) and the file/shard opener (safetensors_open.c).
 */
#ifndef CQ_SAFETENSORS_IMPL_H
#define CQ_SAFETENSORS_IMPL_H

#include "format/safetensors.h"

typedef struct st_file {
    char *path;             /* or the memory label */
    const uint8_t *base;    /* whole file */
    size_t len;
    bool mapped;            /* munmap on close */
} st_file;

struct cq_st {
    st_file *files;
    size_t n_files;
    cq_st_tensor *t;
    size_t n, cap;
    size_t *by_name;        /* indices into t, sorted by name */
    char **meta;            /* key, value, key, value... (first file only) */
    size_t n_meta;
    uint64_t total_bytes;
};

/* Parse one file image (already attached as files[file_index]) and append
 * its tensors. Metadata is kept when keep_meta. */
cq_status cq_st_parse_file(cq_st *st, size_t file_index, bool keep_meta);
/* After all files: sort names, reject duplicates (across files too). */
cq_status cq_st_index_names(cq_st *st);
/* Add a file slot; returns its index. */
cq_status cq_st_add_file(cq_st *st, const char *path, const uint8_t *base, size_t len, bool mapped, size_t *index);

#endif
