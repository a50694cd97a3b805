"""Runner flags that only the CUDA backend takes are refused on the CPU backend with a message
naming what to change, by every command that loads a model (run, serve, bench engine), and
values outside a flag's set are refused by the parser."""
import os
import subprocess

import pytest

BUILD_DIR = os.environ.get("SPARKSERVE_BUILD_DIR", "build")
SPARKSERVE = os.path.join(BUILD_DIR, "bin", "sparkserve")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("runner_flags") / "tiny"
    subprocess.run([SPARKSERVE, "demo-model", str(d), "--shape", "tiny", "--quiet"], check=True,
                   capture_output=True, timeout=120)
    return d


COMMANDS = {
    "run": lambda m: ["run", str(m), "--ids", "1,2,3", "--max-new", "2", "--backend", "cpu"],
    "serve": lambda m: ["serve", str(m), "--host", "127.0.0.1", "--port", "0", "--backend", "cpu"],
    "bench": lambda m: ["bench", "engine", str(m), "--backend", "cpu", "--steps", "1", "--warmup", "0",
                        "--repeats", "1"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_fp8_kv_cache_needs_cuda(tiny_model, command):
    r = subprocess.run([SPARKSERVE, *COMMANDS[command](tiny_model), "--kv-dtype", "fp8"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "fp8 KV cache needs the CUDA backend" in r.stderr, r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bf16_state_needs_cuda(tiny_model, command):
    r = subprocess.run([SPARKSERVE, *COMMANDS[command](tiny_model), "--state-dtype", "bf16"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "bf16 GDN state needs the CUDA backend" in r.stderr, r.stderr


def test_w4a4_prefill_needs_cuda(tiny_model):
    r = subprocess.run([SPARKSERVE, *COMMANDS["serve"](tiny_model), "--w4a4-prefill"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert "--w4a4-prefill needs the CUDA backend" in r.stderr, r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unknown_kv_dtype_is_refused_by_the_parser(tiny_model, command):
    r = subprocess.run([SPARKSERVE, *COMMANDS[command](tiny_model), "--kv-dtype", "fp16"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "--kv-dtype" in r.stderr and "fp16" in r.stderr, r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unknown_state_dtype_is_refused_by_the_parser(tiny_model, command):
    r = subprocess.run([SPARKSERVE, *COMMANDS[command](tiny_model), "--state-dtype", "fp16"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "--state-dtype" in r.stderr and "fp16" in r.stderr, r.stderr


def test_fp32_state_is_the_cpu_default(tiny_model):
    r = subprocess.run([SPARKSERVE, *COMMANDS["run"](tiny_model), "--state-dtype", "fp32"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_bf16_kv_cache_is_the_cpu_default(tiny_model):
    r = subprocess.run([SPARKSERVE, *COMMANDS["run"](tiny_model), "--kv-dtype", "bf16"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
