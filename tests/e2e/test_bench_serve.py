"""`sparkserve bench serve` end to end against a fake OpenAI-compatible streaming server written
here (http.server on 127.0.0.1, ephemeral port): /v1/models, /v1/completions and
/v1/chat/completions with SSE and usage, /tokenize (one token per whitespace word), /metrics.
Checks the counts, the console table and the saved JSON's vLLM key names and values."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")
MODEL = "fake-model"


class FakeOpenAI(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Set per server: fail_every (every Nth generation request gets HTTP 500), token_delay (s),
    # usage (send the usage chunk), requests (received bodies), auth (Authorization headers).

    def log_message(self, *args):
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data):
        raw = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if self.path == "/metrics":
            body = b"# TYPE fake_requests counter\nfake_requests_total 42\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        self._json(404, {"error": "not found"})

    def do_POST(self):
        srv = self.server
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize" and srv.tokenize:
            n = len(req["prompt"].split())
            return self._json(200, {"tokens": list(range(n)), "count": n, "max_model_len": 4096})
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self._json(404, {"error": "not found"})
        with srv.lock:
            srv.requests.append(req)
            srv.auth.append(self.headers.get("Authorization"))
            index = len(srv.requests)
        if srv.fail_every and index % srv.fail_every == 0:
            return self._json(500, {"error": {"message": f"injected failure {index}"}})
        prompt = req["messages"][0]["content"] if chat else req["prompt"]
        n_out = req["max_tokens"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(n_out):
            time.sleep(srv.token_delay)
            choice = {"index": 0, "delta": {"content": f" t{i}"}} if chat else {"index": 0, "text": f" t{i}"}
            self._chunk("data: " + json.dumps({"id": "x", "choices": [choice]}) + "\n\n")
        if srv.usage:
            usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n_out,
                     "total_tokens": len(prompt.split()) + n_out}
            self._chunk("data: " + json.dumps({"id": "x", "choices": [], "usage": usage}) + "\n\n")
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def fake_server():
    servers = []

    def start(fail_every=0, token_delay=0.002, usage=True, tokenize=True):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
        srv.daemon_threads = True
        srv.fail_every, srv.token_delay, srv.usage, srv.tokenize = fail_every, token_delay, usage, tokenize
        srv.requests, srv.auth, srv.lock = [], [], threading.Lock()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def bench(url, *args, timeout=60, env=None):
    cmd = [SPARKSERVE, "bench", "serve", "--url", url, "--no-progress", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_random_dataset_counts_and_saved_json(fake_server, tmp_path):
    srv, url = fake_server(fail_every=4)
    out = tmp_path / "r.json"
    r = bench(url, "--dataset", "random", "--num-prompts", "8", "--random-input-len", "12",
              "--random-output-len", "5", "--max-concurrency", "3", "--ignore-eos", "--api-key", "sekrit",
              "--seed", "3", "--goodput", "ttft:60000", "tpot:60000", "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    assert "============ Serving Benchmark Result ============" in r.stdout
    assert "Successful requests:                     6" in r.stdout
    assert "Failed requests:                         2" in r.stdout
    assert "Output tokens counted from:              usage" in r.stdout
    res = json.loads(out.read_text())
    keys = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
            "output_throughput", "total_token_throughput", "request_goodput", "max_output_tokens_per_s",
            "max_concurrent_requests", "input_lens", "output_lens", "ttfts", "itls", "errors", "date", "command",
            "model_id", "server_metrics"]
    keys += [f"{s}_{m}_ms" for s in ("mean", "median", "std", "p90", "p99") for m in ("ttft", "tpot", "itl", "e2el")]
    for k in keys:
        assert k in res, k
    assert res["completed"] == 6 and res["failed"] == 2
    assert res["model_id"] == MODEL  # discovered from /v1/models
    # Exact prompt lengths (the fake /tokenize counts words) and full outputs (ignore_eos).
    assert res["input_lens"] == [12] * 8
    assert res["total_input_tokens"] == 6 * 12
    assert res["total_output_tokens"] == 6 * 5
    assert sorted(res["output_lens"]) == [0, 0] + [5] * 6
    errs = [e for e in res["errors"] if e]
    assert len(errs) == 2 and all(e.startswith("HTTP 500: ") and "injected failure" in e for e in errs)
    assert all(len(gaps) == 4 for gaps, e in zip(res["itls"], res["errors"]) if not e)
    assert res["request_throughput"] == pytest.approx(6 / res["duration"])
    assert res["total_token_throughput"] == pytest.approx((72 + 30) / res["duration"])
    assert res["request_goodput"] == pytest.approx(res["request_throughput"])  # generous SLOs: all good
    # vLLM's peak concurrency counts requests active at any point of a one-second bucket.
    assert 1 <= res["max_concurrent_requests"] <= 6
    assert "fake_requests_total 42" in res["server_metrics"]
    assert "--max-concurrency 3" in res["command"]
    # What the server received: vLLM's request shape.
    assert len(srv.requests) == 8
    for body in srv.requests:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["ignore_eos"] is True and body["max_tokens"] == 5 and body["model"] == MODEL
        assert len(body["prompt"].split()) == 12
    assert srv.auth == ["Bearer sekrit"] * 8


def test_chat_endpoint_without_usage_counts_chunks(fake_server, tmp_path, ):
    srv, url = fake_server(usage=False)
    prompts = tmp_path / "p.txt"
    prompts.write_text("first prompt here\nsecond one\n")
    out = tmp_path / "r.json"
    r = bench(url, "--endpoint", "/v1/chat/completions", "--dataset", "prompts", "--dataset-path", str(prompts),
              "--num-prompts", "3", "--random-output-len", "4", "--warmup", "2", "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["completed"] == 3 and res["failed"] == 0
    assert res["output_token_source"] == "chunks"
    assert "Output tokens counted from:              chunks" in r.stdout
    assert res["output_lens"] == [4, 4, 4]
    assert res["input_lens"] == [3, 2, 3]  # lines cycle
    assert len(srv.requests) == 5  # 2 warm-up requests, excluded from the results
    # The 2 warm-up requests go out together, so the server may see either first.
    warm = [r["messages"] for r in srv.requests[:2]]
    assert [{"role": "user", "content": "first prompt here"}] in warm
    assert [{"role": "user", "content": "second one"}] in warm


def test_sharegpt_and_sweep(fake_server, tmp_path):
    _, url = fake_server()
    data = [{"conversations": [{"from": "human", "value": "w " * (5 + i)},
                               {"from": "gpt", "value": "a " * (6 + i)},
                               {"from": "human", "value": "ignored"}]} for i in range(6)]
    data.append({"conversations": [{"from": "human", "value": "too short"}, {"from": "gpt", "value": "x y z w"}]})
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "sweep.json"
    r = bench(url, "--dataset", "sharegpt", "--dataset-path", str(path), "--num-prompts", "4",
              "--sweep-concurrency", "1,2", "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("Serving Benchmark Result") == 2
    res = json.loads(out.read_text())
    assert res["sweep_concurrency"] == [1, 2]
    assert [run["max_concurrency"] for run in res["runs"]] == [1, 2]
    for run in res["runs"]:
        assert run["completed"] == 4
        for inp, outp in zip(run["input_lens"], run["output_lens"]):
            assert outp == inp + 1  # the gpt turn is one word longer; its length is max_tokens
        assert 1 <= run["max_concurrent_requests"] <= 4


def test_prefix_dataset_shares_an_exact_prefix(fake_server, tmp_path):
    srv, url = fake_server()
    out = tmp_path / "r.json"
    r = bench(url, "--dataset", "prefix", "--prefix-len", "10", "--num-prompts", "4", "--random-input-len", "6",
              "--random-output-len", "2", "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["input_lens"] == [16] * 4
    prompts = [b["prompt"].split() for b in srv.requests]
    assert all(p[:10] == prompts[0][:10] for p in prompts)
    assert len({" ".join(p[10:]) for p in prompts}) == 4  # suffixes differ


def test_local_tokenizer_when_server_has_no_tokenize_or_usage(fake_server, tmp_path):
    from tokenizers import Tokenizer  # the oracle for prompt lengths and output counts

    tok_dir = os.path.join("..", "shared", "fixtures", "qwen3-tokenizer")
    oracle = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    srv, url = fake_server(usage=False, tokenize=False)
    # Without /tokenize and --tokenizer, exact random lengths are impossible: a clear error.
    r = bench(url, "--dataset", "random", "--num-prompts", "2")
    assert r.returncode == 1 and "pass --tokenizer DIR" in r.stderr, r.stderr
    out = tmp_path / "r.json"
    r = bench(url, "--tokenizer", tok_dir, "--dataset", "random", "--num-prompts", "3", "--random-input-len", "20",
              "--random-output-len", "4", "--seed", "5", "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["input_lens"] == [20] * 3
    for body in srv.requests:
        assert len(oracle.encode(body["prompt"], add_special_tokens=False).ids) == 20
    assert res["output_token_source"] == "tokenizer"
    expected = len(oracle.encode(" t0 t1 t2 t3", add_special_tokens=False).ids)
    assert res["output_lens"] == [expected] * 3
    assert "Output tokens counted from:              tokenizer" in r.stdout


def test_plot_without_matplotlib_says_so_and_keeps_json(fake_server, tmp_path):
    _, url = fake_server()
    stub = tmp_path / "stub"
    (stub / "matplotlib").mkdir(parents=True)
    (stub / "matplotlib" / "__init__.py").write_text("raise ImportError('stubbed out by the test')\n")
    env = dict(os.environ, PYTHONPATH=str(stub), SPARKSERVE_PYTHON=sys.executable)
    plots = tmp_path / "plots"
    r = bench(url, "--dataset", "random", "--num-prompts", "2", "--random-input-len", "4", "--random-output-len",
              "2", "--plot", str(plots), env=env)
    assert r.returncode == 3
    assert "matplotlib is not installed" in r.stderr
    res = json.loads((plots / "result.json").read_text())
    assert res["completed"] == 2


def test_refused_server_and_bad_arguments(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}"
    r = bench(url, "--dataset", "random", "--num-prompts", "2")
    assert r.returncode == 1
    assert "GET /v1/models" not in r.stdout and "Connection refused" in r.stderr
    # With --model given, requests are sent and each is counted failed with its error.
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello world\n")
    out = tmp_path / "r.json"
    r = bench(url, "--model", "m", "--dataset", "prompts", "--dataset-path", str(prompts), "--num-prompts", "3",
              "--save-result", str(out))
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert res["completed"] == 0 and res["failed"] == 3
    assert all("connect: Connection refused" in e for e in res["errors"])
    assert res["server_metrics"] is None
    r = bench("https://127.0.0.1:1", "--model", "m")
    assert r.returncode == 1 and "https is not supported" in r.stderr
    r = bench(url, "--model", "m", "--goodput", "latency:5")
    assert r.returncode == 1 and "unknown metric 'latency'" in r.stderr
    r = bench(url, "--model", "m", "--dataset", "sharegpt")
    assert r.returncode == 1 and "needs --dataset-path" in r.stderr


def test_sigint_stops_sending_and_saves(fake_server, tmp_path):
    srv, url = fake_server(token_delay=0.05)
    out = tmp_path / "r.json"
    cmd = [SPARKSERVE, "bench", "serve", "--url", url, "--no-progress", "--dataset", "random", "--num-prompts", "40",
           "--random-input-len", "4", "--random-output-len", "6", "--max-concurrency", "1", "--save-result", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while len(srv.requests) < 2 and time.time() < deadline:
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=15)
    assert p.returncode == 130, stderr
    assert "interrupted" in stderr
    res = json.loads(out.read_text())
    assert res["interrupted"] is True
    assert 2 <= res["completed"] < 40 and res["failed"] == 0  # the in-flight one finished within the grace
    assert len(res["input_lens"]) == res["completed"]
    assert "Interrupted (partial results):" in stdout


def _serve_binary():
    """The binary whose `serve` runs the real server: $SPARKSERVE_SERVE_BIN or ours."""
    return os.environ.get("SPARKSERVE_SERVE_BIN", SPARKSERVE)


def test_against_sparkserve_serve(tmp_path):
    """Our own server (CPU backend, tiny demo model) under `bench serve`: every request completes, token
    counts come from its usage, and its /tokenize gives exact prompt lengths."""
    serve_bin = _serve_binary()
    top_help = subprocess.run([serve_bin, "--help"], capture_output=True, text=True).stdout
    has_serve = re.search(r"^\s+serve\s", top_help, re.M) is not None
    if not has_serve:
        pytest.skip("`sparkserve serve` is not in this build yet (branch agent/http)")
    model = tmp_path / "tiny"
    r = subprocess.run([SPARKSERVE, "demo-model", str(model), "--shape", "tiny"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    serve_help = subprocess.run([serve_bin, "serve", "--help"], capture_output=True, text=True).stdout
    spec = ["--spec", "mtp", "--spec-policy", "fixed"] if "--spec-policy" in serve_help else []
    proc = subprocess.Popen([serve_bin, "serve", str(model), "--host", "127.0.0.1", "--port", "0",
                             "--max-seq-len", "128", "--max-batch", "4", "--served-model-name", "tiny-demo", *spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://"), (line, proc.stderr.read() if proc.poll() else "")
        url = line.strip().split(" ", 2)[2]
        deadline = time.time() + 60  # /health answers 503 while the model loads
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as h:
                    if h.status == 200:
                        break
            except urllib.error.HTTPError as e:
                assert e.code == 503, e
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() else "timeout"
            time.sleep(0.05)
        out = tmp_path / "r.json"
        r = bench(url, "--dataset", "random", "--num-prompts", "6", "--random-input-len", "16",
                  "--random-output-len", "8", "--ignore-eos", "--max-concurrency", "3", "--request-timeout", "60",
                  "--save-result", str(out), timeout=120)
        assert r.returncode == 0, r.stderr
        res = json.loads(out.read_text())
        assert res["model_id"] == "tiny-demo"
        assert res["completed"] == 6 and res["failed"] == 0, res["errors"]
        assert res["output_token_source"] == "usage"
        assert res["input_lens"] == [16] * 6
        # ignore_eos reaches the engine, so every request generates exactly its max_tokens.
        assert res["output_lens"] == [8] * 6, res["output_lens"]
        assert res["total_output_tokens"] == sum(res["output_lens"])
        assert res["mean_ttft_ms"] > 0 and res["mean_e2el_ms"] >= res["mean_ttft_ms"]
        if spec:  # speculation as `vllm bench serve` reports it, from the server's counters over the run
            assert "Speculative Decoding" in r.stdout and "Acceptance length:" in r.stdout, r.stdout
            assert res["spec_decode_num_drafts"] > 0
            assert 0 <= res["spec_decode_acceptance_rate"] <= 100
            assert res["spec_decode_acceptance_length"] == pytest.approx(
                1 + res["spec_decode_accepted_tokens"] / res["spec_decode_num_drafts"])
            assert len(res["spec_decode_per_position_acceptance_rates"]) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_second_sigint_cancels_in_flight_requests(fake_server, tmp_path):
    srv, url = fake_server(token_delay=0.5)  # each request streams for 3 s
    out = tmp_path / "r.json"
    cmd = [SPARKSERVE, "bench", "serve", "--url", url, "--no-progress", "--dataset", "random", "--num-prompts", "10",
           "--random-input-len", "4", "--random-output-len", "6", "--max-concurrency", "2", "--save-result", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while len(srv.requests) < 2 and time.time() < deadline:
        time.sleep(0.02)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=15)
    assert time.time() - t0 < 2.0  # did not wait for the 3 s streams nor the grace period
    assert p.returncode == 130, stderr
    res = json.loads(out.read_text())
    assert res["interrupted"] is True and res["completed"] == 0 and res["failed"] == 2
    assert all(e == "interrupted (SIGINT) before the response ended" for e in res["errors"])
