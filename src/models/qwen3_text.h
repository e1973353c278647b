/*
 * qwen3_text.h — a Qwen3 decoder as a text encoder (component.h): the
 * prompt wrapped in a fixed template, tokenized, run through the tower, and
 * the hidden states of one layer returned, the template's leading rows
 * dropped. Qwen-Image-2.1 reads the final norm's output and drops its
 * system turn; Z-Image renders the prompt with the pack's chat
 * template, reads the layer before the last, drops nothing and cuts the
 * templated tokens at 512; Qwen-Image reads the final norm's output of its
 * Qwen2.5-VL tower, drops 34 rows and keeps at most 512 of the rest; all of
 * that is data here.
 */
#ifndef CQ_MODELS_QWEN3_TEXT_H
#define CQ_MODELS_QWEN3_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "models/component.h"
#include "models/qwen3.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

typedef struct cq_text_template {
    const char *head, *tail; /* the text around the prompt */
    /* a chat template instead of head/tail: the prompt as the one user message, rendered as
     * apply_chat_template(..., add_generation_prompt=True[, enable_thinking]) renders it */
    const cq_chat_template *chat;
    int enable_thinking;     /* with chat: -1 not passed, 0 False, 1 True */
    const char *empty;       /* what an empty (or NULL) prompt becomes; NULL: it stays empty */
    int drop_rows;           /* leading rows of the states that are not returned */
    int max_tokens;          /* > 0: the templated tokens are cut to this many (the reference's
                              * truncation=True, which loses the template's closing tokens), with a warning */
    int max_rows;            /* > 0: the rows left after drop_rows are cut to this many (Qwen-Image's
                              * max_sequence_length), with a warning */
    int32_t forbid_id;       /* a token a prompt may not hold (-1: none) ... */
    const char *forbid_why;  /* ... and the message that says so */
} cq_text_template;

typedef struct cq_qwen3_text {
    const char *name;       /* prefix of messages, e.g. "qi21 pipeline" */
    cq_tokenizer *tok;      /* borrowed */
    cq_qwen3 *model;        /* borrowed; NULL until the weights are loaded (count works without) */
    int layer;              /* hidden state to return (cq_qwen3_outputs.layer); 0: the last before the norm */
    bool normed;            /* the final norm's output instead (hidden_states[-1]: Qwen-Image); layer unused */
    cq_text_template tmpl;
} cq_qwen3_text;

/* The tokens of `prompt` in the template, cut to max_tokens; refuses the
 * forbidden token and a prompt with no row left after drop_rows. *full
 * (when not NULL) receives the count before the cut. The caller frees ids. */
cq_status cq_qwen3_text_tokenize(const cq_qwen3_text *t, const char *prompt, cq_tokens *ids, int *full);

/* The interface over t (which must outlive it). */
cq_text_encoder cq_qwen3_text_encoder(cq_qwen3_text *t);

#endif /* CQ_MODELS_QWEN3_TEXT_H */
