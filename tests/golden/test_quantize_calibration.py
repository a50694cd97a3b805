"""`sparkserve quantize` calibration from the outside, on the tiny demo model: the calibrated output
carries an input_global_scale on every NVFP4 module (modules reading the same input share it), k/v
scales with kv_cache_scheme, and the held-out KL / top-1 line; --calib text and JSONL files,
--no-calib, --no-eval, a model without a tokenizer (random ids, warned) and a bad --calib file."""
import json
import math
import os
import pathlib
import shutil
import subprocess

import pytest
from safetensors import safe_open

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("SPARKSERVE_BUILD_DIR", REPO / "build")) / "bin" / "sparkserve"


def run(*args):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("calib") / "src"
    r = run("demo-model", d, "--shape", "tiny", "--seed", "11", "--quiet")
    assert r.returncode == 0, r.stderr
    return d


def tensors(d):
    # Name -> array for the f32 tensors (numpy has no float8), None for the others.
    out = {}
    with safe_open(str(d / "model.safetensors"), "numpy") as f:
        for k in f.keys():
            out[k] = f.get_tensor(k) if f.get_slice(k).get_dtype() == "F32" else None
    return out


def summary(stdout, prefix):
    lines = [l for l in stdout.splitlines() if l.startswith(prefix)]
    return lines[0] if lines else None


def test_calibrated_output_has_w4a4_and_kv_scales(src, tmp_path):
    out = tmp_path / "q"
    r = run("quantize", src, out, "--quiet", "--calib-max-tokens", "128")
    assert r.returncode == 0, r.stderr
    assert "calibration not run" not in r.stderr
    line = summary(r.stdout, "calibration:")
    assert line and "8 samples" in line and "W4A4) on 16 NVFP4 modules" in line and "on 2 attention layers" in line
    for prefix in ("eval vs source (weights only):", "eval vs source with quantised activations"):
        ev = summary(r.stdout, prefix)
        assert ev, prefix
        kl = float(ev.split("mean KL ")[1].split()[0])
        top1 = float(ev.split("top-1 agreement ")[1].split("%")[0])
        assert 0 < kl < 0.05 and top1 >= 90.0, ev
    assert "2 held-out samples" in r.stdout and "NVFP4 inputs of 16 modules, FP8 KV of 2 layers" in r.stdout
    qc = json.loads((out / "config.json").read_text())["quantization_config"]
    groups = [g for g in qc["config_groups"].values() if g["format"] == "nvfp4-pack-quantized"]
    assert groups[0]["input_activations"]["strategy"] == "tensor_group"
    assert qc["kv_cache_scheme"]["num_bits"] == 8 and qc["kv_cache_scheme"]["type"] == "float"
    t = tensors(out)
    nvfp4 = sorted(k[: -len(".weight_packed")] for k in t if k.endswith(".weight_packed"))
    assert len(nvfp4) == 16
    for m in nvfp4:
        gs = float(t[m + ".input_global_scale"][0])
        assert math.isfinite(gs) and gs > 0, m
    # Modules fed the same activations get the same scale.
    for layer in range(4):
        p = f"model.layers.{layer}."
        assert t[p + "mlp.gate_proj.input_global_scale"] == t[p + "mlp.up_proj.input_global_scale"]
    a = "model.layers.3.self_attn."
    assert t[a + "q_proj.input_global_scale"] == t[a + "k_proj.input_global_scale"] == t[a + "v_proj.input_global_scale"]
    for attn in ("model.layers.3.self_attn", "mtp.layers.0.self_attn"):
        for kv in ("k_scale", "v_scale"):
            v = float(t[f"{attn}.{kv}"][0])
            assert math.isfinite(v) and v > 0


def test_calib_text_and_jsonl_files(src, tmp_path):
    text = tmp_path / "c.txt"
    text.write_text("Paragraph one about the sea.\n\nParagraph two, about mountains.\n\nThree.\n\nFour.\n")
    r = run("quantize", src, tmp_path / "qt", "--quiet", "--calib", text, "--calib-samples", "3", "--eval-samples", "1")
    assert r.returncode == 0, r.stderr
    assert "calibration: 3 samples" in r.stdout and "1 held-out samples" in r.stdout
    chats = tmp_path / "c.jsonl"
    chats.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"question {i}"},
                                                        {"role": "assistant", "content": f"answer {i}"}]})
                               for i in range(4)) + "\n")
    r = run("quantize", src, tmp_path / "qj", "--quiet", "--calib", chats, "--calib-samples", "3", "--eval-samples", "1")
    assert r.returncode == 0, r.stderr
    assert "calibration: 3 samples" in r.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    r = run("quantize", src, tmp_path / "qb", "--quiet", "--calib", bad)
    assert r.returncode == 1 and "bad.jsonl:1:" in r.stderr
    assert not (tmp_path / "qb").exists()


def test_no_calib_and_no_eval(src, tmp_path):
    r = run("quantize", src, tmp_path / "q", "--quiet", "--no-calib", "--no-eval")
    assert r.returncode == 0, r.stderr
    assert "--no-calib" in r.stderr and "weight-only" in r.stderr
    assert "calibration: not run" in r.stdout and summary(r.stdout, "eval vs source") is None
    t = tensors(tmp_path / "q")
    assert not any(k.endswith((".input_global_scale", ".k_scale", ".v_scale")) for k in t)
    assert json.loads((tmp_path / "q/config.json").read_text())["quantization_config"]["kv_cache_scheme"] is None


def test_no_tokenizer_calibrates_on_random_ids_with_a_warning(src, tmp_path):
    d = tmp_path / "notok"
    shutil.copytree(src, d)
    (d / "tokenizer.json").unlink()
    r = run("quantize", d, tmp_path / "q", "--quiet", "--calib-samples", "2")
    assert r.returncode == 0, r.stderr
    assert "random token ids" in r.stderr
    assert "random ids: no tokenizer" in r.stdout
