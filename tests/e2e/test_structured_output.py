"""Structured outputs (issue 27) on the tiny demo model, whose random weights write junk: the
constraint does all the work. Oracles no one here wrote: `jsonschema` for JSON, Python's `re` for
regexes, Lark for GBNF grammars, the official openai/anthropic SDKs (and pydantic) for the APIs.

Every output of every sampled request (temperature 1, n samples each with its own random stream,
several seeds) must parse and validate; unsupported or unsatisfiable inputs must be 400s that name
what was wrong.
"""
import json
import re

import httpx
import jsonschema
import lark
import pydantic
import pytest
from tokenizers import Tokenizer

from conftest import API_KEY, MODEL_NAME, Server

NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
HEADERS = {"Authorization": f"Bearer {API_KEY}"}

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["red", "green", 7, None]}, "maxItems": 3},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
        "address": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                                                     "primary": {"type": "boolean"}},
                    "required": ["zip"], "additionalProperties": False},
        "nick": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}

TREE = {  # recursion through $defs, with a tuple and bounded arrays
    "$defs": {"node": {"type": "object",
                       "properties": {"id": {"type": "integer", "minimum": -50, "maximum": 50},
                                      "pair": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3},
                                                                                {"type": "boolean"}],
                                               "items": False, "minItems": 2},
                                      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 1}},
                       "required": ["id", "pair"]}},
    "$ref": "#/$defs/node",
}

CHOICES = {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                            "id": {"type": "string", "format": "uuid"},
                                            "ip": {"type": "string", "format": "ipv4"},
                                            "mood": {"const": "ok"},
                                            "level": {"type": ["integer", "null"], "minimum": 10, "maximum": 12}},
           "required": ["when", "id", "ip", "mood", "level"]}


@pytest.fixture(scope="module")
def server(model_dir):
    # Room for the tool preamble the chat template writes (~1k tokens of the tiny tokenizer) and
    # for outputs that a junk model drives to their schema's maxima. openai_client / anthropic_client
    # (conftest) use this module's server: pytest takes the nearest fixture definition.
    s = Server(model_dir, max_seq_len=2048)
    yield s
    assert s.stop() == 0, s.stderr


def post(server, path, body):
    return httpx.post(server.url + path, json={"model": MODEL_NAME, **body}, headers=HEADERS, timeout=60)


def chat(server, body, content="Answer."):
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": content}], **NO_THINK, **body})
    assert r.status_code == 200, r.text
    return r.json()


def contents(resp):
    return [c["message"]["content"] for c in resp["choices"]]


@pytest.fixture(scope="module")
def token_ids(model_dir):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return {t: tok.token_to_id(t) for t in ['"', "}", "]", "</think>"]}


@pytest.mark.parametrize("schema", [PERSON, TREE, CHOICES], ids=["person", "tree", "formats"])
def test_json_schema_outputs_validate(server, schema):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    outputs = []
    for seed in (1, 2):
        resp = chat(server, {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema,
                                                                                        "strict": True}},
                             "temperature": 1.0, "n": 16, "seed": seed, "max_tokens": 400})
        for choice in resp["choices"]:
            assert choice["finish_reason"] == "stop", choice
        outputs += contents(resp)
    assert len(set(outputs)) > len(outputs) // 2  # the samples differ: the junk model really explores
    for text in outputs:
        validator.validate(json.loads(text))


def test_vllm_and_llama_cpp_json_fields_and_completions(server):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
                                               "s": {"type": "string", "maxLength": 5}}, "required": ["n", "s"]}
    outs = contents(chat(server, {"guided_json": schema, "n": 8, "seed": 3, "max_tokens": 60}))
    outs += contents(chat(server, {"guided_json": json.dumps(schema), "n": 4, "seed": 4, "max_tokens": 60}))
    outs += contents(chat(server, {"json_schema": schema, "n": 4, "seed": 5, "max_tokens": 60}))
    outs += contents(chat(server, {"structured_outputs": {"json": schema}, "n": 4, "seed": 6, "max_tokens": 60}))
    r = post(server, "/v1/completions", {"prompt": "JSON:", "guided_json": schema, "n": 8, "seed": 7, "max_tokens": 60,
                                         "temperature": 1.0})
    assert r.status_code == 200, r.text
    outs += [c["text"] for c in r.json()["choices"]]
    assert len(outs) == 28
    for text in outs:
        jsonschema.validate(json.loads(text), schema)


def test_json_object_mode(server, token_ids):
    # json_object allows any object, and nothing bounds a junk model's strings or nesting: a bias
    # toward the closing characters (applied after the mask) makes it finish within max_tokens.
    bias = {str(token_ids[t]): 6 for t in ['"', "}", "]"]}
    resp = chat(server, {"response_format": {"type": "json_object"}, "n": 12, "seed": 8, "max_tokens": 200,
                         "logit_bias": bias})
    for choice in resp["choices"]:
        assert choice["finish_reason"] == "stop"
        assert isinstance(json.loads(choice["message"]["content"]), dict)


