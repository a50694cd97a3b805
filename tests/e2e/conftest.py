"""Fixtures for the HTTP e2e tests: a tiny servable model directory and a running `sparkserve serve`.

The model is the golden tiny Qwen3.5 (tests/golden/qwen35/text_tied, vocab 512, random weights);
its tokenizer is a byte-level BPE trained here with the `tokenizers` library to exactly 512 ids
(so every id the model can emit decodes to text), and its chat template is the real Qwen3.5 one
from ../shared/fixtures. The server runs on loopback on an ephemeral port, on the backend named by
SPARKSERVE_E2E_BACKEND (default cpu; tests/gpu/run.sh sets cuda) with SPARKSERVE_E2E_KV_DTYPE (default bf16)
and SPARKSERVE_E2E_STATE_DTYPE (the GDN state: default fp32). With SPARKSERVE_E2E_NODES=N the shared
server is tensor-parallel: it runs with N sparkserve-node daemons on loopback (TP = N + 1, a token), over
SPARKSERVE_E2E_COLLECTIVE (default: the backend's; tests/gpu/run.sh sets gloo: two ranks on one GPU).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import time

import httpx
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "..", "shared", "fixtures")
GOLDEN = os.path.join(REPO, "tests", "golden", "qwen35", "text_tied")
BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(REPO, "build"))
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")
API_KEY = "e2e-secret-key"
MODEL_NAME = "tiny-qwen"
# Which model runner the servers use: cpu (CI) or cuda (tests/gpu/run.sh on a GPU machine).
BACKEND = os.environ.get("SPARKSERVE_E2E_BACKEND", "cpu")
# The KV cache dtype of those runners: bf16, or fp8 (cuda only; tests/gpu/run.sh runs the suite with both).
KV_DTYPE = os.environ.get("SPARKSERVE_E2E_KV_DTYPE", "bf16")
# The GDN state dtype: fp32, or bf16 (cuda only; tests/gpu/run.sh runs the bf16 KV suite with it too).
STATE_DTYPE = os.environ.get("SPARKSERVE_E2E_STATE_DTYPE", "fp32")
RUNNER_FLAGS = ["--backend", BACKEND, "--kv-dtype", KV_DTYPE, "--state-dtype", STATE_DTYPE]
# sparkserve-node daemons behind the shared server (0: one machine).
NODES = int(os.environ.get("SPARKSERVE_E2E_NODES", "0"))
COLLECTIVE = os.environ.get("SPARKSERVE_E2E_COLLECTIVE", "")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
NOT_SPECIAL = {"<think>", "</think>", "<tool_call>", "</tool_call>"}  # as in the Qwen tokenizers


def _train_tokenizer(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    rng = random.Random(0)
    syll = ["ka", "to", "ri", "me", "su", "na", "lo", "pe", "vi", "da", "the", "and", "ing", "er", "on",
            "at", "hello", "world", "you", "are"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 3))) for _ in range(3000)]
    corpus = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    assert tok.get_vocab_size() == 512
    tok.save(path)
    j = json.load(open(path))
    for added in j["added_tokens"]:
        if added["content"] in NOT_SPECIAL:
            added["special"] = False
    json.dump(j, open(path, "w"), ensure_ascii=False)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_model")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(GOLDEN, name), d / name)
    _train_tokenizer(str(d / "tokenizer.json"))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    eos = [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]
    json.dump({"eos_token_id": eos}, open(d / "generation_config.json", "w"))
    json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
               "tokenizer_class": "Qwen2Tokenizer"}, open(d / "tokenizer_config.json", "w"))
    shutil.copy(os.path.join(FIXTURES, "qwen3_5-chat_template.jinja"), d / "chat_template.jinja")
    return d


@pytest.fixture(scope="session")
def scripted_models(tmp_path_factory):
    """family -> Script: the scripted tiny models (tests/e2e/scripted_model.py) whose greedy output
    is a chosen chain (reasoning, answers, tool calls), for the Qwen3.5 and the Qwen3 template."""
    from scripted_model import write_scripted_model
    return {f: write_scripted_model(str(tmp_path_factory.mktemp(f"scripted_{f}")), f) for f in ("qwen3_5", "qwen3")}


# When set, each server's stderr also goes to a file there (the GPU suite prints them on failure).
SERVER_LOG_DIR = os.environ.get("SPARKSERVE_E2E_LOG_DIR")


class Server:
    def __init__(self, model_dir, *extra, max_seq_len=256):
        self.log = None
        if SERVER_LOG_DIR:
            os.makedirs(SERVER_LOG_DIR, exist_ok=True)
            self.log = open(os.path.join(SERVER_LOG_DIR, f"serve-{time.time_ns()}.log"), "w+")
        self.proc = subprocess.Popen(
            [SPARKSERVE, "serve", str(model_dir), "--host", "127.0.0.1", "--port", "0", "--max-seq-len", str(max_seq_len),
             "--max-batch", "8", *RUNNER_FLAGS, "--served-model-name", MODEL_NAME, "--api-key", API_KEY, "--max-body-mb", "1",
             *extra],
            stdout=subprocess.PIPE, stderr=self.log or subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening on http://"), (line, self.read_stderr() if self.proc.poll() else "")
        self.url = line.strip().split(" ", 2)[2]
        self.port = int(self.url.rsplit(":", 1)[1])
        deadline = time.time() + 30
        while True:
            r = httpx.get(self.url + "/health")
            if r.status_code == 200:
                break
            assert r.status_code == 503, r.text
            assert self.proc.poll() is None, self.read_stderr()
            assert time.time() < deadline, "server did not become ready"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.stderr = self.read_stderr()
        return rc

    def read_stderr(self):
        if self.log is None:
            return self.proc.stderr.read()
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


@pytest.fixture(scope="session")
def server(model_dir, tmp_path_factory):
    if not os.path.exists(SPARKSERVE):
        pytest.fail(f"{SPARKSERVE} not built (set SPARKSERVE_BUILD_DIR)")
    nodes, extra = [], []
    if NODES > 0:
        from cluster_util import Node, node_flags, write_token
        work = tmp_path_factory.mktemp("nodes")
        token = write_token(work / "token", "e2e-cluster-token")
        nodes = [Node(work, f"node{i}", token_file=token) for i in range(NODES)]
        extra = node_flags(nodes, token) + (["--collective", COLLECTIVE] if COLLECTIVE else [])
    s = Server(model_dir, *extra)
    if NODES > 0:  # the suite below really runs on NODES + 1 ranks
        from cluster_util import metric
        assert metric(s.url, "sparkserve:tensor_parallel_ranks") == NODES + 1
        assert metric(s.url, "sparkserve:cluster_serving") == 1
    yield s
    assert s.stop() == 0, s.stderr
    for n in nodes:
        assert n.stop() == 0, n.text()


@pytest.fixture()
def openai_client(server):
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


@pytest.fixture()
def anthropic_client(server):
    import anthropic
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=60)
