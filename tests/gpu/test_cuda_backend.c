/*
 * test_cuda_backend.c — what the generic op test (test_ops, run on CUDA as
 * test_ops_gpu) does not cover about the CUDA backend (label gpu):
 *  - the device weight decoders equal the codec layer's bit for bit in f32,
 *    for every codec the backend binds (q4tp with random ladders too), and a
 *    bound weight reads back (copy, get_rows) within its plane's f16 rounding;
 *  - weight uploads through the pinned staging ring read back bit for bit,
 *    however the payloads fall into its buffers (test_upload_ring);
 *  - the f16 range guard: activations far outside f16's range (1e6, 1e-8)
 *    and weights of any magnitude give the reference's result;
 *  - deferred errors: a bad index or a non-finite output is reported by the
 *    next sync / download with the op's name, and only once;
 *  - GEMM algorithm timing: once per new shape, the first call's output is
 *    the chosen algorithm's bit for bit, CORTIQ_CUDA_GEMM_TUNE=0 turns it off;
 *  - a staged matmul input is reused only while nothing can have written it;
 *  - a steady loop of the denoiser's ops makes no device allocation;
 *  - the debugging fallbacks (CORTIQ_CUDA_GEMM=simt, CORTIQ_CUDA_ATTN=generic)
 *    agree with the fast paths;
 *  - every head_dim-128 and head_dim-80 attention kernel choice
 *    (CORTIQ_CUDA_ATTN=flash128, flash64, flash128w4, wgmma, wmma) against the
 *    reference, and the flash block shapes against each other (test_ops_gpu
 *    covers only the default).
 * Exits 77 (skipped) when the backend is not built or no GPU is present.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda.h"
#include "cli/env.h"
#include "codec/codec.h"
#include "ops/ops.h"
#include "testutil.h"

/* The options the CORTIQ_CUDA_* variables give (the CLI's mapping), so the suite runs under them as the
 * command does; each test then sets what it is about. */
static cq_cuda_opts env_opts(void) {
    cq_backend_opts o;
    if (cq_env_backend_opts("cuda", &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o.cuda;
}

static cq_backend *g_be, *g_ref;
static tu_rng g_rng;

/* ---- helpers ------------------------------------------------------------------------ */
static cq_tensor_view view_of(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *p, uint64_t nbytes) {
    return tu_view(dt, ndim, shape, p, nbytes);
}

/* Encode random values (rows of different magnitudes) with the codec's encoder. */
static uint8_t *encode_random(cq_dtype dt, int ndim, const uint64_t *shape, uint64_t *nbytes, float scale) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    assert_int_equal(cq_codec_nbytes(dt, ndim, shape, nbytes), CQ_OK);
    float *v = malloc(sizeof(float) * n);
    tu_fill_normal(&g_rng, v, n, scale);
    for (uint64_t i = 0; i < n; i++) v[i] *= 0.25f + (float)((i / shape[ndim - 1]) % 7) * 0.5f;
    uint8_t *p = malloc(*nbytes);
    assert_int_equal(cq_codec_quantize(dt, ndim, shape, v, p, *nbytes), CQ_OK);
    free(v);
    return p;
}

/* Device f32 decode vs cq_codec_dequant_rows, bit for bit. */
static void expect_decode_exact(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *p, uint64_t nbytes) {
    cq_tensor_view v = view_of(dt, ndim, shape, p, nbytes);
    uint64_t rows, cols;
    cq_codec_rows(ndim, shape, &rows, &cols);
    float *want = malloc(sizeof(float) * v.nelem), *got = malloc(sizeof(float) * v.nelem);
    assert_int_equal(cq_codec_dequant_rows(dt, ndim, shape, p, nbytes, 0, rows, want), CQ_OK);
    cq_status s = cq_cuda_decode_f32(g_be, &v, got, (size_t)v.nelem);
    if (s != CQ_OK) fail_msg("decode %s: %s", cq_dtype_name(dt), cq_last_error());
    for (uint64_t i = 0; i < v.nelem; i++)
        if (memcmp(&want[i], &got[i], 4))
            fail_msg("decode %s element %llu: device %.9g (0x%08x), codec %.9g (0x%08x)", cq_dtype_name(dt),
                     (unsigned long long)i, got[i], *(uint32_t *)&got[i], want[i], *(uint32_t *)&want[i]);
    free(want);
    free(got);
}

static void test_decode_bitexact(void **state) {
    (void)state;
    static const struct {
        cq_dtype dt;
        int ndim;
        uint64_t shape[3];
    } k[] = {
        {CQ_DTYPE_F32, 2, {7, 33}},      {CQ_DTYPE_F16, 3, {3, 4, 5}},      {CQ_DTYPE_BF16, 2, {1, 40}},
        {CQ_DTYPE_Q8_ROW, 2, {9, 70}},   {CQ_DTYPE_Q8_2F, 2, {9, 70}},      {CQ_DTYPE_Q4_BLOCK, 2, {5, 37}},
        {CQ_DTYPE_Q4_TILED, 2, {5, 37}}, {CQ_DTYPE_Q4_TILED, 3, {2, 3, 32}}, {CQ_DTYPE_Q4TP, 2, {6, 96}},
        {CQ_DTYPE_Q4TP, 2, {33, 1024}},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
        uint64_t nb;
        uint8_t *p = encode_random(k[i].dt, k[i].ndim, k[i].shape, &nb, 0.7f);
        expect_decode_exact(k[i].dt, k[i].ndim, k[i].shape, p, nb);
        free(p);
    }
    /* q4tp with random ladders: lo, step and every rung code, so the chained
     * multiplies run up to 31 deep */
    for (int trial = 0; trial < 4; trial++) {
        uint64_t rows = 5 + (uint64_t)trial, cols = 64 * (uint64_t)(trial + 1), shape[2] = {rows, cols}, nb;
        assert_int_equal(cq_codec_nbytes(CQ_DTYPE_Q4TP, 2, shape, &nb), CQ_OK);
        uint8_t *p = malloc(nb);
        for (uint64_t j = 0; j < nb; j++) p[j] = (uint8_t)tu_rng_u64(&g_rng);
        uint64_t gpr = cols / 32, a_len = 16 * rows * gpr;
        for (uint64_t r = 0; r < rows; r++) {
            cq_wr16(p + a_len + 4 * r, cq_f32_to_f16(-12.0f + 10.0f * tu_rng_uniform(&g_rng)));
            cq_wr16(p + a_len + 4 * r + 2, cq_f32_to_f16(0.4f * tu_rng_uniform(&g_rng)));
        }
        assert_int_equal(cq_codec_validate(CQ_DTYPE_Q4TP, 2, shape, p, nb), CQ_OK);
        expect_decode_exact(CQ_DTYPE_Q4TP, 2, shape, p, nb);
        free(p);
    }
}

/* The f16 plane a weight is bound as, bit for bit: f16(w * 2^e) per row with e putting the row's absmax in
 * [2^13, 2^14) (|e| <= 120), w the codec layer's value. Read through a matmul with the identity, whose
 * products and sums are exact: y[k][n] = plane[n][k] * 2^-e_n. Shapes on the q8 codecs' fast path (cols a
 * multiple of 16, aligned factors) and off it (rows not a multiple of 8 for q8_2f, cols not of 16). */
static void test_plane_bitexact(void **state) {
    (void)state;
    static const struct {
        cq_dtype dt;
        uint64_t rows, cols;
    } k[] = {
        {CQ_DTYPE_Q8_2F, 48, 96}, {CQ_DTYPE_Q8_2F, 40, 1024}, {CQ_DTYPE_Q8_2F, 9, 64},   {CQ_DTYPE_Q8_2F, 9, 70},
        {CQ_DTYPE_Q8_ROW, 48, 96}, {CQ_DTYPE_Q8_ROW, 9, 64},   {CQ_DTYPE_Q8_ROW, 9, 70}, {CQ_DTYPE_BF16, 16, 96},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
        const uint64_t shape[2] = {k[i].rows, k[i].cols}, N = k[i].rows, K = k[i].cols;
        uint64_t nb;
        uint8_t *p = encode_random(k[i].dt, 2, shape, &nb, 0.7f);
        float *w = malloc(sizeof(float) * N * K), *eye = calloc(K * K, sizeof(float)), *y = malloc(sizeof(float) * K * N);
        assert_int_equal(cq_codec_dequant_rows(k[i].dt, 2, shape, p, nb, 0, N, w), CQ_OK);
        for (uint64_t j = 0; j < K; j++) eye[j * K + j] = 1.0f;
        cq_tensor_view v = view_of(k[i].dt, 2, shape, p, nb);
        cq_tensor tw, tx, ty;
        assert_int_equal(cq_tensor_bind_weight(g_be, &v, &tw), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, (int64_t)K, (int64_t)K, &tx), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, (int64_t)K, (int64_t)N, &ty), CQ_OK);
        assert_int_equal(cq_tensor_upload(&tx, eye, sizeof(float) * K * K), CQ_OK);
        assert_int_equal(cq_op_linear(g_be, &ty, &tx, &tw, NULL), CQ_OK);
        assert_int_equal(cq_tensor_download(&ty, y, sizeof(float) * K * N), CQ_OK);
        for (uint64_t n = 0; n < N; n++) {
            float m = 0;
            for (uint64_t j = 0; j < K; j++) m = fmaxf(m, fabsf(w[n * K + j]));
            int x = 0, e = 0;
            if (m > 0 && isfinite(m)) {
                frexpf(m, &x);
                e = 14 - x;
                e = e < -120 ? -120 : e > 120 ? 120 : e;
            }
            for (uint64_t j = 0; j < K; j++) {
                const float want = ldexpf(cq_f16_to_f32(cq_f32_to_f16(ldexpf(w[n * K + j], e))), -e), got = y[j * N + n];
                if (memcmp(&want, &got, 4))
                    fail_msg("%s [%llu, %llu] (%llu, %llu): plane %.9g, want %.9g", cq_dtype_name(k[i].dt),
                             (unsigned long long)N, (unsigned long long)K, (unsigned long long)n,
                             (unsigned long long)j, got, want);
            }
        }
        cq_tensor_free(&tw);
        cq_tensor_free(&tx);
        cq_tensor_free(&ty);
        free(w);
        free(eye);
        free(y);
        free(p);
    }
}

