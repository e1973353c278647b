/*
 * tok_load.c — turns tokenizer.json bytes into a cq_tokenizer: the BPE model
 * (vocab, merges), the added tokens with the ids Hugging Face would give
 * them, the pipeline components, and the id -> string table for decoding.
 * Also the small accessors and cq_tokenizer_free.
 *
 * Validation is strict: every field is type-checked and named in the error;
 * ids must be integers below 2^24; a vocab with a duplicated token or id, or
 * a merge naming a token outside the vocab, is malformed (CQ_ERR_PARSE).
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tok_config.h"
#include "tokenizer/tok_json.h"

/* ---- model ------------------------------------------------------------------ */
static cq_status opt_str(const cJSON *m, const char *key, char **out, size_t *len) {
    const char *s;
    CQ_TRY(tok_jstr(m, key, "model", false, &s));
    *out = NULL;
    if (len) *len = 0;
    if (!s || (len && !*s)) return CQ_OK; /* an empty prefix/suffix changes nothing */
    *out = cq_strdup(s);
    if (!*out) return CQ_ERR_NOMEM;
    if (len) *len = strlen(s);
    return CQ_OK;
}

static cq_status load_vocab(cq_tokenizer *t, const cJSON *vocab) {
    tok_bpe *b = &t->bpe;
    if (!vocab || !cJSON_IsObject(vocab))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.vocab: expected an object of token -> id");
    size_t n = (size_t)cJSON_GetArraySize(vocab);
    CQ_TRY(tok_map_init(&b->vocab, n));
    int64_t max_id = -1;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        char path[TOK_PATH];
        snprintf(path, sizeof path, "model.vocab['%.60s']", it->string ? it->string : "");
        int64_t id = 0;
        CQ_TRY(tok_jint(it, path, TOK_MAX_ID, &id));
        size_t klen = strlen(it->string);
        if (!tok_utf8_is_valid(it->string, klen))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: token is not valid UTF-8", path);
        int32_t prev;
        CQ_TRY(tok_map_put(&b->vocab, it->string, klen, (int32_t)id, &prev));
        if (prev >= 0) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: token listed twice", path);
        if (id > max_id) max_id = id;
    }
    b->vocab_count = b->vocab.count;
    t->n_ids = (size_t)(max_id + 1);
    return CQ_OK;
}

static cq_status merge_parts(const cJSON *it, size_t i, bool legacy, const char **a, size_t *alen,
                             const char **bb, size_t *blen) {
    if (legacy) {
        if (!cJSON_IsString(it))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: expected \"a b\" like the "
                           "other entries", i);
        const char *s = it->valuestring;
        const char *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: '%.60s' is not two "
                           "tokens separated by one space", i, s);
        *a = s;
        *alen = (size_t)(sp - s);
        *bb = sp + 1;
        *blen = strlen(sp + 1);
        return CQ_OK;
    }
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsString(cJSON_GetArrayItem(it, 0)) ||
        !cJSON_IsString(cJSON_GetArrayItem(it, 1)))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: expected [\"a\", \"b\"] like "
                       "the other entries", i);
    *a = cJSON_GetArrayItem(it, 0)->valuestring;
    *bb = cJSON_GetArrayItem(it, 1)->valuestring;
    *alen = strlen(*a);
    *blen = strlen(*bb);
    return CQ_OK;
}

