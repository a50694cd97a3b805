"""Prefix cache end to end: a 3-turn chat through the OpenAI and Anthropic APIs resumes turns 2 and 3
from the cache (cached_tokens at least the previous turn's prompt up to its last complete message) and
answers as a `--no-prefix-cache` server does; 8 users sharing a long system prompt all hit it; a
prompt shorter than the checkpoint interval hits on its repeat; the same with `--spec ngram`; vLLM's
prefix_cache_* counters count tokens. The oracle is a server without the cache (a cold prefill)."""
import concurrent.futures
import os

import httpx
import pytest

from conftest import API_KEY, MODEL_NAME, NODES, Server

SYSTEM = ("You are a careful assistant for the kato rime suna company. " * 16).strip()
USERS = ["hello world, tell me about the karito", "and what about the menalo", "thanks, now summarise it"]
H = {"Authorization": f"Bearer {API_KEY}"}
GEN = {"max_tokens": 10, "temperature": 0}


def _nodes_flags(tmp_path_factory, name):
    """Tensor-parallel servers (SPARKSERVE_E2E_NODES=N): each server here gets its own N nodes."""
    if NODES == 0:
        return [], []
    from cluster_util import Node, node_flags, write_token
    work = tmp_path_factory.mktemp(name)
    token = write_token(work / "token", "e2e-cluster-token")
    nodes = [Node(work, f"node{i}", token_file=token) for i in range(NODES)]
    return nodes, node_flags(nodes, token)


def _server(model_dir, tmp_path_factory, name, *flags):
    nodes, extra = _nodes_flags(tmp_path_factory, name)
    s = Server(model_dir, *extra, *flags, max_seq_len=2048)
    s.nodes = nodes
    return s


def _stop(s):
    assert s.stop() == 0, s.stderr
    for n in s.nodes:
        assert n.stop() == 0, n.text()


@pytest.fixture(scope="module")
def cached(model_dir, tmp_path_factory):
    s = _server(model_dir, tmp_path_factory, "cached", "--prefix-checkpoint-interval", "64")
    yield s
    _stop(s)


@pytest.fixture(scope="module")
def cold(model_dir, tmp_path_factory):
    s = _server(model_dir, tmp_path_factory, "cold", "--no-prefix-cache")
    yield s
    _stop(s)


def chat(server, messages, **kw):
    r = httpx.post(server.url + "/v1/chat/completions", headers=H, timeout=120,
                   json={"model": MODEL_NAME, "messages": messages, **GEN, **kw})
    assert r.status_code == 200, r.text
    j = r.json()
    return j["choices"][0]["message"]["content"] or "", j["usage"]


def anthropic(server, messages):
    system, rest = messages[0]["content"], messages[1:]
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": API_KEY}, timeout=120,
                   json={"model": MODEL_NAME, "system": system, "messages": rest, "max_tokens": 10,
                         "temperature": 0})
    assert r.status_code == 200, r.text
    j = r.json()
    text = "".join(b.get("text", "") or b.get("thinking", "") for b in j["content"])
    return text, j["usage"]


def tokens(server, messages, add_generation_prompt):
    r = httpx.post(server.url + "/tokenize", headers=H,
                   json={"model": MODEL_NAME, "messages": messages, "add_generation_prompt": add_generation_prompt})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def metric(server, name):
    import re
    text = httpx.get(server.url + "/metrics").text
    m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
    assert m, f"{name} not on /metrics"
    return float(m.group(1))


def three_turns(server, send, system):
    """Runs the 3 turns; returns (replies, cached counts, the previous turn's complete-message lengths)."""
    messages = [{"role": "system", "content": system}]
    replies, cached, previous = [], [], []
    for user in USERS:
        messages.append({"role": "user", "content": user})
        text, cached_tokens = send(server, messages)
        replies.append(text)
        cached.append(cached_tokens)
        previous.append(len(tokens(server, messages, False)))
        messages.append({"role": "assistant", "content": text})
    return replies, cached, previous


def openai_send(server, messages):
    text, usage = chat(server, messages)
    return text, usage["prompt_tokens_details"]["cached_tokens"]


def anthropic_send(server, messages):
    text, usage = anthropic(server, messages)
    return text, usage["cache_read_input_tokens"]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_three_turn_chat_hits_on_turns_two_and_three(cached, cold, api):
    send = openai_send if api == "openai" else anthropic_send
    system = f"[{api}] " + SYSTEM
    want, _, _ = three_turns(cold, send, system)
    got, hits, previous = three_turns(cached, send, system)
    assert got == want
    assert hits[0] == 0
    for turn in (1, 2):
        assert hits[turn] >= previous[turn - 1], (turn, hits, previous)