/* A weight read back (copy of a float weight, get_rows of any codec) is the
 * codec's value up to the plane's one f16 rounding; a 1-D weight exactly. */
static void test_weight_readback(void **state) {
    (void)state;
    static const cq_dtype codecs[] = {CQ_DTYPE_F32, CQ_DTYPE_BF16, CQ_DTYPE_F16, CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4TP};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(codecs); ci++) {
        uint64_t shape[2] = {12, 64}, nb;
        uint8_t *p = encode_random(codecs[ci], 2, shape, &nb, 3.0f);
        float want[12 * 64], got[12 * 64];
        assert_int_equal(cq_codec_dequant_rows(codecs[ci], 2, shape, p, nb, 0, 12, want), CQ_OK);
        cq_tensor_view v = view_of(codecs[ci], 2, shape, p, nb);
        cq_tensor w, y, ids;
        assert_int_equal(cq_tensor_bind_weight(g_be, &v, &w), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, 12, 64, &y), CQ_OK);
        int32_t order[12];
        for (int i = 0; i < 12; i++) order[i] = 11 - i;
        int64_t n12 = 12;
        assert_int_equal(cq_tensor_alloc(g_be, CQ_DTYPE_I32, 1, &n12, &ids), CQ_OK);
        assert_int_equal(cq_tensor_upload(&ids, order, sizeof order), CQ_OK);
        for (int pass = 0; pass < 2; pass++) {
            bool copy = pass == 0;
            if (copy && !(codecs[ci] == CQ_DTYPE_F32 || codecs[ci] == CQ_DTYPE_F16 || codecs[ci] == CQ_DTYPE_BF16)) continue;
            assert_int_equal(copy ? cq_op_copy(g_be, &y, &w) : cq_op_get_rows(g_be, &y, &w, &ids), CQ_OK);
            assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
            for (int r = 0; r < 12; r++)
                for (int k = 0; k < 64; k++) {
                    float a = got[r * 64 + k], b = want[(copy ? r : 11 - r) * 64 + k];
                    if (!(fabsf(a - b) <= fabsf(b) * (1.0f / 2048) + 1e-30f))
                        fail_msg("%s %s (%d, %d): %.9g, codec %.9g", cq_dtype_name(codecs[ci]), copy ? "copy" : "get_rows",
                                 r, k, a, b);
                }
        }
        cq_tensor_free(&w);
        cq_tensor_free(&y);
        cq_tensor_free(&ids);
        free(p);
    }
}

/* ---- matmul on the device vs the reference, for one x ---------------------------------- */
/* Weight uploads through the pinned staging ring (cuda_upload.c): payloads packed into one buffer, one that
 * no longer fits the current buffer, pieces of one larger than a buffer, and more than the ring holds in all,
 * so every buffer is reused; the host source is overwritten as soon as each bind returns (it must have been
 * read by then). Every weight reads back bit for bit. Then a payload larger than a buffer decoded (PLANES,
 * through the staging scratch) and kept COMPACT: the rows on either side of the piece boundary read back. */
static float ring_value(size_t w, size_t i) { return (float)((i * 2654435761u + w * 40503u) % 65521u) * 0.5f - 9000.0f; }

static void test_upload_ring(void **state) {
    (void)state;
    /* elements: 4 MiB is 1 << 20 of them; 64 MiB, a ring buffer, is 16 << 20 */
    static const size_t nel[] = {1000,      3,         1u << 20,  15u << 20, 257,       20u << 20, 16u << 20,
                                 1u << 18,  12u << 20, 16u << 20, 7u << 20,  40000,     18u << 20};
    enum { NW = sizeof nel / sizeof nel[0] };
    cq_tensor w[NW];
    size_t maxn = 0, total = 0;
    for (int i = 0; i < NW; i++) {
        maxn = nel[i] > maxn ? nel[i] : maxn;
        total += nel[i] * 4;
    }
    assert_true(total > 4 * ((size_t)64 << 20)); /* more than the ring: every buffer is waited for and reused */
    float *src = malloc(maxn * 4), *got = malloc(maxn * 4);
    assert_non_null(src);
    assert_non_null(got);
    for (int i = 0; i < NW; i++) {
        for (size_t j = 0; j < nel[i]; j++) src[j] = ring_value((size_t)i, j);
        uint64_t shape[1] = {nel[i]};
        cq_tensor_view v = view_of(CQ_DTYPE_F32, 1, shape, (const uint8_t *)src, nel[i] * 4);
        assert_int_equal(cq_tensor_bind_weight(g_be, &v, &w[i]), CQ_OK);
        memset(src, 0xff, nel[i] * 4); /* NaNs: a copy that read the source late would show them */
    }
    for (int i = 0; i < NW; i++) {
        cq_tensor y;
        int64_t n = (int64_t)nel[i];
        assert_int_equal(cq_tensor_alloc(g_be, CQ_DTYPE_F32, 1, &n, &y), CQ_OK);
        assert_int_equal(cq_op_copy(g_be, &y, &w[i]), CQ_OK);
        assert_int_equal(cq_tensor_download(&y, got, nel[i] * 4), CQ_OK);
        for (size_t j = 0; j < nel[i]; j++) {
            float want = ring_value((size_t)i, j);
            if (memcmp(&got[j], &want, 4))
                fail_msg("weight %d of %zu elements, element %zu: %.9g, uploaded %.9g", i, nel[i], j, got[j], want);
        }
        cq_tensor_free(&y);
        cq_tensor_free(&w[i]);
    }
    free(src);
    free(got);

    /* q8_row [1040, 65536]: 68.2 MB of codes, more than a 64 MiB buffer; the piece boundary falls in row 1024 */
    uint64_t shape[2] = {1040, 65536}, nb;
    uint8_t *p = encode_random(CQ_DTYPE_Q8_ROW, 2, shape, &nb, 1.0f);
    assert_true(nb > ((uint64_t)64 << 20));
    expect_decode_exact(CQ_DTYPE_Q8_ROW, 2, shape, p, nb);
    static const int32_t rows[] = {0, 1, 1023, 1024, 1025, 1039};
    enum { NR = sizeof rows / sizeof rows[0] };
    float *want = malloc(sizeof(float) * 65536 * NR), *out = malloc(sizeof(float) * 65536 * NR);
    assert_non_null(want);
    assert_non_null(out);
    for (int r = 0; r < NR; r++)
        assert_int_equal(cq_codec_dequant_rows(CQ_DTYPE_Q8_ROW, 2, shape, p, nb, (uint64_t)rows[r], 1, want + 65536 * r),
                         CQ_OK);
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(cq_backend_set_weight_mode(g_be, mode ? CQ_WEIGHTS_COMPACT : CQ_WEIGHTS_PLANES), CQ_OK);
        cq_tensor_view v = view_of(CQ_DTYPE_Q8_ROW, 2, shape, p, nb);
        cq_tensor tw, y, ids;
        assert_int_equal(cq_tensor_bind_weight(g_be, &v, &tw), CQ_OK);
        int64_t nr = NR;
        assert_int_equal(cq_tensor_alloc(g_be, CQ_DTYPE_I32, 1, &nr, &ids), CQ_OK);
        assert_int_equal(cq_tensor_upload(&ids, rows, sizeof rows), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, NR, 65536, &y), CQ_OK);
        assert_int_equal(cq_op_get_rows(g_be, &y, &tw, &ids), CQ_OK);
        assert_int_equal(cq_tensor_download(&y, out, sizeof(float) * 65536 * NR), CQ_OK);
        for (size_t i = 0; i < (size_t)65536 * NR; i++)
            if (!(fabsf(out[i] - want[i]) <= fabsf(want[i]) * (1.0f / 2048) + 1e-30f))
                fail_msg("%s get_rows row %d col %zu: %.9g, codec %.9g", mode ? "compact" : "planes",
                         rows[i / 65536], i % 65536, out[i], want[i]);
        cq_tensor_free(&tw);
        cq_tensor_free(&y);
        cq_tensor_free(&ids);
    }
    assert_int_equal(cq_backend_set_weight_mode(g_be, CQ_WEIGHTS_DEFAULT), CQ_OK); /* as the other tests expect */
    free(want);
    free(out);
    free(p);
}

static double max_rel_err(const float *a, const float *b, size_t n) {
    double m = 0, scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m / (scale > 0 ? scale : 1);
}

/* y = x · Wᵀ on backend `be` with x scaled by `xs` and f32 weights scaled by `ws`. */
static void linear_on(cq_backend *be, const float *x, const uint8_t *w, uint64_t wbytes, int64_t M, int64_t K,
                      int64_t N, float *y) {
    uint64_t shape[2] = {(uint64_t)N, (uint64_t)K};
    cq_tensor_view v = view_of(CQ_DTYPE_F32, 2, shape, w, wbytes);
    cq_tensor tw, tx, ty;
    assert_int_equal(cq_tensor_bind_weight(be, &v, &tw), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, K, &tx), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, N, &ty), CQ_OK);
    assert_int_equal(cq_tensor_upload(&tx, x, sizeof(float) * (size_t)(M * K)), CQ_OK);
    assert_int_equal(cq_op_linear(be, &ty, &tx, &tw, NULL), CQ_OK);
    cq_status s = cq_tensor_download(&ty, y, sizeof(float) * (size_t)(M * N));
    if (s != CQ_OK) fail_msg("linear on %s: %s", cq_backend_name(be), cq_last_error());
    cq_tensor_free(&tw);
    cq_tensor_free(&tx);
    cq_tensor_free(&ty);
}

