/*
 * tok_config.h — parsers of the tokenizer.json pipeline components
 * (tok_config.c). Each accepts NULL/JSON null as "none" (*out = NULL).
 */
#ifndef CQ_TOK_CONFIG_H
#define CQ_TOK_CONFIG_H

#include <cjson/cJSON.h>

#include "tokenizer/tokenizer-impl.h"

cq_status tok_norm_parse(const cJSON *obj, tok_norm **out);
cq_status tok_pretok_parse(const cJSON *obj, tok_pretok **out);
cq_status tok_decoder_parse(const cJSON *obj, tok_decoder **out);
/* Special-token names in TemplateProcessing resolve through `special_tokens`
 * of the same object; Bert/Roberta carry their ids. */
cq_status tok_post_parse(const cJSON *obj, tok_post **out);

#endif
