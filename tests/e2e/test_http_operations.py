"""Operations of `sparkserve serve`: /health, /metrics (vLLM names under sparkserve:), continuous
batching (16 concurrent greedy requests equal their sequential outputs and share forward steps),
64 concurrent streaming clients, clients that disconnect mid-stream, and SIGTERM draining."""
import concurrent.futures as cf
import re
import signal
import socket
import subprocess
import time

import httpx

from conftest import API_KEY, BACKEND, MODEL_NAME, Server

H = {"Authorization": f"Bearer {API_KEY}"}


def metric(server, name):
    text = httpx.get(server.url + "/metrics").text
    m = re.search(r"^" + re.escape(name) + r"(\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    assert m, f"{name} missing from /metrics"
    return float(m.group(2))


def chat(server, content, max_tokens=8, stream=False):
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "stream": stream}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, headers=H, timeout=120)
    assert r.status_code == 200, r.text
    return r


def test_health_is_open_and_metrics_have_vllm_names(server):
    assert httpx.get(server.url + "/health").status_code == 200  # no API key needed
    chat(server, "hello")
    text = httpx.get(server.url + "/metrics").text
    for name in ["sparkserve:time_to_first_token_seconds_bucket", "sparkserve:time_per_output_token_seconds_count",
                 "sparkserve:e2e_request_latency_seconds_sum", "sparkserve:num_requests_running",
                 "sparkserve:num_requests_waiting", "sparkserve:prompt_tokens_total",
                 "sparkserve:generation_tokens_total", "sparkserve:iteration_tokens_total_bucket",
                 "sparkserve:kv_cache_usage_perc", 'sparkserve:request_success_total{finished_reason="length"',
                 "sparkserve:engine_steps_total"]:
        assert name in text, name
    assert metric(server, "sparkserve:generation_tokens_total") >= 8


def test_concurrent_greedy_requests_equal_sequential_and_share_steps(server):
    prompts = [f"hello {w} world" for w in ["ka", "to", "ri", "me", "su", "na", "lo", "pe",
                                             "vi", "da", "the", "and", "ing", "er", "on", "at"]]
    sequential = [chat(server, p, 12).json()["choices"][0]["message"] for p in prompts]
    steps_before = metric(server, "sparkserve:engine_steps_total")
    with cf.ThreadPoolExecutor(16) as pool:
        concurrent = list(pool.map(lambda p: chat(server, p, 12).json()["choices"][0]["message"], prompts))
    steps = metric(server, "sparkserve:engine_steps_total") - steps_before
    assert concurrent == sequential
    # 16 requests x 12 tokens alone would take >= 16 * 12 steps; batched they share forwards.
    assert steps < 16 * 12, steps


def test_64_streaming_clients_complete(server):
    def one(i):
        done = 0
        for _ in range(2):
            r = chat(server, f"client {i}", 6, stream=True)
            assert r.text.rstrip().endswith("data: [DONE]")
            done += 1
        return done
    with cf.ThreadPoolExecutor(64) as pool:
        assert sum(pool.map(one, range(64))) == 128
    assert metric(server, "sparkserve:num_requests_running") == 0


def test_disconnecting_clients_free_their_slots(server):
    body = ('{"model": "%s", "messages": [{"role": "user", "content": "bye"}], "max_tokens": 200, '
            '"ignore_eos": true, "stream": true}' % MODEL_NAME).encode()
    socks = []
    for _ in range(10):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert s.recv(64).startswith(b"HTTP/1.1 200")
        socks.append(s)
    for s in socks:
        s.close()
    deadline = time.time() + 10
    while metric(server, "sparkserve:num_requests_running") != 0 or metric(server, "sparkserve:num_requests_waiting") != 0:
        assert time.time() < deadline, "cancelled requests still running"
        time.sleep(0.05)
    assert metric(server, "sparkserve:num_free_slots") == metric(server, "sparkserve:num_total_slots")
    chat(server, "still serving")


def test_sigterm_drains_streams_and_refuses_new_requests(model_dir):
    import threading
    # The streams must outlast the signal: on the CUDA backend the tiny model decodes ~10x faster.
    max_tokens = 800 if BACKEND == "cuda" else 200
    s = Server(model_dir, max_seq_len=max_tokens + 56)
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}], "max_tokens": max_tokens, "n": 8,
            "ignore_eos": True, "stream": True}
    started = threading.Event()
    signalled = False

    def stream(_):
        with httpx.stream("POST", s.url + "/v1/chat/completions", json=body, headers=H, timeout=120) as r:
            text = ""
            for chunk in r.iter_text():
                started.set()
                text += chunk
            return r.status_code, text

    try:
        with cf.ThreadPoolExecutor(4) as pool:  # each request is ~0.2 s of work for the tiny model
            futs = [pool.submit(stream, i) for i in range(4)]
            assert started.wait(10)
            s.proc.send_signal(signal.SIGTERM)
            signalled = True
            time.sleep(0.02)
            r = httpx.post(s.url + "/v1/chat/completions", headers=H,
                           json={"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}]})
            assert r.status_code == 503 and "shutting down" in r.json()["error"]["message"]
            results = [f.result(timeout=60) for f in futs]
        # Requests accepted before the signal finish whole; any that arrived later were refused.
        assert any(status == 200 for status, _ in results)
        for status, text in results:
            if status == 200:
                assert text.rstrip().endswith("data: [DONE]")
                assert text.count('"finish_reason":"length"') == 8
            else:
                assert status == 503 and "shutting down" in text
    finally:
        if signalled:  # let the drain finish: a second SIGTERM (stop()) would exit at once, non-zero
            try:
                s.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        assert s.stop() == 0, s.stderr
