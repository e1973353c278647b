/* test_codec.c — codec layer with hand-built vectors: f16/bf16 conversion
 * (subnormals, rounding, overflow, NaN), dtype names, the size and shape
 * rule of every id, payload validation, and exact decodes of payloads
 * built byte by byte (the 38-byte q4tp example, the q2tp ladder, q8_row's
 * -128, odd row lengths, vbit, q1s, q1t). Statistical tests of the encoders
 * are in test_codec_quant.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "testutil.h"

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Decode rows of a validated payload; asserts success. */
static void decode(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *p, uint64_t nbytes, uint64_t row0,
                   uint64_t nrows, float *out) {
    cq_status st = cq_codec_dequant_rows(dt, ndim, shape, p, nbytes, row0, nrows, out);
    if (st != CQ_OK) fail_msg("decode %s: %s", cq_dtype_name(dt), cq_last_error());
}

/* ---- f16 / bf16 ----------------------------------------------------------- */

static void test_f16_subnormal_vectors(void **state) {
    (void)state;
    /* The format's reference vectors (an older decoder halved subnormals). */
    assert_true(cq_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(fabsf(cq_f16_to_f32(0x0001) - 5.9604645e-8f) < 1e-12f);
    assert_true(cq_f16_to_f32(0x03FF) == 1023.0f * 0x1p-24f);
    assert_true(fabsf(cq_f16_to_f32(0x03FF) - 6.097555e-5f) < 1e-9f);
    assert_true(cq_f16_to_f32(0x812b) == -299.0f * 0x1p-24f);
    assert_true(fabsf(cq_f16_to_f32(0x812b) - -1.7821789e-5f) < 1e-9f);
    assert_true(cq_f16_to_f32(0x0400) == 0x1p-14f);
    assert_true(fabsf(cq_f16_to_f32(0x0400) - 6.1035156e-5f) < 1e-9f);
    assert_true(cq_f16_to_f32(0x3C00) == 1.0f);
    assert_true(cq_f16_to_f32(0x7BFF) == 65504.0f);
    assert_int_equal(f_bits(cq_f16_to_f32(0x8000)), 0x80000000u);
}

/* Every one of the 65536 halves against its definition, and back. */
static void test_f16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = cq_f16_to_f32((uint16_t)h);
        unsigned e = (h >> 10) & 31, m = h & 1023;
        bool neg = h & 0x8000;
        if (e == 31) {
            if (m == 0) {
                assert_true(isinf(v));
                assert_int_equal(signbit(v) != 0, neg);
            } else {
                assert_true(isnan(v));
                assert_int_equal(cq_f32_to_f16(v), (neg ? 0xFE00 : 0x7E00));
            }
            continue;
        }
        double want = e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024 + m), (int)e - 25);
        if (neg) want = -want;
        assert_true((double)v == want);
        assert_int_equal(signbit(v) != 0, neg);
        assert_int_equal(cq_f32_to_f16(v), h);
    }
}