def test_eight_users_share_a_long_system_prompt(cached, cold):
    system = "[eight] " + SYSTEM
    users = [f"user {i} asks about the {w}" for i, w in enumerate(["karito", "menalo", "supe", "vida", "lori",
                                                                     "nato", "peme", "suri"])]
    msgs = [[{"role": "system", "content": system}, {"role": "user", "content": u}] for u in users]
    # Where the system message ends: what two different user turns after it share.
    a = tokens(cached, [msgs[0][0], {"role": "user", "content": "a"}], False)
    b = tokens(cached, [msgs[0][0], {"role": "user", "content": "b"}], False)
    shared = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    assert shared > 150
    first, usage = chat(cached, msgs[0])
    assert first == chat(cold, msgs[0])[0]
    with concurrent.futures.ThreadPoolExecutor(7) as pool:
        got = list(pool.map(lambda m: chat(cached, m), msgs[1:]))
        want = list(pool.map(lambda m: chat(cold, m)[0], msgs[1:]))
    assert [g[0] for g in got] == want
    for i, (_, u) in enumerate(got):
        assert u["prompt_tokens_details"]["cached_tokens"] >= shared, (i, u)


def test_a_prompt_shorter_than_the_interval_hits_on_its_repeat(model_dir, cold, tmp_path_factory):
    s = _server(model_dir, tmp_path_factory, "interval", "--prefix-checkpoint-interval", "1024")
    try:
        prompt = "the karito and the menalo are vida lori"
        body = {"model": MODEL_NAME, "prompt": prompt, **GEN}
        outs = []
        for _ in range(2):
            r = httpx.post(s.url + "/v1/completions", headers=H, json=body, timeout=60)
            assert r.status_code == 200, r.text
            outs.append(r.json())
        n = outs[0]["usage"]["prompt_tokens"]
        assert n < 1024
        assert outs[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert outs[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == n - 1
        ref = httpx.post(cold.url + "/v1/completions", headers=H, json=body, timeout=60).json()
        assert [o["choices"][0]["text"] for o in outs] == [ref["choices"][0]["text"]] * 2
        # A short chat: its repeat resumes at its last complete message.
        msgs = [{"role": "user", "content": "hello there"}]
        first, second = chat(s, msgs), chat(s, msgs)
        assert first[0] == second[0] == chat(cold, msgs)[0]
        assert second[1]["prompt_tokens_details"]["cached_tokens"] >= len(tokens(s, msgs, False))
        assert metric(s, "sparkserve:prefix_cache_hits_total") > 0
        assert metric(s, "sparkserve:prefix_cache_queries_total") >= 4 * n
        assert metric(s, "sparkserve:prefix_cache_device_entries") > 0
    finally:
        _stop(s)


def test_speculative_decoding_with_the_cache_answers_as_cold(model_dir, cold, tmp_path_factory):
    s = _server(model_dir, tmp_path_factory, "spec", "--spec", "ngram", "--spec-tokens", "3",
                "--spec-policy", "fixed", "--prefix-checkpoint-interval", "64")
    try:
        system = "[spec] " + SYSTEM
        want, _, _ = three_turns(cold, openai_send, system)
        got, hits, previous = three_turns(s, openai_send, system)
        assert got == want
        for turn in (1, 2):
            assert hits[turn] >= previous[turn - 1], (turn, hits, previous)
    finally:
        _stop(s)


def test_no_prefix_cache_reports_nothing_cached(cold):
    msgs = [{"role": "user", "content": "hello again"}]
    chat(cold, msgs)
    assert chat(cold, msgs)[1]["prompt_tokens_details"]["cached_tokens"] == 0
    assert metric(cold, "sparkserve:prefix_cache_hits_total") == 0


def test_bench_serve_multiturn_reports_ttft_and_hits_per_turn(cached, cold, tmp_path):
    import json
    import subprocess
    from conftest import SPARKSERVE
    results = {}
    for name, s in (("cached", cached), ("cold", cold)):
        out = tmp_path / f"{name}.json"
        r = subprocess.run([SPARKSERVE, "bench", "serve", "--url", s.url, "--api-key", API_KEY, "--dataset", "multiturn",
                            "--num-prompts", "3", "--turns", "3", "--prefix-len", "150", "--random-input-len", "12",
                            "--random-output-len", "4", "--no-progress", "--seed", "7", "--save-result", str(out)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "hit rate" in r.stdout
        results[name] = json.loads(out.read_text())
    turns = results["cached"]["turns"]
    assert [t["turn"] for t in turns] == [0, 1, 2] and all(t["failed"] == 0 and t["requests"] == 3 for t in turns)
    assert all(t["mean_ttft_ms"] > 0 for t in turns)
    assert turns[1]["hit_rate"] > 0.5 and turns[2]["hit_rate"] > 0.5, turns
    assert results["cold"]["hit_rate"] == 0
