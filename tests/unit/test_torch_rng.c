/* test_torch_rng.c — torch's CPU generator and randn paths: the Mersenne
 * Twister against its published reference outputs, the 16-bit conversions
 * exhaustively, the Box-Muller block/tail and scalar-cache structure, the
 * Cephes kernels against libm, and bit-exact agreement with torch.randn from
 * tests/golden/noise (made by tools/golden_schedule_noise.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "pipelines/torch_rng.h"
#include "testutil.h"

#define NOISE_DIR CQ_SOURCE_DIR "/tests/golden/noise"

static void test_mt19937_reference(void **state) {
    (void)state;
    /* mt19937 with the default seed 5489: first output 3499211612 and the
     * 10000th 4123659995 (the values the C++ standard requires of std::mt19937) */
    cq_torch_gen g;
    cq_torch_gen_seed(&g, 5489);
    assert_int_equal(cq_torch_gen_random(&g), 3499211612u);
    for (int i = 2; i < 10000; i++) cq_torch_gen_random(&g);
    assert_int_equal(cq_torch_gen_random(&g), 4123659995u);
    /* only the low 32 bits of the seed draw */
    cq_torch_gen a, b;
    cq_torch_gen_seed(&a, 5489);
    cq_torch_gen_seed(&b, (UINT64_C(7) << 32) | 5489);
    for (int i = 0; i < 2000; i++) assert_int_equal(cq_torch_gen_random(&a), cq_torch_gen_random(&b));
    assert_true(b.seed == ((UINT64_C(7) << 32) | 5489));
    /* random64 is (first << 32) | second */
    cq_torch_gen_seed(&a, 123);
    cq_torch_gen_seed(&b, 123);
    for (int i = 0; i < 700; i++) {
        const uint64_t hi = cq_torch_gen_random(&a), lo = cq_torch_gen_random(&a);
        assert_true(cq_torch_gen_random64(&b) == ((hi << 32) | lo));
    }
}

