/*
 * cmd_info.c — `cortiq info`: what a .cmf file holds (envelope, sections,
 * arch, tensors grouped by name prefix and by codec, configs, tokenizer,
 * chat bundle, skills), as text or JSON.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "format/cmf.h"
#include "format/gen_defaults.h"

#define MAX_GROUPS 64

static void help(void) {
    printf("usage: cortiq info FILE.cmf [--tensors] [--json]\n"
           "\n"
           "Show what a .cmf file holds: format version and feature bits, section sizes, the\n"
           "header's arch and quant_type, tensor counts and bytes per name prefix (dit., te., vae.)\n"
           "and per codec, stored configs (*.config_json), tokenizer and chat template presence,\n"
           "stop ids, skills and shard number, and an image pipeline's recommended generation\n"
           "defaults (size, steps, guidance, shift, negative prompt; `cortiq imagine` uses them).\n"
           "The file is opened and validated; a header or\n"
           "directory that does not match its recorded hash is refused as damaged (run `cortiq\n"
           "verify FILE`, which reports every problem). Tensor payloads are not hash-checked here.\n"
           "\n"
           "options:\n"
           "  --tensors   also list every tensor (name, codec, shape, bytes)\n"
           "  --json      print one JSON object instead of text\n"
           "  -h, --help  this text\n");
}

typedef struct group {
    char name[64];
    size_t n;
    uint64_t bytes;
} group;

static const char *const k_feature_names[] = {"TENSOR_DIR", "BINARY_MASKS", "QUANT_2F", "DELTA_MASKS",
                                               "HOT_PACKS",  "LOOP_MASKS",   "SKILL_FILE"};

static void shape_str(const cq_tensor_view *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static bool is_config(const char *name) {
    size_t n = strlen(name);
    return n >= 11 && strcmp(name + n - 11, "config_json") == 0;
}

/* Tensors by the text before the first '.' (the pack prefix). */
static size_t group_prefixes(const cq_cmf *cmf, group *g) {
    size_t ng = 0;
    for (size_t i = 0; i < cq_cmf_tensor_count(cmf); i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
        const char *dot = strchr(t->name, '.');
        char key[64];
        snprintf(key, sizeof key, "%.*s", dot ? (int)(dot - t->name) : (int)strlen(t->name), t->name);
        size_t k = 0;
        while (k < ng && strcmp(g[k].name, key) != 0) k++;
        if (k == ng) {
            if (ng == MAX_GROUPS) k = ng - 1, snprintf(g[k].name, sizeof g[k].name, "(other)");
            else snprintf(g[ng++].name, sizeof g[0].name, "%s", key);
        }
        g[k].n++;
        g[k].bytes += t->nbytes;
    }
    return ng;
}

