"""Agent loops through the official `openai` and `anthropic` SDKs against `sparkserve serve` on the
scripted tiny models (tests/e2e/scripted_model.py), one per chat-template family (Qwen3.5 XML tool
calls, Qwen3 JSON tool calls), streaming and not, used the way agent frameworks use them:

  round 1  tools offered, thinking off           -> a real get_weather call, no text (content null)
  round 2  the SDK's own returned message and the tool result appended; tool_choice required /
           Anthropic "any"                       -> a real get_time call
  round 3  both results appended, thinking on    -> reasoning, then the answer

Each round's prompt must be the Hugging Face rendering (transformers-configured jinja2, the
`jinja_hf_oracle`) of the history with a null assistant content given as "" (the template cannot
take null: the Qwen3 one fails on `'</think>' in None`). Also here: the reasoning split with
thinking on and off, switched by chat_template_kwargs, reasoning_effort or Anthropic `thinking`
(the Qwen3.5 template opens <think> in the prompt, so the output starts inside the reasoning and
holds only </think>), and a batch /v1/completions request whose prompts end at different
chain starts.

Expected texts come from the script (what the model was built to write); reasoning and content
split the way vLLM's Qwen3 parser does (partition on the tags, nothing stripped).
"""
import json
import subprocess

import httpx
import pytest
from tokenizers import Tokenizer

import jinja_hf_oracle
from conftest import API_KEY, MODEL_NAME, RUNNER_FLAGS, SPARKSERVE, Server
from scripted_model import ANSWER, REASONING, THINKING_OFF, THINKING_ON, TOOL_FORCED, TOOLS

USER = {"role": "user", "content": "What is the weather in Paris?"}
RESULTS = {"get_weather": "sunny, 21 C", "get_time": "14:05"}
ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(scope="module", params=["qwen3_5", "qwen3"])
def scripted(request, scripted_models):
    script = scripted_models[request.param]
    s = Server(script.model_dir, "--output-parser", script.output_parser, max_seq_len=4096)
    yield script, s
    assert s.stop() == 0, s.stderr


