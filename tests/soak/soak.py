"""Soak test of `sparkserve serve` on the CPU demo model: mixed clients under load, disconnects,
garbage, slowloris, oversized headers and a connection flood, then the books must balance.

    build/venv/bin/python tests/soak/soak.py --seconds 600        # the 10-minute run (bench/RESULTS.md)
    (tests/soak/test_soak.py runs it for 60 s in deploy/test.sh)

Load: 64 client threads send OpenAI chat and completions and Anthropic messages, streaming or not,
with n > 1, stop strings and tools; 20% of the streams hang up mid-way (some before their first
token, while queued). Abuse threads: a client sending garbage bodies (random bytes, broken and
deeply nested JSON), slowloris clients (headers a byte at a time), oversized headers, and floods
of connections past --max-connections. At the end the server must have: no request running or
waiting, every slot and KV page free, no HTTP request in flight but the /metrics one, no connection
or file descriptor left over, bounded RSS growth, no crash, greedy 200 responses equal to a quiet
server's; then a SIGTERM under load must let the running streams finish, refuse new requests
and exit 0.
Prints the figures: requests, errors by class, p50/p99 latency, RSS at start and end."""
import argparse
import collections
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import httpx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "demo"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
GREEDY_PROMPTS = ["hello there", "the quick brown fox", "count: one two", "a b c d e", "tell me a story", "zz top"]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.latencies = []
        self.greedy_mismatch = []

    def add(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def latency(self, s):
        with self.lock:
            self.latencies.append(s)


def metrics(url):
    text = httpx.get(url + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        m = re.match(r"^sparkserve:([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if m:
            key = m.group(1) + (m.group(2) or "")
            out[key] = float(m.group(3))
    return out


def gauge(ms, name):
    for k, v in ms.items():
        if k == name or k.startswith(name + "{"):
            return v
    raise KeyError(name)


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def drain_under_load(url, proc, stats):
    """SIGTERM while streams run: they must all finish (their end event), new requests get 503, and
    the server must exit 0 well within --drain-timeout."""
    results = []
    answered = threading.Semaphore(0)  # released when a stream's response has begun

    def stream(i):
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"drain {i}"}], "max_tokens": 64,
                "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
                answered.release()
                results.append((r.status_code, r.read().decode()))
        except httpx.HTTPError as e:
            answered.release()
            results.append((0, repr(e)))

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    # Every stream accepted before the signal (a request still on its way when it comes is refused,
    # rightly): before, the signal went once 4 ran, and prompts answered fast from the prefix cache
    # left some of the 8 unsent.
    deadline = time.time() + 30
    for _ in threads:
        answered.acquire(timeout=max(0.0, deadline - time.time()))
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        refused = httpx.post(url + "/v1/chat/completions", json=greedy_chat("late"), timeout=10).status_code
    except httpx.HTTPError:
        refused = "closed"  # the listener may already be gone
    for t in threads:
        t.join(60)
    rc = proc.wait(60)
    complete = sum(1 for code, text in results if code == 200 and text.rstrip().endswith("data: [DONE]"))
    return {"streams": len(threads), "complete": complete, "late_request": refused, "exit_code": rc,
            "seconds": round(time.time() - t0, 2)}


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def greedy_chat(prompt, stream=False):
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": 12, "temperature": 0,
            "ignore_eos": True, "stream": stream}


def chat_text(resp_json):
    return resp_json["choices"][0]["message"]["content"] or ""


def sse_text(body):
    out = ""
    for block in body.split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            j = json.loads(block[6:])
            for c in j.get("choices", []):
                out += (c.get("delta") or {}).get("content") or ""
    return out


