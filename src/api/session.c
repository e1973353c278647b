/*
 * session.c — cq_session: a conversation with a language model, over the
 * chat pipeline (pipelines/chat.h) and the token sampler
 * (pipelines/sampler.h).
 */
#include <string.h>

#include "api/api_impl.h"
#include "base/base.h"
#include "pipelines/chat.h"
#include "pipelines/sampler.h"

struct cq_session {
    cq_model *m;
    cq_chat *chat;
    cq_sampler *smp;
    int max_tokens;
};

void cq_session_opts_init(cq_session_opts *o) {
    if (!o) return;
    *o = (cq_session_opts){.enable_thinking = -1, .max_tokens = 512, .temperature = 0.7f, .top_k = 20,
                           .top_p = 0.8f};
}

void cq_session_free(cq_session *s) {
    if (!s) return;
    cq_sampler_free(s->smp);
    cq_chat_free(s->chat);
    if (s->m) s->m->session_open = false;
    cq_free(s);
}

cq_status cq_session_open(cq_model *m, const cq_session_opts *o, cq_session **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_session_open: out is NULL");
    *out = NULL;
    if (!m || !o) return cq_fail(CQ_ERR_INVALID_ARG, "cq_session_open: no model or options");
    if (m->kind != CQ_MODEL_TEXT)
        return cq_fail(CQ_ERR_INVALID_ARG, "chat: '%s' is a text-to-image pipeline (arch %s), not a language model",
                       m->name, m->arch);
    if (o->max_tokens < 1) return cq_fail(CQ_ERR_INVALID_ARG, "chat: max_tokens must be at least 1 (got %d)", o->max_tokens);
    if (m->session_open) return cq_fail(CQ_ERR_INVALID_ARG, "chat: the model already has an open session; free it first");
    CQ_TRY(cq_model_load(m));
    cq_session *s = cq_calloc(1, sizeof *s);
    if (!s) return CQ_ERR_NOMEM;
    s->max_tokens = o->max_tokens;
    const cq_chat_opts co = {.context = o->context, .enable_thinking = o->enable_thinking, .raw = o->raw,
                             .chat_template = o->chat_template};
    const cq_sampler_params sp = {.greedy = o->greedy, .temperature = o->temperature, .top_k = o->top_k,
                                  .top_p = o->top_p, .min_p = o->min_p, .seed = o->seed};
    cq_status st = cq_chat_create(m->cmf, &m->lm, &co, &s->chat);
    if (st == CQ_OK) st = cq_sampler_create(m->lm.vocab, &sp, &s->smp);
    if (st == CQ_OK && o->system) st = cq_chat_add_message(s->chat, "system", o->system);
    if (st != CQ_OK) {
        cq_session_free(s);
        return st;
    }
    s->m = m;
    m->session_open = true;
    *out = s;
    return CQ_OK;
}

cq_status cq_session_add_message(cq_session *s, const char *role, const char *content) {
    if (!s) return cq_fail(CQ_ERR_INVALID_ARG, "cq_session_add_message: no session");
    return cq_chat_add_message(s->chat, role, content);
}

typedef struct emit_ctx {
    cq_token_fn fn;
    void *user;
} emit_ctx;

static int emit(void *user, int32_t id, const char *text, size_t len) {
    emit_ctx *e = user;
    return e->fn ? e->fn(id, text, len, e->user) : 0;
}

cq_status cq_session_turn(cq_session *s, const char *message, cq_token_fn on_token, void *user,
                          cq_turn_stats *stats) {
    if (!s || !message) return cq_fail(CQ_ERR_INVALID_ARG, "cq_session_turn: no session or message");
    emit_ctx e = {on_token, user};
    return cq_chat_turn(s->chat, message, s->smp, s->max_tokens, emit, &e, stats);
}
