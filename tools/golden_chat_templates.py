#!/usr/bin/python3
"""Golden renders of the fixture chat templates, made with Python jinja2.

jinja2 is set up the way transformers' apply_chat_template sets it up:
an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loop-controls extension and a {% generation %} block that renders its body,
a `tojson` filter that is json.dumps(ensure_ascii=False, indent, separators,
sort_keys), and the globals raise_exception(msg) and strftime_now(fmt). The
context is what apply_chat_template passes: messages, tools (None when not
given), documents (None), add_generation_prompt, the tokenizer's special
tokens and any extra keyword arguments (enable_thinking, ...).

Also renders the one-feature templates of semantics.txt (Python semantics
jinja2 templates observe: numbers, slicing, Undefined, generators, Markup,
whitespace control, constant folding...).

Writes tests/golden/chat_templates/cases.json (name, template or source, context and
the expected error if the template raises) and one <name>.txt per rendered
case holding the exact expected bytes. tests/unit/test_chat_template.c
renders the same cases with the C engine and compares them byte for byte.

Usage: /usr/bin/python3 tools/golden_chat_templates.py   (needs python3-jinja2)
"""
import copy
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
OUT = os.path.join(ROOT, "tests", "golden", "chat_templates")


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders the body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------
TOOLS = [
    {"type": "function", "function": {
        "name": "get_current_temperature",
        "description": "Get the current temperature at a location.",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string",
                         "description": "The location, in the format \"City, Country\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                     "description": "The unit to return the temperature in."}},
            "required": ["location", "unit"]},
        "return": {"type": "number", "description": "The temperature as a float."}}},
    {"type": "function", "function": {
        "name": "get_current_wind_speed",
        "description": "Get the current wind speed in km/h at a location (<100 km/h & rising).",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The location"}},
            "required": ["location"]}}},
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CALL_A = {"id": "call0a1b2", "type": "function",
          "function": {"name": "get_current_temperature",
                       "arguments": {"location": "Paris, France", "unit": "celsius"}}}
CALL_B = {"id": "call9z8y7", "type": "function",
          "function": {"name": "get_current_wind_speed", "arguments": {"location": "Paris, France"}}}

MESSAGES = {
    "user1": [{"role": "user", "content": "Hello, how are you?"}],
    "sys_user": [SYSTEM, {"role": "user", "content": "What is 2+2?"}],
    "multi": [
        SYSTEM,
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "I'd like to show off how chat templating works!"},
    ],
    "alternating": [
        {"role": "user", "content": "  Hi there.  "},
        {"role": "assistant", "content": "Hello! "},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "continue": [
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": "Autumn moonlight"},
    ],
    "think": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\nThe answer is 4."},
        {"role": "user", "content": "And 3+3?"},
    ],
    "think_last": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\nThe answer is 4."},
    ],
    "reasoning_field": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "The user greets me."},
    ],
    "tool_call": [
        SYSTEM,
        {"role": "user", "content": "What's the temperature in Paris right now?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_A]},
        {"role": "tool", "tool_call_id": "call0a1b2", "name": "get_current_temperature",
         "content": "22.5"},
        {"role": "assistant", "content": "It is 22.5 °C in Paris."},
    ],
    "tool_call_str_args": [
        {"role": "user", "content": "Temperature in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call0a1b2", "type": "function",
             "function": {"name": "get_current_temperature",
                          "arguments": "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call0a1b2", "content": "22.5"},
    ],
    "multi_tool": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL_A, CALL_B]},
        {"role": "tool", "tool_call_id": "call0a1b2", "name": "get_current_temperature",
         "content": "22.5"},
        {"role": "tool", "tool_call_id": "call9z8y7", "name": "get_current_wind_speed",
         "content": "{\"speed\": 12, \"unit\": \"km/h\"}"},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. \t "},
        {"role": "user", "content": "Ünïcödé 你好 😀 <b>&amp; \"quotes\" 'single' \\back\\slash\ttab\nnew line\u2028sep"},
    ],
    "content_list": [
        {"role": "user", "content": [{"type": "image"},
                                     {"type": "text", "text": "Describe this image."}]},
    ],
    "empty": [],
}

CORE = ["user1", "sys_user", "multi", "tool_call"]
TOOL_SETS = ["user1", "sys_user", "tool_call", "multi_tool"]

# template -> special tokens (what the tokenizer's special_tokens_map holds)
TEMPLATES = {
    "qwen3": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen2_5": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen2_5_vl": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3_vl": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3_2_vision": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                        "date_string": "26 Jul 2024"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<end_of_turn>", "pad_token": "<pad>"},
    "mistral_7b_v0_1": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mixtral_8x7b": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_nemo": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "chatml": {},
    "deepseek_r1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek_v3": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
}
TOOL_TEMPLATES = ["qwen3", "qwen2_5", "qwen3_vl", "llama3_1", "llama3_2_vision", "mistral_nemo"]

# Small templates exercising one language feature each (semantics.txt,
# separated by lines holding "===="), rendered with this context.
SEMANTICS_CONTEXT = {
    "messages": [
        {"role": "system", "content": "Sys  "},
        {"role": "user", "content": "Hi <b>&'\"\\ 你好 😀\n"},
        {"role": "assistant", "content": "<think>\nr\n</think>\n\nans", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": {
                "a": 1, "b": [1.5, None, True], "c": "x"}}}]}],
    "d": {"a": 1, "items": "I", "z": {"k": [1, 2]}}, "n": None, "i": 7, "f": 2.5,
    "s": "Hello World", "l": [3, 1, 2], "e": [], "t": True, "neg": -3, "big": 1e20,
    "ws": "  a b \t c  ",
}