static void test_f16_rounding(void **state) {
    (void)state;
    /* Normal range: nearest, ties to even. */
    assert_int_equal(cq_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);     /* tie -> even 0x3C00 */
    assert_int_equal(cq_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02); /* tie -> even 0x3C02 */
    assert_int_equal(cq_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
    assert_int_equal(cq_f32_to_f16(-2.5f), 0xC100);
    /* Overflow: 65504 is the largest finite, 65520 is the tie that rounds to inf. */
    assert_int_equal(cq_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(cq_f32_to_f16(65519.99f), 0x7BFF);
    assert_int_equal(cq_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(cq_f32_to_f16(-1e6f), 0xFC00);
    assert_int_equal(cq_f32_to_f16(INFINITY), 0x7C00);
    assert_int_equal(cq_f32_to_f16(-INFINITY), 0xFC00);
    assert_int_equal(cq_f32_to_f16(NAN), 0x7E00);
    assert_int_equal(cq_f32_to_f16(-NAN) & 0x7FFF, 0x7E00);
    /* Subnormal range: ties round away from zero (the reference writer's rule). */
    assert_int_equal(cq_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(cq_f32_to_f16(0x1p-25f), 0x0001);     /* 0.5 ulp: tie -> up */
    assert_int_equal(cq_f32_to_f16(5 * 0x1p-25f), 0x0003); /* 2.5 ulp: tie -> up (numpy: 2) */
    assert_int_equal(cq_f32_to_f16(-5 * 0x1p-25f), 0x8003);
    assert_int_equal(cq_f32_to_f16(0x1.fp-26f), 0x0000); /* below half the smallest subnormal */
    assert_int_equal(cq_f32_to_f16(1e-30f), 0x0000);
    assert_int_equal(cq_f32_to_f16(-1e-30f), 0x8000);
    assert_int_equal(cq_f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up into the normal range */
    assert_true(cq_f16_round(0.1f) == cq_f16_to_f32(0x2E66));
    /* the encoders' scale helper floors at the smallest normal */
    assert_true(cq_f16_scale(0.0f) == 0x1p-14f);
    assert_true(cq_f16_scale(1e-6f) == 0x1p-14f);
    assert_true(cq_f16_scale(0.1f) == cq_f16_to_f32(0x2E66));

    /* Random f32 values: the result is a nearest half; normal-range ties go to
     * the even mantissa, subnormal ties away from zero. */
    tu_rng rng;
    tu_rng_seed(&rng, 7);
    for (int it = 0; it < 200000; it++) {
        uint32_t u = (uint32_t)tu_rng_u64(&rng);
        uint32_t e = 100 + (uint32_t)(tu_rng_u64(&rng) % 42); /* 2^-27 .. 2^15 */
        u = (u & 0x807FFFFFu) | (e << 23);
        if (it % 4 == 0) u = (u & 0xFFFFE000u) | 0x1000u; /* exact normal-range ties */
        if (it % 4 == 1) u &= 0xFFFFFF00u;                /* more ties in the subnormal range */
        float x = bits_f(u);
        uint16_t h = cq_f32_to_f16(x);
        double d0 = fabs((double)x - (double)cq_f16_to_f32(h));
        for (int dir = -1; dir <= 1; dir += 2) {
            int mag = (int)(h & 0x7FFF) + dir;
            if (mag < 0 || mag >= 0x7C00) continue;
            uint16_t nb = (uint16_t)((h & 0x8000) | mag);
            double d1 = fabs((double)x - (double)cq_f16_to_f32(nb));
            assert_true(d0 <= d1);
            if (d0 == d1 && d0 != 0) {
                if ((h & 0x7C00) != 0 && (nb & 0x7C00) != 0) assert_int_equal(h & 1, 0);
                else assert_true(fabsf(cq_f16_to_f32(h)) > fabsf(x));
            }
        }
    }
}

static void test_bf16(void **state) {
    (void)state;
    assert_int_equal(cq_f32_to_bf16(1.0f), 0x3F80);
    assert_true(cq_bf16_to_f32(0x3F80) == 1.0f);
    assert_true(cq_bf16_to_f32(0xC049) == bits_f(0xC0490000u));
    assert_int_equal(cq_f32_to_bf16(bits_f(0x3F808000u)), 0x3F80); /* tie -> even */
    assert_int_equal(cq_f32_to_bf16(bits_f(0x3F818000u)), 0x3F82); /* tie -> even (up) */
    assert_int_equal(cq_f32_to_bf16(bits_f(0x3F808001u)), 0x3F81);
    assert_int_equal(cq_f32_to_bf16(bits_f(0x7F7FFFFFu)), 0x7F80); /* rounds to inf */
    assert_int_equal(cq_f32_to_bf16(-INFINITY), 0xFF80);
    uint16_t n = cq_f32_to_bf16(bits_f(0x7F800001u)); /* signalling NaN stays NaN */
    assert_true(isnan(cq_bf16_to_f32(n)));
    assert_int_equal(cq_f32_to_bf16(bits_f(0x00000001u)), 0x0000); /* f32 subnormal */
    assert_int_equal(cq_f32_to_bf16(bits_f(0x00010000u)), 0x0001);
}

/* ---- names, size rules, shapes ---------------------------------------------- */

static void test_names(void **state) {
    (void)state;
    const char *names[] = {"f32", "f16",      "bf16", "q8_row", "q4_block", "mix8_4", "u8",   "q4_col", "vbit",
                           "q8_2f", "vbit_ro", "q4_tiled", "q1", "q1s", "q1t", "q4tp", "q2tp"};
    assert_int_equal(CQ_ARRAY_LEN(names), CQ_DTYPE_COUNT);
    for (int i = 0; i < CQ_DTYPE_COUNT; i++) {
        assert_string_equal(cq_dtype_name((cq_dtype)i), names[i]);
        assert_int_equal(cq_dtype_from_name(names[i]), i);
    }
    assert_int_equal(cq_dtype_from_name("Q8_2F"), CQ_DTYPE_Q8_2F);
    assert_int_equal(cq_dtype_from_name("q4t"), CQ_DTYPE_Q4_TILED);
    assert_int_equal(cq_dtype_from_name("Q4TP"), CQ_DTYPE_Q4TP);
    assert_int_equal(cq_dtype_from_name("q3"), -1);
    assert_int_equal(cq_dtype_from_name(""), -1);
    assert_int_equal(cq_dtype_from_name(NULL), -1);
    assert_string_equal(cq_dtype_name((cq_dtype)17), "?");
    assert_string_equal(cq_dtype_name((cq_dtype)-1), "?");
}

static uint64_t nbytes_of(cq_dtype dt, int ndim, const uint64_t *shape) {
    uint64_t n = 0;
    cq_status st = cq_codec_nbytes(dt, ndim, shape, &n);
    if (st != CQ_OK) fail_msg("nbytes %s: %s", cq_dtype_name(dt), cq_last_error());
    return n;
}

static void test_size_rules(void **state) {
    (void)state;
    const uint64_t big[2] = {4096, 4096};
    /* The digest's table for a [4096, 4096] matrix. */
    assert_int_equal(nbytes_of(CQ_DTYPE_Q8_ROW, 2, big), 16785408);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q8_2F, 2, big), 16793600);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_TILED, 2, big), 9437184);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_BLOCK, 2, big), 9437184);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4TP, 2, big), 8732672);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q2TP, 2, big), 4538368);
    assert_int_equal(nbytes_of(CQ_DTYPE_F32, 2, big), 67108864);
    assert_int_equal(nbytes_of(CQ_DTYPE_F16, 2, big), 33554432);
    assert_int_equal(nbytes_of(CQ_DTYPE_BF16, 2, big), 33554432);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q1, 2, big), 3145728);
    /* code strides */
    assert_int_equal(cq_codec_tp_code_stride(1), 1);
    assert_int_equal(cq_codec_tp_code_stride(2), 2);
    assert_int_equal(cq_codec_tp_code_stride(3), 2);
    assert_int_equal(cq_codec_tp_code_stride(8), 5);
    assert_int_equal(cq_codec_tp_code_stride(128), 80);
    /* flattened codecs: groups cross rows, the last one is padded */
    const uint64_t odd[2] = {3, 45};
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_BLOCK, 2, odd), 18 * 5);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_TILED, 2, odd), 18 * 5);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q1, 2, odd), 6 * 5);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q8_ROW, 2, odd), 135 + 6);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q8_2F, 2, odd), 135 + 6 + 90);
    const uint64_t d3[3] = {2, 3, 5};
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_TILED, 3, d3), 18);
    assert_int_equal(nbytes_of(CQ_DTYPE_F16, 3, d3), 60);
    assert_int_equal(nbytes_of(CQ_DTYPE_F32, 0, NULL), 4); /* a scalar has one element */
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4_TILED, 0, NULL), 18);
    const uint64_t q4tp_small[2] = {1, 64}, q4tp_3[2] = {5, 96};
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4TP, 2, q4tp_small), 38);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q4TP, 2, q4tp_3), 5 * 48 + 20 + 5 * 2);
    assert_int_equal(nbytes_of(CQ_DTYPE_Q2TP, 2, q4tp_3), 5 * 24 + 20 + 5 * 2);
    /* The reference rule's column field is n/max(rows,1): none for 0 rows. */
    const uint64_t empty[2] = {0, 64};
    assert_int_equal(nbytes_of(CQ_DTYPE_Q8_2F, 2, empty), 0);

    /* size kinds */
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_Q4TP), CQ_SIZE_FIXED);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_Q1), CQ_SIZE_FIXED);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_VBIT), CQ_SIZE_VARIABLE);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_VBIT_RO), CQ_SIZE_VARIABLE);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_Q1S), CQ_SIZE_VARIABLE);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_Q1T), CQ_SIZE_VARIABLE);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_U8), CQ_SIZE_UNCHECKED);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_MIX8_4), CQ_SIZE_UNCHECKED);
    assert_int_equal(cq_codec_size_kind_of(CQ_DTYPE_Q4_COL), CQ_SIZE_UNCHECKED);
    uint64_t n;
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_VBIT, 2, big, &n), CQ_ERR_UNSUPPORTED);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_U8, 1, big, &n), CQ_ERR_UNSUPPORTED);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_MIX8_4, 2, big, &n), CQ_ERR_UNSUPPORTED);
    /* unchecked ids accept any length at open */
    uint8_t junk[3] = {1, 2, 3};
    assert_int_equal(cq_codec_validate(CQ_DTYPE_U8, 1, big, junk, 3), CQ_OK);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q4_COL, 2, big, junk, 3), CQ_OK);
}

