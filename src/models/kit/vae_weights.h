/*
 * vae_weights.h — binding a convolutional model's weights from a CMF pack
 * (the VAEs): kernels stay in their file codec (zero-copy where the backend
 * allows), per-channel vectors become F32 backend tensors once, and every
 * name is checked against the model's tensor table (kit/tensors.h). The
 * store owns what was made or bound and releases it with the model.
 */
#ifndef CQ_MODELS_KIT_VAE_WEIGHTS_H
#define CQ_MODELS_KIT_VAE_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/kit/tensors.h"
#include "ops/ops.h"

/* A convolution: kernel [cout, cin, k, k] as stored, F32 bias [cout] (or NULL). */
typedef struct vw_conv {
    cq_tensor w;
    cq_tensor *b;
    int cin, cout, k;
} vw_conv;

typedef struct vw_store {
    cq_backend *be;
    cq_tensor **owned; /* F32 tensors made at load (heap, freed with the store) */
    int n_owned, cap_owned;
    cq_tensor **bound; /* weights bound from the file (inside the model's structs) */
    int n_bound, cap_bound;
    float **host;      /* host f32 copies the model reads on the host (vw_read_kept) */
    int n_host, cap_host;
} vw_store;

void vw_store_free(vw_store *s);

typedef struct vw_loader {
    vw_store *st;
    const cq_cmf *cmf;
    const char *prefix;     /* "vae." */
    const cq_tt_list *table;
    const char *who;        /* first in messages: "vae" */
} vw_loader;

/* snprintf that fails instead of truncating a tensor name. */
cq_status vw_name(char *dst, size_t len, const char *fmt, ...) CQ_PRINTF(3, 4);
/* The tensor `name` (under the prefix) from the pack, checked against the table. */
cq_status vw_get(const vw_loader *L, const char *name, const cq_tensor_view **out);
/* The view of `name` under the prefix, or NULL when the pack lacks it (not checked). */
const cq_tensor_view *vw_find(const vw_loader *L, const char *name);
/* An F32 backend tensor [rows, cols] (1-D when rows == 1) from host values, owned by the store. */
cq_status vw_upload_f32(vw_store *s, const float *host, int64_t rows, int64_t cols, cq_tensor **out);
/* A whole tensor of n elements dequantized to host f32 (the caller frees it). */
cq_status vw_read_host(const vw_loader *L, const char *name, int64_t n, float **out);
/* The same, kept by the store until it is freed. */
cq_status vw_read_kept(const vw_loader *L, const char *name, int64_t n, float **out);
/* A per-channel vector [n] as an F32 backend tensor. */
cq_status vw_load_vec(const vw_loader *L, const char *name, int64_t n, cq_tensor **out);
/* `name`.weight [cout, cin, k, k] bound as it is stored (the backend must
 * convolve with its codec) and `name`.bias as F32. */
cq_status vw_load_conv(const vw_loader *L, const char *name, int cin, int cout, int k, vw_conv *c);
/* A residual block's `name`.conv_shortcut, a 1x1 conv that is there (and
 * loaded) only where the widths change: *has = cin != cout. */
cq_status vw_load_shortcut(const vw_loader *L, const char *name, int cin, int cout, bool *has, vw_conv *sc);
/* Whether the pack holds the encoder, which text to image never runs: it is
 * optional but all or nothing, encoder.conv_in together with quant_conv
 * (where the model has one). */
cq_status vw_has_encoder(const vw_loader *L, bool quant_conv, bool *has);
/* A matrix `name` bound as stored for matmuls (the backend must multiply with its codec). */
cq_status vw_load_matrix(const vw_loader *L, const char *name, cq_tensor *out);

#endif /* CQ_MODELS_KIT_VAE_WEIGHTS_H */