/* Activations and weights far outside f16's range still give the f32 result:
 * the row scales keep every operand inside it. */
static void test_f16_range_guard(void **state) {
    (void)state;
    const int64_t M = 37, K = 200, N = 45;
    static const float xscales[] = {1e6f, 1e-8f, 3e4f, 1.0f}, wscales[] = {1e5f, 1e-7f, 1.0f, 1e-3f};
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *y = malloc(sizeof(float) * M * N), *yr = malloc(sizeof(float) * M * N);
    for (size_t t = 0; t < CQ_ARRAY_LEN(xscales); t++) {
        tu_fill_normal(&g_rng, x, (size_t)(M * K), xscales[t]);
        tu_fill_normal(&g_rng, w, (size_t)(N * K), wscales[t] / sqrtf((float)K));
        for (int64_t m = 0; m < M; m++) x[m * K] *= (float)(1 + m % 5) * 8.0f; /* rows of different magnitudes */
        linear_on(g_be, x, (const uint8_t *)w, sizeof(float) * (uint64_t)(N * K), M, K, N, y);
        linear_on(g_ref, x, (const uint8_t *)w, sizeof(float) * (uint64_t)(N * K), M, K, N, yr);
        double e = max_rel_err(y, yr, (size_t)(M * N));
        print_message("range guard: x ~ %g, w ~ %g: max|err| / max|ref| %.3e\n", (double)xscales[t],
                      (double)wscales[t], e);
        if (!(e <= 2.5e-3)) fail_msg("x ~ %g, w ~ %g: error %.3e of max|ref|", (double)xscales[t], (double)wscales[t], e);
    }
    free(x);
    free(w);
    free(y);
    free(yr);
}

/* ---- GEMM algorithm timing ------------------------------------------------------------------ */
typedef struct tune_log {
    int timed;      /* "timed ... candidates" messages for the test's shape */
    char last[512]; /* the last of them */
} tune_log;

static void tune_log_sink(cq_log_level level, const char *msg, void *user) {
    tune_log *t = user;
    if (level == CQ_LOG_DEBUG && strstr(msg, "M=320 N=768 K=512: timed")) {
        t->timed++;
        snprintf(t->last, sizeof t->last, "%s", msg);
    }
}

/* A new shape's first call times cuBLASLt's candidates and the later calls do
 * not; the first call's output is bit for bit the later calls' (the chosen
 * algorithm ran last) with CORTIQ_CUDA_GEMM_TUNE=1; =0 times nothing; both agree with
 * the reference. */
static void test_gemm_tuning(void **state) {
    (void)state;
    const char *mode = getenv("CORTIQ_CUDA_GEMM");
    if (mode && (!strcmp(mode, "simt") || !strcmp(mode, "wgmma"))) { /* auto and cublaslt keep it there */
        print_message("gemm timing: skipped: CORTIQ_CUDA_GEMM=%s takes the matmul off cuBLASLt\n", mode);
        skip();
    }
    const int64_t M = 320, K = 512, N = 768;
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K);
    float *y1 = malloc(sizeof(float) * M * N), *y2 = malloc(sizeof(float) * M * N);
    float *y0 = malloc(sizeof(float) * M * N), *yr = malloc(sizeof(float) * M * N);
    tu_fill_normal(&g_rng, x, (size_t)(M * K), 1.0f);
    tu_fill_normal(&g_rng, w, (size_t)(N * K), 1.0f / sqrtf((float)K));
    const uint8_t *wb = (const uint8_t *)w;
    const uint64_t wbytes = sizeof(float) * (uint64_t)(N * K);
    tune_log t = {0};
    cq_set_log(tune_log_sink, &t, CQ_LOG_DEBUG);
    cq_backend *tuned = NULL;
    cq_cuda_opts on = env_opts();
    on.gemm_tune = true;
    cq_status s = cq_backend_cuda_open(-1, &on, &tuned);
    assert_int_equal(s, CQ_OK);
    linear_on(tuned, x, wb, wbytes, M, K, N, y1);
    const int after_first = t.timed;
    linear_on(tuned, x, wb, wbytes, M, K, N, y2);
    const int after_second = t.timed;
    cq_backend_free(tuned);
    cq_backend *untuned = NULL;
    cq_cuda_opts off = env_opts();
    off.gemm_tune = false;
    s = cq_backend_cuda_open(-1, &off, &untuned);
    assert_int_equal(s, CQ_OK);
    linear_on(untuned, x, wb, wbytes, M, K, N, y0);
    cq_backend_free(untuned);
    cq_set_log(NULL, NULL, CQ_LOG_WARN);
    print_message("gemm timing: %s\n", t.last[0] ? t.last : "(no message)");
    if (after_first != 1) fail_msg("the first call of a new shape logged %d timings, want 1", after_first);
    if (after_second != 1) fail_msg("the second call of the shape timed again");
    if (t.timed != 1) fail_msg("CORTIQ_CUDA_GEMM_TUNE=0 still timed the candidates");
    if (memcmp(y1, y2, sizeof(float) * (size_t)(M * N)))
        fail_msg("the timed first call's output differs from the next call's: it is not the chosen algorithm's");
    linear_on(g_ref, x, wb, wbytes, M, K, N, yr);
    double e1 = max_rel_err(y1, yr, (size_t)(M * N)), e0 = max_rel_err(y0, yr, (size_t)(M * N));
    print_message("gemm timing: max|err| / max|ref| timed %.3e, heuristic's first %.3e\n", e1, e0);
    if (!(e1 <= 2.5e-3) || !(e0 <= 2.5e-3)) fail_msg("errors %.3e (timed) / %.3e (untimed) of max|ref|", e1, e0);
    free(x);
    free(w);
    free(y1);
    free(y2);
    free(y0);
    free(yr);
}

/* ---- the staged matmul input reused, and forgotten when it may have changed -----------------------
 * The backend stages an activation x once for consecutive matmuls of the same x (cuda_gemm.c). Each step
 * below changes x in one way the reuse must notice (another op in place, a matmul of another input
 * writing into x, an upload) and then multiplies it again; every product is checked against the CPU
 * running the same sequence, so a stale staging shows as a wrong product. */
typedef struct reuse_bufs {
    cq_tensor x, y, z, w1, w2, wsq;
} reuse_bufs;

static void reuse_make(cq_backend *be, reuse_bufs *b, const float *x, const float *z, const float *const *w,
                       const uint64_t *wbytes, int64_t M, int64_t K, int64_t N) {
    const uint64_t sh_n[2] = {(uint64_t)N, (uint64_t)K}, sh_k[2] = {(uint64_t)K, (uint64_t)K};
    const uint64_t *shapes[3] = {sh_n, sh_n, sh_k};
    cq_tensor *ws[3] = {&b->w1, &b->w2, &b->wsq};
    for (int i = 0; i < 3; i++) {
        cq_tensor_view v = view_of(CQ_DTYPE_F32, 2, shapes[i], (const uint8_t *)w[i], wbytes[i]);
        assert_int_equal(cq_tensor_bind_weight(be, &v, ws[i]), CQ_OK);
    }
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, K, &b->x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, N, &b->y), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, K, &b->z), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->x, x, sizeof(float) * (size_t)(M * K)), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->z, z, sizeof(float) * (size_t)(M * K)), CQ_OK);
}

static void reuse_free(reuse_bufs *b) {
    cq_tensor *all[6] = {&b->x, &b->y, &b->z, &b->w1, &b->w2, &b->wsq};
    for (int i = 0; i < 6; i++) cq_tensor_free(all[i]);
}

/* step i of the sequence, then y downloaded into out */
static void reuse_step(cq_backend *be, reuse_bufs *b, int i, const float *x2, int64_t M, int64_t K, int64_t N,
                       float *out) {
    cq_tensor *w = i % 2 ? &b->w2 : &b->w1;
    switch (i) {
    case 0: case 1: break;                                                         /* x as uploaded, twice */
    case 2: assert_int_equal(cq_op_layernorm(be, &b->x, &b->x, NULL, NULL, 1e-6f), CQ_OK); break; /* in place */
    case 3: assert_int_equal(cq_op_linear(be, &b->x, &b->z, &b->wsq, NULL), CQ_OK); break; /* x = z·Wsqᵀ */
    case 4: assert_int_equal(cq_tensor_upload(&b->x, x2, sizeof(float) * (size_t)(M * K)), CQ_OK); break;
    default: fail_msg("no step %d", i);
    }
    assert_int_equal(cq_op_linear(be, &b->y, &b->x, w, NULL), CQ_OK);
    cq_status s = cq_tensor_download(&b->y, out, sizeof(float) * (size_t)(M * N));
    if (s != CQ_OK) fail_msg("step %d on %s: %s", i, cq_backend_name(be), cq_last_error());
}

