#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void tu_rng_seed(tu_rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->s = (z ^ (z >> 31)) | 1;
}

uint64_t tu_rng_u64(tu_rng *r) {
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float tu_rng_uniform(tu_rng *r) { return (float)(tu_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float tu_rng_normal(tu_rng *r) {
    float u1 = tu_rng_uniform(r), u2 = tu_rng_uniform(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

void tu_fill_normal(tu_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = tu_rng_normal(r) * scale;
}

const char *tu_tmpdir(const char *name) {
    static char buf[1024];
    char parent[900];
    snprintf(parent, sizeof parent, "%s/tmp", CQ_BINARY_DIR);
    mkdir(parent, 0755);
    snprintf(buf, sizeof buf, "%s/%s-%d", parent, name, (int)getpid());
    tu_system("rm -rf '%s'", buf);
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return NULL;
    return buf;
}

const char *tu_path(const char *dir, const char *leaf) {
    static char bufs[8][1200];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, leaf);
    return b;
}

uint8_t *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(n > 0 ? (size_t)n : 1);
    if (d && n > 0 && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    if (d && len) *len = (size_t)n;
    return d;
}

int tu_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

int tu_system(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}
