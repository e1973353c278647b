/*
 * chat.h — a chat session over a causal LM (component.h) in a .cmf: the
 * conversation, its rendering through the file's chat template (ChatML when
 * the file has none), tokenization, generation with a K/V cache kept
 * between turns, and streaming of the decoded text.
 *
 * Turns reuse the cache exactly: every turn re-renders the WHOLE
 * conversation with the template and tokenizes it, keeps the longest prefix
 * of those ids that the cache already holds (the ids it was fed), rewinds
 * the cache to that prefix and feeds only the rest. The result is therefore
 * always the model run on the tokenization of the full rendered
 * conversation, as a from-scratch run would be, even when the template
 * renders earlier turns differently later (e.g. Qwen3 dropping the thinking
 * of past replies) or when a reply's text re-tokenizes to other ids than
 * those generated; then only the part after the first difference is
 * recomputed.
 */
#ifndef CQ_PIPELINES_CHAT_H
#define CQ_PIPELINES_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "pipelines/sampler.h"

typedef struct cq_chat_opts {
    int context;          /* positions in the K/V cache; 0 = min(max_position_embeddings, 4096) */
    int batch;            /* prefill chunk rows; 0 = 512 */
    int enable_thinking;  /* passed to the template as enable_thinking: 0 false, 1 true, -1 not set */
    bool raw;             /* no template: the model continues the plain text of the turns */
    const char *chat_template; /* overrides the file's template (NULL: the file's, else ChatML) */
} cq_chat_opts;

typedef struct cq_chat cq_chat;

/* The tokenizer comes from the file's tokenizer section; stop ids from the
 * header's tokenizer_config.eos_token_ids (else <|im_end|> / <|endoftext|>
 * when the tokenizer has them). The session copies *model; its self must
 * outlive the session (e.g. cq_qwen3_causal_lm of a loaded cq_qwen3). */
cq_status cq_chat_create(const cq_cmf *cmf, const cq_causal_lm *model, const cq_chat_opts *opts, cq_chat **out);
void cq_chat_free(cq_chat *c);

/* Append a message without generating (a system prompt, or history). */
cq_status cq_chat_add_message(cq_chat *c, const char *role, const char *content);

/* Receives each generated token and the text it completes (possibly empty:
 * partial UTF-8 is held back). Return non-zero to end the turn there. */
typedef int (*cq_chat_emit_fn)(void *user, int32_t id, const char *text, size_t len);

/* A turn's numbers: the public API's (cortiq.h), which cq_session_turn hands on as they are. */
typedef cq_turn_stats cq_chat_stats;

/* Add the user's message, generate the reply (at most max_tokens tokens),
 * stream it through `emit` (may be NULL), and add it to the conversation as
 * the assistant's message. */
cq_status cq_chat_turn(cq_chat *c, const char *user_msg, cq_sampler *s, int max_tokens, cq_chat_emit_fn emit,
                       void *user, cq_chat_stats *stats);

/* The text the last turn rendered (NUL-terminated), and the ids the cache
 * holds now (the rendered prompt + the fed reply tokens). */
const char *cq_chat_last_prompt(const cq_chat *c);
const int32_t *cq_chat_context_ids(const cq_chat *c, int *n);
/* The tokenizer (e.g. to decode ids for display). */
const struct cq_tokenizer *cq_chat_tokenizer(const cq_chat *c);

#endif /* CQ_PIPELINES_CHAT_H */
