/*
 * safetensors_open.c — finding and mapping safetensors files: a single file,
 * a sharded checkpoint through its `*.safetensors.index.json` weight_map, or
 * a folder holding either. The index is cross-checked against the shards:
 * every listed tensor must be in the file the map names, and no shard may
 * hold a tensor the map does not list.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/file_read.h"
#include "format/jsonutil.h"
#include "format/safetensors_impl.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static cq_status map_file(cq_st *st, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cq_fail(errno == ENOENT ? CQ_ERR_MISSING : CQ_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return cq_fail(CQ_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return cq_fail(CQ_ERR_BOUNDS, "%s: too large to map on this system", path);
    }
    size_t len = (size_t)sb.st_size;
    void *base = NULL;
    if (len) {
        base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            int e = errno;
            close(fd);
            return cq_fail(CQ_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd);
    size_t fi;
    cq_status s = cq_st_add_file(st, path, base, len, len != 0, &fi);
    if (s != CQ_OK) {
        if (len) munmap(base, len);
        return s;
    }
    return cq_st_parse_file(st, fi, fi == 0);
}

static char *join_path(const char *dir, const char *leaf) {
    size_t a = strlen(dir), b = strlen(leaf), n;
    if (!cq_add_size(a, b, &n) || !cq_add_size(n, 2, &n)) return NULL;
    char *p = cq_malloc(n);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, leaf, b + 1);
    }
    return p;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return cq_strdup(".");
    if (slash == path) return cq_strdup("/");
    return cq_strndup(path, (size_t)(slash - path));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct {
    const char *name;
    const char *file;
} wm_entry;

static int cmp_wm(const void *a, const void *b) { return strcmp(((const wm_entry *)a)->name, ((const wm_entry *)b)->name); }

/* Check the shards against the weight_map: same set of names, each in the
 * file the map says. */
static cq_status check_weight_map(const cq_st *st, const char *index, wm_entry *wm, size_t n,
                                  const char *const *files) {
    if (n) qsort(wm, n, sizeof *wm, cmp_wm);
    for (size_t i = 1; i < n; i++)
        if (strcmp(wm[i - 1].name, wm[i].name) == 0)
            return cq_fail(CQ_ERR_PARSE, "%s: weight_map lists '%s' twice", index, wm[i].name);
    for (size_t i = 0; i < n; i++) {
        const cq_st_tensor *t = cq_st_find(st, wm[i].name);
        if (!t) return cq_fail(CQ_ERR_MISSING, "%s: tensor '%s' is not in %s", index, wm[i].name, wm[i].file);
        if (strcmp(files[t->file_index], wm[i].file) != 0)
            return cq_fail(CQ_ERR_PARSE, "%s: tensor '%s' is listed in %s but found in %s", index, wm[i].name,
                           wm[i].file, files[t->file_index]);
    }
    if (cq_st_count(st) != n) {
        for (size_t i = 0; i < cq_st_count(st); i++) {
            wm_entry key = {cq_st_at(st, i)->name, NULL};
            if (!bsearch(&key, wm, n, sizeof *wm, cmp_wm))
                return cq_fail(CQ_ERR_PARSE, "%s: shard %s holds tensor '%s', which the weight_map does not list",
                               index, files[cq_st_at(st, i)->file_index], key.name);
        }
    }
    return CQ_OK;
}

static cq_status open_index(cq_st *st, const char *index) {
    uint8_t *buf = NULL;
    size_t len = 0;
    CQ_TRY(cq_file_read_all(index, 256u << 20, &buf, &len));
    cJSON *root = NULL;
    cq_status s = cq_json_parse(buf, len, index, &root);
    cq_free(buf);
    CQ_TRY(s);
    char *dir = NULL, **files = NULL, *path = NULL;
    wm_entry *wm = NULL;
    size_t n_files = 0, n = 0;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        s = cq_fail(CQ_ERR_PARSE, "%s: no 'weight_map' object", index);
        goto done;
    }
    n = (size_t)cJSON_GetArraySize(map);
    files = cq_calloc(n ? n : 1, sizeof *files);
    wm = cq_calloc(n ? n : 1, sizeof *wm);
    dir = dir_of(index);
    if (!files || !wm || !dir) {
        s = CQ_ERR_NOMEM;
        goto done;
    }
    size_t k = 0;
    for (const cJSON *e = map->child; e; e = e->next, k++) {
        if (!cJSON_IsString(e) || !e->string) {
            s = cq_fail(CQ_ERR_PARSE, "%s: weight_map entry '%s' is not a file name", index,
                        e->string ? e->string : "?");
            goto done;
        }
        const char *f = e->valuestring;
        /* Shards live beside the index: no paths, no parent escapes. */
        if (!*f || strchr(f, '/') || strchr(f, '\\') || strcmp(f, ".") == 0 || strcmp(f, "..") == 0) {
            s = cq_fail(CQ_ERR_PARSE, "%s: weight_map file name '%s' is not a plain file name", index, f);
            goto done;
        }
        wm[k] = (wm_entry){e->string, f};
        files[k] = (char *)f;
    }
    /* Distinct shard names, in sorted (= shard number) order. */
    if (n) qsort(files, n, sizeof *files, cmp_str);
    for (size_t i = 0; i < n; i++)
        if (n_files == 0 || strcmp(files[n_files - 1], files[i]) != 0) files[n_files++] = files[i];
    for (size_t i = 0; i < n_files && s == CQ_OK; i++) {
        path = join_path(dir, files[i]);
        s = path ? map_file(st, path) : CQ_ERR_NOMEM;
        cq_free(path);
        path = NULL;
    }
    if (s == CQ_OK) s = cq_st_index_names(st);
    if (s == CQ_OK) s = check_weight_map(st, index, wm, n, (const char *const *)files);