static int print_json(const char *path, const cq_cmf *cmf, const cq_cmf_info *in, const cJSON *hdr, bool tensors) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddNumberToObject(o, "file_size", (double)in->file_size);
    cJSON_AddNumberToObject(o, "version", in->version);
    cJSON_AddNumberToObject(o, "feature_bits", in->features);
    cJSON *fe = cJSON_AddArrayToObject(o, "features");
    for (unsigned b = 0; b < CQ_ARRAY_LEN(k_feature_names); b++)
        if (in->features & (1u << b)) cJSON_AddItemToArray(fe, cJSON_CreateString(k_feature_names[b]));
    cJSON_AddStringToObject(o, "arch_name", in->arch_name ? in->arch_name : "");
    cJSON_AddStringToObject(o, "quant_type", in->quant_type ? in->quant_type : "");
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(hdr, "arch");
    if (arch) cJSON_AddItemToObject(o, "arch", cJSON_Duplicate(arch, 1));
    cJSON *sec = cJSON_AddObjectToObject(o, "sections");
    cJSON_AddNumberToObject(sec, "header", (double)in->header_len);
    cJSON_AddNumberToObject(sec, "directory", (double)in->dir_len);
    cJSON_AddNumberToObject(sec, "data", (double)in->data_len);
    cJSON_AddNumberToObject(sec, "masks", (double)in->masks_len);
    cJSON_AddNumberToObject(sec, "tokenizer", (double)in->vocab_len);
    cJSON_AddNumberToObject(sec, "index", (double)in->index_len);
    const cJSON *shard = cJSON_GetObjectItemCaseSensitive(hdr, "shard");
    if (cJSON_IsObject(shard)) cJSON_AddItemToObject(o, "shard", cJSON_Duplicate(shard, 1));
    cJSON_AddNumberToObject(o, "tensor_count", (double)in->tensor_count);
    uint64_t bytes[CQ_DTYPE_COUNT] = {0};
    size_t counts[CQ_DTYPE_COUNT] = {0};
    cJSON *cfgs = cJSON_CreateArray();
    for (size_t i = 0; i < in->tensor_count; i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
        counts[t->dtype]++;
        bytes[t->dtype] += t->nbytes;
        if (is_config(t->name)) cJSON_AddItemToArray(cfgs, cJSON_CreateString(t->name));
    }
    cJSON *cod = cJSON_AddObjectToObject(o, "codecs");
    for (int d = 0; d < CQ_DTYPE_COUNT; d++) {
        if (!counts[d]) continue;
        cJSON *c = cJSON_AddObjectToObject(cod, cq_dtype_name((cq_dtype)d));
        cJSON_AddNumberToObject(c, "tensors", (double)counts[d]);
        cJSON_AddNumberToObject(c, "bytes", (double)bytes[d]);
    }
    group g[MAX_GROUPS] = {0};
    size_t ng = group_prefixes(cmf, g);
    cJSON *pre = cJSON_AddObjectToObject(o, "prefixes");
    for (size_t k = 0; k < ng; k++) {
        cJSON *c = cJSON_AddObjectToObject(pre, g[k].name);
        cJSON_AddNumberToObject(c, "tensors", (double)g[k].n);
        cJSON_AddNumberToObject(c, "bytes", (double)g[k].bytes);
    }
    cJSON_AddItemToObject(o, "configs", cfgs);
    cJSON_AddBoolToObject(o, "tokenizer", in->has_tokenizer);
    cJSON_AddBoolToObject(o, "chat_template", in->has_chat_template);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(hdr, "tokenizer_config");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(tc, "eos_token_ids");
    cJSON_AddItemToObject(o, "eos_token_ids", eos ? cJSON_Duplicate(eos, 1) : cJSON_CreateArray());
    const cJSON *gd = cJSON_GetObjectItemCaseSensitive(hdr, CQ_GEN_DEFAULTS_KEY);
    if (cJSON_IsObject(gd)) cJSON_AddItemToObject(o, CQ_GEN_DEFAULTS_KEY, cJSON_Duplicate(gd, 1));
    cJSON_AddNumberToObject(o, "masks", (double)in->mask_count);
    cJSON *sk = cJSON_AddArrayToObject(o, "skills");
    for (size_t i = 0; i < in->skill_count; i++) cJSON_AddItemToArray(sk, cJSON_CreateString(cq_cmf_skill_id(cmf, i)));
    if (tensors) {
        cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
        for (size_t i = 0; i < in->tensor_count; i++) {
            const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", t->name);
            cJSON_AddStringToObject(e, "codec", cq_dtype_name(t->dtype));
            cJSON *sh = cJSON_AddArrayToObject(e, "shape");
            for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
            cJSON_AddNumberToObject(e, "bytes", (double)t->nbytes);
            cJSON_AddNumberToObject(e, "offset", (double)t->file_offset);
            cJSON_AddItemToArray(arr, e);
        }
    }
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt) return cq_cli_fail("info", cq_fail(CQ_ERR_NOMEM, "out of memory"), "printing JSON");
    printf("%s\n", txt);
    cJSON_free(txt);
    return 0;
}

