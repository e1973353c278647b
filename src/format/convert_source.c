/*
 * convert_source.c — what a conversion source folder holds: a diffusers
 * pipeline (model_index.json), one diffusers component (config.json with
 * "_class_name"), or a Hugging Face LLM folder (config.json with model_type).
 * Opens each weight component's safetensors, parses the configs and keeps
 * the small files that go into the pack verbatim.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/convert_impl.h"
#include "format/file_read.h"
#include "format/jsonutil.h"

#define CV_MAX_CONFIG (64u << 20)

/* ---- small helpers shared by the convert files ---- */

char *cv_join(const char *dir, const char *leaf) {
    size_t a = strlen(dir), b = strlen(leaf), n;
    if (!cq_add_size(a, b, &n) || !cq_add_size(n, 2, &n)) return NULL;
    char *p = cq_malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, leaf);
    return p;
}

cq_status cv_read_json(const char *path, size_t max_len, cJSON **out) {
    *out = NULL;
    uint8_t *buf;
    size_t len;
    CQ_TRY(cq_file_read_all(path, max_len, &buf, &len));
    cq_status s = cq_json_parse(buf, len, path, out);
    cq_free(buf);
    return s;
}

bool cv_json_num(const cJSON *obj, const char *key, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(j)) return false;
    *out = j->valuedouble;
    return true;
}

bool cv_json_uint(const cJSON *obj, const char *key, uint64_t *out) {
    double d;
    if (!cv_json_num(obj, key, &d) || !(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return false;
    *out = (uint64_t)d;
    return true;
}

cq_status cv_note(cq_convert_report *rep, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **g = cq_reallocn(rep->notes, rep->n_notes + 1, sizeof *g);
    if (!g) return CQ_ERR_NOMEM;
    rep->notes = g;
    if (!(rep->notes[rep->n_notes] = cq_strdup(buf))) return CQ_ERR_NOMEM;
    rep->n_notes++;
    return CQ_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* 1: safetensors present; -1: only other weight formats; 0: no weights. */
static int weights_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (ends_with(de->d_name, ".safetensors") || ends_with(de->d_name, ".safetensors.index.json")) {
            found = 1;
            break;
        }
        if (ends_with(de->d_name, ".bin") || ends_with(de->d_name, ".pt") || ends_with(de->d_name, ".ckpt") ||
            ends_with(de->d_name, ".pth"))
            found = -1;
    }
    closedir(d);
    return found;
}

/* ---- arch names ---- */

static const struct {
    const char *cls, *arch;
} k_known_classes[] = {
    {"QwenImage21Pipeline", "qwen_image21"},
    {"QwenImage21Transformer2DModel", "qwen_image21"},
    {"QwenImagePipeline", "qwen_image"},
    {"QwenImageTransformer2DModel", "qwen_image"},
    {"QwenImageEditPipeline", "qwen_image_edit"},
    {"QwenImageEditPlusPipeline", "qwen_image_edit_plus"},
    {"ZImagePipeline", "z_image"},
    {"ZImageTransformer2DModel", "z_image"},
    {"LTX2VideoTransformer3DModel", "ltx2"},
    {"LTX2TextConnectors", "ltx2_connectors"}, /* a lone connectors folder, named as in the pipeline */
    {"LTX2LatentUpsamplerModel", "ltx2_upsampler"}, /* a lone latent_upsampler folder */
    {"AutoencoderKLLTX2Audio", "ltx2_audio_vae"}, /* lone audio VAE / vocoder folders, also named as in it */
    {"AutoencoderKLLTX2Video", "ltx2_vae"}, /* a lone video VAE folder: prefix "vae." as in the pipeline */
    {"LTX2VocoderWithBWE", "ltx2_vocoder"},
    {"LTX2Vocoder", "ltx2_vocoder"},
    {"AutoencoderKL", "flux_vae"}, /* a lone VAE folder; a pipeline names its own arch */
    {"AutoencoderKLQwenImage", "qwen_image_vae"},
};

static const char *known_arch(const char *cls) {
    for (size_t i = 0; cls && i < CQ_ARRAY_LEN(k_known_classes); i++)
        if (strcmp(k_known_classes[i].cls, cls) == 0) return k_known_classes[i].arch;
    return NULL;
}

/* Strip the class-kind suffix and snake-case the rest: "HunyuanVideoPipeline"
 * -> "hunyuan_video", "QwenImage21Transformer2DModel" -> "qwen_image21",
 * "SD3Transformer2DModel" -> "sd3". */
void cv_arch_from_class(const char *cls, char *out, size_t cap) {
    const char *k = known_arch(cls);
    if (k) {
        snprintf(out, cap, "%s", k);
        return;
    }
    static const char *const suffixes[] = {"Pipeline", "Transformer2DModel", "Transformer3DModel", "TransformerModel",
                                           "Transformer", "2DConditionModel", "Model"};
    size_t n = cls ? strlen(cls) : 0;
    for (size_t i = 0; i < CQ_ARRAY_LEN(suffixes); i++) {
        size_t m = strlen(suffixes[i]);
        if (n > m && strcmp(cls + n - m, suffixes[i]) == 0) {
            n -= m;
            break;
        }
    }
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        unsigned char c = (unsigned char)cls[i];
        if (isupper(c)) {
            bool after_lower = i > 0 && (islower((unsigned char)cls[i - 1]) || isdigit((unsigned char)cls[i - 1]));
            bool acronym_end = i > 0 && isupper((unsigned char)cls[i - 1]) && i + 1 < n &&
                               islower((unsigned char)cls[i + 1]);
            if (o > 0 && (after_lower || acronym_end) && !isdigit((unsigned char)cls[i - 1])) out[o++] = '_';
            out[o++] = (char)tolower(c);
        } else if (isalnum(c)) {
            out[o++] = (char)c;
        } else if (o > 0 && out[o - 1] != '_') {
            out[o++] = '_';
        }
    }
    if (o == 0 && cap > 8) o = (size_t)snprintf(out, cap, "unknown");
    out[o < cap ? o : cap - 1] = '\0';
}

