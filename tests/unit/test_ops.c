/*
 * test_ops.c — the generic op test: every op x weight codec x activation
 * dtype x awkward shape, on every CPU ISA variant this machine runs (always
 * generic), compared against the reference backend (ref.c).
 *
 * How a case runs (run_case): inputs are random host values encoded once
 * (weights through the codec's normative encoder, so the reference and the
 * backend use the very same quantized bytes and tolerances stay tight),
 * uploaded to each backend, the op runs, and the output comes back from a
 * buffer with guard elements on both sides (filled with a NaN byte pattern;
 * untouched guards prove no out-of-bounds write, NaN inside the output
 * proves every element was written). Every output value must be finite and
 * within |got - ref| <= abs * max|ref| + (rel + ulp(dtype)) * |ref|, with
 * (abs, rel) stated per op below. A backend that does not support a
 * combination must say so with CQ_ERR_UNSUPPORTED (checked too).
 *
 * CQ_TEST_OPS_BIG=1 runs the full cartesian sweep with larger shapes;
 * CQ_TEST_OPS_TILES=1 adds matmuls with many output tiles per block of a
 * persistent GPU GEMM (test_ops_gpu_wgmma);
 * CQ_TEST_OPS_FILTER=<cmocka pattern> runs only the matching tests;
 * CQ_TEST_OPS_THREADS=N gives every backend N threads (1 under qemu-user,
 * whose threads hang on some hosts).
 * CQ_TEST_OPS_BACKEND=cuda runs the same cases on the CUDA backend instead of
 * the CPU ISAs (ctest's test_ops_gpu, label gpu), =vulkan on the Vulkan
 * backend (test_ops_vulkan, label unit: lavapipe runs it anywhere); without
 * the backend or a device it exits 77 (skipped). Ops a backend feeds through f16/bf16 tensor cores
 * (cq_backend_op_precision) are held to tolerances derived from that
 * rounding of their inputs instead of the f32 ones below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/env.h"
#include "codec/codec.h"
#include "ops/ops.h"
#include "testutil.h"

/* ---- tolerances per op (abs is relative to max|ref| of the output) ---------- */
static const double TOL_MATMUL_ABS = 2e-6, TOL_MATMUL_REL = 1e-5;
static const double TOL_ATTN_ABS = 2e-6, TOL_ATTN_REL = 1e-5;
static const double TOL_NORM_ABS = 1e-6, TOL_NORM_REL = 4e-6;
static const double TOL_ROPE_ABS = 1e-6, TOL_ROPE_REL = 4e-6;
static const double TOL_ELT_ABS = 1e-7, TOL_ELT_REL = 2e-6; /* float libm vs double */
static const double TOL_SOFTMAX_ABS = 1e-6, TOL_SOFTMAX_REL = 4e-6;
static const double TOL_EXACT = 0.0;                          /* data movement */
/* Operands rounded to bf16 (2^-9 relative each): a K-term dot product of
 * unit-scale inputs errs by about 2e-3 of the output's RMS, its largest
 * element over thousands of outputs by about 4x that; attention adds the
 * rounding of P. f16 (2^-12) is 8x tighter. A wrong semantic errs by O(1)
 * of max|ref|. */
static const double TOL_BF16_DOT_ABS = 1.5e-2, TOL_BF16_DOT_REL = 1.0 / 128;
static const double TOL_F16_DOT_ABS = 2.5e-3, TOL_F16_DOT_REL = 1.0 / 1024;
static const double TOL_BF16_ROUND_REL = 1.0 / 256, TOL_F16_ROUND_REL = 1.0 / 1024; /* one rounding of a value */
enum { SKIP = 77 };                                 /* ctest's SKIP_RETURN_CODE for the gpu label */

enum { MAX_IN = 8, MAX_BE = 6, GUARD = 24 };

typedef enum { IN_NONE = 0, IN_ACT, IN_WEIGHT, IN_I32 } in_kind;

typedef struct tin {
    in_kind kind;
    cq_dtype dt;
    int ndim;
    int64_t shape[4];
    float *v;         /* IN_ACT / IN_WEIGHT values (IN_WEIGHT: encoded into w) */
    int32_t *iv;      /* IN_I32 */
    uint8_t *w;       /* encoded weight payload */
    uint64_t wlen;
} tin;

struct tcase;
typedef cq_status (*run_fn)(cq_backend *be, cq_tensor *out, cq_tensor **in, const struct tcase *c);

typedef struct tcase {
    char label[160];
    cq_op op;
    cq_dtype wdt, xdt; /* what supports() is asked */
    int nin;
    tin in[MAX_IN];
    cq_dtype odt;
    int ondim;
    int64_t oshape[4];
    float *oinit; /* initial output (accumulate / in place); NULL: NaN-filled */
    double tol_abs, tol_rel;
    run_fn run;
    /* op parameters */
    int ip[20];
    float fp[4];
} tcase;

static struct {
    cq_backend *ref;
    cq_backend *be[MAX_BE];
    int nbe;
    tu_rng rng;
    bool big;
    bool tiles;
    /* CQ_TEST_OPS_HALF_SUBSET (ctest's Vulkan runs on lavapipe): the matmul and attention sweeps run every
     * shape on f32 activations but only a rotating subset on f16 and bf16 -- on a backend whose 16-bit paths
     * are the f32 kernels with other loads and stores (Vulkan), all shapes times three dtypes is CI time that
     * buys no coverage. half_seq rotates the subset so f16 and bf16 take different shapes. */
    int half_subset; /* keep one 16-bit case in this many (0 or 1: all) */
    unsigned long half_seq;
    long cases, compared, unsupported;
    double worst; /* worst error / limit ratio seen */
    char worst_label[200];
} g;

/* ---- host <-> dtype bytes ---------------------------------------------------------- */
static size_t esz(cq_dtype dt) { return cq_act_dtype_size(dt); }

static void encode(cq_dtype dt, const float *v, int64_t n, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        if (dt == CQ_DTYPE_F32) memcpy(out + 4 * i, &v[i], 4);
        else if (dt == CQ_DTYPE_F16) cq_wr16(out + 2 * i, cq_f32_to_f16(v[i]));
        else cq_wr16(out + 2 * i, cq_f32_to_bf16(v[i]));
    }
}

static float decode1(cq_dtype dt, const uint8_t *p) {
    if (dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_I32) {
        float f;
        if (dt == CQ_DTYPE_I32) {
            int32_t i;
            memcpy(&i, p, 4);
            return (float)i;
        }
        memcpy(&f, p, 4);
        return f;
    }
    return dt == CQ_DTYPE_F16 ? cq_f16_to_f32(cq_rd16(p)) : cq_bf16_to_f32(cq_rd16(p));
}

/* NaN byte patterns for guards and unwritten outputs. */
static void fill_sentinel(cq_dtype dt, uint8_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (esz(dt) == 4) cq_wr32(p + 4 * i, 0x7fa5a5a5u);
        else cq_wr16(p + 2 * i, dt == CQ_DTYPE_F16 ? 0x7ea5 : 0x7fa5);
    }
}

static double ulp_rel(cq_dtype dt) {
    return dt == CQ_DTYPE_F16 ? 1.0 / 1024 : dt == CQ_DTYPE_BF16 ? 1.0 / 128 : 0.0;
}

static int64_t prod(int ndim, const int64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= s[i];
    return n;
}

/* ---- building cases ------------------------------------------------------------------ */
static float *rnd(int64_t n, float scale) {
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    tu_fill_normal(&g.rng, v, (size_t)n, scale);
    return v;
}

static void tc_init(tcase *c, cq_op op, cq_dtype xdt, run_fn run, const char *fmt, ...) CQ_PRINTF(5, 6);
static void tc_init(tcase *c, cq_op op, cq_dtype xdt, run_fn run, const char *fmt, ...) {
    memset(c, 0, sizeof *c);
    c->op = op;
    c->wdt = CQ_DTYPE_COUNT;
    c->xdt = xdt;
    c->odt = xdt;
    c->run = run;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
}

static tin *tc_act(tcase *c, int slot, cq_dtype dt, int64_t rows, int64_t cols, float scale) {
    tin *t = &c->in[slot];
    t->kind = IN_ACT;
    t->dt = dt;
    t->ndim = 2;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->v = rnd(rows * cols, scale);
    if (slot >= c->nin) c->nin = slot + 1;
    return t;
}

static void tc_vec(tcase *c, int slot, int64_t n, float scale, float offset) {
    tin *t = tc_act(c, slot, CQ_DTYPE_F32, 1, n, scale);
    t->ndim = 1;
    t->shape[0] = n;
    for (int64_t i = 0; i < n; i++) t->v[i] += offset;
}

/* Encode a weight with the codec's encoder; false when the codec cannot hold
 * this shape (e.g. q4tp needs cols % 32 == 0). */
static bool tc_weight(tcase *c, int slot, cq_dtype dt, int ndim, const int64_t *shape, float scale) {
    uint64_t us[4];
    for (int i = 0; i < ndim; i++) us[i] = (uint64_t)shape[i];
    uint64_t nb;
    if (!cq_codec_can_encode(dt) || cq_codec_nbytes(dt, ndim, us, &nb) != CQ_OK) {
        cq_clear_error();
        return false;
    }
    tin *t = &c->in[slot];
    t->kind = IN_WEIGHT;
    t->dt = dt;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = prod(ndim, shape);
    t->v = rnd(n, scale);
    /* Give rows different magnitudes so per-row scales matter. */
    int64_t cols = n / shape[0];
    for (int64_t r = 0; r < shape[0]; r++)
        for (int64_t k = 0; k < cols; k++) t->v[r * cols + k] *= 0.25f + (float)(r % 7) * 0.25f;
    t->w = malloc(nb ? nb : 1);
    t->wlen = nb;
    if (cq_codec_quantize(dt, ndim, us, t->v, t->w, nb) != CQ_OK) {
        cq_clear_error();
        free(t->w);
        free(t->v);
        memset(t, 0, sizeof *t);
        return false;
    }
    if (slot >= c->nin) c->nin = slot + 1;
    return true;
}

static void tc_i32(tcase *c, int slot, int64_t n, const int32_t *vals) {
    tin *t = &c->in[slot];
    t->kind = IN_I32;
    t->dt = CQ_DTYPE_I32;
    t->ndim = 1;
    t->shape[0] = n;
    t->iv = malloc(sizeof(int32_t) * (size_t)n);
    memcpy(t->iv, vals, sizeof(int32_t) * (size_t)n);
    if (slot >= c->nin) c->nin = slot + 1;
}

static void tc_out(tcase *c, cq_dtype dt, int64_t rows, int64_t cols) {
    c->odt = dt;
    c->ondim = 2;
    c->oshape[0] = rows;
    c->oshape[1] = cols;
}

static void tc_free(tcase *c) {
    for (int i = 0; i < c->nin; i++) {
        free(c->in[i].v);
        free(c->in[i].iv);
        free(c->in[i].w);
    }
    free(c->oinit);
}

/* ---- running a case on one backend ------------------------------------------------------ */
/* Returns the status; on CQ_OK *out receives the output values (malloc'd). */
static cq_status run_on(cq_backend *be, const tcase *c, float **out) {
    cq_tensor ts[MAX_IN], buf, ov;
    cq_tensor *tp[MAX_IN];
    memset(ts, 0, sizeof ts);
    memset(&buf, 0, sizeof buf);
    *out = NULL;
    cq_status st = CQ_OK;
    for (int i = 0; i < c->nin && st == CQ_OK; i++) {
        const tin *t = &c->in[i];
        tp[i] = NULL;
        if (t->kind == IN_NONE) continue;
        if (t->kind == IN_WEIGHT) {
            cq_tensor_view v;
            memset(&v, 0, sizeof v);
            v.name = "test.weight";
            v.dtype = t->dt;
            v.ndim = t->ndim;
            v.nelem = 1;
            for (int d = 0; d < t->ndim; d++) {
                v.shape[d] = (uint64_t)t->shape[d];
                v.nelem *= v.shape[d];
            }
            v.data = t->w;
            v.nbytes = t->wlen;
            st = cq_tensor_bind_weight(be, &v, &ts[i]);
        } else {
            st = cq_tensor_alloc(be, t->dt, t->ndim, t->shape, &ts[i]);
            if (st == CQ_OK) {
                int64_t n = prod(t->ndim, t->shape);
                if (t->kind == IN_I32) {
                    st = cq_tensor_upload(&ts[i], t->iv, (size_t)n * 4);
                } else {
                    uint8_t *b = malloc((size_t)n * esz(t->dt));
                    encode(t->dt, t->v, n, b);
                    st = cq_tensor_upload(&ts[i], b, (size_t)n * esz(t->dt));
                    free(b);
                }
            }
        }
        tp[i] = &ts[i];
    }
    assert_int_equal(st, CQ_OK);
    /* The output lives inside a larger buffer: GUARD elements either side. */
    int64_t n = prod(c->ondim, c->oshape), total = n + 2 * GUARD;
    size_t es = esz(c->odt);
    uint8_t *host = malloc((size_t)total * es);
    fill_sentinel(c->odt, host, total);
    if (c->oinit) encode(c->odt, c->oinit, n, host + GUARD * es);
    assert_int_equal(cq_tensor_alloc(be, c->odt, 1, &total, &buf), CQ_OK);
    assert_int_equal(cq_tensor_upload(&buf, host, (size_t)total * es), CQ_OK);
    if (cq_tensor_subview(&buf, GUARD, c->ondim, c->oshape, &ov) != CQ_OK)
        fail_msg("%s: the output view: %s", c->label, cq_last_error());
    st = c->run(be, &ov, tp, c);
    if (st == CQ_OK) st = cq_backend_sync(be);
    if (st == CQ_OK) {
        uint8_t *back = malloc((size_t)total * es);
        assert_int_equal(cq_tensor_download(&buf, back, (size_t)total * es), CQ_OK);
        for (int64_t i = 0; i < GUARD; i++) {
            if (memcmp(back + i * es, host + i * es, es) || memcmp(back + (GUARD + n + i) * es, host + (GUARD + n + i) * es, es))
                fail_msg("%s on %s: write outside the output (guard element %lld %s)", c->label, cq_backend_name(be),
                         (long long)i, memcmp(back + i * es, host + i * es, es) ? "before" : "after");
        }
        float *o = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) o[i] = decode1(c->odt, back + (GUARD + i) * es);
        *out = o;
        free(back);
    }
    free(host);
    cq_tensor_free(&buf);
    for (int i = 0; i < c->nin; i++) cq_tensor_free(&ts[i]);
    return st;
}