SYS_PROMPT = "Comprehend and analyze the provided prompt."
QWEN_IMAGE_PROMPTS = ["A red fox asleep beside a mossy stone in soft morning light.",
                      "", "  leading spaces and 中文 and emoji 🦊 ", "Show <|im_end|> literally."]


def qwen_image_expected(prompt, num_images=0):
    """The prompt text diffusers' QwenImage21Pipeline builds (stated here
    independently): a fixed system turn, the user turn, the assistant opener;
    an empty prompt becomes " "; condition images add vision groups."""
    vision = " ".join(f"<image{i + 1}><|vision_start|><|image_pad|><|vision_end|>"
                      for i in range(num_images))
    return ("<|im_start|>system\n" + SYS_PROMPT + "<|im_end|>\n"
            "<|im_start|>user\n" + vision + (prompt or " ") + "<|im_end|>\n"
            "<|im_start|>assistant\n")


def hf_context(messages, special, add_generation_prompt, tools=None, **extra):
    ctx = dict(special)
    ctx.update(extra)
    ctx["messages"] = messages
    ctx["tools"] = tools
    ctx["documents"] = None
    ctx["add_generation_prompt"] = add_generation_prompt
    return ctx


def build_cases():
    cases = []

    def add(name, template, ctx):
        cases.append({"name": name, "template": template + ".jinja", "context": ctx})

    for tname, special in TEMPLATES.items():
        for mname, msgs in MESSAGES.items():
            for agp in ([False, True] if mname in CORE else [True]):
                add(f"{tname}.{mname}.agp{int(agp)}", tname, hf_context(msgs, special, agp))
        if tname in TOOL_TEMPLATES:
            for mname in TOOL_SETS:
                add(f"{tname}.{mname}.tools", tname,
                    hf_context(MESSAGES[mname], special, True, tools=TOOLS))
        if tname == "qwen3":
            for mname in ["user1", "think", "tool_call"]:
                for et in [True, False]:
                    add(f"qwen3.{mname}.think{int(et)}", tname,
                        hf_context(MESSAGES[mname], special, True, enable_thinking=et))
        if tname == "llama3_1":
            add("llama3_1.tool_call.tools_system", tname,
                hf_context(MESSAGES["tool_call"], special, True, tools=TOOLS,
                           tools_in_user_message=False))
            add("llama3_1.builtin_tools", tname,
                hf_context(MESSAGES["sys_user"], special, True,
                           builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"]))
        if tname == "qwen3_vl":
            add("qwen3_vl.system_list.agp0", tname, hf_context(
                [{"role": "system", "content": [{"type": "text", "text": SYS_PROMPT}]}],
                special, False))
            add("qwen3_vl.images.vision_id", tname, hf_context(
                [{"role": "user", "content": [{"type": "image"}, {"type": "image"},
                                              {"type": "video"},
                                              {"type": "text", "text": "Compare them."}]}],
                special, True, add_vision_id=True))
    with open(os.path.join(FIXTURES, "semantics.txt"), encoding="utf-8", newline="") as f:
        snippets = [c for c in f.read().split("\n====\n") if c.strip()]
    for i, src in enumerate(snippets):
        cases.append({"name": f"semantics.{i:03d}", "source": src, "context": SEMANTICS_CONTEXT})
    for i, p in enumerate(QWEN_IMAGE_PROMPTS):
        add(f"qwen_image_2_1_t2i.p{i}", "qwen_image_2_1_t2i", {"prompt": p})
    for n in [1, 2, 3]:
        add(f"qwen_image_2_1_ti2i.n{n}", "qwen_image_2_1_ti2i",
            {"prompt": QWEN_IMAGE_PROMPTS[0], "num_images": n})
    return cases


def main():
    env = make_env()
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".txt"):
            os.remove(os.path.join(OUT, f))
    index = []
    n_ok = n_err = 0
    sys_prefix = None
    for case in build_cases():
        if "source" in case:
            src = case["source"]
        else:
            with open(os.path.join(FIXTURES, case["template"]), encoding="utf-8", newline="") as f:
                src = f.read()
        entry = dict(case)
        try:
            # a deep copy: a template can change lists in place (|indent on a list)
            text = env.from_string(src).render(**copy.deepcopy(case["context"]))
        except jinja2.exceptions.TemplateError as e:
            entry["error"] = {"type": type(e).__name__, "message": str(e)}
            n_err += 1
        except Exception as e:  # TypeError etc.: the C engine must fail as well
            entry["error"] = {"type": type(e).__name__, "message": str(e)}
            n_err += 1
        else:
            entry["error"] = None
            n_ok += 1
            with open(os.path.join(OUT, case["name"] + ".txt"), "w", encoding="utf-8",
                      newline="") as f:
                f.write(text)
            ctx = case["context"]
            if case.get("template") == "qwen_image_2_1_t2i.jinja":
                assert text == qwen_image_expected(ctx["prompt"]), case["name"]
            if case.get("template") == "qwen_image_2_1_ti2i.jinja":
                assert text == qwen_image_expected(ctx["prompt"], ctx["num_images"]), case["name"]
            if case["name"] == "qwen3_vl.system_list.agp0":
                sys_prefix = text
        index.append(entry)
    # The rows the pipeline drops are the tokens of the system turn rendered
    # by the Qwen3-VL template: check it is exactly the prompt's prefix.
    assert sys_prefix == "<|im_start|>system\n" + SYS_PROMPT + "<|im_end|>\n", sys_prefix
    assert qwen_image_expected("x").startswith(sys_prefix)
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/golden_chat_templates.py",
                   "jinja2": jinja2.__version__, "cases": index},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(index)} cases: {n_ok} rendered, {n_err} raise (jinja2 {jinja2.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