/* ---- components ---- */

static cv_role role_of_folder(const char *folder) {
    if (strncmp(folder, "transformer", 11) == 0 || strncmp(folder, "unet", 4) == 0) return CV_DIT;
    if (strncmp(folder, "text_encoder", 12) == 0) return CV_TE;
    if (strcmp(folder, "vae") == 0) return CV_VAE;
    /* LTX-2's latent upscaler is convolutions only: its kernels take the VAEs' codec (f16) */
    if (strcmp(folder, "latent_upsampler") == 0) return CV_VAE;
    return CV_OTHER;
}

/* transformer -> dit, transformer_2 -> dit2, text_encoder_2 -> te2, ... */
static void prefix_of_folder(const char *folder, char *out, size_t cap) {
    static const struct {
        const char *stem, *prefix;
    } map[] = {{"transformer", "dit"}, {"unet", "dit"}, {"text_encoder", "te"}, {"vae", "vae"},
               {"latent_upsampler", "upsampler"}};
    for (size_t i = 0; i < CQ_ARRAY_LEN(map); i++) {
        size_t m = strlen(map[i].stem);
        if (strncmp(folder, map[i].stem, m) != 0) continue;
        const char *rest = folder + m;
        if (*rest == '\0') {
            snprintf(out, cap, "%s", map[i].prefix);
            return;
        }
        if (*rest == '_' && rest[1] && strspn(rest + 1, "0123456789") == strlen(rest + 1)) {
            snprintf(out, cap, "%s%s", map[i].prefix, rest + 1);
            return;
        }
    }
    snprintf(out, cap, "%s", folder);
}