static cq_status load_merges(cq_tokenizer *t, const cJSON *merges) {
    tok_bpe *b = &t->bpe;
    if (!merges || !cJSON_IsArray(merges))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges: expected an array");
    size_t n = (size_t)cJSON_GetArraySize(merges);
    CQ_TRY(tok_pairmap_init(&b->merges, n));
    bool legacy = merges->child && cJSON_IsString(merges->child);
    tok_buf joined = {0};
    cq_status st = CQ_OK;
    size_t rank = 0, i = 0;
    for (const cJSON *it = merges->child; it && st == CQ_OK; it = it->next, i++) {
        const char *a = NULL, *c = NULL;
        size_t alen = 0, clen = 0;
        if (legacy && cJSON_IsString(it) && !strncmp(it->valuestring, "#version", 8)) continue;
        st = merge_parts(it, i, legacy, &a, &alen, &c, &clen);
        if (st != CQ_OK) break;
        int32_t ia = tok_map_get(&b->vocab, a, alen), ic = tok_map_get(&b->vocab, c, clen);
        if (ia < 0 || ic < 0) {
            st = cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: token '%.*s' is not in "
                         "model.vocab", i, (int)(ia < 0 ? CQ_MIN(alen, 60) : CQ_MIN(clen, 60)),
                         ia < 0 ? a : c);
            break;
        }
        if (clen < b->prefix_len) {
            st = cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: second token is shorter "
                         "than continuing_subword_prefix", i);
            break;
        }
        joined.n = 0;
        st = tok_buf_append(&joined, a, alen);
        if (st == CQ_OK) st = tok_buf_append(&joined, c + b->prefix_len, clen - b->prefix_len);
        if (st != CQ_OK) break;
        int32_t inew = tok_map_get(&b->vocab, joined.p, joined.n);
        if (inew < 0) {
            st = cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.merges[%zu]: merged token '%.60s' is not "
                         "in model.vocab", i, joined.p);
            break;
        }
        tok_pairmap_put(&b->merges, ia, ic, (uint32_t)rank++, inew);
    }
    tok_buf_free(&joined);
    return st;
}

static const char *const k_other_models[] = {"WordPiece", "WordLevel", "Unigram"};

static cq_status load_model(cq_tokenizer *t, const cJSON *m) {
    if (!m || !cJSON_IsObject(m)) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model: expected an object");
    const char *type;
    CQ_TRY(tok_jstr(m, "type", "model", false, &type));
    if (type && strcmp(type, "BPE") != 0) {
        for (size_t i = 0; i < CQ_ARRAY_LEN(k_other_models); i++)
            if (!strcmp(type, k_other_models[i]))
                return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: model.type: '%s' models are not "
                               "supported (only BPE)", type);
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: model.type: unknown model type '%.60s'", type);
    }
    tok_bpe *b = &t->bpe;
    const cJSON *drop = tok_jget(m, "dropout");
    if (drop) {
        if (!cJSON_IsNumber(drop) || !(drop->valuedouble >= 0 && drop->valuedouble <= 1))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.dropout: expected a number in [0, 1]");
        if (drop->valuedouble > 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: model.dropout: BPE dropout (random "
                           "merges) is not supported");
    }
    CQ_TRY(opt_str(m, "unk_token", &b->unk, NULL));
    CQ_TRY(opt_str(m, "continuing_subword_prefix", &b->prefix, &b->prefix_len));
    CQ_TRY(opt_str(m, "end_of_word_suffix", &b->suffix, &b->suffix_len));
    CQ_TRY(tok_jbool(m, "fuse_unk", "model", false, &b->fuse_unk));
    CQ_TRY(tok_jbool(m, "byte_fallback", "model", false, &b->byte_fallback));
    CQ_TRY(tok_jbool(m, "ignore_merges", "model", false, &b->ignore_merges));
    const cJSON *vocab = tok_jget(m, "vocab"), *merges = tok_jget(m, "merges");
    if (!type && (!vocab || !merges))
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.type: missing, and the model is not BPE-shaped");
    CQ_TRY(load_vocab(t, vocab));
    CQ_TRY(load_merges(t, merges));
    return tok_bpe_init_tables(b);
}

/* ---- added tokens ------------------------------------------------------------
 * Hugging Face re-assigns ids when it loads added tokens: a content already
 * in the vocabulary keeps that id, a new one takes the next free id counted
 * from the model's vocabulary size; the "id" in the file only triggers a
 * warning. The same happens here, so ids agree even for odd files. */
