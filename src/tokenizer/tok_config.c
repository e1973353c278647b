/*
 * tok_config.c — reads the pipeline components of a tokenizer.json
 * (normalizer, pre_tokenizer, decoder, post_processor) into the structs of
 * tokenizer-impl.h, and frees them. Anything not implemented is refused
 * with CQ_ERR_UNSUPPORTED naming the component, so a tokenizer either loads
 * and gives exact ids or does not load.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tok_json.h"
#include "tokenizer/tok_config.h"

/* ---- shared pieces ---------------------------------------------------------- */
static cq_status dup_str(const char *s, char **out, size_t *len) {
    size_t n = strlen(s);
    *out = cq_strndup(s, n);
    if (!*out) return CQ_ERR_NOMEM;
    if (len) *len = n;
    return CQ_OK;
}

/* {"String": "..."} or {"Regex": "..."} */
static cq_status parse_pattern(const cJSON *obj, const char *where, tok_regex **out) {
    char path[TOK_PATH];
    snprintf(path, sizeof path, "%s.pattern", where);
    const cJSON *p = tok_jget(obj, "pattern");
    if (!p || !cJSON_IsObject(p))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected {\"String\": ...} or {\"Regex\": ...}",
                       path);
    const char *str, *rx;
    CQ_TRY(tok_jstr(p, "String", path, false, &str));
    CQ_TRY(tok_jstr(p, "Regex", path, false, &rx));
    if ((str != NULL) == (rx != NULL))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: needs exactly one of String and Regex", path);
    return str ? tok_regex_compile(str, strlen(str), true, path, out)
               : tok_regex_compile(rx, strlen(rx), false, path, out);
}

/* A one-character string (Metaspace replacement, Strip content). */
static cq_status parse_char(const cJSON *obj, const char *key, const char *where, bool required,
                            uint32_t def, uint32_t *cp) {
    const char *s;
    CQ_TRY(tok_jstr(obj, key, where, required, &s));
    if (!s) {
        *cp = def;
        return CQ_OK;
    }
    size_t n = strlen(s);
    if (n == 0 || !tok_utf8_is_valid(s, n) || tok_utf8_decode(s, n, cp) != n)
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.%s: expected a single character", where, key);
    return CQ_OK;
}

static cq_status parse_scheme(const cJSON *obj, const char *where, tok_prepend_scheme *out) {
    const char *s;
    CQ_TRY(tok_jstr(obj, "prepend_scheme", where, false, &s));
    if (!s) { /* older files: add_prefix_space */
        bool aps = true;
        CQ_TRY(tok_jbool(obj, "add_prefix_space", where, true, &aps));
        *out = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        return CQ_OK;
    }
    if (!strcmp(s, "always")) *out = TOK_PREPEND_ALWAYS;
    else if (!strcmp(s, "first")) *out = TOK_PREPEND_FIRST;
    else if (!strcmp(s, "never")) *out = TOK_PREPEND_NEVER;
    else
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.prepend_scheme: '%s' is not always/first/never",
                       where, s);
    return CQ_OK;
}

static cq_status array_of(const cJSON *obj, const char *key, const char *where, const cJSON **arr,
                          size_t *n) {
    *arr = tok_jget(obj, key);
    if (!*arr || !cJSON_IsArray(*arr))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.%s: expected an array", where, key);
    *n = (size_t)cJSON_GetArraySize(*arr);
    return CQ_OK;
}

/* ---- normalizers ----------------------------------------------------------------- */
static void norm_clear(tok_norm *n) {
    tok_regex_free(n->re);
    cq_free(n->text);
    for (size_t i = 0; i < n->n_items; i++) norm_clear(&n->items[i]);
    cq_free(n->items);
}

void tok_norm_free(tok_norm *n) {
    if (!n) return;
    norm_clear(n);
    cq_free(n);
}

static cq_status norm_fill(const cJSON *obj, const char *where, int depth, tok_norm *n);

static cq_status norm_fill(const cJSON *obj, const char *where, int depth, tok_norm *n) {
    const char *type;
    CQ_TRY(tok_jtype(obj, where, &type));
    if (depth > 16) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: nested too deeply", where);
    if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
#ifndef CQ_HAVE_UTF8PROC
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: %s normalization needs utf8proc, "
                       "which this build lacks", where, type);
