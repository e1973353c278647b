/* fuzz_qi21_inputs.c — libFuzzer target for the `cortiq forward` input
 * reader: an arbitrary buffer parsed as safetensors and read as denoiser
 * inputs for a tiny configuration; whatever is accepted must be a layout
 * the model accepts, with every array as long as the layout says. */
#include <stddef.h>
#include <stdint.h>

#include "models/qi21_inputs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const cq_qi21_config cfg = {.in_channels = 8, .out_channels = 12, .num_layers = 1, .n_heads = 4,
                                       .head_dim = 16, .inner = 64, .context_in_dim = 40, .mlp_hidden = 128,
                                       .axes = {4, 6, 6}, .eps = 1e-6f, .causal_condition = true};
    cq_st *st = NULL;
    if (cq_st_open_memory(data, size, "fuzz", &st) != CQ_OK) return 0;
    cq_qi21_inputs in;
    if (cq_qi21_inputs_read(st, &cfg, &in) == CQ_OK) {
        int nctx, nt, nc;
        if (cq_qi21_layout_sizes(&in.layout, &nctx, &nt, &nc) != CQ_OK) __builtin_trap();
        if (nctx != in.n_ctx || nt != in.n_target || nc != in.n_cond || !(in.t >= 0.0f && in.t <= 1.0f))
            __builtin_trap();
        volatile float sink = 0;
        for (size_t i = 0; i < (size_t)nctx * 40; i++) sink += in.ctx[i];
        for (size_t i = 0; i < (size_t)(nc + nt) * 8; i++) sink += in.hidden[i];
        for (int i = 0; i < in.layout.vlm_len; i++) sink += in.img_mask[i];
        (void)sink;
    }
    cq_qi21_inputs_free(&in);
    cq_st_close(st);
    return 0;
}
