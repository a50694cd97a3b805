"""OpenAI API of `sparkserve serve` on the tiny model, through the official `openai` SDK: chat and
completions, streaming and not; greedy output equals `sparkserve run`'s for the same ids; tokenize
matches the `tokenizers` library; errors are the SDK's typed exceptions."""
import json
import subprocess

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from conftest import API_KEY, RUNNER_FLAGS, MODEL_NAME, SPARKSERVE

USER = [{"role": "user", "content": "hello world"}]


def run_greedy(model_dir, ids, max_new):
    out = subprocess.run([SPARKSERVE, "run", str(model_dir), "--ids", ",".join(map(str, ids)), "--max-new",
                          str(max_new), "--json", *RUNNER_FLAGS], capture_output=True, text=True, timeout=60,
                         check=True)
    return json.loads(out.stdout)["ids"]


def chat_prompt_ids(server, messages, **kw):
    r = httpx.post(server.url + "/tokenize", json={"messages": messages, **kw},
                   headers={"Authorization": f"Bearer {API_KEY}"})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def test_models_lists_the_served_model(openai_client):
    models = openai_client.models.list()
    assert [m.id for m in models.data] == [MODEL_NAME]


def test_tokenize_matches_the_tokenizers_library(server, model_dir):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    text = "hello world, kato rime\n<think>x</think> \u00e9\u6771"
    r = httpx.post(server.url + "/tokenize", json={"prompt": text}, headers={"x-api-key": API_KEY}).json()
    assert r["tokens"] == tok.encode(text).ids
    d = httpx.post(server.url + "/detokenize", json={"tokens": r["tokens"]}, headers={"x-api-key": API_KEY}).json()
    assert d["prompt"] == tok.decode(r["tokens"], skip_special_tokens=False)


def test_chat_greedy_equals_sparkserve_run(server, model_dir, openai_client):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    resp = openai_client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=12, temperature=0,
                                                 extra_body={"ignore_eos": True})
    assert resp.object == "chat.completion"
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 12
    prompt_ids = chat_prompt_ids(server, USER)
    assert resp.usage.prompt_tokens == len(prompt_ids)
    expected_ids = run_greedy(model_dir, prompt_ids, 12)
    text = tok.decode(expected_ids, skip_special_tokens=True)
    msg = resp.choices[0].message
    reasoning = getattr(msg, "reasoning_content", None) or ""
    # Nothing trimmed: reasoning + content is the decoded text minus the <think> markup.
    assert reasoning + (msg.content or "") == text.replace("<think>", "").replace("</think>", "")


def test_chat_stream_equals_non_stream_and_reports_usage(openai_client):
    kw = dict(model=MODEL_NAME, messages=USER, max_tokens=10, temperature=0, extra_body={"ignore_eos": True})
    full = openai_client.chat.completions.create(**kw)
    chunks = list(openai_client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    assert content == (full.choices[0].message.content or "")
    assert reasoning == (getattr(full.choices[0].message, "reasoning_content", None) or "")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_thinking_prompt_puts_output_before_think_close_in_reasoning(openai_client, server, model_dir):
    # enable_thinking: the prompt ends inside <think>, so output up to </think> is reasoning.
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = chat_prompt_ids(server, USER, chat_template_kwargs={"enable_thinking": True})
    assert tok.decode(ids, skip_special_tokens=False).endswith("<think>\n")
    resp = openai_client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=6, temperature=0,
                                                 extra_body={"chat_template_kwargs": {"enable_thinking": True},
                                                             "ignore_eos": True})
    assert resp.usage.prompt_tokens == len(ids)
    text = tok.decode(run_greedy(model_dir, ids, 6), skip_special_tokens=True)
    reasoning, _, content = text.partition("</think>")
    msg = resp.choices[0].message
    assert (getattr(msg, "reasoning_content", None) or "") == reasoning
    assert (msg.content or "") == content


def test_completions_token_prompt_equals_sparkserve_run(model_dir, openai_client):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = tok.encode("hello world kato").ids
    resp = openai_client.completions.create(model=MODEL_NAME, prompt=ids, max_tokens=8, temperature=0,
                                            extra_body={"ignore_eos": True})
    assert resp.object == "text_completion"
    assert resp.choices[0].text == tok.decode(run_greedy(model_dir, ids, 8), skip_special_tokens=True)
    assert resp.usage.prompt_tokens == len(ids)
    echo = openai_client.completions.create(model=MODEL_NAME, prompt="hello world kato", max_tokens=8, temperature=0,
                                            echo=True, extra_body={"ignore_eos": True})
    assert echo.choices[0].text == "hello world kato" + resp.choices[0].text
    streamed = "".join(c.choices[0].text for c in openai_client.completions.create(
        model=MODEL_NAME, prompt=ids, max_tokens=8, temperature=0, stream=True, extra_body={"ignore_eos": True})
        if c.choices)
    assert streamed == resp.choices[0].text


def test_seeded_sampling_is_reproducible_and_logprobs_come_back(openai_client):
    kw = dict(model=MODEL_NAME, messages=USER, max_tokens=8, temperature=1.0, seed=1234, logprobs=True,
              top_logprobs=3, extra_body={"ignore_eos": True})
    a = openai_client.chat.completions.create(**kw)
    b = openai_client.chat.completions.create(**kw)
    assert a.choices[0].message.content == b.choices[0].message.content
    lp = a.choices[0].logprobs.content
    assert len(lp) == 8
    assert all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in lp)


def test_stop_string_is_withheld(openai_client):
    kw = dict(model=MODEL_NAME, prompt="hello world", max_tokens=16, temperature=0, extra_body={"ignore_eos": True})
    text = openai_client.completions.create(**kw).choices[0].text
    assert len(text) >= 4, text
    stop = text[2:4]
    resp = openai_client.completions.create(stop=[stop], **kw)
    assert resp.choices[0].text == text[:text.find(stop)]
    assert resp.choices[0].finish_reason == "stop"


def test_errors_are_typed_sdk_exceptions(server, openai_client):
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with pytest.raises(openai.BadRequestError, match="must not be empty"):
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[])
    with pytest.raises(openai.BadRequestError, match="unknown role"):
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "wizard", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        openai_client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=100000)
    with pytest.raises(openai.BadRequestError, match="images are not supported yet"):
        openai_client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    with pytest.raises(openai.BadRequestError, match="temperature"):
        openai_client.chat.completions.create(model=MODEL_NAME, messages=USER, temperature="hot")
    with pytest.raises(openai.NotFoundError):
        openai_client.chat.completions.create(model="gpt-nope", messages=USER)
    h = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    r = httpx.post(server.url + "/v1/chat/completions", content=b"{oops", headers=h)
    assert r.status_code == 400 and "invalid JSON" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/chat/completions", content=b"x" * (2 << 20), headers=h)
    assert r.status_code == 413 and "limit" in r.json()["error"]["message"]
    # Still serving.
    assert openai_client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=2).usage.completion_tokens >= 1