static void test_staged_input_reuse(void **state) {
    (void)state;
    const int64_t M = 300, K = 256, N = 200;
    float *x = malloc(sizeof(float) * M * K), *x2 = malloc(sizeof(float) * M * K), *z = malloc(sizeof(float) * M * K);
    float *w[3] = {malloc(sizeof(float) * N * K), malloc(sizeof(float) * N * K), malloc(sizeof(float) * K * K)};
    const uint64_t wbytes[3] = {sizeof(float) * (uint64_t)(N * K), sizeof(float) * (uint64_t)(N * K),
                                sizeof(float) * (uint64_t)(K * K)};
    float *y = malloc(sizeof(float) * M * N), *yr = malloc(sizeof(float) * M * N);
    tu_fill_normal(&g_rng, x, (size_t)(M * K), 3.0f);
    tu_fill_normal(&g_rng, x2, (size_t)(M * K), 0.5f);
    tu_fill_normal(&g_rng, w[0], (size_t)(N * K), 1.0f / sqrtf((float)K));
    tu_fill_normal(&g_rng, w[1], (size_t)(N * K), 1.0f / sqrtf((float)K));
    tu_fill_normal(&g_rng, w[2], (size_t)(K * K), 1.0f / sqrtf((float)K));
    tu_fill_normal(&g_rng, z, (size_t)(M * K), 1.0f);
    reuse_bufs b, r;
    reuse_make(g_be, &b, x, z, (const float *const *)w, wbytes, M, K, N);
    reuse_make(g_ref, &r, x, z, (const float *const *)w, wbytes, M, K, N);
    static const char *const what[] = {"first product", "second product of the same x", "after an op in place",
                                       "after a matmul into x", "after an upload"};
    for (int i = 0; i < 5; i++) {
        reuse_step(g_be, &b, i, x2, M, K, N, y);
        reuse_step(g_ref, &r, i, x2, M, K, N, yr);
        const double e = max_rel_err(y, yr, (size_t)(M * N));
        print_message("staged input: %s: max|err| / max|ref| %.3e\n", what[i], e);
        if (!(e <= 2.5e-3)) fail_msg("%s: error %.3e of max|ref| (a stale staging?)", what[i], e);
    }
    reuse_free(&b);
    reuse_free(&r);
    for (int i = 0; i < 3; i++) free(w[i]);
    free(z);
    free(x);
    free(x2);
    free(y);
    free(yr);
}

/* ---- producers' side copies ------------------------------------------------------------------ */
typedef struct side_bufs {
    cq_tensor x, h, q, mlp, o, sc, sh, wq, wg, wu, wd;
} side_bufs;

/* h = LN(x)·(1 + sc) + sh; q = h·Wqᵀ; mlp = SwiGLU(h·Wgᵀ, h·Wuᵀ); o = mlp·Wdᵀ: the DiT block's pattern, where
 * the LayerNorm writes the next matmuls' staged input beside its f32 output */
static void side_run(cq_backend *be, side_bufs *b, float *const *host, const int64_t *dims, float *q, float *mlp,
                     float *o) {
    const int64_t M = dims[0], K = dims[1], F = dims[2], N = dims[3];
    const uint64_t sq[2] = {(uint64_t)N, (uint64_t)K}, sg[2] = {(uint64_t)F, (uint64_t)K},
                   sd[2] = {(uint64_t)N, (uint64_t)F};
    const uint64_t *shapes[4] = {sq, sg, sg, sd};
    cq_tensor *ws[4] = {&b->wq, &b->wg, &b->wu, &b->wd};
    for (int i = 0; i < 4; i++) {
        const uint64_t n = shapes[i][0] * shapes[i][1];
        cq_tensor_view v = view_of(CQ_DTYPE_F32, 2, shapes[i], (const uint8_t *)host[3 + i], n * sizeof(float));
        assert_int_equal(cq_tensor_bind_weight(be, &v, ws[i]), CQ_OK);
    }
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, K, &b->x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, K, &b->h), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, N, &b->q), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, F, &b->mlp), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, M, N, &b->o), CQ_OK);
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &K, &b->sc), CQ_OK);
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &K, &b->sh), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->x, host[0], sizeof(float) * (size_t)(M * K)), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->sc, host[1], sizeof(float) * (size_t)K), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->sh, host[2], sizeof(float) * (size_t)K), CQ_OK);
    assert_int_equal(cq_op_layernorm(be, &b->h, &b->x, &b->sc, &b->sh, 1e-6f), CQ_OK);
    assert_int_equal(cq_op_linear(be, &b->q, &b->h, &b->wq, NULL), CQ_OK);
    cq_matmul_args mm = {.y = &b->mlp, .x = &b->h, .w = &b->wg, .w2 = &b->wu, .act = CQ_ACT_SWIGLU};
    assert_int_equal(cq_op_matmul(be, &mm), CQ_OK);
    assert_int_equal(cq_op_linear(be, &b->o, &b->mlp, &b->wd, NULL), CQ_OK);
    cq_status s = cq_tensor_download(&b->q, q, sizeof(float) * (size_t)(M * N));
    if (s == CQ_OK) s = cq_tensor_download(&b->mlp, mlp, sizeof(float) * (size_t)(M * F));
    if (s == CQ_OK) s = cq_tensor_download(&b->o, o, sizeof(float) * (size_t)(M * N));
    if (s != CQ_OK) fail_msg("on %s: %s", cq_backend_name(be), cq_last_error());
    cq_tensor *all[11] = {&b->x, &b->h, &b->q, &b->mlp, &b->o, &b->sc, &b->sh, &b->wq, &b->wg, &b->wu, &b->wd};
    for (int i = 0; i < 11; i++) cq_tensor_free(all[i]);
}

/* With the LayerNorm's side copy (default) against without (CORTIQ_CUDA_SIDE=0) and the reference: every
 * output bit for bit (the copy is what the staging would write, from the same values), each within the
 * matmul bound of the reference; and the copy is taken (the staged-input reuse count: one more with it, the
 * q projection's; the SwiGLU reuses h either way). */
static void test_side_copies(void **state) {
    (void)state;
    const int64_t M = 300, K = 256, F = 512, N = 200, dims[4] = {M, K, F, N};
    const size_t n[7] = {(size_t)(M * K), (size_t)K, (size_t)K, (size_t)(N * K), (size_t)(F * K), (size_t)(F * K),
                         (size_t)(N * F)};
    const float sd[7] = {3.0f, 0.3f, 0.5f, 1.0f / 16, 1.0f / 16, 1.0f / 16, 1.0f / 22.6f};
    float *host[7];
    for (int i = 0; i < 7; i++) {
        host[i] = malloc(sizeof(float) * n[i]);
        tu_fill_normal(&g_rng, host[i], n[i], sd[i]);
    }
    cq_backend *off = NULL;
    cq_cuda_opts no_side = env_opts();
    no_side.no_side_copy = true;
    cq_status s = cq_backend_cuda_open(-1, &no_side, &off);
    assert_int_equal(s, CQ_OK);
    cq_backend *bes[3] = {g_be, off, g_ref};
    float *q[3], *mlp[3], *o[3];
    uint64_t reuses[2];
    for (int b = 0; b < 3; b++) {
        q[b] = malloc(sizeof(float) * (size_t)(M * N));
        mlp[b] = malloc(sizeof(float) * (size_t)(M * F));
        o[b] = malloc(sizeof(float) * (size_t)(M * N));
        cq_backend_stats s0, s1;
        side_bufs bufs;
        /* counted on the second run: on the first, scratch slots grow, and a grown slot drops what was staged */
        side_run(bes[b], &bufs, host, dims, q[b], mlp[b], o[b]);
        if (b < 2) assert_int_equal(cq_backend_get_stats(bes[b], &s0, false), CQ_OK);
        side_run(bes[b], &bufs, host, dims, q[b], mlp[b], o[b]);
        if (b < 2) {
            assert_int_equal(cq_backend_get_stats(bes[b], &s1, false), CQ_OK);
            reuses[b] = s1.staged_reuses - s0.staged_reuses;
        }
    }
    print_message("side copies: staged inputs reused %llu with them, %llu without\n", (unsigned long long)reuses[0],
                  (unsigned long long)reuses[1]);
    assert_int_equal(reuses[0], reuses[1] + 1);
    if (memcmp(q[0], q[1], sizeof(float) * (size_t)(M * N)) != 0) fail_msg("q differs with the LayerNorm's side copy");
    if (memcmp(mlp[0], mlp[1], sizeof(float) * (size_t)(M * F)) != 0) fail_msg("the SwiGLU output differs");
    if (memcmp(o[0], o[1], sizeof(float) * (size_t)(M * N)) != 0) fail_msg("o differs");
    for (int b = 0; b < 2; b++) {
        const double e1 = max_rel_err(q[b], q[2], (size_t)(M * N)), e2 = max_rel_err(mlp[b], mlp[2], (size_t)(M * F)),
                     e3 = max_rel_err(o[b], o[2], (size_t)(M * N));
        print_message("side copies %s: vs the reference q %.3e, SwiGLU %.3e, o %.3e of max|ref|\n", b ? "off" : "on",
                      e1, e2, e3);
        if (!(e1 <= 2.5e-3 && e2 <= 2.5e-3 && e3 <= 2.5e-3)) fail_msg("side copies %s: beyond 2.5e-3 of max|ref|", b ? "off" : "on");
    }
    for (int b = 0; b < 3; b++) free(q[b]), free(mlp[b]), free(o[b]);
    for (int i = 0; i < 7; i++) free(host[i]);
    cq_backend_free(off);
}

/* ---- deferred errors ----------------------------------------------------------------------- */
static void expect_err(cq_status s, cq_status want, const char *needle) {
    if (s != want || !strstr(cq_last_error(), needle))
        fail_msg("expected %s mentioning '%s', got %s: %s", cq_status_str(want), needle, cq_status_str(s),
                 cq_last_error());
}