#endif
        n->type = !strcmp(type, "NFC") ? TOK_NORM_NFC : !strcmp(type, "NFD") ? TOK_NORM_NFD
                : !strcmp(type, "NFKC") ? TOK_NORM_NFKC : TOK_NORM_NFKD;
        return CQ_OK;
    }
    if (!strcmp(type, "Lowercase")) {
#ifndef CQ_HAVE_UTF8PROC
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: Lowercase needs utf8proc", where);
#endif
        n->type = TOK_NORM_LOWERCASE;
        return CQ_OK;
    }
    if (!strcmp(type, "Strip")) {
        n->type = TOK_NORM_STRIP;
        CQ_TRY(tok_jbool(obj, "strip_left", where, true, &n->left));
        return tok_jbool(obj, "strip_right", where, true, &n->right);
    }
    if (!strcmp(type, "Prepend")) {
        const char *s;
        n->type = TOK_NORM_PREPEND;
        CQ_TRY(tok_jstr(obj, "prepend", where, true, &s));
        return dup_str(s, &n->text, &n->text_len);
    }
    if (!strcmp(type, "Replace")) {
        const char *s;
        n->type = TOK_NORM_REPLACE;
        CQ_TRY(tok_jstr(obj, "content", where, true, &s));
        CQ_TRY(dup_str(s, &n->text, &n->text_len));
        return parse_pattern(obj, where, &n->re);
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr;
        size_t cnt;
        n->type = TOK_NORM_SEQUENCE;
        CQ_TRY(array_of(obj, "normalizers", where, &arr, &cnt));
        n->items = cq_calloc(cnt ? cnt : 1, sizeof *n->items);
        if (!n->items) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++) {
            char path[TOK_PATH];
            snprintf(path, sizeof path, "%s.normalizers[%zu]", where, i);
            n->n_items = i + 1;
            CQ_TRY(norm_fill(cJSON_GetArrayItem(arr, (int)i), path, depth + 1, &n->items[i]));
        }
        return CQ_OK;
    }
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: normalizer type '%s' is not supported",
                   where, type);
}

cq_status tok_norm_parse(const cJSON *obj, tok_norm **out) {
    *out = NULL;
    if (!obj || cJSON_IsNull(obj)) return CQ_OK;
    tok_norm *n = cq_calloc(1, sizeof *n);
    if (!n) return CQ_ERR_NOMEM;
    cq_status st = norm_fill(obj, "normalizer", 0, n);
    if (st != CQ_OK) {
        tok_norm_free(n);
        return st;
    }
    *out = n;
    return CQ_OK;
}

/* ---- pre-tokenizers -------------------------------------------------------------- */
static const char k_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static void pretok_clear(tok_pretok *p) {
    tok_regex_free(p->re);
    for (size_t i = 0; i < p->n_items; i++) pretok_clear(&p->items[i]);
    cq_free(p->items);
}

void tok_pretok_free(tok_pretok *p) {
    if (!p) return;
    pretok_clear(p);
    cq_free(p);
}