/* The case's tolerances, widened for a backend that rounds this op's inputs to bf16. */
static void tolerances(const tcase *c, cq_backend *be, double *tabs, double *trel) {
    *tabs = c->tol_abs;
    *trel = c->tol_rel;
    cq_dtype p = cq_backend_op_precision(be, c->op, c->wdt);
    if (p != CQ_DTYPE_BF16 && p != CQ_DTYPE_F16) return;
    bool bf = p == CQ_DTYPE_BF16;
    if (c->op == CQ_OP_MATMUL || c->op == CQ_OP_ATTENTION || c->op == CQ_OP_CONV2D || c->op == CQ_OP_CONV3D ||
        c->op == CQ_OP_CONV1D || c->op == CQ_OP_CONV_TRANSPOSE1D) {
        *tabs = fmax(*tabs, bf ? TOL_BF16_DOT_ABS : TOL_F16_DOT_ABS);
        *trel = fmax(*trel, bf ? TOL_BF16_DOT_REL : TOL_F16_DOT_REL);
    } else {
        *trel = fmax(*trel, bf ? TOL_BF16_ROUND_REL : TOL_F16_ROUND_REL);
    }
}

static void compare(const tcase *c, cq_backend *be, const float *ref, const float *got) {
    int64_t n = prod(c->ondim, c->oshape);
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i])) fail_msg("%s: reference output %lld is not finite (%g)", c->label, (long long)i, ref[i]);
        scale = fmax(scale, fabs(ref[i]));
    }
    double tol_abs, tol_rel;
    tolerances(c, be, &tol_abs, &tol_rel);
    double rel = tol_rel + ulp_rel(c->odt);
    double tiny = c->odt == CQ_DTYPE_F16 ? 6e-8 : 1e-37; /* f16 subnormal spacing */
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            fail_msg("%s on %s: output %lld is %g (NaN: element never written?)", c->label, cq_backend_name(be),
                     (long long)i, got[i]);
        double d = fabs((double)got[i] - ref[i]), lim = tol_abs * scale + rel * fabs(ref[i]) + tiny;
        if (d > lim)
            fail_msg("%s on %s: output %lld = %.9g, reference %.9g (|diff| %.3g > limit %.3g; max|ref| %.3g)", c->label,
                     cq_backend_name(be), (long long)i, got[i], ref[i], d, lim, scale);
        if (lim > 0 && d / lim > g.worst) {
            g.worst = d / lim;
            snprintf(g.worst_label, sizeof g.worst_label, "%s on %s", c->label, cq_backend_name(be));
        }
    }
    g.compared++;
}

static void run_case(tcase *c) {
    float *ref = NULL;
    cq_status st = run_on(g.ref, c, &ref);
    if (st != CQ_OK) fail_msg("%s: reference failed: %s: %s", c->label, cq_status_str(st), cq_last_error());
    for (int b = 0; b < g.nbe; b++) {
        float *got = NULL;
        bool sup = cq_backend_supports(g.be[b], c->op, c->wdt, c->xdt);
        st = run_on(g.be[b], c, &got);
        if (!sup) {
            if (st != CQ_ERR_UNSUPPORTED)
                fail_msg("%s on %s: supports() says no but the op returned %s", c->label, cq_backend_name(g.be[b]),
                         cq_status_str(st));
            g.unsupported++;
            continue;
        }
        if (st != CQ_OK)
            fail_msg("%s on %s: %s: %s", c->label, cq_backend_name(g.be[b]), cq_status_str(st), cq_last_error());
        compare(c, g.be[b], ref, got);
        free(got);
    }
    free(ref);
    g.cases++;
    tc_free(c);
}

static cq_tensor *IN(cq_tensor **in, const tcase *c, int i) { return i < c->nin ? in[i] : NULL; }

/* ---- shared lists ------------------------------------------------------------------------- */
static const cq_dtype k_codecs[] = {CQ_DTYPE_F32,    CQ_DTYPE_F16,      CQ_DTYPE_BF16,     CQ_DTYPE_Q8_ROW,
                                    CQ_DTYPE_Q8_2F,  CQ_DTYPE_Q4_BLOCK, CQ_DTYPE_Q4_TILED, CQ_DTYPE_Q4TP};
static const cq_dtype k_acts[] = {CQ_DTYPE_F32, CQ_DTYPE_F16, CQ_DTYPE_BF16};
static bool per_row_codec(cq_dtype dt) {
    return dt == CQ_DTYPE_Q8_ROW || dt == CQ_DTYPE_Q8_2F || dt == CQ_DTYPE_Q4TP;
}

/* ---- matmul ----------------------------------------------------------------------------------- */
enum { MM_PLAIN, MM_BIAS_SCALE, MM_GELU, MM_SILU, MM_SWIGLU, MM_SWIGLU_FUSED, MM_ACC_GATE, MM_ACC_GELU, MM_ACT_W,
       MM_VARIANTS };
static const char *const k_mm_names[] = {"plain", "bias+scale", "gelu+bias", "silu", "swiglu", "swiglu-fused",
                                         "acc+gate", "acc+gelu", "w-activation"};

static cq_status run_matmul(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    cq_matmul_args a = {.y = out, .x = IN(in, c, 0), .w = IN(in, c, 1), .w2 = IN(in, c, 2), .bias = IN(in, c, 3),
                        .bias2 = IN(in, c, 4), .gate = IN(in, c, 5), .scale = c->fp[0], .act = (cq_act)c->ip[0],
                        .accumulate = c->ip[1] != 0};
    return cq_op_matmul(be, &a);
}

/* Whether a case of a 16-bit activation dtype is left out by CQ_TEST_OPS_HALF_SUBSET (every f32 case runs). */
static bool half_skipped(cq_dtype xdt, int keep_one_in) {
    if (xdt == CQ_DTYPE_F32 || g.half_subset <= 1) return false;
    return g.half_seq++ % (unsigned long)keep_one_in != 0;
}

static void matmul_case(cq_dtype wdt, cq_dtype xdt, cq_dtype ydt, int64_t M, int64_t K, int64_t N, int variant) {
    if (half_skipped(xdt, g.half_subset > 1 ? 2 : 1)) return; /* matmul: half the 16-bit shapes */
    tcase c;
    tc_init(&c, CQ_OP_MATMUL, xdt, run_matmul, "matmul %s w=%s x=%s y=%s M=%lld K=%lld N=%lld", k_mm_names[variant],
            cq_dtype_name(wdt), cq_dtype_name(xdt), cq_dtype_name(ydt), (long long)M, (long long)K, (long long)N);
    c.wdt = wdt;
    c.tol_abs = TOL_MATMUL_ABS;
    c.tol_rel = TOL_MATMUL_REL;
    c.fp[0] = 1.0f;
    tc_act(&c, 0, xdt, M, K, 1.0f);
    float ws = 1.0f / sqrtf((float)K);
    int64_t wshape[2] = {variant == MM_SWIGLU_FUSED ? 2 * N : N, K};
    if (variant == MM_ACT_W) {
        if (wdt != CQ_DTYPE_F32 && wdt != CQ_DTYPE_F16 && wdt != CQ_DTYPE_BF16) {
            tc_free(&c);
            return;
        }
        tc_act(&c, 1, wdt, N, K, ws);
    } else if (!tc_weight(&c, 1, wdt, 2, wshape, ws)) {
        tc_free(&c);
        return;
    }
    switch (variant) {
    case MM_BIAS_SCALE:
        tc_vec(&c, 3, N, 1.0f, 0.0f);
        c.fp[0] = 0.5f;
        break;
    case MM_GELU:
        c.ip[0] = CQ_ACT_GELU_TANH;
        tc_vec(&c, 3, N, 0.5f, 0.0f);
        break;
    case MM_SILU: c.ip[0] = CQ_ACT_SILU; break;
    case MM_SWIGLU:
        c.ip[0] = CQ_ACT_SWIGLU;
        if (!tc_weight(&c, 2, wdt, 2, wshape, ws)) {
            tc_free(&c);
            return;
        }
        tc_vec(&c, 3, N, 0.5f, 0.0f);
        tc_vec(&c, 4, N, 0.5f, 0.0f);
        break;
    case MM_SWIGLU_FUSED:
        c.ip[0] = CQ_ACT_SWIGLU;
        tc_vec(&c, 3, 2 * N, 0.5f, 0.0f);
        break;
    case MM_ACC_GATE:
        c.ip[1] = 1;
        tc_vec(&c, 3, N, 0.5f, 0.0f);
        tc_vec(&c, 5, N, 1.0f, 0.0f);
        break;
    case MM_ACC_GELU:
        c.ip[0] = CQ_ACT_GELU_TANH;
        c.ip[1] = 1;
        break;
    default: break;
    }
    tc_out(&c, ydt, M, N);
    if (c.ip[1]) c.oinit = rnd(M * N, 1.0f);
    run_case(&c);
}

typedef struct mnk {
    int64_t M, K, N;
} mnk;

static void test_matmul(void **state) {
    (void)state;
    /* Awkward sizes: 1/3/17/63/65/257/1000 and non-multiples of every tile
     * (MR 4/6/8, NR 16/32, MC ~128, NC 128, KC 256); a few exercise several
     * M, N and K blocks and the tile narrowing of small problems. */
    static const mnk small[] = {{1, 1, 1},   {1, 32, 3},    {3, 17, 5},    {17, 64, 63},  {65, 96, 17},
                                {63, 33, 65}, {130, 160, 40}, {5, 1000, 3}, {2, 257, 257}, {9, 1024, 33},
                                {257, 288, 129}};
    static const mnk bigs[] = {{1, 3072, 257}, {300, 1000, 65}, {257, 1024, 300}, {1000, 64, 130}};
    size_t ns = CQ_ARRAY_LEN(small);
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t s = 0; s < ns; s++) {
            const mnk *p = &small[s];
            if (g.big) {
                for (int v = 0; v < MM_VARIANTS; v++) matmul_case(k_codecs[ci], CQ_DTYPE_F32, CQ_DTYPE_F32, p->M, p->K, p->N, v);
            } else {
                matmul_case(k_codecs[ci], CQ_DTYPE_F32, CQ_DTYPE_F32, p->M, p->K, p->N, MM_PLAIN);
                int v = 1 + (int)((s + ci) % (MM_VARIANTS - 1));
                matmul_case(k_codecs[ci], CQ_DTYPE_F32, CQ_DTYPE_F32, p->M, p->K, p->N, v);
            }
        }
    /* Half-precision activations (y in x's dtype or f32). */
    static const cq_dtype wsub[] = {CQ_DTYPE_F32, CQ_DTYPE_BF16, CQ_DTYPE_Q8_2F, CQ_DTYPE_Q4TP};
    for (size_t xi = 1; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t wi = 0; wi < CQ_ARRAY_LEN(wsub); wi++)
            for (size_t s = 2; s < 6; s++) {
                cq_dtype ydt = s % 2 ? CQ_DTYPE_F32 : k_acts[xi];
                matmul_case(wsub[wi], k_acts[xi], ydt, small[s].M, small[s].K, small[s].N, (int)((s + wi) % MM_VARIANTS));
            }
    /* bf16 activations with every codec: the bf16-pair path (VDPBF16PS and
     * the generic kit's plain-C twin) for bf16 / q8_row / q4 weights, the f32
     * path for the rest. The shapes cover several K blocks of the pair path
     * (512), an odd K (the last pair half empty), K % 32 != 0 (q4_block then
     * has no pair form), partial weight panels and several N groups. */
    static const mnk pairs[] = {{9, 1025, 40}, {33, 1056, 72}, {40, 1040, 70}, {70, 64, 33}};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t s = 0; s < CQ_ARRAY_LEN(pairs); s++)
            matmul_case(k_codecs[ci], CQ_DTYPE_BF16, s % 2 ? CQ_DTYPE_BF16 : CQ_DTYPE_F32, pairs[s].M, pairs[s].K,
                        pairs[s].N, (int)((s + ci) % MM_VARIANTS));
    /* Long rows of x: a device backend stages a row in registers up to 4096, 12288 and 16384 columns and reads
     * longer ones twice (k_convert.cu): one shape in each range past 4096, f32 and bf16 x. */
    static const mnk longs[] = {{3, 5000, 6}, {2, 13000, 5}, {2, 16500, 4}};
    for (size_t s = 0; s < CQ_ARRAY_LEN(longs); s++)
        for (size_t xi = 0; xi < 3; xi += 2)
            matmul_case(s % 2 ? CQ_DTYPE_Q8_2F : CQ_DTYPE_F32, k_acts[xi], CQ_DTYPE_F32, longs[s].M, longs[s].K,
                        longs[s].N, (int)((s + xi) % MM_VARIANTS));
    /* More output tiles than the device holds blocks at once, so each block of the persistent Hopper GEMM
     * (k_gemm90.cu) walks several and its two warpgroups take turns; its ring of stages wraps across tiles
     * (K = 192: 3 stages per tile) and inside them (K = 1000: 16). Every variant; f32 x and y, then bf16 x
     * with y in bf16 and f32. */
    static const mnk tiles[] = {{1500, 192, 4200}, {1100, 1000, 2300}};
    if (g.tiles)
        for (size_t s = 0; s < CQ_ARRAY_LEN(tiles); s++)
            for (int v = 0; v < MM_VARIANTS; v++)
                matmul_case(s ? CQ_DTYPE_BF16 : CQ_DTYPE_F32, s ? CQ_DTYPE_BF16 : CQ_DTYPE_F32,
                            s && v % 2 ? CQ_DTYPE_BF16 : CQ_DTYPE_F32, tiles[s].M, tiles[s].K, tiles[s].N, v);
    if (g.big)
        for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
            for (size_t s = 0; s < CQ_ARRAY_LEN(bigs); s++)
                matmul_case(k_codecs[ci], CQ_DTYPE_F32, CQ_DTYPE_F32, bigs[s].M, bigs[s].K, bigs[s].N, (int)(s % MM_VARIANTS));
}

/* ---- attention ---------------------------------------------------------------------------------- */
static cq_status run_attention(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    cq_attn_args a = {.o = out, .q = IN(in, c, 0), .k = IN(in, c, 1), .v = IN(in, c, 2), .k_prefix = IN(in, c, 3),
                      .v_prefix = IN(in, c, 4), .vis = IN(in, c, 5), .vis_lo = IN(in, c, 6), .n_heads = c->ip[0], .n_kv_heads = c->ip[1],
                      .head_dim = c->ip[2], .causal = c->ip[3] != 0, .scale = c->fp[0]};
    return cq_op_attention(be, &a);
}

/* VIS_WINDOWS: block-diagonal windows of unequal lengths (vis_lo and vis); VIS_SLIDING: causal with a lower
 * bound 37 keys back (vis_lo only); VIS_RANGE: random lower and upper bounds, empty and reversed ranges too */
enum { VIS_NONE, VIS_CAUSAL, VIS_BLOCK, VIS_RANDOM, VIS_WINDOWS, VIS_SLIDING, VIS_RANGE };