def test_streamed_output_validates(server):
    schema = {"type": "array", "items": {"type": "integer", "minimum": -3, "maximum": 3}, "minItems": 2, "maxItems": 5}
    with httpx.stream("POST", server.url + "/v1/chat/completions", headers=HEADERS, timeout=60, json={
            "model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}], "stream": True, "seed": 9,
            "guided_json": schema, "max_tokens": 60, **NO_THINK}) as r:
        assert r.status_code == 200
        text = ""
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for ch in json.loads(line[6:])["choices"]:
                    text += ch["delta"].get("content") or ""
    jsonschema.validate(json.loads(text), schema)


REGEXES = [r"[A-Z][a-z]{1,6} \d{1,3}(\.\d{1,2})?",
           r"(cat|dog|bird)s?-[0-9a-f]{4}",
           r"\(\d{3}\) \d{3}-\d{4}",
           r"[^\s,]{1,4}(,[^\s,]{1,4}){0,3}"]


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_outputs_fully_match(server, pattern):
    resp = chat(server, {"guided_regex": pattern, "n": 12, "seed": 10, "max_tokens": 40})
    resp2 = post(server, "/v1/completions", {"prompt": "x", "structured_outputs": {"regex": pattern}, "n": 6,
                                             "seed": 11, "max_tokens": 40, "temperature": 1.0}).json()
    outs = contents(resp) + [c["text"] for c in resp2["choices"]]
    for text in outs:
        assert re.fullmatch(pattern, text), (pattern, text)


def test_choice(server):
    options = ["positive", "negative", "neutral", "ça va"]
    outs = contents(chat(server, {"guided_choice": options, "n": 16, "seed": 12, "max_tokens": 10}))
    assert set(outs) <= set(options) and len(set(outs)) > 1


# Each grammar twice: GBNF for the server, Lark for the oracle.
GRAMMARS = [
    ("""root ::= expr
expr ::= term (("+" | "-") term){0,3}
term ::= num | "(" expr ")"
num  ::= [1-9] [0-9]{0,2}
""", r"""
?start: expr
expr: term (("+" | "-") term)~0..3
term: NUM | "(" expr ")"
NUM: /[1-9][0-9]{0,2}/
"""),
    ("""root ::= pair ("," ws pair){0,4}   # key=value pairs
pair ::= key "=" val
key  ::= [a-z]{1,5}
val  ::= "true" | "false" | [0-9]{1,3} | "\\"" [^"\\n]{0,6} "\\""
ws   ::= " "?
""", r"""
start: pair ("," WS? pair)~0..4
pair: KEY "=" val
KEY: /[a-z]{1,5}/
val: "true" | "false" | /[0-9]{1,3}/ | /"[^"\n]{0,6}"/
WS: " "
"""),
    ("""root ::= "«" [^»\\n]{0,10} "»" ("|" item){1,3}
item ::= [A-Z]+ | "é" | "中文"
""", r"""
start: /«[^»\n]{0,10}»/ ("|" item)~1..3
item: /[A-Z]+/ | "é" | "中文"
"""),
]


@pytest.mark.parametrize("gbnf,lark_grammar", GRAMMARS, ids=["arith", "pairs", "unicode"])
def test_gbnf_outputs_parse_with_lark(server, gbnf, lark_grammar, token_ids):
    parser = lark.Lark(lark_grammar, parser="earley", lexer="dynamic")
    outs = contents(chat(server, {"guided_grammar": gbnf, "n": 14, "seed": 13, "max_tokens": 120}))
    r = post(server, "/v1/completions", {"prompt": "g", "grammar": gbnf, "n": 6, "seed": 14, "max_tokens": 120,
                                         "temperature": 1.0})
    assert r.status_code == 200, r.text
    outs += [c["text"] for c in r.json()["choices"]]
    for text in outs:
        parser.parse(text)  # raises on anything the grammar does not accept


def test_reasoning_stays_free_and_the_constraint_starts_after_it(server, token_ids):
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a"]}
    # Thinking on (the template opens <think>); a bias makes the junk model close it soon.
    r = post(server, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "think"}], "response_format": {
            "type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
        "n": 8, "seed": 15, "max_tokens": 120, "logit_bias": {str(token_ids["</think>"]): 4}})
    assert r.status_code == 200, r.text
    finished = free = 0
    for c in r.json()["choices"]:
        msg = c["message"]
        if c["finish_reason"] != "stop":
            continue  # still thinking at max_tokens: nothing to check
        finished += 1
        jsonschema.validate(json.loads(msg["content"]), schema)
        reasoning = (msg["reasoning_content"] or "").strip()
        free += bool(reasoning) and not reasoning.startswith("{")  # junk, not JSON: reasoning was free
    assert finished >= 4 and free >= 2


