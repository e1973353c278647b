/*
 * cpu.c — CPU feature detection, compiled WITHOUT ISA flags so it runs on any
 * machine. On x86-64 it combines CPUID with XGETBV (the OS must save the
 * AVX/AVX-512 register state) and asks Linux for permission to use AMX tile
 * data; on ARM64 it reads the auxiliary vector.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#include <sys/syscall.h>

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    /* xgetbv with ecx = 0, encoded as bytes so no -mxsave is needed */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static bool request_amx(void) {
#ifdef __linux__
    /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
    long r = syscall(SYS_arch_prctl, 0x1023, 18);
    return r == 0;
#else
    return false;
#endif
}

static void detect(cq_cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = (c >> 27) & 1;
    f->sse42 = (c >> 20) & 1;
    f->fma = (c >> 12) & 1;
    f->f16c = (c >> 29) & 1;
    bool avx_hw = (c >> 28) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;        /* XMM + YMM state */
    bool os_avx512 = (xcr0 & 0xe6) == 0xe6;   /* + opmask, ZMM_Hi256, Hi16_ZMM */
    bool os_amx = (xcr0 & 0x60000) == 0x60000; /* XTILECFG + XTILEDATA */
    f->avx = avx_hw && os_avx;
    if (!f->avx) f->fma = f->f16c = false;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f->avx2 = f->avx && ((b >> 5) & 1);
        if (os_avx512) {
            f->avx512f = (b >> 16) & 1;
            f->avx512dq = (b >> 17) & 1;
            f->avx512bw = (b >> 30) & 1;
            f->avx512vl = (b >> 31) & 1;
            f->avx512vnni = (c >> 11) & 1;
        }
        bool amx_tile = (d >> 24) & 1, amx_bf16 = (d >> 22) & 1, amx_int8 = (d >> 25) & 1;
        if (amx_tile && os_amx && request_amx()) {
            f->amx_tile = true;
            f->amx_bf16 = amx_bf16;
            f->amx_int8 = amx_int8;
        }
        unsigned a1, b1, c1, d1;
        if (os_avx512 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f->avx512bf16 = (a1 >> 5) & 1;
    }
    /* brand string */
    unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
    if (max_ext >= 0x80000004u) {
        unsigned regs[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
        memcpy(f->model, regs, 48);
        f->model[48] = '\0';
        /* trim leading/trailing spaces */
        char *s = f->model;
        while (*s == ' ') s++;
        memmove(f->model, s, strlen(s) + 1);
        size_t n = strlen(f->model);
        while (n && f->model[n - 1] == ' ') f->model[--n] = '\0';
    }
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1 << 14)
#endif
static void detect(cq_cpu_features *f) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->neon = (hw & HWCAP_ASIMD) != 0;
    f->neon_fp16 = (hw & HWCAP_FPHP) != 0;
    f->neon_dotprod = (hw & HWCAP_ASIMDDP) != 0;
    f->neon_bf16 = (hw2 & HWCAP2_BF16) != 0;
    snprintf(f->model, sizeof f->model, "aarch64");
}
#else
static void detect(cq_cpu_features *f) { snprintf(f->model, sizeof f->model, "generic"); }
#endif

static cq_cpu_features g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void cpu_init(void) {
    memset(&g_cpu, 0, sizeof g_cpu);
    detect(&g_cpu);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    g_cpu.logical_cores = n > 0 ? (int)n : 1;
    if (!g_cpu.model[0]) snprintf(g_cpu.model, sizeof g_cpu.model, "unknown");
}

const cq_cpu_features *cq_cpu(void) {
    pthread_once(&g_cpu_once, cpu_init);
    return &g_cpu;
}
