/*
 * ltx2_upsampler_impl.h — what ltx2_upsampler_load.c (config, weights) and
 * ltx2_upsampler.c (the forward) share: the loaded convolutions and norms.
 */
#ifndef CQ_MODELS_LTX2_UPSAMPLER_IMPL_H
#define CQ_MODELS_LTX2_UPSAMPLER_IMPL_H

#include "models/kit/tensors.h"
#include "models/ltx2_upsampler.h"

/* A convolution: kernel [cout, cin * taps] (bound flattened) and bias [cout]. */
typedef struct lu_conv {
    cq_tensor w, b;
} lu_conv;

/* GroupNorm's affine [M]. */
typedef struct lu_norm {
    cq_tensor g, b;
} lu_norm;

typedef struct lu_res {
    lu_conv c1, c2;
    lu_norm n1, n2;
} lu_res;

struct cq_ltx2_ups {
    cq_backend *be;
    cq_ltx2_ups_config cfg;
    cq_tt_held held;
    lu_conv initial, up, final;
    lu_norm initial_norm;
    lu_res *pre, *post; /* n_blocks each */
    cq_ltx2_ups_tap_fn tap;
    void *tap_user;
};

#endif /* CQ_MODELS_LTX2_UPSAMPLER_IMPL_H */
