/*
 * inputs.h — reading the `cortiq forward` input tensors of a model from a
 * safetensors file with one set of checks: a tensor of a given logical rank
 * (a leading batch dimension of 1 allowed), integer elements of any integer
 * dtype. Messages name the tensor.
 */
#ifndef CQ_MODELS_KIT_INPUTS_H
#define CQ_MODELS_KIT_INPUTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "format/safetensors.h"

/* `name` of logical rank `rank` (plus an optional leading 1): *out and its dims[0..rank). Absent:
 * CQ_ERR_MISSING when required, else CQ_OK with *out NULL. */
cq_status cq_in_tensor(const cq_st *st, const char *name, int rank, bool required, uint64_t *dims,
                       const cq_st_tensor **out);
/* Element i of an I64, I32, U8 or BOOL tensor. */
int64_t cq_in_int_at(const cq_st_tensor *t, uint64_t i);

#endif /* CQ_MODELS_KIT_INPUTS_H */