static void test_bad_shapes(void **state) {
    (void)state;
    uint64_t n;
    const uint64_t one[1] = {64}, three[3] = {2, 2, 64}, c33[2] = {2, 33}, c0[2] = {2, 0}, c48[2] = {3, 48};
    const cq_dtype strict[] = {CQ_DTYPE_Q4TP, CQ_DTYPE_Q2TP};
    for (size_t i = 0; i < CQ_ARRAY_LEN(strict); i++) {
        assert_int_equal(cq_codec_nbytes(strict[i], 1, one, &n), CQ_ERR_SHAPE);
        assert_int_equal(cq_codec_nbytes(strict[i], 3, three, &n), CQ_ERR_SHAPE);
        assert_int_equal(cq_codec_nbytes(strict[i], 2, c33, &n), CQ_ERR_SHAPE);
        assert_non_null(strstr(cq_last_error(), "multiple of 32"));
        assert_int_equal(cq_codec_nbytes(strict[i], 2, c0, &n), CQ_ERR_SHAPE);
        assert_int_equal(cq_codec_nbytes(strict[i], 2, c48, &n), CQ_ERR_SHAPE);
        assert_int_equal(cq_codec_validate(strict[i], 2, c33, NULL, 0), CQ_ERR_SHAPE);
    }
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q8_ROW, 1, one, &n), CQ_ERR_SHAPE);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q8_2F, 3, three, &n), CQ_ERR_SHAPE);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT, 2, c33, NULL, 0), CQ_ERR_SHAPE);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT_RO, 1, one, NULL, 0), CQ_ERR_SHAPE);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, c48, NULL, 0), CQ_ERR_SHAPE);
    const uint64_t wide[2] = {1, 65536 + 32}, widest_ok[2] = {0, 65536};
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, wide, NULL, 0), CQ_ERR_SHAPE);
    assert_non_null(strstr(cq_last_error(), "65536"));
    uint8_t q1t_empty[4] = {0};
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, widest_ok, q1t_empty, 4), CQ_OK);
    /* the same shapes are fine for the flattened codecs */
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q4_TILED, 2, c33, &n), CQ_OK);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q1, 3, three, &n), CQ_OK);

    /* overflow */
    const uint64_t huge_f32[2] = {1ull << 62, 2}, prod[2] = {1ull << 40, 1ull << 40};
    const uint64_t huge_tp[2] = {1ull << 58, 1024};
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_F32, 2, huge_f32, &n), CQ_ERR_BOUNDS);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_F16, 2, prod, &n), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "overflows"));
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q4TP, 2, huge_tp, &n), CQ_ERR_BOUNDS);
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q8_ROW, 2, huge_f32, &n), CQ_ERR_BOUNDS);
    /* bad ids and arguments */
    assert_int_equal(cq_codec_nbytes((cq_dtype)17, 1, one, &n), CQ_ERR_DTYPE);
    assert_int_equal(cq_codec_validate((cq_dtype)99, 1, one, NULL, 0), CQ_ERR_DTYPE);
    assert_non_null(strstr(cq_last_error(), "99"));
    const uint64_t seven[7] = {1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(cq_codec_nbytes(CQ_DTYPE_F32, 7, seven, &n), CQ_ERR_INVALID_ARG);
    /* fixed-size codecs: validation is size equality */
    const uint64_t s28[2] = {2, 8};
    uint8_t q8[2 * 8 + 4] = {0};
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q8_ROW, 2, s28, q8, sizeof q8), CQ_OK);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q8_ROW, 2, s28, q8, sizeof q8 - 1), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "19 bytes"));
    assert_int_equal(cq_codec_validate(CQ_DTYPE_F32, 2, s28, q8, sizeof q8), CQ_ERR_BOUNDS);
}

