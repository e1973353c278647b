/* fuzz_chat_template.c — libFuzzer target: the input is template text,
 * rendered against a fixed chat context (system/user/assistant/tool turns,
 * tool calls, tools, special tokens) under tight limits. Any input must end
 * in CQ_OK or a clean error: no crash, leak, hang or sanitizer report. */
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "tokenizer/chat_template.h"

static const char k_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": \"Hi <b>&'\\\" 你好 😀\\n\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nhmm\\n</think>\\n\\nok\", \"tool_calls\": ["
    "{\"id\": \"call12345\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": "
    "{\"a\": 1, \"b\": [1.5, null, true], \"c\": \"x\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"42\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"image\"}, {\"type\": \"text\", \"text\": \"see\"}]}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}],"
    "\"documents\": null, \"add_generation_prompt\": true, \"enable_thinking\": false,"
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"n\": 3, \"f\": 0.5, \"s\": \"text\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static cJSON *ctx;
    if (!ctx) ctx = cJSON_Parse(k_context);
    if (size > 64 * 1024) return 0;
    cq_chat_template *t = NULL;
    if (cq_chat_template_compile((const char *)data, size, &t) != CQ_OK) return 0;
    cq_chat_template_limits lim = cq_chat_template_default_limits();
    lim.max_output = 1 << 20;
    lim.max_memory = 32 << 20;
    lim.max_steps = 200000;
    lim.max_depth = 32;
    char *out = NULL;
    size_t len = 0;
    if (cq_chat_template_render_compiled(t, ctx, &lim, &out, &len) == CQ_OK) {
        /* the result is a NUL-terminated buffer of the reported length */
        if (out[len] != 0) __builtin_trap();
        cq_free(out);
    }
    cq_chat_template_free(t);
    return 0;
}