static void test_deferred_errors(void **state) {
    (void)state;
    /* get_rows with an id outside the table: the op queues fine, sync reports it once */
    uint64_t shape[2] = {10, 16}, nb;
    uint8_t *p = encode_random(CQ_DTYPE_F16, 2, shape, &nb, 1.0f);
    cq_tensor_view v = view_of(CQ_DTYPE_F16, 2, shape, p, nb);
    cq_tensor w, ids, y;
    int32_t bad[3] = {0, 5, 99};
    assert_int_equal(cq_tensor_bind_weight(g_be, &v, &w), CQ_OK);
    int64_t n3 = 3;
    assert_int_equal(cq_tensor_alloc(g_be, CQ_DTYPE_I32, 1, &n3, &ids), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, 3, 16, &y), CQ_OK);
    assert_int_equal(cq_tensor_upload(&ids, bad, sizeof bad), CQ_OK);
    assert_int_equal(cq_op_get_rows(g_be, &y, &w, &ids), CQ_OK);
    expect_err(cq_backend_sync(g_be), CQ_ERR_BOUNDS, "get_rows: id 99");
    assert_int_equal(cq_backend_sync(g_be), CQ_OK); /* reported once */
    /* the same through a download */
    assert_int_equal(cq_op_get_rows(g_be, &y, &w, &ids), CQ_OK);
    float out[48];
    expect_err(cq_tensor_download(&y, out, sizeof out), CQ_ERR_BOUNDS, "position 2");
    assert_int_equal(cq_backend_sync(g_be), CQ_OK);

    /* a NaN in x makes the matmul output non-finite: CQ_ERR_NUMERIC naming matmul */
    cq_tensor x, o;
    float xv[2 * 16];
    for (int i = 0; i < 32; i++) xv[i] = 0.1f * (float)i;
    xv[17] = NAN;
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, 2, 16, &x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, 2, 10, &o), CQ_OK);
    assert_int_equal(cq_tensor_upload(&x, xv, sizeof xv), CQ_OK);
    assert_int_equal(cq_op_linear(g_be, &o, &x, &w, NULL), CQ_OK);
    expect_err(cq_backend_sync(g_be), CQ_ERR_NUMERIC, "matmul");
    assert_int_equal(cq_backend_sync(g_be), CQ_OK);
    /* finite again: no error */
    xv[17] = 1.0f;
    assert_int_equal(cq_tensor_upload(&x, xv, sizeof xv), CQ_OK);
    assert_int_equal(cq_op_linear(g_be, &o, &x, &w, NULL), CQ_OK);
    assert_int_equal(cq_backend_sync(g_be), CQ_OK);

    /* gather_cols with an index outside [-1, K) */
    cq_tensor idx, g2;
    int32_t gi[4] = {0, -1, 16, 3};
    int64_t n4 = 4;
    assert_int_equal(cq_tensor_alloc(g_be, CQ_DTYPE_I32, 1, &n4, &idx), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(g_be, CQ_DTYPE_F32, 2, 4, &g2), CQ_OK);
    assert_int_equal(cq_tensor_upload(&idx, gi, sizeof gi), CQ_OK);
    assert_int_equal(cq_op_gather_cols(g_be, &g2, &x, &idx, 1, 1.0f), CQ_OK);
    expect_err(cq_backend_sync(g_be), CQ_ERR_BOUNDS, "gather_cols");
    assert_int_equal(cq_backend_sync(g_be), CQ_OK);

    cq_tensor_free(&w);
    cq_tensor_free(&ids);
    cq_tensor_free(&y);
    cq_tensor_free(&x);
    cq_tensor_free(&o);
    cq_tensor_free(&idx);
    cq_tensor_free(&g2);
    free(p);
}

/* ---- one block of the denoiser's ops, twice: the second time allocates nothing --------------- */
typedef struct block_bufs {
    cq_tensor wq, wg, wu, x, h, q, kp, vp, att, mlp, cosv, sinv, nw, sc, gate, vis;
} block_bufs;

static void block_make(cq_backend *be, block_bufs *b, int64_t T, int64_t P, int H, int D, uint8_t **keep) {
    const int64_t C = (int64_t)H * D, F = 2 * C;
    uint64_t sq[2] = {(uint64_t)C, (uint64_t)C}, sf[2] = {(uint64_t)F, (uint64_t)C}, nb;
    keep[0] = encode_random(CQ_DTYPE_Q8_2F, 2, sq, &nb, 1.0f / sqrtf((float)C));
    cq_tensor_view v = view_of(CQ_DTYPE_Q8_2F, 2, sq, keep[0], nb);
    assert_int_equal(cq_tensor_bind_weight(be, &v, &b->wq), CQ_OK);
    keep[1] = encode_random(CQ_DTYPE_Q4TP, 2, sf, &nb, 1.0f / sqrtf((float)C));
    v = view_of(CQ_DTYPE_Q4TP, 2, sf, keep[1], nb);
    assert_int_equal(cq_tensor_bind_weight(be, &v, &b->wg), CQ_OK);
    keep[2] = encode_random(CQ_DTYPE_BF16, 2, sf, &nb, 1.0f / sqrtf((float)C));
    v = view_of(CQ_DTYPE_BF16, 2, sf, keep[2], nb);
    assert_int_equal(cq_tensor_bind_weight(be, &v, &b->wu), CQ_OK);
    cq_tensor *acts[] = {&b->x, &b->h, &b->q, &b->att};
    for (size_t i = 0; i < CQ_ARRAY_LEN(acts); i++) assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T, C, acts[i]), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, P, C, &b->kp), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, P, C, &b->vp), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T, F, &b->mlp), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T, D / 2, &b->cosv), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T, D / 2, &b->sinv), CQ_OK);
    int64_t nd = D, nc = C, nt = T;
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &nd, &b->nw), CQ_OK);
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &nc, &b->sc), CQ_OK);
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &nc, &b->gate), CQ_OK);
    assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, &nt, &b->vis), CQ_OK);
    size_t big = (size_t)(T * F > P * C ? T * F : P * C);
    float *tmp = malloc(sizeof(float) * big);
    tu_fill_normal(&g_rng, tmp, (size_t)(T * C), 1.0f);
    assert_int_equal(cq_tensor_upload(&b->x, tmp, sizeof(float) * (size_t)(T * C)), CQ_OK);
    tu_fill_normal(&g_rng, tmp, (size_t)(P * C), 1.0f);
    assert_int_equal(cq_tensor_upload(&b->kp, tmp, sizeof(float) * (size_t)(P * C)), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->vp, tmp, sizeof(float) * (size_t)(P * C)), CQ_OK);
    for (int64_t i = 0; i < T * D / 2; i++) tmp[i] = cosf(0.01f * (float)i);
    assert_int_equal(cq_tensor_upload(&b->cosv, tmp, sizeof(float) * (size_t)(T * D / 2)), CQ_OK);
    for (int64_t i = 0; i < T * D / 2; i++) tmp[i] = sinf(0.01f * (float)i);
    assert_int_equal(cq_tensor_upload(&b->sinv, tmp, sizeof(float) * (size_t)(T * D / 2)), CQ_OK);
    for (int64_t i = 0; i < C; i++) tmp[i] = 0.1f * (float)(i % 7) - 0.3f;
    assert_int_equal(cq_tensor_upload(&b->sc, tmp, sizeof(float) * (size_t)C), CQ_OK);
    assert_int_equal(cq_tensor_upload(&b->gate, tmp, sizeof(float) * (size_t)C), CQ_OK);
    for (int64_t i = 0; i < D; i++) tmp[i] = 1.0f + 0.01f * (float)i;
    assert_int_equal(cq_tensor_upload(&b->nw, tmp, sizeof(float) * (size_t)D), CQ_OK);
    int32_t *vis = malloc(sizeof(int32_t) * (size_t)T);
    for (int64_t i = 0; i < T; i++) vis[i] = (int32_t)(P + T);
    assert_int_equal(cq_tensor_upload(&b->vis, vis, sizeof(int32_t) * (size_t)T), CQ_OK);
    free(vis);
    free(tmp);
}

static void block_run(cq_backend *be, block_bufs *b, int H, int D) {
    assert_int_equal(cq_op_layernorm(be, &b->h, &b->x, &b->sc, NULL, 1e-6f), CQ_OK);
    assert_int_equal(cq_op_linear(be, &b->q, &b->h, &b->wq, NULL), CQ_OK);
    assert_int_equal(cq_op_qk_norm_rope(be, &b->q, H, D, &b->nw, 1e-6f, &b->cosv, &b->sinv, CQ_ROPE_INTERLEAVED, 0), CQ_OK);
    cq_attn_args at = {.o = &b->att, .q = &b->q, .k = &b->q, .v = &b->h, .k_prefix = &b->kp, .v_prefix = &b->vp,
                       .vis = &b->vis, .n_heads = H, .n_kv_heads = H, .head_dim = D};
    assert_int_equal(cq_op_attention(be, &at), CQ_OK);
    cq_matmul_args g = {.y = &b->x, .x = &b->att, .w = &b->wq, .gate = &b->gate, .accumulate = true};
    assert_int_equal(cq_op_matmul(be, &g), CQ_OK);
    cq_matmul_args mm = {.y = &b->mlp, .x = &b->h, .w = &b->wg, .w2 = &b->wu, .act = CQ_ACT_SWIGLU};
    assert_int_equal(cq_op_matmul(be, &mm), CQ_OK);
    cq_status s = cq_backend_sync(be);
    if (s != CQ_OK) fail_msg("block on %s: %s", cq_backend_name(be), cq_last_error());
}

static void block_free(block_bufs *b, uint8_t **keep) {
    cq_tensor *all[] = {&b->wq, &b->wg, &b->wu, &b->x, &b->h, &b->q, &b->kp, &b->vp, &b->att,
                        &b->mlp, &b->cosv, &b->sinv, &b->nw, &b->sc, &b->gate, &b->vis};
    for (size_t i = 0; i < CQ_ARRAY_LEN(all); i++) cq_tensor_free(all[i]);
    for (int i = 0; i < 3; i++) free(keep[i]);
}