static void test_unsupported(void **state) {
    (void)state;
    const uint64_t shape[2] = {1, 32};
    uint8_t buf[64] = {0};
    float out[32], src[32] = {0};
    for (int id = 0; id < CQ_DTYPE_COUNT; id++) {
        bool reserved = id == CQ_DTYPE_MIX8_4 || id == CQ_DTYPE_Q4_COL;
        assert_int_equal(cq_codec_can_decode((cq_dtype)id), !reserved);
    }
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_MIX8_4, 2, shape, buf, 64, 0, 1, out), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "not supported yet"));
    assert_non_null(strstr(cq_last_error(), "mix8_4"));
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_Q4_COL, 2, shape, buf, 64, 0, 1, out), CQ_ERR_UNSUPPORTED);
    assert_non_null(strstr(cq_last_error(), "not supported yet"));
    assert_int_equal(cq_codec_dequant_rows((cq_dtype)17, 2, shape, buf, 64, 0, 1, out), CQ_ERR_DTYPE);

    const cq_dtype enc[] = {CQ_DTYPE_F32,      CQ_DTYPE_F16,      CQ_DTYPE_BF16, CQ_DTYPE_Q8_ROW,
                            CQ_DTYPE_Q4_BLOCK, CQ_DTYPE_Q8_2F,    CQ_DTYPE_Q4_TILED, CQ_DTYPE_Q4TP};
    int encodable = 0;
    for (int id = 0; id < CQ_DTYPE_COUNT; id++) encodable += cq_codec_can_encode((cq_dtype)id);
    assert_int_equal(encodable, CQ_ARRAY_LEN(enc));
    for (size_t i = 0; i < CQ_ARRAY_LEN(enc); i++) assert_true(cq_codec_can_encode(enc[i]));
    const cq_dtype noenc[] = {CQ_DTYPE_Q2TP, CQ_DTYPE_VBIT, CQ_DTYPE_VBIT_RO, CQ_DTYPE_Q1,
                              CQ_DTYPE_Q1S,  CQ_DTYPE_Q1T,  CQ_DTYPE_MIX8_4, CQ_DTYPE_Q4_COL};
    for (size_t i = 0; i < CQ_ARRAY_LEN(noenc); i++) {
        assert_int_equal(cq_codec_quantize(noenc[i], 2, shape, src, buf, sizeof buf), CQ_ERR_UNSUPPORTED);
        char want[64];
        snprintf(want, sizeof want, "encoding %s is not supported yet", cq_dtype_name(noenc[i]));
        assert_string_equal(cq_last_error(), want);
    }
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_U8, 2, shape, src, buf, sizeof buf), CQ_ERR_UNSUPPORTED);
    /* output too small, non-finite input */
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_Q4TP, 2, shape, src, buf, 20), CQ_ERR_INVALID_ARG);
    src[5] = NAN;
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_Q4TP, 2, shape, src, buf, sizeof buf), CQ_ERR_NUMERIC);
    assert_non_null(strstr(cq_last_error(), "element 5"));
    src[5] = 1e30f; /* finite, but the scale would overflow f16 */
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_Q8_ROW, 2, shape, src, buf, sizeof buf), CQ_ERR_NUMERIC);
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_Q4TP, 2, shape, src, buf, sizeof buf), CQ_ERR_NUMERIC);
    assert_int_equal(cq_codec_quantize(CQ_DTYPE_F16, 2, shape, src, buf, sizeof buf), CQ_OK); /* -> inf */
    /* row range */
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_F32, 2, shape, buf, 64, 1, 1, out), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_F32, 2, shape, buf, 64, UINT64_MAX, 2, out), CQ_ERR_INVALID_ARG);
    /* payload shorter than the size rule */
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_F32, 2, shape, buf, 64, 0, 1, out), CQ_ERR_BOUNDS);
}

/* ---- q4tp / q2tp ----------------------------------------------------------- */

static const uint8_t k_lo_m3_step_q[4] = {0x00, 0xC2, 0x00, 0x34}; /* lo = -3, step = 0.25 */

static void test_q4tp_ladder(void **state) {
    (void)state;
    float t[32];
    cq_codec_q4tp_ladder(k_lo_m3_step_q, t);
    assert_true(t[0] == 0.125f);
    const float ratio = exp2f(0.25f);
    assert_int_equal(f_bits(ratio), 0x3F9837F0u);
    for (int c = 1; c < 32; c++) assert_true(t[c] == t[c - 1] * ratio); /* the chain, bit for bit */
    assert_int_equal(f_bits(t[7]), 0x3ED744F9u);
    /* The closed form is within ~1e-6 but not the definition. */
    for (int c = 0; c < 32; c++) assert_true(fabs((double)t[c] - exp2(-3.0 + 0.25 * c)) <= 2e-6 * t[c]);
    assert_true(fabsf(t[31] - 26.908657f) <= 1e-6f * 27.0f);
}

static void test_q4tp_38_byte_example(void **state) {
    (void)state;
    const uint8_t p[38] = {
        0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f, /* tile 0 */
        0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, 0x98, /* tile 1 */
        0x00, 0xc2, 0x00, 0x34, /* lo = -3.0, step = 0.25 */
        0xe0, 0x00,             /* codes 0 and 7 */
    };
    const uint64_t shape[2] = {1, 64};
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q4TP, 2, shape, p, 38), CQ_OK);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q4TP, 2, shape, p, 37), CQ_ERR_BOUNDS);
    float out[64];
    decode(CQ_DTYPE_Q4TP, 2, shape, p, 38, 0, 1, out);
    const float first[8] = {-1.0f, 0.875f, -0.875f, 0.75f, -0.75f, 0.625f, -0.625f, 0.5f};
    for (int i = 0; i < 8; i++) assert_true(out[i] == first[i]);
    for (int k = 0; k < 16; k++) { /* byte k = (15-k) << 4 | k */
        assert_true(out[2 * k] == (float)(k - 8) * 0.125f);
        assert_true(out[2 * k + 1] == (float)(7 - k) * 0.125f);
    }
    const float t7 = bits_f(0x3ED744F9u);
    assert_true(fabsf(t7 - 0.4204481f) < 1e-7f);
    for (int i = 32; i < 64; i += 2) {
        assert_int_equal(f_bits(out[i]), 0); /* nibble 8 -> +0 */
        assert_int_equal(f_bits(out[i + 1]), 0x3ED744F9u);
    }
}

