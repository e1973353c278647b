/*
 * cmf_masks.c — the masks section (task masks: [u32 n][u32 meta_len]
 * [meta JSON][blobs]) and the sparse index, both parsed and bounds-checked
 * at open. Blob geometry comes from the header's arch; the layout (legacy
 * physical FFN rows or one row per virtual layer) is chosen by the exact
 * blob length, as the reference reader does. Tail bits, blob alignment and
 * blob overlap are not checked (the reference does not either).
 */
#include <inttypes.h>
#include <string.h>

#include "format/cmf_impl.h"
#include "format/jsonutil.h"

static uint64_t ceil8(uint64_t x) { return x / 8 + (x % 8 != 0); }

typedef struct mask_geom {
    uint64_t L, vrows, F, H, G, E;
    uint64_t legacy, legacy_e, loop, loop_e;
} mask_geom;

static cq_status mask_geometry(const cq_cmf *c, mask_geom *g) {
    g->L = cq_cmf_arch_u64(c, "num_layers", 0);
    uint64_t loops = cq_cmf_arch_u64(c, "num_loops", 1);
    if (loops == 0) loops = 1;
    g->F = ceil8(cq_cmf_arch_u64(c, "intermediate_size", 0));
    g->H = ceil8(cq_cmf_arch_u64(c, "num_attention_heads", 0));
    g->G = ceil8(g->L);
    const cJSON *moe = cJSON_GetObjectItemCaseSensitive(c->arch, "moe");
    const cJSON *ne = cJSON_IsObject(moe) ? cJSON_GetObjectItemCaseSensitive(moe, "num_experts") : NULL;
    g->E = ne ? ceil8((uint64_t)ne->valuedouble) : 0;
    uint64_t lf, lh, le, vf;
    bool ok = cq_mul_u64(g->L, loops, &g->vrows) && cq_mul_u64(g->L, g->F, &lf) && cq_mul_u64(g->L, g->H, &lh) &&
              cq_mul_u64(g->L, g->E, &le) && cq_mul_u64(g->vrows, g->F, &vf) && cq_add_u64(lf, lh, &g->legacy) &&
              cq_add_u64(g->legacy, g->G, &g->legacy) && cq_add_u64(g->legacy, le, &g->legacy_e) &&
              cq_add_u64(vf, lh, &g->loop) && cq_add_u64(g->loop, g->G, &g->loop) &&
              cq_add_u64(g->loop, le, &g->loop_e);
    if (!ok) return cq_fail(CQ_ERR_PARSE, "masks: blob size implied by the header arch overflows");
    return CQ_OK;
}

static const char *opt_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static uint64_t num_u64(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return (uint64_t)v->valuedouble; /* schema-checked whole number < 2^64 */
}
static bool opt_bool(const cJSON *o, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); }