static cq_status pretok_fill(const cJSON *obj, const char *where, int depth, tok_pretok *p) {
    const char *type;
    CQ_TRY(tok_jtype(obj, where, &type));
    if (depth > 16) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: nested too deeply", where);
    if (!strcmp(type, "Split")) {
        const char *beh;
        p->type = TOK_PRE_SPLIT;
        CQ_TRY(tok_jstr(obj, "behavior", where, true, &beh));
        if (!strcmp(beh, "Removed")) p->behavior = TOK_SPLIT_REMOVED;
        else if (!strcmp(beh, "Isolated")) p->behavior = TOK_SPLIT_ISOLATED;
        else if (!strcmp(beh, "MergedWithPrevious")) p->behavior = TOK_SPLIT_MERGED_PREV;
        else if (!strcmp(beh, "MergedWithNext")) p->behavior = TOK_SPLIT_MERGED_NEXT;
        else if (!strcmp(beh, "Contiguous")) p->behavior = TOK_SPLIT_CONTIGUOUS;
        else return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.behavior: unknown value '%s'", where, beh);
        CQ_TRY(tok_jbool(obj, "invert", where, false, &p->invert));
        return parse_pattern(obj, where, &p->re);
    }
    if (!strcmp(type, "ByteLevel")) {
        bool use_regex = true;
        p->type = TOK_PRE_BYTELEVEL;
        CQ_TRY(tok_jbool(obj, "add_prefix_space", where, true, &p->add_prefix_space));
        CQ_TRY(tok_jbool(obj, "use_regex", where, true, &use_regex));
        if (use_regex) {
            char path[TOK_PATH];
            snprintf(path, sizeof path, "%s (ByteLevel's GPT-2 pattern)", where);
            CQ_TRY(tok_regex_compile(k_gpt2_pattern, sizeof k_gpt2_pattern - 1, false, path, &p->re));
        }
        return CQ_OK;
    }
    if (!strcmp(type, "Metaspace")) {
        uint32_t cp;
        p->type = TOK_PRE_METASPACE;
        CQ_TRY(parse_char(obj, "replacement", where, false, 0x2581, &cp));
        p->rep_len = tok_utf8_encode(cp, p->rep);
        CQ_TRY(parse_scheme(obj, where, &p->scheme));
        return tok_jbool(obj, "split", where, true, &p->split);
    }
    if (!strcmp(type, "Digits")) {
        p->type = TOK_PRE_DIGITS;
        return tok_jbool(obj, "individual_digits", where, false, &p->individual_digits);
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr;
        size_t cnt;
        p->type = TOK_PRE_SEQUENCE;
        CQ_TRY(array_of(obj, "pretokenizers", where, &arr, &cnt));
        p->items = cq_calloc(cnt ? cnt : 1, sizeof *p->items);
        if (!p->items) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++) {
            char path[TOK_PATH];
            snprintf(path, sizeof path, "%s.pretokenizers[%zu]", where, i);
            p->n_items = i + 1;
            CQ_TRY(pretok_fill(cJSON_GetArrayItem(arr, (int)i), path, depth + 1, &p->items[i]));
        }
        return CQ_OK;
    }
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: pre-tokenizer type '%s' is not supported",
                   where, type);
}

cq_status tok_pretok_parse(const cJSON *obj, tok_pretok **out) {
    *out = NULL;
    if (!obj || cJSON_IsNull(obj)) return CQ_OK;
    tok_pretok *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    cq_status st = pretok_fill(obj, "pre_tokenizer", 0, p);
    if (st != CQ_OK) {
        tok_pretok_free(p);
        return st;
    }
    *out = p;
    return CQ_OK;
}

/* ---- decoders -------------------------------------------------------------------- */
static void decoder_clear(tok_decoder *d) {
    tok_regex_free(d->re);
    cq_free(d->text);
    for (size_t i = 0; i < d->n_items; i++) decoder_clear(&d->items[i]);
    cq_free(d->items);
}

void tok_decoder_free(tok_decoder *d) {
    if (!d) return;
    decoder_clear(d);
    cq_free(d);
}