static void attention_case(cq_dtype dt, int64_t Nq, int64_t P, int64_t Nk, int Hq, int Hkv, int D, int vis, float scale) {
    static const char *const vn[] = {"full", "causal", "block-vis", "random-vis", "windows", "sliding", "range"};
    if (half_skipped(dt, g.half_subset)) return;
    tcase c;
    tc_init(&c, CQ_OP_ATTENTION, dt, run_attention, "attention %s x=%s Nq=%lld P=%lld Nk=%lld H=%d/%d D=%d", vn[vis],
            cq_dtype_name(dt), (long long)Nq, (long long)P, (long long)Nk, Hq, Hkv, D);
    c.tol_abs = TOL_ATTN_ABS;
    c.tol_rel = TOL_ATTN_REL;
    c.ip[0] = Hq;
    c.ip[1] = Hkv;
    c.ip[2] = D;
    c.ip[3] = vis == VIS_CAUSAL || vis == VIS_SLIDING;
    c.fp[0] = scale;
    tc_act(&c, 0, dt, Nq, (int64_t)Hq * D, 1.0f);
    if (Nk) {
        tc_act(&c, 1, dt, Nk, (int64_t)Hkv * D, 1.0f);
        tc_act(&c, 2, dt, Nk, (int64_t)Hkv * D, 1.0f);
    } else {
        c.nin = 3;
    }
    if (P) {
        tc_act(&c, 3, dt, P, (int64_t)Hkv * D, 1.0f);
        tc_act(&c, 4, dt, P, (int64_t)Hkv * D, 1.0f);
    }
    if (vis == VIS_BLOCK || vis == VIS_RANDOM) {
        int32_t *v = malloc(sizeof(int32_t) * (size_t)Nq);
        int64_t T = P + Nk;
        for (int64_t i = 0; i < Nq; i++) {
            if (vis == VIS_BLOCK) {
                v[i] = (int32_t)CQ_MIN(T, P + (i / 16 + 1) * 16); /* blocks of 16 rows see their whole block */
            } else {
                v[i] = (int32_t)(tu_rng_u64(&g.rng) % (uint64_t)(T + 4)) - 1; /* includes -1, 0 and > T */
            }
        }
        tc_i32(&c, 5, Nq, v);
        free(v);
    }
    if (vis >= VIS_WINDOWS) {
        static const int lens[] = {7, 64, 23, 50, 56, 13, 41};
        int32_t *lo = malloc(sizeof(int32_t) * (size_t)Nq), *hi = malloc(sizeof(int32_t) * (size_t)Nq);
        int64_t T = P + Nk;
        for (int64_t i = 0, w = 0; i < Nq; w++) { /* windows over the rows; each sees its share of all T keys */
            int64_t e = CQ_MIN(Nq, i + lens[w % CQ_ARRAY_LEN(lens)]);
            for (int64_t r = i; r < e; r++) {
                lo[r] = (int32_t)(i * T / Nq);
                hi[r] = (int32_t)(e * T / Nq);
            }
            i = e;
        }
        for (int64_t i = 0; i < Nq; i++) {
            if (vis == VIS_SLIDING) {
                lo[i] = (int32_t)(P + i + 1 - 37); /* negative ones clamp to 0 */
            } else if (vis == VIS_RANGE) {
                lo[i] = (int32_t)(tu_rng_u64(&g.rng) % (uint64_t)(T + 4)) - 2;
                hi[i] = (int32_t)(tu_rng_u64(&g.rng) % (uint64_t)(T + 4)) - 1;
            }
        }
        if (vis != VIS_SLIDING) tc_i32(&c, 5, Nq, hi);
        tc_i32(&c, 6, Nq, lo);
        free(lo);
        free(hi);
    }
    tc_out(&c, dt, Nq, (int64_t)Hq * D);
    run_case(&c);
}

static void test_attention(void **state) {
    (void)state;
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++) {
        cq_dtype dt = k_acts[xi];
        attention_case(dt, 1, 0, 1, 1, 1, 1, VIS_NONE, 0.0f);
        attention_case(dt, 3, 5, 3, 2, 1, 17, VIS_CAUSAL, 0.0f);
        attention_case(dt, 17, 0, 17, 4, 4, 64, VIS_CAUSAL, 0.0f);
        attention_case(dt, 65, 63, 65, 4, 2, 128, VIS_BLOCK, 0.0f);
        attention_case(dt, 70, 130, 0, 3, 3, 32, VIS_NONE, 0.3f);
        attention_case(dt, 20, 0, 200, 2, 2, 80, VIS_RANDOM, 0.0f);
        attention_case(dt, 1, 257, 1, 8, 2, 256, VIS_NONE, 0.0f);
        attention_case(dt, 33, 7, 100, 6, 3, 100, VIS_RANDOM, 0.0f);
        /* More kv heads than one round of packed keys holds (4 MiB): two rounds. */
        attention_case(dt, 3, 200, 800, 10, 10, 128, VIS_CAUSAL, 0.0f);
        /* head_dim 128 over several 64-query x 64-key tiles, as the denoiser's
         * cached step and prefill call it (GPU fast path) */
        attention_case(dt, 150, 18, 150, 2, 2, 128, VIS_NONE, 0.0f);
        attention_case(dt, 130, 0, 130, 2, 1, 128, VIS_BLOCK, 0.0f);
        attention_case(dt, 70, 40, 70, 1, 1, 128, VIS_RANDOM, 0.0f);
        /* one head over all channels, as the VAE's mid-block attention (GPU: the generic kernel's wide heads) */
        attention_case(dt, 40, 0, 40, 1, 1, 384, VIS_NONE, 0.0f);
        attention_case(dt, 9, 3, 21, 2, 1, 1100, VIS_CAUSAL, 0.0f);
        attention_case(dt, 5, 0, 7, 1, 1, 2048, VIS_NONE, 0.0f);
        attention_case(dt, 17, 5, 30, 4, 2, 320, VIS_NONE, 0.2f); /* prefix and shared kv heads, wide */
        /* a lower bound: windows (the vision towers' windowed blocks), sliding windows, random ranges */
        attention_case(dt, 200, 0, 200, 2, 2, 80, VIS_WINDOWS, 0.0f);
        attention_case(dt, 200, 0, 200, 4, 2, 128, VIS_WINDOWS, 0.0f);
        attention_case(dt, 77, 0, 77, 2, 1, 64, VIS_WINDOWS, 0.0f);
        attention_case(dt, 150, 50, 150, 2, 1, 128, VIS_WINDOWS, 0.0f); /* windows reach into the prefix */
        attention_case(dt, 130, 0, 130, 4, 2, 64, VIS_SLIDING, 0.0f);
        attention_case(dt, 100, 40, 100, 2, 2, 128, VIS_SLIDING, 0.0f);
        attention_case(dt, 45, 20, 60, 3, 3, 80, VIS_RANGE, 0.0f);
        attention_case(dt, 140, 0, 300, 2, 1, 128, VIS_RANGE, 0.0f);
        attention_case(dt, 9, 3, 21, 2, 1, 300, VIS_RANGE, 0.0f); /* the wide-head paths */
        /* head_dim 80, the Qwen2.5-VL vision tower's (16 heads x 80; GPU: the flash kernels' 80 instantiation):
         * its full-attention blocks and windowed blocks (vis_lo + vis) over more than two 128-query blocks,
         * then GQA with a prefix (causal, block masks, prefix only with a negative scale), sliding windows and
         * random ranges; no count a multiple of a tile */
        attention_case(dt, 197, 0, 197, 16, 16, 80, VIS_NONE, 0.0f);
        attention_case(dt, 301, 0, 301, 4, 4, 80, VIS_WINDOWS, 0.0f);
        attention_case(dt, 150, 40, 150, 4, 2, 80, VIS_CAUSAL, 0.0f);
        attention_case(dt, 131, 63, 65, 3, 1, 80, VIS_BLOCK, 0.0f);
        attention_case(dt, 129, 67, 0, 2, 1, 80, VIS_NONE, -0.07f);
        attention_case(dt, 150, 50, 150, 2, 1, 80, VIS_WINDOWS, 0.0f); /* windows reach into the prefix */
        attention_case(dt, 130, 0, 130, 4, 2, 80, VIS_SLIDING, 0.0f);
        attention_case(dt, 140, 0, 300, 2, 1, 80, VIS_RANGE, 0.0f);
        /* head_dim 64, LTX-2's audio heads (GPU: the flash kernels' 64 instantiation): audio self-attention,
         * few queries over many keys (video -> audio), many queries over few keys (audio -> video), a prefix
         * with causal masks and shared kv heads */
        attention_case(dt, 126, 0, 126, 4, 4, 64, VIS_NONE, 0.0f);
        attention_case(dt, 30, 0, 700, 4, 4, 64, VIS_NONE, 0.0f);
        attention_case(dt, 300, 0, 27, 4, 4, 64, VIS_NONE, 0.0f);
        attention_case(dt, 150, 40, 150, 4, 2, 64, VIS_CAUSAL, 0.0f);
        attention_case(dt, 131, 63, 65, 3, 1, 64, VIS_BLOCK, 0.0f);
        if (g.big) {
            attention_case(dt, 257, 1000, 257, 4, 1, 128, VIS_CAUSAL, 0.0f);
            attention_case(dt, 1000, 0, 1000, 2, 2, 64, VIS_BLOCK, 0.0f);
            attention_case(dt, 63, 300, 65, 3, 1, 200, VIS_RANDOM, 0.0f);
        }
    }
}

/* ---- row ops -------------------------------------------------------------------------------------- */
typedef struct rc {
    int64_t R, C;
} rc;
static const rc k_rows[] = {{1, 1}, {2, 3}, {3, 17}, {17, 63}, {65, 257}, {4, 1000}};
static const rc k_rows_big[] = {{1000, 65}, {257, 3072}};

#define FOR_ROWS(body)                                                                   \
    do {                                                                                 \
        for (size_t ri_ = 0; ri_ < CQ_ARRAY_LEN(k_rows) + (g.big ? CQ_ARRAY_LEN(k_rows_big) : 0); ri_++) { \
            rc sh = ri_ < CQ_ARRAY_LEN(k_rows) ? k_rows[ri_] : k_rows_big[ri_ - CQ_ARRAY_LEN(k_rows)];    \
            body                                                                         \
        }                                                                                \
    } while (0)

/* ip[9] = 1: run in place (the output tensor is also the input). */
static cq_tensor *X0(cq_tensor *out, cq_tensor **in, const tcase *c) { return c->ip[9] ? out : IN(in, c, 0); }

static cq_status run_layernorm(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_layernorm(be, out, X0(out, in, c), IN(in, c, 1), IN(in, c, 2), c->fp[0]);
}
static cq_status run_rmsnorm(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_rmsnorm(be, out, X0(out, in, c), IN(in, c, 1), IN(in, c, 2), c->ip[0] != 0, c->fp[0]);
}
static cq_status run_softmax(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_softmax(be, out, X0(out, in, c), c->fp[0]);
}

/* Make the case run in place: the input values become the output's initial values. */
static void tc_in_place(tcase *c) {
    int64_t n = prod(c->in[0].ndim, c->in[0].shape);
    c->oinit = malloc(sizeof(float) * (size_t)n);
    memcpy(c->oinit, c->in[0].v, sizeof(float) * (size_t)n);
    c->ip[9] = 1;
}