static void test_q2tp_ladder_and_rung0(void **state) {
    (void)state;
    float t4[32], t2[32];
    cq_codec_q4tp_ladder(k_lo_m3_step_q, t4);
    cq_codec_q2tp_ladder(k_lo_m3_step_q, t2);
    assert_int_equal(f_bits(t2[0]), 0); /* +0, not -0 or a subnormal */
    for (int c = 0; c < 31; c++) assert_true(t2[c + 1] == t4[c]);

    /* One row, two groups: every weight byte 0xE4 (codes 0,1,2,3); group 0 on
     * rung 0, group 1 on rung 7. */
    const uint64_t shape[2] = {1, 64};
    uint8_t p[8 * 2 + 4 + 2];
    memset(p, 0xE4, 16);
    memcpy(p + 16, k_lo_m3_step_q, 4);
    p[20] = 7 << 5;
    p[21] = 7 >> 3;
    assert_int_equal(nbytes_of(CQ_DTYPE_Q2TP, 2, shape), sizeof p);
    float out[64];
    decode(CQ_DTYPE_Q2TP, 2, shape, p, sizeof p, 0, 1, out);
    for (int i = 0; i < 32; i++) {
        assert_true(out[i] == 0.0f);
        assert_int_equal(signbit(out[i]) != 0, i % 4 < 2); /* (c - 1.5) * +0: -0 for codes 0, 1 */
    }
    const float grid[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    for (int i = 32; i < 64; i++) assert_true(out[i] == grid[i % 4] * t2[7]);

    /* Two rows decode independently: row 0 all rung 0, row 1 all rung 12. */
    const uint64_t shape2[2] = {2, 64};
    uint8_t q[8 * 4 + 8 + 4];
    memset(q, 0xE4, 32);
    memcpy(q + 32, k_lo_m3_step_q, 4);
    memcpy(q + 36, k_lo_m3_step_q, 4);
    q[40] = 0;
    q[41] = 0;
    q[42] = (uint8_t)((12 | (12 << 5)) & 0xFF);
    q[43] = 12 >> 3;
    float o2[128];
    decode(CQ_DTYPE_Q2TP, 2, shape2, q, sizeof q, 0, 2, o2);
    for (int i = 0; i < 64; i++) assert_true(o2[i] == 0.0f);
    for (int i = 0; i < 64; i++) assert_true(o2[64 + i] == grid[i % 4] * t2[12]);
    float row1[64];
    decode(CQ_DTYPE_Q2TP, 2, shape2, q, sizeof q, 1, 1, row1);
    assert_memory_equal(row1, o2 + 64, sizeof row1);
}

/* Codes straddling byte boundaries: gpr = 5 puts code 1 at bits 5..9,
 * code 3 at 15..19 and code 4 at 20..24, spilling into the next byte. */
static void test_tp_code_packing(void **state) {
    (void)state;
    const unsigned codes[5] = {31, 17, 2, 29, 9};
    uint8_t packed[4] = {0}; /* ceil(25/8) */
    for (int g = 0; g < 5; g++)
        for (int b = 0; b < 5; b++)
            if ((codes[g] >> b) & 1) packed[(g * 5 + b) / 8] |= (uint8_t)(1u << ((g * 5 + b) % 8));
    const uint64_t shape[2] = {1, 160};
    uint8_t p[16 * 5 + 4 + 4];
    memset(p, 0x9F, 80); /* nibbles 15 (low, +7) and 9 (high, +1) */
    p[80] = 0x00;
    p[81] = 0xC2; /* lo = -3 */
    p[82] = 0x00;
    p[83] = 0x34; /* step = 0.25 */
    memcpy(p + 84, packed, 4);
    float t[32], out[160];
    cq_codec_q4tp_ladder(p + 80, t);
    decode(CQ_DTYPE_Q4TP, 2, shape, p, sizeof p, 0, 1, out);
    for (int g = 0; g < 5; g++) {
        assert_true(out[32 * g] == 7.0f * t[codes[g]]);
        assert_true(out[32 * g + 1] == 1.0f * t[codes[g]]);
    }
}

/* A subnormal f16 step (the encoder's 0x0001 for a flat row) must decode
 * as 2^-24, so the ladder rises by one exp2f(2^-24) per rung. */
static void test_q4tp_subnormal_step(void **state) {
    (void)state;
    const uint8_t params[4] = {0x00, 0x3C, 0x01, 0x00}; /* lo = 1.0, step = 2^-24 */
    float t[32];
    cq_codec_q4tp_ladder(params, t);
    assert_true(t[0] == 2.0f);
    const float ratio = exp2f(0x1p-24f);
    for (int c = 1; c < 32; c++) assert_true(t[c] == t[c - 1] * ratio);
    assert_true(t[31] >= 2.0f && t[31] < 2.0f * (1.0f + 1e-5f));
    const uint8_t params2[4] = {0x00, 0x3C, 0x00, 0x02}; /* step 512 * 2^-24 = 2^-15 */
    cq_codec_q4tp_ladder(params2, t);
    assert_true(fabs((double)t[31] - 2.0 * exp2(31.0 * 0x1p-15)) < 2e-5);
    assert_true(t[31] > t[0]);
}

/* ---- q8 ---------------------------------------------------------------------- */

static void test_q8_row_full_range(void **state) {
    (void)state;
    /* 3x3: scales start at byte 9 (odd). */
    const uint64_t shape[2] = {3, 3};
    uint8_t p[9 + 6] = {0x80, 0x7f, 0x00, 0xff, 0x01, 0x80, 0x10, 0xf0, 0x7f};
    cq_wr16(p + 9, 0x3800);  /* 0.5 */
    cq_wr16(p + 11, 0x3C00); /* 1.0 */
    cq_wr16(p + 13, 0x0001); /* 2^-24, subnormal */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q8_ROW, 2, shape, p, sizeof p), CQ_OK);
    float out[9];
    decode(CQ_DTYPE_Q8_ROW, 2, shape, p, sizeof p, 0, 3, out);
    const float want[9] = {-64.0f, 63.5f, 0.0f, -1.0f, 1.0f, -128.0f, 16 * 0x1p-24f, -16 * 0x1p-24f, 127 * 0x1p-24f};
    for (int i = 0; i < 9; i++) assert_true(out[i] == want[i]);
    float r2[3];
    decode(CQ_DTYPE_Q8_ROW, 2, shape, p, sizeof p, 2, 1, r2);
    assert_memory_equal(r2, out + 6, sizeof r2);
}

