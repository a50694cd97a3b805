"""`sparkserve template` against Hugging Face's rendering (jinja2 with transformers' settings, see
jinja_hf_oracle.py) on conversations for the real Qwen3 and Qwen3.5 chat templates: system
prompts, multi-turn history with and without reasoning (field or <think> in content), tools, tool
calls (arguments as objects and as JSON strings) and responses, multimodal content parts, thinking
on/off, generation prompt on/off, and each template's raise_exception paths. Byte-equal output,
or the same raised message with exit code 1.
"""
import json
import os
import shutil
import subprocess

import pytest

from jinja_hf_oracle import apply_chat_template, compile_template
import jinja2

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "..", "shared", "fixtures")
QWEN3_DIR = os.path.join(FIXTURES, "qwen3-tokenizer")
QWEN35_TEMPLATE = os.path.join(FIXTURES, "qwen3_5-chat_template.jinja")
BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")

# ---- tools ----
WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the weather for a city. Use \"metric\" units; returns <json> & more.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
        "units": {"type": "string", "enum": ["metric", "imperial"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "web_search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "top_k": {"type": "number", "default": 0.5},
        "filters": {"type": "object", "properties": {"site": {"type": "string"}, "safe": {"type": "boolean"}}},
        "langs": {"type": "array", "items": {"type": "string"}}},
        "required": ["query"]}}}
BARE_TOOL = {"name": "calc", "description": "Evaluate\nmath", "parameters": {"type": "object", "properties": {}}}
TOOLS = [WEATHER, SEARCH]


def call(name, args, wrap=True, as_string=False, call_id=None):
    arguments = json.dumps(args, ensure_ascii=False) if as_string else args
    tc = {"type": "function", "function": {"name": name, "arguments": arguments}} if wrap else {"name": name, "arguments": arguments}
    if call_id:
        tc["id"] = call_id
    return tc


SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "What's the weather in Paris?"}
U2 = {"role": "user", "content": "And tomorrow?"}
A_PLAIN = {"role": "assistant", "content": "It is sunny."}
A_REASON = {"role": "assistant", "content": "It is sunny.", "reasoning_content": "The user asks about weather.\nCheck it."}
A_THINK_CONTENT = {"role": "assistant", "content": "<think>\nI should check.\n</think>\n\nIt is sunny."}
A_TOOL = {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "days": 1}, call_id="c1")]}
T_RESP = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}", "tool_call_id": "c1"}

IMG = {"type": "image", "image": "file:///tmp/cat.png"}
IMG_URL = {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}
VID = {"type": "video", "video": "file:///tmp/clip.mp4"}


def text(t):
    return {"type": "text", "text": t}


