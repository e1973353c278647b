/*
 * vae_stream.h — a row-streaming graph of channels-last image layers (the
 * convolutional trunk of a VAE), evaluated on demand in horizontal bands.
 * The Qwen-Image-2.1 VAE (qi21_vae.c) and the Flux VAE (flux_vae.c) build
 * their decoders and encoders on it.
 *
 * Nodes are created in topological order. Each node holds a window of its
 * output rows [lo, hi) (`cache`, [(hi-lo)*W, C]). vs_ensure(node, b) makes
 * the window reach row b: it first extends its inputs to the rows the new
 * output rows read, computes only the rows it has not computed yet, and
 * then records per input the lowest row it can still need; every node drops
 * rows below the minimum of its consumers' needs. Requests are monotonic,
 * so the evaluation is a sliding window through the whole network: each
 * layer keeps only a few rows beyond the band in flight.
 *
 * Global dependencies:
 *  - attention (VS_ATTN) and checkpoints (VS_HOLD) compute all of their
 *    rows at once, pulling their input through the stream band by band;
 *  - a group norm (VS_GNORM) needs the statistics of its whole input
 *    before it can normalise a row. It gets them on its first request:
 *    with a band of at least the input's height it computes the input
 *    whole and keeps it (no recomputation, whole-map memory); with a
 *    smaller band it runs a statistics pass, streaming its input from
 *    the top to the bottom band by band and keeping only per-row moments
 *    (cq_op_group_moments), and then resets every layer that pass
 *    computed (its scope: the input's ancestors up to the nearest
 *    attention, checkpoint or source), which the normalising pass
 *    recomputes. Statistics passes nest (a pass meets a group norm without
 *    statistics further up and runs that one's first). Checkpoints bound
 *    the recomputation: a pass never reaches above one.
 *   The moments are taken per image row and merged in row order, so the
 *   statistics, and with them every output bit, do not depend on the band
 *   height.
 *
 * Every node computes each output row from exactly the same input rows
 * (with zero padding outside the image) as the whole-image computation, so
 * the band height changes the result only where an op's own summation order
 * depends on its row count (the CPU GEMM's narrow-matrix path).
 */
#ifndef CQ_MODELS_KIT_VAE_STREAM_H
#define CQ_MODELS_KIT_VAE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

typedef enum vs_kind {
    VS_SOURCE = 0, /* a whole tensor supplied by the caller */
    VS_NORM,       /* RMS norm over channels (F.normalize * sqrt(C) * gamma), optional SiLU */
    VS_CONV,       /* 2-D convolution, zero padding */
    VS_ADD,        /* a + b */
    VS_UPSAMPLE,   /* nearest x f */
    VS_DUPUP,      /* channel gather + depth-to-space (DupUp3D) */
    VS_AVGDOWN,    /* space-to-depth + channel-group mean (AvgDown3D) */
    VS_ATTN,       /* single-head self-attention over all pixels (+ residual, with a norm of its own) */
    VS_GNORM,      /* group norm with whole-map statistics, optional SiLU */
    VS_HOLD,       /* a checkpoint: its input, computed whole once and kept while a pass may need it */
} vs_kind;

/* The mid block's attention weights. With gamma, the node normalises its
 * input (RMS norm) and adds it back as the residual (Qwen-Image-2.1); with
 * gamma NULL its input is already normalised and the node returns the
 * projection alone (the caller adds the residual; Flux). */
typedef struct vs_attn_w {
    const cq_tensor *gamma;             /* F32 [C] or NULL */
    const cq_tensor *wq, *wk, *wv;      /* [C, C] */
    const cq_tensor *bq, *bk, *bv;      /* F32 [C] */
    const cq_tensor *wo, *bo;           /* the output projection */
} vs_attn_w;

/* A group norm's parameters: host copies (the statistics are merged and the
 * per-channel scale and shift formed on the host). */
typedef struct vs_gn_w {
    const float *gamma, *beta; /* [C] each, or NULL (1 / 0) */
    int groups;
    float eps;
} vs_gn_w;

typedef struct vs_node {
    vs_kind kind;
    int in[2], n_in;
    int64_t H, W, C;          /* output grid and channels */
    int align;                /* computed row ranges end on multiples of this (or H) */
    /* parameters */
    const cq_tensor *w, *b;   /* conv weight / bias */
    const cq_tensor *gamma;   /* norm weight */
    bool silu;
    int k, stride, pad_t, pad_l, pad_r;
    int f;                    /* resampling factor */
    int group;                /* gather group (AVGDOWN) */
    bool plain;               /* DUPUP: nearest upsampling; AVGDOWN: identity */
    cq_tensor idx;            /* I32 gather indices (owned) */
    const vs_attn_w *attn;
    const vs_gn_w *gn;
    int64_t band;             /* GNORM: input rows per statistics band; HOLD: rows pulled at a time (0: all) */
    /* state */
    cq_tensor cache;          /* rows [lo, hi) */
    int64_t lo, hi;
    int64_t need[2];          /* lowest input row still to be read, per input */
    bool have_stats;          /* GNORM: scale and shift hold the statistics */
    cq_tensor scale, shift;   /* GNORM: F32 [C] (owned) */
    int cons0, n_cons;        /* its consumers: vs_graph.cons[cons0 ..] */
} vs_node;