def client_loop(url, deadline, rng, stats, baseline, headers):
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        while time.time() < deadline:
            kind = rng.random()
            t0 = time.time()
            try:
                if kind < 0.25:  # greedy, compared with the quiet server
                    p = rng.choice(GREEDY_PROMPTS)
                    stream = rng.random() < 0.5
                    if stream:
                        r = http.post("/v1/chat/completions", json=greedy_chat(p, True))
                        text = sse_text(r.text)
                    else:
                        r = http.post("/v1/chat/completions", json=greedy_chat(p))
                        text = chat_text(r.json()) if r.status_code == 200 else None
                    stats.add(f"status_{r.status_code}")
                    if r.status_code == 200:
                        stats.latency(time.time() - t0)
                        stats.add("greedy_checked")
                        if text != baseline[p]:
                            with stats.lock:
                                stats.greedy_mismatch.append((p, stream, text, baseline[p]))
                    continue
                body, path = random_request(rng)
                if body.get("stream") and rng.random() < 0.2:
                    disconnect_mid_stream(url, path, body, rng, headers, stats)
                    continue
                if body.get("stream"):
                    with http.stream("POST", path, json=body) as r:
                        data = r.read().decode()
                    stats.add(f"status_{r.status_code}")
                    if r.status_code == 200:
                        ok = data.rstrip().endswith("data: [DONE]") if path != "/v1/messages" else "message_stop" in data
                        stats.add("stream_complete" if ok else "stream_incomplete")
                else:
                    r = http.post(path, json=body)
                    stats.add(f"status_{r.status_code}")
                    if r.status_code == 200:
                        r.json()
                if r.status_code == 200:
                    stats.latency(time.time() - t0)
            except (httpx.HTTPError, json.JSONDecodeError, KeyError) as e:
                stats.add("client_error_" + type(e).__name__)


def random_request(rng):
    n = rng.choice([1, 1, 1, 2, 3])
    stream = rng.random() < 0.5
    stop = rng.choice([None, ["ing"], ["a", "the", "</"], "e"])
    max_tokens = rng.randint(4, 48)
    k = rng.random()
    words = " ".join(rng.choice(["hello", "world", "ka", "to", "the", "and", "you"]) for _ in range(rng.randint(1, 60)))
    if k < 0.45:
        body = {"model": MODEL, "messages": [{"role": "user", "content": words}], "max_tokens": max_tokens, "n": n,
                "stream": stream, "temperature": rng.choice([0, 0.7, 1.0])}
        if stop:
            body["stop"] = stop
        if rng.random() < 0.3:
            body["tools"] = TOOLS
        return body, "/v1/chat/completions"
    if k < 0.7:
        body = {"model": MODEL, "prompt": words, "max_tokens": max_tokens, "n": n, "stream": stream}
        if stop:
            body["stop"] = stop
        return body, "/v1/completions"
    body = {"model": MODEL, "max_tokens": max_tokens, "messages": [{"role": "user", "content": words}], "stream": stream}
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    if rng.random() < 0.3:
        body["tools"] = [{"name": "get_weather", "input_schema": TOOLS[0]["function"]["parameters"]}]
    return body, "/v1/messages"


def raw_request(path, body, headers):
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    for k, v in headers.items():
        head += f"{k}: {v}\r\n"
    return head.encode() + b"\r\n" + data


def disconnect_mid_stream(url, path, body, rng, headers, stats):
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    try:
        s.sendall(raw_request(path, body, headers))
        if rng.random() < 0.3:
            stats.add("disconnect_before_first_token")  # likely still queued
        else:
            got = b""
            want = rng.randint(200, 2000)
            while len(got) < want:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            stats.add("disconnect_mid_stream")
        if rng.random() < 0.5:  # a reset rather than a clean close
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError as e:
        stats.add("client_error_" + type(e).__name__)
    finally:
        s.close()


def garbage_loop(url, deadline, rng, stats, headers):
    bodies = [lambda: bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000))),
              lambda: b'{"messages": [' * rng.randint(1, 50),
              lambda: ("[" * 100000).encode(),
              lambda: json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2**63 - 1}).encode(),
              lambda: json.dumps({"messages": [{"role": "user", "content": "x"}], "stop": ["s"] * 100}).encode(),
              lambda: b'{"messages": [{"role": "user", "content": "x"}], "temperature": 1e400}',
              lambda: json.dumps({"messages": [{"role": 5}], "tools": [{"type": 7}]}).encode()]
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        while time.time() < deadline:
            path = rng.choice(["/v1/chat/completions", "/v1/messages", "/v1/completions", "/tokenize"])
            try:
                r = http.post(path, content=rng.choice(bodies)(), headers={"Content-Type": "application/json"})
                stats.add(f"garbage_{r.status_code}")
                # 503 is the overload answer (connection cap, full queue), given before the body is
                # read: any other 5xx to a broken body is a server fault.
                if r.status_code >= 500 and r.status_code != 503:
                    stats.add("garbage_5xx")
            except httpx.HTTPError as e:
                stats.add("garbage_client_error_" + type(e).__name__)
            time.sleep(0.02)