# name -> (messages, extra request keys)
SCENARIOS = {
    "user_only": ([{"role": "user", "content": "What is 2+2?"}], {}),
    "system_user": ([SYS, U1], {}),
    "multi_turn": ([SYS, U1, A_PLAIN, U2], {}),
    "history_reasoning_field": ([U1, A_REASON, U2], {}),
    "history_think_in_content": ([SYS, U1, A_THINK_CONTENT, U2], {}),
    "history_think_unclosed_prefix": ([U1, {"role": "assistant", "content": "I think...\n</think>\nSunny."}, U2], {}),
    "last_assistant_reasoning": ([U1, A_REASON], {}),
    "last_assistant_think_content": ([SYS, U1, A_THINK_CONTENT], {}),
    "last_assistant_plain": ([U1, A_PLAIN], {}),
    "reasoning_empty_string": ([U1, {"role": "assistant", "content": "Sunny.", "reasoning_content": ""}], {}),
    "reasoning_none": ([U1, {"role": "assistant", "content": "Sunny.", "reasoning_content": None}, U2], {}),
    "reasoning_and_think_content": ([U1, {"role": "assistant", "content": "<think>a</think>b", "reasoning_content": "field"}], {}),
    "tools_no_system": ([U1], {"tools": TOOLS}),
    "tools_with_system": ([SYS, U1], {"tools": TOOLS}),
    "tools_bare_schema": ([U1], {"tools": [BARE_TOOL]}),
    "tools_empty_list": ([SYS, U1], {"tools": []}),
    "tool_call_dict": ([SYS, U1, A_TOOL, T_RESP], {"tools": TOOLS}),
    "tool_call_dict_answered": ([SYS, U1, A_TOOL, T_RESP, A_PLAIN, U2], {"tools": TOOLS}),
    "tool_call_json_string": ([U1, {"role": "assistant", "content": "", "tool_calls": [
        call("get_weather", {"city": "Paris", "units": "metric"}, as_string=True)]}, T_RESP], {"tools": TOOLS}),
    "tool_calls_multiple": ([SYS, U1, {"role": "assistant", "content": "Let me check both.", "tool_calls": [
        call("get_weather", {"city": "Paris"}), call("web_search", {"query": "Paris forecast", "top_k": 3})]},
        {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "rain later"},
        {"role": "assistant", "content": "Sunny, rain later."}, U2], {"tools": TOOLS}),
    "tool_call_with_reasoning": ([U1, {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
        "tool_calls": [call("get_weather", {"city": "Paris"})]}, T_RESP], {"tools": TOOLS}),
    "tool_call_no_function_wrapper": ([U1, {"role": "assistant", "content": "", "tool_calls": [
        call("get_weather", {"city": "Oslo"}, wrap=False)]}, T_RESP], {"tools": TOOLS}),
    "tool_args_types": ([U1, {"role": "assistant", "content": "Calling.", "tool_calls": [call("web_search", {
        "query": "multi\nline \"quoted\" ü 😀", "top_k": 2.5, "filters": {"site": "x.org", "safe": True},
        "langs": ["en", "fr"], "none": None, "flag": False, "n": 0, "big": 1e21, "tiny": 1e-7})]},
        {"role": "tool", "content": "[]"}], {"tools": TOOLS}),
    "tool_response_user_wrapped": ([U1, A_TOOL, {"role": "user", "content": "<tool_response>\nsunny\n</tool_response>"}], {"tools": TOOLS}),
    "agent_loop_long": ([SYS, U1] + [m for i in range(3) for m in (
        {"role": "assistant", "content": f"Step {i}", "reasoning_content": f"thinking {i}", "tool_calls": [call("web_search", {"query": f"q{i}"})]},
        {"role": "tool", "content": f"result {i}"})] + [{"role": "assistant", "content": "Done.", "reasoning_content": "wrap up"}], {"tools": TOOLS}),
    "unicode_crlf": ([{"role": "system", "content": "  Sys with spaces \r\n and tabs\t  "},
                      {"role": "user", "content": "Emoji 👩‍👩‍👧 🇫🇷, 中文, עברית, combining é\r\nline2 <|im_end|> {{ not jinja }}"},
                      {"role": "assistant", "content": "  padded answer  \n"}, U2], {}),
    "assistant_content_none_tool_calls": ([U1, {"role": "assistant", "content": None, "tool_calls": [call("get_weather", {"city": "Rome"})]}, T_RESP], {"tools": TOOLS}),
    "extra_kwargs_ignored": ([U1], {"custom_flag": True, "documents": [{"title": "t", "text": "d"}]}),
    # raise_exception paths (Qwen3.5) and failures
    "empty_messages": ([], {}),
    "system_only": ([SYS], {}),
    "only_tool_message": ([{"role": "tool", "content": "x"}], {}),
    "system_not_first": ([U1, SYS], {}),
    "unknown_role": ([U1, {"role": "narrator", "content": "..."}], {}),
    "content_dict": ([{"role": "user", "content": {"text": "x"}}], {}),
    "content_number": ([{"role": "user", "content": 42}], {}),
    # multimodal content parts
    "mm_image": ([{"role": "user", "content": [IMG, text("Describe this.")]}], {}),
    "mm_image_url": ([SYS, {"role": "user", "content": [IMG_URL, text("What is it?")]}], {}),
    "mm_video": ([{"role": "user", "content": [VID, text("Summarize the clip.")]}], {}),
    "mm_vision_ids": ([{"role": "user", "content": [IMG, IMG_URL, VID, text("Compare.")]},
                       {"role": "assistant", "content": [text("They differ.")]},
                       {"role": "user", "content": [IMG, text("And this one?")]}], {"add_vision_id": True}),
    "mm_history_no_ids": ([{"role": "user", "content": [IMG, text("A?")]}, {"role": "assistant", "content": "A."},
                           {"role": "user", "content": [VID, VID, text("B?")]}], {"add_vision_id": False}),
    "mm_system_text_parts": ([{"role": "system", "content": [text("Be brief."), text(" Really.")]},
                              {"role": "user", "content": [text("Hi")]}], {"tools": TOOLS}),
    "mm_tool_response_image": ([U1, A_TOOL, {"role": "tool", "content": [IMG, text("chart")]}], {"tools": TOOLS}),
    "mm_system_image": ([{"role": "system", "content": [IMG, text("sys")]}, U1], {}),
    "mm_system_video": ([{"role": "system", "content": [VID]}, U1], {"tools": TOOLS}),
    "mm_bad_part": ([{"role": "user", "content": [{"type": "audio", "audio": "x.wav"}]}], {}),
    "mm_text_key_only": ([{"role": "user", "content": [{"text": "untyped text part"}]}], {}),
}