static void test_norms(void **state) {
    (void)state;
    int k = 0;
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++) {
        cq_dtype dt = k_acts[xi];
        FOR_ROWS({
            for (int variant = 0; variant < 3; variant++, k++) {
                tcase c;
                tc_init(&c, CQ_OP_LAYERNORM, dt, run_layernorm, "layernorm v%d x=%s %lldx%lld", variant,
                        cq_dtype_name(dt), (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_NORM_ABS;
                c.tol_rel = TOL_NORM_REL;
                c.fp[0] = variant == 2 ? 1e-2f : 1e-6f;
                tc_act(&c, 0, dt, sh.R, sh.C, 2.0f);
                for (int64_t i = 0; i < sh.R * sh.C; i++) c.in[0].v[i] += 3.0f; /* a mean to remove */
                if (variant != 1) tc_vec(&c, 1, sh.C, 0.5f, 0.0f);
                if (variant == 0) tc_vec(&c, 2, sh.C, 1.0f, 0.0f);
                c.nin = 3;
                tc_out(&c, dt, sh.R, sh.C);
                if (k % 3 == 2) tc_in_place(&c);
                run_case(&c);

                tc_init(&c, CQ_OP_RMSNORM, dt, run_rmsnorm, "rmsnorm v%d x=%s %lldx%lld", variant, cq_dtype_name(dt),
                        (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_NORM_ABS;
                c.tol_rel = TOL_NORM_REL;
                c.fp[0] = 1e-6f;
                c.ip[0] = variant == 1; /* zero-centred weight */
                tc_act(&c, 0, dt, sh.R, sh.C, 2.0f);
                if (variant != 2) tc_vec(&c, 1, sh.C, 0.5f, variant == 1 ? 0.0f : 1.0f);
                if (variant == 0) tc_vec(&c, 2, sh.C, 1.0f, 0.0f);
                c.nin = 3;
                tc_out(&c, dt, sh.R, sh.C);
                if (k % 3 == 1) tc_in_place(&c);
                run_case(&c);

                tc_init(&c, CQ_OP_SOFTMAX, dt, run_softmax, "softmax v%d x=%s %lldx%lld", variant, cq_dtype_name(dt),
                        (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_SOFTMAX_ABS;
                c.tol_rel = TOL_SOFTMAX_REL;
                c.fp[0] = variant == 0 ? 0.0f : 0.3f * (float)variant;
                tc_act(&c, 0, dt, sh.R, sh.C, 3.0f);
                tc_out(&c, dt, sh.R, sh.C);
                if (k % 2) tc_in_place(&c);
                run_case(&c);
            }
        });
    }
}

static cq_status run_groupnorm(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_groupnorm(be, out, X0(out, in, c), c->ip[0], IN(in, c, 1), IN(in, c, 2), c->fp[0]);
}

static void test_groupnorm(void **state) {
    (void)state;
    static const int64_t sh[][3] = {{1, 4, 2}, {17, 32, 8}, {65, 96, 32}, {3, 63, 3}, {100, 12, 1}, {257, 20, 4}};
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(sh); i++) {
            tcase c;
            tc_init(&c, CQ_OP_GROUPNORM, k_acts[xi], run_groupnorm, "groupnorm x=%s %lldx%lld groups %lld",
                    cq_dtype_name(k_acts[xi]), (long long)sh[i][0], (long long)sh[i][1], (long long)sh[i][2]);
            c.tol_abs = TOL_NORM_ABS;
            c.tol_rel = TOL_NORM_REL;
            c.ip[0] = (int)sh[i][2];
            c.fp[0] = 1e-5f;
            tc_act(&c, 0, k_acts[xi], sh[i][0], sh[i][1], 1.5f);
            for (int64_t j = 0; j < sh[i][0] * sh[i][1]; j++) c.in[0].v[j] += (float)(j % sh[i][1]) * 0.1f;
            if (i % 2 == 0) {
                tc_vec(&c, 1, sh[i][1], 0.5f, 1.0f);
                tc_vec(&c, 2, sh[i][1], 0.5f, 0.0f);
            }
            c.nin = 3;
            tc_out(&c, k_acts[xi], sh[i][0], sh[i][1]);
            if (i == 3) tc_in_place(&c);
            run_case(&c);
        }
}

static cq_status run_group_moments(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_group_moments(be, out, IN(in, c, 0), c->ip[0], c->ip[1]);
}

static void test_group_moments(void **state) {
    (void)state;
    /* rows, channels, groups, rows per block */
    static const int64_t sh[][4] = {{1, 4, 2, 1},   {12, 32, 8, 4}, {195, 96, 32, 3}, {9, 63, 3, 9},
                                    {100, 12, 1, 5}, {64, 20, 4, 1}, {40, 128, 128, 8}, {7, 160, 80, 7}};
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(sh); i++) {
            tcase c;
            tc_init(&c, CQ_OP_GROUP_MOMENTS, k_acts[xi], run_group_moments,
                    "group_moments x=%s %lldx%lld groups %lld block %lld", cq_dtype_name(k_acts[xi]),
                    (long long)sh[i][0], (long long)sh[i][1], (long long)sh[i][2], (long long)sh[i][3]);
            c.tol_abs = TOL_NORM_ABS;
            c.tol_rel = TOL_NORM_REL;
            c.ip[0] = (int)sh[i][2];
            c.ip[1] = (int)sh[i][3];
            tc_act(&c, 0, k_acts[xi], sh[i][0], sh[i][1], 1.5f);
            /* channel offsets far from zero: the mean is large next to the spread */
            for (int64_t j = 0; j < sh[i][0] * sh[i][1]; j++) c.in[0].v[j] += (float)(j % sh[i][1]) * 0.3f + 4.0f;
            c.nin = 1;
            tc_out(&c, CQ_DTYPE_F32, sh[i][0] / sh[i][3], 2 * sh[i][2]);
            run_case(&c);
        }
}

static cq_status run_rope(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_qk_norm_rope(be, out, c->ip[0], c->ip[1], IN(in, c, 1), c->fp[0], IN(in, c, 2), IN(in, c, 3),
                              (cq_rope_mode)c->ip[2], c->ip[3]);
}

static void test_qk_norm_rope(void **state) {
    (void)state;
    static const int k[][6] = {
        /* N, H, D, rope_dim, mode, weight */
        {1, 1, 2, 0, CQ_ROPE_INTERLEAVED, 1}, {3, 2, 64, 0, CQ_ROPE_HALF, 1},  {17, 3, 128, 64, CQ_ROPE_INTERLEAVED, 1},
        {5, 4, 96, 32, CQ_ROPE_HALF, 0},      {65, 2, 16, 0, CQ_ROPE_NONE, 1}, {7, 1, 10, 6, CQ_ROPE_HALF, 1},
        {63, 5, 34, 0, CQ_ROPE_INTERLEAVED, 0},
        /* the DiTs' case (head_dim 128, interleaved over the whole head), which has a fast path on the GPU */
        {9, 3, 128, 0, CQ_ROPE_INTERLEAVED, 1}, {4, 2, 128, 128, CQ_ROPE_INTERLEAVED, 0}};
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
            int64_t N = k[i][0], H = k[i][1], D = k[i][2], rd = k[i][3] ? k[i][3] : D;
            static const char *const mn[] = {"none", "interleaved", "half"};
            tcase c;
            tc_init(&c, CQ_OP_QK_NORM_ROPE, k_acts[xi], run_rope, "qk_norm_rope %s x=%s N=%lld H=%lld D=%lld rope=%lld w=%d",
                    mn[k[i][4]], cq_dtype_name(k_acts[xi]), (long long)N, (long long)H, (long long)D, (long long)rd,
                    k[i][5]);
            c.tol_abs = TOL_ROPE_ABS;
            c.tol_rel = TOL_ROPE_REL;
            c.ip[0] = (int)H;
            c.ip[1] = (int)D;
            c.ip[2] = k[i][4];
            c.ip[3] = k[i][3];
            c.fp[0] = 1e-6f;
            tc_act(&c, 0, k_acts[xi], N, H * D, 2.0f);
            if (k[i][5]) tc_vec(&c, 1, D, 0.3f, 1.0f);
            if (k[i][4] != CQ_ROPE_NONE) {
                tc_act(&c, 2, CQ_DTYPE_F32, N, rd / 2, 1.0f);
                tc_act(&c, 3, CQ_DTYPE_F32, N, rd / 2, 1.0f);
                for (int64_t j = 0; j < N * rd / 2; j++) { /* a real rotation table */
                    float ang = c.in[2].v[j] * 3.0f;
                    c.in[2].v[j] = cosf(ang);
                    c.in[3].v[j] = sinf(ang);
                }
            }
            c.nin = 4;
            tc_out(&c, k_acts[xi], N, H * D);
            tc_in_place(&c);
            run_case(&c);
        }
}

/* ---- elementwise ------------------------------------------------------------------------------------ */
static cq_status run_unary(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_unary(be, out, X0(out, in, c), (cq_unary)c->ip[0], c->fp[0], c->fp[1]);
}
static cq_status run_binary(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_binary(be, out, X0(out, in, c), IN(in, c, 1), (cq_binary)c->ip[0]);
}
static cq_status run_gated(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_gated_add(be, out, IN(in, c, 0), IN(in, c, 1));
}
static cq_status run_swiglu(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_swiglu(be, out, IN(in, c, 0), IN(in, c, 1));
}

static void test_elementwise(void **state) {
    (void)state;
    static const char *const un[] = {"silu", "gelu_tanh", "gelu_erf", "tanh", "sigmoid",
                                     "neg",  "exp",       "scale",    "add_scalar", "clamp", "log", "sqrt"};
    static const char *const bn[] = {"add", "sub", "mul", "div"};
    int k = 0;
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++) {
        cq_dtype dt = k_acts[xi];
        FOR_ROWS({
            k++;
            for (int fn = 0; fn < CQ_UNARY_COUNT; fn++) {
                tcase c;
                tc_init(&c, CQ_OP_UNARY, dt, run_unary, "unary %s x=%s %lldx%lld", un[fn], cq_dtype_name(dt),
                        (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_ELT_ABS;
                c.tol_rel = TOL_ELT_REL;
                c.ip[0] = fn;
                c.fp[0] = fn == CQ_UNARY_CLAMP ? -0.5f : fn == CQ_UNARY_LOG ? 0.05f : 1.7f;
                c.fp[1] = 0.7f;
                tc_act(&c, 0, dt, sh.R, sh.C, 2.0f);
                tc_out(&c, dt, sh.R, sh.C);
                if ((k + fn) % 3 == 0) tc_in_place(&c);
                run_case(&c);
            }
            for (int fn = 0; fn < CQ_BINARY_COUNT; fn++)
                for (int bc = 0; bc < 2; bc++) {
                    tcase c;
                    tc_init(&c, CQ_OP_BINARY, dt, run_binary, "binary %s%s x=%s %lldx%lld", bn[fn], bc ? " (row)" : "",
                            cq_dtype_name(dt), (long long)sh.R, (long long)sh.C);
                    c.tol_abs = TOL_ELT_ABS;
                    c.tol_rel = TOL_ELT_REL;
                    c.ip[0] = fn;
                    tc_act(&c, 0, dt, sh.R, sh.C, 1.0f);
                    tin *b = tc_act(&c, 1, dt, bc ? 1 : sh.R, sh.C, 0.5f);
                    if (fn == CQ_BINARY_DIV) /* keep divisors away from zero */
                        for (int64_t i = 0; i < prod(b->ndim, b->shape); i++) b->v[i] += b->v[i] < 0 ? -0.5f : 0.5f;
                    tc_out(&c, dt, sh.R, sh.C);
                    if ((k + fn + bc) % 3 == 0) tc_in_place(&c);
                    run_case(&c);
                }
            for (int gate = 0; gate < 2; gate++) {
                tcase c;
                tc_init(&c, CQ_OP_GATED_ADD, dt, run_gated, "gated_add%s x=%s %lldx%lld", gate ? " (gate)" : "",
                        cq_dtype_name(dt), (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_ELT_ABS;
                c.tol_rel = TOL_ELT_REL;
                tc_act(&c, 0, dt, sh.R, sh.C, 1.0f);
                if (gate) tc_vec(&c, 1, sh.C, 1.0f, 0.0f);
                c.nin = 2;
                tc_out(&c, dt, sh.R, sh.C);
                c.oinit = rnd(sh.R * sh.C, 1.0f);
                run_case(&c);
            }
            for (int fused = 0; fused < 2; fused++) {
                tcase c;
                tc_init(&c, CQ_OP_SWIGLU, dt, run_swiglu, "swiglu%s x=%s %lldx%lld", fused ? " (fused)" : "",
                        cq_dtype_name(dt), (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_ELT_ABS;
                c.tol_rel = TOL_ELT_REL;
                tc_act(&c, 0, dt, sh.R, fused ? 2 * sh.C : sh.C, 2.0f);
                if (!fused) tc_act(&c, 1, dt, sh.R, sh.C, 1.0f);
                c.nin = 2;
                tc_out(&c, dt, sh.R, sh.C);
                run_case(&c);
            }
        });
    }
}

/* ---- data movement ------------------------------------------------------------------------------------ */
static cq_status run_copy(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_copy(be, out, IN(in, c, 0));
}
static cq_status run_transpose(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_transpose(be, out, IN(in, c, 0));
}
static cq_status run_concat(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_concat_cols(be, out, IN(in, c, 0), IN(in, c, 1));
}
static cq_status run_get_rows(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_get_rows(be, out, IN(in, c, 0), IN(in, c, 1));
}

static cq_status run_gather_cols(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_gather_cols(be, out, IN(in, c, 0), IN(in, c, 1), c->ip[0], c->fp[0]);
}

/* Column gathers: permutations/selections (group 1, exact) and group means
 * with zero (-1) slots, as the VAE's channel-folding shortcuts use them. */
static void gather_cols_cases(void) {
    /* R, K, N, group, scale */
    static const struct { int64_t R, K, N; int group; float scale; } gc[] = {
        {1, 1, 1, 1, 1.0f},   {7, 12, 12, 1, 0.0f}, {33, 5, 40, 1, 1.0f},    {16, 24, 6, 4, 0.25f},
        {9, 10, 17, 3, 1.0f / 3.0f}, {130, 64, 32, 8, 0.125f}, {3, 2, 5, 2, -2.0f},
    };
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(gc); i++) {
            cq_dtype dt = k_acts[xi];
            tcase c;
            tc_init(&c, CQ_OP_GATHER_COLS, dt, run_gather_cols, "gather_cols x=%s R=%lld K=%lld N=%lld group=%d scale=%g",
                    cq_dtype_name(dt), (long long)gc[i].R, (long long)gc[i].K, (long long)gc[i].N, gc[i].group,
                    (double)gc[i].scale);
            bool exact = gc[i].group == 1 && (gc[i].scale == 0.0f || gc[i].scale == 1.0f);
            c.tol_abs = exact ? TOL_EXACT : TOL_ELT_ABS;
            c.tol_rel = exact ? TOL_EXACT : TOL_ELT_REL;
            c.ip[0] = gc[i].group;
            c.fp[0] = gc[i].scale;
            tc_act(&c, 0, dt, gc[i].R, gc[i].K, 1.0f);
            int64_t n = gc[i].N * gc[i].group;
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
            for (int64_t j = 0; j < n; j++) {
                uint64_t u = tu_rng_u64(&g.rng);
                ids[j] = u % 5 == 0 ? -1 : (int32_t)(u / 5 % (uint64_t)gc[i].K);
            }
            ids[n - 1] = (int32_t)gc[i].K - 1; /* the last column, always */
            tc_i32(&c, 1, n, ids);
            free(ids);
            tc_out(&c, dt, gc[i].R, gc[i].N);
            run_case(&c);
        }
}

static void test_data_movement(void **state) {
    (void)state;
    FOR_ROWS({
        for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
            for (size_t yi = 0; yi < CQ_ARRAY_LEN(k_acts); yi++) {
                tcase c;
                tc_init(&c, CQ_OP_COPY, k_acts[xi], run_copy, "copy %s->%s %lldx%lld", cq_dtype_name(k_acts[xi]),
                        cq_dtype_name(k_acts[yi]), (long long)sh.R, (long long)sh.C);
                c.tol_abs = TOL_EXACT;
                tc_act(&c, 0, k_acts[xi], sh.R, sh.C, 3.0f);
                tc_out(&c, k_acts[yi], sh.C, sh.R); /* same count, another shape */
                run_case(&c);
            }
        for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++) {
            tcase c;
            tc_init(&c, CQ_OP_TRANSPOSE, k_acts[xi], run_transpose, "transpose x=%s %lldx%lld", cq_dtype_name(k_acts[xi]),
                    (long long)sh.R, (long long)sh.C);
            c.tol_abs = TOL_EXACT;
            tc_act(&c, 0, k_acts[xi], sh.R, sh.C, 1.0f);
            tc_out(&c, k_acts[xi], sh.C, sh.R);
            run_case(&c);

            int64_t cb = sh.C % 5 + 1 + (int64_t)xi * 30;
            tc_init(&c, CQ_OP_CONCAT_COLS, k_acts[xi], run_concat, "concat_cols x=%s %lldx(%lld+%lld)", cq_dtype_name(k_acts[xi]),
                    (long long)sh.R, (long long)sh.C, (long long)cb);
            c.tol_abs = TOL_EXACT;
            tc_act(&c, 0, k_acts[xi], sh.R, sh.C, 1.0f);
            tc_act(&c, 1, k_acts[xi], sh.R, cb, 1.0f);
            tc_out(&c, k_acts[xi], sh.R, sh.C + cb);
            run_case(&c);
        }
    });
    /* i32 copies, and f16 weights converted to f32 activations (how per-channel
     * parameters stored as f16 reach the ops). */
    {
        tcase c;
        tc_init(&c, CQ_OP_COPY, CQ_DTYPE_F16, run_copy, "copy f16 weight -> f32");
        c.tol_abs = TOL_EXACT;
        int64_t sh[1] = {77};
        assert_true(tc_weight(&c, 0, CQ_DTYPE_F16, 1, sh, 1.0f));
        tc_out(&c, CQ_DTYPE_F32, 7, 11);
        run_case(&c);
    }
    /* Row gathers from every codec into every activation dtype. */
    static const int64_t gr[][3] = {{10, 32, 3}, {7, 64, 17}, {300, 96, 65}, {5, 17, 4}, {1, 1000, 2}};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(gr); i++) {
            cq_dtype ydt = k_acts[(ci + i) % 3];
            tcase c;
            tc_init(&c, CQ_OP_GET_ROWS, ydt, run_get_rows, "get_rows w=%s y=%s V=%lld C=%lld n=%lld",
                    cq_dtype_name(k_codecs[ci]), cq_dtype_name(ydt), (long long)gr[i][0], (long long)gr[i][1],
                    (long long)gr[i][2]);
            c.wdt = k_codecs[ci];
            c.tol_abs = TOL_EXACT;
            int64_t ws[2] = {gr[i][0], gr[i][1]};
            if (!tc_weight(&c, 0, k_codecs[ci], 2, ws, 1.0f)) {
                tc_free(&c);
                continue;
            }
            int32_t ids[128];
            for (int64_t j = 0; j < gr[i][2]; j++) ids[j] = (int32_t)(tu_rng_u64(&g.rng) % (uint64_t)gr[i][0]);
            ids[0] = (int32_t)gr[i][0] - 1;
            tc_i32(&c, 1, gr[i][2], ids);
            tc_out(&c, ydt, gr[i][2], gr[i][1]);
            run_case(&c);
        }
    gather_cols_cases();
}

/* ---- video VAE and vocoder ops ---------------------------------------------------------------------------- */
static const char *const k_pad_names[] = {"zero", "replicate", "reflect"};

/* ip: T H W kt kh kw st sy sx pf pb pl pr pt pb mode */
static cq_status run_conv3d(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    cq_conv3d_args a = {.y = out, .x = IN(in, c, 0), .w = IN(in, c, 1), .bias = IN(in, c, 2), .T = c->ip[0],
                        .H = c->ip[1], .W = c->ip[2], .kt = c->ip[3], .kh = c->ip[4], .kw = c->ip[5],
                        .stride_t = c->ip[6], .stride_y = c->ip[7], .stride_x = c->ip[8], .pad_front = c->ip[9],
                        .pad_back = c->ip[10], .pad_l = c->ip[11], .pad_r = c->ip[12], .pad_t = c->ip[13],
                        .pad_b = c->ip[14], .mode = (cq_pad_mode)c->ip[15]};
    return cq_op_conv3d(be, &a);
}

/* T H W Cin Cout kt kh kw st sy sx pf pb pl pr pt pb mode */
static const int k_conv3d[][18] = {
    {3, 5, 7, 4, 6, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_ZERO},       /* causal (the encoder) */
    {4, 6, 5, 5, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, CQ_PAD_ZERO},       /* non-causal (the decoder) */
    {5, 4, 4, 3, 9, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_REFLECT},    /* LTX-2.0's reflect */
    {1, 7, 3, 6, 5, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_REPLICATE},  /* one frame, all replicas */
    {6, 5, 6, 8, 4, 3, 1, 3, 2, 1, 2, 1, 1, 1, 1, 0, 0, CQ_PAD_ZERO},       /* strides, asymmetric kernel */
    {2, 3, 4, 16, 33, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, CQ_PAD_ZERO},     /* pointwise (1x1x1 shortcut) */
    {3, 4, 5, 2, 3, 2, 2, 2, 1, 2, 1, 1, 0, 0, 1, 1, 0, CQ_PAD_REPLICATE},  /* even kernel, odd pads */
    {2, 6, 6, 4, 5, 5, 5, 5, 1, 1, 1, 4, 0, 2, 2, 2, 2, CQ_PAD_ZERO},       /* 125 taps: no tap table */
    {9, 8, 8, 32, 32, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, CQ_PAD_ZERO},     /* bigger */
};

static void test_conv3d(void **state) {
    (void)state;
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(k_conv3d); i++) {
            if (!g.big && ci > 2 && (ci + i) % 3) continue; /* f32/f16/bf16 always, the quantised codecs sampled */
            const int *p = k_conv3d[i];
            int64_t To = (p[0] + p[11] + p[12] - p[5]) / p[8] + 1, Ho = (p[1] + p[15] + p[16] - p[6]) / p[9] + 1,
                    Wo = (p[2] + p[13] + p[14] - p[7]) / p[10] + 1;
            tcase c;
            tc_init(&c, CQ_OP_CONV3D, CQ_DTYPE_F32, run_conv3d,
                    "conv3d w=%s %dx%dx%dx%d->%d k%dx%dx%d s%dx%dx%d time(%d,%d) pad(%d,%d,%d,%d) %s",
                    cq_dtype_name(k_codecs[ci]), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10],
                    p[11], p[12], p[13], p[14], p[15], p[16], k_pad_names[p[17]]);
            c.wdt = k_codecs[ci];
            c.tol_abs = TOL_MATMUL_ABS;
            c.tol_rel = TOL_MATMUL_REL;
            c.ip[0] = p[0];
            c.ip[1] = p[1];
            c.ip[2] = p[2];
            for (int j = 3; j < 16; j++) c.ip[j] = p[j + 2];
            tc_act(&c, 0, CQ_DTYPE_F32, (int64_t)p[0] * p[1] * p[2], p[3], 1.0f);
            int64_t taps = (int64_t)p[5] * p[6] * p[7], K = p[3] * taps;
            int64_t w3[3] = {p[4], p[3], taps}, w2[2] = {p[4], K};
            bool ok = per_row_codec(k_codecs[ci]) || i % 2
                          ? tc_weight(&c, 1, k_codecs[ci], 2, w2, 1.0f / sqrtf((float)K))
                          : tc_weight(&c, 1, k_codecs[ci], 3, w3, 1.0f / sqrtf((float)K));
            if (!ok) {
                tc_free(&c);
                continue;
            }
            if (i % 3 != 1) tc_vec(&c, 2, p[4], 0.5f, 0.0f);
            c.nin = 3;
            tc_out(&c, CQ_DTYPE_F32, To * Ho * Wo, p[4]);
            run_case(&c);
        }
}

/* The definition written out independently of every implementation: pad the clip explicitly (frames replicated
 * in time, then the spatial mode), then a plain strided correlation over the padded clip. f32 weights. */
static void naive_conv3d(const int *p, const float *x, const float *w, const float *bias, double *y) {
    int T = p[0], H = p[1], W = p[2], Cin = p[3], Cout = p[4], kt = p[5], kh = p[6], kw = p[7];
    int Tp = T + p[11] + p[12], Hp = H + p[15] + p[16], Wp = W + p[13] + p[14];
    float *xp = calloc((size_t)Tp * Hp * Wp * Cin, sizeof(float));
    for (int t = 0; t < Tp; t++) {
        int st = t - p[11] < 0 ? 0 : t - p[11] >= T ? T - 1 : t - p[11];
        for (int yy = 0; yy < Hp; yy++)
            for (int xx = 0; xx < Wp; xx++) {
                int sy = yy - p[15], sx = xx - p[13];
                bool zero = false;
                int *v[2] = {&sy, &sx}, n[2] = {H, W};
                for (int d = 0; d < 2; d++) {
                    if (*v[d] >= 0 && *v[d] < n[d]) continue;
                    if (p[17] == CQ_PAD_ZERO) zero = true;
                    else if (p[17] == CQ_PAD_REPLICATE) *v[d] = *v[d] < 0 ? 0 : n[d] - 1;
                    else *v[d] = *v[d] < 0 ? -*v[d] : 2 * (n[d] - 1) - *v[d];
                }
                if (zero) continue;
                for (int ci = 0; ci < Cin; ci++)
                    xp[(((size_t)t * Hp + yy) * Wp + xx) * Cin + ci] = x[(((size_t)st * H + sy) * W + sx) * Cin + ci];
            }
    }
    int To = (Tp - kt) / p[8] + 1, Ho = (Hp - kh) / p[9] + 1, Wo = (Wp - kw) / p[10] + 1;
    for (int ot = 0; ot < To; ot++)
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++)
                for (int co = 0; co < Cout; co++) {
                    double acc = bias ? bias[co] : 0.0;
                    for (int ci = 0; ci < Cin; ci++)
                        for (int a = 0; a < kt; a++)
                            for (int b = 0; b < kh; b++)
                                for (int d = 0; d < kw; d++)
                                    acc += (double)w[((((size_t)co * Cin + ci) * kt + a) * kh + b) * kw + d] *
                                           xp[(((size_t)(ot * p[8] + a) * Hp + oy * p[9] + b) * Wp + ox * p[10] + d) *
                                                  Cin + ci];
                    y[(((size_t)ot * Ho + oy) * Wo + ox) * Cout + co] = acc;
                }
    free(xp);
}

/* Every backend (the reference too) against an output computed in the test; the weight is an f32 activation.
 * f32 tolerances, widened for a backend that rounds the op's operands to f16/bf16 (tolerances()). */
static void check_naive(tcase *c, const double *want, int64_t n) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    c->tol_abs = 2e-6;
    c->tol_rel = 1e-5;
    for (int b = -1; b < g.nbe; b++) {
        cq_backend *be = b < 0 ? g.ref : g.be[b];
        if (!cq_backend_supports(be, c->op, CQ_DTYPE_F32, CQ_DTYPE_F32)) continue;
        double tabs, trel;
        tolerances(c, be, &tabs, &trel);
        float *got = NULL;
        cq_status st = run_on(be, c, &got);
        if (st != CQ_OK) fail_msg("%s on %s: %s: %s", c->label, cq_backend_name(be), cq_status_str(st), cq_last_error());
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(got[i] - want[i]), lim = tabs * scale + trel * fabs(want[i]);
            if (!(d <= lim))
                fail_msg("%s on %s: output %lld = %.9g, direct loop %.9g", c->label, cq_backend_name(be), (long long)i,
                         got[i], want[i]);
            worst = fmax(worst, d / scale);
        }
        if (getenv("CQ_TEST_OPS_VERBOSE"))
            print_message("%s on %s: max |diff| / max|out| = %.2e vs the direct loop\n", c->label, cq_backend_name(be),
                          worst);
        free(got);
    }
    tc_free(c);
}

