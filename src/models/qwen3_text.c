/*
 * qwen3_text.c — the Qwen3 text encoder component (see qwen3_text.h).
 */
#include "models/qwen3_text.h"

#include <cJSON.h>
#include <string.h>

#include "base/base.h"

/* The prompt as the one user message of the chat template. */
static cq_status render_chat(const cq_text_template *tp, const char *prompt, char **text, size_t *n) {
    cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject(), *extra = cJSON_CreateObject();
    cq_status s = CQ_OK;
    if (!msgs || !m || !extra || !cJSON_AddStringToObject(m, "role", "user") ||
        !cJSON_AddStringToObject(m, "content", prompt) ||
        (tp->enable_thinking >= 0 && !cJSON_AddBoolToObject(extra, "enable_thinking", tp->enable_thinking != 0)))
        s = cq_fail(CQ_ERR_NOMEM, "text encoder: out of memory");
    if (s == CQ_OK) {
        cJSON_AddItemToArray(msgs, m);
        m = NULL;
        s = cq_chat_template_apply(tp->chat, msgs, NULL, NULL, true, extra, text, n);
    }
    cJSON_Delete(m);
    cJSON_Delete(msgs);
    cJSON_Delete(extra);
    return s;
}

cq_status cq_qwen3_text_tokenize(const cq_qwen3_text *t, const char *prompt, cq_tokens *ids, int *full) {
    const cq_text_template *tp = &t->tmpl;
    if (full) *full = 0;
    if ((!prompt || !*prompt) && tp->empty) prompt = tp->empty; /* Qwen has no BOS: an empty prompt leaves nothing */
    if (!prompt) prompt = "";
    char *text = NULL;
    size_t n = 0;
    cq_status s = CQ_OK;
    if (tp->chat) {
        s = render_chat(tp, prompt, &text, &n);
        if (s != CQ_OK) return cq_fail_prefix(s, "%s: the chat template: ", t->name);
    } else {
        const char *head = tp->head ? tp->head : "", *tail = tp->tail ? tp->tail : "";
        const size_t hl = strlen(head), pl = strlen(prompt), tl = strlen(tail);
        n = hl + pl + tl;
        text = cq_malloc(n + 1);
        if (!text) return CQ_ERR_NOMEM;
        memcpy(text, head, hl);
        memcpy(text + hl, prompt, pl);
        memcpy(text + hl + pl, tail, tl + 1);
    }
    s = cq_tokenizer_encode(t->tok, text, n, CQ_TOK_ADD_SPECIAL, ids);
    cq_free(text);
    if (s != CQ_OK) {
        cq_tokens_free(ids); /* a failed encode leaves its buffer to the caller */
        return s;
    }
    if (full) *full = ids->n > (size_t)INT32_MAX ? INT32_MAX : (int)ids->n;
    if (tp->max_tokens > 0 && ids->n > (size_t)tp->max_tokens) ids->n = (size_t)tp->max_tokens;
    for (size_t i = 0; tp->forbid_id >= 0 && i < ids->n; i++)
        if (ids->ids[i] == tp->forbid_id) {
            cq_tokens_free(ids);
            return cq_fail(CQ_ERR_INVALID_ARG, "%s", tp->forbid_why ? tp->forbid_why : "the prompt holds a forbidden token");
        }
    if ((int64_t)ids->n <= tp->drop_rows) {
        cq_tokens_free(ids);
        return cq_fail(CQ_ERR_INTERNAL, "%s: the prompt has no tokens after the system turn", t->name);
    }
    return CQ_OK;
}

static cq_status count(void *self, const char *prompt, int *total, int *rows) {
    const cq_qwen3_text *t = self;
    *total = *rows = 0;
    cq_tokens ids = {0};
    CQ_TRY(cq_qwen3_text_tokenize(t, prompt, &ids, NULL));
    *total = (int)ids.n;
    *rows = (int)ids.n - t->tmpl.drop_rows;
    if (t->tmpl.max_rows > 0 && *rows > t->tmpl.max_rows) *rows = t->tmpl.max_rows;
    cq_tokens_free(&ids);
    return CQ_OK;
}

static cq_status encode(void *self, const char *prompt, float **out, int *n_rows) {
    const cq_qwen3_text *t = self;
    *out = NULL;
    *n_rows = 0;
    if (!t->model) return cq_fail(CQ_ERR_INVALID_ARG, "%s: the weights are not loaded", t->name);
    cq_tokens ids = {0};
    int full = 0;
    CQ_TRY(cq_qwen3_text_tokenize(t, prompt, &ids, &full));
    if (full > (int)ids.n)
        CQ_WARN("%s: the prompt is %d tokens with the template; the text encoder reads the first %d (the rest, the "
                "template's closing tokens included, is cut as the reference pipeline cuts it)",
                t->name, full, (int)ids.n);
    const cq_qwen3_config *tc = cq_qwen3_get_config(t->model);
    const int total = (int)ids.n;
    int rows = total - t->tmpl.drop_rows;
    if (t->tmpl.max_rows > 0 && rows > t->tmpl.max_rows) {
        CQ_WARN("%s: the prompt makes %d text rows; the denoiser reads the first %d, as the reference pipeline cuts "
                "them", t->name, rows, t->tmpl.max_rows);
        rows = t->tmpl.max_rows;
    }
    float *all = cq_mallocn((size_t)total * tc->hidden, sizeof(float));
    if (!all) {
        cq_tokens_free(&ids);
        return CQ_ERR_NOMEM;
    }
    cq_qwen3_outputs o = {.layer = t->layer > 0 ? t->layer : tc->n_layers};
    if (t->normed) o.normed = all;
    else o.hidden = all;
    cq_status s = cq_qwen3_forward(t->model, ids.ids, total, &o);
    cq_tokens_free(&ids);
    if (s != CQ_OK) {
        cq_free(all);
        return s;
    }
    memmove(all, all + (size_t)t->tmpl.drop_rows * tc->hidden, (size_t)rows * tc->hidden * sizeof(float));
    *out = all;
    *n_rows = rows;
    return CQ_OK;
}

cq_text_encoder cq_qwen3_text_encoder(cq_qwen3_text *t) {
    const int width = t->model ? cq_qwen3_get_config(t->model)->hidden : 0;
    return (cq_text_encoder){.self = t, .width = width, .count = count, .encode = encode};
}
