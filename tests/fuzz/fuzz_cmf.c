/* fuzz_cmf.c — libFuzzer target for the CMF v2 reader: open from memory,
 * then touch everything an open file exposes (every tensor view and name
 * lookup, dequantization of the small ones, info, masks rows, the sparse
 * index, skills) and run verify. Any crash, sanitizer report or leak is a
 * bug; a clean error status is the expected outcome for most inputs.
 *
 * Each input is opened twice. First with every hash check off, so that a
 * mutation reaches the parsers and decoders instead of stopping at the
 * first hash mismatch. Then as an ordinary open does (header, directory and
 * section hashes at open, each tensor's hash on first read), to exercise
 * the checks themselves: a clean CQ_ERR_HASH is the usual outcome. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq.h"
#include "format/cmf.h"

static volatile uint64_t g_sink;

static int on_progress(uint64_t done, uint64_t total, void *user) {
    (void)user;
    g_sink += done ^ total;
    return 0;
}

/* The ordinary open: checks on, hashing on this thread only. */
static void checked_open(const uint8_t *data, size_t size) {
    cq_cmf_open_opts o = {.threads = 1};
    cq_cmf *c = NULL;
    if (cq_cmf_open_memory_ex(data, size, &o, &c) != CQ_OK) return;
    for (size_t i = 0; i < cq_cmf_tensor_count(c); i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(c, i);
        cq_status first = cq_cmf_check_tensor(t);
        if (cq_cmf_check_tensor(t) != first) abort(); /* the answer does not change */
        if (first == CQ_OK && t->nelem <= (1u << 16)) {
            float *out = malloc((size_t)(t->nelem ? t->nelem : 1) * sizeof(float));
            if (out && cq_cmf_dequantize(t, out, (size_t)t->nelem) == CQ_OK && t->nelem) {
                uint32_t bits;
                memcpy(&bits, &out[0], 4);
                g_sink += bits;
            }
            free(out);
        }
    }
    cq_cmf_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    checked_open(data, size);
    cq_cmf_open_opts all_off = {.no_verify = true, .no_envelope_hashes = true, .threads = 1};
    cq_cmf *c = NULL;
    if (cq_cmf_open_memory_ex(data, size, &all_off, &c) != CQ_OK) return 0;
    cq_cmf_info info;
    cq_cmf_get_info(c, &info);
    for (size_t i = 0; i < cq_cmf_tensor_count(c); i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(c, i);
        if (cq_cmf_find(c, t->name) != t) abort(); /* names are unique: lookup must agree */
        if (t->nbytes) g_sink += t->data[0] + t->data[t->nbytes - 1];
        if (t->nelem <= (1u << 16)) {
            float *out = malloc((size_t)(t->nelem ? t->nelem : 1) * sizeof(float));
            if (out && cq_cmf_dequantize(t, out, (size_t)t->nelem) == CQ_OK && t->nelem) {
                uint32_t bits;
                memcpy(&bits, &out[t->nelem - 1], 4);
                g_sink += bits;
            }
            free(out);
        }
    }
    for (size_t i = 0; i < cq_cmf_skill_count(c); i++) {
        const char *id = cq_cmf_skill_id(c, i);
        if (id) g_sink += (uintptr_t)cq_cmf_find_skill(c, id, "model.embed_tokens.weight");
    }
    for (size_t i = 0; i < cq_cmf_mask_count(c); i++) {
        const cq_cmf_mask *m = cq_cmf_mask_at(c, i);
        for (uint64_t l = 0; l < m->num_layers && l < 64; l++) {
            const uint8_t *r = cq_cmf_mask_ffn_row(m, l, 1);
            if (r && m->ffn_row_bytes) g_sink += r[m->ffn_row_bytes - 1];
            r = cq_cmf_mask_head_row(m, l);
            if (r && m->head_row_bytes) g_sink += r[m->head_row_bytes - 1];
            r = cq_cmf_mask_expert_row(m, l);
            if (r && m->expert_row_bytes) g_sink += r[m->expert_row_bytes - 1];
            g_sink += cq_cmf_mask_layer_alive(m, l);
        }
    }
    for (size_t i = 0; i < cq_cmf_index_count(c); i++) {
        const cq_cmf_index_entry *e = cq_cmf_index_at(c, i);
        if (e->n_groups) g_sink += e->groups[2 * (size_t)e->n_groups - 1];
        if (e->n_heads) g_sink += e->heads[e->n_heads - 1];
    }
    size_t n = 0;
    const uint8_t *tok = cq_cmf_tokenizer_json(c, &n);
    if (tok && n) g_sink += tok[n - 1];
    const char *ct = cq_cmf_chat_template(c);
    if (ct) g_sink += strlen(ct);
    cq_cmf_verify(c, NULL, on_progress, NULL);
    cq_cmf_close(c);
    return 0;
}
