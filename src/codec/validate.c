/*
 * validate.c — structural checks of the variable-size payloads (vbit,
 * vbit_ro, q1s, q1t), run by the reader at open so that a bad tensor fails
 * there with a message instead of decoding garbage later.
 *
 * Every table is bounds-checked before it is read and every size sum is
 * overflow-checked. Beyond the reference reader (which checks only vbit and
 * vbit_ro and trusts q1s/q1t lengths), the q1s/q1t overlays are required to
 * stay inside the tensor and the payload to end exactly where its tables
 * say; the reference writers produce exactly that.
 */
#include <inttypes.h>

#include "codec/codec_impl.h"

static bool vbit_width_ok(unsigned b) { return b >= 3 && b <= 8 && b != 7; }

/* bits header + the f16 group scales: rows + 2*rows*gpr. */
static bool vbit_head(const cq_codec_geom *g, uint64_t *out) {
    uint64_t sc;
    return cq_mul_u64(g->rows, (g->cols / CQ_GROUP) * 2, &sc) && cq_add_u64(g->rows, sc, out);
}

/* Packed bytes of one row of width b: ceil(cols*b/8); cols*8 cannot overflow
 * for a tensor whose rows*cols fit (cols <= n), except in absurd shapes,
 * which the caller rejects through the checked sum. */
static bool vbit_row_bytes(uint64_t cols, unsigned b, uint64_t *out) {
    uint64_t bits;
    if (!cq_mul_u64(cols, b, &bits)) return false;
    *out = bits / 8 + (bits % 8 != 0);
    return true;
}

cq_status cq_codec_validate_vbit(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes) {
    if (nbytes < g->rows)
        return cq_fail(CQ_ERR_BOUNDS, "vbit payload is %" PRIu64 " bytes, too short for its %" PRIu64
                       "-byte width header", nbytes, g->rows);
    uint64_t total;
    if (!vbit_head(g, &total)) return cq_fail(CQ_ERR_BOUNDS, "vbit header size overflows");
    for (uint64_t r = 0; r < g->rows; r++) {
        uint64_t rb;
        if (!vbit_width_ok(p[r]))
            return cq_fail(CQ_ERR_BOUNDS, "vbit row %" PRIu64 ": bit width %u outside {3,4,5,6,8}", r, p[r]);
        if (!vbit_row_bytes(g->cols, p[r], &rb) || !cq_add_u64(total, rb, &total))
            return cq_fail(CQ_ERR_BOUNDS, "vbit payload size overflows");
    }
    if (total != nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "vbit payload is %" PRIu64 " bytes, its widths need %" PRIu64, nbytes, total);
    return CQ_OK;
}

cq_status cq_codec_validate_vbit_ro(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes) {
    uint64_t head, table, packed;
    if (!vbit_head(g, &head) || !cq_mul_u64(g->rows + 1, 4, &table) || !cq_add_u64(head, table, &packed))
        return cq_fail(CQ_ERR_BOUNDS, "vbit_ro header size overflows");
    if (nbytes < packed)
        return cq_fail(CQ_ERR_BOUNDS, "vbit_ro payload is %" PRIu64 " bytes, too short for its %" PRIu64
                       "-byte headers", nbytes, packed);
    const uint8_t *off = p + head;
    if (cq_rd32(off) != 0) return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row offset 0 is %u, must be 0", cq_rd32(off));
    for (uint64_t r = 0; r < g->rows; r++) {
        uint64_t want;
        uint32_t a = cq_rd32(off + 4 * r), b = cq_rd32(off + 4 * (r + 1));
        if (!vbit_width_ok(p[r]))
            return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row %" PRIu64 ": bit width %u outside {3,4,5,6,8}", r, p[r]);
        if (!vbit_row_bytes(g->cols, p[r], &want)) return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row size overflows");
        if (b < a || (uint64_t)(b - a) != want)
            return cq_fail(CQ_ERR_BOUNDS, "vbit_ro row %" PRIu64 ": offsets %u..%u span %" PRId64
                           " bytes, width %u needs %" PRIu64, r, a, b, (int64_t)b - (int64_t)a, p[r], want);
    }
    uint64_t total = packed + cq_rd32(off + 4 * g->rows);
    if (total != nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "vbit_ro payload is %" PRIu64 " bytes, its offset table ends at %" PRIu64,
                       nbytes, total);
    return CQ_OK;
}

cq_status cq_codec_validate_q1s(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes) {
    uint64_t groups = g->n / CQ_GROUP, base, head;
    if (!cq_mul_u64(groups, 6, &base) || !cq_add_u64(base, 4, &head))
        return cq_fail(CQ_ERR_BOUNDS, "q1s base size overflows");
    if (nbytes < head)
        return cq_fail(CQ_ERR_BOUNDS, "q1s payload is %" PRIu64 " bytes, too short for the %" PRIu64
                       "-byte base and outlier count", nbytes, head);
    uint32_t count = cq_rd32(p + base);
    uint64_t total = head + (uint64_t)count * 6;
    if (total != nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "q1s payload is %" PRIu64 " bytes, %u outliers need %" PRIu64, nbytes, count,
                       total);
    for (uint32_t k = 0; k < count; k++) {
        uint32_t idx = cq_rd32(p + head + 6 * (uint64_t)k);
        if (idx >= g->n)
            return cq_fail(CQ_ERR_BOUNDS, "q1s outlier %u: index %u outside the %" PRIu64 " elements", k, idx, g->n);
    }
    return CQ_OK;
}

cq_status cq_codec_validate_q1t(const cq_codec_geom *g, const uint8_t *p, uint64_t nbytes) {
    uint64_t groups = g->n / CQ_GROUP, base, table, head;
    if (!cq_mul_u64(groups, 9, &base) || !cq_mul_u64(g->rows + 1, 4, &table) || !cq_add_u64(base, table, &head))
        return cq_fail(CQ_ERR_BOUNDS, "q1t header size overflows");
    if (nbytes < head)
        return cq_fail(CQ_ERR_BOUNDS, "q1t payload is %" PRIu64 " bytes, too short for the %" PRIu64
                       "-byte base and row table", nbytes, head);
    const uint8_t *rp = p + base;
    if (cq_rd32(rp) != 0) return cq_fail(CQ_ERR_BOUNDS, "q1t row_ptr[0] is %u, must be 0", cq_rd32(rp));
    for (uint64_t r = 0; r < g->rows; r++) {
        if (cq_rd32(rp + 4 * (r + 1)) < cq_rd32(rp + 4 * r))
            return cq_fail(CQ_ERR_BOUNDS, "q1t row_ptr decreases at row %" PRIu64 " (%u -> %u)", r,
                           cq_rd32(rp + 4 * r), cq_rd32(rp + 4 * (r + 1)));
    }
    uint32_t count = cq_rd32(rp + 4 * g->rows);
    uint64_t total = head + (uint64_t)count * 4;
    if (total != nbytes)
        return cq_fail(CQ_ERR_BOUNDS, "q1t payload is %" PRIu64 " bytes, %u overlay entries need %" PRIu64, nbytes,
                       count, total);
    for (uint32_t k = 0; k < count; k++) {
        uint16_t col = cq_rd16(p + head + 4 * (uint64_t)k);
        if (col >= g->cols)
            return cq_fail(CQ_ERR_BOUNDS, "q1t overlay entry %u: column %u outside the %" PRIu64 " cols", k, col,
                           g->cols);
    }
    return CQ_OK;
}