static void test_q8_2f_decode(void **state) {
    (void)state;
    const uint64_t shape[2] = {2, 3};
    uint8_t p[6 + 4 + 6] = {0x80, 0x7f, 0x02, 0xfe, 0x00, 0x01};
    cq_wr16(p + 6, 0x3800);  /* row 0: 0.5 */
    cq_wr16(p + 8, 0x4000);  /* row 1: 2.0 */
    cq_wr16(p + 10, 0x3C00); /* col 0: 1.0 */
    cq_wr16(p + 12, 0x3400); /* col 1: 0.25 */
    cq_wr16(p + 14, 0xC200); /* col 2: -3.0 */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q8_2F, 2, shape, p, sizeof p), CQ_OK);
    float out[6];
    decode(CQ_DTYPE_Q8_2F, 2, shape, p, sizeof p, 0, 2, out);
    const float want[6] = {-64.0f, 127 * 0.5f * 0.25f, 2 * 0.5f * -3.0f, -2 * 2.0f, 0.0f, 1 * 2.0f * -3.0f};
    for (int i = 0; i < 6; i++) assert_true(out[i] == want[i]);
}

/* ---- flattened groups with odd row lengths ------------------------------------ */

/* Reference element e of a q4_block / q4_tiled / q1 payload, by the layout. */
static float flat_ref(cq_dtype dt, const uint8_t *p, uint64_t n, uint64_t e) {
    uint64_t G = (n + 31) / 32, g = e / 32, k = e % 32;
    if (dt == CQ_DTYPE_Q1) {
        float s = cq_f16_to_f32(cq_rd16(p + 6 * g));
        return (p[6 * g + 2 + k / 8] >> (k % 8)) & 1 ? s : -s;
    }
    uint8_t byte = dt == CQ_DTYPE_Q4_BLOCK ? p[16 * g + k / 2] : p[18 * g + 2 + k / 2];
    float s = cq_f16_to_f32(dt == CQ_DTYPE_Q4_BLOCK ? cq_rd16(p + 16 * G + 2 * g) : cq_rd16(p + 18 * g));
    int nib = k % 2 ? byte >> 4 : byte & 15;
    return (float)(nib - 8) * s;
}

static void test_flat_odd_rows(void **state) {
    (void)state;
    tu_rng rng;
    tu_rng_seed(&rng, 11);
    const cq_dtype dts[3] = {CQ_DTYPE_Q4_BLOCK, CQ_DTYPE_Q4_TILED, CQ_DTYPE_Q1};
    const uint64_t shapes[4][3] = {{3, 45, 0}, {5, 7, 0}, {2, 3, 37}, {1, 100, 0}};
    const int ndims[4] = {2, 2, 3, 2};
    for (int d = 0; d < 3; d++) {
        for (int si = 0; si < 4; si++) {
            uint64_t nb = nbytes_of(dts[d], ndims[si], shapes[si]);
            uint64_t rows, cols;
            cq_codec_rows(ndims[si], shapes[si], &rows, &cols);
            uint64_t n = rows * cols, G = (n + 31) / 32;
            uint8_t *p = malloc(nb);
            for (uint64_t i = 0; i < nb; i++) p[i] = (uint8_t)tu_rng_u64(&rng);
            /* finite, varied scales including a subnormal one */
            for (uint64_t g = 0; g < G; g++) {
                uint16_t s = (uint16_t)(0x2000 + tu_rng_u64(&rng) % 0x3000);
                if (g == 1) s = 0x8005;
                if (dts[d] == CQ_DTYPE_Q4_BLOCK) cq_wr16(p + 16 * G + 2 * g, s);
                else cq_wr16(p + (dts[d] == CQ_DTYPE_Q1 ? 6 : 18) * g, s);
            }
            assert_int_equal(cq_codec_validate(dts[d], ndims[si], shapes[si], p, nb), CQ_OK);
            float *all = malloc(n * sizeof(float)), *one = malloc(cols * sizeof(float) + 4);
            decode(dts[d], ndims[si], shapes[si], p, nb, 0, rows, all);
            for (uint64_t e = 0; e < n; e++) assert_true(all[e] == flat_ref(dts[d], p, n, e));
            for (uint64_t r = 0; r < rows; r++) {
                one[cols] = 12345.0f; /* guard: nothing written past the row */
                decode(dts[d], ndims[si], shapes[si], p, nb, r, 1, one);
                assert_memory_equal(one, all + r * cols, cols * sizeof(float));
                assert_true(one[cols] == 12345.0f);
            }
            free(p);
            free(all);
            free(one);
        }
    }
}

static void test_dense_decode(void **state) {
    (void)state;
    const uint64_t shape[2] = {2, 3};
    uint8_t f32[24], f16[12], bf16[12], u8[6] = {0, 1, 127, 128, 254, 255};
    const float vals[6] = {1.5f, -0.0f, 3e-40f, INFINITY, -65504.0f, 0x1p-24f};
    for (int i = 0; i < 6; i++) {
        cq_wr32(f32 + 4 * i, f_bits(vals[i]));
        cq_wr16(f16 + 2 * i, cq_f32_to_f16(vals[i]));
        cq_wr16(bf16 + 2 * i, (uint16_t)(f_bits(vals[i]) >> 16));
    }
    float out[6];
    decode(CQ_DTYPE_F32, 2, shape, f32, sizeof f32, 0, 2, out);
    assert_memory_equal(out, vals, sizeof out); /* bit-exact, -0 and denormal included */
    decode(CQ_DTYPE_F16, 2, shape, f16, sizeof f16, 1, 1, out);
    assert_true(isinf(out[0]) && out[1] == -65504.0f && out[2] == 0x1p-24f);
    decode(CQ_DTYPE_BF16, 2, shape, bf16, sizeof bf16, 0, 1, out);
    assert_true(out[0] == 1.5f && signbit(out[1]) && out[2] == bits_f(f_bits(3e-40f) & 0xFFFF0000u));
    decode(CQ_DTYPE_U8, 2, shape, u8, sizeof u8, 0, 2, out);
    for (int i = 0; i < 6; i++) assert_true(out[i] == (float)u8[i]);
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_U8, 2, shape, u8, 5, 0, 2, out), CQ_ERR_BOUNDS);
}