static cq_status parse_mask(cq_cmf *c, const mask_geom *g, const cJSON *e, const uint8_t *sec, uint64_t sec_len,
                            cq_cmf_mask *m) {
    m->meta = e;
    m->task_id = (uint32_t)num_u64(e, "task_id");
    m->name = opt_str(e, "name");
    m->description = opt_str(e, "description");
    m->parent = opt_str(e, "parent");
    m->sparsity = (float)cJSON_GetObjectItemCaseSensitive(e, "sparsity")->valuedouble;
    const char *pr = opt_str(e, "priority");
    m->priority = strcmp(pr, "Primary") == 0 ? CQ_MASK_PRIMARY
                  : strcmp(pr, "Normal") == 0 ? CQ_MASK_NORMAL
                                              : CQ_MASK_FALLBACK;
    m->has_hot_pack = opt_bool(e, "has_hot_pack");
    m->has_expert_fields = opt_bool(e, "has_expert_fields");
    uint64_t off = num_u64(e, "blob_off"), len = num_u64(e, "blob_len");

    uint64_t expect;
    if (m->has_expert_fields) {
        m->loop_layout = len == g->loop_e;
        expect = m->loop_layout ? g->loop_e : g->legacy_e;
    } else {
        m->loop_layout = len == g->loop;
        expect = m->loop_layout ? g->loop : g->legacy;
    }
    /* Unlooped models: both layouts are the same bytes; call it legacy. */
    if (g->vrows == g->L) m->loop_layout = false;
    if (m->has_expert_fields && g->E == 0)
        return cq_fail(CQ_ERR_PARSE, "mask '%s': expert fields flagged but the arch has no MoE block", m->name);
    if (len != expect)
        return cq_fail(CQ_ERR_PARSE, "mask '%s': blob_len %" PRIu64 " != %" PRIu64 " expected for the arch", m->name,
                       len, expect);
    uint64_t end;
    if (!cq_add_u64(off, len, &end) || end > sec_len)
        return cq_fail(CQ_ERR_PARSE, "mask '%s': blob [%" PRIu64 ", +%" PRIu64 ") lies outside the masks section (%" PRIu64 " bytes)",
                       m->name, off, len, sec_len);
    m->blob = sec + off;
    m->blob_len = len;
    m->ffn_row_bytes = g->F;
    m->head_row_bytes = g->H;
    m->gate_bytes = g->G;
    m->expert_row_bytes = m->has_expert_fields ? g->E : 0;
    m->num_layers = g->L;
    m->ffn_rows = m->loop_layout ? g->vrows : g->L;
    return CQ_OK;
}

cq_status cq_cmf_parse_masks(cq_cmf *c) {
    const cq_cmf_section *s = &c->sec[CQ_CMF_SEC_MASKS];
    if (s->len == 0) return CQ_OK;
    const uint8_t *p = c->base + s->off;
    if (s->len < 8) return cq_fail(CQ_ERR_PARSE, "masks section too short (%" PRIu64 " bytes)", s->len);
    uint32_t n = cq_rd32(p), meta_len = cq_rd32(p + 4);
    if (8 + (uint64_t)meta_len > s->len)
        return cq_fail(CQ_ERR_PARSE, "masks meta [8, +%u) lies outside the masks section (%" PRIu64 " bytes)", meta_len,
                       s->len);
    CQ_TRY(cq_json_parse(p + 8, meta_len, "masks meta JSON", &c->masks_meta));
    CQ_TRY(cq_cmf_masks_meta_check(c->masks_meta));
    c->default_task = opt_str(c->masks_meta, "default_task");
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c->masks_meta, "masks");
    size_t count = (size_t)cJSON_GetArraySize(arr);
    if (count != n)
        return cq_fail(CQ_ERR_PARSE, "masks count mismatch: the section says %u, the meta JSON lists %zu", n, count);
    if (count == 0) return CQ_OK;
    mask_geom g = {0};
    CQ_TRY(mask_geometry(c, &g));
    c->masks = cq_calloc(count, sizeof *c->masks);
    if (!c->masks) return CQ_ERR_NOMEM;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        CQ_TRY(parse_mask(c, &g, e, p, s->len, &c->masks[i]));
        c->n_masks = i + 1;
    }
    return CQ_OK;
}

