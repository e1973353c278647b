/*
 * vision.h — what the Qwen vision towers share (Qwen2.5-VL's and Qwen3-VL's,
 * models/qwen25vl_vision.c and models/qwen3vl_vision.c): the checks of a
 * call's image grids and pixels, the 2-D vision RoPE, the split of the fused
 * qkv projection, attention within row segments (one call for all of
 * them) and the patch merger's MLP.
 *
 * Row order. The processor emits each image frame's patches by 2x2 merge
 * unit (merge x merge in general): unit (uy, ux) of the merged grid in
 * raster order, its patches in raster order within it. A patch's place in
 * the frame is then (uy * merge + s / merge, ux * merge + s % merge) for
 * patch s of the unit; cq_vision_patch_hw gives it.
 *
 * RoPE. Each head's first D/2 channels pair with the last D/2 (rotate_half);
 * the D/2 angles of a patch at (h, w) are (h * inv[j] for j < D/4, then
 * w * inv[j]), inv[j] = theta^(-4j / D), every product formed in f32 as the
 * reference does.
 */
#ifndef CQ_MODELS_KIT_VISION_H
#define CQ_MODELS_KIT_VISION_H

#include <stdint.h>

#include "cortiq.h"
#include "models/kit/config.h"
#include "models/kit/tensors.h"
#include "ops/ops.h"

/* The limits every tower shares: grid sides in patches and frames per image. */
#define CQ_VISION_MAX_SIDE 65536
#define CQ_VISION_MAX_FRAMES 4096

/* The patch rows n_images grids imply (t, h, w >= 1, h and w multiples of
 * merge), at most max_images images and max_rows rows; messages start with
 * `who`. */
cq_status cq_vision_rows(const char *who, int merge, const int32_t (*grid)[3], int n_images, int max_images,
                         int64_t max_rows, int64_t *n_rows);
/* Every value of pixels [n, K] finite (the message names the first bad row). */
cq_status cq_vision_check_pixels(const char *who, const float *pixels, int64_t n, int64_t K);

/* The vision RoPE's theta from the vision config `g`: transformers 5 keeps it
 * in rope_parameters (rope_type "axial" or "default"), 4.x nowhere
 * (10000). */
cq_status cq_vision_rope_theta(const cq_cfg *g, double *theta);
/* inv[head_dim / 4], formed in f32 as the reference does. */
void cq_vision_rope_inv_freq(double theta, int head_dim, float *inv);
/* One patch row of the cos and sin tables ([head_dim / 2] each) at (hp, wp). */
void cq_vision_rope_row(const float *inv, int head_dim, int64_t hp, int64_t wp, float *cs, float *sn);

/* The place (*hp, *wp) in its frame of the patch at row `in_frame` of a frame
 * `gw` patches wide, in the processor's merge-unit order. */
static inline void cq_vision_patch_hw(int64_t in_frame, int64_t gw, int merge, int64_t *hp, int64_t *wp) {
    const int64_t unit = (int64_t)merge * merge, u = in_frame / unit, s = in_frame % unit, uw = gw / merge;
    *hp = u / uw * merge + s / merge;
    *wp = u % uw * merge + s % merge;
}

/* Where a tower's tensors live after `prefix`: "model.visual." (transformers
 * 5) or "visual." (older saves), the first holding patch_embed.proj.weight;
 * NULL when neither does. */
const char *cq_vision_stem(const cq_cmf *cmf, const char *prefix);

/* The activations of one call over n patch rows: the pixels [n, patch_dim],
 * the RoPE tables [n, head_dim / 2], the residual stream x and the normed
 * rows h [n, hidden], qkv [n, 3 hidden], q, k, v, the attention output
 * [n, hidden], the MLP's hidden rows [n, intermediate], the merger's hidden
 * rows m1 [n / unit, unit * hidden] and its output [n / unit, out_hidden]. */
typedef struct cq_vision_acts {
    cq_tensor pix, cos_t, sin_t, x, h, qkv, q, k, v, att, mlp, m1, out;
} cq_vision_acts;
typedef struct cq_vision_dims {
    int64_t n;
    int patch_dim, hidden, head_dim, intermediate, unit, out_hidden;
} cq_vision_dims;
cq_status cq_vision_acts_alloc(cq_backend *be, const cq_vision_dims *d, cq_vision_acts *a);
void cq_vision_acts_free(cq_vision_acts *a);

/* The Conv3d kernel "<p>patch_embed.proj.weight" [D, C, T, P, P] bound as
 * the matrix [D, C*T*P*P] it is (ops take at most 4 dims). */
cq_status cq_vision_bind_patch(const cq_tt_binder *b, const char *p, cq_tensor *out);
/* Three I32 [hidden] column lists splitting the fused qkv output [q | k | v]
 * (cq_op_gather_cols), held with the model's weights. */
cq_status cq_vision_qkv_cols(cq_backend *be, int hidden, cq_tt_held *held, cq_tensor cols[3]);
/* The attention inputs of a block from its normed rows h: qkv = h · Wᵀ + b
 * [n, 3 * hidden], split into q, k, v [n, hidden] by cols, then q and k
 * rotated by the cos/sin tables [n, head_dim / 2] (rotate_half). */
typedef struct cq_vision_qkv_args {
    const cq_tensor *h, *w, *b, *cols, *cos_t, *sin_t;
    cq_tensor *qkv, *q, *k, *v;
    int n_heads, head_dim;
} cq_vision_qkv_args;
cq_status cq_vision_qkv(cq_backend *be, const cq_vision_qkv_args *a);
/* Attention (no mask) within row segments, every segment in one attention
 * call: row r of segment i, [cu[i], cu[i + 1]), sees the keys of its own
 * segment (vis_lo = cu[i], vis = cu[i + 1]; cq_op_attention). A tower builds
 * the bounds once per forward for each segmentation it uses (the windows,
 * the frames) and every block attending within it reuses them. When one
 * segment holds every row no table is needed: lo and hi stay unset and the
 * call sees all keys. */
typedef struct cq_vision_segs {
    int64_t n;                      /* rows */
    cq_tensor lo, hi;               /* I32 [n], or unset (one segment) */
} cq_vision_segs;
/* The bounds of the n_seg segments cu[0 .. n_seg] (cu[0] = 0, increasing,
 * cu[n_seg] = n; anything else is refused, messages starting with `who`). */
cq_status cq_vision_segs_make(cq_backend *be, const char *who, const int32_t *cu, int n_seg, int64_t n,
                              cq_vision_segs *s);
void cq_vision_segs_free(cq_vision_segs *s);
/* o = attention of q over k, v [s->n, n_heads * head_dim] within the segments of s. */
cq_status cq_vision_attend(cq_backend *be, const cq_tensor *q, const cq_tensor *k, const cq_tensor *v, cq_tensor *o,
                           const cq_vision_segs *s, int n_heads, int head_dim);

/* The merger MLP on merge units: out = fc2(gelu_erf(fc1(x) + b1)) + b2, x
 * [units, merge^2 * hidden] (the unit's normed patch rows side by side),
 * mid [units, merge^2 * hidden] scratch, out [units, out_hidden]. */
typedef struct cq_vision_merger_w {
    cq_tensor fc1, fc1_b, fc2, fc2_b;
} cq_vision_merger_w;
cq_status cq_vision_merger_mlp(cq_backend *be, const cq_vision_merger_w *w, const cq_tensor *x, cq_tensor *mid,
                               cq_tensor *out);

#endif /* CQ_MODELS_KIT_VISION_H */
