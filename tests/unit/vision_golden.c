/*
 * vision_golden.c — the vision towers' golden folders (vision_golden.h).
 */
#include "vision_golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/convert.h"
#include "testutil.h"

int tv_open(tv_golden *g, const char *dir, const char *scratch) {
    memset(g, 0, sizeof *g);
    char src[1024], gold[1024], index[1024];
    snprintf(src, sizeof src, "%s/model", dir);
    snprintf(gold, sizeof gold, "%s/golden.safetensors", dir);
    snprintf(index, sizeof index, "%s/index.json", dir);
    const char *path = tu_path(tu_tmpdir(scratch), "vision.cmf");
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(src, path, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK || cq_cmf_open(path, &g->cmf) != CQ_OK || cq_st_open(gold, &g->st) != CQ_OK) {
        fprintf(stderr, "golden %s: %s\n", dir, cq_last_error());
        return -1;
    }
    size_t len;
    uint8_t *idx = tu_read_file(index, &len);
    if (!idx) return -1;
    g->index = cJSON_ParseWithLength((const char *)idx, len);
    free(idx);
    return g->index ? 0 : -1;
}

void tv_close(tv_golden *g) {
    cq_cmf_close(g->cmf);
    cq_st_close(g->st);
    cJSON_Delete(g->index);
    memset(g, 0, sizeof *g);
}

const cJSON *tv_case(const tv_golden *g, const char *name) {
    const cJSON *c = strcmp(name, "lm") == 0
                         ? cJSON_GetObjectItemCaseSensitive(g->index, "lm")
                         : cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(g->index, "cases"), name);
    if (!c) fail_msg("index.json has no case %s", name);
    return c;
}

double tv_case_num(const tv_golden *g, const char *name, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tv_case(g, name), key);
    if (!cJSON_IsNumber(v)) fail_msg("index.json case %s lacks %s", name, key);
    return v->valuedouble;
}

static const cq_st_tensor *gold(const tv_golden *g, const char *c, const char *what) {
    char name[96];
    snprintf(name, sizeof name, "%s.%s", c, what);
    const cq_st_tensor *t = cq_st_find(g->st, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    return t;
}

float *tv_f32(const tv_golden *g, const char *c, const char *what, size_t want) {
    const cq_st_tensor *t = gold(g, c, what);
    if (t->dtype != CQ_ST_F32 || t->nelem != want)
        fail_msg("golden %s.%s: %llu elements (want %zu f32)", c, what, (unsigned long long)t->nelem, want);
    float *v;
    assert_int_equal(cq_st_read_all_f32(t, &v), CQ_OK);
    return v;
}

int32_t *tv_i32(const tv_golden *g, const char *c, const char *what, size_t *n) {
    const cq_st_tensor *t = gold(g, c, what);
    if (t->dtype != CQ_ST_I32) fail_msg("golden %s.%s is not I32", c, what);
    *n = (size_t)t->nelem;
    int32_t *v = malloc((*n ? *n : 1) * sizeof(int32_t));
    assert_non_null(v);
    memcpy(v, t->data, *n * sizeof(int32_t));
    return v;
}

void tv_input_open(const tv_golden *g, const char *name, int64_t patch_dim, tv_input *in) {
    memset(in, 0, sizeof *in);
    size_t n;
    int32_t *grid = tv_i32(g, name, "grid", &n);
    assert_true(n % 3 == 0 && n / 3 >= 1 && n / 3 <= TV_MAX_IMAGES);
    in->n_images = (int)(n / 3);
    memcpy(in->grid, grid, n * sizeof(int32_t));
    free(grid);
    for (int i = 0; i < in->n_images; i++) in->rows += (int64_t)in->grid[i][0] * in->grid[i][1] * in->grid[i][2];
    const size_t K = (size_t)patch_dim;
    in->pixels = malloc((size_t)in->rows * K * sizeof(float));
    assert_non_null(in->pixels);
    const double scale = cJSON_GetObjectItemCaseSensitive(g->index, "pixel_scale")->valuedouble;
    const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(tv_case(g, name), "images");
    assert_int_equal(cJSON_GetArraySize(imgs), in->n_images);
    size_t at = 0;
    for (int i = 0; i < in->n_images; i++) {
        const cq_st_tensor *t = gold(g, cJSON_GetArrayItem(imgs, i)->valuestring, "pixels_q");
        assert_int_equal(t->dtype, CQ_ST_I8);
        const int64_t want = (int64_t)in->grid[i][0] * in->grid[i][1] * in->grid[i][2] * (int64_t)K;
        assert_int_equal((int64_t)t->nelem, want);
        for (uint64_t j = 0; j < t->nelem; j++) in->pixels[at++] = (float)((int8_t)t->data[j] * scale);
    }
}

double tv_rel(const float *got, const float *ref, size_t n) { return tu_max_rel(got, ref, n, tu_rms(ref, n)); }

void tv_check(const char *backend, const char *c, const char *what, double e, double bound) {
    print_message("%-8s %-3s %-13s max|err|/RMS %.3e (bound %.3e)\n", backend, c, what, e, bound);
    if (!(e <= bound)) fail_msg("%s %s: %.3e > %.3e", c, what, e, bound);
}

void tv_repack(const cq_cmf *cmf, const char *path, const char *prefix, const char *from, const char *to,
               const char *config, const char *drop) {
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    size_t hl;
    const char *hdr = cq_cmf_header_json(cmf, &hl);
    assert_int_equal(cq_cmf_writer_set_header(w, hdr, hl), CQ_OK);
    for (size_t i = 0; i < cq_cmf_tensor_count(cmf); i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(cmf, i);
        if (drop && strcmp(v->name, drop) == 0) continue;
        char name[512];
        if (from && strncmp(v->name, from, strlen(from)) == 0)
            snprintf(name, sizeof name, "%s%s%s", prefix, to, v->name + strlen(from));
        else
            snprintf(name, sizeof name, "%s%s", prefix, v->name);
        const void *data = v->data;
        uint64_t nb = v->nbytes, shape[CQ_MAX_DIMS];
        memcpy(shape, v->shape, sizeof shape);
        if (config && strcmp(v->name, "config_json") == 0) {
            data = config;
            nb = shape[0] = strlen(config);
        }
        assert_int_equal(cq_cmf_writer_add(w, name, v->dtype, v->ndim, shape, data, nb), CQ_OK);
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("repack: %s", cq_last_error());
    cq_cmf_writer_free(w);
}

char *tv_config_with(const cq_cmf *cmf, const char *key, const char *value) {
    const cq_tensor_view *v = cq_cmf_find(cmf, "config_json");
    assert_non_null(v);
    cJSON *root = cJSON_ParseWithLength((const char *)v->data, (size_t)v->nbytes);
    assert_non_null(root);
    if (strcmp(key, "vision_config") == 0) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    } else {
        cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config");
        cJSON_DeleteItemFromObjectCaseSensitive(vc, key);
        if (value) cJSON_AddItemToObject(vc, key, cJSON_Parse(value));
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(s);
    return s;
}
