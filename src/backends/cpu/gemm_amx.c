/*
 * gemm_amx.c — the AMX kit: the AVX-512 kit (f32 microkernel, decoders,
 * attention helpers, q4 grouped pair kernel) with the bf16-pair microkernel
 * on AMX tiles. Compiled with the AMX flags; only called when cq_cpu()
 * reports AMX-TILE and AMX-BF16 with the Linux permission for tile data
 * granted (cpu.c asks with arch_prctl(ARCH_REQ_XCOMP_PERM); where that is
 * refused the backend never picks this kit and falls back to AVX-512).
 *
 * The pair tile is 32 weight rows x 32 activation columns: four 16 x 16 f32
 * accumulator tiles (tmm0..3), two A tiles of 16 weight rows x 16 pairs
 * (tmm4, tmm5) and two B tiles of 16 pairs x 16 columns (tmm6, tmm7). The
 * driver's layouts are already what TDPBF16PS wants: A rows of pairs at a
 * stride, B as [pair][column] dwords ("VNNI" layout). Pairs beyond the last
 * multiple of 16 go through the AVX-512 VDPBF16PS kernel on the stored C.
 * TDPBF16PS, like VDPBF16PS, adds exact bf16 products into f32 (denormals
 * flushed).
 *
 * Checked on a Xeon with AMX (Sapphire Rapids class, 16 cores): test_cpu_kits
 * (this kernel against exact sums), test_ops (every op on cpu/amx against the
 * reference) and the Qwen-Image-2.1 goldens with CORTIQ_CPU=amx all pass; the
 * op test covers it automatically wherever the machine has AMX.
 */
#include <immintrin.h>
#include <pthread.h>

#include "backends/cpu/cpu_impl.h"

enum { MR2 = 32, NR2 = 32, TK = 16 /* pairs per tile step */ };

/* LDTILECFG's 64-byte operand (palette 1). */
typedef struct tile_cfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

static const cq_cpu_kit *g_avx512; /* the kit this one extends */

/* The configuration lives in static storage: GCC 12 does not model
 * _tile_loadconfig's read of its operand, and dropped the stores that filled
 * a stack copy (the tiles then loaded a palette-1 header over stale bytes and
 * LDTILECFG faulted). Eight 16-row x 64-byte tiles. */
static const tile_cfg k_tile_cfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static void amx_begin(void) { _tile_loadconfig(&k_tile_cfg); }

/* Leave the thread's tile state clean for any other code that runs on it. */
static void amx_end(void) { _tile_release(); }

static void uk_pair_amx(int64_t kp, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                        int64_t ldc, int acc) {
    const int64_t kt = kp / TK * TK;
    const size_t sc = (size_t)ldc * sizeof(float), sa = (size_t)lda * 4, sb = (size_t)ldb * 4;
    if (kt > 0) {
        if (acc) {
            _tile_loadd(0, c, sc);
            _tile_loadd(1, c + 16, sc);
            _tile_loadd(2, c + 16 * ldc, sc);
            _tile_loadd(3, c + 16 * ldc + 16, sc);
        } else {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
        }
        for (int64_t p = 0; p < kt; p += TK) {
            _tile_loadd(4, a + p, sa);
            _tile_loadd(5, a + 16 * lda + p, sa);
            _tile_loadd(6, b + p * ldb, sb);
            _tile_loadd(7, b + p * ldb + 16, sb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, c, sc);
        _tile_stored(1, c + 16, sc);
        _tile_stored(2, c + 16 * ldc, sc);
        _tile_stored(3, c + 16 * ldc + 16, sc);
    }
    if (kt < kp) { /* the remaining pairs, 8 rows at a time on VDPBF16PS */
        const int mr = g_avx512->mr2;
        for (int i = 0; i < MR2; i += mr)
            g_avx512->ukernel_pair(kp - kt, a + i * lda + kt, lda, b + kt * ldb, ldb, c + i * ldc, ldc, kt > 0 || acc);
    }
}

/* q4 weights need a scale per group of 16 pairs between products, which
 * tiles do not offer cheaply: the AVX-512 grouped kernel, 8 rows at a time. */
static void uk_pair_grouped_amx(int64_t kp, int64_t gp, const uint32_t *a, int64_t lda, const uint32_t *b, int64_t ldb,
                                const float *s, int64_t lds, float *c, int64_t ldc, int acc) {
    const int mr = g_avx512->mr2;
    for (int i = 0; i < MR2; i += mr)
        g_avx512->ukernel_pair_grouped(kp, gp, a + i * lda, lda, b, ldb, s + i * lds, lds, c + i * ldc, ldc, acc);
}

static cq_cpu_kit k_amx;
static pthread_once_t k_amx_once = PTHREAD_ONCE_INIT;

static void amx_init(void) {
    g_avx512 = cq_cpu_kit_avx512();
    k_amx = *g_avx512;
    k_amx.isa = CQ_CPU_AMX;
    k_amx.name = "amx";
    k_amx.mr2 = MR2;
    k_amx.nr2 = NR2;
    k_amx.ukernel_pair = uk_pair_amx;
    k_amx.ukernel_pair_grouped = g_avx512->ukernel_pair_grouped ? uk_pair_grouped_amx : NULL;
    k_amx.pair_begin = amx_begin;
    k_amx.pair_end = amx_end;
}

const cq_cpu_kit *cq_cpu_kit_amx(void) {
    pthread_once(&k_amx_once, amx_init);
    return &k_amx;
}
