/* test_chat_template.c — the chat-template engine against Python jinja2:
 * every case in tests/golden/chat_templates/cases.json (made by
 * tools/golden_chat_templates.py with jinja2 configured like transformers'
 * apply_chat_template) must render byte for byte, or fail where jinja2
 * raised. Plus error statuses with template line numbers, the limits,
 * jinja2's HTML-safe tojson option, and clean failure at every allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "testutil.h"
#include "tokenizer/chat_template.h"

#define GOLDEN_DIR CQ_SOURCE_DIR "/tests/golden/chat_templates"
#define FIXTURE_DIR CQ_SOURCE_DIR "/tests/fixtures/chat_templates"

/* Whole file plus a terminating NUL (free with free()). */
static char *read_text(const char *path, size_t *len) {
    size_t n = 0;
    uint8_t *d = tu_read_file(path, &n);
    if (!d) return NULL;
    char *s = malloc(n + 1);
    assert_non_null(s);
    memcpy(s, d, n);
    s[n] = 0;
    free(d);
    if (len) *len = n;
    return s;
}

static cJSON *load_cases(void) {
    char *txt = read_text(GOLDEN_DIR "/cases.json", NULL);
    assert_non_null(txt);
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    assert_non_null(root);
    return root;
}

/* Render a case: `source` inline, or the fixture file `template_file`. */
static char *render_file(const char *template_file, const char *source, const cJSON *ctx,
                         cq_status *st, size_t *len) {
    size_t tn;
    char *src;
    if (source) {
        tn = strlen(source);
        src = malloc(tn + 1);
        assert_non_null(src);
        memcpy(src, source, tn + 1);
    } else {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, template_file);
        src = read_text(path, &tn);
    }
    assert_non_null(src);
    cq_chat_template *t = NULL;
    char *out = NULL;
    *st = cq_chat_template_compile(src, tn, &t);
    if (*st == CQ_OK) *st = cq_chat_template_render_compiled(t, ctx, NULL, &out, len);
    cq_chat_template_free(t);
    free(src);
    return out;
}

/* Every golden case: same bytes, or an error where jinja2 raised (with
 * raise_exception's message when the template raised one). */
static void test_golden_parity(void **state) {
    (void)state;
    cJSON *root = load_cases();
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    int n = 0, rendered = 0, raised = 0, bad = 0;
    for (const cJSON *c = cases->child; c; c = c->next, n++) {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const cJSON *tj = cJSON_GetObjectItem(c, "template"), *sj = cJSON_GetObjectItem(c, "source");
        const char *tmpl = tj ? tj->valuestring : NULL;
        const char *source = sj ? sj->valuestring : NULL;
        const cJSON *ctx = cJSON_GetObjectItem(c, "context");
        const cJSON *err = cJSON_GetObjectItem(c, "error");
        cq_status st;
        size_t len = 0;
        char *out = render_file(tmpl, source, ctx, &st, &len);
        if (!cJSON_IsNull(err)) {
            raised++;
            const char *type = cJSON_GetObjectItem(err, "type")->valuestring;
            const char *msg = cJSON_GetObjectItem(err, "message")->valuestring;
            if (st == CQ_OK) {
                fprintf(stderr, "%s: rendered, jinja2 raised %s: %s\n", name, type, msg);
                bad++;
            } else if (strcmp(type, "TemplateError") == 0 &&
                       (st != CQ_ERR_INVALID_ARG || !strstr(cq_last_error(), msg))) {
                fprintf(stderr, "%s: expected raise_exception(\"%s\"), got %s: %s\n", name, msg,
                        cq_status_str(st), cq_last_error());
                bad++;
            } else if (strcmp(type, "TemplateSyntaxError") == 0
                           ? (st != CQ_ERR_PARSE && st != CQ_ERR_UNSUPPORTED)
                           : (st == CQ_ERR_PARSE || st == CQ_ERR_INTERNAL)) {
                /* syntax errors must be caught as such (or as unsupported
                 * syntax); run-time errors must not look like syntax errors */
                fprintf(stderr, "%s: jinja2 raised %s but the engine said %s: %s\n", name, type,
                        cq_status_str(st), cq_last_error());
                bad++;
            }
        } else {
            rendered++;
            char path[512];
            snprintf(path, sizeof path, "%s/%s.txt", GOLDEN_DIR, name);
            size_t en;
            char *exp = read_text(path, &en);
            assert_non_null(exp);
            if (st != CQ_OK) {
                fprintf(stderr, "%s: %s: %s\n", name, cq_status_str(st), cq_last_error());
                bad++;
            } else if (len != en || memcmp(out, exp, en) != 0) {
                size_t k = 0;
                while (k < len && k < en && out[k] == exp[k]) k++;
                fprintf(stderr, "%s: differs at byte %zu (got %zu bytes, want %zu)\n", name, k, len, en);
                bad++;
            }
            free(exp);
        }
        cq_free(out);
    }
    fprintf(stderr, "chat template golden cases: %d (%d rendered, %d raise), %d mismatches\n", n,
            rendered, raised, bad);
    assert_true(n >= 450);
    assert_true(rendered >= 350);
    assert_int_equal(bad, 0);
    cJSON_Delete(root);
}