static cq_status load_added(cq_tokenizer *t, const cJSON *arr) {
    if (!arr) return CQ_OK;
    if (!cJSON_IsArray(arr)) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: added_tokens: expected an array");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    t->added = cq_calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return CQ_ERR_NOMEM;
    CQ_TRY(tok_map_init(&t->added_map, n));
    int64_t next_id = (int64_t)t->bpe.vocab_count;
    size_t i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char path[TOK_PATH];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!cJSON_IsObject(it)) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: expected an object", path);
        const char *content;
        int64_t file_id = 0;
        char ipath[TOK_PATH + 8];
        snprintf(ipath, sizeof ipath, "%s.id", path);
        CQ_TRY(tok_jint(tok_jget(it, "id"), ipath, TOK_MAX_ID, &file_id));
        CQ_TRY(tok_jstr(it, "content", path, true, &content));
        tok_added a = {0};
        CQ_TRY(tok_jbool(it, "special", path, false, &a.special));
        CQ_TRY(tok_jbool(it, "single_word", path, false, &a.single_word));
        CQ_TRY(tok_jbool(it, "lstrip", path, false, &a.lstrip));
        CQ_TRY(tok_jbool(it, "rstrip", path, false, &a.rstrip));
        CQ_TRY(tok_jbool(it, "normalized", path, true, &a.normalized));
        a.len = strlen(content);
        if (a.len == 0) continue; /* ignored by Hugging Face as well */
        if (!tok_utf8_is_valid(content, a.len))
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s.content: not valid UTF-8", path);
        int32_t id = tok_map_get(&t->added_map, content, a.len);
        if (id >= 0 && t->id_added) { /* same content again: identical entries are skipped */
            const tok_added *o = &t->added[t->id_added[id]];
            if (o->special == a.special && o->single_word == a.single_word && o->lstrip == a.lstrip &&
                o->rstrip == a.rstrip && o->normalized == a.normalized)
                continue;
        }
        if (id < 0) id = tok_map_get(&t->bpe.vocab, content, a.len);
        if (id < 0) {
            if (next_id >= TOK_MAX_ID)
                return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: ids exceed %d", path, TOK_MAX_ID);
            id = (int32_t)next_id++;
        }
        if (id != file_id)
            CQ_WARN("tokenizer.json: %s: '%.40s' declared with id %lld gets id %d", path, content,
                    (long long)file_id, id);
        a.id = id;
        a.content = cq_strndup(content, a.len);
        if (!a.content) return CQ_ERR_NOMEM;
        if (a.normalized && t->normalizer) {
            tok_buf nb = {0};
            cq_status st = tok_normalize(t->normalizer, content, a.len, &nb);
            if (st == CQ_OK && (nb.n != a.len || memcmp(nb.p, content, a.len) != 0)) {
                a.norm = nb.p;
                a.norm_len = nb.n;
            } else {
                tok_buf_free(&nb);
            }
            if (st != CQ_OK) {
                cq_free(a.content);
                return st;
            }
        }
        size_t idx = t->n_added++;
        t->added[idx] = a;
        CQ_TRY(tok_map_put(&t->added_map, content, a.len, id, NULL));
        /* grow the id tables to cover the new id */
        if ((size_t)id >= t->n_ids || !t->id_added) {
            size_t n_ids = CQ_MAX(t->n_ids, (size_t)id + 1);
            int32_t *ia = cq_reallocn(t->id_added, n_ids, sizeof *ia);
            if (!ia) return CQ_ERR_NOMEM;
            for (size_t k = t->id_added ? t->n_ids : 0; k < n_ids; k++) ia[k] = -1;
            t->id_added = ia;
            t->n_ids = n_ids;
        }
        /* a content once special stays special (HF keeps a set of contents) */
        int32_t old = t->id_added[id];
        if (old >= 0 && t->added[old].special && t->added[old].len == a.len &&
            !memcmp(t->added[old].content, a.content, a.len))
            t->added[idx].special = true;
        t->id_added[id] = (int32_t)idx;
    }
    return CQ_OK;
}