static void test_steady_state_allocates_nothing(void **state) {
    (void)state;
    block_bufs b;
    uint8_t *keep[3];
    memset(&b, 0, sizeof b);
    block_make(g_be, &b, 200, 18, 2, 128, keep);
    block_run(g_be, &b, 2, 128); /* warm-up: scratch and plans are made here */
    cq_backend_stats s1, s2;
    assert_int_equal(cq_backend_get_stats(g_be, &s1, false), CQ_OK);
    for (int i = 0; i < 3; i++) block_run(g_be, &b, 2, 128);
    assert_int_equal(cq_backend_get_stats(g_be, &s2, false), CQ_OK);
    print_message("device: %llu bytes in use, peak %llu, cached %llu, weights %llu, %llu cudaMalloc calls\n",
                  (unsigned long long)s2.mem_in_use, (unsigned long long)s2.mem_peak, (unsigned long long)s2.mem_cached,
                  (unsigned long long)s2.weight_bytes, (unsigned long long)s2.device_allocs);
    assert_true(s2.weight_bytes > 0 && s2.mem_in_use >= s2.weight_bytes && s2.device_total > 0);
    if (s2.device_allocs != s1.device_allocs || s2.mem_in_use != s1.mem_in_use)
        fail_msg("steady loop allocated: %llu -> %llu cudaMalloc calls, %llu -> %llu bytes in use",
                 (unsigned long long)s1.device_allocs, (unsigned long long)s2.device_allocs,
                 (unsigned long long)s1.mem_in_use, (unsigned long long)s2.mem_in_use);
    block_free(&b, keep);
}

/* The debugging fallbacks compute what the fast paths compute. */
static void test_fallbacks_agree(void **state) {
    (void)state;
    const int64_t T = 150, P = 18;
    const int H = 2, D = 128;
    float *fast = malloc(sizeof(float) * (size_t)(T * H * D * 2));
    float *slow = fast + T * H * D;
    for (int pass = 0; pass < 2; pass++) {
        cq_backend *be = g_be;
        if (pass) {
            cq_cuda_opts dbg = env_opts();
            dbg.gemm = CQ_CUDA_GEMM_SIMT;
            dbg.attn = CQ_CUDA_ATTN_GENERIC;
            dbg.sync_each_op = true;
            cq_status s = cq_backend_cuda_open(-1, &dbg, &be);
            assert_int_equal(s, CQ_OK);
        }
        tu_rng_seed(&g_rng, 77); /* the same inputs both times */
        block_bufs b;
        uint8_t *keep[3];
        memset(&b, 0, sizeof b);
        block_make(be, &b, T, P, H, D, keep);
        block_run(be, &b, H, D);
        assert_int_equal(cq_tensor_download(&b.x, pass ? slow : fast, sizeof(float) * (size_t)(T * H * D)), CQ_OK);
        block_free(&b, keep);
        if (pass) cq_backend_free(be);
    }
    double e = max_rel_err(slow, fast, (size_t)(T * H * D));
    print_message("fallbacks vs fast paths: max|diff| / max %.3e\n", e);
    if (!(e <= 1.5e-2)) fail_msg("CUDA-core GEMM + generic attention differ from cuBLASLt + tensor-core attention by %.3e", e);
    free(fast);
}

/* ---- attention: every head_dim-128 and head_dim-80 kernel choice ---------------------------------- */
/* AV_WINDOWS: block-diagonal windows of unequal lengths given by vis_lo and vis, as the vision towers' windowed
 * blocks (the rows of a window see the keys of their share of all P + Nk) */
enum { AV_ALL, AV_CAUSAL, AV_BLOCK, AV_RANDOM, AV_WINDOWS };
typedef struct attn_case {
    cq_dtype dt;
    int64_t Nq, P, Nk;
    int Hq, Hkv, vis;
    float scale;
    int D; /* head_dim; 0 means 128 */
} attn_case;

static size_t act_size(cq_dtype dt) { return dt == CQ_DTYPE_F32 ? 4 : 2; }

static void act_upload(cq_backend *be, cq_dtype dt, int64_t rows, int64_t cols, const float *v, cq_tensor *t) {
    const size_t n = (size_t)(rows * cols), es = act_size(dt);
    uint8_t *b = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        if (dt == CQ_DTYPE_F32) memcpy(b + 4 * i, &v[i], 4);
        else cq_wr16(b + 2 * i, dt == CQ_DTYPE_F16 ? cq_f32_to_f16(v[i]) : cq_f32_to_bf16(v[i]));
    }
    assert_int_equal(cq_tensor_alloc_2d(be, dt, rows, cols, t), CQ_OK);
    assert_int_equal(cq_tensor_upload(t, b, n * es), CQ_OK);
    free(b);
}

/* in[0..4]: q, k, v, k_prefix, v_prefix as f32; vis, vis_lo: [Nq] or NULL; out: [Nq, Hq * D] as f32 */
static void attn_on2(cq_backend *be, const attn_case *c, float *const *in, const int32_t *vis, const int32_t *vis_lo,
                     float *out) {
    const int D = c->D ? c->D : 128;
    cq_tensor t[5], tvis, tlo, to;
    memset(t, 0, sizeof t);
    memset(&tvis, 0, sizeof tvis);
    memset(&tlo, 0, sizeof tlo);
    act_upload(be, c->dt, c->Nq, (int64_t)c->Hq * D, in[0], &t[0]);
    for (int i = 1; i < 5; i++) {
        const int64_t rows = i < 3 ? c->Nk : c->P;
        if (rows) act_upload(be, c->dt, rows, (int64_t)c->Hkv * D, in[i], &t[i]);
    }
    if (vis) {
        int64_t n = c->Nq;
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, &n, &tvis), CQ_OK);
        assert_int_equal(cq_tensor_upload(&tvis, vis, sizeof(int32_t) * (size_t)n), CQ_OK);
    }
    if (vis_lo) {
        int64_t n = c->Nq;
        assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_I32, 1, &n, &tlo), CQ_OK);
        assert_int_equal(cq_tensor_upload(&tlo, vis_lo, sizeof(int32_t) * (size_t)n), CQ_OK);
    }
    assert_int_equal(cq_tensor_alloc_2d(be, c->dt, c->Nq, (int64_t)c->Hq * D, &to), CQ_OK);
    cq_attn_args a = {.o = &to, .q = &t[0], .k = c->Nk ? &t[1] : NULL, .v = c->Nk ? &t[2] : NULL,
                      .k_prefix = c->P ? &t[3] : NULL, .v_prefix = c->P ? &t[4] : NULL, .vis = vis ? &tvis : NULL,
                      .vis_lo = vis_lo ? &tlo : NULL, .n_heads = c->Hq, .n_kv_heads = c->Hkv, .head_dim = D,
                      .scale = c->scale, .causal = c->vis == AV_CAUSAL};
    const size_t n = (size_t)(c->Nq * c->Hq * D), es = act_size(c->dt);
    uint8_t *b = malloc(n * es);
    cq_status s = cq_op_attention(be, &a);
    if (s == CQ_OK) s = cq_tensor_download(&to, b, n * es);
    if (s != CQ_OK) fail_msg("attention on %s: %s", cq_backend_name(be), cq_last_error());
    for (size_t i = 0; i < n; i++) {
        if (c->dt == CQ_DTYPE_F32) memcpy(&out[i], b + 4 * i, 4);
        else out[i] = c->dt == CQ_DTYPE_F16 ? cq_f16_to_f32(cq_rd16(b + 2 * i)) : cq_bf16_to_f32(cq_rd16(b + 2 * i));
    }
    free(b);
    for (int i = 0; i < 5; i++) cq_tensor_free(&t[i]);
    cq_tensor_free(&tvis);
    cq_tensor_free(&tlo);
    cq_tensor_free(&to);
}

static void attn_on(cq_backend *be, const attn_case *c, float *const *in, const int32_t *vis, float *out) {
    attn_on2(be, c, in, vis, NULL, out);
}

/* Each kernel within the bf16 bound test_ops_gpu holds attention to (1.5e-2 of max|ref| plus 1/128 of
 * the value and the output's rounding); the flash shapes, which round the same operands the same way
 * and differ only in which warp does what, within 1e-4 of max|ref| plus the output's rounding of each
 * other; the wgmma kernel (128-key tiles) within 2^-8 of max|V| of flash128 (see the loop). Cases: Nq not a multiple of any block, prefix plus own keys (and prefix only), GQA, the three
 * masks (rows with no visible key among them), a negative scale, each activation dtype; then the same at head_dim 80
 * (the Qwen2.5-VL vision tower's: there `wgmma` means flash128w4) and its windowed blocks (vis_lo). */