def test_openai_sdk_parse_with_pydantic(openai_client):
    class Item(pydantic.BaseModel):
        label: str = pydantic.Field(max_length=6)
        count: int = pydantic.Field(ge=0, le=20)
        sure: bool

    class Answer(pydantic.BaseModel):
        items: list[Item] = pydantic.Field(max_length=2)
        mood: str | None = pydantic.Field(max_length=5)

    for seed in range(4):
        completion = openai_client.chat.completions.parse(
            model=MODEL_NAME, messages=[{"role": "user", "content": "Give items."}], response_format=Answer,
            seed=seed, max_tokens=200, extra_body=NO_THINK)
        parsed = completion.choices[0].message.parsed
        assert isinstance(parsed, Answer), completion
        assert all(0 <= i.count <= 20 and len(i.label) <= 6 for i in parsed.items)


WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 10},
                          "days": {"type": "integer", "minimum": 1, "maximum": 14},
                          "unit": {"type": "string", "enum": ["c", "f"]},
                          "extras": {"type": "object", "properties": {"wind": {"type": "boolean"}},
                                     "required": ["wind"], "additionalProperties": False}},
           "required": ["city", "days", "unit"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 6},
                                           "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 5}},
          "required": ["q", "limit"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER, "strict": True}},
         {"type": "function", "function": {"name": "lookup", "parameters": LOOKUP, "strict": True}}]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "lookup"}}],
                         ids=["required", "named"])
def test_strict_tool_calls_validate(openai_client, tool_choice):
    schemas = {"get_weather": WEATHER, "lookup": LOOKUP}
    calls = 0
    for seed in range(2):
        resp = openai_client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": "weather?"}], tools=TOOLS, tool_choice=tool_choice,
            seed=seed, n=4, max_tokens=400, temperature=1.0, parallel_tool_calls=False)
        for choice in resp.choices:
            assert choice.finish_reason == "tool_calls", choice
            for call in choice.message.tool_calls:
                if isinstance(tool_choice, dict):
                    assert call.function.name == "lookup"
                jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
                calls += 1
    assert calls == 8


def test_anthropic_forced_tool_follows_input_schema(anthropic_client):
    for seed in range(2):
        msg = anthropic_client.messages.create(
            model=MODEL_NAME, max_tokens=400, messages=[{"role": "user", "content": "weather?"}],
            tools=[{"name": "get_weather", "description": "w", "input_schema": WEATHER}],
            tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True})
        uses = [b for b in msg.content if b.type == "tool_use"]
        assert msg.stop_reason == "tool_use" and len(uses) == 1, msg
        jsonschema.validate(uses[0].input, WEATHER)


@pytest.mark.parametrize("body,param,needle", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}}}}},
     "response_format", "'multipleOf'"),
    ({"guided_json": {"type": "array", "uniqueItems": True}}, "guided_json", "'uniqueItems'"),
    ({"guided_json": {"type": "string", "minLength": 4, "maxLength": 2}}, "guided_json", "minLength (4) exceeds maxLength (2)"),
    ({"guided_json": {"type": "integer", "minimum": 3, "maximum": 1}}, "guided_json", "cannot be satisfied"),
    ({"guided_json": {"enum": []}}, "guided_json", "empty"),
    ({"guided_regex": "(a)\\1"}, "guided_regex", "backreferences"),
    ({"guided_grammar": "root ::= x\n"}, "guided_grammar", "rule 'x' is used but never defined"),
    ({"guided_grammar": "root ::= root \"a\" | \"b\"\n"}, "guided_grammar", "left-recursive"),
    ({"guided_choice": []}, "guided_choice", "empty"),
    ({"response_format": {"type": "yaml"}}, "response_format", "unknown type 'yaml'"),
    ({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_choice", "only one field"),
    ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag", "not supported"),
])
def test_bad_constraints_are_clear_400s(server, body, param, needle):
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert needle in err["message"], err
    assert err["param"] == param, err


def test_strict_tool_with_unsupported_schema_is_a_400(server):
    bad = [{"type": "function", "function": {"name": "f", "strict": True, "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "not": {"const": 1}}}, "required": ["x"]}}}]
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": bad,
                                              "tool_choice": "required"})
    assert r.status_code == 400, r.text
    assert "tool 'f' (strict)" in r.json()["error"]["message"] and "'not'" in r.json()["error"]["message"]


def test_auto_tool_choice_with_strict_tools(server, model_dir):
    # tool_choice auto: the text is free, but a call the model opens must be well formed and follow
    # its schema. A bias makes the junk model open calls.
    call_id = Tokenizer.from_file(str(model_dir / "tokenizer.json")).token_to_id("<tool_call>")
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS,
                                              "tool_choice": "auto", "n": 6, "seed": 16, "max_tokens": 500,
                                              "logit_bias": {str(call_id): 3}, **NO_THINK})
    assert r.status_code == 200, r.text
    schemas = {"get_weather": WEATHER, "lookup": LOOKUP}
    calls = 0
    for choice in r.json()["choices"]:
        for call in choice["message"].get("tool_calls") or []:
            jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[call["function"]["name"]])
            calls += 1
        # Nothing that looks like a call is left in the text, unless the output was cut mid-call.
        if choice["finish_reason"] != "length":
            assert "<tool_call>" not in (choice["message"]["content"] or "")
    assert calls >= 3