/* ---- vbit / vbit_ro ------------------------------------------------------------ */

/* MSB-first bit writer. */
typedef struct {
    uint8_t *p;
    uint64_t bit;
} bitw;
static void put_bits(bitw *w, unsigned v, unsigned b) {
    for (int i = (int)b - 1; i >= 0; i--, w->bit++)
        if ((v >> i) & 1) w->p[w->bit / 8] |= (uint8_t)(0x80u >> (w->bit % 8));
}

/* rows 3, cols 64, widths {3, 8, 5}: build vbit and vbit_ro payloads from
 * known codes. */
#define VB_ROWS 3
#define VB_COLS 64
static const uint8_t k_widths[VB_ROWS] = {3, 8, 5};
static unsigned vb_code(int r, int i) { return (unsigned)(i * 7 + r * 3) & ((1u << k_widths[r]) - 1); }
static uint16_t vb_scale(int r, int g) { return (uint16_t)(0x3C00 + 0x100 * r + 0x40 * g); }

static size_t build_vbit(uint8_t *buf, bool ro) {
    size_t off = 0;
    memset(buf, 0, 1024);
    for (int r = 0; r < VB_ROWS; r++) buf[off++] = k_widths[r];
    for (int r = 0; r < VB_ROWS; r++)
        for (int g = 0; g < VB_COLS / 32; g++, off += 2) cq_wr16(buf + off, vb_scale(r, g));
    size_t table = off;
    if (ro) off += 4 * (VB_ROWS + 1);
    size_t packed = off, rel = 0;
    for (int r = 0; r < VB_ROWS; r++) {
        if (ro) cq_wr32(buf + table + 4 * r, (uint32_t)rel);
        bitw w = {buf + off, 0};
        for (int i = 0; i < VB_COLS; i++) put_bits(&w, vb_code(r, i), k_widths[r]);
        size_t len = (VB_COLS * k_widths[r] + 7) / 8;
        off += len;
        rel += len;
    }
    if (ro) cq_wr32(buf + table + 4 * VB_ROWS, (uint32_t)rel);
    (void)packed;
    return off;
}

static void check_vbit_values(const float *out, int row0, int nrows) {
    for (int r = row0; r < row0 + nrows; r++) {
        float L = (float)((1 << (k_widths[r] - 1)) - 1);
        for (int i = 0; i < VB_COLS; i++) {
            float want = ((float)vb_code(r, i) - L) * cq_f16_to_f32(vb_scale(r, i / 32));
            assert_true(out[(r - row0) * VB_COLS + i] == want);
        }
    }
}

static void test_vbit(void **state) {
    (void)state;
    const uint64_t shape[2] = {VB_ROWS, VB_COLS};
    uint8_t buf[1024];
    float out[VB_ROWS * VB_COLS];
    for (int ro = 0; ro < 2; ro++) {
        cq_dtype dt = ro ? CQ_DTYPE_VBIT_RO : CQ_DTYPE_VBIT;
        size_t len = build_vbit(buf, ro);
        assert_int_equal(len, 3 + 12 + (ro ? 16 : 0) + 24 + 64 + 40);
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, len), CQ_OK);
        decode(dt, 2, shape, buf, len, 0, VB_ROWS, out);
        check_vbit_values(out, 0, VB_ROWS);
        decode(dt, 2, shape, buf, len, 2, 1, out); /* vbit: needs the prefix scan */
        check_vbit_values(out, 2, 1);
        /* the reference contract: truncated, one byte short/long, width 7 or 2, bad shapes */
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, 2), CQ_ERR_BOUNDS);
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, len - 1), CQ_ERR_BOUNDS);
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, len + 1), CQ_ERR_BOUNDS);
        buf[0] = 7;
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, len), CQ_ERR_BOUNDS);
        assert_non_null(strstr(cq_last_error(), "width 7"));
        buf[0] = 2;
        assert_int_equal(cq_codec_validate(dt, 2, shape, buf, len), CQ_ERR_BOUNDS);
        assert_int_equal(cq_codec_dequant_rows(dt, 2, shape, buf, len, 0, 1, out), CQ_ERR_BOUNDS);
        buf[0] = 3;
        const uint64_t flat[1] = {VB_ROWS * VB_COLS}, c33[2] = {VB_ROWS, 33};
        assert_int_equal(cq_codec_validate(dt, 1, flat, buf, len), CQ_ERR_SHAPE);
        assert_int_equal(cq_codec_validate(dt, 2, c33, buf, len), CQ_ERR_SHAPE);
    }
    /* vbit_ro offset table rules */
    size_t len = build_vbit(buf, true);
    const size_t table = 3 + 12;
    cq_wr32(buf + table, 1); /* offset[0] must be 0 */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT_RO, 2, shape, buf, len), CQ_ERR_BOUNDS);
    cq_wr32(buf + table, 0);
    cq_wr32(buf + table + 4, 25); /* row 0 spans 24 bytes */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT_RO, 2, shape, buf, len), CQ_ERR_BOUNDS);
    cq_wr32(buf + table + 4, 24);
    cq_wr32(buf + table + 12, 200); /* end past the payload */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT_RO, 2, shape, buf, len), CQ_ERR_BOUNDS);
    cq_wr32(buf + table + 12, 0xFFFFFFF0u); /* decreasing */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_VBIT_RO, 2, shape, buf, len), CQ_ERR_BOUNDS);
    /* An unvalidated table pointing past the end fails cleanly in decode. */
    cq_wr32(buf + table + 8, 0x7FFFFFFFu);
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_VBIT_RO, 2, shape, buf, len, 2, 1, out), CQ_ERR_BOUNDS);
}

/* ---- q1, q1s, q1t ------------------------------------------------------------- */