def slowloris_loop(url, deadline, rng, stats):
    host, port = url.split("//")[1].split(":")
    socks = []
    while time.time() < deadline:
        try:
            while len(socks) < 20:
                s = socket.create_connection((host, int(port)), timeout=5)
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            for s in list(socks):
                try:
                    s.sendall(b"X-a: b\r\n"[: rng.randint(1, 8)])
                except OSError:
                    socks.remove(s)
                    stats.add("slowloris_dropped_by_server")
            # Oversized headers: 431 expected.
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-big: " + b"a" * 70000 + b"\r\n\r\n")
            reply = s.recv(64)
            stats.add("oversized_header_" + (reply.split(b" ")[1].decode() if reply.startswith(b"HTTP/1.1") else "closed"))
            s.close()
        except OSError as e:
            stats.add("slowloris_error_" + type(e).__name__)
        time.sleep(1.0)
    for s in socks:
        s.close()


def flood_loop(url, deadline, max_connections, stats):
    host, port = url.split("//")[1].split(":")
    while time.time() < deadline:
        socks, refused = [], 0
        try:
            for _ in range(max_connections + 50):
                socks.append(socket.create_connection((host, int(port)), timeout=5))
            time.sleep(0.5)
            for s in socks[-50:]:
                s.settimeout(2)
                try:
                    if s.recv(64).startswith(b"HTTP/1.1 503"):
                        refused += 1
                except OSError:
                    pass
        except OSError as e:
            stats.add("flood_error_" + type(e).__name__)
        finally:
            for s in socks:
                s.close()
        stats.add("flood_rounds")
        stats.add("flood_refused_503", refused)
        time.sleep(5.0)