@pytest.fixture()
def openai_client(scripted):
    import openai
    return openai.OpenAI(base_url=scripted[1].url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture()
def anthropic_client(scripted):
    import anthropic
    return anthropic.Anthropic(base_url=scripted[1].url, api_key=API_KEY, max_retries=0, timeout=60)


def tokenizer(script):
    return Tokenizer.from_file(script.model_dir + "/tokenizer.json")


def oracle_prompt_tokens(script, messages, forced=False, thinking=True):
    """Prompt length of the chat as transformers renders it (null assistant content as "")."""
    history = []
    for m in messages:
        m = dict(m)
        if m["role"] == "assistant" and m.get("content") is None:
            m["content"] = ""
        history.append(m)
    request = {"messages": history, "tools": TOOLS, "add_generation_prompt": True}
    if not thinking or forced:
        request["enable_thinking"] = False
    text = jinja_hf_oracle.apply_chat_template(script.model_dir, request)
    n = len(tokenizer(script).encode(text, add_special_tokens=False).ids)
    return n + (len(tokenizer(script).encode("<tool_call>\n", add_special_tokens=False).ids) if forced else 0)


def run_ids(script, ids, max_new=16):
    out = subprocess.run([SPARKSERVE, "run", script.model_dir, "--ids", ",".join(map(str, ids)), "--max-new",
                          str(max_new), "--json", *RUNNER_FLAGS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("start", [THINKING_ON, THINKING_OFF, TOOL_FORCED])
def test_greedy_run_follows_the_script(scripted, start):
    """The checkpoint itself (no HTTP): `sparkserve run` from a prompt ending at the start token."""
    script, _ = scripted
    tok = tokenizer(script)
    ids = tok.encode("What is the weather in Paris?").ids + [script.start_ids[start]]
    out = run_ids(script, ids)
    assert out["ids"][-1] == tok.token_to_id("<|im_end|>")
    assert tok.decode(out["ids"], skip_special_tokens=False) == script.texts[start] + "<|im_end|>"


def tool_result_message(call):
    return {"role": "tool", "tool_call_id": call.id, "content": RESULTS[call.function.name]}


def assert_openai_call(script, message, start):
    name, args = script.calls[start]
    assert message.content in (None, "")  # the SDK's own field: null whole, "" assembled from a stream
    assert len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.type == "function" and call.id
    assert (call.function.name, json.loads(call.function.arguments)) == (name, args)
    return call


class Accumulated:
    """A chat stream folded into a message dict, as agent frameworks do (content null when none)."""

    def __init__(self, stream):
        content, reasoning, calls, self.finish_reason = [], [], {}, None
        for chunk in stream:
            for choice in chunk.choices:
                d = choice.delta
                content.append(d.content or "")
                reasoning.append(getattr(d, "reasoning_content", None) or "")
                for tc in d.tool_calls or []:
                    c = calls.setdefault(tc.index, {"id": "", "type": "function",
                                                    "function": {"name": "", "arguments": ""}})
                    c["id"] = tc.id or c["id"]
                    if tc.function and tc.function.name:
                        c["function"]["name"] += tc.function.name
                    if tc.function and tc.function.arguments:
                        c["function"]["arguments"] += tc.function.arguments
                self.finish_reason = choice.finish_reason or self.finish_reason
        self.content = "".join(content)
        self.reasoning = "".join(reasoning)
        self.message = {"role": "assistant", "content": self.content or None}
        if calls:
            self.message["tool_calls"] = [calls[i] for i in sorted(calls)]


def openai_round(client, mode, messages, **kw):
    """(message to append, content, reasoning, tool calls as (name, args), finish_reason, prompt_tokens)."""
    kw = dict(model=MODEL_NAME, messages=messages, tools=TOOLS, temperature=0, max_tokens=64, **kw)
    if mode == "create":
        resp = client.chat.completions.create(**kw)
        m = resp.choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls or []]
        return (m, m.content, getattr(m, "reasoning_content", None), calls, resp.choices[0].finish_reason,
                resp.usage.prompt_tokens)
    if mode == "stream-helper":
        with client.chat.completions.stream(stream_options={"include_usage": True}, **kw) as s:
            final = s.get_final_completion()
        m = final.choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls or []]
        return (m, m.content, getattr(m, "reasoning_content", None), calls, final.choices[0].finish_reason,
                final.usage.prompt_tokens)
    assert mode == "stream-deltas"
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    acc = Accumulated(chunks)
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in acc.message.get("tool_calls", [])]
    return acc.message, acc.message["content"], acc.reasoning or None, calls, acc.finish_reason, \
        chunks[-1].usage.prompt_tokens


def as_dict(message):
    """The history entry the oracle renders: what the SDK sends for `message` (tool-call arguments as
    objects, as the server and vLLM hand them to the template)."""
    m = message if isinstance(message, dict) else message.model_dump(exclude_none=True)
    out = {"role": "assistant", "content": m.get("content")}
    if m.get("tool_calls"):
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["function"]["name"],
                                           "arguments": json.loads(c["function"]["arguments"])}}
                             for c in m["tool_calls"]]
    return out


