"""Helpers for tests that run `sparkserve-node` daemons on loopback beside a head: start one
(stderr to a file, the port read from its "listening on" line), kill it, restart it on its port
with its cache; and read the head's /metrics counters."""
import os
import re
import signal
import subprocess
import time

import httpx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(REPO, "build"))
NODE_BIN = os.path.join(BUILD_DIR, "bin", "sparkserve-node")


def write_token(path, token):
    with open(path, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return str(path)


class Node:
    """One sparkserve-node on 127.0.0.1 (a fixed port once started, so that it can come back on it)."""

    def __init__(self, workdir, name, token_file=None, port=0, extra=()):
        self.workdir = str(workdir)
        self.name = name
        self.cache_dir = os.path.join(self.workdir, f"{name}-cache")
        self.token_file = token_file
        self.extra = list(extra)
        self.port = port
        self.proc = None
        self.logs = []
        self.start()

    def start(self, timeout=20):
        log_path = os.path.join(self.workdir, f"{self.name}-{len(self.logs)}.log")
        self.logs.append(log_path)
        args = [NODE_BIN, "--host", "127.0.0.1", "--port", str(self.port), "--cache-dir", self.cache_dir, *self.extra]
        if self.token_file:
            args += ["--token-file", self.token_file]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                return
            assert self.proc.poll() is None, self.text()
            time.sleep(0.02)
        raise AssertionError(f"node {self.name} did not start: {self.text()}")

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def text(self, all_runs=False):
        paths = self.logs if all_runs else self.logs[-1:]
        return "".join(open(p).read() for p in paths)

    def wait_for_log(self, pattern, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.text()):
                return True
            time.sleep(0.05)
        return False

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode if self.proc else None


def node_flags(nodes, token_file=None):
    flags = ["--nodes", ",".join(n.target for n in nodes)]
    if token_file:
        flags += ["--token-file", token_file]
    return flags


def metric(url, name):
    """The value of a `sparkserve:` metric (first sample) on the server at `url`."""
    text = httpx.get(url + "/metrics").text
    m = re.search(r"^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
    assert m, f"{name} not on /metrics:\n{text}"
    return float(m.group(1))