/* cq_chat_template_apply builds the same context apply_chat_template does. */
static void test_apply(void **state) {
    (void)state;
    cJSON *root = load_cases();
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    const cJSON *found = NULL;
    for (const cJSON *c = cases->child; c; c = c->next)
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, "qwen3.tool_call.tools") == 0) found = c;
    assert_non_null(found);
    const cJSON *ctx = cJSON_GetObjectItem(found, "context");
    cJSON *extra = cJSON_CreateObject();
    cJSON_AddStringToObject(extra, "eos_token", "<|im_end|>");
    cJSON_AddStringToObject(extra, "pad_token", "<|endoftext|>");
    size_t tn;
    char *src = read_text(FIXTURE_DIR "/qwen3.jinja", &tn);
    cq_chat_template *t;
    assert_int_equal(cq_chat_template_compile(src, tn, &t), CQ_OK);
    char *out;
    size_t len;
    assert_int_equal(cq_chat_template_apply(t, cJSON_GetObjectItem(ctx, "messages"),
                                            cJSON_GetObjectItem(ctx, "tools"), NULL, true, extra,
                                            &out, &len),
                     CQ_OK);
    size_t en;
    char *exp = read_text(GOLDEN_DIR "/qwen3.tool_call.tools.txt", &en);
    assert_int_equal(len, en);
    assert_memory_equal(out, exp, en);
    cq_free(out);
    /* no tools: passed as None, so "if tools" is false but "tools is defined" */
    cq_chat_template *probe;
    const char *p = "{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ add_generation_prompt }}";
    assert_int_equal(cq_chat_template_compile(p, strlen(p), &probe), CQ_OK);
    cJSON *msgs = cJSON_CreateArray();
    assert_int_equal(cq_chat_template_apply(probe, msgs, NULL, NULL, false, NULL, &out, NULL), CQ_OK);
    assert_string_equal(out, "True True True False");
    cq_free(out);
    assert_int_equal(cq_chat_template_apply(probe, extra, NULL, NULL, false, NULL, &out, NULL),
                     CQ_ERR_INVALID_ARG);
    cJSON_Delete(msgs);
    cq_chat_template_free(probe);
    cq_chat_template_free(t);
    free(exp);
    free(src);
    cJSON_Delete(extra);
    cJSON_Delete(root);
}

typedef struct err_case {
    const char *tmpl;
    cq_status status;
    int line;
    const char *msg; /* substring of cq_last_error() */
} err_case;

