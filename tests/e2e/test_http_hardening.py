"""Hardening of `sparkserve serve` (issue 25) against the real binary: signals during the model load
and during a drain, streams cut by the drain timeout, file descriptors running out, and the
connection cap. Each test has a deadline; none sleeps longer than it must."""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time

import httpx

from conftest import API_KEY, MODEL_NAME, RUNNER_FLAGS, SPARKSERVE, Server

H = {"Authorization": f"Bearer {API_KEY}"}


def _wait_exit(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the server did not exit within {timeout} s")


def test_sigterm_during_model_load_exits_promptly(model_dir, tmp_path):
    # The tokenizer is a FIFO nobody writes: loading blocks in open() until the signal.
    d = tmp_path / "slow_model"
    shutil.copytree(model_dir, d)
    os.remove(d / "tokenizer.json")
    os.mkfifo(d / "tokenizer.json")
    proc = subprocess.Popen([SPARKSERVE, "serve", str(d), "--host", "127.0.0.1", "--port", "0", *RUNNER_FLAGS],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://"), line
        url = line.strip().split(" ", 2)[2]
        assert httpx.get(url + "/health").status_code == 503  # loading
        proc.send_signal(signal.SIGTERM)
        rc = _wait_exit(proc, 5)
        assert rc == 0, proc.stderr.read()
        assert "during the model load" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def _long_stream(url, body, out, started):
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=H, timeout=60) as r:
            text = ""
            for chunk in r.iter_text():
                started.set()
                text += chunk
            out.append((r.status_code, text))
    except httpx.HTTPError as e:
        out.append((0, repr(e)))


def test_second_signal_stops_at_once(model_dir):
    s = Server(model_dir, "--drain-timeout", "60", max_seq_len=4096)
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}], "max_tokens": 4000,
            "ignore_eos": True, "stream": True, "n": 8}
    out, started = [], threading.Event()
    t = threading.Thread(target=_long_stream, args=(s.url, body, out, started), daemon=True)
    t.start()
    try:
        assert started.wait(10)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert s.proc.poll() is None  # draining: the stream is still being served
        s.proc.send_signal(signal.SIGINT)
        rc = _wait_exit(s.proc, 3)
        assert rc != 0
        assert "second signal" in s.read_stderr()
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    t.join(10)


def test_drain_timeout_ends_streams_with_an_error_event(model_dir):
    s = Server(model_dir, "--drain-timeout", "1", max_seq_len=4096)
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "x"}], "max_tokens": 4000,
            "ignore_eos": True, "stream": True, "n": 8}
    out, started = [], threading.Event()
    t = threading.Thread(target=_long_stream, args=(s.url, body, out, started), daemon=True)
    t.start()
    anth = []

    def anthropic_stream():
        b = {"model": MODEL_NAME, "max_tokens": 4000, "messages": [{"role": "user", "content": "y"}], "stream": True}
        with httpx.stream("POST", s.url + "/v1/messages", json=b, headers=H, timeout=60) as r:
            anth.append(r.read().decode())

    t2 = threading.Thread(target=anthropic_stream, daemon=True)
    t2.start()
    try:
        assert started.wait(10)
        time.sleep(0.2)
        s.proc.send_signal(signal.SIGTERM)
        t.join(20)
        t2.join(20)
        assert _wait_exit(s.proc, 20) == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    status, text = out[0]
    assert status == 200, text
    events = [e for e in text.split("\n\n") if e.strip()]
    assert events[-1] == "data: [DONE]", events[-3:]
    err = json.loads(events[-2][len("data: "):])
    assert "shutting down" in err["error"]["message"], err
    assert anth and "event: error" in anth[0].strip().split("\n\n")[-1], anth


def _limit_fds(n):
    def set_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return set_limit


def test_running_out_of_file_descriptors_backs_off(model_dir):
    # A small descriptor limit, then more connections than it allows: accept fails with EMFILE.
    # The server must back off (a few log lines a second), not spin, and serve again afterwards.
    proc = subprocess.Popen(
        [SPARKSERVE, "serve", str(model_dir), "--host", "127.0.0.1", "--port", "0", "--max-seq-len", "256",
         *RUNNER_FLAGS, "--served-model-name", MODEL_NAME, "--max-connections", "1000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_limit_fds(64))
    socks = []
    try:
        url = proc.stdout.readline().strip().split(" ", 2)[2]
        port = int(url.rsplit(":", 1)[1])
        deadline = time.time() + 30
        while httpx.get(url + "/health").status_code != 200:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)
        cpu0 = _cpu_seconds(proc.pid)
        for _ in range(80):
            socks.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(2.0)
        cpu = _cpu_seconds(proc.pid) - cpu0
        for s in socks:
            s.close()
        socks.clear()
        time.sleep(0.3)
        r = httpx.get(url + "/health", timeout=10)
        assert r.status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert _wait_exit(proc, 20) == 0
        log = proc.stderr.read()
        # A spinning accept loop burns a core (about 2 s of CPU in 2 s) and logs thousands of lines.
        assert cpu < 1.0, f"{cpu:.2f} s of CPU while descriptors ran out"
        assert log.count("accept failed") < 100, log.count("accept failed")
    finally:
        for s in socks:
            s.close()
        if proc.poll() is None:
            proc.kill()


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_connections_past_the_cap_are_refused_clearly(model_dir):
    s = Server(model_dir, "--max-connections", "8")
    socks = []
    try:
        for _ in range(8):
            socks.append(socket.create_connection(("127.0.0.1", s.port)))
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", s.port))
        extra.settimeout(5)
        data = b""
        while True:
            chunk = extra.recv(4096)
            if not chunk:
                break
            data += chunk
        extra.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), data
        assert b"too many connections" in body and b"--max-connections" in body, data
        for c in socks:
            c.close()
        socks.clear()
        time.sleep(0.2)
        r = httpx.get(s.url + "/health")
        assert r.status_code == 200
    finally:
        for c in socks:
            c.close()
        assert s.stop() == 0, s.stderr
