/*
 * ltx2_text_impl.h — what ltx2_text_load.c (config, weights) and ltx2_text.c
 * (the forward) share: the loaded projections and connectors.
 */
#ifndef CQ_MODELS_LTX2_TEXT_IMPL_H
#define CQ_MODELS_LTX2_TEXT_IMPL_H

#include "models/kit/tensors.h"
#include "models/ltx2_text.h"

typedef struct lt_block {
    cq_tensor q, qb, k, kb, v, vb, o, ob, nq, nk, gw, gb; /* attn1 (gw, gb unset when ungated) */
    cq_tensor ff1, ff1b, ff2, ff2b;
} lt_block;

typedef struct lt_conn {
    cq_tensor proj, projb;  /* <s>_text_proj_in [dim, C L] (+ bias, unset without proj_bias) */
    cq_tensor reg;          /* F32 [registers, dim] */
    cq_tensor gidx;         /* I32 [dim]: each column's head (the gates' column gather) */
    lt_block *blk;
} lt_conn;

struct cq_ltx2_text {
    cq_backend *be;
    cq_ltx2_text_config cfg;
    cq_tt_held held;
    lt_conn s[CQ_LTX2_STREAMS];
    cq_ltx2_text_tap_fn tap;
    void *tap_user;
};

extern const char *const cq_ltx2_stream_name[CQ_LTX2_STREAMS];

#endif /* CQ_MODELS_LTX2_TEXT_IMPL_H */