/* id -> string for decoding (model vocabulary; added tokens looked up apart). */
static cq_status build_id_table(cq_tokenizer *t) {
    if (!t->id_added) {
        t->id_added = cq_mallocn(t->n_ids ? t->n_ids : 1, sizeof *t->id_added);
        if (!t->id_added) return CQ_ERR_NOMEM;
        for (size_t k = 0; k < t->n_ids; k++) t->id_added[k] = -1;
    }
    t->id_off = cq_mallocn(t->n_ids ? t->n_ids : 1, sizeof *t->id_off);
    t->id_len = cq_mallocn(t->n_ids ? t->n_ids : 1, sizeof *t->id_len);
    if (!t->id_off || !t->id_len) return CQ_ERR_NOMEM;
    for (size_t k = 0; k < t->n_ids; k++) t->id_len[k] = UINT32_MAX;
    const tok_map *v = &t->bpe.vocab;
    for (size_t i = 0; i < v->cap; i++) {
        const tok_map_slot *s = &v->slots[i];
        if (s->len == UINT32_MAX) continue;
        if (t->id_len[s->val] != UINT32_MAX) {
            const char *o = t->bpe.vocab.keys.p + t->id_off[s->val];
            return cq_fail(CQ_ERR_PARSE, "tokenizer.json: model.vocab: id %d is used by both '%.40s' and "
                           "'%.40s'", s->val, o, v->keys.p + s->off);
        }
        t->id_off[s->val] = s->off; /* the vocab map's key arena doubles as the string table */
        t->id_len[s->val] = s->len;
    }
    return CQ_OK;
}

/* ---- top level ------------------------------------------------------------------ */
static cq_status check_top(const cJSON *root) {
    if (!cJSON_IsObject(root)) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: top level is not an object");
    const char *ver;
    CQ_TRY(tok_jstr(root, "version", "(top)", false, &ver));
    if (ver && strcmp(ver, "1.0") != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: version: unknown tokenizer version '%.20s'", ver);
    if (tok_jget(root, "truncation"))
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: truncation: is set; truncating encodings is "
                       "not supported (set it to null)");
    const cJSON *pad = tok_jget(root, "padding");
    if (pad) { /* batch-longest padding leaves a single sequence unchanged */
        const char *strategy = NULL;
        const cJSON *s = cJSON_IsObject(pad) ? tok_jget(pad, "strategy") : NULL;
        if (s && cJSON_IsString(s)) strategy = s->valuestring;
        if (!strategy || strcmp(strategy, "BatchLongest") != 0 || tok_jget(pad, "pad_to_multiple_of"))
            return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer.json: padding: only BatchLongest padding "
                           "without pad_to_multiple_of is supported");
    }
    return CQ_OK;
}

/* Every id a post-processor inserts names a token of the vocabulary (its ids are only range-checked while
 * parsing, before the vocabulary is known). */
static cq_status post_ids_known(const cq_tokenizer *t, const tok_post *p) {
    if (!p) return CQ_OK;
    for (int side = 0; side < 2; side++) {
        const int32_t *ids = side ? p->after : p->before;
        const size_t n = side ? p->n_after : p->n_before;
        for (size_t i = 0; i < n; i++)
            if (!cq_tokenizer_id_to_token(t, ids[i], NULL))
                return cq_fail(CQ_ERR_PARSE, "tokenizer.json: post_processor inserts token id %d, which is not in the "
                               "vocabulary (%zu ids)", ids[i], t->n_ids);
    }
    for (size_t i = 0; i < p->n_items; i++) CQ_TRY(post_ids_known(t, &p->items[i]));
    return CQ_OK;
}

static cq_status load_tree(cq_tokenizer *t, const cJSON *root) {
    CQ_TRY(check_top(root));
    CQ_TRY(tok_norm_parse(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &t->normalizer));
    CQ_TRY(tok_pretok_parse(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &t->pretok));
    CQ_TRY(tok_post_parse(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), &t->post));
    CQ_TRY(tok_decoder_parse(cJSON_GetObjectItemCaseSensitive(root, "decoder"), &t->decoder));
    CQ_TRY(load_model(t, tok_jget(root, "model")));
    CQ_TRY(load_added(t, tok_jget(root, "added_tokens")));
    CQ_TRY(build_id_table(t));
    CQ_TRY(post_ids_known(t, t->post));
    CQ_TRY(tok_trie_build(&t->trie_raw, t, false));
    return tok_trie_build(&t->trie_norm, t, true);
}

