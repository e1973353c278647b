/*
 * chat_template.h — renders Hugging Face chat templates (a Jinja subset) the
 * way transformers' apply_chat_template does, byte for byte.
 *
 * The environment matches transformers: trim_blocks and lstrip_blocks on,
 * loop controls (break/continue), {% generation %} blocks rendered as their
 * body, a tojson filter that is Python json.dumps(ensure_ascii=False, indent,
 * separators, sort_keys), raise_exception(msg) and strftime_now(fmt) globals,
 * the immutable sandbox (list/dict mutators are blocked, range() is capped at
 * 100000 items) and jinja2's default Undefined.
 *
 * Errors: a template construct the engine does not implement fails with
 * CQ_ERR_UNSUPPORTED, malformed template text with CQ_ERR_PARSE, and a
 * template that rejects its input (raise_exception, undefined or mistyped
 * values) with CQ_ERR_INVALID_ARG; every message names the template line.
 * Exceeding a limit fails with CQ_ERR_BOUNDS (CQ_ERR_NOMEM for memory).
 * Nothing aborts on any input.
 *
 * Python semantics templates can observe are reproduced: str()/repr() of
 * values, float formatting, Undefined, generators from map/select/reject,
 * markupsafe Markup from |e and |safe, jinja2's compile-time constant folding
 * and its for/else and scoping rules.
 *
 * Data model notes: context values come from cJSON, which does not keep
 * "1" apart from "1.0"; a number with no fractional part that fits in 2^53
 * is an int (what json.loads gives for "1"), anything else a float.
 * Integers are 64-bit (a result Python would grow past that fails with
 * CQ_ERR_UNSUPPORTED).
 */
#ifndef CQ_CHAT_TEMPLATE_H
#define CQ_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

struct cJSON;

typedef struct cq_chat_template_limits {
    size_t max_output;   /* rendered bytes, captures included (default 16 MiB) */
    size_t max_memory;   /* bytes held by values during a render (default 256 MiB) */
    uint64_t max_steps;  /* loop iterations + calls (default 10,000,000) */
    int max_depth;       /* nested macro calls / block captures (default 64) */
    bool html_safe_json; /* tojson escapes <>&' like plain jinja2 (default false,
                            as transformers overrides the filter) */
} cq_chat_template_limits;

/* The defaults above. */
cq_chat_template_limits cq_chat_template_default_limits(void);

typedef struct cq_chat_template cq_chat_template;

/* Parse a template once; render it many times. `len` bytes of `src` (UTF-8). */
cq_status cq_chat_template_compile(const char *src, size_t len, cq_chat_template **out);
void cq_chat_template_free(cq_chat_template *t);

/* Render with `ctx` (a cJSON object whose members become template variables;
 * NULL = none). On success *out is a NUL-terminated malloc'd string (free with
 * cq_free) and *out_len its length (out_len may be NULL). lim NULL = defaults. */
cq_status cq_chat_template_render_compiled(const cq_chat_template *t, const struct cJSON *ctx,
                                           const cq_chat_template_limits *lim, char **out,
                                           size_t *out_len);

/* Compile + render in one call with default limits. */
cq_status cq_chat_template_render(const char *tmpl, const struct cJSON *ctx, char **out);

/* Build the context apply_chat_template passes and render: `messages` (a
 * cJSON array, required), `tools` and `documents` (arrays or NULL, passed as
 * None when NULL, as transformers does), add_generation_prompt, and `extra`
 * (an object or NULL) whose members are added as well (bos_token, eos_token,
 * enable_thinking, ...). */
cq_status cq_chat_template_apply(const cq_chat_template *t, const struct cJSON *messages,
                                 const struct cJSON *tools, const struct cJSON *documents,
                                 bool add_generation_prompt, const struct cJSON *extra,
                                 char **out, size_t *out_len);

#endif /* CQ_CHAT_TEMPLATE_H */