static void test_conv3d_naive(void **state) {
    (void)state;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_conv3d); i++) {
        const int *p = k_conv3d[i];
        int64_t To = (p[0] + p[11] + p[12] - p[5]) / p[8] + 1, Ho = (p[1] + p[15] + p[16] - p[6]) / p[9] + 1,
                Wo = (p[2] + p[13] + p[14] - p[7]) / p[10] + 1;
        int64_t K = (int64_t)p[3] * p[5] * p[6] * p[7];
        tcase c;
        tc_init(&c, CQ_OP_CONV3D, CQ_DTYPE_F32, run_conv3d, "conv3d case %zu vs direct loop", i);
        c.ip[0] = p[0];
        c.ip[1] = p[1];
        c.ip[2] = p[2];
        for (int j = 3; j < 16; j++) c.ip[j] = p[j + 2];
        tc_act(&c, 0, CQ_DTYPE_F32, (int64_t)p[0] * p[1] * p[2], p[3], 1.0f);
        tc_act(&c, 1, CQ_DTYPE_F32, p[4], K, 1.0f / sqrtf((float)K));
        tc_vec(&c, 2, p[4], 0.5f, 0.0f);
        tc_out(&c, CQ_DTYPE_F32, To * Ho * Wo, p[4]);
        double *want = malloc(sizeof(double) * (size_t)(To * Ho * Wo * p[4]));
        naive_conv3d(p, c.in[0].v, c.in[1].v, c.in[2].v, want);
        check_naive(&c, want, To * Ho * Wo * p[4]);
        free(want);
    }
}

static cq_status run_d2s3(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_depth_to_space3d(be, out, IN(in, c, 0), c->ip[0], c->ip[1], c->ip[2], c->ip[3], c->ip[4], c->ip[5]);
}

static void test_depth_to_space3d(void **state) {
    (void)state;
    /* T H W C pt ph pw: LTX's (2,2,2), (2,1,1), (1,2,2) and odd ones */
    static const int k[][7] = {{2, 3, 4, 5, 2, 2, 2}, {3, 2, 2, 7, 2, 1, 1}, {1, 3, 5, 4, 1, 2, 2},
                               {2, 1, 3, 3, 3, 1, 2}, {1, 1, 1, 1, 1, 1, 1}, {4, 5, 3, 16, 1, 3, 2}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
        const int *p = k[i];
        int64_t P = (int64_t)p[4] * p[5] * p[6], vox = (int64_t)p[0] * p[1] * p[2];
        tcase c;
        tc_init(&c, CQ_OP_DEPTH_TO_SPACE3D, CQ_DTYPE_F32, run_d2s3, "depth_to_space3d %dx%dx%dx%d p(%d,%d,%d)", p[0],
                p[1], p[2], p[3], p[4], p[5], p[6]);
        c.tol_abs = TOL_EXACT;
        for (int j = 0; j < 3; j++) c.ip[j] = p[j];
        for (int j = 3; j < 6; j++) c.ip[j] = p[j + 1];
        tc_act(&c, 0, CQ_DTYPE_F32, vox, p[3] * P, 1.0f);
        tc_out(&c, CQ_DTYPE_F32, vox * P, p[3]);
        run_case(&c);
    }
    /* The channel order spelled out once: LTX's upsampler reshapes channels as (c, pt, ph, pw), c slowest. */
    cq_backend *be = g.ref;
    int T = 2, H = 2, W = 3, C = 3, pt = 2, ph = 2, pw = 2, P = 8;
    cq_tensor x, y;
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T * H * W, C * P, &x), CQ_OK);
    assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, T * H * W * P, C, &y), CQ_OK);
    float v[2 * 2 * 3 * 24], out[2 * 2 * 3 * 24];
    for (int i = 0; i < T * H * W * C * P; i++) v[i] = (float)i;
    assert_int_equal(cq_tensor_upload(&x, v, sizeof v), CQ_OK);
    assert_int_equal(cq_op_depth_to_space3d(be, &y, &x, T, H, W, pt, ph, pw), CQ_OK);
    assert_int_equal(cq_tensor_download(&y, out, sizeof out), CQ_OK);
    int f = 1, h = 0, w = 2, ch = 2, a = 1, b = 0, d = 1;
    assert_float_equal(out[(((pt * f + a) * H * ph + ph * h + b) * W * pw + pw * w + d) * C + ch],
                       v[((f * H + h) * W + w) * C * P + ((ch * pt + a) * ph + b) * pw + d], 0.0f);
    cq_tensor_free(&x);
    cq_tensor_free(&y);
}

/* ip: k stride dilation groups pad_l pad_r mode transposed */
static cq_status run_conv1d(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    cq_conv1d_args a = {.y = out, .x = IN(in, c, 0), .w = IN(in, c, 1), .bias = IN(in, c, 2), .k = c->ip[0],
                        .stride = c->ip[1], .dilation = c->ip[2], .groups = c->ip[3], .pad_l = c->ip[4],
                        .pad_r = c->ip[5], .mode = (cq_pad_mode)c->ip[6]};
    return c->ip[7] ? cq_op_conv_transpose1d(be, &a) : cq_op_conv1d(be, &a);
}