@pytest.mark.parametrize("mode", ["create", "stream-helper", "stream-deltas"])
def test_openai_three_round_tool_loop(scripted, openai_client, mode):
    script, _ = scripted
    messages, rendered = [USER], [USER]

    # Round 1: thinking off -> get_weather, no text.
    msg, content, reasoning, calls, finish, prompt = openai_round(openai_client, mode, messages, extra_body=NO_THINKING)
    assert calls == [script.calls[THINKING_OFF]] and finish == "tool_calls"
    assert content in (None, "") and reasoning is None
    assert prompt == oracle_prompt_tokens(script, rendered, thinking=False)
    if mode == "create":
        assert msg.content is None  # exactly what every agent loop appends next
    call_id = msg.tool_calls[0].id if not isinstance(msg, dict) else msg["tool_calls"][0]["id"]
    messages += [msg, {"role": "tool", "tool_call_id": call_id, "content": RESULTS["get_weather"]}]
    rendered += [as_dict(msg), messages[-1]]

    # Round 2: the SDK's message object in the history; a required call -> get_time.
    msg, content, reasoning, calls, finish, prompt = openai_round(openai_client, mode, messages, tool_choice="required")
    assert calls == [script.calls[TOOL_FORCED]] and finish == "tool_calls"
    assert content in (None, "") and reasoning is None
    assert prompt == oracle_prompt_tokens(script, rendered, forced=True)
    call_id = msg.tool_calls[0].id if not isinstance(msg, dict) else msg["tool_calls"][0]["id"]
    messages += [msg, {"role": "tool", "tool_call_id": call_id, "content": RESULTS["get_time"]}]
    rendered += [as_dict(msg), messages[-1]]

    # Round 3: thinking on -> reasoning, then the answer.
    msg, content, reasoning, calls, finish, prompt = openai_round(openai_client, mode, messages)
    assert (reasoning, content, calls, finish) == (REASONING, "\n\n" + ANSWER, [], "stop")
    assert prompt == oracle_prompt_tokens(script, rendered)


def anthropic_round(client, stream, messages, **kw):
    kw = {**dict(model=MODEL_NAME, messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=64,
                 extra_body={"temperature": 0}), **kw}
    if not stream:
        return client.messages.create(**kw)
    with client.messages.stream(**kw) as s:
        return s.get_final_message()


def anthropic_history(messages):
    """The Anthropic history as the chat the template renders (tool_result blocks -> tool messages)."""
    out = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], str):
            out.append(m)
        elif m["role"] == "user":
            out += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]} for b in m["content"]]
        else:
            calls = [{"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.input}}
                     for b in m["content"] if b.type == "tool_use"]
            text = "".join(b.text for b in m["content"] if b.type == "text")
            out.append({"role": "assistant", "content": text, "tool_calls": calls})
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_anthropic_three_round_tool_loop(scripted, anthropic_client, stream):
    script, _ = scripted
    messages = [USER]
    for round_kw, start in (({}, THINKING_OFF), ({"tool_choice": {"type": "any"}}, TOOL_FORCED)):
        resp = anthropic_round(anthropic_client, stream, messages, **round_kw)
        assert resp.stop_reason == "tool_use"
        assert [b.type for b in resp.content] == ["tool_use"]  # an assistant turn of tool_use only
        block = resp.content[0]
        assert (block.name, block.input) == script.calls[start] and block.id.startswith("toolu_")
        assert resp.usage.input_tokens == oracle_prompt_tokens(script, anthropic_history(messages),
                                                               forced=start == TOOL_FORCED, thinking=False)
        messages += [{"role": "assistant", "content": resp.content},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id,
                                                   "content": RESULTS[block.name]}]}]
    resp = anthropic_round(anthropic_client, stream, messages, thinking={"type": "enabled", "budget_tokens": 1024},
                           max_tokens=2048)
    assert resp.stop_reason == "end_turn"
    assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in resp.content] == \
        [("thinking", REASONING), ("text", "\n\n" + ANSWER)]
    assert resp.usage.input_tokens == oracle_prompt_tokens(script, anthropic_history(messages))


