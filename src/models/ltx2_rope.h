/*
 * ltx2_rope.h — LTX-2's token positions and its "split" RoPE tables, as
 * diffusers' LTX2AudioVideoRotaryPosEmbed (transformer_ltx2.py, 58eb52c0)
 * computes them; every float step in the reference's order:
 *
 * Positions (float32, the midpoint of each token's [start, end) box):
 *   video (frames F', rows H', cols W' latent; patch 1; scale (8, 32, 32)):
 *     start = index * scale per axis, end = (index + 1) * scale; the time
 *     axis then max(0, x + causal_offset - 8) / fps (the first latent frame
 *     holds one pixel frame); token t = (f * H' + h) * W' + w;
 *   audio (T latent frames, scale 4): mel = max(0, (i + shift) * 4 +
 *     causal_offset - 4), end from i + 1; seconds = mel * hop / rate.
 * Tables: for inner width D and n_axes axes, count = D / (2 n_axes)
 *   frequencies w_j = float32(theta^linspace(0, 1, count)_j * pi / 2), the
 *   ladder in float64 (rope_double_precision) or float32; angle =
 *   (2 * (pos_d / max_pos_d) - 1) * w_j at column j * n_axes + d, after
 *   pad = D/2 - count * n_axes leading columns of cos 1, sin 0.
 * A row holds D/2 columns; head h of width dh = D / heads owns columns
 * [h dh/2, (h+1) dh/2) and rotates its pairs (i, i + dh/2) — so a table
 * [T, D/2] is also the [T * heads, dh/2] table of the q/k rows viewed as
 * [T * heads, dh] (cq_op_qk_norm_rope with one head, CQ_ROPE_HALF).
 */
#ifndef CQ_MODELS_LTX2_ROPE_H
#define CQ_MODELS_LTX2_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"

#define CQ_LTX2_ROPE_MAX_AXES 3
#define CQ_LTX2_MAX_SIDE 65536 /* latent frames, rows or columns */

typedef struct cq_ltx2_rope {
    int dim;                                /* D: the attention's inner width */
    int n_axes;                             /* 3 (video) or 1 (audio, cross) */
    float max_pos[CQ_LTX2_ROPE_MAX_AXES];   /* base_num_frames, base_height, base_width */
    double theta;                           /* 10000 */
    bool f64;                               /* the ladder in float64 (rope_double_precision) */
} cq_ltx2_rope;

/* pos[(f * h + y) * w + x][3]: the video tokens' (time s, row px, col px)
 * midpoints. scale: the VAE's (time, height, width) factors; fps > 0. */
cq_status cq_ltx2_video_positions(int frames, int h, int w, const int scale[3], int causal_offset, double fps,
                                  float *pos);
/* pos[i]: the audio tokens' time midpoints in seconds, latent frames
 * shift..shift+n-1 (scale: mel frames per latent frame; hop / rate). */
cq_status cq_ltx2_audio_positions(int n, int shift, int scale, int causal_offset, int hop, int rate, float *pos);

/* Columns of a table row: dim / 2. */
static inline int cq_ltx2_rope_cols(const cq_ltx2_rope *r) { return r->dim / 2; }
/* cos/sin [n][dim/2] for the rows at pos[n][n_axes]; CQ_ERR_INVALID_ARG for a
 * config the reference would not build (dim odd or under 2 n_axes, a
 * non-positive max_pos or theta). */
cq_status cq_ltx2_rope_tables(const cq_ltx2_rope *r, const float *pos, int64_t n, float *cosv, float *sinv);

#endif /* CQ_MODELS_LTX2_ROPE_H */