static cq_status decoder_fill(const cJSON *obj, const char *where, int depth, tok_decoder *d) {
    const char *type;
    CQ_TRY(tok_jtype(obj, where, &type));
    if (depth > 16) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: nested too deeply", where);
    if (!strcmp(type, "ByteLevel")) {
        d->type = TOK_DEC_BYTELEVEL;
        return CQ_OK;
    }
    if (!strcmp(type, "ByteFallback")) {
        d->type = TOK_DEC_BYTEFALLBACK;
        return CQ_OK;
    }
    if (!strcmp(type, "Fuse")) {
        d->type = TOK_DEC_FUSE;
        return CQ_OK;
    }
    if (!strcmp(type, "Replace")) {
        const char *s;
        d->type = TOK_DEC_REPLACE;
        CQ_TRY(tok_jstr(obj, "content", where, true, &s));
        CQ_TRY(dup_str(s, &d->text, &d->text_len));
        return parse_pattern(obj, where, &d->re);
    }
    if (!strcmp(type, "Strip")) {
        int64_t v = 0;
        char path[TOK_PATH];
        d->type = TOK_DEC_STRIP;
        CQ_TRY(parse_char(obj, "content", where, true, ' ', &d->strip_cp));
        snprintf(path, sizeof path, "%s.start", where);
        CQ_TRY(tok_jint(tok_jget(obj, "start"), path, 1e9, &v));
        d->start = (size_t)v;
        snprintf(path, sizeof path, "%s.stop", where);
        CQ_TRY(tok_jint(tok_jget(obj, "stop"), path, 1e9, &v));
        d->stop = (size_t)v;
        return CQ_OK;
    }
    if (!strcmp(type, "Metaspace")) {
        d->type = TOK_DEC_METASPACE;
        CQ_TRY(parse_char(obj, "replacement", where, false, 0x2581, &d->strip_cp));
        return parse_scheme(obj, where, &d->scheme);
    }
    if (!strcmp(type, "BPEDecoder")) {
        const char *s;
        d->type = TOK_DEC_BPE;
        CQ_TRY(tok_jstr(obj, "suffix", where, false, &s));
        return dup_str(s ? s : "</w>", &d->text, &d->text_len);
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr;
        size_t cnt;
        d->type = TOK_DEC_SEQUENCE;
        CQ_TRY(array_of(obj, "decoders", where, &arr, &cnt));
        d->items = cq_calloc(cnt ? cnt : 1, sizeof *d->items);
        if (!d->items) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++) {
            char path[TOK_PATH];
            snprintf(path, sizeof path, "%s.decoders[%zu]", where, i);
            d->n_items = i + 1;
            CQ_TRY(decoder_fill(cJSON_GetArrayItem(arr, (int)i), path, depth + 1, &d->items[i]));
        }
        return CQ_OK;
    }
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: decoder type '%s' is not supported", where,
                   type);
}

cq_status tok_decoder_parse(const cJSON *obj, tok_decoder **out) {
    *out = NULL;
    if (!obj || cJSON_IsNull(obj)) return CQ_OK;
    tok_decoder *d = cq_calloc(1, sizeof *d);
    if (!d) return CQ_ERR_NOMEM;
    cq_status st = decoder_fill(obj, "decoder", 0, d);
    if (st != CQ_OK) {
        tok_decoder_free(d);
        return st;
    }
    *out = d;
    return CQ_OK;
}

/* ---- post-processors ------------------------------------------------------------- */
static void post_clear(tok_post *p) {
    cq_free(p->before);
    cq_free(p->after);
    for (size_t i = 0; i < p->n_items; i++) post_clear(&p->items[i]);
    cq_free(p->items);
}

void tok_post_free(tok_post *p) {
    if (!p) return;
    post_clear(p);
    cq_free(p);
}

static cq_status ids_append(int32_t **v, size_t *n, const int32_t *src, size_t k) {
    int32_t *p = cq_reallocn(*v, *n + k + 1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    memcpy(p + *n, src, k * sizeof *p);
    *v = p;
    *n += k;
    return CQ_OK;
}

/* Check one template (single or pair) and, for the single one, collect the
 * ids before and after the sequence. */
static cq_status template_items(const cJSON *tpl, const cJSON *specials, const char *where, bool single,
                                tok_post *p) {
    if (!cJSON_IsArray(tpl))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected an array of template pieces", where);
    size_t n = (size_t)cJSON_GetArraySize(tpl), seq_seen = 0;
    for (size_t i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(tpl, (int)i);
        char path[TOK_PATH];
        snprintf(path, sizeof path, "%s[%zu]", where, i);
        const cJSON *sp = cJSON_IsObject(it) ? tok_jget(it, "SpecialToken") : NULL;
        const cJSON *sq = cJSON_IsObject(it) ? tok_jget(it, "Sequence") : NULL;
        if ((sp != NULL) == (sq != NULL) || cJSON_GetArraySize(it) != 1)
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected {\"SpecialToken\": ...} or "
                           "{\"Sequence\": ...}", path);
        const char *id;
        CQ_TRY(tok_jstr(sp ? sp : sq, "id", path, true, &id));
        if (sq) {
            bool ok = single ? !strcmp(id, "A") : (!strcmp(id, "A") || !strcmp(id, "B"));
            if (!ok) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: sequence '%s' is not A%s", path,
                                    id, single ? "" : " or B");
            seq_seen++;
            continue;
        }
        const cJSON *def = specials ? cJSON_GetObjectItemCaseSensitive(specials, id) : NULL;
        if (!def || !cJSON_IsObject(def))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: special token '%s' missing from "
                           "post_processor.special_tokens", path, id);
        const cJSON *ids = tok_jget(def, "ids");
        if (!ids || !cJSON_IsArray(ids))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: post_processor.special_tokens['%s'].ids: "
                           "expected an array", id);
        if (!single) continue;
        size_t k = (size_t)cJSON_GetArraySize(ids);
        for (size_t j = 0; j < k; j++) {
            int64_t v = 0;
            char ipath[TOK_PATH];
            snprintf(ipath, sizeof ipath, "post_processor.special_tokens['%s'].ids[%zu]", id, j);
            CQ_TRY(tok_jint(cJSON_GetArrayItem(ids, (int)j), ipath, TOK_MAX_ID, &v));
            int32_t v32 = (int32_t)v;
            if (seq_seen == 0) CQ_TRY(ids_append(&p->before, &p->n_before, &v32, 1));
            else CQ_TRY(ids_append(&p->after, &p->n_after, &v32, 1));
        }
    }
    if (single && seq_seen != 1)
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: needs exactly one Sequence A", where);
    return CQ_OK;
}