static cq_status add_blob(cv_source *src, const char *name, const char *path, bool required) {
    if (!cq_file_is_regular(path)) {
        if (required) return cq_fail(CQ_ERR_MISSING, "%s: not found", path);
        return CQ_OK;
    }
    if (src->n_blob >= CV_MAX_BLOBS) return cq_fail(CQ_ERR_UNSUPPORTED, "too many config files");
    cv_blob *b = &src->blob[src->n_blob];
    snprintf(b->name, sizeof b->name, "%s", name);
    CQ_TRY(cq_file_read_all(path, CV_MAX_CONFIG, &b->data, &b->len));
    src->n_blob++;
    return CQ_OK;
}

static cq_status add_comp(cv_source *src, const char *folder, const char *dir, cv_role role, const char *prefix) {
    if (src->n_comp >= CV_MAX_COMP) return cq_fail(CQ_ERR_UNSUPPORTED, "more than %d weight components", CV_MAX_COMP);
    cv_comp *c = &src->comp[src->n_comp];
    *c = (cv_comp){.role = role};
    snprintf(c->folder, sizeof c->folder, "%s", folder);
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    if (!(c->dir = cq_strdup(dir))) return CQ_ERR_NOMEM;
    src->n_comp++;
    char *cfg = cv_join(dir, "config.json");
    if (!cfg) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    if (cq_file_is_regular(cfg)) {
        s = cv_read_json(cfg, CV_MAX_CONFIG, &c->config);
        if (s == CQ_OK) {
            char name[200];
            snprintf(name, sizeof name, "%s%sconfig_json", prefix, *prefix ? "." : "");
            s = add_blob(src, name, cfg, true);
        }
    }
    cq_free(cfg);
    CQ_TRY(s);
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(c->config, "_class_name");
    c->last_tap = role == CV_VAE && cJSON_IsString(cls) && strcmp(cls->valuestring, "AutoencoderKLQwenImage") == 0;
    s = cq_st_open(dir, &c->st);
    if (s != CQ_OK) return cq_fail_prefix(s, "%s: ", folder);
    return CQ_OK;
}

static int cmp_comp(const void *a, const void *b) {
    const cv_comp *x = a, *y = b;
    if (x->role != y->role) return (int)x->role - (int)y->role;
    return strcmp(x->folder, y->folder);
}