static float bits_f(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* Independent nearest-even check: r must be the closest representable value,
 * ties to the even pattern, for the 16-bit type described by widen. */
static void check_nearest(float x, uint16_t r, float (*widen)(uint16_t), bool allow_inf) {
    const float w = widen(r);
    if (isinf(w)) {
        assert_true(allow_inf);
        return;
    }
    const double d = fabs((double)x - (double)w);
    for (int k = -1; k <= 1; k += 2) {
        const uint16_t nb = (uint16_t)(r + k);
        const float wn = widen(nb);
        if (isnan(wn) || isinf(wn) || ((nb ^ r) & 0x8000)) continue; /* crossed sign or range */
        const double dn = fabs((double)x - (double)wn);
        assert_true(d <= dn);
        if (d == dn) assert_int_equal(r & 1, 0);
    }
}

static void test_half_conversions(void **state) {
    (void)state;
    /* every 16-bit pattern survives widen + round */
    for (uint32_t h = 0; h < 65536; h++) {
        const float b = cq_torch_bf16_to_f32((uint16_t)h);
        const float f = cq_torch_f16_to_f32((uint16_t)h);
        if (!isnan(b)) assert_int_equal(cq_torch_f32_to_bf16(b), h);
        if (!isnan(f)) assert_int_equal(cq_torch_f32_to_f16(f), h);
    }
    assert_int_equal(cq_torch_f32_to_bf16(NAN), 0x7fc0);
    assert_int_equal(cq_torch_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    assert_int_equal(cq_torch_f32_to_f16(65520.0f), 0x7c00);     /* rounds up to inf */
    assert_int_equal(cq_torch_f32_to_f16(65519.0f), 0x7bff);     /* max half */
    assert_int_equal(cq_torch_f32_to_f16(5.9604645e-08f), 0x0001); /* 2^-24 */
    assert_int_equal(cq_torch_f32_to_f16(2.9802322e-08f), 0x0000); /* 2^-25 ties to even 0 */
    tu_rng r;
    tu_rng_seed(&r, 7);
    for (int i = 0; i < 400000; i++) {
        const float x = bits_f((uint32_t)tu_rng_u64(&r));
        if (isnan(x) || isinf(x)) continue;
        check_nearest(x, cq_torch_f32_to_bf16(x), cq_torch_bf16_to_f32, true);
        /* halves: magnitudes 2^-30 .. 2^15 (subnormal to finite max) */
        const uint32_t u = (uint32_t)tu_rng_u64(&r);
        const float y = bits_f((u & 0x807fffffu) | ((97u + (u >> 8) % 46u) << 23));
        if (fabsf(y) < 65504.0f) check_nearest(y, cq_torch_f32_to_f16(y), cq_torch_f16_to_f32, false);
    }
}

static int ulp_diff(float a, float b) {
    int32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return abs(x - y);
}

static void test_cephes_against_libm(void **state) {
    (void)state;
    /* The Cephes polynomials are torch's, not libm's: close, not equal. */
    int max_log = 0;
    for (uint32_t k = 0; k < (1u << 24); k += 97) {
        const float u1 = 1.0f - (float)k * (1.0f / 16777216.0f);
        const int d = ulp_diff(cq_torch_cephes_logf(u1), logf(u1));
        if (d > max_log) max_log = d;
    }
    assert_in_range(max_log, 0, 4);
    float max_abs = 0.0f;
    for (uint32_t k = 0; k < (1u << 24); k += 101) {
        const float th = 6.2831855f * ((float)k * (1.0f / 16777216.0f));
        float s, c;
        cq_torch_cephes_sincosf(th, &s, &c);
        max_abs = fmaxf(max_abs, fmaxf(fabsf(s - sinf(th)), fabsf(c - cosf(th))));
    }
    assert_true(max_abs < 2e-7f);
    assert_true(isnan(cq_torch_cephes_logf(0.0f)) && isnan(cq_torch_cephes_logf(-1.0f)));
    assert_true(cq_torch_cephes_logf(1.0f) == 0.0f);
}

static float uniform24(cq_torch_gen *g) {
    return (float)(cq_torch_gen_random(g) & 0xffffff) / 16777216.0f;
}

static void test_block_and_tail(void **state) {
    (void)state;
    /* n = 37: 37 uniforms, blocks at 0 and 16, then 16 fresh uniforms into
     * x[21..36] transformed once more */
    for (int k = 0; k < CQ_TORCH_F32_KERNEL_COUNT; k++) {
        void (*block)(float *) = k == CQ_TORCH_F32_CEPHES ? cq_torch_normal16_cephes : cq_torch_normal16_libm;
        cq_torch_gen g;
        cq_torch_gen_seed(&g, 31337);
        float want[37];
        for (int i = 0; i < 37; i++) want[i] = uniform24(&g);
        block(want);
        block(want + 16);
        for (int i = 0; i < 16; i++) want[21 + i] = uniform24(&g);
        block(want + 21);
        const uint32_t next_want = cq_torch_gen_random(&g);

        float got[37];
        cq_torch_gen_seed(&g, 31337);
        assert_int_equal(cq_torch_randn_f32(&g, (cq_torch_f32_kernel)k, got, 37), CQ_OK);
        assert_memory_equal(got, want, sizeof got);
        assert_int_equal(cq_torch_gen_random(&g), next_want);
    }
}

static void test_scalar_sampler_cache(void **state) {
    (void)state;
    cq_torch_gen a, b;
    cq_torch_gen_seed(&a, 5);
    cq_torch_gen_seed(&b, 5);
    float two[2], one1, one2, big[16];
    assert_int_equal(cq_torch_randn_f32(&a, CQ_TORCH_F32_CEPHES, two, 2), CQ_OK);
    /* the second value of a pair waits in the generator, across a large call */
    assert_int_equal(cq_torch_randn_f32(&b, CQ_TORCH_F32_CEPHES, &one1, 1), CQ_OK);
    assert_true(b.has_next_normal);
    assert_int_equal(cq_torch_randn_f32(&b, CQ_TORCH_F32_CEPHES, big, 16), CQ_OK);
    assert_int_equal(cq_torch_randn_f32(&b, CQ_TORCH_F32_CEPHES, &one2, 1), CQ_OK);
    assert_true(one1 == two[0] && one2 == two[1]);
    assert_false(b.has_next_normal);
    /* by hand: u1 = first random64 -> angle, u2 = second -> radius */
    cq_torch_gen_seed(&a, 5);
    const double u1 = (double)(cq_torch_gen_random64(&a) & ((UINT64_C(1) << 53) - 1)) / 9007199254740992.0;
    const double u2 = (double)(cq_torch_gen_random64(&a) & ((UINT64_C(1) << 53) - 1)) / 9007199254740992.0;
    const double r = sqrt(-2.0 * log1p(-u2));
    assert_true(two[0] == (float)(r * cos(2.0 * M_PI * u1)));
    assert_true(two[1] == (float)(r * sin(2.0 * M_PI * u1)));
    /* manual_seed clears the cache */
    cq_torch_gen_seed(&b, 5);
    assert_false(b.has_next_normal);
}

static void test_statistics(void **state) {
    (void)state;
    const size_t n = 1u << 20;
    float *x = malloc(n * sizeof *x);
    uint16_t *h = malloc(n * sizeof *h);
    assert_non_null(x);
    assert_non_null(h);
    for (int dt = 0; dt < 3; dt++) {
        cq_torch_gen g;
        cq_torch_gen_seed(&g, 2024);
        if (dt == 0) assert_int_equal(cq_torch_randn_f32(&g, CQ_TORCH_F32_CEPHES, x, n), CQ_OK);
        if (dt == 1) assert_int_equal(cq_torch_randn_f32(&g, CQ_TORCH_F32_LIBM, x, n), CQ_OK);
        if (dt == 2) {
            assert_int_equal(cq_torch_randn_bf16(&g, h, n), CQ_OK);
            for (size_t i = 0; i < n; i++) x[i] = cq_torch_bf16_to_f32(h[i]);
        }
        double s = 0, s2 = 0, s4 = 0;
        for (size_t i = 0; i < n; i++) {
            assert_true(isfinite(x[i]));
            s += x[i];
            s2 += (double)x[i] * x[i];
            s4 += (double)x[i] * x[i] * x[i] * x[i];
        }
        const double mean = s / n, var = s2 / n - mean * mean, kurt = s4 / n / (var * var);
        print_message("dtype %d: mean %.5f var %.5f kurtosis %.4f\n", dt, mean, var, kurt);
        /* bfloat16 uniforms are k/256, so -2 log(u1) averages to
         * (2/256) sum_k -log(1 - k/256) instead of 2: torch's bf16 noise has
         * a variance near 0.986 and lighter tails */
        double want_var = 1.0;
        if (dt == 2) {
            want_var = 0.0;
            for (int k = 0; k < 256; k++) want_var -= log(1.0 - k / 256.0) / 256.0;
        }
        assert_true(fabs(mean) < 0.005);
        assert_true(fabs(var - want_var) < 0.006);
        assert_true(fabs(kurt - 3.0) < (dt == 2 ? 0.12 : 0.05));
    }
    free(x);
    free(h);
}

static void test_errors(void **state) {
    (void)state;
    cq_torch_gen g;
    cq_torch_gen_seed(&g, 1);
    float x[4];
    assert_int_equal(cq_torch_randn(NULL, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, x, 4), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_torch_randn(&g, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, NULL, 4), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_torch_randn(&g, (cq_torch_dtype)9, CQ_TORCH_F32_CEPHES, x, 4), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_torch_randn(&g, CQ_TORCH_F32, (cq_torch_f32_kernel)5, x, 4), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_torch_randn(&g, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, NULL, 0), CQ_OK);
    double d[2];
    assert_int_equal(cq_torch_randn(&g, CQ_TORCH_F64, CQ_TORCH_F32_CEPHES, (char *)d + 4, 1), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "aligned"));
    cq_torch_gen bad;
    memset(&bad, 0, sizeof bad);
    assert_int_equal(cq_torch_randn(&bad, CQ_TORCH_F32, CQ_TORCH_F32_CEPHES, x, 4), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "not seeded"));
    assert_int_equal(cq_torch_dtype_size(CQ_TORCH_BF16), 2);
    assert_int_equal(cq_torch_dtype_size((cq_torch_dtype)99), 0);
}