# (request fields, thinking on?) for the OpenAI chat API.
OPENAI_SWITCHES = {
    "default": ({}, True),
    "kwargs-on": ({"extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}, True),
    "kwargs-off": ({"extra_body": NO_THINKING}, False),
    "effort-high": ({"reasoning_effort": "high"}, True),
    "effort-none": ({"reasoning_effort": "none"}, False),
    # chat_template_kwargs say it explicitly: they win over reasoning_effort.
    "effort-none-kwargs-on": ({"reasoning_effort": "none",
                               "extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}, True),
}


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("switch", sorted(OPENAI_SWITCHES))
def test_openai_reasoning_split(scripted, openai_client, switch, stream):
    """Thinking on: the output starts inside the reasoning the prompt opened and holds only </think>;
    all of the reasoning must come back as reasoning_content. Off: everything is content."""
    script, _ = scripted
    kw, thinking = OPENAI_SWITCHES[switch]
    req = dict(model=MODEL_NAME, messages=[USER], temperature=0, max_tokens=64, **kw)
    if stream:
        acc = Accumulated(openai_client.chat.completions.create(stream=True, **req))
        got = (acc.reasoning or None, acc.content, acc.finish_reason)
    else:
        resp = openai_client.chat.completions.create(**req)
        m = resp.choices[0].message
        got = (getattr(m, "reasoning_content", None), m.content, resp.choices[0].finish_reason)
    if thinking:
        assert got == (REASONING, "\n\n" + ANSWER, "stop")
    else:  # no tools offered: the call the model writes is plain text
        assert got == (None, script.texts[THINKING_OFF], "stop")


ANTHROPIC_SWITCHES = {
    "absent": ({}, False),
    "enabled": ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, True),
    "disabled": ({"thinking": {"type": "disabled"}}, False),
    "adaptive": ({"thinking": {"type": "adaptive"}}, True),
}


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("switch", sorted(ANTHROPIC_SWITCHES))
def test_anthropic_reasoning_split(scripted, anthropic_client, switch, stream):
    script, _ = scripted
    kw, thinking = ANTHROPIC_SWITCHES[switch]
    req = dict(model=MODEL_NAME, messages=[USER], max_tokens=2048, extra_body={"temperature": 0}, **kw)
    if stream:
        with anthropic_client.messages.stream(**req) as s:
            msg = s.get_final_message()
    else:
        msg = anthropic_client.messages.create(**req)
    blocks = [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in msg.content]
    if thinking:
        assert blocks == [("thinking", REASONING), ("text", "\n\n" + ANSWER)]
    else:
        assert blocks == [("text", script.texts[THINKING_OFF])]
    assert msg.stop_reason == "end_turn"


def test_batch_completions_one_choice_per_prompt(scripted, openai_client):
    """A list of prompts (text and token ids): one choice per prompt, each the script's chain."""
    script, _ = scripted
    tok = tokenizer(script)
    starts = [THINKING_OFF, THINKING_ON, TOOL_FORCED]
    prompts = [tok.encode("What is the weather?").ids + [script.start_ids[s]] for s in starts]
    resp = openai_client.completions.create(model=MODEL_NAME, prompt=prompts, max_tokens=32, temperature=0)
    assert [c.index for c in resp.choices] == [0, 1, 2]
    assert [c.text for c in resp.choices] == [script.texts[s] for s in starts]
    assert [c.finish_reason for c in resp.choices] == ["stop"] * 3
    assert resp.usage.prompt_tokens == sum(len(p) for p in prompts)
    texts = [tok.decode(p, skip_special_tokens=False) for p in prompts]
    resp = openai_client.completions.create(model=MODEL_NAME, prompt=texts, max_tokens=32, temperature=0,
                                            extra_body={"add_special_tokens": False})
    assert [c.text for c in resp.choices] == [script.texts[s] for s in starts]


def test_tokenize_ends_prompts_at_the_script_start(scripted):
    """The server's own rendering ends each kind of generation prompt at the token the chain is keyed on."""
    script, server = scripted
    h = {"Authorization": f"Bearer {API_KEY}"}
    for kw, start in (({}, THINKING_ON), (NO_THINKING, THINKING_OFF)):
        r = httpx.post(server.url + "/tokenize", headers=h, json={"messages": [USER], "tools": TOOLS, **kw})
        assert r.status_code == 200, r.text
        assert r.json()["tokens"][-1] == script.start_ids[start]
