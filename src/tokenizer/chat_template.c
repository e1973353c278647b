/*
 * chat_template.c — the API of chat_template.h: compile a template once
 * (lex + parse into its own arena), render it with a cJSON context into a
 * fresh arena that is dropped after the render, and build the context
 * transformers' apply_chat_template passes.
 */
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_impl.h"

struct cq_chat_template {
    cq_jarena arena;
    cq_jnode **body;
    uint32_t nbody;
};

cq_chat_template_limits cq_chat_template_default_limits(void) {
    cq_chat_template_limits l = {
        .max_output = 16u << 20,
        .max_memory = 256u << 20,
        .max_steps = 10000000,
        .max_depth = 64,
        .html_safe_json = false,
    };
    return l;
}

cq_status cq_chat_template_compile(const char *src, size_t len, cq_chat_template **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_chat_template_compile: out is NULL");
    *out = NULL;
    if (!src && len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_chat_template_compile: src is NULL");
    if (len > (64u << 20)) return cq_fail(CQ_ERR_BOUNDS, "chat template of %zu bytes is too large", len);
    cq_chat_template *t = cq_calloc(1, sizeof *t);
    if (!t) return CQ_ERR_NOMEM;
    /* Tokens and tree (with the slack of doubling arrays) stay well under
     * this; it only guards against pathological input. */
    t->arena.limit = (4u << 20) + len * 256;
    cq_jtok *toks = NULL;
    size_t ntoks = 0;
    cq_status s = cq_jinja_lex(&t->arena, src ? src : "", len, &toks, &ntoks);
    if (s == CQ_OK) s = cq_jinja_parse(&t->arena, toks, ntoks, &t->body, &t->nbody);
    if (s != CQ_OK) {
        cq_chat_template_free(t);
        return s;
    }
    *out = t;
    return CQ_OK;
}

void cq_chat_template_free(cq_chat_template *t) {
    if (!t) return;
    cq_jarena_free(&t->arena);
    cq_free(t);
}

cq_status cq_chat_template_render_compiled(const cq_chat_template *t, const cJSON *ctx,
                                           const cq_chat_template_limits *lim, char **out,
                                           size_t *out_len) {
    if (!t || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_chat_template_render: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    if (ctx && !cJSON_IsObject(ctx))
        return cq_fail(CQ_ERR_INVALID_ARG, "chat template context must be a JSON object");
    cq_jrender r = {0};
    r.lim = lim ? *lim : cq_chat_template_default_limits();
    if (r.lim.max_depth <= 0) r.lim.max_depth = 1;
    r.arena.limit = r.lim.max_memory;
    cq_jbuf buf = {0};
    r.out = &buf;
    cq_status s = CQ_OK;
    r.root = cq_jframe_new(&r, NULL);
    if (!r.root) s = CQ_ERR_NOMEM;
    if (s == CQ_OK && ctx) {
        cq_jv c;
        s = cq_jv_from_cjson(&r.arena, ctx, 0, &c);
        if (s == CQ_OK) r.root->vars = c.u.dict;
    }
    if (s == CQ_OK) s = cq_jinja_render_body(&r, t->body, t->nbody, r.root);
    cq_jarena_free(&r.arena);
    if (s != CQ_OK) {
        cq_jbuf_free(&buf);
        return s;
    }
    if (!buf.p) {
        buf.p = cq_strdup("");
        if (!buf.p) return CQ_ERR_NOMEM;
    }
    *out = buf.p;
    if (out_len) *out_len = buf.len;
    return CQ_OK;
}

cq_status cq_chat_template_render(const char *tmpl, const cJSON *ctx, char **out) {
    if (!tmpl) return cq_fail(CQ_ERR_INVALID_ARG, "cq_chat_template_render: template is NULL");
    cq_chat_template *t;
    CQ_TRY(cq_chat_template_compile(tmpl, strlen(tmpl), &t));
    cq_status s = cq_chat_template_render_compiled(t, ctx, NULL, out, NULL);
    cq_chat_template_free(t);
    return s;
}

cq_status cq_chat_template_apply(const cq_chat_template *t, const cJSON *messages,
                                 const cJSON *tools, const cJSON *documents,
                                 bool add_generation_prompt, const cJSON *extra, char **out,
                                 size_t *out_len) {
    if (!cJSON_IsArray(messages))
        return cq_fail(CQ_ERR_INVALID_ARG, "chat template messages must be a JSON array");
    if (extra && !cJSON_IsObject(extra))
        return cq_fail(CQ_ERR_INVALID_ARG, "chat template extra variables must be a JSON object");
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx) return cq_fail(CQ_ERR_NOMEM, "out of memory building the template context");
    bool ok = true;
    /* Special tokens and options first, so the fixed names win a clash. */
    if (extra)
        for (const cJSON *c = extra->child; c && ok; c = c->next)
            ok = cJSON_AddItemReferenceToObject(ctx, c->string, (cJSON *)c);
    ok = ok && cJSON_AddItemReferenceToObject(ctx, "messages", (cJSON *)messages);
    ok = ok && (tools ? cJSON_AddItemReferenceToObject(ctx, "tools", (cJSON *)tools)
                      : cJSON_AddNullToObject(ctx, "tools") != NULL);
    ok = ok && (documents ? cJSON_AddItemReferenceToObject(ctx, "documents", (cJSON *)documents)
                          : cJSON_AddNullToObject(ctx, "documents") != NULL);
    ok = ok && cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt) != NULL;
    cq_status s = ok ? cq_chat_template_render_compiled(t, ctx, NULL, out, out_len)
                     : cq_fail(CQ_ERR_NOMEM, "out of memory building the template context");
    cJSON_Delete(ctx);
    return s;
}
