#include "testutil.h"

#include "pipelines/png_write.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <stdbool.h>
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

cJSON *tu_read_json(const char *path) {
    size_t len = 0;
    uint8_t *text = tu_read_file(path, &len);
    if (!text) return NULL;
    cJSON *root = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    return root;
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

/* The names a model test accepts. The host backend is the CPU backend (the
 * plain-C reference backend, which keeps no scratch between ops, is no
 * subject of its own: each model test runs its golden cases on it from the
 * CPU instance); a device backend is a known name with an optional ":N"
 * device number. */
static const char *const k_host_backends[] = {"cpu"};
static const char *const k_device_backends[] = {"cuda", "vulkan"};

static bool device_name(const char *name) {
    for (size_t i = 0; i < sizeof k_device_backends / sizeof *k_device_backends; i++) {
        size_t n = strlen(k_device_backends[i]);
        if (strncmp(name, k_device_backends[i], n) != 0) continue;
        if (!name[n]) return true;
        if (name[n] != ':' || !name[n + 1]) return false;
        for (const char *p = name + n + 1; *p; p++)
            if (*p < '0' || *p > '9') return false;
        return true;
    }
    return false;
}

/* "@f16" / "@bf16" after a backend name: the activation dtype, or CQ_DTYPE_COUNT for anything else. f32 is
 * not among them: it is the zero of cq_backend_opts.act_dtype, the backend's own choice. */
static cq_dtype act_suffix(const char *at) {
    if (!strcmp(at, "@f16")) return CQ_DTYPE_F16;
    if (!strcmp(at, "@bf16")) return CQ_DTYPE_BF16;
    return CQ_DTYPE_COUNT;
}

int tu_backend_select(const char *prog, int argc, char **argv, tu_backend_arg *out) {
    memset(out, 0, sizeof *out);
    const char *arg = argc > 1 ? argv[1] : "cpu", *at = strchr(arg, '@');
    size_t len = at ? (size_t)(at - arg) : strlen(arg);
    if (at) out->act = act_suffix(at);
    if (len < sizeof out->name) snprintf(out->name, sizeof out->name, "%.*s", (int)len, arg);
    const char *name = out->name;
    bool host = false;
    for (size_t i = 0; i < sizeof k_host_backends / sizeof *k_host_backends; i++) host |= !strcmp(name, k_host_backends[i]);
    if (argc > 2 || len >= sizeof out->name || (!host && !device_name(name)) || out->act == CQ_DTYPE_COUNT) {
        fprintf(stderr,
                "usage: %s [cpu|cuda[:N]|vulkan[:N]][@f16|@bf16]  (the backend the tests run on, cpu when absent; "
                "@: its activation dtype)\n",
                prog);
        return 1;
    }
    out->device = !host;
    cq_backend *probe = NULL;
    cq_status s = tu_backend_create(out, 1, &probe);
    if (s != CQ_OK) {
        /* not built, no driver, no such device: ctest reports the run as skipped (SKIP_RETURN_CODE 77) */
        printf("%s: skipped: backend '%s' is not available here: %s\n", prog, name, cq_last_error());
        return s == CQ_ERR_UNSUPPORTED ? TU_SKIP : 1;
    }
    printf("%s: on backend %s, %s activations\n", prog, cq_backend_name(probe),
           cq_dtype_name(cq_backend_act_dtype(probe)));
    cq_backend_free(probe);
    return -1;
}

cq_status tu_backend_create(const tu_backend_arg *b, int threads, cq_backend **out) {
    const cq_backend_opts o = {.cpu = {.threads = threads}, .act_dtype = b->act};
    return cq_backend_open(b->name, &o, out);
}

cq_tensor_view tu_view(cq_dtype dt, int ndim, const uint64_t *shape, const uint8_t *data, uint64_t nbytes) {
    cq_tensor_view v;
    memset(&v, 0, sizeof v);
    v.name = "test.weight";
    v.dtype = dt;
    v.ndim = ndim;
    v.nelem = 1;
    for (int i = 0; i < ndim; i++) {
        v.shape[i] = shape[i];
        v.nelem *= shape[i];
    }
    v.data = data;
    v.nbytes = nbytes;
    return v;
}

double tu_rms(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

double tu_max_rel(const float *a, const float *b, size_t n, double rms) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m / rms;
}

float *tu_st_floats(const cq_st *st, const char *name, size_t *n) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t || t->dtype != CQ_ST_F32) return NULL;
    float *f = malloc((size_t)t->nelem * sizeof(float));
    if (f && cq_st_read_f32(t, 0, t->nelem, f) != CQ_OK) {
        free(f);
        return NULL;
    }
    *n = (size_t)t->nelem;
    return f;
}

void tu_expect_err(cq_status s, cq_status want, const char *needle) {
    if (s != want || !strstr(cq_last_error(), needle))
        fail_msg("expected %s mentioning '%s', got %s: %s", cq_status_str(want), needle, cq_status_str(s),
                 cq_last_error());
}

double tu_image_err(const float *planar, int c, int w, int h, const float *want_hwc, int *worst8) {
    double worst_f = 0;
    *worst8 = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                const float v = planar[((size_t)ch * h + y) * w + x];
                const float want = want_hwc[((size_t)y * w + x) * c + ch];
                const int d = abs(cq_png_quantize(v) - cq_png_quantize_unit(want));
                float u = v * 0.5f + 0.5f; /* the reference's postprocess */
                u = u < 0 ? 0 : u > 1 ? 1 : u;
                if (d > *worst8) *worst8 = d;
                if (!(fabs((double)u - want) <= worst_f)) worst_f = fabs((double)u - want); /* NaN propagates */
            }
    return worst_f;
}