static void test_attention_kernels(void **state) {
    (void)state;
    static const attn_case cases[] = {
        {CQ_DTYPE_F32, 300, 18, 300, 4, 2, AV_ALL, 0.0f, 128},     {CQ_DTYPE_BF16, 200, 0, 200, 2, 2, AV_RANDOM, 0.0f, 128},
        {CQ_DTYPE_F16, 150, 40, 150, 3, 1, AV_CAUSAL, -0.07f, 128}, {CQ_DTYPE_F32, 129, 64, 0, 2, 1, AV_BLOCK, 0.05f, 128},
        {CQ_DTYPE_BF16, 1, 5, 1, 1, 1, AV_ALL, 0.0f, 128},
        /* more key tiles than the wgmma kernel's ring holds, so stages are refilled */
        {CQ_DTYPE_F32, 700, 18, 700, 2, 2, AV_ALL, 0.0f, 128},     {CQ_DTYPE_BF16, 260, 30, 900, 2, 1, AV_RANDOM, 0.0f, 128},
        {CQ_DTYPE_BF16, 333, 0, 333, 4, 2, AV_WINDOWS, 0.0f, 128},
        /* head_dim 80 */
        {CQ_DTYPE_F32, 300, 18, 300, 4, 2, AV_ALL, 0.0f, 80},      {CQ_DTYPE_BF16, 200, 0, 200, 2, 2, AV_RANDOM, 0.0f, 80},
        {CQ_DTYPE_F16, 150, 40, 150, 3, 1, AV_CAUSAL, -0.07f, 80},  {CQ_DTYPE_F32, 129, 64, 0, 2, 1, AV_BLOCK, 0.05f, 80},
        {CQ_DTYPE_BF16, 1, 5, 1, 1, 1, AV_ALL, 0.0f, 80},          {CQ_DTYPE_BF16, 260, 30, 900, 2, 1, AV_RANDOM, 0.0f, 80},
        {CQ_DTYPE_BF16, 1029, 0, 1029, 16, 16, AV_WINDOWS, 0.0f, 80}, {CQ_DTYPE_F32, 1029, 0, 1029, 16, 16, AV_ALL, 0.0f, 80},
        {CQ_DTYPE_F16, 333, 50, 333, 4, 2, AV_WINDOWS, 0.0f, 80},
    };
    static const char *const kinds[] = {"flash128", "flash64", "flash128w4", "wgmma", "wmma"};
    static const cq_cuda_attn modes[] = {CQ_CUDA_ATTN_FLASH128, CQ_CUDA_ATTN_FLASH64, CQ_CUDA_ATTN_FLASH128W4,
                                         CQ_CUDA_ATTN_WGMMA, CQ_CUDA_ATTN_WMMA};
    enum { NK = 5, WGMMA = 3 };
    cq_backend *be[NK];
    for (int k = 0; k < NK; k++) {
        cq_cuda_opts o = env_opts();
        o.attn = modes[k];
        cq_status s = cq_backend_cuda_open(-1, &o, &be[k]);
        assert_int_equal(s, CQ_OK);
    }
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(cases); ci++) {
        const attn_case *c = &cases[ci];
        const int D = c->D;
        const int64_t T = c->P + c->Nk, n = c->Nq * c->Hq * D;
        float *in[5];
        const int64_t rows[5] = {c->Nq, c->Nk, c->Nk, c->P, c->P};
        for (int i = 0; i < 5; i++) {
            const int64_t m = rows[i] * (i ? c->Hkv : c->Hq) * D;
            in[i] = malloc(sizeof(float) * (size_t)(m ? m : 1));
            tu_fill_normal(&g_rng, in[i], (size_t)m, 1.0f);
        }
        int32_t *vis = NULL, *vis_lo = NULL;
        if (c->vis == AV_BLOCK || c->vis == AV_RANDOM) {
            vis = malloc(sizeof(int32_t) * (size_t)c->Nq);
            for (int64_t i = 0; i < c->Nq; i++)
                vis[i] = c->vis == AV_BLOCK ? (int32_t)CQ_MIN(T, c->P + (i / 16 + 1) * 16)
                                            : (int32_t)(tu_rng_u64(&g_rng) % (uint64_t)(T + 4)) - 1; /* -1 .. T + 2 */
        }
        if (c->vis == AV_WINDOWS) { /* windows of 64 rows (the vision tower's inner ones) and ragged ones */
            static const int lens[] = {64, 7, 64, 23, 50, 64, 13, 41};
            vis = malloc(sizeof(int32_t) * (size_t)c->Nq);
            vis_lo = malloc(sizeof(int32_t) * (size_t)c->Nq);
            for (int64_t i = 0, w = 0; i < c->Nq; w++) {
                const int64_t e = CQ_MIN(c->Nq, i + lens[w % CQ_ARRAY_LEN(lens)]);
                for (int64_t r = i; r < e; r++) {
                    vis_lo[r] = (int32_t)(i * T / c->Nq);
                    vis[r] = (int32_t)(e * T / c->Nq);
                }
                i = e;
            }
        }
        float *ref = malloc(sizeof(float) * (size_t)n), *got[NK];
        attn_on2(g_ref, c, in, vis, vis_lo, ref);
        double scale = 0, vmax = 0;
        for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
        for (int64_t i = 0; i < c->Nk * c->Hkv * D; i++) vmax = fmax(vmax, fabs(in[2][i]));
        for (int64_t i = 0; i < c->P * c->Hkv * D; i++) vmax = fmax(vmax, fabs(in[4][i]));
        const double ulp = c->dt == CQ_DTYPE_BF16 ? 1.0 / 128 : c->dt == CQ_DTYPE_F16 ? 1.0 / 1024 : 0.0;
        for (int k = 0; k < NK; k++) {
            got[k] = malloc(sizeof(float) * (size_t)n);
            attn_on2(be[k], c, in, vis, vis_lo, got[k]);
            double worst = 0, worst_flash = 0;
            for (int64_t i = 0; i < n; i++) {
                const double d = fabs((double)got[k][i] - ref[i]);
                const double lim = 1.5e-2 * scale + (1.0 / 128 + ulp) * fabs(ref[i]);
                if (!(d <= lim))
                    fail_msg("case %zu (%s, Nq %lld, D %d) on %s: output %lld = %.7g, reference %.7g (limit %.3g)", ci,
                             cq_dtype_name(c->dt), (long long)c->Nq, D, kinds[k], (long long)i, got[k][i], ref[i],
                             lim);
                worst = fmax(worst, d / lim);
                if (k > 0 && k <= WGMMA) {
                    /* the wgmma kernel walks keys 128 at a time, flash128 64 at a time: each rounds P to bf16
                     * against a different running max, so each probability may differ by 2 bf16 roundings
                     * (2^-8 relative) and the output by 2^-8 of max|V| */
                    const double e = fabs((double)got[k][i] - got[0][i]),
                                 el = (k == WGMMA ? 0x1p-8 * vmax : 1e-4 * scale) + ulp * fabs(got[0][i]);
                    if (!(e <= el))
                        fail_msg("case %zu (%s, Nq %lld, D %d): %s output %lld = %.7g, flash128 %.7g (limit %.3g)",
                                 ci, cq_dtype_name(c->dt), (long long)c->Nq, D, kinds[k], (long long)i, got[k][i],
                                 got[0][i], el);
                    worst_flash = fmax(worst_flash, e / el);
                }
            }
            print_message("attention case %zu (%s, Nq %lld, D %d) on %s: worst error/limit %.3f vs the reference%s",
                          ci, cq_dtype_name(c->dt), (long long)c->Nq, D, kinds[k], worst,
                          k > 0 && k <= WGMMA ? "" : "\n");
            if (k > 0 && k <= WGMMA) print_message(", %.3f vs flash128\n", worst_flash);
        }
        for (int k = 0; k < NK; k++) free(got[k]);
        for (int i = 0; i < 5; i++) free(in[i]);
        free(ref);
        free(vis);
        free(vis_lo);
    }
    for (int k = 0; k < NK; k++) cq_backend_free(be[k]);
}

/* Heads wider than the flash kernels take go through GEMMs (cq_cuda_attention_gemm), in bands of queries whose
 * scores fit 128 MiB: with 16400 keys a band is 2046 queries, so 2100 queries take two, and the shared kv head is
 * staged once for both q heads. Checked against the generic kernel (f32 throughout, one key at a time) with the
 * bound the flash kernels meet against the reference: the GEMM path rounds Q, K, V and P to f16. */
static void test_attention_wide_bands(void **state) {
    (void)state;
    const attn_case c = {CQ_DTYPE_F32, 2100, 18, 16382, 2, 1, AV_ALL, 0.0f, 384};
    cq_backend *gen;
    cq_cuda_opts generic = env_opts();
    generic.attn = CQ_CUDA_ATTN_GENERIC;
    cq_status st = cq_backend_cuda_open(-1, &generic, &gen);
    assert_int_equal(st, CQ_OK);
    float *in[5];
    const int64_t rows[5] = {c.Nq, c.Nk, c.Nk, c.P, c.P}, n = c.Nq * c.Hq * c.D;
    for (int i = 0; i < 5; i++) {
        const int64_t m = rows[i] * (i ? c.Hkv : c.Hq) * c.D;
        in[i] = malloc(sizeof(float) * (size_t)m);
        tu_fill_normal(&g_rng, in[i], (size_t)m, 1.0f);
    }
    float *ref = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    attn_on(gen, &c, in, NULL, ref);
    attn_on(g_be, &c, in, NULL, got);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]), lim = 1.5e-2 * scale + (1.0 / 128) * fabs(ref[i]);
        if (!(d <= lim))
            fail_msg("wide attention, output %lld (query %lld) = %.7g, generic kernel %.7g (limit %.3g)", (long long)i,
                     (long long)(i / (c.Hq * c.D)), got[i], ref[i], lim);
        worst = fmax(worst, d / lim);
    }
    print_message("wide attention (head_dim %d, %lld queries, %lld keys, two bands): worst error/limit %.3f against "
                  "the generic kernel\n", c.D, (long long)c.Nq, (long long)(c.P + c.Nk), worst);
    for (int i = 0; i < 5; i++) free(in[i]);
    free(ref);
    free(got);
    cq_backend_free(gen);
}

/* ---- the video VAE and vocoder convolutions: weight modes and GEMM paths ---------------------------------- */
/* One convolution on `be` with its kernel (codec wdt, host values w) bound in `mode` (or uploaded as an f32
 * activation when mode < 0); which: 0 conv3d 3x3x3 causal, 1 conv1d one group (a GEMM), 2 conv1d depthwise,
 * 3 conv_transpose1d. x and the output are f32. */
