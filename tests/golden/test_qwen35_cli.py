"""`sparkserve score` and `sparkserve run` on the Qwen3.5 golden fixtures (CPU reference backend).

Expected values come from tests/golden/qwen35/*/reference.safetensors, written by Hugging Face
transformers 5.17 (tests/golden/make_qwen35_golden.py).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "qwen35")
CONFIGS = ["text_tied", "text_untied", "vl_tied", "vl_untied", "text_nosection", "vl_nosection"]
TOKENIZER_DIR = os.path.join(ROOT, "..", "shared", "fixtures", "qwen3-tokenizer")


def binary():
    path = os.path.join(os.environ.get("SPARKSERVE_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "sparkserve")
    if not os.path.exists(path):
        pytest.fail(f"{path} not built")
    return path


def sparkserve(*args):
    return subprocess.run([binary(), *args], capture_output=True, text=True, timeout=60)


def ids_arg(ids):
    return ",".join(str(int(i)) for i in ids)


@pytest.mark.parametrize("name", CONFIGS)
def test_score_npy_matches_transformers(name, tmp_path):
    ref = load_file(os.path.join(GOLDEN, name, "reference.safetensors"))
    out = tmp_path / "logits.npy"
    r = sparkserve("score", os.path.join(GOLDEN, name), "--ids", ids_arg(ref["ids"]), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    logits = np.load(out)
    assert logits.dtype == np.float32 and logits.shape == ref["logits"].shape
    err = np.abs(logits - ref["logits"]).max() / np.abs(ref["logits"]).max()
    assert err <= 1e-4


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_score_backend_matches_transformers(backend, tmp_path):
    """--backend: cpu is the default reference; auto is the CPU in a build or on a machine without a GPU
    (on a GPU machine it checks the GPU's logits against transformers' to the same bound)."""
    ref = load_file(os.path.join(GOLDEN, "text_untied", "reference.safetensors"))
    out = tmp_path / "logits.npy"
    r = sparkserve("score", os.path.join(GOLDEN, "text_untied"), "--ids", ids_arg(ref["ids"]), "--out", str(out),
                   "--backend", backend)
    assert r.returncode == 0, r.stderr
    err = np.abs(np.load(out) - ref["logits"]).max() / np.abs(ref["logits"]).max()
    assert err <= (1e-4 if backend == "cpu" else 2e-2)


def test_score_json_on_stdout():
    ref = load_file(os.path.join(GOLDEN, "vl_tied", "reference.safetensors"))
    ids = ref["ids"][:5]
    r = sparkserve("score", os.path.join(GOLDEN, "vl_tied"), "--ids", ids_arg(ids))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["ids"] == [int(i) for i in ids]
    logits = np.array(j["logits"], dtype=np.float32)
    assert logits.shape == (5, 512)
    # Causal: the first 5 positions of the full prompt's logits.
    assert np.abs(logits - ref["logits"][:5]).max() <= 1e-4 * np.abs(ref["logits"]).max()


@pytest.mark.parametrize("name", CONFIGS)
def test_run_greedy_matches_transformers(name):
    ref = load_file(os.path.join(GOLDEN, name, "reference.safetensors"))
    n = len(ref["greedy"])
    r = sparkserve("run", os.path.join(GOLDEN, name), "--ids", ids_arg(ref["ids"]), "--max-new", str(n),
                   "--temperature", "0", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert {k: j[k] for k in ("ids", "text")} == {"ids": [int(i) for i in ref["greedy"]], "text": None}
    # The fixture has an MTP block: `run` speculates by default (greedy: the same ids).
    assert 0 <= j["spec"]["accepted"] <= j["spec"]["drafted"]


def test_run_stops_on_generation_config_eos(tmp_path):
    ref = load_file(os.path.join(GOLDEN, "text_untied", "reference.safetensors"))
    model = tmp_path / "model"
    shutil.copytree(os.path.join(GOLDEN, "text_untied"), model)
    # Make the third greedy token an eos id (generation_config.json's list wins over config.json).
    gen = json.loads((model / "generation_config.json").read_text())
    gen["eos_token_id"] = [int(ref["greedy"][2]), 511]
    (model / "generation_config.json").write_text(json.dumps(gen))
    args = ["run", str(model), "--ids", ids_arg(ref["ids"]), "--max-new", "10", "--json"]
    r = sparkserve(*args)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ids"] == [int(i) for i in ref["greedy"][:3]]
    r = sparkserve(*args, "--ignore-eos")
    assert len(json.loads(r.stdout)["ids"]) == 10


def test_run_sampling_is_reproducible_with_a_seed():
    d = os.path.join(GOLDEN, "text_tied")
    a = sparkserve("run", d, "--ids", "1,2,3", "--max-new", "8", "--temperature", "1.0", "--seed", "7", "--json")
    b = sparkserve("run", d, "--ids", "1,2,3", "--max-new", "8", "--temperature", "1.0", "--seed", "7", "--json")
    assert a.returncode == 0 and b.returncode == 0
    # The same tokens (how many drafts the auto policy tried depends on measured step times).
    assert json.loads(a.stdout)["ids"] == json.loads(b.stdout)["ids"]
    assert len(json.loads(a.stdout)["ids"]) == 8


@pytest.mark.parametrize("args,needle", [
    (["score", "{m}", "--ids", "1,x"], "not a non-negative integer"),
    (["score", "{m}", "--ids", "1,99999"], "outside the vocabulary"),
    (["score", "{m}"], "give --ids or --text"),
    (["score", "{m}", "--text", "hello"], "has no tokenizer.json"),
    (["run", "{m}", "--prompt", "hello"], "has no tokenizer.json"),
    (["score", "{m}", "--ids", "1", "--text", "hello"], "excludes"),
    (["score", "/nonexistent-model-dir", "--ids", "1"], "config.json"),
])
def test_bad_input_is_a_clear_error(args, needle):
    m = os.path.join(GOLDEN, "text_tied")
    r = sparkserve(*[a.format(m=m) for a in args])
    assert r.returncode != 0
    assert r.stdout == ""
    assert needle in r.stderr


@pytest.fixture
def model_with_tokenizer(tmp_path):
    """text_tied plus the real Qwen3 tokenizer (ids of the texts below stay inside its 512-token vocab)."""
    d = tmp_path / "model"
    shutil.copytree(os.path.join(GOLDEN, "text_tied"), d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER_DIR, f), d / f)
    return d


def test_score_text_equals_score_of_the_oracle_ids(model_with_tokenizer, tmp_path):
    oracle = Tokenizer.from_file(str(model_with_tokenizer / "tokenizer.json"))
    text = "a, b. c! in the"
    ids = oracle.encode(text).ids
    assert max(ids) < 512
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    r1 = sparkserve("score", str(model_with_tokenizer), "--text", text, "--out", str(a))
    r2 = sparkserve("score", str(model_with_tokenizer), "--ids", ids_arg(ids), "--out", str(b))
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    assert np.load(a).shape == (len(ids), 512)
    assert np.array_equal(np.load(a), np.load(b))


def test_run_prompt_prints_ids_and_their_decoded_text(model_with_tokenizer):
    oracle = Tokenizer.from_file(str(model_with_tokenizer / "tokenizer.json"))
    r = sparkserve("run", str(model_with_tokenizer), "--prompt", "in the", "--max-new", "6", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # The same ids from a directory without a tokenizer (text null there).
    ref = sparkserve("run", os.path.join(GOLDEN, "text_tied"), "--ids", ids_arg(oracle.encode("in the").ids),
                     "--max-new", "6", "--ignore-eos", "--json")
    j = json.loads(ref.stdout)
    assert {k: j[k] for k in ("ids", "text")} == {"ids": out["ids"], "text": None}
    assert out["text"] == oracle.decode(out["ids"], skip_special_tokens=True)
