/*
 * cmf_verify.c — integrity check of an open container: every tensor's
 * hash64, the header and directory hashes of the envelope when they are
 * non-zero, and the masks/vocab/index hashes that header.section_hashes
 * lists (non-zero, over a non-empty section). Never part of open: it reads
 * every byte of the file (long spans on the container's hashing threads).
 * It reports every mismatch, so `cortiq verify` opens with the open-time
 * checks off (cq_cmf_open_opts) and leaves them all to this.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format/cmf_impl.h"

#define VERIFY_CHUNK (64u << 20) /* progress / cancellation granularity */

typedef struct vctx {
    cq_pool *pool; /* long spans are hashed on several threads */
    cq_progress_fn progress;
    void *user;
    uint64_t done, total;
    size_t problems;
    char first[512];
} vctx;

static void problem(vctx *v, const char *fmt, ...) CQ_PRINTF(2, 3);
static void problem(vctx *v, const char *fmt, ...) {
    if (v->problems++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->first, sizeof v->first, fmt, ap);
        va_end(ap);
    }
}

/* Hash `len` bytes in chunks so a long tensor still reports progress and
 * can be cancelled. Returns false when the caller cancelled. */
static bool hash_span(vctx *v, const uint8_t *p, uint64_t len, uint64_t *out) {
    cq_hash64_state st;
    cq_hash64_init(&st);
    while (len) {
        size_t n = (size_t)CQ_MIN(len, (uint64_t)VERIFY_CHUNK);
        cq_hash64_update_pool(&st, p, n, v->pool);
        p += n;
        len -= n;
        v->done += n;
        if (v->progress && v->progress(v->done, v->total, v->user)) return false;
        if (cq_cancel_requested()) return false;
    }
    *out = cq_hash64_final(&st);
    return true;
}

static cq_status interrupted(void) {
    return cq_fail(CQ_ERR_INTERRUPTED, cq_cancel_requested() ? "verification interrupted" : "verify cancelled");
}

cq_status cq_cmf_verify(const cq_cmf *c, size_t *problems, cq_progress_fn progress, void *user) {
    if (problems) *problems = 0;
    if (!c) return cq_fail(CQ_ERR_INVALID_ARG, "cq_cmf_verify: container is NULL");
    vctx v = {NULL, progress, user, 0, 0, 0, ""};

    /* What will be hashed, so progress has a total. */
    uint64_t expect[CQ_CMF_SEC_COUNT] = {0};
    bool check[CQ_CMF_SEC_COUNT] = {false};
    check[CQ_CMF_SEC_HEADER] = c->header_hash != 0;
    expect[CQ_CMF_SEC_HEADER] = c->header_hash;
    check[CQ_CMF_SEC_DIR] = c->dir_hash != 0;
    expect[CQ_CMF_SEC_DIR] = c->dir_hash;
    for (int id = CQ_CMF_SEC_MASKS; id <= CQ_CMF_SEC_INDEX; id++) {
        if (!c->sec_hash_present[id] || c->sec[id].len == 0) continue;
        if (!cq_cmf_parse_hex64(c->sec_hash_text[id], &expect[id])) {
            problem(&v, "header section_hashes.%s: malformed hex \"%.40s\"", cq_cmf_section_name((cq_cmf_section_id)id),
                    c->sec_hash_text[id]);
            continue;
        }
        check[id] = expect[id] != 0;
    }
    for (int id = 0; id < CQ_CMF_SEC_COUNT; id++)
        if (check[id]) v.total += c->sec[id].len;
    bool large = false;
    for (size_t i = 0; i < c->n_tensors; i++) {
        v.total += c->tensors[i].nbytes;
        large |= c->tensors[i].nbytes >= CQ_HASH64_PAR_MIN;
    }
    if (large) v.pool = cq_cmf_hash_pool(c);

    for (int id = 0; id < CQ_CMF_SEC_COUNT; id++) {
        if (!check[id]) continue;
        uint64_t h;
        if (!hash_span(&v, c->base + c->sec[id].off, c->sec[id].len, &h)) return interrupted();
        if (h != expect[id])
            problem(&v, "section '%s': hash64 mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                    cq_cmf_section_name((cq_cmf_section_id)id), expect[id], h);
    }
    for (size_t i = 0; i < c->n_tensors; i++) {
        const cq_tensor_view *t = &c->tensors[i];
        uint64_t h;
        if (!hash_span(&v, t->data, t->nbytes, &h)) return interrupted();
        if (h != t->hash)
            problem(&v, "tensor '%s': hash64 mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")", t->name,
                    t->hash, h);
    }
    if (progress && progress(v.done, v.total, user)) return interrupted();
    if (problems) *problems = v.problems;
    if (v.problems == 1) return cq_fail(CQ_ERR_HASH, "%s", v.first);
    if (v.problems > 1) return cq_fail(CQ_ERR_HASH, "%s (and %zu more problems)", v.first, v.problems - 1);
    return CQ_OK;
}
