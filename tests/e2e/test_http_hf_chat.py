"""Whole chats through `sparkserve serve` equal Hugging Face transformers' greedy output.

The fixture (tests/golden/hf_chat, made by tests/golden/make_hf_chat_golden.py) is a tiny random
Qwen3.5 text model over the real Qwen3 tokenizer's vocabulary, with, per chat, what transformers
produced: apply_chat_template(add_generation_prompt=True, tokenize=False, **kwargs) -> prompt text,
tokenizer(prompt, add_special_tokens=False) -> prompt ids, generate(do_sample=False, eos =
<|im_end|>, <|endoftext|>) -> generated ids (the eos id included when it stopped on one), and
decode(generated ids, skip_special_tokens=True) -> decoded text.

The server gets a model directory assembled at test time: the committed checkpoint plus the shared
Qwen3 tokenizer.json / tokenizer_config.json (its chat template) from ../shared/fixtures.
What is compared, per chat:
  - `sparkserve template` == HF's prompt text; `sparkserve tokenize` == HF's prompt ids;
    `sparkserve tokenize --decode --skip-special-tokens` of HF's generated ids == HF's decoded text;
  - OpenAI chat.completions (temperature 0, streaming and not): usage.prompt_tokens ==
    len(prompt ids), usage.completion_tokens == len(generated ids) (both count the eos token: HF's
    output ids contain it, and OpenAI-compatible servers count it as vLLM does), finish_reason, and
    reasoning_content + content == HF's decoded text. The server takes only <think>/</think> markup
    out of the text (output parser `qwen3`); the fixture's decoded texts contain no such markup
    (asserted below), so the concatenation must equal HF's decode exactly, leading spaces included;
  - Anthropic messages: the same, with `thinking` enabled exactly for the chats HF rendered with
    enable_thinking true (explicitly or as the Qwen3 template's default).
"""
import json
import os
import shutil
import subprocess

import pytest

from conftest import API_KEY, FIXTURES, MODEL_NAME, REPO, SPARKSERVE, Server

HF_CHAT = os.path.join(REPO, "tests", "golden", "hf_chat")
TOKENIZER = os.path.join(FIXTURES, "qwen3-tokenizer")
CASES = json.load(open(os.path.join(HF_CHAT, "cases.json"), encoding="utf-8"))["cases"]
MARKUP = ("<think>", "</think>")


@pytest.fixture(scope="module")
def hf_model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hf_chat_model")
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(HF_CHAT, name), d / name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, name), d / name)
    return d


@pytest.fixture(scope="module")
def hf_server(hf_model_dir):
    if not os.path.exists(SPARKSERVE):
        pytest.fail(f"{SPARKSERVE} not built (set SPARKSERVE_BUILD_DIR)")
    s = Server(hf_model_dir, "--output-parser", "qwen3")
    yield s
    assert s.stop() == 0, s.stderr