/* L Cin Cout k stride dilation groups pad_l pad_r mode */
static const int k_conv1d[][10] = {
    {17, 6, 5, 7, 1, 1, 1, 3, 3, CQ_PAD_ZERO},       /* the vocoder's conv_in / conv_out */
    {23, 8, 8, 3, 1, 5, 1, 5, 5, CQ_PAD_ZERO},       /* AMP block, dilation 5 ("same") */
    {20, 7, 7, 11, 1, 3, 1, 15, 15, CQ_PAD_ZERO},    /* kernel 11, dilation 3 */
    {30, 6, 6, 12, 2, 1, 6, 5, 6, CQ_PAD_REPLICATE}, /* the anti-aliasing low-pass: depthwise, stride 2 */
    {40, 1, 10, 16, 4, 1, 1, 12, 0, CQ_PAD_ZERO},    /* a causal STFT-like conv: one channel, stride = hop */
    {13, 9, 6, 3, 2, 2, 3, 2, 1, CQ_PAD_REFLECT},    /* groups 3 */
    {9, 4, 5, 5, 1, 1, 1, 4, 3, CQ_PAD_REFLECT},
    {12, 16, 24, 1, 1, 1, 1, 0, 0, CQ_PAD_ZERO},     /* pointwise */
    {6, 3, 4, 100, 1, 1, 1, 50, 49, CQ_PAD_ZERO},    /* a kernel longer than the signal */
};

/* L Cin Cout k stride groups crop_l crop_r */
static const int k_convt[][8] = {
    {9, 8, 4, 11, 5, 1, 3, 3},  /* the vocoder's first upsample: k 11, stride 5, padding 3 */
    {7, 6, 3, 4, 2, 1, 1, 1},   /* k 4, stride 2, padding 1 */
    {20, 5, 5, 12, 2, 5, 15, 15}, /* the anti-aliasing x2 upsample of 10 samples replicate-padded by 5 */
    {22, 4, 4, 43, 3, 4, 42, 40}, /* the BWE's hann-sinc x3 skip upsample of 8 samples padded by 7 */
    {5, 6, 9, 3, 1, 3, 0, 0},   /* groups 3, stride 1 */
    {4, 3, 2, 2, 3, 1, 0, 1},   /* stride > kernel: gaps */
    {1, 2, 3, 5, 2, 1, 0, 0},   /* one sample */
    {1500, 4, 128, 64, 32, 1, 16, 16}, /* long enough for the CPU's GEMM path to go in two chunks */
};

static void test_conv1d(void **state) {
    (void)state;
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(k_conv1d) + CQ_ARRAY_LEN(k_convt); i++) {
            if (!g.big && ci > 2 && (ci + i) % 3) continue;
            bool tr = i >= CQ_ARRAY_LEN(k_conv1d);
            int L, Cin, Cout, k, s, d = 1, G, pl, pr, mode = CQ_PAD_ZERO;
            if (!tr) {
                const int *p = k_conv1d[i];
                L = p[0], Cin = p[1], Cout = p[2], k = p[3], s = p[4], d = p[5], G = p[6], pl = p[7], pr = p[8],
                mode = p[9];
            } else {
                const int *p = k_convt[i - CQ_ARRAY_LEN(k_conv1d)];
                L = p[0], Cin = p[1], Cout = p[2], k = p[3], s = p[4], G = p[5], pl = p[6], pr = p[7];
            }
            int64_t Lo = tr ? (int64_t)(L - 1) * s + k - pl - pr : (L + pl + pr - (int64_t)d * (k - 1) - 1) / s + 1;
            tcase c;
            tc_init(&c, tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D, CQ_DTYPE_F32, run_conv1d,
                    "%s w=%s L%d %d->%d k%d s%d d%d g%d pad(%d,%d) %s", tr ? "conv_transpose1d" : "conv1d",
                    cq_dtype_name(k_codecs[ci]), L, Cin, Cout, k, s, d, G, pl, pr, k_pad_names[mode]);
            c.wdt = k_codecs[ci];
            c.tol_abs = TOL_MATMUL_ABS;
            c.tol_rel = TOL_MATMUL_REL;
            int ip[8] = {k, s, d, G, pl, pr, mode, tr};
            memcpy(c.ip, ip, sizeof ip);
            tc_act(&c, 0, CQ_DTYPE_F32, L, Cin, 1.0f);
            int64_t rows = tr ? Cin : Cout, mid = tr ? Cout / G : Cin / G, K = mid * k;
            int64_t w3[3] = {rows, mid, k}, w2[2] = {rows, K};
            float ws = 1.0f / sqrtf((float)(tr ? (Cin / G) * (k / s + 1) : K));
            bool ok = per_row_codec(k_codecs[ci]) || i % 2 ? tc_weight(&c, 1, k_codecs[ci], 2, w2, ws)
                                                           : tc_weight(&c, 1, k_codecs[ci], 3, w3, ws);
            if (!ok) {
                tc_free(&c);
                continue;
            }
            if (i % 3 != 2) tc_vec(&c, 2, Cout, 0.5f, 0.0f);
            c.nin = 3;
            tc_out(&c, CQ_DTYPE_F32, Lo, Cout);
            run_case(&c);
        }
}

static void test_conv1d_naive(void **state) {
    (void)state;
    for (size_t i = 0; i < CQ_ARRAY_LEN(k_conv1d) + CQ_ARRAY_LEN(k_convt); i++) {
        bool tr = i >= CQ_ARRAY_LEN(k_conv1d);
        int L, Cin, Cout, k, s, d = 1, G, pl, pr, mode = CQ_PAD_ZERO;
        if (!tr) {
            const int *p = k_conv1d[i];
            L = p[0], Cin = p[1], Cout = p[2], k = p[3], s = p[4], d = p[5], G = p[6], pl = p[7], pr = p[8], mode = p[9];
        } else {
            const int *p = k_convt[i - CQ_ARRAY_LEN(k_conv1d)];
            L = p[0], Cin = p[1], Cout = p[2], k = p[3], s = p[4], G = p[5], pl = p[6], pr = p[7];
        }
        int cig = Cin / G, cog = Cout / G;
        tcase c;
        tc_init(&c, tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D, CQ_DTYPE_F32, run_conv1d, "%s case %zu vs direct loop",
                tr ? "conv_transpose1d" : "conv1d", i);
        int ip[8] = {k, s, d, G, pl, pr, mode, tr};
        memcpy(c.ip, ip, sizeof ip);
        tc_act(&c, 0, CQ_DTYPE_F32, L, Cin, 1.0f);
        tc_act(&c, 1, CQ_DTYPE_F32, tr ? Cin : Cout, (int64_t)(tr ? cog : cig) * k, 0.3f);
        tc_vec(&c, 2, Cout, 0.5f, 0.0f);
        const float *x = c.in[0].v, *w = c.in[1].v, *bias = c.in[2].v;
        int64_t Lo;
        double *want;
        if (!tr) {
            /* pad explicitly, then correlate */
            int Lp = L + pl + pr;
            float *xp = calloc((size_t)Lp * Cin, sizeof(float));
            for (int t = 0; t < Lp; t++) {
                int src = t - pl;
                if (src < 0 || src >= L) {
                    if (mode == CQ_PAD_ZERO) continue;
                    src = mode == CQ_PAD_REPLICATE ? (src < 0 ? 0 : L - 1) : (src < 0 ? -src : 2 * (L - 1) - src);
                }
                memcpy(xp + (size_t)t * Cin, x + (size_t)src * Cin, sizeof(float) * (size_t)Cin);
            }
            Lo = (Lp - (int64_t)d * (k - 1) - 1) / s + 1;
            want = malloc(sizeof(double) * (size_t)(Lo * Cout));
            for (int64_t o = 0; o < Lo; o++)
                for (int co = 0; co < Cout; co++) {
                    double acc = bias[co];
                    for (int ci = 0; ci < cig; ci++)
                        for (int j = 0; j < k; j++)
                            acc += (double)w[((size_t)co * cig + ci) * k + j] *
                                   xp[(size_t)(o * s + j * d) * Cin + (co / cog) * cig + ci];
                    want[o * Cout + co] = acc;
                }
            free(xp);
        } else {
            /* scatter every input sample into the full result, then crop */
            int64_t full = (int64_t)(L - 1) * s + k;
            Lo = full - pl - pr;
            double *acc = calloc((size_t)(full * Cout), sizeof(double));
            for (int i2 = 0; i2 < L; i2++)
                for (int ci = 0; ci < Cin; ci++)
                    for (int col = 0; col < cog; col++)
                        for (int j = 0; j < k; j++)
                            acc[((int64_t)i2 * s + j) * Cout + (ci / cig) * cog + col] +=
                                (double)x[(size_t)i2 * Cin + ci] * w[((size_t)ci * cog + col) * k + j];
            want = malloc(sizeof(double) * (size_t)(Lo * Cout));
            for (int64_t o = 0; o < Lo; o++)
                for (int co = 0; co < Cout; co++) want[o * Cout + co] = acc[(o + pl) * Cout + co] + bias[co];
            free(acc);
        }
        tc_out(&c, CQ_DTYPE_F32, Lo, Cout);
        check_naive(&c, want, Lo * Cout);
        free(want);
    }
}

static cq_status run_snake(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_snake(be, out, IN(in, c, 0), IN(in, c, 1), IN(in, c, 2), c->ip[0] != 0, c->fp[0]);
}

static void test_snake(void **state) {
    (void)state;
    static const int k[][2] = {{1, 1}, {7, 5}, {33, 24}, {64, 100}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++)
        for (int v = 0; v < 4; v++) { /* logscale x beta */
            bool logscale = v & 1, beta = v & 2;
            tcase c;
            tc_init(&c, CQ_OP_SNAKE, CQ_DTYPE_F32, run_snake, "snake %dx%d %s%s", k[i][0], k[i][1],
                    beta ? "snakebeta" : "snake", logscale ? " logscale" : "");
            /* sin of an f32 argument a*x of up to ~30: its one rounding (and exp's of the logs) moves sin^2 by
             * about |a x| 2^-24 / (b + eps), a few 1e-6 of the output */
            c.tol_abs = 2e-6;
            c.tol_rel = 1e-5;
            c.ip[0] = logscale;
            c.fp[0] = 1e-9f;
            tc_act(&c, 0, CQ_DTYPE_F32, k[i][0], k[i][1], 2.0f);
            /* alpha, beta: logs around 0, or plain values in [0.5, 1.5) */
            tc_vec(&c, 1, k[i][1], logscale ? 0.5f : 0.25f, logscale ? 0.0f : 1.0f);
            if (beta) tc_vec(&c, 2, k[i][1], logscale ? 0.5f : 0.25f, logscale ? 0.0f : 1.0f);
            c.nin = 3;
            tc_out(&c, CQ_DTYPE_F32, k[i][0], k[i][1]);
            run_case(&c);
        }
}


/* ---- the video VAE and vocoder ops: activation dtypes and kernel edge paths -------------------------------- */
/* One conv3d case (p as k_conv3d's rows) with x in xdt, y in ydt and the kernel in codec wdt, 3-D or 2-D. */
static void conv3d_case(const int *p, cq_dtype wdt, cq_dtype xdt, cq_dtype ydt, bool w3d, bool bias) {
    w3d = w3d && !per_row_codec(wdt); /* as test_conv3d: a per-row codec's rows are the weight's first dimension */
    int64_t To = (p[0] + p[11] + p[12] - p[5]) / p[8] + 1, Ho = (p[1] + p[15] + p[16] - p[6]) / p[9] + 1,
            Wo = (p[2] + p[13] + p[14] - p[7]) / p[10] + 1;
    tcase c;
    tc_init(&c, CQ_OP_CONV3D, xdt, run_conv3d,
            "conv3d w=%s%s x=%s y=%s %dx%dx%dx%d->%d k%dx%dx%d s%dx%dx%d time(%d,%d) pad(%d,%d,%d,%d) %s",
            cq_dtype_name(wdt), w3d ? "(3-D)" : "", cq_dtype_name(xdt), cq_dtype_name(ydt), p[0], p[1], p[2], p[3],
            p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15], p[16], k_pad_names[p[17]]);
    c.wdt = wdt;
    c.tol_abs = TOL_MATMUL_ABS;
    c.tol_rel = TOL_MATMUL_REL;
    c.ip[0] = p[0];
    c.ip[1] = p[1];
    c.ip[2] = p[2];
    for (int j = 3; j < 16; j++) c.ip[j] = p[j + 2];
    tc_act(&c, 0, xdt, (int64_t)p[0] * p[1] * p[2], p[3], 1.0f);
    int64_t taps = (int64_t)p[5] * p[6] * p[7], K = p[3] * taps;
    int64_t w3[3] = {p[4], p[3], taps}, w2[2] = {p[4], K};
    if (!(w3d ? tc_weight(&c, 1, wdt, 3, w3, 1.0f / sqrtf((float)K)) : tc_weight(&c, 1, wdt, 2, w2, 1.0f / sqrtf((float)K)))) {
        tc_free(&c);
        return;
    }
    if (bias) tc_vec(&c, 2, p[4], 0.5f, 0.0f);
    c.nin = 3;
    tc_out(&c, ydt, To * Ho * Wo, p[4]);
    run_case(&c);
}

/* One conv1d / conv_transpose1d case: x in xdt, y in ydt, the kernel in codec wdt (3-D or 2-D). */
static void conv1d_case(bool tr, int L, int Cin, int Cout, int k, int s, int d, int G, int pl, int pr, int mode,
                        cq_dtype wdt, cq_dtype xdt, cq_dtype ydt, bool w3d, bool bias) {
    w3d = w3d && !per_row_codec(wdt);
    int64_t Lo = tr ? (int64_t)(L - 1) * s + k - pl - pr : (L + pl + pr - (int64_t)d * (k - 1) - 1) / s + 1;
    tcase c;
    tc_init(&c, tr ? CQ_OP_CONV_TRANSPOSE1D : CQ_OP_CONV1D, xdt, run_conv1d,
            "%s w=%s%s x=%s y=%s L%d %d->%d k%d s%d d%d g%d pad(%d,%d) %s", tr ? "conv_transpose1d" : "conv1d",
            cq_dtype_name(wdt), w3d ? "(3-D)" : "", cq_dtype_name(xdt), cq_dtype_name(ydt), L, Cin, Cout, k, s, d, G,
            pl, pr, k_pad_names[mode]);
    c.wdt = wdt;
    c.tol_abs = TOL_MATMUL_ABS;
    c.tol_rel = TOL_MATMUL_REL;
    int ip[8] = {k, s, d, G, pl, pr, mode, tr};
    memcpy(c.ip, ip, sizeof ip);
    tc_act(&c, 0, xdt, L, Cin, 1.0f);
    int64_t rows = tr ? Cin : Cout, mid = tr ? Cout / G : Cin / G, K = mid * k;
    int64_t w3[3] = {rows, mid, k}, w2[2] = {rows, K};
    float ws = 1.0f / sqrtf((float)(tr ? (Cin / G) * (k / s + 1) : K));
    if (!(w3d ? tc_weight(&c, 1, wdt, 3, w3, ws) : tc_weight(&c, 1, wdt, 2, w2, ws))) {
        tc_free(&c);
        return;
    }
    if (bias) tc_vec(&c, 2, Cout, 0.5f, 0.0f);
    c.nin = 3;
    tc_out(&c, ydt, Lo, Cout);
    run_case(&c);
}