cq_status cq_tokenizer_load(const void *json, size_t len, cq_tokenizer **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_load: out is NULL");
    *out = NULL;
    if (!json && len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_load: json is NULL");
    if (len == 0) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: empty");
    /* JSON text is UTF-8 (RFC 8259), as the reference's parser insists; cJSON
     * does not check, and a string with stray bytes would decode to them */
    const long bad = cq_utf8_invalid_at_n(json, len);
    if (bad >= 0) return cq_fail(CQ_ERR_PARSE, "tokenizer.json: not valid UTF-8 (byte %ld of %zu)", bad + 1, len);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = (at && at >= (const char *)json && at <= (const char *)json + len)
                         ? (size_t)(at - (const char *)json) : 0;
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: not valid JSON (near byte %zu)", off);
    }
    cq_tokenizer *t = cq_calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return CQ_ERR_NOMEM;
    }
    cq_status st = load_tree(t, root);
    cJSON_Delete(root);
    if (st != CQ_OK) {
        cq_tokenizer_free(t);
        return st;
    }
    *out = t;
    return CQ_OK;
}

cq_status cq_tokenizer_load_file(const char *path, cq_tokenizer **out) {
    if (!out || !path) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_load_file: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return cq_fail(CQ_ERR_IO, "cannot open tokenizer '%s'", path);
    tok_buf b = {0};
    char chunk[1 << 16];
    size_t k;
    cq_status st = CQ_OK;
    while (st == CQ_OK && (k = fread(chunk, 1, sizeof chunk, f)) > 0) st = tok_buf_append(&b, chunk, k);
    if (st == CQ_OK && ferror(f)) st = cq_fail(CQ_ERR_IO, "cannot read tokenizer '%s'", path);
    fclose(f);
    if (st == CQ_OK) st = cq_tokenizer_load(b.p, b.n, out);
    if (st != CQ_OK) cq_fail_prefix(st, "%s: ", path);
    tok_buf_free(&b);
    return st;
}

void cq_tokenizer_free(cq_tokenizer *t) {
    if (!t) return;
    tok_bpe_free(&t->bpe);
    cq_free(t->id_off);
    cq_free(t->id_len);
    cq_free(t->id_added);
    for (size_t i = 0; i < t->n_added; i++) {
        cq_free(t->added[i].content);
        cq_free(t->added[i].norm);
    }
    cq_free(t->added);
    tok_map_free(&t->added_map);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    tok_norm_free(t->normalizer);
    tok_pretok_free(t->pretok);
    tok_post_free(t->post);
    tok_decoder_free(t->decoder);
    tok_buf_free(&t->s_text);
    tok_buf_free(&t->s_norm);
    tok_pieces_free(&t->s_pieces);
    tok_pieces_free(&t->s_pieces_tmp);
    tok_spans_free(&t->s_spans);
    tok_splits_free(&t->s_raw);
    tok_splits_free(&t->s_norm_splits);
    cq_free(t);
}

/* ---- accessors ---------------------------------------------------------------- */
size_t cq_tokenizer_vocab_size(const cq_tokenizer *t) { return t ? t->n_ids : 0; }

int32_t cq_tokenizer_token_to_id(const cq_tokenizer *t, const char *s, size_t len) {
    if (!t || (!s && len)) return -1;
    int32_t id = tok_map_get(&t->added_map, s ? s : "", len);
    return id >= 0 ? id : tok_map_get(&t->bpe.vocab, s ? s : "", len);
}

const char *cq_tokenizer_id_to_token(const cq_tokenizer *t, int32_t id, size_t *len) {
    if (len) *len = 0;
    if (!t || id < 0 || (size_t)id >= t->n_ids) return NULL;
    if (t->id_added[id] >= 0) {
        const tok_added *a = &t->added[t->id_added[id]];
        if (len) *len = a->len;
        return a->content;
    }
    if (t->id_len[id] == UINT32_MAX) return NULL;
    if (len) *len = t->id_len[id];
    return t->bpe.vocab.keys.p + t->id_off[id];
}

bool cq_tokenizer_is_special(const cq_tokenizer *t, int32_t id) {
    if (!t || id < 0 || (size_t)id >= t->n_ids) return false;
    return t->id_added[id] >= 0 && t->added[t->id_added[id]].special;
}
