/*
 * ltx2_impl.h — what ltx2_load.c (config, weights) and ltx2.c (the forward)
 * share: the model's weights per stream and block.
 */
#ifndef CQ_MODELS_LTX2_IMPL_H
#define CQ_MODELS_LTX2_IMPL_H

#include "models/kit/tensors.h"
#include "models/ltx2.h"

enum { ST_VIDEO, ST_AUDIO, ST_COUNT };

typedef struct lx_adaln {
    cq_tensor l1w, l1b, l2w, l2b, lw, lb;
    int k; /* modulation chunks */
} lx_adaln;

typedef struct lx_attn {
    cq_tensor q, qb, k, kb, v, vb, o, ob, nq, nk, gw, gb;
    bool gated;
    int heads, dh, inner;
} lx_attn;

/* One stream's part of a block. `cross` is the A<->V attention this stream queries (a2v on video, v2a on audio). */
typedef struct lx_sblock {
    lx_attn self, text, cross;
    cq_tensor ff1, ff1b, ff2, ff2b; /* biases zeroed when absent */
    cq_tensor sst;  /* F32 [k, D] */
    cq_tensor psst; /* F32 [2, D] (prompt tables) */
    cq_tensor csst; /* F32 [5, D] */
} lx_sblock;

typedef struct lx_stream {
    const char *name;  /* "video" / "audio" */
    const char *tp;    /* tap name prefix: "" / "audio_" */
    int64_t dim;
    int heads, dh, k, cin, cout;
    bool gated, xmod, ffb;
    cq_tensor pin, pinb, sst_out, pout, poutb;
    lx_adaln time, ca_ss, ca_gate, prompt;
    lx_sblock *blk;
    cq_tensor gidx; /* I32 [dim]: the head of each column (its own attentions' gates) */
} lx_stream;

struct cq_ltx2 {
    cq_backend *be;
    cq_ltx2_config cfg;
    cq_tt_held held;
    lx_stream s[ST_COUNT];
    bool xattn; /* prompt tables in the blocks (either stream's cross_attn_mod) */
    cq_ltx2_tap_fn tap;
    void *tap_user;
};

#endif /* CQ_MODELS_LTX2_IMPL_H */