VARIANTS = {
    "gen": {"add_generation_prompt": True},
    "gen_nothink": {"add_generation_prompt": True, "enable_thinking": False},
    "nogen": {},
}


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    """Qwen3: the fixture directory as is. Qwen3.5: its template as chat_template.jinja beside a
    tokenizer_config.json that still holds Qwen3's template (the .jinja file must win)."""
    qwen35 = tmp_path_factory.mktemp("qwen3_5")
    shutil.copy(QWEN35_TEMPLATE, qwen35 / "chat_template.jinja")
    shutil.copy(os.path.join(QWEN3_DIR, "tokenizer_config.json"), qwen35 / "tokenizer_config.json")
    return {"qwen3": QWEN3_DIR, "qwen3_5": str(qwen35)}


def oracle(model_dir, request):
    try:
        return "ok", apply_chat_template(model_dir, request)
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:
            return "raised", e.message
        return "error", f"{type(e).__name__}: {e}"
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}"


def run_sparkserve(model_dir, request, tmp_path):
    req = tmp_path / "request.json"
    req.write_text(json.dumps(request, ensure_ascii=False), encoding="utf-8")
    return subprocess.run([SPARKSERVE, "template", model_dir, "--request", str(req)], capture_output=True, timeout=30)


def check_against_oracle(model_dir, request, tmp_path):
    kind, expected = oracle(model_dir, request)
    proc = run_sparkserve(model_dir, request, tmp_path)
    stderr = proc.stderr.decode("utf-8", "replace")
    if kind == "ok":
        assert proc.returncode == 0, f"HF rendered, sparkserve failed: {stderr}"
        assert proc.stdout == expected.encode("utf-8")
    else:
        assert proc.returncode == 1, f"HF failed ({kind}: {expected}), sparkserve rendered {proc.stdout[:200]!r}"
        assert proc.stdout == b""
        if kind == "raised":
            assert expected in stderr
    return kind


CASES = [(t, s, v) for t in ("qwen3", "qwen3_5") for s in SCENARIOS for v in VARIANTS]


@pytest.mark.parametrize("template,scenario,variant", CASES, ids=[f"{t}-{s}-{v}" for t, s, v in CASES])
def test_render_matches_hugging_face(model_dirs, tmp_path, template, scenario, variant):
    messages, extra = SCENARIOS[scenario]
    request = {"messages": messages, **extra, **VARIANTS[variant]}
    check_against_oracle(model_dirs[template], request, tmp_path)


def test_corpus_covers_enough_successful_renders_and_raises(model_dirs):
    """The acceptance bar: at least 50 byte-compared renders, and every raise_exception message the
    Qwen3.5 template has is exercised."""
    kinds = {}
    raised = set()
    for t, s, v in CASES:
        messages, extra = SCENARIOS[s]
        kind, value = oracle(model_dirs[t], {"messages": messages, **extra, **VARIANTS[v]})
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "raised":
            raised.add(value)
    assert kinds["ok"] >= 50
    with open(QWEN35_TEMPLATE, encoding="utf-8") as f:
        source = f.read()
    declared = {part.split("')")[0] for part in source.split("raise_exception('")[1:]}
    assert declared <= raised, f"raise_exception paths not exercised: {declared - raised}"


# Qwen3.5 trims the final message, which removes the tag's trailing space: transformers then fails
# (str.rindex), and so must we.
@pytest.mark.parametrize("template,outcome", [("qwen3", "ok"), ("qwen3_5", "error")])
def test_continue_final_message(model_dirs, tmp_path, template, outcome):
    request = {"messages": [U1, {"role": "assistant", "content": "The weather is"}], "continue_final_message": True}
    assert check_against_oracle(model_dirs[template], request, tmp_path) == outcome


def test_raise_exception_exit_code_and_message(model_dirs, tmp_path):
    proc = run_sparkserve(model_dirs["qwen3_5"], {"messages": []}, tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert "No messages provided." in proc.stderr.decode()


def test_bad_request_files(model_dirs, tmp_path):
    missing = subprocess.run([SPARKSERVE, "template", model_dirs["qwen3"], "--request", str(tmp_path / "nope.json")],
                             capture_output=True, timeout=30)
    assert missing.returncode == 1 and b"cannot read" in missing.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{\"not_messages\": 1}")
    proc = subprocess.run([SPARKSERVE, "template", model_dirs["qwen3"], "--request", str(bad)], capture_output=True, timeout=30)
    assert proc.returncode == 1 and b"messages" in proc.stderr
    nodir = subprocess.run([SPARKSERVE, "template", str(tmp_path / "no_model"), "--request", str(bad)],
                           capture_output=True, timeout=30)
    assert nodir.returncode == 1


def test_tool_use_template_is_picked_when_tools_are_given(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "chat_template": [
        {"name": "default", "template": "D:{{ messages[0].content }}{{ eos_token }}"},
        {"name": "tool_use", "template": "T:{{ tools|length }}:{{ tools[0].function.name }}"}]}))
    for request in ({"messages": [U1]}, {"messages": [U1], "tools": TOOLS}, {"messages": [U1], "chat_template": "tool_use", "tools": [WEATHER]}):
        assert check_against_oracle(str(model), request, tmp_path) == "ok"
