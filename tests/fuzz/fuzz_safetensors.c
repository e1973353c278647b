/* fuzz_safetensors.c — libFuzzer target for the safetensors reader: parse an
 * arbitrary buffer, then touch every tensor the way `convert` does (lookup
 * by name, element conversion of the first and last elements, metadata). */
#include <stddef.h>
#include <stdint.h>

#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cq_st *st = NULL;
    if (cq_st_open_memory(data, size, "fuzz", &st) != CQ_OK) return 0;
    float v[4];
    for (size_t i = 0; i < cq_st_count(st); i++) {
        const cq_st_tensor *t = cq_st_at(st, i);
        if (cq_st_find(st, t->name) != t) __builtin_trap();
        uint64_t n = t->nelem < 4 ? t->nelem : 4;
        (void)cq_st_read_f32(t, 0, n, v);
        if (t->nelem >= n) (void)cq_st_read_f32(t, t->nelem - n, n, v);
        (void)cq_st_read_f32(t, t->nelem, 1, v); /* must fail cleanly */
    }
    for (size_t i = 0; i < cq_st_metadata_count(st); i++)
        (void)cq_st_metadata_get(st, cq_st_metadata_key(st, i));
    cq_st_close(st);
    return 0;
}
