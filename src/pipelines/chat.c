/*
 * chat.c — the chat session: conversation state, template rendering,
 * prefix reuse of the K/V cache between turns, and the generation loop.
 * (See chat.h for why re-rendering everything and keeping the longest
 * common prefix is exact.)
 */
#include "pipelines/chat.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "base/base.h"
#include "format/cmf.h"
#include "format/jsonutil.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define CHAT_DEFAULT_CONTEXT 4096
#define CHAT_MAX_STOP 16

/* ChatML, for files without a template of their own. */
static const char k_chatml[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct cq_chat {
    cq_causal_lm lm;
    void *cache;           /* the model's K/V cache */
    cq_tokenizer *tok;
    cq_chat_template *tmpl;
    cJSON *messages, *extra;
    bool raw;
    char *transcript;      /* raw mode: the plain text so far */
    size_t transcript_len;
    int32_t *ctx;          /* the ids the cache was fed, [capacity] */
    int n_ctx;
    cq_tokens enc;         /* the rendered conversation's ids */
    int32_t stop[CHAT_MAX_STOP];
    int n_stop;
    float *logits;         /* [vocab] */
    int32_t *reply;        /* this turn's generated ids, [capacity] */
    char *prompt;
};

/* ------------------------------------------------------------------------ */
/* Setup                                                                    */
/* ------------------------------------------------------------------------ */
static void add_stop(cq_chat *c, int64_t id) {
    if (id < 0 || id >= c->lm.vocab || c->n_stop == CHAT_MAX_STOP) return;
    for (int i = 0; i < c->n_stop; i++)
        if (c->stop[i] == id) return;
    c->stop[c->n_stop++] = (int32_t)id;
}

static void find_stops(cq_chat *c, const cJSON *tcfg) {
    const cJSON *eos = tcfg ? cJSON_GetObjectItemCaseSensitive(tcfg, "eos_token_ids") : NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, eos) if (cJSON_IsNumber(e)) add_stop(c, (int64_t)e->valuedouble);
    if (c->n_stop) return;
    static const char *const fallback[] = {"<|im_end|>", "<|endoftext|>"};
    for (size_t i = 0; i < CQ_ARRAY_LEN(fallback); i++)
        add_stop(c, cq_tokenizer_token_to_id(c->tok, fallback[i], strlen(fallback[i])));
}

/* The template's bos_token / eos_token strings, from the header's ids. */
static cq_status token_string(cq_chat *c, const cJSON *tcfg, const char *id_key, const char *name) {
    const cJSON *v = tcfg ? cJSON_GetObjectItemCaseSensitive(tcfg, id_key) : NULL;
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (!cJSON_IsNumber(v)) return CQ_OK;
    size_t len = 0;
    const char *s = cq_tokenizer_id_to_token(c->tok, (int32_t)v->valuedouble, &len);
    if (!s) return CQ_OK;
    char *z = cq_strndup(s, len);
    if (!z) return CQ_ERR_NOMEM;
    cJSON *str = cJSON_CreateString(z);
    cq_free(z);
    if (!str || !cJSON_AddItemToObject(c->extra, name, str)) {
        cJSON_Delete(str);
        return cq_fail(CQ_ERR_NOMEM, "chat: template context");
    }
    return CQ_OK;
}

static cq_status build_extra(cq_chat *c, const cJSON *tcfg, int enable_thinking) {
    c->extra = cJSON_CreateObject();
    if (!c->extra) return cq_fail(CQ_ERR_NOMEM, "chat: template context");
    CQ_TRY(token_string(c, tcfg, "bos_token_id", "bos_token"));
    CQ_TRY(token_string(c, tcfg, "eos_token_ids", "eos_token"));
    if (enable_thinking >= 0 && !cJSON_AddBoolToObject(c->extra, "enable_thinking", enable_thinking != 0))
        return cq_fail(CQ_ERR_NOMEM, "chat: template context");
    return CQ_OK;
}

void cq_chat_free(cq_chat *c) {
    if (!c) return;
    if (c->cache) c->lm.cache_free(c->cache);
    cq_tokenizer_free(c->tok);
    cq_chat_template_free(c->tmpl);
    cJSON_Delete(c->messages);
    cJSON_Delete(c->extra);
    cq_free(c->transcript);
    cq_free(c->ctx);
    cq_tokens_free(&c->enc);
    cq_free(c->logits);
    cq_free(c->reply);
    cq_free(c->prompt);
    cq_free(c);
}