static cq_status open_pipeline(cv_source *src, cJSON *index, cq_convert_report *rep) {
    src->layout = CV_PIPELINE;
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(index, "_class_name");
    if (cJSON_IsString(cls)) snprintf(src->class_name, sizeof src->class_name, "%s", cls->valuestring);
    for (const cJSON *e = index->child; e; e = e->next) {
        if (!e->string || e->string[0] == '_' || !cJSON_IsArray(e)) continue;
        if (strchr(e->string, '/') || strcmp(e->string, "..") == 0 || strcmp(e->string, ".") == 0) continue;
        char *dir = cv_join(src->root, e->string);
        if (!dir) return CQ_ERR_NOMEM;
        int w = weights_in(dir);
        cq_status s = CQ_OK;
        if (w > 0) {
            char prefix[64];
            prefix_of_folder(e->string, prefix, sizeof prefix);
            s = add_comp(src, e->string, dir, role_of_folder(e->string), prefix);
        } else if (w < 0) {
            s = cq_fail(CQ_ERR_UNSUPPORTED, "%s: weights are not in safetensors format (only .safetensors converts)",
                        dir);
        }
        cq_free(dir);
        CQ_TRY(s);
    }
    if (src->n_comp == 0)
        return cq_fail(CQ_ERR_MISSING, "%s: model_index.json names no component folder with safetensors", src->root);
    /* LTX-2's latent upscaler is not a pipeline component (LTX2LatentUpsamplePipeline loads it), yet the released
     * folders carry it as latent_upsampler/: taken when model_index.json does not name it */
    bool have_ups = false;
    for (size_t i = 0; i < src->n_comp; i++) have_ups |= strcmp(src->comp[i].folder, "latent_upsampler") == 0;
    if (!have_ups) {
        char *dir = cv_join(src->root, "latent_upsampler");
        if (!dir) return CQ_ERR_NOMEM;
        cq_status s = weights_in(dir) > 0 ? add_comp(src, "latent_upsampler", dir, CV_VAE, "upsampler") : CQ_OK;
        cq_free(dir);
        CQ_TRY(s);
    }
    qsort(src->comp, src->n_comp, sizeof src->comp[0], cmp_comp);
    /* Arch: a known pipeline class, else a known transformer class, else the
     * pipeline class snake-cased. */
    const char *tcls = NULL;
    for (size_t i = 0; i < src->n_comp; i++) {
        if (src->comp[i].role != CV_DIT || !src->comp[i].config) continue;
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(src->comp[i].config, "_class_name");
        if (cJSON_IsString(j)) tcls = j->valuestring;
        break;
    }
    if (known_arch(src->class_name) || !tcls || !known_arch(tcls))
        cv_arch_from_class(src->class_name[0] ? src->class_name : tcls, src->arch, sizeof src->arch);
    else
        cv_arch_from_class(tcls, src->arch, sizeof src->arch);
    for (size_t i = 0; i < src->n_comp; i++)
        if (src->comp[i].role == CV_TE && !src->te_dir) src->te_dir = cq_strdup(src->comp[i].dir);
    /* Tokenizer: tokenizer/ (or processor/) with tokenizer.json (or its
     * gzipped tokenizer.json.gz), else one with at least tokenizer_config.json. */
    static const char *const tok_dirs[] = {"tokenizer", "processor"};
    static const char *const tok_files[] = {"tokenizer.json", "tokenizer.json.gz", "tokenizer_config.json"};
    for (size_t pass = 0; pass < CQ_ARRAY_LEN(tok_files) && !src->tok_dir; pass++)
        for (size_t i = 0; i < CQ_ARRAY_LEN(tok_dirs) && !src->tok_dir; i++) {
            char *d = cv_join(src->root, tok_dirs[i]);
            char *f = d ? cv_join(d, tok_files[pass]) : NULL;
            if (!f) {
                cq_free(d);
                return CQ_ERR_NOMEM;
            }
            if (cq_file_is_regular(f)) src->tok_dir = d;
            else cq_free(d);
            cq_free(f);
        }
    if (!src->tok_dir) CQ_TRY(cv_note(rep, "no tokenizer/ or processor/ folder with tokenizer files"));
    char *p = cv_join(src->root, "model_index.json");
    char *q = cv_join(src->root, "scheduler/scheduler_config.json");
    /* the editing pipelines' image processor (pixel limits, mean and std of the vision tower's input) */
    char *r = cv_join(src->root, "processor/preprocessor_config.json");
    cq_status s = (p && q && r) ? add_blob(src, "pipeline.config_json", p, true) : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = add_blob(src, "scheduler.config_json", q, false);
    if (s == CQ_OK) s = add_blob(src, "processor.config_json", r, false);
    cq_free(p);
    cq_free(q);
    cq_free(r);
    return s;
}

