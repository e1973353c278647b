/*
 * bench_hash.c — `cortiq bench hash`: the throughput of the format's hash64
 * as the reader uses it to check tensors on first read (one thread, and a
 * pool splitting long spans), on a buffer in memory or on every tensor of a
 * pack — what checking a model costs at load, and a fast whole-pack check of
 * the tensor hashes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_pack.h"
#include "cli/cli.h"
#include "format/cmf.h"

static void usage(FILE *f) {
    fprintf(f, "usage: cortiq bench hash [PACK.cmf] [--mib N] [--threads N] [--runs N]\n\n"
               "hash64 throughput (GB/s) on 1 thread and on a pool of --threads (default: CORTIQ_THREADS or\n"
               "all cores), as the reader checks a tensor the first time it is read (spans of 4 MiB or more\n"
               "are split over the pool).\n"
               "Without PACK: a random buffer of N MiB (default 512), for 1, 2, 4, ... threads.\n"
               "With PACK: every tensor of the pack, each hashed as loading checks it. The first pass reads\n"
               "the file as the page cache holds it (drop the cache first for a cold read); the runs after\n"
               "it are warm. Also checks every tensor's hash (exit 1 naming a mismatch).\n");
}

typedef struct span {
    const uint8_t *p;
    uint64_t len, want;
    const char *name;
} span;

/* Hash every span (each one like a first-read check); seconds, and the number of mismatches. */
static double hash_spans(const span *s, size_t n, cq_pool *pool, size_t *bad, const char **first_bad) {
    double t0 = cq_now();
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        cq_hash64_state st;
        cq_hash64_init(&st);
        cq_hash64_update_pool(&st, s[i].p, (size_t)s[i].len, s[i].len >= CQ_HASH64_PAR_MIN ? pool : NULL);
        if (cq_hash64_final(&st) != s[i].want && (*bad)++ == 0) *first_bad = s[i].name;
    }
    return cq_now() - t0;
}

static double median_run(const span *s, size_t n, cq_pool *pool, int runs) {
    double t[64];
    size_t bad;
    const char *fb = NULL;
    if (runs > 64) runs = 64;
    for (int r = 0; r < runs; r++) t[r] = hash_spans(s, n, pool, &bad, &fb);
    return cq_bench_median(t, runs);
}

static int run_pack(const char *path, int threads, int runs) {
    cq_cmf_open_opts oo = {.no_verify = true};
    cq_cmf *c = NULL;
    cq_status s = cq_cmf_open_ex(path, &oo, &c);
    if (s != CQ_OK) return cq_cli_fail("bench hash", s, NULL);
    size_t n = cq_cmf_tensor_count(c);
    span *sp = cq_calloc(n ? n : 1, sizeof *sp);
    cq_pool *pool = NULL;
    if (!sp || (threads > 1 && cq_pool_create(threads, &pool) != CQ_OK)) {
        cq_free(sp);
        cq_cmf_close(c);
        return cq_cli_fail("bench hash", CQ_ERR_NOMEM, NULL);
    }
    uint64_t bytes = 0, large = 0;
    for (size_t i = 0; i < n; i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(c, i);
        sp[i] = (span){t->data, t->nbytes, t->hash, t->name};
        bytes += t->nbytes;
        if (t->nbytes >= CQ_HASH64_PAR_MIN) large += t->nbytes;
    }
    double gb = (double)bytes / 1e9;
    printf("%s: %zu tensors, %.3f GB of payload (%.0f%% in tensors of 4 MiB or more)\n", path, n, gb,
           bytes ? 100.0 * (double)large / (double)bytes : 0.0);
    size_t bad = 0;
    const char *first_bad = NULL;
    double cold = hash_spans(sp, n, pool, &bad, &first_bad);
    printf("  first pass, %2d thread%s: %8.3f s  %7.2f GB/s  (the file as the page cache held it)\n", threads,
           threads == 1 ? " " : "s", cold, gb / cold);
    double one = median_run(sp, n, NULL, runs);
    printf("  warm,        1 thread : %8.3f s  %7.2f GB/s\n", one, gb / one);
    if (pool) {
        double many = median_run(sp, n, pool, runs);
        printf("  warm,       %2d threads: %8.3f s  %7.2f GB/s\n", threads, many, gb / many);
    }
    int rc = 0;
    if (bad) {
        cq_fail(CQ_ERR_HASH, "%zu tensor%s do not match their recorded hash, the first '%s'; run `cortiq verify %s`",
                bad, bad == 1 ? "" : "s", first_bad, path);
        rc = cq_cli_fail("bench hash", CQ_ERR_HASH, NULL);
    } else {
        printf("  every tensor matches its recorded hash\n");
    }
    cq_pool_free(pool);
    cq_free(sp);
    cq_cmf_close(c);
    return rc;
}

static int run_buffer(uint64_t mib, int threads, int runs) {
    size_t len = (size_t)(mib << 20);
    uint8_t *buf = cq_malloc(len);
    if (!buf) return cq_cli_fail("bench hash", CQ_ERR_NOMEM, NULL);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    span sp = {buf, len, cq_hash64(buf, len), "buffer"};
    printf("hash64 of a %llu MiB buffer in memory (median of %d runs):\n", (unsigned long long)mib, runs);
    int rc = 0;
    for (int t = 1; t <= threads; t = t < threads && 2 * t > threads ? threads : 2 * t) {
        cq_pool *pool = NULL;
        if (t > 1 && cq_pool_create(t, &pool) != CQ_OK) {
            rc = cq_cli_fail("bench hash", CQ_ERR_NOMEM, NULL);
            break;
        }
        double sec = median_run(&sp, 1, pool, runs);
        printf("  %2d thread%s: %7.2f GB/s\n", t, t == 1 ? " " : "s", (double)len / 1e9 / sec);
        cq_pool_free(pool);
        if (t == threads) break;
    }
    cq_free(buf);
    return rc;
}

int cq_bench_hash(int argc, char **argv) {
    const char *cmd = "bench hash", *pack = NULL;
    long mib = 512, threads = 0, runs = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cq_cli_is_help(a)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--mib")) {
            if (!cq_cli_parse_int(cmd, a, v, 1, 1 << 20, &mib)) return 2;
            i++;
        } else if (!strcmp(a, "--threads")) {
            if (!cq_cli_parse_int(cmd, a, v, 1, 4096, &threads)) return 2;
            i++;
        } else if (!strcmp(a, "--runs")) {
            if (!cq_cli_parse_int(cmd, a, v, 1, 64, &runs)) return 2;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!pack) {
            pack = a;
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    int t = threads > 0 ? (int)threads : cq_default_threads();
    printf("machine: %s, %d logical cores; the hash's word fold: %s\n", cq_cpu()->model, cq_cpu()->logical_cores,
           cq_hash64_impl());
    return pack ? run_pack(pack, t, (int)runs) : run_buffer((uint64_t)mib, t, (int)runs);
}