static cq_status chat_setup(cq_chat *c, const cq_cmf *cmf, const cq_chat_opts *o) {
    if (!c->lm.has_logits) return cq_fail(CQ_ERR_UNSUPPORTED, "chat: the model has no lm_head, it cannot generate");
    size_t tl = 0;
    const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
    if (!tj) return cq_fail(CQ_ERR_MISSING, "chat: the file has no tokenizer (convert a folder with tokenizer.json)");
    CQ_TRY(cq_tokenizer_load(tj, tl, &c->tok));
    const cJSON *tcfg = cq_cmf_tokenizer_config(cmf);
    find_stops(c, tcfg);
    if (!c->n_stop) CQ_WARN("chat: no stop token known; replies end at --max-tokens");
    c->raw = o->raw;
    if (!c->raw) {
        const char *t = o->chat_template ? o->chat_template : cq_cmf_chat_template(cmf);
        if (!t) {
            CQ_INFO("chat: the file has no chat template; using ChatML");
            t = k_chatml;
        }
        CQ_TRY(cq_chat_template_compile(t, strlen(t), &c->tmpl));
        c->messages = cJSON_CreateArray();
        if (!c->messages) return cq_fail(CQ_ERR_NOMEM, "chat: messages");
        CQ_TRY(build_extra(c, tcfg, o->enable_thinking));
    }
    int ctx = o->context > 0 ? o->context : CHAT_DEFAULT_CONTEXT;
    if (o->context <= 0 && c->lm.max_positions > 0) ctx = CQ_MIN(ctx, c->lm.max_positions);
    CQ_TRY(c->lm.cache_create(c->lm.self, ctx, o->batch > 0 ? o->batch : 512, &c->cache));
    c->ctx = cq_mallocn((size_t)ctx, sizeof(int32_t));
    c->reply = cq_mallocn((size_t)ctx, sizeof(int32_t));
    c->logits = cq_mallocn((size_t)c->lm.vocab, sizeof(float));
    if (!c->ctx || !c->reply || !c->logits) return CQ_ERR_NOMEM;
    return CQ_OK;
}

cq_status cq_chat_create(const cq_cmf *cmf, const cq_causal_lm *model, const cq_chat_opts *opts, cq_chat **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "chat: out is NULL");
    *out = NULL;
    if (!cmf || !model || !model->cache_create || !model->cache_free || !model->capacity || !model->truncate ||
        !model->feed || model->vocab < 1)
        return cq_fail(CQ_ERR_INVALID_ARG, "chat: needs a file and a model");
    cq_chat_opts def = {.enable_thinking = -1};
    cq_json_init(); /* cJSON values below and inside the template engine share one allocator */
    cq_chat *c = cq_calloc(1, sizeof *c);
    if (!c) return CQ_ERR_NOMEM;
    c->lm = *model;
    cq_status s = chat_setup(c, cmf, opts ? opts : &def);
    if (s != CQ_OK) {
        cq_chat_free(c);
        return s;
    }
    *out = c;
    return CQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Conversation                                                             */
/* ------------------------------------------------------------------------ */
static cq_status transcript_append(cq_chat *c, const char *s, size_t n) {
    char *t = cq_realloc(c->transcript, c->transcript_len + n + 1);
    if (!t) return CQ_ERR_NOMEM;
    memcpy(t + c->transcript_len, s, n);
    c->transcript_len += n;
    t[c->transcript_len] = 0;
    c->transcript = t;
    return CQ_OK;
}

static cq_status add_message_n(cq_chat *c, const char *role, const char *content, size_t len) {
    if (c->raw) return transcript_append(c, content, len);
    char *z = cq_strndup(content, len);
    if (!z) return CQ_ERR_NOMEM;
    cJSON *msg = cJSON_CreateObject();
    bool ok = msg && cJSON_AddStringToObject(msg, "role", role) && cJSON_AddStringToObject(msg, "content", z) &&
              cJSON_AddItemToArray(c->messages, msg);
    cq_free(z);
    if (!ok) {
        cJSON_Delete(msg);
        return cq_fail(CQ_ERR_NOMEM, "chat: messages");
    }
    return CQ_OK;
}

cq_status cq_chat_add_message(cq_chat *c, const char *role, const char *content) {
    if (!c || !role || !content) return cq_fail(CQ_ERR_INVALID_ARG, "chat: a message needs a role and content");
    return add_message_n(c, role, content, strlen(content));
}

/* Drop the last message (a user turn that failed before generating). */
static void pop_message(cq_chat *c, size_t transcript_len) {
    if (c->raw) {
        c->transcript_len = transcript_len;
        if (c->transcript) c->transcript[transcript_len] = 0;
        return;
    }
    int n = cJSON_GetArraySize(c->messages);
    if (n > 0) cJSON_DeleteItemFromArray(c->messages, n - 1);
}

/* Render the conversation (with the generation prompt) into c->prompt and
 * tokenize it into c->enc. */
static cq_status render(cq_chat *c) {
    cq_free(c->prompt);
    c->prompt = NULL;
    size_t len = 0;
    if (c->raw) {
        c->prompt = cq_strndup(c->transcript ? c->transcript : "", c->transcript_len);
        if (!c->prompt) return CQ_ERR_NOMEM;
        len = c->transcript_len;
    } else {
        CQ_TRY(cq_chat_template_apply(c->tmpl, c->messages, NULL, NULL, true, c->extra, &c->prompt, &len));
    }
    c->enc.n = 0;
    /* templates write their special tokens as text; tokenize them as tokens
     * and add nothing else (apply_chat_template's add_special_tokens=False) */
    CQ_TRY(cq_tokenizer_encode(c->tok, c->prompt, len, 0, &c->enc));
    if (c->enc.n == 0) return cq_fail(CQ_ERR_INVALID_ARG, "chat: the prompt is empty");
    return CQ_OK;
}