/* One statistics pass in flight: the group norm and the nodes it will reset. */
typedef struct vs_pass {
    int gn;
    uint8_t *scope; /* [count]: 1 for the nodes the pass computes and resets */
} vs_pass;

/* Work done, for progress: called when a group norm has its statistics (its
 * input's pixels) and by the caller for its own bands; non-zero cancels. */
typedef int (*vs_work_fn)(void *user, uint64_t pixels);

typedef struct vs_graph {
    cq_backend *be;
    vs_node *n;
    int count, cap;
    int64_t sink_need;        /* the caller's need on the last node */
    int64_t attn_chunk;       /* rows an attention node pulls from its input at a time (0: all) */
    cq_progress_fn progress;  /* optional: (rows pulled, rows) of an attention node's input */
    void *progress_user;
    vs_work_fn work;          /* optional: group norm statistics done */
    void *work_user;
    vs_pass *pass;            /* statistics passes in flight, innermost last */
    int n_pass;
    bool dry;                 /* account memory only: no buffer is allocated, no op runs (plans) */
    size_t live, peak;        /* bytes of activations held, and the high-water mark */
    uint64_t macs;            /* multiply-adds of the convolutions and the attention (recomputed rows count again) */
    uint8_t *tmp;             /* [cap]: which nodes are settled (retain_lo), valid while settled_ok */
    bool settled_ok;
    int *cons;                /* consumers of every node (node << 1 | slot), indexed at the first request */
    int cons_count;           /* the node count cons was made for */
} vs_graph;

void vs_init(vs_graph *g, cq_backend *be);
/* A dry run's stand-in for an F32 [rows, cols] buffer: its bytes count, it holds none. */
cq_tensor vs_phantom(cq_backend *be, int64_t rows, int64_t cols);
/* Frees every node's buffers and the node array (a source's tensor is the caller's). */
void vs_free(vs_graph *g);

/* Node constructors: each appends a node and stores its id in *out. They
 * fail on shapes that do not fit (with a message) or out of memory. */
cq_status vs_source(vs_graph *g, const cq_tensor *t, int64_t H, int64_t W, int *out);
cq_status vs_norm(vs_graph *g, int in, const cq_tensor *gamma, bool silu, int *out);
/* k x k convolution, stride s, zero padding (top, bottom, left, right). */
cq_status vs_conv(vs_graph *g, int in, const cq_tensor *w, const cq_tensor *b, int64_t cout, int k, int s, int pt,
                  int pb, int pl, int pr, int *out);
cq_status vs_add(vs_graph *g, int a, int b, int *out);
cq_status vs_upsample(vs_graph *g, int in, int f, int *out);
/* DupUp3D(in C -> cout, factor_t ft, factor_s fs) on the first chunk of one frame. */
cq_status vs_dupup(vs_graph *g, int in, int64_t cout, int ft, int fs, int *out);
/* AvgDown3D(in C -> cout, ft, fs) of one frame (the zero frame padded in
 * front counts in the mean); *out = in when it is the identity. */
cq_status vs_avgdown(vs_graph *g, int in, int64_t cout, int ft, int fs, int *out);
cq_status vs_attention(vs_graph *g, int in, const vs_attn_w *a, int *out);
/* Group norm (+ SiLU) of `in`; statistics over `band` input rows at a time
 * (band >= the input's height, or <= 0: whole, no statistics pass). */
cq_status vs_gnorm(vs_graph *g, int in, const vs_gn_w *w, bool silu, int64_t band, int *out);
/* A checkpoint of `in`, pulled `band` rows at a time (<= 0: all at once). */
cq_status vs_hold(vs_graph *g, int in, int64_t band, int *out);

/* Make node `id` hold rows up to b (clamped to H). */
cq_status vs_ensure(vs_graph *g, int id, int64_t b);
/* View of rows [r0, r1) of a node's window (must be inside it). */
cq_status vs_rows(const vs_graph *g, int id, int64_t r0, int64_t r1, cq_tensor *out);
/* The caller will not read rows of the last node below `row` any more. */
void vs_release(vs_graph *g, int64_t row);

#endif /* CQ_MODELS_KIT_VAE_STREAM_H */
