"""GGUF input (quant/gguf_*.h): llama.cpp qwen35 files made by tests/e2e/gguf_convert.py with the `gguf`
package's writer from a random Qwen3.5 in Hugging Face layout.

Oracles: the `gguf` package's own dequantiser (gguf_convert.py oracle: the HF directory holding the
GGUF's weights as gguf decodes them, llama.cpp's value transforms undone) -- our logits on the GGUF
must equal our logits on that directory; the Hugging Face `tokenizers` library on the fixture's
tokenizer.json -- the tokenizer we rebuild from tokenizer.ggml.* must give its ids.
"""
import json
import os
import subprocess
import sys

import httpx
import pytest

from conftest import API_KEY, FIXTURES, MODEL_NAME, SPARKSERVE, Server

gguf = pytest.importorskip("gguf")
HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT = [sys.executable, os.path.join(HERE, "gguf_convert.py")]
QWEN3_TOK = os.path.join(FIXTURES, "qwen3-tokenizer")


def sparkserve(*args, check=True, timeout=300):
    p = subprocess.run([SPARKSERVE, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, (args, p.stderr)
    return p


def script(*args):
    p = subprocess.run([*CONVERT, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


@pytest.fixture(scope="module")
def hf_dir(model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf_hf") / "m"
    script("random", d, "--tokenizer-dir", model_dir)
    for f in ("generation_config.json", "chat_template.jinja"):  # the converter reads the template file
        open(d / f, "wb").write(open(model_dir / f, "rb").read())
    return d


@pytest.fixture(scope="module")
def converted(hf_dir, tmp_path_factory):
    """type -> (gguf file, oracle directory)"""
    out = {}
    for t in ("bf16", "q8_0", "q4_k", "q6_k"):
        d = tmp_path_factory.mktemp(f"gguf_{t}")
        f = d / f"model-{t}.gguf"
        script("convert", hf_dir, f, "--type", t)
        script("oracle", f, hf_dir, d / "oracle")
        out[t] = (f, d / "oracle")
    return out


def logits(target, ids="1,5,9,200,17,3,88"):
    return json.loads(sparkserve("score", target, "--ids", ids).stdout)["logits"]


@pytest.mark.parametrize("t", ["bf16", "q8_0", "q4_k", "q6_k"])
def test_logits_equal_the_gguf_package_dequantised(converted, t):
    f, oracle = converted[t]
    got, want = logits(f), logits(oracle)
    assert len(got) == len(want)
    worst = max(abs(a - b) for ra, rb in zip(got, want) for a, b in zip(ra, rb))
    # Same bf16 weights; A_log = log(-x) may differ in the last f32 bit between libm and numpy.
    assert worst <= 1e-4, worst


def test_quantised_types_are_really_quantised(converted):
    r = gguf.GGUFReader(str(converted["q4_k"][0]))
    types = {t.tensor_type.name for t in r.tensors}
    assert "Q4_K" in types, types
    r = gguf.GGUFReader(str(converted["q6_k"][0]))
    assert "Q6_K" in {t.tensor_type.name for t in r.tensors}


def test_run_inspect_quantize_serve_on_gguf(converted, tmp_path):
    f, oracle = converted["q8_0"]
    run = ["--ids", "1,2,3", "--max-new", "6", "--json"]
    assert json.loads(sparkserve("run", f, *run).stdout)["ids"] == json.loads(sparkserve("run", oracle, *run).stdout)["ids"]
    # The MTP block is there: greedy output with MTP drafting equals plain decoding.
    assert json.loads(sparkserve("run", f, *run, "--spec", "mtp").stdout)["ids"] == json.loads(sparkserve("run", oracle, *run).stdout)["ids"]
    j = json.loads(sparkserve("inspect", f, "--json").stdout)
    assert j["gguf"]["load"] == "dequantised to bf16" and j["model_dir"] == str(f)
    j = json.loads(sparkserve("inspect", f, "--json", "--requantize", "nvfp4-mixed").stdout)
    assert j["gguf"]["load"].startswith("requantised nvfp4-mixed"), j["gguf"]
    assert "nvfp4" in json.dumps(j)
    out = tmp_path / "q"
    sparkserve("quantize", f, out, "--no-calib", "--no-eval", "--quiet", "--threads", "1")
    assert "quantization_config" in json.load(open(out / "config.json"))
    sparkserve("run", out, "--ids", "1,2", "--max-new", "2")
    s = Server(f)
    try:
        r = httpx.post(s.url + "/v1/completions", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60,
                       json={"model": MODEL_NAME, "prompt": "hello", "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
    finally:
        assert s.stop() == 0, s.stderr


STRINGS = ["Hello world", "  leading spaces and\ttabs\n\nnew lines", "numbers 1234567 and 3.14159",
           "Ünïcödé — 你好，世界！ こんにちは 🙂", "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>",
           "don't we'll they're I'M", "code: def f(x):\n    return x**2  # comment", "a" * 50]


def test_tokenizer_from_gguf_metadata_matches_tokenizer_json(hf_dir, tmp_path):
    from tokenizers import Tokenizer
    f = tmp_path / "tok.gguf"
    script("convert", hf_dir, f, "--type", "bf16", "--tokenizer-dir", QWEN3_TOK)
    lines = tmp_path / "s.jsonl"
    lines.write_text("".join(json.dumps(s) + "\n" for s in STRINGS))
    got = [json.loads(x) for x in sparkserve("tokenize", f, "--file", lines).stdout.splitlines()]
    tok = Tokenizer.from_file(os.path.join(QWEN3_TOK, "tokenizer.json"))
    assert got == [tok.encode(s).ids for s in STRINGS]
    # The chat template comes from tokenizer.chat_template.
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}))
    want = sparkserve("template", QWEN3_TOK, "--request", req).stdout
    assert sparkserve("template", f, "--request", req).stdout == want


def test_damaged_gguf_files_are_refused(converted, tmp_path):
    f = converted["q4_k"][0]
    data = open(f, "rb").read()
    cases = {"truncated.gguf": (data[:len(data) - 1000], "run past"), "header_cut.gguf": (data[:100], "truncated"),
             "magic.gguf": (b"GGUF" + b"\xff" * 60, "version"),
             "count.gguf": (data[:8] + (2**62).to_bytes(8, "little") + data[16:], "cannot fit")}
    for name, (blob, message) in cases.items():
        p = tmp_path / name
        p.write_bytes(blob)
        r = sparkserve("run", p, "--ids", "1", "--max-new", "1", check=False, timeout=60)
        assert r.returncode != 0 and message in r.stderr, (name, r.stderr)