static void test_errors(void **state) {
    (void)state;
    static const err_case cases[] = {
        {"{% include 'x.jinja' %}", CQ_ERR_UNSUPPORTED, 1, "'include' tag"},
        {"a\n{% if x %}\n{% frobnicate %}\n{% endif %}", CQ_ERR_UNSUPPORTED, 3, "frobnicate"},
        {"a\n\n{{ 1 + }}", CQ_ERR_PARSE, 3, "unexpected"},
        {"{% if x %}\nopen", CQ_ERR_PARSE, 2, "endif"},
        {"{% endfor %}", CQ_ERR_PARSE, 1, "endfor"},
        {"{{ 'abc }}", CQ_ERR_PARSE, 1, "unterminated"},
        {"{{ (1 }}", CQ_ERR_PARSE, 1, "expected"},
        {"{# never closed", CQ_ERR_PARSE, 1, "comment"},
        {"{% break %}", CQ_ERR_PARSE, 1, "outside of a loop"},
        {"x\n{{ messages|frobnicate }}", CQ_ERR_UNSUPPORTED, 2, "frobnicate"},
        {"x\ny\n{{ raise_exception('Roles must alternate') }}", CQ_ERR_INVALID_ARG, 3,
         "Roles must alternate"},
        {"{{ nothing.attr }}", CQ_ERR_INVALID_ARG, 1, "'nothing' is undefined"},
        {"{{ 'a' + 1 }}", CQ_ERR_INVALID_ARG, 1, "can only concatenate str"},
        {"{{ [1].append(2) }}", CQ_ERR_INVALID_ARG, 1, "unsafe"},
        {"{{ range(200000)|length }}", CQ_ERR_INVALID_ARG, 1, "Range too big"},
        {"{{ 1 // 0 }}", CQ_ERR_INVALID_ARG, 1, "division"},
        {"{{ 9223372036854775807 + 1 }}", CQ_ERR_UNSUPPORTED, 1, "64 bits"},
        {"{{ x.y }}\n", CQ_ERR_INVALID_ARG, 1, "undefined"},
    };
    for (size_t i = 0; i < CQ_ARRAY_LEN(cases); i++) {
        char *out = NULL;
        cq_status s = cq_chat_template_render(cases[i].tmpl, NULL, &out);
        if (s != cases[i].status || !strstr(cq_last_error(), cases[i].msg)) {
            fprintf(stderr, "case %zu %s: got %s: %s\n", i, cases[i].tmpl, cq_status_str(s), cq_last_error());
        }
        assert_int_equal(s, cases[i].status);
        assert_null(out);
        char where[32];
        snprintf(where, sizeof where, "line %d:", cases[i].line);
        assert_non_null(strstr(cq_last_error(), where));
        assert_non_null(strstr(cq_last_error(), cases[i].msg));
    }
    /* bad API use */
    char *out = NULL;
    cq_chat_template *t = NULL;
    assert_int_equal(cq_chat_template_compile(NULL, 3, &t), CQ_ERR_INVALID_ARG);
    cJSON *arr = cJSON_CreateArray();
    assert_int_equal(cq_chat_template_compile("x", 1, &t), CQ_OK);
    assert_int_equal(cq_chat_template_render_compiled(t, arr, NULL, &out, NULL), CQ_ERR_INVALID_ARG);
    cq_chat_template_free(t);
    cq_chat_template_free(NULL);
    cJSON_Delete(arr);
}

static cq_status render_lim(const char *tmpl, const cq_chat_template_limits *lim, char **out) {
    cq_chat_template *t;
    CQ_TRY(cq_chat_template_compile(tmpl, strlen(tmpl), &t));
    cq_status s = cq_chat_template_render_compiled(t, NULL, lim, out, NULL);
    cq_chat_template_free(t);
    return s;
}

static void test_limits(void **state) {
    (void)state;
    cq_chat_template_limits lim = cq_chat_template_default_limits();
    char *out = NULL;
    lim.max_output = 100;
    assert_int_equal(render_lim("{% for i in range(1000) %}xy{% endfor %}", &lim, &out), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "output"));
    assert_int_equal(render_lim("{% for i in range(50) %}xy{% endfor %}", &lim, &out), CQ_OK);
    assert_int_equal(strlen(out), 100);
    cq_free(out);
    lim = cq_chat_template_default_limits();
    lim.max_steps = 5000;
    assert_int_equal(render_lim("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                                &lim, &out),
                     CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "steps"));
    /* recursion: a macro calling itself forever stops at max_depth */
    lim = cq_chat_template_default_limits();
    assert_int_equal(render_lim("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", &lim, &out),
                     CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "nested deeper"));
    /* memory */
    lim.max_memory = 1 << 20;
    assert_int_equal(render_lim("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
                                "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                                &lim, &out),
                     CQ_ERR_NOMEM);
    /* deeply nested expressions and statements are parse errors, not stack overflows */
    char deep[4096];
    size_t o = 0;
    o += (size_t)snprintf(deep + o, sizeof deep - o, "{{ ");
    for (int i = 0; i < 1000; i++) deep[o++] = '(';
    deep[o] = 0;
    assert_int_equal(cq_chat_template_render(deep, NULL, &out), CQ_ERR_PARSE);
    assert_non_null(strstr(cq_last_error(), "nested too deeply"));
    o = 0;
    for (int i = 0; i < 300; i++) o += (size_t)snprintf(deep + o, sizeof deep - o, "{%% if 1 %%}");
    assert_int_equal(cq_chat_template_render(deep, NULL, &out), CQ_ERR_PARSE);
    assert_null(out);
}