static cq_status open_single(cv_source *src, cJSON *cfg) {
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "_class_name");
    int w = weights_in(src->root);
    if (w <= 0)
        return cq_fail(w < 0 ? CQ_ERR_UNSUPPORTED : CQ_ERR_MISSING, "%s: no .safetensors weights%s", src->root,
                       w < 0 ? " (other weight formats do not convert)" : "");
    if (cJSON_IsString(cls)) {
        /* One diffusers component: its role decides the prefix. */
        src->layout = CV_COMPONENT;
        const char *c = cls->valuestring;
        snprintf(src->class_name, sizeof src->class_name, "%s", c);
        bool vae = strstr(c, "Autoencoder") || strstr(c, "VAE") || strstr(c, "Vae");
        cv_arch_from_class(c, src->arch, sizeof src->arch);
        /* LTX-2's text connectors keep the prefix their pipeline folder gives them (connectors/ -> "connectors.") */
        if (strcmp(c, "LTX2TextConnectors") == 0) return add_comp(src, ".", src->root, CV_OTHER, "connectors");
        /* and the latent upscaler the prefix of its latent_upsampler/ folder, with the VAEs' kernel codec */
        if (strcmp(c, "LTX2LatentUpsamplerModel") == 0) return add_comp(src, ".", src->root, CV_VAE, "upsampler");
        /* and its audio VAE and vocoder the prefixes of their folders (audio_vae/, vocoder/), in the same role */
        if (strcmp(c, "AutoencoderKLLTX2Audio") == 0) return add_comp(src, ".", src->root, CV_OTHER, "audio_vae");
        if (strcmp(c, "LTX2VocoderWithBWE") == 0 || strcmp(c, "LTX2Vocoder") == 0)
            return add_comp(src, ".", src->root, CV_OTHER, "vocoder");
        return add_comp(src, ".", src->root, vae ? CV_VAE : CV_DIT, vae ? "vae" : "dit");
    }
    /* A Hugging Face model: bare names, tokenizer beside the weights. */
    src->layout = CV_LLM;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    if (!cJSON_IsString(mt) && tc) mt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    snprintf(src->arch, sizeof src->arch, "%s", cJSON_IsString(mt) ? mt->valuestring : "unknown");
    snprintf(src->class_name, sizeof src->class_name, "%s", src->arch);
    if (!(src->tok_dir = cq_strdup(src->root)) || !(src->te_dir = cq_strdup(src->root))) return CQ_ERR_NOMEM;
    return add_comp(src, ".", src->root, CV_LLM_ROLE, "");
}

cq_status cv_source_open(const char *root, cv_source *src, cq_convert_report *rep) {
    *src = (cv_source){0};
    if (!cq_file_is_dir(root)) return cq_fail(CQ_ERR_MISSING, "%s: not a folder", root);
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    if (!(src->root = cq_strndup(root, n))) return CQ_ERR_NOMEM;
    char *mi = cv_join(src->root, "model_index.json"), *cf = cv_join(src->root, "config.json");
    cJSON *j = NULL;
    cq_status s = (mi && cf) ? CQ_OK : CQ_ERR_NOMEM;
    if (s == CQ_OK && cq_file_is_regular(mi)) {
        s = cv_read_json(mi, CV_MAX_CONFIG, &j);
        if (s == CQ_OK && !cJSON_IsObject(j)) s = cq_fail(CQ_ERR_PARSE, "%s: not a JSON object", mi);
        if (s == CQ_OK) s = open_pipeline(src, j, rep);
    } else if (s == CQ_OK && cq_file_is_regular(cf)) {
        s = cv_read_json(cf, CV_MAX_CONFIG, &j);
        if (s == CQ_OK && !cJSON_IsObject(j)) s = cq_fail(CQ_ERR_PARSE, "%s: not a JSON object", cf);
        if (s == CQ_OK) s = open_single(src, j);
    } else if (s == CQ_OK) {
        s = cq_fail(CQ_ERR_MISSING,
                    "%s: neither model_index.json (a diffusers pipeline) nor config.json (a model folder)", src->root);
    }
    cJSON_Delete(j);
    cq_free(mi);
    cq_free(cf);
    if (s == CQ_OK && src->arch[0] == '\0') snprintf(src->arch, sizeof src->arch, "unknown");
    return s;
}

void cv_source_free(cv_source *src) {
    if (!src) return;
    for (size_t i = 0; i < src->n_comp; i++) {
        cq_st_close(src->comp[i].st);
        cJSON_Delete(src->comp[i].config);
        cq_free(src->comp[i].dir);
    }
    for (size_t i = 0; i < src->n_blob; i++) cq_free(src->blob[i].data);
    cq_free(src->root);
    cq_free(src->tok_dir);
    cq_free(src->te_dir);
    *src = (cv_source){0};
}