static void test_q1s(void **state) {
    (void)state;
    const uint64_t shape[2] = {2, 32};
    uint8_t p[12 + 4 + 3 * 6];
    cq_wr16(p, 0x3800); /* row 0: 0.5 */
    p[2] = 0x01;
    p[3] = 0x80;
    p[4] = 0xFF;
    p[5] = 0x00;
    cq_wr16(p + 6, 0x4000); /* row 1: 2.0 */
    memset(p + 8, 0xAA, 4);
    cq_wr32(p + 12, 3);
    cq_wr32(p + 16, 5);
    cq_wr16(p + 20, 0x4200); /* [5] = 3.0 */
    cq_wr32(p + 22, 40);
    cq_wr16(p + 26, 0xB800); /* [40] = -0.5 */
    cq_wr32(p + 28, 5);
    cq_wr16(p + 32, 0x4400); /* [5] again: 4.0, the later entry wins */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, shape, p, sizeof p), CQ_OK);
    float out[64];
    decode(CQ_DTYPE_Q1S, 2, shape, p, sizeof p, 0, 2, out);
    for (int i = 0; i < 32; i++) {
        float base = (p[2 + i / 8] >> (i % 8)) & 1 ? 0.5f : -0.5f;
        assert_true(out[i] == (i == 5 ? 4.0f : base));
    }
    for (int i = 0; i < 32; i++) assert_true(out[32 + i] == (i == 8 ? -0.5f : (i % 2 ? 2.0f : -2.0f)));
    float r1[32];
    decode(CQ_DTYPE_Q1S, 2, shape, p, sizeof p, 1, 1, r1);
    assert_memory_equal(r1, out + 32, sizeof r1);
    /* bad payloads */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, shape, p, sizeof p - 1), CQ_ERR_BOUNDS);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, shape, p, 14), CQ_ERR_BOUNDS);
    cq_wr32(p + 12, 1000000); /* count beyond the payload */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    decode(CQ_DTYPE_Q1S, 2, shape, p, sizeof p, 0, 2, out); /* decode stays in bounds */
    cq_wr32(p + 12, 3);
    cq_wr32(p + 22, 64); /* index outside the tensor */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1S, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "index 64"));
}

static void test_q1t(void **state) {
    (void)state;
    /* 2 rows x 32: digits d(k) = k % 3 in row 0, (2k+1) % 3 in row 1. */
    const uint64_t shape[2] = {2, 32};
    uint8_t p[18 + 12 + 2 * 4];
    memset(p, 0, sizeof p);
    cq_wr16(p, 0x3C00);     /* 1.0 */
    cq_wr16(p + 9, 0x4100); /* 2.5 */
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 32; k++) {
            unsigned d = r ? (unsigned)(2 * k + 1) % 3 : (unsigned)k % 3, pw = 1;
            for (int j = 0; j < k % 5; j++) pw *= 3;
            p[9 * r + 2 + k / 5] = (uint8_t)(p[9 * r + 2 + k / 5] + d * pw);
        }
    cq_wr32(p + 18, 0);
    cq_wr32(p + 22, 0);
    cq_wr32(p + 26, 2); /* both overlay entries in row 1 */
    cq_wr16(p + 30, 3);
    cq_wr16(p + 32, 0xC500); /* col 3 = -5.0 */
    cq_wr16(p + 34, 31);
    cq_wr16(p + 36, 0x0001); /* col 31 = 2^-24 */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p), CQ_OK);
    float out[64];
    decode(CQ_DTYPE_Q1T, 2, shape, p, sizeof p, 0, 2, out);
    const float lut[2][3] = {{0.0f, 1.0f, -1.0f}, {0.0f, 2.5f, -2.5f}};
    for (int k = 0; k < 32; k++) assert_true(out[k] == lut[0][k % 3]);
    for (int k = 0; k < 32; k++) {
        float want = k == 3 ? -5.0f : k == 31 ? 0x1p-24f : lut[1][(2 * k + 1) % 3];
        assert_true(out[32 + k] == want);
    }
    float r1[32];
    decode(CQ_DTYPE_Q1T, 2, shape, p, sizeof p, 1, 1, r1);
    assert_memory_equal(r1, out + 32, sizeof r1);
    /* bad payloads */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p + 4), CQ_ERR_BOUNDS);
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, 20), CQ_ERR_BOUNDS);
    cq_wr16(p + 34, 32); /* column outside the row */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    cq_wr16(p + 34, 31);
    cq_wr32(p + 22, 3); /* row_ptr decreases 3 -> 2 */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    /* unvalidated, row 0 now claims 3 entries, one past the payload: an error, no overread */
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_Q1T, 2, shape, p, sizeof p, 0, 2, out), CQ_ERR_BOUNDS);
    cq_wr32(p + 22, 0);
    cq_wr32(p + 18, 1); /* row_ptr[0] != 0 */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    cq_wr32(p + 18, 0);
    cq_wr32(p + 26, 1000); /* entries past the payload: decode stops with an error */
    assert_int_equal(cq_codec_validate(CQ_DTYPE_Q1T, 2, shape, p, sizeof p), CQ_ERR_BOUNDS);
    assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_Q1T, 2, shape, p, sizeof p, 1, 1, out), CQ_ERR_BOUNDS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_subnormal_vectors), cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_f16_rounding),          cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_names),                 cmocka_unit_test(test_size_rules),
        cmocka_unit_test(test_bad_shapes),            cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_q4tp_ladder),           cmocka_unit_test(test_q4tp_38_byte_example),
        cmocka_unit_test(test_q2tp_ladder_and_rung0), cmocka_unit_test(test_tp_code_packing),
        cmocka_unit_test(test_q4tp_subnormal_step),   cmocka_unit_test(test_q8_row_full_range),
        cmocka_unit_test(test_q8_2f_decode),          cmocka_unit_test(test_flat_odd_rows),
        cmocka_unit_test(test_dense_decode),          cmocka_unit_test(test_vbit),
        cmocka_unit_test(test_q1s),                   cmocka_unit_test(test_q1t),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