/* What test_conv3d and test_conv1d leave out: 16-bit activations (x and y in f16 or bf16), every
 * weight codec on a few shapes, and shapes at the edges of the device kernels: channel counts that are and are
 * not multiples of the staging's four-channel groups and above one warp's 128-channel sweep, many output rows
 * (several staging blocks), output lengths that are not multiples of the transposed convolution's four outputs
 * per thread, strides larger than the kernel, the one-group conv1d (a GEMM on the CUDA backend) beside grouped and
 * depthwise ones (direct kernels), and with CQ_TEST_OPS_BIG or on a device backend a conv3d whose implicit matrix
 * is staged in two bands. */
static void test_ltx_dtypes_and_edges(void **state) {
    (void)state;
    /* T H W Cin Cout kt kh kw st sy sx pf pb pl pr pt pb mode */
    static const int c3[][18] = {
        {3, 5, 7, 8, 12, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_ZERO},        /* causal, Cin % 4 == 0 */
        {4, 6, 5, 132, 20, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, CQ_PAD_REPLICATE}, /* non-causal, > 128 channels */
        {2, 9, 11, 7, 5, 3, 3, 3, 1, 2, 2, 2, 0, 1, 1, 1, 1, CQ_PAD_ZERO},        /* odd channels, spatial stride */
        {5, 4, 6, 6, 9, 3, 3, 3, 2, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_REFLECT},      /* time stride */
        {3, 3, 3, 160, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, CQ_PAD_ZERO},       /* pointwise, wide */
        {2, 17, 19, 4, 6, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_ZERO},       /* 646 output rows */
        {4, 3, 4, 12, 7, 3, 1, 1, 1, 1, 1, 2, 0, 0, 0, 0, 0, CQ_PAD_ZERO},        /* time-only kernel, causal */
    };
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(c3); i++) {
            cq_dtype xdt = k_acts[xi], ydt = xdt;
            conv3d_case(c3[i], k_codecs[(i + xi) % CQ_ARRAY_LEN(k_codecs)], xdt, ydt, i % 3 == 0, i % 4 != 3);
            if (xi == 0) conv3d_case(c3[i], CQ_DTYPE_F16, xdt, ydt, false, true);
        }
    /* every codec on one LTX-like block (3x3x3, causal, 64 channels) with bf16 activations */
    static const int blk[18] = {3, 6, 5, 64, 32, 3, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1, CQ_PAD_ZERO};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        conv3d_case(blk, k_codecs[ci], CQ_DTYPE_BF16, CQ_DTYPE_BF16, ci % 2 == 0, true);
    /* two staging bands on the CUDA backend (256 MiB of f16 rows: 4854 rows of 27 x 1024 columns) */
    if (g.big || getenv("CQ_TEST_OPS_BACKEND")) {
        static const int two_bands[18] = {2, 50, 50, 1024, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, CQ_PAD_ZERO};
        conv3d_case(two_bands, CQ_DTYPE_BF16, CQ_DTYPE_BF16, CQ_DTYPE_BF16, false, true);
    }

    /* conv1d: L Cin Cout k s d G pl pr mode */
    static const int c1[][10] = {
        {50, 12, 20, 7, 1, 1, 1, 3, 3, CQ_PAD_ZERO},         /* one group: the GEMM */
        {41, 5, 3, 3, 2, 5, 1, 5, 4, CQ_PAD_REFLECT},        /* dilated, strided, reflect */
        {300, 140, 8, 3, 1, 2, 1, 2, 2, CQ_PAD_REPLICATE},   /* > 128 channels */
        {77, 16, 16, 12, 2, 1, 16, 5, 6, CQ_PAD_REPLICATE},  /* depthwise low-pass */
        {33, 12, 18, 5, 3, 2, 6, 4, 4, CQ_PAD_ZERO},         /* groups 6, 2 -> 3 channels each */
        {1, 4, 4, 1, 1, 1, 4, 0, 0, CQ_PAD_ZERO},            /* one sample, depthwise pointwise */
    };
    /* conv_transpose1d: L Cin Cout k s G crop_l crop_r */
    static const int ct[][8] = {
        {13, 24, 12, 16, 8, 1, 4, 4},   /* k 2s, one group */
        {20, 8, 8, 12, 2, 8, 15, 15},   /* depthwise x2 */
        {9, 140, 6, 3, 5, 1, 1, 0},     /* stride > kernel, > 128 channels, odd crop */
        {6, 6, 9, 7, 3, 3, 0, 2},       /* groups 3 */
        {1, 3, 5, 4, 4, 1, 0, 0},       /* one sample */
        {31, 4, 4, 43, 3, 4, 42, 40},   /* many taps per phase */
    };
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++) {
        cq_dtype xdt = k_acts[xi];
        for (size_t i = 0; i < CQ_ARRAY_LEN(c1); i++) {
            const int *p = c1[i];
            cq_dtype ydt = xdt;
            conv1d_case(false, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
                        k_codecs[(i + 2 * xi) % CQ_ARRAY_LEN(k_codecs)], xdt, ydt, i % 2 == 0, i % 3 != 2);
        }
        for (size_t i = 0; i < CQ_ARRAY_LEN(ct); i++) {
            const int *p = ct[i];
            cq_dtype ydt = xdt;
            conv1d_case(true, p[0], p[1], p[2], p[3], p[4], 1, p[5], p[6], p[7], CQ_PAD_ZERO,
                        k_codecs[(i + 3 * xi) % CQ_ARRAY_LEN(k_codecs)], xdt, ydt, i % 2 == 1, i % 3 != 1);
        }
    }
    /* every codec on the vocoder's shapes: a one-group conv, a depthwise filter and an upsampler */
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++) {
        conv1d_case(false, 40, 32, 64, 7, 1, 3, 1, 9, 9, CQ_PAD_ZERO, k_codecs[ci], CQ_DTYPE_F32, CQ_DTYPE_F32,
                    ci % 2 == 0, true);
        conv1d_case(false, 40, 32, 32, 12, 2, 1, 32, 5, 6, CQ_PAD_REPLICATE, k_codecs[ci], CQ_DTYPE_BF16,
                    CQ_DTYPE_BF16, ci % 2 == 1, false);
        conv1d_case(true, 20, 64, 32, 10, 5, 1, 1, 3, 2, CQ_PAD_ZERO, k_codecs[ci], CQ_DTYPE_F16, CQ_DTYPE_F16,
                    ci % 2 == 0, true);
    }

    /* snake and depth_to_space3d in 16-bit activations (in place for snake, as decoders run it) */
    for (size_t xi = 1; xi < CQ_ARRAY_LEN(k_acts); xi++) {
        for (int v = 0; v < 4; v++) {
            bool logscale = v & 1, beta = v & 2;
            tcase c;
            tc_init(&c, CQ_OP_SNAKE, k_acts[xi], run_snake, "snake x=%s 37x45 %s%s", cq_dtype_name(k_acts[xi]),
                    beta ? "snakebeta" : "snake", logscale ? " logscale" : "");
            c.tol_abs = 2e-6;
            c.tol_rel = 1e-5;
            c.ip[0] = logscale;
            c.fp[0] = 1e-9f;
            tc_act(&c, 0, k_acts[xi], 37, 45, 2.0f);
            tc_vec(&c, 1, 45, logscale ? 0.5f : 0.25f, logscale ? 0.0f : 1.0f);
            if (beta) tc_vec(&c, 2, 45, logscale ? 0.5f : 0.25f, logscale ? 0.0f : 1.0f);
            c.nin = 3;
            tc_out(&c, k_acts[xi], 37, 45);
            run_case(&c);
        }
        static const int k[][7] = {{2, 3, 4, 5, 2, 2, 2}, {3, 2, 5, 3, 1, 3, 2}, {2, 1, 1, 130, 2, 1, 1}};
        for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
            const int *p = k[i];
            int64_t P = (int64_t)p[4] * p[5] * p[6], vox = (int64_t)p[0] * p[1] * p[2];
            tcase c;
            tc_init(&c, CQ_OP_DEPTH_TO_SPACE3D, k_acts[xi], run_d2s3, "depth_to_space3d x=%s %dx%dx%dx%d p(%d,%d,%d)",
                    cq_dtype_name(k_acts[xi]), p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
            c.tol_abs = TOL_EXACT;
            for (int j = 0; j < 3; j++) c.ip[j] = p[j];
            for (int j = 3; j < 6; j++) c.ip[j] = p[j + 1];
            tc_act(&c, 0, k_acts[xi], vox, p[3] * P, 1.0f);
            tc_out(&c, k_acts[xi], vox * P, p[3]);
            run_case(&c);
        }
    }
}

/* Conversions at the edges of f16/bf16 (overflow to inf, subnormals, inf,
 * NaN) must match the reference bit for bit (NaN: any NaN). Exact ties in
 * the f16 subnormal range are left out: activations round them to even,
 * the file encoder away from zero. */
static void test_copy_edges(void **state) {
    (void)state;
    const float v[] = {0.0f,     -0.0f,    1.0f,     -2.5f,     65504.0f, 65519.0f, 65520.0f, 1e6f,
                       -1e6f,    6.1e-5f,  3e-6f,    -7.1e-8f,  1e-9f,    1.0000001f, 3.3e38f, -3.39e38f,
                       INFINITY, -INFINITY, NAN,     1.00390625f, 1.01171875f, 2049.0f, 2051.0f, 1e-40f};
    int64_t n = (int64_t)CQ_ARRAY_LEN(v);
    for (int b = -1; b < g.nbe; b++) {
        cq_backend *be = b < 0 ? g.ref : g.be[b];
        for (size_t yi = 1; yi < CQ_ARRAY_LEN(k_acts); yi++) {
            cq_tensor x, y;
            assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &n, &x), CQ_OK);
            assert_int_equal(cq_tensor_alloc(be, k_acts[yi], 1, &n, &y), CQ_OK);
            assert_int_equal(cq_tensor_upload(&x, v, sizeof v), CQ_OK);
            assert_int_equal(cq_op_copy(be, &y, &x), CQ_OK);
            uint16_t got[CQ_ARRAY_LEN(v)];
            assert_int_equal(cq_tensor_download(&y, got, sizeof got), CQ_OK);
            for (int64_t i = 0; i < n; i++) {
                uint16_t want = k_acts[yi] == CQ_DTYPE_F16 ? cq_f32_to_f16(v[i]) : cq_f32_to_bf16(v[i]);
                float fw = decode1(k_acts[yi], (const uint8_t *)&want), fg = decode1(k_acts[yi], (const uint8_t *)&got[i]);
                if (isnan(fw) ? !isnan(fg) : got[i] != want)
                    fail_msg("copy f32->%s of %g on %s: 0x%04x, want 0x%04x", cq_dtype_name(k_acts[yi]), v[i],
                             cq_backend_name(be), got[i], want);
            }
            /* and back to f32 exactly */
            cq_tensor z;
            assert_int_equal(cq_tensor_alloc(be, CQ_DTYPE_F32, 1, &n, &z), CQ_OK);
            assert_int_equal(cq_op_copy(be, &z, &y), CQ_OK);
            float back[CQ_ARRAY_LEN(v)];
            assert_int_equal(cq_tensor_download(&z, back, sizeof back), CQ_OK);
            for (int64_t i = 0; i < n; i++) {
                float want = decode1(k_acts[yi], (const uint8_t *)&got[i]);
                if (isnan(want) ? !isnan(back[i]) : memcmp(&want, &back[i], 4))
                    fail_msg("copy %s->f32 of 0x%04x on %s: %g, want %g", cq_dtype_name(k_acts[yi]), got[i],
                             cq_backend_name(be), back[i], want);
            }
            cq_tensor_free(&x);
            cq_tensor_free(&y);
            cq_tensor_free(&z);
        }
    }
}

/* ---- image ops ------------------------------------------------------------------------------------------ */
static cq_status run_conv(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    cq_conv2d_args a = {.y = out, .x = IN(in, c, 0), .w = IN(in, c, 1), .bias = IN(in, c, 2), .H = c->ip[0],
                        .W = c->ip[1], .kh = c->ip[2], .kw = c->ip[3], .stride_y = c->ip[4], .stride_x = c->ip[5],
                        .pad_l = c->ip[6], .pad_r = c->ip[7], .pad_t = c->ip[8], .pad_b = c->ip[9],
                        .mode = (cq_pad_mode)c->ip[10]};
    return cq_op_conv2d(be, &a);
}

static void test_conv2d(void **state) {
    (void)state;
    /* H, W, Cin, Cout, kh, kw, sy, sx, pl, pr, pt, pb, mode */
    static const int k[][13] = {
        {5, 7, 16, 8, 1, 1, 1, 1, 0, 0, 0, 0, CQ_PAD_ZERO},       {9, 11, 3, 17, 3, 3, 1, 1, 1, 1, 1, 1, CQ_PAD_ZERO},
        {8, 9, 8, 33, 3, 3, 2, 2, 1, 1, 1, 1, CQ_PAD_REPLICATE},  {6, 5, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, CQ_PAD_REFLECT},
        {7, 6, 5, 6, 3, 3, 1, 2, 2, 0, 1, 0, CQ_PAD_ZERO},        {10, 8, 6, 7, 4, 2, 2, 1, 1, 0, 2, 1, CQ_PAD_REFLECT},
        {12, 12, 2, 3, 9, 9, 1, 1, 4, 4, 4, 4, CQ_PAD_REPLICATE}, {16, 16, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, CQ_PAD_ZERO},
        {4, 4, 64, 32, 1, 1, 2, 2, 0, 0, 0, 0, CQ_PAD_ZERO},      {3, 1, 32, 5, 3, 3, 1, 1, 1, 1, 2, 0, CQ_PAD_ZERO},
    };
    static const char *const pm[] = {"zero", "replicate", "reflect"};
    for (size_t ci = 0; ci < CQ_ARRAY_LEN(k_codecs); ci++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
            if (!g.big && (ci + i) % 2) continue; /* every codec and every geometry, half the pairs */
            const int *p = k[i];
            int64_t Ho = (p[0] + p[10] + p[11] - p[4]) / p[6] + 1, Wo = (p[1] + p[8] + p[9] - p[5]) / p[7] + 1;
            for (size_t xi = 0; xi < (ci == 0 ? CQ_ARRAY_LEN(k_acts) : 1); xi++) {
                cq_dtype xdt = k_acts[xi];
                tcase c;
                tc_init(&c, CQ_OP_CONV2D, xdt, run_conv, "conv2d w=%s x=%s %dx%dx%d->%d k%dx%d s%dx%d pad(%d,%d,%d,%d) %s",
                        cq_dtype_name(k_codecs[ci]), cq_dtype_name(xdt), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7],
                        p[8], p[9], p[10], p[11], pm[p[12]]);
                c.wdt = k_codecs[ci];
                c.tol_abs = TOL_MATMUL_ABS;
                c.tol_rel = TOL_MATMUL_REL;
                for (int j = 0; j < 4; j++) c.ip[j] = p[j < 2 ? j : j + 2];
                c.ip[4] = p[6];
                c.ip[5] = p[7];
                c.ip[6] = p[8];
                c.ip[7] = p[9];
                c.ip[8] = p[10];
                c.ip[9] = p[11];
                c.ip[10] = p[12];
                tc_act(&c, 0, xdt, (int64_t)p[0] * p[1], p[2], 1.0f);
                int64_t K = (int64_t)p[2] * p[4] * p[5];
                int64_t w4[4] = {p[3], p[2], p[4], p[5]}, w2[2] = {p[3], K};
                bool ok = per_row_codec(k_codecs[ci]) ? tc_weight(&c, 1, k_codecs[ci], 2, w2, 1.0f / sqrtf((float)K))
                                                      : tc_weight(&c, 1, k_codecs[ci], 4, w4, 1.0f / sqrtf((float)K));
                if (!ok) {
                    tc_free(&c);
                    continue;
                }
                if (i % 3 != 1) tc_vec(&c, 2, p[3], 0.5f, 0.0f);
                c.nin = 3;
                tc_out(&c, xdt, Ho * Wo, p[3]);
                run_case(&c);
            }
        }
}

