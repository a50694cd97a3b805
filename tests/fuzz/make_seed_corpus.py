"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/TARGET/seed_*): valid and
nearly valid inputs that give libFuzzer a head start. Run it again after changing an input format:
    python3 tests/fuzz/make_seed_corpus.py
The fuzzers' own findings (new coverage) are not committed; crashes go to regressions/TARGET."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(REPO, "..", "shared", "fixtures")


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                         "required": ["city"]}}}]
XML_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
JSON_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": [1, {"a": null}]}}\n</tool_call>'
OUTPUTS = ["Hello there", "plan</think>answer", "<think>a</think>b " + XML_CALL, JSON_CALL + "tail", "\xe2\x9c\x93 ok",
           "x" * 40, "</think>" + XML_CALL + XML_CALL]


def http_seeds():
    # [route byte][flags byte][model output] NUL [body]; routes as in http_request_fuzz.cc.
    user = [{"role": "user", "content": "hi"}]
    bodies = [
        (0, {"messages": user, "max_tokens": 8}),
        (0, {"messages": user, "stream": True, "stream_options": {"include_usage": True}, "n": 2, "logprobs": True,
             "top_logprobs": 2, "stop": ["ans", "</"]}),
        (0, {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "q"}]},
                          {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                          {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
             "tools": TOOLS, "tool_choice": "auto", "stream": True}),
        (0, {"messages": user, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
        (0, {"messages": user, "chat_template_kwargs": {"enable_thinking": True}, "temperature": 0.5, "top_p": 0.9,
             "seed": 3, "logit_bias": {"5": 1.0}, "max_completion_tokens": 4}),
        (1, {"prompt": "once upon", "max_tokens": 5, "echo": True}),
        (1, {"prompt": [1, 2, 3], "stream": True, "logprobs": 2, "n": 3, "stop": "x"}),
        (2, {"max_tokens": 16, "messages": user, "system": "be brief", "stop_sequences": ["zz"]}),
        (2, {"max_tokens": 16, "messages": [{"role": "user", "content": [{"type": "text", "text": "weather?"}]},
                                           {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"},
                                            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "x"}}]},
                                           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                                         "content": [{"type": "text", "text": "ok"}]}]}],
             "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
             "tool_choice": {"type": "any"}, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 100}}),
        (3, {"messages": user, "tools": [{"name": "f", "input_schema": {"type": "object"}}]}),
        (4, {"messages": user, "add_generation_prompt": True, "return_token_strs": True}),
        (4, {"prompt": "tokenize me"}),
        (5, {"tokens": [1, 2, 3, 151643]}),
        (6, {}),
        (7, {}),
        # Batch completions and structured outputs (issues 26, 27).
        (1, {"prompt": ["first", "second"], "max_tokens": 4, "n": 2, "stream": True}),
        (0, {"messages": user, "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema":
             {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "n": {"type": "integer",
              "minimum": 0, "maximum": 99}}, "required": ["city"]}}}}),
        (0, {"messages": user, "response_format": {"type": "json_object"}, "stream": True}),
        (1, {"prompt": "p", "guided_regex": "(ab|c)+[0-9]{2,3}", "max_tokens": 6}),
        (1, {"prompt": "p", "guided_grammar": "root ::= \"yes\" | \"no\" ws\nws ::= [ ]?\n"}),
        (0, {"messages": user, "guided_choice": ["red", "green"], "stream": True}),
        (0, {"messages": user, "tools": [dict(TOOLS[0], function=dict(TOOLS[0]["function"], strict=True))],
             "tool_choice": "required"}),
    ]
    for i, (route, body) in enumerate(bodies):
        for j, out in enumerate(OUTPUTS[:3] if i % 2 else OUTPUTS[3:]):
            flags = (i + j) % 8
            write("http_request_fuzz", f"{i:02d}_{j}", bytes([route, flags]) + out.encode() + b"\0" + json.dumps(body).encode())


def jinja_seeds():
    tmpl = open(os.path.join(FIXTURES, "qwen3_5-chat_template.jinja"), "rb").read()
    ctx = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "ok", "reasoning_content": "r",
                         "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": [1, 2]}}}]},
                        {"role": "tool", "content": "res"}],
           "tools": TOOLS, "add_generation_prompt": True, "enable_thinking": False}
    write("jinja_template_fuzz", "qwen3_5", tmpl + b"\0" + json.dumps(ctx).encode())
    small = [
        ("{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}{% if not loop.last %}\n{% endif %}{% endfor %}", ctx),
        ("{% macro f(x, y=2) %}{{ x ~ y }}{% endmacro %}{{ f(1) }}{{ f('a', y='b') }}{% set ns = namespace(n=0) %}"
         "{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
        ("{{ x | tojson }}{{ x | length }}{{ x.keys() | list }}{{ '%s-%d' % ('a', 3) }}{{ 'a,b'.split(',') }}",
         {"x": {"k": [1, 2.5, None, True, "s"]}}),
        ("{% if a is defined and a.b is mapping %}{{ a.b.c[1:3] }}{% elif a %}{{ a * 2 }}{% else %}{{ raise_exception('no') }}{% endif %}",
         {"a": {"b": {"c": "hello"}}}),
        ("{%- filter upper -%}{{ s | replace('a', 'b') | center(9) }}{%- endfilter %}{% set t %}x{{ s }}{% endset %}{{ t }}", {"s": "banana"}),
        ("{{ strftime_now('%Y') | length }}{{ [3,1,2] | sort | join('-') }}{{ {'b':1,'a':2} | dictsort }}", {}),
    ]
    for i, (t, c) in enumerate(small):
        write("jinja_template_fuzz", f"small{i}", t.encode() + b"\0" + json.dumps(c).encode())


def tokenizer_seeds():
    texts = ["Hello, world!", "  spaces\tand\nnewlines  ", "<|im_start|>user\nhi<|im_end|>", "中文字符 и кириллица",
             "e\u0301 composed", "emoji \U0001F600\U0001F44D", "123 4567 89", "<think>\n</think>", "\xff\xfe bad", "a" * 300]
    for i, t in enumerate(texts):
        data = t.encode("utf-8", "surrogateescape") if "\xff" not in t else b"\xff\xfe bad"
        write("tokenizer_fuzz", f"{i}", bytes([i % 4]) + data)


def output_parser_seeds():
    for i, out in enumerate(OUTPUTS + ["<think>unclosed", "<tool_call>\n<function=nope>\n</tool_call>", "<tool_call>{bad json",
                                       "<tool_call>\n<function=get_weather>\n<parameter=days>\n[[[1]]]\n</parameter>\n</function>\n</tool_call>"]):
        for flags in (2 | 4, 1 | 4 | 8, 2 | 16, 0):
            write("output_parser_fuzz", f"{i}_{flags}", bytes([flags]) + out.encode())


def config_seeds():
    golden = os.path.join(REPO, "tests", "golden", "qwen35")
    n = 0
    for root, _, files in os.walk(golden):
        for f in files:
            if f in ("config.json", "generation_config.json"):
                write("config_json_fuzz", f"{n}_{f}", open(os.path.join(root, f), "rb").read())
                n += 1
    write("config_json_fuzz", "gen", json.dumps({"eos_token_id": [1, 2], "temperature": 0.6, "top_k": 20, "do_sample": True}))


http_seeds()
jinja_seeds()
tokenizer_seeds()
output_parser_seeds()
config_seeds()
