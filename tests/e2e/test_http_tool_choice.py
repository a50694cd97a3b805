"""Forced tool_choice on `sparkserve serve` with the real Qwen3.5 chat template and tokenizer: the
prompt the model gets is the chat rendered with thinking off plus the opening of the call (usage
counts it). The rest of the call is constrained by the tool-call grammar (structured outputs), so
the tiny random model's output continues the call as the grammar allows; cut by max_tokens, the
unfinished call comes back as text, forced opening included."""

import httpx
import pytest
from tokenizers import Tokenizer

from conftest import API_KEY, MODEL_NAME, Server

USER = [{"role": "user", "content": "hello world"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def server(model_dir):
    # The template's tool preamble alone is ~800 tokens of the tiny tokenizer: a longer context.
    s = Server(model_dir, max_seq_len=1024)
    yield s
    assert s.stop() == 0, s.stderr

# openai_client / anthropic_client (conftest) talk to this module's `server`: pytest resolves a
# fixture's dependency by the nearest definition.


def prompt_ids(server, **kw):
    r = httpx.post(server.url + "/tokenize", json={"messages": USER, "tools": TOOLS, **kw},
                   headers={"Authorization": f"Bearer {API_KEY}"})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def test_named_choice_prompt_ends_with_the_call_opening(server, model_dir, openai_client):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    forced_text = "<tool_call>\n<function=get_weather>\n"
    resp = openai_client.chat.completions.create(
        model=MODEL_NAME, messages=USER, tools=TOOLS, max_tokens=8, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, extra_body={"ignore_eos": True})
    base = prompt_ids(server, chat_template_kwargs={"enable_thinking": False})
    assert tok.decode(base, skip_special_tokens=False).endswith("</think>\n\n")
    forced = tok.encode(forced_text).ids
    assert resp.usage.prompt_tokens == len(base) + len(forced)
    assert resp.usage.completion_tokens == 8
    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "length"
    assert not msg.tool_calls
    got = (getattr(msg, "reasoning_content", None) or "") + (msg.content or "")
    assert got.startswith(forced_text), got
    # Unconstrained, the random model continues with junk; the grammar allows only a parameter of
    # get_weather or the end of the function next.
    rest = got[len(forced_text):]
    allowed = ["<parameter=city>\n", "</function>"]
    assert rest and any(a.startswith(rest) or rest.startswith(a) for a in allowed), rest


def test_anthropic_any_counts_the_forced_opening(server, model_dir, anthropic_client):
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tools = [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]
    base = prompt_ids(server, chat_template_kwargs={"enable_thinking": False})
    want = len(base) + len(tok.encode("<tool_call>\n").ids)
    kw = dict(model=MODEL_NAME, messages=USER, tools=tools, tool_choice={"type": "any"})
    assert anthropic_client.messages.count_tokens(**kw).input_tokens == want
    msg = anthropic_client.messages.create(max_tokens=4, extra_body={"temperature": 0}, **kw)
    assert msg.usage.input_tokens == want
    assert msg.stop_reason == "max_tokens"