cq_status cq_cmf_parse_index(cq_cmf *c) {
    const cq_cmf_section *s = &c->sec[CQ_CMF_SEC_INDEX];
    if (s->len == 0) return CQ_OK;
    const uint8_t *p = c->base + s->off;
    uint64_t len = s->len;
    if (len < 8) return cq_fail(CQ_ERR_PARSE, "sparse index: too short (%" PRIu64 " bytes)", len);
    uint32_t n = cq_rd32(p);
    /* Every entry has a 16-byte head: a count that cannot fit is refused
     * before anything is allocated for it. */
    if ((uint64_t)n > (len - 8) / 16)
        return cq_fail(CQ_ERR_PARSE, "sparse index: %u entries cannot fit in %" PRIu64 " bytes", n, len);
    if (n == 0) return CQ_OK;
    c->index = cq_calloc(n, sizeof *c->index);
    if (!c->index) return CQ_ERR_NOMEM;
    uint64_t pos = 8;
    for (uint32_t i = 0; i < n; i++) {
        if (pos > len || len - pos < 16)
            return cq_fail(CQ_ERR_PARSE, "sparse index: entry %u header lies outside the section", i);
        cq_cmf_index_entry *e = &c->index[i];
        e->task_id = cq_rd32(p + pos);
        e->layer_idx = cq_rd32(p + pos + 4);
        e->n_groups = cq_rd32(p + pos + 8);
        e->n_heads = cq_rd32(p + pos + 12);
        pos += 16;
        uint64_t body = 2 * (uint64_t)e->n_groups + e->n_heads;
        if (len - pos < body)
            return cq_fail(CQ_ERR_PARSE, "sparse index: entry %u (%u groups, %u heads) lies outside the section", i,
                           e->n_groups, e->n_heads);
        e->groups = p + pos;
        e->heads = p + pos + 2 * (uint64_t)e->n_groups;
        pos += body;
        pos = (pos + 3) / 4 * 4;
        c->n_index = i + 1;
    }
    return CQ_OK;
}

/* ---- accessors ---- */
size_t cq_cmf_mask_count(const cq_cmf *c) { return c ? c->n_masks : 0; }
const cq_cmf_mask *cq_cmf_mask_at(const cq_cmf *c, size_t i) { return c && i < c->n_masks ? &c->masks[i] : NULL; }
const cq_cmf_mask *cq_cmf_mask_find(const cq_cmf *c, const char *name) {
    for (size_t i = 0; c && name && i < c->n_masks; i++)
        if (strcmp(c->masks[i].name, name) == 0) return &c->masks[i];
    return NULL;
}
const char *cq_cmf_mask_default_task(const cq_cmf *c) { return c ? c->default_task : NULL; }
const cJSON *cq_cmf_masks_meta(const cq_cmf *c) { return c ? c->masks_meta : NULL; }

const uint8_t *cq_cmf_mask_ffn_row(const cq_cmf_mask *m, uint64_t layer, uint64_t pass) {
    if (!m || layer >= m->num_layers) return NULL;
    uint64_t row = layer;
    if (m->loop_layout) {
        if (pass > (m->ffn_rows - layer - 1) / m->num_layers) return NULL;
        row = pass * m->num_layers + layer;
    }
    return m->blob + row * m->ffn_row_bytes;
}

const uint8_t *cq_cmf_mask_head_row(const cq_cmf_mask *m, uint64_t layer) {
    if (!m || layer >= m->num_layers) return NULL;
    return m->blob + m->ffn_rows * m->ffn_row_bytes + layer * m->head_row_bytes;
}

bool cq_cmf_mask_layer_alive(const cq_cmf_mask *m, uint64_t layer) {
    if (!m || layer >= m->num_layers) return true;
    const uint8_t *g = m->blob + m->ffn_rows * m->ffn_row_bytes + m->num_layers * m->head_row_bytes;
    return (g[layer / 8] >> (layer % 8)) & 1;
}

const uint8_t *cq_cmf_mask_expert_row(const cq_cmf_mask *m, uint64_t layer) {
    if (!m || !m->has_expert_fields || layer >= m->num_layers) return NULL;
    return m->blob + m->ffn_rows * m->ffn_row_bytes + m->num_layers * m->head_row_bytes + m->gate_bytes +
           layer * m->expert_row_bytes;
}

size_t cq_cmf_index_count(const cq_cmf *c) { return c ? c->n_index : 0; }
const cq_cmf_index_entry *cq_cmf_index_at(const cq_cmf *c, size_t i) {
    return c && i < c->n_index ? &c->index[i] : NULL;
}