/* ["[CLS]", 101] */
static cq_status pair_id(const cJSON *obj, const char *key, const char *where, int32_t *id) {
    const cJSON *a = tok_jget(obj, key);
    char path[TOK_PATH];
    snprintf(path, sizeof path, "%s.%s", where, key);
    if (!a || !cJSON_IsArray(a) || cJSON_GetArraySize(a) != 2 || !cJSON_IsString(cJSON_GetArrayItem(a, 0)))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected [token, id]", path);
    int64_t v = 0;
    CQ_TRY(tok_jint(cJSON_GetArrayItem(a, 1), path, TOK_MAX_ID, &v));
    *id = (int32_t)v;
    return CQ_OK;
}

static cq_status post_fill(const cJSON *obj, const char *where, int depth, tok_post *p) {
    const char *type;
    CQ_TRY(tok_jtype(obj, where, &type));
    if (depth > 16) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: nested too deeply", where);
    if (!strcmp(type, "ByteLevel")) { /* offsets only */
        p->type = TOK_POST_NOOP;
        return CQ_OK;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        char path[TOK_PATH];
        p->type = TOK_POST_TEMPLATE;
        const cJSON *specials = tok_jget(obj, "special_tokens");
        if (specials && !cJSON_IsObject(specials))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.special_tokens: expected an object", where);
        snprintf(path, sizeof path, "%s.single", where);
        CQ_TRY(template_items(tok_jget(obj, "single"), specials, path, true, p));
        const cJSON *pair = tok_jget(obj, "pair");
        snprintf(path, sizeof path, "%s.pair", where);
        if (pair) CQ_TRY(template_items(pair, specials, path, false, p));
        return CQ_OK;
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        int32_t cls, sep;
        p->type = TOK_POST_TEMPLATE;
        CQ_TRY(pair_id(obj, "cls", where, &cls));
        CQ_TRY(pair_id(obj, "sep", where, &sep));
        CQ_TRY(ids_append(&p->before, &p->n_before, &cls, 1));
        return ids_append(&p->after, &p->n_after, &sep, 1);
    }
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr;
        size_t cnt;
        p->type = TOK_POST_SEQUENCE;
        CQ_TRY(array_of(obj, "processors", where, &arr, &cnt));
        p->items = cq_calloc(cnt ? cnt : 1, sizeof *p->items);
        if (!p->items) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < cnt; i++) {
            char path[TOK_PATH];
            snprintf(path, sizeof path, "%s.processors[%zu]", where, i);
            p->n_items = i + 1;
            CQ_TRY(post_fill(cJSON_GetArrayItem(arr, (int)i), path, depth + 1, &p->items[i]));
        }
        return CQ_OK;
    }
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: %s: post-processor type '%s' is not supported",
                   where, type);
}

cq_status tok_post_parse(const cJSON *obj, tok_post **out) {
    *out = NULL;
    if (!obj || cJSON_IsNull(obj)) return CQ_OK;
    tok_post *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    cq_status st = post_fill(obj, "post_processor", 0, p);
    if (st != CQ_OK) {
        tok_post_free(p);
        return st;
    }
    *out = p;
    return CQ_OK;
}