def run(build_dir, seconds, clients=64, seed=0, out=sys.stdout):
    sparkserve = os.path.join(build_dir, "bin", "sparkserve")
    work = tempfile.mkdtemp(prefix="soak-")
    model_dir = os.path.join(work, "demo")
    subprocess.run([sparkserve, "demo-model", model_dir, "--shape", "tiny"], check=True, capture_output=True)
    max_connections = 300
    log_path = os.path.join(work, "serve.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([sparkserve, "serve", model_dir, "--backend", "cpu", "--host", "127.0.0.1", "--port", "0",
                             "--max-seq-len", "512", "--max-batch", "16", "--max-queue", "64", "--served-model-name", MODEL,
                             "--max-connections", str(max_connections), "--drain-timeout", "30"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    assert line.startswith("listening on http://"), line
    url = line.strip().split(" ", 2)[2]
    t_ready = time.time() + 60
    while httpx.get(url + "/health").status_code != 200:
        assert time.time() < t_ready and proc.poll() is None, open(log_path).read()
        time.sleep(0.1)
    headers = {}
    # The quiet server's greedy answers.
    baseline = {}
    with httpx.Client(base_url=url, timeout=60) as http:
        for p in GREEDY_PROMPTS:
            baseline[p] = chat_text(http.post("/v1/chat/completions", json=greedy_chat(p)).json())
    rss_start = rss_mib(proc.pid)
    fds_start = open_fds(proc.pid)
    stats = Stats()
    deadline = time.time() + seconds
    rng = random.Random(seed)
    threads = [threading.Thread(target=client_loop, args=(url, deadline, random.Random(rng.random()), stats, baseline, headers))
               for _ in range(clients)]
    threads.append(threading.Thread(target=garbage_loop, args=(url, deadline, random.Random(1), stats, headers)))
    threads.append(threading.Thread(target=slowloris_loop, args=(url, deadline, random.Random(2), stats)))
    threads.append(threading.Thread(target=flood_loop, args=(url, deadline, max_connections, stats)))
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 300)
    elapsed = time.time() - t0
    # Let cancellations land, then the books.
    settle = time.time() + 30
    while True:
        ms = metrics(url)
        idle = (gauge(ms, "num_requests_running") == 0 and gauge(ms, "num_requests_waiting") == 0 and
                gauge(ms, "num_free_slots") == gauge(ms, "num_total_slots") and gauge(ms, "http_requests_in_flight") <= 1
                and gauge(ms, "http_connections") <= 1)
        if idle or time.time() > settle:
            break
        time.sleep(0.2)
    rss_end = rss_mib(proc.pid)
    fds_end = open_fds(proc.pid)
    alive = proc.poll() is None
    drain = drain_under_load(url, proc, stats) if alive else {}
    if not alive:
        proc.wait(60)
    rc = proc.returncode
    log.close()
    lat = sorted(stats.latencies)
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")
    c = stats.counts
    total = sum(v for k, v in c.items() if k.startswith("status_")) + c["disconnect_mid_stream"] + c["disconnect_before_first_token"]
    figures = {
        "seconds": round(elapsed, 1), "clients": clients, "requests": total,
        "by_status": {k[7:]: v for k, v in sorted(c.items()) if k.startswith("status_")},
        "disconnects": {"mid_stream": c["disconnect_mid_stream"], "before_first_token": c["disconnect_before_first_token"]},
        "garbage": {k[8:]: v for k, v in sorted(c.items()) if k.startswith("garbage_")},
        "abuse": {k: v for k, v in sorted(c.items()) if k.startswith(("slowloris", "oversized", "flood"))},
        "client_errors": {k[13:]: v for k, v in sorted(c.items()) if k.startswith("client_error_")},
        "streams": {"complete": c["stream_complete"], "incomplete": c["stream_incomplete"]},
        "greedy": {"checked": c["greedy_checked"], "mismatched": len(stats.greedy_mismatch)},
        "latency_s": {"p50": round(p(0.5), 3), "p99": round(p(0.99), 3)},
        "rss_mib": {"start": round(rss_start, 1), "end": round(rss_end, 1)},
        "open_fds": {"start": fds_start, "end": fds_end},
        "drain": drain,
        "end_metrics": {k: gauge(ms, k) for k in ("num_requests_running", "num_requests_waiting", "num_free_slots",
                                                  "num_total_slots", "kv_cache_usage_perc", "http_requests_in_flight",
                                                  "http_connections")},
        "server_alive_at_end": alive, "exit_code": rc,
    }
    print(json.dumps(figures, indent=1), file=out)
    problems = []
    if not alive or rc != 0:
        problems.append(f"the server crashed or did not exit cleanly (alive={alive}, rc={rc}); log {log_path}")
    em = figures["end_metrics"]
    if em["num_requests_running"] or em["num_requests_waiting"]:
        problems.append(f"requests left running/waiting: {em}")
    # kv_cache_usage_perc counts pages that live requests hold (pages only the prefix cache holds are
    # free for new requests, as vLLM counts them).
    if em["num_free_slots"] != em["num_total_slots"] or em["kv_cache_usage_perc"] != 0:
        problems.append(f"slots or KV pages leaked: {em}")
    if em["http_requests_in_flight"] > 1:
        problems.append(f"HTTP requests still in flight: {em}")
    if em["http_connections"] > 1 or fds_end > fds_start + 4:
        problems.append(f"connections or descriptors leaked: {em['http_connections']} open, fds {fds_start} -> {fds_end}")
    if alive and (drain["complete"] != drain["streams"] or drain["late_request"] not in (503, "closed")):
        problems.append(f"the drain under load went wrong: {drain}")
    if stats.greedy_mismatch:
        problems.append(f"greedy answers differ from the quiet server's: {stats.greedy_mismatch[:3]}")
    if c["garbage_5xx"]:
        problems.append(f"{c['garbage_5xx']} garbage requests got a 5xx")
    if c["stream_incomplete"]:
        problems.append(f"{c['stream_incomplete']} streams ended without their end event")
    if c["status_500"]:
        problems.append(f"{c['status_500']} requests got a 500")
    if rss_end > rss_start * 1.5 + 64:
        problems.append(f"RSS grew from {rss_start:.0f} to {rss_end:.0f} MiB")
    if c["greedy_checked"] == 0 or total < clients:
        problems.append("too little traffic to judge")
    return figures, problems, log_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--build-dir", default=os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(REPO, "build")))
    a = ap.parse_args()
    _, problems, log_path = run(a.build_dir, a.seconds, a.clients)
    for p in problems:
        print("PROBLEM:", p)
    print("soak: " + ("ok" if not problems else f"{len(problems)} problems (server log: {log_path})"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