/* Feed c->enc into the cache, reusing the longest prefix it already holds. */
static cq_status prefill(cq_chat *c, cq_chat_stats *st) {
    int n = (int)c->enc.n, cap = c->lm.capacity(c->cache);
    if (n >= cap)
        return cq_fail(CQ_ERR_BOUNDS, "chat: the conversation has %d tokens, the context holds %d (raise --ctx)", n, cap);
    int keep = 0;
    while (keep < c->n_ctx && keep < n && c->ctx[keep] == c->enc.ids[keep]) keep++;
    if (keep == n) keep--; /* the last id must be fed again for its logits */
    CQ_TRY(c->lm.truncate(c->cache, keep));
    c->n_ctx = keep;
    double t0 = cq_now();
    CQ_TRY(c->lm.feed(c->cache, c->enc.ids + keep, n - keep, c->logits));
    memcpy(c->ctx + keep, c->enc.ids + keep, (size_t)(n - keep) * sizeof(int32_t));
    c->n_ctx = n;
    st->prefill_s = cq_now() - t0;
    st->prompt_tokens = n;
    st->reused_tokens = keep;
    return CQ_OK;
}

static bool is_stop(const cq_chat *c, int32_t id) {
    for (int i = 0; i < c->n_stop; i++)
        if (c->stop[i] == id) return true;
    return false;
}

/* Sample, stream and feed until a stop token, max_tokens, a full cache or the caller says stop. */
static cq_status generate(cq_chat *c, cq_sampler *smp, int max_tokens, cq_chat_emit_fn emit, void *user,
                          cq_chat_stats *st) {
    cq_tokenizer_stream *stream = NULL;
    CQ_TRY(cq_tokenizer_stream_create(c->tok, 0, &stream));
    int cap = c->lm.capacity(c->cache);
    double t0 = cq_now();
    cq_status s = CQ_OK;
    while (s == CQ_OK && st->generated < max_tokens) {
        int32_t id;
        s = cq_sampler_sample(smp, c->logits, &id);
        if (s != CQ_OK) break;
        if (is_stop(c, id)) {
            st->stop_id = id;
            break;
        }
        c->reply[st->generated++] = id;
        const char *text = NULL;
        size_t len = 0;
        s = cq_tokenizer_stream_push(stream, id, &text, &len);
        if (s != CQ_OK) break;
        if (emit && emit(user, id, text ? text : "", len)) break;
        if (st->generated == max_tokens) break; /* its logits are never needed */
        if (c->n_ctx >= cap) {
            st->context_full = true;
            break;
        }
        s = c->lm.feed(c->cache, &id, 1, c->logits);
        if (s == CQ_OK) c->ctx[c->n_ctx++] = id;
    }
    st->generate_s = cq_now() - t0;
    cq_tokenizer_stream_free(stream);
    return s;
}

cq_status cq_chat_turn(cq_chat *c, const char *user_msg, cq_sampler *smp, int max_tokens, cq_chat_emit_fn emit,
                       void *user, cq_chat_stats *stats) {
    cq_chat_stats local;
    cq_chat_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    st->stop_id = -1;
    if (!c || !user_msg || !smp || max_tokens < 1)
        return cq_fail(CQ_ERR_INVALID_ARG, "chat: a turn needs a session, a message, a sampler and max_tokens >= 1");
    size_t tlen = c->transcript_len;
    CQ_TRY(add_message_n(c, "user", user_msg, strlen(user_msg)));
    cq_status s = render(c);
    if (s == CQ_OK) s = prefill(c, st);
    if (s != CQ_OK) {
        pop_message(c, tlen); /* the conversation stays as it was */
        return s;
    }
    s = generate(c, smp, max_tokens, emit, user, st);
    /* the reply joins the conversation even when cut short, as the user saw it */
    char *text = NULL;
    size_t len = 0;
    cq_status d = cq_tokenizer_decode(c->tok, c->reply, (size_t)st->generated, 0, &text, &len);
    if (d == CQ_OK) d = add_message_n(c, "assistant", text, len);
    cq_free(text);
    return s != CQ_OK ? s : d;
}

const char *cq_chat_last_prompt(const cq_chat *c) { return c && c->prompt ? c->prompt : ""; }

const int32_t *cq_chat_context_ids(const cq_chat *c, int *n) {
    *n = c ? c->n_ctx : 0;
    return c ? c->ctx : NULL;
}

const struct cq_tokenizer *cq_chat_tokenizer(const cq_chat *c) { return c ? c->tok : NULL; }