@pytest.fixture(scope="module")
def oai(hf_server):
    import openai
    return openai.OpenAI(base_url=hf_server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


def ids_of(case):
    return [c["name"] for c in case]


def test_fixture_is_meaningful():
    assert len(CASES) >= 6
    assert {c["chat_template_kwargs"].get("enable_thinking") for c in CASES} >= {True, False}
    assert any(c["finish_reason"] == "stop" for c in CASES), "some chat must end on eos"
    assert sum(len(c["generated_ids"]) >= 8 for c in CASES) >= len(CASES) - 2
    for c in CASES:
        assert not any(m in c["decoded"] for m in MARKUP), (c["name"], c["decoded"])


@pytest.mark.parametrize("case", CASES, ids=ids_of(CASES))
def test_template_cli_matches_hf(case, hf_model_dir, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": case["messages"], "add_generation_prompt": True,
                               **case["chat_template_kwargs"]}, ensure_ascii=False), encoding="utf-8")
    out = subprocess.run([SPARKSERVE, "template", str(hf_model_dir), "--request", str(req)],
                         capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode("utf-8") == case["prompt"]


def _tokenize_file(model_dir, tmp_path, lines, *flags):
    """One `sparkserve tokenize --file` run over all cases (the tokenizer loads once)."""
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    out = subprocess.run([SPARKSERVE, "tokenize", str(model_dir), "--file", str(f), *flags],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    return [json.loads(line) for line in out.stdout.decode("utf-8").splitlines()]


def test_tokenize_cli_matches_hf_prompt_ids(hf_model_dir, tmp_path):
    got = _tokenize_file(hf_model_dir, tmp_path, [c["prompt"] for c in CASES], "--no-add-special-tokens")
    assert got == [c["prompt_ids"] for c in CASES]


def test_detokenize_cli_matches_hf_decode(hf_model_dir, tmp_path):
    got = _tokenize_file(hf_model_dir, tmp_path, [c["generated_ids"] for c in CASES], "--decode",
                         "--skip-special-tokens")
    assert got == [c["decoded"] for c in CASES]


def _extra(case):
    extra = {"skip_special_tokens": True}
    if case["chat_template_kwargs"]:
        extra["chat_template_kwargs"] = case["chat_template_kwargs"]
    return extra


@pytest.mark.parametrize("case", CASES, ids=ids_of(CASES))
def test_openai_chat_matches_hf(case, oai):
    r = oai.chat.completions.create(model=MODEL_NAME, messages=case["messages"], temperature=0,
                                    max_tokens=case["max_new_tokens"], extra_body=_extra(case))
    msg = r.choices[0].message
    reasoning = getattr(msg, "reasoning_content", None) or (msg.model_extra or {}).get("reasoning_content") or ""
    got = {"text": reasoning + (msg.content or ""), "prompt_tokens": r.usage.prompt_tokens,
           "completion_tokens": r.usage.completion_tokens, "finish": r.choices[0].finish_reason}
    want = {"text": case["decoded"], "prompt_tokens": len(case["prompt_ids"]),
            "completion_tokens": len(case["generated_ids"]), "finish": case["finish_reason"]}
    assert got == want


@pytest.mark.parametrize("case", CASES, ids=ids_of(CASES))
def test_openai_chat_stream_matches_hf(case, oai):
    stream = oai.chat.completions.create(model=MODEL_NAME, messages=case["messages"], temperature=0,
                                         max_tokens=case["max_new_tokens"], extra_body=_extra(case), stream=True,
                                         stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            extra = ch.delta.model_extra or {}
            text += (extra.get("reasoning_content") or "") + (ch.delta.content or "")
            finish = ch.finish_reason or finish
    assert (text, finish) == (case["decoded"], case["finish_reason"])
    assert (usage.prompt_tokens, usage.completion_tokens) == (len(case["prompt_ids"]), len(case["generated_ids"]))


@pytest.mark.parametrize("case", CASES, ids=ids_of(CASES))
def test_anthropic_messages_match_hf(case, hf_server):
    """No `thinking` renders enable_thinking=false, `thinking: enabled` true (the template's default)."""
    import anthropic
    client = anthropic.Anthropic(base_url=hf_server.url, api_key=API_KEY, max_retries=0, timeout=60)
    system = [m["content"] for m in case["messages"] if m["role"] == "system"]
    turns = [m for m in case["messages"] if m["role"] != "system"]
    kw = {"system": system[0]} if system else {}
    if case["chat_template_kwargs"].get("enable_thinking", True):
        kw["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    r = client.messages.create(model=MODEL_NAME, max_tokens=case["max_new_tokens"], messages=turns,
                               extra_body={"skip_special_tokens": True, "temperature": 0}, **kw)
    text = "".join(getattr(b, "thinking", "") or getattr(b, "text", "") for b in r.content)
    stop = {"stop": "end_turn", "length": "max_tokens"}[case["finish_reason"]]
    assert (text, r.stop_reason) == (case["decoded"], stop)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (len(case["prompt_ids"]), len(case["generated_ids"]))