static void print_text(const char *path, const cq_cmf *cmf, const cq_cmf_info *in, const cJSON *hdr, bool tensors) {
    char a[32], b[32];
    printf("file:       %s (%s)\n", path, cq_fmt_bytes(in->file_size, a, sizeof a));
    printf("format:     CMF v%u, features 0x%x", in->version, in->features);
    const char *sep = " (";
    for (unsigned bit = 0; bit < CQ_ARRAY_LEN(k_feature_names); bit++)
        if (in->features & (1u << bit)) {
            printf("%s%s", sep, k_feature_names[bit]);
            sep = ", ";
        }
    printf("%s\n", sep[0] == ',' ? ")" : "");
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(hdr, "arch");
    printf("arch:       %s, quant_type %s\n", in->arch_name ? in->arch_name : "?", in->quant_type ? in->quant_type : "?");
    static const char *const keys[] = {"hidden_size", "num_layers", "num_attention_heads", "head_dim", "vocab_size"};
    printf("           ");
    for (size_t k = 0; k < CQ_ARRAY_LEN(keys); k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(arch, keys[k]);
        if (cJSON_IsNumber(v)) printf(" %s %.0f", keys[k], v->valuedouble);
    }
    printf("\n");
    char c[32];
    printf("sections:   header %s, directory %s, data %s", cq_fmt_bytes(in->header_len, a, sizeof a),
           cq_fmt_bytes(in->dir_len, b, sizeof b), cq_fmt_bytes(in->data_len, c, sizeof c));
    if (in->vocab_len) printf(", tokenizer %s", cq_fmt_bytes(in->vocab_len, a, sizeof a));
    if (in->masks_len) printf(", masks %s", cq_fmt_bytes(in->masks_len, a, sizeof a));
    if (in->index_len) printf(", sparse index %s", cq_fmt_bytes(in->index_len, a, sizeof a));
    printf("\n");
    const cJSON *shard = cJSON_GetObjectItemCaseSensitive(hdr, "shard");
    const cJSON *sno = cJSON_GetObjectItemCaseSensitive(shard, "no"), *scount = cJSON_GetObjectItemCaseSensitive(shard, "count");
    if (cJSON_IsNumber(sno) && cJSON_IsNumber(scount))
        printf("shard:      %.0f of %.0f (this file alone)\n", sno->valuedouble, scount->valuedouble);
    printf("tensors:    %zu\n", in->tensor_count);
    group g[MAX_GROUPS] = {0};
    size_t ng = group_prefixes(cmf, g);
    for (size_t k = 0; k < ng; k++)
        printf("  %-16s %6zu tensors %12s\n", g[k].name, g[k].n, cq_fmt_bytes(g[k].bytes, a, sizeof a));
    uint64_t bytes[CQ_DTYPE_COUNT] = {0};
    size_t counts[CQ_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < in->tensor_count; i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
        counts[t->dtype]++;
        bytes[t->dtype] += t->nbytes;
    }
    printf("codecs:\n");
    for (int d = 0; d < CQ_DTYPE_COUNT; d++)
        if (counts[d]) printf("  %-16s %6zu tensors %12s\n", cq_dtype_name((cq_dtype)d), counts[d], cq_fmt_bytes(bytes[d], a, sizeof a));
    printf("configs:   ");
    size_t nc = 0;
    for (size_t i = 0; i < in->tensor_count; i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
        if (is_config(t->name)) printf(" %s", t->name), nc++;
    }
    printf("%s\n", nc ? "" : " none");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(hdr, "tokenizer_config");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(tc, "eos_token_ids");
    printf("tokenizer:  %s; chat template %s", in->has_tokenizer ? "yes" : "no", in->has_chat_template ? "yes" : "no");
    if (cJSON_IsArray(eos) && cJSON_GetArraySize(eos) > 0) {
        printf("; eos ids");
        for (const cJSON *e = eos->child; e; e = e->next) printf(" %.0f", e->valuedouble);
    }
    printf("\n");
    cq_gen_defaults gd;
    if (cq_cmf_gen_defaults(cmf, &gd) == CQ_OK) {
        char desc[256];
        cq_gen_defaults_describe(&gd, desc, sizeof desc);
        const bool video = in->arch_name && strcmp(in->arch_name, "ltx2") == 0;
        if (*desc)
            printf("defaults:   %s (what `cortiq %s` %s when not told)\n", desc, video ? "video" : "imagine",
                   video ? "makes" : "draws with");
        cq_gen_defaults_free(&gd);
    }
    printf("skills:     ");
    if (!in->skill_count) printf("none");
    for (size_t i = 0; i < in->skill_count; i++) printf("%s%s", i ? ", " : "", cq_cmf_skill_id(cmf, i));
    printf("\n");
    if (in->mask_count) printf("masks:      %zu\n", in->mask_count);
    if (tensors) {
        printf("\n%-60s %-9s %-22s %12s\n", "name", "codec", "shape", "bytes");
        for (size_t i = 0; i < in->tensor_count; i++) {
            const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
            char sh[128];
            shape_str(t, sh, sizeof sh);
            printf("%-60s %-9s %-22s %12llu\n", t->name, cq_dtype_name(t->dtype), sh, (unsigned long long)t->nbytes);
        }
    }
}

int cq_cmd_info(int argc, char **argv) {
    const char *cmd = "info", *path = NULL;
    bool tensors = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            help();
            return 0;
        } else if (strcmp(argv[i], "--tensors") == 0) {
            tensors = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!path) return cq_cli_usage_error(cmd, "missing the .cmf file");
    cq_cmf *cmf;
    cq_cmf_open_opts oo = {.no_verify = true}; /* nothing here reads a payload */
    cq_status s = cq_cmf_open_ex(path, &oo, &cmf);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, strstr(cq_last_error(), path) ? NULL : path);
    cq_cmf_info in;
    s = cq_cmf_get_info(cmf, &in);
    if (s != CQ_OK) {
        cq_cmf_close(cmf);
        return cq_cli_fail(cmd, s, path);
    }
    size_t hl;
    const char *hj = cq_cmf_header_json(cmf, &hl);
    cJSON *hdr = hj ? cJSON_ParseWithLength(hj, hl) : NULL; /* open() validated it */
    int rc = 0;
    if (json)
        rc = print_json(path, cmf, &in, hdr, tensors);
    else
        print_text(path, cmf, &in, hdr, tensors);
    cJSON_Delete(hdr);
    cq_cmf_close(cmf);
    return rc;
}