static cq_status run_upsample(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return cq_op_upsample_nearest(be, out, IN(in, c, 0), c->ip[0], c->ip[1], c->ip[2]);
}
static cq_status run_shuffle(cq_backend *be, cq_tensor *out, cq_tensor **in, const tcase *c) {
    return c->ip[3] ? cq_op_pixel_unshuffle(be, out, IN(in, c, 0), c->ip[0], c->ip[1], c->ip[2])
                    : cq_op_pixel_shuffle(be, out, IN(in, c, 0), c->ip[0], c->ip[1], c->ip[2]);
}

static void test_resample(void **state) {
    (void)state;
    static const int k[][4] = {{1, 1, 1, 1}, {3, 5, 17, 2}, {4, 3, 8, 3}, {2, 7, 3, 2}, {1, 4, 5, 4}};
    for (size_t xi = 0; xi < CQ_ARRAY_LEN(k_acts); xi++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(k); i++) {
            int H = k[i][0], W = k[i][1], C = k[i][2], f = k[i][3];
            cq_dtype dt = k_acts[xi];
            tcase c;
            tc_init(&c, CQ_OP_UPSAMPLE_NEAREST, dt, run_upsample, "upsample x=%s %dx%dx%d f=%d", cq_dtype_name(dt), H, W, C, f);
            c.tol_abs = TOL_EXACT;
            c.ip[0] = H;
            c.ip[1] = W;
            c.ip[2] = f;
            tc_act(&c, 0, dt, (int64_t)H * W, C, 1.0f);
            tc_out(&c, dt, (int64_t)H * W * f * f, C);
            run_case(&c);

            tc_init(&c, CQ_OP_PIXEL_SHUFFLE, dt, run_shuffle, "pixel_shuffle x=%s %dx%dx%d r=%d", cq_dtype_name(dt), H, W,
                    C * f * f, f);
            c.tol_abs = TOL_EXACT;
            c.ip[0] = H;
            c.ip[1] = W;
            c.ip[2] = f;
            tc_act(&c, 0, dt, (int64_t)H * W, (int64_t)C * f * f, 1.0f);
            tc_out(&c, dt, (int64_t)H * W * f * f, C);
            run_case(&c);

            tc_init(&c, CQ_OP_PIXEL_UNSHUFFLE, dt, run_shuffle, "pixel_unshuffle x=%s %dx%dx%d r=%d", cq_dtype_name(dt), H,
                    W, C, f);
            c.op = CQ_OP_PIXEL_UNSHUFFLE;
            c.tol_abs = TOL_EXACT;
            c.ip[0] = H;
            c.ip[1] = W;
            c.ip[2] = f;
            c.ip[3] = 1;
            tc_act(&c, 0, dt, (int64_t)H * W * f * f, C, 1.0f);
            tc_out(&c, dt, (int64_t)H * W, (int64_t)C * f * f);
            run_case(&c);
        }
}

/* pixel_unshuffle must invert pixel_shuffle exactly (checked on the fast backends). */
static void test_shuffle_roundtrip(void **state) {
    (void)state;
    for (int b = 0; b < g.nbe; b++) {
        cq_backend *be = g.be[b];
        int H = 3, W = 5, C = 7, r = 2;
        cq_tensor x, y, z;
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, H * W, C * r * r, &x), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, H * W * r * r, C, &y), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, H * W, C * r * r, &z), CQ_OK);
        float v[3 * 5 * 28], back[3 * 5 * 28];
        for (int i = 0; i < H * W * C * r * r; i++) v[i] = (float)i;
        assert_int_equal(cq_tensor_upload(&x, v, sizeof v), CQ_OK);
        if (!cq_backend_supports(be, CQ_OP_PIXEL_SHUFFLE, CQ_DTYPE_COUNT, CQ_DTYPE_F32) ||
            !cq_backend_supports(be, CQ_OP_PIXEL_UNSHUFFLE, CQ_DTYPE_COUNT, CQ_DTYPE_F32)) {
            /* a backend that runs neither says so (the op cases above check each on its own) */
            cq_status s1 = cq_op_pixel_shuffle(be, &y, &x, H, W, r), s2 = cq_op_pixel_unshuffle(be, &z, &y, H, W, r);
            assert_true(s1 == CQ_ERR_UNSUPPORTED || s2 == CQ_ERR_UNSUPPORTED);
            cq_tensor_free(&x);
            cq_tensor_free(&y);
            cq_tensor_free(&z);
            continue;
        }
        assert_int_equal(cq_op_pixel_shuffle(be, &y, &x, H, W, r), CQ_OK);
        assert_int_equal(cq_op_pixel_unshuffle(be, &z, &y, H, W, r), CQ_OK);
        assert_int_equal(cq_tensor_download(&z, back, sizeof back), CQ_OK);
        assert_memory_equal(v, back, sizeof v);
        /* Spot-check PyTorch's order: input channel c*r*r + i*r + j of pixel
         * (h, w) lands at output pixel (r*h + i, r*w + j), channel c. */
        float out[3 * 5 * 28];
        assert_int_equal(cq_tensor_download(&y, out, sizeof out), CQ_OK);
        int h = 2, w = 3, c = 5, i = 1, j = 0;
        assert_float_equal(out[((r * h + i) * (W * r) + r * w + j) * C + c], v[(h * W + w) * C * r * r + c * r * r + i * r + j],
                           0.0f);
        cq_tensor_free(&x);
        cq_tensor_free(&y);
        cq_tensor_free(&z);
    }
}

/* ---- setup ------------------------------------------------------------------------------------------------- */
/* The backend CQ_TEST_OPS_BACKEND names, with the options the CORTIQ_* variables give (CORTIQ_CUDA_GEMM, ...)
 * and no fallback: the test is of the backend's own ops, and an unsupported combination must fail. */
static cq_status open_only(const char *name, cq_backend **out) {
    cq_backend_opts o;
    CQ_TRY(cq_env_backend_opts(name, &o));
    o.cpu.threads = 2;
    o.no_fallback = true;
    return cq_backend_open(name, &o, out);
}

static int setup(void **state) {
    (void)state;
    memset(&g, 0, sizeof g);
    tu_rng_seed(&g.rng, 20260601);
    const char *big = getenv("CQ_TEST_OPS_BIG");
    g.big = big && *big && *big != '0';
    const char *tiles = getenv("CQ_TEST_OPS_TILES");
    g.tiles = tiles && *tiles && *tiles != '0';
    const char *hs = getenv("CQ_TEST_OPS_HALF_SUBSET"); /* e.g. 4: one 16-bit attention case in 4, matmul 1 in 2 */
    g.half_subset = hs && *hs ? atoi(hs) : 0;
    if (cq_backend_ref_create(&g.ref) != CQ_OK) return -1;
    const char *only = getenv("CQ_TEST_OPS_BACKEND");
    if (only && *only) {
        if (open_only(only, &g.be[0]) != CQ_OK) return -1; /* main() checked that it opens */
        g.nbe = 1;
        printf("op test on: %s vs %s%s\n", cq_backend_name(g.be[0]), cq_backend_name(g.ref), g.big ? " (big sweep)" : "");
        return 0;
    }
    /* Every ISA this machine runs, with awkward thread counts; plus the best
     * one single-threaded. */
    const char *th = getenv("CQ_TEST_OPS_THREADS"); /* e.g. 1 under an emulator */
    int force = th && *th ? atoi(th) : 0;
    for (int isa = CQ_CPU_GENERIC; isa < CQ_CPU_ISA_COUNT; isa++) {
        if (!cq_cpu_isa_available((cq_cpu_isa)isa)) continue;
        int threads = force > 0 ? force : isa == CQ_CPU_GENERIC ? 3 : 2;
        if (cq_backend_cpu_create(threads, (cq_cpu_isa)isa, &g.be[g.nbe]) != CQ_OK) return -1;
        g.nbe++;
    }
    if (cq_backend_cpu_create(1, CQ_CPU_AUTO, &g.be[g.nbe]) != CQ_OK) return -1;
    g.nbe++;
    printf("op test on:");
    for (int b = 0; b < g.nbe; b++) printf(" %s", cq_backend_name(g.be[b]));
    printf(" vs %s%s\n", cq_backend_name(g.ref), g.big ? " (big sweep)" : "");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    printf("op test: %ld cases, %ld comparisons, %ld unsupported combinations confirmed, worst error/limit %.3f (%s)\n",
           g.cases, g.compared, g.unsupported, g.worst, g.worst_label);
    for (int b = 0; b < g.nbe; b++) cq_backend_free(g.be[b]);
    cq_backend_free(g.ref);
    return 0;
}

/* ---- recordings (ops.h) ---------------------------------------------------------------------------------- */
/* z = x * silu(x), the two ops recorded or run directly */
static cq_status rec_ops(cq_backend *be, cq_tensor *y, cq_tensor *z, const cq_tensor *x) {
    cq_status s = cq_op_unary(be, y, x, CQ_UNARY_SILU, 0.0f, 0.0f);
    return s == CQ_OK ? cq_op_binary(be, z, y, x, CQ_BINARY_MUL) : s;
}

/* Host backends cannot record and say so; a device backend records two ops, refuses an upload inside a
 * recording, and its replays read what was uploaded since, bit for bit as the ops run directly. */
static void test_recordings(void **state) {
    (void)state;
    for (int b = 0; b < g.nbe; b++) {
        cq_backend *be = g.be[b];
        cq_recording *rec = NULL;
        if (!cq_backend_can_record(be)) {
            assert_int_equal(cq_backend_record_begin(be), CQ_ERR_UNSUPPORTED);
            assert_int_equal(cq_backend_record_end(be, false, NULL), CQ_ERR_UNSUPPORTED);
            assert_int_equal(cq_backend_record_end(be, true, &rec), CQ_ERR_UNSUPPORTED);
            assert_null(rec);
            assert_int_equal(cq_recording_replay(NULL), CQ_ERR_INVALID_ARG);
            cq_recording_free(NULL);
            continue;
        }
        enum { R = 7, C = 33, N = R * C };
        cq_tensor x, y, z;
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, R, C, &x), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, R, C, &y), CQ_OK);
        assert_int_equal(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, R, C, &z), CQ_OK);
        float v1[N], v2[N], want1[N], want2[N], got[N];
        tu_fill_normal(&g.rng, v1, N, 1.0f);
        tu_fill_normal(&g.rng, v2, N, 2.0f);
        /* directly */
        assert_int_equal(cq_tensor_upload(&x, v1, sizeof v1), CQ_OK);
        assert_int_equal(rec_ops(be, &y, &z, &x), CQ_OK);
        assert_int_equal(cq_tensor_download(&z, want1, sizeof want1), CQ_OK);
        assert_int_equal(cq_tensor_upload(&x, v2, sizeof v2), CQ_OK);
        assert_int_equal(rec_ops(be, &y, &z, &x), CQ_OK);
        assert_int_equal(cq_tensor_download(&z, want2, sizeof want2), CQ_OK);
        /* an upload cannot be recorded: refused, and the failed recording ends without a trace */
        assert_int_equal(cq_backend_record_begin(be), CQ_OK);
        assert_int_equal(cq_tensor_upload(&x, v1, sizeof v1), CQ_ERR_INVALID_ARG);
        assert_int_equal(cq_backend_record_end(be, false, NULL), CQ_OK);
        /* recorded once, replayed on two inputs */
        assert_int_equal(cq_backend_record_begin(be), CQ_OK);
        assert_int_equal(rec_ops(be, &y, &z, &x), CQ_OK);
        assert_int_equal(cq_backend_record_end(be, true, &rec), CQ_OK);
        assert_non_null(rec);
        assert_int_equal(cq_tensor_upload(&x, v1, sizeof v1), CQ_OK);
        assert_int_equal(cq_recording_replay(rec), CQ_OK);
        assert_int_equal(cq_tensor_download(&z, got, sizeof got), CQ_OK);
        assert_memory_equal(got, want1, sizeof got);
        assert_int_equal(cq_tensor_upload(&x, v2, sizeof v2), CQ_OK);
        assert_int_equal(cq_recording_replay(rec), CQ_OK);
        assert_int_equal(cq_tensor_download(&z, got, sizeof got), CQ_OK);
        assert_memory_equal(got, want2, sizeof got);
        cq_recording_free(rec);
        cq_tensor_free(&x);
        cq_tensor_free(&y);
        cq_tensor_free(&z);
    }
}

int main(void) {
    const char *only = getenv("CQ_TEST_OPS_BACKEND");
    if (only && *only) {
        /* a GPU run: skip (ctest shows "Skipped") when the backend cannot open here */
        cq_backend *probe = NULL;
        cq_status s = open_only(only, &probe);
        if (s != CQ_OK) {
            printf("test_ops: skipped: backend '%s' is not available: %s\n", only, cq_last_error());
            return s == CQ_ERR_UNSUPPORTED ? SKIP : 1;
        }
        cq_backend_free(probe);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),        cmocka_unit_test(test_attention),    cmocka_unit_test(test_norms),
        cmocka_unit_test(test_groupnorm),     cmocka_unit_test(test_group_moments),
        cmocka_unit_test(test_qk_norm_rope), cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_data_movement), cmocka_unit_test(test_conv2d),       cmocka_unit_test(test_resample),
        cmocka_unit_test(test_shuffle_roundtrip), cmocka_unit_test(test_copy_edges),
        cmocka_unit_test(test_recordings),
        cmocka_unit_test(test_conv3d),         cmocka_unit_test(test_conv3d_naive),
        cmocka_unit_test(test_depth_to_space3d), cmocka_unit_test(test_conv1d),
        cmocka_unit_test(test_conv1d_naive),   cmocka_unit_test(test_snake),
        cmocka_unit_test(test_ltx_dtypes_and_edges),
    };
    const char *filter = getenv("CQ_TEST_OPS_FILTER"); /* e.g. "test_matmul" or "test_*norm*" */
    if (filter && *filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, setup, teardown);
}