done:
    cq_free(dir);
    cq_free(files);
    cq_free(wm);
    cJSON_Delete(root);
    return s;
}

/* Pick what to open inside a folder (see safetensors.h). */
static cq_status open_dir(cq_st *st, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return cq_fail(CQ_ERR_IO, "%s: %s", dir, strerror(errno));
    char **idx = NULL, **sts = NULL;
    size_t n_idx = 0, n_sts = 0;
    cq_status s = CQ_OK;
    struct dirent *de;
    while (s == CQ_OK && (de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        bool is_idx = ends_with(nm, ".safetensors.index.json"), is_st = ends_with(nm, ".safetensors");
        if (!is_idx && !is_st) continue;
        char ***arr = is_idx ? &idx : &sts;
        size_t *cnt = is_idx ? &n_idx : &n_sts;
        char **grown = cq_reallocn(*arr, *cnt + 1, sizeof **arr);
        char *copy = cq_strdup(nm);
        if (grown) *arr = grown;
        if (!grown || !copy) {
            cq_free(copy);
            s = CQ_ERR_NOMEM;
            break;
        }
        (*arr)[(*cnt)++] = copy;
    }
    closedir(d);
    if (s == CQ_OK && n_idx) qsort(idx, n_idx, sizeof *idx, cmp_str);
    if (s == CQ_OK && n_sts) qsort(sts, n_sts, sizeof *sts, cmp_str);
    char *path = NULL;
    if (s != CQ_OK) {
    } else if (n_idx > 1) {
        s = cq_fail(CQ_ERR_PARSE, "%s: %zu safetensors index files (%s, %s...); open one of them directly", dir,
                    n_idx, idx[0], idx[1]);
    } else if (n_idx == 1) {
        path = join_path(dir, idx[0]);
        s = path ? open_index(st, path) : CQ_ERR_NOMEM;
    } else if (n_sts == 0) {
        s = cq_fail(CQ_ERR_MISSING, "%s: no .safetensors file", dir);
    } else {
        /* Prefer the canonical single-file names over variants (".fp16."). */
        const char *pick = n_sts == 1 ? sts[0] : NULL;
        for (size_t i = 0; !pick && i < n_sts; i++)
            if (strcmp(sts[i], "model.safetensors") == 0 || strcmp(sts[i], "diffusion_pytorch_model.safetensors") == 0)
                pick = sts[i];
        for (size_t i = 0; s == CQ_OK && i < n_sts; i++) {
            if (pick && sts[i] != pick) continue;
            path = join_path(dir, sts[i]);
            s = path ? map_file(st, path) : CQ_ERR_NOMEM;
            cq_free(path);
            path = NULL;
        }
        if (s == CQ_OK) s = cq_st_index_names(st);
    }
    cq_free(path);
    for (size_t i = 0; i < n_idx; i++) cq_free(idx[i]);
    for (size_t i = 0; i < n_sts; i++) cq_free(sts[i]);
    cq_free(idx);
    cq_free(sts);
    return s;
}

cq_status cq_st_open(const char *path, cq_st **out) {
    *out = NULL;
    if (!path) return cq_fail(CQ_ERR_INVALID_ARG, "safetensors: NULL path");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return cq_fail(errno == ENOENT ? CQ_ERR_MISSING : CQ_ERR_IO, "%s: %s", path, strerror(errno));
    cq_st *st = cq_calloc(1, sizeof *st);
    if (!st) return CQ_ERR_NOMEM;
    cq_status s;
    if (S_ISDIR(sb.st_mode))
        s = open_dir(st, path);
    else if (ends_with(path, ".json"))
        s = open_index(st, path);
    else {
        s = map_file(st, path);
        if (s == CQ_OK) s = cq_st_index_names(st);
    }
    if (s != CQ_OK) {
        cq_st_close(st);
        return s;
    }
    *out = st;
    return CQ_OK;
}