enum { LC_CONV3D, LC_CONV1D, LC_DEPTHWISE, LC_CONVT, LC_COUNT };
typedef struct ltx_conv {
    int64_t xr, xc, wr, wc, yr, yc;
} ltx_conv;
static const ltx_conv k_lc[LC_COUNT] = {
    {3 * 6 * 7, 32, 48, 32 * 27, 3 * 6 * 7, 48}, /* T 3, 6 x 7, 32 -> 48 channels */
    {200, 64, 96, 64 * 5, 200, 96},              /* L 200, k 5, dilation 3, pad 6 */
    {150, 32, 32, 12, 75, 32},                   /* k 12, stride 2, pad (5, 6) */
    {30, 64, 64, 32 * 16, 30 * 8, 32},           /* 64 -> 32 channels, k 16, stride 8, crop 4 */
};

static void ltx_conv_on(cq_backend *be, int which, int mode, cq_dtype wdt, const uint8_t *wp, uint64_t wn,
                        const float *w, const float *x, const float *bias, float *out) {
    const ltx_conv *q = &k_lc[which];
    cq_tensor tx, tw, tb, ty;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, q->xr, q->xc, &tx), CQ_OK);
    assert_int_equal(cq_tensor_upload(&tx, x, sizeof(float) * (size_t)(q->xr * q->xc)), CQ_OK);
    if (mode < 0) {
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, q->wr, q->wc, &tw), CQ_OK);
        assert_int_equal(cq_tensor_upload(&tw, w, sizeof(float) * (size_t)(q->wr * q->wc)), CQ_OK);
    } else {
        assert_int_equal(cq_backend_set_weight_mode(be, (cq_weight_mode)mode), CQ_OK);
        uint64_t shape[2] = {(uint64_t)q->wr, (uint64_t)q->wc};
        cq_tensor_view v = view_of(wdt, 2, shape, wp, wn);
        assert_int_equal(cq_tensor_bind_weight(be, &v, &tw), CQ_OK);
    }
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, 1, q->yc, &tb), CQ_OK);
    assert_int_equal(cq_tensor_upload(&tb, bias, sizeof(float) * (size_t)q->yc), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, q->yr, q->yc, &ty), CQ_OK);
    cq_status s;
    if (which == LC_CONV3D) {
        cq_conv3d_args a = {.y = &ty, .x = &tx, .w = &tw, .bias = &tb, .T = 3, .H = 6, .W = 7, .kt = 3, .kh = 3,
                            .kw = 3, .stride_t = 1, .stride_y = 1, .stride_x = 1, .pad_front = 2, .pad_l = 1,
                            .pad_r = 1, .pad_t = 1, .pad_b = 1};
        s = cq_op_conv3d(be, &a);
    } else {
        cq_conv1d_args a = {.y = &ty, .x = &tx, .w = &tw, .bias = &tb, .k = 5, .stride = 1, .dilation = 3,
                            .groups = 1, .pad_l = 6, .pad_r = 6};
        if (which == LC_DEPTHWISE)
            a.k = 12, a.stride = 2, a.dilation = 1, a.groups = 32, a.pad_l = 5, a.pad_r = 6, a.mode = CQ_PAD_REPLICATE;
        if (which == LC_CONVT) a.k = 16, a.stride = 8, a.dilation = 1, a.pad_l = 4, a.pad_r = 4;
        s = which == LC_CONVT ? cq_op_conv_transpose1d(be, &a) : cq_op_conv1d(be, &a);
    }
    if (s == CQ_OK) s = cq_tensor_download(&ty, out, sizeof(float) * (size_t)(q->yr * q->yc));
    if (s != CQ_OK) fail_msg("ltx conv %d (mode %d) on %s: %s", which, mode, cq_backend_name(be), cq_last_error());
    cq_tensor *ts[] = {&tx, &tw, &tb, &ty};
    for (size_t i = 0; i < 4; i++) cq_tensor_free(ts[i]);
    if (mode >= 0) assert_int_equal(cq_backend_set_weight_mode(be, CQ_WEIGHTS_DEFAULT), CQ_OK);
}

/* conv3d, conv1d and conv_transpose1d read a kernel kept COMPACT or STREAMED through the very plane PLANES binds,
 * so their outputs are the PLANES ones bit for bit (q8_2f and q4tp kernels); each is within the f16 bound of the
 * reference (test_ops' 2.5e-3 of max|ref| plus 1/1024 of the value), and the CUDA-core GEMM (CORTIQ_CUDA_GEMM=simt)
 * gives the cuBLASLt result to the f32 summation order. */
static void test_ltx_convs(void **state) {
    (void)state;
    static const cq_dtype codecs[] = {CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4TP};
    cq_cuda_opts so = env_opts();
    so.gemm = CQ_CUDA_GEMM_SIMT;
    cq_backend *simt = NULL;
    assert_int_equal(cq_backend_cuda_open(-1, &so, &simt), CQ_OK);
    for (int which = 0; which < LC_COUNT; which++)
        for (size_t ci = 0; ci < CQ_ARRAY_LEN(codecs); ci++) {
            const ltx_conv *q = &k_lc[which];
            /* q4tp needs whole groups of 32 columns: the depthwise kernel takes bf16 instead */
            const cq_dtype codec = codecs[ci] == CQ_DTYPE_Q4TP && q->wc % 32 ? CQ_DTYPE_BF16 : codecs[ci];
            const size_t nx = (size_t)(q->xr * q->xc), nw = (size_t)(q->wr * q->wc), ny = (size_t)(q->yr * q->yc);
            float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), *b = malloc(sizeof(float) * (size_t)q->yc);
            tu_fill_normal(&g_rng, x, nx, 1.0f);
            tu_fill_normal(&g_rng, b, (size_t)q->yc, 0.5f);
            uint64_t shape[2] = {(uint64_t)q->wr, (uint64_t)q->wc}, nb;
            uint8_t *wp = encode_random(codec, 2, shape, &nb, 1.0f / sqrtf((float)q->wc));
            /* the values the codec holds, as an f32 activation for the reference */
            assert_int_equal(cq_codec_dequant_rows(codec, 2, shape, wp, nb, 0, shape[0], w), CQ_OK);
            float *ref = malloc(sizeof(float) * ny), *got[4];
            ltx_conv_on(g_ref, which, -1, codec, wp, nb, w, x, b, ref);
            for (int m = 0; m < 3; m++) {
                got[m] = malloc(sizeof(float) * ny);
                ltx_conv_on(g_be, which, m == 0 ? CQ_WEIGHTS_PLANES : m == 1 ? CQ_WEIGHTS_COMPACT : CQ_WEIGHTS_STREAMED,
                            codec, wp, nb, w, x, b, got[m]);
            }
            got[3] = malloc(sizeof(float) * ny);
            ltx_conv_on(simt, which, CQ_WEIGHTS_PLANES, codec, wp, nb, w, x, b, got[3]);
            double scale = 0;
            for (size_t i = 0; i < ny; i++) scale = fmax(scale, fabs(ref[i]));
            for (size_t i = 0; i < ny; i++) {
                if (memcmp(&got[1][i], &got[0][i], 4) || memcmp(&got[2][i], &got[0][i], 4))
                    fail_msg("ltx conv %d %s output %zu: planes %.9g, compact %.9g, streamed %.9g", which,
                             cq_dtype_name(codec), i, got[0][i], got[1][i], got[2][i]);
                double lim = 2.5e-3 * scale + fabs(ref[i]) / 1024;
                if (!(fabs(got[0][i] - ref[i]) <= lim))
                    fail_msg("ltx conv %d %s output %zu: %.9g, reference %.9g", which, cq_dtype_name(codec), i,
                             got[0][i], ref[i]);
                if (!(fabs(got[3][i] - got[0][i]) <= 1e-5 * scale))
                    fail_msg("ltx conv %d %s output %zu: CUDA-core GEMM %.9g, default %.9g", which,
                             cq_dtype_name(codec), i, got[3][i], got[0][i]);
            }
            for (int m = 0; m < 4; m++) free(got[m]);
            free(ref);
            free(x);
            free(w);
            free(b);
            free(wp);
        }
    cq_backend_free(simt);
}

static int setup(void **state) {
    (void)state;
    tu_rng_seed(&g_rng, 20261201);
    cq_cuda_opts o = env_opts();
    if (cq_backend_cuda_open(-1, &o, &g_be) != CQ_OK) return -1;
    if (cq_backend_ref_create(&g_ref) != CQ_OK) return -1;
    printf("cuda backend tests on %s\n", cq_backend_name(g_be));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    cq_backend_free(g_be);
    cq_backend_free(g_ref);
    return 0;
}

int main(void) {
    cq_backend *probe = NULL;
    cq_status s = cq_backend_cuda_create(-1, &probe);
    if (s != CQ_OK) {
        printf("test_cuda_backend: skipped: %s\n", cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? 77 : 1;
    }
    cq_backend_free(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_bitexact),
        cmocka_unit_test(test_plane_bitexact),
        cmocka_unit_test(test_weight_readback),
        cmocka_unit_test(test_upload_ring),
        cmocka_unit_test(test_f16_range_guard),
        cmocka_unit_test(test_gemm_tuning),
        cmocka_unit_test(test_staged_input_reuse),
        cmocka_unit_test(test_side_copies),
        cmocka_unit_test(test_deferred_errors),
        cmocka_unit_test(test_steady_state_allocates_nothing),
        cmocka_unit_test(test_fallbacks_agree),
        cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_attention_wide_bands),
        cmocka_unit_test(test_ltx_convs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
