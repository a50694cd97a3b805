"""Tensor parallelism across processes on loopback: the real `sparkserve` head with real
`sparkserve-node` daemons (CPU backend, Gloo), every test bounded in time.

- `score` logits of TP = 2 and 4 equal TP = 1 on the golden fixtures and TP = 2 on the demo models
  (relative error <= 1e-5), and greedy `run` output is the same; the tiny demo shape's 2 GDN key heads
  refuse TP = 4 with the count and the config field;
- seeded sampling (temperature, top-k, top-p, min-p, penalties) over the vocabulary split across two
  ranks draws the same tokens as one rank;
- a second start ships 0 weight bytes; a corrupted cached blob is fetched again;
- a wrong token is refused with a message on both sides;
- SIGKILL of a node mid-stream ends the streams with errors within 5 s (OpenAI and Anthropic), the
  head stays up with /health 503 and new requests 503 + Retry-After, and it serves again by itself once
  the node is back; a hung node (SIGSTOP) fails the stream within 5 s too and is re-synced once it
  wakes; a head killed mid-stream leaves the node ready for a new head;
- cluster-check prints its table and says the figures are Gloo over TCP on loopback.
"""
import json
import os
import signal
import subprocess
import threading
import time

import httpx
import numpy as np
import pytest

from cluster_util import Node, metric, node_flags, write_token
from conftest import API_KEY, GOLDEN, MODEL_NAME, SPARKSERVE, Server

GOLDEN_ROOT = os.path.dirname(GOLDEN)
TOKEN = "tp-e2e-token"


@pytest.fixture()
def work(tmp_path):
    return tmp_path


@pytest.fixture()
def token_file(work):
    return write_token(work / "token", TOKEN)