/* ---- goldens ------------------------------------------------------------ */

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int dtype_from_name(const char *s) {
    for (int d = 0; d < CQ_TORCH_DTYPE_COUNT; d++)
        if (strcmp(s, cq_torch_dtype_name((cq_torch_dtype)d)) == 0) return d;
    return -1;
}

static bool file_exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static void test_golden_noise(void **state) {
    (void)state;
    if (!file_exists(NOISE_DIR)) {
        print_message("golden noise absent (%s): run tools/golden_schedule_noise.py; skipped\n", NOISE_DIR);
        skip();
    }
    size_t len = 0;
    char *text = (char *)tu_read_file(NOISE_DIR "/index.json", &len);
    assert_non_null(text); /* the folder exists, so its index must */
    cJSON *root = cJSON_ParseWithLength(text, len);
    assert_non_null(root);
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    assert_true(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0);
    size_t nblob_native = 0, nblob_default = 0;
    uint8_t *blob_native = tu_read_file(NOISE_DIR "/native.bin", &nblob_native);
    uint8_t *blob_default = tu_read_file(NOISE_DIR "/default.bin", &nblob_default);
    assert_non_null(blob_native);

    int checked = 0, skipped = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *cap = cJSON_GetObjectItem(c, "capability")->valuestring;
        cq_torch_f32_kernel kernel;
        if (strstr(cap, "AVX2") || strstr(cap, "AVX512")) {
            kernel = CQ_TORCH_F32_CEPHES;
        } else if (strcmp(cap, "DEFAULT") == 0) {
            kernel = CQ_TORCH_F32_LIBM;
#ifndef __GLIBC__
            /* this kernel calls the C library's logf/cosf/sinf: bit-exact only
             * against the golden machine's glibc */
            skipped++;
            continue;
#endif
        } else {
            skipped++;
            continue;
        }
        const char *file = cJSON_GetObjectItem(c, "file")->valuestring;
        const uint8_t *blob = strcmp(file, "native.bin") == 0 ? blob_native : blob_default;
        const size_t nblob = blob == blob_native ? nblob_native : nblob_default;
        assert_non_null(blob);
        const size_t total = (size_t)cJSON_GetObjectItem(c, "bytes")->valuedouble;
        const size_t off = (size_t)cJSON_GetObjectItem(c, "offset")->valuedouble;
        const size_t stored = (size_t)cJSON_GetObjectItem(c, "stored_bytes")->valuedouble;
        assert_true(off + stored <= nblob);
        const uint64_t seed = strtoull(cJSON_GetObjectItem(c, "seed")->valuestring, NULL, 10);

        uint8_t *mine = malloc(total);
        assert_non_null(mine);
        cq_torch_gen g;
        cq_torch_gen_seed(&g, seed);
        size_t pos = 0;
        const cJSON *call;
        cJSON_ArrayForEach(call, cJSON_GetObjectItem(c, "calls")) {
            const int dt = dtype_from_name(cJSON_GetObjectItem(call, "dtype")->valuestring);
            assert_true(dt >= 0);
            size_t n = 1;
            const cJSON *d;
            cJSON_ArrayForEach(d, cJSON_GetObjectItem(call, "shape")) n *= (size_t)d->valuedouble;
            const size_t bytes = n * cq_torch_dtype_size((cq_torch_dtype)dt);
            assert_true(pos + bytes <= total);
            /* each call into an aligned buffer, then appended like torch's bytes */
            double *tmp = malloc(bytes);
            assert_non_null(tmp);
            assert_int_equal(cq_torch_randn(&g, (cq_torch_dtype)dt, kernel, tmp, n), CQ_OK);
            memcpy(mine + pos, tmp, bytes);
            free(tmp);
            pos += bytes;
        }
        assert_int_equal(pos, total);

        char hash[17];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64(mine, total));
        const cJSON *ht = cJSON_GetObjectItem(c, "head_tail_elems");
        const uint8_t *want = blob + off;
        if (ht) {
            const size_t k = stored / 2;
            if (memcmp(mine, want, k) != 0 || memcmp(mine + total - k, want + k, k) != 0)
                fail_msg("golden noise '%s' (%s): head or tail differs", name, cap);
        } else if (memcmp(mine, want, total) != 0) {
            size_t i = 0;
            while (mine[i] == want[i]) i++;
            fail_msg("golden noise '%s' (%s): first difference at byte %zu of %zu", name, cap, i, total);
        }
        if (strcmp(hash, cJSON_GetObjectItem(c, "fnv1a64")->valuestring) != 0)
            fail_msg("golden noise '%s' (%s): hash %s, want %s", name, cap, hash,
                     cJSON_GetObjectItem(c, "fnv1a64")->valuestring);
        free(mine);
        checked++;
    }
    print_message("golden noise: %d cases bit-exact, %d skipped (torch %s, %s)\n", checked, skipped,
                  cJSON_GetObjectItem(cJSON_GetObjectItem(root, "generator"), "torch")->valuestring,
                  cJSON_GetObjectItem(cJSON_GetObjectItem(root, "generator"), "cpu_capability")->valuestring);
    assert_true(checked > 0);
    cJSON_Delete(root);
    free(text);
    free(blob_native);
    free(blob_default);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937_reference),   cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_cephes_against_libm), cmocka_unit_test(test_block_and_tail),
        cmocka_unit_test(test_scalar_sampler_cache), cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_errors),              cmocka_unit_test(test_golden_noise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
