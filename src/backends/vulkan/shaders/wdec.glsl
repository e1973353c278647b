// wdec.glsl — element (row, col) of a weight W [rows, cols] read from one storage buffer in the codec it is
// stored in, decoded exactly as src/codec does (each product rounded once, never contracted into an FMA):
//   dt 0 f32; 1 f16, 2 bf16 (16-bit words); 3 q8_row: int8 * the row's f16 scale; 4 q8_2f: that times the
//   column's f16 scale; 5 q4_block, 6 q4_tiled: (nibble - 8) * the f16 scale of the element's 32-group of the
//   flattened tensor; 7 q4tp: (nibble - 8) * the row's ladder rung picked by the group's 5-bit code.
// `o` is the tensor's offset in the buffer: in elements for dt 0-2, in bytes for the quantized codecs.
// Included once per weight buffer, with WDEC_FN (the function's name), WDEC_WORDS and WDEC_FLOATS (the
// buffer's uint and float views) and WDEC_BYTE, WDEC_H16 (names for the byte readers) defined; the includer
// declares cq_exp2[] (binding 8: exp2f of every f16 bit pattern as the host's libm computes it, which the
// q4tp ladder is defined through) and includes common.glsl first. rows * cols < 2^32 (the host checks).
uint WDEC_BYTE(uint b) { return (WDEC_WORDS[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint WDEC_H16(uint b) { return WDEC_BYTE(b) | (WDEC_BYTE(b + 1u) << 8); }

float WDEC_FN(uint dt, uint o, uint rows, uint cols, uint row, uint col) {
    uint e = row * cols + col;
    if (dt == 0u) return WDEC_FLOATS[o + e];
    if (dt <= 2u) return cq_load_word(WDEC_WORDS[(o + e) >> 1], o + e, dt);
    if (dt <= 4u) { // [int8 q: rows*cols][f16 row scale: rows][f16 column scale: cols (q8_2f)]
        uint q = WDEC_BYTE(o + e), sb = o + rows * cols + 2u * row;
        float v = cq_mul(float(int(q) - (q >= 128u ? 256 : 0)), cq_f16_to_f32(WDEC_H16(sb)));
        if (dt == 4u) v = cq_mul(v, cq_f16_to_f32(WDEC_H16(o + rows * cols + 2u * rows + 2u * col)));
        return v;
    }
    uint nb, sb, j;
    if (dt <= 6u) { // q4_block: [nibbles: 16 per group][f16 scales]; q4_tiled: groups of [f16 scale][16 nibbles]
        uint gi = e >> 5;
        j = e & 31u;
        if (dt == 5u) {
            nb = o + gi * 16u + (j >> 1);
            sb = o + ((rows * cols + 31u) >> 5) * 16u + gi * 2u;
        } else {
            sb = o + gi * 18u;
            nb = sb + 2u + (j >> 1);
        }
        uint q = (WDEC_BYTE(nb) >> ((j & 1u) * 4u)) & 15u;
        return cq_mul(float(int(q) - 8), cq_f16_to_f32(WDEC_H16(sb)));
    }
    // q4tp: plane A [rows][cols/32 groups][16 nibble bytes], plane B rows x [f16 lo][f16 step], plane C rows x
    // ceil(5*gpr/8) bytes of 5-bit codes, LSB-first. Rung c is exp2f(lo) times exp2f(step) c times, in order.
    uint gpr = cols >> 5, gi = col >> 5;
    j = col & 31u;
    nb = o + (row * gpr + gi) * 16u + (j >> 1);
    uint pb = o + rows * gpr * 16u + 4u * row;
    uint bit = gi * 5u, cb = o + rows * gpr * 16u + 4u * rows + row * ((gpr * 5u + 7u) >> 3) + (bit >> 3);
    uint sh = bit & 7u, v = WDEC_BYTE(cb);
    if (sh > 3u) v |= WDEC_BYTE(cb + 1u) << 8;
    uint code = (v >> sh) & 31u;
    float s = cq_exp2[WDEC_H16(pb)], ratio = cq_exp2[WDEC_H16(pb + 2u)];
    for (uint c = 0u; c < code; c++) s = cq_mul(s, ratio);
    uint q = (WDEC_BYTE(nb) >> ((j & 1u) * 4u)) & 15u;
    return cq_mul(float(int(q) - 8), s);
}