def run(*args, timeout=120):
    return subprocess.run([SPARKSERVE, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def score(model, ids, out, *extra):
    r = run("score", model, "--ids", ",".join(map(str, ids)), "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    return np.load(out)


def rel_err(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


def greedy(model, ids, *extra):
    r = run("run", model, "--ids", ",".join(map(str, ids)), "--max-new", "16", "--ignore-eos", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["ids"]


@pytest.mark.timeout(240)
def test_score_and_greedy_on_two_and_four_ranks_equal_one(work, token_file):
    ids = [3, 17, 250, 9, 88, 401, 5, 5, 130, 64, 7, 300]
    for fixture, node_counts in (("text_tied", (1,)), ("vl_tied", (1, 3))):
        model = os.path.join(GOLDEN_ROOT, fixture)
        one = score(model, ids, work / f"{fixture}-1.npy")
        one_ids = greedy(model, ids)
        for n in node_counts:
            nodes = [Node(work, f"{fixture}-{n}-{i}", token_file=token_file) for i in range(n)]
            try:
                many = score(model, ids, work / f"{fixture}-{n + 1}.npy", *node_flags(nodes, token_file))
                many_ids = greedy(model, ids, *node_flags(nodes, token_file))
            finally:
                for node in nodes:
                    node.stop()
            assert many.shape == one.shape
            assert rel_err(many, one) <= 1e-5, (fixture, n + 1)
            assert many_ids == one_ids, (fixture, n + 1)


@pytest.fixture(scope="module", params=["bf16", "nvfp4-mixed"])
def demo_model(request, tmp_path_factory):
    d = tmp_path_factory.mktemp("demo") / f"tiny-{request.param}"
    r = subprocess.run([SPARKSERVE, "demo-model", str(d), "--shape", "tiny", "--recipe", request.param, "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.timeout(120)
def test_demo_model_greedy_run_and_logits_equal_one_rank(work, token_file, demo_model):
    """The node gets its cut of the packed checkpoint (NVFP4 codes and scales for nvfp4-mixed)."""
    ids = [5, 6, 7, 8, 9, 10, 11, 12]
    base = run("run", demo_model, "--ids", ",".join(map(str, ids)), "--max-new", "16", "--ignore-eos", "--json")
    assert base.returncode == 0, base.stderr
    one = score(demo_model, ids, work / "demo-1.npy")
    node = Node(work, "demo", token_file=token_file)
    try:
        tp = run("run", demo_model, "--ids", ",".join(map(str, ids)), "--max-new", "16", "--ignore-eos", "--json",
                 *node_flags([node], token_file))
        two = score(demo_model, ids, work / "demo-2.npy", *node_flags([node], token_file))
    finally:
        node.stop()
    assert tp.returncode == 0, tp.stderr
    assert json.loads(tp.stdout)["ids"] == json.loads(base.stdout)["ids"]
    assert rel_err(two, one) <= 1e-5
    # Four ranks cannot split the tiny shape's 2 GDN key heads: refused before any node is asked.
    r = run("score", demo_model, "--ids", "1,2,3", "--nodes", "127.0.0.1:9,127.0.0.1:10,127.0.0.1:11")
    assert r.returncode == 1 and "does not divide linear_num_key_heads = 2" in r.stderr, r.stderr


SAMPLING_CASES = [
    {"temperature": 1.0},
    {"temperature": 0.8, "top_k": 12},
    {"temperature": 1.2, "top_p": 0.7},
    {"temperature": 1.0, "min_p": 0.2},
    {"temperature": 0.9, "presence_penalty": 1.5, "frequency_penalty": 0.8},
    {"temperature": 1.1, "repetition_penalty": 1.4, "top_k": 40, "top_p": 0.95, "min_p": 0.02},
]


@pytest.mark.timeout(150)
def test_sampling_over_the_split_vocabulary_draws_as_one_rank(work, token_file, model_dir):
    """Same seed, same draws: temperature, top-k, top-p, min-p and the penalties pick the same tokens on
    two ranks (each holding half of lm_head's vocabulary rows) as on one. The draws are
    discontinuous in the logits, so a wrong or reordered vocabulary slice changes them."""
    headers = {"Authorization": f"Bearer {API_KEY}"}

    def draws(url):
        out = []
        for case in SAMPLING_CASES:
            for seed in (1, 2, 3):
                body = {"model": MODEL_NAME, "prompt": "hello world, you are", "max_tokens": 24, "seed": seed,
                        "ignore_eos": True, **case}
                r = httpx.post(url + "/v1/completions", json=body, headers=headers, timeout=30)
                assert r.status_code == 200, r.text
                out.append(r.json()["choices"][0]["text"])
        return out

    one = Server(model_dir)
    try:
        expected = draws(one.url)
    finally:
        assert one.stop() == 0, one.stderr
    assert len(set(expected)) > len(SAMPLING_CASES), expected  # the cases and seeds really draw differently
    node = Node(work, "sampler", token_file=token_file)
    two = None
    try:
        two = start_server(model_dir, [node], token_file)
        assert metric(two.url, "sparkserve:tensor_parallel_ranks") == 2
        got = draws(two.url)
    finally:
        if two is not None:
            assert two.stop() == 0, two.stderr
        node.stop()
    assert got == expected


def start_server(model_dir, nodes, token_file, *extra, **kw):
    return Server(model_dir, *node_flags(nodes, token_file), "--collective-timeout", "2", *extra, **kw)


def largest_blob(cache_dir):
    best, size = None, -1
    for root, _, files in os.walk(os.path.join(cache_dir, "blobs")):
        for f in files:
            p = os.path.join(root, f)
            if os.path.getsize(p) > size:
                best, size = p, os.path.getsize(p)
    return best, size


@pytest.mark.timeout(180)
def test_second_start_ships_nothing_and_a_corrupted_blob_is_fetched_again(work, token_file, model_dir):
    node = Node(work, "cache", token_file=token_file)
    try:
        s = start_server(model_dir, [node], token_file)
        sent = metric(s.url, "sparkserve:shard_bytes_sent_total")
        assert sent > 0
        assert metric(s.url, "sparkserve:shard_bytes_reused_total") == 0
        assert s.stop() == 0, s.stderr
        # A second head, the same node: nothing is shipped.
        s = start_server(model_dir, [node], token_file)
        assert metric(s.url, "sparkserve:shard_bytes_sent_total") == 0
        assert metric(s.url, "sparkserve:shard_bytes_reused_total") == sent
        assert s.stop() == 0, s.stderr
        # The node restarts: everything from its disk cache.
        node.stop()
        node.start()
        s = start_server(model_dir, [node], token_file)
        assert metric(s.url, "sparkserve:shard_bytes_sent_total") == 0
        assert s.stop() == 0, s.stderr
        # One blob corrupted on disk: it alone is fetched again.
        node.stop()
        blob, size = largest_blob(node.cache_dir)
        with open(blob, "r+b") as f:
            f.seek(size // 2)
            byte = f.read(1)
            f.seek(size // 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        node.start()
        s = start_server(model_dir, [node], token_file)
        assert metric(s.url, "sparkserve:shard_bytes_sent_total") == size
        assert s.stop() == 0, s.stderr
        assert "is corrupted" in node.text()
    finally:
        node.stop()


@pytest.mark.timeout(60)
def test_a_wrong_token_is_refused_with_a_message_on_both_sides(work, token_file, model_dir):
    node = Node(work, "guarded", token_file=token_file)
    wrong = write_token(work / "wrong", "not-the-token")
    try:
        r = run("serve", model_dir, "--host", "127.0.0.1", "--port", "0", *node_flags([node], wrong), timeout=60)
        assert r.returncode == 1
        assert "auth token mismatch" in r.stderr
        assert node.wait_for_log("refused head .*auth token mismatch", 5), node.text()
        assert TOKEN not in r.stderr and "not-the-token" not in r.stderr
        assert TOKEN not in node.text() and "not-the-token" not in node.text()
    finally:
        node.stop()


def stream_until_end(url, path, body, headers, first_event, result):
    """Streams one request; sets `first_event` after the first data line; stores (events, end time)."""
    events = []
    try:
        with httpx.stream("POST", url + path, json=body, headers=headers, timeout=30) as r:
            result["status"] = r.status_code
            for line in r.iter_lines():
                if line.startswith("data: ") or line.startswith("event: "):
                    events.append(line)
                    first_event.set()
    except httpx.HTTPError as e:
        events.append(f"transport error: {e}")
    result["events"] = events
    result["ended"] = time.time()
    first_event.set()


@pytest.mark.timeout(150)
def test_sigkill_of_a_node_mid_stream_errors_within_5s_and_the_head_recovers(work, token_file, model_dir):
    node = Node(work, "victim", token_file=token_file)
    s = None
    try:
        s = start_server(model_dir, [node], token_file, max_seq_len=4096)
        headers = {"Authorization": f"Bearer {API_KEY}", "x-api-key": API_KEY}
        openai_body = {"model": MODEL_NAME, "prompt": "hello", "max_tokens": 4000, "stream": True, "temperature": 0,
                       "ignore_eos": True}
        anthropic_body = {"model": MODEL_NAME, "max_tokens": 4000, "stream": True, "temperature": 0,
                          "messages": [{"role": "user", "content": "hello"}], "ignore_eos": True}
        started = [threading.Event(), threading.Event()]
        results = [{}, {}]
        threads = [
            threading.Thread(target=stream_until_end,
                             args=(s.url, "/v1/completions", openai_body, headers, started[0], results[0])),
            threading.Thread(target=stream_until_end,
                             args=(s.url, "/v1/messages", anthropic_body, headers, started[1], results[1])),
        ]
        for t in threads:
            t.start()
        for e in started:
            assert e.wait(30)
        time.sleep(0.3)
        killed_at = time.time()
        node.kill()
        for t in threads:
            t.join(30)
            assert not t.is_alive()
        openai_events, anthropic_events = results[0]["events"], results[1]["events"]
        for r in results:
            assert r["ended"] - killed_at < 5.0, r["ended"] - killed_at
        # OpenAI: an error object in the stream; Anthropic: an `error` event.
        assert any('"error"' in e and "tensor-parallel" in e for e in openai_events), openai_events[-3:]
        assert "event: error" in anthropic_events, anthropic_events[-3:]
        assert s.proc.poll() is None, "the head died"
        health = httpx.get(s.url + "/health")
        assert health.status_code == 503 and "degraded" in health.text, health.text
        r = httpx.post(s.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "hi", "max_tokens": 2},
                       headers=headers)
        assert r.status_code == 503 and r.headers.get("retry-after"), (r.status_code, r.text)
        # The node comes back on its port: the head re-syncs by itself within 30 s.
        node.start()
        back = time.time()
        while httpx.get(s.url + "/health").status_code != 200:
            assert time.time() - back < 30, httpx.get(s.url + "/health").text
            assert s.proc.poll() is None
            time.sleep(0.1)
        r = httpx.post(s.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "hi", "max_tokens": 4},
                       headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        assert metric(s.url, "sparkserve:cluster_syncs_total") == 2
    finally:
        if s is not None:
            s.stop()
        node.stop()


@pytest.mark.timeout(120)
def test_a_hung_node_fails_the_stream_within_5s_and_is_resynced_when_it_wakes(work, token_file, model_dir):
    node = Node(work, "sleeper", token_file=token_file)
    s = None
    try:
        s = start_server(model_dir, [node], token_file, max_seq_len=4096)
        headers = {"Authorization": f"Bearer {API_KEY}"}
        started, result = threading.Event(), {}
        body = {"model": MODEL_NAME, "prompt": "hello", "max_tokens": 4000, "stream": True, "ignore_eos": True}
        t = threading.Thread(target=stream_until_end, args=(s.url, "/v1/completions", body, headers, started, result))
        t.start()
        assert started.wait(30)
        hung_at = time.time()
        node.proc.send_signal(signal.SIGSTOP)  # alive, holding its sockets, answering nothing
        t.join(30)
        assert result["ended"] - hung_at < 5.0, result["ended"] - hung_at
        assert any('"error"' in e for e in result["events"]), result["events"][-3:]
        assert httpx.get(s.url + "/health").status_code == 503
        node.proc.send_signal(signal.SIGCONT)
        woke = time.time()
        while httpx.get(s.url + "/health").status_code != 200:
            assert time.time() - woke < 30, (httpx.get(s.url + "/health").text, node.text())
            time.sleep(0.1)
        r = httpx.post(s.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "hi", "max_tokens": 4},
                       headers=headers, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)
        if s is not None:
            s.stop()
        node.stop()


@pytest.mark.timeout(120)
def test_a_head_killed_mid_stream_leaves_the_node_ready_for_a_new_head(work, token_file, model_dir):
    node = Node(work, "survivor", token_file=token_file)
    first = second = None
    try:
        first = start_server(model_dir, [node], token_file, max_seq_len=4096)
        headers = {"Authorization": f"Bearer {API_KEY}"}
        started, result = threading.Event(), {}
        body = {"model": MODEL_NAME, "prompt": "hello", "max_tokens": 4000, "stream": True, "ignore_eos": True}
        t = threading.Thread(target=stream_until_end,
                             args=(first.url, "/v1/completions", body, headers, started, result))
        t.start()
        assert started.wait(30)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        t.join(30)
        killed_at = time.time()
        assert node.wait_for_log(r"session \w+ of head .* ended", 5), node.text()
        assert time.time() - killed_at < 5.0
        second = start_server(model_dir, [node], token_file)
        r = httpx.post(second.url + "/v1/completions", json={"model": MODEL_NAME, "prompt": "hi", "max_tokens": 4},
                       headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        assert node.proc.poll() is None
    finally:
        if second is not None:
            second.stop()
        node.stop()


@pytest.mark.timeout(60)
def test_cluster_check_reports_latency_bandwidth_and_what_they_mean(work, token_file):
    nodes = [Node(work, f"check{i}", token_file=token_file) for i in range(2)]
    try:
        r = run("cluster-check", *node_flags(nodes, token_file), "--iterations", "5", "--warmup", "1", timeout=60)
    finally:
        for n in nodes:
            n.stop()
    assert r.returncode == 0, r.stderr
    assert "ranks: 3" in r.stdout
    assert "8 KB" in r.stdout and "16 MB" in r.stdout
    assert "busbw" in r.stdout
    assert "TCP sockets" in r.stdout and "loopback" in r.stdout


@pytest.mark.timeout(60)
def test_cluster_errors_name_their_cause(work, token_file):
    node = Node(work, "strict", token_file=token_file)
    try:
        untied = os.path.join(GOLDEN_ROOT, "text_untied")  # 3 attention heads: 2 ranks cannot split them
        r = run("score", untied, "--ids", "1,2,3", *node_flags([node], token_file))
        assert r.returncode == 1 and "does not divide num_attention_heads = 3" in r.stderr, r.stderr
        r = run("run", untied, "--ids", "1,2,3", *node_flags([node], token_file), "--collective", "nccl")
        assert r.returncode == 2 and "nccl needs the CUDA backend" in r.stderr, r.stderr
        r = run("run", untied, "--ids", "1,2,3", "--nodes", "nohostport")
        assert r.returncode == 2 and "host:port" in r.stderr, r.stderr
    finally:
        node.stop()


@pytest.mark.timeout(60)
def test_tls_between_the_head_and_a_node(work, token_file):
    key, cert = work / "node.key", work / "node.crt"
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    node = Node(work, "tls", token_file=token_file, extra=["--tls-cert", str(cert), "--tls-key", str(key)])
    try:
        ok = run("cluster-check", *node_flags([node], token_file), "--tls-ca", cert, "--iterations", "2",
                 "--warmup", "0", timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert "ranks: 2" in ok.stdout
        plain = run("cluster-check", *node_flags([node], token_file), "--iterations", "2", timeout=60)
        assert plain.returncode == 1
        assert node.target in plain.stderr
    finally:
        node.stop()
