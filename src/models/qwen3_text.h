/*
 * qwen3_text.h — a Qwen3 decoder as a text encoder (component.h): the
 * prompt wrapped in a fixed template, tokenized, run through the tower, and
 * the hidden states of one layer returned, the template's leading rows
 * dropped. Qwen-Image-2.1 reads the last layer before the final norm and
 * drops its system turn; other image models pick their own layer and
 * template, so all of that is data here.
 */
#ifndef CQ_MODELS_QWEN3_TEXT_H
#define CQ_MODELS_QWEN3_TEXT_H

#include <stdint.h>

#include "models/component.h"
#include "models/qwen3.h"
#include "tokenizer/tokenizer.h"

typedef struct cq_text_template {
    const char *head, *tail; /* the text around the prompt */
    const char *empty;       /* what an empty (or NULL) prompt becomes; NULL: it stays empty */
    int drop_rows;           /* leading rows of the states that are not returned */
    int32_t forbid_id;       /* a token a prompt may not hold (-1: none) ... */
    const char *forbid_why;  /* ... and the message that says so */
} cq_text_template;

typedef struct cq_qwen3_text {
    const char *name;       /* prefix of messages, e.g. "qi21 pipeline" */
    cq_tokenizer *tok;      /* borrowed */
    cq_qwen3 *model;        /* borrowed; NULL until the weights are loaded (count works without) */
    int layer;              /* hidden state to return (cq_qwen3_outputs.layer); 0: the last before the norm */
    cq_text_template tmpl;
} cq_qwen3_text;

/* The tokens of `prompt` in the template; refuses the forbidden token and a
 * prompt with no row left after drop_rows. The caller frees ids. */
cq_status cq_qwen3_text_tokenize(const cq_qwen3_text *t, const char *prompt, cq_tokens *ids);

/* The interface over t (which must outlive it). */
cq_text_encoder cq_qwen3_text_encoder(cq_qwen3_text *t);

#endif /* CQ_MODELS_QWEN3_TEXT_H */