static void test_tojson_modes(void **state) {
    (void)state;
    const char *tmpl = "{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(ensure_ascii=true, sort_keys=true) }}";
    cJSON *ctx = cJSON_Parse("{\"x\": {\"b\": \"<a href='x'>&amp; é 😀</a>\", \"a\": [1, 2.5, null, true]}}");
    assert_non_null(ctx);
    char *out;
    assert_int_equal(cq_chat_template_render(tmpl, ctx, &out), CQ_OK);
    assert_string_equal(out,
                        "{\"b\": \"<a href='x'>&amp; é 😀</a>\", \"a\": [1, 2.5, null, true]}|"
                        "{\n  \"b\": \"<a href='x'>&amp; é 😀</a>\",\n  \"a\": [\n    1,\n    2.5,\n"
                        "    null,\n    true\n  ]\n}|"
                        "{\"a\": [1, 2.5, null, true], \"b\": \"<a href='x'>&amp; \\u00e9 \\ud83d\\ude00</a>\"}");
    cq_free(out);
    cq_chat_template_limits lim = cq_chat_template_default_limits();
    lim.html_safe_json = true;
    cq_chat_template *t;
    const char *t2 = "{{ x.b|tojson }}";
    assert_int_equal(cq_chat_template_compile(t2, strlen(t2), &t), CQ_OK);
    assert_int_equal(cq_chat_template_render_compiled(t, ctx, &lim, &out, NULL), CQ_OK);
    assert_string_equal(out, "\"\\u003ca href=\\u0027x\\u0027\\u003e\\u0026amp; é 😀\\u003c/a\\u003e\"");
    cq_free(out);
    cq_chat_template_free(t);
    cJSON_Delete(ctx);
}

/* Fail the 1st, 2nd, ... allocation of a compile + render: every run must
 * either fail cleanly with CQ_ERR_NOMEM or give exactly the right text
 * (ASan checks that nothing leaks). */
static void test_alloc_failures(void **state) {
    (void)state;
    cJSON *root = load_cases();
    const cJSON *cases = cJSON_GetObjectItem(root, "cases");
    const cJSON *found = NULL;
    for (const cJSON *c = cases->child; c; c = c->next)
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, "qwen3.tool_call.tools") == 0) found = c;
    assert_non_null(found);
    const cJSON *ctx = cJSON_GetObjectItem(found, "context");
    size_t tn, en;
    char *src = read_text(FIXTURE_DIR "/qwen3.jinja", &tn);
    char *exp = read_text(GOLDEN_DIR "/qwen3.tool_call.tools.txt", &en);
    int failures = 0;
    for (long n = 1;; n++) {
        cq_alloc_fail_at(n);
        cq_chat_template *t = NULL;
        char *out = NULL;
        size_t len = 0;
        cq_status s = cq_chat_template_compile(src, tn, &t);
        if (s == CQ_OK) s = cq_chat_template_render_compiled(t, ctx, NULL, &out, &len);
        long counted = cq_alloc_fail_at(0);
        cq_chat_template_free(t);
        if (s == CQ_OK) {
            assert_int_equal(len, en);
            assert_memory_equal(out, exp, en);
            cq_free(out);
            if (counted < n) break; /* the injected failure was never reached */
            continue;
        }
        assert_int_equal(s, CQ_ERR_NOMEM);
        assert_null(out);
        failures++;
        assert_true(n < 100000);
    }
    fprintf(stderr, "allocation failure injected at %d points, all failed cleanly\n", failures);
    assert_true(failures > 10);
    free(src);
    free(exp);
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_parity),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_tojson_modes),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
